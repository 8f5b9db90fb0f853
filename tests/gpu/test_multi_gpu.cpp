// Jobs over two CUDA devices. The pipelined decode (core/schedule/pipeline_decode.h):
// bit-identical to one device (tiny configuration in fp32 and bf16 with the heuristic's
// algorithms; the real configuration at 256x256 in bf16 with autotune, its choices shared through
// the cache), and a device failing mid-clip stops the decode with its error, after which the
// remaining device decodes alone. Blend tiles spread over the devices (core/schedule/tiled.h):
// decode and encode of the real configuration in bf16 with autotune bit-identical to one device,
// and a device failing mid-run stops it with its error. Exits 77 with fewer than two devices.
#include <cstdio>
#include <string>
#include <vector>

#include "core/schedule/pipeline_decode.h"
#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"
#include "gpu/cuda_backend.h"
#include "tests/gpu/gpu_pipeline.h"
#include "tests/gpu/gpu_test.h"
#include "tests/gpu/gpu_test_data.h"

using namespace seedvae;
using seedvae::gpu::CudaOptions;
using seedvae::gpu::Precision;

namespace {

CudaOptions options(Precision p, bool autotune) {
  CudaOptions o;
  o.precision = p;
  o.autotune = autotune;
  o.autotune_cache = autotune ? "/tmp/seedvae-test-multi-gpu-autotune.tsv" : "";
  return o;
}

void expect_pipeline_identical(const VaeWeights& w, const CudaOptions& o, const HostTensor& z,
                               const StreamOptions& so, const std::string& what) {
  auto b = gpu::create_cuda_backend(o);
  CHECK_MSG(b.is_ok(), b.status().to_string());
  if (!b) return;
  auto m = make_video_vae(**b, w);
  CHECK_MSG(m.is_ok(), m.status().to_string());
  if (!m) return;
  auto want = decode_latent(**m, z, so);  // tunes every convolution on device 0 (autotune)
  CHECK_MSG(want.is_ok(), want.status().to_string());
  if (!want) return;
  auto plan = plan_pipeline(w, 2, z.shape()[3], z.shape()[4], so);
  CHECK_MSG(plan.is_ok(), plan.status().to_string());
  if (!plan) return;
  PipelineStats stats;
  auto got =
      decode_latent_pipelined(**m, test::cuda_stages(o, w, {0, 1}), *plan, z, so, {}, &stats);
  CHECK_MSG(got.is_ok(), got.status().to_string());
  if (!got) return;
  auto d = compare(*got, *want);
  const bool same = d.is_ok() && d->max_abs == 0.0;
  CHECK_MSG(same, what + ": max abs " + std::to_string(d ? d->max_abs : -1.0));
  std::printf("    %s (%s): %s; busy %.1f / %.1f ms, imported %.1f MiB\n", what.c_str(),
              plan->describe().c_str(), same ? "identical" : "DIFFERENT", stats.busy_ms[0],
              stats.busy_ms[1], stats.imported_bytes[1] / 1048576.0);
}

}  // namespace

GPU_TEST(two_cards_equal_one_card_tiny) {
  const HostTensor z = test::random_tensor(Shape{1, 16, 6, 4, 6}, 95);
  for (const Precision p : {Precision::kFp32, Precision::kBf16}) {
    expect_pipeline_identical(test::tiny_weights(), options(p, false), z, StreamOptions{},
                              std::string("tiny ") + std::string(gpu::precision_name(p)));
  }
}

GPU_TEST(two_cards_equal_one_card_real_bf16_autotuned) {
  const VaeWeights w = synthesize_weights(VaeConfig::real(), 11);
  const HostTensor z = test::random_tensor(Shape{1, 16, 5, 32, 32}, 96);
  expect_pipeline_identical(w, options(Precision::kBf16, true), z, StreamOptions{},
                            "real 256x256 bf16, autotune");
}

