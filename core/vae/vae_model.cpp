#include "core/vae/vae_model.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>
#include <vector>

namespace seedvae {

namespace {
// The last convolution of the encoder or the decoder, whose result is the model's output
// (Conv3dParams::model_output).
bool is_output_conv(const std::string& prefix) {
  return prefix == "encoder.conv_out" || prefix == "decoder.conv_out";
}
}  // namespace

// ---- the recorded chunks (CUDA graphs) ---------------------------------------------------------

class VaeModel::GraphCache {
 public:
  struct Record {
    int64_t id = -1;
    Tensor in, out;  // the recording's input and output (fixed addresses)
  };
  explicit GraphCache(Backend& backend) : backend_(&backend) {}
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() { clear(); }

  void clear() {
    for (auto& [key, rec] : graphs) {
      rec.in = {};
      rec.out = {};
      backend_->release_graph(rec.id);
    }
    graphs.clear();
  }

  std::map<std::string, Record> graphs;  // shape | options | state layout | addresses -> recording
  std::set<std::string> stable;          // shape | options | state layout keeping its state
  GraphStats stats;

 private:
  Backend* backend_;
};

// ---- one chunk call ----------------------------------------------------------------------------

// Everything one encode_chunk / decode_chunk call needs besides the model's weights: the stream's
// causal state, the call's options, and the bookkeeping of the call itself (the stage clock for
// telemetry, whether a piece stage runs, whether a graph is being recorded). The network's order
// of operations (docs/model.md §2.2-2.3) is written here once; which ops run depends only on the
// backend the model was created on.
class VaeModel::Pass {
 public:
  Pass(VaeModel& model, CausalState& state, const ChunkOptions& options, bool capturing)
      : m_(model),
        b_(*model.backend_),
        state_(state),
        opt_(options),
        capturing_(capturing),
        in_place_state_(model.graphs_on()) {
    ++m_.passes_;
  }

  Result<Tensor> encode(const Tensor& x);
  Result<Tensor> decode(const Tensor& z);

 private:
  // How causal_conv treats its causal memory. kKeepElsewhere: pads as usual but stores nothing
  // (the caller keeps the memory in another form, upsample()); kExtended: x already is the
  // extended input (memory frames first), so it neither pads nor stores.
  enum class Memory { kStore, kKeepElsewhere, kExtended };

  // ---- the network ----
  Result<Tensor> encoder_head(Tensor x);
  Result<Tensor> encoder_level(Tensor h, int level);
  Result<Tensor> decoder_tail(Tensor h);
  Result<Tensor> up_block(Tensor h, int level);
  Result<Tensor> mid_block(const Tensor& x, const std::string& prefix);
  Result<Tensor> resnet(Tensor x, const std::string& prefix);

  // ---- layers ----
  Result<Tensor> causal_conv(const Tensor& x, const std::string& prefix, int stride_t,
                             int stride_hw, bool downsample_pad,
                             Memory memory_mode = Memory::kStore);
  // GroupNorm+SiLU `norm`, then the causal convolution `conv` (lean where it applies).
  Result<Tensor> norm_conv(Tensor x, const std::string& norm, const std::string& conv);
  Result<Tensor> norm_silu(const Tensor& x, const std::string& prefix, int context_frames = 2);
  // Whether the causal convolution `conv` runs lean on a chunk of `frames` frames.
  bool lean_applies(const std::string& conv, int64_t frames) const;
  // The lean convolution itself: `n` is the convolution's input (owned: its first four frames
  // are overwritten); `write_context` puts the two context frames into frames 0 and 1 of n.
  template <typename WriteContext>
  Result<Tensor> split_context_conv(Tensor n, const std::string& conv, WriteContext write_context);
  Result<Tensor> upsample(Tensor x, const std::string& prefix, bool temporal);
  // The low-resolution frames of x the next call of the upsampler needs (undefined: none).
  Result<Tensor> next_upsampler_memory(const Tensor& x, const Tensor* memory, bool temporal);
  // Upsample3D's 1x1x1 upscale_conv and depth-to-space (`context_frames`: see
  // Backend::depth_to_space).
  Result<Tensor> upscale(const Tensor& x, const std::string& prefix, bool temporal,
                         bool drop_frame_1, int context_frames = 2);
  // Runs `stage` on consecutive frame pieces of x and concatenates: a first piece of
  // `first_piece` frames if > 0, then `piece` frames each (default hires_chunk_frames; <= 0 or
  // >= the frame count: one call on the whole x). While chunked upsampling is on, the stage's
  // causal memory is read by every piece and is never offered to Backend::offload_hint.
  template <typename Stage>
  Result<Tensor> in_pieces(Tensor x, Stage stage, int64_t first_piece = 0, int64_t piece = -1);

  // ---- causal state ----
  // Stores a conv's causal memory and, outside the piece stages (whose memory every piece reads),
  // hints the backend that it may move it off the device until the next chunk.
  Status keep_memory(const std::string& key, Tensor memory);
  // Writes frames [begin, begin + slot frames) of src into the causal memory `key` in place when
  // the state is updated in place (graphs) and the slot has that shape; false (nothing done)
  // otherwise.
  Result<bool> update_memory_in_place(const std::string& key, const Tensor& src, int64_t begin);

  // ---- a share of the decoder (ChunkOptions::first_unit / end_unit) ----
  // Whether `unit` runs in this call: every unit of the whole decoder, and every name that is not
  // a decoder unit (the encoder's). Notes that a unit ran (observe).
  bool runs(const std::string& unit);
  // Whether any unit of [first, units) runs (the full-frame-rate tail, whose pieces are not cut
  // for nothing).
  bool any_runs_from(const std::string& first) const;

