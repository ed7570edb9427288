// CUDA entry of libjaxsolve_sparse_cuda<major>.so: the FFI handler
// JaxsolveSparseCsrMatvec (target jaxsolve_sparse_csr_matvec), which runs the
// product of spmv.h as one kernel on XLA's stream. The launch is
// asynchronous: the handler never synchronizes with the host, and reports
// launch errors through cudaGetLastError().
//
// The kernel streams A through shared memory. A thread block owns `rows`
// consecutive rows and `columns` columns of one pass, and their entries are
// contiguous in `values` and `indices`. Tile by tile, every thread loads
// several of those entries at once (values and indices, then the x they
// select), coalesced and all in flight together, and stores their products
// in shared memory; then `lanes` threads per output (row, column) sum that
// output's products and combine their partial sums with warp shuffles. A
// vector kernel (a warp or a few threads per row) has one load per thread in
// flight on the short rows of stencil matrices (7 entries for a 7-point
// Laplacian) and waits on each; this one keeps enough bytes in flight to
// stream A at close to copy bandwidth. Every output is written once, by one
// thread: no atomics.
//
// `lanes` follows the mean row length, chosen on the host from the buffer
// shapes: one thread sums up to 8 products, more lanes share longer rows. A
// pass's columns (vmap over right-hand sides) are formed together from one
// read of A, up to kMaxColumns per block.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "layout/jaxsolve/layout/csrc/cuda_error.h"
#include "spmv.h"
#include "spmv_ffi.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::sparse {
namespace {

constexpr int kThreads = 256;          // per block
constexpr int kTileBytes = 16 * 1024;  // staged products per block
constexpr int kMaxColumns = 8;         // per block
constexpr int kProductsPerLane = 8;    // mean row length a lane sums
constexpr int64_t kMaxGrid = (int64_t{1} << 31) - 1;

// Products in one tile.
template <typename T>
__host__ __device__ constexpr int TileSize() {
  return kTileBytes / static_cast<int>(sizeof(T));
}

// Entries each thread loads at once: 8 (4 for 16-byte complex numbers).
template <typename T>
__host__ __device__ constexpr int Unroll() {
  return sizeof(T) <= 8 ? 8 : 4;
}

// Read-only loads through the non-coherent cache.
template <typename T>
__device__ T Load(const T* p) {
  return __ldg(p);
}
__device__ Complex<float> Load(const Complex<float>* p) {
  const float2 v = __ldg(reinterpret_cast<const float2*>(p));
  return {v.x, v.y};
}
__device__ Complex<double> Load(const Complex<double>* p) {
  const double2 v = __ldg(reinterpret_cast<const double2*>(p));
  return {v.x, v.y};
}

template <typename R>
__device__ R ShuffleXor(R v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
template <typename R>
__device__ Complex<R> ShuffleXor(Complex<R> v, int mask) {
  return {ShuffleXor(v.re, mask), ShuffleXor(v.im, mask)};
}

// The sum of v over each aligned group of `lanes` threads of a warp (a power
// of two), in every thread of the group. The whole warp must call it.
template <typename T>
__device__ T GroupSum(T v, int lanes) {
  for (int mask = lanes / 2; mask > 0; mask /= 2) v = v + ShuffleXor(v, mask);
  return v;
}

// How the work is cut into thread blocks, chosen on the host.
struct Schedule {
  int lanes;    // threads per output (row, column): a power of two <= 32
  int columns;  // columns per block
  int rows;     // rows per block: kThreads / (lanes * columns)
  int64_t row_blocks;
  int64_t column_blocks;
  int64_t blocks;  // row_blocks * column_blocks * passes
};

Schedule ChooseSchedule(const SpmvShape& s) {
  Schedule d{};
  const int64_t mean_row = (s.nnz + s.n_rows - 1) / s.n_rows;
  d.lanes = 1;
  while (d.lanes < 32 && mean_row > int64_t{kProductsPerLane} * d.lanes) {
    d.lanes *= 2;
  }
  d.columns = static_cast<int>(std::min<int64_t>(s.columns(), kMaxColumns));
  d.rows = kThreads / (d.lanes * d.columns);
  d.row_blocks = (s.n_rows + d.rows - 1) / d.rows;
  d.column_blocks = (s.columns() + d.columns - 1) / d.columns;
  d.blocks = d.row_blocks * d.column_blocks * s.passes();
  return d;
}

// kOneColumn: every pass has a single column (no vmap over right-hand sides,
// k = 1), which spares the index arithmetic of several.
template <typename T, bool kOneColumn>
__global__ void __launch_bounds__(kThreads)
    CsrMatvecKernel(Spmv<T> a, Schedule d) {
  constexpr int kTile = TileSize<T>();
  constexpr int kUnroll = Unroll<T>();
  __shared__ __align__(16) unsigned char tile_storage[kTileBytes];
  __shared__ int64_t x_offsets[kMaxColumns];  // of the block's columns
  T* const products = reinterpret_cast<T*>(tile_storage);
  const SpmvShape& s = a.shape;
  const int output = threadIdx.x / d.lanes;
  const int lane = threadIdx.x % d.lanes;
  const int out_row = kOneColumn ? output : output / d.columns;
  const int out_col = kOneColumn ? 0 : output % d.columns;

  for (int64_t block = blockIdx.x; block < d.blocks; block += gridDim.x) {
    const int64_t rest = block / d.row_blocks;
    const int64_t pass = rest / d.column_blocks;
    const int64_t r0 = (block % d.row_blocks) * d.rows;
    const int64_t r1 = min(r0 + d.rows, s.n_rows);
    const int64_t c0 = (rest % d.column_blocks) * d.columns;
    const int w = kOneColumn ? 1 : static_cast<int>(min(
                                       int64_t{d.columns}, s.columns() - c0));
    if (threadIdx.x < w) {
      x_offsets[threadIdx.x] = s.x_offset(pass, c0 + threadIdx.x);
    }
    const int64_t row = r0 + out_row;
    const bool active = row < r1 && out_col < w;
    const int64_t begin = active ? Load(a.indptr + row) : 0;
    const int64_t end = active ? Load(a.indptr + row + 1) : 0;
    const int64_t start = Load(a.indptr + r0);
    const int64_t stop = Load(a.indptr + r1);
    const T* values = a.values + s.value_offset(pass);
    const int per_tile = kTile / w;
    T sum{};
    __syncthreads();  // x_offsets are written

    for (int64_t t0 = start; t0 < stop; t0 += per_tile) {
      const int64_t t1 = min(stop, t0 + per_tile);
      const int n = static_cast<int>(t1 - t0) * w;  // product q: entry
      // t0 + q / w, column q % w. Loads first, all of them, then products.
      for (int base = threadIdx.x; base < n; base += kThreads * kUnroll) {
        T v[kUnroll] = {};
        T xv[kUnroll] = {};
        int32_t col[kUnroll] = {};
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int q = base + u * kThreads;
          if (q < n) {
            const int64_t e = t0 + q / w;
            v[u] = Load(values + e);
            col[u] = Load(a.indices + e);
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int q = base + u * kThreads;
          if (q < n) xv[u] = Load(a.x + x_offsets[q % w] + col[u] * s.k);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int q = base + u * kThreads;
          if (q < n) products[q] = v[u] * xv[u];
        }
      }
      __syncthreads();
      const int64_t to = min(end, t1);
      for (int64_t e = max(begin, t0) + lane; e < to; e += d.lanes) {
        sum = sum + products[(e - t0) * w + out_col];
      }
      __syncthreads();  // before the next tile overwrites the products
    }

    sum = GroupSum(sum, d.lanes);
    if (active && lane == 0) {
      a.y[s.y_offset(pass, c0 + out_col) + row * s.k] = sum;
    }
  }
}

struct CudaBackend {
  cudaStream_t stream;

  template <typename T>
  ffi::Error Run(const Spmv<T>& a) {
    const SpmvShape& s = a.shape;
    if (s.n_rows > 0 && s.columns() > 0 && s.passes() > 0) {
      const Schedule d = ChooseSchedule(s);
      const int grid = static_cast<int>(std::min(d.blocks, kMaxGrid));
      if (s.columns() == 1) {
        CsrMatvecKernel<T, true><<<grid, kThreads, 0, stream>>>(a, d);
      } else {
        CsrMatvecKernel<T, false><<<grid, kThreads, 0, stream>>>(a, d);
      }
    }
    return LastCudaError();
  }
};

}  // namespace
}  // namespace jaxsolve::sparse

namespace js = ::jaxsolve::sparse;

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveSparseCsrMatvec, (js::CsrMatvecHandler<js::CudaBackend, cudaStream_t>),
    js::BindCsrMatvec().Ctx<js::ffi::PlatformStream<cudaStream_t>>());
