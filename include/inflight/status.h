// Status and Result<T>: how errors travel between modules. No exceptions cross a module boundary.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace inflight {

// Codes mirror TRITONSERVER_Error_Code so the backend can translate one-to-one.
enum class StatusCode {
  kOk = 0,
  kUnknown,
  kInternal,
  kNotFound,
  kInvalidArgument,
  kUnavailable,
  kUnsupported,
  kAlreadyExists,
  kCancelled,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARG: message" style, for logs.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) {
  return {StatusCode::kInvalidArgument, std::move(msg)};
}
inline Status NotFound(std::string msg) {
  return {StatusCode::kNotFound, std::move(msg)};
}
inline Status Internal(std::string msg) {
  return {StatusCode::kInternal, std::move(msg)};
}
inline Status Unavailable(std::string msg) {
  return {StatusCode::kUnavailable, std::move(msg)};
}
inline Status Unsupported(std::string msg) {
  return {StatusCode::kUnsupported, std::move(msg)};
}
inline Status Cancelled(std::string msg) {
  return {StatusCode::kCancelled, std::move(msg)};
}
inline Status AlreadyExists(std::string msg) {
  return {StatusCode::kAlreadyExists, std::move(msg)};
}

// Result<T> holds a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an ok Status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace inflight

#define INFLIGHT_CONCAT_INNER(a, b) a##b
#define INFLIGHT_CONCAT(a, b) INFLIGHT_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not ok.
#define RETURN_IF_ERROR(expr)        \
  do {                               \
    ::inflight::Status _st = (expr); \
    if (!_st.ok()) return _st;       \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a Result or returns its Status. lhs is a
// declaration, which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ASSIGN_OR_RETURN(lhs, rexpr)                                                            \
  auto INFLIGHT_CONCAT(_res_, __LINE__) = (rexpr);                                              \
  if (!INFLIGHT_CONCAT(_res_, __LINE__).ok()) return INFLIGHT_CONCAT(_res_, __LINE__).status(); \
  lhs = std::move(INFLIGHT_CONCAT(_res_, __LINE__)).value()
// NOLINTEND(bugprone-macro-parentheses)

// Fails with kInternal naming file:line and the condition; for invariants, not user input.
#define INFLIGHT_CHECK(cond, msg)                                                          \
  do {                                                                                     \
    if (!(cond))                                                                           \
      return ::inflight::Internal(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                                  ": check failed: " #cond ": " + (msg));                  \
  } while (0)
