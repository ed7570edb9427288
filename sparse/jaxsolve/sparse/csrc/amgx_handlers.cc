// libjaxsolve_sparse_amgx_cuda<major>.so: jaxsolve.sparse's AmgX backend, an
// XLA FFI handler that solves with NVIDIA AmgX's C API (amgx_c.h, vendored in
// third_party/amgx) and the plain C functions jaxsolve/sparse/_amgx.py calls
// through ctypes.
//
// AmgX is never linked: JaxsolveSparseAmgxLoad dlopens libamgxsh.so (the path
// _amgx.py finds: AMGX_LIB, AMGX_DIR/lib, or the loader's search path) and binds
// the API's functions by name, so the library builds and loads without AmgX, and
// only a solve that asks for AmgX needs it.
//
// Handles. A solver (AmgX's config, matrix, vectors and solver, on the
// resources its device shares with every other solver there) is kept per id in
// a table; _amgx.py allocates one id per sparsity pattern,
// configuration, dtype and orientation (A or Aᵀ) and holds it in the setup cache,
// whose eviction and clear_cache release it (JaxsolveSparseAmgxRelease). The
// handler creates the solver on its first call with an id, from the config text
// it carries as an attribute, uploads the matrix (AMGX_matrix_upload_all) and
// sets it up; later calls replace the coefficients
// (AMGX_matrix_replace_coefficients) and set up again, or, with reuse_setup,
// solve with the setup they have. A compiled program whose id was released
// creates it again on its next call.
//
// Streams. AmgX runs on its own stream and copies with cudaMemcpy; the handler
// waits for XLA's stream before AmgX reads the inputs, and for the device before
// it returns, so AmgX's work is complete when XLA's stream continues.
//
// Errors. Every AmgX call's return code is checked (the config leaves AmgX's
// exception_handling at 0: errors come back as codes, AmgX never exits the
// process), and a failure becomes an ffi::Error naming the call, AmgX's error
// string, the messages AmgX printed for it (its error output is captured) and
// the versions of AmgX and CUDA: a Python exception, never a crash. The solver
// it failed in is dropped (never destroyed: see Solver::failed); the next call
// with its id builds it again.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "export.h"
#include "third_party/amgx/amgx_c.h"
#include "xla/ffi/api/ffi.h"

