#include "ui/main_window.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QInputDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QProgressBar>
#include <QScreen>
#include <QScrollArea>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyle>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/ab_panel.h"
#include "ui/channels.h"
#include "ui/charts_panel.h"
#include "ui/image_convert.h"
#include "ui/info_panel.h"
#include "ui/loaders.h"
#include "ui/memory_predictor.h"
#include "ui/queue_panel.h"
#include "ui/run_controller.h"
#include "ui/scrubber.h"
#include "ui/settings_panel.h"
#include "ui/settings_store.h"

namespace seedvae::ui {

namespace {

const char* const kVideoFilter =
    "Videos and images (*.mp4 *.m4v *.mov *.avi *.mkv *.webm *.png *.jpg *.jpeg *.bmp *.tif *.tiff "
    "*.webp *.exr);;All files (*)";

// SEEDVAE_STUDIO_TRACE=1 logs every GUI-thread handler that takes longer than 15 ms: the tool for
// keeping the event loop free (tests/ui/tst_studio_stall.cpp measures the result).
class SlowScope {
 public:
  explicit SlowScope(const char* what) : what_(what) {
    if (enabled()) timer_.start();
  }
  ~SlowScope() {
    if (enabled() && timer_.isValid() && timer_.nsecsElapsed() > 15'000'000) {
      qWarning("seedvae-studio: GUI handler %s took %.1f ms", what_, timer_.nsecsElapsed() / 1e6);
    }
  }

 private:
  static bool enabled() {
    static const bool on = qEnvironmentVariableIntValue("SEEDVAE_STUDIO_TRACE") != 0;
    return on;
  }
  const char* what_;
  QElapsedTimer timer_;
};

// The scroll area of a panel in a dock: the panel takes the dock's width and scrolls vertically.
// Its minimum width follows the panel's minimum width (plus the vertical scroll bar), so the dock
// cannot be dragged narrower than its content and cut it off at its edge; should the window
// itself be too narrow for that, a horizontal scroll bar reaches the rest.
class DockScrollArea : public QScrollArea {
 public:
  explicit DockScrollArea(QWidget* panel) {
    setWidget(panel);
    setWidgetResizable(true);
    setFrameShape(QFrame::NoFrame);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    panel->installEventFilter(this);
  }

  QSize minimumSizeHint() const override {
    QSize s = QScrollArea::minimumSizeHint();
    if (const QWidget* panel = widget()) {
      const int bar = style()->pixelMetric(QStyle::PM_ScrollBarExtent, nullptr, this);
      s.setWidth(std::max(s.width(), panel->minimumSizeHint().width() + bar + 2 * frameWidth()));
    }
    return s;
  }

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    // The panel's layout changed (rows shown or hidden, a longer text): so may its minimum width.
    if (watched == widget() && event->type() == QEvent::LayoutRequest) updateGeometry();
    return QScrollArea::eventFilter(watched, event);
  }
};

QScrollArea* scrolled(QWidget* w) {
  return new DockScrollArea(w);
}

}  // namespace

