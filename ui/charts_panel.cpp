#include "ui/charts_panel.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QHBoxLayout>
#include <QLegendMarker>
#include <QLineSeries>
#include <QSplitter>
#include <QStackedBarSeries>
#include <QTimer>
#include <QToolTip>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

namespace seedvae::ui {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

QChartView* make_view(QChart* chart, QWidget* parent) {
  auto* v = new QChartView(chart, parent);
  v->setRenderHint(QPainter::Antialiasing);
  v->setMinimumSize(280, 150);
  return v;
}

void style_chart(QChart* c, const QString& title) {
  c->setTitle(title);
  QFont f = c->titleFont();
  f.setPointSizeF(std::max(7.0, f.pointSizeF() * 0.95));
  f.setBold(true);
  c->setTitleFont(f);
  c->setMargins(QMargins(4, 2, 4, 2));
  c->legend()->setAlignment(Qt::AlignRight);
  QFont lf = c->legend()->font();
  lf.setPointSizeF(std::max(6.5, lf.pointSizeF() * 0.8));
  c->legend()->setFont(lf);
  c->setAnimationOptions(QChart::NoAnimation);
}

// The top of an axis range that moves rarely: the data's maximum `need` rounded up to 1, 2, 2.5 or
// 5 x 10^k, kept while the data stays within 40-100 % of it. Qt Charts lays every label of an axis
// out again as rich text when the range changes (4-8 ms of the GUI thread per refresh in a studio
// run on the 2-core build machine, 35 ms at worst, when the axes moved at every refresh), and a
// still axis reads better than one that creeps.
double settled_top(double current, double need) {
  if (need <= current && need >= 0.4 * current) return current;
  const double decade = std::pow(10.0, std::floor(std::log10(need)));
  for (const double m : {1.0, 2.0, 2.5, 5.0}) {
    if (m * decade >= need) return m * decade;
  }
  return 10 * decade;
}

// A range of 0..top (a settled_top value) with ticks at round steps: 1 -> 0.2, 2 -> 0.5,
// 2.5 -> 0.5, 5 -> 1 (x 10^k).
void set_top(QValueAxis* axis, double top) {
  const double m = top / std::pow(10.0, std::floor(std::log10(top)));
  axis->setTickCount(std::abs(m - 2.0) < 1e-9 ? 5 : 6);
  axis->setRange(0, top);
}

void settle_top(QValueAxis* axis, double need) {
  const double top = settled_top(axis->max(), std::max(need, 1e-9));
  if (top != axis->max()) set_top(axis, top);
}

}  // namespace

