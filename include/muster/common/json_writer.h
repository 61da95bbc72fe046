// JSON text built in order, commas handled: what `muster ... --json` prints and the web view's
// /api answers. Not validating: callers nest correctly. Strings are quoted by AppendJsonQuoted
// (control characters escaped, other bytes kept as they are).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace muster {

class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view k);
  JsonWriter& String(std::string_view v);
  JsonWriter& Int(int64_t v);
  JsonWriter& Uint(uint64_t v);
  JsonWriter& Double(double v);
  JsonWriter& Bool(bool v);
  JsonWriter& Null();
  template <typename T>
  JsonWriter& Field(std::string_view k, const T& v);
  const std::string& str() const { return out_; }
  // Writes what is built so far to `f` and forgets it (long documents stream out in pieces).
  void FlushTo(std::FILE* f);
  size_t size() const { return out_.size(); }

 private:
  void Sep();
  std::string out_;
  std::vector<bool> first_{true};
  bool after_key_ = false;
};

template <>
inline JsonWriter& JsonWriter::Field(std::string_view k, const std::string& v) {
  return Key(k).String(v);
}
template <>
inline JsonWriter& JsonWriter::Field(std::string_view k, const bool& v) {
  return Key(k).Bool(v);
}
template <typename T>
JsonWriter& JsonWriter::Field(std::string_view k, const T& v) {
  if constexpr (std::is_floating_point_v<T>) {
    return Key(k).Double(static_cast<double>(v));
  } else if constexpr (std::is_signed_v<T>) {
    return Key(k).Int(static_cast<int64_t>(v));
  } else {
    return Key(k).Uint(static_cast<uint64_t>(v));
  }
}

}  // namespace muster
