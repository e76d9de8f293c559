// Moves the buffers the single-copy allreduce reads with process_vm_readv
// onto 2 MiB pages, once per buffer.
//
// The system call pins every page it copies from and walks its page table
// entry by entry: 512 entries per 2 MiB on 4 KiB pages, one on a 2 MiB page.
// MPICH's large allreduce from a NumPy buffer (which NumPy places on 2 MiB
// pages itself) reads this way too; TensorFlow's buffers get 4 KiB pages
// unless THP is "always". The figures: docs/performance.md, "Figures behind
// the core's defaults".
//
//   HugePages pages;
//   pages.Collapse(tensor, bytes);  // the first time: one copy into 2 MiB pages
//   pages.Collapse(tensor, bytes);  // after that: nothing (a set lookup)
#ifndef TFHVD_COMMON_ALGORITHMS_HUGE_PAGES_H_
#define TFHVD_COMMON_ALGORITHMS_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <unordered_set>

namespace tfhvd {

class HugePages {
 public:
  static constexpr size_t kPageBytes = size_t{2} << 20;
  // At most this many pages (32 GiB) are remembered; beyond, nothing is
  // collapsed: an allocator that hands out fresh addresses every call would
  // otherwise pay a copy every call.
  static constexpr size_t kMaxPages = 16384;

  // Collapses the 2 MiB pages that lie wholly inside [data, data + bytes)
  // and were not tried by this object before (MADV_COLLAPSE, Linux 6.1; on
  // older kernels, or when the kernel has no free huge page, the buffer stays
  // as it is: only slower). Returns the pages collapsed now.
  size_t Collapse(const void* data, size_t bytes);
  size_t remembered() const { return seen_.size(); }

 private:
  std::unordered_set<uintptr_t> seen_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_HUGE_PAGES_H_
