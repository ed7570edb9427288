"""Matrix-free operators: their matrix, recovered by colored probing, for the AMG engine.

AMG needs the matrix; a simulator has ``x ↦ A x``.  Three steps turn one into the other:

1. **Pattern**: :func:`trace_sparsity` reads which ``a_ij`` can be nonzero from the
   operator's jaxpr (:mod:`._sparsity_tracing`).
2. **Coloring**: :func:`color_columns` splits the columns into groups sharing no row
   (:mod:`._coloring`): ``k`` colors, 5 for a 5-point stencil.
3. **Values**: one operator evaluation per color, all batched with ``jax.vmap``: for
   the seed ``s_c`` (ones on the columns of color ``c``), ``(A s_c)[i] = a_ij`` for the
   one ``j`` of color ``c`` in row ``i``, so a gather assembles the CSR values on the
   device.  This step is plain JAX, so it runs under ``jax.jit`` and is differentiable
   with respect to whatever the operator closes over: gradients reach the parameters
   of a simulator through :func:`solve`.

Steps 1–2 are host work on concrete data, done once per operator *structure*:
:func:`cache_coloring` returns them as a :class:`ColoringInfo`, and keeps them in a
bounded LRU cache keyed by a hash of the operator's jaxpr, shapes and the structure of
its constants (their zeros, and their values where they are integers or booleans), so a
closure rebuilt on every call with new coefficients still finds its entry.  Inside
``jax.jit`` the structure cannot be computed (the operator's constants are traced):
compute it before and attach it with :func:`with_cache`, as in this training loop::

    info = sparse.cache_coloring(make_operator(d0), n)         # outside jit, once

    @jax.jit
    @jax.value_and_grad
    def loss(d):
        A = sparse.with_cache(make_operator(d), coloring=info)  # d traced
        x, _ = sparse.solve(A, b)
        return jnp.sum((x - target) ** 2)
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import re
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax import extend as jex

from ._coloring import color_columns
from ._csr import CsrMatrix, _CsrPattern
from ._sparsity_tracing import default_dtype, normalized_shape, trace_pattern
from ._static_pattern import Attachments, attach, is_sparse_matrix

_CACHE_SIZE = 32
_MATERIALIZE_BYTES = 512 * 2**20  # the products of one vmap batch of seeds, at most


@dataclasses.dataclass(frozen=True, eq=False)
class ColoringInfo:
    """The structure of a matrix-free operator: its pattern and a distance-2 coloring.

    Computed by :func:`cache_coloring`, attached to an operator by :func:`with_cache`.
    Hashable by identity; its arrays are read-only NumPy arrays on the host.  It unpacks
    and indexes as JAX-AMG's 5-tuple ``(rows, cols, colors, n_colors, shape)``:
    ``info[4]`` is the shape.

    Attributes:
      rows: ``(nnz,)`` int32 row of each pattern entry, in CSR order (by row, then column).
      cols: ``(nnz,)`` int32 column of each entry.
      colors: ``(n_cols,)`` int32 color of each column; columns of one color share no row.
      n_colors: the number of colors, i.e. of operator evaluations per materialization.
      shape: ``(n_rows, n_cols)``.
      dtype: the dtype of the operator's input the structure was traced with.
      method: ``"traced"`` (from the jaxpr), ``"probed"`` (by unit vectors) or
        ``"declared"`` (by :func:`pattern`).
    """

    rows: np.ndarray
    cols: np.ndarray
    colors: np.ndarray
    n_colors: int
    shape: tuple[int, int]
    dtype: np.dtype
    method: str = "traced"

    @property
    def nnz(self) -> int:
        return int(self.rows.size)

    @functools.cached_property
    def pattern(self) -> _CsrPattern:
        """The pattern as the one shared by every :class:`CsrMatrix` materialized on it."""
        counts = np.bincount(self.rows, minlength=self.shape[0])
        indptr = np.concatenate([[0], np.cumsum(counts)])
        return _CsrPattern(self.cols, indptr, self.shape)

    @functools.cached_property
    def positions(self) -> np.ndarray:
        """Where each entry's value sits among the products ``(n_colors, n_rows)``, flat."""
        flat = self.colors[self.cols].astype(np.int64) * self.shape[0] + self.rows
        return flat.astype(np.int32 if flat.size == 0 or flat.max() < 2**31 - 1 else np.int64)

    def _as_tuple(self) -> tuple:
        return (self.rows, self.cols, self.colors, self.n_colors, self.shape)

    def __iter__(self):
        """JAX-AMG's 5-tuple: ``rows, cols, colors, n_colors, shape = info``."""
        return iter(self._as_tuple())

    def __getitem__(self, index: int | slice) -> Any:
        """JAX-AMG's 5-tuple, indexed: ``info[4]`` is the shape, ``info[:2]`` the pattern."""
        return self._as_tuple()[index]

    def __len__(self) -> int:
        return 5

    def __repr__(self) -> str:
        return (f"ColoringInfo(shape={self.shape}, nnz={self.nnz}, n_colors={self.n_colors},"
                f" dtype={self.dtype}, method={self.method!r})")


