#include "core/pipeline/run_options.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace seedvae {

std::string PixelSize::to_string() const {
  return std::to_string(width) + "x" + std::to_string(height);
}

Result<PixelSize> PixelSize::parse(std::string_view text) {
  const size_t x = text.find_first_of("xX");
  PixelSize s;
  auto number = [](std::string_view t, int64_t* v) {
    const auto r = std::from_chars(t.data(), t.data() + t.size(), *v);
    return r.ec == std::errc() && r.ptr == t.data() + t.size() && !t.empty() && *v >= 0;
  };
  if (x == std::string_view::npos || !number(text.substr(0, x), &s.width) ||
      !number(text.substr(x + 1), &s.height)) {
    return invalid_argument("a size must be WxH (e.g. 512x512), got \"" + std::string(text) + "\"");
  }
  return s;
}

std::string_view option_group_name(OptionGroup group) {
  switch (group) {
    case OptionGroup::kEngine: return "Engine";
    case OptionGroup::kCuda: return "CUDA engine";
    case OptionGroup::kStreaming: return "Temporal streaming";
    case OptionGroup::kTiling: return "Spatial tiling";
    case OptionGroup::kMemory: return "Memory";
    case OptionGroup::kInput: return "Input";
    case OptionGroup::kOutput: return "Output";
  }
  return "?";
}

