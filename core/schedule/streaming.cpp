#include "core/schedule/streaming.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/schedule/copy_pipeline.h"

namespace seedvae {

std::vector<std::pair<int64_t, int64_t>> plan_chunks(int64_t latent_frames, int chunk_latents,
                                                     bool lone_head) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (latent_frames <= 0) return out;
  if (chunk_latents <= 0 || latent_frames <= (lone_head ? 1 : chunk_latents + 1)) {
    out.emplace_back(0, latent_frames);
    return out;
  }
  int64_t b = 0;
  // the first chunk carries the single causal head frame extra, or is that frame alone
  int64_t e = lone_head ? 1 : chunk_latents + 1;
  while (b < latent_frames) {
    out.emplace_back(b, std::min(e, latent_frames));
    b = e;
    e = b + chunk_latents;
  }
  return out;
}

HostTensor slice_time(const HostTensor& x, int64_t begin, int64_t end) {
  const Shape& s = x.shape();
  Shape o = s;
  o[2] = end - begin;
  HostTensor out(x.dtype(), o);
  const int64_t plane = s[3] * s[4] * dtype_size(x.dtype());
  const auto* src = static_cast<const std::byte*>(x.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  for (int64_t n = 0; n < s[0] * s[1]; ++n) {
    std::memcpy(dst + n * o[2] * plane, src + (n * s[2] + begin) * plane,
                static_cast<size_t>(o[2] * plane));
  }
  return out;
}

Result<HostTensor> concat_time(std::span<const HostTensor> parts) {
  if (parts.empty()) return invalid_argument("nothing to concatenate");
  if (parts.size() == 1) return parts[0];
  const Shape& s0 = parts[0].shape();
  Shape o = s0;
  o[2] = 0;
  for (const HostTensor& p : parts) {
    const Shape& s = p.shape();
    if (s.rank() != 5 || s[0] != s0[0] || s[1] != s0[1] || s[3] != s0[3] || s[4] != s0[4] ||
        p.dtype() != parts[0].dtype()) {
      return invalid_argument("cannot concatenate " + s0.to_string() + " and " + s.to_string());
    }
    o[2] += s[2];
  }
  HostTensor out(parts[0].dtype(), o);
  const int64_t plane = s0[3] * s0[4] * dtype_size(out.dtype());
  auto* dst = static_cast<std::byte*>(out.raw());
  int64_t t0 = 0;
  for (const HostTensor& p : parts) {
    const int64_t tp = p.shape()[2];
    for (int64_t n = 0; n < s0[0] * s0[1]; ++n) {
      std::memcpy(dst + (n * o[2] + t0) * plane,
                  static_cast<const std::byte*>(p.raw()) + n * tp * plane,
                  static_cast<size_t>(tp * plane));
    }
    t0 += tp;
  }
  return out;
}

namespace {

// Runs `chunks` through `step`; each chunk's output is downloaded straight into its frames of
// the clip's output ([1, C, out_frames, H, W] fp32, allocated when the first chunk tells C, H, W),
// so no per-chunk host tensors or final concatenation are needed. With async_tiles a chunk's
// download lands (and its hooks run) while the next chunk computes.
template <typename Step>
Result<HostTensor> run_stream(VideoVae& model, const HostTensor& input,
                              const std::vector<std::pair<int64_t, int64_t>>& in_ranges,
                              int64_t out_frames, std::string_view stage, const StreamHooks& hooks,
                              bool async, Step step) {
  Backend& backend = model.backend();
  CausalState state;
  HostTensor out;
  // Without gathering: two chunk buffers in turn (with async copies, chunk i lands in one while
  // chunk i-1 is finished from the other). Declared before the pipeline, which they outlive.
  const bool gather = hooks.gathers();
  std::array<HostTensor, 2> ring;
  int64_t produced = 0;
  const auto total = static_cast<int64_t>(in_ranges.size());
  CopyPipeline pipe(backend, async);
  for (int64_t i = 0; i < total; ++i) {
    if (hooks.cancel) SEEDVAE_TRY(hooks.cancel->check());
    const auto [b, e] = in_ranges[static_cast<size_t>(i)];
    const bool whole = b == 0 && e == input.shape()[2];
    const SummarySpan summary = model.begin_summary();
    SEEDVAE_ASSIGN_OR_RETURN(Tensor x, backend.upload(whole ? input : slice_time(input, b, e)));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, step(x, state, i));
    x = {};
    if (y.shape.rank() != 5) return internal_error("stream step returned " + y.shape.to_string());
    HostTensor* dst = &out;
    if (!gather) {
      dst = &ring[static_cast<size_t>(i % 2)];
      if (dst->shape() != y.shape) {
        SEEDVAE_ASSIGN_OR_RETURN(*dst, HostTensor::create(DType::kF32, y.shape));
      }
    } else if (out.empty()) {
      Shape o = y.shape;
      o[2] = out_frames;
      SEEDVAE_ASSIGN_OR_RETURN(out, HostTensor::create(DType::kF32, o));
    }
    const int64_t t = y.shape[2], first = produced;
    SEEDVAE_TRY(pipe.download(y, *dst, gather ? first : 0));
    y = {};
    SEEDVAE_TRY(model.end_summary("chunk", summary, i, hooks.tile));
    CopyPipeline::Finish finish = [&, i, first, t, dst]() -> Status {
      if (hooks.on_chunk) {
        SEEDVAE_TRY(hooks.on_chunk(first, gather ? slice_time(out, first, first + t) : *dst));
      }
      if (hooks.progress) hooks.progress->report(stage, i + 1, total);
      return Status::ok();
    };
    SEEDVAE_TRY(pipe.end_step(std::move(finish)));
    produced += t;
  }
  SEEDVAE_TRY(pipe.drain());
  model.flush_telemetry();
  if (produced != out_frames) {
    return internal_error("stream produced " + std::to_string(produced) + " frames, expected " +
                          std::to_string(out_frames));
  }
  return out;
}

}  // namespace

