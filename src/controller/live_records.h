// What every live change of a named record (an account, a QoS, a reservation) checks before its
// own rules: the operation is add, modify or remove; an add names no record that exists, a modify
// or remove one that does; and a record the config file defines is changed there, not live.
//
// Pure.
#pragma once

#include <string>
#include <string_view>

#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"

namespace muster::controller {

// `kind` names the record in the messages ("account", "qos", "reservation"); `exists` says
// whether one named `name` is here, `from_config` whether the config file (`source`) defines it.
Status CheckLiveChange(v1::AccountOp op, std::string_view kind, const std::string& name,
                       bool exists, bool from_config, const std::string& source);

}  // namespace muster::controller
