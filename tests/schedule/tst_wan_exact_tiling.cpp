// Exact tiling of the Wan2.1 and Wan2.2 networks (ExactTilingBackend, core/schedule/
// exact_tiling.h) on the CPU backend with the tiny synthetic models: streamed encodes and decodes
// through exact tiles (several per frame at every level, none dividing its frame) equal the
// untiled run bit for bit; the tile executions of a chunk are what exact_steps_per_chunk predicts;
// a dry run counts the device peak of a tiled run far below the untiled one's. Halo tiles
// (wan_tiles.h) equal the untiled decode and hold less on the device.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/counting_backend.h"
#include "core/cpu/cpu_backend.h"
#include "core/schedule/exact_tiling.h"
#include "core/schedule/tiled.h"
#include "core/schedule/wan_stream.h"
#include "core/schedule/wan_tiles.h"
#include "tests/support/synthetic_video.h"

using namespace seedvae;

namespace {

#define ASSIGN_OK(decl, expr)                                           \
  auto SEEDVAE_CONCAT_(r_, __LINE__) = (expr);                          \
  QVERIFY2(SEEDVAE_CONCAT_(r_, __LINE__).is_ok(),                       \
           SEEDVAE_CONCAT_(r_, __LINE__).status().to_string().c_str()); \
  decl = std::move(SEEDVAE_CONCAT_(r_, __LINE__)).value()

WanConfig config_of(const QString& name) {
  return name == "wan21" ? WanConfig::wan21_tiny() : WanConfig::wan22_tiny();
}

using test::synthetic_video;

double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  auto d = compare(a, b);
  return d.is_ok() ? d->max_abs : INFINITY;
}

// Steps of every chunk of a stream through `tiles`: the backend's tile executions when each chunk
// came out.
StreamHooks record_steps(const ExactTilingBackend& tiles, std::vector<int64_t>& steps) {
  StreamHooks h;
  h.on_chunk = [&tiles, &steps](int64_t, const HostTensor&) {
    steps.push_back(tiles.steps_done());
    return Status::ok();
  };
  return h;
}

// Three latent frames of h x w, standard normal.
HostTensor normal_latent(const WanConfig& cfg, int64_t h, int64_t w, unsigned seed) {
  HostTensor z(DType::kF32, Shape{1, cfg.z_dim, 3, h, w});
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  for (float& v : z.f32()) v = n(rng);
  return z;
}

}  // namespace

class tst_WanExactTiling : public QObject {
  Q_OBJECT

  std::unique_ptr<Backend> cpu_;

 private slots:
  void initTestCase() {
    auto b = create_cpu_backend();
    QVERIFY2(b.is_ok(), b.status().to_string().c_str());
    cpu_ = std::move(*b);
  }

