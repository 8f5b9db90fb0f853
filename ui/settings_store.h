// Persistence of the studio's settings: the current engine settings, the two A/B slots, recent
// files and window state in QSettings; named presets as JSON files in a folder
// (<AppData>/presets/<name>.json by default), one preset per file so they can be shared:
//
//   {"format": "seedvae-studio-preset", "version": 1, "name": "fast", "settings": {...}}
//
// Everything here runs on the GUI thread and touches only small files.
#pragma once

#include <QSettings>
#include <QString>
#include <QStringList>
#include <memory>
#include <optional>

#include "ui/studio_types.h"

namespace seedvae::ui {

class SettingsStore {
 public:
  // `settings`: where to persist (nullptr: the application's default QSettings). `presets_dir`:
  // empty for <AppDataLocation>/presets.
  explicit SettingsStore(std::unique_ptr<QSettings> settings = nullptr, QString presets_dir = {});

  QSettings& qsettings() { return *settings_; }

  std::optional<RunOptions> load_current() const;
  void save_current(const RunOptions& s);
  std::optional<RunOptions> load_slot(const QString& slot) const;  // "A" or "B"
  void save_slot(const QString& slot, const RunOptions& s);

  QStringList recent(const QString& kind) const;  // kind: "videos" or "weights"
  void add_recent(const QString& kind, const QString& path);
  void remove_recent(const QString& kind, const QString& path);
  static constexpr int kMaxRecent = 8;

  // ---- presets ----
  QString presets_dir() const { return presets_dir_; }
  QStringList preset_names() const;  // sorted
  QString preset_path(const QString& name) const;
  bool save_preset(const QString& name, const RunOptions& s, QString* error = nullptr);
  std::optional<RunOptions> load_preset(const QString& name, QString* error = nullptr,
                                        QStringList* warnings = nullptr) const;
  bool remove_preset(const QString& name);

  // A preset file anywhere (import/export, drag and drop).
  static bool write_preset_file(const QString& path, const QString& name, const RunOptions& s,
                                QString* error = nullptr);
  static std::optional<RunOptions> read_preset_file(const QString& path, QString* error = nullptr,
                                                    QStringList* warnings = nullptr,
                                                    QString* name = nullptr);
  // A file name safe on every OS for preset `name` ("my fast/run" -> "my fast_run").
  static QString sanitize_name(const QString& name);

 private:
  std::unique_ptr<QSettings> settings_;
  QString presets_dir_;
};

}  // namespace seedvae::ui
