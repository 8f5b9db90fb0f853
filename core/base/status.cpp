#include "core/base/status.h"

namespace seedvae {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kCorruptData: return "corrupt data";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfMemory: return "out of memory";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kDeviceError: return "device error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string s(status_code_name(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::with_context(std::string_view context) const& {
  Status copy = *this;
  return std::move(copy).with_context(context);
}

Status Status::with_context(std::string_view context) && {
  if (!is_ok()) message_ = std::string(context) + ": " + message_;
  return std::move(*this);
}

}  // namespace seedvae