  void exactEqualsUntiled_data() {
    QTest::addColumn<QString>("config");
    QTest::addColumn<int>("tile_h");
    QTest::addColumn<int>("tile_w");
    QTest::newRow("wan21 24x28") << QString("wan21") << 24 << 28;
    QTest::newRow("wan22 24x28") << QString("wan22") << 24 << 28;
    QTest::newRow("wan21 40x16") << QString("wan21") << 40 << 16;
    QTest::newRow("wan22 40x16") << QString("wan22") << 40 << 16;
  }
  // A 9-frame 64x80 clip encoded and its latent decoded in upstream's chunks (1, 4, 4 frames; 3
  // latent frames one by one), untiled and through exact tiles. 24x28 px: 3x3 shifted tiles of
  // 22x27 px at full resolution and 3x3 at every lower level (3x4 of the 8x10 latent); 40x16 px:
  // 2x5 tiles of 32x16 (Wan2.1: 2x5 of 4x2 latent pixels).
  void exactEqualsUntiled() {
    QFETCH(QString, config);
    QFETCH(int, tile_h);
    QFETCH(int, tile_w);
    const WanConfig cfg = config_of(config);
    const VaeWeights weights = synthesize_wan_weights(cfg, wan_reference_seed(cfg.family, false));
    const int64_t H = 64, W = 80;
    const HostTensor video = synthetic_video(9, H, W, 1);
    WanStreamOptions options;            // upstream's chunking, latent normalised, clamp
    options.stream.async_tiles = false;  // each chunk's hooks run before the next chunk
    WanStreamOptions raw = options;
    raw.clamp = false;

    ASSIGN_OK(WanModel untiled, WanModel::create(*cpu_, weights));
    ASSIGN_OK(const WanEncoded ref, wan_encode(untiled, video, options));
    ASSIGN_OK(const HostTensor ref_dec, wan_decode(untiled, ref.latent, raw));

    const ExactTilingOptions tile{.tile_h = tile_h, .tile_w = tile_w};
    ExactTilingBackend tiles(*cpu_, tile);
    tiles.set_frame(H, W);
    ASSIGN_OK(WanModel exact, WanModel::create(tiles, weights));
    std::vector<int64_t> enc_steps, dec_steps;
    ASSIGN_OK(const WanEncoded ex,
              wan_encode(exact, video, options, record_steps(tiles, enc_steps)));
    const int64_t encode_steps = tiles.steps_done();
    ASSIGN_OK(const HostTensor ex_dec,
              wan_decode(exact, ref.latent, raw, record_steps(tiles, dec_steps)));
    // the decoder's output layer (Wan2.2: before unpatchify, at half the resolution)
    QCOMPARE(tiles.last_conv_tiles(), ((H + tile_h - 1) / tile_h) * ((W + tile_w - 1) / tile_w));

    const double mu = max_abs_diff(ex.mu, ref.mu), log_var = max_abs_diff(ex.log_var, ref.log_var);
    const double dec = max_abs_diff(ex_dec, ref_dec);
    qInfo("%s exact (%dx%d px tiles) vs untiled, max abs: mu %.3g, log_var %.3g, decode %.3g",
          qPrintable(config), tile_h, tile_w, mu, log_var, dec);
    // The same arithmetic on the same values: the convolutions' windows hold the untiled input's
    // values, the RMS norms are the CPU kernel's arithmetic (core/cpu/rms_norm.h).
    QCOMPARE(mu, 0.0);
    QCOMPARE(log_var, 0.0);
    QCOMPARE(dec, 0.0);

    // Progress: the later chunks' tile executions are what a dry run predicts.
    QCOMPARE(enc_steps.size(), size_t{3});
    QCOMPARE(dec_steps.size(), size_t{3});
    ASSIGN_OK(const int64_t enc_per_chunk, exact_steps_per_chunk(cfg, true, H, W, tile));
    ASSIGN_OK(const int64_t dec_per_chunk, exact_steps_per_chunk(cfg, false, H, W, tile));
    QCOMPARE(enc_steps[2] - enc_steps[1], enc_per_chunk);
    QCOMPARE(enc_steps[1] - enc_steps[0], enc_per_chunk);
    QCOMPARE(dec_steps[2] - dec_steps[1], dec_per_chunk);
    QCOMPARE(dec_steps[1] - dec_steps[0], dec_per_chunk);
    QVERIFY(enc_steps[0] < enc_per_chunk);  // the first chunk skips the temporal resamplers
    QCOMPARE(enc_steps[2], encode_steps);
  }

