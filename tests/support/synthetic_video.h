// Synthetic test inputs: a video shared by the tiling tests (a smooth moving pattern plus a little
// noise in (-1, 1), like the reference data's video inputs), and a random latent (standard
// normal, like an encoder's mean) for the decoder tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "core/tensor/host_tensor.h"

namespace seedvae::test {

inline HostTensor synthetic_video(int64_t frames, int64_t h, int64_t w, uint64_t seed) {
  HostTensor t(DType::kF32, Shape{1, 3, frames, h, w});
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  float* p = t.data<float>();
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) {
          const double v = 0.6 * std::sin(0.11 * x + 0.07 * y + 0.3 * f + c) *
                           std::cos(0.05 * y - 0.13 * x * (c + 1) / 3.0);
          *p++ = static_cast<float>(v) + u(rng);
        }
      }
    }
  }
  return t;
}

inline HostTensor random_latent(int64_t z, int64_t t, int64_t h, int64_t w, uint32_t seed) {
  HostTensor x(DType::kF32, Shape{1, z, t, h, w});
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  for (float& v : x.f32()) v = n(rng);
  return x;
}

}  // namespace seedvae::test
