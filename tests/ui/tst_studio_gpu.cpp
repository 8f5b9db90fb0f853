// The studio on a GPU: the real main window with the real backend catalog (the CUDA backend owned
// by the studio's engine thread) runs the built-in sample clip at 1280x720, 33 frames, with the
// weights of SEEDVAE_STUDIO_GPU_WEIGHTS (the real configuration on the GPU machine; the tiny one
// when unset). Asserted, while a 1 ms GUI timer measures every event-loop gap (stall_probe.h):
//   - frames stream into the preview during the run, stage times come from CUDA events and the
//     memory chart's device series from the card;
//   - an A/B of two GPU settings (bf16 as set vs the lean schedule) completes, both runs agree
//     (A vs B PSNR), and the studio's encode+decode ms/frame matches `seedvae bench` of the same
//     settings within 25 %;
//   - cancel takes effect within one chunk, and the next run succeeds;
//   - an out-of-memory (a 2 GiB budget, no automatic schedule) is reported in the window with
//     the engine's message, and the next run with a fitting setting succeeds;
//   - CUDA -> CPU -> CUDA between runs works, and the idle engine gives the card back (the
//     device's free memory returns to within 256 MiB of what it was before the first run);
//   - the device list names every card with its memory; with two or more, a run on the last
//     card runs there and leaves card 0 alone, and so does the CLI's --device;
//   - no GUI event-loop gap is the application's own for 100 ms or more at the run's usual
//     speed (stall_probe.h).
// Without a CUDA device (or in a build without the CUDA backend) it exits with 77 (skipped).
#include <QComboBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <cstdio>

#include "app/studio_catalog.h"
#include "tests/ui/stall_probe.h"
#include "tests/ui/stall_stacks.h"
#include "tests/ui/studio_test_util.h"
#include "tests/ui/thread_cpu_log.h"
#include "ui/charts_panel.h"
#include "ui/info_panel.h"
#include "ui/main_window.h"
#include "ui/report.h"
#include "ui/run_controller.h"
#include "ui/settings_panel.h"
#include "ui/studio_app.h"
#ifdef SEEDVAE_HAVE_CUDA
#include "gpu/cuda_backend.h"
#endif

using namespace seedvae;
using namespace seedvae::ui;
using namespace seedvae::ui::test;

namespace {

using Clock = std::chrono::steady_clock;

int64_t device_free_bytes() {
#ifdef SEEDVAE_HAVE_CUDA
  const auto devices = gpu::list_devices();
  return devices.empty() ? -1 : devices.front().free_bytes;
#else
  return -1;
#endif
}

}  // namespace

