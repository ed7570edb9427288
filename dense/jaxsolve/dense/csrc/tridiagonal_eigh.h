// The eigenvalues and eigenvectors of a real symmetric tridiagonal matrix T
// (diagonal d, off-diagonal e), with O(n) workspace besides the n x n
// eigenvector matrix Z: the one core behind jaxsolve.dense.eigh_tridiagonal
// (CPU and CUDA entries) and behind syevd's low-memory GPU path, where it
// replaces cuSOLVER's divide and conquer (which needs about n² more).
//
// The method, per eigenvalue, independently (so a GPU thread computes one):
//
//  1. Splitting. T falls apart into unreduced blocks where an off-diagonal
//     is negligible, |e_i| <= eps * sqrt(|d_i| |d_i+1|) (LAPACK's test). An
//     eigenvector lives on its block; row i's block is found by scanning
//     outward from i. Block b of m rows owns m eigenvalues, numbered by its
//     rows: row i computes the (i - start)-th smallest of its block.
//  2. Eigenvalues by bisection on Sturm counts (multisection: seven counts a
//     pass), in double, to full double accuracy (|error| <= eps * ||T_block||,
//     as LAPACK's dstebz).
//  3. Eigenvectors of well-separated eigenvalues by Rayleigh quotient
//     iteration on twisted factorizations (the vector kernel of MRRR,
//     Dhillon and Parlett): T - sigma = N_r Delta_r N_rᵀ, solved with
//     z_r = 1 for the twist r where the eigenvector is large. The
//     factorizations run in double-double arithmetic, so that a vector is
//     accurate to about 1e-32 ||T|| / gap; the ratios that build z are kept
//     in z's own column (the O(n) workspace of each eigenvalue is the
//     column it writes). Iteration stops when the Rayleigh quotient's
//     correction is below eps_out * gap, eps_out the output's precision.
//  4. Eigenvalues closer than kClusterGap * ||T_block|| to a neighbour form
//     a cluster; its vectors come from inverse iteration in double-double
//     from pseudo-random starts, each orthogonalized against the cluster's
//     earlier vectors (modified Gram-Schmidt, twice), as LAPACK's dstein
//     does for its clusters. Double-double keeps the rest of the spectrum
//     out to about 1e-32 / kClusterGap; Gram-Schmidt makes the cluster's
//     vectors orthonormal. The solves are sequential, the Gram-Schmidt
//     steps are spread over a `Team` (a CUDA thread block, or one CPU
//     thread).
//
// Storage: d and e are `Real` (float or double); Z is column-major with
// columns of `Real` elements `stride` apart (stride 2: the real parts of
// complex columns, whose imaginary parts the caller has zeroed).
#ifndef JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_H_
#define JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_H_

#include <cfloat>
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define JAXSOLVE_DENSE_HD __host__ __device__
#else
#define JAXSOLVE_DENSE_HD
#endif

