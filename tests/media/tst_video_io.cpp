// seedvae_media video I/O on valid input: round trips through every writable form (mp4, avi, mkv,
// PNG directory, single image; tst_ffmpeg_io covers the codecs and their options), RGB channel
// order checked against Qt's independent PNG codec, frame selection (first_frame / max_frames /
// stride) on PNG sequences with the frame index encoded in the pixels and on mp4, resizing, sources
// given as patterns and directories, probe() counts, and cancellation.
#include <QColor>
#include <QImage>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/base/cancel.h"
#include "core/media/frame_spool.h"
#include "core/media/metrics.h"
#include "core/media/sample_clip.h"
#include "core/media/video_io.h"
#include "core/schedule/streaming.h"
#include "tests/media/media_test_util.h"

using namespace seedvae;
using namespace seedvae::media;
using namespace seedvae::test;
namespace fs = std::filesystem;

class TestVideoIo : public QObject {
  Q_OBJECT

 private:
  TempTree tmp_;
  fs::path dir() const { return tmp_.dir(); }
  fs::path subdir(const std::string& name) const { return tmp_.subdir(name); }

  // Colour ramp clip for exact PNG checks: frame t, pixel (y, x) has levels that encode all four.
  static HostTensor level_clip(int64_t T, int64_t H, int64_t W) {
    return clip_from(T, H, W, [](int64_t c, int64_t t, int64_t y, int64_t x) {
      return level(static_cast<int>((c * 80 + t * 12 + y * 7 + x * 3) % 256));
    });
  }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  void mp4RoundTrip() {
    const fs::path d = subdir("mp4");
    const HostTensor clip = make_sample_clip(160, 96, 12, 1);
    const fs::path out = d / "clip.mp4";
    const Status st = write_clip(out, clip, WriteOptions{});
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QCOMPARE(list_dir(d), (std::set<std::string>{"clip.mp4"}));  // no temporary left

    auto info = probe(out);
    QVERIFY2(info.is_ok(), info.status().to_string().c_str());
    QCOMPARE(info->width, 160);
    QCOMPARE(info->height, 96);
    QCOMPARE(info->frame_count, int64_t{12});
    QCOMPARE(info->source_kind, std::string("video"));
    QVERIFY(std::abs(info->fps - 24.0) < 0.01);

    auto back = read_clip(out);
    QVERIFY2(back.is_ok(), back.status().to_string().c_str());
    QCOMPARE(back->video.shape(), clip.shape());
    QCOMPARE(back->video.dtype(), DType::kF32);
    QVERIFY(std::abs(back->fps - 24.0) < 0.01);
    auto q = compare_clips(back->video, clip);
    QVERIFY(q.is_ok());
    qInfo("H.264 round trip: PSNR %.2f dB, SSIM %.4f", q->psnr_db, q->ssim);
    QVERIFY2(q->psnr_db > 30.0, qPrintable(QString("PSNR %1 dB").arg(q->psnr_db)));
    QVERIFY(q->ssim > 0.9);
    for (float v : back->video.f32()) QVERIFY(v >= -1.0f && v <= 1.0f);
  }

  void mp4ColoursAreRgb() {
    // Lossy, so only coarse: a pure red frame stays red, a pure blue one blue.
    const fs::path d = subdir("mp4rgb");
    const HostTensor clip = clip_from(3, 32, 48, [](int64_t c, int64_t t, int64_t, int64_t) {
      const int64_t hot = t == 0 ? 0 : t == 1 ? 2 : 1;
      return c == hot ? 1.0f : -1.0f;
    });
    QVERIFY(write_clip(d / "rgb.mp4", clip, {}).is_ok());
    auto back = read_clip(d / "rgb.mp4");
    QVERIFY2(back.is_ok(), back.status().to_string().c_str());
    const int64_t hot[3] = {0, 2, 1};
    for (int64_t t = 0; t < 3; ++t) {
      for (int64_t c = 0; c < 3; ++c) {
        const double m = frame_mean(back->video, c, t);
        if (c == hot[t]) {
          QVERIFY2(m > 0.6,
                   qPrintable(QString("frame %1 channel %2 mean %3").arg(t).arg(c).arg(m)));
        } else {
          QVERIFY2(m < -0.6,
                   qPrintable(QString("frame %1 channel %2 mean %3").arg(t).arg(c).arg(m)));
        }
      }
    }
  }

