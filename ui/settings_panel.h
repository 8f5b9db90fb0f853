// The settings panel: backend and device, precision, every engine toggle the backend declares
// (built from BackendCatalog data, each with its tooltip), tiling mode / layout / tile / overlap,
// temporal chunk, padding, memory budget, the predicted peak memory against the free memory
// (with a warning when the run will not fit), and named presets.
#pragma once

#include <QWidget>
#include <memory>
#include <optional>

#include "ui/backend_catalog.h"
#include "ui/memory_predictor.h"
#include "ui/studio_types.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QGroupBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QToolButton;

namespace seedvae::ui {

class SettingsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SettingsPanel(std::shared_ptr<const BackendCatalog> catalog, QWidget* parent = nullptr);

  EngineSettings settings() const;
  // Shows `s` (normalised to what the catalog offers) without emitting settingsChanged.
  void setSettings(const EngineSettings& s);
  void setDevices(const QString& backend, const QVector<DeviceStatus>& devices);
  void setPrediction(const Prediction& p);
  void setPresetNames(const QStringList& names);
  QString selectedPreset() const;

  // Memory the run may use: the smaller of the free memory and the budget; -1 when unknown.
  qint64 availableBytes() const;
  // Bytes the prediction says the run needs (engine, plus host buffers for host-memory backends).
  qint64 neededBytes() const;
  bool fits() const;            // true when unknown
  QString fitWarning() const;   // empty when it fits
  QWidget* toggleWidget(const QString& key) const;
  // Whether the current input is the built-in sample clip (frame prefetch does not apply to it).
  void setSampleInput(bool sample);
  QCheckBox* prefetchCheck() const { return prefetch_; }
  QCheckBox* asyncTilesCheck() const { return async_tiles_; }
  QCheckBox* loneHeadCheck() const { return lone_head_; }
  QCheckBox* leanConvsCheck() const { return lean_convs_; }

 signals:
  void settingsChanged(seedvae::ui::EngineSettings settings);
  void backendChanged(QString backend);
  void refreshDevicesRequested();
  void savePresetRequested();
  void loadPresetRequested(QString name);
  void deletePresetRequested(QString name);
  void importPresetRequested();
  void exportPresetRequested();
  void fitToBudgetRequested();

 private:
  void rebuildBackendOptions(const QString& backend);
  void rebuildToggles(const BackendSpec& spec, const QMap<QString, QVariant>& values);
  void updateTilingEnabled();
  void updateMemory();
  void emitChanged();
  const BackendSpec* currentSpec() const;

  std::shared_ptr<const BackendCatalog> catalog_;
  QVector<BackendSpec> specs_;
  bool updating_ = false;

  QComboBox* backend_;
  QComboBox* device_;
  QLabel* device_label_;
  QToolButton* refresh_devices_;
  QComboBox* precision_;
  QGroupBox* toggles_box_;
  QFormLayout* toggles_form_;
  QLabel* no_toggles_;
  QMap<QString, QWidget*> toggle_widgets_;
  QMap<QString, ToggleSpec> toggle_specs_;

  QComboBox* tiling_;
  QComboBox* layout_;
  QSpinBox* tile_w_;
  QSpinBox* tile_h_;
  QSpinBox* overlap_w_;
  QSpinBox* overlap_h_;
  QCheckBox* keep_weights_;
  QLabel* tiling_note_;

  QSpinBox* chunk_;
  QSpinBox* hires_;
  QComboBox* temporal_pad_;
  QComboBox* multiple_;
  QCheckBox* prefetch_;
  QCheckBox* async_tiles_;
  QCheckBox* lone_head_;
  QCheckBox* lean_convs_;
  bool sample_input_ = true;

  QDoubleSpinBox* budget_;
  QLabel* predicted_;
  QLabel* available_;
  QProgressBar* fit_bar_;
  QLabel* warning_;
  QPushButton* fit_;

  QComboBox* presets_;
  QPushButton* preset_load_;
  QPushButton* preset_save_;
  QPushButton* preset_delete_;

  QVector<DeviceStatus> devices_;
  QString devices_backend_;
  std::optional<Prediction> prediction_;
};

}  // namespace seedvae::ui
