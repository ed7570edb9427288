// The GPU driver of tridiagonal_eigh.h: one thread per eigenvalue for the
// bisection and the separated eigenvectors, a bitonic sort of the
// eigenvalues, and a thread block per cluster. Shared by the standalone
// tridiagonal entry (tridiagonal_handlers_cuda.cu) and syevd's low-memory
// path (cusolver_handlers.cu).
#ifndef JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_CUDA_H_
#define JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_CUDA_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace jaxsolve::dense {

// The device scratch bytes TridiagonalEighGpu needs for order n: O(n).
size_t TridiagonalScratchBytes(int64_t n);

// How the n x n eigenvector matrix Z lies in memory: its entries `stride`
// Reals apart (2 for the real parts of a complex Z), column-major (column k,
// w[k]'s eigenvector, contiguous) or row-major. A thread computes one
// eigenvector, so the threads of a warp, walking their vectors in step,
// write row-major Z coalesced, and column-major Z one 32-byte sector each.
struct EigenvectorLayout {
  int64_t stride;
  bool row_major;
};

// w (n, ascending) and, unless z is null, the eigenvectors of the symmetric
// tridiagonal (d, e): column k of Z (laid out as `layout` says) is w[k]'s,
// unit 2-norm. Z is zeroed first (its imaginary parts too). `unconverged`
// (one device int) receives the number of vectors whose iteration did not
// converge. Issues the work on `stream` and returns cudaGetLastError().
template <typename Real>
cudaError_t TridiagonalEighGpu(cudaStream_t stream, const Real* d, const Real* e, int64_t n,
                               Real* w, Real* z, EigenvectorLayout layout, void* scratch,
                               int* unconverged);

}  // namespace jaxsolve::dense

#endif  // JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_CUDA_H_
