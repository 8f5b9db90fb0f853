// Tiled encode/decode on the CPU backend against ../shared/golden:
//  * blend mode (reference layout) must reproduce the upstream tiled tensors L2.dec_tiled_A,
//    L2.dec_tiled_B and V5.enc_moments_tiled_A (fp32, max abs <= 1e-4, rms <= 1e-5), with the
//    tile parameters read from manifest.json;
//  * exact mode must reproduce the *untiled* golden outputs (max abs <= 1e-3; in practice the
//    fp32 reassociation level) for several tile shapes, streamed and whole-clip.
// Both configurations: tiny and real (the 250M-parameter one).
#include <QtTest>

#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/cpu/cpu_backend.h"
#include "core/io/safetensors.h"
#include "core/schedule/tiled.h"
#include "core/vae/state_dict.h"
#include "tests/support/golden.h"

using namespace seedvae;

namespace {

struct Golden {
  VaeWeights weights;
  std::optional<SafetensorsFile> inputs, golden;
  nlohmann::json manifest;

  HostTensor input(const std::string& n) const {
    return inputs->get(n).value().to_host(DType::kF32);
  }
  HostTensor ref(const std::string& n) const { return golden->get(n).value().to_host(DType::kF32); }
  TileSpec spec(const std::string& config, const std::string& kind,
                const std::string& which) const {
    const auto& p = manifest["configs"][config][kind][which];
    return {p["tile_size"][0].get<int64_t>(), p["tile_size"][1].get<int64_t>(),
            p["tile_overlap"][0].get<int64_t>(), p["tile_overlap"][1].get<int64_t>()};
  }
  std::string case_of(const std::string& config, const std::string& kind,
                      const std::string& which) const {
    return manifest["configs"][config][kind][which]["case"].get<std::string>();
  }
};

Golden load(const std::string& config) {
  Golden g;
  const auto dir = test::golden_dir();
  std::ifstream f(dir / "manifest.json");
  g.manifest = nlohmann::json::parse(f);
  const uint64_t seed = g.manifest["configs"][config]["weights"]["seed"].get<uint64_t>();
  g.weights = synthesize_weights(config == "tiny" ? VaeConfig::tiny() : VaeConfig::real(), seed);
  auto in = SafetensorsFile::open(dir / config / "inputs.safetensors");
  auto gd = SafetensorsFile::open(dir / config / "golden_fp32.safetensors");
  if (!in.is_ok() || !gd.is_ok()) qFatal("cannot open the golden files of %s", config.c_str());
  g.inputs.emplace(std::move(*in));
  g.golden.emplace(std::move(*gd));
  return g;
}

std::string fmt(const char* what, const DiffStats& d) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: max_abs %.3e rms %.3e", what, d.max_abs, d.rms);
  return buf;
}

}  // namespace

class tst_TiledGolden : public QObject {
  Q_OBJECT

  std::unique_ptr<Backend> backend_;

  void blend(const std::string& config) {
    if (!test::have_golden()) QSKIP(test::golden_missing_message().c_str());
    const Golden g = load(config);
    auto model = VaeModel::create(*backend_, g.weights);
    QVERIFY2(model.is_ok(), model.status().to_string().c_str());
    for (const std::string which : {"A", "B"}) {
      const std::string name = g.case_of(config, "tiled_decode", which) + ".dec_tiled_" + which;
      TileOptions opt;
      opt.mode = TilingMode::kBlend;
      opt.layout = TileLayout::kReference;
      opt.spec = g.spec(config, "tiled_decode", which);
      TileRunReport report;
      TileHooks th;
      th.report = &report;
      auto out = tiled_decode(*model, g.input(g.case_of(config, "tiled_decode", which)), opt,
                              StreamOptions{1}, {}, &th);
      QVERIFY2(out.is_ok(), out.status().to_string().c_str());
      auto d = compare(*out, g.ref(name));
      QVERIFY2(d.is_ok(), d.status().to_string().c_str());
      qInfo("%s %s (%zu tiles)", config.c_str(), fmt(name.c_str(), *d).c_str(),
            report.rects.size());
      QVERIFY2(d->max_abs <= 1e-4 && d->rms <= 1e-5, fmt(name.c_str(), *d).c_str());
      QCOMPARE(report.rects.size(), which == "A" ? size_t{15} : size_t{6});
    }
    {
      const std::string name = g.case_of(config, "tiled_encode", "A") + ".enc_moments_tiled_A";
      TileOptions opt;
      opt.mode = TilingMode::kBlend;
      opt.spec = g.spec(config, "tiled_encode", "A");
      auto out = tiled_encode(*model, g.input(g.case_of(config, "tiled_encode", "A")), opt,
                              StreamOptions{1});
      QVERIFY2(out.is_ok(), out.status().to_string().c_str());
      auto d = compare(*out, g.ref(name));
      QVERIFY2(d.is_ok(), d.status().to_string().c_str());
      qInfo("%s %s", config.c_str(), fmt(name.c_str(), *d).c_str());
      QVERIFY2(d->max_abs <= 1e-4 && d->rms <= 1e-5, fmt(name.c_str(), *d).c_str());
    }
  }

