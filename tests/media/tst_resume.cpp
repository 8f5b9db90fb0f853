// Resumable jobs (core/pipeline/job.h): a job cancelled after a few chunks leaves a checkpoint
// and no output; run again it continues from the checkpoint and writes the same bytes as an
// uninterrupted run.
//  * Round trips with the trained demo model: FFV1 in Matroska, H.264 in MP4, a PNG directory,
//    and a video file input with variable frame timing and AAC audio. The chunk-by-chunk round
//    trip gives the frames of the one-pass round trip (FFV1, lossless: equal samples).
//  * Decodes of a latent file with the tiny synthetic SeedVR2 and Wan2.1 weights: FFV1 (8-bit)
//    and a PNG directory, whose frames equal the one-pass decode's.
// A checkpoint of another job (a setting, the latent, the kind of job) is refused unless
// restarted; resumable() says why a decode is not resumable. The CPU backend, in process
// (Session::run).
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <iterator>

#include "app/backends.h"
#include "core/base/cancel.h"
#include "core/base/progress.h"
#include "core/media/video_io.h"
#include "core/pipeline/job.h"
#include "core/vae/state_dict.h"
#include "tests/media/av_test_file.h"
#include "tests/media/media_test_util.h"
#include "tests/support/job_test_util.h"

using namespace seedvae;
namespace fs = std::filesystem;

namespace {

using test::CancelAfter;
using test::file_bytes;

std::shared_ptr<const VaeWeights> synthetic(const char* name) {
  auto w = synthetic_weights(name);
  if (!w) qFatal("%s", w.status().to_string().c_str());
  return std::make_shared<const VaeWeights>(std::move(*w));
}

// Every file under `p` (a file or a directory) with its bytes, by relative name.
std::map<std::string, std::string> tree_bytes(const fs::path& p) {
  std::map<std::string, std::string> out;
  if (fs::is_regular_file(p)) {
    out[""] = file_bytes(p);
    return out;
  }
  for (const auto& e : fs::recursive_directory_iterator(p)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), p).string()] = file_bytes(e.path());
  }
  return out;
}

}  // namespace

class tst_Resume : public QObject {
  Q_OBJECT

  test::TempTree tmp_;
  std::shared_ptr<const VaeWeights> weights_;
  std::unique_ptr<Session> session_;

  JobSpec job(const fs::path& output, const std::string& codec) {
    JobSpec j;
    j.kind = JobKind::kRoundTrip;
    j.weights = weights_;
    j.options.threads = 2;
    j.options.checkpoint_chunks = 3;
    j.options.codec = codec;
    j.input.sample_width = 48;
    j.input.sample_height = 40;
    j.input.sample_frames = 45;  // 11 chunks of the encoder (5 + 10 x 4 frames)
    j.output = output;
    return j;
  }

  // The sample clip (48x40, 45 frames: 12 latents, 11 chunks of the decoder: 5 + 10 x 4 frames)
  // encoded with `w` into `dir`/latent.safetensors, and the job decoding that file into `output`
  // with a checkpoint every 3 chunks, as the CLI's decode builds it.
  Result<JobSpec> decode_job(const std::shared_ptr<const VaeWeights>& w, const fs::path& dir,
                             const fs::path& output, const std::string& codec) {
    const fs::path latent = dir / "latent.safetensors";
    if (!fs::exists(latent)) {
      JobSpec e = job(latent, codec);
      e.kind = JobKind::kEncode;
      e.weights = w;
      JobResult r;
      SEEDVAE_TRY(run(e, r));
    }
    JobSpec d = job(output, codec);
    d.kind = JobKind::kDecode;
    d.weights = w;
    d.options.bit_depth = std::string_view("8");  // (a literal trips GCC 12's -Wrestrict)
    d.input = {};
    SEEDVAE_TRY(read_decode_latent(latent, d));
    return d;
  }

  Status run(const JobSpec& j, JobResult& r, ProgressSink* progress = nullptr,
             const CancelToken* cancel = nullptr) {
    JobCallbacks cb;
    cb.progress = progress;
    cb.cancel = cancel;
    return session_->run(j, cb, r);
  }

