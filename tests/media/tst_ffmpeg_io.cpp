// Video through FFmpeg's libraries: lossless writes read back bit for bit (H.264 RGB, H.265 RGB,
// FFV1 at 8, 10 and 16 bits, odd sizes included), lossy round trips per codec and bit depth
// within a stated PSNR, sources of more than 8 bits keeping their precision, colour matrices and
// ranges converted as the standards say, the source's audio, timestamps (variable frame rate) and
// bit depth carried into the output, rotation metadata honoured, 16-bit PNG and EXR sequences,
// option errors, and the CLI's round trip keeping the input's audio and timing. Test inputs are
// made with FFmpeg's libraries directly (av_test_file.h), never through the code under test.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/media/ffmpeg_video.h"
#include "core/media/metrics.h"
#include "core/media/sample_clip.h"
#include "core/media/video_io.h"
#include "core/schedule/streaming.h"
#include "tests/media/av_test_file.h"
#include "tests/media/media_test_util.h"

using namespace seedvae;
using namespace seedvae::media;
using namespace seedvae::test;
namespace fs = std::filesystem;

namespace {

// The clip as the writer quantises it to `bits` and the reader gives it back:
// round((x + 1) / 2 * max) / max * 2 - 1, in the reader's float arithmetic.
HostTensor quantised(const HostTensor& v, int bits) {
  HostTensor out = v;
  const float m = static_cast<float>((1 << bits) - 1);
  for (float& x : out.f32()) {
    const float c = std::isfinite(x) ? std::clamp(x, -1.0f, 1.0f) : -1.0f;
    const auto q = static_cast<float>(std::lround((c + 1.0f) * 0.5f * m));
    x = q / m * 2.0f - 1.0f;
  }
  return out;
}

// RGB in [0, 1] of one Y'CbCr sample (ITU-R BT.601/709/2020 equations).
std::array<double, 3> ycbcr_to_rgb(double kr, double kb, bool full, int bits, int y, int cb,
                                   int cr) {
  const double scale = static_cast<double>(1 << (bits - 8));
  const double yn = full ? y / ((1 << bits) - 1.0) : (y - 16 * scale) / (219 * scale);
  const double half = 128 * scale;
  const double cbn = full ? (cb - half) / ((1 << bits) - 1.0) : (cb - half) / (224 * scale);
  const double crn = full ? (cr - half) / ((1 << bits) - 1.0) : (cr - half) / (224 * scale);
  const double r = yn + 2 * (1 - kr) * crn;
  const double b = yn + 2 * (1 - kb) * cbn;
  const double g = (yn - kr * r - kb * b) / (1 - kr - kb);
  auto c = [](double v) { return std::clamp(v, 0.0, 1.0); };
  return {c(r), c(g), c(b)};
}

}  // namespace

class TestFfmpegIo : public QObject {
  Q_OBJECT

 private:
  // 8 frames at irregular times (a millisecond time base).
  static TestVideoSpec vfr_spec() {
    TestVideoSpec s;
    s.frames = 8;
    s.tb_num = 1;
    s.tb_den = 1000;
    s.pts = {0, 40, 60, 140, 150, 230, 260, 400};
    s.sample = [](int t, int p, int x, int) { return p == 0 ? 30 + t * 20 + x : 128; };
    return s;
  }

  TempTree tmp_;
  fs::path dir() const { return tmp_.dir(); }
  fs::path subdir(const std::string& name) const { return tmp_.subdir(name); }
  static bool has(const std::string& text, const std::string& word) {
    return text.find(word) != std::string::npos;
  }

