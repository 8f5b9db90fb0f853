// Fused (flash-style) attention for head size up to 512, and the row softmax of the materialised
// path.
//
// PyTorch equivalent: F.scaled_dot_product_attention(q, k, v) per frame (one head, dim = C = 512
// in the real model), i.e. softmax(q @ k.T * scale) @ v, with the softmax accumulated in fp32.
//
// kMma (fp16/bf16, tensor cores, mma.sync m16n8k16, fp32 accumulators): one block of 8 warps per
// (64 query rows, frame). The Q tile [64, D] stays in shared memory; K and V tiles [64, D] are
// streamed with cp.async (the next K tile loads while softmax and P*V run, the next V tile while
// the next Q*K^T runs). Per key tile: (1) the 8 warps compute S = Q K^T as 4x2 pieces of 16x32
// into shared memory (fp32); (2) 4 threads per row apply the online softmax in the log2 domain
// (running max m, running sum l, rescale factor alpha), writing P (rounded to fp16/bf16) to shared
// memory; (3) warp w owns output columns [w*D/8, (w+1)*D/8) of all 64 rows (D/4 fp32 registers per
// thread: 128 for D = 512), rescales them by alpha and accumulates P V. Memory: O(tokens * D).
// D is 128, 256, 384 (the Wan2.1 middle) or 512. Shared memory for D = 512: 227,072 bytes (needs
// Hopper's 227 KB opt-in; other GPUs use kSimt), for D = 384: 177,920.
//
// kSimt (any dtype, dim <= 512, fp32 arithmetic): one warp per query row (lane l holds dims l,
// l+32, ...), 8 warps per block sharing K/V tiles of 8 keys in shared memory, online softmax.
// Used for fp32/tf32 and wherever kMma does not fit.
//
// Softmax rows: one block per row; max and sum by block reductions in fp32.
#include <algorithm>

#include "gpu/kernels/attention.h"
#include "gpu/kernels/common.cuh"

namespace seedvae::gpu {
namespace {

using dev::from_f32;
using dev::to_f32;

constexpr float kLog2e = 1.4426950408889634f;

// ---- tensor-core kernel ---------------------------------------------------------------------

constexpr int kBr = 64, kBc = 64, kMmaThreads = 256;

template <int D>
constexpr int mma_smem_bytes() {
  return (kBr + 2 * kBc) * (D + 8) * 2 + kBr * (kBc + 4) * 4 + kBr * (kBc + 8) * 2 + 3 * kBr * 4;
}

// cp.async needs sm_80; the tensor-core kernel that uses these is compiled only there.
__device__ __forceinline__ void cp_async16(void* smem_ptr, const void* gptr, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem_ptr));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gptr), "r"(n));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait1() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1);
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const unsigned (&a)[4],
                                                        unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
template <>
__device__ __forceinline__ void mma16816<__half>(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                                 unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi);
template <>
__device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}
template <>
__device__ __forceinline__ unsigned pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}

