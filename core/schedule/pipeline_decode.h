// The pipelined decode: one clip's decoder spread over several devices of one host, with the
// output of one device, op for op.
//
// The decoder's units (VideoVae::decoder_units: resnets, the attention, upsamplers, the input and
// output convolutions) are cut into consecutive shares, one per device. Chunk k runs through
// device 0's share; its activation is copied to device 1 (Backend::import_tensor: peer to peer
// between cards), which runs its share of chunk k while device 0 starts chunk k + 1, and so on;
// the last device downloads the frames. Each device keeps the causal state of its own units only
// (a unit's memory is read and written by that unit alone), runs them on the same chunks with the
// same shapes as a single device would, and so computes the same products in the same order: the
// output is bit-identical to a single-device decode with the same chunking and kernels. The
// speed-up is that of a pipeline: with n devices and c chunks at best n * c / (c + n - 1), less
// the imbalance of the shares and the copies (docs/scaling.md, ARCHITECTURE.md).
//
// Threads: device 0's share runs on the calling thread with its model (the session's engine);
// every other device's on its worker thread with its own engine (device_workers.h). A tensor is
// released only by the thread of the backend that made it: a receiver hands each imported
// activation back to its sender.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.h"
#include "core/schedule/device_workers.h"
#include "core/schedule/streaming.h"
#include "core/vae/state_dict.h"
#include "core/vae/video_vae.h"

namespace seedvae {

// Where the decoder is cut: share s runs units [bounds[s], bounds[s + 1]); bounds[0] = 0,
// bounds.back() = the unit count.
struct PipelinePlan {
  std::vector<int> bounds;
  std::vector<std::string> units;  // the decoder's units (names, for reports)
  // Estimated seconds of each share per chunk on an H100-class card (the cost model below).
  std::vector<double> share_seconds;

  int shares() const { return static_cast<int>(bounds.size()) - 1; }
  // Share s: "0-15 (decoder.conv_in .. decoder.up_blocks.2.resnets.2)"
  std::string describe_share(int s) const;
  // Every share's, separated by " | ".
  std::string describe() const;
};

// Cuts the decoder of `weights` into `shares` consecutive shares of about equal time per chunk,
// by a cost model run on a dry-run backend (core/backend/counting_backend.h): each unit of a
// steady chunk of `chunk_latents` latent frames of h x w costs its FLOPs at a convolution rate
// plus the bytes of the tensors it makes at a memory rate (constants measured on an H100; only
// their ratio matters for the cut). `cuts`, when not empty, gives the first unit of shares
// 1 .. shares - 1 instead (ascending, each in (0, units)). Refuses more shares than units (and a
// network whose decoder lists none, VideoVae::decoder_units).
Result<PipelinePlan> plan_pipeline(const VaeWeights& weights, int shares, int64_t latent_height,
                                   int64_t latent_width, const StreamOptions& options,
                                   const std::vector<int>& cuts = {}, DType dtype = DType::kBF16);

// Where a share's host thread spent one decode, in ms: what shows a pipeline that stalls.
struct PipelineWaits {
  double input_ms = 0;    // waiting for the share before to hand an activation over
  double output_ms = 0;   // waiting for the share after to take one (the hand-over holds one)
  double enqueue_ms = 0;  // in decode_chunk (the host's launches; long: the host is the limit)
  double sync_ms = 0;     // waiting for the device to finish the chunk
  double host_ms = 0;     // the frames: downloads and the caller's hooks
  // name and value, for reports
  std::vector<std::pair<const char*, double>> fields() const {
    return {{"input", input_ms},
            {"output", output_ms},
            {"enqueue", enqueue_ms},
            {"sync", sync_ms},
            {"host", host_ms}};
  }
};

// What each device did in one decode (index = share); a worker's peaks are the decode's own.
struct PipelineStats {
  std::vector<std::string> backends;    // Backend::name()
  std::vector<double> busy_ms;          // host wall time in its imports and decode calls
  std::vector<MemoryStats> memory;      // its backend's statistics at the end (peaks)
  std::vector<int64_t> imported_bytes;  // activations copied in from the share before
  std::vector<double> import_ms;        // host time of those copies (of busy_ms)
  std::vector<PipelineWaits> waits;
};

// decode_latent() over the shares of `plan` on `devices` (plan.shares() == devices.devices(); share
// 0 is devices.first(), on the calling thread). Returns the decoded video [1, 3, 4t-3, sh, sw] in
// fp32 (unclamped) -- or, with hooks that do not gather, an empty tensor after handing every chunk
// to hooks.on_chunk on the calling thread in order. Cancellation is checked before each chunk on
// every device; the first error of any device stops all of them and is returned. `stats`, when
// given, is filled also on failure (as far as the devices got).
Result<HostTensor> decode_pipelined(DeviceWorkers& devices, const PipelinePlan& plan,
                                    const HostTensor& latent, const StreamOptions& options,
                                    const StreamHooks& hooks = {}, PipelineStats* stats = nullptr);

// One pipelined decode with engines made for it (DeviceWorkers::create, then decode_pipelined).
Result<HostTensor> decode_latent_pipelined(VideoVae& first, const DeviceEngineFactory& make,
                                           const PipelinePlan& plan, const HostTensor& latent,
                                           const StreamOptions& options,
                                           const StreamHooks& hooks = {},
                                           PipelineStats* stats = nullptr);

}  // namespace seedvae
