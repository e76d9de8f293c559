// The Horovod custom call's handler (xla_custom_call.h) and its registration
// for XLA's CPU ("Host") platform.
#include "cc/tensorflow/xla/xla_custom_call.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "cc/common/operations.h"

namespace xla {
namespace ffi {
const XLA_FFI_Api* GetXlaFfiApi();  // libtensorflow_framework.so.2
}  // namespace ffi
}  // namespace xla

namespace tfhvd {
namespace tf {

namespace ffi = xla::ffi;

const XLA_FFI_Api* XlaFfiApi() { return ffi::GetXlaFfiApi(); }

namespace {

bool FromFfiType(ffi::DataType t, DataType* out) {
  switch (t) {
    case ffi::DataType::U8: *out = DataType::UINT8; return true;
    case ffi::DataType::S8: *out = DataType::INT8; return true;
    case ffi::DataType::U16: *out = DataType::UINT16; return true;
    case ffi::DataType::S16: *out = DataType::INT16; return true;
    case ffi::DataType::S32: *out = DataType::INT32; return true;
    case ffi::DataType::S64: *out = DataType::INT64; return true;
    case ffi::DataType::F16: *out = DataType::FLOAT16; return true;
    case ffi::DataType::BF16: *out = DataType::BFLOAT16; return true;
    case ffi::DataType::F32: *out = DataType::FLOAT32; return true;
    case ffi::DataType::F64: *out = DataType::FLOAT64; return true;
    case ffi::DataType::PRED: *out = DataType::BOOL; return true;
    default: return false;
  }
}

ffi::Error ToFfiError(const Status& s) {
  if (s.ok()) return ffi::Error::Success();
  ffi::ErrorCode code = ffi::ErrorCode::kUnknown;
  switch (s.code()) {
    case Status::INVALID_ARGUMENT: code = ffi::ErrorCode::kInvalidArgument; break;
    case Status::PRECONDITION: code = ffi::ErrorCode::kFailedPrecondition; break;
    case Status::ABORTED: code = ffi::ErrorCode::kAborted; break;
    case Status::UNAVAILABLE: code = ffi::ErrorCode::kUnavailable; break;
    case Status::DEADLINE_EXCEEDED: code = ffi::ErrorCode::kDeadlineExceeded; break;
    default: break;
  }
  return ffi::Error(code, s.message());
}

const char* KindName(XlaCallKind kind) {
  switch (kind) {
    case XlaCallKind::ALLREDUCE: return "allreduce";
    case XlaCallKind::GROUPED_ALLREDUCE: return "grouped allreduce";
    case XlaCallKind::ALLGATHER: return "allgather";
    case XlaCallKind::BROADCAST: return "broadcast";
  }
  return "collective";
}

// Counts the entries' callbacks down; Wait returns the first error once all ran.
class Completion {
 public:
  explicit Completion(size_t n) : remaining_(n) {}
  void Done(const Status& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!s.ok() && error_.ok()) error_ = s;
    if (--remaining_ == 0) cv_.notify_all();
  }
  Status Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return remaining_ == 0; });
    return error_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t remaining_;
  Status error_;
};

// An entry for argument/result `i`, negotiated as `name`.
Status FillEntry(const ffi::AnyBuffer& in, const ffi::AnyBuffer& out, const XlaCallConfig& c,
                 const std::string& name, TensorTableEntry* e) {
  if (!FromFfiType(in.element_type(), &e->request.dtype)) {
    return Status::InvalidArgument(std::string("tensor '") + name + "': " + KindName(c.kind) +
                                   " inside XLA does not support its element type");
  }
  e->request.name = name;
  e->request.shape.assign(in.dimensions().begin(), in.dimensions().end());
  e->request.reduce_op = static_cast<ReduceOp>(c.reduce_op);
  e->request.prescale = c.prescale;
  e->request.postscale = c.postscale;
  e->request.root_rank = static_cast<int32_t>(c.root_rank);
  e->input = in.untyped_data();
  switch (c.kind) {
    case XlaCallKind::ALLREDUCE:
    case XlaCallKind::GROUPED_ALLREDUCE:
      e->request.type = OpType::ALLREDUCE;
      e->output = out.untyped_data();
      break;
    case XlaCallKind::BROADCAST:
      e->request.type = OpType::BROADCAST;
      e->output = out.untyped_data();
      break;
    case XlaCallKind::ALLGATHER: {
      e->request.type = OpType::ALLGATHER;
      // XLA fixed the output's rows at compile time (this rank's rows times
      // the set's size); any other total means the ranks' first dimensions differ.
      const int64_t rows = out.dimensions().size() == 0 ? 0 : out.dimensions()[0];
      const int64_t mine = in.dimensions().size() == 0 ? 0 : in.dimensions()[0];
      void* data = out.untyped_data();
      e->allocate_output = [name, rows, mine, data](const Shape& shape, void** ptr) -> Status {
        if (shape.empty() || shape[0] != rows) {
          return Status::InvalidArgument(
              "allgather of tensor '" + name + "' inside an XLA-compiled function needs the "
              "same first dimension on every rank: this rank has " + std::to_string(mine) +
              " rows and was compiled for " + std::to_string(rows) + " in all, the ranks sent " +
              std::to_string(shape.empty() ? 0 : shape[0]) +
              " (run this allgather outside XLA for ragged first dimensions)");
        }
        *ptr = data;
        return Status();
      };
      break;
    }
  }
  return Status();
}

}  // namespace

