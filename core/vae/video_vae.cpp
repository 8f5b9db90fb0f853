#include "core/vae/video_vae.h"

#include <algorithm>
#include <cstring>

namespace seedvae {

int64_t CausalState::bytes() const {
  int64_t n = 0;
  for (const auto& [k, t] : memory) n += t.shape.numel() * dtype_size(t.dtype);
  return n;
}

Result<HostTensor> host_slice_frames(const HostTensor& x, int64_t begin, int64_t end) {
  const Shape& s = x.shape();
  if (s.rank() != 5 || x.dtype() != DType::kF32 || begin < 0 || end < begin || end > s[2]) {
    return invalid_argument("host_slice_frames: frames [" + std::to_string(begin) + ", " +
                            std::to_string(end) + ") of " + s.to_string());
  }
  Shape o = s;
  o[2] = end - begin;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor y, HostTensor::create(DType::kF32, o));
  const int64_t plane = s[3] * s[4];
  for (int64_t nc = 0; nc < s[0] * s[1]; ++nc) {
    std::memcpy(y.data<float>() + nc * o[2] * plane, x.data<float>() + (nc * s[2] + begin) * plane,
                static_cast<size_t>(o[2] * plane) * sizeof(float));
  }
  return y;
}

Result<HostTensor> host_concat_frames(const HostTensor& a, const HostTensor& b) {
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa.rank() != 5 || sb.rank() != 5 || a.dtype() != DType::kF32 || b.dtype() != DType::kF32 ||
      sa[0] != sb[0] || sa[1] != sb[1] || sa[3] != sb[3] || sa[4] != sb[4]) {
    return invalid_argument("host_concat_frames: " + sa.to_string() + " and " + sb.to_string() +
                            " differ outside the frame axis");
  }
  Shape o = sa;
  o[2] = sa[2] + sb[2];
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor y, HostTensor::create(DType::kF32, o));
  const int64_t plane = sa[3] * sa[4];
  for (int64_t nc = 0; nc < sa[0] * sa[1]; ++nc) {
    float* dst = y.data<float>() + nc * o[2] * plane;
    std::memcpy(dst, a.data<float>() + nc * sa[2] * plane,
                static_cast<size_t>(sa[2] * plane) * sizeof(float));
    std::memcpy(dst + sa[2] * plane, b.data<float>() + nc * sb[2] * plane,
                static_cast<size_t>(sb[2] * plane) * sizeof(float));
  }
  return y;
}

namespace {

// Runs `call` on consecutive chunks [begin, end) of x's frames and joins the downloaded outputs.
template <typename Call>
Result<HostTensor> stream_chunks(Backend& backend, const HostTensor& x, int64_t first, int64_t step,
                                 Call call) {
  HostTensor out;
  CausalState state;
  const int64_t frames = x.shape()[2];
  for (int64_t begin = 0; begin < frames;) {
    const int64_t end = std::min(frames, begin + (begin == 0 ? first : step));
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor part, host_slice_frames(x, begin, end));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor in, backend.upload(part));
    SEEDVAE_ASSIGN_OR_RETURN(Tensor y, call(in, state));
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor host, backend.download(y));
    if (out.empty()) {
      out = std::move(host);
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(out, host_concat_frames(out, host));
    }
    begin = end;
  }
  return out;
}

}  // namespace

Result<HostTensor> stream_encode(VideoVae& vae, const HostTensor& video, int chunk_frames,
                                 int first_frames) {
  const Shape& s = video.shape();
  const int tf = vae.temporal_factor();
  if (s.rank() != 5 || s[2] < 1 || (s[2] - 1) % tf != 0) {
    return invalid_argument("stream_encode: the video " + s.to_string() + " needs " +
                            std::to_string(tf) + "n+1 frames");
  }
  if (first_frames < 1 || (first_frames - 1) % tf != 0 || chunk_frames < tf ||
      chunk_frames % tf != 0) {
    return invalid_argument("stream_encode: chunks of " + std::to_string(first_frames) + " then " +
                            std::to_string(chunk_frames) + " frames; the first needs " +
                            std::to_string(tf) + "k+1 frames, the others a multiple of " +
                            std::to_string(tf));
  }
  return stream_chunks(vae.backend(), video, first_frames, chunk_frames,
                       [&](const Tensor& x, CausalState& st) { return vae.encode_chunk(x, st); });
}

Result<HostTensor> stream_decode(VideoVae& vae, const HostTensor& latent, int chunk_latents,
                                 int first_latents) {
  const Shape& s = latent.shape();
  if (s.rank() != 5 || s[2] < 1) {
    return invalid_argument("stream_decode: the latent " + s.to_string() + " has no frame");
  }
  if (first_latents < 1 || chunk_latents < 1) {
    return invalid_argument("stream_decode: chunks need at least one latent frame");
  }
  return stream_chunks(vae.backend(), latent, first_latents, chunk_latents,
                       [&](const Tensor& z, CausalState& st) { return vae.decode_chunk(z, st); });
}

}  // namespace seedvae
