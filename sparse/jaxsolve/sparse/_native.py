"""The native kernels of jaxsolve.sparse: the CSR product on CPU and GPU, and setup kernels.

Functions backed by C++ (``csrc/``) in the package's shared libraries, which
:class:`jaxsolve.runtime.NativeLibrary` loads (the CPU library at import, the CUDA library of
JAX's CUDA major the first time a product runs on a GPU):

* :func:`csr_matvec`: ``y = A x`` for a CSR matrix, an XLA FFI kernel on the CPU and on CUDA
  GPUs that works under ``jit``, ``vmap`` (over right-hand sides: one kernel call with more
  columns; over values: a batch of systems on one pattern) and ``grad``/``jvp``.
* :func:`csr_product_values`: the values of a sparse product ``C = A B`` on the pattern
  :func:`spgemm_symbolic` computes, an XLA FFI kernel on the CPU and on CUDA GPUs (the AMG
  setup's products ``A P`` and ``Pᵀ A P``).
* :func:`interpolation_weights`: classical AMG's interpolation weights on the plan of
  :func:`interpolation_pattern`, an XLA FFI kernel on the CPU and on CUDA GPUs (the
  numeric re-setup's, under ``jit``).
* :func:`aggregate_pairs`: greedy pairwise matching of a weighted graph, the aggregation step
  of an AMG setup, on NumPy arrays.
* :func:`coupling_graph` and :func:`contract_graph`: the weighted graphs aggregation matches
  on, on NumPy arrays; :func:`dsatur_coloring`, the greedy coloring of a product graph.
* :func:`classical_strength`, :func:`classical_splitting`, :func:`interpolation_pattern`,
  :func:`multipass_pattern`, :func:`interpolation_values`, :func:`truncation` and
  :func:`truncated_values`: classical AMG's strong couplings, C/F splitting, the index
  plans of its interpolations and their weights for concrete values.
* :func:`spgemm_symbolic`: the pattern of a sparse product ``C = A B``, on which the numeric
  product (``A P``, ``Pᵀ A P`` in an AMG setup) runs; :func:`spgemm_host`, the pattern
  and the values for concrete values (the classical setup's next level).
* :func:`csr_transpose` and :func:`find_in_rows`: a pattern's transpose (``R = Pᵀ``), and
  where given columns (the diagonal) sit in its rows.

The setup kernels run on the host, through ``ctypes``, in time linear in their input: a few
hundred milliseconds for two million rows, split over the cores this process may use
(:func:`host_threads`).
"""

from __future__ import annotations

import ctypes
import functools
import pathlib
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from jaxsolve.runtime import NativeLibrary

CSR_MATVEC = "jaxsolve_sparse_csr_matvec"
CSR_PRODUCT = "jaxsolve_sparse_csr_product"
INTERPOLATION_WEIGHTS = "jaxsolve_sparse_interpolation_weights"

_LIBRARY = NativeLibrary(
    "jaxsolve.sparse",
    pathlib.Path(__file__).absolute().parent,
    "jaxsolve_sparse",
    {CSR_MATVEC: "JaxsolveSparseCsrMatvec", CSR_PRODUCT: "JaxsolveSparseCsrProduct",
     INTERPOLATION_WEIGHTS: "JaxsolveSparseInterpolationWeights"},
)


def _array(dtype: Any) -> type:
    return np.ctypeslib.ndpointer(dtype=dtype, ndim=1, flags="C_CONTIGUOUS")


_INT32_MAX = int(np.iinfo(np.int32).max)
_I32, _I64, _F64 = _array(np.int32), _array(np.int64), _array(np.float64)
_cpu = _LIBRARY.cpu
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
_cpu.JaxsolveSparseInterpolationCopy.argtypes = [ctypes.c_void_p] + [_I32] * 7
_cpu.JaxsolveSparseInterpolationCopy.restype = None
_cpu.JaxsolveSparseInterpolationValues.argtypes = [
    ctypes.c_int32, _I32, _I32, ctypes.c_void_p, ctypes.c_int32, _U8, _I32, _I32,
    ctypes.c_int64, _I32, _I32, _I32, _I32, ctypes.c_void_p]
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

_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


# ----------------------------------------------------------------------------------------
# Checks of CSR patterns


def _check_pattern(
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
    if max(nnz, n_cols, indptr.shape[0]) > _INT32_MAX:
        raise ValueError(f"{fn}: the pattern is too large for int32 indices")
    return np.ascontiguousarray(indptr, np.int32), np.ascontiguousarray(indices, np.int32)


def _check_size(fn: str, name: str, n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 0 <= n <= _INT32_MAX:
        raise ValueError(f"{fn}: {name} must be an integer in [0, 2**31), got {name}={n!r}")
    return int(n)


# ----------------------------------------------------------------------------------------
# csr_matvec
#
# Below the public function, operands have canonical shapes: values (Bv, nnz), x (Bx, n, k)
# and y (B, m, k), where each of Bv, Bx is 1 or B (the kernel's contract, csrc/spmv.h).


def _row_ids(indptr: Any, nnz: int) -> Any:
    """The row of each stored entry: ``rows[e] = i`` for ``indptr[i] <= e < indptr[i+1]``."""
    if isinstance(indptr, np.ndarray):
        return np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int32), np.diff(indptr))
    return jnp.searchsorted(indptr[1:], jnp.arange(nnz, dtype=indptr.dtype), side="right")


def _reference_product(values: Any, indices: Any, indptr: Any, x: jax.Array) -> jax.Array:
    """``y = A x`` in plain JAX: a gather of ``x`` and a sorted segment sum over rows.

    Linear in ``values`` and in ``x``, and made of operations JAX transposes, so it is what
    the derivatives of the native product are made of.
    """
    n_rows = indptr.shape[0] - 1
    terms = values[:, :, None] * x[:, indices, :]  # (B, nnz, k)
    y = jax.ops.segment_sum(
        jnp.moveaxis(terms, 1, 0), _row_ids(indptr, indices.shape[0]),
        num_segments=n_rows, indices_are_sorted=True,
    )
    return jnp.moveaxis(y, 0, 1)


def _ffi_product(values: jax.Array, indices: Any, indptr: Any, x: jax.Array, rhs: jax.Array,
                 weight: jax.Array, base: jax.Array, *, subtract: bool) -> jax.Array:
    """The raw FFI call, unchecked. Batching is its vmap rule's, never the FFI's."""
    batch = max(values.shape[0], x.shape[0])
    y_type = jax.ShapeDtypeStruct((batch, indptr.shape[0] - 1, x.shape[2]), x.dtype)
    return jax.ffi.ffi_call(CSR_MATVEC, y_type, vmap_method="sequential")(
        values, indices, indptr, x, rhs, weight, base, subtract=subtract
    )


@functools.cache
def _native_update(subtract: bool) -> Callable[..., jax.Array]:
    """The FFI call, whose vmap rule folds vmap's axis into the kernel's systems.

    Operands (systems first; see ``csrc/spmv_ffi.h``): ``values`` (S or 1, nnz), ``x``
    (S or 1, n_cols, k); the update's ``rhs`` and ``base`` (S, n_rows, k) and ``weight``
    (S or 1, n_rows) like ``values``, each possibly empty (none).
    """

    @jax.custom_batching.custom_vmap
    def update(values, indices, indptr, x, rhs, weight, base):
        return _ffi_product(values, indices, indptr, x, rhs, weight, base, subtract=subtract)

    @update.def_vmap
    def update_vmap(axis_size: int, in_batched: list[bool], values, indices, indptr, x, rhs,
                    weight, base) -> tuple[jax.Array, bool]:
        """Folds the vmapped axis into the kernel's batch of systems: still one kernel call.

        Batched ``x`` alone (right-hand sides) stays a single pass over the matrix, its
        systems being more columns; batched values (or a batched ``weight``, which goes
        with them) make a system each. An operand that varies along only one of the two
        batch axes (the new one and the canonical one) is broadcast to both. A batch of
        patterns is a loop of products, since one call has one pattern.
        """
        operands = [values, indices, indptr, x, rhs, weight, base]
        if in_batched[1] or in_batched[2]:
            return _loop_over_systems(update, axis_size, in_batched, operands), True
        values_batched, _, _, x_batched, rhs_batched, weight_batched, base_batched = in_batched
        if weight_batched and not values_batched:  # a system's weight goes with its values
            values, values_batched = jnp.broadcast_to(values, (axis_size, *values.shape)), True
        if (rhs_batched or base_batched) and not (values_batched or x_batched):
            x, x_batched = jnp.broadcast_to(x, (axis_size, *x.shape)), True
        batch = _systems(values, values_batched, x, x_batched)
        values = _fold_systems(values, values_batched, axis_size, batch)
        x = _fold_systems(x, x_batched, axis_size, batch)
        systems = max(values.shape[0], x.shape[0])

        def fold_to(a, batched, leading):  # an update operand, to `leading` systems
            if a.size == 0:
                return a
            a = _fold_systems(a, batched, axis_size, batch)
            return a if a.shape[0] == leading else jnp.broadcast_to(a, (leading, *a.shape[1:]))

        y = update(values, indices, indptr, x, fold_to(rhs, rhs_batched, systems),
                   fold_to(weight, weight_batched, values.shape[0]),
                   fold_to(base, base_batched, systems))
        return y.reshape(axis_size, batch, *y.shape[1:]), True

    return update


