#include "cc/common/gloo/signing.h"

#include <cstdio>
#include <stdexcept>

#include "cc/common/gloo/crypto_library.h"

namespace tfhvd {

namespace {

constexpr char kRequestDomain[] = "tf_hvd-rendezvous-v1\n";
constexpr char kResponseDomain[] = "tf_hvd-rendezvous-v1-response\n";

std::string OpensslError(const CryptoFunctions& crypto, const char* what) {
  char buf[256] = {0};
  crypto.ERR_error_string_n(crypto.ERR_get_error(), buf, sizeof(buf));
  return std::string(what) + " failed (OpenSSL: " + buf + ")";
}

}  // namespace

std::string HmacSha256(const std::string& key, const std::string& data) {
  const CryptoFunctions& crypto = CryptoLibrary::Functions();
  unsigned char mac[kOpensslMaxDigestBytes];
  unsigned int size = 0;
  if (crypto.HMAC(crypto.EVP_sha256(), key.data(), static_cast<int>(key.size()),
                  reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac,
                  &size) == nullptr) {
    throw std::runtime_error(OpensslError(crypto, "HMAC-SHA256"));
  }
  return std::string(reinterpret_cast<const char*>(mac), size);
}

std::string ToHex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string RandomHex(size_t bytes) {
  const CryptoFunctions& crypto = CryptoLibrary::Functions();
  std::string buf(bytes, '\0');
  if (crypto.RAND_bytes(reinterpret_cast<unsigned char*>(&buf[0]), static_cast<int>(bytes)) !=
      1) {
    throw std::runtime_error(OpensslError(crypto, "drawing random bytes"));
  }
  return ToHex(buf);
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         CryptoLibrary::Functions().CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RendezvousRequestSignature(const std::string& secret, const std::string& method,
                                       const std::string& path, const std::string& timestamp,
                                       const std::string& nonce, const std::string& body) {
  return ToHex(HmacSha256(secret, kRequestDomain + method + "\n" + path + "\n" + timestamp +
                                      "\n" + nonce + "\n" + body));
}

std::string RendezvousResponseSignature(const std::string& secret, int status,
                                        const std::string& nonce, const std::string& body) {
  char code[16];
  std::snprintf(code, sizeof(code), "%03d", status);
  return ToHex(HmacSha256(secret, kResponseDomain + std::string(code) + "\n" + nonce + "\n" +
                                      body));
}

}  // namespace tfhvd
