#include "ui/queue_panel.h"

#include <QApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/run_controller.h"

namespace seedvae::ui {

namespace {

enum Column { kId, kState, kJob, kSettings, kProgress, kResults, kColumns };

QString qstr(const std::string& s) {
  return QString::fromStdString(s);
}

// The input's name; a decode's latent file as "decode <name>".
QString job_input_name(const QueuedJob& j) {
  const QString name = input_display_name(j.job_input());
  return j.kind == JobKind::kDecode ? QStringLiteral("decode %1").arg(name) : name;
}

// "frames 10–58, stride 2" (empty for the whole clip).
QString frame_range_text(const QueuedJob& j) {
  QString range;
  if (j.first_frame > 0 || j.max_frames >= 0) {
    range = j.max_frames >= 0 ? QStringLiteral("frames %1–%2")
                                    .arg(j.first_frame)
                                    .arg(j.first_frame + (j.max_frames - 1) * std::max(1, j.stride))
                              : QStringLiteral("frames %1 to the end").arg(j.first_frame);
  }
  if (j.stride > 1) {
    if (!range.isEmpty()) range += QStringLiteral(", ");
    range += QStringLiteral("stride %1").arg(j.stride);
  }
  return range;
}

QString weights_name(const std::string& weights) {
  if (weights.empty()) return QStringLiteral("the built-in model");
  return weights_spec_from_queue(weights).display_name();
}

// The checkpoint's whole path, or the built-in weights' name.
QString weights_detail(const std::string& weights) {
  const WeightsSpec spec = weights_spec_from_queue(weights);
  return weights.empty() || spec.is_builtin() ? weights_name(weights) : spec.path;
}

QString results_text(const QueuedJob& j) {
  if (j.state != QueueState::kDone) return qstr(j.message);
  QString text = QStringLiteral("%1 frames · %2 ms/frame · %3 · peak %4")
                     .arg(j.frames)
                     .arg(j.ms_per_frame, 0, 'f', 1)
                     .arg(format_seconds(j.seconds))
                     .arg(format_bytes(j.peak_bytes));
  if (j.psnr_db > 0) {
    text +=
        QStringLiteral(" · PSNR %1 dB · SSIM %2").arg(j.psnr_db, 0, 'f', 2).arg(j.ssim, 0, 'f', 4);
  }
  if (j.resumed_at_frame > 0)
    text += QStringLiteral(" · resumed at frame %1").arg(j.resumed_at_frame);
  if (!j.message.empty()) text += QStringLiteral(" (%1)").arg(qstr(j.message));
  return text;
}

// A suggestion for the output next to the input: "<dir>/<name>_seedvae.mkv", numbered when taken.
QString suggested_output(const QueuedJob& j) {
  if (j.input.empty()) return {};
  const QFileInfo in(from_fs_path(j.input));
  // A frame directory or pattern ("frames/%05d.png"): named after its folder, beside it.
  const bool folder = in.isDir() || in.fileName().contains(QLatin1Char('%'));
  const QFileInfo base = folder && !in.isDir() ? QFileInfo(in.path()) : in;
  const QString dir = base.absolutePath();
  const QString stem = folder ? base.fileName() : base.completeBaseName();
  QString path = QDir(dir).filePath(stem + QStringLiteral("_seedvae.mkv"));
  for (int n = 2; QFileInfo::exists(path) && n < 1000; ++n) {
    path = QDir(dir).filePath(QStringLiteral("%1_seedvae-%2.mkv").arg(stem).arg(n));
  }
  return path;
}

}  // namespace

QString queue_end_text(qint64 ran, const QString& error, bool cancelled) {
  if (!error.isEmpty()) return QueuePanel::tr("The queue stopped: %1").arg(error);
  if (cancelled) return QueuePanel::tr("Stopped: the running job stays queued.");
  return ran == 1 ? QueuePanel::tr("The queue ran 1 job.")
                  : QueuePanel::tr("The queue ran %1 jobs.").arg(ran);
}

QueuedJob make_queued_job(const JobInput& input, const WeightsSpec& weights,
                          const RunOptions& settings) {
  QueuedJob j;
  std::error_code ec;
  if (!input.is_sample()) j.input = std::filesystem::absolute(input.path, ec).string();
  j.weights = queue_weights(weights);
  j.options = settings;
  j.first_frame = input.first_frame;
  j.max_frames = input.max_frames;
  j.stride = input.stride;
  j.resize_width = input.resize_width;
  j.resize_height = input.resize_height;
  j.sample_width = input.sample_width;
  j.sample_height = input.sample_height;
  j.sample_frames = input.sample_frames;
  return j;
}

QueuePanel::QueuePanel(RunController* controller, QWidget* parent)
    : QWidget(parent), controller_(controller), path_(JobQueue::default_path()) {
  writer_.setMaxThreadCount(1);  // edits in the order asked
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(4, 4, 4, 4);
  auto* buttons = new QHBoxLayout();
  auto button = [&](const QString& name, const QString& text, const QString& tip) {
    auto* b = new QPushButton(text, this);
    b->setObjectName(name);
    b->setToolTip(tip);
    buttons->addWidget(b);
    return b;
  };
  add_ = button(QStringLiteral("queueAdd"), tr("Add current…"),
                tr("Queue a round trip of the current input with the settings panel's settings "
                   "and the loaded weights; choose its output file and frame range"));
  remove_ = button(QStringLiteral("queueRemove"), tr("Remove"), tr("Remove the selected job"));
  up_ = button(QStringLiteral("queueUp"), tr("Up"), tr("Move the selected job up (runs earlier)"));
  down_ = button(QStringLiteral("queueDown"), tr("Down"),
                 tr("Move the selected job down (runs later)"));
  pause_ = button(QStringLiteral("queuePause"), tr("Pause"),
                  tr("Keep the selected queued job from running until it is resumed"));
  resume_ = button(QStringLiteral("queueResume"), tr("Resume"),
                   tr("Queue the selected paused, failed, cancelled or finished job again"));
  buttons->addStretch(1);
  run_ = button(QStringLiteral("queueRun"), tr("Run queue"),
                tr("Run the queued jobs one after another on the engine thread (interactive runs "
                   "wait until the queue ends)"));
  stop_ = button(QStringLiteral("queueStop"), tr("Stop"),
                 tr("Stop the running job; it stays queued and, when it writes a file, resumes "
                    "from its checkpoint when the queue runs again"));
  root->addLayout(buttons);

  table_ = new QTableWidget(0, kColumns, this);
  table_->setObjectName(QStringLiteral("queueTable"));
  table_->setHorizontalHeaderLabels(
      {tr("#"), tr("State"), tr("Job"), tr("Settings"), tr("Progress"), tr("Results")});
  table_->verticalHeader()->hide();
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setWordWrap(false);
  QHeaderView* header = table_->horizontalHeader();
  header->setSectionResizeMode(QHeaderView::Interactive);
  header->setSectionResizeMode(kId, QHeaderView::ResizeToContents);
  header->setSectionResizeMode(kState, QHeaderView::ResizeToContents);
  table_->setColumnWidth(kJob, 260);
  table_->setColumnWidth(kSettings, 200);
  table_->setColumnWidth(kProgress, 200);
  header->setStretchLastSection(true);
  root->addWidget(table_, 1);

  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("queueStatus"));
  status_->setWordWrap(true);
  file_label_ = new QLabel(this);
  file_label_->setObjectName(QStringLiteral("queueFile"));
  file_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  file_label_->setText(tr("File: %1").arg(QDir::toNativeSeparators(queueFile())));
  file_label_->setToolTip(
      tr("The queue file, shared with `seedvae queue` ($SEEDVAE_QUEUE_FILE overrides it)"));
  auto* bottom = new QHBoxLayout();
  bottom->addWidget(status_, 1);
  bottom->addWidget(file_label_);
  root->addLayout(bottom);