def _loop_over_systems(call: Callable[..., jax.Array], axis_size: int,
                       in_batched: Sequence[bool], operands: Sequence[Any]) -> jax.Array:
    """``call`` on each of vmap's ``axis_size`` systems in turn: one call has one pattern."""

    def one_system(i):
        return call(*(a[i] if batched else a for a, batched in zip(operands, in_batched)))

    return jax.lax.map(one_system, jnp.arange(axis_size))


def _systems(*operands_and_batched: Any) -> int:
    """The size of the canonical axis of systems of ``(operand, batched)`` pairs under vmap.

    The operands of the native kernels carry a leading axis of systems (1 when shared by
    every system); vmap adds another before it where ``batched``.
    """
    pairs = zip(operands_and_batched[::2], operands_and_batched[1::2], strict=True)
    return max(a.shape[1] if batched else a.shape[0] for a, batched in pairs)


def _fold_systems(a: jax.Array, batched: bool, axis_size: int, batch: int) -> jax.Array:
    """Folds vmap's axis (of ``axis_size``) into ``a``'s axis of ``batch`` systems.

    The kernels take one axis of systems, each operand's of size 1 (shared by every system)
    or the common one: an operand shared by every system stays so; one that varies along
    only one of the two axes is broadcast to both.
    """
    inner, rest = (a.shape[1], a.shape[2:]) if batched else (a.shape[0], a.shape[1:])
    if not batched and inner == 1:  # shared by every system
        return a
    if not (batched and inner == batch):
        a = jnp.broadcast_to(a if batched else a[None], (axis_size, batch, *rest))
    return a.reshape(axis_size * batch, *rest)


@functools.cache
def _update(subtract: bool) -> Callable[..., jax.Array]:
    """The native product and update, differentiable in every operand but the pattern."""

    @jax.custom_jvp
    def update(values, indices, indptr, x, rhs, weight, base):
        return _native_update(subtract)(values, indices, indptr, x, rhs, weight, base)

    @functools.partial(update.defjvp, symbolic_zeros=True)
    def update_jvp(primals, tangents):
        values, indices, indptr, x, rhs, weight, base = primals
        d_values, _, _, d_x, d_rhs, d_weight, d_base = tangents
        y = update(*primals)

        def given(tangent):
            return not isinstance(tangent, SymbolicZero)

        d_y = jnp.zeros_like(y)  # y = base + weight (rhs ∓ A x)
        if given(d_values):
            d_y += _reference_product(d_values, indices, indptr, x)
        if given(d_x):
            d_y += _reference_product(values, indices, indptr, d_x)
        if subtract:
            d_y = -d_y
        if given(d_rhs):
            d_y += d_rhs
        if weight.size:
            d_y = weight[:, :, None] * d_y
        if given(d_weight):
            empty = jnp.zeros((0,), y.dtype)
            inner = _update(subtract)(values, indices, indptr, x, rhs, empty, empty)
            d_y += d_weight[:, :, None] * inner
        if given(d_base):
            d_y += d_base
        return y, d_y

    return update


def _product(values: jax.Array, indices: Any, indptr: Any, x: jax.Array) -> jax.Array:
    """The native product ``A x`` (systems first), differentiable in ``values`` and ``x``."""
    empty = jnp.zeros((0,), values.dtype)
    return _update(False)(values, indices, indptr, x, empty, empty, empty)


def csr_pattern_operands(fn: str, indices: Any, indptr: Any, n_rows: int, n_cols: int,
                      nnz: int) -> tuple[Any, Any]:
    """Checks ``indices`` and ``indptr`` for :func:`csr_matvec`; returns them as operands.

    NumPy patterns (any integer dtype) are checked entry by entry and become int32 constants;
    JAX arrays, possibly traced, must be int32 and are checked by shape only.
    """
    if not isinstance(indices, jax.Array) and not isinstance(indptr, jax.Array):
        indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n_cols)
    for name, a, length in (("indices", indices, nnz), ("indptr", indptr, n_rows + 1)):
        if isinstance(a, jax.Array) and a.dtype != np.int32:
            raise TypeError(f"{fn}: {name} must be int32, got {name}.dtype={a.dtype}")
        if np.shape(a) != (length,):
            what = "values.shape[0]" if name == "indices" else "n_rows + 1"
            raise ValueError(
                f"{fn}: {name} must have shape ({what},) = ({length},), got "
                f"{name}.shape={np.shape(a)}"
            )
    return indices, indptr


def csr_matvec(
    values: jax.Array,
    indices: np.ndarray | jax.Array,
    indptr: np.ndarray | jax.Array,
    x: jax.Array,
    *,
    n_rows: int,
) -> jax.Array:
    r"""The product ``y = A x`` of a CSR matrix and a vector or a block of vectors, natively.

    Equivalent to ``scipy.sparse.csr_matrix((values, indices, indptr), shape=(n_rows,
    n_cols)) @ x`` with ``n_cols = x.shape[0]``:

    .. math:: y_{ij} = \sum_{e = \mathrm{indptr}_i}^{\mathrm{indptr}_{i+1} - 1}
              \mathrm{values}_e \, x_{\mathrm{indices}_e, j}

    One XLA FFI kernel computes it, on the CPU (a loop over rows, split over the cores) or
    on a CUDA GPU (each warp streams the entries of a chunk of rows through shared memory;
    3.1 TB/s on the H200 for a 7-point Laplacian in f64). It works under
    ``jax.jit``, and under ``jax.vmap``: over ``x`` the extra vectors become extra columns of
    the same single kernel call, which reads the matrix once for all of them; over ``values``
    it is a batch of matrices on one pattern, again one call.

    Derivatives with respect to ``values`` and ``x``, forward and reverse, come from the
    product's linearity: the tangent ``dA x + A dx`` is formed in plain JAX (a gather and a
    sorted ``jax.ops.segment_sum``), which JAX transposes into the cotangents ``ȳ[row] ·
    x[indices]`` on the pattern and ``Aᴴ``-like scatters for ``x``.

    Args:
      values: ``(nnz,)`` stored values, float32, float64, complex64 or complex128.
      indices: ``(nnz,)`` column of each value. A NumPy array (checked, then a constant of
        the computation) or an int32 JAX array (trusted: it must be valid).
      indptr: ``(n_rows + 1,)`` row pointers, row ``i`` being ``values[indptr[i]:indptr[i+1]]``;
        NumPy or int32 JAX, like ``indices``.
      x: ``(n_cols,)`` vector or ``(n_cols, k)`` block of ``k`` vectors, of ``values``' dtype.
      n_rows: rows of ``A``.

    Returns:
      ``(n_rows,)`` or ``(n_rows, k)``, like ``x``, of ``values``' dtype.

    Raises:
      TypeError: for a dtype that is not supported or does not match.
      ValueError: for shapes that do not fit together, or an invalid NumPy pattern.
      RuntimeError: on a GPU, when the CUDA library is unavailable.

    Examples:
      >>> import numpy as np, jax, jax.numpy as jnp
      >>> indptr, indices = np.array([0, 2, 3]), np.array([0, 1, 1])  # [[2, 1], [0, 3]]
      >>> values = jnp.array([2.0, 1.0, 3.0])
      >>> csr_matvec(values, indices, indptr, jnp.array([1.0, 2.0]), n_rows=2)
      Array([4., 6.], dtype=float32)

      Two right-hand sides at once, by vmap, and the gradient with respect to the values:

      >>> xs = jnp.array([[1.0, 2.0], [1.0, 0.0]])
      >>> jax.vmap(lambda x: csr_matvec(values, indices, indptr, x, n_rows=2))(xs)
      Array([[4., 6.],
             [2., 0.]], dtype=float32)
      >>> jax.grad(lambda v: csr_matvec(v, indices, indptr, xs[0], n_rows=2).sum())(values)
      Array([1., 2., 2.], dtype=float32)
    """
    fn = "csr_matvec"
    values, x = jnp.asarray(values), jnp.asarray(x)
    if values.dtype not in _DTYPES:
        raise TypeError(
            f"{fn}: values must be float32, float64, complex64 or complex128, got "
            f"values.dtype={values.dtype}"
        )
    if x.dtype != values.dtype:
        raise TypeError(
            f"{fn}: x must have the dtype of values, got x.dtype={x.dtype} and "
            f"values.dtype={values.dtype}; cast one of them"
        )
    if values.ndim != 1 or x.ndim not in (1, 2):
        raise ValueError(
            f"{fn}: values must be (nnz,) and x (n_cols,) or (n_cols, k), got "
            f"values.shape={values.shape} and x.shape={x.shape}"
        )
    n_rows = _check_size(fn, "n_rows", n_rows)
    indices, indptr = csr_pattern_operands(fn, indices, indptr, n_rows, x.shape[0],
                                           values.shape[0])
    return csr_matvec_unchecked(values, indices, indptr, x)


