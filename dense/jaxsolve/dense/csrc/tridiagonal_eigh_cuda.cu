// The GPU driver of the tridiagonal eigensolver (tridiagonal_eigh_cuda.h).
#include "tridiagonal_eigh_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "tridiagonal_eigh.h"

namespace jaxsolve::dense {
namespace {

namespace td = tridiagonal;

constexpr int kThreads = 128;
constexpr int kClusterThreads = 256;
constexpr int kClusterBlocks = 16;  // clusters in flight; each holds 2 n DDs of scratch

int64_t PowerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The scratch, carved in this order.
struct Scratch {
  double* lambda;     // n: row i's eigenvalue
  td::Block* blocks;  // n: row i's block
  int64_t* rank;      // n: row i's eigenvalue's place in ascending order
  double* keys;       // p >= n: sort keys
  int64_t* rows;      // p: sort values (rows)
  td::DD* pivots;     // kClusterBlocks * n
  td::DD* partial;    // kClusterBlocks * n

  static size_t Bytes(int64_t n) {
    const int64_t p = PowerOfTwoAtLeast(std::max<int64_t>(n, 1));
    return Aligned(n * sizeof(double)) + Aligned(n * sizeof(td::Block)) +
           Aligned(n * sizeof(int64_t)) + Aligned(p * sizeof(double)) +
           Aligned(p * sizeof(int64_t)) + 2 * Aligned(kClusterBlocks * n * sizeof(td::DD));
  }

  Scratch(void* base, int64_t n) {
    const int64_t p = PowerOfTwoAtLeast(std::max<int64_t>(n, 1));
    char* at = static_cast<char*>(base);
    auto take = [&](size_t bytes) {
      char* here = at;
      at += Aligned(bytes);
      return here;
    };
    lambda = reinterpret_cast<double*>(take(n * sizeof(double)));
    blocks = reinterpret_cast<td::Block*>(take(n * sizeof(td::Block)));
    rank = reinterpret_cast<int64_t*>(take(n * sizeof(int64_t)));
    keys = reinterpret_cast<double*>(take(p * sizeof(double)));
    rows = reinterpret_cast<int64_t*>(take(p * sizeof(int64_t)));
    pivots = reinterpret_cast<td::DD*>(take(kClusterBlocks * n * sizeof(td::DD)));
    partial = reinterpret_cast<td::DD*>(take(kClusterBlocks * n * sizeof(td::DD)));
  }
};

// The eigenvector of rank k (the k-th smallest eigenvalue): column k of Z.
template <typename Real>
__device__ td::Column<Real> EigenvectorColumn(Real* z, int64_t n, EigenvectorLayout layout,
                                              int64_t k) {
  return layout.row_major ? td::Column<Real>{z + k * layout.stride, n * layout.stride}
                          : td::Column<Real>{z + k * n * layout.stride, layout.stride};
}

int Blocks(int64_t work, int threads) {
  return static_cast<int>(std::max<int64_t>(1, (work + threads - 1) / threads));
}

template <typename Real>
__global__ void EigenvaluesKernel(const Real* d, const Real* e, int64_t n, double* lambda,
                                  td::Block* blocks, double* keys, int64_t* rows, int64_t p) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= p) return;
  if (i < n) {
    lambda[i] = td::RowEigenvalue(d, e, n, i, &blocks[i]);
    keys[i] = lambda[i];
  } else {
    keys[i] = INFINITY;
  }
  rows[i] = i;
}

// One compare-exchange step (k, j) of a bitonic sort of (key, row) pairs.
__global__ void BitonicStepKernel(double* keys, int64_t* rows, int64_t p, int64_t k, int64_t j) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t l = i ^ j;
  if (i >= p || l <= i) return;
  const bool ascending = (i & k) == 0;
  const bool greater = keys[i] > keys[l] || (keys[i] == keys[l] && rows[i] > rows[l]);
  if (greater == ascending) {
    const double key = keys[i];
    keys[i] = keys[l];
    keys[l] = key;
    const int64_t row = rows[i];
    rows[i] = rows[l];
    rows[l] = row;
  }
}

template <typename Real>
__global__ void RanksKernel(const double* keys, const int64_t* rows, int64_t n, Real* w,
                            int64_t* rank) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= n) return;
  w[k] = static_cast<Real>(keys[k]);
  rank[rows[k]] = k;
}