MainWindow::MainWindow(std::shared_ptr<const BackendCatalog> catalog,
                       std::unique_ptr<SettingsStore> store, QWidget* parent)
    : QMainWindow(parent), catalog_(std::move(catalog)), store_(std::move(store)) {
  register_studio_types();
  qRegisterMetaType<Prediction>();
  qRegisterMetaType<ReportResult>();
  if (!store_) store_ = std::make_unique<SettingsStore>();
  setWindowTitle(tr("SeedVAE Studio"));
  setWindowIcon(QIcon(QStringLiteral(":/seedvae/icons/seedvae-studio.svg")));
  setAcceptDrops(true);
  setDockNestingEnabled(true);

  controller_ = new RunController(catalog_, this);
  loader_ = new AsyncLoader(this);
  predictor_ = new MemoryPredictor(this);
  sync_ = new ViewSync(this);

  // Central area: the comparison view and the scrubber.
  auto* central = new QWidget(this);
  auto* cl = new QVBoxLayout(central);
  cl->setContentsMargins(0, 0, 0, 0);
  cl->setSpacing(0);
  view_ = new CompareView(sync_, central);
  view_->setObjectName(QStringLiteral("mainView"));
  view_->setPlaceholder(
      tr("Open a video (Ctrl+O) or use the sample clip, then Run (F5).\n"
         "Drop videos, .safetensors weights or .json presets here."));
  scrubber_ = new Scrubber(central);
  cl->addWidget(view_, 1);
  cl->addWidget(scrubber_);
  setCentralWidget(central);

  settings_panel_ = new SettingsPanel(catalog_, this);
  info_panel_ = new InfoPanel(this);
  charts_ = new ChartsPanel(this);
  ab_panel_ = new AbPanel(this);
  queue_panel_ = new QueuePanel(controller_, this);
  second_view_ = new CompareView(sync_, this);
  second_view_->setObjectName(QStringLiteral("secondView"));
  second_view_->setMode(CompareView::Mode::kDifference);

  buildActions();
  buildMenus();
  buildToolBar();
  buildDocks();
  buildStatusBar();

  // ---- wiring ----
  connect(controller_, &RunController::runStarted, this, &MainWindow::onRunStarted);
  connect(controller_, &RunController::progressChanged, this, &MainWindow::onProgress);
  connect(controller_, &RunController::frameAvailable, this, &MainWindow::onFrame);
  connect(controller_, &RunController::telemetryReceived, this,
          [this](const QVector<TelemetryPoint>& pts) {
            SlowScope trace("charts");
            charts_->addPoints(pts);
          });
  connect(controller_, &RunController::runFinished, this, &MainWindow::onRunFinished);
  connect(controller_, &RunController::abFinished, this, &MainWindow::onAbFinished);
  connect(controller_, &RunController::busyChanged, this, [this] { updateActions(); });
  connect(controller_, &RunController::devicesProbed, settings_panel_, &SettingsPanel::setDevices);
  connect(controller_, &RunController::reportWritten, this, [this](const ReportResult& r) {
    if (r.ok) {
      statusBar()->showMessage(tr("Report written to %1").arg(r.directory), 10000);
      if (confirmations_) {
        showInfo(tr("Report written"),
                 tr("The report is in %1 (%2 files).%3")
                     .arg(r.directory)
                     .arg(r.files.size())
                     .arg(r.error.isEmpty() ? QString() : tr("\nWarnings: %1").arg(r.error)));
      }
    } else {
      showError(tr("Report not written"), r.error);
    }
    emit reportWritten(r);
  });
  connect(controller_, &RunController::videoWritten, this,
          [this](bool ok, const QString& path, const QString& msg) {
            if (ok) {
              statusBar()->showMessage(tr("Video written to %1").arg(path), 10000);
            } else {
              showError(tr("Video not written"), msg);
            }
          });
  connect(loader_, &AsyncLoader::videoProbed, this, [this](const VideoInfoData& info) {
    video_ = info;
    info_panel_->setVideo(info);
    store_->add_recent(QStringLiteral("videos"), info.path);
    updateRecentMenus();
    if (!controller_->busy()) {
      pair_ = Pair::kOriginalRecon;
      view_->setImages(info.first_frame, {});
      second_view_->setImages(info.first_frame, {});
      scrubber_->reset(info_panel_->effectiveFrames(), info.fps);
    }
    requestPrediction();
    emit videoLoaded(info.path);
  });
  connect(
      loader_, &AsyncLoader::videoFailed, this, [this](const QString& path, const QString& msg) {
        if (video_) {
          info_panel_->setVideo(*video_);
        } else {
          useSampleClip();
        }
        showError(tr("Cannot open video"), tr("%1\n\n%2").arg(QDir::toNativeSeparators(path), msg));
      });
  connect(loader_, &AsyncLoader::weightsLoaded, this, [this](const WeightsInfo& info) {
    weights_ = info;
    info_panel_->setWeights(info);
    if (!info.synthetic) {
      store_->add_recent(QStringLiteral("weights"), info.source);
      updateRecentMenus();
    }
    requestPrediction();
    updateActions();
    emit weightsLoaded();
    if (run_when_ready_) {
      run_when_ready_ = false;
      if (run_when_ready_ab_) {
        startAB();
      } else {
        startRun();
      }
    }
  });
  connect(loader_, &AsyncLoader::weightsFailed, this,
          [this](const QString& path, const QString& msg) {
            if (weights_.weights) info_panel_->setWeights(weights_);
            run_when_ready_ = false;
            showError(tr("Cannot open weights"),
                      tr("%1\n\n%2").arg(QDir::toNativeSeparators(path), msg));
          });
  connect(loader_, &AsyncLoader::busyChanged, this, [this](bool busy) {
    if (busy)
      statusBar()->showMessage(tr("Opening…"));
    else
      statusBar()->clearMessage();
  });
  connect(predictor_, &MemoryPredictor::predicted, this,
          [this](const Prediction& p) { settings_panel_->setPrediction(p); });
  connect(settings_panel_, &SettingsPanel::settingsChanged, this, &MainWindow::onSettingsChanged);
  connect(settings_panel_, &SettingsPanel::backendChanged, controller_,
          &RunController::probeDevices);
  connect(settings_panel_, &SettingsPanel::refreshDevicesRequested, this, [this] {
    controller_->probeDevices(QString::fromStdString(settings_panel_->settings().backend));
  });
  connect(settings_panel_, &SettingsPanel::savePresetRequested, this, &MainWindow::savePreset);
  connect(settings_panel_, &SettingsPanel::loadPresetRequested, this, &MainWindow::loadPreset);
  connect(settings_panel_, &SettingsPanel::deletePresetRequested, this, &MainWindow::deletePreset);
  connect(settings_panel_, &SettingsPanel::importPresetRequested, this, &MainWindow::importPreset);
  connect(settings_panel_, &SettingsPanel::exportPresetRequested, this, &MainWindow::exportPreset);
  connect(settings_panel_, &SettingsPanel::fitToBudgetRequested, this, [this] {
    if (!weights_.weights) return;
    qint64 avail = settings_panel_->availableBytes();
    if (avail <= 0) {
      showError(tr("No memory figure"), tr("The free memory is not known yet: set a budget."));
      return;
    }
    PredictionRequest r;
    r.weights = weights_.weights;
    r.width = info_panel_->effectiveWidth();
    r.height = info_panel_->effectiveHeight();
    r.frames = info_panel_->effectiveFrames();
    r.settings = settings_panel_->settings();
    const QVector<BackendSpec> specs = catalog_->backends();
    const BackendSpec* spec = catalog_->find(specs, QString::fromStdString(r.settings.backend));
    // For host-memory backends the studio's own buffers share the same RAM.
    if (spec && spec->memory_is_host) {
      if (auto p = predictor_->latest(); p && p->ok) avail -= p->host_bytes;
    }
    statusBar()->showMessage(tr("Planning for %1…").arg(format_bytes(avail)));
    predictor_->fit(std::move(r), std::max<qint64>(1, avail));
  });
  connect(predictor_, &MemoryPredictor::fitted, this, [this](const BudgetFit& f) {
    if (!f.ok) {
      showError(tr("Cannot plan"), f.message);
      return;
    }
    RunOptions s = settings_panel_->settings();
    s.tiling = f.tiling.toStdString();
    s.tile = {f.tile_width, f.tile_height};
    s.chunk_latents = f.chunk_latents;
    settings_panel_->setSettings(s);
    onSettingsChanged(settings_panel_->settings());
    statusBar()->showMessage(tr("Planner: %1 tiles %2×%3, chunk %4, peak %5%6")
                                 .arg(f.tiling)
                                 .arg(f.tile_width)
                                 .arg(f.tile_height)
                                 .arg(f.chunk_latents)
                                 .arg(format_bytes(f.peak_bytes))
                                 .arg(f.fits ? QString() : tr(" — still over the budget")),
                             10000);
    if (!f.fits) showError(tr("Does not fit"), f.message);
  });
  connect(info_panel_, &InfoPanel::inputChanged, this, [this] {
    requestPrediction();
    if (!controller_->busy() && !summaries_.contains(QString())) {
      scrubber_->reset(info_panel_->effectiveFrames(), video_ ? video_->fps : 24);
    }
  });
  connect(info_panel_, &InfoPanel::openVideoRequested, this, &MainWindow::openVideoDialog);
  connect(info_panel_, &InfoPanel::useSampleRequested, this, &MainWindow::useSampleClip);
  connect(info_panel_, &InfoPanel::openWeightsRequested, this, &MainWindow::openWeightsDialog);
  connect(info_panel_, &InfoPanel::useBuiltinWeightsRequested, this,
          &MainWindow::useBuiltinWeights);
  connect(ab_panel_, &AbPanel::takeCurrentRequested, this,
          [this](const QString& slot) { setSlot(slot, settings_panel_->settings()); });
  connect(ab_panel_, &AbPanel::applySlotRequested, this, [this](const QString& slot) {
    settings_panel_->setSettings(ab_panel_->slotSettings(slot));
    onSettingsChanged(settings_panel_->settings());
  });
  connect(ab_panel_, &AbPanel::slotWeightsChanged, this,
          [this](const QString& slot) { setSlotWeights(slot, ab_panel_->slotWeights(slot)); });
  connect(ab_panel_, &AbPanel::browseWeightsRequested, this, &MainWindow::browseSlotWeights);
  connect(ab_panel_, &AbPanel::runRequested, this, &MainWindow::startAB);
  connect(ab_panel_, &AbPanel::exportRequested, this, &MainWindow::exportReport);
  // The queue: the current clip, settings and weights, or the A/B's pick over the whole video
  // (every frame of the compared input, the settings and weights that slot ran with), as a job
  // whose output and range the dialog asks for.
  connect(queue_panel_, &QueuePanel::addCurrentRequested, this, [this] {
    queue_panel_->openAddDialog(make_queued_job(info_panel_->inputSpec(), weights_spec_,
                                                catalog_->normalized(settings_panel_->settings())),
                                tr("Add the current clip to the queue"));
  });
  connect(ab_panel_, &AbPanel::enqueueRequested, this, [this](const QString& slot) {
    if (!last_ab_) return;
    const RunSummary& run = slot == QLatin1String("A") ? last_ab_->a : last_ab_->b;
    if (!run.ok) return;
    JobInput whole = run.input;
    whole.first_frame = 0;
    whole.max_frames = -1;
    whole.stride = 1;
    showDock(QStringLiteral("queue"));
    queue_panel_->openAddDialog(make_queued_job(whole, run.weights, run.settings),
                                tr("Queue %1 for the whole video").arg(slot));
  });
  connect(controller_, &RunController::queueProgress, this, &MainWindow::onProgress);
  connect(controller_, &RunController::queueFinished, this,
          [this](qint64 ran, const QString& error, bool cancelled) {
            stage_label_->setText(queue_end_text(ran, error, cancelled));
          });
  connect(scrubber_, &Scrubber::positionChanged, this, [this] { refreshViews(); });
  connect(view_, &CompareView::modeChanged, this, [this](CompareView::Mode m) {
    if (QAction* a = mode_actions_.value(m)) a->setChecked(true);
  });

  restoreSession();
  useSampleClip();
  useBuiltinWeights();
  controller_->probeDevices(QString::fromStdString(settings_panel_->settings().backend));
  updateActions();
}

