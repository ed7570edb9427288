// Greedy graph coloring by saturation (DSATUR, Brélaz 1979): a C function of
// libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_coloring.py, which checks them.
//
// The graph is given as two hops, so that the column-intersection graph of a
// sparse matrix P (distance-2 coloring) never has to be formed: the neighbours
// of node v are the nodes of B's rows r, for every r in A's row v, except v.
//
//   distance 2 (columns sharing a row): A = Pᵀ (column -> its rows), B = P;
//   distance 1 (an adjacency graph G):  A = the identity, B = G.
//
// Repeated neighbours are harmless. The order: the uncolored node with the
// most distinct colors among its neighbours (its saturation) comes next; ties
// go to the larger two-hop degree, then to the smaller index. Each node takes
// the smallest color none of its neighbours has (first fit). On lattices this
// finds the optimum of the 5-, 9- and 27-point stencils' distance-2 colorings
// (5, 9, 27 colors) without knowing they are lattices.
//
// Work: O((n + E) log n) for E two-hop edges; memory: one bit per (node,
// color it could be blocked from), colors being at most a node's degree.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <vector>

#include "export.h"

// Colors the n nodes into colors[0..n); returns the number of colors, or -1 if
// the working memory could not be allocated.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseColorDsatur(
    int32_t n, const int64_t* a_indptr, const int32_t* a_indices,
    const int64_t* b_indptr, const int32_t* b_indices, int32_t* colors) {
  try {
    // An upper bound of each node's degree: its two-hop edge count.
    std::vector<int64_t> degree(n, 0);
    for (int32_t v = 0; v < n; ++v) {
      int64_t d = 0;
      for (int64_t e = a_indptr[v]; e < a_indptr[v + 1]; ++e) {
        const int32_t r = a_indices[e];
        d += b_indptr[r + 1] - b_indptr[r];
      }
      degree[v] = d;
    }
    // Node v's blocked colors: bits [0, 64 * words) from offset[v]. A node's
    // first-fit color is at most its degree, so degree + 1 bits suffice.
    std::vector<int64_t> offset(static_cast<std::size_t>(n) + 1, 0);
    for (int32_t v = 0; v < n; ++v) {
      offset[v + 1] = offset[v] + (degree[v] + 1 + 63) / 64;
    }
    std::vector<uint64_t> blocked(static_cast<std::size_t>(offset[n]), 0);
    std::vector<int32_t> saturation(n, 0);
    for (int32_t v = 0; v < n; ++v) colors[v] = -1;

    // One max-heap per saturation level, of keys (degree, -index) packed in 64 bits:
    // the next node is the top of the highest non-empty level. Entries go stale when a
    // node's saturation grows (a newer entry sits one level up) or it is colored.
    auto key = [&](int32_t v) {
      const uint64_t d = static_cast<uint64_t>(degree[v] < (int64_t{1} << 31)
                                                   ? degree[v] : (int64_t{1} << 31) - 1);
      return (d << 32) | static_cast<uint32_t>(~static_cast<uint32_t>(v));
    };
    std::vector<std::vector<uint64_t>> levels(1);
    levels[0].reserve(n);
    for (int32_t v = 0; v < n; ++v) levels[0].push_back(key(v));
    std::make_heap(levels[0].begin(), levels[0].end());
    int32_t top = 0;
    int32_t count = 0;
    for (;;) {
      while (top >= 0 && levels[top].empty()) --top;
      if (top < 0) break;
      std::pop_heap(levels[top].begin(), levels[top].end());
      const uint64_t entry = levels[top].back();
      levels[top].pop_back();
      const int32_t v = static_cast<int32_t>(~static_cast<uint32_t>(entry));
      if (colors[v] >= 0 || saturation[v] != top) continue;
      int32_t color = 0;
      for (int64_t w = offset[v]; w < offset[v + 1]; ++w) {
        const uint64_t free = ~blocked[w];
        if (free != 0) {
          color += __builtin_ctzll(free);
          break;
        }
        color += 64;
      }
      colors[v] = color;
      if (color + 1 > count) count = color + 1;
      for (int64_t e = a_indptr[v]; e < a_indptr[v + 1]; ++e) {
        const int32_t r = a_indices[e];
        for (int64_t f = b_indptr[r]; f < b_indptr[r + 1]; ++f) {
          const int32_t u = b_indices[f];
          if (u == v || colors[u] >= 0) continue;
          const int64_t word = color / 64;
          if (word >= offset[u + 1] - offset[u]) continue;  // beyond u's reach
          uint64_t& bits = blocked[offset[u] + word];
          const uint64_t bit = uint64_t{1} << (color % 64);
          if (bits & bit) continue;
          bits |= bit;
          const int32_t level = ++saturation[u];
          if (level >= static_cast<int32_t>(levels.size())) levels.resize(level + 1);
          levels[level].push_back(key(u));
          std::push_heap(levels[level].begin(), levels[level].end());
          if (level > top) top = level;
        }
      }
    }
    return count;
  } catch (...) {  // std::bad_alloc: nothing may throw across the C ABI
    return -1;
  }
}