def csr_matvec_unchecked(values: jax.Array, indices: Any, indptr: Any, x: jax.Array
                         ) -> jax.Array:
    """:func:`csr_matvec` on operands already checked (dtypes, shapes, and the pattern by
    :func:`csr_pattern_operands`, which a ``CsrMatrix`` does once per pattern rather than
    at every product); only the platform is checked here."""
    return csr_update_unchecked(values, indices, indptr, x)


def csr_update_unchecked(values: jax.Array, indices: Any, indptr: Any, x: jax.Array, *,
                         rhs: jax.Array | None = None, weight: jax.Array | None = None,
                         base: jax.Array | None = None, subtract: bool = False) -> jax.Array:
    """``base + weight * (rhs − A x)`` (``+ A x`` without ``subtract``), formed by the
    product's kernel as it writes each entry of ``A x``: one pass where XLA would write
    ``A x`` and read it back.

    ``rhs`` and ``base`` are shaped like ``A x``, ``(n_rows,)`` or ``(n_rows, k)``, and
    ``weight`` ``(n_rows,)`` scales rows; a missing one reads as zero (``rhs``, ``base``)
    or one (``weight``). They cover the cycle's updates: a residual ``b − A x``, a Jacobi
    sweep ``x + w (b − A x)``, a prolongation ``x + P e``. Operands are those of
    :func:`csr_matvec_unchecked`, the update's of ``values``' dtype. Differentiable in
    all but the pattern; vmap over any operand is one kernel call, as the product's.
    """
    _LIBRARY.require_platform("csr_matvec", values, x, indices, indptr)
    vector = x.ndim == 1

    def systems(a: jax.Array | None, column_axis: bool = True) -> jax.Array:
        if a is None:
            return jnp.zeros((0,), values.dtype)
        return (a[:, None] if vector and column_axis else a)[None]

    y = _update(subtract)(values[None], indices, indptr, systems(x), systems(rhs),
                          systems(weight, column_axis=False), systems(base))[0]
    return y[:, 0] if vector else y


# ----------------------------------------------------------------------------------------
# csr_product_values


def csr_product_values(a: Any, b: Any, c_indices: jax.Array, c_indptr: jax.Array, *,
                       n_cols: int) -> jax.Array:
    """The ``(nnz(C),)`` values of ``C = A B`` (``n_cols`` columns) on ``C``'s pattern.


    ``a`` and ``b`` are CSR matrices (anything with ``values``, int32 ``indices`` and
    ``indptr``); ``C``'s columns must be sorted within each row and hold every column a
    product reaches (:func:`spgemm_symbolic`'s pattern). Each scalar product ``A[i, j]
    B[j, l]`` (in the order of ``A``'s row ``i``, then of ``B``'s row ``j``) is added to
    ``C[i, l]``: the sum runs in one fixed order, on any number of threads. A kernel on the
    CPU (which finds ``l``'s place in a table of ``n_cols`` entries a thread, checks the
    patterns and rejects a product outside ``C``'s) and on CUDA GPUs (a group of a warp's
    threads per row, which searches the row and trusts the patterns: a row with a product
    outside the pattern becomes NaN; ``B``'s rows must not repeat a column). Unchecked here,
    not differentiable (:mod:`._products` wraps it); under ``vmap`` over values, still one
    kernel call for the batch of systems (over patterns, a loop of calls).

    Raises:
      RuntimeError: on a GPU, when the CUDA library is unavailable.
    """
    operands = (a.values, a.indices, a.indptr, b.values, b.indices, b.indptr, c_indices,
                c_indptr)
    _LIBRARY.require_platform("csr_product_values", *operands)
    return _product_values_kernel(int(n_cols))(
        a.values[None], a.indices, a.indptr, b.values[None], b.indices, b.indptr, c_indices,
        c_indptr)[0]


@functools.cache
def _product_values_kernel(n_cols: int) -> Callable[..., jax.Array]:
    """The raw FFI call for products of ``n_cols`` columns, unchecked.

    Values have a leading axis of systems (1 or the batch's size); batching is its vmap
    rule's, which folds vmap's axis into that one, never the FFI's.
    """

    @jax.custom_batching.custom_vmap
    def call(a_values, a_indices, a_indptr, b_values, b_indices, b_indptr, c_indices,
             c_indptr):
        systems = max(a_values.shape[0], b_values.shape[0])
        c_type = jax.ShapeDtypeStruct((systems, c_indices.shape[0]), a_values.dtype)
        return jax.ffi.ffi_call(CSR_PRODUCT, c_type, vmap_method="sequential")(
            a_values, a_indices, a_indptr, b_values, b_indices, b_indptr, c_indices, c_indptr,
            n_cols=np.int64(n_cols))

    @call.def_vmap
    def call_vmap(axis_size, in_batched, *operands):
        a_values, b_values = operands[0], operands[3]
        a_batched, b_batched = in_batched[0], in_batched[3]
        if any(in_batched[i] for i in (1, 2, 4, 5, 6, 7)):
            return _loop_over_systems(call, axis_size, in_batched, operands), True
        batch = _systems(a_values, a_batched, b_values, b_batched)
        c_values = call(_fold_systems(a_values, a_batched, axis_size, batch), *operands[1:3],
                        _fold_systems(b_values, b_batched, axis_size, batch), *operands[4:])
        return c_values.reshape(axis_size, batch, -1), True

    return call


def interpolation_weights(values: jax.Array, diagonal: jax.Array, indices: jax.Array,
                          indptr: jax.Array, coarse: jax.Array, full_indptr: jax.Array,
                          a_destination: jax.Array, pair_positions: jax.Array,
                          pair_triples: jax.Array, triple_entries: jax.Array,
                          triple_destinations: jax.Array, keep: jax.Array | None,
                          p_indptr: jax.Array, *, full_nnz: int) -> jax.Array:
    """Classical AMG's D1/D2 interpolation weights, ``P``'s values, on an interpolation plan.

    The weights of :class:`InterpolationPattern`'s formula for ``A``'s ``values`` (with
    their ``diagonal``) on its pattern ``indices``/``indptr``, the plan's arrays on the
    device (``pair_triples`` as :func:`interpolation_pattern` makes them), ``full_nnz`` of
    them; then, with ``keep`` (positions among those weights, ``p_indptr`` the kept
    pattern's row pointers), the kept ones, each row rescaled to its former sum. Computed as
    :func:`interpolation_values` computes them on the host, a row at a time, each sum in
    double in one fixed order: a kernel on the CPU (which checks the plan and rejects one
    that sends a value outside its row) and on CUDA GPUs (a thread per row, which trusts
    the plan; such a row becomes NaN). Unchecked here, not differentiable (:mod:`._classical`
    wraps it); under ``vmap`` over values and diagonal, one kernel call for the batch (over
    plans, a loop of calls).

    Raises:
      RuntimeError: on a GPU, when the CUDA library is unavailable.
    """
    plan = (indices, indptr, coarse, full_indptr, a_destination, pair_positions,
            pair_triples, triple_entries, triple_destinations,
            jnp.zeros(0, jnp.int32) if keep is None else keep, p_indptr)
    _LIBRARY.require_platform("interpolation_weights", values, diagonal, *plan)
    p_nnz = full_nnz if keep is None else keep.shape[0]
    call = _interpolation_weights_kernel(int(full_nnz), int(p_nnz), keep is not None)
    return call(values[None], diagonal[None], *plan)[0]


