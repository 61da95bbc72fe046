#include "live_records.h"

namespace muster::controller {

Status CheckLiveChange(v1::AccountOp op, std::string_view kind, const std::string& name,
                       bool exists, bool from_config, const std::string& source) {
  const std::string what = std::string(kind) + " " + name.substr(0, 64);
  switch (op) {
    case v1::ACCOUNT_OP_ADD:
      return exists ? AlreadyExists(what + " exists") : Status::Ok();
    case v1::ACCOUNT_OP_MODIFY:
    case v1::ACCOUNT_OP_REMOVE:
      if (!exists) return NotFound(what + " does not exist");
      if (from_config)
        return FailedPrecondition(what + " is defined in " + source + "; change it there");
      return Status::Ok();
    default:
      return InvalidArgument("unknown " + std::string(kind) + " operation");
  }
}

}  // namespace muster::controller