  void aviAndQuality() {
    const fs::path d = subdir("avi");
    const HostTensor clip = make_sample_clip(160, 96, 6, 2);
    QVERIFY(write_clip(d / "best.avi", clip, WriteOptions{24, 0}).is_ok());
    QVERIFY(write_clip(d / "worst.avi", clip, WriteOptions{24, 51}).is_ok());
    QVERIFY(write_clip(d / "default.avi", clip, WriteOptions{}).is_ok());
    QCOMPARE(list_dir(d), (std::set<std::string>{"best.avi", "worst.avi", "default.avi"}));
    QVERIFY(fs::file_size(d / "best.avi") > fs::file_size(d / "worst.avi"));
    auto best = read_clip(d / "best.avi");
    auto worst = read_clip(d / "worst.avi");
    QVERIFY2(best.is_ok(), best.status().to_string().c_str());
    QVERIFY2(worst.is_ok(), worst.status().to_string().c_str());
    QCOMPARE(best->video.shape(), clip.shape());
    const double pb = compare_clips(best->video, clip)->psnr_db;
    const double pw = compare_clips(worst->video, clip)->psnr_db;
    qInfo("Motion-JPEG: PSNR %.2f dB at quality 0, %.2f dB at 51", pb, pw);
    QVERIFY(pb > 33.0);
    QVERIFY(pb > pw);
  }

  void mkvIsLossless() {
    const fs::path d = subdir("mkv");
    const HostTensor clip = make_sample_clip(64, 40, 7, 3);
    const Status st = write_clip(d / "clip.mkv", clip, WriteOptions{30});
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QCOMPARE(list_dir(d), (std::set<std::string>{"clip.mkv"}));
    auto back = read_clip(d / "clip.mkv");
    QVERIFY2(back.is_ok(), back.status().to_string().c_str());
    QCOMPARE(back->video.shape(), clip.shape());
    QVERIFY(std::abs(back->fps - 30.0) < 0.01);
    // 8-bit quantisation only: at most half a level, 1/255 in [-1, 1] units.
    QVERIFY2(max_abs_diff(back->video, clip) <= 1.0 / 255 + 1e-6,
             qPrintable(QString::number(max_abs_diff(back->video, clip))));
  }

  // A clip written a chunk at a time equals the same clip written at once, for a lossless video
  // and a PNG directory; frames kept in a FrameSpool (on disk) write the same clip again.
  void chunkedWritesEqualWholeWrites() {
    const fs::path d = subdir("chunked");
    const HostTensor clip = level_clip(9, 24, 40);
    for (const char* name : {"clip.mkv", "frames"}) {
      const fs::path whole = d / (std::string("whole_") + name);
      const fs::path chunked = d / (std::string("chunked_") + name);
      QVERIFY(write_clip(whole, clip).is_ok());
      auto w = ClipWriter::open(chunked);
      QVERIFY2(w.is_ok(), w.status().to_string().c_str());
      for (auto [b, e] : {std::pair<int64_t, int64_t>{0, 5}, {5, 9}}) {
        QVERIFY(w->write(slice_time(clip, b, e)).is_ok());
      }
      QCOMPARE(w->frames(), int64_t{9});
      QVERIFY(w->commit().is_ok());
      auto a = read_clip(whole), b = read_clip(chunked);
      QVERIFY(a.is_ok() && b.is_ok());
      QCOMPARE(max_abs_diff(a->video, b->video), 0.0);
    }
    auto spool = FrameSpool::on_disk(d);
    QVERIFY2(spool.is_ok(), spool.status().to_string().c_str());
    QVERIFY((*spool)->append(slice_time(clip, 0, 4)).is_ok());
    QVERIFY((*spool)->append(slice_time(clip, 4, 9)).is_ok());
    QVERIFY(write_clip(d / "from_spool", **spool).is_ok());
    auto back = read_clip(d / "from_spool"), whole = read_clip(d / "whole_frames");
    QVERIFY(back.is_ok() && whole.is_ok());
    QCOMPARE(max_abs_diff(back->video, whole->video), 0.0);
  }

