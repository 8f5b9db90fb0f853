// Clip reading and writing: image files through OpenCV (the only translation unit of SeedVAE that
// includes its image codecs), video files through ffmpeg_video.h. Every entry point catches
// cv::Exception (and std::exception) and returns a Status.
#include "core/media/video_io.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <random>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/base/atomic_file.h"
#include "core/io/output_path.h"
#include "core/media/ffmpeg_video.h"

namespace seedvae::media {

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Small helpers

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string ext_of(const fs::path& p) {
  return lower(p.extension().string());
}

std::string quoted(const fs::path& p) {
  std::string s;
  s += '\'';
  s += p.string();
  s += '\'';
  return s;
}

bool one_of(const std::string& s, std::initializer_list<std::string_view> list) {
  return std::any_of(list.begin(), list.end(), [&](std::string_view v) { return s == v; });
}

bool is_image_ext(const std::string& e) {
  return one_of(
      e, {".png", ".jpg", ".jpeg", ".jpe", ".bmp", ".dib", ".tif", ".tiff", ".webp", ".ppm",
          ".pgm", ".pbm", ".pnm",  ".pfm", ".sr",  ".ras", ".exr", ".hdr",  ".pic",  ".jp2"});
}

bool is_video_write_ext(const std::string& e) {
  return one_of(e, {".mp4", ".m4v", ".mov", ".avi", ".mkv"});
}

// Video containers that we recognise but do not write.
bool is_unwritable_video_ext(const std::string& e) {
  return one_of(e, {".webm", ".gif", ".wmv", ".flv", ".mpg", ".mpeg", ".ts", ".m2ts", ".mts",
                    ".3gp", ".ogv", ".ogg", ".vob", ".asf", ".y4m"});
}

// Quietens OpenCV's own warnings (imread / VideoCapture failures are reported as Status values)
// unless the user asked for a level through OPENCV_LOG_LEVEL.
void init_opencv_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("OPENCV_LOG_LEVEL");
    if (env == nullptr || *env == '\0') {
      cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_ERROR);
    }
  });
}

// Natural order: runs of digits compare by value ("f2" < "f10"), everything else by character.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      size_t is = i, js = j;
      while (is + 1 < ie && a[is] == '0') ++is;  // strip leading zeros (keep one digit)
      while (js + 1 < je && b[js] == '0') ++js;
      const size_t la = ie - is, lb = je - js;
      if (la != lb) return la < lb;
      const int c = a.compare(is, la, b, js, lb);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if ((a.size() - i) != (b.size() - j)) return (a.size() - i) < (b.size() - j);
  return a < b;  // equal under natural order ("f01" vs "f1"): plain text decides
}

bool is_regular(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// ---------------------------------------------------------------------------------------------
// Sources

enum class SourceKind { kVideo, kImages };

struct Source {
  SourceKind kind = SourceKind::kVideo;
  fs::path path;                // as given
  std::vector<fs::path> files;  // image files in frame order (kImages)
};

struct Pattern {
  std::string prefix, suffix;
  std::string format;  // e.g. "%05d" (normalised to an int64 conversion when used)
};

// Parses a file name holding exactly one %d conversion ("%d", "%5d", "%05d").
std::optional<Pattern> parse_pattern(const std::string& name) {
  const size_t pct = name.find('%');
  if (pct == std::string::npos) return std::nullopt;
  size_t k = pct + 1;
  std::string flags;
  while (k < name.size() && std::isdigit(static_cast<unsigned char>(name[k]))) flags += name[k++];
  if (k >= name.size() || (name[k] != 'd' && name[k] != 'i' && name[k] != 'u')) return std::nullopt;
  if (flags.size() > 2) return std::nullopt;  // width above 99: not a frame pattern
  Pattern p;
  p.prefix = name.substr(0, pct);
  p.suffix = name.substr(k + 1);
  if (p.suffix.find('%') != std::string::npos) return std::nullopt;
  p.format = "%" + flags + "lld";
  return p;
}

Result<Source> resolve_pattern(const fs::path& path) {
  const std::string name = path.filename().string();
  const auto pat = parse_pattern(name);
  if (!pat) {
    return invalid_argument("file pattern " + quoted(path) +
                            " must contain exactly one integer conversion such as %05d or %d");
  }
  fs::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return not_found("directory " + quoted(dir) + " of the pattern " + quoted(path) +
                     " does not exist");
  }
  std::vector<std::pair<long long, fs::path>> found;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return io_error("cannot list " + quoted(dir) + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return io_error("cannot list " + quoted(dir) + ": " + ec.message());
    const std::string fname = it->path().filename().string();
    if (fname.size() <= pat->prefix.size() + pat->suffix.size()) continue;
    if (fname.compare(0, pat->prefix.size(), pat->prefix) != 0) continue;
    if (fname.compare(fname.size() - pat->suffix.size(), pat->suffix.size(), pat->suffix) != 0) {
      continue;
    }
    const std::string mid =
        fname.substr(pat->prefix.size(), fname.size() - pat->prefix.size() - pat->suffix.size());
    if (mid.empty() || mid.size() > 17 || !std::all_of(mid.begin(), mid.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        })) {
      continue;
    }
    const long long index = std::stoll(mid);
    char buf[64];
    std::snprintf(buf, sizeof buf, pat->format.c_str(), index);
    if (mid != buf) continue;  // "%05d" accepts 00012 but not 012 or 000012
    if (!is_regular(it->path())) continue;
    found.emplace_back(index, it->path());
  }
  if (found.empty()) return not_found("no file matches the pattern " + quoted(path));
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Source s;
  s.kind = SourceKind::kImages;
  s.path = path;
  for (auto& f : found) s.files.push_back(std::move(f.second));
  return s;
}

