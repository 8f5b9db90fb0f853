// Checkpoint families (core/vae/wan_config.h): the Wan2.1/Wan2.2 parameter lists against the real
// checkpoints' key lists, family and configuration inferred from real shapes, from the tiny
// reference weights in every container and dtype (safetensors and .pth; fp16, bf16, fp32), clear
// errors for what is neither, and the load_weights hook (a Wan checkpoint is kUnsupported,
// SeedVR2 loads as before, also from a .pth).
//
// Reference data: $SEEDVAE_GOLDEN_WAN_DIR or the CMake cache path SEEDVAE_GOLDEN_WAN_DIR
// (default ../shared/golden-wan); tests that need it QSKIP when it is absent.
#include <QTemporaryDir>
#include <QtTest>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/io/tensor_file.h"
#include "core/io/torch_checkpoint.h"
#include "core/vae/state_dict.h"
#include "core/vae/wan_config.h"
#include "core/vae/wan_model.h"
#include "tests/io/pth_writer.h"

using namespace seedvae;
using namespace seedvae::test;
namespace fs = std::filesystem;

namespace {

fs::path golden_wan_dir() {
  if (const char* env = std::getenv("SEEDVAE_GOLDEN_WAN_DIR"); env && *env) return env;
#ifdef SEEDVAE_GOLDEN_WAN_DIR
  return SEEDVAE_GOLDEN_WAN_DIR;
#else
  return "../shared/golden-wan";
#endif
}

#define REQUIRE_GOLDEN_WAN()                                                   \
  do {                                                                         \
    if (!fs::exists(golden_wan_dir() / "manifest.json")) {                     \
      QSKIP(("Wan reference data not found at " + golden_wan_dir().string() +  \
             " (set -DSEEDVAE_GOLDEN_WAN_DIR=... or $SEEDVAE_GOLDEN_WAN_DIR)") \
                .c_str());                                                     \
    }                                                                          \
  } while (0)

struct KeyList {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
};

KeyList read_keys(const std::string& file) {
  std::ifstream in(golden_wan_dir() / file);
  const auto j = nlohmann::ordered_json::parse(in);
  KeyList k;
  for (const auto& [name, shape] : j.items()) {
    k.names.push_back(name);
    k.shapes.emplace_back(shape.get<std::vector<int64_t>>());
  }
  return k;
}

// Names and shapes without data: enough for family inference, which reads shapes only.
class ShapesOnly final : public TensorFile {
 public:
  std::vector<std::string> list;
  std::map<std::string, Shape, std::less<>> shapes;
  DType dtype = DType::kF16;

  void add(const std::string& n, const Shape& s) {
    list.push_back(n);
    shapes.emplace(n, s);
  }
  const std::vector<std::string>& names() const override { return list; }
  bool contains(std::string_view n) const override { return shapes.find(n) != shapes.end(); }
  Result<TensorView> get(std::string_view n) const override {
    auto it = shapes.find(n);
    if (it == shapes.end()) return not_found("no " + std::string(n));
    TensorView v;
    v.name = it->first;
    v.dtype = dtype;
    v.shape = it->second;
    return v;
  }
  const std::map<std::string, std::string>& metadata() const override { return meta_; }
  const std::filesystem::path& path() const override { return path_; }
  uint64_t file_size() const override { return 0; }
  std::string_view container() const override { return "test"; }

 private:
  std::map<std::string, std::string> meta_;
  fs::path path_ = "shapes-only";
};

ShapesOnly from_keys(const KeyList& k) {
  ShapesOnly f;
  for (size_t i = 0; i < k.names.size(); ++i) f.add(k.names[i], k.shapes[i]);
  return f;
}

// The tiny reference weights as .pth tensors in `dtype`, in checkpoint order.
std::vector<PthTensor> pth_tensors(const SafetensorsFile& st, const WanConfig& c, DType dtype) {
  std::vector<PthTensor> out;
  for (const auto& p : c.parameters()) {
    const HostTensor h = st.get(p.name)->to_host(dtype);
    PthTensor t;
    t.name = p.name;
    t.dtype = dtype;
    t.shape = p.shape.dims();
    t.data.resize(static_cast<size_t>(h.nbytes()));
    if (h.nbytes()) std::memcpy(t.data.data(), h.raw(), t.data.size());
    out.push_back(std::move(t));
  }
  return out;
}

void write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool has(const Status& s, const std::string& phrase) {
  return s.message().find(phrase) != std::string::npos;
}

}  // namespace

