// Engine runs through the studio's controller on the CPU backend with the tiny configuration:
// frames stream in while the worker thread computes (QSignalSpy), cancel takes effect within a
// chunk, an A/B run produces its table, chart series receive points during a run, and the
// headless job writes its report.
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTableWidget>
#include <QtTest>
#include <cmath>

#include "studio_test_util.h"
#include "ui/ab_panel.h"
#include "ui/info_panel.h"
#include "ui/channels.h"
#include "ui/charts_panel.h"
#include "ui/run_controller.h"
#include "ui/scrubber.h"
#include "ui/studio_app.h"

using namespace seedvae;
using namespace seedvae::ui;
using namespace seedvae::ui::test;

class tst_StudioRuns : public QObject {
  Q_OBJECT

  RunRequest request(const InputSpec& in, int chunk) {
    RunRequest r;
    r.input = in;
    r.weights = weights_;
    r.settings.chunk_latents = chunk;
    return r;
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    register_studio_types();
    QVERIFY(dir_.isValid());
    weights_ = std::make_shared<VaeWeights>(synthesize_weights(VaeConfig::tiny(), kTinySeed));
  }

  void cpuRunStreamsFrames() {
    RunController c(std::make_shared<CpuCatalog>());
    QSignalSpy frames(&c, &RunController::frameAvailable);
    QSignalSpy progress(&c, &RunController::progressChanged);
    QSignalSpy telemetry(&c, &RunController::telemetryReceived);
    QSignalSpy finished(&c, &RunController::runFinished);
    QSignalSpy busy(&c, &RunController::busyChanged);
    // 13 frames, chunk 1: chunks of 5, 4 and 4 frames stream out one after the other.
    const quint64 id = c.start(request(sample_input(64, 64, 13), 1));
    QVERIFY(id != 0);
    QVERIFY(c.busy());
    QCOMPARE(c.start(request(sample_input(64, 64, 13), 1)), quint64{0});  // one run at a time
    QVERIFY(finished.wait(120000));
    const RunSummary s = finished.first().first().value<RunSummary>();
    QVERIFY2(s.ok, qPrintable(s.error));
    QCOMPARE(s.id, id);
    QCOMPARE(s.frames, qint64{13});
    QVERIFY(s.reconstruction);
    QCOMPARE(s.reconstruction->shape(), (Shape{1, 3, 13, 64, 64}));
    QVERIFY(std::isfinite(s.vs_original.psnr_db));
    QVERIFY(s.peak_bytes > s.weight_bytes);
    QVERIFY(s.predicted_peak_bytes > 0);
    QVERIFY(!s.telemetry.isEmpty());
    // Frames arrived while the run was going (one notification per chunk at least, the latest
    // frame each time), ending with the last frame.
    QVERIFY2(frames.count() >= 2, qPrintable(QString::number(frames.count())));
    const FrameUpdate last = frames.last().first().value<FrameUpdate>();
    QCOMPARE(last.index, qint64{12});
    QCOMPARE(last.available, qint64{13});
    QCOMPARE(last.image.size(), QSize(64, 64));
    QCOMPARE(c.store("")->available(), qint64{13});
    QCOMPARE(c.store("")->original_count(), qint64{13});
    // Progress is monotone, throttled and ends at 100%.
    double prev = -1;
    for (const auto& args : progress) {
      const ProgressUpdate u = args.first().value<ProgressUpdate>();
      QVERIFY(u.fraction >= prev);
      prev = u.fraction;
    }
    QCOMPARE(prev, 1.0);
    QVERIFY(progress.count() < 200);
    QVERIFY(telemetry.count() >= 1);
    QCOMPARE(busy.count(), 2);  // true, then false
    QVERIFY(!c.busy());
  }

