# Debian packages from CPack (scripts/build-packages.sh; tested by tests/packaging/debs_stest.sh):
#   muster-controller   musterctld, its unit, its system user (sysusers.d), musterctld(8)
#   muster-agent        musterd, muster-stepd, muster-keeper, its unit, the spool (tmpfiles.d)
#   muster-client       muster, the Slurm front ends in /usr/libexec/muster/slurm,
#                       muster(1), muster.toml(5), bash completion, the guides
#   muster-slurm-compat sbatch, srun, ... in /usr/bin (conflicts with Slurm's own client)
#   muster-sim          muster-sim (the scheduler replaying traces: the controller's engine
#                       inside, so it stays off login and compute nodes), its page and guides
# Every install() rule names one of these components.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME muster)
set(CPACK_PACKAGE_VENDOR "The Muster developers")
set(CPACK_PACKAGE_CONTACT "The Muster developers <muster-dev@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL controller agent client slurmcompat sim)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 2)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_STRIP_FILES ON)

set(_deb ${PROJECT_SOURCE_DIR}/packaging/debian)
# A component's description: its synopsis line, then paragraphs (CPack indents them).
set(_long "Muster schedules batch jobs on GPU clusters: gang placement that\nfollows the network topology, fair share, backfill, preemption,\nand Slurm's commands and job environment.\n\n")

set(CPACK_DEBIAN_CONTROLLER_PACKAGE_NAME muster-controller)
set(CPACK_DEBIAN_CONTROLLER_DESCRIPTION "Muster batch scheduler: controller (musterctld)\n${_long}This package holds the controller, which keeps the cluster's\nstate and schedules its jobs.")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_RECOMMENDS "libsystemd0, munge, muster-client")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_CONTROL_EXTRA
    "${_deb}/controller/postinst;${_deb}/controller/prerm;${_deb}/controller/postrm")

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME muster-agent)
set(CPACK_DEBIAN_AGENT_DESCRIPTION "Muster batch scheduler: node agent (musterd)\n${_long}This package holds the agent that runs on every GPU node and\nlaunches its jobs.")
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "libsystemd0")
set(CPACK_DEBIAN_AGENT_PACKAGE_SUGGESTS "libnvidia-ml1")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA
    "${_deb}/agent/postinst;${_deb}/agent/prerm;${_deb}/agent/postrm")

set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME muster-client)
set(CPACK_DEBIAN_CLIENT_DESCRIPTION "Muster batch scheduler: commands (muster, Slurm front ends)\n${_long}This package holds the muster command and the guides.")
# openssl: `muster certs` and `muster local up` make certificates with it.
set(CPACK_DEBIAN_CLIENT_PACKAGE_RECOMMENDS "munge, openssl")

set(CPACK_DEBIAN_SLURMCOMPAT_PACKAGE_NAME muster-slurm-compat)
set(CPACK_DEBIAN_SLURMCOMPAT_DESCRIPTION "Muster batch scheduler: Slurm's command names\n${_long}This package puts sbatch, srun, salloc, squeue and Slurm's other\ncommands in /usr/bin as Muster's front ends.")
set(CPACK_DEBIAN_SLURMCOMPAT_PACKAGE_DEPENDS
    "muster-client (= ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE})")
set(CPACK_DEBIAN_SLURMCOMPAT_PACKAGE_CONFLICTS "slurm-client")
set(CPACK_DEBIAN_SLURMCOMPAT_PACKAGE_ARCHITECTURE all)

set(CPACK_DEBIAN_SIM_PACKAGE_NAME muster-sim)
set(CPACK_DEBIAN_SIM_DESCRIPTION "Muster batch scheduler: workload simulator (muster-sim)\n${_long}This package holds muster-sim, which replays workload traces (SWF,\nPhilly, openb, sacct) through Muster's own scheduler on a virtual\nclock, to compare policies before changing a cluster's.")
set(CPACK_DEBIAN_SIM_PACKAGE_SECTION science)
# muster-client held muster-sim up to 0.1.0-1: an upgrade hands its files to this package.
set(CPACK_DEBIAN_SIM_PACKAGE_REPLACES "muster-client (<< ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE})")
set(CPACK_DEBIAN_SIM_PACKAGE_BREAKS "muster-client (<< ${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE})")

foreach(component controller agent client slurmcompat sim)
  string(TOUPPER ${component} upper)
  install(FILES ${_deb}/copyright ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${CPACK_DEBIAN_${upper}_PACKAGE_NAME}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

include(CPack)
