#include "core/schedule/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/schedule/streaming.h"

namespace seedvae {

BackendMemoryModel BackendMemoryModel::cpu() {
  return BackendMemoryModel{};
}

BackendMemoryModel BackendMemoryModel::cuda() {
  BackendMemoryModel m;
  m.name = "cuda";
  m.conv_input_copies = 0.0;
  m.conv_output_copies = 0.0;
  m.conv_weight_copies = 1.0;
  m.attention_buffers = false;  // flash-style kernel: O(tokens x head_dim) scratch
  m.fixed_bytes = 512ll << 20;  // CUDA context, cuDNN/cuBLAS workspaces (to be calibrated)
  m.exact_host_overhead = 0.5;  // PCIe transfers of every layer's tiles (to be calibrated)
  return m;
}

std::string format_bytes(int64_t b) {
  char buf[64];
  const double v = static_cast<double>(b);
  if (v >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1024.0 * 1024 * 1024));
  } else if (v >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1024.0 * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024.0);
  }
  return buf;
}

std::string describe(const PlanEstimate& e) {
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "tile %lldx%lld px, chunk %d latent(s), %lld tile(s): peak %s (weights %s, "
                "activations %s at %s), host %s, time x%.2f of untiled%s",
                static_cast<long long>(e.spec.tile_w), static_cast<long long>(e.spec.tile_h),
                e.chunk_latents, static_cast<long long>(e.tiles),
                format_bytes(e.peak_bytes).c_str(), format_bytes(e.weight_bytes).c_str(),
                format_bytes(e.activation_peak_bytes).c_str(), e.peak_at.c_str(),
                format_bytes(e.host_bytes).c_str(), e.relative_time,
                e.fits ? "" : " (over budget)");
  return buf;
}

namespace {

struct A {  // activation shape without N (= 1)
  int64_t c = 0, t = 0, h = 0, w = 0;
  int64_t n() const { return c * t * h * w; }
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Replays allocations in program order on shapes only.
class Sim {
 public:
  Sim(const PlanRequest& r)
      : es_(r.activation_bytes), bm_(r.backend), hires_(r.hires_chunk_frames) {}

  int64_t live = 0, peak = 0;
  std::string peak_at;
  double flops = 0;
  bool started = false;
  std::map<std::string, A> memory;  // causal memory per conv (device)

  int64_t bytes(const A& a) const { return a.n() * es_; }
  void alloc(int64_t b, const std::string& at) {
    live += b;
    if (live > peak) {
      peak = live;
      peak_at = at;
    }
  }
  void release(int64_t b) { live -= b; }
  void transient(int64_t b, const std::string& at) {
    if (live + b > peak) {
      peak = live + b;
      peak_at = at;
    }
  }
  int64_t memory_bytes() const {
    int64_t n = 0;
    for (const auto& [k, a] : memory) n += bytes(a);
    return n;
  }

  // Blocked-layout copies a backend makes around a convolution.
  int64_t conv_temps(const A& x, const A& y) const {
    double t = 0;
    if (x.c % 16 == 0) t += bm_.conv_input_copies * static_cast<double>(bytes(x));
    if (y.c % 16 == 0) t += bm_.conv_output_copies * static_cast<double>(bytes(y));
    return static_cast<int64_t>(t);
  }

  // conv3d without temporal padding; allocates the output.
  A conv(const A& x, int64_t cout, int kt, int k, int st, int s, bool down, const std::string& at) {
    return conv_padded(x, cout, kt, k, st, s, down ? 0 : k / 2, down ? 1 : k / 2, at);
  }
  A conv_padded(const A& x, int64_t cout, int kt, int k, int st, int s, int64_t pt, int64_t pb,
                const std::string& at) {
    A y{cout, (x.t - kt) / st + 1, (x.h + pt + pb - k) / s + 1, (x.w + pt + pb - k) / s + 1};
    alloc(bytes(y), at);
    transient(conv_temps(x, y), at);
    flops += 2.0 * static_cast<double>(x.c * kt * k * k) * static_cast<double>(y.n());
    return y;
  }

  // VaeModel::causal_conv.
  A causal_conv(const A& x, const std::string& key, int64_t cout, int kt, int k, int st, int s,
                bool down, bool store_memory = true) {
    if (kt == 1) return conv(x, cout, 1, k, 1, s, down, key);
    // as VaeModel: a conv uses its memory whenever it has one (also between high-res pieces)
    const auto mem = memory.find(key);
    const int64_t ctx = mem != memory.end() ? mem->second.t : kt - 1;
    const A ext{x.c, ctx + x.t, x.h, x.w};
    alloc(bytes(ext), key);
    const int64_t keep = kt - st;
    if (keep > 0 && store_memory) {
      // as VaeModel: the old memory goes before the new one is sliced
      if (auto it = memory.find(key); it != memory.end()) release(bytes(it->second));
      const A m{x.c, keep, x.h, x.w};
      alloc(bytes(m), key);
      memory[key] = m;
    }
    const A y = conv(ext, cout, kt, k, st, s, down, key);
    release(bytes(ext));
    return y;
  }

  A norm(const A& x, const std::string& at) {
    alloc(bytes(x), at);
    return x;
  }

