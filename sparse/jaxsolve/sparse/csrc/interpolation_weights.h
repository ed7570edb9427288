// Classical AMG's D1/D2 interpolation weights on a fixed plan: what they are,
// for the host setup (classical.cc, over NumPy arrays), the CPU entry
// (handlers_cpu.cc) and the CUDA entry (handlers_cuda.cu, a thread per row),
// which only schedule it.
//
// For an F point i with interpolatory C points C_i (P's columns in row i) and
// distributed strong F neighbours F_i:
//
//   w_ij = -(a_ij + sum_{k in F_i} a_ik abar_kj / s_ik) / d_i,  j in C_i
//   s_ik = sum_{l in C_i (+ i for D2)} abar_kl
//
// where abar_kl = a_kl when its sign is opposite to a_kk's (its phase, for
// complex values), else 0, and d_i sums the other entries of row i and, for
// D2, sum_{k in F_i} a_ik abar_ki / s_ik; a coupling with s_ik = 0 joins d_i.
// A C point's row is its unit weight. The plan (classical.cc's
// InterpolationPlan) says where each value adds, by offsets within rows (of
// an unsigned type O, the narrowest that holds the longest row: a quarter of
// int32 positions' bytes on most levels) and row pointers:
//
//   a_targets[e]: entry e of row i of A adds to the weight of P's row i at
//     that offset, to row i's d_i (ToDiagonal<O>) or nowhere (Nowhere<O>);
//   pair_indptr[i]: row i's first distributed coupling (pair), in the order
//     of its entries; pair_offsets[q]: the offset of the pair's entry a_ik in
//     row i of A; pair_counts[q]: its number of triples;
//   triple_indptr[i]: row i's first triple, those of its pairs in order;
//     triple_offsets[t]: the offset of the triple's entry a_kl in row k of A;
//     triple_targets[t]: where abar_kl a_ik / s_ik adds (as a_targets).
//
// Sums are accumulated in double (complex: Complex<double>) and rounded to the
// values' type once, in the order of jaxsolve/sparse/_classical.py's formula
// (A's entries, then the triples, then the undistributed couplings), whose
// NumPy evaluation the host matches bit for bit for real values. Each row
// reads and writes only its own: rows are independent. Truncation (a fixed
// subset `keep` of each row's weights, rescaled to the row's former sum) is
// the last step, as in _classical.py's _truncated. Nothing here knows of XLA;
// interpolation_weights_ffi.h binds InterpolationCall to it.
#ifndef JAXSOLVE_SPARSE_CSRC_INTERPOLATION_WEIGHTS_H_
#define JAXSOLVE_SPARSE_CSRC_INTERPOLATION_WEIGHTS_H_

#include <cstdint>
#include <type_traits>

#include "spmv.h"

