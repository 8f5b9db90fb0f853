// The job layer: one entry point for encode, decode and the round trip (read -> pad -> encode ->
// decode -> trim -> metrics -> write), used by the CLI, the studio's engine worker, the studio's
// headless job and the benchmark.
//
// Frames stream end to end: the reader delivers the input a chunk at a time to the encoder, and
// each decoded chunk is trimmed, compared with the source frames (read a second time, in step),
// written and handed to the caller as soon as it is finished, then dropped. Host memory holds a
// few chunks of frames and the latent, not the clip, so it does not grow with the clip's length
// (tests/ui/tst_stream_memory.cpp). Exceptions: a tiled encode reads the whole padded clip first
// (its tiles each run over every chunk), and a caller that wants frames afterwards keeps them in
// a media::FrameSpool (in memory or in a temporary file) through JobSpec::keep_original /
// keep_reconstruction. No front end reads, pads, chunks, tiles, plans a budget,
// prefetches, measures or writes by itself; they describe a job (JobSpec: RunOptions, input,
// weights) and receive its results (JobResult) and, while it runs, its progress, telemetry,
// decoded frames and tiles (JobCallbacks).
//
// Threads: a Session and everything it holds (backend, model, clip) belong to the thread that
// runs its jobs (for CUDA, the thread that owns the device). Cancellation comes from any thread
// through the CancelToken; it is checked between chunks and tiles and after every block of the
// model, so it takes effect within one chunk or tile.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend/backend.h"
#include "core/base/cancel.h"
#include "core/base/progress.h"
#include "core/base/telemetry.h"
#include "core/media/frame_spool.h"
#include "core/media/metrics.h"
#include "core/media/vae_padding.h"
#include "core/media/video_io.h"
#include "core/pipeline/run_options.h"
#include "core/schedule/seam_metrics.h"
#include "core/schedule/tiled.h"
#include "core/vae/state_dict.h"
#include "core/vae/vae_model.h"

namespace seedvae {

// Makes the backend a RunOptions asks for (the composition root knows which backends exist:
// app/backends.h). Called on the session's thread.
using BackendFactory = std::function<Result<std::unique_ptr<Backend>>(const RunOptions&)>;

// The frames a job reads: a video file, image directory, printf pattern or image, or (empty
// path) the built-in synthetic sample clip.
struct JobInput {
  std::filesystem::path path;
  int64_t first_frame = 0;
  int64_t max_frames = -1;  // -1: to the end
  int stride = 1;
  int resize_width = 0, resize_height = 0;  // 0: keep (one of them 0: keep the aspect ratio)
  int sample_width = 256, sample_height = 256, sample_frames = 17;

