// CUDA entry of libjaxsolve_sparse_cuda<major>.so: the FFI handler
// JaxsolveSparseCsrMatvec (target jaxsolve_sparse_csr_matvec), which runs the
// product of spmv.h as one kernel on XLA's stream (the sparse product's values
// and classical AMG's interpolation weights follow further down). The launch is
// asynchronous: the handler never synchronizes with the host, and reports
// launch errors through cudaGetLastError().
//
// A warp owns a chunk of consecutive rows (and, under vmap over right-hand
// sides, a group of up to kMaxColumns columns of one pass). Their entries are
// contiguous in `values` and `indices`, so the warp walks them in windows of
// 32 * Unroll entries: every lane loads Unroll entries at once (coalesced,
// streamed past the caches, since A is read once), then the x they select
// (through the read-only cache: x is reused by neighbouring rows and stays in
// L2), and stores their products in the warp's slice of shared memory; then
// `lanes` lanes per row sum that row's products of the window. Only
// __syncwarp orders the two phases, so warps never wait for one another. A
// vector kernel (a warp or a few threads per row) has one load per thread in
// flight on the short rows of stencil matrices (7 entries for a 7-point
// Laplacian) and waits on each; a block-wide tile waits at every
// __syncthreads. Measured on the H200 (3D Poisson 128^3, f64, products
// issued back to back, tools/bench/sparse_spmv.py): 69 us (3.1 TB/s), against
// CuPy's cuSPARSE 103 us; the block-tiled kernel this replaced took 125 us.
// (That single product of short rows now takes the row kernel below.) Every
// output is written once, by one thread: no atomics.
//
// `lanes` follows the mean row length, chosen on the host from the buffer
// shapes: one lane sums up to 8 products of a row, more lanes share longer
// rows. A group's columns are formed together from one read of A.
//
// A single product (no vmap) with short rows, one lane a row, skips the window:
// each thread walks its own row (CsrRowKernel), its loads through L1, which
// holds the lines that its warp's neighbouring rows share. On the H200, for
// the 128^3 Poisson matrix in f64 this takes 57-58 us against the window's
// 67 us (kernel times of 200 products back to back); the level-0 prolongator
// of its AMG hierarchy (4 entries a row) 33 us against 34 us; f32 Poisson is
// 40 us either way. The AMG-PCG solve of that matrix went from 10.1-10.2 to
// 9.2-9.5 ms (tools/bench/sparse_poisson3d.py). The window stays for rows
// of more than 8 entries (a thread a row took 2-3x as long on the hierarchy's
// 32-entry rows) and for batched calls, whose columns share each read of A.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "csr_product.h"
#include "csr_product_ffi.h"
#include "interpolation_weights.h"
#include "interpolation_weights_ffi.h"
#include "runtime/jaxsolve/runtime/csrc/cuda_error.h"
#include "spmv.h"
#include "spmv_ffi.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::sparse {
namespace {

constexpr int kThreads = 256;         // per block
constexpr int kWarps = kThreads / 32;  // per block
constexpr int kMaxColumns = 8;         // per warp
constexpr int kProductsPerLane = 8;    // mean row length a lane sums

// Entries each lane loads at once: 4 of one column (2 of a 16-byte complex
// number); one per column of a group of several, whose x loads add up.
template <typename T, int kColumns>
__host__ __device__ constexpr int Unroll() {
  return kColumns > 1 ? 1 : (sizeof(T) <= 8 ? 4 : 2);
}

// Loads of A (read once: streamed, evicted first) and of x and the row
// pointers (through the read-only cache).
template <typename T>
__device__ T LoadStreamed(const T* p) {
  return __ldcs(p);
}
__device__ Complex<float> LoadStreamed(const Complex<float>* p) {
  const float2 v = __ldcs(reinterpret_cast<const float2*>(p));
  return {v.x, v.y};
}
__device__ Complex<double> LoadStreamed(const Complex<double>* p) {
  const double2 v = __ldcs(reinterpret_cast<const double2*>(p));
  return {v.x, v.y};
}
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

// How the work is cut into warp tasks, chosen on the host. A task is a chunk
// of 32 / lanes rows and a group of up to `columns` columns of one pass.
struct Schedule {
  int lanes;  // per row: a power of two <= 32
  int columns;
  uint32_t chunks;
  uint32_t groups;  // of columns, per pass
  uint32_t passes;  // in one launch
  uint32_t tasks;   // chunks * groups * passes, < 2^31
};

// Threads a row's products are summed by: one up to kProductsPerLane of a mean
// row, more for longer rows.
int LanesFor(const SpmvShape& s) {
  const int64_t mean_row = (s.nnz + s.n_rows - 1) / s.n_rows;
  int lanes = 1;
  while (lanes < 32 && mean_row > int64_t{kProductsPerLane} * lanes) lanes *= 2;
  return lanes;
}

// Blocks of a single product (kSingle below) that must fit on a
// multiprocessor at once: the kernel waits on its loads, so warps in flight
// are what it runs at. Six blocks cap the registers at 40, which a single
// product needs without spilling; left to itself the compiler took 48 (five
// blocks), and the 128^3 Poisson product ran 86 us on the H200, against 72 us
// for the same schedule in 40 registers (that product, of one-lane rows, now
// takes CsrRowKernel; the cap stays for single products of longer rows).
// Batched calls keep offsets (and a group of columns its sums) in registers,
// and would spill under that cap.
constexpr int kSingleBlocks = 6;

// kColumns: 1 when every pass has a single column (no vmap over right-hand
// sides: k = 1), else kMaxColumns (a group may use fewer). kLanes: the
// schedule's lanes, a template parameter so that the index arithmetic of the
// sums is shifts and masks. kSingle: the call is one product y = A x (one
// pass of one column, no vmap at all), whose operands start where their
// buffers do; the offsets of passes and columns then fold away, and with them
// the registers that would hold them. Entry and row numbers fit in 32 bits
// (int32 row pointers); unsigned, so that a window's end past the last entry
// cannot overflow. `first_pass`: the launch's first pass.
template <typename T, int kColumns, int kLanes, bool kSingle>
__global__ void __launch_bounds__(kThreads, kSingle ? kSingleBlocks : 1)
    CsrMatvecKernel(Spmv<T> a, Schedule d, int64_t first_pass) {
  static_assert(!kSingle || kColumns == 1, "a single product has one column");
  constexpr int kUnroll = Unroll<T, kColumns>();
  constexpr uint32_t kWindow = 32 * kUnroll;
  constexpr uint32_t kRows = 32 / kLanes;
  __shared__ T products[kWarps][kColumns][kWindow];
  const SpmvShape& s = a.shape;
  const uint32_t task = blockIdx.x * kWarps + threadIdx.x / 32;
  if (task >= d.tasks) return;  // the whole warp
  const uint32_t lane = threadIdx.x % 32;
  T (*const window)[kWindow] = products[threadIdx.x / 32];

  const uint32_t rest = kSingle ? 0 : task / d.chunks;
  const int64_t pass = kSingle ? 0 : first_pass + rest / d.groups;
  const uint32_t r0 = (kSingle ? task : task % d.chunks) * kRows;
  const uint32_t r1 = min(r0 + kRows, static_cast<uint32_t>(s.n_rows));
  const int64_t c0 = int64_t{rest % d.groups} * d.columns;
  const int w = kColumns == 1 ? 1 : static_cast<int>(min(
                                        int64_t{d.columns}, s.columns() - c0));
  const T* x[kColumns];  // column c of the group: x[c][column * k]
#pragma unroll
  for (int c = 0; c < kColumns; ++c) {
    x[c] = a.x + (c < w ? s.x_offset(pass, c0 + c) : 0);
  }
  const T* values = a.values + s.value_offset(pass);
  const uint32_t row = r0 + lane / kLanes;
  const uint32_t start = Load(a.indptr + r0);
  const uint32_t stop = Load(a.indptr + r1);
  const uint32_t begin = row < r1 ? Load(a.indptr + row) : stop;
  const uint32_t end = row < r1 ? Load(a.indptr + row + 1) : stop;
  T sum[kColumns] = {};

  for (uint32_t t0 = start; t0 < stop; t0 += kWindow) {
    T v[kUnroll];
    int32_t col[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t e = t0 + u * 32 + lane;
      if (e < stop) {
        v[u] = LoadStreamed(values + e);
        col[u] = LoadStreamed(a.indices + e);
      }
    }
#pragma unroll
    for (int c = 0; c < kColumns; ++c) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint32_t e = t0 + u * 32 + lane;
        if (c < w && e < stop) {
          const int64_t at = kColumns == 1 ? col[u] : int64_t{col[u]} * s.k;
          window[c][u * 32 + lane] = v[u] * Load(x[c] + at);
        }
      }
    }
    __syncwarp();
    // This lane's entries of its row in the window: every kLanes-th from the
    // row's first, starting at its own place among the row's lanes.
    const uint32_t lo = max(begin, t0);
    const uint32_t hi = min(end, t0 + kWindow);
    for (uint32_t e = lo + ((begin + lane - lo) & (kLanes - 1)); e < hi; e += kLanes) {
#pragma unroll
      for (int c = 0; c < kColumns; ++c) {
        if (c < w) sum[c] = sum[c] + window[c][e - t0];
      }
    }
    __syncwarp();  // before the next window overwrites the products
  }

