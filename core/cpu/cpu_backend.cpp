// The CPU backend: validation and dispatch of every Backend op, layouts, memory accounting, upload
// and download. Kernels live in norm.cpp, elementwise.cpp, attention.cpp, conv3d_onednn.cpp and
// matmul_onednn.cpp.
//
// Layouts (cpu_storage.h): every activation an op produces, and every 5-D tensor given to
// upload(), is channels-last (NDHWC); parameters from upload_weight() and all tensors of rank != 5
// are plain row-major. Ops accept either layout for any argument (a plain 5-D activation is
// converted into a counted temporary), so the layout never changes results, only speed.
#include "core/cpu/cpu_backend.h"

#include <algorithm>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "core/cpu/attention.h"
#include "core/cpu/cpu_storage.h"
#include "core/cpu/gemm_engine.h"
#include "core/cpu/kernels.h"
#include "core/cpu/parallel.h"

#if SEEDVAE_CPU_ONEDNN
#include <dnnl.hpp>
#else
#include <Eigen/Core>
#endif

namespace seedvae {
namespace {

using cpu::Buffer;
using cpu::CpuStorage;
using cpu::Dims5;
using cpu::Layout;
using cpu::ThreadScope;

std::string str(const Shape& s) {
  return s.to_string();
}

Dims5 dims5(const Shape& s) {
  return {s[0], s[1], s[2], s[3], s[4]};
}

// The CpuStorage behind `t`, or an error naming the op and argument.
Result<CpuStorage*> storage_of(const Tensor& t, std::string_view op, std::string_view arg) {
  const std::string what = std::string(op) + ": " + std::string(arg);
  if (!t.defined()) return invalid_argument(what + " is undefined");
  auto* s = dynamic_cast<CpuStorage*>(t.storage.get());
  if (s == nullptr) return invalid_argument(what + " was not created by the CPU backend");
  if (t.dtype != DType::kF32) {
    return invalid_argument(what + " has dtype " + std::string(dtype_name(t.dtype)) +
                            ", the CPU backend holds fp32");
  }
  if (s->layout == Layout::kChannelsLast && t.shape != s->shape) {
    return invalid_argument(what + " has shape " + str(t.shape) + " but its storage holds a " +
                            str(s->shape) +
                            " channels-last activation (CPU tensors cannot be reshaped)");
  }
  int64_t n = 0;
  if (!t.shape.checked_numel(&n) || n * 4 > s->buffer.bytes()) {
    return invalid_argument(what + " shape " + str(t.shape) + " does not match its storage (" +
                            std::to_string(s->buffer.bytes()) + " bytes)");
  }
  return s;
}

// The data of a parameter whose shape op_checks validated; undefined (optional) gives nullptr.
Result<const float*> parameter(const Tensor& t, std::string_view op, std::string_view arg) {
  if (!t.defined()) return static_cast<const float*>(nullptr);
  SEEDVAE_ASSIGN_OR_RETURN(CpuStorage * s, storage_of(t, op, arg));
  return static_cast<const float*>(s->f32());
}

// A 5-D input seen channels-last: the tensor's own data, or a converted temporary.
struct ActivationIn {
  const float* data = nullptr;
  Buffer converted;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, std::shared_ptr<cpu::MemoryCounters> counters)
      : threads_(threads),
        counters_(std::move(counters)),
        conv_(ctx_, counters_),
        matmul_(ctx_, counters_) {
    name_ = "cpu (" + cpu::gemm_engine_name() + ", " + std::to_string(threads_) +
            (threads_ == 1 ? " thread)" : " threads)");
  }

  std::string name() const override { return name_; }
  DType activation_dtype() const override { return DType::kF32; }

  Result<Tensor> upload(const HostTensor& host) override {
    return upload_impl(host, "upload",
                       host.shape().rank() == 5 ? Layout::kChannelsLast : Layout::kPlain);
  }

  Result<Tensor> upload_weight(const HostTensor& host, std::string_view name) override {
    return upload_impl(host, "upload_weight(" + std::string(name) + ")", Layout::kPlain);
  }

