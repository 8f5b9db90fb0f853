#include "ui/settings_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <climits>

namespace seedvae::ui {

namespace {

QString qstr(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

int clamp_int(double v) {
  return static_cast<int>(
      std::clamp(v, static_cast<double>(INT_MIN), static_cast<double>(INT_MAX)));
}

// Combo boxes ask for room for `chars` characters, not for their longest item (backend labels,
// device and preset names can be long): they grow with the dock and elide what does not fit; the
// popup and the tooltip show the whole text.
void size_to_contents_length(QComboBox* c, int chars) {
  c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  c->setMinimumContentsLength(chars);
}
constexpr int kNameChars = 12;  // backend, device and preset combo boxes

int longest_choice(const OptionSpec& spec) {
  int n = 1;
  for (std::string_view v : spec.choices) n = std::max(n, static_cast<int>(qstr(v).size()));
  return n;
}

// The option forms: a label and its field side by side, the field taking the rest of the row. The
// rows do not wrap (whatever the style's default): the form's minimum width is then that of its
// widest label and field, which the dock keeps (MainWindow's DockScrollArea), so no field is
// squeezed below its minimum size (QFormLayout::WrapLongRows wraps a row only once its field has
// lost the label spacing's worth of width).
QFormLayout* make_form() {
  auto* form = new QFormLayout();
  form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  form->setRowWrapPolicy(QFormLayout::DontWrapRows);
  return form;
}

QSpinBox* make_spin(QWidget* parent, const OptionSpec& spec) {
  auto* s = new QSpinBox(parent);
  s->setRange(clamp_int(spec.minimum), clamp_int(spec.maximum));
  if (!spec.special_text.empty()) s->setSpecialValueText(qstr(spec.special_text));
  s->setKeyboardTracking(false);
  return s;
}

}  // namespace

SettingsPanel::SettingsPanel(std::shared_ptr<const BackendCatalog> catalog, QWidget* parent)
    : QWidget(parent), catalog_(std::move(catalog)), specs_(catalog_->backends()) {
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(4, 4, 4, 4);
  root->setSpacing(6);

  // One group box per option group, one row per option, in the table's order.
  QMap<int, QFormLayout*> forms;
  QVBoxLayout* memory_box = nullptr;
  for (const OptionSpec& spec : run_option_table()) {
    const int g = static_cast<int>(spec.group);
    if (!forms.contains(g)) {
      auto* box = new QGroupBox(qstr(option_group_name(spec.group)), this);
      auto* box_layout = new QVBoxLayout(box);
      QFormLayout* form = make_form();
      box_layout->addLayout(form);
      forms.insert(g, form);
      root->addWidget(box);
      if (spec.group == OptionGroup::kMemory) {
        memory_box = box_layout;
        memory_form_ = form;
      }
    }
    QFormLayout* form = forms.value(g);
    QWidget* w = makeWidget(spec, form->parentWidget());
    w->setObjectName(QStringLiteral("opt_") + qstr(spec.key));
    if (spec.key == "backend") {
      refresh_devices_ = new QToolButton(form->parentWidget());
      refresh_devices_->setIcon(style()->standardIcon(QStyle::SP_BrowserReload));
      refresh_devices_->setToolTip(
          tr("Ask the devices for their free memory again (the engine "
             "thread answers when it is idle)"));
      auto* row = new QHBoxLayout();
      row->addWidget(w, 1);
      row->addWidget(refresh_devices_);
      form->addRow(qstr(spec.label), row);
    } else if (spec.kind == OptionKind::kBool) {
      form->addRow(w);
    } else {
      form->addRow(qstr(spec.label), w);
    }
    row_of_.insert(qstr(spec.key), static_cast<int>(rows_.size()));
    rows_.push_back({&spec, w, form});
  }

  // ---- memory: prediction against the free memory ----
  predicted_ = new QLabel(tr("—"), this);
  predicted_->setObjectName(QStringLiteral("predictedLabel"));
  predicted_->setWordWrap(true);
  predicted_->setToolTip(
      tr("The planner's prediction for these settings on this input: the model "
         "replayed on shapes only, no arithmetic."));
  available_ = new QLabel(tr("—"), this);
  available_->setObjectName(QStringLiteral("availableLabel"));
  available_->setWordWrap(true);
  fit_bar_ = new QProgressBar(this);
  fit_bar_->setObjectName(QStringLiteral("fitBar"));
  fit_bar_->setRange(0, 100);
  fit_bar_->setTextVisible(true);
  warning_ = new QLabel(this);
  warning_->setObjectName(QStringLiteral("memoryWarning"));
  warning_->setWordWrap(true);
  warning_->setStyleSheet(QStringLiteral("color: #c0392b; font-weight: bold;"));
  warning_->hide();
  fit_ = new QPushButton(tr("Fit tile and chunk to the memory"), this);
  fit_->setObjectName(QStringLiteral("fitButton"));
  fit_->setToolTip(
      tr("Ask the planner for the largest tile and temporal chunk whose predicted "
         "peak fits the budget (or the free memory). An untiled setting switches to "
         "exact tiling, which gives the untiled result."));
  connect(fit_, &QPushButton::clicked, this, &SettingsPanel::fitToBudgetRequested);
  if (memory_box) {
    // Below the memory options, across the group's whole width (the prediction is the longest
    // text of the panel): each text under a caption rather than in a narrow column beside it.
    auto caption = [this](const QString& text) {
      auto* l = new QLabel(text, this);
      QFont bold = l->font();
      bold.setBold(true);
      l->setFont(bold);
      return l;
    };
    memory_box->addWidget(caption(tr("Predicted peak")));
    memory_box->addWidget(predicted_);
    memory_box->addWidget(caption(tr("Available")));
    memory_box->addWidget(available_);
    memory_box->addWidget(fit_bar_);
    memory_box->addWidget(warning_);
    memory_box->addWidget(fit_);
  }

  // ---- presets ----
  auto* presets = new QGroupBox(tr("Presets"), this);
  auto* pl = new QVBoxLayout(presets);
  presets_ = new QComboBox(presets);
  presets_->setObjectName(QStringLiteral("presetCombo"));
  size_to_contents_length(presets_, kNameChars);
  presets_->setToolTip(tr("Named settings saved as JSON files"));
  // Two short rows rather than one long one: the combo box with Load, then the other actions.
  auto* pc = new QHBoxLayout();
  pc->addWidget(presets_, 1);
  pl->addLayout(pc);
  auto* pb = new QHBoxLayout();
  preset_load_ = new QPushButton(tr("Load"), presets);
  preset_save_ = new QPushButton(tr("Save as…"), presets);
  preset_delete_ = new QPushButton(tr("Delete"), presets);
  auto* more = new QToolButton(presets);
  more->setText(tr("…"));
  more->setPopupMode(QToolButton::InstantPopup);
  auto* menu = new QMenu(more);
  menu->addAction(tr("Import preset file…"), this, &SettingsPanel::importPresetRequested);
  menu->addAction(tr("Export settings to file…"), this, &SettingsPanel::exportPresetRequested);
  more->setMenu(menu);
  pc->addWidget(preset_load_);
  pb->addWidget(preset_save_);
  pb->addWidget(preset_delete_);
  pb->addWidget(more);
  pb->addStretch(1);
  pl->addLayout(pb);
  root->addWidget(presets);
  root->addStretch(1);

  // ---- wiring ----
  connect(backend_, &QComboBox::currentIndexChanged, this, [this] {
    if (updating_) return;
    rebuildBackendChoices(currentBackend());
    emit backendChanged(currentBackend());
    updateEnabled();
    emitChanged();
  });
  connect(refresh_devices_, &QToolButton::clicked, this, &SettingsPanel::refreshDevicesRequested);
  connect(preset_load_, &QPushButton::clicked, this, [this] {
    if (!presets_->currentText().isEmpty()) emit loadPresetRequested(presets_->currentText());
  });
  connect(preset_save_, &QPushButton::clicked, this, &SettingsPanel::savePresetRequested);
  connect(preset_delete_, &QPushButton::clicked, this, [this] {
    if (!presets_->currentText().isEmpty()) emit deletePresetRequested(presets_->currentText());
  });

  setSettings(catalog_->normalized(RunOptions()));
  setPresetNames({});
}

QWidget* SettingsPanel::makeWidget(const OptionSpec& spec, QWidget* parent) {
  const QString tip = qstr(spec.help);
  auto changed = [this] {
    if (updating_) return;
    updateEnabled();
    emitChanged();
  };
  QWidget* w = nullptr;
  if (spec.key == "backend") {
    backend_ = new QComboBox(parent);
    size_to_contents_length(backend_, kNameChars);
    for (const BackendSpec& s : specs_) {
      backend_->addItem(s.label, s.name);
      const int i = backend_->count() - 1;
      if (!s.available) {
        backend_->setItemData(i, 0, Qt::UserRole - 1);  // disabled item
        backend_->setItemData(i, s.unavailable_reason, Qt::ToolTipRole);
      }
    }
    w = backend_;
  } else if (spec.key == "device") {
    device_ = new QComboBox(parent);  // filled by setDevices()
    size_to_contents_length(device_, kNameChars);
    connect(device_, &QComboBox::currentIndexChanged, this, [this, changed] {
      if (!updating_ && device_->currentData().isValid())
        wanted_device_ = device_->currentData().toInt();
      changed();
    });
    w = device_;
  } else if (spec.key == "devices") {
    devices_ = new QToolButton(parent);  // its menu filled by setDevices()
    devices_->setPopupMode(QToolButton::InstantPopup);
    devices_->setMenu(new QMenu(devices_));
    connect(devices_->menu(), &QMenu::triggered, this, [this, changed](QAction* a) {
      // toggle the device in the list, keeping the others (listed or not) in ascending order
      QList<int> chosen;
      for (const QString& t : devices_value_.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        chosen << t.toInt();
      }
      const int d = a->data().toInt();
      if (a->isChecked() && !chosen.contains(d)) chosen << d;
      if (!a->isChecked()) chosen.removeAll(d);
      std::sort(chosen.begin(), chosen.end());
      QStringList parts;
      for (int c : chosen) parts << QString::number(c);
      setDevicesValue(parts.join(QLatin1Char(',')));
      changed();
    });
    setDevicesValue(QString());
    w = devices_;
  } else if (spec.key == "precision") {
    precision_ = new QComboBox(parent);  // the backend's precisions (rebuildBackendChoices)
    size_to_contents_length(precision_, 4);
    connect(precision_, &QComboBox::currentIndexChanged, this, changed);
    w = precision_;
  } else {
    switch (spec.kind) {
      case OptionKind::kBool: {
        auto* c = new QCheckBox(qstr(spec.label), parent);
        connect(c, &QCheckBox::toggled, this, changed);
        w = c;
        break;
      }
      case OptionKind::kInt:
        if (!spec.choices.empty()) {
          auto* c = new QComboBox(parent);
          size_to_contents_length(c, longest_choice(spec));
          for (std::string_view v : spec.choices) c->addItem(qstr(v), qstr(v).toInt());
          connect(c, &QComboBox::currentIndexChanged, this, changed);
          w = c;
        } else {
          QSpinBox* s = make_spin(parent, spec);
          connect(s, &QSpinBox::valueChanged, this, changed);
          w = s;
        }
        break;
      case OptionKind::kReal: {
        auto* s = new QDoubleSpinBox(parent);
        s->setRange(spec.minimum, std::min(spec.maximum, 1e6));
        s->setDecimals(1);
        s->setSingleStep(0.5);
        if (!spec.special_text.empty()) s->setSpecialValueText(qstr(spec.special_text));
        s->setKeyboardTracking(false);
        connect(s, &QDoubleSpinBox::valueChanged, this, [this, changed] {
          updateMemory();
          changed();
        });
        w = s;
        break;
      }
      case OptionKind::kChoice: {
        auto* c = new QComboBox(parent);
        size_to_contents_length(c, longest_choice(spec));  // fixed choices: never elided
        for (std::string_view v : spec.choices) c->addItem(qstr(v), qstr(v));
        connect(c, &QComboBox::currentIndexChanged, this, changed);
        w = c;
        break;
      }
      case OptionKind::kText: {
        auto* e = new QLineEdit(parent);
        connect(e, &QLineEdit::editingFinished, this, changed);
        w = e;
        break;
      }
      case OptionKind::kSize: {
        // W x H: two spin boxes in a row; 0 reads as the option's special text ("auto").
        auto* box = new QWidget(parent);
        auto* l = new QHBoxLayout(box);
        l->setContentsMargins(0, 0, 0, 0);
        QSpinBox* sw = make_spin(box, spec);
        QSpinBox* sh = make_spin(box, spec);
        sw->setObjectName(QStringLiteral("width"));
        sh->setObjectName(QStringLiteral("height"));
        for (QSpinBox* s : {sw, sh}) {
          s->setSingleStep(8);
          s->setSuffix(tr(" px"));
          connect(s, &QSpinBox::valueChanged, this, changed);
        }
        l->addWidget(sw);
        l->addWidget(new QLabel(QStringLiteral("×"), box));
        l->addWidget(sh);
        w = box;
        break;
      }
    }
  }
  w->setToolTip(tip);
  return w;
}

OptionValue SettingsPanel::readWidget(const Row& row) const {
  const OptionSpec& spec = *row.spec;
  QWidget* w = row.widget;
  switch (spec.kind) {
    case OptionKind::kBool: return static_cast<QCheckBox*>(w)->isChecked();
    case OptionKind::kInt: {
      if (auto* c = qobject_cast<QComboBox*>(w)) {
        return c->currentData().isValid() ? c->currentData().toInt() : 0;
      }
      return static_cast<QSpinBox*>(w)->value();
    }
    case OptionKind::kReal: return static_cast<QDoubleSpinBox*>(w)->value();
    case OptionKind::kChoice: {
      auto* c = static_cast<QComboBox*>(w);
      return c->currentData().toString().toStdString();
    }
    case OptionKind::kText:
      if (w == devices_) return devices_value_.toStdString();
      return static_cast<QLineEdit*>(w)->text().toStdString();
    case OptionKind::kSize:
      return PixelSize{w->findChild<QSpinBox*>(QStringLiteral("width"))->value(),
                       w->findChild<QSpinBox*>(QStringLiteral("height"))->value()};
  }
  return false;
}

void SettingsPanel::writeWidget(const Row& row, const OptionValue& value) {
  QWidget* w = row.widget;
  if (auto* check = qobject_cast<QCheckBox*>(w)) {
    check->setChecked(std::get<bool>(value));
  } else if (auto* combo = qobject_cast<QComboBox*>(w)) {
    const QVariant data = std::holds_alternative<int>(value)
                              ? QVariant(std::get<int>(value))
                              : QVariant(QString::fromStdString(std::get<std::string>(value)));
    const int i = combo->findData(data);
    if (i >= 0) combo->setCurrentIndex(i);
  } else if (auto* s = qobject_cast<QSpinBox*>(w)) {
    s->setValue(std::get<int>(value));
  } else if (auto* d = qobject_cast<QDoubleSpinBox*>(w)) {
    d->setValue(std::get<double>(value));
  } else if (w == devices_) {
    setDevicesValue(QString::fromStdString(std::get<std::string>(value)));
  } else if (auto* e = qobject_cast<QLineEdit*>(w)) {
    e->setText(QString::fromStdString(std::get<std::string>(value)));
  } else if (const PixelSize* p = std::get_if<PixelSize>(&value)) {
    w->findChild<QSpinBox*>(QStringLiteral("width"))->setValue(static_cast<int>(p->width));
    w->findChild<QSpinBox*>(QStringLiteral("height"))->setValue(static_cast<int>(p->height));
  }
}

QString SettingsPanel::currentBackend() const {
  return backend_->currentData().toString();
}

const BackendSpec* SettingsPanel::currentSpec() const {
  return catalog_->find(specs_, currentBackend());
}

void SettingsPanel::rebuildBackendChoices(const QString& backend) {
  const BackendSpec* spec = catalog_->find(specs_, backend);
  if (!spec) return;
  const bool was = updating_;
  updating_ = true;
  const QString keep = precision_->currentData().toString();
  precision_->clear();
  for (const QString& p : spec->precisions) precision_->addItem(p, p);
  const int i = precision_->findData(keep);
  precision_->setCurrentIndex(i >= 0 ? i : 0);
  precision_->setEnabled(spec->precisions.size() > 1);
  fillDevices();
  updating_ = was;
}

QWidget* SettingsPanel::optionWidget(std::string_view key) const {
  const int i = row_of_.value(qstr(key), -1);
  return i >= 0 ? rows_[i].widget : nullptr;
}

void SettingsPanel::setSampleInput(bool sample) {
  if (sample_input_ == sample) return;
  sample_input_ = sample;
  updateEnabled();
}

RunOptions SettingsPanel::settings() const {
  RunOptions s;
  for (const Row& row : rows_) {
    if (row.spec->key == "device") continue;
    // Widgets hold values inside the option's range; anything else keeps the default.
    (void)set_option(s, *row.spec, readWidget(row));
  }
  s.device = chosenDevice();
  return s;
}

void SettingsPanel::setSettings(const RunOptions& in) {
  const RunOptions s = catalog_->normalized(in);
  const QString backend_before = currentBackend();
  wanted_device_ = s.device;
  updating_ = true;
  const int bi = backend_->findData(QString::fromStdString(s.backend));
  if (bi >= 0) backend_->setCurrentIndex(bi);
  rebuildBackendChoices(QString::fromStdString(s.backend));
  updating_ = true;
  for (const Row& row : rows_) {
    if (row.spec->key == "backend") continue;
    writeWidget(row, option_value(s, *row.spec));
  }
  updating_ = false;
  updateEnabled();
  updateMemory();
  // another backend: its devices are probed as when the user picks it
  if (currentBackend() != backend_before) emit backendChanged(currentBackend());
}

// Rows of the other backend's options are hidden; options that do not apply to the current
// settings are disabled, with the reason in their tooltip (their value is kept).
void SettingsPanel::updateEnabled() {
  const RunOptions cur = settings();
  const uint8_t mine = cur.backend == "cuda" ? kCudaBackend : kCpuBackend;
  QMap<QFormLayout*, bool> form_shown;  // a group box of hidden rows only is hidden too
  for (const Row& row : rows_) {
    const OptionSpec& spec = *row.spec;
    bool shown = true;  // the backend row is a layout (combo and refresh button): always shown
    if (spec.key == "device" || spec.key == "devices") {
      const BackendSpec* b = currentSpec();
      shown = b && b->has_devices;
    } else if (spec.key != "backend") {
      shown = (spec.backends & mine) != 0;
    }
    if (spec.key != "backend") row.form->setRowVisible(row.widget, shown);
    form_shown[row.form] = form_shown.value(row.form) || shown || row.form == memory_form_;
    QString why = option_unavailable_reason(cur, spec.key);
    if (spec.key == "prefetch" && why.isEmpty() && sample_input_) {
      why = tr("the sample clip is generated in memory: there are no frames to read ahead");
    }
    const bool enabled = why.isEmpty() && (spec.key != "precision" || precision_->count() > 1);
    row.widget->setEnabled(enabled);
    const QString help = qstr(spec.help);
    row.widget->setToolTip(why.isEmpty() ? help : tr("Not available: %1.\n\n%2").arg(why, help));
    if (QWidget* label = row.form->labelForField(row.widget))
      label->setToolTip(row.widget->toolTip());
  }
  for (auto it = form_shown.cbegin(); it != form_shown.cend(); ++it) {
    if (QWidget* box = it.key()->parentWidget()) box->setVisible(it.value());
  }
}

void SettingsPanel::setDevices(const QString& backend, const QVector<DeviceStatus>& devices) {
  devices_backend_ = backend;
  devices_list_ = devices;
  fillDevices();
  updateMemory();
}

// The device combo lists the last probe's devices when they are the current backend's.
int SettingsPanel::chosenDevice() const {
  return device_->currentData().isValid() ? device_->currentData().toInt() : wanted_device_;
}

void SettingsPanel::setDevicesValue(const QString& value) {
  devices_value_ = value;
  devices_->setText(value.isEmpty() ? tr("one device") : value);
  const QStringList chosen = value.split(QLatin1Char(','), Qt::SkipEmptyParts);
  for (QAction* a : devices_->menu()->actions()) {
    a->setChecked(chosen.contains(QString::number(a->data().toInt())));
  }
}

void SettingsPanel::fillDevices() {
  const bool was = updating_;
  updating_ = true;
  devices_->menu()->clear();
  device_->clear();
  if (devices_backend_ == currentBackend()) {
    for (const DeviceStatus& d : devices_list_) {
      const QString memory =
          d.free_bytes >= 0
              ? tr("%1 free of %2").arg(format_bytes(d.free_bytes), format_bytes(d.total_bytes))
              : tr("%1, free memory unknown").arg(format_bytes(d.total_bytes));
      device_->addItem(QStringLiteral("%1: %2 · %3").arg(d.index).arg(d.name, memory), d.index);
      device_->setItemData(device_->count() - 1,
                           QStringLiteral("%1: %2\n%3").arg(d.index).arg(d.name, memory),
                           Qt::ToolTipRole);
      QAction* a = devices_->menu()->addAction(QStringLiteral("%1: %2").arg(d.index).arg(d.name));
      a->setCheckable(true);
      a->setData(d.index);
    }
  }
  setDevicesValue(devices_value_);
  const int i = device_->findData(wanted_device_);
  device_->setCurrentIndex(i >= 0 ? i : 0);
  updating_ = was;
}

void SettingsPanel::setPrediction(const Prediction& p) {
  prediction_ = p;
  updateMemory();
}

qint64 SettingsPanel::availableBytes() const {
  qint64 free = -1;
  if (devices_backend_ == currentBackend()) {
    const int dev = chosenDevice();
    for (const DeviceStatus& d : devices_list_) {
      if (d.index == dev) free = d.free_bytes;
    }
  }
  const auto budget = static_cast<qint64>(seedvae::budget_bytes(settings()));
  if (budget > 0) return free >= 0 ? std::min(free, budget) : budget;
  return free;
}

qint64 SettingsPanel::neededBytes() const {
  if (!prediction_ || !prediction_->ok) return -1;
  const BackendSpec* spec = currentSpec();
  const bool host = spec ? spec->memory_is_host : true;
  return prediction_->engine_bytes + (host ? prediction_->host_bytes : 0);
}

bool SettingsPanel::fits() const {
  const qint64 need = neededBytes(), avail = availableBytes();
  return need < 0 || avail < 0 || need <= avail;
}

QString SettingsPanel::fitWarning() const {
  if (fits()) return {};
  return tr("The predicted peak (%1) exceeds the available memory (%2): this run will probably "
            "fail or swap. Try blend or exact tiling, a smaller tile, a smaller temporal chunk, a "
            "lower precision or a downscale.")
      .arg(format_bytes(neededBytes()), format_bytes(availableBytes()));
}

void SettingsPanel::updateMemory() {
  const BackendSpec* spec = currentSpec();
  const bool host = spec ? spec->memory_is_host : true;
  if (!prediction_) {
    predicted_->setText(tr("— (waiting for input and weights)"));
  } else if (!prediction_->ok) {
    predicted_->setText(tr("not available: %1").arg(prediction_->error));
  } else {
    QString t =
        tr("%1 = weights %2 + activations %3")
            .arg(format_bytes(prediction_->engine_bytes), format_bytes(prediction_->weight_bytes),
                 format_bytes(prediction_->activation_bytes));
    if (host) t += tr("; + host buffers %1").arg(format_bytes(prediction_->host_bytes));
    predicted_->setText(t);
    predicted_->setToolTip(tr("Method: %1. Host buffers: the clip, its padded copy, the decoded "
                              "output and the preview images.")
                               .arg(prediction_->method));
  }
  const qint64 avail = availableBytes();
  const double budget_gb = settings().budget_gb;
  QString free_text;
  for (const DeviceStatus& d : devices_list_) {
    if (devices_backend_ == currentBackend() && d.index == chosenDevice()) {
      free_text = tr("%1 free of %2 (%3)")
                      .arg(format_bytes(d.free_bytes), format_bytes(d.total_bytes),
                           host ? tr("system RAM") : d.name);
    }
  }
  if (budget_gb > 0) {
    free_text += (free_text.isEmpty() ? QString() : QStringLiteral("; ")) +
                 tr("budget %1").arg(format_bytes(static_cast<qint64>(budget_gb * 1073741824.0)));
  }
  available_->setText(free_text.isEmpty() ? tr("unknown (asking the device…)") : free_text);
  const qint64 need = neededBytes();
  if (need >= 0 && avail > 0) {
    const double ratio = static_cast<double>(need) / static_cast<double>(avail);
    fit_bar_->setValue(static_cast<int>(std::min(100.0, ratio * 100.0)));
    fit_bar_->setFormat(tr("%1% of available").arg(ratio * 100.0, 0, 'f', ratio < 0.1 ? 1 : 0));
    fit_bar_->setStyleSheet(
        ratio > 1.0    ? QStringLiteral("QProgressBar::chunk { background: #c0392b; }")
        : ratio > 0.85 ? QStringLiteral("QProgressBar::chunk { background: #e67e22; }")
                       : QStringLiteral("QProgressBar::chunk { background: #27ae60; }"));
    fit_bar_->show();
  } else {
    fit_bar_->hide();
  }
  const QString w = fitWarning();
  warning_->setText(QStringLiteral("⚠ ") + w);
  warning_->setVisible(!w.isEmpty());
}

void SettingsPanel::setPresetNames(const QStringList& names) {
  const QString cur = presets_->currentText();
  presets_->clear();
  presets_->addItems(names);
  const int i = presets_->findText(cur);
  if (i >= 0) presets_->setCurrentIndex(i);
  preset_load_->setEnabled(!names.isEmpty());
  preset_delete_->setEnabled(!names.isEmpty());
}

QString SettingsPanel::selectedPreset() const {
  return presets_->currentText();
}

void SettingsPanel::emitChanged() {
  if (updating_) return;
  updateMemory();
  emit settingsChanged(settings());
}

}  // namespace seedvae::ui
