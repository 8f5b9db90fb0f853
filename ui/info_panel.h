// Input and weights: what is loaded (size, fps, frames, the 4n+1 and multiple-of-8 padding that
// will apply; configuration, dtype, parameter count, short SHA-256), and the frame range and
// downscale of the input.
#pragma once

#include <QWidget>

#include "ui/studio_types.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;

namespace seedvae::ui {

class InfoPanel : public QWidget {
  Q_OBJECT

 public:
  explicit InfoPanel(QWidget* parent = nullptr);

  void setVideo(const VideoInfoData& info);  // a probed file
  void setSample(int width, int height, int frames);
  void setWeights(const WeightsInfo& info);
  void setLoadingVideo(const QString& path);
  void setLoadingWeights(const QString& what);
  void setSpatialMultiple(int multiple);

  // The input the next run reads: the loaded source with the range and downscale applied.
  JobInput inputSpec() const;
  void setRange(qint64 first, qint64 count, int stride, int scale_percent);
  // Frames and size the run will see (after range and downscale), for the predictor.
  int effectiveWidth() const;
  int effectiveHeight() const;
  qint64 effectiveFrames() const;
  QString paddingText() const;
  bool hasVideo() const { return source_width_ > 0; }

 signals:
  void inputChanged();
  void openVideoRequested();
  void useSampleRequested();
  void openWeightsRequested();
  void useBuiltinWeightsRequested();

 private:
  void updateDerived();

  QLabel* source_;
  QLabel* video_info_;
  QLabel* padding_;
  QSpinBox* first_;
  QSpinBox* count_;
  QSpinBox* stride_;
  QComboBox* scale_;
  QLabel* weights_source_;
  QLabel* weights_info_;

  QString path_;  // empty: sample clip
  int source_width_ = 0, source_height_ = 0;
  qint64 source_frames_ = 0;
  double fps_ = 0;
  int multiple_ = 8;
};

}  // namespace seedvae::ui
