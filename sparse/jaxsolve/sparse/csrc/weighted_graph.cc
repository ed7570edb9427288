// The weighted graphs that aggregation matches on, built on the host: C
// functions of libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_native.py, which checks them.
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
// Both are O(n + nnz) plus the sort of each output row.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "export.h"

namespace {

// Sorts the entries [begin, end) of a row by column and sums the weights of
// equal columns; moves the result to start at `to` (<= begin) and returns
// where it ends.
int64_t SortAndMerge(int64_t begin, int64_t end, int64_t to, int32_t* columns,
                     double* weights,
                     std::vector<std::pair<int32_t, double>>& scratch) {
  scratch.clear();
  for (int64_t e = begin; e < end; ++e) scratch.emplace_back(columns[e], weights[e]);
  std::sort(scratch.begin(), scratch.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t out = to;
  for (size_t q = 0; q < scratch.size(); ++q) {
    if (out > to && columns[out - 1] == scratch[q].first) {
      weights[out - 1] += scratch[q].second;
    } else {
      columns[out] = scratch[q].first;
      weights[out] = scratch[q].second;
      ++out;
    }
  }
  return out;
}

}  // namespace

// out_indptr: n + 1; out_indices, out_weights: 2 * nnz. magnitudes may be
// null (pattern only).
JAXSOLVE_SPARSE_EXPORT int64_t JaxsolveSparseCouplingGraph(
    int32_t n, const int32_t* indptr, const int32_t* indices,
    const double* magnitudes, int32_t* out_indptr, int32_t* out_indices,
    double* out_weights) {
  std::vector<double> root_diagonal(n, 0.0);
  if (magnitudes != nullptr) {
    for (int32_t i = 0; i < n; ++i) {
      double d = 0.0;
      for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        if (indices[e] == i) d += std::abs(magnitudes[e]);
      }
      root_diagonal[i] = std::sqrt(d);
    }
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
      double w = 0.5;
      if (magnitudes != nullptr) {
        const double scale = 2.0 * root_diagonal[i] * root_diagonal[j];
        w = scale > 0.0 ? std::abs(magnitudes[e]) / scale : 0.0;
      }
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
// out_indices, out_weights: nnz.
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
  // where[c]: the position of column c in the row being written, if >= start.
  std::vector<int64_t> where(n_groups, -1);
  std::vector<std::pair<int32_t, double>> scratch;
  int64_t written = 0;
  out_indptr[0] = 0;
  for (int32_t g = 0; g < n_groups; ++g) {
    const int64_t start = written;
    for (int32_t m = member_start[g]; m < member_start[g + 1]; ++m) {
      const int32_t i = members[m];
      for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
        const int32_t c = group[indices[e]];
        if (c == g && !keep_diagonal) continue;
        if (where[c] < start) {
          where[c] = written;
          out_indices[written] = c;
          out_weights[written++] = weights[e];
        } else {
          out_weights[where[c]] += weights[e];
        }
      }
    }
    written = SortAndMerge(start, written, start, out_indices, out_weights, scratch);
    out_indptr[g + 1] = static_cast<int32_t>(written);
  }
  return written;
}
