// A/B comparison: two slots, each with settings and weights, Run A/B, and the result table (each
// side's weights and family, time per frame, peak memory, PSNR/SSIM against the original, max-abs
// and PSNR of A against B), plus report export. A slot's weights are the loaded model's unless it
// names its own: a built-in synthetic recipe or a checkpoint of any family, so a Wan checkpoint
// and a SeedVR2 checkpoint compare on the same clip. The status line follows the state: "Running
// A/B…" only while the A/B runs; once it is over, the result or the error (a failed or cancelled
// slot); a single run only disables Run A/B. After an A/B, "Enqueue winner" queues the slot the
// user picks among those that finished (the comparison names no winner: speed, memory and quality
// trade against each other), with the weights it ran on, over the whole input video.
#pragma once

#include <QWidget>
#include <optional>

#include "ui/studio_types.h"

class QComboBox;
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
  // A slot's own weights; nullopt (the default): the loaded model's.
  void setSlotWeights(const QString& slot, const std::optional<WeightsSpec>& weights);
  std::optional<WeightsSpec> slotWeights(const QString& slot) const;
  QComboBox* weightsCombo(const QString& slot) const;
  void setResult(const AbComparison& ab);
  void clearResult();
  // busy: a run is in progress (Run A/B waits); ab: that run is an A/B comparison.
  void setBusy(bool busy, bool ab);
  QTableWidget* table() const { return table_; }
  bool hasResult() const { return result_.has_value(); }
  QString statusText() const;

 signals:
  void takeCurrentRequested(QString slot);    // "A" or "B": store the panel's settings in the slot
  void applySlotRequested(QString slot);      // show the slot's settings in the panel
  void slotWeightsChanged(QString slot);      // the user picked other weights for the slot
  void browseWeightsRequested(QString slot);  // "Checkpoint file…": the window asks for a file
  void runRequested();
  void exportRequested();
  // Queue the compared settings and weights of `slot` ("A" or "B") over the whole input video.
  void enqueueRequested(QString slot);

 private:
  void updateStatus();
  void updateEnqueueMenu();
  // The combo's entries for `weights` (a checkpoint gets its own entry) with it selected.
  void showWeights(QComboBox* combo, const std::optional<WeightsSpec>& weights);

  QLabel* a_label_;
  QLabel* b_label_;
  QComboBox* a_weights_combo_;
  QComboBox* b_weights_combo_;
  QPushButton* run_;
  QPushButton* export_;
  QToolButton* enqueue_;
  QTableWidget* table_;
  QLabel* status_;
  bool busy_ = false;
  bool ab_running_ = false;
  RunOptions a_, b_;
  std::optional<WeightsSpec> a_weights_, b_weights_;
  std::optional<AbComparison> result_;
};

}  // namespace seedvae::ui
