#include "ui/compare_view.h"

#include <QElapsedTimer>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "ui/image_convert.h"

namespace seedvae::ui {

void ViewSync::set(double zoom, QPointF center) {
  zoom = std::clamp(zoom, kMinZoom, kMaxZoom);
  center.setX(std::clamp(center.x(), -0.5, 1.5));
  center.setY(std::clamp(center.y(), -0.5, 1.5));
  if (qFuzzyCompare(zoom, zoom_) && qFuzzyCompare(center.x() + 2, center_.x() + 2) &&
      qFuzzyCompare(center.y() + 2, center_.y() + 2)) {
    return;
  }
  zoom_ = zoom;
  center_ = center;
  emit changed();
}

CompareView::CompareView(ViewSync* sync, QWidget* parent) : QWidget(parent), sync_(sync) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumSize(minimumSizeHint());
  connect(sync_, &ViewSync::changed, this, qOverload<>(&QWidget::update));
}

void CompareView::setImages(const QImage& left, const QImage& right) {
  left_ = left;
  right_ = right;
  update();
}

void CompareView::setLabels(const QString& left, const QString& right) {
  left_label_ = left;
  right_label_ = right;
  update();
}

void CompareView::setMode(Mode mode) {
  if (mode_ == mode) return;
  mode_ = mode;
  update();
  emit modeChanged(mode);
}

void CompareView::setGain(double gain) {
  gain_ = std::clamp(gain, 0.1, 1000.0);
  update();
}

void CompareView::setDivider(double f) {
  f = std::clamp(f, 0.0, 1.0);
  if (qFuzzyCompare(f + 1, divider_ + 1)) return;
  divider_ = f;
  update();
  emit dividerMoved(f);
}

void CompareView::setTiles(const QVector<QRect>& tiles, const QVector<double>& offsets) {
  tiles_ = tiles;
  tile_offsets_ = offsets;
  update();
}

void CompareView::setShowTiles(bool on) {
  show_tiles_ = on;
  update();
}

void CompareView::setSeamHeatmap(const QImage& heatmap, const QString& caption) {
  seam_heatmap_ = heatmap;
  seam_caption_ = caption;
  update();
}

void CompareView::setShowSeams(bool on) {
  show_seams_ = on;
  update();
}

void CompareView::setPlaceholder(const QString& text) {
  placeholder_ = text;
  update();
}

// ---- geometry ---------------------------------------------------------------------------------

QSize CompareView::imageSize() const {
  if (!left_.isNull()) return left_.size();
  if (!right_.isNull()) return right_.size();
  return {};
}

QRectF CompareView::paneRect(int pane) const {
  const QRectF r = rect();
  if (mode_ != Mode::kSideBySide) return r;
  const double gap = 4;
  const double w = (r.width() - gap) / 2;
  return pane == 0 ? QRectF(r.left(), r.top(), w, r.height())
                   : QRectF(r.left() + w + gap, r.top(), w, r.height());
}

double CompareView::scaleFor(const QRectF& pane) const {
  const QSize s = imageSize();
  if (s.isEmpty()) return 1.0;
  const double fit = std::min(pane.width() / s.width(), pane.height() / s.height());
  return fit * sync_->zoom();
}

QRectF CompareView::imageRect(const QRectF& pane) const {
  const QSize s = imageSize();
  const double k = scaleFor(pane);
  const double w = s.width() * k, h = s.height() * k;
  const QPointF c = sync_->center();
  return {pane.center().x() - c.x() * w, pane.center().y() - c.y() * h, w, h};
}

QPointF CompareView::imageToWidget(QPointF p, int pane) const {
  const QRectF ir = imageRect(paneRect(pane));
  const QSize s = imageSize();
  if (s.isEmpty()) return {};
  return {ir.left() + p.x() * ir.width() / s.width(), ir.top() + p.y() * ir.height() / s.height()};
}

int CompareView::paneAt(QPointF p) const {
  return mode_ == Mode::kSideBySide && p.x() > paneRect(1).left() ? 1 : 0;
}

bool CompareView::nearDivider(QPointF p) const {
  if (mode_ != Mode::kSplit) return false;
  const QRectF pane = paneRect(0);
  const double x = pane.left() + divider_ * pane.width();
  return std::abs(p.x() - x) <= 6;
}

