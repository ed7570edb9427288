// libjaxsolve_nccl.so: jaxsolve's own NCCL communicators.
//
// Python (jaxsolve/sharding/_nccl.py) creates a communicator over a set of
// devices once, under a key it chooses, and the native solvers' XLA FFI
// handlers look up their device's member by that key
// (JaxsolveNcclCommunicator), so no XLA internals are involved. One process
// may hold several members of one communicator (one per local GPU: NCCL's
// group of ncclCommInitRank), or one (one process per GPU).
//
// NCCL itself is not linked: its symbols bind at load time to the libnccl.so.2
// that jaxsolve.sharding loaded with RTLD_GLOBAL before this library (the one
// of the nvidia-nccl pip wheel, or one already in the process), so that this
// library and cuSOLVERMp use the same NCCL.
//
// Every function returns an int status: 0, an ncclResult_t (> 0), or
// -cudaError_t (< 0); JaxsolveNcclErrorString names it.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

// The CUDA major this library is built for (its file name's), checked against
// the runtime headers it is compiled with.
static_assert(CUDART_VERSION / 1000 == JAXSOLVE_CUDA_MAJOR,
              "built against the runtime headers of another CUDA major");

#define JAXSOLVE_NCCL_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// (key, CUDA device ordinal) -> this process's member of communicator `key`.
std::mutex registry_mutex;
std::map<std::pair<int64_t, int>, ncclComm_t>& Registry() {
  static auto* registry = new std::map<std::pair<int64_t, int>, ncclComm_t>;
  return *registry;
}

int CudaStatus(cudaError_t error) { return error == cudaSuccess ? 0 : -static_cast<int>(error); }

}  // namespace

JAXSOLVE_NCCL_EXPORT int JaxsolveNcclVersion(int* version) { return ncclGetVersion(version); }

JAXSOLVE_NCCL_EXPORT int JaxsolveNcclUniqueIdBytes() { return NCCL_UNIQUE_ID_BYTES; }

// Writes a fresh ncclUniqueId (NCCL_UNIQUE_ID_BYTES bytes) to `out`.
JAXSOLVE_NCCL_EXPORT int JaxsolveNcclGetUniqueId(char* out) {
  ncclUniqueId id;
  const ncclResult_t result = ncclGetUniqueId(&id);
  if (result == ncclSuccess) std::memcpy(out, id.internal, NCCL_UNIQUE_ID_BYTES);
  return result;
}

// Creates this process's `count` members of an `nranks`-rank communicator
// from the unique id `id`: member i has rank ranks[i] on CUDA device
// devices[i]. Every process holding members must call it with the same id
// and key. Registers them under `key`, which must not be in use.
JAXSOLVE_NCCL_EXPORT int JaxsolveNcclCreate(int64_t key, const char* id, int nranks, int count,
                                            const int* ranks, const int* devices) {
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (int i = 0; i < count; ++i) {
      if (Registry().count({key, devices[i]})) return ncclInvalidUsage;
    }
  }
  ncclUniqueId unique_id;
  std::memcpy(unique_id.internal, id, NCCL_UNIQUE_ID_BYTES);
  int previous_device = 0;
  if (int s = CudaStatus(cudaGetDevice(&previous_device))) return s;
  std::vector<ncclComm_t> comms(count, nullptr);
  ncclResult_t result = ncclGroupStart();
  int status = result;
  for (int i = 0; status == 0 && i < count; ++i) {
    status = CudaStatus(cudaSetDevice(devices[i]));
    if (status == 0) status = ncclCommInitRank(&comms[i], nranks, unique_id, ranks[i]);
  }
  result = ncclGroupEnd();
  if (status == 0) status = result;
  cudaSetDevice(previous_device);
  if (status != 0) {
    for (ncclComm_t comm : comms) {
      if (comm != nullptr) ncclCommAbort(comm);
    }
    return status;
  }
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (int i = 0; i < count; ++i) Registry()[{key, devices[i]}] = comms[i];
  return 0;
}

// This process's member of communicator `key` on CUDA device `device`, or
// null. Called by the solvers' handlers.
JAXSOLVE_NCCL_EXPORT ncclComm_t JaxsolveNcclCommunicator(int64_t key, int device) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = Registry().find({key, device});
  return it == Registry().end() ? nullptr : it->second;
}

// The rank and size of a member (what NCCL reports), for checks.
JAXSOLVE_NCCL_EXPORT int JaxsolveNcclRank(int64_t key, int device, int* rank, int* size) {
  ncclComm_t comm = JaxsolveNcclCommunicator(key, device);
  if (comm == nullptr) return ncclInvalidArgument;
  if (ncclResult_t r = ncclCommUserRank(comm, rank)) return r;
  return ncclCommCount(comm, size);
}

// Destroys this process's members of communicator `key` (a collective: every
// process holding members calls it). Users of the communicator (cuSOLVERMp
// grids) must be gone first.
JAXSOLVE_NCCL_EXPORT int JaxsolveNcclDestroy(int64_t key) {
  std::vector<ncclComm_t> comms;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (auto it = Registry().begin(); it != Registry().end();) {
      if (it->first.first == key) {
        comms.push_back(it->second);
        it = Registry().erase(it);
      } else {
        ++it;
      }
    }
  }
  // One thread holding several members finalizes them together (NCCL's rule
  // for members of one communicator in one thread), then frees them.
  int status = ncclGroupStart();
  for (ncclComm_t comm : comms) {
    const ncclResult_t r = ncclCommFinalize(comm);
    if (status == 0) status = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (status == 0) status = end;
  for (ncclComm_t comm : comms) {
    const ncclResult_t r = ncclCommDestroy(comm);
    if (status == 0) status = r;
  }
  return status;
}

JAXSOLVE_NCCL_EXPORT const char* JaxsolveNcclErrorString(int status) {
  if (status < 0) return cudaGetErrorString(static_cast<cudaError_t>(-status));
  return ncclGetErrorString(static_cast<ncclResult_t>(status));
}
