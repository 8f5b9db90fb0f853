#include "tests/reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace seedvae::ref {
namespace {

// Element (n, c, t, h, w) of a contiguous 5-D tensor.
struct View5 {
  const Shape& s;
  int64_t at(int64_t n, int64_t c, int64_t t, int64_t h, int64_t w) const {
    return (((n * s[1] + c) * s[2] + t) * s[3] + h) * s[4] + w;
  }
};

}  // namespace

HostTensor conv3d(const HostTensor& x, const HostTensor& w, const HostTensor* b,
                  const Conv3dParams& p) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  const int64_t N = xs[0], Cin = xs[1], T = xs[2], H = xs[3], W = xs[4];
  const int64_t Cout = ws[0], kT = ws[2], kH = ws[3], kW = ws[4];
  const int64_t To = (T - kT) / p.stride_t + 1;
  const int64_t Ho = (H + p.pad_top + p.pad_bottom - kH) / p.stride_h + 1;
  const int64_t Wo = (W + p.pad_left + p.pad_right - kW) / p.stride_w + 1;
  HostTensor y(DType::kF32, Shape{N, Cout, To, Ho, Wo});
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  float* yd = y.data<float>();
  const View5 xv{xs}, wv{ws}, yv{y.shape()};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Cout; ++co)
      for (int64_t to = 0; to < To; ++to)
        for (int64_t ho = 0; ho < Ho; ++ho)
          for (int64_t wo = 0; wo < Wo; ++wo) {
            double acc = b ? b->data<float>()[co] : 0.0;
            for (int64_t ci = 0; ci < Cin; ++ci)
              for (int64_t kt = 0; kt < kT; ++kt)
                for (int64_t kh = 0; kh < kH; ++kh)
                  for (int64_t kw = 0; kw < kW; ++kw) {
                    const int64_t t = to * p.stride_t + kt;
                    const int64_t h = ho * p.stride_h + kh - p.pad_top;    // padded coordinates
                    const int64_t ww = wo * p.stride_w + kw - p.pad_left;  // back to input ones
                    if (h < 0 || h >= H || ww < 0 || ww >= W) continue;    // zero padding
                    acc += static_cast<double>(xd[xv.at(n, ci, t, h, ww)]) *
                           static_cast<double>(wd[wv.at(co, ci, kt, kh, kw)]);
                  }
            yd[yv.at(n, co, to, ho, wo)] = static_cast<float>(acc);
          }
  return y;
}

HostTensor concat_frames(const HostTensor& a, const HostTensor& b) {
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  Shape so = sa;
  so[2] = sa[2] + sb[2];
  HostTensor y(DType::kF32, so);
  const View5 av{sa}, bv{sb}, yv{so};
  for (int64_t n = 0; n < so[0]; ++n)
    for (int64_t c = 0; c < so[1]; ++c)
      for (int64_t t = 0; t < so[2]; ++t)
        for (int64_t h = 0; h < so[3]; ++h)
          for (int64_t w = 0; w < so[4]; ++w)
            y.data<float>()[yv.at(n, c, t, h, w)] =
                t < sa[2] ? a.data<float>()[av.at(n, c, t, h, w)]
                          : b.data<float>()[bv.at(n, c, t - sa[2], h, w)];
  return y;
}

HostTensor causal_pad(const HostTensor& x, const HostTensor* memory, int frames) {
  if (memory) return concat_frames(*memory, x);
  const Shape& s = x.shape();
  Shape so = s;
  so[2] = s[2] + frames;
  HostTensor y(DType::kF32, so);
  const View5 xv{s}, yv{so};
  for (int64_t n = 0; n < so[0]; ++n)
    for (int64_t c = 0; c < so[1]; ++c)
      for (int64_t t = 0; t < so[2]; ++t)
        for (int64_t h = 0; h < so[3]; ++h)
          for (int64_t w = 0; w < so[4]; ++w)
            y.data<float>()[yv.at(n, c, t, h, w)] =
                x.data<float>()[xv.at(n, c, std::max<int64_t>(0, t - frames), h, w)];
  return y;
}