  A resnet(const A& x, int64_t cout, const std::string& p) {
    const A h = norm(x, p + ".norm1");
    const A h1 = causal_conv(h, p + ".conv1", cout, 3, 3, 1, 1, false);
    release(bytes(h));
    const A h2 = norm(h1, p + ".norm2");
    release(bytes(h1));
    const A y = causal_conv(h2, p + ".conv2", cout, 3, 3, 1, 1, false);
    release(bytes(h2));
    if (x.c != cout) {
      const A s = conv(x, cout, 1, 1, 1, 1, false, p + ".conv_shortcut");
      release(bytes(s));
    }
    return y;
  }

  int64_t attention_temps(const A& x) const {
    if (!bm_.attention_buffers) return 0;
    const int64_t tokens = x.h * x.w;
    const int64_t block =
        std::min<int64_t>(tokens, std::max<int64_t>(64, (int64_t{1} << 22) / tokens));
    return 4 * (x.n() + 4 * tokens * x.c + block * tokens);
  }

  A attention(const A& x, const std::string& at) {
    alloc(bytes(x), at);
    transient(attention_temps(x), at);
    const double n = static_cast<double>(x.h * x.w);
    flops += static_cast<double>(x.t) *
             (8.0 * n * static_cast<double>(x.c * x.c) + 4.0 * n * n * static_cast<double>(x.c));
    return x;
  }

  // VaeModel::upsample, with the conv's memory kept before the upscale.
  A upsample(const A& x, bool temporal, const std::string& p) {
    const int r = temporal ? 8 : 4;
    const std::string conv_key = p + ".conv", low_key = p + ".upscale_conv";
    const bool drop = temporal && !started;
    auto upscale = [&](const A& in, bool drop_1) {
      const A y = conv(in, r * in.c, 1, 1, 1, 1, false, low_key);
      const A d{in.c, in.t * (temporal ? 2 : 1) - (drop_1 ? 1 : 0), 2 * in.h, 2 * in.w};
      alloc(bytes(d), p + ".depth_to_space");
      release(bytes(y));
      return d;
    };
    const auto low = memory.find(low_key);
    const bool have_low = low != memory.end();
    bool keep = true;
    const A kept{x.c, temporal ? 1 : 2, x.h, x.w};
    if (!temporal && x.t < 2 && have_low) {
      const A last{x.c, 1, x.h, x.w};  // slice_frames, then concat_frames
      alloc(bytes(last), "slice_frames");
      alloc(bytes(kept), "concat_frames");
      release(bytes(last));
    } else if (!temporal || !(drop && x.t == 1)) {
      alloc(bytes(kept), temporal || x.t >= 2 ? "slice_frames" : "concat_frames");
    } else {
      keep = false;
    }
    A out;
    if (have_low) {  // x and the kept frames upscaled apart, joined by causal_pad
      const A y = upscale(x, false);
      const A m = upscale(low->second, false);
      const A ext{y.c, m.t + y.t, y.h, y.w};
      alloc(bytes(ext), conv_key);
      release(bytes(y));
      release(bytes(m));
      out = conv(ext, x.c, 3, 3, 1, 1, false, conv_key);
      release(bytes(ext));
    } else {
      const A d = upscale(x, drop);
      out = causal_conv(d, conv_key, x.c, 3, 3, 1, 1, false, !keep);
      release(bytes(d));
    }
    if (keep) {
      for (const std::string& k : {conv_key, low_key}) {
        if (auto it = memory.find(k); it != memory.end()) {
          release(bytes(it->second));
          memory.erase(it);
        }
      }
      memory[low_key] = kept;
    }
    return out;
  }

  // One VaeModel::decode_chunk / encode_chunk with the input upload and output release of
  // run_stream (and of the blend scheduler, which holds the same).
  void decode_chunk(const VaeConfig& c, const A& z) {
    const auto& ch = c.block_out_channels;
    std::vector<int64_t> rev(ch.rbegin(), ch.rend());
    alloc(bytes(z), "upload");
    A h = causal_conv(z, "decoder.conv_in", rev[0], 3, 3, 1, 1, false);
    A n = resnet(h, rev[0], "decoder.mid_block.resnets.0");
    release(bytes(h));
    h = attention(n, "decoder.mid_block.attentions.0");
    release(bytes(n));
    n = resnet(h, rev[0], "decoder.mid_block.resnets.1");
    release(bytes(h));
    h = n;
    int split = 0;  // VaeModel::decode_chunk: levels before it run on the chunk, the rest in pieces
    while (split < c.levels() && c.decoder_temporal_up(split)) ++split;
    auto up_block = [&](A x, int l) {  // consumes x
      const std::string p = "decoder.up_blocks." + std::to_string(l);
      for (int j = 0; j < c.layers_per_block + 1; ++j) {
        const A y = resnet(x, rev[static_cast<size_t>(l)], p + ".resnets." + std::to_string(j));
        release(bytes(x));
        x = y;
      }
      if (l < c.levels() - 1) {
        const A y = upsample(x, c.decoder_temporal_up(l), p + ".upsamplers.0");
        release(bytes(x));
        x = y;
      }
      return x;
    };
    for (int l = 0; l < split; ++l) h = up_block(h, l);
    h = in_pieces(h, true, [&](A x, bool) {  // the decoder's input is always its own
      for (int l = split; l < c.levels(); ++l) x = up_block(x, l);
      const A nx = norm(x, "decoder.conv_norm_out");
      release(bytes(x));
      const A y = causal_conv(nx, "decoder.conv_out", c.out_channels, 3, 3, 1, 1, false);
      release(bytes(nx));
      return y;
    });
    release(bytes(z));
    release(bytes(h));
    started = true;
  }

