#!/usr/bin/env bash
# From a fresh Debian 12 machine to a running local cluster: install dependencies, build, start a
# controller and 4 agents with 8 fake H100s each, and run a 2-node gang job.
#   usage: scripts/quickstart.sh
# The cluster keeps running afterwards; stop it with: build/release/bin/muster local down
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
echo "== building (the first build takes several minutes on 2 cores)"
cmake --preset release >/dev/null
cmake --build --preset release
BIN=$PWD/build/release/bin
export PATH="$BIN:$PATH"

echo "== starting a local cluster: 4 nodes x 8 GPUs, two leaf switches"
eval "$(muster local up --nodes 4 --gpus-per-node 8)"
muster nodes

echo "== submitting examples/gang-hello.sh (2 nodes x 8 GPUs, one task per node)"
work=$(mktemp -d /tmp/muster-quickstart.XXXXXX)
cd "$work"
id=$(muster submit --parsable "$OLDPWD/examples/gang-hello.sh")
muster queue
for _ in $(seq 1 300); do
  state=$(muster job show "$id" --json | sed -n 's/.*"state":"\([A-Z_]*\)".*/\1/p')
  case "$state" in PENDING|RUNNING) sleep 0.1 ;; *) break ;; esac
done
muster queue --all
echo "== job $id ended $state; its output ($work/slurm-$id.out):"
cat "slurm-$id.out"

cat <<EOT

The cluster is still running. To use it from this shell:
  export PATH=$BIN:\$PATH MUSTER_CONF=$MUSTER_CONF
  muster submit --wrap 'hostname'; muster queue; muster nodes
  muster web      # an address for your browser: the nodes as a map, the queue, each job
Stop it with:  muster local down
EOT
[ "$state" = COMPLETED ]
