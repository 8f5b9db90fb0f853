// The VAE on the CPU backend against the upstream PyTorch reference (../shared/golden): every
// tensor of the tiny configuration with its per-block intermediates, and every tensor of the real
// (250M-parameter) configuration (about 40 s on 2 cores), the blended-tiled ones included.
#include <QtTest>

#include "core/cpu/cpu_backend.h"
#include "core/pipeline/verify.h"
#include "tests/support/golden.h"

using namespace seedvae;

class tst_VaeGolden : public QObject {
  Q_OBJECT

  static void run(const std::string& config, std::vector<std::string> only, int min_rows) {
    if (!test::have_golden()) QSKIP(test::golden_missing_message().c_str());
    auto backend = create_cpu_backend();
    QVERIFY2(backend.is_ok(), backend.status().to_string().c_str());
    VerifyOptions opt;
    opt.reference_dir = test::golden_dir();
    opt.configs = {config};
    opt.only = std::move(only);
    opt.tolerance = 1e-4;
    auto report = run_verify(**backend, opt, [](const VerifyRow& r) {
      qInfo("%s %s %-36s max_abs %.3e rms %.3e %s", r.config.c_str(), r.status.c_str(),
            r.tensor.c_str(), r.max_abs, r.rms, r.note.c_str());
    });
    QVERIFY2(report.is_ok(), report.status().to_string().c_str());
    int compared = 0;
    for (const auto& r : report->rows) {
      QVERIFY2(r.status != "FAIL",
               (r.config + " " + r.tensor + " max_abs " + std::to_string(r.max_abs) + " " + r.note)
                   .c_str());
      if (r.status == "pass" && r.tensor != "weights" && r.tensor != "inputs") {
        ++compared;
        QVERIFY2(r.rms <= 1e-5 || r.tensor.find(".inter.") != std::string::npos,
                 (r.tensor + " rms " + std::to_string(r.rms)).c_str());
      }
      QVERIFY2(r.status != "skip", (r.tensor + " was skipped: " + r.note).c_str());
    }
    QVERIFY2(compared >= min_rows,
             ("only " + std::to_string(compared) + " tensors compared").c_str());
  }

 private slots:
  void tinyAllTensorsAndIntermediates() {
    // 22 outputs (whole-clip, streamed and blended-tiled) + 14 intermediates.
    run("tiny", {}, 36);
  }
  void realAllCases() {
    // 22 outputs: whole-clip, streamed and tiled encode/decode of V17, V5, I1, L5, L2.
    run("real", {}, 22);
  }
};

QTEST_GUILESS_MAIN(tst_VaeGolden)
#include "tst_vae_golden.moc"
