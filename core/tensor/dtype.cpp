#include "core/tensor/dtype.h"

#include <bit>
#include <cmath>

namespace seedvae {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "fp32";
    case DType::kF16: return "fp16";
    case DType::kBF16: return "bf16";
    case DType::kF64: return "fp64";
  }
  return "?";
}

std::string_view dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "F64";
  }
  return "?";
}

std::optional<DType> dtype_from_safetensors_name(std::string_view s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  if (s == "F64") return DType::kF64;
  return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view s) {
  if (s == "fp32" || s == "f32" || s == "float32" || s == "F32") return DType::kF32;
  if (s == "fp16" || s == "f16" || s == "half" || s == "float16" || s == "F16") return DType::kF16;
  if (s == "bf16" || s == "bfloat16" || s == "BF16") return DType::kBF16;
  if (s == "fp64" || s == "f64" || s == "float64" || s == "F64") return DType::kF64;
  return std::nullopt;
}

// Hand-written because C++20 has no std::float16_t on GCC 12 and we need bit-exact round to
// nearest even on every compiler (F16C is not guaranteed on the build machine's target).
uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);   // NaN (quiet)
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero) in half: value = m * 2^-24 with m in [0, 1024].
    // Scale by 2^24 in float exactly via integer manipulation, then round to nearest even.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    const uint32_t exp = abs >> 23;                             // biased exponent, 102..112
    const uint32_t mant = (abs & 0x7FFFFFu) | 0x800000u;        // 24-bit significand
    const uint32_t shift = 126u - exp;                          // bits to drop to reach 2^-24 units
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits.
  uint32_t h = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into exponent: correct
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {
      // Subnormal: value = mant * 2^-24; exact in float.
      const float v = static_cast<float>(mant) * 0x1.0p-24f;
      out = sign | std::bit_cast<uint32_t>(v);
    }
  } else if (exp == 31) {
    out = sign | 0x7F800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  const uint32_t lsb = (x >> 16) & 1u;
  return static_cast<uint16_t>((x + 0x7FFFu + lsb) >> 16);
}

namespace {
inline float load_as_float(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return half_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kF64: return static_cast<float>(static_cast<const double*>(p)[i]);
  }
  return 0.f;
}
}  // namespace

void convert_elements(const void* src, DType st, void* dst, DType dt, int64_t n) {
  if (st == dt) {
    if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n * dtype_size(st)));
    return;
  }
  if (dt == DType::kF64) {
    auto* d = static_cast<double*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = load_as_float(src, st, i);
    return;
  }
  if (st == DType::kF64) {
    // Round f64 -> f32 first (what every framework does), then to the 16-bit type.
    const auto* s = static_cast<const double*>(src);
    for (int64_t i = 0; i < n; ++i) {
      const float f = static_cast<float>(s[i]);
      if (dt == DType::kF32)
        static_cast<float*>(dst)[i] = f;
      else if (dt == DType::kF16)
        static_cast<uint16_t*>(dst)[i] = float_to_half_bits(f);
      else
        static_cast<uint16_t*>(dst)[i] = float_to_bf16_bits(f);
    }
    return;
  }
  // The common pairs in loops of their own (no per-element dispatch): the studio converts whole
  // frames for its previews.
  const auto each = [n](const auto* s, auto* d, auto convert) {
    for (int64_t i = 0; i < n; ++i) d[i] = convert(s[i]);
  };
  if (st == DType::kF16 && dt == DType::kF32) {
    each(static_cast<const uint16_t*>(src), static_cast<float*>(dst), half_bits_to_float);
    return;
  }
  if (st == DType::kBF16 && dt == DType::kF32) {
    each(static_cast<const uint16_t*>(src), static_cast<float*>(dst), bf16_bits_to_float);
    return;
  }
  if (st == DType::kF32 && dt == DType::kF16) {
    each(static_cast<const float*>(src), static_cast<uint16_t*>(dst), float_to_half_bits);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float f = load_as_float(src, st, i);
    switch (dt) {
      case DType::kF32: static_cast<float*>(dst)[i] = f; break;
      case DType::kF16: static_cast<uint16_t*>(dst)[i] = float_to_half_bits(f); break;
      case DType::kBF16: static_cast<uint16_t*>(dst)[i] = float_to_bf16_bits(f); break;
      case DType::kF64: break;
    }
  }
}

}  // namespace seedvae
