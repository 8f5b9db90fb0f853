// Helpers shared by the seedvae_media tests: building clips with known pixel values, files with
// known bytes, and listing directories. No OpenCV here (the tests see only the public headers).
#pragma once

#include <QByteArray>
#include <QString>
#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/tensor/host_tensor.h"

namespace seedvae::test {

namespace fs = std::filesystem;

// A test class's temporary directory, handing out fresh empty subdirectories of it.
struct TempTree {
  QTemporaryDir tmp;
  bool isValid() const { return tmp.isValid(); }
  fs::path dir() const { return fs::path(tmp.path().toStdString()); }
  fs::path subdir(const std::string& name) const {
    const fs::path d = dir() / name;
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }
};

inline QString q(const std::string& s) {
  return QString::fromStdString(s);
}

// A [1, 3, T, H, W] clip whose value at (c, t, y, x) is f(c, t, y, x) (in [-1, 1]).
inline HostTensor clip_from(int64_t T, int64_t H, int64_t W,
                            const std::function<float(int64_t, int64_t, int64_t, int64_t)>& f) {
  HostTensor v(DType::kF32, Shape{1, 3, T, H, W});
  float* p = v.data<float>();
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) *p++ = f(c, t, y, x);
  return v;
}

// 8-bit level v (0..255) as a value in [-1, 1].
inline float level(int v) {
  return static_cast<float>(v) / 255.0f * 2.0f - 1.0f;
}

inline float at(const HostTensor& v, int64_t c, int64_t t, int64_t y, int64_t x) {
  const Shape& s = v.shape();
  return v.data<float>()[(((c * s.t()) + t) * s.h() + y) * s.w() + x];
}

// Mean of channel c of frame t.
inline double frame_mean(const HostTensor& v, int64_t c, int64_t t) {
  const Shape& s = v.shape();
  double sum = 0;
  for (int64_t y = 0; y < s.h(); ++y)
    for (int64_t x = 0; x < s.w(); ++x) sum += at(v, c, t, y, x);
  return sum / static_cast<double>(s.h() * s.w());
}

// Largest |a - b| over two same-shape fp32 tensors (infinity when shapes differ).
inline double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    m = std::max(m, static_cast<double>(std::abs(a.data<float>()[i] - b.data<float>()[i])));
  }
  return m;
}

// The frames `ts` of a clip, in that order.
inline HostTensor frames_of(const HostTensor& v, const std::vector<int64_t>& ts) {
  const Shape& s = v.shape();
  const auto T = static_cast<int64_t>(ts.size());
  return clip_from(T, s.h(), s.w(), [&](int64_t c, int64_t t, int64_t y, int64_t x) {
    return at(v, c, ts[static_cast<size_t>(t)], y, x);
  });
}

inline std::set<std::string> list_dir(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.insert(e.path().filename().string());
  return names;
}

inline void write_bytes(const fs::path& p, const QByteArray& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.constData(), bytes.size());
}

inline QByteArray read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return QByteArray(s.data(), static_cast<qsizetype>(s.size()));
}

}  // namespace seedvae::test
