// Tiled encode/decode behaviour on the CPU backend with the tiny configuration and synthetic
// clips: exact mode equals the untiled run (and its seams vanish), blend-mode orders and chunking
// agree, uniform blending is a partition of unity, cancel between tiles, progress per tile, the
// per-tile callback, async tiles (deferred copies) against synchronous ones, the backend memory of
// exact mode, errors. `realExact256` (label long) runs
// the real configuration on a 256x256 clip.
#include <QtTest>

#include <random>

#include "core/cpu/cpu_backend.h"
#include "core/schedule/seam_metrics.h"
#include "core/schedule/tiled.h"
#include "core/vae/state_dict.h"
#include "tests/support/probe_backend.h"
#include "tests/support/synthetic_video.h"

using namespace seedvae;

namespace {

HostTensor random_tensor(Shape s, uint64_t seed, float scale = 1.f) {
  HostTensor t(DType::kF32, std::move(s));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, scale);
  for (float& v : t.f32()) v = n(rng);
  return t;
}

using test::synthetic_video;

class CountingProgress final : public ProgressSink {
 public:
  void report(std::string_view stage, int64_t done, int64_t total) override {
    monotonic &= done >= last_done;
    last_stage = std::string(stage);
    last_done = done;
    last_total = total;
    ++calls;
    if (cancel_at > 0 && done >= cancel_at && cancel) cancel->request();
  }
  std::string last_stage;
  int64_t last_done = 0, last_total = 0, cancel_at = 0;
  int calls = 0;
  bool monotonic = true;
  CancelToken* cancel = nullptr;
};

std::string fmt(const std::string& what, const DiffStats& d) {
  char buf[160];
  std::snprintf(buf, sizeof buf, ": max_abs %.3e rms %.3e", d.max_abs, d.rms);
  return what + buf;
}

}  // namespace

class tst_Tiled : public QObject {
  Q_OBJECT

  std::unique_ptr<Backend> backend_;
  VaeWeights weights_;
  std::optional<VaeModel> model_;

  TileOptions exact_options(int64_t tile) const {
    TileOptions o;
    o.mode = TilingMode::kExact;
    o.spec = {tile, tile, 0, 0};
    o.weights = &weights_;
    return o;
  }

 private slots:
  void initTestCase() {
    auto b = create_cpu_backend();
    QVERIFY2(b.is_ok(), b.status().to_string().c_str());
    backend_ = std::move(*b);
    weights_ = synthesize_weights(VaeConfig::tiny(), kTinySeed);
    auto m = VaeModel::create(*backend_, weights_);
    QVERIFY2(m.is_ok(), m.status().to_string().c_str());
    model_.emplace(std::move(*m));
  }

