// Inputs shared by the GPU model tests: the tiny configuration's synthetic weights (the golden
// data's recipe) and uniform random tensors in [-1, 1]. No Qt, like the rest of tests/gpu.
#pragma once

#include <cstdint>
#include <random>

#include "core/tensor/host_tensor.h"
#include "core/vae/state_dict.h"

namespace seedvae::test {

inline const VaeWeights& tiny_weights() {
  static const VaeWeights w = synthesize_weights(VaeConfig::tiny(), kTinySeed);
  return w;
}

inline HostTensor random_tensor(const Shape& s, uint32_t seed) {
  HostTensor t(DType::kF32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& v : t.f32()) v = u(rng);
  return t;
}

}  // namespace seedvae::test
