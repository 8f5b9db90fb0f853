// core/io's .pth reader: the restricted unpickler (torch_pickle.h), the stored-entry zip reader
// (zip_archive.h) and TorchCheckpoint on top of them. Positive cases read small synthetic files
// written by tests/io/pth_writer.h; hostile cases are one data-driven row each, checking the
// status code and a phrase of the message.
#include <QtTest>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/io/safetensors.h"
#include "core/io/tensor_file.h"
#include "core/io/torch_checkpoint.h"
#include "core/io/torch_pickle.h"
#include "core/io/zip_archive.h"
#include "tests/io/pth_writer.h"

using namespace seedvae;
using namespace seedvae::test;
namespace fs = std::filesystem;

Q_DECLARE_METATYPE(seedvae::StatusCode)
Q_DECLARE_METATYPE(std::string)

namespace {

std::vector<std::byte> f32_bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<std::byte> pattern(size_t n) {
  std::vector<std::byte> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>(i * 7 + 3);
  return b;
}

PthTensor f32(const std::string& name, std::vector<int64_t> shape) {
  PthTensor t;
  t.name = name;
  t.dtype = DType::kF32;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 1.0f;
  t.data = f32_bytes(v);
  t.shape = std::move(shape);
  return t;
}

// A pickle of the common head (PROTO 2, an OrderedDict, MARK) with `body` and the tail.
std::string dict_pickle(const std::string& body) {
  Pickle p;
  p.proto().global("collections", "OrderedDict").op(')').op('R').put(0).mark();
  p.raw(body);
  p.op('u').stop();
  return p.bytes;
}

// One tensor entry: name, _rebuild_tensor_v2(persid(storage...), offset, size, stride, False,
// OD()).
std::string tensor_entry(const std::string& name, const std::string& storage_cls, int64_t numel,
                         int64_t offset, const std::vector<int64_t>& size,
                         const std::vector<int64_t>& stride, const std::string& key = "0") {
  Pickle p;
  p.str(name).global("torch._utils", "_rebuild_tensor_v2").mark();
  p.mark().str("storage").global("torch", storage_cls).str(key).str("cpu").integer(numel).op('t');
  p.op('Q').integer(offset).int_tuple(size).int_tuple(stride).op(0x89);
  p.global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
  return p.bytes;
}

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace

class tst_TorchCheckpoint : public QObject {
  Q_OBJECT

 private slots:
  // ---- valid files ------------------------------------------------------------------------------

  void readsEveryDtypeInOrder() {
    std::vector<PthTensor> ts;
    ts.push_back(f32("z.weight", {2, 3}));
    PthTensor h;
    h.name = "a.half";
    h.dtype = DType::kF16;
    h.shape = {4};
    h.data = pattern(8);
    ts.push_back(h);
    PthTensor b = h;
    b.name = "m.bf16";
    b.dtype = DType::kBF16;
    ts.push_back(b);
    PthTensor d;
    d.name = "scalar";
    d.dtype = DType::kF64;
    d.shape = {};
    d.data = pattern(8);
    ts.push_back(d);
    PthTensor e = f32("empty", {0, 5});
    ts.push_back(e);
    for (bool p4 : {false, true}) {
      for (bool z64 : {false, true}) {
        const std::string file = pth_file(ts, {.metadata = !p4, .protocol4 = p4},
                                          {.zip64_end = !z64, .zip64_extra = z64});
        auto r = TorchCheckpoint::parse(as_span(file));
        QVERIFY2(r.is_ok(), r.status().to_string().c_str());
        const std::vector<std::string> want{"z.weight", "a.half", "m.bf16", "scalar", "empty"};
        QCOMPARE(r->names(), want);  // the state dict's order, not sorted
        auto w = r->get("z.weight");
        QVERIFY(w.is_ok());
        QCOMPARE(w->dtype, DType::kF32);
        QCOMPARE(w->shape, Shape({2, 3}));
        const HostTensor host = w->to_host();
        QCOMPARE(host.f32()[5], 1.5f);
        QCOMPARE(r->get("a.half")->dtype, DType::kF16);
        QCOMPARE(r->get("m.bf16")->dtype, DType::kBF16);
        auto s = r->get("scalar");
        QCOMPARE(s->dtype, DType::kF64);
        QCOMPARE(s->shape.rank(), 0);
        QCOMPARE(s->bytes.size(), size_t{8});
        QVERIFY(std::memcmp(s->bytes.data(), d.data.data(), 8) == 0);
        QCOMPARE(r->get("empty")->bytes.size(), size_t{0});
        QCOMPARE(r->container(), std::string_view("PyTorch zip (.pth)"));
        QVERIFY(r->metadata().empty());
        QCOMPARE(r->get("nope").status().code(), StatusCode::kNotFound);
        // PyTorch's layout: storage data 64-byte aligned in the file.
        if (!z64) {
          const auto* base = reinterpret_cast<const std::byte*>(file.data());
          (void)base;
          QCOMPARE((w->bytes.data() - r->get("a.half")->bytes.data()) % 64, 0);
        }
      }
    }
  }

