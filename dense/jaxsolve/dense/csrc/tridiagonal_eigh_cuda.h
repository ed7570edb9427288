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

// w (n, ascending) and, unless z is null, the eigenvectors of the symmetric
// tridiagonal (d, e): column k of the column-major n x n Z (entries `stride`
// Reals apart: 2 for the real parts of a complex Z) is w[k]'s, unit 2-norm.
// Z is zeroed first (its imaginary parts too). `unconverged` (one device int)
// receives the number of vectors whose iteration did not converge. Issues
// the work on `stream` and returns cudaGetLastError().
template <typename Real>
cudaError_t TridiagonalEighGpu(cudaStream_t stream, const Real* d, const Real* e, int64_t n,
                               Real* w, Real* z, int64_t stride, void* scratch,
                               int* unconverged);

}  // namespace jaxsolve::dense

#endif  // JAXSOLVE_DENSE_CSRC_TRIDIAGONAL_EIGH_CUDA_H_
