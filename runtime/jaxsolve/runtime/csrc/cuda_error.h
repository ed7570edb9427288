// The state of the CUDA runtime after an XLA FFI handler has issued its work,
// as the ffi::Error the handler returns. One helper for every jaxsolve CUDA
// library (layout's, sparse's, dense's): their cuda_library lists this header
// and includes it as "runtime/jaxsolve/runtime/csrc/cuda_error.h".
#ifndef JAXSOLVE_RUNTIME_CSRC_CUDA_ERROR_H_
#define JAXSOLVE_RUNTIME_CSRC_CUDA_ERROR_H_

#include <cuda_runtime.h>

#include <string>

#include "xla/ffi/api/ffi.h"

// The CUDA major the including library is built for (its file name's, which
// cuda_library defines), checked against the runtime headers it compiles with.
static_assert(CUDART_VERSION / 1000 == JAXSOLVE_CUDA_MAJOR,
              "built against the runtime headers of another CUDA major");

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

#endif  // JAXSOLVE_RUNTIME_CSRC_CUDA_ERROR_H_