class CachedOperator:
    """A matrix-free operator with its structure attached (see :func:`with_cache`).

    Calling it calls the operator.  ``shape`` and ``dtype`` are the coloring's.
    """

    def __init__(self, operator: Callable[[jax.Array], jax.Array], attachments: Attachments):
        self.operator = operator
        self.attachments = attachments

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.operator(x)

    @property
    def coloring(self) -> ColoringInfo | None:
        return self.attachments.coloring

    @property
    def is_symmetric(self) -> bool:
        return self.attachments.is_symmetric

    @property
    def shape(self) -> tuple[int, int] | None:
        return None if self.coloring is None else self.coloring.shape

    @property
    def dtype(self) -> np.dtype | None:
        return None if self.coloring is None else self.coloring.dtype


def with_cache(A: Any, *, coloring: ColoringInfo | None = None, mpi: Any = None,
               is_symmetric: bool = False, nullspace: Any = None,
               transpose_nullspace: Any = None, pattern: ColoringInfo | None = None) -> Any:
    """Attaches precomputed structure to a matrix or an operator, for use under ``jax.jit``.

    JAX-AMG's ``with_cache``, with its arguments and meaning.  As JAX-AMG's, it attaches
    in place where the object takes it, so code that ignores its result works too
    (JAX-AMG's Examples page calls ``with_cache(A_loc, mpi=...)`` inside a loss and later
    ``solve(A_loc, b)``, a distributed solve).  What it returns depends on ``A``:

    * a ``jax.experimental.sparse`` **BCSR** or **BCOO** (or a ``scipy.sparse`` matrix,
      which becomes a BCSR): the same matrix whose **pattern stays static** when it is
      passed *as an argument* through ``jax.jit``, ``jax.vmap`` and ``jax.grad``.  It is a
      subclass of ``BCSR``/``BCOO`` (everything a BCSR does, it does) whose only pytree
      leaf is ``data``; its index arrays are the pytree's auxiliary data, compared by a
      fingerprint of their contents.  So ``jax.jit(lambda A, b: solve(A, b))(A, b)``
      compiles once per pattern: new values on the same pattern reuse the compilation, a
      new pattern compiles anew.  (A plain BCSR argument has traced indices, which
      :func:`solve` refuses.)  Call ``with_cache`` outside the transformation, where the
      indices are concrete.  A matrix with a static pattern already (one returned by
      ``with_cache``, or of :mod:`jaxsolve.sparse.matrices`) takes the attachments itself
      and is returned; a plain one records them as its attribute ``attachments``, which
      :func:`solve` reads, and its static-pattern copy is returned;
    * a **matrix-free operator** ``x ↦ A x``: :func:`solve` and :func:`make_preconditioner`
      find its structure themselves outside ``jit``, but inside they cannot, since the
      operator's constants are traced.  Compute it outside with :func:`cache_coloring` and
      attach it here, inside: only the values are then computed in the compiled program
      (one operator evaluation per color), differentiably.  An operator returned by
      ``with_cache`` takes new attachments in place (those given replace the old) and is
      returned itself;
    * a :class:`CsrMatrix` or a dense array, whose pattern needs no attaching (a
      ``CsrMatrix``'s is static already): returned as it is; it carries no attachments.

    Args:
      A: a BCSR, BCOO, ``scipy.sparse`` matrix, :class:`CsrMatrix`, dense array, or
        a callable operator.
      coloring: for an operator, a :class:`ColoringInfo` from :func:`cache_coloring` on
        an operator of the same structure (ignored for a matrix, as JAX-AMG does).
      pattern: for an operator, a declared pattern from :func:`pattern` (JAX-AMG's
        keyword): attached as ``coloring`` is; give one of the two.
      mpi: JAX-AMG's MPI metadata (``cache_mpi_metadata``'s result), recorded as the
        ``attachments.mpi`` of the result.
      is_symmetric: whether ``A`` is symmetric (JAX-AMG's meaning: the backward pass
        skips the transpose).  :func:`solve` then treats a real ``A`` as ``CG``/``PCG``
        configurations treat every ``A``: reverse mode solves with ``A``'s own hierarchy,
        never building ``Aᵀ``'s, and derivatives with respect to the values are
        projected onto symmetric matrices.  Declare it only for a matrix that is and
        stays symmetric.
      nullspace, transpose_nullspace: bases of the null spaces of a singular ``A`` and of
        ``Aᵀ`` (JAX-AMG's keywords), ``(n,)`` or ``(n, k)``: :func:`solve` takes them as its
        arguments of these names when those are not given (and returns the minimum-norm
        solution).  A distributed solve (``mpi=``) refuses them, as ``solve(...,
        comm=...)`` refuses its own.

    Returns:
      A ``CachedBCSR`` or ``CachedBCOO`` (subclasses of ``BCSR``/``BCOO``; ``A`` itself if
      it is one), an operator carrying the attachments (``A`` itself if ``with_cache``
      made it), or ``A`` itself (a CsrMatrix or dense array).

    Raises:
      TypeError: for another type of ``A``, a ``coloring`` that is not a
        :class:`ColoringInfo`, attachments to a CsrMatrix or dense array, or a BCSR/BCOO
        whose indices are traced.

    Examples:
      A BCSR argument of a jitted solve, compiled once for new values on its pattern:

      >>> import jax, jax.numpy as jnp
      >>> from jax.experimental import sparse as jsparse
      >>> from jaxsolve import sparse
      >>> A = sparse.with_cache(sparse.matrices.poisson_matrix(8))
      >>> solve = jax.jit(lambda A, b: sparse.solve(A, b)[0])
      >>> x = solve(A, jnp.ones(64))
      >>> A2 = sparse.with_cache(jsparse.BCSR((2 * A.data, A.indices, A.indptr), shape=A.shape))
      >>> bool(jnp.allclose(solve(A2, jnp.ones(64)), x / 2, rtol=1e-4))
      True

      A matrix-free operator whose coefficients are traced:

      >>> def operator(d):
      ...     return lambda x: d * x - jnp.roll(x, 1) - jnp.roll(x, -1)
      >>> info = sparse.cache_coloring(operator(4.0), 16)
      >>> solve = jax.jit(lambda d, b: sparse.solve(
      ...     sparse.with_cache(operator(d), coloring=info), b)[0])
      >>> x = solve(4.0, jnp.ones(16))
      >>> bool(jnp.allclose(operator(4.0)(x), 1.0, atol=1e-4))
      True
    """
    if pattern is not None:
        if coloring is not None:
            raise TypeError("with_cache: pattern= and coloring= are mutually exclusive (a"
                            " pattern is colored when declared); give one.")
        if not isinstance(pattern, ColoringInfo) or pattern.method != "declared":
            raise TypeError("with_cache: pattern must be a declaration from pattern(rows,"
                            f" cols, shape), got {type(pattern).__name__}.")
        coloring = pattern
    if coloring is not None and not isinstance(coloring, ColoringInfo):
        raise TypeError("with_cache: coloring must be a ColoringInfo from cache_coloring,"
                        f" got {type(coloring).__name__}.")
    previous = getattr(A, "attachments", None)  # of an earlier with_cache
    if not isinstance(previous, Attachments):
        previous = Attachments()
    given = {"coloring": coloring, "mpi": mpi, "nullspace": nullspace,
             "transpose_nullspace": transpose_nullspace}
    attachments = Attachments(
        **{key: getattr(previous, key) if value is None else value
           for key, value in given.items()},
        is_symmetric=bool(is_symmetric) or previous.is_symmetric)
    if isinstance(A, CachedOperator):  # in place, as JAX-AMG attaches
        A.attachments = attachments
        return A
    if is_operator(A):
        return CachedOperator(A, attachments)
    if is_sparse_matrix(A):
        return attach("with_cache", A, attachments)
    if isinstance(A, (CsrMatrix, jax.Array, np.ndarray)):
        if is_symmetric or any(value is not None for value in given.values()):
            raise TypeError(
                f"with_cache: a {type(A).__name__} carries no attachments (its pattern needs"
                " none); attach them to a BCSR (e.g. CsrMatrix.to_bcsr()) or an operator.")
        return A
    raise TypeError("with_cache: A must be a BCSR, BCOO, scipy.sparse matrix, CsrMatrix,"
                    f" dense array or callable operator, got {type(A).__name__}.")


