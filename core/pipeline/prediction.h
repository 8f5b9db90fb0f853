// What a run will need, before it runs: the planner's prediction (core/schedule/planner.h, a
// replay of the model on a dry-run backend) for the encoder and the decoder of a job with these
// options on a frame of this size, and the job's own host buffers. The studio's settings panel
// shows it next to the device's free memory; a job reports it next to the measured peak.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/base/status.h"
#include "core/pipeline/run_options.h"
#include "core/schedule/planner.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_config.h"

namespace seedvae {

struct MemoryPrediction {
  int64_t weight_bytes = 0;      // the model's parameters on the backend (+ exact tiling's layer)
  int64_t activation_bytes = 0;  // the largest live activations and causal state
  int64_t engine_bytes = 0;      // what the backend will peak at: weights + activations + fixed
  int64_t host_bytes = 0;        // the job's host buffers (chunks of frames, the latent; a
                                 // tiled encode's whole clip) and the scheduler's (tiles, exact
                                 // tiling's frames)
  int64_t tiles = 1;             // tiles per chunk
  double relative_time = 1;      // time relative to the untiled run
  std::string method;            // "planner (decoder, cuda model): ..."
};

// The planner's request for the encoder or decoder of a run of `options` over a padded
// `height` x `width` frame of `frames` frames, with the options' tile and chunk (no search).
PlanRequest plan_request(const RunOptions& options, const VaeConfig& config, bool encode,
                         int64_t height, int64_t width, int64_t frames);

// The tile a run uses: the options' tile; 0x0 (auto) with a memory budget and tiling on: the
// planner's largest tile that fits (`note` says what it chose; out of memory when nothing fits);
// 0x0 otherwise: 512x512.
Result<TileSpec> resolve_tile(const RunOptions& options, const VaeConfig& config, bool encode,
                              int64_t height, int64_t width, int64_t frames, std::string* note);

// A round trip (encoder and decoder, the larger of the two) of `frames` frames of `width` x
// `height` source pixels, padded as the options say. With a device budget (> 0) the prediction
// is for the schedule the run will choose (choose_schedule), and `method` starts with its note.
Result<MemoryPrediction> predict_memory(const RunOptions& options, const VaeConfig& config,
                                        int64_t width, int64_t height, int64_t frames,
                                        int64_t device_budget_bytes = 0);
// The same for a checkpoint of any family. A Wan VAE is predicted by replaying WanModel on a
// dry-run backend with the run's chunking (the first chunk once, as a backend's first run packs
// its weights, then the first three chunks: the first is the largest, the later ones hold every
// causal memory); untiled only (kUnsupported with tiling: the planner's tile search models
// SeedVR2 only).
Result<MemoryPrediction> predict_memory(const RunOptions& options, const VaeWeights& weights,
                                        int64_t width, int64_t height, int64_t frames,
                                        int64_t device_budget_bytes = 0);

// The automatic schedule of a CUDA run (RunOptions::auto_schedule; it applies when the run is
// untiled and no memory switch is set): the options as given when the planner's peak (context
// included) of every op the job runs fits `budget_bytes`, the backend's device-level budget;
// else the causal-state offload with a lone head and lean convolutions (the same output) when
// that fits; else exact tiling with the planner's largest tile (the same output, much slower).
// `note` says what was chosen and why (empty when nothing changed).
struct ScheduleChoice {
  RunOptions options;
  std::string note;
};
Result<ScheduleChoice> choose_schedule(const RunOptions& options, const VaeConfig& config,
                                       bool encode, bool decode, int64_t height, int64_t width,
                                       int64_t frames, int64_t budget_bytes);
// The same for a checkpoint of any family. For a Wan VAE (untiled runs): the options as given when
// the replayed peak fits; else, for a decode, chunked upsampling of 1 frame (the same output) when
// that fits; else that with the causal state offloaded (the same output, slower) when that fits;
// else, for a decode alone, exact halo tiles (fit_wan_tiles: the same output, slower); else the
// options as given, and the note says by how much the peak is over the budget.
Result<ScheduleChoice> choose_schedule(const RunOptions& options, const VaeWeights& weights,
                                       bool encode, bool decode, int64_t height, int64_t width,
                                       int64_t frames, int64_t budget_bytes);

// A Wan decode in halo tiles (core/schedule/wan_tiles.h, --tiling exact) within `budget_bytes`:
// the fewest near-square tiles, each grid tried with the options' chunked upsampling and then
// (`may_set_pieces`) with pieces of one frame, whose replayed peak with the schedule's margins
// fits. Empty when even 64 tiles do not fit.
struct WanTileFit {
  RunOptions options;  // tiling "exact", the tile, hires_chunk_frames
  int64_t peak_bytes = 0;
  int64_t tiles = 0;
};
Result<std::optional<WanTileFit>> fit_wan_tiles(const RunOptions& options, const WanConfig& config,
                                                int64_t height, int64_t width, int64_t frames,
                                                int64_t budget_bytes, bool may_set_pieces = true);

// The planner's largest tile and temporal chunk (at most the options' chunk, or 4 for a whole-clip
// chunk) whose predicted peak fits `budget_bytes`; an untiled setting is fitted with exact tiling,
// which gives the untiled result. The decoder (the larger) picks; the encoder is checked with
// the same choice.
struct BudgetFit {
  bool fits = false;
  std::string message;
  std::string tiling;  // "exact" or "blend"
  PixelSize tile;
  int chunk_latents = 1;
  int64_t peak_bytes = 0;
};
Result<BudgetFit> fit_to_budget(const RunOptions& options, const VaeConfig& config, int64_t width,
                                int64_t height, int64_t frames, int64_t budget_bytes);

}  // namespace seedvae
