// The copies of the shared-memory collectives (shm_collectives.h): stores that
// bypass the cache for outputs too large to stay in it, and cache-line
// flushes for readers on hosts where rewriting lines a peer just read is slow
// (shm_timed_choice.h).
//
//   CopyOut(out, slot, bytes, /*streaming=*/bytes >= StreamingThreshold());
//   if (CpuCanFlushOpt()) FlushLines(slot, bytes);
#ifndef TFHVD_COMMON_ALGORITHMS_SHM_COPIES_H_
#define TFHVD_COMMON_ALGORITHMS_SHM_COPIES_H_

#include <cstddef>

namespace tfhvd {

// Copies with stores that bypass the cache (x86 SSE2; elsewhere memcpy).
void StreamCopy(char* dst, const char* src, size_t n);
// StreamCopy when streaming, else memcpy.
void CopyOut(char* dst, const char* src, size_t n, bool streaming);
// Collectives at least this large stream their output past the cache: half
// the last-level cache (or 16 MiB when the C library cannot tell).
size_t StreamingThreshold();
// Flushes the cache lines of [p, p + n) from every cache (clflushopt: weakly
// ordered, so the flushes of a piece overlap). Never changes what memory
// holds. A no-op where the CPU has no clflushopt.
void FlushLines(const char* p, size_t n);
bool CpuCanFlushOpt();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_SHM_COPIES_H_
