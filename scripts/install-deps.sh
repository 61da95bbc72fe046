#!/usr/bin/env bash
# The one list of Debian 12 packages Muster needs to build, test and run.
# Idempotent and fast when everything is present: apt-get runs only for what is missing.
# Nothing is ever downloaded from anywhere but the configured Debian mirrors.
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build pkg-config git ca-certificates procps clang-format
  # libraries
  libboost-dev libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  librocksdb-dev libspdlog-dev libfmt-dev libtomlplusplus-dev libhwloc-dev zlib1g-dev
  # muster-sim's allocator
  libmimalloc-dev
  # libcrypto: step credentials (HMAC-SHA256), in the daemons only
  libssl-dev
  # absl (gRPC's own dependency): the daemons turn off its mutex deadlock detection
  libabsl-dev
  # `muster certs` and `muster local up` make the daemons' TLS certificates with it
  openssl
  # sd_notify for Type=notify units (libsystemd is loaded at run time, as libmunge)
  libsystemd0
  # MUNGE: users' credentials over TCP (libmunge is loaded at run time; the tests run munged)
  libmunge-dev munge
  # tests and benchmarks (iproute2: the multi-host test's network namespaces; etcd-server: the
  # controllers' leader election, started by the tests on loopback)
  libgtest-dev libgmock-dev libbenchmark-dev iproute2 etcd-server
  # the metrics' checks: promtool, and a real Prometheus scraping a local cluster (on loopback;
  # on a host run by systemd the package also enables its own service, on port 9090)
  prometheus
  # the Debian packages: CPack's dependencies (dpkg-shlibdeps), and lintian's checks of them
  dpkg-dev lintian
  # the manual pages' check (ctest man_pages renders them with warnings as failures)
  man-db
  # the web view's system test loads every page in a headless browser (and takes the docs'
  # screenshot)
  chromium
  # real programs launched through srun in the system tests (torch.distributed, MPICH), and a
  # real workflow engine driving the Slurm commands unchanged (Toil, with cwltool)
  python3 python3-torch mpich libmpich-dev toil
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when apt has never fetched them (fresh machines) or a package is
# unknown to the cache; a used machine installs without touching the network for lists.
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/muster-install-deps.log 2>&1; then
  $SUDO apt-get update -q >>/tmp/muster-install-deps.log 2>&1
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/muster-install-deps.log 2>&1 || {
    cat /tmp/muster-install-deps.log >&2; exit 1; }
fi
