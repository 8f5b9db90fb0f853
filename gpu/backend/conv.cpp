// The CUDA backend's conv3d: argument checks and the choice of path, then 1x1x1 convolutions as
// one cuBLASLt product, few input channels (encoder conv_in) through im2col, few output channels
// (decoder conv_out) through per-frame tap products, and everything else through cuDNN (with
// channel padding and an NCDHW detour where cuDNN lacks a channels-last algorithm). The largest
// op, so a unit of its own.
#include <algorithm>

#include "gpu/backend/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/conv_small.h"
#include "gpu/kernels/elementwise.h"

namespace seedvae::gpu::detail {

Result<Tensor> CudaBackend::conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                                   const Conv3dParams& p) {
  constexpr std::string_view op = "conv3d";
  SEEDVAE_TRY(check_thread(op));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * ws, storage_of(w, op, "weight"));
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, conv3d_output_shape(x.shape, w.shape, p));
  if (ws->kind != Kind::kConvWeight && ws->kind != Kind::kMatrix) {
    return invalid_argument("conv3d: weight " + str(w.shape) +
                            " must be a convolution weight uploaded with upload_weight");
  }
  SEEDVAE_TRY(check_conv3d_bias(b, w.shape));
  const float* bias = nullptr;
  if (b.defined()) {
    SEEDVAE_ASSIGN_OR_RETURN(bias, vector_of(b, op, "bias"));
  }
  const std::string what = "conv3d " + str(x.shape) + " * " + str(w.shape);
  const Layout layout = xs->layout;
  const ElemType et = elem_of(act_);
  // fp32 products where the card has TF32: exact for 16-bit operands (10-bit mantissas or fewer)
  const MathMode exact16 = cc_ >= 80 ? MathMode::kTf32 : MathMode::kStrict;
  if (p.model_output && act_ != DType::kF32) {
    // The model's output in fp32: no final rounding to 16 bits. The few-outputs path (the
    // decoder's conv_out) accumulates in fp32 anyway and only changes its output type; others
    // (the encoder's conv_out, at latent resolution) run on fp32 copies of input and weight.
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out, 0, what + " output", DType::kF32));
    void* yp = storage(y)->ptr();
    if (few_outputs_path(x.shape, w.shape, p, layout)) {
      SEEDVAE_TRY(conv3d_into(x.shape, xs->ptr(), layout, w.shape, ws->ptr(), bias, p, out, yp,
                              {et, ElemType::kF32, math_, false}, what)
                      .take_status());
      return y;
    }
    const int64_t xn = x.shape.numel(), wn = w.shape.numel();
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr x32, alloc_->allocate(xn * 4, what + " fp32 input"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr w32, alloc_->allocate(wn * 4, what + " fp32 weight"));
    launch_convert(et, xs->ptr(), ElemType::kF32, x32->ptr, xn, stream_);
    launch_convert(elem_of(w.dtype), ws->ptr(), ElemType::kF32, w32->ptr, wn, stream_);
    constexpr ElemType f = ElemType::kF32;
    SEEDVAE_TRY(conv3d_into(x.shape, x32->ptr, layout, w.shape, w32->ptr, bias, p, out, yp,
                            {f, f, exact16, false}, what + " (fp32 output)")
                    .take_status());
    return y;
  }
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out, 0, what + " output"));
  CudaStorage* ys = storage(y);
  if (fp8_ && fp8_path(x.shape, w.shape, p, layout)) {
    SEEDVAE_ASSIGN_OR_RETURN(const Fp8Weight* qw, fp8_weight(w, what));
    const Status st = conv_fp8(x.shape, xs->ptr(), w.shape, *qw, p, out, ys->ptr(), what);
    if (st.is_ok()) {
      ++fp8_convs_;
      if (bias && opt_.fuse_bias) {
        ys->pending_bias = bias;
        ys->bias_owner = b.storage;
      } else if (bias) {
        launch_add_bias(et, layout, ys->ptr(), bias, dims5(out), stream_);
        SEEDVAE_TRY(check_launch(what + " bias"));
      }
      return y;
    }
    if (st.code() != StatusCode::kUnsupported) return st;
    ++fp8_refused_;  // no FP8 engine for this problem: 16-bit operands below
  }
  if (fp16_convs_) {
    // Fidelity: the convolution runs on an fp16 copy of the input with the fp16 weights; its
    // fp16 output comes back to fp32 with the bias added there. The copies live for this op.
    constexpr ElemType h = ElemType::kF16;
    const int64_t xn = x.shape.numel(), yn = out.numel();
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr x16, alloc_->allocate(xn * 2, what + " fp16 input"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr y16, alloc_->allocate(yn * 2, what + " fp16 output"));
    launch_convert(ElemType::kF32, xs->ptr(), h, x16->ptr, xn, stream_);
    SEEDVAE_ASSIGN_OR_RETURN(
        const bool added, conv3d_into(x.shape, x16->ptr, layout, w.shape, ws->ptr(), bias, p, out,
                                      y16->ptr, {h, h, math_, true}, what + " (fp16 operands)"));
    launch_convert_bias(h, y16->ptr, ElemType::kF32, ys->ptr(), added ? nullptr : bias, layout,
                        dims5(out), stream_);
    SEEDVAE_TRY(check_launch(what));
    return y;
  }
  SEEDVAE_ASSIGN_OR_RETURN(const bool added,
                           conv3d_into(x.shape, xs->ptr(), layout, w.shape, ws->ptr(), bias, p, out,
                                       ys->ptr(), {et, et, math_, opt_.fuse_bias}, what));
  if (bias && !added) {
    ys->pending_bias = bias;
    ys->bias_owner = b.storage;
  }
  return y;
}

