#include "ui/studio_app.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QIcon>
#include <QPointer>
#include <QSettings>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#if defined(__GLIBC__)
#include <malloc.h>  // mallopt
#endif

#include "core/media/sample_clip.h"
#include "core/vae/state_dict.h"
#include "ui/ab_panel.h"
#include "ui/channels.h"
#include "ui/charts_panel.h"
#include "ui/compare_view.h"
#include "ui/loaders.h"
#include "ui/main_window.h"
#include "ui/memory_predictor.h"
#include "ui/run_controller.h"
#include "ui/scrubber.h"
#include "ui/settings_panel.h"
#include "ui/settings_store.h"

static void init_studio_resources() {
  Q_INIT_RESOURCE(studio);
}

namespace seedvae::ui {

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) {
  g_interrupted.store(true);
}

void err(const QString& s) {
  std::fputs(s.toLocal8Bit().constData(), stderr);
  std::fflush(stderr);
}

// A headless job has no window to keep responsive, so "auto" CPU threads means every hardware
// thread there (the GUI's "auto" leaves one: CpuCatalog::resolve_threads; on a 2-core machine
// that halved the headless demo's speed). The number goes into the settings, so the summary and
// the report say what ran.
void use_every_thread_when_auto(RunOptions& s) {
  if (s.backend != "cpu" || s.threads > 0) return;
  s.threads = CpuCatalog::hardware_threads();
}

// "tiny, real, wan21-tiny, ..." (synthetic_weight_names()) for the help and its errors.
QString synthetic_names() {
  QStringList names;
  for (const std::string& n : synthetic_weight_names()) names << QString::fromStdString(n);
  return names.join(QStringLiteral(", "));
}

}  // namespace

