// The Wan2.1 / Wan2.2 networks (wan_model.h; docs/model.md §10). The order of
// operations is written once, in WanModel::Pass; the weights' layout changes for the backend are
// in parameter_shapes() and create().
#include "core/vae/wan_model.h"

#include <algorithm>
#include <cstring>

namespace seedvae {

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// How the model holds a checkpoint tensor: the RMS gains [C, 1, 1(, 1)] as [C], the 2-D
// convolutions [C', C, k, k] as [C', C, 1, k, k], proj [C, C, 1, 1] as [C, C]. to_qkv is split
// (parameter_shapes) and not handled here.
Shape model_shape(const std::string& name, const Shape& s) {
  if (ends_with(name, ".gamma")) return Shape{s[0]};
  if (ends_with(name, ".weight") && s.rank() == 4) {
    if (ends_with(name, ".proj.weight")) return Shape{s[0], s[1]};
    return Shape{s[0], s[1], 1, s[2], s[3]};
  }
  return s;
}

bool is_qkv(const std::string& name) {
  return ends_with(name, ".to_qkv.weight") || ends_with(name, ".to_qkv.bias");
}

}  // namespace

std::vector<WanConfig::Param> WanModel::parameter_shapes(const WanConfig& config) {
  std::vector<WanConfig::Param> out;
  for (const auto& p : config.parameters()) {
    if (is_qkv(p.name)) {
      const bool weight = ends_with(p.name, ".weight");
      const std::string base = p.name.substr(0, p.name.rfind('.'));  // "<block>.to_qkv"
      const int64_t c = p.shape[0] / 3;
      for (const char* part : {"q", "k", "v"}) {
        out.push_back(
            {base + "." + part + (weight ? ".weight" : ".bias"), weight ? Shape{c, c} : Shape{c}});
      }
      continue;
    }
    out.push_back({p.name, model_shape(p.name, p.shape)});
  }
  return out;
}

Result<WanModel> WanModel::create(Backend& backend, const WanConfig& config,
                                  const ParameterFactory& make) {
  SEEDVAE_TRY(config.validate());
  WanModel m;
  m.backend_ = &backend;
  m.config_ = config;
  m.units_ = {"decoder.conv1", "decoder.middle.0", "decoder.middle.1", "decoder.middle.2"};
  int flat = 0;
  for (int i = 0; i < config.levels(); ++i) {
    const int blocks = config.num_res_blocks + 1 + (i != config.levels() - 1 ? 1 : 0);
    if (config.family == VaeFamily::kWan22) {
      m.units_.push_back("decoder.upsamples." + std::to_string(i));
    } else {
      for (int b = 0; b < blocks; ++b)
        m.units_.push_back("decoder.upsamples." + std::to_string(flat++));
    }
  }
  m.units_.push_back("decoder.head");
  for (size_t i = 0; i < m.units_.size(); ++i) m.unit_index_[m.units_[i]] = static_cast<int>(i);
  for (const auto& p : parameter_shapes(config)) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor t, make(p.name, p.shape));
    if (t.shape != p.shape) {
      return invalid_argument("WanModel: parameter " + p.name + " was made as " +
                              t.shape.to_string() + ", expected " + p.shape.to_string());
    }
    m.weights_.emplace(p.name, std::move(t));
  }
  return m;
}

Result<WanModel> WanModel::create(Backend& backend, const VaeWeights& weights) {
  if (!weights.is_wan()) {
    return invalid_argument("WanModel: " + weights.source + " holds a " +
                            std::string(family_name(weights.family)) + " VAE, not a Wan VAE");
  }
  for (const auto& p : weights.wan.parameters()) {
    auto it = weights.tensors.find(p.name);
    if (it == weights.tensors.end()) {
      return invalid_argument("WanModel: the weights have no tensor " + p.name);
    }
    if (it->second.shape() != p.shape) {
      return invalid_argument("WanModel: tensor " + p.name + " is " +
                              it->second.shape().to_string() + ", expected " + p.shape.to_string());
    }
  }
  // Each parameter in the model's layout (parameter_shapes), made on the host when it is
  // uploaded: the same values reshaped, or one of to_qkv's three row blocks.
  return create(
      backend, weights.wan, [&](const std::string& name, const Shape& shape) -> Result<Tensor> {
        std::string source = name;
        int part = -1;
        for (int i = 0; i < 3; ++i) {
          const std::string tag = std::string(".to_qkv.") + "qkv"[i] + ".";
          if (const auto pos = name.find(tag); pos != std::string::npos) {
            source = name.substr(0, pos) + ".to_qkv" + name.substr(pos + tag.size() - 1);
            part = i;
          }
        }
        const HostTensor& t = weights.tensors.at(source);
        const int64_t offset = part < 0 ? 0 : part * shape.numel() * dtype_size(t.dtype());
        const HostTensor h = HostTensor::from_bytes(
            t.dtype(), shape, static_cast<const std::byte*>(t.raw()) + offset);
        return backend.upload_weight(h, name);
      });
}

