// Shared fixtures of the studio tests: small videos and checkpoints written to a temporary folder,
// a throw-away settings store, and a main window that never asks questions.
#pragma once

#include <QDir>
#include <QFile>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>
#include <memory>

#include "core/media/sample_clip.h"
#include "core/media/video_io.h"
#include "core/vae/state_dict.h"
#include "ui/backend_catalog.h"
#include "ui/main_window.h"
#include "ui/settings_store.h"

namespace seedvae::ui::test {

// A lossless PNG-sequence "video" of the sample clip (OpenCV reads the folder back exactly).
inline QString write_sample_video(const QTemporaryDir& dir, const QString& name, int w, int h,
                                  int frames) {
  const QString path = dir.filePath(name);
  QDir().mkpath(path);
  const HostTensor clip = media::make_sample_clip(w, h, frames, 7);
  const Status st = media::write_clip((path + "/").toStdString(), clip, {24});
  if (!st.is_ok()) qWarning("write_clip: %s", st.to_string().c_str());
  return path;
}

inline QString write_tiny_weights(const QTemporaryDir& dir, const QString& name) {
  const QString path = dir.filePath(name);
  const Status st = save_weights(path.toStdString(),
                                 synthesize_weights(VaeConfig::tiny(), kTinySeed), DType::kF16);
  if (!st.is_ok()) qWarning("save_weights: %s", st.to_string().c_str());
  return path;
}

inline QString write_bytes(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
  const QString path = dir.filePath(name);
  QFile f(path);
  if (f.open(QIODevice::WriteOnly)) f.write(bytes);
  return path;
}

inline std::unique_ptr<SettingsStore> temp_store(const QTemporaryDir& dir,
                                                 const QString& tag = "studio") {
  return std::make_unique<SettingsStore>(
      std::make_unique<QSettings>(dir.filePath(tag + ".ini"), QSettings::IniFormat),
      dir.filePath("presets"));
}

inline std::unique_ptr<MainWindow> make_window(const QTemporaryDir& dir,
                                               const QString& tag = "studio") {
  auto w = std::make_unique<MainWindow>(std::make_shared<CpuCatalog>(), temp_store(dir, tag));
  w->setConfirmations(false);
  return w;
}

// Input spec of a small sample clip.
inline JobInput sample_input(int w, int h, int frames) {
  JobInput in;
  in.sample_width = w;
  in.sample_height = h;
  in.sample_frames = frames;
  return in;
}

}  // namespace seedvae::ui::test
