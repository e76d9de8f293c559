#include "cc/common/negotiation/fusion.h"

namespace tfhvd {

namespace {
int64_t Bytes(const Response& r) {
  int64_t n = 0;
  for (int64_t s : r.sizes) n += s;
  return n * static_cast<int64_t>(DataTypeSize(r.dtype));
}

bool Compatible(const Response& a, const Response& b, bool separate_groups) {
  if (separate_groups && a.group != b.group) return false;
  return a.kind == Response::OPERATION && b.kind == Response::OPERATION &&
         a.type == OpType::ALLREDUCE && b.type == OpType::ALLREDUCE &&
         a.dtype == b.dtype && a.reduce_op == b.reduce_op && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.on_gpu == b.on_gpu;
}
}  // namespace

// Each response not yet taken starts a fused response and takes every later
// compatible one that still fits, looking past incompatible ones (so a group
// of mixed dtypes fuses into one response per dtype). Every rank runs this on
// the same list, so every rank gets the same plan.
std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes,
                                    bool separate_groups) {
  if (threshold_bytes <= 0) return responses;
  std::vector<Response> out;
  std::vector<bool> taken(responses.size(), false);
  for (size_t i = 0; i < responses.size(); ++i) {
    if (taken[i]) continue;
    Response f = std::move(responses[i]);
    int64_t bytes = Bytes(f);
    for (size_t j = i + 1; j < responses.size() && bytes < threshold_bytes; ++j) {
      const Response& r = responses[j];
      if (taken[j] || !Compatible(f, r, separate_groups) || bytes + Bytes(r) > threshold_bytes)
        continue;
      f.names.insert(f.names.end(), r.names.begin(), r.names.end());
      f.sizes.insert(f.sizes.end(), r.sizes.begin(), r.sizes.end());
      f.cacheable = f.cacheable && r.cacheable;
      if (f.group != r.group) f.group.clear();
      bytes += Bytes(r);
      taken[j] = true;
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace tfhvd