namespace jaxsolve::sparse {

// ---------------------------------------------------------------------------
// Arithmetic as NumPy's: real or complex values T, their real type, and sums
// accumulated in double (np.bincount's) before rounding back to T.

template <typename T>
struct Scalar {
  using Real = T;
  using Sum = double;
};
template <typename R>
struct Scalar<Complex<R>> {
  using Real = R;
  using Sum = Complex<double>;
};

template <typename R>
JAXSOLVE_SPARSE_HD R RealPart(R x) { return x; }
template <typename R>
JAXSOLVE_SPARSE_HD R RealPart(Complex<R> x) { return x.re; }
template <typename R>
JAXSOLVE_SPARSE_HD R Conj(R x) { return x; }
template <typename R>
JAXSOLVE_SPARSE_HD Complex<R> Conj(Complex<R> x) { return {x.re, -x.im}; }
template <typename R>
JAXSOLVE_SPARSE_HD bool IsZero(R x) { return x == 0; }
template <typename R>
JAXSOLVE_SPARSE_HD bool IsZero(Complex<R> x) { return x.re == 0 && x.im == 0; }
template <typename R>
JAXSOLVE_SPARSE_HD R Negated(R x) { return -x; }
template <typename R>
JAXSOLVE_SPARSE_HD Complex<R> Negated(Complex<R> x) { return {-x.re, -x.im}; }
template <typename T>
JAXSOLVE_SPARSE_HD T FromReal(typename Scalar<T>::Real x) {
  if constexpr (std::is_same_v<T, typename Scalar<T>::Real>) {
    return x;
  } else {
    return T{x, 0};
  }
}
template <typename R>
JAXSOLVE_SPARSE_HD double ToSum(R x) { return x; }
template <typename R>
JAXSOLVE_SPARSE_HD Complex<double> ToSum(Complex<R> x) { return {x.re, x.im}; }
template <typename T>
JAXSOLVE_SPARSE_HD T FromSum(double x) { return static_cast<T>(x); }
template <typename T>
JAXSOLVE_SPARSE_HD T FromSum(Complex<double> x) {
  using R = typename Scalar<T>::Real;
  return {static_cast<R>(x.re), static_cast<R>(x.im)};
}
template <typename R>
JAXSOLVE_SPARSE_HD R Divided(R a, R b) { return a / b; }
// NumPy's complex division (Smith's algorithm).
template <typename R>
JAXSOLVE_SPARSE_HD Complex<R> Divided(Complex<R> a, Complex<R> b) {
  const auto magnitude = [](R x) { return x < 0 ? -x : x == 0 ? R{0} : x; };  // +0 for -0
  const R b_re = magnitude(b.re), b_im = magnitude(b.im);
  if (b_re >= b_im) {
    if (b_re == 0 && b_im == 0) return {a.re / b_re, a.im / b_re};
    const R ratio = b.im / b.re, scale = R{1} / (b.re + b.im * ratio);
    return {(a.re + a.im * ratio) * scale, (a.im - a.re * ratio) * scale};
  }
  const R ratio = b.re / b.im, scale = R{1} / (b.im + b.re * ratio);
  return {(a.re * ratio + a.im) * scale, (a.im * ratio - a.re) * scale};
}

// ---------------------------------------------------------------------------

// The targets of a_targets and triple_targets that are no offset of P's row.
template <typename O>
inline constexpr O Nowhere = static_cast<O>(~O{0});
template <typename O>
inline constexpr O ToDiagonal = static_cast<O>(~O{0} - 1);

// A's values on its n x n pattern and the plan of P's weights (see above).
template <typename T, typename O>
struct InterpolationWeights {
  int32_t n;
  const int32_t* indptr;
  const int32_t* indices;
  const T* values;
  const T* diagonal;
  const uint8_t* coarse;  // 1 for a C point
  const int32_t* full_indptr;  // untruncated P's row pointers
  const O* a_targets;  // (nnz(A),)
  const int32_t* pair_indptr;  // (n + 1,)
  const O* pair_offsets;
  const O* pair_counts;
  const int32_t* triple_indptr;  // (n + 1,)
  const O* triple_offsets;
  const O* triple_targets;

