// Halo tiles for a Wan decode: the untiled result with one spatial tile's causal state and
// activations on the backend, at the speed of the plain streamed decode (no host round trip per
// op, unlike ExactTilingBackend).
//
// Why it is exact: after the middle block (decoder units 4 on: the levels and the head), no op of
// a Wan decoder looks across pixels except its 3x3 convolutions (the RMS norm is per position,
// upsampling and DupUp3D are local), so an output pixel depends on latent pixels within the
// decoder's spatial reach (wan_decoder_halo) only -- in every chunk, since each causal memory holds
// its own layer's input over the same window. The trunk (conv2, conv1 and the middle, whose
// attention spans the whole frame) runs on the whole latent frame; each tile's tail runs on the
// trunk's output cropped to the tile plus the halo, and only the tile's interior is kept: the
// window's border, where zero padding stands in for the neighbours, lies within the halo.
//
// Order: tile-major. For each tile, every chunk runs the trunk (recomputed per tile: a few percent
// of the decode, at the latent resolution) and the tail, each with its own causal state; one
// tile's state is on the backend at a time. The clip is assembled on the host, so finished chunks
// reach StreamHooks::on_chunk once the last tile has run (as blend tiling's tile-major order).
// A tile's decoded window is downloaded while the next chunk computes (CopyPipeline).
// Measured on the CPU backend against the untiled decode (tst_wan_exact_tiling).
//
// The job layer runs every exact (--tiling exact) Wan decode this way (core/schedule/tiled.h).
#pragma once

#include <cstdint>

#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"
#include "core/vae/wan_model.h"

namespace seedvae {

// How far, in latent pixels, an output pixel of the decoder's tail (units 4 on) depends on the
// trunk's output: each 3x3 convolution reaches one pixel at its own resolution (a level at 2^i
// times the latent's), summed and rounded up.
int64_t wan_decoder_halo(const WanConfig& config);

struct WanTileOptions {
  int64_t tile_h = 512, tile_w = 512;  // the tile's interior in output pixels (rounded to latent
                                       // pixels, at least one)
  int64_t halo = -1;                   // latent pixels around it; -1: wan_decoder_halo()
  // false: the planner's dry run on a counting backend -- only the tile with the largest window
  // runs (each tile holds the same trunk and its own state), nothing is kept or handed on, and
  // the result is an empty tensor
  bool assemble = true;
};

// latent: the raw (denormalised) latent [1, z, t, h, w]. Returns the decoded video
// [1, 3, 4t - 3, h * s, w * s] in fp32 (not clamped), as decode_latent does untiled (an empty
// tensor when the hooks do not gather). Progress: "decode tiles", one step per tile and chunk;
// cancellation between steps; TileHooks::on_tile gets each tile's interior per chunk, and its
// report the tiles' rectangles, per-tile sums and the halo.
Result<HostTensor> wan_tiled_decode(WanModel& model, const HostTensor& latent,
                                    const WanTileOptions& options, const StreamOptions& stream = {},
                                    const StreamHooks& hooks = {}, TileHooks* tile_hooks = nullptr);

}  // namespace seedvae
