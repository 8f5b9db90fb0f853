#include "core/schedule/wan_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

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
                                    WanTileReport* report) {
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
  HostTensor out(DType::kF32, Shape{1, 3, (s[2] - 1) * tf + 1, lh * sf, lw * sf});
  const Shape& os = out.shape();
  int64_t tile = 0;
  for (int64_t y0 = 0; y0 < lh; y0 += th) {
    for (int64_t x0 = 0; x0 < lw; x0 += tw, ++tile) {
      const int64_t y1 = std::min(lh, y0 + th), x1 = std::min(lw, x0 + tw);
      const int64_t wy0 = std::max<int64_t>(0, y0 - halo), wy1 = std::min(lh, y1 + halo);
      const int64_t wx0 = std::max<int64_t>(0, x0 - halo), wx1 = std::min(lw, x1 + halo);
      CausalState trunk, tail;
      int64_t frame = 0;
      for (size_t i = 0; i < chunks.size(); ++i) {
        const auto [b, e] = chunks[i];
        ChunkOptions co = stream.chunk_options(static_cast<int64_t>(i), tile);
        co.end_unit = trunk_end;
        SEEDVAE_ASSIGN_OR_RETURN(Tensor z, be.upload(slice_time(latent, b, e)));
        SEEDVAE_ASSIGN_OR_RETURN(Tensor x, model.decode_chunk(z, trunk, co));
        z = {};
        // the window, through the host: the trunk's output is at the latent resolution
        SEEDVAE_ASSIGN_OR_RETURN(HostTensor xh, be.download(x));
        x = {};
        SEEDVAE_ASSIGN_OR_RETURN(Tensor xw, be.upload(crop(xh, wy0, wy1 - wy0, wx0, wx1 - wx0)));
        co.first_unit = trunk_end;
        co.end_unit = -1;
        SEEDVAE_ASSIGN_OR_RETURN(Tensor y, model.decode_chunk(xw, tail, co));
        xw = {};
        SEEDVAE_ASSIGN_OR_RETURN(HostTensor yh, be.download(y));
        y = {};
        // the tile's interior into the clip
        const Shape& ys = yh.shape();
        const int64_t t = ys[2], rows = (y1 - y0) * sf, cols = (x1 - x0) * sf;
        const int64_t ry = (y0 - wy0) * sf, rx = (x0 - wx0) * sf;
        if (frame + t > os[2] || ys[3] != (wy1 - wy0) * sf || ys[4] != (wx1 - wx0) * sf) {
          return internal_error("Wan tiles: a tile's output is " + ys.to_string());
        }
        for (int64_t c = 0; c < 3; ++c) {
          for (int64_t f = 0; f < t; ++f) {
            for (int64_t r = 0; r < rows; ++r) {
              const float* src = yh.data<float>() + ((c * t + f) * ys[3] + ry + r) * ys[4] + rx;
              float* dst = out.data<float>() +
                           ((c * os[2] + frame + f) * os[3] + y0 * sf + r) * os[4] + x0 * sf;
              std::memcpy(dst, src, static_cast<size_t>(cols) * sizeof(float));
            }
          }
        }
        frame += t;
      }
    }
  }
  if (report) {
    report->tiles = tile;
    report->halo = halo;
    report->backend_peak_bytes = be.memory_stats().peak_bytes;
  }
  return out;
}

}  // namespace seedvae
