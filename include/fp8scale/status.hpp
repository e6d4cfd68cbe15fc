// fp8scale: the status every launcher returns, and Result<T> for launchers that
// hand back a view. A status names the function and the argument that was
// wrong, so a caller's log line reads "fp8scale::materialize: argument 'ld' =
// 4: must be >= the view's rows (limit 5) [kLdTooSmall]".
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include "platform.hpp"

namespace fp8scale {

enum class StatusCode : std::uint8_t {
  kOk = 0,
  kNullPointer,          ///< a pointer is null while the extent it covers is > 0
  kInvalidShape,         ///< negative extent, or an extent that breaks a rule
  kLdTooSmall,           ///< leading dimension smaller than the extent it strides over
  kUnsupportedGroupSize, ///< group size outside the supported set
  kMisaligned,           ///< a pointer or stride not aligned for the vector width used
  kInvalidValue,         ///< any other bad scalar (eps, fmax, ...)
  kUnsupportedDevice,    ///< the device lacks a needed capability
  kDeviceError,          ///< the runtime reported an error (launch, query)
};

const char* statusCodeName(StatusCode c);

/// Outcome of a launcher call. Trivially copyable: `argument` and `reason` point
/// at string literals; `value` is the offending value when it is an integer.
class Status {
 public:
  constexpr Status() = default;

  static constexpr Status ok() { return Status(); }

  /// `function` and `argument` name the call and its bad parameter; `reason`
  /// says what rule it broke. All three must be string literals.
  static constexpr Status error(StatusCode code, const char* function, const char* argument,
                                const char* reason, std::int64_t value = 0,
                                std::int64_t limit = 0) {
    Status s;
    s.code_ = code;
    s.function_ = function;
    s.argument_ = argument;
    s.reason_ = reason;
    s.value_ = value;
    s.limit_ = limit;
    return s;
  }

  /// As error(), for a floating-point argument (fmax, eps, normEps, limit):
  /// message() prints `value` as a float; value() is 0.
  static Status errorFloat(StatusCode code, const char* function, const char* argument, const char* reason,
                           float value) {
    Status s = error(code, function, argument, reason);
    s.floatValue_ = value;
    s.hasFloatValue_ = true;
    return s;
  }

  static Status fromDevice(const char* function, DeviceError e) {
    Status s = error(StatusCode::kDeviceError, function, "", deviceErrorString(e));
    s.value_ = static_cast<std::int64_t>(e);
    return s;
  }

  constexpr bool isOk() const { return code_ == StatusCode::kOk; }
  constexpr explicit operator bool() const { return isOk(); }
  constexpr StatusCode code() const { return code_; }
  constexpr const char* function() const { return function_; }
  constexpr const char* argument() const { return argument_; }
  constexpr const char* reason() const { return reason_; }
  constexpr std::int64_t value() const { return value_; }
  constexpr std::int64_t limit() const { return limit_; }
  /// The offending value of an errorFloat() status (hasFloatValue()).
  constexpr float floatValue() const { return floatValue_; }
  constexpr bool hasFloatValue() const { return hasFloatValue_; }

  /// One line for logs, e.g.
  /// "fp8scale::materialize: argument 'ld' = 4: ld is smaller than rows (limit 5) [kLdTooSmall]".
  std::string message() const {
    if (isOk()) return "ok";
    std::string m = "fp8scale::";
    m += function_;
    m += ": ";
    if (argument_[0] != '\0') {
      m += "argument '";
      m += argument_;
      m += "' = ";
      if (hasFloatValue_) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(floatValue_));
        m += buf;
      } else {
        m += std::to_string(value_);
      }
      m += ": ";
    }
    m += reason_;
    if (limit_ != 0) {
      m += " (limit ";
      m += std::to_string(limit_);
      m += ")";
    }
    m += " [";
    m += statusCodeName(code_);
    m += "]";
    return m;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  const char* function_ = "";
  const char* argument_ = "";
  const char* reason_ = "";
  std::int64_t value_ = 0;
  std::int64_t limit_ = 0;
  float floatValue_ = 0.0f;
  bool hasFloatValue_ = false;
};

inline const char* statusCodeName(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return "kOk";
    case StatusCode::kNullPointer: return "kNullPointer";
    case StatusCode::kInvalidShape: return "kInvalidShape";
    case StatusCode::kLdTooSmall: return "kLdTooSmall";
    case StatusCode::kUnsupportedGroupSize: return "kUnsupportedGroupSize";
    case StatusCode::kMisaligned: return "kMisaligned";
    case StatusCode::kInvalidValue: return "kInvalidValue";
    case StatusCode::kUnsupportedDevice: return "kUnsupportedDevice";
    case StatusCode::kDeviceError: return "kDeviceError";
  }
  return "unknown";
}

/// A value or the status that prevented it. `value()` of a failed result is the
/// default-constructed T (an empty view), never garbage.
template <class T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(status) {}     // NOLINT: implicit by design
  /// `value` when `status` is ok, else the failure (a launcher's last step:
  /// `return {launched, out};`).
  Result(Status status, T value) : status_(status), value_(status.isOk() ? std::move(value) : T{}) {}

  bool isOk() const { return status_.isOk(); }
  explicit operator bool() const { return isOk(); }
  const Status& status() const { return status_; }
  const T& value() const { return value_; }
  T& value() { return value_; }

 private:
  Status status_{};
  T value_{};
};

}  // namespace fp8scale