  // VaeModel::in_pieces: stage(input, consume) returns its output and releases its input when
  // `consume`. `owned`: x is released once consumed; otherwise someone else holds it (the
  // upload), so only the piece copies are released.
  // `first_piece` > 0: a first piece of that many frames, then `piece` (default hires_) each.
  template <typename Stage>
  A in_pieces(const A& x, bool owned, Stage stage, int64_t first_piece = 0, int64_t piece = -1) {
    const int64_t n = piece < 0 ? hires_ : piece;
    const bool split = n > 0 && (first_piece > 0 ? x.t > first_piece : x.t > n);
    if (!split) return stage(x, owned);
    std::vector<A> pieces;
    for (int64_t b = 0; b < x.t;) {
      const int64_t len = b == 0 && first_piece > 0 ? first_piece : n;
      pieces.push_back({x.c, std::min<int64_t>(len, x.t - b), x.h, x.w});
      alloc(bytes(pieces.back()), "slice_frames");
      b += len;
    }
    if (owned) release(bytes(x));
    A out;
    for (const A& pc : pieces) {
      const A y = stage(pc, true);
      if (out.t == 0) {
        out = y;
      } else {
        const A cat{out.c, out.t + y.t, out.h, out.w};
        alloc(bytes(cat), "concat_frames");
        release(bytes(out));
        release(bytes(y));
        out = cat;
      }
    }
    return out;
  }

  void encode_chunk(const VaeConfig& c, const A& x) {
    const auto& ch = c.block_out_channels;
    alloc(bytes(x), "upload");
    int split = 0;  // VaeModel::encode_chunk: levels before it run in pieces (encoder_head)
    while (split < c.levels() - 1 && !c.encoder_temporal_down(split)) ++split;
    auto down_block = [&](A in, int l) {  // consumes in
      const std::string p = "encoder.down_blocks." + std::to_string(l);
      for (int j = 0; j < c.layers_per_block; ++j) {
        const A y = resnet(in, ch[static_cast<size_t>(l)], p + ".resnets." + std::to_string(j));
        release(bytes(in));
        in = y;
      }
      if (l < c.levels() - 1) {
        const bool temporal = c.encoder_temporal_down(l);
        const A y = causal_conv(in, p + ".downsamplers.0.conv", ch[static_cast<size_t>(l)],
                                temporal ? 3 : 1, 3, temporal ? 2 : 1, 2, true);
        release(bytes(in));
        in = y;
      }
      return in;
    };
    auto head = [&](A in, bool consume) {
      A y = causal_conv(in, "encoder.conv_in", ch[0], 3, 3, 1, 1, false);
      if (consume) release(bytes(in));
      for (int l = 0; l < split; ++l) y = down_block(y, l);
      return y;
    };
    A h;
    int next = split;
    if (hires_ > 0 && split < c.levels() - 1) {  // VaeModel: the first temporal level in pairs
      const int64_t outer = std::max<int64_t>(2, (hires_ + 1) / 2 * 2);
      const int64_t first = !started && x.t % 2 == 1 ? 1 : 0;
      h = in_pieces(
          x, false,
          [&](A in, bool consume) { return down_block(in_pieces(in, consume, head), split); },
          first, outer);
      next = split + 1;
    } else {
      h = in_pieces(x, false, head);
    }
    A n;
    for (int l = next; l < c.levels(); ++l) h = down_block(h, l);
    const int64_t top = ch.back();
    n = resnet(h, top, "encoder.mid_block.resnets.0");
    release(bytes(h));
    h = attention(n, "encoder.mid_block.attentions.0");
    release(bytes(n));
    n = resnet(h, top, "encoder.mid_block.resnets.1");
    release(bytes(h));
    h = norm(n, "encoder.conv_norm_out");
    release(bytes(n));
    n = causal_conv(h, "encoder.conv_out", 2 * c.latent_channels, 3, 3, 1, 1, false);
    release(bytes(h));
    release(bytes(x));
    release(bytes(n));
    started = true;
  }

  int64_t es() const { return es_; }
  const BackendMemoryModel& bm() const { return bm_; }

