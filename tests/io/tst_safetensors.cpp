// core/io/safetensors: the writer, the reader on valid files (round trips, the golden tiny
// weights), and one data-driven row per kind of hostile file, each checking the status code and a
// word of the message.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "tests/support/golden.h"

using namespace seedvae;
namespace fs = std::filesystem;

Q_DECLARE_METATYPE(seedvae::StatusCode)

namespace {

// A safetensors image: 8-byte little-endian length (the real one unless overridden), the header
// text as given (no padding added), then `data_size` pattern bytes.
QByteArray image(const std::string& header, size_t data_size, std::optional<uint64_t> len = {}) {
  QByteArray out;
  uint64_t n = len ? *len : header.size();
  for (int i = 0; i < 8; ++i) {
    out.append(static_cast<char>(n & 0xFF));
    n >>= 8;
  }
  out.append(header.data(), static_cast<qsizetype>(header.size()));
  for (size_t i = 0; i < data_size; ++i) out.append(static_cast<char>(i * 7 + 1));
  return out;
}

// One header entry.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

std::span<const std::byte> as_bytes(const QByteArray& a) {
  return {reinterpret_cast<const std::byte*>(a.constData()), static_cast<size_t>(a.size())};
}

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

std::vector<std::byte> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  if (!c.empty()) std::memcpy(out.data(), c.data(), c.size());
  return out;
}

void write_file(const fs::path& p, const QByteArray& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.constData(), bytes.size());
}

std::vector<fs::path> dir_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename());
  return out;
}

uint64_t read_u64le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

HostTensor ramp(DType dtype, Shape shape, float start) {
  HostTensor f32(DType::kF32, std::move(shape));
  auto v = f32.f32();
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + 0.25f * static_cast<float>(i);
  return f32.to(dtype);
}

bool same_bytes(std::span<const std::byte> a, const HostTensor& b) {
  return static_cast<int64_t>(a.size()) == b.nbytes() &&
         (a.empty() || std::memcmp(a.data(), b.raw(), a.size()) == 0);
}

}  // namespace

class tst_Safetensors : public QObject {
  Q_OBJECT

 private slots:
  void roundTripAllDtypes();
  void serializeLayout();
  void writeMatchesSerialize();
  void namesInOffsetOrder();
  void paddedAndUnalignedHeader();
  void emptyDataArea();
  void getMissingIsNotFound();
  void openErrorsNameTheFile();
  void goldenTinyWeights();
  void writerRejectsBadInput();
  void atomicWriterLeavesNothing();
  void streamedWriterWritesTheSameBytes();
  void hostile_data();
  void hostile();
  void hostileFileNamesPath();
  void deepNestingDoesNotCrash();
};

