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

// A program a daemon runs as root (a reboot program), as configured: the path walked from /
// entry by entry, each directory root's (or this process's user's) and writable by no one else
// (a sticky directory of root's, as /tmp, counts: no one may replace another's entry there), each
// link on the way found in such a directory and its target walked the same way, and at the end
// an executable regular file only root (or this user) can change. Check it again right before
// each run. FAILED_PRECONDITION saying why.
Status CheckTrustedProgram(const std::string& path);

// The permission bits as ls -l's octal: "0755".
std::string OctalMode(unsigned mode);

}  // namespace muster