namespace jaxsolve::sparse {
namespace {

namespace ffi = ::xla::ffi;

// The AmgX functions the backend calls, bound from libamgxsh.so by name.
struct AmgxApi {
#define JAXSOLVE_AMGX_FUNCTIONS(X)                                          \
  X(AMGX_initialize)                                                        \
  X(AMGX_finalize)                                                          \
  X(AMGX_get_error_string)                                                  \
  X(AMGX_get_api_version)                                                   \
  X(AMGX_get_build_info_strings)                                            \
  X(AMGX_register_print_callback)                                           \
  X(AMGX_config_create)                                                     \
  X(AMGX_config_destroy)                                                    \
  X(AMGX_resources_create)                                                  \
  X(AMGX_resources_destroy)                                                 \
  X(AMGX_matrix_create)                                                     \
  X(AMGX_matrix_destroy)                                                    \
  X(AMGX_matrix_upload_all)                                                 \
  X(AMGX_matrix_replace_coefficients)                                       \
  X(AMGX_vector_create)                                                     \
  X(AMGX_vector_destroy)                                                    \
  X(AMGX_vector_upload)                                                     \
  X(AMGX_vector_set_zero)                                                   \
  X(AMGX_vector_download)                                                   \
  X(AMGX_solver_create)                                                     \
  X(AMGX_solver_destroy)                                                    \
  X(AMGX_solver_setup)                                                      \
  X(AMGX_solver_solve_with_0_initial_guess)                                 \
  X(AMGX_solver_get_iterations_number)                                      \
  X(AMGX_solver_get_iteration_residual)                                     \
  X(AMGX_solver_get_status)                                                 \
  X(AMGX_solver_calculate_residual_norm)
#define JAXSOLVE_AMGX_POINTER(name) decltype(&::name) name = nullptr;
  JAXSOLVE_AMGX_FUNCTIONS(JAXSOLVE_AMGX_POINTER)
#undef JAXSOLVE_AMGX_POINTER
};

// Everything below is guarded by g_mutex: AmgX's C API is not thread-safe.
std::mutex g_mutex;
AmgxApi g_api;
void* g_library = nullptr;
std::string g_versions;  // "AmgX 2.5.0 (built ...), CUDA runtime 13.0, driver 13.0"
std::string g_output;    // what AmgX printed as errors since the last call began

void CaptureErrorOutput(const char* message, int length) {
  g_output.append(message, static_cast<size_t>(std::max(length, 0)));
  constexpr size_t kKeep = 4096;  // the end of a long trace says what failed
  if (g_output.size() > kKeep) g_output.erase(0, g_output.size() - kKeep);
}

// AmgX's ordinary output (print_solve_stats, print_grid_stats) goes to stdout,
// as AmgX prints it itself.
void PrintOutput(const char* message, int length) {
  std::fwrite(message, 1, static_cast<size_t>(std::max(length, 0)), stdout);
  std::fflush(stdout);
}

std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string Versions() {
  std::string text = "AmgX";
  char* version = nullptr;
  char* date = nullptr;
  char* time = nullptr;
  if (g_api.AMGX_get_build_info_strings(&version, &date, &time) == AMGX_RC_OK &&
      version != nullptr) {
    text += std::string(" ") + version;
  }
  // The CUDA runtime AmgX runs (its own libcudart, found through its handle).
  using RuntimeVersion = cudaError_t (*)(int*);
  auto amgx_runtime = reinterpret_cast<RuntimeVersion>(dlsym(g_library, "cudaRuntimeGetVersion"));
  int runtime = 0;
  if (amgx_runtime != nullptr && amgx_runtime(&runtime) == cudaSuccess) {
    text += ", CUDA runtime " + CudaVersionText(runtime);
  }
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    text += ", CUDA driver " + CudaVersionText(driver);
  }
  return text;
}

// The message of a failed AmgX call, with what AmgX printed about it. A CUDA
// error that made the call fail (a failed kernel launch, say) is cleared from
// AmgX's CUDA runtime, so that AmgX's next call does not report it again.
std::string AmgxFailure(const char* call, AMGX_RC rc) {
  using LastError = cudaError_t (*)();
  if (auto last = reinterpret_cast<LastError>(dlsym(g_library, "cudaGetLastError"))) last();
  char text[512] = {0};
  g_api.AMGX_get_error_string(rc, text, sizeof(text));
  std::string message = std::string("AmgX failed in ") + call + " (return code " +
                        std::to_string(static_cast<int>(rc)) + ": " + text + ")";
  std::string output = g_output;
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  if (!output.empty()) message += ": " + output;
  return message + " [" + g_versions + "]";
}

// Loads libamgxsh.so from `path` and initializes AmgX, once; an empty string on
// success, else why not.
std::string Load(const char* path) {
  if (g_library != nullptr) return "";
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    return std::string("cannot load ") + path + ": " + (error ? error : "unknown dlopen error");
  }
  AmgxApi api;
#define JAXSOLVE_AMGX_BIND(name)                                                    \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name));             \
  if (api.name == nullptr) {                                                         \
    dlclose(library);                                                                \
    return std::string(path) + " is not AmgX's C library: it lacks " #name;          \
  }
  JAXSOLVE_AMGX_FUNCTIONS(JAXSOLVE_AMGX_BIND)
#undef JAXSOLVE_AMGX_BIND
  g_api = api;
  g_library = library;
  // AmgX's error output, a C++ global of the library (amgx::error_output), is
  // redirected where it can be found, so that its messages reach the exception;
  // else they go to stderr as AmgX prints them.
  using Callback = void (*)(const char*, int);
  if (auto* error_output = static_cast<Callback*>(dlsym(library, "_ZN4amgx12error_outputE"))) {
    *error_output = CaptureErrorOutput;
  }
  g_api.AMGX_register_print_callback(PrintOutput);
  g_output.clear();
  const AMGX_RC rc = g_api.AMGX_initialize();
  g_versions = Versions();
  if (rc != AMGX_RC_OK) {
    std::string message = AmgxFailure("AMGX_initialize", rc);
    g_library = nullptr;
    g_api = AmgxApi();
    dlclose(library);
    return message;
  }
  return "";
}

// AmgX's resources, one per device, shared by every solver on it, and created
// with a config of their own (AmgX's defaults). AmgX's temporary memory pools
// belong to the device, not to a resources object: a second resources object
// on the device, destroyed while another lives, frees pools the other still
// uses (AmgX issue 109: "multiple solver instance error in clean up"; here it
// aborted the process at the first cache eviction). They live until exit.
struct Resources {
  AMGX_config_handle config = nullptr;
  AMGX_resources_handle resources = nullptr;
};
std::unordered_map<int, Resources> g_resources;