  void cancelStopsWithinAChunk() {
    RunController c(std::make_shared<CpuCatalog>());
    QSignalSpy frames(&c, &RunController::frameAvailable);
    QSignalSpy finished(&c, &RunController::runFinished);
    QVERIFY(c.start(request(sample_input(128, 128, 41), 1)) != 0);
    QVERIFY(frames.wait(120000));  // the first chunk is decoded
    QElapsedTimer t;
    t.start();
    c.cancel();  // a direct atomic store; the worker's event queue is busy with the run
    QVERIFY(c.cancelRequested());
    QVERIFY(finished.wait(60000));
    const double latency_ms = t.nsecsElapsed() / 1e6;
    const RunSummary s = finished.first().first().value<RunSummary>();
    QVERIFY(!s.ok);
    QVERIFY(s.cancelled);
    QVERIFY(s.store->available() < 41);
    // The engine polls the token after every top-level block, between chunks and between
    // tiles: the latency is a fraction of one chunk's time.
    double first_chunk_ms = 0;
    const auto last = c.lastRun("");  // keep the record alive for the loop
    QVERIFY(last);
    for (const TelemetryPoint& p : last->telemetry) {
      if (p.op == "decode" && p.chunk == 0) first_chunk_ms += p.wall_ms;
    }
    qInfo("cancel latency: %.2f ms; one decoder chunk took %.1f ms (decoded %lld of 41 frames)",
          latency_ms, first_chunk_ms, s.store->available());
    QVERIFY2(latency_ms < 3000, qPrintable(QString::number(latency_ms)));

    // A new run after a cancel works, and a cancel before the first chunk also stops it.
    QVERIFY(c.start(request(sample_input(64, 64, 9), 1)) != 0);
    c.cancel();
    QVERIFY(finished.wait(60000));
    QVERIFY(finished.last().first().value<RunSummary>().cancelled);
  }

  void abRunProducesTable() {
    RunController c(std::make_shared<CpuCatalog>());
    QSignalSpy started(&c, &RunController::runStarted);
    QSignalSpy ab_done(&c, &RunController::abFinished);
    RunRequest a = request(sample_input(64, 64, 9), 1);
    RunRequest b = request(sample_input(64, 64, 9), 0);  // whole clip at once: the same output
    QVERIFY(c.startAB(a, b) != 0);
    QVERIFY(ab_done.wait(180000));
    const AbComparison ab = ab_done.first().first().value<AbComparison>();
    QVERIFY2(ab.ok, qPrintable(ab.error));
    QCOMPARE(started.count(), 2);
    QCOMPARE(started.at(0).at(1).toString(), QString("A"));
    QCOMPARE(started.at(1).at(1).toString(), QString("B"));
    QVERIFY(ab.a.ok && ab.b.ok);
    QVERIFY2(ab.a_vs_b.max_abs < 1e-4, qPrintable(QString::number(ab.a_vs_b.max_abs)));
    QVERIFY(ab.a_vs_b.psnr_db > 60);
    QVERIFY(std::isfinite(ab.a.ms_per_frame) && ab.a.ms_per_frame > 0);

    AbPanel panel;
    panel.setResult(ab);
    QTableWidget* table = panel.table();
    const QVector<AbRow> rows = ab_table_rows(ab, true);
    QCOMPARE(table->rowCount(), static_cast<int>(rows.size()));
    for (int i = 0; i < table->rowCount(); ++i) {
      QVERIFY(!table->item(i, 0)->text().isEmpty());
      QVERIFY(!table->item(i, 1)->text().isEmpty());
    }
    QCOMPARE(table->item(0, 0)->text(), QString("Status"));
    QCOMPARE(table->item(0, 1)->text(), QString("done"));
    bool has_max_abs = false;
    for (const AbRow& r : rows) has_max_abs |= r.label == "A vs B max |diff|";
    QVERIFY(has_max_abs);
  }

  void abTiledAgainstUntiled() {
    RunController c(std::make_shared<CpuCatalog>());
    QSignalSpy ab_done(&c, &RunController::abFinished);
    RunRequest a = request(sample_input(96, 96, 5), 1);
    RunRequest b = a;
    b.settings.tiling = TilingMode::kBlend;
    b.settings.tile_width = b.settings.tile_height = 64;
    b.settings.overlap_width = b.settings.overlap_height = 16;
    QVERIFY(c.startAB(a, b) != 0);
    QVERIFY(ab_done.wait(180000));
    const AbComparison ab = ab_done.first().first().value<AbComparison>();
    QVERIFY2(ab.ok, qPrintable(ab.error));
    QVERIFY(!ab.a.tiled());
    QVERIFY(ab.b.tiled());
    QVERIFY(ab.b.overlay.tiles.size() >= 4);
    QCOMPARE(ab.tiled_slot, QString("B"));
    QVERIFY(std::isfinite(ab.seam_max_abs));
    QVERIFY(ab.b.tile_report);
  }

