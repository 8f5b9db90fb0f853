#include "core/media/vae_padding.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace seedvae::media {

std::string_view temporal_pad_name(TemporalPad mode) {
  switch (mode) {
    case TemporalPad::kMirror: return "mirror";
    case TemporalPad::kRepeatLast: return "repeat-last";
  }
  return "unknown";
}

Result<TemporalPad> temporal_pad_from_name(std::string_view name) {
  if (name == "mirror" || name == "numz") return TemporalPad::kMirror;
  if (name == "repeat-last" || name == "repeat_last" || name == "repeat" || name == "official") {
    return TemporalPad::kRepeatLast;
  }
  return invalid_argument("unknown temporal padding '" + std::string(name) +
                          "' (expected mirror or repeat-last)");
}

int64_t next_4n_plus_1(int64_t t) {
  if (t <= 1) return 1;
  return ((t - 1 + 3) / 4) * 4 + 1;
}

namespace {

int64_t round_up(int64_t v, int64_t m) {
  return ((v + m - 1) / m) * m;
}

}  // namespace

PadPlan plan_padding(int64_t frames, int64_t height, int64_t width, int spatial_multiple) {
  PadPlan p;
  p.frames = frames;
  p.height = height;
  p.width = width;
  if (frames < 1 || height < 1 || width < 1 || spatial_multiple < 1 ||
      frames > (int64_t{1} << 40) || height > (int64_t{1} << 30) || width > (int64_t{1} << 30)) {
    return p;  // padded sizes stay 0: rejected by apply_padding
  }
  p.padded_frames = next_4n_plus_1(frames);
  p.padded_height = round_up(height, spatial_multiple);
  p.padded_width = round_up(width, spatial_multiple);
  return p;
}

std::vector<int64_t> temporal_source_indices(int64_t frames, int64_t padded_frames,
                                             TemporalPad mode) {
  std::vector<int64_t> idx;
  if (frames < 1 || padded_frames < frames) return idx;
  idx.reserve(static_cast<size_t>(padded_frames));
  for (int64_t i = 0; i < frames; ++i) idx.push_back(i);
  const int64_t k = padded_frames - frames;
  const int64_t last = frames - 1;
  if (mode == TemporalPad::kRepeatLast) {
    for (int64_t i = 0; i < k; ++i) idx.push_back(last);
  } else if (k < frames) {
    // videos[-k-1:-1].flip(): T-2, T-3, ..., T-1-k
    for (int64_t i = 1; i <= k; ++i) idx.push_back(last - i);
  } else {
    // videos[1:].flip() = T-1, ..., 1, then k-T+1 copies of the last frame
    for (int64_t i = last; i >= 1; --i) idx.push_back(i);
    for (int64_t i = 0; i < k - frames + 1; ++i) idx.push_back(last);
  }
  return idx;
}

namespace {

Status check_video_tensor(const HostTensor& v, const char* what) {
  if (v.shape().rank() != 5) {
    return invalid_argument(std::string(what) + " must be [N, C, T, H, W], got " +
                            v.shape().to_string());
  }
  int64_t n = 0;
  if (!v.shape().checked_numel(&n) || n * dtype_size(v.dtype()) != v.nbytes()) {
    return invalid_argument(std::string(what) + " " + v.shape().to_string() +
                            " does not match its storage");
  }
  return Status::ok();
}

// Writes the value -1 in `dtype` into `dst`.
void minus_one_bytes(DType dtype, std::byte* dst) {
  const float m1 = -1.0f;
  convert_elements(&m1, DType::kF32, dst, dtype, 1);
}

}  // namespace

