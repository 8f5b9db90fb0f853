// Video and image-sequence input/output for the VAE round trip (target seedvae_media).
//
// Clips are host tensors in the layout the VAE consumes: fp32 [1, 3, T, H, W], RGB channel order
// (never BGR), values in [-1, 1] (x / 255 * 2 - 1 for 8-bit sources, x / 1023 * 2 - 1 for 10-bit
// ones, ...), see docs/model.md §6. Video files go through FFmpeg's libraries (libavformat,
// libavcodec, libswscale), image files through OpenCV; both are private dependencies: included
// only by the .cpp files of this target, every error (an FFmpeg error code, an OpenCV exception)
// returned as a Status naming the path. No function here throws. FFmpeg's own log is silent
// unless the environment sets SEEDVAE_FFMPEG_LOG.
//
// Sources understood by probe() and read_clip():
//   * a video file (.mp4 .m4v .mov .avi .mkv .webm and anything else FFmpeg opens; any codec it
//     decodes, 8 to 16 bits): its best video stream, converted to RGB by swscale with the
//     stream's colour matrix (BT.601, BT.709, BT.2020, ...; unstated: BT.709 from 720 lines up,
//     BT.601 below) and range (limited or full); sources of more than 8 bits keep their
//     precision (10-bit: x / 1023, 12-bit: x / 4095, 16-bit: x / 65535). Frames are turned
//     upright by the stream's display matrix (rotation metadata, quarter turns), and each
//     frame's timestamp is kept (Clip::frame_times; variable frame rates included);
//   * a single image file (.png .jpg .jpeg .bmp .tif .tiff .webp .ppm .pgm .pnm .exr .hdr ...), a
//     1-frame clip;
//   * a directory of image files, frames in natural name order ("f2.png" before "f10.png"; names
//     with zero-padded numbers sort as plain text does); other files, subdirectories and hidden
//     files (names starting with ".") are ignored;
//   * a printf pattern such as "frames/%05d.png" or "img_%d.jpg": every file of the pattern's
//     directory whose name the pattern formats from some non-negative integer, in index order
//     (gaps are allowed).
// 16-bit images keep their precision (value / 65535); alpha channels are dropped; grey images are
// replicated to three channels.
//
// Errors: kNotFound (missing file or directory, pattern matching no file, directory with no
// images), kCorruptData (a file that cannot be decoded, zero decodable frames, frames of
// different sizes), kIoError (a path that is not a regular file, the OS refusing a write),
// kInvalidArgument (bad options, first_frame past the end, malformed tensors), kOutOfMemory
// (the selected frames would not fit in the machine's physical memory), kUnsupported (a codec
// this FFmpeg lacks), kCancelled. Messages name the path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/base/cancel.h"
#include "core/base/status.h"
#include "core/media/frame_spool.h"
#include "core/tensor/host_tensor.h"

