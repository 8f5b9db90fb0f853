#include "ui/memory_predictor.h"

#include <QMetaObject>
#include <algorithm>

#include "core/backend/counting_backend.h"
#include "core/media/vae_padding.h"
#include "core/schedule/planner.h"
#include "core/schedule/streaming.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"

namespace seedvae::ui {

namespace {

DType activation_dtype_for(const QString& precision) {
  if (precision == QLatin1String("fp16")) return DType::kF16;
  if (precision == QLatin1String("bf16")) return DType::kBF16;
  return DType::kF32;  // fp32 and tf32 keep fp32 storage
}

// A shape-only tensor the CountingBackend accepts as an input without allocating host memory.
Tensor shape_only(Shape s, DType dtype) {
  Tensor t;
  t.storage = std::make_shared<Storage>();
  t.shape = std::move(s);
  t.dtype = dtype;
  return t;
}

int64_t round_down_to(int64_t v, int64_t m) { return std::max<int64_t>(m, v / m * m); }

}  // namespace

// The CountingBackend dry run (also the fallback when the planner refuses a configuration).
Prediction dry_run(const PredictionRequest& r) {
  Prediction p;
  if (!r.weights) {
    p.error = QStringLiteral("no weights loaded");
    return p;
  }
  if (r.width <= 0 || r.height <= 0 || r.frames <= 0) {
    p.error = QStringLiteral("no input");
    return p;
  }
  const VaeConfig& cfg = r.weights->config;
  const int sf = cfg.spatial_factor();
  const int tf = cfg.temporal_factor();
  const int mult = std::max(sf, r.settings.spatial_multiple);
  const media::PadPlan plan = media::plan_padding(r.frames, r.height, r.width, mult);
  const int64_t H = plan.padded_height, W = plan.padded_width, T = plan.padded_frames;
  const DType act = activation_dtype_for(r.settings.precision);
  const int64_t es = dtype_size(act);

  int64_t rh = H, rw = W;
  switch (r.settings.tiling) {
    case TilingMode::kOff: p.method = QStringLiteral("dry run of the whole frame"); break;
    case TilingMode::kBlend:
      rh = std::min<int64_t>(H, round_down_to(r.settings.tile_height, sf));
      rw = std::min<int64_t>(W, round_down_to(r.settings.tile_width, sf));
      p.method = QStringLiteral("dry run of one %1x%2 tile (blend)").arg(rw).arg(rh);
      break;
    case TilingMode::kExact:
      rh = std::min<int64_t>(H, round_down_to(r.settings.tile_height, sf));
      rw = std::min<int64_t>(W, round_down_to(r.settings.tile_width, sf));
      p.method = QStringLiteral("approximation: dry run of one %1x%2 tile (exact mode keeps layer "
                                "inputs on the host)")
                     .arg(rw)
                     .arg(rh);
      p.approximate = true;
      break;
  }
  p.region_width = static_cast<int>(rw);
  p.region_height = static_cast<int>(rh);

  CountingBackend cb(act);
  auto model = VaeModel::create(cb, *r.weights);
  if (!model) {
    p.error = QString::fromStdString(model.status().to_string());
    return p;
  }
  const ChunkOptions co{.hires_chunk_frames = r.settings.hires_chunk_frames,
                        .lean_convs = r.settings.lean_convs};
  p.weight_bytes = cb.weight_bytes();

  const int64_t latents = (T - 1) / tf + 1;
  const auto chunks = plan_chunks(latents, r.settings.chunk_latents, r.settings.lone_head);
  const int64_t first_lat = chunks.front().second - chunks.front().first;
  const int64_t later_lat = chunks.size() > 1 ? chunks[1].second - chunks[1].first : 0;
  const int64_t lh = rh / sf, lw = rw / sf;

  // Peaks are of live activations only: weights are counted apart by the CountingBackend.
  int64_t peak = 0;
  Status st = [&]() -> Status {  // encoder: first chunk, then one later chunk
    CausalState state;
    const int64_t f0 = (first_lat - 1) * tf + 1;
    const int64_t in0 = 3 * f0 * rh * rw * es;
    cb.reset_peak();
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, model->encode_chunk(shape_only({1, 3, f0, rh, rw}, act), state, co));
    peak = std::max(peak, cb.memory_stats().peak_bytes + in0);
    y = {};
    if (later_lat > 0) {
      const int64_t f1 = later_lat * tf;
      cb.reset_peak();
      SEEDVAE_ASSIGN_OR_RETURN(Tensor y1, model->encode_chunk(shape_only({1, 3, f1, rh, rw}, act), state, co));
      peak = std::max(peak, cb.memory_stats().peak_bytes + 3 * f1 * rh * rw * es);
    }
    return Status::ok();
  }();
  if (st.is_ok()) {
    st = [&]() -> Status {  // decoder
      CausalState state;
      const int64_t c = cfg.latent_channels;
      cb.reset_peak();
      SEEDVAE_ASSIGN_OR_RETURN(Tensor y, model->decode_chunk(shape_only({1, c, first_lat, lh, lw}, act), state, co));
      peak = std::max(peak, cb.memory_stats().peak_bytes + c * first_lat * lh * lw * es);
      y = {};
      if (later_lat > 0) {
        cb.reset_peak();
        SEEDVAE_ASSIGN_OR_RETURN(Tensor y1, model->decode_chunk(shape_only({1, c, later_lat, lh, lw}, act), state, co));
        peak = std::max(peak, cb.memory_stats().peak_bytes + c * later_lat * lh * lw * es);
      }
      return Status::ok();
    }();
  }
  if (!st.is_ok()) {
    p.error = QString::fromStdString(st.to_string());
    return p;
  }
  // The mid-block attention's scratch (the CPU backend's blocked scores + projections; fused GPU
  // kernels need less), per frame at latent resolution.
  const int64_t tokens = lh * lw;
  const int64_t cmid = cfg.block_out_channels.back();
  const int64_t block = std::min<int64_t>(tokens, std::max<int64_t>(64, (int64_t{1} << 22) / std::max<int64_t>(1, tokens)));
  const int64_t attention_scratch = 5 * tokens * cmid * 4 + block * tokens * 4;
  p.activation_bytes = peak + attention_scratch;
  p.engine_bytes = p.weight_bytes + p.activation_bytes;

