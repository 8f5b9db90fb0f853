#include "tests/media/av_test_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
}

namespace seedvae::test {

namespace {

std::string err(int e, const std::string& what) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(e, buf, sizeof buf);
  return what + ": " + buf;
}

struct Output {
  AVFormatContext* oc = nullptr;
  ~Output() {
    if (oc != nullptr) {
      if (oc->pb != nullptr) avio_closep(&oc->pb);
      avformat_free_context(oc);
    }
  }
};
struct Codec {
  AVCodecContext* c = nullptr;
  ~Codec() { avcodec_free_context(&c); }
};
struct Frame {
  AVFrame* f = av_frame_alloc();
  ~Frame() { av_frame_free(&f); }
};
struct Packet {
  AVPacket* p = av_packet_alloc();
  ~Packet() { av_packet_free(&p); }
};

std::string drain(AVCodecContext* c, AVFormatContext* oc, AVStream* st) {
  Packet pkt;
  for (;;) {
    const int r = avcodec_receive_packet(c, pkt.p);
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return {};
    if (r < 0) return err(r, "encoding");
    av_packet_rescale_ts(pkt.p, c->time_base, st->time_base);
    pkt.p->stream_index = st->index;
    const int w = av_interleaved_write_frame(oc, pkt.p);
    if (w < 0) return err(w, "writing");
  }
}

}  // namespace

std::string make_test_video(const std::filesystem::path& path, const TestVideoSpec& s) {
  av_log_set_level(AV_LOG_QUIET);
  Output out;
  int r = avformat_alloc_output_context2(&out.oc, nullptr, nullptr, path.string().c_str());
  if (r < 0) return err(r, "output");
  out.oc->strict_std_compliance = FF_COMPLIANCE_EXPERIMENTAL;
  // Video
  const AVCodec* vcodec = avcodec_find_encoder_by_name(s.encoder.c_str());
  if (vcodec == nullptr) return "no encoder " + s.encoder;
  Codec v;
  v.c = avcodec_alloc_context3(vcodec);
  v.c->width = s.width;
  v.c->height = s.height;
  v.c->pix_fmt = av_get_pix_fmt(s.pix_fmt.c_str());
  v.c->time_base = AVRational{s.tb_num, s.tb_den};
  v.c->colorspace = static_cast<AVColorSpace>(s.color_space);
  v.c->color_range = static_cast<AVColorRange>(s.color_range);
  v.c->color_primaries = static_cast<AVColorPrimaries>(s.color_primaries);
  v.c->color_trc = static_cast<AVColorTransferCharacteristic>(s.color_trc);
  if ((out.oc->oformat->flags & AVFMT_GLOBALHEADER) != 0) v.c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  AVDictionary* opts = nullptr;
  if (!s.options.empty()) av_dict_parse_string(&opts, s.options.c_str(), "=", ":", 0);
  r = avcodec_open2(v.c, vcodec, &opts);
  av_dict_free(&opts);
  if (r < 0) return err(r, "opening " + s.encoder);
  AVStream* vst = avformat_new_stream(out.oc, nullptr);
  avcodec_parameters_from_context(vst->codecpar, v.c);
  vst->time_base = v.c->time_base;
  if (s.rotation != 0) {
    auto* m = reinterpret_cast<int32_t*>(
        av_stream_new_side_data(vst, AV_PKT_DATA_DISPLAYMATRIX, 9 * sizeof(int32_t)));
    // FFmpeg 5.1's MP4 muxer stores this matrix so that the file's track matrix is a camera's
    // (0 1 / -1 0 for a portrait recording turned 90 degrees clockwise on display), which its
    // demuxer reports as a rotation of -s.rotation degrees.
    av_display_rotation_set(m, static_cast<double>(s.rotation));
  }
  // Audio
  Codec a;
  AVStream* ast = nullptr;
  if (!s.audio_encoder.empty()) {
    const AVCodec* acodec = avcodec_find_encoder_by_name(s.audio_encoder.c_str());
    if (acodec == nullptr) return "no encoder " + s.audio_encoder;
    a.c = avcodec_alloc_context3(acodec);
    a.c->sample_fmt = acodec->sample_fmts != nullptr ? acodec->sample_fmts[0] : AV_SAMPLE_FMT_S16;
    a.c->sample_rate = s.sample_rate;
    av_channel_layout_default(&a.c->ch_layout, 1);
    a.c->time_base = AVRational{1, s.sample_rate};
    if ((out.oc->oformat->flags & AVFMT_GLOBALHEADER) != 0) {
      a.c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    }
    r = avcodec_open2(a.c, acodec, nullptr);
    if (r < 0) return err(r, "opening " + s.audio_encoder);
    ast = avformat_new_stream(out.oc, nullptr);
    avcodec_parameters_from_context(ast->codecpar, a.c);
    ast->time_base = a.c->time_base;
  }
  r = avio_open(&out.oc->pb, path.string().c_str(), AVIO_FLAG_WRITE);
  if (r < 0) return err(r, "creating");
  r = avformat_write_header(out.oc, nullptr);
  if (r < 0) return err(r, "header");

  Frame f;
  f.f->format = v.c->pix_fmt;
  f.f->width = s.width;
  f.f->height = s.height;
  av_frame_get_buffer(f.f, 0);
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(v.c->pix_fmt);
  const bool wide = desc->comp[0].depth > 8;
  for (int t = 0; t < s.frames; ++t) {
    av_frame_make_writable(f.f);
    for (int p = 0; p < desc->nb_components && p < 3; ++p) {
      const int pw = p == 0 ? s.width : AV_CEIL_RSHIFT(s.width, desc->log2_chroma_w);
      const int ph = p == 0 ? s.height : AV_CEIL_RSHIFT(s.height, desc->log2_chroma_h);
      for (int y = 0; y < ph; ++y) {
        for (int x = 0; x < pw; ++x) {
          const int value = s.sample ? s.sample(t, p, x, y) : (1 << (desc->comp[0].depth - 1));
          if (wide) {
            reinterpret_cast<uint16_t*>(f.f->data[p] + y * f.f->linesize[p])[x] =
                static_cast<uint16_t>(value);
          } else {
            f.f->data[p][y * f.f->linesize[p] + x] = static_cast<uint8_t>(value);
          }
        }
      }
    }
    f.f->pts = s.pts.empty() ? t : s.pts[static_cast<size_t>(t)];
    r = avcodec_send_frame(v.c, f.f);
    if (r < 0) return err(r, "encoding");
    if (std::string e = drain(v.c, out.oc, vst); !e.empty()) return e;
  }
  avcodec_send_frame(v.c, nullptr);
  if (std::string e = drain(v.c, out.oc, vst); !e.empty()) return e;

  if (a.c != nullptr) {  // a 440 Hz sine
    const int total = static_cast<int>(std::lround(s.audio_seconds * s.sample_rate));
    const int chunk = a.c->frame_size > 0 ? a.c->frame_size : 1024;
    Frame af;
    for (int done = 0; done < total; done += chunk) {
      const int n = std::min(chunk, total - done);
      av_frame_unref(af.f);
      af.f->format = a.c->sample_fmt;
      af.f->sample_rate = s.sample_rate;
      av_channel_layout_copy(&af.f->ch_layout, &a.c->ch_layout);
      af.f->nb_samples = n;
      av_frame_get_buffer(af.f, 0);
      for (int i = 0; i < n; ++i) {
        const double v01 = 0.5 * std::sin(2 * M_PI * 440.0 * (done + i) / s.sample_rate);
        switch (a.c->sample_fmt) {
          case AV_SAMPLE_FMT_FLTP:
          case AV_SAMPLE_FMT_FLT:
            reinterpret_cast<float*>(af.f->data[0])[i] = static_cast<float>(v01);
            break;
          case AV_SAMPLE_FMT_S32:
          case AV_SAMPLE_FMT_S32P:
            reinterpret_cast<int32_t*>(af.f->data[0])[i] = static_cast<int32_t>(v01 * 2e9);
            break;
          default: reinterpret_cast<int16_t*>(af.f->data[0])[i] = static_cast<int16_t>(v01 * 32767);
        }
      }
      af.f->pts = done;
      r = avcodec_send_frame(a.c, af.f);
      if (r < 0) return err(r, "encoding audio");
      if (std::string e = drain(a.c, out.oc, ast); !e.empty()) return e;
    }
    avcodec_send_frame(a.c, nullptr);
    if (std::string e = drain(a.c, out.oc, ast); !e.empty()) return e;
  }
  r = av_write_trailer(out.oc);
  if (r < 0) return err(r, "trailer");
  return {};
}

