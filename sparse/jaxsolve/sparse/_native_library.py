"""The native library of jaxsolve.sparse, and the checks of what crosses into it.

:data:`LIBRARY` is the package's :class:`jaxsolve.runtime.NativeLibrary`: the CPU library
(``libjaxsolve_sparse.so``), loaded at import, and the CUDA library of JAX's CUDA major,
loaded the first time a kernel runs on a GPU.  Its XLA FFI targets (:data:`CSR_MATVEC`,
:data:`CSR_PRODUCT`, :data:`INTERPOLATION_WEIGHTS`) back :mod:`._ffi_primitives`; the C
signatures of its host functions, declared here for ``ctypes``, back the AMG setup's host
kernels: :mod:`._graph_kernels`, :mod:`._pattern_kernels` and :mod:`._classical_kernels`,
which split their work over :func:`host_threads`.

Both check what they pass in alike: a concrete CSR pattern (:func:`check_pattern`), a size
(:func:`check_size`), values of a dtype among :data:`DTYPES` (:func:`check_values`).
"""

from __future__ import annotations

import ctypes
import pathlib
from typing import Any

import numpy as np

from jaxsolve.runtime import NativeLibrary

CSR_MATVEC = "jaxsolve_sparse_csr_matvec"
CSR_PRODUCT = "jaxsolve_sparse_csr_product"
INTERPOLATION_WEIGHTS = "jaxsolve_sparse_interpolation_weights"

LIBRARY = NativeLibrary(
    "jaxsolve.sparse",
    pathlib.Path(__file__).absolute().parent,
    "jaxsolve_sparse",
    {CSR_MATVEC: "JaxsolveSparseCsrMatvec", CSR_PRODUCT: "JaxsolveSparseCsrProduct",
     INTERPOLATION_WEIGHTS: "JaxsolveSparseInterpolationWeights"},
)


def _array(dtype: Any) -> type:
    return np.ctypeslib.ndpointer(dtype=dtype, ndim=1, flags="C_CONTIGUOUS")


INT32_MAX = int(np.iinfo(np.int32).max)
_I32, _I64, _F64 = _array(np.int32), _array(np.int64), _array(np.float64)
_cpu = LIBRARY.cpu
_cpu.JaxsolveSparseAggregatePairs.argtypes = [ctypes.c_int32, _I32, _I32, _F64, _I32]
_cpu.JaxsolveSparseAggregatePairs.restype = ctypes.c_int32
_cpu.JaxsolveSparseCouplingGraph.argtypes = [ctypes.c_int32, _I32, _I32, ctypes.c_void_p,
                                              _I32, _I32, _F64]
_cpu.JaxsolveSparseCouplingGraph.restype = ctypes.c_int64
_cpu.JaxsolveSparseContractGraph.argtypes = [ctypes.c_int32, _I32, _I32, _F64, _I32,
                                             ctypes.c_int32, ctypes.c_int32, _I32, _I32, _F64]
_cpu.JaxsolveSparseContractGraph.restype = ctypes.c_int64
_cpu.JaxsolveSparseColorDsatur.argtypes = [ctypes.c_int32, _I64, _I32, _I64, _I32, _I32]
_cpu.JaxsolveSparseColorDsatur.restype = ctypes.c_int32
_cpu.JaxsolveSparseHostThreads.argtypes = []
_cpu.JaxsolveSparseHostThreads.restype = ctypes.c_int32
_cpu.JaxsolveSparseCsrTranspose.argtypes = [ctypes.c_int32] * 2 + [_I32] * 5
_cpu.JaxsolveSparseCsrTranspose.restype = ctypes.c_int32
_cpu.JaxsolveSparseFindInRows.argtypes = [ctypes.c_int32, _I32, _I32, ctypes.c_void_p, _I32]
_cpu.JaxsolveSparseFindInRows.restype = ctypes.c_int32
_cpu.JaxsolveSparseSpgemmProducts.argtypes = [ctypes.c_int32] + [_I32] * 3
_cpu.JaxsolveSparseSpgemmProducts.restype = ctypes.c_int64
_cpu.JaxsolveSparseSpgemm.argtypes = [ctypes.c_int32] * 2 + [_I32] * 6
_cpu.JaxsolveSparseSpgemm.restype = ctypes.c_int32
_cpu.JaxsolveSparseSpgemmValues.argtypes = ([ctypes.c_int32] * 2 + [_I32] * 4
                                            + [ctypes.c_void_p] * 2 + [ctypes.c_int32]
                                            + [_I32] * 2 + [ctypes.c_void_p])