// Set when a solver is left undestroyed because AmgX failed inside it (below);
// then exit skips AMGX_finalize, whose clean-up would meet that solver's objects.
bool g_leaked = false;

// One solver of the table: AmgX's objects for one pattern, config and mode.
struct Solver {
  AMGX_config_handle config = nullptr;
  AMGX_matrix_handle matrix = nullptr;
  AMGX_vector_handle rhs = nullptr;
  AMGX_vector_handle x = nullptr;
  AMGX_solver_handle solver = nullptr;
  bool uploaded = false;
  bool set_up = false;
  // An AmgX call failed in it: AmgX may have left it half built (after a
  // Thrust or CUDA failure its destroy can terminate the process, AmgX issue
  // 289), so it is never used or destroyed again; a later call with its id
  // builds a new one.
  bool failed = false;

  ~Solver() {  // in reverse order of creation; AmgX ignores none of them
    if (failed) {
      g_leaked = true;
      return;
    }
    if (solver) g_api.AMGX_solver_destroy(solver);
    if (x) g_api.AMGX_vector_destroy(x);
    if (rhs) g_api.AMGX_vector_destroy(rhs);
    if (matrix) g_api.AMGX_matrix_destroy(matrix);
    if (config) g_api.AMGX_config_destroy(config);
  }
};

std::unordered_map<int64_t, std::unique_ptr<Solver>> g_solvers;

