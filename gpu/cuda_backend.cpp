// The CUDA backend's public face (gpu/cuda_backend.h): precision names, option description and
// validation, the factory with the backend's construction (device, stream, library handles,
// autotune cache, allocator) and destruction, and the report. The backend itself is declared in
// gpu/backend/cuda_backend_impl.h, its ops and machinery defined in gpu/backend/*.cpp.
#include "gpu/cuda_backend.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "gpu/allocator.h"
#include "gpu/backend/cuda_backend_impl.h"
#include "gpu/cublas/gemm.h"
#include "gpu/cuda_check.h"
#include "gpu/cudnn/conv3d_cudnn.h"
#include "gpu/cudnn/conv_graph.h"

namespace seedvae::gpu {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFidelity: return "fidelity";
  }
  return "?";
}

std::optional<Precision> precision_from_name(std::string_view s) {
  if (s == "fp32" || s == "f32" || s == "float32") return Precision::kFp32;
  if (s == "tf32") return Precision::kTf32;
  if (s == "fp16" || s == "f16" || s == "half" || s == "float16") return Precision::kFp16;
  if (s == "bf16" || s == "bfloat16") return Precision::kBf16;
  if (s == "fidelity") return Precision::kFidelity;
  return std::nullopt;
}

std::string describe_options(const CudaOptions& o) {
  std::string s(precision_name(o.precision));
  s += o.channels_last ? ", channels-last" : ", NCDHW";
  s += o.autotune ? ", autotune" : ", heuristic algorithms";
  if (o.autotune && o.graph_api) s += " (with graph engines)";
  s += o.fused_gn_silu ? ", fused GN+SiLU" : ", separate GN and SiLU";
  s += o.fused_attention ? ", fused attention" : ", materialised attention";
  s += o.caching_allocator ? ", caching allocator" : ", plain cudaMalloc";
  s += o.buffer_reuse ? ", buffer reuse" : ", fresh buffers";
  s += o.fuse_bias ? ", fused bias" : ", separate bias pass";
  if (o.offload_state) s += ", causal state offloaded to host";
  if (o.memory_limit_mib > 0) s += ", memory limit " + std::to_string(o.memory_limit_mib) + " MiB";
  if (o.smem_limit_kib > 0)
    s += ", shared memory limit " + std::to_string(o.smem_limit_kib) + " KiB";
  if (o.cuda_graphs) s += ", CUDA graphs";
  if (o.fp16_accumulation && o.precision == Precision::kFp16) s += ", fp16 accumulation";
  if (o.fp8_convs && o.precision == Precision::kBf16) s += ", FP8 convolutions";
  return s;
}

Status validate_options(const CudaOptions& o) {
  if (o.device < 0) return invalid_argument("--device must be >= 0");
  if (o.workspace_mib < 0) return invalid_argument("the cuDNN workspace limit must be >= 0 MiB");
  if (o.memory_limit_mib < 0) return invalid_argument("the memory limit must be >= 0 MiB");
  if (o.max_conv_elements < 0) return invalid_argument("max_conv_elements must be >= 0");
  if (o.smem_limit_kib < 0) return invalid_argument("the shared memory limit must be >= 0 KiB");
  if (o.offload_window_mib < 0 || o.offload_min_bytes < 0) {
    return invalid_argument("the offload window and threshold must be >= 0");
  }
  if (o.cuda_graphs && o.offload_state) {
    return invalid_argument(
        "CUDA graphs need the causal state on the device: a graph replays fixed addresses, and "
        "--offload-state moves the state to the host and back between chunks (use one or the "
        "other)");
  }
  // buffer_reuse with NCDHW is accepted (it is the default) but has no effect: in NCDHW a
  // tensor's frames are not contiguous, so there are no spare frames to pad into.
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return unsupported("no usable CUDA device (driver missing or no GPU)");
  }
  if (o.device >= count) {
    return not_found("CUDA device " + std::to_string(o.device) + " does not exist (" +
                     std::to_string(count) + " device" + (count == 1 ? "" : "s") + ")");
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, o.device) != cudaSuccess) {
    cudaGetLastError();
    return unsupported("cannot query CUDA device " + std::to_string(o.device));
  }
  const int cc = p.major * 10 + p.minor;
  if (o.precision == Precision::kBf16 && cc < 80) {
    return unsupported(std::string("bf16 needs compute capability 8.0 or newer; ") + p.name +
                       " is " + std::to_string(p.major) + "." + std::to_string(p.minor) +
                       " (use --precision fp16)");
  }
  if (o.precision == Precision::kTf32 && cc < 80) {
    return unsupported(std::string("TF32 needs compute capability 8.0 or newer; ") + p.name +
                       " has no TF32 tensor cores (use --precision fp32 or fp16)");
  }
  if (cc < 70) {
    return unsupported(std::string(p.name) + " (compute capability " + std::to_string(p.major) +
                       "." + std::to_string(p.minor) + ") is older than Volta; not supported");
  }
  return Status::ok();
}

