// The compute interface the VAE model, the tiling/slicing scheduler and the UI drive. One
// implementation per device: the CPU backend (core/cpu, oneDNN) defines correctness; the CUDA
// backend (gpu/) implements the same ops. Ops sit at the granularity where a backend may want to
// fuse (GroupNorm+SiLU, a whole attention block), so each backend chooses its own kernels.
//
// Threading: a Backend and every Tensor it made belong to the thread that created the backend
// (for CUDA: the thread that owns the device). Nothing here is thread-safe.
//
// Layout contract: a Tensor's logical shape is PyTorch's ([N, C, T, H, W] for activations,
// [Cout, Cin, kT, kH, kW] for conv weights, [out, in] for Linear weights, [C] for biases and norm
// affine parameters). Its physical layout and dtype are the backend's business; upload/download
// convert from/to the contiguous host layout.
//
// Implementations: CpuBackend (core/cpu, the reference), CudaBackend (gpu/), CountingBackend
// (shapes, bytes and FLOPs only: the planner's dry run), ExactTilingBackend (core/schedule: runs
// each op tile by tile on another backend) and the tests' probes.
//
// Required ops are pure virtual. The optional capabilities have defaults that keep every caller
// free of backend checks -- the model and the schedulers call them unconditionally:
//  * download_frames / download_frames_async: the default downloads and copies at once; the CUDA
//    backend transfers on a copy stream into pinned memory (async tiles), which is why the hook
//    exists at all -- the schedulers' overlap of copies with compute needs it;
//  * copy_frames_into and group_norm_inplace: the model's lean convolutions and in-place causal
//    state (graphs) write into existing tensors; the default refuses / computes a new tensor, and
//    the CPU and CUDA backends implement both;
//  * offload_hint: the model says which causal state it will not read before the next chunk; the
//    default keeps it, the CUDA backend may move it to host memory (--offload-state);
//  * the graph calls (begin_capture ... address_of): the default refuses, so VaeModel records
//    chunks only on a backend that says graphs_enabled() (CUDA with --cuda-graphs);
//  * device spans: telemetry's device time; -1 (no timer) by default, CUDA events on CUDA.
// They stay on this interface rather than in a side interface because the model and schedulers
// are written once for every backend: a capability query would move the same branches into them.
//
// Tensor and the ops' parameter structs are in op_params.h, the argument checks every backend
// shares in op_checks.h; both are included here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/backend/op_checks.h"
#include "core/backend/op_params.h"
#include "core/base/status.h"
#include "core/tensor/host_tensor.h"

namespace seedvae {

// A device-to-host copy in flight (Backend::download_frames_async). Belongs to the backend's
// thread and must not outlive the backend.
class PendingCopy {
 public:
  // Waits for the copy and completes it; after an OK status the frames are in the destination.
  // A second call returns the first call's status without copying again.
  virtual Status wait() = 0;
  // Dropping a copy without wait() waits for any transfer still writing backend-owned memory and
  // discards the data; it never writes the destination.
  virtual ~PendingCopy() = default;
};

struct MemoryStats {
  int64_t current_bytes = 0;       // live tensors allocated by this backend
  int64_t peak_bytes = 0;          // since the last reset_peak()
  int64_t device_used_bytes = -1;  // device-wide, -1 where unknown (CPU)
  int64_t device_total_bytes = -1;
  // Device level (-1 where unknown): what the backend's allocator holds from the driver now and at
  // its peak since reset_peak() (live tensors + cache + library workspaces), the device-wide use
  // before the backend existed (the baseline a device-level peak is measured from), what the
  // context and library handles took at creation, and the device-level budget the backend
  // enforces (context, handles and reserve together; 0: none).
  int64_t reserved_bytes = -1;
  int64_t peak_reserved_bytes = -1;
  int64_t device_baseline_bytes = -1;
  int64_t fixed_bytes = -1;
  int64_t budget_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu (oneDNN 2.6, 2 threads)", "cuda:0 NVIDIA H100 ...".
  virtual std::string name() const = 0;
  // dtype in which activations are kept (fp32 on the CPU backend).
  virtual DType activation_dtype() const = 0;

