// The PMI server's PMI-2 front end: the wire format (pmi2_wire.h) and the commands of ranks
// whose init asked for PMI-2 (--mpi=pmi2). The key-value space, fences and limits are the core's
// (pmi_server.cc), shared with PMI-1 ranks.
#include <algorithm>
#include <cctype>

#include "muster/client/pmi2_wire.h"
#include "muster/client/pmi_server.h"

namespace muster::client {
namespace pmi2 {

const std::string* Command::Find(std::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::optional<size_t> ParseLength(std::string_view prefix) {
  if (prefix.size() != kLengthChars) return std::nullopt;
  size_t i = 0, end = prefix.size();
  while (i < end && prefix[i] == ' ') ++i;
  while (end > i && prefix[end - 1] == ' ') --end;
  if (i == end) return std::nullopt;
  size_t n = 0;
  for (; i < end; ++i) {
    if (prefix[i] < '0' || prefix[i] > '9') return std::nullopt;
    n = n * 10 + static_cast<size_t>(prefix[i] - '0');
  }
  return n;
}

std::optional<Command> ParseCommand(std::string_view body) {
  Command out;
  bool first = true;
  size_t i = 0;
  while (i < body.size()) {
    size_t end = body.find(';', i);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view field = body.substr(i, end - i);
    i = end + 1;
    if (field.empty()) continue;
    const size_t eq = field.find('=');
    const std::string_view key = field.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : field.substr(eq + 1);
    if (key.empty()) return std::nullopt;
    if (first) {
      if (key != "cmd" || value.empty()) return std::nullopt;
      out.cmd = value;
      first = false;
      continue;
    }
    if (out.fields.size() >= kMaxFields) return std::nullopt;
    out.fields.emplace_back(key, value);
  }
  if (first) return std::nullopt;
  return out;
}

std::string Frame(std::string_view body) {
  std::string len = std::to_string(body.size());
  if (len.size() < kLengthChars) len.resize(kLengthChars, ' ');
  return len + std::string(body);
}

}  // namespace pmi2

namespace {

// What a task sent, fit to go back in a message or a log line: at most `max` printable
// characters, without the field separator.
std::string Printable(std::string_view s, size_t max) {
  std::string out(s.substr(0, max));
  for (char& c : out) {
    if (!std::isprint(static_cast<unsigned char>(c)) || c == ';') c = '_';
  }
  return out;
}

// PMI-2's error codes (MPICH's pmi2.h), as the clients report them.
constexpr int kFail = -1, kErrNoMem = 2, kErrInvalidArg = 3, kErrInvalidKeyLength = 5,
              kErrInvalidVal = 6, kErrInvalidValLength = 7;

}  // namespace

void PmiServer::Reply2(uint32_t rank, const std::string& thrid, std::string body) {
  if (!thrid.empty()) body += "thrid=" + thrid + ";";
  send_(rank, pmi2::Frame(body));
}

void PmiServer::ServePmi2(uint32_t rank, const std::string& body) {
  auto parsed = pmi2::ParseCommand(body);
  if (!parsed) return Drop(rank, "sent a malformed PMI-2 message");
  const pmi2::Command& c = *parsed;
  auto field = [&](std::string_view key) -> std::string {
    const std::string* v = c.Find(key);
    return v ? *v : std::string();
  };
  // Threaded clients match answers to requests by it; anything longer than a pointer is not one.
  std::string thrid = field("thrid");
  if (thrid.size() > 64 || !std::all_of(thrid.begin(), thrid.end(), [](char ch) {
        return std::isgraph(static_cast<unsigned char>(ch)) != 0;
      })) {
    thrid.clear();
  }
  auto reply = [&](const std::string& text) { Reply2(rank, thrid, text); };
  auto error = [&](const std::string& cmd, int rc, const std::string& why) {
    reply("cmd=" + cmd + "-response;rc=" + std::to_string(rc) + ";errmsg=" + why + ";");
  };
  const std::string& cmd = c.cmd;
  const uint32_t node = node_of_[rank];

  if (cmd == "fullinit") {
    // The rank is whoever holds the socket; a client that claims another is misconfigured.
    const std::string claimed = field("pmirank");
    if (!claimed.empty() && claimed != "-1" && claimed != std::to_string(rank)) {
      return error(cmd, kErrInvalidArg,
                   "pmirank " + Printable(claimed, 16) + " is not this task's rank " +
                       std::to_string(rank) + " (PMI_RANK)");
    }
    reply("cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=" + std::to_string(rank) +
          ";size=" + std::to_string(size_) + ";appnum=0;debugged=FALSE;pmiverbose=FALSE;");
  } else if (cmd == "job-getid") {
    reply("cmd=job-getid-response;rc=0;jobid=" + kvs_ + ";");
  } else if (cmd == "kvs-put" || cmd == "info-putnodeattr") {
    const bool attr = cmd == "info-putnodeattr";
    const std::string key = field("key"), value = field("value");
    switch (Put(rank, attr ? node_attrs_[node] : kv_, key, value)) {
      case PutResult::kOk:
        break;
      case PutResult::kKeyTooLong:
        return error(cmd, kErrInvalidKeyLength,
                     "key longer than " + std::to_string(kMaxKey) + " bytes");
      case PutResult::kValueTooLong:
        return error(cmd, kErrInvalidValLength,
                     "value longer than " + std::to_string(kMaxValue) + " bytes");
      case PutResult::kBadBytes:
        return error(cmd, kErrInvalidVal, "empty key, or a newline in the key or value");
      case PutResult::kTooManyKeys:
        return error(cmd, kErrNoMem,
                     "rank put more than " + std::to_string(kMaxKeysPerRank) + " keys");
      case PutResult::kFull:
        return error(cmd, kErrNoMem, "the step's key-value space is full");
    }
    reply("cmd=" + cmd + "-response;rc=0;");
    if (!attr || waiting_on_node_[node] == 0) return;
    // The ranks of this node that wait for it have it now.
    for (uint32_t other = 0; other < size_; ++other) {
      Rank& r = ranks_[other];
      if (!r.waits_attr || node_of_[other] != node || r.wait_key != key) continue;
      SetWaiting(other, false);
      Reply2(other, r.wait_thrid,
             "cmd=info-getnodeattr-response;rc=0;found=TRUE;value=" + value + ";");
    }
  } else if (cmd == "kvs-get" || cmd == "info-getnodeattr" || cmd == "info-getjobattr") {
    const std::string key = field("key");
    if (key.size() > kMaxKey) {
      return error(cmd, kErrInvalidKeyLength,
                   "key longer than " + std::to_string(kMaxKey) + " bytes");
    }
    const std::string* value = nullptr;
    std::string job_attr;
    if (cmd == "kvs-get") {
      auto it = kv_.find(key);
      if (it != kv_.end()) value = &it->second;
    } else if (cmd == "info-getnodeattr") {
      auto it = node_attrs_[node].find(key);
      if (it != node_attrs_[node].end()) value = &it->second;
    } else if (key == "PMI_process_mapping") {
      value = &process_mapping_;
    } else if (key == "universeSize") {
      job_attr = std::to_string(size_);
      value = &job_attr;
    }
    if (value && value->find(';') != std::string::npos) {
      // Put by a PMI-1 rank: PMI-2 cannot carry it.
      return error(cmd, kFail, "the value holds a ';', which PMI-2 cannot carry");
    }
    if (value) return reply("cmd=" + cmd + "-response;rc=0;found=TRUE;value=" + *value + ";");
    if (cmd == "info-getnodeattr" && field("wait") == "TRUE") {
      // Answered when a rank of this node puts it.
      Rank& me = ranks_[rank];
      me.wait_key = key;
      me.wait_thrid = thrid;
      SetWaiting(rank, true);
      return CheckStuck(node);
    }
    reply("cmd=" + cmd + "-response;rc=0;found=FALSE;");
  } else if (cmd == "kvs-fence") {
    EnterFence(rank, thrid);
  } else if (cmd == "finalize") {
    reply("cmd=finalize-response;rc=0;");
  } else if (cmd == "abort") {
    // No answer: the step ends (isworld=FALSE too: the task is on its way out).
    const std::string msg = Printable(field("msg"), 200);
    Abort("rank " + std::to_string(rank) + " called MPI_Abort" + (msg.empty() ? "" : ": " + msg));
  } else if (cmd == "spawn" || cmd == "job-connect" || cmd == "job-disconnect" ||
             cmd == "name-publish" || cmd == "name-unpublish" || cmd == "name-lookup") {
    error(cmd, kFail, cmd + " is not supported by muster");
  } else {
    const std::string name = Printable(cmd, 64);
    error(name, kFail, "unknown PMI-2 command " + name);
  }
}

}  // namespace muster::client