void tst_Safetensors::roundTripAllDtypes() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const fs::path path = fs::path(dir.path().toStdString()) / "rt.safetensors";

  const HostTensor f32 = ramp(DType::kF32, {2, 3}, -1.0f);
  const HostTensor f16 = ramp(DType::kF16, {4}, 0.5f);
  const HostTensor bf16 = ramp(DType::kBF16, {1, 2, 3}, -3.0f);
  const HostTensor f64 = ramp(DType::kF64, {5}, 7.0f);
  const HostTensor scalar = ramp(DType::kF32, Shape{}, 42.0f);
  const HostTensor empty(DType::kF16, {0, 3});
  const std::vector<NamedTensor> tensors = {{"z.f32", &f32},     {"a.f16", &f16},
                                            {"m.bf16", &bf16},   {"b.f64", &f64},
                                            {"scalar", &scalar}, {"empty", &empty}};
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"config", "tiny"}};
  const Status st = write_safetensors(path, tensors, meta);
  QVERIFY2(st.is_ok(), st.to_string().c_str());

  auto file = SafetensorsFile::open(path);
  QVERIFY2(file.is_ok(), file.status().to_string().c_str());
  QCOMPARE(file->path(), path);
  QCOMPARE(file->file_size(), static_cast<uint64_t>(fs::file_size(path)));
  QCOMPARE(file->metadata(), meta);
  // Written in ascending name order, so offset order is name order ("empty" and "a.f16"... sort).
  const std::vector<std::string> expected_names = {"a.f16",  "b.f64",  "empty",
                                                   "m.bf16", "scalar", "z.f32"};
  QCOMPARE(file->names(), expected_names);

  for (const NamedTensor& t : tensors) {
    QVERIFY(file->contains(t.name));
    auto v = file->get(t.name);
    QVERIFY2(v.is_ok(), v.status().to_string().c_str());
    QCOMPARE(v->name, t.name);
    QCOMPARE(v->dtype, t.tensor->dtype());
    QCOMPARE(v->shape, t.tensor->shape());
    QCOMPARE(v->numel(), t.tensor->numel());
    QVERIFY2(same_bytes(v->bytes, *t.tensor), t.name.c_str());
    const HostTensor host = v->to_host();
    QCOMPARE(host.dtype(), t.tensor->dtype());
    QCOMPARE(host.shape(), t.tensor->shape());
    QVERIFY(
        same_bytes({static_cast<const std::byte*>(host.raw()), size_t(host.nbytes())}, *t.tensor));
    // Converted copies equal convert_elements of the original.
    for (DType target : {DType::kF32, DType::kF16, DType::kBF16, DType::kF64}) {
      const HostTensor conv = v->to_host(target);
      const HostTensor expect = t.tensor->to(target);
      QCOMPARE(conv.dtype(), target);
      QCOMPARE(conv.shape(), t.tensor->shape());
      QVERIFY(
          same_bytes({static_cast<const std::byte*>(conv.raw()), size_t(conv.nbytes())}, expect));
    }
  }
  // Spot values, independent of the writer: f16 ramp 0.5, 0.75 -> 0x3800, 0x3A00.
  auto a = file->get("a.f16");
  QVERIFY(a.is_ok());
  uint16_t h[2];
  std::memcpy(h, a->bytes.data(), 4);
  QCOMPARE(h[0], uint16_t{0x3800});
  QCOMPARE(h[1], uint16_t{0x3A00});
  QCOMPARE(a->to_host(DType::kF32).f32()[1], 0.75f);
  auto b = file->get("b.f64");
  QVERIFY(b.is_ok());
  QCOMPARE(b->to_host().data<double>()[4], 8.0);
  QCOMPARE(file->get("scalar")->numel(), int64_t{1});
  QCOMPARE(file->get("empty")->bytes.size(), size_t{0});

  // The views survive moving the file object.
  SafetensorsFile moved = std::move(file).value();
  QCOMPARE(moved.get("b.f64")->to_host().data<double>()[0], 7.0);
}

void tst_Safetensors::serializeLayout() {
  const HostTensor x = ramp(DType::kF32, {3}, 1.0f);     // 12 bytes
  const HostTensor y = ramp(DType::kF16, {1, 3}, 2.0f);  // 6 bytes
  const std::vector<NamedTensor> tensors = {{"y", &y}, {"x", &x}};
  auto bytes = serialize_safetensors(tensors);
  QVERIFY2(bytes.is_ok(), bytes.status().to_string().c_str());
  QVERIFY(bytes->size() >= 8);
  const uint64_t n = read_u64le(bytes->data());
  QCOMPARE(n % 8, uint64_t{0});
  QCOMPARE(bytes->size(), size_t(8 + n + 18));
  const std::string header(reinterpret_cast<const char*>(bytes->data()) + 8, n);
  // Ascending names, contiguous offsets, no __metadata__ when empty, space padding only.
  const std::string expected = R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                               R"("y":{"dtype":"F16","shape":[1,3],"data_offsets":[12,18]}})";
  QCOMPARE(q(header.substr(0, expected.size())), q(expected));
  QVERIFY(header.find_first_not_of(' ', expected.size()) == std::string::npos);
  QVERIFY(header.size() - expected.size() < 8);
  QVERIFY(std::memcmp(bytes->data() + 8 + n, x.raw(), 12) == 0);
  QVERIFY(std::memcmp(bytes->data() + 8 + n + 12, y.raw(), 6) == 0);

  // With metadata, __metadata__ is written and read back.
  auto with_meta = serialize_safetensors(tensors, {{"k", "v"}});
  QVERIFY(with_meta.is_ok());
  const uint64_t n2 = read_u64le(with_meta->data());
  const std::string header2(reinterpret_cast<const char*>(with_meta->data()) + 8, n2);
  QVERIFY(header2.find(R"("__metadata__":{"k":"v"})") != std::string::npos);
  auto parsed = SafetensorsFile::parse(*with_meta);
  QVERIFY2(parsed.is_ok(), parsed.status().to_string().c_str());
  QCOMPARE(parsed->metadata().at("k"), std::string("v"));
  QCOMPARE(parsed->names(), (std::vector<std::string>{"x", "y"}));
  QVERIFY(parsed->path().empty());

  // No tensors at all: "{}" padded to 8 bytes and nothing else.
  auto none = serialize_safetensors({});
  QVERIFY(none.is_ok());
  QCOMPARE(none->size(), size_t{16});
  QVERIFY(SafetensorsFile::parse(*none).is_ok());
}

