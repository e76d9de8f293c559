#include "cc/common/common.h"

#include <sstream>

namespace tfhvd {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? "," : "") << shape[i];
  out << "]";
  return out.str();
}

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::UINT8: case DataType::INT8: case DataType::BOOL: return 1;
    case DataType::UINT16: case DataType::INT16:
    case DataType::FLOAT16: case DataType::BFLOAT16: return 2;
    case DataType::INT32: case DataType::FLOAT32: return 4;
    case DataType::INT64: case DataType::FLOAT64: return 8;
  }
  return 0;
}

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::UINT8: return "uint8";
    case DataType::INT8: return "int8";
    case DataType::UINT16: return "uint16";
    case DataType::INT16: return "int16";
    case DataType::INT32: return "int32";
    case DataType::INT64: return "int64";
    case DataType::FLOAT16: return "float16";
    case DataType::BFLOAT16: return "bfloat16";
    case DataType::FLOAT32: return "float32";
    case DataType::FLOAT64: return "float64";
    case DataType::BOOL: return "bool";
  }
  return "unknown";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::AVERAGE: return "Average";
    case ReduceOp::SUM: return "Sum";
    case ReduceOp::ADASUM: return "Adasum";
    case ReduceOp::MIN: return "Min";
    case ReduceOp::MAX: return "Max";
    case ReduceOp::PRODUCT: return "Product";
  }
  return "unknown";
}

const char* OpTypeName(OpType op) {
  switch (op) {
    case OpType::ALLREDUCE: return "allreduce";
    case OpType::ALLGATHER: return "allgather";
    case OpType::BROADCAST: return "broadcast";
    case OpType::ALLTOALL: return "alltoall";
    case OpType::REDUCESCATTER: return "reducescatter";
    case OpType::JOIN: return "join";
    case OpType::BARRIER: return "barrier";
  }
  return "unknown";
}

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::FLOAT16 || dtype == DataType::BFLOAT16 ||
         dtype == DataType::FLOAT32 || dtype == DataType::FLOAT64;
}

}  // namespace tfhvd
