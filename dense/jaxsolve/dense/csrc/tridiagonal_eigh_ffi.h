// The XLA FFI face of the tridiagonal eigensolver, shared by its CPU entry
// (tridiagonal_handlers_cpu.cc) and its CUDA entry
// (tridiagonal_handlers_cuda.cu): the binding, the checks of what XLA hands
// over and the switch on its dtype. jaxsolve/dense/_tridiagonal.py builds the
// call.
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

// Checks what XLA hands over and calls solve(d, e, n, w, z) with the pointers
// typed by the dtype (float or double), z null without vectors; returns its error.
template <typename Solve>
ffi::Error DispatchTridiagonalEigh(const ffi::AnyBuffer& d, const ffi::AnyBuffer& e,
                                   ffi::AnyBuffer& w, ffi::AnyBuffer& z, Solve&& solve) {
  auto invalid = [](const std::string& what) {
    return ffi::Error::InvalidArgument("eigh_tridiagonal: " + what);
  };
  if (d.dimensions().size() != 1) return invalid("d must be a vector");
  const int64_t n = d.dimensions()[0];
  const int64_t off = n > 0 ? n - 1 : 0;
  if (e.dimensions().size() != 1 || e.dimensions()[0] != off) {
    return invalid("e must be a vector of n - 1 = " + std::to_string(off) + " entries");
  }
  const ffi::DataType dtype = d.element_type();
  if (e.element_type() != dtype || w.element_type() != dtype ||
      (dtype != ffi::DataType::F32 && dtype != ffi::DataType::F64)) {
    return invalid("d, e and w must all be float32 or all float64");
  }
  if (w.element_count() != static_cast<size_t>(n)) return invalid("w must have n entries");
  const bool vectors = z.element_count() != 0;
  if (vectors && (z.element_type() != dtype || z.element_count() != static_cast<size_t>(n * n))) {
    return invalid("z must be an n x n matrix of d's dtype, or empty");
  }
  auto typed = [&](auto tag) {
    using Real = decltype(tag);
    return solve(static_cast<const Real*>(d.untyped_data()),
                 static_cast<const Real*>(e.untyped_data()), n,
                 static_cast<Real*>(w.untyped_data()),
                 vectors ? static_cast<Real*>(z.untyped_data()) : nullptr);
  };
  return dtype == ffi::DataType::F32 ? typed(float{}) : typed(double{});
}

}  // namespace jaxsolve::dense

#endif  // JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_FFI_H_
