// libjaxsolve_dense_cusolvermp_cuda<major>.so: XLA FFI handlers that call
// cuSOLVERMp on one device's part of a 2D block-cyclic matrix.
//
// Every handler runs on one device of a P_r x P_c process grid (inside
// jax.shard_map, one call per device), with that device's local matrices in
// ScaLAPACK's column-major local storage (jaxsolve.layout's block-cyclic
// storage: a (local columns, local rows) buffer, lld = local rows). All the
// devices of the grid call together: they are the ranks of a jaxsolve NCCL
// communicator (jaxsolve.sharding), which the handler finds by the key in
// its `comm` attribute and its device (libjaxsolve_nccl, loaded first with
// RTLD_GLOBAL, exports JaxsolveNcclCommunicator). Ranks are laid over the
// grid row-major (CUSOLVERMP_GRID_MAPPING_ROW_MAJOR).
//
// Reused across calls (the cache, per device, communicator and grid shape):
// the cuSOLVERMp handle, the grid, the matrix descriptors (per dtype, shape,
// tile and lld) and one device and one host workspace that grow to the
// largest call. Growing a workspace waits for the stream (the old one may be
// in use), and so does a factorization whose status failed (to read info);
// otherwise no handler synchronizes with the host: `info` is written by
// cuSOLVERMp into the handler's int32 output on the device.
// JaxsolveDenseCusolverMpClear frees everything (jaxsolve.dense.clear_cache
// and interpreter exit call it).
//
// cuSOLVERMp itself is not linked: its symbols bind at load time to the
// libcusolverMp.so.0 that jaxsolve.dense preloaded (RTLD_GLOBAL) from the
// nvidia-cusolvermp-cu<major> wheel.
#include <cuda_runtime_api.h>
#include <cusolverMp.h>
#include <nccl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "xla/ffi/api/ffi.h"

// The CUDA major this library is built for (its file name's), checked against
// the runtime headers it is compiled with.
static_assert(CUDART_VERSION / 1000 == JAXSOLVE_CUDA_MAJOR,
              "built against the runtime headers of another CUDA major");

#define JAXSOLVE_DENSE_EXPORT extern "C" __attribute__((visibility("default")))

// From libjaxsolve_nccl_cuda<major>.so (jaxsolve.sharding).
extern "C" ncclComm_t JaxsolveNcclCommunicator(int64_t key, int device);

namespace jaxsolve::dense {
namespace {

namespace ffi = ::xla::ffi;

#define JAXSOLVE_RETURN_IF_ERROR(expr)      \
  do {                                      \
    ::xla::ffi::Error error_ = (expr);      \
    if (error_.failure()) return error_;    \
  } while (0)

std::string Str(int64_t v) { return std::to_string(v); }

ffi::Error Cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxsolve cuSOLVERMp backend: ") + what + ": " +
                              cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

ffi::Error Solver(cusolverStatus_t status, const char* what) {
  if (status == CUSOLVER_STATUS_SUCCESS) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("jaxsolve cuSOLVERMp backend: ") + what +
                              " failed with cusolverStatus_t " + Str(status));
}

ffi::Error Invalid(const std::string& what) {
  return ffi::Error::InvalidArgument("jaxsolve cuSOLVERMp backend: " + what);
}

// The CUDA data type of an FFI dtype that cuSOLVERMp computes in.
ffi::Error DataType(ffi::DataType dtype, cudaDataType_t* out) {
  switch (dtype) {
    case ffi::DataType::F32: *out = CUDA_R_32F; return ffi::Error::Success();
    case ffi::DataType::F64: *out = CUDA_R_64F; return ffi::Error::Success();
    case ffi::DataType::C64: *out = CUDA_C_32F; return ffi::Error::Success();
    case ffi::DataType::C128: *out = CUDA_C_64F; return ffi::Error::Success();
    default: return Invalid("unsupported dtype " + Str(static_cast<int>(dtype)));
  }
}

// ---------------------------------------------------------------- the cache

// (CUDA data type, global rows, global columns, tile, lld).
using DescriptorKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;

// One device's place in one process grid, with what its calls reuse.
struct Grid {
  int device = 0;
  cusolverMpHandle_t handle = nullptr;
  cusolverMpGrid_t grid = nullptr;
  std::map<DescriptorKey, cusolverMpMatrixDescriptor_t> descriptors;
  void* device_workspace = nullptr;
  size_t device_bytes = 0;
  std::vector<char> host_workspace;