  // Runs `j` cancelled after `after` chunks, then again; the output must equal a run without
  // interruption of the same job into `reference`.
  void check_resume(JobSpec j, const fs::path& reference, int64_t after,
                    int64_t expect_resume_frame) {
    JobSpec ref = j;
    ref.output = reference;
    JobResult full;
    const Status st_full = run(ref, full);
    QVERIFY2(st_full.is_ok(), st_full.to_string().c_str());
    QVERIFY(full.checkpointed);
    QCOMPARE(full.resumed_at_frame, int64_t{0});
    QVERIFY(!fs::exists(checkpoint_dir(reference)));

    CancelToken cancel;
    CancelAfter stop(cancel, after);
    JobResult first;
    const Status st1 = run(j, first, &stop, &cancel);
    QVERIFY2(st1.code() == StatusCode::kCancelled, st1.to_string().c_str());
    QVERIFY2(!fs::exists(j.output), "a cancelled job left an output");
    const std::optional<int64_t> at = checkpoint_frame(j.output);
    QVERIFY(at.has_value());
    QCOMPARE(*at, expect_resume_frame);

    JobResult second;
    const Status st2 = run(j, second);
    QVERIFY2(st2.is_ok(), st2.to_string().c_str());
    QCOMPARE(second.resumed_at_frame, expect_resume_frame);
    QVERIFY(!fs::exists(checkpoint_dir(j.output)));
    QCOMPARE(second.plan.frames, full.plan.frames);
    // the resumed run's time per frame counts only the frames it computed
    const double engine_ms = 1000 * (second.encode_s + second.decode_s);
    QVERIFY(engine_ms > 0);
    QVERIFY(
        qFuzzyCompare(second.ms_per_frame(),
                      engine_ms / static_cast<double>(second.plan.frames - expect_resume_frame)));
    if (j.kind == JobKind::kRoundTrip) {
      // the metrics' sums were carried over: the same figures to the last bit
      QVERIFY(second.quality && full.quality);
      QCOMPARE(second.quality->psnr_db, full.quality->psnr_db);
      QCOMPARE(second.quality->ssim, full.quality->ssim);
    }
    const auto a = tree_bytes(reference), b = tree_bytes(j.output);
    QVERIFY(!a.empty());
    QCOMPARE(b.size(), a.size());
    for (const auto& [name, bytes] : a) {
      QVERIFY2(b.count(name) && b.at(name) == bytes,
               qPrintable(QStringLiteral("%1 differs from the uninterrupted run's")
                              .arg(test::q((j.output / name).string()))));
    }
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    auto w = load_weights(SEEDVAE_DEMO_WEIGHTS);
    QVERIFY2(w.is_ok(), w.status().to_string().c_str());
    weights_ = std::make_shared<VaeWeights>(std::move(*w));
    session_ = std::make_unique<Session>([](const RunOptions& o) { return app::make_backend(o); });
  }

  void resumed_ffv1_equals_uninterrupted() {
    const fs::path d = tmp_.subdir("ffv1");
    // 4 chunks done: one checkpoint (3 chunks: 5 + 4 + 4 frames) to resume from
    check_resume(job(d / "out.mkv", "ffv1"), d / "ref.mkv", 4, 13);
  }

  // A large causal state widens the interval: the tiny network's state at 256x256 is 183 MB
  // (fp32), so with a checkpoint asked for every chunk they come every 6 chunks (at most 32 MiB
  // per chunk): stopped after 8 chunks, the job resumes at frame 25 (6 chunks: 5 + 5 x 4 frames),
  // where a checkpoint every chunk would resume at 29.
  void large_state_widens_the_checkpoint_interval() {
    const fs::path d = tmp_.subdir("wide");
    JobSpec j = job(d / "out.mkv", "ffv1");
    j.weights = std::make_shared<VaeWeights>(synthesize_weights(VaeConfig::tiny(), 7));
    j.options.checkpoint_chunks = 1;
    j.input.sample_width = 256;
    j.input.sample_height = 256;
    j.input.sample_frames = 37;  // 9 chunks
    check_resume(j, d / "ref.mkv", 8, 25);
  }

