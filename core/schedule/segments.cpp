#include "core/schedule/segments.h"

#include <algorithm>

namespace seedvae {

FrameRange frames_of_latents(int64_t begin, int64_t end, int factor) {
  auto first_frame = [&](int64_t i) { return i == 0 ? 0 : factor * i - (factor - 1); };
  return {first_frame(begin), end <= 0 ? 0 : factor * (end - 1) + 1};
}

int64_t segment_start(int64_t begin, int64_t reach, const StreamOptions& options) {
  const int64_t c = options.chunk_latents;
  if (c <= 0) return std::max<int64_t>(0, begin - reach);  // one chunk: no grid to keep
  // The whole run's chunk boundaries are 1 + k*c (with or without the lone head); a run that
  // starts at s = m*c has its boundaries there too after its first chunk, which ends at s + 1
  // (lone head) or s + c + 1.
  const int64_t first_chunk = options.lone_head ? 1 : c + 1;
  const int64_t latest = std::min(begin - reach, begin - first_chunk);
  if (latest <= 0) return 0;
  return latest / c * c;
}

Result<HostTensor> decode_range(VideoVae& model, const HostTensor& latent, int64_t first,
                                int64_t begin, int64_t end, const StreamOptions& options,
                                const StreamHooks& hooks, int64_t reach) {
  if (latent.shape().rank() != 5) {
    return invalid_argument("decode_range: latent must be [1, z, t, h, w], got " +
                            latent.shape().to_string());
  }
  const int64_t t = latent.shape()[2];
  if (begin < 0 || end <= begin) {
    return invalid_argument("decode_range: empty or negative range [" + std::to_string(begin) +
                            ", " + std::to_string(end) + ")");
  }
  if (reach < 0) reach = model.decoder_reach();
  const int64_t s = segment_start(begin, reach, options);
  if (s < first || end > first + t) {
    return invalid_argument("decode_range: latent frames [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") need the clip's latent frames [" +
                            std::to_string(s) + ", " + std::to_string(end) + "); given [" +
                            std::to_string(first) + ", " + std::to_string(first + t) + ")");
  }
  SEEDVAE_ASSIGN_OR_RETURN(
      HostTensor video,
      decode_latent(model, slice_time(latent, s - first, end - first), options, hooks));
  const int f = model.temporal_factor();
  // the window's latent j >= 1 gives its frames f*j - (f-1) .. f*j, the clip's frames of latent
  // s + j: the clip's frame g is the window's g - f*s
  const FrameRange want = frames_of_latents(begin, end, f);
  return slice_time(video, want.begin - f * s, want.end - f * s);
}

}  // namespace seedvae