namespace {

using namespace std::string_view_literals;

constexpr std::array kBackends{"cpu"sv, "cuda"sv};
constexpr std::array kPrecisions{"fp32"sv, "tf32"sv, "fp16"sv, "bf16"sv, "fidelity"sv};
constexpr std::array kAutoOnOff{"auto"sv, "on"sv, "off"sv};
constexpr std::array kTilings{"off"sv, "blend"sv, "exact"sv};
constexpr std::array kLayouts{"reference"sv, "uniform"sv};
constexpr std::array kTemporalPads{"mirror"sv, "repeat-last"sv};
constexpr std::array kMultiples{"8"sv, "16"sv};
constexpr std::array kCodecs{"auto"sv,   "h264"sv,       "h265"sv, "ffv1"sv,
                             "prores"sv, "prores4444"sv, "png"sv,  "exr"sv};
constexpr std::array kPresets{"auto"sv,   "ultrafast"sv, "superfast"sv, "veryfast"sv,
                              "faster"sv, "fast"sv,      "medium"sv,    "slow"sv,
                              "slower"sv, "veryslow"sv,  "placebo"sv};
constexpr std::array kBitDepths{"auto"sv, "8"sv, "10"sv, "16"sv};

std::string exact_schedule(const RunOptions& o) {
  return o.tiling == "exact" ? "exact tiling has its own layer-by-layer schedule and chunking" : "";
}
std::string untiled(const RunOptions& o) {
  return o.tiling == "off" ? "the frame is not tiled (tiling off)" : "";
}
std::string blend_only(const RunOptions& o) {
  return o.tiling != "blend" ? "only blend tiling has overlapping tiles" : "";
}
std::string exact_only(const RunOptions& o) {
  return o.tiling != "exact" ? "only exact tiling uploads weights per layer" : "";
}
std::string fp16_only(const RunOptions& o) {
  return o.precision == "fp16" ? std::string() : "the precision is not fp16";
}
std::string bf16_only(const RunOptions& o) {
  return o.precision == "bf16" ? std::string() : "the precision is not bf16";
}

std::string sixteen_bit_autotuned(const RunOptions& o) {
  if (!o.autotune) return "autotune is off";
  return o.precision == "bf16" || o.precision == "fp16" || o.precision == "fidelity"
             ? std::string()
             : "the convolutions are not 16-bit (bf16, fp16 or fidelity)";
}

std::string offload_only(const RunOptions& o) {
  return o.offload_state ? "" : "the causal state is not offloaded (offload state is off)";
}
std::string async_rule(const RunOptions& o) {
  return o.tiling == "exact"
             ? "exact tiling moves every layer's windows through host memory layer by layer"
             : "";
}
std::string graphs_rule(const RunOptions& o) {
  if (o.offload_state)
    return "recorded chunks need the causal state on the device (offload state is on)";
  if (o.lean_convs)
    return "recorded chunks update the causal state in place, which lean convolutions replace";
  return "";
}
std::string prefetch_rule(const RunOptions& o) {
  if (o.tiling != "off") {
    return o.tiling +
           " tiling encodes every tile over the whole clip, so it needs all frames in "
           "memory before it starts";
  }
  if (o.chunk_latents == 0) return "a whole-clip chunk leaves nothing to overlap the reading with";
  return "";
}

std::string x26x_rule(const RunOptions& o) {
  if (o.codec == "h264" || o.codec == "h265" || o.codec == "auto") return "";
  return "only H.264 and H.265 take it (codec " + o.codec + ")";
}

std::string checkpoint_rule(const RunOptions& o) {
  if (o.tiling != "off") return "a tiled run reads the whole clip first";
  if (o.chunk_latents == 0) return "a whole-clip chunk has no chunk boundary to stop at";
  if (auto d = parse_devices(o.devices); d.is_ok() && d->size() >= 2) {
    return "a decode on several devices runs in one pass";
  }
  return "";
}

std::string auto_schedule_rule(const RunOptions& o) {
  if (o.tiling != "off") return "tiling picks its own tile within the budget";
  if (o.offload_state || o.lean_convs || o.lone_head || o.hires_chunk_frames > 0) {
    return "the memory options (offload, lone head, lean convolutions, chunked upsampling) were "
           "set by hand";
  }
  return "";
}

const std::vector<OptionSpec>& table() {
  static const std::vector<OptionSpec> t = [] {
    std::vector<OptionSpec> v;
    auto add = [&](OptionSpec s) { v.push_back(s); };
    // ---- engine ----
    add({.key = "backend",
         .flag = "--backend",
         .label = "Backend",
         .group = OptionGroup::kEngine,
         .kind = OptionKind::kChoice,
         .help = "Which compute backend runs the model: cpu (oneDNN) or cuda (cuDNN, cuBLAS).",
         .member = &RunOptions::backend,
         .choices = kBackends});
    add({.key = "device",
         .flag = "--device",
         .label = "Device",
         .group = OptionGroup::kEngine,
         .kind = OptionKind::kInt,
         .help = "CUDA device index.",
         .member = &RunOptions::device,
         .minimum = 0,
         .maximum = 64,
         .backends = kCudaBackend});
    add({.key = "devices",
         .flag = "--devices",
         .label = "Devices",
         .group = OptionGroup::kEngine,
         .kind = OptionKind::kText,
         .help = "Run on several GPUs of this host, e.g. 0,1, with one device's output, bit for "
                 "bit. Untiled, the decoder is cut into one share per device, and chunk k runs "
                 "on the second device while the first starts chunk k + 1 (a pipeline; "
                 "activations pass peer to peer); an untiled encode runs on the first device. "
                 "With --tiling blend, every device encodes and decodes whole tiles, each within "
                 "its own --budget-gb. Empty: one device (--device).",
         .member = &RunOptions::devices,
         .not_applicable = [](const RunOptions& o) -> std::string {
           return o.tiling == "exact" ? "exact tiles run on one device" : "";
         }});
    add({.key = "pipeline_cuts",
         .flag = "--pipeline-cuts",
         .label = "Pipeline cuts",
         .group = OptionGroup::kEngine,
         .kind = OptionKind::kText,
         .help = "With --devices: the first decoder unit of every device after the first (e.g. "
                 "14 for two devices; `seedvae bench` reports the units and each device's busy "
                 "time). Empty: a cut balanced by the cost model.",
         .member = &RunOptions::pipeline_cuts,
         .not_applicable = [](const RunOptions& o) -> std::string {
           auto d = parse_devices(o.devices);
           if (!d.is_ok() || d->size() < 2) return "needs --devices with two or more devices";
           return o.tiling != "off" ? "tiles run whole on each device" : "";
         }});
    add({.key = "threads",
         .flag = "--threads",
         .label = "CPU threads",
         .group = OptionGroup::kEngine,
         .kind = OptionKind::kInt,
         .help = "Threads for the oneDNN convolutions and the element-wise loops (0: automatic -- "
                 "every hardware thread, one fewer in the studio so the interface stays "
                 "responsive). More threads: faster, until memory bandwidth saturates.",
         .member = &RunOptions::threads,
         .minimum = 0,
         .maximum = 1024,
         .special_text = "auto",
         .backends = kCpuBackend});
    add({.key = "precision",
         .flag = "--precision",
         .label = "Precision",
         .group = OptionGroup::kEngine,
         .kind = OptionKind::kChoice,
         .help = "Precision of weights and activations: fp32 (TF32 off; the reference), tf32 "
                 "(fp32 storage, tensor-core products with 10-bit mantissas), fp16 or bf16 (half "
                 "the memory, tensor-core speed), fidelity (fp32 activations, convolutions on "
                 "fp16 tensor cores with fp32 accumulation: about a tenth of bf16's error, for "
                 "fp32's activation memory and the conversions' time). Norm statistics and "
                 "softmax stay fp32. The CPU backend computes in fp32 only.",
         .member = &RunOptions::precision,
         .choices = kPrecisions});
    add({.key = "fp8_numerics",
         .flag = "--fp8-numerics",
         .label = "FP8 numerics (emulated)",
         .group = OptionGroup::kEngine,
         .kind = OptionKind::kBool,
         .help =
             "Round every convolution's input (one scale per tensor) and weight (one per output "
             "channel) to FP8 e4m3 values, as FP8 convolutions would, and run them in the "
             "chosen precision: the output an FP8 engine would give, for judging its quality. "
             "The model's output layers, attention and norms stay as they are. Slow (the "
             "rounding runs on the host); on an H100 cuDNN's FP8 convolutions measured only "
             "1.2-1.3x bf16's speed (docs/gpu-notes.md).",
         .member = &RunOptions::fp8_numerics,
         .in_short_label = true});
    // ---- CUDA engine ----
    auto cuda_bool = [&](std::string_view key, std::string_view flag, std::string_view negative,
                         std::string_view label, std::string_view help, bool RunOptions::*m,
                         std::string (*rule)(const RunOptions&) = nullptr) {
      add({.key = key,
           .flag = flag,
           .negative_flag = negative,
           .label = label,
           .group = OptionGroup::kCuda,
           .kind = OptionKind::kBool,
           .help = help,
           .member = m,
           .backends = kCudaBackend,
           .not_applicable = rule});
    };
    cuda_bool("autotune", "--autotune", "--no-autotune", "cuDNN autotune",
              "Time every cuDNN convolution algorithm once per shape and keep the fastest (cached "
              "per GPU, driver and cuDNN version). Off: cuDNN's heuristic choice. Costs a few "
              "seconds on the first run of each shape.",
              &RunOptions::autotune);
    cuda_bool("graph_api", "--graph-api", "--no-graph-api", "cuDNN graph engines",
              "With autotune, 16-bit convolutions also time cuDNN's graph-API engines and run one "
              "where it is at least 15% faster than the legacy API's best algorithm (a Wan2.1 "
              "720p 96-channel convolution on an H200: 4.4 against 6.3 ms; Wan2.1 720p decode "
              "2.48 -> 2.35 s, encode 1.44 -> 1.18 s). The choice is kept with the autotune "
              "cache, so a shape runs the same kernel every time. Off by default: two bf16 "
              "golden tensors of the real encoder came out 4-7% over PyTorch's own error with it "
              "on an H200 (docs/gpu-notes.md).",
              &RunOptions::graph_api, sixteen_bit_autotuned);
    add({.key = "autotune_cache",
         .flag = "--autotune-cache",
         .label = "Autotune cache",
         .group = OptionGroup::kCuda,
         .kind = OptionKind::kText,
         .help = "File for persisted cuDNN autotune results (\"auto\": the per-user cache folder, "
                 "empty: none).",
         .member = &RunOptions::autotune_cache,
         .backends = kCudaBackend});
    cuda_bool("channels_last", "--channels-last", "--no-channels-last", "Channels-last (NDHWC)",
              "Keep activations in NDHWC so convolutions run on tensor cores without layout "
              "changes. Off: NCDHW (the PyTorch layout; slower convolutions).",
              &RunOptions::channels_last);
    cuda_bool("fused_gn_silu", "--fused-gn", "--no-fused-gn", "Fused GroupNorm + SiLU",
              "One pass for GroupNorm and SiLU instead of two: less memory traffic and one "
              "activation-sized buffer fewer.",
              &RunOptions::fused_gn_silu);
    cuda_bool("fused_attention", "--fused-attention", "--no-fused-attention", "Fused attention",
              "Flash-style mid-block attention with O(tokens) memory. Off: materialised scores "
              "through cuBLAS, tokens^2 memory per frame (gigabytes at 1080p).",
              &RunOptions::fused_attention);
    cuda_bool("caching_allocator", "--caching-allocator", "--no-caching-allocator",
              "Caching allocator",
              "Reuse freed device blocks instead of cudaMalloc/cudaFree per tensor: much faster, "
              "but the driver sees the cached bytes as used.",
              &RunOptions::caching_allocator);
    cuda_bool("buffer_reuse", "--buffer-reuse", "--no-buffer-reuse",
              "Buffer reuse (in-place causal padding)",
              "Outputs that feed a causal convolution get spare frames in front, so the causal "
              "context is written in place instead of copying the tensor (channels-last only).",
              &RunOptions::buffer_reuse);
    cuda_bool("fuse_bias", "--fused-bias", "--no-fused-bias", "Fused bias",
              "A convolution's bias is added by its consumer (GroupNorm or the residual add) "
              "instead of in a pass of its own.",
              &RunOptions::fuse_bias);
    cuda_bool("fp16_accumulation", "--fp16-accumulation", "", "fp16 accumulation",
              "fp16 precision: 3-D convolutions accumulate in fp16 (cuDNN's graph engines). On "
              "GeForce cards (RTX 40xx/50xx) fp16-accumulate tensor throughput is twice the "
              "fp32-accumulate one, so convolutions may run up to 2x faster; datacentre cards "
              "(H100) run both at one rate. Error per convolution about 4x fp16's, below bf16's "
              "(docs/gpu-notes.md).",
              &RunOptions::fp16_accumulation, fp16_only);
    cuda_bool("fp8_convs", "--fp8-convs", "", "FP8 convolutions",
              "bf16 precision, cards with FP8 tensor cores (RTX 40xx/50xx, H100): convolutions "
              "run on FP8 (e4m3) operands, weights scaled per output channel, activations per "
              "tensor, fp32 accumulation (cuDNN's graph engines). Measured (H200, real "
              "configuration): 1080p decode 111 against bf16's 103 ms/frame and 1.6 GiB more; "
              "28 dB against fp32 on synthetic weights, 39-41 dB on the demo model (bf16: 48 "
              "dB). Off by default (docs/gpu-notes.md).",
              &RunOptions::fp8_convs, bf16_only);
    cuda_bool("offload_state", "--offload-state", "", "Offload causal state",
              "Keep the causal state (the frames carried between temporal chunks) in pinned host "
              "memory, prefetched back while the GPU computes: less device memory, same output. "
              "A 1080p bf16 encode then peaks at 9 GiB; with lone head and lean convolutions a "
              "1080p decode at 11.7 GiB (docs/benchmarks.md).",
              &RunOptions::offload_state);
    add({.key = "offload_window_mib",
         .flag = "--offload-window-mib",
         .label = "Offload window (MiB)",
         .group = OptionGroup::kCuda,
         .kind = OptionKind::kInt,
         .help = "With offload state: how much offloaded state may be back on the device ahead of "
                 "use. Larger prefetches earlier, smaller saves more.",
         .member = &RunOptions::offload_window_mib,
         .minimum = 0,
         .maximum = 1 << 20,
         .backends = kCudaBackend,
         .not_applicable = offload_only});
    cuda_bool("cuda_graphs", "--cuda-graphs", "", "CUDA graphs",
              "Record each chunk's GPU work once per chunk shape and replay it for later chunks "
              "(one launch instead of ~250). Needs the state on the device; measured without gain "
              "on an H100 (docs/gpu-notes.md), so off by default.",
              &RunOptions::cuda_graphs, graphs_rule);
    add({.key = "cudnn_workspace_mib",
         .flag = "--cudnn-workspace-mib",
         .label = "cuDNN workspace (MiB)",
         .group = OptionGroup::kCuda,
         .kind = OptionKind::kInt,
         .help = "Largest scratch buffer one cuDNN convolution may use. More lets cuDNN pick "
                 "faster algorithms; it adds to the peak memory.",
         .member = &RunOptions::workspace_mib,
         .minimum = 0,
         .maximum = 1 << 20,
         .backends = kCudaBackend});
    // ---- temporal streaming ----
    add({.key = "chunk_latents",
         .flag = "--chunk",
         .label = "Temporal chunk (latents)",
         .group = OptionGroup::kStreaming,
         .kind = OptionKind::kInt,
         .help = "Latent frames per temporal chunk (1 latent = 4 video frames; the first chunk "
                 "has one more). Every chunk size gives the same result; smaller chunks hold "
                 "less memory and show frames sooner. 0 runs the whole clip at once.",
         .member = &RunOptions::chunk_latents,
         .minimum = 0,
         .maximum = 1 << 20,
         .special_text = "whole clip",
         .in_short_label = true});
    add({.key = "hires_chunk_frames",
         .flag = "--hires-chunk",
         .label = "High-res pieces (frames)",
         .group = OptionGroup::kStreaming,
         .kind = OptionKind::kInt,
         .help = "Chunked upsampling: run the full-frame-rate high-resolution stages (decoder "
                 "after its last temporal upsampling, encoder before its first temporal "
                 "downsampling; Wan: the decoder's only) this many frames at a time, carrying "
                 "the causal state between pieces. Same output; less memory (a 1080p bf16 "
                 "encode on an H100: 15.0 -> 11.7 GiB with 1 frame; a Wan2.1 720p decode on an "
                 "H200: 12.2 -> 8.1 GiB device level) for a few percent more time. 0 = off.",
         .member = &RunOptions::hires_chunk_frames,
         .minimum = 0,
         .maximum = 1 << 20,
         .special_text = "off",
         .not_applicable = exact_schedule,
         .in_short_label = true});
    add({.key = "lone_head",
         .flag = "--lone-head",
         .label = "Lone head chunk",
         .group = OptionGroup::kStreaming,
         .kind = OptionKind::kBool,
         .help = "The first temporal chunk is frame 0 (latent 0) alone, then chunks of the size "
                 "above, instead of a first chunk with one latent more: no chunk is larger than "
                 "the others, which lowers the decode's peak. Same output.",
         .member = &RunOptions::lone_head,
         .not_applicable = exact_schedule,
         .in_short_label = true});
    add({.key = "lean_convs",
         .flag = "--lean-convs",
         .label = "Lean convolutions",
         .group = OptionGroup::kStreaming,
         .kind = OptionKind::kBool,
         .help = "The decoder's causal convolutions never build their context-extended input "
                 "(two convolution calls and a few frame copies each). Same output; less memory, "
                 "a few percent more time. With the lone head and the CUDA state offload a 1080p "
                 "decode peaks at about 11.7 GiB.",
         .member = &RunOptions::lean_convs,
         .not_applicable = exact_schedule,
         .in_short_label = true});
    add({.key = "async_tiles",
         .flag = "--async-tiles",
         .label = "Async tiles",
         .group = OptionGroup::kStreaming,
         .kind = OptionKind::kChoice,
         .help = "Queue the next chunk or tile on the device before finishing the previous one "
                 "(its download, blending, output), so copies and host work overlap the compute; "
                 "the same output bit for bit. auto = on except with exact tiling; no change in "
                 "time on the CPU backend (its copies are synchronous).",
         .member = &RunOptions::async_tiles,
         .choices = kAutoOnOff,
         .not_applicable = async_rule});
    // ---- spatial tiling ----
    add({.key = "tiling",
         .flag = "--tiling",
         .label = "Tiling",
         .group = OptionGroup::kTiling,
         .kind = OptionKind::kChoice,
         .help = "Spatial tiling: off (the whole frame at once: exact, fastest, the most memory), "
                 "blend (the ComfyUI port's cosine-blended tiles: bounded memory, seams possible) "
                 "or exact (tiled computation, output equal to untiled; slower, host memory "
                 "holds whole-frame layer inputs).",
         .member = &RunOptions::tiling,
         .choices = kTilings,
         .in_short_label = true});
    add({.key = "tile",
         .flag = "--tile",
         .label = "Tile (px)",
         .group = OptionGroup::kTiling,
         .kind = OptionKind::kSize,
         .help = "Tile size WxH in output pixels. 0x0 (auto): the largest tile within the memory "
                 "budget, or 512x512 without one. Larger: fewer seams and less overhead, more "
                 "memory.",
         .member = &RunOptions::tile,
         .minimum = 0,
         .maximum = 16384,
         .special_text = "auto",
         .not_applicable = untiled,
         .in_short_label = true});
    add({.key = "overlap",
         .flag = "--overlap",
         .label = "Overlap (px)",
         .group = OptionGroup::kTiling,
         .kind = OptionKind::kSize,
         .help = "Overlap WxH between blended tiles in pixels. More overlap: softer seams, more "
                 "repeated work. Exact tiling needs none.",
         .member = &RunOptions::overlap,
         .minimum = 0,
         .maximum = 4096,
         .not_applicable = blend_only});
    add({.key = "tile_layout",
         .flag = "--tile-layout",
         .label = "Tile layout",
         .group = OptionGroup::kTiling,
         .kind = OptionKind::kChoice,
         .help = "Blend mode's grid. reference: the upstream port's grid, bit-compatible with its "
                 "output (border tiles are smaller). uniform: every tile has the same shape (the "
                 "last one shifted inward), so GPU plans are reused; the weights form an exact "
                 "partition of unity.",
         .member = &RunOptions::tile_layout,
         .choices = kLayouts,
         .not_applicable = blend_only});
    add({.key = "exact_keep_weights",
         .flag = "--exact-keep-weights",
         .label = "Keep all weights resident",
         .group = OptionGroup::kTiling,
         .kind = OptionKind::kBool,
         .help = "Exact tiling: keep every layer's weights on the device for the whole run "
                 "(faster: no re-uploads) instead of uploading each layer's weights while it "
                 "runs (less memory).",
         .member = &RunOptions::exact_keep_weights,
         .not_applicable = exact_only});
    // ---- memory ----
    add({.key = "budget_gb",
         .flag = "--budget-gb",
         .label = "Memory budget (GiB)",
         .group = OptionGroup::kMemory,
         .kind = OptionKind::kReal,
         .help = "The most device memory the run may take. On CUDA this bounds everything the "
                 "engine takes from the card (context, library handles, weights, activations, "
                 "causal state, workspaces and the allocator's cache), and the allocator "
                 "enforces it; 0: the card's free memory minus 0.5 GiB. With tiling and no tile "
                 "size, the planner picks the largest tile that fits; the studio checks its "
                 "prediction against the smaller of this budget and the device's free memory.",
         .member = &RunOptions::budget_gb,
         .minimum = 0,
         .maximum = 1 << 20,
         .special_text = "free memory",
         .made_into = kCudaBackend});
    add({.key = "auto_schedule",
         .flag = "--auto-schedule",
         .negative_flag = "--no-auto-schedule",
         .label = "Fit the schedule to the budget",
         .group = OptionGroup::kMemory,
         .kind = OptionKind::kBool,
         .help = "Before an untiled CUDA run, the planner predicts its peak; when it exceeds the "
                 "budget, the run offloads its causal state with a lone head and lean "
                 "convolutions (the same output, slower), and when that does not fit either, it "
                 "runs exact tiling with the largest tile that fits (the same output, much "
                 "slower). A Wan run first decodes its full-frame-rate levels one frame at a "
                 "time (chunked upsampling), then also offloads its causal state (the same "
                 "output); what still does not fit runs as set, with the prediction in the "
                 "report. The run's report says what was chosen and why. Off: run as set.",
         .member = &RunOptions::auto_schedule,
         .backends = kCudaBackend,
         .not_applicable = auto_schedule_rule});
    // ---- input ----
    add({.key = "prefetch",
         .flag = "--prefetch",
         .label = "Frame prefetch",
         .group = OptionGroup::kInput,
         .kind = OptionKind::kChoice,
         .help = "Read and convert the input's frames on their own thread, a couple of temporal "
                 "chunks ahead of the encoder, so the first chunk is encoded while later frames "
                 "are still being decoded; the same output bit for bit. auto: on for a video file "
                 "or image sequence encoded untiled in temporal chunks; on: required (refused "
                 "where it does not apply); off: read the whole clip first.",
         .member = &RunOptions::prefetch,
         .choices = kAutoOnOff,
         .not_applicable = prefetch_rule});
    add({.key = "temporal_pad",
         .flag = "--temporal-pad",
         .label = "Temporal padding",
         .group = OptionGroup::kInput,
         .kind = OptionKind::kChoice,
         .help = "How the clip reaches 4n+1 frames (removed after decoding): mirror (the ComfyUI "
                 "port) or repeat-last (the official SeedVR2 code).",
         .member = &RunOptions::temporal_pad,
         .choices = kTemporalPads});
    add({.key = "spatial_multiple",
         .flag = "--multiple",
         .label = "Spatial multiple",
         .group = OptionGroup::kInput,
         .kind = OptionKind::kInt,
         .help = "Frames are padded right/bottom to a multiple of this many pixels (8 suffices "
                 "for the VAE; 16 matches the SeedVR2 upscaler).",
         .member = &RunOptions::spatial_multiple,
         .choices = kMultiples,
         .minimum = 8,
         .maximum = 16});
    // ---- output ----
    add({.key = "codec",
         .flag = "--codec",
         .label = "Codec",
         .group = OptionGroup::kOutput,
         .kind = OptionKind::kChoice,
         .help = "How a video output is coded (auto: by its extension -- .mp4 H.264, .mov ProRes "
                 "422 HQ, .mkv FFV1 (lossless), .avi Motion-JPEG): h264, h265, ffv1 (.mkv), "
                 "prores or prores4444 (.mov, .mkv); for an image-sequence output (a directory) "
                 "png or exr (32-bit float). A round trip's output keeps the input's timestamps, "
                 "colour description and audio.",
         .member = &RunOptions::codec,
         .choices = kCodecs});
    add({.key = "crf",
         .flag = "--crf",
         .label = "CRF",
         .group = OptionGroup::kOutput,
         .kind = OptionKind::kInt,
         .help = "H.264/H.265 constant rate factor, 0 (best) to 51; auto: 16 (near transparent). "
                 "Also the quality of .avi's Motion-JPEG.",
         .member = &RunOptions::crf,
         .minimum = -1,
         .maximum = 51,
         .special_text = "auto",
         .not_applicable = x26x_rule});
    add({.key = "preset",
         .flag = "--preset",
         .label = "Encoder preset",
         .group = OptionGroup::kOutput,
         .kind = OptionKind::kChoice,
         .help = "x264/x265 speed preset: slower presets make smaller files at the same quality "
                 "(auto: medium).",
         .member = &RunOptions::preset,
         .choices = kPresets,
         .not_applicable = x26x_rule});
    add({.key = "lossless",
         .flag = "--lossless",
         .label = "Lossless H.264/H.265",
         .group = OptionGroup::kOutput,
         .kind = OptionKind::kBool,
         .help = "Code H.264 or H.265 without loss (8-bit H.264 and H.265 code the RGB samples "
                 "exactly; 10-bit H.264 codes 4:4:4 YUV without loss). Files are several times "
                 "larger. FFV1 is always lossless.",
         .member = &RunOptions::lossless,
         .not_applicable = x26x_rule});
    add({.key = "bit_depth",
         .flag = "--bit-depth",
         .label = "Output bit depth",
         .group = OptionGroup::kOutput,
         .kind = OptionKind::kChoice,
         .help = "Bits per sample of the output: 8, 10 (H.264, H.265, FFV1, ProRes) or 16 (FFV1, "
                 "PNG). auto: the input's depth where the codec stores it (a 10-bit input gives a "
                 "10-bit output), else 8.",
         .member = &RunOptions::bit_depth,
         .choices = kBitDepths});
    add({.key = "checkpoint_chunks",
         .flag = "--checkpoint-every",
         .label = "Checkpoint every (chunks)",
         .group = OptionGroup::kOutput,
         .kind = OptionKind::kInt,
         .help = "A round trip or a decode into a video file or image directory is resumable "
                 "(untiled, on one device): every N "
                 "temporal chunks it closes a segment of the output (a video's starts with a "
                 "keyframe) and saves a checkpoint (the causal state, the metrics so far) in "
                 "<output>.seedvae-resume/. A stopped job run again continues from its last "
                 "checkpoint and gives the same file as an uninterrupted run. Smaller N loses "
                 "less work on a stop and adds keyframes. A checkpoint writes the causal state "
                 "(the demo model's at 1080p: 6.2 GB in bf16), so where that is more than 32 MiB "
                 "per chunk the interval grows to keep it so (1080p, demo model: every 186 "
                 "chunks). 0: no checkpoints, one pass.",
         .member = &RunOptions::checkpoint_chunks,
         .minimum = 0,
         .maximum = 1 << 20,
         .special_text = "off",
         .not_applicable = checkpoint_rule});
    return v;
  }();
  return t;
}

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::span<const OptionSpec> run_option_table() {
  return table();
}

const OptionSpec* find_option(std::string_view key) {
  for (const OptionSpec& s : table()) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

OptionValue option_value(const RunOptions& o, const OptionSpec& spec) {
  return std::visit([&](auto member) -> OptionValue { return o.*member; }, spec.member);
}

std::string format_option_value(const OptionValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          return v ? "on" : "off";
        } else if constexpr (std::is_same_v<V, int>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<V, double>) {
          return number_text(v);
        } else if constexpr (std::is_same_v<V, PixelSize>) {
          return v.to_string();
        } else {
          return v;
        }
      },
      value);
}