  ~Grid() {
    // Queued work may still use the workspaces and descriptors.
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(device);
    cudaDeviceSynchronize();
    for (auto& entry : descriptors) cusolverMpDestroyMatrixDesc(entry.second);
    if (grid != nullptr) cusolverMpDestroyGrid(grid);
    if (handle != nullptr) cusolverMpDestroy(handle);
    if (device_workspace != nullptr) cudaFree(device_workspace);
    cudaSetDevice(previous);
  }
};

// A grid behind its own lock: calls on one grid run one at a time, while the
// grids of different devices (one process driving several GPUs) are created
// and used concurrently, as their collectives require.
struct Slot {
  std::mutex mutex;
  std::unique_ptr<Grid> grid;
};

// (device, communicator key, P_r, P_c).
using GridKey = std::tuple<int, int64_t, int64_t, int64_t>;

std::mutex cache_mutex;
std::map<GridKey, std::shared_ptr<Slot>>& Cache() {
  static auto* cache = new std::map<GridKey, std::shared_ptr<Slot>>;
  return *cache;
}

// A call's hold on its grid: the grid, locked, with the handle on the stream.
class Session {
 public:
  Grid* grid() const { return grid_; }
  cusolverMpHandle_t handle() const { return grid_->handle; }

  // Opens the grid of (the device holding `data`, comm, rows, cols),
  // creating it on first use.
  ffi::Error Open(const void* data, cudaStream_t stream, int64_t comm, int64_t rows,
                  int64_t cols) {
    if (rows < 1 || cols < 1) {
      return Invalid("grid " + Str(rows) + " x " + Str(cols) + " is empty");
    }
    cudaPointerAttributes attributes;
    JAXSOLVE_RETURN_IF_ERROR(Cuda(cudaPointerGetAttributes(&attributes, data),
                                  "cudaPointerGetAttributes"));
    const int device = attributes.device;
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      auto& entry = Cache()[GridKey(device, comm, rows, cols)];
      if (!entry) entry = std::make_shared<Slot>();
      slot = entry;
    }
    lock_ = std::unique_lock<std::mutex>(slot->mutex);
    slot_ = slot;
    if (!slot->grid) {
      ncclComm_t nccl = JaxsolveNcclCommunicator(comm, device);
      if (nccl == nullptr) {
        return Invalid("no NCCL communicator " + Str(comm) + " on CUDA device " + Str(device) +
                       " (jaxsolve.sharding.nccl_communicator creates it; it was destroyed, "
                       "or this device is not one of its devices)");
      }
      auto grid = std::make_unique<Grid>();
      grid->device = device;
      JAXSOLVE_RETURN_IF_ERROR(
          Solver(cusolverMpCreate(&grid->handle, device, stream), "cusolverMpCreate"));
      JAXSOLVE_RETURN_IF_ERROR(Solver(
          cusolverMpCreateDeviceGrid(grid->handle, &grid->grid, nccl, static_cast<int32_t>(rows),
                                     static_cast<int32_t>(cols),
                                     CUSOLVERMP_GRID_MAPPING_ROW_MAJOR),
          "cusolverMpCreateDeviceGrid"));
      slot->grid = std::move(grid);
    }
    grid_ = slot->grid.get();
    stream_ = stream;
    return Solver(cusolverMpSetStream(grid_->handle, stream), "cusolverMpSetStream");
  }

  // The descriptor of an m x n matrix in tiles of `tile`, local lld `lld`.
  ffi::Error Descriptor(cudaDataType_t dtype, int64_t m, int64_t n, int64_t tile, int64_t lld,
                        cusolverMpMatrixDescriptor_t* out) {
    const DescriptorKey key(static_cast<int>(dtype), m, n, tile, lld);
    auto it = grid_->descriptors.find(key);
    if (it == grid_->descriptors.end()) {
      cusolverMpMatrixDescriptor_t descriptor = nullptr;
      JAXSOLVE_RETURN_IF_ERROR(
          Solver(cusolverMpCreateMatrixDesc(&descriptor, grid_->grid, dtype, m, n, tile, tile, 0,
                                            0, lld),
                 "cusolverMpCreateMatrixDesc"));
      it = grid_->descriptors.emplace(key, descriptor).first;
    }
    *out = it->second;
    return ffi::Error::Success();
  }

