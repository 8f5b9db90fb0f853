#include "ui/studio_types.h"

#include <QFileInfo>
#include <QJsonDocument>
#include <QLocale>
#include <algorithm>
#include <cmath>

#include "ui/channels.h"

namespace seedvae::ui {

QString tiling_mode_name(TilingMode mode) {
  switch (mode) {
    case TilingMode::kOff: return QStringLiteral("off");
    case TilingMode::kBlend: return QStringLiteral("blend");
    case TilingMode::kExact: return QStringLiteral("exact");
  }
  return QStringLiteral("off");
}

TilingMode tiling_mode_from_name(const QString& name, bool* ok) {
  const QString n = name.trimmed().toLower();
  if (ok) *ok = true;
  if (n == QLatin1String("blend")) return TilingMode::kBlend;
  if (n == QLatin1String("exact")) return TilingMode::kExact;
  if (n != QLatin1String("off") && ok) *ok = false;
  return TilingMode::kOff;
}

// ---- EngineSettings ---------------------------------------------------------------------------

QJsonObject EngineSettings::to_json() const {
  QJsonObject t;
  for (auto it = toggles.begin(); it != toggles.end(); ++it) t[it.key()] = QJsonValue::fromVariant(it.value());
  return QJsonObject{
      {"backend", backend},
      {"device", device},
      {"precision", precision},
      {"toggles", t},
      {"tiling", tiling_mode_name(tiling)},
      {"tile_width", tile_width},
      {"tile_height", tile_height},
      {"overlap_width", overlap_width},
      {"overlap_height", overlap_height},
      {"tile_layout", tile_layout},
      {"exact_keep_weights", exact_keep_weights},
      {"chunk_latents", chunk_latents},
      {"hires_chunk_frames", hires_chunk_frames},
      {"budget_mib", budget_mib},
      {"temporal_pad", temporal_pad},
      {"spatial_multiple", spatial_multiple},
      {"prefetch", prefetch},
      {"async_tiles", async_tiles},
      {"lone_head", lone_head},
      {"lean_convs", lean_convs},
  };
}

namespace {

int clamped_int(const QJsonObject& j, const char* key, int def, int lo, int hi,
                QStringList* warnings) {
  const QJsonValue v = j.value(QLatin1String(key));
  if (v.isUndefined()) return def;
  if (!v.isDouble()) {
    if (warnings) *warnings << QStringLiteral("%1: not a number, using %2").arg(key).arg(def);
    return def;
  }
  const double d = v.toDouble();
  const int c = static_cast<int>(std::clamp(d, static_cast<double>(lo), static_cast<double>(hi)));
  if (warnings && (d < lo || d > hi)) {
    *warnings << QStringLiteral("%1: %2 is out of range, using %3").arg(key).arg(d).arg(c);
  }
  return c;
}

}  // namespace

EngineSettings EngineSettings::from_json(const QJsonObject& j, QStringList* warnings) {
  EngineSettings s;
  static const QStringList kKnown{"backend", "device", "precision", "toggles", "tiling",
                                  "tile_width", "tile_height", "overlap_width", "overlap_height",
                                  "tile_layout", "exact_keep_weights",
                                  "chunk_latents", "hires_chunk_frames", "budget_mib",
                                  "temporal_pad",
                                  "spatial_multiple", "prefetch", "async_tiles", "lone_head",
                                  "lean_convs"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kKnown.contains(it.key()) && warnings) *warnings << QStringLiteral("unknown key %1 ignored").arg(it.key());
  }
  if (j.value("backend").isString()) s.backend = j.value("backend").toString();
  s.device = clamped_int(j, "device", 0, 0, 64, warnings);
  if (j.value("precision").isString()) s.precision = j.value("precision").toString();
  const QJsonObject t = j.value("toggles").toObject();
  for (auto it = t.begin(); it != t.end(); ++it) s.toggles.insert(it.key(), it.value().toVariant());
  if (j.contains("tiling")) {
    bool ok = true;
    s.tiling = tiling_mode_from_name(j.value("tiling").toString(), &ok);
    if (!ok && warnings) *warnings << QStringLiteral("tiling: unknown mode, using off");
  }
  s.tile_width = clamped_int(j, "tile_width", s.tile_width, 16, 8192, warnings);
  s.tile_height = clamped_int(j, "tile_height", s.tile_height, 16, 8192, warnings);
  s.overlap_width = clamped_int(j, "overlap_width", s.overlap_width, 0, 2048, warnings);
  s.overlap_height = clamped_int(j, "overlap_height", s.overlap_height, 0, 2048, warnings);
  const QString layout = j.value("tile_layout").toString(s.tile_layout);
  if (layout == QLatin1String("reference") || layout == QLatin1String("uniform")) {
    s.tile_layout = layout;
  } else if (warnings) {
    *warnings << QStringLiteral("tile_layout: unknown layout %1, using reference").arg(layout);
  }
  s.exact_keep_weights = j.value("exact_keep_weights").toBool(s.exact_keep_weights);
  s.chunk_latents = clamped_int(j, "chunk_latents", s.chunk_latents, 0, 4096, warnings);
  s.hires_chunk_frames =
      clamped_int(j, "hires_chunk_frames", s.hires_chunk_frames, 0, 4096, warnings);
  s.budget_mib = clamped_int(j, "budget_mib", s.budget_mib, 0, 1 << 24, warnings);
  const QString pad = j.value("temporal_pad").toString(s.temporal_pad);
  if (pad == QLatin1String("mirror") || pad == QLatin1String("repeat-last")) {
    s.temporal_pad = pad;
  } else if (warnings) {
    *warnings << QStringLiteral("temporal_pad: unknown mode %1, using mirror").arg(pad);
  }
  const int mult = clamped_int(j, "spatial_multiple", 8, 8, 16, warnings);
  s.spatial_multiple = mult >= 12 ? 16 : 8;
  const QJsonValue prefetch = j.value("prefetch");
  if (prefetch.isBool()) {
    s.prefetch = prefetch.toBool();
  } else if (!prefetch.isUndefined() && warnings) {
    *warnings << QStringLiteral("prefetch: not true or false, using %1").arg(s.prefetch ? "true" : "false");
  }
  const QJsonValue async_tiles = j.value("async_tiles");
  if (async_tiles.isBool()) {
    s.async_tiles = async_tiles.toBool();
  } else if (!async_tiles.isUndefined() && warnings) {
    *warnings << QStringLiteral("async_tiles: not true or false, using %1").arg(s.async_tiles ? "true" : "false");
  }
  for (auto [key, flag] : {std::pair<const char*, bool*>{"lone_head", &s.lone_head},
                           std::pair<const char*, bool*>{"lean_convs", &s.lean_convs}}) {
    const QJsonValue v = j.value(QLatin1String(key));
    if (v.isBool()) {
      *flag = v.toBool();
    } else if (!v.isUndefined() && warnings) {
      *warnings << QStringLiteral("%1: not true or false, using %2").arg(key, *flag ? "true" : "false");
    }
  }
  return s;
}

