// The job queue (core/pipeline/job_queue.h): its file round trip (every field, the settings as
// the options table writes them), reorder / remove / pause / resume, a failing job followed by
// one that runs, and a queue stopped mid-job and "restarted" (its file reloaded, the job found
// running as a killed process leaves it) whose stopped job resumes from its checkpoint and
// writes the bytes of an uninterrupted run, for a round trip and for a decode of a latent file;
// the checks of a job added (a decode's latent, the output); one runner at a time (the runner
// lock). The demo model on the CPU backend, in process.
#include <QtTest>

#include <fstream>
#include <iterator>

#include "app/backends.h"
#include "core/base/file_lock.h"
#include "core/pipeline/job_queue.h"
#include "core/vae/state_dict.h"
#include "tests/support/job_test_util.h"

using namespace seedvae;
namespace fs = std::filesystem;

namespace {

using test::CancelAfter;
using test::file_bytes;

QueuedJob sample_job(const fs::path& output, int frames) {
  QueuedJob j;
  j.weights = SEEDVAE_DEMO_WEIGHTS;
  j.options.threads = 2;
  j.options.checkpoint_chunks = 3;
  j.options.codec = "ffv1";
  j.sample_width = 48;
  j.sample_height = 40;
  j.sample_frames = frames;
  j.output = output.string();
  return j;
}

std::vector<int64_t> ids(const JobQueue& q) {
  std::vector<int64_t> out;
  for (const QueuedJob& j : q.jobs()) out.push_back(j.id);
  return out;
}

}  // namespace

