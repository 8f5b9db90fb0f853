// A Backend that forwards every op to another backend and probes the contracts the CPU backend's
// no-op defaults cannot show:
//  * download_frames_async is truly deferred (the async-tiles contract, core/schedule/
//    copy_pipeline.h): at the call the destination frames are poisoned with NaN and the real data
//    only lands in PendingCopy::wait() -- a scheduler that reads a tile or chunk before waiting
//    for it, or drops a copy it still needs, produces NaNs. Copies started, waited and in flight
//    are counted.
//  * offload_hint calls are recorded (the storages hinted, in order), so tests can check that the
//    model hints exactly the causal state it keeps, once, after its last use in the chunk.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/forwarding_backend.h"

namespace seedvae::test {

class ProbeBackend final : public ForwardingBackend {
 public:
  explicit ProbeBackend(Backend& inner) : ForwardingBackend(inner) {}

  int started = 0, waited = 0, in_flight = 0, max_in_flight = 0;
  std::vector<const Storage*> hinted;  // offload_hint, in call order
  // graphs_enabled() answers `graphs`, so VaeModel updates causal state in place
  // (copy_frames_into, forwarded); begin_capture() refuses and is counted, so the model must fall
  // back to eager chunks.
  bool graphs = false;
  int capture_attempts = 0;

  std::string name() const override { return "deferred copies over " + inner_.name(); }

  Result<std::unique_ptr<PendingCopy>> download_frames_async(const Tensor& t, HostTensor& dst,
                                                             int64_t frame_offset) override {
    SEEDVAE_TRY(check_download_frames(t.shape, dst, frame_offset));
    auto copy = std::make_unique<Copy>(*this, t, dst, frame_offset);
    // poison the destination frames until wait()
    const Shape& s = t.shape;
    const int64_t plane = s[2] * s[3] * s[4], stride = dst.shape()[2] * s[3] * s[4];
    float* base = dst.data<float>() + frame_offset * s[3] * s[4];
    for (int64_t i = 0; i < s[0] * s[1]; ++i) {
      std::fill_n(base + i * stride, plane, std::numeric_limits<float>::quiet_NaN());
    }
    ++started;
    max_in_flight = std::max(max_in_flight, ++in_flight);
    return std::unique_ptr<PendingCopy>(std::move(copy));
  }

  bool graphs_enabled() const override { return graphs; }
  Status begin_capture() override {
    ++capture_attempts;
    return unsupported("the probe backend records no graphs");
  }
  Status offload_hint(const Tensor& t) override {
    hinted.push_back(t.storage.get());
    return inner_.offload_hint(t);
  }

 private:
  class Copy final : public PendingCopy {
   public:
    Copy(ProbeBackend& b, Tensor t, HostTensor& dst, int64_t offset)
        : b_(b),
          t_(std::move(t)),
          dst_(static_cast<float*>(dst.raw())),
          dst_shape_(dst.shape()),
          offset_(offset) {}
    ~Copy() override {
      if (!done_) --b_.in_flight;
    }
    Status wait() override {
      if (done_) return status_;
      done_ = true;
      --b_.in_flight;
      ++b_.waited;
      // download into a scratch clip of the destination's shape, then copy the frames over
      // (the destination's bytes are addressed directly: the HostTensor may have moved)
      auto scratch = HostTensor::create(DType::kF32, dst_shape_);
      if (!scratch) return status_ = scratch.take_status();
      status_ = b_.inner_.download_frames(t_, *scratch, offset_);
      if (!status_) return status_;
      const Shape& s = t_.shape;
      const int64_t frame = s[3] * s[4], plane = s[2] * frame, stride = dst_shape_[2] * frame;
      for (int64_t i = 0; i < s[0] * s[1]; ++i) {
        std::memcpy(dst_ + i * stride + offset_ * frame,
                    scratch->data<float>() + i * stride + offset_ * frame,
                    static_cast<size_t>(plane) * sizeof(float));
      }
      t_ = {};
      return status_;
    }

   private:
    ProbeBackend& b_;
    Tensor t_;
    float* dst_;
    Shape dst_shape_;
    int64_t offset_;
    bool done_ = false;
    Status status_;
  };
};

}  // namespace seedvae::test