std::optional<StudioOptions> parse_studio_options(const QStringList& arguments, QString* message,
                                                  int* exit_code) {
  QCommandLineParser p;
  p.setApplicationDescription(QStringLiteral(
      "SeedVAE Studio: encode and decode video with the SeedVR2 VAE, watch the reconstruction "
      "stream in, compare settings.\nWithout a display (no DISPLAY/WAYLAND_DISPLAY and "
      "QT_QPA_PLATFORM unset) --headless is implied."));
  const QCommandLineOption help(QStringList{"h", "help"}, QStringLiteral("Show this help."));
  const QCommandLineOption version(QStringLiteral("version"), QStringLiteral("Show the version."));
  const QCommandLineOption demo(
      QStringLiteral("demo"),
      QStringLiteral(
          "Start a run at once (built-in model and demo clip unless --input/--weights)."));
  const QCommandLineOption headless(
      QStringLiteral("headless"),
      QStringLiteral("Run the job without windows; write the report and stills into --output."));
  const QCommandLineOption ab(
      QStringLiteral("ab"),
      QStringLiteral(
          "Run an A/B comparison (A: the settings; B: --preset-b, else A's settings when "
          "--weights-b names other weights, else A with blend tiling)."));
  const QCommandLineOption input(QStringLiteral("input"),
                                 QStringLiteral("Input video, image, folder or pattern."),
                                 QStringLiteral("path"));
  const QCommandLineOption weights(
      QStringLiteral("weights"),
      QStringLiteral("VAE checkpoint: SeedVR2, Wan2.1 or Wan2.2 (.safetensors or .pth)."),
      QStringLiteral("file"));
  const QCommandLineOption weights_a(
      QStringLiteral("weights-a"),
      QStringLiteral("A/B slot A's own weights: a checkpoint or synthetic:NAME (%1). Default: "
                     "--weights.")
          .arg(synthetic_names()),
      QStringLiteral("weights"));
  const QCommandLineOption weights_b(QStringLiteral("weights-b"),
                                     QStringLiteral("A/B slot B's own weights, as --weights-a."),
                                     QStringLiteral("weights"));
  const QCommandLineOption preset(QStringLiteral("preset"),
                                  QStringLiteral("Settings (slot A) from a preset JSON file."),
                                  QStringLiteral("file"));
  const QCommandLineOption preset_b(QStringLiteral("preset-b"),
                                    QStringLiteral("Slot B settings from a preset JSON file."),
                                    QStringLiteral("file"));
  const QCommandLineOption output(
      QStringList{"o", "output"},
      QStringLiteral("Headless: report folder (default out/studio-report-<time>)."),
      QStringLiteral("dir"));
  const QCommandLineOption shots(QStringLiteral("screenshots"),
                                 QStringLiteral("Run an A/B demo in the real window (offscreen) "
                                                "and save PNGs of the main views into dir."),
                                 QStringLiteral("dir"));
  const QCommandLineOption shot_size(
      QStringLiteral("screenshot-size"),
      QStringLiteral("Window size of --screenshots (default 1366x768; other sizes add -WxH to the "
                     "file names)."),
      QStringLiteral("WxH"));
  const QCommandLineOption frames(QStringLiteral("frames"),
                                  QStringLiteral("Frames to read (sample clip: 17)."),
                                  QStringLiteral("n"));
  const QCommandLineOption size(QStringLiteral("sample-size"),
                                QStringLiteral("Sample clip size WxH (default 256x256)."),
                                QStringLiteral("WxH"));
  const QCommandLineOption no_video(
      QStringLiteral("no-video"),
      QStringLiteral("Headless: do not write the reconstructed video."));
  for (const auto* o :
       {&help, &version, &demo, &headless, &ab, &input, &weights, &weights_a, &weights_b, &preset,
        &preset_b, &output, &shots, &shot_size, &frames, &size, &no_video}) {
    p.addOption(*o);
  }
  *exit_code = 2;
  // Before the application object exists, Qt names the program "<executable_name>" in the help.
  auto help_text = [&] {
    QString h = p.helpText();
    const QString program = QFileInfo(arguments.value(0)).fileName();
    h.replace(QStringLiteral("<executable_name>"),
              program.isEmpty() ? QStringLiteral("seedvae-studio") : program);
    return h;
  };
  if (!p.parse(arguments)) {
    *message = p.errorText() + QStringLiteral("\n\n") + help_text();
    return std::nullopt;
  }
  if (p.isSet(help)) {
    *message = help_text();
    *exit_code = 0;
    return std::nullopt;
  }
  if (p.isSet(version)) {
    *message = QStringLiteral("seedvae-studio %1\n").arg(SEEDVAE_VERSION);
    *exit_code = 0;
    return std::nullopt;
  }
  if (!p.positionalArguments().isEmpty()) {
    *message = QStringLiteral("unexpected argument %1 (use --input for a video)\n")
                   .arg(p.positionalArguments().front());
    return std::nullopt;
  }
  StudioOptions o;
  o.demo = p.isSet(demo);
  o.headless = p.isSet(headless);
  o.ab = p.isSet(ab);
  o.input = p.value(input);
  o.weights = p.value(weights);
  o.weights_a = p.value(weights_a);
  o.weights_b = p.value(weights_b);
  for (const auto& [option, value] :
       {std::pair{"--weights-a", o.weights_a}, std::pair{"--weights-b", o.weights_b}}) {
    const std::optional<WeightsSpec> spec = slot_weights_option(value);
    if (!spec || !spec->is_builtin()) continue;
    const auto& names = synthetic_weight_names();
    if (std::find(names.begin(), names.end(), spec->builtin.toStdString()) == names.end()) {
      *message = QStringLiteral(
                     "%1: no built-in weights named %2 (synthetic:NAME with NAME one "
                     "of %3)\n")
                     .arg(QLatin1String(option), spec->builtin, synthetic_names());
      return std::nullopt;
    }
  }
  o.preset = p.value(preset);
  o.preset_b = p.value(preset_b);
  o.output = p.value(output);
  o.screenshots = p.value(shots);
  o.no_video = p.isSet(no_video);
  if (p.isSet(frames)) {
    bool ok = false;
    o.frames = p.value(frames).toInt(&ok);
    if (!ok || o.frames < 1) {
      *message = QStringLiteral("--frames needs a positive number\n");
      return std::nullopt;
    }
  }
  // "WxH" with both between lo and hi, else an empty size.
  auto parse_size = [](const QString& text, int lo, int hi) {
    const QStringList wh = text.toLower().split(QLatin1Char('x'));
    bool ok1 = false, ok2 = false;
    QSize out;
    if (wh.size() == 2) out = QSize(wh[0].toInt(&ok1), wh[1].toInt(&ok2));
    if (!ok1 || !ok2 || out.width() < lo || out.height() < lo || out.width() > hi ||
        out.height() > hi) {
      return QSize();
    }
    return out;
  };
  if (p.isSet(size)) {
    o.sample_size_set = true;
    const QSize s = parse_size(p.value(size), 8, 8192);
    if (s.isEmpty()) {
      *message = QStringLiteral("--sample-size must be WxH between 8 and 8192\n");
      return std::nullopt;
    }
    o.sample_width = s.width();
    o.sample_height = s.height();
  }
  if (p.isSet(shot_size)) {
    o.screenshot_size = parse_size(p.value(shot_size), 320, 16384);
    if (o.screenshot_size.isEmpty()) {
      *message = QStringLiteral("--screenshot-size must be WxH between 320 and 16384\n");
      return std::nullopt;
    }
  }
  *exit_code = 0;
  return o;
}

