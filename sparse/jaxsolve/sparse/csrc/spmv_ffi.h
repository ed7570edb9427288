// The XLA FFI face of the CSR product, shared by the CPU and CUDA entries: the
// binding, the checks of what XLA hands over, and the dtype switch into a
// backend that runs the product of spmv.h.
//
// Operands (see jaxsolve/sparse/_ffi_primitives.py, which builds them):
//   values   (batch or 1, nnz)          F32, F64, C64 or C128
//   indices  (nnz,) S32                 column of each entry
//   indptr   (n_rows + 1,) S32          row pointers
//   x        (batch or 1, n_cols, k)    the dtype of values
//   rhs      (batch, n_rows, k) or (0,) the update's (spmv.h); (0,): none
//   weight   (passes, n_rows) or (0,)
//   base     (batch, n_rows, k) or (0,)
// Result:
//   y        (batch, n_rows, k)         the dtype of values
// Attribute: `subtract` (bool), the update's sign. Everything else follows
// from the shapes.
//
// Only the header-only FFI API is used, and nothing throws: every failure is
// an ffi::Error.
#ifndef JAXSOLVE_SPARSE_CSRC_SPMV_FFI_H_
#define JAXSOLVE_SPARSE_CSRC_SPMV_FFI_H_

#include <cstdint>
#include <string>
#include <utility>

#include "export.h"
#include "spmv.h"
#include "xla/ffi/api/ffi.h"

// The handler each library defines with XLA_FFI_DEFINE_HANDLER_SYMBOL, binding
// CsrMatvecHandler<Backend>: its only FFI export.
JAXSOLVE_SPARSE_EXPORT XLA_FFI_Error* JaxsolveSparseCsrMatvec(
    XLA_FFI_CallFrame* call_frame);

