// Framework-agnostic basic types of the tf_hvd core: data types, reduce ops,
// collective kinds, shapes and Status. No TensorFlow headers here.
#ifndef TFHVD_COMMON_COMMON_H_
#define TFHVD_COMMON_COMMON_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tfhvd {

enum class DataType : uint8_t {
  UINT8 = 0, INT8, UINT16, INT16, INT32, INT64,
  FLOAT16, BFLOAT16, FLOAT32, FLOAT64, BOOL,
};

// Values match Horovod's Python constants (Average=0, Sum=1, ...).
enum class ReduceOp : uint8_t {
  AVERAGE = 0, SUM = 1, ADASUM = 2, MIN = 3, MAX = 4, PRODUCT = 5,
};

enum class OpType : uint8_t {
  ALLREDUCE = 0, ALLGATHER, BROADCAST, ALLTOALL, REDUCESCATTER, JOIN, BARRIER,
};

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);
size_t DataTypeSize(DataType dtype);
const char* DataTypeName(DataType dtype);
const char* ReduceOpName(ReduceOp op);
const char* OpTypeName(OpType op);
bool IsFloatingPoint(DataType dtype);

// How a reducescatter splits dimension 0 of its tensor over `size` ranks:
// dim0 / size rows each, the first dim0 % size ranks one more (Horovod's
// split, the same on the CPU and GPU paths).
//
//   RowSplit split{/*dim0=*/7, /*size=*/3};
//   split.rows(0);   // 3
//   split.first(2);  // 5
struct RowSplit {
  int64_t dim0;
  int64_t size;
  int64_t rows(int64_t rank) const { return dim0 / size + (rank < dim0 % size ? 1 : 0); }
  int64_t first(int64_t rank) const {
    return rank * (dim0 / size) + (rank < dim0 % size ? rank : dim0 % size);
  }
};

// An error is a value. Codes map one-to-one onto TensorFlow error classes in
// the adapter (InvalidArgument, Aborted, Unavailable, FailedPrecondition, ...).
class Status {
 public:
  enum Code : uint8_t {
    OK = 0, UNKNOWN, INVALID_ARGUMENT, PRECONDITION, ABORTED, UNAVAILABLE,
    DEADLINE_EXCEEDED,
  };
  Status() = default;
  Status(Code code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status InvalidArgument(std::string m) { return {INVALID_ARGUMENT, std::move(m)}; }
  static Status Precondition(std::string m) { return {PRECONDITION, std::move(m)}; }
  static Status Aborted(std::string m) { return {ABORTED, std::move(m)}; }
  static Status Unavailable(std::string m) { return {UNAVAILABLE, std::move(m)}; }
  static Status Unknown(std::string m) { return {UNKNOWN, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {DEADLINE_EXCEEDED, std::move(m)}; }

  bool ok() const { return code_ == OK; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // The rank a lost link or stalled transfer points at (-1: none), so that
  // the core can name it in its fault report.
  int peer() const { return peer_; }
  Status WithPeer(int rank) const {
    Status s = *this;
    s.peer_ = rank;
    return s;
  }

 private:
  Code code_ = OK;
  std::string message_;
  int peer_ = -1;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_COMMON_H_
