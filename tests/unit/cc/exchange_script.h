// A script of ring exchanges for tests of a real Links backend
// (cc/common/transport/links.h): every rank sends pieces of several sizes to
// the next rank and receives the previous rank's, either pipelined
// (StartExchange, StartExchange, FinishExchange, StartExchange, ...) or with
// plain Exchange calls. Both must move the same bytes, so a receiver checks
// every byte against what its sender wrote, whichever way either side ran.
// Backend-agnostic: the socket test (threads as ranks) and the MPI test
// (processes under mpiexec) run the same script.
//
//   EXPECT_TRUE(RingRounds(links).ok());
#ifndef TFHVD_TESTS_UNIT_CC_EXCHANGE_SCRIPT_H_
#define TFHVD_TESTS_UNIT_CC_EXCHANGE_SCRIPT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#include "cc/common/algorithms/ring_allreduce.h"
#include "cc/common/transport/links.h"

namespace tfhvd {
namespace testing {

// A piece of 1000 bytes per sender rank: rank 0 sends nothing while it
// receives, and the rank after it receives nothing while it sends.
constexpr size_t kBySender = ~size_t{0};

// Piece sizes: empty, one byte, odd sizes, around Gloo's 256 KiB write
// piece, and several MiB (more than the socket buffers hold, so a started
// exchange really is still moving when the next one starts).
inline const std::vector<size_t>& BasePieceBytes() {
  static const std::vector<size_t> sizes = {
      0, 1, 3, 4093, size_t{1} << 20, 65537, 0, (size_t{3} << 20) + 5, kBySender, 1, 262145, 7};
  return sizes;
}

// The bytes `sender` sends in piece k: sizes above one byte grow with the
// sender's rank, so that a rank's send and receive sizes differ.
inline size_t PieceBytes(int sender, size_t k) {
  size_t base = BasePieceBytes()[k];
  if (base == kBySender) return 1000 * static_cast<size_t>(sender);
  return base > 1 ? base + static_cast<size_t>(sender) : base;
}

// Byte i of piece k from `sender`: a hash, so a piece that arrives shifted,
// duplicated or from the wrong sender or piece never matches.
inline char PieceByte(int sender, size_t k, size_t i) {
  uint32_t h = static_cast<uint32_t>(i + 1) * 2654435761u + static_cast<uint32_t>(sender) * 97u +
               static_cast<uint32_t>(k) * 1013u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return static_cast<char>(h & 0xff);
}

inline std::string Piece(int sender, size_t k) {
  std::string p(PieceBytes(sender, k), '\0');
  for (size_t i = 0; i < p.size(); ++i) p[i] = PieceByte(sender, k, i);
  return p;
}

// Index of the first byte where got differs from want, or "equal" (keeps a
// failure message short for MiB-sized pieces).
inline std::string FirstDifference(const std::string& got, const std::string& want) {
  if (got.size() != want.size()) {
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return "byte " + std::to_string(i) + " differs";
  }
  return "equal";
}

// How a rank runs its side of a round.
enum class Style {
  kPlain,      // one Exchange per piece
  kPipelined,  // start 0, start 1, finish 0, start 2, finish 1, ..., finish last:
               // the way a ring keeps Links::kMaxStarted pieces in flight
  kMixed,      // start k, start k+1, then Exchange k+2, which runs after them
};

inline const char* StyleName(Style style) {
  return style == Style::kPlain ? "plain" : style == Style::kPipelined ? "pipelined" : "mixed";
}

// One round of the script on this rank; returns the first failed call's
// Status. Each received piece is checked byte for byte once its exchange is
// finished, and each sent piece is checked to be unchanged.
inline Status RingScript(Links& links, Style style) {
  const int r = links.rank(), n = links.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t pieces = BasePieceBytes().size();
  std::vector<std::string> out(pieces), in(pieces);
  for (size_t k = 0; k < pieces; ++k) {
    out[k] = Piece(r, k);
    in[k].assign(PieceBytes(prev, k), '\x5a');  // filler: a piece left unwritten shows
  }
  auto plain = [&](size_t k) {
    return links.Exchange(next, out[k].data(), out[k].size(), prev, &in[k][0], in[k].size());
  };
  auto start = [&](size_t k) {
    return links.StartExchange(next, out[k].data(), out[k].size(), prev, &in[k][0],
                               in[k].size());
  };
  // A piece is checked as soon as its exchange is finished: FinishExchange
  // ends the oldest started exchange, whose bytes must all be there then.
  auto check = [&](size_t k) {
    EXPECT_EQ(FirstDifference(in[k], Piece(prev, k)), "equal")
        << "rank " << r << " piece " << k << " from rank " << prev << " " << StyleName(style);
    EXPECT_EQ(FirstDifference(out[k], Piece(r, k)), "equal")
        << "rank " << r << " changed its send piece " << k;
  };
  Status s;
  if (style == Style::kPlain) {
    for (size_t k = 0; s.ok() && k < pieces; ++k) {
      s = plain(k);
      if (s.ok()) check(k);
    }
  } else if (style == Style::kPipelined) {
    s = start(0);
    for (size_t k = 1; s.ok() && k < pieces; ++k) {
      s = start(k);
      if (s.ok()) s = links.FinishExchange();
      if (s.ok()) check(k - 1);
    }
    if (s.ok()) s = links.FinishExchange();
    if (s.ok()) check(pieces - 1);
  } else {
    for (size_t k = 0; s.ok() && k < pieces; k += 3) {
      if (k + 2 >= pieces) {  // the last one or two pieces: plain
        for (size_t j = k; s.ok() && j < pieces; ++j) s = plain(j);
      } else {
        s = start(k);
        if (s.ok()) s = start(k + 1);
        if (s.ok()) s = plain(k + 2);
      }
      for (size_t j = k; s.ok() && j < k + 3 && j < pieces; ++j) check(j);
      // Exchange finished the started ones: nothing is left to finish.
      if (s.ok()) EXPECT_EQ(links.FinishExchange().code(), Status::PRECONDITION);
    }
  }
  return s;
}

// Rounds back to back on the same links, every style against every other
// (rank parity picks the style), so a byte left over or missing in one round
// shows in the next. Returns the first failed round's Status.
inline Status RingRounds(Links& links) {
  const Style pairs[][2] = {
      {Style::kPlain, Style::kPlain},         {Style::kPipelined, Style::kPipelined},
      {Style::kMixed, Style::kMixed},         {Style::kPipelined, Style::kPlain},
      {Style::kPlain, Style::kPipelined},     {Style::kMixed, Style::kPlain},
      {Style::kPipelined, Style::kMixed},
  };
  for (const auto& pair : pairs) {
    Status s = RingScript(links, pair[links.rank() % 2]);
    if (!s.ok()) return s;
  }
  return Status();
}

// The two Precondition errors with their messages; a third StartExchange
// leaves the two started ones running, which then finish with their bytes.
inline void PreconditionScript(Links& links) {
  const int r = links.rank(), n = links.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  Status s = links.FinishExchange();
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  EXPECT_EQ(s.message(), "FinishExchange without a started exchange");
  std::string a = Piece(r, 7), b = Piece(r, 4);  // 3 MiB and 1 MiB: still moving
  std::string got_a(PieceBytes(prev, 7), '\0'), got_b(PieceBytes(prev, 4), '\0');
  ASSERT_TRUE(links.StartExchange(next, a.data(), a.size(), prev, &got_a[0], got_a.size()).ok());
  ASSERT_TRUE(links.StartExchange(next, b.data(), b.size(), prev, &got_b[0], got_b.size()).ok());
  char byte = 0;
  s = links.StartExchange(next, &byte, 1, prev, &byte, 1);
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  EXPECT_EQ(s.message(), "StartExchange: 2 exchanges are already started and not finished");
  s = links.FinishExchange();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(FirstDifference(got_a, Piece(prev, 7)), "equal") << "rank " << r;
  s = links.FinishExchange();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(FirstDifference(got_b, Piece(prev, 4)), "equal") << "rank " << r;
  s = links.FinishExchange();
  EXPECT_EQ(s.code(), Status::PRECONDITION);
  EXPECT_EQ(s.message(), "FinishExchange without a started exchange");
}

// The ring allreduce (it pipelines its pieces) over the real links: exact
// sums for several dtypes, with chunks from one element to several pieces.
template <typename T>
void CheckRingSums(Links& links, DataType dtype, size_t count) {
  const int r = links.rank(), n = links.size();
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(i % 1000 + 3 * r);
  RingAllreduce ring;
  Status s = ring.Run(links, v.data(), v.data(), static_cast<int64_t>(count), dtype,
                      ReduceOp::SUM);
  ASSERT_TRUE(s.ok()) << s.message();
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    wrong += v[i] != static_cast<T>(n * (i % 1000) + 3 * n * (n - 1) / 2);
  }
  EXPECT_EQ(wrong, 0u) << DataTypeName(dtype) << " count " << count << " rank " << r;
}

inline void CheckRingSumsEveryDtype(Links& links) {
  for (size_t count : {size_t{1}, size_t{1001}, size_t{3} * (3 << 18) + 7}) {
    CheckRingSums<float>(links, DataType::FLOAT32, count);
    CheckRingSums<int32_t>(links, DataType::INT32, count);
    CheckRingSums<double>(links, DataType::FLOAT64, count);
    CheckRingSums<int64_t>(links, DataType::INT64, count);
  }
}

}  // namespace testing
}  // namespace tfhvd

#endif  // TFHVD_TESTS_UNIT_CC_EXCHANGE_SCRIPT_H_
