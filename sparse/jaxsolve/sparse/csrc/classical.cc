// The host setup of classical (Ruge-Stuben) AMG: strength, C/F splittings,
// the index plans of the interpolations and their weights for concrete
// values. C functions of libjaxsolve_sparse.so, called through ctypes on NumPy
// arrays by jaxsolve/sparse/_classical_kernels.py, which checks them.
//
// A is n x n CSR (int32 row pointers and columns, each row's columns sorted and
// its diagonal stored); its values are float32, float64, complex64 or
// complex128 (dtype 0 to 3), and every formula below is evaluated in the
// values' precision with NumPy's operation order (sums accumulated in double),
// so the host setup agrees bit for bit with the NumPy expressions it replaced.
// S is the strength graph: row i lists the j that i strongly depends on
// (j != i); S^T lists, for each i, the points that depend on i.
//
//   JaxsolveSparseClassicalStrength: the strong entries of A (see
//     StrengthRows below).
//   JaxsolveSparseClassicalSplitting, method 0 (PMIS): the maximal independent
//     set of S + S^T that the rounds of De Sterck, Yang and Heys' parallel
//     PMIS reach with the weights w_i = |S^T_i| + u_i (u_i in [0, 1), a fixed
//     hash of i), which is the set a greedy pass in decreasing weight takes
//     (computed in rounds, over the cores). Its
//     points are C, every other point F; a point without strong couplings is
//     F (no interpolation: its row is smoothed only).
//     Method 1 (HMIS on one process, where no processor boundaries are left
//     for its PMIS part): Ruge-Stuben's first pass. The undecided point of
//     largest lambda_i = |S^T_i ∩ U| + 2 |S^T_i ∩ F| becomes C, the undecided
//     points that depend on it F, and the lambdas are updated; ties go to the
//     point longest at its lambda (the smallest index among the initial
//     ones). Every F point with a strong dependency depends on a C
//     point.
//     Method 2 (PMIS in color, Alber and Olson's PMIS-c): PMIS whose weights'
//     fractions come from a coloring, w_i = |S^T_i| + (m - 1 - c_i + u_i) / m,
//     where c_i is the color of i in the first-fit coloring of S + S^T in index
//     order (m colors). Color 0 is the independent set a greedy pass in index
//     order takes, and among points of equal |S^T_i| its points rank first: on
//     a structured grid the C points form Ruge-Stuben's regular pattern (every
//     other point of a 5- or 7-point stencil) instead of random PMIS's
//     sparser, irregular one, while the rounds stay parallel.
//     With `aggressive`, the same method runs twice (Stuben's A2 aggressive
//     coarsening, hypre's agg_num_levels with num_paths = 1): once on S, then
//     on S2, the graph of the first pass's C points in which i depends on j
//     when a path of S of length one, or two through an F point, leads from i
//     to j. The second pass's C points are C; a first-pass C point without S2
//     couplings stays C.
//   JaxsolveSparseInterpolationPlan: for a splitting, the pattern of the
//     interpolation P and where each value of A enters its weights (see
//     InterpolationPlan below); D1 (Ruge-Stuben's modified classical
//     interpolation) or D2 (extended+i, De Sterck, Falgout, Nolting and Yang
//     2008). JaxsolveSparseInterpolationValues evaluates its weights for
//     concrete values; JaxsolveSparseTruncation chooses the weights that
//     truncation keeps.
//   JaxsolveSparseMultipassPlan: the plan of multipass interpolation (see
//     MultipassPlan below), aggressive coarsening's.
//
// Strength, plans, values and truncation are split over the machine's cores
// by blocks of rows (row_blocks.h), and so are PMIS's rounds; HMIS's first
// pass and PMIS-c's coloring are sequential, O(n + nnz(S)). The plans cost
// O(sum over F points of the entries of their strong F neighbours' rows).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "csr_transpose.h"
#include "export.h"
#include "host_dtypes.h"
#include "interpolation_weights.h"
#include "row_blocks.h"
#include "spmv.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::Complex;
using ::jaxsolve::sparse::Conj;
using ::jaxsolve::sparse::Divided;
using ::jaxsolve::sparse::FromReal;
using ::jaxsolve::sparse::FromSum;
using ::jaxsolve::sparse::InterpolationRow;
using ::jaxsolve::sparse::InterpolationWeights;
using ::jaxsolve::sparse::IsZero;
using ::jaxsolve::sparse::Negated;
using ::jaxsolve::sparse::Nowhere;
using ::jaxsolve::sparse::RealPart;
using ::jaxsolve::sparse::Scalar;
using ::jaxsolve::sparse::ToDiagonal;
using ::jaxsolve::sparse::ToSum;
using ::jaxsolve::sparse::TransposePattern;
using ::jaxsolve::sparse::TruncatedRow;
using ::jaxsolve::sparse::ForNumberedBlocks;
using ::jaxsolve::sparse::ForRowBlocks;
using ::jaxsolve::sparse::WithValueType;

constexpr int32_t kUndecided = -1;
constexpr int32_t kFine = 0;
constexpr int32_t kCoarse = 1;

// The splitting methods of JaxsolveSparseClassicalSplitting other than PMIS (0).
constexpr int32_t kHmis = 1;
constexpr int32_t kPmisInColor = 2;

// Rows fewer than this are not worth a thread of their own.
constexpr int64_t kMinRowsPerThread = 8192;

// The blocks of rows of a kernel whose work grows with the rows' entries
// (indptr[n] of them): coarse levels are few rows of many entries each.
inline int64_t BlocksForEntries(int32_t n, const int32_t* indptr) {
  return BlocksFor(indptr[n], 8 * kMinRowsPerThread);
}

template <typename R>
R Magnitude(R x) { return std::abs(x); }
template <typename R>
R Magnitude(Complex<R> x) { return std::hypot(x.re, x.im); }

// The diagonal entry of row i (a zero if none is stored).
template <typename T>
T Diagonal(int32_t i, const int32_t* indptr, const int32_t* indices,
           const T* values) {
  T d{};
  for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
    if (indices[e] == i) d = values[e];
  }
  return d;
}

// ---------------------------------------------------------------------------
// Strength: i strongly depends on j != i when c_ij = -Re(a_ij conj(a_ii)) /
// |a_ii| >= theta max_{k != i} c_ik > 0, unless |sum_j a_ij| > max_row_sum
// |a_ii| (then on nothing); with `all`, on every j with a_ij != 0.
template <typename T>
void StrengthRows(int64_t begin, int64_t end, const int32_t* indptr,
                  const int32_t* indices, const T* values, double theta,
                  double max_row_sum, bool all, uint8_t* strong) {
  using R = typename Scalar<T>::Real;
  for (int32_t i = static_cast<int32_t>(begin); i < end; ++i) {
    const int32_t first = indptr[i], last = indptr[i + 1];
    if (all) {
      for (int32_t e = first; e < last; ++e) {
        strong[e] = indices[e] != i && !IsZero(values[e]);
      }
      continue;
    }
    const T d = Diagonal(i, indptr, indices, values);
    const R magnitude = Magnitude(d);
    const T phase = magnitude > 0 ? Divided(Conj(d), FromReal<T>(magnitude))
                                  : FromReal<T>(1);
    R largest = -std::numeric_limits<R>::infinity();
    T row_sum{};
    for (int32_t e = first; e < last; ++e) {
      row_sum = row_sum + values[e];
      if (indices[e] != i) {
        largest = std::max(largest, -RealPart(values[e] * phase));
      }
    }
    const R threshold = static_cast<R>(theta) * largest;
    const bool dependent = largest > 0 && Magnitude(row_sum) <=
                                              static_cast<R>(max_row_sum) * magnitude;
    for (int32_t e = first; e < last; ++e) {
      const R coupling = -RealPart(values[e] * phase);
      strong[e] = dependent && indices[e] != i && coupling > 0 &&
                  coupling >= threshold;
    }
  }
}

// ---------------------------------------------------------------------------
// Splittings

// A fixed pseudo-random number in [0, 1) for node i (splitmix64).
double Unit(uint64_t i) {
  uint64_t z = i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

// std::allocator, except that an element constructed without a value is left
// uninitialized: a vector of integers sized with it is not zeroed, on one
// core, before the threads that fill it touch it.
template <typename T>
struct Uninitialized : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = Uninitialized<U>;
  };
  Uninitialized() = default;
  template <typename U>
  Uninitialized(const Uninitialized<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <typename T>
using FilledLater = std::vector<T, Uninitialized<T>>;

// Calls f(i) for each i in [0, n), over the cores; f must not throw.
template <typename F>
void ForEachPoint(int64_t n, F f) {
  ForRowBlocks(n, BlocksFor(n, kMinRowsPerThread), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(static_cast<int32_t>(i));
  });
}

