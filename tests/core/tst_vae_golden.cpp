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
        QVERIFY2(r.margin() >= 0 && r.margin() <= 1, (r.tensor + " margin").c_str());
        QVERIFY2(r.rms <= 1e-5 || r.tensor.find(".inter.") != std::string::npos,
                 (r.tensor + " rms " + std::to_string(r.rms)).c_str());
      }
      QVERIFY2(r.status != "skip", (r.tensor + " was skipped: " + r.note).c_str());
    }
    QVERIFY2(compared >= min_rows,
             ("only " + std::to_string(compared) + " tensors compared").c_str());
  }

 private slots:
  // The margin is error over bound, the larger of max abs and rms; rows without a bound have none.
  void marginIsErrorOverBound() {
    VerifyReport rep;
    rep.rows.push_back({"tiny", "weights", "pass", 0, 0, 0, 0, ""});
    rep.rows.push_back({"tiny", "a.dec", "pass", 0.5, 0.05, 1.0, 0, "", 0.1});  // 0.5 and 0.5
    rep.rows.push_back({"tiny", "b.dec", "FAIL", 0.9, 0.3, 1.0, 0, "", 0.2});   // 0.9 and 1.5
    rep.rows.push_back({"tiny", "c.dec", "skip", 0, 0, 0, 0, "not run"});
    rep.rows.push_back({"real", "d.dec", "pass", 2e-5, 1e-6, 1e-4, 0, ""});  // no rms bound
    QCOMPARE(rep.rows[0].margin(), -1.0);
    QCOMPARE(rep.rows[1].margin(), 0.5);
    QCOMPARE(rep.rows[2].margin(), 1.5);
    QCOMPARE(rep.rows[3].margin(), -1.0);
    QCOMPARE(rep.rows[4].margin(), 0.2);
    QCOMPARE(rep.worst(), &rep.rows[2]);
    QCOMPARE(margin_text(rep.rows[2]), std::string("1.50"));
    QCOMPARE(margin_text(rep.rows[3]), std::string("-"));
    QCOMPARE(worst_margin_text(rep), std::string("; worst margin 1.50 (tiny b.dec)"));
    QCOMPARE(worst_margin_text(VerifyReport{}), std::string());
  }
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
