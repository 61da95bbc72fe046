#include "muster/client/step_client.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "muster/common/framing.h"
#include "muster/common/hostlist.h"
#include "muster/v1/agent.pb.h"

namespace muster::client {
namespace {

// Per-(task, stream) line buffers, so lines of different tasks never interleave mid-line.
class LineWriter {
 public:
  LineWriter(FILE* out, FILE* err, bool label) : out_(out), err_(err), label_(label) {}

  void Add(uint32_t task, uint32_t stream, const std::string& data) {
    std::string& buf = bufs_[{task, stream}];
    buf += data;
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      Emit(task, stream, buf.substr(0, nl + 1));
      buf.erase(0, nl + 1);
    }
  }

  void Flush(uint32_t task) {
    for (uint32_t s : {1u, 2u}) {
      auto it = bufs_.find({task, s});
      if (it != bufs_.end() && !it->second.empty()) {
        Emit(task, s, it->second);
        it->second.clear();
      }
    }
  }

 private:
  void Emit(uint32_t task, uint32_t stream, const std::string& line) {
    FILE* f = stream == 2 ? err_ : out_;
    if (label_) std::fprintf(f, "%u: ", task);
    std::fwrite(line.data(), 1, line.size(), f);
    std::fflush(f);
  }
  FILE* out_;
  FILE* err_;
  bool label_;
  std::map<std::pair<uint32_t, uint32_t>, std::string> bufs_;
};

}  // namespace

Result<int> RunStep(ControllerClient& controller, const StepOptions& o, FILE* out, FILE* err) {
  MUSTER_ASSIGN_OR_RETURN(v1::CreateStepResponse step, controller.CreateStep(o.job_id));
  std::vector<std::string> names;
  std::vector<uint32_t> counts;
  for (const auto& n : step.nodes()) {
    names.push_back(n.node());
    counts.push_back(n.ntasks());
  }
  const std::string nodelist = CompressHostlist(names);
  const std::string tasks_per_node = CompressCounts(counts);

  struct Conn {
    std::string node;
    int fd = -1;
    uint32_t pending_tasks = 0;
  };
  std::vector<Conn> conns;
  int worst = 0;
  auto give_up = [&](const Status& s) {
    for (auto& c : conns) {
      if (c.fd >= 0) ::close(c.fd);  // closing makes every agent kill its tasks
    }
    return s;
  };
  for (const v1::StepNode& n : step.nodes()) {
    if (n.ntasks() == 0) continue;
    if (n.step_address().empty()) {
      return give_up(
          Unavailable("node " + n.node() + " has no step address (agent not registered?)"));
    }
    auto fd = ConnectTcp(n.step_address(), 5000);
    if (!fd.ok()) return give_up(fd.status().Prepend("node " + n.node()));
    v1::StepLaunchRequest req;
    req.set_job_id(step.job_id());
    req.set_step_id(step.step_id());
    req.set_credential(step.credential());
    for (const auto& a : o.argv) req.add_argv(a);
    for (const auto& e : o.environment) req.add_environment(e);
    req.set_work_dir(o.work_dir);
    req.set_node_id(n.node_id());
    req.set_first_task(n.first_task());
    req.set_ntasks(n.ntasks());
    req.set_total_tasks(step.total_tasks());
    req.set_total_nodes(static_cast<uint32_t>(step.nodes_size()));
    req.set_step_nodelist(nodelist);
    req.set_tasks_per_node(tasks_per_node);
    conns.push_back({n.node(), *fd, n.ntasks()});
    Status s = WriteFrame(*fd, 0, req.SerializeAsString());
    if (!s.ok()) return give_up(s.Prepend("node " + n.node()));
  }

  LineWriter writer(out, err, o.label);
  size_t open = conns.size();
  while (open > 0) {
    std::vector<pollfd> pfds;
    for (const auto& c : conns)
      pfds.push_back({c.fd, static_cast<short>(c.fd >= 0 ? POLLIN : 0), 0});
    int r = ::poll(pfds.data(), pfds.size(), -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return give_up(ErrnoStatus("poll", errno));
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      if (c.fd < 0 || !(pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto frame = ReadFrame(c.fd, 30'000);
      bool close_it = false;
      if (!frame.ok()) {
        if (c.pending_tasks > 0) {
          std::fprintf(err, "muster run: lost node %s: %s\n", c.node.c_str(),
                       frame.status().message().c_str());
          worst = std::max(worst, 1);
        }
        close_it = true;
      } else if (frame->type != 0) {
        std::fprintf(err, "muster run: node %s: %s\n", c.node.c_str(), frame->payload.c_str());
        worst = std::max(worst, 1);
        close_it = true;
      } else {
        v1::StepEvent ev;
        if (!ev.ParseFromString(frame->payload)) {
          close_it = true;
        } else if (ev.has_output()) {
          writer.Add(ev.output().task(), ev.output().stream(), ev.output().data());
        } else if (ev.has_exit()) {
          writer.Flush(ev.exit().task());
          int code = ev.exit().signal() ? 128 + ev.exit().signal() : ev.exit().exit_code();
          worst = std::max(worst, code);
          if (--c.pending_tasks == 0) close_it = true;
        }
      }
      if (close_it) {
        ::close(c.fd);
        c.fd = -1;
        --open;
      }
    }
  }
  return worst;
}

}  // namespace muster::client