 private:
  int64_t es_;
  const BackendMemoryModel& bm_;
  int64_t hires_ = 0;
};

// Weight bytes on the backend: every parameter (VaeModel uploads encoder and decoder), plus the
// packed copies a backend makes of the convolution weights it runs (the decoder's for decode, the
// encoder's for encode; none of the model's in exact mode, which runs its own per-layer uploads).
int64_t model_weight_bytes(const PlanRequest& r, double packs = 1.0) {
  const std::string side = r.op == PlanOp::kEncode ? "encoder." : "decoder.";
  double b = 0;
  for (const auto& p : r.config.parameters()) {
    const double n = static_cast<double>(p.shape.numel() * r.weight_bytes);
    const bool packed =
        r.mode != TilingMode::kExact && p.shape.rank() == 5 && p.name.rfind(side, 0) == 0;
    b += packed ? n * (1.0 + packs * (r.backend.conv_weight_copies - 1.0)) : n;
  }
  return static_cast<int64_t>(b);
}

// The chunks of the clip (latent ranges) and their sizes.
std::vector<int64_t> chunk_sizes(int64_t latents, int chunk) {
  std::vector<int64_t> s;
  for (const auto& [b, e] : plan_chunks(latents, chunk)) s.push_back(e - b);
  return s;
}

struct StreamResult {
  int64_t peak = 0;
  std::string peak_at;
  double flops = 0;
  int64_t memory_bytes = 0;  // causal state at the end
};

// Streams the clip through the model on a (h, w)-latent region: peak over the first two chunks
// (the first is the largest, the second has every causal memory live), FLOPs of all chunks.
StreamResult simulate_stream(const PlanRequest& r, int64_t lh, int64_t lw, int chunk) {
  const VaeConfig& c = r.config;
  const int tf = c.temporal_factor(), sf = c.spatial_factor();
  const int64_t latents = (r.frames - 1) / tf + 1;
  const auto sizes = chunk_sizes(latents, chunk);
  Sim sim(r);
  StreamResult out;
  double flops_second = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i >= 2 && i + 1 < sizes.size() && sizes[i] == sizes[1]) {
      out.flops += flops_second;  // a middle chunk repeats the second exactly
      continue;
    }
    const double before = sim.flops;
    if (r.op == PlanOp::kDecode) {
      sim.decode_chunk(c, A{c.latent_channels, sizes[i], lh, lw});
    } else {
      const int64_t frames = i == 0 ? (sizes[i] - 1) * tf + 1 : sizes[i] * tf;
      sim.encode_chunk(c, A{c.in_channels, frames, lh * sf, lw * sf});
    }
    out.flops += sim.flops - before;
    if (i == 1) flops_second = sim.flops - before;
  }
  out.peak = sim.peak;
  out.peak_at = sim.peak_at;
  out.memory_bytes = sim.memory_bytes();
  return out;
}

// Exact mode: per layer, one window + one output tile (+ residual) on the device; whole-frame
// layer inputs/outputs and causal memory on the host.
class ExactSim {
 public:
  ExactSim(const PlanRequest& r, int64_t tile_h, int64_t tile_w, int64_t full_h, int64_t full_w)
      : r_(r), dev_(r), th_(tile_h), tw_(tile_w), fh_(full_h), fw_(full_w) {
    for (const auto& p : r.config.parameters()) {
      const double n = static_cast<double>(p.shape.numel() * r.weight_bytes);
      param_bytes_[p.name] =
          static_cast<int64_t>(p.shape.rank() == 5 ? n * r.backend.conv_weight_copies : n);
    }
  }

  // The engine uploads a layer's weights on first use and releases them when the layer group
  // (resnet, upsampler, attention, single conv) is done, unless keep_weights.
  void load(const std::string& prefix) {
    for (const char* suffix : {".weight", ".bias"}) {
      const std::string n = prefix + suffix;
      if (loaded_.count(n)) continue;
      auto it = param_bytes_.find(n);
      if (it == param_bytes_.end()) continue;
      loaded_.insert(n);
      weights_live_ += it->second;
      dev_.alloc(it->second, prefix + " weights");
    }
    weight_peak = std::max(weight_peak, weights_live_);
  }
  void unload() {
    if (r_.exact_keep_weights) return;
    dev_.release(weights_live_);
    weights_live_ = 0;
    loaded_.clear();
  }
  int64_t weight_peak = 0;

  int64_t host_peak = 0;
  int64_t host_live = 0;
  int64_t final_tiles = 0;
  Sim& dev() { return dev_; }

  void halloc(int64_t b) {
    host_live += b;
    host_peak = std::max(host_peak, host_live);
  }
  void hrelease(int64_t b) { host_live -= b; }
  int64_t hb(const A& a) const { return a.n() * 4; }  // host staging is fp32