MainWindow::~MainWindow() = default;

// ---- construction -----------------------------------------------------------------------------

void MainWindow::buildActions() {
  auto make = [this](const QString& text, const QKeySequence& key, const QString& tip,
                     QStyle::StandardPixmap icon = QStyle::SP_CustomBase) {
    auto* a = new QAction(text, this);
    if (!key.isEmpty()) a->setShortcut(key);
    a->setToolTip(key.isEmpty()
                      ? tip
                      : QStringLiteral("%1 (%2)").arg(tip, key.toString(QKeySequence::NativeText)));
    a->setStatusTip(tip);
    if (icon != QStyle::SP_CustomBase) a->setIcon(style()->standardIcon(icon));
    addAction(a);
    return a;
  };
  act_open_video_ =
      make(tr("Open &video…"), QKeySequence::Open,
           tr("Open a video, image, image folder or pattern"), QStyle::SP_DialogOpenButton);
  connect(act_open_video_, &QAction::triggered, this, &MainWindow::openVideoDialog);
  act_open_weights_ =
      make(tr("Open &weights…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O),
           tr("Open a SeedVR2 VAE checkpoint (.safetensors)"), QStyle::SP_DirOpenIcon);
  connect(act_open_weights_, &QAction::triggered, this, &MainWindow::openWeightsDialog);
  act_run_ =
      make(tr("&Run"), QKeySequence(Qt::Key_F5),
           tr("Encode and decode the input with the current settings"), QStyle::SP_MediaPlay);
  act_run_->setObjectName(QStringLiteral("actionRun"));
  connect(act_run_, &QAction::triggered, this, &MainWindow::startRun);
  act_run_ab_ =
      make(tr("Run &A/B"), QKeySequence(Qt::Key_F6),
           tr("Run slot A then slot B on the same input and compare"), QStyle::SP_BrowserReload);
  connect(act_run_ab_, &QAction::triggered, this, &MainWindow::startAB);
  act_cancel_ = make(tr("&Cancel"), QKeySequence(Qt::Key_Escape),
                     tr("Cancel the run (takes effect within one block, chunk or tile)"),
                     QStyle::SP_MediaStop);
  act_cancel_->setObjectName(QStringLiteral("actionCancel"));
  connect(act_cancel_, &QAction::triggered, this, &MainWindow::cancelRun);
  act_export_ =
      make(tr("&Export report…"), QKeySequence(Qt::CTRL | Qt::Key_E),
           tr("Write Markdown + JSON + PNG stills + charts + videos"), QStyle::SP_DialogSaveButton);
  connect(act_export_, &QAction::triggered, this, &MainWindow::exportReport);
  act_export_video_ =
      make(tr("Export reconstructed &video…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E),
           tr("Write the reconstruction shown on the right as a video"));
  connect(act_export_video_, &QAction::triggered, this, &MainWindow::exportVideo);
  act_tiles_ = make(tr("&Tile overlay"), QKeySequence(Qt::Key_T),
                    tr("Show the tile rectangles of the plan"));
  act_tiles_->setCheckable(true);
  connect(act_tiles_, &QAction::toggled, this, [this](bool on) {
    view_->setShowTiles(on);
    second_view_->setShowTiles(on);
  });
  act_seams_ = make(tr("Seam &heatmap"), QKeySequence(Qt::Key_H),
                    tr("Show |tiled − untiled| (when an untiled A/B counterpart exists) or the "
                       "per-tile mean offset"));
  act_seams_->setCheckable(true);
  connect(act_seams_, &QAction::toggled, this, [this](bool on) {
    view_->setShowSeams(on);
    second_view_->setShowSeams(on);
    refreshViews();
  });
  mode_group_ = new QActionGroup(this);
  const struct {
    CompareView::Mode mode;
    QString text;
    Qt::Key key;
  } modes[] = {{CompareView::Mode::kLeft, tr("Original"), Qt::Key_1},
               {CompareView::Mode::kRight, tr("Reconstruction"), Qt::Key_2},
               {CompareView::Mode::kSplit, tr("Split"), Qt::Key_3},
               {CompareView::Mode::kSideBySide, tr("Side by side"), Qt::Key_4},
               {CompareView::Mode::kDifference, tr("Difference"), Qt::Key_5}};
  for (const auto& m : modes) {
    QAction* a = make(m.text, QKeySequence(m.key), tr("View: %1").arg(m.text));
    a->setCheckable(true);
    a->setActionGroup(mode_group_);
    connect(a, &QAction::triggered, this, [this, mode = m.mode] { view_->setMode(mode); });
    mode_actions_.insert(m.mode, a);
  }
  mode_actions_[CompareView::Mode::kSplit]->setChecked(true);
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(act_open_video_);
  recent_videos_ = file->addMenu(tr("Recent videos"));
  file->addAction(tr("Use the &sample clip"), this, &MainWindow::useSampleClip);
  file->addSeparator();
  file->addAction(act_open_weights_);
  recent_weights_ = file->addMenu(tr("Recent weights"));
  file->addAction(tr("Use the &built-in model"), this, &MainWindow::useBuiltinWeights);
  file->addSeparator();
  file->addAction(act_export_);
  file->addAction(act_export_video_);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(act_run_);
  run->addAction(act_run_ab_);
  run->addAction(act_cancel_);
  run->addSeparator();
  QAction* save_preset =
      run->addAction(tr("Save settings as &preset…"), this, &MainWindow::savePreset);
  save_preset->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_S));
  run->addAction(tr("Import preset…"), this, &MainWindow::importPreset);
  run->addAction(tr("Export settings…"), this, &MainWindow::exportPreset);
  run->addSeparator();
  run->addAction(tr("Slot A ← current settings"), this,
                 [this] { setSlot("A", settings_panel_->settings()); });
  run->addAction(tr("Slot B ← current settings"), this,
                 [this] { setSlot("B", settings_panel_->settings()); });

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QAction* a : mode_group_->actions()) view->addAction(a);
  view->addSeparator();
  QMenu* compare = view->addMenu(tr("Compare"));
  const struct {
    Pair pair;
    QString text;
  } pairs[] = {{Pair::kOriginalRecon, tr("Original vs reconstruction")},
               {Pair::kAB, tr("A vs B")},
               {Pair::kOriginalA, tr("Original vs A")},
               {Pair::kOriginalB, tr("Original vs B")}};
  for (const auto& p : pairs)
    compare->addAction(p.text, this, [this, pair = p.pair] { setPair(pair); });
  view->addSeparator();
  QAction* zin = view->addAction(tr("Zoom &in"), this, [this] { view_->zoomBy(1.25); });
  zin->setShortcuts({QKeySequence::ZoomIn, QKeySequence(Qt::CTRL | Qt::Key_Equal)});
  QAction* zout = view->addAction(tr("Zoom &out"), this, [this] { view_->zoomBy(0.8); });
  zout->setShortcut(QKeySequence::ZoomOut);
  QAction* fit = view->addAction(tr("&Fit"), this, [this] { sync_->fit(); });
  fit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
  QAction* actual = view->addAction(tr("Actual &pixels"), this, [this] { view_->zoomActual(); });
  actual->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_1));
  QAction* gain_up = view->addAction(tr("Difference gain up"), this,
                                     [this] { gain_spin_->setValue(gain_spin_->value() * 2); });
  gain_up->setShortcut(QKeySequence(Qt::Key_BracketRight));
  QAction* gain_down = view->addAction(tr("Difference gain down"), this,
                                       [this] { gain_spin_->setValue(gain_spin_->value() / 2); });
  gain_down->setShortcut(QKeySequence(Qt::Key_BracketLeft));
  view->addSeparator();
  view->addAction(act_tiles_);
  view->addAction(act_seams_);
  view->addSeparator();
  QAction* play = view->addAction(tr("Play / pause"), scrubber_, &Scrubber::togglePlay);
  play->setShortcut(QKeySequence(Qt::Key_Space));
  QAction* next = view->addAction(tr("Next frame"), scrubber_, &Scrubber::stepForward);
  next->setShortcuts({QKeySequence(Qt::Key_Period), QKeySequence(Qt::Key_Right)});
  QAction* prev = view->addAction(tr("Previous frame"), scrubber_, &Scrubber::stepBack);
  prev->setShortcuts({QKeySequence(Qt::Key_Comma), QKeySequence(Qt::Key_Left)});
  QAction* home = view->addAction(tr("First frame"), scrubber_, &Scrubber::first);
  home->setShortcut(QKeySequence(Qt::Key_Home));
  QAction* end = view->addAction(tr("Last decoded frame"), scrubber_, &Scrubber::last);
  end->setShortcut(QKeySequence(Qt::Key_End));
  for (QAction* a : {zin, zout, fit, actual, gain_up, gain_down}) addAction(a);
  // Playback keys (Space, arrows, Home/End) act when the view or the scrubber has the focus, so
  // they never steal keys from buttons, spin boxes and tables in the docks.
  for (QAction* a : {play, next, prev, home, end}) {
    a->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    centralWidget()->addAction(a);
  }
  menuBar()->addMenu(tr("&Window"))->setObjectName(QStringLiteral("windowMenu"));
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("Keyboard shortcuts"), this, [this] {
    showInfo(
        tr("Keyboard shortcuts"),
        tr("Ctrl+O open video · Ctrl+Shift+O open weights · F5 run · F6 run A/B · Esc cancel\n"
           "1 original · 2 reconstruction · 3 split · 4 side by side · 5 difference\n"
           "[ / ] difference gain · Ctrl+= / Ctrl+- zoom · Ctrl+0 fit · Ctrl+1 actual pixels\n"
           "T tile overlay · H seam heatmap · Space play · , / . step · Home / End\n"
           "Ctrl+E export report · Ctrl+Shift+E export video · Ctrl+S save preset · Ctrl+Q quit\n"
           "Mouse: wheel zooms, drag pans, drag the divider in split view, double-click fits."));
  });
  help->addAction(tr("About SeedVAE Studio"), this, [this] {
    showInfo(tr("About"),
             tr("SeedVAE Studio %1\nA native engine and studio for the SeedVR2 video VAE.")
                 .arg(SEEDVAE_VERSION));
  });
}