class tst_JobQueue : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  fs::path dir() const { return fs::path(tmp_.path().toStdString()); }

  QueueRunHooks hooks(const CancelToken* cancel = nullptr, ProgressSink* progress = nullptr) {
    QueueRunHooks h;
    h.load_weights = [](const std::string& w) -> Result<std::shared_ptr<const VaeWeights>> {
      SEEDVAE_ASSIGN_OR_RETURN(VaeWeights v, load_weights(w));
      return std::make_shared<const VaeWeights>(std::move(v));
    };
    h.cancel = cancel;
    h.progress = progress;
    h.save_interval_s = 0;  // every report reaches the file
    return h;
  }

 private slots:
  void fileRoundTripAndEdits() {
    const fs::path file = dir() / "edits" / "queue.json";  // the folder is made on saving
    auto q = JobQueue::load(file);
    QVERIFY(q.is_ok());
    QVERIFY(q->jobs().empty());
    QueuedJob a = sample_job(dir() / "a.mkv", 21);
    a.options.chunk_latents = 2;
    a.options.tiling = "off";
    a.input = "/videos/in.mp4";
    a.first_frame = 10;
    a.max_frames = 100;
    a.stride = 2;
    a.resize_width = 640;
    const int64_t ia = q->add(a);
    const int64_t ib = q->add(sample_job(dir() / "b.mkv", 21));
    const int64_t ic = q->add(sample_job(dir() / "c.mkv", 21));
    QVERIFY(q->save().is_ok());

    auto r = JobQueue::load(file);
    QVERIFY(r.is_ok());
    QCOMPARE(ids(*r), (std::vector<int64_t>{ia, ib, ic}));
    const QueuedJob* ra = r->find(ia);
    QVERIFY(ra != nullptr);
    QVERIFY(ra->options == a.options);
    QCOMPARE(ra->input, a.input);
    QCOMPARE(ra->output, a.output);
    QCOMPARE(ra->weights, a.weights);
    QCOMPARE(ra->first_frame, int64_t{10});
    QCOMPARE(ra->max_frames, int64_t{100});
    QCOMPARE(ra->stride, 2);
    QCOMPARE(ra->resize_width, 640);
    QCOMPARE(ra->state, QueueState::kQueued);
    QCOMPARE(ra->kind, JobKind::kRoundTrip);

    // edits through the file, as the CLI makes them
    QVERIFY(JobQueue::update(file, [&](JobQueue& x) { return x.move(ic, 0); }).is_ok());
    QVERIFY(JobQueue::update(file, [&](JobQueue& x) { return x.pause(ia); }).is_ok());
    QVERIFY(JobQueue::update(file, [&](JobQueue& x) { return x.remove(ib); }).is_ok());
    QCOMPARE(JobQueue::update(file, [&](JobQueue& x) { return x.remove(99); }).code(),
             StatusCode::kNotFound);
    auto e = JobQueue::load(file);
    QVERIFY(e.is_ok());
    QCOMPARE(ids(*e), (std::vector<int64_t>{ic, ia}));
    QCOMPARE(e->find(ia)->state, QueueState::kPaused);
    QCOMPARE(e->next_queued()->id, ic);  // the paused job is skipped
    QVERIFY(e->resume(ia).is_ok());
    QCOMPARE(e->find(ia)->state, QueueState::kQueued);
    // a new job never reuses a removed job's id
    QCOMPARE(e->add(sample_job(dir() / "d.mkv", 21)), ic + 1);
    // a running job cannot be removed or paused
    e->find(ia)->state = QueueState::kRunning;
    QCOMPARE(e->remove(ia).code(), StatusCode::kInvalidArgument);
    QCOMPARE(e->pause(ia).code(), StatusCode::kInvalidArgument);
    // a file that is not a queue is refused, not overwritten
    const fs::path bad = dir() / "bad.json";
    std::ofstream(bad) << "{\"jobs\": 3}";
    QCOMPARE(JobQueue::load(bad).status().code(), StatusCode::kCorruptData);
    QCOMPARE(JobQueue::update(bad, [](JobQueue&) { return Status::ok(); }).code(),
             StatusCode::kCorruptData);
    QCOMPARE(file_bytes(bad), std::string("{\"jobs\": 3}"));

    // a decode job keeps its kind; a kind the queue does not run is refused
    const fs::path kinds = dir() / "kinds.json";
    QueuedJob dj = sample_job(dir() / "d.mkv", 21);
    dj.kind = JobKind::kDecode;
    dj.input = "/latents/clip.safetensors";
    int64_t id_decode = 0;
    QVERIFY(JobQueue::update(kinds, [&](JobQueue& x) {
              x.add(sample_job(dir() / "rt.mkv", 21));
              id_decode = x.add(dj);
              return Status::ok();
            }).is_ok());
    auto k = JobQueue::load(kinds);
    QVERIFY(k.is_ok());
    QCOMPARE(k->jobs()[0].kind, JobKind::kRoundTrip);
    QCOMPARE(k->find(id_decode)->kind, JobKind::kDecode);
    QCOMPARE(k->find(id_decode)->input, dj.input);
    std::string text = file_bytes(kinds);
    const size_t at = text.find("\"decode\"");
    QVERIFY(at != std::string::npos);
    text.replace(at, 8, "\"encode\"");
    std::ofstream(kinds, std::ios::binary | std::ios::trunc) << text;
    const auto refused = JobQueue::load(kinds);
    QCOMPARE(refused.status().code(), StatusCode::kCorruptData);
    QVERIFY2(refused.status().message().find("unknown kind") != std::string::npos,
             refused.status().to_string().c_str());
  }

  void failedJobDoesNotStopTheQueue() {
    const fs::path file = dir() / "fail.json";
    QVERIFY(JobQueue::update(file, [&](JobQueue& q) {
              QueuedJob missing = sample_job(dir() / "missing_out.mkv", 21);
              missing.input = (dir() / "no_such_video.mp4").string();
              q.add(missing);
              q.add(sample_job(dir() / "ok.mkv", 21));
              return Status::ok();
            }).is_ok());
    Session session([](const RunOptions& o) { return app::make_backend(o); });
    auto ran = run_queue(file, session, hooks());
    QVERIFY2(ran.is_ok(), ran.status().to_string().c_str());
    QCOMPARE(*ran, int64_t{2});
    auto q = JobQueue::load(file);
    QVERIFY(q.is_ok());
    const QueuedJob& failed = q->jobs()[0];
    const QueuedJob& done = q->jobs()[1];
    QCOMPARE(failed.state, QueueState::kFailed);
    QVERIFY2(failed.message.find("no_such_video") != std::string::npos, failed.message.c_str());
    QCOMPARE(done.state, QueueState::kDone);
    QCOMPARE(done.frames, int64_t{21});
    QVERIFY(done.psnr_db > 15 && done.psnr_db < 60);
    QVERIFY(done.ssim > 0 && done.ssim <= 1);
    QVERIFY(done.ms_per_frame > 0);
    QVERIFY(done.peak_bytes > 0);
    QCOMPARE(done.progress, 1.0);
    QVERIFY(fs::exists(done.output));
    QVERIFY(!fs::exists(failed.output));
    // nothing left to run
    auto again = run_queue(file, session, hooks());
    QVERIFY(again.is_ok());
    QCOMPARE(*again, int64_t{0});
  }

  // A queue stopped in its first job, then its process "killed" (the file says running), then
  // run again: the job continues from its checkpoint and writes an uninterrupted run's bytes;
  // the next job runs after it.
  void restartMidQueueResumes() {
    const fs::path file = dir() / "restart.json";
    const fs::path out = dir() / "long.mkv", ref = dir() / "long_ref.mkv";
    int64_t first = 0, second = 0;
    QVERIFY(JobQueue::update(file, [&](JobQueue& q) {
              first = q.add(sample_job(out, 45));
              second = q.add(sample_job(dir() / "after.mkv", 21));
              return Status::ok();
            }).is_ok());
    {
      Session session([](const RunOptions& o) { return app::make_backend(o); });
      CancelToken cancel;
      CancelAfter stop(cancel, 7);
      auto ran = run_queue(file, session, hooks(&cancel, &stop));
      QCOMPARE(ran.status().code(), StatusCode::kCancelled);
      auto q = JobQueue::load(file);
      QVERIFY(q.is_ok());
      QCOMPARE(q->find(first)->state, QueueState::kQueued);
      QVERIFY2(q->find(first)->message.find("checkpoint at frame 25") != std::string::npos,
               q->find(first)->message.c_str());
      QCOMPARE(q->find(second)->state, QueueState::kQueued);
      QVERIFY(!fs::exists(out));
    }
    // the process dies while the job runs: the file keeps "running"
    QVERIFY(JobQueue::update(file, [&](JobQueue& q) {
              q.find(first)->state = QueueState::kRunning;
              return Status::ok();
            }).is_ok());
    auto reloaded = JobQueue::load(file);
    QVERIFY(reloaded.is_ok());
    QCOMPARE(reloaded->find(first)->state, QueueState::kQueued);
    QCOMPARE(reloaded->next_queued()->id, first);

    Session session([](const RunOptions& o) { return app::make_backend(o); });
    auto ran = run_queue(file, session, hooks());
    QVERIFY2(ran.is_ok(), ran.status().to_string().c_str());
    QCOMPARE(*ran, int64_t{2});
    auto q = JobQueue::load(file);
    QVERIFY(q.is_ok());
    QCOMPARE(q->find(first)->state, QueueState::kDone);
    QCOMPARE(q->find(first)->resumed_at_frame, int64_t{25});
    QCOMPARE(q->find(first)->frames, int64_t{45});
    QCOMPARE(q->find(second)->state, QueueState::kDone);

    // the same job uninterrupted
    const QueuedJob j = sample_job(ref, 45);
    JobSpec spec;
    spec.kind = JobKind::kRoundTrip;
    auto w = load_weights(j.weights);
    QVERIFY(w.is_ok());
    spec.weights = std::make_shared<const VaeWeights>(std::move(*w));
    spec.options = j.options;
    spec.input = j.job_input();
    spec.output = ref;
    JobResult r;
    QVERIFY(session.run(spec, {}, r).is_ok());
    QVERIFY(file_bytes(out) == file_bytes(ref));
    QCOMPARE(r.quality->psnr_db, q->find(first)->psnr_db);
  }

  // The latent a decode job reads: the sample clip (48x40, 45 frames) encoded with the demo model.
  fs::path latent_file() {
    const fs::path latent = dir() / "latent.safetensors";
    if (fs::exists(latent)) return latent;
    auto w = load_weights(SEEDVAE_DEMO_WEIGHTS);
    if (!w) qFatal("%s", w.status().to_string().c_str());
    JobSpec e;
    e.kind = JobKind::kEncode;
    e.weights = std::make_shared<const VaeWeights>(std::move(*w));
    e.options.threads = 2;
    e.input.sample_width = 48;
    e.input.sample_height = 40;
    e.input.sample_frames = 45;
    e.output = latent;
    Session session([](const RunOptions& o) { return app::make_backend(o); });
    JobResult r;
    if (Status st = session.run(e, {}, r); !st) qFatal("%s", st.to_string().c_str());
    return latent;
  }

  // A decode job is checked when added: its latent file must hold a latent, and its output must
  // not be the latent or a form it cannot write.
  void decodeJobIsCheckedWhenAdded() {
    QueuedJob j = sample_job(dir() / "decoded.mkv", 21);
    j.kind = JobKind::kDecode;
    j.input = latent_file().string();
    const Status ok = check_queued_job(j);
    QVERIFY2(ok.is_ok(), ok.to_string().c_str());
    QueuedJob not_latent = j;
    not_latent.input = (dir() / "not_a_latent.safetensors").string();
    std::ofstream(not_latent.input) << "not a tensor file";
    QVERIFY(!check_queued_job(not_latent).is_ok());
    QueuedJob onto_latent = j;
    onto_latent.output = j.input;
    QCOMPARE(check_queued_job(onto_latent).code(), StatusCode::kInvalidArgument);
    QueuedJob no_latent = j;
    no_latent.input.clear();
    QCOMPARE(check_queued_job(no_latent).code(), StatusCode::kInvalidArgument);
  }

  // A queued decode of a latent file stopped after 4 chunks stays queued with its checkpoint
  // (after 3 chunks: frame 13); run again, it resumes there and writes the bytes of the same
  // decode run uninterrupted.
  void decodeJobResumes() {
    const fs::path file = dir() / "decode.json";
    const fs::path out = dir() / "decoded_long.mkv", ref = dir() / "decoded_ref.mkv";
    QueuedJob j = sample_job(out, 45);
    j.kind = JobKind::kDecode;
    j.input = latent_file().string();
    int64_t id = 0;
    QVERIFY(JobQueue::update(file, [&](JobQueue& q) {
              id = q.add(j);
              return Status::ok();
            }).is_ok());
    Session session([](const RunOptions& o) { return app::make_backend(o); });
    {
      CancelToken cancel;
      CancelAfter stop(cancel, 4);
      auto ran = run_queue(file, session, hooks(&cancel, &stop));
      QCOMPARE(ran.status().code(), StatusCode::kCancelled);
      auto q = JobQueue::load(file);
      QVERIFY(q.is_ok());
      QCOMPARE(q->find(id)->state, QueueState::kQueued);
      QVERIFY2(q->find(id)->message.find("checkpoint at frame 13") != std::string::npos,
               q->find(id)->message.c_str());
      QVERIFY(!fs::exists(out));
    }
    auto ran = run_queue(file, session, hooks());
    QVERIFY2(ran.is_ok(), ran.status().to_string().c_str());
    QCOMPARE(*ran, int64_t{1});
    auto q = JobQueue::load(file);
    QVERIFY(q.is_ok());
    const QueuedJob* done = q->find(id);
    QCOMPARE(done->state, QueueState::kDone);
    QCOMPARE(done->resumed_at_frame, int64_t{13});
    QCOMPARE(done->frames, int64_t{45});
    QCOMPARE(done->psnr_db, 0.0);  // nothing to compare a decode with

    QueuedJob uninterrupted = j;
    uninterrupted.output = ref.string();
    auto w = load_weights(j.weights);
    QVERIFY(w.is_ok());
    auto spec = uninterrupted.job_spec(std::make_shared<const VaeWeights>(std::move(*w)));
    QVERIFY2(spec.is_ok(), spec.status().to_string().c_str());
    QCOMPARE(spec->kind, JobKind::kDecode);
    JobResult r;
    const Status st = session.run(*spec, {}, r);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QVERIFY(r.checkpointed);
    QVERIFY(!file_bytes(ref).empty());
    QVERIFY(file_bytes(out) == file_bytes(ref));
  }

  // One runner per queue: while one holds the runner lock, a job it marked running reads as
  // running (not "interrupted") and a second runner is refused; once it lets go, the job reads as
  // interrupted and a new runner re-queues and runs it.
  void oneRunnerAtATime() {
    const fs::path file = dir() / "locked.json";
    int64_t id = 0;
    QVERIFY(JobQueue::update(file, [&](JobQueue& q) {
              id = q.add(sample_job(dir() / "locked.mkv", 9));
              q.find(id)->state = QueueState::kRunning;
              return Status::ok();
            }).is_ok());
    Session session([](const RunOptions& o) { return app::make_backend(o); });
    {
      auto held = FileLock::try_acquire(runner_lock_path(file));  // another runner
      QVERIFY2(held.is_ok(), held.status().to_string().c_str());
      auto q = JobQueue::load(file);
      QVERIFY(q.is_ok());
      QCOMPARE(q->find(id)->state, QueueState::kRunning);
      QVERIFY(!q->remove(id).is_ok());  // the CLI's check: not while it runs
      auto ran = run_queue(file, session, hooks());
      QCOMPARE(ran.status().code(), StatusCode::kInvalidArgument);
      QVERIFY2(ran.status().message().find("another runner") != std::string::npos,
               ran.status().to_string().c_str());
    }
    auto q = JobQueue::load(file);
    QVERIFY(q.is_ok());
    QCOMPARE(q->find(id)->state, QueueState::kQueued);
    QCOMPARE(q->find(id)->message, std::string("interrupted"));
    auto ran = run_queue(file, session, hooks());
    QVERIFY2(ran.is_ok(), ran.status().to_string().c_str());
    QCOMPARE(*ran, int64_t{1});
    QVERIFY(!FileLock::is_held(runner_lock_path(file)));
  }
};

QTEST_GUILESS_MAIN(tst_JobQueue)
#include "tst_job_queue.moc"