  // One tiled convolution of the exact engine; returns the output shape.
  A conv(const A& x, int64_t cout, int kt, int k, int st, int s, bool down, const std::string& key,
         bool residual, bool shortcut, bool final_layer = false) {
    const int64_t pt = down ? 0 : k / 2, pb = down ? 1 : k / 2;
    const int64_t ho = (x.h + pt + pb - k) / s + 1, wo = (x.w + pt + pb - k) / s + 1;
    const int64_t ctx = kt == 1 ? 0 : (started_ ? mem_t_[key] : kt - 1);
    const int64_t to = (ctx + x.t - kt) / st + 1;
    const int64_t lh = balanced_tile(ho, ceil_div(th_ * ho, fh_));
    const int64_t lw = balanced_tile(wo, ceil_div(tw_ * wo, fw_));
    const int64_t th = std::min(lh, ho), tw = std::min(lw, wo);
    const int64_t ntiles =
        static_cast<int64_t>(uniform_starts(ho, lh).size() * uniform_starts(wo, lw).size());
    if (final_layer) final_tiles = ntiles;
    load(key);
    if (shortcut) load(shortcut_key_);
    const A win{x.c, ctx + x.t, (th - 1) * s + k, (tw - 1) * s + k};
    const A out{cout, to, ho, wo};
    halloc(hb(out));
    halloc(hb(win));  // host staging of the window
    // Device: window, output tile (+ conv transients), then residual (+ shortcut).
    dev_.alloc(dev_.bytes(win), key);
    const A y = dev_.conv_padded(win, cout, kt, k, st, s, 0, 0, key);
    dev_.release(dev_.bytes(win));
    dev_.flops += (static_cast<double>(ntiles) - 1.0) * 2.0 *
                  static_cast<double>(x.c * kt * k * k) * static_cast<double>(y.n());
    if (residual) {
      const A rin{residual_c_, to, th, tw};
      dev_.alloc(dev_.bytes(rin), key + " residual");
      if (shortcut) {
        const A sc = dev_.conv(rin, cout, 1, 1, 1, 1, false, key + " shortcut");
        dev_.release(dev_.bytes(sc));
        dev_.flops += (static_cast<double>(ntiles) - 1.0) * 2.0 * static_cast<double>(rin.c) *
                      static_cast<double>(sc.n());
      }
      dev_.release(dev_.bytes(rin));
    }
    dev_.release(dev_.bytes(y));
    hrelease(hb(win));
    const int64_t keep = kt > 1 ? kt - st : 0;
    if (keep > 0) {
      const A m{x.c, keep, x.h, x.w};
      if (auto it = mem_.find(key); it != mem_.end()) hrelease(it->second);
      halloc(hb(m));
      mem_[key] = hb(m);
      mem_t_[key] = keep;
    }
    return out;
  }

  A resnet(const A& x, int64_t cout, const std::string& p) {
    const A h = conv(x, cout, 3, 3, 1, 1, false, p + ".conv1", false, false);
    residual_c_ = x.c;
    shortcut_key_ = p + ".conv_shortcut";
    const A y = conv(h, cout, 3, 3, 1, 1, false, p + ".conv2", true, x.c != cout);
    hrelease(hb(h));
    unload();
    return y;
  }

  A single(const A& x, int64_t cout, int kt, int k, int st, int s, bool down,
           const std::string& key, bool final_layer = false) {
    const A y = conv(x, cout, kt, k, st, s, down, key, false, false, final_layer);
    unload();
    return y;
  }

  A attention(const A& x, const std::string& at) {
    for (const char* w : {".group_norm", ".to_q", ".to_k", ".to_v", ".to_out.0"}) load(at + w);
    dev_.alloc(dev_.bytes(x), at);
    const A y = dev_.attention(x, at);
    dev_.release(dev_.bytes(x));
    dev_.release(dev_.bytes(y));
    halloc(hb(y));
    unload();
    return y;
  }

  A upsample(const A& x, bool temporal, const std::string& p) {
    const int r = temporal ? 8 : 4;
    const int64_t lh = balanced_tile(x.h, ceil_div(th_ * x.h, fh_));
    const int64_t lw = balanced_tile(x.w, ceil_div(tw_ * x.w, fw_));
    const int64_t ntiles =
        static_cast<int64_t>(uniform_starts(x.h, lh).size() * uniform_starts(x.w, lw).size());
    const A xt{x.c, x.t, std::min(lh, x.h), std::min(lw, x.w)};
    const A u{x.c, x.t * (temporal ? 2 : 1) - (temporal && !started_ ? 1 : 0), 2 * x.h, 2 * x.w};
    halloc(hb(u));
    load(p + ".upscale_conv");
    dev_.alloc(dev_.bytes(xt), p + ".upscale_conv");
    const A y = dev_.conv(xt, r * x.c, 1, 1, 1, 1, false, p + ".upscale_conv");
    dev_.flops += (static_cast<double>(ntiles) - 1.0) * 2.0 * static_cast<double>(x.c) *
                  static_cast<double>(y.n());
    dev_.release(dev_.bytes(xt));
    const A d{x.c, u.t, 2 * xt.h, 2 * xt.w};
    dev_.alloc(dev_.bytes(d), p + ".depth_to_space");
    dev_.release(dev_.bytes(y));
    dev_.release(dev_.bytes(d));
    const A out = conv(u, x.c, 3, 3, 1, 1, false, p + ".conv", false, false);
    hrelease(hb(u));
    unload();
    return out;
  }

  void decode_chunk(const A& z) {
    const VaeConfig& c = r_.config;
    const auto& ch = c.block_out_channels;
    std::vector<int64_t> rev(ch.rbegin(), ch.rend());
    halloc(hb(z));
    A h = single(z, rev[0], 3, 3, 1, 1, false, "decoder.conv_in");
    auto step = [&](const A& n) {
      hrelease(hb(h));
      h = n;
    };
    step(resnet(h, rev[0], "decoder.mid_block.resnets.0"));
    step(attention(h, "decoder.mid_block.attentions.0"));
    step(resnet(h, rev[0], "decoder.mid_block.resnets.1"));
    for (int l = 0; l < c.levels(); ++l) {
      const std::string p = "decoder.up_blocks." + std::to_string(l);
      for (int j = 0; j < c.layers_per_block + 1; ++j) {
        step(resnet(h, rev[static_cast<size_t>(l)], p + ".resnets." + std::to_string(j)));
      }
      if (l < c.levels() - 1) step(upsample(h, c.decoder_temporal_up(l), p + ".upsamplers.0"));
    }
    step(single(h, c.out_channels, 3, 3, 1, 1, false, "decoder.conv_out", true));
    hrelease(hb(h));
    hrelease(hb(z));
    started_ = true;
    dev_.started = true;
  }

