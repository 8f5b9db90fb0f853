// The CUDA backend's memory: uploads (staged through two pinned buffers, converted and repacked
// on the device), downloads (synchronous, frame-placed and asynchronous through pinned memory),
// and the helpers every op uses to reach a tensor's storage (the owning-thread check, storage and
// parameter lookups, allocation of new activations and parameters). Kept together because they
// share the staging buffers, the transfer statistics and the storage conventions of
// cuda_backend_impl.h.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "gpu/backend/cuda_backend_impl.h"
#include "gpu/cuda_check.h"
#include "gpu/kernels/elementwise.h"

namespace seedvae::gpu::detail {

Result<Tensor> CudaBackend::upload(const HostTensor& host) {
  SEEDVAE_TRY(check_thread("upload"));
  const auto t0 = std::chrono::steady_clock::now();
  if (!chunk_open_ && chunk_start_) {
    // device time of one streamed chunk: from its upload to the start of its download
    cudaEventRecord(chunk_start_, stream_);
    chunk_open_ = true;
  }
  auto r = upload_impl(host, false, "upload");
  upload_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  upload_bytes_ += host.nbytes();
  return r;
}

Result<Tensor> CudaBackend::upload_weight(const HostTensor& host, std::string_view name) {
  SEEDVAE_TRY(check_thread("upload_weight"));
  return upload_impl(host, true, "upload_weight(" + std::string(name) + ")");
}

Result<Tensor> CudaBackend::import_tensor(Backend& from, const Tensor& src) {
  SEEDVAE_TRY(check_thread("import_tensor"));
  auto* other = dynamic_cast<CudaBackend*>(&from);
  if (other == nullptr) return Backend::import_tensor(from, src);  // a host backend's tensor
  const auto t0 = std::chrono::steady_clock::now();
  auto* s = dynamic_cast<CudaStorage*>(src.storage.get());
  if (s == nullptr || s->kind != Kind::kActivation || src.shape.rank() != 5) {
    return invalid_argument("import_tensor: " + str(src.shape) +
                            " is not a 5-D activation of a CUDA backend");
  }
  if (!s->block) {
    return invalid_argument("import_tensor: " + str(src.shape) +
                            " is offloaded to host memory on its own device");
  }
  const Layout layout = opt_.channels_last ? Layout::kNDHWC : Layout::kNCDHW;
  if (s->layout != layout) {
    return invalid_argument(
        "import_tensor: the two backends store activations in different "
        "layouts (channels-last on one of them only)");
  }
  const int peer = other->opt_.device;
  if (peer != opt_.device && std::find(peers_.begin(), peers_.end(), peer) == peers_.end()) {
    int can = 0;
    SEEDVAE_CUDA_TRY(cudaDeviceCanAccessPeer(&can, opt_.device, peer), "cudaDeviceCanAccessPeer");
    if (can) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        return cuda_status(e, "cudaDeviceEnablePeerAccess(" + std::to_string(peer) + ")");
      }
      cudaGetLastError();  // "already enabled" is sticky otherwise
    }
    peers_.push_back(peer);  // without peer access the driver stages the copy through the host
  }
  SEEDVAE_ASSIGN_OR_RETURN(Tensor t, new_activation(src.shape, 2, "import_tensor", src.dtype));
  const size_t bytes = static_cast<size_t>(src.shape.numel() * dtype_size(src.dtype));
  SEEDVAE_CUDA_TRY(
      cudaMemcpyPeerAsync(storage(t)->ptr(), opt_.device, s->ptr(), peer, bytes, stream_),
      "import_tensor: peer copy of " + str(src.shape) + " from device " + std::to_string(peer));
  if (s->pending_bias) {
    const int64_t c = src.shape[1];
    SEEDVAE_ASSIGN_OR_RETURN(Tensor bias, new_plain(Shape{c}, DType::kF32, Kind::kVector,
                                                    Layout::kNCDHW, "import_tensor bias"));
    SEEDVAE_CUDA_TRY(cudaMemcpyPeerAsync(storage(bias)->ptr(), opt_.device, s->pending_bias, peer,
                                         static_cast<size_t>(c) * sizeof(float), stream_),
                     "import_tensor: peer copy of a pending bias");
    storage(t)->pending_bias = static_cast<const float*>(storage(bias)->ptr());
    storage(t)->bias_owner = bias.storage;
  }
  // the source may be released or reused as soon as this returns
  SEEDVAE_CUDA_TRY(cudaStreamSynchronize(stream_), "import_tensor: synchronise");
  import_bytes_ += static_cast<int64_t>(bytes);
  import_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

