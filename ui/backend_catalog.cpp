#include "ui/backend_catalog.h"

#include <QFile>
#include <QThread>
#include <algorithm>
#include <thread>

#include "core/base/process_memory.h"
#include "core/cpu/cpu_backend.h"

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace seedvae::ui {

const BackendSpec* BackendCatalog::find(const QVector<BackendSpec>& specs,
                                        const QString& name) const {
  for (const BackendSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

RunOptions BackendCatalog::normalized(const RunOptions& in) const {
  RunOptions s = in;
  const QVector<BackendSpec> specs = backends();
  const BackendSpec* spec = find(specs, QString::fromStdString(s.backend));
  if (!spec && !specs.isEmpty()) {
    s.backend = specs.front().name.toStdString();
    spec = &specs.front();
  }
  if (!spec) return s;
  if (!spec->precisions.isEmpty() &&
      !spec->precisions.contains(QString::fromStdString(s.precision))) {
    s.precision = spec->precisions.front().toStdString();
  }
  if (!spec->has_devices) s.device = 0;
  return s;
}

// ---- host memory ------------------------------------------------------------------------------

namespace {

qint64 meminfo_field(const char* name) {
#ifdef __linux__
  QFile f(QStringLiteral("/proc/meminfo"));
  if (!f.open(QIODevice::ReadOnly)) return -1;
  const QByteArray key = QByteArray(name) + ':';
  for (const QByteArray& line : f.readAll().split('\n')) {
    if (line.startsWith(key)) {
      const QList<QByteArray> parts = line.mid(key.size()).simplified().split(' ');
      if (!parts.isEmpty()) return parts[0].toLongLong() * 1024;
    }
  }
#else
  (void)name;
#endif
  return -1;
}

}  // namespace

qint64 host_available_bytes() {
  return meminfo_field("MemAvailable");
}
qint64 host_total_bytes() {
  return meminfo_field("MemTotal");
}

qint64 process_resident_bytes() {
#ifdef __linux__
  QFile f(QStringLiteral("/proc/self/statm"));
  if (!f.open(QIODevice::ReadOnly)) return -1;
  const QList<QByteArray> parts = f.readAll().simplified().split(' ');
  if (parts.size() < 2) return -1;
  return parts[1].toLongLong() * static_cast<qint64>(sysconf(_SC_PAGESIZE));
#else
  return -1;
#endif
}

qint64 process_peak_resident_bytes() {
  return peak_rss_bytes();
}

// ---- CpuCatalog -------------------------------------------------------------------------------

BackendSpec CpuCatalog::cpu_spec() {
  BackendSpec cpu;
  cpu.name = QStringLiteral("cpu");
  cpu.label = QStringLiteral("CPU (oneDNN)");
  cpu.precisions = {QStringLiteral("fp32")};
  cpu.has_devices = false;
  cpu.memory_is_host = true;
  return cpu;
}

int CpuCatalog::hardware_threads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int CpuCatalog::resolve_threads(int v) {
  if (v > 0) return v;
  return std::max(1, hardware_threads() - 1);
}

QVector<BackendSpec> CpuCatalog::backends() const {
  return {cpu_spec()};
}

QVector<DeviceStatus> CpuCatalog::probe_devices(const QString& backend) const {
  if (backend != QLatin1String("cpu")) return {};
  DeviceStatus d;
  d.index = 0;
  d.name = QStringLiteral("CPU, %1 hardware threads").arg(hardware_threads());
  d.free_bytes = host_available_bytes();
  d.total_bytes = host_total_bytes();
  return {d};
}

Result<std::unique_ptr<Backend>> CpuCatalog::create(const RunOptions& s) const {
  if (s.backend != "cpu") return unsupported("backend \"" + s.backend + "\" is not in this build");
  if (s.precision != "fp32") return unsupported("the CPU backend computes in fp32 only");
  CpuBackendOptions o;
  o.threads = resolve_threads(s.threads);
  return create_cpu_backend(o);
}

}  // namespace seedvae::ui
