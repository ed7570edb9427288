// What every cuSOLVER handler of libjaxsolve_dense_cusolver_cuda<major>.so
// shares: the cuSOLVER handle and workspace of the stream it runs on, cached
// across calls, and the mapping from XLA's element types to cuSOLVER's.
//
// A Context belongs to one CUDA stream (XLA's compute stream of one device):
// it holds a cusolverDn handle bound to that stream, its 64-bit API params, a
// cuBLAS handle on the same stream (created on first use: only syevd's
// back-transformation needs one),
// one device workspace that grows to the largest size any call on the stream
// has asked for, a host workspace likewise, and the sizes cuSOLVER's
// *_bufferSize functions returned, per routine, element type and shape. So the
// first call of a shape pays for the handle and the size queries, and every
// later call pays for neither. The workspace is allocated and freed in stream
// order (cudaMallocAsync / cudaFreeAsync on the stream), so growing it never
// waits for the device. JaxsolveDenseCusolverClear() frees everything (it
// synchronizes the devices first), and Python calls it from
// jaxsolve.dense.clear_cache() and at exit.
#ifndef JAXSOLVE_DENSE_CSRC_CUSOLVER_CONTEXT_H_
#define JAXSOLVE_DENSE_CSRC_CUSOLVER_CONTEXT_H_

#include <cuComplex.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "xla/ffi/api/ffi.h"

#define JAXSOLVE_DENSE_EXPORT extern "C" __attribute__((visibility("default")))

namespace jaxsolve::dense {

namespace ffi = ::xla::ffi;

// The status of a cuSOLVER call as an ffi::Error naming the call.
inline ffi::Error CusolverError(cusolverStatus_t status, const char* what) {
  if (status == CUSOLVER_STATUS_SUCCESS) return ffi::Error::Success();
  return ffi::Error::Internal(std::string(what) + " failed with cusolverStatus_t " +
                              std::to_string(static_cast<int>(status)));
}

inline ffi::Error CudaError(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string(what) + " failed: " + cudaGetErrorName(error) +
                              ": " + cudaGetErrorString(error));
}

// Returns from the enclosing function when `expr` (an ffi::Error) failed.
#define JAXSOLVE_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::xla::ffi::Error jaxsolve_error_ = (expr); \
    if (jaxsolve_error_.failure()) return jaxsolve_error_; \
  } while (0)

inline ffi::Error CublasError(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return ffi::Error::Success();
  return ffi::Error::Internal(std::string(what) + " failed with cublasStatus_t " +
                              std::to_string(static_cast<int>(status)));
}

#define JAXSOLVE_CUSOLVER(call) JAXSOLVE_RETURN_IF_ERROR(CusolverError((call), #call))
#define JAXSOLVE_CUBLAS(call) JAXSOLVE_RETURN_IF_ERROR(CublasError((call), #call))
#define JAXSOLVE_CUDA(call) JAXSOLVE_RETURN_IF_ERROR(CudaError((call), #call))

// The element types of the four supported dtypes, as the kernels and the
// typed (32-bit) cuSOLVER API see them, with cuBLAS's compute type for them.
template <typename T>
struct Scalar;

#define JAXSOLVE_SCALAR(T, R, TYPE, REAL_TYPE, COMPUTE)            \
  template <>                                                      \
  struct Scalar<T> {                                               \
    using Real = R;                                                \
    static constexpr cudaDataType kType = TYPE;                    \
    static constexpr cudaDataType kRealType = REAL_TYPE;           \
    static constexpr cublasComputeType_t kCompute = COMPUTE;       \
  };
JAXSOLVE_SCALAR(float, float, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F)
JAXSOLVE_SCALAR(double, double, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F)
JAXSOLVE_SCALAR(cuFloatComplex, float, CUDA_C_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F)
JAXSOLVE_SCALAR(cuDoubleComplex, double, CUDA_C_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F)
#undef JAXSOLVE_SCALAR

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with T the element type of `dtype`.
template <typename F>
ffi::Error DispatchDtype(ffi::DataType dtype, const char* routine, F&& f) {
  switch (dtype) {
    case ffi::DataType::F32:
      return f(Tag<float>{});
    case ffi::DataType::F64:
      return f(Tag<double>{});
    case ffi::DataType::C64:
      return f(Tag<cuFloatComplex>{});
    case ffi::DataType::C128:
      return f(Tag<cuDoubleComplex>{});
    default:
      return ffi::Error::InvalidArgument(
          std::string(routine) + ": the matrix must be float32, float64, complex64 or complex128");
  }
}

// What a routine needs besides its operands: cuSOLVER's device and host
// workspace sizes, in bytes.
struct WorkspaceSizes {
  size_t device = 0;
  size_t host = 0;
};

// (routine, dtype, dimensions...): the key of a cached WorkspaceSizes.
using SizeKey = std::array<int64_t, 5>;

class Context {
 public:
  // The context of `stream`, created on its first use (with the device that is
  // current, the stream's), locked by `lock` for the handler's duration.
  static ffi::Error Of(cudaStream_t stream, Context** context,
                       std::unique_lock<std::mutex>* lock);

  cusolverDnHandle_t handle() const { return handle_; }
  cusolverDnParams_t params() const { return params_; }
  std::mutex& mutex() { return mutex_; }

  // The cuBLAS handle on this context's stream, created the first time.
  ffi::Error Blas(cublasHandle_t* handle);

  // The workspace sizes of `key`, from `query` (which fills a WorkspaceSizes
  // through cuSOLVER's *_bufferSize) the first time only.
  template <typename Query>
  ffi::Error Sizes(const SizeKey& key, Query&& query, WorkspaceSizes* sizes) {
    auto it = sizes_.find(key);
    if (it == sizes_.end()) {
      WorkspaceSizes fresh;
      JAXSOLVE_RETURN_IF_ERROR(query(&fresh));
      it = sizes_.emplace(key, fresh).first;
    }
    *sizes = it->second;
    return ffi::Error::Success();
  }

  // A device workspace of `aux` bytes for the handler's own use (pivots,
  // info, tau), then `sizes.device` bytes for cuSOLVER, and a host workspace
  // of `sizes.host` bytes; valid until the next call on this stream.
  ffi::Error Workspace(cudaStream_t stream, size_t aux, const WorkspaceSizes& sizes,
                       void** aux_ptr, void** device_ptr, void** host_ptr);

  // Frees everything; the device must be idle.
  void Release();

  int64_t device_bytes() const { return static_cast<int64_t>(device_bytes_); }

 private:
  int device_ = 0;
  cusolverDnHandle_t handle_ = nullptr;
  cusolverDnParams_t params_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* device_workspace_ = nullptr;
  size_t device_bytes_ = 0;
  std::vector<char> host_workspace_;
  std::map<SizeKey, WorkspaceSizes> sizes_;
  std::mutex mutex_;
};

// Bytes reserved for the handler's own data ahead of cuSOLVER's workspace,
// rounded so that cuSOLVER's part stays 256-byte aligned.
inline size_t AuxBytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace jaxsolve::dense

#endif  // JAXSOLVE_DENSE_CSRC_CUSOLVER_CONTEXT_H_
