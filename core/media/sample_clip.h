// A deterministic synthetic test clip, so a default run and the tests need no video file.
#pragma once

#include <cstdint>

#include "core/tensor/host_tensor.h"

namespace seedvae::media {

// fp32 [1, 3, frames, height, width], RGB in [-1, 1]: a slowly drifting colour gradient
// background with a fine static texture that pans with the "camera", a soft-edged slanted grating,
// three anti-aliased discs moving on different paths (one crossing another) and a hard-edged bar
// sweeping across the frame. Identical for identical arguments on every run; `seed` changes
// colours, phases and paths. Sizes below 1 are treated as 1.
HostTensor make_sample_clip(int width, int height, int frames, uint64_t seed = 0);

}  // namespace seedvae::media