void MainWindow::buildToolBar() {
  QToolBar* tb = addToolBar(tr("Main"));
  tb->setObjectName(QStringLiteral("mainToolBar"));
  tb->setToolButtonStyle(Qt::ToolButtonIconOnly);
  tb->addAction(act_open_video_);
  tb->addAction(act_open_weights_);
  tb->addSeparator();
  tb->addAction(act_run_);
  tb->addAction(act_cancel_);
  tb->addAction(act_run_ab_);
  tb->addSeparator();
  for (QAction* a : mode_group_->actions()) tb->addAction(a);
  for (QAction* a : mode_group_->actions()) {
    if (QWidget* w = tb->widgetForAction(a)) {
      if (auto* b = qobject_cast<QToolButton*>(w)) b->setToolButtonStyle(Qt::ToolButtonTextOnly);
    }
  }
  tb->addSeparator();
  pair_combo_ = new QComboBox(tb);
  pair_combo_->setObjectName(QStringLiteral("pairCombo"));
  pair_combo_->addItem(tr("Original | Reconstruction"), static_cast<int>(Pair::kOriginalRecon));
  pair_combo_->addItem(tr("A | B"), static_cast<int>(Pair::kAB));
  pair_combo_->addItem(tr("Original | A"), static_cast<int>(Pair::kOriginalA));
  pair_combo_->addItem(tr("Original | B"), static_cast<int>(Pair::kOriginalB));
  pair_combo_->setToolTip(tr("What the left and right sides of the views show"));
  connect(pair_combo_, &QComboBox::currentIndexChanged, this,
          [this] { setPair(static_cast<Pair>(pair_combo_->currentData().toInt())); });
  tb->addWidget(pair_combo_);
  auto* gl = new QLabel(tr(" gain "), tb);
  tb->addWidget(gl);
  gain_spin_ = new QDoubleSpinBox(tb);
  gain_spin_->setObjectName(QStringLiteral("gainSpin"));
  gain_spin_->setRange(0.25, 256);
  gain_spin_->setDecimals(2);
  gain_spin_->setValue(4);
  gain_spin_->setPrefix(QStringLiteral("×"));
  gain_spin_->setToolTip(tr("Gain of the difference heatmap ([ and ] halve and double it)"));
  connect(gain_spin_, &QDoubleSpinBox::valueChanged, this, [this](double g) {
    view_->setGain(g);
    second_view_->setGain(g);
  });
  tb->addWidget(gain_spin_);
  tb->addSeparator();
  tb->addAction(act_tiles_);
  tb->addAction(act_seams_);
  for (QAction* a : {act_tiles_, act_seams_}) {
    if (auto* b = qobject_cast<QToolButton*>(tb->widgetForAction(a)))
      b->setToolButtonStyle(Qt::ToolButtonTextOnly);
  }
}

void MainWindow::buildDocks() {
  auto dock = [this](const QString& key, const QString& title, QWidget* w,
                     Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(QStringLiteral("dock_") + QString(key).replace(' ', '_'));
    d->setWidget(w);
    d->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable |
                   QDockWidget::DockWidgetClosable);
    addDockWidget(area, d);
    docks_.insert(key, d);
    if (QMenu* m = menuBar()->findChild<QMenu*>(QStringLiteral("windowMenu")))
      m->addAction(d->toggleViewAction());
    return d;
  };
  QDockWidget* input = dock(QStringLiteral("input"), tr("Input and weights"), scrolled(info_panel_),
                            Qt::LeftDockWidgetArea);
  QDockWidget* settings = dock(QStringLiteral("settings"), tr("Settings"),
                               scrolled(settings_panel_), Qt::LeftDockWidgetArea);
  tabifyDockWidget(input, settings);
  input->raise();
  dock(QStringLiteral("ab"), tr("A/B comparison"), ab_panel_, Qt::RightDockWidgetArea);
  QDockWidget* graphs =
      dock(QStringLiteral("graphs"), tr("Graphs"), charts_, Qt::BottomDockWidgetArea);
  QDockWidget* queue =
      dock(QStringLiteral("queue"), tr("Queue"), queue_panel_, Qt::BottomDockWidgetArea);
  tabifyDockWidget(graphs, queue);
  graphs->raise();
  QDockWidget* second =
      dock(QStringLiteral("second view"), tr("Second view"), second_view_, Qt::RightDockWidgetArea);
  second->hide();
  resizeDocks({input, docks_["ab"]}, {350, 350}, Qt::Horizontal);
  resizeDocks({graphs}, {210}, Qt::Vertical);
}

