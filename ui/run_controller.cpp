#include "ui/run_controller.h"

#include "ui/engine_worker.h"

namespace seedvae::ui {

RunController::RunController(std::shared_ptr<const BackendCatalog> catalog, QObject* parent)
    : QObject(parent),
      catalog_(std::move(catalog)),
      frames_(std::make_shared<LatestChannel<FrameUpdate>>()),
      telemetry_(std::make_shared<BoundedQueue<TelemetryPoint>>(16384)) {
  register_studio_types();
  thread_.setObjectName(QStringLiteral("seedvae-engine"));
  worker_ = new EngineWorker(catalog_, frames_, telemetry_);
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  // Worker -> controller: queued (different threads), value types only.
  connect(worker_, &EngineWorker::runStarted, this, &RunController::runStarted);
  connect(worker_, &EngineWorker::progress, this, &RunController::progressChanged);
  connect(worker_, &EngineWorker::framesReady, this, &RunController::drainFrames);
  connect(worker_, &EngineWorker::telemetryReady, this, &RunController::drainTelemetry);
  connect(worker_, &EngineWorker::runFinished, this, &RunController::onRunFinished);
  connect(worker_, &EngineWorker::devicesProbed, this, &RunController::devicesProbed);
  connect(worker_, &EngineWorker::reportWritten, this, &RunController::reportWritten);
  connect(worker_, &EngineWorker::videoWritten, this, &RunController::videoWritten);
  connect(worker_, &EngineWorker::released, this, &RunController::engineReleased);
  connect(worker_, &EngineWorker::queueJobStarted, this, &RunController::queueJobStarted);
  connect(worker_, &EngineWorker::queueProgress, this, &RunController::queueProgress);
  connect(worker_, &EngineWorker::queueJobFinished, this, &RunController::queueJobFinished);
  connect(worker_, &EngineWorker::queueFinished, this,
          [this](qint64 ran, const QString& error, bool cancelled) {
            queue_running_ = false;
            setBusy(false);
            emit queueFinished(ran, error, cancelled);
          });
  connect(worker_, &EngineWorker::compared, this, [this](quint64 id, const AbComparison& ab) {
    if (id != ab_id_) return;
    last_ab_ = ab;
    ab_a_.reset();
    setBusy(false);
    emit abFinished(ab);
  });
  thread_.start();
}

RunController::~RunController() {
  if (cancel_) cancel_->request();
  pending_b_.reset();
  // Free the model and the backend on the thread that created them, then stop the thread.
  QMetaObject::invokeMethod(
      worker_, [w = worker_] { w->release(); }, Qt::QueuedConnection);
  thread_.quit();
  thread_.wait();
}

void RunController::setBusy(bool busy) {
  if (busy_ == busy) return;
  busy_ = busy;
  emit busyChanged(busy);
}

void RunController::post(RunRequest r) {
  if (!r.store) r.store = std::make_shared<FrameStore>();
  stores_[r.slot] = r.store;
  QMetaObject::invokeMethod(
      worker_, [w = worker_, r = std::move(r)] { w->run(r); }, Qt::QueuedConnection);
}

quint64 RunController::start(RunRequest r) {
  if (busy_) return 0;
  cancel_ = std::make_shared<CancelToken>();
  r.id = next_id_++;
  r.cancel = cancel_;
  ab_id_ = 0;
  const quint64 id = r.id;
  setBusy(true);
  post(std::move(r));
  return id;
}

quint64 RunController::startAB(RunRequest a, RunRequest b) {
  if (busy_) return 0;
  cancel_ = std::make_shared<CancelToken>();
  a.id = next_id_++;
  b.id = next_id_++;
  a.slot = QStringLiteral("A");
  b.slot = QStringLiteral("B");
  b.input = a.input;  // the same input by construction
  a.cancel = b.cancel = cancel_;
  // Both slots on the same weights of their own: read once, kept from A to B.
  a.keep_weights = !a.weights && !b.weights && same_weights(a.weights_spec, b.weights_spec);
  b.keep_weights = false;
  ab_id_ = a.id;
  ab_a_.reset();
  pending_b_ = std::move(b);
  setBusy(true);
  post(std::move(a));
  return ab_id_;
}

bool RunController::startQueue(const QString& path) {
  if (busy_) return false;
  cancel_ = std::make_shared<CancelToken>();
  ab_id_ = 0;
  queue_running_ = true;
  setBusy(true);
  QMetaObject::invokeMethod(
      worker_, [w = worker_, path, cancel = cancel_] { w->runQueue(path, cancel); },
      Qt::QueuedConnection);
  return true;
}

void RunController::cancel() {
  if (cancel_) cancel_->request();
  pending_b_.reset();
}

bool RunController::cancelRequested() const {
  return cancel_ && cancel_->requested();
}

void RunController::onRunFinished(const RunSummary& s) {
  drainFrames();  // deliver the last frame before the completion
  drainTelemetry();
  last_runs_[s.slot] = s;
  emit runFinished(s);
  if (ab_id_ != 0 && s.slot == QLatin1String("A")) {
    ab_a_ = s;
    // B runs after a failed A too (options A's family refuses, weights that do not load): the
    // table then shows A's error beside B's result. Only a cancel stops the A/B here.
    if (pending_b_ && !s.cancelled && !cancelRequested()) {
      RunRequest b = std::move(*pending_b_);
      pending_b_.reset();
      post(std::move(b));
      return;
    }
    pending_b_.reset();
    // A kept its own weights for B, which does not come.
    QMetaObject::invokeMethod(
        worker_, [w = worker_] { w->releaseSlotWeights(); }, Qt::QueuedConnection);
    AbComparison ab;
    ab.a = s;
    // A ended but the A/B was cancelled before B started: cancelled, not a failure of A.
    ab.cancelled = s.cancelled || cancelRequested();
    ab.error = s.ok || s.cancelled ? QStringLiteral("cancelled")
                                   : QStringLiteral("run A failed: ") + s.error;
    last_ab_ = ab;
    setBusy(false);
    emit abFinished(ab);
    return;
  }
  if (ab_id_ != 0 && s.slot == QLatin1String("B") && ab_a_) {
    if (!s.ok || !ab_a_->ok) {
      AbComparison ab;
      ab.a = *ab_a_;
      ab.b = s;
      ab.cancelled = s.cancelled;
      QStringList failed;
      if (!ab.a.ok) failed << QStringLiteral("run A failed: ") + ab.a.error;
      if (s.cancelled) {
        failed << QStringLiteral("B cancelled");
      } else if (!s.ok) {
        failed << QStringLiteral("run B failed: ") + s.error;
      }
      ab.error = failed.size() == 1 && s.cancelled ? QStringLiteral("cancelled")
                                                   : failed.join(QStringLiteral("; "));
      last_ab_ = ab;
      ab_a_.reset();
      setBusy(false);
      emit abFinished(ab);
      return;
    }
    QMetaObject::invokeMethod(
        worker_, [w = worker_, id = ab_id_, a = *ab_a_, b = s] { w->compare(id, a, b); },
        Qt::QueuedConnection);
    return;
  }
  setBusy(false);
}

void RunController::drainFrames() {
  if (auto f = frames_->take()) emit frameAvailable(*f);
}

void RunController::drainTelemetry() {
  QVector<TelemetryPoint> pts = telemetry_->drain();
  if (!pts.isEmpty()) emit telemetryReceived(pts);
}

void RunController::probeDevices(const QString& backend) {
  QMetaObject::invokeMethod(
      worker_, [w = worker_, backend] { w->probeDevices(backend); }, Qt::QueuedConnection);
}

void RunController::writeReport(ReportJob job) {
  auto cancel = std::make_shared<CancelToken>();
  QMetaObject::invokeMethod(
      worker_, [w = worker_, job = std::move(job), cancel] { w->writeReport(job, cancel); },
      Qt::QueuedConnection);
}

void RunController::writeVideo(const RunSummary& run, const QString& path) {
  QMetaObject::invokeMethod(
      worker_, [w = worker_, run, path] { w->writeVideo(run, path); }, Qt::QueuedConnection);
}

std::shared_ptr<FrameStore> RunController::store(const QString& slot) const {
  return stores_.value(slot);
}

std::optional<RunSummary> RunController::lastRun(const QString& slot) const {
  auto it = last_runs_.find(slot);
  if (it == last_runs_.end()) return std::nullopt;
  return *it;
}

}  // namespace seedvae::ui
