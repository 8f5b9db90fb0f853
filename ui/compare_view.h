// The frame viewer: original, reconstruction, split with a draggable divider, side by side, and a
// difference heatmap with adjustable gain, plus the tile overlay (tile rectangles, per-tile offset
// labels, seam heatmap). Zoom and pan live in a ViewSync shared by every view, so all views show
// the same part of the frame; zoom is relative to "fit" so views of different sizes agree.
//
// Mouse: wheel zooms about the cursor, drag pans, drag the divider in split mode, double-click
// fits. Painting only scales the images already decoded; the heatmap is cached per frame pair
// and gain.
#pragma once

#include <QImage>
#include <QObject>
#include <QPointF>
#include <QVector>
#include <QWidget>

namespace seedvae::ui {

class ViewSync : public QObject {
  Q_OBJECT

 public:
  explicit ViewSync(QObject* parent = nullptr) : QObject(parent) {}
  double zoom() const { return zoom_; }       // 1 = fit the pane
  QPointF center() const { return center_; }  // image point at the pane centre, 0..1
  void set(double zoom, QPointF center);
  void fit() { set(1.0, {0.5, 0.5}); }
  static constexpr double kMinZoom = 0.1, kMaxZoom = 64.0;

 signals:
  void changed();

 private:
  double zoom_ = 1.0;
  QPointF center_{0.5, 0.5};
};

class CompareView : public QWidget {
  Q_OBJECT

 public:
  enum class Mode { kLeft, kRight, kSplit, kSideBySide, kDifference };
  Q_ENUM(Mode)

  explicit CompareView(ViewSync* sync, QWidget* parent = nullptr);

  void setImages(const QImage& left, const QImage& right);
  void setLabels(const QString& left, const QString& right);
  QImage leftImage() const { return left_; }
  QImage rightImage() const { return right_; }

  void setMode(Mode mode);
  Mode mode() const { return mode_; }
  void setGain(double gain);
  double gain() const { return gain_; }
  void setDivider(double fraction);  // 0..1 of the pane width
  double divider() const { return divider_; }

  void setTiles(const QVector<QRect>& tiles, const QVector<double>& offsets = {});
  void setShowTiles(bool on);
  bool showTiles() const { return show_tiles_; }
  void setSeamHeatmap(const QImage& heatmap, const QString& caption = {});
  void setShowSeams(bool on);
  bool showSeams() const { return show_seams_; }
  void setPlaceholder(const QString& text);

  ViewSync* sync() const { return sync_; }
  // Zoom by `factor` about the widget point `at` (the pane centre when null).
  void zoomBy(double factor, QPointF at = {});
  // Actual pixels: one image pixel per device pixel.
  void zoomActual();
  // Image coordinates -> widget coordinates in pane `pane` (0, or 1 for the right pane).
  QPointF imageToWidget(QPointF p, int pane = 0) const;
  QRectF paneRect(int pane) const;
  QImage differenceImage() const;  // the current heatmap (computed if needed)

  QSize sizeHint() const override { return {640, 400}; }
  QSize minimumSizeHint() const override { return {240, 160}; }

 signals:
  void dividerMoved(double fraction);
  void modeChanged(seedvae::ui::CompareView::Mode mode);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;

 private:
  QSize imageSize() const;
  double scaleFor(const QRectF& pane) const;
  QRectF imageRect(const QRectF& pane) const;  // where the whole image lands
  int paneAt(QPointF p) const;
  bool nearDivider(QPointF p) const;
  void drawImage(QPainter& p, const QRectF& pane, const QImage& img, const QRectF& clip);
  void drawOverlay(QPainter& p, const QRectF& pane);
  void drawLabel(QPainter& p, const QRectF& pane, const QString& text, Qt::Alignment where,
                 bool whole_width = false);

  ViewSync* sync_;
  QImage left_, right_;
  QString left_label_ = QStringLiteral("Original"), right_label_ = QStringLiteral("Reconstruction");
  Mode mode_ = Mode::kSplit;
  double gain_ = 4.0;
  double divider_ = 0.5;
  QVector<QRect> tiles_;
  QVector<double> tile_offsets_;
  bool show_tiles_ = false;
  QImage seam_heatmap_;
  QString seam_caption_;
  bool show_seams_ = false;
  QString placeholder_;
  // drag state
  enum class Drag { kNone, kPan, kDivider } drag_ = Drag::kNone;
  QPointF drag_start_;
  QPointF drag_center_;
  // heatmap cache
  mutable QImage diff_cache_;
  mutable qint64 diff_key_left_ = 0, diff_key_right_ = 0;
  mutable double diff_gain_ = -1;
};

}  // namespace seedvae::ui
