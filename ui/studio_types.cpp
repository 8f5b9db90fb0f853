#include "ui/studio_types.h"

#include <QFileInfo>
#include <QJsonDocument>
#include <QLocale>
#include <algorithm>
#include <cmath>

#include "ui/channels.h"

namespace seedvae::ui {

// ---- settings ---------------------------------------------------------------------------------

QJsonObject settings_to_json(const RunOptions& o) {
  return QJsonDocument::fromJson(QByteArray::fromStdString(to_json(o))).object();
}

RunOptions settings_from_json(const QJsonObject& json, QStringList* warnings) {
  std::vector<std::string> w;
  const QByteArray text = QJsonDocument(json).toJson(QJsonDocument::Compact);
  RunOptions o = run_options_from_json(std::string_view(text.constData(), text.size()), &w);
  if (warnings) {
    for (const std::string& m : w) *warnings << QString::fromStdString(m);
  }
  return o;
}

QString settings_summary(const RunOptions& o) {
  return QString::fromStdString(describe(o));
}

QString settings_label(const RunOptions& o) {
  return QString::fromStdString(short_label(o));
}

QString option_unavailable_reason(const RunOptions& o, std::string_view key) {
  const OptionSpec* spec = find_option(key);
  return spec ? QString::fromStdString(option_not_applicable(o, *spec)) : QString();
}

// ---- inputs -----------------------------------------------------------------------------------

QString input_display_name(const JobInput& in) {
  if (in.is_sample()) {
    return QStringLiteral("built-in sample clip %1x%2x%3")
        .arg(in.sample_width)
        .arg(in.sample_height)
        .arg(in.sample_frames);
  }
  return from_fs_path(in.path.filename());
}

std::filesystem::path to_fs_path(const QString& path) {
  return std::filesystem::path(path.toStdU16String());
}

QString from_fs_path(const std::filesystem::path& path) {
  return QString::fromStdU16String(path.u16string());
}

QString WeightsSpec::short_name() const {
  return is_builtin() ? builtin : QFileInfo(path).fileName();
}

QString WeightsSpec::display_name() const {
  if (is_builtin()) return QStringLiteral("built-in (synthetic %1)").arg(builtin);
  return QFileInfo(path).fileName();
}

std::string queue_weights(const WeightsSpec& spec) {
  if (spec.is_builtin()) return "synthetic:" + spec.builtin.toStdString();
  return to_fs_path(QFileInfo(spec.path).absoluteFilePath()).string();
}

WeightsSpec weights_spec_from_queue(const std::string& weights) {
  constexpr std::string_view kSynthetic = "synthetic:";
  WeightsSpec spec;
  if (weights.starts_with(kSynthetic)) {
    spec.builtin = QString::fromStdString(weights.substr(kSynthetic.size()));
  } else {
    spec.path = from_fs_path(weights);
    spec.builtin.clear();
  }
  return spec;
}

bool same_weights(const WeightsSpec& a, const WeightsSpec& b) {
  return queue_weights(a) == queue_weights(b);
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
    rows.push_back({QStringLiteral("Settings"), settings_summary(ab.a.settings),
                    settings_summary(ab.b.settings)});
    rows.push_back({QStringLiteral("Backend"), ab.a.backend_name, ab.b.backend_name});
  }
  rows.push_back({QStringLiteral("Status"), status(ab.a), status(ab.b)});
  rows.push_back({QStringLiteral("Weights"), ab.a.weights.short_name(), ab.b.weights.short_name()});
  auto family = [](const RunSummary& r) {
    return r.family.isEmpty() ? QStringLiteral("—") : r.family;
  };
  rows.push_back({QStringLiteral("Family"), family(ab.a), family(ab.b)});
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
  if (b >= 1024.0 * 1024 * 1024)
    return QString::number(b / (1024.0 * 1024 * 1024), 'f', 2) + " GiB";
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
  return QStringLiteral("%1 h %2 min")
      .arg(total / 3600)
      .arg((total % 3600) / 60, 2, 10, QLatin1Char('0'));
}

void register_studio_types() {
  qRegisterMetaType<RunOptions>();
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
