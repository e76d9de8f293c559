// Must NOT build (//tests/unit/cc/layering:core_includes_tensorflow): core code that
// includes a TensorFlow header.
#include "cc/common/core/background_loop.h"
#include "tensorflow/core/framework/op_kernel.h"