_cpu.JaxsolveSparseSpgemmValues.restype = ctypes.c_int32
_U8 = _array(np.uint8)
_cpu.JaxsolveSparseClassicalStrength.argtypes = [ctypes.c_int32, _I32, _I32, ctypes.c_void_p,
                                                ctypes.c_int32, ctypes.c_double,
                                                ctypes.c_double, ctypes.c_int32, _U8]
_cpu.JaxsolveSparseClassicalStrength.restype = ctypes.c_int32
_cpu.JaxsolveSparseClassicalSplitting.argtypes = [ctypes.c_int32, _I32, _I32, _U8,
                                                 ctypes.c_int32, ctypes.c_int32, _I32]
_cpu.JaxsolveSparseClassicalSplitting.restype = ctypes.c_int32
_cpu.JaxsolveSparseInterpolationPlan.argtypes = [ctypes.c_int32, _I32, _I32, _U8, _I32,
                                                ctypes.c_int32]
_cpu.JaxsolveSparseInterpolationPlan.restype = ctypes.c_void_p
_cpu.JaxsolveSparseInterpolationSizes.argtypes = [ctypes.c_void_p, _I64]
_cpu.JaxsolveSparseInterpolationSizes.restype = None
_cpu.JaxsolveSparseInterpolationCopy.argtypes = [
    ctypes.c_void_p, ctypes.c_int32, _I32, _I32, ctypes.c_void_p, _I32, ctypes.c_void_p,
    ctypes.c_void_p, _I32, ctypes.c_void_p, ctypes.c_void_p]
_cpu.JaxsolveSparseInterpolationCopy.restype = None
_cpu.JaxsolveSparseInterpolationValues.argtypes = [
    ctypes.c_int32, _I32, _I32, ctypes.c_void_p, ctypes.c_int32, _U8, _I32, ctypes.c_int32,
    ctypes.c_void_p, _I32, ctypes.c_void_p, ctypes.c_void_p, _I32, ctypes.c_void_p,
    ctypes.c_void_p, ctypes.c_void_p]
_cpu.JaxsolveSparseInterpolationValues.restype = ctypes.c_int32
_cpu.JaxsolveSparseTruncation.argtypes = [ctypes.c_int32, _I32, ctypes.c_void_p, ctypes.c_int32,
                                         ctypes.c_double, ctypes.c_int32, _U8]
_cpu.JaxsolveSparseTruncation.restype = ctypes.c_int32
_cpu.JaxsolveSparseKeptPattern.argtypes = [ctypes.c_int32, _I32, _I32, _U8, _I32, _I32, _I32]
_cpu.JaxsolveSparseKeptPattern.restype = None
_cpu.JaxsolveSparseTruncatedValues.argtypes = [ctypes.c_int32, _I32, ctypes.c_void_p,
                                               ctypes.c_int32, _I32, _I32, ctypes.c_void_p]
_cpu.JaxsolveSparseTruncatedValues.restype = ctypes.c_int32
_cpu.JaxsolveSparseMultipassPlan.argtypes = [ctypes.c_int32, _I32, _I32, _U8, _I32]
_cpu.JaxsolveSparseMultipassPlan.restype = ctypes.c_void_p
_cpu.JaxsolveSparseMultipassSizes.argtypes = [ctypes.c_void_p, _I64]
_cpu.JaxsolveSparseMultipassSizes.restype = None
_cpu.JaxsolveSparseMultipassCopy.argtypes = [ctypes.c_void_p] + [_I32] * 6 + [_U8]
_cpu.JaxsolveSparseMultipassCopy.restype = None
_cpu.JaxsolveSparseMultipassValues.argtypes = [
    ctypes.c_int32, _I32, _I32, ctypes.c_void_p, ctypes.c_int32, _U8, _I32, _U8, ctypes.c_int32,
    _I32, _I32, _I32, _I32, ctypes.c_void_p]
