// The few cuSOLVER/cuBLAS enums that NVIDIA's cusolverMp.h takes from
// <cusolverDn.h>, for building jaxsolve's cuSOLVERMp handlers without the
// (several hundred MB) cuSOLVER and cuBLAS wheels. cusolverMp.h includes
// "cusolverDn.h"; this file stands in for it. Only enums cross the C ABI of
// cuSOLVERMp, and their values are the documented ones of the CUDA 12/13
// headers (cuSOLVER and cuBLAS API references). Written for jaxsolve; same
// license as jaxsolve.
#ifndef JAXSOLVE_THIRD_PARTY_CUSOLVER_TYPES_CUSOLVERDN_H_
#define JAXSOLVE_THIRD_PARTY_CUSOLVER_TYPES_CUSOLVERDN_H_

#include <cuComplex.h>
#include <cuda_runtime_api.h>
#include <library_types.h>

// The cuSOLVER this stands in for, the one cuSOLVERMp loads: 12.0 with CUDA 13,
// 11.7 with CUDA 12 (whose runtime headers lack the emulation types that
// cusolverMp.h declares only for cuSOLVER >= 12).
#if CUDART_VERSION >= 13000
#define CUSOLVER_VERSION 12000
#else
#define CUSOLVER_VERSION 11700
#endif

// Calling convention of the cuSOLVER API: the default one on Linux.
#define CUSOLVERAPI

typedef enum {
  CUSOLVER_STATUS_SUCCESS = 0,
  CUSOLVER_STATUS_NOT_INITIALIZED = 1,
  CUSOLVER_STATUS_ALLOC_FAILED = 2,
  CUSOLVER_STATUS_INVALID_VALUE = 3,
  CUSOLVER_STATUS_ARCH_MISMATCH = 4,
  CUSOLVER_STATUS_MAPPING_ERROR = 5,
  CUSOLVER_STATUS_EXECUTION_FAILED = 6,
  CUSOLVER_STATUS_INTERNAL_ERROR = 7,
  CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED = 8,
  CUSOLVER_STATUS_NOT_SUPPORTED = 9,
  CUSOLVER_STATUS_ZERO_PIVOT = 10,
  CUSOLVER_STATUS_INVALID_LICENSE = 11,
} cusolverStatus_t;

typedef enum {
  CUBLAS_FILL_MODE_LOWER = 0,
  CUBLAS_FILL_MODE_UPPER = 1,
  CUBLAS_FILL_MODE_FULL = 2,
} cublasFillMode_t;

typedef enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
} cublasOperation_t;

typedef enum {
  CUBLAS_SIDE_LEFT = 0,
  CUBLAS_SIDE_RIGHT = 1,
} cublasSideMode_t;

typedef enum {
  CUSOLVER_EIG_TYPE_1 = 1,
  CUSOLVER_EIG_TYPE_2 = 2,
  CUSOLVER_EIG_TYPE_3 = 3,
} cusolverEigType_t;

typedef enum {
  CUSOLVER_EIG_MODE_NOVECTOR = 0,
  CUSOLVER_EIG_MODE_VECTOR = 1,
} cusolverEigMode_t;

typedef enum {
  CUSOLVER_DEFAULT_MATH = 0,
  CUSOLVER_FP32_EMULATED_BF16X9_MATH = 1,
} cusolverMathMode_t;

#endif  // JAXSOLVE_THIRD_PARTY_CUSOLVER_TYPES_CUSOLVERDN_H_
