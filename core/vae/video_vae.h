// The interface both VAE networks implement -- VaeModel (SeedVR2) and WanModel (Wan2.1, Wan2.2) --
// and what a caller needs to stream a clip through either: the explicit causal state, a chunk
// call's options, the block observer and the schedulers' summary telemetry. The streamed
// scheduler (core/schedule/streaming.h: encode_video, encode_stream, decode_latent) takes either.
//
// Both networks compress 4x in time with the same bookkeeping: an encoder stream's first chunk
// has 4k+1 frames and every later chunk 4k; a decoder stream's first chunk of t latent frames
// gives 4t-3 frames, every later one 4t. make_video_vae builds the network a checkpoint's family
// needs; the job layer, verify, the streamed scheduler and exact tiling take either, while blend
// tiling and the planner's replay are SeedVR2's (VaeModel) only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/backend.h"
#include "core/base/telemetry.h"
#include "core/vae/wan_config.h"

namespace seedvae {

struct VaeWeights;

// Explicit causal memory of one stream (encoder or decoder). Reset (or make a new one) for each
// new clip or tile.
struct CausalState {
  // false: first chunk (SeedVR2: replicate frame 0, drop frame 1; Wan: the temporal resamplers'
  // frame-0 bypass, DupUp3D's frame drop)
  bool started = false;
  // conv weight prefix -> the trailing frames of its extended input. A SeedVR2 upsampler's conv
  // keeps them before the upscale instead, under "<upsampler>.upscale_conv" (see VaeModel,
  // Upsample3D); a Wan downsampler's time_conv keeps its last input frame (WanModel).
  std::map<std::string, Tensor> memory;

  void reset() {
    started = false;
    memory.clear();
  }
  int64_t bytes() const;
};

// How one chunk call runs. Every choice here changes memory and time, never the output. Lean
// convolutions are VaeModel's (SeedVR2) only; WanModel takes chunked upsampling in its decoder
// (its encoder runs every stage on the whole chunk).
struct ChunkOptions {
  // Chunked high-resolution stages ("chunked upsampling"): when > 0, the stages at full frame
  // rate and the two highest resolutions -- the decoder after its last temporal upsampling
  // (up_blocks.2 on), the encoder before its first temporal downsampling (conv_in and
  // down_blocks.0) -- run on pieces of at most this many frames, one after another, with the
  // causal state carried between pieces. The encoder's first temporal level (down_blocks.1, whose
  // stride-2 downsampler needs an even number of frames) runs on pieces of max(2, N rounded up to
  // even) frames around them (a first chunk's odd first frame alone). Exact (GroupNorm is per
  // frame, the convolutions are causal in time); it bounds the largest activations by the piece
  // instead of the chunk. 0 = off.
  int hires_chunk_frames = 0;
  // Lean convolutions: in a continued stream, a 3x3x3 causal convolution of the decoder over a
  // chunk of T >= 4 frames never builds its extended input [memory, x] (T + 2 frames). It
  // convolves x alone for its output frames 2.., then writes [memory, x0, x1] over x's first four
  // frames (read by then) and convolves those for frames 0 and 1. Its GroupNorm or upscale output
  // is then made without room for context frames; a resnet with a 1x1 shortcut computes the
  // shortcut first and drops its input before the first convolution; the spatial upsampler
  // upscales its two context frames one at a time. Exact (the same products and sums per output),
  // two convolution calls per convolution and a few frame copies; at 1080p it takes the largest
  // tensors of the decoder's full-resolution levels from input + extended input + output to
  // input + output (docs/gpu-notes.md). Not used while chunks are recorded as graphs (they update
  // the state in place) nor on a first chunk (no memory).
  bool lean_convs = false;
  // Labels of the telemetry samples of this call (the scheduler's chunk and tile index).
  int64_t chunk = -1;
  int64_t tile = -1;
  // A share of the decoder (the pipelined decode over several devices,
  // core/schedule/pipeline_decode.h): only the units [first_unit, end_unit) of decoder_units()
  // run; the chunk's input is then the activation before unit first_unit, and the result the
  // activation after unit end_unit - 1. The defaults run the whole decoder. Each unit updates
  // only its own causal memory, so the shares of one chunk run one after another -- on one
  // backend or on several -- compute what the whole decoder computes, op for op.
  int first_unit = 0;
  int end_unit = -1;  // -1: to the last unit

  bool whole_decoder() const { return first_unit == 0 && end_unit < 0; }
};

// Chunked upsampling's loop, for both networks: runs `stage` on consecutive frame pieces of x and
// concatenates the results -- a first piece of `first_piece` frames if > 0, then `piece` frames
// each; one call on the whole x when piece <= 0 or x is no longer than one piece. Every piece is
// sliced before the first runs and x is dropped, so the whole input is not held meanwhile.
template <typename Stage>
Result<Tensor> run_in_pieces(Backend& b, Tensor x, int64_t first_piece, int64_t piece,
                             Stage&& stage) {
  const int64_t t = x.shape[2];
  const bool split = piece > 0 && (first_piece > 0 ? t > first_piece : t > piece);
  if (!split) return stage(std::move(x));  // x is not held while the stage runs
  std::vector<Tensor> pieces;
  for (int64_t begin = 0; begin < t;) {
    const int64_t len = begin == 0 && first_piece > 0 ? first_piece : piece;
    SEEDVAE_ASSIGN_OR_RETURN(Tensor p, b.slice_frames(x, begin, std::min(t, begin + len)));
    pieces.push_back(std::move(p));
    begin += len;
  }
  x = {};
  Tensor out;
  for (Tensor& p : pieces) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, stage(std::move(p)));
    if (!out.defined()) {
      out = std::move(y);
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(out, b.concat_frames(out, y));
    }
  }
  return out;
}