namespace {

// The cuDNN problem of a convolution of an input of dims xd (spatially padded already where
// pad_for_cudnn made the padding explicit; ph/pw the symmetric padding left to cuDNN).
ConvProblem conv_problem(ElemType et, Layout layout, MathMode math, const Dims5& xd,
                         const Shape& wsh, const Conv3dParams& p, int ph, int pw) {
  ConvProblem cp;
  cp.type = et;
  cp.layout = layout;
  cp.math = math;
  cp.cin = xd.c;
  cp.t = xd.t;
  cp.h = xd.h;
  cp.w = xd.w;
  cp.cout = wsh[0];
  cp.kt = wsh[2];
  cp.kh = wsh[3];
  cp.kw = wsh[4];
  cp.st = p.stride_t;
  cp.sh = p.stride_h;
  cp.sw = p.stride_w;
  cp.ph = ph;
  cp.pw = pw;
  return cp;
}

}  // namespace

// cuDNN pads symmetrically: asymmetric padding (Downsample3D's (0, 1, 0, 1)) is made explicit in
// a padded copy (returned; x and xd then describe it, ph = pw = 0); symmetric padding is left to
// cuDNN (ph, pw).
Result<BlockPtr> CudaBackend::pad_for_cudnn(ElemType et, Layout layout, const Conv3dParams& p,
                                            const void*& x, Dims5& xd, int& ph, int& pw,
                                            const std::string& what) {
  if (p.pad_top == p.pad_bottom && p.pad_left == p.pad_right) {
    ph = p.pad_top;
    pw = p.pad_left;
    return BlockPtr{};
  }
  PadArgs pa;
  pa.type = et;
  pa.layout = layout;
  pa.in = xd;
  pa.top = p.pad_top;
  pa.bottom = p.pad_bottom;
  pa.left = p.pad_left;
  pa.right = p.pad_right;
  pa.x = x;
  xd.h += p.pad_top + p.pad_bottom;
  xd.w += p.pad_left + p.pad_right;
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr padded,
                           alloc_->allocate(xd.numel() * elem_size(et), what + " padded input"));
  pa.y = padded->ptr;
  launch_pad_hw(pa, stream_);
  SEEDVAE_TRY(check_launch(what + " padding"));
  x = padded->ptr;
  ph = pw = 0;
  return padded;
}

bool CudaBackend::fp8_path(const Shape& xsh, const Shape& wsh, const Conv3dParams& p,
                           Layout layout) const {
  const int64_t cin = xsh.c(), cout = wsh[0];
  return layout == Layout::kNDHWC && act_ != DType::kF32 && cin >= 16 && cout >= 16 &&
         cin % 16 == 0 && cout % 16 == 0 && !few_outputs_path(xsh, wsh, p, layout);
}

