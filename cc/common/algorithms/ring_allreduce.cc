#include "cc/common/algorithms/ring_allreduce.h"

#include <algorithm>

#include "cc/common/kernels/reduce_kernels.h"

namespace tfhvd {

// Where the pieces of a ring step lie: chunk c is elements [begin[c],
// begin[c] + length[c]) of the message, cut into `pieces` pieces (the same
// number for every chunk, from the largest chunk's size).
struct RingPieces {
  std::vector<size_t> begin, length;
  size_t pieces;
  size_t first(size_t c, size_t k) const { return begin[c] + length[c] * k / pieces; }
  size_t length_of(size_t c, size_t k) const { return first(c, k + 1) - first(c, k); }
  size_t largest() const { return *std::max_element(length.begin(), length.end()); }
};

namespace {

// The allreduce's chunks: chunk c is elements [count*c/n, count*(c+1)/n).
RingPieces EvenPieces(int64_t count, int size, size_t elem) {
  const size_t n = static_cast<size_t>(size), total = static_cast<size_t>(count);
  RingPieces at{std::vector<size_t>(n), std::vector<size_t>(n), 0};
  for (size_t c = 0; c < n; ++c) {
    at.begin[c] = total * c / n;
    at.length[c] = total * (c + 1) / n - at.begin[c];
  }
  at.pieces = RingAllreduce::PiecesPerChunk(count, size, elem);
  return at;
}

// Chunks that are the ranks' own slices: the ring leaves chunk q + 1 reduced
// on rank q (and starts its allgather from there), so chunk c is the slice of
// rank c - 1.
RingPieces SlicePieces(const std::vector<int64_t>& first, const std::vector<int64_t>& counts,
                       size_t elem) {
  const size_t n = counts.size();
  RingPieces at{std::vector<size_t>(n), std::vector<size_t>(n), 0};
  for (size_t c = 0; c < n; ++c) {
    const size_t q = (c + n - 1) % n;
    at.begin[c] = static_cast<size_t>(first[q]);
    at.length[c] = static_cast<size_t>(counts[q]);
  }
  at.pieces = RingAllreduce::PiecesFor(at.largest(), elem);
  return at;
}

}  // namespace

size_t RingAllreduce::PiecesPerChunk(int64_t count, int size, size_t elem) {
  return PiecesFor((static_cast<size_t>(count) + static_cast<size_t>(size) - 1) /
                       static_cast<size_t>(size),
                   elem);
}

size_t RingAllreduce::PiecesFor(size_t largest, size_t elem) {
  const size_t bytes = largest * elem;
  size_t p = (bytes + kPieceBytes - 1) / kPieceBytes;
  p = std::max(p, std::min<size_t>(3, bytes / kMinPieceBytes));
  return std::max<size_t>(1, std::min(p, largest));
}

Status RingAllreduce::Run(Links& links, const void* input, void* output, int64_t count,
                          DataType dtype, ReduceOp op) {
  Status st = ReduceScatter(links, input, output, count, dtype, op);
  return st.ok() ? Allgather(links, output, count, dtype) : st;
}

Status RingAllreduce::ReduceScatter(Links& links, const void* input, void* output, int64_t count,
                                    DataType dtype, ReduceOp op) {
  return ReduceScatterPieces(links, input, output,
                             EvenPieces(count, links.size(), DataTypeSize(dtype)), dtype, op);
}

Status RingAllreduce::ReduceScatter(Links& links, const void* input, void* output,
                                    const std::vector<int64_t>& first,
                                    const std::vector<int64_t>& counts, DataType dtype,
                                    ReduceOp op) {
  return ReduceScatterPieces(links, input, output,
                             SlicePieces(first, counts, DataTypeSize(dtype)), dtype, op);
}

Status RingAllreduce::Allgather(Links& links, void* output, const std::vector<int64_t>& first,
                                const std::vector<int64_t>& counts, DataType dtype) {
  return AllgatherPieces(links, output, SlicePieces(first, counts, DataTypeSize(dtype)),
                         DataTypeSize(dtype));
}

Status RingAllreduce::ReduceScatterPieces(Links& links, const void* input, void* output,
                                          const RingPieces& at, DataType dtype, ReduceOp op) {
  const size_t elem = DataTypeSize(dtype);
  const size_t n = static_cast<size_t>(links.size());
  const size_t r = static_cast<size_t>(links.rank());
  const size_t P = at.pieces, items = (n - 1) * P;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  const int next = static_cast<int>((r + 1) % n), prev = static_cast<int>((r + n - 1) % n);
  // One scratch piece per piece in flight, and one being reduced.
  const size_t slots = Links::kMaxStarted + 1;
  const size_t largest = at.largest();                            // elements of a chunk
  const size_t piece_bytes = std::max<size_t>(1, (largest + P - 1) / P) * elem;  // at most
  scratch_.resize(slots * piece_bytes);
  // Item j = piece j % P of step j / P. At step s send chunk r-s (this rank's
  // input at s = 0, else the chunk reduced at step s-1), receive chunk r-s-1
  // and combine it with this rank's input; chunk r+1 ends fully reduced here.
  auto send_chunk = [&](size_t j) { return (r + n - j / P) % n; };
  auto recv_chunk = [&](size_t j) { return (r + 2 * n - j / P - 1) % n; };
  size_t started = 0;
  // Starts every item whose piece is ready (reduced one step earlier: item
  // j - P) while fewer than kMaxStarted are in flight.
  auto start_ready = [&](size_t reduced, size_t finished) {
    while (started < items && started - finished < Links::kMaxStarted &&
           (started < P || started - P < reduced)) {
      const size_t j = started, k = j % P;
      const size_t sc = send_chunk(j), rc = recv_chunk(j);
      const char* src = (j < P ? in : out) + at.first(sc, k) * elem;
      Status st = links.StartExchange(next, src, at.length_of(sc, k) * elem, prev,
                                      scratch_.data() + (j % slots) * piece_bytes,
                                      at.length_of(rc, k) * elem);
      if (!st.ok()) return st;
      ++started;
    }
    return Status();
  };
  for (size_t j = 0; j < items; ++j) {
    Status st = start_ready(j, j);
    if (st.ok()) st = links.FinishExchange();
    // The next piece goes out before this one is reduced.
    if (st.ok()) st = start_ready(j, j + 1);
    if (!st.ok()) return st;
    const size_t rc = recv_chunk(j), first = at.first(rc, j % P);
    ReduceBuffers(dtype, op, out + first * elem, in + first * elem,
                  scratch_.data() + (j % slots) * piece_bytes, at.length_of(rc, j % P));
  }
  return Status();
}

Status RingAllreduce::Allgather(Links& links, void* output, int64_t count, DataType dtype) {
  return AllgatherPieces(links, output, EvenPieces(count, links.size(), DataTypeSize(dtype)),
                         DataTypeSize(dtype));
}

Status RingAllreduce::AllgatherPieces(Links& links, void* output, const RingPieces& at,
                                      size_t elem) {
  const size_t n = static_cast<size_t>(links.size());
  const size_t r = static_cast<size_t>(links.rank());
  const size_t P = at.pieces, items = (n - 1) * P;
  char* out = static_cast<char*>(output);
  const int next = static_cast<int>((r + 1) % n), prev = static_cast<int>((r + n - 1) % n);
  // Pass the reduced chunks around the ring: at step s send chunk r+1-s (this
  // rank's own at s = 0, else the one received at step s-1), receive chunk
  // r-s straight into the output. Item j = piece j % P of step j / P; it can
  // go once item j - P has arrived.
  size_t started = 0;
  for (size_t j = 0; j < items; ++j) {
    while (started < items && started - j < Links::kMaxStarted &&
           (started < P || started - P < j)) {
      const size_t s = started / P, k = started % P;
      const size_t sc = (r + 1 + n - s) % n, rc = (r + n - s) % n;
      Status st = links.StartExchange(next, out + at.first(sc, k) * elem,
                                      at.length_of(sc, k) * elem, prev,
                                      out + at.first(rc, k) * elem, at.length_of(rc, k) * elem);
      if (!st.ok()) return st;
      ++started;
    }
    Status st = links.FinishExchange();
    if (!st.ok()) return st;
  }
  return Status();
}

}  // namespace tfhvd
