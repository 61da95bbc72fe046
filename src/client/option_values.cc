// The values of submission options that carry more than a word: counts, GPU counts with types
// (and alternatives), --gres lists, host lists, --switches and -m/--distribution.
#include "option_values.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "muster/common/duration.h"
#include "muster/common/hostlist.h"
#include "muster/common/strings.h"

namespace muster::client {

Result<uint32_t> Count(const std::string& opt, const std::string& v, uint32_t min) {
  auto n = ParseUint(v);
  if (!n || *n < min || *n > 10'000'000) {
    return InvalidArgument("invalid value for " + opt + ": '" + v + "' (expected a number" +
                           (min ? " >= " + std::to_string(min) : "") + ")");
  }
  return static_cast<uint32_t>(*n);
}

// "[type:]N" as --gpus and --gpus-per-node take it, or "type:N|type:N" for a job that accepts
// any of several GPU types (tried in that order; the counts must be equal).
Status TypedCount(const std::string& opt, const std::string& v, SubmitOptions* o, uint32_t* out) {
  o->gpu_types.clear();
  if (v.find('|') != std::string::npos) {
    std::vector<std::string> types;
    std::optional<uint32_t> count;
    for (const std::string& alt : Split(v, '|')) {
      size_t colon = alt.find(':');
      if (colon == std::string::npos || colon == 0 ||
          alt.find(':', colon + 1) != std::string::npos) {
        return InvalidArgument("invalid value for " + opt + ": '" + v +
                               "' (expected type:count|type:count, such as h100:8|a100:8)");
      }
      MUSTER_ASSIGN_OR_RETURN(uint32_t n, Count(opt, alt.substr(colon + 1)));
      if (count && *count != n) {
        return InvalidArgument("invalid value for " + opt + ": '" + v +
                               "': every GPU type must have the same count");
      }
      count = n;
      if (types.size() == 8) {
        return InvalidArgument("invalid value for " + opt + ": at most 8 GPU types");
      }
      std::string type = alt.substr(0, colon);
      if (std::find(types.begin(), types.end(), type) != types.end()) {
        return InvalidArgument("invalid value for " + opt + ": '" + v + "': " + type +
                               " is named twice");
      }
      types.push_back(std::move(type));
    }
    o->gpu_type.reset();
    o->gpu_types = std::move(types);
    *out = *count;
    return Status::Ok();
  }
  size_t colon = v.rfind(':');
  std::string count = colon == std::string::npos ? v : v.substr(colon + 1);
  if (colon != std::string::npos) {
    std::string type = v.substr(0, colon);
    if (type.empty() || type.find(':') != std::string::npos) {
      return InvalidArgument("invalid value for " + opt + ": '" + v + "' (expected [type:]count)");
    }
    o->gpu_type = type;
  }
  MUSTER_ASSIGN_OR_RETURN(*out, Count(opt, count));
  return Status::Ok();
}

// --gres=gpu[:type][:count][,...]
Status ParseGres(const std::string& v, SubmitOptions* o) {
  o->gres.clear();
  for (const std::string& item : Split(v, ',', true)) {
    std::vector<std::string> f = Split(item, ':');
    if (f[0] != "gpu") {
      // NAME[:TYPE][:COUNT]: shard:2, nvme:1, nvme:fast:1
      SubmitOptions::Gres g;
      g.name = f[0];
      bool ok = !g.name.empty() && f.size() <= 3;
      if (ok && f.size() >= 2) {
        if (auto n = ParseUint(f.back()); n && *n >= 1 && *n <= 1'000'000) {
          g.count = static_cast<uint32_t>(*n);
          if (f.size() == 3) g.type = f[1];
        } else if (f.size() == 2) {
          g.type = f[1];
        } else {
          ok = false;
        }
      }
      if (!ok || (f.size() == 3 && g.type.empty())) {
        return InvalidArgument("invalid --gres '" + item + "' (expected NAME[:TYPE][:COUNT])");
      }
      o->gres.push_back(std::move(g));
      continue;
    }
    uint32_t count = 1;
    if (f.size() == 2) {
      // gpu:N or gpu:type
      if (!f[1].empty() && f[1].find_first_not_of("0123456789") == std::string::npos) {
        MUSTER_ASSIGN_OR_RETURN(count, Count("--gres", f[1]));
      } else {
        o->gpu_type = f[1];
      }
    } else if (f.size() == 3) {
      o->gpu_type = f[1];
      MUSTER_ASSIGN_OR_RETURN(count, Count("--gres", f[2]));
    } else if (f.size() > 3) {
      return InvalidArgument("invalid --gres '" + item + "' (expected gpu[:type][:count])");
    }
    if (count == 0) return InvalidArgument("--gres=" + item + ": count must be at least 1");
    o->gpus_per_node = count;
    o->gpu_types.clear();
  }
  return Status::Ok();
}

namespace {

// An option's file, whole, up to `limit` bytes.
Result<std::string> ReadOptionFile(const std::string& opt, const std::string& path, size_t limit) {
  // A number from 3 up is an open descriptor (as Slurm's --export-file takes one).
  auto fd_number = ParseUint(path);
  const bool is_fd = fd_number && *fd_number >= 3 && *fd_number <= 1'000'000;
  const int fd = is_fd ? static_cast<int>(*fd_number) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return InvalidArgument(opt + "=" + path + ": " + std::strerror(errno));
  std::string text;
  char buf[16 * 1024];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0 && text.size() <= limit) {
    text.append(buf, static_cast<size_t>(n));
  }
  const int read_errno = errno;
  if (!is_fd) ::close(fd);
  if (n < 0) return InvalidArgument(opt + "=" + path + ": " + std::strerror(read_errno));
  if (text.size() > limit) {
    return InvalidArgument(opt + "=" + path + ": larger than " + std::to_string(limit >> 10) +
                           " KiB");
  }
  return text;
}

}  // namespace

