// What an XLA-compiled Horovod op tells its custom call: the op kind, the name
// it negotiates under and its attributes. The XLA op kernels (xla_kernels.cc)
// write it as the custom call's backend_config, an MLIR attribute dictionary
// that XLA's typed FFI decodes into the handler's named attributes
// (xla_custom_call.h), e.g.
//   {kind = 0 : i64, tensor_name = "train/grad_0", reduce_op = 1 : i64,
//    prescale = 1.000000000e+00 : f32, postscale = 1.000000000e+00 : f32,
//    root_rank = 0 : i64, process_set_id = 0 : i64}
#ifndef TFHVD_TENSORFLOW_XLA_XLA_CALL_CONFIG_H_
#define TFHVD_TENSORFLOW_XLA_XLA_CALL_CONFIG_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace tfhvd {
namespace tf {

// The one custom-call target every Horovod op compiles to (per platform).
constexpr const char kXlaCallTarget[] = "tfhvd_collective";

// Which collective a custom call runs (the `kind` attribute).
enum class XlaCallKind : int64_t { ALLREDUCE = 0, GROUPED_ALLREDUCE = 1, ALLGATHER = 2, BROADCAST = 3 };

struct XlaCallConfig {
  XlaCallKind kind = XlaCallKind::ALLREDUCE;
  std::string tensor_name;
  int64_t reduce_op = 1;
  float prescale = 1.0f;
  float postscale = 1.0f;
  int64_t root_rank = 0;
  int64_t process_set_id = 0;
};

// An MLIR string literal: letters, digits and "_./-" as they are, every other
// byte as \XX (so any tensor name survives the round trip).
inline std::string MlirString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        c == '_' || c == '.' || c == '/' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "\\%02X", c);
      out += hex;
    }
  }
  return out + "\"";
}

// A float32 as an MLIR literal that reads back to the same value (9 digits).
inline std::string MlirF32(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9e : f32", static_cast<double>(v));
  return buf;
}

inline std::string EncodeXlaCallConfig(const XlaCallConfig& c) {
  return "{kind = " + std::to_string(static_cast<int64_t>(c.kind)) +
         " : i64, tensor_name = " + MlirString(c.tensor_name) +
         ", reduce_op = " + std::to_string(c.reduce_op) + " : i64, prescale = " +
         MlirF32(c.prescale) + ", postscale = " + MlirF32(c.postscale) +
         ", root_rank = " + std::to_string(c.root_rank) +
         " : i64, process_set_id = " + std::to_string(c.process_set_id) + " : i64}";
}

}  // namespace tf
}  // namespace tfhvd

#endif  // TFHVD_TENSORFLOW_XLA_XLA_CALL_CONFIG_H_