// Called after each top-level block ("encoder.down_blocks.2", "decoder.conv_out", ...) with its
// output; used by tests to compare intermediates and by front ends to poll for cancellation.
using BlockObserver = std::function<Status(std::string_view block, const Tensor& output)>;

// A scheduler's summary sample in flight (VideoVae::begin_summary).
struct SummarySpan {
  bool active = false;
  std::chrono::steady_clock::time_point start;
  int64_t device_span = -1;
};

// A decoder walked from its output back to its input, one step per operation that moves frames:
// a causal convolution that looks `back` frames behind at its rate, or a temporal 2x upsampling
// with a stream's first-frame drop (output frame u >= 1 comes from input frame (u + 1) / 2, frame
// 0 from frame 0). The reach in latent frames of the first output frame of a latent frame far
// from the start (the latest frames need no more), for a temporal factor `factor`.
struct ReachStep {
  int back = 0;
  bool up2 = false;
};
int64_t decoder_reach_of(const std::vector<ReachStep>& from_output, int factor);

class VideoVae {
 public:
  virtual ~VideoVae() = default;

  virtual Backend& backend() const = 0;
  virtual VaeFamily family() const = 0;
  virtual int latent_channels() const = 0;  // z; the encoder emits 2z moments (mean, log-var)
  virtual int spatial_factor() const = 0;   // 8 or 16: frame sizes must be multiples of it
  virtual int temporal_factor() const = 0;  // 4
  virtual void set_observer(BlockObserver observer) = 0;
  // Where the model's per-stage samples go (core/base/telemetry.h); nullptr: none. The default
  // takes none (WanModel reports no stage samples).
  virtual void set_telemetry(TelemetrySink* sink) { (void)sink; }
  // How far back the decoder looks, in latent frames: the output frames of latent frame i depend
  // on latent frames [i - decoder_reach(), i] only. The causal convolutions' frame memory is the
  // only state carried from frame to frame (norms and attention are per frame), so it ends after
  // each convolution's taps: a stretch of a clip decoded from decoder_reach() latent frames
  // earlier gives the whole-clip decode's frames of that stretch (core/schedule/segments.h).
  virtual int64_t decoder_reach() const = 0;
  // The decoder's units in the order they run (a resnet, an attention, an upsampler, the input and
  // output convolutions: "decoder.up_blocks.2.resnets.1"), the points a pipelined decode may cut
  // it at (ChunkOptions::first_unit / end_unit). Empty: the decoder runs whole only.
  virtual std::vector<std::string> decoder_units() const { return {}; }

  // x: [1, 3, T, H, W] video; first chunk (state.started == false) T = 4k+1, later chunks 4k.
  // Returns the moments [1, 2z, t, H/s, W/s] (mean = first half), un-normalised.
  virtual Result<Tensor> encode_chunk(const Tensor& x, CausalState& state,
                                      const ChunkOptions& options = {}) = 0;
  // z: [1, z, t, h, w] latent as the encoder's mean gives it (un-normalised). First chunk returns
  // 4t-3 frames, later chunks 4t; the decoder's raw output (not clamped).
  virtual Result<Tensor> decode_chunk(const Tensor& z, CausalState& state,
                                      const ChunkOptions& options = {}) = 0;

  // The schedulers' per-chunk / per-tile summary samples and the flush of deferred telemetry
  // (VaeModel: core/base/telemetry.h). The defaults take no sample: a model without telemetry
  // (WanModel) reports none.
  virtual SummarySpan begin_summary() const { return {}; }
  virtual Status end_summary(std::string_view stage, const SummarySpan& span, int64_t chunk,
                             int64_t tile) const {
    (void)stage, (void)span, (void)chunk, (void)tile;
    return Status::ok();
  }
  virtual void flush_telemetry() const {}
};

// The network of the weights' family on `backend` (which must outlive it): VaeModel for SeedVR2,
// WanModel for Wan2.1 / Wan2.2, every parameter uploaded.
Result<std::unique_ptr<VideoVae>> make_video_vae(Backend& backend, const VaeWeights& weights);
// The same network on a dry-run backend: every parameter declared by its shape (the values are
// not read), for FLOP counts and the planner's and the pipeline's cost models.
class CountingBackend;
Result<std::unique_ptr<VideoVae>> make_dry_video_vae(CountingBackend& backend,
                                                     const VaeWeights& weights);

}  // namespace seedvae