  connect(add_, &QPushButton::clicked, this, &QueuePanel::addCurrentRequested);
  connect(remove_, &QPushButton::clicked, this, [this] {
    if (auto id = selectedJob()) (void)removeJob(*id);
  });
  auto move_by = [this](int delta) {
    if (auto id = selectedJob()) (void)moveJob(*id, delta);
  };
  connect(up_, &QPushButton::clicked, this, [move_by] { move_by(-1); });
  connect(down_, &QPushButton::clicked, this, [move_by] { move_by(+1); });
  connect(pause_, &QPushButton::clicked, this, [this] {
    if (auto id = selectedJob()) (void)pauseJob(*id);
  });
  connect(resume_, &QPushButton::clicked, this, [this] {
    if (auto id = selectedJob()) (void)resumeJob(*id);
  });
  connect(run_, &QPushButton::clicked, this, &QueuePanel::runQueue);
  connect(stop_, &QPushButton::clicked, this, &QueuePanel::stop);
  connect(table_, &QTableWidget::itemSelectionChanged, this, &QueuePanel::updateButtons);

  // Another process (the CLI) edits or runs the queue: the file changes. Its atomic writes
  // replace the file, which drops it from the watch, so the folder is watched too and the file
  // watched again after every read; a burst of changes is read once.
  watcher_ = new QFileSystemWatcher(this);
  reload_timer_ = new QTimer(this);
  reload_timer_->setSingleShot(true);
  reload_timer_->setInterval(150);
  connect(reload_timer_, &QTimer::timeout, this, &QueuePanel::reload);
  connect(watcher_, &QFileSystemWatcher::fileChanged, this, &QueuePanel::scheduleReload);
  connect(watcher_, &QFileSystemWatcher::directoryChanged, this, &QueuePanel::scheduleReload);
  // Where the watch is missing (a folder made later, a network file system): on returning to
  // the studio.
  connect(qApp, &QGuiApplication::applicationStateChanged, this, [this](Qt::ApplicationState s) {
    if (s == Qt::ApplicationActive) scheduleReload();
  });