#pragma unroll
  for (int c = 0; c < kColumns; ++c) {
    const T total = GroupSum(sum[c], kLanes);
    if (row < r1 && lane % kLanes == 0 && c < w) {
      const int64_t at = s.y_offset(pass, c0 + c) + int64_t{row} * s.k;
      a.y[at] = Updated(a, pass, row, at, total);
    }
  }
}

// Entries of its row a thread of CsrRowKernel loads at once: 4, or 2 of a
// 16-byte complex number (4 would spill under the register cap below).
template <typename T>
__host__ __device__ constexpr int RowUnroll() {
  return sizeof(T) <= 8 ? 4 : 2;
}
// Blocks of CsrRowKernel a multiprocessor holds: the cap leaves it 32
// registers, enough without spilling, and more warps in flight than the
// window's six blocks.
constexpr int kRowBlocks = 8;

// A single product y = A x (one pass of one column), a thread per row: its
// entries in order, RowUnroll loads of values and columns at a time, then the
// x they select. The sums are formed in the order of the window kernel's (and
// the CPU's), entry by entry.
template <typename T>
__global__ void __launch_bounds__(kThreads, kRowBlocks) CsrRowKernel(Spmv<T> a) {
  const uint32_t row = blockIdx.x * kThreads + threadIdx.x;
  if (row >= a.shape.n_rows) return;
  const uint32_t begin = Load(a.indptr + row);
  const uint32_t end = Load(a.indptr + row + 1);
  constexpr int kUnroll = RowUnroll<T>();
  T sum{};
  for (uint32_t e0 = begin; e0 < end; e0 += kUnroll) {
    T v[kUnroll];
    int32_t col[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (e0 + u < end) {
        v[u] = Load(a.values + e0 + u);
        col[u] = Load(a.indices + e0 + u);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (e0 + u < end) sum = sum + v[u] * Load(a.x + col[u]);
    }
  }
  a.y[row] = Updated(a, 0, row, row, sum);
}

// Calls launch(std::integral_constant<int, lanes>{}): a kernel's threads per row
// (a power of two <= 32) as the compile-time constant its template takes.
template <typename Launch>
void WithLanes(int lanes, Launch launch) {
  switch (lanes) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 4: return launch(std::integral_constant<int, 4>{});
    case 8: return launch(std::integral_constant<int, 8>{});
    case 16: return launch(std::integral_constant<int, 16>{});
    default: return launch(std::integral_constant<int, 32>{});
  }
}

