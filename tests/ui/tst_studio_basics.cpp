// The studio's pieces without a full engine run: settings and presets, QSettings persistence,
// loading good and bad files (dialogs, no crash, no freeze), the settings panel generated from the
// run options table and its memory warning, the bounded channels, the synchronised views, the
// chart series.
#include <QAbstractSpinBox>
#include <QBarSet>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QMenu>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStackedBarSeries>
#include <QToolButton>
#include <QToolTip>
#include <QValueAxis>
#include <QtTest>
#include <cmath>

#include "studio_test_util.h"
#include "ui/channels.h"
#include "ui/charts_panel.h"
#include "ui/compare_view.h"
#include "ui/image_convert.h"
#include "ui/info_panel.h"
#include "ui/memory_predictor.h"
#include "ui/run_controller.h"
#include "ui/settings_panel.h"

using namespace seedvae;
using namespace seedvae::ui;
using namespace seedvae::ui::test;

namespace {

// A catalog with a second backend carrying one toggle of each kind, as a CUDA build would.
// A catalog with a second backend named like the CUDA backend (so its options apply), as a CUDA
// build would offer; creating it is never needed here.
class FakeCatalog : public CpuCatalog {
 public:
  QVector<BackendSpec> backends() const override {
    QVector<BackendSpec> specs = CpuCatalog::backends();
    BackendSpec gpu;
    gpu.name = "cuda";
    gpu.label = "Fake GPU";
    gpu.precisions = {"bf16", "fp16", "fp32"};
    gpu.has_devices = true;
    gpu.memory_is_host = false;
    specs.push_back(gpu);
    return specs;
  }
};

// The fake GPU backend with a device whose name is as long as real ones are, for the layout test.
class FakeDeviceCatalog : public FakeCatalog {
 public:
  QVector<BackendSpec> backends() const override {
    QVector<BackendSpec> specs = FakeCatalog::backends();
    specs.back().label = "CUDA (cuDNN, cuBLAS)";  // the studio's own label
    return specs;
  }
  QVector<DeviceStatus> probe_devices(const QString& backend) const override {
    if (backend != QLatin1String("cuda")) return CpuCatalog::probe_devices(backend);
    return {DeviceStatus{0, "NVIDIA GeForce RTX 4090 Laptop GPU (fake)", 12ll << 30, 16ll << 30}};
  }
};

// The widgets of the settings dock whose content the user might not see: each visible input
// widget, label and button must lie inside the dock's viewport horizontally (or within the reach
// of its horizontal scroll bar), inside every parent between it and the viewport, be at least as
// large as its minimum size hint (a combo box or spin box narrower than that cuts its text) and,
// for a word-wrapped label, as tall as its wrapped text. Returns one line per problem, empty when
// everything fits.
QStringList clipped_in_settings_dock(MainWindow& w) {
  QStringList problems;
  auto* dock = w.findChild<QDockWidget*>("dock_settings");
  auto* area = dock ? qobject_cast<QScrollArea*>(dock->widget()) : nullptr;
  if (!area || !area->widget()) return {"no settings dock with a scroll area"};
  QWidget* viewport = area->viewport();
  QWidget* content = area->widget();
  const QScrollBar* hbar = area->horizontalScrollBar();
  // With a horizontal scroll bar the user reaches the whole content width.
  const int reach =
      viewport->width() + (hbar->isVisible() && hbar->maximum() > 0 ? hbar->maximum() : 0);
  auto name = [](const QWidget* c) {
    QString n = QString::fromLatin1(c->metaObject()->className());
    if (!c->objectName().isEmpty()) n += " " + c->objectName();
    for (const QWidget* p = c->parentWidget(); p; p = p->parentWidget()) {
      if (p->objectName().startsWith("opt_")) return n + " in " + p->objectName();
    }
    if (auto* l = qobject_cast<const QLabel*>(c)) n += " \"" + l->text().left(40) + "\"";
    if (auto* b = qobject_cast<const QAbstractButton*>(c)) n += " \"" + b->text() + "\"";
    return n;
  };
  for (QWidget* c : content->findChildren<QWidget*>()) {
    const bool checked =
        qobject_cast<QComboBox*>(c) || qobject_cast<QAbstractSpinBox*>(c) ||
        qobject_cast<QLabel*>(c) || qobject_cast<QAbstractButton*>(c) ||
        qobject_cast<QProgressBar*>(c) ||
        (qobject_cast<QLineEdit*>(c) && !qobject_cast<QAbstractSpinBox*>(c->parentWidget()) &&
         !qobject_cast<QComboBox*>(c->parentWidget()));
    if (!checked || !c->isVisibleTo(content) || c->width() <= 0) continue;
    const QString what = name(c);
    const int left = c->mapTo(content, QPoint(0, 0)).x();
    if (left < 0 || left + c->width() > reach) {
      problems << QStringLiteral("%1: x %2..%3 outside the dock's 0..%4")
                      .arg(what)
                      .arg(left)
                      .arg(left + c->width())
                      .arg(reach);
    }
    for (QWidget* p = c->parentWidget(); p && p != content; p = p->parentWidget()) {
      const int x = c->mapTo(p, QPoint(0, 0)).x();
      if (x < 0 || x + c->width() > p->width()) {
        problems << QStringLiteral("%1: cut by its parent %2 (x %3..%4 of %5)")
                        .arg(what, QString::fromLatin1(p->metaObject()->className()))
                        .arg(x)
                        .arg(x + c->width())
                        .arg(p->width());
        break;
      }
    }
    const QSize min = c->minimumSizeHint();
    if (min.isValid() && (c->width() < min.width() || c->height() < min.height())) {
      problems << QStringLiteral("%1: %2x%3 px, needs %4x%5")
                      .arg(what)
                      .arg(c->width())
                      .arg(c->height())
                      .arg(min.width())
                      .arg(min.height());
    }
    if (auto* l = qobject_cast<QLabel*>(c); l && l->wordWrap() && !l->text().isEmpty()) {
      const int need = l->heightForWidth(l->width());
      if (need > l->height())
        problems << QStringLiteral("%1: %2 px tall, its text needs %3")
                        .arg(what)
                        .arg(l->height())
                        .arg(need);
    }
  }
  return problems;
}

// Every option at a value other than its default (and valid together).
RunOptions every_option_changed() {
  RunOptions s;
  s.backend = "cuda";
  s.device = 1;
  s.devices = "0,1";
  s.pipeline_cuts = "14";
  s.threads = 3;
  s.precision = "bf16";
  s.fp8_numerics = true;
  s.autotune = false;
  s.graph_api = true;  // kept in presets though autotune is off
  s.autotune_cache = "/tmp/autotune.tsv";
  s.channels_last = false;
  s.fused_gn_silu = false;
  s.fused_attention = false;
  s.caching_allocator = false;
  s.buffer_reuse = false;
  s.fuse_bias = false;
  s.offload_state = true;
  s.offload_window_mib = 256;
  s.cuda_graphs = true;
  s.workspace_mib = 128;
  s.fp16_accumulation = true;  // kept in presets though bf16 does not apply it
  s.fp8_convs = true;
  s.chunk_latents = 2;
  s.hires_chunk_frames = 3;
  s.lone_head = true;
  s.lean_convs = true;
  s.async_tiles = "off";
  s.tiling = "blend";
  s.tile = {320, 192};
  s.overlap = {32, 16};
  s.tile_layout = "uniform";
  s.exact_keep_weights = true;
  s.budget_gb = 4.5;
  s.auto_schedule = false;
  s.prefetch = "off";
  s.temporal_pad = "repeat-last";
  s.spatial_multiple = 16;
  s.codec = "h265";
  s.crf = 20;
  s.preset = "slow";
  s.lossless = true;
  s.bit_depth = "10";
  s.checkpoint_chunks = 5;
  return s;
}

}  // namespace

