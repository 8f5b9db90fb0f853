// Output safety shared by every front end (the CLI, the studio, the job layer): an output must
// not be one of the run's inputs, its directory must exist and accept files, and files are
// written whole or not at all.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

#include "core/base/status.h"

namespace seedvae {

// Whether `a` and `b` name the same file or directory: through symbolic links and hard links
// (device and inode) when both exist, by their canonical paths otherwise.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// What a run reads, for check_output_path(): a file (video, checkpoint, latent), or a directory
// of frames (an image directory, or the directory of a printf pattern such as frames/%05d.png).
struct PathInput {
  std::filesystem::path path;
  std::string role;  // "input", "weights", "latent": named in the message
  bool directory_of_frames = false;
};

// Refuses, before any work, an output that would destroy what the run reads or that cannot be
// written:
//  * the output is the same file as an input or the weights, or the same directory as (or a
//    file inside) an input directory of frames: kInvalidArgument naming both;
//  * the output's directory does not exist: kNotFound ("no such directory");
//  * the directory refuses a new file (permissions, a read-only file system): kIoError with the
//    system's reason ("Permission denied", "Read-only file system").
// A path ending in '/' names a directory to create (a PNG sequence).
Status check_output_path(const std::filesystem::path& output, std::span<const PathInput> inputs);

// Writes `bytes` to `path` atomically (a temporary sibling, every write and the final flush to
// the device checked, then a rename). On failure the temporary is removed, an existing `path`
// is left untouched, and the error is kIoError naming `path` and the system's reason ("No space
// left on device").
Status write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);
// The same without the temporary, for files inside a directory that is itself a temporary:
// every write and the flush checked; a failure leaves a partial file for the caller to remove.
Status write_file(const std::filesystem::path& path, std::span<const std::byte> bytes);
Status write_file_atomic(const std::filesystem::path& path, std::string_view text);

}  // namespace seedvae
