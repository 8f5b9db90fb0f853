#include "core/vae/vae_model.h"

#include <algorithm>
#include <vector>

namespace seedvae {

int64_t CausalState::bytes() const {
  int64_t n = 0;
  for (const auto& [k, t] : memory) n += t.shape.numel() * dtype_size(t.dtype);
  return n;
}

Result<VaeModel> VaeModel::create(Backend& backend, const VaeWeights& weights) {
  SEEDVAE_TRY(weights.config.validate());
  VaeModel m;
  m.backend_ = &backend;
  m.graph_cache_ = std::make_shared<GraphCache>();
  m.graph_cache_->backend = &backend;
  m.config_ = weights.config;
  for (const auto& p : weights.config.parameters()) {
    auto it = weights.tensors.find(p.name);
    if (it == weights.tensors.end()) return not_found("weights lack tensor " + p.name);
    if (it->second.shape() != p.shape) {
      return invalid_argument("tensor " + p.name + " is " + it->second.shape().to_string() +
                              ", expected " + p.shape.to_string());
    }
    SEEDVAE_ASSIGN_OR_RETURN(Tensor t, backend.upload_weight(it->second, p.name));
    m.weights_.emplace(p.name, std::move(t));
  }
  return m;
}

const Tensor& VaeModel::w(const std::string& name) const {
  static const Tensor kEmpty;
  auto it = weights_.find(name);
  return it == weights_.end() ? kEmpty : it->second;
}

void VaeModel::emit_sample(std::string_view stage, double wall_ms, double device_ms) const {
  const MemoryStats m = backend_->memory_stats();
  StageSample s;
  s.stage = std::string(stage);
  s.chunk = chunk_label_;
  s.tile = tile_label_;
  s.wall_ms = wall_ms;
  s.device_ms = device_ms;
  s.current_bytes = m.current_bytes;
  s.peak_bytes = m.peak_bytes;
  s.device_used_bytes = m.device_used_bytes;
  telemetry_->on_stage(s);
}

// A stage ends here and the next one starts: device span first (it waits for its own end mark),
// then the wall clock after the queue has drained, so the device span lies inside the wall span.
Status VaeModel::observe(std::string_view block, const Tensor& t) const {
  if (telemetry_ && !capturing_) {
    const double device_ms = backend_->end_device_span(stage_span_);
    SEEDVAE_TRY(backend_->synchronize());
    const auto now = std::chrono::steady_clock::now();
    emit_sample(block, std::chrono::duration<double, std::milli>(now - stage_start_).count(),
                device_ms);
    stage_start_ = now;
    stage_span_ = backend_->begin_device_span();
  }
  return observer_ ? observer_(block, t) : Status::ok();
}

void VaeModel::start_stage_clock() const {
  if (telemetry_ && !capturing_) {
    stage_start_ = std::chrono::steady_clock::now();
    stage_span_ = backend_->begin_device_span();  // an earlier span left open simply expires
  }
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

Status VaeModel::end_summary(std::string_view stage, const SummarySpan& span) const {
  if (!span.active || !telemetry_) return Status::ok();
  const double device_ms = backend_->end_device_span(span.device_span);
  SEEDVAE_TRY(backend_->synchronize());
  const auto now = std::chrono::steady_clock::now();
  emit_sample(stage, std::chrono::duration<double, std::milli>(now - span.start).count(),
              device_ms);
  return Status::ok();
}

// InflatedCausalConv3d (§2.1): temporal context of kT-1 frames (replicated frame 0 on the first
// chunk, the stored memory later), zero spatial padding, plain conv; remembers the last kT-sT
// frames of the extended input for the next chunk.
Result<Tensor> VaeModel::causal_conv(const Tensor& x, const std::string& prefix, int stride_t,
                                     int stride_hw, bool downsample_pad, CausalState& state,
                                     Memory memory_mode) const {
  const Tensor& weight = w(prefix + ".weight");
  const Tensor& bias = w(prefix + ".bias");
  if (!weight.defined()) return internal_error("no weight for " + prefix);
  const int kt = static_cast<int>(weight.shape[2]);
  const int kh = static_cast<int>(weight.shape[3]);
  Conv3dParams p;
  p.stride_t = stride_t;
  p.stride_h = p.stride_w = stride_hw;
  if (downsample_pad) {
    p.pad_bottom = p.pad_right = 1;  // Downsample3D pads (0, 1, 0, 1), then convolves unpadded
  } else {
    p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = kh / 2;
  }
  if (kt == 1 || memory_mode == Memory::kExtended) return backend_->conv3d(x, weight, bias, p);

  // Memory is used whenever this conv has it: in a continued stream, and also within the first
  // chunk when the high-resolution stages run in pieces (the second piece continues the first).
  const Tensor* memory = nullptr;
  if (auto it = state.memory.find(prefix); it != state.memory.end()) {
    memory = &it->second;
  } else if (state.started) {
    return internal_error("causal memory of " + prefix + " is missing in a continued stream");
  }
  SEEDVAE_ASSIGN_OR_RETURN(Tensor ext, backend_->causal_pad(x, memory, kt - 1));
  const int keep = kt - stride_t;
  if (keep > 0 && memory_mode == Memory::kStore) {
    const int64_t tx = ext.shape[2];
    // `ext` holds a copy of the old memory now, so it may be overwritten (graphs) or released
    SEEDVAE_ASSIGN_OR_RETURN(const bool updated,
                             update_memory_in_place(state, prefix, ext, tx - keep));
    if (!updated) {
      // release the old memory before the new one is sliced, so the two never coexist (at 1080p
      // a full-resolution memory is 1 GiB)
      if (memory != nullptr) state.memory.erase(prefix);
      memory = nullptr;
      SEEDVAE_ASSIGN_OR_RETURN(Tensor m, backend_->slice_frames(ext, tx - keep, tx));
      // the conv below reads `ext`, not the memory: hinting it now is safe
      SEEDVAE_TRY(keep_memory(state, prefix, std::move(m)));
    }
  }
  return backend_->conv3d(ext, weight, bias, p);
}

Result<bool> VaeModel::update_memory_in_place(CausalState& state, const std::string& key,
                                              const Tensor& src, int64_t begin) const {
  if (!in_place_state()) return false;
  auto it = state.memory.find(key);
  if (it == state.memory.end()) return false;
  Tensor& slot = it->second;
  const int64_t n = slot.shape.rank() == 5 ? slot.shape[2] : -1;
  Shape want = src.shape;
  if (want.rank() != 5 || begin < 0 || begin + n > want[2]) return false;
  want[2] = n;
  if (slot.shape != want || slot.dtype != src.dtype) return false;
  SEEDVAE_TRY(backend_->copy_frames_into(slot, 0, src, begin, n));
  return true;
}

Status VaeModel::keep_memory(CausalState& state, const std::string& key, Tensor memory) const {
  Tensor& slot = state.memory[key];
  slot = std::move(memory);
  return piece_stage_ ? Status::ok() : backend_->offload_hint(slot);
}

Result<Tensor> VaeModel::norm_silu(const Tensor& x, const std::string& prefix,
                                   int context_frames) const {
  GroupNormParams gp{config_.norm_groups, config_.norm_eps, true, context_frames};
  return backend_->group_norm(x, w(prefix + ".weight"), w(prefix + ".bias"), gp);
}

bool VaeModel::lean_applies(const std::string& conv, int64_t frames,
                            const CausalState& state) const {
  // the decoder's convolutions only: the encoder meets its memory target without (and its bf16
  // error grew past PyTorch's own in one golden tensor with them, docs/gpu-notes.md §9)
  if (!lean_convs_ || in_place_state() || frames < 4 || conv.rfind("decoder.", 0) != 0) {
    return false;
  }
  const Tensor& weight = w(conv + ".weight");
  if (!weight.defined() || weight.shape[2] != 3) return false;
  auto it = state.memory.find(conv);
  return it != state.memory.end() && it->second.shape.rank() == 5 && it->second.shape[2] == 2;
}

template <typename WriteContext>
Result<Tensor> VaeModel::split_context_conv(Tensor n, const std::string& conv,
                                            WriteContext write_context) const {
  const Tensor& weight = w(conv + ".weight");
  const Tensor& bias = w(conv + ".bias");
  Conv3dParams p;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = static_cast<int>(weight.shape[3]) / 2;
  const int64_t t = n.shape[2];
  // output frame i reads extended frames [i, i + 3) = [memory, n][i, i + 3): n alone from i = 2
  SEEDVAE_ASSIGN_OR_RETURN(Tensor late, backend_->conv3d(n, weight, bias, p));
  // [memory, n0, n1] over n0..n3 (queued after the convolution that read them)
  SEEDVAE_TRY(backend_->copy_frames_into(n, 2, n, 0, 2));
  SEEDVAE_TRY(write_context(n));
  Tensor head = n;
  if (t > 4) {
    SEEDVAE_ASSIGN_OR_RETURN(head, backend_->slice_frames(n, 0, 4));
  }
  n = {};
  SEEDVAE_ASSIGN_OR_RETURN(Tensor early, backend_->conv3d(head, weight, bias, p));
  head = {};
  return backend_->concat_frames(early, late);
}

Result<Tensor> VaeModel::norm_conv(Tensor x, const std::string& norm, const std::string& conv,
                                   CausalState& state) const {
  const bool lean = lean_applies(conv, x.shape[2], state);
  Tensor n;
  if (lean && x.storage.use_count() == 1) {
    // nobody else holds x (a resnet's shortcut was taken first): normalise it in place
    GroupNormParams gp{config_.norm_groups, config_.norm_eps, true, 0};
    SEEDVAE_TRY(backend_->group_norm_inplace(x, w(norm + ".weight"), w(norm + ".bias"), gp));
    n = std::move(x);
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(n, norm_silu(x, norm, lean ? 0 : 2));
    x = {};
  }
  if (!lean) return causal_conv(n, conv, 1, 1, false, state);
  const int64_t t = n.shape[2];
  Tensor memory = state.memory[conv];
  // the next chunk's memory: the last two frames of the input, sliced before they are overwritten
  SEEDVAE_ASSIGN_OR_RETURN(Tensor keep, backend_->slice_frames(n, t - 2, t));
  SEEDVAE_TRY(keep_memory(state, conv, std::move(keep)));
  return split_context_conv(std::move(n), conv, [&](Tensor& dst) -> Status {
    SEEDVAE_TRY(backend_->copy_frames_into(dst, 0, memory, 0, 2));
    memory = {};
    return Status::ok();
  });
}

// ResnetBlock3D: SiLU(GN) -> conv1 -> SiLU(GN) -> conv2, plus the (1x1x1) shortcut of the raw x.
Result<Tensor> VaeModel::resnet(Tensor x, const std::string& p, CausalState& state) const {
  const bool projected = w(p + ".conv_shortcut.weight").defined();
  Tensor shortcut;
  if (projected && lean_convs_ && p.rfind("decoder.", 0) == 0) {
    // lean: the shortcut first, so x is not held through the convolutions
    SEEDVAE_ASSIGN_OR_RETURN(shortcut, backend_->conv3d(x, w(p + ".conv_shortcut.weight"),
                                                        w(p + ".conv_shortcut.bias"), {}));
  }
  SEEDVAE_ASSIGN_OR_RETURN(Tensor h, norm_conv(shortcut.defined() ? std::move(x) : x,
                                               p + ".norm1", p + ".conv1", state));
  SEEDVAE_ASSIGN_OR_RETURN(h, norm_conv(std::move(h), p + ".norm2", p + ".conv2", state));
  if (projected && !shortcut.defined()) {
    SEEDVAE_ASSIGN_OR_RETURN(shortcut, backend_->conv3d(x, w(p + ".conv_shortcut.weight"),
                                                        w(p + ".conv_shortcut.bias"), {}));
  }
  SEEDVAE_TRY(backend_->add_inplace(h, projected ? shortcut : x));
  return h;
}

Result<Tensor> VaeModel::mid_block(const Tensor& x, const std::string& p,
                                   CausalState& state) const {
  SEEDVAE_ASSIGN_OR_RETURN(Tensor h, resnet(x, p + ".resnets.0", state));
  const std::string a = p + ".attentions.0";
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
  aw.groups = config_.norm_groups;
  aw.eps = config_.norm_eps;
  SEEDVAE_ASSIGN_OR_RETURN(h, backend_->attention(h, aw));
  return resnet(h, p + ".resnets.1", state);
}

Result<Tensor> VaeModel::upscale(const Tensor& x, const std::string& p, bool temporal,
                                 bool drop_frame_1, int context_frames) const {
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, backend_->conv3d(x, w(p + ".upscale_conv.weight"),
                                                      w(p + ".upscale_conv.bias"), {}));
  return backend_->depth_to_space(y, temporal ? 2 : 1, drop_frame_1, context_frames);
}

// Upsample3D: 1x1x1 upscale_conv, depth-to-space (2x2 spatial, x2 temporal on temporal levels),
// first-frame drop on the first chunk of temporal levels, then a causal 3x3x3 conv.
//
// The conv's causal memory is kept before the upscale, 4x (spatial) or 8x (temporal) smaller: the
// last two frames of the conv's extended input are the upscale of the last two input frames
// (spatial: one output frame per input frame; a first call of one frame replicates it, as the
// conv replicates its first frame) or of the last input frame (temporal: its two output frames).
// The next call upscales those kept frames apart from its own and puts them in front
// (causal_pad), which gives the conv's extended input. At 1080p in bf16 the decoder's state
// between chunks shrinks by about 2.5 GiB, for < 0.5 % more FLOPs (the 1x1x1 conv runs again on
// the kept frames). The one exception is a first chunk of one latent frame at a temporal level:
// its frame 1 is dropped, the conv's memory is frame 0 twice, and that is kept as it is (high
// resolution) until the next call.
Result<Tensor> VaeModel::upsample(Tensor x, const std::string& p, bool temporal,
                                  CausalState& state) const {
  const std::string conv = p + ".conv";
  const std::string low = p + ".upscale_conv";
  const bool drop = temporal && !state.started;
  const auto low_it = state.memory.find(low);
  const bool have_low = low_it != state.memory.end();
  const int64_t t = x.shape[2];
  // With graphs the kept frames overwrite the old ones at the end (after their last read below);
  // a one-frame spatial call keeps [old frame 1, x].
  const bool in_place =
      in_place_state() && have_low && low_it->second.shape[2] == (temporal ? 1 : 2);
  Tensor keep;  // the low-resolution frames the next call needs
  if (in_place) {
    // nothing to slice now
  } else if (!temporal) {
    if (t >= 2) {
      SEEDVAE_ASSIGN_OR_RETURN(keep, backend_->slice_frames(x, t - 2, t));
    } else if (have_low) {
      SEEDVAE_ASSIGN_OR_RETURN(Tensor last, backend_->slice_frames(low_it->second, 1, 2));
      SEEDVAE_ASSIGN_OR_RETURN(keep, backend_->concat_frames(last, x));
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(keep, backend_->concat_frames(x, x));
    }
  } else if (!(drop && t == 1)) {
    SEEDVAE_ASSIGN_OR_RETURN(keep, backend_->slice_frames(x, t - 1, t));
  }
  Tensor out;
  if (have_low && !temporal && lean_convs_ && !in_place_state() && t >= 4 &&
      low_it->second.shape[2] == 2) {
    // Lean (set_lean_convs): the conv's extended input is [upscale(memory), upscale(x)]; upscale
    // x without room for the context, run the split convolution and upscale the two memory
    // frames one at a time into place.
    const Tensor low_memory = low_it->second;
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, upscale(x, p, false, false, 0));
    x = {};
    SEEDVAE_ASSIGN_OR_RETURN(out, split_context_conv(std::move(y), conv, [&](Tensor& dst) -> Status {
      for (int64_t f = 0; f < 2; ++f) {
        SEEDVAE_ASSIGN_OR_RETURN(Tensor frame, backend_->slice_frames(low_memory, f, f + 1));
        SEEDVAE_ASSIGN_OR_RETURN(Tensor up, upscale(frame, p, false, false, 0));
        SEEDVAE_TRY(backend_->copy_frames_into(dst, f, up, 0, 1));
      }
      return Status::ok();
    }));
  } else if (have_low) {  // a continued stream: never a first chunk, so nothing is dropped
    // The upscale is per frame, so the new frames and the kept ones are upscaled apart and joined
    // by causal_pad, which backends may do in place (the CUDA backend writes the two context
    // frames into spare frames in front of the depth-to-space output). Upscaling [memory, x] in
    // one call would hold the 1x1x1 conv's output and the depth-to-space output of all frames
    // at once: at 1080p in bf16 about 3.4 GiB more at the last upsampler, more than the state
    // this saves (measured on an H100, docs/gpu-notes.md §7).
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, upscale(x, p, temporal, false));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor m, upscale(low_it->second, p, temporal, false));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor ext, backend_->causal_pad(y, &m, static_cast<int>(m.shape[2])));
    y = {};
    m = {};
    SEEDVAE_ASSIGN_OR_RETURN(out, causal_conv(ext, conv, 1, 1, false, state, Memory::kExtended));
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, upscale(x, p, temporal, drop));
    SEEDVAE_ASSIGN_OR_RETURN(out, causal_conv(y, conv, 1, 1, false, state,
                                              keep.defined() ? Memory::kKeepElsewhere
                                                             : Memory::kStore));
  }
  if (in_place) {
    Tensor& slot = state.memory[low];
    if (temporal) {
      SEEDVAE_TRY(backend_->copy_frames_into(slot, 0, x, t - 1, 1));
    } else if (t >= 2) {
      SEEDVAE_TRY(backend_->copy_frames_into(slot, 0, x, t - 2, 2));
    } else {
      SEEDVAE_TRY(backend_->copy_frames_into(slot, 0, slot, 1, 1));
      SEEDVAE_TRY(backend_->copy_frames_into(slot, 1, x, 0, 1));
    }
  } else if (keep.defined()) {
    state.memory.erase(conv);
    SEEDVAE_TRY(keep_memory(state, low, std::move(keep)));
  }
  return out;
}

