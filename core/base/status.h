// Errors are values at every module boundary (ARCHITECTURE.md, "Error model").
//
// Status carries a code, a human-readable message and where it was raised. Result<T> is either a
// value or a non-OK Status (C++20 has no std::expected). Nothing in core/ or gpu/ throws across a
// public function; third-party exceptions (nlohmann-json, OpenCV) are caught in the one .cpp that
// calls the library and converted here.
#pragma once

#include <cassert>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace seedvae {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: options, shapes, configuration
  kNotFound,         // a file, tensor or device that does not exist
  kCorruptData,      // a file whose content is malformed or hostile
  kIoError,          // the OS refused a read or write
  kUnsupported,      // valid request this build or device cannot do
  kOutOfMemory,      // host or device allocation failed
  kCancelled,        // the user cancelled; not an error to report loudly
  kDeviceError,      // CUDA / cuDNN / cuBLAS failure
  kInternal,         // a broken invariant: a bug in SeedVAE
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message,
         std::source_location where = std::source_location::current())
      : code_(code), message_(std::move(message)), file_(where.file_name()), line_(where.line()) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* file() const { return file_; }
  int line() const { return static_cast<int>(line_); }

  // "corrupt data: header length 9000000000 exceeds file size 120"
  std::string to_string() const;

  // Prefixes context: Status(...).with_context("loading weights.safetensors").
  Status with_context(std::string_view context) const&;
  Status with_context(std::string_view context) &&;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  const char* file_ = "";
  unsigned line_ = 0;
};

inline Status invalid_argument(std::string msg,
                               std::source_location w = std::source_location::current()) {
  return {StatusCode::kInvalidArgument, std::move(msg), w};
}
inline Status corrupt_data(std::string msg,
                           std::source_location w = std::source_location::current()) {
  return {StatusCode::kCorruptData, std::move(msg), w};
}
inline Status io_error(std::string msg, std::source_location w = std::source_location::current()) {
  return {StatusCode::kIoError, std::move(msg), w};
}
inline Status not_found(std::string msg, std::source_location w = std::source_location::current()) {
  return {StatusCode::kNotFound, std::move(msg), w};
}
inline Status unsupported(std::string msg,
                          std::source_location w = std::source_location::current()) {
  return {StatusCode::kUnsupported, std::move(msg), w};
}
inline Status out_of_memory(std::string msg,
                            std::source_location w = std::source_location::current()) {
  return {StatusCode::kOutOfMemory, std::move(msg), w};
}
inline Status cancelled(std::string msg = "cancelled by the user",
                        std::source_location w = std::source_location::current()) {
  return {StatusCode::kCancelled, std::move(msg), w};
}
inline Status internal_error(std::string msg,
                             std::source_location w = std::source_location::current()) {
  return {StatusCode::kInternal, std::move(msg), w};
}

// A value or an error. Construct from a T (success) or from a non-OK Status (failure).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).is_ok()) {
      v_ = Status(StatusCode::kInternal, "Result constructed from an OK status without a value");
    }
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  Status take_status() { return is_ok() ? Status() : std::move(std::get<Status>(v_)); }

  T& value() & {
    assert(is_ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(is_ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(is_ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace seedvae

#define SEEDVAE_CONCAT_INNER_(a, b) a##b
#define SEEDVAE_CONCAT_(a, b) SEEDVAE_CONCAT_INNER_(a, b)

// Returns the Status from the enclosing function if `expr` (a Status) is not OK.
#define SEEDVAE_TRY(expr)                                         \
  do {                                                            \
    ::seedvae::Status seedvae_try_status_ = (expr);               \
    if (!seedvae_try_status_.is_ok()) return seedvae_try_status_; \
  } while (0)

// `SEEDVAE_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result<T> or returns its error.
#define SEEDVAE_ASSIGN_OR_RETURN(decl, expr) \
  SEEDVAE_ASSIGN_OR_RETURN_IMPL_(SEEDVAE_CONCAT_(seedvae_result_, __LINE__), decl, expr)
#define SEEDVAE_ASSIGN_OR_RETURN_IMPL_(tmp, decl, expr) \
  auto tmp = (expr);                                    \
  if (!tmp.is_ok()) return tmp.take_status();           \
  decl = std::move(tmp).value()
