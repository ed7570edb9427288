// The values of a sparse product C = A B on fixed patterns, given the map
// from scalar products to positions of C that spgemm_symbolic.cc computes:
// what it computes, for the CPU entry (handlers_cpu.cc), which schedules it.
//
// A is m x n CSR (values, int32 indices and row pointers), B n x p (values
// and row pointers: its columns are already folded into the map), C m x p
// (row pointers). Scalar products are numbered row by row of A, entry by entry
// of that row, entry by entry of the row of B it selects:
//
//   product q = (t, s): a_values[t] * b_values[s], for t in row i of A and s
//   in row indices[t] of B, lands at c_values[c_indptr[i] + offsets[q]].
//
// Every product of row i lands in row i of C, so rows are independent.
// Nothing here knows of XLA.
#ifndef JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_H_
#define JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_H_

#include <cstdint>

#include "spmv.h"

namespace jaxsolve::sparse {

// The operands of one product; T is float, double, Complex<float> or
// Complex<double>, Offset uint8_t, uint16_t or int32_t.
template <typename T, typename Offset>
struct CsrProduct {
  int64_t m;
  const T* a_values;
  const int32_t* a_indices;
  const int32_t* a_indptr;
  const T* b_values;
  const int32_t* b_indptr;
  const int32_t* c_indptr;
  const Offset* offsets;
  T* c_values;
};

// Rows [row_begin, row_end) of C, whose products start at number `first`
// (zeroes them first). Returns false, leaving the rows partly written, if a
// product's offset falls outside its row of C.
template <typename T, typename Offset>
bool CsrProductRows(const CsrProduct<T, Offset>& p, int64_t row_begin,
                    int64_t row_end, int64_t first) {
  for (int64_t e = p.c_indptr[row_begin]; e < p.c_indptr[row_end]; ++e) {
    p.c_values[e] = T{};
  }
  const Offset* offset = p.offsets + first;
  for (int64_t i = row_begin; i < row_end; ++i) {
    T* c = p.c_values + p.c_indptr[i];
    const int64_t length = p.c_indptr[i + 1] - p.c_indptr[i];
    for (int32_t t = p.a_indptr[i]; t < p.a_indptr[i + 1]; ++t) {
      const T a = p.a_values[t];
      const int32_t j = p.a_indices[t];
      for (int32_t s = p.b_indptr[j]; s < p.b_indptr[j + 1]; ++s) {
        const int64_t position = static_cast<int64_t>(*offset++);
        if (position < 0 || position >= length) return false;
        c[position] = c[position] + a * p.b_values[s];
      }
    }
  }
  return true;
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_CSR_PRODUCT_H_
