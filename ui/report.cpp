#include "ui/report.h"

#include <QBuffer>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QPainter>
#include <QSysInfo>
#include <cmath>

#include "core/io/output_path.h"
#include "core/media/video_io.h"
#include "ui/channels.h"
#include "ui/charts_panel.h"
#include "ui/image_convert.h"

namespace seedvae::ui {

namespace {

QJsonValue num(double v) {
  return std::isfinite(v) ? QJsonValue(v) : QJsonValue();
}

QJsonObject quality_json(const QualityNumbers& q) {
  return {{"psnr_db", num(q.psnr_db)},
          {"ssim", num(q.ssim)},
          {"max_abs", num(q.max_abs)},
          {"rms", num(q.rms)}};
}

QString tag_of(const RunSummary& r) {
  return r.slot.isEmpty() ? QStringLiteral("run") : r.slot;
}

// Every report file is written whole or not at all, each write and the flush to the device
// checked (core/io/output_path.h): a full disk leaves no empty or truncated file.
bool save_bytes(const QString& path, const QByteArray& data, QString* error) {
  const Status st = write_file_atomic(
      to_fs_path(path), std::as_bytes(std::span<const char>(data.constData(), data.size())));
  if (!st.is_ok()) *error = QString::fromStdString(st.to_string());
  return st.is_ok();
}

bool save_text(const QString& path, const QByteArray& data, QString* error) {
  return save_bytes(path, data, error);
}

QString md_cell(QString s) {
  return s.replace(QLatin1Char('|'), QStringLiteral("\\|")).replace('\n', ' ');
}

QString fmt(double v, int decimals, const QString& unit = {}) {
  if (!std::isfinite(v)) return v > 0 ? QStringLiteral("∞") : QStringLiteral("—");
  return QString::number(v, 'f', decimals) + (unit.isEmpty() ? QString() : QLatin1Char(' ') + unit);
}

QImage side_by_side(const QImage& a, const QImage& b, const QString& la, const QString& lb) {
  if (a.isNull() || b.isNull()) return {};
  const int gap = 6;
  QImage out(a.width() + b.width() + gap, std::max(a.height(), b.height()), QImage::Format_RGB32);
  out.fill(QColor(32, 33, 36));
  QPainter p(&out);
  p.drawImage(0, 0, a);
  p.drawImage(a.width() + gap, 0, b);
  p.setPen(Qt::white);
  QFont f = p.font();
  f.setPixelSize(std::max(10, out.height() / 24));
  p.setFont(f);
  p.fillRect(QRect(4, 4, p.fontMetrics().horizontalAdvance(la) + 8, p.fontMetrics().height() + 4),
             QColor(0, 0, 0, 160));
  p.drawText(8, 4 + p.fontMetrics().ascent() + 2, la);
  p.fillRect(QRect(a.width() + gap + 4, 4, p.fontMetrics().horizontalAdvance(lb) + 8,
                   p.fontMetrics().height() + 4),
             QColor(0, 0, 0, 160));
  p.drawText(a.width() + gap + 8, 4 + p.fontMetrics().ascent() + 2, lb);
  return out;
}

}  // namespace

QVector<qint64> still_indices(qint64 frames, int count) {
  QVector<qint64> out;
  if (frames <= 0 || count <= 0) return out;
  if (count == 1 || frames == 1) return {0};
  for (int i = 0; i < count; ++i) {
    const qint64 f = std::llround(static_cast<double>(i) * (frames - 1) / (count - 1));
    if (out.isEmpty() || out.back() != f) out.push_back(f);
  }
  return out;
}

QJsonObject run_summary_json(const RunSummary& r, bool with_telemetry) {
  QJsonObject j{
      {"slot", r.slot},
      {"status", r.ok ? "done" : (r.cancelled ? "cancelled" : "failed")},
      {"error", r.error},
      {"settings", settings_to_json(r.settings)},
      {"settings_summary", settings_summary(r.settings)},
      {"backend", r.backend_name},
      {"weights", r.weights_source},
      {"weights_spec", QString::fromStdString(queue_weights(r.weights))},
      {"family", r.family},
      {"input", r.input_name},
      {"width", r.width},
      {"height", r.height},
      {"padded_width", r.padded_width},
      {"padded_height", r.padded_height},
      {"frames", r.frames},
      {"padded_frames", r.padded_frames},
      {"fps", r.fps},
      {"seconds", QJsonObject{{"read_and_setup", r.read_s},
                              {"encode", r.encode_s},
                              {"decode", r.decode_s},
                              {"metrics", r.metrics_s},
                              {"total", r.total_s},
                              {"read_wait", r.read_wait_s},
                              {"read_overlapped", r.read_overlap_s}}},
      {"prefetch", QJsonObject{{"used", r.prefetch}, {"note", r.prefetch_note}}},
      {"async_tiles", QJsonObject{{"used", r.async_tiles}, {"note", r.async_tiles_note}}},
      {"plan_note", r.plan_note},
      {"warnings", QJsonArray::fromStringList(r.warnings)},
      {"ms_per_frame", r.ms_per_frame},
      {"peak_engine_bytes", r.peak_bytes},
      {"weight_bytes", r.weight_bytes},
      {"predicted_peak_bytes", r.predicted_peak_bytes},
      {"process_peak_rss_bytes", r.process_peak_bytes},
      {"vs_original", quality_json(r.vs_original)},
  };
  if (!r.overlay.tiles.isEmpty()) {
    QJsonArray tiles;
    for (int i = 0; i < r.overlay.tiles.size(); ++i) {
      const QRect& t = r.overlay.tiles[i];
      QJsonObject o{{"x", t.x()}, {"y", t.y()}, {"w", t.width()}, {"h", t.height()}};
      if (i < r.overlay.tile_offset.size()) o["mean_offset_levels"] = num(r.overlay.tile_offset[i]);
      tiles.push_back(o);
    }
    j["tiles"] = tiles;
    j["tile_plan"] = r.overlay.note;
  }
  if (with_telemetry) {
    QJsonArray t;
    for (const TelemetryPoint& p : r.telemetry) {
      t.push_back(QJsonObject{{"t_s", p.t_s},
                              {"op", p.op},
                              {"stage", p.stage},
                              {"chunk", p.chunk},
                              {"tile", p.tile},
                              {"wall_ms", p.wall_ms},
                              {"device_ms", p.device_ms},
                              {"current_bytes", p.current_bytes},
                              {"peak_bytes", p.peak_bytes},
                              {"device_used_bytes", p.device_used_bytes}});
    }
    j["telemetry"] = t;
  }
  return j;
}

QJsonObject report_json(const ReportJob& job, const QStringList& files) {
  QJsonObject j{{"format", "seedvae-studio-report"},
                {"version", 1},
                {"seedvae_version", SEEDVAE_VERSION},
                {"created", QDateTime::currentDateTime().toString(Qt::ISODate)},
                {"machine", QSysInfo::prettyProductName() + QStringLiteral(", ") +
                                QSysInfo::currentCpuArchitecture()},
                {"input", job.input_description},
                {"weights", QJsonObject{{"source", job.weights.source},
                                        {"config", job.weights.config},
                                        {"dtype", job.weights.dtype},
                                        {"parameters", job.weights.parameters},
                                        {"sha256", job.weights.sha256}}}};
  QJsonArray runs;
  for (const RunSummary& r : job.runs) runs.push_back(run_summary_json(r, true));
  j["runs"] = runs;
  if (job.ab) {
    QJsonArray rows;
    for (const AbRow& row : ab_table_rows(*job.ab)) {
      rows.push_back(QJsonObject{{"metric", row.label}, {"A", row.a}, {"B", row.b}});
    }
    j["ab"] = QJsonObject{{"ok", job.ab->ok},
                          {"error", job.ab->error},
                          {"a_vs_b", quality_json(job.ab->a_vs_b)},
                          {"table", rows}};
  }
  j["files"] = QJsonArray::fromStringList(files);
  return j;
}

ReportResult write_report(const ReportJob& job, const CancelToken* cancel) {
  ReportResult res;
  res.directory = QFileInfo(job.directory).absoluteFilePath();
  QDir dir(res.directory);
  if (!QDir().mkpath(res.directory) || !dir.mkpath(QStringLiteral("stills")) ||
      !dir.mkpath(QStringLiteral("charts"))) {
    res.error = QStringLiteral("cannot create %1").arg(res.directory);
    return res;
  }
  QStringList warnings;
  auto save_image = [&](const QImage& img, const QString& rel) {
    if (img.isNull()) return;
    QByteArray png;
    QBuffer buffer(&png);
    QString error;
    if (!buffer.open(QIODevice::WriteOnly) || !img.save(&buffer, "PNG")) {
      warnings << QStringLiteral("could not encode %1").arg(rel);
    } else if (save_bytes(dir.filePath(rel), png, &error)) {
      res.files << rel;
    } else {
      warnings << QStringLiteral("could not write %1: %2").arg(rel, error);
    }
  };

  // ---- stills ----
  struct StillRow {
    QString tag;
    qint64 frame;
    QString original, reconstruction, difference;
  };
  QVector<StillRow> still_rows;
  for (const RunSummary& r : job.runs) {
    if (!r.store) continue;
    for (qint64 i : still_indices(std::min<qint64>(r.frames, r.store->available()), job.stills)) {
      if (cancel && cancel->requested()) break;
      const QString base =
          QStringLiteral("stills/%1_frame_%2").arg(tag_of(r)).arg(i, 4, 10, QLatin1Char('0'));
      const QImage orig = r.store->original(i), rec = r.store->frame(i);
      StillRow row{tag_of(r), i, base + "_original.png", base + "_reconstruction.png",
                   base + QStringLiteral("_difference_x%1.png").arg(job.diff_gain)};
      save_image(orig, row.original);
      save_image(rec, row.reconstruction);
      save_image(difference_heatmap(orig, rec, job.diff_gain), row.difference);
      still_rows.push_back(row);
    }
  }
  QVector<StillRow> ab_rows;
  if (job.ab && job.ab->a.store && job.ab->b.store) {
    const qint64 n = std::min(job.ab->a.store->available(), job.ab->b.store->available());
    for (qint64 i : still_indices(n, job.stills)) {
      const QImage a = job.ab->a.store->frame(i), b = job.ab->b.store->frame(i);
      const QString base = QStringLiteral("stills/ab_frame_%1").arg(i, 4, 10, QLatin1Char('0'));
      StillRow row{QStringLiteral("A vs B"),
                   i,
                   {},
                   base + "_side_by_side.png",
                   base + QStringLiteral("_difference_x%1.png").arg(job.diff_gain)};
      save_image(side_by_side(a, b, QStringLiteral("A"), QStringLiteral("B")), row.reconstruction);
      save_image(difference_heatmap(a, b, job.diff_gain), row.difference);
      ab_rows.push_back(row);
    }
  }
  // ---- charts ----
  for (auto it = job.charts.begin(); it != job.charts.end(); ++it) {
    save_image(it.value(), QStringLiteral("charts/%1.png").arg(it.key()));
  }
  // ---- videos ----
  if (job.write_video) {
    for (const RunSummary& r : job.runs) {
      // (A run that failed before decoding anything has no video.)
      if (!r.reconstruction || r.reconstruction->frames() == 0 || (cancel && cancel->requested()))
        continue;
      const QString rel = QStringLiteral("reconstruction_%1%2").arg(tag_of(r), job.video_extension);
      const media::WriteOptions wo = write_options(r.settings, r.fps > 0 ? r.fps : 24, &r.input);
      const std::filesystem::path path = to_fs_path(dir.filePath(rel));
      Status st =
          check_output_against(path, JobKind::kRoundTrip, r.input, r.weights_source.toStdString());
      if (st.is_ok()) st = media::write_clip(path, *r.reconstruction, wo, cancel);
      if (st.is_ok()) {
        res.files << rel;
      } else {
        warnings << QStringLiteral("video %1 not written: %2")
                        .arg(rel, QString::fromStdString(st.to_string()));
      }
    }
  }
  if (cancel && cancel->requested()) {
    res.error = QStringLiteral("cancelled");
    return res;
  }

  // ---- Markdown ----
  QString md;
  QTextStream s(&md);
  s << "# SeedVAE Studio report\n\n";
  s << "Created " << QDateTime::currentDateTime().toString(Qt::ISODate) << " by SeedVAE Studio "
    << SEEDVAE_VERSION << " on " << QSysInfo::prettyProductName() << ".\n\n";
  s << "## Input and model\n\n";
  s << "- Input: " << job.input_description << "\n";
  if (!job.runs.isEmpty()) {
    const RunSummary& r = job.runs.front();
    s << "- Frames: " << r.frames << " of " << r.width << "×" << r.height << " at "
      << QString::number(r.fps, 'g', 4) << " fps; the engine saw " << r.padded_frames
      << " frames of " << r.padded_width << "×" << r.padded_height
      << " (padded to 4n+1 frames and the model's spatial multiple, removed after decoding; each "
         "run's in the table below)\n";
  }
  s << "- Weights: " << job.weights.source << "\n";
  s << "- Model: " << job.weights.config << ", " << job.weights.dtype << ", "
    << job.weights.parameters << " parameters, sha256 `" << job.weights.sha256 << "`\n\n";
  // An A/B across weights: what each side ran on (the lines above describe the loaded model).
  if (job.runs.size() == 2 && !same_weights(job.runs[0].weights, job.runs[1].weights)) {
    s << "- A and B ran on different weights:\n";
    for (const RunSummary& r : job.runs) {
      s << "  - " << tag_of(r) << ": " << r.weights.display_name()
        << (r.family.isEmpty() ? QString() : QStringLiteral(", ") + r.family)
        << (r.weights_source.isEmpty() ? QString() : QStringLiteral(" — ") + r.weights_source)
        << "\n";
    }
    s << "\n";
  }
  if (job.weights.synthetic) {
    s << "> The built-in weights are synthetic (a deterministic recipe, not a trained model): the "
         "reconstruction is expected to look like noise. The numbers show the engine at work.\n\n";
  }
  s << "## Results\n\n";
  s << "| |";
  for (const RunSummary& r : job.runs)
    s << " " << (r.slot.isEmpty() ? QStringLiteral("run") : r.slot) << " |";
  s << "\n|---|";
  for (int i = 0; i < job.runs.size(); ++i) s << "---|";
  s << "\n";
  auto row = [&](const QString& label, auto&& value) {
    s << "| " << label << " |";
    for (const RunSummary& r : job.runs) s << " " << md_cell(value(r)) << " |";
    s << "\n";
  };
  row("Settings", [](const RunSummary& r) { return settings_summary(r.settings); });
  row("Backend", [](const RunSummary& r) { return r.backend_name; });
  row("Weights", [](const RunSummary& r) {
    return r.family.isEmpty() ? r.weights.display_name()
                              : QStringLiteral("%1, %2").arg(r.weights.display_name(), r.family);
  });
  row("Frames the engine saw", [](const RunSummary& r) {
    return QStringLiteral("%1 of %2×%3")
        .arg(r.padded_frames)
        .arg(r.padded_width)
        .arg(r.padded_height);
  });
  row("Status", [](const RunSummary& r) {
    return r.ok ? QStringLiteral("done") : (r.cancelled ? QStringLiteral("cancelled") : r.error);
  });
  row("Time per frame (encode + decode)",
      [](const RunSummary& r) { return fmt(r.ms_per_frame, 1, "ms"); });
  row("Encode / decode", [](const RunSummary& r) {
    return fmt(r.encode_s, 2, "s") + " / " + fmt(r.decode_s, 2, "s");
  });
  row("Frame prefetch", [](const RunSummary& r) {
    if (r.prefetch) {
      return QStringLiteral(
                 "on: reading overlapped encoding for %1; the engine waited %2 for frames")
          .arg(fmt(r.read_overlap_s, 2, "s"), fmt(r.read_wait_s, 2, "s"));
    }
    return QStringLiteral("not used (%1)")
        .arg(r.prefetch_note.isEmpty() ? QStringLiteral("—") : r.prefetch_note);
  });
  row("Async tiles", [](const RunSummary& r) {
    if (r.async_tiles) return QStringLiteral("on");
    return r.async_tiles_note.isEmpty() ? QStringLiteral("—") : r.async_tiles_note;
  });
  row("Memory plan", [](const RunSummary& r) {
    return r.plan_note.isEmpty() ? QStringLiteral("as set") : r.plan_note;
  });
  row("Warnings", [](const RunSummary& r) {
    return r.warnings.isEmpty() ? QStringLiteral("none") : r.warnings.join(QStringLiteral("; "));
  });
  row("Peak engine memory (weights included)",
      [](const RunSummary& r) { return format_bytes(r.peak_bytes); });
  row("Predicted peak", [](const RunSummary& r) { return format_bytes(r.predicted_peak_bytes); });
  row("Process peak RSS", [](const RunSummary& r) { return format_bytes(r.process_peak_bytes); });
  row("PSNR vs original", [](const RunSummary& r) { return fmt(r.vs_original.psnr_db, 2, "dB"); });
  row("SSIM vs original", [](const RunSummary& r) { return fmt(r.vs_original.ssim, 4); });
  row("Max abs vs original", [](const RunSummary& r) { return fmt(r.vs_original.max_abs, 4); });
  s << "\n";
  if (job.ab) {
    s << "## A vs B\n\n| Metric | A | B |\n|---|---|---|\n";
    for (const AbRow& r : ab_table_rows(*job.ab)) {
      s << "| " << md_cell(r.label) << " | " << md_cell(r.a) << " | " << md_cell(r.b) << " |\n";
    }
    if (!job.ab->ok) s << "\nComparison incomplete: " << job.ab->error << "\n";
    s << "\n";
  }
  // Time by stage, summed over chunks and tiles (the studio's telemetry is deferred:
  // core/base/telemetry.h).
  s << "## Time by stage\n\nTime per stage, summed over chunks and tiles: on a GPU the device's "
       "time from CUDA events (GPU, in parentheses; the stages are not drained one by one, so "
       "the run keeps its speed), on the CPU the wall time.\n\n| Stage |";
  for (const RunSummary& r : job.runs) s << " " << tag_of(r) << " (ms) |";
  s << "\n|---|";
  for (int i = 0; i < job.runs.size(); ++i) s << "---:|";
  s << "\n";
  QStringList stages;
  for (const RunSummary& r : job.runs) {
    for (const TelemetryPoint& p : r.telemetry) {
      if (p.op != QLatin1String("run") && !stages.contains(p.stage)) stages << p.stage;
    }
  }
  for (const QString& st : stages) {
    s << "| " << st << " |";
    for (const RunSummary& r : job.runs) {
      double ms = 0, gpu = 0;
      bool has_gpu = false;
      for (const TelemetryPoint& p : r.telemetry) {
        if (p.stage != st) continue;
        ms += p.wall_ms;
        if (p.device_ms >= 0) {
          gpu += p.device_ms;
          has_gpu = true;
        }
      }
      s << " " << QString::number(ms, 'f', 1);
      if (has_gpu) s << " (GPU " << QString::number(gpu, 'f', 1) << ")";
      s << " |";
    }
    s << "\n";
  }
  s << "\n";
  for (const RunSummary& r : job.runs) {
    if (r.overlay.tiles.isEmpty()) continue;
    s << "Tiles of " << tag_of(r) << ": " << r.overlay.note
      << " (per-tile mean offset in 8-bit levels:";
    for (int i = 0; i < r.overlay.tile_offset.size(); ++i) {
      s << " " << i << ": " << fmt(r.overlay.tile_offset[i], 2);
    }
    s << ")\n\n";
  }
  if (!job.charts.isEmpty()) {
    s << "## Charts\n\n";
    for (auto it = job.charts.begin(); it != job.charts.end(); ++it) {
      s << "![" << it.key() << "](charts/" << it.key() << ".png)\n\n";
    }
  }
  if (!still_rows.isEmpty()) {
    s << "## Stills\n\nDifference: mean absolute RGB difference × " << job.diff_gain
      << " through the heat colour map (black = equal).\n\n";
    s << "| Run | Frame | Original | Reconstruction | Difference |\n|---|---|---|---|---|\n";
    for (const StillRow& r : still_rows) {
      s << "| " << r.tag << " | " << r.frame << " | ![](" << r.original << ") | ![]("
        << r.reconstruction << ") | ![](" << r.difference << ") |\n";
    }
    s << "\n";
  }
  if (!ab_rows.isEmpty()) {
    s << "| A vs B | Frame | A and B | Difference |\n|---|---|---|---|\n";
    for (const StillRow& r : ab_rows) {
      s << "| " << r.tag << " | " << r.frame << " | ![](" << r.reconstruction << ") | ![]("
        << r.difference << ") |\n";
    }
    s << "\n";
  }
  if (!warnings.isEmpty()) {
    s << "## Warnings\n\n";
    for (const QString& w : warnings) s << "- " << w << "\n";
  }
  s.flush();
  QString error;
  if (!save_text(dir.filePath("report.md"), md.toUtf8(), &error)) {
    res.error = error;
    return res;
  }
  res.files.prepend(QStringLiteral("report.md"));
  res.files.insert(1, QStringLiteral("report.json"));
  const QJsonDocument doc(report_json(job, res.files));
  if (!save_text(dir.filePath("report.json"), doc.toJson(QJsonDocument::Indented), &error)) {
    res.error = error;
    return res;
  }
  res.ok = true;
  if (!warnings.isEmpty()) res.error = warnings.join(QStringLiteral("; "));
  return res;
}

}  // namespace seedvae::ui
