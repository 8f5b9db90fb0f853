#include "ui/engine_worker.h"

#include <QThread>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <tuple>

#include "core/media/metrics.h"
#include "core/media/prefetch.h"
#include "core/media/sample_clip.h"
#include "core/media/vae_padding.h"
#include "core/media/video_io.h"
#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"
#ifdef SEEDVAE_UI_HAVE_SEAM_METRICS
#include "core/schedule/seam_metrics.h"
#endif
#include "core/vae/state_dict.h"
#include "ui/image_convert.h"
#include "ui/memory_predictor.h"

namespace seedvae::ui {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

QString qstr(const std::string& s) { return QString::fromStdString(s); }
QString qstr(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

// Share of the whole run each phase takes, for the overall fraction and the ETA. The decoder does
// about twice the encoder's work at the same resolution (vae_spec.md §7).
struct Phase {
  double base, weight;
};
constexpr Phase kRead{0.00, 0.05};
constexpr Phase kEncode{0.05, 0.30};
constexpr Phase kDecode{0.35, 0.60};
constexpr Phase kMetrics{0.95, 0.05};

// ProgressSink on the engine thread -> throttled queued signals.
class RunProgress final : public ProgressSink {
 public:
  RunProgress(EngineWorker* worker, quint64 id, QString slot, Clock::time_point t0)
      : worker_(worker), id_(id), slot_(std::move(slot)), t0_(t0) {}

  void phase(const QString& stage, Phase p, qint64 done = 0, qint64 total = 1) {
    phase_ = p;
    send(stage, done, total, true);
  }
  void report(std::string_view stage, int64_t done, int64_t total) override {
    send(qstr(stage), done, total, done >= total);
  }
  void finish(const QString& stage) {
    phase_ = {1.0, 0.0};
    send(stage, 1, 1, true);
  }

 private:
  void send(const QString& stage, qint64 done, qint64 total, bool force) {
    const double f = std::clamp(
        phase_.base + phase_.weight * (total > 0 ? static_cast<double>(done) / total : 0.0), 0.0, 1.0);
    if (!throttle_.should_send(f, force || stage != last_stage_)) return;
    last_stage_ = stage;
    ProgressUpdate u;
    u.run_id = id_;
    u.slot = slot_;
    u.stage = stage;
    u.done = done;
    u.total = total;
    u.fraction = f;
    u.elapsed_s = seconds_since(t0_);
    // The ETA needs some measured work to extrapolate from.
    u.eta_s = f >= 0.08 && f < 1.0 ? u.elapsed_s * (1.0 - f) / f : (f >= 1.0 ? 0.0 : -1.0);
    emit worker_->progress(u);
  }

  EngineWorker* worker_;
  quint64 id_;
  QString slot_;
  Clock::time_point t0_;
  Phase phase_{0, 0};
  ProgressThrottle throttle_;
  QString last_stage_;
};

// TelemetrySink on the engine thread -> bounded queue + the run's full log.
class RunTelemetry final : public TelemetrySink {
 public:
  // Every sample also goes into `log` (the run summary's), so a cancelled or failed run keeps
  // what it measured.
  RunTelemetry(EngineWorker* worker, BoundedQueue<TelemetryPoint>* queue, quint64 id, QString slot,
               Clock::time_point t0, bool host_memory, QVector<TelemetryPoint>* log)
      : worker_(worker), queue_(queue), id_(id), slot_(std::move(slot)), t0_(t0),
        host_memory_(host_memory), log_(log) {}

  void on_stage(const StageSample& s) override {
    TelemetryPoint p;
    p.stage = qstr(s.stage);
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

  EngineWorker* worker_;
  BoundedQueue<TelemetryPoint>* queue_;
  quint64 id_;
  QString slot_;
  Clock::time_point t0_;
  bool host_memory_;
  QVector<TelemetryPoint>* log_;
};

seedvae::TilingMode to_core(TilingMode m) {
  switch (m) {
    case TilingMode::kOff: return seedvae::TilingMode::kOff;
    case TilingMode::kBlend: return seedvae::TilingMode::kBlend;
    case TilingMode::kExact: return seedvae::TilingMode::kExact;
  }
  return seedvae::TilingMode::kOff;
}

// Per-tile mean offset (raw tile output minus the final output over the same pixels, averaged
// over channels, in 8-bit levels): a reference-free seam indicator.
TileOverlay make_overlay(const TileRunReport& rep, const HostTensor& decoded, int width, int height) {
  TileOverlay o;
  if (rep.mode == seedvae::TilingMode::kOff) return o;
  const Shape& s = decoded.shape();
  const QRect frame(0, 0, width, height);
  for (size_t i = 0; i < rep.output_rects.size(); ++i) {
    const Rect& r = rep.output_rects[i];
    o.tiles.push_back(QRect(static_cast<int>(r.x), static_cast<int>(r.y), static_cast<int>(r.w),
                            static_cast<int>(r.h))
                          .intersected(frame));
    double offset = std::numeric_limits<double>::quiet_NaN();
    if (i < rep.tile_sums.size() && i < rep.tile_counts.size() && rep.tile_counts[i] > 0 &&
        s.rank() == 5 && decoded.dtype() == DType::kF32) {
      const auto& sums = rep.tile_sums[i];
      double acc = 0;
      int channels = 0;
      for (int64_t c = 0; c < std::min<int64_t>(s[1], static_cast<int64_t>(sums.size())); ++c) {
        const double raw = sums[static_cast<size_t>(c)] / static_cast<double>(rep.tile_counts[i]);
        double fin = 0;
        int64_t n = 0;
        const float* base = decoded.data<float>() + c * s[2] * s[3] * s[4];
        for (int64_t t = 0; t < s[2]; ++t) {
          for (int64_t y = r.y; y < std::min(r.y_end(), s[3]); ++y) {
            const float* row = base + (t * s[3] + y) * s[4];
            for (int64_t x = r.x; x < std::min(r.x_end(), s[4]); ++x) {
              fin += row[x];
              ++n;
            }
          }
        }
        if (n == 0) continue;
        acc += raw - fin / static_cast<double>(n);
        ++channels;
      }
      if (channels) offset = acc / channels * 127.5;
    }
    o.tile_offset.push_back(offset);
  }
  o.note = qstr(rep.plan.describe());
  return o;
}

}  // namespace

struct EngineWorker::ClipCache {
  QString key;
  std::shared_ptr<const HostTensor> original;  // [1, 3, T, H, W] as read
  HostTensor padded;
  media::PadPlan plan;
  double fps = 24;
  QVector<QImage> originals;
};

EngineWorker::EngineWorker(std::shared_ptr<const BackendCatalog> catalog,
                           std::shared_ptr<LatestChannel<FrameUpdate>> frames,
                           std::shared_ptr<BoundedQueue<TelemetryPoint>> telemetry)
    : catalog_(std::move(catalog)), frames_(std::move(frames)), telemetry_(std::move(telemetry)) {}

EngineWorker::~EngineWorker() { release(); }

void EngineWorker::release() {
  model_.reset();
  model_weights_.reset();
  backend_.reset();
  backend_key_.clear();
  clip_.reset();
}

void EngineWorker::probeDevices(const QString& backend) {
  emit devicesProbed(backend, catalog_->probe_devices(backend));
}

Status EngineWorker::ensure_engine(const RunRequest& req, std::shared_ptr<const VaeWeights> weights,
                                   RunSummary& summary) {
  const EngineSettings s = catalog_->normalized(req.settings);
  const QString key = s.backend_key();
  if (!backend_ || key != backend_key_) {
    model_.reset();  // the model's tensors live on the old backend
    model_weights_.reset();
    backend_.reset();
    auto b = catalog_->create(s);
    if (!b) return b.take_status();
    backend_ = std::move(*b);
    backend_key_ = key;
  }
  if (!model_ || model_weights_ != weights) {
    model_.reset();
    auto m = VaeModel::create(*backend_, *weights);
    if (!m) return m.take_status();
    model_.emplace(std::move(*m));
    model_weights_ = std::move(weights);
  }
  summary.backend_name = qstr(backend_->name());
  summary.weight_bytes = backend_->memory_stats().current_bytes;
  return Status::ok();
}

void EngineWorker::run(const RunRequest& request) {
  RunSummary summary;
  summary.id = request.id;
  summary.slot = request.slot;
  summary.settings = catalog_->normalized(request.settings);
  summary.store = request.store;
  summary.input_name = request.input.display_name();
  emit runStarted(request.id, request.slot);
  const auto t0 = Clock::now();
  Status st;
  try {
    st = execute(request, summary);
  } catch (const std::bad_alloc&) {
    st = out_of_memory("host memory exhausted during the run; try a smaller frame range, a "
                       "downscale or tiling");
  } catch (const std::exception& e) {
    st = internal_error(std::string("unexpected exception: ") + e.what());
  }
  if (model_) {
    model_->set_telemetry(nullptr);
    model_->set_observer({});
  }
  summary.total_s = seconds_since(t0);
  summary.ok = st.is_ok();
  summary.cancelled = st.code() == StatusCode::kCancelled;
  if (!st.is_ok()) summary.error = qstr(st.to_string());
  summary.process_peak_bytes = process_peak_resident_bytes();
  emit runFinished(summary);
}

Status EngineWorker::execute(const RunRequest& req, RunSummary& sum) {
  const auto t0 = Clock::now();
  const CancelToken* cancel = req.cancel.get();
  RunProgress progress(this, req.id, req.slot, t0);
  progress.phase(QStringLiteral("prepare"), kRead);

  // ---- weights and engine ----
  std::shared_ptr<const VaeWeights> weights = req.weights;
  if (!weights) {
    if (req.weights_spec.is_builtin()) {
      if (!builtin_weights_ || builtin_name_ != req.weights_spec.builtin) {
        builtin_weights_ = std::make_shared<VaeWeights>(
            req.weights_spec.builtin == QLatin1String("real")
                ? synthesize_weights(VaeConfig::real(), kRealSeed)
                : synthesize_weights(VaeConfig::tiny(), kTinySeed));
        builtin_name_ = req.weights_spec.builtin;
      }
      weights = builtin_weights_;
    } else {
      auto w = load_weights(req.weights_spec.path.toStdString());
      if (!w) return w.take_status();
      weights = std::make_shared<VaeWeights>(std::move(*w));
    }
  }
  sum.weights_source = qstr(weights->source);
  if (cancel) SEEDVAE_TRY(cancel->check());
  SEEDVAE_TRY(ensure_engine(req, weights, sum));
  const EngineSettings& settings = sum.settings;
  const VaeConfig& cfg = weights->config;

  // ---- input ----
  // Frame prefetch (issue #5): an untiled, chunked run of a file reads its frames on a prefetch
  // thread (media::VideoFrameSource) while encode_stream() encodes the chunks already read; the
  // clip (original and padded) is cached once the encoder has seen all of it. Every other run,
  // and a clip still cached from the previous run, goes through the whole clip in memory.
  const int multiple = std::max(cfg.spatial_factor(), settings.spatial_multiple);
  const QString clip_key = req.input.cache_key() + QStringLiteral("|%1|%2").arg(multiple).arg(settings.temporal_pad);
  SEEDVAE_ASSIGN_OR_RETURN(const media::TemporalPad pad_mode,
                           media::temporal_pad_from_name(settings.temporal_pad.toStdString()));
  const QString prefetch_why = prefetch_unavailable_reason(settings, req.input.is_sample());
  const bool cached = clip_ && clip_->key == clip_key;
  const bool use_prefetch = settings.prefetch && prefetch_why.isEmpty() && !cached;
  sum.prefetch = use_prefetch;
  if (!settings.prefetch) {
    sum.prefetch_note = QStringLiteral("off");
  } else if (!prefetch_why.isEmpty()) {
    sum.prefetch_note = QStringLiteral("does not apply: ") + prefetch_why;
  } else if (cached) {
    sum.prefetch_note = QStringLiteral("the clip was still in memory from the previous run: nothing to read");
  }
  media::ReadOptions ro;
  ro.first_frame = req.input.first_frame;
  ro.max_frames = req.input.max_frames;
  ro.stride = req.input.stride;
  ro.resize_width = req.input.resize_width;
  ro.resize_height = req.input.resize_height;
  // Declared before everything that may fail later: destroyed (reader stopped and joined) on
  // every way out of this function, cancel and errors included.
  std::unique_ptr<media::VideoFrameSource> source;
  if (use_prefetch) {
    clip_.reset();
    media::VideoSourceOptions so;
    so.read = ro;
    so.spatial_multiple = multiple;
    so.temporal_pad = pad_mode;
    so.prefetch = true;
    std::tie(so.first_chunk_frames, so.chunk_frames) =
        media::encoder_chunk_frames(settings.chunk_latents, cfg.temporal_factor(), settings.lone_head);
    so.keep_input = true;  // the original frames for the metrics, the preview and the report
    SEEDVAE_ASSIGN_OR_RETURN(source, media::VideoFrameSource::open(req.input.path.toStdString(), so, cancel));
  } else if (!cached) {
    clip_.reset();
    auto cache = std::make_unique<ClipCache>();
    cache->key = clip_key;
    HostTensor video;
    if (req.input.is_sample()) {
      video = media::make_sample_clip(req.input.sample_width, req.input.sample_height,
                                      req.input.sample_frames);
      cache->fps = 24;
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(media::Clip clip, media::read_clip(req.input.path.toStdString(), ro, cancel));
      video = std::move(clip.video);
      cache->fps = clip.fps;
    }
    const Shape& s = video.shape();
    cache->plan = media::plan_padding(s[2], s[3], s[4], multiple);
    SEEDVAE_ASSIGN_OR_RETURN(cache->padded, media::apply_padding(video, cache->plan, pad_mode));
    cache->originals = clip_to_images(video);
    cache->original = std::make_shared<const HostTensor>(std::move(video));
    clip_ = std::move(cache);
  }
  const double setup_s = seconds_since(t0);
  if (!use_prefetch) {
    sum.read_s = setup_s;
    sum.read_wait_s = setup_s;  // the engine thread did the reading itself
  }
  if (cancel) SEEDVAE_TRY(cancel->check());

  const QVector<BackendSpec> specs = catalog_->backends();
  const BackendSpec* spec = catalog_->find(specs, settings.backend);
  // Once the clip is in memory (before encoding, or after it with prefetch): its size, the frame
  // store's originals and the memory prediction for exactly these settings (shapes only; never
  // touches backend_).
  auto clip_ready = [&] {
    const media::PadPlan& p = clip_->plan;
    sum.width = static_cast<int>(p.width);
    sum.height = static_cast<int>(p.height);
    sum.padded_width = static_cast<int>(p.padded_width);
    sum.padded_height = static_cast<int>(p.padded_height);
    sum.frames = p.frames;
    sum.padded_frames = p.padded_frames;
    sum.fps = clip_->fps;
    sum.original = clip_->original;
    if (req.store) {
      req.store->set_total(p.frames, clip_->fps);
      req.store->set_originals(clip_->originals);
    }
    PredictionRequest pr;
    pr.weights = weights;
    pr.width = sum.width;
    pr.height = sum.height;
    pr.frames = sum.frames;
    pr.settings = settings;
    const Prediction pred = predict_memory(pr);
    if (pred.ok) sum.predicted_peak_bytes = pred.engine_bytes;
  };
  if (!use_prefetch) clip_ready();

  // ---- engine hooks ----
  RunTelemetry telemetry(this, telemetry_.get(), req.id, req.slot, t0,
                         spec ? spec->memory_is_host : true, &sum.telemetry);
  backend_->reset_peak();
  telemetry.sample(QStringLiteral("run"), QStringLiteral("start"), -1, -1, 0, backend_->memory_stats());
  model_->set_telemetry(&telemetry);
  // Cancel is polled after every top-level block as well as between chunks and tiles, so it takes
  // effect well within one chunk or tile.
  model_->set_observer([cancel](std::string_view, const Tensor&) {
    return cancel ? cancel->check() : Status::ok();
  });

  TileOptions topt;
  topt.mode = to_core(settings.tiling);
  topt.spec = TileSpec{settings.tile_height, settings.tile_width, settings.overlap_height,
                       settings.overlap_width};
  topt.layout = settings.tile_layout == QLatin1String("uniform") ? TileLayout::kUniform
                                                                 : TileLayout::kReference;
  topt.weights = weights.get();
  topt.exact_keep_weights = settings.exact_keep_weights;
  // Async tiles: the stream and blend tiling queue the next chunk/tile before the host finishes
  // the previous one; exact tiling ignores the flag (async_tiles_unavailable_reason()).
  const StreamOptions stream{.chunk_latents = settings.chunk_latents,
                             .async_tiles = settings.async_tiles,
                             .lone_head = settings.lone_head,
                             .hires_chunk_frames = settings.hires_chunk_frames,
                             .lean_convs = settings.lean_convs};
  const QString async_why = async_tiles_unavailable_reason(settings);
  sum.async_tiles = settings.async_tiles && async_why.isEmpty();
  if (!settings.async_tiles) {
    sum.async_tiles_note = QStringLiteral("off");
  } else if (!async_why.isEmpty()) {
    sum.async_tiles_note = QStringLiteral("does not apply: ") + async_why;
  }
  const bool exact = settings.tiling == TilingMode::kExact;

  // Exact mode runs layer by layer outside VaeModel's stage telemetry: sample at each tile.
  auto last_tile = Clock::now();
  auto tile_sampler = [&](const QString& op) {
    return [&, op](const TileEvent& ev) -> Status {
      const auto now = Clock::now();
      const double ms = std::chrono::duration<double, std::milli>(now - last_tile).count();
      last_tile = now;
      telemetry.sample(op, QStringLiteral("exact tile"), ev.chunk, ev.index, ms,
                       backend_->memory_stats());
      return cancel ? cancel->check() : Status::ok();
    };
  };

  // ---- encode ----
  progress.phase(QStringLiteral("encode"), kEncode);
  const auto te = Clock::now();
  TileHooks enc_tiles;
  if (exact) enc_tiles.on_tile = tile_sampler(QStringLiteral("encode"));
  last_tile = Clock::now();
  HostTensor moments;
  if (source) {
    // Frames arrive from the prefetch thread chunk by chunk; bit-identical to tiled_encode() of
    // the whole padded clip with tiling off. encode_s includes the waits for frames.
    SEEDVAE_ASSIGN_OR_RETURN(moments, encode_stream(*model_, *source, stream,
                                                    StreamHooks{cancel, &progress, {}, -1}));
    sum.encode_s = seconds_since(te);
    if (!source->finished()) return internal_error("the frame source did not reach the end of the clip");
    const media::PrefetchStats ps = source->stats();
    sum.read_s = setup_s + ps.read_seconds;
    sum.read_wait_s = ps.wait_seconds;
    sum.read_overlap_s = std::max(0.0, ps.read_seconds - ps.wait_seconds);
    auto cache = std::make_unique<ClipCache>();
    cache->key = clip_key;
    cache->plan = source->plan();
    cache->fps = source->fps();
    SEEDVAE_ASSIGN_OR_RETURN(cache->padded, source->input());
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor video, media::remove_padding_checked(cache->padded, cache->plan));
    source.reset();  // the reader has finished; join it
    cache->originals = clip_to_images(video);
    cache->original = std::make_shared<const HostTensor>(std::move(video));
    clip_ = std::move(cache);
    clip_ready();
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(moments, tiled_encode(*model_, clip_->padded, topt, stream,
                                                   StreamHooks{cancel, &progress, {}, -1}, &enc_tiles));
    sum.encode_s = seconds_since(te);
  }
  HostTensor latent = moments_mean(moments);
  moments = HostTensor();

  // ---- decode, streaming frames to the preview ----
  progress.phase(QStringLiteral("decode"), kDecode);
  const auto td = Clock::now();
  const media::PadPlan& plan = clip_->plan;
  const qint64 frames = plan.frames;
  const int w = static_cast<int>(plan.width), h = static_cast<int>(plan.height);
  auto on_chunk = [&](int64_t first, const HostTensor& chunk) -> Status {
    const int64_t n = chunk.shape()[2];
    for (int64_t i = 0; i < n && first + i < frames; ++i) {
      QImage img = frame_to_image(chunk, i, w, h);
      if (req.store) req.store->put(first + i, img);
      FrameUpdate u;
      u.run_id = req.id;
      u.slot = req.slot;
      u.index = first + i;
      u.available = std::min<qint64>(first + i + 1, frames);
      u.total = frames;
      u.image = std::move(img);
      if (frames_->publish(std::move(u))) emit framesReady();
    }
    return cancel ? cancel->check() : Status::ok();
  };
  TileRunReport tile_report;
  TileHooks dec_tiles;
  dec_tiles.report = &tile_report;
  if (exact) dec_tiles.on_tile = tile_sampler(QStringLiteral("decode"));
  last_tile = Clock::now();
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor decoded,
                           tiled_decode(*model_, latent, topt, stream,
                                        StreamHooks{cancel, &progress, on_chunk, -1}, &dec_tiles));
  sum.decode_s = seconds_since(td);
  model_->set_telemetry(nullptr);
  sum.peak_bytes = backend_->memory_stats().peak_bytes;
  sum.overlay = make_overlay(tile_report, decoded, w, h);
  if (settings.tiling != TilingMode::kOff) {
    sum.tile_report = std::make_shared<const TileRunReport>(tile_report);
#ifdef SEEDVAE_UI_HAVE_SEAM_METRICS
    // Core's seam metrics: the seam energy and the per-tile offset of the raw tile outputs.
    if (auto m = seam_metrics(decoded, tile_report, nullptr)) {
      sum.seam_energy = m->seam_energy;
      sum.max_tile_offset = m->max_tile_offset * 127.5;
      for (const TileSeamStat& t : m->per_tile) {
        if (t.index < 0 || t.index >= sum.overlay.tile_offset.size() || t.offset_vs_output.empty()) continue;
        double acc = 0;
        for (double v : t.offset_vs_output) acc += v;
        sum.overlay.tile_offset[static_cast<int>(t.index)] = acc / static_cast<double>(t.offset_vs_output.size()) * 127.5;
      }
    }
#endif
    if (!(sum.max_tile_offset == sum.max_tile_offset)) {
      double worst = 0;
      for (double o : sum.overlay.tile_offset) {
        if (o == o) worst = std::max(worst, std::abs(o));
      }
      sum.max_tile_offset = worst;
    }
  }