Result<Source> resolve_source(const fs::path& path) {
  if (path.empty()) return invalid_argument("no input path given");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    if (path.filename().string().find('%') != std::string::npos) return resolve_pattern(path);
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return io_error("cannot access " + quoted(path) + ": " + ec.message());
    }
    return not_found("no such file or directory: " + quoted(path));
  }
  Source s;
  s.path = path;
  if (fs::is_directory(st)) {
    s.kind = SourceKind::kImages;
    std::vector<std::string> names;
    fs::directory_iterator it(path, ec), end;
    if (ec) return io_error("cannot list " + quoted(path) + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) return io_error("cannot list " + quoted(path) + ": " + ec.message());
      const std::string fname = it->path().filename().string();
      if (fname.empty() || fname[0] == '.') continue;  // hidden files, "._x.png" forks
      if (!is_image_ext(ext_of(it->path())) || !is_regular(it->path())) continue;
      names.push_back(fname);
    }
    if (names.empty()) {
      return not_found("directory " + quoted(path) +
                       " contains no image files (.png, .jpg, .bmp, .tif, .webp, ...)");
    }
    std::sort(names.begin(), names.end(), natural_less);
    for (const auto& n : names) s.files.push_back(path / n);
    return s;
  }
  if (!fs::is_regular_file(st)) {
    return io_error(quoted(path) + " is not a regular file (a device, FIFO or socket)");
  }
  if (is_image_ext(ext_of(path))) {
    s.kind = SourceKind::kImages;
    s.files.push_back(path);
  } else {
    s.kind = SourceKind::kVideo;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Decoding

// Converts a decoded OpenCV image (BGR, BGRA or grey; 8U, 16U or 32F) to 3-channel RGB of the same
// depth. An unusual depth (8S, 16S, 32S, 64F) is converted to 32F in [0, 1]-ish units first.
Result<cv::Mat> to_rgb(const cv::Mat& in, const fs::path& where) {
  cv::Mat m = in;
  const int depth = m.depth();
  if (depth != CV_8U && depth != CV_16U && depth != CV_32F) {
    cv::Mat f;
    m.convertTo(f, CV_32F, depth == CV_16S ? 1.0 / 32767.0 : depth == CV_8S ? 1.0 / 127.0 : 1.0);
    m = f;
  }
  cv::Mat out;
  switch (m.channels()) {
    case 1: cv::cvtColor(m, out, cv::COLOR_GRAY2RGB); break;
    case 3: cv::cvtColor(m, out, cv::COLOR_BGR2RGB); break;
    case 4: cv::cvtColor(m, out, cv::COLOR_BGRA2RGB); break;
    default:
      return corrupt_data(quoted(where) + " decodes to " + std::to_string(m.channels()) +
                          " channels (expected 1, 3 or 4)");
  }
  return out;
}

Result<cv::Mat> decode_image(const fs::path& file) {
  if (!is_regular(file)) return not_found("image " + quoted(file) + " is not a readable file");
  std::error_code ec;
  if (fs::file_size(file, ec) == 0 && !ec)
    return corrupt_data("image " + quoted(file) + " is empty (0 bytes)");
  cv::Mat m = cv::imread(file.string(), cv::IMREAD_COLOR | cv::IMREAD_ANYDEPTH);
  if (m.empty()) {
    return corrupt_data("cannot decode image " + quoted(file) + " (corrupt or unsupported format)");
  }
  return to_rgb(m, file);
}

Result<std::unique_ptr<detail::VideoDecoder>> open_video(const fs::path& path,
                                                         const CancelToken* cancel) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return io_error("cannot read " + quoted(path) + ": " + ec.message());
  if (size == 0) return corrupt_data("video " + quoted(path) + " is empty (0 bytes)");
  return detail::VideoDecoder::open(path, cancel);
}

std::string size_str(const cv::Size& s) {
  return std::to_string(s.width) + "x" + std::to_string(s.height);
}

Status check_cancel(const CancelToken* cancel) {
  return cancel != nullptr ? cancel->check() : Status::ok();
}

// Resize target for a source of `src` under the options (both > 0, or keep).
cv::Size target_size(const cv::Size& src, const ReadOptions& o) {
  int w = o.resize_width, h = o.resize_height;
  if (w <= 0 && h <= 0) return src;
  if (w <= 0) {
    w = std::max(1, static_cast<int>(std::lround(static_cast<double>(src.width) * h / src.height)));
  } else if (h <= 0) {
    h = std::max(1, static_cast<int>(std::lround(static_cast<double>(src.height) * w / src.width)));
  }
  return {w, h};
}

cv::Mat maybe_resize(const cv::Mat& rgb, const cv::Size& target) {
  if (rgb.size() == target) return rgb;
  cv::Mat out;
  const bool shrink = target.width <= rgb.cols && target.height <= rgb.rows;
  cv::resize(rgb, out, target, 0, 0, shrink ? cv::INTER_AREA : cv::INTER_CUBIC);
  return out;
}

// Physical memory of the machine in bytes (0 when unknown). Reading more frames than fit is refused
// with kOutOfMemory instead of inviting the OOM killer.
// Accumulates decoded frames, checks they all share one size and packs them into the clip tensor.
class FrameCollector {
 public:
  // The clip's first frame (size and index), carried from one chunk to the next.
  struct First {
    bool known = false;
    cv::Size size;
    int64_t index = 0;
  };

  FrameCollector(const fs::path& source, const ReadOptions& o, const First& first)
      : source_(source), opts_(o) {
    if (first.known) {
      has_first_ = true;
      first_size_ = first.size;
      target_ = target_size(first_size_, opts_);
      first_index_ = first.index;
    }
  }

  First first() const { return {has_first_, first_size_, first_index_}; }

  // `max_value`: the sample value meaning 1.0 (255 and 65535 for 8U and 16U images; 1023 or 4095
  // for 10- and 12-bit video in 16U matrices).
  Status add(const cv::Mat& decoded_rgb, int64_t source_index, const fs::path& file,
             double max_value = 0) {
    if (!has_first_) {
      has_first_ = true;
      first_size_ = decoded_rgb.size();
      target_ = target_size(first_size_, opts_);
      first_index_ = source_index;
    } else if (decoded_rgb.size() != first_size_) {
      return corrupt_data("frame " + std::to_string(source_index) +
                          (file.empty() ? std::string() : " (" + quoted(file) + ")") + " of " +
                          quoted(source_) + " is " + size_str(decoded_rgb.size()) + " but frame " +
                          std::to_string(first_index_) + " is " + size_str(first_size_) +
                          ": all frames must have the same size");
    }
    // While packing, the decoded frames and the fp32 tensor coexist.
    static const int64_t budget = physical_memory_bytes();
    const int64_t per_frame = int64_t{3} * target_.width * target_.height *
                              (static_cast<int64_t>(decoded_rgb.elemSize1()) + 4);
    if (budget > 0 && per_frame * (count() + 1) > budget) {
      return out_of_memory("reading " + quoted(source_) + " at " + size_str(target_) +
                           " needs more than " + std::to_string(budget >> 20) +
                           " MiB (the machine's memory) after " + std::to_string(count()) +
                           " frames; read fewer frames (max_frames, "
                           "stride) or resize");
    }
    frames_.push_back(maybe_resize(decoded_rgb, target_));
    max_values_.push_back(static_cast<float>(max_value > 0                   ? max_value
                                             : decoded_rgb.depth() == CV_16U ? 65535.0
                                                                             : 255.0));
    return Status::ok();
  }

  int64_t count() const { return static_cast<int64_t>(frames_.size()); }

  Result<HostTensor> pack() {
    const int64_t T = count(), H = target_.height, W = target_.width;
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor out, HostTensor::create(DType::kF32, Shape{1, 3, T, H, W}));
    float* o = out.data<float>();
    const int64_t plane = H * W, cstride = T * plane;
    for (int64_t t = 0; t < T; ++t) {
      cv::Mat& f = frames_[static_cast<size_t>(t)];
      for (int64_t y = 0; y < H; ++y) {
        float* r = o + t * plane + y * W;
        float* g = r + cstride;
        float* b = g + cstride;
        const int row = static_cast<int>(y);
        if (f.depth() == CV_8U) {
          const uint8_t* p = f.ptr<uint8_t>(row);
          for (int64_t x = 0; x < W; ++x) {
            r[x] = static_cast<float>(p[3 * x]) / 255.0f * 2.0f - 1.0f;
            g[x] = static_cast<float>(p[3 * x + 1]) / 255.0f * 2.0f - 1.0f;
            b[x] = static_cast<float>(p[3 * x + 2]) / 255.0f * 2.0f - 1.0f;
          }
        } else if (f.depth() == CV_16U) {
          // 10/12-bit samples may exceed their maximum after a cubic resize: clamped.
          const float m = max_values_[static_cast<size_t>(t)];
          auto v01 = [m](uint16_t v) { return std::min(static_cast<float>(v) / m, 1.0f); };
          const uint16_t* p = f.ptr<uint16_t>(row);
          for (int64_t x = 0; x < W; ++x) {
            r[x] = v01(p[3 * x]) * 2.0f - 1.0f;
            g[x] = v01(p[3 * x + 1]) * 2.0f - 1.0f;
            b[x] = v01(p[3 * x + 2]) * 2.0f - 1.0f;
          }
        } else {  // CV_32F, values nominally in [0, 1]
          const float* p = f.ptr<float>(row);
          auto cv01 = [](float v) {
            return std::isfinite(v) ? std::clamp(v, 0.0f, 1.0f) * 2.0f - 1.0f : -1.0f;
          };
          for (int64_t x = 0; x < W; ++x) {
            r[x] = cv01(p[3 * x]);
            g[x] = cv01(p[3 * x + 1]);
            b[x] = cv01(p[3 * x + 2]);
          }
        }
      }
      f.release();  // free as we go: peak memory stays near the tensor's size
    }
    return out;
  }

 private:
  fs::path source_;
  ReadOptions opts_;
  std::vector<cv::Mat> frames_;
  std::vector<float> max_values_;
  bool has_first_ = false;
  cv::Size first_size_, target_;
  int64_t first_index_ = 0;
};

