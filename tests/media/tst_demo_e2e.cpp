// End to end with the trained demo model. Held-out clips of
// resources/demo/clips go through
//   the video reader (media::read_clip on the JPEG frame directory),
//   the engine's round trip, exactly as `seedvae roundtrip --backend cpu` runs it (plan_padding +
//   apply_padding (mirror), encode_video with chunk 1, posterior mean, decode_latent with chunk 1,
//   remove_padding, clamp to [-1, 1]; CPU backend; the demo weights found by find_demo_weights),
//   the writer (media::write_clip to a PNG frame directory, lossless)
// and are read back with the reader. Three engine runs: ladybird and boats as they are
// (256x256x17), and ladybird resized to 249x245 with 14 frames (padding and trim). On the frames
// read back, two kinds of checks:
//   1. a quality floor per case: the PSNR the shipped weights reach, measured, minus a margin
//      (kFloors). It catches a regression of the model or the engine, and gross pipeline bugs
//      (colour order, value range, padding taken off the wrong side).
//   2. alignment checks that do not depend on the absolute quality: the reconstruction is closer
//      to the original at the same frame index than one frame off (temporal), at the right pixel
//      registration than shifted by the padding offsets or 2 pixels (spatial, padded case), and in
//      RGB order than in BGR (channel), each by a stated margin. They catch what the floor cannot
//      while the model is weak (a one-frame shift costs boats only 0.7 dB), and better weights
//      only widen them. (They do need a model that reconstructs each frame: an early, undertrained
//      model, 14.6 dB on boats and collapsing over the later frames, failed them too.)
// checksCatchPipelineBugs() applies simulated bugs to the reconstructions (no extra engine run),
// prints what every check says about each, and asserts that the checks named for that bug catch it,
// on the reconstruction and on the original (a perfect model with that bug).
//
// The demo model is part of the product: without it this test FAILS, it never skips.
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/media/metrics.h"
#include "core/media/vae_padding.h"
#include "core/media/video_io.h"
#include "core/schedule/streaming.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"
#include "tests/media/media_test_util.h"

using namespace seedvae;
using namespace seedvae::test;

