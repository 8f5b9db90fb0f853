// video_io.h for builds without OpenCV and FFmpeg (SEEDVAE_WITH_MEDIA=OFF: the gpu-headless preset,
// the mingw-w64 Windows CLI): no video or image file can be read or written, everything else of
// seedvae_media (the sample clip, 4n+1 padding, PSNR/SSIM) works, so `seedvae roundtrip
// --sample-clip` and `encode --sample-clip` run. Every call returns kUnsupported.
#include "core/media/video_io.h"

#include <string>
#include <utility>

namespace seedvae::media {
namespace {

Status no_video(const std::filesystem::path& path, const char* what) {
  return unsupported(std::string("cannot ") + what + " " + path.string() +
                     ": this build has no video I/O (built without OpenCV and FFmpeg); use "
                     "--sample-clip");
}

}  // namespace

Result<VideoInfo> probe(const std::filesystem::path& source, const CancelToken*) {
  return no_video(source, "read");
}

Result<Clip> read_clip(const std::filesystem::path& source, const ReadOptions&,
                       const CancelToken*) {
  return no_video(source, "read");
}

struct FrameReader::Impl {};
FrameReader::FrameReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FrameReader::~FrameReader() = default;
FrameReader::FrameReader(FrameReader&&) noexcept = default;
FrameReader& FrameReader::operator=(FrameReader&&) noexcept = default;

Result<FrameReader> FrameReader::open(const std::filesystem::path& source, const ReadOptions&,
                                      const CancelToken*) {
  return no_video(source, "read");
}

Result<HostTensor> FrameReader::read(int64_t, const CancelToken*) {
  return unsupported("this build has no video I/O (built without OpenCV)");
}

double FrameReader::fps() const {
  return 24.0;
}

int FrameReader::bit_depth() const {
  return 8;
}

int64_t FrameReader::expected_frames() const {
  return -1;
}

std::string FrameReader::warning() const {
  return {};
}

std::string stored_size_note(const std::filesystem::path&, int64_t, int64_t) {
  return {};
}

Status write_clip(const std::filesystem::path& destination, const HostTensor&, const WriteOptions&,
                  const CancelToken*) {
  return no_video(destination, "write");
}

struct ClipWriter::Impl {};
ClipWriter::ClipWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClipWriter::~ClipWriter() = default;
ClipWriter::ClipWriter(ClipWriter&&) noexcept = default;
ClipWriter& ClipWriter::operator=(ClipWriter&&) noexcept = default;

Result<ClipWriter> ClipWriter::open(const std::filesystem::path& destination, const WriteOptions&,
                                    const CancelToken*) {
  return no_video(destination, "write");
}

Status ClipWriter::write(const HostTensor&) {
  return unsupported("this build has no video I/O (built without OpenCV)");
}

Status ClipWriter::commit() {
  return unsupported("this build has no video I/O (built without OpenCV)");
}

int64_t ClipWriter::frames() const {
  return 0;
}

std::vector<std::string> ClipWriter::warnings() const {
  return {};
}

std::string ClipWriter::description() const {
  return {};
}

Status write_clip(const std::filesystem::path& destination, const FrameSpool&, const WriteOptions&,
                  const CancelToken*) {
  return no_video(destination, "write");
}

bool is_writable_video_extension(const std::filesystem::path&) {
  return false;
}

Status check_clip_destination(const std::filesystem::path& destination) {
  return no_video(destination, "write");
}

Status check_clip_destination(const std::filesystem::path& destination, const WriteOptions&) {
  return no_video(destination, "write");
}

bool writes_in_segments(const std::filesystem::path&) {
  return false;
}

struct SegmentedClipWriter::Impl {};
SegmentedClipWriter::SegmentedClipWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SegmentedClipWriter::~SegmentedClipWriter() = default;
SegmentedClipWriter::SegmentedClipWriter(SegmentedClipWriter&&) noexcept = default;
SegmentedClipWriter& SegmentedClipWriter::operator=(SegmentedClipWriter&&) noexcept = default;
Result<SegmentedClipWriter> SegmentedClipWriter::open(const std::filesystem::path& destination,
                                                      const WriteOptions&,
                                                      const std::filesystem::path&,
                                                      const CancelToken*) {
  return no_video(destination, "write");
}
Status SegmentedClipWriter::begin_segment(int64_t, int64_t) {
  return unsupported("this build has no video I/O");
}
Status SegmentedClipWriter::write(const HostTensor&) {
  return unsupported("this build has no video I/O");
}
Status SegmentedClipWriter::end_segment() {
  return unsupported("this build has no video I/O");
}
void SegmentedClipWriter::set_cancel(const CancelToken*) {}
bool SegmentedClipWriter::in_segment() const {
  return false;
}
Status SegmentedClipWriter::discard_from(int64_t, int64_t) {
  return unsupported("this build has no video I/O");
}
Status SegmentedClipWriter::join(int64_t, int64_t, int, int) {
  return unsupported("this build has no video I/O");
}
std::vector<std::string> SegmentedClipWriter::warnings() const {
  return {};
}
std::string SegmentedClipWriter::description() const {
  return {};
}

bool is_frame_pattern(const std::filesystem::path&) {
  return false;
}

int64_t physical_memory_bytes() {
  return 0;
}

}  // namespace seedvae::media
