// The run report: Markdown + JSON + PNG stills (original, reconstruction, difference heatmap, A vs
// B) + the charts + the reconstructed video(s). Written by the engine worker thread (OpenCV's
// writer runs there, ARCHITECTURE.md "Threads"); the charts are rendered to images on the GUI
// thread beforehand and travel in the job as QImages.
#pragma once

#include <QImage>
#include <QJsonObject>
#include <QMap>
#include <QString>
#include <QStringList>
#include <optional>

#include "core/base/cancel.h"
#include "ui/studio_types.h"

namespace seedvae::ui {

struct ReportJob {
  QString directory;         // created if missing; existing report files are replaced
  QVector<RunSummary> runs;  // one run, or A then B
  std::optional<AbComparison> ab;
  WeightsInfo weights;  // strings only are used
  QString input_description;
  QMap<QString, QImage> charts;  // "memory", "timing"
  bool write_video = true;
  QString video_extension = QStringLiteral(".mp4");
  double diff_gain = 4;
  int stills = 3;  // frames per run: first, middle, last
};

struct ReportResult {
  bool ok = false;
  QString directory;
  QStringList files;  // relative to directory
  QString error;
};

ReportResult write_report(const ReportJob& job, const CancelToken* cancel = nullptr);

// The JSON document of the report (also used by tests).
QJsonObject report_json(const ReportJob& job, const QStringList& files);
QJsonObject run_summary_json(const RunSummary& r, bool with_telemetry);

// Indices of the stills for a clip of `frames` frames.
QVector<qint64> still_indices(qint64 frames, int count);

}  // namespace seedvae::ui

Q_DECLARE_METATYPE(seedvae::ui::ReportResult)
