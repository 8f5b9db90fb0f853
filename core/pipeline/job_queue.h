// The job queue: round trips (input, weights, settings, output, frame range) and decodes (a
// latent file, weights, settings, output) kept in a JSON file in the user's data folder, run one
// after another through Session::run by `seedvae queue run` (and read and edited by `seedvae queue
// add|list|remove|move|pause|resume`).
//
// The file is the queue: every change loads it, changes it and writes it back atomically
// (JobQueue::update), so a runner and a second command editing the queue meanwhile (adding,
// reordering, pausing queued jobs) both keep their changes; a runner re-reads it before every
// job. A job that fails is marked failed with its message and the next one runs. A job stopped
// by a cancel, or by the end of the process (a job found "running" on loading), is queued again:
// a round trip or decode into a video or frame directory resumes from its checkpoint (job.h,
// resumable()).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/base/cancel.h"
#include "core/base/progress.h"
#include "core/base/status.h"
#include "core/pipeline/job.h"
#include "core/pipeline/run_options.h"

namespace seedvae {

enum class QueueState { kQueued, kRunning, kPaused, kDone, kFailed, kCancelled };
std::string_view queue_state_name(QueueState s);  // "queued", "running", ...

struct QueuedJob {
  int64_t id = 0;
  JobKind kind = JobKind::kRoundTrip;  // a round trip or a decode (no encode)
  // A round trip's video, image directory or pattern (empty: the built-in sample clip); a
  // decode's latent file (as `seedvae encode` writes it).
  std::string input;
  std::string weights;  // a checkpoint file, or "synthetic:<name>" (synthetic_weight_names())
  RunOptions options;   // the settings (a preset's, to_json / run_options_from_json)
  std::string output;   // the reconstruction (video or frame directory); empty: none written
  int64_t first_frame = 0, max_frames = -1;
  int stride = 1;
  int resize_width = 0, resize_height = 0;                          // 0: as read
  int sample_width = 256, sample_height = 256, sample_frames = 17;  // the sample clip's
  QueueState state = QueueState::kQueued;
  std::string message;  // why it failed or stopped; a resumable job's checkpoint
  // While running: the phase, the job's progress, and the estimated seconds left (-1: unknown).
  std::string phase;
  double progress = 0;  // 0..1 of the whole job (JobProgress)
  double eta_s = -1;
  // Results (done): time, time per frame, the backend's peak, the reconstruction's quality.
  int64_t frames = 0;
  double seconds = 0, ms_per_frame = 0, psnr_db = 0, ssim = 0;
  int64_t peak_bytes = 0;
  int64_t resumed_at_frame = 0;  // the last run continued a checkpoint at this frame

  JobInput job_input() const;  // a round trip's
  // The job to run: a decode's latent read from its file.
  Result<JobSpec> job_spec(std::shared_ptr<const VaeWeights> weights) const;
};

// "roundtrip", "decode" (the queue file's and the CLI's names).
std::string_view queued_kind_name(JobKind kind);

// What a job is checked for when it is added, so that one that cannot run fails then, not when
// its turn comes: a decode's latent file holds a latent; the output passes check_output_against
// (not the input, the latent or the weights; a form the job writes).
Status check_queued_job(const QueuedJob& job);

class JobQueue {
 public:
  // $SEEDVAE_QUEUE_FILE, else $XDG_DATA_HOME/seedvae/queue.json, else
  // ~/.local/share/seedvae/queue.json (%APPDATA%\seedvae\queue.json on Windows).
  static std::filesystem::path default_path();
  // A missing file is an empty queue. A job marked running stays so while a runner holds the
  // queue's runner lock (runner_lock_path); otherwise its runner ended and it is queued again.
  static Result<JobQueue> load(const std::filesystem::path& path);
  // Loads, applies `change`, writes back atomically (the parent folder is created).
  static Status update(const std::filesystem::path& path,
                       const std::function<Status(JobQueue&)>& change);
  Status save() const;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<QueuedJob>& jobs() const { return jobs_; }
  QueuedJob* find(int64_t id);
  // Appends the job with a new id (returned); its state is queued.
  int64_t add(QueuedJob job);
  // kNotFound for an unknown id; kInvalidArgument for a running job (stop the runner first).
  Status remove(int64_t id);
  Status move(int64_t id, int64_t position);  // 0 = first; clamped to the end
  Status pause(int64_t id);                   // a queued job is skipped until resumed
  Status resume(int64_t id);                  // paused, failed or cancelled -> queued
  // The first queued job.
  QueuedJob* next_queued();
  // Every job marked running queued again, "interrupted" (a runner starting: none runs).
  void requeue_interrupted();

 private:
  std::filesystem::path path_;
  std::vector<QueuedJob> jobs_;
  int64_t next_id_ = 1;
};

struct QueueRunHooks {
  // The weights a job names (the CLI's rules: a file, synthetic, the demo model).
  std::function<Result<std::shared_ptr<const VaeWeights>>(const std::string& weights)> load_weights;
  const CancelToken* cancel = nullptr;  // stops the running job (it stays queued) and the run
  ProgressSink* progress = nullptr;     // the running job's progress, besides the file's
  // Each job as it starts and ends (after its state and results are in the file).
  std::function<void(const QueuedJob&)> on_start, on_end;
  double save_interval_s = 2.0;  // how often a running job's progress is written to the file
};

// "<queue>.runner.lock": held by the queue's runner while it runs (core/base/file_lock.h).
std::filesystem::path runner_lock_path(const std::filesystem::path& queue);

// Runs the queued jobs of the file at `path` one after another in `session`, until none is
// queued or the cancel is requested (then kCancelled; the stopped job is queued again). A failed
// job does not stop the run. One runner per queue: it holds the runner lock, and a second
// runner (another process, or the studio beside the CLI) is refused (kInvalidArgument). Returns
// how many jobs ran.
Result<int64_t> run_queue(const std::filesystem::path& path, Session& session,
                          const QueueRunHooks& hooks);

}  // namespace seedvae