  // Workspaces of at least the given sizes, grown (after the stream's queued
  // work, which may use the old ones) when too small.
  ffi::Error Reserve(size_t device_bytes, size_t host_bytes) {
    if (device_bytes > grid_->device_bytes ||
        host_bytes > grid_->host_workspace.size()) {
      JAXSOLVE_RETURN_IF_ERROR(Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    }
    if (device_bytes > grid_->device_bytes) {
      if (grid_->device_workspace != nullptr) {
        JAXSOLVE_RETURN_IF_ERROR(Cuda(cudaFree(grid_->device_workspace), "cudaFree"));
        grid_->device_workspace = nullptr;
        grid_->device_bytes = 0;
      }
      JAXSOLVE_RETURN_IF_ERROR(Cuda(cudaMalloc(&grid_->device_workspace, device_bytes),
                                    "cudaMalloc of the cuSOLVERMp workspace"));
      grid_->device_bytes = device_bytes;
    }
    if (host_bytes > grid_->host_workspace.size()) grid_->host_workspace.resize(host_bytes);
    return ffi::Error::Success();
  }

  void* device_workspace() const { return grid_->device_workspace; }
  void* host_workspace() const { return grid_->host_workspace.data(); }

 private:
  std::shared_ptr<Slot> slot_;
  std::unique_lock<std::mutex> lock_;
  Grid* grid_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// --------------------------------------------------------------- the calls

// Attributes of every handler: the communicator and the process grid.
struct GridAttributes {
  int64_t comm, grid_rows, grid_cols;
};

// One device's local matrix: a (local columns, local rows) buffer, i.e. a
// column-major (local rows x local columns) matrix with lld = local rows.
ffi::Error LocalLld(const char* name, const ffi::AnyBuffer& buffer, int64_t* lld) {
  const auto dims = buffer.dimensions();
  if (dims.size() != 2 || dims[1] < 1) {
    return Invalid(std::string(name) + " must be a (local columns, local rows) buffer");
  }
  *lld = dims[1];
  return ffi::Error::Success();
}

// `to` holds `from` (a copy unless XLA aliased them).
ffi::Error Place(const ffi::AnyBuffer& from, ffi::Result<ffi::AnyBuffer>& to, cudaStream_t stream) {
  if (from.size_bytes() != to->size_bytes()) return Invalid("output and input sizes differ");
  if (from.untyped_data() == to->untyped_data()) return ffi::Error::Success();
  return Cuda(cudaMemcpyAsync(to->untyped_data(), from.untyped_data(), from.size_bytes(),
                              cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync");
}

// A matrix operand of a call: its data, its descriptor.
struct Matrix {
  void* data;
  cusolverMpMatrixDescriptor_t descriptor;
};

ffi::Error Describe(Session& session, cudaDataType_t dtype, const char* name,
                    const ffi::AnyBuffer& buffer, void* data, int64_t m, int64_t n, int64_t tile,
                    Matrix* out) {
  int64_t lld = 0;
  JAXSOLVE_RETURN_IF_ERROR(LocalLld(name, buffer, &lld));
  out->data = data;
  return session.Descriptor(dtype, m, n, tile, lld, &out->descriptor);
}

// The workspace query and the call of one cuSOLVERMp routine, as two
// closures over the routine's own arguments: `query(&device, &host)` and
// `call(device_work, device_bytes, host_work, host_bytes)`.
template <typename Query, typename Call>
ffi::Error Run(Session& session, const char* routine, Query query, Call call) {
  size_t device_bytes = 0, host_bytes = 0;
  JAXSOLVE_RETURN_IF_ERROR(Solver(query(&device_bytes, &host_bytes), routine));
  JAXSOLVE_RETURN_IF_ERROR(session.Reserve(device_bytes, host_bytes));
  return Solver(call(session.device_workspace(), device_bytes, session.host_workspace(),
                     host_bytes),
                routine);
}

// A factorization's status: cuSOLVERMp 0.9's potrf returns an error status
// (CUSOLVER_STATUS_INTERNAL_ERROR, measured on the H200) for a matrix that is
// not positive definite, beside a positive info. Such a failure is the
// caller's to see in `info`, not an exception: on this failure path only, the
// handler waits for the stream and reads info; a positive one is success
// here, anything else the error it is. (The handlers zero info first, so a
// positive one is cuSOLVERMp's.)
ffi::Error Factorization(ffi::Error status, int* info, cudaStream_t stream) {
  if (status.success()) return status;
  int host_info = 0;
  if (cudaMemcpyAsync(&host_info, info, sizeof(int), cudaMemcpyDeviceToHost, stream) ==
          cudaSuccess &&
      cudaStreamSynchronize(stream) == cudaSuccess && host_info > 0) {
    cudaGetLastError();  // the failure is reported through info
    return ffi::Error::Success();
  }
  return ffi::Error::Internal(std::string(status.message()) + " (info " + Str(host_info) +
                              ")");
}

// -------------------------------------------------------------- handlers

// potrf: A = L Lᴴ from A's lower triangle, in place. Args: a. Rets: factor
// (aliases a), info. Attrs: grid, n, tile.
ffi::Error Potrf(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> factor,
                 ffi::Result<ffi::Buffer<ffi::S32>> info, int64_t comm, int64_t grid_rows,
                 int64_t grid_cols, int64_t n, int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(a.element_type(), &dtype));
  JAXSOLVE_RETURN_IF_ERROR(Place(a, factor, stream));
  JAXSOLVE_RETURN_IF_ERROR(
      Cuda(cudaMemsetAsync(info->typed_data(), 0, sizeof(int), stream), "cudaMemsetAsync"));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(a.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A;
  JAXSOLVE_RETURN_IF_ERROR(
      Describe(session, dtype, "a", a, factor->untyped_data(), n, n, tile, &A));
  auto h = session.handle();
  return Factorization(Run(
      session, "cusolverMpPotrf",
      [&](size_t* d, size_t* hb) {
        return cusolverMpPotrf_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, A.data, 1, 1,
                                          A.descriptor, dtype, d, hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpPotrf(h, CUBLAS_FILL_MODE_LOWER, n, A.data, 1, 1, A.descriptor, dtype,
                               dw, d, hw, hb, info->typed_data());
      }), info->typed_data(), stream);
}

// potrs: X = A⁻¹ B with potrf's factor. Args: factor, b. Rets: x (aliases
// b), info. Attrs: grid, n, nrhs, tile.
ffi::Error Potrs(cudaStream_t stream, ffi::AnyBuffer factor, ffi::AnyBuffer b,
                 ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::Buffer<ffi::S32>> info,
                 int64_t comm, int64_t grid_rows, int64_t grid_cols, int64_t n, int64_t nrhs,
                 int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(factor.element_type(), &dtype));
  JAXSOLVE_RETURN_IF_ERROR(Place(b, x, stream));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(
      session.Open(factor.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A, B;
  JAXSOLVE_RETURN_IF_ERROR(
      Describe(session, dtype, "factor", factor, factor.untyped_data(), n, n, tile, &A));
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "b", b, x->untyped_data(), n, nrhs, tile, &B));
  auto h = session.handle();
  return Run(
      session, "cusolverMpPotrs",
      [&](size_t* d, size_t* hb) {
        return cusolverMpPotrs_bufferSize(h, CUBLAS_FILL_MODE_LOWER, n, nrhs, A.data, 1, 1,
                                          A.descriptor, B.data, 1, 1, B.descriptor, dtype, d, hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpPotrs(h, CUBLAS_FILL_MODE_LOWER, n, nrhs, A.data, 1, 1, A.descriptor,
                               B.data, 1, 1, B.descriptor, dtype, dw, d, hw, hb,
                               info->typed_data());
      });
}

// getrf: P A = L U, partial pivoting, in place. Args: a. Rets: lu (aliases
// a), ipiv (int64 per local row, as int32 pairs), info. Attrs: grid, n, tile.
ffi::Error Getrf(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> lu,
                 ffi::Result<ffi::AnyBuffer> ipiv, ffi::Result<ffi::Buffer<ffi::S32>> info,
                 int64_t comm, int64_t grid_rows, int64_t grid_cols, int64_t n, int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(a.element_type(), &dtype));
  JAXSOLVE_RETURN_IF_ERROR(Place(a, lu, stream));
  JAXSOLVE_RETURN_IF_ERROR(
      Cuda(cudaMemsetAsync(info->typed_data(), 0, sizeof(int), stream), "cudaMemsetAsync"));
  int64_t lld = 0;
  JAXSOLVE_RETURN_IF_ERROR(LocalLld("a", a, &lld));
  if (ipiv->size_bytes() < static_cast<size_t>(lld) * sizeof(int64_t)) {
    return Invalid("ipiv must hold one int64 per local row");
  }
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(a.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A;
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "a", a, lu->untyped_data(), n, n, tile, &A));
  auto* pivots = static_cast<int64_t*>(ipiv->untyped_data());
  auto h = session.handle();
  return Factorization(Run(
      session, "cusolverMpGetrf",
      [&](size_t* d, size_t* hb) {
        return cusolverMpGetrf_bufferSize(h, n, n, A.data, 1, 1, A.descriptor, pivots, dtype, d,
                                          hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpGetrf(h, n, n, A.data, 1, 1, A.descriptor, pivots, dtype, dw, d, hw, hb,
                               info->typed_data());
      }), info->typed_data(), stream);
}

// getrs: X = A⁻¹ B with getrf's factor (cuSOLVERMp 0.9 solves with A only:
// trans 'T' and 'C' are CUSOLVER_STATUS_NOT_SUPPORTED). Args: lu, ipiv, b.
// Rets: x (aliases b), info. Attrs: grid, n, nrhs, tile.
ffi::Error Getrs(cudaStream_t stream, ffi::AnyBuffer lu, ffi::AnyBuffer ipiv, ffi::AnyBuffer b,
                 ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::Buffer<ffi::S32>> info,
                 int64_t comm, int64_t grid_rows, int64_t grid_cols, int64_t n, int64_t nrhs,
                 int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(lu.element_type(), &dtype));
  JAXSOLVE_RETURN_IF_ERROR(Place(b, x, stream));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(lu.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A, B;
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "lu", lu, lu.untyped_data(), n, n, tile, &A));
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "b", b, x->untyped_data(), n, nrhs, tile, &B));
  const auto* pivots = static_cast<const int64_t*>(ipiv.untyped_data());
  const auto op = CUBLAS_OP_N;
  auto h = session.handle();
  return Run(
      session, "cusolverMpGetrs",
      [&](size_t* d, size_t* hb) {
        return cusolverMpGetrs_bufferSize(h, op, n, nrhs, A.data, 1, 1, A.descriptor, pivots,
                                          B.data, 1, 1, B.descriptor, dtype, d, hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpGetrs(h, op, n, nrhs, A.data, 1, 1, A.descriptor, pivots, B.data, 1, 1,
                               B.descriptor, dtype, dw, d, hw, hb, info->typed_data());
      });
}

