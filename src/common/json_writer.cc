#include "muster/common/json_writer.h"

#include <charconv>
#include <cmath>

#include "muster/common/strings.h"

namespace muster {

void JsonWriter::Sep() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.back()) out_ += ',';
  first_.back() = false;
}

void JsonWriter::FlushTo(std::FILE* f) {
  std::fwrite(out_.data(), 1, out_.size(), f);
  out_.clear();
}

JsonWriter& JsonWriter::BeginObject() {
  Sep();
  out_ += '{';
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  out_ += '}';
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::BeginArray() {
  Sep();
  out_ += '[';
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  out_ += ']';
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::Key(std::string_view k) {
  Sep();
  AppendJsonQuoted(out_, k);
  out_ += ':';
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::String(std::string_view v) {
  Sep();
  AppendJsonQuoted(out_, v);
  return *this;
}
JsonWriter& JsonWriter::Int(int64_t v) {
  Sep();
  char buf[24];
  out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  return *this;
}
JsonWriter& JsonWriter::Double(double v) {
  Sep();
  // Finite values only (JSON has no NaN or infinity); six significant digits are plenty here.
  if (!std::isfinite(v) || v == 0) {
    out_ += '0';
    return *this;
  }
  char buf[32];
  out_.append(buf, std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6).ptr);
  return *this;
}
JsonWriter& JsonWriter::Uint(uint64_t v) {
  Sep();
  char buf[24];
  out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  return *this;
}
JsonWriter& JsonWriter::Bool(bool v) {
  Sep();
  out_ += v ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::Null() {
  Sep();
  out_ += "null";
  return *this;
}

}  // namespace muster
