// Public face of the CUDA module: device queries and the CUDA backend factory with its options.
// Includes no CUDA header, so the CLI, the UI's composition root and tests can include it from
// plain C++.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda_switches.h"
#include "core/base/status.h"

namespace seedvae::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int multiprocessors = 0;
};

struct RuntimeInfo {
  int driver_version = 0;   // e.g. 13000 for CUDA 13.0; 0 when no driver is installed
  int runtime_version = 0;  // CUDA runtime this build links
  int cudnn_version = 0;    // cuDNN runtime version (e.g. 91900), 0 if it cannot be loaded
  int cublas_version = 0;
  std::string error;  // why no device is usable, empty if at least one is
};

// Never fails: a machine without a driver or GPU yields an empty list and RuntimeInfo::error.
RuntimeInfo runtime_info();
std::vector<DeviceInfo> list_devices();
// "13.0" from 13000.
std::string format_cuda_version(int v);
// Allocates device memory until only `leave_free_bytes` of the card are free (or as close as
// 2 MiB steps allow), so a large card looks small to other processes; freed with the handle.
// For a helper process of the benchmark (`seedvae_gpu_bench hold`), as another application.
Result<std::shared_ptr<void>> hold_device_memory(int device, int64_t leave_free_bytes);
// Gives the cards back to the driver where no CUDA backend of this process is alive any more:
// their CUDA contexts (about half a GiB each, which outlive the backends) are destroyed; the next
// backend there creates its context again (a few hundred ms). For a long-lived process that
// sits idle (the studio). Returns how many devices it released.
int release_idle_devices();
// For --version: the CUDA runtime, cuDNN and cuBLAS versions loaded at run time and those this
// build was compiled against, and the driver's ("none" without one). Initialises no device.
std::string version_report();

// ---- the backend ---------------------------------------------------------------------------

// Storage and arithmetic precision of weights and activations. GroupNorm statistics, softmax and
// every matrix/convolution accumulation stay fp32 in all modes.
enum class Precision : uint8_t {
  kFp32,  // fp32, TF32 disabled (the golden-data mode)
  kTf32,  // fp32 storage, TF32 tensor cores in convolutions and matrix products
  kFp16,
  kBf16,
  // Fidelity: fp32 storage (the residual stream, GroupNorm inputs and every activation between
  // ops), convolutions with fp16 operands -- fp16 weights, exact for the fp16 checkpoint -- and
  // fp32 accumulation, each convolution's input converted to fp16 and its output (rounded to fp16
  // by cuDNN) back to fp32 with the bias added in fp32; attention as in tf32. fp16's 10-bit
  // mantissas instead of bf16's 7: errors an order of magnitude below bf16's at fp16 tensor-core
  // speed, for twice bf16's activation memory. Like fp16 it needs convolution inputs and outputs
  // within fp16's range (|x| <= 65504), as the SeedVR2 VAE's are.
  kFidelity,
};
std::string_view precision_name(Precision p);
std::optional<Precision> precision_from_name(std::string_view s);

// The backend's options: the switches every front end offers (core/backend/cuda_switches.h),
// the device and precision, and the settings only tests and the benchmark driver use.
struct CudaOptions : CudaSwitches {
  int device = 0;
  Precision precision = Precision::kFp32;
  // State slices smaller than this stay on the device when offload_state is on.
  int64_t offload_min_bytes = int64_t{16} << 20;
  // The most device memory the caching allocator reserves, in MiB (0: as much as the card has):
  // runs as if the card had only this much (`seedvae_gpu_bench --memory-limit-mib`), so a memory
  // target is shown to hold for reserved memory, not only for live tensors (cuDNN and cuBLAS
  // workspaces come from this allocator too; the CUDA context and library handles are outside).
  int memory_limit_mib = 0;
  // The device-level budget in bytes: everything the backend takes from the card -- the CUDA
  // context and library handles (measured through NVML at creation), the kernels the libraries
  // load on first use (kLibraryAllowance, core/backend/cuda_switches.h) and the allocator's reserve
  // (weights, activations, causal state, cuDNN/cuBLAS workspaces, cache). The reserve is capped at
  // what remains, so the allocator trims its cache before it grows past the budget. 0: the card's
  // free memory at creation minus kBudgetMargin, so other applications keep working; -1: no budget.
  int64_t budget_bytes = 0;
  // Testing: largest element count per cuDNN call (0: 2^31 - 1), to exercise temporal splitting.
  int64_t max_conv_elements = 0;
  // Testing: the most shared memory one block may opt in to, in KiB (0: the card's limit). With
  // 99 an H100 picks its kernels as an RTX 50xx (sm_120, 99 KiB) does: the head-512 attention
  // leaves the tensor-core kernel, which needs more, for the SIMT one (`seedvae_gpu_bench
  // --smem-limit-kib`; the GPU op tests run a configuration this way).
  int smem_limit_kib = 0;
  // Diagnostic: remember what every live allocation is, so the report can list what was live at
  // the memory peak (CudaBackendReport::peak_census). Costs a hash-map update per allocation.
  bool memory_census = false;
};

// Refuses invalid or incompatible settings with a reason (device capability included when a
// device is present).
Status validate_options(const CudaOptions& options);
// "bf16, channels-last, autotune, fused GN+SiLU, fused attention, caching allocator, buffer reuse"
std::string describe_options(const CudaOptions& options);

