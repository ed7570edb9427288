// The XLA FFI binding of the sparse product's values (csr_product.h): one
// handler, JaxsolveSparseCsrProduct (target jaxsolve_sparse_csr_product),
// templated on a backend that schedules CsrProductRows. It checks the shapes
// and the map's size against the patterns (O(nnz(A) + n)); the row pointers
// themselves are trusted, as the setup that made the map built them.
#ifndef JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_FFI_H_
#define JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_FFI_H_

#include <cstdint>
#include <string>

#include "csr_product.h"
#include "export.h"
#include "spmv.h"
#include "xla/ffi/api/ffi.h"

JAXSOLVE_SPARSE_EXPORT XLA_FFI_Error* JaxsolveSparseCsrProduct(
    XLA_FFI_CallFrame* call_frame);

namespace jaxsolve::sparse {

namespace ffi = ::xla::ffi;

inline auto BindCsrProduct() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()          // a_values (nnz(A),)
      .Arg<ffi::Buffer<ffi::S32>>()  // a_indices (nnz(A),)
      .Arg<ffi::Buffer<ffi::S32>>()  // a_indptr (m + 1,)
      .Arg<ffi::AnyBuffer>()          // b_values (nnz(B),)
      .Arg<ffi::Buffer<ffi::S32>>()  // b_indptr (n + 1,)
      .Arg<ffi::Buffer<ffi::S32>>()  // c_indptr (m + 1,)
      .Arg<ffi::AnyBuffer>()          // offsets (products,): U8, U16 or S32
      .Ret<ffi::AnyBuffer>();         // c_values (nnz(C),)
}

inline ffi::Error InvalidProduct(const std::string& what) {
  return ffi::Error::InvalidArgument("jaxsolve_sparse_csr_product: " + what);
}

template <typename Backend>
ffi::Error CsrProductHandler(ffi::AnyBuffer a_values,
                             ffi::Buffer<ffi::S32> a_indices,
                             ffi::Buffer<ffi::S32> a_indptr,
                             ffi::AnyBuffer b_values,
                             ffi::Buffer<ffi::S32> b_indptr,
                             ffi::Buffer<ffi::S32> c_indptr,
                             ffi::AnyBuffer offsets,
                             ffi::Result<ffi::AnyBuffer> c_values) {
  const int64_t nnz_a = a_values.element_count();
  const int64_t m = static_cast<int64_t>(a_indptr.element_count()) - 1;
  const int64_t n = static_cast<int64_t>(b_indptr.element_count()) - 1;
  if (m < 0 || n < 0 ||
      static_cast<int64_t>(c_indptr.element_count()) != m + 1 ||
      static_cast<int64_t>(a_indices.element_count()) != nnz_a) {
    return InvalidProduct("A's values and indices must match, and A's and C's "
                          "row pointers have one length");
  }
  const int32_t* ap = a_indptr.typed_data();
  const int32_t* ai = a_indices.typed_data();
  const int32_t* bp = b_indptr.typed_data();
  const int32_t* cp = c_indptr.typed_data();
  if (ap[0] != 0 || ap[m] != nnz_a || bp[0] != 0 ||
      bp[n] != static_cast<int64_t>(b_values.element_count()) || cp[0] != 0 ||
      cp[m] != static_cast<int64_t>(c_values->element_count())) {
    return InvalidProduct("row pointers must run from 0 to their values' count");
  }
  int64_t products = 0;
  for (int64_t t = 0; t < nnz_a; ++t) {
    if (ai[t] < 0 || ai[t] >= n) {
      return InvalidProduct("A's column indices must be rows of B");
    }
    products += bp[ai[t] + 1] - bp[ai[t]];
  }
  if (products != static_cast<int64_t>(offsets.element_count())) {
    return InvalidProduct("the map must have one offset per scalar product (" +
                          std::to_string(products) + "), got " +
                          std::to_string(offsets.element_count()));
  }
  if (b_values.element_type() != a_values.element_type() ||
      c_values->element_type() != a_values.element_type()) {
    return InvalidProduct("A, B and C must have one dtype");
  }
  Backend backend;
  auto run = [&](auto value, auto offset) {
    using T = decltype(value);
    using Offset = decltype(offset);
    const CsrProduct<T, Offset> p{
        m, static_cast<const T*>(a_values.untyped_data()), ai, ap,
        static_cast<const T*>(b_values.untyped_data()), bp, cp,
        static_cast<const Offset*>(offsets.untyped_data()),
        static_cast<T*>(c_values->untyped_data())};
    return backend.Run(p) ? ffi::Error::Success()
                          : InvalidProduct("an offset falls outside its row of C");
  };
  auto with_offset = [&](auto value) {
    switch (offsets.element_type()) {
      case ffi::U8:
        return run(value, uint8_t{});
      case ffi::U16:
        return run(value, uint16_t{});
      case ffi::S32:
        return run(value, int32_t{});
      default:
        return InvalidProduct("offsets must be U8, U16 or S32");
    }
  };
  switch (a_values.element_type()) {
    case ffi::F32:
      return with_offset(float{});
    case ffi::F64:
      return with_offset(double{});
    case ffi::C64:
      return with_offset(Complex<float>{});
    case ffi::C128:
      return with_offset(Complex<double>{});
    default:
      return InvalidProduct("values must be F32, F64, C64 or C128");
  }
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_FFI_H_
