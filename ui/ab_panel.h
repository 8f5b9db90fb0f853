// A/B comparison: two settings slots, Run A/B, and the result table (time per frame, peak memory,
// PSNR/SSIM against the original, max-abs and PSNR of A against B), plus report export. The status
// line follows the state: "Running A/B…" only while the A/B runs; once it is over, the result or
// the error (a failed or cancelled slot); a single run only disables Run A/B. After a finished A/B,
// "Enqueue winner" queues the slot the user picks (the comparison names no winner: speed, memory
// and quality trade against each other) over the whole input video.
#pragma once

#include <QWidget>
#include <optional>

#include "ui/studio_types.h"

class QLabel;
class QPushButton;
class QToolButton;
class QTableWidget;

namespace seedvae::ui {

class AbPanel : public QWidget {
  Q_OBJECT

 public:
  explicit AbPanel(QWidget* parent = nullptr);

  void setSlot(const QString& slot, const RunOptions& s);
  RunOptions slotSettings(const QString& slot) const;
  void setResult(const AbComparison& ab);
  void clearResult();
  // busy: a run is in progress (Run A/B waits); ab: that run is an A/B comparison.
  void setBusy(bool busy, bool ab);
  QTableWidget* table() const { return table_; }
  bool hasResult() const { return result_.has_value(); }
  QString statusText() const;

 signals:
  void takeCurrentRequested(QString slot);  // "A" or "B": store the panel's settings in the slot
  void applySlotRequested(QString slot);    // show the slot's settings in the panel
  void runRequested();
  void exportRequested();
  // Queue the compared settings of `slot` ("A" or "B") over the whole input video.
  void enqueueRequested(QString slot);

 private:
  void updateStatus();
  void updateEnqueueMenu();

  QLabel* a_label_;
  QLabel* b_label_;
  QPushButton* run_;
  QPushButton* export_;
  QToolButton* enqueue_;
  QTableWidget* table_;
  QLabel* status_;
  bool busy_ = false;
  bool ab_running_ = false;
  RunOptions a_, b_;
  std::optional<AbComparison> result_;
};

}  // namespace seedvae::ui