@functools.cache
def _interpolation_weights_kernel(full_nnz: int, p_nnz: int,
                                  truncated: bool) -> Callable[..., jax.Array]:
    """The raw FFI call of the weights, unchecked; values and diagonal have a leading axis
    of systems, into which its vmap rule folds vmap's axis."""

    @jax.custom_batching.custom_vmap
    def call(values, diagonal, *plan):
        systems = values.shape[0]
        sum_bytes = 16 if jnp.iscomplexobj(values) else 8  # a double or two a weight
        p_type = jax.ShapeDtypeStruct((systems, p_nnz), values.dtype)
        scratch = jax.ShapeDtypeStruct((systems, full_nnz * sum_bytes), jnp.uint8)
        p_values, _ = jax.ffi.ffi_call(INTERPOLATION_WEIGHTS, (p_type, scratch),
                                       vmap_method="sequential")(
            values, diagonal, *plan, truncated=np.int64(truncated))
        return p_values

    @call.def_vmap
    def call_vmap(axis_size, in_batched, values, diagonal, *plan):
        if any(in_batched[2:]):
            return _loop_over_systems(call, axis_size, in_batched,
                                      (values, diagonal, *plan)), True
        batch = _systems(values, in_batched[0], diagonal, in_batched[1])
        p_values = call(_fold_systems(values, in_batched[0], axis_size, batch),
                        _fold_systems(diagonal, in_batched[1], axis_size, batch), *plan)
        return p_values.reshape(axis_size, batch, -1), True

    return call


# ----------------------------------------------------------------------------------------
# Setup kernels on the host


def aggregate_pairs(indptr: Any, indices: Any, weights: Any, *,
                    check: bool = True) -> tuple[np.ndarray, int]:
    """Greedy pairwise matching of a weighted graph into aggregates of (mostly) two nodes.

    The aggregation step of AmgX-style unsmoothed-aggregation AMG (its ``SIZE_2`` selector):
    each aggregate becomes one unknown of the next coarser level. The graph is an ``n × n``
    CSR matrix of edge weights, typically a strength of connection: ``weights[e]`` is the
    weight ``w_ij`` of node ``i``'s edge to ``j = indices[e]``, for ``indptr[i] <= e <
    indptr[i+1]``. The diagonal and weights that are not positive are ignored, and the graph
    may be unsymmetric: row ``i`` gives the weights as node ``i`` sees them.

    * Phase one visits ``i = 0, ..., n-1`` in order. An unmatched ``i`` is paired with its
      unmatched neighbour ``j`` of largest weight ``w_ij`` (ties: the smallest ``j``); the
      pair is a new aggregate. A node with no unmatched neighbour waits for phase two (in an
      unsymmetric graph a later node may still pair with it).
    * Phase two: each node still unmatched joins the aggregate of its neighbour of largest
      weight, matched by now, or becomes an aggregate of its own if it has no neighbour.

    Aggregates are numbered in the order they are created, so the result is deterministic.
    The work is ``O(n + nnz)``, in native code: tens of milliseconds for two million nodes.

    Args:
      indptr: ``(n + 1,)`` integer row pointers, from 0 to ``nnz``, non-decreasing.
      indices: ``(nnz,)`` integer neighbours, in ``[0, n)``; within a row in any order.
      weights: ``(nnz,)`` real weights (compared as float64).
      check: whether to check the pattern (False: the AMG setup's own graphs).

    Returns:
      ``(aggregate, n_aggregates)``: the ``(n,)`` int32 aggregate of every node, numbered
      ``0 .. n_aggregates - 1``, and their number.

    Raises:
      TypeError, ValueError: for arrays that are not such a graph.

    Examples:
      A path 0 - 1 - 2 - 3 - 4, heaviest at its ends: 0 pairs with 1, 2 with 3, and 4, whose
      only neighbour is taken, joins 3's aggregate.

      >>> import numpy as np, scipy.sparse
      >>> w = np.array([3.0, 1.0, 1.0, 2.0])
      >>> graph = scipy.sparse.diags([w, w], [-1, 1], format="csr")
      >>> aggregate_pairs(graph.indptr, graph.indices, graph.data)
      (array([0, 0, 1, 1, 1], dtype=int32), 2)
    """
    fn = "aggregate_pairs"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    weights = _checked_weights(fn, "weights", weights, indices.shape)
    aggregate = np.empty(n, np.int32)
    count = _cpu.JaxsolveSparseAggregatePairs(n, indptr, indices, weights, aggregate)
    return aggregate, int(count)


class WeightedGraph(NamedTuple):
    """An ``n × n`` weighted graph in CSR: row ``i`` holds node ``i``'s edges, sorted."""

    indptr: np.ndarray
    """``(n + 1,)`` int32 row pointers."""
    indices: np.ndarray
    """``(nnz,)`` int32 neighbours, sorted and distinct within each row."""
    weights: np.ndarray
    """``(nnz,)`` float64 edge weights."""


def coupling_graph(indptr: Any, indices: Any, magnitudes: Any | None, *,
                   check: bool = True) -> WeightedGraph:
    """The symmetric coupling graph of an ``n × n`` matrix, without its diagonal.

    The weight of the edge between ``i`` and ``j`` is ``(|a_ij| + |a_ji|) / (2 √(|a_ii|
    |a_jj|))`` (0 where the diagonal vanishes), or, without ``magnitudes``, ½ for each
    direction in which the pair is stored. Native code, ``O(n + nnz)`` plus a sort per row.

    Args:
      indptr, indices: the matrix's CSR pattern (any integer dtype; a row's columns in any
        order, each once).
      magnitudes: ``(nnz,)`` its values (their absolute values count), or None.
      check: whether to check the pattern (False: one the AMG setup made or checked).

    Examples:
      >>> import numpy as np
      >>> graph = coupling_graph([0, 2, 3], [0, 1, 1], np.array([4.0, -2.0, 1.0]))
      >>> graph.indptr.tolist(), graph.indices.tolist(), graph.weights.tolist()
      ([0, 1, 2], [1, 0], [0.5, 0.5])
    """
    fn = "coupling_graph"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    if magnitudes is not None:
        magnitudes = _checked_weights(fn, "magnitudes", magnitudes, indices.shape)
    out_indptr = np.empty(n + 1, np.int32)
    out_indices = np.empty(2 * indices.shape[0], np.int32)
    out_weights = np.empty(2 * indices.shape[0], np.float64)
    nnz = _cpu.JaxsolveSparseCouplingGraph(
        n, indptr, indices, None if magnitudes is None else magnitudes.ctypes.data,
        out_indptr, out_indices, out_weights)
    return WeightedGraph(out_indptr, out_indices[:nnz], out_weights[:nnz])


def contract_graph(graph: WeightedGraph, groups: Any, n_groups: int, *,
                   keep_diagonal: bool, check: bool = True) -> WeightedGraph:
    """The graph of groups of nodes: ``Gᵀ W G`` for the membership matrix ``G``.

    The weight between two groups is the sum of the weights between their members; a
    group's internal weight is its diagonal entry, kept or dropped. Native code,
    ``O(n + nnz)`` plus a sort per row.

    Args:
      graph: an ``n × n`` weighted graph (a row's columns in any order, each once).
      groups: ``(n,)`` each node's group, in ``[0, n_groups)``.
      n_groups: the number of groups.
      keep_diagonal: whether to keep each group's internal weight.
      check: whether to check the graph and the groups (False: the AMG setup's own).

    Examples:
      >>> import numpy as np
      >>> path = WeightedGraph(np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]), np.ones(4))
      >>> contract_graph(path, [0, 0, 1], 2, keep_diagonal=True).weights.tolist()
      [2.0, 1.0, 1.0]
    """
    fn = "contract_graph"
    n = np.shape(graph.indptr)[0] - 1 if np.ndim(graph.indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), graph.indptr, graph.indices, n,
                                     check)
    weights = _checked_weights(fn, "weights", graph.weights, indices.shape)
    n_groups = _check_size(fn, "n_groups", n_groups)
    groups = np.asarray(groups)
    if groups.shape != (n,) or not np.issubdtype(groups.dtype, np.integer):
        raise TypeError(f"{fn}: groups must be ({n},) integers, got groups.shape="
                        f"{groups.shape} and groups.dtype={groups.dtype}")
    if check and n and (groups.min() < 0 or groups.max() >= n_groups):
        raise ValueError(f"{fn}: groups must lie in [0, {n_groups}), got values from "
                         f"{groups.min()} to {groups.max()}")
    out_indptr = np.empty(n_groups + 1, np.int32)
    out_indices = np.empty(indices.shape[0], np.int32)
    out_weights = np.empty(indices.shape[0], np.float64)
    nnz = _cpu.JaxsolveSparseContractGraph(
        n, indptr, indices, weights, np.ascontiguousarray(groups, np.int32), n_groups,
        int(keep_diagonal), out_indptr, out_indices, out_weights)
    if nnz < 0:
        raise MemoryError(f"{fn}: out of memory for the groups' rows")
    return WeightedGraph(out_indptr, out_indices[:nnz], out_weights[:nnz])


