// Every engine and model option of a run, declared once.
//
// RunOptions holds the values (its member initialisers are the defaults). run_option_table()
// describes each member once: its key (presets, JSON, the studio's widget name "opt_<key>"), its
// command-line flag, label, help text (the CLI's help and the studio's tooltip), kind, range or
// choices, which backends honour it and when it does not apply. The CLI's flags
// (app/run_options_cli.h), the studio's settings widgets (ui/settings_panel.cpp), presets
// (to_json / from_json) and the report's settings line (describe) are all generated from it, so
// an option added here appears in every front end.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/backend/cuda_switches.h"
#include "core/base/status.h"
#include "core/schedule/streaming.h"
#include "core/schedule/tiled.h"

namespace seedvae {

// A size in pixels, "WxH" on the command line and in presets. 0x0 where "automatic" makes sense.
struct PixelSize {
  int64_t width = 0, height = 0;
  bool operator==(const PixelSize&) const = default;
  std::string to_string() const;  // "512x512"
  static Result<PixelSize> parse(std::string_view text);
};

// The CUDA engine's switches are the base CudaSwitches (shared with the CUDA backend's options);
// a pointer to one of its members converts to a pointer to a RunOptions member, so the table
// lists them like the others.
struct RunOptions : CudaSwitches {
  // ---- engine ----
  std::string backend = "cpu";  // cpu | cuda
  int device = 0;               // CUDA device index
  // Devices of a pipelined decode, "0,1,..." (core/schedule/pipeline_decode.h); empty or one
  // index: one device (`device`, or that index).
  std::string devices;
  // Where the pipelined decode cuts the decoder: the first unit of every device after the
  // first, "14" or "11,13,16"; empty: the cost model's balanced cut.
  std::string pipeline_cuts;
  int threads = 0;  // CPU threads, 0 = automatic
  std::string precision = "fp32";
  bool fp8_numerics = false;  // convolution operands rounded to e4m3 (core/backend/fp8_numerics.h)
  // ---- temporal streaming (StreamOptions, ChunkOptions) ----
  int chunk_latents = 1;
  int hires_chunk_frames = 0;
  bool lone_head = false;
  bool lean_convs = false;
  std::string async_tiles = "auto";  // auto | on | off
  // ---- spatial tiling (TileOptions) ----
  std::string tiling = "off";  // off | blend | exact
  PixelSize tile;              // 0x0: the planner's largest within the budget, else 512x512
  PixelSize overlap{64, 64};
  std::string tile_layout = "reference";  // reference | uniform
  bool exact_keep_weights = false;
  // ---- memory ----
  double budget_gb = 0;  // device budget, GiB; 0: the device's free memory minus a margin
  // CUDA, untiled, no memory switch set: a run whose planned peak exceeds the budget switches to
  // the state offload with a lone head and lean convolutions, else to exact tiling
  // (choose_schedule, core/pipeline/prediction.h).
  bool auto_schedule = true;
  // ---- input ----
  std::string prefetch = "auto";        // auto | on | off
  std::string temporal_pad = "mirror";  // mirror | repeat-last
  int spatial_multiple = 8;             // 8 | 16
  // ---- output (the decoded video's file: media::WriteOptions) ----
  std::string codec = "auto";      // auto | h264 | h265 | ffv1 | prores | prores4444 | png | exr
  int crf = -1;                    // H.264/H.265 CRF; -1: the codec's default
  std::string preset = "auto";     // x264/x265 preset; auto: medium
  bool lossless = false;           // H.264/H.265 without loss
  std::string bit_depth = "auto";  // auto | 8 | 10 | 16
  // Resumable output: a segment and a checkpoint every N chunks (0: off; job.h)
  int checkpoint_chunks = 16;