Status set_option(RunOptions& o, const OptionSpec& spec, const OptionValue& value) {
  const std::string name(spec.key);
  auto out_of_range = [&](const std::string& v) {
    return invalid_argument(name + ": " + v + " is outside [" + number_text(spec.minimum) + ", " +
                            number_text(spec.maximum) + "]");
  };
  auto in_choices = [&](std::string_view v) {
    return std::find(spec.choices.begin(), spec.choices.end(), v) != spec.choices.end();
  };
  auto choice_list = [&] {
    std::string s;
    for (std::string_view c : spec.choices) s += (s.empty() ? "" : ", ") + std::string(c);
    return s;
  };
  return std::visit(
      [&](auto member) -> Status {
        using M = std::decay_t<decltype(o.*member)>;
        const M* v = std::get_if<M>(&value);
        if (v == nullptr) return invalid_argument(name + ": wrong kind of value");
        if constexpr (std::is_same_v<M, int>) {
          if (!spec.choices.empty() && !in_choices(std::to_string(*v))) {
            return invalid_argument(name + ": " + std::to_string(*v) + " is not one of " +
                                    choice_list());
          }
          if (*v < spec.minimum || *v > spec.maximum) return out_of_range(std::to_string(*v));
        } else if constexpr (std::is_same_v<M, double>) {
          if (!std::isfinite(*v)) {
            return invalid_argument(name + ": " + number_text(*v) + " is not a finite number");
          }
          if (!(*v >= spec.minimum && *v <= spec.maximum)) return out_of_range(number_text(*v));
        } else if constexpr (std::is_same_v<M, PixelSize>) {
          for (int64_t c : {v->width, v->height}) {
            if (static_cast<double>(c) < spec.minimum || static_cast<double>(c) > spec.maximum) {
              return out_of_range(v->to_string());
            }
          }
        } else if constexpr (std::is_same_v<M, std::string>) {
          if (spec.kind == OptionKind::kChoice && !in_choices(*v)) {
            return invalid_argument(name + ": \"" + *v + "\" is not one of " + choice_list());
          }
        }
        o.*member = *v;
        return Status::ok();
      },
      spec.member);
}