void tst_Safetensors::writeMatchesSerialize() {
  QTemporaryDir dir;
  const fs::path path = fs::path(dir.path().toStdString()) / "w.safetensors";
  const HostTensor x = ramp(DType::kBF16, {7}, -2.0f);
  const std::vector<NamedTensor> tensors = {{"x", &x}};
  QVERIFY(write_safetensors(path, tensors, {{"a", "b"}}).is_ok());
  auto mem = serialize_safetensors(tensors, {{"a", "b"}});
  QVERIFY(mem.is_ok());
  QVERIFY(read_file(path) == *mem);
  // Only the destination exists: the temporary was renamed away.
  QCOMPARE(dir_entries(path.parent_path()), std::vector<fs::path>{"w.safetensors"});
  // Overwriting an existing file works and replaces it.
  const HostTensor y = ramp(DType::kF32, {2}, 0.0f);
  const std::vector<NamedTensor> other = {{"y", &y}};
  QVERIFY(write_safetensors(path, other).is_ok());
  auto reread = SafetensorsFile::open(path);
  QVERIFY(reread.is_ok());
  QCOMPARE(reread->names(), std::vector<std::string>{"y"});
  QCOMPARE(dir_entries(path.parent_path()), std::vector<fs::path>{"w.safetensors"});
}

void tst_Safetensors::namesInOffsetOrder() {
  // "b" is stored first, "a" second, zero-size "c" at the end: names() follows the data.
  const std::string header = "{" + entry("a", "F32", "[1]", "[4,8]") + "," +
                             entry("c", "F16", "[0]", "[8,8]") + "," +
                             entry("b", "F32", "[1]", "[0,4]") + "}";
  auto f = SafetensorsFile::parse(as_bytes(image(header, 8)));
  QVERIFY2(f.is_ok(), f.status().to_string().c_str());
  QCOMPARE(f->names(), (std::vector<std::string>{"b", "a", "c"}));
  QCOMPARE(f->get("a")->bytes.data() - f->get("b")->bytes.data(), std::ptrdiff_t{4});
}

void tst_Safetensors::paddedAndUnalignedHeader() {
  // Header padded with spaces (as the official writer does).
  const std::string body = "{" + entry("t", "F64", "[2]", "[0,16]") + "}";
  std::string padded = body + std::string(13, ' ');
  auto f = SafetensorsFile::parse(as_bytes(image(padded, 16)));
  QVERIFY2(f.is_ok(), f.status().to_string().c_str());
  // An unpadded header of odd length leaves the data misaligned: conversion must still work.
  QVERIFY(body.size() % 8 != 0);
  QByteArray img = image(body, 0);
  const double vals[2] = {1.5, -2.25};
  img.append(reinterpret_cast<const char*>(vals), 16);
  auto g = SafetensorsFile::parse(as_bytes(img));
  QVERIFY2(g.is_ok(), g.status().to_string().c_str());
  const HostTensor as_f32 = g->get("t")->to_host(DType::kF32);
  QCOMPARE(as_f32.f32()[0], 1.5f);
  QCOMPARE(as_f32.f32()[1], -2.25f);
  const HostTensor as_f64 = g->get("t")->to_host();
  QCOMPARE(as_f64.data<double>()[1], -2.25);
  // Header lengths whose first bytes look like a pickle's (0x80, protocol 2..5: 640, 896, 1152,
  // 1408 bytes) are safetensors headers all the same: found by fuzzing the checkpoint detection.
  for (const size_t len : {size_t{640}, size_t{896}, size_t{1152}, size_t{1408}}) {
    const std::string h = body + std::string(len - body.size(), ' ');
    auto k = SafetensorsFile::parse(as_bytes(image(h, 16)));
    QVERIFY2(k.is_ok(), k.status().to_string().c_str());
  }
}

