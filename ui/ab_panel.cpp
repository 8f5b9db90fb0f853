#include "ui/ab_panel.h"

#include <QComboBox>
#include <QGridLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QTableWidget>
#include <QToolButton>
#include <QVBoxLayout>
#include <tuple>

#include "core/vae/state_dict.h"

namespace seedvae::ui {

namespace {

// What an entry of a slot's weights list stands for (Qt::UserRole + 1); Qt::UserRole holds the
// weights as a queued job names them (queue_weights()).
enum WeightsEntry { kLoadedModel, kBuiltin, kCheckpoint, kBrowse };
constexpr int kKindRole = Qt::UserRole + 1;

}  // namespace

AbPanel::AbPanel(QWidget* parent) : QWidget(parent) {
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(4, 4, 4, 4);
  auto* grid = new QGridLayout();
  auto make_slot = [&](const QString& slot, int row) {
    auto* name = new QLabel(QStringLiteral("<b>%1</b>").arg(slot), this);
    auto* label = new QLabel(this);
    label->setWordWrap(true);
    label->setObjectName(QStringLiteral("slotLabel") + slot);
    auto* take = new QPushButton(tr("← current"), this);
    take->setObjectName(QStringLiteral("take") + slot);
    take->setToolTip(tr("Store the settings panel's current settings in slot %1").arg(slot));
    auto* apply = new QPushButton(tr("edit"), this);
    apply->setToolTip(tr("Show slot %1's settings in the settings panel").arg(slot));
    grid->addWidget(name, row, 0);
    grid->addWidget(label, row, 1);
    grid->addWidget(take, row, 2);
    grid->addWidget(apply, row, 3);
    connect(take, &QPushButton::clicked, this, [this, slot] { emit takeCurrentRequested(slot); });
    connect(apply, &QPushButton::clicked, this, [this, slot] { emit applySlotRequested(slot); });
    // The slot's weights: the loaded model's, a built-in recipe, or a checkpoint of any family.
    auto* combo = new QComboBox(this);
    combo->setObjectName(QStringLiteral("weights") + slot);
    combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    combo->setMinimumContentsLength(12);
    combo->setToolTip(
        tr("The weights slot %1 runs on: the loaded model (Input and weights panel), a built-in "
           "synthetic recipe or another checkpoint (SeedVR2, Wan2.1 or Wan2.2). Other weights are "
           "read on the engine thread before the slot's run and freed after it.")
            .arg(slot));
    combo->addItem(tr("weights: the loaded model"));
    combo->setItemData(0, QString(), Qt::UserRole);
    combo->setItemData(0, kLoadedModel, kKindRole);
    for (const std::string& n : synthetic_weight_names()) {
      combo->addItem(tr("weights: built-in synthetic %1").arg(QString::fromStdString(n)));
      combo->setItemData(combo->count() - 1, QString::fromStdString("synthetic:" + n),
                         Qt::UserRole);
      combo->setItemData(combo->count() - 1, kBuiltin, kKindRole);
    }
    combo->addItem(tr("weights: checkpoint file…"));
    combo->setItemData(combo->count() - 1, kBrowse, kKindRole);
    grid->addWidget(combo, row + 1, 1, 1, 3);
    connect(combo, &QComboBox::activated, this, [this, slot, combo](int index) {
      const int kind = combo->itemData(index, kKindRole).toInt();
      if (kind == kBrowse) {
        showWeights(combo, slotWeights(slot));  // until a file is chosen
        emit browseWeightsRequested(slot);
        return;
      }
      std::optional<WeightsSpec> w;
      if (kind != kLoadedModel) {
        w = weights_spec_from_queue(combo->itemData(index, Qt::UserRole).toString().toStdString());
      }
      (slot == QLatin1String("A") ? a_weights_ : b_weights_) = w;
      emit slotWeightsChanged(slot);
    });
    return std::pair{label, combo};
  };
  std::tie(a_label_, a_weights_combo_) = make_slot(QStringLiteral("A"), 0);
  std::tie(b_label_, b_weights_combo_) = make_slot(QStringLiteral("B"), 2);
  grid->setColumnStretch(1, 1);
  root->addLayout(grid);
  auto* buttons = new QHBoxLayout();
  run_ = new QPushButton(tr("Run A/B (F6)"), this);
  run_->setObjectName(QStringLiteral("runAB"));
  run_->setToolTip(
      tr("Run A, then B, on the same input (one after the other on the engine "
         "thread), then compare them"));
  export_ = new QPushButton(tr("Export report… (Ctrl+E)"), this);
  export_->setToolTip(
      tr("Write the comparison as Markdown + JSON + PNG stills + charts and the "
         "reconstructed videos"));
  enqueue_ = new QToolButton(this);
  enqueue_->setObjectName(QStringLiteral("enqueueWinner"));
  enqueue_->setText(tr("Enqueue winner…"));
  enqueue_->setToolTip(
      tr("Queue the slot you pick, with the settings and weights it was compared with, over the "
         "whole input video (the Queue panel)"));
  enqueue_->setPopupMode(QToolButton::InstantPopup);
  enqueue_->setMenu(new QMenu(enqueue_));
  buttons->addWidget(run_);
  buttons->addWidget(export_);
  root->addLayout(buttons);
  table_ = new QTableWidget(0, 3, this);
  table_->setObjectName(QStringLiteral("abTable"));
  table_->setHorizontalHeaderLabels({tr("Metric"), tr("A"), tr("B")});
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Interactive);
  table_->setColumnWidth(0, 150);
  table_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  table_->horizontalHeader()->setSectionResizeMode(2, QHeaderView::Stretch);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setWordWrap(true);
  root->addWidget(table_, 1);
  root->addWidget(enqueue_, 0, Qt::AlignLeft);
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("abStatus"));
  status_->setWordWrap(true);
  updateStatus();
  updateEnqueueMenu();
  root->addWidget(status_);
  connect(run_, &QPushButton::clicked, this, &AbPanel::runRequested);
  connect(export_, &QPushButton::clicked, this, &AbPanel::exportRequested);
}