  void encode_chunk(const A& x) {
    const VaeConfig& c = r_.config;
    const auto& ch = c.block_out_channels;
    halloc(hb(x));
    A h = single(x, ch[0], 3, 3, 1, 1, false, "encoder.conv_in");
    auto step = [&](const A& n) {
      hrelease(hb(h));
      h = n;
    };
    for (int l = 0; l < c.levels(); ++l) {
      const std::string p = "encoder.down_blocks." + std::to_string(l);
      for (int j = 0; j < c.layers_per_block; ++j) {
        step(resnet(h, ch[static_cast<size_t>(l)], p + ".resnets." + std::to_string(j)));
      }
      if (l < c.levels() - 1) {
        const bool temporal = c.encoder_temporal_down(l);
        step(single(h, ch[static_cast<size_t>(l)], temporal ? 3 : 1, 3, temporal ? 2 : 1, 2, true,
                    p + ".downsamplers.0.conv"));
      }
    }
    const int64_t top = ch.back();
    step(resnet(h, top, "encoder.mid_block.resnets.0"));
    step(attention(h, "encoder.mid_block.attentions.0"));
    step(resnet(h, top, "encoder.mid_block.resnets.1"));
    step(single(h, 2 * c.latent_channels, 3, 3, 1, 1, false, "encoder.conv_out", true));
    hrelease(hb(h));
    hrelease(hb(x));
    started_ = true;
    dev_.started = true;
  }

 private:
  const PlanRequest& r_;
  Sim dev_;
  int64_t th_, tw_, fh_, fw_;
  bool started_ = false;
  int64_t residual_c_ = 0;
  std::string shortcut_key_;
  std::map<std::string, int64_t> mem_;
  std::map<std::string, int64_t> mem_t_;
  std::map<std::string, int64_t> param_bytes_;
  std::set<std::string> loaded_;
  int64_t weights_live_ = 0;
};

Status validate(const PlanRequest& r) {
  SEEDVAE_TRY(r.config.validate());
  const int sf = r.config.spatial_factor(), tf = r.config.temporal_factor();
  if (r.height < sf || r.width < sf || r.height % sf || r.width % sf) {
    return invalid_argument("plan: frame " + std::to_string(r.width) + "x" +
                            std::to_string(r.height) + " must be a positive multiple of " +
                            std::to_string(sf));
  }
  if (r.frames < 1 || (r.frames - 1) % tf != 0) {
    return invalid_argument("plan: " + std::to_string(r.frames) + " frames is not 4n+1");
  }
  if (r.activation_bytes < 1 || r.weight_bytes < 1) {
    return invalid_argument("plan: element sizes must be positive");
  }
  if (r.max_chunk_latents < 1 || r.chunk_latents < 0) {
    return invalid_argument("plan: chunk sizes must be positive");
  }
  return Status::ok();
}

}  // namespace

int64_t causal_state_bytes(const VaeConfig& config, bool encode, int64_t lat_h, int64_t lat_w,
                           int chunk_latents, int64_t activation_bytes) {
  PlanRequest r;
  r.config = config;
  r.op = encode ? PlanOp::kEncode : PlanOp::kDecode;
  r.activation_bytes = activation_bytes;
  const int c = std::max(1, chunk_latents);
  r.frames = (2 * c + 1 - 1) * config.temporal_factor() + 1;  // two chunks: every memory exists
  return simulate_stream(r, lat_h, lat_w, c).memory_bytes;
}

