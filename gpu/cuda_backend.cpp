// The CUDA backend: validation and dispatch of every Backend op onto cuDNN (3-D convolutions),
// cuBLASLt (1x1x1 convolutions, attention projections, materialised attention) and our kernels
// (gpu/kernels: GroupNorm(+SiLU), causal padding, depth-to-space, residual add, attention core,
// layout/dtype conversion). Ordinary host C++: CUDA runtime calls, no kernels.
//
// One thread owns the device: the thread that created the backend creates the stream and the
// library handles, and every op checks that it is called from that thread. All work goes to one
// stream in op order; host-visible results (download) synchronise it. Errors are values: every
// failure becomes a Status naming the op and its shapes; out-of-memory names the allocation.
//
// Tensors: a CudaStorage is a view into a DeviceBlock (caching allocator). Activations are 5-D
// in NDHWC (channels-last, default) or NCDHW, in the compute dtype; conv weights are repacked to
// KRSC [Cout, kT, kH, kW, Cin] for NDHWC; 1x1x1 conv and Linear weights are [out, in] matrices;
// 1-D parameters (biases, norm affine) stay fp32.
#include "gpu/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "gpu/allocator.h"
#include "gpu/cublas/gemm.h"
#include "gpu/cuda_check.h"
#include "gpu/cudnn/conv3d_cudnn.h"
#include "gpu/kernels/attention.h"
#include "gpu/kernels/conv_small.h"
#include "gpu/kernels/elementwise.h"
#include "gpu/kernels/groupnorm.h"
#include "gpu/kernels/resample.h"

namespace seedvae::gpu {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

std::optional<Precision> precision_from_name(std::string_view s) {
  if (s == "fp32" || s == "f32" || s == "float32") return Precision::kFp32;
  if (s == "tf32") return Precision::kTf32;
  if (s == "fp16" || s == "f16" || s == "half" || s == "float16") return Precision::kFp16;
  if (s == "bf16" || s == "bfloat16") return Precision::kBf16;
  return std::nullopt;
}

std::string describe_options(const CudaOptions& o) {
  std::string s(precision_name(o.precision));
  s += o.channels_last ? ", channels-last" : ", NCDHW";
  s += o.autotune ? ", autotune" : ", heuristic algorithms";
  s += o.fused_gn_silu ? ", fused GN+SiLU" : ", separate GN and SiLU";
  s += o.fused_attention ? ", fused attention" : ", materialised attention";
  s += o.caching_allocator ? ", caching allocator" : ", plain cudaMalloc";
  s += o.buffer_reuse ? ", buffer reuse" : ", fresh buffers";
  s += o.fuse_bias ? ", fused bias" : ", separate bias pass";
  if (o.offload_state) s += ", causal state offloaded to host";
  if (o.memory_limit_mib > 0) s += ", memory limit " + std::to_string(o.memory_limit_mib) + " MiB";
  if (o.cuda_graphs) s += ", CUDA graphs";
  return s;
}

Status validate_options(const CudaOptions& o) {
  if (o.device < 0) return invalid_argument("--device must be >= 0");
  if (o.workspace_mib < 0) return invalid_argument("the cuDNN workspace limit must be >= 0 MiB");
  if (o.memory_limit_mib < 0) return invalid_argument("the memory limit must be >= 0 MiB");
  if (o.max_conv_elements < 0) return invalid_argument("max_conv_elements must be >= 0");
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

ElemType elem_of(DType t) {
  switch (t) {
    case DType::kF16: return ElemType::kF16;
    case DType::kBF16: return ElemType::kBF16;
    default: return ElemType::kF32;
  }
}

DType dtype_of(Precision p) {
  switch (p) {
    case Precision::kFp16: return DType::kF16;
    case Precision::kBf16: return DType::kBF16;
    default: return DType::kF32;
  }
}

std::string str(const Shape& s) { return s.to_string(); }

enum class Kind : uint8_t {
  kActivation,  // rank 5, `layout`
  kConvWeight,  // [Cout, Cin, kT, kH, kW] stored KRSC (NDHWC backend) or KCRS
  kMatrix,      // [out, in] row-major (Linear weight, or 1x1x1 conv weight with 5-D shape)
  kVector,      // rank 1, fp32
  kPlain,       // any other rank: contiguous, compute dtype
};

// Pinned host buffers for offloaded causal state and asynchronous downloads, reused by exact
// size.
struct PinnedPool {
  std::multimap<size_t, void*> free;
  std::vector<void*> all;
  int64_t bytes = 0;
  ~PinnedPool() {
    for (void* p : all) cudaFreeHost(p);
  }
  // `remedy` ends the out-of-memory message ("run without --offload-state").
  Result<void*> get(size_t n, const std::string& what, const std::string& remedy) {
    auto it = free.find(n);
    if (it != free.end()) {
      void* p = it->second;
      free.erase(it);
      return p;
    }
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return out_of_memory(what + ": cannot pin " + format_bytes(static_cast<int64_t>(n)) +
                           " of host memory (" + cudaGetErrorString(e) + "); " + remedy);
    }
    all.push_back(p);
    bytes += static_cast<int64_t>(n);
    return p;
  }
  void put(void* p, size_t n) { free.emplace(n, p); }
};

// The host copy of an offloaded tensor (causal state): pinned bytes, the event that marks the
// end of the device-to-host copy, and the host-to-device copy that brings it back.
struct HostCopy {
  std::shared_ptr<PinnedPool> pool;
  void* pinned = nullptr;
  size_t bytes = 0;
  cudaEvent_t d2h_done = nullptr;
  cudaEvent_t h2d_done = nullptr;
  bool h2d_pending = false;  // the compute stream has not waited for h2d_done yet
  bool consumed = false;
  ~HostCopy() {
    if (h2d_done) {
      cudaEventSynchronize(h2d_done);
      cudaEventDestroy(h2d_done);
    }
    if (d2h_done) {
      cudaEventSynchronize(d2h_done);
      cudaEventDestroy(d2h_done);
    }
    if (pinned) pool->put(pinned, bytes);
  }
};

class CudaStorage final : public Storage {
 public:
  BlockPtr block;           // null while the data lives only in `host` (offloaded)
  size_t offset = 0;        // bytes from block->ptr to element 0
  Kind kind = Kind::kActivation;
  Layout layout = Layout::kNDHWC;
  int64_t head_frames = 0;  // spare frames in the block before element 0 (NDHWC, N = 1)
  std::unique_ptr<HostCopy> host;
  // A convolution's bias not yet added (fused bias): GroupNorm and the residual add apply it on
  // the fly; any other consumer materialises it first. `bias_owner` keeps the vector alive.
  const float* pending_bias = nullptr;
  std::shared_ptr<Storage> bias_owner;

  void* ptr() const { return static_cast<char*>(block->ptr) + offset; }
};

Dims5 dims5(const Shape& s) { return {s[0], s[1], s[2], s[3], s[4]}; }

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

class CudaBackend;

// One download_frames_async() in flight (owned by the caller, on the backend's thread).
class AsyncDownload final : public PendingCopy {
 public:
  AsyncDownload(CudaBackend* backend, std::string what) : backend_(backend), what_(std::move(what)) {}
  ~AsyncDownload() override { release(); }
  Status wait() override;

  float* dst = nullptr;  // the destination's first element (plane 0, frame_offset)
  int64_t plane = 0, planes = 0, dst_stride = 0;
  size_t bytes = 0;
  std::shared_ptr<PinnedPool> pool;
  void* pinned = nullptr;
  BlockPtr scratch;                // converted copy of the source, or
  std::shared_ptr<Storage> keep;   // the source itself, until the transfer is done
  cudaEvent_t ready = nullptr, done = nullptr;
  cudaEvent_t chunk_start = nullptr, chunk_end = nullptr;  // the chunk's device time, if timed

 private:
  void release() {
    if (done) cudaEventSynchronize(done);  // the transfer must not outlive its buffers
    cudaGetLastError();
    for (cudaEvent_t* e : {&ready, &done, &chunk_start, &chunk_end}) {
      if (*e) cudaEventDestroy(*e);
      *e = nullptr;
    }
    if (pinned) pool->put(pinned, bytes);
    pinned = nullptr;
    scratch.reset();
    keep.reset();
  }

  CudaBackend* backend_;
  std::string what_;
  bool waited_ = false;
  Status status_;
};

class CudaBackend final : public Backend {
  friend class AsyncDownload;

