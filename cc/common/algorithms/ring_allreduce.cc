#include "cc/common/algorithms/ring_allreduce.h"

#include <algorithm>

#include "cc/common/reduce_kernels.h"

namespace tfhvd {

Status RingAllreduce::Run(Links& links, const void* input, void* output, int64_t count,
                          DataType dtype, ReduceOp op) {
  Status st = ReduceScatter(links, input, output, count, dtype, op);
  return st.ok() ? Allgather(links, output, count, dtype) : st;
}

Status RingAllreduce::ReduceScatter(Links& links, const void* input, void* output, int64_t count,
                                    DataType dtype, ReduceOp op) {
  const size_t elem = DataTypeSize(dtype);
  const size_t n = static_cast<size_t>(links.size());
  const size_t r = static_cast<size_t>(links.rank());
  // Chunk c covers elements [begin(c), begin(c+1)).
  auto begin = [&](size_t c) { return static_cast<size_t>(count) * c / n; };
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  const int next = static_cast<int>((r + 1) % n), prev = static_cast<int>((r + n - 1) % n);
  const size_t segment = std::max<size_t>(1, kSegmentBytes / elem);
  scratch_.resize(segment * elem);
  // Reduce-scatter: at step s send chunk r-s, receive chunk r-s-1 and combine
  // it with this rank's input; chunk r+1 ends fully reduced here.
  for (size_t s = 0; s + 1 < n; ++s) {
    size_t send_c = (r + n - s) % n, recv_c = (r + 2 * n - s - 1) % n;
    const char* send = (s == 0 ? in : out) + begin(send_c) * elem;
    size_t send_len = begin(send_c + 1) - begin(send_c);
    size_t recv_first = begin(recv_c), recv_len = begin(recv_c + 1) - recv_first;
    for (size_t done_s = 0, done_r = 0; done_s < send_len || done_r < recv_len;) {
      size_t ks = std::min(segment, send_len - done_s), kr = std::min(segment, recv_len - done_r);
      Status st = links.Exchange(next, send + done_s * elem, ks * elem, prev, scratch_.data(),
                                 kr * elem);
      if (!st.ok()) return st;
      size_t at = (recv_first + done_r) * elem;
      ReduceBuffers(dtype, op, out + at, in + at, scratch_.data(), kr);
      done_s += ks;
      done_r += kr;
    }
  }
  return Status();
}

Status RingAllreduce::Allgather(Links& links, void* output, int64_t count, DataType dtype) {
  const size_t elem = DataTypeSize(dtype);
  const size_t n = static_cast<size_t>(links.size());
  const size_t r = static_cast<size_t>(links.rank());
  auto begin = [&](size_t c) { return static_cast<size_t>(count) * c / n; };
  char* out = static_cast<char*>(output);
  const int next = static_cast<int>((r + 1) % n), prev = static_cast<int>((r + n - 1) % n);
  // Pass the reduced chunks around the ring.
  for (size_t s = 0; s + 1 < n; ++s) {
    size_t send_c = (r + 1 + n - s) % n, recv_c = (r + n - s) % n;
    Status st = links.Exchange(next, out + begin(send_c) * elem,
                               (begin(send_c + 1) - begin(send_c)) * elem, prev,
                               out + begin(recv_c) * elem,
                               (begin(recv_c + 1) - begin(recv_c)) * elem);
    if (!st.ok()) return st;
  }
  return Status();
}

}  // namespace tfhvd