// Copies `from` into `to` over the cores.
template <typename Vector, typename T>
void ParallelCopy(const Vector& from, T* to) {
  const int64_t count = static_cast<int64_t>(from.size());
  ForRowBlocks(count, BlocksFor(count, int64_t{1} << 18),  // nothing here throws
               [&](int64_t begin, int64_t end) {
                 std::copy(from.data() + begin, from.data() + end, to + begin);
               });
}

// Sets to[0..count) to `value` over the cores.
template <typename T>
void ParallelFill(T* to, int64_t count, const T& value) {
  ForRowBlocks(count, BlocksFor(count, int64_t{1} << 18),  // nothing here throws
               [&](int64_t begin, int64_t end) { std::fill(to + begin, to + end, value); });
}

// How a graph gets its transpose's rows: sorted from its own by a counting
// sort; its own rows, for a symmetric graph whose rows are read as sets of
// neighbours; or its own rows if they strictly increase and the graph is
// found symmetric (then they are the transpose's rows exactly: a repeated
// column would be a repeated row in the transpose), else sorted.
enum class Transpose { kSorted, kSelf, kSelfIfSymmetric };

// A directed graph in CSR, with its transpose (t_indptr, t_indices), which is
// the graph itself when `symmetric`. Not copied or moved: the transpose may
// point into the graph's own arrays.
struct Graph {
  int32_t n;
  FilledLater<int64_t> indptr;
  FilledLater<int32_t> indices;
  bool symmetric;
  FilledLater<int64_t> transpose_indptr;  // empty when symmetric
  FilledLater<int32_t> transpose_indices;
  const int64_t* t_indptr;
  const int32_t* t_indices;

  Graph(int32_t n_, FilledLater<int64_t> indptr_, FilledLater<int32_t> indices_,
        Transpose transpose)
      : n(n_), indptr(std::move(indptr_)), indices(std::move(indices_)) {
    symmetric = transpose == Transpose::kSelf ||
                (transpose == Transpose::kSelfIfSymmetric && SortedAndSymmetric());
    if (!symmetric) {
      transpose_indptr.resize(static_cast<size_t>(n) + 1);
      transpose_indices.resize(indices.size());
      TransposePattern<int64_t>(n, n, indptr.data(), indices.data(),
                                transpose_indptr.data(), transpose_indices.data(), nullptr);
    }
    t_indptr = symmetric ? indptr.data() : transpose_indptr.data();
    t_indices = symmetric ? indices.data() : transpose_indices.data();
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  bool Coupled(int32_t i) const {
    return indptr[i + 1] > indptr[i] || t_indptr[i + 1] > t_indptr[i];
  }
  // Calls f(j) for the neighbours j of i in the graph or its transpose (once
  // each when symmetric), until f returns true; returns whether it did.
  template <typename F>
  bool AnyNeighbour(int32_t i, F f) const {
    for (int64_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      if (f(indices[e])) return true;
    }
    if (symmetric) return false;
    for (int64_t e = t_indptr[i]; e < t_indptr[i + 1]; ++e) {
      if (f(t_indices[e])) return true;
    }
    return false;
  }

 private:
  // Whether every row strictly increases and j in row i means i in row j,
  // over the cores.
  bool SortedAndSymmetric() const {
    std::atomic<bool> yes{true};
    ForRowBlocks(n, BlocksFor(n, kMinRowsPerThread), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end && yes; ++i) {
        const int32_t* first = indices.data() + indptr[i];
        const int32_t* last = indices.data() + indptr[i + 1];
        if (std::adjacent_find(first, last, std::greater_equal<int32_t>()) != last) {
          yes = false;
        }
        for (const int32_t* j = first; j < last && yes; ++j) {
          if (!std::binary_search(indices.data() + indptr[*j], indices.data() + indptr[*j + 1],
                                  static_cast<int32_t>(i))) {
            yes = false;
          }
        }
      }
    });
    return yes;
  }
};

// The first-fit coloring of the undecided points of S + S^T in index order:
// each takes the smallest color that no undecided neighbour before it has.
// Other points get -1. `colors` receives the number of colors.
std::vector<int32_t> FirstFitColors(const Graph& g, const int32_t* state, int32_t* colors) {
  std::vector<int32_t> color(g.n, -1);
  std::vector<int32_t> blocked_for;  // per color, the last point a neighbour blocked it for
  for (int32_t i = 0; i < g.n; ++i) {
    if (state[i] != kUndecided) continue;
    g.AnyNeighbour(i, [&](int32_t j) {
      if (color[j] >= 0) blocked_for[color[j]] = i;
      return false;
    });
    int32_t c = 0;
    while (c < static_cast<int32_t>(blocked_for.size()) && blocked_for[c] == i) ++c;
    if (c == static_cast<int32_t>(blocked_for.size())) blocked_for.push_back(-1);
    color[i] = c;
  }
  *colors = static_cast<int32_t>(blocked_for.size());
  return color;
}

// Rounds of De Sterck, Yang and Heys' PMIS with fixed weights, over the cores:
// the undecided points that outrank every undecided neighbour (in S or S^T)
// become C, then the undecided neighbours of C points F, until no point is
// undecided. With weights that never change, this is the maximal independent
// set that a greedy pass in rank order takes (a point is taken unless a
// higher-ranked neighbour was), whatever the number of threads.
//
// `colored`: PMIS-c's weights (see the top of this file) instead of PMIS's.
void Pmis(const Graph& g, bool colored, int32_t* state) {
  const int32_t n = g.n;
  int32_t colors = 0;
  const std::vector<int32_t> color =
      colored ? FirstFitColors(g, state, &colors) : std::vector<int32_t>();
  // Rank: larger weight first, then smaller index.
  FilledLater<double> weight(n);
  ForEachPoint(n, [&](int32_t i) {
    double fraction = Unit(i);
    if (colored && color[i] >= 0) fraction = (colors - 1 - color[i] + fraction) / colors;
    weight[i] = static_cast<double>(g.t_indptr[i + 1] - g.t_indptr[i]) + fraction;
  });
  const auto outranks = [&](int32_t i, int32_t j) {
    return weight[i] > weight[j] || (weight[i] == weight[j] && i < j);
  };
  const int64_t blocks = BlocksFor(n, kMinRowsPerThread);
  // Each phase reads `current` and writes `next` (no point reads what another
  // thread writes), then they swap.
  FilledLater<int32_t> current(n), next(n);  // each phase writes all of `next`
  ForEachPoint(n, [&](int32_t i) { current[i] = state[i]; });
  std::atomic<bool> undecided_left{true};
  const auto phase = [&](auto decide) {
    undecided_left = false;
    ForRowBlocks(n, blocks, [&](int64_t begin, int64_t end) {  // nothing here throws
      bool left = false;
      for (int64_t i = begin; i < end; ++i) {
        next[i] = current[i] == kUndecided ? decide(static_cast<int32_t>(i)) : current[i];
        left = left || next[i] == kUndecided;
      }
      if (left) undecided_left = true;
    });
    current.swap(next);
  };
  while (undecided_left) {
    phase([&](int32_t i) {
      return g.AnyNeighbour(i, [&](int32_t j) {
               return current[j] == kUndecided && outranks(j, i);
             }) ? kUndecided : kCoarse;
    });
    phase([&](int32_t i) {
      return g.AnyNeighbour(i, [&](int32_t j) { return current[j] == kCoarse; }) ? kFine
                                                                                : kUndecided;
    });
  }
  ForEachPoint(n, [&](int32_t i) { state[i] = current[i]; });
}

// The undecided points by lambda, in buckets: a doubly linked list a bucket,
// nodes appended at the tail and taken from the head, so that a point moves
// between buckets in O(1) and ties go to the point that entered its bucket
// first (at the start, the smallest index).
class LambdaBuckets {
 public:
  LambdaBuckets(int32_t n, int32_t max_lambda)
      : head_(max_lambda + 1, -1), tail_(max_lambda + 1, -1), nodes_(n) {}