namespace jaxsolve::dense::tridiagonal {

using std::fabs;
using std::fma;
using std::fmax;
using std::fmin;
using std::ilogb;
using std::isfinite;
using std::ldexp;
using std::sqrt;

// ------------------------------------------------------- double-double

// An unevaluated sum hi + lo with |lo| <= ulp(hi) / 2: about 106 bits.
struct DoubleDouble {
  double hi;
  double lo;
};
using DD = DoubleDouble;

JAXSOLVE_DENSE_HD inline DD QuickTwoSum(double a, double b) {  // |a| >= |b|
  const double s = a + b;
  return {s, b - (s - a)};
}

JAXSOLVE_DENSE_HD inline DD TwoSum(double a, double b) {
  const double s = a + b;
  const double v = s - a;
  return {s, (a - (s - v)) + (b - v)};
}

JAXSOLVE_DENSE_HD inline DD TwoProduct(double a, double b) {
  const double p = a * b;
  return {p, fma(a, b, -p)};
}

JAXSOLVE_DENSE_HD inline DD Add(DD a, DD b) {
  DD s = TwoSum(a.hi, b.hi);
  const DD t = TwoSum(a.lo, b.lo);
  s.lo += t.hi;
  s = QuickTwoSum(s.hi, s.lo);
  s.lo += t.lo;
  return QuickTwoSum(s.hi, s.lo);
}

JAXSOLVE_DENSE_HD inline DD Subtract(DD a, DD b) { return Add(a, {-b.hi, -b.lo}); }

JAXSOLVE_DENSE_HD inline DD Multiply(DD a, double b) {
  DD p = TwoProduct(a.hi, b);
  p.lo += a.lo * b;
  return QuickTwoSum(p.hi, p.lo);
}

JAXSOLVE_DENSE_HD inline DD Multiply(DD a, DD b) {
  DD p = TwoProduct(a.hi, b.hi);
  p.lo += a.hi * b.lo + a.lo * b.hi;
  return QuickTwoSum(p.hi, p.lo);
}

// a / b to about 2^-104 relative (one correction step: "sloppy" division).
JAXSOLVE_DENSE_HD inline DD Divide(DD a, DD b) {
  const double q1 = a.hi / b.hi;
  const DD r = Subtract(a, Multiply(b, q1));
  return QuickTwoSum(q1, r.hi / b.hi);
}

// -------------------------------------------------------------- traits

// kClusterGap: eigenvalues closer than this times ||T_block|| are a cluster.
// A singleton's Rayleigh quotient is known to about eps_out² ||T|| (its
// vector is stored in the output's precision), and its iteration needs that
// well below eps_out * gap (f32: a margin of 40). A cluster's inverse
// iteration starts from eigenvalues known to about eps_f64 ||T||, so each
// step shrinks the rest of the spectrum's share by eps_f64 / kClusterGap at
// least (f64: about 1e-6 a step). kOutputEpsilon: the output's unit roundoff.
template <typename Real>
struct Precision;
template <>
struct Precision<float> {
  static constexpr double kClusterGap = 1e-5;
  static constexpr double kOutputEpsilon = FLT_EPSILON / 2;
};
template <>
struct Precision<double> {
  static constexpr double kClusterGap = 1e-10;
  static constexpr double kOutputEpsilon = DBL_EPSILON / 2;
};

constexpr int kRayleighIterations = 12;
constexpr int kClusterIterations = 4;

// ------------------------------------------------------------- splitting

template <typename Real>
JAXSOLVE_DENSE_HD inline bool Negligible(const Real* d, const Real* e, int64_t i) {
  const double off = fabs(static_cast<double>(e[i]));
  return off == 0.0 || off <= static_cast<double>(Precision<Real>::kOutputEpsilon) * 2 *
                                    sqrt(fabs(static_cast<double>(d[i]))) *
                                    sqrt(fabs(static_cast<double>(d[i + 1])));
}

// The unreduced block [start, end) that holds row i. The solver works on the
// block scaled by `scale`, a power of two that brings its norm near 1 (so
// squares neither overflow nor underflow): `lower`, `upper` (its Gershgorin
// interval), `norm` (max(|lower|, |upper|)) and `pivmin` (the Sturm count's
// pivot floor, LAPACK's) are the scaled block's.
struct Block {
  int64_t start;
  int64_t end;
  double scale;
  double lower;
  double upper;
  double norm;
  double pivmin;