void tst_Safetensors::emptyDataArea() {
  QTemporaryDir dir;
  const fs::path p = fs::path(dir.path().toStdString());
  // No tensors, 0 data bytes.
  write_file(p / "empty_obj.safetensors", image("{}", 0));
  auto a = SafetensorsFile::open(p / "empty_obj.safetensors");
  QVERIFY2(a.is_ok(), a.status().to_string().c_str());
  QVERIFY(a->names().empty());
  QCOMPARE(a->file_size(), uint64_t{10});
  // Only zero-size tensors, with metadata.
  const std::string h = R"({"__metadata__":{"x":"y"},)" + entry("z", "BF16", "[4,0]", "[0,0]") +
                        "," + entry("w", "F32", "[0]", "[0,0]") + "}";
  write_file(p / "zero.safetensors", image(h, 0));
  auto b = SafetensorsFile::open(p / "zero.safetensors");
  QVERIFY2(b.is_ok(), b.status().to_string().c_str());
  QCOMPARE(b->names(), (std::vector<std::string>{"w", "z"}));
  QCOMPARE(b->get("z")->numel(), int64_t{0});
  QCOMPARE(b->get("z")->to_host(DType::kF32).numel(), int64_t{0});
  QCOMPARE(b->metadata().at("x"), std::string("y"));
  // A writer round trip of zero-size tensors only.
  const HostTensor e(DType::kF32, {0});
  const std::vector<NamedTensor> t = {{"e", &e}};
  QVERIFY(write_safetensors(p / "w.safetensors", t).is_ok());
  QVERIFY(SafetensorsFile::open(p / "w.safetensors").is_ok());
  // A 0-byte file (which cannot be mapped) is corrupt, not a crash.
  write_file(p / "zero_bytes.safetensors", QByteArray());
  auto c = SafetensorsFile::open(p / "zero_bytes.safetensors");
  QVERIFY(!c.is_ok());
  QCOMPARE(c.status().code(), StatusCode::kCorruptData);
  QVERIFY(c.status().message().find("too short") != std::string::npos);
}

void tst_Safetensors::getMissingIsNotFound() {
  std::string header = "{";  // appended: `"{" + std::string&&` trips GCC 12's -Wrestrict
  header += entry("x", "F32", "[1]", "[0,4]");
  header += "}";
  auto f = SafetensorsFile::parse(as_bytes(image(header, 4)));
  QVERIFY(f.is_ok());
  QVERIFY(!f->contains("nope"));
  auto v = f->get("nope");
  QVERIFY(!v.is_ok());
  QCOMPARE(v.status().code(), StatusCode::kNotFound);
  QVERIFY2(v.status().message().find("'nope'") != std::string::npos, v.status().message().c_str());
}

void tst_Safetensors::openErrorsNameTheFile() {
  QTemporaryDir dir;
  const fs::path missing = fs::path(dir.path().toStdString()) / "missing.safetensors";
  auto a = SafetensorsFile::open(missing);
  QVERIFY(!a.is_ok());
  QCOMPARE(a.status().code(), StatusCode::kNotFound);
  QVERIFY(a.status().message().find(missing.string()) != std::string::npos);
  // A directory is refused as an OS-level error, not mapped.
  auto b = SafetensorsFile::open(dir.path().toStdString());
  QVERIFY(!b.is_ok());
  QCOMPARE(b.status().code(), StatusCode::kIoError);
  QVERIFY(b.status().message().find(dir.path().toStdString()) != std::string::npos);
}