  int32_t lambda(int32_t i) const { return nodes_[i].lambda; }
  void Insert(int32_t i, int32_t lambda) {
    Node& node = nodes_[i];
    node = {-1, tail_[lambda], lambda};
    (node.previous >= 0 ? nodes_[node.previous].next : head_[lambda]) = i;
    tail_[lambda] = i;
    top_ = std::max(top_, lambda);
  }
  void Remove(int32_t i) {
    const Node& node = nodes_[i];
    (node.previous >= 0 ? nodes_[node.previous].next : head_[node.lambda]) = node.next;
    (node.next >= 0 ? nodes_[node.next].previous : tail_[node.lambda]) = node.previous;
  }
  // The first point of the highest non-empty bucket, or -1 when none is left.
  int32_t Top() {
    while (top_ >= 0 && head_[top_] < 0) --top_;
    return top_ >= 0 ? head_[top_] : -1;
  }

 private:
  struct Node {  // together, so that a change touches one cache line a point
    int32_t next, previous, lambda;
  };
  std::vector<int32_t> head_, tail_;
  std::vector<Node> nodes_;
  int32_t top_ = -1;
};

// lambda_i starts at |S^T_i| (every point undecided) and never leaves
// [0, 2 |S^T_i|]: a dependent point that turns F adds one, one that turns C
// takes one away. Each change is O(1), so the pass is O(n + nnz(S)).
void RugeStubenFirstPass(const Graph& g, int32_t* state) {
  int64_t max_lambda = 0;
  for (int32_t i = 0; i < g.n; ++i) {
    max_lambda = std::max(max_lambda, 2 * (g.t_indptr[i + 1] - g.t_indptr[i]));
  }
  // Past int32: a point with over 2^30 dependents, a graph no memory holds.
  if (max_lambda > std::numeric_limits<int32_t>::max()) throw std::bad_alloc();
  LambdaBuckets buckets(g.n, static_cast<int32_t>(max_lambda));
  for (int32_t i = 0; i < g.n; ++i) {
    if (state[i] == kUndecided) {
      buckets.Insert(i, static_cast<int32_t>(g.t_indptr[i + 1] - g.t_indptr[i]));
    }
  }
  const auto change = [&](int32_t k, int32_t by) {
    if (state[k] != kUndecided) return;
    buckets.Remove(k);
    buckets.Insert(k, buckets.lambda(k) + by);
  };
  for (int32_t i = buckets.Top(); i >= 0; i = buckets.Top()) {
    buckets.Remove(i);
    state[i] = kCoarse;
    for (int64_t e = g.t_indptr[i]; e < g.t_indptr[i + 1]; ++e) {
      const int32_t j = g.t_indices[e];  // j depends on i
      if (state[j] != kUndecided) continue;
      buckets.Remove(j);
      state[j] = kFine;
      for (int64_t f = g.indptr[j]; f < g.indptr[j + 1]; ++f) {
        change(g.indices[f], 1);
      }
    }
    for (int64_t e = g.indptr[i]; e < g.indptr[i + 1]; ++e) {
      change(g.indices[e], -1);
    }
  }
}

// Splits the points whose state is kUndecided.
void Split(const Graph& g, int32_t method, int32_t* state) {
  if (method == kHmis) {
    RugeStubenFirstPass(g, state);
  } else {
    Pmis(g, /*colored=*/method == kPmisInColor, state);
  }
}

// Runs body(begin, end, part) on blocks of [0, count) over the cores, each
// block filling a Part of its own; returns the parts in the blocks' order.
template <typename Part, typename Body>
std::vector<Part> BlockParts(int64_t count, Body body) {
  const int64_t blocks = BlocksFor(count, kMinRowsPerThread);
  std::vector<Part> parts(blocks);
  if (!ForNumberedBlocks(count, blocks, [&](int64_t b, int64_t begin, int64_t end) {
        body(begin, end, parts[b]);
      })) {
    throw std::bad_alloc();  // the one exception the bodies raise
  }
  return parts;
}

// Rows of a graph or of P found by blocks (BlockParts): each block's row
// lengths and their columns, one row after the other.
struct GraphRows {
  std::vector<int32_t> lengths, indices;
};

// The graph of n rows whose rows are the parts' rows, in order; the parts are
// copied into place over the cores.
Graph JoinedGraph(int32_t n, const std::vector<GraphRows>& parts, Transpose transpose) {
  std::vector<int64_t> first_row(parts.size() + 1, 0), first_entry(parts.size() + 1, 0);
  for (size_t p = 0; p < parts.size(); ++p) {
    first_row[p + 1] = first_row[p] + static_cast<int64_t>(parts[p].lengths.size());
    first_entry[p + 1] = first_entry[p] + static_cast<int64_t>(parts[p].indices.size());
  }
  FilledLater<int64_t> indptr(static_cast<size_t>(n) + 1);
  FilledLater<int32_t> indices(first_entry.back());
  indptr[0] = 0;
  ForNumberedBlocks(static_cast<int64_t>(parts.size()), static_cast<int64_t>(parts.size()),
                    [&](int64_t p, int64_t, int64_t) {  // nothing here throws
                      int64_t at = first_entry[p];
                      for (size_t r = 0; r < parts[p].lengths.size(); ++r) {
                        at += parts[p].lengths[r];
                        indptr[first_row[p] + static_cast<int64_t>(r) + 1] = at;
                      }
                      std::copy(parts[p].indices.begin(), parts[p].indices.end(),
                                indices.begin() + first_entry[p]);
                    });
  return Graph(n, std::move(indptr), std::move(indices), transpose);
}

// S: row i lists the j != i of its strong entries (strong[e] != 0), in A's
// column order; its own transpose when symmetric with sorted rows.
Graph StrengthGraph(int32_t n, const int32_t* indptr, const int32_t* indices,
                    const uint8_t* strong) {
  return JoinedGraph(n, BlockParts<GraphRows>(n, [&](int64_t begin, int64_t end,
                                                     GraphRows& rows) {
    rows.lengths.reserve(end - begin);
    rows.indices.reserve(indptr[end] - indptr[begin]);
    for (int64_t i = begin; i < end; ++i) {
      const size_t before = rows.indices.size();
      for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        if (strong[e] && indices[e] != i) rows.indices.push_back(indices[e]);
      }
      rows.lengths.push_back(static_cast<int32_t>(rows.indices.size() - before));
    }
  }), Transpose::kSelfIfSymmetric);
}

// S2 of the C points of `state`: i depends on j (both C, j != i) when j is in
// S_i, or in S_k for an F point k in S_i; each row in the order its points
// are first met. When S is symmetric so is S2 (the paths i-j and i-k-j run
// back from j to i), and where its rows are read as sets (`as_sets`: PMIS)
// S2 is its own transpose.
Graph DistanceTwo(const Graph& s, const int32_t* state, bool as_sets) {
  return JoinedGraph(s.n, BlockParts<GraphRows>(s.n, [&](int64_t begin, int64_t end,
                                                         GraphRows& rows) {
    std::vector<int32_t> seen(s.n, -1);
    int64_t most = 0;  // the block's candidates, at most its rows' entries
    for (int64_t i = begin; i < end; ++i) {
      if (state[i] != kCoarse) continue;
      for (int64_t e = s.indptr[i]; e < s.indptr[i + 1]; ++e) {
        const int32_t k = s.indices[e];
        most += 1 + (state[k] == kFine ? s.indptr[k + 1] - s.indptr[k] : 0);
      }
    }
    rows.lengths.reserve(end - begin);
    rows.indices.reserve(most);  // address space: only the entries written take memory
    const auto add = [&](int32_t i, int32_t j) {
      if (j != i && state[j] == kCoarse && seen[j] != i) {
        seen[j] = i;
        rows.indices.push_back(j);
      }
    };
    for (int64_t row = begin; row < end; ++row) {
      const int32_t i = static_cast<int32_t>(row);
      const size_t before = rows.indices.size();
      if (state[i] == kCoarse) {
        for (int64_t e = s.indptr[i]; e < s.indptr[i + 1]; ++e) {
          const int32_t k = s.indices[e];
          add(i, k);
          if (state[k] != kFine) continue;
          for (int64_t f = s.indptr[k]; f < s.indptr[k + 1]; ++f) {
            add(i, s.indices[f]);
          }
        }
      }
      rows.lengths.push_back(static_cast<int32_t>(rows.indices.size() - before));
    }
  }), s.symmetric && as_sets ? Transpose::kSelf : Transpose::kSorted);
}