namespace {

std::string default_cache_dir() {
  if (const char* d = std::getenv("SEEDVAE_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/seedvae";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/seedvae";
  return {};
}

std::string sanitize(std::string s) {
  for (char& c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '-')) {
      c = '_';
    }
  }
  return s;
}

// The CUDA contexts this process made, per device: their size on the card (measured by the first
// backend there; -1 until then) and the backends alive on them (release_idle_devices).
struct Contexts {
  std::mutex mu;
  std::map<int, int64_t> bytes;
  std::map<int, int> live;
};
// Never destroyed: a backend that is itself a static (a test's, say) may be destroyed at exit
// after any other static, and its destructor still counts itself down here.
Contexts& contexts() {
  static Contexts* c = new Contexts();
  return *c;
}

}  // namespace

int release_idle_devices() {
  Contexts& ctx = contexts();
  std::lock_guard<std::mutex> lock(ctx.mu);
  int released = 0;
  for (auto it = ctx.live.begin(); it != ctx.live.end();) {
    if (it->second > 0) {
      ++it;
      continue;
    }
    // Destroys the device's primary context: every allocation, stream, event, module and
    // library handle of the process on it. Nothing is left to use them (no backend is alive),
    // and the next backend there makes a new context and measures it again.
    if (cudaSetDevice(it->first) == cudaSuccess && cudaDeviceReset() == cudaSuccess) ++released;
    cudaGetLastError();
    ctx.bytes.erase(it->first);
    it = ctx.live.erase(it);
  }
  // The thread's current device is left as it is: selecting one (cudaSetDevice) would create
  // its context again.
  return released;
}

