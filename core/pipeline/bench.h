// `seedvae bench`: a fixed, repeatable measurement of encode and decode on one backend with the
// options of a run (precision, every engine toggle, temporal chunk, tiling, memory budget), with
// time, FLOP rate and memory per op and per stage (top-level block). Each op runs as a job would
// run it (encode_clip / decode_clip: the tiling and the budget's tile included) on a random clip.
// FLOPs are the analytic work of the model (CountingBackend: exact shapes, docs/model.md §7);
// times come from the stage telemetry of the real run (host wall time after device
// synchronisation; GPU backends add event times).
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/pipeline/run_options.h"
#include "core/schedule/pipeline_decode.h"
#include "core/vae/state_dict.h"

namespace seedvae {

struct BenchOptions {
  RunOptions run;  // backend options, chunking, tiling, budget: as for any job
  int width = 256;
  int height = 256;
  int frames = 17;  // 4n+1
  int warmup = 1;
  int repeats = 3;  // median over repeats
  bool encode = true;
  bool decode = true;
  // What the automatic schedule chose (choose_bench_schedule); empty: the options as given.
  std::string schedule_note;
};

struct BenchStage {
  std::string op;     // "encode" or "decode"
  std::string stage;  // "decoder.up_blocks.1" ...
  double ms = 0;      // total over the staged run (all chunks and tiles; one extra run
                      // whose telemetry synchronises after every block)
  double gflop = 0;   // analytic, of the untiled model
};

struct BenchOpResult {
  std::string op;
  double total_ms = 0;      // median of repeats
  double ms_per_frame = 0;  // per input frame (encode) or output frame (decode)
  double tflop = 0;         // analytic FLOPs of the whole op (the untiled model's work)
  double tflops_per_s = 0;
  int64_t peak_bytes = 0;  // backend allocator peak during the op (weights included)
  // Device level (-1 where the backend cannot tell): the allocator's reserve at its peak, and the
  // card's used memory at its sampled peak minus its use before the backend existed (context,
  // library handles and kernels, reserve: what the card must have free); the backend's fixed
  // part (context and handles) and the device budget it enforced.
  int64_t reserved_peak_bytes = -1;
  int64_t device_peak_bytes = -1;
  int64_t fixed_bytes = -1;
  int64_t budget_bytes = 0;
  int64_t host_peak_bytes = -1;  // the process's peak resident set during the op
  std::vector<double> runs_ms;
  // The tiling the op ran with (after the budget's choice of tile).
  std::string tiling = "off";
  int64_t tile_w = 0, tile_h = 0, overlap_w = 0, overlap_h = 0;
  int64_t tiles = 1;      // tiles per chunk (exact: of the output layer)
  std::string plan_note;  // what the memory budget chose
  // An op over several devices (RunOptions::devices), the last timed run: each device's share
  // of the decoder (a pipelined decode) or its tiles (blend tiles), busy time and peaks (device
  // level: the allocator's reserve at its peak plus the context and library handles).
  struct Device {
    std::string backend;
    std::string units;  // "0-14 (decoder.conv_in .. …)" or "12 tiles"
    double busy_ms = 0;
    double import_ms = 0;  // of busy_ms: copying the activations in from the device before
    int64_t imported_bytes = 0;
    int64_t peak_bytes = 0, reserved_peak_bytes = -1, fixed_bytes = -1;
    PipelineWaits waits;  // where its thread waited
    int64_t device_level_bytes() const {
      return reserved_peak_bytes < 0 ? -1 : reserved_peak_bytes + std::max<int64_t>(0, fixed_bytes);
    }
  };
  std::vector<Device> devices;
  std::string pipeline;  // PipelinePlan::describe()
};

struct BenchResult {
  std::string backend;
  BenchOptions options;
  std::string config;
  std::vector<BenchOpResult> ops;
  std::vector<BenchStage> stages;
};

// `backend` runs the ops (the first device of options.run.devices, when given). An op over
// several devices makes the other devices' backends with `make_backend` (RunOptions::device set
// to each), once for all runs.
using BenchBackendFactory = std::function<Result<std::unique_ptr<Backend>>(const RunOptions&)>;
Result<BenchResult> run_bench(Backend& backend, const VaeWeights& weights,
                              const BenchOptions& options,
                              const BenchBackendFactory& make_backend = {});

// The automatic schedule of the benchmark's ops, as a job would choose it (choose_schedule,
// core/pipeline/prediction.h) within the device budget of `backend`: updates options.run and
// options.schedule_note. True when the backend must be made again (the state offload turned on).
Result<bool> choose_bench_schedule(BenchOptions& options, const VaeWeights& weights,
                                   const Backend& backend);

// The benchmark's JSON report (`seedvae bench --json`): the options of the run, every op with
// its tiling, and the stages.
std::string bench_json(const BenchResult& result, const std::string& weights_source);

// Analytic FLOPs of encode (true) or decode (false) for a clip, via CountingBackend: SeedVR2's
// and the Wan networks'.
Result<double> count_flops(const VaeConfig& config, bool encode, int frames, int height, int width,
                           int chunk_latents);
Result<double> count_flops(const WanConfig& config, bool encode, int frames, int height, int width,
                           int chunk_latents);

}  // namespace seedvae