Result<const CudaBackend::Fp8Weight*> CudaBackend::fp8_weight(const Tensor& w,
                                                              const std::string& what) {
  auto it = fp8_weights_.find(w.storage.get());
  if (it != fp8_weights_.end() && !it->second.original.expired()) return &it->second;
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * ws, storage_of(w, "conv3d", "weight"));
  const int64_t cout = w.shape[0], n = w.shape.numel(), row = n / cout;
  Fp8Weight q;
  q.original = w.storage;
  SEEDVAE_ASSIGN_OR_RETURN(q.values, alloc_->allocate(n, what + " e4m3 weight"));
  SEEDVAE_ASSIGN_OR_RETURN(q.scales, alloc_->allocate(cout * 4, what + " e4m3 weight scales"));
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr amax, alloc_->allocate(cout * 4, what + " weight amax"));
  float* am = static_cast<float*>(amax->ptr);
  float* sc = static_cast<float*>(q.scales->ptr);
  launch_row_amax(elem_of(w.dtype), ws->ptr(), cout, row, am, stream_);
  launch_e4m3_scales(am, sc, cout, stream_);
  launch_quantize_e4m3(elem_of(w.dtype), ws->ptr(), q.values->ptr, n, sc, row, stream_);
  SEEDVAE_TRY(check_launch(what + " weight quantisation"));
  // entries of weights freed since go with this one (their blocks return to the allocator)
  std::erase_if(fp8_weights_, [](const auto& e) { return e.second.original.expired(); });
  Fp8Weight& slot = fp8_weights_[w.storage.get()];
  slot = std::move(q);
  return &slot;
}

Status CudaBackend::conv_fp8(const Shape& xsh, const void* x, const Shape& wsh, const Fp8Weight& w,
                             const Conv3dParams& p, const Shape& out, void* y,
                             const std::string& what) {
  const ElemType et = elem_of(act_);
  const int64_t es = elem_size(et);
  const void* xin = x;
  Dims5 xd = dims5(xsh);
  int ph = 0, pw = 0;
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr padded,
                           pad_for_cudnn(et, Layout::kNDHWC, p, xin, xd, ph, pw, what));
  // the activation's per-tensor scale at this call: amax, scale, e4m3 copy
  const int64_t xn = xd.numel();
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr xq, alloc_->allocate(xn, what + " e4m3 input"));
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr sx, alloc_->allocate(8, what + " input amax and scale"));
  float* am = static_cast<float*>(sx->ptr);
  launch_row_amax(et, xin, 1, xn, am, stream_);
  launch_e4m3_scales(am, am + 1, 1, stream_);
  launch_quantize_e4m3(et, xin, xq->ptr, xn, am + 1, xn, stream_);
  SEEDVAE_TRY(check_launch(what + " input quantisation"));

  GraphConvProblem g = graph_problem_of(
      conv_problem(et, Layout::kNDHWC, MathMode::kStrict, xd, wsh, p, ph, pw), GraphType::kFp8E4M3,
      act_ == DType::kF16 ? GraphType::kF16 : GraphType::kBF16);
  g.x_scale = g.w_scale = true;
  // pieces of output frames: input and output of a piece below 2^31 elements or the
  // configured limit (frames of NDHWC are contiguous, so a piece is an offset)
  const int64_t out_frame = out.c() * out.h() * out.w(), in_frame = g.cin * xd.h * xd.w;
  const int64_t limit =
      opt_.max_conv_elements > 0 ? opt_.max_conv_elements : (int64_t{1} << 31) - 1;
  const int64_t by_out = limit / out_frame;
  const int64_t by_in = (limit / in_frame - g.kt) / g.st + 1;
  const int64_t piece = std::max<int64_t>(1, std::min({by_out, by_in, out.t()}));
  if (out_frame > limit || in_frame * g.kt > limit) {
    return unsupported(what + ": one frame exceeds the FP8 path's element limit");
  }
  GraphConvArgs a;
  a.w = w.values->ptr;
  a.x_scale = am + 1;
  a.w_scale = static_cast<const float*>(w.scales->ptr);
  for (int64_t t0 = 0; t0 < out.t(); t0 += piece) {
    const int64_t n = std::min(piece, out.t() - t0);
    g.t = (n - 1) * g.st + g.kt;
    a.x = static_cast<const char*>(xq->ptr) + t0 * g.st * in_frame;
    a.y = static_cast<char*>(y) + t0 * out_frame * es;
    SEEDVAE_TRY(graph_conv_->run(g, a, what + " (FP8)"));
  }
  return check_launch(what + " (FP8)");
}