Result<CudaStorage*> CudaBackend::download_source(const Tensor& t, std::string_view op,
                                                  const float** bias_after) {
  const bool half = elem_of(t.dtype) != ElemType::kF32;
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, "tensor", half));
  *bias_after = half && t.shape.rank() == 5 ? s->pending_bias : nullptr;
  if (s->pending_bias && *bias_after == nullptr) {  // not an activation: the bias goes in now
    SEEDVAE_ASSIGN_OR_RETURN(s, storage_of(t, op, "tensor"));
  }
  return s;
}

void CudaBackend::add_download_bias(const float* bias, void* fp32_ncdhw, const Shape& shape) {
  if (bias != nullptr) {
    launch_add_bias(ElemType::kF32, Layout::kNCDHW, fp32_ncdhw, bias, dims5(shape), stream_);
  }
}

Result<HostTensor> CudaBackend::download(const Tensor& t) {
  const auto t0 = std::chrono::steady_clock::now();
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor host, HostTensor::create(DType::kF32, t.shape));
  download_alloc_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int64_t n = t.shape.numel();
  SEEDVAE_TRY(download_planes(t, static_cast<float*>(host.raw()), n, 1, n, "download"));
  return host;
}

Status CudaBackend::download_frames(const Tensor& t, HostTensor& dst, int64_t frame_offset) {
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
Result<std::unique_ptr<PendingCopy>> CudaBackend::download_frames_async(const Tensor& t,
                                                                        HostTensor& dst,
                                                                        int64_t frame_offset) {
  constexpr std::string_view op = "download_frames_async";
  SEEDVAE_TRY(check_download_frames(t.shape, dst, frame_offset));
  SEEDVAE_TRY(check_thread(op));
  const float* bias = nullptr;
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, download_source(t, op, &bias));
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
    add_download_bias(bias, copy->scratch->ptr, sh);
    SEEDVAE_TRY(check_launch(what));
    src = copy->scratch->ptr;
  } else {
    copy->keep = t.storage;
  }
  copy->pool = pinned_pool_;
  SEEDVAE_ASSIGN_OR_RETURN(
      copy->pinned,
      pinned_pool_->get(copy->bytes, what, "turn async tiles off (--async-tiles off)"));
  SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&copy->ready, cudaEventDisableTiming), what);
  SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&copy->done, cudaEventDisableTiming), what);
  SEEDVAE_CUDA_TRY(cudaEventRecord(copy->ready, stream_), what);
  SEEDVAE_CUDA_TRY(cudaStreamWaitEvent(copy_out_stream_, copy->ready, 0), what);
  SEEDVAE_CUDA_TRY(copy_pinned_async(copy->pinned, const_cast<void*>(src), cudaMemcpyDeviceToHost,
                                     copy_out_stream_),
                   what);
  SEEDVAE_CUDA_TRY(cudaEventRecord(copy->done, copy_out_stream_), what);
  ++async_downloads_;
  return std::unique_ptr<PendingCopy>(std::move(copy));
}