void tst_Safetensors::goldenTinyWeights() {
  if (!test::have_golden()) QSKIP(test::golden_missing_message().c_str());
  const fs::path path = test::golden_dir() / "tiny" / "weights_fp16.safetensors";
  auto f = SafetensorsFile::open(path);
  QVERIFY2(f.is_ok(), f.status().to_string().c_str());
  QCOMPARE(f->names().size(), size_t{250});
  QCOMPARE(f->metadata().at("config"), std::string("tiny"));
  auto w = f->get("encoder.conv_in.weight");
  QVERIFY2(w.is_ok(), w.status().to_string().c_str());
  QCOMPARE(w->dtype, DType::kF16);
  QCOMPARE(w->shape, (Shape{16, 3, 3, 3, 3}));
  QCOMPARE(w->bytes.size(), size_t{16 * 81 * 2});
  uint16_t first = 0;
  std::memcpy(&first, w->bytes.data(), 2);
  QCOMPARE(first, uint16_t{0x98a2});
  QCOMPARE(w->to_host().data<uint16_t>()[0], uint16_t{0x98a2});
  QCOMPARE(w->to_host(DType::kF32).f32()[0], -0.002262115478515625f);
  // Every tensor is F16 and the views tile the data area in names() order.
  uint64_t total = 0;
  const std::byte* expect = nullptr;
  for (const std::string& name : f->names()) {
    auto v = f->get(name);
    QVERIFY(v.is_ok());
    QCOMPARE(v->dtype, DType::kF16);
    if (expect) QCOMPARE(v->bytes.data(), expect);
    expect = v->bytes.data() + v->bytes.size();
    total += v->bytes.size();
  }
  QCOMPARE(total, uint64_t{7998950});
}

void tst_Safetensors::writerRejectsBadInput() {
  QTemporaryDir dir;
  const fs::path path = fs::path(dir.path().toStdString()) / "bad.safetensors";
  const HostTensor x = ramp(DType::kF32, {2}, 0.0f);
  const std::vector<NamedTensor> dup = {{"x", &x}, {"y", &x}, {"x", &x}};
  Status s = write_safetensors(path, dup);
  QCOMPARE(s.code(), StatusCode::kInvalidArgument);
  QVERIFY2(s.message().find("duplicate") != std::string::npos, s.message().c_str());
  QCOMPARE(serialize_safetensors(dup).status().code(), StatusCode::kInvalidArgument);

  const std::vector<NamedTensor> null_tensor = {{"x", &x}, {"n", nullptr}};
  s = write_safetensors(path, null_tensor);
  QCOMPARE(s.code(), StatusCode::kInvalidArgument);
  QVERIFY2(s.message().find("null") != std::string::npos, s.message().c_str());

  const std::vector<NamedTensor> reserved = {{"__metadata__", &x}};
  QCOMPARE(write_safetensors(path, reserved).code(), StatusCode::kInvalidArgument);

  const std::vector<NamedTensor> bad_utf8 = {{std::string("bad\xff"), &x}};
  QCOMPARE(serialize_safetensors(bad_utf8).status().code(), StatusCode::kInvalidArgument);

  // Nothing at all was created in the directory.
  QVERIFY(dir_entries(path.parent_path()).empty());
}

void tst_Safetensors::atomicWriterLeavesNothing() {
  QTemporaryDir dir;
  const fs::path root = fs::path(dir.path().toStdString());
  const HostTensor x = ramp(DType::kF32, {4}, 0.0f);
  const std::vector<NamedTensor> tensors = {{"x", &x}};

  // The destination directory does not exist: an I/O error naming the file, nothing created.
  const fs::path missing = root / "no_such_dir" / "out.safetensors";
  Status s = write_safetensors(missing, tensors);
  QVERIFY(!s.is_ok());
  QCOMPARE(s.code(), StatusCode::kIoError);
  QVERIFY2(s.message().find("out.safetensors") != std::string::npos, s.message().c_str());
  QVERIFY(!fs::exists(missing));
  QVERIFY(!fs::exists(missing.parent_path()));
  QVERIFY(dir_entries(root).empty());

  // The destination is a directory: the final rename fails and the temporary is removed.
  fs::create_directory(root / "taken.safetensors");
  s = write_safetensors(root / "taken.safetensors", tensors);
  QVERIFY(!s.is_ok());
  QCOMPARE(dir_entries(root), std::vector<fs::path>{"taken.safetensors"});
  QVERIFY(fs::is_directory(root / "taken.safetensors"));
  QVERIFY(fs::is_empty(root / "taken.safetensors"));
}

