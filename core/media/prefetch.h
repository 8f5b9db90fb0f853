// Frame prefetch: video decoding and colour conversion run ahead of the engine on their
// own thread, a bounded number of chunks ahead, while the engine thread encodes the chunks
// already read. The engine thread stays the only thread that touches the backend: the prefetch
// thread only produces host tensors, the engine pulls them (VideoFrameSource::next(), called by
// encode_stream()) and uploads them itself.
//
// Memory: the frames land in ordinary pageable host memory (HostTensor is a std::vector). The
// CUDA backend already stages every upload through its own page-locked buffers and DMAs from
// there (gpu/cuda_backend.cpp), so writing straight into pinned memory would save one host memcpy
// per chunk but need an allocator hook in HostTensor and the Backend interface; not done (yet).
//
// Bounded: the reader starts a chunk only while fewer than `depth` chunks wait in the queue, so
// at most `depth` chunks are read ahead of the one the engine is working on (stats().peak_ahead).
// Shutdown: the destructor stops the thread (it polls a stop token between frames) and joins it,
// whatever state it is in; errors of the reader arrive as the Status of the consumer's next pull.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/cancel.h"
#include "core/base/status.h"
#include "core/media/vae_padding.h"
#include "core/media/video_io.h"
#include "core/schedule/streaming.h"
#include "core/tensor/host_tensor.h"

namespace seedvae::media {

struct PrefetchStats {
  int64_t chunks_read = 0;  // chunks the reader finished (including a final empty one)
  int64_t peak_ahead = 0;   // most chunks read or being read that the consumer had not pulled
  double read_seconds = 0;  // time spent reading (decode, convert) on the reader's side
  double wait_seconds = 0;  // time the consumer spent waiting for frames
  // VideoFrameSource: time in VideoSourceOptions::on_frames (the caller's work, on the consumer's
  // thread)
  double hook_seconds = 0;
};

// Reads frames for the reader thread: at most max_frames, polling `stop` between frames; fewer
// than max_frames (or an empty tensor) only at the end of the stream.
using ChunkProducer =
    std::function<Result<HostTensor>(int64_t max_frames, const CancelToken* stop)>;

class PrefetchReader {
 public:
  // Starts the thread at once: it produces chunks of first_chunk frames, then chunk frames each,
  // keeping at most `depth` (>= 1) of them queued, and ends after a short or empty chunk or an
  // error. `cancel` (may be null) is the caller's token: a consumer waiting in next() returns
  // kCancelled when it is requested.
  PrefetchReader(ChunkProducer produce, int64_t first_chunk, int64_t chunk, int depth,
                 const CancelToken* cancel = nullptr);
  ~PrefetchReader();  // stops the reader (between frames) and joins it
  PrefetchReader(const PrefetchReader&) = delete;
  PrefetchReader& operator=(const PrefetchReader&) = delete;

  // The next chunk, in order; blocks until the reader has it. An empty tensor after the end; the
  // reader's error (again on every later call) if it failed.
  Result<HostTensor> next();
  PrefetchStats stats() const;

 private:
  void run();

