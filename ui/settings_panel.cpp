#include "ui/settings_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>

namespace seedvae::ui {

namespace {

QSpinBox* make_spin(QWidget* parent, int lo, int hi, int step, const QString& suffix,
                    const QString& tip) {
  auto* s = new QSpinBox(parent);
  s->setRange(lo, hi);
  s->setSingleStep(step);
  s->setSuffix(suffix);
  s->setToolTip(tip);
  s->setKeyboardTracking(false);
  return s;
}

QString precision_tooltip(const QString& p) {
  if (p == QLatin1String("fp32")) {
    return QObject::tr("fp32: full precision weights and activations. The reference for every "
                       "other mode; the most memory and the slowest on GPUs.");
  }
  if (p == QLatin1String("tf32")) {
    return QObject::tr("tf32: fp32 storage, tensor-core matrix products with 10-bit mantissas. "
                       "Faster convolutions at the same memory; small, measured error.");
  }
  if (p == QLatin1String("fp16")) {
    return QObject::tr("fp16: half the memory of fp32 and tensor-core speed; norm statistics "
                       "and softmax still accumulate in fp32. Risk of overflow on extreme inputs.");
  }
  if (p == QLatin1String("bf16")) {
    return QObject::tr("bf16: half the memory, fp32's range, fewer mantissa bits than fp16 "
                       "(slightly larger error, no overflow).");
  }
  return p;
}

}  // namespace

SettingsPanel::SettingsPanel(std::shared_ptr<const BackendCatalog> catalog, QWidget* parent)
    : QWidget(parent), catalog_(std::move(catalog)), specs_(catalog_->backends()) {
  auto* root = new QVBoxLayout(this);
  root->setContentsMargins(4, 4, 4, 4);
  root->setSpacing(6);

  // ---- engine ----
  auto* engine = new QGroupBox(tr("Engine"), this);
  auto* ef = new QFormLayout(engine);
  ef->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  backend_ = new QComboBox(engine);
  backend_->setObjectName(QStringLiteral("backendCombo"));
  backend_->setToolTip(tr("Which compute backend runs the model. Backends this build lacks are "
                          "listed but disabled, with the reason in their tooltip."));
  for (const BackendSpec& s : specs_) {
    backend_->addItem(s.label, s.name);
    const int i = backend_->count() - 1;
    if (!s.available) {
      backend_->setItemData(i, 0, Qt::UserRole - 1);  // disabled item
      backend_->setItemData(i, s.unavailable_reason, Qt::ToolTipRole);
    }
  }
  refresh_devices_ = new QToolButton(engine);
  refresh_devices_->setIcon(style()->standardIcon(QStyle::SP_BrowserReload));
  refresh_devices_->setToolTip(tr("Ask the devices for their free memory again (the engine thread "
                                  "answers when it is idle)"));
  auto* brow = new QHBoxLayout();
  brow->addWidget(backend_, 1);
  brow->addWidget(refresh_devices_);
  ef->addRow(tr("Backend"), brow);
  device_ = new QComboBox(engine);
  device_->setObjectName(QStringLiteral("deviceCombo"));
  device_->setToolTip(tr("The device the backend runs on, with its free memory when last asked."));
  device_label_ = new QLabel(tr("Device"), engine);
  ef->addRow(device_label_, device_);
  precision_ = new QComboBox(engine);
  precision_->setObjectName(QStringLiteral("precisionCombo"));
  precision_->setToolTip(tr("Precision of weights and activations on the backend."));
  ef->addRow(tr("Precision"), precision_);
  root->addWidget(engine);

  // ---- toggles ----
  toggles_box_ = new QGroupBox(tr("Engine toggles"), this);
  toggles_form_ = new QFormLayout(toggles_box_);
  toggles_form_->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  no_toggles_ = new QLabel(tr("This backend has no toggles."), toggles_box_);
  toggles_form_->addRow(no_toggles_);
  root->addWidget(toggles_box_);

  // ---- tiling ----
  auto* tiling = new QGroupBox(tr("Spatial tiling"), this);
  auto* tf = new QFormLayout(tiling);
  tf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  tiling_ = new QComboBox(tiling);
  tiling_->setObjectName(QStringLiteral("tilingCombo"));
  tiling_->addItem(tr("off"), QStringLiteral("off"));
  tiling_->setItemData(0, tr("The whole frame at once: exact, fastest, and the most memory."),
                       Qt::ToolTipRole);
  tiling_->addItem(tr("blend"), QStringLiteral("blend"));
  tiling_->setItemData(1, tr("Reference-compatible tiling (as the SeedVR2 ports): tiles are "
                             "processed independently and cross-faded in the overlap. Bounded "
                             "memory; seams and colour drift are possible."),
                       Qt::ToolTipRole);
  tiling_->addItem(tr("exact"), QStringLiteral("exact"));
  tiling_->setItemData(2, tr("Seam-free tiling: the untiled result with a tile's worth of "
                             "activations on the device (GroupNorm statistics and attention "
                             "over the whole frame). Slower than blend; host memory holds "
                             "whole-frame layer inputs."),
                       Qt::ToolTipRole);
  tiling_->setToolTip(tr("How frames larger than the memory allows are split. Hover the items "
                         "for what each costs."));
  tf->addRow(tr("Mode"), tiling_);
  layout_ = new QComboBox(tiling);
  layout_->setObjectName(QStringLiteral("layoutCombo"));
  layout_->addItem(tr("reference"), QStringLiteral("reference"));
  layout_->addItem(tr("uniform"), QStringLiteral("uniform"));
  layout_->setToolTip(tr("Blend mode's grid. reference: the upstream port's grid, bit-compatible "
                         "with its output (border tiles are smaller). uniform: every tile has "
                         "the same shape (the last one shifted inward), so GPU plans are reused; "
                         "weights form an exact partition of unity."));
  tf->addRow(tr("Layout"), layout_);
  auto* tile_row = new QHBoxLayout();
  tile_w_ = make_spin(tiling, 16, 8192, 16, tr(" px"), tr("Tile width in output pixels. Larger: fewer seams and less overhead, more memory."));
  tile_w_->setObjectName(QStringLiteral("tileWidth"));
  tile_h_ = make_spin(tiling, 16, 8192, 16, tr(" px"), tr("Tile height in output pixels."));
  tile_h_->setObjectName(QStringLiteral("tileHeight"));
  tile_row->addWidget(tile_w_);
  tile_row->addWidget(new QLabel(QStringLiteral("×"), tiling));
  tile_row->addWidget(tile_h_);
  tf->addRow(tr("Tile"), tile_row);
  auto* ov_row = new QHBoxLayout();
  overlap_w_ = make_spin(tiling, 0, 2048, 8, tr(" px"), tr("Horizontal overlap between blended tiles in output pixels. More overlap: softer seams, more repeated work. Exact mode needs none."));
  overlap_h_ = make_spin(tiling, 0, 2048, 8, tr(" px"), tr("Vertical overlap between blended tiles."));
  ov_row->addWidget(overlap_w_);
  ov_row->addWidget(new QLabel(QStringLiteral("×"), tiling));
  ov_row->addWidget(overlap_h_);
  tf->addRow(tr("Overlap"), ov_row);
  keep_weights_ = new QCheckBox(tr("Keep all weights resident"), tiling);
  keep_weights_->setToolTip(tr("Exact mode: keep every layer's weights on the device for the "
                               "whole run (faster: no re-uploads) instead of uploading each "
                               "layer's weights while it runs (less memory)."));
  tf->addRow(QString(), keep_weights_);
  tiling_note_ = new QLabel(tiling);
  tiling_note_->setWordWrap(true);
  tiling_note_->setStyleSheet(QStringLiteral("color: palette(mid);"));
  tf->addRow(tiling_note_);
  root->addWidget(tiling);

  // ---- streaming ----
  auto* streaming = new QGroupBox(tr("Temporal streaming and padding"), this);
  auto* sf = new QFormLayout(streaming);
  sf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  chunk_ = make_spin(streaming, 0, 4096, 1, QString(),
                     tr("Latent frames per temporal chunk (1 latent = 4 video frames; the first "
                        "chunk has one more). The result is the same for every chunk size; "
                        "smaller chunks hold less memory and show frames sooner, larger chunks "
                        "have less per-chunk overhead. 0 runs the whole clip at once."));
  chunk_->setObjectName(QStringLiteral("chunkSpin"));
  chunk_->setSpecialValueText(tr("whole clip"));
  sf->addRow(tr("Temporal chunk"), chunk_);
  hires_ = make_spin(streaming, 0, 4096, 1, QString(),
                     tr("Chunked upsampling: run the high-resolution stages at full frame rate "
                        "(decoder after its last temporal upsampling, encoder before its first "
                        "temporal downsampling) this many frames at a time, carrying the causal "
                        "state between pieces (not used by exact tiling, which has its own "
                        "layer-by-layer schedule). Same output; less memory (1080p bf16 on an H100: "
                        "encode peak 15.0 -> 11.7 GiB with 1 frame) for a few percent more time. "
                        "0 = off."));
  hires_->setObjectName(QStringLiteral("hiresChunkSpin"));
  hires_->setSpecialValueText(tr("off"));
  sf->addRow(tr("High-res pieces (frames)"), hires_);
  prefetch_ = new QCheckBox(tr("Frame prefetch"), streaming);
  prefetch_->setObjectName(QStringLiteral("prefetchCheck"));
  sf->addRow(QString(), prefetch_);
  async_tiles_ = new QCheckBox(tr("Async tiles (overlap copies with compute)"), streaming);
  async_tiles_->setObjectName(QStringLiteral("asyncTilesCheck"));
  sf->addRow(QString(), async_tiles_);
  lone_head_ = new QCheckBox(tr("Lone head chunk"), streaming);
  lone_head_->setObjectName(QStringLiteral("loneHeadCheck"));
  lone_head_->setToolTip(tr("The first temporal chunk is frame 0 alone, then chunks of the size "
                            "above, instead of a first chunk with one latent more: no chunk is "
                            "larger than the others, which lowers the decode's peak once the lean "
                            "convolutions are on. Same output."));
  sf->addRow(QString(), lone_head_);
  lean_convs_ = new QCheckBox(tr("Lean convolutions"), streaming);
  lean_convs_->setObjectName(QStringLiteral("leanConvsCheck"));
  lean_convs_->setToolTip(tr("The decoder's causal convolutions never build their "
                             "context-extended input (two convolution calls and a few frame copies "
                             "each). Same output; less memory, a few percent more time. With the "
                             "lone head chunk and the CUDA state offload, a 1080p decode peaks at "
                             "about 11.7 GiB (docs/gpu-notes.md §9). Not used while CUDA graphs "
                             "record chunks (they update the causal state in place)."));
  sf->addRow(QString(), lean_convs_);
  temporal_pad_ = new QComboBox(streaming);
  temporal_pad_->addItem(tr("mirror"), QStringLiteral("mirror"));
  temporal_pad_->addItem(tr("repeat last"), QStringLiteral("repeat-last"));
  temporal_pad_->setToolTip(tr("How the clip is padded to 4n+1 frames (removed after decoding): "
                               "mirror as the ComfyUI port, or repeat the last frame as the "
                               "official code."));
  sf->addRow(tr("Temporal padding"), temporal_pad_);
  multiple_ = new QComboBox(streaming);
  multiple_->addItem(QStringLiteral("8"), 8);
  multiple_->addItem(QStringLiteral("16"), 16);
  multiple_->setToolTip(tr("Frames are padded right/bottom to a multiple of this (8 suffices "
                           "for the VAE; 16 matches the SeedVR2 upscaler)."));
  sf->addRow(tr("Spatial multiple"), multiple_);
  root->addWidget(streaming);

  // ---- memory ----
  auto* memory = new QGroupBox(tr("Memory"), this);
  auto* mf = new QFormLayout(memory);
  mf->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
  budget_ = new QDoubleSpinBox(memory);
  budget_->setObjectName(QStringLiteral("budgetSpin"));
  budget_->setRange(0, 4096);
  budget_->setDecimals(1);
  budget_->setSingleStep(0.5);
  budget_->setSuffix(tr(" GiB"));
  budget_->setSpecialValueText(tr("free memory"));
  budget_->setKeyboardTracking(false);
  budget_->setToolTip(tr("The most memory this run may use. The prediction is checked against "
                         "the smaller of this budget and the free memory of the device."));
  mf->addRow(tr("Budget"), budget_);
  predicted_ = new QLabel(tr("—"), memory);
  predicted_->setObjectName(QStringLiteral("predictedLabel"));
  predicted_->setWordWrap(true);
  predicted_->setToolTip(tr("Predicted peak from a dry run of the model on the chosen frame "
                            "size and settings (shapes only, no arithmetic)."));
  mf->addRow(tr("Predicted peak"), predicted_);
  available_ = new QLabel(tr("—"), memory);
  available_->setWordWrap(true);
  mf->addRow(tr("Available"), available_);
  fit_bar_ = new QProgressBar(memory);
  fit_bar_->setObjectName(QStringLiteral("fitBar"));
  fit_bar_->setRange(0, 100);
  fit_bar_->setTextVisible(true);
  mf->addRow(fit_bar_);
  warning_ = new QLabel(memory);
  warning_->setObjectName(QStringLiteral("memoryWarning"));
  warning_->setWordWrap(true);
  warning_->setStyleSheet(QStringLiteral("color: #c0392b; font-weight: bold;"));
  warning_->hide();
  mf->addRow(warning_);
  fit_ = new QPushButton(tr("Fit tile and chunk to the memory"), memory);
  fit_->setObjectName(QStringLiteral("fitButton"));
  fit_->setToolTip(tr("Ask the planner for the largest tile and temporal chunk whose predicted peak "
                      "fits the budget (or the free memory). An untiled setting switches to exact "
                      "tiling, which gives the untiled result."));
  connect(fit_, &QPushButton::clicked, this, &SettingsPanel::fitToBudgetRequested);
  mf->addRow(fit_);
  root->addWidget(memory);

  // ---- presets ----
  auto* presets = new QGroupBox(tr("Presets"), this);
  auto* pl = new QVBoxLayout(presets);
  presets_ = new QComboBox(presets);
  presets_->setObjectName(QStringLiteral("presetCombo"));
  presets_->setToolTip(tr("Named settings saved as JSON files"));
  pl->addWidget(presets_);
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
  pb->addWidget(preset_load_);
  pb->addWidget(preset_save_);
  pb->addWidget(preset_delete_);
  pb->addWidget(more);
  pl->addLayout(pb);
  root->addWidget(presets);
  root->addStretch(1);

  // ---- wiring ----
  connect(backend_, &QComboBox::currentIndexChanged, this, [this] {
    if (updating_) return;
    const QString name = backend_->currentData().toString();
    rebuildBackendOptions(name);
    emit backendChanged(name);
    emitChanged();
  });
  connect(refresh_devices_, &QToolButton::clicked, this, &SettingsPanel::refreshDevicesRequested);
  for (QComboBox* c : {device_, precision_, tiling_, layout_, temporal_pad_, multiple_}) {
    connect(c, &QComboBox::currentIndexChanged, this, [this] {
      updateTilingEnabled();
      emitChanged();
    });
  }
  for (QSpinBox* s : {tile_w_, tile_h_, overlap_w_, overlap_h_, chunk_, hires_}) {
    connect(s, &QSpinBox::valueChanged, this, &SettingsPanel::emitChanged);
  }
  connect(chunk_, &QSpinBox::valueChanged, this, &SettingsPanel::updateTilingEnabled);
  connect(keep_weights_, &QCheckBox::toggled, this, &SettingsPanel::emitChanged);
  connect(prefetch_, &QCheckBox::toggled, this, &SettingsPanel::emitChanged);
  connect(async_tiles_, &QCheckBox::toggled, this, &SettingsPanel::emitChanged);
  connect(lone_head_, &QCheckBox::toggled, this, &SettingsPanel::emitChanged);
  connect(lean_convs_, &QCheckBox::toggled, this, &SettingsPanel::emitChanged);
  connect(budget_, &QDoubleSpinBox::valueChanged, this, [this] {
    updateMemory();
    emitChanged();
  });
  connect(preset_load_, &QPushButton::clicked, this, [this] {
    if (!presets_->currentText().isEmpty()) emit loadPresetRequested(presets_->currentText());
  });
  connect(preset_save_, &QPushButton::clicked, this, &SettingsPanel::savePresetRequested);
  connect(preset_delete_, &QPushButton::clicked, this, [this] {
    if (!presets_->currentText().isEmpty()) emit deletePresetRequested(presets_->currentText());
  });

  setSettings(catalog_->normalized(EngineSettings{}));
  setPresetNames({});
}

const BackendSpec* SettingsPanel::currentSpec() const {
  return catalog_->find(specs_, backend_->currentData().toString());
}

void SettingsPanel::rebuildBackendOptions(const QString& backend) {
  const BackendSpec* spec = catalog_->find(specs_, backend);
  if (!spec) return;
  const bool was = updating_;
  updating_ = true;
  precision_->clear();
  for (const QString& p : spec->precisions) {
    precision_->addItem(p, p);
    precision_->setItemData(precision_->count() - 1, precision_tooltip(p), Qt::ToolTipRole);
  }
  precision_->setCurrentIndex(0);  // the backend's default; setSettings() then applies a saved one
  precision_->setEnabled(spec->precisions.size() > 1);
  device_->setVisible(spec->has_devices);
  device_label_->setVisible(spec->has_devices);
  refresh_devices_->setVisible(true);
  QMap<QString, QVariant> values;
  for (const ToggleSpec& t : spec->toggles) values.insert(t.key, t.default_value);
  rebuildToggles(*spec, values);
  updating_ = was;
  updateMemory();
}

void SettingsPanel::rebuildToggles(const BackendSpec& spec, const QMap<QString, QVariant>& values) {
  while (toggles_form_->rowCount() > 0) toggles_form_->removeRow(0);  // deletes the widgets
  toggle_widgets_.clear();
  toggle_specs_.clear();
  no_toggles_ = nullptr;
  if (spec.toggles.isEmpty()) {
    no_toggles_ = new QLabel(tr("This backend has no toggles."), toggles_box_);
    toggles_form_->addRow(no_toggles_);
  }
  for (const ToggleSpec& t : spec.toggles) {
    const QVariant v = values.value(t.key, t.default_value);
    QWidget* w = nullptr;
    switch (t.kind) {
      case ToggleSpec::Kind::kBool: {
        auto* c = new QCheckBox(t.label, toggles_box_);
        c->setChecked(v.toBool());
        connect(c, &QCheckBox::toggled, this, &SettingsPanel::emitChanged);
        toggles_form_->addRow(c);
        w = c;
        break;
      }
      case ToggleSpec::Kind::kChoice: {
        auto* c = new QComboBox(toggles_box_);
        for (const QString& choice : t.choices) c->addItem(choice, choice);
        const int i = c->findData(v.toString());
        c->setCurrentIndex(i >= 0 ? i : 0);
        connect(c, &QComboBox::currentIndexChanged, this, &SettingsPanel::emitChanged);
        toggles_form_->addRow(t.label, c);
        w = c;
        break;
      }
      case ToggleSpec::Kind::kInt: {
        auto* s = new QSpinBox(toggles_box_);
        s->setRange(t.minimum, t.maximum);
        s->setSpecialValueText(t.special_value_text);
        s->setValue(v.toInt());
        s->setKeyboardTracking(false);
        connect(s, &QSpinBox::valueChanged, this, &SettingsPanel::emitChanged);
        toggles_form_->addRow(t.label, s);
        w = s;
        break;
      }
    }
    w->setObjectName(QStringLiteral("toggle_") + t.key);
    w->setToolTip(t.tooltip);
    if (QWidget* label = toggles_form_->labelForField(w)) label->setToolTip(t.tooltip);
    toggle_widgets_.insert(t.key, w);
    toggle_specs_.insert(t.key, t);
  }
}

QWidget* SettingsPanel::toggleWidget(const QString& key) const { return toggle_widgets_.value(key); }

void SettingsPanel::setSampleInput(bool sample) {
  if (sample_input_ == sample) return;
  sample_input_ = sample;
  updateTilingEnabled();
}

EngineSettings SettingsPanel::settings() const {
  EngineSettings s;
  s.backend = backend_->currentData().toString();
  s.device = device_->currentData().isValid() ? device_->currentData().toInt() : 0;
  s.precision = precision_->currentData().toString();
  for (auto it = toggle_widgets_.begin(); it != toggle_widgets_.end(); ++it) {
    const ToggleSpec& t = toggle_specs_[it.key()];
    switch (t.kind) {
      case ToggleSpec::Kind::kBool: s.toggles[it.key()] = static_cast<QCheckBox*>(*it)->isChecked(); break;
      case ToggleSpec::Kind::kChoice: s.toggles[it.key()] = static_cast<QComboBox*>(*it)->currentData().toString(); break;
      case ToggleSpec::Kind::kInt: s.toggles[it.key()] = static_cast<QSpinBox*>(*it)->value(); break;
    }
  }
  s.tiling = tiling_mode_from_name(tiling_->currentData().toString());
  s.tile_layout = layout_->currentData().toString();
  s.tile_width = tile_w_->value();
  s.tile_height = tile_h_->value();
  s.overlap_width = overlap_w_->value();
  s.overlap_height = overlap_h_->value();
  s.exact_keep_weights = keep_weights_->isChecked();
  s.chunk_latents = chunk_->value();
  s.hires_chunk_frames = hires_->value();
  s.prefetch = prefetch_->isChecked();
  s.async_tiles = async_tiles_->isChecked();
  s.lone_head = lone_head_->isChecked();
  s.lean_convs = lean_convs_->isChecked();
  s.temporal_pad = temporal_pad_->currentData().toString();
  s.spatial_multiple = multiple_->currentData().toInt();
  s.budget_mib = static_cast<int>(budget_->value() * 1024.0 + 0.5);
  return s;
}

void SettingsPanel::setSettings(const EngineSettings& in) {
  const EngineSettings s = catalog_->normalized(in);
  updating_ = true;
  const int bi = backend_->findData(s.backend);
  if (bi >= 0) backend_->setCurrentIndex(bi);
  rebuildBackendOptions(s.backend);
  updating_ = true;
  if (const BackendSpec* spec = currentSpec()) rebuildToggles(*spec, s.toggles);
  const int di = device_->findData(s.device);
  if (di >= 0) device_->setCurrentIndex(di);
  const int pi = precision_->findData(s.precision);
  if (pi >= 0) precision_->setCurrentIndex(pi);
  tiling_->setCurrentIndex(std::max(0, tiling_->findData(tiling_mode_name(s.tiling))));
  layout_->setCurrentIndex(std::max(0, layout_->findData(s.tile_layout)));
  tile_w_->setValue(s.tile_width);
  tile_h_->setValue(s.tile_height);
  overlap_w_->setValue(s.overlap_width);
  overlap_h_->setValue(s.overlap_height);
  keep_weights_->setChecked(s.exact_keep_weights);
  chunk_->setValue(s.chunk_latents);
  hires_->setValue(s.hires_chunk_frames);
  prefetch_->setChecked(s.prefetch);
  async_tiles_->setChecked(s.async_tiles);
  lone_head_->setChecked(s.lone_head);
  lean_convs_->setChecked(s.lean_convs);
  temporal_pad_->setCurrentIndex(std::max(0, temporal_pad_->findData(s.temporal_pad)));
  multiple_->setCurrentIndex(std::max(0, multiple_->findData(s.spatial_multiple)));
  budget_->setValue(s.budget_mib / 1024.0);
  updating_ = false;
  updateTilingEnabled();
  updateMemory();
}

void SettingsPanel::updateTilingEnabled() {
  const QString mode = tiling_->currentData().toString();
  const bool blend = mode == QLatin1String("blend");
  const bool exact = mode == QLatin1String("exact");
  layout_->setEnabled(blend);
  tile_w_->setEnabled(blend || exact);
  tile_h_->setEnabled(blend || exact);
  overlap_w_->setEnabled(blend);
  overlap_h_->setEnabled(blend);
  keep_weights_->setEnabled(exact);
  hires_->setEnabled(!exact);  // exact tiling has its own layer-by-layer schedule
  lone_head_->setEnabled(!exact);  // (and its own chunking and convolutions)
  lean_convs_->setEnabled(!exact);
  // Frame prefetch feeds the untiled temporal stream of a file: disabled (the setting is kept)
  // with the reason in the tooltip elsewhere.
  EngineSettings cur;
  cur.tiling = tiling_mode_from_name(mode);
  cur.chunk_latents = chunk_->value();
  const QString why = prefetch_unavailable_reason(cur, sample_input_);
  const QString what =
      tr("Read and convert the input's frames on their own thread, a couple of temporal chunks "
         "ahead of the encoder, so the first chunk is encoded while later frames are still being "
         "decoded. The same output (bit for bit); the run's summary and report show the read time "
         "it overlapped. Applies to a video file or image sequence run untiled in temporal "
         "chunks; not to blend or exact tiling (every tile needs the whole clip), the built-in "
         "sample clip (nothing to read) or a whole-clip chunk. A clip still in memory from the "
         "previous run is not read again.");
  prefetch_->setEnabled(why.isEmpty());
  prefetch_->setToolTip(why.isEmpty() ? what : tr("Not available: %1.\n\n%2").arg(why, what));
  // Async tiles: untiled streaming and blend tiling; disabled (the setting is kept) under exact
  // tiling, with the reason in the tooltip.
  const QString async_why = async_tiles_unavailable_reason(cur);
  const QString async_what =
      tr("Queue the next temporal chunk or tile on the device before the host has finished the "
         "previous one (download, blend, preview), so copies and host work overlap the compute. "
         "The same output bit for bit, with frames arriving one step later; no change in time on "
         "the CPU backend (its copies are synchronous), and not used by exact tiling.");
  async_tiles_->setEnabled(async_why.isEmpty());
  async_tiles_->setToolTip(async_why.isEmpty() ? async_what
                                               : tr("Not available: %1.\n\n%2").arg(async_why, async_what));
  if (mode == QLatin1String("off")) {
    tiling_note_->setText(tr("Untiled: the whole frame goes through the model at once."));
  } else if (blend) {
    tiling_note_->setText(tr("Blend: tiles overlap by the given pixels and are cross-faded; "
                             "compare against an untiled A/B run to see the seams."));
  } else {
    tiling_note_->setText(tr("Exact: the untiled output, a tile's activations at a time."));
  }
}

void SettingsPanel::setDevices(const QString& backend, const QVector<DeviceStatus>& devices) {
  devices_backend_ = backend;
  devices_ = devices;
  if (backend == backend_->currentData().toString()) {
    const bool was = updating_;
    updating_ = true;
    const int cur = device_->currentData().isValid() ? device_->currentData().toInt() : 0;
    device_->clear();
    for (const DeviceStatus& d : devices) {
      device_->addItem(QStringLiteral("%1: %2").arg(d.index).arg(d.name), d.index);
      device_->setItemData(device_->count() - 1,
                           tr("%1 free of %2").arg(format_bytes(d.free_bytes), format_bytes(d.total_bytes)),
                           Qt::ToolTipRole);
    }
    const int i = device_->findData(cur);
    device_->setCurrentIndex(i >= 0 ? i : 0);
    updating_ = was;
  }
  updateMemory();
}

void SettingsPanel::setPrediction(const Prediction& p) {
  prediction_ = p;
  updateMemory();
}

qint64 SettingsPanel::availableBytes() const {
  qint64 free = -1;
  if (devices_backend_ == backend_->currentData().toString()) {
    const int dev = device_->currentData().isValid() ? device_->currentData().toInt() : 0;
    for (const DeviceStatus& d : devices_) {
      if (d.index == dev) free = d.free_bytes;
    }
  }
  const qint64 budget = static_cast<qint64>(budget_->value() * 1024.0 * 1024.0 * 1024.0);
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
    QString t = tr("%1%2 = weights %3 + activations %4")
                    .arg(prediction_->approximate ? QStringLiteral("≈ ") : QString())
                    .arg(format_bytes(prediction_->engine_bytes), format_bytes(prediction_->weight_bytes),
                         format_bytes(prediction_->activation_bytes));
    if (host) t += tr("; + host buffers %1").arg(format_bytes(prediction_->host_bytes));
    predicted_->setText(t);
    predicted_->setToolTip(tr("Method: %1. Host buffers: the clip, its padded copy, the decoded "
                              "output and the preview images.")
                               .arg(prediction_->method));
  }
  const qint64 avail = availableBytes();
  QString free_text;
  for (const DeviceStatus& d : devices_) {
    if (devices_backend_ == backend_->currentData().toString() &&
        d.index == (device_->currentData().isValid() ? device_->currentData().toInt() : 0)) {
      free_text = tr("%1 free of %2 (%3)").arg(format_bytes(d.free_bytes), format_bytes(d.total_bytes),
                                               host ? tr("system RAM") : d.name);
    }
  }
  if (budget_->value() > 0) {
    free_text += (free_text.isEmpty() ? QString() : QStringLiteral("; ")) +
                 tr("budget %1").arg(format_bytes(static_cast<qint64>(budget_->value() * 1073741824.0)));
  }
  available_->setText(free_text.isEmpty() ? tr("unknown (asking the device…)") : free_text);
  const qint64 need = neededBytes();
  if (need >= 0 && avail > 0) {
    const double ratio = static_cast<double>(need) / static_cast<double>(avail);
    fit_bar_->setValue(static_cast<int>(std::min(100.0, ratio * 100.0)));
    fit_bar_->setFormat(tr("%1% of available").arg(ratio * 100.0, 0, 'f', ratio < 0.1 ? 1 : 0));
    fit_bar_->setStyleSheet(ratio > 1.0 ? QStringLiteral("QProgressBar::chunk { background: #c0392b; }")
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

QString SettingsPanel::selectedPreset() const { return presets_->currentText(); }

void SettingsPanel::emitChanged() {
  if (updating_) return;
  updateMemory();
  emit settingsChanged(settings());
}

}  // namespace seedvae::ui
