#include "core/io/output_path.h"

#include <cstdio>
#include <random>
#include <system_error>

#include "core/base/atomic_file.h"
#include "core/io/mapped_file.h"

namespace seedvae {

namespace fs = std::filesystem;

namespace {

std::string quoted(const fs::path& p) {
  std::string s;  // appended, not '+': GCC 12 warns falsely on "'" + std::string
  s += '\'';
  s += p.string();
  s += '\'';
  return s;
}

// "out/frames/" -> "out/frames": the name a writer creates.
fs::path without_trailing_separators(fs::path p) {
  while (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p;
}

fs::path directory_of(const fs::path& p) {
  fs::path d = p.parent_path();
  return d.empty() ? fs::path(".") : d;
}

fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  if (ec) c = fs::absolute(p, ec).lexically_normal();
  return c;
}

// The OS's reason at the end of a FileWriter message ("cannot create X: Permission denied").
std::string reason_of(const Status& st) {
  const std::string& m = st.message();
  const size_t colon = m.rfind(": ");
  return colon == std::string::npos ? m : m.substr(colon + 2);
}

}  // namespace

bool same_file(const fs::path& a, const fs::path& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) {
    std::error_code ec;
    const bool same = fs::equivalent(a, b, ec);  // device and inode: hard and symbolic links
    if (!ec) return same;
  }
  return resolved(a) == resolved(b);
}

Status check_output_path(const fs::path& output, std::span<const PathInput> inputs) {
  const fs::path dest = without_trailing_separators(output);
  if (dest.empty() || !dest.has_filename()) {
    return invalid_argument("no usable output path given (" + quoted(output) + ")");
  }
  const fs::path dir = directory_of(dest);
  for (const PathInput& in : inputs) {
    if (in.path.empty()) continue;
    const std::string what = "the " + in.role + " " + quoted(in.path);
    if (same_file(dest, in.path)) {
      return invalid_argument("the output " + quoted(output) + " is the same file as " + what +
                              "; writing it would destroy it: choose another output name");
    }
    if (in.directory_of_frames && same_file(dir, in.path)) {
      return invalid_argument("the output " + quoted(output) + " would be written into " + what +
                              ", the directory of the frames being read: choose another directory");
    }
    if (!in.directory_of_frames && same_file(dest, directory_of(in.path))) {
      return invalid_argument("the output " + quoted(output) + " is the directory holding " + what +
                              ", which writing it would replace: choose another output name");
    }
  }
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) {
    return not_found("cannot write " + quoted(output) + ": no such directory " + quoted(dir));
  }
  if (!fs::is_directory(st)) {
    return not_found("cannot write " + quoted(output) + ": " + quoted(dir) + " is not a directory");
  }
  // Whether the directory takes a new file is only known by trying (permissions, access control
  // lists, read-only mounts, and root's exemption from permission bits all play a part).
  char tag[24];
  std::snprintf(tag, sizeof tag, ".seedvae-probe-%08x", std::random_device{}());
  const fs::path probe = dir / tag;
  auto writer = FileWriter::create(probe);
  if (!writer.is_ok()) {
    return io_error("cannot write " + quoted(output) + ": the directory " + quoted(dir) +
                    " refuses new files: " + reason_of(writer.status()));
  }
  (void)writer->close();
  fs::remove(probe, ec);
  return Status::ok();
}

Status write_file(const fs::path& path, std::span<const std::byte> bytes) {
  auto writer = FileWriter::create(path);
  if (!writer.is_ok()) return writer.status();
  SEEDVAE_TRY(writer->write(bytes));
  return writer->close();  // the flush to the device: a full disk shows here too
}

Status write_file_atomic(const fs::path& path, std::span<const std::byte> bytes) {
  AtomicFile file(path);  // removes the temporary on every early return
  Status st = write_file(file.temp_path(), bytes);
  if (st.is_ok()) st = file.commit();
  return st.is_ok() ? st : std::move(st).with_context("writing " + quoted(path));
}

Status write_file_atomic(const fs::path& path, std::string_view text) {
  return write_file_atomic(path, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

}  // namespace seedvae
