// The Wan2.1 and Wan2.2 VAEs through the job layer (core/pipeline/job.h), as the CLI, the studio
// and the queue run them: Session::run on the CPU backend with the tiny synthetic weights of both
// families, against the Wan wrappers (core/schedule/wan_stream.h) on the same clip.
//  * a round trip gives the wrappers' encode -> decode, clamped (upstream's chunking; frames of
//    a size the families' factors divide, so nothing is padded);
//  * an encode writes the normalised latent (the wrapper's), or the raw mean with raw_latent; read
//    back, both are the raw mean, and decoding the file gives the round trip's frames;
//  * exact tiling gives the untiled frames; the resumable round trip into a file runs;
//  * what does not apply is refused by name: blend tiling, SeedVR2's DiT scale, a latent of
//    another family.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>

#include "app/backends.h"
#include "core/io/safetensors.h"
#include "core/media/sample_clip.h"
#include "core/pipeline/job.h"
#include "core/schedule/wan_stream.h"
#include "core/vae/state_dict.h"
#include "core/vae/wan_model.h"

using namespace seedvae;
namespace fs = std::filesystem;

namespace {

constexpr int kFrames = 9;

struct Family {
  const char* name;  // synthetic_weights() name
  int width, height;
};
const Family kFamilies[] = {{"wan21-tiny", 48, 40}, {"wan22-tiny", 64, 48}};

double max_abs(const HostTensor& a, const HostTensor& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double m = 0;
  const auto x = a.f32(), y = b.f32();
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(double(x[i]) - double(y[i])));
  return m;
}

}  // namespace

