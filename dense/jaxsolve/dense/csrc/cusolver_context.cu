// The per-stream cache of cusolver_context.h, and the two plain C functions
// Python calls besides the handlers: JaxsolveDenseCusolverClear() and
// JaxsolveDenseCusolverWorkspaceBytes().
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "cusolver_context.h"

namespace jaxsolve::dense {
namespace {

// Every context, by stream. A handler takes its context's mutex while it holds
// this map's, and keeps it while it runs; clearing takes the map's mutex, then
// each context's, so it waits for the handlers that are running.
std::mutex& ContextsMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::unordered_map<cudaStream_t, std::unique_ptr<Context>>& Contexts() {
  static auto* contexts = new std::unordered_map<cudaStream_t, std::unique_ptr<Context>>;
  return *contexts;
}

}  // namespace

ffi::Error Context::Of(cudaStream_t stream, Context** context,
                       std::unique_lock<std::mutex>* lock) {
  std::lock_guard<std::mutex> contexts_lock(ContextsMutex());
  auto& slot = Contexts()[stream];
  if (slot == nullptr) {
    auto fresh = std::make_unique<Context>();
    JAXSOLVE_CUDA(cudaGetDevice(&fresh->device_));
    fresh->stream_ = stream;
    JAXSOLVE_CUSOLVER(cusolverDnCreate(&fresh->handle_));
    JAXSOLVE_CUSOLVER(cusolverDnSetStream(fresh->handle_, stream));
    JAXSOLVE_CUSOLVER(cusolverDnCreateParams(&fresh->params_));
    slot = std::move(fresh);
  }
  *context = slot.get();
  *lock = std::unique_lock<std::mutex>(slot->mutex_);
  return ffi::Error::Success();
}

ffi::Error Context::Blas(cublasHandle_t* handle) {
  if (blas_ == nullptr) {
    cublasHandle_t fresh = nullptr;
    JAXSOLVE_CUBLAS(cublasCreate(&fresh));
    const cublasStatus_t bound = cublasSetStream(fresh, stream_);
    if (bound != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(fresh);
      return CublasError(bound, "cublasSetStream");
    }
    blas_ = fresh;
  }
  *handle = blas_;
  return ffi::Error::Success();
}

ffi::Error Context::Workspace(cudaStream_t stream, size_t aux, const WorkspaceSizes& sizes,
                              void** aux_ptr, void** device_ptr, void** host_ptr) {
  const size_t aux_bytes = AuxBytes(aux);
  const size_t needed = aux_bytes + sizes.device;
  if (needed > device_bytes_) {
    // Stream-ordered: the old workspace is freed after the work already on the
    // stream that uses it, and the new one is ready for the work that follows.
    if (device_workspace_ != nullptr) {
      JAXSOLVE_CUDA(cudaFreeAsync(device_workspace_, stream));
      device_workspace_ = nullptr;
      device_bytes_ = 0;
    }
    JAXSOLVE_CUDA(cudaMallocAsync(&device_workspace_, needed, stream));
    device_bytes_ = needed;
  }
  if (sizes.host > host_workspace_.size()) host_workspace_.resize(sizes.host);
  *aux_ptr = device_workspace_;
  *device_ptr = static_cast<char*>(device_workspace_) + aux_bytes;
  *host_ptr = host_workspace_.empty() ? nullptr : host_workspace_.data();
  return ffi::Error::Success();
}

void Context::Release() {
  int current = 0;
  const bool restore = cudaGetDevice(&current) == cudaSuccess;
  if (cudaSetDevice(device_) == cudaSuccess) {
    cudaDeviceSynchronize();
    if (device_workspace_ != nullptr) cudaFree(device_workspace_);
  }
  if (blas_ != nullptr) cublasDestroy(blas_);
  if (params_ != nullptr) cusolverDnDestroyParams(params_);
  if (handle_ != nullptr) cusolverDnDestroy(handle_);
  device_workspace_ = nullptr;
  device_bytes_ = 0;
  blas_ = nullptr;
  params_ = nullptr;
  handle_ = nullptr;
  host_workspace_.clear();
  sizes_.clear();
  if (restore) cudaSetDevice(current);
  cudaGetLastError();  // errors while tearing down (at exit, say) are not reported later
}

}  // namespace jaxsolve::dense

namespace jd = ::jaxsolve::dense;

// Frees every cached handle and workspace (after the devices finish their
// work); the next call on a stream creates them again.
JAXSOLVE_DENSE_EXPORT void JaxsolveDenseCusolverClear() {
  std::lock_guard<std::mutex> lock(jd::ContextsMutex());
  for (auto& [stream, context] : jd::Contexts()) {
    std::lock_guard<std::mutex> busy(context->mutex());
    context->Release();
  }
  jd::Contexts().clear();
}

// The bytes of device workspace the cache holds now, over all streams.
JAXSOLVE_DENSE_EXPORT int64_t JaxsolveDenseCusolverWorkspaceBytes() {
  std::lock_guard<std::mutex> lock(jd::ContextsMutex());
  int64_t total = 0;
  for (auto& [stream, context] : jd::Contexts()) total += context->device_bytes();
  return total;
}