bool CudaBackend::few_outputs_path(const Shape& xsh, const Shape& wsh, const Conv3dParams& p,
                                   Layout layout) {
  const bool last = layout == Layout::kNDHWC;
  const int64_t taps = wsh[2] * wsh[3] * wsh[4];
  const bool pointwise = taps == 1 && p.stride_t == 1 && p.stride_h == 1 && p.stride_w == 1 &&
                         p.pad_top == 0 && p.pad_bottom == 0 && p.pad_left == 0 && p.pad_right == 0;
  const bool few_inputs = last && xsh.c() < 8 && xsh.c() * taps <= 256;
  const bool unit_stride = p.stride_t == 1 && p.stride_h == 1 && p.stride_w == 1;
  return !pointwise && !few_inputs && last && wsh[0] < 8 && unit_stride &&
         tap_gather_supported(static_cast<int>(wsh[2]), wsh[0]);
}

Result<bool> CudaBackend::conv3d_into(const Shape& xsh, const void* x, Layout layout,
                                      const Shape& wsh, const void* w, const float* bias,
                                      const Conv3dParams& p, const Shape& out, void* y,
                                      const ConvInto& how, const std::string& what) {
  const ElemType et = how.et;
  const MathMode math = how.math;
  const bool defer_bias = how.defer_bias;
  const bool few_outputs = few_outputs_path(xsh, wsh, p, layout);
  if (how.yt != et && !few_outputs) {
    return internal_error(what + ": an output type of its own needs the few-outputs path");
  }
  const int64_t es = elem_size(et);

  const bool pointwise = wsh[2] == 1 && wsh[3] == 1 && wsh[4] == 1 && p.stride_t == 1 &&
                         p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
                         p.pad_bottom == 0 && p.pad_left == 0 && p.pad_right == 0;
  if (pointwise) {
    // 1x1x1 convolution = one matrix product over all pixels.
    const int64_t cin = xsh.c(), cout = wsh[0];
    const int64_t pix = xsh.t() * xsh.h() * xsh.w();
    if (layout == Layout::kNDHWC) {
      RowGemm g;
      g.m = xsh.n() * pix;
      g.n = cout;
      g.k = cin;
      g.a = x;
      g.lda = cin;
      g.b = w;
      g.ldb = cin;
      g.trans_b = true;
      g.d = y;
      g.ldd = cout;
      g.bias = bias;
      g.ab_type = g.cd_type = et;
      SEEDVAE_TRY(gemm_->run(g, math, what));
    } else {
      for (int64_t n = 0; n < xsh.n(); ++n) {
        RowGemm g;
        g.m = cout;
        g.n = pix;
        g.k = cin;
        g.a = w;
        g.lda = cin;
        g.b = static_cast<const char*>(x) + n * cin * pix * es;
        g.ldb = pix;
        g.d = static_cast<char*>(y) + n * cout * pix * es;
        g.ldd = pix;
        g.ab_type = g.cd_type = et;
        SEEDVAE_TRY(gemm_->run(g, math, what));
      }
      if (bias) launch_add_bias(et, layout, y, bias, dims5(out), stream_);
    }
    SEEDVAE_TRY(check_launch(what));
    return true;
  }

  // General 3-D convolution through cuDNN, one sample at a time.
  const void* xin = x;
  Dims5 xd = dims5(xsh);
  int ph = 0, pw = 0;
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr padded, pad_for_cudnn(et, layout, p, xin, xd, ph, pw, what));
  const int64_t cin = xsh.c(), cout = wsh[0];
  const int64_t taps = wsh[2] * wsh[3] * wsh[4];
  // fp16/bf16 ignore the math mode; fidelity's fp16 problems share fp16's autotune entries
  const ConvProblem cp =
      conv_problem(et, layout, et == ElemType::kF32 ? math : MathMode::kStrict, xd, wsh, p, ph, pw);
  const int64_t in_sample = cin * xd.t * xd.h * xd.w;
  const int64_t out_pix = out.t() * out.h() * out.w();
  const bool last = layout == Layout::kNDHWC;
  const bool few_inputs = last && cin < 8 && cin * taps <= 256;
  const int64_t ys = elem_size(how.yt);
  for (int64_t n = 0; n < xsh.n(); ++n) {
    const void* xn = static_cast<const char*>(xin) + n * in_sample * es;
    void* yn = static_cast<char*>(y) + n * cout * out_pix * ys;
    if (few_inputs) {
      SEEDVAE_TRY(conv_few_inputs(cp, xn, w, bias, yn, what));
    } else if (few_outputs) {
      SEEDVAE_TRY(conv_few_outputs(cp, xn, w, bias, yn, how.yt, what));
    } else {
      SEEDVAE_TRY(conv_cudnn(cp, xn, w, yn, what));
      if (bias && !defer_bias) {
        Dims5 od = dims5(out);
        od.n = 1;
        launch_add_bias(et, layout, yn, bias, od, stream_);
      }
    }
  }
  SEEDVAE_TRY(check_launch(what));
  return few_inputs || few_outputs || !defer_bias || bias == nullptr;
}

