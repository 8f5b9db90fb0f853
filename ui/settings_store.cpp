#include "ui/settings_store.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSaveFile>
#include <QStandardPaths>

namespace seedvae::ui {

namespace {

constexpr const char* kFormat = "seedvae-studio-preset";
constexpr int kVersion = 1;

std::optional<RunOptions> settings_from_string(const QString& text) {
  if (text.isEmpty()) return std::nullopt;
  QJsonParseError err{};
  const QJsonDocument doc = QJsonDocument::fromJson(text.toUtf8(), &err);
  if (err.error != QJsonParseError::NoError || !doc.isObject()) return std::nullopt;
  return settings_from_json(doc.object());
}

QString settings_to_string(const RunOptions& s) {
  return QString::fromUtf8(QJsonDocument(settings_to_json(s)).toJson(QJsonDocument::Compact));
}

}  // namespace

SettingsStore::SettingsStore(std::unique_ptr<QSettings> settings, QString presets_dir)
    : settings_(settings ? std::move(settings) : std::make_unique<QSettings>()),
      presets_dir_(std::move(presets_dir)) {
  if (presets_dir_.isEmpty()) {
    presets_dir_ = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) +
                   QStringLiteral("/presets");
  }
  for (const QString& key : settings_->allKeys()) values_.insert(key, settings_->value(key));
  writer_.setObjectName(QStringLiteral("seedvae-settings"));
  writer_.start(QThread::LowPriority);
  settings_->moveToThread(&writer_);
}

SettingsStore::~SettingsStore() {
  QThread* here = QThread::currentThread();
  QMetaObject::invokeMethod(
      settings_.get(),
      [s = settings_.get(), here] {
        s->sync();
        s->moveToThread(here);  // destroyed here, after its thread has ended
      },
      Qt::BlockingQueuedConnection);
  writer_.quit();
  writer_.wait();
}

QVariant SettingsStore::value(const QString& key, const QVariant& fallback) const {
  return values_.value(key, fallback);
}

void SettingsStore::set_value(const QString& key, const QVariant& value) {
  values_.insert(key, value);
  QMetaObject::invokeMethod(
      settings_.get(), [s = settings_.get(), key, value] { s->setValue(key, value); },
      Qt::QueuedConnection);
}

void SettingsStore::flush() {
  QMetaObject::invokeMethod(
      settings_.get(), [s = settings_.get()] { s->sync(); }, Qt::BlockingQueuedConnection);
}

std::optional<RunOptions> SettingsStore::load_current() const {
  return settings_from_string(value(QStringLiteral("engine/current")).toString());
}

void SettingsStore::save_current(const RunOptions& s) {
  set_value(QStringLiteral("engine/current"), settings_to_string(s));
}

std::optional<RunOptions> SettingsStore::load_slot(const QString& slot) const {
  return settings_from_string(value(QStringLiteral("engine/slot_") + slot).toString());
}

void SettingsStore::save_slot(const QString& slot, const RunOptions& s) {
  set_value(QStringLiteral("engine/slot_") + slot, settings_to_string(s));
}

std::optional<WeightsSpec> SettingsStore::load_slot_weights(const QString& slot) const {
  const QString w = value(QStringLiteral("engine/slot_weights_") + slot).toString();
  if (w.isEmpty()) return std::nullopt;
  return weights_spec_from_queue(w.toStdString());
}

void SettingsStore::save_slot_weights(const QString& slot,
                                      const std::optional<WeightsSpec>& weights) {
  set_value(QStringLiteral("engine/slot_weights_") + slot,
            weights ? QString::fromStdString(queue_weights(*weights)) : QString());
}

QStringList SettingsStore::recent(const QString& kind) const {
  return value(QStringLiteral("recent/") + kind).toStringList();
}

void SettingsStore::add_recent(const QString& kind, const QString& path) {
  QStringList list = recent(kind);
  const QString abs = QFileInfo(path).absoluteFilePath();
  list.removeAll(abs);
  list.prepend(abs);
  while (list.size() > kMaxRecent) list.removeLast();
  set_value(QStringLiteral("recent/") + kind, list);
}

void SettingsStore::remove_recent(const QString& kind, const QString& path) {
  QStringList list = recent(kind);
  list.removeAll(path);
  set_value(QStringLiteral("recent/") + kind, list);
}

