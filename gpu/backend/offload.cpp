// The CUDA backend's causal-state offload (CudaOptions::offload_state): slices go to pinned host
// memory on a copy stream; they come back in the order they left (the model consumes them in
// that order in the next chunk), prefetched on a second copy stream while at most
// offload_window_mib of them are on the device. A state machine of its own: the hint, the copy
// out, the window that brings state back (pump, run by every op's thread check), the copy back
// when an op reads the state, and the allocator's reclaim hook that drops prefetched copies.
#include "gpu/backend/cuda_backend_impl.h"
#include "gpu/cuda_check.h"

namespace seedvae::gpu::detail {

// Causal state not read before the next chunk: with offloading on, large slices go to pinned
// host memory and come back (prefetched in hint order) when the next chunk needs them.
Status CudaBackend::offload_hint(const Tensor& t) {
  if (!opt_.offload_state) return Status::ok();
  SEEDVAE_TRY(check_thread("offload_hint"));
  const auto* st = dynamic_cast<const CudaStorage*>(t.storage.get());
  if (st && st->host) return Status::ok();  // already on the host
  SEEDVAE_TRY(activation_of(t, "offload_hint", "state").take_status());
  const int64_t bytes = t.shape.numel() * dtype_size(t.dtype);
  if (bytes <= 0 || bytes < opt_.offload_min_bytes) return Status::ok();
  return offload(t, "offload_hint " + str(t.shape));
}

Status CudaBackend::offload(const Tensor& t, const std::string& what) {
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
  SEEDVAE_CUDA_TRY(copy_pinned_async(hc->pinned, st->ptr(), cudaMemcpyDeviceToHost, d2h_stream_),
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
Status CudaBackend::bring_back(CudaStorage* st, bool wait, const std::string& what) {
  HostCopy* hc = st->host.get();
  if (!st->block) {
    SEEDVAE_ASSIGN_OR_RETURN(st->block,
                             alloc_->allocate(hc->bytes, what + " (causal state back from host)"));
    st->offset = 0;
    cudaEvent_t ready = nullptr;
    SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), what);
    // the block may still be in use by queued compute work: copy only after it
    SEEDVAE_CUDA_TRY(cudaEventRecord(ready, stream_), what);
    SEEDVAE_CUDA_TRY(cudaStreamWaitEvent(h2d_stream_, ready, 0), what);
    cudaEventDestroy(ready);
    SEEDVAE_CUDA_TRY(cudaStreamWaitEvent(h2d_stream_, hc->d2h_done, 0), what);
    SEEDVAE_CUDA_TRY(
        copy_pinned_async(hc->pinned, st->block->ptr, cudaMemcpyHostToDevice, h2d_stream_),
        what + " prefetch");
    if (!hc->h2d_done) {
      SEEDVAE_CUDA_TRY(cudaEventCreateWithFlags(&hc->h2d_done, cudaEventDisableTiming), what);
    }
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

void CudaBackend::pump() {
  while (!offloaded_.empty()) {
    auto sp = offloaded_.front().lock();
    if (sp && sp->host && !sp->host->consumed) break;
    offloaded_.pop_front();
  }
  if (prefetch_paused_) return;  // evicted for room: wait for the next consumption
  struct InPrefetch {            // a prefetch never evicts other prefetched state for its own room
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
int64_t CudaBackend::evict_prefetched() {
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

}  // namespace seedvae::gpu::detail