  template <typename Real>
  JAXSOLVE_DENSE_HD double Diagonal(const Real* d, int64_t k) const {
    return scale * static_cast<double>(d[k]);
  }
  template <typename Real>
  JAXSOLVE_DENSE_HD double OffDiagonal(const Real* e, int64_t k) const {
    return scale * static_cast<double>(e[k]);
  }
};

template <typename Real>
JAXSOLVE_DENSE_HD inline Block BlockOf(const Real* d, const Real* e, int64_t n, int64_t i) {
  Block b;
  b.start = i;
  while (b.start > 0 && !Negligible(d, e, b.start - 1)) --b.start;
  b.end = i + 1;
  while (b.end < n && !Negligible(d, e, b.end - 1)) ++b.end;
  double largest = 0.0;
  bool finite = true;
  for (int64_t k = b.start; k < b.end; ++k) {
    finite = finite && isfinite(static_cast<double>(d[k]));
    largest = fmax(largest, fabs(static_cast<double>(d[k])));
    if (k + 1 < b.end) {
      finite = finite && isfinite(static_cast<double>(e[k]));
      largest = fmax(largest, fabs(static_cast<double>(e[k])));
    }
  }
  if (!finite) {  // NaN or Inf went in: NaN bounds, which RowEigenvalue passes on
    b.scale = 1.0;
    b.lower = b.upper = b.norm = NAN;
    b.pivmin = DBL_MIN;
    return b;
  }
  b.scale = largest > 0 ? ldexp(1.0, -ilogb(largest)) : 1.0;
  b.lower = INFINITY;
  b.upper = -INFINITY;
  double largest_square = 1.0;
  for (int64_t k = b.start; k < b.end; ++k) {
    const double left = k > b.start ? fabs(b.OffDiagonal(e, k - 1)) : 0.0;
    const double right = k + 1 < b.end ? fabs(b.OffDiagonal(e, k)) : 0.0;
    const double center = b.Diagonal(d, k);
    b.lower = fmin(b.lower, center - left - right);
    b.upper = fmax(b.upper, center + left + right);
    largest_square = fmax(largest_square, right * right);
  }
  b.norm = fmax(fabs(b.lower), fabs(b.upper));
  b.pivmin = DBL_MIN * largest_square;
  const double widen = 4 * DBL_EPSILON * b.norm * (b.end - b.start) + 2 * b.pivmin;
  b.lower -= widen;
  b.upper += widen;
  return b;
}

// ----------------------------------------------------------- eigenvalues

// A bisection step cuts the interval into kSections pieces: three bits a pass
// over the block, whose kSections - 1 Sturm sequences are independent chains
// of divisions (a GPU thread's or a CPU core's pipeline overlaps them).
constexpr int kSections = 8;

// The numbers of eigenvalues of the scaled block below x[0], ..., x[kSections - 2].
template <typename Real>
JAXSOLVE_DENSE_HD inline void SturmCounts(const Real* d, const Real* e, const Block& b,
                                          const double* x, int64_t* count) {
  double q[kSections - 1];
  for (int j = 0; j < kSections - 1; ++j) {
    q[j] = 1.0;
    count[j] = 0;
  }
  for (int64_t k = b.start; k < b.end; ++k) {
    const double diagonal = b.Diagonal(d, k);
    const double off = k > b.start ? b.OffDiagonal(e, k - 1) : 0.0;
    const double square = off * off;
    for (int j = 0; j < kSections - 1; ++j) {
      q[j] = (diagonal - x[j]) - (k > b.start ? square / q[j] : 0.0);
      if (fabs(q[j]) < b.pivmin) q[j] = -b.pivmin;
      count[j] += q[j] < 0;
    }
  }
}

// The k-th smallest eigenvalue of the scaled block (k from 0), by multisection
// of its Gershgorin interval down to eps * max(|lo|, |hi|) + eps * norm.
template <typename Real>
JAXSOLVE_DENSE_HD inline double BlockEigenvalue(const Real* d, const Real* e, const Block& b,
                                                int64_t k) {
  double lo = b.lower, hi = b.upper;
  const double absolute = DBL_EPSILON * b.norm + 2 * b.pivmin;
  for (int step = 0; step < 800; ++step) {
    if (hi - lo <= 2 * DBL_EPSILON * fmax(fabs(lo), fabs(hi)) + absolute) break;
    double x[kSections - 1];
    int64_t count[kSections - 1];
    for (int j = 0; j < kSections - 1; ++j) x[j] = lo + (hi - lo) * (j + 1) / kSections;
    SturmCounts(d, e, b, x, count);
    double next_lo = lo, next_hi = hi;
    for (int j = 0; j < kSections - 1; ++j) {
      if (count[j] >= k + 1) {
        next_hi = fmin(next_hi, x[j]);
      } else {
        next_lo = fmax(next_lo, x[j]);
      }
    }
    if (next_lo == lo && next_hi == hi) break;  // the interval is as narrow as doubles go
    lo = next_lo;
    hi = next_hi;
  }
  return 0.5 * (lo + hi);
}

// Row i's eigenvalue (the (i - start)-th of its block, unscaled) and its block.
template <typename Real>
JAXSOLVE_DENSE_HD inline double RowEigenvalue(const Real* d, const Real* e, int64_t n, int64_t i,
                                              Block* block) {
  *block = BlockOf(d, e, n, i);
  if (!isfinite(block->lower + block->upper)) return NAN;  // NaN or Inf went in
  if (block->end - block->start == 1) return static_cast<double>(d[i]);
  return BlockEigenvalue(d, e, *block, i - block->start) / block->scale;
}

// ----------------------------------------------------------- eigenvectors

// Column access: element i of a column whose entries are `stride` Reals apart.
template <typename Real>
struct Column {
  Real* data;
  int64_t stride;
  JAXSOLVE_DENSE_HD double operator()(int64_t i) const {
    return static_cast<double>(data[i * stride]);
  }
  JAXSOLVE_DENSE_HD void Set(int64_t i, double value) const {
    data[i * stride] = static_cast<Real>(value);
  }
};

// Eigenvalues (unscaled) of rows i and i + 1 (same block, i + 1 < end) closer
// than the cluster gap.
template <typename Real>
JAXSOLVE_DENSE_HD inline bool Linked(const double* lambda, const Block& b, int64_t i) {
  return i >= b.start && i + 1 < b.end &&
         (lambda[i + 1] - lambda[i]) * b.scale < Precision<Real>::kClusterGap * b.norm;
}

// Whether row i's eigenvalue belongs to a cluster, and whether it is the first row of one.
template <typename Real>
JAXSOLVE_DENSE_HD inline bool InCluster(const double* lambda, const Block& b, int64_t i) {
  return Linked<Real>(lambda, b, i) || Linked<Real>(lambda, b, i - 1);
}
template <typename Real>
JAXSOLVE_DENSE_HD inline bool StartsCluster(const double* lambda, const Block& b, int64_t i) {
  return Linked<Real>(lambda, b, i) && !Linked<Real>(lambda, b, i - 1);
}

JAXSOLVE_DENSE_HD inline DD Shifted(double diagonal, DD sigma, double pivmin) {
  DD value = Subtract({diagonal, 0.0}, sigma);
  if (fabs(value.hi) < pivmin) value = {-pivmin, 0.0};
  return value;
}

// The next pivot of a stationary (or progressive) qd step: (d - sigma) - off² / pivot.
JAXSOLVE_DENSE_HD inline DD NextPivot(double diagonal, double off, DD sigma, DD pivot,
                                      double pivmin) {
  DD value = Subtract(Subtract({diagonal, 0.0}, sigma), Divide(TwoProduct(off, off), pivot));
  if (fabs(value.hi) < pivmin) value = {-pivmin, 0.0};
  return value;
}

// The eigenvector of an eigenvalue `lambda` at distance `gap` from the rest
// of its block's spectrum (both of the scaled block), written (unit 2-norm)
// into z over the block's rows.
// Returns whether the Rayleigh quotient iteration converged.
template <typename Real>
JAXSOLVE_DENSE_HD bool SingletonVector(const Real* d, const Real* e, const Block& b, double lambda,
                                       double gap, Column<Real> z) {
  const int64_t s = b.start, t = b.end;
  if (!isfinite(lambda)) {  // NaN or Inf went in: a NaN vector, which the caller reports
    for (int64_t i = s; i < t; ++i) z.Set(i, NAN);
    return true;
  }
  if (t - s == 1) {
    z.Set(s, 1.0);
    return true;
  }
  const double pivmin = b.pivmin;
  auto D = [&](int64_t k) { return b.Diagonal(d, k); };
  auto E = [&](int64_t k) { return b.OffDiagonal(e, k); };
  DD sigma{lambda, 0.0};
  // Bottom-up (progressive) pivots m_k; z[k] = e[k-1] / m_k for stop < k < t.
  auto bottom_up = [&](int64_t stop) {
    DD m = Shifted(D(t - 1), sigma, pivmin);
    for (int64_t k = t - 1; k > stop; --k) {
      z.Set(k, E(k - 1) / m.hi);
      m = NextPivot(D(k - 1), E(k - 1), sigma, m, pivmin);
    }
  };
  // Top-down pivots p_k; z[k] = e[k] / p_k for s <= k < stop; visit(k, p_k)
  // sees each pivot (p_stop too) before z[k] is written.
  auto top_down = [&](int64_t stop, auto&& visit) {
    DD p = Shifted(D(s), sigma, pivmin);
    for (int64_t k = s; k < stop; ++k) {
      visit(k, p);
      z.Set(k, E(k) / p.hi);
      p = NextPivot(D(k + 1), E(k), sigma, p, pivmin);
    }
    visit(stop, p);
  };
  int64_t twist = -1;
  double norm2 = 1.0;
  bool converged = false;
  for (int iteration = 0; iteration < kRayleighIterations && !converged; ++iteration) {
    int64_t r = twist;
    if (r < 0) {
      // The first twist is where gamma_k = p_k - e_k² / m_{k+1} is smallest (in
      // double: it only picks the twist), read off the bottom-up ratios that
      // the top-down pass has not yet overwritten; below the twist the
      // bottom-up ratios are written again after.
      bottom_up(s);
      double smallest = INFINITY;
      r = t - 1;
      top_down(t - 1, [&](int64_t k, DD p) {
        const double gamma = k + 1 < t ? p.hi - E(k) * z(k + 1) : p.hi;
        if (fabs(gamma) < smallest) {
          smallest = fabs(gamma);
          r = k;
        }
      });
      bottom_up(r);
    } else {  // later twists: the largest entry of the previous vector
      bottom_up(r);
      top_down(r, [](int64_t, DD) {});
    }
    // z_r = 1 and the ratios outward; the largest entry is the next twist.
    z.Set(r, 1.0);
    norm2 = 1.0;
    double largest = 1.0;
    twist = r;
    for (int k = 0; k < 2; ++k) {
      const int64_t step = k == 0 ? -1 : 1;
      double previous = 1.0;
      for (int64_t i = r + step; i >= s && i < t; i += step) {
        z.Set(i, -z(i) * previous);
        previous = z(i);
        norm2 += previous * previous;
        if (fabs(previous) > largest) {
          largest = fabs(previous);
          twist = i;
        }
      }
    }
    // The Rayleigh quotient's correction zᵀ (T - sigma) z / zᵀ z, in double-double.
    DD quadratic{0.0, 0.0};
    for (int64_t i = s; i < t; ++i) {
      const double zi = z(i);
      quadratic = Add(quadratic, Multiply(Subtract({D(i), 0.0}, sigma), TwoProduct(zi, zi)));
      if (i + 1 < t) quadratic = Add(quadratic, Multiply(TwoProduct(2 * E(i), zi), z(i + 1)));
    }
    const double correction = quadratic.hi / norm2;
    converged = fabs(correction) <= Precision<Real>::kOutputEpsilon * gap;
    sigma = Add(sigma, {correction, 0.0});
  }
  const double scale = 1.0 / sqrt(norm2);
  for (int64_t i = s; i < t; ++i) z.Set(i, z(i) * scale);
  return converged;
}

// Row i's eigenvector when its eigenvalue is not InCluster: SingletonVector
// with the distance to the block's neighbouring eigenvalues (`lambda`, unscaled).
template <typename Real>
JAXSOLVE_DENSE_HD bool SeparatedVector(const Real* d, const Real* e, const Block& b,
                                       const double* lambda, int64_t i, Column<Real> z) {
  double gap = INFINITY;
  if (i > b.start) gap = fmin(gap, lambda[i] - lambda[i - 1]);
  if (i + 1 < b.end) gap = fmin(gap, lambda[i + 1] - lambda[i]);
  return SingletonVector(d, e, b, lambda[i] * b.scale, gap * b.scale, z);
}

// A pseudo-random start in [-1, 1) for row i of the vector of `row`.
JAXSOLVE_DENSE_HD inline double StartEntry(int64_t row, int64_t i) {
  uint64_t x = static_cast<uint64_t>(row) * 0x9E3779B97F4A7C15ull ^
               (static_cast<uint64_t>(i) + 0x632BE59BD9B4E019ull);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) * 0x1.0p-52 - 1.0;
}