  // The studio's own queue run.
  connect(controller_, &RunController::busyChanged, this, [this] {
    updateButtons();
    updateStatus();
  });
  connect(controller_, &RunController::queueJobStarted, this, [this](qint64 id) {
    running_id_ = id;
    live_.reset();
    reload();
  });
  connect(controller_, &RunController::queueProgress, this, [this](const ProgressUpdate& u) {
    if (static_cast<int64_t>(u.run_id) != running_id_) return;
    live_ = u;
    for (int row = 0; row < table_->rowCount(); ++row) {
      if (table_->item(row, kId)->data(Qt::UserRole).toLongLong() != running_id_) continue;
      if (auto* bar = qobject_cast<QProgressBar*>(table_->cellWidget(row, kProgress))) {
        bar->setValue(static_cast<int>(u.fraction * 1000));
        bar->setFormat(progressText(jobs_[static_cast<size_t>(row)]));
      }
    }
  });
  connect(controller_, &RunController::queueJobFinished, this, [this](qint64) {
    running_id_ = 0;
    live_.reset();
    reload();
  });
  connect(controller_, &RunController::queueFinished, this,
          [this](qint64 ran, const QString& error, bool cancelled) {
            running_id_ = 0;
            live_.reset();
            last_message_ = queue_end_text(ran, error, cancelled);
            reload();
          });
  reload();
}

QueuePanel::~QueuePanel() {
  writer_.waitForDone();  // the edits asked for are written
}

QString QueuePanel::queueFile() const {
  return from_fs_path(path_);
}

QString QueuePanel::statusText() const {
  return status_->text();
}

void QueuePanel::scheduleReload() {
  reload_timer_->start();
}

