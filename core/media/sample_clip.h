// A deterministic synthetic test clip, so a default run and the tests need no video file.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/base/cancel.h"
#include "core/base/status.h"
#include "core/tensor/host_tensor.h"

namespace seedvae::media {

// fp32 [1, 3, frames, height, width], RGB in [-1, 1]: a slowly drifting colour gradient
// background with a fine static texture that pans with the "camera", a soft-edged slanted grating,
// three anti-aliased discs moving on different paths (one crossing another) and a hard-edged bar
// sweeping across the frame. Identical for identical arguments on every run; `seed` changes
// colours, phases and paths. Sizes below 1 are treated as 1.
HostTensor make_sample_clip(int width, int height, int frames, uint64_t seed = 0);
// Frames [first, first + count) of that clip (every frame depends on its index alone, so a long
// clip can be generated chunk by chunk): fp32 [1, 3, count, height, width].
HostTensor make_sample_frames(int width, int height, int64_t first, int64_t count,
                              uint64_t seed = 0);
// The same frames, generated frame by frame: stops with kCancelled between two frames once `stop`
// (may be null) is requested. A frame's rows are shared among up to 8 threads.
Result<HostTensor> generate_sample_frames(int width, int height, int64_t first, int64_t count,
                                          const CancelToken* stop, uint64_t seed = 0);

// The built-in natural demo clip (a held-out clip of the demo model, docs/demo-model.md: a folder
// of 17 JPEG frames, 256x256), for the studio's default run: $SEEDVAE_DEMO_CLIP when set and a
// folder, else <exe_dir>/../share/seedvae/demo-clip (installed by CPack; a build tree gets a copy),
// else an empty path (callers fall back to make_sample_clip).
std::filesystem::path find_demo_clip(const std::filesystem::path& exe_dir);

}  // namespace seedvae::media