// A team of workers that share a cluster's Gram-Schmidt: `Team` provides
// rank(), size(), Sync() and Sum(double) (every member's partial sums added,
// the total returned to all).
//
// Orthonormalizes z[rows] against the columns `done[0:count]`, twice (each
// pass one sum per column), then scales it to unit norm.
template <typename Real, typename Team, typename Columns>
JAXSOLVE_DENSE_HD void Orthonormalize(Team& team, const Block& b, Column<Real> z, Columns done,
                                      int64_t count) {
  for (int pass = 0; pass < 2; ++pass) {
    for (int64_t c = 0; c < count; ++c) {
      const Column<Real> q = done(c);
      double partial = 0.0;
      for (int64_t i = b.start + team.rank(); i < b.end; i += team.size()) partial += q(i) * z(i);
      const double dot = team.Sum(partial);
      for (int64_t i = b.start + team.rank(); i < b.end; i += team.size()) {
        z.Set(i, z(i) - dot * q(i));
      }
      team.Sync();
    }
  }
  double partial = 0.0;
  for (int64_t i = b.start + team.rank(); i < b.end; i += team.size()) partial += z(i) * z(i);
  const double norm = sqrt(team.Sum(partial));
  const double scale = norm > 0 ? 1.0 / norm : 0.0;
  for (int64_t i = b.start + team.rank(); i < b.end; i += team.size()) z.Set(i, z(i) * scale);
  team.Sync();
}

