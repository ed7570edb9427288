// The pattern of a CSR matrix's transpose, and where each entry goes: a C
// function of libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_native.py. The AMG setup forms R = P^T's pattern with it.
//
// A counting sort of the entries by column that keeps rows ascending within
// each column (SciPy's CSR -> CSC, entry for entry), over the machine's cores:
// each block of rows counts its entries per column, the counts give every
// (block, column) its first place, and each block scatters its entries there.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "export.h"
#include "row_blocks.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::ForNumberedBlocks;
using ::jaxsolve::sparse::ForRowBlocks;

// Entries a thread must have to be worth starting: its counts are a table of
// one integer per column, so it also needs many more entries than there are
// columns (below).
constexpr int64_t kMinEntriesPerThread = 1 << 18;

}  // namespace

// A is n_rows x n_cols, its columns in [0, n_cols); writes the transpose's
// row pointers to t_indptr[0..n_cols] and its columns (A's rows) to t_indices,
// and the position in A of each of its entries to from[0..nnz); returns 0, or
// -1 when out of memory.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseCsrTranspose(
    int32_t n_rows, int32_t n_cols, const int32_t* indptr,
    const int32_t* indices, int32_t* t_indptr, int32_t* t_indices,
    int32_t* from) {
  try {
    const int64_t nnz = indptr[n_rows];
    const int64_t blocks = std::min(
        BlocksFor(nnz, kMinEntriesPerThread),
        std::max<int64_t>(1, nnz / (2 * static_cast<int64_t>(n_cols) + 1)));
    // place[b * n_cols + c]: where block b's next entry of column c goes.
    std::unique_ptr<int32_t[]> place(new int32_t[blocks * n_cols]);
    if (!ForNumberedBlocks(n_rows, blocks, [&](int64_t b, int64_t begin, int64_t end) {
          int32_t* count = place.get() + b * n_cols;
          std::fill_n(count, n_cols, 0);
          for (int32_t e = indptr[begin]; e < indptr[end]; ++e) ++count[indices[e]];
        })) {
      return -1;
    }
    // Column c's entries: block 0's, then block 1's, ...; over the columns.
    if (!ForRowBlocks(n_cols, BlocksFor(n_cols * blocks, kMinEntriesPerThread),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t c = begin; c < end; ++c) {
                          int32_t total = 0;
                          for (int64_t b = 0; b < blocks; ++b) {
                            const int32_t count = place[b * n_cols + c];
                            place[b * n_cols + c] = total;
                            total += count;
                          }
                          t_indptr[c + 1] = total;
                        }
                      })) {
      return -1;
    }
    t_indptr[0] = 0;
    for (int32_t c = 0; c < n_cols; ++c) t_indptr[c + 1] += t_indptr[c];
    if (!ForNumberedBlocks(n_rows, blocks, [&](int64_t b, int64_t begin, int64_t end) {
          int32_t* next = place.get() + b * n_cols;
          for (int32_t i = static_cast<int32_t>(begin); i < end; ++i) {
            for (int32_t e = indptr[i]; e < indptr[i + 1]; ++e) {
              const int32_t c = indices[e];
              const int32_t at = t_indptr[c] + next[c]++;
              t_indices[at] = i;
              from[at] = e;
            }
          }
        })) {
      return -1;
    }
    return 0;
  } catch (...) {
    return -1;
  }
}
