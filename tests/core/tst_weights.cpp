// Configuration, state dict and the synthetic weight recipe (golden README §7).
#include <QtTest>

#include "core/base/sha256.h"
#include "core/io/safetensors.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_config.h"
#include "tests/support/golden.h"

using namespace seedvae;

class tst_Weights : public QObject {
  Q_OBJECT

 private:
  static std::string tensor_digest(const HostTensor& t) {
    Sha256 sha;
    sha.update(t.raw(), static_cast<size_t>(t.nbytes()));
    return sha.finish_hex();
  }
  // per process, so two runs at once (two checkouts tested side by side) never share files
  std::filesystem::path tmp_ =
      std::filesystem::temp_directory_path() /
      ("seedvae_tst_weights_" + std::to_string(QCoreApplication::applicationPid()));

 private slots:
  void initTestCase() { std::filesystem::create_directories(tmp_); }
  void cleanupTestCase() { std::filesystem::remove_all(tmp_); }

  // ---- pure logic -------------------------------------------------------------------------
  void sha256NistVectors() {
    Sha256 a;
    QCOMPARE(a.finish_hex(),
             std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    Sha256 b;
    b.update("abc", 3);
    QCOMPARE(b.finish_hex(),
             std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    Sha256 c;  // 448-bit message: padding crosses a block boundary
    const char* m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    c.update(m, std::strlen(m));
    QCOMPARE(c.finish_hex(),
             std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    Sha256 d;  // one million 'a', fed in uneven pieces
    std::string chunk(997, 'a');
    size_t left = 1000000;
    while (left) {
      const size_t n = std::min(left, chunk.size());
      d.update(chunk.data(), n);
      left -= n;
    }
    QCOMPARE(d.finish_hex(),
             std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
  }

  void realConfigMatchesSpec() {
    const VaeConfig c = VaeConfig::real();
    const auto params = c.parameters();
    QCOMPARE(params.size(), size_t{250});
    QCOMPARE(c.parameter_count(), int64_t{250648227});
    QCOMPARE(params.front().name, std::string("encoder.conv_in.weight"));
    QCOMPARE(params.back().name, std::string("decoder.conv_out.bias"));
    // Spot checks from docs/model.md §3.
    auto find = [&](const std::string& n) {
      for (const auto& p : params)
        if (p.name == n) return p.shape;
      return Shape{};
    };
    QCOMPARE(find("encoder.down_blocks.0.downsamplers.0.conv.weight"), (Shape{128, 128, 1, 3, 3}));
    QCOMPARE(find("encoder.down_blocks.2.downsamplers.0.conv.weight"), (Shape{512, 512, 3, 3, 3}));
    QCOMPARE(find("decoder.up_blocks.0.upsamplers.0.upscale_conv.weight"),
             (Shape{4096, 512, 1, 1, 1}));
    QCOMPARE(find("decoder.up_blocks.2.upsamplers.0.upscale_conv.weight"),
             (Shape{1024, 256, 1, 1, 1}));
    QCOMPARE(find("decoder.up_blocks.3.resnets.0.conv_shortcut.weight"),
             (Shape{128, 256, 1, 1, 1}));
    QCOMPARE(find("encoder.conv_out.weight"), (Shape{32, 512, 3, 3, 3}));
    QCOMPARE(find("decoder.mid_block.attentions.0.to_out.0.weight"), (Shape{512, 512}));
    QVERIFY(find("decoder.up_blocks.3.upsamplers.0.conv.weight").rank() == 0);
    QCOMPARE(VaeConfig::tiny().parameter_count(), int64_t{3999475});
  }

  void invalidConfigRejected() {
    VaeConfig c = VaeConfig::real();
    c.norm_groups = 24;
    QVERIFY(!c.validate().is_ok());
    c = VaeConfig::real();
    c.block_out_channels = {128};
    QVERIFY(!c.validate().is_ok());
  }

  void workedExampleFirstValues() {
    // golden README §7 worked example (real seed, encoder.conv_in.weight).
    VaeConfig c = VaeConfig::real();
    const VaeWeights w = synthesize_weights(c, kRealSeed);
    const auto& t = w.tensors.at("encoder.conv_in.weight");
    const auto* bits = t.data<uint16_t>();
    QCOMPARE(bits[0], uint16_t{0x2faf});
    QCOMPARE(bits[1], uint16_t{0xb166});
    QCOMPARE(bits[2], uint16_t{0xb113});
    QCOMPARE(bits[3], uint16_t{0xac21});
    // Per-tensor digests, one per scaling rule.
    QCOMPARE(tensor_digest(t),
             std::string("bf7c90f0aa64664e309a576b49b49de3c8045e111cdc3a2e851d3fd3297c3d72"));
    QCOMPARE(tensor_digest(w.tensors.at("encoder.conv_in.bias")),
             std::string("3f5cafff6bcd9d19e5f8ba10bc679e6ca44844bd8de81feb1e5bab26d888290a"));
    QCOMPARE(tensor_digest(w.tensors.at("encoder.down_blocks.0.resnets.0.norm1.weight")),
             std::string("f127f4f4b467de0da71783626476c5eacac4f8d301459b6ed0a229b5c2dc413b"));
    QCOMPARE(tensor_digest(w.tensors.at("encoder.down_blocks.0.resnets.0.conv2.weight")),
             std::string("5a540e521a18af393d7605634175dd5bb7c00ac3d656300f6bb4c934633f55f1"));
    QCOMPARE(tensor_digest(w.tensors.at("decoder.mid_block.attentions.0.to_out.0.weight")),
             std::string("b9f241b3c8dec5ff61b370fc9602492d3e7f763477faef32d1f391b210f22c9b"));
    QCOMPARE(tensor_digest(w.tensors.at("decoder.up_blocks.0.upsamplers.0.upscale_conv.weight")),
             std::string("36be84d3725fbca2af44d0d62f2b59028e019edb351a13b6c57184c83a1582d4"));
    // The whole real model.
    QCOMPARE(fp16_digest(w),
             std::string("0c6e1f6d575a5b785dae0fa86fedd8ed6479cafd12e3af847d10997035a19551"));
  }

  // ---- against the golden files -----------------------------------------------------------
  void syntheticTinyEqualsGoldenFileBitForBit() {
    if (!test::have_golden()) QSKIP(test::golden_missing_message().c_str());
    const auto path = test::golden_dir() / "tiny" / "weights_fp16.safetensors";
    auto loaded = load_weights(path);
    QVERIFY2(loaded.is_ok(), loaded.status().to_string().c_str());
    QCOMPARE(loaded->config, VaeConfig::tiny());
    QCOMPARE(loaded->dtype, DType::kF16);
    QCOMPARE(loaded->sha256,
             std::string("656034ae3a884033711c9c531b5f0730384c0fd6777e9690cda1179ce5a4d268"));
    const VaeWeights synth = synthesize_weights(VaeConfig::tiny(), kTinySeed);
    int64_t differing = 0;
    for (const auto& [name, t] : synth.tensors) {
      const HostTensor& f = loaded->tensors.at(name);
      QCOMPARE(f.shape(), t.shape());
      differing += std::memcmp(f.raw(), t.raw(), static_cast<size_t>(t.nbytes())) != 0;
    }
    QCOMPARE(differing, int64_t{0});
    QCOMPARE(fp16_digest(synth),
             std::string("2ac3db9bbc9786c2d6c4dd8cc9c523eebd025430a4342d34ebc0498ae239e81d"));
  }

  void savedWeightsLoadInEveryDtype() {
    const VaeWeights synth = synthesize_weights(VaeConfig::tiny(), kTinySeed);
    for (DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
      const auto path = tmp_ / ("w_" + std::string(dtype_name(dt)) + ".safetensors");
      QVERIFY(save_weights(path, synth, dt).is_ok());
      auto back = load_weights(path);
      QVERIFY2(back.is_ok(), back.status().to_string().c_str());
      QCOMPARE(back->dtype, dt);
      QCOMPARE(back->config, VaeConfig::tiny());  // groups come from __metadata__ here
      if (dt != DType::kBF16) QCOMPARE(fp16_digest(*back), fp16_digest(synth));
    }
  }

  void mismatchedCheckpointListsEveryProblem() {
    VaeWeights w = synthesize_weights(VaeConfig::tiny(), 1);
    w.tensors.erase("decoder.conv_in.bias");
    w.tensors.erase("encoder.mid_block.attentions.0.to_k.weight");
    w.tensors["decoder.extra.weight"] = HostTensor(DType::kF16, {4});
    w.tensors["decoder.conv_out.bias"] = HostTensor(DType::kF16, {7});
    const auto path = tmp_ / "broken.safetensors";
    QVERIFY(save_weights(path, w, DType::kF16).is_ok());
    auto r = load_weights(path);
    QVERIFY(!r.is_ok());
    const std::string msg = r.status().message();
    QVERIFY2(msg.find("decoder.conv_in.bias") != std::string::npos, msg.c_str());
    QVERIFY2(msg.find("encoder.mid_block.attentions.0.to_k.weight") != std::string::npos,
             msg.c_str());
    QVERIFY2(msg.find("decoder.extra.weight") != std::string::npos, msg.c_str());
    QVERIFY2(msg.find("decoder.conv_out.bias is [7]") != std::string::npos, msg.c_str());
    QVERIFY2(msg.find("2 missing") != std::string::npos, msg.c_str());
  }

  // A checkpoint with two dimensions of one convolution swapped: that tensor is named alone,
  // not the tensors of a configuration inferred from it.
  void swappedDimensionsBlameOneTensor() {
    VaeWeights w = synthesize_weights(VaeConfig::tiny(), 1);
    const std::string name = "encoder.down_blocks.1.resnets.0.conv1.weight";
    const Shape s = w.tensors.at(name).shape();
    QVERIFY(s[0] != s[1]);  // a widening convolution: the swap changes its shape
    w.tensors[name] = HostTensor(DType::kF16, {s[1], s[0], s[2], s[3], s[4]});
    // Without the configuration in the metadata, so that it is inferred from the tensors.
    std::vector<NamedTensor> list;
    for (const auto& [n, t] : w.tensors) list.push_back({n, &t});
    const auto path = tmp_ / "swapped.safetensors";
    QVERIFY(write_safetensors(path, list).is_ok());
    auto r = load_weights(path);
    QVERIFY(!r.is_ok());
    const std::string msg = r.status().message();
    QVERIFY2(msg.find(name) != std::string::npos, msg.c_str());
    QVERIFY2(msg.find("1 mis-shaped tensors:\n    " + name) != std::string::npos, msg.c_str());
    QVERIFY2(msg.find("missing") == std::string::npos, msg.c_str());
  }

  void legacyAttentionNamesAccepted() {
    const VaeWeights w = synthesize_weights(VaeConfig::tiny(), kTinySeed);
    std::vector<NamedTensor> list;
    std::vector<std::string> names;
    for (const auto& [name, t] : w.tensors) {
      std::string n = name;
      for (auto [now, old] : {std::pair{".to_q.", ".query."}, {".to_out.0.", ".proj_attn."}}) {
        if (auto p = n.find(now); p != std::string::npos) n.replace(p, std::strlen(now), old);
      }
      names.push_back(n);
    }
    size_t i = 0;
    for (const auto& [name, t] : w.tensors) list.push_back({names[i++], &t});
    const auto path = tmp_ / "legacy.safetensors";
    QVERIFY(write_safetensors(path, list, VaeConfig::tiny().to_metadata()).is_ok());
    auto r = load_weights(path);
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    QCOMPARE(fp16_digest(*r), fp16_digest(w));
  }

  void notAVaeIsRejected() {
    HostTensor t(DType::kF32, {3});
    NamedTensor nt{"weight", &t};
    const auto path = tmp_ / "other.safetensors";
    QVERIFY(write_safetensors(path, {&nt, 1}).is_ok());
    auto r = load_weights(path);
    QVERIFY(!r.is_ok());
    QVERIFY(r.status().message().find("encoder.conv_in.weight") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(tst_Weights)
#include "tst_weights.moc"
