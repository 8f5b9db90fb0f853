// seedvae-studio: the composition root of the Qt studio. It knows every module: it describes the
// backends of this build to the UI as data (ui::BackendCatalog: precisions and engine toggles with
// their tooltips) and creates them through the same backends module as the CLI (app/backends.h),
// or, for the CUDA engine's option set, through gpu/cuda_backend.h. The UI itself never links gpu/.
// create() and probe_devices() run on the studio's engine thread, so the CUDA device, streams and
// handles are born on the thread that uses them.
#include <QString>
#include <QtGlobal>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "app/backends.h"
#include "ui/backend_catalog.h"
#include "ui/studio_app.h"
#ifdef SEEDVAE_HAVE_CUDA
#include "gpu/cuda_backend.h"
#endif
#ifdef _WIN32
#include "core/base/windows_lean.h"  // AttachConsole (--version)
#endif

namespace seedvae::app {
namespace {

using ui::BackendSpec;
using ui::DeviceStatus;
using ui::EngineSettings;
using ui::ToggleSpec;

#ifdef SEEDVAE_HAVE_CUDA
// The CUDA engine's switches (gpu::CudaOptions), one row each: key, label, what it does and what
// it costs. A new switch in CudaOptions needs one row here to appear in the studio.
struct CudaBoolToggle {
  const char* key;
  const char* label;
  const char* tooltip;
  bool gpu::CudaOptions::*member;
};
const CudaBoolToggle kCudaBoolToggles[] = {
    {"autotune", "cuDNN autotune",
     "Time every cuDNN convolution algorithm once per shape and keep the fastest (cached per GPU, "
     "driver and cuDNN version). Off: cuDNN's heuristic choice. Costs a few seconds on the first "
     "run of each shape; usually the fastest afterwards.",
     &gpu::CudaOptions::autotune},
    {"channels_last", "Channels-last (NDHWC)",
     "Keep activations in NDHWC so convolutions run on tensor cores without layout changes. Off: "
     "NCDHW (the PyTorch default layout; slower convolutions, no transposes).",
     &gpu::CudaOptions::channels_last},
    {"fused_gn_silu", "Fused GroupNorm + SiLU",
     "One pass for GroupNorm and SiLU instead of two: less memory traffic and one activation-sized "
     "buffer fewer. Off: separate kernels (for measuring the gain).",
     &gpu::CudaOptions::fused_gn_silu},
    {"fused_attention", "Fused attention",
     "Flash-style mid-block attention with O(tokens) memory. Off: materialised scores through "
     "cuBLAS, tokens^2 memory per frame (gigabytes at 1080p).",
     &gpu::CudaOptions::fused_attention},
    {"caching_allocator", "Caching allocator",
     "Reuse freed device blocks instead of cudaMalloc/cudaFree per tensor: much faster, but the "
     "driver sees the cached bytes as used.",
     &gpu::CudaOptions::caching_allocator},
    {"buffer_reuse", "Buffer reuse (in-place causal padding)",
     "Outputs that feed a causal convolution get spare frames in front, so the causal context is "
     "written in place instead of copying the tensor (channels-last only). Less memory and traffic.",
     &gpu::CudaOptions::buffer_reuse},
};
#endif

#ifdef SEEDVAE_HAVE_CUDA
// Through the CLI's backends module when its request carries the CUDA options (`cuda`), directly
// through gpu/ otherwise: the same factory either way. A template, so the member test compiles
// whichever way BackendRequest looks.
template <typename Request>
Result<std::unique_ptr<Backend>> create_cuda(const gpu::CudaOptions& o) {
  if constexpr (requires(Request r) { r.cuda = o; }) {
    Request r;
    r.name = "cuda";
    r.device = o.device;
    r.cuda = o;
    return make_backend(r);
  } else {
    return gpu::create_cuda_backend(o);
  }
}
#endif

class AppCatalog final : public ui::BackendCatalog {
 public:
  QVector<BackendSpec> backends() const override {
    QVector<BackendSpec> out;
    BackendSpec cpu;
    cpu.name = QStringLiteral("cpu");
    cpu.label = QStringLiteral("CPU (oneDNN)");
    cpu.precisions = {QStringLiteral("fp32")};
    cpu.toggles = {ui::CpuCatalog::threads_toggle()};
    cpu.has_devices = false;
    cpu.memory_is_host = true;
    out.push_back(cpu);

    BackendSpec cuda;
    cuda.name = QStringLiteral("cuda");
    cuda.label = QStringLiteral("CUDA (cuDNN, cuBLAS)");
    cuda.has_devices = true;
    cuda.memory_is_host = false;
#ifdef SEEDVAE_HAVE_CUDA
    cuda.precisions = {QStringLiteral("bf16"), QStringLiteral("fp16"), QStringLiteral("tf32"),
                       QStringLiteral("fp32")};
    for (const CudaBoolToggle& t : kCudaBoolToggles) {
      ToggleSpec s;
      s.key = QString::fromLatin1(t.key);
      s.label = QString::fromUtf8(t.label);
      s.tooltip = QString::fromUtf8(t.tooltip);
      s.kind = ToggleSpec::Kind::kBool;
      s.default_value = gpu::CudaOptions{}.*(t.member);
      cuda.toggles.push_back(s);
    }
    ToggleSpec ws;
    ws.key = QStringLiteral("workspace_mib");
    ws.label = QStringLiteral("cuDNN workspace");
    ws.tooltip = QStringLiteral(
        "Largest scratch buffer one cuDNN convolution may use (MiB). More lets cuDNN pick faster "
        "algorithms; it adds to the peak memory.");
    ws.kind = ToggleSpec::Kind::kInt;
    ws.default_value = gpu::CudaOptions{}.workspace_mib;
    ws.minimum = 0;
    ws.maximum = 16384;
    cuda.toggles.push_back(ws);
    static const gpu::RuntimeInfo info = gpu::runtime_info();  // once: driver queries only
    cuda.available = info.error.empty();
    cuda.unavailable_reason = QString::fromStdString(info.error);
#else
    cuda.precisions = {QStringLiteral("fp32")};
    cuda.available = false;
    cuda.unavailable_reason =
        QStringLiteral("This build has no CUDA backend (configure with -DSEEDVAE_WITH_CUDA=ON).");
#endif
    out.push_back(cuda);
    return out;
  }