// Creates the backend on the calling thread, which then owns the device, stream and library
// handles; every later call must come from that thread.
Result<std::unique_ptr<Backend>> create_cuda_backend(const CudaOptions& options);

// What was live at the memory peak (CudaOptions::memory_census): allocations of the same name
// ("conv3d output [1, 256, 4, 1088, 1920] bf16") merged.
struct MemoryCensusEntry {
  std::string what;
  int64_t count = 0;
  int64_t bytes = 0;
};

// Extra numbers of a CUDA backend (empty optional for other backends).
struct CudaBackendReport {
  std::string device;
  CudaOptions options;
  int64_t live_bytes = 0, peak_live_bytes = 0;
  int64_t reserved_bytes = 0, peak_reserved_bytes = 0;
  int64_t driver_allocs = 0, cache_hits = 0;
  int64_t stream_waits = 0;  // reused blocks freed in stream order whose copy was still running
  // Device level: the card's use before the backend existed, what its context and library
  // handles took, the budget it enforces and the reserve cap that follows (-1/0: unknown/none).
  int64_t device_baseline_bytes = -1, fixed_bytes = -1, budget_bytes = 0, reserve_limit_bytes = 0;
  std::string device_probe;  // "nvml" or why the device-level numbers are unavailable
  int64_t conv_searched = 0, conv_heuristic = 0, conv_cache_loaded = 0;
  std::string autotune_cache_file;
  int64_t fused_attention_calls = 0, materialised_attention_calls = 0;
  int64_t fp16_accumulated_convs = 0;  // fp16 accumulation: convolutions that had it
  // autotune, 16 bits: convolutions that ran on the graph API, faster there than the legacy one
  int64_t graph_api_convs = 0;
  // FP8 convolutions: calls run in FP8, and calls that took the FP8 path but found no engine
  // (run in bf16)
  int64_t fp8_convs = 0, fp8_refused_convs = 0;
  std::string attention_kernel;  // "mma", "simt", "materialised"
  // Host wall time of activation uploads and of downloads (after the queued compute finished).
  double upload_ms = 0, download_ms = 0;
  double download_alloc_ms = 0;  // of download_ms: creating the (zero-filled) host tensor
  // CUDA-event time of streamed chunks, each from its upload to its download (GPU work only;
  // excludes the host-side handling between chunks).
  double device_ms = 0;
  int64_t offloaded_bytes = 0, prefetched_bytes = 0, offload_stalls = 0, pinned_bytes = 0;
  // times prefetched state was dropped from the device to make room (it comes back when read)
  int64_t prefetch_evictions = 0;
  int64_t upload_bytes = 0, download_bytes = 0;
  // Activations copied in from other devices (Backend::import_tensor) and the host wall time of
  // those copies.
  int64_t import_bytes = 0;
  double import_ms = 0;
  int64_t async_downloads = 0;  // download_frames_async calls (async tiles)
  // CUDA graphs: recordings kept, recordings discarded, launches, and the captures' memory pool.
  int64_t graphs_captured = 0, graphs_discarded = 0, graph_launches = 0, graph_pool_bytes = 0;
  std::string graph_discard_reason;  // the last one
  // With CudaOptions::memory_census: the live allocations at the peak since the last reset_peak(),
  // largest first.
  std::vector<MemoryCensusEntry> peak_census;
};
std::optional<CudaBackendReport> cuda_backend_report(const Backend& backend);

}  // namespace seedvae::gpu

namespace seedvae::gpu {

// Ceilings of the device, measured (docs/gpu-notes.md uses them to judge the engine's numbers):
// dense bf16 matrix product through cuBLASLt (8192^3, random data), device-to-device copy
// bandwidth (bytes read + written), pinned host<->device copies one way and both ways at once.
struct DeviceRates {
  std::string device;
  double bf16_gemm_tflops = 0;
  double fp16_gemm_tflops = 0;
  double tf32_gemm_tflops = 0;
  double d2d_gbps = 0;
  double h2d_gbps = 0, d2h_gbps = 0, bidirectional_gbps = 0;
};
Result<DeviceRates> measure_device_rates(int device);

// The convolution precisions cuDNN offers on this card:
// `seedvae_gpu_bench convprobe`. Each row is one convolution in one mode -- the legacy API in
// bf16 (what the engine runs), and the graph API (gpu/cudnn/conv_graph.h) in bf16, fp16 into an
// fp32 output, and FP8 e4m3 with per-tensor and per-channel scales into bf16 -- either timed on
// a decoder shape at 1080p or checked against an fp64 host convolution on a small shape.
struct ConvProbeRow {
  std::string shape;  // "128x6x1080x1920 -> 128, 3x3x3"
  std::string mode;
  std::string status;  // "ok" or why it could not run
  double ms = 0, tflops = 0;
  int offered = 0, built = 0, chosen = -1;  // graph API: configurations offered, built, chosen
  double rel_rms = -1, rel_max = -1;        // small shape: error against fp64, relative to the
                                            // reference's rms and max abs
};
Result<std::vector<ConvProbeRow>> probe_convolutions(int device, bool timing);

}  // namespace seedvae::gpu
