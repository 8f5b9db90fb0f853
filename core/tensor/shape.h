// Tensor shapes. Activations are 5-D [N, C, T, H, W] (PyTorch NCDHW), row-major, W fastest.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace seedvae {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& dims() const { return dims_; }

  // Product of the dimensions (1 for rank 0). Callers validate against overflow on untrusted input
  // with checked_numel().
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  // False if a dimension is negative or the product overflows int64.
  bool checked_numel(int64_t* out) const;

  // "[1, 3, 17, 64, 64]"
  std::string to_string() const;

  bool operator==(const Shape&) const = default;

  // Named accessors for 5-D activations.
  int64_t n() const { return dims_[0]; }
  int64_t c() const { return dims_[1]; }
  int64_t t() const { return dims_[2]; }
  int64_t h() const { return dims_[3]; }
  int64_t w() const { return dims_[4]; }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace seedvae
