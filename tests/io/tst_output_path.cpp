// core/io/output_path.h and the temporaries of core/base/atomic_file.h: which paths name one file,
// which outputs are refused before a run, and writes that fail whole on a full device.
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/base/atomic_file.h"
#include "core/io/output_path.h"

using namespace seedvae;
namespace fs = std::filesystem;

class TestOutputPath : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  fs::path dir() const { return fs::path(tmp_.path().toStdString()); }
  static void put(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  static std::string get(const fs::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  void sameFileThroughLinks() {
    const fs::path a = dir() / "a.mp4";
    put(a, "video");
    fs::create_symlink(a, dir() / "sym.mp4");
    fs::create_hard_link(a, dir() / "hard.mp4");
    put(dir() / "other.mp4", "video");
    QVERIFY(same_file(a, dir() / "sym.mp4"));
    QVERIFY(same_file(dir() / "sym.mp4", dir() / "hard.mp4"));
    QVERIFY(same_file(a, dir() / "sub" / ".." / "a.mp4"));  // not existing: canonical paths
    QVERIFY(!same_file(a, dir() / "other.mp4"));
    QVERIFY(!same_file(a, dir() / "new.mp4"));
  }

  void outputsThatWouldDestroyAnInputAreRefused() {
    const fs::path w = dir() / "w.safetensors";
    put(w, "weights");
    fs::create_directories(dir() / "frames");
    const PathInput inputs[] = {{w, "weights", false}, {dir() / "frames", "input", true}};
    Status st = check_output_path(dir() / "w.safetensors", inputs);
    QCOMPARE(st.code(), StatusCode::kInvalidArgument);
    QVERIFY2(st.message().find("weights") != std::string::npos, st.message().c_str());
    QCOMPARE(check_output_path(dir() / "frames/", inputs).code(), StatusCode::kInvalidArgument);
    QCOMPARE(check_output_path(dir() / "frames" / "x.mp4", inputs).code(),
             StatusCode::kInvalidArgument);
    QVERIFY(check_output_path(dir() / "out.mp4", inputs).is_ok());
    st = check_output_path(dir() / "missing" / "out.mp4", inputs);
    QCOMPARE(st.code(), StatusCode::kNotFound);
    QVERIFY2(st.message().find("no such directory") != std::string::npos, st.message().c_str());
    for (const auto& e : fs::directory_iterator(dir())) {  // the writability probe is gone
      QVERIFY2(e.path().filename().string().find("probe") == std::string::npos, e.path().c_str());
    }
  }

  // /dev/full fails every write with ENOSPC: the error names the path and the reason.
  void aFullDeviceIsAnIoError() {
#ifdef Q_OS_LINUX
    if (!fs::exists("/dev/full")) QSKIP("no /dev/full");
    const std::string data(1 << 16, 'x');
    const Status st = write_file("/dev/full", std::as_bytes(std::span<const char>(data)));
    QCOMPARE(st.code(), StatusCode::kIoError);
    QVERIFY2(st.message().find("/dev/full") != std::string::npos, st.message().c_str());
    QVERIFY2(st.message().find("No space left") != std::string::npos, st.message().c_str());
#else
    QSKIP("/dev/full is Linux-only");
#endif
  }

  void atomicWritesReplaceWholeFiles() {
    const fs::path p = dir() / "report.md";
    put(p, "old");
    QVERIFY(write_file_atomic(p, std::string_view("new")).is_ok());
    QCOMPARE(get(p), std::string("new"));
    // A destination whose directory is gone: refused, nothing left behind.
    QCOMPARE(write_file_atomic(dir() / "gone" / "r.md", std::string_view("x")).code(),
             StatusCode::kIoError);
  }

  // The temporaries of live AtomicFiles are removed on request (the CLI's second signal).
  void liveTemporariesAreRemoved() {
    AtomicFile file(dir() / "clip.mp4");
    put(file.temp_path(), "partial");
    fs::create_directories(dir() / "seq");
    AtomicFile seq(dir() / "seq2");
    fs::create_directories(seq.temp_path());
    put(seq.temp_path() / "frame_00000.png", "png");
    QVERIFY(fs::exists(file.temp_path()) && fs::exists(seq.temp_path()));
    remove_live_temporaries();
    QVERIFY(!fs::exists(file.temp_path()));
    QVERIFY(!fs::exists(seq.temp_path()));
  }
};

QTEST_GUILESS_MAIN(TestOutputPath)
#include "tst_output_path.moc"
