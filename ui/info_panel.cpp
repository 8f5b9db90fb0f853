#include "ui/info_panel.h"

#include <QComboBox>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "core/media/vae_padding.h"

namespace seedvae::ui {

namespace {
constexpr int kSampleSize = 256;
constexpr int kSampleFrames = 17;
}  // namespace

InfoPanel::InfoPanel(QWidget* parent) : QWidget(parent) {
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(4, 4, 4, 4);

  auto* input = new QGroupBox(tr("Input"), this);
  auto* il = new QFormLayout(input);
  il->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  source_ = new QLabel(input);
  source_->setObjectName(QStringLiteral("videoSource"));
  source_->setWordWrap(true);
  source_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  il->addRow(tr("Source"), source_);
  video_info_ = new QLabel(input);
  video_info_->setObjectName(QStringLiteral("videoInfo"));
  video_info_->setWordWrap(true);
  il->addRow(tr("Video"), video_info_);
  first_ = new QSpinBox(input);
  first_->setRange(0, 1 << 30);
  first_->setToolTip(tr("First frame to read (0-based)"));
  first_->setKeyboardTracking(false);
  count_ = new QSpinBox(input);
  count_->setRange(0, 1 << 30);
  count_->setSpecialValueText(tr("all"));
  count_->setToolTip(tr("Number of frames to read (all: to the end)"));
  count_->setKeyboardTracking(false);
  stride_ = new QSpinBox(input);
  stride_->setRange(1, 1000);
  stride_->setPrefix(tr("every "));
  stride_->setToolTip(tr("Read every n-th frame"));
  stride_->setKeyboardTracking(false);
  il->addRow(tr("First frame"), first_);
  il->addRow(tr("Frames"), count_);
  il->addRow(tr("Stride"), stride_);
  scale_ = new QComboBox(input);
  for (int p : {100, 75, 50, 33, 25}) scale_->addItem(QStringLiteral("%1%").arg(p), p);
  scale_->setToolTip(tr("Downscale every frame before encoding (area filter)"));
  il->addRow(tr("Scale"), scale_);
  padding_ = new QLabel(input);
  padding_->setObjectName(QStringLiteral("paddingInfo"));
  padding_->setWordWrap(true);
  padding_->setToolTip(
      tr("The causal VAE needs 4n+1 frames and sizes that are multiples of 8: "
         "the clip is padded (right/bottom, and at the end in time) and the "
         "padding is removed after decoding."));
  il->addRow(tr("Padding"), padding_);
  auto* ib = new QHBoxLayout();
  auto* open = new QPushButton(tr("Open video…"), input);
  open->setToolTip(tr("Open a video, an image, a folder of images or a pattern (Ctrl+O)"));
  auto* sample = new QPushButton(tr("Sample clip"), input);
  sample->setToolTip(tr("Use the built-in synthetic sample clip"));
  ib->addWidget(open);
  ib->addWidget(sample);
  il->addRow(ib);
  root->addWidget(input);

  auto* weights = new QGroupBox(tr("Weights"), this);
  auto* wl = new QFormLayout(weights);
  wl->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  weights_source_ = new QLabel(weights);
  weights_source_->setObjectName(QStringLiteral("weightsSource"));
  weights_source_->setWordWrap(true);
  weights_source_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  wl->addRow(tr("Source"), weights_source_);
  weights_info_ = new QLabel(weights);
  weights_info_->setObjectName(QStringLiteral("weightsInfo"));
  weights_info_->setWordWrap(true);
  weights_info_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  wl->addRow(tr("Model"), weights_info_);
  auto* wb = new QHBoxLayout();
  auto* openw = new QPushButton(tr("Open weights…"), weights);
  openw->setToolTip(tr("Open a SeedVR2 VAE checkpoint (.safetensors; Ctrl+Shift+O)"));
  auto* builtin = new QPushButton(tr("Built-in"), weights);
  builtin->setToolTip(tr("Use the built-in default model"));
  wb->addWidget(openw);
  wb->addWidget(builtin);
  wl->addRow(wb);
  root->addWidget(weights);
  root->addStretch(1);

  connect(open, &QPushButton::clicked, this, &InfoPanel::openVideoRequested);
  connect(sample, &QPushButton::clicked, this, &InfoPanel::useSampleRequested);
  connect(openw, &QPushButton::clicked, this, &InfoPanel::openWeightsRequested);
  connect(builtin, &QPushButton::clicked, this, &InfoPanel::useBuiltinWeightsRequested);
  for (QSpinBox* s : {first_, count_, stride_}) {
    connect(s, &QSpinBox::valueChanged, this, [this] {
      updateDerived();
      emit inputChanged();
    });
  }
  connect(scale_, &QComboBox::currentIndexChanged, this, [this] {
    updateDerived();
    emit inputChanged();
  });
  setSample(kSampleSize, kSampleSize, kSampleFrames);
  weights_source_->setText(tr("(loading…)"));
}

void InfoPanel::setVideo(const VideoInfoData& info) {
  const QSignalBlocker b1(first_), b2(count_), b3(stride_);
  path_ = info.path;
  source_width_ = info.width;
  source_height_ = info.height;
  source_frames_ = info.frames;
  fps_ = info.fps;
  source_->setText(QFileInfo(info.path).fileName());
  source_->setToolTip(info.path);
  video_info_->setText(tr("%1×%2, %3 fps, %4 frames (%5)")
                           .arg(info.width)
                           .arg(info.height)
                           .arg(info.fps > 0 ? QString::number(info.fps, 'g', 4) : tr("no timing"))
                           .arg(info.frames)
                           .arg(info.kind));
  first_->setEnabled(true);
  stride_->setEnabled(true);
  first_->setMaximum(static_cast<int>(std::max<qint64>(0, info.frames - 1)));
  first_->setValue(0);
  count_->setValue(0);
  stride_->setValue(1);
  updateDerived();
}

void InfoPanel::setSample(int width, int height, int frames) {
  const QSignalBlocker b1(first_), b2(count_), b3(stride_);
  path_.clear();
  source_width_ = width;
  source_height_ = height;
  source_frames_ = frames;
  fps_ = 24;
  source_->setText(tr("built-in sample clip"));
  source_->setToolTip(
      tr("A deterministic synthetic clip: gradients, texture, moving discs and a "
         "sweeping bar"));
  video_info_->setText(tr("%1×%2, 24 fps, frames as chosen (synthetic)").arg(width).arg(height));
  first_->setValue(0);
  first_->setEnabled(false);
  stride_->setValue(1);
  stride_->setEnabled(false);
  count_->setValue(frames);
  updateDerived();
}

void InfoPanel::setWeights(const WeightsInfo& info) {
  weights_source_->setText(info.synthetic ? info.source : QFileInfo(info.source).fileName());
  weights_source_->setToolTip(info.source);
  weights_info_->setText(
      tr("%1\n%2, %3 parameters, sha256 %4…")
          .arg(info.config, info.dtype, QLocale().toString(info.parameters), info.short_sha()));
  weights_info_->setToolTip(
      tr("%1 sha256: %2")
          .arg(info.synthetic ? tr("fp16 digest of the synthetic weights,") : tr("file"),
               info.sha256));
}

void InfoPanel::setLoadingVideo(const QString& path) {
  source_->setText(tr("%1 (opening…)").arg(QFileInfo(path).fileName()));
}

void InfoPanel::setLoadingWeights(const QString& what) {
  weights_source_->setText(tr("%1 (loading…)").arg(what));
}

void InfoPanel::setSpatialMultiple(int multiple) {
  multiple_ = multiple;
  updateDerived();
}

void InfoPanel::setRange(qint64 first, qint64 count, int stride, int scale_percent) {
  first_->setValue(static_cast<int>(first));
  count_->setValue(static_cast<int>(count));
  stride_->setValue(stride);
  const int i = scale_->findData(scale_percent);
  if (i >= 0) scale_->setCurrentIndex(i);
  updateDerived();
}

int InfoPanel::effectiveWidth() const {
  const int p = scale_->currentData().toInt();
  return std::max(1, static_cast<int>(std::lround(source_width_ * p / 100.0)));
}

int InfoPanel::effectiveHeight() const {
  const int p = scale_->currentData().toInt();
  return std::max(1, static_cast<int>(std::lround(source_height_ * p / 100.0)));
}

qint64 InfoPanel::effectiveFrames() const {
  if (path_.isEmpty()) return count_->value() > 0 ? count_->value() : kSampleFrames;
  const qint64 rest = std::max<qint64>(0, source_frames_ - first_->value());
  const qint64 n = (rest + stride_->value() - 1) / stride_->value();
  return count_->value() > 0 ? std::min<qint64>(n, count_->value()) : n;
}

JobInput InfoPanel::inputSpec() const {
  JobInput s;
  const bool scaled = scale_->currentData().toInt() != 100;
  if (path_.isEmpty()) {
    s.sample_width = effectiveWidth();
    s.sample_height = effectiveHeight();
    s.sample_frames = static_cast<int>(effectiveFrames());
    return s;
  }
  s.path = to_fs_path(path_);
  s.first_frame = first_->value();
  s.max_frames = count_->value() > 0 ? count_->value() : -1;
  s.stride = stride_->value();
  if (scaled) {
    s.resize_width = effectiveWidth();
    s.resize_height = effectiveHeight();
  }
  return s;
}

QString InfoPanel::paddingText() const {
  return padding_->text();
}

void InfoPanel::updateDerived() {
  const qint64 frames = effectiveFrames();
  const int w = effectiveWidth(), h = effectiveHeight();
  if (frames <= 0) {
    padding_->setText(tr("no frames in this range"));
    return;
  }
  const media::PadPlan p = media::plan_padding(frames, h, w, multiple_);
  QString text = tr("%1×%2 → %3×%4").arg(w).arg(h).arg(p.padded_width).arg(p.padded_height);
  if (p.padded_width == w && p.padded_height == h) text += tr(" (no spatial padding)");
  text += tr("; %1 → %2 frames").arg(frames).arg(p.padded_frames);
  text += p.padded_frames == frames ? tr(" (already 4n+1)")
                                    : tr(" (+%1 to reach 4n+1)").arg(p.padded_frames - frames);
  padding_->setText(text);
}

}  // namespace seedvae::ui