namespace detail {

Result<std::unique_ptr<Backend>> CudaBackend::create(const CudaOptions& o) {
  SEEDVAE_TRY(validate_options(o));
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->opt_ = o;
  b->owner_ = std::this_thread::get_id();
  // The baseline of the device-level budget and peak: the card's use by everything but this
  // process. The first backend on a card reads it before cudaSetDevice creates the context and
  // measures the context; the context outlives its backends, so a later one (a job that turned
  // the offload on) subtracts that context from the card's use at its own start.
  Contexts& ctx = contexts();
  char bus[64] = {};
  int64_t context = -1;
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, o.device) == cudaSuccess) {
    b->probe_ = DeviceMemoryProbe::open(bus, &b->probe_note_);
    if (b->probe_) {
      const int64_t used = b->probe_->used_bytes();
      std::lock_guard<std::mutex> lock(ctx.mu);
      auto it = ctx.bytes.find(o.device);
      context = it == ctx.bytes.end() ? -1 : it->second;
      b->baseline_bytes_ = used < 0 ? -1 : used - std::max<int64_t>(context, 0);
      b->probe_note_ = "nvml";
    }
  } else {
    cudaGetLastError();
    b->probe_note_ = "the PCI bus id of device " + std::to_string(o.device) + " is unknown";
  }
  SEEDVAE_CUDA_TRY(cudaSetDevice(o.device), "selecting CUDA device " + std::to_string(o.device));
  {
    std::lock_guard<std::mutex> lock(ctx.mu);
    ++ctx.live[o.device];  // from here the destructor counts it down
    b->counted_ = true;
    if (b->probe_ && b->baseline_bytes_ >= 0 && context < 0) {
      ctx.bytes[o.device] = std::max<int64_t>(0, b->probe_->used_bytes() - b->baseline_bytes_);
    }
  }
  cudaDeviceProp p{};
  SEEDVAE_CUDA_TRY(cudaGetDeviceProperties(&p, o.device), "querying the device");
  b->sms_ = p.multiProcessorCount;
  b->cc_ = p.major * 10 + p.minor;
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, o.device);
  b->smem_optin_ = o.smem_limit_kib > 0 ? std::min(optin, o.smem_limit_kib * 1024) : optin;
  cudaStream_t s = nullptr;
  SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating the stream");
  b->stream_ = s;
  SEEDVAE_CUDA_TRY(cudaEventCreate(&b->chunk_start_), "creating timing events");
  SEEDVAE_CUDA_TRY(cudaEventCreate(&b->chunk_end_), "creating timing events");
  if (o.offload_state) {
    cudaStream_t d2h = nullptr, h2d = nullptr;
    SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&d2h, cudaStreamNonBlocking),
                     "creating the copy streams");
    SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&h2d, cudaStreamNonBlocking),
                     "creating the copy streams");
    b->d2h_stream_ = d2h;
    b->h2d_stream_ = h2d;
    b->pinned_pool_ = std::make_shared<PinnedPool>();
  }
  b->alloc_ = std::make_shared<DeviceAllocator>(o.caching_allocator, s);
  b->alloc_->set_census(o.memory_census);
  // Out of room, state prefetched ahead of use goes back to the host copy it came from.
  b->alloc_->set_reclaim([raw = b.get()] { return raw->evict_prefetched(); });
  SEEDVAE_ASSIGN_OR_RETURN(b->gemm_, Gemm::create(s, b->alloc_));
  int driver = 0;
  cudaDriverGetVersion(&driver);
  ConvOptions co;
  co.autotune = o.autotune;
  co.workspace_limit = int64_t{o.workspace_mib} << 20;
  co.max_elements = o.max_conv_elements > 0 ? o.max_conv_elements : (int64_t{1} << 31) - 1;
  if (o.autotune) {
    std::string file = o.autotune_cache;
    if (file == "auto") {
      const std::string dir = default_cache_dir();
      file = dir.empty() ? std::string()
                         : dir + "/cudnn-" + sanitize(p.name) + "-sm" + std::to_string(b->cc_) +
                               "-drv" + std::to_string(driver) + "-cudnn" +
                               std::to_string(runtime_info().cudnn_version) + ".tsv";
    }
    co.cache_file = file;
    b->cache_file_ = file;
  }
  SEEDVAE_ASSIGN_OR_RETURN(b->conv_, Conv3dCudnn::create(s, b->alloc_, co));
  b->fp8_ = o.fp8_convs && o.precision == Precision::kBf16;
  if (b->fp8_ && b->cc_ < 89) {
    return unsupported(
        "FP8 convolutions (--fp8-convs) need FP8 tensor cores (compute capability "
        "8.9 or newer: RTX 40xx/50xx, L4/L40, H100, B200); " +
        std::string(p.name) + " is sm_" + std::to_string(b->cc_));
  }
  // the graph API: fp16 accumulation, FP8, and (autotune, 16-bit operands) the engines timed
  // against the legacy API's algorithms (conv_either_api)
  const bool sixteen = o.precision == Precision::kBf16 || o.precision == Precision::kFp16 ||
                       o.precision == Precision::kFidelity;
  b->fp16_accumulate_ = o.fp16_accumulation && o.precision == Precision::kFp16;
  if (b->fp16_accumulate_ || b->fp8_ || (o.autotune && o.graph_api && sixteen)) {
    SEEDVAE_ASSIGN_OR_RETURN(b->graph_conv_, GraphConv::create(s, b->alloc_, o.autotune));
  }
  b->act_ = dtype_of(o.precision);
  b->math_ =
      o.precision == Precision::kTf32 || (o.precision == Precision::kFidelity && b->cc_ >= 80)
          ? MathMode::kTf32
          : MathMode::kStrict;
  b->fp16_convs_ = o.precision == Precision::kFidelity;
  b->device_name_ = p.name;
  b->name_ = "cuda:" + std::to_string(o.device) + " " + p.name + " (" + describe_options(o) +
             "; cuDNN " + std::to_string(b->conv_->version()) + ", cuBLASLt " +
             std::to_string(b->gemm_->version()) + ")";
  SEEDVAE_TRY(b->apply_budget());
  return std::unique_ptr<Backend>(std::move(b));
}