namespace jaxsolve::sparse {

namespace ffi = ::xla::ffi;

// Calls run(T{}) for the value types the kernels take (F32, F64, C64, C128:
// float, double, Complex<float>, Complex<double>) and returns its error;
// `unsupported` for any other element type.
template <typename Run>
ffi::Error WithValueElementType(ffi::DataType type, Run run, ffi::Error unsupported) {
  switch (type) {
    case ffi::F32:
      return run(float{});
    case ffi::F64:
      return run(double{});
    case ffi::C64:
      return run(Complex<float>{});
    case ffi::C128:
      return run(Complex<double>{});
    default:
      return unsupported;
  }
}

// The operands and result above; a backend that needs context arguments (the
// CUDA stream) appends them.
inline auto BindCsrMatvec() {
  return ffi::Ffi::Bind()
      .Arg<ffi::AnyBuffer>()          // values
      .Arg<ffi::Buffer<ffi::S32>>()  // indices
      .Arg<ffi::Buffer<ffi::S32>>()  // indptr
      .Arg<ffi::AnyBuffer>()          // x
      .Arg<ffi::AnyBuffer>()          // rhs
      .Arg<ffi::AnyBuffer>()          // weight
      .Arg<ffi::AnyBuffer>()          // base
      .Ret<ffi::AnyBuffer>()          // y
      .Attr<bool>("subtract");
}

inline ffi::Error Invalid(const std::string& what) {
  return ffi::Error::InvalidArgument("jaxsolve_sparse_csr_matvec: " + what);
}

// Sets `s` to the shape of a call, from the buffers' dimensions; an error if
// they do not fit together.
inline ffi::Error CallShape(ffi::AnyBuffer values, ffi::Buffer<ffi::S32> indices,
                            ffi::Buffer<ffi::S32> indptr, ffi::AnyBuffer x,
                            ffi::AnyBuffer y, SpmvShape& s) {
  const auto v = values.dimensions(), xd = x.dimensions(), yd = y.dimensions();
  if (v.size() != 2 || xd.size() != 3 || yd.size() != 3 ||
      indices.dimensions().size() != 1 || indptr.dimensions().size() != 1) {
    return Invalid("values, x and y must have 2, 3 and 3 dimensions, indices "
                   "and indptr 1");
  }
  s.n_rows = yd[1];
  s.n_cols = xd[1];
  s.nnz = v[1];
  s.k = yd[2];
  s.batch = yd[0];
  s.batched_values = v[0] != 1;
  s.batched_x = xd[0] != 1;
  if (static_cast<int64_t>(indptr.element_count()) != s.n_rows + 1 ||
      static_cast<int64_t>(indices.element_count()) != s.nnz) {
    return Invalid("indptr must have n_rows + 1 entries and indices nnz");
  }
  // Each of values and x holds one system or all of them, and one does (or
  // the batch is a single system).
  const auto one_or_all = [&](int64_t n) { return n == 1 || n == s.batch; };
  if (xd[2] != s.k || !one_or_all(v[0]) || !one_or_all(xd[0]) ||
      (s.batch != 1 && v[0] != s.batch && xd[0] != s.batch)) {
    return Invalid("values (B or 1, nnz) and x (B or 1, n_cols, k) must make "
                   "y (B, n_rows, k)");
  }
  if (x.element_type() != values.element_type() ||
      y.element_type() != values.element_type()) {
    return Invalid("values, x and y must have one dtype");
  }
  return ffi::Error::Success();
}

// Checks the update's operands against the call's shape: each empty (none) or
// of its shape, in the dtype of values.
inline ffi::Error CheckUpdate(const SpmvShape& s, ffi::AnyBuffer values,
                              ffi::AnyBuffer rhs, ffi::AnyBuffer weight,
                              ffi::AnyBuffer base) {
  const auto like_y = [&](ffi::AnyBuffer a) {
    const auto d = a.dimensions();
    return a.element_count() == 0 ||
           (d.size() == 3 && d[0] == s.batch && d[1] == s.n_rows && d[2] == s.k);
  };
  const auto w = weight.dimensions();
  if (!like_y(rhs) || !like_y(base) ||
      !(weight.element_count() == 0 ||
        (w.size() == 2 && w[0] == s.passes() && w[1] == s.n_rows))) {
    return Invalid("rhs and base must be empty or (B, n_rows, k), weight empty "
                   "or (B or 1, n_rows) like values");
  }
  for (ffi::AnyBuffer a : {rhs, weight, base}) {
    if (a.element_count() != 0 && a.element_type() != values.element_type()) {
      return Invalid("rhs, weight and base must have the dtype of values");
    }
  }
  return ffi::Error::Success();
}

// The data of an update operand, or null for an empty one.
template <typename T>
const T* UpdateOperand(ffi::AnyBuffer a) {
  return a.element_count() == 0 ? nullptr
                                : static_cast<const T*>(a.untyped_data());
}

// The body of every CSR product handler: checks, then the dtype switch into
// `Backend{context...}.Run<T>(Spmv<T>)`, which returns the call's ffi::Error.
// `context` are the context arguments the backend's binding appends.
template <typename Backend, typename... Context>
ffi::Error CsrMatvecHandler(ffi::AnyBuffer values,
                            ffi::Buffer<ffi::S32> indices,
                            ffi::Buffer<ffi::S32> indptr, ffi::AnyBuffer x,
                            ffi::AnyBuffer rhs, ffi::AnyBuffer weight,
                            ffi::AnyBuffer base, ffi::Result<ffi::AnyBuffer> y,
                            bool subtract, Context... context) {
  Backend backend{context...};
  SpmvShape shape{};
  if (ffi::Error error = CallShape(values, indices, indptr, x, *y, shape);
      error.failure()) {
    return error;
  }
  if (ffi::Error error = CheckUpdate(shape, values, rhs, weight, base);
      error.failure()) {
    return error;
  }
  auto run = [&](auto zero) {
    using T = decltype(zero);
    return backend.template Run<T>(Spmv<T>{
        shape, static_cast<const T*>(values.untyped_data()),
        indices.typed_data(), indptr.typed_data(),
        static_cast<const T*>(x.untyped_data()),
        static_cast<T*>(y->untyped_data()),
        Update<T>{UpdateOperand<T>(rhs), UpdateOperand<T>(weight),
                  UpdateOperand<T>(base), subtract}});
  };
  return WithValueElementType(
      values.element_type(), run,
      Invalid("values must be F32, F64, C64 or C128, got dtype code " +
              std::to_string(static_cast<int>(values.element_type()))));
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_SPMV_FFI_H_
