// FP8 numerics: what FP8 (e4m3) convolutions would do to a model's output, measured on any
// backend at that backend's speed (`--fp8-numerics`).
//
// An FP8 convolution quantises its input with one scale for the tensor and its weight with one
// scale per output channel (each scale maps the largest magnitude to e4m3's 448), multiplies the
// 8-bit values with fp32 accumulation and dequantises in the epilogue. The wrapper gives the same
// numbers: before each convolution it rounds the input, and on first use the weight, to the
// nearest value e4m3 represents at that scale (round to nearest even, saturating at +-448 times
// the scale), and runs the wrapped backend's convolution on those values. Left in the backend's
// own precision, as an FP8 engine would leave them: the model's output convolutions
// (Conv3dParams::model_output), convolutions of fewer than 16 input or output channels (FP8
// tensor cores take multiples of 16), GroupNorm, attention and everything else.
//
// The rounding runs on the host (the activation goes down and back up), so the wrapper is for
// measurement, not speed: cuDNN's FP8 engines and their speed are measured separately
// (`seedvae_gpu_bench convprobe`, docs/gpu-notes.md §5).
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "core/backend/backend.h"

namespace seedvae {

// The e4m3 value nearest to v (ties to even), saturated to +-448; NaN stays NaN.
float round_to_e4m3(float v);

// Rounds `data` (fp32) in place to e4m3 at scale max|row| / 448 for each of `rows` equal rows
// (1 row: one scale for the whole tensor). A row of zeros stays zero.
void fake_quantize_e4m3(float* data, int64_t n, int64_t rows);

// Wraps `inner` (which must outlive the wrapper); every op is forwarded, convolutions with their
// operands rounded as above. Graph capture is off (the host rounding cannot be recorded).
std::unique_ptr<Backend> make_fp8_numerics_backend(Backend& inner);
// The same, owning the wrapped backend.
std::unique_ptr<Backend> make_fp8_numerics_backend(std::unique_ptr<Backend> inner);

}  // namespace seedvae
