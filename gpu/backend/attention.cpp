// The CUDA backend's mid-block attentions (SeedVR2's with GroupNorm, Wan's with RMS norm): the
// norm, the q/k/v projections and the output projection with the residual through cuBLASLt, and
// softmax(q k^T) v either in a fused flash-style kernel or materialised block by block through
// cuBLASLt.
#include <algorithm>
#include <cmath>
#include <utility>

#include "gpu/backend/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/attention.h"
#include "gpu/kernels/elementwise.h"
#include "gpu/kernels/wan.h"

namespace seedvae::gpu::detail {

Result<Tensor> CudaBackend::attention(const Tensor& x, const AttentionWeights& w) {
  constexpr std::string_view op = "attention";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
  SEEDVAE_TRY(check_attention(x.shape, w));
  SEEDVAE_ASSIGN_OR_RETURN(const float* ng, vector_of(w.norm_weight, op, "norm weight"));
  SEEDVAE_ASSIGN_OR_RETURN(const float* nb, vector_of(w.norm_bias, op, "norm bias"));
  Projections pr;
  SEEDVAE_ASSIGN_OR_RETURN(pr.wq, matrix_of(w.wq, op, "to_q weight"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.bq, vector_of(w.bq, op, "to_q bias"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.wk, matrix_of(w.wk, op, "to_k weight"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.bk, vector_of(w.bk, op, "to_k bias"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.wv, matrix_of(w.wv, op, "to_v weight"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.bv, vector_of(w.bv, op, "to_v bias"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.wo, matrix_of(w.wo, op, "to_out weight"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.bo, vector_of(w.bo, op, "to_out bias"));
  const std::string what = "attention " + str(x.shape);
  return attend(
      x, xs, pr,
      [&](const void* xt, void* normed) {
        return run_group_norm(xt, normed, Layout::kNDHWC, dims5(x.shape), ng, nb, w.groups, w.eps,
                              false, what + " GroupNorm");
      },
      what);
}

Result<Tensor> CudaBackend::rms_attention(const Tensor& x, const RmsAttentionWeights& w) {
  constexpr std::string_view op = "rms_attention";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
  SEEDVAE_TRY(check_rms_attention(x.shape, w));
  SEEDVAE_ASSIGN_OR_RETURN(const float* gamma, vector_of(w.gamma, op, "norm gamma"));
  Projections pr;
  SEEDVAE_ASSIGN_OR_RETURN(pr.wq, matrix_of(w.wq, op, "q weight"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.bq, vector_of(w.bq, op, "q bias"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.wk, matrix_of(w.wk, op, "k weight"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.bk, vector_of(w.bk, op, "k bias"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.wv, matrix_of(w.wv, op, "v weight"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.bv, vector_of(w.bv, op, "v bias"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.wo, matrix_of(w.wo, op, "proj weight"));
  SEEDVAE_ASSIGN_OR_RETURN(pr.bo, vector_of(w.bo, op, "proj bias"));
  const std::string what = "rms_attention " + str(x.shape);
  return attend(
      x, xs, pr,
      [&](const void* xt, void* normed) {
        RmsNormArgs a;
        a.type = elem_of(act_);
        a.layout = Layout::kNDHWC;  // token-major
        a.d = dims5(x.shape);
        a.x = xt;
        a.y = normed;
        a.gamma = gamma;
        launch_rms_norm(a, stream_);
        return check_launch(what + " RMS norm");
      },
      what);
}

// softmax(q k^T / sqrt(C)) v of the normalised x's projections, per frame, its output projection
// and the residual: the part both attentions share.
Result<Tensor> CudaBackend::attend(const Tensor& x, CudaStorage* xs, const Projections& pr,
                                   const std::function<Status(const void*, void*)>& normalize,
                                   const std::string& what) {
  const int64_t c = x.shape.c();
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(x.shape, 0, what + " output"));
  if (x.shape.numel() == 0) return y;

  const Shape& s = x.shape;
  const int64_t tokens = s.h() * s.w();
  const int64_t frames = s.n() * s.t();
  const int64_t rows = frames * tokens;
  const int64_t es = dtype_size(act_);
  const ElemType et = elem_of(act_);
  const int64_t mat_bytes = rows * c * es;
  // Token-major view of x: [frames * tokens, C].
  const void* xt = xs->ptr();
  BlockPtr xt_buf;
  if (xs->layout == Layout::kNCDHW) {
    SEEDVAE_ASSIGN_OR_RETURN(xt_buf, alloc_->allocate(mat_bytes, what + " token-major input"));
    launch_transpose(et, xs->ptr(), et, xt_buf->ptr, s.n(), c, s.t() * tokens, true, stream_);
    xt = xt_buf->ptr;
  }
  // The normalisation (no SiLU) in token-major layout.
  BlockPtr normed;
  SEEDVAE_ASSIGN_OR_RETURN(normed, alloc_->allocate(mat_bytes, what + " normalised input"));
  SEEDVAE_TRY(normalize(xt, normed->ptr));
  // q, k, v = norm(x) W^T + b.
  BlockPtr qb, kb, vb;
  SEEDVAE_ASSIGN_OR_RETURN(qb, alloc_->allocate(mat_bytes, what + " q"));
  SEEDVAE_ASSIGN_OR_RETURN(kb, alloc_->allocate(mat_bytes, what + " k"));
  SEEDVAE_ASSIGN_OR_RETURN(vb, alloc_->allocate(mat_bytes, what + " v"));
  const std::pair<const void*, const float*> proj[3] = {
      {pr.wq, pr.bq}, {pr.wk, pr.bk}, {pr.wv, pr.bv}};
  void* outs[3] = {qb->ptr, kb->ptr, vb->ptr};
  for (int i = 0; i < 3; ++i) {
    RowGemm g;
    g.m = rows;
    g.n = c;
    g.k = c;
    g.a = normed->ptr;
    g.lda = c;
    g.b = proj[i].first;
    g.ldb = c;
    g.trans_b = true;
    g.d = outs[i];
    g.ldd = c;
    g.bias = proj[i].second;
    g.ab_type = g.cd_type = et;
    SEEDVAE_TRY(gemm_->run(g, math_, what + (i == 0 ? " to_q" : i == 1 ? " to_k" : " to_v")));
  }
  normed.reset();
  BlockPtr ab;  // attention output [rows, C]
  SEEDVAE_ASSIGN_OR_RETURN(ab, alloc_->allocate(mat_bytes, what + " softmax(q k^T) v"));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c)));
  FlashArgs fa;
  fa.type = et;
  fa.q = qb->ptr;
  fa.k = kb->ptr;
  fa.v = vb->ptr;
  fa.o = ab->ptr;
  fa.frames = frames;
  fa.tokens = tokens;
  fa.dim = c;
  fa.scale = scale;
  const FlashKernel fk =
      opt_.fused_attention ? choose_flash_kernel(fa, smem_optin_, cc_) : FlashKernel::kNone;
  if (fk != FlashKernel::kNone) {
    launch_flash_attention(fa, fk, stream_);
    SEEDVAE_TRY(check_launch(what + " fused kernel"));
    ++fused_calls_;
    attention_kernel_ = fk == FlashKernel::kMma ? "mma" : "simt";
  } else {
    SEEDVAE_TRY(
        materialised_attention(qb->ptr, kb->ptr, vb->ptr, ab->ptr, frames, tokens, c, scale, what));
    ++materialised_calls_;
    attention_kernel_ = "materialised";
  }
  qb.reset();
  kb.reset();
  vb.reset();
  // y = a Wo^T + bo + x (residual through cuBLASLt's C operand).
  BlockPtr yt_buf;
  void* yt = storage(y)->ptr();
  if (xs->layout == Layout::kNCDHW) {
    SEEDVAE_ASSIGN_OR_RETURN(yt_buf, alloc_->allocate(mat_bytes, what + " token-major output"));
    yt = yt_buf->ptr;
  }
  RowGemm g;
  g.m = rows;
  g.n = c;
  g.k = c;
  g.a = ab->ptr;
  g.lda = c;
  g.b = pr.wo;
  g.ldb = c;
  g.trans_b = true;
  g.c = xt;
  g.ldc = c;
  g.beta = 1.f;
  g.d = yt;
  g.ldd = c;
  g.bias = pr.bo;
  g.ab_type = g.cd_type = et;
  SEEDVAE_TRY(gemm_->run(g, math_, what + " output projection + residual"));
  if (xs->layout == Layout::kNCDHW) {
    launch_transpose(et, yt, et, storage(y)->ptr(), s.n(), c, s.t() * tokens, false, stream_);
  }
  SEEDVAE_TRY(check_launch(what));
  return y;
}

// softmax(q k^T * scale) v per frame through cuBLASLt, scores materialised for blocks of query
// rows (fp32 scores, probabilities in the compute dtype), at most ~1 GiB at a time.
Status CudaBackend::materialised_attention(const void* q, const void* k, const void* v, void* o,
                                           int64_t frames, int64_t tokens, int64_t c, float scale,
                                           const std::string& what) {
  const int64_t es = dtype_size(act_);
  const ElemType et = elem_of(act_);
  const int64_t budget = int64_t{1} << 30;
  const int64_t blk =
      std::clamp<int64_t>(budget / std::max<int64_t>(1, tokens * (4 + es)), 1, tokens);
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr sb, alloc_->allocate(blk * tokens * 4, what + " scores"));
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr pb,
                           alloc_->allocate(blk * tokens * es, what + " probabilities"));
  for (int64_t f = 0; f < frames; ++f) {
    const char* qf = static_cast<const char*>(q) + f * tokens * c * es;
    const char* kf = static_cast<const char*>(k) + f * tokens * c * es;
    const char* vf = static_cast<const char*>(v) + f * tokens * c * es;
    char* of = static_cast<char*>(o) + f * tokens * c * es;
    for (int64_t r0 = 0; r0 < tokens; r0 += blk) {
      const int64_t rows = std::min(blk, tokens - r0);
      RowGemm s;
      s.m = rows;
      s.n = tokens;
      s.k = c;
      s.a = qf + r0 * c * es;
      s.lda = c;
      s.b = kf;
      s.ldb = c;
      s.trans_b = true;
      s.d = sb->ptr;
      s.ldd = tokens;
      s.alpha = scale;
      s.ab_type = et;
      s.cd_type = ElemType::kF32;
      SEEDVAE_TRY(gemm_->run(s, math_, what + " q k^T"));
      launch_softmax_rows(et, static_cast<const float*>(sb->ptr), pb->ptr, rows, tokens, stream_);
      SEEDVAE_TRY(check_launch(what + " softmax"));
      RowGemm a;
      a.m = rows;
      a.n = c;
      a.k = tokens;
      a.a = pb->ptr;
      a.lda = tokens;
      a.b = vf;
      a.ldb = c;
      a.d = of + r0 * c * es;
      a.ldd = c;
      a.ab_type = a.cd_type = et;
      SEEDVAE_TRY(gemm_->run(a, math_, what + " p v"));
    }
  }
  return Status::ok();
}

}  // namespace seedvae::gpu::detail