void AbPanel::setSlot(const QString& slot, const RunOptions& s) {
  (slot == QLatin1String("A") ? a_ : b_) = s;
  (slot == QLatin1String("A") ? a_label_ : b_label_)->setText(settings_summary(s));
}

RunOptions AbPanel::slotSettings(const QString& slot) const {
  return slot == QLatin1String("A") ? a_ : b_;
}

void AbPanel::setSlotWeights(const QString& slot, const std::optional<WeightsSpec>& weights) {
  (slot == QLatin1String("A") ? a_weights_ : b_weights_) = weights;
  showWeights(weightsCombo(slot), weights);
}

std::optional<WeightsSpec> AbPanel::slotWeights(const QString& slot) const {
  return slot == QLatin1String("A") ? a_weights_ : b_weights_;
}

QComboBox* AbPanel::weightsCombo(const QString& slot) const {
  return slot == QLatin1String("A") ? a_weights_combo_ : b_weights_combo_;
}

void AbPanel::showWeights(QComboBox* combo, const std::optional<WeightsSpec>& weights) {
  const QSignalBlocker block(combo);
  const QString key = weights ? QString::fromStdString(queue_weights(*weights)) : QString();
  int index = weights ? -1 : 0;
  for (int i = 0; i < combo->count() && index < 0; ++i) {
    if (combo->itemData(i, kKindRole).toInt() == kBuiltin &&
        combo->itemData(i, Qt::UserRole).toString() == key) {
      index = i;
    }
  }
  if (index < 0) {
    // A checkpoint: one entry, the latest one picked, just before "checkpoint file…".
    int entry = -1;
    for (int i = 0; i < combo->count(); ++i) {
      if (combo->itemData(i, kKindRole).toInt() == kCheckpoint) entry = i;
    }
    if (entry < 0) {
      entry = combo->count() - 1;
      combo->insertItem(entry, QString());
      combo->setItemData(entry, kCheckpoint, kKindRole);
    }
    combo->setItemText(entry, tr("weights: %1").arg(weights->short_name()));
    combo->setItemData(entry, key, Qt::UserRole);
    combo->setItemData(entry, key, Qt::ToolTipRole);
    index = entry;
  }
  combo->setCurrentIndex(index);
}

void AbPanel::setResult(const AbComparison& ab) {
  result_ = ab;
  const QVector<AbRow> rows = ab_table_rows(ab, true);
  table_->setRowCount(static_cast<int>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) {
    table_->setItem(i, 0, new QTableWidgetItem(rows[i].label));
    auto* a = new QTableWidgetItem(rows[i].a);
    a->setToolTip(rows[i].a);
    table_->setItem(i, 1, a);
    if (rows[i].b.isEmpty() && rows[i].label.startsWith(QLatin1String("A vs B"))) {
      table_->setSpan(i, 1, 1, 2);
    } else {
      auto* b = new QTableWidgetItem(rows[i].b);
      b->setToolTip(rows[i].b);
      table_->setItem(i, 2, b);
    }
  }
  table_->resizeRowsToContents();
  updateStatus();
  updateEnqueueMenu();
}

void AbPanel::clearResult() {
  result_.reset();
  table_->clearSpans();
  table_->setRowCount(0);
  updateStatus();
  updateEnqueueMenu();
}

// One entry per slot with the numbers to choose by; a cancelled A/B has no winner to pick.
// (A slot that failed — options its family refuses, weights that did not load — has no entry; the
// other one keeps its own.)
void AbPanel::updateEnqueueMenu() {
  QMenu* menu = enqueue_->menu();
  menu->clear();
  const bool any = result_ && !result_->cancelled && (result_->a.ok || result_->b.ok);
  enqueue_->setEnabled(any);
  if (!any) return;
  for (const RunSummary* run : {&result_->a, &result_->b}) {
    if (!run->ok) continue;
    QAction* a = menu->addAction(
        tr("%1 for the whole video: %2, %3 — %4 ms/frame, peak %5, "
           "PSNR %6 dB")
            .arg(run->slot, run->weights.short_name(), settings_label(run->settings))
            .arg(run->ms_per_frame, 0, 'f', 1)
            .arg(format_bytes(run->peak_bytes))
            .arg(run->vs_original.psnr_db, 0, 'f', 2));
    a->setObjectName(QStringLiteral("enqueue") + run->slot);
    a->setData(run->slot);
    connect(a, &QAction::triggered, this,
            [this, slot = run->slot] { emit enqueueRequested(slot); });
  }
}

void AbPanel::setBusy(bool busy, bool ab) {
  busy_ = busy;
  ab_running_ = busy && ab;
  run_->setEnabled(!busy);
  updateStatus();
}

QString AbPanel::statusText() const {
  return status_->text();
}

// "Running A/B…" only while an A/B is in progress; after it, whatever the order in which the
// controller reports the end of the run and the comparison, the result or the reason it has none.
void AbPanel::updateStatus() {
  QString text;
  if (ab_running_) {
    text = tr("Running A/B…");
  } else if (result_) {
    text = result_->ok ? tr("A/B done. The views show A against B (View ▸ Compare A vs B).")
                       : tr("A/B incomplete: %1").arg(result_->error);
  } else if (busy_) {
    text = tr("A run is in progress: Run A/B is available when it ends.");
  } else {
    text = tr("Set the two slots, then Run A/B.");
  }
  status_->setText(text);
}

}  // namespace seedvae::ui
