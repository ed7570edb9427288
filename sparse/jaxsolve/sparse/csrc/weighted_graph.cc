// The weighted graphs that aggregation matches on, built on the host: C
// functions of libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_graph_kernels.py, which checks them.
//
// A graph is n x n CSR (int32 row pointers and columns, float64 weights).
// Both functions write into arrays the caller sized for the worst case and
// return the number of entries written; the rows they write are sorted by
// column and hold each column once.
//
//   JaxsolveSparseCouplingGraph: the symmetric coupling graph of a matrix,
//     w_ij = (|a_ij| + |a_ji|) / (2 sqrt(|a_ii| |a_jj|)), without the
//     diagonal; 0 where the scale is 0. Without magnitudes every stored entry
//     counts 1/2 in each direction (an edge stored both ways weighs 1).
//   JaxsolveSparseContractGraph: the graph of groups of nodes, G^T W G for
//     the membership matrix G: the weight between two groups is the sum of
//     the weights between their members; the diagonal (a group's internal
//     weight) is kept or dropped.
//
// Both are O(n + nnz) plus the sort of each output row, split over the
// machine's cores by blocks of rows (each thread its own markers), with the
// same result on any number of them.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "export.h"
#include "row_blocks.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::ForNumberedBlocks;
using ::jaxsolve::sparse::ForRowBlocks;

// Rows up to this long are sorted in place by insertion, without scratch.
constexpr int64_t kInsertionSortMax = 32;

// Sorts the entries [begin, end) of a row by column (stably) and sums the
// weights of equal columns; moves the result to start at `to` (<= begin) and
// returns where it ends.
int64_t SortAndMerge(int64_t begin, int64_t end, int64_t to, int32_t* columns,
                     double* weights,
                     std::vector<std::pair<int32_t, double>>& scratch) {
  if (end - begin <= kInsertionSortMax) {
    for (int64_t e = begin + 1; e < end; ++e) {
      const int32_t column = columns[e];
      const double weight = weights[e];
      int64_t at = e;
      for (; at > begin && columns[at - 1] > column; --at) {
        columns[at] = columns[at - 1];
        weights[at] = weights[at - 1];
      }
      columns[at] = column;
      weights[at] = weight;
    }
  } else {
    scratch.clear();
    for (int64_t e = begin; e < end; ++e) scratch.emplace_back(columns[e], weights[e]);
    std::stable_sort(scratch.begin(), scratch.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t q = 0; q < scratch.size(); ++q) {
      columns[begin + q] = scratch[q].first;
      weights[begin + q] = scratch[q].second;
    }
  }
  int64_t out = to;
  for (int64_t e = begin; e < end; ++e) {
    if (out > to && columns[out - 1] == columns[e]) {
      weights[out - 1] += weights[e];
    } else {
      columns[out] = columns[e];
      weights[out] = weights[e];
      ++out;
    }
  }
  return out;
}

// Rows smaller than this are not worth a thread of their own.
constexpr int64_t kMinRowsPerThread = 8192;

// The weight entry e = (i, j) contributes to the edge between i and j.
inline double Coupling(const double* magnitudes, const double* root_diagonal,
                       int32_t i, int32_t j, int64_t e) {
  if (magnitudes == nullptr) return 0.5;
  const double scale = 2.0 * root_diagonal[i] * root_diagonal[j];
  return scale > 0.0 ? std::abs(magnitudes[e]) / scale : 0.0;
}

// The position of column i in row j (sorted), or -1: a binary search without
// branches on the comparisons (conditional moves), which on the short rows of
// a stencil costs a third of std::lower_bound's mispredicted branches.
inline int64_t FindInRow(const int32_t* indptr, const int32_t* indices,
                         int32_t j, int32_t i) {
  int64_t length = indptr[j + 1] - indptr[j];
  if (length == 0) return -1;
  const int32_t* base = indices + indptr[j];
  while (length > 1) {  // invariant: the first column >= i is in [base, base + length]
    const int64_t half = length / 2;
    base = base[half - 1] < i ? base + half : base;
    length -= half;
  }
  const int32_t* at = base + (*base < i);
  return at < indices + indptr[j + 1] && *at == i ? at - indices : -1;
}