Result<HostTensor> encode_video(VideoVae& model, const HostTensor& video,
                                const StreamOptions& options, const StreamHooks& hooks) {
  const Shape& s = video.shape();
  const int f = model.temporal_factor();
  if (s.rank() != 5 || s[0] != 1 || s[2] < 1 || (s[2] - 1) % f != 0) {
    return invalid_argument("encode needs a [1, 3, 4n+1, H, W] video, got " + s.to_string());
  }
  const int64_t latents = (s[2] - 1) / f + 1;
  auto chunks = plan_chunks(latents, options.chunk_latents, options.lone_head);
  for (auto& [b, e] : chunks) {  // latent ranges -> frame ranges
    b = b == 0 ? 0 : (b - 1) * f + 1;
    e = (e - 1) * f + 1;
  }
  return run_stream(model, video, chunks, latents, "encode", hooks, options.async_tiles,
                    [&](const Tensor& x, CausalState& st, int64_t i) {
                      return model.encode_chunk(x, st, options.chunk_options(i, hooks.tile));
                    });
}

Result<HostTensor> encode_stream(VideoVae& model, FrameSource& source, const StreamOptions& options,
                                 const StreamHooks& hooks) {
  Backend& backend = model.backend();
  const int f = model.temporal_factor();
  const int64_t c = options.chunk_latents;
  CausalState state;
  // Per-chunk moments, concatenated at the end (total unknown). A chunk's download may still be
  // landing in its part while the vector grows: moving a HostTensor keeps its bytes in place.
  std::vector<HostTensor> parts;
  CopyPipeline pipe(backend, options.async_tiles);
  int64_t frames_in = 0, produced = 0, finished = 0;
  Shape frame_shape;
  for (int64_t i = 0;; ++i) {
    if (hooks.cancel) SEEDVAE_TRY(hooks.cancel->check());
    const int64_t want = c <= 0 ? std::numeric_limits<int64_t>::max()
                                : (i == 0 ? (options.lone_head ? 1 : c * f + 1) : c * f);
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor x_host, source.next(want));
    const Shape& s = x_host.shape();
    const int64_t k = x_host.empty() ? 0 : s[2];
    if (k > 0) {
      if (s.rank() != 5 || s[0] != 1 || s[2] > want ||
          (!frame_shape.dims().empty() &&
           (s[1] != frame_shape[1] || s[3] != frame_shape[3] || s[4] != frame_shape[4]))) {
        return invalid_argument(
            "frame source returned " + s.to_string() + " for a chunk of " + std::to_string(want) +
            " frames" + (frame_shape.dims().empty() ? "" : " of " + frame_shape.to_string()));
      }
      if (k < want && (frames_in + k - 1) % f != 0) {  // the last chunk: refuse before running it
        return invalid_argument("encode needs a [1, 3, 4n+1, H, W] video, the frame source gave " +
                                std::to_string(frames_in + k) + " frames");
      }
      frame_shape = s;
      const SummarySpan summary = model.begin_summary();
      SEEDVAE_ASSIGN_OR_RETURN(Tensor x, backend.upload(x_host));
      x_host = {};
      SEEDVAE_ASSIGN_OR_RETURN(Tensor y,
                               model.encode_chunk(x, state, options.chunk_options(i, hooks.tile)));
      x = {};
      if (y.shape.rank() != 5) return internal_error("stream step returned " + y.shape.to_string());
      Shape o = y.shape;
      SEEDVAE_ASSIGN_OR_RETURN(HostTensor part, HostTensor::create(DType::kF32, o));
      parts.push_back(std::move(part));
      const size_t pi = parts.size() - 1;
      SEEDVAE_TRY(pipe.download(y, parts[pi], 0));
      y = {};
      SEEDVAE_TRY(model.end_summary("chunk", summary, i, hooks.tile));
      const int64_t first = produced;
      CopyPipeline::Finish finish = [&, pi, first]() -> Status {
        if (hooks.on_chunk) SEEDVAE_TRY(hooks.on_chunk(first, parts[pi]));
        if (!hooks.gathers()) parts[pi] = HostTensor{};  // taken by on_chunk
        ++finished;
        // the chunk count is unknown until the source ends: report one more than finished
        if (hooks.progress) hooks.progress->report("encode", finished, finished + 1);
        return Status::ok();
      };
      SEEDVAE_TRY(pipe.end_step(std::move(finish)));
      produced += o[2];
      frames_in += k;
    }
    if (k < want) break;
  }
  SEEDVAE_TRY(pipe.drain());
  model.flush_telemetry();
  if (hooks.progress && !parts.empty()) hooks.progress->report("encode", finished, finished);
  if (frames_in < 1 || (frames_in - 1) % f != 0) {
    return invalid_argument("encode needs a [1, 3, 4n+1, H, W] video, the frame source gave " +
                            std::to_string(frames_in) + " frames");
  }
  if (produced != (frames_in - 1) / f + 1) {
    return internal_error("stream produced " + std::to_string(produced) + " latents, expected " +
                          std::to_string((frames_in - 1) / f + 1));
  }
  if (!hooks.gathers()) return HostTensor{};
  return concat_time(parts);
}