  // ---- telemetry and observers ----
  Status observe(std::string_view block, const Tensor& t);
  void start_stage_clock();

  const Tensor& w(const std::string& name) const { return m_.w(name); }
  const VaeConfig& config() const { return m_.config_; }

  VaeModel& m_;
  Backend& b_;
  CausalState& state_;
  const ChunkOptions& opt_;
  const bool capturing_;       // recording a graph: no stage telemetry
  const bool in_place_state_;  // graphs: causal memory is updated in place
  bool piece_stage_ = false;   // inside in_pieces() with chunked upsampling on
  bool unit_ran_ = false;      // a unit ran since the last observe() (a share of the decoder)
  std::chrono::steady_clock::time_point stage_start_;
  int64_t stage_span_ = -1;  // Backend::begin_device_span handle of the running stage
};

// ---- the model
// -----------------------------------------------------------------------------------

VaeModel::VaeModel() = default;
VaeModel::VaeModel(VaeModel&&) noexcept = default;
VaeModel& VaeModel::operator=(VaeModel&&) noexcept = default;
VaeModel::~VaeModel() = default;

Result<VaeModel> VaeModel::create(Backend& backend, const VaeWeights& weights) {
  if (weights.is_wan()) {
    return invalid_argument("VaeModel: " + weights.source + " holds a " +
                            std::string(family_name(weights.family)) +
                            " VAE; it runs on WanModel (make_video_vae)");
  }
  return create(backend, weights.config, [&](const VaeConfig::Param& p) -> Result<Tensor> {
    auto it = weights.tensors.find(p.name);
    if (it == weights.tensors.end()) return not_found("weights lack tensor " + p.name);
    if (it->second.shape() != p.shape) {
      return invalid_argument("tensor " + p.name + " is " + it->second.shape().to_string() +
                              ", expected " + p.shape.to_string());
    }
    return backend.upload_weight(it->second, p.name);
  });
}

Result<VaeModel> VaeModel::create(Backend& backend, const VaeConfig& config,
                                  const ParameterFactory& make) {
  SEEDVAE_TRY(config.validate());
  VaeModel m;
  m.backend_ = &backend;
  m.graphs_ = std::make_unique<GraphCache>(backend);
  m.config_ = config;
  m.units_.push_back("decoder.conv_in");
  for (const char* u : {"resnets.0", "attentions.0", "resnets.1"}) {
    m.units_.push_back(std::string("decoder.mid_block.") + u);
  }
  for (int l = 0; l < config.levels(); ++l) {
    const std::string p = "decoder.up_blocks." + std::to_string(l);
    for (int j = 0; j < config.layers_per_block + 1; ++j) {
      m.units_.push_back(p + ".resnets." + std::to_string(j));
    }
    if (l < config.levels() - 1) m.units_.push_back(p + ".upsamplers.0");
  }
  m.units_.push_back("decoder.conv_out");  // with conv_norm_out
  for (size_t i = 0; i < m.units_.size(); ++i) m.unit_index_[m.units_[i]] = static_cast<int>(i);
  for (const auto& p : config.parameters()) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor t, make(p));
    if (t.shape != p.shape) {
      return internal_error("parameter " + p.name + " was made as " + t.shape.to_string() +
                            ", expected " + p.shape.to_string());
    }
    m.weights_.emplace(p.name, std::move(t));
  }
  return m;
}

const Tensor& VaeModel::w(const std::string& name) const {
  static const Tensor kEmpty;
  auto it = weights_.find(name);
  return it == weights_.end() ? kEmpty : it->second;
}

void VaeModel::set_telemetry(TelemetrySink* sink) {
  if (sink != telemetry_) {
    for (const PendingStage& p : pending_) backend_->read_device_span(p.span, false);
    pending_.clear();
  }
  telemetry_ = sink;
}

void VaeModel::emit_sample(std::string_view stage, int64_t chunk, int64_t tile, double wall_ms,
                           double device_ms, const MemoryStats& memory) const {
  StageSample s;
  s.stage = std::string(stage);
  s.chunk = chunk;
  s.tile = tile;
  s.wall_ms = wall_ms;
  s.device_ms = device_ms;
  s.current_bytes = memory.current_bytes;
  s.peak_bytes = memory.peak_bytes;
  s.device_used_bytes = memory.device_used_bytes;
  telemetry_->on_stage(s);
}

Result<std::chrono::steady_clock::time_point> VaeModel::end_stage(
    std::string_view stage, int64_t chunk, int64_t tile,
    std::chrono::steady_clock::time_point start, int64_t span) const {
  if (telemetry_->stage_timing() == TelemetrySink::StageTiming::kDeferred &&
      backend_->close_device_span(span)) {
    pending_.push_back(
        PendingStage{std::string(stage), chunk, tile, span, passes_, backend_->memory_stats()});
    emit_pending(0);
    return std::chrono::steady_clock::now();
  }
  // synchronised: the device span first (it waits for its own end mark), then the wall clock
  // after the queue has drained, so the device span lies inside the wall span
  const double device_ms = backend_->end_device_span(span);
  SEEDVAE_TRY(backend_->synchronize());
  emit_pending(std::numeric_limits<int64_t>::max());  // a deferred sink's earlier stages first
  const auto now = std::chrono::steady_clock::now();
  emit_sample(stage, chunk, tile, std::chrono::duration<double, std::milli>(now - start).count(),
              device_ms, backend_->memory_stats());
  return now;
}

void VaeModel::emit_pending(int64_t wait_before_pass) const {
  while (!pending_.empty()) {
    const PendingStage& p = pending_.front();
    const double ms = backend_->read_device_span(p.span, p.pass < wait_before_pass);
    if (ms == Backend::kSpanPending) return;
    emit_sample(p.stage, p.chunk, p.tile, std::max(ms, 0.0), ms, p.memory);
    pending_.pop_front();
  }
}

