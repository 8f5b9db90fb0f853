// Predicted peak memory of a run for the settings panel: the job layer's prediction
// (core/pipeline/prediction.h: the planner's replay of the model for the encoder and the decoder
// with these settings) plus the studio's preview images. Computed on a pool thread: requests are
// coalesced (while one prediction runs, newer requests replace each other and only the latest is
// computed next); nothing here touches the engine's backend.
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
  RunOptions settings;
  bool memory_is_host = true;  // the backend's memory is system RAM (CPU)
  // The device budget the run will get (CUDA): the prediction is for the schedule it chooses
  // within it (core/pipeline/prediction.h choose_schedule); 0: as set.
  qint64 device_budget_bytes = 0;
};

struct Prediction {
  quint64 generation = 0;
  bool ok = false;
  QString error;
  qint64 weight_bytes = 0;      // parameters on the backend in its precision
  qint64 activation_bytes = 0;  // peak of activations + causal memory
  qint64 engine_bytes = 0;      // weights + activations: what the backend allocator will peak at
  qint64 host_bytes = 0;        // the job's host buffers and the preview images, in RAM
  QString method;               // the planner's account of the peak
  double relative_time = 1;     // time relative to the untiled run
  qint64 tiles = 1;             // tiles per chunk
};

// The planner's choice of the largest tile and temporal chunk that fit a budget.
struct BudgetFit {
  bool ok = false;    // a plan was computed
  bool fits = false;  // and it fits the budget
  QString message;
  QString tiling;  // "exact" or "blend"
  int tile_width = 0, tile_height = 0;
  int chunk_latents = 1;
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
