// `seedvae verify`: checks the engine against a reference folder laid out like ../shared/golden
// (manifest.json + one folder per configuration with inputs.safetensors, golden_fp32.safetensors
// and optionally weights and intermediates). Every case, shape and tile parameter comes from the
// manifest, never from code.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/base/cancel.h"
#include "core/pipeline/run_options.h"

namespace seedvae {

struct VerifyOptions {
  std::filesystem::path reference_dir;
  std::vector<std::string> configs;              // empty: every configuration in the manifest
  std::vector<std::string> only;                 // tensor-name substrings to run; empty: all
  std::optional<std::filesystem::path> weights;  // overrides the folder's / synthetic weights
  double tolerance = 1e-4;                       // max abs error for outputs (fp32)
  // The run's options: its precision (fp32 uses `tolerance`; tf32 uses the golden README's
  // recommendation, max abs 1e-2 and rms 1.5e-3; fp16/bf16 must be no worse, max abs and rms,
  // than PyTorch's own error for the same tensor in the same mode: the manifest's
  // lowp_error_vs_fp32 *_pure rows; fidelity within half of PyTorch's bf16 error, max abs and
  // rms) and the model options every case runs with (chunked
  // upsampling, lean convolutions; the temporal chunk comes from each case).
  RunOptions run;
  bool run_model = true;      // false: check inputs and weights only
  bool intermediates = true;  // compare per-block intermediates where shipped
};

struct VerifyRow {
  std::string config;
  std::string tensor;  // golden tensor name, or "weights", "inputs"
  std::string status;  // "pass", "FAIL", "skip"
  double max_abs = 0;
  double rms = 0;
  double tolerance = 0;  // the bound of max_abs
  double seconds = 0;
  std::string note;
  double rms_tolerance = -1;  // the bound of rms, -1: none
  // Error over bound, the larger of max abs and rms (1: on the bound; a pass is at most 1), or -1
  // for a row without a bound (skips, the weights' checks).
  double margin() const;
};

struct VerifyReport {
  std::vector<VerifyRow> rows;
  int passed() const;
  int failed() const;
  int skipped() const;
  // The checked row closest to (or furthest over) its bound, nullptr when none has a bound.
  const VerifyRow* worst() const;
};

// Runs the verification on `backend`. `on_row` is called as each row completes (for live
// output). Cancel is checked between cases.
// One row as the verify reports (`seedvae verify --json`, `seedvae_gpu_bench verify --json`) write
// it: a JSON object with every field of the row.
std::string verify_row_json(const VerifyRow& row);
// A row's margin as the reports print it: "0.97", or "-" without a bound.
std::string margin_text(const VerifyRow& row);
// "; worst margin 0.97 (tiny L2.dec)" for the summary line, or "" when no row has a bound.
std::string worst_margin_text(const VerifyReport& report);

Result<VerifyReport> run_verify(Backend& backend, const VerifyOptions& options,
                                const std::function<void(const VerifyRow&)>& on_row = {},
                                const CancelToken* cancel = nullptr);

}  // namespace seedvae