# -----------------------------------------------------------------------------
# The structure cache


_cache: collections.OrderedDict[str, ColoringInfo] = collections.OrderedDict()
_cache_lock = threading.Lock()


def cache_coloring(operator: Callable[[jax.Array], jax.Array], shape: Any,
                   dtype: Any = None) -> ColoringInfo:
    r"""The pattern and distance-2 coloring of a matrix-free operator, computed once.

    Traces the operator's sparsity (:func:`trace_sparsity`, with its fallback to probing),
    colors its columns (:func:`color_columns`), checks that the matrix recovered with
    that coloring reproduces the operator on a random vector, and keeps the result in an
    LRU cache of 32 entries keyed by the operator's structure: a hash of its jaxpr, the
    shapes and dtype, and the zero patterns of the arrays it closes over (full values
    for integer and boolean ones, which can be indices).  An operator rebuilt with new
    coefficients (a new closure) finds the same entry.

    Call it outside ``jax.jit``; pass the result to :func:`with_cache` inside.  The pattern
    is that of the coefficients it sees: a closed-over array whose entries are zero here
    leaves their couplings out, so build the operator for it with the coefficients it will
    have nonzero (a structure used inside ``jit`` with other values is not checked there;
    outside, ``solve`` checks it).

    Args:
      operator: ``x ↦ A x`` for ``x`` of shape ``(n_cols,)``; linear, with concrete
        closed-over arrays.
      shape: ``n`` for a square operator, or ``(n_rows, n_cols)``.
      dtype: the dtype of ``x`` (default: JAX's default float); solves in another
        dtype reuse the structure.

    Returns:
      A :class:`ColoringInfo`.

    Raises:
      ValueError: if the operator closes over traced values (call it outside
        ``jit``/``grad``), does not map ``(n_cols,)`` to ``(n_rows,)``, or is not
        reproduced by the recovered matrix (it is not linear).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import sparse
      >>> def laplacian_2d(x):  # 5-point stencil on a 32 × 32 grid, zero boundary
      ...     u = jnp.pad(x.reshape(32, 32), 1)
      ...     return (4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1]
      ...             - u[1:-1, :-2] - u[1:-1, 2:]).ravel()
      >>> info = sparse.cache_coloring(laplacian_2d, 32 * 32)
      >>> info.nnz, info.shape
      (4992, (1024, 1024))
      >>> info.n_colors  # the optimum: 5 operator evaluations recover all 4992 entries
      5
    """
    return _coloring("cache_coloring", operator, shape, dtype)


