// CUDA entries of libjaxsolve_dense_cusolver_cuda<major>.so: XLA FFI handlers
// that call cuSOLVER's dense API on one GPU, in place, on XLA's stream.
//
// Each routine is one templated core (the element type T) and a thin entry
// that dispatches on the operand's dtype. The cores:
//
//   Potrf  A -> Lᵀ, info                 cusolverDnXpotrf
//   Potrs  L, B -> X                     cusolverDnXpotrs
//   Getrf  A -> LU, pivots, info         cusolverDnXgetrf
//   Getrs  LU, pivots, B -> X            cusolverDnXgetrs
//   Syevd  A -> V, w                     cusolverDnXsyevd
//   LeanSyevd  A -> V, w                 cusolverDn<t>sytrd / <t>hetrd, our
//                                        tridiagonal eigensolver, cuBLAS
//   Sygvd  A, B -> V, L, w               cusolverDn<t>sygvd / <t>hegvd
//   Qr     A -> Q, R                     cusolverDnXgeqrf + <t>orgqr / <t>ungqr
//   Gesvd  A -> U, s, Vᴴ                 cusolverDnXgesvd
//
// Layouts. JAX hands over row-major buffers; cuSOLVER reads them
// column-major, i.e. it sees the transpose. The Python side (_cusolver.py)
// arranges operands so that this costs little where it matters: a Hermitian
// A read column-major is conj(A), whose upper triangle is A's lower one, so
// syevd decomposes A's lower triangle in place; potrf, whose LOWER variant
// is cuSOLVER's faster one, first mirrors A's lower triangle into the upper
// (one pass over half the matrix, in place) and then factors A itself; an LU
// of Aᵀ serves A x = b with getrs('T'). Right-hand sides arrive as (k, n) arrays, i.e.
// column-major n x k. Each handler documents what its buffers mean.
//
// Memory. Beside its operands, each handler uses the stream's cached
// workspace: what cuSOLVER's *_bufferSize asks for (about four n x n for
// Xsyevd), and for LeanSyevd one n x n matrix plus O(n): it reduces A to
// tridiagonal form in place, solves the tridiagonal problem into that one
// matrix and applies the reflectors to it in blocks.
//
// The first operand's buffer is aliased to the first result
// (input_output_aliases), so with a donated input the factor takes the
// matrix's place. No handler synchronizes with the host: cuSOLVER's info
// stays on the device, where a small kernel turns failed outputs into NaN.
#include <cuComplex.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>

#include "cusolver_context.h"
#include "tridiagonal_eigh_cuda.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::dense {
namespace {

// Routine numbers in the keys of the workspace-size cache.
enum Routine : int64_t { kPotrf, kGetrf, kSyevd, kLeanSyevd, kSygvd, kQr, kGesvd };

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

int Blocks(int64_t work) {
  return static_cast<int>(std::max<int64_t>(1, std::min(kMaxBlocks, (work + kThreads - 1) / kThreads)));
}

// ------------------------------------------------------------------ kernels

template <typename T>
__device__ T Nan();
template <>
__device__ inline float Nan<float>() { return nanf(""); }
template <>
__device__ inline double Nan<double>() { return nan(""); }
template <>
__device__ inline cuFloatComplex Nan<cuFloatComplex>() { return make_cuFloatComplex(nanf(""), nanf("")); }
template <>
__device__ inline cuDoubleComplex Nan<cuDoubleComplex>() { return make_cuDoubleComplex(nan(""), nan("")); }

template <typename T>
__device__ T Zero() { return T{}; }

// The little complex arithmetic the kernels need, for real and complex T.
template <typename T>
__host__ __device__ T FromReal(double x) { return static_cast<T>(x); }
template <>
__host__ __device__ inline cuFloatComplex FromReal<cuFloatComplex>(double x) {
  return make_cuFloatComplex(static_cast<float>(x), 0.0f);
}
template <>
__host__ __device__ inline cuDoubleComplex FromReal<cuDoubleComplex>(double x) {
  return make_cuDoubleComplex(x, 0.0);
}

__device__ float Add(float x, float y) { return x + y; }
__device__ double Add(double x, double y) { return x + y; }
__device__ cuFloatComplex Add(cuFloatComplex x, cuFloatComplex y) { return cuCaddf(x, y); }
__device__ cuDoubleComplex Add(cuDoubleComplex x, cuDoubleComplex y) { return cuCadd(x, y); }
__device__ float Mul(float x, float y) { return x * y; }
__device__ double Mul(double x, double y) { return x * y; }
__device__ cuFloatComplex Mul(cuFloatComplex x, cuFloatComplex y) { return cuCmulf(x, y); }
__device__ cuDoubleComplex Mul(cuDoubleComplex x, cuDoubleComplex y) { return cuCmul(x, y); }
template <typename T>
__device__ T Negate(T x) { return Mul(FromReal<T>(-1.0), x); }

__device__ float Conj(float x) { return x; }
__device__ double Conj(double x) { return x; }
__device__ cuFloatComplex Conj(cuFloatComplex x) { return cuConjf(x); }
__device__ cuDoubleComplex Conj(cuDoubleComplex x) { return cuConj(x); }

// x[0:count] = NaN when *info != 0.
template <typename T>
__global__ void NanIfFailedKernel(T* x, int64_t count, const int* info) {
  if (*info == 0) return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = Nan<T>();
  }
}

template <typename T>
void NanIfFailed(cudaStream_t stream, T* x, int64_t count, const int* info) {
  if (count > 0) NanIfFailedKernel<T><<<Blocks(count), kThreads, 0, stream>>>(x, count, info);
}

// After potrf(LOWER) of the column-major n x n matrix `a`: zeroes the strict
// upper triangle (where the handler left A's lower triangle), or fills
// everything with NaN when the factorization failed. Thread block (x, y)
// walks columns y, y + gridDim.y, ...; its threads the rows of a column,
// which are contiguous.
template <typename T>
__global__ void FinishCholeskyKernel(T* a, int64_t n, const int* info) {
  const bool failed = *info != 0;
  const T value = failed ? Nan<T>() : Zero<T>();
  for (int64_t col = blockIdx.y; col < n; col += gridDim.y) {
    const int64_t end = failed ? n : col;
    for (int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; row < end;
         row += int64_t{gridDim.x} * blockDim.x) {
      a[col * n + row] = value;
    }
  }
}

// info = -1 (the Status's NOT_FINITE) where the input held NaN or Inf,
// whatever the factorization said of it.
__global__ void MarkNotFiniteKernel(int* info, const int* not_finite) {
  if (*not_finite) *info = -1;
}

template <typename T>
void FinishCholesky(cudaStream_t stream, T* a, int64_t n, const int* info) {
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 8)),
                  static_cast<unsigned>(std::min<int64_t>(n, kMaxBlocks)));
  FinishCholeskyKernel<T><<<grid, kThreads, 0, stream>>>(a, n, info);
}

