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
// row i of C has seen. O(p + products + sum over C's rows of r log r), split
// over the machine's cores by blocks of rows (each thread its own markers).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "export.h"
#include "row_blocks.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::ForNumberedBlocks;
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

// The number of products of rows [begin, end).
int64_t Products(int32_t begin, int32_t end, const int32_t* a_indptr,
                 const int32_t* a_indices, const int32_t* b_indptr) {
  int64_t count = 0;
  for (int32_t t = a_indptr[begin]; t < a_indptr[end]; ++t) {
    count += b_indptr[a_indices[t] + 1] - b_indptr[a_indices[t]];
  }
  return count;
}

// Rows [begin, end) of C's columns and of the offsets, from product `first`.
// Rows [begin, end) of C, whose products start at offsets + first.
template <typename Offset>
void Fill(int32_t begin, int32_t end, int64_t first, int32_t p,
          const int32_t* a_indptr, const int32_t* a_indices,
          const int32_t* b_indptr, const int32_t* b_indices,
          const int64_t* c_indptr, int32_t* c_indices, Offset* offsets) {
  offsets += first;
  std::vector<int32_t> marker(p, -1), position(p);
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

// Second pass: writes C's sorted column indices (c_indptr[m] of them) and the
// offset of every product, as unsigned 1- or 2-byte or signed 4-byte integers
// (offset_bytes); returns 0, or -1 when out of memory or for another width.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseSpgemmFill(
    int32_t m, int32_t p, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr, const int32_t* b_indices, const int64_t* c_indptr,
    int32_t* c_indices, void* offsets, int32_t offset_bytes) {
  // Block b's first product: the products of the blocks before it, each block
  // counting its own in parallel.
  const int64_t blocks = BlocksFor(m, kMinRowsPerThread);
  std::vector<int64_t> first(blocks + 1, 0);
  ForNumberedBlocks(m, blocks, [&](int64_t b, int64_t begin, int64_t end) {
    first[b + 1] = Products(static_cast<int32_t>(begin),
                            static_cast<int32_t>(end), a_indptr, a_indices,
                            b_indptr);
  });
  for (int64_t b = 0; b < blocks; ++b) first[b + 1] += first[b];
  const auto fill = [&](auto* typed) {
    const bool filled = ForNumberedBlocks(
        m, blocks, [&](int64_t b, int64_t begin, int64_t end) {
          Fill(static_cast<int32_t>(begin), static_cast<int32_t>(end),
               first[b], p, a_indptr, a_indices, b_indptr, b_indices,
               c_indptr, c_indices, typed);
        });
    return filled ? 0 : -1;
  };
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
}