namespace seedvae::media {

struct VideoInfo {
  int width = 0;
  int height = 0;
  // Frames per second from the container; 0 when the source has no timing (image sequences) or
  // the container's value is unusable.
  double fps = 0;
  // Counted by decoding every frame, never the container's claim.
  int64_t frame_count = 0;
  std::string source_kind;  // "video" or "images"
  // Bits per sample of the source (a video's decoded format; 8 or 16 for images).
  int bit_depth = 8;
  // Video: every frame's time in seconds from the first frame's (empty for images).
  std::vector<double> frame_times;
  int rotation = 0;       // video: clockwise degrees its frames are turned to stand upright
  int audio_streams = 0;  // video: audio streams beside the video
  std::string codec;      // video: the decoder's name ("h264", "ffv1", ...)
};

struct ReadOptions {
  int64_t first_frame = 0;  // index of the first frame read (0-based, in source frames)
  int64_t max_frames = -1;  // -1: all frames to the end; otherwise >= 1
  int stride = 1;           // read every stride-th frame from first_frame; >= 1
  // Optional resize of every frame (0 = keep). With one of the two 0 the other is derived from
  // the source aspect ratio (rounded, at least 1). INTER_AREA when shrinking, INTER_CUBIC when
  // enlarging (followed by the usual clamp to [-1, 1]).
  int resize_width = 0;
  int resize_height = 0;
};

struct Clip {
  HostTensor video;  // fp32 [1, 3, T, H, W], RGB, values in [-1, 1]
  // Playback rate of the returned frames: the source fps divided by the stride; 24 / stride for
  // sources without timing (image sequences) or with an unusable container value.
  double fps = 24;
  // Set when the source ended before the frames its container lists (a truncated file): what was
  // decoded against what was listed (SeqReader::warning).
  std::string warning;
  // Bits per sample of the source (values are x / (2^bits - 1) for 8, 10, 12 and 16 bits).
  int bit_depth = 8;
  // Video: each returned frame's time in seconds from the source's first frame (variable frame
  // rates keep their uneven times); empty for image sources.
  std::vector<double> frame_times;
};

// Opens the source, decodes every frame to count them and returns its size and rate. Frames of an
// image sequence must all have the size of the first (kCorruptData otherwise).
Result<VideoInfo> probe(const std::filesystem::path& source, const CancelToken* cancel = nullptr);

// Reads the frames first_frame, first_frame + stride, ... (at most max_frames of them).
// Errors as described above; first_frame at or past the last frame is kInvalidArgument naming the
// frame count. Cancellation is polled between frames.
Result<Clip> read_clip(const std::filesystem::path& source, const ReadOptions& options = {},
                       const CancelToken* cancel = nullptr);

// Sequential, incremental reading of the same frames read_clip() returns: open once, then read()
// the next frames a chunk at a time (the encoder's temporal chunks). Decoding and conversion are
// those of read_clip(), so the chunks concatenated are bit-identical to read_clip()'s tensor, and
// the errors are the same values (open() fails for a missing source and, for image sequences, a
// first_frame past the end; the first read() for a video without a selected frame). A reader
// belongs to one thread at a time (the prefetch thread of media::PrefetchReader, or the caller).
class FrameReader {
 public:
  // `cancel` (may be null) is polled between frames by every read().
  static Result<FrameReader> open(const std::filesystem::path& source,
                                  const ReadOptions& options = {},
                                  const CancelToken* cancel = nullptr);
  ~FrameReader();
  FrameReader(FrameReader&&) noexcept;
  FrameReader& operator=(FrameReader&&) noexcept;

  // The next frames, at most max_frames (>= 1), as fp32 [1, 3, k, H, W]: k < max_frames only when
  // the selection ends there; an empty HostTensor once it is exhausted. `stop` (may be null) is
  // polled between frames besides the open() token (kCancelled).
  Result<HostTensor> read(int64_t max_frames, const CancelToken* stop = nullptr);
  // The playback rate of the selected frames, as Clip::fps.
  double fps() const;
  // Bits per sample of the source, as Clip::bit_depth.
  int bit_depth() const;
  // The selection's frame count as the source states it (an image sequence's files, a video
  // container's count), -1 when it does not; for progress, never trusted for the output.
  int64_t expected_frames() const;
  // Once the reader has reached the end: a truncated source's warning, as Clip::warning.
  std::string warning() const;

