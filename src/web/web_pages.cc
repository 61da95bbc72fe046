#include "web_pages.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "muster/common/duration.h"
#include "muster/common/strings.h"
#include "web_json.h"

namespace muster::web {
namespace {

constexpr size_t kMaxQueueRows = 2000;  // a longer queue is for `muster queue`

std::string Num(uint64_t n) { return std::to_string(n); }

// A user's text cut to `max` bytes for a table cell (a page stays bounded however long the
// names); the whole is in the job's own page and in `muster job show`.
std::string_view Cut(std::string_view text, size_t max) {
  return text.size() <= max ? text : text.substr(0, max);
}

std::string StateName(v1::JobState s) {
  return v1::JobState_IsValid(s) ? v1::JobState_Name(s) : "UNKNOWN";
}

// The node takes no work: drained, down, not responding or never registered.
bool Unavailable(const v1::NodeInfo& n) {
  return n.drain() || n.state() == v1::NODE_DOWN || n.state() == v1::NODE_NOT_RESPONDING ||
         n.state() == v1::NODE_UNKNOWN;
}

std::string JobLink(const PageContext& ctx, uint64_t id) {
  return "<a href=\"" + Html(ctx.root) + "job/" + Num(id) + "\">" + Num(id) + "</a>";
}

std::string Timestamp(int64_t ms) { return ms > 0 ? Html(FormatTimestamp(ms)) : "&ndash;"; }

std::string Row(std::initializer_list<std::string> cells) {
  std::string r = "<tr>";
  for (const std::string& c : cells) r += "<td>" + c + "</td>";
  return r + "</tr>\n";
}

std::string Field(const std::string& name, const std::string& value_html) {
  return "<tr><th>" + Html(name) + "</th><td>" + value_html + "</td></tr>\n";
}

std::string Percent(double f) {
  if (!(f >= 0)) f = 0;
  return std::to_string(static_cast<int>(std::min(f, 1.0) * 100 + 0.5));
}

}  // namespace

std::string Html(std::string_view text) {
  const std::string p = Printable(text);
  std::string out;
  out.reserve(p.size());
  for (char c : p) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string OwnerClass(const std::string& user) {
  uint32_t h = 2166136261u;  // FNV-1a: the same user, the same colour, on every page and run
  for (unsigned char c : user) h = (h ^ c) * 16777619u;
  return "owner-" + std::to_string(h % 12);
}

std::string Layout(const PageContext& ctx, const std::string& title, const std::string& body,
                   const std::string& api) {
  const std::string root = Html(ctx.root);
  auto nav = [&](const char* key, const char* href, const char* text) {
    return "<a href=\"" + root + href + "\"" + (ctx.active == key ? " class=\"active\"" : "") +
           ">" + text + "</a>";
  };
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>" +
      Html(title) + " &middot; " + Html(ctx.cluster) +
      "</title><link rel=\"stylesheet\" href=\"/static/muster.css\"></head>\n<body>\n"
      "<header><span class=\"brand\">muster &middot; " +
      Html(ctx.cluster) + "</span><nav>" + nav("nodes", "", "Nodes") +
      nav("queue", "queue", "Queue") + nav("accounts", "accounts", "Accounts") +
      "</nav><span class=\"who\">" + Html(ctx.user) + " &middot; <a href=\"" + root +
      "logout\">log out</a></span></header>\n<main data-root=\"" + root + "\"" +
      (api.empty() ? std::string() : " data-api=\"" + root + Html(api) + "\"") + ">\n<h1>" +
      Html(title) + "</h1>\n<p class=\"stamp\">as of <time id=\"stamp\">" + Timestamp(ctx.now) +
      "</time></p>\n" + body +
      "</main>\n<script src=\"/static/muster.js\"></script>\n</body></html>\n";
  return page;
}

std::string MessagePage(const PageContext& ctx, const std::string& title, const std::string& text) {
  return Layout(ctx, title, "<p class=\"message\">" + Html(text) + "</p>\n");
}

std::string NodesPage(const PageContext& ctx, const v1::ListNodesResponse& nodes,
                      const v1::ListJobsResponse& running) {
  // (node, GPU index) -> the job holding it, of those the caller may see.
  std::map<std::pair<std::string, uint32_t>, const v1::JobInfo*> holder;
  std::set<std::string> owners;
  for (const v1::JobInfo& j : running.jobs()) {
    for (const v1::NodeAllocation& a : j.allocation().nodes()) {
      for (uint32_t g : a.gpu_indices()) holder[{a.node(), g}] = &j;
    }
    if (j.allocation().nodes_size() > 0) owners.insert(j.user());
  }
  // Spine -> leaf -> nodes, in the order the controller lists them.
  std::vector<std::string> spines;
  std::map<std::string, std::vector<std::string>> leaves;  // spine -> leaf paths
  std::map<std::string, std::vector<const v1::NodeInfo*>> by_leaf;
  uint64_t gpus = 0, gpus_allocated = 0, gpus_idle = 0, gpus_out = 0;
  for (const v1::NodeInfo& n : nodes.nodes()) {
    const std::string path = n.topology().empty() ? "(no topology)" : n.topology();
    const std::string spine = path.substr(0, path.find('/'));
    if (std::find(spines.begin(), spines.end(), spine) == spines.end()) spines.push_back(spine);
    auto& ls = leaves[spine];
    if (std::find(ls.begin(), ls.end(), path) == ls.end()) ls.push_back(path);
    by_leaf[path].push_back(&n);
    gpus += n.gpus();
    gpus_allocated += n.gpus_allocated();
    if (Unavailable(n)) {
      gpus_out += n.gpus() - std::min(n.gpus(), n.gpus_allocated());
    } else {
      gpus_idle += n.gpus() - std::min(n.gpus(), n.gpus_allocated());
    }
  }
  std::string b =
      "<section class=\"summary\"><span>nodes <b id=\"nodes-total\">" +
      Num(static_cast<uint64_t>(nodes.nodes_size())) +
      "</b></span><span>GPUs <b id=\"gpus-total\">" + Num(gpus) +
      "</b></span><span>allocated <b id=\"gpus-allocated\">" + Num(gpus_allocated) +
      "</b></span><span>idle <b id=\"gpus-idle\">" + Num(gpus_idle) +
      "</b></span><span>out of service <b id=\"gpus-out\">" + Num(gpus_out) +
      "</b></span></section>\n<section class=\"legend\"><span class=\"gpu free\"></span>"
      "free<span class=\"gpu hidden\"></span>another's job<span class=\"gpu sick\">"
      "</span>unhealthy<span class=\"gpu out\"></span>node out of service";
  for (const std::string& u : owners) {
    b += "<span class=\"gpu " + OwnerClass(u) + "\"></span>" + Html(u);
  }
  b += "</section>\n<div class=\"map\">\n";
  for (const std::string& spine : spines) {
    b += "<section class=\"spine\"><h2>" + Html(spine) + "</h2>\n<div class=\"leaves\">\n";
    for (const std::string& leaf : leaves[spine]) {
      const size_t slash = leaf.find('/');
      b += "<section class=\"leaf\"><h3>" +
           Html(slash == std::string::npos ? leaf : leaf.substr(slash + 1)) +
           "</h3>\n<div class=\"nodes\">\n";
      for (const v1::NodeInfo* n : by_leaf[leaf]) {
        const bool out = Unavailable(*n);
        std::set<uint32_t> sick;
        for (const v1::GpuDevice& g : n->gpu_devices()) {
          if (!g.health().empty()) sick.insert(g.index());
        }
        b += "<div class=\"node" + std::string(out ? " out" : "") + "\" data-node=\"" +
             Html(n->name()) + "\" data-state=\"" + NodeStateText(*n) + "\"><div class=\"name\">" +
             Html(n->name()) + "</div><div class=\"meta\">" + NodeStateText(*n) + " &middot; " +
             Num(n->gpus_allocated()) + "/" + Num(n->gpus()) + " " + Html(n->gpu_type()) +
             "</div><div class=\"gpus\">";
        // Allocated GPUs the caller cannot attribute (private_data) are drawn as another's.
        uint32_t unattributed = n->gpus_allocated();
        for (uint32_t g = 0; g < n->gpus(); ++g) {
          if (holder.count({n->name(), g})) unattributed -= std::min(unattributed, 1u);
        }
        for (uint32_t g = 0; g < n->gpus(); ++g) {
          auto it = holder.find({n->name(), g});
          std::string cls, title = "gpu" + Num(g);
          if (sick.count(g)) {
            cls = "sick";
            title += " unhealthy";
          } else if (it != holder.end()) {
            cls = OwnerClass(it->second->user());
            title += ": job " + Num(it->second->id()) + " of " + it->second->user();
          } else if (unattributed > 0) {
            --unattributed;
            cls = "hidden";
            title += ": allocated";
          } else {
            cls = out ? "out" : "free";
            title += out ? ": out of service" : ": free";
          }
          b += "<span class=\"gpu " + cls + "\" title=\"" + Html(title) + "\"></span>";
        }
        b += "</div>";
        if (!n->reason().empty()) {
          b += "<div class=\"reason\">" + Html(Cut(n->reason(), 256)) + "</div>";
        }
        b += "</div>\n";
      }
      b += "</div></section>\n";
    }
    b += "</div></section>\n";
  }
  b += "</div>\n";
  return Layout(ctx, "Nodes", b, "api/nodes");
}

std::string QueuePage(const PageContext& ctx, const v1::ListJobsResponse& jobs) {
  uint64_t running = 0, pending = 0, gpus_running = 0, gpus_pending = 0;
  for (const v1::JobInfo& j : jobs.jobs()) {
    if (j.state() == v1::PENDING) {
      ++pending;
      gpus_pending += j.gpus_total();
    } else if (j.state() == v1::RUNNING || j.state() == v1::SUSPENDED) {
      ++running;
      gpus_running += j.gpus_total();
    }
  }
  std::string b = "<section class=\"summary\"><span>running <b id=\"jobs-running\">" +
                  Num(running) + "</b></span><span>pending <b id=\"jobs-pending\">" + Num(pending) +
                  "</b></span><span>GPUs running <b id=\"gpus-running\">" + Num(gpus_running) +
                  "</b></span><span>GPUs asked for by pending jobs <b id=\"gpus-pending\">" +
                  Num(gpus_pending) + "</b></span></section>\n";
  if (jobs.next_after_id() != 0) {
    b += "<p class=\"message\">More jobs than one page holds: the counts are of those shown. "
         "<code>muster queue</code> lists them all.</p>\n";
  }
  b += "<table class=\"queue\" id=\"queue\"><thead><tr><th>job</th><th>name</th><th>user</th>"
       "<th>account</th><th>partition</th><th>state</th><th>nodes</th><th>GPUs</th>"
       "<th>time</th><th>limit</th><th>why</th></tr></thead><tbody>\n";
  size_t shown = 0;
  for (const v1::JobInfo& j : jobs.jobs()) {
    if (++shown > kMaxQueueRows) break;
    const bool waits = j.state() == v1::PENDING;
    const int64_t used = j.start_time_ms() > 0 && !waits ? ctx.now - j.start_time_ms() : 0;
    std::string why;
    if (waits) {
      why = Html(j.reason().empty() ? "None" : j.reason());
      if (!j.reason_detail().empty()) why += ": " + Html(Cut(j.reason_detail(), 512));
    } else {
      why = Html(Join({j.nodes().begin(), j.nodes().end()}, ","));
    }
    b += "<tr data-job=\"" + Num(j.id()) + "\" data-state=\"" + StateName(j.state()) + "\">" +
         "<td>" + JobLink(ctx, j.id()) + "</td><td>" + Html(Cut(j.name(), 128)) +
         "</td><td class=\"" + OwnerClass(j.user()) + "\">" + Html(j.user()) + "</td><td>" +
         Html(j.account()) + "</td><td>" + Html(j.partition()) + "</td><td>" +
         StateName(j.state()) + "</td><td>" + Num(j.num_nodes()) + "</td><td>" +
         Num(j.gpus_total()) + "</td><td>" + (used > 0 ? Html(FormatDuration(used)) : "&ndash;") +
         "</td><td>" +
         (j.time_limit_ms() > 0 ? Html(FormatDuration(j.time_limit_ms())) : "UNLIMITED") +
         "</td><td class=\"why\">" + why + "</td></tr>\n";
  }
  b += "</tbody></table>\n";
  if (shown > kMaxQueueRows) {
    b += "<p class=\"message\">The first " + Num(kMaxQueueRows) +
         " jobs are shown; <code>muster queue</code> lists them all.</p>\n";
  }
  return Layout(ctx, "Queue", b, "api/jobs");
}

std::string JobPage(const PageContext& ctx, const v1::JobInfo& j) {
  std::string b = "<table class=\"fields\">\n";
  b += Field("name", Html(j.name()));
  b += Field("user", "<span class=\"" + OwnerClass(j.user()) + "\">" + Html(j.user()) + "</span>");
  b += Field("account", Html(j.account()));
  b += Field("partition", Html(j.partition()));
  b += Field("state", "<b id=\"job-state\">" + StateName(j.state()) + "</b>" +
                          (j.completing() ? " (completing)" : ""));
  if (j.state() == v1::PENDING) {
    b +=
        Field("why it waits",
              Html(j.reason()) + (j.reason_detail().empty() ? "" : ": " + Html(j.reason_detail())));
    if (j.expected_start_ms() > 0) b += Field("expected start", Timestamp(j.expected_start_ms()));
  }
  b += Field("asks for", Num(j.num_nodes()) + " node(s), " + Num(j.num_tasks()) + " task(s), " +
                             Num(j.gpus_total()) + " GPU(s)" +
                             (j.gpu_type().empty() ? "" : " " + Html(j.gpu_type())) +
                             (j.features().empty() ? "" : ", constraint " + Html(j.features())));
  b += Field("time limit",
             j.time_limit_ms() > 0 ? Html(FormatDuration(j.time_limit_ms())) : "UNLIMITED");
  if (!j.dependency().empty()) b += Field("dependency", Html(j.dependency()));
  if (j.state() != v1::PENDING && (j.exit_code() != 0 || j.exit_signal() != 0)) {
    b += Field("exit", Num(static_cast<uint32_t>(j.exit_code())) + ":" +
                           Num(static_cast<uint32_t>(j.exit_signal())));
  }
  b += "</table>\n<h2>History</h2>\n<table class=\"history\">\n";
  b += Field("submitted", Timestamp(j.submit_time_ms()));
  if (j.begin_time_ms() > 0) b += Field("eligible from (--begin)", Timestamp(j.begin_time_ms()));
  if (j.start_time_ms() > 0) b += Field("started", Timestamp(j.start_time_ms()));
  if (j.requeue_count() > 0) b += Field("requeued", Num(j.requeue_count()) + " time(s)");
  if (j.preempt_count() > 0) b += Field("preempted", Num(j.preempt_count()) + " time(s)");
  if (j.end_time_ms() > 0) b += Field("ended", Timestamp(j.end_time_ms()));
  b += "</table>\n";
  if (j.allocation().nodes_size() > 0) {
    b += "<h2>Allocation</h2>\n<table class=\"allocation\"><thead><tr><th>node</th><th>tasks</th>"
         "<th>CPUs</th><th>memory (MB)</th><th>GPUs</th></tr></thead><tbody>\n";
    for (const v1::NodeAllocation& a : j.allocation().nodes()) {
      std::vector<std::string> g;
      for (uint32_t i : a.gpu_indices()) g.push_back(Num(i));
      b += Row({Html(a.node()), Num(a.ntasks()), Num(static_cast<uint64_t>(a.cpu_ids_size())),
                Num(a.mem_mb()), g.empty() ? "&ndash;" : Html(Join(g, ","))});
    }
    b += "</tbody></table>\n";
  }
  if (j.steps_size() > 0) {
    b += "<h2>Steps</h2>\n<table class=\"steps\"><thead><tr><th>step</th><th>name</th>"
         "<th>state</th><th>tasks</th><th>started</th><th>ended</th><th>exit</th></tr></thead>"
         "<tbody>\n";
    for (const v1::StepRecord& s : j.steps()) {
      b += Row({Num(j.id()) + "." + Num(s.id()), Html(s.name()), StateName(s.state()),
                Num(s.ntasks()), Timestamp(s.start_time_ms()), Timestamp(s.end_time_ms()),
                s.end_time_ms() > 0 ? Num(static_cast<uint32_t>(s.exit_code())) : "&ndash;"});
    }
    b += "</tbody></table>\n";
  }
  return Layout(ctx, "Job " + Num(j.id()), b, "api/job/" + Num(j.id()));
}

std::string AccountsPage(const PageContext& ctx, const v1::ListSharesResponse& shares) {
  std::string b =
      "<table class=\"shares\"><thead><tr><th>account</th><th>user</th><th>shares</th>"
      "<th>share of siblings</th><th>usage of siblings</th><th>usage against share</th>"
      "<th>fair-share factor</th></tr></thead><tbody>\n";
  for (const v1::ShareRow& r : shares.rows()) {
    const std::string bar = "<div class=\"bar\"><span class=\"share w" + Percent(r.norm_shares()) +
                            "\"></span><span class=\"use w" + Percent(r.effective_usage()) +
                            "\"></span></div>";
    b += "<tr data-account=\"" + Html(r.account()) + "\" data-user=\"" + Html(r.user()) +
         "\"><td class=\"depth" + Num(std::min<uint32_t>(r.depth(), 8)) + "\">" +
         Html(r.account()) + "</td><td>" + Html(r.user()) + "</td><td>" + Num(r.raw_shares()) +
         "</td><td>" + Percent(r.norm_shares()) + "%</td><td>" + Percent(r.effective_usage()) +
         "%</td><td>" + bar + "</td><td>" +
         (r.user().empty() ? "&ndash;" : Html(std::to_string(r.fairshare()).substr(0, 6))) +
         "</td></tr>\n";
  }
  b += "</tbody></table>\n<p class=\"note\">The upper bar is the share of its siblings' shares, "
       "the lower its share of their (decayed) usage: a lower bar longer than the upper one "
       "lowers the priority of its jobs.</p>\n";
  return Layout(ctx, "Accounts", b, "api/shares");
}

}  // namespace muster::web
