#include "core/backend/counting_backend.h"

#include <algorithm>

namespace seedvae {

BackendMemoryModel BackendMemoryModel::cpu() {
  return BackendMemoryModel{};
}

BackendMemoryModel BackendMemoryModel::cuda() {
  BackendMemoryModel m;
  m.name = "cuda";
  m.conv_weight_copies = 1.0;
  m.max_weight_packs = 1;
  m.conv_scratch_bytes = 0;
  m.attention_buffers = false;  // flash-style kernel: O(tokens x head_dim) scratch
  m.inplace_group_norm = true;
  m.upload_staging = true;
  m.fixed_bytes = 512ll << 20;  // context and handles: 0.52 GiB on an H100 (NVML)
  m.exact_host_overhead = 0.5;  // PCIe transfers of every layer's tiles (not calibrated)
  return m;
}

struct CountingBackend::Counters {
  int64_t current = 0, peak = 0;
  int64_t weights = 0, weight_peak = 0;
  std::string label, peak_label;  // the op being run, and the one at the last peak
  // Offloaded state (BackendMemoryModel::offload_state): bytes on the host, their peak, the
  // largest slice, and the prefetch window.
  int64_t away = 0, away_peak = 0, largest_away = 0, window = 0;

  // What the device holds: live tensors plus the state prefetched ahead of use.
  int64_t device() const {
    return window < 0 ? current : current + std::min(away, std::max(window, largest_away));
  }
  void touch(int64_t extra = 0) {
    if (device() + extra > peak) {
      peak = device() + extra;
      peak_label = label;
    }
  }
  void add(int64_t bytes, bool weight) {
    current += bytes;
    if (weight) {
      weights += bytes;
      weight_peak = std::max(weight_peak, weights);
    }
    touch();
  }
  void remove(int64_t bytes, bool weight) {
    current -= bytes;
    if (weight) weights -= bytes;
  }
  // Memory held only while the current op runs.
  void transient(int64_t bytes) { touch(bytes); }
};

namespace {

// Shape-only storage; its lifetime is what the byte counters track. A convolution weight grows
// by its packed copies when it first runs (BackendMemoryModel::conv_weight_copies).
class CountedStorage final : public Storage {
 public:
  CountedStorage(int64_t bytes, bool weight, std::shared_ptr<CountingBackend::Counters> counters)
      : bytes_(bytes), weight_(weight), counters_(std::move(counters)) {
    counters_->add(bytes_, weight_);
  }
  ~CountedStorage() override {
    if (away_) {
      counters_->away -= bytes_;
    } else {
      counters_->remove(bytes_, weight_);
    }
  }

  // The state offload: the bytes move to the host, and back when an op reads them.
  void offload() {
    if (away_ || weight_) return;
    away_ = true;
    counters_->remove(bytes_, false);
    counters_->away += bytes_;
    counters_->away_peak = std::max(counters_->away_peak, counters_->away);
    counters_->largest_away = std::max(counters_->largest_away, bytes_);
  }
  void fetch() {
    if (!away_) return;
    away_ = false;
    counters_->away -= bytes_;
    counters_->add(bytes_, false);
  }
  int64_t bytes() const { return bytes_; }

  void pack(double copies) {
    if (packed_ || !weight_) return;
    packed_ = true;
    const auto extra = static_cast<int64_t>(static_cast<double>(bytes_) * (copies - 1.0));
    if (extra <= 0) return;
    bytes_ += extra;
    counters_->add(extra, true);
  }

