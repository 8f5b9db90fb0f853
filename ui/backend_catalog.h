// What the studio knows about compute backends, supplied by the composition root (app/): which
// backends this build has, their precisions, how to create one, and how to ask a device for its
// memory. The options each backend honours come from the run options table
// (core/pipeline/run_options.h), not from here.
//
// Thread rules: backends() is pure data and may be called from any thread. probe_devices() and
// create() may touch the device (CUDA contexts, handles) and are called ONLY on the engine worker
// thread, so every GPU handle is born on the thread that uses it (ARCHITECTURE.md, "Threads").
#pragma once

#include <QString>
#include <QStringList>
#include <QVariant>
#include <QVector>
#include <memory>

#include "core/backend/backend.h"
#include "ui/studio_types.h"

namespace seedvae::ui {

struct BackendSpec {
  QString name;   // "cpu", "cuda"
  QString label;  // "CPU (oneDNN)"
  bool available = true;
  QString unavailable_reason;  // shown in the combo's tooltip when not available
  QStringList precisions;      // first is the default
  bool has_devices = false;    // shows the device combo
  bool memory_is_host = true;  // the engine's memory comes out of system RAM (CPU backend)
};

class BackendCatalog {
 public:
  virtual ~BackendCatalog() = default;
  virtual QVector<BackendSpec> backends() const = 0;
  // Worker thread only. Devices of `backend` with free/total memory (CPU: one entry for the
  // machine's RAM).
  virtual QVector<DeviceStatus> probe_devices(const QString& backend) const = 0;
  // Worker thread only. The returned backend belongs to the calling thread.
  virtual Result<std::unique_ptr<Backend>> create(const RunOptions& settings) const = 0;
  // Worker thread only, after its backend is gone: gives what the backends leave behind (a GPU's
  // context) back to the system, so an idle studio does not hold a card. Default: nothing.
  virtual void release_idle() const {}

  // Convenience: the spec of `name`, or nullptr.
  const BackendSpec* find(const QVector<BackendSpec>& specs, const QString& name) const;
  // The settings with a backend this build has (the first one otherwise) and one of its
  // precisions (its default otherwise).
  RunOptions normalized(const RunOptions& settings) const;
};

// Memory of this machine from the OS (MemAvailable / MemTotal on Linux); -1 where unknown.
qint64 host_available_bytes();
qint64 host_total_bytes();
// Resident size of this process now; -1 where unknown.
qint64 process_resident_bytes();
// Peak resident size of this process; -1 where unknown.
qint64 process_peak_resident_bytes();

// The CPU backend only (core/cpu). Used by the tests and as the fallback when the composition
// root supplies nothing else.
class CpuCatalog : public BackendCatalog {
 public:
  QVector<BackendSpec> backends() const override;
  QVector<DeviceStatus> probe_devices(const QString& backend) const override;
  Result<std::unique_ptr<Backend>> create(const RunOptions& settings) const override;

  static BackendSpec cpu_spec();
  // Hardware threads of this machine (at least 1).
  static int hardware_threads();
  // Threads the CPU backend uses for the threads option `v` (0 = auto: all hardware threads but
  // one, so the GUI thread keeps a core; the headless job, with no GUI, sets hardware_threads()).
  static int resolve_threads(int v);
};

}  // namespace seedvae::ui