// ---------------------------------------------------------------------------
// The D1/D2 interpolation plan.
//
// Where the values of A enter the interpolation weights of P (n x n_coarse).
// For an F point i, with C_i (its interpolatory C points: P's columns in row
// i) and F_i (its strong F neighbours whose couplings are distributed):
//
//   w_ij = -(a_ij + sum_{k in F_i} a_ik abar_kj / s_ik) / d_i,  j in C_i
//   s_ik = sum_{l in C_i (+ i for D2)} abar_kl
//   d_i  = sum of the other entries of row i (the diagonal, weak couplings not
//          in C_i, and for D1 strong F couplings without a common C point)
//          + (D2) sum_{k in F_i} a_ik abar_ki / s_ik
//
// with abar_kl = a_kl where its sign is opposite to a_kk's, else 0; a
// coupling with s_ik = 0 joins d_i. Encoded by offsets within rows (as
// interpolation_weights.h reads them; the copy narrows them to its type):
//   a_targets[e]: where entry e of A adds: the offset of its column in row i
//     of P (>= 0), kToDiagonal for row i's d_i, kNowhere for nowhere (C rows,
//     distributed couplings);
//   pair_indptr: each row's first pair; pair_offsets[q]: the offset in row i
//     of A of the q-th distributed coupling a_ik; pair_counts[q]: its number
//     of triples;
//   triple_indptr: each row's first triple; triple_offsets[t],
//     triple_targets[t]: the offset of the entry a_kl in row k and where
//     abar_kl · a_ik / s_ik adds (encoded as a_targets).
// Rows come in order, and within a row the pairs and triples in the order of
// A's entries.
struct InterpolationPlan {
  static constexpr int32_t kNowhere = -1, kToDiagonal = -2;
  std::vector<int32_t> p_indptr, p_indices, a_targets, pair_indptr, pair_offsets,
      pair_counts, triple_indptr, triple_offsets, triple_targets;
};

// Rows [begin, end) of the plan; the row pointers count from the block's
// first row (each has end - begin + 1 entries); a_targets covers the block's
// entries of A.
void BuildPlanRows(int32_t begin, int32_t end, int32_t n, const int32_t* indptr,
                   const int32_t* indices, const uint8_t* strong,
                   const int32_t* coarse_index, bool distance_two,
                   InterpolationPlan& plan) {
  constexpr int32_t kNowhere = InterpolationPlan::kNowhere;
  constexpr int32_t kToDiagonal = InterpolationPlan::kToDiagonal;
  const int32_t entries = indptr[end] - indptr[begin];
  const size_t rows = static_cast<size_t>(end - begin) + 1;
  plan.p_indptr.assign(rows, 0);
  plan.pair_indptr.assign(rows, 0);
  plan.triple_indptr.assign(rows, 0);
  plan.a_targets.assign(entries, kNowhere);
  // About right for stencils (P: a few weights a row; triples: about nnz(A)).
  plan.p_indices.reserve(entries);
  plan.triple_offsets.reserve(entries);
  plan.triple_targets.reserve(entries);
  int32_t* a_targets = plan.a_targets.data() - indptr[begin];
  // position[j]: j's offset in the row of P being built (-1: not in it);
  // common[j]: the row i for which j is a strong C point of i (D2: or one of
  // its strong F neighbours', so that each is listed once).
  std::vector<int32_t> position(n, -1), common(n, -1), columns, pairs;
  for (int32_t i = begin; i < end; ++i) {
    const size_t r = static_cast<size_t>(i - begin) + 1;
    plan.pair_indptr[r] = static_cast<int32_t>(plan.pair_offsets.size());
    plan.triple_indptr[r] = static_cast<int32_t>(plan.triple_offsets.size());
    if (coarse_index[i] >= 0) {
      plan.p_indices.push_back(coarse_index[i]);
      plan.p_indptr[r] = static_cast<int32_t>(plan.p_indices.size());
      continue;
    }
    columns.clear();
    pairs.clear();
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const int32_t j = indices[e];
      if (j != i && strong[e] && coarse_index[j] >= 0 && common[j] != i) {
        columns.push_back(j);
        common[j] = i;
      }
    }
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const int32_t k = indices[e];
      if (k == i || !strong[e] || coarse_index[k] >= 0) continue;
      bool distributed = distance_two;
      for (int32_t f = indptr[k]; f < indptr[k + 1]; ++f) {
        const int32_t l = indices[f];
        if (!strong[f] || coarse_index[l] < 0 || l == k) continue;
        if (distance_two) {
          if (common[l] != i) {
            common[l] = i;
            columns.push_back(l);
          }
        } else if (common[l] == i) {
          distributed = true;
        }
      }
      if (distributed) pairs.push_back(e);
    }
    std::sort(columns.begin(), columns.end());  // each listed once
    for (size_t c = 0; c < columns.size(); ++c) {
      position[columns[c]] = static_cast<int32_t>(c);
      plan.p_indices.push_back(coarse_index[columns[c]]);
    }
    plan.p_indptr[r] = static_cast<int32_t>(plan.p_indices.size());
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const int32_t j = indices[e];
      a_targets[e] = j != i && position[j] >= 0 ? position[j] : kToDiagonal;
    }
    for (int32_t e : pairs) {
      a_targets[e] = kNowhere;
      const int32_t k = indices[e];
      int32_t count = 0;
      for (int32_t f = indptr[k]; f < indptr[k + 1]; ++f) {
        const int32_t l = indices[f];
        const int32_t target = l == i ? (distance_two ? kToDiagonal : kNowhere) : position[l];
        if (target == kNowhere) continue;
        plan.triple_offsets.push_back(f - indptr[k]);
        plan.triple_targets.push_back(target);
        ++count;
      }
      plan.pair_offsets.push_back(e - indptr[i]);
      plan.pair_counts.push_back(count);
    }
    plan.pair_indptr[r] = static_cast<int32_t>(plan.pair_offsets.size());
    plan.triple_indptr[r] = static_cast<int32_t>(plan.triple_offsets.size());
    for (int32_t j : columns) position[j] = -1;
  }
}

// A plan built by blocks of rows, joined when copied out.
struct BlockedPlan {
  int32_t n;
  std::vector<int32_t> block_begin;  // each block's first row, then n
  std::vector<InterpolationPlan> blocks;
};

// Rows [begin, end) of truncation's choice: in each row, the weights of at
// least `factor` times the row's largest magnitude (for factor in (0, 1)),
// of those the `most` largest (for most > 0; ties: the earlier).
template <typename T>
void TruncationRows(int32_t begin, int32_t end, const int32_t* indptr, const T* weights,
                    double factor, int32_t most, uint8_t* kept) {
  using R = typename Scalar<T>::Real;
  std::vector<R> magnitude;
  std::vector<int32_t> order;
  for (int32_t i = begin; i < end; ++i) {
    const int32_t first = indptr[i], length = indptr[i + 1] - first;
    magnitude.resize(length);
    R largest = -std::numeric_limits<R>::infinity();
    for (int32_t c = 0; c < length; ++c) {
      magnitude[c] = Magnitude(weights[first + c]);
      largest = std::max(largest, magnitude[c]);
    }
    const bool by_factor = 0 < factor && factor < 1;
    order.clear();
    for (int32_t c = 0; c < length; ++c) {
      kept[first + c] = !by_factor || magnitude[c] >= static_cast<R>(factor) * largest;
      if (kept[first + c]) order.push_back(c);
    }
    if (most <= 0 || static_cast<int32_t>(order.size()) <= most) continue;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return magnitude[a] > magnitude[b]; });
    for (size_t r = most; r < order.size(); ++r) kept[first + order[r]] = 0;
  }
}