class tst_StudioBasics : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    register_studio_types();
    QVERIFY(dir_.isValid());
  }

  // Presets: every option round-trips through the table's JSON; older presets (CUDA switches
  // under "toggles", tile and overlap as two numbers, the budget in MiB, boolean prefetch and
  // async tiles) still load; wrong types, values out of range and unknown keys warn.
  // A frame's 8-bit image: [-1, 1] -> [0, 255], rounded half away from zero (as std::lround),
  // clamped, NaN black; the width and height crop.
  void frameToImageRounding() {
    std::vector<float> values;
    for (int k = 0; k <= 255; ++k) {  // each level's half-way point and its float neighbours
      const float mid = (static_cast<float>(k) + 0.5f) / 127.5f - 1.f;
      values.insert(values.end(), {mid, std::nextafter(mid, -2.f), std::nextafter(mid, 2.f),
                                   static_cast<float>(k) / 127.5f - 1.f});
    }
    values.insert(values.end(), {-1.5f, 1.5f, -1.f, 1.f, std::nanf(""), 0.f, -0.f});
    const auto n = static_cast<int64_t>(values.size());
    HostTensor video(DType::kF32, Shape{1, 3, 1, 1, n});
    for (int c = 0; c < 3; ++c)
      std::copy(values.begin(), values.end(), video.f32().begin() + c * n);
    const QImage img = frame_to_image(video, 0);
    QCOMPARE(img.width(), static_cast<int>(n));
    for (int64_t i = 0; i < n; ++i) {
      const float v = values[static_cast<size_t>(i)];
      const int want =
          v == v ? static_cast<int>(std::lround((std::clamp(v, -1.f, 1.f) + 1.f) * 127.5f)) : 0;
      const QRgb px = img.pixel(static_cast<int>(i), 0);
      QVERIFY2(qRed(px) == want && qGreen(px) == want && qBlue(px) == want,
               qPrintable(QString("%1 -> %2, want %3").arg(v, 0, 'g', 9).arg(qRed(px)).arg(want)));
    }
    QCOMPARE(frame_to_image(video, 0, 5, 1).width(), 5);
  }

  void settingsJsonRoundTrip() {
    const RunOptions s = every_option_changed();
    for (const OptionSpec& spec : run_option_table()) {
      QVERIFY2(!option_is_default(s, spec), spec.key.data());
    }
    QStringList warnings;
    const RunOptions back = settings_from_json(settings_to_json(s), &warnings);
    QVERIFY2(warnings.isEmpty(), qPrintable(warnings.join("; ")));
    QCOMPARE(back, s);
    QVERIFY(settings_summary(s).contains("lean_convs"));
    QVERIFY(!settings_summary(RunOptions()).contains("lean"));

    QJsonObject old;
    old["backend"] = "cuda";
    old["toggles"] = QJsonObject{{"autotune", false}, {"workspace_mib", 64}, {"threads", 2}};
    old["tile_width"] = 256;
    old["tile_height"] = 128;
    old["budget_mib"] = 2048;
    old["prefetch"] = false;
    old["async_tiles"] = true;
    const RunOptions upgraded = settings_from_json(old, &warnings);
    QVERIFY2(warnings.isEmpty(), qPrintable(warnings.join("; ")));
    QVERIFY(!upgraded.autotune);
    QCOMPARE(upgraded.workspace_mib, 64);
    QCOMPARE(upgraded.threads, 2);
    QCOMPARE(upgraded.tile, (PixelSize{256, 128}));
    QCOMPARE(upgraded.budget_gb, 2.0);
    QCOMPARE(upgraded.prefetch, std::string("off"));
    QCOMPARE(upgraded.async_tiles, std::string("auto"));

    QJsonObject bad = settings_to_json(s);
    bad["chunk_latents"] = -5;   // below the minimum: clamped
    bad["lean_convs"] = "yes";   // wrong type: default
    bad["tiling"] = "sideways";  // not a choice: default
    bad["mystery"] = true;       // unknown
    const RunOptions fixed = settings_from_json(bad, &warnings);
    QCOMPARE(fixed.chunk_latents, 0);
    QCOMPARE(fixed.lean_convs, false);
    QCOMPARE(fixed.tiling, std::string("off"));
    QCOMPARE(warnings.size(), 4);
  }

  void presetSaveLoad() {
    SettingsStore store(std::make_unique<QSettings>(dir_.filePath("p.ini"), QSettings::IniFormat),
                        dir_.filePath("presets-a"));
    RunOptions s;
    s.chunk_latents = 0;
    s.tiling = "blend";
    s.overlap = {48, 48};
    s.async_tiles = "off";
    QString error;
    QVERIFY2(store.save_preset("fast / whole clip", s, &error), qPrintable(error));
    QVERIFY(store.preset_names().contains("fast _ whole clip"));
    auto loaded = store.load_preset("fast / whole clip", &error);
    QVERIFY2(loaded.has_value(), qPrintable(error));
    QCOMPARE(*loaded, s);
    QVERIFY(store.remove_preset("fast / whole clip"));
    QVERIFY(store.preset_names().isEmpty());

    // Files from elsewhere: valid, broken JSON, and JSON that is not a preset.
    QVERIFY(SettingsStore::write_preset_file(dir_.filePath("shared.json"), "shared", s, &error));
    QString name;
    auto shared =
        SettingsStore::read_preset_file(dir_.filePath("shared.json"), &error, nullptr, &name);
    QVERIFY(shared.has_value());
    QCOMPARE(name, QString("shared"));
    QVERIFY(!SettingsStore::read_preset_file(write_bytes(dir_, "broken.json", "{\"format\": "),
                                             &error));
    QVERIFY2(error.contains("not valid JSON"), qPrintable(error));
    QVERIFY(
        !SettingsStore::read_preset_file(write_bytes(dir_, "other.json", "{\"a\": 1}"), &error));
    QVERIFY2(error.contains("not a SeedVAE Studio preset"), qPrintable(error));
  }

  void settingsPersistAcrossSessions() {
    {
      auto w = make_window(dir_, "persist");
      auto* chunk = w->settingsPanel()->findChild<QSpinBox*>("opt_chunk_latents");
      QVERIFY(chunk);
      chunk->setValue(3);
      QCOMPARE(w->settingsPanel()->settings().chunk_latents, 3);
      w->close();
    }
    auto w2 = make_window(dir_, "persist");
    QCOMPARE(w2->settingsPanel()->settings().chunk_latents, 3);
  }

  void loadGoodAndBadVideos() {
    auto w = make_window(dir_, "videos");
    const QString good = write_sample_video(dir_, "clip10", 64, 48, 10);
    QSignalSpy loaded(w.get(), &MainWindow::videoLoaded);
    QSignalSpy errors(w.get(), &MainWindow::errorShown);
    w->openVideo(good);
    QVERIFY(loaded.wait(20000));
    auto* info = w->infoPanel()->findChild<QLabel*>("videoInfo");
    QVERIFY(info->text().contains("64×48"));
    QVERIFY2(info->text().contains("10 frames"), qPrintable(info->text()));
    // 10 frames are padded to 13 (4n+1) and 48 rows stay 48 (a multiple of 8).
    const QString pad = w->infoPanel()->paddingText();
    QVERIFY2(pad.contains("10 → 13 frames") && pad.contains("64×48 → 64×48"), qPrintable(pad));
    QCOMPARE(errors.count(), 0);

    // A file that is not a video: an error dialog naming the file and the reason.
    const QString broken = write_bytes(dir_, "broken.mp4", QByteArray(5000, '\x17'));
    w->openVideo(broken);
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, 20000);
    QVERIFY2(errors.last().at(1).toString().contains("broken.mp4"),
             qPrintable(errors.last().at(1).toString()));
    auto* box = w->findChild<QMessageBox*>("errorDialog");
    QVERIFY(box);
    QVERIFY(box->text().contains("broken.mp4"));
    box->close();
    // A path that does not exist.
    w->openVideo(dir_.filePath("missing.mp4"));
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 2, 20000);
    QVERIFY2(w->lastError().contains("missing.mp4"), qPrintable(w->lastError()));
    // Still usable: the good file opens again.
    w->openVideo(good);
    QVERIFY(loaded.wait(20000));
  }

  void loadGoodAndBadWeights() {
    auto w = make_window(dir_, "weights");
    QSignalSpy loaded(w.get(), &MainWindow::weightsLoaded);
    QSignalSpy errors(w.get(), &MainWindow::errorShown);
    QVERIFY(loaded.wait(20000));  // the built-in model at start-up
    QVERIFY(w->weights().synthetic);
    const QString good = write_tiny_weights(dir_, "tiny.safetensors");
    w->openWeights(good);
    QVERIFY(loaded.wait(20000));
    QVERIFY(!w->weights().synthetic);
    QCOMPARE(w->weights().parameters, VaeConfig::tiny().parameter_count());
    QCOMPARE(w->weights().dtype, QString("fp16"));
    QCOMPARE(w->weights().sha256.size(), 64);
    auto* info = w->infoPanel()->findChild<QLabel*>("weightsInfo");
    QVERIFY2(info->text().contains(w->weights().short_sha()), qPrintable(info->text()));

    // Truncated checkpoint and a text file: a dialog each, the loaded model stays.
    QFile f(good);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    w->openWeights(write_bytes(dir_, "truncated.safetensors", bytes.left(bytes.size() / 2)));
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, 20000);
    QVERIFY2(errors.last().at(1).toString().contains("truncated.safetensors"),
             qPrintable(errors.last().at(1).toString()));
    w->openWeights(write_bytes(dir_, "notes.safetensors", "these are not weights"));
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 2, 20000);
    QVERIFY(w->weightsReady());
    QCOMPARE(w->weights().source, good);
  }

  // One options table: the panel has a widget "opt_<key>" for every option of the table, with
  // the option's help as its tooltip, and no option widget of its own; setting every option
  // through the widgets gives back the same settings; another backend's rows are hidden.
  void settingsPanelHasEveryOption() {
    auto catalog = std::make_shared<FakeCatalog>();
    SettingsPanel panel(catalog);
    for (const OptionSpec& spec : run_option_table()) {
      QWidget* w = panel.optionWidget(spec.key);
      QVERIFY2(w, spec.key.data());
      QCOMPARE(w->objectName(),
               QStringLiteral("opt_") + QString::fromUtf8(spec.key.data(), spec.key.size()));
      const auto help =
          QString::fromUtf8(spec.help.data(), static_cast<qsizetype>(spec.help.size()));
      QVERIFY2(w->toolTip().contains(help.left(40)), spec.key.data());
    }
    for (QWidget* w : panel.findChildren<QWidget*>(QRegularExpression("^opt_"))) {
      QVERIFY2(find_option(w->objectName().mid(4).toStdString()) != nullptr,
               qPrintable(w->objectName()));
    }
    panel.setDevices("cuda", {DeviceStatus{0, "fake 0", 1ll << 30, 2ll << 30},
                              DeviceStatus{1, "fake 1", 1ll << 30, 2ll << 30}});
    const RunOptions s = every_option_changed();
    QSignalSpy changed(&panel, &SettingsPanel::settingsChanged);
    panel.setSettings(s);
    QCOMPARE(changed.count(), 0);  // setSettings() does not emit
    RunOptions want = s;
    want.threads = 0;  // a CPU option: hidden on the CUDA backend, but kept
    RunOptions got = panel.settings();
    got.threads = 0;
    for (const OptionSpec& spec : run_option_table()) {
      QVERIFY2(option_value(got, spec) == option_value(want, spec),
               qPrintable(QString::fromUtf8(spec.key.data(), spec.key.size()) + ": " +
                          QString::fromStdString(format_option_value(option_value(got, spec)))));
    }
    QVERIFY(panel.optionWidget("autotune")->isVisibleTo(&panel));
    QVERIFY(!panel.optionWidget("threads")->isVisibleTo(&panel));
    {  // the devices of a pipelined decode: a multi-select of the probed devices
      auto* devices = qobject_cast<QToolButton*>(panel.optionWidget("devices"));
      QVERIFY(devices && devices->menu());
      const QList<QAction*> items = devices->menu()->actions();  // valid until the next list
      QCOMPARE(items.size(), 2);
      QVERIFY(items[0]->isChecked() && items[1]->isChecked());  // "0,1" from the settings
      QCOMPARE(devices->text(), QString("0,1"));
      QSignalSpy edits(&panel, &SettingsPanel::settingsChanged);
      items[0]->trigger();  // unchecks device 0
      QCOMPARE(panel.settings().devices, std::string("1"));
      items[0]->trigger();
      QCOMPARE(panel.settings().devices, std::string("0,1"));
      QCOMPARE(edits.count(), 2);
      RunOptions three = panel.settings();
      three.devices = "0,1,3";  // a device the probe does not list is kept
      panel.setSettings(three);
      devices->menu()->actions().at(1)->trigger();  // (the menu is made anew with the list)
      QCOMPARE(panel.settings().devices, std::string("0,3"));
    }
    {  // a preset's device survives until the devices are probed; another backend is probed
      SettingsPanel fresh(catalog);
      RunOptions cpu = fresh.settings();
      cpu.backend = "cpu";
      cpu.precision = "fp32";
      fresh.setSettings(cpu);
      QSignalSpy probe(&fresh, &SettingsPanel::backendChanged);
      RunOptions preset = every_option_changed();
      preset.device = 1;
      fresh.setSettings(preset);
      QCOMPARE(probe.count(), 1);
      QCOMPARE(probe.first().first().toString(), QString("cuda"));
      QCOMPARE(fresh.settings().device, 1);
      fresh.setDevices("cuda", {DeviceStatus{0, "fake 0", 1ll << 30, 2ll << 30},
                                DeviceStatus{1, "fake 1", 1ll << 30, 2ll << 30}});
      QCOMPARE(qobject_cast<QComboBox*>(fresh.optionWidget("device"))->currentData().toInt(), 1);
      QCOMPARE(fresh.settings().device, 1);
      fresh.setSettings(preset);
      QCOMPARE(probe.count(), 1);  // the same backend: no new probe
    }
    {  // each device with its name and memory, in the list and in its tooltip
      auto* device = qobject_cast<QComboBox*>(panel.optionWidget("device"));
      QCOMPARE(device->count(), 2);
      QCOMPARE(device->itemText(1), QString("1: fake 1 · 1.00 GiB free of 2.00 GiB"));
      QVERIFY(device->itemData(1, Qt::ToolTipRole).toString().contains("1.00 GiB free of"));
    }
    auto* backend = qobject_cast<QComboBox*>(panel.optionWidget("backend"));
    backend->setCurrentIndex(backend->findData("cpu"));
    QVERIFY(changed.count() >= 1);
    QVERIFY(!panel.optionWidget("autotune")->isVisibleTo(&panel));
    QVERIFY(panel.optionWidget("threads")->isVisibleTo(&panel));
    QCOMPARE(panel.settings().precision, std::string("fp32"));  // the CPU backend's only one
    auto* autotune = qobject_cast<QCheckBox*>(panel.optionWidget("autotune"));
    QVERIFY(autotune);

    // The memory warning: a prediction above the device's free memory.
    backend->setCurrentIndex(backend->findData("cuda"));
    Prediction p;
    p.ok = true;
    p.weight_bytes = 1ll << 29;
    p.activation_bytes = 1ll << 30;
    p.engine_bytes = p.weight_bytes + p.activation_bytes;
    RunOptions no_budget = panel.settings();
    no_budget.budget_gb = 0;
    panel.setSettings(no_budget);
    panel.setPrediction(p);
    QVERIFY(!panel.fits());
    QVERIFY(panel.fitWarning().contains("exceeds"));
    auto* warning = panel.findChild<QLabel*>("memoryWarning");
    QVERIFY(!warning->isHidden());
    p.activation_bytes = 1ll << 20;
    p.engine_bytes = p.weight_bytes + p.activation_bytes;
    panel.setPrediction(p);
    QVERIFY(panel.fits());
    QVERIFY(warning->isHidden());
  }

  // An option that does not apply to the current settings is disabled, with the table's reason
  // in its tooltip, and keeps its value.
  void optionsThatDoNotApplyAreDisabled() {
    SettingsPanel panel(std::make_shared<CpuCatalog>());
    auto* tiling = qobject_cast<QComboBox*>(panel.optionWidget("tiling"));
    auto* lone = qobject_cast<QCheckBox*>(panel.optionWidget("lone_head"));
    auto* lean = qobject_cast<QCheckBox*>(panel.optionWidget("lean_convs"));
    QWidget* hires = panel.optionWidget("hires_chunk_frames");
    QWidget* async = panel.optionWidget("async_tiles");
    QWidget* overlap = panel.optionWidget("overlap");
    QWidget* prefetch = panel.optionWidget("prefetch");
    QVERIFY(tiling && lone && lean && hires && async && overlap && prefetch);
    lone->setChecked(true);
    QVERIFY(lone->isEnabled() && lean->isEnabled() && hires->isEnabled() && async->isEnabled());
    QVERIFY(!overlap->isEnabled());
    QVERIFY2(overlap->toolTip().contains("Not available"), qPrintable(overlap->toolTip()));
    tiling->setCurrentIndex(tiling->findData(QString("exact")));
    for (QWidget* w : {static_cast<QWidget*>(lone), static_cast<QWidget*>(lean), hires, async}) {
      QVERIFY2(!w->isEnabled(), qPrintable(w->objectName()));
      QVERIFY2(w->toolTip().contains("Not available") && w->toolTip().contains("exact tiling"),
               qPrintable(w->toolTip()));
    }
    QVERIFY(panel.settings().lone_head);  // kept
    tiling->setCurrentIndex(tiling->findData(QString("blend")));
    QVERIFY(overlap->isEnabled() && async->isEnabled() && lone->isEnabled());
    // Frame prefetch: a file, untiled, in temporal chunks only.
    QVERIFY(!prefetch->isEnabled());
    tiling->setCurrentIndex(tiling->findData(QString("off")));
    QVERIFY(!prefetch->isEnabled());  // the sample clip
    QVERIFY(prefetch->toolTip().contains("sample clip"));
    panel.setSampleInput(false);
    QVERIFY(prefetch->isEnabled());
    qobject_cast<QSpinBox*>(panel.optionWidget("chunk_latents"))->setValue(0);
    QVERIFY(!prefetch->isEnabled());
    QVERIFY2(prefetch->toolTip().contains("whole-clip chunk"), qPrintable(prefetch->toolTip()));
  }

  // The settings dock of the real window fits its content at the laptop and the desktop size,
  // with the CPU backend and with a GPU backend (more rows, a long device name), and with the dock
  // dragged to its narrowest: no option widget, label or button is cut at the dock's edge or by
  // its group, every combo box is as wide as its minimum size hint, the wrapped predicted-peak
  // text is whole; scrolled to the top, to the memory section and to the presets.
  void settingsDockFitsTheWindow_data() {
    QTest::addColumn<QSize>("size");
    QTest::addColumn<bool>("gpu");
    QTest::addColumn<bool>("narrowest");
    for (const QSize size : {QSize(1366, 768), QSize(1920, 1080)}) {
      for (const bool gpu : {false, true}) {
        for (const bool narrowest : {false, true}) {
          const QByteArray name = QByteArray::number(size.width()) + "x" +
                                  QByteArray::number(size.height()) + (gpu ? " gpu" : " cpu") +
                                  (narrowest ? " narrowest dock" : "");
          QTest::newRow(name.constData()) << size << gpu << narrowest;
        }
      }
    }
  }
  void settingsDockFitsTheWindow() {
    QFETCH(QSize, size);
    QFETCH(bool, gpu);
    QFETCH(bool, narrowest);
    std::shared_ptr<const BackendCatalog> catalog;
    if (gpu)
      catalog = std::make_shared<FakeDeviceCatalog>();
    else
      catalog = std::make_shared<CpuCatalog>();
    MainWindow w(catalog, temp_store(dir_, QString("layout-%1").arg(QTest::currentDataTag())));
    w.setConfirmations(false);
    QSignalSpy weights(&w, &MainWindow::weightsLoaded);
    w.resize(size);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.size(), size);
    RunOptions s = w.settingsPanel()->settings();
    s.tiling = "blend";  // the tile and overlap fields enabled
    if (gpu) {
      s.backend = "cuda";
      s.precision = "bf16";
    }
    w.applySettings(s);
    if (gpu) {
      w.controller()->probeDevices("cuda");
      auto* device = w.settingsPanel()->findChild<QComboBox*>("opt_device");
      QTRY_VERIFY_WITH_TIMEOUT(device && device->count() == 1, 10000);
    }
    QVERIFY(weights.count() > 0 || weights.wait(20000));
    // The prediction is the longest text of the panel.
    auto* predicted = w.settingsPanel()->findChild<QLabel*>("predictedLabel");
    QTRY_VERIFY_WITH_TIMEOUT(predicted->text().contains("weights"), 20000);
    w.showDock("settings");
    auto* dock = w.findChild<QDockWidget*>("dock_settings");
    QVERIFY(dock);
    if (narrowest) {
      const int before = dock->width();
      w.resizeDocks({dock}, {1}, Qt::Horizontal);  // as narrow as the dock lets itself be
      QTRY_VERIFY_WITH_TIMEOUT(dock->width() < before, 2000);
    }
    for (const char* target : {"opt_backend", "fitButton", "presetCombo"}) {
      w.revealInDock("settings", target);
      // Layouts settle over a few posted events; what stays is what the user sees.
      QStringList problems;
      QElapsedTimer settling;
      settling.start();
      do {
        QTest::qWait(50);
        problems = clipped_in_settings_dock(w);
      } while (!problems.isEmpty() && settling.elapsed() < 1000);
      QVERIFY2(problems.isEmpty(), qPrintable(QStringLiteral("%1, dock %2 px wide, at %3:\n  ")
                                                  .arg(QTest::currentDataTag())
                                                  .arg(dock->width())
                                                  .arg(target) +
                                              problems.join("\n  ")));
    }
    w.close();
  }

  void predictionFromThePlanner() {
    PredictionRequest r;
    r.weights = std::make_shared<VaeWeights>(synthesize_weights(VaeConfig::tiny(), kTinySeed));
    r.width = 256;
    r.height = 256;
    r.frames = 17;
    const Prediction untiled = predict_memory(r);
    QVERIFY2(untiled.ok, qPrintable(untiled.error));
    QVERIFY(untiled.weight_bytes > 0);
    QVERIFY(untiled.activation_bytes > 0);
    QVERIFY(untiled.host_bytes > 0);
    QVERIFY(untiled.method.contains("planner"));
    r.settings.tiling = "blend";
    r.settings.tile = {64, 64};
    r.settings.overlap = {16, 16};
    const Prediction tiled = predict_memory(r);
    QVERIFY2(tiled.ok, qPrintable(tiled.error));
    QVERIFY2(
        tiled.activation_bytes < untiled.activation_bytes,
        qPrintable(QString("%1 vs %2").arg(tiled.activation_bytes).arg(untiled.activation_bytes)));
    // The planner fits a tile into a budget smaller than the untiled peak.
    r.settings.tiling = "off";
    const BudgetFit fit = fit_to_budget(r, untiled.engine_bytes * 2 / 3);
    QVERIFY2(fit.ok, qPrintable(fit.message));
    QCOMPARE(fit.tiling, QString("exact"));
    QVERIFY(fit.tile_width > 0 && fit.tile_width <= 256);
  }

  void channelsAreBounded() {
    LatestChannel<int> latest;
    QVERIFY(latest.publish(1));   // first value notifies
    QVERIFY(!latest.publish(2));  // pending: no second notification, 1 is dropped
    QCOMPARE(latest.dropped(), 1LL);
    QCOMPARE(*latest.take(), 2);
    QVERIFY(!latest.take().has_value());
    QVERIFY(latest.publish(3));  // after take() a new value notifies again

    BoundedQueue<int> q(3);
    QVERIFY(q.push(1));
    for (int i = 2; i <= 5; ++i) QVERIFY(!q.push(i));
    QCOMPARE(q.dropped(), 2LL);
    QCOMPARE(q.drain(), (QVector<int>{3, 4, 5}));

    ProgressThrottle t(0.01, std::chrono::milliseconds(100000));
    QVERIFY(t.should_send(0.0));
    QVERIFY(!t.should_send(0.005));
    QVERIFY(t.should_send(0.02));
    QVERIFY(t.should_send(0.021, true));

    // The preview thread runs the newest task; one posted while another runs replaces the one
    // still waiting; flush() returns after the last one ran.
    LatestTaskThread tasks("test-latest");
    std::mutex m;
    std::condition_variable cv;
    bool started = false, release = false;
    std::vector<int> ran;
    tasks.post([&] {
      std::unique_lock lock(m);
      started = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
      ran.push_back(1);
    });
    {
      std::unique_lock lock(m);
      QVERIFY(cv.wait_for(lock, std::chrono::seconds(10), [&] { return started; }));
    }
    tasks.post([&] { ran.push_back(2); });
    tasks.post([&] { ran.push_back(3); });  // replaces 2
    {
      std::lock_guard lock(m);
      release = true;
    }
    cv.notify_all();
    tasks.flush();
    QCOMPARE(ran, (std::vector<int>{1, 3}));
  }

  void viewsShareZoomAndPan() {
    ViewSync sync;
    CompareView a(&sync), b(&sync);
    a.resize(400, 300);
    b.resize(800, 600);
    QImage left(200, 100, QImage::Format_RGB32), right(200, 100, QImage::Format_RGB32);
    left.fill(Qt::black);
    right.fill(Qt::white);
    a.setImages(left, right);
    b.setImages(left, right);
    const QPointF a0 = a.imageToWidget({100, 50});
    QCOMPARE(a0, QPointF(200, 150));  // the image centre sits at the pane centre
    a.zoomBy(2.0, QPointF(300, 150));
    QCOMPARE(sync.zoom(), 2.0);
    // Both views show the same image point at their centre (fit-relative zoom).
    const QPointF c = sync.center();
    const QPointF pa = a.imageToWidget({c.x() * 200, c.y() * 100});
    const QPointF pb = b.imageToWidget({c.x() * 200, c.y() * 100});
    QCOMPARE(pa, QPointF(200, 150));
    QCOMPARE(pb, QPointF(400, 300));
    a.setDivider(0.25);
    QCOMPARE(a.divider(), 0.25);
    const QImage diff = difference_heatmap(left, right, 1.0);
    QCOMPARE(diff.size(), left.size());
    QCOMPARE(diff.pixel(0, 0), heat_color(255));
    b.setMode(CompareView::Mode::kSideBySide);
    QVERIFY(b.paneRect(1).left() > b.paneRect(0).right());
    sync.fit();
    QCOMPARE(sync.zoom(), 1.0);
  }

  void chartSeriesReceivePoints() {
    ChartsPanel charts;
    QVector<TelemetryPoint> pts;
    for (int chunk = 0; chunk < 3; ++chunk) {
      for (const char* stage : {"decoder.conv_in", "decoder.up_blocks.0", "decoder.conv_out"}) {
        TelemetryPoint p;
        p.run_id = 1;
        p.t_s = chunk * 0.5 + pts.size() * 0.01;
        p.op = "decode";
        p.stage = stage;
        p.chunk = chunk;
        p.wall_ms = 10 + chunk;
        if (chunk == 1) p.device_ms = 2.5;  // a CUDA run's stages carry GPU time; CPU runs -1
        p.current_bytes = (10 + chunk) << 20;
        p.peak_bytes = 20 << 20;
        p.device_used_bytes = 100 << 20;
        pts.push_back(p);
      }
    }
    charts.addPoints(pts);
    QTRY_COMPARE_WITH_TIMEOUT(charts.allocatedSeries()->count(), 9, 2000);  // the refresh timer
    charts.addPoints({});
    charts.flush();
    QCOMPARE(charts.peakSeries()->count(), 9);
    QCOMPARE(charts.deviceSeries()->count(), 9);
    QCOMPARE(charts.timingCategories(), 3);
    QCOMPARE(charts.timingSeries()->count(), 3);  // one bar set per stage
    QCOMPARE(charts.timingGpuMs(0), -1.0);        // no device timer
    QCOMPARE(charts.timingGpuMs(1), 7.5);         // three stages of 2.5 ms
    emit charts.timingSeries()->hovered(true, 1, charts.timingSeries()->barSets().at(0));
    QCOMPARE(QToolTip::text(), QString("d1 · conv_in: 11.0 ms (GPU 2.5 ms)"));
    QCOMPARE(charts.log().size(), 9);
    const QImage img = charts.render("timing", {600, 300});
    QCOMPARE(img.size(), QSize(600, 300));
    charts.clear();
    QCOMPARE(charts.allocatedSeries()->count(), 0);
  }

  void chartBarsSlideInPlace() {
    // The timing chart shows the last kVisibleBars chunks; its bar sets (one per stage) are
    // updated in place, and a stage that appears late gets a set of its own.
    ChartsPanel charts;
    QStackedBarSeries* series = charts.timingSeries();
    const int chunks = ChartsPanel::kVisibleBars + 7;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      QVector<TelemetryPoint> pts;
      for (const char* stage : {"decoder.conv_in", "decoder.mid_block"}) {
        if (chunk < 5 && QByteArray(stage) == "decoder.mid_block") continue;
        TelemetryPoint p;
        p.run_id = 1;
        p.t_s = chunk;
        p.op = "decode";
        p.stage = stage;
        p.chunk = chunk;
        p.wall_ms = 100 * chunk + (QByteArray(stage) == "decoder.conv_in" ? 1 : 2);
        pts.push_back(p);
      }
      charts.addPoints(pts);
      if (chunk % 3 == 0) charts.flush();  // refreshes between batches of new chunks
    }
    charts.flush();
    QCOMPARE(charts.timingSeries(), series);
    QCOMPARE(charts.timingCategories(), chunks);
    const QList<QBarSet*> sets = series->barSets();
    QCOMPARE(sets.size(), 2);
    QCOMPARE(sets[0]->label(), QString("conv_in"));
    QCOMPARE(sets[1]->label(), QString("mid_block"));
    for (QBarSet* set : sets) QCOMPARE(set->count(), ChartsPanel::kVisibleBars);
    const int first = chunks - ChartsPanel::kVisibleBars;
    for (int i = 0; i < ChartsPanel::kVisibleBars; ++i) {
      QCOMPARE(sets[0]->at(i), 100.0 * (first + i) + 1);
      QCOMPARE(sets[1]->at(i), 100.0 * (first + i) + 2);
    }
    // Hovering names the bar under the pointer with the panel's current values.
    emit series->hovered(true, 0, sets[1]);
    QCOMPARE(QToolTip::text(),
             QString("d%1 · mid_block: %2 ms").arg(first).arg(100.0 * first + 2, 0, 'f', 1));
    QVERIFY(QToolTip::isVisible());
    emit series->hovered(false, 0, sets[1]);
    QTRY_VERIFY_WITH_TIMEOUT(!QToolTip::isVisible(), 2000);
    charts.clear();
    QCOMPARE(charts.timingSeries()->count(), 0);
    QCOMPARE(charts.timingCategories(), 0);
  }

  void chartAxesMoveRarely() {
    // An axis range changes only when the data leaves 40-100 % of it, to a round top with ticks
    // at round steps: each change re-lays every label out, and the charts refresh 4 times a
    // second during a run.
    ChartsPanel charts;
    auto* time =
        qobject_cast<QValueAxis*>(charts.memoryView()->chart()->axes(Qt::Horizontal).value(0));
    auto* mib =
        qobject_cast<QValueAxis*>(charts.memoryView()->chart()->axes(Qt::Vertical).value(0));
    auto* ms = qobject_cast<QValueAxis*>(charts.timingView()->chart()->axes(Qt::Vertical).value(0));
    QVERIFY(time && mib && ms);
    QSignalSpy time_moves(time, &QValueAxis::rangeChanged);
    QSignalSpy ms_moves(ms, &QValueAxis::rangeChanged);
    const auto is_round = [](QValueAxis* axis) {  // the top, and the step between its ticks
      const auto mantissa = [](double v) { return v / std::pow(10.0, std::floor(std::log10(v))); };
      const double m = mantissa(axis->max());
      const double step = mantissa(axis->max() / (axis->tickCount() - 1));
      const auto near = [](double a, double b) { return std::abs(a - b) < 1e-9; };
      return (near(m, 1) || near(m, 2) || near(m, 2.5) || near(m, 5)) &&
             (near(step, 1) || near(step, 2) || near(step, 5));
    };
    const int chunks = 100;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      TelemetryPoint p;
      p.run_id = 1;
      p.t_s = 0.25 * (chunk + 1);
      p.op = "decode";
      p.stage = "decoder.conv_in";
      p.chunk = chunk;
      p.wall_ms = chunk == 10 ? 900 : 30 + chunk % 7;  // one slow chunk, which scrolls away
      p.current_bytes = static_cast<int64_t>(chunk + 1) * (3 << 20);
      p.peak_bytes = p.current_bytes;
      charts.addPoints({p});
      charts.flush();
      QVERIFY(time->max() >= p.t_s);
      QVERIFY(mib->max() >= p.current_bytes / 1048576.0);
      QVERIFY(ms->max() >= p.wall_ms);
      QVERIFY(is_round(time) && is_round(mib) && is_round(ms));
    }
    QCOMPARE(time->max(), 25.0);       // the last sample at 25 s
    QVERIFY(time_moves.count() <= 6);  // 1 s -> 2, 2.5, 5, 10, 20, 25: not at every refresh
    QCOMPARE(ms->max(), 50.0);         // back down once the 900 ms chunk left the window
    QVERIFY(ms_moves.count() <= 6);
  }

 private:
  QTemporaryDir dir_;
};

QTEST_MAIN(tst_StudioBasics)
#include "tst_studio_basics.moc"