// ---- one chunk call ----------------------------------------------------------------------------

class WanModel::Pass {
 public:
  Pass(const WanModel& m, CausalState& state, const ChunkOptions& options = {})
      : m_(m), be_(*m.backend_), state_(state), opt_(options) {}

  Result<Tensor> encode(const Tensor& video);
  Result<Tensor> decode(const Tensor& z);

 private:
  const Tensor& w(const std::string& name) const { return m_.weights_.at(name); }
  Status observe(const std::string& stage, const Tensor& t) const {
    return m_.observer_ ? m_.observer_(stage, t) : Status::ok();
  }
  bool first() const { return !state_.started; }
  bool v22() const { return m_.config_.family == VaeFamily::kWan22; }

  // Pointwise (1x1x1) convolution: no state.
  Result<Tensor> pointwise(const std::string& prefix, const Tensor& x, bool output = false) {
    Conv3dParams p;
    p.model_output = output;
    return be_.conv3d(x, w(prefix + ".weight"), w(prefix + ".bias"), p);
  }

  // A causal convolution whose kernel has kT = 3 frames: its memory (the last 2 frames of its
  // extended input, zeros before the stream's first chunk) goes in front, then a plain
  // convolution with the kernel's spatial zero padding.
  Result<Tensor> causal_conv(const std::string& prefix, const Tensor& x, bool output = false) {
    const Tensor& weight = w(prefix + ".weight");
    const int ctx = static_cast<int>(weight.shape[2]) - 1;
    Tensor& mem = state_.memory[prefix];
    if (!mem.defined()) {
      SEEDVAE_ASSIGN_OR_RETURN(
          mem, be_.zeros(Shape{x.shape[0], x.shape[1], ctx, x.shape[3], x.shape[4]}));
    }
    SEEDVAE_ASSIGN_OR_RETURN(Tensor ext, be_.causal_pad(x, &mem, 0));
    mem = {};  // ext holds a copy: the old memory goes before the new one is sliced
    SEEDVAE_ASSIGN_OR_RETURN(mem, be_.slice_frames(ext, ext.shape[2] - ctx, ext.shape[2]));
    SEEDVAE_TRY(hint(prefix));
    Conv3dParams p;
    p.pad_top = p.pad_bottom = static_cast<int>(weight.shape[3] / 2);
    p.pad_left = p.pad_right = static_cast<int>(weight.shape[4] / 2);
    p.model_output = output;
    return be_.conv3d(ext, weight, w(prefix + ".bias"), p);
  }

  Result<Tensor> norm(const std::string& gamma, const Tensor& x, bool silu) {
    // every SiLU output here feeds a causal convolution (2 frames of context)
    return be_.rms_norm(x, w(gamma), {.silu = silu, .context_frames = silu ? 2 : 0});
  }

  // ResidualBlock: [shortcut(x) or x] + conv(silu(norm(conv(silu(norm(x)))))).
  Result<Tensor> residual_block(const std::string& p, const Tensor& x) {
    Tensor h = x;
    if (m_.weights_.count(p + ".shortcut.weight")) {
      SEEDVAE_ASSIGN_OR_RETURN(h, pointwise(p + ".shortcut", x));
    }
    SEEDVAE_ASSIGN_OR_RETURN(Tensor r, norm(p + ".residual.0.gamma", x, true));
    SEEDVAE_ASSIGN_OR_RETURN(r, causal_conv(p + ".residual.2", r));
    SEEDVAE_ASSIGN_OR_RETURN(r, norm(p + ".residual.3.gamma", r, true));
    SEEDVAE_ASSIGN_OR_RETURN(r, causal_conv(p + ".residual.6", r));
    SEEDVAE_TRY(be_.add_inplace(r, h));
    return r;
  }