void QueuePanel::watchFile() {
  const QString file = queueFile();
  const QString dir = QFileInfo(file).absolutePath();
  if (QFileInfo::exists(file) && !watcher_->files().contains(file)) watcher_->addPath(file);
  if (QFileInfo(dir).isDir() && !watcher_->directories().contains(dir)) watcher_->addPath(dir);
}

void QueuePanel::reload() {
  reload_timer_->stop();
  auto q = JobQueue::load(path_);
  if (q) {
    jobs_ = q->jobs();
    read_error_.clear();
  } else {
    jobs_.clear();  // nothing to act on: every edit would fail the same way
    read_error_ = qstr(q.status().to_string());
  }
  watchFile();
  rebuildTable();
  updateButtons();
  updateStatus();
  emit jobsChanged();
}

bool QueuePanel::isOwnRunning(int64_t id) const {
  return id != 0 && id == running_id_ && controller_->queueRunning();
}

QString QueuePanel::progressText(const QueuedJob& j) const {
  if (isOwnRunning(j.id) && live_) {
    QString text = live_->stage;
    if (live_->total > 1) text += QStringLiteral(" %1/%2").arg(live_->done).arg(live_->total);
    text += QStringLiteral(" · %1 %").arg(qRound(live_->fraction * 100));
    if (live_->eta_s >= 0 && live_->fraction < 1) {
      text += tr(" · ETA %1").arg(format_seconds(live_->eta_s));
    }
    return text;
  }
  if (isOwnRunning(j.id)) return tr("starting");
  // Run by another process (`seedvae queue run`): what it last wrote, the phase and the job's
  // progress.
  if (j.phase.empty()) return {};
  QString text = QStringLiteral("%1 %2 %").arg(qstr(j.phase)).arg(qRound(j.progress * 100));
  if (j.eta_s >= 0) text += tr(" · ETA %1").arg(format_seconds(j.eta_s));
  return text;
}

void QueuePanel::rebuildTable() {
  const std::optional<int64_t> selected = selectedJob();
  const int scrolled = table_->verticalScrollBar()->value();  // a runner rewrites it every 2 s
  const QSignalBlocker block(table_);
  table_->setRowCount(0);  // also deletes the progress bars
  table_->setRowCount(static_cast<int>(jobs_.size()));
  for (int row = 0; row < static_cast<int>(jobs_.size()); ++row) {
    const QueuedJob& j = jobs_[static_cast<size_t>(row)];
    const bool running = isOwnRunning(j.id);
    auto* id = new QTableWidgetItem(QString::number(j.id));
    id->setData(Qt::UserRole, QVariant::fromValue<qlonglong>(j.id));
    table_->setItem(row, kId, id);
    auto* state = new QTableWidgetItem(running ? QStringLiteral("running")
                                               : qstr(std::string(queue_state_name(j.state))));
    state->setToolTip(qstr(j.message));
    if (j.state == QueueState::kFailed) state->setForeground(QColor(0xc0, 0x39, 0x2b));
    table_->setItem(row, kState, state);

    const QString range = frame_range_text(j);
    const QString output = j.output.empty()
                               ? tr("no output")
                               : from_fs_path(std::filesystem::path(j.output).filename());
    auto* job = new QTableWidgetItem(
        QStringLiteral("%1%2 → %3")
            .arg(job_input_name(j),
                 range.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(range), output));
    job->setToolTip(
        tr("Input: %1\nOutput: %2\nWeights: %3")
            .arg(j.input.empty() ? job_input_name(j) : from_fs_path(j.input),
                 j.output.empty() ? tr("none (the job measures only)") : from_fs_path(j.output),
                 weights_detail(j.weights)));
    table_->setItem(row, kJob, job);
    auto* settings = new QTableWidgetItem(settings_summary(j.options));
    settings->setToolTip(settings_summary(j.options));
    table_->setItem(row, kSettings, settings);

    const QString progress = progressText(j);
    if (running) {
      auto* bar = new QProgressBar(table_);
      bar->setRange(0, 1000);
      bar->setValue(live_ ? static_cast<int>(live_->fraction * 1000) : 0);
      bar->setFormat(progress);
      bar->setTextVisible(true);
      table_->setCellWidget(row, kProgress, bar);
    }
    table_->setItem(row, kProgress, new QTableWidgetItem(running ? QString() : progress));
    // While it runs, the file's message is what a load or a stop noted earlier, not this run's.
    auto* results = new QTableWidgetItem(running ? QString() : results_text(j));
    results->setToolTip(results->text());
    table_->setItem(row, kResults, results);
    if (selected && *selected == j.id) table_->selectRow(row);
  }
  table_->verticalScrollBar()->setValue(scrolled);
}

