// Engine telemetry for the UI graphs and the benchmark: per stage (top-level block), per chunk and
// per tile timing and memory. Emitted on the engine thread; sinks must be cheap and non-blocking
// (the UI's sink coalesces into a bounded queue). When no sink is installed nothing is measured and
// no synchronisation is added.
#pragma once

#include <cstdint>
#include <string>

namespace seedvae {

struct StageSample {
  std::string stage;               // "decoder.up_blocks.1", or "chunk" / "tile" summaries
  int64_t chunk = -1;              // temporal chunk index within the current stream
  int64_t tile = -1;               // spatial tile index, -1 when untiled
  double wall_ms = 0;              // host wall time of the stage (after device synchronisation)
  double device_ms = -1;           // device time from events, -1 where the backend has none
  int64_t current_bytes = 0;       // backend allocator, after the stage
  int64_t peak_bytes = 0;          // backend allocator peak since the run started
  int64_t device_used_bytes = -1;  // device-wide, -1 where unknown
};

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  virtual void on_stage(const StageSample& sample) = 0;
};

}  // namespace seedvae
