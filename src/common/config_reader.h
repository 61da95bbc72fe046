// Private to muster_common: reading the config's TOML tables with errors that name the file,
// line and key, shared by config.cc and config_sharing.cc.
#pragma once

#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "muster/common/config.h"
#include "muster/common/duration.h"
#include "muster/common/status.h"
#include "muster/common/toml.h"

namespace muster::config_internal {

// Reads one TOML table, remembering which keys were used so unknown ones can be reported with
// their line. Every error names the file, line and key.
class TableReader {
 public:
  TableReader(const toml::table& t, std::string path, const std::string& source)
      : t_(t), path_(std::move(path)), source_(source) {}

  Status Error(const toml::node* n, const std::string& key, const std::string& problem) const {
    int line =
        n ? static_cast<int>(n->source().begin.line) : static_cast<int>(t_.source().begin.line);
    return InvalidArgument(source_ + ":" + std::to_string(line) + ": " + Qualified(key) + ": " +
                           problem);
  }

  std::string Qualified(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }

  const toml::node* Get(const std::string& key) {
    used_.insert(key);
    return t_.get(key);
  }
  bool Has(const std::string& key) const { return t_.get(key) != nullptr; }

  // A duration: "30s", "5m", "1h" or a number of seconds.
  Status Duration(const std::string& key, int64_t* out) {
    const toml::node* n = Get(key);
    if (!n) return Status::Ok();
    if (n->is_integer()) {
      if (*n->value<int64_t>() < 0 || *n->value<int64_t>() > 365LL * 86'400) {
        return Error(n, key, "expected seconds between 0 and a year");
      }
      *out = *n->value<int64_t>() * 1000;
      return Status::Ok();
    }
    if (!n->is_string()) return Error(n, key, "expected a duration such as \"30s\" or \"5m\"");
    auto r = ParseDurationMs(*n->value<std::string>());
    if (!r.ok()) return Error(n, key, r.status().message());
    *out = *r;
    return Status::Ok();
  }

  Status String(const std::string& key, std::string* out) {
    const toml::node* n = Get(key);
    if (!n) return Status::Ok();
    if (!n->is_string()) return Error(n, key, "expected a string");
    *out = *n->value<std::string>();
    return Status::Ok();
  }

  Status Bool(const std::string& key, bool* out) {
    const toml::node* n = Get(key);
    if (!n) return Status::Ok();
    if (!n->is_boolean()) return Error(n, key, "expected true or false");
    *out = *n->value<bool>();
    return Status::Ok();
  }

  template <typename T>
  Status Uint(const std::string& key, T* out, uint64_t min = 0,
              uint64_t max = std::numeric_limits<T>::max()) {
    const toml::node* n = Get(key);
    if (!n) return Status::Ok();
    if (!n->is_integer()) return Error(n, key, "expected a whole number");
    int64_t v = *n->value<int64_t>();
    if (v < 0 || static_cast<uint64_t>(v) < min || static_cast<uint64_t>(v) > max) {
      return Error(n, key,
                   "value " + std::to_string(v) + " is out of range [" + std::to_string(min) +
                       ", " + std::to_string(max) + "]");
    }
    *out = static_cast<T>(v);
    return Status::Ok();
  }

  // A time limit in Slurm's format ("1-00:00:00", "UNLIMITED") or a number of minutes.
  Status TimeLimit(const std::string& key, int64_t* out) {
    const toml::node* n = Get(key);
    if (!n) return Status::Ok();
    if (n->is_integer()) {
      int64_t v = *n->value<int64_t>();
      if (v < 0) return Error(n, key, "must not be negative");
      *out = v * 60'000;
      return Status::Ok();
    }
    if (!n->is_string()) return Error(n, key, "expected a time such as \"1-00:00:00\"");
    auto r = ParseTimeLimit(*n->value<std::string>());
    if (!r.ok()) return Error(n, key, r.status().message());
    *out = *r;
    return Status::Ok();
  }

