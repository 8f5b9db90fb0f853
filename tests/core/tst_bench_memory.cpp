// The host and device memory figures of a benchmark: the process's peak resident set and its
// reset (core/base/process_memory.h), and what `seedvae bench --json` reports per op on a backend
// without a device (host peak measured; device-level fields null, not zero).
#include <QtTest>

#include <cstring>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/process_memory.h"
#include "core/cpu/cpu_backend.h"
#include "core/pipeline/bench.h"
#include "core/vae/state_dict.h"

using namespace seedvae;

class TstBenchMemory : public QObject {
  Q_OBJECT
 private slots:
  void peakResidentSetFollowsTouchedMemoryAndResets() {
#if !defined(__linux__)
    QSKIP("resetting the peak resident set needs Linux's /proc/self/clear_refs");
#else
    constexpr int64_t kBlock = int64_t{256} << 20;
    QVERIFY(reset_peak_rss());
    const int64_t before = peak_rss_bytes();
    QVERIFY(before > 0);
    {
      auto block = std::make_unique<char[]>(static_cast<size_t>(kBlock));
      std::memset(block.get(), 1, static_cast<size_t>(kBlock));  // resident once written
      QVERIFY(peak_rss_bytes() >= before + kBlock * 9 / 10);
    }  // freed: large blocks go back to the system
    const int64_t high = peak_rss_bytes();
    QVERIFY(reset_peak_rss());
    QVERIFY2(peak_rss_bytes() < high - kBlock / 2,
             qPrintable(QString("peak %1 MiB after reset, %2 MiB before")
                            .arg(peak_rss_bytes() >> 20)
                            .arg(high >> 20)));
#endif
  }

  void benchReportsHostPeakAndNoDeviceFigures() {
    auto backend = create_cpu_backend({});
    QVERIFY(backend.is_ok());
    const VaeWeights weights = synthetic_weights("tiny").value();
    BenchOptions o;
    o.width = o.height = 32;
    o.frames = 5;
    o.warmup = 0;
    o.repeats = 1;
    auto r = run_bench(**backend, weights, o);
    QVERIFY2(r.is_ok(), r.is_ok() ? "" : r.status().to_string().c_str());
    QCOMPARE(r->ops.size(), size_t{2});
    const auto j = nlohmann::json::parse(bench_json(*r, "synthetic tiny"));
    for (const auto& op : j["ops"]) {
      QVERIFY(op["peak_mib"].get<double>() > 0);
      QVERIFY(op["device_peak_mib"].is_null());
      QVERIFY(op["reserved_peak_mib"].is_null());
      QVERIFY(op["budget_mib"].is_null());
#if defined(__linux__)
      // The process holds at least the clip and the weights; far less than a GiB here.
      QVERIFY(op["host_peak_mib"].get<double>() > 1);
      QVERIFY(op["host_peak_mib"].get<double>() < 1024);
#endif
    }
  }
};

QTEST_GUILESS_MAIN(TstBenchMemory)
#include "tst_bench_memory.moc"