// ---- presets ----------------------------------------------------------------------------------

QString SettingsStore::sanitize_name(const QString& name) {
  QString n = name.trimmed();
  static const QRegularExpression bad(QStringLiteral("[^A-Za-z0-9 ._+-]"));
  n.replace(bad, QStringLiteral("_"));
  while (n.startsWith(QLatin1Char('.'))) n.remove(0, 1);
  return n.left(80);
}

QString SettingsStore::preset_path(const QString& name) const {
  return presets_dir_ + QLatin1Char('/') + sanitize_name(name) + QStringLiteral(".json");
}

QStringList SettingsStore::preset_names() const {
  QDir dir(presets_dir_);
  QStringList names;
  for (const QFileInfo& fi :
       dir.entryInfoList({QStringLiteral("*.json")}, QDir::Files, QDir::Name)) {
    names << fi.completeBaseName();
  }
  names.sort(Qt::CaseInsensitive);
  return names;
}

bool SettingsStore::save_preset(const QString& name, const RunOptions& s, QString* error) {
  if (sanitize_name(name).isEmpty()) {
    if (error) *error = QStringLiteral("a preset needs a name");
    return false;
  }
  if (!QDir().mkpath(presets_dir_)) {
    if (error) *error = QStringLiteral("cannot create the preset folder %1").arg(presets_dir_);
    return false;
  }
  return write_preset_file(preset_path(name), name.trimmed(), s, error);
}

std::optional<RunOptions> SettingsStore::load_preset(const QString& name, QString* error,
                                                     QStringList* warnings) const {
  return read_preset_file(preset_path(name), error, warnings);
}

bool SettingsStore::remove_preset(const QString& name) {
  return QFile::remove(preset_path(name));
}

bool SettingsStore::write_preset_file(const QString& path, const QString& name, const RunOptions& s,
                                      QString* error) {
  const QJsonObject root{{"format", kFormat},
                         {"version", kVersion},
                         {"name", name},
                         {"settings", settings_to_json(s)}};
  QSaveFile f(path);  // atomic: temporary file, renamed on commit
  if (!f.open(QIODevice::WriteOnly)) {
    if (error) *error = QStringLiteral("cannot write %1: %2").arg(path, f.errorString());
    return false;
  }
  f.write(QJsonDocument(root).toJson(QJsonDocument::Indented));
  if (!f.commit()) {
    if (error) *error = QStringLiteral("cannot write %1: %2").arg(path, f.errorString());
    return false;
  }
  return true;
}

std::optional<RunOptions> SettingsStore::read_preset_file(const QString& path, QString* error,
                                                          QStringList* warnings, QString* name) {
  QFile f(path);
  if (!f.exists()) {
    if (error) *error = QStringLiteral("%1 does not exist").arg(path);
    return std::nullopt;
  }
  if (f.size() > (1 << 20)) {
    if (error)
      *error = QStringLiteral("%1 is too large for a preset (%2 bytes)").arg(path).arg(f.size());
    return std::nullopt;
  }
  if (!f.open(QIODevice::ReadOnly)) {
    if (error) *error = QStringLiteral("cannot read %1: %2").arg(path, f.errorString());
    return std::nullopt;
  }
  QJsonParseError perr{};
  const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &perr);
  if (perr.error != QJsonParseError::NoError) {
    if (error) {
      *error = QStringLiteral("%1 is not valid JSON: %2 at offset %3")
                   .arg(path, perr.errorString())
                   .arg(perr.offset);
    }
    return std::nullopt;
  }
  const QJsonObject root = doc.object();
  if (root.value("format").toString() != QLatin1String(kFormat) ||
      !root.value("settings").isObject()) {
    if (error) {
      *error = QStringLiteral(
                   "%1 is not a SeedVAE Studio preset (expected \"format\": \"%2\" and a "
                   "\"settings\" object)")
                   .arg(path, kFormat);
    }
    return std::nullopt;
  }
  if (root.value("version").toInt() > kVersion && warnings) {
    *warnings << QStringLiteral(
                     "preset version %1 is newer than this studio (%2); unknown keys are ignored")
                     .arg(root.value("version").toInt())
                     .arg(kVersion);
  }
  if (name) *name = root.value("name").toString(QFileInfo(path).completeBaseName());
  return settings_from_json(root.value("settings").toObject(), warnings);
}

}  // namespace seedvae::ui