// ---------------------------------------------------------------------------
// Multipass interpolation (Stuben, "Algebraic multigrid (AMG): an
// introduction with applications", GMD report 70, 1999, A.4.3; hypre's
// agg_interp_type 4, AmgX's MULTIPASS). Pass 0 are the C points (P's row: the
// unit row of their coarse unknown). An F point is in pass m when it is not in
// an earlier one and a point of pass m - 1 is in S_i; its interpolatory set
// P_i holds the points of S_i of passes below m, and
//
//   P_i = sum_{k in P_i} c_ik P_k,  c_ik = -alpha_i a_ik / a_ii,
//   alpha_i = (sum_{j != i} a_ij) / (sum_{k in P_i} a_ik)
//
// (for each sign of a_ik apart; jaxsolve/sparse/_classical.py computes the
// c_ik). F points that no pass reaches get no interpolation. Encoded, per
// pass m = 1, 2, ... in turn: triples (e, s, t): entry e = a_ik of A times
// P's entry s (of row k) adds into P's entry t (of row i); `interpolatory`
// marks the entries a_ik, k in P_i.
//
// The plan holds each point's row of P where it was built (a C point's in
// `units`, an F point's in its pass's part) and counts the triples; the copy
// writes P and the triples straight into the caller's arrays, over the
// cores.
// Rows of P stored one after the other in chunks that never move, so that a
// row's address stays valid as more are added: a growing vector would copy
// them, and on several cores its reallocations contend for the process's
// address space (measured: 2 cores, 128^3, the plan 82 -> 67 ms).
class RowStore {
 public:
  // A copy of [first, first + length), in one piece.
  const int32_t* Append(const int32_t* first, int64_t length) {
    if (used_ + length > capacity_) {
      capacity_ = std::max(length, kChunk);
      chunks_.emplace_back(new int32_t[capacity_]);  // not zeroed: filled here
      used_ = 0;
    }
    int32_t* row = chunks_.back().get() + used_;
    std::copy(first, first + length, row);
    used_ += length;
    return row;
  }

 private:
  static constexpr int64_t kChunk = int64_t{1} << 18;
  std::vector<std::unique_ptr<int32_t[]>> chunks_;
  int64_t used_ = 0, capacity_ = 0;
};
struct PassPart {  // the points of a pass that one block of rows found
  std::vector<int32_t> points;
  RowStore rows;                           // their rows of P
  int64_t triples = 0, first_triple = 0;  // their count, the first's place
};
struct MultipassPlan {
  int32_t n = 0;
  const int32_t* indptr = nullptr;  // A's pattern, the caller's (not copied)
  const int32_t* indices = nullptr;
  FilledLater<int32_t> units;  // the C points' columns (their coarse index)
  FilledLater<const int32_t*> row_columns;
  FilledLater<int32_t> p_indptr;
  FilledLater<uint8_t> interpolatory;
  std::vector<std::vector<PassPart>> passes;
  std::vector<int32_t> pass_counts;
};

// Each pass is one sweep over the cores by blocks of rows (which points join
// it, their rows of P from the earlier passes' rows, their interpolatory
// entries and triple counts), then one over the blocks' parts (the points
// take their pass). A point's row is read only once it has a pass, so the
// sweep writes the rows of the points that join.
void BuildMultipass(int32_t n, const int32_t* indptr, const int32_t* indices,
                    const uint8_t* strong, const int32_t* coarse_index,
                    MultipassPlan& plan) {
  plan.n = n;
  plan.indptr = indptr;
  plan.indices = indices;
  plan.units.resize(n);
  plan.row_columns.resize(n);
  plan.interpolatory.resize(indptr[n]);
  FilledLater<int32_t> pass(n), row_length(n);
  ForEachPoint(n, [&](int32_t i) {
    const bool c = coarse_index[i] >= 0;
    pass[i] = c ? 0 : -1;
    row_length[i] = c ? 1 : 0;
    plan.units[i] = coarse_index[i];
    plan.row_columns[i] = plan.units.data() + i;
    std::fill(plan.interpolatory.begin() + indptr[i],
              plan.interpolatory.begin() + indptr[i + 1], uint8_t{0});
  });
  for (int32_t m = 1;; ++m) {
    // Only earlier passes' points have a pass while the rows are read.
    std::vector<PassPart> parts = BlockParts<PassPart>(
        n, [&](int64_t begin, int64_t end, PassPart& part) {
          std::vector<int32_t> row;
          part.points.reserve(end - begin);  // pages are touched as points join
          for (int64_t i = begin; i < end; ++i) {
            if (pass[i] >= 0) continue;
            bool joins = false;
            for (int32_t e = indptr[i]; e < indptr[i + 1] && !joins; ++e) {
              joins = strong[e] && indices[e] != i && pass[indices[e]] == m - 1;
            }
            if (!joins) continue;
            row.clear();
            for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
              const int32_t k = indices[e];
              if (!strong[e] || k == i || pass[k] < 0) continue;
              plan.interpolatory[e] = 1;
              part.triples += row_length[k];
              row.insert(row.end(), plan.row_columns[k], plan.row_columns[k] + row_length[k]);
            }
            std::sort(row.begin(), row.end());
            row.erase(std::unique(row.begin(), row.end()), row.end());
            part.points.push_back(static_cast<int32_t>(i));
            row_length[i] = static_cast<int32_t>(row.size());
            plan.row_columns[i] = part.rows.Append(row.data(), row_length[i]);
          }
        });
    int64_t count = 0;
    for (PassPart& part : parts) {
      part.first_triple = count;
      count += part.triples;
    }
    if (count == 0) break;  // a point that joins has a triple: no point joined
    // A pass of over 2^31 triples (a 24 GiB plan) is reported as out of memory.
    if (count > std::numeric_limits<int32_t>::max()) throw std::bad_alloc();
    plan.pass_counts.push_back(static_cast<int32_t>(count));
    ForNumberedBlocks(  // nothing here throws
        static_cast<int64_t>(parts.size()), static_cast<int64_t>(parts.size()),
        [&](int64_t p, int64_t, int64_t) {
          for (const int32_t i : parts[p].points) pass[i] = m;
        });
    plan.passes.push_back(std::move(parts));  // the parts' rows stay where they are
  }
  plan.p_indptr.resize(static_cast<size_t>(n) + 1);
  plan.p_indptr[0] = 0;
  for (int32_t i = 0; i < n; ++i) plan.p_indptr[i + 1] = plan.p_indptr[i] + row_length[i];
}

// Writes the triples of a pass's part into the pass's arrays (its first
// triple at entries[0]).
void WriteTriples(const MultipassPlan& plan, const PassPart& part, int32_t* entries,
                  int32_t* sources, int32_t* destinations) {
  const int32_t* p_indptr = plan.p_indptr.data();
  int64_t t = part.first_triple;
  for (const int32_t i : part.points) {
    const int32_t* first = plan.row_columns[i];
    const int32_t* last = first + (p_indptr[i + 1] - p_indptr[i]);
    for (int32_t e = plan.indptr[i]; e < plan.indptr[i + 1]; ++e) {
      if (!plan.interpolatory[e]) continue;
      const int32_t k = plan.indices[e];
      const int32_t* columns = plan.row_columns[k];
      for (int32_t s = p_indptr[k]; s < p_indptr[k + 1]; ++s, ++t) {
        entries[t] = e;
        sources[t] = s;
        destinations[t] = p_indptr[i] + static_cast<int32_t>(
            std::lower_bound(first, last, columns[s - p_indptr[k]]) - first);
      }
    }
  }
}

// Row i of multipass interpolation's coefficients c_e (zero off the
// interpolatory entries), to coefficients[e - indptr[i]], in _classical.py's
// _multipass_weights order: sums in double over the row's entries of the
// couplings of sign opposite to a_ii's (-) and of its sign (+), over all of
// them and over P_i, then
// c_ik = -(sum_{j != i} a_ij^-+) / (sum_{k in P_i} a_ik^-+) / a~_ii.
template <typename T>
void MultipassCoefficientRow(int32_t i, const int32_t* indptr, const int32_t* indices,
                             const T* values, const uint8_t* interpolatory,
                             T* coefficients) {
  using Sum = typename Scalar<T>::Sum;
  const T diagonal = Diagonal(i, indptr, indices, values);
  const auto opposite = [&](int32_t e) { return RealPart(values[e] * Conj(diagonal)) < 0; };
  Sum negative_all{}, positive_all{}, negative{}, positive{};
  for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
    const T a = values[e], p = interpolatory[e] ? a : T{};
    const bool minus = opposite(e);
    negative_all = negative_all + ToSum(minus ? a : T{});
    positive_all = positive_all + ToSum(minus ? T{} : a);
    negative = negative + ToSum(minus ? p : T{});
    positive = positive + ToSum(minus ? T{} : p);
  }
  const T off_positive = FromSum<T>(positive_all) - diagonal;
  const T lumped = diagonal + (IsZero(FromSum<T>(positive)) ? off_positive : T{});
  const auto ratio = [&](T numerator, T denominator) {
    if (IsZero(denominator) || IsZero(lumped)) return T{};
    return Divided(Divided(Negated(numerator), denominator), lumped);
  };
  const T scale_minus = ratio(FromSum<T>(negative_all), FromSum<T>(negative));
  const T scale_plus = ratio(off_positive, FromSum<T>(positive));
  for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
    coefficients[e - indptr[i]] =
        (interpolatory[e] ? values[e] : T{}) * (opposite(e) ? scale_minus : scale_plus);
  }
}

