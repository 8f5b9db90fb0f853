// Persistence of the studio's settings: the current engine settings, the two A/B slots (settings
// and weights), recent files and window state in QSettings; named presets as JSON files in a folder
// (<AppData>/presets/<name>.json by default), one preset per file so they can be shared:
//
//   {"format": "seedvae-studio-preset", "version": 1, "name": "fast", "settings": {...}}
//
// Used from the GUI thread. Values are read from memory and written behind: the QSettings object
// lives on a thread of its own, where its file is rewritten -- with an fdatasync, which took 200 ms
// on the GUI thread while a run spooled frames to the same disk. Presets are small files written
// when the user saves one.
#pragma once

#include <QSettings>
#include <QString>
#include <QStringList>
#include <QThread>
#include <QVariantMap>
#include <memory>
#include <optional>

#include "ui/studio_types.h"

namespace seedvae::ui {

class SettingsStore {
 public:
  // `settings`: where to persist (nullptr: the application's default QSettings). `presets_dir`:
  // empty for <AppDataLocation>/presets.
  explicit SettingsStore(std::unique_ptr<QSettings> settings = nullptr, QString presets_dir = {});
  ~SettingsStore();  // writes what is still pending
  SettingsStore(const SettingsStore&) = delete;
  SettingsStore& operator=(const SettingsStore&) = delete;

  // Any key ("window/geometry", "dirs/video", ...): the file's value at start or the last one set.
  QVariant value(const QString& key, const QVariant& fallback = {}) const;
  void set_value(const QString& key, const QVariant& value);
  // Returns once every value set so far is in the settings file.
  void flush();

  std::optional<RunOptions> load_current() const;
  void save_current(const RunOptions& s);
  std::optional<RunOptions> load_slot(const QString& slot) const;  // "A" or "B"
  void save_slot(const QString& slot, const RunOptions& s);
  // A slot's own weights (a checkpoint path or a built-in recipe); nullopt: the loaded model's.
  std::optional<WeightsSpec> load_slot_weights(const QString& slot) const;
  void save_slot_weights(const QString& slot, const std::optional<WeightsSpec>& weights);

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
  std::unique_ptr<QSettings> settings_;  // lives on writer_
  QVariantMap values_;                   // what value() reads
  QString presets_dir_;
  QThread writer_;
};

}  // namespace seedvae::ui