_cpu.JaxsolveSparseMultipassValues.restype = ctypes.c_int32

DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
"""The value dtypes the kernels take, in the order of their ``dtype`` codes."""


def host_threads() -> int:
    """The most threads a host setup kernel splits its work over: the CPUs this process may
    run on (its affinity mask), at most its cgroup's CPU quota.

    Found once per process.  In a container the host's CPU count can be many times this.
    """
    return int(_cpu.JaxsolveSparseHostThreads())


# ----------------------------------------------------------------------------------------
# Checks of what crosses into the library


def check_pattern(
    fn: str, names: tuple[str, str], indptr: Any, indices: Any, n_cols: int,
    check: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Checks a concrete CSR pattern with ``n_cols`` columns; returns it as int32 arrays.

    ``indptr`` must run from 0 to ``len(indices)`` without decreasing, and every index must be
    a column, ``0 <= indices[e] < n_cols``. Any integer dtype is accepted.  With ``check``
    False it is only converted: for the patterns the AMG setup made itself (several passes
    over every entry saved per call).
    """
    if not check:
        return np.ascontiguousarray(indptr, np.int32), np.ascontiguousarray(indices, np.int32)
    indptr_name, indices_name = names
    checked = []
    for name, a in ((indptr_name, indptr), (indices_name, indices)):
        a = np.asarray(a)
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            raise TypeError(
                f"{fn}: {name} must be a 1-D integer array, got {name}.shape={a.shape} and "
                f"{name}.dtype={a.dtype}"
            )
        checked.append(a)
    indptr, indices = checked
    nnz = indices.shape[0]
    if indptr.shape[0] == 0 or indptr[0] != 0 or indptr[-1] != nnz:
        raise ValueError(
            f"{fn}: {indptr_name} must run from 0 to len({indices_name}) = {nnz}, got "
            f"{indptr_name}[0]={indptr[:1]} and {indptr_name}[-1]={indptr[-1:]}"
        )
    decreasing = np.diff(indptr) < 0
    if decreasing.any():
        row = int(np.flatnonzero(decreasing)[0])
        raise ValueError(
            f"{fn}: {indptr_name} must not decrease, but {indptr_name}[{row + 1}] < "
            f"{indptr_name}[{row}]"
        )
    if nnz and (indices.min() < 0 or indices.max() >= n_cols):
        raise ValueError(
            f"{fn}: {indices_name} must be columns in [0, {n_cols}), got values from "
            f"{indices.min()} to {indices.max()}"
        )
    if max(nnz, n_cols, indptr.shape[0]) > INT32_MAX:
        raise ValueError(f"{fn}: the pattern is too large for int32 indices")
    return np.ascontiguousarray(indptr, np.int32), np.ascontiguousarray(indices, np.int32)


def check_values(fn: str, name: str, values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` as a contiguous array of one of the native dtypes, of ``shape``."""
    values = np.ascontiguousarray(values)
    if values.dtype not in DTYPES:
        raise TypeError(f"{fn}: {name} must be float32, float64, complex64 or complex128, got"
                        f" {values.dtype}")
    if values.shape != shape:
        raise ValueError(f"{fn}: {name} must have shape {shape}, got {values.shape}")
    return values


def check_size(fn: str, name: str, n: Any) -> int:
    """``n`` as an int, checked to be a size int32 indices can address."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n <= INT32_MAX:
        raise ValueError(f"{fn}: {name} must be an integer in [0, 2**31), got {name}={n!r}")
    return int(n)