  // Exact mode on a 256x256 synthetic clip (tiny configuration): equal to the untiled run, for
  // decode and encode, streamed; the seam energy at the tile borders equals the untiled image's
  // own (seams vanish), while blended tiling shows its seams.
  void exactEqualsUntiled256() {
    const HostTensor x = synthetic_video(9, 256, 256, 1);
    auto ref = encode_video(*model_, x, {1});
    QVERIFY2(ref.is_ok(), ref.status().to_string().c_str());
    TileRunReport rep;
    TileHooks th;
    th.report = &rep;
    auto ex = tiled_encode(*model_, x, exact_options(96), {1}, {}, &th);
    QVERIFY2(ex.is_ok(), ex.status().to_string().c_str());
    auto d = compare(*ex, *ref);
    qInfo("%s", fmt("tiny exact encode 256x256x9 tile 96 vs untiled", *d).c_str());
    QVERIFY(d->max_abs <= 1e-3);

    const HostTensor z = moments_mean(*ref);
    auto dref = decode_latent(*model_, z, {1});
    QVERIFY(dref.is_ok());
    rep = {};
    auto dex = tiled_decode(*model_, z, exact_options(64), {1}, {}, &th);
    QVERIFY2(dex.is_ok(), dex.status().to_string().c_str());
    d = compare(*dex, *dref);
    qInfo("%s (%zu final tiles)", fmt("tiny exact decode 256x256x9 tile 64 vs untiled", *d).c_str(),
          rep.rects.size());
    QVERIFY(d->max_abs <= 1e-3);
    QCOMPARE(rep.rects.size(), size_t{16});

    auto sm = seam_metrics(*dex, rep, &*dref);
    QVERIFY2(sm.is_ok(), sm.status().to_string().c_str());
    qInfo("exact: seam energy %.4f, untiled at the same borders %.4f, max tile offset %.2e",
          sm->seam_energy, sm->reference_seam_energy, sm->max_tile_offset);
    QVERIFY(std::abs(sm->seam_energy - sm->reference_seam_energy) < 1e-3);
    QVERIFY(sm->max_tile_offset < 1e-4);

    // Blended tiling of the same latent, same tile size: seams and O(1) differences.
    TileOptions blend;
    blend.mode = TilingMode::kBlend;
    blend.spec = {64, 64, 16, 16};
    TileRunReport brep;
    TileHooks bth;
    bth.report = &brep;
    auto bl = tiled_decode(*model_, z, blend, {1}, {}, &bth);
    QVERIFY(bl.is_ok());
    auto bm = seam_metrics(*bl, brep, &*dref);
    QVERIFY(bm.is_ok());
    qInfo(
        "blend 64/16: max_abs %.3f rms %.3f vs untiled, seam energy %.4f (untiled %.4f), max "
        "tile offset %.3f",
        bm->max_abs, bm->rms, bm->seam_energy, bm->reference_seam_energy, bm->max_tile_offset);
    QVERIFY(bm->max_abs > 1e-2);
  }

  // Chunk-major and tile-major blending give the same bits; chunked equals whole-clip blending up
  // to fp32 reassociation (each tile is an exact stream).
  void blendOrdersAndChunking() {
    const HostTensor z = random_tensor({1, 16, 5, 10, 7}, 3);
    TileOptions o;
    o.mode = TilingMode::kBlend;
    o.spec = {40, 32, 16, 8};
    o.order = TileOrder::kChunkMajor;
    TileRunReport r1, r2;
    TileHooks h1, h2;
    h1.report = &r1;
    h2.report = &r2;
    auto a = tiled_decode(*model_, z, o, {1}, {}, &h1);
    o.order = TileOrder::kTileMajor;
    auto b = tiled_decode(*model_, z, o, {1}, {}, &h2);
    QVERIFY(a.is_ok() && b.is_ok());
    QVERIFY(!r1.tile_major && r2.tile_major);
    QVERIFY(r1.host_state_bytes > 0);
    auto d = compare(*a, *b);
    QCOMPARE(d->max_abs, 0.0);
    o.order = TileOrder::kAuto;
    auto whole = tiled_decode(*model_, z, o, {0});
    QVERIFY(whole.is_ok());
    d = compare(*a, *whole);
    qInfo("%s", fmt("blend chunk 1 vs whole clip", *d).c_str());
    QVERIFY(d->max_abs <= 1e-4);

    // Encode too.
    const HostTensor x = synthetic_video(13, 48, 40, 4);
    TileOptions e;
    e.mode = TilingMode::kBlend;
    e.spec = {24, 24, 8, 8};
    e.order = TileOrder::kChunkMajor;
    auto ea = tiled_encode(*model_, x, e, {1});
    e.order = TileOrder::kTileMajor;
    auto eb = tiled_encode(*model_, x, e, {1});
    auto ew = tiled_encode(*model_, x, e, {0});
    QVERIFY(ea.is_ok() && eb.is_ok() && ew.is_ok());
    QCOMPARE(compare(*ea, *eb)->max_abs, 0.0);
    QVERIFY(compare(*ea, *ew)->max_abs <= 1e-4);
  }