QString EngineSettings::summary() const {
  QString s = QStringLiteral("%1 %2, chunk %3").arg(backend, precision,
                                                    chunk_latents == 0 ? QStringLiteral("whole clip")
                                                                       : QString::number(chunk_latents));
  if (hires_chunk_frames > 0) s += QStringLiteral(", hi-res pieces %1").arg(hires_chunk_frames);
  if (lone_head) s += QStringLiteral(", lone head");
  if (lean_convs) s += QStringLiteral(", lean convs");
  if (!prefetch) s += QStringLiteral(", no prefetch");
  if (!async_tiles) s += QStringLiteral(", no async tiles");
  if (tiling == TilingMode::kOff) {
    s += QStringLiteral(", untiled");
  } else {
    s += QStringLiteral(", %1 tiles %2x%3 overlap %4x%5")
             .arg(tiling_mode_name(tiling))
             .arg(tile_width)
             .arg(tile_height)
             .arg(overlap_width)
             .arg(overlap_height);
  }
  for (auto it = toggles.begin(); it != toggles.end(); ++it) {
    s += QStringLiteral(", %1=%2").arg(it.key(), it.value().toString());
  }
  return s;
}

QString EngineSettings::short_label() const {
  QString s = tiling == TilingMode::kOff
                  ? QStringLiteral("untiled")
                  : QStringLiteral("%1 %2×%3").arg(tiling_mode_name(tiling)).arg(tile_width).arg(tile_height);
  s += chunk_latents == 0 ? QStringLiteral(", whole clip") : QStringLiteral(", chunk %1").arg(chunk_latents);
  if (hires_chunk_frames > 0) s += QStringLiteral(", hi-res %1 f").arg(hires_chunk_frames);
  if (lone_head) s += QStringLiteral(", lone head");
  if (lean_convs) s += QStringLiteral(", lean");
  if (!prefetch) s += QStringLiteral(", no prefetch");
  if (!async_tiles) s += QStringLiteral(", no async tiles");
  if (backend != QLatin1String("cpu")) s = backend + QStringLiteral(" ") + precision + QStringLiteral(", ") + s;
  return s;
}