// write_safetensors_streamed: the same file as write_safetensors, each tensor asked for once in
// the file's (name) order; a producer's error, or a tensor other than declared, leaves no file.
void tst_Safetensors::streamedWriterWritesTheSameBytes() {
  QTemporaryDir dir;
  const fs::path root = fs::path(dir.path().toStdString());
  const HostTensor a = ramp(DType::kBF16, {2, 3}, 1.0f);
  const HostTensor b = ramp(DType::kF32, {5}, -2.0f);
  const std::vector<NamedTensor> named = {{"z/b", &b}, {"a", &a}};
  const std::map<std::string, std::string> meta{{"k", "v"}};
  QVERIFY(write_safetensors(root / "whole.safetensors", named, meta).is_ok());
  const std::vector<StreamedTensor> specs = {{"z/b", DType::kF32, Shape{5}},
                                             {"a", DType::kBF16, Shape{2, 3}}};
  std::vector<size_t> asked;
  const Status st = write_safetensors_streamed(
      root / "streamed.safetensors", specs,
      [&](size_t i) -> Result<HostTensor> {
        asked.push_back(i);
        return i == 0 ? b : a;
      },
      meta);
  QVERIFY2(st.is_ok(), st.to_string().c_str());
  QCOMPARE(asked, (std::vector<size_t>{1, 0}));
  QVERIFY(read_file(root / "streamed.safetensors") == read_file(root / "whole.safetensors"));

  const Status failed = write_safetensors_streamed(
      root / "failed.safetensors", specs, [&](size_t i) -> Result<HostTensor> {
        if (i == 0) return io_error("injected: the device went away");
        return a;
      });
  QVERIFY(!failed.is_ok());
  QVERIFY2(failed.message().find("injected") != std::string::npos, failed.message().c_str());
  const Status wrong = write_safetensors_streamed(root / "wrong.safetensors", specs,
                                                  [&](size_t) -> Result<HostTensor> { return b; });
  QCOMPARE(wrong.code(), StatusCode::kInternal);
  std::vector<fs::path> left = dir_entries(root);
  std::sort(left.begin(), left.end());
  QCOMPARE(left, (std::vector<fs::path>{"streamed.safetensors", "whole.safetensors"}));
}

