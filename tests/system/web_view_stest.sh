#!/usr/bin/env bash
# System test: the controller's web view in a real headless browser (Debian's chromium). A local
# cluster runs a 2-node gang and holds a 4-node one pending; `muster web` gives a login address;
# the browser logs in with it and loads every page, and what the pages show is what `muster
# queue --json` and `muster nodes --json` say: the counts, each job and why it waits, each GPU
# the gang holds. The pages' script refreshes the queue from the JSON once. Without the login
# nothing is shown. A screenshot of the map is kept (WEB_SCREENSHOT=path, for the docs).
# Skipped (77) without chromium.
#   usage: web_view_stest.sh BIN_DIR
set -euo pipefail
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v chromium >/dev/null || { echo "SKIP: chromium is not installed"; exit 77; }
DIR=$(mktemp -d /tmp/muster-web.XXXXXX)
cleanup() {
  rc=$?
  "$BIN/muster" local down --dir "$DIR/cluster" --purge >/dev/null 2>&1 || true
  reap_leftovers "$DIR" || rc=1
  rm -rf "$DIR"
  exit $rc
}
trap cleanup EXIT

# One page as the browser has it once its script ran: the DOM, dumped. The profile keeps the
# session's cookie from one load to the next.
browse() {
  timeout 60 chromium --headless=new --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$DIR/profile" --virtual-time-budget=3000 --dump-dom "$1" 2>>"$DIR/chromium.log"
}

"$BIN/muster" local up --dir "$DIR/cluster" --nodes 4 --gpus-per-node 8 >/dev/null
export MUSTER_CONF=$DIR/cluster/muster.toml PATH=$BIN:$PATH
web=$(sed -n 's/^web_address = "\(.*\)"/\1/p' "$MUSTER_CONF")
[ -n "$web" ] || fail "the local cluster serves no web view"

gang=$(muster submit --parsable -N 2 --gpus-per-node=8 -J 'gang<b>' -t 10 --wrap 'sleep 300')
wait_for 30 sh -c "muster job show $gang --json | grep -q '\"state\":\"RUNNING\"'"
big=$(muster submit --parsable -N 4 --gpus-per-node=8 -t 10 --wrap true)
wait_for 30 sh -c "muster job show $big --json | grep -q '\"reason\":\"Resources\"'"

# Nothing without logging in.
out=$(browse "http://$web/")
grep -q "muster web" <<<"$out" || fail "not logged in, the view showed: $out"
grep -q 'data-node=' <<<"$out" && fail "nodes shown without a login"

url=$(muster web --json | sed -n 's/.*"url":"\([^"]*\)".*/\1/p')
[ -n "$url" ] || fail "muster web gave no address"
map=$(browse "$url")
root=$(sed -n 's/.*<main data-root="\(\/s\/[0-9a-f]*\/\)".*/\1/p' <<<"$map" | head -1)
[ -n "$root" ] || fail "the login did not land on the map: $map"
base="http://$web$root"

# The map: every GPU the gang holds in its owner's colour, the totals as `muster nodes` has them.
nodes=$(muster nodes --json)
allocated=$(grep -o '"gpus_allocated":[0-9]*' <<<"$nodes" | awk -F: '{s+=$2} END {print s}')
[ "$allocated" = 16 ] || fail "muster nodes: $allocated GPUs allocated, not 16"
grep -q "id=\"gpus-allocated\">$allocated<" <<<"$map" || fail "map: allocated GPUs differ from muster nodes"
grep -q 'id="gpus-total">32<' <<<"$map" || fail "map: GPU total"
[ "$(grep -o "title=\"gpu[0-9]*: job $gang of [^\"]*\"" <<<"$map" | wc -l)" = 16 ] ||
  fail "map: the gang's 16 GPUs are not all drawn as its"
[ "$(grep -o 'class="gpu free" title' <<<"$map" | wc -l)" = 16 ] || fail "map: 16 free GPUs"

# The queue: the same jobs, counts and reasons as `muster queue --json`, refreshed once by its
# script from /api/jobs.
q=$(muster queue --json)
running=$(grep -o '"state":"RUNNING"' <<<"$q" | wc -l)
pending=$(grep -o '"state":"PENDING"' <<<"$q" | wc -l)
page=$(browse "${base}queue?refresh")
grep -q "id=\"jobs-running\">$running<" <<<"$page" || fail "queue: running count is not $running"
grep -q "id=\"jobs-pending\">$pending<" <<<"$page" || fail "queue: pending count is not $pending"
grep -q "<tr data-job=\"$gang\" data-state=\"RUNNING\">" <<<"$page" || fail "queue: the gang"
grep -q "<tr data-job=\"$big\" data-state=\"PENDING\">" <<<"$page" || fail "queue: the pending job"
grep -q '<td class="why">Resources: ' <<<"$page" || fail "queue: why the pending job waits"
grep -q 'gang&lt;b&gt;' <<<"$page" || fail "queue: the job's name is not shown as text"
grep -q '<body data-refreshed="1">' <<<"$page" || fail "queue: the script did not refresh from the JSON"

# A job's page, and the accounts.
job=$(browse "${base}job/$gang")
grep -q "<h1>Job $gang</h1>" <<<"$job" && grep -q 'id="job-state">RUNNING<' <<<"$job" || fail "job page: $job"
grep -q "<h2>Allocation</h2>" <<<"$job" || fail "job page: no allocation"
acct=$(browse "${base}accounts")
grep -q '<table class="shares">' <<<"$acct" || fail "accounts page: $acct"

if [ -n "${WEB_SCREENSHOT:-}" ]; then
  timeout 60 chromium --headless=new --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$DIR/profile" --hide-scrollbars --window-size=1280,760 \
    --screenshot="$WEB_SCREENSHOT" "$base" 2>>"$DIR/chromium.log"
fi

# Logging out ends it.
browse "${base}logout" >/dev/null
out=$(browse "${base}queue")
grep -q 'data-job=' <<<"$out" && fail "the queue was shown after logging out"
muster cancel "$gang" "$big"
echo "web view: OK"