  Result<Tensor> attention(const std::string& p, const Tensor& x) {
    RmsAttentionWeights a{
        w(p + ".norm.gamma"),      w(p + ".to_qkv.q.weight"), w(p + ".to_qkv.q.bias"),
        w(p + ".to_qkv.k.weight"), w(p + ".to_qkv.k.bias"),   w(p + ".to_qkv.v.weight"),
        w(p + ".to_qkv.v.bias"),   w(p + ".proj.weight"),     w(p + ".proj.bias")};
    return be_.rms_attention(x, a);
  }

  Result<Tensor> middle(const std::string& p, const Tensor& x) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor h, residual_block(p + ".0", x));
    SEEDVAE_ASSIGN_OR_RETURN(h, attention(p + ".1", h));
    return residual_block(p + ".2", h);
  }

  Result<Tensor> head(const std::string& p, const Tensor& x, bool output) {
    SEEDVAE_ASSIGN_OR_RETURN(Tensor h, norm(p + ".0.gamma", x, true));
    return causal_conv(p + ".2", h, output);
  }

  // downsample2d (ZeroPad2d(0, 1, 0, 1), 3x3 stride 2, per frame), then for downsample3d the
  // stride-2 time_conv over [last frame of the previous chunk, x]; on the first chunk frame 0
  // passes and the conv covers frames 1.. (whole-sequence form: out[j] = conv(in[2j-2 .. 2j])).
  Result<Tensor> downsample(const std::string& p, const Tensor& x) {
    Conv3dParams sp;
    sp.stride_h = sp.stride_w = 2;
    sp.pad_bottom = sp.pad_right = 1;
    SEEDVAE_ASSIGN_OR_RETURN(
        Tensor y, be_.conv3d(x, w(p + ".resample.1.weight"), w(p + ".resample.1.bias"), sp));
    const std::string tc = p + ".time_conv";
    if (!m_.weights_.count(tc + ".weight")) return y;
    const int64_t t = y.shape[2];
    Conv3dParams tp;
    tp.stride_t = 2;
    Tensor out;
    if (first()) {
      if (t % 2 != 1) {
        return invalid_argument(p + ": a first chunk needs an odd frame count here, got " +
                                y.shape.to_string());
      }
      SEEDVAE_ASSIGN_OR_RETURN(out, be_.slice_frames(y, 0, 1));
      if (t >= 3) {
        SEEDVAE_ASSIGN_OR_RETURN(Tensor c, be_.conv3d(y, w(tc + ".weight"), w(tc + ".bias"), tp));
        SEEDVAE_ASSIGN_OR_RETURN(out, be_.concat_frames(out, c));
      }
    } else {
      if (t % 2 != 0) {
        return invalid_argument(p + ": a later chunk needs an even frame count here, got " +
                                y.shape.to_string());
      }
      Tensor& mem = state_.memory[tc];
      if (!mem.defined()) return internal_error(tc + ": a continued stream without its memory");
      SEEDVAE_ASSIGN_OR_RETURN(Tensor ext, be_.causal_pad(y, &mem, 0));
      SEEDVAE_ASSIGN_OR_RETURN(out, be_.conv3d(ext, w(tc + ".weight"), w(tc + ".bias"), tp));
    }
    SEEDVAE_ASSIGN_OR_RETURN(state_.memory[tc], be_.slice_frames(y, t - 1, t));
    SEEDVAE_TRY(hint(tc));
    return out;
  }

  // upsample3d: the causal time_conv C -> 2C (2 frames of memory) whose halves become two frames;
  // on the first chunk frame 0 bypasses it and frames 1.. see zero history. Then (both modes)
  // nearest 2x and the 3x3 conv per frame.
  Result<Tensor> upsample(const std::string& p, const Tensor& x) {
    Tensor y = x;
    const std::string tc = p + ".time_conv";
    if (m_.weights_.count(tc + ".weight")) {
      if (first()) {
        SEEDVAE_ASSIGN_OR_RETURN(y, be_.slice_frames(x, 0, 1));
        if (x.shape[2] > 1) {
          SEEDVAE_ASSIGN_OR_RETURN(Tensor rest, be_.slice_frames(x, 1, x.shape[2]));
          SEEDVAE_ASSIGN_OR_RETURN(Tensor c, causal_conv(tc, rest));
          SEEDVAE_ASSIGN_OR_RETURN(c, be_.frames_from_channels(c, 2));
          SEEDVAE_ASSIGN_OR_RETURN(y, be_.concat_frames(y, c));
        }
      } else {
        SEEDVAE_ASSIGN_OR_RETURN(Tensor c, causal_conv(tc, x));
        SEEDVAE_ASSIGN_OR_RETURN(y, be_.frames_from_channels(c, 2));
      }
    }
    SEEDVAE_ASSIGN_OR_RETURN(Tensor u, be_.upsample_nearest(y));
    y = {};
    Conv3dParams sp;
    sp.pad_top = sp.pad_bottom = sp.pad_left = sp.pad_right = 1;
    return be_.conv3d(u, w(p + ".resample.1.weight"), w(p + ".resample.1.bias"), sp);
  }

  Result<Tensor> decode_level(int i, Tensor x);

  // Whether decoder level i's upsampler doubles the frame rate (its time_conv).
  bool upsamples_in_time(int i) const {
    const WanConfig& c = m_.config_;
    return i != c.levels() - 1 &&
           c.temporal_downsample[c.temporal_downsample.size() - 1 - static_cast<size_t>(i)];
  }

  // Chunked high-resolution stages (ChunkOptions::hires_chunk_frames): `stage` on pieces of at
  // most that many frames of x, one after another, their causal memory carried from piece to
  // piece (run_in_pieces). With chunked upsampling on, the stage's memory is read by every piece
  // and never offloaded (the stage needs all of it at once anyway, so offloading it between
  // chunks would not lower the peak).
  template <typename Stage>
  Result<Tensor> in_pieces(Tensor x, Stage stage) {
    pieces_ = opt_.hires_chunk_frames > 0;
    return run_in_pieces(be_, std::move(x), 0, opt_.hires_chunk_frames, stage);
  }

  // Whether the decoder unit `unit` runs in this call (ChunkOptions::first_unit / end_unit).
  bool runs(const std::string& unit) const {
    if (opt_.whole_decoder()) return true;
    const auto it = m_.unit_index_.find(unit);
    return it == m_.unit_index_.end() ||
           (it->second >= opt_.first_unit && (opt_.end_unit < 0 || it->second < opt_.end_unit));
  }

  // A causal memory (state key) kept for the next chunk and not read again in this one: the
  // backend may move it off the device until then (Backend::offload_hint, --offload-state),
  // except inside the piece stages, whose memory the next piece reads.
  Status hint(const std::string& key) {
    return pieces_ ? Status::ok() : be_.offload_hint(state_.memory[key]);
  }

  const WanModel& m_;
  Backend& be_;
  CausalState& state_;
  const ChunkOptions& opt_;
  bool pieces_ = false;  // inside in_pieces() with chunked upsampling on
};