 public:
  static Result<std::unique_ptr<Backend>> create(const CudaOptions& o) {
    SEEDVAE_TRY(validate_options(o));
    std::unique_ptr<CudaBackend> b(new CudaBackend());
    b->opt_ = o;
    b->owner_ = std::this_thread::get_id();
    SEEDVAE_CUDA_TRY(cudaSetDevice(o.device), "selecting CUDA device " + std::to_string(o.device));
    cudaDeviceProp p{};
    SEEDVAE_CUDA_TRY(cudaGetDeviceProperties(&p, o.device), "querying the device");
    b->sms_ = p.multiProcessorCount;
    b->cc_ = p.major * 10 + p.minor;
    int optin = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, o.device);
    b->smem_optin_ = optin;
    cudaStream_t s = nullptr;
    SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "creating the stream");
    b->stream_ = s;
    SEEDVAE_CUDA_TRY(cudaEventCreate(&b->chunk_start_), "creating timing events");
    SEEDVAE_CUDA_TRY(cudaEventCreate(&b->chunk_end_), "creating timing events");
    if (o.offload_state) {
      cudaStream_t d2h = nullptr, h2d = nullptr;
      SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&d2h, cudaStreamNonBlocking), "creating the copy streams");
      SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&h2d, cudaStreamNonBlocking), "creating the copy streams");
      b->d2h_stream_ = d2h;
      b->h2d_stream_ = h2d;
      b->pinned_pool_ = std::make_shared<PinnedPool>();
    }
    b->alloc_ = std::make_shared<DeviceAllocator>(o.caching_allocator, s);
    b->alloc_->set_census(o.memory_census);
    b->alloc_->set_reserve_limit(int64_t{o.memory_limit_mib} << 20);
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
    b->act_ = dtype_of(o.precision);
    b->math_ = o.precision == Precision::kTf32 ? MathMode::kTf32 : MathMode::kStrict;
    b->device_name_ = p.name;
    b->name_ = "cuda:" + std::to_string(o.device) + " " + p.name + " (" + describe_options(o) +
               "; cuDNN " + std::to_string(b->conv_->version()) + ", cuBLASLt " +
               std::to_string(b->gemm_->version()) + ")";
    return std::unique_ptr<Backend>(std::move(b));
  }

  ~CudaBackend() override {
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
  }

  std::string name() const override { return name_; }
  DType activation_dtype() const override { return act_; }

  CudaBackendReport report() const {
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
    const ConvAlgoStats c = conv_->stats();
    r.conv_searched = c.searched;
    r.conv_heuristic = c.heuristic;
    r.conv_cache_loaded = c.loaded;
    r.autotune_cache_file = cache_file_;
    r.fused_attention_calls = fused_calls_;
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
    r.async_downloads = async_downloads_;
    r.graphs_captured = graphs_captured_;
    r.graphs_discarded = graphs_discarded_;
    r.graph_launches = graph_launches_;
    r.graph_pool_bytes = alloc_->graph_pool_bytes();
    r.graph_discard_reason = graph_discard_reason_;
    r.download_bytes = download_bytes_;
    for (auto& e : alloc_->peak_census()) r.peak_census.push_back({std::move(e.what), e.count, e.bytes});
    return r;
  }

  // ---- memory ------------------------------------------------------------------------------

  Result<Tensor> upload(const HostTensor& host) override {
    SEEDVAE_TRY(check_thread("upload"));
    const auto t0 = std::chrono::steady_clock::now();
    if (!chunk_open_ && chunk_start_) {
      // device time of one streamed chunk: from its upload to the start of its download
      cudaEventRecord(chunk_start_, stream_);
      chunk_open_ = true;
    }
    auto r = upload_impl(host, false, "upload");
    upload_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    upload_bytes_ += host.nbytes();
    return r;
  }

  Result<Tensor> upload_weight(const HostTensor& host, std::string_view name) override {
    SEEDVAE_TRY(check_thread("upload_weight"));
    return upload_impl(host, true, "upload_weight(" + std::string(name) + ")");
  }

  Result<HostTensor> download(const Tensor& t) override {
    const auto t0 = std::chrono::steady_clock::now();
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor host, HostTensor::create(DType::kF32, t.shape));
    download_alloc_ms_ +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const int64_t n = t.shape.numel();
    SEEDVAE_TRY(download_planes(t, static_cast<float*>(host.raw()), n, 1, n, "download"));
    return host;
  }

  Status download_frames(const Tensor& t, HostTensor& dst, int64_t frame_offset) override {
    SEEDVAE_TRY(check_download_frames(t.shape, dst, frame_offset));
    const Shape& s = t.shape;
    const int64_t frame = s[3] * s[4];
    // N*C planes of T frames each, written at frame_offset of planes of T_dst frames.
    auto* base = static_cast<float*>(dst.raw()) + frame_offset * frame;
    return download_planes(t, base, s[2] * frame, s[0] * s[1], dst.shape()[2] * frame,
                           "download_frames");
  }

  // "Async tiles": the conversion to fp32 NCDHW is queued on the compute stream, the transfer on
  // the copy-out stream into pinned memory; wait() copies the planes into dst. The source (the
  // converted scratch, or the tensor's own block when it already is fp32 NCDHW) stays owned by
  // the copy until its transfer is done, so the caching allocator cannot hand it out early.
  Result<std::unique_ptr<PendingCopy>> download_frames_async(const Tensor& t, HostTensor& dst,
                                                             int64_t frame_offset) override {
    constexpr std::string_view op = "download_frames_async";
    SEEDVAE_TRY(check_download_frames(t.shape, dst, frame_offset));
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, "tensor"));
    const Shape& sh = t.shape;
    const int64_t n = sh.numel();
    const std::string what = std::string(op) + " " + str(sh);
    auto copy = std::make_unique<AsyncDownload>(this, what);
    const int64_t frame = sh[3] * sh[4];
    copy->dst = static_cast<float*>(dst.raw()) + frame_offset * frame;
    copy->plane = sh[2] * frame;
    copy->planes = sh[0] * sh[1];
    copy->dst_stride = dst.shape()[2] * frame;
    copy->bytes = static_cast<size_t>(n) * 4;
    if (chunk_open_) {
      // the chunk's device time ends here; the copy takes the pair of events and reads them in
      // wait(), since the next chunk's upload records a new start before that
      SEEDVAE_CUDA_TRY(cudaEventRecord(chunk_end_, stream_), what);
      copy->chunk_start = chunk_start_;
      copy->chunk_end = chunk_end_;
      chunk_start_ = chunk_end_ = nullptr;
      chunk_open_ = false;
      SEEDVAE_CUDA_TRY(cudaEventCreate(&chunk_start_), what + ": timing events");
      SEEDVAE_CUDA_TRY(cudaEventCreate(&chunk_end_), what + ": timing events");
    }
    if (n == 0) return std::unique_ptr<PendingCopy>(std::move(copy));
    if (!copy_out_stream_) {
      cudaStream_t cs = nullptr;
      SEEDVAE_CUDA_TRY(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking), what + ": copy stream");
      copy_out_stream_ = cs;
    }
    if (!pinned_pool_) pinned_pool_ = std::make_shared<PinnedPool>();
    const ElemType et = elem_of(t.dtype);
    const void* src = s->ptr();
    const bool transposed = (s->kind == Kind::kActivation || s->kind == Kind::kConvWeight) &&
                            s->layout == Layout::kNDHWC && sh.rank() == 5;
    if (transposed || et != ElemType::kF32) {
      SEEDVAE_ASSIGN_OR_RETURN(copy->scratch, alloc_->allocate(n * 4, what + " staging"));
      if (transposed) {
        launch_transpose(et, src, ElemType::kF32, copy->scratch->ptr, sh[0], sh[1],
                         sh[2] * sh[3] * sh[4], false, stream_);
      } else {
        launch_convert(et, src, ElemType::kF32, copy->scratch->ptr, n, stream_);
      }
      SEEDVAE_TRY(check_launch(what));
      src = copy->scratch->ptr;
    } else {
      copy->keep = t.storage;
    }
    copy->pool = pinned_pool_;
    SEEDVAE_ASSIGN_OR_RETURN(copy->pinned,
                             pinned_pool_->get(copy->bytes, what,
                                               "turn async tiles off (--async-tiles off)"));
    SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&copy->ready, cudaEventDisableTiming), what);
    SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&copy->done, cudaEventDisableTiming), what);
    SEEDVAE_CUDA_TRY(cudaEventRecord(copy->ready, stream_), what);
    SEEDVAE_CUDA_TRY(cudaStreamWaitEvent(copy_out_stream_, copy->ready, 0), what);
    SEEDVAE_CUDA_TRY(cudaMemcpyAsync(copy->pinned, src, copy->bytes, cudaMemcpyDeviceToHost,
                                     copy_out_stream_),
                     what);
    SEEDVAE_CUDA_TRY(cudaEventRecord(copy->done, copy_out_stream_), what);
    ++async_downloads_;
    return std::unique_ptr<PendingCopy>(std::move(copy));
  }

  // Converts t to contiguous fp32 NCDHW on the device, then copies `planes` runs of `plane`
  // floats to the host, run i at dst + i * dst_stride (a dense download is one plane).
  Status download_planes(const Tensor& t, float* dst, int64_t plane, int64_t planes,
                         int64_t dst_stride, std::string_view op) {
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, "tensor"));
    const int64_t n = t.shape.numel();
    const std::string what = std::string(op) + " " + str(t.shape);
    if (chunk_open_) SEEDVAE_CUDA_TRY(cudaEventRecord(chunk_end_, stream_), what);
    // Finish the queued compute first so the transfer time is measured alone.
    SEEDVAE_CUDA_TRY(cudaStreamSynchronize(stream_), what);
    if (chunk_open_) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, chunk_start_, chunk_end_) == cudaSuccess) device_ms_ += ms;
      cudaGetLastError();
      chunk_open_ = false;
    }
    if (n == 0) return Status::ok();
    const auto t0 = std::chrono::steady_clock::now();
    const ElemType et = elem_of(t.dtype);
    const void* src = s->ptr();
    BlockPtr scratch;
    const bool transposed = (s->kind == Kind::kActivation || s->kind == Kind::kConvWeight) &&
                            s->layout == Layout::kNDHWC && t.shape.rank() == 5;
    if (transposed || et != ElemType::kF32) {
      SEEDVAE_ASSIGN_OR_RETURN(scratch, alloc_->allocate(n * 4, what + " staging"));
      if (transposed) {
        launch_transpose(et, src, ElemType::kF32, scratch->ptr, t.shape[0], t.shape[1],
                         t.shape[2] * t.shape[3] * t.shape[4], false, stream_);
      } else {
        launch_convert(et, src, ElemType::kF32, scratch->ptr, n, stream_);
      }
      SEEDVAE_TRY(check_launch(what));
      src = scratch->ptr;
    }
    const auto* from = static_cast<const float*>(src);
    if (dst_stride == plane) {
      SEEDVAE_TRY(copy_to_host(dst, from, n * 4, what));
    } else {
      for (int64_t i = 0; i < planes; ++i) {
        SEEDVAE_TRY(copy_to_host(dst + i * dst_stride, from + i * plane, plane * 4, what));
      }
    }
    download_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
    download_bytes_ += n * 4;
    return Status::ok();
  }

  // ---- ops ---------------------------------------------------------------------------------

  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override {
    constexpr std::string_view op = "conv3d";
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * ws, storage_of(w, op, "weight"));
    const Shape& xsh = x.shape;
    const Shape& wsh = w.shape;
    if (wsh.rank() != 5 || (ws->kind != Kind::kConvWeight && ws->kind != Kind::kMatrix)) {
      return invalid_argument("conv3d: weight " + str(wsh) +
                              " must be a 5-D convolution weight uploaded with upload_weight");
    }
    if (wsh[1] != xsh.c()) {
      return invalid_argument("conv3d: input " + str(xsh) + " has " + std::to_string(xsh.c()) +
                              " channels but weight " + str(wsh) + " expects " +
                              std::to_string(wsh[1]));
    }
    const float* bias = nullptr;
    if (b.defined()) {
      SEEDVAE_ASSIGN_OR_RETURN(bias, vector_of(b, wsh[0], op, "bias"));
    }
    if (p.stride_t < 1 || p.stride_h < 1 || p.stride_w < 1 || p.pad_top < 0 ||
        p.pad_bottom < 0 || p.pad_left < 0 || p.pad_right < 0) {
      return invalid_argument("conv3d: strides must be >= 1 and padding >= 0");
    }
    for (int i = 0; i < 5; ++i) {
      if (xsh[i] < 1 || wsh[i] < 1) {
        return invalid_argument("conv3d: empty input " + str(xsh) + " or weight " + str(wsh));
      }
    }
    const int64_t hp = xsh.h() + p.pad_top + p.pad_bottom;
    const int64_t wp = xsh.w() + p.pad_left + p.pad_right;
    if (xsh.t() < wsh[2] || hp < wsh[3] || wp < wsh[4]) {
      return invalid_argument("conv3d: input " + str(xsh) + " (padded H " + std::to_string(hp) +
                              ", W " + std::to_string(wp) + ") is smaller than the kernel of " +
                              str(wsh));
    }
    const Shape out{xsh.n(), wsh[0], (xsh.t() - wsh[2]) / p.stride_t + 1,
                    (hp - wsh[3]) / p.stride_h + 1, (wp - wsh[4]) / p.stride_w + 1};
    const std::string what = "conv3d " + str(xsh) + " * " + str(wsh);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out, 0, what + " output"));
    CudaStorage* ys = storage(y);
    const Layout layout = xs->layout;
    const ElemType et = elem_of(act_);
    const int64_t es = dtype_size(act_);

    const bool pointwise = wsh[2] == 1 && wsh[3] == 1 && wsh[4] == 1 && p.stride_t == 1 &&
                           p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 &&
                           p.pad_bottom == 0 && p.pad_left == 0 && p.pad_right == 0;
    if (pointwise) {
      // 1x1x1 convolution = one matrix product over all pixels.
      const int64_t cin = xsh.c(), cout = wsh[0];
      const int64_t pix = xsh.t() * xsh.h() * xsh.w();
      if (layout == Layout::kNDHWC) {
        RowGemm g;
        g.m = xsh.n() * pix;
        g.n = cout;
        g.k = cin;
        g.a = xs->ptr();
        g.lda = cin;
        g.b = ws->ptr();
        g.ldb = cin;
        g.trans_b = true;
        g.d = ys->ptr();
        g.ldd = cout;
        g.bias = bias;
        g.ab_type = g.cd_type = et;
        SEEDVAE_TRY(gemm_->run(g, math_, what));
      } else {
        for (int64_t n = 0; n < xsh.n(); ++n) {
          RowGemm g;
          g.m = cout;
          g.n = pix;
          g.k = cin;
          g.a = ws->ptr();
          g.lda = cin;
          g.b = static_cast<const char*>(xs->ptr()) + n * cin * pix * es;
          g.ldb = pix;
          g.d = static_cast<char*>(ys->ptr()) + n * cout * pix * es;
          g.ldd = pix;
          g.ab_type = g.cd_type = et;
          SEEDVAE_TRY(gemm_->run(g, math_, what));
        }
        if (bias) launch_add_bias(et, layout, ys->ptr(), bias, dims5(out), stream_);
      }
      SEEDVAE_TRY(check_launch(what));
      return y;
    }

    // General 3-D convolution through cuDNN, one sample at a time.
    const void* xin = xs->ptr();
    Dims5 xd = dims5(xsh);
    BlockPtr padded;
    int ph = 0, pw = 0;
    if (p.pad_top == p.pad_bottom && p.pad_left == p.pad_right) {
      ph = p.pad_top;
      pw = p.pad_left;
    } else {
      // cuDNN pads symmetrically; asymmetric padding (Downsample3D's (0, 1, 0, 1)) is explicit.
      PadArgs pa;
      pa.type = et;
      pa.layout = layout;
      pa.in = xd;
      pa.top = p.pad_top;
      pa.bottom = p.pad_bottom;
      pa.left = p.pad_left;
      pa.right = p.pad_right;
      pa.x = xin;
      xd.h = hp;
      xd.w = wp;
      SEEDVAE_ASSIGN_OR_RETURN(padded, alloc_->allocate(xd.numel() * es, what + " padded input"));
      pa.y = padded->ptr;
      launch_pad_hw(pa, stream_);
      SEEDVAE_TRY(check_launch(what + " padding"));
      xin = padded->ptr;
    }
    const int64_t cin = xsh.c(), cout = wsh[0];
    const int64_t taps = wsh[2] * wsh[3] * wsh[4];
    ConvProblem cp;
    cp.type = et;
    cp.layout = layout;
    cp.math = math_;
    cp.cin = cin;
    cp.t = xd.t;
    cp.h = xd.h;
    cp.w = xd.w;
    cp.cout = cout;
    cp.kt = wsh[2];
    cp.kh = wsh[3];
    cp.kw = wsh[4];
    cp.st = p.stride_t;
    cp.sh = p.stride_h;
    cp.sw = p.stride_w;
    cp.ph = ph;
    cp.pw = pw;
    const int64_t in_sample = cin * xd.t * xd.h * xd.w;
    const int64_t out_pix = out.t() * out.h() * out.w();
    const bool last = layout == Layout::kNDHWC;
    const bool unit_stride = p.stride_t == 1 && p.stride_h == 1 && p.stride_w == 1;
    for (int64_t n = 0; n < xsh.n(); ++n) {
      const void* xn = static_cast<const char*>(xin) + n * in_sample * es;
      void* yn = static_cast<char*>(ys->ptr()) + n * cout * out_pix * es;
      if (last && cin < 8 && cin * taps <= 256) {
        SEEDVAE_TRY(conv_few_inputs(cp, xn, ws->ptr(), bias, yn, what));
      } else if (last && cout < 8 && unit_stride && tap_gather_supported(static_cast<int>(wsh[2]), cout)) {
        SEEDVAE_TRY(conv_few_outputs(cp, xn, ws->ptr(), bias, yn, what));
      } else {
        SEEDVAE_TRY(conv_cudnn(cp, xn, ws->ptr(), yn, what));
        if (bias && !opt_.fuse_bias) {
          Dims5 od = dims5(out);
          od.n = 1;
          launch_add_bias(et, layout, yn, bias, od, stream_);
        }
      }
    }
    if (bias && opt_.fuse_bias && !(last && cin < 8 && cin * taps <= 256) &&
        !(last && cout < 8 && unit_stride && tap_gather_supported(static_cast<int>(wsh[2]), cout))) {
      ys->pending_bias = bias;
      ys->bias_owner = b.storage;
    }
    SEEDVAE_TRY(check_launch(what));
    return y;
  }

  // cuDNN, with channels-last channel counts padded to multiples of 8 (zero channels and zero
  // filters) and, when cuDNN has no channels-last algorithm (large fp32 problems), a detour
  // through NCDHW.
  Status conv_cudnn(const ConvProblem& p, const void* x, const void* w, void* y,
                    const std::string& what) {
    const ElemType et = p.type;
    const int64_t es = elem_size(et);
    const int64_t taps = p.kt * p.kh * p.kw;
    const int64_t in_pix = p.t * p.h * p.w, out_pix = p.out_t() * p.out_h() * p.out_w();
    if (p.layout == Layout::kNCDHW) return conv_->run(p, x, w, y, what);
    const bool pad_c = p.cin % 8 != 0 || p.cout % 8 != 0;
    ConvProblem q = p;
    BlockPtr wpad, xpad, ypad;
    const void* xw = x;
    const void* ww = w;
    void* yw = y;
    if (pad_c) {
      q.cin = (p.cin + 7) / 8 * 8;
      q.cout = (p.cout + 7) / 8 * 8;
      SEEDVAE_ASSIGN_OR_RETURN(wpad, alloc_->allocate(q.cout * taps * q.cin * es,
                                                      what + " channel-padded weight"));
      SEEDVAE_CUDA_TRY(cudaMemsetAsync(wpad->ptr, 0, q.cout * taps * q.cin * es, stream_), what);
      launch_pad_channels(et, w, p.cin, wpad->ptr, q.cin, p.cout * taps, stream_);
      ww = wpad->ptr;
      SEEDVAE_ASSIGN_OR_RETURN(xpad, alloc_->allocate(in_pix * q.cin * es,
                                                      what + " channel-padded input"));
      launch_pad_channels(et, x, p.cin, xpad->ptr, q.cin, in_pix, stream_);
      xw = xpad->ptr;
      if (q.cout != p.cout) {
        SEEDVAE_ASSIGN_OR_RETURN(ypad, alloc_->allocate(out_pix * q.cout * es,
                                                        what + " channel-padded output"));
        yw = ypad->ptr;
      }
    }
    Status st = conv_->run(q, xw, ww, yw, what);
    if (st.code() == StatusCode::kUnsupported) {
      // NCDHW detour: transpose input and weight, convolve, transpose the output back.
      BlockPtr xt, wt, yt;
      SEEDVAE_ASSIGN_OR_RETURN(xt, alloc_->allocate(in_pix * q.cin * es, what + " NCDHW input"));
      SEEDVAE_ASSIGN_OR_RETURN(wt, alloc_->allocate(q.cout * taps * q.cin * es, what + " KCRS weight"));
      SEEDVAE_ASSIGN_OR_RETURN(yt, alloc_->allocate(out_pix * q.cout * es, what + " NCDHW output"));
      launch_transpose(et, xw, et, xt->ptr, 1, q.cin, in_pix, false, stream_);
      launch_transpose(et, ww, et, wt->ptr, q.cout, q.cin, taps, false, stream_);
      ConvProblem r = q;
      r.layout = Layout::kNCDHW;
      st = conv_->run(r, xt->ptr, wt->ptr, yt->ptr, what + " (NCDHW detour)");
      if (st.is_ok()) launch_transpose(et, yt->ptr, et, yw, 1, q.cout, out_pix, true, stream_);
    }
    SEEDVAE_TRY(st);
    if (ypad) launch_pad_channels(et, ypad->ptr, q.cout, y, p.cout, out_pix, stream_);
    return Status::ok();
  }

  // Few input channels (encoder conv_in): im2col with K = taps * Cin padded to a multiple of 8,
  // then one product per group of output frames with the bias in the GEMM epilogue.
  Status conv_few_inputs(const ConvProblem& p, const void* x, const void* w, const float* bias,
                         void* y, const std::string& what) {
    const ElemType et = p.type;
    const int64_t es = elem_size(et);
    const int64_t kreal = p.kt * p.kh * p.kw * p.cin;
    const int64_t kp = (kreal + 31) / 32 * 32;  // also a multiple of the 16-byte vector width
    const int64_t ho = p.out_h(), wo = p.out_w(), to = p.out_t();
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr w2, alloc_->allocate(p.cout * kp * es, what + " im2col weight"));
    launch_pad_channels(et, w, kreal, w2->ptr, kp, p.cout, stream_);
    const int64_t frame_bytes = ho * wo * kp * es;
    const int64_t group = std::clamp<int64_t>((int64_t{256} << 20) / std::max<int64_t>(1, frame_bytes), 1, to);
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr col, alloc_->allocate(group * frame_bytes, what + " im2col"));
    for (int64_t t0 = 0; t0 < to; t0 += group) {
      const int64_t g = std::min(group, to - t0);
      Im2colArgs a;
      a.type = et;
      a.x = x;
      a.h = p.h;
      a.w = p.w;
      a.cin = p.cin;
      a.kt = static_cast<int>(p.kt);
      a.kh = static_cast<int>(p.kh);
      a.kw = static_cast<int>(p.kw);
      a.st = p.st;
      a.sh = p.sh;
      a.sw = p.sw;
      a.ph = p.ph;
      a.pw = p.pw;
      a.ho = ho;
      a.wo = wo;
      a.t0 = t0;
      a.frames = g;
      a.kp = kp;
      a.col = col->ptr;
      launch_im2col(a, stream_);
      RowGemm gm;
      gm.m = g * ho * wo;
      gm.n = p.cout;
      gm.k = kp;
      gm.a = col->ptr;
      gm.lda = kp;
      gm.b = w2->ptr;
      gm.ldb = kp;
      gm.trans_b = true;
      gm.d = static_cast<char*>(y) + t0 * ho * wo * p.cout * es;
      gm.ldd = p.cout;
      gm.bias = bias;
      gm.ab_type = gm.cd_type = et;
      SEEDVAE_TRY(gemm_->run(gm, math_, what + " (im2col product)"));
    }
    return check_launch(what);
  }

  // Few output channels (decoder conv_out): per input frame, P[pixels, taps * Cout] = x W^T
  // (fp32), then every output pixel gathers its taps from the neighbouring rows into an fp32
  // accumulator; bias and conversion at the end. Stride 1, symmetric padding.
  Status conv_few_outputs(const ConvProblem& p, const void* x, const void* w, const float* bias,
                          void* y, const std::string& what) {
    const ElemType et = p.type;
    const int64_t es = elem_size(et);
    const int64_t taps = p.kt * p.kh * p.kw;
    const int64_t j = taps * p.cout;
    const int64_t ho = p.out_h(), wo = p.out_w(), to = p.out_t();
    const int64_t hw = p.h * p.w;
    // weight rows reordered from KRSC (co, kt, kh, kw) to (kh, kw, kt, co), padded with zero rows
    // to jp (a multiple of 16) so the product has well-shaped tiles
    const int64_t jp = (j + 15) / 16 * 16;
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr wt, alloc_->allocate(jp * p.cin * es, what + " tap weight"));
    SEEDVAE_CUDA_TRY(cudaMemsetAsync(wt->ptr, 0, jp * p.cin * es, stream_), what);
    const int64_t sp = p.kh * p.kw;  // spatial taps
    for (int64_t co = 0; co < p.cout; ++co) {
      for (int64_t kti = 0; kti < p.kt; ++kti) {
        // source rows (co, kti, s) for s < sp are contiguous; destination row (s * kt + kti) * cout + co
        SEEDVAE_CUDA_TRY(cudaMemcpy2DAsync(
                             static_cast<char*>(wt->ptr) + (kti * p.cout + co) * p.cin * es,
                             p.kt * p.cout * p.cin * es,
                             static_cast<const char*>(w) + ((co * p.kt + kti) * sp) * p.cin * es,
                             p.cin * es, p.cin * es, sp, cudaMemcpyDeviceToDevice, stream_),
                         what);
      }
    }
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr acc, alloc_->allocate(to * ho * wo * p.cout * 4, what + " accumulator"));
    SEEDVAE_CUDA_TRY(cudaMemsetAsync(acc->ptr, 0, to * ho * wo * p.cout * 4, stream_), what);
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr prod, alloc_->allocate(hw * jp * 4, what + " tap products"));
    for (int64_t f = 0; f < p.t; ++f) {
      RowGemm gm;
      gm.m = hw;
      gm.n = jp;
      gm.k = p.cin;
      gm.a = static_cast<const char*>(x) + f * hw * p.cin * es;
      gm.lda = p.cin;
      gm.b = wt->ptr;
      gm.ldb = p.cin;
      gm.trans_b = true;
      gm.d = prod->ptr;
      gm.ldd = jp;
      gm.ab_type = et;
      gm.cd_type = ElemType::kF32;
      SEEDVAE_TRY(gemm_->run(gm, math_, what + " (tap products)"));
      TapGatherArgs a;
      a.y = static_cast<const float*>(prod->ptr);
      a.ldy = jp;
      a.acc = static_cast<float*>(acc->ptr);
      a.frame = f;
      a.t_out = to;
      a.h = p.h;
      a.w = p.w;
      a.ho = ho;
      a.wo = wo;
      a.cout = p.cout;
      a.kt = static_cast<int>(p.kt);
      a.kh = static_cast<int>(p.kh);
      a.kw = static_cast<int>(p.kw);
      a.ph = p.ph;
      a.pw = p.pw;
      launch_tap_gather(a, stream_);
    }
    launch_bias_convert(static_cast<const float*>(acc->ptr), bias, to * ho * wo, p.cout, et, y, stream_);
    return check_launch(what);
  }

  Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) override {
    constexpr std::string_view op = "causal_pad";
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
    const bool has_memory = memory != nullptr && memory->defined();
    if (!has_memory) {
      if (frames < 0) return invalid_argument("causal_pad: negative frame count");
      if (frames > 0 && x.shape.t() < 1) {
        return invalid_argument("causal_pad: input " + str(x.shape) + " has no frame to replicate");
      }
    }
    CudaStorage* ms = nullptr;
    if (has_memory) {
      SEEDVAE_ASSIGN_OR_RETURN(ms, activation_of(*memory, op, "memory"));
      const Shape& a = memory->shape;
      const Shape& b = x.shape;
      if (a.n() != b.n() || a.c() != b.c() || a.h() != b.h() || a.w() != b.w()) {
        return invalid_argument("causal_pad: memory " + str(a) + " and input " + str(b) +
                                " differ outside the frame axis");
      }
    }
    const int64_t k = has_memory ? memory->shape.t() : frames;
    if (k == 0) return x;
    Shape out_shape = x.shape;
    out_shape[2] = x.shape.t() + k;
    const std::string what = "causal_pad " + str(x.shape) + " + " + std::to_string(k) + " frames";
    const int64_t frame_bytes = x.shape.c() * x.shape.h() * x.shape.w() * dtype_size(act_);
    // In place: write the context into the spare frames in front of x (same block, no copy of x).
    if (opt_.buffer_reuse && xs->layout == Layout::kNDHWC && x.shape.n() == 1 &&
        xs->head_frames >= k && !xs->block->headroom_claimed) {
      xs->block->headroom_claimed = true;
      auto view = std::make_shared<CudaStorage>();
      view->block = xs->block;
      view->offset = xs->offset - static_cast<size_t>(k * frame_bytes);
      view->kind = Kind::kActivation;
      view->layout = Layout::kNDHWC;
      view->head_frames = xs->head_frames - k;
      char* dst = static_cast<char*>(view->ptr());
      if (has_memory) {
        SEEDVAE_CUDA_TRY(cudaMemcpyAsync(dst, ms->ptr(), k * frame_bytes, cudaMemcpyDeviceToDevice,
                                         stream_),
                         what);
      } else {
        for (int64_t f = 0; f < k; ++f) {
          SEEDVAE_CUDA_TRY(cudaMemcpyAsync(dst + f * frame_bytes, xs->ptr(), frame_bytes,
                                           cudaMemcpyDeviceToDevice, stream_),
                           what);
        }
      }
      Tensor t;
      t.storage = std::move(view);
      t.shape = out_shape;
      t.dtype = act_;
      return t;
    }
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out_shape, 0, what));
    if (has_memory) {
      SEEDVAE_TRY(copy_frames(y, 0, *memory, 0, k, what));
    } else {
      for (int64_t f = 0; f < k; ++f) SEEDVAE_TRY(copy_frames(y, f, x, 0, 1, what));
    }
    SEEDVAE_TRY(copy_frames(y, k, x, 0, x.shape.t(), what));
    return y;
  }

  Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) override {
    constexpr std::string_view op = "slice_frames";
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_TRY(activation_of(x, op, "input").take_status());
    if (begin < 0 || end < begin || end > x.shape.t()) {
      return invalid_argument("slice_frames: range [" + std::to_string(begin) + ", " +
                              std::to_string(end) + ") is outside the frames of " + str(x.shape));
    }
    Shape out_shape = x.shape;
    out_shape[2] = end - begin;
    const std::string what = "slice_frames " + str(x.shape);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out_shape, 0, what));
    SEEDVAE_TRY(copy_frames(y, 0, x, begin, end - begin, what));
    return y;
  }

  // Causal state not read before the next chunk: with offloading on, large slices go to pinned
  // host memory and come back (prefetched in hint order) when the next chunk needs them.
  Status offload_hint(const Tensor& t) override {
    if (!opt_.offload_state) return Status::ok();
    SEEDVAE_TRY(check_thread("offload_hint"));
    const auto* st = dynamic_cast<const CudaStorage*>(t.storage.get());
    if (st && st->host) return Status::ok();  // already on the host
    SEEDVAE_TRY(activation_of(t, "offload_hint", "state").take_status());
    const int64_t bytes = t.shape.numel() * dtype_size(t.dtype);
    if (bytes <= 0 || bytes < opt_.offload_min_bytes) return Status::ok();
    return offload(t, "offload_hint " + str(t.shape));
  }

  Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) override {
    constexpr std::string_view op = "concat_frames";
    SEEDVAE_TRY(check_thread(op));
    // Two outputs of one convolution (VaeModel's lean convolutions) carry the same pending bias:
    // the concatenation carries it on, so its consumer still adds it in fp32 (fused bias).
    const auto* pa = dynamic_cast<const CudaStorage*>(a.storage.get());
    const auto* pb = dynamic_cast<const CudaStorage*>(b.storage.get());
    const bool same_bias = pa && pb && pa->pending_bias && pa->pending_bias == pb->pending_bias;
    const float* bias = same_bias ? pa->pending_bias : nullptr;
    std::shared_ptr<Storage> bias_owner = same_bias ? pa->bias_owner : nullptr;
    SEEDVAE_TRY(activation_of(a, op, "first", same_bias).take_status());
    SEEDVAE_TRY(activation_of(b, op, "second", same_bias).take_status());
    const Shape& sa = a.shape;
    const Shape& sb = b.shape;
    if (sa.n() != sb.n() || sa.c() != sb.c() || sa.h() != sb.h() || sa.w() != sb.w()) {
      return invalid_argument("concat_frames: " + str(sa) + " and " + str(sb) +
                              " differ outside the frame axis");
    }
    Shape out_shape = sa;
    out_shape[2] = sa.t() + sb.t();
    const std::string what = "concat_frames " + str(sa) + " + " + str(sb);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out_shape, 0, what));
    SEEDVAE_TRY(copy_frames(y, 0, a, 0, sa.t(), what));
    SEEDVAE_TRY(copy_frames(y, sa.t(), b, 0, sb.t(), what));
    if (same_bias) {
      storage(y)->pending_bias = bias;
      storage(y)->bias_owner = std::move(bias_owner);
    }
    return y;
  }

  // The checked arguments of a GroupNorm (group_norm, group_norm_inplace).
  struct NormArgs {
    CudaStorage* x = nullptr;
    const float* gamma = nullptr;
    const float* beta = nullptr;
  };
  Result<NormArgs> norm_args(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                             const GroupNormParams& p, std::string_view op) {
    SEEDVAE_TRY(check_thread(op));
    NormArgs a;
    SEEDVAE_ASSIGN_OR_RETURN(a.x, activation_of(x, op, "input", true));
    const int64_t c = x.shape.c();
    if (p.groups < 1 || c % p.groups != 0) {
      return invalid_argument(std::string(op) + ": " + std::to_string(c) + " channels of " +
                              str(x.shape) + " are not divisible into " + std::to_string(p.groups) +
                              " groups");
    }
    if (!(p.eps >= 0.f)) return invalid_argument(std::string(op) + ": eps must be >= 0");
    if (gamma.defined()) {
      SEEDVAE_ASSIGN_OR_RETURN(a.gamma, vector_of(gamma, c, op, "gamma"));
    }
    if (beta.defined()) {
      SEEDVAE_ASSIGN_OR_RETURN(a.beta, vector_of(beta, c, op, "beta"));
    }
    return a;
  }

  Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override {
    SEEDVAE_ASSIGN_OR_RETURN(const NormArgs a, norm_args(x, gamma, beta, p, "group_norm"));
    const std::string what = "group_norm " + str(x.shape);
    // GroupNorm+SiLU feeds a causal convolution in the model: give it spare frames in front.
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(x.shape, p.silu ? std::max(p.context_frames, 0) : 0,
                                                      what + " output"));
    if (x.shape.numel() == 0) return y;
    SEEDVAE_TRY(run_group_norm(a.x->ptr(), storage(y)->ptr(), a.x->layout, dims5(x.shape), a.gamma,
                               a.beta, p.groups, p.eps, p.silu, what, a.x->pending_bias));
    return y;
  }

  Status group_norm_inplace(Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override {
    SEEDVAE_ASSIGN_OR_RETURN(const NormArgs a, norm_args(x, gamma, beta, p, "group_norm_inplace"));
    CudaStorage* xs = a.x;
    if (x.shape.numel() == 0) return Status::ok();
    // the kernels read every element before writing it (statistics and coefficients first, then
    // one read and one write per element by the same thread), so the output may be the input
    SEEDVAE_TRY(run_group_norm(xs->ptr(), xs->ptr(), xs->layout, dims5(x.shape), a.gamma, a.beta,
                               p.groups, p.eps, p.silu, "group_norm_inplace " + str(x.shape),
                               xs->pending_bias));
    xs->pending_bias = nullptr;  // folded into the normalisation
    xs->bias_owner.reset();
    return Status::ok();
  }

  Status add_inplace(Tensor& acc, const Tensor& x) override {
    constexpr std::string_view op = "add_inplace";
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * as, storage_of(acc, op, "accumulator", true));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, storage_of(x, op, "addend", true));
    if (acc.shape != x.shape) {
      return invalid_argument("add_inplace: accumulator " + str(acc.shape) + " and addend " +
                              str(x.shape) + " differ in shape");
    }
    if (as->kind != xs->kind || as->layout != xs->layout || acc.dtype != x.dtype) {
      return invalid_argument("add_inplace: accumulator and addend differ in layout or dtype");
    }
    if (as->pending_bias || xs->pending_bias) {
      if (acc.shape.rank() != 5) return internal_error("add_inplace: pending bias on a non-activation");
      // x's pending bias stays pending for x's other consumers (it is only read here)
      launch_add_biased(elem_of(acc.dtype), as->layout, as->ptr(), as->pending_bias, xs->ptr(),
                        xs->pending_bias, dims5(acc.shape), stream_);
      as->pending_bias = nullptr;
      as->bias_owner.reset();
    } else {
      launch_add_inplace(elem_of(acc.dtype), as->ptr(), xs->ptr(), acc.shape.numel(), stream_);
    }
    return check_launch("add_inplace " + str(acc.shape));
  }

  Result<Tensor> depth_to_space(const Tensor& x, int temporal_factor, bool drop_frame_1,
                                int context_frames = 2) override {
    constexpr std::string_view op = "depth_to_space";
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
    const int z = temporal_factor;
    const Shape& s = x.shape;
    SEEDVAE_ASSIGN_OR_RETURN(const Shape out_shape, depth_to_space_shape(s, z, drop_frame_1));
    const std::string what = "depth_to_space " + str(s);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(out_shape, std::max(context_frames, 0),
                                                      what + " output"));
    DepthToSpaceArgs a;
    a.type = elem_of(act_);
    a.layout = xs->layout;
    a.in = dims5(s);
    a.z = z;
    a.drop_frame_1 = drop_frame_1;
    a.x = xs->ptr();
    a.y = storage(y)->ptr();
    launch_depth_to_space(a, stream_);
    SEEDVAE_TRY(check_launch(what));
    return y;
  }

  Result<Tensor> attention(const Tensor& x, const AttentionWeights& w) override {
    constexpr std::string_view op = "attention";
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * xs, activation_of(x, op, "input"));
    const int64_t c = x.shape.c();
    if (c < 1 || w.groups < 1 || c % w.groups != 0) {
      return invalid_argument("attention: " + std::to_string(c) + " channels of " + str(x.shape) +
                              " are not divisible into " + std::to_string(w.groups) + " groups");
    }
    if (!(w.eps >= 0.f)) return invalid_argument("attention: eps must be >= 0");
    const Shape mat{c, c};
    SEEDVAE_ASSIGN_OR_RETURN(const float* ng, vector_of(w.norm_weight, c, op, "norm weight"));
    SEEDVAE_ASSIGN_OR_RETURN(const float* nb, vector_of(w.norm_bias, c, op, "norm bias"));
    SEEDVAE_ASSIGN_OR_RETURN(const void* wq, matrix_of(w.wq, mat, op, "to_q weight"));
    SEEDVAE_ASSIGN_OR_RETURN(const float* bq, vector_of(w.bq, c, op, "to_q bias"));
    SEEDVAE_ASSIGN_OR_RETURN(const void* wk, matrix_of(w.wk, mat, op, "to_k weight"));
    SEEDVAE_ASSIGN_OR_RETURN(const float* bk, vector_of(w.bk, c, op, "to_k bias"));
    SEEDVAE_ASSIGN_OR_RETURN(const void* wv, matrix_of(w.wv, mat, op, "to_v weight"));
    SEEDVAE_ASSIGN_OR_RETURN(const float* bv, vector_of(w.bv, c, op, "to_v bias"));
    SEEDVAE_ASSIGN_OR_RETURN(const void* wo, matrix_of(w.wo, mat, op, "to_out weight"));
    SEEDVAE_ASSIGN_OR_RETURN(const float* bo, vector_of(w.bo, c, op, "to_out bias"));
    const std::string what = "attention " + str(x.shape);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, new_activation(x.shape, 0, what + " output"));
    if (x.shape.numel() == 0) return y;

    const Shape& s = x.shape;
    const int64_t tokens = s.h() * s.w();
    const int64_t frames = s.n() * s.t();
    const int64_t rows = frames * tokens;
    const int64_t es = dtype_size(act_);
    const ElemType et = elem_of(act_);
    const int64_t mat_bytes = rows * c * es;
    // Token-major view of x: [frames * tokens, C].
    const void* xt = xs->ptr();
    BlockPtr xt_buf;
    if (xs->layout == Layout::kNCDHW) {
      SEEDVAE_ASSIGN_OR_RETURN(xt_buf, alloc_->allocate(mat_bytes, what + " token-major input"));
      launch_transpose(et, xs->ptr(), et, xt_buf->ptr, s.n(), c, s.t() * tokens, true, stream_);
      xt = xt_buf->ptr;
    }
    // GroupNorm (no SiLU) in token-major layout.
    BlockPtr normed;
    SEEDVAE_ASSIGN_OR_RETURN(normed, alloc_->allocate(mat_bytes, what + " GroupNorm output"));
    SEEDVAE_TRY(run_group_norm(xt, normed->ptr, Layout::kNDHWC, dims5(s), ng, nb, w.groups, w.eps,
                               false, what + " GroupNorm"));
    // q, k, v = GN(x) W^T + b.
    BlockPtr qb, kb, vb;
    SEEDVAE_ASSIGN_OR_RETURN(qb, alloc_->allocate(mat_bytes, what + " q"));
    SEEDVAE_ASSIGN_OR_RETURN(kb, alloc_->allocate(mat_bytes, what + " k"));
    SEEDVAE_ASSIGN_OR_RETURN(vb, alloc_->allocate(mat_bytes, what + " v"));
    const std::pair<const void*, const float*> proj[3] = {{wq, bq}, {wk, bk}, {wv, bv}};
    void* outs[3] = {qb->ptr, kb->ptr, vb->ptr};
    for (int i = 0; i < 3; ++i) {
      RowGemm g;
      g.m = rows;
      g.n = c;
      g.k = c;
      g.a = normed->ptr;
      g.lda = c;
      g.b = proj[i].first;
      g.ldb = c;
      g.trans_b = true;
      g.d = outs[i];
      g.ldd = c;
      g.bias = proj[i].second;
      g.ab_type = g.cd_type = et;
      SEEDVAE_TRY(gemm_->run(g, math_, what + (i == 0 ? " to_q" : i == 1 ? " to_k" : " to_v")));
    }
    normed.reset();
    BlockPtr ab;  // attention output [rows, C]
    SEEDVAE_ASSIGN_OR_RETURN(ab, alloc_->allocate(mat_bytes, what + " softmax(q k^T) v"));
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c)));
    FlashArgs fa;
    fa.type = et;
    fa.q = qb->ptr;
    fa.k = kb->ptr;
    fa.v = vb->ptr;
    fa.o = ab->ptr;
    fa.frames = frames;
    fa.tokens = tokens;
    fa.dim = c;
    fa.scale = scale;
    const FlashKernel fk = opt_.fused_attention ? choose_flash_kernel(fa, smem_optin_, cc_)
                                                : FlashKernel::kNone;
    if (fk != FlashKernel::kNone) {
      launch_flash_attention(fa, fk, stream_);
      SEEDVAE_TRY(check_launch(what + " fused kernel"));
      ++fused_calls_;
      attention_kernel_ = fk == FlashKernel::kMma ? "mma" : "simt";
    } else {
      SEEDVAE_TRY(materialised_attention(qb->ptr, kb->ptr, vb->ptr, ab->ptr, frames, tokens, c,
                                         scale, what));
      ++materialised_calls_;
      attention_kernel_ = "materialised";
    }
    qb.reset();
    kb.reset();
    vb.reset();
    // y = a Wo^T + bo + x (residual through cuBLASLt's C operand).
    BlockPtr yt_buf;
    void* yt = storage(y)->ptr();
    if (xs->layout == Layout::kNCDHW) {
      SEEDVAE_ASSIGN_OR_RETURN(yt_buf, alloc_->allocate(mat_bytes, what + " token-major output"));
      yt = yt_buf->ptr;
    }
    RowGemm g;
    g.m = rows;
    g.n = c;
    g.k = c;
    g.a = ab->ptr;
    g.lda = c;
    g.b = wo;
    g.ldb = c;
    g.trans_b = true;
    g.c = xt;
    g.ldc = c;
    g.beta = 1.f;
    g.d = yt;
    g.ldd = c;
    g.bias = bo;
    g.ab_type = g.cd_type = et;
    SEEDVAE_TRY(gemm_->run(g, math_, what + " to_out + residual"));
    if (xs->layout == Layout::kNCDHW) {
      launch_transpose(et, yt, et, storage(y)->ptr(), s.n(), c, s.t() * tokens, false, stream_);
    }
    SEEDVAE_TRY(check_launch(what));
    return y;
  }

  Status copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src, int64_t src_frame,
                          int64_t count) override {
    constexpr std::string_view op = "copy_frames_into";
    SEEDVAE_TRY(check_thread(op));
    SEEDVAE_TRY(check_frame_copy(dst.shape, dst_frame, src.shape, src_frame, count));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * ds, activation_of(dst, op, "destination"));
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * ss, activation_of(src, op, "source"));
    if (ds->layout != ss->layout) {
      return invalid_argument("copy_frames_into: source and destination differ in layout");
    }
    return copy_frames(dst, dst_frame, src, src_frame, count,
                       "copy_frames_into " + str(src.shape) + " -> " + str(dst.shape));
  }

  // ---- CUDA graphs ---------------------------------------------------------------------------
  // A capture records the compute stream's work (relaxed mode: the captures' pool may still
  // cudaMalloc). Everything a chunk does is on that stream; the ops never synchronise.

  bool graphs_enabled() const override { return opt_.cuda_graphs; }

  Status begin_capture() override {
    SEEDVAE_TRY(check_thread("begin_capture"));
    if (!opt_.cuda_graphs) return unsupported("CUDA graphs are off (--cuda-graphs)");
    if (capturing_) return internal_error("begin_capture: a capture is already running");
    // The eager pool's idle blocks go back to the driver first (this waits for queued work), so
    // the captures' pool reuses that memory instead of adding to it.
    SEEDVAE_CUDA_TRY(cudaStreamSynchronize(stream_), "begin_capture");
    alloc_->release_cached();
    cudaGetLastError();
    SEEDVAE_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed),
                     "cudaStreamBeginCapture");
    alloc_->begin_graph_pool();
    capturing_ = true;
    return Status::ok();
  }

  Result<int64_t> end_capture(bool keep) override {
    SEEDVAE_TRY(check_thread("end_capture"));
    if (!capturing_) return internal_error("end_capture without begin_capture");
    capturing_ = false;
    const int64_t eager_frees = alloc_->end_graph_pool();
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    cudaGetLastError();  // a capture invalidated by an illegal call reports it here
    std::string why;
    if (ended != cudaSuccess || graph == nullptr) {
      why = std::string("the capture failed (") + cudaGetErrorString(ended) + ")";
    } else if (!keep) {
      why = "the recorded chunk failed";
    } else if (eager_frees > 0) {
      why = "the chunk freed " + std::to_string(eager_frees) +
            " blocks allocated outside the capture, which every replay would write again";
    }
    cudaGraphExec_t exec = nullptr;
    if (why.empty()) {
      const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
      if (inst != cudaSuccess) {
        cudaGetLastError();
        exec = nullptr;
        why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(inst);
      }
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!why.empty()) {
      ++graphs_discarded_;
      graph_discard_reason_ = why;
      if (graphs_.empty()) alloc_->release_graph_pool();
      return unsupported("CUDA graph discarded: " + why);
    }
    const int64_t id = next_graph_id_++;
    graphs_.emplace(id, exec);
    ++graphs_captured_;
    return id;
  }

  Status launch_graph(int64_t id) override {
    SEEDVAE_TRY(check_thread("launch_graph"));
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return internal_error("launch_graph: no graph " + std::to_string(id));
    SEEDVAE_CUDA_TRY(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
    alloc_->note_graph_replay();
    ++graph_launches_;
    return Status::ok();
  }

  void release_graph(int64_t id) override {
    auto it = graphs_.find(id);
    if (it == graphs_.end()) return;
    cudaStreamSynchronize(stream_);  // a launch in flight still uses it
    cudaGraphExecDestroy(it->second);
    graphs_.erase(it);
    // The last graph gone: its pool goes back too (blocks still held by tensors return to the
    // pool when dropped and are released with the allocator).
    if (graphs_.empty() && !capturing_) alloc_->release_graph_pool();
  }

  uintptr_t address_of(const Tensor& t) const override {
    auto* s = dynamic_cast<CudaStorage*>(t.storage.get());
    if (s == nullptr || !s->block) return Backend::address_of(t);
    return reinterpret_cast<uintptr_t>(s->ptr());
  }

  // ---- synchronisation and telemetry -------------------------------------------------------

  Status synchronize() override {
    SEEDVAE_CUDA_TRY(cudaStreamSynchronize(stream_), "synchronize");
    return Status::ok();
  }

  MemoryStats memory_stats() const override {
    MemoryStats m;
    const AllocatorStats a = alloc_->stats();
    m.current_bytes = a.live_bytes;
    m.peak_bytes = a.peak_live_bytes;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      m.device_used_bytes = static_cast<int64_t>(total_b - free_b);
      m.device_total_bytes = static_cast<int64_t>(total_b);
    } else {
      cudaGetLastError();
    }
    return m;
  }

  void reset_peak() override { alloc_->reset_peak(); }

  // Device spans for telemetry: a pair of timing events per open span, recorded on the compute
  // stream, from a pool of at most kMaxOpenDeviceSpans pairs created on first use and reused (no
  // event is created or destroyed per stage). A failure yields -1 and clears the (non-sticky)
  // error, so the next op does not report it; timing never fails a run.
  int64_t begin_device_span() override {
    if (std::this_thread::get_id() != owner_) return -1;
    SpanSlot* slot = nullptr;
    for (SpanSlot& sl : spans_) {
      if (sl.id < 0) {
        slot = &sl;
        break;
      }
    }
    if (slot == nullptr && spans_.size() < static_cast<size_t>(kMaxOpenDeviceSpans)) {
      SpanSlot sl;
      if (cudaEventCreate(&sl.start) != cudaSuccess || cudaEventCreate(&sl.end) != cudaSuccess) {
        if (sl.start) cudaEventDestroy(sl.start);
        cudaGetLastError();
        return -1;
      }
      spans_.push_back(sl);
      slot = &spans_.back();
    }
    if (slot == nullptr) {  // all open: the oldest one expires
      slot = &*std::min_element(spans_.begin(), spans_.end(),
                                [](const SpanSlot& a, const SpanSlot& b) { return a.id < b.id; });
    }
    slot->id = -1;
    if (cudaEventRecord(slot->start, stream_) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    slot->id = next_span_++;
    return slot->id;
  }

  double end_device_span(int64_t span) override {
    if (span < 0 || std::this_thread::get_id() != owner_) return -1;
    for (SpanSlot& sl : spans_) {
      if (sl.id != span) continue;
      sl.id = -1;
      float ms = 0;
      if (cudaEventRecord(sl.end, stream_) == cudaSuccess &&
          cudaEventSynchronize(sl.end) == cudaSuccess &&
          cudaEventElapsedTime(&ms, sl.start, sl.end) == cudaSuccess) {
        return ms;
      }
      cudaGetLastError();
      return -1;
    }
    return -1;  // unknown or expired
  }

 private:
  CudaBackend() = default;

  struct SpanSlot {
    cudaEvent_t start = nullptr, end = nullptr;
    int64_t id = -1;  // the open span's handle, -1 when free
  };

  // ---- host transfers: two pinned staging buffers, DMA of one overlapping the (multi-threaded)
  // host copy of the other. Small transfers go directly (pageable).
  static constexpr size_t kPinnedPiece = size_t{64} << 20;
  static constexpr size_t kDirectBelow = size_t{1} << 20;

  Status ensure_pinned(const std::string& what) {
    for (int i = 0; i < 2; ++i) {
      if (pinned_[i] == nullptr) {
        SEEDVAE_CUDA_TRY(cudaMallocHost(&pinned_[i], kPinnedPiece), what + ": pinned staging buffer");
        SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&pinned_ev_[i], cudaEventDisableTiming), what);
      }
    }
    return Status::ok();
  }

  static void parallel_copy(void* dst, const void* src, size_t bytes) {
    const size_t per = size_t{8} << 20;
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    const size_t k = std::min<size_t>(std::min<size_t>(8, hw), (bytes + per - 1) / per);
    if (k <= 1) {
      std::memcpy(dst, src, bytes);
      return;
    }
    const size_t part = (bytes + k - 1) / k;
    std::vector<std::thread> th;
    th.reserve(k - 1);
    for (size_t i = 1; i < k; ++i) {
      const size_t o = i * part;
      if (o >= bytes) break;
      th.emplace_back([=] { std::memcpy(static_cast<char*>(dst) + o, static_cast<const char*>(src) + o,
                                        std::min(part, bytes - o)); });
    }
    std::memcpy(dst, src, std::min(part, bytes));
    for (auto& t : th) t.join();
  }

  Status copy_to_host(void* dst, const void* src, int64_t bytes_i, const std::string& what) {
    const size_t bytes = static_cast<size_t>(bytes_i);
    if (bytes < kDirectBelow) {
      SEEDVAE_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), what);
      SEEDVAE_CUDA_TRY(cudaStreamSynchronize(stream_), what);
      return Status::ok();
    }
    SEEDVAE_TRY(ensure_pinned(what));
    const size_t pieces = (bytes + kPinnedPiece - 1) / kPinnedPiece;
    auto issue = [&](size_t i) -> Status {
      const size_t o = i * kPinnedPiece, len = std::min(kPinnedPiece, bytes - o);
      SEEDVAE_CUDA_TRY(cudaMemcpyAsync(pinned_[i % 2], static_cast<const char*>(src) + o, len,
                                       cudaMemcpyDeviceToHost, stream_),
                       what);
      SEEDVAE_CUDA_TRY(cudaEventRecord(pinned_ev_[i % 2], stream_), what);
      return Status::ok();
    };
    SEEDVAE_TRY(issue(0));
    for (size_t i = 0; i < pieces; ++i) {
      if (i + 1 < pieces) SEEDVAE_TRY(issue(i + 1));
      SEEDVAE_CUDA_TRY(cudaEventSynchronize(pinned_ev_[i % 2]), what);
      const size_t o = i * kPinnedPiece, len = std::min(kPinnedPiece, bytes - o);
      parallel_copy(static_cast<char*>(dst) + o, pinned_[i % 2], len);
    }
    return Status::ok();
  }

  Status copy_to_device(void* dst, const void* src, int64_t bytes_i, const std::string& what) {
    // Always through the pinned buffers, also small transfers: a pageable copy would have to
    // synchronise the stream (the caller may free `src` on return), which blocks the host until
    // the queued compute is done and defeats async tiles.
    const size_t bytes = static_cast<size_t>(bytes_i);
    SEEDVAE_TRY(ensure_pinned(what));
    const size_t pieces = (bytes + kPinnedPiece - 1) / kPinnedPiece;
    for (size_t i = 0; i < pieces; ++i) {
      const size_t o = i * kPinnedPiece, len = std::min(kPinnedPiece, bytes - o);
      // the DMA that last read this buffer must be done before it is overwritten
      SEEDVAE_CUDA_TRY(cudaEventSynchronize(pinned_ev_[i % 2]), what);
      parallel_copy(pinned_[i % 2], static_cast<const char*>(src) + o, len);
      SEEDVAE_CUDA_TRY(cudaMemcpyAsync(static_cast<char*>(dst) + o, pinned_[i % 2], len,
                                       cudaMemcpyHostToDevice, stream_),
                       what);
      SEEDVAE_CUDA_TRY(cudaEventRecord(pinned_ev_[i % 2], stream_), what);
    }
    return Status::ok();
  }

  Status check_thread(std::string_view op) {
    if (std::this_thread::get_id() != owner_) {
      return internal_error(std::string(op) +
                            ": the CUDA backend was called from a thread that does not own it "
                            "(create it on the thread that runs the engine)");
    }
    if (opt_.offload_state) pump();
    return Status::ok();
  }

  // ---- causal-state offload: slices go to pinned host memory on a copy stream; they come back
  // in the order they left (the model consumes them in that order in the next chunk), prefetched
  // on a second copy stream while at most offload_window_mib of them are on the device.

  Status offload(const Tensor& t, const std::string& what) {
    CudaStorage* st = storage(t);
    const size_t bytes = static_cast<size_t>(t.shape.numel() * dtype_size(t.dtype));
    auto hc = std::make_unique<HostCopy>();
    hc->pool = pinned_pool_;
    SEEDVAE_ASSIGN_OR_RETURN(hc->pinned, pinned_pool_->get(bytes, what + " (offloaded causal state)",
                                                           "run without --offload-state"));
    hc->bytes = bytes;
    cudaEvent_t ready = nullptr, pend = nullptr;
    SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), what);
    SEEDVAE_CUDA_TRY(cudaEventRecord(ready, stream_), what);
    SEEDVAE_CUDA_TRY(cudaStreamWaitEvent(d2h_stream_, ready, 0), what);
    cudaEventDestroy(ready);
    SEEDVAE_CUDA_TRY(cudaMemcpyAsync(hc->pinned, st->ptr(), bytes, cudaMemcpyDeviceToHost, d2h_stream_),
                     what + " offload");
    SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&hc->d2h_done, cudaEventDisableTiming), what);
    SEEDVAE_CUDA_TRY(cudaEventRecord(hc->d2h_done, d2h_stream_), what);
    SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&pend, cudaEventDisableTiming), what);
    SEEDVAE_CUDA_TRY(cudaEventRecord(pend, d2h_stream_), what);
    // Freed in stream order: the block goes back to the allocator now, and whoever reuses it on
    // the compute stream waits for this copy (allocator.h). Holding it until the host saw the copy
    // finish kept a chunk's worth of state alive, since the host runs a chunk ahead.
    if (st->block->free_after != nullptr) cudaEventDestroy(st->block->free_after);
    st->block->free_after = pend;
    st->block = nullptr;
    st->offset = 0;
    st->head_frames = 0;
    st->host = std::move(hc);
    offloaded_.push_back(std::static_pointer_cast<CudaStorage>(t.storage));
    offloaded_bytes_ += static_cast<int64_t>(bytes);
    return Status::ok();
  }

  // Starts (or completes) the copy back; with `wait` the compute stream waits for it.
  Status bring_back(CudaStorage* st, bool wait, const std::string& what) {
    HostCopy* hc = st->host.get();
    if (!st->block) {
      SEEDVAE_ASSIGN_OR_RETURN(st->block, alloc_->allocate(hc->bytes, what + " (causal state back from host)"));
      st->offset = 0;
      cudaEvent_t ready = nullptr;
      SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), what);
      // the block may still be in use by queued compute work: copy only after it
      SEEDVAE_CUDA_TRY(cudaEventRecord(ready, stream_), what);
      SEEDVAE_CUDA_TRY(cudaStreamWaitEvent(h2d_stream_, ready, 0), what);
      cudaEventDestroy(ready);
      SEEDVAE_CUDA_TRY(cudaStreamWaitEvent(h2d_stream_, hc->d2h_done, 0), what);
      SEEDVAE_CUDA_TRY(cudaMemcpyAsync(st->block->ptr, hc->pinned, hc->bytes, cudaMemcpyHostToDevice,
                                       h2d_stream_),
                       what + " prefetch");
      if (!hc->h2d_done) SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&hc->h2d_done, cudaEventDisableTiming), what);
      SEEDVAE_CUDA_TRY(cudaEventRecord(hc->h2d_done, h2d_stream_), what);
      hc->h2d_pending = true;
      prefetched_bytes_ += static_cast<int64_t>(hc->bytes);
      if (wait) ++offload_stalls_;  // needed now, not prefetched in time
    }
    if (wait) {
      if (hc->h2d_pending) SEEDVAE_CUDA_TRY(cudaStreamWaitEvent(stream_, hc->h2d_done, 0), what);
      hc->h2d_pending = false;
      hc->consumed = true;
      prefetch_paused_ = false;
    }
    return Status::ok();
  }

  void pump() {
    while (!offloaded_.empty()) {
      auto sp = offloaded_.front().lock();
      if (sp && sp->host && !sp->host->consumed) break;
      offloaded_.pop_front();
    }
    if (prefetch_paused_) return;  // evicted for room: wait for the next consumption
    struct InPrefetch {  // a prefetch never evicts other prefetched state for its own room
      bool& flag;
      explicit InPrefetch(bool& f) : flag(f) { flag = true; }
      ~InPrefetch() { flag = false; }
    } in_prefetch{in_prefetch_};
    const int64_t window = int64_t{opt_.offload_window_mib} << 20;
    int64_t resident = 0;
    for (auto& wp : offloaded_) {
      auto sp = wp.lock();
      if (!sp || !sp->host || sp->host->consumed) continue;
      const int64_t b = static_cast<int64_t>(sp->host->bytes);
      if (sp->block) {
        resident += b;
        continue;
      }
      if (resident > 0 && resident + b > window) break;  // always at least the next one
      if (!bring_back(sp.get(), false, "prefetch").is_ok()) break;
      resident += b;
    }
  }

  // The allocator's reclaim hook: drops the device copies of causal state prefetched ahead of use
  // (their host copies stay; each comes back when it is read) and pauses prefetching until the
  // model reads the next state. A copy to the device still running finishes before its memory is
  // reused (stream-ordered free with an event on the copy stream). Returns the bytes dropped.
  int64_t evict_prefetched() {
    if (in_prefetch_) return 0;
    int64_t freed = 0;
    for (auto& wp : offloaded_) {
      auto sp = wp.lock();
      if (!sp || !sp->host || sp->host->consumed || !sp->block || sp->block.use_count() != 1) {
        continue;
      }
      cudaEvent_t ev = nullptr;
      if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
          cudaEventRecord(ev, h2d_stream_) != cudaSuccess) {
        cudaGetLastError();
        if (ev != nullptr) cudaEventDestroy(ev);
        ev = nullptr;
        cudaStreamSynchronize(h2d_stream_);  // no event: wait for the copy here
      }
      if (sp->block->free_after != nullptr) cudaEventDestroy(sp->block->free_after);
      sp->block->free_after = ev;
      freed += static_cast<int64_t>(sp->block->bytes);
      sp->block = nullptr;
      sp->offset = 0;
      sp->host->h2d_pending = false;
    }
    if (freed > 0) {
      prefetch_paused_ = true;
      ++prefetch_evictions_;
    }
    return freed;
  }

  static CudaStorage* storage(const Tensor& t) { return static_cast<CudaStorage*>(t.storage.get()); }

  Result<CudaStorage*> storage_of(const Tensor& t, std::string_view op, std::string_view arg,
                                  bool allow_pending_bias = false) {
    if (!t.defined()) {
      return invalid_argument(std::string(op) + ": " + std::string(arg) + " is undefined");
    }
    auto* s = dynamic_cast<CudaStorage*>(t.storage.get());
    if (s == nullptr) {
      return invalid_argument(std::string(op) + ": " + std::string(arg) +
                              " was not created by the CUDA backend");
    }
    if (s->host && (!s->block || s->host->h2d_pending)) {
      SEEDVAE_TRY(bring_back(s, true, std::string(op) + " " + std::string(arg)));
    }
    if (s->pending_bias && !allow_pending_bias) {
      launch_add_bias(elem_of(t.dtype), s->layout, s->ptr(), s->pending_bias, dims5(t.shape), stream_);
      s->pending_bias = nullptr;
      s->bias_owner.reset();
      SEEDVAE_TRY(check_launch(std::string(op) + ": pending bias of " + std::string(arg)));
    }
    return s;
  }

  Result<CudaStorage*> activation_of(const Tensor& t, std::string_view op, std::string_view arg,
                                     bool allow_pending_bias = false) {
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, arg, allow_pending_bias));
    if (s->kind != Kind::kActivation || t.shape.rank() != 5) {
      return invalid_argument(std::string(op) + ": " + std::string(arg) +
                              " must be a 5-D activation [N, C, T, H, W], got " + str(t.shape));
    }
    return s;
  }

  Result<const float*> vector_of(const Tensor& t, int64_t c, std::string_view op,
                                 std::string_view arg) {
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, arg));
    if (s->kind != Kind::kVector || t.shape != Shape{c}) {
      return invalid_argument(std::string(op) + ": " + std::string(arg) + " must be a [" +
                              std::to_string(c) + "] parameter, got " + str(t.shape));
    }
    return static_cast<const float*>(s->ptr());
  }

  Result<const void*> matrix_of(const Tensor& t, const Shape& shape, std::string_view op,
                                std::string_view arg) {
    SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, arg));
    if (s->kind != Kind::kMatrix || t.shape != shape) {
      return invalid_argument(std::string(op) + ": " + std::string(arg) + " must be a " +
                              str(shape) + " weight, got " + str(t.shape));
    }
    return static_cast<const void*>(s->ptr());
  }

  // New activation in the backend's layout and dtype. `head` spare frames are reserved in front
  // when buffer reuse applies (NDHWC, N = 1).
  Result<Tensor> new_activation(const Shape& shape, int64_t head, const std::string& what) {
    int64_t n = 0;
    if (shape.rank() != 5 || !shape.checked_numel(&n) || n > (int64_t{1} << 50)) {
      return out_of_memory(what + ": tensor " + str(shape) + " is too large to allocate");
    }
    const bool last = opt_.channels_last;
    if (!(opt_.buffer_reuse && last && shape[0] == 1)) head = 0;
    const int64_t frame = shape[1] * shape[3] * shape[4];
    const int64_t bytes = (n + head * frame) * dtype_size(act_);
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr blk,
                             alloc_->allocate(static_cast<size_t>(bytes),
                                              what + " " + str(shape) + " " +
                                                  std::string(dtype_name(act_))));
    auto st = std::make_shared<CudaStorage>();
    st->block = std::move(blk);
    st->offset = static_cast<size_t>(head * frame * dtype_size(act_));
    st->kind = Kind::kActivation;
    st->layout = last ? Layout::kNDHWC : Layout::kNCDHW;
    st->head_frames = head;
    Tensor t;
    t.storage = std::move(st);
    t.shape = shape;
    t.dtype = act_;
    return t;
  }

  Result<Tensor> new_plain(const Shape& shape, DType dt, Kind kind, Layout layout,
                           const std::string& what) {
    int64_t n = 0;
    if (!shape.checked_numel(&n) || n > (int64_t{1} << 50)) {
      return out_of_memory(what + ": tensor " + str(shape) + " is too large to allocate");
    }
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr blk,
                             alloc_->allocate(static_cast<size_t>(n * dtype_size(dt)), what));
    auto st = std::make_shared<CudaStorage>();
    st->block = std::move(blk);
    st->kind = kind;
    st->layout = layout;
    Tensor t;
    t.storage = std::move(st);
    t.shape = shape;
    t.dtype = dt;
    return t;
  }

  Result<Tensor> upload_impl(const HostTensor& host_in, bool weight, const std::string& what) {
    int64_t n = 0;
    if (!host_in.shape().checked_numel(&n) ||
        n * dtype_size(host_in.dtype()) != host_in.nbytes()) {
      return invalid_argument(what + ": host tensor " + str(host_in.shape()) + " holds " +
                              std::to_string(host_in.nbytes()) + " bytes of " +
                              std::string(dtype_name(host_in.dtype())));
    }
    HostTensor widened;
    const HostTensor* host = &host_in;
    if (host_in.dtype() == DType::kF64) {
      widened = host_in.to(DType::kF32);
      host = &widened;
    }
    const Shape& shape = host->shape();
    const ElemType src_t = elem_of(host->dtype());
    const bool last = opt_.channels_last;
    Tensor t;
    bool repack = false;  // NCDHW -> NDHWC style transpose (B, C, S)
    int64_t tb = 1, tc = 1, ts = 1;
    DType dst_dtype = act_;
    if (shape.rank() == 5 && !weight) {
      SEEDVAE_ASSIGN_OR_RETURN(t, new_activation(shape, 2, what));
      repack = last;
      tb = shape[0];
      tc = shape[1];
      ts = shape[2] * shape[3] * shape[4];
    } else if (shape.rank() == 5 && weight) {
      const bool pointwise = shape[2] == 1 && shape[3] == 1 && shape[4] == 1;
      if (pointwise) {
        SEEDVAE_ASSIGN_OR_RETURN(t, new_plain(shape, act_, Kind::kMatrix, Layout::kNCDHW, what));
      } else {
        SEEDVAE_ASSIGN_OR_RETURN(t, new_plain(shape, act_, Kind::kConvWeight,
                                              last ? Layout::kNDHWC : Layout::kNCDHW, what));
        repack = last;
        tb = shape[0];
        tc = shape[1];
        ts = shape[2] * shape[3] * shape[4];
      }
    } else if (shape.rank() == 1 && weight) {
      dst_dtype = DType::kF32;
      SEEDVAE_ASSIGN_OR_RETURN(t, new_plain(shape, DType::kF32, Kind::kVector, Layout::kNCDHW, what));
    } else if (shape.rank() == 2 && weight) {
      SEEDVAE_ASSIGN_OR_RETURN(t, new_plain(shape, act_, Kind::kMatrix, Layout::kNCDHW, what));
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(t, new_plain(shape, act_, Kind::kPlain, Layout::kNCDHW, what));
    }
    if (n == 0) return t;
    void* dst = storage(t)->ptr();
    const ElemType dst_t = elem_of(dst_dtype);
    if (!repack && src_t == dst_t) {
      SEEDVAE_TRY(copy_to_device(dst, host->raw(), host->nbytes(), what));
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(BlockPtr staging, alloc_->allocate(host->nbytes(), what + " staging"));
      SEEDVAE_TRY(copy_to_device(staging->ptr, host->raw(), host->nbytes(), what));
      if (repack) {
        launch_transpose(src_t, staging->ptr, dst_t, dst, tb, tc, ts, true, stream_);
      } else {
        launch_convert(src_t, staging->ptr, dst_t, dst, n, stream_);
      }
      SEEDVAE_TRY(check_launch(what));
    }
    // The host buffer was copied to pinned staging (or synchronously for small tensors), so the
    // caller may free it as soon as we return.
    return t;
  }

  // Copies frames [src_begin, src_begin + count) of src into frames starting at dst_begin of dst
  // (same N, C, H, W and layout).
  Status copy_frames(const Tensor& dst, int64_t dst_begin, const Tensor& src, int64_t src_begin,
                     int64_t count, const std::string& what) {
    if (count <= 0) return Status::ok();
    CudaStorage* ds = storage(dst);
    CudaStorage* ss = storage(src);
    const Shape& d = dst.shape;
    const Shape& s = src.shape;
    const int64_t es = dtype_size(act_);
    const int64_t hw = s.h() * s.w();
    char* dp = static_cast<char*>(ds->ptr());
    const char* sp = static_cast<const char*>(ss->ptr());
    if (ds->layout == Layout::kNDHWC) {
      const int64_t frame = hw * s.c() * es;
      SEEDVAE_CUDA_TRY(cudaMemcpy2DAsync(dp + dst_begin * frame, d.t() * frame,
                                         sp + src_begin * frame, s.t() * frame, count * frame,
                                         s.n(), cudaMemcpyDeviceToDevice, stream_),
                       what);
    } else {
      const int64_t frame = hw * es;
      SEEDVAE_CUDA_TRY(cudaMemcpy2DAsync(dp + dst_begin * frame, d.t() * frame,
                                         sp + src_begin * frame, s.t() * frame, count * frame,
                                         s.n() * s.c(), cudaMemcpyDeviceToDevice, stream_),
                       what);
    }
    return Status::ok();
  }

  Status run_group_norm(const void* x, void* y, Layout layout, const Dims5& d, const float* gamma,
                        const float* beta, int groups, float eps, bool silu,
                        const std::string& what, const float* in_bias = nullptr) {
    GroupNormArgs a;
    a.type = elem_of(act_);
    a.layout = layout;
    a.d = d;
    a.groups = groups;
    a.eps = eps;
    a.silu = silu && opt_.fused_gn_silu;
    a.x = x;
    a.y = y;
    a.gamma = gamma;
    a.beta = beta;
    a.in_bias = in_bias;
    a.num_sms = sms_;
    const int64_t wsf = group_norm_workspace_floats(a);
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr ws, alloc_->allocate(wsf * 4, what + " statistics"));
    a.workspace = static_cast<float*>(ws->ptr);
    launch_group_norm(a, stream_);
    if (silu && !opt_.fused_gn_silu) launch_silu_inplace(a.type, y, d.numel(), stream_);
    return check_launch(what);
  }

  // softmax(q k^T * scale) v per frame through cuBLASLt, scores materialised for blocks of query
  // rows (fp32 scores, probabilities in the compute dtype), at most ~1 GiB at a time.
  Status materialised_attention(const void* q, const void* k, const void* v, void* o,
                                int64_t frames, int64_t tokens, int64_t c, float scale,
                                const std::string& what) {
    const int64_t es = dtype_size(act_);
    const ElemType et = elem_of(act_);
    const int64_t budget = int64_t{1} << 30;
    const int64_t blk = std::clamp<int64_t>(budget / std::max<int64_t>(1, tokens * (4 + es)), 1,
                                            tokens);
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr sb, alloc_->allocate(blk * tokens * 4, what + " scores"));
    SEEDVAE_ASSIGN_OR_RETURN(BlockPtr pb, alloc_->allocate(blk * tokens * es,
                                                           what + " probabilities"));
    for (int64_t f = 0; f < frames; ++f) {
      const char* qf = static_cast<const char*>(q) + f * tokens * c * es;
      const char* kf = static_cast<const char*>(k) + f * tokens * c * es;
      const char* vf = static_cast<const char*>(v) + f * tokens * c * es;
      char* of = static_cast<char*>(o) + f * tokens * c * es;
      for (int64_t r0 = 0; r0 < tokens; r0 += blk) {
        const int64_t rows = std::min(blk, tokens - r0);
        RowGemm s;
        s.m = rows;
        s.n = tokens;
        s.k = c;
        s.a = qf + r0 * c * es;
        s.lda = c;
        s.b = kf;
        s.ldb = c;
        s.trans_b = true;
        s.d = sb->ptr;
        s.ldd = tokens;
        s.alpha = scale;
        s.ab_type = et;
        s.cd_type = ElemType::kF32;
        SEEDVAE_TRY(gemm_->run(s, math_, what + " q k^T"));
        launch_softmax_rows(et, static_cast<const float*>(sb->ptr), pb->ptr, rows, tokens, stream_);
        SEEDVAE_TRY(check_launch(what + " softmax"));
        RowGemm a;
        a.m = rows;
        a.n = c;
        a.k = tokens;
        a.a = pb->ptr;
        a.lda = tokens;
        a.b = vf;
        a.ldb = c;
        a.d = of + r0 * c * es;
        a.ldd = c;
        a.ab_type = a.cd_type = et;
        SEEDVAE_TRY(gemm_->run(a, math_, what + " p v"));
      }
    }
    return Status::ok();
  }

  CudaOptions opt_;
  std::thread::id owner_;
  int sms_ = 108, cc_ = 80, smem_optin_ = 48 * 1024;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<DeviceAllocator> alloc_;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<Conv3dCudnn> conv_;
  DType act_ = DType::kF32;
  MathMode math_ = MathMode::kStrict;
  std::string name_, device_name_, cache_file_;
  int64_t fused_calls_ = 0, materialised_calls_ = 0;
  cudaStream_t d2h_stream_ = nullptr, h2d_stream_ = nullptr;
  cudaStream_t copy_out_stream_ = nullptr;  // download_frames_async, created on first use
  int64_t async_downloads_ = 0;
  std::shared_ptr<PinnedPool> pinned_pool_;
  std::deque<std::weak_ptr<CudaStorage>> offloaded_;
  int64_t offloaded_bytes_ = 0, prefetched_bytes_ = 0, offload_stalls_ = 0;
  int64_t prefetch_evictions_ = 0;  // evict_prefetched() calls that dropped something
  bool prefetch_paused_ = false, in_prefetch_ = false;
  double upload_ms_ = 0, download_ms_ = 0, download_alloc_ms_ = 0, device_ms_ = 0;
  cudaEvent_t chunk_start_ = nullptr, chunk_end_ = nullptr;
  bool chunk_open_ = false;
  std::vector<SpanSlot> spans_;  // telemetry spans (begin_device_span), <= kMaxOpenDeviceSpans
  int64_t next_span_ = 0;
  void* pinned_[2] = {nullptr, nullptr};
  cudaEvent_t pinned_ev_[2] = {nullptr, nullptr};
  int64_t upload_bytes_ = 0, download_bytes_ = 0;
  std::string attention_kernel_;
  bool capturing_ = false;
  std::map<int64_t, cudaGraphExec_t> graphs_;
  int64_t next_graph_id_ = 0, graphs_captured_ = 0, graphs_discarded_ = 0, graph_launches_ = 0;
  std::string graph_discard_reason_;
};