  bool is_sample() const { return path.empty(); }
};

enum class JobKind { kEncode, kDecode, kRoundTrip };

// How a latent file holds the latent: the raw posterior mean; SeedVR2's DiT space (x 0.9152);
// Wan's normalisation (mu - mean) * (1 / std) per channel, which the upstream Wan wrappers return
// and Wan's DiT takes. Jobs work on the raw latent; the file's space is undone when it is read.
enum class LatentSpace { kRaw, kDit, kWanNormalized };
std::string_view latent_space_name(LatentSpace space);  // "raw", "dit", "wan-normalized"

struct JobSpec {
  JobKind kind = JobKind::kRoundTrip;
  std::shared_ptr<const VaeWeights> weights;
  RunOptions options;
  JobInput input;  // encode and round trip
  // Decode: the raw VAE latent [1, C, t, h, w] and how its frames map to the video (the padding
  // to remove; LatentFile reads both from a file), and the family that made it when known (a
  // latent of another family is refused).
  std::shared_ptr<const HostTensor> latent;
  std::optional<VaeFamily> latent_family;
  std::filesystem::path latent_path;  // the file it came from, if any (never overwritten)
  media::PadPlan latent_plan;
  double latent_fps = 24;
  // Encode: the latent is the posterior mean, or mean + std * noise from `seed`. Its file holds
  // it raw (SeedVR2's default), in SeedVR2's DiT space (`dit_latent`), or for a Wan VAE
  // normalised as the upstream wrapper returns it (the default; `raw_latent`: raw). As
  // latent_space() says.
  bool sample_latent = false;
  uint64_t seed = 0;
  bool dit_latent = false;
  bool raw_latent = false;
  // Written when not empty: the latent (encode, a .safetensors file with the padding plan and
  // fps) or the reconstruction (decode, round trip; a video file or a PNG directory).
  std::filesystem::path output;
  // Predict the run's peak memory with the planner first (JobResult::predicted_peak_bytes).
  bool predict = false;
  // When set, the frames are also appended here for later reading: the source frames as read
  // ([1, 3, T, H, W] in [-1, 1]; encode, round trip) and the reconstruction, trimmed and clamped
  // (decode, round trip). A spool on disk keeps host memory flat.
  std::shared_ptr<media::FrameSpool> keep_original, keep_reconstruction;
  // A resumable job (resumable() below) continues from a checkpoint of the same job it finds
  // beside its output (checkpoint_dir()); `restart` discards that checkpoint and starts over. A
  // checkpoint of another job (kind, input or latent, weights, settings or frame range differ)
  // is refused (kInvalidArgument naming what differs) unless `restart`.
  bool restart = false;
};

// The input once it has been read to its end (after the encode): its padding and frame rate.
struct InputClip {
  media::PadPlan plan;
  double fps = 24;
};

struct JobCallbacks {
  const CancelToken* cancel = nullptr;
  ProgressSink* progress = nullptr;    // per chunk or tile: "encode", "decode tiles", ...
  TelemetrySink* telemetry = nullptr;  // the model's stage samples (core/base/telemetry.h)
  // The job enters a phase: "read", "encode", "decode" (with the metrics and the writing of each
  // chunk), "write" (finishing the output file).
  std::function<void(std::string_view phase)> on_phase;
  // The input has been read to its end (after the encode): the clip's size and frame count.
  std::function<Status(const InputClip&)> on_input;
  // Each decoded chunk as the reconstruction's frames [first, first + k): trimmed to the source
  // size, temporal padding dropped, clamped to [-1, 1]. The tensor lives only during the call.
  ChunkSink on_decoded;
  TileSink on_tile;  // every tile of a tiled decode, before blending
};

// The space an encode job writes its latent file in (JobSpec::dit_latent, raw_latent).
LatentSpace latent_space(const VaeWeights& weights, const JobSpec& job);
// The latent a round trip decodes from the posterior mean `mu`: `mu` for SeedVR2; for a Wan VAE
// mu normalised and back, in fp32, as the upstream wrapper's encode and decode compute it.
Result<HostTensor> as_decoded(const VaeWeights& weights, const HostTensor& mu);

struct JobResult {
  std::string backend_name;
  std::string weights_source;  // VaeWeights::source
  media::PadPlan plan;
  double fps = 24;
  HostTensor latent;  // encode, round trip: the raw VAE latent (posterior mean or sample)
  std::optional<media::QualityStats> quality;  // round trip: reconstruction vs original
  TileRunReport tiles;                         // the decode's tiling
  std::optional<SeamMetrics> seams;            // a tiled decode's seam figures
  double read_s = 0;       // reading and padding (with prefetch: the reader thread's time)
  double read_wait_s = 0;  // of which the engine waited for
  // A resumable round trip: the source's work on the engine thread (each chunk's padding and the
  // frames kept for the end's temporal padding), besides the reader thread's read_s.
  double read_engine_s = 0;
  // encode_s and decode_s are the engine's time: the encode less its waits for frames
  // (read_wait_s) and keeping them (keep_original), the streamed decode less the host's work on its
  // finished chunks (trimming, metrics_s, write_s, the caller's on_decoded). Where copies are
  // asynchronous that work runs while the device computes the next chunk, so subtracting it can
  // undercount: on a backend with a device timer the device's own time of the phase's chunks
  // (Backend::device_busy_ms) is the floor. total_s is the whole job.
  double encode_s = 0, decode_s = 0, metrics_s = 0, write_s = 0, total_s = 0;
  // A resumable run measures and writes each chunk on a thread of its own while the engine goes
  // on (metrics_s and write_s are that thread's time): how long the engine waited for it.
  double sink_wait_s = 0;
  // A resumable run: the time its checkpoints took (closing a segment, saving the causal state).
  double checkpoint_s = 0;
  bool prefetch = false;         // frames were read on the prefetch thread
  std::string prefetch_note;     // why not, when not ("off", "does not apply: ...")
  bool async_tiles = false;      // chunks/tiles were queued ahead
  std::string async_tiles_note;  // why not, when not ("off", "does not apply: ...")
  std::string plan_note;         // what the memory budget chose
  // What the user should know about the input or output that did not stop the job (a
  // truncated input, an output format that stores another size).
  std::vector<std::string> warnings;
  // A job over several devices (RunOptions::devices): what each device ran, its backend, its busy
  // time and its memory statistics at the end (peaks).
  struct DeviceShare {
    std::string backend;
    // "units 0-14 (decoder.conv_in .. decoder.up_blocks.2.resnets.1)" (a pipelined decode's
    // share) or "12 decode tiles" (blend tiles)
    std::string share;
    double busy_ms = 0;
    MemoryStats memory;
  };
  std::vector<DeviceShare> device_shares;
  int64_t weight_bytes = 0;  // the backend's bytes after the model was created
  int64_t peak_bytes = 0;    // the backend allocator's peak during the job (weights included)
  int64_t predicted_peak_bytes = -1;  // JobSpec::predict
  std::filesystem::path output;       // what was written
  // A resumable job: it wrote checkpoints (checkpoint_dir()), and this run continued one at this
  // frame (a round trip's source frame, a decode's output frame; 0: from the start).
  bool checkpointed = false;
  int64_t resumed_at_frame = 0;

