// core/tensor/dtype.h: IEEE binary16 and bfloat16 conversions. Round to nearest, ties to even, on
// chosen edge values and exhaustively on every tie (the midpoint between each pair of adjacent
// representable values), plus exact decoding of all 65536 bit patterns.
#include <QtTest>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/tensor/dtype.h"

using namespace seedvae;

namespace {

float f32_from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}

bool half_is_nan(uint16_t h) {
  return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0;
}
bool bf16_is_nan(uint16_t b) {
  return (b & 0x7F80u) == 0x7F80u && (b & 0x007Fu) != 0;
}

// Reference decoding of binary16, computed independently in double.
double half_reference(uint16_t h) {
  const int sign = (h & 0x8000u) ? -1 : 1;
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), -24);
  if (exp == 31)
    return mant ? std::numeric_limits<double>::quiet_NaN()
                : sign * std::numeric_limits<double>::infinity();
  return sign * std::ldexp(static_cast<double>(1024 + mant), exp - 25);
}

QString hex(uint32_t v) {
  return QStringLiteral("0x%1").arg(v, 4, 16, QLatin1Char('0'));
}

}  // namespace

class tst_DType : public QObject {
  Q_OBJECT

 private slots:
  void names();
  void halfEdgeValues_data();
  void halfEdgeValues();
  void halfSpecExample();
  void halfNaN();
  void halfDecodeAllPatterns();
  void halfRoundTripAllPatterns();
  void halfTiesToEvenExhaustive();
  void bf16EdgeValues_data();
  void bf16EdgeValues();
  void bf16NaN();
  void bf16RoundTripAllPatterns();
  void bf16TiesToEvenExhaustive();
  void convertElements();
};

void tst_DType::names() {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
    QCOMPARE(dtype_from_safetensors_name(dtype_safetensors_name(t)), std::optional<DType>(t));
    QCOMPARE(dtype_from_name(dtype_name(t)), std::optional<DType>(t));
  }
  QCOMPARE(dtype_size(DType::kBF16), int64_t{2});
  QCOMPARE(dtype_size(DType::kF64), int64_t{8});
  QVERIFY(!dtype_from_safetensors_name("I8"));
  QVERIFY(!dtype_from_safetensors_name("f32"));  // safetensors spelling is upper case
}

void tst_DType::halfEdgeValues_data() {
  QTest::addColumn<float>("value");
  QTest::addColumn<uint>("bits");
  const float u = 0x1.0p-24f;  // the smallest half subnormal
  QTest::newRow("+0") << 0.0f << 0x0000u;
  QTest::newRow("-0") << -0.0f << 0x8000u;
  QTest::newRow("1") << 1.0f << 0x3C00u;
  QTest::newRow("-2") << -2.0f << 0xC000u;
  QTest::newRow("0.1") << 0.1f << 0x2E66u;
  QTest::newRow("1/3") << (1.0f / 3.0f) << 0x3555u;
  // Ties between 1 and 1 + 2^-10: 1 + 2^-11 goes down to even, 1 + 3*2^-11 up to even.
  QTest::newRow("tie 1+2^-11 -> even 0x3C00") << (1.0f + 0x1.0p-11f) << 0x3C00u;
  QTest::newRow("tie 1+3*2^-11 -> even 0x3C02") << (1.0f + 3 * 0x1.0p-11f) << 0x3C02u;
  QTest::newRow("above tie 1+2^-11+2^-23") << (1.0f + 0x1.0p-11f + 0x1.0p-23f) << 0x3C01u;
  QTest::newRow("below tie 1+3*2^-11-2^-23") << (1.0f + 3 * 0x1.0p-11f - 0x1.0p-23f) << 0x3C01u;
  QTest::newRow("-tie -(1+2^-11)") << -(1.0f + 0x1.0p-11f) << 0xBC00u;
  // Subnormals.
  QTest::newRow("min subnormal 2^-24") << u << 0x0001u;
  QTest::newRow("max subnormal") << 1023 * u << 0x03FFu;
  QTest::newRow("min normal 2^-14") << 0x1.0p-14f << 0x0400u;
  QTest::newRow("tie 2^-25 -> 0") << 0.5f * u << 0x0000u;
  QTest::newRow("-tie -2^-25 -> -0") << -0.5f * u << 0x8000u;
  QTest::newRow("above 2^-25 -> 1") << (0.5f * u + 0x1.0p-40f) << 0x0001u;
  QTest::newRow("2^-26 -> 0") << 0x1.0p-26f << 0x0000u;
  QTest::newRow("tie 1.5u -> 2") << 1.5f * u << 0x0002u;
  QTest::newRow("tie 2.5u -> 2") << 2.5f * u << 0x0002u;
  QTest::newRow("tie 1023.5u -> min normal") << 1023.5f * u << 0x0400u;
  QTest::newRow("float min normal -> 0") << std::numeric_limits<float>::min() << 0x0000u;
  QTest::newRow("float denorm -> -0") << -std::numeric_limits<float>::denorm_min() << 0x8000u;
  // Overflow: 65504 is the largest half; 65520 is the tie with "65536" and goes to infinity.
  QTest::newRow("max 65504") << 65504.0f << 0x7BFFu;
  QTest::newRow("65519 -> max") << 65519.0f << 0x7BFFu;
  QTest::newRow("65520 -> inf") << 65520.0f << 0x7C00u;
  QTest::newRow("-65520 -> -inf") << -65520.0f << 0xFC00u;
  QTest::newRow("1e10 -> inf") << 1e10f << 0x7C00u;
  QTest::newRow("float max -> inf") << std::numeric_limits<float>::max() << 0x7C00u;
  QTest::newRow("inf") << std::numeric_limits<float>::infinity() << 0x7C00u;
  QTest::newRow("-inf") << -std::numeric_limits<float>::infinity() << 0xFC00u;
}