// cuDNN, with channels-last channel counts padded to multiples of 8 (zero channels and zero
// filters) and, when cuDNN has no channels-last algorithm (large fp32 problems), a detour
// through NCDHW.
Status CudaBackend::conv_cudnn(const ConvProblem& p, const void* x, const void* w, void* y,
                               const std::string& what) {
  const ElemType et = p.type;
  const int64_t es = elem_size(et);
  const int64_t taps = p.kt * p.kh * p.kw;
  const int64_t in_pix = p.t * p.h * p.w, out_pix = p.out_t() * p.out_h() * p.out_w();
  if (p.layout == Layout::kNCDHW) return conv_->run(p, x, w, y, what);
  const bool pad_c = p.cin % 8 != 0 || p.cout % 8 != 0;
  ConvProblem q = p;
  BlockPtr wpad, xpad, ypad;
  const void* xw = x;
  const void* ww = w;
  void* yw = y;
  if (pad_c) {
    q.cin = (p.cin + 7) / 8 * 8;
    q.cout = (p.cout + 7) / 8 * 8;
    SEEDVAE_ASSIGN_OR_RETURN(
        wpad, alloc_->allocate(q.cout * taps * q.cin * es, what + " channel-padded weight"));
    SEEDVAE_CUDA_TRY(cudaMemsetAsync(wpad->ptr, 0, q.cout * taps * q.cin * es, stream_), what);
    launch_pad_channels(et, w, p.cin, wpad->ptr, q.cin, p.cout * taps, stream_);
    ww = wpad->ptr;
    SEEDVAE_ASSIGN_OR_RETURN(xpad,
                             alloc_->allocate(in_pix * q.cin * es, what + " channel-padded input"));
    launch_pad_channels(et, x, p.cin, xpad->ptr, q.cin, in_pix, stream_);
    xw = xpad->ptr;
    if (q.cout != p.cout) {
      SEEDVAE_ASSIGN_OR_RETURN(
          ypad, alloc_->allocate(out_pix * q.cout * es, what + " channel-padded output"));
      yw = ypad->ptr;
    }
  }
  Status st = Status(StatusCode::kUnsupported, "");
  if (fp16_accumulate_ && et == ElemType::kF16 && q.cin * q.t * q.h * q.w < (int64_t{1} << 31) &&
      q.cout * q.out_t() * q.out_h() * q.out_w() < (int64_t{1} << 31)) {
    // fp16 accumulation through the graph API; what its engines refuse keeps fp32 accumulation
    GraphConvProblem g = graph_problem_of(q, GraphType::kF16, GraphType::kF16);
    g.half_accumulate = true;
    GraphConvArgs a;
    a.x = xw;
    a.w = ww;
    a.y = yw;
    st = graph_conv_->run(g, a, what + " (fp16 accumulation)");
    if (st.is_ok()) ++fp16_accumulated_;
  }
  if (st.code() == StatusCode::kUnsupported) st = conv_either_api(q, xw, ww, yw, what);
  if (st.code() == StatusCode::kUnsupported) {
    const std::string channels_last_error = st.message();
    // NCDHW detour: transpose input and weight, convolve, transpose the output back.
    BlockPtr xt, wt, yt;
    SEEDVAE_ASSIGN_OR_RETURN(xt, alloc_->allocate(in_pix * q.cin * es, what + " NCDHW input"));
    SEEDVAE_ASSIGN_OR_RETURN(wt,
                             alloc_->allocate(q.cout * taps * q.cin * es, what + " KCRS weight"));
    SEEDVAE_ASSIGN_OR_RETURN(yt, alloc_->allocate(out_pix * q.cout * es, what + " NCDHW output"));
    launch_transpose(et, xw, et, xt->ptr, 1, q.cin, in_pix, false, stream_);
    launch_transpose(et, ww, et, wt->ptr, q.cout, q.cin, taps, false, stream_);
    ConvProblem r = q;
    r.layout = Layout::kNCDHW;
    st = conv_->run(r, xt->ptr, wt->ptr, yt->ptr, what + " (NCDHW detour)");
    if (st.is_ok()) {
      launch_transpose(et, yt->ptr, et, yw, 1, q.cout, out_pix, true, stream_);
    } else if (st.code() == StatusCode::kUnsupported) {
      st = unsupported(channels_last_error + "; " + st.message());
    }
  }
  SEEDVAE_TRY(st);
  if (ypad) launch_pad_channels(et, ypad->ptr, q.cout, y, p.cout, out_pix, stream_);
  return Status::ok();
}