// Loads rows [row0, row0 + 64) of a [tokens, D] matrix into smem (row stride D + 8), zero rows
// past `tokens`.
template <typename T, int D>
__device__ __forceinline__ void load_tile(T* s, const T* g, int64_t row0, int64_t tokens) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  for (int i = threadIdx.x; i < 64 * kChunks; i += kMmaThreads) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    const bool ok = row0 + r < tokens;
    cp_async16(s + r * (D + 8) + c, ok ? g + (row0 + r) * D + c : g, ok);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads, 1)
    flash_mma_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     T* __restrict__ o, int64_t tokens, float scale_log2) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int LDQ = D + 8, LDS = kBc + 4, LDP = kBc + 8;
  constexpr int NT = D / 64;  // n-tiles of 8 columns per warp in P*V
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + kBr * LDQ;
  T* sV = sK + kBc * LDQ;
  float* sS = reinterpret_cast<float*>(sV + kBc * LDQ);
  T* sP = reinterpret_cast<T*>(sS + kBr * LDS);
  float* sM = reinterpret_cast<float*>(sP + kBr * LDP);
  float* sL = sM + kBr;
  float* sA = sL + kBr;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int64_t frame = blockIdx.y;
  const int64_t q0 = int64_t(blockIdx.x) * kBr;
  const T* qf = q + frame * tokens * D;
  const T* kf = k + frame * tokens * D;
  const T* vf = v + frame * tokens * D;
  T* of = o + frame * tokens * D;

  if (tid < kBr) {
    sM[tid] = -INFINITY;
    sL[tid] = 0.f;
  }
  load_tile<T, D>(sQ, qf, q0, tokens);
  load_tile<T, D>(sK, kf, 0, tokens);
  cp_async_commit();
  load_tile<T, D>(sV, vf, 0, tokens);
  cp_async_commit();

  float oacc[4][NT][4];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) oacc[mt][nt][e] = 0.f;

  const int64_t ntiles = (tokens + kBc - 1) / kBc;
  const int r0 = (warp & 3) * 16, c0 = (warp >> 2) * 32;
  const int n0 = warp * (D / 8);
  for (int64_t j = 0; j < ntiles; ++j) {
    cp_async_wait1();
    __syncthreads();  // Q and K_j landed; previous iteration done with sS/sP
    {
      float sacc[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) sacc[nt][e] = 0.f;
#pragma unroll 4
      for (int kk = 0; kk < D; kk += 16) {
        unsigned a[4];
        ldsm_x4(a, sQ + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDQ + kk + (lane >> 4) * 8);
#pragma unroll
        for (int nb = 0; nb < 2; ++nb) {
          unsigned b[4];
          ldsm_x4(b, sK + (c0 + nb * 16 + (lane & 7) + (lane >> 4) * 8) * LDQ + kk +
                         ((lane >> 3) & 1) * 8);
          mma16816<T>(sacc[nb * 2], a, b[0], b[1]);
          mma16816<T>(sacc[nb * 2 + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int col = c0 + nt * 8 + 2 * t4;
        sS[(r0 + g) * LDS + col] = sacc[nt][0];
        sS[(r0 + g) * LDS + col + 1] = sacc[nt][1];
        sS[(r0 + g + 8) * LDS + col] = sacc[nt][2];
        sS[(r0 + g + 8) * LDS + col + 1] = sacc[nt][3];
      }
    }
    __syncthreads();  // S complete, K_j free
    if (j + 1 < ntiles) load_tile<T, D>(sK, kf, (j + 1) * kBc, tokens);
    cp_async_commit();
    {
      const int row = tid >> 2, qd = tid & 3;
      const int64_t kbase = j * kBc;
      float s[16];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int col = qd * 16 + i;
        s[i] = (kbase + col < tokens) ? sS[row * LDS + col] * scale_log2 : -INFINITY;
        mx = fmaxf(mx, s[i]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_old = sM[row];
      const float m_new = fmaxf(m_old, mx);
      const float alpha = exp2f(m_old - m_new);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const T p = from_f32<T>(exp2f(s[i] - m_new));
        sP[row * LDP + qd * 16 + i] = p;
        sum += to_f32(p);
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      __syncwarp();
      if (qd == 0) {
        sM[row] = m_new;
        sL[row] = sL[row] * alpha + sum;
        sA[row] = alpha;
      }
    }
    cp_async_wait1();
    __syncthreads();  // V_j landed, P and alpha visible
    {
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        const float a0 = sA[mt * 16 + g], a1 = sA[mt * 16 + g + 8];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          oacc[mt][nt][0] *= a0;
          oacc[mt][nt][1] *= a0;
          oacc[mt][nt][2] *= a1;
          oacc[mt][nt][3] *= a1;
        }
      }
#pragma unroll
      for (int kk = 0; kk < kBc; kk += 16) {
        unsigned a[4][4];
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          ldsm_x4(a[mt],
                  sP + (mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDP + kk + (lane >> 4) * 8);
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          unsigned b[4];
          ldsm_x4_t(b, sV + (kk + (lane & 7) + ((lane >> 3) & 1) * 8) * LDQ + n0 + np * 16 +
                           (lane >> 4) * 8);
#pragma unroll
          for (int mt = 0; mt < 4; ++mt) {
            mma16816<T>(oacc[mt][2 * np], a[mt], b[0], b[1]);
            mma16816<T>(oacc[mt][2 * np + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // done with V_j and P
    if (j + 1 < ntiles) load_tile<T, D>(sV, vf, (j + 1) * kBc, tokens);
    cp_async_commit();
  }
  // epilogue: O / l
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = mt * 16 + g + half * 8;
      const int64_t tok = q0 + r;
      if (tok >= tokens) continue;
      const float inv = 1.f / sL[r];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = n0 + nt * 8 + 2 * t4;
        *reinterpret_cast<unsigned*>(of + tok * D + col) =
            pack2<T>(oacc[mt][nt][half * 2] * inv, oacc[mt][nt][half * 2 + 1] * inv);
      }
    }
  }
#endif
}

template <typename T, int D>
bool try_launch_mma(const FlashArgs& a, Stream stream) {
  constexpr int smem = mma_smem_bytes<D>();
  // Set on every launch (a host-side call of microseconds): the attribute belongs to the device's
  // context, which another device or a released context (release_idle_devices) does not share.
  if (cudaFuncSetAttribute(flash_mma_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           smem) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const dim3 grid(static_cast<unsigned>(dev::ceil_div(a.tokens, kBr)),
                  static_cast<unsigned>(a.frames));
  flash_mma_kernel<T, D><<<grid, kMmaThreads, smem, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<T*>(a.o), a.tokens, a.scale * kLog2e);
  return true;
}

// dim 64 would leave each warp a single 8-column n-tile; the P*V loop works on pairs, so 64 goes
// to the SIMT kernel.
int mma_smem_for(int64_t dim) {
  switch (dim) {
    case 128: return mma_smem_bytes<128>();
    case 256: return mma_smem_bytes<256>();
    case 384: return mma_smem_bytes<384>();  // the Wan2.1 middle
    case 512: return mma_smem_bytes<512>();
    default: return -1;
  }
}

// ---- SIMT kernel ------------------------------------------------------------------------------

constexpr int kSimtWarps = 8, kSimtKeys = 8;

template <typename T, int DPL>
__global__ void __launch_bounds__(kSimtWarps * 32)
    flash_simt_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                      T* __restrict__ o, int64_t tokens, int dim, float scale_log2) {
  constexpr int W = 32 * DPL;  // padded row width in smem
  __shared__ float sK[kSimtKeys * W];
  __shared__ float sV[kSimtKeys * W];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t frame = blockIdx.y;
  const int64_t qi = int64_t(blockIdx.x) * kSimtWarps + warp;
  const bool qvalid = qi < tokens;
  const T* qf = q + frame * tokens * dim;
  const T* kf = k + frame * tokens * dim;
  const T* vf = v + frame * tokens * dim;
  float qr[DPL], acc[DPL];
#pragma unroll
  for (int i = 0; i < DPL; ++i) {
    const int d = lane + 32 * i;
    qr[i] = (qvalid && d < dim) ? to_f32(qf[qi * dim + d]) * scale_log2 : 0.f;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int64_t k0 = 0; k0 < tokens; k0 += kSimtKeys) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < kSimtKeys * W; idx += blockDim.x) {
      const int r = idx / W, d = idx % W;
      const bool ok = k0 + r < tokens && d < dim;
      sK[idx] = ok ? to_f32(kf[(k0 + r) * dim + d]) : 0.f;
      sV[idx] = ok ? to_f32(vf[(k0 + r) * dim + d]) : 0.f;
    }
    __syncthreads();
    float s[kSimtKeys];
    float mx = m;
#pragma unroll
    for (int j = 0; j < kSimtKeys; ++j) {
      float part = 0.f;
#pragma unroll
      for (int i = 0; i < DPL; ++i) part = fmaf(qr[i], sK[j * W + lane + 32 * i], part);
      s[j] = dev::warp_sum(part);
      if (k0 + j >= tokens) s[j] = -INFINITY;
      mx = fmaxf(mx, s[j]);
    }
    const float alpha = exp2f(m - mx);
    l *= alpha;
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[i] *= alpha;
#pragma unroll
    for (int j = 0; j < kSimtKeys; ++j) {
      const float p = exp2f(s[j] - mx);
      l += p;
#pragma unroll
      for (int i = 0; i < DPL; ++i) acc[i] = fmaf(p, sV[j * W + lane + 32 * i], acc[i]);
    }
    m = mx;
  }
  if (qvalid) {
    T* of = o + frame * tokens * dim;
    const float inv = 1.f / l;
#pragma unroll
    for (int i = 0; i < DPL; ++i) {
      const int d = lane + 32 * i;
      if (d < dim) of[qi * dim + d] = from_f32<T>(acc[i] * inv);
    }
  }
}

template <typename T, int DPL>
void launch_simt(const FlashArgs& a, Stream stream) {
  const dim3 grid(static_cast<unsigned>(dev::ceil_div(a.tokens, kSimtWarps)),
                  static_cast<unsigned>(a.frames));
  flash_simt_kernel<T, DPL><<<grid, kSimtWarps * 32, 0, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<T*>(a.o), a.tokens, static_cast<int>(a.dim), a.scale * kLog2e);
}