// The row of P (row pointers full_indptr, n rows) that weight t lies in.
inline int32_t RowOf(int32_t n, const int32_t* full_indptr, int32_t t) {
  return static_cast<int32_t>(std::upper_bound(full_indptr, full_indptr + n + 1, t) -
                              full_indptr - 1);
}

// Triples [begin, end) of one pass: weights[t] += sum over the triples (e, s,
// t), in order, of c_e weights[s], summed in double; a row's c_e are formed
// (in `coefficients`, the block's) when its first triple comes. `ready`
// marks the weights formed by earlier passes (the C points' and theirs). The
// triples must write rows of P in increasing order; the caller
// splits a pass where a row ends, so that blocks write disjoint weights.
// Returns the block's first and last rows of P, or {-1, -1} if a triple reads
// a weight that is not ready or an entry of A outside its row, writes out of
// P or goes back to an earlier row (or the block is empty).
template <typename T>
std::pair<int32_t, int32_t> MultipassTriples(
    int64_t begin, int64_t end, int32_t n, const int32_t* indptr, const int32_t* indices,
    const T* values, const uint8_t* interpolatory, const int32_t* full_indptr,
    const int32_t* triple_entries, const int32_t* triple_sources,
    const int32_t* triple_destinations, const uint8_t* ready, std::vector<T>& coefficients,
    typename Scalar<T>::Sum* sums, T* weights) {
  const int32_t full_nnz = full_indptr[n];
  int32_t first_row = -1, row = -1, row_end = 0;
  for (int64_t t = begin; t < end; ++t) {
    const int32_t source = triple_sources[t], destination = triple_destinations[t];
    if (source < 0 || source >= full_nnz || !ready[source] || destination < 0 ||
        destination >= full_nnz) {
      return {-1, -1};
    }
    if (destination >= row_end || destination < full_indptr[row]) {
      const int32_t next = RowOf(n, full_indptr, destination);
      if (next <= row) return {-1, -1};
      row = next;
      row_end = full_indptr[row + 1];
      if (first_row < 0) first_row = row;
      coefficients.resize(std::max<size_t>(coefficients.size(), indptr[row + 1] - indptr[row]));
      MultipassCoefficientRow(row, indptr, indices, values, interpolatory,
                              coefficients.data());
    }
    const int32_t e = triple_entries[t];
    if (e < indptr[row] || e >= indptr[row + 1]) return {-1, -1};
    sums[destination] = sums[destination] +
                        ToSum(coefficients[e - indptr[row]] * weights[source]);
  }
  for (int64_t t = begin; t < end; ++t) {
    const int32_t destination = triple_destinations[t];
    weights[destination] = weights[destination] + FromSum<T>(sums[destination]);
    sums[destination] = {};  // the destination's later triples add nothing more
  }
  return {first_row, row};
}

}  // namespace

// Marks the strong entries of the n x n matrix (indptr, indices, values of
// `dtype`) in strong[0..nnz); returns 0, -1 if out of memory, -2 for an
// unknown dtype.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseClassicalStrength(
    int32_t n, const int32_t* indptr, const int32_t* indices, const void* values,
    int32_t dtype, double theta, double max_row_sum, int32_t all, uint8_t* strong) {
  return WithValueType(dtype, [&](auto type) {
    using T = decltype(type);
    const bool done = ForRowBlocks(
        n, BlocksForEntries(n, indptr), [&](int64_t begin, int64_t end) {
          StrengthRows(begin, end, indptr, indices, static_cast<const T*>(values),
                       theta, max_row_sum, all != 0, strong);
        });
    return done ? 0 : -1;
  });
}

// Writes kCoarse (1) or kFine (0) to coarse[0..n) for the strength graph of
// the strong entries (strong[e] != 0, off the diagonal) of the n x n pattern
// (indptr, indices), aggressively (two passes) when `aggressive`; returns the
// number of C points, or -1 if memory ran out.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseClassicalSplitting(
    int32_t n, const int32_t* indptr, const int32_t* indices, const uint8_t* strong,
    int32_t method, int32_t aggressive, int32_t* coarse) {
  try {
    const Graph s = StrengthGraph(n, indptr, indices, strong);
    ForEachPoint(n, [&](int32_t i) { coarse[i] = s.Coupled(i) ? kUndecided : kFine; });
    Split(s, method, coarse);
    if (aggressive) {
      const Graph s2 = DistanceTwo(s, coarse, /*as_sets=*/method != kHmis);
      ForEachPoint(n, [&](int32_t i) {
        if (coarse[i] == kCoarse && s2.Coupled(i)) coarse[i] = kUndecided;
      });
      Split(s2, method, coarse);
    }
    std::atomic<int64_t> count{0};
    ForRowBlocks(n, BlocksFor(n, kMinRowsPerThread), [&](int64_t begin, int64_t end) {
      count += std::count(coarse + begin, coarse + end, kCoarse);
    });
    return static_cast<int32_t>(count);
  } catch (const std::bad_alloc&) {
    return -1;
  }
}

