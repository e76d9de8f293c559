#include "cc/common/negotiation/response_cache.h"

namespace tfhvd {

namespace {
bool SameParameters(const Request& a, const Request& b) {
  return a.type == b.type && a.dtype == b.dtype && a.shape == b.shape &&
         a.root_rank == b.root_rank && a.reduce_op == b.reduce_op &&
         a.prescale == b.prescale && a.postscale == b.postscale && a.group == b.group &&
         a.group_size == b.group_size && a.on_gpu == b.on_gpu;
}
}  // namespace

ResponseCache::State ResponseCache::Lookup(const Request& request, uint32_t* bit) const {
  auto it = by_name_.find(request.name);
  if (it == by_name_.end()) return State::MISS;
  *bit = it->second;
  return SameParameters(slots_[it->second].request, request) ? State::HIT : State::INVALID;
}

void ResponseCache::Put(const Response& response, const Request& request) {
  if (slots_.empty()) return;
  uint32_t bit;
  auto it = by_name_.find(request.name);
  if (it != by_name_.end()) {
    bit = it->second;
  } else {
    bit = 0;
    bool found_free = false;
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i].used) { bit = i; found_free = true; break; }
    }
    if (!found_free) {
      for (uint32_t i = 1; i < slots_.size(); ++i)
        if (slots_[i].last_used < slots_[bit].last_used) bit = i;
      by_name_.erase(slots_[bit].request.name);
    }
    by_name_[request.name] = bit;
  }
  Slot& slot = slots_[bit];
  slot.used = true;
  slot.request = request;
  slot.response = response;
  slot.last_used = ++clock_;
}

void ResponseCache::Erase(uint32_t bit) {
  if (bit >= slots_.size() || !slots_[bit].used) return;
  by_name_.erase(slots_[bit].request.name);
  slots_[bit] = Slot();
}

Response SingleTensorResponse(const Response& fused, size_t i, int size) {
  Response r = fused;
  r.names = {fused.names[i]};
  if (fused.type == OpType::ALLREDUCE && fused.sizes.size() == fused.names.size()) {
    r.sizes = {fused.sizes[i]};
  } else if (fused.type == OpType::ALLGATHER) {
    auto s = static_cast<size_t>(size);
    r.sizes.assign(fused.sizes.begin() + static_cast<long>(i * s),
                   fused.sizes.begin() + static_cast<long>((i + 1) * s));
    r.row_elements = {fused.row_elements[i]};
  }
  return r;
}

}  // namespace tfhvd
