// The CUDA backend's recording and timing: CUDA graphs (a capture records the compute stream's
// work in relaxed mode, so the captures' pool may still cudaMalloc; everything a chunk does is on
// that stream and the ops never synchronise), tensor addresses for graph replay, stream
// synchronisation, memory statistics and the device spans of telemetry.
#include <algorithm>
#include <string>
#include <thread>

#include "gpu/backend/cuda_backend_impl.h"
#include "gpu/cuda_check.h"

namespace seedvae::gpu::detail {

Status CudaBackend::begin_capture() {
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

Result<int64_t> CudaBackend::end_capture(bool keep) {
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

Status CudaBackend::launch_graph(int64_t id) {
  SEEDVAE_TRY(check_thread("launch_graph"));
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return internal_error("launch_graph: no graph " + std::to_string(id));
  SEEDVAE_CUDA_TRY(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
  alloc_->note_graph_replay();
  ++graph_launches_;
  return Status::ok();
}

void CudaBackend::release_graph(int64_t id) {
  auto it = graphs_.find(id);
  if (it == graphs_.end()) return;
  cudaStreamSynchronize(stream_);  // a launch in flight still uses it
  cudaGraphExecDestroy(it->second);
  graphs_.erase(it);
  // The last graph gone: its pool goes back too (blocks still held by tensors return to the
  // pool when dropped and are released with the allocator).
  if (graphs_.empty() && !capturing_) alloc_->release_graph_pool();
}

uintptr_t CudaBackend::address_of(const Tensor& t) const {
  auto* s = dynamic_cast<CudaStorage*>(t.storage.get());
  if (s == nullptr || !s->block) return Backend::address_of(t);
  return reinterpret_cast<uintptr_t>(s->ptr());
}

Status CudaBackend::synchronize() {
  SEEDVAE_CUDA_TRY(cudaStreamSynchronize(stream_), "synchronize");
  return Status::ok();
}

Status CudaBackend::save_tuning() {
  SEEDVAE_TRY(check_thread("save_tuning"));
  return conv_->save_cache();
}

MemoryStats CudaBackend::memory_stats() const {
  MemoryStats m;
  const AllocatorStats a = alloc_->stats();
  m.current_bytes = a.live_bytes;
  m.peak_bytes = a.peak_live_bytes;
  m.reserved_bytes = a.reserved_bytes;
  m.peak_reserved_bytes = a.peak_reserved_bytes;
  m.device_baseline_bytes = baseline_bytes_;
  m.fixed_bytes = fixed_bytes_;
  m.budget_bytes = budget_bytes_;
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
    m.device_used_bytes = static_cast<int64_t>(total_b - free_b);
    m.device_total_bytes = static_cast<int64_t>(total_b);
  } else {
    cudaGetLastError();
  }
  return m;
}

// Device spans for telemetry: a pair of timing events per open or unread span, recorded on the
// compute stream, from a pool of at most kMaxOpenDeviceSpans pairs created on first use and
// reused (no event is created or destroyed per stage). A failure yields -1 and clears the
// (non-sticky) error, so the next op does not report it; timing never fails a run.
int64_t CudaBackend::begin_device_span() {
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
  if (slot == nullptr) {  // all in use: the oldest one expires
    slot = &*std::min_element(spans_.begin(), spans_.end(),
                              [](const SpanSlot& a, const SpanSlot& b) { return a.id < b.id; });
  }
  slot->id = -1;
  slot->closed = false;
  if (cudaEventRecord(slot->start, stream_) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  slot->id = next_span_++;
  return slot->id;
}

CudaBackend::SpanSlot* CudaBackend::find_span(int64_t span) {
  if (span < 0 || std::this_thread::get_id() != owner_) return nullptr;
  for (SpanSlot& sl : spans_) {
    if (sl.id == span) return &sl;
  }
  return nullptr;  // unknown or expired
}

bool CudaBackend::close_device_span(int64_t span) {
  SpanSlot* sl = find_span(span);
  if (sl == nullptr || sl->closed) return false;
  if (cudaEventRecord(sl->end, stream_) != cudaSuccess) {
    cudaGetLastError();
    sl->id = -1;
    return false;
  }
  sl->closed = true;
  return true;
}

double CudaBackend::read_device_span(int64_t span, bool wait) {
  SpanSlot* sl = find_span(span);
  if (sl == nullptr || !sl->closed) return -1;
  if (!wait) {
    const cudaError_t q = cudaEventQuery(sl->end);
    if (q == cudaErrorNotReady) {
      cudaGetLastError();
      return kSpanPending;
    }
  }
  sl->id = -1;
  float ms = 0;
  if ((wait ? cudaEventSynchronize(sl->end) : cudaSuccess) == cudaSuccess &&
      cudaEventElapsedTime(&ms, sl->start, sl->end) == cudaSuccess) {
    return ms;
  }
  cudaGetLastError();
  return -1;
}

}  // namespace seedvae::gpu::detail
