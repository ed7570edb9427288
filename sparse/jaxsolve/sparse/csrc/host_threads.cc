// How many threads the host kernels of libjaxsolve_sparse.so split their work
// over, at most (row_blocks.h's Cores): a C function for
// jaxsolve/sparse/_native.py's host_threads, which the benchmarks print next
// to the setup's times.
#include <cstdint>

#include "export.h"
#include "row_blocks.h"

JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseHostThreads() {
  return static_cast<int32_t>(::jaxsolve::sparse::Cores());
}