#define JAXSOLVE_AMGX_CHECK(call, ...)                                           \
  do {                                                                           \
    const AMGX_RC rc_ = g_api.call(__VA_ARGS__);                                 \
    if (rc_ != AMGX_RC_OK) return ffi::Error::Internal(AmgxFailure(#call, rc_)); \
  } while (0)

ffi::Error CudaCheck(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("AmgX backend: ") + what + ": " +
                              cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

// The resources of `device`, created on its first solver.
ffi::Error ResourcesOf(int device, AMGX_resources_handle* resources) {
  Resources& shared = g_resources[device];
  if (shared.resources == nullptr) {
    if (shared.config == nullptr) {
      JAXSOLVE_AMGX_CHECK(AMGX_config_create, &shared.config, "config_version=2");
    }
    JAXSOLVE_AMGX_CHECK(AMGX_resources_create, &shared.resources, shared.config, nullptr, 1,
                        &device);
  }
  *resources = shared.resources;
  return ffi::Error::Success();
}

ffi::Error Create(Solver& s, std::string_view config_text, AMGX_Mode mode, int device) {
  AMGX_resources_handle resources = nullptr;
  if (auto error = ResourcesOf(device, &resources); error.failure()) return error;
  const std::string config(config_text);
  JAXSOLVE_AMGX_CHECK(AMGX_config_create, &s.config, config.c_str());
  JAXSOLVE_AMGX_CHECK(AMGX_matrix_create, &s.matrix, resources, mode);
  JAXSOLVE_AMGX_CHECK(AMGX_vector_create, &s.rhs, resources, mode);
  JAXSOLVE_AMGX_CHECK(AMGX_vector_create, &s.x, resources, mode);
  JAXSOLVE_AMGX_CHECK(AMGX_solver_create, &s.solver, resources, mode, s.config);
  return ffi::Error::Success();
}

template <typename Real>
void Download(const std::vector<double>& host, void* device, cudaStream_t stream) {
  std::vector<Real> converted(host.begin(), host.end());
  cudaMemcpyAsync(device, converted.data(), converted.size() * sizeof(Real),
                  cudaMemcpyHostToDevice, stream);
  cudaStreamSynchronize(stream);  // `converted` dies here
}

ffi::Error Solve(cudaStream_t stream, int64_t id, std::string_view config, bool reuse_setup,
                 ffi::Buffer<ffi::S32, 1> indptr, ffi::Buffer<ffi::S32, 1> indices,
                 ffi::AnyBuffer values, ffi::AnyBuffer rhs, ffi::Result<ffi::AnyBuffer> x,
                 ffi::Result<ffi::Buffer<ffi::S32, 0>> iterations,
                 ffi::Result<ffi::Buffer<ffi::S32, 0>> status,
                 ffi::Result<ffi::AnyBuffer> residual,
                 ffi::Result<ffi::AnyBuffer> history) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_library == nullptr) {
    return ffi::Error::Internal(
        "AmgX backend: libamgxsh.so is not loaded (jaxsolve.sparse loads it before a solve)");
  }
  const ffi::DataType dtype = values.element_type();
  if (dtype != ffi::DataType::F64 && dtype != ffi::DataType::F32) {
    return ffi::Error::InvalidArgument("AmgX backend: values must be float32 or float64");
  }
  const bool f64 = dtype == ffi::DataType::F64;
  const AMGX_Mode mode = f64 ? AMGX_mode_dDDI : AMGX_mode_dFFI;
  const int n = static_cast<int>(indptr.element_count()) - 1;
  const int nnz = static_cast<int>(indices.element_count());

  // AmgX reads the inputs on its own stream: XLA's work on them must be done.
  if (auto error = CudaCheck(cudaStreamSynchronize(stream), "waiting for XLA's stream");
      error.failure()) {
    return error;
  }
  g_output.clear();
  auto& slot = g_solvers[id];
  if (slot == nullptr) {
    cudaPointerAttributes attributes;
    if (auto error = CudaCheck(cudaPointerGetAttributes(&attributes, values.untyped_data()),
                               "finding the device of A's values");
        error.failure()) {
      g_solvers.erase(id);
      return error;
    }
    auto solver = std::make_unique<Solver>();
    if (auto error = Create(*solver, config, mode, attributes.device); error.failure()) {
      g_solvers.erase(id);
      return error;
    }
    slot = std::move(solver);
  }
  Solver& s = *slot;
  // Sets `s` up if it needs it and solves with it.
  ffi::Error error = [&]() -> ffi::Error {
    // The matrix always takes this call's values; with reuse_setup, a solver set
    // up before keeps its preconditioner (built from the values it was set up
    // with) and its Krylov method works on the new ones.
    if (!s.uploaded) {
      JAXSOLVE_AMGX_CHECK(AMGX_matrix_upload_all, s.matrix, n, nnz, 1, 1, indptr.typed_data(),
                          indices.typed_data(), values.untyped_data(), nullptr);
      s.uploaded = true;
    } else {
      JAXSOLVE_AMGX_CHECK(AMGX_matrix_replace_coefficients, s.matrix, n, nnz,
                          values.untyped_data(), nullptr);
      if (!reuse_setup) s.set_up = false;
    }
    if (!s.set_up) {
      JAXSOLVE_AMGX_CHECK(AMGX_solver_setup, s.solver, s.matrix);
      s.set_up = true;
    }
    JAXSOLVE_AMGX_CHECK(AMGX_vector_upload, s.rhs, n, 1, rhs.untyped_data());
    JAXSOLVE_AMGX_CHECK(AMGX_vector_set_zero, s.x, n, 1);
    JAXSOLVE_AMGX_CHECK(AMGX_solver_solve_with_0_initial_guess, s.solver, s.rhs, s.x);
    JAXSOLVE_AMGX_CHECK(AMGX_vector_download, s.x, x->untyped_data());

    int done = 0;
    AMGX_SOLVE_STATUS outcome = AMGX_SOLVE_FAILED;
    JAXSOLVE_AMGX_CHECK(AMGX_solver_get_iterations_number, s.solver, &done);
    JAXSOLVE_AMGX_CHECK(AMGX_solver_get_status, s.solver, &outcome);
    // The true residual ‖rhs − A x‖ of the x returned, in the vectors' precision.
    double norm = 0;
    if (f64) {
      JAXSOLVE_AMGX_CHECK(AMGX_solver_calculate_residual_norm, s.solver, s.matrix, s.rhs, s.x,
                          &norm);
    } else {
      float norm32 = 0;
      JAXSOLVE_AMGX_CHECK(AMGX_solver_calculate_residual_norm, s.solver, s.matrix, s.rhs, s.x,
                          &norm32);
      norm = norm32;
    }
    // AmgX's residual history (store_res_history): norms after 0..done iterations,
    // then NaN, in as many entries as the output holds (max_iters + 1, or none).
    const int64_t stored = static_cast<int64_t>(history->element_count());
    std::vector<double> norms(static_cast<size_t>(stored),
                              std::numeric_limits<double>::quiet_NaN());
    for (int64_t k = 0; k < stored && k <= done; ++k) {
      JAXSOLVE_AMGX_CHECK(AMGX_solver_get_iteration_residual, s.solver, static_cast<int>(k), 0,
                          &norms[static_cast<size_t>(k)]);
    }
    // AmgX's copies (vector_download's cudaMemcpy among them) are on its streams.
    if (auto error = CudaCheck(cudaDeviceSynchronize(), "waiting for AmgX"); error.failure()) {
      return error;
    }
    const int32_t counts[2] = {done, static_cast<int32_t>(outcome)};
    cudaMemcpyAsync(iterations->typed_data(), &counts[0], sizeof(int32_t),
                    cudaMemcpyHostToDevice, stream);
    cudaMemcpyAsync(status->typed_data(), &counts[1], sizeof(int32_t), cudaMemcpyHostToDevice,
                    stream);
    if (f64) {
      Download<double>({norm}, residual->untyped_data(), stream);
      if (stored > 0) Download<double>(norms, history->untyped_data(), stream);
    } else {
      Download<float>({norm}, residual->untyped_data(), stream);
      if (stored > 0) Download<float>(norms, history->untyped_data(), stream);
    }
    return CudaCheck(cudaStreamSynchronize(stream), "copying AmgX's answers");
  }();
  if (error.failure()) {
    s.failed = true;
    g_solvers.erase(id);
  }
  return error;
}

using Indices = ffi::Buffer<ffi::S32, 1>;
using Count = ffi::Buffer<ffi::S32, 0>;

auto BindAmgxSolve() {
  return ffi::Ffi::Bind()
      .Ctx<ffi::PlatformStream<cudaStream_t>>()
      .Attr<int64_t>("handle")
      .Attr<std::string_view>("config")
      .Attr<bool>("reuse_setup")
      .Arg<Indices>()          // indptr
      .Arg<Indices>()          // indices
      .Arg<ffi::AnyBuffer>()   // values
      .Arg<ffi::AnyBuffer>()   // rhs
      .Ret<ffi::AnyBuffer>()   // x
      .Ret<Count>()            // iterations
      .Ret<Count>()            // status
      .Ret<ffi::AnyBuffer>()   // residual norm
      .Ret<ffi::AnyBuffer>();  // history
}

}  // namespace
}  // namespace jaxsolve::sparse

