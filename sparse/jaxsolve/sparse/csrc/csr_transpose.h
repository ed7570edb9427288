// The transpose of a CSR pattern, over the machine's cores: a counting sort of
// the entries by column that keeps rows ascending within each column (SciPy's
// CSR -> CSC, entry for entry). Each block of rows counts its entries per
// column, the counts give every (block, column) its first place, and each
// block scatters its entries there. Shared by the exported transpose
// (csr_transpose.cc) and classical AMG's strength graphs (classical.cc).
#ifndef JAXSOLVE_SPARSE_CSRC_CSR_TRANSPOSE_H_
#define JAXSOLVE_SPARSE_CSRC_CSR_TRANSPOSE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>

#include "row_blocks.h"

namespace jaxsolve::sparse {

// A is n_rows x n_cols with row pointers of type Offset (int32_t or int64_t),
// its columns in [0, n_cols). Writes the transpose's row pointers to
// t_indptr[0..n_cols], its columns (A's rows) to t_indices and, unless `from`
// is null, the position in A of each of its entries to from[0..nnz). Throws
// std::bad_alloc when out of memory.
template <typename Offset>
void TransposePattern(int32_t n_rows, int32_t n_cols, const Offset* indptr,
                      const int32_t* indices, Offset* t_indptr, int32_t* t_indices,
                      Offset* from) {
  // A thread's counts are a table of one integer per column, so it needs many
  // more entries than there are columns to be worth starting.
  constexpr int64_t kMinEntriesPerThread = 1 << 18;
  const int64_t nnz = indptr[n_rows];
  const int64_t blocks =
      std::min(BlocksFor(nnz, kMinEntriesPerThread),
               std::max<int64_t>(1, nnz / (2 * static_cast<int64_t>(n_cols) + 1)));
  // place[b * n_cols + c]: where block b's next entry of column c goes.
  std::unique_ptr<Offset[]> place(new Offset[blocks * n_cols]);
  const auto check = [](bool done) {
    if (!done) throw std::bad_alloc();  // the one exception the blocks raise
  };
  check(ForNumberedBlocks(n_rows, blocks, [&](int64_t b, int64_t begin, int64_t end) {
    Offset* count = place.get() + b * n_cols;
    std::fill_n(count, n_cols, 0);
    for (Offset e = indptr[begin]; e < indptr[end]; ++e) ++count[indices[e]];
  }));
  // Column c's entries: block 0's, then block 1's, ...; over the columns.
  check(ForRowBlocks(n_cols, BlocksFor(n_cols * blocks, kMinEntriesPerThread),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t c = begin; c < end; ++c) {
                         Offset total = 0;
                         for (int64_t b = 0; b < blocks; ++b) {
                           const Offset count = place[b * n_cols + c];
                           place[b * n_cols + c] = total;
                           total += count;
                         }
                         t_indptr[c + 1] = total;
                       }
                     }));
  t_indptr[0] = 0;
  for (int32_t c = 0; c < n_cols; ++c) t_indptr[c + 1] += t_indptr[c];
  check(ForNumberedBlocks(n_rows, blocks, [&](int64_t b, int64_t begin, int64_t end) {
    Offset* next = place.get() + b * n_cols;
    for (int32_t i = static_cast<int32_t>(begin); i < end; ++i) {
      for (Offset e = indptr[i]; e < indptr[i + 1]; ++e) {
        const int32_t c = indices[e];
        const Offset at = t_indptr[c] + next[c]++;
        t_indices[at] = i;
        if (from != nullptr) from[at] = e;
      }
    }
  }));
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_CSR_TRANSPOSE_H_