  // Uniform layout: equal tile shapes, and the blended output is exactly the weighted sum of the
  // raw tiles with weights summing to one (reconstructed here from the per-tile callback).
  void uniformBlendIsPartitionOfUnity() {
    const HostTensor z = random_tensor({1, 16, 2, 13, 9}, 5);
    TileOptions o;
    o.mode = TilingMode::kBlend;
    o.layout = TileLayout::kUniform;
    o.spec = {48, 40, 12, 16};
    std::vector<std::pair<Rect, HostTensor>> raw;
    TileRunReport rep;
    TileHooks th;
    th.report = &rep;
    th.on_tile = [&](const TileEvent& ev) {
      raw.emplace_back(ev.pixel, *ev.data);
      return Status::ok();
    };
    auto out = tiled_decode(*model_, z, o, {0}, {}, &th);
    QVERIFY2(out.is_ok(), out.status().to_string().c_str());
    QVERIFY(raw.size() > 4);
    for (const auto& [r, t] : raw) {
      QCOMPARE(r.h, raw[0].first.h);
      QCOMPARE(r.w, raw[0].first.w);
    }
    // Reconstruct: sum_k w_k * raw_k with the plan's weights.
    const TilePlan& plan = rep.plan;
    const Shape& s = out->shape();
    HostTensor rec(DType::kF32, s);
    for (size_t k = 0; k < raw.size(); ++k) {
      const PlannedTile& t = plan.tiles[k];
      const auto wr = axis_blend_weights(plan, true, t.row, BlendSpace::kPixels);
      const auto wc = axis_blend_weights(plan, false, t.col, BlendSpace::kPixels);
      const HostTensor& v = raw[k].second;
      for (int64_t p = 0; p < s[1] * s[2]; ++p) {
        for (size_t i = 0; i < wr.size(); ++i) {
          for (size_t j = 0; j < wc.size(); ++j) {
            rec.data<float>()[(p * s[3] + t.pixel.y + static_cast<int64_t>(i)) * s[4] + t.pixel.x +
                              static_cast<int64_t>(j)] +=
                wr[i] * wc[j] *
                v.data<float>()[(p * v.shape()[3] + static_cast<int64_t>(i)) * v.shape()[4] +
                                static_cast<int64_t>(j)];
          }
        }
      }
    }
    auto d = compare(rec, *out);
    qInfo("%s", fmt("uniform blend vs sum of weighted raw tiles", *d).c_str());
    QVERIFY(d->max_abs <= 1e-5);
  }

  void cancelBetweenTilesAndProgress() {
    const HostTensor z = random_tensor({1, 16, 3, 8, 12}, 6);
    CancelToken cancel;
    CountingProgress progress;
    StreamHooks hooks{&cancel, &progress};
    TileOptions o;
    o.mode = TilingMode::kBlend;
    o.spec = {32, 32, 16, 16};  // 15 tiles
    o.order = TileOrder::kChunkMajor;
    int tiles_seen = 0;
    TileHooks th;
    th.on_tile = [&](const TileEvent& ev) {
      if (++tiles_seen == 4) cancel.request();
      if (ev.total != 15) return internal_error("wrong total");
      return Status::ok();
    };
    auto r = tiled_decode(*model_, z, o, {1}, hooks, &th);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kCancelled);
    QCOMPARE(progress.last_done, int64_t{4});
    QCOMPARE(progress.last_total, int64_t{30});  // 15 tiles x 2 chunks
    QCOMPARE(progress.last_stage, std::string("decode tiles"));

    // Uncancelled: progress reaches the total, monotonically, once per tile and chunk.
    cancel.reset();
    CountingProgress full;
    StreamHooks h2{&cancel, &full};
    std::vector<int64_t> chunks_seen;
    TileHooks th2;
    th2.on_tile = [&](const TileEvent& ev) {
      chunks_seen.push_back(ev.chunk);
      if (ev.pixel.w != 8 * ev.latent.w || ev.data->shape()[4] != ev.pixel.w) {
        return internal_error("tile rect does not match its data");
      }
      return Status::ok();
    };
    std::vector<int64_t> firsts;
    h2.on_chunk = [&](int64_t first, const HostTensor&) {
      firsts.push_back(first);
      return Status::ok();
    };
    auto ok = tiled_decode(*model_, z, o, {1}, h2, &th2);
    QVERIFY(ok.is_ok());
    QCOMPARE(full.calls, 30);
    QCOMPARE(full.last_done, full.last_total);
    QVERIFY(full.monotonic);
    QCOMPARE(chunks_seen.size(), size_t{30});
    QCOMPARE(firsts, (std::vector<int64_t>{0, 5}));