  Result<HostTensor> download(const Tensor& t) override {
    SEEDVAE_ASSIGN_OR_RETURN(CpuStorage * s, storage_of(t, "download", "tensor"));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor host, HostTensor::create(DType::kF32, t.shape));
    if (s->layout == Layout::kChannelsLast) {
      cpu::channels_last_to_plain(s->f32(), host.data<float>(), dims5(t.shape), threads_);
    } else {
      cpu::copy_f32(host.data<float>(), s->f32(), t.shape.numel(), threads_);
    }
    return host;
  }

  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override {
    constexpr std::string_view op = "conv3d";
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, conv3d_output_shape(x.shape, w.shape, p));
    SEEDVAE_ASSIGN_OR_RETURN(CpuStorage * ws, storage_of(w, op, "weight"));
    SEEDVAE_TRY(check_conv3d_bias(b, w.shape));
    SEEDVAE_ASSIGN_OR_RETURN(const float* bias, parameter(b, op, "bias"));
    const Shape& xsh = x.shape;
    const Shape& wsh = w.shape;
    cpu::ConvProblem prob;
    prob.x = dims5(xsh);
    prob.cout = wsh[0];
    prob.kt = wsh[2];
    prob.kh = wsh[3];
    prob.kw = wsh[4];
    prob.p = p;
    prob.has_bias = bias != nullptr;
    prob.y = dims5(out_shape);
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    SEEDVAE_TRY(conv_.run(prob, xin.data, *ws, bias, f32(y)));
    return y;
  }

  Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) override {
    constexpr std::string_view op = "causal_pad";
    const bool has_memory = memory != nullptr && memory->defined();
    SEEDVAE_ASSIGN_OR_RETURN(
        const Shape out_shape,
        causal_pad_shape(x.shape, has_memory ? &memory->shape : nullptr, frames));
    if (has_memory) return concat_impl(*memory, x, out_shape, op, "memory", "input");
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    const Dims5 d = dims5(x.shape);
    for (int f = 0; f < frames; ++f) {
      cpu::copy_frames_cl(f32(y), out_shape.t(), f, xin.data, d, 0, 1, threads_);
    }
    cpu::copy_frames_cl(f32(y), out_shape.t(), frames, xin.data, d, 0, d.t, threads_);
    return y;
  }

  Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) override {
    constexpr std::string_view op = "slice_frames";
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, slice_frames_shape(x.shape, begin, end));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    cpu::copy_frames_cl(f32(y), out_shape.t(), 0, xin.data, dims5(x.shape), begin, end - begin,
                        threads_);
    return y;
  }

  Status copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src, int64_t src_frame,
                          int64_t count) override {
    constexpr std::string_view op = "copy_frames_into";
    SEEDVAE_TRY(check_frame_copy(dst.shape, dst_frame, src.shape, src_frame, count));
    SEEDVAE_ASSIGN_OR_RETURN(CpuStorage * d, storage_of(dst, op, "destination"));
    if (d->layout != Layout::kChannelsLast) {
      return invalid_argument("copy_frames_into: the destination " + str(dst.shape) +
                              " is not an activation (channels-last)");
    }
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn sin, activation_in(src, op, "source"));
    cpu::copy_frames_cl(d->f32(), dst.shape.t(), dst_frame, sin.data, dims5(src.shape), src_frame,
                        count, threads_);
    return Status::ok();
  }

  Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) override {
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, concat_frames_shape(a.shape, b.shape));
    return concat_impl(a, b, out_shape, "concat_frames", "first", "second");
  }

  Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override {
    constexpr std::string_view op = "group_norm";
    SEEDVAE_TRY(check_group_norm(x.shape, gamma, beta, p));
    SEEDVAE_ASSIGN_OR_RETURN(const float* g, parameter(gamma, op, "gamma"));
    SEEDVAE_ASSIGN_OR_RETURN(const float* bt, parameter(beta, op, "beta"));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(x.shape, op));
    try {
      cpu::group_norm_cl(xin.data, f32(y), dims5(x.shape), g, bt, p.groups, p.eps, p.silu,
                         threads_);
    } catch (const std::bad_alloc&) {
      return out_of_memory("group_norm: out of memory for the statistics of " + str(x.shape));
    }
    return y;
  }

  Status add_inplace(Tensor& acc, const Tensor& x) override {
    constexpr std::string_view op = "add_inplace";
    SEEDVAE_ASSIGN_OR_RETURN(CpuStorage * as, storage_of(acc, op, "accumulator"));
    SEEDVAE_ASSIGN_OR_RETURN(CpuStorage * xs, storage_of(x, op, "addend"));
    SEEDVAE_TRY(check_add(acc.shape, x.shape));
    ThreadScope scope(threads_);
    const int64_t n = acc.shape.numel();
    const float* addend = xs->f32();
    Buffer converted;
    if (as->layout != xs->layout && acc.shape.rank() == 5) {
      SEEDVAE_ASSIGN_OR_RETURN(
          converted,
          Buffer::allocate(n * 4, counters_, "add_inplace: relayout of " + str(x.shape)));
      if (as->layout == Layout::kChannelsLast) {
        cpu::plain_to_channels_last(xs->f32(), converted.f32(), dims5(x.shape), threads_);
      } else {
        cpu::channels_last_to_plain(xs->f32(), converted.f32(), dims5(x.shape), threads_);
      }
      addend = converted.f32();
    }
    as->packed.clear();  // repacked weights no longer match
    cpu::add_f32(as->f32(), as->f32(), addend, n, threads_);
    return Status::ok();
  }

  Result<Tensor> depth_to_space(const Tensor& x, int temporal_factor, bool drop_frame_1,
                                int /*context_frames: pads copy on this backend*/ = 2) override {
    constexpr std::string_view op = "depth_to_space";
    const int z = temporal_factor;
    const Shape& s = x.shape;
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, depth_to_space_shape(s, z, drop_frame_1));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    cpu::depth_to_space_cl(xin.data, f32(y), dims5(s), z, drop_frame_1, threads_);
    return y;
  }

  Result<Tensor> attention(const Tensor& x, const AttentionWeights& w) override {
    constexpr std::string_view op = "attention";
    SEEDVAE_TRY(check_attention(x.shape, w));
    cpu::AttentionPtrs ptrs;
    ptrs.groups = w.groups;
    ptrs.eps = w.eps;
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.norm_weight, parameter(w.norm_weight, op, "norm weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.norm_bias, parameter(w.norm_bias, op, "norm bias"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.wq, parameter(w.wq, op, "to_q weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.bq, parameter(w.bq, op, "to_q bias"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.wk, parameter(w.wk, op, "to_k weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.bk, parameter(w.bk, op, "to_k bias"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.wv, parameter(w.wv, op, "to_v weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.bv, parameter(w.bv, op, "to_v bias"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.wo, parameter(w.wo, op, "to_out weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.bo, parameter(w.bo, op, "to_out bias"));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(x.shape, op));
    if (x.shape.numel() == 0) return y;
    try {
      SEEDVAE_TRY(
          cpu::attention_cl(xin.data, f32(y), dims5(x.shape), ptrs, threads_, matmul_, counters_));
    } catch (const std::bad_alloc&) {
      return out_of_memory("attention: out of memory for " + str(x.shape));
    }
    return y;
  }

  // ---- the Wan VAEs' ops (kernels in wan_ops.cpp) ----------------------------------------
  Result<Tensor> zeros(const Shape& shape) override {
    SEEDVAE_TRY(check_zeros(shape));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(shape, "zeros"));
    std::fill_n(f32(y), shape.numel(), 0.f);
    return y;
  }

  Result<Tensor> rms_norm(const Tensor& x, const Tensor& gamma, const RmsNormParams& p) override {
    constexpr std::string_view op = "rms_norm";
    SEEDVAE_TRY(check_rms_norm(x.shape, gamma, p));
    SEEDVAE_ASSIGN_OR_RETURN(const float* g, parameter(gamma, op, "gamma"));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(x.shape, op));
    cpu::rms_norm_cl(xin.data, f32(y), dims5(x.shape), g, p.eps, p.silu, threads_);
    return y;
  }

  Result<Tensor> upsample_nearest(const Tensor& x) override {
    constexpr std::string_view op = "upsample_nearest";
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, upsample_nearest_shape(x.shape));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    cpu::upsample_nearest_cl(xin.data, f32(y), dims5(x.shape), threads_);
    return y;
  }

  Result<Tensor> frames_from_channels(const Tensor& x, int factor) override {
    constexpr std::string_view op = "frames_from_channels";
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, frames_from_channels_shape(x.shape, factor));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    cpu::frames_from_channels_cl(xin.data, f32(y), dims5(x.shape), factor, threads_);
    return y;
  }

  Result<Tensor> patchify(const Tensor& x, int p) override {
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, patchify_shape(x.shape, p));
    return patchify_impl(x, p, out_shape, false, "patchify");
  }

  Result<Tensor> unpatchify(const Tensor& x, int p) override {
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, unpatchify_shape(x.shape, p));
    return patchify_impl(x, p, out_shape, true, "unpatchify");
  }

  Result<Tensor> avg_down(const Tensor& x, const AvgDownParams& p) override {
    constexpr std::string_view op = "avg_down";
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, avg_down_shape(x.shape, p));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    cpu::avg_down_cl(xin.data, f32(y), dims5(x.shape), p.out_channels, p.ft, p.fs, threads_);
    return y;
  }

  Result<Tensor> dup_up(const Tensor& x, const DupUpParams& p) override {
    constexpr std::string_view op = "dup_up";
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, dup_up_shape(x.shape, p));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    cpu::dup_up_cl(xin.data, f32(y), dims5(x.shape), p.out_channels, p.ft, p.fs, p.drop_first,
                   threads_);
    return y;
  }

  Result<Tensor> rms_attention(const Tensor& x, const RmsAttentionWeights& w) override {
    constexpr std::string_view op = "rms_attention";
    SEEDVAE_TRY(check_rms_attention(x.shape, w));
    cpu::AttentionPtrs ptrs;
    ptrs.rms = true;
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.norm_weight, parameter(w.gamma, op, "norm gamma"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.wq, parameter(w.wq, op, "q weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.bq, parameter(w.bq, op, "q bias"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.wk, parameter(w.wk, op, "k weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.bk, parameter(w.bk, op, "k bias"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.wv, parameter(w.wv, op, "v weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.bv, parameter(w.bv, op, "v bias"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.wo, parameter(w.wo, op, "proj weight"));
    SEEDVAE_ASSIGN_OR_RETURN(ptrs.bo, parameter(w.bo, op, "proj bias"));
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(x.shape, op));
    if (x.shape.numel() == 0) return y;
    try {
      SEEDVAE_TRY(
          cpu::attention_cl(xin.data, f32(y), dims5(x.shape), ptrs, threads_, matmul_, counters_));
    } catch (const std::bad_alloc&) {
      return out_of_memory("rms_attention: out of memory for " + str(x.shape));
    }
    return y;
  }

  MemoryStats memory_stats() const override {
    MemoryStats m;
    m.current_bytes = counters_->current.load();
    m.peak_bytes = counters_->peak.load();
    return m;
  }

  void reset_peak() override { counters_->peak.store(counters_->current.load()); }

 private:
  static float* f32(const Tensor& t) { return static_cast<CpuStorage*>(t.storage.get())->f32(); }

  // A new fp32 tensor (channels-last when 5-D, unless `layout` says otherwise).
  Result<Tensor> new_tensor(const Shape& shape, std::string_view op,
                            std::optional<Layout> layout = std::nullopt) {
    int64_t n = 0;
    if (!shape.checked_numel(&n) || n > INT64_MAX / 8) {
      return out_of_memory(std::string(op) + ": fp32 tensor " + str(shape) +
                           " is too large to allocate");
    }
    const Layout l =
        layout ? *layout : (shape.rank() == 5 ? Layout::kChannelsLast : Layout::kPlain);
    SEEDVAE_ASSIGN_OR_RETURN(
        Buffer buf, Buffer::allocate(n * 4, counters_,
                                     "fp32 tensor " + str(shape) + " (" + std::string(op) + ")"));
    try {
      Tensor t;
      t.storage = std::make_shared<CpuStorage>(std::move(buf), l, shape);
      t.shape = shape;
      t.dtype = DType::kF32;
      return t;
    } catch (const std::bad_alloc&) {
      return out_of_memory(std::string(op) + ": out of memory allocating tensor " + str(shape));
    }
  }

  // `t` (validated 5-D) as channels-last data.
  Result<ActivationIn> activation_in(const Tensor& t, std::string_view op, std::string_view arg) {
    SEEDVAE_ASSIGN_OR_RETURN(CpuStorage * s, storage_of(t, op, arg));
    ActivationIn in;
    if (s->layout == Layout::kChannelsLast) {
      in.data = s->f32();
      return in;
    }
    SEEDVAE_ASSIGN_OR_RETURN(
        in.converted,
        Buffer::allocate(t.shape.numel() * 4, counters_,
                         std::string(op) + ": channels-last copy of " + str(t.shape)));
    cpu::plain_to_channels_last(s->f32(), in.converted.f32(), dims5(t.shape), threads_);
    in.data = in.converted.f32();
    return in;
  }

  Result<Tensor> upload_impl(const HostTensor& host, const std::string& what, Layout layout) {
    SEEDVAE_TRY(check_upload(host, what));
    const int64_t n = host.shape().numel();
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor t, new_tensor(host.shape(), what, layout));
    const float* src = host.data<float>();
    Buffer widened;
    if (host.dtype() != DType::kF32) {
      // Widen into the destination (plain) or a temporary (then transposed).
      float* dst = f32(t);
      if (layout == Layout::kChannelsLast) {
        SEEDVAE_ASSIGN_OR_RETURN(widened, Buffer::allocate(n * 4, counters_, what + ": fp32 copy"));
        dst = widened.f32();
      }
      constexpr int64_t kChunk = 1 << 16;
      const auto* raw = static_cast<const std::byte*>(host.raw());
      const int64_t esize = dtype_size(host.dtype());
      cpu::parallel_for((n + kChunk - 1) / kChunk, threads_, [&](int64_t ci) {
        const int64_t i0 = ci * kChunk;
        convert_elements(raw + i0 * esize, host.dtype(), dst + i0, DType::kF32,
                         std::min(kChunk, n - i0));
      });
      if (layout == Layout::kPlain) return t;
      src = widened.f32();
    }
    if (layout == Layout::kChannelsLast) {
      cpu::plain_to_channels_last(src, f32(t), dims5(host.shape()), threads_);
    } else {
      cpu::copy_f32(f32(t), src, n, threads_);
    }
    return t;
  }

  Result<Tensor> patchify_impl(const Tensor& x, int p, const Shape& out_shape, bool inverse,
                               std::string_view op) {
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn xin, activation_in(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    cpu::patchify_cl(xin.data, f32(y), dims5(x.shape), p, inverse, threads_);
    return y;
  }

  // [a, b] along T into a new tensor of the checked shape `out_shape`; `a_arg` and `b_arg` name
  // the inputs in messages.
  Result<Tensor> concat_impl(const Tensor& a, const Tensor& b, const Shape& out_shape,
                             std::string_view op, std::string_view a_arg, std::string_view b_arg) {
    const Shape& sa = a.shape;
    const Shape& sb = b.shape;
    ThreadScope scope(threads_);
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn ain, activation_in(a, op, a_arg));
    SEEDVAE_ASSIGN_OR_RETURN(ActivationIn bin, activation_in(b, op, b_arg));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_tensor(out_shape, op));
    cpu::copy_frames_cl(f32(y), out_shape.t(), 0, ain.data, dims5(sa), 0, sa.t(), threads_);
    cpu::copy_frames_cl(f32(y), out_shape.t(), sa.t(), bin.data, dims5(sb), 0, sb.t(), threads_);
    return y;
  }

  int threads_;
  std::shared_ptr<cpu::MemoryCounters> counters_;
  cpu::GemmContext ctx_;
  cpu::Conv3dEngine conv_;
  cpu::MatmulEngine matmul_;
  std::string name_;
};

}  // namespace