Status CudaBackend::apply_budget() {
  const CudaOptions& o = opt_;
  size_t free_b = 0, total_b = 0;
  SEEDVAE_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b), "querying the device's memory");
  if (probe_ && baseline_bytes_ >= 0) {
    const int64_t now = probe_->used_bytes();
    fixed_bytes_ = now >= baseline_bytes_ ? now - baseline_bytes_ : -1;
  }
  // Free memory before this backend: NVML's baseline, else (no NVML) the runtime's free memory
  // now plus what the context is assumed to take (nothing).
  const int64_t free_before = baseline_bytes_ >= 0 && probe_
                                  ? probe_->total_bytes() - baseline_bytes_
                                  : static_cast<int64_t>(free_b);
  budget_bytes_ = o.budget_bytes > 0    ? o.budget_bytes
                  : o.budget_bytes == 0 ? free_before - kBudgetMargin
                                        : 0;
  int64_t limit = int64_t{o.memory_limit_mib} << 20;
  if (budget_bytes_ > 0) {
    const int64_t reserve = budget_bytes_ - std::max<int64_t>(fixed_bytes_, 0) - kLibraryAllowance;
    if (reserve < (int64_t{256} << 20)) {
      return out_of_memory(
          "a device budget of " + format_bytes(budget_bytes_) + " leaves no room on " +
          device_name_ + ": the CUDA context and library handles take " +
          format_bytes(std::max<int64_t>(fixed_bytes_, 0)) + " and their kernels up to " +
          format_bytes(kLibraryAllowance) + " (" + format_bytes(free_before) + " of " +
          format_bytes(static_cast<int64_t>(total_b)) + " was free)");
    }
    limit = limit > 0 ? std::min(limit, reserve) : reserve;
  }
  reserve_limit_ = limit;
  alloc_->set_reserve_limit(limit);
  if (budget_bytes_ > 0) {
    name_ += "; budget " + format_bytes(budget_bytes_) +
             (o.budget_bytes > 0 ? std::string(" (--budget-gb)")
                                 : " (free " + format_bytes(free_before) + " - 0.5 GiB)") +
             ", reserve at most " + format_bytes(limit);
  }
  return Status::ok();
}

std::function<int64_t()> CudaBackend::device_memory_probe() const {
  if (!probe_) return {};
  return [p = probe_] { return p->used_bytes(); };
}

