#include "core/tensor/shape.h"

namespace seedvae {

bool Shape::checked_numel(int64_t* out) const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return false;
    if (d != 0 && n > INT64_MAX / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

}  // namespace seedvae