void VaeModel::flush_telemetry() const {
  if (telemetry_) emit_pending(std::numeric_limits<int64_t>::max());
}

VaeModel::SummarySpan VaeModel::begin_summary() const {
  SummarySpan s;
  if (telemetry_ && telemetry_->wants_summaries()) {
    s.active = true;
    s.start = std::chrono::steady_clock::now();
    s.device_span = backend_->begin_device_span();
  }
  return s;
}

Status VaeModel::end_summary(std::string_view stage, const SummarySpan& span, int64_t chunk,
                             int64_t tile) const {
  if (!telemetry_) return Status::ok();
  // the chunk just queued runs on: wait only for the stages of the ones before it
  emit_pending(passes_);
  if (!span.active) return Status::ok();
  const double device_ms = backend_->end_device_span(span.device_span);
  SEEDVAE_TRY(backend_->synchronize());
  emit_pending(std::numeric_limits<int64_t>::max());  // the summary follows its stages
  const auto now = std::chrono::steady_clock::now();
  emit_sample(stage, chunk, tile,
              std::chrono::duration<double, std::milli>(now - span.start).count(), device_ms,
              backend_->memory_stats());
  return Status::ok();
}

VaeModel::GraphStats VaeModel::graph_stats() const {
  return graphs_ ? graphs_->stats : GraphStats{};
}

Result<Tensor> VaeModel::encode_chunk(const Tensor& x, CausalState& state,
                                      const ChunkOptions& options) {
  return graphed("encoder", x, state, options, [&](const Tensor& in, bool capturing) {
    return Pass(*this, state, options, capturing).encode(in);
  });
}

// conv_out; per level from the last: the upsampler's 3-tap convolution (after its upscale) and,
// when temporal, the upscale's frame doubling; the level's resnets (two 3-tap convolutions each);
// the mid block's two resnets; conv_in.
int64_t VaeModel::decoder_reach() const {
  const VaeConfig& c = config_;
  std::vector<ReachStep> steps{{2, false}};
  for (int l = c.levels() - 1; l >= 0; --l) {
    if (l < c.levels() - 1) {
      steps.push_back({2, false});
      if (c.decoder_temporal_up(l)) steps.push_back({0, true});
    }
    for (int j = 0; j < 2 * (c.layers_per_block + 1); ++j) steps.push_back({2, false});
  }
  for (int j = 0; j < 4; ++j) steps.push_back({2, false});
  steps.push_back({2, false});
  return decoder_reach_of(steps, c.temporal_factor());
}

Result<Tensor> VaeModel::decode_chunk(const Tensor& z, CausalState& state,
                                      const ChunkOptions& options) {
  return graphed("decoder", z, state, options, [&](const Tensor& in, bool capturing) {
    return Pass(*this, state, options, capturing).decode(in);
  });
}

// ---- telemetry ---------------------------------------------------------------------------------

// A stage ends here and the next one starts (VaeModel::end_stage).
Status VaeModel::Pass::observe(std::string_view block, const Tensor& t) {
  // a share of the decoder reports only the blocks it ran (a part of)
  if (!opt_.whole_decoder() && !std::exchange(unit_ran_, false)) return Status::ok();
  if (m_.telemetry_ && !capturing_) {
    SEEDVAE_ASSIGN_OR_RETURN(stage_start_,
                             m_.end_stage(block, opt_.chunk, opt_.tile, stage_start_, stage_span_));
    stage_span_ = b_.begin_device_span();
  }
  return m_.observer_ ? m_.observer_(block, t) : Status::ok();
}

bool VaeModel::Pass::runs(const std::string& unit) {
  if (!opt_.whole_decoder()) {
    const auto it = m_.unit_index_.find(unit);
    if (it != m_.unit_index_.end() &&
        (it->second < opt_.first_unit || (opt_.end_unit >= 0 && it->second >= opt_.end_unit))) {
      return false;
    }
  }
  unit_ran_ = true;
  return true;
}

bool VaeModel::Pass::any_runs_from(const std::string& first) const {
  if (opt_.whole_decoder()) return true;
  const auto it = m_.unit_index_.find(first);
  return it == m_.unit_index_.end() || opt_.end_unit < 0 || it->second < opt_.end_unit;
}

void VaeModel::Pass::start_stage_clock() {
  if (m_.telemetry_ && !capturing_) {
    stage_start_ = std::chrono::steady_clock::now();
    stage_span_ = b_.begin_device_span();  // an earlier span left open simply expires
  }
}

// ---- the network -------------------------------------------------------------------------------