bool option_is_default(const RunOptions& o, const OptionSpec& spec) {
  static const RunOptions kDefaults;
  return option_value(o, spec) == option_value(kDefaults, spec);
}

std::string option_not_applicable(const RunOptions& o, const OptionSpec& spec) {
  const uint8_t mine = o.backend == "cuda" ? kCudaBackend : kCpuBackend;
  if ((spec.backends & mine) == 0) {
    return spec.backends == kCudaBackend ? "only the CUDA backend has it"
                                         : "only the CPU backend has it";
  }
  return spec.not_applicable ? spec.not_applicable(o) : std::string();
}

int64_t budget_bytes(const RunOptions& o) {
  return o.budget_gb > 0 ? static_cast<int64_t>(o.budget_gb * static_cast<double>(int64_t{1} << 30))
                         : 0;
}

namespace {

// Tile and overlap sizes the table's ranges alone do not refuse.
Status validate_tile_sizes(const RunOptions& o) {
  const PixelSize& t = o.tile;
  if ((t.width == 0) != (t.height == 0)) {
    return invalid_argument("--tile " + t.to_string() +
                            ": give both sides (at least 8x8), or 0x0 for the automatic tile");
  }
  if (t.width != 0 && (t.width < 8 || t.height < 8)) {
    return invalid_argument("--tile " + t.to_string() +
                            " is smaller than one latent pixel (8x8); give at least 8x8, or 0x0 "
                            "for the automatic tile");
  }
  if (o.tiling == "blend" && t.width != 0 &&
      (o.overlap.width >= t.width || o.overlap.height >= t.height)) {
    return invalid_argument("--overlap " + o.overlap.to_string() + " must be smaller than --tile " +
                            t.to_string() +
                            " on both sides: blended tiles overlap by less than their size");
  }
  return Status::ok();
}

}  // namespace

