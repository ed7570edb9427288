// The product y = A x of a CSR matrix A and a block of vectors x, and the
// update y = base + weight * (rhs -/+ A x) formed from it on the way out: what
// they compute, shared by the CPU and CUDA entries (handlers_cpu.cc,
// handlers_cuda.cu), which only schedule it.
//
// A is n_rows x n_cols with int32 row pointers `indptr` (n_rows + 1) and
// column indices `indices` (nnz). One call computes `batch` systems at once,
// all on A's pattern:
//
//   y[b, i, j] = sum over e in [indptr[i], indptr[i + 1]) of
//                values[b', e] * x[b'', indices[e], j]
//
// with y of shape (batch, n_rows, k), values (batch or 1, nnz) and x (batch or
// 1, n_cols, k), all row-major; b' = b when the values are batched, else 0,
// and b'' likewise. Systems that share their values (x batched alone: vmap
// over right-hand sides) are computed in one pass over A: a pass reads A once
// and forms all `columns()` columns of its systems, (b, j) for every b and j.
// With batched values every system is a pass of its own, with k columns.
//
// The update (Update below) is how the AMG cycle uses most products: a
// residual b - A x, a Jacobi sweep x + w (b - A x), a prolongation x + P e.
// Formed as each entry of A x is written, it spares the vector passes that
// would write A x, read it back and write the result. Measured on the H200 in
// the 128^3 Poisson AMG-PCG solve (f64): the residual and the Jacobi sweep
// took 72 and 75 us against 66 us for the plain product (64 and 65 against
// 58 us since the CUDA entry's row kernel), and three separate passes of 13,
// 19 and 19 us per iteration are gone (about 35 us of 570).
//
// The pattern must be valid (indptr non-decreasing from 0 to nnz, indices in
// [0, n_cols)); the kernels do not check it. Nothing here knows of XLA.
#ifndef JAXSOLVE_SPARSE_CSRC_SPMV_H_
#define JAXSOLVE_SPARSE_CSRC_SPMV_H_

#include <cstdint>

#if defined(__CUDACC__)
#define JAXSOLVE_SPARSE_HD __host__ __device__
#else
#define JAXSOLVE_SPARSE_HD
#endif

namespace jaxsolve::sparse {

// A complex number with just the arithmetic a product needs, for host and
// device alike; layout-compatible with std::complex<R> and cuComplex.
template <typename R>
struct alignas(2 * sizeof(R)) Complex {
  R re;
  R im;
};

template <typename R>
JAXSOLVE_SPARSE_HD inline Complex<R> operator+(Complex<R> a, Complex<R> b) {
  return {a.re + b.re, a.im + b.im};
}

template <typename R>
JAXSOLVE_SPARSE_HD inline Complex<R> operator-(Complex<R> a, Complex<R> b) {
  return {a.re - b.re, a.im - b.im};
}

template <typename R>
JAXSOLVE_SPARSE_HD inline Complex<R> operator*(Complex<R> a, Complex<R> b) {
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

// The shapes of one call, and where each system's columns live.
struct SpmvShape {
  int64_t n_rows;
  int64_t n_cols;
  int64_t nnz;
  int64_t k;      // columns of each system's x and y
  int64_t batch;  // systems
  bool batched_values;
  bool batched_x;

  JAXSOLVE_SPARSE_HD int64_t passes() const {
    return batched_values ? batch : 1;
  }
  // Columns a pass forms: column c is column c % k of system system(p, c).
  JAXSOLVE_SPARSE_HD int64_t columns() const {
    return batched_values ? k : batch * k;
  }
  JAXSOLVE_SPARSE_HD int64_t system(int64_t pass, int64_t c) const {
    return pass + c / k;  // one of the two terms is zero
  }
  // Where pass p's values start.
  JAXSOLVE_SPARSE_HD int64_t value_offset(int64_t pass) const {
    return pass * nnz;
  }
  // Column c of pass p: x[x_offset(p, c) + col * k], y[y_offset(p, c) + row * k].
  JAXSOLVE_SPARSE_HD int64_t x_offset(int64_t pass, int64_t c) const {
    return (batched_x ? system(pass, c) * n_cols * k : 0) + c % k;
  }
  JAXSOLVE_SPARSE_HD int64_t y_offset(int64_t pass, int64_t c) const {
    return system(pass, c) * n_rows * k + c % k;
  }
};

// What is written instead of A x: y = base + weight * (rhs - A x), or
// + A x without `subtract`. A null rhs or base reads as zero, a null weight
// as one; all null is the plain product. rhs and base are laid out as y is;
// weight holds one number per row of each pass's matrix, (passes, n_rows).
template <typename T>
struct Update {
  const T* rhs;
  const T* weight;
  const T* base;
  bool subtract;
};

// The operands of one call; T is float, double, Complex<float> or
// Complex<double>.
template <typename T>
struct Spmv {
  SpmvShape shape;
  const T* values;
  const int32_t* indices;
  const int32_t* indptr;
  const T* x;
  T* y;
  Update<T> update;
};

// The entry y[at] (row `row` of pass `pass`) given its product (A x)[at].
template <typename T>
JAXSOLVE_SPARSE_HD T Updated(const Spmv<T>& a, int64_t pass, int64_t row, int64_t at,
                             T product) {
  const Update<T>& u = a.update;
  T sum = product;
  if (u.subtract) {
    sum = (u.rhs != nullptr ? u.rhs[at] : T{}) - sum;
  } else if (u.rhs != nullptr) {
    sum = u.rhs[at] + sum;
  }
  if (u.weight != nullptr) sum = u.weight[pass * a.shape.n_rows + row] * sum;
  return u.base != nullptr ? u.base[at] + sum : sum;
}

// One entry of y: the sum over A's entries [begin, end) of a row, in order,
// with `values` and `x` already offset to a pass and a column.
template <typename T>
JAXSOLVE_SPARSE_HD T RowSum(const T* values, const int32_t* indices, const T* x,
                            int64_t k, int64_t begin, int64_t end) {
  T sum{};
  for (int64_t e = begin; e < end; ++e) {
    sum = sum + values[e] * x[indices[e] * k];
  }
  return sum;
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_SPMV_H_