// syevd: A = Z diag(w) Zᴴ from A's lower triangle. Args: a. Rets: work
// (aliases a; destroyed), w (n real eigenvalues, ascending, on every device),
// z (like a), info. Attrs: grid, n, tile.
ffi::Error Syevd(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> work,
                 ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> z,
                 ffi::Result<ffi::Buffer<ffi::S32>> info, int64_t comm, int64_t grid_rows,
                 int64_t grid_cols, int64_t n, int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(a.element_type(), &dtype));
  JAXSOLVE_RETURN_IF_ERROR(Place(a, work, stream));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(a.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A, Z;
  JAXSOLVE_RETURN_IF_ERROR(
      Describe(session, dtype, "a", a, work->untyped_data(), n, n, tile, &A));
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "z", *z, z->untyped_data(), n, n, tile, &Z));
  char jobz[] = "V";
  void* eigenvalues = w->untyped_data();
  auto h = session.handle();
  return Run(
      session, "cusolverMpSyevd",
      [&](size_t* d, size_t* hb) {
        return cusolverMpSyevd_bufferSize(h, jobz, CUBLAS_FILL_MODE_LOWER, n, A.data, 1, 1,
                                          A.descriptor, eigenvalues, Z.data, 1, 1, Z.descriptor,
                                          dtype, d, hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpSyevd(h, jobz, CUBLAS_FILL_MODE_LOWER, n, A.data, 1, 1, A.descriptor,
                               eigenvalues, Z.data, 1, 1, Z.descriptor, dtype, dw, d, hw, hb,
                               info->typed_data());
      });
}

