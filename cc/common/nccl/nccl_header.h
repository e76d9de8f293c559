// nccl.h for tf_hvd. nccl.h includes cuda_fp16.h, cuda_bf16.h and cuda_fp8.h, whose
// contents need CCCL's <nv/target> (another wheel, and extensionless headers Bazel cannot
// declare as sources). tf_hvd uses none of their types (it passes only ncclFloat16 /
// ncclBfloat16 enumerators and raw 16-bit scalars), so their include guards are set first
// and only nccl.h's own declarations are read. Include this instead of <nccl.h>.
#ifndef TFHVD_COMMON_NCCL_NCCL_HEADER_H_
#define TFHVD_COMMON_NCCL_NCCL_HEADER_H_

#include <cuda_runtime.h>

#ifndef __CUDA_FP16_H__
#define __CUDA_FP16_H__
#define TFHVD_SKIPPED_CUDA_FP16
#endif
#ifndef __CUDA_BF16_H__
#define __CUDA_BF16_H__
#define TFHVD_SKIPPED_CUDA_BF16
#endif
#ifndef __CUDA_FP8_H__
#define __CUDA_FP8_H__
#define TFHVD_SKIPPED_CUDA_FP8
#endif

#include <nccl.h>

#endif  // TFHVD_COMMON_NCCL_NCCL_HEADER_H_
