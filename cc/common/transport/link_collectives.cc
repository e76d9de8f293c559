#include "cc/common/transport/link_collectives.h"

#include <algorithm>
#include <cstring>

namespace tfhvd {

Status SendString(Links& links, int to, const std::string& bytes) {
  uint64_t len = bytes.size();
  Status s = links.Send(to, &len, sizeof(len));
  return s.ok() && len > 0 ? links.Send(to, bytes.data(), bytes.size()) : s;
}

Status RecvString(Links& links, int from, std::string* bytes) {
  uint64_t len = 0;
  Status s = links.Recv(from, &len, sizeof(len));
  if (!s.ok()) return s;
  bytes->resize(static_cast<size_t>(len));
  return len > 0 ? links.Recv(from, &(*bytes)[0], bytes->size()) : s;
}

Status AllgatherBlocks(Links& links, const void* mine, void* out, size_t bytes) {
  const int rank = links.rank(), size = links.size();
  char* blocks = static_cast<char*>(out);
  char* own = blocks + static_cast<size_t>(rank) * bytes;
  if (own != mine && bytes > 0) std::memcpy(own, mine, bytes);
  for (int k = 1; k < size; ++k) {
    int to = (rank + k) % size, from = (rank - k + size) % size;
    Status s = links.Exchange(to, mine, bytes, from, blocks + static_cast<size_t>(from) * bytes,
                              bytes);
    if (!s.ok()) return s;
  }
  return Status();
}

Status AllgatherStrings(Links& links, const std::string& mine, std::vector<std::string>* all) {
  const size_t n = static_cast<size_t>(links.size());
  uint64_t len = mine.size(), longest = 0;
  std::vector<uint64_t> lens(n);
  Status s = AllgatherBlocks(links, &len, lens.data(), sizeof(len));
  if (!s.ok()) return s;
  for (uint64_t l : lens) longest = std::max(longest, l);
  std::string padded = mine;
  padded.resize(longest);
  std::string joined(longest * n, '\0');
  s = AllgatherBlocks(links, padded.data(), &joined[0], longest);
  if (!s.ok()) return s;
  all->clear();
  for (size_t r = 0; r < n; ++r) all->push_back(joined.substr(r * longest, lens[r]));
  return Status();
}

Status GatherStrings(Links& links, const std::string& mine, std::vector<std::string>* all) {
  if (links.rank() != 0) return SendString(links, 0, mine);
  all->assign(static_cast<size_t>(links.size()), std::string());
  (*all)[0] = mine;
  for (int r = 1; r < links.size(); ++r) {
    Status s = RecvString(links, r, &(*all)[static_cast<size_t>(r)]);
    if (!s.ok()) return s;
  }
  return Status();
}

Status BroadcastString(Links& links, std::string* data, int root) {
  if (links.rank() != root) return RecvString(links, root, data);
  for (int r = 0; r < links.size(); ++r) {
    if (r == root) continue;
    Status s = SendString(links, r, *data);
    if (!s.ok()) return s;
  }
  return Status();
}

Status BitwiseOrWords(Links& links, uint64_t* words, size_t n, std::vector<char>* scratch) {
  const size_t size = static_cast<size_t>(links.size());
  scratch->resize(size * n * sizeof(uint64_t));
  Status s = AllgatherBlocks(links, words, scratch->data(), n * sizeof(uint64_t));
  if (!s.ok()) return s;
  const auto* all = reinterpret_cast<const uint64_t*>(scratch->data());
  for (size_t r = 0; r < size; ++r)
    for (size_t i = 0; i < n; ++i) words[i] |= all[r * n + i];
  return Status();
}

Status LinksBarrier(Links& links) {
  uint64_t word = 0;
  std::vector<char> scratch;
  return BitwiseOrWords(links, &word, 1, &scratch);
}

}  // namespace tfhvd
