// Progress reporting from the engine (worker thread) to whoever listens (CLI on stderr, the UI
// through a throttled Qt adapter). Implementations must be cheap and must not block.
#pragma once

#include <cstdint>
#include <string_view>

namespace seedvae {

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // `done` of `total` units of `stage` ("encode", "decode", ...) are finished. Called on the
  // engine's thread.
  virtual void report(std::string_view stage, int64_t done, int64_t total) = 0;
};

// Discards everything; the default when a caller passes no sink.
class NullProgress final : public ProgressSink {
 public:
  void report(std::string_view, int64_t, int64_t) override {}
};

}  // namespace seedvae
