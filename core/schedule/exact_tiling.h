// Exact tiling: the untiled encoder/decoder result with a tile's worth of activations on the
// device (the algorithm and its cost: docs/model.md §5 and ARCHITECTURE.md, "Exact mode").
//
// ExactTilingBackend is a Backend that runs VaeModel and WanModel -- the same model definitions
// every other path runs -- by executing each of the model's ops tile by tile on another ("device")
// backend. The model sees whole-frame tensors; they live in host memory (fp32), and:
//  * conv3d runs per output tile: the window (tile + kernel halo, zero-filled outside the frame,
//    which *is* the convolution's zero padding) is extracted on the host, uploaded, convolved on
//    the device with no padding and downloaded into the output. Every window of a layer has one
//    shape, so the device reuses one plan per layer. Each layer's grid is the user's tile scaled
//    to the layer's resolution and balanced (balanced_tile);
//  * group_norm computes the per-frame statistics over the whole frame (double accumulation, the
//    CPU kernel's exact form) and returns a view: GroupNorm + SiLU are applied while a following
//    convolution extracts its windows, so the normalised tensor never exists whole. rms_norm (Wan)
//    does the same with each position's inverse norm, in the CPU kernel's arithmetic
//    (core/cpu/rms_norm.h), so on the CPU device a tiled Wan run gives the untiled run's bits;
//  * causal_pad returns a view [memory, x] (or x with its activated first frame replicated), so
//    the extended input is never built either; slicing it gives the causal memory of the next
//    chunk (already activated, whole frame);
//  * the mid-block attention (global over the frame; Wan: rms_attention) runs untiled on the
//    1/64-size frame (1/256 for Wan2.2);
//  * residual adds, frame copies and the rearrangements (depth-to-space; Wan: nearest upsampling,
//    frames_from_channels, patchify, AvgDown3D, DupUp3D) are host loops over the whole frame.
// A convolution's weights go to the device on first use and, unless keep_weights, leave it when
// the next layer's weights come (one layer's weights on the device at a time).
//
// A dry run (dry_run()) does the same on shapes only over a CountingBackend: one tile of each
// layer runs there (every window of a layer has the same shape, so the device peak is the same)
// and the others are counted; host tensors are counted, never allocated. The planner predicts
// exact mode this way, and the tile executions of a chunk (progress) come from it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/counting_backend.h"
#include "core/base/cancel.h"
#include "core/base/progress.h"
#include "core/schedule/tiled.h"
#include "core/vae/state_dict.h"
#include "core/vae/wan_config.h"

namespace seedvae {

struct ExactTilingOptions {
  int64_t tile_h = 512, tile_w = 512;  // tile extent in full-resolution pixels
  bool keep_weights = false;           // keep every uploaded weight on the device
};

class ExactTilingBackend final : public Backend {
 public:
  // Runs every op tile by tile on `device`. upload_weight() references the tensors of `weights`
  // (when given; they must outlive this backend) instead of copying them.
  ExactTilingBackend(Backend& device, ExactTilingOptions options,
                     const VaeWeights* weights = nullptr);
  // Shapes only: tiles run on `device`'s counting ops, host tensors are counted (see above).
  static std::unique_ptr<ExactTilingBackend> dry_run(CountingBackend& device,
                                                     ExactTilingOptions options);
  ~ExactTilingBackend() override;

  // The full-resolution frame (decode: output pixels; encode: input pixels) the tile is given in.
  void set_frame(int64_t height, int64_t width);

  // Where a run reports its tiles (optional; set before each chunk).
  struct Hooks {
    const CancelToken* cancel = nullptr;  // checked before every tile
    ProgressSink* progress = nullptr;     // one unit per tile execution
    std::string stage = "exact";
    int64_t steps_total = 0;          // of the whole run (progress total)
    std::string final_weight;         // the output layer's weight name ("decoder.conv_out.weight")
    TileSink on_tile;                 // every tile of the output layer
    TileRunReport* report = nullptr;  // rects, tile sums and counts of the output layer
    int64_t chunk = 0, first_frame = 0;  // of the chunk being run (TileEvent)
    // Frame pixels per pixel of the output layer (Wan2.2's decoder head runs on 2x2 patches:
    // 2) and per latent pixel: how the output layer's tiles map to TileEvent::pixel and latent.
    int64_t output_scale = 1;
    int64_t spatial_factor = 8;
  };
  void set_hooks(Hooks hooks);
  Hooks& hooks() { return hooks_; }

  // Tile executions so far; host bytes of the whole-frame tensors now and at their peak; the
  // tiles of the last convolution that ran (the output layer's grid after a chunk).
  int64_t steps_done() const { return steps_; }
  int64_t host_bytes() const;
  int64_t host_peak_bytes() const;
  int64_t last_conv_tiles() const { return last_conv_tiles_; }

  // Dry run: a shape-only parameter (VaeModel::create's ParameterFactory) and input.
  Tensor declare_weight(const Shape& shape, const std::string& name);
  Tensor declare(const Shape& shape);

  std::string name() const override;
  DType activation_dtype() const override { return DType::kF32; }
  Result<Tensor> upload(const HostTensor& host) override;
  Result<Tensor> upload_weight(const HostTensor& host, std::string_view name) override;
  Result<HostTensor> download(const Tensor& t) override;
  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override;
  Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) override;
  Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) override;
  Status copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src, int64_t src_frame,
                          int64_t count) override;
  Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) override;
  Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
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
  Status synchronize() override { return device_.synchronize(); }
  // The device's memory: what the tiles hold there (the host tensors are host_bytes()).
  MemoryStats memory_stats() const override { return device_.memory_stats(); }
  void reset_peak() override;
  int64_t begin_device_span() override { return device_.begin_device_span(); }
  bool close_device_span(int64_t span) override { return device_.close_device_span(span); }
  double read_device_span(int64_t span, bool wait) override {
    return device_.read_device_span(span, wait);
  }

  struct Impl;

 private:
  ExactTilingBackend(Backend& device, ExactTilingOptions options, const VaeWeights* weights,
                     CountingBackend* dry);
  // An attention block: the whole frame through `run` on the device, the parameters `params`
  // (host tensors of this backend) replaced by their device copies first; one tile execution.
  Result<Tensor> run_untiled(const Tensor& x, std::string_view op,
                             const std::vector<Tensor*>& params,
                             const std::function<Result<Tensor>(Backend&, const Tensor&)>& run);

  Backend& device_;
  ExactTilingOptions options_;
  Hooks hooks_;
  int64_t steps_ = 0;
  int64_t last_conv_tiles_ = 0;
  std::unique_ptr<Impl> impl_;
};

// Tile executions of one temporal chunk of an exact run over a `height` x `width` frame (a dry
// run of one chunk): the progress units of ExactTilingBackend. For the Wan networks, those of a
// later chunk (4 frames or 1 latent frame); a stream's first chunk has fewer (its frame 0
// bypasses the temporal resamplers).
Result<int64_t> exact_steps_per_chunk(const VaeConfig& config, bool encode, int64_t height,
                                      int64_t width, const ExactTilingOptions& options);
Result<int64_t> exact_steps_per_chunk(const WanConfig& config, bool encode, int64_t height,
                                      int64_t width, const ExactTilingOptions& options);

}  // namespace seedvae