// cuSOLVER's 1-based int64 pivots <-> the int32 0-based ones JAX keeps.
__global__ void ZeroBasedPivotsKernel(const int64_t* ipiv, int32_t* pivots, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    pivots[i] = static_cast<int32_t>(ipiv[i] - 1);
  }
}
__global__ void OneBasedPivotsKernel(const int32_t* pivots, int64_t* ipiv, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    ipiv[i] = int64_t{pivots[i]} + 1;
  }
}

// In-place conjugate transpose of an n x n matrix: thread block (bj, bi),
// bi <= bj, swaps the kTile x kTile tiles (bi, bj) and (bj, bi) through shared
// memory, conjugating (a diagonal tile is transposed within itself). Reads
// and writes are coalesced.
constexpr int kTile = 32;
constexpr int kTileRows = 8;

template <typename T>
__global__ void ConjugateTransposeKernel(T* a, int64_t n) {
  const int64_t bi = blockIdx.y, bj = blockIdx.x;
  if (bi > bj) return;
  __shared__ T upper[kTile][kTile + 1];
  __shared__ T lower[kTile][kTile + 1];
  const int64_t r0 = bi * kTile, c0 = bj * kTile;
  for (int y = threadIdx.y; y < kTile; y += kTileRows) {
    const int64_t r = r0 + y, c = c0 + threadIdx.x;
    if (r < n && c < n) upper[y][threadIdx.x] = a[r * n + c];
    const int64_t r2 = c0 + y, c2 = r0 + threadIdx.x;
    if (bi != bj && r2 < n && c2 < n) lower[y][threadIdx.x] = a[r2 * n + c2];
  }
  __syncthreads();
  for (int y = threadIdx.y; y < kTile; y += kTileRows) {
    // Tile (bj, bi) <- conj(tile (bi, bj))ᵀ, and the other way round.
    const int64_t r = c0 + y, c = r0 + threadIdx.x;
    if (r < n && c < n) a[r * n + c] = Conj(upper[threadIdx.x][y]);
    const int64_t r2 = r0 + y, c2 = c0 + threadIdx.x;
    if (bi != bj && r2 < n && c2 < n) a[r2 * n + c2] = Conj(lower[threadIdx.x][y]);
  }
}

template <typename T>
void ConjugateTranspose(cudaStream_t stream, T* a, int64_t n) {
  const int64_t tiles = (n + kTile - 1) / kTile;
  if (tiles == 0) return;
  ConjugateTransposeKernel<T><<<dim3(tiles, tiles), dim3(kTile, kTileRows), 0, stream>>>(a, n);
}

__device__ bool IsFinite(float x) { return isfinite(x); }
__device__ bool IsFinite(double x) { return isfinite(x); }
__device__ bool IsFinite(cuFloatComplex x) { return isfinite(x.x) && isfinite(x.y); }
__device__ bool IsFinite(cuDoubleComplex x) { return isfinite(x.x) && isfinite(x.y); }

// Copies the strict lower triangle of the row-major n x n matrix `a` into
// its strict upper triangle, transposed: afterwards the column-major lower
// triangle is the row-major lower triangle's, so that potrf(LOWER), cuSOLVER's
// faster variant, factors the lower triangle of the caller's A. Thread block
// (bj, bi), bi <= bj, fills tile (bi, bj) from tile (bj, bi); coalesced.
// With `not_finite`, sets *not_finite = 1 where the lower triangle holds NaN
// or Inf: the check rides on the pass, at no extra memory traffic.
template <typename T>
__global__ void MirrorLowerKernel(T* a, int64_t n, int* not_finite) {
  const int64_t bi = blockIdx.y, bj = blockIdx.x;
  if (bi > bj) return;
  __shared__ T lower[kTile][kTile + 1];
  const int64_t r0 = bi * kTile, c0 = bj * kTile;
  bool finite = true;
  for (int y = threadIdx.y; y < kTile; y += kTileRows) {
    const int64_t r = c0 + y, c = r0 + threadIdx.x;  // tile (bj, bi)
    if (r < n && c < n) {
      lower[y][threadIdx.x] = a[r * n + c];
      finite &= c > r || IsFinite(lower[y][threadIdx.x]);
    }
  }
  if (not_finite != nullptr && !finite) *not_finite = 1;
  __syncthreads();
  for (int y = threadIdx.y; y < kTile; y += kTileRows) {
    const int64_t r = r0 + y, c = c0 + threadIdx.x;  // tile (bi, bj), above the diagonal
    if (r < n && c < n && c > r) a[r * n + c] = lower[threadIdx.x][y];
  }
}

template <typename T>
void MirrorLower(cudaStream_t stream, T* a, int64_t n, int* not_finite = nullptr) {
  const int64_t tiles = (n + kTile - 1) / kTile;
  if (tiles == 0) return;
  MirrorLowerKernel<T><<<dim3(tiles, tiles), dim3(kTile, kTileRows), 0, stream>>>(a, n,
                                                                               not_finite);
}

// r (column-major k x n) = the upper trapezoid of a (column-major, lda rows).
template <typename T>
__global__ void UpperTrapezoidKernel(const T* a, int64_t lda, T* r, int64_t k, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < k * n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i % k, col = i / k;
    r[i] = row <= col ? a[col * lda + row] : Zero<T>();
  }
}

// ------------------------------------------------------------ typed API

// cuSOLVER's 32-bit typed routines that the 64-bit API lacks in CUDA 13.0:
// the reduction to tridiagonal form, the generalized eigensolver and forming
// Q of a QR.
template <typename T>
struct Typed;

#define JAXSOLVE_TYPED(T, R, SYTRD, SYGVD, ORGQR)                                             \
  template <>                                                                                 \
  struct Typed<T> {                                                                           \
    static cusolverStatus_t SytrdSize(cusolverDnHandle_t h, int n, T* a, R* d, R* e, T* tau,  \
                                      int* lwork) {                                           \
      return cusolverDn##SYTRD##_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, a, n, d, e, tau,    \
                                            lwork);                                           \
    }                                                                                         \
    static cusolverStatus_t Sytrd(cusolverDnHandle_t h, int n, T* a, R* d, R* e, T* tau,      \
                                  T* work, int lwork, int* info) {                            \
      return cusolverDn##SYTRD(h, CUBLAS_FILL_MODE_LOWER, n, a, n, d, e, tau, work, lwork,    \
                               info);                                                         \
    }                                                                                         \
    static cusolverStatus_t SygvdSize(cusolverDnHandle_t h, int n, T* a, T* b, R* w,          \
                                      int* lwork) {                                           \
      return cusolverDn##SYGVD##_bufferSize(h, CUSOLVER_EIG_TYPE_1, CUSOLVER_EIG_MODE_VECTOR, \
                                            CUBLAS_FILL_MODE_UPPER, n, a, n, b, n, w, lwork); \
    }                                                                                         \
    static cusolverStatus_t Sygvd(cusolverDnHandle_t h, int n, T* a, T* b, R* w, T* work,     \
                                  int lwork, int* info) {                                     \
      return cusolverDn##SYGVD(h, CUSOLVER_EIG_TYPE_1, CUSOLVER_EIG_MODE_VECTOR,              \
                               CUBLAS_FILL_MODE_UPPER, n, a, n, b, n, w, work, lwork, info);  \
    }                                                                                         \
    static cusolverStatus_t OrgqrSize(cusolverDnHandle_t h, int m, int k, T* a, T* tau,       \
                                      int* lwork) {                                           \
      return cusolverDn##ORGQR##_bufferSize(h, m, k, k, a, m, tau, lwork);                    \
    }                                                                                         \
    static cusolverStatus_t Orgqr(cusolverDnHandle_t h, int m, int k, T* a, T* tau, T* work,  \
                                  int lwork, int* info) {                                     \
      return cusolverDn##ORGQR(h, m, k, k, a, m, tau, work, lwork, info);                     \
    }                                                                                         \
  };

