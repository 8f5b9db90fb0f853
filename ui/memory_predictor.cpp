#include "ui/memory_predictor.h"

#include <QMetaObject>
#include <algorithm>

#include "core/pipeline/prediction.h"
#include "core/vae/state_dict.h"

namespace seedvae::ui {

Prediction predict_memory(const PredictionRequest& r) {
  Prediction p;
  if (!r.weights) {
    p.error = QStringLiteral("no weights loaded");
    return p;
  }
  auto m = seedvae::predict_memory(r.settings, *r.weights, r.width, r.height, r.frames,
                                   r.device_budget_bytes);
  if (!m) {
    p.error = m.status().code() == StatusCode::kUnsupported
                  ? QStringLiteral("no prediction: ") + QString::fromStdString(m.status().message())
                  : QString::fromStdString(m.status().to_string());
    return p;
  }
  p.weight_bytes = m->weight_bytes;
  p.activation_bytes = m->activation_bytes;
  p.engine_bytes = m->engine_bytes;
  // + the preview images (RGB32, original and reconstruction)
  p.host_bytes = m->host_bytes + 2 * r.frames * static_cast<qint64>(r.width) * r.height * 4;
  p.tiles = m->tiles;
  p.relative_time = m->relative_time;
  p.method = QString::fromStdString(m->method);
  p.ok = true;
  return p;
}

BudgetFit fit_to_budget(const PredictionRequest& r, qint64 budget_bytes) {
  BudgetFit f;
  if (!r.weights || r.width <= 0 || r.height <= 0 || r.frames <= 0) {
    f.message = QStringLiteral("no input or weights yet");
    return f;
  }
  if (r.weights->is_wan()) {
    f.message = QStringLiteral("fitting tiles to a budget models SeedVR2 VAEs only");
    return f;
  }
  auto fit = seedvae::fit_to_budget(r.settings, r.weights->config, r.width, r.height, r.frames,
                                    budget_bytes);
  if (!fit) {
    f.message = QString::fromStdString(fit.status().to_string());
    return f;
  }
  f.ok = true;
  f.fits = fit->fits;
  f.message = QString::fromStdString(fit->message);
  f.tiling = QString::fromStdString(fit->tiling);
  f.tile_width = static_cast<int>(fit->tile.width);
  f.tile_height = static_cast<int>(fit->tile.height);
  f.chunk_latents = fit->chunk_latents;
  f.peak_bytes = fit->peak_bytes;
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
    QMetaObject::invokeMethod(
        this, [this, f] { emit fitted(f); }, Qt::QueuedConnection);
  });
}

}  // namespace seedvae::ui
