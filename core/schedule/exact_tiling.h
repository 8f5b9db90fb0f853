// Exact tiling: the untiled encoder/decoder result with a tile's worth of activations on the
// backend (design, memory and time cost: docs/tiling.md).
//
// The model is run layer by layer. Each layer's input and output for the current temporal chunk
// live on the host as whole frames; the backend sees, per convolution, one window = an output
// tile plus the halo its kernel needs (zero-filled outside the frame, which *is* the
// convolution's zero padding, so every window of a layer has the same shape and one backend
// plan serves all of them), with the causal context frames prepended. GroupNorm statistics are
// computed per frame over the whole frame on the host (double accumulation) before the layer
// they normalise runs, and GroupNorm + SiLU are applied while the window is extracted. The
// mid-block attention, global over the frame, runs untiled on the 1/64-size frame. Causal
// memory (the last kT - sT frames of every causal convolution's extended input) is kept per
// layer for the whole frame on the host, so any chunking and any tiling give the same frames.
//
// Convolution weights are uploaded on first use; unless keep_weights is set each layer's
// weights are released when the layer is done (only one layer's weights on the backend).
#pragma once

#include <map>
#include <string>

#include "core/backend/backend.h"
#include "core/base/cancel.h"
#include "core/base/progress.h"
#include "core/schedule/tiled.h"
#include "core/tensor/host_tensor.h"
#include "core/vae/state_dict.h"

namespace seedvae {

// Causal memory of one exact stream, on the host: per causal convolution, its trailing
// (already normalised/activated) input frames over the whole frame.
struct ExactStreamState {
  bool started = false;
  std::map<std::string, HostTensor> memory;
  void reset() {
    started = false;
    memory.clear();
  }
  int64_t bytes() const;
};

struct ExactOptions {
  int64_t tile_h = 512, tile_w = 512;  // tile extent in full-resolution pixels
  bool keep_weights = false;
};

// Per-call context: hooks and bookkeeping.
struct ExactContext {
  const CancelToken* cancel = nullptr;
  ProgressSink* progress = nullptr;
  std::string stage = "decode exact";
  int64_t chunk = 0;
  int64_t first_frame = 0;  // of this chunk's output, for TileEvent
  TileSink on_tile;         // called for every tile of the final layer
  TileRunReport* report = nullptr;
  int64_t steps_done = 0, steps_total = 0;  // progress units (tile executions)
};

class ExactTiledVae {
 public:
  // `backend` and `weights` must outlive this object.
  ExactTiledVae(Backend& backend, const VaeWeights& weights, ExactOptions options);

  // One temporal chunk through the decoder: z [1, latent, t, h, w] -> [1, 3, T, 8h, 8w]
  // (first chunk: 4t-3 frames, later 4t).
  Result<HostTensor> decode_chunk(const HostTensor& z, ExactStreamState& state, ExactContext& ctx);
  // One chunk through the encoder: x [1, 3, T, H, W] (first chunk 4k+1 frames, later 4k) ->
  // moments [1, 2*latent, t, H/8, W/8].
  Result<HostTensor> encode_chunk(const HostTensor& x, ExactStreamState& state, ExactContext& ctx);

  // Tile executions (progress units) one chunk of the given size will take.
  int64_t decode_steps(int64_t latent_h, int64_t latent_w) const;
  int64_t encode_steps(int64_t h, int64_t w) const;

 private:
  struct NormAct;
  struct ConvSpec;
  Result<HostTensor> conv(const HostTensor& x, const NormAct* norm, const ConvSpec& spec,
                          ExactStreamState& state, ExactContext& ctx);
  Result<HostTensor> resnet(const HostTensor& x, const std::string& prefix, int64_t full_h,
                            int64_t full_w, ExactStreamState& state, ExactContext& ctx);
  Result<HostTensor> attention(const HostTensor& x, const std::string& prefix);
  Result<HostTensor> upsample(const HostTensor& x, const std::string& prefix, bool temporal,
                              int64_t full_h, int64_t full_w, ExactStreamState& state,
                              ExactContext& ctx);
  Result<NormAct> norm_for(const HostTensor& x, const std::string& prefix, bool silu) const;
  Result<Tensor> weight(const std::string& name);
  void release_weights();
  const HostTensor* host_param(const std::string& name) const;
  Status step_done(ExactContext& ctx);
  int64_t tiles_for(int64_t h, int64_t w, int64_t full_h, int64_t full_w) const;

  Backend& backend_;
  const VaeWeights& weights_;
  ExactOptions options_;
  std::map<std::string, Tensor> cache_;
};

}  // namespace seedvae