QString EngineSettings::backend_key() const {
  QString k = backend + QLatin1Char(':') + QString::number(device) + QLatin1Char(':') + precision;
  for (auto it = toggles.begin(); it != toggles.end(); ++it) {
    k += QLatin1Char(';') + it.key() + QLatin1Char('=') + it.value().toString();
  }
  return k;
}

bool EngineSettings::operator==(const EngineSettings& o) const {
  return backend == o.backend && device == o.device && precision == o.precision &&
         toggles == o.toggles && tiling == o.tiling && tile_width == o.tile_width &&
         tile_height == o.tile_height && overlap_width == o.overlap_width &&
         overlap_height == o.overlap_height && tile_layout == o.tile_layout &&
         exact_keep_weights == o.exact_keep_weights && chunk_latents == o.chunk_latents &&
         hires_chunk_frames == o.hires_chunk_frames && budget_mib == o.budget_mib && temporal_pad == o.temporal_pad &&
         spatial_multiple == o.spatial_multiple && prefetch == o.prefetch &&
         async_tiles == o.async_tiles && lone_head == o.lone_head && lean_convs == o.lean_convs;
}

QString prefetch_unavailable_reason(const EngineSettings& s, bool sample_input) {
  if (s.tiling != TilingMode::kOff) {
    return QStringLiteral("%1 tiling encodes every tile over the whole clip, so it needs all frames "
                          "in memory before it starts")
        .arg(tiling_mode_name(s.tiling));
  }
  if (sample_input) {
    return QStringLiteral("the sample clip is generated in memory: there are no frames to read ahead");
  }
  if (s.chunk_latents == 0) {
    return QStringLiteral("the whole clip is encoded in one chunk: nothing to overlap the reading with");
  }
  return {};
}

QString async_tiles_unavailable_reason(const EngineSettings& s) {
  if (s.tiling == TilingMode::kExact) {
    return QStringLiteral("exact tiling moves its windows through host memory layer by layer, "
                          "with no chunk or tile output to overlap");
  }
  return {};
}

// ---- inputs -----------------------------------------------------------------------------------

QString InputSpec::display_name() const {
  if (is_sample()) {
    return QStringLiteral("built-in sample clip %1x%2x%3")
        .arg(sample_width)
        .arg(sample_height)
        .arg(sample_frames);
  }
  return QFileInfo(path).fileName();
}

QJsonObject InputSpec::to_json() const {
  QJsonObject j{{"first_frame", first_frame}, {"max_frames", max_frames}, {"stride", stride},
                {"resize_width", resize_width}, {"resize_height", resize_height}};
  if (is_sample()) {
    j["sample"] = QJsonObject{{"width", sample_width}, {"height", sample_height},
                              {"frames", sample_frames}};
  } else {
    j["path"] = path;
  }
  return j;
}

QString InputSpec::cache_key() const {
  return QString::fromUtf8(QJsonDocument(to_json()).toJson(QJsonDocument::Compact));
}

QString WeightsSpec::display_name() const {
  if (is_builtin()) return QStringLiteral("built-in (synthetic %1)").arg(builtin);
  return QFileInfo(path).fileName();
}

// ---- A/B table --------------------------------------------------------------------------------

namespace {

QString num(double v, int decimals, const QString& unit = {}) {
  if (!std::isfinite(v)) return v > 0 ? QStringLiteral("∞") : QStringLiteral("—");
  QString s = QString::number(v, 'f', decimals);
  return unit.isEmpty() ? s : s + QLatin1Char(' ') + unit;
}

QString sci(double v) {
  if (!std::isfinite(v)) return QStringLiteral("—");
  return QString::number(v, 'e', 2);
}

}  // namespace