bool display_available() {
#if defined(Q_OS_LINUX) || defined(Q_OS_FREEBSD)
  return !qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") ||
         !qEnvironmentVariableIsEmpty("DISPLAY") || !qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY");
#else
  return true;
#endif
}

RunOptions demo_b_settings(const RunOptions& a, int width, int height) {
  RunOptions b = a;
  b.tiling = "blend";
  b.tile_layout = "reference";
  const int half = std::max(32, (std::min(width, height) / 2 + 15) / 16 * 16);
  b.tile = {half, half};
  const int overlap = std::max(8, half / 4 / 8 * 8);
  b.overlap = {overlap, overlap};
  return b;
}

std::optional<WeightsSpec> slot_weights_option(const QString& value) {
  if (value.isEmpty()) return std::nullopt;
  return weights_spec_from_queue(value.toStdString());
}

QString screenshot_file_name(const QString& view, const QSize& size) {
  if (size == QSize(1366, 768)) return QStringLiteral("studio-%1.png").arg(view);
  return QStringLiteral("studio-%1-%2x%3.png").arg(view).arg(size.width()).arg(size.height());
}

JobInput input_from_options(const StudioOptions& o) {
  JobInput in;
  in.path = to_fs_path(o.input);
  in.sample_width = o.sample_width;
  in.sample_height = o.sample_height;
  in.sample_frames = o.frames > 0 ? o.frames : 17;
  if (!o.input.isEmpty() && o.frames > 0) in.max_frames = o.frames;
  return in;
}

// ---- HeadlessJob ------------------------------------------------------------------------------