Result<Tensor> VaeModel::Pass::encode(const Tensor& x) {
  // x: [1, 3, T, H, W]
  const auto& c = config();
  if (x.shape.rank() != 5 || x.shape[1] != c.in_channels) {
    return invalid_argument("encoder input must be [1, " + std::to_string(c.in_channels) +
                            ", T, H, W], got " + x.shape.to_string());
  }
  const int64_t t = x.shape[2];
  const int f = c.temporal_factor();
  if (!state_.started ? (t % f != 1 % f) : (t % f != 0)) {
    return invalid_argument("encoder chunk of " + std::to_string(t) + " frames: the first chunk " +
                            "needs 4k+1 frames, later chunks 4k");
  }
  if (x.shape[3] % c.spatial_factor() || x.shape[4] % c.spatial_factor()) {
    return invalid_argument("frame size " + std::to_string(x.shape[4]) + "x" +
                            std::to_string(x.shape[3]) + " is not a multiple of " +
                            std::to_string(c.spatial_factor()));
  }
  start_stage_clock();
  int first_level = 0;  // levels before the first temporal downsampling run in encoder_head
  while (first_level < c.levels() - 1 && !c.encoder_temporal_down(first_level)) ++first_level;
  auto head = [&](Tensor piece) { return encoder_head(std::move(piece)); };
  Tensor h;
  int next_level = first_level;
  if (opt_.hires_chunk_frames > 0 && first_level < c.levels() - 1) {
    // The first temporal level in pieces around the head's: pairs of frames (its stride-2
    // downsampler makes one frame of each pair, carrying one frame of memory), the first chunk's
    // extra first frame alone.
    const int64_t n = opt_.hires_chunk_frames;
    const int64_t outer = std::max<int64_t>(2, (n + 1) / 2 * 2);
    const int64_t first = !state_.started && x.shape[2] % 2 == 1 ? 1 : 0;
    SEEDVAE_ASSIGN_OR_RETURN(h, in_pieces(
                                    x,
                                    [&](Tensor piece) -> Result<Tensor> {
                                      SEEDVAE_ASSIGN_OR_RETURN(Tensor y,
                                                               in_pieces(std::move(piece), head));
                                      return encoder_level(std::move(y), first_level);
                                    },
                                    first, outer));
    next_level = first_level + 1;
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(h, in_pieces(x, head));
  }
  for (int l = next_level; l < c.levels(); ++l) {
    SEEDVAE_ASSIGN_OR_RETURN(h, encoder_level(std::move(h), l));
  }
  SEEDVAE_ASSIGN_OR_RETURN(h, mid_block(h, "encoder.mid_block"));
  SEEDVAE_TRY(observe("encoder.mid_block", h));
  SEEDVAE_ASSIGN_OR_RETURN(h, norm_conv(std::move(h), "encoder.conv_norm_out", "encoder.conv_out"));
  SEEDVAE_TRY(observe("encoder.conv_out", h));
  state_.started = true;
  return h;
}

Result<Tensor> VaeModel::Pass::decode(const Tensor& z) {
  // z: [1, 16, t, h, w]
  const auto& c = config();
  const int units = static_cast<int>(m_.units_.size());
  if (opt_.first_unit < 0 || opt_.first_unit >= units || opt_.end_unit > units ||
      (opt_.end_unit >= 0 && opt_.end_unit <= opt_.first_unit)) {
    return invalid_argument("decoder units [" + std::to_string(opt_.first_unit) + ", " +
                            std::to_string(opt_.end_unit) + ") of " + std::to_string(units));
  }
  if (z.shape.rank() != 5 || (opt_.first_unit == 0 && z.shape[1] != c.latent_channels)) {
    return invalid_argument("decoder input must be [1, " + std::to_string(c.latent_channels) +
                            ", t, h, w], got " + z.shape.to_string());
  }
  start_stage_clock();
  Tensor h = z;
  if (runs("decoder.conv_in")) {
    SEEDVAE_ASSIGN_OR_RETURN(h, causal_conv(z, "decoder.conv_in", 1, 1, false));
  }
  SEEDVAE_TRY(observe("decoder.conv_in", h));
  SEEDVAE_ASSIGN_OR_RETURN(h, mid_block(h, "decoder.mid_block"));
  SEEDVAE_TRY(observe("decoder.mid_block", h));
  int l = 0;
  for (; l < c.levels() && c.decoder_temporal_up(l); ++l) {
    SEEDVAE_ASSIGN_OR_RETURN(h, up_block(std::move(h), l));
  }
  if (any_runs_from("decoder.up_blocks." + std::to_string(l) + ".resnets.0")) {
    SEEDVAE_ASSIGN_OR_RETURN(
        h, in_pieces(std::move(h), [&](Tensor piece) { return decoder_tail(std::move(piece)); }));
  }
  state_.started = true;
  return h;
}

// conv_in and the encoder levels before the first temporal downsampling (all at full frame rate).
Result<Tensor> VaeModel::Pass::encoder_head(Tensor x) {
  const auto& c = config();
  SEEDVAE_ASSIGN_OR_RETURN(Tensor h, causal_conv(x, "encoder.conv_in", 1, 1, false));
  x = {};
  SEEDVAE_TRY(observe("encoder.conv_in", h));
  for (int l = 0; l < c.levels() - 1 && !c.encoder_temporal_down(l); ++l) {
    const std::string p = "encoder.down_blocks." + std::to_string(l);
    for (int j = 0; j < c.layers_per_block; ++j) {
      SEEDVAE_ASSIGN_OR_RETURN(h, resnet(std::move(h), p + ".resnets." + std::to_string(j)));
    }
    SEEDVAE_ASSIGN_OR_RETURN(h, causal_conv(h, p + ".downsamplers.0.conv", 1, 2, true));
    SEEDVAE_TRY(observe(p, h));
  }
  return h;
}

// encoder.down_blocks.<l>: its resnets, then its downsampler (all levels but the last).
Result<Tensor> VaeModel::Pass::encoder_level(Tensor h, int l) {
  const auto& c = config();
  const std::string p = "encoder.down_blocks." + std::to_string(l);
  for (int j = 0; j < c.layers_per_block; ++j) {
    SEEDVAE_ASSIGN_OR_RETURN(h, resnet(std::move(h), p + ".resnets." + std::to_string(j)));
  }
  if (l < c.levels() - 1) {
    const bool temporal = c.encoder_temporal_down(l);
    SEEDVAE_ASSIGN_OR_RETURN(h,
                             causal_conv(h, p + ".downsamplers.0.conv", temporal ? 2 : 1, 2, true));
  }
  SEEDVAE_TRY(observe(p, h));
  return h;
}

