#include "ui/backend_catalog.h"

#include <QFile>
#include <QThread>
#include <algorithm>
#include <thread>

#include "core/cpu/cpu_backend.h"

#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
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

EngineSettings BackendCatalog::normalized(const EngineSettings& in) const {
  EngineSettings s = in;
  const QVector<BackendSpec> specs = backends();
  const BackendSpec* spec = find(specs, s.backend);
  if (!spec && !specs.isEmpty()) {
    s.backend = specs.front().name;
    spec = &specs.front();
  }
  if (!spec) return s;
  if (!spec->precisions.isEmpty() && !spec->precisions.contains(s.precision)) {
    s.precision = spec->precisions.front();
  }
  QMap<QString, QVariant> toggles;
  for (const ToggleSpec& t : spec->toggles) {
    QVariant v = s.toggles.value(t.key, t.default_value);
    switch (t.kind) {
      case ToggleSpec::Kind::kBool: v = v.toBool(); break;
      case ToggleSpec::Kind::kInt: v = std::clamp(v.toInt(), t.minimum, t.maximum); break;
      case ToggleSpec::Kind::kChoice:
        if (!t.choices.contains(v.toString())) v = t.default_value;
        v = v.toString();
        break;
    }
    toggles.insert(t.key, v);
  }
  s.toggles = toggles;
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

qint64 host_available_bytes() { return meminfo_field("MemAvailable"); }
qint64 host_total_bytes() { return meminfo_field("MemTotal"); }

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
#if defined(__unix__) || defined(__APPLE__)
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<qint64>(u.ru_maxrss) * 1024;
#else
  return -1;
#endif
}

// ---- CpuCatalog -------------------------------------------------------------------------------

ToggleSpec CpuCatalog::threads_toggle() {
  ToggleSpec t;
  t.key = QStringLiteral("threads");
  t.label = QStringLiteral("CPU threads");
  t.tooltip = QStringLiteral(
      "Threads for the oneDNN convolutions and the element-wise loops. More threads: faster, "
      "until memory bandwidth saturates. 'auto' uses every hardware thread but one, so the "
      "interface stays responsive; each thread adds a little scratch memory.");
  t.kind = ToggleSpec::Kind::kInt;
  t.default_value = 0;
  t.minimum = 0;
  t.maximum = 256;
  t.special_value_text = QStringLiteral("auto");
  return t;
}

int CpuCatalog::hardware_threads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int CpuCatalog::resolve_threads(int v) {
  if (v > 0) return v;
  return std::max(1, hardware_threads() - 1);
}

QVector<BackendSpec> CpuCatalog::backends() const {
  BackendSpec cpu;
  cpu.name = QStringLiteral("cpu");
  cpu.label = QStringLiteral("CPU (oneDNN)");
  cpu.precisions = {QStringLiteral("fp32")};
  cpu.toggles = {threads_toggle()};
  cpu.has_devices = false;
  cpu.memory_is_host = true;
  return {cpu};
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

Result<std::unique_ptr<Backend>> CpuCatalog::create(const EngineSettings& s) const {
  if (s.backend != QLatin1String("cpu")) {
    return unsupported("backend \"" + s.backend.toStdString() + "\" is not in this build");
  }
  if (s.precision != QLatin1String("fp32")) {
    return unsupported("the CPU backend computes in fp32 only");
  }
  CpuBackendOptions o;
  o.threads = resolve_threads(s.toggles.value(QStringLiteral("threads"), 0).toInt());
  return create_cpu_backend(o);
}

}  // namespace seedvae::ui
