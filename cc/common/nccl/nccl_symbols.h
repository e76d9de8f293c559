// The NCCL functions tf_hvd calls, each defined in nccl_symbols.cc to call the same
// function of the libnccl.so.2 that GpuLibraries loaded (gpu/gpu_libraries.h). A new NCCL
// call needs its row here.
#ifndef TFHVD_COMMON_NCCL_NCCL_SYMBOLS_H_
#define TFHVD_COMMON_NCCL_NCCL_SYMBOLS_H_

#include "cc/common/nccl/nccl_header.h"

// X(return type, name, (parameters), (arguments))
#define TFHVD_NCCL_FUNCTIONS(X) \
  X(ncclResult_t, ncclAllGather, (const void* sendbuff, void* recvbuff, size_t sendcount, \
      ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream), (sendbuff, recvbuff, \
      sendcount, datatype, comm, stream)) \
  X(ncclResult_t, ncclAllReduce, (const void* sendbuff, void* recvbuff, size_t count, \
      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream), (sendbuff, \
      recvbuff, count, datatype, op, comm, stream)) \
  X(ncclResult_t, ncclBroadcast, (const void* sendbuff, void* recvbuff, size_t count, \
      ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream), (sendbuff, \
      recvbuff, count, datatype, root, comm, stream)) \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm)) \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm)) \
  X(ncclResult_t, ncclCommFinalize, (ncclComm_t comm), (comm)) \
  X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError), (comm, \
      asyncError)) \
  X(ncclResult_t, ncclCommInitRankConfig, (ncclComm_t* comm, int nranks, ncclUniqueId commId, \
      int rank, ncclConfig_t* config), (comm, nranks, commId, rank, config)) \
  X(const char*, ncclGetErrorString, (ncclResult_t result), (result)) \
  X(const char*, ncclGetLastError, (ncclComm_t comm), (comm)) \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId* uniqueId), (uniqueId)) \
  X(ncclResult_t, ncclGroupEnd, (void), ()) \
  X(ncclResult_t, ncclGroupStart, (void), ()) \
  X(ncclResult_t, ncclRecv, (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, \
      ncclComm_t comm, cudaStream_t stream), (recvbuff, count, datatype, peer, comm, stream)) \
  X(ncclResult_t, ncclRedOpCreatePreMulSum, (ncclRedOp_t* op, void* scalar, ncclDataType_t \
      datatype, ncclScalarResidence_t residence, ncclComm_t comm), (op, scalar, datatype, \
      residence, comm)) \
  X(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), (op, comm)) \
  X(ncclResult_t, ncclReduce, (const void* sendbuff, void* recvbuff, size_t count, \
      ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream), \
      (sendbuff, recvbuff, count, datatype, op, root, comm, stream)) \
  X(ncclResult_t, ncclReduceScatter, (const void* sendbuff, void* recvbuff, size_t recvcount, \
      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream), (sendbuff, \
      recvbuff, recvcount, datatype, op, comm, stream)) \
  X(ncclResult_t, ncclSend, (const void* sendbuff, size_t count, ncclDataType_t datatype, int \
      peer, ncclComm_t comm, cudaStream_t stream), (sendbuff, count, datatype, peer, comm, \
      stream))

#endif  // TFHVD_COMMON_NCCL_NCCL_SYMBOLS_H_
