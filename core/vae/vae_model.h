// The SeedVR2 causal video VAE (vae_spec.md §2) on any Backend, one temporal chunk at a time.
//
// Streaming (§4): a CausalState carries, per causal convolution, the last (kT - sT) frames of its
// extended input from one chunk to the next, and whether the stream has started (which also
// decides Upsample3D's first-frame drop). Any chunking aligned to 4 input frames / 1 latent frame
// gives the whole-clip result up to fp32 reassociation.
//
// Thread affinity: the model, its state and its backend belong to one thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "core/backend/backend.h"
#include "core/base/telemetry.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_config.h"

namespace seedvae {

// Explicit causal memory of one stream (encoder or decoder). Reset (or make a new one) for each
// new clip or tile.
struct CausalState {
  bool started = false;                 // false: first chunk (replicate frame 0, drop frame 1)
  // conv weight prefix -> the trailing frames of its extended input. An upsampler's conv keeps
  // them before the upscale instead, under "<upsampler>.upscale_conv" (VaeModel::upsample).
  std::map<std::string, Tensor> memory;

  void reset() {
    started = false;
    memory.clear();
  }
  int64_t bytes() const;
};

// Called after each top-level block ("encoder.down_blocks.2", "decoder.conv_out", ...) with its
// output; used by tests to compare intermediates and by telemetry to time stages.
using BlockObserver = std::function<Status(std::string_view block, const Tensor& output)>;

class VaeModel {
 public:
  // Uploads every parameter to `backend` (which must outlive the model).
  static Result<VaeModel> create(Backend& backend, const VaeWeights& weights);

  const VaeConfig& config() const { return config_; }
  Backend& backend() const { return *backend_; }
  void set_observer(BlockObserver observer) { observer_ = std::move(observer); }
  // Per-block timing and memory (synchronises the backend after each block while installed; the
  // device time comes from Backend::begin_device_span/end_device_span, core/base/telemetry.h).
  // `chunk`/`tile` label the samples; set by the scheduler before each call.
  void set_telemetry(TelemetrySink* sink) { telemetry_ = sink; }
  void set_telemetry_labels(int64_t chunk, int64_t tile) const {
    chunk_label_ = chunk;
    tile_label_ = tile;
  }
  // The scheduler's "chunk" / "tile" summary samples: begin_summary() before a chunk's upload,
  // end_summary() after its download emits one sample (current labels) with the wall and device
  // time in between. Only for a sink that wants_summaries(); no-ops (no timing, no
  // synchronisation) otherwise.
  struct SummarySpan {
    bool active = false;
    std::chrono::steady_clock::time_point start;
    int64_t device_span = -1;
  };
  SummarySpan begin_summary() const;
  Status end_summary(std::string_view stage, const SummarySpan& span) const;
  // Chunked high-resolution stages ("chunked upsampling"): when > 0, the stages at full frame rate
  // and the two highest resolutions -- the decoder after its last temporal upsampling
  // (up_blocks.2 on), the encoder before its first temporal downsampling (conv_in and
  // down_blocks.0) -- run on pieces of at most this many frames, one after another, with the causal
  // state carried between pieces. The encoder's first temporal level (down_blocks.1, whose
  // stride-2 downsampler needs an even number of frames) runs on pieces of max(2, N rounded up to
  // even) frames around them (a first chunk's odd first frame alone). Exact (GroupNorm is per frame, the convolutions are causal in
  // time); it bounds the largest activations by the piece instead of the chunk. 0 = off.
  void set_hires_chunk_frames(int frames) { hires_chunk_frames_ = frames < 0 ? 0 : frames; }
  int hires_chunk_frames() const { return hires_chunk_frames_; }

  // Lean convolutions: in a continued stream, a 3x3x3 causal convolution of the decoder over a
  // chunk of T >= 4 frames never builds its extended input [memory, x] (T + 2 frames). It convolves x alone for
  // its output frames 2.., then writes [memory, x0, x1] over x's first four frames (read by then)
  // and convolves those for frames 0 and 1. Its GroupNorm or upscale output is then made without
  // room for context frames; a resnet with a 1x1 shortcut computes the shortcut first and drops
  // its input before the first convolution; the spatial upsampler upscales its two context frames
  // one at a time. Exact (the same products and sums per output), two cuDNN calls per
  // convolution and a few frame copies; at 1080p it takes the largest tensors of the decoder's
  // full-resolution levels from input + extended input + output to input + output
  // (docs/gpu-notes.md §9). Off for graphs (which update the state in place) and for the first
  // chunk (no memory).
  void set_lean_convs(bool on) { lean_convs_ = on; }
  bool lean_convs() const { return lean_convs_; }

  // CUDA graphs (Backend::graphs_enabled(), no block observer installed): a chunk is recorded
  // once and replayed for later chunks with the same input shape, state layout (names and
  // shapes) and state addresses. To keep the addresses, later chunks update the causal state in
  // place (Backend::copy_frames_into). Per shape and state layout, the first chunk runs eagerly
  // (it also autotunes the convolutions) and shows whether the layout and addresses survive a
  // chunk; once they do, the next chunk is recorded, its recording launched, and every chunk after
  // it that finds its state at the same addresses replays it. While recording, stage telemetry
  // is skipped (it synchronises); a replayed chunk reports one "<encoder|decoder>.graph" stage.
  struct GraphStats {
    int64_t eager = 0, captured = 0, replayed = 0, discarded = 0;
    std::string last_discard;  // why the last recording was not kept
  };
  GraphStats graph_stats() const;

