// How many collectives each algorithm has run in this process, per operation
// (all process sets together): a debug hook that tests and benchmarks read
// (tf_hvd._hvd.algorithm_counts()) to see that a knob took the path it
// names. Nothing decides anything by it.
//
//   CountAlgorithm("allgather", "hierarchical");
//   AlgorithmCounts();  // {"allgather/hierarchical": 1}
#ifndef TFHVD_COMMON_ALGORITHMS_ALGORITHM_COUNTS_H_
#define TFHVD_COMMON_ALGORITHMS_ALGORITHM_COUNTS_H_

#include <cstdint>
#include <map>
#include <string>

namespace tfhvd {

// op and algorithm: string literals (their addresses are the keys).
void CountAlgorithm(const char* op, const char* algorithm);

// "op/algorithm" -> count, for every pair counted so far.
std::map<std::string, uint64_t> AlgorithmCounts();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_ALGORITHMS_ALGORITHM_COUNTS_H_