def _checked_weights(fn: str, name: str, weights: Any, shape: tuple[int, ...]) -> np.ndarray:
    weights = np.asarray(weights)
    if weights.shape != shape or not np.isrealobj(weights):
        raise TypeError(
            f"{fn}: {name} must be real, one per entry, shape {shape}; got "
            f"{name}.shape={weights.shape} and {name}.dtype={weights.dtype}"
        )
    return np.ascontiguousarray(weights, np.float64)


def dsatur_coloring(first_indptr: Any, first_indices: Any, second_indptr: Any,
                    second_indices: Any) -> np.ndarray:
    """DSATUR coloring of the graph of ``F S``: nodes ``v`` and ``w`` adjacent when some
    ``r`` has ``F[v, r]`` and ``S[r, w]`` (the product is never formed).

    ``F = Pᵀ``, ``S = P`` gives the column-intersection graph of ``P``; ``F = I``,
    ``S = P + Pᵀ`` the graph of a square ``P``. Unchecked patterns (``color_columns`` makes
    them); see ``csrc/coloring.cc``.

    Returns:
      ``(n,)`` int32 colors ``0 .. k - 1``, every one used.
    """
    n = np.shape(first_indptr)[0] - 1
    colors = np.empty(n, np.int32)
    count = _cpu.JaxsolveSparseColorDsatur(
        n, np.ascontiguousarray(first_indptr, np.int64),
        np.ascontiguousarray(first_indices, np.int32),
        np.ascontiguousarray(second_indptr, np.int64),
        np.ascontiguousarray(second_indices, np.int32), colors)
    if count < 0:
        raise MemoryError("color_columns: not enough memory for the coloring.")
    return colors


def host_threads() -> int:
    """The most threads a host setup kernel splits its work over: the CPUs this process may
    run on (its affinity mask), at most its cgroup's CPU quota.

    Found once per process.  In a container the host's CPU count can be many times this.
    """
    return int(_cpu.JaxsolveSparseHostThreads())


