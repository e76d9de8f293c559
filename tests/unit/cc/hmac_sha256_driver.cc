// Test driver for cc/common/gloo/hmac_sha256.cc (built by tests/unit/test_hmac_sha256.py).
// Reads lines "<hex key> <hex data> <chunk size>" from stdin and prints, per line,
// "<sha256(data)> <hmac-sha256(key, data)>" in hex, feeding the data to Update() in
// pieces of <chunk size> bytes (0 = all at once) to exercise the block buffering.
#include <iostream>
#include <string>
#include <vector>

#include "cc/common/gloo/hmac_sha256.h"

namespace {

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace

int main() {
  std::string key_hex, data_hex;
  size_t chunk = 0;
  while (std::cin >> key_hex >> data_hex >> chunk) {
    std::string key = key_hex == "-" ? "" : FromHex(key_hex);
    std::string data = data_hex == "-" ? "" : FromHex(data_hex);
    size_t step = chunk == 0 ? (data.empty() ? 1 : data.size()) : chunk;
    tfhvd::Sha256 sha;
    tfhvd::HmacSha256 mac(key);
    for (size_t i = 0; i < data.size(); i += step) {
      size_t n = std::min(step, data.size() - i);
      sha.Update(data.data() + i, n);
      mac.Update(data.data() + i, n);
    }
    std::cout << tfhvd::ToHex(sha.Final()) << " " << tfhvd::ToHex(mac.Final()) << "\n";
  }
  std::cout << (tfhvd::ConstantTimeEquals("abc", "abc") && !tfhvd::ConstantTimeEquals("abc", "abd") &&
                        !tfhvd::ConstantTimeEquals("abc", "ab")
                    ? "eq-ok"
                    : "eq-bad")
            << std::endl;
  return 0;
}
