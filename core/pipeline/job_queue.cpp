#include "core/pipeline/job_queue.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/base/file_lock.h"
#include "core/io/output_path.h"
#include "core/io/safetensors.h"
#include "core/pipeline/job_progress.h"

namespace seedvae {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kFormat = "seedvae-queue 1";

constexpr std::pair<QueueState, std::string_view> kStates[] = {
    {QueueState::kQueued, "queued"}, {QueueState::kRunning, "running"},
    {QueueState::kPaused, "paused"}, {QueueState::kDone, "done"},
    {QueueState::kFailed, "failed"}, {QueueState::kCancelled, "cancelled"}};

std::optional<QueueState> state_from_name(std::string_view n) {
  for (const auto& [s, name] : kStates) {
    if (name == n) return s;
  }
  return std::nullopt;
}

Json to_json_job(const QueuedJob& j) {
  return Json{{"id", j.id},
              {"kind", std::string(queued_kind_name(j.kind))},
              {"input", j.input},
              {"weights", j.weights},
              {"settings", Json::parse(to_json(j.options))},
              {"output", j.output},
              {"first_frame", j.first_frame},
              {"max_frames", j.max_frames},
              {"stride", j.stride},
              {"resize", {j.resize_width, j.resize_height}},
              {"sample", {j.sample_width, j.sample_height, j.sample_frames}},
              {"state", std::string(queue_state_name(j.state))},
              {"message", j.message},
              {"phase", j.phase},
              {"progress", j.progress},
              {"eta_seconds", j.eta_s},
              {"frames", j.frames},
              {"seconds", j.seconds},
              {"ms_per_frame", j.ms_per_frame},
              {"psnr_db", j.psnr_db},
              {"ssim", j.ssim},
              {"peak_bytes", j.peak_bytes},
              {"resumed_at_frame", j.resumed_at_frame}};
}

Result<QueuedJob> from_json_job(const Json& o, const fs::path& file) {
  QueuedJob j;
  try {
    j.id = o.at("id").get<int64_t>();
    const std::string kind = o.value("kind", "roundtrip");
    if (kind == queued_kind_name(JobKind::kDecode)) {
      j.kind = JobKind::kDecode;
    } else if (kind != queued_kind_name(JobKind::kRoundTrip)) {
      return corrupt_data(file.string() + ": job " + std::to_string(j.id) +
                          " is of an unknown kind " + kind);
    }
    j.input = o.value("input", "");
    j.weights = o.value("weights", "");
    std::vector<std::string> warnings;
    j.options = run_options_from_json(o.value("settings", Json::object()).dump(), &warnings);
    j.output = o.value("output", "");
    j.first_frame = o.value("first_frame", int64_t{0});
    j.max_frames = o.value("max_frames", int64_t{-1});
    j.stride = o.value("stride", 1);
    if (auto s = o.find("resize"); s != o.end() && s->is_array() && s->size() == 2) {
      j.resize_width = (*s)[0].get<int>();
      j.resize_height = (*s)[1].get<int>();
    }
    if (auto s = o.find("sample"); s != o.end() && s->is_array() && s->size() == 3) {
      j.sample_width = (*s)[0].get<int>();
      j.sample_height = (*s)[1].get<int>();
      j.sample_frames = (*s)[2].get<int>();
    }
    const auto state = state_from_name(o.value("state", "queued"));
    if (!state)
      return corrupt_data(file.string() + ": job " + std::to_string(j.id) +
                          " has an unknown state " + o.value("state", ""));
    j.state = *state;
    j.message = o.value("message", "");
    j.phase = o.value("phase", "");
    j.progress = o.value("progress", 0.0);
    j.eta_s = o.value("eta_seconds", -1.0);
    j.frames = o.value("frames", int64_t{0});
    j.seconds = o.value("seconds", 0.0);
    j.ms_per_frame = o.value("ms_per_frame", 0.0);
    j.psnr_db = o.value("psnr_db", 0.0);
    j.ssim = o.value("ssim", 0.0);
    j.peak_bytes = o.value("peak_bytes", int64_t{0});
    j.resumed_at_frame = o.value("resumed_at_frame", int64_t{0});
  } catch (const Json::exception& e) {
    return corrupt_data(file.string() + ": a job cannot be read (" + e.what() + ")");
  }
  return j;
}

}  // namespace