// Decoder levels at full frame rate (after the last temporal upsampling), conv_norm_out, conv_out.
Result<Tensor> VaeModel::Pass::decoder_tail(Tensor h) {
  const auto& c = config();
  int l = 0;
  while (l < c.levels() && c.decoder_temporal_up(l)) ++l;
  for (; l < c.levels(); ++l) {
    SEEDVAE_ASSIGN_OR_RETURN(h, up_block(std::move(h), l));
  }
  if (runs("decoder.conv_out")) {
    SEEDVAE_ASSIGN_OR_RETURN(h,
                             norm_conv(std::move(h), "decoder.conv_norm_out", "decoder.conv_out"));
  }
  SEEDVAE_TRY(observe("decoder.conv_out", h));
  return h;
}

// decoder.up_blocks.<l>: its resnets, then its upsampler (all levels but the last).
Result<Tensor> VaeModel::Pass::up_block(Tensor h, int l) {
  const auto& c = config();
  const std::string p = "decoder.up_blocks." + std::to_string(l);
  for (int j = 0; j < c.layers_per_block + 1; ++j) {
    SEEDVAE_ASSIGN_OR_RETURN(h, resnet(std::move(h), p + ".resnets." + std::to_string(j)));
  }
  if (l < c.levels() - 1 && runs(p + ".upsamplers.0")) {
    SEEDVAE_ASSIGN_OR_RETURN(h,
                             upsample(std::move(h), p + ".upsamplers.0", c.decoder_temporal_up(l)));
  }
  SEEDVAE_TRY(observe(p, h));
  return h;
}

Result<Tensor> VaeModel::Pass::mid_block(const Tensor& x, const std::string& p) {
  SEEDVAE_ASSIGN_OR_RETURN(Tensor h, resnet(x, p + ".resnets.0"));
  const std::string a = p + ".attentions.0";
  if (!runs(a)) return resnet(h, p + ".resnets.1");
  AttentionWeights aw;
  aw.norm_weight = w(a + ".group_norm.weight");
  aw.norm_bias = w(a + ".group_norm.bias");
  aw.wq = w(a + ".to_q.weight");
  aw.bq = w(a + ".to_q.bias");
  aw.wk = w(a + ".to_k.weight");
  aw.bk = w(a + ".to_k.bias");
  aw.wv = w(a + ".to_v.weight");
  aw.bv = w(a + ".to_v.bias");
  aw.wo = w(a + ".to_out.0.weight");
  aw.bo = w(a + ".to_out.0.bias");
  aw.groups = config().norm_groups;
  aw.eps = config().norm_eps;
  SEEDVAE_ASSIGN_OR_RETURN(h, b_.attention(h, aw));
  return resnet(h, p + ".resnets.1");
}

// ResnetBlock3D: SiLU(GN) -> conv1 -> SiLU(GN) -> conv2, plus the (1x1x1) shortcut of the raw x.
Result<Tensor> VaeModel::Pass::resnet(Tensor x, const std::string& p) {
  if (!runs(p)) return x;
  const bool projected = w(p + ".conv_shortcut.weight").defined();
  Tensor shortcut;
  if (projected && opt_.lean_convs && p.rfind("decoder.", 0) == 0) {
    // lean: the shortcut first, so x is not held through the convolutions
    SEEDVAE_ASSIGN_OR_RETURN(
        shortcut, b_.conv3d(x, w(p + ".conv_shortcut.weight"), w(p + ".conv_shortcut.bias"), {}));
  }
  SEEDVAE_ASSIGN_OR_RETURN(
      Tensor h, norm_conv(shortcut.defined() ? std::move(x) : x, p + ".norm1", p + ".conv1"));
  SEEDVAE_ASSIGN_OR_RETURN(h, norm_conv(std::move(h), p + ".norm2", p + ".conv2"));
  if (projected && !shortcut.defined()) {
    SEEDVAE_ASSIGN_OR_RETURN(
        shortcut, b_.conv3d(x, w(p + ".conv_shortcut.weight"), w(p + ".conv_shortcut.bias"), {}));
  }
  SEEDVAE_TRY(b_.add_inplace(h, projected ? shortcut : x));
  return h;
}

// ---- layers ------------------------------------------------------------------------------------

// InflatedCausalConv3d (docs/model.md §2.1): temporal context of kT-1 frames (replicated frame 0
// on the first chunk, the stored memory later), zero spatial padding, plain conv; remembers the
// last kT-sT frames of the extended input for the next chunk.
Result<Tensor> VaeModel::Pass::causal_conv(const Tensor& x, const std::string& prefix, int stride_t,
                                           int stride_hw, bool downsample_pad, Memory memory_mode) {
  const Tensor& weight = w(prefix + ".weight");
  const Tensor& bias = w(prefix + ".bias");
  if (!weight.defined()) return internal_error("no weight for " + prefix);
  const int kt = static_cast<int>(weight.shape[2]);
  const int kh = static_cast<int>(weight.shape[3]);
  Conv3dParams p;
  p.stride_t = stride_t;
  p.stride_h = p.stride_w = stride_hw;
  p.model_output = is_output_conv(prefix);
  if (downsample_pad) {
    p.pad_bottom = p.pad_right = 1;  // Downsample3D pads (0, 1, 0, 1), then convolves unpadded
  } else {
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = kh / 2;
  }
  if (kt == 1 || memory_mode == Memory::kExtended) return b_.conv3d(x, weight, bias, p);

  // Memory is used whenever this conv has it: in a continued stream, and also within the first
  // chunk when the high-resolution stages run in pieces (the second piece continues the first).
  const Tensor* memory = nullptr;
  if (auto it = state_.memory.find(prefix); it != state_.memory.end()) {
    memory = &it->second;
  } else if (state_.started) {
    return internal_error("causal memory of " + prefix + " is missing in a continued stream");
  }
  SEEDVAE_ASSIGN_OR_RETURN(Tensor ext, b_.causal_pad(x, memory, kt - 1));
  const int keep = kt - stride_t;
  if (keep > 0 && memory_mode == Memory::kStore) {
    const int64_t tx = ext.shape[2];
    // `ext` holds a copy of the old memory now, so it may be overwritten (graphs) or released
    SEEDVAE_ASSIGN_OR_RETURN(const bool updated, update_memory_in_place(prefix, ext, tx - keep));
    if (!updated) {
      // release the old memory before the new one is sliced, so the two never coexist (at 1080p
      // a full-resolution memory is 1 GiB)
      if (memory != nullptr) state_.memory.erase(prefix);
      memory = nullptr;
      SEEDVAE_ASSIGN_OR_RETURN(Tensor m, b_.slice_frames(ext, tx - keep, tx));
      // the conv below reads `ext`, not the memory: hinting it now is safe
      SEEDVAE_TRY(keep_memory(prefix, std::move(m)));
    }
  }
  return b_.conv3d(ext, weight, bias, p);
}