  Status Double(const std::string& key, double* out, double min, double max) {
    const toml::node* n = Get(key);
    if (!n) return Status::Ok();
    if (!n->is_number()) return Error(n, key, "expected a number");
    const double v =
        n->is_integer() ? static_cast<double>(*n->value<int64_t>()) : *n->value<double>();
    if (!(v >= min && v <= max)) {
      return Error(
          n, key,
          "value is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    *out = v;
    return Status::Ok();
  }

  // A sub-table of name = number, e.g. [billing.gpu_types].
  Status NumberTable(const std::string& key, std::map<std::string, double>* out, double min,
                     double max) {
    const toml::node* n = Get(key);
    if (!n) return Status::Ok();
    const toml::table* t = n->as_table();
    if (!t) return Error(n, key, "expected a table of name = number");
    TableReader sub(*t, Qualified(key), source_);
    for (auto&& [k, v] : *t) {
      double value = 0;
      MUSTER_RETURN_IF_ERROR(sub.Double(std::string(k.str()), &value, min, max));
      (*out)[std::string(k.str())] = value;
    }
    return Status::Ok();
  }

  Status StringList(const std::string& key, std::vector<std::string>* out) {
    const toml::node* n = Get(key);
    if (!n) return Status::Ok();
    const toml::array* a = n->as_array();
    if (!a) return Error(n, key, "expected a list of strings");
    out->clear();
    for (const toml::node& e : *a) {
      if (!e.is_string()) return Error(&e, key, "expected a list of strings");
      out->push_back(*e.value<std::string>());
    }
    return Status::Ok();
  }

  Status CheckNoUnknownKeys() const {
    for (auto&& [k, v] : t_) {
      std::string key(k.str());
      if (!used_.count(key)) {
        int line = static_cast<int>(k.source().begin.line);
        if (line == 0) line = static_cast<int>(v.source().begin.line);
        return InvalidArgument(source_ + ":" + std::to_string(line) + ": unknown key '" +
                               Qualified(key) + "'");
      }
    }
    return Status::Ok();
  }

 private:
  const toml::table& t_;
  std::string path_;
  const std::string& source_;
  std::set<std::string> used_;
};

inline Status SubTable(TableReader& parent, const std::string& key,
                       const std::function<Status(TableReader&)>& fn, const std::string& source) {
  const toml::node* n = parent.Get(key);
  if (!n) return Status::Ok();
  const toml::table* t = n->as_table();
  if (!t) return parent.Error(n, key, "expected a table [" + key + "]");
  TableReader r(*t, key, source);
  MUSTER_RETURN_IF_ERROR(fn(r));
  return r.CheckNoUnknownKeys();
}

// [[name]] arrays of tables.
inline Status TableArray(TableReader& parent, const std::string& key,
                         const std::function<Status(TableReader&, const toml::table&)>& fn,
                         const std::string& source) {
  const toml::node* n = parent.Get(key);
  if (!n) return Status::Ok();
  const toml::array* a = n->as_array();
  if (!a) return parent.Error(n, key, "expected [[" + key + "]] tables");
  for (const toml::node& e : *a) {
    const toml::table* t = e.as_table();
    if (!t) return parent.Error(&e, key, "expected [[" + key + "]] tables");
    TableReader r(*t, key, source);
    MUSTER_RETURN_IF_ERROR(fn(r, *t));
    MUSTER_RETURN_IF_ERROR(r.CheckNoUnknownKeys());
  }
  return Status::Ok();
}

// [[accounts]] and [[qos]] (config_sharing.cc): parsed into `c`.
Status ParseSharing(TableReader& root, Config& c, const std::string& source);
// [[controllers]] (config_controllers.cc).
Status ParseControllers(TableReader& root, Config& c, const std::string& source);
Status ValidateControllers(const Config& c, const std::string& source);
// The account tree, QoS names and preemption lists are consistent; accounts sorted parents
// first.
Status ValidateSharing(Config& c, const std::string& source);

}  // namespace muster::config_internal
