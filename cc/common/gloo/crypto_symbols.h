// The few functions of OpenSSL's libcrypto that the signing (signing.cc) calls, with
// their C prototypes declared here (the same in OpenSSL 1.1.1 and 3.x), so that no
// OpenSSL header is needed to build and nothing of OpenSSL is linked. crypto_library.h
// opens the library; BindCryptoFunctions fills the table from its handle.
//
// They are members of a table, not functions under OpenSSL's names: TensorFlow's
// libtensorflow_framework.so.2 exports BoringSSL unversioned under those same names
// (HMAC, RAND_bytes, CRYPTO_memcmp, ...), and a call to a global HMAC could bind to
// that copy. Every address here comes from dlsym on the libcrypto handle itself.
//
//   const CryptoFunctions& c = CryptoLibrary::Functions();
//   c.HMAC(c.EVP_sha256(), key, key_len, data, data_len, mac, &mac_len);
#ifndef TFHVD_COMMON_GLOO_CRYPTO_SYMBOLS_H_
#define TFHVD_COMMON_GLOO_CRYPTO_SYMBOLS_H_

#include <cstddef>
#include <string>

namespace tfhvd {

// OpenSSL's EVP_MD, only ever handled through pointers.
struct OpensslEvpMd;

// OpenSSL's OPENSSL_VERSION argument of OpenSSL_version (0 in 1.1.1 and 3.x).
constexpr int kOpensslVersionText = 0;
// The largest digest HMAC writes (EVP_MAX_MD_SIZE).
constexpr size_t kOpensslMaxDigestBytes = 64;

// X(return type, name, (parameters)) for every libcrypto function called.
#define TFHVD_CRYPTO_FUNCTIONS(X)                                                        \
  X(const OpensslEvpMd*, EVP_sha256, (void))                                             \
  X(unsigned char*, HMAC,                                                                \
    (const OpensslEvpMd* md, const void* key, int key_len, const unsigned char* data,    \
     size_t data_len, unsigned char* out, unsigned int* out_len))                        \
  X(int, RAND_bytes, (unsigned char* buf, int num))                                      \
  X(int, CRYPTO_memcmp, (const void* a, const void* b, size_t len))                      \
  X(unsigned long, ERR_get_error, (void))                                                \
  X(void, ERR_error_string_n, (unsigned long error, char* buf, size_t len))              \
  X(const char*, OpenSSL_version, (int type))

struct CryptoFunctions {
#define TFHVD_CRYPTO_MEMBER(ret, name, params) ret(*name) params = nullptr;
  TFHVD_CRYPTO_FUNCTIONS(TFHVD_CRYPTO_MEMBER)
#undef TFHVD_CRYPTO_MEMBER
};

// Fills *fns from the dlopen handle `handle`. False, with *missing naming the first
// function the library lacks, when it is not a usable libcrypto.
bool BindCryptoFunctions(void* handle, CryptoFunctions* fns, std::string* missing);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_CRYPTO_SYMBOLS_H_