void MainWindow::buildStatusBar() {
  progress_ = new QProgressBar(this);
  progress_->setObjectName(QStringLiteral("runProgress"));
  progress_->setRange(0, 1000);
  progress_->setMaximumWidth(220);
  progress_->setTextVisible(true);
  progress_->setFormat(QStringLiteral("%p%"));
  stage_label_ = new QLabel(tr("Ready"), this);
  stage_label_->setObjectName(QStringLiteral("stageLabel"));
  cancel_button_ = new QToolButton(this);
  cancel_button_->setDefaultAction(act_cancel_);
  statusBar()->addPermanentWidget(stage_label_, 1);
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_button_);
}

void MainWindow::restoreSession() {
  if (auto s = store_->load_current()) settings_panel_->setSettings(*s);
  RunOptions a = settings_panel_->settings();
  RunOptions b = a;
  b.chunk_latents = 0;  // a useful default comparison: streamed vs whole clip (identical output)
  setSlot(QStringLiteral("A"), store_->load_slot(QStringLiteral("A")).value_or(a));
  setSlot(QStringLiteral("B"), store_->load_slot(QStringLiteral("B")).value_or(b));
  for (const QString& slot : {QStringLiteral("A"), QStringLiteral("B")}) {
    ab_panel_->setSlotWeights(slot, store_->load_slot_weights(slot));
  }
  settings_panel_->setPresetNames(store_->preset_names());
  updateRecentMenus();
  const QByteArray geometry = store_->value(QStringLiteral("window/geometry")).toByteArray();
  if (geometry.isEmpty() || !restoreGeometry(geometry)) {
    // Fit the screen: 1366x768 laptops get the whole available area.
    QSize size(1366, 768);
    if (const QScreen* screen = QGuiApplication::primaryScreen()) {
      size = size.boundedTo(screen->availableGeometry().size());
    }
    resize(size);
  }
  const QByteArray state = store_->value(QStringLiteral("window/state")).toByteArray();
  if (!state.isEmpty()) QMainWindow::restoreState(state);
}

void MainWindow::updateRecentMenus() {
  auto fill = [this](QMenu* menu, const QString& kind) {
    menu->clear();
    const QStringList items = store_->recent(kind);
    for (int i = 0; i < items.size(); ++i) {
      const QString path = items[i];
      QAction* a =
          menu->addAction(QStringLiteral("&%1 %2").arg(i + 1).arg(QFileInfo(path).fileName()));
      a->setToolTip(path);
      connect(a, &QAction::triggered, this, [this, path, kind] {
        if (!QFileInfo::exists(path)) {
          store_->remove_recent(kind, path);
          updateRecentMenus();
          showError(tr("File not found"),
                    tr("%1 no longer exists.").arg(QDir::toNativeSeparators(path)));
          return;
        }
        if (kind == QLatin1String("weights"))
          openWeights(path);
        else
          openVideo(path);
      });
    }
    menu->setEnabled(!items.isEmpty());
  };
  fill(recent_videos_, QStringLiteral("videos"));
  fill(recent_weights_, QStringLiteral("weights"));
}

void MainWindow::updateActions() {
  const bool busy = controller_->busy();
  act_run_->setEnabled(!busy);
  act_run_ab_->setEnabled(!busy);
  act_cancel_->setEnabled(busy);
  ab_panel_->setBusy(busy, controller_->abRunning());
  const bool have = last_run_.has_value() || last_ab_.has_value();
  act_export_->setEnabled(!busy && have);
  act_export_video_->setEnabled(!busy && have);
}

// ---- files ------------------------------------------------------------------------------------

void MainWindow::openVideo(const QString& path) {
  info_panel_->setLoadingVideo(path);
  loader_->probeVideo(path);
}

void MainWindow::useSampleClip() {
  video_.reset();
  info_panel_->setSample(256, 256, 17);
  scrubber_->reset(info_panel_->effectiveFrames(), 24);
  requestPrediction();
}

void MainWindow::openWeights(const QString& path) {
  weights_spec_ = WeightsSpec{path, QString()};
  info_panel_->setLoadingWeights(QFileInfo(path).fileName());
  loader_->loadWeights(weights_spec_);
}

void MainWindow::useBuiltinWeights() {
  weights_spec_ = default_weights_spec();
  info_panel_->setLoadingWeights(weights_spec_.display_name());
  loader_->loadWeights(weights_spec_);
}

void MainWindow::openVideoDialog() {
  const QString dir = store_->value(QStringLiteral("dirs/video")).toString();
  const QString path = QFileDialog::getOpenFileName(this, tr("Open video"), dir, tr(kVideoFilter));
  if (path.isEmpty()) return;
  store_->set_value(QStringLiteral("dirs/video"), QFileInfo(path).absolutePath());
  openVideo(path);
}

void MainWindow::openWeightsDialog() {
  const QString dir = store_->value(QStringLiteral("dirs/weights")).toString();
  const QString path = QFileDialog::getOpenFileName(
      this, tr("Open weights"), dir, tr("SeedVR2 VAE checkpoints (*.safetensors);;All files (*)"));
  if (path.isEmpty()) return;
  store_->set_value(QStringLiteral("dirs/weights"), QFileInfo(path).absolutePath());
  openWeights(path);
}

void MainWindow::openDroppedOrRecent(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix == QLatin1String("safetensors")) {
    openWeights(path);
  } else if (suffix == QLatin1String("json")) {
    QString error, name;
    QStringList warnings;
    auto s = SettingsStore::read_preset_file(path, &error, &warnings, &name);
    if (!s) {
      showError(tr("Cannot load preset"), error);
      return;
    }
    settings_panel_->setSettings(*s);
    onSettingsChanged(settings_panel_->settings());
    statusBar()->showMessage(tr("Loaded preset %1").arg(name), 5000);
  } else {
    openVideo(path);
  }
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
  if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
  for (const QUrl& url : e->mimeData()->urls()) {
    if (url.isLocalFile()) {
      openDroppedOrRecent(url.toLocalFile());
      break;  // one file at a time
    }
  }
  e->acceptProposedAction();
}

// ---- settings and presets ---------------------------------------------------------------------

void MainWindow::onSettingsChanged(const RunOptions& s) {
  store_->save_current(s);
  info_panel_->setSpatialMultiple(s.spatial_multiple);
  requestPrediction();
}

void MainWindow::applySettings(const RunOptions& s) {
  settings_panel_->setSettings(s);
  onSettingsChanged(settings_panel_->settings());
}

void MainWindow::setSlot(const QString& slot, const RunOptions& s) {
  const RunOptions n = catalog_->normalized(s);
  ab_panel_->setSlot(slot, n);
  store_->save_slot(slot, n);
}

void MainWindow::setSlotWeights(const QString& slot, const std::optional<WeightsSpec>& weights) {
  ab_panel_->setSlotWeights(slot, weights);
  store_->save_slot_weights(slot, weights);
}

void MainWindow::browseSlotWeights(const QString& slot) {
  const QString dir = store_->value(QStringLiteral("dirs/weights")).toString();
  const QString path = QFileDialog::getOpenFileName(
      this, tr("Weights of slot %1").arg(slot), dir,
      tr("VAE checkpoints: SeedVR2, Wan2.1, Wan2.2 (*.safetensors *.pth);;All files (*)"));
  if (path.isEmpty()) return;
  store_->set_value(QStringLiteral("dirs/weights"), QFileInfo(path).absolutePath());
  setSlotWeights(slot, WeightsSpec{path, QString()});
}