class tst_CheckpointFamily : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  fs::path tmp(const std::string& name) { return fs::path(dir_.path().toStdString()) / name; }

 private slots:
  void parametersMatchTheRealKeyLists_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<int>("family");
    QTest::addColumn<qint64>("tensors");
    QTest::addColumn<qint64>("parameters");
    QTest::newRow("wan2.1") << "wan21_vae_keys_real.json" << 1 << qint64{194} << qint64{126892531};
    QTest::newRow("wan2.2") << "wan22_vae_keys_real.json" << 2 << qint64{196} << qint64{704688668};
  }
  void parametersMatchTheRealKeyLists() {
    REQUIRE_GOLDEN_WAN();
    QFETCH(QString, file);
    QFETCH(int, family);
    QFETCH(qint64, tensors);
    QFETCH(qint64, parameters);
    const KeyList k = read_keys(file.toStdString());
    const WanConfig c = family == 1 ? WanConfig::wan21() : WanConfig::wan22();
    const auto params = c.parameters();
    QCOMPARE(static_cast<qint64>(params.size()), tensors);
    QCOMPARE(static_cast<qint64>(k.names.size()), tensors);
    for (size_t i = 0; i < params.size(); ++i) {  // same names, shapes and order
      QCOMPARE(params[i].name, k.names[i]);
      QVERIFY2(params[i].shape == k.shapes[i], params[i].name.c_str());
    }
    QCOMPARE(static_cast<qint64>(c.parameter_count()), parameters);
    QVERIFY(c.validate().is_ok());
  }

  // The real configurations inferred from the real shapes (no data needed).
  void infersTheRealConfigurations() {
    REQUIRE_GOLDEN_WAN();
    for (const auto& [file, want] : {std::pair{"wan21_vae_keys_real.json", WanConfig::wan21()},
                                     std::pair{"wan22_vae_keys_real.json", WanConfig::wan22()}}) {
      ShapesOnly f = from_keys(read_keys(file));
      for (DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
        f.dtype = dt;
        auto id = identify_checkpoint(f);
        QVERIFY2(id.is_ok(), id.status().to_string().c_str());
        QCOMPARE(id->family, want.family);
        QVERIFY(id->wan.has_value());
        QVERIFY2(*id->wan == want, id->wan->to_string().c_str());
        QCOMPARE(id->parameters, want.parameter_count());
        QCOMPARE(id->dtype, dt);
        QVERIFY(!id->seedvr2.has_value());
      }
    }
    QCOMPARE(WanConfig::wan21().spatial_factor(), 8);
    QCOMPARE(WanConfig::wan22().spatial_factor(), 16);
    QCOMPARE(WanConfig::wan22().temporal_factor(), 4);
    QCOMPARE(WanConfig::wan21().to_string(),
             std::string("dim 96, z_dim 16, dim_mult [1, 2, 4, 4], 2 res blocks, temporal "
                         "downsample [false, true, true]"));
  }

  // Each kind of damage is named: a missing tensor, a mis-shaped one, an extra one.
  void brokenWanCheckpointsListTheProblems() {
    REQUIRE_GOLDEN_WAN();
    const KeyList k = read_keys("wan21_vae_keys_real.json");
    ShapesOnly f;
    for (size_t i = 0; i < k.names.size(); ++i) {
      if (k.names[i] == "decoder.upsamples.4.shortcut.bias") continue;
      Shape s = k.shapes[i];
      if (k.names[i] == "encoder.middle.1.proj.weight") s = Shape({384, 383, 1, 1});
      f.add(k.names[i], s);
    }
    f.add("decoder.extra.weight", Shape({1}));
    auto id = identify_checkpoint(f);
    QVERIFY(!id.is_ok());
    QCOMPARE(id.status().code(), StatusCode::kInvalidArgument);
    const Status& s = id.status();
    QVERIFY2(has(s, "does not match the Wan2.1 VAE configuration"), s.message().c_str());
    QVERIFY2(has(s, "1 missing tensors:\n    decoder.upsamples.4.shortcut.bias"),
             s.message().c_str());
    QVERIFY2(has(s, "encoder.middle.1.proj.weight is [384, 383, 1, 1], expected [384, 384, 1, 1]"),
             s.message().c_str());
    QVERIFY2(has(s, "1 unexpected tensors:\n    decoder.extra.weight"), s.message().c_str());
    // A block that is neither a residual block nor a resampler.
    ShapesOnly g = from_keys(k);
    g.add("encoder.downsamples.11.weird", Shape({1}));
    auto w = identify_checkpoint(g);
    QVERIFY(!w.is_ok());
    QVERIFY2(has(w.status(), "encoder.downsamples.11 is neither a residual block"),
             w.status().message().c_str());
    // Wan2.2 with its patchify input channels wrong.
    ShapesOnly h = from_keys(read_keys("wan22_vae_keys_real.json"));
    h.shapes["encoder.conv1.weight"] = Shape({160, 13, 3, 3, 3});
    auto p = identify_checkpoint(h);
    QVERIFY(!p.is_ok());
    QVERIFY2(has(p.status(), "takes 13 channels"), p.status().message().c_str());
  }

  void otherFilesAreNamed() {
    ShapesOnly diffusers;
    diffusers.add("encoder.conv_in.weight", Shape({96, 3, 3, 3, 3}));
    diffusers.add("decoder.norm_out.gamma", Shape({96, 1, 1, 1}));
    auto d = identify_checkpoint(diffusers);
    QVERIFY(!d.is_ok());
    QVERIFY2(has(d.status(), "diffusers"), d.status().message().c_str());
    ShapesOnly prefixed;
    prefixed.add("vae.decoder.middle.0.residual.0.gamma", Shape({384, 1, 1, 1}));
    auto p = identify_checkpoint(prefixed);
    QVERIFY(!p.is_ok());
    QVERIFY2(has(p.status(), "carry the prefix 'vae.'"), p.status().message().c_str());
    ShapesOnly other;
    other.add("weight", Shape({3}));
    auto o = identify_checkpoint(other);
    QVERIFY(!o.is_ok());
    QCOMPARE(o.status().code(), StatusCode::kInvalidArgument);
    QVERIFY2(has(o.status(), "neither a SeedVR2 nor a Wan2.1/Wan2.2 VAE checkpoint") &&
                 has(o.status(), "encoder.conv_in.weight") &&
                 has(o.status(), "decoder.middle.0.residual.0.gamma") &&
                 has(o.status(), "begin with weight"),
             o.status().message().c_str());
  }

  // The tiny reference weights in every container and dtype: same family, configuration and
  // values; load_weights reads them exactly, as the Wan family with that configuration.
  void tinyWeightsInEveryContainer_data() {
    QTest::addColumn<QString>("config");
    QTest::newRow("wan21") << "wan21";
    QTest::newRow("wan22") << "wan22";
  }
  void tinyWeightsInEveryContainer() {
    REQUIRE_GOLDEN_WAN();
    QFETCH(QString, config);
    const bool v21 = config == "wan21";
    const WanConfig want = v21 ? WanConfig::wan21_tiny() : WanConfig::wan22_tiny();
    const fs::path src =
        golden_wan_dir() / config.toStdString() / "tiny" / "weights_fp16.safetensors";
    auto st = SafetensorsFile::open(src);
    QVERIFY2(st.is_ok(), st.status().to_string().c_str());
    const auto first = want.parameters().front().name;
    for (DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
      const std::string tag = std::string(dtype_name(dt));
      // ComfyUI-style safetensors.
      std::vector<HostTensor> hosts;
      for (const auto& n : st->names()) hosts.push_back(st->get(n)->to_host(dt));
      std::vector<NamedTensor> list;
      for (size_t i = 0; i < hosts.size(); ++i) list.push_back({st->names()[i], &hosts[i]});
      const fs::path sp = tmp(config.toStdString() + "_" + tag + ".safetensors");
      QVERIFY(write_safetensors(sp, list).is_ok());
      // The official .pth layout.
      const fs::path pp = tmp(config.toStdString() + "_" + tag + ".pth");
      write(pp, pth_file(pth_tensors(*st, want, dt)));
      for (const fs::path& p : {sp, pp}) {
        auto f = open_tensor_file(p);
        QVERIFY2(f.is_ok(), f.status().to_string().c_str());
        auto id = identify_checkpoint(**f);
        QVERIFY2(id.is_ok(), id.status().to_string().c_str());
        QCOMPARE(id->family, v21 ? VaeFamily::kWan21 : VaeFamily::kWan22);
        QVERIFY2(*id->wan == want, id->wan->to_string().c_str());
        QCOMPARE(id->dtype, dt);
        QVERIFY(!id->mixed_dtypes);
        QCOMPARE(id->parameters, want.parameter_count());
        // The same values as the reference file.
        const HostTensor a = (*f)->get(first)->to_host(DType::kF32);
        const HostTensor b = st->get(first)->to_host(dt).to(DType::kF32);
        QCOMPARE(a.nbytes(), b.nbytes());
        QVERIFY(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0);
        auto ww = load_weights(p);
        QVERIFY2(ww.is_ok(), ww.status().to_string().c_str());
        QCOMPARE(ww->family, v21 ? VaeFamily::kWan21 : VaeFamily::kWan22);
        QVERIFY(ww->is_wan() && ww->wan == want);
        QCOMPARE(ww->spatial_factor(), v21 ? 8 : 16);
        QCOMPARE(ww->latent_channels(), want.z_dim);
        QCOMPARE(ww->dtype, dt);
        QCOMPARE(ww->tensors.size(), st->names().size());
        for (const auto& n : st->names()) {
          const HostTensor x = st->get(n)->to_host(dt);
          const HostTensor& y = ww->tensors.at(n);
          QVERIFY2(y.dtype() == dt && y.nbytes() == x.nbytes() &&
                       std::memcmp(x.raw(), y.raw(), static_cast<size_t>(x.nbytes())) == 0,
                   n.c_str());
        }
      }
    }
  }

  // SeedVR2 is identified as before and now also loads from a .pth, with the same values.
  void seedvr2StillLoadsAlsoFromPth() {
    const VaeWeights w = synthesize_weights(VaeConfig::tiny(), kTinySeed);
    const fs::path sp = tmp("seedvr2.safetensors");
    QVERIFY(save_weights(sp, w, DType::kF16).is_ok());
    auto a = load_weights(sp);
    QVERIFY2(a.is_ok(), a.status().to_string().c_str());
    std::vector<PthTensor> ts;
    for (const auto& p : VaeConfig::tiny().parameters()) {
      const HostTensor& h = w.tensors.at(p.name);
      PthTensor t;
      t.name = p.name;
      t.dtype = DType::kF16;
      t.shape = p.shape.dims();
      t.data.resize(static_cast<size_t>(h.nbytes()));
      std::memcpy(t.data.data(), h.raw(), t.data.size());
      ts.push_back(std::move(t));
    }
    const fs::path pp = tmp("seedvr2.pth");
    write(pp, pth_file(ts));
    auto f = open_tensor_file(pp);
    QVERIFY2(f.is_ok(), f.status().to_string().c_str());
    auto id = identify_checkpoint(**f);
    QVERIFY2(id.is_ok(), id.status().to_string().c_str());
    QCOMPARE(id->family, VaeFamily::kSeedVR2);
    QCOMPARE(id->parameters, VaeConfig::tiny().parameter_count());
    auto b = load_weights(pp);
    QVERIFY2(b.is_ok(), b.status().to_string().c_str());
    QCOMPARE(b->config, a->config);
    QCOMPARE(fp16_digest(*b), fp16_digest(*a));
  }
};

QTEST_GUILESS_MAIN(tst_CheckpointFamily)
#include "tst_checkpoint_family.moc"
