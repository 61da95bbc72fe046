// Status and Result<T>: the error convention of every module (docs/architecture.md).
//
// Codes are gRPC's canonical set so the RPC boundary maps them 1:1. Messages say what failed and,
// where it helps, what to do about it. Thread-safe value types.
#pragma once

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace muster {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "NOT_FOUND: job 12 does not exist"
  std::string ToString() const;

  // Returns a copy whose message is "prefix: message".
  Status Prepend(std::string_view prefix) const;

  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}

// "what: strerror(errno)" as an INTERNAL (or the given code) status.
Status ErrnoStatus(std::string_view what, int err, StatusCode code = StatusCode::kInternal);

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status");
  }

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace muster

#define MUSTER_CONCAT_INNER_(a, b) a##b
#define MUSTER_CONCAT_(a, b) MUSTER_CONCAT_INNER_(a, b)

// Each expansion gets its own variable name (__COUNTER__) so nested uses, e.g. inside a lambda
// passed to another use, do not shadow each other.
#define MUSTER_RETURN_IF_ERROR_IMPL_(var, expr) \
  do {                                          \
    ::muster::Status var = (expr);              \
    if (!var.ok()) return var;                  \
  } while (0)
#define MUSTER_RETURN_IF_ERROR(expr) \
  MUSTER_RETURN_IF_ERROR_IMPL_(MUSTER_CONCAT_(muster_status_, __COUNTER__), expr)

#define MUSTER_RETURN_IF_ERROR_PREPEND_IMPL_(var, expr, prefix) \
  do {                                                          \
    ::muster::Status var = (expr);                              \
    if (!var.ok()) return var.Prepend(prefix);                  \
  } while (0)
#define MUSTER_RETURN_IF_ERROR_PREPEND(expr, prefix) \
  MUSTER_RETURN_IF_ERROR_PREPEND_IMPL_(MUSTER_CONCAT_(muster_status_, __COUNTER__), expr, prefix)

#define MUSTER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define MUSTER_ASSIGN_OR_RETURN(lhs, expr) \
  MUSTER_ASSIGN_OR_RETURN_IMPL_(MUSTER_CONCAT_(muster_result_, __COUNTER__), lhs, expr)