void MainWindow::requestPrediction() {
  // Every change of input passes here: frame prefetch applies to files only.
  settings_panel_->setSampleInput(info_panel_->inputSpec().is_sample());
  if (!weights_.weights) return;
  PredictionRequest r;
  r.weights = weights_.weights;
  r.width = info_panel_->effectiveWidth();
  r.height = info_panel_->effectiveHeight();
  r.frames = info_panel_->effectiveFrames();
  r.settings = settings_panel_->settings();
  const QVector<BackendSpec> specs = catalog_->backends();
  if (const BackendSpec* spec = catalog_->find(specs, QString::fromStdString(r.settings.backend)))
    r.memory_is_host = spec->memory_is_host;
  if (!r.memory_is_host) {
    // What the backend will enforce: the budget, else the free memory less its margin.
    const qint64 available = settings_panel_->availableBytes();
    if (available > 0) {
      r.device_budget_bytes = r.settings.budget_gb > 0 ? available : available - kBudgetMargin;
    }
  }
  predictor_->request(std::move(r));
}

void MainWindow::savePreset() {
  bool ok = false;
  const QString name =
      QInputDialog::getText(this, tr("Save preset"), tr("Preset name:"), QLineEdit::Normal,
                            settings_panel_->selectedPreset(), &ok);
  if (!ok || name.trimmed().isEmpty()) return;
  QString error;
  if (!store_->save_preset(name, settings_panel_->settings(), &error)) {
    showError(tr("Cannot save preset"), error);
    return;
  }
  settings_panel_->setPresetNames(store_->preset_names());
  statusBar()->showMessage(tr("Saved preset %1 in %2").arg(name, store_->presets_dir()), 5000);
}

void MainWindow::loadPreset(const QString& name) {
  QString error;
  QStringList warnings;
  auto s = store_->load_preset(name, &error, &warnings);
  if (!s) {
    showError(tr("Cannot load preset"), error);
    return;
  }
  settings_panel_->setSettings(*s);
  onSettingsChanged(settings_panel_->settings());
  statusBar()->showMessage(warnings.isEmpty()
                               ? tr("Loaded preset %1").arg(name)
                               : tr("Loaded preset %1 (%2)").arg(name, warnings.join("; ")),
                           8000);
}

void MainWindow::deletePreset(const QString& name) {
  auto* box = new QMessageBox(QMessageBox::Question, tr("Delete preset"),
                              tr("Delete the preset \"%1\"?").arg(name),
                              QMessageBox::Yes | QMessageBox::No, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  connect(box, &QMessageBox::finished, this, [this, name](int r) {
    if (r != QMessageBox::Yes) return;
    store_->remove_preset(name);
    settings_panel_->setPresetNames(store_->preset_names());
  });
  box->open();
}

void MainWindow::importPreset() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Import preset"),
                                                    store_->presets_dir(), tr("Presets (*.json)"));
  if (!path.isEmpty()) openDroppedOrRecent(path);
}

void MainWindow::exportPreset() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export settings"),
                                                    store_->presets_dir() + "/settings.json",
                                                    tr("Presets (*.json)"));
  if (path.isEmpty()) return;
  QString error;
  if (!SettingsStore::write_preset_file(path, QFileInfo(path).completeBaseName(),
                                        settings_panel_->settings(), &error)) {
    showError(tr("Cannot export settings"), error);
  }
}

// ---- runs -------------------------------------------------------------------------------------

void MainWindow::runWhenReady(bool ab) {
  if (weightsReady() && !loader_->busy()) {
    ab ? startAB() : startRun();
    return;
  }
  run_when_ready_ = true;
  run_when_ready_ab_ = ab;
}