template <typename Real>
__global__ void SingletonsKernel(const Real* d, const Real* e, int64_t n, const double* lambda,
                                 const td::Block* blocks, const int64_t* rank, Real* z,
                                 EigenvectorLayout layout, int* unconverged) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const td::Block b = blocks[i];
  if (td::InCluster<Real>(lambda, b, i)) return;
  if (!td::SeparatedVector(d, e, b, lambda, i, EigenvectorColumn(z, n, layout, rank[i]))) {
    atomicAdd(unconverged, 1);
  }
}

// The threads of a block as a team of tridiagonal.h's ClusterVectors.
struct BlockTeam {
  double* shared;
  __device__ int64_t rank() const { return threadIdx.x; }
  __device__ int64_t size() const { return blockDim.x; }
  __device__ void Sync() const { __syncthreads(); }
  __device__ double Sum(double partial) const {
    shared[threadIdx.x] = partial;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
      __syncthreads();
    }
    const double total = shared[0];
    __syncthreads();
    return total;
  }
};

template <typename Real>
__global__ void ClustersKernel(const Real* d, const Real* e, int64_t n, const double* lambda,
                               const td::Block* blocks, const int64_t* rank, Real* z,
                               EigenvectorLayout layout, td::DD* pivots, td::DD* partial) {
  __shared__ double sums[kClusterThreads];
  BlockTeam team{sums};
  td::DD* my_pivots = pivots + blockIdx.x * n;
  td::DD* my_partial = partial + blockIdx.x * n;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const td::Block b = blocks[i];
    if (!td::StartsCluster<Real>(lambda, b, i)) continue;
    auto column = [&](int64_t row) { return EigenvectorColumn(z, n, layout, rank[row]); };
    td::ClusterVectors<Real>(team, d, e, b, lambda, i, column, my_pivots, my_partial);
  }
}

}  // namespace

size_t TridiagonalScratchBytes(int64_t n) { return Scratch::Bytes(n); }

template <typename Real>
cudaError_t TridiagonalEighGpu(cudaStream_t stream, const Real* d, const Real* e, int64_t n,
                               Real* w, Real* z, EigenvectorLayout layout, void* scratch,
                               int* unconverged) {
  cudaMemsetAsync(unconverged, 0, sizeof(int), stream);
  if (n == 0) return cudaGetLastError();
  Scratch s(scratch, n);
  const int64_t p = PowerOfTwoAtLeast(n);
  EigenvaluesKernel<Real><<<Blocks(p, kThreads), kThreads, 0, stream>>>(d, e, n, s.lambda,
                                                                       s.blocks, s.keys, s.rows, p);
  for (int64_t k = 2; k <= p; k *= 2) {
    for (int64_t j = k / 2; j > 0; j /= 2) {
      BitonicStepKernel<<<Blocks(p, 256), 256, 0, stream>>>(s.keys, s.rows, p, k, j);
    }
  }
  RanksKernel<Real><<<Blocks(n, 256), 256, 0, stream>>>(s.keys, s.rows, n, w, s.rank);
  if (z != nullptr) {
    cudaMemsetAsync(z, 0, static_cast<size_t>(n) * n * layout.stride * sizeof(Real), stream);
    SingletonsKernel<Real><<<Blocks(n, kThreads), kThreads, 0, stream>>>(
        d, e, n, s.lambda, s.blocks, s.rank, z, layout, unconverged);
    ClustersKernel<Real><<<static_cast<int>(std::min<int64_t>(kClusterBlocks, n)),
                           kClusterThreads, 0, stream>>>(d, e, n, s.lambda, s.blocks, s.rank, z,
                                                         layout, s.pivots, s.partial);
  }
  return cudaGetLastError();
}

template cudaError_t TridiagonalEighGpu<float>(cudaStream_t, const float*, const float*, int64_t,
                                               float*, float*, EigenvectorLayout, void*, int*);
template cudaError_t TridiagonalEighGpu<double>(cudaStream_t, const double*, const double*,
                                                int64_t, double*, double*, EigenvectorLayout,
                                                void*, int*);

}  // namespace jaxsolve::dense
