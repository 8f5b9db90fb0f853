// Atomic file output: write to a temporary sibling, then rename over the destination. A failure
// or cancel before commit() removes the temporary, so no partial file is ever left behind.
#pragma once

#include <filesystem>

#include "core/base/status.h"

namespace seedvae {

class AtomicFile {
 public:
  // Chooses a unique temporary name beside `destination` ("<name>.tmp-<random><ext>", keeping
  // the extension so libraries that sniff it, like OpenCV's writer, still work).
  explicit AtomicFile(std::filesystem::path destination);
  ~AtomicFile();  // removes the temporary if commit() was not called or failed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& temp_path() const { return temp_; }
  const std::filesystem::path& destination() const { return dest_; }
  // Renames the temporary onto the destination.
  Status commit();

 private:
  std::filesystem::path dest_;
  std::filesystem::path temp_;
  bool committed_ = false;
};

// Removes the temporaries of every AtomicFile alive now (files, or directories of a PNG
// sequence, with their contents). For a process that ends without unwinding its stack (the CLI
// on a second termination signal), where no destructor would remove them.
void remove_live_temporaries();

}  // namespace seedvae
