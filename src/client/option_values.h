// Private to muster_client: parsers of option values for submit_options.cc. Each checks its
// value whole and answers INVALID_ARGUMENT naming the option and what it expected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "muster/client/submit_options.h"
#include "muster/common/status.h"

namespace muster::client {

// A whole number from `min` to 10,000,000.
Result<uint32_t> Count(const std::string& opt, const std::string& v, uint32_t min = 1);

// "[type:]N" as --gpus, --gpus-per-node and --gpus-per-task take it, or "type:N|type:N" (at
// most 8 types, equal counts) for a job that accepts any of several GPU types, tried in that
// order. Sets the options' GPU type (or types); the count goes to `out`.
Status TypedCount(const std::string& opt, const std::string& v, SubmitOptions* o, uint32_t* out);

// --gres=gpu[:type][:count] and NAME[:TYPE][:COUNT] items, comma-separated.
Status ParseGres(const std::string& v, SubmitOptions* o);

// -w / -x: a host list expression, expanded here so the controller sees names; a value with a
// '/' is a file of names, as NodeFile reads it.
Status NodeNames(const std::string& opt, const std::string& v, std::vector<std::string>* out);
// -F/--nodefile: host lists separated by spaces, commas or lines, at most 1 MiB.
Status NodeFile(const std::string& opt, const std::string& path, std::vector<std::string>* out);
// --export-file=FILE|FD: NAME=value definitions separated by NUL bytes, at most 1 MiB; a number
// from 3 up is a descriptor already open.
Status ExportFile(const std::string& v, std::vector<std::string>* out);

// --uid=USER|UID (also sets the user's group unless --gid gave one) and --gid=GROUP|GID, looked
// up here: the job runs as them (root only).
Status RunAs(const std::string& opt, const std::string& v, SubmitOptions* o);

// --switches=N[@time]
Status ParseSwitches(const std::string& v, SubmitOptions* o);

}  // namespace muster::client
