// The CUDA engine's switches, declared once. The options table (core/pipeline/run_options.h)
// turns each into a command-line flag, a studio widget and a preset key; the CUDA backend
// (gpu/cuda_backend.h CudaOptions) reads the same members. Both derive from this struct, so a
// switch is one member here plus one row in the table. It lives in core, not in the job layer,
// because gpu/ may depend on core only; nothing here needs a CUDA header. Every optimisation is
// a switch so its effect on time, memory and output can be measured (docs/gpu-notes.md);
// defaults are the fast configuration.
#pragma once

#include <cstdint>
#include <string>

namespace seedvae {

// The device-level budget (RunOptions::budget_gb, CudaOptions::budget_bytes): without a budget the
// CUDA backend takes the card's free memory less kBudgetMargin, so other applications keep
// working; kLibraryAllowance is kept out of the allocator's reserve for the kernels cuDNN and
// cuBLAS load on first use (measured: 0.01-0.05 GiB on an H100). The planner's automatic
// schedule (core/pipeline/prediction.h) counts both the same way.
inline constexpr int64_t kBudgetMargin = int64_t{512} << 20;
inline constexpr int64_t kLibraryAllowance = int64_t{256} << 20;

struct CudaSwitches {
  // Written out rather than defaulted: with an implicit constructor GCC 12 reports the strings of
  // value-initialised aggregates that derive from this struct as maybe uninitialized (a false
  // positive, -Wmaybe-uninitialized).
  CudaSwitches() {}  // NOLINT(modernize-use-equals-default)
  // cuDNN: time every algorithm once per convolution shape (true) or take cuDNN's heuristic.
  bool autotune = true;
  // With autotune, 16-bit channels-last convolutions also time cuDNN's graph-API engines and run
  // one where it is at least 15 % faster than the legacy API's best algorithm (a Wan2.1 720p
  // 96-channel convolution: 4.4 against 6.3 ms on an H200); the choice persists with the
  // autotune results. Off by default: with it, two bf16 golden tensors of the real encoder were
  // 4-7 % over PyTorch's own error on an H200 (docs/gpu-notes.md), not yet separated from that
  // card's legacy algorithm choices.
  bool graph_api = false;
  // Where autotune results persist (per GPU, driver and cuDNN version): "auto" = the user cache
  // directory ($SEEDVAE_CACHE_DIR, $XDG_CACHE_HOME/seedvae or ~/.cache/seedvae), "" = nowhere,
  // otherwise a file path.
  std::string autotune_cache = "auto";
  // Activations in NDHWC (channels-last: tensor-core convolutions, contiguous frames) or NCDHW.
  bool channels_last = true;
  // GroupNorm and SiLU in one pass, or GroupNorm then a separate SiLU pass.
  bool fused_gn_silu = true;
  // Flash-style attention (O(tokens) memory) or materialised scores via cuBLAS.
  bool fused_attention = true;
  // Caching allocator (reuses freed blocks) or plain cudaMalloc/cudaFree per tensor.
  bool caching_allocator = true;
  // Buffer reuse: outputs that feed a causal convolution get spare frames in front, so causal
  // padding writes the context frames in place instead of copying the whole tensor (NDHWC only).
  bool buffer_reuse = true;
  // Fused bias: a cuDNN convolution's bias is not added in a pass of its own but by its
  // consumer (GroupNorm statistics/apply, or the residual add); other consumers add it first.
  bool fuse_bias = true;
  // Causal-state offload: the frames each causal convolution carries to the next chunk (16 GiB
  // at 1080p in bf16) wait in pinned host memory instead of on the device, copied out and
  // prefetched back on two copy streams while the GPU computes; at most offload_window_mib of
  // them are back on the device ahead of use.
  bool offload_state = false;
  int offload_window_mib = 1024;
  // CUDA graphs: VaeModel records a chunk's work once per chunk shape and state addresses and
  // replays it for later chunks (one launch instead of ~250). Needs the state on the device
  // (refused with offload_state); chunks with block observers run without.
  bool cuda_graphs = false;
  // cuDNN workspace limit per convolution, MiB.
  int workspace_mib = 512;
  // fp16 only: 3-D convolutions accumulate in fp16 (cuDNN's graph API; its legacy API has no such
  // 3-D convolution), the fast path of GeForce cards, whose fp16-accumulate tensor rate is twice
  // the fp32-accumulate one. Problems the graph engines do not take keep fp32 accumulation.
  bool fp16_accumulation = false;
  // bf16 only, cards with FP8 tensor cores (compute capability 8.9+): convolutions with >= 16
  // input and output channels (multiples of 16) run on FP8 e4m3 operands through cuDNN's graph
  // API -- weights quantised per output channel on first use, activations per tensor from their
  // largest magnitude at each call, fp32 accumulation, dequantised in the epilogue, bf16 out.
  // The model's output convolutions, GroupNorm and attention stay bf16; problems no FP8 engine
  // takes run in bf16. Measured error and speed: docs/gpu-notes.md.
  bool fp8_convs = false;

  bool operator==(const CudaSwitches&) const = default;
};

}  // namespace seedvae
