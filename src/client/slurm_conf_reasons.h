// Why `muster import-slurm-conf` leaves a slurm.conf setting behind, for the settings whose reason
// says more than the fact: what Muster does instead.
#pragma once

#include <string>

namespace muster::client {

// "not carried: <why>" for a (lowercased) key Muster has no equivalent for; "not carried" when
// there is nothing more to say.
std::string NotCarried(const std::string& key);
// How Muster does what the (lowercased) key configures in Slurm; null when it is not one of those.
const char* NotNeeded(const std::string& key);

}  // namespace muster::client