Result<HostTensor> apply_padding(const HostTensor& video, const PadPlan& plan, TemporalPad mode) {
  SEEDVAE_TRY(check_video_tensor(video, "video"));
  const Shape& s = video.shape();
  if (s.t() != plan.frames || s.h() != plan.height || s.w() != plan.width) {
    return invalid_argument("video " + s.to_string() + " does not match the padding plan (T=" +
                            std::to_string(plan.frames) + ", H=" + std::to_string(plan.height) +
                            ", W=" + std::to_string(plan.width) + ")");
  }
  if (plan.padded_frames < plan.frames || plan.padded_height < plan.height ||
      plan.padded_width < plan.width || plan.padded_frames < 1 || plan.padded_height < 1 ||
      plan.padded_width < 1) {
    return invalid_argument("invalid padding plan (padded sizes smaller than the clip)");
  }
  const int64_t N = s.n(), C = s.c(), T = s.t(), H = s.h(), W = s.w();
  const int64_t PT = plan.padded_frames, PH = plan.padded_height, PW = plan.padded_width;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor out,
                           HostTensor::create(video.dtype(), Shape{N, C, PT, PH, PW}));
  const std::vector<int64_t> src_t = temporal_source_indices(T, PT, mode);
  const size_t es = static_cast<size_t>(dtype_size(video.dtype()));

  // One padded frame filled with -1; frames are then copied row by row over it.
  std::vector<std::byte> minus_one(es);
  minus_one_bytes(video.dtype(), minus_one.data());

  const auto* in = static_cast<const std::byte*>(video.raw());
  auto* o = static_cast<std::byte*>(out.raw());
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t t = 0; t < PT; ++t) {
      std::byte* dst = o + static_cast<size_t>(((nc * PT + t) * PH) * PW) * es;
      const std::byte* src =
          in + static_cast<size_t>(((nc * T + src_t[static_cast<size_t>(t)]) * H) * W) * es;
      for (int64_t y = 0; y < PH; ++y) {
        std::byte* drow = dst + static_cast<size_t>(y * PW) * es;
        int64_t x0 = 0;
        if (y < H) {
          std::memcpy(drow, src + static_cast<size_t>(y * W) * es, static_cast<size_t>(W) * es);
          x0 = W;
        }
        for (int64_t x = x0; x < PW; ++x)
          std::memcpy(drow + static_cast<size_t>(x) * es, minus_one.data(), es);
      }
    }
  }
  return out;
}

Result<HostTensor> remove_padding_checked(const HostTensor& decoded, const PadPlan& plan) {
  SEEDVAE_TRY(check_video_tensor(decoded, "decoded video"));
  const Shape& s = decoded.shape();
  if (plan.frames < 1 || plan.height < 1 || plan.width < 1 || s.t() < plan.frames ||
      s.h() < plan.height || s.w() < plan.width) {
    return invalid_argument("decoded video " + s.to_string() + " is smaller than the original T=" +
                            std::to_string(plan.frames) + ", H=" + std::to_string(plan.height) +
                            ", W=" + std::to_string(plan.width));
  }
  const int64_t N = s.n(), C = s.c(), T = s.t(), H = s.h(), W = s.w();
  const int64_t OT = plan.frames, OH = plan.height, OW = plan.width;
  SEEDVAE_ASSIGN_OR_RETURN(HostTensor out,
                           HostTensor::create(decoded.dtype(), Shape{N, C, OT, OH, OW}));
  const size_t es = static_cast<size_t>(dtype_size(decoded.dtype()));
  const auto* in = static_cast<const std::byte*>(decoded.raw());
  auto* o = static_cast<std::byte*>(out.raw());
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t t = 0; t < OT; ++t) {
      for (int64_t y = 0; y < OH; ++y) {
        std::memcpy(o + static_cast<size_t>(((nc * OT + t) * OH + y) * OW) * es,
                    in + static_cast<size_t>(((nc * T + t) * H + y) * W) * es,
                    static_cast<size_t>(OW) * es);
      }
    }
  }
  return out;
}

HostTensor remove_padding(const HostTensor& decoded, const PadPlan& plan) {
  auto r = remove_padding_checked(decoded, plan);
  if (!r) return HostTensor();
  return std::move(r).value();
}

}  // namespace seedvae::media