def pattern(rows: Any, cols: Any, shape: Any) -> ColoringInfo:
    """A matrix-free operator's sparsity pattern, declared: JAX-AMG's ``jaxamg.pattern``.

    Where tracing cannot find the pattern, or where entries that are zero now may become
    nonzero later, declare every coupling ``(rows[k], cols[k])`` the operator can have and
    attach the declaration with ``with_cache(operator, pattern=p)``; each new operator
    instance (new coefficients, inside ``jax.jit``) takes the same declaration.  It is
    colored here, once, as :func:`cache_coloring` colors a traced pattern, and serves
    every precision.  A solve outside ``jit`` checks that the matrix on the declared
    pattern reproduces the operator (a coupling left out is an error there).

    Args:
      rows, cols: ``(nnz,)`` integer indices of the couplings, in any order (repeats are
        merged); copied.
      shape: ``n`` for a square operator, or ``(n_rows, n_cols)``.

    Returns:
      A :class:`ColoringInfo` whose ``method`` is ``"declared"`` (JAX-AMG's ``Pattern``:
      ``rows``, ``cols``, ``colors`` as there).

    Raises:
      TypeError, ValueError: for indices that are not 1-D integer arrays of one length,
        or outside ``shape``.

    Examples:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> from jaxsolve import sparse
      >>> i = np.arange(8)
      >>> p = sparse.pattern(np.r_[i, i[1:], i[:-1]], np.r_[i, i[:-1], i[1:]], 8)
      >>> p.nnz, p.n_colors
      (22, 3)
      >>> @jax.jit
      ... def solve_at(c, b):
      ...     op = sparse.with_cache(lambda x: c * x - jnp.roll(x, 1).at[0].set(0), pattern=p)
      ...     return sparse.solve(op, b)[0]
      >>> x = solve_at(3.0, jnp.ones(8))
      >>> bool(jnp.allclose(3.0 * x - jnp.roll(x, 1).at[0].set(0), 1.0, atol=1e-5))
      True
    """
    caller = "pattern"
    shape = normalized_shape(caller, shape)
    rows, cols = np.asarray(rows), np.asarray(cols)
    if rows.ndim != 1 or rows.shape != cols.shape or (rows.size and not (
            rows.dtype.kind in "iu" and cols.dtype.kind in "iu")):
        raise TypeError(f"{caller}: rows and cols must be 1-D integer arrays of one length,"
                        f" got {rows.dtype}{rows.shape} and {cols.dtype}{cols.shape}.")
    if rows.size and not (0 <= rows.min() and rows.max() < shape[0]
                          and 0 <= cols.min() and cols.max() < shape[1]):
        raise ValueError(f"{caller}: an index lies outside the shape {shape}.")
    declared = scipy.sparse.csr_array((np.ones(rows.size, np.int8), (rows, cols)), shape=shape)
    declared.sum_duplicates()
    colors = (color_columns(declared, distance=2) if declared.nnz
              else np.zeros(shape[1], np.int32))
    coo = declared.tocoo()
    return ColoringInfo(
        rows=_frozen(coo.row), cols=_frozen(coo.col), colors=_frozen(colors),
        n_colors=int(colors.max(initial=-1)) + 1 if declared.nnz else 0, shape=shape,
        dtype=default_dtype(None), method="declared")