  void dryRunPeakBelowUntiled_data() {
    QTest::addColumn<QString>("config");
    QTest::newRow("wan21") << QString("wan21");
    QTest::newRow("wan22") << QString("wan22");
  }
  // The counted device peak of a 256x256 exact run with 64-px tiles (the device model's weights
  // excluded: exact mode holds one layer's) against the untiled run's activations, for a first and
  // a later chunk of encode and decode.
  void dryRunPeakBelowUntiled() {
    QFETCH(QString, config);
    const WanConfig cfg = config_of(config);
    const int64_t H = 256, W = 256;
    const int sf = cfg.spatial_factor();
    for (const bool encode : {true, false}) {
      auto input = [&](int64_t frames) {
        return encode ? Shape{1, cfg.in_channels, frames, H, W}
                      : Shape{1, cfg.z_dim, frames, H / sf, W / sf};
      };
      const std::vector<int64_t> chunks{1, encode ? 4 : 1};

      CountingBackend counting;
      ASSIGN_OK(WanModel untiled,
                WanModel::create(counting, cfg, [&](const std::string&, const Shape& s) {
                  return Result<Tensor>(counting.declare_weight(s));
                }));
      const int64_t resident = counting.memory_stats().current_bytes;
      CausalState state;
      for (const int64_t frames : chunks) {
        const Tensor x = counting.declare(input(frames));
        QVERIFY((encode ? untiled.encode_chunk(x, state) : untiled.decode_chunk(x, state)).is_ok());
      }
      const int64_t untiled_peak = counting.memory_stats().peak_bytes - resident;

      CountingBackend device;
      auto tiles = ExactTilingBackend::dry_run(device, {.tile_h = 64, .tile_w = 64});
      tiles->set_frame(H, W);
      ASSIGN_OK(WanModel exact,
                WanModel::create(*tiles, cfg, [&](const std::string& name, const Shape& s) {
                  return Result<Tensor>(tiles->declare_weight(s, name));
                }));
      CausalState exact_state;
      for (const int64_t frames : chunks) {
        const Tensor x = tiles->declare(input(frames));
        auto y = encode ? exact.encode_chunk(x, exact_state) : exact.decode_chunk(x, exact_state);
        QVERIFY2(y.is_ok(), y.status().to_string().c_str());
      }
      const int64_t exact_peak = device.memory_stats().peak_bytes;
      qInfo(
          "%s %s 256x256: device peak exact (64-px tiles) %lld bytes, untiled %lld above the "
          "weights; exact host peak %lld, %lld tile executions",
          qPrintable(config), encode ? "encode" : "decode", static_cast<long long>(exact_peak),
          static_cast<long long>(untiled_peak), static_cast<long long>(tiles->host_peak_bytes()),
          static_cast<long long>(tiles->steps_done()));
      QVERIFY(exact_peak > 0);
      QVERIFY(exact_peak * 8 < untiled_peak);
      // the host holds the whole frames the untiled run holds on the device
      QVERIFY(tiles->host_peak_bytes() > untiled_peak / 2);
    }
  }

