// The engine worker: a QObject living on the one thread that owns the job layer's Session (the
// backend and, with CUDA, the device, streams and handles; the model; the last clip). Every call
// into the engine happens here, and every run is a job of the job layer (core/pipeline/job.h). The
// GUI reaches it only through queued calls carrying value types (RunController), and cancels
// through the run's CancelToken directly, never through this object's event queue (which is busy
// while a run executes).
//
// Output channels (all bounded): progress signals throttled to >= 1% or >= 100 ms; decoded frames
// through a LatestChannel (a slow GUI drops frames; the run's frame spools keep them all for the
// scrubber, behind the FrameStore's bounded cache), the newest one's images made on a preview
// thread (LatestTaskThread) so neither this thread nor the GUI's converts them; telemetry through
// a BoundedQueue drained in batches. Each channel keeps at most one queued notification in flight.
#pragma once

#include <QObject>
#include <QTimer>
#include <memory>
#include <optional>

#include "core/pipeline/job.h"
#include "ui/backend_catalog.h"
#include "ui/channels.h"
#include "ui/report.h"
#include "ui/studio_types.h"

namespace seedvae::ui {

class EngineWorker : public QObject {
  Q_OBJECT

 public:
  EngineWorker(std::shared_ptr<const BackendCatalog> catalog,
               std::shared_ptr<LatestChannel<FrameUpdate>> frames,
               std::shared_ptr<BoundedQueue<TelemetryPoint>> telemetry);
  ~EngineWorker() override;

  // Slots, called through queued invocations from the controller (worker thread).
  void run(const RunRequest& request);
  void compare(quint64 id, const RunSummary& a, const RunSummary& b);
  void probeDevices(const QString& backend);
  void writeReport(const ReportJob& job, std::shared_ptr<CancelToken> cancel);
  void writeVideo(const RunSummary& run, const QString& path);
  // The queued jobs of the queue file at `path`, one after another through this thread's Session
  // (core/pipeline/job_queue.h, run_queue), until none is queued or `cancel` is requested: the
  // studio's queue runs where its interactive runs do, on the one thread that owns the engine.
  void runQueue(const QString& path, std::shared_ptr<CancelToken> cancel);
  // Frees an A/B slot's own weights kept for the next run (RunRequest::keep_weights) and the
  // model made from them: the controller calls it when that run does not come (a cancelled A/B).
  void releaseSlotWeights();
  // Frees the model and the backend (on this thread) before the thread ends.
  void release();

 signals:
  void runStarted(quint64 id, QString slot);
  void progress(seedvae::ui::ProgressUpdate update);
  void framesReady();     // the latest-frame channel has something
  void telemetryReady();  // the telemetry queue has something
  void runFinished(seedvae::ui::RunSummary summary);
  void compared(quint64 id, seedvae::ui::AbComparison result);
  void devicesProbed(QString backend, QVector<seedvae::ui::DeviceStatus> devices);
  void reportWritten(seedvae::ui::ReportResult result);
  void videoWritten(bool ok, QString path, QString message);
  void released();  // the idle worker freed the backend (and the device)
  // The queue: each job as it starts and ends (its state and results are in the file by then),
  // the running job's progress (run_id is the job's id), and the end of the queue's run (`error`
  // empty unless the runner itself failed, such as an unreadable queue file).
  void queueJobStarted(qint64 id);
  void queueProgress(seedvae::ui::ProgressUpdate update);
  void queueJobFinished(qint64 id);
  void queueFinished(qint64 ran, QString error, bool cancelled);

 private:
  Status execute(const RunRequest& request, RunSummary& summary);
  // The synthetic weights of that name (synthetic_weight_names()), made once while in use.
  Result<std::shared_ptr<const VaeWeights>> builtinWeights(const QString& name);
  // The weights a request names but does not carry (an A/B slot's own checkpoint or built-in
  // recipe), read here on the engine thread. The session's model goes first, so the engine never
  // holds two slots' models, nor a slot's model beside another slot's weights being read.
  Result<std::shared_ptr<const VaeWeights>> slotWeights(const WeightsSpec& spec);
  void busy();  // work starts: no idle release meanwhile
  void idle();  // work ended: the idle release starts counting

  std::shared_ptr<const BackendCatalog> catalog_;
  std::shared_ptr<LatestChannel<FrameUpdate>> frames_;
  std::shared_ptr<BoundedQueue<TelemetryPoint>> telemetry_;

  // Engine state, owned by this thread.
  Session session_;
  std::shared_ptr<const VaeWeights> builtin_weights_;
  QString builtin_name_;
  // An A/B slot's own weights while its run (and with keep_weights the next one) uses them.
  std::shared_ptr<const VaeWeights> slot_weights_;
  WeightsSpec slot_spec_;
  QTimer* idle_timer_ = nullptr;  // a child: it moves to the worker's thread with it
  // Seconds of idleness after a run after which the worker frees the model and the backend --
  // for CUDA the device memory and context -- so other applications get the card back; the next
  // run makes them again. SEEDVAE_IDLE_RELEASE_S overrides the 60; 0 releases right after every
  // run, a negative value never.
  double idle_release_s_ = 60;
  // The live preview's images (declared last: stopped before the state its tasks use goes).
  LatestTaskThread preview_{"seedvae-preview"};
};

}  // namespace seedvae::ui
