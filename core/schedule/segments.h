// Exact segments of a long clip (docs/scaling.md). A decoder's output frames of latent frame i
// depend on latent frames [i - reach, i] only (VideoVae::decoder_reach), so any stretch of a
// clip can be decoded on its own -- on another card, host or day -- from `reach` latent frames
// before it, and gives the whole-clip decode's frames of that stretch. With the same chunking
// the warm-up start is put on the whole run's chunk grid, so every kept frame comes from a chunk
// of the same shape as in the whole run: bit-identical on the CPU backend and for an identical
// schedule on the CUDA backend (tst_segments).
#pragma once

#include <cstdint>

#include "core/base/status.h"
#include "core/schedule/streaming.h"

namespace seedvae {

// Video frames of latent frames [begin, end) in a whole-clip decode: latent 0 gives frame 0,
// latent i >= 1 frames factor*i - (factor-1) .. factor*i.
struct FrameRange {
  int64_t begin = 0, end = 0;
};
FrameRange frames_of_latents(int64_t begin, int64_t end, int factor);

// The first latent frame a decode of [begin, end) must start from: `reach` (default the model's)
// frames before `begin`, moved back onto the chunk grid of `options` and far enough that the
// first (warm-up) chunk ends by `begin`; 0 near the clip's start.
int64_t segment_start(int64_t begin, int64_t reach, const StreamOptions& options);

// The whole-clip decode's frames of latent frames [begin, end). `latent` holds the clip's latent
// frames [first, first + T): it must cover [segment_start(begin, ...), end). Decodes that window
// with `options` and returns frames_of_latents(begin, end) of the clip ([1, 3, n, H, W], fp32,
// unclamped). `reach` < 0: the model's decoder_reach() (a smaller one is for tests: it is not
// exact).
Result<HostTensor> decode_range(VideoVae& model, const HostTensor& latent, int64_t first,
                                int64_t begin, int64_t end, const StreamOptions& options,
                                const StreamHooks& hooks = {}, int64_t reach = -1);

}  // namespace seedvae
