// The pipelined decode (core/schedule/pipeline_decode.h) on CPU backends, one per share on its own
// thread: the output equals the single-backend decode bit for bit for every cut of the tiny
// decoder into two shares and for three shares, with upstream's chunking, longer chunks with the
// lone head, and chunked upsampling with lean convolutions; the cost model's cut of the real
// decoder at 1080p balances its shares; a share whose backend fails (at creation or mid-clip)
// stops every share with its error, and a cancel stops the decode; the job layer's decode with
// --devices equals its one-device decode; every cut of the tiny Wan2.1 and Wan2.2 decoders;
// refusals.
#include <QtTest>

#include <atomic>
#include <map>
#include <random>

#include "core/cpu/cpu_backend.h"
#include "core/pipeline/job.h"
#include "core/schedule/pipeline_decode.h"
#include "tests/support/cpu_devices.h"
#include "tests/support/synthetic_video.h"
#include "tests/support/tiny_model.h"

using namespace seedvae;

namespace {

double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  if (a.shape() != b.shape()) return -1;
  double m = 0;
  auto x = a.f32(), y = b.f32();
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(double(x[i]) - double(y[i])));
  return m;
}

}  // namespace

class TstPipelineDecode : public QObject {
  Q_OBJECT

  VaeWeights weights_ = synthesize_weights(VaeConfig::tiny(), 7);
  HostTensor latent_ = test::random_latent(16, 6, 4, 4, 3);
  std::map<std::string, HostTensor> want_;

  // Decodes latent_ whole on `model` and pipelined over `plan`; they must be identical.
  void check(VideoVae& model, const PipelinePlan& plan, const StreamOptions& options,
             const std::string& what, const HostTensor* latent = nullptr) {
    const HostTensor& z = latent ? *latent : latent_;
    // the single-backend decode, once per latent and options
    const std::string key = std::to_string(reinterpret_cast<uintptr_t>(&z)) + "/" +
                            std::to_string(options.chunk_latents) + "/" +
                            std::to_string(options.lone_head) + "/" +
                            std::to_string(options.hires_chunk_frames);
    if (!want_.count(key)) {
      auto w = decode_latent(model, z, options);
      QVERIFY2(w.is_ok(), w.status().to_string().c_str());
      want_[key] = std::move(w).value();
    }
    const HostTensor* want = &want_[key];
    PipelineStats stats;
    auto got =
        decode_latent_pipelined(model, test::cpu_devices(weights_), plan, z, options, {}, &stats);
    QVERIFY2(got.is_ok(), (what + ": " + got.status().to_string()).c_str());
    const double d = max_abs_diff(*got, *want);
    if (d != 0) qWarning("%s (%s): max abs %.3g", what.c_str(), plan.describe().c_str(), d);
    QVERIFY2(d == 0, (what + ": not bit-identical to one backend").c_str());
    QCOMPARE(static_cast<int>(stats.busy_ms.size()), plan.shares());
    for (double ms : stats.busy_ms) QVERIFY(ms > 0);
  }

 private slots:
  void units() {
    test::TinyCpuModel m;
    QVERIFY(test::make_first_device(m, weights_).is_ok());
    const auto u = m.model->decoder_units();
    QVERIFY(u.size() > 10);
    QCOMPARE(QString::fromStdString(u.front()), QString("decoder.conv_in"));
    QCOMPARE(QString::fromStdString(u[2]), QString("decoder.mid_block.attentions.0"));
    QCOMPARE(QString::fromStdString(u.back()), QString("decoder.conv_out"));
    QVERIFY(std::find(u.begin(), u.end(), "decoder.up_blocks.0.upsamplers.0") != u.end());
  }

  // Every cut of the decoder into two shares, with upstream's chunking.
  void everyCutOfTwo() {
    test::TinyCpuModel m;
    QVERIFY(test::make_first_device(m, weights_).is_ok());
    const StreamOptions options;  // chunks of one latent frame
    const int n = static_cast<int>(m.model->decoder_units().size());
    const HostTensor short_latent = test::random_latent(16, 3, 4, 4, 5);  // three chunks
    for (int cut = 1; cut < n; ++cut) {
      auto plan = plan_pipeline(weights_, 2, 4, 4, options, {cut});
      QVERIFY2(plan.is_ok(), plan.status().to_string().c_str());
      check(*m.model, *plan, options, "cut " + std::to_string(cut), &short_latent);
    }
  }

