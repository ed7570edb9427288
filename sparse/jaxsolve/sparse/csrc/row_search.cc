// Where given columns sit in the rows of a CSR pattern: a C function of
// libjaxsolve_sparse.so, called through ctypes on NumPy arrays by
// jaxsolve/sparse/_pattern_kernels.py, which checks them. The AMG setup finds each
// row's diagonal entry, and the entry of the tentative prolongation T in each
// row of the smoothed P = pattern(A T), with it: one scan of each row, over
// the machine's cores by blocks of rows, where NumPy made several serial
// passes over all entries.
#include <cstdint>

#include "export.h"
#include "row_blocks.h"

namespace {

using ::jaxsolve::sparse::BlocksFor;
using ::jaxsolve::sparse::ForRowBlocks;

// Rows smaller than this are not worth a thread of their own.
constexpr int64_t kMinRowsPerThread = 16384;

}  // namespace

// For each row i < n, the position e (indptr[i] <= e < indptr[i + 1]) of its
// last entry with indices[e] == columns[i] (== i where columns is null: the
// diagonal), or -1 where there is none, to positions[0..n); returns 0, or -1
// when no thread could be started.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseFindInRows(
    int32_t n, const int32_t* indptr, const int32_t* indices,
    const int32_t* columns, int32_t* positions) {
  const bool done = ForRowBlocks(
      n, BlocksFor(n, kMinRowsPerThread), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int32_t column = columns == nullptr ? static_cast<int32_t>(i) : columns[i];
          int32_t e = indptr[i + 1] - 1;
          while (e >= indptr[i] && indices[e] != column) --e;
          positions[i] = e >= indptr[i] ? e : -1;
        }
      });
  return done ? 0 : -1;
}
