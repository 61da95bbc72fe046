#include "muster/store/space_guard.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <utility>

namespace muster::store {
namespace {

std::string Mib(uint64_t bytes) {
  const uint64_t mib = bytes >> 20;
  if (mib > 0 || bytes == 0) return std::to_string(mib) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

Result<uint64_t> SpaceGuard::StatFree(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) {
    return ErrnoStatus("cannot read the free space of state_dir " + dir, errno);
  }
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

SpaceGuard::SpaceGuard(std::string dir, uint64_t reserve_bytes, FreeBytes free_bytes)
    : dir_(std::move(dir)), reserve_(reserve_bytes), free_bytes_(std::move(free_bytes)) {}

Result<uint64_t> SpaceGuard::Look() {
  MUSTER_ASSIGN_OR_RETURN(uint64_t free, free_bytes_(dir_));
  // Hysteresis: low below the reserve, back to normal above the reserve plus an eighth.
  if (free < reserve_) {
    low_ = true;
  } else if (free >= reserve_ + reserve_ / 8) {
    low_ = false;
  }
  return free;
}

Status SpaceGuard::Short(uint64_t free, uint64_t needed, const std::string& what) const {
  return ResourceExhausted("the controller's state directory " + dir_ + " is nearly full (" +
                           Mib(free) + " free, " + Mib(needed) + " needed): " + what);
}

Status SpaceGuard::RoomForNewWork() {
  if (reserve_ == 0) return Status::Ok();
  MUSTER_ASSIGN_OR_RETURN(uint64_t free, Look());
  if (!low_) return Status::Ok();
  return Short(free, reserve_ + reserve_ / 8,
               "new jobs are refused until space is freed; running jobs go on");
}

Status SpaceGuard::RoomForWrite() {
  if (reserve_ == 0) return Status::Ok();
  MUSTER_ASSIGN_OR_RETURN(uint64_t free, Look());
  if (free >= floor_bytes()) return Status::Ok();
  return Short(free, floor_bytes(), "nothing more can be written safely");
}

}  // namespace muster::store