// Launches the kernel for `lanes` (a power of two <= 32), over as many
// launches as keep each one's tasks below 2^31.
template <typename T, int kColumns>
void LaunchCsrMatvec(const Spmv<T>& a, Schedule d, cudaStream_t stream) {
  const int64_t per_pass = int64_t{d.chunks} * d.groups;
  const int64_t passes = a.shape.passes();
  const int64_t passes_per_launch =
      std::max<int64_t>(1, ((int64_t{1} << 31) - 1) / per_pass);
  for (int64_t first = 0; first < passes; first += passes_per_launch) {
    d.passes = static_cast<uint32_t>(std::min(passes - first, passes_per_launch));
    d.tasks = static_cast<uint32_t>(per_pass * d.passes);
    const unsigned grid = (d.tasks + kWarps - 1) / kWarps;
    WithLanes(d.lanes, [&](auto lanes) {
      if (kColumns == 1 && passes == 1) {
        CsrMatvecKernel<T, 1, lanes(), true><<<grid, kThreads, 0, stream>>>(a, d, first);
      } else {
        CsrMatvecKernel<T, kColumns, lanes(), false><<<grid, kThreads, 0, stream>>>(a, d, first);
      }
    });
  }
}

struct CudaBackend {
  cudaStream_t stream;

  template <typename T>
  ffi::Error Run(const Spmv<T>& a) {
    const SpmvShape& s = a.shape;
    if (s.n_rows > 0 && s.columns() > 0 && s.passes() > 0) {
      Schedule d{};
      d.lanes = LanesFor(s);
      d.columns = static_cast<int>(std::min<int64_t>(s.columns(), kMaxColumns));
      const int64_t rows = 32 / d.lanes;  // per chunk
      const int64_t groups = (s.columns() + d.columns - 1) / d.columns;
      if ((s.n_rows + rows - 1) / rows * groups >= (int64_t{1} << 31)) {
        return Invalid("too many rows and columns for one product");
      }
      d.chunks = static_cast<uint32_t>((s.n_rows + rows - 1) / rows);
      d.groups = static_cast<uint32_t>(groups);
      if (s.columns() == 1 && s.passes() == 1 && d.lanes == 1) {
        const unsigned grid = static_cast<unsigned>((s.n_rows + kThreads - 1) / kThreads);
        CsrRowKernel<T><<<grid, kThreads, 0, stream>>>(a);
      } else if (s.columns() == 1) {
        LaunchCsrMatvec<T, 1>(a, d, stream);
      } else {
        LaunchCsrMatvec<T, kMaxColumns>(a, d, stream);
      }
    }
    return LastCudaError();
  }
};

}  // namespace
}  // namespace jaxsolve::sparse

