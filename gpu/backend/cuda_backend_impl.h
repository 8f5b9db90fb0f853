// The CUDA backend's private declarations: the CudaBackend class, the storage behind its tensors
// (CudaStorage and its Kind), pinned host buffers (PinnedPool, HostCopy) and the asynchronous
// download (AsyncDownload). Included only by the backend's own sources; the public face is
// gpu/cuda_backend.h, which includes no CUDA header.
//
// One class, its member functions defined by concern in several translation units:
//   gpu/cuda_backend.cpp        creation (device, streams, library handles), destruction, report
//   gpu/backend/memory.cpp      upload/download, pinned staging, async downloads, tensor access
//                               and allocation helpers, the owning-thread check
//   gpu/backend/conv.cpp        conv3d: 1x1x1 products, cuDNN, the few-channel paths
//   gpu/backend/attention.cpp   the mid-block attention (fused or materialised)
//   gpu/backend/ops.cpp         causal_pad, slices, concatenation and frame copies, GroupNorm,
//                               residual add, depth-to-space
//   gpu/backend/offload.cpp     causal-state offload to pinned host memory and prefetch back
//   gpu/backend/graphs.cpp      CUDA graphs, synchronisation, memory statistics, device spans
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
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/backend/backend.h"
#include "gpu/allocator.h"
#include "gpu/cublas/gemm.h"
#include "gpu/cuda_backend.h"
#include "gpu/cudnn/conv3d_cudnn.h"
#include "gpu/cudnn/conv_graph.h"
#include "gpu/device_memory.h"
#include "gpu/kernels/kernel_args.h"
#include "gpu/kernels/wan.h"

namespace seedvae::gpu::detail {

inline ElemType elem_of(DType t) {
  switch (t) {
    case DType::kF16: return ElemType::kF16;
    case DType::kBF16: return ElemType::kBF16;
    default: return ElemType::kF32;
  }
}

inline DType dtype_of(Precision p) {
  switch (p) {
    case Precision::kFp16: return DType::kF16;
    case Precision::kBf16: return DType::kBF16;
    default: return DType::kF32;
  }
}

inline std::string str(const Shape& s) {
  return s.to_string();
}

inline Dims5 dims5(const Shape& s) {
  return {s[0], s[1], s[2], s[3], s[4]};
}

enum class Kind : uint8_t {
  kActivation,  // rank 5, `layout`
  kConvWeight,  // [Cout, Cin, kT, kH, kW] stored KRSC (NDHWC backend) or KCRS
  kMatrix,      // [out, in] row-major (Linear weight, or 1x1x1 conv weight with 5-D shape)
  kVector,      // rank 1, fp32
  kPlain,       // any other rank: contiguous, compute dtype
};

// Pinned host memory of a PinnedPool: `bytes` spread over pieces of PinnedPool::kPiece bytes.
struct PinnedBuffer {
  std::vector<void*> pieces;
  size_t bytes = 0;
  bool empty() const { return pieces.empty(); }
  // f(piece pointer, offset within [offset, offset + len), length) for every piece the range
  // touches, in order.
  template <typename F>
  void for_each_span(size_t offset, size_t len, F&& f) const;
};

// Pinned host memory for offloaded causal state and asynchronous downloads, handed out in pieces
// of kPiece bytes that any later request reuses. Pieces, not one block per request: the driver
// holds the process's address-space lock while it pins, so one 500 MB cudaMallocHost made every
// thread that grows its heap meanwhile -- the studio's GUI thread among them -- wait about 100 ms
// (measured on the GPU machine); a piece's allocation is a few ms.
struct PinnedPool {
  static constexpr size_t kPiece = size_t{8} << 20;
  std::vector<void*> free, all;
  int64_t bytes = 0;
  ~PinnedPool() {
    for (void* p : all) cudaFreeHost(p);
  }
  // `remedy` ends the out-of-memory message ("run without --offload-state").
  Result<PinnedBuffer> get(size_t n, const std::string& what, const std::string& remedy) {
    PinnedBuffer b;
    b.bytes = n;
    for (size_t have = 0; have < n; have += kPiece) {
      if (!free.empty()) {
        b.pieces.push_back(free.back());
        free.pop_back();
        continue;
      }
      void* p = nullptr;
      const cudaError_t e = cudaMallocHost(&p, kPiece);
      if (e != cudaSuccess) {
        cudaGetLastError();
        put(b);
        return out_of_memory(what + ": cannot pin " + format_bytes(static_cast<int64_t>(n)) +
                             " of host memory (" + cudaGetErrorString(e) + "); " + remedy);
      }
      all.push_back(p);
      bytes += static_cast<int64_t>(kPiece);
      b.pieces.push_back(p);
    }
    return b;
  }
  void put(PinnedBuffer& b) {
    free.insert(free.end(), b.pieces.begin(), b.pieces.end());
    b.pieces.clear();
    b.bytes = 0;
  }
};

template <typename F>
void PinnedBuffer::for_each_span(size_t offset, size_t len, F&& f) const {
  for (size_t done = 0; done < len;) {
    const size_t at = offset + done;
    const size_t n = std::min(len - done, PinnedPool::kPiece - at % PinnedPool::kPiece);
    f(static_cast<char*>(pieces[at / PinnedPool::kPiece]) + at % PinnedPool::kPiece, done, n);
    done += n;
  }
}

// The whole buffer to or from `device` (bytes contiguous there), a piece at a time on `stream`.
inline cudaError_t copy_pinned_async(const PinnedBuffer& b, void* device, cudaMemcpyKind kind,
                                     cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  b.for_each_span(0, b.bytes, [&](char* piece, size_t at, size_t n) {
    char* d = static_cast<char*>(device) + at;
    if (err == cudaSuccess) {
      err = kind == cudaMemcpyDeviceToHost ? cudaMemcpyAsync(piece, d, n, kind, stream)
                                           : cudaMemcpyAsync(d, piece, n, kind, stream);
    }
  });
  return err;
}

// The host copy of an offloaded tensor (causal state): pinned bytes, the event that marks the
// end of the device-to-host copy, and the host-to-device copy that brings it back.
struct HostCopy {
  std::shared_ptr<PinnedPool> pool;
  PinnedBuffer pinned;
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
    if (!pinned.empty()) pool->put(pinned);
  }
};

