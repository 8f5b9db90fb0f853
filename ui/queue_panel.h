// The job queue in the studio: the jobs of the queue file (core/pipeline/job_queue.h, the file
// `seedvae queue` edits and runs) with their state, the running job's progress and ETA, and the
// results of finished ones; adding the current clip, settings and weights as a job, removing,
// reordering, pausing and resuming jobs, and running the queue.
//
// The file is the queue. Every edit here is one JobQueue::update (load, change, atomic write) on
// a writer thread, so edits made meanwhile by the CLI or by the runner are kept; the panel reads
// the file (a small JSON file: quick, on the GUI thread) whenever it changes (QFileSystemWatcher,
// and when the application becomes active), so it shows what another process does to the queue.
//
// Running: RunController::startQueue runs the jobs on the engine worker thread through the studio's
// one Session, like an interactive run, so the two never overlap (the controller is busy while
// either runs); Stop (or the window's Cancel) stops the running job, which stays queued and, when
// it writes into a file, resumes from its checkpoint next time.
#pragma once

#include <QThreadPool>
#include <QWidget>
#include <functional>
#include <optional>
#include <vector>

#include "core/pipeline/job_queue.h"
#include "ui/studio_types.h"

class QDialog;
class QFileSystemWatcher;
class QLabel;
class QPushButton;
class QTableWidget;
class QTimer;

namespace seedvae::ui {

class RunController;

// A queued round trip of `input` with `weights` and `settings`, as the panel's add dialog starts
// it (the output and frame range are chosen there).
QueuedJob make_queued_job(const JobInput& input, const WeightsSpec& weights,
                          const RunOptions& settings);

// How a queue run ended (RunController::queueFinished): "The queue ran 2 jobs.", the stop, or the
// runner's error.
QString queue_end_text(qint64 ran, const QString& error, bool cancelled);

class QueuePanel : public QWidget {
  Q_OBJECT

 public:
  explicit QueuePanel(RunController* controller, QWidget* parent = nullptr);
  ~QueuePanel() override;

  // The queue file: $SEEDVAE_QUEUE_FILE, else the user's data folder (JobQueue::default_path()).
  QString queueFile() const;
  // The jobs as last read from the file.
  const std::vector<QueuedJob>& jobs() const { return jobs_; }
  QTableWidget* table() const { return table_; }
  QString statusText() const;

  // Edits of the file, each one JobQueue::update on the panel's writer thread, in the order asked
  // (the update flushes the file to the disk: tens to hundreds of ms on a busy one, never the GUI
  // thread's). editFinished reports each once the panel has read the file again. What can be told
  // at once (an output that would overwrite the input, the job this studio is running) is
  // returned here, and nothing is written then.
  Status addJob(QueuedJob job);
  Status removeJob(int64_t id);
  Status moveJob(int64_t id, int delta);  // -1: up (runs earlier), +1: down
  Status pauseJob(int64_t id);
  Status resumeJob(int64_t id);
  bool editsPending() const { return pending_ > 0; }
  // Runs the queue on the engine thread; false when a run is in progress or nothing is queued.
  bool runQueue();
  void stop();
  // Re-reads the file now.
  void reload();
  // The dialog that adds `job` (input, weights and settings set) after the user has chosen its
  // output and frame range; `title` says where the job comes from. Window-modal, opened with
  // open(), never exec().
  QDialog* openAddDialog(const QueuedJob& job, const QString& title);

  void selectJob(int64_t id);
  std::optional<int64_t> selectedJob() const;

 signals:
  // "Add current…": the window answers with openAddDialog() for its clip, settings and weights.
  void addCurrentRequested();
  void jobsChanged();  // the file was read again
  // An edit was written (ok) or refused; `message` is the panel's status line, `id` the job's
  // (a new job's id).
  void editFinished(bool ok, QString message, qint64 id);

 private:
  void rebuildTable();
  void updateButtons();
  void updateStatus();
  void watchFile();
  void scheduleReload();
  // Runs `change` (given job `id`, which it may set: a new job's) on the writer thread; `done`
  // ("Removed job %1.") is the status line's message on success.
  void edit(int64_t id, std::function<Status(JobQueue&, int64_t& id)> change, const QString& done);
  void showEditResult(const Status& st, const QString& done);
  QString progressText(const QueuedJob& j) const;
  bool isOwnRunning(int64_t id) const;

  RunController* controller_;
  std::filesystem::path path_;
  std::vector<QueuedJob> jobs_;
  QString read_error_;  // why the file could not be read, empty when it could
  QString last_message_;

  QTableWidget* table_;
  QLabel* file_label_;
  QLabel* status_;
  QPushButton* add_;
  QPushButton* remove_;
  QPushButton* up_;
  QPushButton* down_;
  QPushButton* pause_;
  QPushButton* resume_;
  QPushButton* run_;
  QPushButton* stop_;
  QFileSystemWatcher* watcher_;
  QTimer* reload_timer_;
  QThreadPool writer_;
  int pending_ = 0;  // edits not written yet

  // The job this studio's queue run is running, and its latest progress.
  int64_t running_id_ = 0;
  std::optional<ProgressUpdate> live_;
};

}  // namespace seedvae::ui