XlaCallConfig XlaConfigFromAttrs(int64_t kind, std::string_view tensor_name, int64_t reduce_op,
                                 float prescale, float postscale, int64_t root_rank,
                                 int64_t process_set_id) {
  XlaCallConfig c;
  c.kind = static_cast<XlaCallKind>(kind);
  c.tensor_name = std::string(tensor_name);
  c.reduce_op = reduce_op;
  c.prescale = prescale;
  c.postscale = postscale;
  c.root_rank = root_rank;
  c.process_set_id = process_set_id;
  return c;
}

ffi::Error RunXlaCollective(ffi::RemainingArgs args, ffi::RemainingRets rets,
                            const XlaCallConfig& config, const XlaPlacement& place) {
  Status s = CheckInitialized();
  if (!s.ok()) return ToFfiError(s);
  const size_t n = args.size();
  if (rets.size() != n) {
    return ffi::Error::Internal("tensor '" + config.tensor_name + "': custom call has " +
                                std::to_string(n) + " operands but " +
                                std::to_string(rets.size()) + " results");
  }
  if (n == 0) return ffi::Error::Success();  // an empty group
  const bool grouped = config.kind == XlaCallKind::GROUPED_ALLREDUCE;
  std::vector<TensorTableEntry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    auto in = args.get<ffi::AnyBuffer>(i);
    auto out = rets.get<ffi::AnyBuffer>(i);
    if (in.has_error()) return in.error();
    if (out.has_error()) return out.error();
    const std::string name =
        grouped ? config.tensor_name + "_" + std::to_string(i) : config.tensor_name;
    s = FillEntry(*in, **out, config, name, &entries[i]);
    if (!s.ok()) return ToFfiError(s);
  }
  if (place) {
    s = place(&entries);
    if (!s.ok()) return ToFfiError(s);
  }
  auto completion = std::make_shared<Completion>(n);
  for (auto& e : entries) {
    e.callback = [completion](const Status& st) { completion->Done(st); };
  }
  const int32_t set = static_cast<int32_t>(config.process_set_id);
  s = grouped ? EnqueueGroup(config.tensor_name, std::move(entries), set)
              : Enqueue(std::move(entries[0]), set);
  if (!s.ok()) return ToFfiError(s);  // no callback ran
  return ToFfiError(completion->Wait());
}

namespace {

ffi::Error HostCollective(ffi::RemainingArgs args, ffi::RemainingRets rets, int64_t kind,
                          std::string_view tensor_name, int64_t reduce_op, float prescale,
                          float postscale, int64_t root_rank, int64_t process_set_id) {
  return RunXlaCollective(args, rets,
                          XlaConfigFromAttrs(kind, tensor_name, reduce_op, prescale, postscale,
                                             root_rank, process_set_id),
                          nullptr);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER(kHostCollectiveHandler, HostCollective,
                       TFHVD_XLA_CALL_ATTRS(ffi::Ffi::Bind().RemainingArgs().RemainingRets()));

XLA_FFI_REGISTER_HANDLER(XlaFfiApi(), kXlaCallTarget, "Host", kHostCollectiveHandler);

}  // namespace tf
}  // namespace tfhvd