Status validate(const ReadOptions& o) {
  if (o.first_frame < 0) {
    return invalid_argument("first_frame must be >= 0, got " + std::to_string(o.first_frame));
  }
  if (o.max_frames == 0 || o.max_frames < -1) {
    return invalid_argument("max_frames must be -1 (all) or >= 1, got " +
                            std::to_string(o.max_frames));
  }
  if (o.stride < 1) return invalid_argument("stride must be >= 1, got " + std::to_string(o.stride));
  if (o.resize_width < 0 || o.resize_height < 0 || o.resize_width > 65536 ||
      o.resize_height > 65536) {
    return invalid_argument("resize size must be between 0 (keep) and 65536, got " +
                            std::to_string(o.resize_width) + "x" + std::to_string(o.resize_height));
  }
  return Status::ok();
}

Status beyond_end(const fs::path& source, int64_t first, int64_t total) {
  return invalid_argument("first_frame " + std::to_string(first) + " is beyond the end of " +
                          quoted(source) + " (" + std::to_string(total) + " frame" +
                          (total == 1 ? "" : "s") + ")");
}

Status no_frames(const fs::path& source) {
  return corrupt_data(quoted(source) + " contains no decodable frames");
}

// Sequential reading of the selected frames (first_frame, first_frame + stride, ...; at most
// max_frames), a chunk at a time: read_clip() reads everything in one call, FrameReader (and the
// prefetch thread behind it) reads the chunks the encoder asks for. Both decode and convert every
// frame the same way, so a clip read in chunks is bit-identical to the clip read at once.
class SeqReader {
 public:
  explicit SeqReader(const ReadOptions& o) : opts_(o) {}

  Status open(const fs::path& path) {
    SEEDVAE_ASSIGN_OR_RETURN(src_, resolve_source(path));
    if (src_.kind == SourceKind::kImages) {
      const auto total = static_cast<int64_t>(src_.files.size());
      if (opts_.first_frame >= total) return beyond_end(src_.path, opts_.first_frame, total);
      image_next_ = opts_.first_frame;
      fps_ = 24.0 / opts_.stride;
      return Status::ok();
    }
    SEEDVAE_ASSIGN_OR_RETURN(dec_, open_video(src_.path, cancel_));
    const detail::StreamInfo& info = dec_->info();
    fps_ = (info.fps > 0 ? info.fps : 24.0) / opts_.stride;
    listed_ = info.listed_frames;
    bit_depth_ = info.bit_depth;
    return Status::ok();
  }

  void set_cancel(const CancelToken* cancel) { cancel_ = cancel; }
  // The selection's frame count as the source states it (images: counted; a video: its
  // container's count), -1 when unknown.
  int64_t expected_frames() const {
    const int64_t total =
        src_.kind == SourceKind::kImages ? static_cast<int64_t>(src_.files.size()) : listed_;
    if (total <= 0) return -1;
    const int64_t stride = std::max(1, opts_.stride);
    int64_t n = std::max<int64_t>(0, (total - opts_.first_frame + stride - 1) / stride);
    if (opts_.max_frames >= 0) n = std::min(n, opts_.max_frames);
    return n;
  }
  double fps() const { return fps_; }
  int bit_depth() const { return bit_depth_; }
  const std::vector<double>& frame_times() const { return times_; }

  // A video whose decoding stopped before the frames its container lists (a truncated or damaged
  // file), when the selection wanted frames beyond that point; empty otherwise.
  std::string warning() const {
    if (!video_done_ || listed_ <= 0 || index_ >= listed_) return {};
    const bool wanted_more = opts_.max_frames <= 0 || delivered_ < opts_.max_frames;
    if (!wanted_more) return {};
    return src_.path.string() + ": only " + std::to_string(index_) + " of the " +
           std::to_string(listed_) +
           " frames its container lists could be decoded (the file may be truncated or damaged)";
  }

  // Up to n (>= 1) next frames as fp32 [1, 3, k, H, W]; an empty tensor once the selection is
  // exhausted. The first call fails like read_clip() when no frame is selected at all.
  Result<HostTensor> read(int64_t n, const CancelToken* cancel, const CancelToken* stop) {
    if (opts_.max_frames > 0) n = std::min(n, opts_.max_frames - delivered_);
    // Frames of different chunks are checked against the first frame of the clip.
    FrameCollector frames(src_.path, opts_, first_);
    if (src_.kind == SourceKind::kImages) {
      const auto total = static_cast<int64_t>(src_.files.size());
      for (; image_next_ < total && frames.count() < n; image_next_ += opts_.stride) {
        SEEDVAE_TRY(check_cancel(cancel));
        SEEDVAE_TRY(check_cancel(stop));
        const fs::path& file = src_.files[static_cast<size_t>(image_next_)];
        SEEDVAE_ASSIGN_OR_RETURN(cv::Mat rgb, decode_image(file));
        if (delivered_ == 0 && frames.count() == 0) bit_depth_ = rgb.depth() == CV_8U ? 8 : 16;
        SEEDVAE_TRY(frames.add(rgb, image_next_, file));
      }
    } else if (!video_done_) {
      cv::Mat rgb;
      const double tb = static_cast<double>(dec_->info().tb_num) / dec_->info().tb_den;
      while (frames.count() < n) {
        SEEDVAE_TRY(check_cancel(cancel));
        SEEDVAE_TRY(check_cancel(stop));
        const bool wanted =
            index_ >= opts_.first_frame && (index_ - opts_.first_frame) % opts_.stride == 0;
        SEEDVAE_ASSIGN_OR_RETURN(const bool more, dec_->next(wanted ? &rgb : nullptr));
        if (!more) {
          video_done_ = true;
          break;
        }
        if (index_ == 0) first_pts_ = dec_->pts();
        if (wanted) {
          SEEDVAE_TRY(frames.add(rgb, index_, {}, dec_->max_value()));
          times_.push_back(static_cast<double>(dec_->pts() - first_pts_) * tb);
        }
        ++index_;
      }
      if (delivered_ == 0 && frames.count() == 0) {
        if (index_ == 0) return no_frames(src_.path);
        return beyond_end(src_.path, opts_.first_frame, index_);
      }
    }
    if (frames.count() == 0) return HostTensor{};
    first_ = frames.first();
    delivered_ += frames.count();
    return frames.pack();
  }