HeadlessJob::HeadlessJob(std::shared_ptr<const BackendCatalog> catalog, StudioOptions options,
                         QObject* parent)
    : QObject(parent), catalog_(std::move(catalog)), options_(std::move(options)) {
  register_studio_types();
  qRegisterMetaType<ReportResult>();
  controller_ = new RunController(catalog_, this);
  loader_ = new AsyncLoader(this);
  charts_ = std::make_unique<ChartsPanel>();
  output_ = options_.output.isEmpty() ? QStringLiteral("out/studio-report-") +
                                            QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss")
                                      : options_.output;
  output_ = QFileInfo(output_).absoluteFilePath();
  connect(controller_, &RunController::telemetryReceived, charts_.get(), &ChartsPanel::addPoints);
  connect(controller_, &RunController::progressChanged, this, [this](const ProgressUpdate& u) {
    if (u.elapsed_s - last_print_ < 1.0 && u.fraction < 1.0) return;
    last_print_ = u.elapsed_s;
    err(QStringLiteral("%1%2 %3/%4  %5%  elapsed %6%7\n")
            .arg(u.slot.isEmpty() ? QString() : QStringLiteral("[%1] ").arg(u.slot), u.stage)
            .arg(u.done)
            .arg(u.total)
            .arg(static_cast<int>(u.fraction * 100))
            .arg(format_seconds(u.elapsed_s))
            .arg(u.eta_s >= 0 ? QStringLiteral(", ETA ") + format_seconds(u.eta_s) : QString()));
  });
  connect(controller_, &RunController::runStarted, this, [this] { last_print_ = -10; });
  connect(controller_, &RunController::runFinished, this, [this](const RunSummary& s) {
    const QString tag = s.slot.isEmpty() ? QStringLiteral("run") : s.slot;
    if (s.ok) {
      err(QStringLiteral(
              "%1: %2 frames %3x%4, %5 ms/frame, peak engine memory %6, PSNR %7 dB, SSIM %8\n")
              .arg(tag)
              .arg(s.frames)
              .arg(s.width)
              .arg(s.height)
              .arg(s.ms_per_frame, 0, 'f', 1)
              .arg(format_bytes(s.peak_bytes))
              .arg(s.vs_original.psnr_db, 0, 'f', 2)
              .arg(s.vs_original.ssim, 0, 'f', 4));
    } else {
      err(QStringLiteral("%1: %2\n").arg(tag, s.cancelled ? QStringLiteral("cancelled") : s.error));
    }
    if (options_.ab) return;  // wait for the comparison
    run_ = s;
    if (!s.ok) {
      finish(s.cancelled ? 130 : 1);
      return;
    }
    ReportJob job;
    job.directory = output_;
    job.runs = {*run_};
    job.weights = weights_;
    job.weights.weights.reset();
    job.input_description = input_display_name(input_from_options(options_));
    job.charts.insert(QStringLiteral("memory"), charts_->render(QStringLiteral("memory")));
    job.charts.insert(QStringLiteral("timing"), charts_->render(QStringLiteral("timing")));
    job.write_video = !options_.no_video;
    controller_->writeReport(job);
  });
  connect(controller_, &RunController::abFinished, this, [this](const AbComparison& ab) {
    ab_ = ab;
    if (!ab.ok) {
      err(QStringLiteral("A/B: %1\n").arg(ab.error));
      // One slot failed (options its family refuses, weights that do not load): the report
      // still shows the other, and the exit code says the A/B is incomplete.
      if (ab.cancelled || (!ab.a.ok && !ab.b.ok)) {
        finish(ab.cancelled ? 130 : 1);
        return;
      }
      report_code_ = 1;
    } else {
      err(QStringLiteral("A vs B: max |diff| %1, PSNR %2 dB\n")
              .arg(ab.a_vs_b.max_abs, 0, 'e', 3)
              .arg(ab.a_vs_b.psnr_db, 0, 'f', 2));
    }
    ReportJob job;
    job.directory = output_;
    job.ab = ab;
    job.runs = {job.ab->a, job.ab->b};
    job.weights = weights_;
    job.weights.weights.reset();
    job.input_description = input_display_name(input_from_options(options_));
    job.charts.insert(QStringLiteral("memory"), charts_->render(QStringLiteral("memory")));
    job.charts.insert(QStringLiteral("timing"), charts_->render(QStringLiteral("timing")));
    job.write_video = !options_.no_video;
    controller_->writeReport(job);
  });
  connect(controller_, &RunController::reportWritten, this, [this](const ReportResult& r) {
    report_ = r;
    if (!r.ok) {
      err(QStringLiteral("report not written: %1\n").arg(r.error));
      finish(1);
      return;
    }
    if (!r.error.isEmpty()) err(QStringLiteral("warnings: %1\n").arg(r.error));
    err(QStringLiteral("report: %1/report.md (%2 files)\n").arg(r.directory).arg(r.files.size()));
    std::printf("%s\n", r.directory.toLocal8Bit().constData());
    std::fflush(stdout);
    finish(report_code_);
  });
  connect(loader_, &AsyncLoader::weightsLoaded, this, &HeadlessJob::run);
  connect(loader_, &AsyncLoader::weightsFailed, this,
          [this](const QString& path, const QString& msg) {
            err(QStringLiteral("cannot open weights %1: %2\n").arg(path, msg));
            finish(3);
          });
}

HeadlessJob::~HeadlessJob() = default;

void HeadlessJob::start() {
  WeightsSpec spec = options_.weights.isEmpty() ? default_weights_spec()
                                                : WeightsSpec{options_.weights, QString()};
  err(QStringLiteral("seedvae-studio (headless): weights %1, input %2\n")
          .arg(spec.display_name(), input_display_name(input_from_options(options_))));
  loader_->loadWeights(spec);
}

void HeadlessJob::cancel() {
  controller_->cancel();
}

