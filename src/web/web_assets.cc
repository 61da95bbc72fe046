#include "web_assets.h"

namespace muster::web {
namespace {

constexpr const char* kStyle = R"css(
:root { --fg: #1d2329; --muted: #66707a; --line: #d7dce1; --bg: #f6f7f9; --card: #fff; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; gap: 24px; align-items: center; padding: 10px 20px; background: #20303f;
  color: #fff; }
header a { color: #cfe0f0; text-decoration: none; margin-right: 14px; }
header a.active { color: #fff; font-weight: 600; border-bottom: 2px solid #7fb3e6; }
header .brand { font-weight: 700; }
header .who { margin-left: auto; color: #cfe0f0; }
main { padding: 16px 20px; }
h1 { margin: 0 0 4px; font-size: 22px; }
h2 { font-size: 16px; margin: 18px 0 6px; }
h3 { font-size: 13px; margin: 0 0 6px; color: var(--muted); }
.stamp { color: var(--muted); margin: 0 0 12px; font-size: 12px; }
.summary { display: flex; gap: 22px; margin-bottom: 12px; }
.summary b { font-size: 18px; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; margin-bottom: 12px;
  color: var(--muted); font-size: 12px; }
.legend .gpu { margin-right: -8px; }
.map { display: flex; flex-direction: column; gap: 14px; }
.spine { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
  padding: 10px 12px; }
.spine > h2 { margin: 0 0 8px; }
.leaves { display: flex; flex-wrap: wrap; gap: 12px; }
.leaf { border: 1px dashed var(--line); border-radius: 6px; padding: 8px; }
.nodes { display: flex; flex-wrap: wrap; gap: 8px; }
.node { border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; min-width: 132px;
  background: #fbfcfd; }
.node.out { background: #f1e7e7; }
.node .name { font-weight: 600; }
.node .meta, .node .reason { font-size: 11px; color: var(--muted); }
.gpus { display: grid; grid-template-columns: repeat(8, 14px); gap: 3px; margin-top: 4px; }
.gpu { display: inline-block; width: 14px; height: 14px; border-radius: 3px;
  border: 1px solid rgba(0,0,0,.15); }
.gpu.free { background: #e3f2e1; }
.gpu.hidden { background: repeating-linear-gradient(45deg, #9aa5b1, #9aa5b1 3px, #c3cad2 3px,
  #c3cad2 6px); }
.gpu.sick { background: #d62728; }
.gpu.out { background: #c9b1b1; }
.owner-0 { background: hsl(210 65% 55%); } .owner-1 { background: hsl(30 80% 55%); }
.owner-2 { background: hsl(280 45% 60%); } .owner-3 { background: hsl(160 55% 42%); }
.owner-4 { background: hsl(340 60% 60%); } .owner-5 { background: hsl(55 75% 50%); }
.owner-6 { background: hsl(190 60% 45%); } .owner-7 { background: hsl(10 65% 55%); }
.owner-8 { background: hsl(245 45% 62%); } .owner-9 { background: hsl(100 45% 45%); }
.owner-10 { background: hsl(320 40% 50%); } .owner-11 { background: hsl(45 40% 55%); }
td.owner-0, td.owner-1, td.owner-2, td.owner-3, td.owner-4, td.owner-5, td.owner-6,
td.owner-7, td.owner-8, td.owner-9, td.owner-10, td.owner-11,
span.owner-0, span.owner-1, span.owner-2, span.owner-3, span.owner-4, span.owner-5,
span.owner-6, span.owner-7, span.owner-8, span.owner-9, span.owner-10, span.owner-11 {
  color: #fff; padding: 1px 6px; border-radius: 3px; }
table { border-collapse: collapse; background: var(--card); }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
thead th { font-size: 12px; color: var(--muted); }
table.fields th, table.history th { color: var(--muted); font-weight: normal; }
td.why { max-width: 44em; }
tr[data-state="PENDING"] td.why { color: #6b4b00; }
.bar { width: 180px; }
.bar span { display: block; height: 6px; margin: 2px 0; border-radius: 2px; }
.bar .share { background: #7fb3e6; }
.bar .use { background: #e39b4c; }
.message, .note { color: var(--muted); }
)css";

constexpr const char* kScript = R"js(
'use strict';
(function () {
  const main = document.querySelector('main[data-api]');
  if (!main) return;
  const api = main.dataset.api;
  const root = main.dataset.root || '/';
  const kind = api.slice(root.length);  // "api/jobs", "api/nodes", "api/job/42", ...

  // The same colour a user as the server draws (FNV-1a of the name's UTF-8, 12 colours).
  function ownerClass(user) {
    let h = 2166136261;
    for (const c of new TextEncoder().encode(user)) h = Math.imul(h ^ c, 16777619) >>> 0;
    return 'owner-' + (h % 12);
  }
  function duration(ms) {
    let s = Math.floor(ms / 1000);
    const d = Math.floor(s / 86400);
    s %= 86400;
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const sec = s % 60;
    const two = (n) => String(n).padStart(2, '0');
    if (d > 0) return d + '-' + two(h) + ':' + two(m) + ':' + two(sec);
    if (h > 0) return h + ':' + two(m) + ':' + two(sec);
    return m + ':' + two(sec);
  }
  function cell(tr, text, cls) {
    const td = document.createElement('td');
    if (cls) td.className = cls;
    if (text instanceof Node) td.appendChild(text);
    else td.textContent = text;
    tr.appendChild(td);
  }
  function setCount(id, n) {
    const el = document.getElementById(id);
    if (el) el.textContent = String(n);
  }

  function queue(data) {
    const body = document.querySelector('#queue tbody');
    if (!body) return;
    const rows = [];
    let running = 0, pending = 0, gpusRunning = 0, gpusPending = 0;
    const now = Date.now();
    for (const j of data.jobs || []) {
      const gpus = Number(j.gpus_total || 0);
      const state = j.state || 'JOB_STATE_UNSPECIFIED';
      if (state === 'PENDING') { pending++; gpusPending += gpus; }
      if (state === 'RUNNING' || state === 'SUSPENDED') { running++; gpusRunning += gpus; }
      if (rows.length >= 2000) continue;
      const tr = document.createElement('tr');
      tr.dataset.job = j.id;
      tr.dataset.state = state;
      const a = document.createElement('a');
      a.href = root + 'job/' + encodeURIComponent(j.id);
      a.textContent = j.id;
      cell(tr, a);
      cell(tr, j.name || '');  // text, never markup
      cell(tr, j.user || '', ownerClass(j.user || ''));
      cell(tr, j.account || '');
      cell(tr, j.partition || '');
      cell(tr, state);
      cell(tr, String(j.num_nodes || 0));
      cell(tr, String(gpus));
      const start = Number(j.start_time || 0) * 1000;
      cell(tr, state !== 'PENDING' && start > 0 ? duration(now - start) : '\u2013');
      const limit = Number(j.time_limit_s || 0) * 1000;
      cell(tr, limit > 0 ? duration(limit) : 'UNLIMITED');
      const why = state === 'PENDING'
        ? (j.reason || 'None') + (j.reason_detail ? ': ' + j.reason_detail : '')
        : (j.nodes || []).join(',');
      cell(tr, why, 'why');
      rows.push(tr);
    }
    body.replaceChildren(...rows);
    setCount('jobs-running', running);
    setCount('jobs-pending', pending);
    setCount('gpus-running', gpusRunning);
    setCount('gpus-pending', gpusPending);
  }

  function nodes(data) {
    for (const n of data.nodes || []) {
      const el = document.querySelector('.node[data-node="' + CSS.escape(n.name) + '"] .meta');
      if (!el) continue;
      el.parentElement.dataset.state = n.state;
      el.textContent = n.state + ' \u00b7 ' + n.gpus_allocated + '/' + n.gpus + ' ' + n.gpu_type;
    }
  }

  function job(data) {
    const el = document.getElementById('job-state');
    if (el && data.job) el.textContent = data.job.state || '';
  }

  const render = { 'api/jobs': queue, 'api/nodes': nodes, 'api/shares': () => {} };
  async function refresh() {
    try {
      const r = await fetch(api, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
      if (r.status === 401) { location.reload(); return; }
      if (!r.ok) return;
      const data = await r.json();
      (render[kind] || job)(data);
      const stamp = document.getElementById('stamp');
      if (stamp) stamp.textContent = new Date().toLocaleString();
      document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
    } catch (e) {
      // The controller restarting, say: the next refresh tries again.
    }
  }
  setInterval(refresh, Number(main.dataset.refreshMs || 10000));
  if (new URLSearchParams(location.search).has('refresh')) refresh();
})();
)js";

}  // namespace

const std::string& StyleSheet() {
  static const std::string css = [] {
    std::string s = kStyle;
    for (int w = 0; w <= 100; ++w) {
      s += ".w" + std::to_string(w) + " { width: " + std::to_string(w) + "%; }\n";
    }
    for (int d = 0; d <= 8; ++d) {
      s += "td.depth" + std::to_string(d) + " { padding-left: " + std::to_string(8 + 16 * d) +
           "px; }\n";
    }
    return s;
  }();
  return css;
}

const std::string& Script() {
  static const std::string js = kScript;
  return js;
}

}  // namespace muster::web
