// Padding a clip to the shapes the causal VAE accepts and removing it after decoding
// (docs/model.md §6). Pure tensor code, no OpenCV.
//
// Spatial: the frame is padded at the right and bottom up to a multiple of `spatial_multiple`
// with the value -1 (0 in [0, 1] space), like numz's DivisiblePad((16, 16)).
// Temporal: the frame count is padded up to the next 4n + 1 (a count already of that form,
// including T = 1, is kept). The official pipeline pads T <= 4 to 5, which is the same thing for
// T = 2..4; it also pads T = 1 to 5, which this plan does not do (a single image is a valid
// 1-frame clip for the VAE).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/host_tensor.h"

namespace seedvae::media {

enum class TemporalPad {
  // numz pad_video_temporal (default): with k = padded - T frames to add, append the reflection
  // without repeating the last frame: T-2, T-3, ..., T-1-k. If k >= T (only T = 2, k = 3), append
  // T-1, T-2, ..., 1 (here: frame 1) followed by k-T+1 copies of frame T-1.
  kMirror,
  // Official cut_videos: append k copies of the last frame.
  kRepeatLast,
};

std::string_view temporal_pad_name(TemporalPad mode);  // "mirror", "repeat-last"
// Accepts "mirror"/"numz" and "repeat-last"/"repeat_last"/"repeat"/"official".
Result<TemporalPad> temporal_pad_from_name(std::string_view name);

struct PadPlan {
  int64_t frames = 0, height = 0, width = 0;                       // original
  int64_t padded_frames = 0, padded_height = 0, padded_width = 0;  // after padding
  bool is_identity() const {
    return frames == padded_frames && height == padded_height && width == padded_width;
  }
};

// The next 4n + 1 >= t (t >= 1).
int64_t next_4n_plus_1(int64_t t);

// spatial_multiple >= 1 (8 suffices for the VAE round trip, 16 matches the upscaler). Sizes must be
// >= 1; a non-positive size or multiple yields a plan with zero padded sizes, which
// apply_padding() rejects.
PadPlan plan_padding(int64_t frames, int64_t height, int64_t width, int spatial_multiple);

// Source frame index of each padded frame: 0..T-1 followed by the padding frames of `mode`.
std::vector<int64_t> temporal_source_indices(int64_t frames, int64_t padded_frames,
                                             TemporalPad mode);

// `video` is [N, C, T, H, W] of any dtype matching plan.{frames,height,width}; the result has the
// same dtype and [N, C, padded_frames, padded_height, padded_width]. Padded pixels are -1.
Result<HostTensor> apply_padding(const HostTensor& video, const PadPlan& plan, TemporalPad mode);

// Keeps the first plan.frames frames and the top-left plan.height x plan.width of a decoded
// [N, C, T', H', W'] tensor (T' >= frames, H' >= height, W' >= width). A tensor that is too
// small comes back as an empty HostTensor; use remove_padding_checked() to get the reason.
HostTensor remove_padding(const HostTensor& decoded, const PadPlan& plan);
Result<HostTensor> remove_padding_checked(const HostTensor& decoded, const PadPlan& plan);

}  // namespace seedvae::media
