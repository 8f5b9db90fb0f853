// Opening videos and checkpoints without blocking the GUI: probing a video (OpenCV decodes every
// frame to count them) and reading a checkpoint (hundreds of MB, SHA-256) run on a small private
// thread pool; results come back to the GUI thread as value types through queued calls. These
// touch no backend and no GPU, so they need not run on the engine thread.
#pragma once

#include <QObject>
#include <QThreadPool>
#include <memory>

#include "core/base/cancel.h"
#include "core/base/status.h"
#include "ui/studio_types.h"

namespace seedvae::ui {

// Synchronous forms (any thread except the GUI thread for large inputs).
Result<VideoInfoData> probe_video(const QString& path, const CancelToken* cancel = nullptr);
Result<WeightsInfo> load_weights_info(const WeightsSpec& spec);
// The built-in default weights: a trained demo model when one is installed (SEEDVAE_DEMO_WEIGHTS
// or <exe>/../share/seedvae/demo_vae.safetensors), else the synthetic tiny configuration.
WeightsSpec default_weights_spec();

class AsyncLoader : public QObject {
  Q_OBJECT

 public:
  explicit AsyncLoader(QObject* parent = nullptr);
  ~AsyncLoader() override;  // cancels a running probe and waits for the pool

  // A newer probe cancels an older one (only the latest result is delivered).
  void probeVideo(const QString& path);
  void loadWeights(const WeightsSpec& spec);
  bool busy() const { return pending_ > 0; }

 signals:
  void videoProbed(seedvae::ui::VideoInfoData info);
  void videoFailed(QString path, QString message);
  void weightsLoaded(seedvae::ui::WeightsInfo info);
  void weightsFailed(QString path, QString message);
  void busyChanged(bool busy);

 private:
  void begin();
  void end();

  QThreadPool pool_;
  std::shared_ptr<CancelToken> probe_cancel_;
  quint64 probe_generation_ = 0;
  quint64 weights_generation_ = 0;
  int pending_ = 0;
};

}  // namespace seedvae::ui