// Converts t to contiguous fp32 NCDHW on the device, then copies `planes` runs of `plane`
// floats to the host, run i at dst + i * dst_stride (a dense download is one plane).
Status CudaBackend::download_planes(const Tensor& t, float* dst, int64_t plane, int64_t planes,
                                    int64_t dst_stride, std::string_view op) {
  SEEDVAE_TRY(check_thread(op));
  const float* bias = nullptr;
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, download_source(t, op, &bias));
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
    add_download_bias(bias, scratch->ptr, t.shape);
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
  download_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  download_bytes_ += n * 4;
  return Status::ok();
}

Status CudaBackend::ensure_pinned(const std::string& what) {
  for (int i = 0; i < 2; ++i) {
    if (pinned_[i] == nullptr) {
      SEEDVAE_CUDA_TRY(cudaMallocHost(&pinned_[i], kPinnedPiece), what + ": pinned staging buffer");
      SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&pinned_ev_[i], cudaEventDisableTiming), what);
    }
  }
  return Status::ok();
}

void CudaBackend::parallel_copy(void* dst, const void* src, size_t bytes) {
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
    th.emplace_back([=] {
      std::memcpy(static_cast<char*>(dst) + o, static_cast<const char*>(src) + o,
                  std::min(part, bytes - o));
    });
  }
  std::memcpy(dst, src, std::min(part, bytes));
  for (auto& t : th) t.join();
}

Status CudaBackend::copy_to_host(void* dst, const void* src, int64_t bytes_i,
                                 const std::string& what) {
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

Status CudaBackend::copy_to_device(void* dst, const void* src, int64_t bytes_i,
                                   const std::string& what) {
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

Status CudaBackend::check_thread(std::string_view op) {
  if (std::this_thread::get_id() != owner_) {
    return internal_error(std::string(op) +
                          ": the CUDA backend was called from a thread that does not own it "
                          "(create it on the thread that runs the engine)");
  }
  if (opt_.offload_state) pump();
  return Status::ok();
}

Result<CudaStorage*> CudaBackend::storage_of(const Tensor& t, std::string_view op,
                                             std::string_view arg, bool allow_pending_bias) {
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
    launch_add_bias(elem_of(t.dtype), s->layout, s->ptr(), s->pending_bias, dims5(t.shape),
                    stream_);
    s->pending_bias = nullptr;
    s->bias_owner.reset();
    SEEDVAE_TRY(check_launch(std::string(op) + ": pending bias of " + std::string(arg)));
  }
  return s;
}

Result<CudaStorage*> CudaBackend::activation_of(const Tensor& t, std::string_view op,
                                                std::string_view arg, bool allow_pending_bias,
                                                bool any_dtype) {
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, arg, allow_pending_bias));
  if (s->kind != Kind::kActivation || t.shape.rank() != 5) {
    return invalid_argument(std::string(op) + ": " + std::string(arg) +
                            " must be a 5-D activation [N, C, T, H, W], got " + str(t.shape));
  }
  if (t.dtype != act_ && !any_dtype) {
    return invalid_argument(std::string(op) + ": " + std::string(arg) + " " + str(t.shape) +
                            " is " + std::string(dtype_name(t.dtype)) + ", a model output; " +
                            "only downloads and frame copies take it (the backend computes in " +
                            std::string(dtype_name(act_)) + ")");
  }
  return s;
}

// The data of a parameter whose shape op_checks validated, uploaded as a vector (fp32) or a
// matrix by upload_weight.
Result<const float*> CudaBackend::vector_of(const Tensor& t, std::string_view op,
                                            std::string_view arg) {
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, arg));
  if (s->kind != Kind::kVector) {
    return invalid_argument(std::string(op) + ": " + std::string(arg) + " " + str(t.shape) +
                            " must be a vector uploaded with upload_weight");
  }
  return static_cast<const float*>(s->ptr());
}

Result<const void*> CudaBackend::matrix_of(const Tensor& t, std::string_view op,
                                           std::string_view arg) {
  SEEDVAE_ASSIGN_OR_RETURN(CudaStorage * s, storage_of(t, op, arg));
  if (s->kind != Kind::kMatrix) {
    return invalid_argument(std::string(op) + ": " + std::string(arg) + " " + str(t.shape) +
                            " must be a matrix uploaded with upload_weight");
  }
  return static_cast<const void*>(s->ptr());
}