  // Views into one shared storage (offsets in elements), and size-1 dimensions with any stride.
  void sharedStorageAndOffsets() {
    PthTensor a = f32("a", {2, 2});
    a.data = f32_bytes({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    a.key = "s";
    PthTensor b = a;
    b.name = "b";
    b.offset = 6;
    b.shape = {4, 1};
    b.stride = {1, 99};
    const std::string file = pth_file({a, b});
    auto r = TorchCheckpoint::parse(as_span(file));
    QVERIFY2(r.is_ok(), r.status().to_string().c_str());
    const HostTensor hb = r->get("b")->to_host();
    QCOMPARE(hb.f32()[0], 6.0f);
    QCOMPARE(hb.f32()[3], 9.0f);
    QCOMPARE(r->get("a")->to_host(DType::kF16).shape(), Shape({2, 2}));
  }

  void opensFromDiskByContent() {
    QTemporaryDir dir;
    const fs::path p = fs::path(dir.path().toStdString()) / "weights.bin";  // no telling name
    {
      const std::string file = pth_file({f32("w", {3})});
      std::ofstream(p, std::ios::binary)
          .write(file.data(), static_cast<std::streamsize>(file.size()));
    }
    auto f = open_tensor_file(p);
    QVERIFY2(f.is_ok(), f.status().to_string().c_str());
    QCOMPARE((*f)->container(), std::string_view("PyTorch zip (.pth)"));
    QCOMPARE((*f)->path(), p);
    QCOMPARE((*f)->get("w")->shape, Shape({3}));
    // A legacy (pre-1.6) torch.save file is a bare pickle: named, not read.
    const fs::path legacy = fs::path(dir.path().toStdString()) / "legacy.pth";
    std::ofstream(legacy, std::ios::binary)
        << std::string("\x80\x02\x8a\x0alz", 5) << std::string(64, 'x');
    auto l = open_tensor_file(legacy);
    QVERIFY(!l.is_ok());
    QVERIFY2(l.status().message().find("PyTorch checkpoint") != std::string::npos,
             l.status().message().c_str());
    // A missing file.
    QCOMPARE(open_tensor_file(fs::path(dir.path().toStdString()) / "none.pth").status().code(),
             StatusCode::kNotFound);
  }

  // ---- hostile pickles --------------------------------------------------------------------------

  void hostilePickle_data() {
    QTest::addColumn<std::string>("pickle");
    QTest::addColumn<std::string>("phrase");
    const std::string ok_tensor = tensor_entry("w", "FloatStorage", 6, 0, {2, 3}, {3, 1});
    auto add = [](const char* row, const std::string& p, const std::string& phrase) {
      QTest::newRow(row) << p << phrase;
    };
    {
      Pickle p;
      p.proto().global("os", "system").str("echo owned").op(0x85).op('R').stop();
      add("global os.system", p.bytes, "unknown global 'os.system'");
    }
    {
      Pickle p;
      p.proto().global("builtins", "eval");
      add("global builtins.eval", p.bytes, "unknown global 'builtins.eval'");
    }
    {
      Pickle p;
      p.proto(4).short_str("subprocess").short_str("Popen").op(0x93);
      add("STACK_GLOBAL subprocess.Popen", p.bytes, "unknown global 'subprocess.Popen'");
    }
    add("rebuild_parameter",
        dict_pickle(Pickle().str("w").global("torch._utils", "_rebuild_parameter").bytes),
        "unknown global 'torch._utils._rebuild_parameter'");
    {
      Pickle p;
      p.proto().global("torch", "FloatStorage").op(')').op('R');
      add("REDUCE of a storage class", p.bytes, "REDUCE calls 'torch.FloatStorage'");
    }
    {
      Pickle p;
      p.proto().str("os.system").op(')').op('R');
      add("REDUCE of a string", p.bytes, "REDUCE calls a string");
    }
    {
      Pickle p;
      p.proto().global("collections", "OrderedDict").str("x").op(0x85).op('R');
      add("OrderedDict with arguments", p.bytes, "called with arguments");
    }
    add("INST", Pickle().proto().raw("ios\nsystem\n").bytes, "opcode INST is not allowed");
    add("OBJ", Pickle().proto().mark().op('o').bytes, "opcode OBJ is not allowed");
    add("NEWOBJ", Pickle().proto().op(0x81).bytes, "opcode NEWOBJ is not allowed");
    add("EXT1", Pickle().proto().op(0x82).op(1).bytes, "opcode EXT1 is not allowed");
    add("unknown opcode", Pickle().proto().op(0xff).bytes, "unknown opcode 0xff");
    add("protocol 1", Pickle().proto(1).bytes, "pickle protocol 1");
    // Recursive structures and memo abuse.
    add("dict containing itself",
        Pickle().proto().op('}').put(0).str("a").get(0).op('s').stop().bytes,
        "would contain itself");
    add("list containing itself", Pickle().proto().op(']').put(0).get(0).op('a').stop().bytes,
        "would contain itself");
    add("BUILD with itself", Pickle().proto().op('}').put(0).get(0).op('b').stop().bytes,
        "its own state");
    add("memo read before set", Pickle().proto().get(5).bytes,
        "memo entry 5 is read but was never set");
    add("long memo read", Pickle().proto().op('j').le(0xFFFFFFFF, 4).bytes,
        "memo entry 4294967295 is read");
    add("memo put on empty stack", Pickle().proto().put(0).bytes, "empty stack");
    // A dict mutated after a tuple took it (through the memo): the way to build cycles.
    add("mutate a held dict",
        Pickle().proto().op('}').put(0).op(0x85).get(0).str("k").str("v").op('s').stop().bytes,
        "another object already holds");
    {
      Pickle p;
      p.proto().op('N');
      for (int i = 0; i < 200; ++i) p.op(0x85);
      add("deep nesting", p.bytes, "nested more than 32 deep");
    }
    // Truncation and stack errors.
    {
      const std::string whole = dict_pickle(ok_tensor);
      add("truncated at half", whole.substr(0, whole.size() / 2), "truncated");
      add("truncated before STOP", whole.substr(0, whole.size() - 1), "ends without STOP");
      add("bytes after STOP", whole + "N", "1 bytes follow STOP");
    }
    add("truncated BINUNICODE", Pickle().proto().op('X').le(1000, 4).raw("abc").bytes,
        "BINUNICODE needs 1000 bytes");
    add("truncated GLOBAL", Pickle().proto().raw("ccollections").bytes, "not a line");
    add("SETITEM on empty stack", Pickle().proto().op('s').bytes, "SETITEM on an empty stack");
    add("TUPLE without MARK", Pickle().proto().op('N').op('t').bytes, "TUPLE without a MARK");
    add("SETITEMS odd", Pickle().proto().op('}').mark().str("a").op('u').bytes, "odd item count");
    add("STOP with open MARK", Pickle().proto().op('}').mark().stop().bytes, "open MARK");
    add("two objects at STOP", Pickle().proto().op('}').op('}').stop().bytes, "2 objects");
    // Keys and values.
    add("duplicate key", dict_pickle(ok_tensor + ok_tensor), "duplicate key 'w'");
    add("non-string key",
        dict_pickle(
            Pickle().integer(1).raw(ok_tensor.substr(Pickle().str("w").bytes.size())).bytes),
        "a dict key is an int");
    add("value not a tensor", dict_pickle(Pickle().str("w").integer(1).bytes),
        "entry 'w' is an int, not a tensor");
    add("not a dict", Pickle().proto().op('N').stop().bytes, "holds None, not a state dict");
    add("invalid UTF-8 key", Pickle().proto().op('X').le(2, 4).raw("\xc3\x28").bytes,
        "not valid UTF-8");
    add("LONG1 over 64 bits", Pickle().proto().op(0x8a).op(9).raw(std::string(9, '\x01')).bytes,
        "over 64 bits");
    // Tensor records.
    add("storage out of range",
        dict_pickle(tensor_entry("w", "FloatStorage", 6, 1, {2, 3}, {3, 1})),
        "reads elements [1, 7) beyond the storage's 6 elements");
    add("negative size", dict_pickle(tensor_entry("w", "FloatStorage", 6, 0, {-2, 3}, {3, 1})),
        "negative size -2");
    add("negative offset", dict_pickle(tensor_entry("w", "FloatStorage", 6, -1, {2, 3}, {3, 1})),
        "negative storage offset");
    add("negative storage size",
        dict_pickle(tensor_entry("w", "FloatStorage", -6, 0, {2, 3}, {3, 1})), "negative size -6");
    add("huge shape overflows",
        dict_pickle(tensor_entry("w", "FloatStorage", 6, 0, {int64_t{1} << 62, 8}, {8, 1})),
        "element count overflows");
    add("huge shape beyond storage",
        dict_pickle(tensor_entry("w", "FloatStorage", 6, 0, {int64_t{1} << 40}, {1})),
        "beyond the storage's 6 elements");
    add("huge offset", dict_pickle(tensor_entry("w", "FloatStorage", 6, INT64_MAX, {2}, {1})),
        "beyond the storage's 6 elements");
    add("non-contiguous strides",
        dict_pickle(tensor_entry("w", "FloatStorage", 6, 0, {2, 3}, {1, 2})),
        "non-contiguous strides [1, 2] (expected [3, 1])");
    add("stride count", dict_pickle(tensor_entry("w", "FloatStorage", 6, 0, {2, 3}, {3})),
        "2 sizes but 1 strides");
    add("unsupported storage class", dict_pickle(tensor_entry("w", "LongStorage", 6, 0, {6}, {1})),
        "unknown global 'torch.LongStorage'");
    add("storage key with a slash",
        dict_pickle(tensor_entry("w", "FloatStorage", 6, 0, {6}, {1}, "../x")),
        "not a plain record name");
    add("storage key with control bytes",
        dict_pickle(
            tensor_entry("w", "FloatStorage", 6, 0, {6}, {1}, std::string("\x01\0\0\0005", 5))),
        "not a plain record name");
    add("storage declared twice",
        dict_pickle(ok_tensor + tensor_entry("v", "HalfStorage", 6, 0, {6}, {1})),
        "declared twice");
    add("persid not a storage tuple", Pickle().proto().str("x").op('Q').bytes,
        "persistent id is a string");
    add("rebuild with a string storage",
        dict_pickle(Pickle()
                        .str("w")
                        .global("torch._utils", "_rebuild_tensor_v2")
                        .mark()
                        .str("s")
                        .integer(0)
                        .op(')')
                        .op(')')
                        .op(0x89)
                        .op('N')
                        .op('t')
                        .op('R')
                        .bytes),
        "storage is a string");
    add("BUILD on a tensor",
        Pickle()
            .proto()
            .raw(ok_tensor.substr(Pickle().str("w").bytes.size()))
            .op('}')
            .op('b')
            .bytes,
        "BUILD sets the state of a tensor from a dict");
    add("BUILD with a list state", Pickle().proto().op('}').op(']').op('b').stop().bytes,
        "BUILD sets the state of a dict from a list");
  }

  void hostilePickle() {
    QFETCH(std::string, pickle);
    QFETCH(std::string, phrase);
    auto r = unpickle_state_dict(as_span(pickle), "test.pkl");
    QVERIFY(!r.is_ok());
    QCOMPARE(r.status().code(), StatusCode::kCorruptData);
    QVERIFY2(r.status().message().find(phrase) != std::string::npos,
             qPrintable(q(r.status().message()) + "\n  expected: " + q(phrase)));
    QVERIFY2(r.status().message().rfind("test.pkl: ", 0) == 0, r.status().message().c_str());
  }

  void pickleSizeLimit() {
    const std::string p = dict_pickle(tensor_entry("w", "FloatStorage", 6, 0, {6}, {1}));
    QVERIFY(unpickle_state_dict(as_span(p), "x").is_ok());
    auto r = unpickle_state_dict(as_span(p), "x", {.max_bytes = 16});
    QVERIFY(!r.is_ok());
    QVERIFY(r.status().message().find("exceeds the limit of 16 bytes") != std::string::npos);
    // A pickle of one-byte opcodes, each making an object.
    Pickle many;
    many.proto();
    for (int i = 0; i < 100; ++i) many.op('N');
    auto m = unpickle_state_dict(as_span(many.bytes), "x", {.max_objects = 50});
    QVERIFY(!m.is_ok());
    QVERIFY2(m.status().message().find("more than 50 objects") != std::string::npos,
             m.status().message().c_str());
  }

  // ---- hostile archives -------------------------------------------------------------------------

  void hostileArchive_data() {
    QTest::addColumn<std::string>("file");
    QTest::addColumn<StatusCode>("code");
    QTest::addColumn<std::string>("phrase");
    const std::vector<PthTensor> ts{f32("a", {2, 3}), f32("b", {4})};
    const std::string pickle = state_dict_pickle(ts);
    auto records = [&] { return pth_records(ts, pickle); };
    auto add = [](const char* row, const std::string& f, StatusCode c, const std::string& phrase) {
      QTest::newRow(row) << f << c << phrase;
    };
    const StatusCode kC = StatusCode::kCorruptData, kU = StatusCode::kUnsupported;
    {
      auto r = records();
      r[2].data.pop_back();  // archive/data/0: one byte short
      add("storage size differs", zip_archive(r), kC,
          "storage '0' declares 6 fp32 elements, but 'archive/data/0' holds 23 bytes");
    }
    {
      auto r = records();
      r.erase(r.begin() + 3);  // archive/data/1
      add("storage record missing", zip_archive(r), kC, "has no record 'archive/data/1'");
    }
    {
      auto r = records();
      r[2].declared = int64_t{1} << 40;  // a stored entry claiming a terabyte (zip64 sizes)
      add("declared size beyond the file", zip_archive(r, {.zip64_extra = true}), kC,
          "declares 1099511627776 bytes");
      r[2].declared = 0xFFFFFFFE;
      add("declared 4 GiB", zip_archive(r), kC, "declares 4294967294 bytes");
    }
    {
      auto r = records();
      r[2].method = 8;
      add("deflated entry", zip_archive(r), kU, "is compressed (method 8, deflate)");
      r[2].method = 12;
      add("bzip2 entry", zip_archive(r), kU, "is compressed (method 12");
    }
    {
      auto r = records();
      r[0].bad_crc = true;
      add("data.pkl CRC", zip_archive(r), kC, "fails its CRC-32 check");
    }
    {
      auto r = records();
      r.push_back(r[2]);
      add("duplicate entry", zip_archive(r), kC, "duplicate entry 'archive/data/0'");
    }
    {
      auto r = records();
      r[1].data = "big";
      add("big-endian", zip_archive(r), kU, "big-endian");
    }
    {
      auto r = records();
      r.push_back({"other/x", "1"});
      add("two top folders", zip_archive(r), kC, "more than one top folder");
    }
    {
      auto r = records();
      r.erase(r.begin());
      add("no data.pkl", zip_archive(r), kC, "no 'archive/data.pkl'");
      r.push_back({"archive/constants.pkl", "x"});
      add("TorchScript", zip_archive(r), kU, "TorchScript");
    }
    add("not in a folder", zip_archive({{"data.pkl", pickle}}), kC, "not inside a top folder");
    add("empty archive", zip_archive({}), kC, "empty zip archive");
    {
      const std::string whole = zip_archive(records());
      add("truncated archive", whole.substr(0, whole.size() / 2), kC,
          "no zip end-of-central-directory record");
      add("tiny file", std::string("PK\x03\x04", 4), kC, "too short for a zip archive");
      std::string no64 = zip_archive(records(), {.zip64_end = false});
      // Entry count 0xFFFF in the plain end record without a zip64 locator.
      no64[no64.size() - 12] = '\xff';
      no64[no64.size() - 11] = '\xff';
      no64[no64.size() - 14] = '\xff';
      no64[no64.size() - 13] = '\xff';
      add("zip64 values without locator", no64, kC, "no zip64 locator");
      // A zip64 end record claiming 2^40 entries.
      std::string many = whole;
      const size_t rec = many.size() - 22 - 20 - 56;
      for (size_t k : {rec + 24, rec + 32}) {
        for (int i = 0; i < 8; ++i) many[k + static_cast<size_t>(i)] = i == 5 ? '\x01' : '\0';
      }
      add("2^40 entries", many, kC, "above the limit");
      // The central directory offset pointing past the end.
      std::string cd = whole;
      cd[rec + 48 + 4] = '\x7f';
      add("central directory outside", cd, kC, "lies outside the archive");
      // Split archives.
      std::string split = whole;
      split[split.size() - 22 - 20 + 16] = '\x02';  // locator: 2 disks
      add("multi-disk", split, kU, "multi-disk");
    }
    {
      // Entry 'archive/data.pkl' (stored first) made to run over the next entry's header.
      auto r = records();
      std::string z = zip_archive(r);
      const std::string next = "archive/byteorder";
      const size_t next_local = z.find(next) - 30;
      const size_t pkl_data = z.find(pickle);
      const uint64_t grown = next_local + 10 - pkl_data;
      // The central entry of data.pkl: its sizes at +20/+24 of its header.
      const size_t central = z.rfind(std::string("PK\x01\x02", 4), z.rfind("archive/data.pkl"));
      for (size_t k : {central + 20, central + 24}) {
        for (int i = 0; i < 4; ++i)
          z[k + static_cast<size_t>(i)] = static_cast<char>((grown >> (8 * i)) & 0xFF);
      }
      QVERIFY(central != std::string::npos);
      add("overlapping entries", z, kC, "overlap");
    }
    {
      auto r = records();
      std::string z = zip_archive(r);
      // The central entry's local-header offset of data.pkl pointing into the middle of a file.
      const size_t central = z.rfind(std::string("PK\x01\x02", 4), z.rfind("archive/data.pkl"));
      z[central + 42] = '\x05';
      add("bad local header offset", z, kC, "no local file header");
    }
  }

  void hostileArchive() {
    QFETCH(std::string, file);
    QFETCH(StatusCode, code);
    QFETCH(std::string, phrase);
    auto r = TorchCheckpoint::parse(as_span(file));
    QVERIFY(!r.is_ok());
    QVERIFY2(r.status().code() == code, r.status().to_string().c_str());
    QVERIFY2(r.status().message().find(phrase) != std::string::npos,
             qPrintable(q(r.status().message()) + "\n  expected: " + q(phrase)));
  }

  void pickleCapAppliesToTheEntry() {
    const std::string file = pth_file({f32("w", {3})});
    auto r = TorchCheckpoint::parse(as_span(file), {.max_bytes = 64});
    QVERIFY(!r.is_ok());
    QVERIFY2(r.status().message().find("exceeds the pickle limit of 64 bytes") != std::string::npos,
             r.status().message().c_str());
  }

  void crc32KnownValue() {
    const std::string s = "123456789";
    QCOMPARE(crc32(as_span(s)), 0xCBF43926u);
  }
};

QTEST_GUILESS_MAIN(tst_TorchCheckpoint)
#include "tst_torch_checkpoint.moc"
