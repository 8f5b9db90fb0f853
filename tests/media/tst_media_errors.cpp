// seedvae_media on hostile input and failed writes: every case returns a non-OK Status with the
// expected code and a message naming the problem (and the path), never crashes, aborts or hangs;
// writes are atomic (nothing is left behind on failure, no temporaries after success).
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <set>
#include <string>

#ifdef __unix__
#include <sys/stat.h>
#include <sys/types.h>
#endif

#include "core/media/sample_clip.h"
#include "core/media/video_io.h"
#include "tests/media/media_test_util.h"

using namespace seedvae;
using namespace seedvae::media;
using namespace seedvae::test;
namespace fs = std::filesystem;

Q_DECLARE_METATYPE(seedvae::StatusCode)

class TestMediaErrors : public QObject {
  Q_OBJECT

 private:
  TempTree tmp_;
  fs::path dir() const { return tmp_.dir(); }
  fs::path subdir(const std::string& name) const { return tmp_.subdir(name); }
  fs::path valid_mp4_;
  fs::path valid_avi_;
  fs::path valid_mkv_;

  static bool has_word(const Status& s, const std::string& word) {
    return s.message().find(word) != std::string::npos;
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const fs::path d = subdir("valid");
    const HostTensor clip = make_sample_clip(64, 48, 9, 11);
    valid_mp4_ = d / "valid.mp4";
    valid_avi_ = d / "valid.avi";
    valid_mkv_ = d / "valid.mkv";
    QVERIFY(write_clip(valid_mp4_, clip, {}).is_ok());
    QVERIFY(write_clip(valid_avi_, clip, {}).is_ok());
    QVERIFY(write_clip(valid_mkv_, clip, {}).is_ok());
    QVERIFY(fs::file_size(valid_mp4_) > 1024);
  }