  // x: [1, C_in, T, H, W], H and W multiples of 8. First chunk (state.started == false): T = 4k+1;
  // later chunks: T = 4k. Returns the moments [1, 2*latent, t, H/8, W/8] (mean = first half).
  Result<Tensor> encode_chunk(const Tensor& x, CausalState& state) const;
  // z: [1, latent, t, h, w]. First chunk returns 4t-3 frames, later chunks 4t.
  Result<Tensor> decode_chunk(const Tensor& z, CausalState& state) const;

 private:
  VaeModel() = default;
  const Tensor& w(const std::string& name) const;
  // How causal_conv treats its causal memory. kKeepElsewhere: pads as usual but stores nothing
  // (the caller keeps the memory in another form, upsample()); kExtended: x already is the
  // extended input (memory frames first), so it neither pads nor stores.
  enum class Memory { kStore, kKeepElsewhere, kExtended };
  Result<Tensor> causal_conv(const Tensor& x, const std::string& prefix, int stride_t,
                             int stride_hw, bool downsample_pad, CausalState& state,
                             Memory memory_mode = Memory::kStore) const;
  // GroupNorm+SiLU `norm`, then the causal convolution `conv` (lean where it applies).
  Result<Tensor> norm_conv(Tensor x, const std::string& norm, const std::string& conv,
                           CausalState& state) const;
  // Whether the causal convolution `conv` runs lean on a chunk of `frames` frames (see
  // set_lean_convs).
  bool lean_applies(const std::string& conv, int64_t frames, const CausalState& state) const;
  // The lean convolution itself: `n` is the convolution's input (owned: its first four frames
  // are overwritten); `write_context` puts the two context frames into frames 0 and 1 of n.
  template <typename WriteContext>
  Result<Tensor> split_context_conv(Tensor n, const std::string& conv,
                                    WriteContext write_context) const;
  Result<Tensor> resnet(Tensor x, const std::string& prefix, CausalState& state) const;
  Result<Tensor> mid_block(const Tensor& x, const std::string& prefix, CausalState& state) const;
  Result<Tensor> upsample(Tensor x, const std::string& prefix, bool temporal,
                          CausalState& state) const;
  // Upsample3D's 1x1x1 upscale_conv and depth-to-space (`context_frames`: see
  // Backend::depth_to_space).
  Result<Tensor> upscale(const Tensor& x, const std::string& prefix, bool temporal,
                         bool drop_frame_1, int context_frames = 2) const;
  Result<Tensor> norm_silu(const Tensor& x, const std::string& prefix,
                           int context_frames = 2) const;
  Result<Tensor> encoder_head(Tensor x, CausalState& state) const;
  Result<Tensor> decoder_tail(Tensor h, CausalState& state) const;
  Result<Tensor> up_block(Tensor h, int level, CausalState& state) const;
  // Runs `stage` on consecutive frame pieces of x and concatenates: a first piece of
  // `first_piece` frames if > 0, then `piece` frames each (default hires_chunk_frames_; <= 0 or
  // >= the frame count: one call on the whole x). While chunked upsampling is on, the stage's
  // causal memory is read by every piece and is never offered to Backend::offload_hint.
  template <typename Stage>
  Result<Tensor> in_pieces(Tensor x, Stage stage, int64_t first_piece = 0,
                           int64_t piece = -1) const;
  Result<Tensor> encoder_level(Tensor h, int level, CausalState& state) const;
  // Stores a conv's causal memory in `state` and, outside the piece stages (whose memory every
  // piece reads), hints the backend that it may move it off the device until the next chunk.
  Status keep_memory(CausalState& state, const std::string& key, Tensor memory) const;
  Status observe(std::string_view block, const Tensor& t) const;
  Result<Tensor> encode_chunk_eager(const Tensor& x, CausalState& state) const;
  Result<Tensor> decode_chunk_eager(const Tensor& z, CausalState& state) const;
  // Runs `run` on x as a recorded graph where it can (see GraphStats above), eagerly otherwise.
  template <typename Run>
  Result<Tensor> graphed(std::string_view coder, const Tensor& x, CausalState& state,
                         Run run) const;
  bool graphs_on() const { return backend_->graphs_enabled() && !observer_; }
  // Whether causal memory is updated in place (when graphs are on).
  bool in_place_state() const { return graphs_on(); }
  // Writes frames [begin, begin + slot frames) of src into the causal memory `key` in place if
  // in_place_state() and the slot has that shape; returns false (nothing done) otherwise.
  Result<bool> update_memory_in_place(CausalState& state, const std::string& key,
                                      const Tensor& src, int64_t begin) const;
  void start_stage_clock() const;
  void emit_sample(std::string_view stage, double wall_ms, double device_ms) const;

  Backend* backend_ = nullptr;
  VaeConfig config_;
  std::map<std::string, Tensor> weights_;
  BlockObserver observer_;
  TelemetrySink* telemetry_ = nullptr;
  mutable int64_t chunk_label_ = -1, tile_label_ = -1;
  int hires_chunk_frames_ = 0;
  bool lean_convs_ = false;
  mutable bool piece_stage_ = false;  // inside in_pieces() with chunked upsampling on
  mutable std::chrono::steady_clock::time_point stage_start_;
  mutable int64_t stage_span_ = -1;  // Backend::begin_device_span handle of the running stage
  mutable bool capturing_ = false;   // recording a graph: no stage telemetry

  // Recorded chunks (shared so the model stays movable; released through the backend).
  struct GraphCache {
    struct Record {
      int64_t id = -1;
      Tensor in, out;  // the recording's input and output (fixed addresses)
    };
    Backend* backend = nullptr;
    std::map<std::string, Record> graphs;  // shape | state layout | state addresses -> recording
    std::set<std::string> stable;          // shape | state layout whose chunks keep their state
    GraphStats stats;
    void clear();
    ~GraphCache() { clear(); }
  };
  std::shared_ptr<GraphCache> graph_cache_;
};

}  // namespace seedvae