class tst_StudioGpu : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  std::unique_ptr<MainWindow> w_;
  StallProbe gaps_;
  std::unique_ptr<StallStacks> stacks_;  // SEEDVAE_STALL_STACKS=<ms>: where a stall happens
  ThreadCpuLog threads_;                 // where the CPU time went, printed at the end
  QTimer probe_;
  int64_t free_before_ = -1;
  double first_ms_per_frame_ = 0;

  RunOptions gpu_settings() const {
    RunOptions s = w_->settingsPanel()->settings();
    s.backend = "cuda";
    s.device = 0;
    s.precision = "bf16";
    s.tiling = "off";
    s.budget_gb = 0;
    s.auto_schedule = true;
    return s;
  }

  // Runs the panel's settings to the end; the summary (ok false on a timeout).
  RunSummary run_once(int timeout_ms = 600000) {
    QSignalSpy finished(w_.get(), &MainWindow::runFinished);
    if (!w_->startRun()) return {};
    if (!finished.wait(timeout_ms)) return {};
    return finished.first().first().value<RunSummary>();
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    prepare_gui_process();  // as seedvae-studio does
    free_before_ = device_free_bytes();
    w_ = std::make_unique<MainWindow>(app::make_studio_catalog(), temp_store(dir_, "gpu"));
    w_->setConfirmations(false);
    w_->resize(1920, 1080);
    w_->show();
    QVERIFY(QTest::qWaitForWindowExposed(w_.get()));
    QSignalSpy weights(w_.get(), &MainWindow::weightsLoaded);
    const QString path = qEnvironmentVariable("SEEDVAE_STUDIO_GPU_WEIGHTS");
    if (path.isEmpty()) {
      w_->openWeights(write_tiny_weights(dir_, "tiny.safetensors"));
    } else {
      w_->openWeights(path);
    }
    QVERIFY(weights.wait(120000));
    w_->useSampleClip();
    w_->infoPanel()->setSample(1280, 720, 33);
    probe_.setTimerType(Qt::PreciseTimer);
    probe_.setInterval(1);
    stacks_ = std::make_unique<StallStacks>();
    connect(&probe_, &QTimer::timeout, this, [this] {
      gaps_.tick();
      stacks_->tick();
    });
    probe_.start();
  }

  void cleanupTestCase() {
    probe_.stop();
    stacks_.reset();
    gaps_.finish();
    qInfo("longest GUI event-loop gap: %.1f ms (own %.1f ms) over %.1f s", gaps_.longestWall(),
          gaps_.longestOwn().own(), gaps_.seconds());
    const std::vector<Gap> long_gaps = gaps_.longGaps();
    for (size_t i = 0; i < std::min<size_t>(long_gaps.size(), 8); ++i)
      qInfo("  gap %s", qPrintable(long_gaps[i].describe()));
    for (const QString& line : threads_.report()) qInfo("%s", qPrintable(line));
    const Gap worst = gaps_.longestOwn();
    QVERIFY2(worst.at_usual_speed() < 100.0,
             qPrintable("the application stalled the GUI thread: " + worst.describe()));
    w_.reset();
  }

  void framesStreamWithCudaTimesAndDeviceMemory() {
    w_->applySettings(gpu_settings());
    QSignalSpy frames(w_->controller(), &RunController::frameAvailable);
    QSignalSpy telemetry(w_->controller(), &RunController::telemetryReceived);
    QSignalSpy finished(w_.get(), &MainWindow::runFinished);
    QVERIFY(w_->startRun());
    QVERIFY(finished.wait(600000));
    const RunSummary s = finished.first().first().value<RunSummary>();
    QVERIFY2(s.ok, qPrintable(s.error));
    QVERIFY2(s.backend_name.contains("cuda", Qt::CaseInsensitive), qPrintable(s.backend_name));
    QCOMPARE(s.frames, qint64{33});
    QCOMPARE(s.width, 1280);
    QVERIFY(s.vs_original.valid());
    // Frames arrived while the run went on (several updates, the last one the final frame).
    QVERIFY2(frames.count() >= 3, qPrintable(QString::number(frames.count())));
    // Stage times measured with CUDA events, device memory from the card.
    int device_timed = 0, device_memory = 0;
    for (const QList<QVariant>& args : telemetry) {
      for (const TelemetryPoint& p : args.first().value<QVector<TelemetryPoint>>()) {
        if (p.device_ms >= 0) ++device_timed;
        if (p.device_used_bytes > 0) ++device_memory;
      }
    }
    int chart_device = 0;
    for (const TelemetryPoint& p : w_->chartsPanel()->log())
      chart_device += p.device_used_bytes > 0;
    qInfo(
        "run: %.1f ms/frame, PSNR %.2f dB, %lld frame updates, %d CUDA-timed stages, %d device "
        "memory samples (%d in the chart); seconds: read %.2f (waited %.2f), encode %.2f, "
        "decode %.2f, metrics %.2f, total %.2f",
        s.ms_per_frame, s.vs_original.psnr_db, static_cast<long long>(frames.count()), device_timed,
        device_memory, chart_device, s.read_s, s.read_wait_s, s.encode_s, s.decode_s, s.metrics_s,
        s.total_s);
    QVERIFY(device_timed > 0);
    QVERIFY(device_memory > 0 && chart_device > 0);
    first_ms_per_frame_ = s.ms_per_frame;
  }

  void abOfTwoGpuSettingsMatchesTheBench() {
    RunOptions a = gpu_settings();
    RunOptions b = gpu_settings();  // the lean schedule: least device memory untiled
    b.offload_state = true;
    b.lone_head = true;
    b.lean_convs = true;
    w_->setSlot("A", a);
    w_->setSlot("B", b);
    QSignalSpy ab(w_.get(), &MainWindow::abFinished);
    QVERIFY(w_->startAB());
    QVERIFY(ab.wait(900000));
    const AbComparison r = ab.first().first().value<AbComparison>();
    QVERIFY2(r.ok, qPrintable(r.error));
    qInfo(
        "A/B: A %.1f ms/frame, peak %.2f GiB; B (lean) %.1f ms/frame, peak %.2f GiB; A vs B "
        "PSNR %.2f dB",
        r.a.ms_per_frame, r.a.peak_bytes / 1073741824.0, r.b.ms_per_frame,
        r.b.peak_bytes / 1073741824.0, r.a_vs_b.psnr_db);
    QVERIFY(r.a_vs_b.psnr_db > 35);
    // SEEDVAE_STUDIO_GPU_OUT: the A/B report and a screenshot of the window, for the docs.
    if (const QString out = qEnvironmentVariable("SEEDVAE_STUDIO_GPU_OUT"); !out.isEmpty()) {
      probe_.stop();  // the test's own rendering of the window is no stall of the application
      gaps_.pause();
      stacks_->pause();
      w_->setPair(MainWindow::Pair::kAB);
      w_->showDock(QStringLiteral("ab"));
      QTest::qWait(500);
      QVERIFY(w_->grab().save(out + QStringLiteral("/studio-gpu-ab.png")));
      QSignalSpy written(w_.get(), &MainWindow::reportWritten);
      w_->exportReportTo(out + QStringLiteral("/report"));
      QVERIFY(written.wait(300000));
      const ReportResult rr = written.first().first().value<ReportResult>();
      QVERIFY2(rr.ok, qPrintable(rr.error));
      probe_.start();
    }
    // The same settings through `seedvae bench` (warmed up, medians).
    QStringList args{"bench",  "--backend", "cuda",     "--precision", "bf16",
                     "--size", "1280x720",  "--frames", "33",          "--json"};
    const QString weights = qEnvironmentVariable("SEEDVAE_STUDIO_GPU_WEIGHTS");
    args << (weights.isEmpty() ? QStringList{"--synthetic", "tiny"}
                               : QStringList{"--weights", weights});
    QProcess p;
    // SEEDVAE_CLI: where the CLI is when the test runs away from its build (scripts/studio-gpu.sh).
    const QString cli = qEnvironmentVariable("SEEDVAE_CLI", QStringLiteral(SEEDVAE_CLI_PATH));
    QSignalSpy bench_done(&p, &QProcess::finished);  // waits in the event loop: no GUI stall
    p.start(cli, args);
    QVERIFY(bench_done.wait(600000));
    const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
    double bench_ms = 0;
    for (const QJsonValue op : j.value("ops").toArray()) {
      bench_ms += op.toObject().value("ms_per_frame").toDouble();
    }
    qInfo("seedvae bench, the same settings: %.1f ms/frame (encode + decode)", bench_ms);
    QVERIFY2(bench_ms > 0, p.readAllStandardError().constData());
    QVERIFY2(
        std::abs(r.a.ms_per_frame - bench_ms) <= 0.25 * bench_ms,
        qPrintable(
            QStringLiteral("studio %1 vs bench %2 ms/frame").arg(r.a.ms_per_frame).arg(bench_ms)));
  }

  void cancelWithinAChunk() {
    w_->applySettings(gpu_settings());
    w_->infoPanel()->setSample(1280, 720, 65);
    QSignalSpy frames(w_->controller(), &RunController::frameAvailable);
    QSignalSpy finished(w_.get(), &MainWindow::runFinished);
    QVERIFY(w_->startRun());
    QVERIFY(frames.wait(600000));
    const auto t0 = Clock::now();
    w_->cancelRun();
    QVERIFY(finished.wait(60000));
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    const RunSummary s = finished.first().first().value<RunSummary>();
    // A chunk is 4 frames: its share of the run's time, with room for the encoder's or decoder's
    // slower first chunk.
    const double chunk_ms = 4 * std::max(first_ms_per_frame_, 1.0);
    qInfo(
        "cancel took effect after %.0f ms (a chunk ~ %.0f ms): the engine stopped after %.0f "
        "ms, the summary left it after %.0f ms",
        ms, chunk_ms, s.cancel_stop_s * 1000, s.cancel_done_s * 1000);
    QVERIFY(s.cancelled);
    QVERIFY2(ms < 3 * chunk_ms + 500, qPrintable(QString::number(ms)));
    w_->infoPanel()->setSample(1280, 720, 33);
    const RunSummary next = run_once();
    QVERIFY2(next.ok, qPrintable(next.error));
  }

  void outOfMemoryIsReportedAndTheNextRunSucceeds() {
    RunOptions s = gpu_settings();
    s.budget_gb = 2;  // room for the context and the weights, not for a 720p chunk untiled
    s.auto_schedule = false;
    w_->applySettings(s);
    QSignalSpy errors(w_.get(), &MainWindow::errorShown);
    const RunSummary failed = run_once();
    QVERIFY(!failed.ok && !failed.cancelled);
    qInfo("out of memory: %s", qPrintable(failed.error));
    QVERIFY2(failed.error.contains("memory", Qt::CaseInsensitive) ||
                 failed.error.contains("budget", Qt::CaseInsensitive),
             qPrintable(failed.error));
    QVERIFY(!errors.isEmpty());
    QVERIFY(errors.last().at(1).toString().contains(failed.error.left(40)));
    w_->applySettings(gpu_settings());
    const RunSummary next = run_once();
    QVERIFY2(next.ok, qPrintable(next.error));
  }

  void cudaCpuCudaAndTheIdleRelease() {
    w_->infoPanel()->setSample(256, 256, 9);
    RunOptions cpu = gpu_settings();
    cpu.backend = "cpu";
    cpu.precision = "fp32";
    for (const RunOptions& s : {gpu_settings(), cpu, gpu_settings()}) {
      w_->applySettings(s);
      const RunSummary r = run_once();
      QVERIFY2(r.ok, qPrintable(QString::fromStdString(s.backend) + ": " + r.error));
      QVERIFY2(r.backend_name.startsWith(QString::fromStdString(s.backend), Qt::CaseInsensitive),
               qPrintable(r.backend_name));
    }
    // The engine holds the card now; idle (SEEDVAE_IDLE_RELEASE_S=2 in main) it lets it go.
    const int64_t held = device_free_bytes();
    QSignalSpy released(w_->controller(), &RunController::engineReleased);
    QVERIFY(released.wait(30000));
    QTest::qWait(500);
    const int64_t after = device_free_bytes();
    qInfo("device free: %.2f GiB before the first run, %.2f GiB while held, %.2f GiB released",
          free_before_ / 1073741824.0, held / 1073741824.0, after / 1073741824.0);
    QVERIFY(after > held);
    QVERIFY(after >= free_before_ - (int64_t{256} << 20));
    w_->infoPanel()->setSample(1280, 720, 33);
  }

  // The settings list every card with its name and memory; with two or more, a run on the last
  // one runs there (its backend is "cuda:N", its memory rises, card 0's does not), and so does
  // the CLI's `--device N`.
  void runsOnTheChosenDevice() {
#ifdef SEEDVAE_HAVE_CUDA
    const std::vector<gpu::DeviceInfo> devices = gpu::list_devices();
    w_->applySettings(gpu_settings());
    auto* combo = qobject_cast<QComboBox*>(w_->settingsPanel()->optionWidget("device"));
    QVERIFY(combo);
    QTRY_COMPARE_WITH_TIMEOUT(combo->count(), static_cast<int>(devices.size()), 30000);
    for (int i = 0; i < combo->count(); ++i) {
      const QString text = combo->itemText(i);
      qInfo("device choice %d: %s", i, qPrintable(text));
      QVERIFY2(text.contains(QString::fromStdString(devices[static_cast<size_t>(i)].name)) &&
                   text.contains("free of"),
               qPrintable(text));
    }
    if (devices.size() < 2) QSKIP("one CUDA device: choosing another needs a machine with two");
    const int chosen = static_cast<int>(devices.size()) - 1;
    RunOptions s = gpu_settings();
    s.device = chosen;
    w_->applySettings(s);
    QCOMPARE(w_->settingsPanel()->settings().device, chosen);
    auto free_of = [](int d) {
      const auto now = gpu::list_devices();
      return d < static_cast<int>(now.size()) ? now[static_cast<size_t>(d)].free_bytes : -1;
    };
    const int64_t free0 = free_of(0), free_chosen = free_of(chosen);
    int64_t min0 = free0, min_chosen = free_chosen;
    QTimer sampler;
    connect(&sampler, &QTimer::timeout, this, [&] {
      min0 = std::min(min0, free_of(0));
      min_chosen = std::min(min_chosen, free_of(chosen));
    });
    sampler.start(100);
    const RunSummary r = run_once();
    sampler.stop();
    QVERIFY2(r.ok, qPrintable(r.error));
    qInfo(
        "run on %s: %.1f ms/frame; free during the run: card 0 %.2f -> %.2f GiB, card %d %.2f "
        "-> %.2f GiB",
        qPrintable(r.backend_name), r.ms_per_frame, free0 / 1073741824.0, min0 / 1073741824.0,
        chosen, free_chosen / 1073741824.0, min_chosen / 1073741824.0);
    QVERIFY2(r.backend_name.startsWith(QStringLiteral("cuda:%1 ").arg(chosen)),
             qPrintable(r.backend_name));
    QVERIFY(min_chosen < free_chosen - (int64_t{1} << 30));
    QVERIFY(min0 >= free0 - (int64_t{256} << 20));
    // The CLI on the same card.
    QProcess p;
    QSignalSpy done(&p, &QProcess::finished);
    const QString weights = qEnvironmentVariable("SEEDVAE_STUDIO_GPU_WEIGHTS");
    p.start(qEnvironmentVariable("SEEDVAE_CLI", QStringLiteral(SEEDVAE_CLI_PATH)),
            QStringList{"bench", "--backend", "cuda", "--device", QString::number(chosen), "--size",
                        "256x256", "--frames", "9", "--json"}
                << (weights.isEmpty() ? QStringList{"--synthetic", "tiny"}
                                      : QStringList{"--weights", weights}));
    QVERIFY(done.wait(600000));
    const QJsonObject j = QJsonDocument::fromJson(p.readAllStandardOutput()).object();
    qInfo("seedvae bench --device %d: %s", chosen, qPrintable(j.value("backend").toString()));
    QVERIFY2(j.value("backend").toString().startsWith(QStringLiteral("cuda:%1 ").arg(chosen)),
             p.readAllStandardError().constData());
#else
    QSKIP("no CUDA backend in this build");
#endif
  }
};

int main(int argc, char** argv) {
  if (device_free_bytes() < 0) {
    std::puts("tst_studio_gpu: no CUDA device (or no CUDA backend in this build): skipped");
    return 77;
  }
  qputenv("SEEDVAE_IDLE_RELEASE_S", "2");
  qputenv("SEEDVAE_STUDIO_TRACE", "1");  // a slow GUI handler or paint names itself in the log
  QApplication app(argc, argv);
  register_studio_types();
  tst_StudioGpu t;
  return QTest::qExec(&t, argc, argv);
}

#include "tst_studio_gpu.moc"
