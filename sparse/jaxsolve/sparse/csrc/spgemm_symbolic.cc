// The symbolic sparse product C = A B of two CSR matrices: C's pattern, and
// where each scalar product lands in it, so that the numeric product is a
// gather and a segment sum over a fixed index map. C functions of
// libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_native.py, which checks them and allocates between the two
// calls.
//
// A is m x n, B is n x p, both CSR with int32 indices. The products are
// enumerated in this order: for each row i of A, for each entry t of row i
// (in storage order), for each entry s of row j = a_indices[t] of B (in
// storage order). Product number q lands in C's row i at column
// b_indices[s]; offsets[q] is that column's position in row i of C, whose
// columns are sorted.
//
// Both passes are Gustavson's: a marker array of size p records which columns
// row i of C has seen. O(p + products + sum over C's rows of r log r).
#include <algorithm>
#include <cstdint>
#include <new>
#include <vector>

#include "export.h"

namespace {

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

template <typename Offset>
void Fill(int32_t m, int32_t p, const int32_t* a_indptr,
          const int32_t* a_indices, const int32_t* b_indptr,
          const int32_t* b_indices, const int64_t* c_indptr,
          int32_t* c_indices, Offset* offsets) {
  std::vector<int32_t> marker(p, -1), position(p);
  for (int32_t i = 0; i < m; ++i) {
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
    for (int32_t q = 0; q < length; ++q) position[row[q]] = q;
    ForEachProduct(i, a_indptr, a_indices, b_indptr, b_indices,
                   [&](int32_t col) {
                     *offsets++ = static_cast<Offset>(position[col]);
                   });
  }
}

}  // namespace

// First pass: writes C's row pointers to c_indptr[0..m]; returns 0, or -1 when
// out of memory.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseSpgemmCount(
    int32_t m, int32_t p, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr, const int32_t* b_indices, int64_t* c_indptr) {
  try {
    std::vector<int32_t> marker(p, -1);
    c_indptr[0] = 0;
    for (int32_t i = 0; i < m; ++i) {
      int64_t length = 0;
      ForEachProduct(i, a_indptr, a_indices, b_indptr, b_indices,
                     [&](int32_t col) {
                       if (marker[col] != i) {
                         marker[col] = i;
                         ++length;
                       }
                     });
      c_indptr[i + 1] = c_indptr[i] + length;
    }
    return 0;
  } catch (const std::bad_alloc&) {
    return -1;
  }
}

// Second pass: writes C's sorted column indices (c_indptr[m] of them) and the
// offset of every product, as unsigned 1- or 2-byte or signed 4-byte integers
// (offset_bytes); returns 0, or -1 when out of memory or for another width.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseSpgemmFill(
    int32_t m, int32_t p, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr, const int32_t* b_indices, const int64_t* c_indptr,
    int32_t* c_indices, void* offsets, int32_t offset_bytes) {
  const auto fill = [&](auto* typed) {
    Fill(m, p, a_indptr, a_indices, b_indptr, b_indices, c_indptr, c_indices,
         typed);
    return 0;
  };
  try {
    switch (offset_bytes) {
      case 1:
        return fill(static_cast<uint8_t*>(offsets));
      case 2:
        return fill(static_cast<uint16_t*>(offsets));
      case 4:
        return fill(static_cast<int32_t*>(offsets));
      default:
        return -1;
    }
  } catch (const std::bad_alloc&) {
    return -1;
  }
}