// sygvd: A Z = B Z diag(w), Zᴴ B Z = I (ibtype 1) from the lower triangles.
// Args: a, b. Rets: a_work, b_work (alias a, b; destroyed), w, z, info.
// Attrs: grid, n, tile.
ffi::Error Sygvd(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                 ffi::Result<ffi::AnyBuffer> a_work, ffi::Result<ffi::AnyBuffer> b_work,
                 ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> z,
                 ffi::Result<ffi::Buffer<ffi::S32>> info, int64_t comm, int64_t grid_rows,
                 int64_t grid_cols, int64_t n, int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(a.element_type(), &dtype));
  JAXSOLVE_RETURN_IF_ERROR(Place(a, a_work, stream));
  JAXSOLVE_RETURN_IF_ERROR(Place(b, b_work, stream));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(a.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A, B, Z;
  JAXSOLVE_RETURN_IF_ERROR(
      Describe(session, dtype, "a", a, a_work->untyped_data(), n, n, tile, &A));
  JAXSOLVE_RETURN_IF_ERROR(
      Describe(session, dtype, "b", b, b_work->untyped_data(), n, n, tile, &B));
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "z", *z, z->untyped_data(), n, n, tile, &Z));
  void* eigenvalues = w->untyped_data();
  auto h = session.handle();
  return Run(
      session, "cusolverMpSygvd",
      [&](size_t* d, size_t* hb) {
        return cusolverMpSygvd_bufferSize(h, CUSOLVER_EIG_TYPE_1, CUSOLVER_EIG_MODE_VECTOR,
                                          CUBLAS_FILL_MODE_LOWER, n, 1, 1, A.descriptor, 1, 1,
                                          B.descriptor, 1, 1, Z.descriptor, dtype, d, hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpSygvd(h, CUSOLVER_EIG_TYPE_1, CUSOLVER_EIG_MODE_VECTOR,
                               CUBLAS_FILL_MODE_LOWER, n, A.data, 1, 1, A.descriptor, B.data, 1,
                               1, B.descriptor, eigenvalues, Z.data, 1, 1, Z.descriptor, dtype,
                               dw, d, hw, hb, info->typed_data());
      });
}