namespace js = ::jaxsolve::sparse;

// JaxsolveSparseAmgxSolve (target jaxsolve_sparse_amgx_solve): A x = rhs by
// AmgX, from x = 0, for one right-hand side. Outputs: x, AmgX's iterations and
// status, the true residual norm ‖rhs − A x‖, and AmgX's residual history
// (max_iters + 1 entries when stored, else none).
JAXSOLVE_SPARSE_EXPORT XLA_FFI_Error* JaxsolveSparseAmgxSolve(XLA_FFI_CallFrame* call_frame);

// Not command-buffer compatible: it waits for the host and runs AmgX's own work.
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxsolveSparseAmgxSolve, js::Solve, js::BindAmgxSolve());

// Loads libamgxsh.so from `path` and initializes AmgX (once per process: later
// calls return at once). Returns 0, or 1 with why not in `message`.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseAmgxLoad(const char* path, char* message,
                                                      int32_t length) {
  std::lock_guard<std::mutex> lock(js::g_mutex);
  const std::string error = js::Load(path);
  if (error.empty()) return 0;
  std::snprintf(message, static_cast<size_t>(length), "%s", error.c_str());
  return 1;
}

// The versions of the loaded AmgX and of CUDA, for messages; empty before a load.
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseAmgxVersions(char* text, int32_t length) {
  std::lock_guard<std::mutex> lock(js::g_mutex);
  std::snprintf(text, static_cast<size_t>(length), "%s", js::g_versions.c_str());
}

// Frees the AmgX objects of solver `id` (nothing if it has none).
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseAmgxRelease(int64_t id) {
  std::lock_guard<std::mutex> lock(js::g_mutex);
  js::g_solvers.erase(id);
}

// Frees every solver's AmgX objects (clear_cache); with `finalize` (at exit)
// also the devices' resources, then AMGX_finalize — unless a failed solver was
// left undestroyed, whose objects AmgX's clean-up would meet: then the process
// ends with AmgX as it is.
JAXSOLVE_SPARSE_EXPORT void JaxsolveSparseAmgxReleaseAll(int32_t finalize) {
  std::lock_guard<std::mutex> lock(js::g_mutex);
  js::g_solvers.clear();
  if (!finalize || js::g_library == nullptr || js::g_leaked) return;
  for (auto& [device, shared] : js::g_resources) {
    if (shared.resources) js::g_api.AMGX_resources_destroy(shared.resources);
    if (shared.config) js::g_api.AMGX_config_destroy(shared.config);
  }
  js::g_resources.clear();
  js::g_api.AMGX_finalize();
  js::g_library = nullptr;  // not dlclosed: AmgX's static objects outlive this call
}

// How many solvers hold AmgX objects now.
JAXSOLVE_SPARSE_EXPORT int32_t JaxsolveSparseAmgxSolvers() {
  std::lock_guard<std::mutex> lock(js::g_mutex);
  return static_cast<int32_t>(js::g_solvers.size());
}
