#include "ui/scrubber.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QStyle>
#include <QTimer>
#include <QToolButton>
#include <algorithm>

namespace seedvae::ui {

Scrubber::Scrubber(QWidget* parent) : QWidget(parent) {
  auto* lay = new QHBoxLayout(this);
  lay->setContentsMargins(4, 2, 4, 2);
  back_button_ = new QToolButton(this);
  back_button_->setIcon(style()->standardIcon(QStyle::SP_MediaSeekBackward));
  back_button_->setToolTip(tr("Previous frame (,)"));
  play_button_ = new QToolButton(this);
  play_button_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
  play_button_->setToolTip(tr("Play / pause the decoded frames (Space)"));
  forward_button_ = new QToolButton(this);
  forward_button_->setIcon(style()->standardIcon(QStyle::SP_MediaSeekForward));
  forward_button_->setToolTip(tr("Next frame (.)"));
  slider_ = new QSlider(Qt::Horizontal, this);
  slider_->setObjectName(QStringLiteral("scrubSlider"));
  slider_->setRange(0, 0);
  slider_->setToolTip(tr("Frame; only decoded frames can be reached"));
  label_ = new QLabel(this);
  label_->setMinimumWidth(
      label_->fontMetrics().horizontalAdvance(QStringLiteral("frame 0000 / 0000 · decoded 0000")));
  follow_ = new QCheckBox(tr("Follow live"), this);
  follow_->setChecked(true);
  follow_->setToolTip(tr("Show each frame as soon as it is decoded"));
  lay->addWidget(back_button_);
  lay->addWidget(play_button_);
  lay->addWidget(forward_button_);
  lay->addWidget(slider_, 1);
  lay->addWidget(label_);
  lay->addWidget(follow_);
  timer_ = new QTimer(this);
  timer_->setTimerType(Qt::PreciseTimer);
  connect(timer_, &QTimer::timeout, this, &Scrubber::tick);
  connect(play_button_, &QToolButton::clicked, this, &Scrubber::togglePlay);
  connect(back_button_, &QToolButton::clicked, this, &Scrubber::stepBack);
  connect(forward_button_, &QToolButton::clicked, this, &Scrubber::stepForward);
  connect(slider_, &QSlider::valueChanged, this, [this](int v) {
    // The slider spans the whole clip; frames not decoded yet are out of reach.
    const qint64 limit = std::max<qint64>(0, available_ - 1);
    if (v > limit) {
      slider_->setValue(static_cast<int>(limit));
      return;
    }
    if (v != position_) {
      position_ = v;
      if (slider_->isSliderDown()) follow_->setChecked(false);
      updateLabel();
      emit positionChanged(position_);
    }
  });
  updateLabel();
}

void Scrubber::reset(qint64 total, double fps) {
  pause();
  total_ = std::max<qint64>(0, total);
  available_ = 0;
  position_ = 0;
  fps_ = fps > 0 ? fps : 24;
  const QSignalBlocker block(slider_);
  slider_->setRange(0, static_cast<int>(std::max<qint64>(0, total_ - 1)));
  slider_->setValue(0);
  updateLabel();
}

void Scrubber::setAvailable(qint64 available) {
  available_ = std::clamp<qint64>(available, 0, std::max(total_, available));
  if (available_ > total_) {
    total_ = available_;
    const QSignalBlocker block(slider_);
    slider_->setMaximum(static_cast<int>(total_ - 1));
  }
  if (follow() && !playing() && available_ > 0) {
    setPosition(available_ - 1);
  }
  updateLabel();
}

bool Scrubber::follow() const {
  return follow_->isChecked();
}
void Scrubber::setFollow(bool on) {
  follow_->setChecked(on);
}
bool Scrubber::playing() const {
  return timer_->isActive();
}

void Scrubber::setPosition(qint64 frame) {
  frame = std::clamp<qint64>(frame, 0, std::max<qint64>(0, available_ - 1));
  if (frame == position_ && slider_->value() == frame) return;
  position_ = frame;
  {
    const QSignalBlocker block(slider_);
    slider_->setValue(static_cast<int>(frame));
  }
  updateLabel();
  emit positionChanged(position_);
}

void Scrubber::togglePlay() {
  playing() ? pause() : play();
}

void Scrubber::play() {
  if (available_ < 2) return;
  timer_->start(static_cast<int>(1000.0 / fps_));
  play_button_->setIcon(style()->standardIcon(QStyle::SP_MediaPause));
}

void Scrubber::pause() {
  timer_->stop();
  play_button_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
}

void Scrubber::tick() {
  if (available_ < 1) return;
  setPosition((position_ + 1) % available_);
}

void Scrubber::stepForward() {
  pause();
  follow_->setChecked(false);
  setPosition(position_ + 1);
}

void Scrubber::stepBack() {
  pause();
  follow_->setChecked(false);
  setPosition(position_ - 1);
}

void Scrubber::first() {
  follow_->setChecked(false);
  setPosition(0);
}

void Scrubber::last() {
  setPosition(available_ - 1);
}

void Scrubber::updateLabel() {
  if (total_ == 0) {
    label_->setText(tr("no frames"));
    return;
  }
  label_->setText(tr("frame %1 / %2 · decoded %3").arg(position_ + 1).arg(total_).arg(available_));
}

}  // namespace seedvae::ui