// Solves (T_block - sigma) y = z (the scaled block) in double-double (LU
// without pivoting, pivots kept away from zero by `floor`), y written over z.
// `pivots` and `partial` hold the block's pivots and forward-substituted
// right-hand side.
template <typename Real>
JAXSOLVE_DENSE_HD void ShiftedSolve(const Real* d, const Real* e, const Block& b, DD sigma,
                                    double floor, Column<Real> z, DD* pivots, DD* partial) {
  const int64_t s = b.start, t = b.end;
  DD pivot = Shifted(b.Diagonal(d, s), sigma, floor);
  DD y{z(s), 0.0};
  pivots[0] = pivot;
  partial[0] = y;
  for (int64_t k = s + 1; k < t; ++k) {
    const double off = b.OffDiagonal(e, k - 1);
    const DD multiplier = Divide({off, 0.0}, pivot);
    pivot = Subtract(Subtract({b.Diagonal(d, k), 0.0}, sigma), Multiply(multiplier, off));
    if (fabs(pivot.hi) < floor) pivot = {-floor, 0.0};
    y = Subtract({z(k), 0.0}, Multiply(multiplier, y));
    pivots[k - s] = pivot;
    partial[k - s] = y;
  }
  DD next = Divide(partial[t - 1 - s], pivots[t - 1 - s]);
  z.Set(t - 1, next.hi);
  for (int64_t k = t - 2; k >= s; --k) {
    next = Divide(Subtract(partial[k - s], Multiply(next, b.OffDiagonal(e, k))),
                  pivots[k - s]);
    z.Set(k, next.hi);
  }
}

