// The studio's pieces without a full engine run: settings and presets, QSettings persistence,
// loading good and bad files (dialogs, no crash, no freeze), the settings panel's data-driven
// toggles and memory warning, the bounded channels, the synchronised views, the chart series.
#include <QCheckBox>
#include <QComboBox>
#include <QJsonDocument>
#include <QLabel>
#include <QLineSeries>
#include <QMessageBox>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStackedBarSeries>
#include <QtTest>

#include "studio_test_util.h"
#include "ui/channels.h"
#include "ui/charts_panel.h"
#include "ui/compare_view.h"
#include "ui/image_convert.h"
#include "ui/info_panel.h"
#include "ui/memory_predictor.h"
#include "ui/settings_panel.h"

using namespace seedvae;
using namespace seedvae::ui;
using namespace seedvae::ui::test;

namespace {

// A catalog with a second backend carrying one toggle of each kind, as a CUDA build would.
class FakeCatalog : public CpuCatalog {
 public:
  QVector<BackendSpec> backends() const override {
    QVector<BackendSpec> specs = CpuCatalog::backends();
    BackendSpec gpu;
    gpu.name = "fakegpu";
    gpu.label = "Fake GPU";
    gpu.precisions = {"bf16", "fp16", "fp32"};
    gpu.has_devices = true;
    gpu.memory_is_host = false;
    ToggleSpec a;
    a.key = "autotune";
    a.label = "Autotune";
    a.tooltip = "Times every algorithm once; costs seconds on the first run.";
    a.kind = ToggleSpec::Kind::kBool;
    a.default_value = true;
    ToggleSpec b;
    b.key = "layout";
    b.label = "Layout";
    b.tooltip = "Activation layout.";
    b.kind = ToggleSpec::Kind::kChoice;
    b.choices = {"ndhwc", "ncdhw"};
    b.default_value = "ndhwc";
    ToggleSpec c;
    c.key = "workspace";
    c.label = "Workspace";
    c.tooltip = "Scratch MiB per convolution.";
    c.kind = ToggleSpec::Kind::kInt;
    c.default_value = 512;
    c.minimum = 0;
    c.maximum = 4096;
    gpu.toggles = {a, b, c};
    specs.push_back(gpu);
    return specs;
  }
};

}  // namespace

