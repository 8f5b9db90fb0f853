// Frame prefetch: the incremental FrameReader, the PrefetchReader thread (bounded queue,
// cancel, errors, shutdown), VideoFrameSource's per-chunk padding and encode_stream(), all against
// the whole-clip path (read_clip -> apply_padding -> encode_video), bit for bit.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <thread>
#include <tuple>

#include "core/cpu/cpu_backend.h"
#include "core/media/prefetch.h"
#include "core/media/sample_clip.h"
#include "core/media/vae_padding.h"
#include "core/media/video_io.h"
#include "core/schedule/streaming.h"
#include "core/vae/state_dict.h"
#include "tests/media/media_test_util.h"
#include "tests/support/tiny_model.h"

using namespace seedvae;
using namespace seedvae::media;
using seedvae::test::clip_from;
namespace fs = std::filesystem;

namespace {

bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

// A clip of T frames whose pixels differ per frame, channel and position (8-bit exact levels).
HostTensor test_clip(int64_t T, int64_t H, int64_t W) {
  return clip_from(T, H, W, [](int64_t c, int64_t t, int64_t y, int64_t x) {
    return seedvae::test::level(static_cast<int>((c * 71 + t * 37 + y * 13 + x * 7) % 256));
  });
}

// Pulls a source with the encoder's chunk sizes and concatenates what it delivers.
Result<HostTensor> drain(FrameSource& src, int64_t first, int64_t rest) {
  std::vector<HostTensor> parts;
  for (int64_t i = 0;; ++i) {
    const int64_t want = i == 0 ? first : rest;
    SEEDVAE_ASSIGN_OR_RETURN(HostTensor c, src.next(want));
    const int64_t k = c.empty() ? 0 : c.shape()[2];
    if (k > 0) parts.push_back(std::move(c));
    if (k < want) break;
  }
  return concat_time(parts);
}

Result<HostTensor> whole_path(const fs::path& dir, const ReadOptions& ro, int multiple,
                              TemporalPad mode, PadPlan* plan) {
  SEEDVAE_ASSIGN_OR_RETURN(Clip clip, read_clip(dir, ro));
  const Shape& s = clip.video.shape();
  *plan = plan_padding(s[2], s[3], s[4], multiple);
  return apply_padding(clip.video, *plan, mode);
}

}  // namespace

class tst_Prefetch : public QObject {
  Q_OBJECT

  // per process, so two runs at once never share files
  fs::path tmp_ = fs::temp_directory_path() /
                  ("seedvae_tst_prefetch_" + std::to_string(QCoreApplication::applicationPid()));
  test::TinyCpuModel tiny_;

  // A PNG directory of T frames of W x H.
  fs::path png_dir(int64_t T, int64_t H, int64_t W) {
    const fs::path d =
        tmp_ / ("clip_" + std::to_string(T) + "_" + std::to_string(H) + "x" + std::to_string(W));
    if (!fs::exists(d)) {
      const Status s = write_clip(d, test_clip(T, H, W));
      if (!s) qFatal("%s", s.to_string().c_str());
    }
    return d;
  }

 private slots:
  void initTestCase() {
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    const Status s = test::make_tiny_cpu_model(tiny_);
    QVERIFY2(s.is_ok(), s.to_string().c_str());
  }
  void cleanupTestCase() { fs::remove_all(tmp_); }

  // FrameReader chunks, concatenated, are read_clip() bit for bit, for any chunk size and options.
  void frameReaderMatchesReadClip() {
    const fs::path dir = png_dir(11, 13, 21);
    std::vector<ReadOptions> opts(4);
    opts[1].first_frame = 2;
    opts[1].stride = 2;
    opts[2].max_frames = 7;
    opts[2].resize_width = 15;  // INTER_AREA shrink, height derived
    opts[3].first_frame = 1;
    opts[3].resize_width = 30;
    opts[3].resize_height = 20;  // INTER_CUBIC enlarge
    for (const ReadOptions& ro : opts) {
      auto whole = read_clip(dir, ro);
      QVERIFY2(whole.is_ok(), whole.status().to_string().c_str());
      for (int64_t n : {1, 3, 5, 100}) {
        auto reader = FrameReader::open(dir, ro);
        QVERIFY2(reader.is_ok(), reader.status().to_string().c_str());
        QCOMPARE(reader->fps(), whole->fps);
        std::vector<HostTensor> parts;
        for (;;) {
          auto c = reader->read(n);
          QVERIFY2(c.is_ok(), c.status().to_string().c_str());
          if (c->empty()) break;
          QVERIFY(c->shape()[2] <= n);
          const bool short_read = c->shape()[2] < n;
          parts.push_back(std::move(*c));
          if (short_read) {
            auto after = reader->read(n);  // exhausted: empty, never an error
            QVERIFY(after.is_ok() && after->empty());
            break;
          }
        }
        auto joined = concat_time(parts);
        QVERIFY(joined.is_ok());
        QVERIFY2(same_bits(*joined, whole->video), qPrintable(QString("n=%1").arg(n)));
      }
    }
    // The same errors as read_clip.
    ReadOptions past;
    past.first_frame = 11;
    QCOMPARE(FrameReader::open(dir, past).status().code(), read_clip(dir, past).status().code());
    QCOMPARE(FrameReader::open(tmp_ / "nope", {}).status().code(), StatusCode::kNotFound);
  }

