// The studio's main window: composes the panels and wires them to the RunController (engine
// thread), the AsyncLoader (opening files), the MemoryPredictor (dry runs) and the SettingsStore.
// Everything here runs on the GUI thread and never waits for the engine.
#pragma once

#include <QMainWindow>
#include <QMap>
#include <memory>
#include <optional>

#include "ui/backend_catalog.h"
#include "ui/channels.h"
#include "ui/compare_view.h"
#include "ui/report.h"
#include "ui/studio_types.h"

class QAction;
class QActionGroup;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QMenu;
class QProgressBar;
class QToolButton;

namespace seedvae::ui {

class AbPanel;
class AsyncLoader;
class ChartsPanel;
class FrameStore;
class InfoPanel;
class MemoryPredictor;
class QueuePanel;
class RunController;
class Scrubber;
class SettingsPanel;
class SettingsStore;
struct Prediction;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // What the views compare.
  enum class Pair { kOriginalRecon, kAB, kOriginalA, kOriginalB };
  Q_ENUM(Pair)

  MainWindow(std::shared_ptr<const BackendCatalog> catalog, std::unique_ptr<SettingsStore> store,
             QWidget* parent = nullptr);
  ~MainWindow() override;

  // ---- actions (also used by tests and --demo) ----
  void openVideo(const QString& path);
  void useSampleClip();
  void openWeights(const QString& path);
  void useBuiltinWeights();
  // Starts a run with the panel's settings (asks first when the prediction says it will not fit
  // and confirmations are on). Returns false when it cannot start now.
  bool startRun();
  bool startAB();
  void cancelRun();
  void setSlot(const QString& slot, const RunOptions& s);
  // A slot's own weights (a checkpoint or a built-in recipe, read by the engine for that slot's
  // run); nullopt: the loaded model's (the default). Persisted like the slot's settings.
  void setSlotWeights(const QString& slot, const std::optional<WeightsSpec>& weights);
  // Shows `s` in the settings panel as if the user had chosen it (persisted, prediction updated).
  void applySettings(const RunOptions& s);
  // Starts a run as soon as the weights are loaded (the --demo job).
  void runWhenReady(bool ab = false);
  void exportReportTo(const QString& directory);
  ReportJob reportJob(const QString& directory);
  void setConfirmations(bool on) { confirmations_ = on; }

  // ---- state (tests, headless, screenshots) ----
  RunController* controller() const { return controller_; }
  SettingsPanel* settingsPanel() const { return settings_panel_; }
  InfoPanel* infoPanel() const { return info_panel_; }
  ChartsPanel* chartsPanel() const { return charts_; }
  AbPanel* abPanel() const { return ab_panel_; }
  QueuePanel* queuePanel() const { return queue_panel_; }
  CompareView* view() const { return view_; }
  CompareView* secondView() const { return second_view_; }
  Scrubber* scrubber() const { return scrubber_; }
  SettingsStore* store() const { return store_.get(); }
  bool weightsReady() const { return weights_.weights != nullptr; }
  const WeightsInfo& weights() const { return weights_; }
  QString lastError() const { return last_error_; }
  // Converts the frames the views wait for, on this thread, and shows them (screenshots).
  void settleViews();
  std::optional<RunSummary> lastRun() const { return last_run_; }
  void setPair(Pair pair);
  Pair pair() const { return pair_; }
  void setViewMode(CompareView::Mode mode);
  void setOverlay(bool tiles, bool seams);
  // "settings", "input", "graphs", "ab", "queue", "second view"
  void showDock(const QString& name);
  // Shows a dock and scrolls it to the child widget named `object_name`.
  void revealInDock(const QString& dock, const QString& object_name);

 signals:
  void videoLoaded(QString path);
  void weightsLoaded();
  void errorShown(QString title, QString text);
  void runFinished(seedvae::ui::RunSummary summary);
  void abFinished(seedvae::ui::AbComparison result);
  void reportWritten(seedvae::ui::ReportResult result);

