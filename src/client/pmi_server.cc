#include "muster/client/pmi_server.h"

namespace muster::client {
namespace {

// "cmd=put kvsname=k key=a value=b c" -> {cmd: put, kvsname: k, key: a, value: "b c"}. A value
// is the rest of its line, so it may hold spaces (MPI business cards do not, but be lenient).
std::map<std::string, std::string> ParseLine(const std::string& line) {
  std::map<std::string, std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t eq = line.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = line.substr(i, eq - i);
    size_t end = key == "value" ? line.size() : line.find(' ', eq + 1);
    if (end == std::string::npos) end = line.size();
    out[key] = line.substr(eq + 1, end - eq - 1);
    i = end;
  }
  return out;
}

}  // namespace

PmiServer::PmiServer(uint32_t size, std::string kvs, const std::vector<uint32_t>& tasks_per_node,
                     Send send)
    : size_(size), kvs_(std::move(kvs)), send_(std::move(send)), ranks_(size) {
  kv_["PMI_process_mapping"] = ProcessMapping(tasks_per_node);
}

std::string PmiServer::ProcessMapping(const std::vector<uint32_t>& tasks_per_node) {
  std::string out = "(vector";
  for (size_t i = 0; i < tasks_per_node.size();) {
    size_t j = i;
    while (j < tasks_per_node.size() && tasks_per_node[j] == tasks_per_node[i]) ++j;
    out += ",(" + std::to_string(i) + "," + std::to_string(j - i) + "," +
           std::to_string(tasks_per_node[i]) + ")";
    i = j;
  }
  return out + ")";
}

void PmiServer::FromTask(uint32_t rank, const std::string& bytes) {
  if (rank >= size_ || ranks_[rank].dropped) return;
  Rank& r = ranks_[rank];
  r.in += bytes;
  size_t from = 0, nl;
  while ((nl = r.in.find('\n', from)) != std::string::npos) {
    if (nl - from > kMaxLine) return Drop(rank);
    const std::string line = r.in.substr(from, nl - from);
    from = nl + 1;
    if (!line.empty()) Command(rank, line);
    if (r.dropped) return;
  }
  r.in.erase(0, from);
  if (r.in.size() > kMaxLine) Drop(rank);
}

// A rank that does not speak PMI: it gets no more answers, and its socket closes.
void PmiServer::Drop(uint32_t rank) {
  Rank& r = ranks_[rank];
  r.dropped = true;
  r.in.clear();
  r.in.shrink_to_fit();
  send_(rank, "");
}

void PmiServer::Command(uint32_t rank, const std::string& line) {
  auto f = ParseLine(line);
  const std::string cmd = f.count("cmd") ? f["cmd"] : "";
  if (cmd == "init") {
    Reply(rank, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
  } else if (cmd == "get_maxes") {
    Reply(rank, "cmd=maxes kvsname_max=256 keylen_max=" + std::to_string(kMaxKey) +
                    " vallen_max=" + std::to_string(kMaxValue));
  } else if (cmd == "get_appnum") {
    Reply(rank, "cmd=appnum appnum=0");
  } else if (cmd == "get_my_kvsname") {
    Reply(rank, "cmd=my_kvsname kvsname=" + kvs_);
  } else if (cmd == "get_universe_size") {
    Reply(rank, "cmd=universe_size size=" + std::to_string(size_));
  } else if (cmd == "put") {
    // The sizes get_maxes promised, so one rank's keys stay as small as PMI says they are.
    const std::string& key = f["key"];
    const std::string& value = f["value"];
    auto it = kv_.find(key);
    const size_t was = it == kv_.end() ? 0 : key.size() + it->second.size();
    const size_t now = key.size() + value.size();
    if (key.size() > kMaxKey || value.size() > kMaxValue) {
      Reply(rank, "cmd=put_result rc=-1 msg=key_or_value_too_long");
    } else if (now > was && kv_bytes_ + (now - was) > kMaxSpaceBytes) {
      Reply(rank, "cmd=put_result rc=-1 msg=key_value_space_full");
    } else {
      kv_bytes_ = kv_bytes_ + now - was;
      kv_[key] = value;
      Reply(rank, "cmd=put_result rc=0 msg=success");
    }
  } else if (cmd == "get") {
    if (f["key"].size() > kMaxKey) return Reply(rank, "cmd=get_result rc=-1 msg=key_too_long");
    auto it = kv_.find(f["key"]);
    if (it == kv_.end()) {
      Reply(rank, "cmd=get_result rc=-1 msg=key_" + f["key"] + "_not_found value=unknown");
    } else {
      Reply(rank, "cmd=get_result rc=0 msg=success value=" + it->second);
    }
  } else if (cmd == "barrier_in") {
    if (!ranks_[rank].in_barrier) {
      ranks_[rank].in_barrier = true;
      ++in_barrier_;
    }
    if (in_barrier_ >= size_) {
      in_barrier_ = 0;
      for (uint32_t other = 0; other < size_; ++other) {
        ranks_[other].in_barrier = false;
        Reply(other, "cmd=barrier_out");
      }
    }
  } else if (cmd == "finalize") {
    Reply(rank, "cmd=finalize_ack");
  } else if (cmd == "abort") {
    aborted_ = true;
    abort_message_ =
        "rank " + std::to_string(rank) + " called MPI_Abort" +
        (f.count("exitcode") ? " (exit code " + f["exitcode"].substr(0, 16) + ")" : "");
  } else {
    // spawn, publish_name, ...: not offered; the library reports the failure.
    Reply(rank, "cmd=" + cmd.substr(0, 64) + "_result rc=-1 msg=not_supported_by_muster");
  }
}

}  // namespace muster::client
