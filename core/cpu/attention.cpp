// The mid-block spatial self-attention of the CPU backend (docs/model.md §2.1, "Attention(C)").
//
// PyTorch equivalent, per frame (tokens P = H*W, one head of dim C):
//   t = GroupNorm(x) as [P, C];  q, k, v = t @ Wq.T + bq, ...;
//   y = x + softmax(q @ k.T / sqrt(C)) @ v @ Wo.T + bo
// A channels-last frame is already the token-major [P, C] matrix, so every product is a plain
// oneDNN matmul (Linear weights [out, in] are read transposed in place; biases fused; the residual
// is a fused sum post-op onto y, which starts as a copy of x). q is pre-scaled by 1/sqrt(C).
// Scores are formed for blocks of at most B query rows ([B, P] with B*P <= ~4M floats, B >= 64
// where P allows), so memory is O(B*P + P*C) per frame rather than O(P^2). Softmax subtracts the
// row max, uses a vectorised expf and sums in double.
#include "core/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/cpu/parallel.h"

namespace seedvae::cpu {

Status attention_cl(const float* x, float* y, const Dims5& d, const AttentionPtrs& w, int threads,
                    MatmulEngine& mm, const std::shared_ptr<MemoryCounters>& counters) {
  const int64_t C = d.c;
  const int64_t P = d.h * d.w;
  const int64_t max_block = std::min<int64_t>(P, std::max<int64_t>(64, (int64_t{1} << 22) / P));
  const int64_t blocks = (P + max_block - 1) / max_block;
  const int64_t block = (P + blocks - 1) / blocks;  // equal blocks: at most two primitive shapes

  SEEDVAE_ASSIGN_OR_RETURN(
      Buffer work, Buffer::allocate(5 * P * C * 4, counters,
                                    "attention normed/q/k/v/a (" + std::to_string(P) + " tokens)"));
  SEEDVAE_ASSIGN_OR_RETURN(
      Buffer scores, Buffer::allocate(block * P * 4, counters,
                                      "attention scores block [" + std::to_string(block) + ", " +
                                          std::to_string(P) + "]"));
  float* normed = work.f32();
  float* q = normed + P * C;
  float* k = q + P * C;
  float* v = k + P * C;
  float* a = v + P * C;
  float* s = scores.f32();

  copy_f32(y, x, d.numel(), threads);  // residual; to_out accumulates onto it
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(C)));
  const Dims5 frame{1, C, 1, d.h, d.w};
  MatmulProblem linear;  // [P, C] x W^T + b
  linear.m = P;
  linear.n = C;
  linear.k = C;
  linear.lda = linear.ldb = linear.ldc = C;
  linear.b_transposed = true;
  linear.bias = true;
  MatmulProblem out = linear;
  out.accumulate = true;

  for (int64_t f = 0; f < d.frames(); ++f) {
    const float* xf = x + f * P * C;
    float* yf = y + f * P * C;
    if (w.rms) {
      rms_norm_cl(xf, normed, frame, w.norm_weight, 1e-12f, false, threads);
    } else {
      group_norm_cl(xf, normed, frame, w.norm_weight, w.norm_bias, w.groups, w.eps, false, threads);
    }
    SEEDVAE_TRY(mm.run(linear, normed, w.wq, w.bq, q));
    SEEDVAE_TRY(mm.run(linear, normed, w.wk, w.bk, k));
    SEEDVAE_TRY(mm.run(linear, normed, w.wv, w.bv, v));
    scale_f32(q, P * C, scale, threads);
    for (int64_t i0 = 0; i0 < P; i0 += block) {
      const int64_t rows = std::min(block, P - i0);
      MatmulProblem qk;  // s = q_blk k^T
      qk.m = rows;
      qk.n = P;
      qk.k = C;
      qk.lda = C;
      qk.ldb = C;
      qk.ldc = P;
      qk.b_transposed = true;
      SEEDVAE_TRY(mm.run(qk, q + i0 * C, k, nullptr, s));
      softmax_rows(s, rows, P, threads);
      MatmulProblem sv;  // a_blk = s v
      sv.m = rows;
      sv.n = C;
      sv.k = P;
      sv.lda = P;
      sv.ldb = C;
      sv.ldc = C;
      SEEDVAE_TRY(mm.run(sv, s, v, nullptr, a + i0 * C));
    }
    SEEDVAE_TRY(mm.run(out, a, w.wo, w.bo, yf));
  }
  return Status::ok();
}

}  // namespace seedvae::cpu