Result<Tensor> WanModel::Pass::encode(const Tensor& video) {
  const WanConfig& c = m_.config_;
  const int n = c.levels();
  Tensor x = video;
  if (v22()) {
    SEEDVAE_ASSIGN_OR_RETURN(x, be_.patchify(video, c.patch_size));
  }
  SEEDVAE_ASSIGN_OR_RETURN(x, causal_conv("encoder.conv1", x));
  int flat = 0;  // Wan2.1: one flat list of blocks
  for (int i = 0; i < n; ++i) {
    const bool down = i != n - 1;
    const bool temporal = down && c.temporal_downsample[static_cast<size_t>(i)];
    const std::string level = "encoder.downsamples." + std::to_string(i);
    Tensor in = x;  // Wan2.2's AvgDown3D shortcut reads the level's input
    std::string last;
    for (int r = 0; r < c.num_res_blocks; ++r) {
      last = v22() ? level + ".downsamples." + std::to_string(r)
                   : "encoder.downsamples." + std::to_string(flat++);
      SEEDVAE_ASSIGN_OR_RETURN(x, residual_block(last, x));
    }
    if (down) {
      last = v22() ? level + ".downsamples." + std::to_string(c.num_res_blocks)
                   : "encoder.downsamples." + std::to_string(flat++);
      SEEDVAE_ASSIGN_OR_RETURN(x, downsample(last, x));
    }
    if (v22()) {
      const int ft = temporal ? 2 : 1, fs = down ? 2 : 1;
      if (ft * fs > 1 || in.shape[1] != x.shape[1]) {
        SEEDVAE_ASSIGN_OR_RETURN(
            Tensor s, be_.avg_down(in, {.out_channels = x.shape[1], .ft = ft, .fs = fs}));
        SEEDVAE_TRY(be_.add_inplace(x, s));
      } else {
        SEEDVAE_TRY(be_.add_inplace(x, in));  // AvgDown3D(C, C, 1, 1) is the identity
      }
      last = level;
    }
    in = {};
    SEEDVAE_TRY(observe("encoder.level" + std::to_string(i) + "(" +
                            last.substr(std::string("encoder.").size()) + ")",
                        x));
  }
  SEEDVAE_ASSIGN_OR_RETURN(x, middle("encoder.middle", x));
  SEEDVAE_TRY(observe("encoder.middle(middle.2)", x));
  SEEDVAE_ASSIGN_OR_RETURN(x, head("encoder.head", x, false));
  SEEDVAE_TRY(observe("encoder.head(head.2)", x));
  return pointwise("conv1", x, /*output=*/true);
}

