// Copies, additions, layout conversions, softmax and the Upsample3D depth-to-space of the CPU
// backend: memory-bound loops over contiguous runs, split across OpenMP threads.
#include <algorithm>
#include <cstring>

#include "core/cpu/kernels.h"
#include "core/cpu/parallel.h"

namespace seedvae::cpu {
namespace {

constexpr int64_t kChunk = 1 << 16;  // floats per parallel job of the flat loops
constexpr int64_t kTile = 16;        // transpose tile edge (one cache line of floats)

SEEDVAE_SIMD_CLONES void add_run(float* y, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

SEEDVAE_SIMD_CLONES void scale_run(float* x, int64_t n, float f) {
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

SEEDVAE_SIMD_CLONES float row_max(const float* row, int64_t n) {
  float mx = row[0];
  for (int64_t j = 1; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  return mx;
}

SEEDVAE_SIMD_CLONES void exp_shifted(float* row, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j) row[j] = exp_f32(row[j] - shift);
}

// One block of at most kTile x kTile: dst[c * ld_dst + r] = src[r * ld_src + c]. Going through a
// local tile keeps the strided side to one pass over whole cache lines (a power-of-two row stride
// would otherwise thrash one cache set).
SEEDVAE_SIMD_CLONES void transpose_block(const float* src, int64_t ld_src, float* dst,
                                         int64_t ld_dst, int64_t nr, int64_t nc) {
  float tmp[kTile][kTile];
  if (nr == kTile && nc == kTile) {
    for (int64_t r = 0; r < kTile; ++r) {
      for (int64_t c = 0; c < kTile; ++c) tmp[c][r] = src[r * ld_src + c];
    }
    for (int64_t c = 0; c < kTile; ++c) {
      for (int64_t r = 0; r < kTile; ++r) dst[c * ld_dst + r] = tmp[c][r];
    }
    return;
  }
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t c = 0; c < nc; ++c) tmp[c][r] = src[r * ld_src + c];
  }
  for (int64_t c = 0; c < nc; ++c) {
    for (int64_t r = 0; r < nr; ++r) dst[c * ld_dst + r] = tmp[c][r];
  }
}

// src [rows, cols] -> dst [cols, rows]; jobs are bands of kTile rows x kSpan columns.
void transpose(const float* src, float* dst, int64_t rows, int64_t cols, int threads) {
  constexpr int64_t kSpan = 1024;
  const int64_t bands = (rows + kTile - 1) / kTile, spans = (cols + kSpan - 1) / kSpan;
  parallel_for(bands * spans, threads, [&](int64_t job) {
    const int64_t r0 = (job / spans) * kTile, nr = std::min(kTile, rows - r0);
    const int64_t c_begin = (job % spans) * kSpan, c_end = std::min(cols, c_begin + kSpan);
    for (int64_t c0 = c_begin; c0 < c_end; c0 += kTile) {
      transpose_block(src + r0 * cols + c0, cols, dst + c0 * rows + r0, rows, nr,
                      std::min(kTile, c_end - c0));
    }
  });
}

}  // namespace

void add_f32(float* y, const float* a, const float* b, int64_t n, int threads) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, threads, [&](int64_t ci) {
    const int64_t i0 = ci * kChunk;
    add_run(y + i0, a + i0, b + i0, std::min(n, i0 + kChunk) - i0);
  });
}

void scale_f32(float* x, int64_t n, float f, int threads) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, threads, [&](int64_t ci) {
    const int64_t i0 = ci * kChunk;
    scale_run(x + i0, std::min(n, i0 + kChunk) - i0, f);
  });
}

void copy_f32(float* dst, const float* src, int64_t n, int threads) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, threads, [&](int64_t ci) {
    const int64_t i0 = ci * kChunk;
    const int64_t i1 = std::min(n, i0 + kChunk);
    std::memcpy(dst + i0, src + i0, static_cast<size_t>(i1 - i0) * sizeof(float));
  });
}

void copy_frames_cl(float* dst, int64_t dst_t, int64_t t_dst, const float* src, const Dims5& s,
                    int64_t t_begin, int64_t t_count, int threads) {
  // Frames of one batch entry are contiguous: one block copy per n.
  const int64_t fs = s.frame_size();
  for (int64_t n = 0; n < s.n; ++n) {
    copy_f32(dst + (n * dst_t + t_dst) * fs, src + (n * s.t + t_begin) * fs, t_count * fs, threads);
  }
}

void plain_to_channels_last(const float* src, float* dst, const Dims5& d, int threads) {
  const int64_t spatial = d.t * d.h * d.w;
  for (int64_t n = 0; n < d.n; ++n) {
    transpose(src + n * d.c * spatial, dst + n * d.c * spatial, d.c, spatial, threads);
  }
}

void channels_last_to_plain(const float* src, float* dst, const Dims5& d, int threads) {
  const int64_t spatial = d.t * d.h * d.w;
  for (int64_t n = 0; n < d.n; ++n) {
    transpose(src + n * d.c * spatial, dst + n * d.c * spatial, spatial, d.c, threads);
  }
}

void softmax_rows(float* s, int64_t rows, int64_t n, int threads) {
  parallel_for(rows, threads, [&](int64_t r) {
    float* row = s + r * n;
    exp_shifted(row, n, row_max(row, n));
    scale_run(row, n, static_cast<float>(1.0 / sum_f32(row, n)));
  });
}

void depth_to_space_cl(const float* x, float* y, const Dims5& in, int z, bool drop_frame_1,
                       int threads) {
  const int64_t C = in.c / (4 * z);
  const int64_t t_out = in.t * z - (drop_frame_1 ? 1 : 0);
  const int64_t h = in.h, w = in.w;
  const size_t run = static_cast<size_t>(C) * sizeof(float);
  // One job per input row (n, f, hh); it writes rows 2hh and 2hh+1 of output frames f*z + it.
  parallel_for(
      in.n * in.t * h, threads,
      [&](int64_t job) {
        const int64_t hh = job % h;
        const int64_t f = (job / h) % in.t;
        const int64_t n = job / h / in.t;
        const float* src_row = x + ((n * in.t + f) * h + hh) * w * in.c;
        for (int64_t it = 0; it < z; ++it) {
          int64_t fo = f * z + it;
          if (drop_frame_1) {
            if (fo == 1) continue;
            if (fo > 1) --fo;
          }
          for (int64_t ih = 0; ih < 2; ++ih) {
            float* dst_row = y + ((n * t_out + fo) * 2 * h + 2 * hh + ih) * 2 * w * C;
            for (int64_t ww = 0; ww < w; ++ww) {
              const float* px = src_row + ww * in.c;
              for (int64_t iw = 0; iw < 2; ++iw) {
                std::memcpy(dst_row + (2 * ww + iw) * C, px + ((ih * 2 + iw) * z + it) * C, run);
              }
            }
          }
        }
      },
      4);
}

}  // namespace seedvae::cpu