// gels: the least-squares solution of A X = B for an m x n A, m >= n
// (QR). Args: a, b. Rets: a_work (aliases a; destroyed), x (aliases b; X in
// its first n rows), info. Attrs: grid, n, m, nrhs, tile.
ffi::Error Gels(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                ffi::Result<ffi::AnyBuffer> a_work, ffi::Result<ffi::AnyBuffer> x,
                ffi::Result<ffi::Buffer<ffi::S32>> info, int64_t comm, int64_t grid_rows,
                int64_t grid_cols, int64_t n, int64_t m, int64_t nrhs, int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(a.element_type(), &dtype));
  if (m < n) return Invalid("gels needs m >= n, got m=" + Str(m) + ", n=" + Str(n));
  JAXSOLVE_RETURN_IF_ERROR(Place(a, a_work, stream));
  JAXSOLVE_RETURN_IF_ERROR(Place(b, x, stream));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(a.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A, B;
  JAXSOLVE_RETURN_IF_ERROR(
      Describe(session, dtype, "a", a, a_work->untyped_data(), m, n, tile, &A));
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "b", b, x->untyped_data(), m, nrhs, tile, &B));
  auto h = session.handle();
  return Run(
      session, "cusolverMpGels",
      [&](size_t* d, size_t* hb) {
        return cusolverMpGels_bufferSize(h, CUBLAS_OP_N, m, n, nrhs, A.data, 1, 1, A.descriptor,
                                         B.data, 1, 1, B.descriptor, dtype, d, hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpGels(h, CUBLAS_OP_N, m, n, nrhs, A.data, 1, 1, A.descriptor, B.data, 1,
                              1, B.descriptor, dtype, dw, d, hw, hb, info->typed_data());
      });
}

