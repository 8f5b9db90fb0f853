// Test inputs made, and outputs inspected, with FFmpeg's libraries directly (not through
// seedvae_media): video files of known samples, timestamps, colour tags and rotation, with a sine
// audio stream; and what a written file holds (codec, pixel format, timestamps, audio). No FFmpeg
// type appears here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace seedvae::test {

struct TestVideoSpec {
  std::string encoder = "ffv1";  // libavcodec encoder name
  std::string pix_fmt = "yuv444p";
  std::string options;  // encoder options, "key=value:key=value"
  int width = 16, height = 16, frames = 8;
  int tb_num = 1, tb_den = 24;  // the encoder's time base
  std::vector<int64_t> pts;     // each frame's time in tb; empty: 0, 1, 2, ...
  // Sample of plane p (0: Y or G, 1: U or B, 2: V or R) at (x, y) of frame t, in the format's
  // depth. Default: mid grey.
  std::function<int(int t, int p, int x, int y)> sample;
  // AVColor* values (2: unspecified).
  int color_space = 2, color_range = 0, color_primaries = 2, color_trc = 2;
  int rotation = 0;           // display matrix: frames shown turned clockwise by this many degrees
  std::string audio_encoder;  // "": no audio; "aac", "pcm_s16le", "flac", ...
  double audio_seconds = 1.0;
  int sample_rate = 48000;
};

// Writes `path` (the container from its extension); an error's text, empty on success.
std::string make_test_video(const std::filesystem::path& path, const TestVideoSpec& spec);

struct AvFileInfo {
  std::string error;  // empty when the file opened
  std::string video_codec, pix_fmt;
  int width = 0, height = 0;
  std::vector<double> video_times;  // every video packet's presentation time, seconds, sorted
  int color_space = 0, color_range = 0, color_primaries = 0, color_trc = 0;
  int audio_streams = 0;
  std::string audio_codec;  // of the first audio stream
  int64_t audio_packets = 0;
  double audio_seconds = 0;  // from its first packet's time to the end of its last
  double audio_start = 0;    // its first packet's time, seconds
};
AvFileInfo av_file_info(const std::filesystem::path& path);

}  // namespace seedvae::test
