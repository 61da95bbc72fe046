# Warnings, sanitizers and the helpers every module uses. Module boundaries (cmake/modules.json)
# are checked by the ctest `module_boundaries` over the link graph written here.

include(GoogleTest)  # gtest_discover_tests

set(MUSTER_WARNINGS -Wall -Wextra -Wpedantic -Wnon-virtual-dtor -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND MUSTER_WARNINGS -Wshadow=local)  # GCC's spelling; clang (the fuzz preset) has none
endif()
if(MUSTER_WERROR)
  list(APPEND MUSTER_WARNINGS -Werror)
endif()

if(MUSTER_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(MUSTER_HARDEN AND NOT MUSTER_SANITIZE AND NOT MUSTER_FUZZ)
  # The daemons run as root on every node: the flags dpkg-buildflags gives Debian's own packages.
  # _FORTIFY_SOURCE needs optimisation: only the optimised configurations have it.
  add_compile_options(-fstack-protector-strong -fstack-clash-protection
                      "$<$<CONFIG:Release,RelWithDebInfo,MinSizeRel>:-D_FORTIFY_SOURCE=2>")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    add_compile_options(-fcf-protection)
  endif()
  add_link_options(-Wl,-z,relro -Wl,-z,now)
endif()
if(MUSTER_FUZZ)
  # Coverage for libFuzzer in every library the targets link; the targets add the fuzzer itself.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

# muster_add_library(NAME SOURCES ... DEPS ... PRIVATE_DEPS ...): one static library per module.
# Other modules see only include/ (its public headers); the module's own directory, with its
# private headers, is visible to the module alone (and to its tests, see muster_add_test).
function(muster_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                     PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${MUSTER_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# muster_add_test(NAME SOURCES ... DEPS ... LABELS ... [PRIVATE_OF dir] [TIMEOUT s]): a GoogleTest
# binary whose tests are ctest entries of their own (NAME.Suite.Test, found when ctest runs), so
# a GTEST_SKIP shows as skipped and a label says what each needs; TIMEOUT is per test.
# PRIVATE_OF names the module directory (src/agent) whose private headers the test may include:
# a module's tests may see its own.
function(muster_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;PRIVATE_OF" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  if(ARG_PRIVATE_OF)
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/${ARG_PRIVATE_OF})
  endif()
  target_compile_options(${name} PRIVATE ${MUSTER_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name} TEST_PREFIX "${name}." DISCOVERY_MODE PRE_TEST
                       DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()

# Every target of the build, in every directory below `dir`.
function(muster_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    muster_collect_targets(${sub} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Writes the link graph that scripts/check-boundaries.py reads: one line per target, its name, a
# tab, and everything it links or passes on to what links it (its link libraries, public,
# private and interface, and link options such as -lfoo) separated by ';'. Call last.
function(muster_write_link_graph)
  muster_collect_targets(${PROJECT_SOURCE_DIR} targets)
  set(content "")
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|EXECUTABLE|OBJECT_LIBRARY|INTERFACE_LIBRARY)$")
      continue()
    endif()
    set(libs "")
    foreach(prop LINK_LIBRARIES INTERFACE_LINK_LIBRARIES LINK_OPTIONS INTERFACE_LINK_OPTIONS)
      if(type STREQUAL "INTERFACE_LIBRARY" AND NOT prop MATCHES "^INTERFACE_")
        continue()  # an interface library has only the interface properties
      endif()
      get_target_property(more ${t} ${prop})
      if(more)
        list(APPEND libs ${more})
      endif()
    endforeach()
    list(REMOVE_DUPLICATES libs)
    string(APPEND content "${t}\t${libs}\n")
  endforeach()
  file(WRITE ${PROJECT_BINARY_DIR}/link_graph.txt "${content}")
endfunction()