bool MainWindow::startRun() {
  if (controller_->busy()) return false;
  if (!weights_.weights) {
    showError(tr("No weights"), tr("The weights are still loading or failed to load: open a "
                                   "checkpoint or use the built-in model."));
    return false;
  }
  if (confirmations_ && !settings_panel_->fits()) {
    auto* box = new QMessageBox(QMessageBox::Warning, tr("This run may not fit"),
                                settings_panel_->fitWarning() + tr("\n\nRun anyway?"),
                                QMessageBox::Yes | QMessageBox::No, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    connect(box, &QMessageBox::finished, this, [this](int r) {
      if (r == QMessageBox::Yes) doStartRun();
    });
    box->open();
    return false;
  }
  return doStartRun();
}

bool MainWindow::doStartRun() {
  RunRequest r;
  r.input = info_panel_->inputSpec();
  r.weights_spec = weights_spec_;
  r.weights = weights_.weights;
  r.settings = settings_panel_->settings();
  if (controller_->start(r) == 0) return false;
  summaries_.clear();
  charts_->clear();
  ab_panel_->clearResult();
  last_ab_.reset();
  running_slot_.clear();
  setPair(Pair::kOriginalRecon);
  scrubber_->reset(info_panel_->effectiveFrames(), video_ ? video_->fps : 24);
  scrubber_->setFollow(true);
  progress_->setValue(0);
  stage_label_->setText(tr("Starting…"));
  updateActions();
  return true;
}

bool MainWindow::startAB() {
  if (controller_->busy()) return false;
  const bool loaded_model =
      !ab_panel_->slotWeights(QStringLiteral("A")) || !ab_panel_->slotWeights(QStringLiteral("B"));
  if (loaded_model && !weights_.weights) {
    showError(tr("No weights"), tr("The weights are still loading or failed to load."));
    return false;
  }
  return doStartAB();
}

bool MainWindow::doStartAB() {
  RunRequest a, b;
  a.input = b.input = info_panel_->inputSpec();
  // A slot on its own weights passes only their name: the engine thread reads them for that run.
  auto weights_for = [this](RunRequest& r, const QString& slot) {
    const std::optional<WeightsSpec> own = ab_panel_->slotWeights(slot);
    if (own && !same_weights(*own, weights_spec_)) {
      r.weights_spec = *own;
    } else {
      r.weights_spec = weights_spec_;
      r.weights = weights_.weights;
    }
  };
  weights_for(a, QStringLiteral("A"));
  weights_for(b, QStringLiteral("B"));
  a.settings = ab_panel_->slotSettings(QStringLiteral("A"));
  b.settings = ab_panel_->slotSettings(QStringLiteral("B"));
  if (controller_->startAB(a, b) == 0) return false;
  summaries_.clear();
  charts_->clear();
  ab_panel_->clearResult();
  last_ab_.reset();
  setPair(Pair::kOriginalRecon);
  scrubber_->reset(info_panel_->effectiveFrames(), video_ ? video_->fps : 24);
  scrubber_->setFollow(true);
  progress_->setValue(0);
  stage_label_->setText(tr("Starting A…"));
  updateActions();
  return true;
}

void MainWindow::cancelRun() {
  if (!controller_->busy()) return;
  controller_->cancel();  // direct atomic store; the engine stops at its next check
  stage_label_->setText(tr("Cancelling…"));
}

void MainWindow::onRunStarted(quint64, const QString& slot) {
  SlowScope trace("onRunStarted");
  running_slot_ = slot;
  if (!slot.isEmpty()) {
    // During A/B the views follow the slot being computed.
    scrubber_->reset(info_panel_->effectiveFrames(), video_ ? video_->fps : 24);
    scrubber_->setFollow(true);
  }
  refreshViews();
}

void MainWindow::onProgress(const ProgressUpdate& u) {
  SlowScope trace("onProgress");
  progress_->setValue(static_cast<int>(u.fraction * 1000));
  QString text = (u.slot.isEmpty() ? QString() : tr("%1: ").arg(u.slot)) + u.stage;
  if (u.total > 1) text += QStringLiteral(" %1/%2").arg(u.done).arg(u.total);
  text += tr(" · %1 elapsed").arg(format_seconds(u.elapsed_s));
  if (u.eta_s >= 0 && u.fraction < 1) text += tr(" · ETA %1").arg(format_seconds(u.eta_s));
  stage_label_->setText(text);
}

void MainWindow::onFrame(const FrameUpdate& f) {
  SlowScope trace("onFrame");
  if (f.slot != running_slot_) return;
  scrubber_->setAvailable(f.available);
  refreshViews();
}

void MainWindow::onRunFinished(const RunSummary& in) {
  SlowScope trace("onRunFinished");
  const RunSummary& s = in;
  summaries_[s.slot] = s;
  if (s.slot.isEmpty()) last_run_ = s;
  if (s.store) scrubber_->setAvailable(s.store->available());
  updateActions();
  const QString who = s.slot.isEmpty() ? tr("Run") : tr("Run %1").arg(s.slot);
  if (s.ok) {
    stage_label_->setText(
        tr("%1 done: %2 ms/frame, peak %3, PSNR %4 dB, SSIM %5")
            .arg(who)
            .arg(s.ms_per_frame, 0, 'f', 1)
            .arg(format_bytes(s.peak_bytes))
            .arg(s.vs_original.psnr_db, 0, 'f', 2)
            .arg(s.vs_original.ssim, 0, 'f', 4) +
        (s.prefetch
             ? tr(", prefetch overlapped %1 of reading").arg(format_seconds(s.read_overlap_s))
             : QString()));
    progress_->setValue(1000);
  } else if (s.cancelled) {
    stage_label_->setText(tr("%1 cancelled after %2").arg(who, format_seconds(s.total_s)));
  } else {
    stage_label_->setText(tr("%1 failed").arg(who));
    showError(tr("%1 failed").arg(who), s.error);
  }
  if (s.slot.isEmpty()) {
    const bool tiled = !s.overlay.tiles.isEmpty();
    view_->setTiles(s.overlay.tiles, s.overlay.tile_offset);
    second_view_->setTiles(s.overlay.tiles, s.overlay.tile_offset);
    if (tiled && !act_tiles_->isChecked())
      statusBar()->showMessage(
          tr("Tiled run: press T for the tile overlay, H for the seam heatmap"), 8000);
  }
  refreshViews();
  emit runFinished(s);
}

void MainWindow::onAbFinished(const AbComparison& in) {
  SlowScope trace("onAbFinished");
  AbComparison ab = in;
  if (summaries_.contains("A")) ab.a = summaries_["A"];
  if (summaries_.contains("B")) ab.b = summaries_["B"];
  last_ab_ = ab;
  ab_panel_->setResult(ab);
  docks_["ab"]->show();
  docks_["ab"]->raise();
  if (ab.ok) {
    setPair(Pair::kAB);
    stage_label_->setText(tr("A/B done: A vs B max |diff| %1, PSNR %2 dB")
                              .arg(ab.a_vs_b.max_abs, 0, 'e', 2)
                              .arg(ab.a_vs_b.psnr_db, 0, 'f', 2));
  } else if (!ab.cancelled) {
    // One slot failed: the views show the other one against the original.
    if (ab.a.ok != ab.b.ok) setPair(ab.a.ok ? Pair::kOriginalA : Pair::kOriginalB);
    stage_label_->setText(tr("A/B incomplete: %1").arg(ab.error));
  }
  updateActions();
  emit abFinished(ab);
}

// ---- views ------------------------------------------------------------------------------------

void MainWindow::setPair(Pair pair) {
  pair_ = pair;
  const int i = pair_combo_->findData(static_cast<int>(pair));
  if (i >= 0 && pair_combo_->currentIndex() != i) {
    const QSignalBlocker block(pair_combo_);
    pair_combo_->setCurrentIndex(i);
  }
  // Tiles of the run shown on the right.
  const RunSummary* right = nullptr;
  switch (pair) {
    case Pair::kOriginalRecon:
      right = summaryFor(running_slot_.isEmpty() ? QString() : running_slot_);
      break;
    case Pair::kAB:
    case Pair::kOriginalB: right = summaryFor(QStringLiteral("B")); break;
    case Pair::kOriginalA: right = summaryFor(QStringLiteral("A")); break;
  }
  if (right) {
    view_->setTiles(right->overlay.tiles, right->overlay.tile_offset);
    second_view_->setTiles(right->overlay.tiles, right->overlay.tile_offset);
  }
  refreshViews();
}

void MainWindow::setViewMode(CompareView::Mode mode) {
  view_->setMode(mode);
}

void MainWindow::setOverlay(bool tiles, bool seams) {
  act_tiles_->setChecked(tiles);
  act_seams_->setChecked(seams);
}

void MainWindow::showDock(const QString& name) {
  if (QDockWidget* d = docks_.value(name)) {
    d->show();
    d->raise();
  }
}

void MainWindow::revealInDock(const QString& dock, const QString& object_name) {
  showDock(dock);
  QDockWidget* d = docks_.value(dock);
  if (!d) return;
  auto* area = qobject_cast<QScrollArea*>(d->widget());
  QWidget* target = d->findChild<QWidget*>(object_name);
  if (area && target) area->ensureWidgetVisible(target, 10, 60);
}

QImage MainWindow::frameImage(const std::shared_ptr<FrameStore>& store, bool original, qint64 index,
                              bool* pending) {
  if (pending) *pending = false;
  if (!store || index < 0) return {};
  QImage image = original ? store->cached_original(index) : store->cached_frame(index);
  if (!image.isNull()) return image;
  if (index >= (original ? store->original_count() : store->available())) return {};
  if (pending) *pending = true;
  // The newest request replaces one not started; the refresh then asks again for what is still
  // missing. A frame that cannot be read refreshes nothing (no loop).
  converter_.post([this, store, original, index] {
    const QImage converted = original ? store->original(index) : store->frame(index);
    if (!converted.isNull()) QMetaObject::invokeMethod(this, [this] { refreshViews(); });
  });
  return {};
}

void MainWindow::settleViews() {
  refreshViews();
  for (int round = 0; views_pending_ && round < 4; ++round) {  // left, then right, at most
    converter_.flush();
    refreshViews();
  }
}

std::shared_ptr<FrameStore> MainWindow::storeFor(const QString& slot) const {
  if (const RunSummary* s = summaryFor(slot)) return s->store;
  return controller_->store(slot);
}

const RunSummary* MainWindow::summaryFor(const QString& slot) const {
  auto it = summaries_.find(slot);
  return it == summaries_.end() ? nullptr : &*it;
}

QString MainWindow::slotCaption(const QString& slot) const {
  const RunSummary* run = summaryFor(slot);
  const std::optional<WeightsSpec> w =
      run ? std::optional<WeightsSpec>(run->weights) : ab_panel_->slotWeights(slot);
  QString caption = slot;
  if (w && !same_weights(*w, weights_spec_)) {
    caption += QStringLiteral(" · ") + w->short_name();
    if (run && !run->family.isEmpty()) caption += QStringLiteral(" (%1)").arg(run->family);
  }
  return caption + QStringLiteral(" · ") +
         settings_label(run ? run->settings : ab_panel_->slotSettings(slot));
}

void MainWindow::refreshViews() {
  SlowScope trace("refreshViews");
  const qint64 i = scrubber_->position();
  QImage left, right;
  QString ll = tr("Original"), rl = tr("Reconstruction");
  std::shared_ptr<FrameStore> shown;                 // the reconstruction on the right
  bool left_pending = false, right_pending = false;  // converting: the views keep their images
  QString shown_slot;
  switch (pair_) {
    case Pair::kOriginalRecon: {
      shown_slot = running_slot_;
      shown = storeFor(shown_slot);
      if (!shown_slot.isEmpty()) rl = tr("Reconstruction %1").arg(shown_slot);
      break;
    }
    case Pair::kAB: {
      auto a = storeFor(QStringLiteral("A"));
      shown = storeFor(QStringLiteral("B"));
      shown_slot = QStringLiteral("B");
      left = frameImage(a, false, i, &left_pending);
      ll = slotCaption(QStringLiteral("A"));
      rl = slotCaption(QStringLiteral("B"));
      break;
    }
    case Pair::kOriginalA:
      shown_slot = QStringLiteral("A");
      shown = storeFor(shown_slot);
      rl = slotCaption(QStringLiteral("A"));
      break;
    case Pair::kOriginalB:
      shown_slot = QStringLiteral("B");
      shown = storeFor(shown_slot);
      rl = slotCaption(QStringLiteral("B"));
      break;
  }
  if (pair_ != Pair::kAB) {
    left = frameImage(shown, true, i, &left_pending);
    if (left.isNull() && !left_pending && video_ && i == 0) left = video_->first_frame;
  }
  right = frameImage(shown, false, i, &right_pending);
  if (left_pending) left = view_->leftImage();
  if (right_pending) right = view_->rightImage();
  views_pending_ = left_pending || right_pending;
  view_->setLabels(ll, rl);
  view_->setImages(left, right);
  second_view_->setLabels(ll, rl);
  second_view_->setImages(left, right);

  // Seam heatmap: |tiled - untiled| when the other slot of an A/B is the untiled reference,
  // otherwise the per-tile mean offset of the shown run.
  if (act_seams_->isChecked()) {
    const RunSummary* run = summaryFor(shown_slot);
    QImage heat;
    QString caption;
    if (run && !run->overlay.tiles.isEmpty()) {
      const QString other =
          shown_slot == QLatin1String("A") ? QStringLiteral("B") : QStringLiteral("A");
      const RunSummary* ref = shown_slot.isEmpty() ? nullptr : summaryFor(other);
      if (ref && ref->ok && ref->settings.tiling == "off" &&
          same_weights(ref->weights, run->weights) && ref->store && !right.isNull()) {
        bool ref_pending = false;
        heat = difference_heatmap(frameImage(ref->store, false, i, &ref_pending), right,
                                  gain_spin_->value());
        views_pending_ = views_pending_ || ref_pending;
        caption = tr("seam heatmap: |tiled − untiled| × %1").arg(gain_spin_->value());
      } else {
        heat = QImage(run->width, run->height, QImage::Format_ARGB32);
        heat.fill(Qt::transparent);
        QPainter p(&heat);
        for (int t = 0; t < run->overlay.tiles.size() && t < run->overlay.tile_offset.size(); ++t) {
          const double off = run->overlay.tile_offset[t];
          if (!(off == off)) continue;
          const int v =
              std::clamp(static_cast<int>(std::abs(off) * gain_spin_->value() * 8), 0, 255);
          QColor c = QColor::fromRgb(heat_color(v));
          c.setAlpha(120);
          p.fillRect(run->overlay.tiles[t], c);
        }
        caption = tr("seam heatmap: per-tile mean offset (no untiled reference in this session)");
      }
    } else {
      caption = tr("seam heatmap: the shown run is untiled");
    }
    view_->setSeamHeatmap(heat, caption);
    second_view_->setSeamHeatmap(heat, caption);
  }
}

// ---- export -----------------------------------------------------------------------------------

ReportJob MainWindow::reportJob(const QString& directory) {
  ReportJob job;
  job.directory = directory;
  if (last_ab_) {
    job.ab = last_ab_;
    job.runs = {last_ab_->a, last_ab_->b};
  } else if (last_run_) {
    job.runs = {*last_run_};
  }
  job.weights = weights_;
  job.weights.weights.reset();
  job.input_description = video_ ? QStringLiteral("%1 (%2×%3, %4 frames)")
                                       .arg(video_->path)
                                       .arg(video_->width)
                                       .arg(video_->height)
                                       .arg(video_->frames)
                                 : input_display_name(info_panel_->inputSpec());
  job.charts.insert(QStringLiteral("memory"), charts_->render(QStringLiteral("memory")));
  job.charts.insert(QStringLiteral("timing"), charts_->render(QStringLiteral("timing")));
  job.diff_gain = gain_spin_->value();
  return job;
}

void MainWindow::exportReportTo(const QString& directory) {
  controller_->writeReport(reportJob(directory));
  statusBar()->showMessage(tr("Writing the report to %1…").arg(directory));
}

void MainWindow::exportReport() {
  if (!last_run_ && !last_ab_) {
    showError(tr("Nothing to export"), tr("Run once (F5) or run A/B (F6) first."));
    return;
  }
  QString base = store_
                     ->value(QStringLiteral("dirs/report"),
                             QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation))
                     .toString();
  const QString dir =
      QFileDialog::getExistingDirectory(this, tr("Export report into folder"), base);
  if (dir.isEmpty()) return;
  store_->set_value(QStringLiteral("dirs/report"), dir);
  exportReportTo(dir + QStringLiteral("/seedvae-report-") +
                 QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss"));
}

void MainWindow::exportVideo() {
  const RunSummary* run = nullptr;
  if (pair_ == Pair::kOriginalA)
    run = summaryFor("A");
  else if (pair_ == Pair::kAB || pair_ == Pair::kOriginalB)
    run = summaryFor("B");
  else
    run = summaryFor(running_slot_);
  if (!run && last_run_) run = &*last_run_;
  if (!run || !run->reconstruction) {
    showError(tr("Nothing to export"), tr("No finished reconstruction yet."));
    return;
  }
  const RunSummary copy = *run;
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export reconstructed video"),
      store_->value("dirs/video").toString() + "/reconstruction.mkv",
      tr("Lossless FFV1 (*.mkv);;MPEG-4 (*.mp4);;Motion JPEG (*.avi)"));
  if (path.isEmpty()) return;
  controller_->writeVideo(copy, path);
}

// ---- dialogs ----------------------------------------------------------------------------------

void MainWindow::showError(const QString& title, const QString& text) {
  last_error_ = text;
  emit errorShown(title, text);
  statusBar()->showMessage(title, 8000);
  // Window-modal but non-blocking: open(), never exec(), so no nested event loop.
  auto* box = new QMessageBox(QMessageBox::Warning, title, text, QMessageBox::Ok, this);
  box->setObjectName(QStringLiteral("errorDialog"));
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void MainWindow::showInfo(const QString& title, const QString& text) {
  auto* box = new QMessageBox(QMessageBox::Information, title, text, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void MainWindow::closeEvent(QCloseEvent* e) {
  store_->save_current(settings_panel_->settings());
  store_->set_value(QStringLiteral("window/geometry"), saveGeometry());
  store_->set_value(QStringLiteral("window/state"), saveState());
  controller_->cancel();
  e->accept();
}

}  // namespace seedvae::ui