  // ---- quality ----
  progress.phase(QStringLiteral("metrics"), kMetrics);
  const auto tm = Clock::now();
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor recon, media::remove_padding_checked(decoded, plan));
  decoded = HostTensor();
  for (float& v : recon.f32()) v = std::clamp(v, -1.f, 1.f);
  auto q = media::compare_clips(recon, *clip_->original);
  if (q) {
    sum.vs_original.psnr_db = q->psnr_db;
    sum.vs_original.ssim = q->ssim;
    sum.vs_original.max_abs = q->max_abs;
    sum.vs_original.rms = q->rms;
  }
  sum.reconstruction = std::make_shared<const HostTensor>(std::move(recon));
  sum.metrics_s = seconds_since(tm);
  sum.ms_per_frame = frames > 0 ? 1000.0 * (sum.encode_s + sum.decode_s) / static_cast<double>(frames) : 0;
  progress.finish(QStringLiteral("done"));
  return Status::ok();
}

void EngineWorker::compare(quint64 id, const RunSummary& a, const RunSummary& b) {
  AbComparison ab;
  ab.a = a;
  ab.b = b;
  if (!a.ok || !b.ok) {
    ab.error = QStringLiteral("run %1 did not finish").arg(!a.ok ? a.slot : b.slot);
  } else if (!a.reconstruction || !b.reconstruction ||
             !(a.reconstruction->shape() == b.reconstruction->shape())) {
    ab.error = QStringLiteral("A and B reconstructions differ in shape");
  } else {
    try {
      auto q = media::compare_clips(*a.reconstruction, *b.reconstruction);
      if (q) {
        ab.a_vs_b.psnr_db = q->psnr_db;
        ab.a_vs_b.ssim = q->ssim;
        ab.a_vs_b.max_abs = q->max_abs;
        ab.a_vs_b.rms = q->rms;
        ab.ok = true;
      } else {
        ab.error = qstr(q.status().to_string());
      }
      // One tiled, one untiled: |tiled - untiled| is the seam error itself.
      if (ab.ok && a.tiled() != b.tiled()) {
        const RunSummary& tiled = a.tiled() ? a : b;
        const RunSummary& ref = a.tiled() ? b : a;
        ab.tiled_slot = tiled.slot;
        // |tiled - untiled| over the frame in 8-bit levels (compare_clips works on the [0, 1] scale).
        ab.seam_max_abs = q->max_abs * 255.0;
        ab.seam_rms = q->rms * 255.0;
#ifdef SEEDVAE_UI_HAVE_SEAM_METRICS
        if (tiled.tile_report && tiled.width == tiled.padded_width && tiled.height == tiled.padded_height) {
          if (auto m = seam_metrics(*tiled.reconstruction, *tiled.tile_report, ref.reconstruction.get())) {
            ab.reference_seam_energy = m->reference_seam_energy;
          }
        }
#else
        (void)ref;
#endif
      }
    } catch (const std::exception& e) {
      ab.error = QStringLiteral("comparison failed: %1").arg(e.what());
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
  media::WriteOptions wo;
  wo.fps = run.fps > 0 ? run.fps : 24;
  Status st;
  try {
    st = media::write_clip(path.toStdString(), *run.reconstruction, wo);
  } catch (const std::exception& e) {
    st = internal_error(e.what());
  }
  emit videoWritten(st.is_ok(), path, st.is_ok() ? QString() : qstr(st.to_string()));
}

}  // namespace seedvae::ui