ChartsPanel::ChartsPanel(QWidget* parent, Labels labels) : QWidget(parent) {
  memory_chart_ = new QChart();
  style_chart(memory_chart_, tr("Memory"));
  allocated_ = new QLineSeries();
  allocated_->setName(tr("engine allocated"));
  peak_ = new QLineSeries();
  peak_->setName(tr("engine peak"));
  device_ = new QLineSeries();
  device_->setName(tr("device used"));
  for (QLineSeries* s : {allocated_, peak_, device_}) memory_chart_->addSeries(s);
  mem_x_ = new QValueAxis();
  mem_x_->setTitleText(tr("s"));
  mem_x_->setLabelFormat(QStringLiteral("%.1f"));
  mem_y_ = new QValueAxis();
  mem_y_->setTitleText(tr("MiB"));
  mem_y_->setLabelFormat(QStringLiteral("%.0f"));
  memory_chart_->addAxis(mem_x_, Qt::AlignBottom);
  memory_chart_->addAxis(mem_y_, Qt::AlignLeft);
  for (QLineSeries* s : {allocated_, peak_, device_}) {
    s->attachAxis(mem_x_);
    s->attachAxis(mem_y_);
  }
  set_top(mem_x_, 1);
  set_top(mem_y_, 1);

  timing_chart_ = new QChart();
  style_chart(timing_chart_, tr("Time per chunk / tile, by stage"));
  timing_ = new QStackedBarSeries();
  timing_->setBarWidth(0.85);
  timing_chart_->addSeries(timing_);
  // Hovering a bar segment names its stage, chunk/tile and time (the legend may be cut short).
  // The GPU time (CUDA events) joins the wall time where the backend measures it.
  connect(timing_, &QStackedBarSeries::hovered, this, &ChartsPanel::showBarTip);
  // Naming every bar on the axis costs a text layout per bar at every refresh (tens of ms on a
  // slow core, a GUI stall): on screen the axis is hidden and hovering names a bar; the report's
  // copy names them.
  if (labels == Labels::kNamed) {
    time_names_ = new QBarCategoryAxis();
    QFont xf = time_names_->labelsFont();
    xf.setPointSizeF(std::max(6.0, xf.pointSizeF() * 0.75));
    time_names_->setLabelsFont(xf);
    time_names_->setLabelsAngle(-60);
  } else {
    // Hidden: its range follows the bar count, and a visible axis lays its labels out again at
    // every change even when they are not shown.
    time_index_ = new QValueAxis();
    time_index_->setVisible(false);
    time_index_->setRange(-0.5, 0.5);
  }
  time_y_ = new QValueAxis();
  time_y_->setTitleText(tr("ms"));
  time_y_->setLabelFormat(QStringLiteral("%.0f"));
  set_top(time_y_, 1);
  timing_chart_->addAxis(timeAxis(), Qt::AlignBottom);
  timing_chart_->addAxis(time_y_, Qt::AlignLeft);
  timing_->attachAxis(timeAxis());
  timing_->attachAxis(time_y_);

  memory_view_ = make_view(memory_chart_, this);
  memory_view_->setObjectName(QStringLiteral("memoryChart"));
  timing_view_ = make_view(timing_chart_, this);
  timing_view_->setObjectName(QStringLiteral("timingChart"));
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(memory_view_);
  split->addWidget(timing_view_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  auto* lay = new QHBoxLayout(this);
  lay->setContentsMargins(0, 0, 0, 0);
  lay->addWidget(split);
  refresh_ = new QTimer(this);
  refresh_->setSingleShot(true);
  refresh_->setInterval(kRefreshMs);
  connect(refresh_, &QTimer::timeout, this, &ChartsPanel::flush);
}

QString ChartsPanel::stageGroup(const QString& stage) {
  if (stage.startsWith(QLatin1String("encoder."))) return stage.mid(8);
  if (stage.startsWith(QLatin1String("decoder."))) return stage.mid(8);
  return stage;
}

void ChartsPanel::clear() {
  log_.clear();
  allocated_->clear();
  peak_->clear();
  device_->clear();
  pending_alloc_.clear();
  pending_peak_.clear();
  pending_device_.clear();
  groups_.clear();
  values_.clear();
  device_values_.clear();
  categories_.clear();
  category_index_.clear();
  category_totals_.clear();
  run_offset_.clear();
  timing_->clear();  // deletes the bar sets
  sets_.clear();
  bar_first_ = 0;
  last_t_ = 0;
  max_mib_ = 1;
  bars_dirty_ = true;
  updateBars();
  for (QValueAxis* axis : {mem_x_, mem_y_, time_y_}) set_top(axis, 1);
}

void ChartsPanel::addPoints(const QVector<TelemetryPoint>& points) {
  if (points.isEmpty()) return;
  for (const TelemetryPoint& p : points) {
    log_.push_back(p);
    auto off = run_offset_.find(p.run_id);
    if (off == run_offset_.end()) off = run_offset_.insert(p.run_id, last_t_);
    const double t = *off + p.t_s;
    last_t_ = std::max(last_t_, t);
    pending_alloc_.push_back({t, p.current_bytes / kMiB});
    pending_peak_.push_back({t, p.peak_bytes / kMiB});
    max_mib_ = std::max({max_mib_, p.current_bytes / kMiB, p.peak_bytes / kMiB});
    if (p.device_used_bytes >= 0) {
      pending_device_.push_back({t, p.device_used_bytes / kMiB});
      max_mib_ = std::max(max_mib_, p.device_used_bytes / kMiB);
    }
    if (p.op == QLatin1String("run")) continue;  // memory-only samples
    const QString key =
        QStringLiteral("%1|%2|%3|%4|%5").arg(p.run_id).arg(p.slot, p.op).arg(p.chunk).arg(p.tile);
    int idx;
    auto ci = category_index_.find(key);
    if (ci == category_index_.end()) {
      QString label =
          (p.slot.isEmpty() ? QString() : p.slot + QLatin1Char(' ')) +
          (p.op == QLatin1String("encode") ? QStringLiteral("e") : QStringLiteral("d")) +
          QString::number(std::max<qint64>(0, p.chunk));
      if (p.tile >= 0) label += QStringLiteral("·t%1").arg(p.tile);
      while (categories_.contains(label)) label += QLatin1Char('\'');
      idx = static_cast<int>(categories_.size());
      categories_.push_back(label);
      category_index_.insert(key, idx);
      category_totals_.push_back(0);
      for (auto& v : values_) v.push_back(0.0);
      for (auto& v : device_values_) v.push_back(-1.0);
    } else {
      idx = *ci;
    }
    const QString group = stageGroup(p.stage);
    int g = static_cast<int>(groups_.indexOf(group));
    if (g < 0) {
      g = static_cast<int>(groups_.size());
      groups_.push_back(group);
      values_.push_back(QVector<double>(categories_.size(), 0.0));
      device_values_.push_back(QVector<double>(categories_.size(), -1.0));
    }
    values_[g][idx] += p.wall_ms;
    if (p.device_ms >= 0)
      device_values_[g][idx] = std::max(0.0, device_values_[g][idx]) + p.device_ms;
    category_totals_[idx] += p.wall_ms;
    bars_dirty_ = true;
  }
  if (!refresh_->isActive()) refresh_->start();
}

void ChartsPanel::flush() {
  refresh_->stop();
  if (!pending_alloc_.isEmpty()) allocated_->append(pending_alloc_);
  if (!pending_peak_.isEmpty()) peak_->append(pending_peak_);
  if (!pending_device_.isEmpty()) device_->append(pending_device_);
  pending_alloc_.clear();
  pending_peak_.clear();
  pending_device_.clear();
  updateBars();
  updateRanges();
}

void ChartsPanel::updateBars() {
  if (!bars_dirty_) return;
  bars_dirty_ = false;
  // The series and its bar sets live as long as the session: a new stage group adds a set, and a
  // refresh changes each set's values in place. Rebuilding the series at every refresh recreated
  // every bar item and legend marker: 7 ms a refresh for 14 stages x 40 bars against 1.6 ms for
  // refilling the sets, and a repaint of 6.5 ms against 1.7 (Qt 6.4, offscreen, one core of the
  // 2-core build machine).
  static const QColor palette[] = {
      QColor(31, 119, 180),  QColor(255, 127, 14), QColor(44, 160, 44),   QColor(214, 39, 40),
      QColor(148, 103, 189), QColor(140, 86, 75),  QColor(227, 119, 194), QColor(127, 127, 127),
      QColor(188, 189, 34),  QColor(23, 190, 207), QColor(57, 59, 121),   QColor(173, 73, 74),
      QColor(99, 121, 57),   QColor(206, 109, 189)};
  const int n = static_cast<int>(categories_.size());
  const int left = std::max(0, n - visible_bars_) - bar_first_;  // bars that scrolled out
  bar_first_ += left;
  QList<QBarSet*> added;
  while (sets_.size() < groups_.size()) {
    const auto g = sets_.size();
    auto* set = new QBarSet(groups_[g]);
    const QColor c = palette[g % std::size(palette)];
    set->setColor(c);
    set->setBorderColor(c.darker(130));
    sets_.push_back(set);
    added.push_back(set);
  }
  // Each change of a set lays the chart out again: only what changed is touched (usually the
  // newest bar's value and the bars of new chunks).
  for (int g = 0; g < sets_.size(); ++g) {
    QBarSet* set = sets_[g];
    const QVector<double>& v = values_[g];
    if (left > 0 && set->count() > 0) set->remove(0, std::min(left, set->count()));
    const int kept = set->count();
    for (int i = 0; i < kept; ++i) {
      if (set->at(i) != v[bar_first_ + i]) set->replace(i, v[bar_first_ + i]);
    }
    if (bar_first_ + kept < n) set->append(QList<qreal>(v.begin() + bar_first_ + kept, v.end()));
  }
  if (!added.isEmpty()) timing_->append(added);  // filled first: one layout for the new sets
  if (time_names_ != nullptr) {
    time_names_->clear();
    time_names_->append(categories_.mid(bar_first_));
    time_names_->setLabelsVisible(n - bar_first_ <= 64);
  } else {
    time_index_->setRange(-0.5, std::max(1, n - bar_first_) - 0.5);  // bar i of the window at i
  }
}

void ChartsPanel::showBarTip(bool status, int index, QBarSet* set) {
  const int category = bar_first_ + index;
  const auto g = sets_.indexOf(set);
  if (!status || g < 0 || index < 0 || category >= categories_.size()) {
    QToolTip::hideText();
    return;
  }
  QString text = tr("%1 · %2: %3 ms")
                     .arg(categories_[category], set->label())
                     .arg(values_[g][category], 0, 'f', 1);
  const double gpu_ms = device_values_[g][category];
  if (gpu_ms >= 0) text += tr(" (GPU %1 ms)").arg(gpu_ms, 0, 'f', 1);
  QToolTip::showText(QCursor::pos(), text, timing_view_);
}

QAbstractAxis* ChartsPanel::timeAxis() const {
  if (time_names_ != nullptr) return time_names_;
  return time_index_;
}

void ChartsPanel::updateRanges() {
  settle_top(mem_x_, std::max(1.0, last_t_));
  settle_top(mem_y_, max_mib_ * 1.05);
  double m = 1;
  for (int i = bar_first_; i < category_totals_.size(); ++i) m = std::max(m, category_totals_[i]);
  settle_top(time_y_, m * 1.05);
}

QImage ChartsPanel::render(const QString& which, QSize size) {
  // A private, never-displayed copy of the panel fed with the whole log: the report gets every
  // sample at a readable size whatever the on-screen panel looks like.
  ChartsPanel copy(nullptr, Labels::kNamed);
  copy.setAttribute(Qt::WA_DontShowOnScreen);
  const bool timing = which == QLatin1String("timing");
  (timing ? copy.memory_view_ : copy.timing_view_)->hide();
  copy.visible_bars_ = 1 << 20;  // the report shows every chunk and tile
  copy.addPoints(log_);
  copy.flush();
  copy.resize(size);
  copy.layout()->activate();
  QImage img(size, QImage::Format_ARGB32_Premultiplied);
  img.fill(Qt::white);
  {
    QPainter painter(&img);
    copy.QWidget::render(&painter);  // a hidden widget renders after its pending resize events
  }
  return img;
}

}  // namespace seedvae::ui
