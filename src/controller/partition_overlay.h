// Partitions made, changed or removed live (`muster partition`, `scontrol create|update|delete
// partition`) are records in the state store laid over the config file's: the controller's
// partitions are the file's with every record applied, at each start and reconfiguration, until
// an admin deletes the partition or resets it to the file's definition. Pure: no store, no I/O.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "muster/common/clock.h"
#include "muster/common/config.h"
#include "muster/common/status.h"
#include "muster/v1/controller.pb.h"
#include "muster/v1/records.pb.h"

namespace muster::controller {

struct Overlaid {
  Config config;                      // the file's, with the records that hold applied
  std::vector<std::string> problems;  // records left out, each with why (a node gone, ...)
};
// The file's config with `records` applied in the order they were made (updated_ms: the newest
// default wins), each checked as a file's partition is (its nodes defined, one default). A
// record that no longer holds (a node of its gone from the file) never lets the file's
// definition back in its place: the partition keeps its nodes that are left, or is left out;
// either way it is named in `problems`.
Overlaid OverlayPartitions(const Config& file, const std::vector<v1::PartitionRecord>& records);

// What an admin's change makes of the partitions as they stand (`current`: the file's with the
// records applied): the record to store, or none when the partition's record goes (a live
// partition deleted, or a file partition reset to the file's definition). INVALID_ARGUMENT for
// a bad setting, NOT_FOUND for a partition that does not exist (nor has a stored record),
// ALREADY_EXISTS for a CREATE of one that does, FAILED_PRECONDITION for deleting the default or
// the last partition.
struct PartitionChange {
  std::string name;
  std::optional<v1::PartitionRecord> record;  // none: delete the stored record
  std::string summary;                        // "partition debug created", for the audit log
};
Result<PartitionChange> PlanPartitionChange(const v1::UpdatePartitionRequest& req,
                                            const Config& file, const Config& current,
                                            const std::vector<v1::PartitionRecord>& records,
                                            const std::string& user, TimeMs now);

// Where a partition comes from, for `muster partition list` and scontrol: "file", "live" (made
// live) or "file, changed live".
std::string PartitionOrigin(const std::string& name, const Config& file,
                            const std::vector<v1::PartitionRecord>& records);

}  // namespace muster::controller
