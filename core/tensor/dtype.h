// Element types of host and device tensors, and exact scalar conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace seedvae {

enum class DType : uint8_t { kF32, kF16, kBF16, kF64 };

constexpr int64_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kF64: return 8;
  }
  return 0;
}

// Lower-case user-facing name: "fp32", "fp16", "bf16", "fp64".
std::string_view dtype_name(DType t);
// safetensors spelling: "F32", "F16", "BF16", "F64".
std::string_view dtype_safetensors_name(DType t);
std::optional<DType> dtype_from_safetensors_name(std::string_view s);
// Accepts "fp32"/"f32"/"float32", "fp16"/"f16"/"half", "bf16"/"bfloat16", "fp64".
std::optional<DType> dtype_from_name(std::string_view s);

// IEEE binary16 and bfloat16 bit patterns <-> float. float->half and float->bfloat16 round to
// nearest, ties to even; NaN stays NaN, overflow goes to infinity. half->float is exact.
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Converts `n` elements between any two dtypes (src and dst must not overlap unless equal types).
void convert_elements(const void* src, DType src_type, void* dst, DType dst_type, int64_t n);

}  // namespace seedvae
