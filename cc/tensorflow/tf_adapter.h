// Conversions between TensorFlow's types and the core's: data types, shapes,
// Status, and the tensor name an op instance negotiates under.
#ifndef TFHVD_TENSORFLOW_TF_ADAPTER_H_
#define TFHVD_TENSORFLOW_TF_ADAPTER_H_

#include <string>

#include "cc/common/common.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"

namespace tfhvd {
namespace tf {

// Returns false for a type the core does not handle.
bool ToCoreDataType(tensorflow::DataType dtype, DataType* out);
Shape ToCoreShape(const tensorflow::TensorShape& shape);
tensorflow::TensorShape ToTFShape(const Shape& shape);
absl::Status ToTFStatus(const Status& status);

// The name under which a tensor is negotiated: the tensor_name attr when set
// (eager mode), otherwise the node name, without its scope when
// ignore_name_scope is set.
std::string NegotiationName(const std::string& node_name, const std::string& tensor_name,
                            bool ignore_name_scope);

}  // namespace tf
}  // namespace tfhvd

#endif  // TFHVD_TENSORFLOW_TF_ADAPTER_H_
