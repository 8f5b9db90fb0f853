#include "ui/engine_worker.h"

#include <QThread>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <tuple>

#include "core/media/metrics.h"
#include "core/media/video_io.h"
#include "core/pipeline/job_progress.h"
#include "core/pipeline/job_queue.h"
#include "core/schedule/seam_metrics.h"
#include "core/vae/state_dict.h"
#include "ui/image_convert.h"
#include "ui/loaders.h"

namespace seedvae::ui {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

QString qstr(const std::string& s) {
  return QString::fromStdString(s);
}
QString qstr(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

// The job layer's stage reports on the engine thread -> throttled queued signals (`progress` for
// an interactive run, `queueProgress` for a queued job): the stage's own count, and the whole
// job's fraction and time left (JobProgress, as the CLI and the queue file show them).
class RunProgress final : public ProgressSink {
 public:
  using Signal = void (EngineWorker::*)(ProgressUpdate);
  RunProgress(EngineWorker* worker, Signal signal) : worker_(worker), signal_(signal) {}

  // A new run or queued job.
  void start(quint64 id, const QString& slot) {
    id_ = id;
    slot_ = slot;
    t0_ = Clock::now();
    job_ = JobProgress();
    throttle_ = ProgressThrottle();
    phase(QStringLiteral("prepare"));
  }
  // An interactive run's named step ("load weights", "encode", "metrics").
  void phase(const QString& stage) { send(stage, 0, 1, true); }
  void report(std::string_view stage, int64_t done, int64_t total) override {
    send(qstr(stage), done, total, done >= total);
  }
  void finish(const QString& stage) {
    job_.finish();
    send(stage, 1, 1, true);
  }

 private:
  void send(const QString& stage, qint64 done, qint64 total, bool force) {
    const auto now = Clock::now();
    job_.report(stage.toStdString(), done, total, now);
    if (!throttle_.should_send(job_.fraction(), force)) return;
    const ProgressUpdate u{.run_id = id_,
                           .slot = slot_,
                           .stage = stage,
                           .done = done,
                           .total = total,
                           .fraction = job_.fraction(),
                           .elapsed_s = std::chrono::duration<double>(now - t0_).count(),
                           .eta_s = job_.eta_s()};
    emit(worker_->*signal_)(u);
  }

  EngineWorker* worker_;
  Signal signal_;
  quint64 id_ = 0;
  QString slot_;
  Clock::time_point t0_{};
  JobProgress job_;
  ProgressThrottle throttle_;
};

// TelemetrySink on the engine thread -> bounded queue + the run's full log.
class RunTelemetry final : public TelemetrySink {
 public:
  // Every sample also goes into `log` (the run summary's), so a cancelled or failed run keeps
  // what it measured.
  RunTelemetry(EngineWorker* worker, BoundedQueue<TelemetryPoint>* queue, quint64 id, QString slot,
               Clock::time_point t0, bool host_memory, QVector<TelemetryPoint>* log)
      : worker_(worker),
        queue_(queue),
        id_(id),
        slot_(std::move(slot)),
        t0_(t0),
        host_memory_(host_memory),
        log_(log) {}

  // The studio's runs must take the time `seedvae bench` measures: no drain per stage; the
  // charts get device times up to one chunk late (core/base/telemetry.h).
  StageTiming stage_timing() const override { return StageTiming::kDeferred; }

  void on_stage(const StageSample& s) override {
    TelemetryPoint p;
    p.stage = intern(s.stage);
    p.op = p.stage.startsWith(QLatin1String("encoder")) ? QStringLiteral("encode")
                                                        : QStringLiteral("decode");
    p.chunk = s.chunk;
    p.tile = s.tile;
    p.wall_ms = s.wall_ms;
    p.device_ms = s.device_ms;
    p.current_bytes = s.current_bytes;
    p.peak_bytes = s.peak_bytes;
    p.device_used_bytes = s.device_used_bytes;
    push(std::move(p));
  }

  // A sample that is not a model stage (run start, exact-mode tiles).
  void sample(const QString& op, const QString& stage, qint64 chunk, qint64 tile, double wall_ms,
              const MemoryStats& m) {
    TelemetryPoint p;
    p.op = op;
    p.stage = stage;
    p.chunk = chunk;
    p.tile = tile;
    p.wall_ms = wall_ms;
    p.current_bytes = m.current_bytes;
    p.peak_bytes = m.peak_bytes;
    p.device_used_bytes = m.device_used_bytes;
    push(std::move(p));
  }

 private:
  void push(TelemetryPoint p) {
    p.run_id = id_;
    p.slot = slot_;
    p.t_s = seconds_since(t0_);
    if (p.device_used_bytes < 0 && host_memory_) p.device_used_bytes = process_resident_bytes();
    log_->push_back(p);
    if (queue_->push(std::move(p))) emit worker_->telemetryReady();
  }

  // One shared string per stage name: a run logs a sample per stage and chunk, and a string
  // allocated for each would scatter small long-lived blocks through the heap, which then cannot
  // give the pages of the chunks' freed buffers back (the resident set would grow with the clip).
  QString intern(std::string_view stage) {
    for (const QString& s : stages_) {
      if (s == QLatin1String(stage.data(), static_cast<qsizetype>(stage.size()))) return s;
    }
    stages_.push_back(qstr(stage));
    return stages_.back();
  }

  EngineWorker* worker_;
  BoundedQueue<TelemetryPoint>* queue_;
  quint64 id_;
  QString slot_;
  Clock::time_point t0_;
  bool host_memory_;
  QVector<TelemetryPoint>* log_;
  QVector<QString> stages_;
};

// The tile rectangles and, from core's seam metrics, the per-tile mean offset (raw tile output
// minus the final output over the same pixels, averaged over channels, in 8-bit levels): a
// reference-free seam indicator.
TileOverlay make_overlay(const JobResult& r) {
  TileOverlay o;
  if (r.tiles.mode == TilingMode::kOff) return o;
  const QRect frame(0, 0, static_cast<int>(r.plan.width), static_cast<int>(r.plan.height));
  for (const Rect& rect : r.tiles.output_rects) {
    o.tiles.push_back(QRect(static_cast<int>(rect.x), static_cast<int>(rect.y),
                            static_cast<int>(rect.w), static_cast<int>(rect.h))
                          .intersected(frame));
    o.tile_offset.push_back(std::numeric_limits<double>::quiet_NaN());
  }
  if (r.seams) {
    for (const TileSeamStat& t : r.seams->per_tile) {
      if (t.index < 0 || t.index >= o.tile_offset.size() || t.offset_vs_output.empty()) continue;
      double acc = 0;
      for (double v : t.offset_vs_output) acc += v;
      o.tile_offset[static_cast<int>(t.index)] =
          acc / static_cast<double>(t.offset_vs_output.size()) * 127.5;
    }
  }
  o.note = qstr(r.tiles.plan.describe());
  return o;
}

}  // namespace

EngineWorker::EngineWorker(std::shared_ptr<const BackendCatalog> catalog,
                           std::shared_ptr<LatestChannel<FrameUpdate>> frames,
                           std::shared_ptr<BoundedQueue<TelemetryPoint>> telemetry)
    : catalog_(std::move(catalog)),
      frames_(std::move(frames)),
      telemetry_(std::move(telemetry)),
      session_([this](const RunOptions& o) { return catalog_->create(o); }) {
  idle_timer_ = new QTimer(this);
  idle_timer_->setSingleShot(true);
  connect(idle_timer_, &QTimer::timeout, this, [this] {
    slot_weights_.reset();
    if (session_.backend() == nullptr) return;
    session_.release();
    catalog_->release_idle();  // the card's context too
    emit released();
  });
  bool ok = false;
  const double env = qEnvironmentVariable("SEEDVAE_IDLE_RELEASE_S").toDouble(&ok);
  if (ok) idle_release_s_ = env;
}

void EngineWorker::busy() {
  idle_timer_->stop();
}

void EngineWorker::idle() {
  if (idle_release_s_ < 0) return;
  idle_timer_->start(static_cast<int>(std::min(idle_release_s_, 1e6) * 1000));
}

EngineWorker::~EngineWorker() {
  preview_.flush();  // no preview task runs on a worker being destroyed
  release();
}

void EngineWorker::release() {
  slot_weights_.reset();
  session_.release();
}

void EngineWorker::releaseSlotWeights() {
  if (!slot_weights_) return;
  slot_weights_.reset();
  slot_spec_ = WeightsSpec();
  // The model made from them, with its backend (the session has no model-only release; the next
  // run makes both anew, which its time per frame does not count).
  session_.release();
}

Result<std::shared_ptr<const VaeWeights>> EngineWorker::slotWeights(const WeightsSpec& spec) {
  if (slot_weights_ && same_weights(slot_spec_, spec)) return slot_weights_;
  slot_weights_.reset();
  session_.release();
  std::shared_ptr<const VaeWeights> w;
  if (spec.is_builtin()) {
    auto made = synthetic_weights(spec.builtin.toStdString());
    if (!made) return made.status().with_context("built-in weights");
    w = std::make_shared<const VaeWeights>(std::move(*made));
  } else {
    auto loaded = load_weights(to_fs_path(spec.path));
    if (!loaded) return loaded.take_status();  // (its message names the file)
    w = std::make_shared<const VaeWeights>(std::move(*loaded));
  }
  slot_weights_ = w;
  slot_spec_ = spec;
  return w;
}

void EngineWorker::probeDevices(const QString& backend) {
  emit devicesProbed(backend, catalog_->probe_devices(backend));
}

void EngineWorker::run(const RunRequest& request) {
  busy();
  RunSummary summary;
  summary.id = request.id;
  summary.slot = request.slot;
  summary.settings = catalog_->normalized(request.settings);
  summary.store = request.store;
  summary.input_name = input_display_name(request.input);
  summary.input = request.input;
  summary.weights = request.weights_spec;
  emit runStarted(request.id, request.slot);
  const auto t0 = Clock::now();
  Status st;
  try {
    st = execute(request, summary);
  } catch (const std::exception& e) {
    st = internal_error(std::string("unexpected exception: ") + e.what());
  }
  summary.total_s = seconds_since(t0);
  summary.ok = st.is_ok();
  summary.cancelled = st.code() == StatusCode::kCancelled;
  if (!st.is_ok()) summary.error = qstr(st.to_string());
  summary.process_peak_bytes = process_peak_resident_bytes();
  // A slot's own weights go with the run (load, run, release), unless the next run uses them.
  if (!request.weights && !request.keep_weights) releaseSlotWeights();
  if (summary.cancelled && request.cancel) {
    summary.cancel_done_s = request.cancel->seconds_since_request();
  }
  emit runFinished(summary);
  idle();
}

Status EngineWorker::execute(const RunRequest& req, RunSummary& sum) {
  const auto t0 = Clock::now();
  RunProgress progress(this, &EngineWorker::progress);
  progress.start(req.id, req.slot);

  // ---- weights: the loaded model's, or the slot's own read here (cancel takes effect once
  // the file is read) ----
  std::shared_ptr<const VaeWeights> weights = req.weights;
  if (!weights) {
    progress.phase(QStringLiteral("load weights"));
    if (req.cancel) SEEDVAE_TRY(req.cancel->check());
    SEEDVAE_ASSIGN_OR_RETURN(weights, slotWeights(req.weights_spec));
    if (req.cancel) SEEDVAE_TRY(req.cancel->check());
  }
  sum.weights_source = qstr(weights->source);
  sum.family = qstr(family_name(weights->family));

  // ---- the job ----
  JobSpec job;
  job.kind = JobKind::kRoundTrip;
  job.weights = weights;
  job.options = sum.settings;
  job.input = req.input;
  job.predict = true;
  // The run's frames go to temporary files (the scrubber, A/B, report and export read them
  // back), so the studio's memory does not grow with the clip: the reconstruction in fp32 (A/B
  // compares it), the originals in fp16 (they are only shown).
  bool spooled = true;
  auto spool = [&](DType storage) -> std::shared_ptr<media::FrameSpool> {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    if (!ec) {
      if (auto s = media::FrameSpool::on_disk(dir, storage); s.is_ok()) return std::move(*s);
    }
    spooled = false;
    return media::FrameSpool::in_memory();
  };
  job.keep_original = spool(DType::kF16);
  job.keep_reconstruction = spool(DType::kF32);
  if (!spooled) {
    sum.warnings << QStringLiteral(
        "no temporary file could be made for the run's frames; they are kept in memory");
  }
  sum.original = job.keep_original;
  sum.reconstruction = job.keep_reconstruction;
  if (req.store) req.store->set_sources(job.keep_original, job.keep_reconstruction);
  const QVector<BackendSpec> specs = catalog_->backends();
  const BackendSpec* spec = catalog_->find(specs, QString::fromStdString(sum.settings.backend));
  RunTelemetry telemetry(this, telemetry_.get(), req.id, req.slot, t0,
                         spec ? spec->memory_is_host : true, &sum.telemetry);
  JobCallbacks cb;
  cb.cancel = req.cancel.get();
  cb.progress = &progress;
  cb.telemetry = &telemetry;
  bool started = false;
  cb.on_phase = [&](std::string_view phase) {
    if (!started && session_.backend() != nullptr) {
      started = true;
      telemetry.sample(QStringLiteral("run"), QStringLiteral("start"), -1, -1, 0,
                       session_.backend()->memory_stats());
    }
    if (phase == "encode" || phase == "decode" || phase == "metrics") progress.phase(qstr(phase));
  };
  // Once the input has been read (after the encode): its size and frame count.
  cb.on_input = [&](const InputClip& clip) -> Status {
    const media::PadPlan& p = clip.plan;
    sum.width = static_cast<int>(p.width);
    sum.height = static_cast<int>(p.height);
    sum.padded_width = static_cast<int>(p.padded_width);
    sum.padded_height = static_cast<int>(p.padded_height);
    sum.frames = p.frames;
    sum.padded_frames = p.padded_frames;
    sum.fps = clip.fps;
    if (req.store) req.store->set_total(p.frames, clip.fps);
    return Status::ok();
  };
  // Decoded chunks stream to the preview: the newest frame's images (the reconstruction and its
  // original, read back from the run's spools into the store's cache, where the window finds
  // them) are made on the preview thread.
  cb.on_decoded = [&](int64_t first, const HostTensor& chunk) -> Status {
    const int64_t n = chunk.shape()[2];
    if (n > 0) {
      FrameUpdate u;
      u.run_id = req.id;
      u.slot = req.slot;
      u.index = first + n - 1;
      u.available = std::min<qint64>(first + n, sum.frames);
      u.total = sum.frames;
      if (req.store) {
        preview_.post([this, u = std::move(u), store = req.store]() mutable {
          u.image = store->frame(u.index);
          store->original(u.index);
          if (frames_->publish(std::move(u))) emit framesReady();
        });
      } else {
        u.image = frame_to_image(chunk, n - 1);
        if (frames_->publish(std::move(u))) emit framesReady();
      }
    }
    return req.cancel ? req.cancel->check() : Status::ok();
  };
  JobResult r;
  const Status st = session_.run(job, cb, r);
  if (st.code() == StatusCode::kCancelled && req.cancel) {
    sum.cancel_stop_s = req.cancel->seconds_since_request();
  }
  preview_.flush();  // the last frame is published before the run's end

  // ---- the summary (also of a failed or cancelled run: what it did so far) ----
  sum.backend_name = qstr(r.backend_name);
  sum.weight_bytes = r.weight_bytes;
  sum.peak_bytes = r.peak_bytes;
  sum.predicted_peak_bytes = r.predicted_peak_bytes;
  sum.read_s = r.read_s;
  sum.read_wait_s = r.read_wait_s;
  sum.read_overlap_s = r.read_overlap_s();
  sum.encode_s = r.encode_s;
  sum.decode_s = r.decode_s;
  sum.metrics_s = r.metrics_s;
  sum.prefetch = r.prefetch;
  sum.prefetch_note = qstr(r.prefetch_note);
  sum.async_tiles = r.async_tiles;
  sum.async_tiles_note = qstr(r.async_tiles_note);
  sum.plan_note = qstr(r.plan_note);
  // a job over several devices: what each one ran and its busy time
  for (const JobResult::DeviceShare& d : r.device_shares) {
    if (!sum.plan_note.isEmpty()) sum.plan_note += QStringLiteral("; ");
    sum.plan_note += QStringLiteral("%1: %2, busy %3 ms")
                         .arg(qstr(d.backend.substr(0, d.backend.find(" ("))), qstr(d.share))
                         .arg(d.busy_ms, 0, 'f', 0);
  }
  for (const std::string& w : r.warnings) sum.warnings << qstr(w);
  sum.ms_per_frame = r.ms_per_frame();
  if (r.quality) {
    sum.vs_original.psnr_db = r.quality->psnr_db;
    sum.vs_original.ssim = r.quality->ssim;
    sum.vs_original.max_abs = r.quality->max_abs;
    sum.vs_original.rms = r.quality->rms;
  }
  sum.overlay = make_overlay(r);
  if (r.tiles.mode != TilingMode::kOff) {
    sum.tile_report = std::make_shared<const TileRunReport>(r.tiles);
    if (r.seams) {
      sum.seam_energy = r.seams->seam_energy;
      sum.max_tile_offset = r.seams->max_tile_offset * 127.5;
    }
  }
  if (!st.is_ok()) return st;
  progress.finish(QStringLiteral("done"));
  return Status::ok();
}

namespace {

// A against B, read back from their spools a few frames at a time: PSNR/SSIM of A vs B, and
// when exactly one of them is tiled (on the same weights), core's seam metrics of the tiled one
// against the other. Both reconstructions are of the same input frames at its size: each run
// removed its own model's padding (SeedVR2 pads to multiples of 8, Wan2.2 of 16).
Status compare_runs(const RunSummary& a, const RunSummary& b, AbComparison& ab) {
  if (!a.reconstruction || !b.reconstruction ||
      !(a.reconstruction->shape() == b.reconstruction->shape())) {
    return invalid_argument("A and B reconstructions differ in shape");
  }
  const bool seams = a.tiled() != b.tiled() && same_weights(a.weights, b.weights);
  const RunSummary& tiled = a.tiled() ? a : b;
  // Seam figures need the tiled run's rectangles over its whole (unpadded) frame.
  const bool seam_figures = seams && tiled.tile_report && tiled.width == tiled.padded_width &&
                            tiled.height == tiled.padded_height;
  media::QualityAccumulator quality;
  SeamAccumulator seam_acc;
  const int64_t total = a.reconstruction->frames();
  constexpr int64_t kChunk = 8;
  for (int64_t first = 0; first < total; first += kChunk) {
    const int64_t n = std::min(kChunk, total - first);
    SEEDVAE_ASSIGN_OR_RETURN(const HostTensor fa, a.reconstruction->read(first, n));
    SEEDVAE_ASSIGN_OR_RETURN(const HostTensor fb, b.reconstruction->read(first, n));
    SEEDVAE_TRY(quality.add(fa, fb));
    if (seam_figures) {
      const HostTensor& ft = a.tiled() ? fa : fb;
      const HostTensor& fr = a.tiled() ? fb : fa;
      SEEDVAE_TRY(seam_acc.add(ft, seam_output_rects(*tiled.tile_report), &fr));
    }
  }
  SEEDVAE_ASSIGN_OR_RETURN(const media::QualityStats q, quality.result());
  ab.a_vs_b.psnr_db = q.psnr_db;
  ab.a_vs_b.ssim = q.ssim;
  ab.a_vs_b.max_abs = q.max_abs;
  ab.a_vs_b.rms = q.rms;
  ab.ok = true;
  // One tiled, one untiled: |tiled - untiled| is the seam error itself.
  if (seams) {
    ab.tiled_slot = tiled.slot;
    // |tiled - untiled| over the frame in 8-bit levels (compare_clips works on the [0, 1] scale).
    ab.seam_max_abs = q.max_abs * 255.0;
    ab.seam_rms = q.rms * 255.0;
    if (seam_figures) {
      if (auto m = seam_acc.result(tiled.tile_report.get())) {
        ab.reference_seam_energy = m->reference_seam_energy;
      }
    }
  }
  return Status::ok();
}

}  // namespace

void EngineWorker::compare(quint64 id, const RunSummary& a, const RunSummary& b) {
  AbComparison ab;
  ab.a = a;
  ab.b = b;
  if (!a.ok || !b.ok) {
    ab.error = QStringLiteral("run %1 did not finish").arg(!a.ok ? a.slot : b.slot);
  } else {
    Status st;
    try {
      st = compare_runs(a, b, ab);
    } catch (const std::exception& e) {
      st = internal_error(e.what());
    }
    if (!st.is_ok()) {
      ab.ok = false;
      ab.error = QStringLiteral("comparison failed: %1").arg(qstr(st.to_string()));
    }
  }
  emit compared(id, ab);
}

void EngineWorker::writeReport(const ReportJob& job, std::shared_ptr<CancelToken> cancel) {
  ReportResult r;
  try {
    r = write_report(job, cancel.get());
  } catch (const std::exception& e) {
    r.ok = false;
    r.directory = job.directory;
    r.error = QStringLiteral("report failed: %1").arg(e.what());
  }
  emit reportWritten(r);
}

void EngineWorker::writeVideo(const RunSummary& run, const QString& path) {
  if (!run.reconstruction) {
    emit videoWritten(false, path, QStringLiteral("no reconstruction to write"));
    return;
  }
  // The settings' output options; the run's input file lends its timing, colour and audio.
  const media::WriteOptions wo =
      write_options(run.settings, run.fps > 0 ? run.fps : 24, &run.input);
  Status st;
  try {
    st = check_output_against(to_fs_path(path), JobKind::kRoundTrip, run.input,
                              run.weights_source.toStdString());
    if (st.is_ok()) st = media::write_clip(to_fs_path(path), *run.reconstruction, wo);
  } catch (const std::exception& e) {
    st = internal_error(e.what());
  }
  emit videoWritten(st.is_ok(), path, st.is_ok() ? QString() : qstr(st.to_string()));
}

Result<std::shared_ptr<const VaeWeights>> EngineWorker::builtinWeights(const QString& name) {
  if (!builtin_weights_ || builtin_name_ != name) {
    SEEDVAE_ASSIGN_OR_RETURN(VaeWeights made, synthetic_weights(name.toStdString()));
    builtin_weights_ = std::make_shared<VaeWeights>(std::move(made));
    builtin_name_ = name;
  }
  return std::shared_ptr<const VaeWeights>(builtin_weights_);
}

void EngineWorker::runQueue(const QString& path, std::shared_ptr<CancelToken> cancel) {
  busy();
  RunProgress progress(this, &EngineWorker::queueProgress);
  // The weights a job names (ui/queue_panel.h, queue_weights()): "synthetic:<name>" (one of
  // synthetic_weight_names()), a checkpoint file, or empty for the built-in default. Jobs in a
  // row on the same checkpoint read it once.
  std::string last_path;
  std::shared_ptr<const VaeWeights> last_weights;
  QueueRunHooks hooks;
  hooks.load_weights = [&](const std::string& w) -> Result<std::shared_ptr<const VaeWeights>> {
    const WeightsSpec spec = w.empty() ? default_weights_spec() : weights_spec_from_queue(w);
    if (spec.is_builtin()) return builtinWeights(spec.builtin);
    const std::string file = spec.path.toStdString();
    if (!last_weights || last_path != file) {
      SEEDVAE_ASSIGN_OR_RETURN(VaeWeights loaded, load_weights(file));
      last_weights = std::make_shared<const VaeWeights>(std::move(loaded));
      last_path = file;
    }
    return last_weights;
  };
  hooks.cancel = cancel.get();
  hooks.progress = &progress;
  hooks.on_start = [&](const QueuedJob& j) {
    progress.start(static_cast<quint64>(j.id), QStringLiteral("queue job %1").arg(j.id));
    emit queueJobStarted(j.id);
  };
  hooks.on_end = [&](const QueuedJob& j) { emit queueJobFinished(j.id); };
  Result<int64_t> ran = int64_t{0};
  try {
    ran = run_queue(to_fs_path(path), session_, hooks);
  } catch (const std::exception& e) {
    ran = internal_error(std::string("unexpected exception: ") + e.what());
  }
  const bool cancelled = !ran && ran.status().code() == StatusCode::kCancelled;
  emit queueFinished(ran ? *ran : -1, ran || cancelled ? QString() : qstr(ran.status().to_string()),
                     cancelled);
  idle();
}

}  // namespace seedvae::ui