  ChunkProducer produce_;
  const int64_t first_chunk_, chunk_;
  const int depth_;
  const CancelToken* cancel_;
  CancelToken stop_;
  mutable std::mutex mu_;
  std::condition_variable space_, data_;
  std::deque<Result<HostTensor>> queue_;
  bool producing_ = false;  // a chunk is being read
  bool done_ = false;       // the reader pushed its last item
  bool stopping_ = false;
  std::optional<Status> error_;  // sticky error seen by the consumer
  PrefetchStats stats_;
  std::thread thread_;  // last: started after everything above exists
};

// The encoder's chunks in frames for chunk_latents (the first one, then each next one) with
// temporal factor 4: {4c + 1, 4c} ({1, 4c} with StreamOptions::lone_head); the whole stream at
// once for c <= 0.
std::pair<int64_t, int64_t> encoder_chunk_frames(int chunk_latents, int temporal_factor = 4,
                                                 bool lone_head = false);

struct VideoSourceOptions {
  ReadOptions read;
  int spatial_multiple = 8;  // right/bottom padding to this multiple, as plan_padding()
  TemporalPad temporal_pad = TemporalPad::kMirror;
  bool prefetch = true;    // read on a prefetch thread (false: read inside next())
  int prefetch_depth = 2;  // chunks read ahead of the one being encoded
  // Prefetch granularity: the chunks the encoder will ask for (encoder_chunk_frames()). Other
  // request sizes work too (the source splits and joins chunks), with one extra copy.
  int64_t first_chunk_frames = 5, chunk_frames = 4;
  // Called with every source frame, before padding, in order, on the consumer's thread (a round
  // trip keeps its originals this way); an error stops the stream with that status.
  std::function<Status(const HostTensor& frames)> on_frames;
  // A resumed stream: the clip's first `resume_frames` frames were consumed by an earlier run.
  // The source starts there (a file is read from read.first_frame + resume_frames * stride, the
  // sample clip's frames before it are generated and dropped) and delivers the rest exactly as
  // the uninterrupted stream would: plan().frames counts the whole clip, and the temporal padding
  // at the end uses the up to 4 frames before the resume point when the rest is shorter (they
  // are read again, not delivered, not passed to on_frames). first_chunk_frames applies to the
  // first chunk after the resume point.
  int64_t resume_frames = 0;
};

// The frames of the built-in sample clip (generate_sample_frames) as a producer: `frames` frames
// of width x height from frame `first` on, then the end. A stop is seen between two frames.
ChunkProducer sample_frames(int width, int height, int64_t frames, int64_t first = 0);

// A video file / image sequence as a FrameSource for encode_stream(): frames read incrementally
// (FrameReader, on a PrefetchReader thread when options.prefetch), padded per chunk at the
// right/bottom to the spatial multiple, and at the end of the stream to 4n+1 frames with
// TemporalPad (the pad frames go into the last chunk). The frames delivered are bit-identical to
// apply_padding(read_clip(...)) of the same options, chunk by chunk.
class VideoFrameSource final : public FrameSource {
 public:
  static Result<std::unique_ptr<VideoFrameSource>> open(const std::filesystem::path& source,
                                                        const VideoSourceOptions& options,
                                                        const CancelToken* cancel = nullptr);
  // The built-in sample clip (make_sample_clip) at 24 fps, padded and delivered the same way
  // (options.read does not apply).
  static Result<std::unique_ptr<VideoFrameSource>> sample(int width, int height, int64_t frames,
                                                          const VideoSourceOptions& options,
                                                          const CancelToken* cancel = nullptr);
  ~VideoFrameSource() override;

  Result<HostTensor> next(int64_t max_frames) override;

  bool finished() const { return finished_; }
  // The padding plan of the whole clip; complete once finished().
  const PadPlan& plan() const { return plan_; }
  double fps() const { return fps_; }
  // The clip's source frames as the source states them (resumed frames included), -1 when it
  // does not: for progress.
  int64_t expected_frames() const { return expected_; }
  // Once finished(): a truncated source's warning (FrameReader::warning).
  std::string warning() const;
  bool prefetching() const { return prefetch_ != nullptr; }
  PrefetchStats stats() const;

 private:
  VideoFrameSource() = default;
  static Result<std::unique_ptr<VideoFrameSource>> start(std::unique_ptr<VideoFrameSource> s,
                                                         const CancelToken* cancel);
  Result<HostTensor> raw_next(int64_t n);
  Result<HostTensor> pad_frames(int64_t count);
  Status read_lead();  // a resumed stream's frames before the resume point, into history_

  VideoSourceOptions opts_;
  std::optional<FrameReader> reader_;         // a file source
  ChunkProducer produce_;                     // reads from reader_, or generates the sample clip
  std::unique_ptr<PrefetchReader> prefetch_;  // after both: stopped and joined first
  double fps_ = 24;
  HostTensor pending_;  // frames pulled from the prefetcher but not delivered yet
  bool raw_end_ = false;
  HostTensor tail_;  // padded frames due in the next call
  bool finished_ = false;
  PadPlan plan_;
  HostTensor history_;    // the last (up to 4) padded source frames, for the temporal padding
  PrefetchStats direct_;  // stats without a prefetch thread
  double hook_seconds_ = 0;
  int64_t expected_ = -1;
  int64_t lead_ = 0;  // frames before the resume point still to read into history_
};

}  // namespace seedvae::media
