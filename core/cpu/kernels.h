// Plain fp32 kernels of the CPU backend (everything that is not a oneDNN primitive). Activations
// are channels-last: a 5-D [n, c, t, h, w] tensor is stored as [n, t, h, w, c] (see cpu_storage.h);
// `Dims5` always holds the logical sizes. Callers validate shapes. `threads` is the OpenMP team
// size. Internal to core/cpu.
#pragma once

#include <cstdint>
#include <cstring>

namespace seedvae::cpu {

// Hot float loops are compiled for AVX-512, AVX2+FMA and baseline x86-64, picked at load time
// (GCC function multi-versioning), since the project builds for generic x86-64.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SEEDVAE_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SEEDVAE_SIMD_CLONES
#endif

// Logical sizes of a 5-D activation [n, c, t, h, w].
struct Dims5 {
  int64_t n = 0, c = 0, t = 0, h = 0, w = 0;
  int64_t numel() const { return n * c * t * h * w; }
  int64_t frames() const { return n * t; }          // frames of all batch entries
  int64_t frame_size() const { return h * w * c; }  // floats per (n, t) frame
};

// exp(x) for float, branch-free and vectorisable (no libm call): Cephes expf polynomial after
// reduction by n = round(x / ln 2) (round-to-nearest through the 1.5 * 2^23 trick), ~1 ulp over
// the clamped range [-87.3, 88.3] (below it: ~1e-38 instead of 0).
inline float exp_f32(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  const float n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;
  const int32_t i = static_cast<int32_t>(n);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.f;
  const int32_t bits = (i + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return e * scale;
}

// SiLU x * sigmoid(x) = x / (1 + exp(-x)).
inline float silu_f32(float x) {
  return x / (1.f + exp_f32(-x));
}

// Sum of n floats: 16 float lanes over runs of at most 256 elements, flushed into double.
double sum_f32(const float* p, int64_t n);

// Per-frame GroupNorm on channels-last data (statistics of each (n, t, group) over C/groups
// channels x H x W; mean and biased variance accumulated in double, two passes), then
// y = (x - mean) * rstd * gamma + beta (gamma/beta may be null: 1 and 0), then optional SiLU.
// y may equal x. Throws std::bad_alloc if its small scratch cannot be allocated.
void group_norm_cl(const float* x, float* y, const Dims5& d, const float* gamma, const float* beta,
                   int groups, float eps, bool silu, int threads);

// y[i] = a[i] + b[i]; y may alias a or b.
void add_f32(float* y, const float* a, const float* b, int64_t n, int threads);

// Copies n floats, in parallel when large.
void copy_f32(float* dst, const float* src, int64_t n, int threads);

// Channels-last frames [t_begin, t_begin + t_count) of src (dims s) to frames [t_dst, ...) of
// dst, which has dst_t frames and otherwise the dims of s.
void copy_frames_cl(float* dst, int64_t dst_t, int64_t t_dst, const float* src, const Dims5& s,
                    int64_t t_begin, int64_t t_count, int threads);

// Layout conversions of a 5-D tensor with logical dims d: NCDHW <-> NDHWC.
void plain_to_channels_last(const float* src, float* dst, const Dims5& d, int threads);
void channels_last_to_plain(const float* src, float* dst, const Dims5& d, int threads);

// Upsample3D depth-to-space (docs/model.md §2.1) on channels-last data: x [n, 4*z*C, t, h, w] ->
// y [n, C, t*z (-1 with drop_frame_1), 2h, 2w] with input channel k = ((ih*2 + iw)*z + it)*C + c.
void depth_to_space_cl(const float* x, float* y, const Dims5& in, int z, bool drop_frame_1,
                       int threads);

// x *= f.
void scale_f32(float* x, int64_t n, float f, int threads);

// Row-wise numerically stable softmax of `rows` rows of n floats (row stride n), in place.
void softmax_rows(float* s, int64_t rows, int64_t n, int threads);

// ---- the Wan VAEs' ops (wan_ops.cpp); channels-last, y never aliases x -----------------------

// RMS norm over the C channels of every pixel: y = x / max(||x||, eps) * sqrt(C) * gamma (gamma
// may be null: 1), then optional SiLU. The sum of squares is accumulated in double (the
// arithmetic, shared with exact tiling: rms_norm.h).
void rms_norm_cl(const float* x, float* y, const Dims5& d, const float* gamma, float eps, bool silu,
                 int threads);
// Nearest 2x per frame: y [n, c, t, 2h, 2w].
void upsample_nearest_cl(const float* x, float* y, const Dims5& d, int threads);
// x [n, f*C, t, h, w] -> y [n, C, f*t, h, w], y[c, f*t + i] = x[i*C + c, t].
void frames_from_channels_cl(const float* x, float* y, const Dims5& in, int factor, int threads);
// Patchify x (dims `in`, pixels) -> y [n, c*p*p, t, h/p, w/p] with channel c*p*p + dx*p + dy for
// pixel (p*i + dy, p*j + dx); with `inverse`, `in` are the patchified dims and y the pixels.
void patchify_cl(const float* x, float* y, const Dims5& in, int p, bool inverse, int threads);
// AvgDown3D / DupUp3D (op_params.h AvgDownParams / DupUpParams).
void avg_down_cl(const float* x, float* y, const Dims5& in, int64_t cout, int ft, int fs,
                 int threads);
void dup_up_cl(const float* x, float* y, const Dims5& in, int64_t cout, int ft, int fs,
               bool drop_first, int threads);

}  // namespace seedvae::cpu
