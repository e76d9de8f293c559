// The system's libcrypto loaded at run time (cc/common/gloo/crypto_library.h) and the
// signing on it (signing.h): RFC 4231's HMAC-SHA256 vectors, nonces, constant-time
// comparison, and the message when no libcrypto can be loaded.
//
// The binary links libtensorflow_framework.so.2 (BUILD), so that TensorFlow's BoringSSL,
// exported under OpenSSL's names, is in the global scope before libcrypto is loaded: the
// case of a process whose libcrypto was not loaded before TensorFlow.
#include <dlfcn.h>

#include <string>

#include "cc/common/gloo/crypto_library.h"
#include "cc/common/gloo/signing.h"
#include "gtest/gtest.h"

namespace tfhvd {
namespace {

TEST(CryptoLibrary, LoadsTheSystemsOpenssl) {
  Status s = CryptoLibrary::Load();
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string what = CryptoLibrary::Describe();
  EXPECT_NE(what.find("libcrypto.so."), std::string::npos) << what;
  EXPECT_NE(what.find("OpenSSL "), std::string::npos) << what;
}

std::string FileOf(void* address) {
  Dl_info info;
  return dladdr(address, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "?";
}

TEST(CryptoLibrary, TakesNothingFromTensorflowsBoringssl) {
  void* global_hmac = dlsym(RTLD_DEFAULT, "HMAC");
  ASSERT_NE(global_hmac, nullptr) << "libtensorflow_framework.so.2 is not linked";
  EXPECT_NE(FileOf(global_hmac).find("libtensorflow_framework"), std::string::npos);
  const CryptoFunctions& c = CryptoLibrary::Functions();
  EXPECT_NE(FileOf(reinterpret_cast<void*>(c.HMAC)).find("libcrypto.so."), std::string::npos);
  EXPECT_NE(FileOf(reinterpret_cast<void*>(c.RAND_bytes)).find("libcrypto.so."),
            std::string::npos);
  // libcrypto's own calls stay inside it (RTLD_DEEPBIND): bound to BoringSSL they give
  // wrong digests or crash.
  EXPECT_EQ(ToHex(HmacSha256("key", "The quick brown fox jumps over the lazy dog")),
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
}

TEST(CryptoLibrary, HmacSha256MatchesRfc4231) {
  // Test case 1 and 2 of RFC 4231.
  EXPECT_EQ(ToHex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(ToHex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(HmacSha256("", "").size(), 32u);
}

TEST(CryptoLibrary, NoncesAndComparison) {
  const std::string a = RandomHex(16), b = RandomHex(16);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(ConstantTimeEquals(a, a));
  EXPECT_FALSE(ConstantTimeEquals(a, b));
  EXPECT_FALSE(ConstantTimeEquals(a, a.substr(1)));
}

TEST(CryptoLibrary, SaysWhatToInstallWhenNoneLoads) {
  CryptoFunctions fns;
  std::string description;
  // A name that does not exist, and a library that is not libcrypto.
  Status s = CryptoLibrary::LoadFrom({"libcrypto.so.0.9.7-none", "libm.so.6"}, &fns,
                                     &description);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  const std::string& m = s.message();
  EXPECT_NE(m.find("no OpenSSL libcrypto could be loaded"), std::string::npos) << m;
  EXPECT_NE(m.find("\n  libcrypto.so.0.9.7-none: "), std::string::npos) << m;
  EXPECT_NE(m.find("\n  libm.so.6: it has no EVP_sha256"), std::string::npos) << m;
  EXPECT_NE(m.find("Install OpenSSL's libcrypto (libssl3 / openssl-libs)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("LD_LIBRARY_PATH"), std::string::npos) << m;
  EXPECT_TRUE(description.empty());
  EXPECT_EQ(fns.HMAC, nullptr);
}

}  // namespace
}  // namespace tfhvd
