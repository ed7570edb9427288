// The values of a sparse product C = A B on fixed patterns, on the host: a C
// function of libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_native.py, which checks them. The classical AMG setup forms
// each level's Galerkin product P^H (A P) with it, to find the next level's
// strong couplings. It runs csr_product.h's core with the CPU FFI handler's
// column table, so its values are bit for bit the handler's; split over the
// machine's cores by blocks of rows (row_blocks.h).
#include <atomic>
#include <cstdint>
#include <vector>

#include "csr_product.h"
#include "export.h"
#include "host_dtypes.h"
#include "row_blocks.h"
#include "spmv.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::CsrProduct;
using ::jaxsolve::sparse::CsrProductRow;
using ::jaxsolve::sparse::ForRowBlocks;
using ::jaxsolve::sparse::TabledRow;
using ::jaxsolve::sparse::WithValueType;

// Rows a thread must have to be worth starting.
constexpr int64_t kMinRowsPerThread = 8192;

template <typename T>
int32_t Multiply(const CsrProduct<T>& p, int64_t n_cols) {
  std::atomic<bool> missing{false};
  const bool done = ForRowBlocks(
      p.m, BlocksFor(p.m, kMinRowsPerThread), [&](int64_t begin, int64_t end) {
        std::vector<int32_t> table(n_cols, -1);
        for (int64_t i = begin; i < end && !missing; ++i) {
          const TabledRow row(table.data(), n_cols, p.c_indices, p.c_indptr[i],
                              p.c_indptr[i + 1]);
          if (!CsrProductRow(p, i, row)) missing = true;
        }
      });
  return done && !missing ? 0 : -1;
}

}  // namespace

// C's values (c_indptr[m] of them) for A (m rows), B and C of n_cols columns,
// values of `dtype` (0: float32, 1: float64, 2: complex64, 3: complex128);
// returns 0, -1 for a product whose column C's row lacks or out of memory, -2
// for another dtype.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseCsrProductHost(
    int64_t m, int64_t n_cols, const void* a_values, const int32_t* a_indices,
    const int32_t* a_indptr, const void* b_values, const int32_t* b_indices,
    const int32_t* b_indptr, const int32_t* c_indices, const int32_t* c_indptr,
    int32_t dtype, void* c_values) {
  return WithValueType(dtype, [&](auto value) {
    using T = decltype(value);
    return Multiply(CsrProduct<T>{m, static_cast<const T*>(a_values), a_indices, a_indptr,
                                  static_cast<const T*>(b_values), b_indices, b_indptr,
                                  c_indices, c_indptr, static_cast<T*>(c_values)},
                    n_cols);
  });
}