 private:
  ReadOptions opts_;
  Source src_;
  const CancelToken* cancel_ = nullptr;  // interrupts the demuxer's blocking reads
  std::unique_ptr<detail::VideoDecoder> dec_;
  double fps_ = 24;
  int bit_depth_ = 8;
  int64_t first_pts_ = 0;      // the source's frame 0 (kVideo)
  std::vector<double> times_;  // of the frames delivered (kVideo)
  int64_t image_next_ = 0;     // next image index (kImages)
  int64_t index_ = 0;          // next source frame index (kVideo)
  bool video_done_ = false;
  int64_t listed_ = -1;  // the container's frame count, -1 when it states none
  int64_t delivered_ = 0;
  FrameCollector::First first_;
};

Result<Clip> read_all(const fs::path& source, const ReadOptions& o, const CancelToken* cancel) {
  SeqReader reader(o);
  reader.set_cancel(cancel);
  SEEDVAE_TRY(check_cancel(cancel));
  SEEDVAE_TRY(reader.open(source));
  Clip clip;
  SEEDVAE_ASSIGN_OR_RETURN(clip.video,
                           reader.read(std::numeric_limits<int64_t>::max(), cancel, nullptr));
  clip.fps = reader.fps();
  clip.warning = reader.warning();
  clip.bit_depth = reader.bit_depth();
  clip.frame_times = reader.frame_times();
  return clip;
}

Result<VideoInfo> probe_impl(const fs::path& path, const CancelToken* cancel) {
  init_opencv_once();
  SEEDVAE_ASSIGN_OR_RETURN(Source src, resolve_source(path));
  VideoInfo info;
  if (src.kind == SourceKind::kImages) {
    info.source_kind = "images";
    cv::Size first;
    for (size_t i = 0; i < src.files.size(); ++i) {
      SEEDVAE_TRY(check_cancel(cancel));
      SEEDVAE_ASSIGN_OR_RETURN(cv::Mat rgb, decode_image(src.files[i]));
      if (i == 0) {
        first = rgb.size();
        info.bit_depth = rgb.depth() == CV_8U ? 8 : 16;
      } else if (rgb.size() != first) {
        return corrupt_data("frame " + std::to_string(i) + " (" + quoted(src.files[i]) + ") of " +
                            quoted(path) + " is " + size_str(rgb.size()) + " but frame 0 is " +
                            size_str(first) + ": all frames must have the same size");
      }
    }
    info.width = first.width;
    info.height = first.height;
    info.fps = 0;
    info.frame_count = static_cast<int64_t>(src.files.size());
    return info;
  }
  info.source_kind = "video";
  SEEDVAE_TRY(check_cancel(cancel));
  SEEDVAE_ASSIGN_OR_RETURN(auto dec, open_video(src.path, cancel));
  const detail::StreamInfo& si = dec->info();
  info.fps = si.fps;
  info.bit_depth = si.bit_depth;
  info.rotation = si.rotation;
  info.audio_streams = si.audio_streams;
  info.codec = si.codec;
  cv::Mat first;
  SEEDVAE_ASSIGN_OR_RETURN(bool any, dec->next(&first));
  if (!any) return no_frames(path);
  info.width = first.cols;
  info.height = first.rows;
  const double tb = static_cast<double>(si.tb_num) / si.tb_den;
  const int64_t first_pts = dec->pts();
  info.frame_times.push_back(0);
  for (;;) {
    SEEDVAE_TRY(check_cancel(cancel));
    SEEDVAE_ASSIGN_OR_RETURN(bool more, dec->next(nullptr));
    if (!more) break;
    info.frame_times.push_back(static_cast<double>(dec->pts() - first_pts) * tb);
  }
  info.frame_count = static_cast<int64_t>(info.frame_times.size());
  return info;
}

// ---------------------------------------------------------------------------------------------
// Writing

Status validate_clip_tensor(const HostTensor& v) {
  const Shape& s = v.shape();
  if (s.rank() != 5 || s.n() != 1 || s.c() != 3) {
    return invalid_argument("a clip to write must be [1, 3, T, H, W], got " + s.to_string());
  }
  if (s.t() < 1 || s.h() < 1 || s.w() < 1) {
    return invalid_argument("cannot write an empty clip " + s.to_string());
  }
  if (s.h() > 32768 || s.w() > 32768) {
    return invalid_argument("frame size " + std::to_string(s.w()) + "x" + std::to_string(s.h()) +
                            " exceeds the 32768 pixel limit for writing");
  }
  int64_t n = 0;
  if (!s.checked_numel(&n) || n * dtype_size(v.dtype()) != v.nbytes()) {
    return invalid_argument("clip " + s.to_string() + " does not match its storage");
  }
  return Status::ok();
}

// How the frames of an image destination are stored.
enum class ImageDepth { k8, k16, kFloat };

// Frame t of a [1, 3, T, H, W] fp32 clip as BGR (OpenCV's order): 8-bit round((clamp(x) + 1) / 2 *
// 255), 16-bit the same with 65535, float (clamp(x) + 1) / 2.
void frame_to_bgr(const float* video, int64_t T, int64_t H, int64_t W, int64_t t, ImageDepth depth,
                  cv::Mat& out) {
  const int type = depth == ImageDepth::k8    ? CV_8UC3
                   : depth == ImageDepth::k16 ? CV_16UC3
                                              : CV_32FC3;
  out.create(static_cast<int>(H), static_cast<int>(W), type);
  const int64_t plane = H * W, cstride = T * plane;
  auto unit = [](float v) {
    if (!(v >= -1.0f)) v = -1.0f;  // NaN and below
    if (v > 1.0f) v = 1.0f;
    return (v + 1.0f) * 0.5f;
  };
  for (int64_t y = 0; y < H; ++y) {
    const float* r = video + t * plane + y * W;
    const float* g = r + cstride;
    const float* b = g + cstride;
    const int row = static_cast<int>(y);
    for (int64_t x = 0; x < W; ++x) {
      const float bgr[3] = {unit(b[x]), unit(g[x]), unit(r[x])};
      for (int k = 0; k < 3; ++k) {
        if (depth == ImageDepth::k8) {
          out.ptr<uint8_t>(row)[3 * x + k] = static_cast<uint8_t>(std::lround(bgr[k] * 255.0f));
        } else if (depth == ImageDepth::k16) {
          out.ptr<uint16_t>(row)[3 * x + k] = static_cast<uint16_t>(std::lround(bgr[k] * 65535.0f));
        } else {
          out.ptr<float>(row)[3 * x + k] = bgr[k];
        }
      }
    }
  }
}

std::string frame_name(int64_t t, const std::string& ext) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "frame_%05lld", static_cast<long long>(t));
  return buf + ext;
}