Result<Tensor> VaeModel::Pass::norm_silu(const Tensor& x, const std::string& prefix,
                                         int context_frames) {
  GroupNormParams gp{config().norm_groups, config().norm_eps, true, context_frames};
  return b_.group_norm(x, w(prefix + ".weight"), w(prefix + ".bias"), gp);
}

bool VaeModel::Pass::lean_applies(const std::string& conv, int64_t frames) const {
  // the decoder's convolutions only: the encoder meets its memory target without (and its bf16
  // error grew past PyTorch's own in one golden tensor with them, docs/gpu-notes.md)
  if (!opt_.lean_convs || in_place_state_ || frames < 4 || conv.rfind("decoder.", 0) != 0) {
    return false;
  }
  const Tensor& weight = w(conv + ".weight");
  if (!weight.defined() || weight.shape[2] != 3) return false;
  auto it = state_.memory.find(conv);
  return it != state_.memory.end() && it->second.shape.rank() == 5 && it->second.shape[2] == 2;
}

template <typename WriteContext>
Result<Tensor> VaeModel::Pass::split_context_conv(Tensor n, const std::string& conv,
                                                  WriteContext write_context) {
  const Tensor& weight = w(conv + ".weight");
  const Tensor& bias = w(conv + ".bias");
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = static_cast<int>(weight.shape[3]) / 2;
  p.model_output = is_output_conv(conv);
  const int64_t t = n.shape[2];
  // output frame i reads extended frames [i, i + 3) = [memory, n][i, i + 3): n alone from i = 2
  SEEDVAE_ASSIGN_OR_RETURN(Tensor late, b_.conv3d(n, weight, bias, p));
  // [memory, n0, n1] over n0..n3 (queued after the convolution that read them)
  SEEDVAE_TRY(b_.copy_frames_into(n, 2, n, 0, 2));
  SEEDVAE_TRY(write_context(n));
  Tensor head = n;
  if (t > 4) {
    SEEDVAE_ASSIGN_OR_RETURN(head, b_.slice_frames(n, 0, 4));
  }
  n = {};
  SEEDVAE_ASSIGN_OR_RETURN(Tensor early, b_.conv3d(head, weight, bias, p));
  head = {};
  return b_.concat_frames(early, late);
}

Result<Tensor> VaeModel::Pass::norm_conv(Tensor x, const std::string& norm,
                                         const std::string& conv) {
  const bool lean = lean_applies(conv, x.shape[2]);
  Tensor n;
  if (lean && x.storage.use_count() == 1) {
    // nobody else holds x (a resnet's shortcut was taken first): normalise it in place
    GroupNormParams gp{config().norm_groups, config().norm_eps, true, 0};
    SEEDVAE_TRY(b_.group_norm_inplace(x, w(norm + ".weight"), w(norm + ".bias"), gp));
    n = std::move(x);
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(n, norm_silu(x, norm, lean ? 0 : 2));
    x = {};
  }
  if (!lean) return causal_conv(n, conv, 1, 1, false);
  const int64_t t = n.shape[2];
  Tensor memory = state_.memory[conv];
  // the next chunk's memory: the last two frames of the input, sliced before they are overwritten
  SEEDVAE_ASSIGN_OR_RETURN(Tensor keep, b_.slice_frames(n, t - 2, t));
  SEEDVAE_TRY(keep_memory(conv, std::move(keep)));
  return split_context_conv(std::move(n), conv, [&](Tensor& dst) -> Status {
    SEEDVAE_TRY(b_.copy_frames_into(dst, 0, memory, 0, 2));
    memory = {};
    return Status::ok();
  });
}

Result<Tensor> VaeModel::Pass::upscale(const Tensor& x, const std::string& p, bool temporal,
                                       bool drop_frame_1, int context_frames) {
  SEEDVAE_ASSIGN_OR_RETURN(
      Tensor y, b_.conv3d(x, w(p + ".upscale_conv.weight"), w(p + ".upscale_conv.bias"), {}));
  return b_.depth_to_space(y, temporal ? 2 : 1, drop_frame_1, context_frames);
}