namespace cpu {

std::string gemm_engine_name() {
#if SEEDVAE_CPU_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
#else
  return "portable kernels, Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
         std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION) + " GEMM";
#endif
}

}  // namespace cpu

std::string cpu_backend_libraries() {
  std::string s;
#if SEEDVAE_CPU_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  s = "oneDNN " + std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR) +
      "." + std::to_string(DNNL_VERSION_PATCH) + " (runtime " + std::to_string(v->major) + "." +
      std::to_string(v->minor) + "." + std::to_string(v->patch) + ")";
#else
  s = cpu::gemm_engine_name() + " (no oneDNN)";
#endif
#if defined(_OPENMP)
  s += ", OpenMP " + std::to_string(_OPENMP);
#else
  s += ", no OpenMP";
#endif
  return s;
}

Result<std::unique_ptr<Backend>> create_cpu_backend(const CpuBackendOptions& options) {
  if (options.threads < 0) {
    return invalid_argument("cpu backend: thread count must be >= 0, got " +
                            std::to_string(options.threads));
  }
  const int threads = options.threads > 0 ? options.threads : std::max(1, cpu::processor_count());
  try {
    auto counters = std::make_shared<cpu::MemoryCounters>();
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(threads, std::move(counters)));
#if SEEDVAE_CPU_ONEDNN
  } catch (const dnnl::error& e) {
    return internal_error(std::string("cpu backend: cannot create the oneDNN CPU engine: ") +
                          e.what());
#endif
  } catch (const std::bad_alloc&) {
    return out_of_memory("cpu backend: out of memory creating the backend");
  }
}

}  // namespace seedvae