std::optional<int64_t> QueuePanel::selectedJob() const {
  const QList<QTableWidgetItem*> items = table_->selectedItems();
  if (items.isEmpty()) return std::nullopt;
  const QTableWidgetItem* id = table_->item(items.first()->row(), kId);
  if (!id) return std::nullopt;
  return id->data(Qt::UserRole).toLongLong();
}

void QueuePanel::selectJob(int64_t id) {
  for (int row = 0; row < table_->rowCount(); ++row) {
    if (table_->item(row, kId)->data(Qt::UserRole).toLongLong() == id) {
      table_->selectRow(row);
      return;
    }
  }
  table_->clearSelection();
}

void QueuePanel::updateButtons() {
  const auto id = selectedJob();
  const auto it =
      id ? std::find_if(jobs_.begin(), jobs_.end(), [&](const QueuedJob& j) { return j.id == *id; })
         : jobs_.end();
  const QueuedJob* j = it == jobs_.end() ? nullptr : &*it;
  const auto index = j ? it - jobs_.begin() : -1;
  const bool own = j && isOwnRunning(j->id);
  remove_->setEnabled(j && !own);
  up_->setEnabled(j && index > 0);
  down_->setEnabled(j && index + 1 < std::ssize(jobs_));
  pause_->setEnabled(j && !own && j->state == QueueState::kQueued);
  resume_->setEnabled(j && !own && j->state != QueueState::kQueued &&
                      j->state != QueueState::kRunning);
  const bool queued = std::any_of(jobs_.begin(), jobs_.end(), [](const QueuedJob& q) {
    return q.state == QueueState::kQueued;
  });
  run_->setEnabled(!controller_->busy() && queued);
  stop_->setEnabled(controller_->queueRunning() && !controller_->cancelRequested());
}

void QueuePanel::updateStatus() {
  QString text;
  if (!read_error_.isEmpty()) {
    text = tr("Cannot read the queue: %1").arg(read_error_);
  } else {
    int counts[6] = {};
    for (const QueuedJob& j : jobs_) {
      ++counts[static_cast<int>(isOwnRunning(j.id) ? QueueState::kRunning : j.state)];
    }
    QStringList parts;
    for (QueueState s : {QueueState::kRunning, QueueState::kQueued, QueueState::kPaused,
                         QueueState::kDone, QueueState::kFailed, QueueState::kCancelled}) {
      if (counts[static_cast<int>(s)] > 0) {
        parts << QStringLiteral("%1 %2")
                     .arg(counts[static_cast<int>(s)])
                     .arg(qstr(std::string(queue_state_name(s))));
      }
    }
    text = jobs_.empty() ? tr("The queue is empty: Add current… queues the clip you see.")
                         : parts.join(QStringLiteral(" · "));
    if (controller_->queueRunning()) {
      text = tr("Running the queue: %1").arg(text);
    } else if (controller_->busy()) {
      text += tr(". A run is in progress: the queue can run when it ends.");
    }
  }
  if (!last_message_.isEmpty()) text += QStringLiteral(" — ") + last_message_;
  status_->setText(text);
}

void QueuePanel::showEditResult(const Status& st, const QString& done) {
  last_message_ = st.is_ok() ? done : tr("Not done: %1").arg(qstr(st.to_string()));
  updateStatus();
}