std::string_view queued_kind_name(JobKind kind) {
  return kind == JobKind::kDecode ? "decode" : "roundtrip";
}

std::string_view queue_state_name(QueueState s) {
  for (const auto& [state, name] : kStates) {
    if (state == s) return name;
  }
  return "queued";
}

JobInput QueuedJob::job_input() const {
  JobInput in;
  in.path = input;
  in.first_frame = first_frame;
  in.max_frames = max_frames;
  in.stride = stride;
  in.resize_width = resize_width;
  in.resize_height = resize_height;
  in.sample_width = sample_width;
  in.sample_height = sample_height;
  in.sample_frames = sample_frames;
  return in;
}

Result<JobSpec> QueuedJob::job_spec(std::shared_ptr<const VaeWeights> w) const {
  JobSpec spec;
  spec.kind = kind;
  spec.weights = std::move(w);
  spec.options = options;
  spec.output = output;
  if (kind == JobKind::kDecode) {
    SEEDVAE_TRY(read_decode_latent(input, spec));
  } else {
    spec.input = job_input();
  }
  return spec;
}

Status check_queued_job(const QueuedJob& job) {
  if (job.kind == JobKind::kDecode) {
    if (job.input.empty()) return invalid_argument("a decode job needs a latent file");
    // the header only: a long video's latent is not read now
    SEEDVAE_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(job.input));
    auto latent = file.get("latent");
    if (!latent || latent->shape.rank() != 5) {
      return invalid_argument(job.input +
                              " holds no latent [1, C, t, h, w] (a file `seedvae encode` writes)");
    }
  } else if (job.kind != JobKind::kRoundTrip) {
    return invalid_argument("the queue runs round trips and decodes");
  }
  if (job.output.empty()) return Status::ok();
  return check_output_against(job.output, job.kind, job.job_input(), job.weights,
                              job.kind == JobKind::kDecode ? fs::path(job.input) : fs::path());
}

fs::path JobQueue::default_path() {
  if (const char* f = std::getenv("SEEDVAE_QUEUE_FILE"); f != nullptr && *f != '\0') return f;
#ifdef _WIN32
  if (const char* a = std::getenv("APPDATA"); a != nullptr && *a != '\0') {
    return fs::path(a) / "seedvae" / "queue.json";
  }
#endif
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && *x != '\0') {
    return fs::path(x) / "seedvae" / "queue.json";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : ".") / ".local" / "share" / "seedvae" / "queue.json";
}

namespace {

// A job whose runner ended while it ran: queued again (it resumes from its checkpoint, if any).
void mark_interrupted(QueuedJob& job) {
  job.state = QueueState::kQueued;
  job.phase.clear();
  job.message = "interrupted";
}

}  // namespace

void JobQueue::requeue_interrupted() {
  for (QueuedJob& j : jobs_) {
    if (j.state == QueueState::kRunning) mark_interrupted(j);
  }
}

Result<JobQueue> JobQueue::load(const fs::path& path) {
  JobQueue q;
  q.path_ = path;
  std::error_code ec;
  if (!fs::exists(path, ec)) return q;
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot read the queue " + path.string());
  const Json j = Json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kFormat ||
      !j.contains("jobs") || !j["jobs"].is_array()) {
    return corrupt_data("the queue " + path.string() + " is no seedvae queue file (" + kFormat +
                        ")");
  }
  // A job marked running is running while a runner holds the lock (run_queue).
  const bool runner_running = FileLock::is_held(runner_lock_path(path));
  for (const Json& o : j["jobs"]) {
    SEEDVAE_ASSIGN_OR_RETURN(QueuedJob job, from_json_job(o, path));
    if (job.state == QueueState::kRunning && !runner_running) {  // its runner ended meanwhile
      mark_interrupted(job);
    }
    if (job.state == QueueState::kQueued && !job.output.empty()) {
      if (auto at = checkpoint_frame(job.output)) {
        job.message = "resumes from its checkpoint at frame " + std::to_string(*at);
      }
    }
    q.next_id_ = std::max(q.next_id_, job.id + 1);
    q.jobs_.push_back(std::move(job));
  }
  q.next_id_ = std::max(q.next_id_, j.value("next_id", int64_t{1}));
  return q;
}