JAXSOLVE_TYPED(float, float, Ssytrd, Ssygvd, Sorgqr)
JAXSOLVE_TYPED(double, double, Dsytrd, Dsygvd, Dorgqr)
JAXSOLVE_TYPED(cuFloatComplex, float, Chetrd, Chegvd, Cungqr)
JAXSOLVE_TYPED(cuDoubleComplex, double, Zhetrd, Zhegvd, Zungqr)
#undef JAXSOLVE_TYPED

// ----------------------------------------------------------------- helpers

ffi::Error CheckSquare(const char* routine, const ffi::AnyBuffer& a, int64_t* n) {
  const auto dims = a.dimensions();
  if (dims.size() != 2 || dims[0] != dims[1]) {
    return ffi::Error::InvalidArgument(std::string(routine) + ": expected a square matrix");
  }
  *n = dims[0];
  return ffi::Error::Success();
}

ffi::Error CheckInt32(const char* routine, int64_t value) {
  if (value > INT_MAX) {
    return ffi::Error::InvalidArgument(
        std::string(routine) + ": cuSOLVER's 32-bit routine takes dimensions below 2^31, got " +
        std::to_string(value));
  }
  return ffi::Error::Success();
}

// Makes `out` hold `in` when XLA could not alias them (`in` is still needed).
ffi::Error CopyIfNotAliased(cudaStream_t stream, const ffi::AnyBuffer& in, ffi::AnyBuffer* out) {
  if (in.untyped_data() == out->untyped_data()) return ffi::Error::Success();
  JAXSOLVE_CUDA(cudaMemcpyAsync(out->untyped_data(), in.untyped_data(), in.size_bytes(),
                                cudaMemcpyDeviceToDevice, stream));
  return ffi::Error::Success();
}

// The start of a 32-bit cuSOLVER routine on a square A written over `out`: n
// (below 2^31), and A copied into `out` unless XLA aliased them.
ffi::Error StartSquare32(const char* routine, cudaStream_t stream, const ffi::AnyBuffer& a,
                         ffi::AnyBuffer* out, int64_t* n) {
  JAXSOLVE_RETURN_IF_ERROR(CheckSquare(routine, a, n));
  JAXSOLVE_RETURN_IF_ERROR(CheckInt32(routine, *n));
  return CopyIfNotAliased(stream, a, out);
}

// The start of a factorization of a square A into `out`: n, and A copied into
// `out` unless XLA aliased them. For n = 0 it sets info = 0 and `*empty`.
ffi::Error StartFactorization(const char* routine, cudaStream_t stream, const ffi::AnyBuffer& a,
                              ffi::AnyBuffer* out, int* info, int64_t* n, bool* empty) {
  JAXSOLVE_RETURN_IF_ERROR(CheckSquare(routine, a, n));
  JAXSOLVE_RETURN_IF_ERROR(CopyIfNotAliased(stream, a, out));
  *empty = *n == 0;
  if (*empty) JAXSOLVE_CUDA(cudaMemsetAsync(info, 0, sizeof(int), stream));
  return ffi::Error::Success();
}

// V (n x n) and w NaN when info != 0; the last step of every eigensolver.
template <typename T, typename Real>
ffi::Error NanEigenpairsIfFailed(cudaStream_t stream, T* v, Real* w, int64_t n,
                                 const int* info) {
  NanIfFailed(stream, v, n * n, info);
  NanIfFailed(stream, w, n, info);
  JAXSOLVE_CUDA(cudaGetLastError());
  return ffi::Error::Success();
}

// After cuSOLVER's eigensolver of conj(A): the column-major eigenvectors of
// conj(A) (row-major, Vᴴ) conjugate-transposed in place into V, and V and w
// NaN when info != 0.
template <typename T, typename Real>
ffi::Error FinishEigenvectors(cudaStream_t stream, T* v, Real* w, int64_t n, const int* info) {
  ConjugateTranspose(stream, v, n);
  return NanEigenpairsIfFailed(stream, v, w, n, info);
}

// The stream's context, its workspace sizes for `key` (from `query` the first
// time), and the workspace: `aux` bytes for the handler, then cuSOLVER's.
struct Call {
  Context* context = nullptr;
  std::unique_lock<std::mutex> lock;
  WorkspaceSizes sizes;
  void* aux = nullptr;
  void* device = nullptr;
  void* host = nullptr;

  template <typename Query>
  ffi::Error Begin(cudaStream_t stream, const SizeKey& key, size_t aux_bytes, Query&& query) {
    JAXSOLVE_RETURN_IF_ERROR(Context::Of(stream, &context, &lock));
    JAXSOLVE_RETURN_IF_ERROR(context->Sizes(key, query, &sizes));
    return context->Workspace(stream, aux_bytes, sizes, &aux, &device, &host);
  }
  cusolverDnHandle_t handle() const { return context->handle(); }
  cusolverDnParams_t params() const { return context->params(); }
};

ffi::Error NoQuery(WorkspaceSizes*) { return ffi::Error::Success(); }

// --------------------------------------------- syevd's back-transformation
//
// sytrd(LOWER) leaves A = Q T Qᴴ with Q = H(0) H(1) ... H(n-2), H(i) =
// I - tau_i v_i v_iᴴ, v_i zero above row i + 1, one there, and rows i + 2 on
// stored below the diagonal in column i of A's buffer (column-major). The
// eigenvectors of A are Q Z for those Z of T, applied kReflectorBlock
// reflectors at a time, the last block first: a block's product is
// B = I - V S Vᴴ (S upper triangular, LAPACK's larft), so that
//   Z <- B Z = Z - V (S (Vᴴ Z))
// is three matrix products on cuBLAS and O(kReflectorBlock n) workspace.
// They run on Zᵀ, column-major (Z row-major, as the tridiagonal solver's
// threads write it coalesced, and as JAX reads V): Zᵀ <- Zᵀ Bᵀ =
// Zᵀ - (S Vᴴ Z)ᵀ Vᵀ, transposes only, no conjugates. 256 reflectors a block:
// the update's products have an inner dimension of 256, where 128 left the
// H200's FP64 tensor cores at about 28 TFLOP/s.