Result<PlanEstimate> estimate(const PlanRequest& r, const TileSpec& tile, int chunk) {
  SEEDVAE_TRY(validate(r));
  const VaeConfig& c = r.config;
  const int sf = c.spatial_factor(), tf = c.temporal_factor();
  const int64_t lat_h = r.height / sf, lat_w = r.width / sf;
  const int64_t latents = (r.frames - 1) / tf + 1;
  PlanEstimate e;
  e.spec = tile;
  e.chunk_latents = chunk;
  const int64_t weights = model_weight_bytes(r);
  const StreamResult whole = simulate_stream(r, lat_h, lat_w, chunk);
  const int64_t out_c = r.op == PlanOp::kDecode ? c.out_channels : 2 * c.latent_channels;
  const int64_t out_h = r.op == PlanOp::kDecode ? r.height : lat_h;
  const int64_t out_w = r.op == PlanOp::kDecode ? r.width : lat_w;
  const auto sizes = chunk_sizes(latents, chunk);
  const int64_t first_chunk_frames =
      r.op == PlanOp::kDecode ? (sizes.front() - 1) * tf + 1 : sizes.front();

  if (r.mode == TilingMode::kOff) {
    e.spec = {r.height, r.width, 0, 0};
    e.tiles = 1;
    e.weight_bytes = weights;
    e.activation_peak_bytes = whole.peak;
    e.peak_at = whole.peak_at;
    e.flops = whole.flops;
    e.relative_time = 1.0;
    e.host_bytes = 0;
  } else if (r.mode == TilingMode::kBlend) {
    SEEDVAE_ASSIGN_OR_RETURN(TilePlan plan, make_tile_plan(lat_h, lat_w, tile, r.layout, sf));
    e.tiles = static_cast<int64_t>(plan.tiles.size());
    std::map<std::pair<int64_t, int64_t>, StreamResult> by_shape;
    e.tile_shapes = 0;
    double flops = 0;
    int64_t parked = 0;
    for (const PlannedTile& t : plan.tiles) {
      auto key = std::make_pair(t.latent.h, t.latent.w);
      auto it = by_shape.find(key);
      if (it == by_shape.end()) {
        it = by_shape.emplace(key, simulate_stream(r, t.latent.h, t.latent.w, chunk)).first;
        ++e.tile_shapes;
      }
      flops += it->second.flops;
      parked += it->second.memory_bytes;
      if (it->second.peak > e.activation_peak_bytes) {
        e.activation_peak_bytes = it->second.peak;
        e.peak_at = it->second.peak_at;
      }
    }
    e.weight_bytes = weights;
    e.flops = flops;
    e.relative_time = whole.flops > 0 ? flops / whole.flops : 1.0;
    // Host: the weight sum and the largest raw tile, plus either the chunk accumulator and the
    // parked states of every tile (chunk-major) or the whole-clip accumulator (tile-major),
    // whichever TileOrder::kAuto picks (the smaller).
    const int64_t max_tile_px =
        plan.rows.tile * plan.cols.tile * (r.op == PlanOp::kDecode ? sf * sf : 1);
    int64_t total_frames = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      total_frames +=
          r.op == PlanOp::kDecode ? (i == 0 ? (sizes[i] - 1) * tf + 1 : sizes[i] * tf) : sizes[i];
    }
    const int64_t chunk_major =
        4 * out_c * first_chunk_frames * out_h * out_w + (sizes.size() > 1 ? parked : 0);
    const int64_t tile_major = 4 * out_c * total_frames * out_h * out_w;
    e.host_bytes =
        4 * (out_h * out_w + out_c * first_chunk_frames * max_tile_px) +
        (sizes.size() > 1 && e.tiles > 1 ? std::min(chunk_major, tile_major) : chunk_major);
  } else {
    ExactSim sim(r, tile.tile_h, tile.tile_w, r.height, r.width);
    size_t i = 0;
    double flops_second = 0;
    for (; i < sizes.size(); ++i) {
      if (i >= 2 && i + 1 < sizes.size() && sizes[i] == sizes[1]) {
        sim.dev().flops += flops_second;
        continue;
      }
      const double before = sim.dev().flops;
      if (r.op == PlanOp::kDecode) {
        sim.decode_chunk(A{c.latent_channels, sizes[i], lat_h, lat_w});
      } else {
        const int64_t frames = i == 0 ? (sizes[i] - 1) * tf + 1 : sizes[i] * tf;
        sim.encode_chunk(A{c.in_channels, frames, r.height, r.width});
      }
      if (i == 1) flops_second = sim.dev().flops - before;
    }
    e.tiles = sim.final_tiles;
    // The simulated device peak includes the layer weights live at that moment.
    e.weight_bytes = weights;
    e.exact_weight_bytes = sim.weight_peak;
    e.activation_peak_bytes = sim.dev().peak - sim.weight_peak;
    e.peak_at = sim.dev().peak_at;
    e.flops = sim.dev().flops;
    e.relative_time =
        (whole.flops > 0 ? e.flops / whole.flops : 1.0) * (1.0 + r.backend.exact_host_overhead);
    e.host_bytes = sim.host_peak;
  }
  e.peak_bytes =
      e.weight_bytes + e.exact_weight_bytes + e.activation_peak_bytes + r.backend.fixed_bytes;
  e.peak_bytes_upper = e.peak_bytes;
  if (e.tile_shapes > 1 && r.backend.max_weight_packs > 1) {
    const double packs =
        static_cast<double>(std::min<int64_t>(r.backend.max_weight_packs, e.tile_shapes));
    e.peak_bytes_upper += model_weight_bytes(r, packs) - e.weight_bytes;
  }
  e.fits = r.budget_bytes <= 0 || e.peak_bytes <= r.budget_bytes;
  return e;
}