  // Exact mode against the untiled golden tensors.
  void exact(const std::string& config, bool full) {
    if (!test::have_golden()) QSKIP(test::golden_missing_message().c_str());
    const Golden g = load(config);
    auto model = VaeModel::create(*backend_, g.weights);
    QVERIFY2(model.is_ok(), model.status().to_string().c_str());
    struct Case {
      std::string input, ref;
      bool encode;
      TileSpec tile;
      int chunk;
    };
    std::vector<Case> cases = {
        {"L2", "L2.dec", false, {32, 32, 0, 0}, 1},
        {"V5", "V5.enc_moments", true, {32, 32, 0, 0}, 1},
    };
    if (full) {
      cases.push_back({"L2", "L2.dec", false, {24, 40, 0, 0}, 0});  // tiles not multiples of 8
      cases.push_back({"L2", "L2.dec", false, {16, 16, 0, 0}, 1});
      cases.push_back({"L5", "L5.dec", false, {32, 24, 0, 0}, 1});  // 4 streamed chunks
      cases.push_back({"L5", "L5.dec", false, {40, 40, 0, 0}, 2});
      cases.push_back({"V17", "V17.enc_moments", true, {24, 32, 0, 0}, 1});
      cases.push_back({"V5", "V5.enc_moments", true, {16, 48, 0, 0}, 0});
      cases.push_back({"I1", "I1.enc_moments", true, {32, 32, 0, 0}, 1});
    }
    for (const Case& c : cases) {
      TileOptions opt;
      opt.mode = TilingMode::kExact;
      opt.spec = c.tile;
      opt.weights = &g.weights;
      TileRunReport report;
      TileHooks th;
      th.report = &report;
      const HostTensor in = g.input(c.input);
      auto out = c.encode ? tiled_encode(*model, in, opt, StreamOptions{c.chunk}, {}, &th)
                          : tiled_decode(*model, in, opt, StreamOptions{c.chunk}, {}, &th);
      QVERIFY2(out.is_ok(), out.status().to_string().c_str());
      auto d = compare(*out, g.ref(c.ref));
      QVERIFY2(d.is_ok(), d.status().to_string().c_str());
      const std::string what = config + " exact " + c.ref + " tile " +
                               std::to_string(c.tile.tile_h) + "x" + std::to_string(c.tile.tile_w) +
                               " chunk " + std::to_string(c.chunk) + " (" +
                               std::to_string(report.rects.size()) + " final tiles, " +
                               std::to_string(report.tiles_run) + " tile runs)";
      qInfo("%s", fmt(what.c_str(), *d).c_str());
      QVERIFY2(d->max_abs <= 1e-3, fmt(what.c_str(), *d).c_str());
      QVERIFY(report.rects.size() > 1);
    }
  }

 private slots:
  void initTestCase() {
    auto b = create_cpu_backend();
    QVERIFY2(b.is_ok(), b.status().to_string().c_str());
    backend_ = std::move(*b);
  }
  void tinyBlend() { blend("tiny"); }
  void tinyExact() { exact("tiny", true); }
  void realBlend() { blend("real"); }
  void realExact() { exact("real", false); }
};

QTEST_GUILESS_MAIN(tst_TiledGolden)
#include "tst_tiled_golden.moc"
