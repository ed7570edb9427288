// CUDA entries of libjaxsolve_layout_cuda<major>.so: the FFI handlers
// JaxsolveLayoutLocalRowToColumnMajor / JaxsolveLayoutLocalColumnToRowMajor
// (targets jaxsolve_layout_local_{row_to_column,column_to_row}_major), which
// run the core of local_transpose.h as kernels on XLA's stream. Every launch
// is asynchronous: the handler never synchronizes with the host, and reports
// launch errors through cudaGetLastError().
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "local_transpose.h"
#include "local_transpose_ffi.h"
#include "runtime/jaxsolve/runtime/csrc/cuda_error.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::layout {
namespace {

constexpr int kThreadsX = 32;  // a thread block is kThreadsX x kThreadsY
constexpr int kThreadsY = 8;
constexpr int kWarpsPerRunBlock = 8;  // CopyRunsKernel: one run per warp
constexpr int kRunUnroll = 4;         // loads in flight per lane
constexpr int64_t kMaxGrid = (int64_t{1} << 31) - 1;

int GridSize(int64_t work_items) {
  return static_cast<int>(std::min(work_items, kMaxGrid));
}

// A kB x kB block in shared memory, padded against bank conflicts. The kernels
// declare theirs spelled out: CUDA 12.4's cudafe++ aborts on a __shared__
// variable of this alias's type in a template kernel.
template <typename T, int kB>
using SharedBlock = T[kB][kB + 1];

// Loads the rows x cols block at `src` (rows `ld` apart; rows, cols <= kB).
// Fixed trip counts, so that all of a thread's loads are in flight at once.
template <typename T, int kB>
__device__ void LoadBlock(SharedBlock<T, kB>& s, const T* src, int64_t ld,
                          int64_t rows, int64_t cols) {
#pragma unroll
  for (int i = 0; i < kB / kThreadsY; ++i) {
    const int y = threadIdx.y + i * kThreadsY;
#pragma unroll
    for (int j = 0; j < kB / kThreadsX; ++j) {
      const int x = threadIdx.x + j * kThreadsX;
      if (y < rows && x < cols) s[y][x] = src[y * ld + x];
    }
  }
}

// Stores the transpose of the rows x cols block in `s` at `dst` (rows `ld`
// apart): cols rows of rows elements.
template <typename T, int kB>
__device__ void StoreTransposed(const SharedBlock<T, kB>& s, T* dst,
                                int64_t ld, int64_t rows, int64_t cols) {
#pragma unroll
  for (int i = 0; i < kB / kThreadsY; ++i) {
    const int y = threadIdx.y + i * kThreadsY;
#pragma unroll
    for (int j = 0; j < kB / kThreadsX; ++j) {
      const int x = threadIdx.x + j * kThreadsX;
      if (y < cols && x < rows) dst[y * ld + x] = s[x][y];
    }
  }
}

// In-place transpose of an n x n matrix: each thread block swaps a pair of
// mirrored kB x kB blocks through shared memory (a diagonal block with
// itself), so every element is read once and written once.
template <typename T>
__global__ void SquareTransposeKernel(T* data, int64_t n, int64_t pairs) {
  constexpr int kB = TransposeBlock<T>();
  __shared__ T upper[kB][kB + 1], lower[kB][kB + 1];
  for (int64_t k = blockIdx.x; k < pairs; k += gridDim.x) {
    const BlockPair p = NthBlockPair(k);
    const int64_t r0 = p.bi * kB, c0 = p.bj * kB;
    const int64_t rows = min(int64_t{kB}, n - r0);
    const int64_t cols = min(int64_t{kB}, n - c0);
    T* a = data + r0 * n + c0;  // block (bi, bj): rows x cols
    T* b = data + c0 * n + r0;  // block (bj, bi): cols x rows
    LoadBlock<T, kB>(upper, a, n, rows, cols);
    if (p.bi != p.bj) LoadBlock<T, kB>(lower, b, n, cols, rows);
    __syncthreads();
    StoreTransposed<T, kB>(upper, b, n, rows, cols);
    if (p.bi != p.bj) StoreTransposed<T, kB>(lower, a, n, cols, rows);
    __syncthreads();
  }
}

// The size x size blocks of `map` (ChainStep), transposed kB x kB at a time
// through shared memory so that both the reads (along a source row) and the
// writes (along a destination row) are coalesced. Thread block k handles
// sub-block k % per_block of block k / per_block.
template <typename Map>
__global__ void TransposeBlocksKernel(Map map, int64_t count, int64_t size) {
  using T = typename Map::Element;
  constexpr int kB = TransposeBlock<T>();
  __shared__ T block[kB][kB + 1];
  const int64_t side = (size + kB - 1) / kB;
  const int64_t per_block = side * side;
  for (int64_t k = blockIdx.x; k < count * per_block; k += gridDim.x) {
    const int64_t z = k / per_block;
    const int64_t rc = k - z * per_block;
    const int64_t r0 = rc / side * kB, c0 = rc % side * kB;
    const Block<T> b = map(z);
    if (b.src == nullptr) continue;  // the same for the whole thread block
    const int64_t rows = min(int64_t{kB}, size - r0);
    const int64_t cols = min(int64_t{kB}, size - c0);
    LoadBlock<T, kB>(block, b.src + r0 * b.src_ld + c0, b.src_ld, rows, cols);
    __syncthreads();
    StoreTransposed<T, kB>(block, b.dst + c0 * b.dst_ld + r0, b.dst_ld, rows,
                           cols);
    __syncthreads();
  }
}

// Copies the runs of `map` (PanelRuns or ChainRestore), one warp per run.
template <typename Map>
__global__ void CopyRunsKernel(Map map, int64_t count, int64_t length) {
  using T = typename Map::Element;
  const int lane = threadIdx.x % 32;
  const int64_t warp = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const int64_t num_warps = int64_t{gridDim.x} * blockDim.x / 32;
  for (int64_t p = warp; p < count; p += num_warps) {
    const Run<T> run = map(p);
    if (run.src == nullptr) continue;
    for (int64_t a = lane; a < length; a += 32 * kRunUnroll) {
      T v[kRunUnroll];
#pragma unroll
      for (int u = 0; u < kRunUnroll; ++u) {
        if (a + 32 * u < length) v[u] = run.src[a + 32 * u];
      }
#pragma unroll
      for (int u = 0; u < kRunUnroll; ++u) {
        if (a + 32 * u < length) run.dst[a + 32 * u] = v[u];
      }
    }
  }
}

// The primitives of local_transpose.h as kernels on `stream`.
struct CudaBackend {
  static constexpr bool kHostMemory = false;
  cudaStream_t stream;

