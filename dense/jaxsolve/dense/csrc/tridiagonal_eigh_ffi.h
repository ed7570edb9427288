// The XLA FFI face of the tridiagonal eigensolver, shared by its CPU entry
// (tridiagonal_handlers_cpu.cc) and its CUDA entry
// (tridiagonal_handlers_cuda.cu): the binding and the checks of what XLA
// hands over. jaxsolve/dense/_tridiagonal.py builds the call.
//
// Operands:  d (n,) F32/F64, the diagonal; e (n - 1,) the same dtype, the
//            off-diagonal (empty for n <= 1).
// Results:   w (n,) ascending eigenvalues; z (n, n): row k is the eigenvector
//            of w[k] (the column-major Z), or (0, 0) without vectors; info
//            () S32, the number of vectors whose iteration did not converge.
#ifndef JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_FFI_H_
#define JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_FFI_H_

#include <cstdint>
#include <string>
#include <utility>

#include "xla/ffi/api/ffi.h"

#define JAXSOLVE_DENSE_TRIDIAGONAL_EXPORT extern "C" __attribute__((visibility("default")))

namespace jaxsolve::dense {

namespace ffi = ::xla::ffi;

template <typename Binding>
auto BindTridiagonalEigh(Binding binding) {
  return std::move(binding)
      .template Arg<ffi::AnyBuffer>()          // d
      .template Arg<ffi::AnyBuffer>()          // e
      .template Ret<ffi::AnyBuffer>()          // w
      .template Ret<ffi::AnyBuffer>()          // z
      .template Ret<ffi::Buffer<ffi::S32>>();  // info
}

// n, and whether the vectors are asked for; an error for buffers that do not fit.
inline ffi::Error CheckTridiagonalEigh(const ffi::AnyBuffer& d, const ffi::AnyBuffer& e,
                                       const ffi::AnyBuffer& w, const ffi::AnyBuffer& z,
                                       int64_t* n, bool* vectors) {
  auto invalid = [](const std::string& what) {
    return ffi::Error::InvalidArgument("eigh_tridiagonal: " + what);
  };
  if (d.dimensions().size() != 1) return invalid("d must be a vector");
  *n = d.dimensions()[0];
  const int64_t off = *n > 0 ? *n - 1 : 0;
  if (e.dimensions().size() != 1 || e.dimensions()[0] != off) {
    return invalid("e must be a vector of n - 1 = " + std::to_string(off) + " entries");
  }
  if (d.element_type() != e.element_type() || d.element_type() != w.element_type() ||
      (d.element_type() != ffi::DataType::F32 && d.element_type() != ffi::DataType::F64)) {
    return invalid("d, e and w must all be float32 or all float64");
  }
  if (w.element_count() != static_cast<size_t>(*n)) return invalid("w must have n entries");
  *vectors = z.element_count() != 0;
  if (*vectors && (z.element_type() != d.element_type() ||
                   z.element_count() != static_cast<size_t>(*n * *n))) {
    return invalid("z must be an n x n matrix of d's dtype, or empty");
  }
  return ffi::Error::Success();
}

}  // namespace jaxsolve::dense

#endif  // JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_FFI_H_
