// Remembers negotiated single-tensor responses so that, in steady state, a
// tensor that was negotiated before is coordinated by one bit in a bit-vector
// exchange instead of a gather to the coordinator. Every rank inserts, touches
// and evicts in the same order, so bit positions agree across ranks.
#ifndef TFHVD_COMMON_NEGOTIATION_RESPONSE_CACHE_H_
#define TFHVD_COMMON_NEGOTIATION_RESPONSE_CACHE_H_

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cc/common/negotiation/message.h"

namespace tfhvd {

class ResponseCache {
 public:
  enum class State { MISS, HIT, INVALID };

  explicit ResponseCache(size_t capacity) : slots_(capacity) {}

  bool enabled() const { return !slots_.empty(); }
  size_t capacity() const { return slots_.size(); }
  size_t words() const { return (slots_.size() + 63) / 64; }

  // HIT: cached with the same parameters; INVALID: cached under this name with
  // different parameters (shape changed, ...); *bit is set for both.
  State Lookup(const Request& request, uint32_t* bit) const;
  // Inserts (or replaces) the response for request.name; evicts the least
  // recently used slot when full.
  void Put(const Response& response, const Request& request);
  const Response& Get(uint32_t bit) const { return slots_[bit].response; }
  // The request the slot was cached for (its group and group size).
  const Request& GetRequest(uint32_t bit) const { return slots_[bit].request; }
  void Touch(uint32_t bit) { slots_[bit].last_used = ++clock_; }
  void Erase(uint32_t bit);

 private:
  struct Slot {
    bool used = false;
    Request request;
    Response response;
    uint64_t last_used = 0;
  };
  std::vector<Slot> slots_;
  std::unordered_map<std::string, uint32_t> by_name_;
  uint64_t clock_ = 0;
};

// A fused response's i-th tensor as a response of its own.
Response SingleTensorResponse(const Response& fused, size_t i, int size);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_NEGOTIATION_RESPONSE_CACHE_H_