// geqrf: A = Q R for an m x n A, in place (R above the diagonal, Q's
// Householder vectors below). Args: a. Rets: qr (aliases a), tau (one per
// local column), info. Attrs: grid, n, m, tile.
ffi::Error Geqrf(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> qr,
                 ffi::Result<ffi::AnyBuffer> tau, ffi::Result<ffi::Buffer<ffi::S32>> info,
                 int64_t comm, int64_t grid_rows, int64_t grid_cols, int64_t n, int64_t m,
                 int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(a.element_type(), &dtype));
  JAXSOLVE_RETURN_IF_ERROR(Place(a, qr, stream));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(a.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A;
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "a", a, qr->untyped_data(), m, n, tile, &A));
  void* taus = tau->untyped_data();
  auto h = session.handle();
  return Run(
      session, "cusolverMpGeqrf",
      [&](size_t* d, size_t* hb) {
        return cusolverMpGeqrf_bufferSize(h, m, n, A.data, 1, 1, A.descriptor, dtype, d, hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpGeqrf(h, m, n, A.data, 1, 1, A.descriptor, taus, dtype, dw, d, hw, hb,
                               info->typed_data());
      });
}

// orgqr: the m x n Q of geqrf's factor (k = n reflectors), in place. Args:
// qr, tau. Rets: q (aliases qr), info. Attrs: grid, n, m, tile.
ffi::Error Orgqr(cudaStream_t stream, ffi::AnyBuffer qr, ffi::AnyBuffer tau,
                 ffi::Result<ffi::AnyBuffer> q, ffi::Result<ffi::Buffer<ffi::S32>> info,
                 int64_t comm, int64_t grid_rows, int64_t grid_cols, int64_t n, int64_t m,
                 int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(qr.element_type(), &dtype));
  if (m < n) return Invalid("orgqr needs m >= n, got m=" + Str(m) + ", n=" + Str(n));
  JAXSOLVE_RETURN_IF_ERROR(Place(qr, q, stream));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(qr.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A;
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "qr", qr, q->untyped_data(), m, n, tile, &A));
  const void* taus = tau.untyped_data();
  auto h = session.handle();
  return Run(
      session, "cusolverMpOrgqr",
      [&](size_t* d, size_t* hb) {
        return cusolverMpOrgqr_bufferSize(h, m, n, n, A.data, 1, 1, A.descriptor, taus, dtype, d,
                                          hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpOrgqr(h, m, n, n, A.data, 1, 1, A.descriptor, taus, dtype, dw, d, hw,
                               hb, info->typed_data());
      });
}

// gesvd: the thin SVD A = U diag(s) Vᴴ of an m x n A, k = min(m, n)
// (cuSOLVERMp's default descriptor). Args: a. Rets: work (aliases a;
// destroyed), s (k real singular values, descending, on every device),
// u (m x k, local), vt (k x n, local), info. Attrs: grid, n, m, tile.
ffi::Error Gesvd(cudaStream_t stream, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> work,
                 ffi::Result<ffi::AnyBuffer> s, ffi::Result<ffi::AnyBuffer> u,
                 ffi::Result<ffi::AnyBuffer> vt, ffi::Result<ffi::Buffer<ffi::S32>> info,
                 int64_t comm, int64_t grid_rows, int64_t grid_cols, int64_t n, int64_t m,
                 int64_t tile) {
  cudaDataType_t dtype;
  JAXSOLVE_RETURN_IF_ERROR(DataType(a.element_type(), &dtype));
  const int64_t k = m < n ? m : n;
  JAXSOLVE_RETURN_IF_ERROR(Place(a, work, stream));
  Session session;
  JAXSOLVE_RETURN_IF_ERROR(session.Open(a.untyped_data(), stream, comm, grid_rows, grid_cols));
  Matrix A, U, VT;
  JAXSOLVE_RETURN_IF_ERROR(
      Describe(session, dtype, "a", a, work->untyped_data(), m, n, tile, &A));
  JAXSOLVE_RETURN_IF_ERROR(Describe(session, dtype, "u", *u, u->untyped_data(), m, k, tile, &U));
  JAXSOLVE_RETURN_IF_ERROR(
      Describe(session, dtype, "vt", *vt, vt->untyped_data(), k, n, tile, &VT));
  void* values = s->untyped_data();
  auto h = session.handle();
  const auto vectors = CUSOLVER_EIG_MODE_VECTOR;
  return Run(
      session, "cusolverMpGesvd",
      [&](size_t* d, size_t* hb) {
        return cusolverMpGesvd_bufferSize(h, nullptr, vectors, vectors, m, n, A.data, 1, 1,
                                          A.descriptor, values, U.data, 1, 1, U.descriptor,
                                          VT.data, 1, 1, VT.descriptor, dtype, d, hb);
      },
      [&](void* dw, size_t d, void* hw, size_t hb) {
        return cusolverMpGesvd(h, nullptr, vectors, vectors, m, n, A.data, 1, 1, A.descriptor,
                               values, U.data, 1, 1, U.descriptor, VT.data, 1, 1, VT.descriptor,
                               dtype, dw, d, hw, hb, info->typed_data());
      });
}

