// The seedvae command line, run as a user would: exit codes, messages, outputs, cancel.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QtTest>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>
#ifdef Q_OS_UNIX
#include <unistd.h>
#endif

#include "core/pipeline/run_options.h"
#include "tests/support/golden.h"
#include "tests/support/run_process.h"

namespace fs = std::filesystem;

class tst_Cli : public QObject {
  Q_OBJECT

  // per process, so two runs of the test (ctest and a manual run) never share files
  fs::path tmp_ = fs::temp_directory_path() /
                  ("seedvae_tst_cli_" + std::to_string(QCoreApplication::applicationPid()));

  using Run = seedvae::test::ProcessRun;
  static Run run(const QStringList& args, int timeout_ms = 300000) {
    return seedvae::test::run_process(QStringLiteral(SEEDVAE_CLI_PATH), args, timeout_ms);
  }
  QString path(const char* name) const { return QString::fromStdString((tmp_ / name).string()); }
  static std::string read_bytes(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  static void write_bytes(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
  }
  static bool no_temporaries(const fs::path& dir) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().filename().string().find(".tmp-") != std::string::npos) return false;
    }
    return true;
  }

 private slots:
  void initTestCase() {
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
  }
  void cleanupTestCase() { fs::remove_all(tmp_); }

  void usageErrorsExitTwo() {
    QCOMPARE(run({}).code, 2);
    QCOMPARE(run({"frobnicate"}).code, 2);
    QCOMPARE(run({"roundtrip", "--chunk", "-3", "--sample-clip"}).code, 2);
    QCOMPARE(run({"encode", "/nonexistent/video.mp4", "-o", path("x.safetensors")}).code, 2);
    // An incompatible combination is refused with a reason, before any work.
    const Run hx = run({"roundtrip", "--sample-clip", "--tiling", "exact", "--hires-chunk", "1"});
    QCOMPARE(hx.code, 3);  // kBadInput, like every invalid option value found after parsing
    QVERIFY2(hx.err.contains("--hires-chunk"), qPrintable(hx.err));
    const Run help = run({"--help"});
    QCOMPARE(help.code, 0);
    QVERIFY(help.out.contains("Exit codes"));
  }

  // One options table: every run option is a flag of `roundtrip` (a default-true switch with its
  // --no- form too), and `roundtrip` has no option flag of its own besides its input, output and
  // weights (and --restart, which says what to do with a checkpoint, not how to run); the studio's
  // side of the same check is tst_studio_basics::settingsPanelHasEveryOption.
  void everyRunOptionIsAFlag() {
    const Run help = run({"roundtrip", "--help"});
    QCOMPARE(help.code, 0);
    QSet<QString> flags;
    static const QRegularExpression flag(QStringLiteral("(--[a-z0-9][a-z0-9-]*)"));
    for (auto it = flag.globalMatch(help.out); it.hasNext();) flags.insert(it.next().captured(1));
    for (const seedvae::OptionSpec& spec : seedvae::run_option_table()) {
      QVERIFY2(flags.contains(QString::fromUtf8(spec.flag.data(), spec.flag.size())),
               spec.key.data());
      if (!spec.negative_flag.empty()) {
        QVERIFY2(
            flags.contains(QString::fromUtf8(spec.negative_flag.data(), spec.negative_flag.size())),
            spec.key.data());
      }
    }
    const QSet<QString> own{"--help",   "--sample-clip", "--first",     "--frames", "--stride",
                            "--size",   "--weights",     "--synthetic", "--quiet",  "--json",
                            "--output", "--no-prefetch", "--restart"};
    for (const QString& f : flags) {
      bool in_table = own.contains(f);
      for (const seedvae::OptionSpec& spec : seedvae::run_option_table()) {
        in_table |= f == QString::fromUtf8(spec.flag.data(), spec.flag.size()) ||
                    f == QString::fromUtf8(spec.negative_flag.data(), spec.negative_flag.size());
      }
      QVERIFY2(in_table, qPrintable(f + " is not in the run options table"));
    }
    // A value the table refuses is refused on the command line, with the table's message.
    const Run bad = run({"roundtrip", "--sample-clip", "--tile-layout", "diagonal"});
    QCOMPARE(bad.code, 2);
    QVERIFY2(bad.err.contains("reference, uniform"), qPrintable(bad.err));
  }

  // Values read as the command line and the GPU benchmark driver write them, checked as presets
  // are: kind, range and choices.
  void optionValuesParseAsTheCommandLineWritesThem() {
    using seedvae::find_option;
    using seedvae::OptionValue;
    using seedvae::parse_option_value;
    auto parse = [](const char* key, const char* text) {
      const seedvae::OptionSpec* spec = find_option(key);
      if (!spec) qFatal("no option %s", key);
      return parse_option_value(*spec, text);
    };
    QCOMPARE(std::get<std::string>(*parse("precision", "bf16")), std::string("bf16"));
    QVERIFY(!parse("precision", "fp8").is_ok());
    QCOMPARE(std::get<int>(*parse("chunk_latents", "3")), 3);
    QVERIFY(!parse("chunk_latents", "3x").is_ok());
    QVERIFY(!parse("chunk_latents", "-3").is_ok());  // below the table's minimum
    QVERIFY(!parse("chunk_latents", "").is_ok());
    QCOMPARE(std::get<double>(*parse("budget_gb", "7.5")), 7.5);
    QVERIFY(!parse("budget_gb", "lots").is_ok());
    QCOMPARE(std::get<seedvae::PixelSize>(*parse("tile", "512x256")),
             (seedvae::PixelSize{512, 256}));
    QVERIFY(!parse("tile", "512").is_ok());
    QCOMPARE(std::get<bool>(*parse("lean_convs", "on")), true);
    QCOMPARE(std::get<bool>(*parse("autotune", "0")), false);
    QVERIFY(!parse("autotune", "maybe").is_ok());
  }

  // `seedvae bench` runs each op as a job does: the tiling, tile, overlap and memory budget it
  // accepts take effect, and its JSON says which tiling ran.
  void benchHonoursTilingAndBudget() {
    auto bench = [&](const QStringList& extra) {
      QStringList args{"bench",     "--synthetic", "tiny",     "--size", "64x64",  "--frames", "5",
                       "--repeats", "1",           "--warmup", "0",      "--json", "-q"};
      const Run r = run(args + extra);
      if (r.code != 0) qWarning("%s", qPrintable(r.err));
      return QJsonDocument::fromJson(r.out.toUtf8()).object();
    };
    const QJsonObject untiled = bench({});
    QCOMPARE(untiled.value("ops").toArray().size(), 2);
    for (const QJsonValue op : untiled.value("ops").toArray()) {
      QCOMPARE(op.toObject().value("tiling").toObject().value("mode").toString(), QString("off"));
    }
    const QJsonObject exact = bench({"--tiling", "exact", "--tile", "32x32"});
    for (const QJsonValue v : exact.value("ops").toArray()) {
      const QJsonObject t = v.toObject().value("tiling").toObject();
      QCOMPARE(t.value("mode").toString(), QString("exact"));
      QCOMPARE(t.value("tile").toObject().value("w").toInt(), 32);
      QCOMPARE(t.value("tiles").toInt(), 4);
    }
    QCOMPARE(exact.value("options").toObject().value("tiling").toString(), QString("exact"));
    const QJsonObject blend = bench(
        {"--tiling", "blend", "--tile", "48x48", "--overlap", "16x16", "--tile-layout", "uniform"});
    for (const QJsonValue v : blend.value("ops").toArray()) {
      const QJsonObject t = v.toObject().value("tiling").toObject();
      QCOMPARE(t.value("mode").toString(), QString("blend"));
      QCOMPARE(t.value("overlap").toObject().value("w").toInt(), 16);
      QVERIFY(t.value("tiles").toInt() > 1);
    }
    // With a budget and no tile, the planner picks the tile and the report says so.
    const QJsonObject budget = bench({"--tiling", "exact", "--budget-gb", "0.05"});
    for (const QJsonValue v : budget.value("ops").toArray()) {
      const QJsonObject t = v.toObject().value("tiling").toObject();
      QCOMPARE(t.value("mode").toString(), QString("exact"));
      QVERIFY2(t.value("plan").toString().contains("tile"), qPrintable(t.value("plan").toString()));
      QVERIFY(t.value("tile").toObject().value("w").toInt() > 0);
    }
    // A budget nothing fits: out of memory, before any work.
    const Run none = run({"bench", "--synthetic", "tiny", "--size", "64x64", "--frames", "5",
                          "--tiling", "exact", "--budget-gb", "0.000001", "-q"});
    QCOMPARE(none.code, 4);
  }

  void infoOnHostileCheckpoint() {
    write_bytes(tmp_ / "trunc.safetensors",
                std::string("\x40\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13));
    const Run r = run({"info", path("trunc.safetensors")});
    QCOMPARE(r.code, 3);
    QVERIFY2(r.out.contains("header") || r.err.contains("header"), qPrintable(r.out + r.err));
    write_bytes(tmp_ / "junk.mp4", "this is not a video");
    const Run v = run({"info", path("junk.mp4")});
    QCOMPARE(v.code, 3);
  }

  void infoDescribesGoldenWeights() {
    if (!seedvae::test::have_golden()) QSKIP(seedvae::test::golden_missing_message().c_str());
    const auto w = seedvae::test::golden_dir() / "tiny" / "weights_fp16.safetensors";
    const Run r = run({"info", "--json", QString::fromStdString(w.string())});
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("\"parameters\": 3999475"), qPrintable(r.out));
    QVERIFY(r.out.contains("656034ae3a884033711c9c531b5f0730384c0fd6777e9690cda1179ce5a4d268"));
    QVERIFY(r.out.contains("\"dtype\": \"fp16\""));
  }

  void verifyInputsOnly() {
    if (!seedvae::test::have_golden()) QSKIP(seedvae::test::golden_missing_message().c_str());
    const Run r =
        run({"verify", "--reference", QString::fromStdString(seedvae::test::golden_dir().string()),
             "--inputs-only"});
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("4 passed, 0 failed"), qPrintable(r.out));
    // A tolerance nobody can meet fails with exit code 1.
    const Run f =
        run({"verify", "--reference", QString::fromStdString(seedvae::test::golden_dir().string()),
             "--config", "tiny", "--only", "I1.enc_moments", "--tolerance", "1e-12",
             "--no-intermediates"});
    QCOMPARE(f.code, 1);
    QVERIFY2(f.out.contains("FAIL"), qPrintable(f.out));
  }

  // The Wan reference folder: info names the family without "not implemented", verify runs the
  // tiny configurations' golden cases on the CPU backend and passes them in fp32.
  void verifyWanTiny() {
    if (!seedvae::test::have_golden_wan())
      QFAIL(seedvae::test::golden_wan_missing_message().c_str());
    const QString ref = QString::fromStdString(seedvae::test::golden_wan_dir().string());
    const auto w = seedvae::test::golden_wan_dir() / "wan22" / "tiny" / "weights_fp16.safetensors";
    const Run i = run({"info", "--json", QString::fromStdString(w.string())});
    QCOMPARE(i.code, 0);
    QVERIFY2(i.out.contains("\"family\": \"Wan2.2\"") && !i.out.contains("not implemented"),
             qPrintable(i.out));
    const Run r = run({"verify", "--reference", ref, "--config", "wan21/tiny", "--config",
                       "wan22/tiny", "--quiet"});
    QCOMPARE(r.code, 0);
    // per configuration: 2 weight rows, inputs, 13 golden tensors, 13 intermediates
    QVERIFY2(r.out.contains("58 passed, 0 failed, 0 skipped"), qPrintable(r.out));
    const Run f = run({"verify", "--reference", ref, "--config", "wan21/tiny", "--only", "L3.dec",
                       "--tolerance", "1e-12", "--no-intermediates"});
    QCOMPARE(f.code, 1);
    QVERIFY2(f.out.contains("FAIL"), qPrintable(f.out));
    // make-weights writes the recipe's weights; in bf16 they are not the reference's any more
    const Run m =
        run({"make-weights", "--synthetic", "wan22-tiny", "-o", path("wan22.safetensors")});
    QCOMPARE(m.code, 0);
    QVERIFY2(m.out.contains("7a42646fdef4914b715d8f56af0ed5cc3df29f8ba76411bfa17befb0e1ed1170"),
             qPrintable(m.out));
    const Run v = run({"verify", "--reference", ref, "--config", "wan22/tiny", "--weights",
                       path("wan22.safetensors"), "--only", "L3.dec", "--no-intermediates"});
    QCOMPARE(v.code, 0);
    QVERIFY2(v.out.contains("equals the synthetic recipe bit for bit"), qPrintable(v.out));
    QCOMPARE(run({"make-weights", "--synthetic", "wan21-tiny", "--dtype", "bf16", "-o",
                  path("wan21_bf16.safetensors")})
                 .code,
             0);
    const Run b = run({"verify", "--reference", ref, "--config", "wan21/tiny", "--weights",
                       path("wan21_bf16.safetensors"), "--only", "L3.dec", "--no-intermediates"});
    QVERIFY2(b.out.contains("differs from the synthetic recipe"), qPrintable(b.out));
  }

  // Without --weights/--synthetic the CLI takes the demo model: $SEEDVAE_DEMO_WEIGHTS when it
  // names a file, else <exe>/../share/seedvae/demo_vae.safetensors, else the synthetic tiny
  // weights. The last two are checked on a copy of the CLI in a folder of our own, so the build
  // tree's shipped demo model does not decide the outcome.
  void defaultWeightsPreferTheDemoModel() {
    QCOMPARE(run({"make-weights", "--synthetic", "tiny", "-o", path("demo.safetensors")}).code, 0);
    const fs::path prefix = tmp_ / "prefix";
    fs::create_directories(prefix / "bin");
    const fs::path exe = prefix / "bin" / "seedvae";
    fs::copy_file(SEEDVAE_CLI_PATH, exe, fs::copy_options::overwrite_existing);
    auto with_env = [](const fs::path& program, const QString& value, const QStringList& args) {
      QProcess p;
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.insert("SEEDVAE_DEMO_WEIGHTS", value);
      p.setProcessEnvironment(env);
      p.start(QString::fromStdString(program.string()), args);
      p.waitForFinished(300000);
      return QString::fromUtf8(p.readAllStandardOutput());
    };
    const QStringList args{"roundtrip", "--sample-clip", "--size", "32x32", "--frames",
                           "5",         "--json",        "-q"};
    const QString demo = with_env(exe, path("demo.safetensors"), args);
    QVERIFY2(demo.contains("demo.safetensors"), qPrintable(demo));
    const QString none = with_env(exe, path("missing.safetensors"), args);
    QVERIFY2(none.contains("\"weights\": \"synthetic"), qPrintable(none));
    // Installed next to the program: <prefix>/share/seedvae/demo_vae.safetensors.
    fs::create_directories(prefix / "share" / "seedvae");
    fs::copy_file(tmp_ / "demo.safetensors", prefix / "share" / "seedvae" / "demo_vae.safetensors");
    const QString installed = with_env(exe, path("missing.safetensors"), args);
    QVERIFY2(installed.contains("share/seedvae/demo_vae.safetensors"), qPrintable(installed));
    const QString forced =
        with_env(exe, path("demo.safetensors"), args + QStringList{"--synthetic", "tiny"});
    QVERIFY2(forced.contains("\"weights\": \"synthetic"), qPrintable(forced));
  }

  void roundTripWritesVideoAndReports() {
    const Run r = run({"roundtrip", "--sample-clip", "--size", "64x48", "--frames", "9", "-o",
                       path("rt.mp4"), "--json", "-q"});
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("\"psnr_db\""), qPrintable(r.out + r.err));
    QVERIFY(r.out.contains("\"frames\": 9"));
    QVERIFY(fs::exists(tmp_ / "rt.mp4"));
    QVERIFY(no_temporaries(tmp_));
    const Run info = run({"info", "--json", path("rt.mp4")});
    QCOMPARE(info.code, 0);
    QVERIFY2(info.out.contains("\"frames\": 9"), qPrintable(info.out));
  }

  void encodeThenDecodeTrimsPadding() {
    // 7 frames of 60x44 pad to 9 frames of 64x48; decode must give back 7 frames of 60x44.
    Run e = run({"encode", "--sample-clip", "--size", "60x44", "--frames", "7", "-o",
                 path("lat.safetensors"), "-q"});
    QCOMPARE(e.code, 0);
    Run info = run({"info", "--json", path("lat.safetensors")});
    QVERIFY2(info.out.contains("\"seedvae.frames\": \"7\""), qPrintable(info.out));
    Run d = run({"decode", path("lat.safetensors"), "-o", path("frames"), "-q"});
    QCOMPARE(d.code, 0);
    int pngs = 0;
    for (const auto& f : fs::directory_iterator(tmp_ / "frames"))
      pngs += f.path().extension() == ".png";
    QCOMPARE(pngs, 7);
    info = run({"info", "--json", path("frames")});
    QVERIFY2(info.out.contains("\"width\": 60") && info.out.contains("\"height\": 44"),
             qPrintable(info.out));
    // A latent of another channel count than the model's is refused with exit code 3, before
    // any output exists.
    const std::string header =
        R"({"latent":{"dtype":"F32","shape":[1,4,2,4,4],"data_offsets":[0,512]}})";
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    write_bytes(tmp_ / "four.safetensors", file + header + std::string(512, '\0'));
    d = run({"decode", path("four.safetensors"), "-o", path("bad.mp4"), "-q"});
    QCOMPARE(d.code, 3);
    QVERIFY2(d.err.contains("does not fit"), qPrintable(d.err));
    QVERIFY(!fs::exists(tmp_ / "bad.mp4"));
    // A tensor file without a latent is refused with exit code 3.
    write_bytes(tmp_ / "empty.safetensors", std::string("\x02\x00\x00\x00\x00\x00\x00\x00{}", 10));
    d = run({"decode", path("empty.safetensors"), "-o", path("bad2.mp4")});
    QCOMPARE(d.code, 3);
    QVERIFY(d.err.contains("latent"));
    QVERIFY(!fs::exists(tmp_ / "bad2.mp4"));
  }

  // Frame prefetch (the default for a file read in chunks) and --no-prefetch give the same bytes.
  void prefetchAndNoPrefetchAgree() {
    // 10 frames of 44x28 (padded to 13 frames of 48x32) as a PNG sequence.
    Run w = run({"roundtrip", "--sample-clip", "--size", "44x28", "--frames", "10", "-o",
                 path("seq/"), "-q"});
    QCOMPARE(w.code, 0);
    const QStringList variants[] = {{}, {"--chunk", "2", "--temporal-pad", "repeat-last"}};
    for (const QStringList& extra : variants) {
      Run on = run(
          QStringList{"encode", path("seq"), "-o", path("on.safetensors"), "--json", "-q"} + extra);
      QCOMPARE(on.code, 0);
      QVERIFY2(on.out.contains("\"prefetch\": true"), qPrintable(on.out + on.err));
      QVERIFY(on.out.contains("\"read_seconds\""));
      Run off = run(QStringList{"encode", path("seq"), "-o", path("off.safetensors"), "--json",
                                "-q", "--no-prefetch"} +
                    extra);
      QCOMPARE(off.code, 0);
      QVERIFY2(off.out.contains("\"prefetch\": false"), qPrintable(off.out + off.err));
      const std::string a = read_bytes(tmp_ / "on.safetensors"),
                        b = read_bytes(tmp_ / "off.safetensors");
      QVERIFY(!a.empty());
      QVERIFY(a == b);
    }
    auto psnr = [](const QString& out) {
      const int i = out.indexOf("\"psnr_db\"");
      return out.mid(i, out.indexOf('\n', i) - i);
    };
    Run rt_on = run({"roundtrip", path("seq"), "--prefetch", "on", "--json", "-q"});
    Run rt_off = run({"roundtrip", path("seq"), "--prefetch", "off", "--json", "-q"});
    QCOMPARE(rt_on.code, 0);
    QCOMPARE(rt_off.code, 0);
    QVERIFY(rt_on.out.contains("\"prefetch\": true") && rt_off.out.contains("\"prefetch\": false"));
    QCOMPARE(psnr(rt_on.out), psnr(rt_off.out));
    // Combinations that need the whole clip first: refused under "on", plain reading under auto.
    Run tiled = run({"encode", path("seq"), "-o", path("t.safetensors"), "--tiling", "blend",
                     "--prefetch", "on", "-q"});
    QVERIFY(tiled.code > 0);
    QVERIFY2(tiled.err.contains("--prefetch on does not apply"), qPrintable(tiled.err));
    // The sample clip is generated on the prefetch thread like a file is read.
    Run sample =
        run({"encode", "--sample-clip", "-o", path("t.safetensors"), "--prefetch", "on", "--json"});
    QCOMPARE(sample.code, 0);
    QVERIFY2(sample.out.contains("\"prefetch\": true"), qPrintable(sample.out));
    Run tiled_auto = run(
        {"encode", path("seq"), "-o", path("t.safetensors"), "--tiling", "blend", "--json", "-q"});
    QCOMPARE(tiled_auto.code, 0);
    QVERIFY(tiled_auto.out.contains("\"prefetch\": false"));
  }

  // --async-tiles on and off write the same bytes (encode, tiled encode, decode); "on" is refused
  // with exact tiling, "auto" turns it off there.
  // --lone-head and --lean-convs run (the tests in tst_streaming compare their output with the
  // standard path) and are refused with exact tiling, which has its own schedule.
  void loneHeadAndLeanConvs() {
    Run r = run({"roundtrip", "--sample-clip", "--size", "40x32", "--frames", "9", "-o",
                 path("lean/"), "--lone-head", "--lean-convs", "--json", "-q"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    int frames = 0;
    for (const auto& f : fs::directory_iterator(tmp_ / "lean")) frames += f.is_regular_file();
    QCOMPARE(frames, 9);
    Run exact = run({"roundtrip", "--sample-clip", "--size", "40x32", "--frames", "9", "-o",
                     path("lean_exact/"), "--tiling", "exact", "--lean-convs", "-q"});
    QVERIFY(exact.code > 0);
    QVERIFY2(exact.err.contains("--lean-convs does not apply to --tiling exact"),
             qPrintable(exact.err));
  }

  void asyncTilesOnAndOffAgree() {
    Run w = run({"roundtrip", "--sample-clip", "--size", "40x32", "--frames", "9", "-o",
                 path("aseq/"), "-q"});
    QCOMPARE(w.code, 0);
    const QStringList variants[] = {{},
                                    {"--tiling", "blend", "--tile", "24x24", "--overlap", "8x8"}};
    for (const QStringList& extra : variants) {
      for (const char* mode : {"on", "off"}) {
        Run e = run(QStringList{"encode", path("aseq"), "-o",
                                path((std::string("a_") + mode + ".safetensors").c_str()),
                                "--async-tiles", mode, "--synthetic", "tiny", "-q"} +
                    extra);
        QVERIFY2(e.code == 0, qPrintable(e.err));
        Run d = run(QStringList{"decode", path((std::string("a_") + mode + ".safetensors").c_str()),
                                "-o", path((std::string("d_") + mode + "/").c_str()),
                                "--async-tiles", mode, "--synthetic", "tiny", "-q"} +
                    extra);
        QVERIFY2(d.code == 0, qPrintable(d.err));
      }
      const std::string a = read_bytes(tmp_ / "a_on.safetensors"),
                        b = read_bytes(tmp_ / "a_off.safetensors");
      QVERIFY(!a.empty());
      QVERIFY(a == b);
      int frames = 0;
      for (const auto& f : fs::directory_iterator(tmp_ / "d_on")) {
        const std::string on = read_bytes(f.path()),
                          off = read_bytes(tmp_ / "d_off" / f.path().filename());
        QVERIFY(!on.empty());
        QVERIFY2(on == off, f.path().filename().string().c_str());
        ++frames;
      }
      QCOMPARE(frames, 9);
    }
    Run exact_on = run({"encode", path("aseq"), "-o", path("x.safetensors"), "--tiling", "exact",
                        "--async-tiles", "on", "-q"});
    QVERIFY(exact_on.code > 0);
    QVERIFY2(exact_on.err.contains("--async-tiles on does not apply"), qPrintable(exact_on.err));
    Run exact_auto =
        run({"encode", path("aseq"), "-o", path("x.safetensors"), "--tiling", "exact", "-q"});
    QCOMPARE(exact_auto.code, 0);
  }

  // An output that resolves to an input, the weights or the latent read (by name, symbolic link
  // or hard link) is refused before any work, and the file is left as it was.
  void outputNeverOverwritesAnInput() {
    const fs::path d = tmp_ / "same";
    fs::create_directories(d);
    auto p = [&](const char* n) { return QString::fromStdString((d / n).string()); };
    QCOMPARE(run({"roundtrip", "--sample-clip", "--synthetic", "tiny", "--size", "32x32",
                  "--frames", "5", "-o", p("v.mp4"), "-q"})
                 .code,
             0);
    QCOMPARE(run({"make-weights", "--synthetic", "tiny", "-o", p("w.safetensors")}).code, 0);
    fs::create_symlink("v.mp4", d / "link.mp4");
    fs::create_hard_link(d / "v.mp4", d / "hard.mp4");
    const std::string video = read_bytes(d / "v.mp4"), weights = read_bytes(d / "w.safetensors");
    auto refused = [&](const QStringList& args) {
      const Run r = run(args);
      QVERIFY2(r.code == 3, qPrintable(QString::number(r.code) + r.err));
      QVERIFY2(r.err.contains("same file"), qPrintable(r.err));
      QVERIFY2(!r.err.contains("encode "), qPrintable(r.err));  // no progress: nothing ran
    };
    refused({"roundtrip", "--synthetic", "tiny", p("v.mp4"), "-o", p("v.mp4")});
    refused({"roundtrip", "--synthetic", "tiny", p("v.mp4"), "-o", p("link.mp4")});
    refused({"roundtrip", "--synthetic", "tiny", p("link.mp4"), "-o", p("hard.mp4")});
    refused({"encode", "--weights", p("w.safetensors"), p("v.mp4"), "-o", p("w.safetensors")});
    QCOMPARE(read_bytes(d / "v.mp4"), video);
    QCOMPARE(read_bytes(d / "w.safetensors"), weights);
    // The latent a decode reads, behind a link with a video name.
    QCOMPARE(
        run({"encode", "--synthetic", "tiny", p("v.mp4"), "-o", p("lat.safetensors"), "-q"}).code,
        0);
    fs::create_symlink("lat.safetensors", d / "lat.mp4");
    refused({"decode", "--synthetic", "tiny", p("lat.safetensors"), "-o", p("lat.mp4")});
    QVERIFY(fs::file_size(d / "lat.safetensors") > 0);
    // A PNG sequence written over the directory it is read from.
    QCOMPARE(run({"roundtrip", "--synthetic", "tiny", p("v.mp4"), "-o", p("seq/"), "-q"}).code, 0);
    const Run seq = run({"roundtrip", "--synthetic", "tiny", p("seq"), "-o", p("seq/")});
    QCOMPARE(seq.code, 3);
    QVERIFY(no_temporaries(d));
  }

  // The output's directory and name are checked before the run: a missing or read-only directory
  // and an unknown extension fail at once, naming the path, with no progress printed.
  void outputPathsCheckedBeforeTheRun() {
    const QStringList rt{"roundtrip", "--sample-clip", "--synthetic", "tiny",
                         "--size",    "32x32",         "--frames",    "5"};
    const Run missing = run(rt + QStringList{"-o", path("no_such_dir/out.mp4")});
    QCOMPARE(missing.code, 3);
    QVERIFY2(missing.err.contains("no such directory") && missing.err.contains("no_such_dir"),
             qPrintable(missing.err));
    QVERIFY2(!missing.err.contains("encode "), qPrintable(missing.err));
    const Run xyz = run(rt + QStringList{"-o", path("out.xyz")});
    QCOMPARE(xyz.code, 3);
    QVERIFY2(xyz.err.contains(".xyz") && xyz.err.contains(".mp4") && xyz.err.contains(".mkv"),
             qPrintable(xyz.err));
    QVERIFY(!fs::exists(tmp_ / "out.xyz"));
    const Run latent = run({"encode", "--sample-clip", "--synthetic", "tiny", "-o", path("l.mp4")});
    QCOMPARE(latent.code, 3);
    QVERIFY2(latent.err.contains(".safetensors"), qPrintable(latent.err));
#ifdef Q_OS_UNIX
    // A directory that refuses files: a read-only mount (root ignores permission bits), or
    // permissions elsewhere.
    const fs::path ro = tmp_ / "readonly";
    fs::create_directories(ro);
    const bool root = ::geteuid() == 0;
    if (root) {
      if (std::system(("mount -t tmpfs -o ro,size=64k tmpfs " + ro.string()).c_str()) != 0) {
        QSKIP("cannot mount a read-only tmpfs here");
      }
    } else {
      fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    }
    const Run denied = run(rt + QStringList{"-o", QString::fromStdString((ro / "o.mp4").string())});
    if (root) {
      QVERIFY(std::system(("umount " + ro.string()).c_str()) == 0);
    } else {
      fs::permissions(ro, fs::perms::owner_all);
    }
    QCOMPARE(denied.code, 7);
    QVERIFY2(denied.err.contains("readonly") && (denied.err.contains("Read-only file system") ||
                                                 denied.err.contains("Permission denied")),
             qPrintable(denied.err));
    QVERIFY2(!denied.err.contains("encode "), qPrintable(denied.err));
#endif
  }

  // A full disk (a 100 KiB tmpfs): every writer fails with the I/O exit code, naming the path and
  // the lack of space; an existing output stays as it was and no temporary is left.
  void fullDiskKeepsTheOldFile() {
#ifdef Q_OS_LINUX
    if (::geteuid() != 0) QSKIP("mounting a small tmpfs needs root (CI runs as root)");
    const fs::path full = tmp_ / "full";
    fs::create_directories(full);
    if (std::system(("mount -t tmpfs -o size=100k tmpfs " + full.string()).c_str()) != 0) {
      QSKIP("cannot mount a tmpfs here");
    }
    write_bytes(full / "out.mp4", "previous output");
    auto out = [&](const char* n) { return QString::fromStdString((full / n).string()); };
    const QStringList rt{"roundtrip", "--sample-clip", "--synthetic", "tiny",
                         "--size",    "256x256",       "--frames",    "9"};
    const Run mp4 = run(rt + QStringList{"-o", out("out.mp4"), "-q"});
    const Run png = run(rt + QStringList{"-o", out("seq/"), "-q"});
    const Run one = run({"roundtrip", "--sample-clip", "--synthetic", "tiny", "--size", "256x256",
                         "--frames", "1", "-o", out("one.png"), "-q"});
    const Run lat = run({"encode", "--sample-clip", "--synthetic", "tiny", "--size", "256x256",
                         "--frames", "9", "-o", out("lat.safetensors"), "-q"});
    const std::string kept = read_bytes(full / "out.mp4");
    const bool clean = no_temporaries(full);
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(full)) names.insert(e.path().filename().string());
    QVERIFY(std::system(("umount " + full.string()).c_str()) == 0);
    for (const auto& [r, name] :
         {std::pair{mp4, "out.mp4"}, std::pair{png, "seq"}, std::pair{one, "one.png"}, std::pair {
            lat,
            "lat.safetensors"
          }}) {
      QVERIFY2(r.code == 7, qPrintable(QString::number(r.code) + r.err));
      QVERIFY2(r.err.contains("no space left", Qt::CaseInsensitive) && r.err.contains(name),
               qPrintable(r.err));
    }
    QCOMPARE(kept, std::string("previous output"));
    QVERIFY(clean);
    QCOMPARE(names, std::set<std::string>{"out.mp4"});
#else
    QSKIP("tmpfs is Linux-only");
#endif
  }

  // Sizes whose buffers cannot exist are refused before anything is allocated, with the bytes
  // needed; no std::bad_alloc escapes.
  void hugeSizesAreRefusedUpFront() {
    const Run rt =
        run({"roundtrip", "--synthetic", "tiny", "--sample-clip", "--size", "100000x100000", "-q"});
    const Run enc = run({"encode", "--synthetic", "tiny", "--sample-clip", "--size",
                         "100000x100000", "-o", path("huge.safetensors"), "-q"});
    const Run bench = run({"bench", "--synthetic", "tiny", "--size", "100000x100000", "-q"});
    for (const Run& r : {rt, enc, bench}) {
      QVERIFY2(r.code == 4, qPrintable(QString::number(r.code) + r.err));
      QVERIFY2(r.err.contains(QRegularExpression("needs [0-9.]+ GiB")), qPrintable(r.err));
      QVERIFY2(!r.err.contains("bad_alloc"), qPrintable(r.err));
    }
  }

  // README and --help document printf patterns as inputs of encode and roundtrip.
  void printfPatternsAreInputs() {
    QCOMPARE(run({"roundtrip", "--sample-clip", "--synthetic", "tiny", "--size", "32x32",
                  "--frames", "5", "-o", path("pat/"), "-q"})
                 .code,
             0);
    const QString pattern = path("pat") + "/frame_%05d.png";
    const Run e = run({"encode", "--synthetic", "tiny", pattern, "-o", path("pat.safetensors")});
    QVERIFY2(e.code == 0, qPrintable(e.err));
    const Run r = run({"roundtrip", "--synthetic", "tiny", pattern, "--json", "-q"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("\"frames\": 5"), qPrintable(r.out));
    const Run none = run({"roundtrip", "--synthetic", "tiny", path("pat") + "/x_%03d.png", "-q"});
    QCOMPARE(none.code, 3);
    QVERIFY2(none.err.contains("no file matches"), qPrintable(none.err));
  }

  // SIGTERM while the video is written: the job stops, the temporary is removed, exit 143.
  void sigtermDuringTheWriteLeavesNoTemporary() {
#ifdef Q_OS_UNIX
    const fs::path d = tmp_ / "term";
    fs::create_directories(d);
    QProcess p;
    p.start(QStringLiteral(SEEDVAE_CLI_PATH),
            {"roundtrip", "--sample-clip", "--synthetic", "tiny", "--size", "128x128", "--frames",
             "101", "-q", "-o", QString::fromStdString((d / "out.mp4").string())});
    QVERIFY(p.waitForStarted());
    bool seen = false;  // the temporary exists: the write has begun
    while (!seen && p.state() == QProcess::Running) {
      seen = !no_temporaries(d);
      if (!seen) QThread::usleep(500);
    }
    QVERIFY2(seen, "the run ended before its output was written");
    ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitStatus(), QProcess::NormalExit);
    QCOMPARE(p.exitCode(), 143);
    QVERIFY(no_temporaries(d));
    QVERIFY(!fs::exists(d / "out.mp4"));
#else
    QSKIP("signals are POSIX-only");
#endif
  }

  // What does not stop a job but changes what the user gets is said: a truncated input (frames
  // decoded against the frames its container lists) and an output format that stores another
  // size (odd sizes in mp4).
  void warningsForTruncatedInputsAndStoredSizes() {
    // Odd sizes are stored as they are (4:4:4 chroma): nothing to warn about.
    const Run odd = run({"roundtrip", "--synthetic", "tiny", "--sample-clip", "--size", "37x29",
                         "--frames", "5", "-o", path("odd.mp4"), "-q"});
    QCOMPARE(odd.code, 0);
    QVERIFY2(!odd.err.contains("warning"), qPrintable(odd.err));
    const Run odd_info = run({"info", "--json", path("odd.mp4")});
    QVERIFY2(odd_info.out.contains("\"width\": 37") && odd_info.out.contains("\"height\": 29") &&
                 odd_info.out.contains("\"codec\": \"h264\""),
             qPrintable(odd_info.out));
    const Run even = run({"roundtrip", "--synthetic", "tiny", "--sample-clip", "--size", "36x28",
                          "--frames", "5", "-o", path("even.mp4"), "-q"});
    QCOMPARE(even.code, 0);
    QVERIFY2(!even.err.contains("warning"), qPrintable(even.err));
    // An mkv of 33 frames cut to 45 % of its bytes: Matroska's header still lists 33 frames.
    QCOMPARE(run({"roundtrip", "--synthetic", "tiny", "--sample-clip", "--size", "64x64",
                  "--frames", "33", "-o", path("whole.mkv"), "-q"})
                 .code,
             0);
    const std::string bytes = read_bytes(tmp_ / "whole.mkv");
    write_bytes(tmp_ / "cut.mkv", bytes.substr(0, bytes.size() * 45 / 100));
    for (const char* prefetch : {"on", "off"}) {
      const Run cut = run({"encode", "--synthetic", "tiny", path("cut.mkv"), "--prefetch", prefetch,
                           "-o", path("cut.safetensors"), "-q"});
      QCOMPARE(cut.code, 0);
      QVERIFY2(cut.err.contains("of the 33 frames its container lists"), qPrintable(cut.err));
    }
    const Run whole = run({"encode", "--synthetic", "tiny", path("whole.mkv"), "-o",
                           path("whole.safetensors"), "-q"});
    QCOMPARE(whole.code, 0);
    QVERIFY2(!whole.err.contains("warning"), qPrintable(whole.err));
  }

  void messagesNameTheProblem() {
    // A PyTorch checkpoint (a zip archive) given as weights.
    write_bytes(tmp_ / "model.pt", std::string("PK\x03\x04", 4) + std::string(200, 'x'));
    const Run pt = run({"roundtrip", "--sample-clip", "--weights", path("model.pt"), "-q"});
    QCOMPARE(pt.code, 3);
    QVERIFY2(pt.err.contains("PyTorch checkpoint"), qPrintable(pt.err));
    QVERIFY2(!pt.err.contains("header length"), qPrintable(pt.err));
    // Weights with a NaN: refused at load, naming the tensor.
    QCOMPARE(run({"make-weights", "--synthetic", "tiny", "-o", path("ok.safetensors")}).code, 0);
    std::string w = read_bytes(tmp_ / "ok.safetensors");
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(w[i]);
    const QJsonObject h =
        QJsonDocument::fromJson(QByteArray::fromStdString(w.substr(8, header))).object();
    QString name;
    qint64 first = -1;
    for (auto it = h.begin(); it != h.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      const qint64 off = it.value().toObject().value("data_offsets").toArray().at(0).toInteger();
      if (first < 0 || off < first) {
        first = off;
        name = it.key();
      }
    }
    w[8 + header + first] = '\x00';
    w[8 + header + first + 1] = '\x7e';  // fp16 NaN
    write_bytes(tmp_ / "nan.safetensors", w);
    const Run nan = run({"roundtrip", "--sample-clip", "--size", "16x16", "--frames", "1",
                         "--weights", path("nan.safetensors"), "-q"});
    QCOMPARE(nan.code, 3);
    QVERIFY2(nan.err.contains("NaN") && nan.err.contains(name), qPrintable(nan.err + name));
    // Option values with a clear reason (no 309-digit range).
    const QStringList rt{"roundtrip", "--sample-clip", "--size", "32x32", "--frames", "1", "-q"};
    const std::pair<QStringList, const char*> bad[] = {
        {{"--first", "-1"}, "--first"},
        {{"--stride", "0"}, "--stride"},
        {{"--frames", "0"}, "--frames"},
        {{"--budget-gb", "nan"}, "not a finite number"},
        {{"--tiling", "blend", "--tile", "0x16"}, "--tile 0x16"},
        {{"--tiling", "blend", "--tile", "32x32", "--overlap", "32x8"}, "--overlap 32x8"}};
    for (const auto& [args, word] : bad) {
      const Run r = run(rt + args);
      QVERIFY2(r.code == 2 || r.code == 3, qPrintable(args.join(' ') + r.err));
      QVERIFY2(r.err.contains(word), qPrintable(r.err));
      QVERIFY2(!r.err.contains("1797693134"), qPrintable(r.err));
    }
    const Run sub = run({"frobnicate"});
    QCOMPARE(sub.code, 2);
    QVERIFY2(sub.err.contains("frobnicate") && sub.err.contains("roundtrip"), qPrintable(sub.err));
  }

  // A decode into a video file stopped by Ctrl-C leaves its checkpoint and no output; the same
  // command run again resumes from it (and says so) and writes the bytes of an uninterrupted
  // decode.
  void decodeResumesAfterCtrlC() {
#ifdef Q_OS_UNIX
    const Run e = run({"encode", "--sample-clip", "--size", "192x128", "--frames", "25",
                       "--synthetic", "tiny", "-o", path("resume.safetensors"), "-q"});
    QVERIFY2(e.code == 0, qPrintable(e.err));
    const QStringList decode{
        "decode", path("resume.safetensors"), "--synthetic", "tiny",  "--codec",
        "ffv1",   "--checkpoint-every",       "1",           "--json"};
    const fs::path out = tmp_ / "resumed.mkv";
    QProcess p;
    p.start(QStringLiteral(SEEDVAE_CLI_PATH), decode + QStringList{"-o", path("resumed.mkv")});
    QVERIFY(p.waitForStarted());
    // 6 chunks (5 + 5 x 4 frames): interrupt once two are written
    QElapsedTimer t;
    t.start();
    QByteArray err;
    while (!err.contains("decode 2/") && t.elapsed() < 120000) {
      p.waitForReadyRead(100);
      err += p.readAllStandardError();
    }
    ::kill(static_cast<pid_t>(p.processId()), SIGINT);
    QVERIFY(p.waitForFinished(120000));
    err += p.readAllStandardError();
    QCOMPARE(p.exitCode(), 130);
    static const QRegularExpression stopped(QStringLiteral("resumes from frame (\\d+)"));
    const QRegularExpressionMatch m = stopped.match(QString::fromUtf8(err));
    QVERIFY2(m.hasMatch(), err.constData());
    const int at = m.captured(1).toInt();
    QVERIFY(at >= 5 && at < 25);
    QVERIFY(!fs::exists(out));
    QVERIFY(fs::exists(tmp_ / "resumed.mkv.seedvae-resume"));

    const Run again = run(decode + QStringList{"-o", path("resumed.mkv")});
    QVERIFY2(again.code == 0, qPrintable(again.err));
    QVERIFY2(again.err.contains("resuming from the checkpoint"), qPrintable(again.err));
    const QJsonObject j = QJsonDocument::fromJson(again.out.toUtf8()).object();
    QVERIFY(j.value("checkpointed").toBool());
    QCOMPARE(j.value("resumed_at_frame").toInt(), at);
    QCOMPARE(j.value("frames").toInt(), 25);
    QVERIFY(!fs::exists(tmp_ / "resumed.mkv.seedvae-resume"));

    const Run ref = run(decode + QStringList{"-o", path("uninterrupted.mkv")});
    QVERIFY2(ref.code == 0, qPrintable(ref.err));
    QCOMPARE(QJsonDocument::fromJson(ref.out.toUtf8()).object().value("resumed_at_frame").toInt(),
             0);
    const std::string a = read_bytes(out), b = read_bytes(tmp_ / "uninterrupted.mkv");
    QVERIFY(!a.empty());
    QVERIFY2(a == b, "the resumed decode differs from the uninterrupted one");
    QVERIFY(no_temporaries(tmp_));
#else
    QSKIP("SIGINT delivery is POSIX-only");
#endif
  }

  void ctrlCCancelsAndLeavesNoFile() {
#ifdef Q_OS_UNIX
    QProcess p;
    p.start(QStringLiteral(SEEDVAE_CLI_PATH), {"roundtrip", "--sample-clip", "--size", "256x256",
                                               "--frames", "41", "-o", path("cancel.mp4")});
    QVERIFY(p.waitForStarted());
    // Wait until the first chunk reports progress, then interrupt.
    QElapsedTimer t;
    t.start();
    QByteArray err;  // accumulated: the word may arrive split over two reads
    while (!err.contains("encode") && t.elapsed() < 60000) {
      p.waitForReadyRead(100);
      err += p.readAllStandardError();
    }
    ::kill(static_cast<pid_t>(p.processId()), SIGINT);
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 130);
    QVERIFY(!fs::exists(tmp_ / "cancel.mp4"));
    QVERIFY(no_temporaries(tmp_));
#else
    QSKIP("SIGINT delivery is POSIX-only");
#endif
  }
};

QTEST_GUILESS_MAIN(tst_Cli)
#include "tst_cli.moc"