void tst_Safetensors::hostile_data() {
  QTest::addColumn<QByteArray>("bytes");
  QTest::addColumn<seedvae::StatusCode>("code");
  QTest::addColumn<QString>("word");
  const auto C = StatusCode::kCorruptData;
  const std::string t4 = entry("t", "F32", "[1]", "[0,4]");  // a valid 4-byte tensor

  // A valid file to truncate.
  const std::string ok_header =
      "{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F16", "[2]", "[8,12]") + "}";
  const QByteArray ok = image(ok_header, 12);
  QVERIFY(SafetensorsFile::parse(as_bytes(ok)).is_ok());
  QTest::newRow("truncated to 0") << QByteArray() << C << "too short";
  QTest::newRow("truncated to 1") << ok.left(1) << C << "too short";
  QTest::newRow("truncated to 7") << ok.left(7) << C << "too short";
  QTest::newRow("truncated to 8") << ok.left(8) << C << "exceeds the file size";
  QTest::newRow("truncated in header")
      << ok.left(8 + qsizetype(ok_header.size()) / 2) << C << "exceeds the file size";
  QTest::newRow("truncated at data start")
      << ok.left(8 + qsizetype(ok_header.size())) << C << "outside the data area";
  QTest::newRow("truncated in data") << ok.left(ok.size() - 3) << C << "outside the data area";

  QTest::newRow("header len > file") << image("{}", 0, 1000) << C << "exceeds the file size";
  QTest::newRow("header len > 100MB") << image("{}", 0, 100'000'001) << C << "limit";
  QTest::newRow("header len 2^64-1") << image("{}", 0, ~uint64_t{0}) << C << "limit";

  QTest::newRow("empty header") << image("", 0) << C << "malformed JSON";
  QTest::newRow("bad JSON") << image(R"({"a":{"dtype":"F32",)", 0) << C << "malformed JSON";
  QTest::newRow("bad JSON literal") << image("{\"a\": nul}", 0) << C << "malformed JSON";
  QTest::newRow("trailing garbage") << image("{} x", 0) << C << "malformed JSON";
  QTest::newRow("trailing NUL padding")
      << image(std::string("{}\0\0", 4), 0) << C << "malformed JSON";
  QTest::newRow("invalid UTF-8 key") << image("{\"\xff\":{}}", 0) << C << "malformed JSON";
  QTest::newRow("JSON array") << image("[]", 0) << C << "not a JSON object";
  QTest::newRow("JSON string") << image("\"x\"", 0) << C << "not a JSON object";
  QTest::newRow("JSON number") << image("12", 0) << C << "not a JSON object";
  QTest::newRow("entry not object") << image(R"({"t":[1,2]})", 0) << C << "not a JSON object";
  QTest::newRow("entry null") << image(R"({"t":null})", 0) << C << "not a JSON object";

  QTest::newRow("duplicate key top level")
      << image("{" + t4 + "," + t4 + "}", 4) << C << "duplicate";
  QTest::newRow("duplicate key in entry")
      << image(R"({"t":{"dtype":"F32","shape":[1],"dtype":"F32","data_offsets":[0,4]}})", 4) << C
      << "duplicate";
  QTest::newRow("duplicate metadata")
      << image(R"({"__metadata__":{"k":"a","k":"b"}})", 0) << C << "duplicate";
  QTest::newRow("duplicate __metadata__")
      << image(R"({"__metadata__":{},"__metadata__":{}})", 0) << C << "duplicate";

  QTest::newRow("missing dtype") << image(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", 4) << C
                                 << "missing";
  QTest::newRow("missing shape") << image(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", 4) << C
                                 << "missing";
  QTest::newRow("missing offsets")
      << image(R"({"t":{"dtype":"F32","shape":[1]}})", 4) << C << "missing";
  QTest::newRow("extra field")
      << image(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", 4) << C
      << "unknown field";
  QTest::newRow("dtype not string")
      << image(R"({"t":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", 4) << C << "not a string";
  QTest::newRow("shape not array")
      << image(R"({"t":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", 4) << C << "not an array";
  QTest::newRow("shape nested array")
      << image("{" + entry("t", "F32", "[[1]]", "[0,4]") + "}", 4) << C << "shape dimension";
  QTest::newRow("shape string dim")
      << image("{" + entry("t", "F32", "[\"1\"]", "[0,4]") + "}", 4) << C << "shape dimension";

  QTest::newRow("unknown dtype") << image("{" + entry("t", "F17", "[1]", "[0,4]") + "}", 4) << C
                                 << "unknown dtype";
  QTest::newRow("unsupported dtype I8") << image("{" + entry("t", "I8", "[4]", "[0,4]") + "}", 4)
                                        << StatusCode::kUnsupported << "unsupported dtype";
  QTest::newRow("negative dim") << image("{" + entry("t", "F32", "[-1]", "[0,4]") + "}", 4) << C
                                << "negative";
  QTest::newRow("non-integer dim")
      << image("{" + entry("t", "F32", "[1.0]", "[0,4]") + "}", 4) << C << "non-integer";
  QTest::newRow("dim beyond uint64")
      << image("{" + entry("t", "F32", "[18446744073709551616]", "[0,4]") + "}", 4) << C
      << "non-integer";
  QTest::newRow("dim beyond int64")
      << image("{" + entry("t", "F32", "[9223372036854775808]", "[0,4]") + "}", 4) << C
      << "overflows";
  QTest::newRow("overflowing shape")
      << image("{" + entry("t", "F32", "[4294967296,4294967296]", "[0,4]") + "}", 4) << C
      << "overflows";
  QTest::newRow("overflowing byte size")
      << image("{" + entry("t", "F64", "[2305843009213693952]", "[0,4]") + "}", 4) << C
      << "overflows";

  QTest::newRow("offsets one element")
      << image("{" + entry("t", "F32", "[1]", "[4]") + "}", 4) << C << "exactly two";
  QTest::newRow("offsets three elements")
      << image("{" + entry("t", "F32", "[1]", "[0,4,4]") + "}", 4) << C << "exactly two";
  QTest::newRow("offsets not array")
      << image("{" + entry("t", "F32", "[1]", "\"0-4\"") + "}", 4) << C << "exactly two";
  QTest::newRow("offsets negative")
      << image("{" + entry("t", "F32", "[1]", "[-4,0]") + "}", 4) << C << "negative";
  QTest::newRow("offsets float") << image("{" + entry("t", "F32", "[1]", "[0,4.5]") + "}", 4) << C
                                 << "non-integer";
  QTest::newRow("offsets reversed")
      << image("{" + entry("t", "F32", "[0]", "[4,0]") + "}", 4) << C << "begin after end";
  QTest::newRow("wrong byte count")
      << image("{" + entry("t", "F32", "[2]", "[0,4]") + "}", 4) << C << "needs 8 bytes";
  QTest::newRow("offsets beyond data")
      << image("{" + entry("t", "F32", "[1]", "[4,8]") + "}", 4) << C << "outside the data area";
  QTest::newRow("offsets beyond uint64")
      << image("{" + entry("t", "F32", "[1]", "[18446744073709551612,18446744073709551616]") + "}",
               4)
      << C << "non-integer";
  QTest::newRow("offsets near 2^64")
      << image("{" + entry("t", "F32", "[1]", "[18446744073709551611,18446744073709551615]") + "}",
               4)
      << C << "outside the data area";
  QTest::newRow("overlapping") << image("{" + entry("a", "F32", "[2]", "[0,8]") + "," +
                                            entry("b", "F32", "[1]", "[4,8]") + "}",
                                        8)
                               << C << "overlaps";
  QTest::newRow("identical ranges") << image("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                                                 entry("b", "F32", "[1]", "[0,4]") + "}",
                                             4)
                                    << C << "overlaps";
  QTest::newRow("zero-size inside another") << image("{" + entry("a", "F32", "[2]", "[0,8]") + "," +
                                                         entry("z", "F32", "[0]", "[4,4]") + "}",
                                                     8)
                                            << C << "overlaps";
  QTest::newRow("gap") << image("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                                    entry("b", "F32", "[1]", "[8,12]") + "}",
                                12)
                       << C << "gap";
  QTest::newRow("gap at start") << image("{" + entry("a", "F32", "[1]", "[4,8]") + "}", 8) << C
                                << "gap";
  QTest::newRow("trailing bytes") << image("{" + t4 + "}", 5) << C << "trailing bytes";
  QTest::newRow("data but no tensors") << image("{}", 1) << C << "trailing bytes";

  QTest::newRow("metadata non-string")
      << image(R"({"__metadata__":{"k":1}})", 0) << C << "not a string";
  QTest::newRow("metadata nested object")
      << image(R"({"__metadata__":{"k":{}}})", 0) << C << "not a string";
  QTest::newRow("metadata not object")
      << image(R"({"__metadata__":"x"})", 0) << C << "__metadata__ is not a JSON object";
}