constexpr int kReflectorBlock = 256;

// V (column-major m x kb, m = n - 1 - j) of reflectors j .. j + kb - 1 from
// A's buffer, with its implicit ones and zeros made explicit.
template <typename T>
__global__ void ReflectorBlockKernel(const T* a, int64_t n, int64_t j, int64_t kb, T* v) {
  const int64_t m = n - 1 - j;
  for (int64_t c = blockIdx.y; c < kb; c += gridDim.y) {
    const T* column = a + (j + c) * n + (j + 1);
    for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < m;
         r += int64_t{gridDim.x} * blockDim.x) {
      v[c * m + r] = r < c ? Zero<T>() : r == c ? FromReal<T>(1.0) : column[r];
    }
  }
}

// S (column-major kb x kb, upper triangular) with V's block product
// I - V S Vᴴ, from G = Vᴴ V and tau: S(c, c) = tau_c and
// S(0:c, c) = -tau_c S(0:c, 0:c) G(0:c, c), column after column. One thread
// block of kReflectorBlock threads, a row each.
template <typename T>
__global__ void LarftKernel(const T* g, const T* tau, int kb, T* s) {
  __shared__ T scaled[kReflectorBlock];
  const int i = threadIdx.x;
  for (int c = 0; c < kb; ++c) {
    if (i < c) scaled[i] = Negate(Mul(tau[c], g[c * kb + i]));
    __syncthreads();
    if (i < kb) {
      T sum = Zero<T>();
      if (i < c) {
        for (int l = i; l < c; ++l) sum = Add(sum, Mul(s[l * kb + i], scaled[l]));
      } else if (i == c) {
        sum = tau[c];
      }
      s[c * kb + i] = sum;  // row i of column c: only thread i reads it later
    }
    __syncthreads();
  }
}