namespace {

Result<std::vector<int>> parse_index_list(std::string_view text, std::string_view flag, int most) {
  std::vector<int> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(at, end - at);
    int v = -1;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v < 0 || v > most) {
      return invalid_argument(std::string(flag) + " " + std::string(text) +
                              ": give indices from 0 to " + std::to_string(most) +
                              " separated by commas");
    }
    out.push_back(v);
    at = end + 1;
  }
  return out;
}

}  // namespace

Result<std::vector<int>> parse_devices(std::string_view text) {
  SEEDVAE_ASSIGN_OR_RETURN(std::vector<int> d, parse_index_list(text, "--devices", 64));
  for (size_t i = 0; i < d.size(); ++i) {
    if (std::find(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(i), d[i]) !=
        d.begin() + static_cast<std::ptrdiff_t>(i)) {
      return invalid_argument("--devices " + std::string(text) + ": device " +
                              std::to_string(d[i]) + " is listed twice");
    }
  }
  return d;
}

Result<std::vector<int>> parse_pipeline_cuts(std::string_view text) {
  return parse_index_list(text, "--pipeline-cuts", 1 << 16);
}

Status validate(const RunOptions& o) {
  for (const OptionSpec& s : table()) {
    RunOptions copy;
    SEEDVAE_TRY(set_option(copy, s, option_value(o, s)));
  }
  SEEDVAE_TRY(validate_tile_sizes(o));
  SEEDVAE_ASSIGN_OR_RETURN(const std::vector<int> devices, parse_devices(o.devices));
  SEEDVAE_ASSIGN_OR_RETURN(const std::vector<int> cuts, parse_pipeline_cuts(o.pipeline_cuts));
  if (devices.size() >= 2 && o.tiling == "exact") {
    return invalid_argument("--devices " + o.devices +
                            " with --tiling exact: exact tiles run on one device; use --tiling "
                            "blend or off, or one device");
  }
  if (!cuts.empty() && cuts.size() + 1 != std::max<size_t>(devices.size(), 1)) {
    return invalid_argument("--pipeline-cuts " + o.pipeline_cuts +
                            ": give one cut fewer than "
                            "the devices of --devices");
  }
  if (o.lean_convs && o.cuda_graphs) {
    return invalid_argument(
        "--lean-convs and --cuda-graphs do not combine: recorded chunks update "
        "the causal state in place, which the lean convolutions replace; use "
        "one of them");
  }
  if (o.tiling == "exact") {
    // --hires-chunk: a Wan decode's halo tiles take it, SeedVR2's exact tiles refuse it when the
    // job runs (core/schedule/tiled.cpp)
    if (o.lone_head || o.lean_convs) {
      return invalid_argument(std::string(o.lean_convs ? "--lean-convs" : "--lone-head") +
                              " does not apply to --tiling exact, which has its own "
                              "layer-by-layer schedule and chunking; drop one");
    }
    if (o.async_tiles == "on") {
      return invalid_argument(
          "--async-tiles on does not apply to --tiling exact, which moves "
          "every layer's windows through host memory; use auto or off");
    }
  }
  return Status::ok();
}

