#include "cc/common/gloo/crypto_symbols.h"

#include <dlfcn.h>

namespace tfhvd {

bool BindCryptoFunctions(void* handle, CryptoFunctions* fns, std::string* missing) {
  CryptoFunctions bound;
  // dlsym on the handle searches that library (and its own dependencies) only, never
  // the process's global scope, where TensorFlow's BoringSSL names live.
#define TFHVD_CRYPTO_BIND(ret, name, params)                                \
  bound.name = reinterpret_cast<ret(*) params>(dlsym(handle, #name));       \
  if (bound.name == nullptr) {                                              \
    *missing = #name;                                                       \
    return false;                                                           \
  }
  TFHVD_CRYPTO_FUNCTIONS(TFHVD_CRYPTO_BIND)
#undef TFHVD_CRYPTO_BIND
  *fns = bound;
  return true;
}

}  // namespace tfhvd
