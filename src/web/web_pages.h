// The web view's pages, rendered from the user API's answers. Pure: no I/O, no clock (`now` is
// given). Every text a user chose (job names, reasons, paths) is escaped and made printable.
#pragma once

#include <string>
#include <string_view>

#include "muster/common/clock.h"
#include "muster/v1/controller.pb.h"

namespace muster::web {

// `text` safe inside HTML text and attribute values: control characters and bytes that are not
// UTF-8 shown as \xNN (Printable), then & < > " ' as entities.
std::string Html(std::string_view text);

struct PageContext {
  std::string cluster;
  std::string user;
  std::string root = "/";  // where the session's pages are: "/s/PATH/" (links start with it)
  std::string active;      // the navigation entry to mark: "nodes", "queue", "accounts"
  TimeMs now = 0;
};

// A whole page: the navigation, `body`, and the script. `api`: what the script refreshes the
// page from, under the root ("api/jobs"; empty: nothing).
std::string Layout(const PageContext& ctx, const std::string& title, const std::string& body,
                   const std::string& api = "");

// The nodes as a map of their topology (spine, leaf, node, GPUs), each GPU coloured by what
// holds it: free, a job of a user (a colour a user), held by a job the caller may not see,
// unhealthy, or on a node that takes no work.
std::string NodesPage(const PageContext& ctx, const v1::ListNodesResponse& nodes,
                      const v1::ListJobsResponse& running);
// The queue: running and pending jobs, each pending one with why it waits in a line.
std::string QueuePage(const PageContext& ctx, const v1::ListJobsResponse& jobs);
// One job: what it asked for and holds, its history (submitted, started, requeued, ended) and
// its steps.
std::string JobPage(const PageContext& ctx, const v1::JobInfo& job);
// The accounts' and users' usage against their shares (sshare's figures).
std::string AccountsPage(const PageContext& ctx, const v1::ListSharesResponse& shares);
// A page that only says something ("log in with `muster web`", "no such job").
std::string MessagePage(const PageContext& ctx, const std::string& title, const std::string& text);

// The class (owner-0 .. owner-11) a user's jobs are drawn in: the same colour on every page.
std::string OwnerClass(const std::string& user);

}  // namespace muster::web