bool is_frame_name(const std::string& n) {
  if (n.size() < 15 || n.compare(0, 6, "frame_") != 0) return false;
  const std::string e = n.substr(n.size() - 4);
  if (e != ".png" && e != ".exr") return false;
  return std::all_of(n.begin() + 6, n.end() - 4,
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// Encodes one BGR frame (8-bit, 16-bit or float) as PNG (or `ext`) in memory and writes it with
// every write and the final flush checked: OpenCV's imwrite does not report a failed flush (a full
// disk leaves an empty or truncated image).
Status write_image_file(const fs::path& path, const cv::Mat& bgr, const std::string& ext,
                        const std::vector<int>& params, bool atomic) {
  std::vector<uchar> bytes;
  if (!cv::imencode(ext, bgr, bytes, params)) {
    return io_error("cannot encode image " + quoted(path) + " as " + ext);
  }
  const auto span = std::as_bytes(std::span<const uchar>(bytes));
  return atomic ? write_file_atomic(path, span) : write_file(path, span);
}

// What write_clip() makes of a destination, from its name alone.
struct Destination {
  enum Form { kVideo, kImage, kPngDirectory } form = kPngDirectory;
  fs::path path;  // without trailing separators
};

Result<Destination> classify_destination(const fs::path& destination) {
  if (destination.empty()) return invalid_argument("no output path given");
  Destination d;
  d.path = destination;
  bool as_dir = false;
  while (!d.path.has_filename() && d.path.has_relative_path()) {  // "out/frames/" -> "out/frames"
    d.path = d.path.parent_path();
    as_dir = true;
  }
  if (!d.path.has_filename() || d.path.filename() == "." || d.path.filename() == "..") {
    return invalid_argument("cannot write a clip to " + quoted(destination) +
                            ": name a file or a new directory");
  }
  const std::string e = ext_of(d.path);
  if (as_dir || e.empty()) return d;
  if (is_video_write_ext(e)) {
    d.form = Destination::kVideo;
    return d;
  }
  if (is_image_ext(e)) {
    d.form = Destination::kImage;
    return d;
  }
  if (is_unwritable_video_ext(e)) {
    return unsupported("writing " + e + " is not supported; use .mp4, .mov, .avi, .mkv or a " +
                       "directory of PNG frames");
  }
  std::error_code ec;
  if (fs::is_directory(d.path, ec)) return d;  // an existing directory of any name: PNG frames
  return invalid_argument(
      "unknown output extension '" + e + "' in " + quoted(destination) +
      ": write a video (.mp4, .m4v, .mov, .avi, .mkv), one image (.png, .jpg, .bmp, .tif, .webp, "
      "...; a 1-frame clip) or a directory of PNG frames (a name without extension, or ending "
      "in '/')");
}

// The state of one clip being written (ClipWriter::Impl): the destination's form, its temporary
// (an AtomicFile: removed unless committed) and, for a video, the FFmpeg writer.
struct ClipWriterState {
  Destination dest;
  WriteOptions o;
  const CancelToken* cancel = nullptr;
  std::optional<AtomicFile> file;  // video file or image directory under a temporary name
  bool replace_dir = false;        // a previous image directory to move aside at commit
  // After `file`: closed before the temporary is removed.
  std::unique_ptr<detail::VideoFileWriter> video;
  ImageDepth image_depth = ImageDepth::k8;
  std::string frame_ext = ".png";  // of a directory's frames
  cv::Size size;
  HostTensor single;  // the one frame of an image destination, written at commit
  int64_t frames = 0;
  bool failed = false, committed = false;
  std::vector<std::string> warnings;
  cv::Mat bgr;
};

bool is_video_codec(const std::string& c) {
  return c == "h264" || c == "h265" || c == "ffv1" || c == "prores" || c == "prores4444";
}

// Bits per sample of a source (0 when it is no readable video or image).
int source_depth(const fs::path& source) {
  if (source.empty()) return 0;
  auto src = resolve_source(source);
  if (!src.is_ok()) return 0;
  if (src->kind == SourceKind::kImages) {
    auto img = decode_image(src->files.front());
    return img.is_ok() ? (img->depth() == CV_8U ? 8 : 16) : 0;
  }
  auto dec = open_video(src->path, nullptr);
  return dec.is_ok() ? (*dec)->info().bit_depth : 0;
}

// The options' checks that need no frame: fps, the codec for this form, the bit depth.
Status check_write_options(const Destination& d, const WriteOptions& o) {
  if (!std::isfinite(o.fps) || o.fps <= 0 || o.fps > 1000) {
    return invalid_argument("fps must be in (0, 1000], got " + std::to_string(o.fps));
  }
  if (o.crf_like_quality < -1 || o.crf_like_quality > 51) {
    return invalid_argument("crf_like_quality must be -1 (default) or 0..51, got " +
                            std::to_string(o.crf_like_quality));
  }
  if (o.source_first_frame < 0 || o.source_stride < 1) {
    return invalid_argument(
        "the source's frame selection must have first frame >= 0 and stride "
        ">= 1");
  }
  if (o.bit_depth != 0 && o.bit_depth != 8 && o.bit_depth != 10 && o.bit_depth != 16) {
    return invalid_argument("bit depth must be 8, 10 or 16 (0: automatic), got " +
                            std::to_string(o.bit_depth));
  }
  const std::string codec = o.codec == "auto" ? std::string() : o.codec;
  if (d.form == Destination::kVideo) {
    return detail::plan_codec(d.path, o, 0).status();
  }
  if (is_video_codec(codec)) {
    return invalid_argument("codec " + codec + " writes a video file, but " + quoted(d.path) +
                            " names " +
                            (d.form == Destination::kImage ? "an image" : "an image sequence") +
                            "; name a .mp4, .mov or .mkv file");
  }
  if (!codec.empty() && codec != "png" && codec != "exr") {
    return invalid_argument("unknown codec \"" + codec +
                            "\": use h264, h265, ffv1, prores, prores4444 (videos), png or exr "
                            "(image sequences)");
  }
  if (d.form == Destination::kImage && !codec.empty() && ext_of(d.path) != "." + codec) {
    return invalid_argument("codec " + codec + " does not write " + quoted(d.path) +
                            "; the image's extension chooses its format");
  }
  if (o.lossless) {
    return invalid_argument(
        "--lossless applies to H.264 and H.265 videos; image files are "
        "lossless or not by their format");
  }
  return Status::ok();
}

Status open_writer(ClipWriterState& w, const fs::path& destination) {
  if (destination.empty()) return invalid_argument("no output path given");
  SEEDVAE_ASSIGN_OR_RETURN(w.dest, classify_destination(destination));
  SEEDVAE_TRY(check_write_options(w.dest, w.o));
  fs::path parent = w.dest.path.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) {
    return not_found("cannot write " + quoted(destination) + ": no such directory " +
                     quoted(parent));
  }
  const fs::path& dest = w.dest.path;
  if (!w.o.source.empty() && fs::exists(dest, ec) && fs::equivalent(dest, w.o.source, ec)) {
    return invalid_argument("the output " + quoted(dest) + " is the input; write another file");
  }
  // Image destinations: 16-bit PNG/TIFF at 10 or 16 bits (automatic: from the source), float EXR.
  const std::string e = ext_of(dest);
  const int depth = w.o.bit_depth != 0 ? w.o.bit_depth : source_depth(w.o.source) > 8 ? 16 : 8;
  if (w.dest.form == Destination::kImage) {
    w.image_depth = e == ".exr"                                                 ? ImageDepth::kFloat
                    : depth > 8 && (e == ".png" || e == ".tif" || e == ".tiff") ? ImageDepth::k16
                                                                                : ImageDepth::k8;
  } else if (w.dest.form == Destination::kPngDirectory) {
    const bool exr = w.o.codec == "exr";
    w.frame_ext = exr ? ".exr" : ".png";
    w.image_depth = exr ? ImageDepth::kFloat : depth > 8 ? ImageDepth::k16 : ImageDepth::k8;
  }
  if (w.dest.form == Destination::kVideo) {
    w.file.emplace(dest);
  } else if (w.dest.form == Destination::kPngDirectory) {
    if (fs::exists(dest, ec)) {
      if (!fs::is_directory(dest, ec)) {
        return invalid_argument(quoted(dest) +
                                " exists and is not a directory; cannot write image frames there");
      }
      fs::directory_iterator it(dest, ec), end;
      if (ec) return io_error("cannot list " + quoted(dest) + ": " + ec.message());
      for (; it != end; it.increment(ec)) {
        if (ec) return io_error("cannot list " + quoted(dest) + ": " + ec.message());
        if (!is_frame_name(it->path().filename().string()) || !is_regular(it->path())) {
          return invalid_argument("directory " + quoted(dest) +
                                  " exists and holds other files than " +
                                  "frame_NNNNN.png / .exr (" + quoted(it->path().filename()) +
                                  "); refusing to replace it");
        }
      }
      w.replace_dir = true;
    }
    w.file.emplace(dest);
    if (!fs::create_directory(w.file->temp_path(), ec) || ec) {
      return io_error("cannot create directory " + quoted(w.file->temp_path()) +
                      (ec ? ": " + ec.message() : std::string()));
    }
  }
  return Status::ok();
}

Status write_frames(ClipWriterState& w, const HostTensor& chunk) {
  const Shape& s = chunk.shape();
  if (s.rank() != 5 || s.n() != 1 || s.c() != 3) {
    return invalid_argument("frames to write must be [1, 3, T, H, W], got " + s.to_string());
  }
  if (s.h() < 1 || s.w() < 1) return invalid_argument("cannot write empty frames " + s.to_string());
  if (s.h() > 32768 || s.w() > 32768) {
    return invalid_argument("frame size " + std::to_string(s.w()) + "x" + std::to_string(s.h()) +
                            " exceeds the 32768 pixel limit for writing");
  }
  int64_t n = 0;
  if (!s.checked_numel(&n) || n * dtype_size(chunk.dtype()) != chunk.nbytes()) {
    return invalid_argument("clip " + s.to_string() + " does not match its storage");
  }
  const cv::Size size(static_cast<int>(s.w()), static_cast<int>(s.h()));
  if (w.frames > 0 && size != w.size) {
    return invalid_argument("frames of " + size_str(size) + " cannot follow frames of " +
                            size_str(w.size) + " in " + quoted(w.dest.path));
  }
  const int64_t T = s.t();
  if (T == 0) return Status::ok();
  if (w.dest.form == Destination::kImage && w.frames + T > 1) {
    return invalid_argument(quoted(w.dest.path) + " names a single image but the clip has " +
                            std::to_string(w.frames + T) +
                            " frames; give a directory name (frames are written as "
                            "frame_00000.png, ...) or a video file (.mp4, .mov, .mkv)");
  }
  HostTensor f32;
  const HostTensor* v = &chunk;
  if (chunk.dtype() != DType::kF32) {
    f32 = chunk.to(DType::kF32);
    v = &f32;
  }
  w.size = size;
  if (w.dest.form == Destination::kImage) {
    w.single = *v;
    w.frames = 1;
    return Status::ok();
  }
  if (w.dest.form == Destination::kVideo && !w.video) {
    SEEDVAE_TRY(check_cancel(w.cancel));
    SEEDVAE_ASSIGN_OR_RETURN(
        w.video, detail::VideoFileWriter::open(w.file->temp_path(), w.dest.path, w.o, size.width,
                                               size.height, w.cancel));
  }
  const int64_t H = s.h(), W = s.w();
  for (int64_t t = 0; t < T; ++t) {
    SEEDVAE_TRY(check_cancel(w.cancel));
    if (w.dest.form == Destination::kPngDirectory) {
      frame_to_bgr(v->data<float>(), T, H, W, t, w.image_depth, w.bgr);
      SEEDVAE_TRY(write_image_file(w.file->temp_path() / frame_name(w.frames, w.frame_ext), w.bgr,
                                   w.frame_ext, {}, false)
                      .with_context("writing " + quoted(w.dest.path)));
    } else {
      SEEDVAE_TRY(w.video->write(v->data<float>(), T, t));
    }
    ++w.frames;
  }
  return Status::ok();
}

Status commit_writer(ClipWriterState& w) {
  if (w.frames == 0)
    return invalid_argument("cannot write an empty clip to " + quoted(w.dest.path));
  const fs::path& dest = w.dest.path;
  switch (w.dest.form) {
    case Destination::kImage: {
      cv::Mat bgr;
      frame_to_bgr(w.single.data<float>(), 1, w.size.height, w.size.width, 0, w.image_depth, bgr);
      std::vector<int> params;
      const std::string e = ext_of(dest);
      if ((e == ".jpg" || e == ".jpeg" || e == ".jpe") && w.o.crf_like_quality >= 0) {
        params = {cv::IMWRITE_JPEG_QUALITY,
                  static_cast<int>(std::lround(100.0 - w.o.crf_like_quality * 100.0 / 51.0))};
      }
      return write_image_file(dest, bgr, e, params, /*atomic=*/true);
    }
    case Destination::kVideo:
      SEEDVAE_TRY(check_cancel(w.cancel));
      SEEDVAE_TRY(w.video->finish());
      w.warnings = w.video->warnings();
      return w.file->commit();
    case Destination::kPngDirectory: break;
  }
  if (!w.replace_dir) return w.file->commit();
  // Replace a previous output: move it aside, move the new one in, then delete the old one.
  std::error_code ec;
  fs::path aside = dest;
  aside += ".old-" + std::to_string(std::random_device{}());
  fs::rename(dest, aside, ec);
  if (ec) return io_error("cannot move the previous " + quoted(dest) + " aside: " + ec.message());
  Status st = w.file->commit();
  if (!st) {
    fs::rename(aside, dest, ec);
    return st;
  }
  fs::remove_all(aside, ec);
  return Status::ok();
}

template <typename F>
auto guarded(const fs::path& path, const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const cv::Exception& e) {
    if (e.code == cv::Error::StsNoMem) {
      return out_of_memory(std::string(what) + " " + quoted(path) + ": out of memory in OpenCV");
    }
    return io_error(std::string(what) + " " + quoted(path) + ": OpenCV error: " + e.what());
  } catch (const std::bad_alloc&) {
    return out_of_memory(std::string(what) + " " + quoted(path) + ": out of memory");
  } catch (const std::exception& e) {
    return io_error(std::string(what) + " " + quoted(path) + ": " + e.what());
  } catch (...) {
    return internal_error(std::string(what) + " " + quoted(path) + ": unknown exception");
  }
}

}  // namespace