namespace js = ::jaxsolve::sparse;

// Command-buffer compatible: the handler only launches kernels on XLA's stream,
// with a launch shape that follows from the buffer shapes alone, so XLA may
// record it once into a CUDA graph (with the fused kernels around it) and
// replay the graph, instead of launching every kernel of a Krylov iteration
// from the host.
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveSparseCsrMatvec, (js::CsrMatvecHandler<js::CudaBackend, cudaStream_t>),
    js::BindCsrMatvec().Ctx<js::ffi::PlatformStream<cudaStream_t>>(),
    {js::ffi::Traits::kCmdBufferCompatible});

// The sparse product's values (csr_product.h): JaxsolveSparseCsrProduct
// (target jaxsolve_sparse_csr_product). A group of `lanes` threads of a warp
// owns a row of C (and a system of the batch): no atomics, and each entry
// summed in the CPU's order. The group walks row i of A entry by entry; the
// products of one entry, with the row of B it selects, are shared between the
// group's threads (every lanes-th of B's row each), each finding its product's
// place by a binary search of row i of C. B's rows hold no column twice, so
// the group's threads add into distinct places, and the group synchronizes
// before A's next entry. `lanes` follows B's mean row length, as the SpMV's
// follows A's: a thread per row (the kernel this replaced) left a warp's
// threads waiting on its longest row, about 320 products a thread in the
// Galerkin product R (A P) of a 3D Poisson matrix's first level. The patterns
// are trusted (the setup built them); a row with a product outside C's
// pattern is set to NaN rather than left wrong, since the kernel cannot fail
// the call.