// Builds the plan for the n x n matrix pattern (indptr, indices) with strong
// entries marked, coarse_index[i] the coarse unknown of a C point (-1 for F);
// returns it (to be read with ...Sizes and ...Copy, then freed), or null if
// memory ran out.
JAXSOLVE_SPARSE_EXPORT void* JaxsolveSparseInterpolationPlan(
    int32_t n, const int32_t* indptr, const int32_t* indices, const uint8_t* strong,
    const int32_t* coarse_index, int32_t distance_two) {
  try {
    auto plan = std::make_unique<BlockedPlan>();
    const int64_t blocks = BlocksForEntries(n, indptr);
    plan->n = n;
    plan->blocks.resize(blocks);
    for (int64_t b = 0; b <= blocks; ++b) {
      plan->block_begin.push_back(static_cast<int32_t>(n * b / blocks));
    }
    const bool built = ForNumberedBlocks(n, blocks, [&](int64_t b, int64_t begin, int64_t end) {
      BuildPlanRows(static_cast<int32_t>(begin), static_cast<int32_t>(end), n, indptr,
                    indices, strong, coarse_index, distance_two != 0, plan->blocks[b]);
    });
    return built ? plan.release() : nullptr;
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

// The lengths of the plan's arrays, in the order of InterpolationPlan (every
// row pointer n + 1), then the longest row of P.
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseInterpolationSizes(const void* handle,
                                                            int64_t* sizes) {
  const auto& plan = *static_cast<const BlockedPlan*>(handle);
  std::fill(sizes, sizes + 10, 0);
  for (const InterpolationPlan& block : plan.blocks) {
    sizes[1] += static_cast<int64_t>(block.p_indices.size());
    sizes[2] += static_cast<int64_t>(block.a_targets.size());
    sizes[4] += static_cast<int64_t>(block.pair_offsets.size());
    sizes[7] += static_cast<int64_t>(block.triple_offsets.size());
    for (size_t r = 1; r < block.p_indptr.size(); ++r) {
      sizes[9] = std::max<int64_t>(sizes[9], block.p_indptr[r] - block.p_indptr[r - 1]);
    }
  }
  sizes[0] = sizes[3] = sizes[6] = static_cast<int64_t>(plan.n) + 1;
  sizes[5] = sizes[4];
  sizes[8] = sizes[7];
}

namespace {

// The offsets narrowed to O: kNowhere and kToDiagonal to Nowhere<O> and ToDiagonal<O>.
template <typename O>
O Narrowed(int32_t offset) {
  return offset == InterpolationPlan::kNowhere      ? Nowhere<O>
         : offset == InterpolationPlan::kToDiagonal ? ToDiagonal<O>
                                                    : static_cast<O>(offset);
}

// The plan's row pointers joined: each block's, from `shift[b]` on.
void JoinRowPointers(const BlockedPlan& plan, int64_t b,
                     const std::vector<int32_t>& block_indptr,
                     const std::vector<int64_t>& shift, int32_t* indptr) {
  for (size_t r = 1; r < block_indptr.size(); ++r) {
    indptr[plan.block_begin[b] + r] = block_indptr[r] + static_cast<int32_t>(shift[b]);
  }
}

}  // namespace

// Copies the plan's arrays into the caller's, sized as ...Sizes says, and
// frees the plan. The offsets and targets (a_targets, pair_offsets,
// pair_counts, triple_offsets, triple_targets) are written as unsigned
// integers of `offset_bytes` bytes (1, 2 or 4; wide enough for A's and P's
// longest rows, whose last two values are the targets' nowhere and d_i).
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseInterpolationCopy(
    void* handle, int32_t offset_bytes, int32_t* p_indptr, int32_t* p_indices,
    void* a_targets, int32_t* pair_indptr, void* pair_offsets, void* pair_counts,
    int32_t* triple_indptr, void* triple_offsets, void* triple_targets) {
  std::unique_ptr<BlockedPlan> plan(static_cast<BlockedPlan*>(handle));
  const int64_t blocks = static_cast<int64_t>(plan->blocks.size());
  // Each block's first P entry, A entry, pair and triple.
  std::vector<int64_t> p_first(blocks + 1, 0), a_first(blocks + 1, 0),
      pair_first(blocks + 1, 0), triple_first(blocks + 1, 0);
  for (int64_t b = 0; b < blocks; ++b) {
    const InterpolationPlan& block = plan->blocks[b];
    p_first[b + 1] = p_first[b] + static_cast<int64_t>(block.p_indices.size());
    a_first[b + 1] = a_first[b] + static_cast<int64_t>(block.a_targets.size());
    pair_first[b + 1] = pair_first[b] + static_cast<int64_t>(block.pair_offsets.size());
    triple_first[b + 1] = triple_first[b] + static_cast<int64_t>(block.triple_offsets.size());
  }
  p_indptr[0] = pair_indptr[0] = triple_indptr[0] = 0;
  const auto copy = [&](auto zero) {
    using O = decltype(zero);
    ForNumberedBlocks(plan->n, blocks, [&](int64_t b, int64_t, int64_t) {
      const InterpolationPlan& block = plan->blocks[b];
      JoinRowPointers(*plan, b, block.p_indptr, p_first, p_indptr);
      JoinRowPointers(*plan, b, block.pair_indptr, pair_first, pair_indptr);
      JoinRowPointers(*plan, b, block.triple_indptr, triple_first, triple_indptr);
      std::copy(block.p_indices.begin(), block.p_indices.end(), p_indices + p_first[b]);
      std::transform(block.a_targets.begin(), block.a_targets.end(),
                     static_cast<O*>(a_targets) + a_first[b], Narrowed<O>);
      std::transform(block.pair_offsets.begin(), block.pair_offsets.end(),
                     static_cast<O*>(pair_offsets) + pair_first[b], Narrowed<O>);
      std::transform(block.pair_counts.begin(), block.pair_counts.end(),
                     static_cast<O*>(pair_counts) + pair_first[b], Narrowed<O>);
      std::transform(block.triple_offsets.begin(), block.triple_offsets.end(),
                     static_cast<O*>(triple_offsets) + triple_first[b], Narrowed<O>);
      std::transform(block.triple_targets.begin(), block.triple_targets.end(),
                     static_cast<O*>(triple_targets) + triple_first[b], Narrowed<O>);
    });
  };
  if (offset_bytes == 1) {
    copy(uint8_t{});
  } else if (offset_bytes == 2) {
    copy(uint16_t{});
  } else {
    copy(uint32_t{});
  }
}

namespace {

template <typename O>
int32_t InterpolationValuesOf(int32_t n, const int32_t* indptr, const int32_t* indices,
                              const void* values, int32_t dtype, const uint8_t* coarse,
                              const int32_t* full_indptr, const void* a_targets,
                              const int32_t* pair_indptr, const void* pair_offsets,
                              const void* pair_counts, const int32_t* triple_indptr,
                              const void* triple_offsets, const void* triple_targets,
                              void* weights) {
  const int64_t blocks = BlocksForEntries(n, indptr);
  return WithValueType(dtype, [&](auto type) {
    using T = decltype(type);
    std::vector<T> diagonal(n);
    ForRowBlocks(n, blocks, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        diagonal[i] = Diagonal(static_cast<int32_t>(i), indptr, indices,
                               static_cast<const T*>(values));
      }
    });
    const InterpolationWeights<T, O> in{
        n, indptr, indices, static_cast<const T*>(values), diagonal.data(), coarse,
        full_indptr, static_cast<const O*>(a_targets), pair_indptr,
        static_cast<const O*>(pair_offsets), static_cast<const O*>(pair_counts),
        triple_indptr, static_cast<const O*>(triple_offsets),
        static_cast<const O*>(triple_targets)};
    std::atomic<bool> valid{true};
    const bool done = ForRowBlocks(n, blocks, [&](int64_t begin, int64_t end) {
      std::vector<typename Scalar<T>::Sum> sums;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t first = full_indptr[i], length = full_indptr[i + 1] - first;
        sums.resize(length);
        if (!InterpolationRow(in, static_cast<int32_t>(i), sums.data())) valid = false;
        for (int64_t c = 0; c < length; ++c) {
          static_cast<T*>(weights)[first + c] = FromSum<T>(sums[c]);
        }
      }
    });
    return !done ? -1 : valid ? 0 : -3;
  });
}

}  // namespace

// P's untruncated weights (full_indptr[n] of them) for A's values of `dtype`
// on the plan (interpolation_weights.h; its offsets and targets unsigned
// integers of `offset_bytes` bytes). Returns 0, -1 if out of memory, -2 for
// an unknown dtype, -3 for a plan that sends a value outside its row or reads
// an entry outside its row of A.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseInterpolationValues(
    int32_t n, const int32_t* indptr, const int32_t* indices, const void* values,
    int32_t dtype, const uint8_t* coarse, const int32_t* full_indptr, int32_t offset_bytes,
    const void* a_targets, const int32_t* pair_indptr, const void* pair_offsets,
    const void* pair_counts, const int32_t* triple_indptr, const void* triple_offsets,
    const void* triple_targets, void* weights) {
  try {
    const auto run = [&](auto zero) {
      return InterpolationValuesOf<decltype(zero)>(
          n, indptr, indices, values, dtype, coarse, full_indptr, a_targets, pair_indptr,
          pair_offsets, pair_counts, triple_indptr, triple_offsets, triple_targets, weights);
    };
    return offset_bytes == 1 ? run(uint8_t{}) : offset_bytes == 2 ? run(uint16_t{})
                                                                  : run(uint32_t{});
  } catch (const std::bad_alloc&) {
    return -1;
  }
}

// Marks in kept[0..nnz) the weights (of `dtype`, on the n-row pattern
// indptr) that truncation keeps; returns 0, -1 if out of memory, -2 for an
// unknown dtype.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseTruncation(
    int32_t n, const int32_t* indptr, const void* weights, int32_t dtype, double factor,
    int32_t most, uint8_t* kept) {
  return WithValueType(dtype, [&](auto type) {
    using T = decltype(type);
    const bool done = ForRowBlocks(
        n, BlocksForEntries(n, indptr), [&](int64_t begin, int64_t end) {
          TruncationRows(static_cast<int32_t>(begin), static_cast<int32_t>(end), indptr,
                         static_cast<const T*>(weights), factor, most, kept);
        });
    return done ? 0 : -1;
  });
}

// Truncated P's values (p_indptr[n] of them): the weights of `dtype` on the
// n-row pattern full_indptr that `keep` selects (positions, each row's within
// its own, p_indptr the kept rows' pointers, non-decreasing), each row
// rescaled to its former sum. Returns 0, -1 if out of memory, -2 for an
// unknown dtype, -3 if a row's kept positions are not its own.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseTruncatedValues(
    int32_t n, const int32_t* full_indptr, const void* weights, int32_t dtype,
    const int32_t* keep, const int32_t* p_indptr, void* p_values) {
  for (int32_t i = 0; i < n; ++i) {
    if (p_indptr[i + 1] < p_indptr[i]) return -3;
  }
  std::atomic<bool> valid{true};
  const int32_t status = WithValueType(dtype, [&](auto type) {
    using T = decltype(type);
    const bool done = ForRowBlocks(
        n, BlocksForEntries(n, full_indptr), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            const int64_t first = full_indptr[i], last = full_indptr[i + 1];
            for (int64_t e = p_indptr[i]; e < p_indptr[i + 1]; ++e) {
              if (keep[e] < first || keep[e] >= last) valid = false;
            }
            if (!valid) return;
            TruncatedRow(static_cast<const T*>(weights) + first, last - first, keep, first,
                         p_indptr[i], p_indptr[i + 1], static_cast<T*>(p_values));
          }
        });
    return done ? 0 : -1;
  });
  return status != 0 ? status : valid ? 0 : -3;
}