Result<HostTensor> decode_latent(VideoVae& model, const HostTensor& latent,
                                 const StreamOptions& options, const StreamHooks& hooks) {
  const Shape& s = latent.shape();
  if (s.rank() != 5 || s[0] != 1 || s[2] < 1) {
    return invalid_argument("decode needs a [1, C, t, h, w] latent, got " + s.to_string());
  }
  const int f = model.temporal_factor();
  return run_stream(model, latent, plan_chunks(s[2], options.chunk_latents, options.lone_head),
                    (s[2] - 1) * f + 1, "decode", hooks, options.async_tiles,
                    [&](const Tensor& z, CausalState& st, int64_t i) {
                      return model.decode_chunk(z, st, options.chunk_options(i, hooks.tile));
                    });
}

HostTensor moments_mean(const HostTensor& moments) {
  const Shape& s = moments.shape();
  Shape o = s;
  o[1] = s[1] / 2;
  const HostTensor f = moments.to(DType::kF32);
  HostTensor out(DType::kF32, o);
  std::memcpy(out.raw(), f.raw(), static_cast<size_t>(out.nbytes()));  // channels lead (N = 1)
  return out;
}

HostTensor moments_sample(const HostTensor& moments, uint64_t seed) {
  HostTensor mean = moments_mean(moments);
  const HostTensor f = moments.to(DType::kF32);
  const int64_t n = mean.numel();
  const float* logvar = f.data<float>() + n;
  float* m = mean.data<float>();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t i = 0; i < n; ++i) {
    const float std_dev = std::exp(0.5f * std::clamp(logvar[i], -30.f, 20.f));
    m[i] = std::fma(std_dev, normal(rng), m[i]);
  }
  return mean;
}

}  // namespace seedvae