  // VideoFrameSource (prefetch on and off) delivers apply_padding(read_clip()) chunk by chunk.
  void sourceMatchesWholeClipPadding_data() {
    QTest::addColumn<int>("frames");
    QTest::addColumn<int>("height");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("chunk");  // latents per chunk
    QTest::addColumn<bool>("mirror");
    for (int t : {1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 13, 14}) {
      for (int c : {0, 1, 2}) {
        for (bool m : {true, false}) {
          QTest::addRow("T%d_c%d_%s", t, c, m ? "mirror" : "repeat") << t << 13 << 21 << c << m;
        }
      }
    }
    QTest::addRow("T9_16x8_c1") << 9 << 8 << 16 << 1 << true;
  }
  void sourceMatchesWholeClipPadding() {
    QFETCH(int, frames);
    QFETCH(int, height);
    QFETCH(int, width);
    QFETCH(int, chunk);
    QFETCH(bool, mirror);
    const fs::path dir = png_dir(frames, height, width);
    const TemporalPad mode = mirror ? TemporalPad::kMirror : TemporalPad::kRepeatLast;
    PadPlan want_plan;
    auto want = whole_path(dir, {}, 8, mode, &want_plan);
    QVERIFY2(want.is_ok(), want.status().to_string().c_str());
    const auto [first, rest] = encoder_chunk_frames(chunk);
    for (bool prefetch : {true, false}) {
      for (bool matching : {true, false}) {  // prefetch chunks as asked, or of another size
        if (!prefetch && !matching) continue;
        VideoSourceOptions so;
        so.temporal_pad = mode;
        so.prefetch = prefetch;
        so.first_chunk_frames = matching ? first : 3;
        so.chunk_frames = matching ? rest : 3;
        std::vector<HostTensor> raw;  // every source frame, before padding
        so.on_frames = [&raw](const HostTensor& f) {
          raw.push_back(f);
          return Status::ok();
        };
        auto src = VideoFrameSource::open(dir, so);
        QVERIFY2(src.is_ok(), src.status().to_string().c_str());
        QCOMPARE((*src)->prefetching(), prefetch);
        auto got = drain(**src, first, rest);
        QVERIFY2(got.is_ok(), got.status().to_string().c_str());
        QVERIFY(same_bits(*got, *want));
        QVERIFY((*src)->finished());
        const PadPlan& p = (*src)->plan();
        QCOMPARE(p.frames, want_plan.frames);
        QCOMPARE(p.padded_frames, want_plan.padded_frames);
        QCOMPARE(p.height, want_plan.height);
        QCOMPARE(p.padded_width, want_plan.padded_width);
        auto kept = concat_time(raw);
        auto original = read_clip(dir);
        QVERIFY(kept.is_ok() && original.is_ok() && same_bits(*kept, original->video));
        auto again = (*src)->next(4);
        QVERIFY(again.is_ok() && again->empty());
      }
    }
  }

