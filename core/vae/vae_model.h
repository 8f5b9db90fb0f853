// The SeedVR2 causal video VAE (docs/model.md §2) on any Backend, one temporal chunk at a time.
// This is the only description of the network: the streamed and blend-tiled schedulers run it on
// a device backend, exact tiling runs it on a backend that tiles every op
// (core/schedule/exact_tiling.h), and the planner replays it on a dry-run backend that only counts
// bytes and FLOPs (core/backend/counting_backend.h).
//
// Streaming (docs/model.md §4): a CausalState carries, per causal convolution, the last
// (kT - sT) frames of its extended input from one chunk to the next, and whether the stream has
// started (which also decides Upsample3D's first-frame drop). Any chunking aligned to 4 input
// frames / 1 latent frame gives the whole-clip result up to fp32 reassociation.
//
// Thread affinity: the model, its state and its backend belong to one thread.
#pragma once

#include <chrono>
#include <deque>
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
#include "core/vae/video_vae.h"

namespace seedvae {

class VaeModel final : public VideoVae {
 public:
  // Uploads every parameter to `backend` (which must outlive the model).
  static Result<VaeModel> create(Backend& backend, const VaeWeights& weights);
  // Every parameter of `config` made by `make` (e.g. CountingBackend::declare_weight for a dry
  // run, which needs shapes only).
  using ParameterFactory = std::function<Result<Tensor>(const VaeConfig::Param& parameter)>;
  static Result<VaeModel> create(Backend& backend, const VaeConfig& config,
                                 const ParameterFactory& make);

  VaeModel(VaeModel&&) noexcept;
  VaeModel& operator=(VaeModel&&) noexcept;
  ~VaeModel();

  const VaeConfig& config() const { return config_; }
  Backend& backend() const override { return *backend_; }
  VaeFamily family() const override { return VaeFamily::kSeedVR2; }
  int latent_channels() const override { return config_.latent_channels; }
  int spatial_factor() const override { return config_.spatial_factor(); }
  int temporal_factor() const override { return config_.temporal_factor(); }
  int64_t decoder_reach() const override;
  std::vector<std::string> decoder_units() const override { return units_; }
  void set_observer(BlockObserver observer) override { observer_ = std::move(observer); }
  // Per-block timing and memory (synchronises the backend after each block while installed; the
  // device time comes from Backend::begin_device_span/end_device_span, core/base/telemetry.h).
  // A deferred sink's samples not yet read when the sink changes are dropped.
  void set_telemetry(TelemetrySink* sink) override;
  TelemetrySink* telemetry() const { return telemetry_; }

  // The scheduler's "chunk" / "tile" summary samples (VideoVae): begin_summary() before a
  // chunk's upload, end_summary() after its download emits one sample labelled `chunk`/`tile`
  // with the wall and device time in between. Only for a sink that wants_summaries(); no-ops (no
  // timing, no synchronisation) otherwise.
  using SummarySpan = seedvae::SummarySpan;
  SummarySpan begin_summary() const override;
  Status end_summary(std::string_view stage, const SummarySpan& span, int64_t chunk,
                     int64_t tile) const override;
  // Emits a deferred sink's stage samples that are still unread, waiting for the device (the
  // schedulers call it when a stream's or a tiled run's chunks are done).
  void flush_telemetry() const override;

  // CUDA graphs (Backend::graphs_enabled(), no block observer installed): a chunk is recorded
  // once and replayed for later chunks with the same input shape, options, state layout (names
  // and shapes) and state addresses. To keep the addresses, later chunks update the causal state
  // in place (Backend::copy_frames_into). Per shape and state layout, the first chunk runs
  // eagerly (it also autotunes the convolutions) and shows whether the layout and addresses
  // survive a chunk; once they do, the next chunk is recorded, its recording launched, and every
  // chunk after it that finds its state at the same addresses replays it. While recording, stage
  // telemetry is skipped (it synchronises); a replayed chunk reports one
  // "<encoder|decoder>.graph" stage. The recordings are a cache: the output is the same without.
  struct GraphStats {
    int64_t eager = 0, captured = 0, replayed = 0, discarded = 0;
    std::string last_discard;  // why the last recording was not kept
  };
  GraphStats graph_stats() const;

  // x: [1, C_in, T, H, W], H and W multiples of 8. First chunk (state.started == false): T = 4k+1;
  // later chunks: T = 4k. Returns the moments [1, 2*latent, t, H/8, W/8] (mean = first half).
  Result<Tensor> encode_chunk(const Tensor& x, CausalState& state,
                              const ChunkOptions& options = {}) override;
  // z: [1, latent, t, h, w]. First chunk returns 4t-3 frames, later chunks 4t.
  Result<Tensor> decode_chunk(const Tensor& z, CausalState& state,
                              const ChunkOptions& options = {}) override;

 private:
  class Pass;        // one encode_chunk / decode_chunk call (vae_model.cpp)
  class GraphCache;  // the recorded chunks (vae_model.cpp)

  VaeModel();
  const Tensor& w(const std::string& name) const;
  // Runs `run` on x as a recorded graph where it can (see GraphStats above), eagerly otherwise.
  template <typename Run>
  Result<Tensor> graphed(std::string_view coder, const Tensor& x, CausalState& state,
                         const ChunkOptions& options, Run run);
  bool graphs_on() const { return backend_->graphs_enabled() && !observer_; }
  void emit_sample(std::string_view stage, int64_t chunk, int64_t tile, double wall_ms,
                   double device_ms, const MemoryStats& memory) const;
  // Ends a stage's timing (host clock `start`, device span `span`): a synchronised sink gets its
  // sample now, after draining the queue; a deferred one's is queued (PendingStage) when the
  // backend has a device timer. Returns when the next stage starts on the host clock.
  Result<std::chrono::steady_clock::time_point> end_stage(
      std::string_view stage, int64_t chunk, int64_t tile,
      std::chrono::steady_clock::time_point start, int64_t span) const;
  // Emits the queued samples in order while their spans are read: those of passes before
  // `wait_before_pass` wait for the device, the rest stop at the first still pending.
  void emit_pending(int64_t wait_before_pass) const;

  struct PendingStage {
    std::string stage;
    int64_t chunk = -1, tile = -1, span = -1, pass = 0;
    MemoryStats memory;
  };

  Backend* backend_ = nullptr;
  VaeConfig config_;
  std::vector<std::string> units_;         // decoder_units()
  std::map<std::string, int> unit_index_;  // position in units_
  std::map<std::string, Tensor> weights_;
  BlockObserver observer_;
  TelemetrySink* telemetry_ = nullptr;
  mutable std::deque<PendingStage> pending_;  // a deferred sink's stages not yet read
  mutable int64_t passes_ = 0;                // encode/decode passes run (PendingStage::pass)
  std::unique_ptr<GraphCache> graphs_;
};

}  // namespace seedvae