void CompareView::zoomBy(double factor, QPointF at) {
  const int pane_index = at.isNull() ? 0 : paneAt(at);
  const QRectF pane = paneRect(pane_index);
  if (at.isNull()) at = pane.center();
  const QSize s = imageSize();
  if (s.isEmpty()) return;
  const QRectF ir = imageRect(pane);
  // The image point under `at` stays under `at`.
  const QPointF rel((at.x() - ir.left()) / ir.width(), (at.y() - ir.top()) / ir.height());
  const double z = std::clamp(sync_->zoom() * factor, ViewSync::kMinZoom, ViewSync::kMaxZoom);
  const double fit = std::min(pane.width() / s.width(), pane.height() / s.height());
  const double w = s.width() * fit * z, h = s.height() * fit * z;
  const double left = at.x() - rel.x() * w, top = at.y() - rel.y() * h;
  sync_->set(z, {(pane.center().x() - left) / w, (pane.center().y() - top) / h});
}

void CompareView::zoomActual() {
  const QSize s = imageSize();
  if (s.isEmpty()) return;
  const QRectF pane = paneRect(0);
  const double fit = std::min(pane.width() / s.width(), pane.height() / s.height());
  // One image pixel per device pixel: a logical scale of 1 / devicePixelRatio.
  sync_->set(1.0 / (devicePixelRatioF() * fit), sync_->center());
}

// ---- painting ---------------------------------------------------------------------------------

QImage CompareView::differenceImage() const {
  if (left_.isNull() || right_.isNull()) return {};
  if (diff_cache_.isNull() || diff_key_left_ != left_.cacheKey() ||
      diff_key_right_ != right_.cacheKey() || diff_gain_ != gain_) {
    diff_cache_ = difference_heatmap(left_, right_, gain_);
    diff_key_left_ = left_.cacheKey();
    diff_key_right_ = right_.cacheKey();
    diff_gain_ = gain_;
  }
  return diff_cache_;
}

void CompareView::drawImage(QPainter& p, const QRectF& pane, const QImage& img,
                            const QRectF& clip) {
  if (img.isNull()) return;
  p.save();
  p.setClipRect(clip.intersected(pane));
  const QRectF ir = imageRect(pane);
  // Smooth when shrinking, nearest when magnifying (so pixels can be inspected).
  p.setRenderHint(QPainter::SmoothPixmapTransform, ir.width() < img.width() * 2.0);
  p.drawImage(ir, img);
  p.restore();
}

void CompareView::drawLabel(QPainter& p, const QRectF& pane, const QString& text,
                            Qt::Alignment where, bool whole_width) {
  if (text.isEmpty()) return;
  const QFontMetrics fm(font());
  // Labels of the two sides share the top edge: each gets at most half the pane.
  const int max_w =
      std::max(40, static_cast<int>(whole_width ? pane.width() : pane.width() / 2) - 28);
  const QString shown = fm.elidedText(text, Qt::ElideRight, max_w);
  const QRectF box(0, 0, fm.horizontalAdvance(shown) + 12, fm.height() + 6);
  QRectF r = box;
  const double m = 8;
  r.moveTop(where & Qt::AlignBottom ? pane.bottom() - box.height() - m : pane.top() + m);
  r.moveLeft(where & Qt::AlignRight ? pane.right() - box.width() - m : pane.left() + m);
  p.save();
  p.setPen(Qt::NoPen);
  p.setBrush(QColor(0, 0, 0, 160));
  p.drawRoundedRect(r, 4, 4);
  p.setPen(Qt::white);
  p.drawText(r, Qt::AlignCenter, shown);
  p.restore();
}

