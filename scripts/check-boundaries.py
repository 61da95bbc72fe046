#!/usr/bin/env python3
"""Module boundaries: every target links, and every file includes, only what its module may use.

usage: check-boundaries.py REPO_ROOT LINK_GRAPH

REPO_ROOT/cmake/modules.json lists the modules (their targets and source paths), the modules each
may use, the third-party libraries it may include and link, those it must never have in its
transitive link closure, and whose private headers it may see (a module's own tests). LINK_GRAPH
is written by CMake at configure time (cmake/LinkGraph.cmake): one line per target, its name, a
tab, and its direct link libraries separated by ';'.

Checks:
  1. every target of the build belongs to a module in the list (a new target must be placed);
  2. a target's direct links are targets of modules it uses, or links of externals it may use;
  3. a module's transitive link closure holds none of its `never` externals (the CLI never links
     gRPC; the core never links protobuf, gRPC, RocksDB or Asio);
  4. a file's `#include "muster/M/..."` names a module it uses (or its own); "muster/v1/*.pb.h"
     needs proto, "*.grpc.pb.h" needs grpc; `<lib/...>` of a known external needs that external;
     a quoted private header ("x.h") lives next to the file or in a module it may see privately;
  5. no include walks up a directory ("../x.h"), and no project header is included with <...>
     (which a -I path would find wherever it lives);
  6. a module with a `std` list (the pure core) includes no other system header: no <thread>,
     <fstream>, <chrono> or <sys/socket.h> where there must be no threads, I/O or clock;
  7. every C/C++ source file under src/, include/, cli/, daemons/ and tests/ belongs to exactly
     one module;
  8. generator expressions in links ($<BUILD_INTERFACE:x>, $<LINK_ONLY:x>, $<$<COND>:x>) are
     checked as the targets they name.
Exit status 0 when all hold, 1 with one line per violation otherwise.
"""
import fnmatch
import json
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]\s*(//.*|/\*.*)?$')
# Any line that includes or imports something, however spelled (a macro, a comment before the
# header, the %: digraph): one INCLUDE_RE cannot read is refused rather than skipped.
ANY_INCLUDE_RE = re.compile(r'^\s*(#|%:)\s*(include|import)\b')
SOURCE_EXTENSIONS = (".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp", ".cc", ".cpp", ".cxx", ".c")
OWNED_ROOTS = ("src", "include", "cli", "daemons", "tests")


def unwrap_genex(dep):
    """The link items a generator expression names: $<BUILD_INTERFACE:a>, $<LINK_ONLY:a>,
    $<$<CONFIG:Debug>:a;b> -> [a] / [a, b]; a plain item -> [item]. $<TARGET_FILE:...> and the
    like name no link."""
    if not (dep.startswith("$<") and dep.endswith(">")):
        return [dep]
    inner = dep[2:-1]
    depth = 0
    for i, ch in enumerate(inner):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == ":" and depth == 0:
            head, value = inner[:i], inner[i + 1:]
            if head.startswith("$<") or head in ("BUILD_INTERFACE", "LINK_ONLY", "INSTALL_INTERFACE",
                                                 "BUILD_LOCAL_INTERFACE", "COMPILE_ONLY",
                                                 "TARGET_NAME_IF_EXISTS"):
                out = []
                for part in re.split(r"[;,](?![^<]*>)", value):
                    if part:
                        out.extend(unwrap_genex(part))
                return out
            if head == "IF":  # $<IF:cond,a,b>: either may be linked
                out = []
                for part in re.split(r"[;,](?![^<]*>)", value)[1:]:
                    if part:
                        out.extend(unwrap_genex(part))
                return out
            if head in ("TARGET_FILE", "TARGET_OBJECTS", "TARGET_PROPERTY"):
                return []  # names no link of its own
            return [dep]  # a form the check cannot read: reported as the link it is
    return [dep]


def load(root, graph_path):
    with open(os.path.join(root, "cmake", "modules.json")) as f:
        spec = json.load(f)
    graph = {}
    with open(graph_path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            target, _, deps = line.partition("\t")
            graph[target] = [d for d in deps.split(";") if d]
    return spec, graph


def link_name(dep):
    """A link item as modules.json names it: targets by name, files by their base name."""
    if dep.startswith("/"):
        return os.path.basename(dep)
    return dep


def check_links(spec, graph, problems):
    modules, externals = spec["modules"], spec["externals"]
    owner = {}
    for name, m in modules.items():
        for t in m["targets"]:
            owner[t] = name
    for target in sorted(graph):
        if target not in owner:
            problems.append(f"target {target} belongs to no module in cmake/modules.json")
    for target, deps in sorted(graph.items()):
        module = owner.get(target)
        if module is None:
            continue
        m = modules[module]
        allowed = set()
        for used in m["uses"] + [module]:
            allowed.update(modules[used]["targets"])
        for ext in m["external"]:
            allowed.update(externals[ext]["links"])
        for raw in deps:
            for dep in unwrap_genex(raw):
                if dep.startswith("-l"):
                    dep = dep[2:]  # a library by flag is a library
                elif dep.startswith("-"):
                    continue  # other linker flags (-static-libgcc)
                name = link_name(dep)
                if name not in allowed:
                    problems.append(
                        f"{target} ({module}) links {raw}, which module {module} may not use")
    # Transitive closure over the graph (imported targets are leaves).
    def closure(target, seen):
        for raw in graph.get(target, []):
            for dep in unwrap_genex(raw):
                name = link_name(dep)
                if name not in seen:
                    seen.add(name)
                    closure(name, seen)
        return seen

    for name, m in sorted(modules.items()):
        for target in m["targets"]:
            if target not in graph:
                continue
            reach = closure(target, set())
            for ext in m.get("never", []):
                for lib in externals[ext]["links"]:
                    if lib in reach:
                        problems.append(
                            f"{target} ({name}) links {lib} (through its dependencies); "
                            f"module {name} must never link {ext}")


def module_files(root, m):
    for p in m["paths"]:
        full = os.path.join(root, p)
        if os.path.isfile(full):
            yield full
        elif os.path.isdir(full):
            for d, _, files in os.walk(full):
                for f in sorted(files):
                    if f.endswith(SOURCE_EXTENSIONS):
                        yield os.path.join(d, f)


def external_of(header, externals):
    for name, e in externals.items():
        for pat in e["includes"]:
            if "*" in pat:
                if fnmatch.fnmatch(header, pat):
                    return name
            elif header.startswith(pat) or header == pat:
                return name
    return None


def check_includes(root, spec, problems):
    modules, externals = spec["modules"], spec["externals"]
    module_dirs = {}  # module -> its private source dir (src/<m>, cli/<m>)
    for name, m in modules.items():
        for p in m["paths"]:
            if p.startswith(("src/", "cli/")) and os.path.isdir(os.path.join(root, p)):
                module_dirs[name] = os.path.join(root, p)
    public = {}  # muster/<dir>/ -> module
    for name, m in modules.items():
        for p in m["paths"]:
            if p.startswith("include/muster/"):
                public[p[len("include/"):].rstrip("/") + "/"] = name
    # Headers a -I path could reach with <...>: every project header, by its path below each
    # directory that holds sources (so <engine_context.h> and <controller/engine_context.h> both
    # count).
    project_headers = set()
    for top in OWNED_ROOTS:
        if top == "include":
            continue  # public headers are reached as muster/..., checked above
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".h", ".hpp")):
                    parts = os.path.relpath(os.path.join(d, f), root).split(os.sep)
                    for i in range(len(parts)):
                        project_headers.add("/".join(parts[i:]))
    for name, m in sorted(modules.items()):
        may_use = set(m["uses"]) | {name}
        may_ext = set(m["external"])
        std_only = set(m["std"]) if "std" in m else None
        private_dirs = [module_dirs[p] for p in m.get("private", []) if p in module_dirs]
        private_dirs += [os.path.join(root, r) for r in m.get("include_roots", [])]
        for path in module_files(root, m):
            rel = os.path.relpath(path, root)
            with open(path, errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    match = INCLUDE_RE.match(line)
                    if not match:
                        if ANY_INCLUDE_RE.match(line):
                            problems.append(f"{rel}:{lineno}: an include the module check cannot "
                                            "read (write it as #include \"x.h\" or <x.h>)")
                        continue
                    quote, header = match.groups()[:2]
                    where = f"{rel}:{lineno}"
                    if header.startswith("/"):
                        problems.append(f"{where} includes {header}: an absolute path")
                        continue
                    if ".." in header.split("/"):
                        problems.append(f"{where} includes {header}: an include may not walk up a "
                                        "directory (name the module's public header instead)")
                        continue
                    ext = external_of(header, externals)
                    if ext is not None:
                        if ext not in may_ext:
                            problems.append(f"{where} includes {header}: module {name} may not use {ext}")
                        continue
                    if header.startswith("muster/v1/"):
                        if "proto" not in may_use:
                            problems.append(f"{where} includes {header}: module {name} may not use proto")
                        continue
                    if header.startswith("muster/"):
                        allow = m.get("project_headers")
                        if allow is not None and not any(header.startswith(a) for a in allow):
                            problems.append(f"{where} includes {header}: module {name} may include "
                                            "only the project headers listed for it")
                            continue
                        owner = next((mod for prefix, mod in public.items()
                                      if header.startswith(prefix)), None)
                        if owner is None:
                            problems.append(f"{where} includes {header}, which no module provides")
                        elif owner not in may_use:
                            problems.append(f"{where} includes {header}: module {name} may not use {owner}")
                        continue
                    if quote == "<":
                        system = "/" not in header and os.path.exists(
                            os.path.join("/usr/include", header))
                        if header in project_headers and not system:
                            problems.append(f"{where} includes <{header}>: a project header with "
                                            "<...> is found through a -I path, wherever it lives; "
                                            "use \"...\" as its module allows")
                        elif std_only is not None and header not in std_only:
                            problems.append(f"{where} includes <{header}>: module {name} may include "
                                            "only the standard headers listed for it (no I/O, "
                                            "clock or threads)")
                        continue
                    if quote == '"':
                        here = os.path.dirname(path)
                        found = os.path.exists(os.path.join(here, header)) or any(
                            os.path.exists(os.path.join(d, header)) for d in private_dirs)
                        if not found:
                            problems.append(
                                f"{where} includes \"{header}\": not next to it, and not a private "
                                f"header of a module {name} may see (another module's private "
                                "headers are not an API)")


def check_ownership(root, spec, problems):
    owners = {}
    for name, m in spec["modules"].items():
        for path in module_files(root, m):
            owners.setdefault(os.path.relpath(path, root), []).append(name)
    for top in OWNED_ROOTS:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            for entry in dirs + files:
                if os.path.islink(os.path.join(d, entry)):
                    problems.append(f"{os.path.relpath(os.path.join(d, entry), root)} is a link: "
                                    "sources are files of the module they sit in")
            for f in sorted(files):
                if not f.endswith(SOURCE_EXTENSIONS):
                    continue
                rel = os.path.relpath(os.path.join(d, f), root)
                who = owners.get(rel, [])
                if not who:
                    problems.append(f"{rel} belongs to no module in cmake/modules.json")
                elif len(who) > 1:
                    problems.append(f"{rel} belongs to several modules: {', '.join(sorted(who))}")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, graph_path = sys.argv[1], sys.argv[2]
    spec, graph = load(root, graph_path)
    problems = []
    check_links(spec, graph, problems)
    check_includes(root, spec, problems)
    check_ownership(root, spec, problems)
    for p in problems:
        print(p)
    if problems:
        print(f"module boundaries: {len(problems)} violation(s); see cmake/modules.json", file=sys.stderr)
        return 1
    print(f"module boundaries: ok ({len(spec['modules'])} modules, {len(graph)} targets)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
