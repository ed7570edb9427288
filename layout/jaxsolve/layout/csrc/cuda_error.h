// The state of the CUDA runtime after an XLA FFI handler has issued its work,
// as the ffi::Error the handler returns. One helper for every jaxsolve CUDA
// library: layout's, and its siblings' through the `cuda_error` target.
#ifndef JAXSOLVE_LAYOUT_CSRC_CUDA_ERROR_H_
#define JAXSOLVE_LAYOUT_CSRC_CUDA_ERROR_H_

#include <cuda_runtime.h>

#include <string>

#include "xla/ffi/api/ffi.h"

namespace jaxsolve {

// Success, or the last CUDA error of this thread (a failed launch, say) as an
// internal error that names it. Never synchronizes.
inline ::xla::ffi::Error LastCudaError() {
  const cudaError_t error = cudaGetLastError();
  if (error == cudaSuccess) return ::xla::ffi::Error::Success();
  return ::xla::ffi::Error::Internal(std::string("CUDA error: ") +
                                     cudaGetErrorName(error) + ": " +
                                     cudaGetErrorString(error));
}

}  // namespace jaxsolve

#endif  // JAXSOLVE_LAYOUT_CSRC_CUDA_ERROR_H_