  // Host buffers: the clip as read, padded, the decoded output and the trimmed reconstruction
  // (fp32), the latent moments, and the preview images (RGB32, original + reconstruction).
  const int64_t px = r.height * static_cast<int64_t>(r.width);
  const int64_t ppx = H * W;
  p.host_bytes = r.frames * px * 3 * 4 + T * ppx * 3 * 4 * 2 + r.frames * px * 3 * 4 +
                 2 * cfg.latent_channels * latents * (ppx / (sf * sf)) * 4 + 2 * r.frames * px * 4;
  p.ok = true;
  return p;
}

namespace {

struct Padded {
  int64_t h = 0, w = 0, t = 0;
  int64_t latents = 0;
};

Padded padded_of(const PredictionRequest& r) {
  const VaeConfig& cfg = r.weights->config;
  const int mult = std::max(cfg.spatial_factor(), r.settings.spatial_multiple);
  const media::PadPlan plan = media::plan_padding(r.frames, r.height, r.width, mult);
  return {plan.padded_height, plan.padded_width, plan.padded_frames,
          (plan.padded_frames - 1) / cfg.temporal_factor() + 1};
}

seedvae::TilingMode core_mode(TilingMode m) {
  switch (m) {
    case TilingMode::kOff: return seedvae::TilingMode::kOff;
    case TilingMode::kBlend: return seedvae::TilingMode::kBlend;
    case TilingMode::kExact: return seedvae::TilingMode::kExact;
  }
  return seedvae::TilingMode::kOff;
}

PlanRequest plan_request(const PredictionRequest& r, const Padded& pd) {
  PlanRequest pr;
  pr.config = r.weights->config;
  pr.height = pd.h;
  pr.width = pd.w;
  pr.frames = pd.t;
  const bool half = r.settings.precision == QLatin1String("fp16") || r.settings.precision == QLatin1String("bf16");
  pr.activation_bytes = half ? 2 : 4;
  pr.weight_bytes = half ? 2 : 4;
  pr.mode = core_mode(r.settings.tiling);
  pr.layout = r.settings.tile_layout == QLatin1String("uniform") ? TileLayout::kUniform : TileLayout::kReference;
  pr.spec = TileSpec{r.settings.tile_height, r.settings.tile_width, r.settings.overlap_height,
                     r.settings.overlap_width};
  if (r.settings.tiling == TilingMode::kOff) pr.spec = TileSpec{pd.h, pd.w, 0, 0};
  pr.auto_tile = false;
  pr.auto_chunk = false;
  pr.chunk_latents = r.settings.chunk_latents > 0 ? r.settings.chunk_latents
                                                  : static_cast<int>(std::max<int64_t>(1, pd.latents));
  pr.exact_keep_weights = r.settings.exact_keep_weights;
  pr.hires_chunk_frames = r.settings.hires_chunk_frames;
  pr.backend = r.settings.backend == QLatin1String("cuda") ? BackendMemoryModel::cuda() : BackendMemoryModel::cpu();
  return pr;
}

// Host buffers of the studio itself: the clip as read, its padded copy, the decoded output and
// the trimmed reconstruction (fp32), the latent moments, and the preview images (RGB32).
int64_t studio_host_bytes(const PredictionRequest& r, const Padded& pd) {
  const int64_t px = static_cast<int64_t>(r.height) * r.width;
  const int64_t ppx = pd.h * pd.w;
  const int sf = r.weights->config.spatial_factor();
  return r.frames * px * 3 * 4 * 2 + pd.t * ppx * 3 * 4 * 2 +
         2 * r.weights->config.latent_channels * pd.latents * (ppx / (sf * sf)) * 4 + 2 * r.frames * px * 4;
}

}  // namespace

