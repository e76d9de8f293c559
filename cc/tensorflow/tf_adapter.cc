#include "cc/tensorflow/tf_adapter.h"

namespace tfhvd {
namespace tf {

bool ToCoreDataType(tensorflow::DataType dtype, DataType* out) {
  switch (dtype) {
    case tensorflow::DT_UINT8: *out = DataType::UINT8; return true;
    case tensorflow::DT_INT8: *out = DataType::INT8; return true;
    case tensorflow::DT_UINT16: *out = DataType::UINT16; return true;
    case tensorflow::DT_INT16: *out = DataType::INT16; return true;
    case tensorflow::DT_INT32: *out = DataType::INT32; return true;
    case tensorflow::DT_INT64: *out = DataType::INT64; return true;
    case tensorflow::DT_HALF: *out = DataType::FLOAT16; return true;
    case tensorflow::DT_BFLOAT16: *out = DataType::BFLOAT16; return true;
    case tensorflow::DT_FLOAT: *out = DataType::FLOAT32; return true;
    case tensorflow::DT_DOUBLE: *out = DataType::FLOAT64; return true;
    case tensorflow::DT_BOOL: *out = DataType::BOOL; return true;
    default: return false;
  }
}

Shape ToCoreShape(const tensorflow::TensorShape& shape) {
  Shape out;
  for (int i = 0; i < shape.dims(); ++i) out.push_back(shape.dim_size(i));
  return out;
}

tensorflow::TensorShape ToTFShape(const Shape& shape) {
  tensorflow::TensorShape out;
  for (int64_t d : shape) out.AddDim(d);
  return out;
}

absl::Status ToTFStatus(const Status& status) {
  switch (status.code()) {
    case Status::OK: return absl::OkStatus();
    case Status::INVALID_ARGUMENT: return absl::InvalidArgumentError(status.message());
    case Status::PRECONDITION: return absl::FailedPreconditionError(status.message());
    case Status::ABORTED: return absl::AbortedError(status.message());
    case Status::UNAVAILABLE: return absl::UnavailableError(status.message());
    case Status::DEADLINE_EXCEEDED: return absl::DeadlineExceededError(status.message());
    default: return absl::UnknownError(status.message());
  }
}

std::string NegotiationName(const std::string& node_name, const std::string& tensor_name,
                            bool ignore_name_scope) {
  if (!tensor_name.empty()) return tensor_name;
  if (ignore_name_scope) {
    size_t slash = node_name.rfind('/');
    if (slash != std::string::npos) return node_name.substr(slash + 1);
  }
  return node_name;
}

}  // namespace tf
}  // namespace tfhvd
