#include "app/studio_catalog.h"

#include <QString>
#include <QVector>
#include <memory>

#include "app/backends.h"
#ifdef SEEDVAE_HAVE_CUDA
#include "gpu/cuda_backend.h"
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
    cuda.precisions = {QStringLiteral("bf16"), QStringLiteral("fp16"), QStringLiteral("fidelity"),
                       QStringLiteral("tf32"), QStringLiteral("fp32")};
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

  void release_idle() const override {
#ifdef SEEDVAE_HAVE_CUDA
    gpu::release_idle_devices();
#endif
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

std::shared_ptr<ui::BackendCatalog> make_studio_catalog() {
  return std::make_shared<AppCatalog>();
}

}  // namespace seedvae::app
