#include "core/schedule/wan_tiles.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "core/schedule/copy_pipeline.h"

namespace seedvae {

int64_t wan_decoder_halo(const WanConfig& c) {
  // per level i (at 2^i times the latent resolution): two 3x3 convolutions per residual block;
  // an upsampler's 3x3 convolution at the next level's resolution; the head's at the last
  double reach = 0;
  const int n = c.levels();
  for (int i = 0; i < n; ++i) {
    reach += 2.0 * (c.num_res_blocks + 1) / std::ldexp(1.0, i);
    if (i != n - 1) reach += 1.0 / std::ldexp(1.0, i + 1);
  }
  reach += 1.0 / std::ldexp(1.0, n - 1);
  return static_cast<int64_t>(std::ceil(reach));
}

namespace {

// Frames of src [1, C, T, H, W] in rows [y0, y0 + h) and columns [x0, x0 + w).
HostTensor crop(const HostTensor& src, int64_t y0, int64_t h, int64_t x0, int64_t w) {
  const Shape& s = src.shape();
  HostTensor out(DType::kF32, Shape{1, s[1], s[2], h, w});
  const float* in = src.data<float>();
  float* o = out.data<float>();
  for (int64_t p = 0; p < s[1] * s[2]; ++p) {
    for (int64_t y = 0; y < h; ++y) {
      std::memcpy(o + (p * h + y) * w, in + (p * s[3] + y0 + y) * s[4] + x0,
                  static_cast<size_t>(w) * sizeof(float));
    }
  }
  return out;
}

}  // namespace

Result<HostTensor> wan_tiled_decode(WanModel& model, const HostTensor& latent,
                                    const WanTileOptions& options, const StreamOptions& stream,
                                    const StreamHooks& hooks, TileHooks* tile_hooks) {
  const auto t_start = std::chrono::steady_clock::now();
  const Shape& s = latent.shape();
  const WanConfig& cfg = model.config();
  if (s.rank() != 5 || s[0] != 1 || s[1] != cfg.z_dim || s[2] < 1) {
    return invalid_argument("a Wan decode needs a [1, " + std::to_string(cfg.z_dim) +
                            ", t, h, w] latent, got " + s.to_string());
  }
  if (options.tile_h < 1 || options.tile_w < 1) {
    return invalid_argument("Wan tiles: tile " + std::to_string(options.tile_w) + "x" +
                            std::to_string(options.tile_h) + " px is empty");
  }
  const int64_t sf = model.spatial_factor(), tf = model.temporal_factor();
  const int64_t lh = s[3], lw = s[4];
  const int64_t th = std::max<int64_t>(1, options.tile_h / sf);
  const int64_t tw = std::max<int64_t>(1, options.tile_w / sf);
  const int64_t halo = options.halo >= 0 ? options.halo : wan_decoder_halo(cfg);
  // the tail starts at the first level (the units before it: conv1 and the middle's three)
  const std::vector<std::string> units = model.decoder_units();
  int trunk_end = 0;
  while (trunk_end < static_cast<int>(units.size()) &&
         units[static_cast<size_t>(trunk_end)].rfind("decoder.upsamples.", 0) != 0) {
    ++trunk_end;
  }
  if (trunk_end == 0 || trunk_end == static_cast<int>(units.size())) {
    return internal_error("Wan tiles: no trunk/tail boundary in the decoder's units");
  }
  Backend& be = model.backend();
  const auto chunks = plan_chunks(s[2], stream.chunk_latents, stream.lone_head);
  const int64_t nchunks = static_cast<int64_t>(chunks.size());
  // each chunk's first output frame (frame 0 alone makes one frame, a latent frame tf after it)
  std::vector<int64_t> first(chunks.size() + 1, 0);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto [b, e] = chunks[i];
    first[i + 1] = first[i] + (e - b) * tf - (b == 0 ? tf - 1 : 0);
  }
  const Shape os{1, 3, first.back(), lh * sf, lw * sf};
  struct Tile {
    int64_t y0, y1, x0, x1;      // interior, latent pixels
    int64_t wy0, wy1, wx0, wx1;  // window (interior plus halo)
  };
  std::vector<Tile> tiles;
  for (int64_t y0 = 0; y0 < lh; y0 += th) {
    for (int64_t x0 = 0; x0 < lw; x0 += tw) {
      const int64_t y1 = std::min(lh, y0 + th), x1 = std::min(lw, x0 + tw);
      tiles.push_back({y0, y1, x0, x1, std::max<int64_t>(0, y0 - halo), std::min(lh, y1 + halo),
                       std::max<int64_t>(0, x0 - halo), std::min(lw, x1 + halo)});
    }
  }
  const auto ntiles = static_cast<int64_t>(tiles.size());
  TileRunReport* report = tile_hooks ? tile_hooks->report : nullptr;
  if (report) {
    *report = TileRunReport{};
    report->mode = TilingMode::kExact;
    report->chunks = nchunks;
    report->tile_major = true;
    report->halo = halo;
    report->tile_sums.assign(tiles.size(), std::vector<double>(3, 0.0));
    report->tile_counts.assign(tiles.size(), 0);
    for (const Tile& t : tiles) {
      const Rect px{t.y0 * sf, t.x0 * sf, (t.y1 - t.y0) * sf, (t.x1 - t.x0) * sf};
      report->rects.push_back(px);
      report->output_rects.push_back(px);
    }
    const TileSpec spec{th * sf, tw * sf, 0, 0};
    if (auto p = make_tile_plan(lh, lw, spec, TileLayout::kUniform, sf))
      report->plan = std::move(*p);
  }
  HostTensor out;
  if (options.assemble && (hooks.gathers() || hooks.on_chunk)) {
    SEEDVAE_ASSIGN_OR_RETURN(out, HostTensor::create(DType::kF32, os));
  }
  const int64_t steps = ntiles * nchunks;
  int64_t done = 0;
  // A dry run (nothing assembled) runs the tile with the largest window only: every tile holds
  // the same trunk and one tile's state, so that one holds the most.
  int64_t only = -1;
  if (!options.assemble) {
    int64_t largest = -1;
    for (int64_t ti = 0; ti < ntiles; ++ti) {
      const Tile& t = tiles[static_cast<size_t>(ti)];
      const int64_t area = (t.wy1 - t.wy0) * (t.wx1 - t.wx0);
      if (area > largest) {
        largest = area;
        only = ti;
      }
    }
  }
  for (int64_t ti = 0; ti < ntiles; ++ti) {
    if (only >= 0 && ti != only) continue;
    const Tile& tl = tiles[static_cast<size_t>(ti)];
    const Rect px{tl.y0 * sf, tl.x0 * sf, (tl.y1 - tl.y0) * sf, (tl.x1 - tl.x0) * sf};
    // The tile's interior of one chunk's decoded window into the clip, its sums into the report
    // and the interior to on_tile; run once the window's copy has landed.
    auto place = [&, ti, px](const HostTensor& yh, int64_t chunk) -> Status {
      const Shape& ys = yh.shape();
      const int64_t t = ys[2], rows = px.h, cols = px.w;
      const int64_t ry = (tl.y0 - tl.wy0) * sf, rx = (tl.x0 - tl.wx0) * sf;
      const int64_t f0 = first[static_cast<size_t>(chunk)];
      if (f0 + t > os[2] || ys[3] != (tl.wy1 - tl.wy0) * sf || ys[4] != (tl.wx1 - tl.wx0) * sf) {
        return internal_error("Wan tiles: a tile's output is " + ys.to_string());
      }
      const bool interior = (report || (tile_hooks && tile_hooks->on_tile));
      HostTensor inner;
      if (interior) inner = HostTensor(DType::kF32, Shape{1, 3, t, rows, cols});
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t f = 0; f < t; ++f) {
          for (int64_t r = 0; r < rows; ++r) {
            const float* src = yh.data<float>() + ((c * t + f) * ys[3] + ry + r) * ys[4] + rx;
            if (!out.empty()) {
              std::memcpy(
                  out.data<float>() + ((c * os[2] + f0 + f) * os[3] + px.y + r) * os[4] + px.x, src,
                  static_cast<size_t>(cols) * sizeof(float));
            }
            if (interior) {
              std::memcpy(inner.data<float>() + ((c * t + f) * rows + r) * cols, src,
                          static_cast<size_t>(cols) * sizeof(float));
            }
          }
        }
      }
      if (report) {
        const int64_t per_c = t * rows * cols;
        for (int64_t c = 0; c < 3; ++c) {
          double sum = 0;
          const float* q = inner.data<float>() + c * per_c;
          for (int64_t i = 0; i < per_c; ++i) sum += q[i];
          report->tile_sums[static_cast<size_t>(ti)][static_cast<size_t>(c)] += sum;
        }
        report->tile_counts[static_cast<size_t>(ti)] += per_c;
        ++report->tiles_run;
      }
      if (tile_hooks && tile_hooks->on_tile) {
        TileEvent ev;
        ev.index = ti;
        ev.total = ntiles;
        ev.chunk = chunk;
        ev.first_frame = f0;
        ev.pixel = px;
        ev.latent = {tl.y0, tl.x0, tl.y1 - tl.y0, tl.x1 - tl.x0};
        ev.data = &inner;
        SEEDVAE_TRY(tile_hooks->on_tile(ev));
      }
      ++done;
      if (hooks.progress) hooks.progress->report("decode tiles", done, steps);
      return Status::ok();
    };
    CopyPipeline copies(be, stream.async_tiles && options.assemble);
    CausalState trunk, tail;
    for (int64_t i = 0; i < nchunks; ++i) {
      if (hooks.cancel) SEEDVAE_TRY(hooks.cancel->check());
      const auto [b, e] = chunks[static_cast<size_t>(i)];
      ChunkOptions co = stream.chunk_options(i, ti);
      co.end_unit = trunk_end;
      SEEDVAE_ASSIGN_OR_RETURN(Tensor z, be.upload(slice_time(latent, b, e)));
      SEEDVAE_ASSIGN_OR_RETURN(Tensor x, model.decode_chunk(z, trunk, co));
      z = {};
      // the window, through the host: the trunk's output is at the latent resolution (a dry run
      // only declares it)
      Tensor xw;
      if (options.assemble) {
        SEEDVAE_ASSIGN_OR_RETURN(HostTensor xh, be.download(x));
        x = {};
        SEEDVAE_ASSIGN_OR_RETURN(
            xw, be.upload(crop(xh, tl.wy0, tl.wy1 - tl.wy0, tl.wx0, tl.wx1 - tl.wx0)));
      } else {
        Shape ws = x.shape;
        ws[3] = tl.wy1 - tl.wy0;
        ws[4] = tl.wx1 - tl.wx0;
        x = {};
        SEEDVAE_ASSIGN_OR_RETURN(xw, be.zeros(ws));
      }
      co.first_unit = trunk_end;
      co.end_unit = -1;
      SEEDVAE_ASSIGN_OR_RETURN(Tensor y, model.decode_chunk(xw, tail, co));
      xw = {};
      if (!options.assemble) continue;
      auto window = std::make_shared<HostTensor>();
      SEEDVAE_ASSIGN_OR_RETURN(*window, HostTensor::create(DType::kF32, y.shape));
      SEEDVAE_TRY(copies.download(y, *window, 0));
      y = {};
      SEEDVAE_TRY(copies.end_step([&place, window, i]() { return place(*window, i); }));
    }
    SEEDVAE_TRY(copies.drain());
  }
  if (report) {
    report->backend_peak_bytes = be.memory_stats().peak_bytes;
    report->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  }
  if (out.empty()) return HostTensor{};
  if (hooks.on_chunk) {
    for (int64_t i = 0; i < nchunks; ++i) {
      const int64_t f0 = first[static_cast<size_t>(i)], f1 = first[static_cast<size_t>(i) + 1];
      SEEDVAE_TRY(hooks.on_chunk(f0, slice_time(out, f0, f1)));
    }
    if (!hooks.gathers()) return HostTensor{};
  }
  return out;
}

}  // namespace seedvae