// The vectors of the cluster that starts at row `first` (rows first, first+1,
// ... while Linked): inverse iteration from pseudo-random starts, each
// orthonormalized against the cluster's earlier vectors. `column(row)` is the
// Column of row's eigenvector; `pivots`/`partial` hold (end - start) DDs each.
template <typename Real, typename Team, typename ColumnOf>
JAXSOLVE_DENSE_HD void ClusterVectors(Team& team, const Real* d, const Real* e, const Block& b,
                                      const double* lambda, int64_t first, ColumnOf column,
                                      DD* pivots, DD* partial) {
  auto earlier = [&](int64_t c) { return column(first + c); };
  const double floor = DBL_EPSILON * DBL_EPSILON * b.norm + b.pivmin;
  for (int64_t row = first; row == first || Linked<Real>(lambda, b, row - 1); ++row) {
    const Column<Real> z = column(row);
    for (int64_t i = b.start + team.rank(); i < b.end; i += team.size()) {
      z.Set(i, StartEntry(row, i));
    }
    team.Sync();
    for (int iteration = 0; iteration < kClusterIterations; ++iteration) {
      Orthonormalize<Real>(team, b, z, earlier, row - first);
      if (team.rank() == 0) {
        ShiftedSolve(d, e, b, {lambda[row] * b.scale, 0.0}, floor, z, pivots, partial);
      }
      team.Sync();
    }
    Orthonormalize<Real>(team, b, z, earlier, row - first);
  }
}

// A team of one: the CPU entry's.
struct SerialTeam {
  int64_t rank() const { return 0; }
  int64_t size() const { return 1; }
  void Sync() const {}
  double Sum(double partial) const { return partial; }
};

}  // namespace jaxsolve::dense::tridiagonal

#endif  // JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_H_