  // The sample clip as a source: generated chunk by chunk, the same frames and padding as the
  // whole clip padded at once, with and without the prefetch thread.
  void sampleSourceMatchesWholeClip() {
    const HostTensor whole = make_sample_clip(44, 30, 11);
    const PadPlan plan = plan_padding(11, 30, 44, 8);
    auto want = apply_padding(whole, plan, TemporalPad::kMirror);
    QVERIFY(want.is_ok());
    for (bool prefetch : {true, false}) {
      VideoSourceOptions so;
      so.prefetch = prefetch;
      auto src = VideoFrameSource::sample(44, 30, 11, so);
      QVERIFY2(src.is_ok(), src.status().to_string().c_str());
      auto got = drain(**src, 5, 4);
      QVERIFY2(got.is_ok(), got.status().to_string().c_str());
      QVERIFY(same_bits(*got, *want));
      QCOMPARE((*src)->plan().frames, int64_t{11});
      QCOMPARE((*src)->fps(), 24.0);
    }
    QVERIFY(!VideoFrameSource::sample(0, 30, 11, {}).is_ok());
    // Frames [3, 7) of the clip alone are the clip's frames 3..6.
    QVERIFY(same_bits(make_sample_frames(44, 30, 3, 4), slice_time(whole, 3, 7)));
    // Rows generated in parallel (a frame large enough for several threads) give the same bits
    // as frames made one at a time.
    const HostTensor big = make_sample_frames(640, 360, 5, 2, 7);
    QVERIFY(same_bits(slice_time(big, 1, 2), make_sample_frames(640, 360, 6, 1, 7)));
    // A stop is seen between frames: a requested token ends generation with kCancelled, and
    // the producer (the reader thread's) passes it on.
    CancelToken stop;
    QVERIFY(generate_sample_frames(44, 30, 0, 3, &stop).is_ok());
    stop.request();
    QCOMPARE(generate_sample_frames(44, 30, 0, 3, &stop).status().code(), StatusCode::kCancelled);
    QCOMPARE(sample_frames(44, 30, 11)(4, &stop).status().code(), StatusCode::kCancelled);
  }

  // encode_stream over a prefetching source == encode_video over the padded whole clip, bit for
  // bit.
  void encodeStreamBitIdentical_data() {
    QTest::addColumn<int>("frames");
    QTest::addColumn<int>("chunk");
    QTest::addColumn<bool>("mirror");
    for (int t : {5, 7, 9, 11, 14}) {
      for (int c : {0, 1, 2}) QTest::addRow("T%d_c%d", t, c) << t << c << (t % 2 == 1);
    }
  }
  void encodeStreamBitIdentical() {
    QFETCH(int, frames);
    QFETCH(int, chunk);
    QFETCH(bool, mirror);
    const fs::path dir = png_dir(frames, 12, 20);  // pads to 16 x 24
    const TemporalPad mode = mirror ? TemporalPad::kMirror : TemporalPad::kRepeatLast;
    PadPlan plan;
    auto padded = whole_path(dir, {}, 8, mode, &plan);
    QVERIFY(padded.is_ok());
    auto want = encode_video(*tiny_.model, *padded, {chunk});
    QVERIFY2(want.is_ok(), want.status().to_string().c_str());
    VideoSourceOptions so;
    so.temporal_pad = mode;
    std::tie(so.first_chunk_frames, so.chunk_frames) = encoder_chunk_frames(chunk);
    auto src = VideoFrameSource::open(dir, so);
    QVERIFY(src.is_ok());
    int64_t chunks = 0;
    StreamHooks hooks;
    hooks.on_chunk = [&](int64_t, const HostTensor&) {
      ++chunks;
      return Status::ok();
    };
    auto got = encode_stream(*tiny_.model, **src, {chunk}, hooks);
    QVERIFY2(got.is_ok(), got.status().to_string().c_str());
    QVERIFY(same_bits(*got, *want));
    QCOMPARE(chunks,
             static_cast<int64_t>(plan_chunks((plan.padded_frames - 1) / 4 + 1, chunk).size()));
    const PrefetchStats st = (*src)->stats();
    QVERIFY(st.peak_ahead >= 1 && st.peak_ahead <= so.prefetch_depth);
  }

  // A corrupt frame in the middle of an image sequence: an error value at the consumer, no hang.
  void readErrorMidStream() {
    const fs::path dir = tmp_ / "corrupt";
    QVERIFY(write_clip(dir, test_clip(17, 8, 16)).is_ok());
    { std::ofstream(dir / "frame_00010.png", std::ios::binary | std::ios::trunc) << "not a png"; }
    for (bool prefetch : {true, false}) {
      VideoSourceOptions so;
      so.prefetch = prefetch;
      auto src = VideoFrameSource::open(dir, so);
      QVERIFY(src.is_ok());
      auto got = encode_stream(*tiny_.model, **src, {1});
      QVERIFY(!got.is_ok());
      QCOMPARE(got.status().code(), StatusCode::kCorruptData);
      QVERIFY2(got.status().message().find("frame_00010.png") != std::string::npos,
               got.status().to_string().c_str());
      auto again = (*src)->next(4);  // sticky, still no hang
      if (prefetch) QCOMPARE(again.status().code(), StatusCode::kCorruptData);
    }
  }