  void resumed_h264_equals_uninterrupted() {
    const fs::path d = tmp_.subdir("h264");
    // 7 chunks done: two checkpoints, the second at 25 frames (B-frames across segments)
    check_resume(job(d / "out.mp4", "h264"), d / "ref.mp4", 7, 25);
  }

  void resumed_png_directory_equals_uninterrupted() {
    const fs::path d = tmp_.subdir("png");
    check_resume(job(d / "frames", "auto"), d / "ref_frames", 7, 25);
  }

  // A video file with variable frame timing and AAC audio: the joined segments keep the frames'
  // times and the audio like the one-pass writer, and a resume still gives the same bytes.
  void resumed_file_input_keeps_timing_and_audio() {
    const fs::path d = tmp_.subdir("file");
    test::TestVideoSpec spec;
    spec.width = 40;
    spec.height = 32;
    spec.frames = 30;
    spec.tb_den = 1000;
    for (int i = 0; i < spec.frames; ++i) spec.pts.push_back(i * 40 + (i % 3 == 0 ? 0 : 7));
    spec.sample = [](int t, int p, int x, int y) { return (t * 7 + p * 50 + x * 3 + y * 5) % 256; };
    spec.audio_encoder = "aac";
    spec.audio_seconds = 1.3;
    const fs::path input = d / "input.mkv";
    const std::string made = test::make_test_video(input, spec);
    QVERIFY2(made.empty(), made.c_str());
    JobSpec j = job(d / "out.mp4", "h264");
    j.input.path = input;
    check_resume(j, d / "ref.mp4", 4, 13);

    JobSpec one_pass = j;
    one_pass.options.checkpoint_chunks = 0;
    one_pass.output = d / "one_pass.mp4";
    JobResult r;
    const Status st = run(one_pass, r);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QVERIFY(!r.checkpointed);
    const test::AvFileInfo seg = test::av_file_info(d / "out.mp4");
    const test::AvFileInfo once = test::av_file_info(d / "one_pass.mp4");
    QVERIFY2(seg.error.empty(), seg.error.c_str());
    QCOMPARE(seg.video_times.size(), size_t(30));
    QCOMPARE(seg.video_times, once.video_times);
    QCOMPARE(seg.audio_streams, 1);
    QCOMPARE(seg.audio_packets, once.audio_packets);
  }

  // A frame selection (first frame, stride) resumes at the right source frame, and a clip whose
  // rest after the checkpoint is shorter than the temporal padding's reach (26 frames: 3 padding
  // frames mirrored from before the checkpoint) pads as the uninterrupted run.
  void resumed_frame_selection_equals_uninterrupted() {
    const fs::path d = tmp_.subdir("selection");
    test::TestVideoSpec spec;
    spec.width = 32;
    spec.height = 24;
    spec.frames = 60;
    spec.sample = [](int t, int p, int x, int y) {
      return (t * 11 + p * 60 + x * 5 + y * 3) % 256;
    };
    const fs::path input = d / "input.mkv";
    const std::string made = test::make_test_video(input, spec);
    QVERIFY2(made.empty(), made.c_str());
    JobSpec j = job(d / "out.mkv", "ffv1");
    j.input.path = input;
    j.input.first_frame = 3;
    j.input.stride = 2;
    j.input.max_frames = 26;  // frames 3, 5, ..., 53; the checkpoint after 6 chunks is at 25
    j.options.checkpoint_chunks = 6;
    check_resume(j, d / "ref.mkv", 6, 25);
  }

  // The chunk-by-chunk round trip decodes the same frames as the one-pass round trip.
  void checkpointed_frames_equal_one_pass() {
    const fs::path d = tmp_.subdir("frames");
    JobSpec seg = job(d / "seg.mkv", "ffv1");
    JobSpec once = seg;
    once.options.checkpoint_chunks = 0;
    once.output = d / "once.mkv";
    JobResult a, b;
    QVERIFY(run(seg, a).is_ok());
    QVERIFY(run(once, b).is_ok());
    QVERIFY(a.checkpointed);
    QVERIFY(!b.checkpointed);
    QVERIFY(a.quality && b.quality);
    QCOMPARE(a.quality->psnr_db, b.quality->psnr_db);
    auto ca = media::read_clip(seg.output);
    auto cb = media::read_clip(once.output);
    QVERIFY(ca.is_ok() && cb.is_ok());
    QCOMPARE(ca->video.shape(), cb->video.shape());
    QCOMPARE(ca->video.shape()[2], int64_t{45});
    QVERIFY(std::equal(ca->video.f32().begin(), ca->video.f32().end(), cb->video.f32().begin()));
  }