Result<Tensor> VaeModel::encode_chunk(const Tensor& x, CausalState& state) const {
  return graphed("encoder", x, state,
                 [&](const Tensor& in) { return encode_chunk_eager(in, state); });
}

Result<Tensor> VaeModel::decode_chunk(const Tensor& z, CausalState& state) const {
  return graphed("decoder", z, state,
                 [&](const Tensor& in) { return decode_chunk_eager(in, state); });
}

Result<Tensor> VaeModel::encode_chunk_eager(const Tensor& x, CausalState& state) const {
  // x: [1, 3, T, H, W]
  const auto& c = config_;
  if (x.shape.rank() != 5 || x.shape[1] != c.in_channels) {
    return invalid_argument("encoder input must be [1, " + std::to_string(c.in_channels) +
                            ", T, H, W], got " + x.shape.to_string());
  }
  const int64_t t = x.shape[2];
  const int f = c.temporal_factor();
  if (!state.started ? (t % f != 1 % f) : (t % f != 0)) {
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
  auto head = [&](Tensor piece) { return encoder_head(std::move(piece), state); };
  Tensor h;
  int next_level = first_level;
  if (hires_chunk_frames_ > 0 && first_level < c.levels() - 1) {
    // The first temporal level in pieces around the head's: pairs of frames (its stride-2
    // downsampler makes one frame of each pair, carrying one frame of memory), the first chunk's
    // extra first frame alone.
    const int64_t n = hires_chunk_frames_;
    const int64_t outer = std::max<int64_t>(2, (n + 1) / 2 * 2);
    const int64_t first = !state.started && x.shape[2] % 2 == 1 ? 1 : 0;
    SEEDVAE_ASSIGN_OR_RETURN(h, in_pieces(x, [&](Tensor piece) -> Result<Tensor> {
                               SEEDVAE_ASSIGN_OR_RETURN(Tensor y, in_pieces(std::move(piece), head));
                               return encoder_level(std::move(y), first_level, state);
                             }, first, outer));
    next_level = first_level + 1;
  } else {
    SEEDVAE_ASSIGN_OR_RETURN(h, in_pieces(x, head));
  }
  for (int l = next_level; l < c.levels(); ++l) {
    SEEDVAE_ASSIGN_OR_RETURN(h, encoder_level(std::move(h), l, state));
  }
  SEEDVAE_ASSIGN_OR_RETURN(h, mid_block(h, "encoder.mid_block", state));
  SEEDVAE_TRY(observe("encoder.mid_block", h));
  SEEDVAE_ASSIGN_OR_RETURN(h, norm_conv(std::move(h), "encoder.conv_norm_out", "encoder.conv_out", state));
  SEEDVAE_TRY(observe("encoder.conv_out", h));
  state.started = true;
  return h;
}

Result<Tensor> VaeModel::decode_chunk_eager(const Tensor& z, CausalState& state) const {
  // z: [1, 16, t, h, w]
  const auto& c = config_;
  if (z.shape.rank() != 5 || z.shape[1] != c.latent_channels) {
    return invalid_argument("decoder input must be [1, " + std::to_string(c.latent_channels) +
                            ", t, h, w], got " + z.shape.to_string());
  }
  start_stage_clock();
  SEEDVAE_ASSIGN_OR_RETURN(Tensor h, causal_conv(z, "decoder.conv_in", 1, 1, false, state));
  SEEDVAE_TRY(observe("decoder.conv_in", h));
  SEEDVAE_ASSIGN_OR_RETURN(h, mid_block(h, "decoder.mid_block", state));
  SEEDVAE_TRY(observe("decoder.mid_block", h));
  for (int l = 0; l < c.levels() && c.decoder_temporal_up(l); ++l) {
    SEEDVAE_ASSIGN_OR_RETURN(h, up_block(std::move(h), l, state));
  }
  SEEDVAE_ASSIGN_OR_RETURN(h, in_pieces(std::move(h), [&](Tensor piece) {
                             return decoder_tail(std::move(piece), state);
                           }));
  state.started = true;
  return h;
}

// Decoder levels at full frame rate (after the last temporal upsampling), conv_norm_out, conv_out.
Result<Tensor> VaeModel::decoder_tail(Tensor h, CausalState& state) const {
  const auto& c = config_;
  int l = 0;
  while (l < c.levels() && c.decoder_temporal_up(l)) ++l;
  for (; l < c.levels(); ++l) {
    SEEDVAE_ASSIGN_OR_RETURN(h, up_block(std::move(h), l, state));
  }
  SEEDVAE_ASSIGN_OR_RETURN(h, norm_conv(std::move(h), "decoder.conv_norm_out", "decoder.conv_out", state));
  SEEDVAE_TRY(observe("decoder.conv_out", h));
  return h;
}

// decoder.up_blocks.<l>: its resnets, then its upsampler (all levels but the last).
Result<Tensor> VaeModel::up_block(Tensor h, int l, CausalState& state) const {
  const auto& c = config_;
  const std::string p = "decoder.up_blocks." + std::to_string(l);
  for (int j = 0; j < c.layers_per_block + 1; ++j) {
    SEEDVAE_ASSIGN_OR_RETURN(h, resnet(std::move(h), p + ".resnets." + std::to_string(j), state));
  }
  if (l < c.levels() - 1) {
    SEEDVAE_ASSIGN_OR_RETURN(
        h, upsample(std::move(h), p + ".upsamplers.0", c.decoder_temporal_up(l), state));
  }
  SEEDVAE_TRY(observe(p, h));
  return h;
}

// encoder.down_blocks.<l>: its resnets, then its downsampler (all levels but the last).
Result<Tensor> VaeModel::encoder_level(Tensor h, int l, CausalState& state) const {
  const auto& c = config_;
  const std::string p = "encoder.down_blocks." + std::to_string(l);
  for (int j = 0; j < c.layers_per_block; ++j) {
    SEEDVAE_ASSIGN_OR_RETURN(h, resnet(std::move(h), p + ".resnets." + std::to_string(j), state));
  }
  if (l < c.levels() - 1) {
    const bool temporal = c.encoder_temporal_down(l);
    SEEDVAE_ASSIGN_OR_RETURN(
        h, causal_conv(h, p + ".downsamplers.0.conv", temporal ? 2 : 1, 2, true, state));
  }
  SEEDVAE_TRY(observe(p, h));
  return h;
}

// conv_in and the encoder levels before the first temporal downsampling (all at full frame rate).
Result<Tensor> VaeModel::encoder_head(Tensor x, CausalState& state) const {
  const auto& c = config_;
  SEEDVAE_ASSIGN_OR_RETURN(Tensor h, causal_conv(x, "encoder.conv_in", 1, 1, false, state));
  x = {};
  SEEDVAE_TRY(observe("encoder.conv_in", h));
  for (int l = 0; l < c.levels() - 1 && !c.encoder_temporal_down(l); ++l) {
    const std::string p = "encoder.down_blocks." + std::to_string(l);
    for (int j = 0; j < c.layers_per_block; ++j) {
      SEEDVAE_ASSIGN_OR_RETURN(h, resnet(std::move(h), p + ".resnets." + std::to_string(j), state));
    }
    SEEDVAE_ASSIGN_OR_RETURN(h, causal_conv(h, p + ".downsamplers.0.conv", 1, 2, true, state));
    SEEDVAE_TRY(observe(p, h));
  }
  return h;
}

// ---- CUDA graphs -----------------------------------------------------------------------------

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

void VaeModel::GraphCache::clear() {
  for (auto& [key, rec] : graphs) {
    rec.in = {};
    rec.out = {};
    if (backend != nullptr) backend->release_graph(rec.id);
  }
  graphs.clear();
}

VaeModel::GraphStats VaeModel::graph_stats() const {
  return graph_cache_ ? graph_cache_->stats : GraphStats{};
}

template <typename Run>
Result<Tensor> VaeModel::graphed(std::string_view coder, const Tensor& x, CausalState& state,
                                 Run run) const {
  if (!graphs_on() || !graph_cache_ || !state.started) return run(x);
  GraphCache& cache = *graph_cache_;
  const std::string layout = state_layout(state);
  const std::string shape_layout = std::string(coder) + x.shape.to_string() + "|pieces " +
                                   std::to_string(hires_chunk_frames_) + "|" + layout;
  const std::string addresses = state_addresses(*backend_, state);
  const std::string key = shape_layout + "|" + addresses;
  const int64_t frames = x.shape[2];

  if (auto it = cache.graphs.find(key); it != cache.graphs.end()) {
    GraphCache::Record& rec = it->second;
    const auto wall0 = std::chrono::steady_clock::now();
    const int64_t span = telemetry_ ? backend_->begin_device_span() : -1;
    SEEDVAE_TRY(backend_->copy_frames_into(rec.in, 0, x, 0, frames));
    SEEDVAE_TRY(backend_->launch_graph(rec.id));
    ++cache.stats.replayed;
    if (telemetry_) {
      const double device_ms = backend_->end_device_span(span);
      SEEDVAE_TRY(backend_->synchronize());
      emit_sample(std::string(coder) + ".graph",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0)
                      .count(),
                  device_ms);
    }
    return backend_->slice_frames(rec.out, 0, rec.out.shape[2]);
  }

  if (cache.stable.count(shape_layout) == 0) {
    // First chunk of this shape and layout: eager (autotunes the convolutions); does it keep its
    // state where it is?
    ++cache.stats.eager;
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, run(x));
    if (state_layout(state) == layout &&
        state_addresses(*backend_, state) == addresses) {
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
    return run(x);
  }
  capturing_ = true;
  Tensor out;
  Status run_status = Status::ok();
  {
    Result<Tensor> y = run(in);
    if (y.is_ok()) {
      // a copy inside the recording: any deferred work on the output (a pending bias) is done
      // by the graph itself, and the output's address is the recording's own
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
  capturing_ = false;
  const bool kept_state = state_layout(state) == layout &&
                          state_addresses(*backend_, state) == addresses;
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
    return run(x);
  }
  GraphCache::Record& rec = cache.graphs[key];
  rec.id = id.value();
  rec.in = std::move(in);
  rec.out = std::move(out);
  ++cache.stats.captured;
  SEEDVAE_TRY(backend_->launch_graph(rec.id));
  return backend_->slice_frames(rec.out, 0, rec.out.shape[2]);
}

template <typename Stage>
Result<Tensor> VaeModel::in_pieces(Tensor x, Stage stage, int64_t first_piece,
                                   int64_t piece) const {
  const int64_t t = x.shape[2];
  const int64_t n = piece < 0 ? hires_chunk_frames_ : piece;
  // Chunked upsampling: the stage's memory is read by every piece, so it stays on the device.
  const bool was_piece_stage = piece_stage_;
  piece_stage_ = hires_chunk_frames_ > 0;
  struct Restore {
    bool& flag;
    bool value;
    ~Restore() { flag = value; }
  } restore{piece_stage_, was_piece_stage};
  const bool split = n > 0 && (first_piece > 0 ? t > first_piece : t > n);
  if (!split) return stage(std::move(x));  // x is not held while the stage runs
  // Slice every piece first and drop x, so the whole chunk is not held while the pieces run.
  std::vector<Tensor> pieces;
  for (int64_t b = 0; b < t;) {
    const int64_t len = b == 0 && first_piece > 0 ? first_piece : n;
    SEEDVAE_ASSIGN_OR_RETURN(Tensor p, backend_->slice_frames(x, b, std::min(t, b + len)));
    pieces.push_back(std::move(p));
    b += len;
  }
  x = {};
  Tensor out;
  for (Tensor& p : pieces) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, stage(std::move(p)));
    if (!out.defined()) {
      out = std::move(y);
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(out, backend_->concat_frames(out, y));
    }
  }
  return out;
}

}  // namespace seedvae