 private:
  struct Impl;
  explicit FrameReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// When `destination`'s format stores frames of another size than width x height, what it stores
// and why. Every writer keeps the exact size now (odd sizes get 4:4:4 chroma), so this is empty;
// kept for the callers that report it.
std::string stored_size_note(const std::filesystem::path& destination, int64_t width,
                             int64_t height);

struct WriteOptions {
  // Frames per second (> 0) when there is no video `source` to take the timing from.
  double fps = 24;
  // -1: the codec's default. 0..51, lower is better: the CRF of H.264 and H.265 (default 16),
  // the quality of .avi's Motion-JPEG (quantiser 1 + q * 30 / 51, default 2) and of a .jpg image
  // (JPEG quality 100 - q * 100 / 51). Lossless codecs ignore it.
  int crf_like_quality = -1;
  // "" or "auto": the extension's codec (below). Videos: "h264", "h265", "ffv1", "prores"
  // (422 HQ), "prores4444". Image sequences (a directory): "png" or "exr".
  std::string codec;
  // x264/x265 preset ("ultrafast" .. "placebo"); "" or "auto": "medium".
  std::string preset;
  // H.264 / H.265 without loss: 8-bit H.264 codes RGB exactly (libx264rgb), 10-bit H.264 codes
  // 4:4:4 YUV without loss (RGB comes back within two 10-bit levels), H.265 codes RGB exactly.
  // FFV1 always is lossless; ProRes and Motion-JPEG refuse it.
  bool lossless = false;
  // 0: automatic -- the source's depth where the codec has it (a source of more than 8 bits gives
  // 10-bit H.264/H.265/FFV1, 16-bit FFV1 from 12 or 16 bits, 16-bit PNG), else 8. 8, 10 or 16
  // where the codec stores it: H.264/H.265 8 or 10, FFV1 8, 10 or 16, ProRes 10, Motion-JPEG 8,
  // PNG 8 or 16 (10 is stored as 16), EXR always 32-bit float.
  int bit_depth = 0;
  // A video file the clip was read from (the round trip's input; empty or not a video file:
  // none). Its video timestamps are copied (output frame i at the time of source frame
  // source_first_frame + i * source_stride, shifted so the first written frame keeps its time
  // when that is frame 0 and starts at 0 otherwise), as are its colour description (primaries,
  // transfer, matrix, range), its bit depth (for bit_depth 0) and its audio streams, copied
  // packet for packet (those the container cannot hold are left out with a warning; see
  // ClipWriter::warnings()). The audio is trimmed to the written frames' span unless they reach
  // the source's end. Never the destination itself (kInvalidArgument).
  std::filesystem::path source;
  int64_t source_first_frame = 0;
  int source_stride = 1;
};

// Writes [1, 3, T, H, W] (any float dtype; values clamped to [-1, 1], NaN written as -1),
// quantised to the output's bit depth: round((x + 1) / 2 * (2^bits - 1)). The exact frame size is
// kept everywhere (odd sizes are coded with 4:4:4 chroma where the codec's default is 4:2:0 or
// 4:2:2).
// The destination's form follows its name (and WriteOptions::codec):
//   * .mp4 .m4v -> H.264 (libx264, CRF 16, preset medium; 4:2:0 YUV, 8-bit or 10-bit), or
//     H.265 (libx265, frames of at least 16x16) with codec "h265"; .mov -> ProRes 422 HQ
//     (prores_ks, 10-bit 4:2:2), or "prores4444" (4:4:4), "h264", "h265"; .mkv -> FFV1
//     (lossless RGB, 8, 10 or 16 bits, level 3 with slice CRCs), or any of the others; .avi ->
//     Motion-JPEG (4:4:4, full range). YUV is limited range BT.709 (from 720 lines up) or
//     BT.601 (below) without a source -- the reader's rule for files that state no matrix --
//     and the source's matrix and range with one; the colour description is stored in the
//     stream and the container;
//   * .png (and other single-image extensions) with T == 1 -> one image file (16-bit for a .png
//     or .tif at bit depth 10 or 16; .exr stores 32-bit float);
//   * a name without extension, or ending in '/', or an existing directory of another name ->
//     a directory of frame_00000.png, frame_00001.png, ... (lossless; 16-bit PNG at bit depth 10
//     or 16), or frame_00000.exr, ... (32-bit float, the [0, 1] values as they are) with codec
//     "exr". An existing destination directory is replaced only when it is empty or holds
//     nothing but frame_NNNNN.png / .exr files (a previous output); otherwise kInvalidArgument.
//   * other known video extensions (.webm .gif .wmv ...) -> kUnsupported.
//   * any other extension -> kInvalidArgument listing the known ones (check_clip_destination).
// A codec the container cannot hold, or options the codec does not take (a bit depth it cannot
// store, --lossless for ProRes), are kInvalidArgument saying what to change.
// Atomic: everything is written under a temporary sibling name (same extension) and renamed onto
// the destination at the end; on any failure or cancel nothing is left behind and an existing
// destination is untouched. Every image file is written and flushed to the device with each
// write checked; every write of a video file is checked, the file is synced to the device and its
// packets are read back before it replaces the destination, so a full disk is kIoError naming the
// path ("no space left on device") instead of a truncated file. The parent directory must exist
// (kNotFound otherwise).
Status write_clip(const std::filesystem::path& destination, const HostTensor& video,
                  const WriteOptions& options = {}, const CancelToken* cancel = nullptr);

// write_clip() for a clip that arrives chunk by chunk (a decode streaming out of the engine), with
// the same forms, checks and guarantees: open() checks the destination and options and starts
// the temporary (a PNG directory's is created, a video's writer opens with the first frames);
// write() appends frames ([1, 3, k, H, W], every chunk of the first chunk's H x W); commit()
// finishes the file (a video is read back first) and moves it onto the destination. Destroyed
// without a successful commit(), the writer leaves nothing behind and the destination untouched.
// After a failed write() every later call fails.
class ClipWriter {
 public:
  static Result<ClipWriter> open(const std::filesystem::path& destination,
                                 const WriteOptions& options = {},
                                 const CancelToken* cancel = nullptr);
  ~ClipWriter();
  ClipWriter(ClipWriter&&) noexcept;
  ClipWriter& operator=(ClipWriter&&) noexcept;

