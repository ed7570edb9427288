// Greedy pairwise aggregation of a weighted graph, the first step of an
// aggregation AMG setup: a C function of libjaxsolve_sparse.so, called through
// ctypes on NumPy arrays by jaxsolve/sparse/_graph_kernels.py, which checks them.
//
// The graph is n x n CSR: row i lists the weights w_ij of node i's edges.
// Only off-diagonal entries of positive weight count (NaN counts as not
// positive); the graph may be unsymmetric, and a row's entries need not be
// sorted.
//
//   Phase one: for i = 0, ..., n-1 in order, an unmatched i is paired with
//   its unmatched neighbour j of largest weight w_ij (ties: smallest j); the
//   pair is a new aggregate. Without an unmatched neighbour, i waits for
//   phase two (a later node may still pair with it, in an unsymmetric graph).
//   Phase two: for each node still unmatched, in order, its neighbours are all
//   matched (they were when it was visited); it joins the aggregate of the one
//   of largest weight. The nodes with no neighbour at all (a Dirichlet row
//   eliminated from its neighbours' equations: an identity row) form one
//   aggregate together, numbered last: as aggregates of their own they would
//   stay apart on every coarser level, down to the coarsest, whose dense LU
//   would factor every one of them.
//
// Aggregates are numbered in the order they are created. O(n + nnz).
#include <cstdint>

#include "export.h"

namespace {

// Node i's neighbour j != i of largest positive weight among those for which
// eligible(j) holds (ties: smallest j); -1 if there is none.
template <typename Eligible>
int32_t StrongestNeighbour(int32_t i, const int32_t* indptr,
                           const int32_t* indices, const double* weights,
                           Eligible eligible) {
  int32_t best = -1;
  double best_weight = 0.0;
  for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
    const int32_t j = indices[e];
    const double w = weights[e];
    if (j == i || !(w > 0.0) || !eligible(j)) continue;
    if (best < 0 || w > best_weight || (w == best_weight && j < best)) {
      best = j;
      best_weight = w;
    }
  }
  return best;
}

}  // namespace

// Writes each node's aggregate to aggregate[0..n) and returns the number of
// aggregates.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseAggregatePairs(
    int32_t n, const int32_t* indptr, const int32_t* indices,
    const double* weights, int32_t* aggregate) {
  const auto unmatched = [&](int32_t j) { return aggregate[j] < 0; };
  const auto any = [](int32_t) { return true; };
  for (int32_t i = 0; i < n; ++i) aggregate[i] = -1;
  int32_t count = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (!unmatched(i)) continue;
    const int32_t j = StrongestNeighbour(i, indptr, indices, weights, unmatched);
    if (j >= 0) aggregate[i] = aggregate[j] = count++;
  }
  // A join's neighbour was matched in phase one, so the nodes still unmatched
  // after this loop are exactly those without a neighbour.
  for (int32_t i = 0; i < n; ++i) {
    if (!unmatched(i)) continue;
    const int32_t j = StrongestNeighbour(i, indptr, indices, weights, any);
    if (j >= 0) aggregate[i] = aggregate[j];
  }
  bool isolated = false;
  for (int32_t i = 0; i < n; ++i) {
    if (!unmatched(i)) continue;
    aggregate[i] = count;
    isolated = true;
  }
  return count + (isolated ? 1 : 0);
}
