// SHA-256 (FIPS 180-4). Hand-written (about 80 lines) so core needs no OpenSSL on Windows and
// Linux packages alike; checked against the NIST test vectors in tests/core/tst_weights.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace seedvae {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> data);
  void update(const void* data, size_t n) { update({static_cast<const std::byte*>(data), n}); }
  std::array<uint8_t, 32> finish();
  std::string finish_hex();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

}  // namespace seedvae