  // A writer given up before commit() leaves nothing, and frames of another size are refused.
  void abandonedWriterLeavesNothing() {
    const fs::path d = subdir("abandoned");
    const HostTensor clip = level_clip(3, 16, 16);
    for (const char* name : {"clip.mkv", "frames", "one.png"}) {
      {
        auto w = ClipWriter::open(d / name);
        QVERIFY(w.is_ok());
        QVERIFY(w->write(slice_time(clip, 0, 1)).is_ok());
      }
      QVERIFY2(list_dir(d).empty(), name);
    }
    {
      auto w = ClipWriter::open(d / "clip.mkv");
      QVERIFY(w.is_ok() && w->write(clip).is_ok());
      QVERIFY(!w->write(level_clip(1, 16, 24)).is_ok());
      QVERIFY(!w->commit().is_ok());  // a failed write fails everything after it
      auto one = ClipWriter::open(d / "one.png");
      QVERIFY(one.is_ok() && !one->write(clip).is_ok());  // one image, three frames
      auto empty = ClipWriter::open(d / "empty.mkv");
      QVERIFY(empty.is_ok() && !empty->commit().is_ok());  // nothing written
    }
    QVERIFY(list_dir(d).empty());
  }

  // FrameSpool keeps frames in memory or in an unnamed temporary file: reads give back exactly
  // what was appended, in any pieces; a mismatched size or a range outside is refused.
  void frameSpools() {
    const fs::path d = subdir("spool");
    const HostTensor clip = make_sample_clip(20, 12, 7, 5);
    auto disk = FrameSpool::on_disk(d);
    QVERIFY(disk.is_ok());
    QVERIFY(list_dir(d).empty());  // unlinked at once: nothing to leave behind
    for (const std::shared_ptr<FrameSpool>& s : {FrameSpool::in_memory(), *disk}) {
      QCOMPARE(s->frames(), int64_t{0});
      QVERIFY(s->append(slice_time(clip, 0, 3)).is_ok());
      QVERIFY(s->append(slice_time(clip, 3, 7)).is_ok());
      QVERIFY(s->append(slice_time(clip, 7, 7)).is_ok());  // no frames: nothing
      QCOMPARE(s->shape(), clip.shape());
      QCOMPARE(s->bytes(), clip.nbytes());
      auto all = s->read_all();
      QVERIFY(all.is_ok());
      QCOMPARE(max_abs_diff(*all, clip), 0.0);
      auto mid = s->read(2, 3);
      QVERIFY(mid.is_ok());
      QCOMPARE(max_abs_diff(*mid, slice_time(clip, 2, 5)), 0.0);
      QVERIFY(!s->read(5, 3).is_ok());
      QVERIFY(!s->read(-1, 1).is_ok());
      QVERIFY(!s->append(make_sample_clip(20, 14, 1)).is_ok());
      QCOMPARE(s->frames(), int64_t{7});
    }
    QVERIFY((*disk)->on_disk() && !FrameSpool::in_memory()->on_disk());
    QVERIFY(!FrameSpool::on_disk(d / "missing").is_ok());
    QVERIFY(!FrameSpool::on_disk(d, DType::kBF16).is_ok());
    // fp16 storage: half the bytes, each value within fp16's rounding (2^-11 relative).
    auto half = FrameSpool::on_disk(d, DType::kF16);
    QVERIFY(half.is_ok() && (*half)->append(clip).is_ok());
    QCOMPARE((*half)->bytes(), clip.nbytes() / 2);
    auto back = (*half)->read_all();
    QVERIFY(back.is_ok());
    QVERIFY(max_abs_diff(*back, clip) <= 1.0 / 2048);
    QCOMPARE(max_abs_diff(*back, clip.to(DType::kF16).to(DType::kF32)), 0.0);
  }