void HeadlessJob::run(const WeightsInfo& weights) {
  weights_ = weights;
  err(QStringLiteral("model: %1, %2, %3 parameters\n")
          .arg(weights.config, weights.dtype)
          .arg(weights.parameters));
  RunOptions a = catalog_->normalized(RunOptions());
  if (!options_.preset.isEmpty()) {
    QString error;
    auto s = SettingsStore::read_preset_file(options_.preset, &error);
    if (!s) {
      err(QStringLiteral("cannot read preset: %1\n").arg(error));
      finish(3);
      return;
    }
    a = catalog_->normalized(*s);
  }
  use_every_thread_when_auto(a);
  RunRequest r;
  r.input = input_from_options(options_);
  r.weights = weights.weights;
  r.weights_spec = options_.weights.isEmpty() ? default_weights_spec()
                                              : WeightsSpec{options_.weights, QString()};
  r.settings = a;
  // Frame size and count the run will see (probing is fine here: there is no GUI to block).
  int w = r.input.sample_width, h = r.input.sample_height;
  qint64 frames = r.input.sample_frames;
  if (!r.input.is_sample()) {
    const QString path = from_fs_path(r.input.path);
    auto info = probe_video(path);
    if (!info) {
      err(QStringLiteral("cannot open %1: %2\n")
              .arg(path, QString::fromStdString(info.status().to_string())));
      finish(3);
      return;
    }
    w = info->width;
    h = info->height;
    frames =
        r.input.max_frames > 0 ? std::min<qint64>(info->frames, r.input.max_frames) : info->frames;
  }
  auto predict = [&](const RunOptions& s) {
    PredictionRequest pr;
    pr.weights = weights.weights;
    pr.width = w;
    pr.height = h;
    pr.frames = frames;
    pr.settings = s;
    const Prediction p = predict_memory(pr);
    if (!p.ok) return qint64{-1};
    const QVector<BackendSpec> specs = catalog_->backends();
    const BackendSpec* spec = catalog_->find(specs, QString::fromStdString(s.backend));
    const qint64 need = p.engine_bytes + (spec && spec->memory_is_host ? p.host_bytes : 0);
    err(QStringLiteral("predicted peak: %1 (%2)\n").arg(format_bytes(need), p.method));
    return need;
  };
  if (!options_.ab) {
    predict(a);
    err(QStringLiteral("settings: %1\n").arg(settings_summary(a)));
    controller_->start(r);
    return;
  }
  // A slot's own weights: the engine reads them for that slot's run.
  const std::optional<WeightsSpec> own_a = slot_weights_option(options_.weights_a);
  const std::optional<WeightsSpec> own_b = slot_weights_option(options_.weights_b);
  RunRequest ra = r, rb = r;
  for (auto [req, own] : {std::pair{&ra, &own_a}, std::pair{&rb, &own_b}}) {
    if (*own && !same_weights(**own, r.weights_spec)) {
      req->weights_spec = **own;
      req->weights.reset();
    }
  }
  RunOptions b;
  if (!options_.preset_b.isEmpty()) {
    QString error;
    auto s = SettingsStore::read_preset_file(options_.preset_b, &error);
    if (!s) {
      err(QStringLiteral("cannot read preset B: %1\n").arg(error));
      finish(3);
      return;
    }
    b = catalog_->normalized(*s);
  } else if (!same_weights(ra.weights_spec, rb.weights_spec)) {
    b = a;  // a comparison of weights: the same settings on both
  } else {
    b = demo_b_settings(a, w, h);
  }
  use_every_thread_when_auto(b);
  if (ra.weights) predict(a);  // (the planner's figures are for the loaded model)
  if (rb.weights) predict(b);
  rb.settings = b;
  err(QStringLiteral("A: %1, %2\nB: %3, %4\n")
          .arg(ra.weights_spec.display_name(), settings_summary(a), rb.weights_spec.display_name(),
               settings_summary(b)));
  controller_->startAB(ra, rb);
}

void HeadlessJob::finish(int code) {
  code_ = code;
  emit finished(code);
}

// ---- screenshots ------------------------------------------------------------------------------

namespace {

// Drives the real window through its views with timers (no nested event loops) and saves PNGs.
class ScreenshotTour : public QObject {
 public:
  ScreenshotTour(MainWindow* w, QString dir, QSize size)
      : QObject(w), w_(w), dir_(std::move(dir)), size_(size) {
    QDir().mkpath(dir_);
    connect(w_->controller(), &RunController::frameAvailable, this, [this](const FrameUpdate& f) {
      if (!live_taken_ && f.slot == QLatin1String("A") &&
          f.available >= std::max<qint64>(2, f.total / 2)) {
        live_taken_ = true;
        w_->setViewMode(CompareView::Mode::kSplit);
        shot(QStringLiteral("live-run"));
      }
    });
    connect(w_, &MainWindow::abFinished, this, [this](const AbComparison& ab) {
      if (!ab.ok) {
        err(QStringLiteral("screenshots: the A/B run failed: %1\n").arg(ab.error));
        QCoreApplication::exit(1);
        return;
      }
      QTimer::singleShot(300, this, [this] { step(0); });
    });
  }

