// Temporal slicing (docs/model.md §4): runs a whole clip through a VideoVae (VaeModel or
// WanModel) chunk by chunk with an explicit causal state, so device memory is bounded by the chunk,
// not by the clip length. Cancellation is checked between chunks; progress is reported per chunk
// (one chunk late with StreamOptions::async_tiles).
#pragma once

#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "core/base/cancel.h"
#include "core/base/progress.h"
#include "core/tensor/host_tensor.h"
#include "core/vae/vae_model.h"
#include "core/vae/video_vae.h"

namespace seedvae {

struct StreamOptions {
  // Latent frames per chunk (1 latent = 4 video frames); the first chunk has one more. 0 runs the
  // whole clip in one pass. Upstream SeedVR2 uses 1 (split size 4).
  int chunk_latents = 1;
  // "Async tiles" (copy_pipeline.h): queue the next chunk (or tile) on the device before the
  // host finishes the previous one -- waits for its download, blends it, calls on_chunk/on_tile
  // and reports progress -- so transfers and host work overlap the compute. Bit-identical
  // output either way; on costs one more chunk's output held on the device. Backends without
  // asynchronous copies (the CPU backend) run the same order synchronously. Exact tiling ignores
  // it (its windows move through host memory layer by layer).
  bool async_tiles = true;
  // The first chunk is the causal head alone (latent 0, video frame 0), then chunks of
  // chunk_latents each, instead of upstream's first chunk of chunk_latents + 1 latents (4n+1
  // frames). Every chunk then has at most 4*chunk_latents output frames, so the largest chunk,
  // which sets the peak device memory of a streamed decode, is a fifth smaller (1 + 4 + 4 ...
  // frames instead of 5 + 4 ...). The same result up to floating-point reassociation (any
  // chunking aligned to latent frames is exact, docs/model.md §4.3).
  bool lone_head = false;
  // How the model runs each chunk (VaeModel's ChunkOptions: chunked upsampling, lean
  // convolutions). Same output.
  int hires_chunk_frames = 0;
  bool lean_convs = false;

  // The model options of chunk `chunk` (telemetry label) of tile `tile`.
  ChunkOptions chunk_options(int64_t chunk, int64_t tile) const {
    return {.hires_chunk_frames = hires_chunk_frames,
            .lean_convs = lean_convs,
            .chunk = chunk,
            .tile = tile};
  }
};

// Receives each finished chunk on the engine thread: frames [first_frame, first_frame + T) of the
// output, fp32 [1, C, T, H, W]. Returning a non-OK status stops the run with that status.
using ChunkSink = std::function<Status(int64_t first_frame, const HostTensor& chunk)>;

struct StreamHooks {
  const CancelToken* cancel = nullptr;
  ProgressSink* progress = nullptr;
  ChunkSink on_chunk;
  int64_t tile = -1;  // tile index for telemetry labels when called by the tiling scheduler
  // false: the output is not gathered on the host -- each chunk exists only until on_chunk has
  // taken it, and the run returns an empty tensor -- so host memory does not grow with the clip
  // (a decode that streams into a writer). Ignored without on_chunk.
  bool keep_output = true;
  bool gathers() const { return keep_output || !on_chunk; }
};

// Chunk boundaries in latent frames for `latent_frames` latents: [begin, end) pairs
// (StreamOptions::lone_head: a first chunk of latent 0 alone).
std::vector<std::pair<int64_t, int64_t>> plan_chunks(int64_t latent_frames, int chunk_latents,
                                                     bool lone_head = false);

// video: [1, 3, T, H, W] with T = 4n+1 and H, W multiples of the model's spatial factor, any
// dtype. Returns the moments [1, 2*latent, n+1, H/s, W/s] in fp32.
Result<HostTensor> encode_video(VideoVae& model, const HostTensor& video,
                                const StreamOptions& options, const StreamHooks& hooks = {});

// A pull source of video frames for encode_stream(): the frames arrive chunk by chunk instead of
// as one preallocated tensor (media::VideoFrameSource reads a file this way, optionally on a
// prefetch thread). next() is called on the engine thread only.
class FrameSource {
 public:
  virtual ~FrameSource() = default;
  // The next frames, at most `max_frames` (>= 1), as [1, 3, k, H, W] of any dtype with H, W
  // multiples of the model's spatial factor, the same H, W every time. k < max_frames only for
  // the last frames of the stream; an empty tensor (or k = 0) once the stream is exhausted. The
  // frames of the whole stream must add up to 4n+1 (the source applies the temporal padding).
  virtual Result<HostTensor> next(int64_t max_frames) = 0;
};

// encode_video() for a video that arrives chunk by chunk: pulls exactly the frames of each chunk
// of plan_chunks() (the first chunk 4*chunk_latents + 1 frames, or 1 with lone_head, then
// 4*chunk_latents; the whole
// stream at once for chunk_latents = 0) and runs it as encode_video() would, so the moments are
// bit-identical to encode_video() of the concatenated frames. The chunk count is unknown in
// advance: progress reports `total` as done + 1 until the source ends. Cancellation is checked
// before each pull.
Result<HostTensor> encode_stream(VideoVae& model, FrameSource& source, const StreamOptions& options,
                                 const StreamHooks& hooks = {});

// latent: [1, latent, t, h, w]. Returns the decoded video [1, 3, 4t-3, sh, sw] in fp32
// (unclamped).
Result<HostTensor> decode_latent(VideoVae& model, const HostTensor& latent,
                                 const StreamOptions& options, const StreamHooks& hooks = {});

// Channels [0, latent) of the moments: the posterior mean SeedVR2 uses.
HostTensor moments_mean(const HostTensor& moments);
// mean + exp(clamp(logvar, -30, 20) / 2) * noise, noise ~ N(0, 1) from `seed` (the official
// pipeline's sample()); one fused multiply-add per element.
HostTensor moments_sample(const HostTensor& moments, uint64_t seed);

// Frames [begin, end) of a 5-D host tensor along T, and concatenation along T.
HostTensor slice_time(const HostTensor& x, int64_t begin, int64_t end);
Result<HostTensor> concat_time(std::span<const HostTensor> parts);

}  // namespace seedvae