  // Halo tiles (core/schedule/wan_tiles.h): the decoder's tail per spatial tile on a window of
  // the trunk's output with the decoder's reach around it, tile-major. On the CPU backend the
  // result equals the untiled decode (fp32, within reassociation: 1e-5 of the output's scale) with
  // 3x3 tiles of a 48x52 latent (the middle tiles' windows cropped on every side), with upstream's
  // chunking (and chunked upsampling, Wan2.1), also through the wrapper; with too small a halo the
  // tiles' borders differ.
  void haloTilesEqualUntiled_data() { dryRunPeakBelowUntiled_data(); }
  void haloTilesEqualUntiled() {
    QFETCH(QString, config);
    const WanConfig cfg = config_of(config);
    ASSIGN_OK(WanModel model, WanModel::create(*cpu_, synthesize_wan_weights(cfg, 5)));
    const int64_t sf = cfg.spatial_factor();
    const HostTensor z = normal_latent(cfg, 48, 52, 3);
    const StreamOptions upstream{.chunk_latents = 1, .lone_head = true};
    ASSIGN_OK(HostTensor whole, decode_latent(model, z, upstream));
    float scale = 0;
    for (float v : whole.f32()) scale = std::max(scale, std::abs(v));
    const int64_t halo = wan_decoder_halo(cfg);
    QCOMPARE(halo, int64_t{13});  // 12.25 latent pixels for both families' decoders
    // chunked upsampling too, for one family (the pieces are the decoder's own, tile or not)
    const std::vector<int> piece_sizes =
        config == "wan21" ? std::vector<int>{0, 1} : std::vector<int>{0};
    for (const int pieces : piece_sizes) {
      StreamOptions so = upstream;
      so.hires_chunk_frames = pieces;
      TileRunReport rep;
      TileHooks th{.report = &rep};
      ASSIGN_OK(HostTensor tiled,
                wan_tiled_decode(model, z, {.tile_h = 16 * sf, .tile_w = 18 * sf}, so, {}, &th));
      QCOMPARE(rep.rects.size(), size_t{9});
      QCOMPARE(rep.halo, halo);
      QCOMPARE(rep.tiles_run, int64_t{9 * 3});  // every tile in every chunk
      QCOMPARE(tiled.shape(), whole.shape());
      const double d = max_abs_diff(tiled, whole);
      qInfo("%s halo tiles (pieces %d): max abs %.3g against the untiled decode (scale %.3g)",
            qPrintable(config), pieces, d, double(scale));
      QVERIFY2(d <= 1e-5 * std::max(1.f, scale), qPrintable(QString::number(d)));
    }
    ASSIGN_OK(
        HostTensor short_halo,
        wan_tiled_decode(model, z, {.tile_h = 16 * sf, .tile_w = 18 * sf, .halo = 3}, upstream));
    QVERIFY(max_abs_diff(short_halo, whole) > 1e-3 * std::max(1.f, scale));
    // through the wrapper (WanStreamOptions::tiles): the raw latent in, the clamped video out
    WanStreamOptions wrapped;
    wrapped.normalized_latent = false;
    wrapped.tiles = WanTileOptions{.tile_h = 16 * sf, .tile_w = 18 * sf};
    ASSIGN_OK(HostTensor in_tiles, wan_decode(model, z, wrapped));
    HostTensor clamped = whole;
    for (float& v : clamped.f32()) v = std::clamp(v, -1.f, 1.f);
    QVERIFY(max_abs_diff(in_tiles, clamped) <= 1e-5);
    // bad requests
    QCOMPARE(wan_tiled_decode(model, z, {.tile_h = 0}).status().code(),
             StatusCode::kInvalidArgument);
    HostTensor wrong(DType::kF32, Shape{1, cfg.z_dim + 1, 1, 4, 4});
    QCOMPARE(wan_tiled_decode(model, wrong, {}).status().code(), StatusCode::kInvalidArgument);
  }

  // The job layer's exact decode of a Wan latent (tiled_decode, --tiling exact) runs in halo
  // tiles: the untiled frames chunk by chunk in order through on_chunk (not gathered), one
  // progress step per tile and chunk, each tile's interior to on_tile, the tiles' rectangles
  // covering the frame once; a cancel between tiles stops it with kCancelled.
  void exactDecodeRunsInHaloTiles() {
    const WanConfig cfg = WanConfig::wan21_tiny();
    ASSIGN_OK(WanModel model, WanModel::create(*cpu_, synthesize_wan_weights(cfg, 7)));
    const int64_t sf = cfg.spatial_factor();
    const HostTensor z = normal_latent(cfg, 40, 36, 4);
    const StreamOptions upstream{.chunk_latents = 1, .lone_head = true};
    ASSIGN_OK(HostTensor whole, decode_latent(model, z, upstream));

    TileOptions to;
    to.mode = TilingMode::kExact;
    to.spec = {.tile_h = 24 * sf, .tile_w = 20 * sf, .overlap_h = 0, .overlap_w = 0};
    struct Steps final : ProgressSink {
      std::vector<std::pair<std::string, int64_t>> seen;
      void report(std::string_view stage, int64_t done, int64_t total) override {
        seen.emplace_back(std::string(stage), total);
        (void)done;
      }
    } steps;
    std::vector<HostTensor> chunks;
    std::vector<int64_t> starts;
    StreamHooks hooks;
    hooks.progress = &steps;
    hooks.keep_output = false;
    hooks.on_chunk = [&](int64_t first, const HostTensor& part) {
      starts.push_back(first);
      chunks.push_back(part);
      return Status::ok();
    };
    TileRunReport rep;
    int64_t events = 0, event_pixels = 0;
    TileHooks th;
    th.report = &rep;
    th.on_tile = [&](const TileEvent& ev) {
      ++events;
      event_pixels += ev.data->shape()[3] * ev.data->shape()[4] * ev.data->shape()[2];
      return Status::ok();
    };
    ASSIGN_OK(HostTensor none, tiled_decode(model, z, to, upstream, hooks, &th));
    QVERIFY(none.empty());
    ASSIGN_OK(HostTensor joined, concat_time(chunks));
    QCOMPARE(starts, (std::vector<int64_t>{0, 1, 5}));
    QVERIFY2(max_abs_diff(joined, whole) <= 1e-5, "halo-tiled frames differ from the untiled");
    QCOMPARE(rep.mode, TilingMode::kExact);
    QCOMPARE(rep.rects.size(), size_t{4});  // 2 x 2 tiles of 24x20 latent pixels
    int64_t covered = 0;
    for (const Rect& r : rep.output_rects) covered += r.area();
    QCOMPARE(covered, whole.shape()[3] * whole.shape()[4]);
    QCOMPARE(events, int64_t{4 * 3});
    QCOMPARE(event_pixels, whole.shape()[2] * whole.shape()[3] * whole.shape()[4]);
    QCOMPARE(steps.seen.size(), size_t{12});
    QCOMPARE(steps.seen.front().first, std::string("decode tiles"));
    QCOMPARE(steps.seen.back().second, int64_t{12});

    // cancel from the second tile on
    CancelToken cancel;
    StreamHooks stop;
    stop.cancel = &cancel;
    TileHooks cancel_after_one;
    cancel_after_one.on_tile = [&](const TileEvent& ev) {
      if (ev.index >= 0) cancel.request();
      return Status::ok();
    };
    QCOMPARE(tiled_decode(model, z, to, upstream, stop, &cancel_after_one).status().code(),
             StatusCode::kCancelled);
  }