void tst_DType::halfEdgeValues() {
  QFETCH(float, value);
  QFETCH(uint, bits);
  QCOMPARE(hex(float_to_half_bits(value)), hex(bits));
}

void tst_DType::halfSpecExample() {
  // The first weight of the tiny golden model: 0x98a2 = -0.002262115478515625 exactly.
  QCOMPARE(half_bits_to_float(0x98a2), -0.002262115478515625f);
  QCOMPARE(hex(float_to_half_bits(-0.002262115478515625f)), hex(0x98a2));
  QCOMPARE(half_bits_to_float(0x3C00), 1.0f);
  QCOMPARE(half_bits_to_float(0x7BFF), 65504.0f);
  QCOMPARE(half_bits_to_float(0x0001), 0x1.0p-24f);
  QCOMPARE(half_bits_to_float(0x7C00), std::numeric_limits<float>::infinity());
  QVERIFY(std::signbit(half_bits_to_float(0x8000)));
}

void tst_DType::halfNaN() {
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(),
                        f32_from_bits(0x7F800001u),  // signalling, payload only in low bits
                        f32_from_bits(0xFF800001u), f32_from_bits(0x7FFFFFFFu)};
  for (float n : nans) {
    const uint16_t h = float_to_half_bits(n);
    QVERIFY2(half_is_nan(h), qPrintable(hex(h)));
    QCOMPARE(bool(h & 0x8000u), std::signbit(n));
  }
  QVERIFY(std::isnan(half_bits_to_float(0x7E00)));
  QVERIFY(std::isnan(half_bits_to_float(0x7C01)));
  QVERIFY(std::isnan(half_bits_to_float(0xFFFF)));
}

void tst_DType::halfDecodeAllPatterns() {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = half_bits_to_float(static_cast<uint16_t>(h));
    const double ref = half_reference(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      QVERIFY2(std::isnan(f), qPrintable(hex(h)));
    } else if (static_cast<double>(f) != ref || std::signbit(f) != std::signbit(ref)) {
      QFAIL(qPrintable(QStringLiteral("half %1 decodes to %2, expected %3")
                           .arg(hex(h))
                           .arg(double(f), 0, 'g', 17)
                           .arg(ref, 0, 'g', 17)));
    }
  }
}

void tst_DType::halfRoundTripAllPatterns() {
  int checked = 0;
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const uint16_t back = float_to_half_bits(half_bits_to_float(bits));
    if (half_is_nan(bits)) {
      QVERIFY2(half_is_nan(back), qPrintable(hex(h)));
      continue;
    }
    if (back != bits) QFAIL(qPrintable(hex(h) + " -> " + hex(back)));
    ++checked;
  }
  QCOMPARE(checked, 65536 - 2 * 1023);  // every non-NaN pattern, both signs
}