AvFileInfo av_file_info(const std::filesystem::path& path) {
  AvFileInfo info;
  AVFormatContext* ic = nullptr;
  int r = avformat_open_input(&ic, path.string().c_str(), nullptr, nullptr);
  if (r < 0) {
    info.error = err(r, "open");
    return info;
  }
  std::unique_ptr<AVFormatContext, void (*)(AVFormatContext*)> guard(
      ic, [](AVFormatContext* p) { avformat_close_input(&p); });
  avformat_find_stream_info(ic, nullptr);
  const int vs = av_find_best_stream(ic, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  int as = -1;
  for (unsigned i = 0; i < ic->nb_streams; ++i) {
    if (ic->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) {
      ++info.audio_streams;
      if (as < 0) as = static_cast<int>(i);
    }
  }
  if (vs >= 0) {
    const AVCodecParameters* p = ic->streams[vs]->codecpar;
    info.video_codec = avcodec_get_name(p->codec_id);
    const char* pf = av_get_pix_fmt_name(static_cast<AVPixelFormat>(p->format));
    info.pix_fmt = pf != nullptr ? pf : "";
    info.width = p->width;
    info.height = p->height;
    info.color_space = p->color_space;
    info.color_range = p->color_range;
    info.color_primaries = p->color_primaries;
    info.color_trc = p->color_trc;
  }
  if (as >= 0) info.audio_codec = avcodec_get_name(ic->streams[as]->codecpar->codec_id);
  AVPacket* pkt = av_packet_alloc();
  bool first_audio = true;
  double audio_end = 0, longest = 0;
  while (av_read_frame(ic, pkt) >= 0) {
    const AVRational tb = ic->streams[pkt->stream_index]->time_base;
    if (pkt->stream_index == vs && pkt->pts != AV_NOPTS_VALUE) {
      info.video_times.push_back(static_cast<double>(pkt->pts) * av_q2d(tb));
    } else if (pkt->stream_index == as) {
      const double t = static_cast<double>(pkt->pts) * av_q2d(tb);
      if (first_audio) {
        info.audio_start = t;
        first_audio = false;
      }
      // Matroska states no duration per packet: the longest seen stands in for the last one's.
      longest = std::max(longest, static_cast<double>(pkt->duration) * av_q2d(tb));
      audio_end = std::max(audio_end, t);
      ++info.audio_packets;
    }
    av_packet_unref(pkt);
  }
  av_packet_free(&pkt);
  if (info.audio_packets > 0) info.audio_seconds = audio_end + longest - info.audio_start;
  std::sort(info.video_times.begin(), info.video_times.end());
  return info;
}

}  // namespace seedvae::test