Prediction predict_memory(const PredictionRequest& r) {
  Prediction dry = dry_run(r);
  if (!r.weights || r.width <= 0 || r.height <= 0 || r.frames <= 0) return dry;
  const Padded pd = padded_of(r);
  PlanRequest pr = plan_request(r, pd);
  Prediction p;
  p.region_width = dry.region_width;
  p.region_height = dry.region_height;
  p.dry_run_bytes = dry.ok ? dry.engine_bytes : -1;
  QString why;
  for (PlanOp op : {PlanOp::kEncode, PlanOp::kDecode}) {
    pr.op = op;
    auto e = estimate(pr, pr.spec, pr.chunk_latents);
    if (!e) {
      why = QString::fromStdString(e.status().to_string());
      break;
    }
    if (e->peak_bytes > p.engine_bytes) {
      p.engine_bytes = e->peak_bytes;
      p.weight_bytes = e->weight_bytes + e->exact_weight_bytes;
      p.activation_bytes = e->peak_bytes - p.weight_bytes;
      p.tiles = e->tiles;
      p.relative_time = e->relative_time;
      p.method = QStringLiteral("planner (%1, %2): %3")
                     .arg(op == PlanOp::kEncode ? QStringLiteral("encoder") : QStringLiteral("decoder"),
                          QString::fromStdString(pr.backend.name),
                          QString::fromStdString(describe(*e)));
    }
    p.host_bytes = std::max<qint64>(p.host_bytes, e->host_bytes);
  }
  if (!why.isEmpty()) {
    // The planner refuses what the engine would refuse too (e.g. tiles smaller than a latent).
    dry.method = QStringLiteral("dry run (planner: %1)").arg(why);
    return dry;
  }
  p.host_bytes += studio_host_bytes(r, pd);
  if (p.dry_run_bytes >= 0) {
    p.method += QStringLiteral("; CountingBackend dry run: %1").arg(format_bytes(p.dry_run_bytes));
  }
  p.ok = true;
  return p;
}

BudgetFit fit_to_budget(const PredictionRequest& r, qint64 budget_bytes) {
  BudgetFit f;
  if (!r.weights || r.width <= 0 || r.height <= 0 || r.frames <= 0) {
    f.message = QStringLiteral("no input or weights yet");
    return f;
  }
  const Padded pd = padded_of(r);
  PlanRequest pr = plan_request(r, pd);
  // Tiling is the lever: an untiled setting is fitted with exact (seam-free) tiling.
  f.mode = r.settings.tiling == TilingMode::kOff ? TilingMode::kExact : r.settings.tiling;
  pr.mode = core_mode(f.mode);
  pr.auto_tile = true;
  pr.auto_chunk = true;
  pr.max_chunk_latents = std::max(1, r.settings.chunk_latents > 0 ? r.settings.chunk_latents : 4);
  pr.budget_bytes = budget_bytes;
  // The decoder needs the most memory: its search picks the tile and chunk, then the encoder is
  // checked with the same choice.
  pr.op = PlanOp::kDecode;
  auto rep = plan(pr);
  if (!rep) {
    f.message = QString::fromStdString(rep.status().to_string());
    return f;
  }
  f.tile_width = static_cast<int>(rep->chosen.spec.tile_w);
  f.tile_height = static_cast<int>(rep->chosen.spec.tile_h);
  f.chunk_latents = rep->chosen.chunk_latents;
  f.fits = rep->fits;
  f.message = QString::fromStdString(rep->message);
  int64_t worst = rep->chosen.peak_bytes;
  pr.op = PlanOp::kEncode;
  auto enc = estimate(pr, rep->chosen.spec, rep->chosen.chunk_latents);
  if (enc) {
    worst = std::max(worst, enc->peak_bytes);
    f.fits = f.fits && enc->peak_bytes <= budget_bytes;
  }
  f.peak_bytes = worst;
  f.ok = true;
  return f;
}

// ---- MemoryPredictor --------------------------------------------------------------------------

MemoryPredictor::MemoryPredictor(QObject* parent) : QObject(parent) {
  pool_.setMaxThreadCount(1);
}

MemoryPredictor::~MemoryPredictor() {
  pending_.reset();
  pool_.waitForDone();
}

void MemoryPredictor::request(PredictionRequest request) {
  pending_ = std::move(request);
  if (!running_) launch();
}

void MemoryPredictor::launch() {
  if (!pending_) return;
  PredictionRequest req = std::move(*pending_);
  pending_.reset();
  running_ = true;
  const quint64 gen = ++generation_;
  pool_.start([this, req = std::move(req), gen] {
    Prediction p = predict_memory(req);
    p.generation = gen;
    QMetaObject::invokeMethod(
        this,
        [this, p] {
          running_ = false;
          latest_ = p;
          if (!pending_) emit predicted(p);  // a newer request supersedes this result
          launch();
        },
        Qt::QueuedConnection);
  });
}

void MemoryPredictor::fit(PredictionRequest request, qint64 budget_bytes) {
  pool_.start([this, request = std::move(request), budget_bytes] {
    BudgetFit f = fit_to_budget(request, budget_bytes);
    QMetaObject::invokeMethod(this, [this, f] { emit fitted(f); }, Qt::QueuedConnection);
  });
}

}  // namespace seedvae::ui