// -w / -x: a host list expression, expanded here so the controller sees names; with a '/', as
// in Slurm, a file of names (-F/--nodefile always reads one).
Status NodeNames(const std::string& opt, const std::string& v, std::vector<std::string>* out) {
  if (v.find('/') != std::string::npos) return NodeFile(opt, v, out);
  auto names = ExpandHostlist(v, 100'000);
  if (!names.ok())
    return InvalidArgument("invalid " + opt + " '" + v + "': " + names.status().message());
  *out = std::move(*names);
  return Status::Ok();
}

Status NodeFile(const std::string& opt, const std::string& path, std::vector<std::string>* out) {
  MUSTER_ASSIGN_OR_RETURN(std::string text, ReadOptionFile(opt, path, 1 << 20));
  out->clear();
  for (std::string line : Split(text, '\n', true)) {
    for (char& c : line) {
      if (c == ',' || c == '\t' || c == '\r') c = ' ';
    }
    for (const std::string& word : Split(line, ' ', true)) {
      auto names = ExpandHostlist(word, 100'000);
      if (!names.ok()) {
        return InvalidArgument("invalid " + opt + " '" + path + "': " + names.status().message());
      }
      out->insert(out->end(), names->begin(), names->end());
      if (out->size() > 100'000) return InvalidArgument(opt + "=" + path + ": too many names");
    }
  }
  if (out->empty()) return InvalidArgument(opt + "=" + path + ": names no node");
  return Status::Ok();
}

Status ExportFile(const std::string& v, std::vector<std::string>* out) {
  MUSTER_ASSIGN_OR_RETURN(std::string text, ReadOptionFile("--export-file", v, 1 << 20));
  out->clear();
  for (const std::string& kv : Split(text, '\0', true)) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos) {
      return InvalidArgument("--export-file=" + v + ": '" + kv.substr(0, 64) +
                             "' is not NAME=value (definitions are separated by NUL bytes)");
    }
    out->push_back(kv);
  }
  return Status::Ok();
}

Status CheckRunAs(const SubmitOptions& o, uint32_t euid) {
  if ((o.run_as_uid || o.run_as_gid) && euid != 0) {
    return InvalidArgument(
        "--uid and --gid are for root only (the job runs as whoever submits it)");
  }
  if (o.run_as_gid && !o.run_as_uid) {
    return InvalidArgument("--gid applies with --uid (the user the job runs as)");
  }
  return Status::Ok();
}

Status RunAs(const std::string& opt, const std::string& v, SubmitOptions* o) {
  char buf[16384];
  const auto number = ParseUint(v);
  if (opt == "--uid") {
    struct passwd pw {};
    struct passwd* found = nullptr;
    if (number && *number <= 0xFFFFFFFEu) {
      ::getpwuid_r(static_cast<uid_t>(*number), &pw, buf, sizeof buf, &found);
    } else {
      ::getpwnam_r(v.c_str(), &pw, buf, sizeof buf, &found);
    }
    if (!found) return InvalidArgument(opt + "=" + v + ": no such user");
    o->run_as_uid = found->pw_uid;
    o->run_as_user = found->pw_name;
    if (!o->run_as_gid) o->run_as_gid = found->pw_gid;  // an explicit --gid wins
    return Status::Ok();
  }
  struct group gr {};
  struct group* found = nullptr;
  if (number && *number <= 0xFFFFFFFEu) {
    ::getgrgid_r(static_cast<gid_t>(*number), &gr, buf, sizeof buf, &found);
  } else {
    ::getgrnam_r(v.c_str(), &gr, buf, sizeof buf, &found);
  }
  if (!found) return InvalidArgument(opt + "=" + v + ": no such group");
  o->run_as_gid = found->gr_gid;
  return Status::Ok();
}

// --switches=N[@time]
Status ParseSwitches(const std::string& v, SubmitOptions* o) {
  size_t at = v.find('@');
  auto n = Count("--switches", v.substr(0, at));
  if (!n.ok()) return n.status();
  o->max_switches = *n;
  o->switches_wait_ms = 0;
  if (at != std::string::npos) {
    auto t = ParseTimeLimit(v.substr(at + 1));
    if (!t.ok()) return InvalidArgument("--switches=" + v + ": " + t.status().message());
    o->switches_wait_ms = *t;
  }
  return Status::Ok();
}

Status ParseDistribution(const std::string& v, SubmitOptions* o) {
  const std::string what = "--distribution=" + v;
  const size_t comma = v.find(',');
  std::string flag;
  if (comma != std::string::npos) {
    flag = v.substr(comma + 1);
    if (!EqualsIgnoreCase(flag, "Pack") && !EqualsIgnoreCase(flag, "NoPack")) {
      return InvalidArgument(what + ": expected Pack or NoPack after ','");
    }
  }
  const std::vector<std::string> levels = Split(v.substr(0, comma), ':');
  if (levels.empty() || levels.size() > 3) {
    return InvalidArgument(what + ": expected at most three levels, FIRST[:SECOND[:THIRD]]");
  }
  std::string first = levels[0];
  uint32_t plane = 0;
  if (first == "*") first = "block";
  if (first == "arbitrary") {
    return Unimplemented(what +
                         " is not supported: a step's tasks go over its nodes by block, cyclic "
                         "or plane=N (SLURM_HOSTFILE is not read)");
  }
  if (StartsWith(first, "plane=")) {
    auto n = ParseUint(first.substr(6));
    if (!n || *n < 1 || *n > 10'000'000) {
      return InvalidArgument(what + ": the plane size must be a number from 1");
    }
    plane = static_cast<uint32_t>(*n);
    first = "plane";
  }
  if (first != "block" && first != "cyclic" && first != "plane") {
    return InvalidArgument(what + ": the first level must be block, cyclic, plane=N or *");
  }
  if (first == "plane" && levels.size() > 1) {
    return InvalidArgument(what + ": plane takes no other level (as Slurm's)");
  }
  for (size_t i = 1; i < levels.size(); ++i) {
    const std::string& l = levels[i];
    if (!l.empty() && l != "*" && l != "block" && l != "cyclic" && l != "fcyclic") {
      return InvalidArgument(what +
                             ": the levels after the first must be block, cyclic, "
                             "fcyclic or *");
    }
  }
  // As Slurm names it in SLURM_DISTRIBUTION: plane without its size (SLURM_DIST_PLANESIZE has
  // it), the flag in lower case.
  std::string whole = first;
  for (size_t i = 1; i < levels.size(); ++i) whole += ":" + levels[i];
  if (!flag.empty()) whole += "," + ToLower(flag);
  o->distribution = whole;
  o->task_distribution = first;
  o->plane_size = plane;
  // The second level deals a node's CPUs to its tasks for --cpu-bind.
  o->cpu_distribution = levels.size() > 1 ? levels[1] : "";
  return Status::Ok();
}

Status ResolveDistribution(const std::vector<std::string>& environment, bool read_variable,
                           SubmitOptions* o) {
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    std::optional<std::string> found;
    for (const std::string& kv : environment) {
      if (StartsWith(kv, name + "=")) found = kv.substr(name.size() + 1);  // the last wins
    }
    return found;
  };
  if (read_variable && o->distribution.empty()) {
    if (auto d = lookup("SLURM_DISTRIBUTION"); d && !d->empty()) {
      if (Status s = ParseDistribution(*d, o); !s.ok()) return s.Prepend("SLURM_DISTRIBUTION");
    }
  }
  if (o->task_distribution == "plane" && o->plane_size == 0) {
    auto size = lookup("SLURM_DIST_PLANESIZE");
    auto n = size ? ParseUint(*size) : std::nullopt;
    if (!size) {
      return InvalidArgument(
          "--distribution=plane needs a size: plane=N, or SLURM_DIST_PLANESIZE=N");
    }
    if (!n || *n < 1 || *n > 10'000'000) {
      return InvalidArgument("SLURM_DIST_PLANESIZE=" + *size + ": expected a number from 1");
    }
    o->plane_size = static_cast<uint32_t>(*n);
  }
  return Status::Ok();
}

std::string StepTaskDistribution(const SubmitOptions& o) {
  if (o.task_distribution == "cyclic") return "cyclic";
  if (o.task_distribution == "plane") return "plane=" + std::to_string(o.plane_size);
  return "";
}

}  // namespace muster::client