// C = alpha op_a(A) op_b(B) + beta C on cuBLAS, column-major, C m x n.
template <typename T>
ffi::Error Gemm(cublasHandle_t blas, cublasOperation_t op_a, cublasOperation_t op_b, int64_t m,
                int64_t n, int64_t k, double alpha, const T* a, int64_t lda, const T* b,
                int64_t ldb, double beta, T* c, int64_t ldc) {
  constexpr cudaDataType kType = Scalar<T>::kType;
  const T alpha_t = FromReal<T>(alpha), beta_t = FromReal<T>(beta);
  return CublasError(
      cublasGemmEx(blas, op_a, op_b, static_cast<int>(m), static_cast<int>(n),
                   static_cast<int>(k), &alpha_t, a, kType, static_cast<int>(lda), b, kType,
                   static_cast<int>(ldb), &beta_t, c, kType, static_cast<int>(ldc),
                   Scalar<T>::kCompute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

// The workspace of ApplyReflectors, carved from `base`: V (n x kb), G and S
// (kb x kb), Vᴴ Z and S Vᴴ Z (kb x n).
template <typename T>
struct ReflectorWorkspace {
  T* v;
  T* g;
  T* s;
  T* product;
  T* scaled;

  static size_t Bytes(int64_t n) {
    const int64_t kb = kReflectorBlock;
    return AuxBytes(n * kb * sizeof(T)) + 2 * AuxBytes(kb * kb * sizeof(T)) +
           2 * AuxBytes(kb * n * sizeof(T));
  }

  explicit ReflectorWorkspace(void* base, int64_t n) {
    const int64_t kb = kReflectorBlock;
    char* at = static_cast<char*>(base);
    auto take = [&](size_t bytes) {
      T* here = reinterpret_cast<T*>(at);
      at += AuxBytes(bytes);
      return here;
    };
    v = take(n * kb * sizeof(T));
    g = take(kb * kb * sizeof(T));
    s = take(kb * kb * sizeof(T));
    product = take(kb * n * sizeof(T));
    scaled = take(kb * n * sizeof(T));
  }
};

// Zᵀ (column-major n x n: Z row-major) <- (Q Z)ᵀ, Q from the reflectors
// sytrd(LOWER) left in `a` and `tau`.
template <typename T>
ffi::Error ApplyReflectors(cudaStream_t stream, cublasHandle_t blas, const T* a, const T* tau,
                           int64_t n, T* zt, const ReflectorWorkspace<T>& work) {
  if (n < 2) return ffi::Error::Success();  // Q = I
  constexpr cublasOperation_t kN = CUBLAS_OP_N, kT = CUBLAS_OP_T, kC = CUBLAS_OP_C;
  for (int64_t j = (n - 2) / kReflectorBlock * kReflectorBlock; j >= 0; j -= kReflectorBlock) {
    const int64_t kb = std::min<int64_t>(kReflectorBlock, n - 1 - j), m = n - 1 - j;
    T* columns = zt + (j + 1) * n;  // Zᵀ(:, j + 1:n) = Z(j + 1:n, :)ᵀ, n x m
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>((m + kThreads - 1) / kThreads, 64)),
                    static_cast<unsigned>(kb));
    ReflectorBlockKernel<T><<<grid, kThreads, 0, stream>>>(a, n, j, kb, work.v);
    JAXSOLVE_RETURN_IF_ERROR(
        Gemm<T>(blas, kC, kN, kb, kb, m, 1.0, work.v, m, work.v, m, 0.0, work.g, kb));
    LarftKernel<T><<<1, kReflectorBlock, 0, stream>>>(work.g, tau + j, static_cast<int>(kb),
                                                      work.s);
    // product = Vᴴ Z(j + 1:n, :), scaled = S product (kb x n), then
    // Zᵀ(:, j + 1:n) -= scaledᵀ Vᵀ.
    JAXSOLVE_RETURN_IF_ERROR(
        Gemm<T>(blas, kC, kT, kb, n, m, 1.0, work.v, m, columns, n, 0.0, work.product, kb));
    JAXSOLVE_RETURN_IF_ERROR(Gemm<T>(blas, kN, kN, kb, n, kb, 1.0, work.s, kb, work.product, kb,
                                     0.0, work.scaled, kb));
    JAXSOLVE_RETURN_IF_ERROR(
        Gemm<T>(blas, kT, kT, n, m, kb, -1.0, work.scaled, kb, work.v, m, 1.0, columns, n));
  }
  JAXSOLVE_CUDA(cudaGetLastError());
  return ffi::Error::Success();
}

// info += unconverged (both device ints), so that one info says whether
// either step failed.
__global__ void AccumulateInfoKernel(int* info, const int* unconverged) { *info += *unconverged; }

// -------------------------------------------------------------------- cores

// A (n x n, Hermitian, its lower triangle read) -> Lᵀ, where A = L Lᴴ, written
// over A (row-major; column-major it is L, lower, zero above the diagonal);
// info as potrf's, or -1 (NOT_FINITE) where that triangle holds NaN or Inf.
// NaN on failure.
template <typename T>
ffi::Error Potrf(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> l,
                 ffi::Result<ffi::Buffer<ffi::S32>> info) {
  constexpr cudaDataType kType = Scalar<T>::kType;
  int64_t n;
  bool empty;
  int* d_info = info->typed_data();
  JAXSOLVE_RETURN_IF_ERROR(StartFactorization("potrf", stream, a, &*l, d_info, &n, &empty));
  if (empty) return ffi::Error::Success();
  T* data = static_cast<T*>(l->untyped_data());
  Call call;
  JAXSOLVE_RETURN_IF_ERROR(call.Begin(stream, {kPotrf, kType, n, 0, 0}, sizeof(int),
                                      [&](WorkspaceSizes* s) {
    return CusolverError(
        cusolverDnXpotrf_bufferSize(call.handle(), call.params(), CUBLAS_FILL_MODE_LOWER, n, kType,
                                    data, n, kType, &s->device, &s->host),
        "cusolverDnXpotrf_bufferSize");
  }));
  int* not_finite = static_cast<int*>(call.aux);
  JAXSOLVE_CUDA(cudaMemsetAsync(not_finite, 0, sizeof(int), stream));
  MirrorLower(stream, data, n, not_finite);
  JAXSOLVE_CUSOLVER(cusolverDnXpotrf(call.handle(), call.params(), CUBLAS_FILL_MODE_LOWER, n,
                                     kType, data, n, kType, call.device, call.sizes.device,
                                     call.host, call.sizes.host, d_info));
  MarkNotFiniteKernel<<<1, 1, 0, stream>>>(d_info, not_finite);
  FinishCholesky(stream, data, n, d_info);
  JAXSOLVE_CUDA(cudaGetLastError());
  return ffi::Error::Success();
}

// The factor from Potrf, B (k x n row-major: n x k column-major) -> X over B
// with A X = B.
template <typename T>
ffi::Error Potrs(cudaStream_t stream, ffi::AnyBuffer l, ffi::AnyBuffer b,
                 ffi::Result<ffi::AnyBuffer> x) {
  constexpr cudaDataType kType = Scalar<T>::kType;
  int64_t n;
  JAXSOLVE_RETURN_IF_ERROR(CheckSquare("potrs", l, &n));
  const int64_t k = b.element_count() / std::max<int64_t>(n, 1);
  JAXSOLVE_RETURN_IF_ERROR(CopyIfNotAliased(stream, b, &*x));
  if (n == 0 || k == 0) return ffi::Error::Success();
  Call call;
  JAXSOLVE_RETURN_IF_ERROR(call.Begin(stream, {kPotrf, kType, -1, 0, 0}, sizeof(int), NoQuery));
  JAXSOLVE_CUSOLVER(cusolverDnXpotrs(call.handle(), call.params(), CUBLAS_FILL_MODE_LOWER, n, k,
                                     kType, l.untyped_data(), n, kType, x->untyped_data(), n,
                                     static_cast<int*>(call.aux)));
  return ffi::Error::Success();
}

// A (n x n) -> the LU factorization of Aᵀ (A's buffer read column-major),
// Aᵀ = P L U, over A; pivots 0-based (row i was swapped with pivots[i]); info
// as getrf's. The factor is NaN when info != 0.
template <typename T>
ffi::Error Getrf(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> lu,
                 ffi::Result<ffi::Buffer<ffi::S32>> pivots,
                 ffi::Result<ffi::Buffer<ffi::S32>> info) {
  constexpr cudaDataType kType = Scalar<T>::kType;
  int64_t n;
  bool empty;
  int* d_info = info->typed_data();
  JAXSOLVE_RETURN_IF_ERROR(StartFactorization("getrf", stream, a, &*lu, d_info, &n, &empty));
  if (empty) return ffi::Error::Success();
  T* data = static_cast<T*>(lu->untyped_data());
  Call call;
  JAXSOLVE_RETURN_IF_ERROR(
      call.Begin(stream, {kGetrf, kType, n, 0, 0}, n * sizeof(int64_t), [&](WorkspaceSizes* s) {
        return CusolverError(cusolverDnXgetrf_bufferSize(call.handle(), call.params(), n, n, kType,
                                                         data, n, kType, &s->device, &s->host),
                             "cusolverDnXgetrf_bufferSize");
      }));
  int64_t* ipiv = static_cast<int64_t*>(call.aux);
  JAXSOLVE_CUSOLVER(cusolverDnXgetrf(call.handle(), call.params(), n, n, kType, data, n, ipiv,
                                     kType, call.device, call.sizes.device, call.host,
                                     call.sizes.host, d_info));
  ZeroBasedPivotsKernel<<<Blocks(n), kThreads, 0, stream>>>(ipiv, pivots->typed_data(), n);
  NanIfFailed(stream, data, n * n, d_info);
  JAXSOLVE_CUDA(cudaGetLastError());
  return ffi::Error::Success();
}

// LU and pivots from Getrf, B (k x n row-major: n x k column-major) -> X over
// B with A X = B, or Aᵀ X = B when `transpose` (getrs 'T' and 'N' of Aᵀ).
template <typename T>
ffi::Error Getrs(cudaStream_t stream, ffi::AnyBuffer lu, ffi::Buffer<ffi::S32> pivots,
                 ffi::AnyBuffer b, int64_t transpose, ffi::Result<ffi::AnyBuffer> x) {
  constexpr cudaDataType kType = Scalar<T>::kType;
  int64_t n;
  JAXSOLVE_RETURN_IF_ERROR(CheckSquare("getrs", lu, &n));
  const int64_t k = b.element_count() / std::max<int64_t>(n, 1);
  JAXSOLVE_RETURN_IF_ERROR(CopyIfNotAliased(stream, b, &*x));
  if (n == 0 || k == 0) return ffi::Error::Success();
  Call call;
  const size_t pivot_bytes = AuxBytes(n * sizeof(int64_t));
  JAXSOLVE_RETURN_IF_ERROR(
      call.Begin(stream, {kGetrf, kType, -1, 0, 0}, pivot_bytes + sizeof(int), NoQuery));
  int64_t* ipiv = static_cast<int64_t*>(call.aux);
  int* d_info = reinterpret_cast<int*>(static_cast<char*>(call.aux) + pivot_bytes);
  OneBasedPivotsKernel<<<Blocks(n), kThreads, 0, stream>>>(pivots.typed_data(), ipiv, n);
  JAXSOLVE_CUDA(cudaGetLastError());
  JAXSOLVE_CUSOLVER(cusolverDnXgetrs(call.handle(), call.params(),
                                     transpose ? CUBLAS_OP_N : CUBLAS_OP_T, n, k, kType,
                                     lu.untyped_data(), n, ipiv, kType, x->untyped_data(), n,
                                     d_info));
  return ffi::Error::Success();
}

// A (n x n, Hermitian, lower triangle read) -> V over A (row-major, the
// eigenvectors are its columns) and w ascending, A = V diag(w) Vᴴ. cuSOLVER
// decomposes conj(A), whose eigenvectors are conj(V): its column-major result
// is Vᴴ row-major, conjugate-transposed in place. NaN on failure.
template <typename T>
ffi::Error Syevd(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> v,
                 ffi::Result<ffi::AnyBuffer> w) {
  constexpr cudaDataType kType = Scalar<T>::kType, kReal = Scalar<T>::kRealType;
  using Real = typename Scalar<T>::Real;
  int64_t n;
  JAXSOLVE_RETURN_IF_ERROR(CheckSquare("syevd", a, &n));
  JAXSOLVE_RETURN_IF_ERROR(CopyIfNotAliased(stream, a, &*v));
  if (n == 0) return ffi::Error::Success();
  T* data = static_cast<T*>(v->untyped_data());
  Real* values = static_cast<Real*>(w->untyped_data());
  Call call;
  JAXSOLVE_RETURN_IF_ERROR(call.Begin(stream, {kSyevd, kType, n, 0, 0}, sizeof(int), [&](WorkspaceSizes* s) {
    return CusolverError(
        cusolverDnXsyevd_bufferSize(call.handle(), call.params(), CUSOLVER_EIG_MODE_VECTOR,
                                    CUBLAS_FILL_MODE_UPPER, n, kType, data, n, kReal, values,
                                    kType, &s->device, &s->host),
        "cusolverDnXsyevd_bufferSize");
  }));
  int* d_info = static_cast<int*>(call.aux);
  JAXSOLVE_CUSOLVER(cusolverDnXsyevd(call.handle(), call.params(), CUSOLVER_EIG_MODE_VECTOR,
                                     CUBLAS_FILL_MODE_UPPER, n, kType, data, n, kReal, values,
                                     kType, call.device, call.sizes.device, call.host,
                                     call.sizes.host, d_info));
  return FinishEigenvectors(stream, data, values, n, d_info);
}

// Syevd's results in one n x n matrix of workspace (Xsyevd asks for about
// four):
//   1. A's lower triangle is mirrored into its upper one, so that read
//      column-major the buffer holds A itself (not conj(A));
//   2. sytrd(LOWER) reduces it in place, A = Q T Qᴴ (T real tridiagonal, the
//      reflectors of Q below the diagonal);
//   3. the tridiagonal eigensolver (tridiagonal_eigh_cuda.h) writes w and T's
//      eigenvectors Z into the workspace matrix, row-major (coalesced);
//   4. Z <- Q Z there, in blocks of reflectors (ApplyReflectors, on Zᵀ);
//   5. V = Q Z, row-major as JAX reads it, is copied into A's buffer.
// NaN on failure (an eigenvector whose iteration did not converge).
template <typename T>
ffi::Error LeanSyevd(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> v,
                     ffi::Result<ffi::AnyBuffer> w) {
  constexpr cudaDataType kType = Scalar<T>::kType;
  using Real = typename Scalar<T>::Real;
  int64_t n;
  JAXSOLVE_RETURN_IF_ERROR(StartSquare32("lean syevd", stream, a, &*v, &n));
  if (n == 0) return ffi::Error::Success();
  T* data = static_cast<T*>(v->untyped_data());
  Real* values = static_cast<Real*>(w->untyped_data());
  // The handler's part of the workspace: two infos, T's diagonals, tau, and
  // then the tridiagonal solver's scratch, later the reflector blocks'.
  const size_t infos = AuxBytes(2 * sizeof(int)), diagonal = AuxBytes(n * sizeof(Real)),
               taus = AuxBytes(n * sizeof(T));
  const size_t scratch = std::max(TridiagonalScratchBytes(n), ReflectorWorkspace<T>::Bytes(n));
  Call call;
  JAXSOLVE_RETURN_IF_ERROR(call.Begin(
      stream, {kLeanSyevd, kType, n, 0, 0}, infos + 2 * diagonal + taus + scratch,
      [&](WorkspaceSizes* sizes) {
        int lwork = 0;
        JAXSOLVE_CUSOLVER(Typed<T>::SytrdSize(call.handle(), static_cast<int>(n), data, values,
                                              values, data, &lwork));
        // sytrd's workspace, then Z: one n x n matrix serves both.
        sizes->device = std::max<size_t>(static_cast<size_t>(n) * n, std::max(lwork, 0)) *
                        sizeof(T);
        return ffi::Error::Success();
      }));
  char* aux = static_cast<char*>(call.aux);
  int* d_info = reinterpret_cast<int*>(aux);
  int* unconverged = d_info + 1;
  Real* diag = reinterpret_cast<Real*>(aux + infos);
  Real* offdiag = reinterpret_cast<Real*>(aux + infos + diagonal);
  T* tau = reinterpret_cast<T*>(aux + infos + 2 * diagonal);
  void* scratch_base = aux + infos + 2 * diagonal + taus;
  T* z = static_cast<T*>(call.device);
  cublasHandle_t blas;
  JAXSOLVE_RETURN_IF_ERROR(call.context->Blas(&blas));

  MirrorLower(stream, data, n);
  const int lwork = static_cast<int>(std::min<size_t>(call.sizes.device / sizeof(T), INT_MAX));
  JAXSOLVE_CUSOLVER(Typed<T>::Sytrd(call.handle(), static_cast<int>(n), data, diag, offdiag, tau,
                                    z, lwork, d_info));
  JAXSOLVE_CUDA(TridiagonalEighGpu<Real>(
      stream, diag, offdiag, n, values, reinterpret_cast<Real*>(z),
      EigenvectorLayout{sizeof(T) / sizeof(Real), /*row_major=*/true}, scratch_base,
      unconverged));
  JAXSOLVE_RETURN_IF_ERROR(
      ApplyReflectors<T>(stream, blas, data, tau, n, z, ReflectorWorkspace<T>(scratch_base, n)));
  JAXSOLVE_CUDA(cudaMemcpyAsync(data, z, static_cast<size_t>(n) * n * sizeof(T),
                                cudaMemcpyDeviceToDevice, stream));
  AccumulateInfoKernel<<<1, 1, 0, stream>>>(d_info, unconverged);
  return NanEigenpairsIfFailed(stream, data, values, n, d_info);
}

// A, B (n x n, Hermitian, B positive definite, lower triangles read) -> V
// over A with A V = B V diag(w), Vᴴ B V = I; B's Cholesky factor over B; w
// ascending. As Syevd, cuSOLVER solves the conjugate problem and V is
// conjugate-transposed in place. NaN on failure.
template <typename T>
ffi::Error Sygvd(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                 ffi::Result<ffi::AnyBuffer> v, ffi::Result<ffi::AnyBuffer> l,
                 ffi::Result<ffi::AnyBuffer> w) {
  constexpr cudaDataType kType = Scalar<T>::kType;
  using Real = typename Scalar<T>::Real;
  int64_t n;
  JAXSOLVE_RETURN_IF_ERROR(StartSquare32("sygvd", stream, a, &*v, &n));
  JAXSOLVE_RETURN_IF_ERROR(CopyIfNotAliased(stream, b, &*l));
  if (n == 0) return ffi::Error::Success();
  T* data = static_cast<T*>(v->untyped_data());
  T* factor = static_cast<T*>(l->untyped_data());
  Real* values = static_cast<Real*>(w->untyped_data());
  Call call;
  JAXSOLVE_RETURN_IF_ERROR(call.Begin(stream, {kSygvd, kType, n, 0, 0}, sizeof(int), [&](WorkspaceSizes* s) {
    int lwork = 0;
    JAXSOLVE_CUSOLVER(Typed<T>::SygvdSize(call.handle(), static_cast<int>(n), data, factor,
                                          values, &lwork));
    if (lwork < 0) return CheckInt32("sygvd's workspace", INT64_MAX);
    s->device = static_cast<size_t>(lwork) * sizeof(T);
    return ffi::Error::Success();
  }));
  int* d_info = static_cast<int*>(call.aux);
  JAXSOLVE_CUSOLVER(Typed<T>::Sygvd(call.handle(), static_cast<int>(n), data, factor, values,
                                    static_cast<T*>(call.device),
                                    static_cast<int>(call.sizes.device / sizeof(T)), d_info));
  return FinishEigenvectors(stream, data, values, n, d_info);
}

// A given as its transpose, an (n, m) row-major array (A column-major,
// m x n) -> Q (m x k column-major, k = min(m, n)) in the leading m*k
// elements of that buffer, and R (k x n column-major: an (n, k) array).
template <typename T>
ffi::Error Qr(cudaStream_t stream, ffi::AnyBuffer at, ffi::Result<ffi::AnyBuffer> q,
              ffi::Result<ffi::AnyBuffer> r) {
  constexpr cudaDataType kType = Scalar<T>::kType;
  const auto dims = at.dimensions();
  if (dims.size() != 2) return ffi::Error::InvalidArgument("qr: expected a matrix");
  const int64_t n = dims[0], m = dims[1], k = std::min(m, n);
  JAXSOLVE_RETURN_IF_ERROR(CheckInt32("qr", m));
  JAXSOLVE_RETURN_IF_ERROR(CheckInt32("qr", n));
  JAXSOLVE_RETURN_IF_ERROR(CopyIfNotAliased(stream, at, &*q));
  if (k == 0) return ffi::Error::Success();
  T* data = static_cast<T*>(q->untyped_data());
  Call call;
  const size_t tau_bytes = AuxBytes(k * sizeof(T));
  JAXSOLVE_RETURN_IF_ERROR(call.Begin(stream, {kQr, kType, m, n, 0}, tau_bytes + sizeof(int), [&](WorkspaceSizes* s) {
    JAXSOLVE_CUSOLVER(cusolverDnXgeqrf_bufferSize(call.handle(), call.params(), m, n, kType, data,
                                                  m, kType, data, kType, &s->device, &s->host));
    int lwork = 0;
    JAXSOLVE_CUSOLVER(Typed<T>::OrgqrSize(call.handle(), static_cast<int>(m),
                                          static_cast<int>(k), data, data, &lwork));
    s->device = std::max(s->device, static_cast<size_t>(lwork) * sizeof(T));
    return ffi::Error::Success();
  }));
  T* tau = static_cast<T*>(call.aux);
  int* d_info = reinterpret_cast<int*>(static_cast<char*>(call.aux) + tau_bytes);
  JAXSOLVE_CUSOLVER(cusolverDnXgeqrf(call.handle(), call.params(), m, n, kType, data, m, kType,
                                     tau, kType, call.device, call.sizes.device, call.host,
                                     call.sizes.host, d_info));
  T* upper = static_cast<T*>(r->untyped_data());
  UpperTrapezoidKernel<T><<<Blocks(k * n), kThreads, 0, stream>>>(data, m, upper, k, n);
  JAXSOLVE_CUDA(cudaGetLastError());
  JAXSOLVE_CUSOLVER(Typed<T>::Orgqr(call.handle(), static_cast<int>(m), static_cast<int>(k),
                                    data, tau, static_cast<T*>(call.device),
                                    static_cast<int>(call.sizes.device / sizeof(T)), d_info));
  NanIfFailed(stream, data, m * k, d_info);
  NanIfFailed(stream, upper, k * n, d_info);
  JAXSOLVE_CUDA(cudaGetLastError());
  return ffi::Error::Success();
}

// X given as a (q, p) row-major array, i.e. a column-major p x q matrix with
// p >= q -> X = U diag(s) Vᴴ: U (p x q column-major) over X, s descending,
// Vᴴ (q x q column-major). NaN on failure.
template <typename T>
ffi::Error Gesvd(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> u,
                 ffi::Result<ffi::AnyBuffer> s, ffi::Result<ffi::AnyBuffer> vt) {
  constexpr cudaDataType kType = Scalar<T>::kType, kReal = Scalar<T>::kRealType;
  using Real = typename Scalar<T>::Real;
  const auto dims = x.dimensions();
  if (dims.size() != 2 || dims[1] < dims[0]) {
    return ffi::Error::InvalidArgument("gesvd: expected a (q, p) array with p >= q");
  }
  const int64_t q = dims[0], p = dims[1];
  JAXSOLVE_RETURN_IF_ERROR(CopyIfNotAliased(stream, x, &*u));
  if (q == 0) return ffi::Error::Success();
  T* data = static_cast<T*>(u->untyped_data());
  Real* values = static_cast<Real*>(s->untyped_data());
  T* right = static_cast<T*>(vt->untyped_data());
  Call call;
  JAXSOLVE_RETURN_IF_ERROR(call.Begin(stream, {kGesvd, kType, p, q, 0}, sizeof(int), [&](WorkspaceSizes* sizes) {
    return CusolverError(
        cusolverDnXgesvd_bufferSize(call.handle(), call.params(), 'O', 'S', p, q, kType, data, p,
                                    kReal, values, kType, nullptr, p, kType, right, q, kType,
                                    &sizes->device, &sizes->host),
        "cusolverDnXgesvd_bufferSize");
  }));
  int* d_info = static_cast<int*>(call.aux);
  JAXSOLVE_CUSOLVER(cusolverDnXgesvd(call.handle(), call.params(), 'O', 'S', p, q, kType, data, p,
                                     kReal, values, kType, nullptr, p, kType, right, q, kType,
                                     call.device, call.sizes.device, call.host, call.sizes.host,
                                     d_info));
  NanIfFailed(stream, data, p * q, d_info);
  NanIfFailed(stream, values, q, d_info);
  NanIfFailed(stream, right, q * q, d_info);
  JAXSOLVE_CUDA(cudaGetLastError());
  return ffi::Error::Success();
}

// ------------------------------------------------------------------ entries

#define JAXSOLVE_DISPATCH(core, routine, buffer, ...)                       \
  DispatchDtype((buffer).element_type(), routine, [&](auto tag) {            \
    return core<typename decltype(tag)::type>(__VA_ARGS__);                \
  })

ffi::Error PotrfEntry(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> l,
                      ffi::Result<ffi::Buffer<ffi::S32>> info) {
  return JAXSOLVE_DISPATCH(Potrf, "potrf", a, stream, a, l, info);
}

ffi::Error PotrsEntry(cudaStream_t stream, ffi::AnyBuffer l, ffi::AnyBuffer b,
                      ffi::Result<ffi::AnyBuffer> x) {
  return JAXSOLVE_DISPATCH(Potrs, "potrs", l, stream, l, b, x);
}

ffi::Error GetrfEntry(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> lu,
                      ffi::Result<ffi::Buffer<ffi::S32>> pivots,
                      ffi::Result<ffi::Buffer<ffi::S32>> info) {
  return JAXSOLVE_DISPATCH(Getrf, "getrf", a, stream, a, lu, pivots, info);
}

ffi::Error GetrsEntry(cudaStream_t stream, ffi::AnyBuffer lu, ffi::Buffer<ffi::S32> pivots,
                      ffi::AnyBuffer b, int64_t transpose, ffi::Result<ffi::AnyBuffer> x) {
  return JAXSOLVE_DISPATCH(Getrs, "getrs", lu, stream, lu, pivots, b, transpose, x);
}

ffi::Error SyevdEntry(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> v,
                      ffi::Result<ffi::AnyBuffer> w) {
  return JAXSOLVE_DISPATCH(Syevd, "syevd", a, stream, a, v, w);
}

ffi::Error LeanSyevdEntry(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> v,
                          ffi::Result<ffi::AnyBuffer> w) {
  return JAXSOLVE_DISPATCH(LeanSyevd, "lean syevd", a, stream, a, v, w);
}

ffi::Error SygvdEntry(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                      ffi::Result<ffi::AnyBuffer> v, ffi::Result<ffi::AnyBuffer> l,
                      ffi::Result<ffi::AnyBuffer> w) {
  return JAXSOLVE_DISPATCH(Sygvd, "sygvd", a, stream, a, b, v, l, w);
}

ffi::Error QrEntry(cudaStream_t stream, ffi::AnyBuffer at, ffi::Result<ffi::AnyBuffer> q,
                   ffi::Result<ffi::AnyBuffer> r) {
  return JAXSOLVE_DISPATCH(Qr, "qr", at, stream, at, q, r);
}

ffi::Error GesvdEntry(cudaStream_t stream, ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> u,
                      ffi::Result<ffi::AnyBuffer> s, ffi::Result<ffi::AnyBuffer> vt) {
  return JAXSOLVE_DISPATCH(Gesvd, "gesvd", x, stream, x, u, s, vt);
}

#undef JAXSOLVE_DISPATCH

auto Bind() { return ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>(); }

}  // namespace
}  // namespace jaxsolve::dense