template <typename T>
void dispatch_simt(const FlashArgs& a, Stream stream) {
  const int64_t dpl = dev::ceil_div(a.dim, 32);
  if (dpl <= 1)
    launch_simt<T, 1>(a, stream);
  else if (dpl <= 2)
    launch_simt<T, 2>(a, stream);
  else if (dpl <= 4)
    launch_simt<T, 4>(a, stream);
  else if (dpl <= 8)
    launch_simt<T, 8>(a, stream);
  else
    launch_simt<T, 16>(a, stream);
}

// ---- softmax rows -----------------------------------------------------------------------------

template <typename T>
__global__ void softmax_rows_kernel(const float* __restrict__ s, T* __restrict__ p, int64_t cols) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* sr = s + r * cols;
  T* pr = p + r * cols;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, sr[j]);
  mx = dev::block_max(mx, scratch);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += __expf(sr[j] - mx);
  sum = dev::block_sum(sum, scratch);
  const float inv = 1.f / sum;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    pr[j] = from_f32<T>(expf(sr[j] - mx) * inv);
}

}  // namespace

FlashKernel choose_flash_kernel(const FlashArgs& a, int smem_optin, int cc) {
  if (a.dim < 1 || a.dim > 512 || a.tokens < 1) return FlashKernel::kNone;
  if (a.type != ElemType::kF32 && cc >= 80) {
    const int need = mma_smem_for(a.dim);
    if (need > 0 && need <= smem_optin) return FlashKernel::kMma;
  }
  return FlashKernel::kSimt;
}

