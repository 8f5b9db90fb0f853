// The mid-block spatial self-attention of the CPU backend. Internal to core/cpu.
#pragma once

#include <memory>

#include "core/base/status.h"
#include "core/cpu/cpu_storage.h"
#include "core/cpu/gemm_engine.h"
#include "core/cpu/kernels.h"

namespace seedvae::cpu {

// Raw pointers of the attention weights (all fp32, plain row-major).
struct AttentionPtrs {
  const float* norm_weight = nullptr;
  const float* norm_bias = nullptr;
  const float *wq = nullptr, *bq = nullptr, *wk = nullptr, *bk = nullptr;
  const float *wv = nullptr, *bv = nullptr, *wo = nullptr, *bo = nullptr;
  int groups = 32;
  float eps = 1e-6f;
  // The Wan attention: RMS norm with gain norm_weight (no bias) instead of GroupNorm.
  bool rms = false;
};

// y = x + to_out(softmax(q k^T / sqrt(C)) v) per frame, x and y channels-last (docs/model.md §2.1).
// Temporaries are counted in `counters`; extra memory is O(block x tokens + tokens x C).
Status attention_cl(const float* x, float* y, const Dims5& d, const AttentionPtrs& w, int threads,
                    MatmulEngine& mm, const std::shared_ptr<MemoryCounters>& counters);

}  // namespace seedvae::cpu
