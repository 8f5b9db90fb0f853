// seedvae-studio: the composition root of the Qt studio. It knows every module: it describes the
// backends of this build to the UI as data (ui::BackendCatalog: names and precisions; the options
// come from the run options table) and creates them through the same backends module as the CLI
// (app/backends.h). The UI itself never links gpu/. create() and probe_devices() run on the
// studio's engine thread, so the CUDA device, streams and handles are born on the thread that
// uses them.
#include <QString>
#include <QtGlobal>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

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

class AppCatalog final : public ui::BackendCatalog {
 public:
  QVector<BackendSpec> backends() const override {
    QVector<BackendSpec> out{ui::CpuCatalog::cpu_spec()};
    BackendSpec cuda;
    cuda.name = QStringLiteral("cuda");
    cuda.label = QStringLiteral("CUDA (cuDNN, cuBLAS)");
    cuda.has_devices = true;
    cuda.memory_is_host = false;
#ifdef SEEDVAE_HAVE_CUDA
    cuda.precisions = {QStringLiteral("bf16"), QStringLiteral("fp16"), QStringLiteral("tf32"),
                       QStringLiteral("fp32")};
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

  Result<std::unique_ptr<Backend>> create(const RunOptions& s) const override {
    RunOptions o = s;
    o.threads = ui::CpuCatalog::resolve_threads(s.threads);  // "auto" leaves the GUI a core
    return make_backend(o);
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