 protected:
  void closeEvent(QCloseEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void buildActions();
  void buildMenus();
  void buildToolBar();
  void buildDocks();
  void buildStatusBar();
  void restoreSession();
  void updateRecentMenus();
  void updateActions();
  void requestPrediction();
  void refreshViews();
  void showError(const QString& title, const QString& text);
  void showInfo(const QString& title, const QString& text);
  bool doStartRun();
  bool doStartAB();
  void onRunStarted(quint64 id, const QString& slot);
  void onProgress(const ProgressUpdate& u);
  void onFrame(const FrameUpdate& f);
  void onRunFinished(const RunSummary& s);
  void onAbFinished(const AbComparison& ab);
  void onSettingsChanged(const RunOptions& s);
  void savePreset();
  void loadPreset(const QString& name);
  void deletePreset(const QString& name);
  void importPreset();
  void exportPreset();
  void exportReport();
  void exportVideo();
  void openVideoDialog();
  void openWeightsDialog();
  void openDroppedOrRecent(const QString& path);
  std::shared_ptr<FrameStore> storeFor(const QString& slot) const;
  // Frame `index` of `store` (its original when `original`) if already converted. Otherwise a
  // null image, *pending set when the frame exists: it is converted on converter_, which then
  // refreshes the views (a 1080p frame costs tens of ms, never the GUI thread's).
  QImage frameImage(const std::shared_ptr<FrameStore>& store, bool original, qint64 index,
                    bool* pending = nullptr);
  const RunSummary* summaryFor(const QString& slot) const;
  // "A · wan21-tiny · exact, chunk 1": the slot, its weights when not the loaded model's, and its
  // settings, of the slot's last run (else of the panel's slot).
  QString slotCaption(const QString& slot) const;
  void browseSlotWeights(const QString& slot);

  std::shared_ptr<const BackendCatalog> catalog_;
  std::unique_ptr<SettingsStore> store_;
  RunController* controller_ = nullptr;
  AsyncLoader* loader_ = nullptr;
  MemoryPredictor* predictor_ = nullptr;
  ViewSync* sync_ = nullptr;
  CompareView* view_ = nullptr;
  CompareView* second_view_ = nullptr;
  Scrubber* scrubber_ = nullptr;
  SettingsPanel* settings_panel_ = nullptr;
  InfoPanel* info_panel_ = nullptr;
  ChartsPanel* charts_ = nullptr;
  AbPanel* ab_panel_ = nullptr;
  QueuePanel* queue_panel_ = nullptr;
  QMap<QString, QDockWidget*> docks_;

  QProgressBar* progress_ = nullptr;
  QLabel* stage_label_ = nullptr;
  QToolButton* cancel_button_ = nullptr;
  QComboBox* pair_combo_ = nullptr;
  QDoubleSpinBox* gain_spin_ = nullptr;
  QMenu* recent_videos_ = nullptr;
  QMenu* recent_weights_ = nullptr;

  QAction* act_open_video_ = nullptr;
  QAction* act_open_weights_ = nullptr;
  QAction* act_run_ = nullptr;
  QAction* act_run_ab_ = nullptr;
  QAction* act_cancel_ = nullptr;
  QAction* act_export_ = nullptr;
  QAction* act_export_video_ = nullptr;
  QAction* act_tiles_ = nullptr;
  QAction* act_seams_ = nullptr;
  QActionGroup* mode_group_ = nullptr;
  QMap<CompareView::Mode, QAction*> mode_actions_;

  WeightsInfo weights_;
  WeightsSpec weights_spec_;
  std::optional<VideoInfoData> video_;
  Pair pair_ = Pair::kOriginalRecon;
  QString running_slot_;
  QMap<QString, RunSummary> summaries_;  // by slot of the latest session
  std::optional<RunSummary> last_run_;
  std::optional<AbComparison> last_ab_;
  bool confirmations_ = true;
  bool run_when_ready_ = false;
  bool run_when_ready_ab_ = false;
  QString last_error_;
  QString last_report_dir_;
  bool views_pending_ = false;  // a view waits for converter_
  // Converts the frames the views ask for (declared last: stopped before the rest goes).
  LatestTaskThread converter_{"seedvae-frames"};
};

}  // namespace seedvae::ui