Result<VideoInfo> probe(const fs::path& source, const CancelToken* cancel) {
  return guarded(source, "probing",
                 [&]() -> Result<VideoInfo> { return probe_impl(source, cancel); });
}

std::string stored_size_note(const fs::path&, int64_t, int64_t) {
  return {};  // every writer stores the exact size (odd sizes with 4:4:4 chroma)
}

Result<Clip> read_clip(const fs::path& source, const ReadOptions& options,
                       const CancelToken* cancel) {
  return guarded(source, "reading", [&]() -> Result<Clip> {
    init_opencv_once();
    SEEDVAE_TRY(validate(options));
    return read_all(source, options, cancel);
  });
}

// ---------------------------------------------------------------------------------------------
// FrameReader

struct FrameReader::Impl {
  explicit Impl(const ReadOptions& o) : reader(o) {}
  SeqReader reader;
  fs::path source;
  const CancelToken* cancel = nullptr;
};

FrameReader::FrameReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FrameReader::~FrameReader() = default;
FrameReader::FrameReader(FrameReader&&) noexcept = default;
FrameReader& FrameReader::operator=(FrameReader&&) noexcept = default;

Result<FrameReader> FrameReader::open(const fs::path& source, const ReadOptions& options,
                                      const CancelToken* cancel) {
  return guarded(source, "reading", [&]() -> Result<FrameReader> {
    init_opencv_once();
    SEEDVAE_TRY(validate(options));
    auto impl = std::make_unique<Impl>(options);
    impl->source = source;
    impl->cancel = cancel;
    impl->reader.set_cancel(cancel);
    SEEDVAE_TRY(check_cancel(cancel));
    SEEDVAE_TRY(impl->reader.open(source));
    return FrameReader(std::move(impl));
  });
}

