#include "core/backend/fp8_numerics.h"

#include <algorithm>
#include <cmath>

#include "core/backend/forwarding_backend.h"

namespace seedvae {

float round_to_e4m3(float v) {
  if (std::isnan(v)) return v;
  const float a = std::fabs(v);
  constexpr float kMax = 448.f;
  float r;
  if (a >= kMax) {
    r = kMax;
  } else {
    // e4m3: 3 mantissa bits, exponent bias 7, normals from 2^-6, subnormals in steps of 2^-9
    int e = 0;
    std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    const int exponent = std::max(e - 1, -6);
    const float step = std::ldexp(1.f, exponent - 3);
    r = std::nearbyint(a / step) * step;  // the default rounding mode: to nearest, ties to even
    r = std::min(r, kMax);
  }
  return std::copysign(r, v);
}

void fake_quantize_e4m3(float* data, int64_t n, int64_t rows) {
  if (n <= 0 || rows <= 0 || n % rows != 0) return;
  const int64_t len = n / rows;
  for (int64_t r = 0; r < rows; ++r) {
    float* p = data + r * len;
    float amax = 0;
    for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(p[i]));
    if (!(amax > 0) || !std::isfinite(amax)) continue;
    const float scale = amax / 448.f;
    for (int64_t i = 0; i < len; ++i) p[i] = round_to_e4m3(p[i] / scale) * scale;
  }
}

namespace {

class Fp8NumericsBackend final : public ForwardingBackend {
 public:
  Fp8NumericsBackend(Backend& inner, std::unique_ptr<Backend> owned)
      : ForwardingBackend(inner), owned_(std::move(owned)) {}

  std::string name() const override { return inner_.name() + " with FP8 numerics (emulated)"; }

  Result<Tensor> conv3d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const Conv3dParams& p) override {
    const bool fp8 = !p.model_output && x.shape.rank() == 5 && w.shape.rank() == 5 &&
                     w.shape[0] >= 16 && w.shape[1] >= 16;
    if (!fp8) return inner_.conv3d(x, w, b, p);
    SEEDVAE_ASSIGN_OR_RETURN(const Tensor wq, quantized_weight(w));
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor xh, inner_.download(x));
    fake_quantize_e4m3(xh.f32().data(), xh.shape().numel(), 1);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor xq, inner_.upload(xh));
    return inner_.conv3d(xq, wq, b, p);
  }

 private:
  // The weight rounded per output channel, made on its first use and kept while the original
  // lives (keyed by its storage).
  Result<Tensor> quantized_weight(const Tensor& w) {
    auto it = weights_.find(w.storage.get());
    if (it != weights_.end() && !it->second.original.expired()) return it->second.rounded;
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor wh, inner_.download(w));
    fake_quantize_e4m3(wh.f32().data(), wh.shape().numel(), wh.shape()[0]);
    SEEDVAE_ASSIGN_OR_RETURN(Tensor wq, inner_.upload_weight(wh, "fp8-rounded weight"));
    Entry& e = weights_[w.storage.get()];
    e.original = w.storage;
    e.rounded = std::move(wq);
    return e.rounded;
  }

  struct Entry {
    std::weak_ptr<Storage> original;
    Tensor rounded;
  };
  std::unique_ptr<Backend> owned_;
  std::map<const Storage*, Entry> weights_;
};

}  // namespace

std::unique_ptr<Backend> make_fp8_numerics_backend(Backend& inner) {
  return std::make_unique<Fp8NumericsBackend>(inner, nullptr);
}

std::unique_ptr<Backend> make_fp8_numerics_backend(std::unique_ptr<Backend> inner) {
  Backend& ref = *inner;
  return std::make_unique<Fp8NumericsBackend>(ref, std::move(inner));
}

}  // namespace seedvae