  template <typename T>
  void Copy(T* dst, const T* src, int64_t n) {
    if (n > 0) {
      cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice,
                      stream);
    }
  }

  template <typename T>
  void SquareTranspose(T* data, int64_t n) {
    const int64_t pairs = NumBlockPairs(n, TransposeBlock<T>());
    if (pairs == 0) return;
    SquareTransposeKernel<T><<<GridSize(pairs), dim3(kThreadsX, kThreadsY), 0,
                               stream>>>(data, n, pairs);
  }

  template <typename Map>
  void CopyRuns(const Map& map, int64_t count, int64_t length) {
    if (count == 0 || length == 0) return;
    const int64_t blocks = (count + kWarpsPerRunBlock - 1) / kWarpsPerRunBlock;
    CopyRunsKernel<<<GridSize(blocks), 32 * kWarpsPerRunBlock, 0, stream>>>(
        map, count, length);
  }

  template <typename Map>
  void TransposeBlocks(const Map& map, int64_t count, int64_t size) {
    constexpr int64_t kB = TransposeBlock<typename Map::Element>();
    const int64_t side = (size + kB - 1) / kB;
    const int64_t blocks = count * side * side;
    if (blocks == 0) return;
    TransposeBlocksKernel<<<GridSize(blocks), dim3(kThreadsX, kThreadsY), 0,
                            stream>>>(map, count, size);
  }

  ffi::Error Finish() { return LastCudaError(); }
};

template <Direction kDirection>
struct LocalTransposeCuda {
  template <typename... Args>
  ffi::Error operator()(cudaStream_t stream, Args... args) const {
    CudaBackend backend{stream};
    return LocalTransposeHandler(backend, kDirection, std::move(args)...);
  }
};

}  // namespace
}  // namespace jaxsolve::layout

namespace jl = ::jaxsolve::layout;

JAXSOLVE_LAYOUT_EXPORT XLA_FFI_Error* JaxsolveLayoutLocalRowToColumnMajor(
    XLA_FFI_CallFrame* call_frame);
JAXSOLVE_LAYOUT_EXPORT XLA_FFI_Error* JaxsolveLayoutLocalColumnToRowMajor(
    XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveLayoutLocalRowToColumnMajor,
    jl::LocalTransposeCuda<jl::Direction::kRowToColumnMajor>{},
    jl::BindLocalTranspose(
        jl::ffi::Ffi::Bind().Ctx<jl::ffi::PlatformStream<cudaStream_t>>()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveLayoutLocalColumnToRowMajor,
    jl::LocalTransposeCuda<jl::Direction::kColumnToRowMajor>{},
    jl::BindLocalTranspose(
        jl::ffi::Ffi::Bind().Ctx<jl::ffi::PlatformStream<cudaStream_t>>()));