  // The Wan decoders: every cut into two shares (Wan2.1: residual blocks and upsamplers; Wan2.2:
  // whole levels, whose shortcut reads the level's input), upstream's chunking.
  void everyCutOfTheWanDecoders() {
    for (const char* name : {"wan21-tiny", "wan22-tiny"}) {
      const VaeWeights w = *synthetic_weights(name);
      auto backend = create_cpu_backend({.threads = 1});
      QVERIFY(backend.is_ok());
      auto model = make_video_vae(**backend, w);
      QVERIFY(model.is_ok());
      const HostTensor z = test::random_latent((*model)->latent_channels(), 3, 4, 4, 9);
      auto want = decode_latent(**model, z, StreamOptions{});
      QVERIFY2(want.is_ok(), want.status().to_string().c_str());
      const int n = static_cast<int>((*model)->decoder_units().size());
      QVERIFY(n >= 6);
      for (int cut = 1; cut < n; ++cut) {
        auto plan = plan_pipeline(w, 2, 4, 4, StreamOptions{}, {cut});
        QVERIFY2(plan.is_ok(), plan.status().to_string().c_str());
        auto stages = [&w](int) -> Result<DeviceEngine> {
          DeviceEngine stage;
          SEEDVAE_ASSIGN_OR_RETURN(stage.backend, create_cpu_backend({.threads = 1}));
          SEEDVAE_ASSIGN_OR_RETURN(stage.model, make_video_vae(*stage.backend, w));
          return stage;
        };
        auto got = decode_latent_pipelined(**model, stages, *plan, z, StreamOptions{});
        QVERIFY2(got.is_ok(), got.status().to_string().c_str());
        QVERIFY2(max_abs_diff(*got, *want) == 0,
                 (std::string(name) + " " + plan->describe() + ": not bit-identical").c_str());
      }
      qInfo("%s: %d units, every cut into two shares bit-identical", name, n);
    }
  }

  void threeSharesAndChunkings() {
    test::TinyCpuModel m;
    QVERIFY(test::make_first_device(m, weights_).is_ok());
    StreamOptions lone{.chunk_latents = 2, .lone_head = true};
    StreamOptions pieces{.chunk_latents = 2, .hires_chunk_frames = 2, .lean_convs = true};
    for (const StreamOptions& o : {StreamOptions{}, lone, pieces}) {
      auto plan = plan_pipeline(weights_, 3, 4, 4, o);
      QVERIFY2(plan.is_ok(), plan.status().to_string().c_str());
      QCOMPARE(plan->shares(), 3);
      check(*m.model, *plan, o, "three shares, chunk " + std::to_string(o.chunk_latents));
    }
    // the output streamed to a sink in order, nothing gathered
    std::vector<int64_t> firsts;
    StreamHooks hooks;
    hooks.keep_output = false;
    int64_t frames = 0;
    hooks.on_chunk = [&](int64_t first, const HostTensor& chunk) {
      firsts.push_back(first);
      frames += chunk.shape()[2];
      return Status::ok();
    };
    auto plan = plan_pipeline(weights_, 2, 4, 4, StreamOptions{});
    QVERIFY(plan.is_ok());
    auto r =
        decode_latent_pipelined(*m.model, test::cpu_devices(weights_), *plan, latent_, {}, hooks);
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    QVERIFY(r->empty());
    QCOMPARE(frames, int64_t{(6 - 1) * 4 + 1});
    QVERIFY(std::is_sorted(firsts.begin(), firsts.end()));
    QCOMPARE(firsts.front(), int64_t{0});
  }

  // The cost model's cut of the real decoder at 1080p (dry run): shares of similar cost.
  void planBalancesTheRealDecoder() {
    const VaeWeights real = *synthetic_weights("real");
    for (int shares : {2, 4}) {
      auto plan = plan_pipeline(real, shares, 135, 240, StreamOptions{});
      QVERIFY2(plan.is_ok(), plan.status().to_string().c_str());
      double sum = 0, most = 0;
      for (double c : plan->share_seconds) {
        sum += c;
        most = std::max(most, c);
      }
      const double mean = sum / shares;
      qInfo("%d shares: %s; estimated %.1f ms per chunk, largest share %.2f x the mean", shares,
            plan->describe().c_str(), sum * 1e3, most / mean);
      QVERIFY(sum > 0);
      QVERIFY2(most / mean < 1.3, "the shares are unbalanced");
    }
  }

