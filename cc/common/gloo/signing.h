// Message signing for the Gloo set-up, on the system's OpenSSL libcrypto (loaded at
// run time: crypto_library.h): HMAC-SHA256, random bytes for nonces, and comparison of
// signatures in constant time. Each function throws std::runtime_error, saying what to
// install, when no libcrypto can be loaded (GlooTransport::Init checks that first).
//
// The rendezvous signatures are the ones tf_hvd/job/auth.py computes; the
// unit test tests/unit/test_signing.py checks that both sides agree.
//
//   std::string sig = RendezvousRequestSignature(secret, "GET", "/gloo/k", "1700000000",
//                                                "nonce-1", "");
//   bool ok = ConstantTimeEquals(sig, header_value);
#ifndef TFHVD_COMMON_GLOO_SIGNING_H_
#define TFHVD_COMMON_GLOO_SIGNING_H_

#include <cstddef>
#include <string>

namespace tfhvd {

// The 32 raw bytes of HMAC-SHA256(key, data). Throws std::runtime_error if
// libcrypto fails (it does not for in-memory inputs) or is missing.
std::string HmacSha256(const std::string& key, const std::string& data);

// Lowercase hexadecimal text of the bytes.
std::string ToHex(const std::string& bytes);

// `bytes` bytes from the OS's cryptographic generator, as hexadecimal text.
// Throws std::runtime_error if the generator (or libcrypto) is unavailable.
std::string RandomHex(size_t bytes);

// Equality whose running time does not depend on where the strings differ
// (only on their length, which is no secret here).
bool ConstantTimeEquals(const std::string& a, const std::string& b);

// Hex HMAC-SHA256 of one rendezvous request / reply (the signed text is in
// tf_hvd/job/auth.py: request_signature and response_signature).
std::string RendezvousRequestSignature(const std::string& secret, const std::string& method,
                                       const std::string& path, const std::string& timestamp,
                                       const std::string& nonce, const std::string& body);
std::string RendezvousResponseSignature(const std::string& secret, int status,
                                        const std::string& nonce, const std::string& body);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_SIGNING_H_
