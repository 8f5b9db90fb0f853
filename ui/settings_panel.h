// The settings panel: one widget per run option (core/pipeline/run_options.h), generated from the
// options table -- its label, its tooltip (the option's help, plus why it does not apply when it
// is disabled), its kind (check box, spin box, combo box, W x H pair) -- grouped like the table,
// with the rows of another backend's options hidden. Every option widget is named
// "opt_<key>". Below them: the predicted peak memory against the free memory (with a warning when
// the run will not fit), the planner's fit, and named presets.
#pragma once

#include <QMap>
#include <QWidget>
#include <memory>
#include <optional>

#include "ui/backend_catalog.h"
#include "ui/memory_predictor.h"
#include "ui/studio_types.h"

class QFormLayout;
class QLabel;
class QProgressBar;
class QPushButton;
class QComboBox;
class QToolButton;

namespace seedvae::ui {

class SettingsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit SettingsPanel(std::shared_ptr<const BackendCatalog> catalog, QWidget* parent = nullptr);

  RunOptions settings() const;
  // Shows `s` (normalised to what the catalog offers) without emitting settingsChanged.
  void setSettings(const RunOptions& s);
  void setDevices(const QString& backend, const QVector<DeviceStatus>& devices);
  void setPrediction(const Prediction& p);
  void setPresetNames(const QStringList& names);
  QString selectedPreset() const;

  // Memory the run may use: the smaller of the free memory and the budget; -1 when unknown.
  qint64 availableBytes() const;
  // Bytes the prediction says the run needs (engine, plus host buffers for host-memory backends).
  qint64 neededBytes() const;
  bool fits() const;           // true when unknown
  QString fitWarning() const;  // empty when it fits
  // The widget of option `key` ("opt_<key>"), nullptr for an unknown key.
  QWidget* optionWidget(std::string_view key) const;
  // Whether the current input is the built-in sample clip (frame prefetch does not apply to it).
  void setSampleInput(bool sample);

 signals:
  void settingsChanged(seedvae::RunOptions settings);
  void backendChanged(QString backend);
  void refreshDevicesRequested();
  void savePresetRequested();
  void loadPresetRequested(QString name);
  void deletePresetRequested(QString name);
  void importPresetRequested();
  void exportPresetRequested();
  void fitToBudgetRequested();

 private:
  struct Row {
    const OptionSpec* spec = nullptr;
    QWidget* widget = nullptr;
    QFormLayout* form = nullptr;
  };
  QWidget* makeWidget(const OptionSpec& spec, QWidget* parent);
  OptionValue readWidget(const Row& row) const;
  void writeWidget(const Row& row, const OptionValue& value);
  void rebuildBackendChoices(const QString& backend);
  void fillDevices();  // the probed devices, wanted_device_ selected when listed
  int chosenDevice() const;
  void updateEnabled();
  void updateMemory();
  void emitChanged();
  const BackendSpec* currentSpec() const;
  QString currentBackend() const;

  std::shared_ptr<const BackendCatalog> catalog_;
  QVector<BackendSpec> specs_;
  bool updating_ = false;
  bool sample_input_ = true;

  QVector<Row> rows_;
  QFormLayout* memory_form_ = nullptr;  // its group also holds the prediction: always shown
  QMap<QString, int> row_of_;           // option key -> index in rows_
  QComboBox* backend_ = nullptr;
  QComboBox* device_ = nullptr;
  // The device asked for (setSettings or the user): kept while the list does not show it yet
  // (before the first probe, or on the other backend), so a preset's device survives the wait.
  int wanted_device_ = 0;
  // The devices of a pipelined decode (RunOptions::devices): a button whose menu checks the
  // probed devices; its text is the value ("0,1"; empty: one device). Listed indices the probe
  // does not show are kept.
  QToolButton* devices_ = nullptr;
  QString devices_value_;
  void setDevicesValue(const QString& value);
  QComboBox* precision_ = nullptr;
  QToolButton* refresh_devices_ = nullptr;

  QLabel* predicted_;
  QLabel* available_;
  QProgressBar* fit_bar_;
  QLabel* warning_;
  QPushButton* fit_;

  QComboBox* presets_;
  QPushButton* preset_load_;
  QPushButton* preset_save_;
  QPushButton* preset_delete_;

  QVector<DeviceStatus> devices_list_;
  QString devices_backend_;
  std::optional<Prediction> prediction_;
};

}  // namespace seedvae::ui