  QVector<DeviceStatus> probe_devices(const QString& backend) const override {
    if (backend == QLatin1String("cpu")) return cpu_.probe_devices(backend);
    QVector<DeviceStatus> out;
#ifdef SEEDVAE_HAVE_CUDA
    if (backend == QLatin1String("cuda")) {
      for (const gpu::DeviceInfo& d : gpu::list_devices()) {
        DeviceStatus s;
        s.index = d.index;
        s.name = QString::fromStdString(d.name);
        s.free_bytes = d.free_bytes;
        s.total_bytes = d.total_bytes;
        out.push_back(s);
      }
    }
#endif
    return out;
  }

  Result<std::unique_ptr<Backend>> create(const EngineSettings& s) const override {
    if (s.backend == QLatin1String("cpu")) {
      if (s.precision != QLatin1String("fp32")) return unsupported("the CPU backend computes in fp32 only");
      BackendRequest r;
      r.name = "cpu";
      r.threads = ui::CpuCatalog::resolve_threads(s.toggles.value(QStringLiteral("threads"), 0).toInt());
      return make_backend(r);
    }
    if (s.backend == QLatin1String("cuda")) {
#ifdef SEEDVAE_HAVE_CUDA
      gpu::CudaOptions o;
      o.device = s.device;
      const auto p = gpu::precision_from_name(s.precision.toStdString());
      if (!p) return invalid_argument("unknown precision " + s.precision.toStdString());
      o.precision = *p;
      for (const CudaBoolToggle& t : kCudaBoolToggles) {
        o.*(t.member) = s.toggles.value(QString::fromLatin1(t.key), o.*(t.member)).toBool();
      }
      o.workspace_mib = s.toggles.value(QStringLiteral("workspace_mib"), o.workspace_mib).toInt();
      SEEDVAE_TRY(gpu::validate_options(o));
      return create_cuda<BackendRequest>(o);
#else
      return unsupported("this build has no CUDA backend (configure with -DSEEDVAE_WITH_CUDA=ON)");
#endif
    }
    return invalid_argument("unknown backend \"" + s.backend.toStdString() + "\"");
  }

 private:
  ui::CpuCatalog cpu_;
};

}  // namespace
}  // namespace seedvae::app

int main(int argc, char** argv) {
  // --version: the build report with the Qt versions (compiled against, loaded), before any
  // QApplication exists, so it works without a display.
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--version") {
#ifdef _WIN32  // a GUI-subsystem program: print into the console it was started from, if any
      if (AttachConsole(ATTACH_PARENT_PROCESS)) std::freopen("CONOUT$", "w", stdout);
#endif
      const std::string qt = std::string(qVersion()) + " (built with " QT_VERSION_STR ")";
      std::fputs(seedvae::app::version_report("seedvae-studio", {{"qt", qt}}).c_str(), stdout);
      return 0;
    }
  }
  return seedvae::ui::run_studio(argc, argv, std::make_shared<seedvae::app::AppCatalog>());
}