  // A checkpoint belongs to its job: another setting is refused (naming it), --restart discards
  // it, and a job whose output is the checkpoint's leaves it alone when refused.
  void checkpoint_of_another_job_is_refused() {
    const fs::path d = tmp_.subdir("other");
    JobSpec j = job(d / "out.mkv", "ffv1");
    CancelToken cancel;
    CancelAfter stop(cancel, 4);
    JobResult r;
    QCOMPARE(run(j, r, &stop, &cancel).code(), StatusCode::kCancelled);
    QVERIFY(checkpoint_frame(j.output).has_value());
    JobSpec other = j;
    other.options.chunk_latents = 2;
    const Status refused = run(other, r);
    QCOMPARE(refused.code(), StatusCode::kInvalidArgument);
    QVERIFY2(refused.message().find("chunk_latents") != std::string::npos,
             refused.message().c_str());
    QVERIFY(checkpoint_frame(j.output).has_value());  // still there
    other.restart = true;
    const Status st = run(other, r);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QCOMPARE(r.resumed_at_frame, int64_t{0});
    QVERIFY(fs::exists(j.output));
    QVERIFY(!fs::exists(checkpoint_dir(j.output)));
  }

  // ---- decode jobs ----

  void resumed_decode_equals_uninterrupted_data() {
    QTest::addColumn<QString>("weights");
    QTest::addColumn<QString>("output");
    QTest::newRow("SeedVR2 tiny, FFV1") << "tiny"
                                        << "out.mkv";
    QTest::newRow("SeedVR2 tiny, PNG directory") << "tiny"
                                                 << "frames";
    QTest::newRow("Wan2.1 tiny, FFV1") << "wan21-tiny"
                                       << "out.mkv";
  }
  // A decode of a latent file cancelled after 4 chunks resumes from the checkpoint after 3 (13
  // frames: 5 + 4 + 4), with the decoder's causal state restored, and writes the bytes of an
  // uninterrupted decode; its frames are the one-pass decode's (lossless: equal samples).
  void resumed_decode_equals_uninterrupted() {
    QFETCH(QString, weights);
    QFETCH(QString, output);
    const std::string name = weights.toStdString(), out = output.toStdString();
    const fs::path d = tmp_.subdir("decode_" + name + (out == "frames" ? "_png" : "_ffv1"));
    const std::string codec = out == "frames" ? "auto" : "ffv1";
    auto j = decode_job(synthetic(name.c_str()), d, d / out, codec);
    QVERIFY2(j.is_ok(), j.status().to_string().c_str());
    std::string why;
    QVERIFY2(resumable(*j, &why), why.c_str());
    check_resume(*j, d / ("ref_" + out), 4, 13);
    if (QTest::currentTestFailed()) return;

    JobSpec once = *j;
    once.options.checkpoint_chunks = 0;
    once.output = d / ("once_" + out);
    QVERIFY(!resumable(once, &why));
    QCOMPARE(why, std::string("checkpoints off"));
    JobResult r;
    const Status st = run(once, r);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QVERIFY(!r.checkpointed);
    auto resumed = media::read_clip(j->output);
    auto one_pass = media::read_clip(once.output);
    QVERIFY2(resumed.is_ok(), resumed.status().to_string().c_str());
    QVERIFY2(one_pass.is_ok(), one_pass.status().to_string().c_str());
    QCOMPARE(resumed->video.shape(), one_pass->video.shape());
    QCOMPARE(resumed->video.shape()[2], int64_t{45});
    QCOMPARE(resumed->video.shape()[3], int64_t{40});
    QCOMPARE(resumed->video.shape()[4], int64_t{48});
    const auto a = resumed->video.f32(), b = one_pass->video.f32();
    QVERIFY(std::equal(a.begin(), a.end(), b.begin()));
    // not a constant picture: the frames carry the latent's content
    QVERIFY(std::any_of(a.begin(), a.end(), [&](float v) { return v != a[0]; }));
  }