void QueuePanel::edit(int64_t id, std::function<Status(JobQueue&, int64_t& id)> change,
                      const QString& done) {
  ++pending_;
  writer_.start([this, path = path_, id, change = std::move(change), done] {
    int64_t edited = id;
    Status st;
    try {
      st = JobQueue::update(path, [&](JobQueue& q) { return change(q, edited); });
    } catch (const std::exception& e) {
      st = internal_error(std::string("unexpected exception: ") + e.what());
    }
    QMetaObject::invokeMethod(
        this,
        [this, st, edited, done] {
          --pending_;
          reload();
          if (st.is_ok()) selectJob(edited);
          showEditResult(st, done.arg(edited));
          emit editFinished(st.is_ok(), statusText(), edited);
        },
        Qt::QueuedConnection);
  });
}

Status QueuePanel::addJob(QueuedJob job) {
  // The job's checks now (the CLI's `queue add` makes the same), so that a job that cannot run
  // fails when added, not when its turn comes.
  if (const Status st = check_queued_job(job); !st.is_ok()) {
    showEditResult(st, {});
    return st;
  }
  edit(
      0,
      [job = std::move(job)](JobQueue& q, int64_t& id) {
        id = q.add(job);
        return Status::ok();
      },
      tr("Added job %1."));
  return Status::ok();
}

Status QueuePanel::removeJob(int64_t id) {
  if (isOwnRunning(id)) {
    const Status st = invalid_argument("job " + std::to_string(id) + " is running: stop it first");
    showEditResult(st, {});
    return st;
  }
  edit(
      id, [](JobQueue& q, int64_t& j) { return q.remove(j); }, tr("Removed job %1."));
  return Status::ok();
}

Status QueuePanel::moveJob(int64_t id, int delta) {
  // Relative to where the job is in the file at the time of the edit, so that two quick clicks
  // move it twice.
  edit(
      id,
      [delta](JobQueue& q, int64_t& j) {
        const auto& jobs = q.jobs();
        const auto it =
            std::find_if(jobs.begin(), jobs.end(), [&](const QueuedJob& x) { return x.id == j; });
        return q.move(j, std::max<int64_t>(0, (it - jobs.begin()) + delta));
      },
      tr("Moved job %1."));
  return Status::ok();
}

Status QueuePanel::pauseJob(int64_t id) {
  if (isOwnRunning(id)) {
    const Status st = invalid_argument("job " + std::to_string(id) +
                                       " is running: Stop keeps it queued, then pause it");
    showEditResult(st, {});
    return st;
  }
  edit(
      id, [](JobQueue& q, int64_t& j) { return q.pause(j); }, tr("Paused job %1."));
  return Status::ok();
}

Status QueuePanel::resumeJob(int64_t id) {
  edit(
      id, [](JobQueue& q, int64_t& j) { return q.resume(j); }, tr("Queued job %1 again."));
  return Status::ok();
}

bool QueuePanel::runQueue() {
  reload();
  if (controller_->busy()) return false;
  if (std::none_of(jobs_.begin(), jobs_.end(),
                   [](const QueuedJob& j) { return j.state == QueueState::kQueued; })) {
    last_message_ = tr("Nothing is queued.");
    updateStatus();
    return false;
  }
  running_id_ = 0;
  live_.reset();
  last_message_.clear();
  if (!controller_->startQueue(queueFile())) return false;
  updateButtons();
  updateStatus();
  return true;
}

void QueuePanel::stop() {
  if (!controller_->queueRunning()) return;
  controller_->cancel();  // the running job stops at its next check and stays queued
  last_message_ = tr("Stopping…");
  updateButtons();
  updateStatus();
}