std::string to_json(const RunOptions& o) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const OptionSpec& s : table()) {
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, PixelSize>) {
            j[std::string(s.key)] = v.to_string();
          } else {
            j[std::string(s.key)] = v;
          }
        },
        option_value(o, s));
  }
  return j.dump();
}

Result<OptionValue> parse_option_value(const OptionSpec& spec, std::string_view text) {
  const std::string t(text);
  OptionValue v;
  switch (spec.kind) {
    case OptionKind::kBool:
      if (t == "true" || t == "on" || t == "1") {
        v = true;
      } else if (t == "false" || t == "off" || t == "0") {
        v = false;
      } else {
        return invalid_argument(std::string(spec.key) + ": not on or off: " + t);
      }
      break;
    case OptionKind::kInt:
    case OptionKind::kReal: {
      const char* end = t.data() + t.size();
      std::from_chars_result r{};
      if (spec.kind == OptionKind::kInt) {
        int i = 0;
        r = std::from_chars(t.data(), end, i);
        v = i;
      } else {
        double d = 0;
        r = std::from_chars(t.data(), end, d);
        v = d;
      }
      const bool whole = r.ec == std::errc() && r.ptr == end;
      if (!whole || t.empty()) {
        return invalid_argument(std::string(spec.key) + ": not a " +
                                (spec.kind == OptionKind::kInt ? "whole number" : "number") + ": " +
                                t);
      }
      break;
    }
    case OptionKind::kChoice:
    case OptionKind::kText: v = t; break;
    case OptionKind::kSize: {
      auto p = PixelSize::parse(t);
      if (!p.is_ok()) return p.status();
      v = *p;
      break;
    }
  }
  RunOptions scratch;
  SEEDVAE_TRY(set_option(scratch, spec, v));
  return v;
}