// The conv of an upsampler keeps its causal memory before the upscale, 4x (spatial) or 8x
// (temporal) smaller: the last two frames of the conv's extended input are the upscale of the
// last two input frames (spatial: one output frame per input frame; a first call of one frame
// replicates it, as the conv replicates its first frame) or of the last input frame (temporal:
// its two output frames). The one exception is a first chunk of one latent frame at a temporal
// level: its frame 1 is dropped, the conv's memory is frame 0 twice, and that is kept as it is
// (high resolution) until the next call (nothing returned here).
Result<Tensor> VaeModel::Pass::next_upsampler_memory(const Tensor& x, const Tensor* memory,
                                                     bool temporal) {
  const int64_t t = x.shape[2];
  if (temporal) {
    if (!state_.started && t == 1) return Tensor{};
    return b_.slice_frames(x, t - 1, t);
  }
  if (t >= 2) return b_.slice_frames(x, t - 2, t);
  if (memory != nullptr) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor last, b_.slice_frames(*memory, 1, 2));
    return b_.concat_frames(last, x);
  }
  return b_.concat_frames(x, x);
}

// Upsample3D: 1x1x1 upscale_conv, depth-to-space (2x2 spatial, x2 temporal on temporal levels),
// first-frame drop on the first chunk of temporal levels, then a causal 3x3x3 conv, whose memory
// is kept at low resolution (next_upsampler_memory). The next call upscales those kept frames
// apart from its own and puts them in front (causal_pad), which gives the conv's extended input.
// At 1080p in bf16 the decoder's state between chunks shrinks by about 2.5 GiB, for < 0.5 % more
// FLOPs (the 1x1x1 conv runs again on the kept frames). Three cases:
//  * first call (no low-resolution memory): upscale (dropping frame 1 on a temporal level) and
//    convolve with the usual causal padding;
//  * continued stream: x and the kept frames are upscaled apart and joined by causal_pad, which
//    backends may do in place (the CUDA backend writes the two context frames into spare frames
//    in front of the depth-to-space output). Upscaling [memory, x] in one call would hold the
//    1x1x1 conv's output and the depth-to-space output of all frames at once: at 1080p in bf16
//    about 3.4 GiB more at the last upsampler, more than the state this saves (measured on an
//    H100, docs/gpu-notes.md);
//  * continued stream, lean convolutions (spatial levels, T >= 4): x is upscaled without room
//    for the context, the split convolution runs, and the two memory frames are upscaled one at
//    a time into place.
// With graphs the kept frames overwrite the old ones in place at the end, after their last read.
Result<Tensor> VaeModel::Pass::upsample(Tensor x, const std::string& p, bool temporal) {
  const std::string conv = p + ".conv";
  const std::string low = p + ".upscale_conv";
  const auto low_it = state_.memory.find(low);
  const Tensor* low_memory = low_it == state_.memory.end() ? nullptr : &low_it->second;
  const int64_t t = x.shape[2];
  const bool in_place =
      in_place_state_ && low_memory != nullptr && low_memory->shape[2] == (temporal ? 1 : 2);
  Tensor keep;  // the low-resolution frames the next call needs
  if (!in_place) {
    SEEDVAE_ASSIGN_OR_RETURN(keep, next_upsampler_memory(x, low_memory, temporal));
  }
  Tensor out;
  if (low_memory == nullptr) {
    const bool drop = temporal && !state_.started;
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, upscale(x, p, temporal, drop));
    SEEDVAE_ASSIGN_OR_RETURN(out,
                             causal_conv(y, conv, 1, 1, false,
                                         keep.defined() ? Memory::kKeepElsewhere : Memory::kStore));
  } else if (!temporal && opt_.lean_convs && !in_place_state_ && t >= 4 &&
             low_memory->shape[2] == 2) {
    const Tensor memory = *low_memory;
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, upscale(x, p, false, false, 0));
    x = {};
    SEEDVAE_ASSIGN_OR_RETURN(
        out, split_context_conv(std::move(y), conv, [&](Tensor& dst) -> Status {
          for (int64_t f = 0; f < 2; ++f) {
            SEEDVAE_ASSIGN_OR_RETURN(Tensor frame, b_.slice_frames(memory, f, f + 1));
            SEEDVAE_ASSIGN_OR_RETURN(Tensor up, upscale(frame, p, false, false, 0));
            SEEDVAE_TRY(b_.copy_frames_into(dst, f, up, 0, 1));
          }
          return Status::ok();
        }));
  } else {  // a continued stream: never a first chunk, so nothing is dropped
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, upscale(x, p, temporal, false));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor m, upscale(*low_memory, p, temporal, false));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor ext, b_.causal_pad(y, &m, static_cast<int>(m.shape[2])));
    y = {};
    m = {};
    SEEDVAE_ASSIGN_OR_RETURN(out, causal_conv(ext, conv, 1, 1, false, Memory::kExtended));
  }
  if (in_place) {
    Tensor& slot = state_.memory[low];
    if (temporal) {
      SEEDVAE_TRY(b_.copy_frames_into(slot, 0, x, t - 1, 1));
    } else if (t >= 2) {
      SEEDVAE_TRY(b_.copy_frames_into(slot, 0, x, t - 2, 2));
    } else {
      SEEDVAE_TRY(b_.copy_frames_into(slot, 0, slot, 1, 1));
      SEEDVAE_TRY(b_.copy_frames_into(slot, 1, x, 0, 1));
    }
  } else if (keep.defined()) {
    state_.memory.erase(conv);
    SEEDVAE_TRY(keep_memory(low, std::move(keep)));
  }
  return out;
}

template <typename Stage>
Result<Tensor> VaeModel::Pass::in_pieces(Tensor x, Stage stage, int64_t first_piece,
                                         int64_t piece) {
  const int64_t n = piece < 0 ? opt_.hires_chunk_frames : piece;
  // Chunked upsampling: the stage's memory is read by every piece, so it stays on the device.
  const bool was_piece_stage = piece_stage_;
  piece_stage_ = opt_.hires_chunk_frames > 0;
  struct Restore {
    bool& flag;
    bool value;
    ~Restore() { flag = value; }
  } restore{piece_stage_, was_piece_stage};
  return run_in_pieces(b_, std::move(x), first_piece, n, stage);
}

