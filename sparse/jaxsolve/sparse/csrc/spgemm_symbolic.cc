// The symbolic sparse product C = A B of two CSR matrices: C's pattern, its
// columns sorted within each row, which the numeric product (csr_product.h)
// searches for the place of each scalar product; and, for concrete values,
// C's values with it (the AMG setup's first Galerkin products). C functions of
// libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_pattern_kernels.py, which checks them and allocates for it.
//
// A is m x n, B is n x p, both CSR with int32 indices. Row i of C holds
// every column b_indices[s] of the rows j = a_indices[t] of B that row i of A
// selects.
//
// One pass of Gustavson's, split over the machine's cores by blocks of rows:
// a marker array of size p (each thread its own) records which columns row i
// of C has seen. O(p + products + sum over C's rows of r log r) per core.
//
// Given concrete values, the same pass also sums C's values (a table of p
// sums a thread), each in product order from zero as csr_product.h's
// CsrProductRow does: bit for bit the numeric product's on the CPU, with no
// second pass over the products.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "export.h"
#include "host_dtypes.h"
#include "row_blocks.h"
#include "spmv.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::ForNumberedBlocks;
using ::jaxsolve::sparse::WithValueType;

// Calls first(column) once for each column of row i of C, at the product
// that first reaches it, and product(column, t, s) for every product
// a_values[t] b_values[s], in order: the columns b_indices[s] of the rows
// j = a_indices[t] of B that row i of A selects. marker[column] == i marks
// the columns visited; no column's marker may be i on entry.
template <typename First, typename Product>
void ForEachProduct(int32_t i, int32_t* marker, const int32_t* a_indptr,
                    const int32_t* a_indices, const int32_t* b_indptr,
                    const int32_t* b_indices, First first, Product product) {
  for (int32_t t = a_indptr[i]; t < a_indptr[i + 1]; ++t) {
    const int32_t j = a_indices[t];
    for (int32_t s = b_indptr[j]; s < b_indptr[j + 1]; ++s) {
      const int32_t column = b_indices[s];
      if (marker[column] != i) {
        marker[column] = i;
        first(column);
      }
      product(column, t, s);
    }
  }
}

// The symbolic product's values: none.
struct NoValues {
  void Prepare(int32_t) {}
  void Start(int32_t) {}
  void Add(int32_t, int32_t, int32_t) {}
  void Write(const int32_t*, int32_t, int64_t) {}
  void Move(int64_t, int64_t, int64_t) {}
};

// C's values, written where its columns are: sums[column] holds the sum of
// the row's products in that column so far (a thread's table of p, which
// Prepare makes: packing values needs none).
template <typename T>
struct ProductValues {
  const T* a_values;
  const T* b_values;
  T* c_values;
  std::vector<T> sums;

  void Prepare(int32_t p) { sums.resize(p); }
  void Start(int32_t column) { sums[column] = T{}; }
  void Add(int32_t column, int32_t t, int32_t s) {
    sums[column] = sums[column] + a_values[t] * b_values[s];
  }
  // The sums of a row's sorted columns, to c_values[at ...].
  void Write(const int32_t* columns, int32_t length, int64_t at) {
    for (int32_t c = 0; c < length; ++c) c_values[at + c] = sums[columns[c]];
  }
  void Move(int64_t from, int64_t to, int64_t count) {
    std::copy(c_values + from, c_values + from + count, c_values + to);
  }
};

