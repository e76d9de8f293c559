// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), self-contained: the
// rendezvous client signs its requests with the job's secret and checks the
// signatures of the replies. Checked against RFC 4231's test vectors by
// tests/unit/test_hmac_sha256.py.
#ifndef TFHVD_COMMON_GLOO_HMAC_SHA256_H_
#define TFHVD_COMMON_GLOO_HMAC_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tfhvd {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  static constexpr size_t kBlockSize = 64;
  Sha256();
  void Update(const void* data, size_t size);
  void Update(const std::string& s) { Update(s.data(), s.size()); }
  // Pads, finishes and returns the digest; the object must not be used after.
  Sha256Digest Final();

 private:
  void Compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[kBlockSize];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t key_size);
  explicit HmacSha256(const std::string& key) : HmacSha256(key.data(), key.size()) {}
  void Update(const void* data, size_t size) { inner_.Update(data, size); }
  void Update(const std::string& s) { inner_.Update(s); }
  Sha256Digest Final();

 private:
  Sha256 inner_;
  uint8_t outer_pad_[Sha256::kBlockSize];
};

Sha256Digest Sha256Of(const void* data, size_t size);
Sha256Digest HmacSha256Of(const std::string& key, const void* data, size_t size);

// Lowercase hexadecimal text of the bytes.
std::string ToHex(const uint8_t* data, size_t size);
inline std::string ToHex(const Sha256Digest& d) { return ToHex(d.data(), d.size()); }

// Equality whose running time does not depend on where the strings differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_HMAC_SHA256_H_
