// Whether a path is this process's alone: it exists as the expected kind (not a link), belongs
// to our effective uid, and no group or other user can write it. Daemons that act as root, and
// commands that start daemons, use nothing else from a place another user could have prepared.
#pragma once

#include <string>

#include "muster/common/status.h"

namespace muster {

// PERMISSION_DENIED saying why (a link, another owner, the mode); NOT_FOUND when missing.
Status CheckOwnDirectory(const std::string& dir);
Status CheckOwnFile(const std::string& path);

// The permission bits as ls -l's octal: "0755".
std::string OctalMode(unsigned mode);

}  // namespace muster
