// The PMI server's core (key-value space, fences, ranks gone) and its PMI-1 front end; the
// PMI-2 front end is pmi2_server.cc.
#include "muster/client/pmi_server.h"

#include <algorithm>

#include "muster/client/pmi2_wire.h"

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

PmiServer::PmiServer(std::string kvs, std::vector<uint32_t> node_of_rank, Send send, Wire wire)
    : size_(static_cast<uint32_t>(node_of_rank.size())),
      kvs_(std::move(kvs)),
      send_(std::move(send)),
      wire_(wire),
      ranks_(size_),
      node_of_(std::move(node_of_rank)),
      process_mapping_(MappingOfRanks(node_of_)) {
  kv_["PMI_process_mapping"] = process_mapping_;
  uint32_t nodes = 1;
  for (uint32_t n : node_of_) nodes = std::max(nodes, n + 1);
  node_attrs_.resize(nodes);
  live_on_node_.assign(nodes, 0);
  waiting_on_node_.assign(nodes, 0);
  for (uint32_t i = 0; i < size_; ++i) ++live_on_node_[node_of_[i]];
}

PmiServer::PmiServer(uint32_t size, std::string kvs, const std::vector<uint32_t>& tasks_per_node,
                     Send send, Wire wire)
    : PmiServer(std::move(kvs), RanksInBlocks(size, tasks_per_node), std::move(send), wire) {}

std::vector<uint32_t> PmiServer::RanksInBlocks(uint32_t size,
                                               const std::vector<uint32_t>& tasks_per_node) {
  std::vector<uint32_t> node_of(size, 0);
  uint32_t rank = 0;
  for (size_t node = 0; node < tasks_per_node.size(); ++node) {
    for (uint32_t i = 0; i < tasks_per_node[node] && rank < size; ++i) {
      node_of[rank++] = static_cast<uint32_t>(node);
    }
  }
  const uint32_t last =
      tasks_per_node.empty() ? 0 : static_cast<uint32_t>(tasks_per_node.size() - 1);
  for (; rank < size; ++rank) node_of[rank] = last;
  return node_of;
}

void PmiServer::SetWaiting(uint32_t rank, bool waits) {
  Rank& r = ranks_[rank];
  if (r.waits_attr == waits || r.gone) return;
  r.waits_attr = waits;
  const uint32_t node = node_of_[rank];
  if (waits) {
    --live_on_node_[node];
    ++waiting_on_node_[node];
    ++attr_waiters_;
  } else {
    ++live_on_node_[node];
    --waiting_on_node_[node];
    --attr_waiters_;
  }
}

std::string PmiServer::ProcessMapping(const std::vector<uint32_t>& tasks_per_node) {
  uint32_t size = 0;
  for (uint32_t n : tasks_per_node) size += n;
  return MappingOfRanks(RanksInBlocks(size, tasks_per_node));
}

std::string PmiServer::MappingOfRanks(const std::vector<uint32_t>& node_of_rank) {
  struct Tuple {
    uint32_t first_node, nodes, depth;
  };
  std::vector<Tuple> tuples;
  for (size_t r = 0; r < node_of_rank.size();) {
    // A run of ranks on one node; it joins the tuple before when it is on that tuple's next
    // node and as deep.
    size_t end = r;
    while (end < node_of_rank.size() && node_of_rank[end] == node_of_rank[r]) ++end;
    const uint32_t node = node_of_rank[r], depth = static_cast<uint32_t>(end - r);
    if (!tuples.empty() && tuples.back().depth == depth &&
        uint64_t{tuples.back().first_node} + tuples.back().nodes == node) {
      ++tuples.back().nodes;
    } else {
      tuples.push_back({node, 1, depth});
    }
    r = end;
  }
  std::string out = "(vector";
  for (const Tuple& t : tuples) {
    out += ",(" + std::to_string(t.first_node) + "," + std::to_string(t.nodes) + "," +
           std::to_string(t.depth) + ")";
  }
  return out + ")";
}

