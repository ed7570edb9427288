// Forwards to jaxsolve.runtime's LastCudaError() helper for the CUDA handlers
// that still include it under layout's path (dense's tridiagonal handlers):
// they should include "runtime/jaxsolve/runtime/csrc/cuda_error.h", after
// which this file goes (issue 31).
#include "runtime/jaxsolve/runtime/csrc/cuda_error.h"
