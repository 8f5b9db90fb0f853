// A/B comparison: two settings slots, Run A/B, and the result table (time per frame, peak memory,
// PSNR/SSIM against the original, max-abs and PSNR of A against B), plus report export.
#pragma once

#include <QWidget>
#include <optional>

#include "ui/studio_types.h"

class QLabel;
class QPushButton;
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
  void setBusy(bool busy);
  QTableWidget* table() const { return table_; }
  bool hasResult() const { return result_.has_value(); }

 signals:
  void takeCurrentRequested(QString slot);  // "A" or "B": store the panel's settings in the slot
  void applySlotRequested(QString slot);    // show the slot's settings in the panel
  void runRequested();
  void exportRequested();

 private:
  QLabel* a_label_;
  QLabel* b_label_;
  QPushButton* run_;
  QPushButton* export_;
  QTableWidget* table_;
  QLabel* status_;
  RunOptions a_, b_;
  std::optional<AbComparison> result_;
};

}  // namespace seedvae::ui