  void decode_checkpoint_of_another_job_is_refused_data() {
    QTest::addColumn<QString>("weights");
    QTest::newRow("SeedVR2 tiny") << "tiny";
    QTest::newRow("Wan2.1 tiny") << "wan21-tiny";
  }
  // A decode's checkpoint belongs to its latent and settings: another latent (one value
  // changed), another setting and a round trip into the same output are refused by name and
  // leave the checkpoint; restart discards it.
  void decode_checkpoint_of_another_job_is_refused() {
    QFETCH(QString, weights);
    const std::string name = weights.toStdString();
    const fs::path d = tmp_.subdir("decode_other_" + name);
    auto made = decode_job(synthetic(name.c_str()), d, d / "out.mkv", "ffv1");
    QVERIFY2(made.is_ok(), made.status().to_string().c_str());
    const JobSpec j = *made;
    CancelToken cancel;
    CancelAfter stop(cancel, 4);
    JobResult r;
    const Status cancelled = run(j, r, &stop, &cancel);
    QVERIFY2(cancelled.code() == StatusCode::kCancelled, cancelled.to_string().c_str());
    QVERIFY(!fs::exists(j.output));
    QCOMPARE(checkpoint_frame(j.output).value_or(-1), int64_t{13});

    auto refused = [&](const JobSpec& other, const char* naming) {
      JobResult rr;
      const Status st = run(other, rr);
      QVERIFY2(st.code() == StatusCode::kInvalidArgument, st.to_string().c_str());
      QVERIFY2(st.message().find(naming) != std::string::npos, st.message().c_str());
      QVERIFY(!fs::exists(j.output));
      QCOMPARE(checkpoint_frame(j.output).value_or(-1), int64_t{13});  // still there
    };
    JobSpec other_latent = j;
    HostTensor changed = *j.latent;
    changed.f32()[changed.f32().size() / 2] += 0.25f;
    other_latent.latent = std::make_shared<const HostTensor>(std::move(changed));
    refused(other_latent, "the latent");
    JobSpec other_setting = j;
    other_setting.options.chunk_latents = 2;
    refused(other_setting, "chunk_latents");
    JobSpec other_fps = j;
    other_fps.latent_fps = j.latent_fps * 2;
    refused(other_fps, "the latent");
    JobSpec round_trip = job(j.output, "ffv1");
    round_trip.weights = j.weights;
    refused(round_trip, "the kind of job");

    other_latent.restart = true;
    const Status st = run(other_latent, r);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QCOMPARE(r.resumed_at_frame, int64_t{0});
    QVERIFY(fs::exists(j.output));
    QVERIFY(!fs::exists(checkpoint_dir(j.output)));
  }

  // resumable() says why a decode is not resumable.
  void decode_not_resumable_says_why() {
    const fs::path d = tmp_.subdir("decode_why");
    auto made = decode_job(synthetic("tiny"), d, d / "out.mkv", "ffv1");
    QVERIFY2(made.is_ok(), made.status().to_string().c_str());
    std::string why;
    QVERIFY2(resumable(*made, &why), why.c_str());
    QVERIFY(why.empty());
    auto not_resumable = [&](JobSpec j, const char* expect) {
      std::string reason;
      QVERIFY(!resumable(j, &reason));
      QVERIFY2(reason.find(expect) != std::string::npos, reason.c_str());
    };
    JobSpec tiled = *made;
    tiled.options.tiling = "exact";
    not_resumable(tiled, "tiled decode");
    JobSpec whole = *made;
    whole.options.chunk_latents = 0;
    not_resumable(whole, "whole-clip chunk");
    JobSpec image = *made;
    image.output = d / "frame.png";
    not_resumable(image, "single image");
    JobSpec kept = *made;
    kept.keep_reconstruction = media::FrameSpool::in_memory();
    not_resumable(kept, "kept");
    JobSpec none = *made;
    none.output.clear();
    not_resumable(none, "no output");
    JobSpec encode = *made;
    encode.kind = JobKind::kEncode;
    not_resumable(encode, "encode");
  }
};

QTEST_GUILESS_MAIN(tst_Resume)
#include "tst_resume.moc"
