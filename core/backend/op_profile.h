// A Backend that times every op of another one (a diagnostic: `seedvae_gpu_bench wanbench
// --op-profile`). Each op runs between two synchronize() calls, so its wall time is its device
// time plus one launch latency; ops are grouped by name and input shape. The synchronisation
// removes the overlap of host and device work, so a profiled run is slower than a plain one: the
// table says where the device time goes, not what the run costs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/forwarding_backend.h"

namespace seedvae {

class OpProfileBackend final : public ForwardingBackend {
 public:
  explicit OpProfileBackend(Backend& inner) : ForwardingBackend(inner) {}

  struct Row {
    std::string op, shape;
    int64_t calls = 0;
    double ms = 0;
  };
  // The rows, slowest first.
  std::vector<Row> rows() const {
    std::vector<Row> out;
    for (const auto& [key, r] : rows_) out.push_back(r);
    std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
    return out;
  }
  double total_ms() const {
    double t = 0;
    for (const auto& [key, r] : rows_) t += r.ms;
    return t;
  }
  void clear() { rows_.clear(); }

  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override {
    return timed("conv3d " + w.shape.to_string(), x, [&] { return inner_.conv3d(x, w, b, p); });
  }
  Result<Tensor> causal_pad(const Tensor& x, const Tensor* memory, int frames) override {
    return timed("causal_pad", x, [&] { return inner_.causal_pad(x, memory, frames); });
  }
  Result<Tensor> slice_frames(const Tensor& x, int64_t begin, int64_t end) override {
    return timed("slice_frames", x, [&] { return inner_.slice_frames(x, begin, end); });
  }
  Result<Tensor> concat_frames(const Tensor& a, const Tensor& b) override {
    return timed("concat_frames", a, [&] { return inner_.concat_frames(a, b); });
  }
  Status add_inplace(Tensor& acc, const Tensor& x) override {
    return timed("add_inplace", x, [&] { return inner_.add_inplace(acc, x); });
  }
  Result<Tensor> group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const GroupNormParams& p) override {
    return timed("group_norm", x, [&] { return inner_.group_norm(x, gamma, beta, p); });
  }
  Result<Tensor> attention(const Tensor& x, const AttentionWeights& w) override {
    return timed("attention", x, [&] { return inner_.attention(x, w); });
  }
  Result<Tensor> zeros(const Shape& shape) override {
    Tensor none;
    none.shape = shape;
    return timed("zeros", none, [&] { return inner_.zeros(shape); });
  }
  Result<Tensor> rms_norm(const Tensor& x, const Tensor& gamma, const RmsNormParams& p) override {
    return timed(p.silu ? "rms_norm+silu" : "rms_norm", x,
                 [&] { return inner_.rms_norm(x, gamma, p); });
  }
  Result<Tensor> upsample_nearest(const Tensor& x) override {
    return timed("upsample_nearest", x, [&] { return inner_.upsample_nearest(x); });
  }
  Result<Tensor> frames_from_channels(const Tensor& x, int factor) override {
    return timed("frames_from_channels", x, [&] { return inner_.frames_from_channels(x, factor); });
  }
  Result<Tensor> patchify(const Tensor& x, int p) override {
    return timed("patchify", x, [&] { return inner_.patchify(x, p); });
  }
  Result<Tensor> unpatchify(const Tensor& x, int p) override {
    return timed("unpatchify", x, [&] { return inner_.unpatchify(x, p); });
  }
  Result<Tensor> avg_down(const Tensor& x, const AvgDownParams& p) override {
    return timed("avg_down", x, [&] { return inner_.avg_down(x, p); });
  }
  Result<Tensor> dup_up(const Tensor& x, const DupUpParams& p) override {
    return timed("dup_up", x, [&] { return inner_.dup_up(x, p); });
  }
  Result<Tensor> rms_attention(const Tensor& x, const RmsAttentionWeights& w) override {
    return timed("rms_attention", x, [&] { return inner_.rms_attention(x, w); });
  }

 private:
  template <typename F>
  auto timed(const std::string& op, const Tensor& x, F&& f) -> decltype(f()) {
    (void)inner_.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    auto r = f();
    (void)inner_.synchronize();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const std::string shape = x.shape.to_string();
    Row& row = rows_[op + " " + shape];
    row.op = op;
    row.shape = shape;
    ++row.calls;
    row.ms += ms;
    return r;
  }

  std::map<std::string, Row> rows_;
};

}  // namespace seedvae