// With autotune, a 16-bit channels-last convolution runs on whichever of cuDNN's two APIs is
// faster for its problem: the legacy one (its fastest algorithm) or the graph API (its fastest
// engine configuration). They differ most on channel counts their kernels' tiles fit badly
// (`seedvae_gpu_bench convprobe` on an H200: 96 channels at 720p, 4.4 ms against 6.3; 192
// channels at 360p, 3.2 against 2.8). The first call of a problem runs both (each tuning itself),
// times one more run of each, and runs the winner last so its output is the winner's. The graph
// must be 15 % faster: its engines sum in another order, and where they gain less the legacy
// algorithms' results (whose error against the fp32 reference is measured and documented) stay. The
// choice (graph engine index, or kLegacyApi) is persisted with the autotune cache, and a persisted
// engine is taken again without timing, so a problem runs the same kernel from run to run and on
// every device of a pipelined decode.
Status CudaBackend::conv_either_api(const ConvProblem& q, const void* x, const void* w, void* y,
                                    const std::string& what) {
  const bool sixteen = q.type == ElemType::kBF16 || q.type == ElemType::kF16;
  const bool fits = q.cin * q.t * q.h * q.w < (int64_t{1} << 31) &&
                    q.cout * q.out_t() * q.out_h() * q.out_w() < (int64_t{1} << 31);
  if (!graph_conv_ || !opt_.autotune || !opt_.graph_api || !sixteen || !fits ||
      q.layout != Layout::kNDHWC) {
    return conv_->run(q, x, w, y, what);
  }
  const GraphType gt = q.type == ElemType::kF16 ? GraphType::kF16 : GraphType::kBF16;
  const GraphConvProblem g = graph_problem_of(q, gt, gt);
  GraphConvArgs a;
  a.x = x;
  a.w = w;
  a.y = y;
  const std::string key = "api " + g.key();
  constexpr int kLegacyApi = -2;
  int choice = conv_->external_choice(key);
  if (choice == -1) {
    SEEDVAE_TRY(conv_->run(q, x, w, y, what));                        // tunes the legacy algorithm
    const Status gs = graph_conv_->run(g, a, what + " (graph API)");  // tunes the engines
    choice = kLegacyApi;
    if (gs.is_ok()) {
      cudaEvent_t e[3] = {};
      cudaError_t made = cudaSuccess;
      for (cudaEvent_t& ev : e) {
        if (made == cudaSuccess) made = cudaEventCreate(&ev);
      }
      if (made != cudaSuccess) {
        for (cudaEvent_t ev : e) {
          if (ev) cudaEventDestroy(ev);
        }
        SEEDVAE_CUDA_TRY(made, what + " (timing the two APIs)");
      }
      cudaEventRecord(e[0], stream_);
      Status s = conv_->run(q, x, w, y, what);
      cudaEventRecord(e[1], stream_);
      if (s.is_ok()) s = graph_conv_->run(g, a, what + " (graph API)");
      cudaEventRecord(e[2], stream_);
      float legacy_ms = 0, graph_ms = 0;
      const bool timed = s.is_ok() && cudaEventSynchronize(e[2]) == cudaSuccess &&
                         cudaEventElapsedTime(&legacy_ms, e[0], e[1]) == cudaSuccess &&
                         cudaEventElapsedTime(&graph_ms, e[1], e[2]) == cudaSuccess;
      for (cudaEvent_t ev : e) cudaEventDestroy(ev);
      SEEDVAE_TRY(s);
      if (timed && graph_ms < 0.85f * legacy_ms) choice = graph_conv_->plan_info(g).chosen;
    } else if (gs.code() != StatusCode::kUnsupported) {
      return gs;
    }
    conv_->set_external_choice(key, choice);
  } else if (choice >= 0) {
    graph_conv_->prefer(g, choice);
  }
  if (choice >= 0) {
    const Status s = graph_conv_->run(g, a, what + " (graph API)");
    if (s.is_ok()) ++graph_api_convs_;
    if (s.code() != StatusCode::kUnsupported) return s;
  }
  return conv_->run(q, x, w, y, what);
}