double FrameReader::fps() const {
  return impl_ ? impl_->reader.fps() : 24.0;
}

int64_t FrameReader::expected_frames() const {
  return impl_->reader.expected_frames();
}

int FrameReader::bit_depth() const {
  return impl_ ? impl_->reader.bit_depth() : 8;
}

std::string FrameReader::warning() const {
  return impl_ ? impl_->reader.warning() : std::string();
}

Result<HostTensor> FrameReader::read(int64_t max_frames, const CancelToken* stop) {
  if (!impl_) return invalid_argument("FrameReader::read on a moved-from reader");
  if (max_frames < 1) {
    return invalid_argument("FrameReader::read needs max_frames >= 1, got " +
                            std::to_string(max_frames));
  }
  return guarded(impl_->source, "reading", [&]() -> Result<HostTensor> {
    return impl_->reader.read(max_frames, impl_->cancel, stop);
  });
}

// ---------------------------------------------------------------------------------------------
// ClipWriter

struct ClipWriter::Impl {
  ClipWriterState state;
  fs::path destination;
};

ClipWriter::ClipWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ClipWriter::~ClipWriter() = default;
ClipWriter::ClipWriter(ClipWriter&&) noexcept = default;
ClipWriter& ClipWriter::operator=(ClipWriter&&) noexcept = default;

Result<ClipWriter> ClipWriter::open(const fs::path& destination, const WriteOptions& options,
                                    const CancelToken* cancel) {
  return guarded(destination, "writing", [&]() -> Result<ClipWriter> {
    init_opencv_once();
    auto impl = std::make_unique<Impl>();
    impl->destination = destination;
    impl->state.o = options;
    impl->state.cancel = cancel;
    SEEDVAE_TRY(open_writer(impl->state, destination));
    return ClipWriter(std::move(impl));
  });
}

Status ClipWriter::write(const HostTensor& frames) {
  if (!impl_) return invalid_argument("ClipWriter::write on a moved-from writer");
  ClipWriterState& w = impl_->state;
  if (w.committed) return invalid_argument("ClipWriter::write after commit()");
  if (w.failed) return io_error("writing " + quoted(impl_->destination) + " failed before");
  Status st = guarded(impl_->destination, "writing", [&] { return write_frames(w, frames); });
  if (!st) w.failed = true;
  return st;
}

Status ClipWriter::commit() {
  if (!impl_) return invalid_argument("ClipWriter::commit on a moved-from writer");
  ClipWriterState& w = impl_->state;
  if (w.committed) return Status::ok();
  if (w.failed) return io_error("writing " + quoted(impl_->destination) + " failed before");
  Status st = guarded(impl_->destination, "writing", [&] { return commit_writer(w); });
  if (st) {
    w.committed = true;
  } else {
    w.failed = true;
  }
  return st;
}

int64_t ClipWriter::frames() const {
  return impl_ ? impl_->state.frames : 0;
}

std::vector<std::string> ClipWriter::warnings() const {
  return impl_ ? impl_->state.warnings : std::vector<std::string>{};
}

std::string ClipWriter::description() const {
  return impl_ && impl_->state.video ? impl_->state.video->description() : std::string();
}

Status write_clip(const fs::path& destination, const HostTensor& video, const WriteOptions& options,
                  const CancelToken* cancel) {
  SEEDVAE_TRY(guarded(destination, "writing", [&] { return validate_clip_tensor(video); }));
  SEEDVAE_ASSIGN_OR_RETURN(ClipWriter writer, ClipWriter::open(destination, options, cancel));
  SEEDVAE_TRY(writer.write(video));
  return writer.commit();
}

Status write_clip(const fs::path& destination, const FrameSpool& frames,
                  const WriteOptions& options, const CancelToken* cancel) {
  const int64_t total = frames.frames();
  if (total == 0) return invalid_argument("cannot write an empty clip to " + quoted(destination));
  SEEDVAE_ASSIGN_OR_RETURN(ClipWriter writer, ClipWriter::open(destination, options, cancel));
  constexpr int64_t kChunk = 8;
  for (int64_t first = 0; first < total; first += kChunk) {
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor chunk, frames.read(first, std::min(kChunk, total - first)));
    SEEDVAE_TRY(writer.write(chunk));
  }
  return writer.commit();
}

// ---- segments ----------------------------------------------------------------------------------

bool writes_in_segments(const fs::path& destination) {
  auto d = classify_destination(destination);
  return d.is_ok() && d->form != Destination::kImage;
}

namespace {

fs::path segment_file(const fs::path& work, int64_t index) {
  char name[48];
  std::snprintf(name, sizeof name, "segment_%05lld.av", static_cast<long long>(index));
  return work / name;
}

}  // namespace

struct SegmentedClipWriter::Impl {
  ClipWriterState state;  // the destination's form, options, image depth (no temporary)
  fs::path work;
  bool open = false;
  int64_t index = 0, next_frame = 0, first = 0;
  std::optional<AtomicFile> file;  // the video segment being written
  std::unique_ptr<detail::VideoFileWriter> video;
  std::string description;
  cv::Mat bgr;
  fs::path frames_dir() const { return work / "frames"; }
};

SegmentedClipWriter::SegmentedClipWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SegmentedClipWriter::~SegmentedClipWriter() = default;
SegmentedClipWriter::SegmentedClipWriter(SegmentedClipWriter&&) noexcept = default;
SegmentedClipWriter& SegmentedClipWriter::operator=(SegmentedClipWriter&&) noexcept = default;

Result<SegmentedClipWriter> SegmentedClipWriter::open(const fs::path& destination,
                                                      const WriteOptions& options,
                                                      const fs::path& work_dir,
                                                      const CancelToken* cancel) {
  return guarded(destination, "writing", [&]() -> Result<SegmentedClipWriter> {
    init_opencv_once();
    auto impl = std::make_unique<Impl>();
    impl->state.o = options;
    impl->state.cancel = cancel;
    SEEDVAE_TRY(open_writer(impl->state, destination));  // the checks; its temporary goes
    impl->state.file.reset();
    if (impl->state.dest.form == Destination::kImage) {
      return invalid_argument(quoted(destination) +
                              " names a single image, which is not written in segments");
    }
    std::error_code ec;
    if (!fs::is_directory(work_dir, ec)) {
      return not_found("no segment directory " + quoted(work_dir));
    }
    impl->work = work_dir;
    return SegmentedClipWriter(std::move(impl));
  });
}

void SegmentedClipWriter::set_cancel(const CancelToken* cancel) {
  impl_->state.cancel = cancel;
}

bool SegmentedClipWriter::in_segment() const {
  return impl_ && impl_->open;
}