  // ---- memory -----------------------------------------------------------------------------
  // Copies an activation or latent into the backend (converted to activation_dtype()).
  virtual Result<Tensor> upload(const HostTensor& host) = 0;
  // Copies a parameter into the backend; `name` is its state-dict name, for messages and for
  // backends that repack weights (e.g. into a convolution-friendly layout).
  virtual Result<Tensor> upload_weight(const HostTensor& host, std::string_view name) = 0;
  // Copies back to the host as contiguous fp32 NCDHW (synchronises).
  virtual Result<HostTensor> download(const Tensor& t) = 0;
  // Copies a 5-D tensor [N, C, T, H, W] into frames [frame_offset, frame_offset + T) of `dst`, an
  // fp32 host tensor [N, C, T_dst, H, W] (streams write each chunk straight into the clip's
  // output). The default downloads and copies; backends may transfer directly.
  virtual Status download_frames(const Tensor& t, HostTensor& dst, int64_t frame_offset);
  // download_frames() that may return before the data has arrived ("async tiles"): the copy is
  // queued behind the work that produces `t` and completes in PendingCopy::wait(), so the host
  // can queue the next tile or chunk and finish the previous one while the device computes.
  // Until wait() has returned, `dst` must stay alive and its frames [frame_offset, +T) must be
  // neither read nor written; `t` itself may be dropped at once (the copy keeps what it needs).
  // Arguments are checked here, as download_frames() does. The default copies synchronously and
  // returns a finished copy; the CUDA backend copies on its own stream through pinned memory.
  virtual Result<std::unique_ptr<PendingCopy>> download_frames_async(const Tensor& t,
                                                                     HostTensor& dst,
                                                                     int64_t frame_offset);

  // Copies `src`, an activation of `from` -- another backend, usually of this kind on another
  // device, owned by another thread -- into a new tensor of this backend with the same values
  // (the pipelined decode hands each chunk's activation from one device to the next). `from`'s
  // thread must have finished the work that writes src (Backend::synchronize) and must neither
  // use nor release src until this returns. The default copies through host memory with
  // from.download() on this thread, which suits a backend whose download reads only the tensor
  // (the CPU backend); the CUDA backend copies device to device (peer to peer between cards).
  virtual Result<Tensor> import_tensor(Backend& from, const Tensor& src);