CudaBackend::~CudaBackend() {
  if (alloc_) alloc_->set_reclaim(nullptr);  // blocks may keep the allocator alive
  if (stream_) cudaStreamSynchronize(stream_);
  if (d2h_stream_) cudaStreamSynchronize(d2h_stream_);
  if (h2d_stream_) cudaStreamSynchronize(h2d_stream_);
  if (copy_out_stream_) cudaStreamSynchronize(copy_out_stream_);
  for (auto& [id, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  if (chunk_start_) cudaEventDestroy(chunk_start_);
  if (chunk_end_) cudaEventDestroy(chunk_end_);
  for (SpanSlot& sl : spans_) {
    cudaEventDestroy(sl.start);
    cudaEventDestroy(sl.end);
  }
  for (int i = 0; i < 2; ++i) {
    if (pinned_[i]) cudaFreeHost(pinned_[i]);
    if (pinned_ev_[i]) cudaEventDestroy(pinned_ev_[i]);
  }
  conv_.reset();
  gemm_.reset();
  if (stream_) cudaStreamDestroy(stream_);
  if (d2h_stream_) cudaStreamDestroy(d2h_stream_);
  if (h2d_stream_) cudaStreamDestroy(h2d_stream_);
  if (copy_out_stream_) cudaStreamDestroy(copy_out_stream_);
  if (counted_) {
    Contexts& ctx = contexts();
    std::lock_guard<std::mutex> lock(ctx.mu);
    --ctx.live[opt_.device];
  }
}

CudaBackendReport CudaBackend::report() const {
  CudaBackendReport r;
  r.device = device_name_;
  r.options = opt_;
  const AllocatorStats a = alloc_->stats();
  r.live_bytes = a.live_bytes;
  r.peak_live_bytes = a.peak_live_bytes;
  r.reserved_bytes = a.reserved_bytes;
  r.peak_reserved_bytes = a.peak_reserved_bytes;
  r.driver_allocs = a.driver_allocs;
  r.cache_hits = a.cache_hits;
  r.stream_waits = a.stream_waits;
  r.device_baseline_bytes = baseline_bytes_;
  r.fixed_bytes = fixed_bytes_;
  r.budget_bytes = budget_bytes_;
  r.reserve_limit_bytes = reserve_limit_;
  r.device_probe = probe_note_;
  const ConvAlgoStats c = conv_->stats();
  r.conv_searched = c.searched;
  r.conv_heuristic = c.heuristic;
  r.conv_cache_loaded = c.loaded;
  r.autotune_cache_file = cache_file_;
  r.fused_attention_calls = fused_calls_;
  r.fp16_accumulated_convs = fp16_accumulated_;
  r.graph_api_convs = graph_api_convs_;
  r.fp8_convs = fp8_convs_;
  r.fp8_refused_convs = fp8_refused_;
  r.materialised_attention_calls = materialised_calls_;
  r.attention_kernel = attention_kernel_;
  r.upload_ms = upload_ms_;
  r.offloaded_bytes = offloaded_bytes_;
  r.prefetched_bytes = prefetched_bytes_;
  r.offload_stalls = offload_stalls_;
  r.prefetch_evictions = prefetch_evictions_;
  r.pinned_bytes = pinned_pool_ ? pinned_pool_->bytes : 0;
  r.download_ms = download_ms_;
  r.download_alloc_ms = download_alloc_ms_;
  r.device_ms = device_ms_;
  r.upload_bytes = upload_bytes_;
  r.import_bytes = import_bytes_;
  r.import_ms = import_ms_;
  r.async_downloads = async_downloads_;
  r.graphs_captured = graphs_captured_;
  r.graphs_discarded = graphs_discarded_;
  r.graph_launches = graph_launches_;
  r.graph_pool_bytes = alloc_->graph_pool_bytes();
  r.graph_discard_reason = graph_discard_reason_;
  r.download_bytes = download_bytes_;
  for (auto& e : alloc_->peak_census()) {
    r.peak_census.push_back({std::move(e.what), e.count, e.bytes});
  }
  return r;
}

}  // namespace detail

Result<std::unique_ptr<Backend>> create_cuda_backend(const CudaOptions& options) {
  return detail::CudaBackend::create(options);
}

std::optional<CudaBackendReport> cuda_backend_report(const Backend& backend) {
  if (const auto* b = dynamic_cast<const detail::CudaBackend*>(&backend)) return b->report();
  return std::nullopt;
}

}  // namespace seedvae::gpu