 private:
  int64_t bytes_;
  bool weight_;
  bool packed_ = false;
  bool away_ = false;
  std::shared_ptr<CountingBackend::Counters> counters_;
};

}  // namespace

CountingBackend::CountingBackend(DType activation_dtype, BackendMemoryModel model,
                                 int64_t weight_element_bytes)
    : dtype_(activation_dtype),
      model_(std::move(model)),
      weight_element_bytes_(weight_element_bytes),
      counters_(std::make_shared<Counters>()) {
  if (model_.offload_state) counters_->window = model_.offload_window_bytes;
}

void CountingBackend::fetch(const Tensor& t) {
  if (auto* cs = dynamic_cast<CountedStorage*>(t.storage.get())) cs->fetch();
}

Status CountingBackend::offload_hint(const Tensor& t) {
  if (!model_.offload_state) return Status::ok();
  auto* cs = dynamic_cast<CountedStorage*>(t.storage.get());
  if (cs && cs->bytes() >= model_.offload_min_bytes) cs->offload();
  return Status::ok();
}

int64_t CountingBackend::offloaded_bytes() const {
  return counters_->away;
}
int64_t CountingBackend::offloaded_peak_bytes() const {
  return counters_->away_peak;
}

Tensor CountingBackend::make(Shape shape, const char* op, std::optional<DType> dtype) {
  counters_->label = std::string(op) + " " + shape.to_string();
  const DType dt = dtype.value_or(dtype_);
  const int64_t bytes = shape.numel() * dtype_size(dt);
  made_bytes_ += static_cast<double>(bytes);
  Tensor t;
  t.shape = std::move(shape);
  t.dtype = dt;
  t.storage = std::make_shared<CountedStorage>(bytes, false, counters_);
  return t;
}

Tensor CountingBackend::declare(const Shape& shape) {
  Tensor t = make(shape, "upload");
  if (model_.upload_staging && dtype_ != DType::kF32) counters_->transient(shape.numel() * 4);
  return t;
}

Tensor CountingBackend::declare_weight(const Shape& shape) {
  counters_->label = "upload_weight " + shape.to_string();
  Tensor t;
  t.shape = shape;
  t.dtype = dtype_;
  t.storage =
      std::make_shared<CountedStorage>(shape.numel() * weight_element_bytes_, true, counters_);
  return t;
}

Result<Tensor> CountingBackend::upload(const HostTensor& host) {
  return declare(host.shape());
}

Result<Tensor> CountingBackend::upload_weight(const HostTensor& host, std::string_view) {
  return declare_weight(host.shape());
}

Result<HostTensor> CountingBackend::download(const Tensor& t) {
  return HostTensor::create(DType::kF32, t.shape);
}

Status CountingBackend::download_frames(const Tensor& t, HostTensor& dst, int64_t frame_offset) {
  return check_download_frames(t.shape, dst, frame_offset);  // nothing to copy
}

Result<Tensor> CountingBackend::conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                                       const Conv3dParams& p) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, conv3d_output_shape(x.shape, w.shape, p));
  SEEDVAE_TRY(check_conv3d_bias(b, w.shape));
  if (auto* ws = dynamic_cast<CountedStorage*>(w.storage.get())) {
    counters_->label = "pack " + w.shape.to_string();
    ws->pack(model_.conv_weight_copies);
  }
  flops_ += 2.0 * static_cast<double>(w.shape.numel()) *
            static_cast<double>(out[0] * out[2] * out[3] * out[4]);
  // a 16-bit CUDA backend returns the model's output in fp32 (Conv3dParams::model_output)
  Tensor y = make(out, "conv3d", p.model_output ? std::optional(DType::kF32) : std::nullopt);
  counters_->transient(model_.conv_scratch_bytes +
                       model_.conv_copy_bytes * (x.shape.numel() + out.numel()));
  return y;
}

Result<Tensor> CountingBackend::causal_pad(const Tensor& x, const Tensor* memory, int frames) {
  fetch(x);
  if (memory) fetch(*memory);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out,
                           causal_pad_shape(x.shape, memory ? &memory->shape : nullptr, frames));
  return make(out, "causal_pad");
}

Result<Tensor> CountingBackend::slice_frames(const Tensor& x, int64_t begin, int64_t end) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, slice_frames_shape(x.shape, begin, end));
  return make(out, "slice_frames", x.dtype);
}

Result<Tensor> CountingBackend::concat_frames(const Tensor& a, const Tensor& b) {
  fetch(a);
  fetch(b);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape out, concat_frames_shape(a.shape, b.shape));
  return make(out, "concat_frames", a.dtype);
}

Status CountingBackend::copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src,
                                         int64_t src_frame, int64_t count) {
  fetch(dst);
  fetch(src);
  return check_frame_copy(dst.shape, dst_frame, src.shape, src_frame, count);
}

Result<Tensor> CountingBackend::group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const GroupNormParams& p) {
  fetch(x);
  SEEDVAE_TRY(check_group_norm(x.shape, gamma, beta, p));
  return make(x.shape, "group_norm");
}

Status CountingBackend::group_norm_inplace(Tensor& x, const Tensor& gamma, const Tensor& beta,
                                           const GroupNormParams& p) {
  if (!model_.inplace_group_norm) return Backend::group_norm_inplace(x, gamma, beta, p);
  fetch(x);
  return check_group_norm(x.shape, gamma, beta, p);
}