  void refusals() {
    auto many = plan_pipeline(weights_, 1000, 4, 4, StreamOptions{});
    QVERIFY(!many.is_ok());
    auto cuts = plan_pipeline(weights_, 3, 4, 4, StreamOptions{}, {5});
    QVERIFY(!cuts.is_ok());
    auto falling = plan_pipeline(weights_, 3, 4, 4, StreamOptions{}, {5, 3});
    QVERIFY(!falling.is_ok());
  }

  // A share that cannot make its engine, or whose device fails mid-clip, stops the decode with
  // its error; a rerun with working devices gives the single-backend result.
  void failingDeviceStopsTheDecode() {
    test::TinyCpuModel m;
    QVERIFY(test::make_first_device(m, weights_).is_ok());
    auto plan = plan_pipeline(weights_, 3, 4, 4, StreamOptions{}, {5, 13});
    QVERIFY(plan.is_ok());
    // share 2 (up_blocks.2.resnets.1 on) fails in a later chunk
    for (const auto& [share, after] :
         std::vector<std::pair<int, int>>{{1, -1}, {2, -1}, {1, 9}, {2, 16}}) {
      PipelineStats stats;
      auto r = decode_latent_pipelined(
          *m.model, test::cpu_devices(weights_, {.fail = share, .fail_after = after}), *plan,
          latent_, {}, {}, &stats);
      QVERIFY(!r.is_ok());
      const std::string msg = r.status().to_string();
      qInfo("share %d failing after %d convolutions: %s", share, after, msg.c_str());
      QVERIFY(msg.find("device share " + std::to_string(share)) != std::string::npos);
      QVERIFY(msg.find("injected") != std::string::npos);
    }
    check(*m.model, *plan, StreamOptions{}, "after failures");
  }

  // Through the job layer (Session::run, the CLI's and the studio's entry point): a decode job
  // with --devices 0,1 gives the one-device job's frames and reports each device's share; a
  // second job reuses the devices' engines; tiling and a Wan VAE are refused.
  void sessionDecodesOnSeveralDevices() {
    Session session([](const RunOptions&) { return create_cpu_backend({.threads = 1}); });
    auto weights = std::make_shared<const VaeWeights>(weights_);
    JobSpec job;
    job.kind = JobKind::kDecode;
    job.weights = weights;
    job.latent = std::make_shared<const HostTensor>(latent_);
    auto run = [&](const std::string& devices, std::vector<HostTensor>& frames, JobResult& r) {
      return test::run_job_on(session, job, devices, frames, r);
    };
    std::vector<HostTensor> one, two, again;
    JobResult r1, r2, r3;
    QVERIFY(run("", one, r1).is_ok());
    const Status st = run("0,1", two, r2);
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QVERIFY(r1.device_shares.empty());
    QCOMPARE(static_cast<int>(r2.device_shares.size()), 2);
    QVERIFY(r2.device_shares[1].share.find("decoder.conv_out") != std::string::npos);
    QCOMPARE(two.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) QCOMPARE(max_abs_diff(two[i], one[i]), 0.0);
    QVERIFY(run("0,1", again, r3).is_ok());  // the devices' engines kept
    QCOMPARE(again.size(), one.size());
    QCOMPARE(max_abs_diff(again.back(), one.back()), 0.0);

    job.options.tiling = "exact";
    std::vector<HostTensor> none;
    JobResult r4;
    const Status tiled = run("0,1", none, r4);
    QCOMPARE(tiled.code(), StatusCode::kInvalidArgument);
    job.options.tiling = "off";
    job.options.pipeline_cuts = "3,5";
    QCOMPARE(run("0,1", none, r4).code(), StatusCode::kInvalidArgument);  // one cut too many
  }

  void cancelStopsEveryShare() {
    test::TinyCpuModel m;
    QVERIFY(test::make_first_device(m, weights_).is_ok());
    auto plan = plan_pipeline(weights_, 2, 4, 4, StreamOptions{});
    QVERIFY(plan.is_ok());
    CancelToken cancel;
    StreamHooks hooks;
    hooks.cancel = &cancel;
    hooks.on_chunk = [&](int64_t, const HostTensor&) {
      cancel.request();
      return Status::ok();
    };
    auto r =
        decode_latent_pipelined(*m.model, test::cpu_devices(weights_), *plan, latent_, {}, hooks);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kCancelled);
  }
};

QTEST_GUILESS_MAIN(TstPipelineDecode)
#include "tst_pipeline_decode.moc"
