// Op definitions and shape functions of the Horovod* ops.
// Every collective is stateful: its result depends on the other ranks, so
// TensorFlow must neither constant-fold it (it would run once, at
// optimisation time, and never again) nor deduplicate it. Every collective is
// also marked as distributed communication: TensorFlow's executor otherwise
// turns an UnavailableError (a peer is gone) into an InternalError inside
// tf.function and graphs ("to avoid invoking TF network error handling").
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tfhvd {
namespace tf {

using tensorflow::shape_inference::InferenceContext;
using tensorflow::shape_inference::ShapeHandle;

namespace {

#define TFHVD_NUMERIC_TYPES \
  "{uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double}"
#define TFHVD_ALL_TYPES \
  "{uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double, bool}"

absl::Status SameAsInput(InferenceContext* c) {
  c->set_output(0, c->input(0));
  return absl::OkStatus();
}

// Output 0 is the input with an unknown first dimension.
absl::Status UnknownFirstDim(InferenceContext* c) {
  ShapeHandle in;
  if (!c->WithRankAtLeast(c->input(0), 1, &in).ok()) {
    c->set_output(0, c->UnknownShape());
    return absl::OkStatus();
  }
  ShapeHandle out;
  TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
  c->set_output(0, out);
  return absl::OkStatus();
}

absl::Status Scalar(InferenceContext* c) {
  c->set_output(0, c->Scalar());
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("HorovodAllreduce")
    .Attr("T: " TFHVD_NUMERIC_TYPES)
    .Attr("reduce_op: int = 1")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("sum: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn(SameAsInput)
    .Doc("Reduces a tensor across all ranks; every rank receives the result.");

REGISTER_OP("HorovodGroupedAllreduce")
    .Attr("T: list(" TFHVD_NUMERIC_TYPES ")")
    .Attr("reduce_op: int = 1")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensors: T")
    .Output("sum: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn([](InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    })
    .Doc("Reduces a list of tensors across all ranks as one group.");

REGISTER_OP("HorovodAllgather")
    .Attr("T: " TFHVD_ALL_TYPES)
    .Attr("ignore_name_scope: bool = false")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn(UnknownFirstDim)
    .Doc("Concatenates every rank's tensor along dimension 0.");

REGISTER_OP("HorovodBroadcast")
    .Attr("T: " TFHVD_ALL_TYPES)
    .Attr("root_rank: int")
    .Attr("ignore_name_scope: bool = false")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn(SameAsInput)
    .Doc("Sends root_rank's tensor to every rank.");

REGISTER_OP("HorovodAlltoall")
    .Attr("T: " TFHVD_ALL_TYPES)
    .Attr("ignore_name_scope: bool = false")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn([](InferenceContext* c) {
      TF_RETURN_IF_ERROR(UnknownFirstDim(c));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc("Sends splits[i] rows of dimension 0 to rank i; receives rows from every rank.");

REGISTER_OP("HorovodReducescatter")
    .Attr("T: " TFHVD_NUMERIC_TYPES)
    .Attr("reduce_op: int = 1")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .Attr("ignore_name_scope: bool = false")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn(UnknownFirstDim)
    .Doc("Reduces across ranks and leaves each rank its share of dimension 0.");

REGISTER_OP("HorovodJoin")
    .Attr("ignore_name_scope: bool = false")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .Output("output: int32")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn(Scalar)
    .Doc("Marks this rank as done; returns the last rank to join once all have.");

REGISTER_OP("HorovodBarrier")
    .Attr("ignore_name_scope: bool = false")
    .Attr("tensor_name: string = ''")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetIsDistributedCommunication()
    .SetShapeFn(tensorflow::shape_inference::NoOutputs)
    .Doc("Returns once every rank has reached the barrier.");

#define TFHVD_REGISTER_BASIC_OP(NAME, DOC) \
  REGISTER_OP(NAME).Output("output: int32").SetIsStateful().SetShapeFn(Scalar).Doc(DOC);

REGISTER_OP("HorovodSize")
    .Attr("process_set_id: int = 0")
    .Output("output: int32")
    .SetIsStateful()
    .SetShapeFn(Scalar)
    .Doc("Number of ranks (of the process set process_set_id; 0: every rank).");
TFHVD_REGISTER_BASIC_OP("HorovodRank", "This process's rank.")
TFHVD_REGISTER_BASIC_OP("HorovodLocalSize", "Number of ranks on this host.")
TFHVD_REGISTER_BASIC_OP("HorovodLocalRank", "This process's rank on its host.")

}  // namespace tf
}  // namespace tfhvd