QDialog* QueuePanel::openAddDialog(const QueuedJob& proto, const QString& title) {
  auto* dialog = new QDialog(this);
  dialog->setObjectName(QStringLiteral("queueAddDialog"));
  dialog->setWindowTitle(title);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  auto* form = new QFormLayout(dialog);
  auto* input = new QLabel(job_input_name(proto), dialog);
  input->setToolTip(proto.input.empty() ? QString() : from_fs_path(proto.input));
  form->addRow(tr("Input:"), input);
  form->addRow(tr("Weights:"), new QLabel(weights_name(proto.weights), dialog));
  auto* settings = new QLabel(settings_summary(proto.options), dialog);
  settings->setWordWrap(true);
  form->addRow(tr("Settings:"), settings);

  auto* first = new QSpinBox(dialog);
  first->setObjectName(QStringLiteral("queueFirst"));
  first->setRange(0, 100'000'000);
  first->setValue(static_cast<int>(std::clamp<int64_t>(proto.first_frame, 0, 100'000'000)));
  auto* count = new QSpinBox(dialog);
  count->setObjectName(QStringLiteral("queueCount"));
  count->setRange(0, 100'000'000);
  count->setSpecialValueText(tr("all (to the end)"));
  count->setValue(static_cast<int>(std::clamp<int64_t>(proto.max_frames, 0, 100'000'000)));
  auto* stride = new QSpinBox(dialog);
  stride->setObjectName(QStringLiteral("queueStride"));
  stride->setRange(1, 1000);
  stride->setValue(std::max(1, proto.stride));
  auto* range = new QHBoxLayout();
  range->addWidget(new QLabel(tr("first"), dialog));
  range->addWidget(first);
  range->addWidget(new QLabel(tr("count"), dialog));
  range->addWidget(count);
  range->addWidget(new QLabel(tr("every"), dialog));
  range->addWidget(stride);
  form->addRow(tr("Frames:"), range);

  auto* output = new QLineEdit(suggested_output(proto), dialog);
  output->setObjectName(QStringLiteral("queueOutput"));
  output->setPlaceholderText(tr("none: the job only measures (time, memory, PSNR)"));
  output->setMinimumWidth(360);
  auto* browse = new QPushButton(tr("Browse…"), dialog);
  connect(browse, &QPushButton::clicked, dialog, [dialog, output] {
    const QString start =
        output->text().isEmpty() ? QDir::homePath() : QFileInfo(output->text()).absolutePath();
    auto* files = new QFileDialog(dialog, tr("Output of the job"), start,
                                  tr("Videos (*.mkv *.mp4 *.mov *.avi);;All files (*)"));
    files->setAcceptMode(QFileDialog::AcceptSave);
    files->setAttribute(Qt::WA_DeleteOnClose);
    connect(files, &QFileDialog::fileSelected, output, &QLineEdit::setText);
    files->open();
  });
  auto* out_row = new QHBoxLayout();
  out_row->addWidget(output, 1);
  out_row->addWidget(browse);
  form->addRow(tr("Output:"), out_row);

  auto* error = new QLabel(dialog);
  error->setObjectName(QStringLiteral("queueAddError"));
  error->setWordWrap(true);
  error->setStyleSheet(QStringLiteral("color: #c0392b"));
  error->hide();
  form->addRow(error);
  auto* box = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, dialog);
  box->button(QDialogButtonBox::Ok)->setText(tr("Add to queue"));
  form->addRow(box);
  connect(box, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
  connect(box, &QDialogButtonBox::accepted, dialog, [=, this] {
    QueuedJob job = proto;
    job.first_frame = first->value();
    job.max_frames = count->value() == 0 ? -1 : count->value();
    job.stride = stride->value();
    job.output.clear();
    if (const QString out = output->text().trimmed(); !out.isEmpty()) {
      std::error_code ec;  // (absolute() keeps a frame folder's trailing separator)
      job.output = std::filesystem::absolute(to_fs_path(out), ec).string();
    }
    if (const Status st = addJob(std::move(job)); !st.is_ok()) {
      error->setText(qstr(st.to_string()));  // the dialog stays open with the reason
      error->show();
      return;
    }
    dialog->accept();
  });
  dialog->open();
  return dialog;
}

}  // namespace seedvae::ui
