#include "cc/common/fusion.h"

namespace tfhvd {

namespace {
int64_t Bytes(const Response& r) {
  int64_t n = 0;
  for (int64_t s : r.sizes) n += s;
  return n * static_cast<int64_t>(DataTypeSize(r.dtype));
}

bool Compatible(const Response& a, const Response& b) {
  return a.kind == Response::OPERATION && b.kind == Response::OPERATION &&
         a.type == OpType::ALLREDUCE && b.type == OpType::ALLREDUCE &&
         a.dtype == b.dtype && a.reduce_op == b.reduce_op && a.prescale == b.prescale &&
         a.postscale == b.postscale;
}
}  // namespace

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes) {
  if (threshold_bytes <= 0) return responses;
  std::vector<Response> out;
  for (auto& r : responses) {
    if (!out.empty() && Compatible(out.back(), r) &&
        Bytes(out.back()) + Bytes(r) <= threshold_bytes) {
      Response& f = out.back();
      f.names.insert(f.names.end(), r.names.begin(), r.names.end());
      f.sizes.insert(f.sizes.end(), r.sizes.begin(), r.sizes.end());
      f.cacheable = f.cacheable && r.cacheable;
    } else {
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace tfhvd
