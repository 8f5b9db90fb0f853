// The Wan RMS norm's arithmetic (Backend::rms_norm, docs/model.md §10.2), shared by the CPU
// backend's channels-last kernel (rms_norm_cl) and exact tiling's lazy rms_norm on plain host
// tensors (core/schedule/exact_tiling.cpp), so that a tiled run gives the untiled run's bits: per
// position the sum of squares over the channels in double, in channel order; the norm floored at
// eps in float; then x * (1/norm) * sqrt(C) (* gamma_c) and the optional SiLU in float. Both
// layouts' loops are compiled in wan_ops.cpp with the same flags and SIMD clones, so the
// compiler contracts the same expressions the same way.
#pragma once

#include <cstdint>

namespace seedvae::cpu {

// sqrt(C) in float, the factor every normalised value gets.
float rms_scale(int64_t channels);

// inv[i] = 1 / max(||x_i||_2, eps) for n consecutive positions whose `channels` values lie
// `channel_stride` floats apart (position i's first value at x[i]): a plain [C, T, H, W] frame
// has channel_stride T*H*W.
void rms_inverse_norms(const float* x, int64_t n, int64_t channels, int64_t channel_stride,
                       float eps, float* inv);

// y[i] = x[i] * inv[i] * scale (* *gamma when given), then SiLU if asked: n positions of one
// channel, with their inverse norms.
void rms_apply(const float* x, const float* inv, int64_t n, float scale, const float* gamma,
               bool silu, float* y);

}  // namespace seedvae::cpu