  bool operator==(const RunOptions&) const = default;
};

enum class OptionGroup : uint8_t {
  kEngine,     // backend, device, threads, precision
  kCuda,       // the CUDA engine's switches
  kStreaming,  // temporal chunks and how the model runs them
  kTiling,     // spatial tiling
  kMemory,     // the memory budget
  kInput,      // reading and padding the input video
  kOutput,     // the decoded video's file
};
std::string_view option_group_name(OptionGroup group);  // "Engine", "CUDA engine", ...

enum class OptionKind : uint8_t { kBool, kInt, kReal, kChoice, kText, kSize };

// Which backends honour an option.
enum OptionBackends : uint8_t { kCpuBackend = 1, kCudaBackend = 2, kAnyBackend = 3 };

using OptionMember = std::variant<bool RunOptions::*, int RunOptions::*, double RunOptions::*,
                                  std::string RunOptions::*, PixelSize RunOptions::*>;

// A value of any option kind (bool, int, real, text for choices/text, size).
using OptionValue = std::variant<bool, int, double, std::string, PixelSize>;

struct OptionSpec {
  std::string_view key;            // "lean_convs"
  std::string_view flag;           // "--lean-convs"; a default-true bool also takes "--no-..."
  std::string_view negative_flag;  // default-true bools: "--no-fused-gn"
  std::string_view label;          // "Lean convolutions"
  OptionGroup group;
  OptionKind kind;
  std::string_view help;  // what it does and what it costs
  OptionMember member;
  std::span<const std::string_view> choices = {};  // kChoice; kInt: the allowed values (text)
  double minimum = 0, maximum = 0;                 // kInt / kReal / kSize components
  std::string_view special_text = {};  // how the minimum reads ("auto", "off", "whole clip")
  uint8_t backends = kAnyBackend;
  // Backends that take this option when they are made, though it is not an engine option (the
  // CUDA backend applies the device budget at creation): part of backend_key() for them.
  uint8_t made_into = 0;
  // Why the option does not apply to a run with `o` (empty when it does); backends aside.
  std::string (*not_applicable)(const RunOptions& o) = nullptr;
  // Shown in the short label of a run (A/B view captions) when not at its default.
  bool in_short_label = false;
};

// Every option, in display order (grouped).
std::span<const OptionSpec> run_option_table();
const OptionSpec* find_option(std::string_view key);

OptionValue option_value(const RunOptions& o, const OptionSpec& spec);
// Sets the option, checking its kind, range and choices ("chunk_latents: -3 is below 0").
Status set_option(RunOptions& o, const OptionSpec& spec, const OptionValue& value);
// A value as the command line writes it ("bf16", "512x512", "2.5", "3"; a bool: true/false,
// on/off, 1/0), checked as set_option() checks it.
Result<OptionValue> parse_option_value(const OptionSpec& spec, std::string_view text);
// "bf16", "512x512", "on", "2.5" (how a value reads in a preset, a label and the CLI).
std::string format_option_value(const OptionValue& value);
bool option_is_default(const RunOptions& o, const OptionSpec& spec);
// Why `spec` does not apply to `o`: another backend, or its not_applicable rule. Empty: applies.
std::string option_not_applicable(const RunOptions& o, const OptionSpec& spec);

// RunOptions::devices as indices ({} when empty) and RunOptions::pipeline_cuts as unit indices
// ({} when empty); malformed lists are refused.
Result<std::vector<int>> parse_devices(std::string_view text);
Result<std::vector<int>> parse_pipeline_cuts(std::string_view text);

// The device-level budget in bytes (RunOptions::budget_gb; 0 when none was given).
int64_t budget_bytes(const RunOptions& options);

// Refuses combinations that cannot run (with the reason and the flags to change): lean
// convolutions with CUDA graphs; chunked upsampling, a lone head or lean convolutions with exact
// tiling; async tiles "on" with exact tiling; unknown choices; values out of range.
Status validate(const RunOptions& o);

// Preset / report form: {"backend": "cuda", "precision": "bf16", "tile": "512x512", ...}, every
// option. from_json ignores unknown keys and keeps the default for values of the wrong type or
// out of range, listing each in `warnings`; it also reads the older preset keys (toggles,
// tile_width, budget_mib, boolean prefetch/async_tiles).
std::string to_json(const RunOptions& o);
RunOptions run_options_from_json(std::string_view json, std::vector<std::string>* warnings);

// "cuda bf16, chunk 1, untiled; lean convolutions, offload state" -- the backend and precision,
// the chunk and tiling, then every other option that applies and differs from its default.
std::string describe(const RunOptions& o);
// "exact 512x512, chunk 1, lean" -- what tells two runs apart in a caption.
std::string short_label(const RunOptions& o);
// A key that changes exactly when the backend must be created anew (backend, device, precision
// and the options of that backend).
std::string backend_key(const RunOptions& o);

// The model options of a run.
TilingMode tiling_mode(const RunOptions& o);
// Temporal streaming (async tiles resolved: auto = on except with exact tiling).
StreamOptions stream_options(const RunOptions& o);
// Bytes per activation and per parameter of the precision (fp32, tf32 and fidelity: 4, fp16 and
// bf16: 2; fidelity's fp16 convolution weights are 2, prediction.cpp).
int64_t precision_bytes(const RunOptions& o);

}  // namespace seedvae
