// The dtype codes by which the host kernels' C functions (called through ctypes
// by jaxsolve/sparse/_native_library.py, whose DTYPES lists them in this order) take
// their values: 0 float32, 1 float64, 2 complex64, 3 complex128.
#ifndef JAXSOLVE_SPARSE_CSRC_HOST_DTYPES_H_
#define JAXSOLVE_SPARSE_CSRC_HOST_DTYPES_H_

#include <cstdint>

#include "spmv.h"

namespace jaxsolve::sparse {

// Calls fn(T{}) for the values' dtype code and returns its result; -2 for
// another code.
template <typename Fn>
int32_t WithValueType(int32_t dtype, Fn fn) {
  switch (dtype) {
    case 0: return fn(float{});
    case 1: return fn(double{});
    case 2: return fn(Complex<float>{});
    case 3: return fn(Complex<double>{});
    default: return -2;
  }
}

}  // namespace jaxsolve::sparse

#endif  // JAXSOLVE_SPARSE_CSRC_HOST_DTYPES_H_
