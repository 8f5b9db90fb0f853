// Temporal slicing (docs/model.md §4): chunk plans, chunked == whole clip, bounded memory, cancel.
#include <QtTest>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/op_profile.h"
#include "core/cpu/cpu_backend.h"
#include "core/schedule/streaming.h"
#include "core/vae/state_dict.h"
#include "core/vae/wan_model.h"
#include "tests/support/probe_backend.h"
#include "tests/support/tiny_model.h"

using namespace seedvae;

namespace {

HostTensor random_tensor(Shape s, uint64_t seed, float scale = 1.f) {
  HostTensor t(DType::kF32, std::move(s));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, scale);
  for (float& v : t.f32()) v = n(rng);
  return t;
}

class CountingProgress final : public ProgressSink {
 public:
  void report(std::string_view, int64_t done, int64_t total) override {
    last_done = done;
    last_total = total;
    ++calls;
  }
  int64_t last_done = 0, last_total = 0;
  int calls = 0;
};

// Streams `input` (a video to encode, or a latent to decode) through `m` on `probe` in `chunks`
// (latent frames) with chunked upsampling of `pieces` frames and checks that every chunk hints
// (Backend::offload_hint) exactly the causal memories it keeps outside the piece stages, once each.
void expect_hints_of_kept_state(test::ProbeBackend& probe, VideoVae& m, const HostTensor& input,
                                bool encode, int pieces,
                                const std::vector<std::pair<int64_t, int64_t>>& chunks,
                                const std::function<bool(const std::string&)>& in_piece_stage,
                                const std::string& tag) {
  const ChunkOptions co{.hires_chunk_frames = pieces};
  CausalState state;
  for (const auto& [b, e] : chunks) {
    const HostTensor in = encode ? slice_time(input, b == 0 ? 0 : (b - 1) * 4 + 1, (e - 1) * 4 + 1)
                                 : slice_time(input, b, e);
    auto t = probe.upload(in);
    QVERIFY(t.is_ok());
    probe.hinted.clear();
    auto y = encode ? m.encode_chunk(*t, state, co) : m.decode_chunk(*t, state, co);
    QVERIFY2(y.is_ok(), (tag + " " + y.status().to_string()).c_str());
    std::vector<const Storage*> kept;
    for (const auto& [k, mem] : state.memory) {
      if (!in_piece_stage(k)) kept.push_back(mem.storage.get());
    }
    std::vector<const Storage*> hinted = probe.hinted;
    std::sort(kept.begin(), kept.end());
    std::sort(hinted.begin(), hinted.end());
    QVERIFY2(!kept.empty() && hinted == kept, (tag + ": " + std::to_string(probe.hinted.size()) +
                                               " hints, " + std::to_string(kept.size()) + " kept")
                                                  .c_str());
  }
}

}  // namespace

class tst_Streaming : public QObject {
  Q_OBJECT

  test::TinyCpuModel tiny_;

  // Encodes x and decodes z with `options` and checks both against the whole-clip results.
  void expect_whole(const HostTensor& x, const HostTensor& z, const HostTensor& enc_whole,
                    const HostTensor& dec_whole, const StreamOptions& options,
                    const std::string& tag) {
    auto e = encode_video(*tiny_.model, x, options);
    auto d = decode_latent(*tiny_.model, z, options);
    QVERIFY2(e.is_ok(), (tag + " " + e.status().to_string()).c_str());
    QVERIFY2(d.is_ok(), (tag + " " + d.status().to_string()).c_str());
    auto de = compare(*e, enc_whole);
    auto dd = compare(*d, dec_whole);
    QVERIFY2(de->max_abs <= 1e-4, (tag + " encode " + std::to_string(de->max_abs)).c_str());
    QVERIFY2(dd->max_abs <= 1e-4, (tag + " decode " + std::to_string(dd->max_abs)).c_str());
  }