class CudaStorage final : public Storage {
 public:
  BlockPtr block;     // null while the data lives only in `host` (offloaded)
  size_t offset = 0;  // bytes from block->ptr to element 0
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

class CudaBackend;

// One download_frames_async() in flight (owned by the caller, on the backend's thread).
// wait() is defined in memory.cpp.
class AsyncDownload final : public PendingCopy {
 public:
  AsyncDownload(CudaBackend* backend, std::string what)
      : backend_(backend), what_(std::move(what)) {}
  ~AsyncDownload() override { release(); }
  Status wait() override;

  float* dst = nullptr;  // the destination's first element (plane 0, frame_offset)
  int64_t plane = 0, planes = 0, dst_stride = 0;
  size_t bytes = 0;
  std::shared_ptr<PinnedPool> pool;
  PinnedBuffer pinned;
  BlockPtr scratch;               // converted copy of the source, or
  std::shared_ptr<Storage> keep;  // the source itself, until the transfer is done
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
    if (!pinned.empty()) pool->put(pinned);
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
  // ---- lifecycle (gpu/cuda_backend.cpp) ----------------------------------------------------
  static Result<std::unique_ptr<Backend>> create(const CudaOptions& o);
  ~CudaBackend() override;

  std::string name() const override { return name_; }
  DType activation_dtype() const override { return act_; }

  CudaBackendReport report() const;
  // Measures what context and handles took and caps the allocator's reserve so the backend stays
  // within CudaOptions::budget_bytes (an out-of-memory error when the budget leaves no room).
  Status apply_budget();

  // ---- memory (memory.cpp) -----------------------------------------------------------------
  Result<Tensor> upload(const HostTensor& host) override;
  Result<Tensor> upload_weight(const HostTensor& host, std::string_view name) override;
  Result<HostTensor> download(const Tensor& t) override;
  Status download_frames(const Tensor& t, HostTensor& dst, int64_t frame_offset) override;
  Result<std::unique_ptr<PendingCopy>> download_frames_async(const Tensor& t, HostTensor& dst,
                                                             int64_t frame_offset) override;
  // Peer to peer from another CUDA backend of the same layout (any device, this one included);
  // a pending bias comes along and is added where the source would have added it.
  Result<Tensor> import_tensor(Backend& from, const Tensor& src) override;

