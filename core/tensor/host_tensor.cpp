#include "core/tensor/host_tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace seedvae {

HostTensor::HostTensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  int64_t n = 0;
  if (shape_.checked_numel(&n) && n <= INT64_MAX / dtype_size(dtype_)) {
    bytes_.resize(static_cast<size_t>(n * dtype_size(dtype_)));
    // zero-filled in blocks of 16 MiB, on every core when there are several
    constexpr int64_t kBlock = int64_t{16} << 20;
    const auto size = static_cast<int64_t>(bytes_.size());
    const int64_t blocks = (size + kBlock - 1) / kBlock;
    std::byte* p = bytes_.data();
#pragma omp parallel for schedule(static) if (blocks > 1)
    for (int64_t b = 0; b < blocks; ++b) {
      std::memset(p + b * kBlock, 0, static_cast<size_t>(std::min(kBlock, size - b * kBlock)));
    }
  }
}

Result<HostTensor> HostTensor::create(DType dtype, Shape shape) {
  int64_t n = 0;
  if (!shape.checked_numel(&n) || n > (int64_t{1} << 40) / dtype_size(dtype)) {
    return invalid_argument("tensor shape " + shape.to_string() + " is negative or too large");
  }
  try {
    return HostTensor(dtype, std::move(shape));
  } catch (const std::bad_alloc&) {
    return out_of_memory("cannot allocate a host tensor of " +
                         std::to_string(n * dtype_size(dtype)) + " bytes");
  }
}

HostTensor HostTensor::from_bytes(DType dtype, Shape shape, const void* data) {
  HostTensor t(dtype, std::move(shape));
  if (!t.bytes_.empty()) std::memcpy(t.bytes_.data(), data, t.bytes_.size());
  return t;
}

HostTensor HostTensor::from_floats(Shape shape, std::span<const float> values) {
  HostTensor t(DType::kF32, std::move(shape));
  std::memcpy(t.bytes_.data(), values.data(),
              std::min(t.bytes_.size(), values.size() * sizeof(float)));
  return t;
}

HostTensor HostTensor::to(DType dtype) const {
  HostTensor out(dtype, shape_);
  // in blocks of 4 Mi elements, on every core when there are several (a checkpoint converts
  // gigabytes of causal state)
  constexpr int64_t kBlock = int64_t{4} << 20;
  const int64_t n = numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const auto* src = static_cast<const std::byte*>(raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  const int64_t in = dtype_size(dtype_), on = dtype_size(dtype);
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = b * kBlock;
    convert_elements(src + first * in, dtype_, dst + first * on, dtype,
                     std::min(kBlock, n - first));
  }
  return out;
}

Result<HostTensor> HostTensor::reshaped(Shape shape) const {
  if (shape.numel() != numel()) {
    return invalid_argument("cannot reshape " + shape_.to_string() + " to " + shape.to_string());
  }
  HostTensor out = *this;
  out.shape_ = std::move(shape);
  return out;
}

Result<DiffStats> compare(const HostTensor& actual, const HostTensor& reference) {
  if (actual.shape() != reference.shape()) {
    return invalid_argument("shape mismatch: " + actual.shape().to_string() + " vs reference " +
                            reference.shape().to_string());
  }
  const HostTensor a = actual.to(DType::kF64);
  const HostTensor r = reference.to(DType::kF64);
  const double* pa = a.data<double>();
  const double* pr = r.data<double>();
  DiffStats s;
  s.count = a.numel();
  double sq = 0, sum = 0;
  for (int64_t i = 0; i < s.count; ++i) {
    const double d = std::abs(pa[i] - pr[i]);
    if (!(d <= s.max_abs)) s.max_abs = d;  // NaN propagates as the maximum
    sq += d * d;
    sum += d;
    s.ref_absmax = std::max(s.ref_absmax, std::abs(pr[i]));
  }
  if (s.count > 0) {
    s.rms = std::sqrt(sq / static_cast<double>(s.count));
    s.mean_abs = sum / static_cast<double>(s.count);
  }
  return s;
}

}  // namespace seedvae