Status AsyncDownload::wait() {
  if (waited_) return status_;
  waited_ = true;
  const auto t0 = std::chrono::steady_clock::now();
  status_ = [&]() -> Status {
    if (chunk_start && chunk_end) {
      float ms = 0;
      SEEDVAE_CUDA_TRY(cudaEventSynchronize(chunk_end), what_);
      if (cudaEventElapsedTime(&ms, chunk_start, chunk_end) == cudaSuccess) backend_->device_ms_ += ms;
      cudaGetLastError();
    }
    if (bytes == 0) return Status::ok();
    SEEDVAE_CUDA_TRY(cudaEventSynchronize(done), what_);
    const auto* from = static_cast<const float*>(pinned);
    if (dst_stride == plane) {
      CudaBackend::parallel_copy(dst, from, bytes);
    } else {
      for (int64_t i = 0; i < planes; ++i) {
        CudaBackend::parallel_copy(dst + i * dst_stride, from + i * plane,
                                   static_cast<size_t>(plane) * 4);
      }
    }
    backend_->download_bytes_ += static_cast<int64_t>(bytes);
    return Status::ok();
  }();
  backend_->download_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  release();
  return status_;
}

}  // namespace

Result<std::unique_ptr<Backend>> create_cuda_backend(const CudaOptions& options) {
  return CudaBackend::create(options);
}

std::optional<CudaBackendReport> cuda_backend_report(const Backend& backend) {
  if (const auto* b = dynamic_cast<const CudaBackend*>(&backend)) return b->report();
  return std::nullopt;
}

}  // namespace seedvae::gpu