// Few input channels (encoder conv_in): im2col with K = taps * Cin padded to a multiple of 8,
// then one product per group of output frames with the bias in the GEMM epilogue.
Status CudaBackend::conv_few_inputs(const ConvProblem& p, const void* x, const void* w,
                                    const float* bias, void* y, const std::string& what) {
  const ElemType et = p.type;
  const int64_t es = elem_size(et);
  const int64_t kreal = p.kt * p.kh * p.kw * p.cin;
  const int64_t kp = (kreal + 31) / 32 * 32;  // also a multiple of the 16-byte vector width
  const int64_t ho = p.out_h(), wo = p.out_w(), to = p.out_t();
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr w2,
                           alloc_->allocate(p.cout * kp * es, what + " im2col weight"));
  launch_pad_channels(et, w, kreal, w2->ptr, kp, p.cout, stream_);
  const int64_t frame_bytes = ho * wo * kp * es;
  const int64_t group =
      std::clamp<int64_t>((int64_t{256} << 20) / std::max<int64_t>(1, frame_bytes), 1, to);
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr col, alloc_->allocate(group * frame_bytes, what + " im2col"));
  for (int64_t t0 = 0; t0 < to; t0 += group) {
    const int64_t g = std::min(group, to - t0);
    Im2colArgs a;
    a.type = et;
    a.x = x;
    a.h = p.h;
    a.w = p.w;
    a.cin = p.cin;
    a.kt = static_cast<int>(p.kt);
    a.kh = static_cast<int>(p.kh);
    a.kw = static_cast<int>(p.kw);
    a.st = p.st;
    a.sh = p.sh;
    a.sw = p.sw;
    a.ph = p.ph;
    a.pw = p.pw;
    a.ho = ho;
    a.wo = wo;
    a.t0 = t0;
    a.frames = g;
    a.kp = kp;
    a.col = col->ptr;
    launch_im2col(a, stream_);
    RowGemm gm;
    gm.m = g * ho * wo;
    gm.n = p.cout;
    gm.k = kp;
    gm.a = col->ptr;
    gm.lda = kp;
    gm.b = w2->ptr;
    gm.ldb = kp;
    gm.trans_b = true;
    gm.d = static_cast<char*>(y) + t0 * ho * wo * p.cout * es;
    gm.ldd = p.cout;
    gm.bias = bias;
    gm.ab_type = gm.cd_type = et;
    SEEDVAE_TRY(gemm_->run(gm, p.math, what + " (im2col product)"));
  }
  return check_launch(what);
}

