// What the studio knows about compute backends, supplied by the composition root (app/): which
// backends this build has, their precisions and engine toggles (data, so a toggle added to a
// backend shows up in the settings panel with its tooltip without UI code changes), how to create
// one, and how to ask a device for its memory.
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

struct ToggleSpec {
  enum class Kind { kBool, kChoice, kInt };
  QString key;      // stored in EngineSettings::toggles and presets
  QString label;    // "cuDNN autotune"
  QString tooltip;  // what it does and what it costs
  Kind kind = Kind::kBool;
  QVariant default_value;
  QStringList choices;     // kChoice
  int minimum = 0, maximum = 0;  // kInt
  QString special_value_text;    // kInt: shown for `minimum` ("auto")
};

struct BackendSpec {
  QString name;    // "cpu", "cuda"
  QString label;   // "CPU (oneDNN)"
  bool available = true;
  QString unavailable_reason;  // shown in the combo's tooltip when not available
  QStringList precisions;      // first is the default
  QVector<ToggleSpec> toggles;
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
  virtual Result<std::unique_ptr<Backend>> create(const EngineSettings& settings) const = 0;

  // Convenience: the spec of `name`, or nullptr.
  const BackendSpec* find(const QVector<BackendSpec>& specs, const QString& name) const;
  // Fills missing toggles with their defaults and drops keys the backend does not declare.
  EngineSettings normalized(const EngineSettings& settings) const;
};

// Memory of this machine from the OS (MemAvailable / MemTotal on Linux); -1 where unknown.
qint64 host_available_bytes();
qint64 host_total_bytes();
// Resident size of this process now; -1 where unknown.
qint64 process_resident_bytes();
// Peak resident size of this process; -1 where unknown.
qint64 process_peak_resident_bytes();

// The CPU backend only (core/cpu), with its thread count as an integer toggle. Used by the tests
// and as the fallback when the composition root supplies nothing else.
class CpuCatalog : public BackendCatalog {
 public:
  QVector<BackendSpec> backends() const override;
  QVector<DeviceStatus> probe_devices(const QString& backend) const override;
  Result<std::unique_ptr<Backend>> create(const EngineSettings& settings) const override;

  static ToggleSpec threads_toggle();
  // Hardware threads of this machine (at least 1).
  static int hardware_threads();
  // Threads the CPU backend uses for toggle value `v` (0 = auto: all hardware threads but one,
  // so the GUI thread keeps a core; the headless job, with no GUI, sets hardware_threads()).
  static int resolve_threads(int v);
};

}  // namespace seedvae::ui
