// Value types that cross the boundary between the GUI thread and the engine worker thread
// (ARCHITECTURE.md, "Threads"). Everything here is copyable; the only shared pieces are immutable
// host data (std::shared_ptr<const ...>), the thread-safe FrameStore and the CancelToken, whose
// contracts are stated where they are declared.
#pragma once

#include <QImage>
#include <QJsonObject>
#include <QMap>
#include <QMetaType>
#include <QRect>
#include <QString>
#include <QVariant>
#include <QVector>
#include <filesystem>
#include <limits>
#include <memory>

#include "core/base/cancel.h"
#include "core/pipeline/job.h"
#include "core/pipeline/run_options.h"
#include "core/tensor/host_tensor.h"

namespace seedvae {
struct VaeWeights;
struct TileRunReport;
}  // namespace seedvae

namespace seedvae::ui {

class FrameStore;

// ---- settings ---------------------------------------------------------------------------------

// The studio's settings are the run options of the job layer (core/pipeline/run_options.h): one
// table declares every option with its widget, tooltip and preset key, so the settings panel,
// presets, reports and the CLI offer the same options.
// Presets and the report: the table's JSON as a QJsonObject. Unknown keys are ignored, values of
// the wrong type or out of range keep the default; `warnings` (optional) lists both.
QJsonObject settings_to_json(const RunOptions& settings);
RunOptions settings_from_json(const QJsonObject& json, QStringList* warnings = nullptr);
// "cuda bf16, chunk 1, untiled; lean_convs" (describe()) and "exact 512x512, chunk 1"
// (short_label()): the report's settings line and a view caption.
QString settings_summary(const RunOptions& settings);
QString settings_label(const RunOptions& settings);
// Why `key`'s option does not apply to `settings` (another backend, another mode), or empty.
QString option_unavailable_reason(const RunOptions& settings, std::string_view key);

// ---- inputs -----------------------------------------------------------------------------------

// Which frames of which source the run reads. An empty path is the built-in sample clip.
// What a run reads is the job layer's JobInput (core/pipeline/job.h): a file, image directory or
// pattern with a frame range, stride and resize, or (empty path) the built-in sample clip.
// "ladybird.mp4" or "built-in sample clip 256x256x17".
QString input_display_name(const JobInput& input);
// Qt strings to file-system paths and back without loss on any platform (UTF-16 on Windows).
std::filesystem::path to_fs_path(const QString& path);
QString from_fs_path(const std::filesystem::path& path);

// Built-in weights are the synthetic tiny configuration until a trained demo model ships (then
// `path` points to it and `builtin` names it).
struct WeightsSpec {
  QString path;  // empty: built-in
  // a synthetic recipe: "tiny", "real", "wan21-tiny", ... (synthetic_weight_names())
  QString builtin = QStringLiteral("tiny");
  bool is_builtin() const { return path.isEmpty(); }
  QString display_name() const;  // "built-in (synthetic tiny)", "vae.safetensors"
  QString short_name() const;    // "tiny", "vae.safetensors": tables and view captions
};
// The weights as a queued job names them (QueuedJob::weights, core/pipeline/job_queue.h; the
// CLI's rules): a checkpoint's absolute path, or "synthetic:<name>" (synthetic_weight_names()) for
// the built-in synthetic weights; and back. (An empty name, the built-in default of a job the CLI
// queued without weights, is default_weights_spec() in ui/loaders.h.)
std::string queue_weights(const WeightsSpec& spec);
WeightsSpec weights_spec_from_queue(const std::string& weights);
// Whether two specs name the same weights (the same checkpoint file or built-in recipe).
bool same_weights(const WeightsSpec& a, const WeightsSpec& b);

// What the info panel shows about a loaded checkpoint.
struct WeightsInfo {
  std::shared_ptr<const VaeWeights> weights;  // immutable once loaded; shared by threads
  QString source;                             // file path or "built-in: SeedVR2 synthetic tiny ..."
  QString family;                             // "SeedVR2", "Wan2.1", "Wan2.2"
  QString config;                             // VaeWeights::describe()
  QString dtype;                              // "fp16"
  qint64 parameters = 0;
  QString sha256;  // of the file, or the fp16 digest of synthetic weights
  bool synthetic = false;
  QString short_sha() const { return sha256.left(12); }
};

struct VideoInfoData {
  QString path;
  int width = 0, height = 0;
  double fps = 0;
  qint64 frames = 0;
  QString kind;        // "video", "images", "sample"
  QImage first_frame;  // for the preview before a run
};

// ---- runs -------------------------------------------------------------------------------------

struct RunRequest {
  quint64 id = 0;
  QString slot;  // "" for a single run, "A" or "B" for a comparison
  JobInput input;
  WeightsSpec weights_spec;
  // Loaded already (the studio's loaded model), or null: the worker loads `weights_spec` on the
  // engine thread for this run (an A/B slot's own weights) and frees them, with the model made
  // from them, when the run ends -- unless `keep_weights` (the next request, slot B, names the
  // same weights: they stay loaded for it).
  std::shared_ptr<const VaeWeights> weights;
  bool keep_weights = false;
  RunOptions settings;
  std::shared_ptr<CancelToken> cancel;  // set by the controller; request() from any thread
  std::shared_ptr<FrameStore> store;    // decoded frames, filled by the worker
};

struct ProgressUpdate {
  quint64 run_id = 0;
  QString slot;
  QString stage;  // "read", "encode", "decode", "metrics"
  qint64 done = 0, total = 0;
  double fraction = 0;  // of the whole run, 0..1
  double elapsed_s = 0;
  double eta_s = -1;  // -1: not known yet
};

// One telemetry sample (core::StageSample plus where and when it happened).
struct TelemetryPoint {
  quint64 run_id = 0;
  QString slot;
  double t_s = 0;  // seconds since the start of the run
  QString op;      // "encode" or "decode"
  QString stage;   // "decoder.up_blocks.1"
  qint64 chunk = -1, tile = -1;
  double wall_ms = 0, device_ms = -1;
  qint64 current_bytes = 0, peak_bytes = 0;
  qint64 device_used_bytes = -1;  // device-wide; for the CPU backend the process's resident size
};

struct FrameUpdate {
  quint64 run_id = 0;
  QString slot;
  qint64 index = -1;     // newest decoded frame
  qint64 available = 0;  // decoded so far
  qint64 total = 0;
  QImage image;
};

struct QualityNumbers {
  double psnr_db = std::numeric_limits<double>::quiet_NaN();
  double ssim = std::numeric_limits<double>::quiet_NaN();
  double max_abs = std::numeric_limits<double>::quiet_NaN();
  double rms = std::numeric_limits<double>::quiet_NaN();
  bool valid() const { return psnr_db == psnr_db; }
};

// Tile rectangles (output pixels) and per-tile seam numbers for the overlay.
struct TileOverlay {
  QVector<QRect> tiles;
  QVector<double> tile_offset;  // per-tile mean offset (same order), empty if unknown
  QImage seam_heatmap;          // |tiled - untiled| or seam energy, frame-sized, grey 0..255
  QString note;
};

struct RunSummary {
  quint64 id = 0;
  QString slot;
  bool ok = false;
  bool cancelled = false;
  // A cancelled run: seconds from the request to the job's return (the engine stopped) and to
  // the summary's dispatch to the window; -1 otherwise.
  double cancel_stop_s = -1, cancel_done_s = -1;
  QString error;
  RunOptions settings;
  QString backend_name;
  WeightsSpec weights;     // what the run ran on (the request's weights_spec)
  QString family;          // of those weights: "SeedVR2", "Wan2.1", "Wan2.2"; empty if not loaded
  QString weights_source;  // VaeWeights::source
  QString input_name;
  JobInput input;             // what the run read (saving its output is checked against it)
  int width = 0, height = 0;  // original frame size (after downscale)
  int padded_width = 0, padded_height = 0;
  qint64 frames = 0, padded_frames = 0;
  double fps = 24;
  double read_s = 0, encode_s = 0, decode_s = 0, metrics_s = 0, total_s = 0;
  double ms_per_frame = 0;  // (encode + decode) / frames
  // Frame prefetch: whether the input was read on the prefetch thread while the engine encoded
  // (then encode_s includes the waits for frames and read_s is the reader thread's time), the
  // part of read_s the engine thread waited for and the part overlapped with encoding, and why
  // prefetch did not run when it did not ("off", not applicable, the clip was already in memory).
  bool prefetch = false;
  double read_wait_s = 0, read_overlap_s = 0;
  QString prefetch_note;
  // Async tiles: whether the run queued the next chunk/tile on the device while the host finished
  // the previous one (the setting on and applicable), and why not when it did not ("off", or
  // "does not apply: " + async_tiles_unavailable_reason()).
  bool async_tiles = false;
  QString async_tiles_note;
  // What the memory budget chose (the automatic schedule or a tile) and why; empty: as set.
  QString plan_note;
  QStringList warnings;   // JobResult::warnings (a truncated input, a stored size)
  qint64 peak_bytes = 0;  // backend allocator peak (weights included)
  qint64 weight_bytes = 0;
  qint64 predicted_peak_bytes = -1;
  qint64 process_peak_bytes = -1;
  QualityNumbers vs_original;
  // Every frame of the run, fp32 [1, 3, T, H, W] (a temporary file, or memory where none can be
  // made): the reconstruction, clamped with the padding removed, and the same frames of the input.
  std::shared_ptr<const media::FrameSpool> reconstruction;
  std::shared_ptr<const media::FrameSpool> original;
  std::shared_ptr<FrameStore> store;
  QVector<TelemetryPoint> telemetry;  // every sample of the run, for the report
  TileOverlay overlay;
  std::shared_ptr<const TileRunReport> tile_report;  // tiled runs: rectangles and raw tile sums
  // Reference-free seam figures of a tiled run (core/schedule/seam_metrics.h): seam energy is the
  // gradient across tile borders over the gradient elsewhere (about 1 when seamless).
  double seam_energy = std::numeric_limits<double>::quiet_NaN();
  double max_tile_offset = std::numeric_limits<double>::quiet_NaN();  // 8-bit levels
  bool tiled() const { return !overlay.tiles.isEmpty(); }
};

struct AbComparison {
  bool ok = false;
  bool cancelled = false;  // A or B cancelled, or the A/B cancelled between them
  QString error;
  RunSummary a, b;
  QualityNumbers a_vs_b;
  // When exactly one of A and B is tiled and both ran on the same weights: |tiled - untiled| from
  // core's seam metrics (in 8-bit levels), and the seam energy of the untiled reference for
  // comparison. (Across weights the difference is the models', not the seams'.)
  QString tiled_slot;
  double seam_max_abs = std::numeric_limits<double>::quiet_NaN();
  double seam_rms = std::numeric_limits<double>::quiet_NaN();
  double reference_seam_energy = std::numeric_limits<double>::quiet_NaN();
};

// Rows of the A/B table, in display order: {label, A text, B text}. Shared by the panel and the
// report so both say the same thing.
struct AbRow {
  QString label, a, b;
};
// Each side's weights and family come first (after the status), then time, memory and quality.
// `compact`: without the settings and backend rows (the panel shows those above its table).
QVector<AbRow> ab_table_rows(const AbComparison& ab, bool compact = false);

// Device list entry from BackendCatalog::probe_devices (queried on the worker thread).
struct DeviceStatus {
  int index = 0;
  QString name;
  qint64 free_bytes = -1, total_bytes = -1;
};

void register_studio_types();

QString format_bytes(qint64 bytes);      // "1.25 GiB", "312 MiB", "—" for negatives
QString format_seconds(double seconds);  // "1 min 05 s", "4.2 s"

}  // namespace seedvae::ui

Q_DECLARE_METATYPE(seedvae::RunOptions)
Q_DECLARE_METATYPE(seedvae::ui::RunRequest)
Q_DECLARE_METATYPE(seedvae::ui::ProgressUpdate)
Q_DECLARE_METATYPE(seedvae::ui::TelemetryPoint)
Q_DECLARE_METATYPE(seedvae::ui::FrameUpdate)
Q_DECLARE_METATYPE(seedvae::ui::RunSummary)
Q_DECLARE_METATYPE(seedvae::ui::AbComparison)
Q_DECLARE_METATYPE(seedvae::ui::WeightsInfo)
Q_DECLARE_METATYPE(seedvae::ui::VideoInfoData)
Q_DECLARE_METATYPE(seedvae::ui::DeviceStatus)