class tst_StudioBasics : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    register_studio_types();
    QVERIFY(dir_.isValid());
  }

  void settingsJsonRoundTrip() {
    EngineSettings s;
    s.backend = "cpu";
    s.toggles["threads"] = 3;
    s.tiling = TilingMode::kExact;
    s.tile_width = 320;
    s.tile_height = 192;
    s.chunk_latents = 2;
    s.hires_chunk_frames = 3;
    s.budget_mib = 4096;
    s.temporal_pad = "repeat-last";
    s.spatial_multiple = 16;
    s.prefetch = false;
    s.async_tiles = false;
    QStringList warnings;
    const EngineSettings back = EngineSettings::from_json(s.to_json(), &warnings);
    QVERIFY2(warnings.isEmpty(), qPrintable(warnings.join("; ")));
    QCOMPARE(back, s);
    QCOMPARE(back.hires_chunk_frames, 3);
    QVERIFY(s.summary().contains("hi-res pieces 3"));
    // Frame prefetch: on by default (also for presets written before it existed), round-trips
    // off, and the summary says when it is off.
    QVERIFY(EngineSettings{}.prefetch);
    QVERIFY(!back.prefetch);
    QCOMPARE(s.to_json().value("prefetch").toBool(true), false);
    QVERIFY(s.summary().contains("no prefetch"));
    QVERIFY(!EngineSettings{}.summary().contains("prefetch"));
    QJsonObject old = s.to_json();
    old.remove("prefetch");
    QVERIFY(EngineSettings::from_json(old, &warnings).prefetch);
    QVERIFY(warnings.isEmpty());
    s.prefetch = true;
    QCOMPARE(EngineSettings::from_json(s.to_json()), s);
    QJsonObject wrong = s.to_json();
    wrong["prefetch"] = "yes";
    QVERIFY(EngineSettings::from_json(wrong, &warnings).prefetch);
    QCOMPARE(warnings.size(), 1);
    warnings.clear();
    // Async tiles: the same (on by default and for older presets, round-trips off, summary and
    // view label say when it is off, a wrong type warns).
    QVERIFY(EngineSettings{}.async_tiles);
    QVERIFY(!back.async_tiles);
    QCOMPARE(s.to_json().value("async_tiles").toBool(true), false);
    QVERIFY(s.summary().contains("no async tiles"));
    QVERIFY(s.short_label().contains("no async tiles"));
    QVERIFY(!EngineSettings{}.summary().contains("async"));
    QVERIFY(!EngineSettings{}.short_label().contains("async"));
    QJsonObject old_async = s.to_json();
    old_async.remove("async_tiles");
    QVERIFY(EngineSettings::from_json(old_async, &warnings).async_tiles);
    QVERIFY(warnings.isEmpty());
    EngineSettings flipped = s;
    flipped.async_tiles = true;
    QVERIFY(flipped != s);
    QCOMPARE(EngineSettings::from_json(flipped.to_json()), flipped);
    QJsonObject wrong_async = s.to_json();
    wrong_async["async_tiles"] = 1;
    QVERIFY(EngineSettings::from_json(wrong_async, &warnings).async_tiles);
    QCOMPARE(warnings.size(), 1);
    QVERIFY(warnings.first().contains("async_tiles"));
    warnings.clear();

    QJsonObject bad = s.to_json();
    bad["tile_width"] = 1;       // below the minimum
    bad["chunk_latents"] = "x";  // not a number
    bad["mystery"] = true;
    const EngineSettings fixed = EngineSettings::from_json(bad, &warnings);
    QCOMPARE(fixed.tile_width, 16);
    QCOMPARE(fixed.chunk_latents, 1);
    QCOMPARE(warnings.size(), 3);
  }

  void presetSaveLoad() {
    SettingsStore store(std::make_unique<QSettings>(dir_.filePath("p.ini"), QSettings::IniFormat),
                        dir_.filePath("presets-a"));
    EngineSettings s;
    s.chunk_latents = 0;
    s.tiling = TilingMode::kBlend;
    s.overlap_width = 48;
    s.async_tiles = false;
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
    auto shared = SettingsStore::read_preset_file(dir_.filePath("shared.json"), &error, nullptr, &name);
    QVERIFY(shared.has_value());
    QCOMPARE(name, QString("shared"));
    QVERIFY(!SettingsStore::read_preset_file(write_bytes(dir_, "broken.json", "{\"format\": "), &error));
    QVERIFY2(error.contains("not valid JSON"), qPrintable(error));
    QVERIFY(!SettingsStore::read_preset_file(write_bytes(dir_, "other.json", "{\"a\": 1}"), &error));
    QVERIFY2(error.contains("not a SeedVAE Studio preset"), qPrintable(error));
  }

  void settingsPersistAcrossSessions() {
    {
      auto w = make_window(dir_, "persist");
      auto* chunk = w->settingsPanel()->findChild<QSpinBox*>("chunkSpin");
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
    QVERIFY2(errors.last().at(1).toString().contains("broken.mp4"), qPrintable(errors.last().at(1).toString()));
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
    QVERIFY2(errors.last().at(1).toString().contains("truncated.safetensors"), qPrintable(errors.last().at(1).toString()));
    w->openWeights(write_bytes(dir_, "notes.safetensors", "these are not weights"));
    QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 2, 20000);
    QVERIFY(w->weightsReady());
    QCOMPARE(w->weights().source, good);
  }

  void settingsPanelIsDataDriven() {
    auto catalog = std::make_shared<FakeCatalog>();
    SettingsPanel panel(catalog);
    QSignalSpy changed(&panel, &SettingsPanel::settingsChanged);
    QVERIFY(panel.toggleWidget("threads"));
    QVERIFY(!panel.toggleWidget("autotune"));
    auto* backend = panel.findChild<QComboBox*>("backendCombo");
    backend->setCurrentIndex(backend->findData("fakegpu"));
    QVERIFY(!panel.toggleWidget("threads"));
    auto* autotune = qobject_cast<QCheckBox*>(panel.toggleWidget("autotune"));
    QVERIFY(autotune);
    QVERIFY(autotune->isChecked());
    QVERIFY(autotune->toolTip().contains("costs"));
    QVERIFY(qobject_cast<QComboBox*>(panel.toggleWidget("layout")));
    QVERIFY(qobject_cast<QSpinBox*>(panel.toggleWidget("workspace")));
    autotune->setChecked(false);
    const EngineSettings s = panel.settings();
    QCOMPARE(s.backend, QString("fakegpu"));
    QCOMPARE(s.precision, QString("bf16"));
    QCOMPARE(s.toggles.value("autotune").toBool(), false);
    QCOMPARE(s.toggles.value("layout").toString(), QString("ndhwc"));
    QCOMPARE(s.toggles.value("workspace").toInt(), 512);
    QVERIFY(changed.count() >= 2);
    // Presets restore the toggles.
    SettingsPanel other(catalog);
    other.setSettings(s);
    QCOMPARE(other.settings(), s);

    // The memory warning: a prediction above the device's free memory.
    panel.setDevices("fakegpu", {DeviceStatus{0, "fake", 1ll << 30, 2ll << 30}});
    Prediction p;
    p.ok = true;
    p.weight_bytes = 1ll << 29;
    p.activation_bytes = 1ll << 30;
    p.engine_bytes = p.weight_bytes + p.activation_bytes;
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

  void prefetchCheckboxFollowsTilingAndInput() {
    SettingsPanel panel(std::make_shared<CpuCatalog>());
    auto* box = panel.findChild<QCheckBox*>("prefetchCheck");
    QVERIFY(box);
    QCOMPARE(box, panel.prefetchCheck());
    QVERIFY(box->isChecked());  // on by default
    QVERIFY(panel.settings().prefetch);
    // A file, untiled, in temporal chunks: enabled, with what it does in the tooltip.
    panel.setSampleInput(false);
    QVERIFY(box->isEnabled());
    QVERIFY(box->toolTip().contains("own thread"));
    QVERIFY(!box->toolTip().contains("Not available"));
    QSignalSpy changed(&panel, &SettingsPanel::settingsChanged);
    box->setChecked(false);
    QCOMPARE(changed.count(), 1);
    QVERIFY(!changed.last().first().value<EngineSettings>().prefetch);
    box->setChecked(true);
    // Blend and exact tiling: disabled with the reason (the flag itself is kept).
    auto* tiling = panel.findChild<QComboBox*>("tilingCombo");
    for (const char* mode : {"blend", "exact"}) {
      tiling->setCurrentIndex(tiling->findData(QString(mode)));
      QVERIFY2(!box->isEnabled(), mode);
      QVERIFY2(box->toolTip().contains("Not available") && box->toolTip().contains("tiling"),
               qPrintable(box->toolTip()));
      QVERIFY(panel.settings().prefetch);
    }
    tiling->setCurrentIndex(tiling->findData(QString("off")));
    QVERIFY(box->isEnabled());
    // A whole-clip chunk and the sample clip: disabled too.
    auto* chunk = panel.findChild<QSpinBox*>("chunkSpin");
    chunk->setValue(0);
    QVERIFY(!box->isEnabled());
    QVERIFY(box->toolTip().contains("one chunk"));
    chunk->setValue(1);
    QVERIFY(box->isEnabled());
    panel.setSampleInput(true);
    QVERIFY(!box->isEnabled());
    QVERIFY(box->toolTip().contains("sample clip"));
    // Presets restore the flag.
    EngineSettings off = panel.settings();
    off.prefetch = false;
    panel.setSettings(off);
    QVERIFY(!box->isChecked());
    QCOMPARE(panel.settings(), off);
    QVERIFY(!prefetch_unavailable_reason(off, true).isEmpty());
    QVERIFY(prefetch_unavailable_reason(off, false).isEmpty());
  }

  // Lone head and lean convolutions: off by default, each checkbox sets its flag (emitting the
  // new settings), the flags round-trip through JSON and show in the summary, and exact tiling
  // (its own schedule) disables both.
  void loneHeadAndLeanConvsCheckboxes() {
    SettingsPanel panel(std::make_shared<CpuCatalog>());
    QCheckBox* lone = panel.loneHeadCheck();
    QCheckBox* lean = panel.leanConvsCheck();
    QVERIFY(lone && lean);
    QCOMPARE(lone, panel.findChild<QCheckBox*>("loneHeadCheck"));
    QCOMPARE(lean, panel.findChild<QCheckBox*>("leanConvsCheck"));
    QVERIFY(!lone->isChecked() && !lean->isChecked());
    QVERIFY(!panel.settings().lone_head && !panel.settings().lean_convs);
    QSignalSpy changed(&panel, &SettingsPanel::settingsChanged);
    lone->setChecked(true);
    lean->setChecked(true);
    QCOMPARE(changed.count(), 2);
    const EngineSettings s = changed.last().first().value<EngineSettings>();
    QVERIFY(s.lone_head && s.lean_convs);
    QVERIFY(s.summary().contains("lone head") && s.summary().contains("lean convs"));
    QVERIFY(!EngineSettings{}.summary().contains("lean"));
    QStringList warnings;
    const EngineSettings back = EngineSettings::from_json(s.to_json(), &warnings);
    QVERIFY2(warnings.isEmpty(), qPrintable(warnings.join("; ")));
    QCOMPARE(back, s);
    EngineSettings other = s;
    other.lean_convs = false;
    QVERIFY(other != s);
    QJsonObject wrong = s.to_json();
    wrong["lean_convs"] = "yes";
    QVERIFY(EngineSettings::from_json(wrong, &warnings).lean_convs == EngineSettings{}.lean_convs);
    QCOMPARE(warnings.size(), 1);
    auto* tiling = panel.findChild<QComboBox*>("tilingCombo");
    tiling->setCurrentIndex(tiling->findData(QString("exact")));
    QVERIFY(!lone->isEnabled() && !lean->isEnabled());
    tiling->setCurrentIndex(tiling->findData(QString("off")));
    QVERIFY(lone->isEnabled() && lean->isEnabled());
  }

  void asyncTilesCheckboxFollowsTiling() {
    SettingsPanel panel(std::make_shared<CpuCatalog>());
    auto* box = panel.findChild<QCheckBox*>("asyncTilesCheck");
    QVERIFY(box);
    QCOMPARE(box, panel.asyncTilesCheck());
    QVERIFY(box->isChecked());  // on by default
    QVERIFY(panel.settings().async_tiles);
    // Untiled (the sample clip or a file alike): enabled, with what it does in the tooltip.
    QVERIFY(box->isEnabled());
    QVERIFY2(box->toolTip().contains("overlap") && !box->toolTip().contains("Not available"),
             qPrintable(box->toolTip()));
    QSignalSpy changed(&panel, &SettingsPanel::settingsChanged);
    box->setChecked(false);
    QCOMPARE(changed.count(), 1);
    QVERIFY(!changed.last().first().value<EngineSettings>().async_tiles);
    QVERIFY(!panel.settings().async_tiles);
    box->setChecked(true);
    // Blend tiling: still enabled; exact tiling: disabled with the reason (the flag is kept).
    auto* tiling = panel.findChild<QComboBox*>("tilingCombo");
    tiling->setCurrentIndex(tiling->findData(QString("blend")));
    QVERIFY(box->isEnabled());
    tiling->setCurrentIndex(tiling->findData(QString("exact")));
    QVERIFY(!box->isEnabled());
    QVERIFY2(box->toolTip().contains("Not available") && box->toolTip().contains("exact tiling"),
             qPrintable(box->toolTip()));
    QVERIFY(panel.settings().async_tiles);
    tiling->setCurrentIndex(tiling->findData(QString("off")));
    QVERIFY(box->isEnabled());
    // Presets restore the flag, and setSettings() does not emit.
    EngineSettings off = panel.settings();
    off.async_tiles = false;
    const int before = changed.count();
    panel.setSettings(off);
    QCOMPARE(changed.count(), before);
    QVERIFY(!box->isChecked());
    QCOMPARE(panel.settings(), off);
    off.async_tiles = true;
    panel.setSettings(off);
    QVERIFY(box->isChecked());
    QCOMPARE(panel.settings(), off);
    EngineSettings exact = off;
    exact.tiling = TilingMode::kExact;
    QVERIFY(async_tiles_unavailable_reason(exact).contains("exact tiling"));
    exact.tiling = TilingMode::kBlend;
    QVERIFY(async_tiles_unavailable_reason(exact).isEmpty());
    QVERIFY(async_tiles_unavailable_reason(EngineSettings{}).isEmpty());
  }

  void predictionFromPlannerAndDryRun() {
    PredictionRequest r;
    r.weights = std::make_shared<VaeWeights>(synthesize_weights(VaeConfig::tiny(), kTinySeed));
    r.width = 256;
    r.height = 256;
    r.frames = 17;
    const Prediction untiled = predict_memory(r);
    QVERIFY2(untiled.ok, qPrintable(untiled.error));
    QVERIFY(untiled.weight_bytes > 0);
    QVERIFY(untiled.activation_bytes > 0);
    QVERIFY(untiled.dry_run_bytes > 0);
    QVERIFY(untiled.method.contains("planner"));
    r.settings.tiling = TilingMode::kBlend;
    r.settings.tile_width = r.settings.tile_height = 64;
    r.settings.overlap_width = r.settings.overlap_height = 16;
    const Prediction tiled = predict_memory(r);
    QVERIFY2(tiled.ok, qPrintable(tiled.error));
    QVERIFY2(tiled.activation_bytes < untiled.activation_bytes,
             qPrintable(QString("%1 vs %2").arg(tiled.activation_bytes).arg(untiled.activation_bytes)));
    // The planner fits a tile into a budget smaller than the untiled peak.
    r.settings.tiling = TilingMode::kOff;
    const BudgetFit fit = fit_to_budget(r, untiled.engine_bytes * 2 / 3);
    QVERIFY2(fit.ok, qPrintable(fit.message));
    QVERIFY(fit.tile_width > 0 && fit.tile_width <= 256);
  }

  void channelsAreBounded() {
    LatestChannel<int> latest;
    QVERIFY(latest.publish(1));   // first value notifies
    QVERIFY(!latest.publish(2));  // pending: no second notification, 1 is dropped
    QCOMPARE(latest.dropped(), 1LL);
    QCOMPARE(*latest.take(), 2);
    QVERIFY(!latest.take().has_value());
    QVERIFY(latest.publish(3));   // after take() a new value notifies again

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
    QCOMPARE(charts.timingGpuMs(0), -1.0);          // no device timer
    QCOMPARE(charts.timingGpuMs(1), 7.5);           // three stages of 2.5 ms
    QCOMPARE(charts.log().size(), 9);
    const QImage img = charts.render("timing", {600, 300});
    QCOMPARE(img.size(), QSize(600, 300));
    charts.clear();
    QCOMPARE(charts.allocatedSeries()->count(), 0);
  }

 private:
  QTemporaryDir dir_;
};

QTEST_MAIN(tst_StudioBasics)
#include "tst_studio_basics.moc"
