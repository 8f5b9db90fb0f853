// Video files through FFmpeg's libraries. The only translation unit of SeedVAE that includes them:
// every AVFormatContext, AVCodecContext, AVFrame, AVPacket and SwsContext is owned by a
// unique_ptr with its FFmpeg destructor, and every negative FFmpeg return becomes a Status.
//
// Written by hand, because the libraries do not do it: the interleaving of 10/12-bit planar RGB
// into the reader's matrices (swscale has no packed RGB format of those depths), the quantisation
// of the fp32 clip into the encoder's RGB samples (the clip is planar float), turning frames
// upright by their display matrix (a filter graph would be the library's way; a quarter turn of
// a matrix is one OpenCV call), and the copy of the source's audio packets in step with the
// video (libavformat remuxes, but choosing, trimming and shifting the packets is the caller's).
#include "core/media/ffmpeg_video.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <unistd.h>
#endif

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

namespace seedvae::media::detail {

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// RAII and error text

struct InputCloser {
  void operator()(AVFormatContext* p) const { avformat_close_input(&p); }
};
struct OutputCloser {
  void operator()(AVFormatContext* p) const {
    if (p->pb != nullptr && (p->oformat->flags & AVFMT_NOFILE) == 0) avio_closep(&p->pb);
    avformat_free_context(p);
  }
};
struct CodecCloser {
  void operator()(AVCodecContext* p) const { avcodec_free_context(&p); }
};
struct FrameCloser {
  void operator()(AVFrame* p) const { av_frame_free(&p); }
};
struct PacketCloser {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsCloser {
  void operator()(SwsContext* p) const { sws_freeContext(p); }
};
struct DictCloser {
  void operator()(AVDictionary* p) const { av_dict_free(&p); }
};
using InputPtr = std::unique_ptr<AVFormatContext, InputCloser>;
using OutputPtr = std::unique_ptr<AVFormatContext, OutputCloser>;
using CodecPtr = std::unique_ptr<AVCodecContext, CodecCloser>;
using FramePtr = std::unique_ptr<AVFrame, FrameCloser>;
using PacketPtr = std::unique_ptr<AVPacket, PacketCloser>;
using SwsPtr = std::unique_ptr<SwsContext, SwsCloser>;

std::string quoted(const fs::path& p) {
  std::string s;  // appended piece by piece: GCC 12 warns (-Wrestrict) on "'" + std::string
  s += '\'';
  s += p.string();
  s += '\'';
  return s;
}

std::string av_text(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

Status check_cancel(const CancelToken* cancel) {
  return cancel != nullptr ? cancel->check() : Status::ok();
}

// A failed read or decode: out of memory, cancelled, or the file's fault.
Status read_failure(int err, const fs::path& path, const std::string& what,
                    const CancelToken* cancel) {
  if (err == AVERROR_EXIT && cancel != nullptr && cancel->requested()) return cancelled();
  if (err == AVERROR(ENOMEM)) return out_of_memory(what + " " + quoted(path) + ": out of memory");
  if (err == AVERROR(EACCES) || err == AVERROR(EIO) || err == AVERROR(EISDIR)) {
    return io_error(what + " " + quoted(path) + ": " + av_text(err));
  }
  return corrupt_data(what + " " + quoted(path) + ": " + av_text(err));
}

// A failed write: a full disk and other OS refusals are kIoError naming the destination.
Status write_failure(int err, const fs::path& dest, const std::string& what) {
  if (err == AVERROR(ENOMEM)) return out_of_memory(what + " " + quoted(dest) + ": out of memory");
  std::string msg = what + " " + quoted(dest) + " failed: " + av_text(err);
  if (err == AVERROR(ENOSPC)) msg += " (no space left on device)";
  return io_error(msg);
}

int interrupt_cb(void* opaque) {
  const auto* cancel = static_cast<const CancelToken*>(opaque);
  return cancel != nullptr && cancel->requested() ? 1 : 0;
}

// Opens a file for demuxing and reads its stream parameters.
Result<InputPtr> open_input(const fs::path& path, const CancelToken* cancel) {
  AVFormatContext* raw = avformat_alloc_context();
  if (raw == nullptr) return out_of_memory("opening " + quoted(path) + ": out of memory");
  raw->interrupt_callback.callback = interrupt_cb;
  raw->interrupt_callback.opaque = const_cast<CancelToken*>(cancel);
  int r = avformat_open_input(&raw, path.string().c_str(), nullptr, nullptr);
  if (r < 0) {  // avformat_open_input frees the context on failure
    if (r == AVERROR_EXIT && cancel != nullptr && cancel->requested()) return cancelled();
    if (r == AVERROR(ENOENT)) return not_found("no such file or directory: " + quoted(path));
    if (r == AVERROR(EACCES)) return io_error("cannot read " + quoted(path) + ": " + av_text(r));
    return corrupt_data("cannot open " + quoted(path) +
                        " as a video: it is not a video file, or it is corrupt, truncated or in an "
                        "unsupported format (" +
                        av_text(r) + ")");
  }
  InputPtr in(raw);
  r = avformat_find_stream_info(in.get(), nullptr);
  if (r < 0) return read_failure(r, path, "reading the streams of", cancel);
  return in;
}

bool is_yuvj(AVPixelFormat f, AVPixelFormat* plain) {
  switch (f) {
    case AV_PIX_FMT_YUVJ420P: *plain = AV_PIX_FMT_YUV420P; return true;
    case AV_PIX_FMT_YUVJ422P: *plain = AV_PIX_FMT_YUV422P; return true;
    case AV_PIX_FMT_YUVJ444P: *plain = AV_PIX_FMT_YUV444P; return true;
    case AV_PIX_FMT_YUVJ440P: *plain = AV_PIX_FMT_YUV440P; return true;
    case AV_PIX_FMT_YUVJ411P: *plain = AV_PIX_FMT_YUV411P; return true;
    default: *plain = f; return false;
  }
}

// swscale's coefficient set for a colour matrix; unstated: BT.709 from 720 lines, else BT.601.
int sws_matrix(int space, int height) {
  switch (static_cast<AVColorSpace>(space)) {
    case AVCOL_SPC_BT709: return SWS_CS_ITU709;
    case AVCOL_SPC_FCC: return SWS_CS_FCC;
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M: return SWS_CS_ITU601;
    case AVCOL_SPC_SMPTE240M: return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL: return SWS_CS_BT2020;
    default: return height >= 720 ? SWS_CS_ITU709 : SWS_CS_ITU601;
  }
}

AVColorSpace stated_matrix(int space, int height) {
  switch (sws_matrix(space, height)) {
    case SWS_CS_ITU709: return AVCOL_SPC_BT709;
    case SWS_CS_FCC: return AVCOL_SPC_FCC;
    case SWS_CS_SMPTE240M: return AVCOL_SPC_SMPTE240M;
    case SWS_CS_BT2020:
      return static_cast<AVColorSpace>(space) == AVCOL_SPC_BT2020_CL ? AVCOL_SPC_BT2020_CL
                                                                     : AVCOL_SPC_BT2020_NCL;
    default:
      return static_cast<AVColorSpace>(space) == AVCOL_SPC_BT470BG ? AVCOL_SPC_BT470BG
                                                                   : AVCOL_SPC_SMPTE170M;
  }
}

int output_depth_of(int depth) {
  return depth <= 8 ? 8 : depth <= 10 ? 10 : depth <= 12 ? 12 : 16;
}

// Clockwise quarter turns the display matrix asks for (0, 90, 180 or 270 degrees).
int rotation_of(const AVStream* st) {
  const uint8_t* sd = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, nullptr);
  if (sd == nullptr) return 0;
  const double ccw = av_display_rotation_get(reinterpret_cast<const int32_t*>(sd));
  if (!std::isfinite(ccw)) return 0;
  const long quarter = std::lround(-ccw / 90.0);
  return static_cast<int>(((quarter % 4) + 4) % 4) * 90;
}

}  // namespace

void init_ffmpeg_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("SEEDVAE_FFMPEG_LOG");
    if (env == nullptr || *env == '\0') av_log_set_level(AV_LOG_QUIET);
  });
}

