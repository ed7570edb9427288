// The CUDA entry of the tridiagonal eigensolver (libjaxsolve_dense_cuda<major>.so):
// the GPU driver of tridiagonal_eigh_cuda.h, its scratch from XLA's allocator.
#include <cuda_runtime.h>

#include <cstdint>

#include "layout/jaxsolve/layout/csrc/cuda_error.h"
#include "tridiagonal_eigh_cuda.h"
#include "tridiagonal_eigh_ffi.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::dense {
namespace {

ffi::Error TridiagonalEighEntry(cudaStream_t stream, ffi::ScratchAllocator scratch,
                                ffi::AnyBuffer d, ffi::AnyBuffer e, ffi::Result<ffi::AnyBuffer> w,
                                ffi::Result<ffi::AnyBuffer> z,
                                ffi::Result<ffi::Buffer<ffi::S32>> info) {
  int64_t n = 0;
  bool vectors = false;
  if (auto error = CheckTridiagonalEigh(d, e, *w, *z, &n, &vectors); error.failure()) {
    return error;
  }
  auto memory = scratch.Allocate(TridiagonalScratchBytes(n));
  if (!memory.has_value()) {
    return ffi::Error::Internal("eigh_tridiagonal: XLA gave no scratch memory");
  }
  auto run = [&](auto tag) {
    using Real = decltype(tag);
    return TridiagonalEighGpu<Real>(stream, static_cast<const Real*>(d.untyped_data()),
                                    static_cast<const Real*>(e.untyped_data()), n,
                                    static_cast<Real*>(w->untyped_data()),
                                    vectors ? static_cast<Real*>(z->untyped_data()) : nullptr, 1,
                                    *memory, info->typed_data());
  };
  d.element_type() == ffi::DataType::F32 ? run(float{}) : run(double{});
  return LastCudaError();
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
