#include "cc/common/gloo/crypto_library.h"

#include <dlfcn.h>

#include <stdexcept>

#include "cc/common/logging.h"
#include "cc/common/runtime_library.h"

namespace tfhvd {
namespace {

// Newest first: both export the functions of crypto_symbols.h with the same C ABI.
const std::vector<std::string>& DefaultCandidates() {
  static const std::vector<std::string> names = {"libcrypto.so.3", "libcrypto.so.1.1"};
  return names;
}

struct Loaded {
  Status status;
  CryptoFunctions fns;
  std::string description;
};

const Loaded& TheLibrary() {
  // Never destroyed (signing may run while the process exits); built once, thread-safely.
  static const Loaded* loaded = [] {
    auto* l = new Loaded();
    l->status = CryptoLibrary::LoadFrom(DefaultCandidates(), &l->fns, &l->description);
    if (l->status.ok()) {
      TFHVD_LOG(DEBUG) << "rendezvous signing uses " << l->description;
    }
    return l;
  }();
  return *loaded;
}

}  // namespace

Status CryptoLibrary::LoadFrom(const std::vector<std::string>& candidates,
                               CryptoFunctions* fns, std::string* description) {
  // TensorFlow's BoringSSL has OpenSSL's names, exported unversioned (crypto_symbols.h).
  // RTLD_LOCAL: libcrypto's names stay out of the global scope, and ours are looked up
  // in it alone. RTLD_DEEPBIND: libcrypto's own references to its functions bind to
  // itself; without it, a libcrypto loaded after TensorFlow binds hundreds of them
  // (EVP_*, ASN1_*, ...) to BoringSSL's and crashes on the first HMAC (seen with
  // OpenSSL 1.1.1 in LD_DEBUG=bindings). A libcrypto already in the process (Python's
  // ssl module, which TensorFlow imports before loading itself) is returned as it is.
  auto binds = [fns](void* handle, std::string* why) {
    std::string missing;
    if (BindCryptoFunctions(handle, fns, &missing)) return true;
    *why = "it has no " + missing + " (not OpenSSL's libcrypto 1.1.1 or 3.x)";
    return false;
  };
  std::string tried;
  void* handle =
      OpenRuntimeLibrary(candidates, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND, binds, &tried);
  if (handle != nullptr) {
    const char* version = fns->OpenSSL_version(kOpensslVersionText);
    *description = LibraryFileOf(reinterpret_cast<void*>(fns->HMAC)) + " (" +
                   (version != nullptr ? version : "OpenSSL, version unknown") + ")";
    return Status();
  }
  return Status::Precondition(
      "tf_hvd signs its rendezvous (Gloo) with the system's OpenSSL, loaded at run time, "
      "and no OpenSSL libcrypto could be loaded. Tried:" + tried +
      "\nInstall OpenSSL's libcrypto (libssl3 / openssl-libs): `apt-get install libssl3` on "
      "Debian 12+ and Ubuntu 22.04+ (libssl1.1 on Debian 11 and Ubuntu 20.04), `dnf install "
      "openssl-libs` on RHEL, Rocky, Alma and Amazon Linux, `zypper install libopenssl3` on "
      "SLES; or put the directory holding libcrypto.so.3 (OpenSSL 3.x) or libcrypto.so.1.1 "
      "(OpenSSL 1.1.1) on LD_LIBRARY_PATH. (MPI jobs, started by mpiexec or with tfhvdrun "
      "--mpi, do not need it.)");
}

Status CryptoLibrary::Load() { return TheLibrary().status; }

const CryptoFunctions& CryptoLibrary::Functions() {
  const Loaded& l = TheLibrary();
  if (!l.status.ok()) throw std::runtime_error(l.status.message());
  return l.fns;
}

std::string CryptoLibrary::Describe() { return TheLibrary().description; }

}  // namespace tfhvd