Status SegmentedClipWriter::begin_segment(int64_t index, int64_t first_frame) {
  Impl& w = *impl_;
  if (w.open) return internal_error("begin_segment inside a segment");
  w.open = true;
  w.index = index;
  w.first = w.next_frame = first_frame;
  w.video.reset();
  w.file.reset();
  if (w.state.dest.form == Destination::kPngDirectory) {
    std::error_code ec;
    fs::create_directories(w.frames_dir(), ec);
    if (ec) return io_error("cannot create " + quoted(w.frames_dir()) + ": " + ec.message());
  } else {
    w.file.emplace(segment_file(w.work, index));
  }
  return Status::ok();
}

Status SegmentedClipWriter::write(const HostTensor& chunk) {
  Impl& w = *impl_;
  if (!w.open) return internal_error("SegmentedClipWriter::write outside a segment");
  ClipWriterState& st = w.state;
  return guarded(st.dest.path, "writing", [&]() -> Status {
    const Shape& s = chunk.shape();
    if (s.rank() != 5 || s.n() != 1 || s.c() != 3 || s.h() < 1 || s.w() < 1) {
      return invalid_argument("frames to write must be [1, 3, T, H, W], got " + s.to_string());
    }
    HostTensor f32;
    const HostTensor* v = &chunk;
    if (chunk.dtype() != DType::kF32) {
      f32 = chunk.to(DType::kF32);
      v = &f32;
    }
    const int64_t T = s.t(), H = s.h(), W = s.w();
    if (st.dest.form == Destination::kVideo && !w.video && T > 0) {
      SEEDVAE_TRY(check_cancel(st.cancel));
      SEEDVAE_ASSIGN_OR_RETURN(
          w.video, detail::VideoFileWriter::open(w.file->temp_path(), st.dest.path, st.o,
                                                 static_cast<int>(W), static_cast<int>(H), nullptr,
                                                 detail::WriterMode::kSegment, w.first));
      w.description = w.video->description();
    }
    for (int64_t t = 0; t < T; ++t) {
      SEEDVAE_TRY(check_cancel(st.cancel));
      if (st.dest.form == Destination::kPngDirectory) {
        frame_to_bgr(v->data<float>(), T, H, W, t, st.image_depth, w.bgr);
        SEEDVAE_TRY(write_image_file(w.frames_dir() / frame_name(w.next_frame, st.frame_ext), w.bgr,
                                     st.frame_ext, {}, false)
                        .with_context("writing " + quoted(st.dest.path)));
      } else {
        SEEDVAE_TRY(w.video->write(v->data<float>(), T, t));
      }
      ++w.next_frame;
    }
    return Status::ok();
  });
}

Status SegmentedClipWriter::end_segment() {
  Impl& w = *impl_;
  if (!w.open) return internal_error("end_segment outside a segment");
  w.open = false;
  if (w.state.dest.form == Destination::kPngDirectory) return Status::ok();
  if (!w.video) return internal_error("a video segment without frames");
  // Not interrupted by a pending cancel (the segment is short, its writer was opened without the
  // token): a cancel at a segment's last chunk still leaves its checkpoint.
  return guarded(w.state.dest.path, "writing", [&]() -> Status {
    SEEDVAE_TRY(w.video->finish());
    w.video.reset();
    Status st = w.file->commit();
    w.file.reset();
    return st;
  });
}

Status SegmentedClipWriter::discard_from(int64_t index, int64_t first_frame) {
  Impl& w = *impl_;
  std::error_code ec;
  if (w.state.dest.form == Destination::kPngDirectory) {
    for (int64_t f = first_frame;; ++f) {
      const fs::path p = w.frames_dir() / frame_name(f, w.state.frame_ext);
      if (!fs::exists(p, ec)) break;
      if (!fs::remove(p, ec)) return io_error("cannot remove " + quoted(p) + ": " + ec.message());
    }
    return Status::ok();
  }
  for (int64_t i = index;; ++i) {
    const fs::path p = segment_file(w.work, i);
    if (!fs::exists(p, ec)) break;
    if (!fs::remove(p, ec)) return io_error("cannot remove " + quoted(p) + ": " + ec.message());
  }
  // Temporaries of a process that ended without unwinding (killed while writing a segment).
  for (fs::directory_iterator it(w.work, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().find(".tmp-") != std::string::npos) {
      fs::remove_all(it->path(), ec);
    }
  }
  return Status::ok();
}

Status SegmentedClipWriter::join(int64_t segments, int64_t frames, int width, int height) {
  Impl& w = *impl_;
  if (w.open) return internal_error("join inside a segment");
  const fs::path dest = w.state.dest.path;
  return guarded(dest, "writing", [&]() -> Status {
    ClipWriterState st;
    st.o = w.state.o;
    st.cancel = w.state.cancel;
    SEEDVAE_TRY(open_writer(st, dest));
    std::error_code ec;
    if (st.dest.form == Destination::kPngDirectory) {
      int64_t n = 0;
      for (fs::directory_iterator it(w.frames_dir(), ec), end; !ec && it != end; it.increment(ec)) {
        n += is_frame_name(it->path().filename().string()) ? 1 : 0;
      }
      if (ec || n != frames) {
        return corrupt_data("the segment directory " + quoted(w.frames_dir()) + " holds " +
                            std::to_string(n) + " frames, expected " + std::to_string(frames));
      }
      fs::remove(st.file->temp_path(), ec);  // the empty directory open_writer made
      fs::rename(w.frames_dir(), st.file->temp_path(), ec);
      if (ec) {
        return io_error("cannot move " + quoted(w.frames_dir()) + " to " +
                        quoted(st.file->temp_path()) + ": " + ec.message());
      }
    } else {
      SEEDVAE_ASSIGN_OR_RETURN(
          st.video, detail::VideoFileWriter::open(st.file->temp_path(), dest, st.o, width, height,
                                                  st.cancel, detail::WriterMode::kJoin));
      int64_t n = 0;
      for (int64_t i = 0; i < segments; ++i) {
        SEEDVAE_TRY(check_cancel(st.cancel));
        SEEDVAE_ASSIGN_OR_RETURN(const int64_t k,
                                 st.video->append_segment(segment_file(w.work, i)));
        n += k;
      }
      if (n != frames) {
        return corrupt_data("the segments in " + quoted(w.work) + " hold " + std::to_string(n) +
                            " frames, expected " + std::to_string(frames));
      }
      if (w.description.empty()) w.description = st.video->description();
    }
    st.frames = frames;
    SEEDVAE_TRY(commit_writer(st));
    w.state.warnings = st.warnings;
    return Status::ok();
  });
}

std::vector<std::string> SegmentedClipWriter::warnings() const {
  return impl_ ? impl_->state.warnings : std::vector<std::string>{};
}

std::string SegmentedClipWriter::description() const {
  return impl_ ? impl_->description : std::string();
}

bool is_writable_video_extension(const fs::path& path) {
  return is_video_write_ext(ext_of(path));
}

Status check_clip_destination(const fs::path& destination) {
  return classify_destination(destination).status();
}

Status check_clip_destination(const fs::path& destination, const WriteOptions& options) {
  return guarded(destination, "writing", [&]() -> Status {
    SEEDVAE_ASSIGN_OR_RETURN(Destination d, classify_destination(destination));
    return check_write_options(d, options);
  });
}

bool is_frame_pattern(const fs::path& path) {
  return parse_pattern(path.filename().string()).has_value();
}

int64_t physical_memory_bytes() {
#if defined(__unix__) || defined(__APPLE__)
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<int64_t>(pages) * page;
#endif
  return 0;
}

}  // namespace seedvae::media