void tst_Safetensors::hostile() {
  QFETCH(QByteArray, bytes);
  QFETCH(seedvae::StatusCode, code);
  QFETCH(QString, word);
  auto f = SafetensorsFile::parse(as_bytes(bytes));
  QVERIFY2(!f.is_ok(), "a hostile image was accepted");
  const std::string msg = f.status().message();
  QVERIFY2(f.status().code() == code, f.status().to_string().c_str());
  QVERIFY2(msg.find(word.toStdString()) != std::string::npos, msg.c_str());
  QVERIFY2(msg.find("in-memory safetensors image") != std::string::npos, msg.c_str());
}

void tst_Safetensors::hostileFileNamesPath() {
  // Through open(): the message names the file path.
  QTemporaryDir dir;
  const fs::path p = fs::path(dir.path().toStdString()) / "hostile.safetensors";
  write_file(p, image("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                          entry("a", "F32", "[1]", "[0,4]") + "}",
                      4));
  auto f = SafetensorsFile::open(p);
  QVERIFY(!f.is_ok());
  QCOMPARE(f.status().code(), StatusCode::kCorruptData);
  QVERIFY2(f.status().message().find(p.string()) != std::string::npos,
           f.status().message().c_str());
  QVERIFY2(f.status().message().find("duplicate") != std::string::npos,
           f.status().message().c_str());
}

void tst_Safetensors::deepNestingDoesNotCrash() {
  // 1M nested arrays at the top, and inside a shape: rejected at the first bracket, no recursion.
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  auto a = SafetensorsFile::parse(as_bytes(image(deep, 0)));
  QCOMPARE(a.status().code(), StatusCode::kCorruptData);
  const std::string in_shape = R"({"t":{"dtype":"F32","shape":)" + deep + "}}";
  auto b = SafetensorsFile::parse(as_bytes(image(in_shape, 0)));
  QCOMPARE(b.status().code(), StatusCode::kCorruptData);
  const std::string objs = std::string(500'000, '{');
  auto c = SafetensorsFile::parse(as_bytes(image(objs, 0)));
  QCOMPARE(c.status().code(), StatusCode::kCorruptData);
}

QTEST_GUILESS_MAIN(tst_Safetensors)
#include "tst_safetensors.moc"
