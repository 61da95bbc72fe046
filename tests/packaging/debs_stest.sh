#!/usr/bin/env bash
# System test: the Debian packages (scripts/build-packages.sh). Built from BUILD_DIR, then checked:
# each package holds its files and no other's (Slurm's names in /usr/bin only in
# muster-slurm-compat, which conflicts with slurm-client; the client never depends on gRPC), the
# maintainer scripts parse, lintian reports no tag that packaging/debian/lintian-explained does not
# explain (when lintian is installed), and the packaged programs, unpacked into a root of their
# own, run a local cluster with a batch job and a step, their manual pages render and the bash
# completion completes.
# With MUSTER_FRESH_ROOT=1 (as root, with debootstrap and a Debian mirror: MUSTER_DEBIAN_MIRROR,
# default deb.debian.org) the packages are also installed with apt into a brand-new Debian 12
# root, whose daemons then run a job.
#   usage: debs_stest.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
. "$src/tests/system/lib.sh"
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb is missing"; exit 77; }
command -v cpack >/dev/null || { echo "SKIP: cpack is missing"; exit 77; }
DIR=$(mktemp -d /tmp/muster-debs.XXXXXX)
fresh=""
cleanup() {
  rc=$?
  "$DIR/root/usr/bin/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  if [ -n "$fresh" ]; then
    chroot "$fresh" /usr/bin/muster local down --dir /tmp/cluster --purge >/dev/null 2>&1 || true
    umount "$fresh/proc" 2>/dev/null || true
  fi
  reap_leftovers "$DIR" || rc=1
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT

BUILD_DIR=$BUILD "$src/scripts/build-packages.sh" "$DIR/debs" >/dev/null
deb() { ls "$DIR"/debs/"$1"_*.deb; }
for p in muster-controller muster-agent muster-client muster-slurm-compat muster-sim; do
  [ -f "$(deb $p)" ] || fail "no $p package"
done

# What each package holds.
holds() {  # holds PACKAGE PATH...
  local p=$1 list; shift
  list=$(dpkg-deb -c "$(deb "$p")" | awk '{print $6}' | sed 's|^\./|/|')
  for f in "$@"; do grep -qx -- "$f" <<<"$list" || fail "$p lacks $f"; done
}
holds muster-controller /usr/sbin/musterctld /usr/lib/systemd/system/musterctld.service \
  /usr/lib/sysusers.d/muster.conf /usr/share/man/man8/musterctld.8.gz \
  /usr/share/doc/muster-controller/copyright /usr/share/doc/muster-controller/changelog.Debian.gz
holds muster-agent /usr/sbin/musterd /usr/libexec/muster/muster-stepd \
  /usr/libexec/muster/muster-keeper /usr/lib/systemd/system/musterd.service \
  /usr/lib/tmpfiles.d/muster.conf /usr/share/man/man8/musterd.8.gz
holds muster-client /usr/bin/muster /usr/libexec/muster/slurm/sbatch \
  /usr/share/man/man1/muster.1.gz /usr/share/man/man5/muster.toml.5.gz \
  /usr/share/bash-completion/completions/muster /usr/share/doc/muster/admin-guide.md
holds muster-slurm-compat /usr/bin/sbatch /usr/bin/srun /usr/bin/scontrol \
  /usr/share/man/man1/sbatch.1.gz
holds muster-sim /usr/bin/muster-sim /usr/share/man/man1/muster-sim.1.gz \
  /usr/share/doc/muster/simulator.md /usr/share/doc/muster-sim/copyright
# The simulator (the controller's engine inside) stays off login and compute nodes.
! dpkg-deb -c "$(deb muster-client)" | grep -q muster-sim || fail "muster-client holds muster-sim"
for p in muster-controller muster-agent muster-client muster-sim; do
  if dpkg-deb -c "$(deb $p)" | awk '{print $6}' |
    grep -qE '^\./usr/bin/(sbatch|srun|salloc|squeue|sinfo|sacct|sacctmgr|scancel|scontrol|sshare|sprio|sreport|sdiag)$'; then
    fail "$p puts a Slurm command in /usr/bin"
  fi
done
[ "$(dpkg-deb -f "$(deb muster-slurm-compat)" Conflicts)" = slurm-client ] ||
  fail "muster-slurm-compat does not conflict with slurm-client"
dpkg-deb -f "$(deb muster-controller)" Depends | grep -q librocksdb ||
  fail "muster-controller does not depend on RocksDB"
! dpkg-deb -f "$(deb muster-client)" Depends | grep -q grpc ||
  fail "muster-client depends on gRPC (the CLI never links it)"

# Maintainer scripts parse.
for p in muster-controller muster-agent; do
  dpkg-deb -e "$(deb $p)" "$DIR/control-$p"
  for s in postinst prerm postrm; do sh -n "$DIR/control-$p/$s" || fail "$p $s does not parse"; done
done

# Lintian: every tag it reports is one the packaging explains.
if command -v lintian >/dev/null; then
  explained=$(grep -v '^#' "$src/packaging/debian/lintian-explained" | cut -d: -f1)
  tags=$( (lintian --tag-display-limit 0 "$DIR"/debs/*.deb 2>/dev/null || true) | awk '/^[EWIPX]: /{print $3}' | sort -u)
  for t in $tags; do
    grep -qx -- "$t" <<<"$explained" || fail "lintian: '$t' is not explained: $(lintian "$DIR"/debs/*.deb 2>/dev/null | grep -- " $t" | head -3)"
  done
  echo "lintian: $(echo $tags | wc -w) tag(s), each explained"
else
  echo "lintian: not installed, not run"
fi

# The packaged programs, unpacked: a local cluster, a batch job, a step.
for d in "$DIR"/debs/*.deb; do dpkg-deb -x "$d" "$DIR/root"; done
R=$DIR/root
# The changelog speaks of the version the packages carry.
version=$(dpkg-deb -f "$(deb muster-agent)" Version)
zcat "$R/usr/share/doc/muster-agent/changelog.Debian.gz" | head -1 | grep -qF "($version)" ||
  fail "the changelog's first entry is not version $version"
"$R/usr/bin/muster" local up --dir "$DIR/cluster" --nodes 2 --gpus-per-node 2 >/dev/null 2>&1
ctld=$(cat "$DIR/cluster/run/musterctld.pid")
[ "$(readlink "/proc/$ctld/exe")" = "$R/usr/sbin/musterctld" ] ||
  fail "the local cluster's controller is not the packaged one: $(readlink "/proc/$ctld/exe")"
export MUSTER_CONF=$DIR/cluster/muster.toml
export PATH=$R/usr/libexec/muster/slurm:$PATH  # the job finds srun as users would
id=$(sbatch --parsable -N2 --gpus-per-node=1 -o "$DIR/job.out" \
  --wrap 'srun printenv SLURMD_NODENAME | sort | tr "\n" " "')
wait_for 30 sh -c "'$R/usr/bin/muster' acct -j $id -n -X -o State | grep -q COMPLETED"
[ "$(cat "$DIR/job.out")" = "node1 node2 " ] ||
  fail "the job's step on both nodes printed '$(cat "$DIR/job.out")'"
"$R/usr/bin/muster" local down --dir "$DIR/cluster" >/dev/null
# Manual pages (a Slurm name's page is muster's) and the completion.
if command -v man >/dev/null; then
  for page in man1/muster.1.gz man1/sbatch.1.gz man1/muster-sim.1.gz man5/muster.toml.5.gz \
    man8/musterctld.8.gz; do
    MANWIDTH=80 man -l "$R/usr/share/man/$page" 2>/dev/null | grep -q NAME || fail "$page does not render"
  done
fi
PATH=$R/usr/bin:$PATH bash -c ". '$R/usr/share/bash-completion/completions/muster'
  COMP_WORDS=(muster reco); COMP_CWORD=1; _muster; [ \"\${COMPREPLY[*]}\" = reconfigure ]" ||
  fail "the packaged bash completion does not complete"

if [ "${MUSTER_FRESH_ROOT:-0}" = 1 ]; then
  [ "$(id -u)" = 0 ] || fail "MUSTER_FRESH_ROOT=1 needs root"
  command -v debootstrap >/dev/null || fail "MUSTER_FRESH_ROOT=1 needs debootstrap"
  fresh=$DIR/fresh
  debootstrap --variant=minbase bookworm "$fresh" "${MUSTER_DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
    >"$DIR/debootstrap.log" 2>&1 || { tail -20 "$DIR/debootstrap.log"; fail "debootstrap failed"; }
  cp "$DIR"/debs/*.deb "$fresh/tmp/"
  mount -t proc proc "$fresh/proc"
  chroot "$fresh" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    /tmp/muster-controller_*.deb /tmp/muster-agent_*.deb /tmp/muster-client_*.deb \
    /tmp/muster-slurm-compat_*.deb /tmp/muster-sim_*.deb' >"$DIR/apt.log" 2>&1 || { tail -20 "$DIR/apt.log"; fail "apt could not install the packages"; }
  chroot "$fresh" getent passwd muster >/dev/null || fail "the controller's user was not made"
  chroot "$fresh" /usr/bin/muster local up --dir /tmp/cluster --nodes 2 --gpus-per-node 1 >/dev/null
  chroot "$fresh" env MUSTER_CONF=/tmp/cluster/muster.toml sbatch --parsable -N2 --wait -o /tmp/fresh.out \
    --wrap 'srun true' >/dev/null || fail "a job in the fresh root failed"
  chroot "$fresh" /usr/bin/muster local down --dir /tmp/cluster >/dev/null
  echo "fresh Debian 12 root: installed with apt, a 2-node job ran"
fi
echo "PASS: the packages hold their files, lintian's tags are explained, the packaged programs run a job"
