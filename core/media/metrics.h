// Reconstruction quality between two clips. Pure C++ (no OpenCV); the frames of a clip or chunk
// are measured in parallel (OpenMP where the build has it), with the same result on any number of
// threads.
#pragma once

#include "core/base/status.h"
#include "core/tensor/host_tensor.h"

namespace seedvae::media {

// All statistics are on the [0, 1] scale: inputs in [-1, 1] are mapped with (x + 1) / 2 and are
// NOT clamped (a decoder output outside [-1, 1] counts as it is).
struct QualityStats {
  // 10 * log10(1 / MSE) over every element of the clip (peak 1). +infinity for identical clips.
  double psnr_db = 0;
  // Mean over frames of the SSIM of Wang et al. (2004) computed on luma, BT.601
  // Y = 0.299 R + 0.587 G + 0.114 B: 11x11 Gaussian window with sigma 1.5 (normalised), K1 = 0.01,
  // K2 = 0.03, L = 1, population (co)variances, averaged over the "valid" positions where the
  // window lies fully inside the frame. Frames smaller than 11 pixels use the largest odd window
  // that fits (same sigma, renormalised). 1.0 for identical clips.
  double ssim = 0;
  double max_abs = 0;  // largest absolute difference
  double rms = 0;      // root mean square difference (PSNR = -20 log10(rms))
};

// a and b: the same shape [N, 3, T, H, W] (N >= 1; SSIM frames are every (n, t)), any float dtype.
// Errors: kInvalidArgument for mismatched or malformed shapes, empty clips or non-finite values.
Result<QualityStats> compare_clips(const HostTensor& a, const HostTensor& b);

// compare_clips() of a clip that arrives in pieces (chunks of frames, in any order): the sums
// behind PSNR, rms and the per-frame SSIM mean accumulate, so the result equals compare_clips() of
// the concatenated clips (up to the order of a floating-point sum) with only a chunk in memory.
class QualityAccumulator {
 public:
  // a and b as compare_clips() takes them; a chunk that fails the checks adds nothing.
  Status add(const HostTensor& a, const HostTensor& b);
  int64_t frames() const { return frames_; }
  // Errors: kInvalidArgument before anything was added.
  Result<QualityStats> result() const;
  // The running sums, for a job's checkpoint: a restored accumulator continues exactly where
  // the saved one stopped.
  struct Sums {
    int64_t elements = 0, frames = 0;
    double squares = 0, max_abs = 0, ssim_sum = 0;
  };
  Sums sums() const { return {elements_, frames_, squares_, max_abs_, ssim_sum_}; }
  void restore(const Sums& s) {
    elements_ = s.elements;
    frames_ = s.frames;
    squares_ = s.squares;
    max_abs_ = s.max_abs;
    ssim_sum_ = s.ssim_sum;
  }

 private:
  int64_t elements_ = 0, frames_ = 0;
  double squares_ = 0, max_abs_ = 0, ssim_sum_ = 0;
};

}  // namespace seedvae::media
