// Spatial tiling of encode and decode, backend-agnostic (CPU and CUDA run the same scheduler).
//
//  * kOff   — the plain streamed path (schedule/streaming.h).
//  * kBlend — reference-compatible blended tiling (docs/model.md §5): every tile is decoded
//             (encoded) independently through the streaming path with its own CausalState, and
//             the tile outputs are blended with cosine ramps on interior edges and normalised by
//             the accumulated weight. With TileLayout::kReference the output reproduces the
//             upstream port (golden L2.dec_tiled_A/B, V5.enc_moments_tiled_A). Tiles share no
//             context, so the result differs from the untiled output (seams are only blended).
//  * kExact — the untiled result, computed with only a tile's worth of the large activations on
//             the backend (exact_tiling.h, docs/model.md §5): the model runs on an
//             ExactTilingBackend whose convolutions run on tiles with halos, whose per-frame
//             GroupNorm statistics are gathered over the whole frame, whose attention runs on the
//             whole (1/64-size) frame, and which keeps the causal memory for the whole frame on
//             the host. A Wan decode runs in halo tiles instead (wan_tiles.h: the trunk on the
//             whole latent frame, each tile's tail with the decoder's reach around it), which
//             keeps one tile's activations and causal state on the backend without a host round
//             trip per op.
//
// Order of work: exact mode is chunk-major (finished chunks stream out through
// StreamHooks::on_chunk as with the untiled path), except a Wan decode's halo tiles, which are
// tile-major (the chunks reach on_chunk once the last tile has run); blend mode picks chunk- or
// tile-major (TileOrder), with only one tile's causal state on the backend at any time either way.
//
// Cancellation is checked between tiles; progress is reported per tile ("decode tiles" /
// "encode tiles"; in exact mode per tile of every layer, "decode exact" / "encode exact", and
// per tile and chunk for a Wan decode's halo tiles, "decode tiles").
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/schedule/streaming.h"
#include "core/schedule/tile_plan.h"
#include "core/vae/state_dict.h"

namespace seedvae {

class DeviceWorkers;

enum class TilingMode { kOff, kBlend, kExact };
std::string_view tiling_mode_name(TilingMode mode);  // "off", "blend", "exact"
// Parses "off" | "blend" | "exact".
Result<TilingMode> parse_tiling_mode(std::string_view s);

// Blend mode's order of work (results are bitwise identical):
//  * kChunkMajor: every tile of a temporal chunk, then the next chunk; the tiles' causal states
//    are parked on the host between chunks (host memory ~ the whole frame's causal state, in the
//    backend's activation dtype); finished chunks stream out through StreamHooks::on_chunk.
//  * kTileMajor: every chunk of a tile, then the next tile; one causal state, on the backend; the
//    whole clip is accumulated on the host and on_chunk is called at the end.
//  * kAuto: the one with the smaller host footprint (short clips: tile-major).
enum class TileOrder { kAuto, kChunkMajor, kTileMajor };

struct TileOptions {
  TilingMode mode = TilingMode::kBlend;
  // Tile and overlap in output pixels (decode) / input pixels (encode). Exact mode uses the tile
  // as the spatial extent of every activation tile (scaled to each layer's resolution) and needs
  // no overlap.
  TileSpec spec;
  TileLayout layout = TileLayout::kReference;  // blend mode only
  TileOrder order = TileOrder::kAuto;          // blend mode only
  // Exact mode reads GroupNorm parameters from and uploads convolution weights out of these host
  // weights (VaeModel does not expose its uploaded parameters). Required for kExact.
  const VaeWeights* weights = nullptr;
  // Exact mode: keep every uploaded weight for the whole run (faster) instead of uploading each
  // layer's weights while it runs and releasing them after (less backend memory).
  bool exact_keep_weights = false;
  // Blend mode: the tiles spread over these devices' engines (device_workers.h; its first() is
  // the model the run is given), each tile whole on one device. Null: one device.
  DeviceWorkers* devices = nullptr;
};

// One finished tile, for the UI's live preview and for telemetry.
struct TileEvent {
  int64_t index = 0;        // tile index within the plan (exact: within the final layer)
  int64_t total = 0;        // tiles per chunk
  int64_t chunk = 0;        // temporal chunk index
  int64_t first_frame = 0;  // first output frame (decode) / latent frame (encode) of `data`
  Rect pixel;   // where the tile lies, in output pixels (decode) / input pixels (encode)
  Rect latent;  // the same in latent units
  const HostTensor* data = nullptr;  // raw tile output [1, C, T, h, w], before blending
};
using TileSink = std::function<Status(const TileEvent&)>;

// What a tiled run did, for seam metrics (seam_metrics.h), `seedvae plan` style reports and the
// overlay of tile rectangles.
// One device's part of a blend run over several devices (TileOptions::devices).
struct TileDeviceStats {
  std::string backend;  // Backend::name()
  int64_t tiles = 0;    // tiles it took (chunk-major: per chunk, summed)
  double busy_ms = 0;   // its thread's time in its steps
  MemoryStats memory;   // its backend's statistics at the end (peaks: device 0's since the
                        // caller's reset, the others' this run's)
};

struct TileRunReport {
  TilingMode mode = TilingMode::kOff;
  TilePlan plan;                   // blend: the tile plan; exact: the plan of the final layer
  std::vector<Rect> rects;         // tile rectangles in output (decode) / input (encode) pixels
  std::vector<Rect> output_rects;  // where each tile lands in the output tensor's H x W
  // Sum and count over all frames of each tile's raw output, per channel (for the
  // reference-free per-tile mean offset).
  std::vector<std::vector<double>> tile_sums;
  std::vector<int64_t> tile_counts;
  int64_t chunks = 0;
  bool tile_major = false;         // blend: the order that was used
  int64_t tiles_run = 0;           // tile executions (blend: tiles x chunks; exact: all layers)
  int64_t backend_peak_bytes = 0;  // Backend::memory_stats().peak_bytes at the end of the run
  int64_t halo = 0;                // exact Wan decode: latent pixels of context around each tile
  int64_t host_state_bytes = 0;    // causal state held on the host (blend chunk-major: all
                                   // parked tiles; exact: the whole-frame state)
  double seconds = 0;
  std::vector<TileDeviceStats> devices;  // blend over several devices: one per device
};

struct TileHooks {
  TileSink on_tile;                 // optional
  TileRunReport* report = nullptr;  // optional, filled when given
};

// Why SeedVR2's exact tiling (ExactTilingBackend) refuses chunked upsampling (--hires-chunk);
// a Wan decode's halo tiles take it.
Status exact_tiling_refuses_hires();

// Either network runs untiled; blend tiling (SeedVR2's reference tiling) is SeedVR2's only, and
// exact tiling runs the families whose ops ExactTilingBackend has (kUnsupported otherwise).
// latent: [1, C_latent, t, h, w]. Returns the decoded video [1, 3, 4t-3, 8h, 8w] in fp32.
Result<HostTensor> tiled_decode(VideoVae& model, const HostTensor& latent,
                                const TileOptions& options, const StreamOptions& stream = {},
                                const StreamHooks& hooks = {}, TileHooks* tile_hooks = nullptr);

// video: [1, 3, 4n+1, H, W], H and W multiples of 8. Returns the (blended) moments
// [1, 2*C_latent, n+1, H/8, W/8] in fp32; the latent is moments_mean() of it.
Result<HostTensor> tiled_encode(VideoVae& model, const HostTensor& video,
                                const TileOptions& options, const StreamOptions& stream = {},
                                const StreamHooks& hooks = {}, TileHooks* tile_hooks = nullptr);

}  // namespace seedvae