namespace {

// A preset value as the option's kind, or nullopt (with the reason) when it has another type.
std::optional<OptionValue> value_from_json(const OptionSpec& s, const nlohmann::json& v,
                                           std::string* why) {
  switch (s.kind) {
    case OptionKind::kBool:
      if (v.is_boolean()) return OptionValue(v.get<bool>());
      break;
    case OptionKind::kInt:
      if (v.is_number()) {
        const double d = v.get<double>();
        const double c = std::clamp(std::round(d), s.minimum, s.maximum);
        if (c != d) *why = "out of range, clamped to " + number_text(c);
        return OptionValue(static_cast<int>(c));
      }
      break;
    case OptionKind::kReal:
      if (v.is_number()) {
        const double d = v.get<double>();
        const double c = std::clamp(d, s.minimum, s.maximum);
        if (c != d) *why = "out of range, clamped to " + number_text(c);
        return OptionValue(c);
      }
      break;
    case OptionKind::kChoice:
    case OptionKind::kText:
      if (v.is_string()) return OptionValue(v.get<std::string>());
      break;
    case OptionKind::kSize:
      if (v.is_string()) {
        auto p = PixelSize::parse(v.get<std::string>());
        if (p.is_ok()) return OptionValue(*p);
        *why = p.status().message();
        return std::nullopt;
      }
      break;
  }
  *why = "has the wrong type";
  return std::nullopt;
}

// Older presets: CUDA switches under "toggles", tile and overlap as two numbers, the budget in
// MiB, frame prefetch and async tiles as booleans.
void upgrade_legacy(nlohmann::json& j) {
  if (j.contains("toggles") && j["toggles"].is_object()) {
    for (auto& [k, v] : j["toggles"].items()) {
      j[k == "workspace_mib" ? std::string("cudnn_workspace_mib") : k] = v;
    }
    j.erase("toggles");
  }
  auto size = [&](const char* w, const char* h, const char* key) {
    if (j.contains(w) && j.contains(h) && j[w].is_number() && j[h].is_number()) {
      j[key] = std::to_string(j[w].get<int64_t>()) + "x" + std::to_string(j[h].get<int64_t>());
    }
    j.erase(w);
    j.erase(h);
  };
  size("tile_width", "tile_height", "tile");
  size("overlap_width", "overlap_height", "overlap");
  if (j.contains("budget_mib") && j["budget_mib"].is_number()) {
    j["budget_gb"] = j["budget_mib"].get<double>() / 1024.0;
    j.erase("budget_mib");
  }
  for (const char* k : {"prefetch", "async_tiles"}) {
    if (j.contains(k) && j[k].is_boolean()) j[k] = j[k].get<bool>() ? "auto" : "off";
  }
}

}  // namespace