  Status write(const HostTensor& frames);
  Status commit();
  int64_t frames() const;  // written so far
  // What the user should know that did not stop the write (an audio stream the container cannot
  // hold); complete after commit().
  std::vector<std::string> warnings() const;
  // How a video is coded, once the first frames are written ("H.264 yuv420p, CRF 16, preset
  // medium"); empty for images.
  std::string description() const;

 private:
  struct Impl;
  explicit ClipWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether a destination can be written in segments (SegmentedClipWriter): a video file or an
// image directory; a single image cannot.
bool writes_in_segments(const std::filesystem::path& destination);

// A clip written in closed segments, for a job that can be stopped and resumed (the job's
// checkpoints, core/pipeline/job.cpp): each segment is complete on its own in `work_dir` once
// end_segment() returned, so a later process can add the following segments to those an earlier
// one closed. A video's segment is coded by a fresh encoder (its first frame a keyframe, no
// reference outside the segment) at the frames' timestamps in the whole clip; an image
// directory's segment is its frames' files. join() makes the destination from segments
// [0, n): a video's packets copied into one file of the destination's container with the
// source's audio (bit-exact muxing), an image directory moved into place, with ClipWriter's
// checks and guarantees (atomic, read back, an existing destination replaced only at the end).
// The same frames in the same segments give the same bytes, whichever runs wrote the segments.
class SegmentedClipWriter {
 public:
  // The destination and options are checked as ClipWriter::open() checks them; `work_dir` must
  // exist. Nothing is written to the destination before join().
  static Result<SegmentedClipWriter> open(const std::filesystem::path& destination,
                                          const WriteOptions& options,
                                          const std::filesystem::path& work_dir,
                                          const CancelToken* cancel = nullptr);
  ~SegmentedClipWriter();
  SegmentedClipWriter(SegmentedClipWriter&&) noexcept;
  SegmentedClipWriter& operator=(SegmentedClipWriter&&) noexcept;

  // Segment `index` starts with the clip's frame `first_frame`; write() appends frames to it and
  // end_segment() closes it (a video segment stays under a temporary name until then).
  Status begin_segment(int64_t index, int64_t first_frame);
  Status write(const HostTensor& frames);
  Status end_segment();
  bool in_segment() const;
  // Removes what a run stopped between two checkpoints left of segment `index` (starting at
  // frame `first_frame`) and later ones.
  Status discard_from(int64_t index, int64_t first_frame);
  // Makes the destination of segments [0, segments), `frames` frames of width x height.
  Status join(int64_t segments, int64_t frames, int width, int height);
  std::vector<std::string> warnings() const;  // complete after join()
  std::string description() const;            // how a video is coded, once a segment was written
  // The token write() and join() check from now on (open()'s until then). A resumable run writes
  // its segments without one, on a thread of its own, so that a chunk the engine finished before
  // a cancel is written whole and a checkpoint due after it comes; join() gets the job's.
  void set_cancel(const CancelToken* cancel);

 private:
  struct Impl;
  explicit SegmentedClipWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// write_clip() of every frame kept in `frames`, read back and written a chunk at a time.
Status write_clip(const std::filesystem::path& destination, const FrameSpool& frames,
                  const WriteOptions& options = {}, const CancelToken* cancel = nullptr);

// Video container extensions write_clip() encodes (".mp4", ...), lower case.
bool is_writable_video_extension(const std::filesystem::path& path);

// Whether write_clip() knows the form of `destination` by its name (a video extension, an image
// extension, no extension or a trailing '/' for a PNG directory, or an existing directory).
// Checked before a job computes anything: an unknown extension is kInvalidArgument listing the
// known ones, a video container it cannot write kUnsupported; the name alone decides.
Status check_clip_destination(const std::filesystem::path& destination);
// The same, and whether the options suit the destination (the codec's container, bit depth,
// lossless, preset, CRF range; an encoder this FFmpeg lacks is kUnsupported).
Status check_clip_destination(const std::filesystem::path& destination,
                              const WriteOptions& options);

// Whether `path` is a printf frame pattern ("frames/%05d.png") that probe() and read_clip()
// expand; it need not match any file.
bool is_frame_pattern(const std::filesystem::path& path);

// The machine's physical memory in bytes; 0 where unknown.
int64_t physical_memory_bytes();

}  // namespace seedvae::media
