// The checks one rank makes on an op's arguments before it is queued (the
// coordinator then checks that all ranks agree: validation.h), and the fields
// they complete: alltoall's even splits, a process set's broadcast root as a
// position in the set.
//
//   EntryScope scope{/*set_id=*/0, /*ranks=*/{0, 1}, "the global process set"};
//   Status s = CheckEntry(scope, &entry);   // e.g. "tensor 'x': allgather needs ..."
#ifndef TFHVD_COMMON_NEGOTIATION_ENTRY_CHECKS_H_
#define TFHVD_COMMON_NEGOTIATION_ENTRY_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cc/common/negotiation/tensor_queue.h"

namespace tfhvd {

// The set an entry runs on, as the checks need it.
struct EntryScope {
  int32_t set_id;
  const std::vector<int>& ranks;  // global ranks, ascending (the set's size)
  const std::string& label;       // "process set 1 (ranks 0, 2)"
};

// The position of global rank `rank` in ascending `ranks`, or -1.
int PositionIn(const std::vector<int>& ranks, int rank);

Status CheckEntry(const EntryScope& scope, TensorTableEntry* entry);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_ENTRY_CHECKS_H_
