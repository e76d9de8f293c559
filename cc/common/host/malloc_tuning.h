// Keeps large freed buffers in the process heap for reuse.
//
// glibc maps every allocation above a threshold (at most 32 MiB by default)
// afresh and unmaps it on free, so a step that allocates a 256 MiB output
// tensor pays ~65k page faults and the kernel zeroing every page, each time
// (docs/performance.md, "Figures behind the core's defaults"). Raising the
// mmap and trim thresholds lets the next step reuse the memory instead.
#ifndef TFHVD_COMMON_HOST_MALLOC_TUNING_H_
#define TFHVD_COMMON_HOST_MALLOC_TUNING_H_

namespace tfhvd {

// Applies the thresholds once per process, unless the user chose them through
// glibc's own MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_. Returns whether
// anything was changed.
bool KeepLargeBuffersInHeap();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_HOST_MALLOC_TUNING_H_
