#include "cc/common/algorithms/adasum_allreduce.h"

#include <algorithm>
#include <cstring>

#include "cc/common/half.h"

namespace tfhvd {

namespace {

struct Range {
  int64_t lo, hi;
};

// Element access in double precision for the three supported types.
template <typename T>
struct Elem {
  static double Load(const void* p, int64_t i) { return static_cast<const T*>(p)[i]; }
  static void Store(void* p, int64_t i, double v) { static_cast<T*>(p)[i] = static_cast<T>(v); }
};
template <>
struct Elem<uint16_t> {  // float16
  static double Load(const void* p, int64_t i) {
    return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  static void Store(void* p, int64_t i, double v) {
    static_cast<uint16_t*>(p)[i] = FloatToHalf(static_cast<float>(v));
  }
};

// Adds (mine.theirs, |left|^2, |right|^2) over [lo, hi) to sums; `mine` is
// the left vector on the lower rank of the pair.
template <typename T>
void PartialSums(const void* mine, const void* theirs, int64_t lo, int64_t hi, int64_t base,
                 bool left, double* sums) {
  double dot = 0, mm = 0, tt = 0;
  for (int64_t i = lo; i < hi; ++i) {
    double a = Elem<T>::Load(mine, i), b = Elem<T>::Load(theirs, i - base);
    dot += a * b;
    mm += a * a;
    tt += b * b;
  }
  sums[0] += dot;
  sums[1] += left ? mm : tt;
  sums[2] += left ? tt : mm;
}

template <typename T>
void Combine(void* mine, const void* theirs, int64_t lo, int64_t hi, int64_t base, double cm,
             double ct) {
  for (int64_t i = lo; i < hi; ++i) {
    Elem<T>::Store(mine, i, cm * Elem<T>::Load(mine, i) + ct * Elem<T>::Load(theirs, i - base));
  }
}

double Coefficient(double dot, double norm2) { return norm2 > 0 ? 1.0 - dot / (2.0 * norm2) : 1.0; }

template <typename T>
Status Levels(Links& links, void* out, int64_t count, const std::vector<int64_t>& starts,
              std::vector<char>* recv, std::vector<double>* sums, std::vector<double>* peer_sums) {
  const int n = links.size(), rank = links.rank();
  const size_t tensors = starts.size() - 1;
  char* bytes = static_cast<char*>(out);
  std::vector<Range> parents;
  Range mine{0, count};
  for (int d = 1; d < n; d <<= 1) {
    const int peer = rank ^ d;
    const bool left = (rank & d) == 0;
    const int64_t mid = mine.lo + (mine.hi - mine.lo) / 2;
    const Range keep = left ? Range{mine.lo, mid} : Range{mid, mine.hi};
    const Range give = left ? Range{mid, mine.hi} : Range{mine.lo, mid};
    recv->resize(static_cast<size_t>(keep.hi - keep.lo) * sizeof(T) + 1);
    Status s = links.Exchange(peer, bytes + give.lo * sizeof(T),
                              static_cast<size_t>(give.hi - give.lo) * sizeof(T), peer,
                              recv->data(), static_cast<size_t>(keep.hi - keep.lo) * sizeof(T));
    if (!s.ok()) return s;
    sums->assign(3 * tensors, 0.0);
    for (size_t t = 0; t < tensors; ++t) {
      int64_t lo = std::max(keep.lo, starts[t]), hi = std::min(keep.hi, starts[t + 1]);
      if (lo < hi) PartialSums<T>(out, recv->data(), lo, hi, keep.lo, left, &(*sums)[3 * t]);
    }
    // Sum over the aligned block of 2d ranks that together hold both vectors.
    peer_sums->resize(sums->size());
    for (int e = 1; e <= d; e <<= 1) {
      s = links.Exchange(rank ^ e, sums->data(), sums->size() * sizeof(double), rank ^ e,
                         peer_sums->data(), peer_sums->size() * sizeof(double));
      if (!s.ok()) return s;
      for (size_t i = 0; i < sums->size(); ++i) (*sums)[i] += (*peer_sums)[i];
    }
    for (size_t t = 0; t < tensors; ++t) {
      int64_t lo = std::max(keep.lo, starts[t]), hi = std::min(keep.hi, starts[t + 1]);
      if (lo >= hi) continue;
      const double* v = &(*sums)[3 * t];
      double ca = Coefficient(v[0], v[1]), cb = Coefficient(v[0], v[2]);
      Combine<T>(out, recv->data(), lo, hi, keep.lo, left ? ca : cb, left ? cb : ca);
    }
    parents.push_back(mine);
    mine = keep;
  }
  // Distance halving: give the combined halves back up the levels.
  for (int d = n >> 1; d >= 1; d >>= 1) {
    const Range parent = parents.back();
    parents.pop_back();
    const Range other = mine.lo == parent.lo ? Range{mine.hi, parent.hi} : Range{parent.lo, mine.lo};
    Status s = links.Exchange(rank ^ d, bytes + mine.lo * sizeof(T),
                              static_cast<size_t>(mine.hi - mine.lo) * sizeof(T), rank ^ d,
                              bytes + other.lo * sizeof(T),
                              static_cast<size_t>(other.hi - other.lo) * sizeof(T));
    if (!s.ok()) return s;
    mine = parent;
  }
  return Status();
}

}  // namespace

std::string AdasumAllreduce::Unsupported(int ranks, DataType dtype) {
  if (ranks < 1 || (ranks & (ranks - 1)) != 0) {
    return "Adasum needs a power-of-two number of ranks (1, 2, 4, 8, ...); this job has " +
           std::to_string(ranks);
  }
  if (dtype != DataType::FLOAT16 && dtype != DataType::FLOAT32 && dtype != DataType::FLOAT64) {
    return std::string("Adasum reduces float16, float32 and float64 tensors, not ") +
           DataTypeName(dtype);
  }
  return "";
}

Status AdasumAllreduce::Run(Links& links, const void* input, void* output, int64_t count,
                            DataType dtype, const std::vector<int64_t>& tensor_counts) {
  std::string why = Unsupported(links.size(), dtype);
  if (!why.empty()) return Status::InvalidArgument(why);
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
  if (input != output && bytes > 0) std::memmove(output, input, bytes);
  if (links.size() == 1) return Status();
  std::vector<int64_t> starts{0};
  for (int64_t c : tensor_counts) starts.push_back(starts.back() + c);
  if (tensor_counts.empty() || starts.back() != count) starts = {0, count};
  switch (dtype) {
    case DataType::FLOAT16:
      return Levels<uint16_t>(links, output, count, starts, &recv_, &sums_, &peer_sums_);
    case DataType::FLOAT32:
      return Levels<float>(links, output, count, starts, &recv_, &sums_, &peer_sums_);
    default:
      return Levels<double>(links, output, count, starts, &recv_, &sums_, &peer_sums_);
  }
}

}  // namespace tfhvd
