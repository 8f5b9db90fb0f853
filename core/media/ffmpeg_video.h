// Video files through FFmpeg's libraries (libavformat, libavcodec, libavutil, libswscale); private
// to seedvae_media and included only by its .cpp files. No FFmpeg type appears here: decoded frames
// travel as OpenCV matrices (the reader's resize and packing are shared with image files), and
// every FFmpeg error code is turned into a Status naming the path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "core/base/cancel.h"
#include "core/base/status.h"
#include "core/media/video_io.h"

namespace seedvae::media::detail {

// Silences FFmpeg's own log (its errors come back as Status values) unless SEEDVAE_FFMPEG_LOG is
// set in the environment; called before the first use of the libraries.
void init_ffmpeg_once();

// What the container and the decoder say about the best video stream of a file.
struct StreamInfo {
  int width = 0, height = 0;  // as displayed, after rotation
  int bit_depth = 8;          // bits per sample of the decoded format
  int output_depth = 8;       // the reader's samples: 8, 10, 12 or 16 bits
  double fps = 0;             // average rate; 0 when the container's value is unusable
  int rotation = 0;           // clockwise degrees the frames are turned on reading
  // The container's frame count (or its duration times the rate), -1 when it states neither.
  int64_t listed_frames = -1;
  std::string codec;  // decoder name
  int audio_streams = 0;
  // Colour description as FFmpeg's AVColor* enumerations; the matrix is the one the reader used
  // (the container's, or BT.709 from 720 lines up and BT.601 below when it states none).
  int color_range = 0, color_space = 0, color_primaries = 0, color_trc = 0;
  bool rgb = false;             // the decoded samples are RGB (no matrix)
  int tb_num = 1, tb_den = 24;  // time base of the stream's timestamps
};

// Sequential decoding of a file's video stream, frame by frame.
class VideoDecoder {
 public:
  // kNotFound / kIoError / kCorruptData / kCancelled with the path in the message. `cancel` (may
  // be null) also interrupts blocking reads.
  static Result<std::unique_ptr<VideoDecoder>> open(const std::filesystem::path& path,
                                                    const CancelToken* cancel);
  ~VideoDecoder();
  const StreamInfo& info() const;
  // Decodes the next frame; false at the end of the stream. With `rgb`, the frame converted to
  // RGB (CV_8UC3 for 8-bit output, CV_16UC3 holding samples up to max_value() otherwise) and
  // turned upright.
  Result<bool> next(cv::Mat* rgb);
  // Presentation time and duration of the frame next() returned, in the stream's time base
  // (increasing; synthesised where the file has none).
  int64_t pts() const;
  int64_t duration() const;
  double max_value() const;  // 255, 1023, 4095 or 65535
  // Damaged packets skipped, and whether reading stopped on an error instead of the end.
  int decode_errors() const;

 private:
  struct Impl;
  explicit VideoDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Every frame's timing and the stream description of a source video. Decodes it, once: the
// last scan is kept and given again while the file keeps its path, size and modification time.
struct SourceTiming {
  StreamInfo info;
  std::vector<int64_t> pts;  // presentation times, stream time base
  int64_t end = 0;           // end of the last frame
};
Result<SourceTiming> scan_source(const std::filesystem::path& path, const CancelToken* cancel);
// Scans that decoded a source, since the process started (for tests).
int64_t source_scans();

// The encoder a destination gets under the options: by extension, or the override.
struct CodecPlan {
  std::string codec;      // h264 h265 ffv1 prores prores4444 mjpeg
  std::string encoder;    // libavcodec's encoder name
  std::string container;  // libavformat's muxer name
  int bit_depth = 8;      // 8, 10 or 16
  bool lossless = false;
  int crf = -1;        // h264/h265; -1 for the others
  std::string preset;  // h264/h265
};
// kInvalidArgument for a combination that cannot be written (the reason and what to change),
// kUnsupported when this FFmpeg lacks the encoder. `source_depth` 0 when unknown.
Result<CodecPlan> plan_codec(const std::filesystem::path& destination, const WriteOptions& options,
                             int source_depth);

// How a VideoFileWriter makes its file.
enum class WriterMode {
  kEncode,   // frames encoded into the destination's container, with the source's audio
  kSegment,  // a closed segment of a resumable job: a fresh encoder (its first frame a
             // keyframe, no reference to other segments) for frames from `first_frame` on, at
             // their timestamps in the whole clip, in NUT (ProRes: QuickTime), without audio
  kJoin,     // the destination's container and audio, its video packets copied from segments
             // (append_segment); bit-exact muxing, so the same segments give the same bytes
};

// Encodes frames into a file and muxes the source's audio beside them.
class VideoFileWriter {
 public:
  // `file` is where the bytes go (the temporary), `destination` names it in messages. The
  // header is written here: every option and the source are checked before any frame.
  static Result<std::unique_ptr<VideoFileWriter>> open(const std::filesystem::path& file,
                                                       const std::filesystem::path& destination,
                                                       const WriteOptions& options, int width,
                                                       int height, const CancelToken* cancel,
                                                       WriterMode mode = WriterMode::kEncode,
                                                       int64_t first_frame = 0);
  // kJoin: copies the video packets of a kSegment file written for the same destination,
  // options and size, whose frames follow those copied so far. Returns its frame count.
  Result<int64_t> append_segment(const std::filesystem::path& segment);
  ~VideoFileWriter();
  // Frame t of an fp32 [1, 3, T, H, W] clip.
  Status write(const float* video, int64_t T, int64_t t);
  // Flushes the encoder, the rest of the audio and the trailer, closes and syncs the file and
  // reads its packets back (kIoError when anything is missing).
  Status finish();
  const std::vector<std::string>& warnings() const;
  std::string description() const;  // "H.264 yuv420p, 8-bit, CRF 16"

 private:
  struct Impl;
  explicit VideoFileWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace seedvae::media::detail