  // ---- ops (shapes: x [N, C, T, H, W]) ------------------------------------------------------
  // y = conv3d(x, w) + b, w [Cout, Cin, kT, kH, kW], no temporal padding. With
  // p.model_output a 16-bit backend returns y in fp32 (y.dtype).
  virtual Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                                const Conv3dParams& p) = 0;
  // Causal temporal context: returns [memory, x] along T if `memory` is given, else x with
  // `frames` copies of its first frame prepended.
  virtual Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) = 0;
  // Frames [begin, end) of x (a copy).
  virtual Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) = 0;
  // Copies frames [src_frame, src_frame + count) of src into frames [dst_frame, +count) of dst,
  // in place (same N, C, H, W; dst and src may be one tensor if the ranges do not overlap).
  // VaeModel updates causal state with it when chunks run as graphs, so the state keeps its
  // memory addresses. The default refuses (a backend without graphs needs it nowhere).
  virtual Status copy_frames_into(Tensor& dst, int64_t dst_frame, const Tensor& src,
                                  int64_t src_frame, int64_t count);
  // [a, b] along T (same N, C, H, W).
  virtual Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) = 0;
  // Per-frame GroupNorm with affine gamma/beta [C], optionally followed by SiLU.
  virtual Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const GroupNormParams& p) = 0;
  // group_norm() written over x (whose old values nobody reads again: the caller owns x). The
  // default computes a new tensor and makes x refer to it (correct, no memory saved); backends
  // whose kernels allow it normalise in place.
  virtual Status group_norm_inplace(Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const GroupNormParams& p);
  // acc += x, in place (same shape).
  virtual Status add_inplace(Tensor& acc, const Tensor& x) = 0;
  // Depth-to-space of Upsample3D: x [N, 4*Z*C, T, H, W] -> [N, C, T*Z, 2H, 2W] with input channel
  // k = ((ih*2 + iw)*Z + it)*C + c (docs/model.md §2.1); if drop_frame_1 (Z = 2, first chunk)
  // output frame 1 is removed, giving 2T-1 frames. `context_frames`: as
  // GroupNormParams::context_frames (the output feeds the upsampler's causal convolution; 0 when
  // it is not padded).
  virtual Result<Tensor> depth_to_space(const Tensor& x, int temporal_factor, bool drop_frame_1,
                                        int context_frames = 2) = 0;
  // x + to_out(softmax(q k^T / sqrt(C)) v) with q, k, v projections of GroupNorm(x), per frame,
  // tokens = H*W.
  virtual Result<Tensor> attention(const Tensor& x, const AttentionWeights& w) = 0;

  // ---- the Wan VAEs' ops (docs/model.md §10). Not every backend has them: the
  // defaults return kUnsupported naming the backend and the op. -----------------------------
  // An activation of zeros (the Wan causal convolutions' initial memory: zero frames, not
  // replicated ones).
  virtual Result<Tensor> zeros(const Shape& shape);
  // RMS norm over the channels of each position with gain gamma [C], optionally then SiLU
  // (RmsNormParams).
  virtual Result<Tensor> rms_norm(const Tensor& x, const Tensor& gamma, const RmsNormParams& p);
  // Nearest-neighbour 2x spatial upsampling of every frame: y[.., 2i + a, 2j + b] = x[.., i, j].
  virtual Result<Tensor> upsample_nearest(const Tensor& x);
  // x [N, f*C, T, H, W] -> [N, C, f*T, H, W], y[c, f*t + i] = x[i*C + c, t] (the Wan temporal
  // upsampler's time_conv output: the first C channels are the earlier frame).
  virtual Result<Tensor> frames_from_channels(const Tensor& x, int factor);
  // Wan2.2's pixel patchify: y[c*p*p + dx*p + dy, t, i, j] = x[c, t, p*i + dy, p*j + dx] (the
  // column offset is the more significant); unpatchify is its exact inverse.
  virtual Result<Tensor> patchify(const Tensor& x, int p);
  virtual Result<Tensor> unpatchify(const Tensor& x, int p);
  // Wan2.2's AvgDown3D and DupUp3D level shortcuts (AvgDownParams, DupUpParams).
  virtual Result<Tensor> avg_down(const Tensor& x, const AvgDownParams& p);
  virtual Result<Tensor> dup_up(const Tensor& x, const DupUpParams& p);
  // x + proj(softmax(q k^T / sqrt(C)) v) with q, k, v projections of rms_norm(x, gamma), per
  // frame, tokens = H*W, one head of width C (the Wan middle-block attention).
  virtual Result<Tensor> rms_attention(const Tensor& x, const RmsAttentionWeights& w);

  // Causal state the model will not read again before the next chunk (VaeModel stores it after
  // its last use in this chunk; with chunked upsampling, at the last piece). A backend may move
  // it off the device and bring it back ahead of use, in the order of the hints (the model reads
  // its state in the same order every chunk); reading it earlier is still correct, only slower.
  // The default keeps it where it is; the CUDA backend offloads it with CudaOptions::offload_state.
  virtual Status offload_hint(const Tensor& t) {
    (void)t;
    return Status::ok();
  }

  // ---- graphs: record a chunk's queued work once, replay it for later chunks ----------------
  // True when the backend records and replays work and the user enabled it (the CUDA backend
  // with CudaOptions::cuda_graphs). VaeModel then runs chunks through begin_capture/end_capture
  // and launch_graph (vae_model.h says when); other backends never see these calls.
  virtual bool graphs_enabled() const { return false; }
  // Between begin_capture() and end_capture() ops are recorded, not run: their outputs hold no
  // data until the graph is launched, and memory they allocate comes from a pool that only
  // graphs use, so a replay never overwrites a tensor allocated outside a capture.
  virtual Status begin_capture();
  // Ends the recording. With `keep` (and a recording that succeeded) returns a graph id for
  // launch_graph(); otherwise discards it and returns an error saying why. Nothing recorded has
  // run either way, and the backend is usable afterwards.
  virtual Result<int64_t> end_capture(bool keep);
  // Queues the recorded work again: the same ops on the same memory addresses.
  virtual Status launch_graph(int64_t id);
  virtual void release_graph(int64_t id) { (void)id; }
  // Where a tensor's data lives (a device address on the CUDA backend): a recorded graph is valid
  // for state tensors at the addresses it was recorded with. Default: the storage's identity.
  virtual uintptr_t address_of(const Tensor& t) const {
    return reinterpret_cast<uintptr_t>(t.storage.get());
  }

  // ---- synchronisation and telemetry --------------------------------------------------------
  // Waits for all queued work (no-op on the CPU backend).
  virtual Status synchronize() { return Status::ok(); }
  // Writes what the backend has tuned so far (the CUDA backend: its cuDNN autotune choices) where
  // backends made later load it, so that they run the same algorithms -- the pipelined decode's
  // devices then compute what this one would. Nothing to do by default.
  virtual Status save_tuning() { return Status::ok(); }
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak() = 0;
  // Device-wide used bytes, callable from any thread while the owner runs (the CUDA backend reads
  // NVML, which touches neither its context nor its stream), so a sampler can catch the
  // device-level peak between two ops; empty where the backend has no device.
  virtual std::function<int64_t()> device_memory_probe() const { return {}; }
  // Returns cached device memory to the driver (between two measured ops); default: nothing.
  virtual void release_cached_memory() {}

  // The device's time of the streamed chunks run so far, each from its upload to its download
  // (the device's own clock, e.g. CUDA events; the transfers' host side excluded), in ms; -1 on a
  // backend without a device timer. Read before and after a phase, it is the phase's device time.
  virtual double device_busy_ms() const { return -1; }

  // Device time of a span of queued work, for telemetry (called only while a TelemetrySink is
  // installed, so it costs nothing otherwise). begin_device_span() marks the current end of the
  // backend's queue and returns a handle (>= 0); close_device_span(handle) marks it again without
  // waiting; read_device_span(handle, wait) returns the device time between the two marks in
  // milliseconds once the device has passed the second one -- waiting for it if `wait`, else
  // kSpanPending while it has not (the handle stays valid) -- and frees the handle.
  // end_device_span(handle) is close + read with waiting. Spans may nest; one never ended costs
  // nothing (handles are recycled: the oldest of more than kMaxOpenDeviceSpans open or unread
  // spans expires). None of them fails the run: -1 (no span / no time) on a backend without a
  // device timer (the default, e.g. the CPU backend), for an unknown or expired handle, and on
  // any device error while timing.
  static constexpr int kMaxOpenDeviceSpans = 64;
  static constexpr double kSpanPending = -2;
  virtual int64_t begin_device_span() { return -1; }
  virtual bool close_device_span(int64_t span) {
    (void)span;
    return false;
  }
  virtual double read_device_span(int64_t span, bool wait) {
    (void)span;
    (void)wait;
    return -1;
  }
  double end_device_span(int64_t span) {
    return close_device_span(span) ? read_device_span(span, true) : -1;
  }

 protected:
  // kUnsupported: "<backend name> has no <op> op ..." (the Wan ops' defaults).
  Status wan_op_unsupported(std::string_view op) const;
};

}  // namespace seedvae