  // ---- ops (conv.cpp, attention.cpp, ops.cpp) ----------------------------------------------
  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override;
  Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) override;
  Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) override;
  Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) override;
  Status copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src, int64_t src_frame,
                          int64_t count) override;
  Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override;
  Status group_norm_inplace(Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override;
  Status add_inplace(Tensor& acc, const Tensor& x) override;
  Result<Tensor> depth_to_space(const Tensor& x, int temporal_factor, bool drop_frame_1,
                                int context_frames = 2) override;
  Result<Tensor> attention(const Tensor& x, const AttentionWeights& w) override;
  // The Wan VAEs' ops (wan_ops.cpp; rms_attention in attention.cpp).
  Result<Tensor> zeros(const Shape& shape) override;
  Result<Tensor> rms_norm(const Tensor& x, const Tensor& gamma, const RmsNormParams& p) override;
  Result<Tensor> upsample_nearest(const Tensor& x) override;
  Result<Tensor> frames_from_channels(const Tensor& x, int factor) override;
  Result<Tensor> patchify(const Tensor& x, int p) override;
  Result<Tensor> unpatchify(const Tensor& x, int p) override;
  Result<Tensor> avg_down(const Tensor& x, const AvgDownParams& p) override;
  Result<Tensor> dup_up(const Tensor& x, const DupUpParams& p) override;
  Result<Tensor> rms_attention(const Tensor& x, const RmsAttentionWeights& w) override;

  // ---- causal-state offload (offload.cpp) --------------------------------------------------
  Status offload_hint(const Tensor& t) override;

  // ---- CUDA graphs, synchronisation and telemetry (graphs.cpp) -----------------------------
  bool graphs_enabled() const override { return opt_.cuda_graphs; }
  Status begin_capture() override;
  Result<int64_t> end_capture(bool keep) override;
  Status launch_graph(int64_t id) override;
  void release_graph(int64_t id) override;
  uintptr_t address_of(const Tensor& t) const override;

  Status synchronize() override;
  Status save_tuning() override;
  MemoryStats memory_stats() const override;
  void reset_peak() override { alloc_->reset_peak(); }
  std::function<int64_t()> device_memory_probe() const override;
  void release_cached_memory() override { alloc_->release_cached(); }
  int64_t begin_device_span() override;
  double device_busy_ms() const override { return device_ms_; }
  bool close_device_span(int64_t span) override;
  double read_device_span(int64_t span, bool wait) override;

 private:
  CudaBackend() = default;

  struct SpanSlot {
    cudaEvent_t start = nullptr, end = nullptr;
    int64_t id = -1;      // the open or unread span's handle, -1 when free
    bool closed = false;  // its end is recorded
  };
  SpanSlot* find_span(int64_t span);  // the caller's open or unread span, nullptr if none
  bool counted_ = false;  // counted among the device's live backends (release_idle_devices)

  // ---- memory (memory.cpp) -----------------------------------------------------------------
  // Host transfers: two pinned staging buffers, DMA of one overlapping the (multi-threaded) host
  // copy of the other. Small transfers go directly (pageable).
  static constexpr size_t kPinnedPiece = size_t{64} << 20;
  static constexpr size_t kDirectBelow = size_t{1} << 20;

  Status download_planes(const Tensor& t, float* dst, int64_t plane, int64_t planes,
                         int64_t dst_stride, std::string_view op);
  Result<Tensor> upload_impl(const HostTensor& host_in, bool weight, const std::string& what);
  Status ensure_pinned(const std::string& what);
  static void parallel_copy(void* dst, const void* src, size_t bytes);
  Status copy_to_host(void* dst, const void* src, int64_t bytes_i, const std::string& what);
  Status copy_to_device(void* dst, const void* src, int64_t bytes_i, const std::string& what);

  // The first call of every op: refuses other threads, and moves offloaded state along.
  Status check_thread(std::string_view op);

  static CudaStorage* storage(const Tensor& t) {
    return static_cast<CudaStorage*>(t.storage.get());
  }
  Result<CudaStorage*> storage_of(const Tensor& t, std::string_view op, std::string_view arg,
                                  bool allow_pending_bias = false);
  // An activation in the backend's dtype; with `any_dtype` also an fp32 model output of a
  // 16-bit backend (Conv3dParams::model_output), for the frame copies.
  Result<CudaStorage*> activation_of(const Tensor& t, std::string_view op, std::string_view arg,
                                     bool allow_pending_bias = false, bool any_dtype = false);
  // A download's source. A 16-bit activation whose convolution bias is still pending keeps it:
  // *bias_after is then set, and the download adds it to the fp32 copy (add_download_bias), so
  // the value rounds once, as a fused convolution + bias rounds, instead of twice.
  Result<CudaStorage*> download_source(const Tensor& t, std::string_view op,
                                       const float** bias_after);
  void add_download_bias(const float* bias, void* fp32_ncdhw, const Shape& shape);
  // Parameters (shapes checked by op_checks): the storage must be of the right kind.
  Result<const float*> vector_of(const Tensor& t, std::string_view op, std::string_view arg);
  Result<const void*> matrix_of(const Tensor& t, std::string_view op, std::string_view arg);
  // A new activation of dtype `dt` (default: the backend's).
  Result<Tensor> new_activation(const Shape& shape, int64_t head, const std::string& what,
                                std::optional<DType> dt = std::nullopt);
  Result<Tensor> new_plain(const Shape& shape, DType dt, Kind kind, Layout layout,
                           const std::string& what);

  // ---- convolution paths (conv.cpp) --------------------------------------------------------
  // The convolution of x (elements `et`, NDHWC or NCDHW, shape xsh) with w into y (shape out,
  // same layout and type). Returns whether it added the bias; with `defer_bias` the cuDNN path
  // leaves it to the caller (fused bias, fidelity's conversion back to fp32).
  // `yt` may differ from `et` only on the few-outputs path (its accumulator is fp32 anyway);
  // `math` is the fp32 products' mode.
  struct ConvInto {
    ElemType et = ElemType::kF32, yt = ElemType::kF32;
    MathMode math = MathMode::kStrict;
    bool defer_bias = false;
  };
  Result<bool> conv3d_into(const Shape& xsh, const void* x, Layout layout, const Shape& wsh,
                           const void* w, const float* bias, const Conv3dParams& p,
                           const Shape& out, void* y, const ConvInto& how, const std::string& what);
  // Whether conv3d_into takes the few-outputs path (per-frame tap products) for this problem.
  static bool few_outputs_path(const Shape& xsh, const Shape& wsh, const Conv3dParams& p,
                               Layout layout);
  Status conv_cudnn(const ConvProblem& p, const void* x, const void* w, void* y,
                    const std::string& what);
  // The legacy API or the graph API, whichever is faster for the problem (conv.cpp).
  Status conv_either_api(const ConvProblem& q, const void* x, const void* w, void* y,
                         const std::string& what);
  Status conv_few_inputs(const ConvProblem& p, const void* x, const void* w, const float* bias,
                         void* y, const std::string& what);
  Status conv_few_outputs(const ConvProblem& p, const void* x, const void* w, const float* bias,
                          void* y, ElemType yt, const std::string& what);
  // FP8 convolutions (CudaSwitches::fp8_convs): whether a problem takes them (channels-last, 16-
  // bit activations, >= 16 input and output channels in multiples of 16, not the few-inputs or
  // few-outputs paths), and the convolution itself: x quantised per tensor at this call, the
  // weight per output channel once (fp8_weight), the graph convolution in pieces of output
  // frames that keep every operand below 2^31 elements; no bias (the caller adds or defers it).
  // kUnsupported when no graph engine takes the problem (the caller then runs it in 16 bits).
  bool fp8_path(const Shape& xsh, const Shape& wsh, const Conv3dParams& p, Layout layout) const;
  // Makes asymmetric spatial padding explicit for cuDNN (conv.cpp).
  Result<BlockPtr> pad_for_cudnn(ElemType et, Layout layout, const Conv3dParams& p, const void*& x,
                                 Dims5& xd, int& ph, int& pw, const std::string& what);
  struct Fp8Weight {
    std::weak_ptr<Storage> original;
    BlockPtr values;  // e4m3, KRSC
    BlockPtr scales;  // fp32, one per output channel (dequantisation)
  };
  Result<const Fp8Weight*> fp8_weight(const Tensor& w, const std::string& what);
  Status conv_fp8(const Shape& xsh, const void* x, const Shape& wsh, const Fp8Weight& w,
                  const Conv3dParams& p, const Shape& out, void* y, const std::string& what);

  // ---- attention (attention.cpp) -----------------------------------------------------------
  struct Projections {
    const void *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;
  };
  // x + proj(softmax(q k^T / sqrt(C)) v) per frame, q/k/v projections of normalize(x) (called
  // with x's token-major matrix and a buffer of its size).
  Result<Tensor> attend(const Tensor& x, CudaStorage* xs, const Projections& pr,
                        const std::function<Status(const void*, void*)>& normalize,
                        const std::string& what);
  // One data-movement op of the Wan VAEs (wan_ops.cpp): checks, output, launch.
  Result<Tensor> wan_move(const Tensor& x, const Shape& out, WanMoveArgs a, std::string_view op);
  Status materialised_attention(const void* q, const void* k, const void* v, void* o,
                                int64_t frames, int64_t tokens, int64_t c, float scale,
                                const std::string& what);

  // ---- frame copies and GroupNorm (ops.cpp) ------------------------------------------------
  // The checked arguments of a GroupNorm (group_norm, group_norm_inplace).
  struct NormArgs {
    CudaStorage* x = nullptr;
    const float* gamma = nullptr;
    const float* beta = nullptr;
  };
  Result<NormArgs> norm_args(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                             const GroupNormParams& p, std::string_view op);
  Status run_group_norm(const void* x, void* y, Layout layout, const Dims5& d, const float* gamma,
                        const float* beta, int groups, float eps, bool silu,
                        const std::string& what, const float* in_bias = nullptr);
  Status copy_frames(const Tensor& dst, int64_t dst_begin, const Tensor& src, int64_t src_begin,
                     int64_t count, const std::string& what);

  // ---- causal-state offload (offload.cpp) --------------------------------------------------
  Status offload(const Tensor& t, const std::string& what);
  Status bring_back(CudaStorage* st, bool wait, const std::string& what);
  void pump();
  int64_t evict_prefetched();

  // ---- state ---------------------------------------------------------------------------------
  CudaOptions opt_;
  std::thread::id owner_;
  int sms_ = 108, cc_ = 80, smem_optin_ = 48 * 1024;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<DeviceAllocator> alloc_;
  // Device level (CudaOptions::budget_bytes): the NVML probe of this card (null without NVML),
  // the card's use before the context existed, what context and handles took, the budget and
  // the reserve cap derived from it.
  std::shared_ptr<DeviceMemoryProbe> probe_;
  std::string probe_note_;
  int64_t baseline_bytes_ = -1, fixed_bytes_ = -1, budget_bytes_ = 0, reserve_limit_ = 0;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<Conv3dCudnn> conv_;
  // fp16 accumulation and FP8 convolutions (CudaSwitches::fp16_accumulation, fp8_convs):
  // cuDNN's graph API, which has them.
  std::unique_ptr<GraphConv> graph_conv_;
  bool fp8_ = false;  // CudaSwitches::fp8_convs in bf16 on a card with FP8 tensor cores
  std::map<const Storage*, Fp8Weight> fp8_weights_;  // by the original weight's storage
  int64_t fp8_convs_ = 0, fp8_refused_ = 0;          // convolutions run in FP8 / refused
  DType act_ = DType::kF32;
  MathMode math_ = MathMode::kStrict;
  // Precision::kFidelity: fp32 activations, convolutions through fp16 copies and fp16 weights.
  bool fp16_convs_ = false;
  std::string name_, device_name_, cache_file_;
  int64_t fused_calls_ = 0, materialised_calls_ = 0;
  int64_t fp16_accumulated_ = 0;  // convolutions run with fp16 accumulation
  int64_t graph_api_convs_ = 0;   // convolutions run on a faster graph-API engine
  bool fp16_accumulate_ = false;  // CudaSwitches::fp16_accumulation in fp16 (not fidelity)
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
  int64_t import_bytes_ = 0;
  double import_ms_ = 0;
  std::vector<int> peers_;  // devices whose memory this one reads directly (peer access on)
  std::string attention_kernel_;
  bool capturing_ = false;
  std::map<int64_t, cudaGraphExec_t> graphs_;
  int64_t next_graph_id_ = 0, graphs_captured_ = 0, graphs_discarded_ = 0, graph_launches_ = 0;
  std::string graph_discard_reason_;
};

}  // namespace seedvae::gpu::detail
