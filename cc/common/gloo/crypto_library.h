// OpenSSL's libcrypto, found and loaded at run time instead of linked: the rendezvous
// signing (signing.h) uses the system's OpenSSL (3.x, else 1.1.1), which the
// distribution keeps patched, and _hvd.so bundles no copy of it and needs none to build.
// crypto_symbols.h lists the functions called and binds them from the handle.
//
//   Status s = CryptoLibrary::Load();    // at hvd.init(), before the rendezvous
//   if (!s.ok()) return s;               // says what is missing and what to install
//   const CryptoFunctions& c = CryptoLibrary::Functions();
#ifndef TFHVD_COMMON_GLOO_CRYPTO_LIBRARY_H_
#define TFHVD_COMMON_GLOO_CRYPTO_LIBRARY_H_

#include <string>
#include <vector>

#include "cc/common/common.h"
#include "cc/common/gloo/crypto_symbols.h"

namespace tfhvd {

class CryptoLibrary {
 public:
  // Loads libcrypto.so.3 (OpenSSL 3: RHEL 9, Amazon Linux 2023, Debian 12+, Ubuntu
  // 22.04+), else libcrypto.so.1.1 (OpenSSL 1.1.1: RHEL 8, Debian 11, Ubuntu 20.04),
  // once per process: later calls return the first outcome. A failure names every
  // library tried and why, and what to install.
  static Status Load();

  // The bound functions, after Load()ing; throws std::runtime_error with Load's
  // message when no libcrypto could be loaded.
  static const CryptoFunctions& Functions();

  // The file loaded and its OpenSSL_version text (Load()ing first); empty when none
  // could be loaded.
  static std::string Describe();

  // One search over `candidates` (file names for the loader's path, or paths), apart
  // from the process's library (Load uses it; tests call it with other names). On
  // success fills *fns and *description; the library stays loaded.
  static Status LoadFrom(const std::vector<std::string>& candidates, CryptoFunctions* fns,
                         std::string* description);
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_CRYPTO_LIBRARY_H_
