// Predicted peak memory of a run for the settings panel.
//
//  * Primary: core's planner (core/schedule/planner.h) for the encoder and the decoder on the
//    padded frame, with the backend's memory model (oneDNN/cuDNN transients, packed weights) and
//    the tiling mode, tile, overlap, temporal chunk and precision of the settings.
//  * Cross-check: a dry run of the model through core's CountingBackend (exact shapes, no
//    arithmetic): the first temporal chunk and one later chunk (whose causal memory adds to the
//    peak) of the encoder and the decoder on the region one backend call sees.
//  * Host buffers the studio keeps (clip, padded copy, decoded output, preview images).
//
// Both run on a pool thread with their own CountingBackend: they share only the immutable host
// weights with the engine, never the engine's backend. Requests are coalesced: while one
// prediction runs, newer requests replace each other and only the latest is computed next.
#pragma once

#include <QObject>
#include <QThreadPool>
#include <memory>
#include <optional>

#include "core/base/status.h"
#include "ui/studio_types.h"

namespace seedvae {
struct VaeWeights;
}

namespace seedvae::ui {

struct PredictionRequest {
  std::shared_ptr<const VaeWeights> weights;
  int width = 0, height = 0;  // frame size after downscale (before padding)
  qint64 frames = 0;          // frames read (before temporal padding)
  EngineSettings settings;
  bool memory_is_host = true;  // the backend's memory is system RAM (CPU)
};

struct Prediction {
  quint64 generation = 0;
  bool ok = false;
  QString error;
  qint64 weight_bytes = 0;       // parameters on the backend in its precision
  qint64 activation_bytes = 0;   // peak of activations + causal memory
  qint64 engine_bytes = 0;       // weights + activations: what the backend allocator will peak at
  qint64 host_bytes = 0;         // clip buffers and preview images kept in RAM
  int region_width = 0, region_height = 0;  // what one backend call sees
  QString method;                // "planner: ..." or "dry run ..."
  bool approximate = false;      // the dry run approximates exact mode's per-layer schedule
  qint64 dry_run_bytes = -1;     // CountingBackend cross-check (weights + activations)
  double relative_time = 1;      // planner: time relative to the untiled run
  qint64 tiles = 1;              // planner: tiles per chunk
};

// The planner's choice of the largest tile and temporal chunk that fit a budget.
struct BudgetFit {
  bool ok = false;     // a plan was computed
  bool fits = false;   // and it fits the budget
  QString message;
  int tile_width = 0, tile_height = 0;
  int chunk_latents = 1;
  TilingMode mode = TilingMode::kExact;
  qint64 peak_bytes = 0;
};

// The computations themselves (any thread).
Prediction predict_memory(const PredictionRequest& request);
BudgetFit fit_to_budget(const PredictionRequest& request, qint64 budget_bytes);

class MemoryPredictor : public QObject {
  Q_OBJECT

 public:
  explicit MemoryPredictor(QObject* parent = nullptr);
  ~MemoryPredictor() override;  // waits for a running dry run (milliseconds)

  void request(PredictionRequest request);
  std::optional<Prediction> latest() const { return latest_; }
  // The planner's largest tile and chunk within `budget_bytes` (answered by fitted()).
  void fit(PredictionRequest request, qint64 budget_bytes);

 signals:
  void predicted(seedvae::ui::Prediction prediction);
  void fitted(seedvae::ui::BudgetFit fit);

 private:
  void launch();

  QThreadPool pool_;
  std::optional<PredictionRequest> pending_;
  bool running_ = false;
  quint64 generation_ = 0;
  std::optional<Prediction> latest_;
};

}  // namespace seedvae::ui

Q_DECLARE_METATYPE(seedvae::ui::Prediction)
Q_DECLARE_METATYPE(seedvae::ui::BudgetFit)