 private:
  // Saves the window as it is now: the view's screenshot at the tour's size.
  void shot(const QString& view) {
    if (w_->size() != size_) {
      err(QStringLiteral("screenshots: the window is %1x%2, not %3x%4 (a smaller screen?)\n")
              .arg(w_->width())
              .arg(w_->height())
              .arg(size_.width())
              .arg(size_.height()));
    }
    const QString path = dir_ + QLatin1Char('/') + screenshot_file_name(view, size_);
    w_->settleViews();
    if (w_->grab().save(path, "PNG"))
      err(QStringLiteral("wrote %1\n").arg(path));
    else
      err(QStringLiteral("could not write %1\n").arg(path));
  }
  void step(int i) {
    const qint64 mid = std::max<qint64>(0, w_->scrubber()->available() / 2);
    switch (i) {
      case 0:
        w_->scrubber()->setFollow(false);
        w_->scrubber()->setPosition(mid);
        w_->showDock(QStringLiteral("input"));
        w_->setPair(MainWindow::Pair::kOriginalA);
        w_->setViewMode(CompareView::Mode::kSplit);
        w_->view()->setDivider(0.5);
        break;
      case 1: shot(QStringLiteral("split")); break;
      case 2:
        w_->showDock(QStringLiteral("settings"));
        w_->setViewMode(CompareView::Mode::kSideBySide);
        break;
      case 3: shot(QStringLiteral("side-by-side")); break;
      case 4: w_->setViewMode(CompareView::Mode::kDifference); break;
      case 5: shot(QStringLiteral("difference")); break;
      case 6:
        w_->setPair(MainWindow::Pair::kAB);
        w_->setViewMode(CompareView::Mode::kSplit);
        w_->showDock(QStringLiteral("ab"));
        break;
      case 7: shot(QStringLiteral("ab")); break;
      case 8:
        w_->setPair(MainWindow::Pair::kOriginalB);
        w_->setViewMode(CompareView::Mode::kRight);
        w_->setOverlay(true, true);
        break;
      case 9: shot(QStringLiteral("tiles-seams")); break;
      case 10:
        // The settings panel's memory section: B's tiled settings with the planner's prediction.
        w_->setOverlay(false, false);
        w_->setPair(MainWindow::Pair::kOriginalB);
        w_->setViewMode(CompareView::Mode::kSplit);
        w_->applySettings(w_->abPanel()->slotSettings(QStringLiteral("B")));
        w_->revealInDock(QStringLiteral("settings"), QStringLiteral("fitButton"));
        QTimer::singleShot(600, this, [this] { step(11); });  // the prediction arrives
        return;
      case 11: shot(QStringLiteral("settings-memory")); break;
      default: QCoreApplication::exit(0); return;
    }
    QTimer::singleShot(250, this, [this, i] { step(i + 1); });
  }

  MainWindow* w_;
  QString dir_;
  QSize size_;
  bool live_taken_ = false;
};

}  // namespace

// ---- run_studio -------------------------------------------------------------------------------

