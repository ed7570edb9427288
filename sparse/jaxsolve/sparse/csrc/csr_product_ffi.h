// The XLA FFI binding of the sparse product's values (csr_product.h): one
// handler, JaxsolveSparseCsrProduct (target jaxsolve_sparse_csr_product),
// templated on a backend that schedules CsrProductRow. Its values carry a
// leading axis of systems, a batch of products on one set of patterns (vmap
// over values): C has one row of values a system, A and B one each or one
// shared by all. It checks the buffers'
// sizes against one another; what the patterns hold is the backend's to check
// (the CPU's, on the host, checks the row pointers and A's columns; the GPU's
// trusts them, as the setup that built the patterns made them valid).
#ifndef JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_FFI_H_
#define JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_FFI_H_

#include <cstdint>
#include <string>

#include "csr_product.h"
#include "export.h"
#include "spmv.h"
#include "spmv_ffi.h"
#include "xla/ffi/api/ffi.h"

JAXSOLVE_SPARSE_EXPORT XLA_FFI_Error* JaxsolveSparseCsrProduct(
    XLA_FFI_CallFrame* call_frame);

namespace jaxsolve::sparse {

namespace ffi = ::xla::ffi;

inline auto BindCsrProduct() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()          // a_values (1 or systems, nnz(A))
      .Arg<ffi::Buffer<ffi::S32>>()  // a_indices (nnz(A),)
      .Arg<ffi::Buffer<ffi::S32>>()  // a_indptr (m + 1,)
      .Arg<ffi::AnyBuffer>()          // b_values (1 or systems, nnz(B))
      .Arg<ffi::Buffer<ffi::S32>>()  // b_indices (nnz(B),)
      .Arg<ffi::Buffer<ffi::S32>>()  // b_indptr (n + 1,)
      .Arg<ffi::Buffer<ffi::S32>>()  // c_indices (nnz(C),)
      .Arg<ffi::Buffer<ffi::S32>>()  // c_indptr (m + 1,)
      .Ret<ffi::AnyBuffer>()          // c_values (systems, nnz(C))
      .Attr<int64_t>("n_cols");       // p, the columns of B and C
}

inline ffi::Error InvalidProduct(const std::string& what) {
  return ffi::Error::InvalidArgument("jaxsolve_sparse_csr_product: " + what);
}

// The sizes a backend checks the patterns against.
struct CsrProductSizes {
  int64_t n;  // rows of B
  int64_t n_cols;  // of B and C
  int64_t nnz_a, nnz_b, nnz_c;  // of one system
};

// The body of the product's handlers: checks, then the dtype switch into
// `Backend{context...}.Run<T>(CsrProduct<T>, CsrProductSizes, CsrProductBatch)`,
// the product of the batch's first system and how to reach the others, which
// returns the call's ffi::Error.
template <typename Backend, typename... Context>
ffi::Error CsrProductHandler(ffi::AnyBuffer a_values,
                             ffi::Buffer<ffi::S32> a_indices,
                             ffi::Buffer<ffi::S32> a_indptr,
                             ffi::AnyBuffer b_values,
                             ffi::Buffer<ffi::S32> b_indices,
                             ffi::Buffer<ffi::S32> b_indptr,
                             ffi::Buffer<ffi::S32> c_indices,
                             ffi::Buffer<ffi::S32> c_indptr,
                             ffi::Result<ffi::AnyBuffer> c_values,
                             int64_t n_cols, Context... context) {
  const int64_t m = static_cast<int64_t>(a_indptr.element_count()) - 1;
  const int64_t n = static_cast<int64_t>(b_indptr.element_count()) - 1;
  const auto a_dims = a_values.dimensions();
  const auto b_dims = b_values.dimensions();
  const auto c_dims = c_values->dimensions();
  if (a_dims.size() != 2 || b_dims.size() != 2 || c_dims.size() != 2) {
    return InvalidProduct("values must be (systems, entries) arrays");
  }
  const int64_t systems = c_dims[0];
  if (m < 0 || n < 0 || n_cols < 0 ||
      static_cast<int64_t>(c_indptr.element_count()) != m + 1 ||
      a_dims[1] != static_cast<int64_t>(a_indices.element_count()) ||
      b_dims[1] != static_cast<int64_t>(b_indices.element_count()) ||
      c_dims[1] != static_cast<int64_t>(c_indices.element_count())) {
    return InvalidProduct("each matrix's values and indices must match, and A's "
                          "and C's row pointers have one length");
  }
  if ((a_dims[0] != 1 && a_dims[0] != systems) ||
      (b_dims[0] != 1 && b_dims[0] != systems)) {
    return InvalidProduct("A and B must have one system's values or C's count");
  }
  if (b_values.element_type() != a_values.element_type() ||
      c_values->element_type() != a_values.element_type()) {
    return InvalidProduct("A, B and C must have one dtype");
  }
  const CsrProductSizes sizes{n, n_cols, a_dims[1], b_dims[1], c_dims[1]};
  const CsrProductBatch batch{systems, a_dims[0] == 1 ? 0 : a_dims[1],
                              b_dims[0] == 1 ? 0 : b_dims[1], c_dims[1]};
  Backend backend{context...};
  auto run = [&](auto zero) {
    using T = decltype(zero);
    return backend.template Run<T>(
        CsrProduct<T>{m, static_cast<const T*>(a_values.untyped_data()),
                      a_indices.typed_data(), a_indptr.typed_data(),
                      static_cast<const T*>(b_values.untyped_data()),
                      b_indices.typed_data(), b_indptr.typed_data(),
                      c_indices.typed_data(), c_indptr.typed_data(),
                      static_cast<T*>(c_values->untyped_data())},
        sizes, batch);
  };
  return WithValueElementType(a_values.element_type(), run,
                              InvalidProduct("values must be F32, F64, C64 or C128"));
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_FFI_H_