void CompareView::drawOverlay(QPainter& p, const QRectF& pane) {
  const QSize s = imageSize();
  if (s.isEmpty()) return;
  const QRectF ir = imageRect(pane);
  const double k = ir.width() / s.width();
  p.save();
  p.setClipRect(pane);
  if (show_seams_ && !seam_heatmap_.isNull()) {
    p.setOpacity(0.65);
    p.drawImage(ir, seam_heatmap_);
    p.setOpacity(1.0);
  }
  if (show_tiles_) {
    static const QColor colors[] = {QColor(0, 220, 255), QColor(255, 200, 0), QColor(120, 255, 120),
                                    QColor(255, 110, 200)};
    const QFontMetrics fm(font());
    for (int i = 0; i < tiles_.size(); ++i) {
      const QRect& t = tiles_[i];
      const QRectF r(ir.left() + t.x() * k, ir.top() + t.y() * k, t.width() * k, t.height() * k);
      QPen pen(colors[i % 4], 1.5, i % 2 ? Qt::DashLine : Qt::SolidLine);
      pen.setCosmetic(true);
      p.setPen(pen);
      p.setBrush(Qt::NoBrush);
      p.drawRect(r.adjusted(1, 1, -1, -1));
      QString text = QString::number(i);
      if (i < tile_offsets_.size() && tile_offsets_[i] == tile_offsets_[i]) {
        text += QStringLiteral("  %1%2")
                    .arg(tile_offsets_[i] >= 0 ? "+" : "")
                    .arg(tile_offsets_[i], 0, 'f', 2);
      }
      const QRectF label(r.left() + 4, r.top() + 4, fm.horizontalAdvance(text) + 8,
                         fm.height() + 2);
      if (label.width() < r.width() && label.height() < r.height()) {
        p.fillRect(label, QColor(0, 0, 0, 150));
        p.setPen(colors[i % 4]);
        p.drawText(label, Qt::AlignCenter, text);
      }
    }
  }
  p.restore();
}

void CompareView::paintEvent(QPaintEvent*) {
  static const bool trace = qEnvironmentVariableIntValue("SEEDVAE_STUDIO_TRACE") != 0;
  QElapsedTimer timer;
  if (trace) timer.start();
  struct Report {
    const QElapsedTimer& t;
    ~Report() {
      if (t.isValid() && t.nsecsElapsed() > 15'000'000)
        qWarning("seedvae-studio: view paint took %.1f ms", t.nsecsElapsed() / 1e6);
    }
  } report{timer};
  QPainter p(this);
  p.fillRect(rect(), QColor(32, 33, 36));
  const QSize s = imageSize();
  if (s.isEmpty()) {
    p.setPen(QColor(200, 200, 200));
    p.drawText(rect().adjusted(20, 20, -20, -20), Qt::AlignCenter | Qt::TextWordWrap,
               placeholder_.isEmpty() ? tr("No frame yet") : placeholder_);
    return;
  }
  switch (mode_) {
    case Mode::kLeft: {
      const QRectF pane = paneRect(0);
      drawImage(p, pane, left_, pane);
      drawOverlay(p, pane);
      drawLabel(p, pane, left_label_, Qt::AlignTop | Qt::AlignLeft, true);
      break;
    }
    case Mode::kRight: {
      const QRectF pane = paneRect(0);
      drawImage(p, pane, right_.isNull() ? left_ : right_, pane);
      drawOverlay(p, pane);
      drawLabel(p, pane,
                right_.isNull()
                    ? tr("%1 (not decoded yet: showing %2)").arg(right_label_, left_label_)
                    : right_label_,
                Qt::AlignTop | Qt::AlignLeft, true);
      break;
    }
    case Mode::kSplit: {
      const QRectF pane = paneRect(0);
      const double x = pane.left() + divider_ * pane.width();
      drawImage(p, pane, left_, QRectF(pane.left(), pane.top(), x - pane.left(), pane.height()));
      const QImage& r = right_.isNull() ? left_ : right_;
      drawImage(p, pane, r, QRectF(x, pane.top(), pane.right() - x, pane.height()));
      drawOverlay(p, pane);
      // The divider and its handle.
      p.setPen(QPen(QColor(255, 255, 255, 220), 2));
      p.drawLine(QPointF(x, pane.top()), QPointF(x, pane.bottom()));
      p.setBrush(QColor(255, 255, 255, 230));
      p.setPen(Qt::NoPen);
      p.drawEllipse(QPointF(x, pane.center().y()), 7, 7);
      drawLabel(p, pane, left_label_, Qt::AlignTop | Qt::AlignLeft);
      drawLabel(p, pane, right_.isNull() ? tr("%1 (pending)").arg(right_label_) : right_label_,
                Qt::AlignTop | Qt::AlignRight);
      break;
    }
    case Mode::kSideBySide: {
      const QRectF a = paneRect(0), b = paneRect(1);
      drawImage(p, a, left_, a);
      drawImage(p, b, right_, b);
      drawOverlay(p, a);
      drawOverlay(p, b);
      drawLabel(p, a, left_label_, Qt::AlignTop | Qt::AlignLeft, true);
      drawLabel(p, b, right_.isNull() ? tr("%1 (pending)").arg(right_label_) : right_label_,
                Qt::AlignTop | Qt::AlignLeft, true);
      break;
    }
    case Mode::kDifference: {
      const QRectF pane = paneRect(0);
      const QImage diff = differenceImage();
      if (diff.isNull()) {
        drawImage(p, pane, left_, pane);
        drawLabel(p, pane, tr("Difference: %1 not decoded yet").arg(right_label_),
                  Qt::AlignTop | Qt::AlignLeft, true);
        break;
      }
      drawImage(p, pane, diff, pane);
      drawOverlay(p, pane);
      drawLabel(p, pane, tr("|%1 − %2| × %3").arg(left_label_, right_label_).arg(gain_, 0, 'g', 3),
                Qt::AlignTop | Qt::AlignLeft, true);
      // Colour legend: 0 .. 255 / gain levels of mean absolute RGB difference.
      const QFontMetrics fm(font());
      const QRectF box(pane.right() - 196, pane.bottom() - 22 - fm.height() - 14, 188,
                       fm.height() + 28);
      p.setPen(Qt::NoPen);
      p.setBrush(QColor(0, 0, 0, 170));
      p.drawRoundedRect(box, 4, 4);
      const QRectF bar(box.left() + 8, box.top() + 8, box.width() - 16, 10);
      p.drawImage(bar, heat_legend(static_cast<int>(bar.width()), 1));
      p.setPen(Qt::white);
      const QRectF text(bar.left(), bar.bottom() + 2, bar.width(), fm.height() + 2);
      p.drawText(text, Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("0"));
      p.drawText(text, Qt::AlignRight | Qt::AlignVCenter,
                 tr("≥ %1 levels").arg(255.0 / gain_, 0, 'g', 3));
      break;
    }
  }
  if (show_seams_ && !seam_caption_.isEmpty()) {
    drawLabel(p, rect(), seam_caption_, Qt::AlignBottom | Qt::AlignLeft, true);
  }
}