def csr_transpose(indptr: np.ndarray, indices: np.ndarray,
                  n_cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pattern of the transpose of an ``n × n_cols`` CSR pattern, and where each of its
    entries comes from: ``(indptr, indices, from)`` with ``from[k]`` the position in
    ``indices`` of the transpose's entry ``k``.

    Rows stay ascending within each column: entry for entry SciPy's CSR → CSC conversion,
    a counting sort by column, here native and over the cores.  Unchecked: for the int32
    patterns the AMG setup made or checked (a :class:`~._csr_arrays.CsrStructure`'s); see
    ``csrc/csr_transpose.cc``.
    """
    indptr = np.ascontiguousarray(indptr, np.int32)
    indices = np.ascontiguousarray(indices, np.int32)
    t_indptr = np.empty(n_cols + 1, np.int32)
    t_indices = np.empty(indices.shape[0], np.int32)
    source = np.empty(indices.shape[0], np.int32)
    if _cpu.JaxsolveSparseCsrTranspose(indptr.shape[0] - 1, n_cols, indptr, indices,
                                       t_indptr, t_indices, source):
        raise MemoryError("csr_transpose: out of memory for the column counts")
    return t_indptr, t_indices, source


def find_in_rows(indptr: np.ndarray, indices: np.ndarray, columns: np.ndarray | None,
                 n_rows: int) -> np.ndarray:
    """For each row ``i < n_rows``, the position of its (last) entry in column
    ``columns[i]`` — without ``columns``, ``i``: the diagonal — or -1 where it has none.

    One native scan of each row, over the cores. Unchecked: for the int32 patterns the AMG
    setup made or checked (a :class:`~._csr_arrays.CsrStructure`'s); see
    ``csrc/row_search.cc``.

    Returns:
      ``(n_rows,)`` int32 positions into ``indices``.
    """
    positions = np.empty(n_rows, np.int32)
    if columns is not None:
        columns = np.ascontiguousarray(columns, np.int32)
        assert columns.shape == (n_rows,), (columns.shape, n_rows)
    if _cpu.JaxsolveSparseFindInRows(n_rows, np.ascontiguousarray(indptr, np.int32),
                                     np.ascontiguousarray(indices, np.int32),
                                     None if columns is None else columns.ctypes.data,
                                     positions):
        raise MemoryError("find_in_rows: no thread could be started")
    return positions


class SpgemmPattern(NamedTuple):
    """The symbolic product ``C = A B``: ``C``'s CSR pattern and its scalar products' count."""

    indptr: np.ndarray
    """``(m + 1,)`` int32 row pointers of ``C``."""
    indices: np.ndarray
    """``(nnz(C),)`` int32 columns of ``C``, sorted within each row."""
    n_products: int
    """The number of scalar products: the sum, over ``A``'s entries, of the length of the row
    of ``B`` they select."""


def spgemm_symbolic(
    a_indptr: Any, a_indices: Any, b_indptr: Any, b_indices: Any, p: int, *,
    check: bool = True,
) -> SpgemmPattern:
    """The pattern of the sparse product ``C = A B``, its columns sorted within each row.

    For CSR matrices ``A`` (``m × n``) and ``B`` (``n × p``), row ``i`` of ``C`` holds every
    column ``l`` of a product ``A[i, j] B[j, l]`` of stored entries. The numeric product
    (:func:`csr_product_values`, rerun for new values on the same patterns: an AMG setup's
    ``A P`` and ``Pᵀ (A P)``) finds each product's place in this pattern.

    One native pass of Gustavson's, with a marker array of ``p`` entries, forms and sorts
    each row of ``C`` in an array as long as the products (an upper bound of ``nnz(C)``),
    then packs them and gives the rest of the array back. The work is ``O(p + products)``,
    plus sorting each row of ``C``, split over the cores by rows.

    Args:
      a_indptr, a_indices: ``A``'s pattern, ``(m + 1,)`` and ``(nnz(A),)`` integers; columns in
        ``[0, n)`` with ``n = len(b_indptr) - 1``. Rows need not be sorted.
      b_indptr, b_indices: ``B``'s pattern; columns in ``[0, p)``.
      p: columns of ``B``.
      check: whether to check that the patterns are CSR and fit together. Only the AMG
        setup passes False, for patterns its own kernels made (a
        :class:`~._csr_arrays.CsrStructure`'s): the native code trusts them.

    Returns:
      A :class:`SpgemmPattern` ``(indptr, indices, n_products)``.

    Raises:
      TypeError, ValueError: for patterns that are not CSR or do not fit together, or more
        than ``2**31 - 1`` products (which the int32 indices of the product's derivative
        cannot address).
      MemoryError: the native code ran out of memory.

    Examples:
      ``A = [[1, 1], [0, 1]]`` times ``B = [[1, 0, 1], [0, 1, 0]]``: row 0 of ``C`` gets
      ``B``'s rows 0 and 1, columns 0, 2 and 1, sorted.

      >>> c = spgemm_symbolic([0, 2, 3], [0, 1, 1], [0, 2, 3], [0, 2, 1], p=3)
      >>> c.indptr, c.indices, c.n_products
      (array([0, 3, 4], dtype=int32), array([0, 1, 2, 1], dtype=int32), 4)
    """
    return _spgemm("spgemm_symbolic", a_indptr, a_indices, b_indptr, b_indices, p, check)[0]


def spgemm_host(
    a_values: Any, a_indptr: Any, a_indices: Any, b_values: Any, b_indptr: Any,
    b_indices: Any, p: int, *, check: bool = True,
) -> tuple[SpgemmPattern, np.ndarray]:
    """:func:`spgemm_symbolic` and ``C``'s values for concrete NumPy values, in one pass.

    The values are bit for bit :func:`csr_product_values`'s on the CPU (each entry sums its
    products in the same order, from zero); ``A`` and ``B`` share one dtype of
    ``float32``, ``float64``, ``complex64`` or ``complex128``. Arguments and errors as
    :func:`spgemm_symbolic`'s.

    Examples:
      ``[[1, 1], [0, 1]]`` times ``[[1, 0, 2], [0, 3, 0]]``:

      >>> c, values = spgemm_host(np.ones(3), [0, 2, 3], [0, 1, 1], np.array([1.0, 2.0, 3.0]),
      ...                         [0, 2, 3], [0, 2, 1], p=3)
      >>> c.indptr.tolist(), c.indices.tolist(), values.tolist()
      ([0, 3, 4], [0, 1, 2, 1], [1.0, 3.0, 2.0, 3.0])
    """
    fn = "spgemm_host"
    a_values = _values_dtype(fn, "a_values", a_values, np.shape(a_indices))
    b_values = _values_dtype(fn, "b_values", b_values, np.shape(b_indices))
    if a_values.dtype != b_values.dtype:
        raise ValueError(f"{fn}: A and B must have one dtype, got {a_values.dtype} and"
                         f" {b_values.dtype}")
    return _spgemm(fn, a_indptr, a_indices, b_indptr, b_indices, p, check,
                   (a_values, b_values))


def _spgemm(fn: str, a_indptr: Any, a_indices: Any, b_indptr: Any, b_indices: Any, p: int,
            check: bool, values: tuple[np.ndarray, np.ndarray] | None = None,
            ) -> tuple[SpgemmPattern, np.ndarray | None]:
    """``C = A B``'s pattern, and its values when given ``A``'s and ``B``'s (checked)."""
    p = _check_size(fn, "p", p)
    n = np.shape(b_indptr)[0] - 1 if np.ndim(b_indptr) == 1 else 0
    b_indptr, b_indices = _check_pattern(fn, ("b_indptr", "b_indices"), b_indptr, b_indices,
                                         p, check)
    a_indptr, a_indices = _check_pattern(fn, ("a_indptr", "a_indices"), a_indptr, a_indices,
                                         n, check)
    m = a_indptr.shape[0] - 1
    n_products = _cpu.JaxsolveSparseSpgemmProducts(m, a_indptr, a_indices, b_indptr)
    if n_products > _INT32_MAX:
        raise ValueError(
            f"{fn}: A B has {n_products} scalar products, more than 2**31 - 1, which the int32 "
            "indices of the product's derivative cannot address; split A into blocks of rows"
        )
    c_indptr = np.empty(m + 1, np.int32)
    c_indices = np.empty(max(n_products, 0), np.int32)
    c_values = None
    if n_products < 0:
        status = -1
    elif values is None:
        status = _cpu.JaxsolveSparseSpgemm(m, p, a_indptr, a_indices, b_indptr, b_indices,
                                           c_indptr, c_indices)
    else:
        a_values, b_values = values
        c_values = np.empty(n_products, a_values.dtype)
        status = _cpu.JaxsolveSparseSpgemmValues(
            m, p, a_indptr, a_indices, b_indptr, b_indices, a_values.ctypes.data,
            b_values.ctypes.data, _DTYPES.index(a_values.dtype), c_indptr, c_indices,
            c_values.ctypes.data)
    if status:
        raise MemoryError(f"{fn}: out of memory for the marker arrays of {p=} columns")
    c_indices.resize(c_indptr[-1], refcheck=False)  # shrinks in place: no copy
    if c_values is not None:
        c_values.resize(c_indptr[-1], refcheck=False)
    return SpgemmPattern(c_indptr, c_indices, int(n_products)), c_values


# ----------------------------------------------------------------------------------------
# Classical AMG


SPLITTINGS = {"PMIS": 0, "HMIS": 1, "PMISC": 2}


def _values_dtype(fn: str, name: str, values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` as a contiguous array of one of the native dtypes, of ``shape``."""
    values = np.ascontiguousarray(values)
    if values.dtype not in _DTYPES:
        raise TypeError(f"{fn}: {name} must be float32, float64, complex64 or complex128, got"
                        f" {values.dtype}")
    if values.shape != shape:
        raise ValueError(f"{fn}: {name} must have shape {shape}, got {values.shape}")
    return values


def classical_strength(indptr: Any, indices: Any, values: Any, threshold: float,
                       max_row_sum: float, every: bool, *, check: bool = True) -> np.ndarray:
    """``(nnz,)`` bool: the entries ``(i, j)``, ``j ≠ i``, by which ``i`` strongly depends on ``j``.

    ``i`` strongly depends on ``j`` when ``c_ij ≥ threshold · max_{k≠i} c_ik > 0`` for the
    couplings ``c_ij = -Re(a_ij conj(a_ii)) / |a_ii|``, unless ``|Σ_j a_ij| > max_row_sum ·
    |a_ii|`` (then on nothing); with ``every``, on every ``j ≠ i`` with ``a_ij ≠ 0``.
    Computed in the values' precision. See ``csrc/classical.cc``.

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Examples:
      >>> classical_strength([0, 2, 5, 7], [0, 1, 0, 1, 2, 1, 2],
      ...                    np.array([2.0, -1, -1, 2, -0.4, -1, 2]), 0.5, 1.1, False).tolist()
      [False, True, True, False, False, True, False]
    """
    fn = "classical_strength"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    values = _values_dtype(fn, "values", values, indices.shape)
    strong = np.empty(indices.shape[0], np.uint8)
    if _cpu.JaxsolveSparseClassicalStrength(n, indptr, indices, values.ctypes.data,
                                            _DTYPES.index(values.dtype), threshold,
                                            max_row_sum, int(every), strong):
        raise MemoryError(f"{fn}: out of memory for a matrix of {n} rows")
    return strong.view(bool)


def classical_splitting(indptr: Any, indices: Any, strong: Any, method: str,
                        aggressive: bool = False, *, check: bool = True) -> np.ndarray:
    """The C/F splitting of a strength graph: ``(n,)`` bool, True for C points.

    The graph: the ``strong`` entries (``(nnz,)`` bool) of the ``n × n`` CSR pattern, row
    ``i`` listing the ``j ≠ i`` that ``i`` strongly depends on. ``"PMIS"``: the maximal
    independent set of the symmetrized graph that De Sterck, Yang and Heys' PMIS reaches
    with the weights ``|Sᵀ_i| + u_i`` (``u_i ∈ [0, 1)`` a fixed hash of ``i``, so the
    splitting is deterministic). ``"PMISC"``: PMIS in color (Alber and Olson's PMIS-c,
    PyAMG's ``PMISc``), the fractions ``(m - 1 - c_i + u_i) / m`` with ``c_i`` the color of
    ``i`` in the first-fit coloring of the graph in index order (``m`` colors), so that
    among points of equal ``|Sᵀ_i|`` the greedy independent set goes first and structured
    grids split in Ruge–Stüben's regular pattern, in parallel rounds. ``"HMIS"``:
    Ruge–Stüben's first pass (HMIS on one process, which has no processor boundaries for
    its PMIS part). Points without strong couplings are F. ``aggressive``: Stüben's A2
    coarsening, the same method again on the graph of the C points in which ``i`` depends
    on ``j`` along a path of the strength graph of length one, or two through an F point
    (hypre's aggressive coarsening with ``num_paths = 1``). See ``csrc/classical.cc``.

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Examples:
      A path 0 - 1 - 2 - 3 - 4 of strong couplings both ways: every other point is C, and
      aggressively every fourth.

      >>> import numpy as np
      >>> indptr, indices = [0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4]
      >>> strong = np.array(indices) != np.repeat(np.arange(5), np.diff(indptr))
      >>> classical_splitting(indptr, indices, strong, "PMIS").astype(int).tolist()
      [1, 0, 1, 0, 1]
      >>> classical_splitting(indptr, indices, strong, "PMIS", aggressive=True).astype(int)
      array([0, 0, 1, 0, 0])
    """
    fn = "classical_splitting"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    strong, _ = _splitting_operands(fn, strong, np.zeros(n, bool), indices.shape, n)
    if method not in SPLITTINGS:
        raise ValueError(f"{fn}: method must be one of {sorted(SPLITTINGS)}, got {method!r}")
    coarse = np.empty(n, np.int32)
    if _cpu.JaxsolveSparseClassicalSplitting(n, indptr, indices, strong, SPLITTINGS[method],
                                             int(aggressive), coarse) < 0:
        raise MemoryError(f"{fn}: out of memory for a graph of {n} nodes")
    return coarse.astype(bool)


class InterpolationPattern(NamedTuple):
    """Classical interpolation's pattern and where ``A``'s values enter its weights.

    ``P`` is ``n × n_coarse``. For an F point ``i`` with interpolatory C points ``C_i``
    (``P``'s columns in row ``i``) and distributed strong F neighbours ``F_i``::

        w_ij = -(a_ij + Σ_{k∈F_i} a_ik ā_kj / s_ik) / d_i,   s_ik = Σ_{l∈C_i (∪{i}: D2)} ā_kl

    where ``ā_kl`` is ``a_kl`` if its sign is opposite to ``a_kk``'s, else 0, and ``d_i``
    sums the other entries of row ``i`` and, for D2, ``Σ_k a_ik ā_ki / s_ik``. A
    destination ``d`` is a position of ``P`` (``d < nnz(P)``), row ``i``'s ``d_i``
    (``d = nnz(P) + i``) or nowhere (``d = nnz(P) + n``).
    """

    p_indptr: np.ndarray
    """``(n + 1,)`` row pointers of ``P``."""
    p_indices: np.ndarray
    """Coarse columns of ``P``, sorted within each row (a C point's row: its own)."""
    a_destination: np.ndarray
    """``(nnz(A),)`` where each entry of ``A`` adds."""
    pair_positions: np.ndarray
    """The entry ``a_ik`` of each distributed coupling (increasing)."""
    pair_triples: np.ndarray
    """``(pairs + 1,)`` the first triple of each distributed coupling, then their count."""
    triple_entries: np.ndarray
    """Per triple, the entry ``a_kl`` of row ``k``."""
    triple_destinations: np.ndarray
    """Per triple, where ``ā_kl a_ik / s_ik`` adds."""


def interpolation_pattern(indptr: Any, indices: Any, strong: Any, coarse: Any,
                          distance_two: bool, *, check: bool = True) -> InterpolationPattern:
    """The :class:`InterpolationPattern` of D1 (``distance_two=False``: Ruge–Stüben's
    modified classical interpolation, whose ``F_i`` are the strong F neighbours with a
    common strong C point) or D2 (extended+i: ``C_i`` also holds the strong C points of
    the strong F neighbours, all of which are distributed).

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Args:
      indptr, indices: the ``n × n`` matrix's pattern (columns sorted within rows).
      strong: ``(nnz,)`` bool, the strong entries.
      coarse: ``(n,)`` bool, the C points.
      distance_two: D2 rather than D1.

    Examples:
      1D Laplacian, C points 0, 2, 4: each F point takes half of each C neighbour.

      >>> import numpy as np
      >>> plan = interpolation_pattern([0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4,
      ...                              3, 4], [0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0],
      ...                              [1, 0, 1, 0, 1], distance_two=True)
      >>> plan.p_indptr.tolist(), plan.p_indices.tolist()
      ([0, 1, 3, 4, 6, 7], [0, 0, 1, 1, 1, 2, 2])
    """
    fn = "interpolation_pattern"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    strong, coarse_index = _splitting_operands(fn, strong, coarse, indices.shape, n)
    handle = _cpu.JaxsolveSparseInterpolationPlan(n, indptr, indices, strong, coarse_index,
                                                  int(distance_two))
    if not handle:
        raise MemoryError(f"{fn}: out of memory for the plan of {n} rows")
    sizes = np.empty(7, np.int64)
    _cpu.JaxsolveSparseInterpolationSizes(handle, sizes)

    arrays = [np.empty(size, np.int32) for size in sizes]
    _cpu.JaxsolveSparseInterpolationCopy(handle, *arrays)
    if sizes[5] > _INT32_MAX:  # pair_triples would not reach them
        raise ValueError(f"{fn}: the plan of {n} rows has {sizes[5]} triples, more than"
                         " int32 offsets reach")
    return InterpolationPattern(*arrays)


def _splitting_operands(fn: str, strong: Any, coarse: Any, nnz_shape: tuple[int, ...],
                        n: int) -> tuple[np.ndarray, np.ndarray]:
    """The strong entries as bytes, and each C point's coarse unknown (-1 for F points)."""
    strong = np.ascontiguousarray(strong, np.uint8)
    coarse = np.asarray(coarse, bool)
    if strong.shape != nnz_shape or coarse.shape != (n,):
        raise ValueError(f"{fn}: strong must have shape {nnz_shape} and coarse ({n},), got"
                         f" {strong.shape} and {coarse.shape}")
    return strong, np.where(coarse, np.cumsum(coarse, dtype=np.int32) - 1, -1).astype(np.int32)


def interpolation_values(indptr: Any, indices: Any, values: Any, plan: InterpolationPattern,
                         coarse: Any, *, check: bool = True) -> np.ndarray:
    """``P``'s untruncated values on ``plan`` for ``A``'s concrete ``values`` (``A``'s dtype).

    The weights of :class:`InterpolationPattern`'s formula (C points: 1; an F point whose
    ``d_i`` is 0: zeros), computed in the values' precision with sums accumulated in
    double and in the order of ``jaxsolve.sparse._classical``'s formula, whose NumPy
    evaluation they match bit for bit (real values; complex ones within rounding, NumPy's
    complex products being vectorized differently).

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Examples:
      The 1D Laplacian of :func:`interpolation_pattern`'s example:

      >>> indptr, indices = [0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4]
      >>> values = np.array([2.0, -1, -1, 2, -1, -1, 2, -1, -1, 2, -1, -1, 2])
      >>> strong, coarse = indices != np.repeat(np.arange(5), np.diff(indptr)), [1, 0, 1, 0, 1]
      >>> plan = interpolation_pattern(indptr, indices, strong, coarse, distance_two=True)
      >>> interpolation_values(indptr, indices, values, plan, coarse).tolist()
      [1.0, 0.5, 0.5, 1.0, 0.5, 0.5, 1.0]
    """
    fn = "interpolation_values"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    values = _values_dtype(fn, "values", values, indices.shape)
    coarse = np.ascontiguousarray(coarse, np.uint8)
    for name, entries in (("pair_positions", plan.pair_positions),
                          ("triple_entries", plan.triple_entries)):
        if entries.size and (entries.min() < 0 or entries.max() >= indices.shape[0]):
            raise ValueError(f"{fn}: the plan's {name} must be entries of A")
    if (plan.pair_triples.shape != (plan.pair_positions.shape[0] + 1,)
            or plan.pair_triples[-1] != plan.triple_entries.shape[0]
            or np.any(np.diff(plan.pair_triples) < 0)
            or plan.a_destination.shape != indices.shape or coarse.shape != (n,)
            or plan.p_indptr.shape != (n + 1,)):
        raise ValueError(f"{fn}: the plan does not fit A's pattern")
    weights = np.empty(int(plan.p_indptr[-1]), values.dtype)
    status = _cpu.JaxsolveSparseInterpolationValues(
        n, indptr, indices, values.ctypes.data, _DTYPES.index(values.dtype), coarse,
        plan.p_indptr, plan.a_destination,
        plan.pair_positions.shape[0], plan.pair_positions, plan.pair_triples,
        plan.triple_entries, plan.triple_destinations, weights.ctypes.data)
    if status == -1:
        raise MemoryError(f"{fn}: out of memory for a matrix of {n} rows")
    if status:
        raise ValueError(f"{fn}: the plan sends a value outside its row of P")
    return weights


def truncation(indptr: Any, weights: Any, factor: float, most: int) -> np.ndarray:
    """``(nnz,)`` bool: the weights of each row that truncation keeps.

    Those of at least ``factor`` times the row's largest magnitude (for ``0 < factor <
    1``), and of those the ``most`` largest (for ``most > 0``; ties: the earlier).

    Examples:
      >>> truncation([0, 4], np.array([0.1, 0.4, -0.4, 0.3]), 0.5, 2).tolist()
      [False, True, True, False]
    """
    fn = "truncation"
    indptr = np.ascontiguousarray(indptr, np.int32)
    n = indptr.shape[0] - 1
    weights = _values_dtype(fn, "weights", weights, (int(indptr[-1]),))
    kept = np.empty(weights.shape[0], np.uint8)
    if _cpu.JaxsolveSparseTruncation(n, indptr, weights.ctypes.data,
                                     _DTYPES.index(weights.dtype), factor, most, kept):
        raise MemoryError(f"{fn}: out of memory for {n} rows")
    return kept.view(bool)


def kept_pattern(indptr: np.ndarray, indices: np.ndarray,
                 kept: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pattern :func:`truncation`'s ``kept`` keeps of the CSR pattern ``(indptr,
    indices)``: ``(kept_indptr, keep, kept_indices)``, its row pointers, and each kept
    entry's position in ``indices`` and its column.

    What ``np.flatnonzero`` and a running count give, over the cores.  Unchecked: for the
    int32 patterns the AMG setup made itself.

    Examples:
      >>> kept_indptr, keep, kept_indices = kept_pattern(
      ...     np.array([0, 3, 3, 5], np.int32), np.array([4, 6, 9, 1, 2], np.int32),
      ...     np.array([True, False, True, False, True]))
      >>> kept_indptr.tolist(), keep.tolist(), kept_indices.tolist()
      ([0, 2, 2, 3], [0, 2, 4], [4, 9, 2])
    """
    kept = np.ascontiguousarray(kept, np.uint8)
    n = indptr.shape[0] - 1
    count = int(np.count_nonzero(kept))
    kept_indptr = np.empty(n + 1, np.int32)
    keep, kept_indices = np.empty(count, np.int32), np.empty(count, np.int32)
    _cpu.JaxsolveSparseKeptPattern(n, indptr, indices, kept, kept_indptr, keep, kept_indices)
    return kept_indptr, keep, kept_indices


def truncated_values(indptr: Any, weights: Any, keep: Any, kept_indptr: Any) -> np.ndarray:
    """The weights (on the row pointers ``indptr``) that ``keep`` selects, each row rescaled
    to its former sum (rows whose kept weights sum to zero are left as they are).

    ``keep``: positions among the weights, each row's within its own and increasing;
    ``kept_indptr``: the row pointers of the kept pattern. Sums run in double in the order
    of the weights, as ``jaxsolve.sparse._classical``'s NumPy formula runs them (equal bit
    for bit for real weights).

    Examples:
      >>> truncated_values([0, 3], np.array([0.5, 0.3, 0.2]), [0, 1], [0, 2]).tolist()
      [0.625, 0.375]
    """
    fn = "truncated_values"
    indptr = np.ascontiguousarray(indptr, np.int32)
    n = indptr.shape[0] - 1
    weights = _values_dtype(fn, "weights", weights, (int(indptr[-1]),))
    keep = np.ascontiguousarray(keep, np.int32)
    kept_indptr = np.ascontiguousarray(kept_indptr, np.int32)
    if kept_indptr.shape != (n + 1,) or kept_indptr[0] != 0 or kept_indptr[-1] != keep.shape[0]:
        raise ValueError(f"{fn}: kept_indptr must have {n + 1} row pointers, from 0 to"
                         f" {keep.shape[0]}")
    values = np.empty(keep.shape[0], weights.dtype)
    status = _cpu.JaxsolveSparseTruncatedValues(n, indptr, weights.ctypes.data,
                                                _DTYPES.index(weights.dtype), keep,
                                                kept_indptr, values.ctypes.data)
    if status == -1:
        raise MemoryError(f"{fn}: out of memory for {n} rows")
    if status:
        raise ValueError(f"{fn}: keep must select weights of each row's own")
    return values


class MultipassPattern(NamedTuple):
    """Multipass interpolation's pattern and how its weights follow from ``A``'s values.

    Pass 0 are the C points (``P``'s row: their coarse unknown's unit row); an F point is
    in pass ``m`` when a point of pass ``m - 1`` is among those it strongly depends on, and
    its row of ``P`` is ``Σ_{k∈P_i} c_ik P_k`` over its strong neighbours ``P_i`` of earlier
    passes, with direct interpolation's coefficients ``c_ik`` (``-α_i a_ik / a_ii``, ``α_i``
    scaling ``P_i``'s couplings to all of row ``i``'s; see
    ``jaxsolve.sparse._classical``). The triples ``(e, s, t)`` of pass ``m`` add ``c_ik``
    (entry ``e = (i, k)`` of ``A``) times ``P``'s entry ``s`` (of row ``k``) into ``P``'s
    entry ``t`` (of row ``i``).
    """

    p_indptr: np.ndarray
    """``(n + 1,)`` row pointers of ``P`` (an F point no pass reaches: an empty row)."""
    p_indices: np.ndarray
    """Coarse columns of ``P``, sorted within each row."""
    pass_counts: np.ndarray
    """The number of triples of each pass ``1, 2, …``."""
    triple_entries: np.ndarray
    """Per triple, the entry ``e`` of ``A``."""
    triple_sources: np.ndarray
    """Per triple, the entry ``s`` of ``P``."""
    triple_destinations: np.ndarray
    """Per triple, the entry ``t`` of ``P``."""
    interpolatory: np.ndarray
    """``(nnz(A),)`` bool: the entries ``a_ik`` with ``k ∈ P_i``."""


def multipass_pattern(indptr: Any, indices: Any, strong: Any, coarse: Any, *,
                      check: bool = True) -> MultipassPattern:
    """The :class:`MultipassPattern` of multipass interpolation (Stüben 1999, A.4.3).

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Args:
      indptr, indices: the ``n × n`` matrix's pattern (columns sorted within rows).
      strong: ``(nnz,)`` bool, the strong entries.
      coarse: ``(n,)`` bool, the C points.

    Examples:
      1D Laplacian, C points 0 and 4: points 1 and 3 in pass 1, point 2 in pass 2.

      >>> indptr, indices = [0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4]
      >>> strong = indices != np.repeat(np.arange(5), np.diff(indptr))
      >>> plan = multipass_pattern(indptr, indices, strong, [1, 0, 0, 0, 1])
      >>> plan.p_indptr.tolist(), plan.p_indices.tolist(), plan.pass_counts.tolist()
      ([0, 1, 2, 4, 5, 6], [0, 0, 0, 1, 1, 1], [2, 2])
    """
    fn = "multipass_pattern"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    strong, coarse_index = _splitting_operands(fn, strong, coarse, indices.shape, n)
    handle = _cpu.JaxsolveSparseMultipassPlan(n, indptr, indices, strong, coarse_index)
    if not handle:
        raise MemoryError(f"{fn}: out of memory for the plan of {n} rows")
    sizes = np.empty(4, np.int64)
    _cpu.JaxsolveSparseMultipassSizes(handle, sizes)
    arrays = [np.empty(size, np.int32) for size in (*sizes[:3], *[sizes[3]] * 3)]
    interpolatory = np.empty(indices.shape[0], np.uint8)
    _cpu.JaxsolveSparseMultipassCopy(handle, *arrays, interpolatory)
    return MultipassPattern(*arrays, interpolatory.view(bool))


def multipass_values(indptr: Any, indices: Any, values: Any, plan: MultipassPattern,
                     coarse: Any, *, check: bool = True) -> np.ndarray:
    """``P``'s untruncated multipass weights on ``plan`` for ``A``'s concrete ``values``.

    The weights of ``jaxsolve.sparse._classical``'s multipass formula (C points: 1; F
    points pass by pass from the earlier passes' rows), in ``A``'s dtype, with sums
    accumulated in double in the formula's order: its NumPy evaluation's bit for bit for
    real values (complex ones within rounding). Each pass is split over the cores at rows
    of ``P``.

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Examples:
      The 1D Laplacian of :func:`multipass_pattern`'s example: point 2 takes half of each
      of its neighbours' rows.

      >>> indptr, indices = [0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4]
      >>> values = np.array([2.0, -1, -1, 2, -1, -1, 2, -1, -1, 2, -1, -1, 2])
      >>> strong, coarse = indices != np.repeat(np.arange(5), np.diff(indptr)), [1, 0, 0, 0, 1]
      >>> plan = multipass_pattern(indptr, indices, strong, coarse)
      >>> multipass_values(indptr, indices, values, plan, coarse).tolist()
      [1.0, 1.0, 0.5, 0.5, 1.0, 1.0]
    """
    fn = "multipass_values"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = _check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    values = _values_dtype(fn, "values", values, indices.shape)
    coarse = np.ascontiguousarray(coarse, np.uint8)
    entries = plan.triple_entries
    if (coarse.shape != (n,) or plan.p_indptr.shape != (n + 1,)
            or plan.interpolatory.shape != indices.shape
            or np.any(plan.pass_counts < 0) or plan.pass_counts.sum() != entries.shape[0]
            or not (entries.shape == plan.triple_sources.shape
                    == plan.triple_destinations.shape)
            or entries.size and (entries.min() < 0 or entries.max() >= indices.shape[0])):
        raise ValueError(f"{fn}: the plan does not fit A's pattern")
    weights = np.empty(int(plan.p_indptr[-1]), values.dtype)
    status = _cpu.JaxsolveSparseMultipassValues(
        n, indptr, indices, values.ctypes.data, _DTYPES.index(values.dtype), coarse,
        np.ascontiguousarray(plan.p_indptr, np.int32),
        np.ascontiguousarray(plan.interpolatory, np.uint8), plan.pass_counts.shape[0],
        plan.pass_counts, entries, plan.triple_sources, plan.triple_destinations,
        weights.ctypes.data)
    if status == -1:
        raise MemoryError(f"{fn}: out of memory for a matrix of {n} rows")
    if status:
        raise ValueError(f"{fn}: the plan's passes read a weight that no earlier pass formed"
                         " or an entry of A outside the row they write, write outside P or"
                         " leave the order of P's rows")
    return weights