def _coloring(caller: str, operator: Callable, shape: Any, dtype: Any) -> ColoringInfo:
    """:func:`cache_coloring`, its errors named after ``caller``."""
    shape = normalized_shape(caller, shape)
    dtype = default_dtype(dtype)
    operator = operator.operator if isinstance(operator, CachedOperator) else operator
    with jax.ensure_compile_time_eval():  # host work, also while a caller's jit traces
        return _cache_coloring(caller, operator, shape, dtype)


def _cache_coloring(caller: str, operator: Callable, shape: tuple[int, int], dtype: np.dtype
                    ) -> ColoringInfo:
    closed_jaxpr = jax.make_jaxpr(operator)(jax.ShapeDtypeStruct((shape[1],), dtype))
    if any(isinstance(c, jax.core.Tracer) for c in closed_jaxpr.consts):
        raise ValueError(
            f"{caller}: the operator closes over traced values (it was built inside"
            " jax.jit, grad or vmap). Call cache_coloring outside, on an operator of the"
            " same structure built from concrete arrays, and attach the result inside"
            " with with_cache(operator, coloring=...).")
    key = _structure_key(closed_jaxpr, shape, dtype)
    with _cache_lock:
        info = _cache.get(key)
        if info is not None:
            _cache.move_to_end(key)
            return info
    pattern, method = trace_pattern(operator, shape, dtype, closed_jaxpr)
    colors = color_columns(pattern, distance=2) if pattern.nnz else np.zeros(shape[1], np.int32)
    coo = pattern.tocoo()
    info = ColoringInfo(
        rows=_frozen(coo.row), cols=_frozen(coo.col), colors=_frozen(colors),
        n_colors=int(colors.max(initial=-1)) + 1 if pattern.nnz else 0, shape=shape,
        dtype=dtype, method=method)
    check_materialized(caller, operator, info, materialize(operator, info))
    with _cache_lock:
        _cache[key] = info
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return info


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.int32)
    a.flags.writeable = False
    return a