void PmiServer::FromTask(uint32_t rank, const std::string& bytes) {
  if (rank >= size_ || ranks_[rank].dropped) return;
  Rank& r = ranks_[rank];
  r.in += bytes;
  size_t from = 0;
  while (size_t used = ServeOne(rank, from)) from += used;
  if (r.dropped) return;
  r.in.erase(0, from);
  if (r.in.size() > kMaxLine + (r.speaks == Speaks::kPmi2 ? pmi2::kLengthChars : 0)) {
    Drop(rank, "sent more than " + std::to_string(kMaxLine) + " bytes without a whole message");
  }
}

size_t PmiServer::ServeOne(uint32_t rank, size_t from) {
  Rank& r = ranks_[rank];
  if (r.dropped) return 0;
  if (r.speaks != Speaks::kPmi2) {
    // PMI-1 (and every rank's first line, init): lines.
    const size_t nl = r.in.find('\n', from);
    if (nl == std::string::npos) return 0;
    if (nl - from > kMaxLine) {
      Drop(rank, "sent a PMI line longer than " + std::to_string(kMaxLine) + " bytes");
      return 0;
    }
    const std::string line = r.in.substr(from, nl - from);
    if (!line.empty()) ServePmi1(rank, line);
    return nl - from + 1;
  }
  if (r.in.size() - from < pmi2::kLengthChars) return 0;
  const auto len = pmi2::ParseLength(std::string_view(r.in).substr(from, pmi2::kLengthChars));
  if (!len || *len > kMaxLine) {
    Drop(rank, "sent a PMI-2 message without a length of at most " + std::to_string(kMaxLine));
    return 0;
  }
  if (r.in.size() - from - pmi2::kLengthChars < *len) return 0;
  // A copy: serving it may drop the rank, which frees what it came in.
  ServePmi2(rank, r.in.substr(from + pmi2::kLengthChars, *len));
  return pmi2::kLengthChars + *len;
}

// A rank that does not speak PMI: it gets no more answers, and its socket closes.
void PmiServer::Drop(uint32_t rank, const std::string& why) {
  Rank& r = ranks_[rank];
  if (r.dropped) return;
  r.dropped = true;
  r.in.clear();
  r.in.shrink_to_fit();
  send_(rank, "");
  Gone(rank, "rank " + std::to_string(rank) + " " + why);
}

void PmiServer::TaskEnded(uint32_t rank) {
  if (rank >= size_) return;
  Gone(rank, "rank " + std::to_string(rank) + " ended");
}

void PmiServer::Gone(uint32_t rank, const std::string& why) {
  Rank& r = ranks_[rank];
  if (r.gone) return;
  const uint32_t node = node_of_[rank];
  if (r.waits_attr) {
    r.waits_attr = false;
    --waiting_on_node_[node];
    --attr_waiters_;
  } else {
    --live_on_node_[node];
  }
  r.gone = true;
  if (!r.in_fence) ++gone_outside_fence_;
  if (first_gone_.empty()) first_gone_ = why;
  CheckStuck(node);
}

void PmiServer::Abort(const std::string& why) {
  if (aborted_) return;
  aborted_ = true;
  abort_message_ = why;
}

void PmiServer::CheckStuck(uint32_t node) {
  if (aborted_) return;
  // A fence ends when every rank is in it: not while one gone outside it never can be.
  if (in_fence_ > 0 && gone_outside_fence_ > 0) {
    return Abort(first_gone_ + " outside the PMI fence the others wait in");
  }
  // A node attribute comes from a rank on the same node: not when all of them wait (or are gone).
  if (waiting_on_node_[node] > 0 && live_on_node_[node] == 0) {
    return Abort("the ranks on node " + std::to_string(node) +
                 " wait for a PMI node attribute none of them can put" +
                 (first_gone_.empty() ? "" : " (" + first_gone_ + ")"));
  }
}