// Builds the multipass plan (arguments as ...InterpolationPlan's); returns it
// (to be read with ...MultipassSizes and ...MultipassCopy, which frees it), or
// null if memory ran out. The plan reads indptr and indices until it is
// freed.
JAXSOLVE_SPARSE_EXPORT void* JaxsolveSparseMultipassPlan(
    int32_t n, const int32_t* indptr, const int32_t* indices, const uint8_t* strong,
    const int32_t* coarse_index) {
  try {
    auto plan = std::make_unique<MultipassPlan>();
    BuildMultipass(n, indptr, indices, strong, coarse_index, *plan);
    return plan.release();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

// The lengths of the multipass plan's arrays: p_indptr, p_indices,
// pass_counts, then the triples'.
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseMultipassSizes(const void* handle,
                                                        int64_t* sizes) {
  const auto& plan = *static_cast<const MultipassPlan*>(handle);
  sizes[0] = static_cast<int64_t>(plan.p_indptr.size());
  sizes[1] = plan.p_indptr[plan.n];
  sizes[2] = static_cast<int64_t>(plan.pass_counts.size());
  sizes[3] = 0;
  for (const int32_t count : plan.pass_counts) sizes[3] += count;
}

// Writes the multipass plan's arrays (interpolatory: nnz(A) bytes) into the
// caller's, over the cores, and frees the plan. A's pattern, which the plan
// reads, must not have changed since ...MultipassPlan.
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseMultipassCopy(
    void* handle, int32_t* p_indptr, int32_t* p_indices, int32_t* pass_counts,
    int32_t* triple_entries, int32_t* triple_sources, int32_t* triple_destinations,
    uint8_t* interpolatory) {
  std::unique_ptr<MultipassPlan> plan(static_cast<MultipassPlan*>(handle));
  ParallelCopy(plan->p_indptr, p_indptr);
  ParallelCopy(plan->pass_counts, pass_counts);
  ParallelCopy(plan->interpolatory, interpolatory);
  ForRowBlocks(plan->n, BlocksFor(plan->n, kMinRowsPerThread),  // nothing here throws
               [&](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) {
                   std::copy(plan->row_columns[i],
                             plan->row_columns[i] + (p_indptr[i + 1] - p_indptr[i]),
                             p_indices + p_indptr[i]);
                 }
               });
  int64_t first = 0;  // the pass's first triple
  for (const std::vector<PassPart>& parts : plan->passes) {
    ForNumberedBlocks(  // nothing here throws
        static_cast<int64_t>(parts.size()), static_cast<int64_t>(parts.size()),
        [&](int64_t p, int64_t, int64_t) {
          WriteTriples(*plan, parts[p], triple_entries + first, triple_sources + first,
                       triple_destinations + first);
        });
    for (const PassPart& part : parts) first += part.triples;
  }
}

// The pattern truncation keeps (kept[e] != 0 for the weights it keeps, of the
// n rows of indptr): its row pointers kept_indptr[0..n] and, for each kept
// weight in order, its position e (keep) and column indices[e]
// (kept_indices), which must hold as many as are kept. Over the cores: each
// block counts its rows' kept weights, then writes them from its first place.
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseKeptPattern(int32_t n, const int32_t* indptr,
                                                      const int32_t* indices,
                                                      const uint8_t* kept, int32_t* kept_indptr,
                                                      int32_t* keep, int32_t* kept_indices) {
  const int64_t blocks = BlocksForEntries(n, indptr);
  std::vector<int64_t> first(blocks + 1, 0);  // each block's first kept weight
  ForNumberedBlocks(n, blocks, [&](int64_t b, int64_t begin, int64_t end) {  // no throw
    int64_t count = 0;
    for (int32_t e = indptr[begin]; e < indptr[end]; ++e) count += kept[e] != 0;
    first[b + 1] = count;
  });
  std::partial_sum(first.begin(), first.end(), first.begin());
  kept_indptr[0] = 0;
  ForNumberedBlocks(n, blocks, [&](int64_t b, int64_t begin, int64_t end) {  // no throw
    int64_t at = first[b];
    for (int64_t i = begin; i < end; ++i) {
      for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        if (!kept[e]) continue;
        keep[at] = e;
        kept_indices[at] = indices[e];
        ++at;
      }
      kept_indptr[i + 1] = static_cast<int32_t>(at);
    }
  });
}

// Multipass interpolation's untruncated weights (of `dtype`, full_indptr[n]
// of them) for A's values on the plan of JaxsolveSparseMultipassPlan
// (n_passes passes of pass_counts[m] triples), in _classical.py's
// _multipass_weights order (bit for bit for real values): the C points'
// unit weights, then pass by pass, each split over the cores at rows of P.
// Returns 0, -1 if out of memory, -2 for an unknown dtype, -3 if a triple
// reads a weight no earlier pass formed or writes out of P, or the plan's
// rows are out of order.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseMultipassValues(
    int32_t n, const int32_t* indptr, const int32_t* indices, const void* values,
    int32_t dtype, const uint8_t* coarse, const int32_t* full_indptr,
    const uint8_t* interpolatory, int32_t n_passes, const int32_t* pass_counts,
    const int32_t* triple_entries, const int32_t* triple_sources,
    const int32_t* triple_destinations, void* weights) {
  try {
    return WithValueType(dtype, [&](auto type) -> int32_t {
      using T = decltype(type);
      using Sum = typename Scalar<T>::Sum;
      const int64_t full_nnz = full_indptr[n];
      const int64_t row_blocks = BlocksFor(n, kMinRowsPerThread);
      T* out = static_cast<T*>(weights);
      FilledLater<uint8_t> ready(full_nnz);
      FilledLater<Sum> sums(full_nnz);
      ParallelFill(out, full_nnz, T{});
      ParallelFill(ready.data(), full_nnz, uint8_t{0});
      ParallelFill(sums.data(), full_nnz, Sum{});
      ForRowBlocks(n, row_blocks, [&](int64_t begin, int64_t end) {  // nothing here throws
        for (int64_t i = begin; i < end; ++i) {
          if (!coarse[i] || full_indptr[i + 1] == full_indptr[i]) continue;
          out[full_indptr[i]] = FromReal<T>(1);
          ready[full_indptr[i]] = 1;
        }
      });
      int64_t first = 0;
      for (int32_t m = 0; m < n_passes; ++m) {
        const int64_t last = first + pass_counts[m], count = last - first;
        // Block b starts at the first triple at or after its share that writes
        // another row of P than the triple before it.
        const int64_t blocks = BlocksFor(count, 1 << 16);
        std::vector<int64_t> starts(blocks + 1, last);
        for (int64_t b = 0; b < blocks; ++b) {
          int64_t t = first + count * b / blocks;
          if (t > first) {
            const int32_t previous = triple_destinations[t - 1];
            if (previous < 0 || previous >= full_nnz) return -3;
            const int32_t row_end = full_indptr[RowOf(n, full_indptr, previous) + 1];
            while (t < last && triple_destinations[t] >= 0 &&
                   triple_destinations[t] < row_end) {
              ++t;
            }
          }
          starts[b] = std::max(t, b > 0 ? starts[b - 1] : first);
        }
        std::vector<std::pair<int32_t, int32_t>> rows(blocks);
        if (!ForNumberedBlocks(blocks, blocks, [&](int64_t b, int64_t, int64_t) {
              std::vector<T> coefficients;
              rows[b] = MultipassTriples(
                  starts[b], starts[b + 1], n, indptr, indices, static_cast<const T*>(values),
                  interpolatory, full_indptr, triple_entries, triple_sources,
                  triple_destinations, ready.data(), coefficients, sums.data(), out);
            })) {
          return -1;
        }
        // Blocks wrote disjoint rows if each block's rows follow the last one's.
        int32_t row = -1;
        for (int64_t b = 0; b < blocks; ++b) {
          if (starts[b] == starts[b + 1]) continue;  // an empty block
          if (rows[b].first <= row) return -3;  // also a block's error, {-1, -1}
          row = rows[b].second;
        }
        // The pass's weights are formed; its blocks' rows are disjoint.
        ForNumberedBlocks(blocks, blocks, [&](int64_t b, int64_t, int64_t) {  // no throw
          for (int64_t t = starts[b]; t < starts[b + 1]; ++t) ready[triple_destinations[t]] = 1;
        });
        first = last;
      }
      return 0;
    });
  } catch (const std::bad_alloc&) {
    return -1;
  }
}
