// Lists of names in records (a job's completing or unconfirmed nodes, an account's users):
// repeated string fields, short enough to search in order.
#pragma once

#include <google/protobuf/repeated_ptr_field.h>

#include <algorithm>
#include <string>

namespace muster::controller {

inline bool Contains(const google::protobuf::RepeatedPtrField<std::string>& list,
                     const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Removes every occurrence.
inline void Remove(google::protobuf::RepeatedPtrField<std::string>* list, const std::string& name) {
  list->erase(std::remove(list->begin(), list->end(), name), list->end());
}

}  // namespace muster::controller
