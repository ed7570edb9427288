// The symbolic sparse product C = A B of two CSR matrices: C's pattern, its
// columns sorted within each row, which the numeric product (csr_product.h)
// searches for the place of each scalar product. C functions of
// libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_native.py, which checks them and allocates between the two
// calls.
//
// A is m x n, B is n x p, both CSR with int32 indices. Row i of C holds
// every column b_indices[s] of the rows j = a_indices[t] of B that row i of A
// selects.
//
// Both passes are Gustavson's: a marker array of size p records which columns
// row i of C has seen. O(p + products + sum over C's rows of r log r), split
// over the machine's cores by blocks of rows (each thread its own markers).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "export.h"
#include "row_blocks.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::ForRowBlocks;

// Calls visit(column) for every product of row i of C, in product order.
template <typename Visit>
void ForEachProduct(int32_t i, const int32_t* a_indptr,
                    const int32_t* a_indices, const int32_t* b_indptr,
                    const int32_t* b_indices, Visit visit) {
  for (int32_t t = a_indptr[i]; t < a_indptr[i + 1]; ++t) {
    const int32_t j = a_indices[t];
    for (int32_t s = b_indptr[j]; s < b_indptr[j + 1]; ++s) visit(b_indices[s]);
  }
}

// Rows smaller than this are not worth a thread of their own.
constexpr int64_t kMinRowsPerThread = 4096;

// Rows [begin, end) of C's sorted columns.
void Fill(int32_t begin, int32_t end, int32_t p, const int32_t* a_indptr,
          const int32_t* a_indices, const int32_t* b_indptr,
          const int32_t* b_indices, const int64_t* c_indptr,
          int32_t* c_indices) {
  std::vector<int32_t> marker(p, -1);
  for (int32_t i = begin; i < end; ++i) {
    int32_t* row = c_indices + c_indptr[i];
    int32_t length = 0;
    ForEachProduct(i, a_indptr, a_indices, b_indptr, b_indices,
                   [&](int32_t col) {
                     if (marker[col] != i) {
                       marker[col] = i;
                       row[length++] = col;
                     }
                   });
    std::sort(row, row + length);
  }
}

}  // namespace

// First pass: writes C's row pointers to c_indptr[0..m]; returns 0, or -1 when
// out of memory.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseSpgemmCount(
    int32_t m, int32_t p, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr, const int32_t* b_indices, int64_t* c_indptr) {
  // Each block writes its rows' lengths; the sum runs after.
  const int64_t blocks = BlocksFor(m, kMinRowsPerThread);
  const bool counted = ForRowBlocks(m, blocks, [&](int64_t begin, int64_t end) {
    std::vector<int32_t> marker(p, -1);
    for (int32_t i = static_cast<int32_t>(begin); i < end; ++i) {
      int64_t length = 0;
      ForEachProduct(i, a_indptr, a_indices, b_indptr, b_indices,
                     [&](int32_t col) {
                       if (marker[col] != i) {
                         marker[col] = i;
                         ++length;
                       }
                     });
      c_indptr[i + 1] = length;
    }
  });
  if (!counted) return -1;
  c_indptr[0] = 0;
  for (int32_t i = 0; i < m; ++i) c_indptr[i + 1] += c_indptr[i];
  return 0;
}

// Second pass: writes C's sorted column indices (c_indptr[m] of them);
// returns 0, or -1 when out of memory.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseSpgemmFill(
    int32_t m, int32_t p, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr, const int32_t* b_indices, const int64_t* c_indptr,
    int32_t* c_indices) {
  const bool filled = ForRowBlocks(
      m, BlocksFor(m, kMinRowsPerThread), [&](int64_t begin, int64_t end) {
        Fill(static_cast<int32_t>(begin), static_cast<int32_t>(end), p,
             a_indptr, a_indices, b_indptr, b_indices, c_indptr, c_indices);
      });
  return filled ? 0 : -1;
}
