#include "ui/loaders.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QPointer>

#include "core/media/video_io.h"
#include "core/vae/state_dict.h"
#include "ui/image_convert.h"

namespace seedvae::ui {

Result<VideoInfoData> probe_video(const QString& path, const CancelToken* cancel) {
  const std::filesystem::path p = path.toStdString();
  SEEDVAE_ASSIGN_OR_RETURN(media::VideoInfo info, media::probe(p, cancel));
  VideoInfoData d;
  d.path = path;
  d.width = info.width;
  d.height = info.height;
  d.fps = info.fps;
  d.frames = info.frame_count;
  d.kind = QString::fromStdString(info.source_kind);
  media::ReadOptions ro;
  ro.max_frames = 1;
  if (auto clip = media::read_clip(p, ro, cancel)) d.first_frame = frame_to_image(clip->video, 0);
  return d;
}

WeightsSpec default_weights_spec() {
  WeightsSpec spec;
  const std::filesystem::path dir =
      QCoreApplication::instance()
          ? std::filesystem::path(QCoreApplication::applicationDirPath().toStdString())
          : std::filesystem::path();
  if (const auto demo = find_demo_weights(dir); !demo.empty()) {
    spec.path = QString::fromStdString(demo.string());
    spec.builtin = QStringLiteral("demo");
  }
  return spec;
}

Result<WeightsInfo> load_weights_info(const WeightsSpec& spec) {
  WeightsInfo info;
  std::shared_ptr<VaeWeights> w;
  if (spec.is_builtin()) {
    auto made = synthetic_weights(spec.builtin.toStdString());
    if (!made) return made.take_status();
    w = std::make_shared<VaeWeights>(std::move(*made));
    info.synthetic = true;
    info.source = QStringLiteral(
                      "built-in: %1 synthetic %2 weights (%3; a trained demo model "
                      "replaces the SeedVR2 ones when installed)")
                      .arg(QString::fromUtf8(family_name(w->family).data(),
                                             static_cast<qsizetype>(family_name(w->family).size())),
                           spec.builtin, QString::fromStdString(w->source));
    info.sha256 = QString::fromStdString(fp16_digest(*w));
  } else {
    auto loaded = load_weights(spec.path.toStdString());
    if (!loaded) return loaded.take_status();
    w = std::make_shared<VaeWeights>(std::move(*loaded));
    info.source = spec.path;
    info.sha256 = QString::fromStdString(w->sha256);
  }
  info.family = QString::fromUtf8(family_name(w->family).data(),
                                  static_cast<qsizetype>(family_name(w->family).size()));
  info.config = QString::fromStdString(w->describe());
  info.dtype = QString::fromUtf8(dtype_name(w->dtype).data(),
                                 static_cast<qsizetype>(dtype_name(w->dtype).size()));
  info.parameters = w->parameter_count();
  info.weights = std::move(w);
  return info;
}

// ---- AsyncLoader ------------------------------------------------------------------------------

AsyncLoader::AsyncLoader(QObject* parent) : QObject(parent) {
  pool_.setMaxThreadCount(2);
}

AsyncLoader::~AsyncLoader() {
  if (probe_cancel_) probe_cancel_->request();
  pool_.waitForDone();
}

void AsyncLoader::begin() {
  if (pending_++ == 0) emit busyChanged(true);
}

void AsyncLoader::end() {
  if (--pending_ == 0) emit busyChanged(false);
}

void AsyncLoader::probeVideo(const QString& path) {
  if (probe_cancel_) probe_cancel_->request();
  probe_cancel_ = std::make_shared<CancelToken>();
  const quint64 gen = ++probe_generation_;
  auto cancel = probe_cancel_;
  begin();
  pool_.start([this, path, cancel, gen] {
    auto r = probe_video(path, cancel.get());
    QMetaObject::invokeMethod(
        this,
        [this, r = std::move(r), path, gen]() mutable {
          end();
          if (gen != probe_generation_) return;  // superseded
          if (r.is_ok()) {
            emit videoProbed(std::move(r).value());
          } else if (r.status().code() != StatusCode::kCancelled) {
            emit videoFailed(path, QString::fromStdString(r.status().to_string()));
          }
        },
        Qt::QueuedConnection);
  });
}

void AsyncLoader::loadWeights(const WeightsSpec& spec) {
  const quint64 gen = ++weights_generation_;
  begin();
  pool_.start([this, spec, gen] {
    auto r = load_weights_info(spec);
    QMetaObject::invokeMethod(
        this,
        [this, r = std::move(r), spec, gen]() mutable {
          end();
          if (gen != weights_generation_) return;
          if (r.is_ok()) {
            emit weightsLoaded(std::move(r).value());
          } else {
            emit weightsFailed(spec.path, QString::fromStdString(r.status().to_string()));
          }
        },
        Qt::QueuedConnection);
  });
}

}  // namespace seedvae::ui
