// Video and image-sequence input/output for the VAE round trip (target seedvae_media).
//
// Clips are host tensors in the layout the VAE consumes: fp32 [1, 3, T, H, W], RGB channel order
// (never BGR), values in [-1, 1] (x / 255 * 2 - 1 for 8-bit sources), see docs/model.md §6.
// OpenCV is a private dependency: it is included only by the .cpp files of this target, and every
// OpenCV exception is caught there and returned as a Status. No function here throws.
//
// Sources understood by probe() and read_clip():
//   * a video file (.mp4 .m4v .mov .avi .mkv .webm and anything else FFmpeg opens), decoded with
//     the FFmpeg backend of OpenCV's VideoCapture;
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
// (the selected frames would not fit in the machine's physical memory), kCancelled.
// Messages name the path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

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
  // Once the reader has reached the end: a truncated source's warning, as Clip::warning.
  std::string warning() const;

 private:
  struct Impl;
  explicit FrameReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// When `destination`'s format stores frames of another size than width x height (the mp4 and
// mkv codecs code even sizes only: an odd width or height gets its last column or row repeated),
// what it stores and why; empty when it stores the size as is (PNG, .avi).
std::string stored_size_note(const std::filesystem::path& destination, int64_t width,
                             int64_t height);

struct WriteOptions {
  double fps = 24;  // > 0
  // -1: the codec's default. 0..51, lower is better (CRF-like). Honoured by the .avi writer
  // (OpenCV's Motion-JPEG encoder, JPEG quality 100 - q * 100 / 51); OpenCV 4.6's FFmpeg writer
  // has no quality control, so .mp4/.mov/.mkv ignore it. PNG is lossless and ignores it.
  int crf_like_quality = -1;
};

// Writes [1, 3, T, H, W] (any float dtype; values clamped to [-1, 1], NaN written as -1) as
// 8-bit frames: round((x + 1) / 2 * 255).
// The destination's form follows its name:
//   * .mp4 .m4v .mov -> MPEG-4 part 2 ("mp4v"), lossy;
//   * .avi           -> Motion-JPEG ("MJPG"), lossy;
//   * .mkv           -> FFV1, lossless;
//     (.mp4/.mov/.m4v/.mkv go through OpenCV's FFmpeg writer, which supports only even sizes: an
//     odd width or height is padded to even by repeating the last column or row, so such a file
//     reads back one pixel larger. .avi and PNG keep any size exactly.)
//   * .png (and other single-image extensions) with T == 1 -> one image file;
//   * a name without extension, or ending in '/', or an existing directory of another name ->
//     a directory of frame_00000.png, frame_00001.png, ... (lossless). An existing destination
//     directory is replaced only when it is empty or holds nothing but frame_NNNNN.png files (a
//     previous output); otherwise kInvalidArgument.
//   * other known video extensions (.webm .gif .wmv ...) -> kUnsupported.
//   * any other extension -> kInvalidArgument listing the known ones (check_clip_destination).
// Atomic: everything is written under a temporary sibling name (same extension) and renamed onto
// the destination at the end; on any failure or cancel nothing is left behind and an existing
// destination is untouched. Every image file is written and flushed to the device with each
// write checked, and a video file is read back (every frame decoded) before it replaces the
// destination, so a full disk is kIoError naming the path ("no space left on device") instead of
// a truncated file. The parent directory must exist (kNotFound otherwise).
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

 private:
  struct Impl;
  explicit ClipWriter(std::unique_ptr<Impl> impl);
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

// Whether `path` is a printf frame pattern ("frames/%05d.png") that probe() and read_clip()
// expand; it need not match any file.
bool is_frame_pattern(const std::filesystem::path& path);

// The machine's physical memory in bytes; 0 where unknown.
int64_t physical_memory_bytes();

}  // namespace seedvae::media