Result<Tensor> WanModel::Pass::decode(const Tensor& z) {
  const WanConfig& c = m_.config_;
  const int n = c.levels();
  Tensor x = z;
  if (runs("decoder.conv1")) {
    SEEDVAE_ASSIGN_OR_RETURN(x, pointwise("conv2", z));
    SEEDVAE_TRY(observe("conv2", x));
    SEEDVAE_ASSIGN_OR_RETURN(x, causal_conv("decoder.conv1", x));
    SEEDVAE_TRY(observe("decoder.conv1", x));
  }
  if (opt_.whole_decoder()) {
    SEEDVAE_ASSIGN_OR_RETURN(x, middle("decoder.middle", x));
    SEEDVAE_TRY(observe("decoder.middle(middle.2)", x));
  } else {  // a share of the decoder: the middle's units one by one
    if (runs("decoder.middle.0")) {
      SEEDVAE_ASSIGN_OR_RETURN(x, residual_block("decoder.middle.0", x));
    }
    if (runs("decoder.middle.1")) {
      SEEDVAE_ASSIGN_OR_RETURN(x, attention("decoder.middle.1", x));
    }
    if (runs("decoder.middle.2")) {
      SEEDVAE_ASSIGN_OR_RETURN(x, residual_block("decoder.middle.2", x));
    }
  }
  // Levels from the first after the last temporal upsampling run at the full frame rate: with
  // ChunkOptions::hires_chunk_frames they (and the head) run on pieces of frames.
  int hires_level = n;
  while (hires_level > 0 && !upsamples_in_time(hires_level - 1)) --hires_level;
  for (int i = 0; i < hires_level; ++i) {
    SEEDVAE_ASSIGN_OR_RETURN(x, decode_level(i, std::move(x)));
  }
  return in_pieces(std::move(x), [&](Tensor piece) -> Result<Tensor> {
    for (int i = hires_level; i < n; ++i) {
      SEEDVAE_ASSIGN_OR_RETURN(piece, decode_level(i, std::move(piece)));
    }
    if (!runs("decoder.head")) return piece;
    SEEDVAE_ASSIGN_OR_RETURN(piece, head("decoder.head", piece, /*output=*/!v22()));
    if (v22()) return be_.unpatchify(piece, c.patch_size);
    return piece;
  });
}

// Decoder level i: its residual blocks, its upsampler (all but the last level) and, for Wan2.2,
// the DupUp3D shortcut from the level's input.
Result<Tensor> WanModel::Pass::decode_level(int i, Tensor x) {
  const WanConfig& c = m_.config_;
  const int n = c.levels();
  const bool up = i != n - 1;
  const bool temporal = upsamples_in_time(i);
  const std::string level = "decoder.upsamples." + std::to_string(i);
  if (v22() && !runs(level)) return x;
  int flat = 0;  // Wan2.1: one flat list of blocks, this level's first
  for (int j = 0; j < i; ++j) flat += c.num_res_blocks + 1 + (j != n - 1 ? 1 : 0);
  Tensor in = x;  // Wan2.2's DupUp3D shortcut reads the level's input
  std::string last;
  bool ran = v22();
  for (int r = 0; r < c.num_res_blocks + 1; ++r) {
    last = v22() ? level + ".upsamples." + std::to_string(r)
                 : "decoder.upsamples." + std::to_string(flat++);
    if (!runs(last)) continue;
    SEEDVAE_ASSIGN_OR_RETURN(x, residual_block(last, x));
    ran = true;
  }
  if (up) {
    last = v22() ? level + ".upsamples." + std::to_string(c.num_res_blocks + 1)
                 : "decoder.upsamples." + std::to_string(flat++);
    if (runs(last)) {
      SEEDVAE_ASSIGN_OR_RETURN(x, upsample(last, x));
      ran = true;
    }
  }
  if (!ran) return x;
  if (v22()) {
    if (up) {
      SEEDVAE_ASSIGN_OR_RETURN(Tensor s, be_.dup_up(in, {.out_channels = x.shape[1],
                                                         .ft = temporal ? 2 : 1,
                                                         .fs = 2,
                                                         .drop_first = first()}));
      SEEDVAE_TRY(be_.add_inplace(x, s));
    }
    last = level;
  }
  in = {};
  SEEDVAE_TRY(observe(
      "decoder.level" + std::to_string(i) + "(" + last.substr(std::string("decoder.").size()) + ")",
      x));
  return x;
}