Status CountingBackend::add_inplace(Tensor& acc, const Tensor& x) {
  fetch(acc);
  fetch(x);
  return check_add(acc.shape, x.shape);
}

Result<Tensor> CountingBackend::depth_to_space(const Tensor& x, int z, bool drop_frame_1, int) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape s, depth_to_space_shape(x.shape, z, drop_frame_1));
  return make(s, "depth_to_space");
}

Result<Tensor> CountingBackend::attention(const Tensor& x, const AttentionWeights& w) {
  SEEDVAE_TRY(check_attention(x.shape, w));
  Tensor y = make(x.shape, "attention");
  count_attention(x.shape);
  return y;
}

// Attention's FLOPs and the CPU kernel's buffers, shared by both attention ops: 4 projections
// (N x C x C) + QK^T and AV (N x N x C each), 2 FLOPs per MAC.
void CountingBackend::count_attention(const Shape& x) {
  const int64_t c = x[1], tokens = x[3] * x[4];
  const double frames = static_cast<double>(x[0] * x[2]);
  const double n = static_cast<double>(tokens), cd = static_cast<double>(c);
  flops_ += frames * 2.0 * (4.0 * n * cd * cd + 2.0 * n * n * cd);
  if (model_.attention_buffers) {
    // The CPU kernel: fp32 normalised input, q/k/v/out projections and one block of scores.
    const int64_t block = std::min<int64_t>(
        tokens, std::max<int64_t>(64, (int64_t{1} << 22) / std::max<int64_t>(1, tokens)));
    counters_->transient(4 * (x.numel() + 4 * tokens * c + block * tokens));
  }
}

Result<Tensor> CountingBackend::zeros(const Shape& shape) {
  SEEDVAE_TRY(check_zeros(shape));
  return make(shape, "zeros");
}

Result<Tensor> CountingBackend::rms_norm(const Tensor& x, const Tensor& gamma,
                                         const RmsNormParams& p) {
  fetch(x);
  SEEDVAE_TRY(check_rms_norm(x.shape, gamma, p));
  return make(x.shape, "rms_norm");
}

Result<Tensor> CountingBackend::upsample_nearest(const Tensor& x) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape s, upsample_nearest_shape(x.shape));
  return make(s, "upsample_nearest");
}

Result<Tensor> CountingBackend::frames_from_channels(const Tensor& x, int factor) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape s, frames_from_channels_shape(x.shape, factor));
  return make(s, "frames_from_channels");
}

Result<Tensor> CountingBackend::patchify(const Tensor& x, int p) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape s, patchify_shape(x.shape, p));
  return make(s, "patchify");
}

Result<Tensor> CountingBackend::unpatchify(const Tensor& x, int p) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape s, unpatchify_shape(x.shape, p));
  return make(s, "unpatchify", x.dtype);
}

Result<Tensor> CountingBackend::avg_down(const Tensor& x, const AvgDownParams& p) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape s, avg_down_shape(x.shape, p));
  return make(s, "avg_down");
}

Result<Tensor> CountingBackend::dup_up(const Tensor& x, const DupUpParams& p) {
  fetch(x);
  SEEDVAE_ASSIGN_OR_RETURN(const Shape s, dup_up_shape(x.shape, p));
  return make(s, "dup_up");
}

Result<Tensor> CountingBackend::rms_attention(const Tensor& x, const RmsAttentionWeights& w) {
  fetch(x);
  SEEDVAE_TRY(check_rms_attention(x.shape, w));
  Tensor y = make(x.shape, "rms_attention");
  count_attention(x.shape);
  return y;
}

MemoryStats CountingBackend::memory_stats() const {
  MemoryStats m;
  m.peak_bytes = counters_->peak;
  m.current_bytes = counters_->device();
  return m;
}

void CountingBackend::reset_peak() {
  counters_->peak = counters_->device();
  counters_->away_peak = counters_->away;
  counters_->weight_peak = counters_->weights;
  counters_->peak_label = counters_->label;
}

int64_t CountingBackend::weight_bytes() const {
  return counters_->weights;
}
int64_t CountingBackend::weight_peak_bytes() const {
  return counters_->weight_peak;
}
const std::string& CountingBackend::peak_at() const {
  return counters_->peak_label;
}

}  // namespace seedvae