void tst_DType::halfTiesToEvenExhaustive() {
  // For each pair of adjacent non-negative halves (a, b) — including (65504, "65536" = inf) — the
  // midpoint goes to the even one and one float ulp either side goes to the nearer one.
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const double a = half_reference(static_cast<uint16_t>(h));
    const double b = (h + 1 == 0x7C00) ? 65536.0 : half_reference(static_cast<uint16_t>(h + 1));
    const auto mid = static_cast<float>((a + b) / 2);
    QVERIFY(static_cast<double>(mid) == (a + b) / 2);  // exact in float
    const uint32_t even = (h & 1u) ? h + 1 : h;
    for (const uint32_t sign : {0u, 0x8000u}) {
      const float s = sign ? -1.0f : 1.0f;
      const uint16_t at = float_to_half_bits(s * mid);
      const uint16_t below = float_to_half_bits(s * std::nextafter(mid, 0.0f));
      const uint16_t above = float_to_half_bits(s * std::nextafter(mid, 1e30f));
      if (at != (sign | even) || below != (sign | h) || above != (sign | (h + 1))) {
        QFAIL(qPrintable(
            QStringLiteral("between %1 and %2: tie %3, below %4, above %5")
                .arg(hex(sign | h), hex(sign | (h + 1)), hex(at), hex(below), hex(above))));
      }
    }
  }
}

void tst_DType::bf16EdgeValues_data() {
  QTest::addColumn<float>("value");
  QTest::addColumn<uint>("bits");
  QTest::newRow("+0") << 0.0f << 0x0000u;
  QTest::newRow("-0") << -0.0f << 0x8000u;
  QTest::newRow("1") << 1.0f << 0x3F80u;
  QTest::newRow("-2") << -2.0f << 0xC000u;
  QTest::newRow("pi") << f32_from_bits(0x40490FDBu) << 0x4049u;
  QTest::newRow("0.1") << 0.1f << 0x3DCDu;
  QTest::newRow("tie 1+2^-8 -> even 0x3F80") << (1.0f + 0x1.0p-8f) << 0x3F80u;
  QTest::newRow("tie 1+3*2^-8 -> even 0x3F82") << (1.0f + 3 * 0x1.0p-8f) << 0x3F82u;
  QTest::newRow("above tie") << (1.0f + 0x1.0p-8f + 0x1.0p-23f) << 0x3F81u;
  QTest::newRow("-tie") << -(1.0f + 0x1.0p-8f) << 0xBF80u;
  QTest::newRow("subnormal tie -> 0") << f32_from_bits(0x00008000u) << 0x0000u;
  QTest::newRow("subnormal tie -> 2") << f32_from_bits(0x00018000u) << 0x0002u;
  QTest::newRow("subnormal above tie") << f32_from_bits(0x00008001u) << 0x0001u;
  QTest::newRow("min subnormal") << f32_from_bits(0x00010000u) << 0x0001u;
  QTest::newRow("max finite") << f32_from_bits(0x7F7F0000u) << 0x7F7Fu;
  QTest::newRow("below overflow tie") << f32_from_bits(0x7F7F7FFFu) << 0x7F7Fu;
  QTest::newRow("overflow tie -> inf") << f32_from_bits(0x7F7F8000u) << 0x7F80u;
  QTest::newRow("float max -> inf") << std::numeric_limits<float>::max() << 0x7F80u;
  QTest::newRow("-float max -> -inf") << -std::numeric_limits<float>::max() << 0xFF80u;
  QTest::newRow("inf") << std::numeric_limits<float>::infinity() << 0x7F80u;
  QTest::newRow("-inf") << -std::numeric_limits<float>::infinity() << 0xFF80u;
}

void tst_DType::bf16EdgeValues() {
  QFETCH(float, value);
  QFETCH(uint, bits);
  QCOMPARE(hex(float_to_bf16_bits(value)), hex(bits));
}

void tst_DType::bf16NaN() {
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(),
                        -std::numeric_limits<float>::quiet_NaN(),
                        f32_from_bits(0x7F800001u),  // truncation alone would give infinity
                        f32_from_bits(0xFF80FFFFu), f32_from_bits(0x7FFFFFFFu)};
  for (float n : nans) {
    const uint16_t b = float_to_bf16_bits(n);
    QVERIFY2(bf16_is_nan(b), qPrintable(hex(b)));
    QCOMPARE(bool(b & 0x8000u), std::signbit(n));
  }
  QVERIFY(std::isnan(bf16_bits_to_float(0x7FC0)));
  QVERIFY(std::isnan(bf16_bits_to_float(0xFF81)));
}

