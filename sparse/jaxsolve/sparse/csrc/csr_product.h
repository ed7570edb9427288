// The values of a sparse product C = A B on fixed patterns: what it computes,
// for the CPU entry (handlers_cpu.cc), which splits the rows over the cores,
// and the CUDA entry (handlers_cuda.cu), a group of a warp's threads per row.
//
// A is m x n CSR (values, int32 indices and row pointers), B n x p and C m x p
// likewise, C's columns sorted within each row and holding every column a
// product reaches (spgemm_symbolic.cc builds that pattern). Scalar products
// are taken row by row of A, entry by entry of that row, entry by entry of the
// row of B it selects:
//
//   a_values[t] * b_values[s], for t in row i of A and s in row indices[t] of
//   B, adds to C[i, b_indices[s]], found by a binary search of row i of C (on
//   a GPU) or in a table of the columns' places that the row fills first (on
//   the CPU, whose threads each keep one as long as C is wide).
//
// So the sum of each entry of C runs in a fixed order (a GPU's threads of one
// row share the products of each entry of A between them: B's rows hold no
// column twice, so those land in distinct places), and nothing but the
// three patterns is needed: no map from products to places in C, which at a
// byte a product would outweigh every operator of an AMG hierarchy. Every
// product of row i lands in row i of C, so rows are independent. Nothing here
// knows of XLA.
#ifndef JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_H_
#define JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_H_

#include <cstdint>

#include "spmv.h"

namespace jaxsolve::sparse {

// The operands of one product; T is float, double, Complex<float> or
// Complex<double>.
template <typename T>
struct CsrProduct {
  int64_t m;
  const T* a_values;
  const int32_t* a_indices;
  const int32_t* a_indptr;
  const T* b_values;
  const int32_t* b_indices;
  const int32_t* b_indptr;
  const int32_t* c_indices;
  const int32_t* c_indptr;
  T* c_values;
};

// A batch of products on one set of patterns (vmap over values): system s
// reads A's values s * a_stride entries on from the first system's, B's
// s * b_stride on, and writes C's s * c_stride on. A stride of 0 shares that
// operand's values between every system.
struct CsrProductBatch {
  int64_t systems;
  int64_t a_stride, b_stride, c_stride;
};

// System s of the batch whose first system is p.
template <typename T>
JAXSOLVE_SPARSE_HD CsrProduct<T> SystemOf(CsrProduct<T> p,
                                          const CsrProductBatch& batch,
                                          int64_t s) {
  p.a_values += s * batch.a_stride;
  p.b_values += s * batch.b_stride;
  p.c_values += s * batch.c_stride;
  return p;
}

// The position of `column` among the sorted columns[begin, end), or -1.
JAXSOLVE_SPARSE_HD inline int64_t FindColumn(const int32_t* columns,
                                             int64_t begin, int64_t end,
                                             int32_t column) {
  int64_t lo = begin, hi = end;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (columns[mid] < column) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < end && columns[lo] == column ? lo : -1;
}

// Finds a column's place in row i of C by a binary search of the row.
struct SearchedRow {
  const int32_t* c_indices;
  int64_t begin, end;

  JAXSOLVE_SPARSE_HD int64_t operator()(int32_t column) const {
    return FindColumn(c_indices, begin, end, column);
  }
};

// Finds a column's place in row i of C in a table of every column's latest
// place, which the row refreshes first: O(1) a product, for a table of as many
// entries as C has columns (a thread's, rows visited in increasing order).
struct TabledRow {
  int32_t* table;  // n_cols entries
  int64_t n_cols;
  int64_t begin, end;

  TabledRow(int32_t* table, int64_t n_cols, const int32_t* c_indices,
            int64_t begin, int64_t end)
      : table(table), n_cols(n_cols), begin(begin), end(end) {
    for (int64_t e = begin; e < end; ++e) {
      table[c_indices[e]] = static_cast<int32_t>(e);
    }
  }

  // A place before `begin` is an earlier row's: the column is not in this one.
  int64_t operator()(int32_t column) const {
    if (column < 0 || column >= n_cols) return -1;
    const int64_t e = table[column];
    return e >= begin && e < end ? e : -1;
  }
};

// Row i of C (zeroed first), each product's place found by locate(column)
// (SearchedRow or TabledRow of the row). Returns false, leaving the row
// partly written, if a product's column is not among the row's.
template <typename T, typename Locate>
JAXSOLVE_SPARSE_HD bool CsrProductRow(const CsrProduct<T>& p, int64_t i,
                                      const Locate& locate) {
  for (int64_t e = p.c_indptr[i]; e < p.c_indptr[i + 1]; ++e) {
    p.c_values[e] = T{};
  }
  for (int32_t t = p.a_indptr[i]; t < p.a_indptr[i + 1]; ++t) {
    const T a = p.a_values[t];
    const int32_t j = p.a_indices[t];
    for (int32_t s = p.b_indptr[j]; s < p.b_indptr[j + 1]; ++s) {
      const int64_t e = locate(p.b_indices[s]);
      if (e < 0) return false;
      p.c_values[e] = p.c_values[e] + a * p.b_values[s];
    }
  }
  return true;
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_H_