namespace jd = ::jaxsolve::dense;
namespace xffi = ::xla::ffi;

#define JAXSOLVE_HANDLER(symbol, entry, binding)                            \
  JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* symbol(XLA_FFI_CallFrame* call_frame); \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(symbol, entry, binding)

JAXSOLVE_HANDLER(JaxsolveDenseCusolverPotrf, jd::PotrfEntry,
                 jd::Bind()
                     .Arg<xffi::AnyBuffer>()
                     .Ret<xffi::AnyBuffer>()
                     .Ret<xffi::Buffer<xffi::S32>>());
JAXSOLVE_HANDLER(JaxsolveDenseCusolverPotrs, jd::PotrsEntry,
                 jd::Bind().Arg<xffi::AnyBuffer>().Arg<xffi::AnyBuffer>().Ret<xffi::AnyBuffer>());
JAXSOLVE_HANDLER(JaxsolveDenseCusolverGetrf, jd::GetrfEntry,
                 jd::Bind()
                     .Arg<xffi::AnyBuffer>()
                     .Ret<xffi::AnyBuffer>()
                     .Ret<xffi::Buffer<xffi::S32>>()
                     .Ret<xffi::Buffer<xffi::S32>>());
JAXSOLVE_HANDLER(JaxsolveDenseCusolverGetrs, jd::GetrsEntry,
                 jd::Bind()
                     .Arg<xffi::AnyBuffer>()
                     .Arg<xffi::Buffer<xffi::S32>>()
                     .Arg<xffi::AnyBuffer>()
                     .Attr<int64_t>("transpose")
                     .Ret<xffi::AnyBuffer>());