  void chartsFollowARun() {
    auto w = make_window(dir_, "charts");
    QSignalSpy weights(w.get(), &MainWindow::weightsLoaded);
    QSignalSpy finished(w.get(), &MainWindow::runFinished);
    QVERIFY(weights.wait(20000));
    // Long enough (a few seconds) for several chart refreshes during the run.
    w->infoPanel()->setSample(192, 192, 17);
    QVERIFY(w->startRun());
    // Points arrive while the run is going, not only at the end.
    QTRY_VERIFY_WITH_TIMEOUT(w->chartsPanel()->allocatedSeries()->count() > 0 || !finished.isEmpty(), 60000);
    const bool during = finished.isEmpty();
    if (finished.isEmpty()) QVERIFY(finished.wait(120000));
    QVERIFY2(during, "no chart point arrived before the run finished");
    w->chartsPanel()->flush();
    ChartsPanel* charts = w->chartsPanel();
    QVERIFY(charts->allocatedSeries()->count() > 5);
    QVERIFY(charts->peakSeries()->count() > 5);
    QVERIFY(charts->deviceSeries()->count() > 5);  // the process's resident size on the CPU
    QVERIFY(charts->timingCategories() >= 4);     // encode and decode chunks
    const RunSummary s = finished.last().first().value<RunSummary>();
    QCOMPARE(charts->log().size(), s.telemetry.size());
    QCOMPARE(w->scrubber()->available(), qint64{17});

    // Export the report from the window.
    QSignalSpy written(w.get(), &MainWindow::reportWritten);
    w->exportReportTo(dir_.filePath("window-report"));
    QVERIFY(written.wait(60000));
    const ReportResult r = written.first().first().value<ReportResult>();
    QVERIFY2(r.ok, qPrintable(r.error));
    QVERIFY(QFileInfo::exists(dir_.filePath("window-report/report.md")));
    QVERIFY(QFileInfo::exists(dir_.filePath("window-report/charts/memory.png")));
  }

  void headlessJobWritesReport() {
    StudioOptions o;
    o.headless = true;
    o.ab = true;
    o.sample_width = 64;
    o.sample_height = 64;
    o.frames = 9;
    o.output = dir_.filePath("headless");
    HeadlessJob job(std::make_shared<CpuCatalog>(), o);
    QSignalSpy done(&job, &HeadlessJob::finished);
    job.start();
    QVERIFY(done.wait(300000));
    QCOMPARE(done.first().first().toInt(), 0);
    const QString out = dir_.filePath("headless");
    for (const char* f : {"report.md", "report.json", "charts/memory.png", "charts/timing.png",
                          "stills/A_frame_0000_original.png", "stills/B_frame_0008_reconstruction.png",
                          "stills/ab_frame_0004_difference_x4.png"}) {
      QVERIFY2(QFileInfo::exists(out + "/" + f), f);
    }
    QFile md(out + "/report.md");
    QVERIFY(md.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(md.readAll());
    QVERIFY(text.contains("## Time by stage") && text.contains("| decoder.conv_out |"));
    QVERIFY2(!text.contains("(GPU "), "the CPU backend has no device timer: no GPU times");
    QFile json(out + "/report.json");
    QVERIFY(json.open(QIODevice::ReadOnly));
    const QJsonObject root = QJsonDocument::fromJson(json.readAll()).object();
    QCOMPARE(root.value("format").toString(), QString("seedvae-studio-report"));
    QCOMPARE(root.value("runs").toArray().size(), 2);
    QCOMPARE(root.value("runs").toArray().at(0).toObject().value("status").toString(), QString("done"));
    QVERIFY(root.value("ab").toObject().value("table").toArray().size() >= 8);
    QVERIFY(root.value("runs").toArray().at(1).toObject().value("tiles").toArray().size() >= 4);
  }

  void optionsAndDisplay() {
    QString msg;
    int code = -1;
    auto o = parse_studio_options({"seedvae-studio", "--demo", "--ab", "--frames", "9", "--sample-size", "96x64"}, &msg, &code);
    QVERIFY(o.has_value());
    QVERIFY(o->demo && o->ab && !o->headless);
    QCOMPARE(o->frames, 9);
    QCOMPARE(o->sample_width, 96);
    QCOMPARE(input_from_options(*o).sample_frames, 9);
    QVERIFY(!parse_studio_options({"seedvae-studio", "--frames", "x"}, &msg, &code));
    QCOMPARE(code, 2);
    QVERIFY(!parse_studio_options({"seedvae-studio", "--help"}, &msg, &code));
    QCOMPARE(code, 0);
    QVERIFY(msg.contains("--headless"));
    const EngineSettings b = demo_b_settings(EngineSettings{}, 256, 256);
    QCOMPARE(b.tiling, TilingMode::kBlend);
    QCOMPARE(b.tile_width, 128);
  }

 private:
  QTemporaryDir dir_;
  std::shared_ptr<const VaeWeights> weights_;
};

QTEST_MAIN(tst_StudioRuns)
#include "tst_studio_runs.moc"