  JAXSOLVE_SPARSE_HD int64_t full_nnz() const { return full_indptr[n]; }
};

// Row i's untruncated weights, each left in sums[c] (exactly, as a Sum) for
// c < the row's length: `sums` is the row's own scratch. Returns false if the
// plan sends a value outside row i of P, names an entry outside its row of A
// or disagrees with triple_indptr (the row's weights are then meaningless).
template <typename T, typename O>
JAXSOLVE_SPARSE_HD bool InterpolationRow(const InterpolationWeights<T, O>& in, int32_t i,
                                         typename Scalar<T>::Sum* sums) {
  using Sum = typename Scalar<T>::Sum;
  const int64_t length = in.full_indptr[i + 1] - in.full_indptr[i];
  if (in.coarse[i]) {
    for (int64_t c = 0; c < length; ++c) sums[c] = ToSum(FromReal<T>(1));
    return true;
  }
  for (int64_t c = 0; c < length; ++c) sums[c] = Sum{};
  Sum d{};
  bool inside = true;
  const auto add = [&](O target, T value) {
    if (target == Nowhere<O>) return;
    if (target == ToDiagonal<O>) {
      d = d + ToSum(value);
    } else if (target < length) {
      sums[target] = sums[target] + ToSum(value);
    } else {
      inside = false;
    }
  };
  const auto bar = [&](int32_t k, int32_t f) {
    const T a = in.values[f];
    return RealPart(a * Conj(in.diagonal[k])) < 0 ? a : T{};
  };
  const int32_t row = in.indptr[i], row_length = in.indptr[i + 1] - row;
  const int32_t first_pair = in.pair_indptr[i], last_pair = in.pair_indptr[i + 1];
  // Pair q's entry a_ik, row k and triples [first, first + count), if they lie
  // within their rows of A and the row's triples (else false).
  const auto pair = [&](int32_t q, int64_t first, int32_t& e, int32_t& k) {
    if (in.pair_offsets[q] >= row_length ||
        first + in.pair_counts[q] > in.triple_indptr[i + 1]) {
      return false;
    }
    e = row + in.pair_offsets[q];
    k = in.indices[e];
    const int32_t k_length = in.indptr[k + 1] - in.indptr[k];
    for (int64_t t = first; t < first + in.pair_counts[q]; ++t) {
      if (in.triple_offsets[t] >= k_length) return false;
    }
    return true;
  };
  const auto pair_sum = [&](int64_t first, O count, int32_t k) {
    Sum s{};
    for (int64_t t = first; t < first + count; ++t) {
      s = s + ToSum(bar(k, in.indptr[k] + in.triple_offsets[t]));
    }
    return FromSum<T>(s);
  };
  for (int32_t c = 0; c < row_length; ++c) add(in.a_targets[row + c], in.values[row + c]);
  int64_t first = in.triple_indptr[i];
  for (int32_t q = first_pair; q < last_pair; ++q) {
    int32_t e = 0, k = 0;
    if (!pair(q, first, e, k)) return false;
    const O count = in.pair_counts[q];
    const T s_ik = pair_sum(first, count, k);
    const T share = IsZero(s_ik) ? T{} : Divided(in.values[e], s_ik);
    for (int64_t t = first; t < first + count; ++t) {
      add(in.triple_targets[t], share * bar(k, in.indptr[k] + in.triple_offsets[t]));
    }
    first += count;
  }
  if (first != in.triple_indptr[i + 1]) return false;
  first = in.triple_indptr[i];
  for (int32_t q = first_pair; q < last_pair; ++q) {  // undistributed: into d_i
    const int32_t e = row + in.pair_offsets[q];
    const O count = in.pair_counts[q];
    const bool none = IsZero(pair_sum(first, count, in.indices[e]));
    d = d + ToSum(none ? in.values[e] : T{});
    first += count;
  }
  const T denominator = FromSum<T>(d);
  for (int64_t c = 0; c < length; ++c) {
    sums[c] = ToSum(IsZero(denominator)
                        ? T{}
                        : Divided(Negated(FromSum<T>(sums[c])), denominator));
  }
  return inside;
}

// Row i of truncated P: its kept weights, weights[keep[e] - full_begin] for e
// in [p_begin, p_end), rescaled so that the row keeps its former sum (the
// row's `length` weights, of T or, as InterpolationRow leaves them, of Sum).
// `keep` holds positions (full_begin: the row's first) or offsets within the
// row (full_begin 0).
template <typename T, typename W, typename K>
JAXSOLVE_SPARSE_HD void TruncatedRow(const W* weights, int64_t length, const K* keep,
                                     int64_t full_begin, int64_t p_begin, int64_t p_end,
                                     T* p_values) {
  using Sum = typename Scalar<T>::Sum;
  const auto weight = [&](int64_t c) -> T {
    if constexpr (std::is_same_v<W, T>) {
      return weights[c];
    } else {
      return FromSum<T>(weights[c]);
    }
  };
  Sum full{}, kept{};
  for (int64_t c = 0; c < length; ++c) full = full + ToSum(weight(c));
  for (int64_t e = p_begin; e < p_end; ++e) kept = kept + ToSum(weight(keep[e] - full_begin));
  const T kept_sum = FromSum<T>(kept);
  const T scale = IsZero(kept_sum) ? FromReal<T>(1) : Divided(FromSum<T>(full), kept_sum);
  for (int64_t e = p_begin; e < p_end; ++e) {
    p_values[e] = weight(keep[e] - full_begin) * scale;
  }
}

// One call: P's values for a batch of systems on one plan (vmap over values).
// System s reads A's values s * nnz entries on from the first system's and
// its diagonal s * n on, writes P's values s * p_nnz on and uses the scratch
// s * full_nnz on (a Sum per untruncated weight).
template <typename T, typename O>
struct InterpolationCall {
  InterpolationWeights<T, O> first;  // the first system's
  int64_t systems, nnz, p_nnz;
  const O* keep;  // P's entries: offsets in their rows of the untruncated; null: none dropped
  const int32_t* p_indptr;  // P's row pointers (with keep)
  T* p_values;
  typename Scalar<T>::Sum* scratch;

  JAXSOLVE_SPARSE_HD InterpolationWeights<T, O> System(int64_t s) const {
    InterpolationWeights<T, O> in = first;
    in.values += s * nnz;
    in.diagonal += s * in.n;
    return in;
  }
};

// Row i of system s's P; false if the plan sends a value outside the row
// (InterpolationRow's false; the row is then written, but meaningless).
template <typename T, typename O>
JAXSOLVE_SPARSE_HD bool InterpolationCallRow(const InterpolationCall<T, O>& call, int64_t s,
                                             int32_t i) {
  const InterpolationWeights<T, O> in = call.System(s);
  const int64_t begin = in.full_indptr[i], length = in.full_indptr[i + 1] - begin;
  typename Scalar<T>::Sum* weights = call.scratch + s * in.full_nnz() + begin;
  const bool inside = InterpolationRow(in, i, weights);
  T* p_values = call.p_values + s * call.p_nnz;
  if (call.keep != nullptr) {
    TruncatedRow(weights, length, call.keep, 0, call.p_indptr[i], call.p_indptr[i + 1],
                 p_values);
  } else {
    for (int64_t c = 0; c < length; ++c) p_values[begin + c] = FromSum<T>(weights[c]);
  }
  return inside;
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_INTERPOLATION_WEIGHTS_H_
