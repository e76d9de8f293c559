// A function of a library loaded at run time (MPI, the CUDA runtime, NCCL), defined under
// its own name so that callers keep calling it as written: the definition looks the
// function up once through `resolve` (a function returning its address) and calls it.
// Hidden: it serves this library's own calls only, never another library's in the process.
//
//   #define MY_FORWARD(ret, name, params, args) \
//     TFHVD_FORWARD(MyLibrary::Symbol, ret, name, params, args)
//   TFHVD_FORWARD(MyLibrary::Symbol, int, MPI_Finalize, (void), ())
#ifndef TFHVD_COMMON_FORWARDER_H_
#define TFHVD_COMMON_FORWARDER_H_

#define TFHVD_FORWARD(resolve, ret, name, params, args)                          \
  extern "C" __attribute__((visibility("hidden"))) ret name params {             \
    static auto fn = reinterpret_cast<ret(*) params>(resolve(#name));            \
    return fn args;                                                              \
  }

#endif  // TFHVD_COMMON_FORWARDER_H_