  // Cancelling mid-stream: kCancelled from encode_stream, and the source (thread) shuts down.
  void cancelMidStream() {
    const fs::path dir = png_dir(21, 8, 16);
    CancelToken cancel;
    VideoSourceOptions so;
    auto src = VideoFrameSource::open(dir, so, &cancel);
    QVERIFY(src.is_ok());
    StreamHooks hooks;
    hooks.cancel = &cancel;
    int chunks = 0;
    hooks.on_chunk = [&](int64_t, const HostTensor&) {
      if (++chunks == 2) cancel.request();
      return Status::ok();
    };
    auto got = encode_stream(*tiny_.model, **src, {1}, hooks);
    QCOMPARE(got.status().code(), StatusCode::kCancelled);
    QCOMPARE(chunks, 2);
    QElapsedTimer t;
    t.start();
    src->reset();  // joins the reader thread
    QVERIFY(t.elapsed() < 5000);
  }

  // The reader never gets more than `depth` chunks ahead of the consumer.
  void queueIsBounded() {
    std::atomic<int> calls{0};
    std::atomic<int> total_frames{0};
    auto produce = [&](int64_t n, const CancelToken* stop) -> Result<HostTensor> {
      ++calls;
      if (stop && stop->requested()) return cancelled();
      const int64_t k = std::min<int64_t>(n, 40 - total_frames.load());
      total_frames += static_cast<int>(k);
      if (k <= 0) return HostTensor{};
      return test_clip(k, 2, 2);
    };
    {
      PrefetchReader pr(produce, 4, 4, 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      QCOMPARE(calls.load(), 2);  // two chunks queued, the reader waits for room
      QCOMPARE(pr.stats().peak_ahead, int64_t{2});
      auto c = pr.next();
      QVERIFY(c.is_ok() && c->shape()[2] == 4);
      QTRY_COMPARE(calls.load(), 3);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      QCOMPARE(calls.load(), 3);
      int64_t got = 4;
      for (;;) {
        auto d = pr.next();
        QVERIFY(d.is_ok());
        if (d->empty()) break;
        got += d->shape()[2];
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      QCOMPARE(got, int64_t{40});
      QVERIFY(pr.stats().peak_ahead <= 2);
    }
    // Destroyed while the reader waits for room, and while it is inside a slow read.
    calls = 0;
    total_frames = 0;
    {
      PrefetchReader pr(produce, 4, 4, 1);
      QTRY_COMPARE(calls.load(), 1);
    }
    std::atomic<bool> in_read{false};
    auto slow = [&](int64_t, const CancelToken* stop) -> Result<HostTensor> {
      in_read = true;
      for (int i = 0; i < 1000; ++i) {  // polls like FrameReader between frames
        if (stop && stop->requested()) return cancelled();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      return HostTensor{};
    };
    QElapsedTimer t;
    t.start();
    {
      PrefetchReader pr(slow, 4, 4, 2);
      QTRY_VERIFY(in_read.load());
    }
    QVERIFY(t.elapsed() < 3000);
    // The caller's cancel token wakes a consumer waiting for a slow reader.
    CancelToken cancel;
    in_read = false;
    {
      PrefetchReader pr(slow, 4, 4, 2, &cancel);
      QTRY_VERIFY(in_read.load());
      std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        cancel.request();
      });
      auto c = pr.next();
      canceller.join();
      QCOMPARE(c.status().code(), StatusCode::kCancelled);
    }
    // A producer error reaches the consumer in order, after the good chunks.
    int n = 0;
    PrefetchReader bad(
        [&](int64_t k, const CancelToken*) -> Result<HostTensor> {
          if (++n == 3) return io_error("disk on fire");
          return test_clip(k, 2, 2);
        },
        4, 4, 3);
    QVERIFY(bad.next().is_ok());
    QVERIFY(bad.next().is_ok());
    auto e = bad.next();
    QCOMPARE(e.status().code(), StatusCode::kIoError);
    QCOMPARE(bad.next().status().code(), StatusCode::kIoError);
  }
};

QTEST_GUILESS_MAIN(tst_Prefetch)
#include "tst_prefetch.moc"