  void oddSizesAndOverwrite() {
    const fs::path d = subdir("odd");
    const HostTensor a = make_sample_clip(63, 37, 5, 4);
    // Every form keeps odd sizes exactly (4:4:4 chroma where the codec's usual one is 4:2:0).
    QVERIFY(write_clip(d / "odd.avi", a, {}).is_ok());
    auto avi = read_clip(d / "odd.avi");
    QVERIFY2(avi.is_ok(), avi.status().to_string().c_str());
    QCOMPARE(avi->video.shape(), a.shape());
    QVERIFY(write_clip(d / "odd.mkv", a, {}).is_ok());
    auto mkv = read_clip(d / "odd.mkv");
    QVERIFY2(mkv.is_ok(), mkv.status().to_string().c_str());
    QCOMPARE(mkv->video.shape(), a.shape());
    QVERIFY(max_abs_diff(mkv->video, a) <= 1.0 / 255 + 1e-6);  // FFV1: lossless
    QVERIFY(stored_size_note(d / "odd.mkv", 63, 37).empty());
    QVERIFY(write_clip(d / "odd.mp4", a, {}).is_ok());
    auto mp4 = read_clip(d / "odd.mp4");
    QVERIFY2(mp4.is_ok(), mp4.status().to_string().c_str());
    QCOMPARE(mp4->video.shape(), a.shape());
    QVERIFY(compare_clips(mp4->video, a)->psnr_db > 30.0);
    // Overwriting an existing file replaces it.
    const HostTensor b = make_sample_clip(64, 38, 9, 5);
    QVERIFY(write_clip(d / "odd.mp4", b, {}).is_ok());
    QCOMPARE(probe(d / "odd.mp4")->frame_count, int64_t{9});
    QCOMPARE(list_dir(d), (std::set<std::string>{"odd.avi", "odd.mkv", "odd.mp4"}));
  }

  void pngSequenceRoundTripIsExact() {
    const fs::path d = subdir("png");
    const HostTensor clip = level_clip(5, 12, 20);
    const Status st = write_clip(d / "frames", clip, {});
    QVERIFY2(st.is_ok(), st.to_string().c_str());
    QCOMPARE(list_dir(d), (std::set<std::string>{"frames"}));
    QCOMPARE(list_dir(d / "frames"),
             (std::set<std::string>{"frame_00000.png", "frame_00001.png", "frame_00002.png",
                                    "frame_00003.png", "frame_00004.png"}));
    auto info = probe(d / "frames");
    QVERIFY2(info.is_ok(), info.status().to_string().c_str());
    QCOMPARE(info->frame_count, int64_t{5});
    QCOMPARE(info->width, 20);
    QCOMPARE(info->height, 12);
    QCOMPARE(info->source_kind, std::string("images"));
    auto back = read_clip(d / "frames");
    QVERIFY2(back.is_ok(), back.status().to_string().c_str());
    QCOMPARE(back->video.shape(), clip.shape());
    QVERIFY(max_abs_diff(back->video, clip) < 1e-6);  // exact levels survive exactly

    // Arbitrary values: within half a level.
    const HostTensor smooth = make_sample_clip(33, 17, 3, 6);
    QVERIFY(write_clip(d / "smooth/", smooth, {}).is_ok());  // trailing '/' names a directory
    QVERIFY(fs::is_directory(d / "smooth"));
    auto back2 = read_clip(d / "smooth");
    QVERIFY(back2.is_ok());
    QVERIFY(max_abs_diff(back2->video, smooth) <= 1.0 / 255 + 1e-6);

    // Rewriting a previous PNG output replaces it entirely (3 frames, then 2).
    QVERIFY(write_clip(d / "smooth", level_clip(2, 17, 33), {}).is_ok());
    QCOMPARE(list_dir(d / "smooth"), (std::set<std::string>{"frame_00000.png", "frame_00001.png"}));
    QCOMPARE(list_dir(d), (std::set<std::string>{"frames", "smooth"}));
  }

  void pngColoursAreRgb() {
    const fs::path d = subdir("pngrgb");
    // Written by Qt (independent of OpenCV): a pure red image must read back with R high.
    QImage red(10, 6, QImage::Format_RGB888);
    red.fill(QColor(255, 0, 0));
    QVERIFY(red.save(QString::fromStdString((d / "red.png").string())));
    auto r = read_clip(d / "red.png");
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    QCOMPARE(r->video.shape(), (Shape{1, 3, 1, 6, 10}));
    QVERIFY(std::abs(frame_mean(r->video, 0, 0) - 1.0) < 1e-6);
    QVERIFY(std::abs(frame_mean(r->video, 1, 0) + 1.0) < 1e-6);
    QVERIFY(std::abs(frame_mean(r->video, 2, 0) + 1.0) < 1e-6);

    // Written by us, read by Qt: frame 0 pure red, frame 1 (R, G, B) = (10, 128, 250).
    const HostTensor clip = clip_from(2, 4, 5, [](int64_t c, int64_t t, int64_t, int64_t) {
      if (t == 0) return c == 0 ? 1.0f : -1.0f;
      const int lv[3] = {10, 128, 250};
      return level(lv[c]);
    });
    QVERIFY(write_clip(d / "seq", clip, {}).is_ok());
    QImage f0(QString::fromStdString((d / "seq" / "frame_00000.png").string()));
    QImage f1(QString::fromStdString((d / "seq" / "frame_00001.png").string()));
    QVERIFY(!f0.isNull() && !f1.isNull());
    QCOMPARE(f0.pixelColor(2, 1), QColor(255, 0, 0));
    QCOMPARE(f1.pixelColor(3, 3), QColor(10, 128, 250));

    // A single-frame clip to a .png name is one image file.
    QVERIFY(write_clip(d / "one.png", frames_of(clip, {1}), {}).is_ok());
    QImage one(QString::fromStdString((d / "one.png").string()));
    QCOMPARE(one.size(), QSize(5, 4));
    QCOMPARE(one.pixelColor(0, 0), QColor(10, 128, 250));
    QCOMPARE(list_dir(d), (std::set<std::string>{"red.png", "seq", "one.png"}));
  }