void prepare_gui_process() {
#if defined(__GLIBC__)
  // Setting any of these turns glibc's adaptive mmap threshold off: all three are set.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

int run_studio(int argc, char** argv, std::shared_ptr<const BackendCatalog> catalog) {
  prepare_gui_process();
  QStringList args;
  for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
  QString message;
  int code = 0;
  const std::optional<StudioOptions> parsed = parse_studio_options(args, &message, &code);
  if (!parsed) {
    (code == 0 ? std::fputs(message.toLocal8Bit().constData(), stdout)
               : std::fputs(message.toLocal8Bit().constData(), stderr));
    return code;
  }
  StudioOptions opt = *parsed;
  if (!opt.headless && opt.screenshots.isEmpty() && !display_available()) {
    err(
        QStringLiteral("seedvae-studio: no display (DISPLAY/WAYLAND_DISPLAY unset, QT_QPA_PLATFORM "
                       "unset): running the job headless\n"));
    opt.headless = true;
  }
  if ((opt.headless || !opt.screenshots.isEmpty()) &&
      qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
    qputenv("QT_QPA_PLATFORM", "offscreen");  // charts and stills still render, no window shows
  }
  QGuiApplication::setHighDpiScaleFactorRoundingPolicy(
      Qt::HighDpiScaleFactorRoundingPolicy::PassThrough);
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("SeedVAE"));
  QApplication::setApplicationName(QStringLiteral("SeedVAE Studio"));
  QApplication::setApplicationVersion(QStringLiteral(SEEDVAE_VERSION));
  QGuiApplication::setDesktopFileName(QStringLiteral("seedvae-studio"));
  init_studio_resources();
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/seedvae/icons/seedvae-studio.svg")));
  register_studio_types();
  // Without --input the studio opens the built-in natural demo clip (installed next to the demo
  // model) unless --sample-size asks for the synthetic sample clip.
  if (opt.input.isEmpty() && !opt.sample_size_set) {
    const auto clip = media::find_demo_clip(QCoreApplication::applicationDirPath().toStdString());
    if (!clip.empty()) opt.input = QString::fromStdString(clip.string());
  }

  std::signal(SIGINT, on_interrupt);
  if (opt.headless) {
    HeadlessJob job(catalog, opt);
    QTimer interrupt;
    QObject::connect(&interrupt, &QTimer::timeout, &job, [&job] {
      if (g_interrupted.exchange(false)) {
        err(QStringLiteral("interrupted: cancelling\n"));
        job.cancel();
      }
    });
    interrupt.start(100);
    QObject::connect(&job, &HeadlessJob::finished, &app, [](int c) { QCoreApplication::exit(c); });
    QTimer::singleShot(0, &job, &HeadlessJob::start);
    return app.exec();
  }

  // Screenshots start from a clean, throw-away configuration so they do not depend on (or change)
  // the user's saved window layout and settings.
  QTemporaryDir scratch;
  auto store =
      opt.screenshots.isEmpty()
          ? std::make_unique<SettingsStore>()
          : std::make_unique<SettingsStore>(
                std::make_unique<QSettings>(scratch.filePath("studio.ini"), QSettings::IniFormat),
                scratch.filePath("presets"));
  auto window = std::make_unique<MainWindow>(catalog, std::move(store));
  MainWindow* w = window.get();
  QTimer interrupt;
  QObject::connect(&interrupt, &QTimer::timeout, w, [w] {
    if (g_interrupted.exchange(false)) w->close();
  });
  interrupt.start(200);
  if (!opt.preset.isEmpty()) {
    QString error;
    if (auto s = SettingsStore::read_preset_file(opt.preset, &error)) {
      w->applySettings(*s);
    } else {
      err(QStringLiteral("cannot read preset: %1\n").arg(error));
    }
  }
  if (!opt.input.isEmpty()) w->openVideo(opt.input);
  if (!opt.weights.isEmpty()) w->openWeights(opt.weights);
  const bool ab = opt.ab || !opt.screenshots.isEmpty();
  if (ab) {
    const RunOptions a = w->settingsPanel()->settings();
    RunOptions b = demo_b_settings(a, opt.sample_width, opt.sample_height);
    if (!opt.preset_b.isEmpty()) {
      QString error;
      if (auto s = SettingsStore::read_preset_file(opt.preset_b, &error))
        b = *s;
      else
        err(QStringLiteral("cannot read preset B: %1\n").arg(error));
    }
    w->setSlot(QStringLiteral("A"), a);
    w->setSlot(QStringLiteral("B"), b);
  }
  // Given on the command line, a slot's own weights replace the saved ones (the window's --ab);
  // B then defaults to A's settings, a comparison of weights.
  const std::optional<WeightsSpec> own_a = slot_weights_option(opt.weights_a);
  const std::optional<WeightsSpec> own_b = slot_weights_option(opt.weights_b);
  if (own_a) w->setSlotWeights(QStringLiteral("A"), own_a);
  if (own_b) w->setSlotWeights(QStringLiteral("B"), own_b);
  if (ab && (own_a || own_b) && opt.preset_b.isEmpty()) {
    w->setSlot(QStringLiteral("B"), w->settingsPanel()->settings());
  }
  if (!opt.screenshots.isEmpty()) {
    w->setConfirmations(false);
    w->resize(opt.screenshot_size);
    new ScreenshotTour(w, QFileInfo(opt.screenshots).absoluteFilePath(), opt.screenshot_size);
  }
  w->show();
  if (opt.demo || !opt.screenshots.isEmpty()) w->runWhenReady(ab);
  const int rc = app.exec();
  window.reset();
  return rc;
}

}  // namespace seedvae::ui