  // What halo tiles hold on the device: the real Wan2.1 decoder at 1280x720 (17 frames,
  // upstream's chunking) on the counting backend's CUDA model in bf16 -- untiled, two tiles of
  // 640x720, those with the decoder's full-frame-rate levels one frame at a time, and four tiles
  // of 640x360 so: each holds less.
  void haloTilesPeakOnTheDevice() {
    const WanConfig cfg = WanConfig::wan21();
    auto peak = [&](int64_t tile_h, int64_t tile_w, int pieces) -> int64_t {
      CountingBackend counting(DType::kBF16, BackendMemoryModel::cuda(), 2);
      auto m = WanModel::create(counting, cfg, [&](const std::string&, const Shape& s) {
        return Result<Tensor>(counting.declare_weight(s));
      });
      if (!m) return -1;
      const HostTensor z(DType::kF32, Shape{1, cfg.z_dim, 5, 90, 160});
      StreamOptions so{.chunk_latents = 1, .lone_head = true};
      so.hires_chunk_frames = pieces;
      auto r = tile_h > 0 ? wan_tiled_decode(*m, z, {.tile_h = tile_h, .tile_w = tile_w}, so)
                          : decode_latent(*m, z, so);
      return r ? counting.memory_stats().peak_bytes : -1;
    };
    const int64_t peaks[4] = {peak(0, 0, 0), peak(720, 640, 0), peak(720, 640, 1),
                              peak(360, 640, 1)};
    qInfo(
        "Wan2.1 1280x720 decode, bf16, CUDA model: peak %.2f GiB untiled, %.2f in two halo "
        "tiles, %.2f with them in pieces of a frame, %.2f in four tiles so",
        double(peaks[0]) / double(1 << 30), double(peaks[1]) / double(1 << 30),
        double(peaks[2]) / double(1 << 30), double(peaks[3]) / double(1 << 30));
    for (int i = 0; i < 4; ++i) QVERIFY(peaks[i] > 0);
    for (int i = 1; i < 4; ++i) QVERIFY(peaks[i] < peaks[i - 1]);
  }
};

QTEST_GUILESS_MAIN(tst_WanExactTiling)
#include "tst_wan_exact_tiling.moc"
