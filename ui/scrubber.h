// Frame scrubber: a slider over the clip limited to the frames decoded so far, play/pause at the
// clip's frame rate (looping over what is decoded), single steps, and "follow live" which jumps
// to each newly decoded frame while a run streams in.
#pragma once

#include <QWidget>

class QCheckBox;
class QLabel;
class QSlider;
class QTimer;
class QToolButton;

namespace seedvae::ui {

class Scrubber : public QWidget {
  Q_OBJECT

 public:
  explicit Scrubber(QWidget* parent = nullptr);

  void reset(qint64 total, double fps);
  void setAvailable(qint64 available);  // decoded frames so far
  qint64 available() const { return available_; }
  qint64 total() const { return total_; }
  qint64 position() const { return position_; }
  bool follow() const;
  void setFollow(bool on);
  bool playing() const;

 public slots:
  void setPosition(qint64 frame);
  void togglePlay();
  void play();
  void pause();
  void stepForward();
  void stepBack();
  void first();
  void last();

 signals:
  void positionChanged(qint64 frame);

 private:
  void updateLabel();
  void tick();

  QToolButton* play_button_;
  QToolButton* back_button_;
  QToolButton* forward_button_;
  QSlider* slider_;
  QLabel* label_;
  QCheckBox* follow_;
  QTimer* timer_;
  qint64 total_ = 0, available_ = 0, position_ = 0;
  double fps_ = 24;
};

}  // namespace seedvae::ui