QVector<AbRow> ab_table_rows(const AbComparison& ab, bool compact) {
  auto status = [](const RunSummary& r) {
    if (r.ok) return QStringLiteral("done");
    if (r.cancelled) return QStringLiteral("cancelled");
    return QStringLiteral("failed: ") + r.error;
  };
  QVector<AbRow> rows;
  if (!compact) {
    rows.push_back({QStringLiteral("Settings"), ab.a.settings.summary(), ab.b.settings.summary()});
    rows.push_back({QStringLiteral("Backend"), ab.a.backend_name, ab.b.backend_name});
  }
  rows.push_back({QStringLiteral("Status"), status(ab.a), status(ab.b)});
  rows.push_back({QStringLiteral("Time per frame"), num(ab.a.ms_per_frame, 1, "ms"),
                  num(ab.b.ms_per_frame, 1, "ms")});
  rows.push_back({QStringLiteral("Encode + decode"), num(ab.a.encode_s + ab.a.decode_s, 2, "s"),
                  num(ab.b.encode_s + ab.b.decode_s, 2, "s")});
  rows.push_back({QStringLiteral("Peak engine memory"), format_bytes(ab.a.peak_bytes),
                  format_bytes(ab.b.peak_bytes)});
  rows.push_back({QStringLiteral("PSNR vs original"), num(ab.a.vs_original.psnr_db, 2, "dB"),
                  num(ab.b.vs_original.psnr_db, 2, "dB")});
  rows.push_back({QStringLiteral("SSIM vs original"), num(ab.a.vs_original.ssim, 4),
                  num(ab.b.vs_original.ssim, 4)});
  if (ab.a.tiled() || ab.b.tiled()) {
    rows.push_back({QStringLiteral("Seam energy (1 = seamless)"), num(ab.a.seam_energy, 3),
                    num(ab.b.seam_energy, 3)});
    rows.push_back({QStringLiteral("Largest tile offset"), num(ab.a.max_tile_offset, 2, "levels"),
                    num(ab.b.max_tile_offset, 2, "levels")});
  }
  rows.push_back({QStringLiteral("A vs B max |diff|"), sci(ab.a_vs_b.max_abs), QString()});
  rows.push_back({QStringLiteral("A vs B PSNR"), num(ab.a_vs_b.psnr_db, 2, "dB"), QString()});
  if (!ab.tiled_slot.isEmpty()) {
    rows.push_back({QStringLiteral("A vs B |tiled − untiled| max / rms"),
                    QStringLiteral("%1 / %2 levels (%3 tiled)")
                        .arg(num(ab.seam_max_abs, 2), num(ab.seam_rms, 3), ab.tiled_slot),
                    QString()});
  }
  return rows;
}

// ---- formatting -------------------------------------------------------------------------------

QString format_bytes(qint64 bytes) {
  if (bytes < 0) return QStringLiteral("—");
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return QString::number(b / (1024.0 * 1024 * 1024), 'f', 2) + " GiB";
  if (b >= 1024.0 * 1024) return QString::number(b / (1024.0 * 1024), 'f', 1) + " MiB";
  if (b >= 1024.0) return QString::number(b / 1024.0, 'f', 1) + " KiB";
  return QString::number(bytes) + " B";
}

QString format_seconds(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return QStringLiteral("—");
  if (s < 60) return QString::number(s, 'f', s < 10 ? 1 : 0) + " s";
  const int total = static_cast<int>(std::lround(s));
  if (total < 3600) {
    return QStringLiteral("%1 min %2 s").arg(total / 60).arg(total % 60, 2, 10, QLatin1Char('0'));
  }
  return QStringLiteral("%1 h %2 min").arg(total / 3600).arg((total % 3600) / 60, 2, 10,
                                                              QLatin1Char('0'));
}

void register_studio_types() {
  qRegisterMetaType<EngineSettings>();
  qRegisterMetaType<RunRequest>();
  qRegisterMetaType<ProgressUpdate>();
  qRegisterMetaType<TelemetryPoint>();
  qRegisterMetaType<FrameUpdate>();
  qRegisterMetaType<RunSummary>();
  qRegisterMetaType<AbComparison>();
  qRegisterMetaType<WeightsInfo>();
  qRegisterMetaType<VideoInfoData>();
  qRegisterMetaType<DeviceStatus>();
  qRegisterMetaType<QVector<TelemetryPoint>>();
  qRegisterMetaType<QVector<DeviceStatus>>();
}

}  // namespace seedvae::ui