// The blocks of A's m rows, at most one per core: fewer entries of A than
// 2^15 (some 4096 rows of a 7-point stencil) are not worth a thread of their
// own, and a coarse level's few rows of many entries get as many as their
// products need.
int64_t RowBlocks(int32_t m, const int32_t* a_indptr) {
  return BlocksFor(a_indptr[m], int64_t{1} << 15);
}

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
// c_indices + at (and their values at the same places), their lengths in
// c_indptr[begin + 1 .. end]; returns where the last ends.
template <typename Values>
int64_t FillRows(int64_t begin, int64_t end, int32_t p, const int32_t* a_indptr,
                 const int32_t* a_indices, const int32_t* b_indptr,
                 const int32_t* b_indices, int32_t* c_indptr, int32_t* c_indices,
                 int64_t at, Values& values) {
  std::vector<int32_t> marker(p, -1);
  values.Prepare(p);
  for (int32_t i = static_cast<int32_t>(begin); i < end; ++i) {
    int32_t* row = c_indices + at;
    int32_t length = 0;
    ForEachProduct(
        i, marker.data(), a_indptr, a_indices, b_indptr, b_indices,
        [&](int32_t column) {
          row[length++] = column;
          values.Start(column);
        },
        [&](int32_t column, int32_t t, int32_t s) { values.Add(column, t, s); });
    std::sort(row, row + length);
    values.Write(row, length, at);
    c_indptr[i + 1] = length;
    at += length;
  }
  return at;
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

// C's pattern (and values, from a thread's Values that make_values() returns)
// in the products' buffers, packed to the left; returns 0, or -1 when out of
// memory.
template <typename MakeValues>
int32_t Multiply(int32_t m, int32_t p, const int32_t* a_indptr, const int32_t* a_indices,
                 const int32_t* b_indptr, const int32_t* b_indices, int32_t* c_indptr,
                 int32_t* c_indices, MakeValues make_values) {
  try {
    // Block b forms its rows from its first product's place on.
    const int64_t blocks = RowBlocks(m, a_indptr);
    const std::vector<int64_t> first =
        BlockProducts(m, blocks, a_indptr, a_indices, b_indptr);
    std::vector<int64_t> begins(blocks), ends(blocks);
    if (!ForNumberedBlocks(m, blocks, [&](int64_t b, int64_t begin, int64_t end) {
          auto values = make_values();
          begins[b] = begin;
          ends[b] = FillRows(begin, end, p, a_indptr, a_indices, b_indptr, b_indices,
                             c_indptr, c_indices, first[b], values);
        })) {
      return -1;
    }
    c_indptr[0] = 0;
    for (int32_t i = 0; i < m; ++i) c_indptr[i + 1] += c_indptr[i];
    auto values = make_values();
    for (int64_t b = 0; b < blocks; ++b) {  // each block moves left, in order
      std::copy(c_indices + first[b], c_indices + ends[b], c_indices + c_indptr[begins[b]]);
      values.Move(first[b], c_indptr[begins[b]], ends[b] - first[b]);
    }
    return 0;
  } catch (...) {
    return -1;
  }
}

}  // namespace

// The number of scalar products of A B (m rows), the size of the buffers
// JaxsolveSparseSpgemm forms C in, or -1 when out of memory.
JAXSOLVE_SPARSE_EXPORT int64_t JaxsolveSparseSpgemmProducts(
    int32_t m, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr) {
  try {
    return BlockProducts(m, RowBlocks(m, a_indptr), a_indptr, a_indices,
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
  return Multiply(m, p, a_indptr, a_indices, b_indptr, b_indices, c_indptr, c_indices,
                  [] { return NoValues{}; });
}

// JaxsolveSparseSpgemm, and C's values for A's and B's values of `dtype`
// (host_dtypes.h) in c_values, which must hold as many as c_indices; returns
// 0, -1 when out of memory, -2 for an unknown dtype.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseSpgemmValues(
    int32_t m, int32_t p, const int32_t* a_indptr, const int32_t* a_indices,
    const int32_t* b_indptr, const int32_t* b_indices, const void* a_values,
    const void* b_values, int32_t dtype, int32_t* c_indptr, int32_t* c_indices,
    void* c_values) {
  return WithValueType(dtype, [&](auto type) {
    using T = decltype(type);
    return Multiply(m, p, a_indptr, a_indices, b_indptr, b_indices, c_indptr, c_indices,
                    [&] {
                      return ProductValues<T>{static_cast<const T*>(a_values),
                                              static_cast<const T*>(b_values),
                                              static_cast<T*>(c_values), {}};
                    });
  });
}