// The bindings: context, operands, results, then the grid attributes.
template <typename Binding>
auto WithGrid(Binding binding) {
  return std::move(binding)
      .template Attr<int64_t>("comm")
      .template Attr<int64_t>("grid_rows")
      .template Attr<int64_t>("grid_cols")
      .template Attr<int64_t>("n");
}

auto Stream() { return ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>(); }

}  // namespace
}  // namespace jaxsolve::dense

namespace js = ::jaxsolve::dense;

// The handlers, the library's exports besides the cache functions below.
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpPotrf(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpPotrs(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpGetrf(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpGetrs(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpSyevd(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpSygvd(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpGels(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpGeqrf(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpOrgqr(XLA_FFI_CallFrame* call_frame);
JAXSOLVE_DENSE_EXPORT XLA_FFI_Error* JaxsolveDenseCusolverMpGesvd(XLA_FFI_CallFrame* call_frame);

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpPotrf, js::Potrf,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpPotrs, js::Potrs,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("nrhs")
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpGetrf, js::Getrf,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpGetrs, js::Getrs,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Arg<js::ffi::AnyBuffer>()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("nrhs")
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpSyevd, js::Syevd,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpSygvd, js::Sygvd,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpGels, js::Gels,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("m")
        .Attr<int64_t>("nrhs")
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpGeqrf, js::Geqrf,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("m")
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpOrgqr, js::Orgqr,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("m")
        .Attr<int64_t>("tile"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    JaxsolveDenseCusolverMpGesvd, js::Gesvd,
    js::WithGrid(js::Stream()
                     .Arg<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::AnyBuffer>()
                     .Ret<js::ffi::Buffer<js::ffi::S32>>())
        .Attr<int64_t>("m")
        .Attr<int64_t>("tile"));

// Frees every cached handle, grid, descriptor and workspace (after the
// devices' queued work). Returns how many grids it freed.
JAXSOLVE_DENSE_EXPORT int JaxsolveDenseCusolverMpClear() {
  std::map<js::GridKey, std::shared_ptr<js::Slot>> slots;
  {
    std::lock_guard<std::mutex> lock(js::cache_mutex);
    slots.swap(js::Cache());
  }
  int freed = 0;
  for (auto& entry : slots) {
    std::lock_guard<std::mutex> lock(entry.second->mutex);
    freed += entry.second->grid != nullptr;
    entry.second->grid.reset();
  }
  return freed;
}

// How many grids the cache holds (for tests of reuse).
JAXSOLVE_DENSE_EXPORT int JaxsolveDenseCusolverMpCachedGrids() {
  std::lock_guard<std::mutex> lock(js::cache_mutex);
  int count = 0;
  for (auto& entry : js::Cache()) count += entry.second->grid != nullptr;
  return count;
}

// The bytes of the device workspaces the cache holds (for memory accounting:
// they are cudaMalloc'ed, outside XLA's allocator).
JAXSOLVE_DENSE_EXPORT int64_t JaxsolveDenseCusolverMpWorkspaceBytes() {
  std::lock_guard<std::mutex> lock(js::cache_mutex);
  int64_t bytes = 0;
  for (auto& entry : js::Cache()) {
    if (entry.second->grid) bytes += static_cast<int64_t>(entry.second->grid->device_bytes);
  }
  return bytes;
}