JAXSOLVE_HANDLER(JaxsolveDenseCusolverSyevd, jd::SyevdEntry,
                 jd::Bind().Arg<xffi::AnyBuffer>().Ret<xffi::AnyBuffer>().Ret<xffi::AnyBuffer>());
JAXSOLVE_HANDLER(JaxsolveDenseCusolverLeanSyevd, jd::LeanSyevdEntry,
                 jd::Bind().Arg<xffi::AnyBuffer>().Ret<xffi::AnyBuffer>().Ret<xffi::AnyBuffer>());
JAXSOLVE_HANDLER(JaxsolveDenseCusolverSygvd, jd::SygvdEntry,
                 jd::Bind()
                     .Arg<xffi::AnyBuffer>()
                     .Arg<xffi::AnyBuffer>()
                     .Ret<xffi::AnyBuffer>()
                     .Ret<xffi::AnyBuffer>()
                     .Ret<xffi::AnyBuffer>());
JAXSOLVE_HANDLER(JaxsolveDenseCusolverQr, jd::QrEntry,
                 jd::Bind().Arg<xffi::AnyBuffer>().Ret<xffi::AnyBuffer>().Ret<xffi::AnyBuffer>());
JAXSOLVE_HANDLER(JaxsolveDenseCusolverGesvd, jd::GesvdEntry,
                 jd::Bind()
                     .Arg<xffi::AnyBuffer>()
                     .Ret<xffi::AnyBuffer>()
                     .Ret<xffi::AnyBuffer>()
                     .Ret<xffi::AnyBuffer>());