HostTensor slice_frames(const HostTensor& x, int64_t begin, int64_t end) {
  const Shape& s = x.shape();
  Shape so = s;
  so[2] = end - begin;
  HostTensor y(DType::kF32, so);
  const View5 xv{s}, yv{so};
  for (int64_t n = 0; n < so[0]; ++n)
    for (int64_t c = 0; c < so[1]; ++c)
      for (int64_t t = 0; t < so[2]; ++t)
        for (int64_t h = 0; h < so[3]; ++h)
          for (int64_t w = 0; w < so[4]; ++w)
            y.data<float>()[yv.at(n, c, t, h, w)] = x.data<float>()[xv.at(n, c, begin + t, h, w)];
  return y;
}

HostTensor add(const HostTensor& a, const HostTensor& b) {
  HostTensor y(DType::kF32, a.shape());
  for (int64_t i = 0; i < a.numel(); ++i) {
    y.data<float>()[i] = static_cast<float>(static_cast<double>(a.data<float>()[i]) +
                                            static_cast<double>(b.data<float>()[i]));
  }
  return y;
}

HostTensor group_norm(const HostTensor& x, const HostTensor* gamma, const HostTensor* beta,
                      int groups, double eps, bool silu) {
  const Shape& s = x.shape();
  const int64_t N = s[0], C = s[1], T = s[2], H = s[3], W = s[4];
  const int64_t cg = C / groups;
  HostTensor y(DType::kF32, s);
  const View5 v{s};
  const float* xd = x.data<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t g = 0; g < groups; ++g) {
        double sum = 0;
        for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w) sum += xd[v.at(n, c, t, h, w)];
        const double count = static_cast<double>(cg * H * W);
        const double mean = sum / count;
        double sq = 0;
        for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w) {
              const double d = xd[v.at(n, c, t, h, w)] - mean;
              sq += d * d;
            }
        const double var = sq / count;  // biased
        for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w) {
              double r = (xd[v.at(n, c, t, h, w)] - mean) / std::sqrt(var + eps);
              if (gamma) r *= gamma->data<float>()[c];
              if (beta) r += beta->data<float>()[c];
              if (silu) r = r / (1.0 + std::exp(-r));
              y.data<float>()[v.at(n, c, t, h, w)] = static_cast<float>(r);
            }
      }
  return y;
}

HostTensor depth_to_space(const HostTensor& x, int z, bool drop_frame_1) {
  const Shape& s = x.shape();
  const int64_t N = s[0], C = s[1] / (4 * z), T = s[2], H = s[3], W = s[4];
  // Full output first: out[n, c, f*z + it, 2h + ih, 2w + iw] = x[n, ((ih*2 + iw)*z + it)*C + c,
  // f, h, w].
  HostTensor full(DType::kF32, Shape{N, C, T * z, 2 * H, 2 * W});
  const View5 xv{s}, fv{full.shape()};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ih = 0; ih < 2; ++ih)
      for (int64_t iw = 0; iw < 2; ++iw)
        for (int64_t it = 0; it < z; ++it)
          for (int64_t c = 0; c < C; ++c)
            for (int64_t f = 0; f < T; ++f)
              for (int64_t h = 0; h < H; ++h)
                for (int64_t w = 0; w < W; ++w) {
                  const int64_t k = ((ih * 2 + iw) * z + it) * C + c;
                  full.data<float>()[fv.at(n, c, f * z + it, 2 * h + ih, 2 * w + iw)] =
                      x.data<float>()[xv.at(n, k, f, h, w)];
                }
  if (!drop_frame_1) return full;
  // Keep frame 0, then frames 2, 3, ...
  HostTensor first = slice_frames(full, 0, 1);
  HostTensor rest = slice_frames(full, 2, T * z);
  return concat_frames(first, rest);
}