  void sixteenBitPngKeepsPrecision() {
    const fs::path d = subdir("png16");
    QImage img(4, 3, QImage::Format_RGBX64);
    img.fill(QColor::fromRgba64(1000, 30000, 65535));
    QVERIFY(img.save(QString::fromStdString((d / "deep.png").string())));
    auto r = read_clip(d / "deep.png");
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    QVERIFY(std::abs(at(r->video, 0, 0, 1, 1) - (1000.0 / 65535 * 2 - 1)) < 1e-6);
    QVERIFY(std::abs(at(r->video, 1, 0, 1, 1) - (30000.0 / 65535 * 2 - 1)) < 1e-6);
    QVERIFY(std::abs(at(r->video, 2, 0, 1, 1) - 1.0) < 1e-6);
  }

  void frameSelection_data() {
    QTest::addColumn<qint64>("first");
    QTest::addColumn<qint64>("maxFrames");
    QTest::addColumn<int>("stride");
    QTest::addColumn<QList<qint64>>("expected");
    QTest::newRow("all") << qint64(0) << qint64(-1) << 1
                         << QList<qint64>{0,  1,  2,  3,  4,  5,  6,  7,  8,  9,
                                          10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    QTest::newRow("first 3, stride 4, max 3")
        << qint64(3) << qint64(3) << 4 << QList<qint64>{3, 7, 11};
    QTest::newRow("first 2, stride 5")
        << qint64(2) << qint64(-1) << 5 << QList<qint64>{2, 7, 12, 17};
    QTest::newRow("max 1") << qint64(0) << qint64(1) << 1 << QList<qint64>{0};
    QTest::newRow("last frame") << qint64(19) << qint64(-1) << 3 << QList<qint64>{19};
    QTest::newRow("stride past end") << qint64(5) << qint64(10) << 100 << QList<qint64>{5};
    QTest::newRow("max beyond count")
        << qint64(15) << qint64(50) << 1 << QList<qint64>{15, 16, 17, 18, 19};
  }

  void frameSelection() {
    QFETCH(qint64, first);
    QFETCH(qint64, maxFrames);
    QFETCH(int, stride);
    QFETCH(QList<qint64>, expected);
    // 20 frames; frame i has R = level 12 i, G = level 255 - 12 i, B = level 7 i.
    const fs::path d = dir() / "indexed";
    if (!fs::exists(d)) {
      fs::create_directories(d.parent_path());
      const HostTensor clip = clip_from(20, 6, 8, [](int64_t c, int64_t t, int64_t, int64_t) {
        const int v = c == 0   ? 12 * static_cast<int>(t)
                      : c == 1 ? 255 - 12 * static_cast<int>(t)
                               : 7 * static_cast<int>(t);
        return level(v);
      });
      QVERIFY(write_clip(d, clip, {}).is_ok());
    }
    ReadOptions o;
    o.first_frame = first;
    o.max_frames = maxFrames;
    o.stride = stride;
    auto r = read_clip(d, o);
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    QCOMPARE(r->video.shape(), (Shape{1, 3, expected.size(), 6, 8}));
    QVERIFY(std::abs(r->fps - 24.0 / stride) < 1e-9);
    for (qsizetype k = 0; k < expected.size(); ++k) {
      const int i = static_cast<int>(expected[k]);
      QCOMPARE(at(r->video, 0, k, 3, 4), level(12 * i));
      QCOMPARE(at(r->video, 1, k, 0, 0), level(255 - 12 * i));
      QCOMPARE(at(r->video, 2, k, 5, 7), level(7 * i));
    }
  }

  void frameSelectionOnVideo() {
    const fs::path d = subdir("mp4sel");
    QVERIFY(write_clip(d / "c.mp4", make_sample_clip(48, 32, 20, 7), WriteOptions{30}).is_ok());
    auto all = read_clip(d / "c.mp4");
    QVERIFY2(all.is_ok(), all.status().to_string().c_str());
    QCOMPARE(all->video.shape().t(), int64_t{20});
    ReadOptions o;
    o.first_frame = 3;
    o.stride = 4;
    o.max_frames = 3;
    auto part = read_clip(d / "c.mp4", o);
    QVERIFY2(part.is_ok(), part.status().to_string().c_str());
    QCOMPARE(part->video.shape().t(), int64_t{3});
    QVERIFY(std::abs(part->fps - 7.5) < 0.01);
    QCOMPARE(max_abs_diff(part->video, frames_of(all->video, {3, 7, 11})), 0.0);

    o = ReadOptions{};
    o.first_frame = 18;
    o.stride = 5;
    auto tail = read_clip(d / "c.mp4", o);
    QVERIFY(tail.is_ok());
    QCOMPARE(max_abs_diff(tail->video, frames_of(all->video, {18})), 0.0);

    o.first_frame = 20;
    auto past = read_clip(d / "c.mp4", o);
    QVERIFY(!past.is_ok());
    QCOMPARE(past.status().code(), StatusCode::kInvalidArgument);
    QVERIFY2(past.status().message().find("beyond the end") != std::string::npos &&
                 past.status().message().find("20 frames") != std::string::npos,
             past.status().message().c_str());
  }

  void optionValidation() {
    const fs::path d = subdir("opts");
    QVERIFY(write_clip(d / "seq", level_clip(3, 4, 4), {}).is_ok());
    auto check = [&](ReadOptions o, const char* word) {
      auto r = read_clip(d / "seq", o);
      QVERIFY(!r.is_ok());
      QCOMPARE(r.status().code(), StatusCode::kInvalidArgument);
      QVERIFY2(r.status().message().find(word) != std::string::npos, r.status().message().c_str());
    };
    ReadOptions o;
    o.stride = 0;
    check(o, "stride");
    o = {};
    o.stride = -3;
    check(o, "stride");
    o = {};
    o.first_frame = -1;
    check(o, "first_frame");
    o = {};
    o.max_frames = 0;
    check(o, "max_frames");
    o = {};
    o.first_frame = 3;
    check(o, "beyond the end");
    o = {};
    o.resize_width = -2;
    check(o, "resize");
  }

  void resize() {
    const fs::path d = subdir("resize");
    QVERIFY(write_clip(d / "c.mkv", make_sample_clip(96, 64, 4, 8), {}).is_ok());
    ReadOptions o;
    o.resize_width = 48;
    o.resize_height = 32;
    auto a = read_clip(d / "c.mkv", o);
    QVERIFY2(a.is_ok(), a.status().to_string().c_str());
    QCOMPARE(a->video.shape(), (Shape{1, 3, 4, 32, 48}));
    o.resize_height = 0;  // keep the aspect ratio
    auto b = read_clip(d / "c.mkv", o);
    QVERIFY(b.is_ok());
    QCOMPARE(b->video.shape(), (Shape{1, 3, 4, 32, 48}));
    QCOMPARE(max_abs_diff(a->video, b->video), 0.0);
    o = {};
    o.resize_height = 128;  // enlarging
    auto c = read_clip(d / "c.mkv", o);
    QVERIFY(c.is_ok());
    QCOMPARE(c->video.shape(), (Shape{1, 3, 4, 128, 192}));
    for (float v : c->video.f32()) QVERIFY(v >= -1.0f && v <= 1.0f);
    // A downscaled flat clip stays flat (INTER_AREA averages).
    QVERIFY(write_clip(
                d / "flat",
                clip_from(1, 8, 8, [](int64_t, int64_t, int64_t, int64_t) { return level(100); }),
                {})
                .is_ok());
    o = {};
    o.resize_width = 3;
    o.resize_height = 5;
    auto f = read_clip(d / "flat", o);
    QVERIFY(f.is_ok());
    QCOMPARE(f->video.shape(), (Shape{1, 3, 1, 5, 3}));
    for (float v : f->video.f32()) QVERIFY(std::abs(v - level(100)) < 1e-6);
  }

  void patternAndNaturalOrder() {
    const fs::path d = subdir("pattern");
    const HostTensor clip = level_clip(4, 5, 6);
    QVERIFY(write_clip(d / "frames", clip, {}).is_ok());
    auto viaPattern = read_clip(d / "frames" / "frame_%05d.png");
    QVERIFY2(viaPattern.is_ok(), viaPattern.status().to_string().c_str());
    QVERIFY(max_abs_diff(viaPattern->video, clip) < 1e-6);
    auto info = probe(d / "frames" / "frame_%05d.png");
    QVERIFY(info.is_ok());
    QCOMPARE(info->frame_count, int64_t{4});
    // %d formats no zero padding: it matches none of frame_00000.png ...
    auto none = read_clip(d / "frames" / "frame_%d.png");
    QVERIFY(!none.is_ok());
    QCOMPARE(none.status().code(), StatusCode::kNotFound);

    // Directory order is natural: f1, f2, f10 (not f1, f10, f2); pattern f%d.png gives the same.
    const fs::path n = subdir("natural");
    const int levels[3] = {10, 20, 100};
    const char* names[3] = {"f1.png", "f2.png", "f10.png"};
    for (int i = 0; i < 3; ++i) {
      QImage img(3, 2, QImage::Format_RGB888);
      img.fill(QColor(levels[i], 0, 0));
      QVERIFY(img.save(QString::fromStdString((n / names[i]).string())));
    }
    write_bytes(n / "notes.txt", "not an image");  // ignored: not an image extension
    for (const fs::path& src : {n, n / "f%d.png"}) {
      auto r = read_clip(src);
      QVERIFY2(r.is_ok(), r.status().to_string().c_str());
      QCOMPARE(r->video.shape().t(), int64_t{3});
      for (int i = 0; i < 3; ++i) QCOMPARE(at(r->video, 0, i, 1, 1), level(levels[i]));
    }
  }

  void otherDtypesAreWritten() {
    const fs::path d = subdir("dtype");
    const HostTensor clip = level_clip(2, 4, 6);
    QVERIFY(write_clip(d / "bf16", clip.to(DType::kBF16), {}).is_ok());
    auto r = read_clip(d / "bf16");
    QVERIFY(r.is_ok());
    QVERIFY(max_abs_diff(r->video, clip) <= 1.0 / 255 + 1e-6);
    // Out-of-range and NaN values are clamped: 5 -> 255, -7 -> 0, NaN -> 0.
    HostTensor wild = clip_from(1, 1, 3, [](int64_t, int64_t, int64_t, int64_t x) {
      return x == 0 ? 5.0f : x == 1 ? -7.0f : NAN;
    });
    QVERIFY(write_clip(d / "wild", wild, {}).is_ok());
    auto w = read_clip(d / "wild");
    QVERIFY(w.is_ok());
    QCOMPARE(at(w->video, 0, 0, 0, 0), 1.0f);
    QCOMPARE(at(w->video, 0, 0, 0, 1), -1.0f);
    QCOMPARE(at(w->video, 0, 0, 0, 2), -1.0f);
  }

  void cancellation() {
    const fs::path d = subdir("cancel");
    QVERIFY(write_clip(d / "c.mp4", make_sample_clip(32, 32, 5), {}).is_ok());
    CancelToken token;
    token.request();
    auto r = read_clip(d / "c.mp4", {}, &token);
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kCancelled);
    auto p = probe(d / "c.mp4", &token);
    QCOMPARE(p.status().code(), StatusCode::kCancelled);
    for (const char* name : {"x.mp4", "x.mkv", "frames"}) {
      const Status st = write_clip(d / name, make_sample_clip(32, 32, 5), {}, &token);
      QCOMPARE(st.code(), StatusCode::kCancelled);
    }
    QCOMPARE(list_dir(d), (std::set<std::string>{"c.mp4"}));  // cancelled writes leave nothing
  }
};

QTEST_GUILESS_MAIN(TestVideoIo)
#include "tst_video_io.moc"
