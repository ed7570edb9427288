"""The XLA FFI kernels of jaxsolve.sparse, as JAX primitives: on the CPU and CUDA GPUs.

Each works under ``jit`` and ``vmap`` (whose axis the kernel's batch of systems absorbs: one
call for a batch on one pattern), from :data:`._native_library.LIBRARY`'s FFI targets:

* :func:`csr_matvec`: ``y = A x`` for a CSR matrix (over right-hand sides under ``vmap``:
  one kernel call with more columns; over values: a batch of systems on one pattern),
  differentiable (``grad``/``jvp``) in the values and ``x``;
  :func:`csr_update_unchecked`, the cycle's fused updates ``base + weight (rhs ∓ A x)``.
* :func:`csr_product_values`: the values of a sparse product ``C = A B`` on the pattern
  :func:`._pattern_kernels.spgemm_symbolic` computes (the AMG setup's products ``A P`` and
  ``Pᵀ A P``).
* :func:`interpolation_weights`: classical AMG's interpolation weights on the plan of
  :func:`._classical_kernels.interpolation_pattern` (the numeric re-setup's, under ``jit``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.backend
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from ._native_library import (
    CSR_MATVEC,
    CSR_PRODUCT,
    DTYPES,
    INTERPOLATION_WEIGHTS,
    LIBRARY,
    check_pattern,
    check_size,
)


# ----------------------------------------------------------------------------------------
# csr_matvec
#
# Below the public function, operands have canonical shapes: values (Bv, nnz), x (Bx, n, k)
# and y (B, m, k), where each of Bv, Bx is 1 or B (the kernel's contract, csrc/spmv.h).


def native_on_every_platform() -> bool:
    """Whether every platform this process can lower a program for runs the native
    kernels (the CPU, CUDA GPUs): a caller then calls a kernel directly, where
    ``jax.lax.platform_dependent`` with a fallback for other platforms traces the fallback
    too (a tenth of a second of Python a sparse product of a 100 000-row AMG level, which
    the lowering then drops)."""
    return set(jax.extend.backend.backends()) <= {"cpu", "cuda"}


def _row_ids(indptr: Any, nnz: int) -> Any:
    """The row of each stored entry: ``rows[e] = i`` for ``indptr[i] <= e < indptr[i+1]``,
    and ``n_rows`` (no row) for an entry outside them: row pointers of JAX arrays may
    start past 0 and end before ``nnz`` (a window of rows of a larger matrix, as the
    multicolor sweeps' products take)."""
    if isinstance(indptr, np.ndarray):
        return np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int32), np.diff(indptr))
    entries = jnp.arange(nnz, dtype=indptr.dtype)
    rows = jnp.searchsorted(indptr[1:], entries, side="right")
    return jnp.where(entries < indptr[0], indptr.shape[0] - 1, rows)


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
        indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n_cols)
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
      >>> from jaxsolve.sparse import csr_matvec
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
    if values.dtype not in DTYPES:
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
    n_rows = check_size(fn, "n_rows", n_rows)
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
    LIBRARY.require_platform("csr_matvec", values, x, indices, indptr)
    return _staged_update(values, indices, indptr, x, rhs, weight, base, subtract=subtract)


@functools.partial(jax.jit, static_argnames="subtract")
def _staged_update(values: jax.Array, indices: Any, indptr: Any, x: jax.Array,
                   rhs: jax.Array | None, weight: jax.Array | None, base: jax.Array | None,
                   *, subtract: bool) -> jax.Array:
    """:func:`csr_update_unchecked`'s product, in canonical shapes and back.

    A ``jax.jit`` of its own, so that a program with many products of the same shapes (an
    AMG cycle's, a numeric setup's) traces its wrappers (derivative, batching rule and FFI
    call) once per shape rather than at each product: their tracing took a third of a
    second of a first solve's.  XLA inlines the call; the program is the same.
    """
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
    outside the pattern becomes NaN; ``B``'s rows must not repeat a column). Row pointers
    may end before their arrays (a pattern padded to a size class, :mod:`._padded_setup`):
    entries past the last row are read by none, and ``C``'s are left unwritten. Unchecked
    here, not differentiable (:mod:`._products` wraps it); under ``vmap`` over values, still
    one kernel call for the batch of systems (over patterns, a loop of calls).

    Raises:
      RuntimeError: on a GPU, when the CUDA library is unavailable.
    """
    operands = (a.values, a.indices, a.indptr, b.values, b.indices, b.indptr, c_indices,
                c_indptr)
    LIBRARY.require_platform("csr_product_values", *operands)
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
                          a_targets: jax.Array, pair_indptr: jax.Array,
                          pair_offsets: jax.Array, pair_counts: jax.Array,
                          triple_indptr: jax.Array, triple_offsets: jax.Array,
                          triple_targets: jax.Array, keep: jax.Array | None,
                          p_indptr: jax.Array, *, full_nnz: int) -> jax.Array:
    """Classical AMG's D1/D2 interpolation weights, ``P``'s values, on an interpolation plan.

    The weights of :class:`InterpolationPattern`'s formula for ``A``'s ``values`` (with
    their ``diagonal``) on its pattern ``indices``/``indptr``, the plan's arrays on the
    device (as :func:`interpolation_pattern` makes them: row pointers of ``int32``,
    offsets and targets of one unsigned dtype), ``full_nnz`` of them; then, with ``keep``
    (offsets of that dtype within the rows of those weights, ``p_indptr`` the kept
    pattern's row pointers), the kept ones, each row rescaled to its former sum. Computed as :func:`interpolation_values`
    computes them on the host, a row at a time, each sum in double in one fixed order: a
    kernel on the CPU (which checks the plan and rejects one that sends a value outside
    its row) and on CUDA GPUs (a thread per row, which trusts the plan; such a row becomes
    NaN). Padded arrays (:mod:`._padded_setup`) may end their row pointers before their
    arrays and leave ``P``'s values past its last row unwritten. Unchecked here, not
    differentiable (:mod:`._classical` wraps it); under ``vmap`` over values and diagonal,
    one kernel call for the batch (over plans, a loop of calls).

    Raises:
      RuntimeError: on a GPU, when the CUDA library is unavailable.
    """
    plan = (indices, indptr, coarse, full_indptr, a_targets, pair_indptr, pair_offsets,
            pair_counts, triple_indptr, triple_offsets, triple_targets,
            jnp.zeros(0, a_targets.dtype) if keep is None else keep, p_indptr)
    LIBRARY.require_platform("interpolation_weights", values, diagonal, *plan)
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