GPU_TEST(failing_card_stops_the_decode_and_the_other_card_decodes_alone) {
  const CudaOptions o = options(Precision::kBf16, false);
  const HostTensor z = test::random_tensor(Shape{1, 16, 6, 4, 6}, 97);
  auto b = gpu::create_cuda_backend(o);
  CHECK_MSG(b.is_ok(), b.status().to_string());
  if (!b) return;
  REQUIRE_OK(VaeModel m, VaeModel::create(**b, test::tiny_weights()));
  REQUIRE_OK(PipelinePlan plan, plan_pipeline(test::tiny_weights(), 2, 4, 6, StreamOptions{}));
  auto failed = decode_latent_pipelined(
      m, test::cuda_stages(o, test::tiny_weights(), {0, 1}, /*fail_share=*/1, /*after=*/20), plan,
      z, StreamOptions{});
  CHECK(!failed.is_ok());
  const std::string msg = failed.status().to_string();
  std::printf("    failing card 1: %s\n", msg.c_str());
  CHECK(msg.find("device share 1") != std::string::npos);
  CHECK(msg.find("injected") != std::string::npos);
  // the remaining card alone
  auto alone = decode_latent(m, z, StreamOptions{});
  CHECK_MSG(alone.is_ok(), alone.status().to_string());
}

GPU_TEST(blend_tiles_on_two_cards_equal_one_card) {
  const VaeWeights w = synthesize_weights(VaeConfig::real(), 11);
  const CudaOptions o = options(Precision::kBf16, true);
  auto b = gpu::create_cuda_backend(o);
  CHECK_MSG(b.is_ok(), b.status().to_string());
  if (!b) return;
  REQUIRE_OK(VaeModel m, VaeModel::create(**b, w));
  TileOptions to;
  to.mode = TilingMode::kBlend;
  to.spec = {128, 128, 32, 32};  // 3 x 3 tiles of a 256 x 256 frame
  const StreamOptions so;
  const HostTensor z = test::random_tensor(Shape{1, 16, 5, 32, 32}, 98);
  const HostTensor video = test::random_tensor(Shape{1, 3, 17, 256, 256}, 99);
  // one card first: it tunes every tile's convolutions, which the other card then loads
  REQUIRE_OK(HostTensor want_dec, tiled_decode(m, z, to, so));
  REQUIRE_OK(HostTensor want_enc, tiled_encode(m, video, to, so));
  {
    auto devices = DeviceWorkers::create(m, test::cuda_stages(o, w, {0, 1}), 2);
    CHECK_MSG(devices.is_ok(), devices.status().to_string());
    if (!devices) return;
    to.devices = devices->get();
    for (const bool encode : {false, true}) {
      TileRunReport report;
      TileHooks th;
      th.report = &report;
      auto got =
          encode ? tiled_encode(m, video, to, so, {}, &th) : tiled_decode(m, z, to, so, {}, &th);
      CHECK_MSG(got.is_ok(), got.status().to_string());
      if (!got) return;
      auto d = compare(*got, encode ? want_enc : want_dec);
      const bool same = d.is_ok() && d->max_abs == 0.0;
      CHECK_MSG(same, std::string(encode ? "encode" : "decode") + ": max abs " +
                          std::to_string(d ? d->max_abs : -1.0));
      CHECK(report.devices.size() == 2);
      if (report.devices.size() != 2) return;
      std::printf(
          "    blend %s, 9 tiles x %lld chunks: %s; tiles per card %lld / %lld, busy %.0f / "
          "%.0f ms\n",
          encode ? "encode" : "decode", static_cast<long long>(report.chunks),
          same ? "identical" : "DIFFERENT", static_cast<long long>(report.devices[0].tiles),
          static_cast<long long>(report.devices[1].tiles), report.devices[0].busy_ms,
          report.devices[1].busy_ms);
      CHECK(report.devices[0].tiles > 0 && report.devices[1].tiles > 0);
    }
  }
  // a card failing mid-run stops it with its error
  auto failing =
      DeviceWorkers::create(m, test::cuda_stages(o, w, {0, 1}, /*fail_share=*/1, /*after=*/20), 2);
  CHECK_MSG(failing.is_ok(), failing.status().to_string());
  if (!failing) return;
  to.devices = failing->get();
  auto failed = tiled_decode(m, z, to, so);
  CHECK(!failed.is_ok());
  const std::string msg = failed.status().to_string();
  std::printf("    failing card 1 in blend tiles: %s\n", msg.c_str());
  CHECK(msg.find("device 1") != std::string::npos);
  CHECK(msg.find("injected") != std::string::npos);
}

int main(int argc, char** argv) {
  const auto info = gpu::runtime_info();
  if (!info.error.empty()) gpu_test::skip_all(info.error.c_str());
  if (gpu::list_devices().size() < 2) gpu_test::skip_all("fewer than two CUDA devices");
  return gpu_test::run_all(argc, argv);
}