// ---- interaction ------------------------------------------------------------------------------

void CompareView::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton && e->button() != Qt::MiddleButton) return;
  drag_start_ = e->position();
  drag_center_ = sync_->center();
  drag_ = e->button() == Qt::LeftButton && nearDivider(e->position()) ? Drag::kDivider : Drag::kPan;
  setCursor(drag_ == Drag::kDivider ? Qt::SplitHCursor : Qt::ClosedHandCursor);
}

void CompareView::mouseMoveEvent(QMouseEvent* e) {
  if (drag_ == Drag::kDivider) {
    const QRectF pane = paneRect(0);
    setDivider((e->position().x() - pane.left()) / std::max(1.0, pane.width()));
    return;
  }
  if (drag_ == Drag::kPan) {
    const QRectF ir = imageRect(paneRect(paneAt(drag_start_)));
    if (ir.width() <= 0 || ir.height() <= 0) return;
    const QPointF d = e->position() - drag_start_;
    sync_->set(sync_->zoom(),
               {drag_center_.x() - d.x() / ir.width(), drag_center_.y() - d.y() / ir.height()});
    return;
  }
  setCursor(nearDivider(e->position()) ? Qt::SplitHCursor : Qt::OpenHandCursor);
}

void CompareView::mouseReleaseEvent(QMouseEvent*) {
  drag_ = Drag::kNone;
  setCursor(Qt::OpenHandCursor);
}

void CompareView::mouseDoubleClickEvent(QMouseEvent*) {
  sync_->fit();
}

void CompareView::wheelEvent(QWheelEvent* e) {
  const double steps = e->angleDelta().y() / 120.0;
  if (steps == 0) return;
  zoomBy(std::pow(1.25, steps), e->position());
  e->accept();
}

}  // namespace seedvae::ui
