#include "ui/image_convert.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace seedvae::ui {

QImage frame_to_image(const HostTensor& video, qint64 t, int width, int height) {
  const Shape& s = video.shape();
  if (s.rank() != 5 || s[1] < 3 || t < 0 || t >= s[2] || video.dtype() != DType::kF32) return {};
  const int64_t H = s[3], W = s[4];
  const int w = width > 0 ? static_cast<int>(std::min<int64_t>(width, W)) : static_cast<int>(W);
  const int h = height > 0 ? static_cast<int>(std::min<int64_t>(height, H)) : static_cast<int>(H);
  // RGB32 (0xffRRGGBB) is what QPainter draws fastest; the view never converts per paint.
  QImage img(w, h, QImage::Format_RGB32);
  if (img.isNull()) return {};
  const float* base = video.data<float>();
  const int64_t plane = H * W;
  const float* r = base + (0 * s[2] + t) * plane;
  const float* g = base + (1 * s[2] + t) * plane;
  const float* b = base + (2 * s[2] + t) * plane;
  // Rounds half away from zero like std::lround, without the library call (x >= 0; x - i is
  // exact): the GUI thread converts every frame it shows.
  auto to8 = [](float v) -> uchar {
    if (!(v == v)) return 0;
    const float x = (std::clamp(v, -1.f, 1.f) + 1.f) * 127.5f;
    const int i = static_cast<int>(x);
    return static_cast<uchar>(x - static_cast<float>(i) >= 0.5f ? i + 1 : i);
  };
  for (int y = 0; y < h; ++y) {
    auto* line = reinterpret_cast<QRgb*>(img.scanLine(y));
    const int64_t row = static_cast<int64_t>(y) * W;
    for (int x = 0; x < w; ++x) line[x] = qRgb(to8(r[row + x]), to8(g[row + x]), to8(b[row + x]));
  }
  return img;
}

QVector<QImage> clip_to_images(const HostTensor& video, int width, int height, qint64 first,
                               qint64 count) {
  QVector<QImage> out;
  const Shape& s = video.shape();
  if (s.rank() != 5) return out;
  const qint64 end = count < 0 ? s[2] : std::min<qint64>(s[2], first + count);
  for (qint64 t = std::max<qint64>(0, first); t < end; ++t) {
    out.push_back(frame_to_image(video, t, width, height));
  }
  return out;
}

namespace {

const std::array<QRgb, 256>& heat_lut() {
  static const std::array<QRgb, 256> lut = [] {
    // Control points of an inferno-like ramp.
    struct Stop {
      double pos;
      int r, g, b;
    };
    const Stop stops[] = {{0.00, 0, 0, 4},      {0.15, 31, 12, 72},  {0.35, 120, 28, 109},
                          {0.55, 206, 68, 70},  {0.75, 251, 155, 6}, {0.90, 246, 215, 70},
                          {1.00, 252, 255, 164}};
    std::array<QRgb, 256> t{};
    for (int i = 0; i < 256; ++i) {
      const double p = i / 255.0;
      size_t k = 0;
      while (k + 2 < std::size(stops) && p > stops[k + 1].pos) ++k;
      const Stop& a = stops[k];
      const Stop& b = stops[k + 1];
      const double f = std::clamp((p - a.pos) / (b.pos - a.pos), 0.0, 1.0);
      t[static_cast<size_t>(i)] =
          qRgb(static_cast<int>(a.r + f * (b.r - a.r)), static_cast<int>(a.g + f * (b.g - a.g)),
               static_cast<int>(a.b + f * (b.b - a.b)));
    }
    return t;
  }();
  return lut;
}

}  // namespace

QRgb heat_color(int value) {
  return heat_lut()[static_cast<size_t>(std::clamp(value, 0, 255))];
}

QImage difference_heatmap(const QImage& a_in, const QImage& b_in, double gain) {
  if (a_in.isNull() || b_in.isNull()) return {};
  const QImage a =
      a_in.format() == QImage::Format_RGB32 ? a_in : a_in.convertToFormat(QImage::Format_RGB32);
  const QImage b =
      b_in.format() == QImage::Format_RGB32 ? b_in : b_in.convertToFormat(QImage::Format_RGB32);
  const int w = std::min(a.width(), b.width());
  const int h = std::min(a.height(), b.height());
  QImage out(w, h, QImage::Format_RGB32);
  const auto& lut = heat_lut();
  const double k = std::max(0.0, gain) / 3.0;
  for (int y = 0; y < h; ++y) {
    const auto* pa = reinterpret_cast<const QRgb*>(a.constScanLine(y));
    const auto* pb = reinterpret_cast<const QRgb*>(b.constScanLine(y));
    auto* po = reinterpret_cast<QRgb*>(out.scanLine(y));
    for (int x = 0; x < w; ++x) {
      const int d = std::abs(qRed(pa[x]) - qRed(pb[x])) + std::abs(qGreen(pa[x]) - qGreen(pb[x])) +
                    std::abs(qBlue(pa[x]) - qBlue(pb[x]));
      const int v = static_cast<int>(std::min(255.0, d * k));
      po[x] = lut[static_cast<size_t>(v)];
    }
  }
  return out;
}

QImage heat_legend(int width, int height) {
  QImage img(std::max(1, width), std::max(1, height), QImage::Format_RGB32);
  for (int x = 0; x < img.width(); ++x) {
    const QRgb c = heat_color(img.width() > 1 ? x * 255 / (img.width() - 1) : 0);
    for (int y = 0; y < img.height(); ++y) img.setPixel(x, y, c);
  }
  return img;
}

}  // namespace seedvae::ui
