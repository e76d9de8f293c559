#include "cc/common/transport/subset_transport.h"

#include <cstring>

#include "cc/common/transport/link_collectives.h"

namespace tfhvd {

// Step k sends this member's block to member+k and receives member-k's block.
Status SubsetTransport::Allgatherv(const void* in, void* out,
                                   const std::vector<int64_t>& bytes_per_rank) {
  const int n = links_->size(), me = links_->rank();
  std::vector<int64_t> offset(static_cast<size_t>(n) + 1, 0);
  for (int r = 0; r < n; ++r) offset[r + 1] = offset[r] + bytes_per_rank[static_cast<size_t>(r)];
  char* blocks = static_cast<char*>(out);
  const size_t mine = static_cast<size_t>(bytes_per_rank[static_cast<size_t>(me)]);
  if (mine > 0 && blocks + offset[me] != in) std::memmove(blocks + offset[me], in, mine);
  for (int k = 1; k < n; ++k) {
    int to = (me + k) % n, from = (me - k + n) % n;
    Status s = links_->Exchange(to, blocks + offset[me], mine, from, blocks + offset[from],
                               static_cast<size_t>(bytes_per_rank[static_cast<size_t>(from)]));
    if (!s.ok()) return s;
  }
  return Status();
}

Status SubsetTransport::Broadcast(void* buffer, int64_t bytes, int root) {
  if (bytes <= 0) return Status();
  if (links_->rank() != root) return links_->Recv(root, buffer, static_cast<size_t>(bytes));
  for (int r = 0; r < links_->size(); ++r) {
    if (r == root) continue;
    Status s = links_->Send(r, buffer, static_cast<size_t>(bytes));
    if (!s.ok()) return s;
  }
  return Status();
}

// Step k sends the block for member+k and receives the one from member-k.
Status SubsetTransport::Alltoallv(const void* in, const std::vector<int64_t>& send_bytes,
                                  void* out, const std::vector<int64_t>& recv_bytes) {
  const int n = links_->size(), me = links_->rank();
  std::vector<int64_t> send_at(static_cast<size_t>(n) + 1, 0), recv_at(send_at);
  for (int r = 0; r < n; ++r) {
    send_at[r + 1] = send_at[r] + send_bytes[static_cast<size_t>(r)];
    recv_at[r + 1] = recv_at[r] + recv_bytes[static_cast<size_t>(r)];
  }
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  if (send_bytes[static_cast<size_t>(me)] > 0) {
    std::memmove(dst + recv_at[me], src + send_at[me],
                 static_cast<size_t>(send_bytes[static_cast<size_t>(me)]));
  }
  for (int k = 1; k < n; ++k) {
    int to = (me + k) % n, from = (me - k + n) % n;
    Status s = links_->Exchange(to, src + send_at[to],
                               static_cast<size_t>(send_bytes[static_cast<size_t>(to)]), from,
                               dst + recv_at[from],
                               static_cast<size_t>(recv_bytes[static_cast<size_t>(from)]));
    if (!s.ok()) return s;
  }
  return Status();
}

Status SubsetTransport::Barrier() { return LinksBarrier(*links_); }

}  // namespace tfhvd