HostTensor attention(const HostTensor& x, const AttentionHost& wt) {
  const Shape& s = x.shape();
  const int64_t N = s[0], C = s[1], T = s[2], H = s[3], W = s[4];
  const int64_t L = H * W;  // tokens
  HostTensor normed =
      wt.rms ? rms_norm(x, &wt.norm_weight, /*silu=*/false)
             : group_norm(x, &wt.norm_weight, &wt.norm_bias, wt.groups, wt.eps, /*silu=*/false);
  HostTensor y(DType::kF32, s);
  const View5 v{s};
  auto lin = [&](const HostTensor& wm, const HostTensor& bv, const std::vector<double>& in,
                 std::vector<double>& out) {  // in, out: [L, C]; out = in W^T + b
    for (int64_t i = 0; i < L; ++i)
      for (int64_t o = 0; o < C; ++o) {
        double acc = bv.data<float>()[o];
        for (int64_t k = 0; k < C; ++k) acc += in[i * C + k] * wm.data<float>()[o * C + k];
        out[i * C + o] = acc;
      }
  };
  std::vector<double> tok(L * C), q(L * C), k(L * C), val(L * C), a(L * C), o(L * C), p(L);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t c = 0; c < C; ++c)
            tok[(h * W + w) * C + c] = normed.data<float>()[v.at(n, c, t, h, w)];
      lin(wt.wq, wt.bq, tok, q);
      lin(wt.wk, wt.bk, tok, k);
      lin(wt.wv, wt.bv, tok, val);
      const double scale = 1.0 / std::sqrt(static_cast<double>(C));
      for (int64_t i = 0; i < L; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < L; ++j) {
          double d = 0;
          for (int64_t c = 0; c < C; ++c) d += q[i * C + c] * k[j * C + c];
          p[j] = d * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < L; ++j) {
          p[j] = std::exp(p[j] - mx);
          sum += p[j];
        }
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < L; ++j) acc += p[j] / sum * val[j * C + c];
          a[i * C + c] = acc;
        }
      }
      lin(wt.wo, wt.bo, a, o);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t c = 0; c < C; ++c)
            y.data<float>()[v.at(n, c, t, h, w)] =
                static_cast<float>(x.data<float>()[v.at(n, c, t, h, w)] + o[(h * W + w) * C + c]);
    }
  return y;
}

HostTensor rms_norm(const HostTensor& x, const HostTensor* gamma, bool silu) {
  const Shape& s = x.shape();
  const View5 v{s};
  HostTensor y(DType::kF32, s);
  const double scale = std::sqrt(static_cast<double>(s[1]));
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t t = 0; t < s[2]; ++t)
      for (int64_t h = 0; h < s[3]; ++h)
        for (int64_t w = 0; w < s[4]; ++w) {
          double ss = 0;
          for (int64_t c = 0; c < s[1]; ++c) {
            const double e = x.data<float>()[v.at(n, c, t, h, w)];
            ss += e * e;
          }
          const double norm = std::max(std::sqrt(ss), 1e-12);
          for (int64_t c = 0; c < s[1]; ++c) {
            double e = x.data<float>()[v.at(n, c, t, h, w)] / norm * scale;
            if (gamma) e *= gamma->data<float>()[c];
            if (silu) e = e / (1.0 + std::exp(-e));
            y.data<float>()[v.at(n, c, t, h, w)] = static_cast<float>(e);
          }
        }
  return y;
}

HostTensor upsample_nearest(const HostTensor& x) {
  const Shape& s = x.shape();
  const Shape o{s[0], s[1], s[2], 2 * s[3], 2 * s[4]};
  HostTensor y(DType::kF32, o);
  const View5 vi{s}, vo{o};
  for (int64_t n = 0; n < o[0]; ++n)
    for (int64_t c = 0; c < o[1]; ++c)
      for (int64_t t = 0; t < o[2]; ++t)
        for (int64_t h = 0; h < o[3]; ++h)
          for (int64_t w = 0; w < o[4]; ++w)
            y.data<float>()[vo.at(n, c, t, h, w)] = x.data<float>()[vi.at(n, c, t, h / 2, w / 2)];
  return y;
}

HostTensor frames_from_channels(const HostTensor& x, int f) {
  const Shape& s = x.shape();
  const int64_t C = s[1] / f;
  const Shape o{s[0], C, s[2] * f, s[3], s[4]};
  HostTensor y(DType::kF32, o);
  const View5 vi{s}, vo{o};
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < s[2]; ++t)
        for (int64_t i = 0; i < f; ++i)
          for (int64_t h = 0; h < s[3]; ++h)
            for (int64_t w = 0; w < s[4]; ++w)
              y.data<float>()[vo.at(n, c, f * t + i, h, w)] =
                  x.data<float>()[vi.at(n, i * C + c, t, h, w)];
  return y;
}