  // A 24-frame 32x24 clip at 24 fps with a sine audio track of `audio` ("aac", "pcm_s16le").
  static std::string make_av_input(const fs::path& path, const std::string& audio,
                                   double audio_seconds = 1.0) {
    TestVideoSpec s;
    const bool mp4 = path.extension() == ".mp4";
    s.encoder = mp4 ? "libx264" : "ffv1";
    s.options = mp4 ? "preset=ultrafast:qp=0" : "";
    s.pix_fmt = "yuv444p";
    s.width = 32;
    s.height = 24;
    s.frames = 24;
    s.sample = [](int t, int p, int x, int y) {
      return p == 0 ? 40 + (x * 4 + y * 3 + t * 5) % 160 : 128 + (p == 1 ? x - 16 : y - 12);
    };
    s.color_space = 1;  // BT.709
    s.color_range = 1;
    s.audio_encoder = audio;
    s.audio_seconds = audio_seconds;
    return make_test_video(path, s);
  }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  // A decode written losslessly reads back as the quantised frames, bit for bit; odd sizes too.
  void losslessIsBitExact_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("codec");
    QTest::addColumn<int>("bits");
    QTest::addColumn<bool>("lossless");
    QTest::addColumn<QString>("pixFmt");
    QTest::newRow("h264 8-bit RGB") << "a.mp4"
                                    << "h264" << 8 << true << "gbrp";
    QTest::newRow("h265 8-bit RGB") << "b.mkv"
                                    << "h265" << 8 << true << "gbrp";
    QTest::newRow("h265 10-bit RGB") << "c.mp4"
                                     << "h265" << 10 << true << "gbrp10le";
    QTest::newRow("ffv1 8-bit") << "d.mkv"
                                << "" << 8 << false << "bgr0";
    QTest::newRow("ffv1 10-bit") << "e.mkv"
                                 << "" << 10 << false << "gbrp10le";
    QTest::newRow("ffv1 16-bit") << "f.mkv"
                                 << "ffv1" << 16 << false << "gbrp16le";
  }

  void losslessIsBitExact() {
    QFETCH(QString, name);
    QFETCH(QString, codec);
    QFETCH(int, bits);
    QFETCH(bool, lossless);
    QFETCH(QString, pixFmt);
    const fs::path d = subdir("lossless");
    for (auto [w, h] : {std::pair{40, 24}, std::pair{17, 17}}) {  // x265: at least 16x16
      const HostTensor clip = make_sample_clip(w, h, 5, 3);
      WriteOptions o;
      o.codec = codec.toStdString();
      o.bit_depth = bits;
      o.lossless = lossless;
      o.preset = "ultrafast";
      const fs::path out = d / name.toStdString();
      const Status st = write_clip(out, clip, o);
      QVERIFY2(st.is_ok(), st.to_string().c_str());
      auto back = read_clip(out);
      QVERIFY2(back.is_ok(), back.status().to_string().c_str());
      QCOMPARE(back->video.shape(), clip.shape());
      QCOMPARE(back->bit_depth, bits);
      QCOMPARE(max_abs_diff(back->video, quantised(clip, bits)), 0.0);
      QCOMPARE(QString::fromStdString(av_file_info(out).pix_fmt), pixFmt);
    }
  }

  // 10-bit H.264 without loss codes 4:4:4 YUV: RGB comes back within a 10-bit level.
  void losslessTenBitH264IsYuv444() {
    const fs::path d = subdir("h264_10");
    const HostTensor clip = make_sample_clip(33, 17, 3, 4);
    WriteOptions o;
    o.lossless = true;
    o.bit_depth = 10;
    o.preset = "ultrafast";
    QVERIFY(write_clip(d / "a.mp4", clip, o).is_ok());
    QCOMPARE(av_file_info(d / "a.mp4").pix_fmt, std::string("yuv444p10le"));
    auto back = read_clip(d / "a.mp4");
    QVERIFY2(back.is_ok(), back.status().to_string().c_str());
    const double m = max_abs_diff(back->video, quantised(clip, 10));
    qInfo("10-bit lossless H.264 (4:4:4 YUV): largest RGB error %.3f levels", m * 1023 / 2);
    QVERIFY2(m <= 4.0 / 1023 + 1e-6, qPrintable(QString::number(m * 1023 / 2)));  // 2 levels
  }

  // Lossy codecs per bit depth, within a stated PSNR, with the expected pixel format.
  void lossyRoundTrips_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("codec");
    QTest::addColumn<int>("bits");
    QTest::addColumn<QString>("pixFmt");
    QTest::addColumn<QString>("codecName");
    QTest::addColumn<double>("minPsnr");
    // The sample clip's sharp colour edges cost 4:2:0 and 4:2:2 chroma most of their error.
    QTest::newRow("h264 8-bit") << "a.mp4"
                                << "" << 0 << "yuv420p"
                                << "h264" << 31.0;
    QTest::newRow("h264 10-bit") << "b.mp4"
                                 << "h264" << 10 << "yuv420p10le"
                                 << "h264" << 31.0;
    QTest::newRow("h265 8-bit") << "c.mp4"
                                << "h265" << 8 << "yuv420p"
                                << "hevc" << 31.0;
    QTest::newRow("h265 10-bit") << "d.mkv"
                                 << "h265" << 10 << "yuv420p10le"
                                 << "hevc" << 31.0;
    QTest::newRow("prores 422") << "e.mov"
                                << "" << 0 << "yuv422p10le"
                                << "prores" << 34.0;
    // The decoder reports ProRes 4444 as 12-bit (its coding holds up to 12 bits).
    QTest::newRow("prores 4444") << "f.mov"
                                 << "prores4444" << 0 << "yuv444p12le"
                                 << "prores" << 46.0;
    QTest::newRow("prores in mkv") << "g.mkv"
                                   << "prores" << 10 << "yuv422p10le"
                                   << "prores" << 34.0;
    QTest::newRow("mjpeg") << "h.avi"
                           << "" << 0 << "yuvj444p"
                           << "mjpeg" << 39.0;
  }

  void lossyRoundTrips() {
    QFETCH(QString, name);
    QFETCH(QString, codec);
    QFETCH(int, bits);
    QFETCH(QString, pixFmt);
    QFETCH(QString, codecName);
    QFETCH(double, minPsnr);
    const fs::path d = subdir("lossy");
    const HostTensor clip = make_sample_clip(64, 48, 6, 5);
    WriteOptions o;
    o.codec = codec.toStdString();
    o.bit_depth = bits;
    o.preset = "fast";
    const fs::path out = d / name.toStdString();
    auto w = ClipWriter::open(out, o);
    QVERIFY2(w.is_ok(), w.status().to_string().c_str());
    QVERIFY(w->write(clip).is_ok());
    QVERIFY(w->commit().is_ok());
    qInfo("%s", w->description().c_str());
    QCOMPARE(list_dir(d), (std::set<std::string>{name.toStdString()}));
    const AvFileInfo info = av_file_info(out);
    QCOMPARE(QString::fromStdString(info.pix_fmt), pixFmt);
    QCOMPARE(QString::fromStdString(info.video_codec), codecName);
    auto back = read_clip(out);
    QVERIFY2(back.is_ok(), back.status().to_string().c_str());
    QCOMPARE(back->video.shape(), clip.shape());
    QVERIFY(std::abs(back->fps - 24.0) < 0.01);
    auto q = compare_clips(back->video, clip);
    QVERIFY(q.is_ok());
    qInfo("PSNR %.2f dB, SSIM %.4f", q->psnr_db, q->ssim);
    QVERIFY2(q->psnr_db > minPsnr, qPrintable(QString("PSNR %1 dB").arg(q->psnr_db)));
  }

  // Odd sizes come back exact in every video form (4:4:4 chroma where 4:2:0/4:2:2 is usual).
  void oddSizesAreExact() {
    const fs::path d = subdir("odd");
    const HostTensor clip = make_sample_clip(7, 5, 3, 6);
    for (const char* name : {"a.mp4", "b.mov", "c.mkv", "d.avi"}) {
      QVERIFY2(stored_size_note(d / name, 7, 5).empty(), name);
      const Status st = write_clip(d / name, clip, {});
      QVERIFY2(st.is_ok(), st.to_string().c_str());
      auto back = read_clip(d / name);
      QVERIFY2(back.is_ok(), back.status().to_string().c_str());
      QCOMPARE(back->video.shape(), (Shape{1, 3, 3, 5, 7}));
      auto info = probe(d / name);
      QVERIFY(info.is_ok());
      QCOMPARE(info->width, 7);
      QCOMPARE(info->height, 5);
    }
    // x265 codes nothing smaller than 16x16: refused with the reason, nothing left.
    WriteOptions o;
    o.codec = "h265";
    const Status st = write_clip(d / "small.mkv", clip, o);
    QCOMPARE(st.code(), StatusCode::kInvalidArgument);
    QVERIFY2(has(st.message(), "16x16"), st.message().c_str());
    QVERIFY(!fs::exists(d / "small.mkv"));
  }

  // A 10-bit source keeps its precision on reading, and writes 10-bit by default.
  void tenBitSources() {
    const fs::path d = subdir("ten");
    TestVideoSpec s;
    s.encoder = "ffv1";
    s.pix_fmt = "gbrp10le";
    s.width = 12;
    s.height = 6;
    s.frames = 3;
    // Levels 0..1023 that 8 bits cannot hold (not multiples of 4).
    s.sample = [](int t, int p, int x, int y) {
      return (t * 301 + p * 97 + x * 61 + y * 13) % 1024;
    };
    const fs::path src = d / "src.mkv";
    QCOMPARE(QString::fromStdString(make_test_video(src, s)), QString());
    auto clip = read_clip(src);
    QVERIFY2(clip.is_ok(), clip.status().to_string().c_str());
    QCOMPARE(clip->bit_depth, 10);
    auto info = probe(src);
    QVERIFY(info.is_ok());
    QCOMPARE(info->bit_depth, 10);
    QCOMPARE(info->codec, std::string("ffv1"));
    for (int t = 0; t < 3; ++t) {
      for (int y = 0; y < 6; ++y) {
        for (int x = 0; x < 12; ++x) {
          for (int c = 0; c < 3; ++c) {
            const int plane = c == 0 ? 2 : c == 1 ? 0 : 1;  // G, B, R planes
            const float want = static_cast<float>(s.sample(t, plane, x, y)) / 1023.0f * 2.0f - 1.0f;
            QCOMPARE(at(clip->video, c, t, y, x), want);
          }
        }
      }
    }
    // Written with the source named: 10-bit by default, and the same samples (FFV1).
    WriteOptions o;
    o.source = src;
    QVERIFY(write_clip(d / "out.mkv", clip->video, o).is_ok());
    QCOMPARE(av_file_info(d / "out.mkv").pix_fmt, std::string("gbrp10le"));
    auto back = read_clip(d / "out.mkv");
    QVERIFY(back.is_ok());
    QCOMPARE(max_abs_diff(back->video, clip->video), 0.0);
    o.preset = "ultrafast";
    QVERIFY(write_clip(d / "out.mp4", clip->video, o).is_ok());
    QCOMPARE(av_file_info(d / "out.mp4").pix_fmt, std::string("yuv420p10le"));
    o.bit_depth = 8;
    QVERIFY(write_clip(d / "out8.mkv", clip->video, o).is_ok());
    QCOMPARE(av_file_info(d / "out8.mkv").pix_fmt, std::string("bgr0"));
  }

  // Y'CbCr decoded with the stream's matrix and range (unstated below 720 lines: BT.601).
  void colourMatrices_data() {
    QTest::addColumn<QString>("pixFmt");
    QTest::addColumn<int>("space");
    QTest::addColumn<int>("range");
    QTest::addColumn<double>("kr");
    QTest::addColumn<double>("kb");
    QTest::addColumn<int>("bits");
    QTest::addColumn<QList<int>>("ycbcr");
    QTest::newRow("BT.601 limited")
        << "yuv444p" << 6 << 1 << 0.299 << 0.114 << 8 << QList<int>{120, 90, 170};
    QTest::newRow("unstated: BT.601 limited")
        << "yuv444p" << 2 << 0 << 0.299 << 0.114 << 8 << QList<int>{120, 90, 170};
    QTest::newRow("BT.709 limited")
        << "yuv444p" << 1 << 1 << 0.2126 << 0.0722 << 8 << QList<int>{120, 90, 170};
    QTest::newRow("BT.709 full") << "yuv444p" << 1 << 2 << 0.2126 << 0.0722 << 8
                                 << QList<int>{120, 90, 170};
    QTest::newRow("BT.2020 limited 10-bit")
        << "yuv444p10le" << 9 << 1 << 0.2627 << 0.0593 << 10 << QList<int>{500, 400, 650};
    QTest::newRow("BT.709 limited 10-bit 4:2:0")
        << "yuv420p10le" << 1 << 1 << 0.2126 << 0.0722 << 10 << QList<int>{700, 300, 560};
  }

  void colourMatrices() {
    QFETCH(QString, pixFmt);
    QFETCH(int, space);
    QFETCH(int, range);
    QFETCH(double, kr);
    QFETCH(double, kb);
    QFETCH(int, bits);
    QFETCH(QList<int>, ycbcr);
    const fs::path d = subdir("colour");
    TestVideoSpec s;
    s.pix_fmt = pixFmt.toStdString();
    s.color_space = space;
    s.color_range = range;
    s.frames = 2;
    s.sample = [&](int, int p, int, int) { return ycbcr[p]; };
    const fs::path src = d / "c.mkv";
    QCOMPARE(QString::fromStdString(make_test_video(src, s)), QString());
    auto clip = read_clip(src);
    QVERIFY2(clip.is_ok(), clip.status().to_string().c_str());
    const auto want = ycbcr_to_rgb(kr, kb, range == 2, bits, ycbcr[0], ycbcr[1], ycbcr[2]);
    for (int c = 0; c < 3; ++c) {
      const double got = (at(clip->video, c, 1, 8, 8) + 1.0) / 2.0;
      qInfo("channel %d: %.5f, want %.5f", c, got, want[static_cast<size_t>(c)]);
      // Within one 8-bit level; the other matrices differ by several.
      QVERIFY2(std::abs(got - want[static_cast<size_t>(c)]) < 1.0 / 255,
               qPrintable(QString::number(got)));
    }
  }

  // The source's audio is copied, with the input's duration, and its video timestamps.
  void audioIsCopied() {
    const fs::path d = subdir("audio");
    const fs::path in = d / "in.mp4";
    QCOMPARE(QString::fromStdString(make_av_input(in, "aac")), QString());
    const AvFileInfo src = av_file_info(in);
    QCOMPARE(src.audio_streams, 1);
    QVERIFY(std::abs(src.audio_seconds - 1.0) < 0.03);
    auto clip = read_clip(in);
    QVERIFY2(clip.is_ok(), clip.status().to_string().c_str());
    QCOMPARE(clip->video.shape().t(), int64_t{24});
    auto info = probe(in);
    QVERIFY(info.is_ok());
    QCOMPARE(info->audio_streams, 1);
    for (const char* name : {"out.mp4", "out.mkv", "out.mov"}) {
      WriteOptions o;
      o.source = in;
      o.preset = "ultrafast";
      auto w = ClipWriter::open(d / name, o);
      QVERIFY(w.is_ok());
      QVERIFY(w->write(clip->video).is_ok());
      const Status st = w->commit();
      QVERIFY2(st.is_ok(), st.to_string().c_str());
      QVERIFY(w->warnings().empty());
      const AvFileInfo out = av_file_info(d / name);
      QCOMPARE(out.audio_streams, 1);
      QCOMPARE(out.audio_codec, std::string("aac"));
      qInfo("%s: audio %.5f s from %.5f; source %.5f s from %.5f", name, out.audio_seconds,
            out.audio_start, src.audio_seconds, src.audio_start);
      // Every packet, over the same span (Matroska stores times in milliseconds).
      QCOMPARE(out.audio_packets, src.audio_packets);
      QVERIFY2(std::abs(out.audio_seconds - src.audio_seconds) < 2e-3,
               qPrintable(QString("%1 vs %2").arg(out.audio_seconds).arg(src.audio_seconds)));
      QCOMPARE(out.video_times.size(), src.video_times.size());
      for (size_t i = 0; i < src.video_times.size(); ++i) {
        QVERIFY(std::abs((out.video_times[i] - out.video_times[0]) -
                         (src.video_times[i] - src.video_times[0])) < 1e-3);
      }
    }
    // A part of the source: timestamps of the frames written, audio trimmed to their span.
    ReadOptions ro;
    ro.first_frame = 6;
    ro.stride = 2;
    auto part = read_clip(in, ro);
    QVERIFY(part.is_ok());
    QCOMPARE(part->video.shape().t(), int64_t{9});
    QCOMPARE(part->frame_times.size(), size_t{9});
    QVERIFY(std::abs(part->frame_times[1] - 8.0 / 24) < 1e-6);
    WriteOptions o;
    o.source = in;
    o.source_first_frame = 6;
    o.source_stride = 2;
    o.preset = "ultrafast";
    QVERIFY(write_clip(d / "part.mp4", part->video, o).is_ok());
    const AvFileInfo p = av_file_info(d / "part.mp4");
    QCOMPARE(p.audio_streams, 1);
    qInfo("part: audio %.4f s", p.audio_seconds);
    QVERIFY(std::abs(p.audio_seconds - 18.0 / 24) < 0.03);
    auto pb = read_clip(d / "part.mp4");
    QVERIFY(pb.is_ok());
    QCOMPARE(pb->frame_times.size(), size_t{9});
    for (size_t i = 0; i < 9; ++i) {
      QVERIFY(std::abs(pb->frame_times[i] - static_cast<double>(2 * i) / 24) < 1e-4);
    }
  }

  // An audio codec the container cannot hold is left out with a warning; .mkv keeps it.
  void unstorableAudioIsSkippedWithAWarning() {
    const fs::path d = subdir("pcm");
    const fs::path in = d / "in.mkv";
    QCOMPARE(QString::fromStdString(make_av_input(in, "pcm_s16le")), QString());
    auto clip = read_clip(in);
    QVERIFY(clip.is_ok());
    WriteOptions o;
    o.source = in;
    o.preset = "ultrafast";
    auto w = ClipWriter::open(d / "out.mp4", o);
    QVERIFY(w.is_ok() && w->write(clip->video).is_ok() && w->commit().is_ok());
    QCOMPARE(w->warnings().size(), size_t{1});
    QVERIFY2(has(w->warnings()[0], "pcm_s16le") && has(w->warnings()[0], "out.mp4"),
             w->warnings()[0].c_str());
    QCOMPARE(av_file_info(d / "out.mp4").audio_streams, 0);
    QVERIFY(write_clip(d / "out.mkv", clip->video, o).is_ok());
    const AvFileInfo mkv = av_file_info(d / "out.mkv");
    QCOMPARE(mkv.audio_codec, std::string("pcm_s16le"));
    QCOMPARE(mkv.audio_packets, av_file_info(in).audio_packets);
    QVERIFY(std::abs(mkv.audio_seconds - av_file_info(in).audio_seconds) < 2e-3);
  }

  // Variable frame rate: every frame's time is read and written back.
  void variableFrameRateTimestamps() {
    const fs::path d = subdir("vfr");
    TestVideoSpec s = vfr_spec();
    const fs::path in = d / "in.mkv";
    QCOMPARE(QString::fromStdString(make_test_video(in, s)), QString());
    auto clip = read_clip(in);
    QVERIFY2(clip.is_ok(), clip.status().to_string().c_str());
    QCOMPARE(clip->frame_times.size(), size_t{8});
    for (size_t i = 0; i < 8; ++i) {
      QVERIFY(std::abs(clip->frame_times[i] - static_cast<double>(s.pts[i]) / 1000) < 1e-9);
    }
    auto info = probe(in);
    QVERIFY(info.is_ok());
    QCOMPARE(info->frame_times, clip->frame_times);
    for (const char* name : {"out.mp4", "out.mkv", "out.mov"}) {
      WriteOptions o;
      o.source = in;
      o.preset = "ultrafast";
      QVERIFY(write_clip(d / name, clip->video, o).is_ok());
      auto back = read_clip(d / name);
      QVERIFY2(back.is_ok(), back.status().to_string().c_str());
      QCOMPARE(back->video.shape(), clip->video.shape());
      QCOMPARE(back->frame_times.size(), size_t{8});
      for (size_t i = 0; i < 8; ++i) {
        QVERIFY2(std::abs(back->frame_times[i] - clip->frame_times[i]) < 1e-6,
                 qPrintable(QString("%1 frame %2: %3").arg(name).arg(i).arg(back->frame_times[i])));
      }
      const AvFileInfo out = av_file_info(d / name);
      QCOMPARE(out.video_times.size(), size_t{8});
      QVERIFY(std::abs(out.video_times[7] - out.video_times[0] - 0.4) < 1e-6);
    }
  }

  // A segmented write (a resumable round trip's) takes the source's timing from one scan for all
  // of its segments and the join, not one decode of the whole source per segment; a source
  // written again under the same name is scanned again.
  void segmentsScanTheSourceOnce() {
    const fs::path d = subdir("scan_once");
    TestVideoSpec s = vfr_spec();
    const fs::path in = d / "in.mkv";
    QCOMPARE(QString::fromStdString(make_test_video(in, s)), QString());
    auto clip = read_clip(in);
    QVERIFY(clip.is_ok());
    WriteOptions o;
    o.source = in;
    o.preset = "ultrafast";
    const fs::path work = d / "work";
    fs::create_directories(work);
    const int64_t scans = detail::source_scans();
    auto w = SegmentedClipWriter::open(d / "out.mp4", o, work);
    QVERIFY2(w.is_ok(), w.status().to_string().c_str());
    const int64_t width = clip->video.shape()[4], height = clip->video.shape()[3];
    for (int64_t seg = 0; seg < 4; ++seg) {
      QVERIFY(w->begin_segment(seg, seg * 2).is_ok());
      QVERIFY(w->write(slice_time(clip->video, seg * 2, seg * 2 + 2)).is_ok());
      QVERIFY(w->end_segment().is_ok());
    }
    QVERIFY(w->join(4, 8, static_cast<int>(width), static_cast<int>(height)).is_ok());
    QCOMPARE(detail::source_scans() - scans, int64_t{1});
    auto back = read_clip(d / "out.mp4");
    QVERIFY(back.is_ok());
    QCOMPARE(back->frame_times, clip->frame_times);  // the segments got the source's times

    // the same name, other times: scanned afresh
    s.pts = {0, 10, 20, 30, 40, 50, 60, 70};
    QCOMPARE(QString::fromStdString(make_test_video(in, s)), QString());
    auto timing = detail::scan_source(in, nullptr);
    QVERIFY(timing.is_ok());
    QCOMPARE(detail::source_scans() - scans, int64_t{2});
    QCOMPARE(timing->pts, std::vector<int64_t>(s.pts.begin(), s.pts.end()));
    QVERIFY(detail::scan_source(in, nullptr).is_ok());
    QCOMPARE(detail::source_scans() - scans, int64_t{2});
  }

  // A cancel while the finished file is read back (a SIGTERM as the write ends) is a cancel,
  // not an I/O error: the CLI then exits 143, as for a signal anywhere else.
  void cancelAtTheReadBackIsACancel() {
    const fs::path d = subdir("cancel_at_finish");
    CancelToken cancel;
    WriteOptions o;
    o.preset = "ultrafast";
    auto w = detail::VideoFileWriter::open(d / "out.mp4", d / "out.mp4", o, 16, 16, &cancel);
    QVERIFY2(w.is_ok(), w.status().to_string().c_str());
    const std::vector<float> video(size_t{3} * 2 * 16 * 16, 0.25f);  // [1, 3, 2, 16, 16]
    QVERIFY((*w)->write(video.data(), 2, 0).is_ok());
    QVERIFY((*w)->write(video.data(), 2, 1).is_ok());
    cancel.request();
    const Status s = (*w)->finish();
    QVERIFY2(s.code() == StatusCode::kCancelled, s.to_string().c_str());
  }

  // The display matrix turns the frames upright: 90, 180 and 270 degrees clockwise.
  void rotationIsHonoured() {
    const fs::path d = subdir("rotation");
    TestVideoSpec s;
    s.encoder = "libx264";
    s.options = "preset=ultrafast:qp=0";
    s.pix_fmt = "yuv444p";
    s.width = 8;
    s.height = 4;
    s.frames = 2;
    s.sample = [](int, int p, int x, int y) { return p == 0 ? 20 + x * 20 + y * 50 : 128; };
    QCOMPARE(QString::fromStdString(make_test_video(d / "r0.mp4", s)), QString());
    auto upright = read_clip(d / "r0.mp4");
    QVERIFY(upright.is_ok());
    const HostTensor& u = upright->video;
    for (int rot : {90, 180, 270}) {
      s.rotation = rot;
      const fs::path f = d / ("r" + std::to_string(rot) + ".mp4");
      QCOMPARE(QString::fromStdString(make_test_video(f, s)), QString());
      auto info = probe(f);
      QVERIFY2(info.is_ok(), info.status().to_string().c_str());
      QCOMPARE(info->rotation, rot);
      const bool turned = rot != 180;
      QCOMPARE(info->width, turned ? 4 : 8);
      QCOMPARE(info->height, turned ? 8 : 4);
      auto r = read_clip(f);
      QVERIFY(r.is_ok());
      const int64_t H = r->video.shape().h(), W = r->video.shape().w();
      QCOMPARE(H, int64_t{turned ? 8 : 4});
      for (int64_t y = 0; y < H; ++y) {
        for (int64_t x = 0; x < W; ++x) {
          // Where pixel (x, y) of the upright frame comes from in the stored one.
          const int64_t sx = rot == 90 ? y : rot == 180 ? 7 - x : 7 - y;
          const int64_t sy = rot == 90 ? 3 - x : rot == 180 ? 3 - y : x;
          for (int c = 0; c < 3; ++c) QCOMPARE(at(r->video, c, 0, y, x), at(u, c, 0, sy, sx));
        }
      }
    }
  }

  // Image sequences: 16-bit PNG and 32-bit float EXR frames.
  void sixteenBitPngAndExrSequences() {
    const fs::path d = subdir("seq");
    const HostTensor clip = make_sample_clip(9, 7, 3, 8);
    WriteOptions o;
    o.bit_depth = 16;
    QVERIFY(write_clip(d / "png16", clip, o).is_ok());
    auto p = read_clip(d / "png16");
    QVERIFY2(p.is_ok(), p.status().to_string().c_str());
    QCOMPARE(p->bit_depth, 16);
    QCOMPARE(max_abs_diff(p->video, quantised(clip, 16)), 0.0);
    o = {};
    o.codec = "exr";
    QVERIFY(write_clip(d / "exr", clip, o).is_ok());
    QCOMPARE(list_dir(d / "exr"),
             (std::set<std::string>{"frame_00000.exr", "frame_00001.exr", "frame_00002.exr"}));
    auto e = read_clip(d / "exr");
    QVERIFY2(e.is_ok(), e.status().to_string().c_str());
    QVERIFY(max_abs_diff(e->video, clip) < 1e-6);
    // Rewriting an EXR output replaces it.
    QVERIFY(write_clip(d / "exr", slice_time(clip, 0, 1), o).is_ok());
    QCOMPARE(list_dir(d / "exr").size(), size_t{1});
    // One 16-bit PNG image.
    o = {};
    o.bit_depth = 16;
    QVERIFY(write_clip(d / "one.png", slice_time(clip, 0, 1), o).is_ok());
    auto one = read_clip(d / "one.png");
    QVERIFY(one.is_ok());
    QCOMPARE(max_abs_diff(one->video, quantised(slice_time(clip, 0, 1), 16)), 0.0);
  }

  // Options that cannot apply are refused up front, saying what to change; nothing is written.
  void writeOptionErrors_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("codec");
    QTest::addColumn<int>("bits");
    QTest::addColumn<bool>("lossless");
    QTest::addColumn<QString>("preset");
    QTest::addColumn<QString>("word");
    QTest::newRow("ffv1 in mp4") << "a.mp4"
                                 << "ffv1" << 0 << false << ""
                                 << ".mkv";
    QTest::newRow("prores in mp4") << "a.mp4"
                                   << "prores" << 0 << false << ""
                                   << ".mov";
    QTest::newRow("h265 in avi") << "a.avi"
                                 << "h265" << 0 << false << ""
                                 << ".mp4";
    QTest::newRow("lossless prores") << "a.mov"
                                     << "" << 0 << true << ""
                                     << "lossy";
    QTest::newRow("16-bit h264") << "a.mp4"
                                 << "" << 16 << false << ""
                                 << "8 or 10";
    QTest::newRow("8-bit prores") << "a.mov"
                                  << "" << 8 << false << ""
                                  << "10-bit";
    QTest::newRow("bit depth 12") << "a.mkv"
                                  << "" << 12 << false << ""
                                  << "8, 10 or 16";
    QTest::newRow("unknown codec") << "a.mp4"
                                   << "vp9" << 0 << false << ""
                                   << "vp9";
    QTest::newRow("bad preset") << "a.mp4"
                                << "" << 0 << false << "quick"
                                << "preset";
    QTest::newRow("video codec, directory") << "frames"
                                            << "h264" << 0 << false << ""
                                            << ".mp4";
    QTest::newRow("png to mkv") << "a.mkv"
                                << "png" << 0 << false << ""
                                << "image sequences";
  }

  void writeOptionErrors() {
    QFETCH(QString, name);
    QFETCH(QString, codec);
    QFETCH(int, bits);
    QFETCH(bool, lossless);
    QFETCH(QString, preset);
    QFETCH(QString, word);
    const fs::path d = subdir("opterr");
    WriteOptions o;
    o.codec = codec.toStdString();
    o.bit_depth = bits;
    o.lossless = lossless;
    o.preset = preset.toStdString();
    const fs::path dest = d / name.toStdString();
    const Status chk = check_clip_destination(dest, o);
    QCOMPARE(chk.code(), StatusCode::kInvalidArgument);
    QVERIFY2(has(chk.message(), word.toStdString()), chk.message().c_str());
    const Status st = write_clip(dest, make_sample_clip(8, 8, 2), o);
    QCOMPARE(st.code(), StatusCode::kInvalidArgument);
    QVERIFY(list_dir(d).empty());
  }

  // An output never overwrites its source.
  void outputIsNeverTheSource() {
    const fs::path d = subdir("self");
    const fs::path in = d / "in.mkv";
    QCOMPARE(QString::fromStdString(make_av_input(in, "")), QString());
    const QByteArray before = read_bytes(in);
    auto clip = read_clip(in);
    QVERIFY(clip.is_ok());
    WriteOptions o;
    o.source = in;
    const Status st = write_clip(in, clip->video, o);
    QCOMPARE(st.code(), StatusCode::kInvalidArgument);
    QVERIFY2(has(st.message(), "is the input"), st.message().c_str());
    QCOMPARE(read_bytes(in), before);
    QCOMPARE(list_dir(d), (std::set<std::string>{"in.mkv"}));
  }

  // Hostile sources: clean errors naming the file.
  void hostileVideoFiles() {
    const fs::path d = subdir("hostile");
    const fs::path in = d / "in.mp4";
    QCOMPARE(QString::fromStdString(make_av_input(in, "aac")), QString());
    const QByteArray bytes = read_bytes(in);
    // The header alone: no frame decodes.
    write_bytes(d / "head.mp4", bytes.left(48));
    auto r = read_clip(d / "head.mp4");
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kCorruptData);
    QVERIFY2(has(r.status().message(), "head.mp4"), r.status().message().c_str());
    // An audio-only file: no video stream.
    write_bytes(d / "fake.mkv", QByteArray("\x1a\x45\xdf\xa3", 4) + QByteArray(64, '\0'));
    auto f = read_clip(d / "fake.mkv");
    QVERIFY(!f.is_ok());
    QVERIFY2(has(f.status().message(), "fake.mkv"), f.status().message().c_str());
    // A damaged source named for copying: the write fails cleanly or copies what it can.
    write_bytes(d / "cut.mp4", bytes.left(bytes.size() / 3));
    WriteOptions o;
    o.source = d / "cut.mp4";
    const Status st = write_clip(d / "out.mkv", make_sample_clip(32, 24, 2), o);
    if (!st.is_ok()) {
      QVERIFY2(has(st.message(), "cut.mp4"), st.message().c_str());
      QVERIFY(!fs::exists(d / "out.mkv"));
    }
  }

  // The CLI's round trip keeps the input's audio and timing, and lists the output options.
  void cliRoundTripKeepsAudioAndTiming() {
    const fs::path d = subdir("cli");
    const fs::path in = d / "in.mp4";
    QCOMPARE(QString::fromStdString(make_av_input(in, "aac")), QString());
    QProcess help;
    help.start(SEEDVAE_CLI_PATH, {"roundtrip", "--help"});
    QVERIFY(help.waitForFinished(60000));
    const QString text = QString::fromUtf8(help.readAllStandardOutput());
    for (const char* flag : {"--codec", "--crf", "--preset", "--lossless", "--bit-depth"}) {
      QVERIFY2(text.contains(flag), flag);
    }
    QProcess rt;
    rt.start(SEEDVAE_CLI_PATH,
             {"roundtrip", "--synthetic", "tiny", QString::fromStdString(in.string()), "-o",
              QString::fromStdString((d / "out.mp4").string()), "--preset", "ultrafast", "-q"});
    QVERIFY(rt.waitForFinished(240000));
    QVERIFY2(rt.exitCode() == 0, rt.readAllStandardError().constData());
    const AvFileInfo a = av_file_info(in), b = av_file_info(d / "out.mp4");
    QCOMPARE(b.audio_streams, 1);
    QCOMPARE(b.audio_packets, a.audio_packets);
    QVERIFY(std::abs(b.audio_seconds - a.audio_seconds) < 1e-6);
    QCOMPARE(b.video_times.size(), a.video_times.size());
    for (size_t i = 0; i < a.video_times.size(); ++i) {
      QVERIFY(std::abs((b.video_times[i] - b.video_times[0]) -
                       (a.video_times[i] - a.video_times[0])) < 1e-3);
    }
    QCOMPARE(b.color_space, a.color_space);  // BT.709, copied
    // Options the output cannot take are refused before any work.
    QProcess bad;
    bad.start(SEEDVAE_CLI_PATH,
              {"roundtrip", "--synthetic", "tiny", QString::fromStdString(in.string()), "-o",
               QString::fromStdString((d / "bad.mp4").string()), "--codec", "ffv1", "-q"});
    QVERIFY(bad.waitForFinished(60000));
    QVERIFY(bad.exitCode() != 0);
    QVERIFY(bad.readAllStandardError().contains(".mkv"));
    QVERIFY(!fs::exists(d / "bad.mp4"));
  }
};

QTEST_GUILESS_MAIN(TestFfmpegIo)
#include "tst_ffmpeg_io.moc"
