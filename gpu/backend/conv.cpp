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
  const Shape& xsh = x.shape;
  const Shape& wsh = w.shape;
  const int64_t hp = xsh.h() + p.pad_top + p.pad_bottom;
  const int64_t wp = xsh.w() + p.pad_left + p.pad_right;
  const std::string what = "conv3d " + str(xsh) + " * " + str(wsh);
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out, 0, what + " output"));
  CudaStorage* ys = storage(y);
  const Layout layout = xs->layout;
  const ElemType et = elem_of(act_);
  const int64_t es = dtype_size(act_);

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
      g.a = xs->ptr();
      g.lda = cin;
      g.b = ws->ptr();
      g.ldb = cin;
      g.trans_b = true;
      g.d = ys->ptr();
      g.ldd = cout;
      g.bias = bias;
      g.ab_type = g.cd_type = et;
      SEEDVAE_TRY(gemm_->run(g, math_, what));
    } else {
      for (int64_t n = 0; n < xsh.n(); ++n) {
        RowGemm g;
        g.m = cout;
        g.n = pix;
        g.k = cin;
        g.a = ws->ptr();
        g.lda = cin;
        g.b = static_cast<const char*>(xs->ptr()) + n * cin * pix * es;
        g.ldb = pix;
        g.d = static_cast<char*>(ys->ptr()) + n * cout * pix * es;
        g.ldd = pix;
        g.ab_type = g.cd_type = et;
        SEEDVAE_TRY(gemm_->run(g, math_, what));
      }
      if (bias) launch_add_bias(et, layout, ys->ptr(), bias, dims5(out), stream_);
    }
    SEEDVAE_TRY(check_launch(what));
    return y;
  }

  // General 3-D convolution through cuDNN, one sample at a time.
  const void* xin = xs->ptr();
  Dims5 xd = dims5(xsh);
  BlockPtr padded;
  int ph = 0, pw = 0;
  if (p.pad_top == p.pad_bottom && p.pad_left == p.pad_right) {
    ph = p.pad_top;
    pw = p.pad_left;
  } else {
    // cuDNN pads symmetrically; asymmetric padding (Downsample3D's (0, 1, 0, 1)) is explicit.
    PadArgs pa;
    pa.type = et;
    pa.layout = layout;
    pa.in = xd;
    pa.top = p.pad_top;
    pa.bottom = p.pad_bottom;
    pa.left = p.pad_left;
    pa.right = p.pad_right;
    pa.x = xin;
    xd.h = hp;
    xd.w = wp;
    SEEDVAE_ASSIGN_OR_RETURN(padded, alloc_->allocate(xd.numel() * es, what + " padded input"));
    pa.y = padded->ptr;
    launch_pad_hw(pa, stream_);
    SEEDVAE_TRY(check_launch(what + " padding"));
    xin = padded->ptr;
  }
  const int64_t cin = xsh.c(), cout = wsh[0];
  const int64_t taps = wsh[2] * wsh[3] * wsh[4];
  ConvProblem cp;
  cp.type = et;
  cp.layout = layout;
  cp.math = math_;
  cp.cin = cin;
  cp.t = xd.t;
  cp.h = xd.h;
  cp.w = xd.w;
  cp.cout = cout;
  cp.kt = wsh[2];
  cp.kh = wsh[3];
  cp.kw = wsh[4];
  cp.st = p.stride_t;
  cp.sh = p.stride_h;
  cp.sw = p.stride_w;
  cp.ph = ph;
  cp.pw = pw;
  const int64_t in_sample = cin * xd.t * xd.h * xd.w;
  const int64_t out_pix = out.t() * out.h() * out.w();
  const bool last = layout == Layout::kNDHWC;
  const bool unit_stride = p.stride_t == 1 && p.stride_h == 1 && p.stride_w == 1;
  for (int64_t n = 0; n < xsh.n(); ++n) {
    const void* xn = static_cast<const char*>(xin) + n * in_sample * es;
    void* yn = static_cast<char*>(ys->ptr()) + n * cout * out_pix * es;
    if (last && cin < 8 && cin * taps <= 256) {
      SEEDVAE_TRY(conv_few_inputs(cp, xn, ws->ptr(), bias, yn, what));
    } else if (last && cout < 8 && unit_stride &&
               tap_gather_supported(static_cast<int>(wsh[2]), cout)) {
      SEEDVAE_TRY(conv_few_outputs(cp, xn, ws->ptr(), bias, yn, what));
    } else {
      SEEDVAE_TRY(conv_cudnn(cp, xn, ws->ptr(), yn, what));
      if (bias && !opt_.fuse_bias) {
        Dims5 od = dims5(out);
        od.n = 1;
        launch_add_bias(et, layout, yn, bias, od, stream_);
      }
    }
  }
  if (bias && opt_.fuse_bias && !(last && cin < 8 && cin * taps <= 256) &&
      !(last && cout < 8 && unit_stride && tap_gather_supported(static_cast<int>(wsh[2]), cout))) {
    ys->pending_bias = bias;
    ys->bias_owner = b.storage;
  }
  SEEDVAE_TRY(check_launch(what));
  return y;
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
  Status st = conv_->run(q, xw, ww, yw, what);
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
    SEEDVAE_TRY(gemm_->run(gm, math_, what + " (im2col product)"));
  }
  return check_launch(what);
}

// Few output channels (decoder conv_out): per input frame, P[pixels, taps * Cout] = x W^T
// (fp32), then every output pixel gathers its taps from the neighbouring rows into an fp32
// accumulator; bias and conversion at the end. Stride 1, symmetric padding.
Status CudaBackend::conv_few_outputs(const ConvProblem& p, const void* x, const void* w,
                                     const float* bias, void* y, const std::string& what) {
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
    SEEDVAE_TRY(gemm_->run(gm, math_, what + " (tap products)"));
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
  launch_bias_convert(static_cast<const float*>(acc->ptr), bias, to * ho * wo, p.cout, et, y,
                      stream_);
  return check_launch(what);
}

}  // namespace seedvae::gpu::detail
