// The memory/time planner: given a frame size, the VAE configuration, the precision, the tiling
// mode and a memory budget, predicts the peak backend memory and the relative time of a run, and
// picks the largest tile and temporal chunk that fit (`seedvae plan`, --budget-gb).
//
// Memory model: VaeModel itself is replayed on shapes only -- untiled and blended tiles on a
// CountingBackend, exact tiling on an ExactTilingBackend dry run over one -- so every tensor is
// allocated and released in the model's own program order, with the options of the run (temporal
// chunk, lone head, chunked upsampling, lean convolutions). The CountingBackend adds what the
// backend holds beyond the tensors the model asks for (BackendMemoryModel: packed weights, the
// attention's scratch). The peak is the largest live sum. The first chunk runs once before the
// measured chunks, as a backend's first run packs its weights; then the first two chunks are
// replayed (the first is the largest, the second has every causal memory alive).
//
// Time model: FLOPs of the run (including the recomputation of overlapping tiles and halos)
// relative to the untiled run, times a per-mode overhead factor for host-side work
// (BackendMemoryModel::exact_host_overhead); calibrated on the CPU backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend/counting_backend.h"
#include "core/base/status.h"
#include "core/schedule/tile_plan.h"
#include "core/schedule/tiled.h"
#include "core/vae/vae_config.h"

namespace seedvae {

enum class PlanOp { kDecode, kEncode };

struct PlanRequest {
  PlanOp op = PlanOp::kDecode;
  VaeConfig config;
  int64_t height = 0, width = 0;  // output pixels (decode) / input pixels (encode), multiples of 8
  int64_t frames = 17;            // video frames (4n+1)
  int64_t activation_bytes = 4;   // bytes per activation element (fp32 4, bf16/fp16 2)
  int64_t weight_bytes = 4;       // bytes per parameter on the backend
  TilingMode mode = TilingMode::kBlend;
  TileLayout layout = TileLayout::kReference;
  TileSpec spec;           // tile (when not automatic) and overlap (blend) in pixels
  bool auto_tile = true;   // pick the largest tile that fits the budget
  int chunk_latents = 1;   // temporal chunk when not automatic
  bool auto_chunk = true;  // pick the largest chunk (<= max_chunk_latents) that fits
  int max_chunk_latents = 4;
  int hires_chunk_frames = 0;  // ChunkOptions::hires_chunk_frames (untiled and blend modes)
  bool lean_convs = false;     // ChunkOptions::lean_convs (untiled and blend modes)
  bool lone_head = false;      // StreamOptions::lone_head
  int64_t budget_bytes = 0;    // 0: unlimited
  bool exact_keep_weights = false;
  BackendMemoryModel backend = BackendMemoryModel::cpu();
};

// Prediction for one (tile, chunk) choice.
struct PlanEstimate {
  TileSpec spec;  // tile actually used (pixels)
  int chunk_latents = 1;
  int64_t tiles = 1;                  // tiles per chunk (exact: of the full-resolution layers)
  int64_t weight_bytes = 0;           // resident model weights (plain + packed copies)
  int64_t exact_weight_bytes = 0;     // exact mode: the weights of the layer(s) it uploads itself
  int64_t activation_peak_bytes = 0;  // largest live activations + transients
  int64_t peak_bytes = 0;             // weight + exact weight + activation + fixed
  // Upper bound when the plan has tiles of several shapes and the backend packs weights per
  // layout (CPU, reference layout): every conv weight packed max_weight_packs times.
  int64_t peak_bytes_upper = 0;
  int64_t tile_shapes = 1;   // distinct tile shapes in the plan
  int64_t host_bytes = 0;    // host memory of the scheduler (accumulators, parked state,
                             // exact mode's whole-frame layer inputs and causal memory)
  std::string peak_at;       // block and op where the peak happens
  double flops = 0;          // of the whole clip
  double relative_time = 1;  // vs. the untiled run of the same clip
  bool fits = true;
};

struct TilePlanReport {
  PlanRequest request;
  bool fits = false;
  std::string message;  // why it does not fit / what was chosen
  PlanEstimate chosen;
  PlanEstimate untiled;                  // the whole frame, chosen chunk (for comparison)
  TilePlan plan;                         // blend: the tile plan of the chosen tile (latent units)
  std::vector<PlanEstimate> candidates;  // what was considered, largest tile first
};

// Predicts one configuration (no search).
Result<PlanEstimate> estimate(const PlanRequest& request, const TileSpec& tile, int chunk_latents);

// Searches tiles (largest first: the whole frame, then 64-pixel steps down to 128, 16-pixel steps
// down to 16, then 8) and chunks
// (max_chunk_latents down to 1) and returns the first that fits the budget (tile first, then
// chunk). For kOff only the chunk is searched.
Result<TilePlanReport> plan(const PlanRequest& request);

// Bytes of the causal state (all causal convolutions' memory frames) of a stream over a
// lat_h x lat_w latent frame, at `activation_bytes` per element.
int64_t causal_state_bytes(const VaeConfig& config, bool encode, int64_t lat_h, int64_t lat_w,
                           int chunk_latents, int64_t activation_bytes);

// JSON object for `seedvae plan --json`: request, chosen and untiled estimates, the tile
// rectangles of the chosen plan (blend) and every candidate considered.
std::string plan_report_json(const TilePlanReport& report);

// "peak 6.21 GiB (weights 0.93 GiB) ..." one-line summary for the CLI.
std::string describe(const PlanEstimate& e);
std::string format_bytes(int64_t bytes);

}  // namespace seedvae