Result<TilePlanReport> plan(const PlanRequest& r) {
  SEEDVAE_TRY(validate(r));
  TilePlanReport rep;
  rep.request = r;
  const int sf = r.config.spatial_factor();
  std::vector<int> chunks;
  if (r.auto_chunk) {
    for (int c = r.max_chunk_latents; c >= 1; --c) chunks.push_back(c);
  } else {
    chunks.push_back(r.chunk_latents);
  }
  // Tile candidates (pixels), largest first.
  std::vector<TileSpec> tiles;
  if (r.mode == TilingMode::kOff) {
    tiles.push_back({r.height, r.width, 0, 0});
  } else if (!r.auto_tile) {
    tiles.push_back(r.spec);
  } else {
    const int64_t side = std::max(r.height, r.width);
    std::vector<int64_t> sides;
    for (int64_t s = (side + 63) / 64 * 64; s >= 128; s -= 64) sides.push_back(s);
    for (int64_t s = std::min<int64_t>(112, (side + 15) / 16 * 16); s >= 16; s -= 16)
      sides.push_back(s);
    sides.push_back(8);
    for (int64_t s : sides) {
      TileSpec t = r.spec;
      t.tile_h = std::min(s, r.height);
      t.tile_w = std::min(s, r.width);
      if (r.mode == TilingMode::kBlend) {
        // The tile must exceed its overlap (uniform layout refuses otherwise; the reference
        // layout would clamp the overlap silently).
        if ((t.tile_h / sf) <= (t.overlap_h + sf - 1) / sf && t.tile_h < r.height) continue;
        if ((t.tile_w / sf) <= (t.overlap_w + sf - 1) / sf && t.tile_w < r.width) continue;
      }
      if (!tiles.empty() && tiles.back().tile_h == t.tile_h && tiles.back().tile_w == t.tile_w)
        continue;
      tiles.push_back(t);
    }
  }
  bool found = false;
  for (const TileSpec& t : tiles) {
    for (int c : chunks) {
      auto e = estimate(r, t, c);
      if (!e.is_ok()) {
        if (!r.auto_tile) return e.take_status();
        continue;  // e.g. a uniform tile smaller than its overlap
      }
      rep.candidates.push_back(*e);
      if (e->fits && !found) {
        rep.chosen = *e;
        found = true;
      }
    }
    if (found) break;
  }
  if (rep.candidates.empty()) return invalid_argument("plan: no tile candidate is valid");
  if (!found) {
    // Report the smallest-peak candidate.
    rep.chosen = *std::min_element(
        rep.candidates.begin(), rep.candidates.end(),
        [](const PlanEstimate& a, const PlanEstimate& b) { return a.peak_bytes < b.peak_bytes; });
  }
  rep.fits = found;
  {
    PlanRequest whole = r;
    whole.mode = TilingMode::kOff;
    auto u = estimate(whole, {r.height, r.width, 0, 0}, rep.chosen.chunk_latents);
    if (u.is_ok()) rep.untiled = *u;
  }
  if (r.mode == TilingMode::kBlend) {
    auto p = make_tile_plan(r.height / sf, r.width / sf, rep.chosen.spec, r.layout, sf);
    if (p.is_ok()) rep.plan = std::move(*p);
  }
  rep.message = (found ? std::string("fits: ")
                       : std::string("does not fit the budget of ") + format_bytes(r.budget_bytes) +
                             "; smallest: ") +
                describe(rep.chosen);
  return rep;
}

namespace {

nlohmann::json estimate_json(const PlanEstimate& e) {
  return {{"tile", {{"h", e.spec.tile_h}, {"w", e.spec.tile_w}}},
          {"overlap", {{"h", e.spec.overlap_h}, {"w", e.spec.overlap_w}}},
          {"chunk_latents", e.chunk_latents},
          {"tiles", e.tiles},
          {"tile_shapes", e.tile_shapes},
          {"weight_bytes", e.weight_bytes},
          {"exact_weight_bytes", e.exact_weight_bytes},
          {"activation_peak_bytes", e.activation_peak_bytes},
          {"peak_bytes", e.peak_bytes},
          {"peak_bytes_upper", e.peak_bytes_upper},
          {"host_bytes", e.host_bytes},
          {"peak_at", e.peak_at},
          {"flops", e.flops},
          {"relative_time", e.relative_time},
          {"fits", e.fits}};
}

}  // namespace

std::string plan_report_json(const TilePlanReport& rep) {
  using nlohmann::json;
  const PlanRequest& r = rep.request;
  json j;
  j["request"] = {{"op", r.op == PlanOp::kDecode ? "decode" : "encode"},
                  {"height", r.height},
                  {"width", r.width},
                  {"frames", r.frames},
                  {"mode", std::string(tiling_mode_name(r.mode))},
                  {"layout", std::string(tile_layout_name(r.layout))},
                  {"activation_bytes", r.activation_bytes},
                  {"weight_bytes", r.weight_bytes},
                  {"budget_bytes", r.budget_bytes},
                  {"backend_model", r.backend.name},
                  {"config", r.config.to_string()}};
  j["fits"] = rep.fits;
  j["message"] = rep.message;
  j["chosen"] = estimate_json(rep.chosen);
  j["untiled"] = estimate_json(rep.untiled);
  j["tiles"] = json::array();
  for (const PlannedTile& t : rep.plan.tiles) {
    j["tiles"].push_back({{"x", t.pixel.x}, {"y", t.pixel.y}, {"w", t.pixel.w}, {"h", t.pixel.h}});
  }
  j["candidates"] = json::array();
  for (const PlanEstimate& e : rep.candidates) j["candidates"].push_back(estimate_json(e));
  return j.dump();
}

}  // namespace seedvae