# A float literal of the printed jaxpr (``4.0:f32[]``): only whether it is zero is structure.
_FLOAT_LITERAL = re.compile(
    r"(?<![\w.])-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)(?=:(?:bf16|f16|f32|f64|c64|c128)\[)")


def _structure_key(closed_jaxpr: Any, shape: tuple[int, int], dtype: np.dtype) -> str:
    digest = hashlib.blake2b(digest_size=20)
    text = _FLOAT_LITERAL.sub(
        lambda match: "0" if float(match.group()) == 0 else "nz", str(closed_jaxpr.jaxpr))
    digest.update(f"{shape}|{dtype}|{text}".encode())
    # The arrays the operator closes over: constvars, or (in newer JAX versions) array
    # literals inside the equations, whose printed form need not show their values.
    for const in [*closed_jaxpr.consts, *_array_literals(closed_jaxpr.jaxpr)]:
        const = np.asarray(const)
        digest.update(f"|{const.shape}{const.dtype}|".encode())
        structural = const if const.dtype.kind in "biu" else (const != 0)
        digest.update(np.ascontiguousarray(structural).tobytes())
    return digest.hexdigest()


def _array_literals(jaxpr: Any) -> list[Any]:
    """The values of the non-scalar literals of ``jaxpr`` and its sub-jaxprs, in order."""
    found = []
    for eqn in jaxpr.eqns:
        for atom in eqn.invars:
            if isinstance(atom, jex.core.Literal) and np.ndim(atom.val) > 0:
                found.append(atom.val)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if isinstance(inner, jex.core.Jaxpr):
                    found.extend(getattr(sub, "consts", []))
                    found.extend(_array_literals(inner))
    return found


def clear_coloring_cache() -> None:
    """Empties the structure cache of :func:`cache_coloring`."""
    with _cache_lock:
        _cache.clear()


# -----------------------------------------------------------------------------
# Materialization