  double read_overlap_s() const { return read_s > read_wait_s ? read_s - read_wait_s : 0; }
  // (encode + decode) per frame this run computed (source frames of a round trip or an encode,
  // output frames of a decode; a resumed run's from resumed_at_frame on), in milliseconds.
  double ms_per_frame() const;
};

class Session {
 public:
  explicit Session(BackendFactory make_backend);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs one job. The backend is made anew when the options' backend_key() changes (the model
  // with it), and the model when the weights change. `result` holds what the job found out so
  // far, also when it fails or is cancelled (whether it prefetched, its timings).
  Status run(const JobSpec& job, const JobCallbacks& callbacks, JobResult& result);
  // Frees the model and the backend (and with it the device).
  void release();
  // The backend of the last job; nullptr before the first job and after release().
  Backend* backend() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// ---- resumable jobs ---------------------------------------------------------------------------
//
// A round trip or a decode into a video file or an image directory, untiled, streamed in chunks,
// with no frames kept (keep_original / keep_reconstruction) and, for a round trip, the posterior
// mean as latent, runs resumable when options.checkpoint_chunks > 0. A round trip encodes each
// chunk and at once decodes it (the encoder's and the decoder's causal state carried on), so
// host memory holds a chunk, not the latent of the clip; a decode decodes the latent's chunks in
// turn (the decoder's causal state carried on). The output is written in segments of
// checkpoint_chunks chunks (media::SegmentedClipWriter: each video segment coded by a fresh
// encoder), and after each segment a checkpoint is committed in checkpoint_dir(output): the
// causal states (a .safetensors file), the next frame (a round trip's next source frame, a
// decode's next output frame), the frames written, a round trip's metrics' running sums and a
// fingerprint of the job (a decode's latent by its contents). A cancel or failure leaves the
// last checkpoint and no output file; the same job run again continues after it (a round trip
// reads its source from there; the encoder and decoder resume their state) and writes the same
// segments, which are joined into the output at the end (a video remuxed with the source's
// audio, bit-exact): the same bytes as an uninterrupted run, with the frames of the one-pass
// run. The checkpoint folder is removed once the output is in place.

// "<output>.seedvae-resume" beside the output (trailing separators of a directory dropped).
std::filesystem::path checkpoint_dir(const std::filesystem::path& output);
// Whether the job runs resumable; `why` says why not ("no output file", "a tiled decode ...").
bool resumable(const JobSpec& job, std::string* why = nullptr);
// Whether a checkpoint (of any job) waits beside `output`, and the source frame it stopped at.
std::optional<int64_t> checkpoint_frame(const std::filesystem::path& output);

// ---- the steps, for the benchmark and for tests -------------------------------------------------

// The tiling of a run over a `height` x `width` frame of `frames` frames: the options' mode,
// tile and overlap; with a memory budget and no tile size, the planner's largest tile that fits
// (resolve_tile, core/pipeline/prediction.h).
Result<TileOptions> tile_options(const RunOptions& options, const VaeWeights& weights, bool encode,
                                 int64_t height, int64_t width, int64_t frames, std::string* note);
// Encodes a padded clip / decodes a latent as the options say (untiled, blend or exact tiling);
// blend tiles spread over `devices` when given (TileOptions::devices; its first() is `model`).
Result<HostTensor> encode_clip(VideoVae& model, const VaeWeights& weights, const HostTensor& video,
                               const RunOptions& options, const StreamHooks& hooks,
                               TileHooks* tile_hooks, std::string* note,
                               DeviceWorkers* devices = nullptr);
Result<HostTensor> decode_clip(VideoVae& model, const VaeWeights& weights, const HostTensor& latent,
                               const RunOptions& options, const StreamHooks& hooks,
                               TileHooks* tile_hooks, std::string* note,
                               DeviceWorkers* devices = nullptr);

// ---- checks a job makes before any work, for front ends that write or allocate by themselves --

// The job's output: refused when it is (through links) the input, its frame directory, the
// latent read or the weights file (kInvalidArgument), when its directory is missing (kNotFound)
// or refuses new files (kIoError), and when its name is no form the job writes (an encode
// writes .safetensors; a decode or round trip a video, an image or a PNG directory:
// media::check_clip_destination), or when the output options do not suit it (a codec its
// container cannot hold, a bit depth the codec does not store). Nothing to check without an
// output.
Status check_job_paths(const JobSpec& job);
// How a decode or round trip writes its video (the options' output group). A round trip from a
// video file names it as the source, with the frame selection, so the output keeps the input's
// timestamps, colour description and audio (media::WriteOptions::source).
media::WriteOptions write_options(const RunOptions& options, double fps, const JobInput* input);
// The same checks for an output written apart from a job (the studio saving a reconstruction or
// a report's video): `input` as the job read it, the weights' source (VaeWeights::source).
Status check_output_against(const std::filesystem::path& output, JobKind kind,
                            const JobInput& input, const std::string& weights_source,
                            const std::filesystem::path& latent_path = {});

// Refuses (kOutOfMemory, with the bytes needed and the machine's memory) a run over `frames`
// frames of `width` x `height` source pixels whose host buffers (the padded clip and the
// decoded output, and on the CPU backend the engine's activations, as predict_memory() counts
// them) exceed the machine's physical memory, before anything is allocated.
Status check_host_memory(const RunOptions& options, const VaeWeights& weights, int64_t width,
                         int64_t height, int64_t frames);

// Refuses (kCorruptData, naming the first such tensor and element) weights holding NaN or
// infinite values, which would turn every output into NaN.
Status check_finite_weights(const VaeWeights& weights);

// Whether frames are read ahead on a prefetch thread (RunOptions::prefetch): `why` says why not.
// "on" where it does not apply is an error with the reason.
Result<bool> use_prefetch(const RunOptions& options, std::string* why);

// A latent written by an encode job: the tensor in raw VAE space (the file's space undone), the
// padding plan (sizes 0 where the file records none: the whole decode), the frame rate and the
// family that wrote it (when recorded).
struct LatentFile {
  HostTensor latent;
  media::PadPlan plan;
  double fps = 24;
  LatentSpace space = LatentSpace::kRaw;  // as the file held it
  std::optional<VaeFamily> family;
};
Result<LatentFile> read_latent_file(const std::filesystem::path& path);
// Reads the latent file `path` into a decode job: its latent, plan, family and frame rate, and
// `path` as the job's latent_path.
Status read_decode_latent(const std::filesystem::path& path, JobSpec& job);
// Writes the raw `latent` in `space` with the plan, fps, the weights' family and source in the
// metadata. kInvalidArgument for a space of another family (DiT for Wan, Wan's for SeedVR2).
Status write_latent_file(const std::filesystem::path& path, const HostTensor& latent,
                         const media::PadPlan& plan, double fps, const VaeWeights& weights,
                         LatentSpace space);

}  // namespace seedvae
