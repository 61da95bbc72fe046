#!/usr/bin/env bash
# System test: a real Prometheus (Debian's prometheus, on loopback) scrapes a local cluster's
# controller, and one agent's own /metrics, with the bearer token of its config, and what it
# stores is the cluster: the targets are up, the GPUs a running job holds are `allocated`, the
# rest `idle`, as `muster nodes` says, and the agent counts the job it runs and its GPUs. A
# scrape without the token is refused. Skipped (77) without prometheus.
#   usage: prometheus_stest.sh BIN_DIR
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v prometheus >/dev/null || { echo "SKIP: prometheus is not installed"; exit 77; }
DIR=$(mktemp -d /tmp/muster-prom.XXXXXX)
prom=""
agent=""
cleanup() {
  rc=$?
  [ -z "$prom" ] || { kill "$prom" 2>/dev/null; wait "$prom" 2>/dev/null || true; }
  [ -z "$agent" ] || { kill "$agent" 2>/dev/null; wait "$agent" 2>/dev/null || true; }
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  if [ $rc -ne 0 ]; then
    echo "--- prometheus log:" >&2
    tail -n 30 "$DIR/prometheus.log" >&2 || true
  fi
  reap_leftovers "$DIR" || rc=1
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT

"$BIN/muster" local up --dir "$DIR/cluster" --nodes 2 --gpus-per-node 4 >/dev/null
export MUSTER_CONF=$DIR/cluster/muster.toml PATH=$BIN:$PATH
target=$(sed -n 's/^metrics_address = "\(.*\)"/\1/p' "$MUSTER_CONF")
token_file=$(sed -n 's/^metrics_token_file = "\(.*\)"/\1/p' "$MUSTER_CONF")
[ -n "$target" ] && [ -s "$token_file" ] || fail "the local cluster's config has no metrics"

# Without the token: refused, and nothing of the cluster in the answer.
out=$(python3 - "$target" <<'EOF'
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=5)
    print("200")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
EOF
)
case "$out" in 401*) ;; *) fail "a scrape without the token got: $out" ;; esac
grep -q muster_ <<<"$out" && fail "a refused scrape leaked metrics: $out"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# node2's agent serves its own /metrics too: stopped by its pid and started again on a copy of
# the config that adds [agent] metrics_address (the local cluster's agents share one config, so
# only one of them can have that port).
agent_port=$(free_port)
sed "s|^\[agent\]\$|[agent]\nmetrics_address = \"127.0.0.1:$agent_port\"\nmetrics_token_file = \"$token_file\"|" \
  "$MUSTER_CONF" >"$DIR/agent-node2.toml"
grep -q "^metrics_address = \"127.0.0.1:$agent_port\"" "$DIR/agent-node2.toml" || fail "no [agent] table"
pid_file=$DIR/cluster/run/musterd-node2.pid
old=$(cat "$pid_file")
kill "$old"
wait_for 10 sh -c "! kill -0 $old"
"$BIN/musterd" --config "$DIR/agent-node2.toml" --name node2 --gpu-fixture "$DIR/cluster/gpus.toml" \
  --spool "$DIR/cluster/spool/node2" >"$DIR/musterd-node2.log" 2>&1 &
agent=$!
echo "$agent" >"$pid_file"

id=$(muster submit --parsable -N 1 -w node2 --gpus-per-node 4 --wrap "sleep 120")
wait_for 20 sh -c "muster job show $id --json | grep -q '\"state\":\"RUNNING\"'"

port=$(free_port)
cat > "$DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: muster
    authorization:
      type: Bearer
      credentials_file: $token_file
    static_configs:
      - targets: ["$target"]
  - job_name: muster-agent
    authorization:
      type: Bearer
      credentials_file: $token_file
    static_configs:
      - targets: ["127.0.0.1:$agent_port"]
EOF
prometheus --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/tsdb" \
  --web.listen-address="127.0.0.1:$port" >"$DIR/prometheus.log" 2>&1 &
prom=$!

# query EXPR: the value of the first series Prometheus answers with ("" when none).
query() {
  python3 - "$port" "$1" <<'EOF'
import json, sys, urllib.parse, urllib.request
url = "http://127.0.0.1:%s/api/v1/query?query=%s" % (sys.argv[1], urllib.parse.quote(sys.argv[2]))
try:
    r = json.load(urllib.request.urlopen(url, timeout=5))
    res = r["data"]["result"]
    print(res[0]["value"][1] if res else "")
except Exception:
    print("")
EOF
}
query_is() { [ "$(query "$1")" = "$2" ]; }
wait_for 30 query_is 'up{job="muster"}' 1
# The same as the cluster: 4 GPUs held by the job, 4 idle, 2 nodes answering, 1 job running.
wait_for 10 query_is 'sum(muster_gpus{state="allocated"})' 4
query_is 'sum(muster_gpus{state="idle"})' 4 || fail "idle GPUs: $(query 'sum(muster_gpus{state="idle"})')"
query_is muster_nodes_responding 2 || fail "responding nodes: $(query muster_nodes_responding)"
query_is 'sum(muster_jobs{state="running"})' 1 || fail "running jobs: $(query 'sum(muster_jobs{state="running"})')"
# node2's agent: up, in session, running the job on 4 healthy GPUs.
wait_for 10 query_is 'up{job="muster-agent"}' 1
wait_for 10 query_is 'muster_agent_jobs{job="muster-agent",phase="running"}' 1
query_is 'muster_agent_connected{job="muster-agent"}' 1 || fail "agent session: $(query 'muster_agent_connected')"
query_is 'count(muster_agent_gpu_healthy{job="muster-agent"} == 1)' 4 ||
  fail "healthy GPUs: $(query 'count(muster_agent_gpu_healthy{job="muster-agent"} == 1)')"
query_is 'muster_agent_launches_total{job="muster-agent"}' 1 || fail "launches: $(query 'muster_agent_launches_total')"
alloc=$(muster nodes --json | python3 -c 'import json,sys; print(sum(n.get("gpus_allocated",0) for n in json.load(sys.stdin)["nodes"]))')
[ "$alloc" = 4 ] || fail "muster nodes --json says $alloc GPUs allocated"
# Every query of the shipped Grafana dashboard is one this Prometheus accepts, over these names.
python3 - "$port" "$here/../../packaging/grafana/muster-dashboard.json" <<'EOF' || fail "the dashboard's queries"
import json, sys, urllib.parse, urllib.request, urllib.error
port, path = sys.argv[1], sys.argv[2]
bad = 0
for panel in json.load(open(path))["panels"]:
    for t in panel["targets"]:
        url = "http://127.0.0.1:%s/api/v1/query?query=%s" % (port, urllib.parse.quote(t["expr"]))
        try:
            r = json.load(urllib.request.urlopen(url, timeout=5))
        except urllib.error.HTTPError as e:
            r = json.loads(e.read() or b"{}")
        if r.get("status") != "success":
            print("panel %r: %s: %s" % (panel["title"], t["expr"], r.get("error")), file=sys.stderr)
            bad += 1
sys.exit(1 if bad else 0)
EOF
muster cancel "$id" >/dev/null
echo "PASS: Prometheus scrapes the controller and an agent with their token; the numbers are the cluster's"
