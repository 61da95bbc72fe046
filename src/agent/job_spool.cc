#include "job_spool.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "muster/common/strings.h"

namespace muster::agent {

namespace fs = std::filesystem;

bool WriteFileCloexec(const std::string& path, const std::string& data, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return false;
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      errno = err;
      return false;
    }
    off += static_cast<size_t>(n);
  }
  return ::close(fd) == 0;
}

std::string JobSpool::JobDir(uint64_t job_id) const {
  return jobs_dir_ + "/job" + std::to_string(job_id);
}

Status JobSpool::MakeJobDir(uint64_t job_id) const {
  const std::string dir = JobDir(job_id);
  if (::mkdir(dir.c_str(), 0711) != 0) {
    if (errno != EEXIST) {
      return Internal("cannot create spool dir " + dir + ": " + std::strerror(errno));
    }
    // Left by an earlier run of the job: reused only if it is still the agent's alone. One that
    // is not (an older version's, handed to the job's user) is moved aside whole, never walked
    // and deleted as root: its owner could swap what is inside while root deletes it.
    if (Status own = CheckOwnDirectory(dir); !own.ok()) {
      const std::string aside = dir + ".untrusted." + std::to_string(::time(nullptr));
      if (::rename(dir.c_str(), aside.c_str()) != 0) {
        return Internal("cannot move untrusted " + dir + " aside: " + std::strerror(errno));
      }
      spdlog::warn("{} ({}); moved aside to {} for the admin", dir, own.message(), aside);
      if (::mkdir(dir.c_str(), 0711) != 0) {
        return Internal("cannot create spool dir " + dir + ": " + std::strerror(errno));
      }
    }
  }
  // mkdir's mode passes through the umask; this is the mode meant.
  if (::chmod(dir.c_str(), 0711) != 0) {
    return Internal("cannot set the mode of " + dir + ": " + std::strerror(errno));
  }
  return CheckOwnDirectory(dir);
}

Status JobSpool::SaveState(const std::string& job_dir, const v1::AgentJobState& state) const {
  const std::string path = job_dir + "/state", tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  if (!WriteFileCloexec(tmp, state.SerializeAsString(), 0600) ||
      ::rename(tmp.c_str(), path.c_str())) {
    return Internal("cannot save the job's state to " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

std::vector<JobSpool::Left> JobSpool::Scan() const {
  std::vector<Left> out;
  std::error_code ec;
  // Jobs started before job_state_dir was set (an upgrade) are still in the spool itself.
  std::vector<std::string> roots{jobs_dir_};
  if (dir_ != jobs_dir_) roots.push_back(dir_);
  std::set<uint64_t> seen;
  for (const std::string& root : roots) {
    for (const auto& e : fs::directory_iterator(root, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() < 4 || name.compare(0, 3, "job") != 0) continue;
      auto id = ParseUint(std::string_view(name).substr(3));
      if (!id) continue;
      const std::string dir = e.path().string();
      if (seen.count(*id) != 0) {
        // The same job in both places: the job state directory's is the newer run. Left where
        // it is for the admin, neither adopted nor reported lost.
        spdlog::error("{}: job {} is also in {}; this older copy is ignored", dir, *id, jobs_dir_);
        continue;
      }
      const Status own = CheckOwnDirectory(dir);
      const int fd =
          own.ok() ? ::open((dir + "/state").c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
      if (own.ok() && fd < 0 && errno == ENOENT) {
        // Its launch never finished (the agent stopped in between): nothing of it was started.
        fs::remove_all(dir, ec);
        continue;
      }
      std::string bytes;
      struct stat fst {};
      const bool trusted =
          fd >= 0 && ::fstat(fd, &fst) == 0 && fst.st_uid == ::geteuid() && S_ISREG(fst.st_mode);
      if (trusted) {
        char buf[64 * 1024];
        for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) bytes.append(buf, size_t(n));
      }
      if (fd >= 0) ::close(fd);
      if (!own.ok()) spdlog::error("{}: not re-adopted: {}", dir, own.message());
      v1::AgentJobState st;
      Left left;
      left.job_id = *id;
      left.dir = dir;
      if (!trusted || !st.ParseFromString(bytes) || st.launch().job_id() != *id) {
        const std::string aside = dir + ".corrupt";
        fs::rename(dir, aside, ec);
        spdlog::error(
            "{}/state is corrupt or untrusted; moved aside to {} (the controller will treat the "
            "job as lost on this node)",
            dir, aside);
      } else {
        left.job_id = st.launch().job_id();
        left.state = std::move(st);
      }
      seen.insert(*id);
      out.push_back(std::move(left));
    }
  }
  return out;
}

uint64_t JobSpool::LoadEpoch() const {
  std::ifstream in(dir_ + "/controller-epoch");
  uint64_t e = 0;
  return in >> e ? e : 0;
}

bool JobSpool::SaveEpoch(uint64_t epoch) const {
  const std::string path = dir_ + "/controller-epoch";
  return WriteFileCloexec(path + ".tmp", std::to_string(epoch) + "\n", 0600) &&
         ::rename((path + ".tmp").c_str(), path.c_str()) == 0;
}

}  // namespace muster::agent
