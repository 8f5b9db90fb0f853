// GUI-thread owner of the engine worker thread (../shared/docs/style.md rules 8-10).
//
//  * start()/startAB() post the request to the worker (queued call, value types) and return.
//  * cancel() stores into the run's CancelToken directly from the GUI thread: the worker's event
//    queue is busy with the run, so a queued cancel would arrive after the job.
//  * The worker's outputs arrive as queued signals; frames and telemetry come through bounded
//    channels drained here and re-emitted as frameAvailable / telemetryReceived.
//  * A/B: A then B on the same input, sequentially on the one engine thread, then a comparison
//    job (also on the worker) produces the AbComparison. A slot may name its own weights (a
//    request without loaded weights): the worker reads them before that slot's run and frees
//    them after it, so one slot's model is gone before the other's is read. B runs after a failed
//    A as well (each slot's error is its own); a cancel ends the whole A/B.
//  * The queue: startQueue() runs the queue file's jobs on the same worker, through the same
//    Session, as one long piece of work: the controller is busy meanwhile (no interactive run
//    starts), and cancel() stops the running job, which stays queued.
//  * Destruction: cancel, release the engine on its thread, quit(), wait().
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QThread>
#include <memory>
#include <optional>

#include "ui/backend_catalog.h"
#include "ui/channels.h"
#include "ui/report.h"
#include "ui/studio_types.h"

namespace seedvae::ui {

class EngineWorker;

class RunController : public QObject {
  Q_OBJECT

 public:
  explicit RunController(std::shared_ptr<const BackendCatalog> catalog, QObject* parent = nullptr);
  ~RunController() override;

  const BackendCatalog& catalog() const { return *catalog_; }
  std::shared_ptr<const BackendCatalog> catalogPtr() const { return catalog_; }
  bool busy() const { return busy_; }
  // True while an A/B comparison (A, B or the comparison job) is in progress.
  bool abRunning() const { return busy_ && ab_id_ != 0; }
  // True while the queue runs (startQueue).
  bool queueRunning() const { return busy_ && queue_running_; }

  // Returns the run id, or 0 when a run is already in progress.
  quint64 start(RunRequest request);
  quint64 startAB(RunRequest a, RunRequest b);
  // Runs the queued jobs of the queue file at `path` one after another (EngineWorker::runQueue).
  // False when a run or the queue is already in progress.
  bool startQueue(const QString& path);
  // Direct, lock-free: the engine sees it at its next check (between blocks, chunks and tiles).
  void cancel();
  bool cancelRequested() const;

  void probeDevices(const QString& backend);
  void writeReport(ReportJob job);
  void writeVideo(const RunSummary& run, const QString& path);

  // The newest frame store of a slot ("" for a single run, "A", "B").
  std::shared_ptr<FrameStore> store(const QString& slot) const;
  std::optional<RunSummary> lastRun(const QString& slot) const;
  std::optional<AbComparison> lastAB() const { return last_ab_; }
  QThread* workerThread() { return &thread_; }
  long long droppedFrames() const { return frames_->dropped(); }

 signals:
  void busyChanged(bool busy);
  void runStarted(quint64 id, QString slot);
  void progressChanged(seedvae::ui::ProgressUpdate update);
  void frameAvailable(seedvae::ui::FrameUpdate frame);
  void telemetryReceived(QVector<seedvae::ui::TelemetryPoint> points);
  void runFinished(seedvae::ui::RunSummary summary);
  void abFinished(seedvae::ui::AbComparison result);
  void devicesProbed(QString backend, QVector<seedvae::ui::DeviceStatus> devices);
  void reportWritten(seedvae::ui::ReportResult result);
  void videoWritten(bool ok, QString path, QString message);
  // The idle engine freed its backend and device (EngineWorker, SEEDVAE_IDLE_RELEASE_S).
  void engineReleased();
  // The queue (EngineWorker's signals of the same names). queueFinished comes after busy ends.
  void queueJobStarted(qint64 id);
  void queueProgress(seedvae::ui::ProgressUpdate update);
  void queueJobFinished(qint64 id);
  void queueFinished(qint64 ran, QString error, bool cancelled);

 private:
  void post(RunRequest request);
  void setBusy(bool busy);
  void onRunFinished(const RunSummary& summary);
  void drainFrames();
  void drainTelemetry();

  std::shared_ptr<const BackendCatalog> catalog_;
  std::shared_ptr<LatestChannel<FrameUpdate>> frames_;
  std::shared_ptr<BoundedQueue<TelemetryPoint>> telemetry_;
  QThread thread_;
  EngineWorker* worker_ = nullptr;  // lives on thread_, deleted there
  bool busy_ = false;
  quint64 next_id_ = 1;
  std::shared_ptr<CancelToken> cancel_;
  std::optional<RunRequest> pending_b_;
  std::optional<RunSummary> ab_a_;
  quint64 ab_id_ = 0;
  bool queue_running_ = false;
  QMap<QString, std::shared_ptr<FrameStore>> stores_;
  QMap<QString, RunSummary> last_runs_;
  std::optional<AbComparison> last_ab_;
};

}  // namespace seedvae::ui