HostTensor patchify(const HostTensor& x, int p) {
  const Shape& s = x.shape();
  const Shape o{s[0], s[1] * p * p, s[2], s[3] / p, s[4] / p};
  HostTensor y(DType::kF32, o);
  const View5 vi{s}, vo{o};
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t t = 0; t < s[2]; ++t)
        for (int64_t i = 0; i < o[3]; ++i)
          for (int64_t j = 0; j < o[4]; ++j)
            for (int64_t dx = 0; dx < p; ++dx)
              for (int64_t dy = 0; dy < p; ++dy)
                y.data<float>()[vo.at(n, c * p * p + dx * p + dy, t, i, j)] =
                    x.data<float>()[vi.at(n, c, t, p * i + dy, p * j + dx)];
  return y;
}

HostTensor unpatchify(const HostTensor& x, int p) {
  const Shape& s = x.shape();
  const Shape o{s[0], s[1] / (p * p), s[2], s[3] * p, s[4] * p};
  HostTensor y(DType::kF32, o);
  const View5 vi{s}, vo{o};
  for (int64_t n = 0; n < o[0]; ++n)
    for (int64_t c = 0; c < o[1]; ++c)
      for (int64_t t = 0; t < o[2]; ++t)
        for (int64_t i = 0; i < s[3]; ++i)
          for (int64_t j = 0; j < s[4]; ++j)
            for (int64_t dx = 0; dx < p; ++dx)
              for (int64_t dy = 0; dy < p; ++dy)
                y.data<float>()[vo.at(n, c, t, p * i + dy, p * j + dx)] =
                    x.data<float>()[vi.at(n, c * p * p + dx * p + dy, t, i, j)];
  return y;
}

HostTensor avg_down(const HostTensor& x, int64_t cout, int ft, int fs) {
  const Shape& s = x.shape();
  const int64_t f = int64_t{ft} * fs * fs, g = s[1] * f / cout;
  const int64_t To = (s[2] + ft - 1) / ft, pad = To * ft - s[2];
  const Shape o{s[0], cout, To, s[3] / fs, s[4] / fs};
  HostTensor y(DType::kF32, o);
  const View5 vi{s}, vo{o};
  for (int64_t n = 0; n < o[0]; ++n)
    for (int64_t oc = 0; oc < cout; ++oc)
      for (int64_t t = 0; t < To; ++t)
        for (int64_t i = 0; i < o[3]; ++i)
          for (int64_t j = 0; j < o[4]; ++j) {
            double acc = 0;
            for (int64_t k = oc * g; k < (oc + 1) * g; ++k) {
              const int64_t c = k / f, it = (k % f) / (fs * fs), ih = (k % (fs * fs)) / fs,
                            iw = k % fs;
              const int64_t ti = t * ft + it - pad;  // frames before 0 are the zero padding
              if (ti >= 0) acc += x.data<float>()[vi.at(n, c, ti, i * fs + ih, j * fs + iw)];
            }
            y.data<float>()[vo.at(n, oc, t, i, j)] = static_cast<float>(acc / g);
          }
  return y;
}

HostTensor dup_up(const HostTensor& x, int64_t cout, int ft, int fs, bool drop_first) {
  const Shape& s = x.shape();
  const int64_t f = int64_t{ft} * fs * fs, r = cout * f / s[1];
  const int64_t drop = drop_first ? ft - 1 : 0;
  const Shape o{s[0], cout, s[2] * ft - drop, s[3] * fs, s[4] * fs};
  HostTensor y(DType::kF32, o);
  const View5 vi{s}, vo{o};
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t oc = 0; oc < cout; ++oc)
      for (int64_t t = 0; t < s[2]; ++t)
        for (int64_t it = 0; it < ft; ++it)
          for (int64_t i = 0; i < s[3]; ++i)
            for (int64_t ih = 0; ih < fs; ++ih)
              for (int64_t j = 0; j < s[4]; ++j)
                for (int64_t iw = 0; iw < fs; ++iw) {
                  const int64_t ot = t * ft + it - drop;
                  if (ot < 0) continue;
                  const int64_t src = (((oc * ft + it) * fs + ih) * fs + iw) / r;
                  y.data<float>()[vo.at(n, oc, ot, i * fs + ih, j * fs + iw)] =
                      x.data<float>()[vi.at(n, src, t, i, j)];
                }
  return y;
}

}  // namespace seedvae::ref