void tst_DType::bf16RoundTripAllPatterns() {
  int checked = 0;
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = bf16_bits_to_float(bits);
    QCOMPARE(std::bit_cast<uint32_t>(f), b << 16);  // decoding is exact
    const uint16_t back = float_to_bf16_bits(f);
    if (bf16_is_nan(bits)) {
      QVERIFY2(bf16_is_nan(back), qPrintable(hex(b)));
      continue;
    }
    if (back != bits) QFAIL(qPrintable(hex(b) + " -> " + hex(back)));
    ++checked;
  }
  QCOMPARE(checked, 65536 - 2 * 127);
}

void tst_DType::bf16TiesToEvenExhaustive() {
  for (uint32_t b = 0; b < 0x7F80; ++b) {
    // As float bit patterns: the midpoint of b and b+1 is (b << 16) | 0x8000, exactly.
    const uint32_t mid_bits = (b << 16) | 0x8000u;
    const uint32_t even = (b & 1u) ? b + 1 : b;
    for (const uint32_t sign : {0u, 0x8000u}) {
      const uint32_t fs = sign << 16;
      const uint16_t at = float_to_bf16_bits(f32_from_bits(fs | mid_bits));
      const uint16_t below = float_to_bf16_bits(f32_from_bits(fs | (mid_bits - 1)));
      const uint16_t above = float_to_bf16_bits(f32_from_bits(fs | (mid_bits + 1)));
      if (at != (sign | even) || below != (sign | b) || above != (sign | (b + 1))) {
        QFAIL(qPrintable(
            QStringLiteral("between %1 and %2: tie %3, below %4, above %5")
                .arg(hex(sign | b), hex(sign | (b + 1)), hex(at), hex(below), hex(above))));
      }
    }
  }
}

void tst_DType::convertElements() {
  const float src[5] = {1.0f, -0.002262115478515625f, 65520.0f, 1.0f + 0x1.0p-11f, 0.1f};
  uint16_t h[5];
  convert_elements(src, DType::kF32, h, DType::kF16, 5);
  QCOMPARE(hex(h[0]), hex(0x3C00));
  QCOMPARE(hex(h[1]), hex(0x98a2));
  QCOMPARE(hex(h[2]), hex(0x7C00));
  QCOMPARE(hex(h[3]), hex(0x3C00));
  double d[5];
  convert_elements(h, DType::kF16, d, DType::kF64, 5);
  QCOMPARE(d[1], -0.002262115478515625);
  QVERIFY(std::isinf(d[2]));
  uint16_t b[5];
  convert_elements(d, DType::kF64, b, DType::kBF16, 5);
  QCOMPARE(hex(b[0]), hex(0x3F80));
  float back[5];
  convert_elements(b, DType::kBF16, back, DType::kF32, 5);
  QCOMPARE(back[0], 1.0f);
  // Same type: a plain copy.
  float copy[5] = {};
  convert_elements(src, DType::kF32, copy, DType::kF32, 5);
  QCOMPARE(std::memcmp(copy, src, sizeof src), 0);
  // f64 -> f16 rounds through f32 (documented): 0.1 -> f32 0.1f -> 0x2E66.
  const double tenth = 0.1;
  uint16_t t = 0;
  convert_elements(&tenth, DType::kF64, &t, DType::kF16, 1);
  QCOMPARE(hex(t), hex(0x2E66));
  // The bulk paths (f16/bf16 -> f32, f32 -> f16) agree with the scalar conversions on every
  // 16-bit pattern, and on every f16 value's f32 neighbours.
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> f(65536);
  convert_elements(all.data(), DType::kF16, f.data(), DType::kF32, 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    QCOMPARE(std::bit_cast<uint32_t>(f[i]), std::bit_cast<uint32_t>(half_bits_to_float(all[i])));
  }
  convert_elements(all.data(), DType::kBF16, f.data(), DType::kF32, 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    QCOMPARE(std::bit_cast<uint32_t>(f[i]), std::bit_cast<uint32_t>(bf16_bits_to_float(all[i])));
  }
  convert_elements(all.data(), DType::kF16, f.data(), DType::kF32, 65536);
  for (float& v : f) v = std::nextafter(v, 0.f);
  std::vector<uint16_t> h16(65536);
  convert_elements(f.data(), DType::kF32, h16.data(), DType::kF16, 65536);
  for (uint32_t i = 0; i < 65536; ++i) QCOMPARE(h16[i], float_to_half_bits(f[i]));
}

QTEST_GUILESS_MAIN(tst_DType)
#include "tst_dtype.moc"
