// The CUDA entry of the tridiagonal eigensolver (libjaxsolve_dense_cuda<major>.so):
// the GPU driver of tridiagonal_eigh_cuda.h, its scratch from XLA's allocator.
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/jaxsolve/runtime/csrc/cuda_error.h"
#include "tridiagonal_eigh_cuda.h"
#include "tridiagonal_eigh_ffi.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::dense {
namespace {

ffi::Error TridiagonalEighEntry(cudaStream_t stream, ffi::ScratchAllocator scratch,
                                ffi::AnyBuffer d, ffi::AnyBuffer e, ffi::Result<ffi::AnyBuffer> w,
                                ffi::Result<ffi::AnyBuffer> z,
                                ffi::Result<ffi::Buffer<ffi::S32>> info) {
  return DispatchTridiagonalEigh(d, e, *w, *z, [&](auto d, auto e, int64_t n, auto w, auto z) {
    auto memory = scratch.Allocate(TridiagonalScratchBytes(n));
    if (!memory.has_value()) {
      return ffi::Error::Internal("eigh_tridiagonal: XLA gave no scratch memory");
    }
    // z's row k is w[k]'s eigenvector (tridiagonal_eigh_ffi.h): Z column-major.
    TridiagonalEighGpu(stream, d, e, n, w, z, EigenvectorLayout{1, false}, *memory,
                       info->typed_data());
    return LastCudaError();
  });
}

}  // namespace
}  // namespace jaxsolve::dense

JAXSOLVE_DENSE_TRIDIAGONAL_EXPORT XLA_FFI_Error* JaxsolveDenseTridiagonalEigh(
    XLA_FFI_CallFrame* call_frame);
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxsolveDenseTridiagonalEigh, jaxsolve::dense::TridiagonalEighEntry,
                              jaxsolve::dense::BindTridiagonalEigh(
                                  ::xla::ffi::Ffi::Bind()
                                      .Ctx<::xla::ffi::PlatformStream<cudaStream_t>>()
                                      .Ctx<::xla::ffi::ScratchAllocator>()));
