// cuDNN 3-D convolution (cudnnConvolutionForward) for one sample (N = 1), NDHWC or NCDHW,
// fp32 / TF32 / fp16 / bf16 with fp32 accumulation, symmetric spatial zero padding, no bias.
//
// Algorithms are chosen once per problem key (layout, dtype, math mode, dims, strides, padding) by
// cudnnFindConvolutionForwardAlgorithmEx (autotune: times every algorithm on the real buffers) or
// by cudnnGetConvolutionForwardAlgorithm_v7 (heuristic), within the workspace limit. Autotune
// results can be persisted in a text file keyed by GPU, driver and cuDNN version.
//
// cuDNN indexes tensors with 32-bit integers, so large problems are split along output frames
// into pieces whose input and output each hold < 2^31 elements; NDHWC pieces are contiguous, NCDHW
// pieces are strided views (or, when even the full-tensor strides overflow, copied to compact
// scratch and back). When one output frame is still too large (a 256-channel frame at 4K with
// its two causal frames), NDHWC convolutions run frame by frame in bands of rows (run_bands).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "core/base/status.h"
#include "gpu/cublas/gemm.h"
#include "gpu/kernels/kernel_args.h"

namespace seedvae::gpu {

class DeviceAllocator;

struct ConvProblem {
  ElemType type = ElemType::kF32;
  Layout layout = Layout::kNDHWC;
  MathMode math = MathMode::kStrict;
  int64_t cin = 1, t = 1, h = 1, w = 1;  // input (N = 1)
  int64_t cout = 1, kt = 1, kh = 1, kw = 1;
  int st = 1, sh = 1, sw = 1;
  int ph = 0, pw = 0;  // symmetric zero padding of H and W

  int64_t out_t() const { return (t - kt) / st + 1; }
  int64_t out_h() const { return (h + 2 * ph - kh) / sh + 1; }
  int64_t out_w() const { return (w + 2 * pw - kw) / sw + 1; }
};

struct ConvOptions {
  bool autotune = true;
  int64_t workspace_limit = int64_t{512} << 20;
  std::filesystem::path cache_file;  // empty: no persistence
  // Largest elements per cuDNN call (input or output); < 2^31. Tests lower it to exercise
  // splitting.
  int64_t max_elements = (int64_t{1} << 31) - 1;
};

struct ConvAlgoStats {
  int64_t searched = 0;     // problems autotuned in this process
  int64_t heuristic = 0;    // problems chosen by heuristic
  int64_t loaded = 0;       // entries read from the persisted cache
  int64_t band_splits = 0;  // convolutions run in row bands (a frame beyond 32-bit indexing)
};

class Conv3dCudnn {
 public:
  static Result<std::unique_ptr<Conv3dCudnn>> create(Stream stream,
                                                     std::shared_ptr<DeviceAllocator> alloc,
                                                     ConvOptions options);
  ~Conv3dCudnn();
  Conv3dCudnn(const Conv3dCudnn&) = delete;
  Conv3dCudnn& operator=(const Conv3dCudnn&) = delete;

  // y[1, cout, out_t, out_h, out_w] = conv(x, w) in p.layout; w is [cout, kt, kh, kw, cin] for
  // NDHWC (KRSC) and [cout, cin, kt, kh, kw] for NCDHW. `what` names the op in errors.
  Status run(const ConvProblem& p, const void* x, const void* w, void* y, const std::string& what);
  // Writes new autotune results to the cache file (also done by the destructor).
  Status save_cache();
  // A choice made outside this class for a problem `key` of the caller's (the CUDA backend's
  // legacy-or-graph-engine choice): kept and persisted with the autotune results, while autotune
  // is on. -1 when none is known.
  int external_choice(const std::string& key) const {
    const auto it = choices_.find(key);
    return it == choices_.end() ? -1 : it->second.algo;
  }
  void set_external_choice(const std::string& key, int value) {
    if (!options_.autotune) return;
    choices_[key] = Choice{value, 0, 0};
    dirty_ = true;
  }
  ConvAlgoStats stats() const { return stats_; }
  int version() const;

 private:
  Conv3dCudnn() = default;
  struct Choice {
    int algo = 0;
    int math = 0;
    int64_t workspace = 0;
  };
  struct Descs;
  // A convolution one output frame of which exceeds 32-bit indexing (NDHWC): output frames one
  // at a time, each in bands of rows gathered into scratch with their halo.
  Status run_bands(const ConvProblem& p, const void* x, const void* w, void* y,
                   const std::string& what);
  Status run_piece(const ConvProblem& p, int64_t t_in, int64_t x_cstride, int64_t y_cstride,
                   const void* x, const void* w, void* y, const std::string& what);
  void load_cache();
  std::map<std::string, Choice> read_cache_file() const;  // the file's entries (none if absent)

  void* handle_ = nullptr;  // cudnnHandle_t
  Stream stream_ = nullptr;
  std::shared_ptr<DeviceAllocator> alloc_;
  ConvOptions options_;
  std::map<std::string, Choice> choices_;
  std::map<std::string, std::unique_ptr<Descs>> descs_;
  bool dirty_ = false;
  ConvAlgoStats stats_;
};

}  // namespace seedvae::gpu
