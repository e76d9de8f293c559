// The segments of one shared-memory collective seen as one byte range
// (shm_collectives.h): Visit(from, to, fn) calls fn(input, output, offset,
// bytes) for each piece of [from, to) that lies in one segment, offset
// counting from the start of the range.
//
//   ShmCollectives::Span span(segments, /*elem=*/4);
//   span.Visit(0, span.bytes(), [&](const char* in, char* out, size_t at, size_t n) {...});
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_SPAN_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_SPAN_H_

#include <algorithm>
#include <cstddef>
#include <vector>

#include "cc/common/algorithms/shm_collectives.h"

namespace tfhvd {

class ShmCollectives::Span {
 public:
  Span(const std::vector<Segment>& segments, size_t elem) : segments_(segments) {
    starts_.reserve(segments.size() + 1);
    size_t at = 0;
    for (const Segment& seg : segments) {
      starts_.push_back(at);
      at += static_cast<size_t>(seg.count) * elem;
    }
    starts_.push_back(at);
  }
  size_t bytes() const { return starts_.back(); }
  size_t segments() const { return segments_.size(); }
  const Segment& segment(size_t i) const { return segments_[i]; }
  // The segment that holds byte `at` of the range, and where it starts.
  size_t index(size_t at) const {
    return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), at) -
                               starts_.begin()) - 1;
  }
  size_t start(size_t i) const { return starts_[i]; }

  template <typename Fn>
  void Visit(size_t from, size_t to, Fn fn) const {
    if (from >= to) return;
    size_t i = index(from);
    for (; from < to; ++i) {
      const size_t end = std::min(to, starts_[i + 1]);
      if (end <= from) continue;  // an empty segment
      const size_t skip = from - starts_[i];
      fn(static_cast<const char*>(segments_[i].input) + skip,
         static_cast<char*>(segments_[i].output) + skip, from, end - from);
      from = end;
    }
  }

 private:
  const std::vector<Segment>& segments_;
  std::vector<size_t> starts_;  // byte offset of each segment, then the total
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_SPAN_H_