namespace {

namespace fs = std::filesystem;

// ---- 1. Quality floors of the shipped demo model ----------------------------------------------
// PSNR on the [0, 1] scale over every value of the clip (media::compare_clips, the number
// `seedvae roundtrip` prints), between the 8-bit frames read back from the PNG output and the
// frames the reader produced from the JPEG clip.
//
// The quality target (docs/demo-model.md, eval_clips.py --min-psnr) is 26 dB on every held-out
// clip. The shipped weights (resources/demo/demo_vae.safetensors, sha256 5fea20aa8d3319ef...) meet
// it on all four: the lowest is boats (26.23 dB through eval_clips.py); the mean is 31.40 dB.
// Each floor is what those weights measure minus kFloorMarginDb, but never below the 26 dB
// target (floor_db() below): so boats asserts the target itself, and ladybird's floors, far
// above it, still fail when the model or the engine gets worse. When better weights land,
// re-measure and raise the floors with them (never lower them).
//
// Measured with the shipped weights (x86-64, CPU backend; channels [40, 64, 96, 96], 70,025
// training steps):
//   `seedvae roundtrip resources/demo/clips/<clip> --backend cpu` (PSNR / SSIM):
//     ladybird 41.06 / 0.983, boats 26.23 / 0.827 (cat 30.38 / 0.822, forest 27.95 / 0.683);
//     this test, on the 8-bit PNG frames read back: ladybird 40.99, boats 26.22 dB
//   case 2 (ladybird from frame 2, 14 frames at 249x245), this test: 36.97 dB
// The test prints each case's PSNR ("<case>: PSNR ... dB"): the numbers to put in kLadybirdFull,
// kBoatsFull and kLadybirdPadded below where they are higher than the values there.
constexpr double kTargetDb = 26.0;
constexpr double kFloorMarginDb = 1.0;

// ---- 2. Alignment margins (independent of the model's quality) --------------------------------
// "Closer by m dB": PSNR(reconstruction, original at the right alignment) minus
// PSNR(reconstruction, original at a wrong one) >= m. A pipeline bug reverses the order (the
// reconstruction is then closer to the shifted original); the bug test asserts that it is reversed
// by at least the same m. Measured with an early, weaker model (sha256 4c4f4bae...; the test
// prints them; the current weights widen every one: temporal boats 2.55, ladybird 5.46, case 2 2.58
// dB; spatial 1.73 dB; channel boats 7.32, ladybird 22.32, case 2 16.21 dB):
//   temporal, +-1 frame, on frames 1..T-2 of each case: boats 0.73 dB (same frame 19.35 dB, t-1
//     18.62, t+1 18.25), ladybird 1.40 dB, ladybird case 2 1.15 dB. The simulated one-frame
//     shifts reverse it by 0.71 dB or more, the frames trimmed at the start of case 2 by 2.0 dB.
//   spatial, case 2, shifts of +-(3, 7), +-(3, 0), +-(0, 7) (the padding offsets: rows, columns)
//     and 2 pixels each way, on the interior (8-pixel border): 0.61 dB (2 pixels, columns); the
//     padding offsets 1.94 dB or more. Padding trimmed on the wrong side reverses it by 1.85 dB or
//     more. (Not on boats: its reconstruction is smeared along the horizontal pan and matches the
//     original shifted 1-2 pixels in x slightly better, +0.08 dB.)
//   channel, RGB vs BGR over the whole clip: boats 5.87 dB, ladybird 16.36, case 2 13.65 dB.
// Each margin is about half of the smallest measured value (0.4-0.5x): robust to small changes
// of the weights or the platform, yet a clear preference for the right alignment. Better weights
// only widen these gaps (a perfect model has +inf).
constexpr double kTemporalMarginDb = 0.3;
constexpr double kSpatialMarginDb = 0.3;
constexpr double kChannelMarginDb = 3.0;
// A bug the floor is named to catch must land at least this far below the floor (both on the
// reconstruction and on the original: a perfect model with the bug).
constexpr double kBugBelowFloorDb = 2.0;

constexpr int64_t kClipFrames = 17, kClipSize = 256;
// Case 2's reader options: not multiples of 8 (nor 16, nor even for the width), a frame count
// that is not 4n + 1, and a first frame other than 0.
constexpr int kPaddedWidth = 249, kPaddedHeight = 245;
constexpr int64_t kPaddedFirst = 2, kPaddedFrames = 14;

// The three cases. ladybird (smooth, slow zoom; high PSNR): colour-order, range and padding bugs
// land 2.7-20 dB below its floors. boats (the largest pan of the four clips, ~5.6 px a frame): the
// temporal check. Case 2 is on ladybird: there every padding/trim bug lands >= 2.7 dB below the
// floor (on boats 0.85-3 dB, not enough: a wrong top trim gives 17.74 against its 18.6) and its
// spatial registration has a clean peak (boats' does not, see above).
struct CaseSpec {
  const char* tag;
  const char* clip;
  bool padded;  // case 2's reader options
  // The highest PSNR any shipped weights measured on this case (see above): the shipped
  // weights' own unless an earlier model measured more, since floors are never lowered.
  double best_shipped_db;
  double measured_floor_db() const { return best_shipped_db - kFloorMarginDb; }
  double floor_db() const { return std::max(measured_floor_db(), kTargetDb); }
};
constexpr CaseSpec kLadybirdFull{"ladybird 256x256x17", "ladybird", false, 40.99};
constexpr CaseSpec kBoatsFull{"boats 256x256x17", "boats", false, 26.22};
constexpr CaseSpec kLadybirdPadded{"ladybird 249x245x14", "ladybird", true, 36.97};

fs::path clips_dir() {
  return fs::path(SEEDVAE_DEMO_CLIPS_DIR);
}

std::string str(double v, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// What `seedvae roundtrip` does between reading and writing (app/cli_main.cpp cmd_roundtrip with
// its defaults: --multiple 8, --temporal-pad mirror, --chunk 1, --tiling off).
struct RoundTrip {
  media::PadPlan plan;
  HostTensor padded_input;  // what the encoder saw
  HostTensor decoded;       // the decoder's output, padding included, unclamped
  HostTensor output;        // trimmed and clamped: what is written
  double seconds = 0;
};

Result<RoundTrip> round_trip(VaeModel& model, const HostTensor& video) {
  const auto t0 = std::chrono::steady_clock::now();
  RoundTrip r;
  const Shape& s = video.shape();
  r.plan = media::plan_padding(s.t(), s.h(), s.w(), 8);
  SEEDVAE_ASSIGN_OR_RETURN(r.padded_input,
                           media::apply_padding(video, r.plan, media::TemporalPad::kMirror));
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor moments, encode_video(model, r.padded_input, {1}));
  SEEDVAE_ASSIGN_OR_RETURN(r.decoded, decode_latent(model, moments_mean(moments), {1}));
  SEEDVAE_ASSIGN_OR_RETURN(r.output, media::remove_padding_checked(r.decoded, r.plan));
  for (float& v : r.output.f32()) v = std::clamp(v, -1.f, 1.f);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Writes `video` as a PNG frame directory and reads it back with the reader.
Result<HostTensor> write_and_read_back(const fs::path& dir, const HostTensor& video) {
  SEEDVAE_TRY(media::write_clip(dir, video, media::WriteOptions{24}));
  SEEDVAE_ASSIGN_OR_RETURN(media::Clip back, media::read_clip(dir));
  return std::move(back.video);
}

// ---- PSNR at an alignment -----------------------------------------------------------------------
// PSNR (peak 1, [0, 1] scale, as media::compare_clips) of r[c, t, y, x] against
// o[c, t + dt, y + dy, x + dx] over the interior t in [bt, T - bt), y in [bs, H - bs),
// x in [bs, W - bs) of two same-shape [1, 3, T, H, W] clips. With everything 0 it is
// compare_clips' PSNR of the whole clip. +inf for identical values; NaN for an offset larger than
// its border.
struct Offset {
  int64_t dt = 0, dy = 0, dx = 0;
};
double psnr_at(const HostTensor& r, const HostTensor& o, Offset off = {}, int64_t bt = 0,
               int64_t bs = 0) {
  const Shape& s = r.shape();
  const int64_t T = s.t(), H = s.h(), W = s.w();
  if (o.shape() != s || std::abs(off.dt) > bt || std::abs(off.dy) > bs || std::abs(off.dx) > bs ||
      T <= 2 * bt || H <= 2 * bs || W <= 2 * bs) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const float* a = r.data<float>();
  const float* b = o.data<float>();
  double se = 0;
  int64_t n = 0;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t t = bt; t < T - bt; ++t)
      for (int64_t y = bs; y < H - bs; ++y) {
        const float* ra = a + ((c * T + t) * H + y) * W;
        const float* ob = b + ((c * T + t + off.dt) * H + y + off.dy) * W + off.dx;
        for (int64_t x = bs; x < W - bs; ++x) {
          const double d = (static_cast<double>(ra[x]) - ob[x]) * 0.5;  // [-1,1] -> [0,1]
          se += d * d;
        }
        n += W - 2 * bs;
      }
  const double mse = se / static_cast<double>(n);
  return mse == 0 ? std::numeric_limits<double>::infinity() : -10.0 * std::log10(mse);
}

// PSNR of each frame, "0: 18.9, 1: 18.7, ..." (diagnostics: where in time a clip loses quality).
std::string per_frame_psnr(const HostTensor& a, const HostTensor& b) {
  std::string out;
  for (int64_t t = 0; t < a.shape().t(); ++t) {
    const std::vector<int64_t> one{t};
    out += (t ? ", " : "") + std::to_string(t) + ": " +
           str(psnr_at(frames_of(a, one), frames_of(b, one)), 1);
  }
  return out;
}

// ---- Simulated bugs (host-only transforms of a [1, 3, T, H, W] clip) ----------------------------
HostTensor map_values(const HostTensor& v, float (*f)(float)) {
  HostTensor r = v;
  for (float& x : r.f32()) x = f(x);
  return r;
}
HostTensor swap_red_blue(const HostTensor& v) {  // RGB <-> BGR
  const Shape& s = v.shape();
  return clip_from(s.t(), s.h(), s.w(), [&](int64_t c, int64_t t, int64_t y, int64_t x) {
    return at(v, 2 - c, t, y, x);
  });
}
// A [-1, 1] -> [0, 1] conversion where none belongs: (x + 1) / 2, a washed-out clip.
HostTensor range_halved(const HostTensor& v) {
  return map_values(v, [](float x) { return (x + 1.f) * 0.5f; });
}
// A [0, 1] -> [-1, 1] conversion applied to data already in [-1, 1]: 2x - 1, clamped.
HostTensor range_doubled(const HostTensor& v) {
  return map_values(v, [](float x) { return std::clamp(2.f * x - 1.f, -1.f, 1.f); });
}
// Frame t shows frame t + delta (clamped to the clip): an off-by-one trim of either end.
HostTensor shift_frames(const HostTensor& v, int64_t delta) {
  std::vector<int64_t> ts;
  for (int64_t t = 0; t < v.shape().t(); ++t) {
    ts.push_back(std::clamp<int64_t>(t + delta, 0, v.shape().t() - 1));
  }
  return frames_of(v, ts);
}
// The trimmed window of a padded [1, 3, T', H', W'] tensor starting at (t0, y0, x0) instead of
// (0, 0, 0): padding taken off the wrong side.
HostTensor crop(const HostTensor& padded, const media::PadPlan& p, int64_t t0, int64_t y0,
                int64_t x0) {
  return clip_from(p.frames, p.height, p.width, [&](int64_t c, int64_t t, int64_t y, int64_t x) {
    return std::clamp(at(padded, c, t0 + t, y0 + y, x0 + x), -1.f, 1.f);
  });
}

// ---- The checks ---------------------------------------------------------------------------------
enum CheckKind { kFloor = 0, kTemporal, kSpatial, kChannel, kNumChecks };
constexpr const char* kCheckNames[kNumChecks] = {"floor", "temporal", "spatial", "channel"};
constexpr unsigned bit(CheckKind k) {
  return 1u << k;
}

struct CheckResult {
  bool applies = false;
  double value = 0;     // floor: PSNR; the others: PSNR at the right alignment minus the best wrong
  double required = 0;  // passes when value >= required
  std::string detail;   // the numbers behind value, for messages
  bool passes() const { return value >= required; }  // NaN fails
  // A bug is caught when the check fails by a margin: a floor check at least kBugBelowFloorDb below
  // the floor, an alignment check reversed (the wrong alignment closer by at least the margin).
  bool catches(CheckKind k) const {
    return k == kFloor ? value <= required - kBugBelowFloorDb : value <= -required;
  }
};

// The spatial shifts of case 2: the padding offsets (rows dy, columns dx of the padding at the
// bottom/right) both ways, and 2 pixels each way.
std::vector<Offset> spatial_shifts(const media::PadPlan& p) {
  const int64_t dy = p.padded_height - p.height, dx = p.padded_width - p.width;
  std::vector<Offset> v;
  for (int64_t sgn : {1, -1}) {
    v.push_back({0, sgn * dy, sgn * dx});
    v.push_back({0, sgn * dy, 0});
    v.push_back({0, 0, sgn * dx});
    v.push_back({0, sgn * 2, 0});
    v.push_back({0, 0, sgn * 2});
  }
  v.erase(std::remove_if(v.begin(), v.end(), [](Offset o) { return o.dy == 0 && o.dx == 0; }),
          v.end());
  return v;
}

// Every check of a case on `out` against the original `orig`. `shifts`: the spatial shifts (empty:
// no spatial check).
std::array<CheckResult, kNumChecks> evaluate(const CaseSpec& cs, const HostTensor& out,
                                             const HostTensor& orig,
                                             const std::vector<Offset>& shifts) {
  std::array<CheckResult, kNumChecks> r;
  {
    CheckResult& c = r[kFloor];
    c.applies = true;
    c.value = psnr_at(out, orig);
    c.required = cs.floor_db();
    const std::string measured = "best shipped weights " + str(cs.best_shipped_db) + " dB - " +
                                 str(kFloorMarginDb, 1) + " dB";
    c.detail =
        "PSNR " + str(c.value) + " dB, floor " + str(c.required) + " dB (" +
        (c.required > cs.measured_floor_db() ? "the 26 dB target; " + measured + " is below it"
                                             : measured) +
        ")";
  }
  {
    CheckResult& c = r[kTemporal];
    c.applies = true;
    const double same = psnr_at(out, orig, {}, 1, 0);
    const double before = psnr_at(out, orig, {-1, 0, 0}, 1, 0);
    const double after = psnr_at(out, orig, {1, 0, 0}, 1, 0);
    c.value = same - std::max(before, after);
    c.required = kTemporalMarginDb;
    c.detail = "PSNR of frames 1.." + std::to_string(out.shape().t() - 2) +
               " against the original's same frame " + str(same) + " dB, frame t-1 " + str(before) +
               " dB, frame t+1 " + str(after) + " dB";
  }
  if (!shifts.empty()) {
    CheckResult& c = r[kSpatial];
    c.applies = true;
    int64_t border = 0;
    for (const Offset& s : shifts) border = std::max({border, std::abs(s.dy), std::abs(s.dx)});
    ++border;
    const double right = psnr_at(out, orig, {}, 0, border);
    double best = -std::numeric_limits<double>::infinity();
    Offset worst;
    for (const Offset& s : shifts) {
      const double p = psnr_at(out, orig, s, 0, border);
      if (std::isnan(p) || p > best) {
        best = p;
        worst = s;
        if (std::isnan(p)) break;
      }
    }
    c.value = right - best;
    c.required = kSpatialMarginDb;
    c.detail = "PSNR (interior, " + std::to_string(border) +
               "-pixel border) at the right position " + str(right) +
               " dB, best shifted: " + str(best) + " dB at (rows " + std::to_string(worst.dy) +
               ", columns " + std::to_string(worst.dx) + ")";
  }
  {
    CheckResult& c = r[kChannel];
    c.applies = true;
    const double rgb = r[kFloor].value;
    const double bgr = psnr_at(out, swap_red_blue(orig));
    c.value = rgb - bgr;
    c.required = kChannelMarginDb;
    c.detail = "PSNR against the original in RGB " + str(rgb) + " dB, in BGR " + str(bgr) + " dB";
  }
  return r;
}

// The failure message of a check that fails on the engine's output.
std::string failure(const CaseSpec& cs, CheckKind k, const CheckResult& c) {
  std::string what;
  switch (k) {
    case kFloor:
      what =
          "PSNR below the quality floor of the shipped demo model (a regression of the model, "
          "the engine or the pipeline; with new weights, re-measure the floors)";
      break;
    case kTemporal:
      what =
          "the reconstruction is not closer to the original at the same frame than one frame "
          "off by " +
          str(kTemporalMarginDb, 1) +
          " dB (a frame shifted in the reader, the temporal padding or the trim)";
      break;
    case kSpatial:
      what =
          "the reconstruction is not closer to the original at the right pixel position than "
          "shifted by " +
          str(kSpatialMarginDb, 1) +
          " dB (padding added or removed on the wrong side, or the frames shifted)";
      break;
    case kChannel:
      what = "the reconstruction is not closer to the original in RGB order than in BGR by " +
             str(kChannelMarginDb, 1) + " dB (a colour-order bug in the reader or the writer)";
      break;
    default: break;
  }
  return std::string("\n  ") + cs.tag + ", " + kCheckNames[k] + " check: " + what + ": " +
         c.detail + (k == kFloor ? "" : "; margin " + str(c.value) + " dB");
}

struct CaseData {
  HostTensor original, read_back;
  RoundTrip rt;
  std::vector<Offset> shifts;  // spatial shifts (case 2 only)
  bool done = false;
};

}  // namespace