// New activation in the backend's layout and dtype. `head` spare frames are reserved in front
// when buffer reuse applies (NDHWC, N = 1).
Result<Tensor> CudaBackend::new_activation(const Shape& shape, int64_t head,
                                           const std::string& what, std::optional<DType> dt) {
  const DType type = dt.value_or(act_);
  int64_t n = 0;
  if (shape.rank() != 5 || !shape.checked_numel(&n) || n > (int64_t{1} << 50)) {
    return out_of_memory(what + ": tensor " + str(shape) + " is too large to allocate");
  }
  const bool last = opt_.channels_last;
  if (!(opt_.buffer_reuse && last && shape[0] == 1)) head = 0;
  const int64_t frame = shape[1] * shape[3] * shape[4];
  const int64_t bytes = (n + head * frame) * dtype_size(type);
  SEEDVAE_ASSIGN_OR_RETURN(BlockPtr blk, alloc_->allocate(static_cast<size_t>(bytes),
                                                          what + " " + str(shape) + " " +
                                                              std::string(dtype_name(type))));
  auto st = std::make_shared<CudaStorage>();
  st->block = std::move(blk);
  st->offset = static_cast<size_t>(head * frame * dtype_size(type));
  st->kind = Kind::kActivation;
  st->layout = last ? Layout::kNDHWC : Layout::kNCDHW;
  st->head_frames = head;
  Tensor t;
  t.storage = std::move(st);
  t.shape = shape;
  t.dtype = type;
  return t;
}

Result<Tensor> CudaBackend::new_plain(const Shape& shape, DType dt, Kind kind, Layout layout,
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

Result<Tensor> CudaBackend::upload_impl(const HostTensor& host_in, bool weight,
                                        const std::string& what) {
  SEEDVAE_TRY(check_upload(host_in, what));
  const int64_t n = host_in.shape().numel();
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
    // Convolution weights: fidelity convolves in fp16 (exact for the fp16 checkpoint).
    dst_dtype = fp16_convs_ ? DType::kF16 : act_;
    const bool pointwise = shape[2] == 1 && shape[3] == 1 && shape[4] == 1;
    if (pointwise) {
      SEEDVAE_ASSIGN_OR_RETURN(t, new_plain(shape, dst_dtype, Kind::kMatrix, Layout::kNCDHW, what));
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(t, new_plain(shape, dst_dtype, Kind::kConvWeight,
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

Status AsyncDownload::wait() {
  if (waited_) return status_;
  waited_ = true;
  const auto t0 = std::chrono::steady_clock::now();
  status_ = [&]() -> Status {
    if (chunk_start && chunk_end) {
      float ms = 0;
      SEEDVAE_CUDA_TRY(cudaEventSynchronize(chunk_end), what_);
      if (cudaEventElapsedTime(&ms, chunk_start, chunk_end) == cudaSuccess) {
        backend_->device_ms_ += ms;
      }
      cudaGetLastError();
    }
    if (bytes == 0) return Status::ok();
    SEEDVAE_CUDA_TRY(cudaEventSynchronize(done), what_);
    // Plane i of the pinned copy goes to dst + i * dst_stride (one run when dense).
    const size_t run = dst_stride == plane ? bytes : static_cast<size_t>(plane) * 4;
    for (size_t r = 0; r * run < bytes; ++r) {
      char* to = reinterpret_cast<char*>(dst + static_cast<int64_t>(r) * dst_stride);
      pinned.for_each_span(r * run, run, [&](char* piece, size_t at, size_t n) {
        CudaBackend::parallel_copy(to + at, piece, n);
      });
    }
    backend_->download_bytes_ += static_cast<int64_t>(bytes);
    return Status::ok();
  }();
  backend_->download_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  release();
  return status_;
}

}  // namespace seedvae::gpu::detail