namespace jaxsolve::sparse {
namespace {

__device__ float NotANumber(float) { return __int_as_float(0x7fc00000); }
__device__ double NotANumber(double) {
  return __longlong_as_double(0x7ff8000000000000LL);
}
template <typename R>
__device__ Complex<R> NotANumber(Complex<R>) {
  return {NotANumber(R{}), NotANumber(R{})};
}

// The mask of the aligned group of kLanes threads the calling thread is in.
template <int kLanes>
__device__ unsigned GroupMask() {
  if constexpr (kLanes == 32) {
    return 0xffffffffu;
  } else {
    return ((1u << kLanes) - 1) << (threadIdx.x % 32 / kLanes * kLanes);
  }
}

// Row blockIdx.x * (kThreads / kLanes) + (threadIdx.x / kLanes) of C, for
// system first_system + blockIdx.y.
template <typename T, int kLanes>
__global__ void __launch_bounds__(kThreads)
    CsrProductKernel(CsrProduct<T> first, CsrProductBatch batch,
                     int64_t first_system) {
  const int64_t i = int64_t{blockIdx.x} * (kThreads / kLanes) + threadIdx.x / kLanes;
  if (i >= first.m) return;  // the whole group
  const CsrProduct<T> p = SystemOf(first, batch, first_system + blockIdx.y);
  const unsigned group = GroupMask<kLanes>();
  const int lane = threadIdx.x % kLanes;
  const int64_t begin = p.c_indptr[i], end = p.c_indptr[i + 1];
  for (int64_t e = begin + lane; e < end; e += kLanes) p.c_values[e] = T{};
  bool missing = false;
  for (int32_t t = p.a_indptr[i]; t < p.a_indptr[i + 1]; ++t) {
    __syncwarp(group);  // the places of A's previous entry are written
    const T a = p.a_values[t];
    const int32_t j = p.a_indices[t];
    for (int32_t s = p.b_indptr[j] + lane; s < p.b_indptr[j + 1]; s += kLanes) {
      const int64_t e = FindColumn(p.c_indices, begin, end, p.b_indices[s]);
      if (e < 0) {
        missing = true;
      } else {
        p.c_values[e] = p.c_values[e] + a * p.b_values[s];
      }
    }
  }
  __syncwarp(group);
  if (__any_sync(group, missing)) {
    for (int64_t e = begin + lane; e < end; e += kLanes) {
      p.c_values[e] = NotANumber(T{});
    }
  }
}

// Calls launch(grid, first_system) for each chunk of at most 65535 systems (a
// grid's height), the grid `blocks` wide and a system a row of blocks; no
// launch when there is no block or no system.
template <typename Launch>
void ForSystemChunks(int64_t blocks, int64_t systems, Launch launch) {
  constexpr int64_t kMaxSystems = 65535;
  for (int64_t first = 0; blocks > 0 && first < systems; first += kMaxSystems) {
    launch(dim3(static_cast<unsigned>(blocks),
                static_cast<unsigned>(std::min(systems - first, kMaxSystems))),
           first);
  }
}

// Threads a row of C is formed by: a power of two up to B's mean row length,
// at most a warp.
int ProductLanes(const CsrProductSizes& sizes) {
  const int64_t mean_row = sizes.n > 0 ? (sizes.nnz_b + sizes.n - 1) / sizes.n : 1;
  int lanes = 1;
  while (lanes < 32 && lanes < mean_row) lanes *= 2;
  return lanes;
}

struct CudaProductBackend {
  cudaStream_t stream;