// ---------------------------------------------------------------------------------------------
// Decoding

struct VideoDecoder::Impl {
  fs::path path;
  const CancelToken* cancel = nullptr;
  InputPtr fmt;
  CodecPtr dec;
  FramePtr frame = FramePtr(av_frame_alloc());
  PacketPtr pkt = PacketPtr(av_packet_alloc());
  SwsPtr sws;
  int sws_key[6] = {-1, -1, -1, -1, -1, -1};  // what `sws` was set up for
  int stream = -1;
  StreamInfo info;
  AVRational tb{1, 24};
  int64_t default_duration = 1;
  bool flushing = false, ended = false;
  int errors = 0;
  bool have_last = false;
  int64_t last_pts = 0, last_duration = 1;
  std::vector<uint16_t> planes;  // 10/12-bit planar output before interleaving

  Status convert(cv::Mat* rgb);
};

VideoDecoder::VideoDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VideoDecoder::~VideoDecoder() = default;

Result<std::unique_ptr<VideoDecoder>> VideoDecoder::open(const fs::path& path,
                                                         const CancelToken* cancel) {
  init_ffmpeg_once();
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->cancel = cancel;
  if (!impl->frame || !impl->pkt) return out_of_memory("reading " + quoted(path) + ": no memory");
  SEEDVAE_ASSIGN_OR_RETURN(impl->fmt, open_input(path, cancel));
  AVFormatContext* fmt = impl->fmt.get();
  const AVCodec* codec = nullptr;
  const int s = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (s == AVERROR_DECODER_NOT_FOUND) {
    return unsupported(quoted(path) + ": this FFmpeg has no decoder for its video codec");
  }
  if (s < 0) return corrupt_data(quoted(path) + " has no video stream");
  impl->stream = s;
  AVStream* st = fmt->streams[s];
  impl->dec.reset(avcodec_alloc_context3(codec));
  if (!impl->dec) return out_of_memory("reading " + quoted(path) + ": no memory");
  int r = avcodec_parameters_to_context(impl->dec.get(), st->codecpar);
  if (r < 0) return read_failure(r, path, "reading", cancel);
  impl->dec->thread_count = 0;  // as many as the machine has
  impl->dec->pkt_timebase = st->time_base;
  r = avcodec_open2(impl->dec.get(), codec, nullptr);
  if (r < 0) {
    return corrupt_data("cannot open the " + std::string(codec->name) + " decoder for " +
                        quoted(path) + ": " + av_text(r));
  }
  StreamInfo& info = impl->info;
  impl->tb = st->time_base.num > 0 && st->time_base.den > 0 ? st->time_base : AVRational{1, 24};
  info.tb_num = impl->tb.num;
  info.tb_den = impl->tb.den;
  const AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
  const double fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
  info.fps = std::isfinite(fps) && fps > 0 && fps <= 1000 ? fps : 0;
  const int64_t d = av_rescale_q(1, av_inv_q(info.fps > 0 ? rate : AVRational{24, 1}), impl->tb);
  impl->default_duration = std::max<int64_t>(1, d);
  info.listed_frames = st->nb_frames > 0 ? st->nb_frames : -1;
  if (info.listed_frames < 0 && info.fps > 0) {  // Matroska states a duration, not a count
    double seconds = fmt->duration > 0 ? static_cast<double>(fmt->duration) / AV_TIME_BASE : 0;
    if (seconds <= 0 && st->duration > 0)
      seconds = static_cast<double>(st->duration) * av_q2d(impl->tb);
    if (seconds > 0) info.listed_frames = std::llround(seconds * info.fps);
  }
  info.codec = codec->name;
  info.rotation = rotation_of(st);
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) ++info.audio_streams;
  }
  const auto* desc = av_pix_fmt_desc_get(static_cast<AVPixelFormat>(st->codecpar->format));
  info.bit_depth = desc != nullptr ? desc->comp[0].depth : 8;
  info.output_depth = output_depth_of(info.bit_depth);
  info.rgb = desc != nullptr && (desc->flags & AV_PIX_FMT_FLAG_RGB) != 0;
  const int w = st->codecpar->width, h = st->codecpar->height;
  const bool turned = info.rotation == 90 || info.rotation == 270;
  info.width = turned ? h : w;
  info.height = turned ? w : h;
  AVPixelFormat plain;
  const bool jpeg = is_yuvj(static_cast<AVPixelFormat>(st->codecpar->format), &plain);
  info.color_range = jpeg ? AVCOL_RANGE_JPEG : st->codecpar->color_range;
  info.color_space = info.rgb ? AVCOL_SPC_RGB : stated_matrix(st->codecpar->color_space, h);
  info.color_primaries = st->codecpar->color_primaries;
  info.color_trc = st->codecpar->color_trc;
  return std::unique_ptr<VideoDecoder>(new VideoDecoder(std::move(impl)));
}

const StreamInfo& VideoDecoder::info() const {
  return impl_->info;
}
int64_t VideoDecoder::pts() const {
  return impl_->last_pts;
}
int64_t VideoDecoder::duration() const {
  return impl_->last_duration;
}
int VideoDecoder::decode_errors() const {
  return impl_->errors;
}
double VideoDecoder::max_value() const {
  return std::ldexp(1.0, impl_->info.output_depth) - 1;
}

Result<bool> VideoDecoder::next(cv::Mat* rgb) {
  Impl& d = *impl_;
  if (d.ended) return false;
  int consecutive_errors = 0;
  for (;;) {
    int r = avcodec_receive_frame(d.dec.get(), d.frame.get());
    if (r == 0) {
      AVFrame* f = d.frame.get();
      int64_t ts = f->best_effort_timestamp;
      if (ts == AV_NOPTS_VALUE) ts = d.have_last ? d.last_pts + d.last_duration : 0;
      if (d.have_last && ts <= d.last_pts) ts = d.last_pts + 1;  // damaged timing: keep order
      d.last_pts = ts;
      d.last_duration = f->pkt_duration > 0 ? f->pkt_duration : d.default_duration;
      d.have_last = true;
      Status st = rgb != nullptr ? d.convert(rgb) : Status::ok();
      av_frame_unref(f);
      if (!st) return st;
      return true;
    }
    if (r == AVERROR_EOF) {
      d.ended = true;
      return false;
    }
    if (r != AVERROR(EAGAIN)) {  // a frame that did not decode: skipped, as players do
      if (r == AVERROR(ENOMEM)) return out_of_memory("decoding " + quoted(d.path));
      ++d.errors;
      if (++consecutive_errors > 64) {
        d.ended = true;
        return false;
      }
      continue;
    }
    if (d.flushing) {  // nothing more will come
      d.ended = true;
      return false;
    }
    r = av_read_frame(d.fmt.get(), d.pkt.get());
    if (r < 0) {
      if (r == AVERROR_EXIT && d.cancel != nullptr && d.cancel->requested()) return cancelled();
      if (r == AVERROR(ENOMEM)) return out_of_memory("reading " + quoted(d.path));
      if (r != AVERROR_EOF) ++d.errors;  // a read error ends the stream like a truncation
      d.flushing = true;
      avcodec_send_packet(d.dec.get(), nullptr);
      continue;
    }
    if (d.pkt->stream_index != d.stream) {
      av_packet_unref(d.pkt.get());
      continue;
    }
    r = avcodec_send_packet(d.dec.get(), d.pkt.get());
    av_packet_unref(d.pkt.get());
    if (r == AVERROR(ENOMEM)) return out_of_memory("decoding " + quoted(d.path));
    if (r < 0 && r != AVERROR(EAGAIN)) ++d.errors;  // a damaged packet is skipped
  }
}

