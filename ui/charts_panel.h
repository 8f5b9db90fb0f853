// Live graphs (Qt Charts) fed by the engine telemetry:
//  * memory over time: engine allocated, engine peak and device-wide used (for the CPU backend
//    the process's resident size), in MiB against seconds since the session started;
//  * time per chunk (and per tile when tiled), stacked by stage (top-level block): host wall time;
//    hovering a segment also names its GPU time (CUDA events) where the backend measures it.
// Runs of one session (a single run, or A then B) share the time axis. Every sample is kept in
// log() for the report even when the charts show only the most recent bars.
//
// Cost on the GUI thread: samples are stored as plain numbers on arrival and the Qt Charts
// objects are updated at most every kRefreshMs (line series by batch append; the bar chart's sets,
// one per stage, get the visible window's values in place), so a burst of telemetry costs one
// chart refresh, not one per sample.
#pragma once

#include <QMap>
#include <QPair>
#include <QVector>
#include <QWidget>
#include <algorithm>

#include "ui/studio_types.h"

QT_BEGIN_NAMESPACE
class QTimer;
class QAbstractAxis;
class QBarCategoryAxis;
class QBarSet;
class QChart;
class QChartView;
class QLineSeries;
class QStackedBarSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace seedvae::ui {

class ChartsPanel : public QWidget {
  Q_OBJECT

 public:
  // kIndexed: the timing chart's axis counts bars (hovering a bar names it), cheap to refresh;
  // kNamed: it names every bar (up to 64), as the report's charts do.
  enum class Labels { kIndexed, kNamed };
  explicit ChartsPanel(QWidget* parent = nullptr, Labels labels = Labels::kIndexed);

  void clear();  // a new session
  void addPoints(const QVector<TelemetryPoint>& points);
  // Applies pending samples to the charts now (otherwise done by a timer).
  void flush();
  const QVector<TelemetryPoint>& log() const { return log_; }

  QLineSeries* allocatedSeries() const { return allocated_; }
  QLineSeries* peakSeries() const { return peak_; }
  QLineSeries* deviceSeries() const { return device_; }
  QStackedBarSeries* timingSeries() const { return timing_; }
  int timingCategories() const { return static_cast<int>(categories_.size()); }
  // GPU milliseconds of one timing bar (summed over its stages), -1 when no stage had a device
  // time.
  double timingGpuMs(int category) const {
    double ms = -1;
    for (const auto& v : device_values_) {
      if (category >= 0 && category < v.size() && v[category] >= 0)
        ms = std::max(0.0, ms) + v[category];
    }
    return ms;
  }
  QChartView* memoryView() const { return memory_view_; }
  QChartView* timingView() const { return timing_view_; }

  // Renders a chart for the report (GUI thread): "memory" or "timing".
  QImage render(const QString& which, QSize size = {1100, 440});

  static constexpr int kVisibleBars = 40;
  static constexpr int kRefreshMs = 250;
  // "decoder.up_blocks.1" -> "up_blocks.1"; "exact tile" stays.
  static QString stageGroup(const QString& stage);

 private:
  void updateBars();
  void updateRanges();
  void showBarTip(bool status, int index, QBarSet* set);
  QAbstractAxis* timeAxis() const;

  QChart* memory_chart_;
  QChartView* memory_view_;
  QLineSeries* allocated_;
  QLineSeries* peak_;
  QLineSeries* device_;
  QValueAxis* mem_x_;
  QValueAxis* mem_y_;
  QChart* timing_chart_;
  QChartView* timing_view_;
  QStackedBarSeries* timing_;
  QList<QBarSet*> sets_;  // timing_'s, one per stage group (groups_), in its order
  int bar_first_ = 0;     // the category of the window's first bar
  // The timing chart's x axis (timeAxis()): one of
  QBarCategoryAxis* time_names_ = nullptr;  // Labels::kNamed
  QValueAxis* time_index_ = nullptr;        // Labels::kIndexed
  QValueAxis* time_y_;
  QVector<TelemetryPoint> log_;
  QStringList groups_;               // stage groups, in order of appearance
  QVector<QVector<double>> values_;  // [group][category] milliseconds (host wall time)
  QVector<QVector<double>>
      device_values_;  // [group][category] GPU milliseconds, -1: no device timer
  QStringList categories_;
  QMap<QString, int> category_index_;  // (slot, op, chunk, tile) -> index
  QVector<double> category_totals_;
  QMap<quint64, double> run_offset_;
  double last_t_ = 0;
  double max_mib_ = 1;
  QList<QPointF> pending_alloc_, pending_peak_, pending_device_;
  bool bars_dirty_ = false;
  int visible_bars_ = kVisibleBars;
  QTimer* refresh_ = nullptr;
};

}  // namespace seedvae::ui