RunOptions run_options_from_json(std::string_view text, std::vector<std::string>* warnings) {
  RunOptions o;
  auto warn = [&](std::string w) {
    if (warnings) warnings->push_back(std::move(w));
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) {
    warn("not a JSON object: every option keeps its default");
    return o;
  }
  upgrade_legacy(j);
  for (auto& [k, v] : j.items()) {
    const OptionSpec* s = find_option(k);
    if (s == nullptr) {
      warn("unknown key " + k + " ignored");
      continue;
    }
    std::string why;
    std::optional<OptionValue> value = value_from_json(*s, v, &why);
    if (!value) {
      warn(k + " " + why + ": using " + format_option_value(option_value(o, *s)));
      continue;
    }
    if (!why.empty()) warn(k + " " + why);
    if (Status st = set_option(o, *s, *value); !st.is_ok()) {
      warn(st.message() + ": using " + format_option_value(option_value(o, *s)));
    }
  }
  return o;
}

std::string describe(const RunOptions& o) {
  std::string s =
      o.backend + " " + o.precision + ", chunk " +
      (o.chunk_latents == 0 ? std::string("whole clip") : std::to_string(o.chunk_latents)) + ", ";
  if (o.tiling == "off") {
    s += "untiled";
  } else {
    s += o.tiling + " tiles " + (o.tile == PixelSize{} ? std::string("auto") : o.tile.to_string());
    if (o.tiling == "blend") s += " overlap " + o.overlap.to_string();
  }
  std::string rest;
  for (const OptionSpec& spec : table()) {
    if (spec.key == "backend" || spec.key == "precision" || spec.key == "chunk_latents" ||
        spec.key == "tiling" || spec.key == "tile" || spec.key == "overlap") {
      continue;
    }
    if (option_is_default(o, spec) || !option_not_applicable(o, spec).empty()) continue;
    const OptionValue v = option_value(o, spec);
    rest += rest.empty() ? "; " : ", ";
    if (const bool* b = std::get_if<bool>(&v)) {
      rest += (*b ? "" : "no ") + std::string(spec.key);
    } else {
      rest += std::string(spec.key) + " " + format_option_value(v);
    }
  }
  return s + rest;
}

std::string short_label(const RunOptions& o) {
  std::string s =
      o.tiling == "off"
          ? std::string("untiled")
          : o.tiling + " " + (o.tile == PixelSize{} ? std::string("auto") : o.tile.to_string());
  s += o.chunk_latents == 0 ? ", whole clip" : ", chunk " + std::to_string(o.chunk_latents);
  if (o.hires_chunk_frames > 0 && o.tiling != "exact") {
    s += ", hi-res " + std::to_string(o.hires_chunk_frames) + " f";
  }
  if (o.lone_head && o.tiling != "exact") s += ", lone head";
  if (o.lean_convs && o.tiling != "exact") s += ", lean";
  if (o.backend != "cpu") s = o.backend + " " + o.precision + ", " + s;
  return s;
}

std::string backend_key(const RunOptions& o) {
  std::string k = o.backend + ":" + o.precision;
  for (const OptionSpec& s : table()) {
    const uint8_t mine = o.backend == "cuda" ? kCudaBackend : kCpuBackend;
    const bool engine = s.group == OptionGroup::kEngine || s.group == OptionGroup::kCuda;
    if (!engine && (s.made_into & mine) == 0) continue;
    if ((s.backends & mine) == 0 || s.key == "backend" || s.key == "precision") continue;
    k += ';';  // appended piece by piece: GCC 12 warns (-Wrestrict) on ";" + std::string here
    k += s.key;
    k += '=';
    k += format_option_value(option_value(o, s));
  }
  return k;
}

TilingMode tiling_mode(const RunOptions& o) {
  auto m = parse_tiling_mode(o.tiling);
  return m.is_ok() ? *m : TilingMode::kOff;
}

StreamOptions stream_options(const RunOptions& o) {
  StreamOptions so;
  so.chunk_latents = o.chunk_latents;
  so.async_tiles = o.async_tiles == "on" || (o.async_tiles == "auto" && o.tiling != "exact");
  so.lone_head = o.lone_head;
  so.hires_chunk_frames = o.hires_chunk_frames;
  so.lean_convs = o.lean_convs;
  return so;
}

int64_t precision_bytes(const RunOptions& o) {
  return o.precision == "fp16" || o.precision == "bf16" ? 2 : 4;
}

}  // namespace seedvae