  template <typename T>
  ffi::Error Run(const CsrProduct<T>& p, const CsrProductSizes& sizes,
                 const CsrProductBatch& batch) {
    const int lanes = ProductLanes(sizes);
    const int64_t rows_per_block = kThreads / lanes;
    const int64_t blocks = (p.m + rows_per_block - 1) / rows_per_block;
    if (blocks >= (int64_t{1} << 31)) {
      return InvalidProduct("too many rows for one product");
    }
    ForSystemChunks(blocks, batch.systems, [&](dim3 grid, int64_t first) {
      WithLanes(lanes, [&](auto lanes) {
        CsrProductKernel<T, lanes()><<<grid, kThreads, 0, stream>>>(p, batch, first);
      });
    });
    return LastCudaError();
  }
};

}  // namespace
}  // namespace jaxsolve::sparse

// Command-buffer compatible as the matrix-vector product is: launches on
// XLA's stream, shaped by the buffer shapes alone.
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveSparseCsrProduct,
    (js::CsrProductHandler<js::CudaProductBackend, cudaStream_t>),
    js::BindCsrProduct().Ctx<js::ffi::PlatformStream<cudaStream_t>>(),
    {js::ffi::Traits::kCmdBufferCompatible});

// Classical AMG's interpolation weights (interpolation_weights.h):
// JaxsolveSparseInterpolationWeights (target
// jaxsolve_sparse_interpolation_weights). A thread owns a row of P (and a
// system of the batch): it reads its row's pairs and triples from their row
// pointers, then sums into its own slice of the scratch, in
// the CPU's order (no atomics). This replaced XLA's segment sum over every
// value the plan sends somewhere (nnz(A) + triples + pairs of them, unsorted
// destinations), whose scatter took 37 of the 49 ms of a classical re-setup
// at 128^3 on the H200. A row that the plan sends a value outside of is set
// to NaN, since the kernel cannot fail the call; the plan is trusted (the
// setup built it).

namespace jaxsolve::sparse {
namespace {

template <typename T, typename O>
__global__ void __launch_bounds__(kThreads)
    InterpolationKernel(InterpolationCall<T, O> call, int64_t first_system) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i >= call.first.n) return;
  const int64_t s = first_system + blockIdx.y;
  const InterpolationWeights<T, O>& in = call.first;
  if (!InterpolationCallRow(call, s, static_cast<int32_t>(i))) {
    T* p_values = call.p_values + s * call.p_nnz;
    const int64_t begin = call.keep != nullptr ? call.p_indptr[i] : in.full_indptr[i];
    const int64_t end = call.keep != nullptr ? call.p_indptr[i + 1] : in.full_indptr[i + 1];
    for (int64_t e = begin; e < end; ++e) p_values[e] = NotANumber(T{});
  }
}

struct CudaInterpolationBackend {
  cudaStream_t stream;

  template <typename T, typename O>
  ffi::Error Run(const InterpolationCall<T, O>& call, const InterpolationSizes&) {
    ForSystemChunks((call.first.n + kThreads - 1) / kThreads, call.systems,
                    [&](dim3 grid, int64_t first) {
                      InterpolationKernel<T, O><<<grid, kThreads, 0, stream>>>(call, first);
                    });
    return LastCudaError();
  }
};

}  // namespace
}  // namespace jaxsolve::sparse

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveSparseInterpolationWeights,
    (js::InterpolationWeightsHandler<js::CudaInterpolationBackend, cudaStream_t>),
    js::BindInterpolationWeights().Ctx<js::ffi::PlatformStream<cudaStream_t>>(),
    {js::ffi::Traits::kCmdBufferCompatible});