 private slots:
  void sliceTimeTakesTheFrames() {
    HostTensor x(DType::kF32, Shape{1, 3, 6, 5, 7});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i);
    const HostTensor s = slice_time(x, 2, 6);
    QCOMPARE(s.shape(), (Shape{1, 3, 4, 5, 7}));
    QCOMPARE(s.data<float>()[0], 70.0f);                    // channel 0, frame 2
    QCOMPARE(s.data<float>()[4 * 35], 6 * 35 + 2 * 35.0f);  // channel 1, frame 2
    QCOMPARE(s.data<float>()[s.numel() - 1], static_cast<float>(x.numel() - 1));  // the last
  }

  void initTestCase() {
    const Status s = test::make_tiny_cpu_model(tiny_);
    QVERIFY2(s.is_ok(), s.to_string().c_str());
  }

  void chunkPlans() {
    using V = std::vector<std::pair<int64_t, int64_t>>;
    QCOMPARE(plan_chunks(1, 1), (V{{0, 1}}));
    QCOMPARE(plan_chunks(2, 1), (V{{0, 2}}));  // upstream: no split when t - 1 <= 1
    QCOMPARE(plan_chunks(5, 1), (V{{0, 2}, {2, 3}, {3, 4}, {4, 5}}));
    QCOMPARE(plan_chunks(5, 2), (V{{0, 3}, {3, 5}}));
    QCOMPARE(plan_chunks(6, 2), (V{{0, 3}, {3, 5}, {5, 6}}));
    QCOMPARE(plan_chunks(5, 0), (V{{0, 5}}));
    // lone head: latent 0 alone, then chunks of c
    QCOMPARE(plan_chunks(1, 1, true), (V{{0, 1}}));
    QCOMPARE(plan_chunks(2, 1, true), (V{{0, 1}, {1, 2}}));
    QCOMPARE(plan_chunks(5, 1, true), (V{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
    QCOMPARE(plan_chunks(6, 2, true), (V{{0, 1}, {1, 3}, {3, 5}, {5, 6}}));
    QCOMPARE(plan_chunks(5, 0, true), (V{{0, 5}}));
    for (const bool lone : {false, true}) {
      for (int64_t t = 1; t < 40; ++t) {
        for (int c = 0; c < 6; ++c) {
          const V p = plan_chunks(t, c, lone);
          QCOMPARE(p.front().first, int64_t{0});
          QCOMPARE(p.back().second, t);
          for (size_t i = 1; i < p.size(); ++i) QCOMPARE(p[i].first, p[i - 1].second);
          if (c > 0)
            for (const auto& [b, e] : p) QVERIFY(e - b <= (lone ? c : c + 1));
          if (c > 0 && lone && t > 1) QCOMPARE(p.front().second, int64_t{1});
        }
      }
    }
  }

  void encodeChunkedEqualsWhole() {
    const HostTensor x = random_tensor({1, 3, 21, 32, 40}, 1, 0.5f);
    auto whole = encode_video(*tiny_.model, x, {0});
    QVERIFY2(whole.is_ok(), whole.status().to_string().c_str());
    QCOMPARE(whole->shape(), (Shape{1, 32, 6, 4, 5}));
    for (const bool lone : {false, true}) {
      for (int chunk : {1, 2, 3, 7}) {
        auto part = encode_video(*tiny_.model, x, {chunk, true, lone});
        QVERIFY2(part.is_ok(), part.status().to_string().c_str());
        auto d = compare(*part, *whole);
        QVERIFY(d.is_ok());
        QVERIFY2(d->max_abs <= 1e-4, (std::to_string(chunk) + (lone ? " lone head" : "") + ": " +
                                      std::to_string(d->max_abs))
                                         .c_str());
      }
    }
  }

  void decodeChunkedEqualsWhole() {
    const HostTensor z = random_tensor({1, 16, 6, 4, 3}, 2);
    auto whole = decode_latent(*tiny_.model, z, {0});
    QVERIFY2(whole.is_ok(), whole.status().to_string().c_str());
    QCOMPARE(whole->shape(), (Shape{1, 3, 21, 32, 24}));
    for (const bool lone : {false, true}) {
      for (int chunk : {1, 2, 4}) {
        auto part = decode_latent(*tiny_.model, z, {chunk, true, lone});
        QVERIFY2(part.is_ok(), part.status().to_string().c_str());
        auto d = compare(*part, *whole);
        QVERIFY2(d->max_abs <= 1e-4, (std::to_string(chunk) + (lone ? " lone head" : "") + ": " +
                                      std::to_string(d->max_abs))
                                         .c_str());
      }
    }
  }

  // decode_chunk called directly with chunks of one latent frame (as plan_chunks starts with
  // StreamOptions::lone_head): the temporal upsamplers' first call drops frame 1 and keeps their
  // memory at high resolution, later calls keep it before the upscale (VaeModel::upsample). Any
  // split, with or without high-resolution pieces, gives the whole clip.
  void decodeChunksOfOneLatentEqualWhole() {
    const HostTensor z = random_tensor({1, 16, 4, 4, 3}, 11);
    auto whole = decode_latent(*tiny_.model, z, {0});
    QVERIFY2(whole.is_ok(), whole.status().to_string().c_str());
    for (int hires : {0, 1}) {
      for (const std::vector<int64_t>& split :
           {std::vector<int64_t>{1, 1, 1, 1}, std::vector<int64_t>{1, 3},
            std::vector<int64_t>{3, 1}}) {
        CausalState state;
        std::vector<HostTensor> outs;
        int64_t b = 0;
        for (int64_t n : split) {
          auto x = tiny_.backend->upload(slice_time(z, b, b + n));
          QVERIFY(x.is_ok());
          auto y = tiny_.model->decode_chunk(*x, state, {.hires_chunk_frames = hires});
          QVERIFY2(y.is_ok(), y.status().to_string().c_str());
          auto h = tiny_.backend->download(*y);
          QVERIFY(h.is_ok());
          outs.push_back(std::move(*h));
          b += n;
        }
        auto all = concat_time(outs);
        QVERIFY(all.is_ok());
        auto d = compare(*all, *whole);
        QVERIFY2(d.is_ok() && d->max_abs <= 1e-4,
                 ("hires " + std::to_string(hires) + ", first chunk " + std::to_string(split[0]) +
                  ": " + (d.is_ok() ? std::to_string(d->max_abs) : d.status().to_string()))
                     .c_str());
      }
    }
  }

  // Chunked upsampling (ChunkOptions::hires_chunk_frames): the high-resolution stages in pieces of
  // 1..5 frames, with and without temporal chunks, give the whole-clip result and need less
  // activation memory than running them on the whole chunk.
  void hiresPiecesEqualWhole() {
    const HostTensor x = random_tensor({1, 3, 13, 32, 40}, 6, 0.5f);
    const HostTensor z = random_tensor({1, 16, 4, 4, 3}, 7);
    auto enc_whole = encode_video(*tiny_.model, x, {0});
    auto dec_whole = decode_latent(*tiny_.model, z, {0});
    QVERIFY(enc_whole.is_ok() && dec_whole.is_ok());
    for (int pieces : {1, 2, 3, 5}) {
      for (int chunk : {0, 1, 2}) {
        expect_whole(x, z, *enc_whole, *dec_whole,
                     {.chunk_latents = chunk, .hires_chunk_frames = pieces},
                     std::to_string(pieces) + "/" + std::to_string(chunk));
        if (QTest::currentTestFailed()) return;
      }
    }
    auto peak_for = [&](int pieces, bool encode) {
      const StreamOptions so{.chunk_latents = 1, .hires_chunk_frames = pieces};
      const int64_t base = tiny_.backend->memory_stats().current_bytes;
      tiny_.backend->reset_peak();
      const bool ok = encode ? encode_video(*tiny_.model, x, so).is_ok()
                             : decode_latent(*tiny_.model, z, so).is_ok();
      if (!ok) qFatal("run failed");
      return tiny_.backend->memory_stats().peak_bytes - base;
    };
    for (const bool encode : {true, false}) {
      const int64_t off = peak_for(0, encode), one = peak_for(1, encode);
      qInfo("%s activation peak: whole chunk %lld bytes, 1-frame pieces %lld bytes",
            encode ? "encode" : "decode", static_cast<long long>(off), static_cast<long long>(one));
      QVERIFY2(one * 10 < off * 8, (std::to_string(one) + " vs " + std::to_string(off)).c_str());
    }
  }

  // Lean convolutions (ChunkOptions::lean_convs, the decoder's): the split convolutions give the
  // whole-clip result (and the encoder, where they do not apply, too) for any chunking (chunks of
  // 1 and 2 latents, with and without a lone head, so chunks of 4, 5 and 8 frames), alone and with
  // high-resolution pieces, and need less activation memory than the standard convolutions.
  void leanConvsEqualWhole() {
    const HostTensor x = random_tensor({1, 3, 17, 32, 40}, 12, 0.5f);
    const HostTensor z = random_tensor({1, 16, 5, 4, 3}, 13);
    auto enc_whole = encode_video(*tiny_.model, x, {0});
    auto dec_whole = decode_latent(*tiny_.model, z, {0});
    QVERIFY(enc_whole.is_ok() && dec_whole.is_ok());
    for (int pieces : {0, 4}) {
      for (int chunk : {1, 2}) {
        for (const bool lone : {false, true}) {
          expect_whole(x, z, *enc_whole, *dec_whole,
                       {.chunk_latents = chunk,
                        .lone_head = lone,
                        .hires_chunk_frames = pieces,
                        .lean_convs = true},
                       "pieces " + std::to_string(pieces) + ", chunk " + std::to_string(chunk) +
                           (lone ? ", lone head" : ""));
          if (QTest::currentTestFailed()) return;
        }
      }
    }
    auto peak_for = [&](bool lean) {
      const int64_t base = tiny_.backend->memory_stats().current_bytes;
      tiny_.backend->reset_peak();
      const StreamOptions so{.chunk_latents = 1, .lone_head = true, .lean_convs = lean};
      if (!decode_latent(*tiny_.model, z, so).is_ok()) qFatal("run failed");
      return tiny_.backend->memory_stats().peak_bytes - base;
    };
    const int64_t standard = peak_for(false), lean = peak_for(true);
    qInfo("decode activation peak: standard %lld bytes, lean %lld bytes",
          static_cast<long long>(standard), static_cast<long long>(lean));
    QVERIFY2(lean < standard, (std::to_string(lean) + " vs " + std::to_string(standard)).c_str());
  }

  // Backend::offload_hint: every chunk hints exactly the causal memory the model keeps for the
  // next chunk, each tensor once, except with chunked upsampling the memory of the piece stages
  // (every piece reads it: the decoder after its last temporal upsampling, the encoder up to and
  // including its first temporal level), for encode and decode, chunked and in pieces.
  // OpProfileBackend (wanbench --op-profile) times every op without changing a result: a Wan2.1
  // decode through it equals the plain one bit for bit, and its rows account for every op it ran
  // (the convolutions by weight shape, the norms, the attention), slowest first.
  void opProfileTimesEveryOpAndChangesNothing() {
    const WanConfig cfg = WanConfig::wan21_tiny();
    const VaeWeights w = synthesize_wan_weights(cfg, 3);
    const HostTensor z = random_tensor({1, cfg.z_dim, 3, 4, 5}, 4);
    const StreamOptions upstream{.chunk_latents = 1, .lone_head = true};
    auto plain = WanModel::create(*tiny_.backend, w);
    QVERIFY(plain.is_ok());
    auto want = decode_latent(*plain, z, upstream);
    QVERIFY(want.is_ok());
    OpProfileBackend prof(*tiny_.backend);
    auto profiled = WanModel::create(prof, w);
    QVERIFY(profiled.is_ok());
    auto got = decode_latent(*profiled, z, upstream);
    QVERIFY2(got.is_ok(), got.status().to_string().c_str());
    auto d = compare(*got, *want);
    QVERIFY(d.is_ok() && d->max_abs == 0.0);
    const auto rows = prof.rows();
    QVERIFY(!rows.empty());
    int64_t convs = 0, attention = 0, norms = 0;
    double total = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (i > 0) QVERIFY(rows[i - 1].ms >= rows[i].ms);
      QVERIFY(rows[i].calls > 0 && rows[i].ms >= 0);
      if (rows[i].op.rfind("conv3d [", 0) == 0) convs += rows[i].calls;
      if (rows[i].op == "rms_attention") attention += rows[i].calls;
      if (rows[i].op == "rms_norm+silu") norms += rows[i].calls;
      total += rows[i].ms;
    }
    QCOMPARE(attention, int64_t{3});  // the middle's, once per chunk
    QVERIFY(convs > 3 * 20 && norms > 3 * 10);
    QCOMPARE(prof.total_ms(), total);
    prof.clear();
    QVERIFY(prof.rows().empty());
  }

  void offloadHintsExactlyTheKeptState() {
    test::ProbeBackend probe(*tiny_.backend);
    auto pm = VaeModel::create(probe, synthesize_weights(VaeConfig::tiny(), 7));
    QVERIFY(pm.is_ok());
    const HostTensor x = random_tensor({1, 3, 13, 32, 40}, 6, 0.5f);
    const HostTensor z = random_tensor({1, 16, 4, 4, 3}, 7);
    const VaeConfig& cfg = pm->config();
    for (const bool encode : {true, false}) {
      int split = 0;  // decoder: first level in pieces; encoder: last level in pieces
      if (encode) {
        while (split < cfg.levels() - 1 && !cfg.encoder_temporal_down(split)) ++split;
      } else {
        while (split < cfg.levels() && cfg.decoder_temporal_up(split)) ++split;
      }
      for (int pieces : {0, 1, 2}) {
        auto in_piece_stage = [&](const std::string& key) {
          if (pieces == 0) return false;
          if (encode && key.rfind("encoder.conv_in", 0) == 0) return true;
          if (!encode && key.rfind("decoder.conv_out", 0) == 0) return true;
          const std::string pre = encode ? "encoder.down_blocks." : "decoder.up_blocks.";
          if (key.rfind(pre, 0) != 0) return false;
          const int level = std::stoi(key.substr(pre.size()));
          return encode ? level <= split : level >= split;
        };
        expect_hints_of_kept_state(
            probe, *pm, encode ? x : z, encode, pieces, plan_chunks(encode ? 4 : z.shape()[2], 1),
            in_piece_stage,
            std::string(encode ? "encode" : "decode") + ", pieces " + std::to_string(pieces));
        if (QTest::currentTestFailed()) return;
      }
    }
  }

  // The same for both Wan networks: every chunk hints each causal memory it keeps, once, except
  // with chunked upsampling the memory of the decoder's piece stages (its levels after the last
  // temporal upsampling and the head).
  void wanOffloadHintsExactlyTheKeptState() {
    test::ProbeBackend probe(*tiny_.backend);
    for (const WanConfig& cfg : {WanConfig::wan21_tiny(), WanConfig::wan22_tiny()}) {
      auto pm = WanModel::create(probe, synthesize_wan_weights(cfg, 11));
      QVERIFY2(pm.is_ok(), pm.status().to_string().c_str());
      const int sf = cfg.spatial_factor();
      const HostTensor x = random_tensor({1, 3, 9, 2 * sf, 3 * sf}, 8, 0.5f);
      const HostTensor z = random_tensor({1, cfg.z_dim, 3, 2, 3}, 9);
      for (const bool encode : {true, false}) {
        for (int pieces : {0, 1, 2}) {
          // the piece stages: the decoder's levels from the first after the last temporal
          // upsampling (Wan2.1 block indices 8 on; Wan2.2 levels 2 on) and the head
          auto in_piece_stage = [&](const std::string& k) {
            if (encode || pieces == 0) return false;
            if (k.rfind("decoder.head", 0) == 0) return true;
            const std::string pre = "decoder.upsamples.";
            if (k.rfind(pre, 0) != 0) return false;
            const int i = std::stoi(k.substr(pre.size()));
            return cfg.family == VaeFamily::kWan22 ? i >= 2 : i >= 8;
          };
          expect_hints_of_kept_state(
              probe, *pm, encode ? x : z, encode, pieces, plan_chunks(3, 1, true), in_piece_stage,
              std::string(family_name(cfg.family)) + " " + (encode ? "encode" : "decode") +
                  ", pieces " + std::to_string(pieces));
          if (QTest::currentTestFailed()) return;
        }
      }
    }
  }

  // With graphs on, VaeModel keeps its causal state at fixed addresses: later chunks overwrite
  // the memory in place (Backend::copy_frames_into) instead of slicing new tensors. The output
  // must equal the plain run bit for bit, the state tensors must keep their storage from the
  // chunk where they appear on, and a backend that refuses to record must leave eager chunks
  // (the model asks to record once a chunk shape proves stable, and reports why it could not).
  void inPlaceStateForGraphsMatchesFreshState() {
    test::ProbeBackend probe(*tiny_.backend);
    probe.graphs = true;
    auto pm = VaeModel::create(probe, synthesize_weights(VaeConfig::tiny(), 7));
    auto plain = VaeModel::create(*tiny_.backend, synthesize_weights(VaeConfig::tiny(), 7));
    QVERIFY(pm.is_ok() && plain.is_ok());
    const HostTensor x = random_tensor({1, 3, 25, 32, 40}, 6, 0.5f);
    const HostTensor z = random_tensor({1, 16, 7, 4, 3}, 7);
    for (int pieces : {0, 1, 2}) {
      const std::string tag = "pieces " + std::to_string(pieces);
      const StreamOptions so{.chunk_latents = 1, .hires_chunk_frames = pieces};
      auto e = encode_video(*pm, x, so);
      auto d = decode_latent(*pm, z, so);
      auto e0 = encode_video(*plain, x, so);
      auto d0 = decode_latent(*plain, z, so);
      QVERIFY2(e.is_ok() && d.is_ok(),
               (tag + " " + (e.is_ok() ? d : e).status().to_string()).c_str());
      QVERIFY(e0.is_ok() && d0.is_ok());
      QVERIFY2(compare(*e, *e0)->max_abs == 0.0, tag.c_str());
      QVERIFY2(compare(*d, *d0)->max_abs == 0.0, tag.c_str());
    }
    // the state's storage survives chunks 3.. (chunk 2 still changes its layout: the temporal
    // upsamplers switch from high- to low-resolution memory)
    CausalState state;
    std::map<std::string, const Storage*> seen;
    for (int64_t c = 0; c < z.shape()[2]; ++c) {
      auto t = probe.upload(slice_time(z, c, c + 1));
      QVERIFY(t.is_ok());
      QVERIFY(pm->decode_chunk(*t, state).is_ok());
      if (c >= 2) {
        for (const auto& [k, m] : state.memory) {
          if (c > 2) QVERIFY2(seen[k] == m.storage.get(), k.c_str());
          seen[k] = m.storage.get();
        }
      }
    }
    const auto st = pm->graph_stats();
    QVERIFY(probe.capture_attempts > 0);
    QVERIFY(st.discarded == probe.capture_attempts && st.captured == 0 && st.replayed == 0);
    QVERIFY2(st.last_discard.find("records no graphs") != std::string::npos,
             st.last_discard.c_str());
  }

  void singleFrameAndChunkSink() {
    const HostTensor x = random_tensor({1, 3, 1, 16, 16}, 3, 0.5f);
    auto m = encode_video(*tiny_.model, x, {1});
    QVERIFY(m.is_ok());
    QCOMPARE(m->shape(), (Shape{1, 32, 1, 2, 2}));
    const HostTensor z = random_tensor({1, 16, 4, 2, 2}, 4);
    std::vector<int64_t> firsts, sizes;
    StreamHooks hooks;
    hooks.on_chunk = [&](int64_t first, const HostTensor& c) {
      firsts.push_back(first);
      sizes.push_back(c.shape()[2]);
      return Status::ok();
    };
    auto v = decode_latent(*tiny_.model, z, {1}, hooks);
    QVERIFY(v.is_ok());
    QCOMPARE(firsts, (std::vector<int64_t>{0, 5, 9}));
    QCOMPARE(sizes, (std::vector<int64_t>{5, 4, 4}));
  }

  // keep_output off: the chunks reach on_chunk as when the output is gathered, bit for bit, and
  // nothing is gathered (an empty result), through the async pipeline and without it, for the
  // streamed encode, the whole-tensor encode and the decode.
  void streamedChunksWithoutGathering() {
    const HostTensor x = random_tensor({1, 3, 13, 16, 24}, 7, 0.5f);
    const HostTensor z = random_tensor({1, 16, 4, 2, 3}, 8);
    // The probe backend's asynchronous copies land only when waited for (NaN until then), so a
    // chunk handed out before its copy landed, or a buffer reused while one is in flight, shows.
    test::ProbeBackend probe(*tiny_.backend);
    auto pm = VaeModel::create(probe, synthesize_weights(VaeConfig::tiny(), 7));
    QVERIFY(pm.is_ok());
    for (VaeModel* model : {&*tiny_.model, &*pm}) {
      for (bool async : {true, false}) {
        StreamOptions o{1};
        o.async_tiles = async;
        std::vector<HostTensor> parts;
        StreamHooks hooks;
        hooks.on_chunk = [&](int64_t, const HostTensor& c) {
          parts.push_back(c);
          return Status::ok();
        };
        hooks.keep_output = false;
        auto gathered = decode_latent(*tiny_.model, z, o);
        auto streamed = decode_latent(*model, z, o, hooks);
        QVERIFY(gathered.is_ok() && streamed.is_ok());
        QVERIFY(streamed->empty());
        auto joined = concat_time(parts);
        QVERIFY(joined.is_ok());
        QCOMPARE(compare(*joined, *gathered)->max_abs, 0.0);
        parts.clear();
        auto enc_gathered = encode_video(*tiny_.model, x, o);
        auto enc_streamed = encode_video(*model, x, o, hooks);
        QVERIFY(enc_gathered.is_ok() && enc_streamed.is_ok() && enc_streamed->empty());
        joined = concat_time(parts);
        QVERIFY(joined.is_ok());
        QCOMPARE(compare(*joined, *enc_gathered)->max_abs, 0.0);
      }
    }
  }

  // Peak backend memory of a streamed decode depends on the chunk, not on the clip length:
  // 50 latents (197 frames) peak within 2% of 5 latents (17 frames).
  void memoryBoundedByChunk() {
    // Activation peak above what is resident (weights, packed weights) before the run.
    auto peak_for = [&](int64_t latents, int chunk) {
      const HostTensor z = random_tensor({1, 16, latents, 4, 4}, 5);
      if (!decode_latent(*tiny_.model, random_tensor({1, 16, 2, 4, 4}, 9), {chunk}))
        qFatal("warm-up failed");
      const int64_t base = tiny_.backend->memory_stats().current_bytes;
      tiny_.backend->reset_peak();
      auto v = decode_latent(*tiny_.model, z, {chunk});
      if (!v) qFatal("%s", v.status().to_string().c_str());
      return tiny_.backend->memory_stats().peak_bytes - base;
    };
    int64_t short_peak = 0, long_peak = 0, whole_peak = 0;
    short_peak = peak_for(5, 1);
    long_peak = peak_for(50, 1);
    qInfo("decode peak backend bytes: 17 frames %lld, 197 frames %lld",
          static_cast<long long>(short_peak), static_cast<long long>(long_peak));
    QVERIFY(short_peak > 0);
    QVERIFY2(long_peak <= short_peak * 102 / 100,
             (std::to_string(long_peak) + " vs " + std::to_string(short_peak)).c_str());
    // Whole-clip decoding, by contrast, grows with the clip.
    whole_peak = peak_for(50, 0);
    qInfo("whole-clip decode of 197 frames: %lld bytes", static_cast<long long>(whole_peak));
    QVERIFY(whole_peak > 10 * long_peak);
  }

  void cancelBetweenChunks() {
    const HostTensor z = random_tensor({1, 16, 8, 2, 2}, 6);
    CancelToken cancel;
    CountingProgress progress;
    StreamHooks hooks{&cancel, &progress};
    hooks.on_chunk = [&](int64_t, const HostTensor&) {
      cancel.request();  // ask after the first chunk
      return Status::ok();
    };
    auto v = decode_latent(*tiny_.model, z, {1}, hooks);
    QVERIFY(!v.is_ok());
    QCOMPARE(v.status().code(), StatusCode::kCancelled);
    QCOMPARE(progress.last_done, int64_t{1});
    QCOMPARE(progress.last_total, int64_t{7});
  }

  void badInputsAreErrors() {
    auto r = encode_video(*tiny_.model, random_tensor({1, 3, 4, 16, 16}, 7), {1});
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
    r = encode_video(*tiny_.model, random_tensor({1, 3, 5, 12, 16}, 7), {1});
    QVERIFY(!r.is_ok());
    r = decode_latent(*tiny_.model, random_tensor({1, 8, 2, 2, 2}, 7), {1});
    QVERIFY(!r.is_ok());
    QVERIFY(r.status().message().find("[1, 16, t, h, w]") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(tst_Streaming)
#include "tst_streaming.moc"
