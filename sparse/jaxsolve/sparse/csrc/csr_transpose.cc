// The pattern of a CSR matrix's transpose, and where each entry goes: a C
// function of libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_pattern_kernels.py. The AMG setup forms R = P^T's pattern with it.
// The sort itself is csr_transpose.h's.
#include <cstdint>

#include "csr_transpose.h"
#include "export.h"

// A is n_rows x n_cols, its columns in [0, n_cols); writes the transpose's
// row pointers to t_indptr[0..n_cols] and its columns (A's rows) to t_indices,
// and the position in A of each of its entries to from[0..nnz); returns 0, or
// -1 when out of memory.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseCsrTranspose(
    int32_t n_rows, int32_t n_cols, const int32_t* indptr,
    const int32_t* indices, int32_t* t_indptr, int32_t* t_indices,
    int32_t* from) {
  try {
    ::jaxsolve::sparse::TransposePattern(n_rows, n_cols, indptr, indices, t_indptr,
                                         t_indices, from);
    return 0;
  } catch (...) {
    return -1;
  }
}