class tst_WanJobs : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  Session session_{[](const RunOptions& o) { return app::make_backend(o); }};

  fs::path path(const std::string& name) const {
    return fs::path(dir_.path().toStdString()) / name;
  }

  static std::shared_ptr<const VaeWeights> weights(const char* name) {
    auto w = synthetic_weights(name);
    if (!w) qFatal("%s", w.status().to_string().c_str());
    return std::make_shared<const VaeWeights>(std::move(*w));
  }

  static JobSpec job(JobKind kind, const std::shared_ptr<const VaeWeights>& w, const Family& f) {
    JobSpec j;
    j.kind = kind;
    j.weights = w;
    j.options.lone_head = true;  // upstream's chunking: frame 0 alone, then 4 frames
    j.options.chunk_latents = 1;
    j.input.sample_width = f.width;
    j.input.sample_height = f.height;
    j.input.sample_frames = kFrames;
    return j;
  }

  // Runs a job and gathers its decoded frames (trimmed, clamped), if any.
  Status run(const JobSpec& j, JobResult& r, HostTensor* frames = nullptr) {
    std::vector<HostTensor> parts;
    JobCallbacks cb;
    cb.on_decoded = [&](int64_t, const HostTensor& chunk) {
      parts.push_back(chunk);
      return Status::ok();
    };
    SEEDVAE_TRY(session_.run(j, cb, r));
    if (frames && !parts.empty()) {
      SEEDVAE_ASSIGN_OR_RETURN(*frames, concat_time(parts));
    }
    return Status::ok();
  }

 private slots:
  void initTestCase() { QVERIFY(dir_.isValid()); }

  void roundTripEncodeAndDecodeMatchTheWrappers_data() {
    QTest::addColumn<int>("family");
    QTest::newRow("Wan2.1") << 0;
    QTest::newRow("Wan2.2") << 1;
  }
  void roundTripEncodeAndDecodeMatchTheWrappers() {
    QFETCH(int, family);
    const Family& f = kFamilies[family];
    const auto w = weights(f.name);

    // the wrappers on the same clip
    auto cpu = app::make_backend(RunOptions{});
    QVERIFY2(cpu.is_ok(), cpu.status().to_string().c_str());
    auto model = WanModel::create(**cpu, *w);
    QVERIFY2(model.is_ok(), model.status().to_string().c_str());
    const HostTensor clip = media::make_sample_clip(f.width, f.height, kFrames);
    auto enc = wan_encode(*model, clip);
    QVERIFY2(enc.is_ok(), enc.status().to_string().c_str());
    auto dec = wan_decode(*model, enc->latent);
    QVERIFY2(dec.is_ok(), dec.status().to_string().c_str());

    // the round trip
    JobResult r;
    HostTensor recon;
    Status st = run(job(JobKind::kRoundTrip, w, f), r, &recon);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QCOMPARE(r.plan.frames, int64_t{kFrames});
    QVERIFY(r.quality.has_value());
    const double rt = max_abs(recon, *dec);
    qInfo("%s round trip vs wan_encode -> wan_decode: max abs %.3g", f.name, rt);
    QVERIFY2(rt <= 1e-5, qPrintable(QString::number(rt)));
    QVERIFY2(max_abs(r.latent, enc->mu) <= 1e-5, "the job's latent is the raw mean");

    // an encode writes the wrapper's normalised latent; raw_latent the mean
    for (const bool raw : {false, true}) {
      JobSpec e = job(JobKind::kEncode, w, f);
      e.raw_latent = raw;
      e.output = path(std::string(f.name) + (raw ? "_raw" : "_norm") + ".safetensors");
      st = run(e, r);
      QVERIFY2(st.is_ok(), st.to_string().c_str());
      auto file = SafetensorsFile::open(e.output);
      QVERIFY2(file.is_ok(), file.status().to_string().c_str());
      const HostTensor stored = file->get("latent")->to_host(DType::kF32);
      QVERIFY2(max_abs(stored, raw ? enc->mu : enc->latent) <= 1e-5, "the stored latent");
      QCOMPARE(file->metadata().at("seedvae.latent_space"),
               std::string(raw ? "raw" : "wan-normalized"));
      auto back = read_latent_file(e.output);
      QVERIFY2(back.is_ok(), back.status().to_string().c_str());
      QCOMPARE(back->family, std::optional<VaeFamily>(w->family));
      QVERIFY2(max_abs(back->latent, enc->mu) <= 1e-5, "read back: the raw mean");

      // decoding the file gives the round trip's frames
      JobSpec d;
      d.kind = JobKind::kDecode;
      d.weights = w;
      d.options.chunk_latents = 1;
      d.latent = std::make_shared<const HostTensor>(back->latent);
      d.latent_plan = back->plan;
      d.latent_family = back->family;
      HostTensor decoded;
      st = run(d, r, &decoded);
      QVERIFY2(st.is_ok(), st.to_string().c_str());
      const double dd = max_abs(decoded, recon);
      QVERIFY2(dd <= 1e-5, qPrintable(QStringLiteral("decode of the file: %1").arg(dd)));
    }

    // exact tiling: the untiled frames, a tile smaller than the frame
    JobSpec t = job(JobKind::kRoundTrip, w, f);
    t.options.tiling = "exact";
    t.options.lone_head = false;  // exact tiling chunks by itself
    t.options.tile = PixelSize{32, 32};
    HostTensor tiled;
    st = run(t, r, &tiled);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QVERIFY2(r.tiles.rects.size() > 1, "several tiles");
    const double td = max_abs(tiled, recon);
    qInfo("%s exact tiling (32x32, %zu tiles) vs untiled: max abs %.3g", f.name,
          r.tiles.rects.size(), td);
    QVERIFY2(td <= 1e-5, qPrintable(QString::number(td)));

    // the resumable round trip into a file
    JobSpec o = job(JobKind::kRoundTrip, w, f);
    o.options.checkpoint_chunks = 1;
    o.options.codec = "ffv1";
    o.output = path(std::string(f.name) + "_rt.mkv");
    st = run(o, r);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QVERIFY(r.checkpointed);
    QVERIFY(fs::exists(o.output));
    QVERIFY(!fs::exists(checkpoint_dir(o.output)));
  }

  void whatDoesNotApplyIsRefused() {
    const auto w21 = weights("wan21-tiny");
    JobResult r;
    JobSpec b = job(JobKind::kRoundTrip, w21, kFamilies[0]);
    b.options.tiling = "blend";
    b.options.tile = PixelSize{32, 32};
    b.options.overlap = PixelSize{8, 8};
    Status st = run(b, r);
    QVERIFY2(st.code() == StatusCode::kUnsupported, st.to_string().c_str());
    QVERIFY2(st.message().find("blend tiling is SeedVR2's") != std::string::npos,
             st.to_string().c_str());

    JobSpec dit = job(JobKind::kEncode, w21, kFamilies[0]);
    dit.dit_latent = true;
    dit.output = path("dit.safetensors");
    st = run(dit, r);
    QCOMPARE(st.code(), StatusCode::kInvalidArgument);
    QVERIFY(!fs::exists(dit.output));

    // a Wan2.1 latent has SeedVR2's 16 channels: only its recorded family tells them apart
    JobSpec d;
    d.kind = JobKind::kDecode;
    d.weights = weights("tiny");
    d.latent = std::make_shared<const HostTensor>(DType::kF32, Shape{1, 16, 2, 5, 6});
    d.latent_family = VaeFamily::kWan21;
    st = run(d, r);
    QCOMPARE(st.code(), StatusCode::kInvalidArgument);
    QVERIFY2(st.message().find("Wan2.1") != std::string::npos, st.to_string().c_str());
  }
};

QTEST_GUILESS_MAIN(tst_WanJobs)
#include "tst_wan_jobs.moc"