    // Exact mode: cancel from the progress sink after 10 tile executions.
    CancelToken c2;
    CountingProgress p2;
    p2.cancel = &c2;
    p2.cancel_at = 10;
    auto ex = tiled_decode(*model_, z, exact_options(32), {1}, StreamHooks{&c2, &p2});
    QVERIFY(!ex.is_ok());
    QCOMPARE(ex.status().code(), StatusCode::kCancelled);
    QCOMPARE(p2.last_done, int64_t{10});
    QCOMPARE(p2.last_stage, std::string("decode exact"));
    CountingProgress p3;
    auto ex2 = tiled_decode(*model_, z, exact_options(32), {1}, StreamHooks{nullptr, &p3});
    QVERIFY(ex2.is_ok());
    QCOMPARE(p3.last_done, p3.last_total);
    QVERIFY(p3.monotonic);
  }

  // Async tiles (StreamOptions::async_tiles) through a backend whose copies land only in wait()
  // (destination poisoned with NaN until then): every scheduler path gives bit-identical output to
  // the synchronous path, waits for every copy it started, and really overlaps (a step's copy is
  // still in flight when the next step's is queued). Cancelling mid-run leaves no copy behind.
  void asyncTilesMatchSync() {
    test::ProbeBackend deferred(*backend_);
    auto dm = VaeModel::create(deferred, weights_);
    QVERIFY2(dm.is_ok(), dm.status().to_string().c_str());
    VaeModel& amodel = *dm;
    const StreamOptions sync{1, false}, async{1, true};
    auto same = [&](const char* what, const Result<HostTensor>& a, const Result<HostTensor>& b) {
      QVERIFY2(a.is_ok(), a.is_ok() ? "" : a.status().to_string().c_str());
      QVERIFY2(b.is_ok(), b.is_ok() ? "" : b.status().to_string().c_str());
      for (float v : a->f32()) QVERIFY2(std::isfinite(v), what);
      auto d = compare(*a, *b);
      QVERIFY(d.is_ok());
      QVERIFY2(d->max_abs == 0.0, fmt(what, *d).c_str());
    };
    auto expect_overlap = [&](const char* what) {
      QVERIFY2(deferred.started > 0 && deferred.started == deferred.waited, what);
      QVERIFY2(deferred.in_flight == 0, what);
      QVERIFY2(deferred.max_in_flight >= 2, what);
      deferred.started = deferred.waited = deferred.max_in_flight = 0;
    };

    const HostTensor z = random_tensor({1, 16, 5, 10, 7}, 3);
    // untiled streaming
    auto ref = decode_latent(*model_, z, sync);
    same("decode_latent", decode_latent(amodel, z, async), ref);
    expect_overlap("decode_latent");
    same("decode_latent (sync through the wrapper)", decode_latent(amodel, z, sync), ref);
    QCOMPARE(deferred.started, 0);  // off: the synchronous download_frames path
    // blend tiling, both orders (chunk-major parks the tiles' states through the pipeline)
    TileOptions o;
    o.mode = TilingMode::kBlend;
    o.spec = {40, 32, 16, 8};
    for (TileOrder order : {TileOrder::kChunkMajor, TileOrder::kTileMajor}) {
      o.order = order;
      const char* what = order == TileOrder::kChunkMajor ? "blend decode, chunk-major"
                                                         : "blend decode, tile-major";
      int tiles = 0;
      TileHooks th;
      th.on_tile = [&](const TileEvent& ev) {
        ++tiles;
        for (float v : ev.data->f32()) {
          if (!std::isfinite(v)) return internal_error("tile data read before its copy landed");
        }
        return Status::ok();
      };
      same(what, tiled_decode(amodel, z, o, async, {}, &th), tiled_decode(*model_, z, o, sync));
      QVERIFY(tiles > 0);
      expect_overlap(what);
    }
    // encode: whole clip in memory, blend tiles, and a frame source (encode_stream) whose parts
    // vector grows while copies are in flight
    const HostTensor x = synthetic_video(13, 48, 40, 4);
    const auto eref = encode_video(*model_, x, sync);
    same("encode_video", encode_video(amodel, x, async), eref);
    expect_overlap("encode_video");
    TileOptions e;
    e.mode = TilingMode::kBlend;
    e.spec = {24, 24, 8, 8};
    e.order = TileOrder::kChunkMajor;
    same("blend encode", tiled_encode(amodel, x, e, async), tiled_encode(*model_, x, e, sync));
    expect_overlap("blend encode");
    struct Slices final : FrameSource {
      const HostTensor& v;
      int64_t at = 0;
      explicit Slices(const HostTensor& video) : v(video) {}
      Result<HostTensor> next(int64_t max_frames) override {
        const int64_t n = std::min(max_frames, v.shape()[2] - at);
        if (n <= 0) return HostTensor();
        at += n;
        return slice_time(v, at - n, at);
      }
    } source(x);
    same("encode_stream", encode_stream(amodel, source, async), eref);
    expect_overlap("encode_stream");

    // cancel mid-run: the copy still pending is dropped, nothing stays in flight
    CancelToken cancel;
    StreamHooks hooks{&cancel, nullptr};
    int chunks = 0;
    hooks.on_chunk = [&](int64_t, const HostTensor&) {
      if (++chunks == 2) cancel.request();
      return Status::ok();
    };
    o.order = TileOrder::kChunkMajor;  // chunks stream out (tile-major calls on_chunk at the end)
    auto c = tiled_decode(amodel, z, o, async, hooks);
    QVERIFY(!c.is_ok());
    QCOMPARE(c.status().code(), StatusCode::kCancelled);
    QCOMPARE(deferred.in_flight, 0);
    cancel.reset();
    chunks = 0;
    auto c2 = decode_latent(amodel, z, async, hooks);
    QVERIFY(!c2.is_ok());
    QCOMPARE(c2.status().code(), StatusCode::kCancelled);
    QCOMPARE(deferred.in_flight, 0);
  }

  // Exact mode holds a tile's worth of activations: its backend peak is far below the untiled
  // one, and the 4x larger frame needs less than a quarter of what the untiled run of the small
  // frame needs (what grows with the frame is the untiled mid-block attention on the 1/64-size
  // frame, whose CPU buffers dominate at this tiny scale).
  void exactBackendPeakBoundedByTile() {
    auto peak = [&](const HostTensor& z, const TileOptions& o) {
      for (int i = 0; i < 2; ++i) {  // the second run has the weights packed already
        backend_->reset_peak();
        auto r = o.mode == TilingMode::kOff ? decode_latent(*model_, z, {1})
                                            : tiled_decode(*model_, z, o, {1});
        if (!r.is_ok()) qFatal("%s", r.status().to_string().c_str());
      }
      return backend_->memory_stats().peak_bytes - backend_->memory_stats().current_bytes;
    };
    const HostTensor small = random_tensor({1, 16, 3, 16, 16}, 7);
    const HostTensor large = random_tensor({1, 16, 3, 32, 32}, 8);
    const int64_t ex_small = peak(small, exact_options(32));
    const int64_t ex_large = peak(large, exact_options(32));
    TileOptions off;
    off.mode = TilingMode::kOff;
    const int64_t un_small = peak(small, off);
    const int64_t un_large = peak(large, off);
    qInfo(
        "backend peak above resident: exact 128x128 %lld, exact 256x256 %lld, untiled 128x128 "
        "%lld, untiled 256x256 %lld",
        static_cast<long long>(ex_small), static_cast<long long>(ex_large),
        static_cast<long long>(un_small), static_cast<long long>(un_large));
    QVERIFY(ex_small * 20 < un_small);
    QVERIFY(ex_large * 20 < un_large);
    QVERIFY(ex_large * 4 < un_small);
  }

  void errors() {
    const HostTensor z = random_tensor({1, 16, 2, 4, 4}, 9);
    TileOptions o = exact_options(32);
    o.weights = nullptr;
    auto r = tiled_decode(*model_, z, o);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
    QVERIFY(r.status().message().find("host weights") != std::string::npos);
    VaeWeights other;  // configuration mismatch (no tensors needed to detect it)
    other.config = VaeConfig::real();
    o.weights = &other;
    QVERIFY(!tiled_decode(*model_, z, o).is_ok());
    TileOptions u;
    u.mode = TilingMode::kBlend;
    u.layout = TileLayout::kUniform;
    u.spec = {16, 16, 16, 16};
    r = tiled_decode(*model_, z, u);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
    QVERIFY(!tiled_encode(*model_, random_tensor({1, 3, 4, 16, 16}, 1), u).is_ok());
    QVERIFY(!tiled_encode(*model_, random_tensor({1, 3, 5, 12, 16}, 1), u).is_ok());
    QVERIFY(!tiled_decode(*model_, random_tensor({1, 8, 2, 4, 4}, 1), exact_options(32)).is_ok());
    QVERIFY(parse_tiling_mode("exact").is_ok());
    QVERIFY(!parse_tiling_mode("fast").is_ok());
  }

  // The real configuration on a 256x256 clip: exact tiled decode and encode equal the untiled
  // runs. About 2 minutes on 2 cores: label long (SEEDVAE_LONG_TESTS=1).
  void realExact256() {
    if (qEnvironmentVariableIsEmpty("SEEDVAE_LONG_TESTS")) {
      QSKIP("set SEEDVAE_LONG_TESTS=1 (ctest -L long) to run the real-configuration 256x256 case");
    }
    const VaeWeights w = synthesize_weights(VaeConfig::real(), kRealSeed);
    auto m = VaeModel::create(*backend_, w);
    QVERIFY2(m.is_ok(), m.status().to_string().c_str());
    TileOptions o;
    o.mode = TilingMode::kExact;
    o.spec = {128, 128, 0, 0};
    o.weights = &w;
    const HostTensor x = synthetic_video(5, 256, 256, 10);
    QElapsedTimer t;
    t.start();
    auto ref = encode_video(*m, x, {1});
    QVERIFY2(ref.is_ok(), ref.status().to_string().c_str());
    const double t_ref = t.restart() / 1000.0;
    auto ex = tiled_encode(*m, x, o, {1});
    QVERIFY2(ex.is_ok(), ex.status().to_string().c_str());
    const double t_ex = t.restart() / 1000.0;
    auto d = compare(*ex, *ref);
    qInfo("%s; untiled %.1f s, exact %.1f s",
          fmt("real exact encode 256x256x5 tile 128", *d).c_str(), t_ref, t_ex);
    QVERIFY(d->max_abs <= 1e-3);
    const HostTensor z = moments_mean(*ref);
    t.restart();
    auto dref = decode_latent(*m, z, {1});
    QVERIFY(dref.is_ok());
    const double t_dref = t.restart() / 1000.0;
    auto dex = tiled_decode(*m, z, o, {1});
    QVERIFY2(dex.is_ok(), dex.status().to_string().c_str());
    const double t_dex = t.restart() / 1000.0;
    d = compare(*dex, *dref);
    qInfo("%s; untiled %.1f s, exact %.1f s",
          fmt("real exact decode 256x256x5 tile 128", *d).c_str(), t_dref, t_dex);
    QVERIFY(d->max_abs <= 1e-3);
  }
};

QTEST_GUILESS_MAIN(tst_Tiled)
#include "tst_tiled.moc"