// ---- causal state ------------------------------------------------------------------------------

Result<bool> VaeModel::Pass::update_memory_in_place(const std::string& key, const Tensor& src,
                                                    int64_t begin) {
  if (!in_place_state_) return false;
  auto it = state_.memory.find(key);
  if (it == state_.memory.end()) return false;
  Tensor& slot = it->second;
  const int64_t n = slot.shape.rank() == 5 ? slot.shape[2] : -1;
  Shape want = src.shape;
  if (want.rank() != 5 || begin < 0 || begin + n > want[2]) return false;
  want[2] = n;
  if (slot.shape != want || slot.dtype != src.dtype) return false;
  SEEDVAE_TRY(b_.copy_frames_into(slot, 0, src, begin, n));
  return true;
}

Status VaeModel::Pass::keep_memory(const std::string& key, Tensor memory) {
  Tensor& slot = state_.memory[key];
  slot = std::move(memory);
  return piece_stage_ ? Status::ok() : b_.offload_hint(slot);
}

// ---- CUDA graphs -------------------------------------------------------------------------------

namespace {

// The causal state's names and shapes ("layout"), and where its tensors live.
std::string state_layout(const CausalState& state) {
  std::string s = state.started ? "started" : "first";
  for (const auto& [key, t] : state.memory) s += ";" + key + t.shape.to_string();
  return s;
}

std::string state_addresses(const Backend& backend, const CausalState& state) {
  std::string s;
  for (const auto& [key, t] : state.memory) s += std::to_string(backend.address_of(t)) + ",";
  return s;
}

constexpr size_t kMaxGraphs = 32;  // e.g. one per tile with blended tiles; then start over

}  // namespace

template <typename Run>
Result<Tensor> VaeModel::graphed(std::string_view coder, const Tensor& x, CausalState& state,
                                 const ChunkOptions& options, Run run) {
  if (!graphs_on() || !state.started) return run(x, false);
  GraphCache& cache = *graphs_;
  const std::string layout = state_layout(state);
  const std::string shape_layout = std::string(coder) + x.shape.to_string() + "|pieces " +
                                   std::to_string(options.hires_chunk_frames) + "|units " +
                                   std::to_string(options.first_unit) + "-" +
                                   std::to_string(options.end_unit) + "|" + layout;
  const std::string addresses = state_addresses(*backend_, state);
  const std::string key = shape_layout + "|" + addresses;
  const int64_t frames = x.shape[2];

  if (auto it = cache.graphs.find(key); it != cache.graphs.end()) {
    GraphCache::Record& rec = it->second;
    const auto wall0 = std::chrono::steady_clock::now();
    const int64_t span = telemetry_ ? backend_->begin_device_span() : -1;
    ++passes_;
    SEEDVAE_TRY(backend_->copy_frames_into(rec.in, 0, x, 0, frames));
    SEEDVAE_TRY(backend_->launch_graph(rec.id));
    ++cache.stats.replayed;
    if (telemetry_) {
      SEEDVAE_TRY(end_stage(std::string(coder) + ".graph", options.chunk, options.tile, wall0, span)
                      .status());
    }
    return backend_->slice_frames(rec.out, 0, rec.out.shape[2]);
  }

  if (cache.stable.count(shape_layout) == 0) {
    // First chunk of this shape and layout: eager (autotunes the convolutions); does it keep its
    // state where it is?
    ++cache.stats.eager;
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, run(x, false));
    if (state_layout(state) == layout && state_addresses(*backend_, state) == addresses) {
      cache.stable.insert(shape_layout);
    }
    return y;
  }

  // Record this chunk, then launch the recording.
  if (cache.graphs.size() >= kMaxGraphs) cache.clear();
  SEEDVAE_ASSIGN_OR_RETURN(Tensor in, backend_->slice_frames(x, 0, frames));  // fixed input
  const std::map<std::string, Tensor> saved_memory = state.memory;
  if (Status begun = backend_->begin_capture(); !begun.is_ok()) {
    ++cache.stats.discarded;
    cache.stats.last_discard = begun.to_string();
    ++cache.stats.eager;
    return run(x, false);
  }
  Tensor out;
  Status run_status = Status::ok();
  {
    Result<Tensor> y = run(in, true);
    if (y.is_ok()) {
      // a copy inside the recording: the output's address is the recording's own (a pending
      // bias is carried on, and added where the eager output would add it)
      Result<Tensor> o = backend_->slice_frames(y.value(), 0, y.value().shape[2]);
      if (o.is_ok()) {
        out = std::move(o).value();
      } else {
        run_status = o.status();
      }
    } else {
      run_status = y.status();
    }
  }
  const bool kept_state =
      state_layout(state) == layout && state_addresses(*backend_, state) == addresses;
  Result<int64_t> id = backend_->end_capture(run_status.is_ok() && kept_state);
  if (!id.is_ok() || !kept_state) {
    // nothing recorded has run: put the state back as it was and run the chunk eagerly
    state.memory = saved_memory;
    state.started = true;
    ++cache.stats.discarded;
    cache.stats.last_discard =
        !kept_state ? "the chunk moved its causal state" : id.status().to_string();
    if (!kept_state) cache.stable.erase(shape_layout);
    if (id.is_ok()) backend_->release_graph(id.value());
    ++cache.stats.eager;
    return run(x, false);
  }
  GraphCache::Record& rec = cache.graphs[key];
  rec.id = id.value();
  rec.in = std::move(in);
  rec.out = std::move(out);
  ++cache.stats.captured;
  SEEDVAE_TRY(backend_->launch_graph(rec.id));
  return backend_->slice_frames(rec.out, 0, rec.out.shape[2]);
}

}  // namespace seedvae
