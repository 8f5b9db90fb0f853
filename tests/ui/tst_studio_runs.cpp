// Engine runs through the studio's controller on the CPU backend with the tiny configuration:
// frames stream in while the worker thread computes (QSignalSpy), cancel takes effect within a
// chunk, an A/B run produces its table (also across families: each slot on its own weights),
// chart series receive points during a run, and the headless job writes its report.
#include <QComboBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineSeries>
#include <QMenu>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QToolButton>
#include <QtTest>
#include <cmath>

#include "core/media/metrics.h"
#include "studio_test_util.h"
#include "ui/ab_panel.h"
#include "ui/channels.h"
#include "ui/charts_panel.h"
#include "ui/info_panel.h"
#include "ui/report.h"
#include "ui/run_controller.h"
#include "ui/scrubber.h"
#include "ui/settings_panel.h"
#include "ui/studio_app.h"

using namespace seedvae;
using namespace seedvae::ui;
using namespace seedvae::ui::test;

class tst_StudioRuns : public QObject {
  Q_OBJECT

  RunRequest request(const JobInput& in, int chunk) {
    RunRequest r;
    r.input = in;
    r.weights = weights_;
    r.settings.chunk_latents = chunk;
    return r;
  }

  // Writes the report of `runs` (no video) into dir_/<name> and reads back report.md and the
  // "runs" array of report.json ({} when any step failed, which the caller's checks then catch).
  struct WrittenReport {
    QString markdown;
    QJsonArray runs;
  };
  WrittenReport write_and_read_report(const QString& name, const QList<RunSummary>& runs) {
    ReportJob job;
    job.directory = dir_.filePath(name);
    job.runs = runs;
    job.write_video = false;
    const ReportResult r = write_report(job, nullptr);
    if (!r.ok) qWarning("write_report: %s", qPrintable(r.error));
    WrittenReport out;
    QFile md(job.directory + "/report.md");
    if (md.open(QIODevice::ReadOnly)) out.markdown = QString::fromUtf8(md.readAll());
    QFile json(job.directory + "/report.json");
    if (json.open(QIODevice::ReadOnly)) {
      out.runs = QJsonDocument::fromJson(json.readAll()).object().value("runs").toArray();
    }
    return out;
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
    // The summary splits it: the engine's stop, then the summary's dispatch, within the whole.
    QVERIFY2(s.cancel_stop_s >= 0 && s.cancel_done_s >= s.cancel_stop_s &&
                 s.cancel_done_s * 1000 <= latency_ms + 1,
             qPrintable(QString("%1 %2").arg(s.cancel_stop_s).arg(s.cancel_done_s)));

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
    b.settings.tiling = "blend";
    b.settings.tile = {64, 64};
    b.settings.overlap = {16, 16};
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

  // The A/B panel's status says "Running A/B…" only while an A/B runs: after it, the result; after
  // a single run (which only disables Run A/B), the prompt again; after a cancelled A/B (during A
  // and during B), the reason.
  void abStatusIsNotRunningAfterTheRun() {
    auto w = make_window(dir_, "ab-status");
    QSignalSpy weights(w.get(), &MainWindow::weightsLoaded);
    QSignalSpy ab_done(w.get(), &MainWindow::abFinished);
    QSignalSpy finished(w.get(), &MainWindow::runFinished);
    QVERIFY(weights.wait(20000));
    w->infoPanel()->setSample(64, 64, 9);
    RunOptions a = w->settingsPanel()->settings();
    a.chunk_latents = 1;
    RunOptions b = a;
    b.chunk_latents = 0;
    w->setSlot("A", a);
    w->setSlot("B", b);
    auto* status = w->abPanel()->findChild<QLabel*>("abStatus");
    QVERIFY(status);
    auto running = [&] { return status->text().contains("Running"); };

    // A finished A/B.
    QVERIFY(w->startAB());
    QVERIFY2(running(), qPrintable(status->text()));
    QVERIFY(ab_done.wait(180000));
    QVERIFY2(ab_done.last().first().value<AbComparison>().ok,
             qPrintable(ab_done.last().first().value<AbComparison>().error));
    QVERIFY(!w->controller()->busy());
    QVERIFY2(!running() && status->text().contains("A/B done"), qPrintable(status->text()));

    // A single run: Run A/B waits, and the panel does not claim an A/B is running, during or
    // after it.
    finished.clear();
    QVERIFY(w->startRun());
    QVERIFY2(!running(), qPrintable(status->text()));
    QVERIFY(!w->abPanel()->findChild<QPushButton*>("runAB")->isEnabled());
    QVERIFY(finished.wait(120000));
    QTRY_VERIFY_WITH_TIMEOUT(!w->controller()->busy(), 10000);
    QVERIFY2(!running(), qPrintable(status->text()));
    QVERIFY(w->abPanel()->findChild<QPushButton*>("runAB")->isEnabled());

    // An A/B cancelled during A, then one cancelled during B: the panel says so.
    ab_done.clear();
    QVERIFY(w->startAB());
    w->cancelRun();
    QVERIFY(ab_done.wait(60000));
    QVERIFY(!ab_done.last().first().value<AbComparison>().ok);
    QVERIFY2(!running() && status->text().contains("cancelled"), qPrintable(status->text()));

    // (A larger clip, so B is still computing when its start arrives here.)
    w->infoPanel()->setSample(128, 128, 17);
    ab_done.clear();
    QSignalSpy started(w->controller(), &RunController::runStarted);
    QVERIFY(w->startAB());
    QTRY_VERIFY_WITH_TIMEOUT(started.count() == 2 || !ab_done.isEmpty(), 120000);
    QVERIFY2(ab_done.isEmpty(), "the A/B ended before B started");
    w->cancelRun();
    QVERIFY(ab_done.wait(60000));
    const AbComparison cancelled_b = ab_done.last().first().value<AbComparison>();
    QVERIFY(!cancelled_b.ok);
    QVERIFY(cancelled_b.a.ok && cancelled_b.b.cancelled);
    QVERIFY2(!running() && status->text().contains("cancelled"), qPrintable(status->text()));
  }

  // An A/B across families, each slot on its own checkpoint read by the engine thread: A a Wan2.1
  // VAE, B a SeedVR2 VAE, on the built-in sample clip. Both results, their families named in the
  // table, finite PSNR against the same original at the same size. Then Wan2.2 (spatial factor
  // 16) against SeedVR2 (8) on a clip that 16 does not divide: each pads its own way, both are
  // compared at the clip's size. Then a refusal: blend tiling, SeedVR2's only, fails A with its
  // reason while B's result still shows (and only B can be queued). Then a cancel before A's
  // weights are read.
  void abAcrossFamilies() {
    const QString wan_file = dir_.filePath("wan21-tiny.safetensors");
    {
      auto wan = synthetic_weights("wan21-tiny");
      QVERIFY2(wan.is_ok(), wan.status().to_string().c_str());
      const Status st = save_weights(wan_file.toStdString(), *wan, DType::kF16);
      QVERIFY2(st.is_ok(), st.to_string().c_str());
    }
    const QString seedvr2_file = write_tiny_weights(dir_, "seedvr2-tiny.safetensors");
    auto w = make_window(dir_, "ab-families");
    QSignalSpy weights(w.get(), &MainWindow::weightsLoaded);
    QSignalSpy ab_done(w.get(), &MainWindow::abFinished);
    QVERIFY(weights.wait(20000));
    w->infoPanel()->setSample(64, 64, 9);
    RunOptions s = w->settingsPanel()->settings();
    s.chunk_latents = 1;
    w->setSlot("A", s);
    w->setSlot("B", s);
    w->setSlotWeights("A", WeightsSpec{wan_file, QString()});
    w->setSlotWeights("B", WeightsSpec{seedvr2_file, QString()});
    QComboBox* combo_a = w->abPanel()->weightsCombo("A");
    QVERIFY(combo_a && combo_a->currentText().contains("wan21-tiny.safetensors"));

    QVERIFY(w->startAB());
    QVERIFY(ab_done.wait(180000));
    AbComparison ab = ab_done.last().first().value<AbComparison>();
    QVERIFY2(ab.ok, qPrintable(ab.error));
    QCOMPARE(ab.a.family, QString("Wan2.1"));
    QCOMPARE(ab.b.family, QString("SeedVR2"));
    QCOMPARE(ab.a.weights.path, wan_file);
    QCOMPARE(ab.b.weights.path, seedvr2_file);
    QCOMPARE(ab.a.weights_source, wan_file);
    QVERIFY(std::isfinite(ab.a.vs_original.psnr_db) && std::isfinite(ab.b.vs_original.psnr_db));
    QVERIFY(std::isfinite(ab.a.vs_original.ssim) && std::isfinite(ab.b.vs_original.ssim));
    QVERIFY(std::isfinite(ab.a_vs_b.psnr_db));
    QVERIFY(ab.a.ms_per_frame > 0 && ab.b.ms_per_frame > 0);
    QVERIFY(ab.a.peak_bytes > 0 && ab.b.peak_bytes > 0);
    // Different networks: their outputs differ (the slots did not share one model).
    QVERIFY2(ab.a_vs_b.max_abs > 1e-3, qPrintable(QString::number(ab.a_vs_b.max_abs)));
    QCOMPARE(ab.a.width, 64);
    QCOMPARE(ab.b.width, 64);
    // The table names each side's weights and family.
    auto row = [](const AbComparison& c, const QString& label) {
      for (const AbRow& r : ab_table_rows(c, true)) {
        if (r.label == label) return r;
      }
      return AbRow{};
    };
    QCOMPARE(row(ab, "Family").a, QString("Wan2.1"));
    QCOMPARE(row(ab, "Family").b, QString("SeedVR2"));
    QCOMPARE(row(ab, "Weights").a, QString("wan21-tiny.safetensors"));
    QTableWidget* table = w->abPanel()->table();
    bool family_row = false;
    for (int i = 0; i < table->rowCount(); ++i) {
      family_row |= table->item(i, 0)->text() == "Family" &&
                    table->item(i, 1)->text() == "Wan2.1" && table->item(i, 2)->text() == "SeedVR2";
    }
    QVERIFY(family_row);

    // Wan2.2 pads to multiples of 16, SeedVR2 to 8: a 72x56 clip is compared at 72x56, against
    // the same original frames.
    w->infoPanel()->setSample(72, 56, 5);
    w->setSlotWeights("A", WeightsSpec{QString(), "wan22-tiny"});
    w->setSlotWeights("B", WeightsSpec{QString(), "tiny"});
    ab_done.clear();
    QVERIFY(w->startAB());
    QVERIFY(ab_done.wait(180000));
    ab = ab_done.last().first().value<AbComparison>();
    QVERIFY2(ab.ok, qPrintable(ab.error));
    QCOMPARE(ab.a.family, QString("Wan2.2"));
    QCOMPARE(ab.b.family, QString("SeedVR2"));
    QCOMPARE(ab.a.padded_width, 80);
    QCOMPARE(ab.a.padded_height, 64);
    QCOMPARE(ab.b.padded_width, 72);
    QCOMPARE(ab.b.padded_height, 56);
    QVERIFY(ab.a.reconstruction && ab.b.reconstruction && ab.a.original && ab.b.original);
    QVERIFY2(ab.a.reconstruction->shape() == Shape({1, 3, 5, 56, 72}),
             ab.a.reconstruction->shape().to_string().c_str());
    QVERIFY2(ab.b.reconstruction->shape() == ab.a.reconstruction->shape(),
             ab.b.reconstruction->shape().to_string().c_str());
    {
      auto oa = ab.a.original->read_all();
      auto ob = ab.b.original->read_all();
      QVERIFY(oa.is_ok() && ob.is_ok());
      auto same = media::compare_clips(*oa, *ob);
      QVERIFY2(same.is_ok(), same.status().to_string().c_str());
      QCOMPARE(same->max_abs, 0.0);
    }
    QVERIFY(std::isfinite(ab.a.vs_original.psnr_db) && std::isfinite(ab.b.vs_original.psnr_db));

    // A refusal: blend tiling on the Wan VAE. A fails with the reason, B (SeedVR2) runs anyway.
    w->infoPanel()->setSample(96, 96, 5);
    RunOptions blend = s;
    blend.tiling = "blend";
    blend.tile = {64, 64};
    blend.overlap = {16, 16};
    w->setSlot("A", blend);
    w->setSlot("B", blend);
    w->setSlotWeights("A", WeightsSpec{QString(), "wan21-tiny"});
    ab_done.clear();
    QVERIFY(w->startAB());
    QVERIFY(ab_done.wait(180000));
    ab = ab_done.last().first().value<AbComparison>();
    QVERIFY(!ab.ok && !ab.cancelled);
    QVERIFY(!ab.a.ok && !ab.a.cancelled);
    QVERIFY2(ab.a.error.contains("blend tiling"), qPrintable(ab.a.error));
    QVERIFY2(ab.error.contains("run A failed"), qPrintable(ab.error));
    QVERIFY2(ab.b.ok, qPrintable(ab.b.error));
    QCOMPARE(ab.b.family, QString("SeedVR2"));
    QVERIFY(ab.b.tiled());
    QVERIFY(std::isfinite(ab.b.vs_original.psnr_db));
    QVERIFY(row(ab, "Status").a.startsWith("failed: "));
    QCOMPARE(row(ab, "Status").b, QString("done"));
    const QString status = w->abPanel()->statusText();
    QVERIFY2(status.contains("incomplete") && status.contains("blend tiling"), qPrintable(status));
    auto* enqueue = w->abPanel()->findChild<QToolButton*>("enqueueWinner");
    QVERIFY(enqueue && enqueue->isEnabled());
    QVERIFY(!enqueue->menu()->findChild<QAction*>("enqueueA"));
    QVERIFY(enqueue->menu()->findChild<QAction*>("enqueueB"));
    QCOMPARE(w->pair(), MainWindow::Pair::kOriginalB);

    // A cancel before A's weights are read ends the A/B there.
    w->setSlot("A", s);
    w->setSlot("B", s);
    ab_done.clear();
    QVERIFY(w->startAB());
    w->cancelRun();
    QVERIFY(ab_done.wait(60000));
    ab = ab_done.last().first().value<AbComparison>();
    QVERIFY(ab.cancelled && ab.a.cancelled);
    QTRY_VERIFY_WITH_TIMEOUT(!w->controller()->busy(), 10000);
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
    QTRY_VERIFY_WITH_TIMEOUT(
        w->chartsPanel()->allocatedSeries()->count() > 0 || !finished.isEmpty(), 60000);
    const bool during = finished.isEmpty();
    if (finished.isEmpty()) QVERIFY(finished.wait(120000));
    QVERIFY2(during, "no chart point arrived before the run finished");
    w->chartsPanel()->flush();
    ChartsPanel* charts = w->chartsPanel();
    QVERIFY(charts->allocatedSeries()->count() > 5);
    QVERIFY(charts->peakSeries()->count() > 5);
    QVERIFY(charts->deviceSeries()->count() > 5);  // the process's resident size on the CPU
    QVERIFY(charts->timingCategories() >= 4);      // encode and decode chunks
    const RunSummary s = finished.last().first().value<RunSummary>();
    QCOMPARE(charts->log().size(), s.telemetry.size());
    QCOMPARE(w->scrubber()->available(), qint64{17});

    // Scrubbing to a frame not converted yet: the GUI thread keeps the image it shows and the
    // frame converter makes the new one, which then replaces it.
    QVERIFY(s.store);
    qint64 cold = 0;
    while (cold < 16 && !s.store->cached_frame(cold).isNull()) ++cold;
    QVERIFY(s.store->cached_frame(cold).isNull());
    w->scrubber()->setFollow(false);
    const QImage before = w->view()->rightImage();
    w->scrubber()->setPosition(cold);
    QCOMPARE(w->view()->rightImage(), before);
    QTRY_VERIFY_WITH_TIMEOUT(!s.store->cached_frame(cold).isNull(), 10000);
    QTRY_COMPARE_WITH_TIMEOUT(w->view()->rightImage(), s.store->cached_frame(cold), 10000);
    QVERIFY(w->view()->rightImage() != before);

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
    const StudioOptions o = headless_ab("headless", 64, 9);
    HeadlessJob job(std::make_shared<CpuCatalog>(), o);
    QSignalSpy done(&job, &HeadlessJob::finished);
    job.start();
    QVERIFY(done.wait(300000));
    QCOMPARE(done.first().first().toInt(), 0);
    const QString out = dir_.filePath("headless");
    for (const char* f :
         {"report.md", "report.json", "charts/memory.png", "charts/timing.png",
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
    QCOMPARE(root.value("runs").toArray().at(0).toObject().value("status").toString(),
             QString("done"));
    // Headless, "auto" CPU threads is every hardware thread (the GUI's leaves one), on A and B.
    const int every_thread = CpuCatalog::hardware_threads();
    for (const QJsonValue run : root.value("runs").toArray()) {
      const QJsonObject settings = run.toObject().value("settings").toObject();
      QCOMPARE(settings.value("threads").toInt(), every_thread);
    }
    QVERIFY(root.value("ab").toObject().value("table").toArray().size() >= 8);
    QVERIFY(root.value("runs").toArray().at(1).toObject().value("tiles").toArray().size() >= 4);
  }

  // The headless A/B with each slot's own weights (--weights-a, --weights-b): B takes A's settings
  // (a comparison of weights) and the report names each side's family. With blend tiling on both
  // (--preset, --preset-b) the Wan slot is refused: the report still shows the SeedVR2 slot, and
  // the exit code says the A/B is incomplete.
  void headlessAbAcrossFamilies() {
    StudioOptions o = headless_ab("headless-families", 32, 5);
    o.weights_a = "synthetic:wan21-tiny";
    o.weights_b = "synthetic:tiny";
    o.no_video = true;
    auto read_json = [](const QString& dir) {
      QFile json(dir + "/report.json");
      if (!json.open(QIODevice::ReadOnly)) return QJsonObject();
      return QJsonDocument::fromJson(json.readAll()).object();
    };
    auto read_md = [](const QString& dir) {
      QFile md(dir + "/report.md");
      return md.open(QIODevice::ReadOnly) ? QString::fromUtf8(md.readAll()) : QString();
    };
    {
      HeadlessJob job(std::make_shared<CpuCatalog>(), o);
      QSignalSpy done(&job, &HeadlessJob::finished);
      job.start();
      QVERIFY(done.wait(300000));
      QCOMPARE(done.first().first().toInt(), 0);
    }
    QJsonArray runs = read_json(o.output).value("runs").toArray();
    QCOMPARE(runs.size(), 2);
    QCOMPARE(runs.at(0).toObject().value("family").toString(), QString("Wan2.1"));
    QCOMPARE(runs.at(0).toObject().value("weights_spec").toString(),
             QString("synthetic:wan21-tiny"));
    QCOMPARE(runs.at(1).toObject().value("family").toString(), QString("SeedVR2"));
    QVERIFY(!runs.at(1).toObject().contains("tiles"));  // B ran with A's (untiled) settings
    QVERIFY(read_md(o.output).contains("A and B ran on different weights"));

    RunOptions blend;
    blend.tiling = "blend";
    blend.tile = {64, 64};
    blend.overlap = {16, 16};
    const QString preset = dir_.filePath("blend-preset.json");
    QString error;
    QVERIFY2(SettingsStore::write_preset_file(preset, "blend", blend, &error), qPrintable(error));
    StudioOptions refused = headless_ab("headless-refused", 96, 5);
    refused.weights_a = "synthetic:wan21-tiny";
    refused.preset = refused.preset_b = preset;
    refused.no_video = true;
    {
      HeadlessJob job(std::make_shared<CpuCatalog>(), refused);
      QSignalSpy done(&job, &HeadlessJob::finished);
      job.start();
      QVERIFY(done.wait(300000));
      QCOMPARE(done.first().first().toInt(), 1);
    }
    runs = read_json(refused.output).value("runs").toArray();
    QCOMPARE(runs.size(), 2);
    QVERIFY(runs.at(0).toObject().value("status").toString() != "done");
    QCOMPARE(runs.at(1).toObject().value("status").toString(), QString("done"));
    QVERIFY(runs.at(1).toObject().value("tiles").toArray().size() >= 4);
    const QString md = read_md(refused.output);
    QVERIFY2(md.contains("blend tiling is SeedVR2"), qPrintable(md.left(2000)));
  }

  // A headless A/B interrupted after A (SIGINT lands between the runs) exits with 130, the
  // cancelled code, not 1: A did not fail.
  void headlessAbCancelledBetweenRuns() {
    const StudioOptions o = headless_ab("headless-cancelled", 32, 5);
    HeadlessJob job(std::make_shared<CpuCatalog>(), o);
    QSignalSpy done(&job, &HeadlessJob::finished);
    QString slot_seen;
    connect(job.controller(), &RunController::runFinished, &job, [&](const RunSummary& s) {
      slot_seen += s.slot + (s.ok ? "+" : "-");
      if (s.slot == QLatin1String("A")) job.cancel();
    });
    job.start();
    QVERIFY(done.wait(120000));
    QCOMPARE(slot_seen, QString("A+"));  // B never ran
    QCOMPARE(done.first().first().toInt(), 130);
    QVERIFY(!QFileInfo::exists(o.output + "/report.md"));
  }

  // Frame prefetch on a PNG-sequence video: the reconstruction is bit-identical to the run that
  // reads the whole clip first, the summary and the report say which path ran and what it
  // overlapped; tiling does not prefetch, the sample clip does.
  void prefetchMatchesWholeClipRead() {
    // 60x44 pads to 64x48 and 11 frames to 13: spatial and temporal padding on both paths.
    const QString video = write_sample_video(dir_, "prefetch-clip", 60, 44, 11);
    JobInput in;
    in.path = to_fs_path(video);
    auto run_once = [&](RunController& c, const RunRequest& r) {
      QSignalSpy finished(&c, &RunController::runFinished);
      if (c.start(r) == 0) return RunSummary{};
      if (!finished.wait(120000)) return RunSummary{};
      return finished.first().first().value<RunSummary>();
    };
    RunRequest on = request(in, 1);
    RunRequest off = on;
    off.settings.prefetch = "off";
    RunController c_on(std::make_shared<CpuCatalog>()), c_off(std::make_shared<CpuCatalog>());
    const RunSummary a = run_once(c_on, on);
    const RunSummary b = run_once(c_off, off);
    QVERIFY2(a.ok, qPrintable(a.error));
    QVERIFY2(b.ok, qPrintable(b.error));
    QVERIFY(a.prefetch);
    QVERIFY(a.prefetch_note.isEmpty());
    QVERIFY(!b.prefetch);
    QCOMPARE(b.prefetch_note, QString("off"));
    QCOMPARE(a.frames, qint64{11});
    QCOMPARE(a.padded_frames, qint64{13});
    QCOMPARE(a.padded_width, 64);
    QCOMPARE(a.padded_height, 48);
    QCOMPARE(a.frames, b.frames);
    QVERIFY(a.predicted_peak_bytes > 0);
    QVERIFY(a.read_overlap_s >= 0 && a.read_wait_s >= 0);
    QCOMPARE(b.read_overlap_s, 0.0);
    auto max_abs = [](const media::FrameSpool& sx, const media::FrameSpool& sy) {
      auto rx = sx.read_all(), ry = sy.read_all();
      if (!rx.is_ok() || !ry.is_ok() || !(rx->shape() == ry->shape())) return -1.0;
      double m = 0;
      const auto fx = rx->f32(), fy = ry->f32();
      for (size_t i = 0; i < fx.size(); ++i)
        m = std::max(m, static_cast<double>(std::abs(fx[i] - fy[i])));
      return m;
    };
    QVERIFY(a.reconstruction && b.reconstruction && a.original && b.original);
    QCOMPARE(a.reconstruction->shape(), (Shape{1, 3, 11, 44, 60}));
    QCOMPARE(max_abs(*a.original, *b.original), 0.0);
    QCOMPARE(max_abs(*a.reconstruction, *b.reconstruction), 0.0);
    QCOMPARE(a.vs_original.psnr_db, b.vs_original.psnr_db);
    // The preview got every original and every decoded frame.
    QCOMPARE(a.store->original_count(), qint64{11});
    QCOMPARE(a.store->available(), qint64{11});
    QCOMPARE(a.store->total(), qint64{11});

    // The same input again: read again (nothing of the clip is kept in memory between runs), the
    // same frames.
    const RunSummary again = run_once(c_on, on);
    QVERIFY2(again.ok, qPrintable(again.error));
    QVERIFY(again.prefetch);
    QCOMPARE(max_abs(*again.reconstruction, *a.reconstruction), 0.0);
    // The frames are kept in temporary files, not in memory.
    QVERIFY(a.reconstruction->on_disk() && a.original->on_disk());
    // Tiling: prefetch does not apply, and the summary says why. The sample clip is generated
    // on the prefetch thread like a file is read.
    RunController c2(std::make_shared<CpuCatalog>());
    RunRequest tiled = on;
    tiled.settings.tiling = "blend";
    tiled.settings.tile = {32, 32};
    tiled.settings.overlap = {8, 8};
    const RunSummary t = run_once(c2, tiled);
    QVERIFY2(t.ok, qPrintable(t.error));
    QVERIFY(!t.prefetch);
    QVERIFY2(t.prefetch_note.contains("does not apply") && t.prefetch_note.contains("tiling"),
             qPrintable(t.prefetch_note));
    const RunSummary sample = run_once(c2, request(sample_input(64, 64, 5), 1));
    QVERIFY2(sample.ok, qPrintable(sample.error));
    QVERIFY2(sample.prefetch, qPrintable(sample.prefetch_note));

    // The report's run table and report.json.
    const WrittenReport rep = write_and_read_report("prefetch-report", {a, b});
    const QString& text = rep.markdown;
    QVERIFY2(text.contains("| Frame prefetch | on: reading overlapped encoding") &&
                 text.contains("not used (off)"),
             qPrintable(text));
    const QJsonArray& runs = rep.runs;
    QCOMPARE(runs.size(), 2);
    QCOMPARE(runs.at(0).toObject().value("prefetch").toObject().value("used").toBool(), true);
    QCOMPARE(runs.at(1).toObject().value("prefetch").toObject().value("used").toBool(), false);
    QCOMPARE(runs.at(1).toObject().value("prefetch").toObject().value("note").toString(),
             QString("off"));
    QVERIFY(runs.at(0).toObject().value("seconds").toObject().contains("read_overlapped"));
    QCOMPARE(runs.at(0).toObject().value("settings").toObject().value("prefetch").toString(),
             QString("auto"));
  }

  // Async tiles on and off give bit-identical reconstructions (and the same frames in the
  // preview store), untiled in temporal chunks and with blend tiling; exact tiling ignores the
  // flag and says so; the report's run table and report.json show which ran.
  void asyncTilesMatchSynchronous() {
    auto run_once = [&](const RunRequest& r) {
      RunController c(std::make_shared<CpuCatalog>());
      QSignalSpy finished(&c, &RunController::runFinished);
      if (c.start(r) == 0) return RunSummary{};
      if (!finished.wait(120000)) return RunSummary{};
      return finished.first().first().value<RunSummary>();
    };
    auto same_frames = [](const RunSummary& x, const RunSummary& y) {
      if (!x.reconstruction || !y.reconstruction ||
          !(x.reconstruction->shape() == y.reconstruction->shape())) {
        return false;
      }
      auto rx = x.reconstruction->read_all(), ry = y.reconstruction->read_all();
      if (!rx.is_ok() || !ry.is_ok()) return false;
      const auto fx = rx->f32(), fy = ry->f32();
      for (size_t i = 0; i < fx.size(); ++i) {
        if (fx[i] != fy[i]) return false;
      }
      if (x.store->available() != y.store->available()) return false;
      for (qint64 i = 0; i < x.store->available(); ++i) {
        if (x.store->frame(i) != y.store->frame(i)) return false;
      }
      return true;
    };
    // 13 frames, chunk 1: three temporal chunks, so the pipeline has a next chunk to queue.
    RunRequest untiled = request(sample_input(64, 64, 13), 1);
    RunRequest blend = untiled;
    blend.settings.tiling = "blend";
    blend.settings.tile = {32, 32};
    blend.settings.overlap = {8, 8};
    QVector<RunSummary> ons;
    for (const RunRequest& base : {untiled, blend}) {
      RunRequest on = base, off = base;
      on.settings.async_tiles = "auto";
      off.settings.async_tiles = "off";
      const RunSummary a = run_once(on);
      const RunSummary b = run_once(off);
      QVERIFY2(a.ok, qPrintable(a.error));
      QVERIFY2(b.ok, qPrintable(b.error));
      QVERIFY(a.async_tiles);
      QVERIFY(a.async_tiles_note.isEmpty());
      QVERIFY(!b.async_tiles);
      QCOMPARE(b.async_tiles_note, QString("off"));
      QCOMPARE(a.tiled(), base.settings.tiling == "blend");
      QCOMPARE(a.reconstruction->shape(), (Shape{1, 3, 13, 64, 64}));
      QCOMPARE(a.store->available(), qint64{13});
      QVERIFY2(same_frames(a, b), base.settings.tiling.c_str());
      QCOMPARE(a.vs_original.psnr_db, b.vs_original.psnr_db);
      if (a.tiled()) QCOMPARE(a.seam_energy, b.seam_energy);
      ons << a << b;
    }
    // Exact tiling: the flag is kept but does not apply.
    RunRequest exact = untiled;
    exact.settings.tiling = "exact";
    exact.settings.tile = {32, 32};
    const RunSummary e = run_once(exact);
    QVERIFY2(e.ok, qPrintable(e.error));
    QCOMPARE(e.settings.async_tiles, std::string("auto"));
    QVERIFY(!e.async_tiles);
    QVERIFY2(e.async_tiles_note.startsWith("does not apply: exact tiling"),
             qPrintable(e.async_tiles_note));

    // The report's run table and report.json.
    const WrittenReport rep =
        write_and_read_report("async-tiles-report", {ons.at(2), ons.at(3), e});
    QVERIFY2(rep.markdown.contains("| Async tiles | on | off | does not apply: exact tiling"),
             qPrintable(rep.markdown));
    const QJsonArray& runs = rep.runs;
    QCOMPARE(runs.size(), 3);
    QCOMPARE(runs.at(0).toObject().value("async_tiles").toObject().value("used").toBool(), true);
    QCOMPARE(runs.at(1).toObject().value("async_tiles").toObject().value("used").toBool(), false);
    QCOMPARE(runs.at(1).toObject().value("async_tiles").toObject().value("note").toString(),
             QString("off"));
    QVERIFY(runs.at(2)
                .toObject()
                .value("async_tiles")
                .toObject()
                .value("note")
                .toString()
                .contains("exact tiling"));
    QCOMPARE(runs.at(0).toObject().value("settings").toObject().value("async_tiles").toString(),
             QString("auto"));
    QCOMPARE(runs.at(1).toObject().value("settings").toObject().value("async_tiles").toString(),
             QString("off"));
  }

  // Cancel while the prefetch thread is reading ahead: the run ends promptly as cancelled (the
  // reader stopped and joined), the next run reads the clip again and succeeds, and a missing
  // file fails with the reader's error.
  void cancelDuringPrefetchedRun() {
    const QString video = write_sample_video(dir_, "prefetch-long", 128, 128, 41);
    JobInput in;
    in.path = to_fs_path(video);
    RunController c(std::make_shared<CpuCatalog>());
    QSignalSpy progress(&c, &RunController::progressChanged);
    QSignalSpy finished(&c, &RunController::runFinished);
    QVERIFY(c.start(request(in, 1)) != 0);
    // Wait until the encoder has finished its first chunk (later frames are still being read
    // or waiting in the prefetch queue), then cancel.
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
          for (const auto& args : progress) {
            const ProgressUpdate u = args.first().value<ProgressUpdate>();
            if (u.stage == "encode" && u.done >= 1) return true;
          }
          return !finished.isEmpty();
        }(),
        120000);
    QVERIFY2(finished.isEmpty(), "the run ended before the cancel");
    QElapsedTimer t;
    t.start();
    c.cancel();
    QVERIFY(finished.wait(60000));
    const double latency_ms = t.nsecsElapsed() / 1e6;
    const RunSummary s = finished.first().first().value<RunSummary>();
    QVERIFY(!s.ok);
    QVERIFY2(s.cancelled, qPrintable(s.error));
    QVERIFY(s.prefetch);
    QVERIFY(s.store->available() < 41);
    qInfo("cancel latency during a prefetched encode: %.2f ms", latency_ms);
    QVERIFY2(latency_ms < 3000, qPrintable(QString::number(latency_ms)));
    QVERIFY(!c.busy());

    // A cancel right after the start (the reader is opening the file or reading the first chunk).
    QVERIFY(c.start(request(in, 1)) != 0);
    c.cancel();
    QVERIFY(finished.wait(60000));
    QVERIFY(finished.last().first().value<RunSummary>().cancelled);

    // Not cached by the cancelled runs: the next run prefetches again, to the end.
    RunRequest shorter = request(in, 1);
    shorter.input.max_frames = 9;
    QVERIFY(c.start(shorter) != 0);
    QVERIFY(finished.wait(120000));
    const RunSummary done = finished.last().first().value<RunSummary>();
    QVERIFY2(done.ok, qPrintable(done.error));
    QVERIFY(done.prefetch);
    QCOMPARE(done.frames, qint64{9});

    // Errors arrive as before: a missing input fails the run with the reader's message.
    RunRequest missing = request(in, 1);
    missing.input.path = to_fs_path(dir_.filePath("no-such-clip"));
    QVERIFY(c.start(missing) != 0);
    QVERIFY(finished.wait(60000));
    const RunSummary failed = finished.last().first().value<RunSummary>();
    QVERIFY(!failed.ok);
    QVERIFY(!failed.cancelled);
    QVERIFY2(!failed.error.isEmpty(), "no error message");
  }

  void optionsAndDisplay() {
    QString msg;
    int code = -1;
    auto o = parse_studio_options(
        {"seedvae-studio", "--demo", "--ab", "--frames", "9", "--sample-size", "96x64"}, &msg,
        &code);
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
    QVERIFY2(!msg.contains("<executable_name>"), qPrintable(msg.left(120)));
    // Screenshots at another window size: the size in the file names; 1366x768 keeps the names
    // the documentation links to.
    auto shots = parse_studio_options(
        {"seedvae-studio", "--screenshots", "out", "--screenshot-size", "1920x1080"}, &msg, &code);
    QVERIFY(shots.has_value());
    QCOMPARE(shots->screenshot_size, QSize(1920, 1080));
    QCOMPARE(parse_studio_options({"seedvae-studio"}, &msg, &code)->screenshot_size,
             QSize(1366, 768));
    QCOMPARE(screenshot_file_name("ab", QSize(1366, 768)), QString("studio-ab.png"));
    QCOMPARE(screenshot_file_name("ab", QSize(1920, 1080)), QString("studio-ab-1920x1080.png"));
    QVERIFY(!parse_studio_options({"seedvae-studio", "--screenshot-size", "large"}, &msg, &code));
    QCOMPARE(code, 2);
    // Per-slot weights: a checkpoint or synthetic:NAME; an unknown built-in name is refused.
    auto per_slot =
        parse_studio_options({"seedvae-studio", "--ab", "--weights-a", "synthetic:wan21-tiny",
                              "--weights-b", "/x/vae.safetensors"},
                             &msg, &code);
    QVERIFY(per_slot.has_value());
    QCOMPARE(slot_weights_option(per_slot->weights_a)->builtin, QString("wan21-tiny"));
    QCOMPARE(slot_weights_option(per_slot->weights_b)->path, QString("/x/vae.safetensors"));
    QVERIFY(!slot_weights_option(QString()));
    QVERIFY(
        !parse_studio_options({"seedvae-studio", "--weights-b", "synthetic:huge"}, &msg, &code));
    QCOMPARE(code, 2);
    QVERIFY2(msg.contains("wan21-tiny"), qPrintable(msg));
    const RunOptions b = demo_b_settings(RunOptions(), 256, 256);
    QCOMPARE(b.tiling, std::string("blend"));
    QCOMPARE(b.tile.width, int64_t{128});
  }

 private:
  // A headless A/B of the sample clip, its report into `name` under the test's directory.
  StudioOptions headless_ab(const char* name, int size, int frames) const {
    StudioOptions o;
    o.headless = true;
    o.ab = true;
    o.sample_width = size;
    o.sample_height = size;
    o.frames = frames;
    o.output = dir_.filePath(name);
    return o;
  }

  QTemporaryDir dir_;
  std::shared_ptr<const VaeWeights> weights_;
};

QTEST_MAIN(tst_StudioRuns)
#include "tst_studio_runs.moc"