def materialize(operator: Callable[[jax.Array], jax.Array], coloring: ColoringInfo,
                dtype: Any = None) -> CsrMatrix:
    """The operator's matrix on ``coloring``'s pattern: one evaluation per color, vmapped.

    jit-able and differentiable with respect to the operator's closed-over arrays.
    """
    m, n = coloring.shape
    dtype = coloring.dtype if dtype is None else np.dtype(dtype)
    k = coloring.n_colors
    if k == 0:
        return CsrMatrix._on_pattern(jnp.zeros(0, dtype), coloring.pattern)
    colors = jnp.asarray(coloring.colors)
    seeds = (colors[None, :] == jnp.arange(k, dtype=colors.dtype)[:, None]).astype(dtype)
    batch = max(1, min(k, _MATERIALIZE_BYTES // max(1, (m + n) * dtype.itemsize)))
    products = _evaluate(operator, seeds, batch)
    values = products.reshape(-1)[jnp.asarray(coloring.positions)]
    return CsrMatrix._on_pattern(values, coloring.pattern)


def _evaluate(operator: Callable, seeds: jax.Array, batch: int) -> jax.Array:
    """``operator`` on each row of ``seeds``: vmapped in batches, or sequentially when the
    operator cannot be vmapped (a callback without a ``vmap_method``)."""
    try:
        jax.eval_shape(jax.vmap(operator), seeds[:1])
    except NotImplementedError:
        return jax.lax.map(operator, seeds)
    if batch >= seeds.shape[0]:
        return jax.vmap(operator)(seeds)
    return jax.lax.map(operator, seeds, batch_size=batch)


def check_materialized(caller: str, operator: Callable, coloring: ColoringInfo,
                       matrix: CsrMatrix) -> None:
    """Raises if ``matrix`` (materialized from ``operator``) does not hold floating-point
    values or does not reproduce ``operator`` on a random vector."""
    if not jnp.issubdtype(matrix.values.dtype, jnp.inexact):
        raise TypeError(
            f"{caller}: the matrix-free operator returns {matrix.values.dtype} values; it must"
            " return floating-point or complex ones (an operator that casts to integers or"
            " rounds is not linear): compute in x's dtype.")
    if isinstance(matrix.values, jax.core.Tracer):
        return
    n = coloring.shape[1]
    dtype = np.dtype(matrix.values.dtype)
    x = jnp.asarray(np.random.default_rng(7).standard_normal(n).astype(dtype))
    with jax.numpy_dtype_promotion("standard"):
        expected = jnp.asarray(operator(x))
        got = matrix @ x.astype(matrix.values.dtype)
        scale = _abs_matvec(matrix, x) + jnp.abs(expected)
        error = jnp.max(jnp.abs(expected - got) / jnp.maximum(scale, jnp.finfo(dtype).tiny))
    tolerance = 100 * float(jnp.finfo(dtype).eps) * max(1, int(np.sqrt(coloring.n_colors)))
    if not float(error) <= tolerance:
        raise ValueError(
            f"{caller}: the matrix recovered from the operator's pattern ({coloring.method},"
            f" {coloring.n_colors} colors) does not reproduce it (relative error"
            f" {float(error):.2e}). Is the operator linear in x, without an offset?")


def _abs_matvec(matrix: CsrMatrix, x: jax.Array) -> jax.Array:
    return CsrMatrix._on_pattern(jnp.abs(matrix.values), matrix._pattern) @ jnp.abs(x).astype(
        jnp.abs(matrix.values).dtype)


# -----------------------------------------------------------------------------
# The solver's entry: a callable A as a CsrMatrix


def attached_null_spaces(A: Any) -> tuple[Any, Any]:
    """``(nullspace, transpose_nullspace)`` attached to ``A`` by :func:`with_cache`, each
    None where none is."""
    attachments = getattr(A, "attachments", None)
    if not isinstance(attachments, Attachments):
        return None, None
    return attachments.nullspace, attachments.transpose_nullspace


def declared_symmetric(A: Any) -> bool:
    """Whether :func:`with_cache` declared ``A`` (a matrix or an operator) symmetric."""
    attachments = getattr(A, "attachments", None)
    return isinstance(attachments, Attachments) and attachments.is_symmetric


def is_operator(A: Any) -> bool:
    """Whether ``A`` is a matrix-free operator (a callable that is not a matrix)."""
    return callable(A) and not isinstance(A, (CsrMatrix, jax.Array, np.ndarray)) and not (
        hasattr(A, "todense") or hasattr(A, "toarray"))


def operator_matrix(caller: str, operator: Any, n: int | None, dtype: Any) -> CsrMatrix:
    """The matrix of a matrix-free ``A``, for :func:`solve` and :func:`make_preconditioner`.

    Its structure is the attached one (:func:`with_cache`), else :func:`cache_coloring`'s,
    which needs the operator's constants concrete (outside ``jit``). With concrete values the
    matrix is checked against the operator either way (:func:`check_materialized`): an
    attached coloring of another operator would otherwise give a wrong matrix silently.
    """
    cached = operator if isinstance(operator, CachedOperator) else None
    coloring = None if cached is None else cached.coloring
    if coloring is None:
        if n is None:
            raise ValueError(
                f"{caller}: A is a matrix-free operator of unknown size; attach its structure"
                " with with_cache(A, coloring=cache_coloring(A, n)).")
        try:
            coloring = _coloring(caller, operator, n, dtype)
        except ValueError as error:
            if "traced values" not in str(error):
                raise
            raise ValueError(
                f"{caller}: A is a matrix-free operator built from traced values (inside"
                " jax.jit, grad or vmap), so its sparsity cannot be found here. Compute it"
                " outside with info = cache_coloring(A_outside, n) and pass"
                " with_cache(A, coloring=info) instead.") from None
    elif n is not None and coloring.shape != (n, n):
        raise ValueError(f"{caller}: A's attached coloring has shape {coloring.shape}, but b"
                         f" needs ({n}, {n}).")
    matrix = materialize(operator, coloring, dtype)
    check_materialized(caller, operator, coloring, matrix)
    return matrix