// Few output channels (decoder conv_out): per input frame, P[pixels, taps * Cout] = x W^T
// (fp32), then every output pixel gathers its taps from the neighbouring rows into an fp32
// accumulator; bias and conversion at the end. Stride 1, symmetric padding.
Status CudaBackend::conv_few_outputs(const ConvProblem& p, const void* x, const void* w,
                                     const float* bias, void* y, ElemType yt,
                                     const std::string& what) {
  const ElemType et = p.type;
  const int64_t es = elem_size(et);
  const int64_t taps = p.kt * p.kh * p.kw;
  const int64_t j = taps * p.cout;
  const int64_t ho = p.out_h(), wo = p.out_w(), to = p.out_t();
  const int64_t hw = p.h * p.w;
  // weight rows reordered from KRSC (co, kt, kh, kw) to (kh, kw, kt, co), padded with zero rows
  // to jp (a multiple of 16) so the product has well-shaped tiles
  const int64_t jp = (j + 15) / 16 * 16;
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr wt, alloc_->allocate(jp * p.cin * es, what + " tap weight"));
  SEEDVAE_CUDA_TRY(cudaMemsetAsync(wt->ptr, 0, jp * p.cin * es, stream_), what);
  const int64_t sp = p.kh * p.kw;  // spatial taps
  for (int64_t co = 0; co < p.cout; ++co) {
    for (int64_t kti = 0; kti < p.kt; ++kti) {
      // source rows (co, kti, s) for s < sp are contiguous; destination row
      // (s * kt + kti) * cout + co
      SEEDVAE_CUDA_TRY(
          cudaMemcpy2DAsync(static_cast<char*>(wt->ptr) + (kti * p.cout + co) * p.cin * es,
                            p.kt * p.cout * p.cin * es,
                            static_cast<const char*>(w) + ((co * p.kt + kti) * sp) * p.cin * es,
                            p.cin * es, p.cin * es, sp, cudaMemcpyDeviceToDevice, stream_),
          what);
    }
  }
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr acc,
                           alloc_->allocate(to * ho * wo * p.cout * 4, what + " accumulator"));
  SEEDVAE_CUDA_TRY(cudaMemsetAsync(acc->ptr, 0, to * ho * wo * p.cout * 4, stream_), what);
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr prod, alloc_->allocate(hw * jp * 4, what + " tap products"));
  for (int64_t f = 0; f < p.t; ++f) {
    RowGemm gm;
    gm.m = hw;
    gm.n = jp;
    gm.k = p.cin;
    gm.a = static_cast<const char*>(x) + f * hw * p.cin * es;
    gm.lda = p.cin;
    gm.b = wt->ptr;
    gm.ldb = p.cin;
    gm.trans_b = true;
    gm.d = prod->ptr;
    gm.ldd = jp;
    gm.ab_type = et;
    gm.cd_type = ElemType::kF32;
    SEEDVAE_TRY(gemm_->run(gm, p.math, what + " (tap products)"));
    TapGatherArgs a;
    a.y = static_cast<const float*>(prod->ptr);
    a.ldy = jp;
    a.acc = static_cast<float*>(acc->ptr);
    a.frame = f;
    a.t_out = to;
    a.h = p.h;
    a.w = p.w;
    a.ho = ho;
    a.wo = wo;
    a.cout = p.cout;
    a.kt = static_cast<int>(p.kt);
    a.kh = static_cast<int>(p.kh);
    a.kw = static_cast<int>(p.kw);
    a.ph = p.ph;
    a.pw = p.pw;
    launch_tap_gather(a, stream_);
  }
  launch_bias_convert(static_cast<const float*>(acc->ptr), bias, to * ho * wo, p.cout, yt, y,
                      stream_);
  return check_launch(what);
}

}  // namespace seedvae::gpu::detail
