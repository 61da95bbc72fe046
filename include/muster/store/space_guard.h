// Keeps the state store off a full disk. Debian's RocksDB stops the process (a failed assertion
// in its log writer) on the first write that finds no space, so the store must never get there:
// every write first looks at the free space of the state directory.
//   - below the reserve, new work (submissions) is refused with RESOURCE_EXHAUSTED while
//     everything else (jobs starting, ending and being accounted, cancels, holds, drains) goes on
//     in the reserve; submissions are accepted again once free space is back above the reserve
//     plus an eighth (so a disk hovering at the mark does not flip every second);
//   - below the floor (a quarter of the reserve), no write is made at all: a request gets the
//     error, the controller's own changes stop it with a clear message, and it will not start
//     again until space is freed (rather than in a loop of RocksDB assertions).
// The reserve is accounting, not a file held aside (as Kudu's reserved bytes): a disk filled by
// someone else takes the reserve too, which the floor then catches.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "muster/common/status.h"

namespace muster::store {

class SpaceGuard {
 public:
  // Free bytes in the directory (statvfs's space available to unprivileged users, so the
  // filesystem's own root reserve is not counted on).
  using FreeBytes = std::function<Result<uint64_t>(const std::string& dir)>;
  static Result<uint64_t> StatFree(const std::string& dir);

  // reserve_bytes 0: no checks (tests, the simulator).
  SpaceGuard(std::string dir, uint64_t reserve_bytes, FreeBytes free_bytes = StatFree);

  // OK, or RESOURCE_EXHAUSTED naming the directory, what is free and what is needed.
  Status RoomForNewWork();
  Status RoomForWrite();
  // Whether the last look found the store below its reserve (new work refused).
  bool low() const { return low_; }
  uint64_t reserve_bytes() const { return reserve_; }
  uint64_t floor_bytes() const { return reserve_ / 4; }

 private:
  Result<uint64_t> Look();
  Status Short(uint64_t free, uint64_t needed, const std::string& what) const;

  std::string dir_;
  uint64_t reserve_;
  FreeBytes free_bytes_;
  bool low_ = false;
};

}  // namespace muster::store