PmiServer::PutResult PmiServer::Put(uint32_t rank, std::map<std::string, std::string>& space,
                                    const std::string& key, const std::string& value) {
  // The sizes get_maxes promised, so one rank's keys stay as small as PMI says they are.
  if (key.size() > kMaxKey) return PutResult::kKeyTooLong;
  if (value.size() > kMaxValue) return PutResult::kValueTooLong;
  // No line or field breaks: what one rank puts is read whole by the others, whatever they speak.
  auto bad = [](char c) { return c == '\n' || c == '\0' || c == ';'; };
  if (key.empty() || std::any_of(key.begin(), key.end(), bad) ||
      std::any_of(value.begin(), value.end(), [](char c) { return c == '\n' || c == '\0'; })) {
    return PutResult::kBadBytes;
  }
  auto it = space.find(key);
  if (it == space.end() && ranks_[rank].keys >= kMaxKeysPerRank) return PutResult::kTooManyKeys;
  const size_t was = it == space.end() ? 0 : key.size() + it->second.size();
  const size_t now = key.size() + value.size();
  if (now > was && kv_bytes_ + (now - was) > kMaxSpaceBytes) return PutResult::kFull;
  kv_bytes_ = kv_bytes_ + now - was;
  if (it == space.end()) {
    ++ranks_[rank].keys;
    space.emplace(key, value);
  } else {
    it->second = value;
  }
  return PutResult::kOk;
}

void PmiServer::EnterFence(uint32_t rank, std::string thrid) {
  Rank& me = ranks_[rank];
  if (!me.in_fence) {
    me.in_fence = true;
    me.fence_thrid = std::move(thrid);
    ++in_fence_;
  }
  if (in_fence_ < size_) return CheckStuck(node_of_[rank]);
  in_fence_ = 0;
  // Every rank was in it; those gone since are outside the next one.
  gone_outside_fence_ = 0;
  for (const Rank& r : ranks_) gone_outside_fence_ += r.gone ? 1 : 0;
  for (uint32_t other = 0; other < size_; ++other) {
    Rank& r = ranks_[other];
    r.in_fence = false;
    if (r.dropped) continue;
    if (r.speaks == Speaks::kPmi2) {
      Reply2(other, r.fence_thrid, "cmd=kvs-fence-response;rc=0;");
    } else {
      Reply(other, "cmd=barrier_out");
    }
    r.fence_thrid.clear();
  }
}

void PmiServer::ServePmi1(uint32_t rank, const std::string& line) {
  auto f = ParseLine(line);
  const std::string cmd = f.count("cmd") ? f["cmd"] : "";
  if (cmd == "init") {
    // A PMI-2 client starts with this PMI-1 line, then speaks PMI-2 when the answer agrees.
    if (f["pmi_version"] == "2") {
      if (wire_ != Wire::kPmi2) {
        Reply(rank, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1");
        return Drop(rank, "asked for PMI-2, which this step (--mpi=pmi1) does not serve");
      }
      ranks_[rank].speaks = Speaks::kPmi2;
      return Reply(rank, "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0");
    }
    ranks_[rank].speaks = Speaks::kPmi1;
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
    switch (Put(rank, kv_, f["key"], f["value"])) {
      case PutResult::kOk:
        return Reply(rank, "cmd=put_result rc=0 msg=success");
      case PutResult::kKeyTooLong:
      case PutResult::kValueTooLong:
        return Reply(rank, "cmd=put_result rc=-1 msg=key_or_value_too_long");
      case PutResult::kBadBytes:
        return Reply(rank, "cmd=put_result rc=-1 msg=key_or_value_not_allowed");
      case PutResult::kTooManyKeys:
        return Reply(rank, "cmd=put_result rc=-1 msg=too_many_keys_from_this_rank");
      case PutResult::kFull:
        return Reply(rank, "cmd=put_result rc=-1 msg=key_value_space_full");
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
    EnterFence(rank, "");
  } else if (cmd == "finalize") {
    Reply(rank, "cmd=finalize_ack");
  } else if (cmd == "abort") {
    Abort("rank " + std::to_string(rank) + " called MPI_Abort" +
          (f.count("exitcode") ? " (exit code " + f["exitcode"].substr(0, 16) + ")" : ""));
  } else {
    // spawn, publish_name, ...: not offered; the library reports the failure.
    Reply(rank, "cmd=" + cmd.substr(0, 64) + "_result rc=-1 msg=not_supported_by_muster");
  }
}

}  // namespace muster::client
