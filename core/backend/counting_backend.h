// A Backend that computes nothing: it infers output shapes, counts floating-point operations and
// tracks the bytes a real backend would hold (allocation on creation, release when the last Tensor
// dies), including what that backend holds beyond the op outputs (BackendMemoryModel: packed
// weight copies, the attention's scratch buffers). Running VaeModel on it is how the planner
// predicts a run's memory and FLOPs (core/schedule/planner.h): the op sequence is the model's own,
// in milliseconds and without weights' values.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/backend/backend.h"

namespace seedvae {

// What a backend holds beyond the tensors the model asks for, as the dry run models it.
struct BackendMemoryModel {
  std::string name = "cpu";
  // Weight bytes per parameter byte of a convolution weight once it has run: the CPU backend
  // keeps the plain weight and oneDNN's packed copy (made by its first convolution); the CUDA
  // backend keeps one repacked copy.
  double conv_weight_copies = 2.0;
  // Most packed copies one convolution weight can get: oneDNN may pick a different weight layout
  // for some problem shapes (measured: certain narrow tile widths), and the CPU backend keeps up
  // to 4 packs per weight. The planner's upper bound for plans with several tile shapes.
  int max_weight_packs = 4;
  // Scratch a convolution holds while it runs (oneDNN's scratchpad on the CPU backend: 12 KiB
  // measured; cuDNN's workspace comes from the CUDA backend's allocator and is not modelled yet).
  int64_t conv_scratch_bytes = 12 << 10;
  // Bytes per element of a convolution's input and output that it copies while it runs: 2 for
  // the CUDA backend's fidelity precision (fp16 copies of both), 1 for its FP8 convolutions (an
  // e4m3 copy of the input; the output's share is headroom), 0 otherwise.
  int64_t conv_copy_bytes = 0;
  // The attention keeps fp32 GroupNorm, q/k/v/out and score-block buffers while it runs (the CPU
  // kernel); the CUDA backend's flash-style kernel needs O(tokens x head_dim) scratch.
  bool attention_buffers = true;
  // GroupNorm in place (Backend::group_norm_inplace) writes over its input (the CUDA kernel);
  // otherwise it makes a new tensor, as the CPU backend does.
  bool inplace_group_norm = false;
  // An fp32 host tensor uploaded as bf16/fp16 activations passes through an fp32 device buffer
  // of its size, converted from there (the CUDA backend); held while the upload runs.
  bool upload_staging = false;
  int64_t fixed_bytes = 0;  // context/runtime overhead outside the allocator (planner: added)
  // The CUDA backend's state offload (CudaSwitches::offload_state): a slice of causal state the
  // model hints (Backend::offload_hint) leaves the device until an op reads it again; while any
  // state is away, up to offload_window_bytes of it (at least the largest slice) is back on the
  // device ahead of use. A negative window counts none: the CUDA backend drops prefetched state
  // when an allocation finds no room, so it is memory a run under a budget can do without.
  bool offload_state = false;
  int64_t offload_min_bytes = int64_t{16} << 20;
  int64_t offload_window_bytes = int64_t{1} << 30;
  // Exact tiling: host work (GroupNorm statistics, window extraction, transfers) as a fraction of
  // the convolution time (the planner's time model); measured on the CPU backend.
  double exact_host_overhead = 0.15;

  static BackendMemoryModel cpu();
  static BackendMemoryModel cuda();  // calibrated on an H100 (ARCHITECTURE.md, the planner)
};

class CountingBackend final : public Backend {
 public:
  // Activations in `activation_dtype`, parameters at `weight_element_bytes` bytes each.
  explicit CountingBackend(DType activation_dtype = DType::kF32,
                           BackendMemoryModel model = BackendMemoryModel::cpu(),
                           int64_t weight_element_bytes = 4);

  std::string name() const override { return "counting (dry run, " + model_.name + " model)"; }
  DType activation_dtype() const override { return dtype_; }

  Result<Tensor> upload(const HostTensor& host) override;
  Result<Tensor> upload_weight(const HostTensor& host, std::string_view name) override;
  Result<HostTensor> download(const Tensor& t) override;  // zeros of the right shape
  Status download_frames(const Tensor& t, HostTensor& dst, int64_t frame_offset) override;

  // Shape-only tensors, without a host tensor to copy from: an activation (as upload() makes)
  // and a parameter (as upload_weight() makes; VaeModel::create's ParameterFactory).
  Tensor declare(const Shape& shape);
  Tensor declare_weight(const Shape& shape);

  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override;
  Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) override;
  Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) override;
  Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) override;
  Status copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src, int64_t src_frame,
                          int64_t count) override;
  Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override;
  Status group_norm_inplace(Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override;
  Status add_inplace(Tensor& acc, const Tensor& x) override;
  Result<Tensor> depth_to_space(const Tensor& x, int temporal_factor, bool drop_frame_1,
                                int context_frames = 2) override;
  Result<Tensor> attention(const Tensor& x, const AttentionWeights& w) override;
  Result<Tensor> zeros(const Shape& shape) override;
  Result<Tensor> rms_norm(const Tensor& x, const Tensor& gamma, const RmsNormParams& p) override;
  Result<Tensor> upsample_nearest(const Tensor& x) override;
  Result<Tensor> frames_from_channels(const Tensor& x, int factor) override;
  Result<Tensor> patchify(const Tensor& x, int p) override;
  Result<Tensor> unpatchify(const Tensor& x, int p) override;
  Result<Tensor> avg_down(const Tensor& x, const AvgDownParams& p) override;
  Result<Tensor> dup_up(const Tensor& x, const DupUpParams& p) override;
  Result<Tensor> rms_attention(const Tensor& x, const RmsAttentionWeights& w) override;
  Status offload_hint(const Tensor& t) override;

  // Every byte the modelled backend would hold: activations and weights (with their packed
  // copies), as a real backend's allocator counts them.
  MemoryStats memory_stats() const override;
  void reset_peak() override;

  // Multiply-add FLOPs (2 per MAC) of convolutions, projections and attention matmuls since the
  // last reset_flops(). add_flops() adds work done elsewhere (exact tiling runs one tile of a
  // layer here and accounts for the others).
  double flops() const { return flops_; }
  void reset_flops() { flops_ = made_bytes_ = 0; }
  void add_flops(double f) { flops_ += f; }
  // Bytes of the tensors the ops made since the last reset_flops(): a proxy for the memory
  // traffic of the elementwise work (the pipelined decode's cost model).
  double made_bytes() const { return made_bytes_; }
  // Causal state offloaded to the host now and at its peak (BackendMemoryModel::offload_state).
  int64_t offloaded_bytes() const;
  int64_t offloaded_peak_bytes() const;
  // Live parameter bytes (packed copies included) and their peak since the last reset_peak().
  int64_t weight_bytes() const;
  int64_t weight_peak_bytes() const;
  // The op where the total peak was last reached ("conv3d [1, 128, 6, 64, 64] * ...").
  const std::string& peak_at() const;
  const BackendMemoryModel& model() const { return model_; }

  struct Counters;

 private:
  Tensor make(Shape shape, const char* op, std::optional<DType> dtype = std::nullopt);
  // The FLOPs and CPU scratch of an attention over x (both attention ops).
  void count_attention(const Shape& x);
  // An op reads `t`: offloaded state comes back to the device.
  void fetch(const Tensor& t);

  DType dtype_;
  BackendMemoryModel model_;
  int64_t weight_element_bytes_;
  double flops_ = 0;
  double made_bytes_ = 0;
  std::shared_ptr<Counters> counters_;
};

}  // namespace seedvae
