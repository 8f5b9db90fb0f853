// `seedvae bench`: a fixed, repeatable measurement of encode and decode on one backend, with time,
// FLOP rate and memory per stage (top-level block). FLOPs come from running the same model through
// CountingBackend (exact shapes, vae_spec.md §7); times from the stage telemetry of the real run
// (host wall time after device synchronisation; GPU backends add event times).
#pragma once

#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/vae/state_dict.h"

namespace seedvae {

struct BenchOptions {
  int width = 256;
  int height = 256;
  int frames = 17;         // 4n+1
  int chunk_latents = 1;   // temporal chunk; 0 = whole clip
  int hires_chunk_frames = 0;  // VaeModel::set_hires_chunk_frames (0 = off)
  bool async_tiles = true;     // StreamOptions::async_tiles
  bool lone_head = false;      // StreamOptions::lone_head
  bool lean_convs = false;     // VaeModel::set_lean_convs
  int warmup = 1;
  int repeats = 3;         // median over repeats
  bool encode = true;
  bool decode = true;
};

struct BenchStage {
  std::string op;          // "encode" or "decode"
  std::string stage;       // "decoder.up_blocks.1" ...
  double ms = 0;           // total over the staged run (all chunks; one extra run whose
                           // telemetry synchronises after every block)
  double gflop = 0;        // analytic
};

struct BenchOpResult {
  std::string op;
  double total_ms = 0;         // median of repeats
  double ms_per_frame = 0;     // per input frame (encode) or output frame (decode)
  double tflop = 0;            // analytic FLOPs of the whole op
  double tflops_per_s = 0;
  int64_t peak_bytes = 0;      // backend allocator peak during the op (weights excluded)
  std::vector<double> runs_ms;
};

struct BenchResult {
  std::string backend;
  BenchOptions options;
  std::string config;
  std::vector<BenchOpResult> ops;
  std::vector<BenchStage> stages;
};

Result<BenchResult> run_bench(Backend& backend, const VaeWeights& weights,
                              const BenchOptions& options);

// Analytic FLOPs of encode (true) or decode (false) for a clip, via CountingBackend.
Result<double> count_flops(const VaeConfig& config, bool encode, int frames, int height, int width,
                           int chunk_latents);

}  // namespace seedvae
