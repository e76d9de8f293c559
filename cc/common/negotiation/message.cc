#include "cc/common/negotiation/message.h"

#include <cstring>

namespace tfhvd {

namespace {

class Writer {
 public:
  template <typename T>
  void Put(T v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(T)); }
  void PutString(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void PutInts(const std::vector<int64_t>& v) {
    Put<uint32_t>(static_cast<uint32_t>(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    if (pos_ + sizeof(T) > in_.size()) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* s) {
    uint32_t n;
    if (!Get(&n) || pos_ + n > in_.size()) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool GetInts(std::vector<int64_t>* v) {
    uint32_t n;
    if (!Get(&n) || pos_ + size_t{n} * sizeof(int64_t) > in_.size()) return false;
    v->resize(n);
    std::memcpy(v->data(), in_.data() + pos_, n * sizeof(int64_t));
    pos_ += n * sizeof(int64_t);
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace

std::string SerializeRequestList(const RequestList& list) {
  Writer w;
  w.Put<uint8_t>(list.shutdown);
  w.Put<uint32_t>(static_cast<uint32_t>(list.requests.size()));
  for (const auto& r : list.requests) {
    w.Put<int32_t>(r.rank);
    w.Put<uint8_t>(static_cast<uint8_t>(r.type));
    w.Put<uint8_t>(static_cast<uint8_t>(r.dtype));
    w.PutString(r.name);
    w.PutInts(r.shape);
    w.Put<int32_t>(r.root_rank);
    w.Put<uint8_t>(static_cast<uint8_t>(r.reduce_op));
    w.Put<double>(r.prescale);
    w.Put<double>(r.postscale);
    w.PutString(r.group);
    w.Put<int32_t>(r.group_size);
    w.Put<uint8_t>(r.on_gpu);
  }
  return w.Take();
}

bool ParseRequestList(const std::string& bytes, RequestList* list) {
  Reader r(bytes);
  uint8_t shutdown, type, dtype, op, on_gpu;
  uint32_t n;
  if (!r.Get(&shutdown) || !r.Get(&n)) return false;
  list->shutdown = shutdown != 0;
  list->requests.resize(n);
  for (auto& q : list->requests) {
    if (!r.Get(&q.rank) || !r.Get(&type) || !r.Get(&dtype) || !r.GetString(&q.name) ||
        !r.GetInts(&q.shape) || !r.Get(&q.root_rank) || !r.Get(&op) ||
        !r.Get(&q.prescale) || !r.Get(&q.postscale) || !r.GetString(&q.group) ||
        !r.Get(&q.group_size) || !r.Get(&on_gpu))
      return false;
    q.on_gpu = on_gpu != 0;
    q.type = static_cast<OpType>(type);
    q.dtype = static_cast<DataType>(dtype);
    q.reduce_op = static_cast<ReduceOp>(op);
  }
  return r.done();
}

std::string SerializeResponseList(const ResponseList& list) {
  Writer w;
  w.Put<uint8_t>(list.shutdown);
  w.Put<uint32_t>(static_cast<uint32_t>(list.responses.size()));
  for (const auto& r : list.responses) {
    w.Put<uint8_t>(r.kind);
    w.Put<uint8_t>(static_cast<uint8_t>(r.type));
    w.Put<uint8_t>(static_cast<uint8_t>(r.dtype));
    w.Put<uint32_t>(static_cast<uint32_t>(r.names.size()));
    for (const auto& name : r.names) w.PutString(name);
    w.PutInts(r.sizes);
    w.PutInts(r.row_elements);
    w.Put<int32_t>(r.root_rank);
    w.Put<uint8_t>(static_cast<uint8_t>(r.reduce_op));
    w.Put<double>(r.prescale);
    w.Put<double>(r.postscale);
    w.Put<int32_t>(r.last_joined_rank);
    w.Put<uint8_t>(r.cacheable);
    w.Put<uint8_t>(r.on_gpu);
    w.Put<uint8_t>(r.error_code);
    w.PutString(r.error);
    w.PutString(r.group);
  }
  w.Put<uint8_t>(list.has_tuned);
  if (list.has_tuned) {
    w.Put<int64_t>(list.tuned.fusion_threshold_bytes);
    w.Put<double>(list.tuned.cycle_time_ms);
    w.Put<uint8_t>(list.tuned.response_cache);
    w.Put<uint8_t>(list.tuned.hierarchical_allreduce);
  }
  return w.Take();
}

bool ParseResponseList(const std::string& bytes, ResponseList* list) {
  Reader r(bytes);
  uint8_t shutdown, kind, type, dtype, op, cacheable, on_gpu;
  uint32_t n, names;
  if (!r.Get(&shutdown) || !r.Get(&n)) return false;
  list->shutdown = shutdown != 0;
  list->responses.resize(n);
  for (auto& q : list->responses) {
    if (!r.Get(&kind) || !r.Get(&type) || !r.Get(&dtype) || !r.Get(&names)) return false;
    q.names.resize(names);
    for (auto& name : q.names)
      if (!r.GetString(&name)) return false;
    if (!r.GetInts(&q.sizes) || !r.GetInts(&q.row_elements) || !r.Get(&q.root_rank) ||
        !r.Get(&op) || !r.Get(&q.prescale) || !r.Get(&q.postscale) ||
        !r.Get(&q.last_joined_rank) || !r.Get(&cacheable) || !r.Get(&on_gpu) ||
        !r.Get(&q.error_code) || !r.GetString(&q.error) || !r.GetString(&q.group))
      return false;
    q.kind = static_cast<Response::Type>(kind);
    q.type = static_cast<OpType>(type);
    q.dtype = static_cast<DataType>(dtype);
    q.reduce_op = static_cast<ReduceOp>(op);
    q.cacheable = cacheable != 0;
    q.on_gpu = on_gpu != 0;
  }
  uint8_t has_tuned, cache, hierarchical;
  if (!r.Get(&has_tuned)) return false;
  list->has_tuned = has_tuned != 0;
  if (list->has_tuned) {
    if (!r.Get(&list->tuned.fusion_threshold_bytes) || !r.Get(&list->tuned.cycle_time_ms) ||
        !r.Get(&cache) || !r.Get(&hierarchical))
      return false;
    list->tuned.response_cache = cache != 0;
    list->tuned.hierarchical_allreduce = hierarchical != 0;
  }
  return r.done();
}

}  // namespace tfhvd