void launch_flash_attention(const FlashArgs& a, FlashKernel kind, Stream stream) {
  if (kind == FlashKernel::kNone || a.frames < 1 || a.tokens < 1) return;
  if (kind == FlashKernel::kMma) {
    bool ok = false;
    auto go = [&](auto tag) {
      using T = decltype(tag);
      switch (a.dim) {
        case 128: ok = try_launch_mma<T, 128>(a, stream); break;
        case 256: ok = try_launch_mma<T, 256>(a, stream); break;
        case 384: ok = try_launch_mma<T, 384>(a, stream); break;
        case 512: ok = try_launch_mma<T, 512>(a, stream); break;
        default: break;
      }
    };
    if (a.type == ElemType::kBF16) go(__nv_bfloat16{});
    if (a.type == ElemType::kF16) go(__half{});
    if (ok) return;
    cudaGetLastError();  // failed attribute set: fall through to the SIMT kernel
  }
  SEEDVAE_DISPATCH_ELEM(a.type, T, { dispatch_simt<T>(a, stream); });
}

void launch_softmax_rows(ElemType out_type, const float* s, void* p, int64_t rows, int64_t cols,
                         Stream stream) {
  if (rows <= 0 || cols <= 0) return;
  SEEDVAE_DISPATCH_ELEM(out_type, T, {
    softmax_rows_kernel<T>
        <<<static_cast<unsigned>(rows), 256, 0, stream>>>(s, static_cast<T*>(p), cols);
  });
}

}  // namespace seedvae::gpu
