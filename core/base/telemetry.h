// Engine telemetry for the UI graphs and the benchmark: per stage (top-level block), per chunk and
// per tile timing and memory. Emitted on the engine thread; sinks must be cheap and non-blocking
// (the UI's sink coalesces into a bounded queue). When no sink is installed nothing is measured and
// no synchronisation is added.
//
// Stage samples: VaeModel emits one after each top-level block ("encoder.down_blocks.2",
// "decoder.conv_out", ...; a block run in pieces by chunked upsampling gives one sample per
// piece), labelled with the scheduler's chunk and tile. The stages of a chunk are consecutive:
// each starts where the previous one ended. wall_ms is host time, measured after the backend's
// queue has drained; device_ms is the device time of the same span from the backend's own timer
// (Backend::begin_device_span/end_device_span: CUDA events on the compute stream), which lies
// inside the wall span, so device_ms <= wall_ms. device_ms = -1 means "no device timer" (the CPU
// backend, the dry-run backend) or a failed measurement (telemetry never fails a run).
//
// Draining the queue after every stage costs a device (the CUDA backend) the overlap of the
// host's launches with its work: about a quarter of the time per frame at 720p on an H100. A
// sink whose stage_timing() is kDeferred is not drained per stage: on a backend with a device
// timer each stage's device span is closed without waiting and read once the device has passed
// it -- at the latest when the chunk after it has been queued (VaeModel::end_summary) or the
// stream ends (VaeModel::flush_telemetry) -- so its samples arrive up to one chunk late, in
// order, with wall_ms = device_ms (the host's own time per stage is not separable without the
// drain) and the memory figures of the moment the stage was queued. Without a device timer
// (the CPU backend) kDeferred samples are the synchronised ones.
//
// Summary samples, only for sinks whose wants_summaries() is true (they overlap the stage samples,
// so a sink that sums every sample would count time twice): "chunk" -- one streamed chunk
// (core/schedule/streaming.h), from before its upload to after its download; "tile" -- one tile's
// chunk in blended tiling (core/schedule/tiled.h), likewise. Their device_ms is at least the sum of
// their stages' device_ms. Exact tiling runs layer by layer outside VaeModel's blocks and emits no
// samples of its own.
#pragma once

#include <cstdint>
#include <string>

namespace seedvae {

struct StageSample {
  std::string stage;               // "decoder.up_blocks.1", or "chunk" / "tile" summaries
  int64_t chunk = -1;              // temporal chunk index within the current stream
  int64_t tile = -1;               // spatial tile index, -1 when untiled
  double wall_ms = 0;              // host wall time of the stage (after device synchronisation)
  double device_ms = -1;           // device time from the backend's timer (CUDA events), -1: none
  int64_t current_bytes = 0;       // backend allocator, after the stage
  int64_t peak_bytes = 0;          // backend allocator peak since the run started
  int64_t device_used_bytes = -1;  // device-wide, -1 where unknown
};

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  virtual void on_stage(const StageSample& sample) = 0;
  // Whether the "chunk" / "tile" summary samples are wanted too (default: stage samples only).
  virtual bool wants_summaries() const { return false; }
  enum class StageTiming { kSynchronized, kDeferred };
  virtual StageTiming stage_timing() const { return StageTiming::kSynchronized; }
};

}  // namespace seedvae
