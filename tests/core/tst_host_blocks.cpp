// The cache of large host blocks (core/base/host_blocks.h): a block given back is taken again by
// the next request it fits (not one far smaller), a trim frees only the blocks that waited a
// whole period, the idle bytes stay under the cap, a HostTensor built on a reused block is zero,
// and threads can take and give back blocks at once.
#include <QtTest>

#include <cstring>
#include <thread>
#include <vector>

#include "core/base/host_blocks.h"
#include "core/base/process_memory.h"
#include "core/tensor/host_tensor.h"

using namespace seedvae;

namespace {
constexpr size_t kMiB = size_t{1} << 20;
}

class TstHostBlocks : public QObject {
  Q_OBJECT

 private slots:
  void init() {
    QVERIFY(host_block_cache_enabled());
    trim_host_blocks(true);
    QCOMPARE(host_block_stats().idle_bytes, int64_t{0});
  }

  void aBlockGivenBackIsTakenAgain() {
    void* a = acquire_host_block(20 * kMiB);
    std::memset(a, 1, 20 * kMiB);
    const HostBlockStats before = host_block_stats();
    release_host_block(a);
    QCOMPARE(host_block_stats().idle_bytes, int64_t{20} * int64_t{kMiB});
    // a little smaller still fits it; the cache hands it out again
    void* b = acquire_host_block(19 * kMiB);
    QCOMPARE(b, a);
    QCOMPARE(host_block_stats().reused, before.reused + 1);
    QCOMPARE(host_block_stats().idle_bytes, int64_t{0});
    release_host_block(b);
  }

  void aMuchSmallerRequestGetsItsOwnBlock() {
    void* big = acquire_host_block(64 * kMiB);
    release_host_block(big);
    const HostBlockStats before = host_block_stats();
    void* small = acquire_host_block(20 * kMiB);
    QVERIFY(small != big);
    QCOMPARE(host_block_stats().allocated, before.allocated + 1);
    QCOMPARE(host_block_stats().idle_bytes, int64_t{64} * int64_t{kMiB});
    release_host_block(small);
  }

  void aTrimFreesOnlyBlocksIdleForAWholePeriod() {
    void* a = acquire_host_block(32 * kMiB);
    release_host_block(a);
    trim_host_blocks();  // given back in this period: kept
    QCOMPARE(host_block_stats().idle_bytes, int64_t{32} * int64_t{kMiB});
    void* b = acquire_host_block(32 * kMiB);  // taken and given back again: a new period
    QCOMPARE(b, a);
    release_host_block(b);
    trim_host_blocks();
    QCOMPARE(host_block_stats().idle_bytes, int64_t{32} * int64_t{kMiB});
    trim_host_blocks();  // a whole period unused: freed
    QCOMPARE(host_block_stats().idle_bytes, int64_t{0});
    // release_free_host_memory(true), at a job's end, frees everything at once
    release_host_block(acquire_host_block(32 * kMiB));
    release_free_host_memory(true);
    QCOMPARE(host_block_stats().idle_bytes, int64_t{0});
  }

  void theIdleBytesStayUnderTheCap() {
    // never touched, so the system maps no pages for them
    constexpr size_t kGiB = size_t{1} << 30;
    std::vector<void*> blocks;
    for (int i = 0; i < 3; ++i) blocks.push_back(acquire_host_block(kGiB));
    for (void* p : blocks) release_host_block(p);
    QCOMPARE(host_block_stats().idle_bytes, int64_t{2} * int64_t{kGiB});
  }

  void aTensorOnAReusedBlockIsZero() {
    const Shape shape{1, 3, 4, 512, 1024};  // 24 MiB of fp32
    void* first = nullptr;
    {
      HostTensor t(DType::kF32, shape);
      first = t.raw();
      std::memset(t.raw(), 0x5a, t.nbytes());
    }
    HostTensor u(DType::kF32, shape);
    QCOMPARE(u.raw(), first);  // the same block again
    const auto* f = static_cast<const float*>(u.raw());
    for (int64_t i = 0; i < u.numel(); i += 4099) QCOMPARE(f[i], 0.0f);
    QCOMPARE(f[u.numel() - 1], 0.0f);
    // a copy and a conversion take blocks of their own
    HostTensor c = u;
    QVERIFY(c.raw() != u.raw());
    HostTensor h = u.to(DType::kBF16);
    QCOMPARE(h.nbytes(), u.nbytes() / 2);
  }

  void threadsTakeAndGiveBackAtOnce() {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([t] {
        for (int i = 0; i < 200; ++i) {
          const size_t n = (16 + static_cast<size_t>((t + i) % 5) * 4) * kMiB;
          auto* p = static_cast<unsigned char*>(acquire_host_block(n));
          p[0] = 1;
          p[n - 1] = 2;
          release_host_block(p);
        }
      });
    }
    for (auto& th : threads) th.join();
    const HostBlockStats s = host_block_stats();
    QVERIFY(s.reused > 0);
    QVERIFY(s.idle_bytes <= int64_t{2} << 30);
    trim_host_blocks(true);
    QCOMPARE(host_block_stats().idle_bytes, int64_t{0});
  }
};

QTEST_GUILESS_MAIN(TstHostBlocks)
#include "tst_host_blocks.moc"