// The coupling graph of a pattern that is symmetric, its rows sorted: row i
// of the graph is row i of the matrix without its diagonal, so every row is
// written by one thread, at a place known in advance. Returns false, having
// written nothing that counts, if the pattern is not symmetric.
bool SymmetricCouplingGraph(int32_t n, const int32_t* indptr,
                            const int32_t* indices, const double* magnitudes,
                            const double* root_diagonal, int64_t blocks,
                            int32_t* out_indptr, int32_t* out_indices,
                            double* out_weights) {
  ForRowBlocks(n, blocks, [&](int64_t begin, int64_t end) {
    for (int32_t i = static_cast<int32_t>(begin); i < end; ++i) {
      const bool diagonal = FindInRow(indptr, indices, i, i) >= 0;
      out_indptr[i + 1] = indptr[i + 1] - indptr[i] - diagonal;
    }
  });
  out_indptr[0] = 0;
  for (int32_t i = 0; i < n; ++i) out_indptr[i + 1] += out_indptr[i];
  std::atomic<bool> symmetric{true};
  ForRowBlocks(n, blocks, [&](int64_t begin, int64_t end) {
    for (int32_t i = static_cast<int32_t>(begin); i < end && symmetric; ++i) {
      int64_t out = out_indptr[i];
      for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        const int32_t j = indices[e];
        if (j == i) continue;
        const int64_t mirror = FindInRow(indptr, indices, j, i);
        if (mirror < 0) {
          symmetric = false;
          return;
        }
        out_indices[out] = j;
        // The sum of the entry's and its mirror's weights, as the general
        // path's merge forms it (a sum of two does not depend on the order).
        out_weights[out++] = Coupling(magnitudes, root_diagonal, i, j, e) +
                             Coupling(magnitudes, root_diagonal, j, i, mirror);
      }
    }
  });
  return symmetric;
}

// Whether every row's columns are sorted and distinct.
bool SortedRows(int32_t n, const int32_t* indptr, const int32_t* indices,
                int64_t blocks) {
  std::atomic<bool> sorted{true};
  ForRowBlocks(n, blocks, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end && sorted; ++i) {
      for (int32_t e = indptr[i] + 1; e < indptr[i + 1]; ++e) {
        if (indices[e - 1] >= indices[e]) sorted = false;
      }
    }
  });
  return sorted;
}

}  // namespace

// out_indptr: n + 1; out_indices, out_weights: 2 * nnz. magnitudes may be
// null (pattern only). A symmetric pattern with sorted rows (the usual
// matrix, and every coarse level's) is done row by row over the cores; any
// other by scattering each entry to both its rows, on one core.
JAXSOLVE_SPARSE_EXPORT int64_t JaxsolveSparseCouplingGraph(
    int32_t n, const int32_t* indptr, const int32_t* indices,
    const double* magnitudes, int32_t* out_indptr, int32_t* out_indices,
    double* out_weights) {
  const int64_t blocks = BlocksFor(n, kMinRowsPerThread);
  std::vector<double> root_diagonal(n, 0.0);
  if (magnitudes != nullptr) {
    ForRowBlocks(n, blocks, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        double d = 0.0;
        for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
          if (indices[e] == i) d += std::abs(magnitudes[e]);
        }
        root_diagonal[i] = std::sqrt(d);
      }
    });
  }
  if (SortedRows(n, indptr, indices, blocks) &&
      SymmetricCouplingGraph(n, indptr, indices, magnitudes,
                             root_diagonal.data(), blocks, out_indptr,
                             out_indices, out_weights)) {
    return out_indptr[n];
  }
  // Every off-diagonal entry (i, j) lands in rows i and j.
  std::vector<int64_t> cursor(static_cast<size_t>(n) + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      if (indices[e] == i) continue;
      ++cursor[i + 1];
      ++cursor[indices[e] + 1];
    }
  }
  for (int32_t i = 0; i < n; ++i) cursor[i + 1] += cursor[i];
  std::vector<int64_t> row_start(cursor.begin(), cursor.end());
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
      const int32_t j = indices[e];
      if (j == i) continue;
      const double w = Coupling(magnitudes, root_diagonal.data(), i, j, e);
      out_indices[cursor[i]] = j;
      out_weights[cursor[i]++] = w;
      out_indices[cursor[j]] = i;
      out_weights[cursor[j]++] = w;
    }
  }
  std::vector<std::pair<int32_t, double>> scratch;
  int64_t written = 0;
  out_indptr[0] = 0;
  for (int32_t i = 0; i < n; ++i) {
    written = SortAndMerge(row_start[i], row_start[i + 1], written, out_indices,
                           out_weights, scratch);
    out_indptr[i + 1] = static_cast<int32_t>(written);
  }
  return written;
}

