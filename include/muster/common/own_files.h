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

// The contents of a file a daemon trusts (a key, a certificate): opened first and the open file
// checked, so that what is checked is what is read. It must be a regular file of root's or this
// process's user, that no one else can change, and with `secret` that no one else can read; at
// most max_bytes. FAILED_PRECONDITION naming `what`, the path and the fault.
Result<std::string> ReadProtectedFile(const std::string& path, const std::string& what, bool secret,
                                      size_t max_bytes);

// The permission bits as ls -l's octal: "0755".
std::string OctalMode(unsigned mode);

}  // namespace muster
