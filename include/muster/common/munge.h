// MUNGE credentials (Slurm's user authentication between hosts), through libmunge loaded at run
// time: a host without MUNGE gets a clear error when it needs it, never a crash or a link-time
// dependency (the CLI on the controller's own host never loads it). munged itself checks a
// credential's MAC, its time to live and that it is decoded only once.
#pragma once

#include <cstdint>
#include <string>

#include "muster/common/status.h"

namespace muster {

inline constexpr const char* kDefaultMungeSocket = "/run/munge/munge.socket.2";

// What a valid credential says.
struct MungeIdentity {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string payload;
  std::string origin;  // the encoding host's IPv4 address as munged recorded it ("" if none)
  int64_t ttl_s = 0;   // how long its maker let it live
};

// Thread-safe.
class Munge {
 public:
  // libmunge, loaded once. FAILED_PRECONDITION saying what to install when it is missing.
  static Result<const Munge*> Get();

  // A credential for this process's uid and gid carrying `payload`, valid for ttl_s seconds.
  // UNAVAILABLE when munged does not answer at `socket`.
  Result<std::string> Encode(const std::string& socket, const std::string& payload,
                             int ttl_s) const;
  // Checks a credential with munged at `socket`. UNAUTHENTICATED (with munged's reason: invalid,
  // expired, replayed, ...) for a credential that is not good; UNAVAILABLE when munged does not
  // answer.
  Result<MungeIdentity> Decode(const std::string& socket, const std::string& credential) const;

  struct Api;  // the library's functions (munge.cc)

 private:
  Munge() = default;
  const Api* api_ = nullptr;
};

}  // namespace muster