// group: each node's group in [0, n_groups). out_indptr: n_groups + 1;
// out_indices, out_weights: nnz. Returns the entries written, or -1 when out
// of memory. The groups are split over the cores by
// blocks; each block forms its rows one after the other in a buffer of its
// own, as long as its members' rows together, and copies them to their place
// once every block's lengths are known.
JAXSOLVE_SPARSE_EXPORT int64_t JaxsolveSparseContractGraph(
    int32_t n, const int32_t* indptr, const int32_t* indices,
    const double* weights, const int32_t* group, int32_t n_groups,
    int32_t keep_diagonal, int32_t* out_indptr, int32_t* out_indices,
    double* out_weights) {
  // The members of each group, by a counting sort.
  std::vector<int32_t> member_start(static_cast<size_t>(n_groups) + 1, 0);
  for (int32_t i = 0; i < n; ++i) ++member_start[group[i] + 1];
  for (int32_t g = 0; g < n_groups; ++g) member_start[g + 1] += member_start[g];
  std::vector<int32_t> members(n);
  {
    std::vector<int32_t> next(member_start.begin(), member_start.end() - 1);
    for (int32_t i = 0; i < n; ++i) members[next[group[i]]++] = i;
  }
  const int64_t blocks = BlocksFor(n_groups, kMinRowsPerThread);
  std::vector<std::unique_ptr<int32_t[]>> block_indices(blocks);
  std::vector<std::unique_ptr<double[]>> block_weights(blocks);
  std::vector<int64_t> block_entries(blocks, 0);
  const bool formed = ForNumberedBlocks(n_groups, blocks, [&](int64_t b, int64_t first, int64_t last) {
    int64_t capacity = 0;  // the entries of the block's members
    for (int32_t m = member_start[first]; m < member_start[last]; ++m) {
      capacity += indptr[members[m] + 1] - indptr[members[m]];
    }
    // Uninitialized: every entry is written before it is read.
    std::unique_ptr<int32_t[]> columns(new int32_t[capacity]);
    std::unique_ptr<double[]> sums(new double[capacity]);
    // where[c]: the position of column c in the row being formed, if >= start.
    std::vector<int64_t> where(n_groups, -1);
    std::vector<std::pair<int32_t, double>> scratch;
    int64_t written = 0;
    for (int32_t g = static_cast<int32_t>(first); g < last; ++g) {
      const int64_t start = written;
      for (int32_t m = member_start[g]; m < member_start[g + 1]; ++m) {
        const int32_t i = members[m];
        for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
          const int32_t c = group[indices[e]];
          if (c == g && !keep_diagonal) continue;
          if (where[c] < start) {
            where[c] = written;
            columns[written] = c;
            sums[written++] = weights[e];
          } else {
            sums[where[c]] += weights[e];
          }
        }
      }
      written = SortAndMerge(start, written, start, columns.get(), sums.get(), scratch);
      out_indptr[g + 1] = static_cast<int32_t>(written - start);
    }
    block_indices[b] = std::move(columns);
    block_weights[b] = std::move(sums);
    block_entries[b] = written;
  });
  if (!formed) return -1;
  out_indptr[0] = 0;
  for (int32_t g = 0; g < n_groups; ++g) out_indptr[g + 1] += out_indptr[g];
  const bool copied = ForNumberedBlocks(n_groups, blocks, [&](int64_t b, int64_t first, int64_t) {
    std::copy_n(block_indices[b].get(), block_entries[b], out_indices + out_indptr[first]);
    std::copy_n(block_weights[b].get(), block_entries[b], out_weights + out_indptr[first]);
  });
  return copied ? out_indptr[n_groups] : -1;
}