Result<Tensor> WanModel::encode_chunk(const Tensor& x, CausalState& state,
                                      const ChunkOptions& options) {
  (void)options;  // the encoder runs each chunk whole (video_vae.h)
  const Shape& s = x.shape;
  const int sf = spatial_factor(), tf = temporal_factor();
  if (s.rank() != 5 || s[0] != 1 || s[1] != config_.in_channels || s[3] < sf || s[4] < sf ||
      s[3] % sf != 0 || s[4] % sf != 0) {
    return invalid_argument(std::string(family_name(config_.family)) +
                            " encode: input must be [1, " + std::to_string(config_.in_channels) +
                            ", T, H, W] with H and W multiples of " + std::to_string(sf) +
                            ", got " + s.to_string());
  }
  const bool first = !state.started;
  if (s[2] < 1 || (first ? (s[2] - 1) % tf : s[2] % tf) != 0) {
    return invalid_argument(std::string(family_name(config_.family)) + " encode: a " +
                            (first ? "first chunk needs 4k+1" : "later chunk needs 4k") +
                            " frames, got " + std::to_string(s[2]));
  }
  Pass pass(*this, state);
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, pass.encode(x));
  state.started = true;
  return y;
}

// head.2; per level from the last: the upsampler (its per-frame 2-D convolution, then, when
// temporal, the frame doubling of time_conv's channels and time_conv itself, 3 taps at the lower
// rate) and the level's residual blocks (two 3-tap convolutions each); the middle's two residual
// blocks; decoder.conv1 (conv2 is pointwise).
int64_t WanModel::decoder_reach() const {
  const WanConfig& c = config_;
  std::vector<ReachStep> steps{{2, false}};
  for (int i = c.levels() - 1; i >= 0; --i) {
    const bool up = i != c.levels() - 1;
    const bool temporal =
        up && c.temporal_downsample[c.temporal_downsample.size() - 1 - static_cast<size_t>(i)];
    if (temporal) {
      steps.push_back({0, true});
      steps.push_back({2, false});
    }
    for (int r = 0; r < 2 * (c.num_res_blocks + 1); ++r) steps.push_back({2, false});
  }
  for (int j = 0; j < 4; ++j) steps.push_back({2, false});
  steps.push_back({2, false});
  return decoder_reach_of(steps, c.temporal_factor());
}

Result<Tensor> WanModel::decode_chunk(const Tensor& z, CausalState& state,
                                      const ChunkOptions& options) {
  const Shape& s = z.shape;
  const int units = static_cast<int>(units_.size());
  if (options.first_unit < 0 || options.first_unit >= units || options.end_unit > units ||
      (options.end_unit >= 0 && options.end_unit <= options.first_unit)) {
    return invalid_argument("decoder units [" + std::to_string(options.first_unit) + ", " +
                            std::to_string(options.end_unit) + ") of " + std::to_string(units));
  }
  if (s.rank() != 5 || s[0] != 1 || (options.first_unit == 0 && s[1] != config_.z_dim) ||
      s[2] < 1) {
    return invalid_argument(std::string(family_name(config_.family)) +
                            " decode: latent must be [1, " + std::to_string(config_.z_dim) +
                            ", t >= 1, h, w], got " + s.to_string());
  }
  Pass pass(*this, state, options);
  SEEDVAE_ASSIGN_OR_RETURN(Tensor y, pass.decode(z));
  state.started = true;
  return y;
}

}  // namespace seedvae
