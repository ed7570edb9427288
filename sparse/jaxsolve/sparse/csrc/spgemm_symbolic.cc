// The symbolic sparse product C = A B of two CSR matrices: C's pattern, its
// columns sorted within each row, which the numeric product (csr_product.h)
// searches for the place of each scalar product. C functions of
// libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_native.py, which checks them and allocates for it.
//
// A is m x n, B is n x p, both CSR with int32 indices. Row i of C holds
// every column b_indices[s] of the rows j = a_indices[t] of B that row i of A
// selects.
//
// One pass of Gustavson's, split over the machine's cores by blocks of rows:
// a marker array of size p (each thread its own) records which columns row i
// of C has seen. O(p + products + sum over C's rows of r log r) per core.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "export.h"
#include "row_blocks.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::ForNumberedBlocks;

// Calls visit(column) once for each column of row i of C, in the order of the
// products that first reach them: the columns b_indices[s] of the rows j =
// a_indices[t] of B that row i of A selects. marker[column] == i marks those
// visited; no column's marker may be i on entry.
template <typename Visit>
void ForEachColumn(int32_t i, int32_t* marker, const int32_t* a_indptr,
                   const int32_t* a_indices, const int32_t* b_indptr,
                   const int32_t* b_indices, Visit visit) {
  for (int32_t t = a_indptr[i]; t < a_indptr[i + 1]; ++t) {
    const int32_t j = a_indices[t];
    for (int32_t s = b_indptr[j]; s < b_indptr[j + 1]; ++s) {
      const int32_t column = b_indices[s];
      if (marker[column] != i) {
        marker[column] = i;
        visit(column);
      }
    }
  }
}

// Rows smaller than this are not worth a thread of their own.
constexpr int64_t kMinRowsPerThread = 4096;

// The number of products of rows [begin, end): an upper bound of their
// entries in C.
int64_t Products(int64_t begin, int64_t end, const int32_t* a_indptr,
                 const int32_t* a_indices, const int32_t* b_indptr) {
  int64_t count = 0;
  for (int32_t t = a_indptr[begin]; t < a_indptr[end]; ++t) {
    count += b_indptr[a_indices[t] + 1] - b_indptr[a_indices[t]];
  }
  return count;
}

// Rows [begin, end) of C, their sorted columns one after the other from
// c_indices, their lengths in c_indptr[begin + 1 .. end]; returns where the
// last ends.
int32_t* FillRows(int64_t begin, int64_t end, int32_t p,
                  const int32_t* a_indptr, const int32_t* a_indices,
                  const int32_t* b_indptr, const int32_t* b_indices,
                  int32_t* c_indptr, int32_t* c_indices) {
  std::vector<int32_t> marker(p, -1);
  for (int32_t i = static_cast<int32_t>(begin); i < end; ++i) {
    int32_t length = 0;
    ForEachColumn(i, marker.data(), a_indptr, a_indices, b_indptr, b_indices,
                  [&](int32_t column) { c_indices[length++] = column; });
    std::sort(c_indices, c_indices + length);
    c_indptr[i + 1] = length;
    c_indices += length;
  }
  return c_indices;
}

// The scalar products of the rows of each of `blocks` blocks, after a 0:
// where each block's rows are formed.
std::vector<int64_t> BlockProducts(int32_t m, int64_t blocks,
                                   const int32_t* a_indptr,
                                   const int32_t* a_indices,
                                   const int32_t* b_indptr) {
  std::vector<int64_t> first(blocks + 1, 0);
  ForNumberedBlocks(m, blocks, [&](int64_t b, int64_t begin, int64_t end) {
    first[b + 1] = Products(begin, end, a_indptr, a_indices, b_indptr);
  });
  std::partial_sum(first.begin(), first.end(), first.begin());
  return first;
}

}  // namespace

// The number of scalar products of A B (m rows), the size of the buffer
// JaxsolveSparseSpgemm forms C in, or -1 when out of memory.
JAXSOLVE_SPARSE_EXPORT int64_t JaxsolveSparseSpgemmProducts(
    int32_t m, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr) {
  try {
    return BlockProducts(m, BlocksFor(m, kMinRowsPerThread), a_indptr, a_indices,
                         b_indptr).back();
  } catch (...) {
    return -1;
  }
}

// Writes C's row pointers to c_indptr[0..m] and its sorted columns to
// c_indices, which must hold as many entries as A B has scalar products, at
// most 2^31 - 1 (C's rows are formed in place of their products, then packed
// to the left); returns 0, or -1 when out of memory.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseSpgemm(
    int32_t m, int32_t p, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr, const int32_t* b_indices, int32_t* c_indptr,
    int32_t* c_indices) {
  try {
    // Block b forms its rows from its first product's place on.
    const int64_t blocks = BlocksFor(m, kMinRowsPerThread);
    const std::vector<int64_t> first =
        BlockProducts(m, blocks, a_indptr, a_indices, b_indptr);
    std::vector<int64_t> begins(blocks);
    std::vector<int32_t*> ends(blocks);
    if (!ForNumberedBlocks(m, blocks, [&](int64_t b, int64_t begin, int64_t end) {
          begins[b] = begin;
          ends[b] = FillRows(begin, end, p, a_indptr, a_indices, b_indptr,
                             b_indices, c_indptr, c_indices + first[b]);
        })) {
      return -1;
    }
    c_indptr[0] = 0;
    for (int32_t i = 0; i < m; ++i) c_indptr[i + 1] += c_indptr[i];
    for (int64_t b = 0; b < blocks; ++b) {  // each block moves left, in order
      std::copy(c_indices + first[b], ends[b], c_indices + c_indptr[begins[b]]);
    }
    return 0;
  } catch (...) {
    return -1;
  }
}