class TestDemoE2e : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  std::unique_ptr<Backend> backend_;
  std::optional<VaeModel> model_;
  CaseData ladybird_full_, boats_full_, ladybird_padded_;  // kept for checksCatchPipelineBugs()

  // Reader -> engine -> writer -> reader for one case; checks shape, file count, the writer's
  // losslessness and every check of the case.
  void run_case(const CaseSpec& cs, CaseData* d) {
    media::ReadOptions ro;
    Shape expected{1, 3, kClipFrames, kClipSize, kClipSize};
    if (cs.padded) {
      ro.first_frame = kPaddedFirst;
      ro.max_frames = kPaddedFrames;
      ro.resize_width = kPaddedWidth;
      ro.resize_height = kPaddedHeight;
      expected = Shape{1, 3, kPaddedFrames, kPaddedHeight, kPaddedWidth};
    }
    auto clip = media::read_clip(clips_dir() / cs.clip, ro);
    QVERIFY2(clip.is_ok(), clip.status().to_string().c_str());
    QCOMPARE(clip->video.shape(), expected);
    d->original = std::move(clip->video);
    const std::string tag = cs.tag;

    auto r = round_trip(*model_, d->original);
    QVERIFY2(r.is_ok(), (tag + ": round trip: " + r.status().to_string()).c_str());
    const fs::path dir =
        fs::path(tmp_.path().toStdString()) / (std::string(cs.clip) + (cs.padded ? "-padded" : ""));
    auto back = write_and_read_back(dir, r->output);
    QVERIFY2(back.is_ok(), (tag + ": write/read back: " + back.status().to_string()).c_str());
    // Exactly the input's frame count and size, through the writer and the reader.
    QCOMPARE(r->output.shape(), expected);
    QCOMPARE(back->shape(), expected);
    QCOMPARE(static_cast<int64_t>(list_dir(dir).size()), expected.t());
    // The PNG output is the clamped reconstruction to within 8-bit rounding (half a step of 2/255).
    const double quant = max_abs_diff(*back, r->output);
    QVERIFY2(quant <= 1.0 / 255 + 1e-5, (tag + ": PNG output off by " + str(quant, 5)).c_str());
    if (cs.padded) {
      QCOMPARE(r->plan.padded_frames, int64_t{17});
      QCOMPARE(r->plan.padded_height, int64_t{248});
      QCOMPARE(r->plan.padded_width, int64_t{256});
      QCOMPARE(r->decoded.shape(), (Shape{1, 3, 17, 248, 256}));
      d->shifts = spatial_shifts(r->plan);
    } else {
      QVERIFY(r->plan.is_identity());
    }
    d->read_back = std::move(*back);
    d->rt = std::move(*r);

    auto q = media::compare_clips(d->read_back, d->original);
    QVERIFY2(q.is_ok(), q.status().to_string().c_str());
    const auto checks = evaluate(cs, d->read_back, d->original, d->shifts);
    // The floor check's PSNR is the CLI's number.
    QVERIFY2(
        std::abs(checks[kFloor].value - q->psnr_db) < 1e-6,
        (tag + ": PSNR " + str(checks[kFloor].value, 6) + " vs compare_clips " + str(q->psnr_db, 6))
            .c_str());
    qInfo("%s: PSNR %.2f dB, SSIM %.4f (floor %.2f dB; target %.0f dB), round trip %.1f s", cs.tag,
          q->psnr_db, q->ssim, cs.floor_db(), kTargetDb, d->rt.seconds);
    qInfo("%s: PSNR per frame (dB): %s", cs.tag, per_frame_psnr(d->read_back, d->original).c_str());
    std::string failures;
    for (int k = 0; k < kNumChecks; ++k) {
      const CheckResult& c = checks[k];
      if (!c.applies) continue;
      qInfo("%s: %-8s %s %.2f dB (required >= %.2f): %s", cs.tag, kCheckNames[k],
            k == kFloor ? "PSNR  " : "margin", c.value, c.required, c.detail.c_str());
      if (!c.passes()) failures += failure(cs, static_cast<CheckKind>(k), c);
    }
    d->done = true;
    QVERIFY2(failures.empty(), ("demo round trip fails:" + failures).c_str());
  }

 private slots:
  void initTestCase() {
    QVERIFY2(tmp_.isValid(), "no temporary directory");
    // The lookup of the CLI and the studio, from the CLI's folder: $SEEDVAE_DEMO_WEIGHTS, then
    // <build>/share/seedvae/demo_vae.safetensors (copied from the source tree at configure time).
    const fs::path weights_path = find_demo_weights(fs::path(SEEDVAE_DEMO_EXE_DIR));
    const fs::path source_copy(SEEDVAE_DEMO_WEIGHTS_SOURCE);
    if (weights_path.empty()) {
      const std::string why =
          "the trained demo model is missing: find_demo_weights(\"" SEEDVAE_DEMO_EXE_DIR
          "\") found no demo_vae.safetensors. It ships as " +
          source_copy.string() +
          (fs::exists(source_copy)
               ? " (present: re-run cmake so cmake/Packaging.cmake copies it into "
                 "<build>/share/seedvae/)"
               : " (absent: the model must be in the source tree)") +
          "; $SEEDVAE_DEMO_WEIGHTS overrides the lookup.";
      QFAIL(why.c_str());
    }
    const char* env = std::getenv("SEEDVAE_DEMO_WEIGHTS");
    if ((env == nullptr || *env == '\0') && fs::exists(source_copy)) {
      // The build tree's copy must be the source tree's file (cmake re-copies it when it changes).
      auto a = sha256_file(weights_path);
      auto b = sha256_file(source_copy);
      QVERIFY2(a.is_ok() && b.is_ok(), "cannot hash the demo weights");
      const std::string why = weights_path.string() + " is not " + source_copy.string() +
                              ": re-run cmake to refresh the build tree's copy";
      QVERIFY2(*a == *b, why.c_str());
    }
    auto weights = load_weights(weights_path);
    QVERIFY2(weights.is_ok(), weights.status().to_string().c_str());
    auto backend = create_cpu_backend();
    QVERIFY2(backend.is_ok(), backend.status().to_string().c_str());
    backend_ = std::move(*backend);
    auto model = VaeModel::create(*backend_, *weights);
    QVERIFY2(model.is_ok(), model.status().to_string().c_str());
    model_.emplace(std::move(*model));
    qInfo("weights %s (%s, sha256 %s), backend %s", weights_path.string().c_str(),
          weights->config.to_string().c_str(), weights->sha256.substr(0, 16).c_str(),
          backend_->name().c_str());
  }

  // ladybird as it is, 256x256x17 (no padding): floor, temporal and channel checks.
  void ladybirdFullClip() { run_case(kLadybirdFull, &ladybird_full_); }

  // boats as it is: floor, temporal (the fastest motion of the clips) and channel checks.
  void boatsFullClip() { run_case(kBoatsFull, &boats_full_); }

  // Case 2, padding and trim: ladybird's frames 2..15 (14: padded to 17 by mirroring) resized to
  // 249x245 (padded to 256x248 at the right and bottom); the output must have exactly 14 frames of
  // 249x245 and match the input. Floor, temporal, spatial and channel checks.
  void ladybirdPaddedClip() { run_case(kLadybirdPadded, &ladybird_padded_); }

  // Each simulated bug, applied to a case's reconstruction and to its original (a perfect model
  // with that bug), must be caught by the checks named for it (CheckResult::catches). The table
  // printed shows what every check says, named or not.
  void checksCatchPipelineBugs() {
    QVERIFY2(ladybird_full_.done && boats_full_.done && ladybird_padded_.done,
             "needs the outputs of the three round trips");
    struct Row {
      const CaseSpec* cs;
      const CaseData* d;
      std::string bug;
      HostTensor with_bug, perfect_with_bug;
      unsigned caught_by;  // bits of CheckKind
    };
    std::vector<Row> rows;
    struct Bug {
      const char* name;
      HostTensor (*apply)(const HostTensor&);
      unsigned caught_by;
    };
    // The range errors only by the floor (7-20 dB below it); R/B by the channel check and the
    // floor (>= 3.8 dB below on boats); a one-frame shift only by the temporal check (boats with
    // it: 18.85 dB, above its floor).
    const Bug bugs[] = {
        {"R and B swapped", swap_red_blue, bit(kChannel) | bit(kFloor)},
        {"[-1,1] taken as [0,1]: (x+1)/2", range_halved, bit(kFloor)},
        {"[0,1] -> [-1,1] twice: 2x-1", range_doubled, bit(kFloor)},
        {"one frame late (first frame dropped)",
         [](const HostTensor& v) { return shift_frames(v, 1); }, bit(kTemporal)},
        {"one frame early (last frame dropped)",
         [](const HostTensor& v) { return shift_frames(v, -1); }, bit(kTemporal)},
    };
    const std::pair<const CaseSpec*, const CaseData*> cases[] = {
        {&kLadybirdFull, &ladybird_full_},
        {&kBoatsFull, &boats_full_},
        {&kLadybirdPadded, &ladybird_padded_}};
    for (const auto& [cs, d] : cases) {
      for (const Bug& b : bugs) {
        rows.push_back({cs, d, b.name, b.apply(d->read_back), b.apply(d->original), b.caught_by});
      }
    }
    // Padding and trim bugs, from case 2's padded decode: the trimmed window taken at the far
    // corner (padding removed from the top/left instead of the bottom/right), the far end in time
    // (the padding frames kept, the first ones dropped). The spatial check reverses for each
    // padding bug (and the floor: >= 2.7 dB below); the trim shows in time (and the floor).
    const RoundTrip& rt = ladybird_padded_.rt;
    const media::PadPlan& p = rt.plan;
    const int64_t dt = p.padded_frames - p.frames, dy = p.padded_height - p.height,
                  dx = p.padded_width - p.width;
    struct Crop {
      const char* name;
      int64_t t0, y0, x0;
      unsigned caught_by;
    };
    const Crop crops[] = {
        {"padding trimmed at the top/left", 0, dy, dx, bit(kSpatial) | bit(kFloor)},
        {"padding trimmed at the top", 0, dy, 0, bit(kSpatial) | bit(kFloor)},
        {"padding trimmed at the left", 0, 0, dx, bit(kSpatial) | bit(kFloor)},
        {"frames trimmed at the start", dt, 0, 0, bit(kTemporal) | bit(kFloor)},
    };
    for (const Crop& c : crops) {
      rows.push_back({&kLadybirdPadded, &ladybird_padded_, c.name,
                      crop(rt.decoded, p, c.t0, c.y0, c.x0),
                      crop(rt.padded_input, p, c.t0, c.y0, c.x0), c.caught_by});
    }

    std::string failures;
    qInfo(
        "bug simulation: PSNR (floor) and the margins of the alignment checks (required >= "
        "temporal %.1f, spatial %.1f, channel %.1f dB; a bug is caught by a reversed margin, "
        "<= minus that, or a PSNR %.1f dB below the floor); [x]: the check asserted to catch it",
        kTemporalMarginDb, kSpatialMarginDb, kChannelMarginDb, kBugBelowFloorDb);
    for (const Row& row : rows) {
      const auto got = evaluate(*row.cs, row.with_bug, row.d->original, row.d->shifts);
      const auto perfect = evaluate(*row.cs, row.perfect_with_bug, row.d->original, row.d->shifts);
      std::string line;
      for (int k = 0; k < kNumChecks; ++k) {
        const auto kind = static_cast<CheckKind>(k);
        const bool named = (row.caught_by & bit(kind)) != 0;
        if (!got[k].applies) {
          line += std::string("  ") + kCheckNames[k] + "    -  ";
          continue;
        }
        line += std::string(" ") + (named ? "[x]" : "[ ]") + kCheckNames[k] + " " +
                str(got[k].value) + (k == kFloor ? " (" + str(got[k].required) + ")" : "");
        if (!named) continue;
        for (const auto* res : {&got, &perfect}) {
          const CheckResult& c = (*res)[k];
          if (c.catches(kind)) continue;
          failures += std::string("\n  ") + row.cs->tag + ", " + row.bug + ": the " +
                      kCheckNames[k] + " check does not catch it" +
                      (res == &perfect ? " with a perfect model" : "") + ": " + c.detail +
                      (k == kFloor ? " (needs <= floor - " + str(kBugBelowFloorDb, 1) + " dB)"
                                   : "; margin " + str(c.value) + " dB, needs <= -" +
                                         str(c.required, 1) + " dB");
        }
      }
      qInfo("%-20s %-38s%s; perfect model with the bug: PSNR %.2f dB", row.cs->tag, row.bug.c_str(),
            line.c_str(), perfect[kFloor].value);
    }
    QVERIFY2(failures.empty(), ("the checks would not catch:" + failures).c_str());
    // The right window of the padded decode is what was written (the test's crop is faithful).
    QVERIFY(max_abs_diff(crop(rt.decoded, p, 0, 0, 0), rt.output) == 0);
  }
};

QTEST_GUILESS_MAIN(TestDemoE2e)
#include "tst_demo_e2e.moc"
