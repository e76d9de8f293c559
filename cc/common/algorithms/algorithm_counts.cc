#include "cc/common/algorithms/algorithm_counts.h"

#include <mutex>
#include <vector>

namespace tfhvd {

namespace {

struct Counter {
  const char* op;
  const char* algorithm;
  uint64_t count;
};

// A handful of pairs: a linear search by address beats hashing strings on
// every collective.
std::mutex& CountsMutex() {
  static std::mutex m;
  return m;
}

std::vector<Counter>& Counters() {
  static std::vector<Counter> counters;
  return counters;
}

}  // namespace

void CountAlgorithm(const char* op, const char* algorithm) {
  std::lock_guard<std::mutex> lock(CountsMutex());
  for (Counter& c : Counters()) {
    if (c.op == op && c.algorithm == algorithm) {
      ++c.count;
      return;
    }
  }
  Counters().push_back({op, algorithm, 1});
}

std::map<std::string, uint64_t> AlgorithmCounts() {
  std::lock_guard<std::mutex> lock(CountsMutex());
  std::map<std::string, uint64_t> out;
  for (const Counter& c : Counters()) out[std::string(c.op) + "/" + c.algorithm] += c.count;
  return out;
}

}  // namespace tfhvd
