#include "core/backend/op_checks.h"

#include <string>

namespace seedvae {
namespace {

std::string str(const Shape& s) {
  return s.to_string();
}

std::string prefix(std::string_view op, std::string_view arg) {
  return std::string(op) + ": " + std::string(arg);
}

// A parameter tensor of exactly `shape`; `optional` lets it be undefined.
Status check_parameter(const Tensor& t, const Shape& shape, bool optional, std::string_view op,
                       std::string_view arg) {
  if (!t.defined()) {
    return optional ? Status::ok() : invalid_argument(prefix(op, arg) + " is undefined");
  }
  if (t.shape != shape) {
    return invalid_argument(prefix(op, arg) + " must be " + str(shape) + ", got " + str(t.shape));
  }
  return Status::ok();
}

}  // namespace

Status check_rank5(const Shape& s, std::string_view op, std::string_view arg) {
  if (s.rank() != 5) {
    return invalid_argument(prefix(op, arg) + " must be 5-D [N, C, T, H, W], got " + str(s));
  }
  return Status::ok();
}

Status check_upload(const HostTensor& host, std::string_view what) {
  int64_t n = 0;
  if (!host.shape().checked_numel(&n) || n * dtype_size(host.dtype()) != host.nbytes()) {
    return invalid_argument(std::string(what) + ": host tensor " + str(host.shape()) + " holds " +
                            std::to_string(host.nbytes()) + " bytes of " +
                            std::string(dtype_name(host.dtype())));
  }
  return Status::ok();
}

Status check_download_frames(const Shape& src, const HostTensor& dst, int64_t frame_offset) {
  const Shape& d = dst.shape();
  if (src.rank() != 5 || d.rank() != 5 || dst.dtype() != DType::kF32 || src[0] != d[0] ||
      src[1] != d[1] || src[3] != d[3] || src[4] != d[4] || frame_offset < 0 ||
      frame_offset + src[2] > d[2]) {
    return invalid_argument("download_frames: cannot place " + src.to_string() + " at frame " +
                            std::to_string(frame_offset) + " of an fp32 " + d.to_string() +
                            " host tensor");
  }
  return Status::ok();
}

Result<Shape> conv3d_output_shape(const Shape& x, const Shape& w, const Conv3dParams& p) {
  SEEDVAE_TRY(check_rank5(x, "conv3d", "input"));
  if (w.rank() != 5) {
    return invalid_argument("conv3d: weight must be 5-D [Cout, Cin, kT, kH, kW], got " + str(w));
  }
  if (w[1] != x.c()) {
    return invalid_argument("conv3d: input " + str(x) + " has " + std::to_string(x.c()) +
                            " channels but weight " + str(w) + " expects " + std::to_string(w[1]));
  }
  if (p.stride_t < 1 || p.stride_h < 1 || p.stride_w < 1 || p.pad_top < 0 || p.pad_bottom < 0 ||
      p.pad_left < 0 || p.pad_right < 0) {
    return invalid_argument("conv3d: strides must be >= 1 and padding >= 0");
  }
  for (int i = 0; i < 5; ++i) {
    if (x[i] < 1 || w[i] < 1) {
      return invalid_argument("conv3d: empty input " + str(x) + " or weight " + str(w));
    }
  }
  const int64_t hp = x.h() + p.pad_top + p.pad_bottom;
  const int64_t wp = x.w() + p.pad_left + p.pad_right;
  if (x.t() < w[2] || hp < w[3] || wp < w[4]) {
    return invalid_argument("conv3d: input " + str(x) + " (padded H " + std::to_string(hp) +
                            ", W " + std::to_string(wp) + ") is smaller than the kernel of " +
                            str(w));
  }
  return Shape{x.n(), w[0], (x.t() - w[2]) / p.stride_t + 1, (hp - w[3]) / p.stride_h + 1,
               (wp - w[4]) / p.stride_w + 1};
}

Status check_conv3d_bias(const Tensor& bias, const Shape& w) {
  return check_parameter(bias, Shape{w[0]}, true, "conv3d", "bias");
}

Result<Shape> causal_pad_shape(const Shape& x, const Shape* memory, int frames) {
  SEEDVAE_TRY(check_rank5(x, "causal_pad", "input"));
  int64_t k = frames;
  if (memory != nullptr) {
    SEEDVAE_TRY(check_rank5(*memory, "causal_pad", "memory"));
    const Shape& m = *memory;
    if (m.n() != x.n() || m.c() != x.c() || m.h() != x.h() || m.w() != x.w()) {
      return invalid_argument("causal_pad: memory " + str(m) + " and input " + str(x) +
                              " differ outside the frame axis");
    }
    k = m.t();
  } else {
    if (frames < 0) return invalid_argument("causal_pad: negative frame count");
    if (frames > 0 && x.t() < 1) {
      return invalid_argument("causal_pad: input " + str(x) + " has no frame to replicate");
    }
  }
  Shape out = x;
  out[2] = x.t() + k;
  return out;
}

Result<Shape> slice_frames_shape(const Shape& x, int64_t begin, int64_t end) {
  SEEDVAE_TRY(check_rank5(x, "slice_frames", "input"));
  if (begin < 0 || end < begin || end > x.t()) {
    return invalid_argument("slice_frames: range [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") is outside the frames of " + str(x));
  }
  Shape out = x;
  out[2] = end - begin;
  return out;
}

Status check_frame_copy(const Shape& dst, int64_t dst_frame, const Shape& src, int64_t src_frame,
                        int64_t count) {
  const bool same_rest = dst.rank() == 5 && src.rank() == 5 && dst[0] == src[0] &&
                         dst[1] == src[1] && dst[3] == src[3] && dst[4] == src[4];
  if (!same_rest || count < 0 || dst_frame < 0 || src_frame < 0 || dst_frame + count > dst[2] ||
      src_frame + count > src[2]) {
    return invalid_argument("copy_frames_into: frames [" + std::to_string(src_frame) + ", +" +
                            std::to_string(count) + ") of " + src.to_string() + " do not fit at " +
                            std::to_string(dst_frame) + " of " + dst.to_string());
  }
  return Status::ok();
}

Result<Shape> concat_frames_shape(const Shape& a, const Shape& b) {
  SEEDVAE_TRY(check_rank5(a, "concat_frames", "first"));
  SEEDVAE_TRY(check_rank5(b, "concat_frames", "second"));
  if (a.n() != b.n() || a.c() != b.c() || a.h() != b.h() || a.w() != b.w()) {
    return invalid_argument("concat_frames: " + str(a) + " and " + str(b) +
                            " differ outside the frame axis");
  }
  Shape out = a;
  out[2] = a.t() + b.t();
  return out;
}

Status check_group_norm(const Shape& x, const Tensor& gamma, const Tensor& beta,
                        const GroupNormParams& p, std::string_view op) {
  SEEDVAE_TRY(check_rank5(x, op, "input"));
  const int64_t c = x.c();
  if (p.groups < 1 || c % p.groups != 0) {
    return invalid_argument(std::string(op) + ": " + std::to_string(c) + " channels of " + str(x) +
                            " are not divisible into " + std::to_string(p.groups) + " groups");
  }
  if (!(p.eps >= 0.f)) return invalid_argument(std::string(op) + ": eps must be >= 0");
  SEEDVAE_TRY(check_parameter(gamma, Shape{c}, true, op, "gamma"));
  return check_parameter(beta, Shape{c}, true, op, "beta");
}

Status check_add(const Shape& acc, const Shape& x) {
  if (acc != x) {
    return invalid_argument("add_inplace: accumulator " + str(acc) + " and addend " + str(x) +
                            " differ in shape");
  }
  return Status::ok();
}

Result<Shape> depth_to_space_shape(const Shape& s, int z, bool drop_frame_1) {
  SEEDVAE_TRY(check_rank5(s, "depth_to_space", "input"));
  if (z != 1 && z != 2) {
    return invalid_argument("depth_to_space: temporal factor must be 1 or 2, got " +
                            std::to_string(z));
  }
  if (drop_frame_1 && z != 2) {
    return invalid_argument("depth_to_space: drop_frame_1 needs temporal factor 2");
  }
  if (s.c() < 1 || s.c() % (4 * z) != 0) {
    return invalid_argument("depth_to_space: " + std::to_string(s.c()) + " channels of " +
                            s.to_string() + " are not a positive multiple of " +
                            std::to_string(4 * z));
  }
  if (drop_frame_1 && s.t() < 1) {
    return invalid_argument("depth_to_space: cannot drop frame 1 of an empty input " +
                            s.to_string());
  }
  return Shape{s.n(), s.c() / (4 * z), s.t() * z - (drop_frame_1 ? 1 : 0), 2 * s.h(), 2 * s.w()};
}

Status check_attention(const Shape& x, const AttentionWeights& w) {
  constexpr std::string_view op = "attention";
  SEEDVAE_TRY(check_rank5(x, op, "input"));
  const int64_t c = x.c();
  if (c < 1 || w.groups < 1 || c % w.groups != 0) {
    return invalid_argument("attention: " + std::to_string(c) + " channels of " + str(x) +
                            " are not divisible into " + std::to_string(w.groups) + " groups");
  }
  if (!(w.eps >= 0.f)) return invalid_argument("attention: eps must be >= 0");
  const Shape mat{c, c}, vec{c};
  SEEDVAE_TRY(check_parameter(w.norm_weight, vec, false, op, "norm weight"));
  SEEDVAE_TRY(check_parameter(w.norm_bias, vec, false, op, "norm bias"));
  SEEDVAE_TRY(check_parameter(w.wq, mat, false, op, "to_q weight"));
  SEEDVAE_TRY(check_parameter(w.bq, vec, false, op, "to_q bias"));
  SEEDVAE_TRY(check_parameter(w.wk, mat, false, op, "to_k weight"));
  SEEDVAE_TRY(check_parameter(w.bk, vec, false, op, "to_k bias"));
  SEEDVAE_TRY(check_parameter(w.wv, mat, false, op, "to_v weight"));
  SEEDVAE_TRY(check_parameter(w.bv, vec, false, op, "to_v bias"));
  SEEDVAE_TRY(check_parameter(w.wo, mat, false, op, "to_out weight"));
  return check_parameter(w.bo, vec, false, op, "to_out bias");
}

Status check_zeros(const Shape& s) {
  SEEDVAE_TRY(check_rank5(s, "zeros", "shape"));
  for (int i = 0; i < 5; ++i) {
    if (s[i] < 0) return invalid_argument("zeros: negative dimension in " + str(s));
  }
  return Status::ok();
}

Status check_rms_norm(const Shape& x, const Tensor& gamma, const RmsNormParams& p) {
  SEEDVAE_TRY(check_rank5(x, "rms_norm", "input"));
  if (x.c() < 1) return invalid_argument("rms_norm: input " + str(x) + " has no channel");
  if (!(p.eps > 0.f)) return invalid_argument("rms_norm: eps must be > 0");
  return check_parameter(gamma, Shape{x.c()}, true, "rms_norm", "gamma");
}

Result<Shape> upsample_nearest_shape(const Shape& x) {
  SEEDVAE_TRY(check_rank5(x, "upsample_nearest", "input"));
  return Shape{x.n(), x.c(), x.t(), 2 * x.h(), 2 * x.w()};
}

Result<Shape> frames_from_channels_shape(const Shape& x, int factor) {
  SEEDVAE_TRY(check_rank5(x, "frames_from_channels", "input"));
  if (factor < 1 || x.c() % factor != 0) {
    return invalid_argument("frames_from_channels: " + std::to_string(x.c()) + " channels of " +
                            str(x) + " are not divisible by the factor " + std::to_string(factor));
  }
  return Shape{x.n(), x.c() / factor, x.t() * factor, x.h(), x.w()};
}

Result<Shape> patchify_shape(const Shape& x, int p) {
  SEEDVAE_TRY(check_rank5(x, "patchify", "input"));
  if (p < 1 || x.h() % p != 0 || x.w() % p != 0) {
    return invalid_argument("patchify: height and width of " + str(x) +
                            " must be multiples of the patch size " + std::to_string(p));
  }
  return Shape{x.n(), x.c() * p * p, x.t(), x.h() / p, x.w() / p};
}

Result<Shape> unpatchify_shape(const Shape& x, int p) {
  SEEDVAE_TRY(check_rank5(x, "unpatchify", "input"));
  if (p < 1 || x.c() % (int64_t{p} * p) != 0) {
    return invalid_argument("unpatchify: " + std::to_string(x.c()) + " channels of " + str(x) +
                            " are not a multiple of " + std::to_string(p * p));
  }
  return Shape{x.n(), x.c() / (int64_t{p} * p), x.t(), x.h() * p, x.w() * p};
}

Result<Shape> avg_down_shape(const Shape& x, const AvgDownParams& p) {
  SEEDVAE_TRY(check_rank5(x, "avg_down", "input"));
  if (p.ft < 1 || p.fs < 1 || x.h() % p.fs != 0 || x.w() % p.fs != 0) {
    return invalid_argument("avg_down: factors (" + std::to_string(p.ft) + ", " +
                            std::to_string(p.fs) + ") must be >= 1 and the spatial one divide " +
                            "the height and width of " + str(x));
  }
  const int64_t f = int64_t{p.ft} * p.fs * p.fs;
  if (p.out_channels < 1 || x.c() < 1 || (x.c() * f) % p.out_channels != 0) {
    return invalid_argument("avg_down: " + std::to_string(p.out_channels) +
                            " output channels do not divide the " + std::to_string(x.c() * f) +
                            " expanded channels of " + str(x));
  }
  return Shape{x.n(), p.out_channels, (x.t() + p.ft - 1) / p.ft, x.h() / p.fs, x.w() / p.fs};
}

Result<Shape> dup_up_shape(const Shape& x, const DupUpParams& p) {
  SEEDVAE_TRY(check_rank5(x, "dup_up", "input"));
  if (p.ft < 1 || p.fs < 1) return invalid_argument("dup_up: factors must be >= 1");
  const int64_t f = int64_t{p.ft} * p.fs * p.fs;
  if (p.out_channels < 1 || x.c() < 1 || (p.out_channels * f) % x.c() != 0) {
    return invalid_argument("dup_up: the " + std::to_string(x.c()) + " channels of " + str(x) +
                            " do not divide " + std::to_string(p.out_channels * f) +
                            " expanded output channels");
  }
  if (p.drop_first && x.t() < 1) {
    return invalid_argument("dup_up: cannot drop the first frames of an empty input " + str(x));
  }
  return Shape{x.n(), p.out_channels, x.t() * p.ft - (p.drop_first ? p.ft - 1 : 0), x.h() * p.fs,
               x.w() * p.fs};
}

Status check_rms_attention(const Shape& x, const RmsAttentionWeights& w) {
  constexpr std::string_view op = "rms_attention";
  SEEDVAE_TRY(check_rank5(x, op, "input"));
  const int64_t c = x.c();
  if (c < 1) return invalid_argument("rms_attention: input " + str(x) + " has no channel");
  const Shape mat{c, c}, vec{c};
  SEEDVAE_TRY(check_parameter(w.gamma, vec, false, op, "norm gamma"));
  SEEDVAE_TRY(check_parameter(w.wq, mat, false, op, "q weight"));
  SEEDVAE_TRY(check_parameter(w.bq, vec, false, op, "q bias"));
  SEEDVAE_TRY(check_parameter(w.wk, mat, false, op, "k weight"));
  SEEDVAE_TRY(check_parameter(w.bk, vec, false, op, "k bias"));
  SEEDVAE_TRY(check_parameter(w.wv, mat, false, op, "v weight"));
  SEEDVAE_TRY(check_parameter(w.bv, vec, false, op, "v bias"));
  SEEDVAE_TRY(check_parameter(w.wo, mat, false, op, "proj weight"));
  return check_parameter(w.bo, vec, false, op, "proj bias");
}

}  // namespace seedvae