// The decoded frame as RGB of the output depth, turned upright. 8 and 16 bits are packed by
// swscale straight into the matrix; 10 and 12 bits go through planar GBR of that depth (exact
// for RGB sources: x / 1023 reads back what was written) and are interleaved here.
Status VideoDecoder::Impl::convert(cv::Mat* rgb) {
  AVFrame* f = frame.get();
  const int w = f->width, h = f->height;
  if (w <= 0 || h <= 0 ||
      av_image_check_size(static_cast<unsigned>(w), static_cast<unsigned>(h), 0, nullptr) < 0) {
    return corrupt_data(quoted(path) + " has a frame of invalid size " + std::to_string(w) + "x" +
                        std::to_string(h));
  }
  AVPixelFormat src = AV_PIX_FMT_NONE;
  bool full = f->color_range == AVCOL_RANGE_JPEG;
  if (is_yuvj(static_cast<AVPixelFormat>(f->format), &src)) full = true;
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(src);
  if (desc == nullptr) return corrupt_data(quoted(path) + " decodes to an unknown pixel format");
  const int depth = output_depth_of(desc->comp[0].depth);
  const AVPixelFormat dst = depth == 8    ? AV_PIX_FMT_RGB24
                            : depth == 16 ? AV_PIX_FMT_RGB48
                            : depth == 10 ? AV_PIX_FMT_GBRP10
                                          : AV_PIX_FMT_GBRP12;
  const int space = f->colorspace != AVCOL_SPC_UNSPECIFIED ? f->colorspace : dec->colorspace;
  const int key[6] = {w, h, src, depth, full ? 1 : 0, space};
  if (!sws || !std::equal(key, key + 6, sws_key)) {
    sws.reset(
        sws_getContext(w, h, src, w, h, dst,
                       SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP,
                       nullptr, nullptr, nullptr));
    if (!sws) {
      return unsupported(quoted(path) + ": cannot convert its " +
                         std::string(av_get_pix_fmt_name(src)) + " frames to RGB");
    }
    if ((desc->flags & AV_PIX_FMT_FLAG_RGB) == 0) {
      // The source's matrix and range; RGB out is full range.
      sws_setColorspaceDetails(sws.get(), sws_getCoefficients(sws_matrix(space, h)), full ? 1 : 0,
                               sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
    }
    std::copy(key, key + 6, sws_key);
  }
  cv::Mat out(h, w, depth == 8 ? CV_8UC3 : CV_16UC3);
  if (depth == 8 || depth == 16) {
    uint8_t* data[4] = {out.data, nullptr, nullptr, nullptr};
    int lines[4] = {static_cast<int>(out.step[0]), 0, 0, 0};
    sws_scale(sws.get(), f->data, f->linesize, 0, h, data, lines);
  } else {
    const size_t plane = static_cast<size_t>(w) * static_cast<size_t>(h);
    planes.resize(3 * plane);
    uint8_t* data[4] = {reinterpret_cast<uint8_t*>(planes.data()),
                        reinterpret_cast<uint8_t*>(planes.data() + plane),
                        reinterpret_cast<uint8_t*>(planes.data() + 2 * plane), nullptr};
    int lines[4] = {2 * w, 2 * w, 2 * w, 0};
    sws_scale(sws.get(), f->data, f->linesize, 0, h, data, lines);
    const uint16_t* g = planes.data();
    const uint16_t* b = g + plane;
    const uint16_t* r = b + plane;
    for (int y = 0; y < h; ++y) {
      auto* p = out.ptr<uint16_t>(y);
      const size_t row = static_cast<size_t>(y) * static_cast<size_t>(w);
      for (int x = 0; x < w; ++x) {
        p[3 * x] = r[row + x];
        p[3 * x + 1] = g[row + x];
        p[3 * x + 2] = b[row + x];
      }
    }
  }
  switch (info.rotation) {
    case 90: cv::rotate(out, *rgb, cv::ROTATE_90_CLOCKWISE); break;
    case 180: cv::rotate(out, *rgb, cv::ROTATE_180); break;
    case 270: cv::rotate(out, *rgb, cv::ROTATE_90_COUNTERCLOCKWISE); break;
    default: *rgb = std::move(out);
  }
  return Status::ok();
}

namespace {

// The last source scanned, by path, size and modification time: a long round trip writes its
// output in segments, each by a writer of its own that needs the source's timing, and a scan
// decodes the whole source (a 10-minute 1080p video: ~40 s of CPU), so without it the work grows
// with the square of the length. One entry: a job writes from one source.
struct ScannedSource {
  fs::path path;
  uintmax_t size = 0;
  fs::file_time_type modified;
  SourceTiming timing;
};
std::mutex g_scan_mutex;
std::optional<ScannedSource> g_last_scan;
std::atomic<int64_t> g_scans{0};

}  // namespace

int64_t source_scans() {
  return g_scans.load();
}

Result<SourceTiming> scan_source(const fs::path& path, const CancelToken* cancel) {
  std::error_code ec;
  ScannedSource key;
  key.path = fs::absolute(path, ec);
  if (!ec) key.size = fs::file_size(path, ec);
  if (!ec) key.modified = fs::last_write_time(path, ec);
  const bool keyed = !ec;
  if (keyed) {
    std::lock_guard lock(g_scan_mutex);
    if (g_last_scan && g_last_scan->path == key.path && g_last_scan->size == key.size &&
        g_last_scan->modified == key.modified) {
      return g_last_scan->timing;
    }
  }
  SEEDVAE_ASSIGN_OR_RETURN(auto dec, VideoDecoder::open(path, cancel));
  ++g_scans;
  SourceTiming t;
  t.info = dec->info();
  for (;;) {
    SEEDVAE_TRY(check_cancel(cancel));
    SEEDVAE_ASSIGN_OR_RETURN(bool more, dec->next(nullptr));
    if (!more) break;
    t.pts.push_back(dec->pts());
    t.end = dec->pts() + dec->duration();
  }
  if (t.pts.empty()) return corrupt_data(quoted(path) + " contains no decodable frames");
  if (keyed) {
    key.timing = t;
    std::lock_guard lock(g_scan_mutex);
    g_last_scan = std::move(key);
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Choosing the encoder

namespace {

std::string lower_ext(const fs::path& p) {
  std::string e = p.extension().string();
  for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e;
}

bool is_x26x_preset(const std::string& p) {
  for (const char* k : {"ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow",
                        "slower", "veryslow", "placebo"}) {
    if (p == k) return true;
  }
  return false;
}

}  // namespace

Result<CodecPlan> plan_codec(const fs::path& destination, const WriteOptions& o, int source_depth) {
  const std::string e = lower_ext(destination);
  CodecPlan p;
  if (e == ".mp4" || e == ".m4v") {
    p.container = "mp4";
    p.codec = "h264";
  } else if (e == ".mov") {
    p.container = "mov";
    p.codec = "prores";
  } else if (e == ".mkv") {
    p.container = "matroska";
    p.codec = "ffv1";
  } else if (e == ".avi") {
    p.container = "avi";
    p.codec = "mjpeg";
  } else {
    return invalid_argument("no video codec writes " + quoted(destination));
  }
  const std::string asked = o.codec == "auto" ? std::string() : o.codec;
  if (!asked.empty()) {
    if (asked != "h264" && asked != "h265" && asked != "ffv1" && asked != "prores" &&
        asked != "prores4444") {
      return invalid_argument("codec \"" + asked + "\" does not write a video file (" +
                              quoted(destination) +
                              "): use h264, h265, ffv1, prores or prores4444 (png and exr name "
                              "image sequences)");
    }
    const bool fits =
        (asked == "h264" || asked == "h265")
            ? (p.container == "mp4" || p.container == "mov" || p.container == "matroska")
        : asked == "ffv1" ? p.container == "matroska"
                          : (p.container == "mov" || p.container == "matroska");
    if (!fits) {
      const char* where = asked == "ffv1"                      ? ".mkv"
                          : asked == "h264" || asked == "h265" ? ".mp4, .mov or .mkv"
                                                               : ".mov or .mkv";
      return invalid_argument("codec " + asked + " cannot be written to " + e + " (" +
                              quoted(destination) + "); write it to " + where);
    }
    p.codec = asked;
  }
  const bool x26x = p.codec == "h264" || p.codec == "h265";
  // Lossless: FFV1 always is; H.264 and H.265 on request; ProRes and Motion-JPEG never.
  p.lossless = p.codec == "ffv1" || (x26x && o.lossless);
  if (o.lossless && !p.lossless) {
    return invalid_argument("--lossless: " + p.codec + " is lossy; use ffv1 (.mkv), or h264/h265 " +
                            "with --lossless");
  }
  // Bit depth: auto follows the source (more than 8 bits: 10, or 16 for FFV1 from a 12- or 16-bit
  // source); ProRes always codes 10-bit samples, Motion-JPEG 8-bit ones.
  const int d = o.bit_depth;
  if (d != 0 && d != 8 && d != 10 && d != 16) {
    return invalid_argument("bit depth must be 8, 10 or 16 (0: automatic), got " +
                            std::to_string(d));
  }
  if (p.codec == "prores" || p.codec == "prores4444") {
    if (d != 0 && d != 10) {
      return invalid_argument("ProRes codes 10-bit samples: --bit-depth " + std::to_string(d) +
                              " does not apply (leave it automatic or give 10)");
    }
    p.bit_depth = 10;
  } else if (p.codec == "mjpeg") {
    if (d != 0 && d != 8) {
      return invalid_argument("Motion-JPEG (.avi) stores 8-bit samples: --bit-depth " +
                              std::to_string(d) + " needs .mkv (ffv1), .mp4 or .mov");
    }
    p.bit_depth = 8;
  } else if (x26x) {
    if (d == 16) {
      return invalid_argument(p.codec + " stores 8 or 10 bits: --bit-depth 16 needs ffv1 (.mkv) " +
                              "or a 16-bit PNG sequence");
    }
    p.bit_depth = d != 0 ? d : source_depth > 8 ? 10 : 8;
  } else {  // ffv1
    p.bit_depth = d != 0 ? d : source_depth > 10 ? 16 : source_depth > 8 ? 10 : 8;
  }
  if (o.crf_like_quality < -1 || o.crf_like_quality > 51) {
    return invalid_argument("crf_like_quality must be -1 (default) or 0..51, got " +
                            std::to_string(o.crf_like_quality));
  }
  const std::string preset = o.preset == "auto" ? std::string() : o.preset;
  if (!preset.empty() && !is_x26x_preset(preset)) {
    return invalid_argument("preset \"" + preset +
                            "\" is not an x264/x265 preset (ultrafast, superfast, veryfast, "
                            "faster, fast, medium, slow, slower, veryslow, placebo)");
  }
  if (x26x) {
    p.crf = o.crf_like_quality >= 0 ? o.crf_like_quality : 16;
    p.preset = preset.empty() ? "medium" : preset;
  }
  p.encoder = p.codec == "h264"    ? (p.lossless && p.bit_depth == 8 ? "libx264rgb" : "libx264")
              : p.codec == "h265"  ? "libx265"
              : p.codec == "ffv1"  ? "ffv1"
              : p.codec == "mjpeg" ? "mjpeg"
                                   : "prores_ks";
  init_ffmpeg_once();
  if (avcodec_find_encoder_by_name(p.encoder.c_str()) == nullptr) {
    return unsupported("this FFmpeg has no " + p.encoder + " encoder, which " + p.codec +
                       " needs (" + quoted(destination) + ")");
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Encoding and muxing

struct VideoFileWriter::Impl {
  fs::path file, dest;
  const CancelToken* cancel = nullptr;
  CodecPlan plan;
  WriteOptions o;
  int width = 0, height = 0;
  OutputPtr out;
  CodecPtr enc;
  AVStream* vst = nullptr;
  FramePtr rgb;  // the quantised clip frame (planar GBR or packed RGB of the plan's depth)
  FramePtr yuv;  // what the encoder takes, when it is not `rgb`
  SwsPtr sws;
  PacketPtr pkt = PacketPtr(av_packet_alloc());
  AVRational tb{1, 24};
  std::unordered_map<int64_t, int64_t> durations;  // frame pts -> duration, for the packets
  int64_t frames = 0, packets = 0;
  // Timing copied from the source, or a constant rate.
  bool timed = false;
  SourceTiming timing;
  int64_t offset = 0;  // source pts of the first written frame (0 when that is frame 0)
  // Audio copied from the source.
  InputPtr audio_in;
  std::vector<int> audio_map;  // source stream -> output stream, -1 for none
  PacketPtr apkt = PacketPtr(av_packet_alloc());
  bool audio_pending = false, audio_done = true;
  int64_t offset_us = 0;
  std::vector<std::string> warnings;
  std::string description;
  WriterMode mode = WriterMode::kEncode;
  int64_t first_frame = 0;            // kSegment: the clip's frame index of the first frame written
  int64_t encoded = 0;                // frames sent to the encoder
  int64_t last_dts = AV_NOPTS_VALUE;  // kJoin: of the last packet copied (encoder time base)

  int64_t pts_of(int64_t i, int64_t* duration) const;
  Status send(AVFrame* f);
  Status drain();
  Status mux_packet(AVPacket* p);  // an encoded video packet, timestamps in enc->time_base
  Status pump_audio(int64_t until_us, int64_t end_us);
  Status setup_audio(const fs::path& source);
};

VideoFileWriter::VideoFileWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VideoFileWriter::~VideoFileWriter() = default;

const std::vector<std::string>& VideoFileWriter::warnings() const {
  return impl_->warnings;
}
std::string VideoFileWriter::description() const {
  return impl_->description;
}

namespace {

AVPixelFormat encoder_format(const CodecPlan& p, int w, int h) {
  const bool odd = (w % 2) != 0 || (h % 2) != 0;
  const bool ten = p.bit_depth == 10;
  if (p.codec == "ffv1") {
    return p.bit_depth == 8 ? AV_PIX_FMT_BGR0 : ten ? AV_PIX_FMT_GBRP10 : AV_PIX_FMT_GBRP16;
  }
  if (p.codec == "prores") return (w % 2) != 0 ? AV_PIX_FMT_YUV444P10 : AV_PIX_FMT_YUV422P10;
  if (p.codec == "prores4444") return AV_PIX_FMT_YUV444P10;
  if (p.codec == "mjpeg") return AV_PIX_FMT_YUVJ444P;
  if (p.lossless) {
    if (p.codec == "h264") return ten ? AV_PIX_FMT_YUV444P10 : AV_PIX_FMT_RGB24;
    return ten ? AV_PIX_FMT_GBRP10 : AV_PIX_FMT_GBRP;  // x265 codes RGB losslessly
  }
  if (odd) return ten ? AV_PIX_FMT_YUV444P10 : AV_PIX_FMT_YUV444P;
  return ten ? AV_PIX_FMT_YUV420P10 : AV_PIX_FMT_YUV420P;
}

// The planar/packed RGB format the clip is quantised into before (maybe) swscale.
AVPixelFormat rgb_format(AVPixelFormat enc, int depth) {
  if (enc == AV_PIX_FMT_BGR0 || enc == AV_PIX_FMT_RGB24 || enc == AV_PIX_FMT_GBRP ||
      enc == AV_PIX_FMT_GBRP10 || enc == AV_PIX_FMT_GBRP16) {
    return enc;
  }
  return depth == 8 ? AV_PIX_FMT_GBRP : AV_PIX_FMT_GBRP10;
}

const char* codec_title(const std::string& c) {
  if (c == "h264") return "H.264";
  if (c == "h265") return "H.265";
  if (c == "ffv1") return "FFV1";
  if (c == "prores") return "ProRes 422 HQ";
  if (c == "prores4444") return "ProRes 4444";
  return "Motion-JPEG";
}

}  // namespace

Status VideoFileWriter::Impl::setup_audio(const fs::path& source) {
  SEEDVAE_ASSIGN_OR_RETURN(audio_in, open_input(source, cancel));
  AVFormatContext* in = audio_in.get();
  audio_map.assign(in->nb_streams, -1);
  for (unsigned i = 0; i < in->nb_streams; ++i) {
    const AVStream* ist = in->streams[i];
    if (ist->codecpar->codec_type != AVMEDIA_TYPE_AUDIO) continue;
    const AVCodecID id = ist->codecpar->codec_id;
    if (avformat_query_codec(out->oformat, id, FF_COMPLIANCE_EXPERIMENTAL) != 1) {
      warnings.push_back(dest.string() + ": audio stream " + std::to_string(i) + " (" +
                         avcodec_get_name(id) + ") of " + source.string() +
                         " cannot be stored in " + lower_ext(dest) +
                         " and was left out; write .mkv to keep it");
      continue;
    }
    AVStream* ost = avformat_new_stream(out.get(), nullptr);
    if (ost == nullptr) return out_of_memory("writing " + quoted(dest) + ": no memory");
    int r = avcodec_parameters_copy(ost->codecpar, ist->codecpar);
    if (r < 0) return write_failure(r, dest, "copying the audio into");
    ost->codecpar->codec_tag = 0;
    ost->time_base = ist->time_base;
    ost->disposition = ist->disposition;
    av_dict_copy(&ost->metadata, ist->metadata, 0);
    audio_map[i] = ost->index;
  }
  audio_done = std::all_of(audio_map.begin(), audio_map.end(), [](int m) { return m < 0; });
  if (audio_done) audio_in.reset();
  return Status::ok();
}

Result<std::unique_ptr<VideoFileWriter>> VideoFileWriter::open(
    const fs::path& file, const fs::path& dest, const WriteOptions& o, int width, int height,
    const CancelToken* cancel, WriterMode mode, int64_t first_frame) {
  init_ffmpeg_once();
  auto impl = std::make_unique<Impl>();
  Impl& w = *impl;
  w.mode = mode;
  w.first_frame = mode == WriterMode::kSegment ? std::max<int64_t>(0, first_frame) : 0;
  w.frames = w.first_frame;
  w.file = file;
  w.dest = dest;
  w.cancel = cancel;
  w.o = o;
  w.width = width;
  w.height = height;
  if (!w.pkt || !w.apkt) return out_of_memory("writing " + quoted(dest) + ": no memory");
  // The source: its timing, colour description, bit depth and audio.
  std::error_code ec;
  const bool has_source = !o.source.empty() && fs::is_regular_file(o.source, ec);
  if (has_source) {
    SEEDVAE_ASSIGN_OR_RETURN(w.timing, scan_source(o.source, cancel));
    w.timed = true;
  }
  SEEDVAE_ASSIGN_OR_RETURN(w.plan, plan_codec(dest, o, w.timed ? w.timing.info.bit_depth : 0));
  const CodecPlan& p = w.plan;
  if (p.codec == "h265" && (width < 16 || height < 16)) {
    return invalid_argument("H.265 (libx265) codes frames of at least 16x16; " + quoted(dest) +
                            " would have " + std::to_string(width) + "x" + std::to_string(height) +
                            " (write h264 or ffv1 instead)");
  }
  const AVPixelFormat fmt = encoder_format(p, width, height);

  const bool segment = mode == WriterMode::kSegment;
  const std::string container = !segment                                         ? p.container
                                : p.codec == "prores" || p.codec == "prores4444" ? "mov"
                                                                                 : "nut";
  AVFormatContext* oc = nullptr;
  int r = avformat_alloc_output_context2(&oc, nullptr, container.c_str(), file.string().c_str());
  if (r < 0 || oc == nullptr) return write_failure(r, dest, "starting");
  w.out.reset(oc);
  if (mode != WriterMode::kEncode) oc->flags |= AVFMT_FLAG_BITEXACT;
  // FLAC and Opus audio in MP4 are standard, but FFmpeg 5.1's muxer still calls them
  // experimental.
  oc->strict_std_compliance = FF_COMPLIANCE_EXPERIMENTAL;

  // Timing: the source's time base and timestamps, or 1 / fps.
  const int stride = std::max(1, o.source_stride);
  AVRational rate = av_d2q(o.fps, 1 << 20);
  if (w.timed) {
    w.tb = AVRational{w.timing.info.tb_num, w.timing.info.tb_den};
    const int64_t first = std::max<int64_t>(0, o.source_first_frame);
    if (first > 0 && first < static_cast<int64_t>(w.timing.pts.size())) {
      w.offset = w.timing.pts[static_cast<size_t>(first)];
    }
    w.offset_us = av_rescale_q(w.offset, w.tb, AV_TIME_BASE_Q);
    if (w.timing.info.fps > 0) rate = av_div_q(av_d2q(w.timing.info.fps, 1 << 20), {stride, 1});
  } else {
    w.tb = av_inv_q(rate);
  }

  const AVCodec* codec = avcodec_find_encoder_by_name(p.encoder.c_str());
  w.enc.reset(avcodec_alloc_context3(codec));
  if (!w.enc) return out_of_memory("writing " + quoted(dest) + ": no memory");
  AVCodecContext* c = w.enc.get();
  c->width = width;
  c->height = height;
  c->pix_fmt = fmt;
  c->time_base = w.tb;
  c->framerate = rate;
  c->sample_aspect_ratio = AVRational{1, 1};
  c->thread_count = 0;
  // Colour: the source's primaries and transfer; the source's matrix and range for YUV (BT.709
  // and limited range without a source); RGB codings are full range. Motion-JPEG is JFIF: BT.601
  // full range.
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(fmt);
  const bool rgb_coded = (desc->flags & AV_PIX_FMT_FLAG_RGB) != 0;
  // Without a source: BT.709 from 720 lines up, BT.601 (SMPTE 170M) below -- the rule the reader
  // applies to files that state nothing, so a player that drops the tags still agrees.
  const StreamInfo* si = w.timed ? &w.timing.info : nullptr;
  const bool hd = height >= 720;
  c->color_primaries = si   ? static_cast<AVColorPrimaries>(si->color_primaries)
                       : hd ? AVCOL_PRI_BT709
                            : AVCOL_PRI_SMPTE170M;
  c->color_trc = si   ? static_cast<AVColorTransferCharacteristic>(si->color_trc)
                 : hd ? AVCOL_TRC_BT709
                      : AVCOL_TRC_SMPTE170M;
  if (rgb_coded) {
    c->colorspace = AVCOL_SPC_RGB;
    c->color_range = AVCOL_RANGE_JPEG;
  } else if (p.codec == "mjpeg") {
    c->colorspace = AVCOL_SPC_BT470BG;
    c->color_range = AVCOL_RANGE_JPEG;
  } else {
    c->colorspace = si && !si->rgb ? static_cast<AVColorSpace>(si->color_space)
                                   : stated_matrix(AVCOL_SPC_UNSPECIFIED, height);
    c->color_range =
        si && si->color_range == AVCOL_RANGE_JPEG ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
  }
  // A segment's encoder codes its headers as the destination's container wants them, so that
  // its packets can be copied there.
  const AVOutputFormat* final_format =
      segment ? av_guess_format(p.container.c_str(), nullptr, nullptr) : oc->oformat;
  if (final_format != nullptr && (final_format->flags & AVFMT_GLOBALHEADER) != 0) {
    c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  }
  AVDictionary* raw_opts = nullptr;
  std::string desc_text = std::string(codec_title(p.codec)) + " " + av_get_pix_fmt_name(fmt);
  if (p.codec == "h264" || p.codec == "h265") {
    av_dict_set(&raw_opts, "preset", p.preset.c_str(), 0);
    // x264 with its threaded lookahead and macroblock tree does not code the same frames to the
    // same bits from run to run (measured: one-pass H.264 files of the same frames differed). A
    // segment's encoder goes without both, so that a resumed job codes its segments exactly as
    // an uninterrupted one, at the cost of a few percent of bitrate at the same CRF.
    if (segment && p.codec == "h264") {
      av_dict_set(&raw_opts, "x264-params", "sync-lookahead=0:mbtree=0", 0);
    }
    if (p.codec == "h264") {
      if (p.lossless) {
        av_dict_set(&raw_opts, "qp", "0", 0);
      } else {
        av_dict_set(&raw_opts, "crf", std::to_string(p.crf).c_str(), 0);
      }
    } else {
      const std::string params = std::string("log-level=error") + (p.lossless ? ":lossless=1" : "");
      av_dict_set(&raw_opts, "x265-params", params.c_str(), 0);
      if (!p.lossless) av_dict_set(&raw_opts, "crf", std::to_string(p.crf).c_str(), 0);
    }
    desc_text += p.lossless ? ", lossless" : ", CRF " + std::to_string(p.crf);
    desc_text += ", preset " + p.preset;
  } else if (p.codec == "ffv1") {
    av_dict_set(&raw_opts, "level", "3", 0);  // slices (threads) and per-slice CRCs
    av_dict_set(&raw_opts, "slicecrc", "1", 0);
    desc_text += ", lossless";
  } else if (p.codec == "prores" || p.codec == "prores4444") {
    av_dict_set(&raw_opts, "profile", p.codec == "prores" ? "hq" : "4444", 0);
  } else {  // mjpeg: quantiser 1 (best) .. 31, from the 0..51 quality scale
    const int q = o.crf_like_quality >= 0
                      ? 1 + static_cast<int>(std::lround(o.crf_like_quality * 30.0 / 51.0))
                      : 2;
    c->flags |= AV_CODEC_FLAG_QSCALE;
    c->global_quality = FF_QP2LAMBDA * q;
    c->qmin = c->qmax = q;
    desc_text += ", q " + std::to_string(q);
  }
  std::unique_ptr<AVDictionary, DictCloser> opts(raw_opts);
  raw_opts = opts.release();
  r = avcodec_open2(c, codec, &raw_opts);
  opts.reset(raw_opts);
  if (r < 0) {
    if (r == AVERROR(ENOMEM)) return out_of_memory("writing " + quoted(dest) + ": out of memory");
    return unsupported("cannot open the " + p.encoder + " encoder for " + quoted(dest) + " (" +
                       std::to_string(width) + "x" + std::to_string(height) + ", " +
                       av_get_pix_fmt_name(fmt) + "): " + av_text(r));
  }
  w.description = desc_text;
  w.vst = avformat_new_stream(oc, nullptr);
  if (w.vst == nullptr) return out_of_memory("writing " + quoted(dest) + ": no memory");
  r = avcodec_parameters_from_context(w.vst->codecpar, c);
  if (r < 0) return write_failure(r, dest, "writing");
  w.vst->time_base = c->time_base;
  w.vst->avg_frame_rate = rate;
  if (p.codec == "h265" && (p.container == "mp4" || p.container == "mov")) {
    w.vst->codecpar->codec_tag = MKTAG('h', 'v', 'c', '1');  // what Apple's players expect
  }
  if (has_source && !segment) SEEDVAE_TRY(w.setup_audio(o.source));

  r = avio_open2(&oc->pb, file.string().c_str(), AVIO_FLAG_WRITE, nullptr, nullptr);
  if (r < 0) return write_failure(r, dest, "creating");
  AVDictionary* mux_raw = nullptr;
  if (container == "mp4" || (container == "mov" && !segment)) {
    // The index first (plays while loading); a 'colr' atom, which FFmpeg 5.1 writes only on
    // request, so codecs without colour fields of their own (ProRes) keep the description.
    av_dict_set(&mux_raw, "movflags", "+faststart+write_colr", 0);
  }
  std::unique_ptr<AVDictionary, DictCloser> mux_opts(mux_raw);
  mux_raw = mux_opts.release();
  r = avformat_write_header(oc, &mux_raw);
  mux_opts.reset(mux_raw);
  if (r < 0) return write_failure(r, dest, "writing the header of");

  // Frames to fill: the clip's RGB samples, and the encoder's own when swscale converts.
  const AVPixelFormat rgbf = rgb_format(fmt, p.bit_depth);
  auto make_frame = [&](AVPixelFormat f) -> Result<FramePtr> {
    FramePtr fr(av_frame_alloc());
    if (!fr) return out_of_memory("writing " + quoted(dest) + ": no memory");
    fr->format = f;
    fr->width = width;
    fr->height = height;
    const int e = av_frame_get_buffer(fr.get(), 0);
    if (e < 0) return write_failure(e, dest, "allocating frames for");
    // Zeroed, the row padding included: what an encoder may read beyond the picture is then the
    // same in every run (a resumed job's segments must be coded exactly as before).
    for (int i = 0; i < AV_NUM_DATA_POINTERS && fr->buf[i] != nullptr; ++i) {
      std::memset(fr->buf[i]->data, 0, fr->buf[i]->size);
    }
    return fr;
  };
  SEEDVAE_ASSIGN_OR_RETURN(w.rgb, make_frame(rgbf));
  if (rgbf != fmt) {
    SEEDVAE_ASSIGN_OR_RETURN(w.yuv, make_frame(fmt));
    AVPixelFormat target = fmt;
    if (fmt == AV_PIX_FMT_YUVJ444P) target = AV_PIX_FMT_YUV444P;  // same layout, range set below
    w.sws.reset(
        sws_getContext(width, height, rgbf, width, height, target,
                       SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT | SWS_FULL_CHR_H_INP,
                       nullptr, nullptr, nullptr));
    if (!w.sws) return unsupported("cannot convert RGB to " + desc_text + " for " + quoted(dest));
    sws_setColorspaceDetails(w.sws.get(), sws_getCoefficients(SWS_CS_DEFAULT), 1,
                             sws_getCoefficients(sws_matrix(c->colorspace, height)),
                             c->color_range == AVCOL_RANGE_JPEG ? 1 : 0, 0, 1 << 16, 1 << 16);
  }
  return std::unique_ptr<VideoFileWriter>(new VideoFileWriter(std::move(impl)));
}

// Written frame i: the source frame first + i * stride at its own time (shifted by the first
// written frame's), or i / fps.
int64_t VideoFileWriter::Impl::pts_of(int64_t i, int64_t* duration) const {
  if (!timed) {
    *duration = 1;
    return i;
  }
  const int stride = std::max(1, o.source_stride);
  const int64_t first = std::max<int64_t>(0, o.source_first_frame);
  const auto n = static_cast<int64_t>(timing.pts.size());
  const int64_t idx = first + i * stride;
  const int64_t last_dur = std::max<int64_t>(1, timing.end - timing.pts.back());
  auto source_pts = [&](int64_t k) {
    return k < n ? timing.pts[static_cast<size_t>(k)]
                 : timing.end + (k - n) * last_dur;  // past the source: its last frame's pace
  };
  const int64_t pts = source_pts(idx);
  *duration = std::max<int64_t>(1, source_pts(idx + stride) - pts);
  return pts - offset;
}

Status VideoFileWriter::Impl::drain() {
  for (;;) {
    int r = avcodec_receive_packet(enc.get(), pkt.get());
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return Status::ok();
    if (r < 0) return write_failure(r, dest, "encoding");
    SEEDVAE_TRY(mux_packet(pkt.get()));
  }
}

Status VideoFileWriter::Impl::mux_packet(AVPacket* p) {
  if (p->duration <= 0) {
    if (auto it = durations.find(p->pts); it != durations.end()) p->duration = it->second;
  }
  durations.erase(p->pts);
  const int64_t at_us =
      av_rescale_q(p->dts != AV_NOPTS_VALUE ? p->dts : p->pts, enc->time_base, AV_TIME_BASE_Q);
  av_packet_rescale_ts(p, enc->time_base, vst->time_base);
  p->stream_index = vst->index;
  p->pos = -1;
  const int r = av_interleaved_write_frame(out.get(), p);
  if (r < 0) return write_failure(r, dest, "writing");
  ++packets;
  // The source's audio up to this point in time, so the muxer interleaves the two.
  return pump_audio(at_us + offset_us, std::numeric_limits<int64_t>::max());
}

Result<int64_t> VideoFileWriter::append_segment(const fs::path& segment) {
  Impl& w = *impl_;
  if (w.mode != WriterMode::kJoin) return internal_error("append_segment on a writer not joining");
  PacketPtr pkt(av_packet_alloc());
  if (!pkt) return out_of_memory("writing " + quoted(w.dest) + ": no memory");
  // Two passes: the packets' timestamps first. Every packet then gets its frame's duration (by
  // timestamp, as in a single encode) and a decoding time made here, since the segment's
  // container need not keep them: the k-th smallest presentation time, `delay` packets late (the
  // encoder's reordering), before the first ones continued back at the first frame's pace, and
  // increasing across segments.
  std::vector<int64_t> pts;
  for (int pass = 0; pass < 2; ++pass) {
    SEEDVAE_ASSIGN_OR_RETURN(InputPtr in, open_input(segment, w.cancel));
    const int vs = av_find_best_stream(in.get(), AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (vs < 0) return corrupt_data("the segment " + quoted(segment) + " holds no video");
    const AVRational stb = in->streams[vs]->time_base;
    std::vector<int64_t> sorted;
    int64_t delay = 0, first_duration = 1, shift = 0;
    if (pass == 1) {
      const auto count = static_cast<int64_t>(pts.size());
      int64_t first_pts = 0;
      for (int64_t i = 0; i < count; ++i) {
        int64_t duration = 1;
        const int64_t p = w.pts_of(w.frames + i, &duration);
        w.durations[p] = duration;
        if (i == 0) {
          first_duration = duration;
          first_pts = p;
        }
      }
      // A muxer may have moved the segment's times to keep its decoding times non-negative: its
      // first frame is this clip frame's.
      sorted = pts;
      std::sort(sorted.begin(), sorted.end());
      if (!sorted.empty()) shift = sorted.front() - first_pts;
      for (int64_t& v : sorted) v -= shift;
      for (int64_t& v : pts) v -= shift;
      for (int64_t i = 0; i < count; ++i) {
        const auto rank = static_cast<int64_t>(
            std::lower_bound(sorted.begin(), sorted.end(), pts[static_cast<size_t>(i)]) -
            sorted.begin());
        delay = std::max(delay, i - rank);
      }
      delay = std::max<int64_t>(delay, w.enc->has_b_frames);
    }
    int64_t i = 0;
    for (;;) {
      SEEDVAE_TRY(check_cancel(w.cancel));
      const int r = av_read_frame(in.get(), pkt.get());
      if (r == AVERROR_EOF) break;
      if (r < 0) return read_failure(r, segment, "reading", w.cancel);
      if (pkt->stream_index == vs) {
        if (pkt->pts == AV_NOPTS_VALUE) {
          return corrupt_data("the segment " + quoted(segment) + " has a packet without time");
        }
        const int64_t p = av_rescale_q(pkt->pts, stb, w.enc->time_base) - shift;
        if (pass == 0) {
          pts.push_back(p);
        } else {
          if (i >= static_cast<int64_t>(pts.size())) {
            return corrupt_data("the segment " + quoted(segment) + " changed while it was read");
          }
          int64_t dts = i >= delay ? sorted[static_cast<size_t>(i - delay)]
                                   : sorted.front() - (delay - i) * first_duration;
          if (w.last_dts != AV_NOPTS_VALUE && dts <= w.last_dts) dts = w.last_dts + 1;
          w.last_dts = dts;
          pkt->pts = p;
          pkt->dts = std::min(dts, p);
          pkt->duration = 0;  // from the durations, by timestamp
          SEEDVAE_TRY(w.mux_packet(pkt.get()));
        }
        ++i;
      }
      av_packet_unref(pkt.get());
    }
  }
  const auto count = static_cast<int64_t>(pts.size());
  w.frames += count;
  return count;
}

Status VideoFileWriter::Impl::send(AVFrame* f) {
  int r = avcodec_send_frame(enc.get(), f);
  if (r < 0) return write_failure(r, dest, "encoding");
  return drain();
}

// Copies the source's audio packets that start before `until_us` (source time) and end after
// the first written frame; those starting at or after `end_us` are dropped.
Status VideoFileWriter::Impl::pump_audio(int64_t until_us, int64_t end_us) {
  while (!audio_done) {
    AVFormatContext* in = audio_in.get();
    if (!audio_pending) {
      const int r = av_read_frame(in, apkt.get());
      if (r < 0) {  // the end, or damage past which the source's audio is not copied
        if (r != AVERROR_EOF && !(r == AVERROR_EXIT && cancel && cancel->requested())) {
          warnings.push_back(dest.string() + ": the source's audio could be copied only up to " +
                             "a damaged part (" + av_text(r) + ")");
        }
        audio_done = true;
        break;
      }
      if (apkt->stream_index < 0 || apkt->stream_index >= static_cast<int>(audio_map.size()) ||
          audio_map[static_cast<size_t>(apkt->stream_index)] < 0) {
        av_packet_unref(apkt.get());
        continue;
      }
      audio_pending = true;
    }
    const AVStream* ist = in->streams[apkt->stream_index];
    const int64_t ts = apkt->pts != AV_NOPTS_VALUE ? apkt->pts : apkt->dts;
    if (ts == AV_NOPTS_VALUE) {  // no time: cannot be placed
      av_packet_unref(apkt.get());
      audio_pending = false;
      continue;
    }
    const int64_t t_us = av_rescale_q(ts, ist->time_base, AV_TIME_BASE_Q);
    if (t_us > until_us) break;  // kept for later
    audio_pending = false;
    const int64_t d_us = av_rescale_q(apkt->duration, ist->time_base, AV_TIME_BASE_Q);
    // Trimmed at the start only when the first written frame is not the source's first (the
    // packets before frame 0, such as AAC's priming, belong to the copy).
    if ((offset_us > 0 && t_us + d_us <= offset_us) || t_us >= end_us) {
      av_packet_unref(apkt.get());
      continue;
    }
    AVStream* ost = out->streams[audio_map[static_cast<size_t>(apkt->stream_index)]];
    const int64_t shift = av_rescale_q(offset_us, AV_TIME_BASE_Q, ist->time_base);
    if (apkt->pts != AV_NOPTS_VALUE) apkt->pts -= shift;
    if (apkt->dts != AV_NOPTS_VALUE) apkt->dts -= shift;
    av_packet_rescale_ts(apkt.get(), ist->time_base, ost->time_base);
    apkt->stream_index = ost->index;
    apkt->pos = -1;
    const int r = av_interleaved_write_frame(out.get(), apkt.get());
    if (r < 0) return write_failure(r, dest, "writing the audio of");
  }
  return Status::ok();
}

namespace {

// Frames of at least this many pixels are quantised on several threads.
constexpr int64_t kParallelSamples = 64 * 1024;

inline int quantise(float v, int maxv) {
  if (!(v >= -1.0f)) v = -1.0f;  // NaN and below
  if (v > 1.0f) v = 1.0f;
  // std::lround of the non-negative float, without the library call: the float plus 0.5 is
  // exact in double, so truncating it rounds half away from zero as lround does
  return static_cast<int>(static_cast<double>((v + 1.0f) * 0.5f * static_cast<float>(maxv)) + 0.5);
}

}  // namespace

Status VideoFileWriter::write(const float* video, int64_t T, int64_t t) {
  Impl& w = *impl_;
  const int64_t H = w.height, W = w.width;
  const int64_t plane = H * W, cstride = T * plane;
  const float* r = video + t * plane;
  const float* g = r + cstride;
  const float* b = g + cstride;
  AVFrame* f = w.rgb.get();
  int e = av_frame_make_writable(f);
  if (e < 0) return write_failure(e, w.dest, "writing");
  const auto fmt = static_cast<AVPixelFormat>(f->format);
  // The rows are quantised on every core (a 1080p frame is ~6 M samples).
  if (fmt == AV_PIX_FMT_BGR0 || fmt == AV_PIX_FMT_RGB24) {
    const bool bgr0 = fmt == AV_PIX_FMT_BGR0;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (plane >= kParallelSamples)
#endif
    for (int64_t y = 0; y < H; ++y) {
      uint8_t* p = f->data[0] + y * f->linesize[0];
      for (int64_t x = 0; x < W; ++x) {
        const int64_t i = y * W + x;
        const auto R = static_cast<uint8_t>(quantise(r[i], 255));
        const auto G = static_cast<uint8_t>(quantise(g[i], 255));
        const auto B = static_cast<uint8_t>(quantise(b[i], 255));
        if (bgr0) {
          p[4 * x] = B;
          p[4 * x + 1] = G;
          p[4 * x + 2] = R;
          p[4 * x + 3] = 0;
        } else {
          p[3 * x] = R;
          p[3 * x + 1] = G;
          p[3 * x + 2] = B;
        }
      }
    }
  } else {  // planar G, B, R
    const float* src[3] = {g, b, r};
    const int depth = av_pix_fmt_desc_get(fmt)->comp[0].depth;
    const int maxv = (1 << depth) - 1;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (plane >= kParallelSamples)
#endif
    for (int64_t ky = 0; ky < 3 * H; ++ky) {
      const int64_t k = ky / H, y = ky % H;
      const float* s = src[k] + y * W;
      if (depth == 8) {
        uint8_t* p = f->data[k] + y * f->linesize[k];
        for (int64_t x = 0; x < W; ++x) p[x] = static_cast<uint8_t>(quantise(s[x], maxv));
      } else {
        auto* p = reinterpret_cast<uint16_t*>(f->data[k] + y * f->linesize[k]);
        for (int64_t x = 0; x < W; ++x) p[x] = static_cast<uint16_t>(quantise(s[x], maxv));
      }
    }
  }
  AVFrame* send = f;
  if (w.yuv) {
    e = av_frame_make_writable(w.yuv.get());
    if (e < 0) return write_failure(e, w.dest, "writing");
    sws_scale(w.sws.get(), f->data, f->linesize, 0, w.height, w.yuv->data, w.yuv->linesize);
    send = w.yuv.get();
  }
  // The colour description travels with each frame too: ProRes writes it from the frame.
  send->color_primaries = w.enc->color_primaries;
  send->color_trc = w.enc->color_trc;
  send->colorspace = w.enc->colorspace;
  send->color_range = w.enc->color_range;
  int64_t duration = 1;
  send->pts = w.pts_of(w.frames, &duration);
  send->pkt_duration = duration;
  w.durations[send->pts] = duration;
  SEEDVAE_TRY(w.send(send));
  ++w.frames;
  ++w.encoded;
  return Status::ok();
}

Status VideoFileWriter::finish() {
  Impl& w = *impl_;
  if (w.mode != WriterMode::kJoin) SEEDVAE_TRY(w.send(nullptr));
  // The rest of the audio: all of it when the written frames reach the source's end, else up to
  // the end of the last written frame.
  int64_t end_us = std::numeric_limits<int64_t>::max();
  if (w.timed && w.mode != WriterMode::kSegment) {
    const int stride = std::max(1, w.o.source_stride);
    const int64_t next = std::max<int64_t>(0, w.o.source_first_frame) + w.frames * stride;
    if (next < static_cast<int64_t>(w.timing.pts.size())) {
      end_us = av_rescale_q(w.timing.pts[static_cast<size_t>(next)], w.tb, AV_TIME_BASE_Q);
    }
  }
  SEEDVAE_TRY(w.pump_audio(std::numeric_limits<int64_t>::max(), end_us));
  int r = av_write_trailer(w.out.get());
  if (r < 0) return write_failure(r, w.dest, "finishing");
  r = avio_closep(&w.out->pb);
  if (r < 0) return write_failure(r, w.dest, "writing");
#if defined(__unix__) || defined(__APPLE__)
  // On the device before the rename: a file system that reports a full disk only when flushing
  // (network file systems) fails here rather than after the destination was replaced.
  const int fd = ::open(w.file.c_str(), O_RDONLY);
  if (fd >= 0) {
    const int sr = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (sr != 0 && err != EINVAL && err != EROFS) {
      return write_failure(AVERROR(err), w.dest, "writing");
    }
  }
#endif
  // Read back: every video packet must be there.
  auto in = open_input(w.file, w.cancel);
  if (!in.is_ok()) {
    // A cancel that lands here (SIGTERM as the file closes) is the user's, not a failed write.
    if (in.status().code() == StatusCode::kCancelled) return in.status();
    return io_error("the video " + quoted(w.dest) + " was not written completely (" +
                    in.status().message() + ")");
  }
  int64_t n = 0;
  PacketPtr pkt(av_packet_alloc());
  const int vs = av_find_best_stream(in->get(), AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  while (vs >= 0 && av_read_frame(in->get(), pkt.get()) >= 0) {
    if (pkt->stream_index == vs) ++n;
    av_packet_unref(pkt.get());
  }
  if (n != w.packets || n < w.frames - w.first_frame) {
    return io_error("the video " + quoted(w.dest) + " was not written completely (" +
                    std::to_string(n) + " of " + std::to_string(w.packets) + " packets readable)");
  }
  return Status::ok();
}

}  // namespace seedvae::media::detail