  // Each row: a source made by `kind`, the expected code, a word of the message.
  void hostileInput_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<seedvae::StatusCode>("code");
    QTest::addColumn<QString>("word");
    QTest::newRow("missing file") << "missing" << StatusCode::kNotFound << "no such file";
    QTest::newRow("missing directory in path")
        << "missing-dir" << StatusCode::kNotFound << "no such file";
    QTest::newRow("text renamed .mp4") << "text-mp4" << StatusCode::kCorruptData << "cannot open";
    QTest::newRow("empty .mp4") << "empty-mp4" << StatusCode::kCorruptData << "empty";
    QTest::newRow("truncated mp4 (1 KB)") << "truncated-mp4" << StatusCode::kCorruptData << "";
    QTest::newRow("random bytes .avi") << "random-avi" << StatusCode::kCorruptData << "";
    QTest::newRow("directory without images")
        << "empty-dir" << StatusCode::kNotFound << "contains no image files";
    QTest::newRow("directory of non-images")
        << "text-dir" << StatusCode::kNotFound << "contains no image files";
    QTest::newRow("inconsistent frame sizes")
        << "mixed-sizes" << StatusCode::kCorruptData << "same size";
    QTest::newRow("text renamed .png in sequence")
        << "bad-png-in-seq" << StatusCode::kCorruptData << "cannot decode image";
    QTest::newRow("empty .png") << "empty-png" << StatusCode::kCorruptData << "empty";
    QTest::newRow("truncated png") << "truncated-png" << StatusCode::kCorruptData << "";
    QTest::newRow("pattern without matches")
        << "pattern-none" << StatusCode::kNotFound << "matches";
    QTest::newRow("pattern in missing directory")
        << "pattern-nodir" << StatusCode::kNotFound << "does not exist";
#ifdef __unix__
    QTest::newRow("FIFO named .mp4") << "fifo" << StatusCode::kIoError << "not a regular file";
#endif
  }

  void hostileInput() {
    QFETCH(QString, kind);
    QFETCH(seedvae::StatusCode, code);
    QFETCH(QString, word);
    const fs::path d = subdir("hostile-" + kind.toStdString());
    fs::path src;
    const std::string k = kind.toStdString();
    if (k == "missing") {
      src = d / "nothing_here.mp4";
    } else if (k == "missing-dir") {
      src = d / "no" / "such" / "dir";
    } else if (k == "text-mp4") {
      src = d / "notes.mp4";
      write_bytes(src, "This is a text file, not a video.\nIt only has the right extension.\n");
    } else if (k == "empty-mp4") {
      src = d / "empty.mp4";
      write_bytes(src, QByteArray());
    } else if (k == "truncated-mp4") {
      src = d / "truncated.mp4";
      write_bytes(src, read_bytes(valid_mp4_).left(1024));
    } else if (k == "random-avi") {
      src = d / "noise.avi";
      QByteArray b;
      uint32_t s = 12345;
      for (int i = 0; i < 20000; ++i) {
        s = s * 1664525u + 1013904223u;
        b.append(static_cast<char>(s >> 24));
      }
      write_bytes(src, b);
    } else if (k == "empty-dir") {
      src = d;
    } else if (k == "text-dir") {
      write_bytes(d / "readme.txt", "hello");
      fs::create_directories(d / "sub.png");  // a directory with an image-like name is skipped
      src = d;
    } else if (k == "mixed-sizes") {
      QVERIFY(write_clip(d / "a.png", make_sample_clip(16, 8, 1), {}).is_ok());
      QVERIFY(write_clip(d / "b.png", make_sample_clip(16, 8, 1), {}).is_ok());
      QVERIFY(write_clip(d / "c.png", make_sample_clip(12, 8, 1), {}).is_ok());
      src = d;
    } else if (k == "bad-png-in-seq") {
      QVERIFY(write_clip(d / "a.png", make_sample_clip(16, 8, 1), {}).is_ok());
      write_bytes(d / "b.png", "definitely not a PNG");
      src = d;
    } else if (k == "empty-png") {
      src = d / "empty.png";
      write_bytes(src, QByteArray());
    } else if (k == "truncated-png") {
      QVERIFY(write_clip(d / "full.png", make_sample_clip(64, 64, 1), {}).is_ok());
      src = d / "cut.png";
      write_bytes(src, read_bytes(d / "full.png").left(100));
      fs::remove(d / "full.png");
    } else if (k == "pattern-none") {
      src = d / "img_%04d.png";
    } else if (k == "pattern-nodir") {
      src = d / "nope" / "img_%04d.png";
#ifdef __unix__
    } else if (k == "fifo") {
      src = d / "pipe.mp4";
      QCOMPARE(::mkfifo(src.c_str(), 0600), 0);
#endif
    }

    auto r = read_clip(src);
    QVERIFY(!r.is_ok());
    qInfo("%s", r.status().to_string().c_str());
    QCOMPARE(r.status().code(), code);
    QVERIFY2(has_word(r.status(), word.toStdString()), r.status().message().c_str());
    QVERIFY2(!r.status().message().empty(), "empty message");
    if (k != "pattern-nodir" && k != "mixed-sizes" && k != "bad-png-in-seq") {
      QVERIFY2(has_word(r.status(), src.filename().string()), r.status().message().c_str());
    }
    auto p = probe(src);
    QVERIFY(!p.is_ok());
    QCOMPARE(p.status().code(), code);
  }

  // Truncations and bit flips of valid files of every container: OK with at most the original
  // frames, or an error; never a crash or a hang.
  void damagedFilesNeverCrash() {
    const fs::path d = subdir("damaged");
    int ok = 0, failed = 0;
    for (const fs::path& valid : {valid_mp4_, valid_avi_, valid_mkv_}) {
      const QByteArray bytes = read_bytes(valid);
      const auto n = bytes.size();
      for (double frac : {0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99}) {
        const fs::path f = d / ("cut" + valid.extension().string());
        write_bytes(f, bytes.left(static_cast<qsizetype>(static_cast<double>(n) * frac)));
        auto r = read_clip(f);
        if (r.is_ok()) {
          QVERIFY(r->video.shape().t() >= 1 && r->video.shape().t() <= 9);
          ++ok;
        } else {
          QVERIFY(!r.status().message().empty());
          ++failed;
        }
        (void)probe(f);
      }
      for (int flip = 0; flip < 8; ++flip) {
        QByteArray b = bytes;
        uint32_t s = 777u + static_cast<uint32_t>(flip);
        for (int i = 0; i < 40; ++i) {
          s = s * 1664525u + 1013904223u;
          b[static_cast<qsizetype>(s % static_cast<uint32_t>(n))] ^=
              static_cast<char>(1 << (s >> 29));
        }
        const fs::path f = d / ("flip" + valid.extension().string());
        write_bytes(f, b);
        auto r = read_clip(f);
        if (r.is_ok()) {
          QVERIFY(r->video.shape().t() >= 1);
          ++ok;
        } else {
          ++failed;
        }
      }
    }
    qInfo("damaged files: %d decoded partially, %d rejected", ok, failed);
  }

  void writeIntoMissingDirectoryLeavesNothing() {
    const fs::path d = subdir("nodir");
    const HostTensor clip = make_sample_clip(16, 16, 2);
    for (const char* name : {"clip.mp4", "clip.avi", "clip.mkv", "frames", "one.png"}) {
      const HostTensor& v = std::string(name) == "one.png" ? make_sample_clip(16, 16, 1) : clip;
      const Status st = write_clip(d / "missing" / name, v, {});
      QVERIFY(!st.is_ok());
      QCOMPARE(st.code(), StatusCode::kNotFound);
      QVERIFY2(has_word(st, "no such directory"), st.message().c_str());
    }
    QVERIFY(list_dir(d).empty());
    QVERIFY(!fs::exists(d / "missing"));
  }

  void successfulWritesLeaveNoTemporaries() {
    const fs::path d = subdir("clean");
    const HostTensor clip = make_sample_clip(24, 16, 3);
    for (const char* name : {"a.mp4", "b.mov", "c.avi", "d.mkv", "e", "f.out/", "g.png"}) {
      const HostTensor v = std::string(name) == "g.png" ? make_sample_clip(24, 16, 1) : clip;
      const Status st = write_clip(d / name, v, {});
      QVERIFY2(st.is_ok(), st.to_string().c_str());
    }
    QCOMPARE(list_dir(d),
             (std::set<std::string>{"a.mp4", "b.mov", "c.avi", "d.mkv", "e", "f.out", "g.png"}));
    QVERIFY(fs::is_directory(d / "f.out"));  // a trailing '/': a PNG directory, whatever the name
    QCOMPARE(list_dir(d / "e").size(), size_t{3});
    // An unknown extension is refused (listing the known ones), not taken for a directory name.
    const Status xyz = write_clip(d / "h.xyz", clip, {});
    QCOMPARE(xyz.code(), StatusCode::kInvalidArgument);
    QVERIFY2(has_word(xyz, ".xyz") && has_word(xyz, ".mp4") && has_word(xyz, ".png"),
             xyz.message().c_str());
    QVERIFY(media::check_clip_destination(d / "h.xyz").code() == StatusCode::kInvalidArgument);
    QVERIFY(media::check_clip_destination(d / "h.mkv").is_ok());
    QVERIFY(!fs::exists(d / "h.xyz"));
  }

  void failedCommitLeavesNothing() {
    // The destination is an existing directory: the rename onto it fails after encoding.
    const fs::path d = subdir("commit");
    fs::create_directories(d / "taken.mp4");
    write_bytes(d / "taken.mp4" / "keep.txt", "user data");
    const Status st = write_clip(d / "taken.mp4", make_sample_clip(16, 16, 2), {});
    QVERIFY(!st.is_ok());
    QCOMPARE(st.code(), StatusCode::kIoError);
    QCOMPARE(list_dir(d), (std::set<std::string>{"taken.mp4"}));
    QCOMPARE(list_dir(d / "taken.mp4"), (std::set<std::string>{"keep.txt"}));
  }

  void refusesToReplaceForeignDirectory() {
    const fs::path d = subdir("foreign");
    fs::create_directories(d / "out");
    write_bytes(d / "out" / "holiday.jpg", "precious");
    const Status st = write_clip(d / "out", make_sample_clip(8, 8, 2), {});
    QCOMPARE(st.code(), StatusCode::kInvalidArgument);
    QVERIFY2(has_word(st, "refusing"), st.message().c_str());
    QCOMPARE(list_dir(d / "out"), (std::set<std::string>{"holiday.jpg"}));
    QCOMPARE(list_dir(d), (std::set<std::string>{"out"}));
    // An existing empty directory is fine.
    fs::create_directories(d / "empty");
    QVERIFY(write_clip(d / "empty", make_sample_clip(8, 8, 2), {}).is_ok());
    QCOMPARE(list_dir(d / "empty").size(), size_t{2});
    QCOMPARE(list_dir(d), (std::set<std::string>{"out", "empty"}));
  }

  void writerThatCannotOpen() {
    // x264 codes frames up to 16384 pixels wide: the encoder does not open.
    const fs::path d = subdir("refused");
    const HostTensor wide(DType::kF32, Shape{1, 3, 1, 2, 20000});
    const Status st = write_clip(d / "wide.mp4", wide, {});
    QVERIFY(!st.is_ok());
    QCOMPARE(st.code(), StatusCode::kUnsupported);
    QVERIFY2(has_word(st, "cannot open the libx264 encoder") && has_word(st, "wide.mp4"),
             st.message().c_str());
    QVERIFY(list_dir(d).empty());
  }

  void badWriteArguments_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("what");
    QTest::addColumn<seedvae::StatusCode>("code");
    QTest::addColumn<QString>("word");
    QTest::newRow("rank 4") << "a.mp4" << 0 << StatusCode::kInvalidArgument << "[1, 3, T, H, W]";
    QTest::newRow("4 channels") << "a.mp4" << 1 << StatusCode::kInvalidArgument
                                << "[1, 3, T, H, W]";
    QTest::newRow("batch 2") << "a.mp4" << 2 << StatusCode::kInvalidArgument << "[1, 3, T, H, W]";
    QTest::newRow("zero frames") << "a.mp4" << 3 << StatusCode::kInvalidArgument << "empty clip";
    QTest::newRow("fps 0") << "a.mp4" << 4 << StatusCode::kInvalidArgument << "fps";
    QTest::newRow("fps NaN") << "a.mp4" << 5 << StatusCode::kInvalidArgument << "fps";
    QTest::newRow("quality 99") << "a.mp4" << 6 << StatusCode::kInvalidArgument
                                << "crf_like_quality";
    QTest::newRow("webm") << "a.webm" << 7 << StatusCode::kUnsupported << ".webm";
    QTest::newRow("many frames to .png")
        << "a.png" << 7 << StatusCode::kInvalidArgument << "single image";
    QTest::newRow("empty path") << "" << 7 << StatusCode::kInvalidArgument << "no output path";
    QTest::newRow("storage mismatch") << "a.mp4" << 8 << StatusCode::kInvalidArgument << "storage";
  }

  void badWriteArguments() {
    QFETCH(QString, name);
    QFETCH(int, what);
    QFETCH(seedvae::StatusCode, code);
    QFETCH(QString, word);
    const fs::path d = subdir("badargs");
    HostTensor v = make_sample_clip(8, 8, 3);
    WriteOptions o;
    switch (what) {
      case 0: v = HostTensor(DType::kF32, Shape{3, 3, 8, 8}); break;
      case 1: v = HostTensor(DType::kF32, Shape{1, 4, 3, 8, 8}); break;
      case 2: v = HostTensor(DType::kF32, Shape{2, 3, 3, 8, 8}); break;
      case 3: v = HostTensor(DType::kF32, Shape{1, 3, 0, 8, 8}); break;
      case 4: o.fps = 0; break;
      case 5: o.fps = NAN; break;
      case 6: o.crf_like_quality = 99; break;
      case 8:
        v = HostTensor(DType::kF32, Shape{1, 3, int64_t{1} << 62, 8, 8});
        break;  // overflows: no storage
      default: break;
    }
    const fs::path dest = name.isEmpty() ? fs::path() : d / name.toStdString();
    const Status st = write_clip(dest, v, o);
    QVERIFY(!st.is_ok());
    QCOMPARE(st.code(), code);
    QVERIFY2(has_word(st, word.toStdString()), st.message().c_str());
    QVERIFY(list_dir(d).empty());
  }
};

QTEST_GUILESS_MAIN(TestMediaErrors)
#include "tst_media_errors.moc"