Status JobQueue::save() const {
  Json jobs = Json::array();
  for (const QueuedJob& j : jobs_) jobs.push_back(to_json_job(j));
  const Json j{{"format", kFormat}, {"next_id", next_id_}, {"jobs", jobs}};
  std::error_code ec;
  if (path_.has_parent_path()) fs::create_directories(path_.parent_path(), ec);
  return write_file_atomic(path_, j.dump(1));
}

Status JobQueue::update(const fs::path& path, const std::function<Status(JobQueue&)>& change) {
  SEEDVAE_ASSIGN_OR_RETURN(JobQueue q, load(path));
  SEEDVAE_TRY(change(q));
  return q.save();
}

QueuedJob* JobQueue::find(int64_t id) {
  for (QueuedJob& j : jobs_) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

int64_t JobQueue::add(QueuedJob job) {
  job.id = next_id_++;
  job.state = QueueState::kQueued;
  jobs_.push_back(std::move(job));
  return jobs_.back().id;
}

Status JobQueue::remove(int64_t id) {
  QueuedJob* j = find(id);
  if (j == nullptr) return not_found("no job " + std::to_string(id) + " in the queue");
  if (j->state == QueueState::kRunning) {
    return invalid_argument("job " + std::to_string(id) +
                            " is running; stop the queue's runner first (Ctrl-C)");
  }
  jobs_.erase(jobs_.begin() + (j - jobs_.data()));
  return Status::ok();
}

Status JobQueue::move(int64_t id, int64_t position) {
  QueuedJob* j = find(id);
  if (j == nullptr) return not_found("no job " + std::to_string(id) + " in the queue");
  QueuedJob moved = std::move(*j);
  jobs_.erase(jobs_.begin() + (j - jobs_.data()));
  const auto at = static_cast<size_t>(std::clamp<int64_t>(position, 0, std::ssize(jobs_)));
  jobs_.insert(jobs_.begin() + static_cast<std::ptrdiff_t>(at), std::move(moved));
  return Status::ok();
}

Status JobQueue::pause(int64_t id) {
  QueuedJob* j = find(id);
  if (j == nullptr) return not_found("no job " + std::to_string(id) + " in the queue");
  if (j->state == QueueState::kRunning) {
    return invalid_argument("job " + std::to_string(id) +
                            " is running; stop the runner (Ctrl-C): the job resumes from its "
                            "checkpoint when the queue runs again");
  }
  if (j->state != QueueState::kQueued) {
    return invalid_argument("job " + std::to_string(id) + " is " +
                            std::string(queue_state_name(j->state)) + ", not queued");
  }
  j->state = QueueState::kPaused;
  return Status::ok();
}

Status JobQueue::resume(int64_t id) {
  QueuedJob* j = find(id);
  if (j == nullptr) return not_found("no job " + std::to_string(id) + " in the queue");
  if (j->state == QueueState::kRunning || j->state == QueueState::kQueued) return Status::ok();
  j->state = QueueState::kQueued;
  return Status::ok();
}

QueuedJob* JobQueue::next_queued() {
  for (QueuedJob& j : jobs_) {
    if (j.state == QueueState::kQueued) return &j;
  }
  return nullptr;
}

namespace {

// The running job's progress: passed on, and written to the queue file every few seconds.
class QueueProgress final : public ProgressSink {
 public:
  QueueProgress(const fs::path& path, int64_t id, ProgressSink* next, double interval_s)
      : path_(path), id_(id), next_(next), interval_s_(interval_s) {}
  void report(std::string_view stage, int64_t done, int64_t total) override {
    if (next_) next_->report(stage, done, total);
    const auto now = Clock::now();
    job_.report(stage, done, total, now);
    stage_ = std::string(stage);
    if (std::chrono::duration<double>(now - last_save_).count() < interval_s_ && done < total) {
      return;
    }
    last_save_ = now;
    // Best effort: a queue file that cannot be written now is written at the job's end.
    (void)JobQueue::update(path_, [&](JobQueue& q) {
      if (QueuedJob* j = q.find(id_)) {
        j->phase = stage_;
        j->progress = job_.fraction();
        j->eta_s = job_.eta_s();
      }
      return Status::ok();
    });
  }

 private:
  fs::path path_;
  int64_t id_;
  ProgressSink* next_;
  double interval_s_;
  std::string stage_;
  JobProgress job_;
  Clock::time_point last_save_{};
};

}  // namespace

fs::path runner_lock_path(const fs::path& queue) {
  fs::path p = queue;
  p += ".runner.lock";
  return p;
}

Result<int64_t> run_queue(const fs::path& path, Session& session, const QueueRunHooks& hooks) {
  if (!hooks.load_weights) return invalid_argument("run_queue needs a weights loader");
  std::error_code ec;
  if (!path.parent_path().empty()) fs::create_directories(path.parent_path(), ec);
  auto lock = FileLock::try_acquire(runner_lock_path(path));
  if (!lock) {
    if (lock.status().code() != StatusCode::kInvalidArgument) return lock.take_status();
    return invalid_argument("another runner is running the queue " + path.string() +
                            "; one runner at a time");
  }
  // This is the only runner: a job still marked running was left by one that ended.
  SEEDVAE_TRY(JobQueue::update(path, [](JobQueue& q) {
    q.requeue_interrupted();
    return Status::ok();
  }));
  int64_t ran = 0;
  for (;;) {
    if (hooks.cancel) SEEDVAE_TRY(hooks.cancel->check());
    // The next queued job, marked running (the file re-read: it may have been edited).
    QueuedJob job;
    bool found = false;
    SEEDVAE_TRY(JobQueue::update(path, [&](JobQueue& q) {
      QueuedJob* j = q.next_queued();
      if (j == nullptr) return Status::ok();
      j->state = QueueState::kRunning;
      j->phase.clear();
      j->progress = 0;
      j->eta_s = -1;
      job = *j;
      found = true;
      return Status::ok();
    }));
    if (!found) return ran;
    if (hooks.on_start) hooks.on_start(job);
    ++ran;

    JobResult r;
    Status st;
    {
      auto weights = hooks.load_weights(job.weights);
      if (!weights) {
        st = weights.status();
      } else if (auto spec = job.job_spec(std::move(*weights)); !spec) {
        st = spec.status();
      } else {
        QueueProgress progress(path, job.id, hooks.progress, hooks.save_interval_s);
        JobCallbacks cb;
        cb.cancel = hooks.cancel;
        cb.progress = &progress;
        st = session.run(*spec, cb, r);
      }
    }
    const bool stopped = st.code() == StatusCode::kCancelled;
    SEEDVAE_TRY(JobQueue::update(path, [&](JobQueue& q) {
      QueuedJob* j = q.find(job.id);
      if (j == nullptr) return Status::ok();  // removed meanwhile
      j->phase.clear();
      j->eta_s = -1;
      if (st.is_ok()) {
        j->state = QueueState::kDone;
        j->progress = 1;
        j->message = r.warnings.empty() ? std::string() : r.warnings.front();
        j->frames = r.plan.frames;
        j->seconds = r.total_s;
        j->ms_per_frame = r.ms_per_frame();
        j->peak_bytes = r.peak_bytes;
        j->psnr_db = r.quality ? r.quality->psnr_db : 0;
        j->ssim = r.quality ? r.quality->ssim : 0;
        j->resumed_at_frame = r.resumed_at_frame;
      } else if (stopped) {
        // Queued again: a resumable job continues from its checkpoint on the next run.
        j->state = QueueState::kQueued;
        const auto at = j->output.empty() ? std::nullopt : checkpoint_frame(j->output);
        j->message =
            at ? "stopped; resumes from its checkpoint at frame " + std::to_string(*at) : "stopped";
      } else {
        j->state = QueueState::kFailed;
        j->message = st.to_string();
      }
      job = *j;
      return Status::ok();
    }));
    if (hooks.on_end) hooks.on_end(job);
    if (stopped) return st;
  }
}

}  // namespace seedvae
