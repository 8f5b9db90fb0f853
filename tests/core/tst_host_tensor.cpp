// HostTensor (core/tensor/host_tensor.h): a new tensor is all zeros, small or large (a large one
// is zero-filled in blocks on every core, over memory that held other bytes before), conversions
// round trip, and reshaping keeps the element count or refuses.
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/tensor/host_tensor.h"

using namespace seedvae;

class TstHostTensor : public QObject {
  Q_OBJECT

 private slots:
  void newTensorsAreZero() {
    for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{3} << 20, (int64_t{40} << 20) + 3}) {
      {  // the allocator likely hands this memory out again
        HostTensor dirty(DType::kF32, Shape{n});
        std::memset(dirty.raw(), 0x5a, static_cast<size_t>(dirty.nbytes()));
      }
      const HostTensor t(DType::kF32, Shape{n});
      QCOMPARE(t.nbytes(), n * 4);
      const auto v = t.f32();
      QVERIFY2(std::all_of(v.begin(), v.end(), [](float x) { return x == 0.f; }),
               qPrintable(QString::number(n)));
      auto made = HostTensor::create(DType::kBF16, Shape{n});
      QVERIFY(made.is_ok());
      const auto* b = static_cast<const unsigned char*>(made->raw());
      QVERIFY(std::all_of(b, b + made->nbytes(), [](unsigned char x) { return x == 0; }));
    }
    QVERIFY(!HostTensor::create(DType::kF32, Shape{int64_t{1} << 40, 1 << 20}).is_ok());
  }

  void largeConversionsMatchElementByElement() {
    // more than two of to()'s blocks of 4 Mi elements, the last one partial
    const int64_t n = (int64_t{9} << 20) + 5;
    HostTensor t(DType::kF32, Shape{n});
    float* v = t.data<float>();
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 1000) * 0.37f - 150.0f;
    const HostTensor b = t.to(DType::kBF16);
    QCOMPARE(b.shape(), t.shape());
    std::vector<std::byte> one(2);
    for (const int64_t i :
         {int64_t{0}, (int64_t{4} << 20) - 1, int64_t{4} << 20, (int64_t{8} << 20) + 1, n - 1}) {
      convert_elements(v + i, DType::kF32, one.data(), DType::kBF16, 1);
      QVERIFY2(std::memcmp(static_cast<const std::byte*>(b.raw()) + 2 * i, one.data(), 2) == 0,
               qPrintable(QString::number(i)));
    }
    const HostTensor back = b.to(DType::kF32);
    const HostTensor again = back.to(DType::kBF16);
    QVERIFY(std::memcmp(again.raw(), b.raw(), static_cast<size_t>(b.nbytes())) == 0);
  }

  void conversionsAndReshapes() {
    const HostTensor t =
        HostTensor::from_floats(Shape{2, 3}, std::vector<float>{1, -2, 0.5f, 3, 4, -0.25f});
    const HostTensor back = t.to(DType::kBF16).to(DType::kF32);
    QVERIFY(std::equal(back.f32().begin(), back.f32().end(), t.f32().begin()));
    auto r = t.reshaped(Shape{3, 2});
    QVERIFY(r.is_ok());
    QCOMPARE(r->f32()[5], -0.25f);
    QVERIFY(!t.reshaped(Shape{4, 2}).is_ok());
  }
};

QTEST_GUILESS_MAIN(TstHostTensor)
#include "tst_host_tensor.moc"
