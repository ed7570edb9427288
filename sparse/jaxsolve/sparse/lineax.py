"""Lineax adapters of the AMG engine (``jaxsolve.sparse.lineax``).

`Lineax <https://github.com/patrick-kidger/lineax>`_ solves ``A x = b`` for any
``lineax.AbstractLinearOperator`` with any ``lineax.AbstractLinearSolver``, and
differentiates the solve itself (``lineax.linear_solve`` has its own JVP and transpose
rules).  This module plugs ``jaxsolve.sparse`` into it in three ways:

* `CsrLinearOperator`: a sparse matrix as a Lineax operator (its values are the pytree
  leaf, its pattern is static), usable with every Lineax solver and differentiable with
  respect to its values;
* `AMGSolver`: ``jaxsolve.sparse.solve`` (AMG-preconditioned Krylov) as a Lineax solver;
* `make_lineax_preconditioner`: one AMG cycle as a Lineax operator, for the
  ``options={"preconditioner": M}`` of ``lineax.CG``, ``lineax.BiCGStab`` or
  ``lineax.GMRES``, tagged as Lineax needs (``lineax.CG`` takes only a positive
  semidefinite preconditioner).

Both also take a *matrix-free* operator — a ``lineax.FunctionLinearOperator`` or any other
Lineax operator, through its ``mv`` (and `make_lineax_preconditioner` a plain function
``x ↦ A x``) — whose matrix they recover as :func:`~jaxsolve.sparse.solve` does: pattern
by sparsity tracing, values by one evaluation per color of a distance-2 coloring.  Outside
a transformation the coloring is found (and cached) by itself; ``lineax.linear_solve``
traces its operator, so there pass the coloring computed outside,
``AMGSolver(coloring=jaxsolve.sparse.cache_coloring(fn, n))``: then ``jax.jit`` and
``jax.grad`` through ``linear_solve`` work with respect to what the function closes over.

Lineax is an optional dependency: ``pip install jaxsolve-sparse[lineax]``.  Importing
``jaxsolve.sparse`` never imports it; importing this module does.

Examples:
  >>> import jax, jax.numpy as jnp, lineax as lx
  >>> from jaxsolve import sparse
  >>> from jaxsolve.sparse.lineax import (AMGSolver, CsrLinearOperator,
  ...                                     make_lineax_preconditioner)
  >>> A = CsrLinearOperator(sparse.matrices.poisson_matrix(32), lx.positive_semidefinite_tag)
  >>> b = jnp.ones(32 * 32)
  >>> solution = lx.linear_solve(A, b, AMGSolver())
  >>> int(solution.stats["num_steps"]) <= 10
  True
  >>> bool(jnp.linalg.norm(A.mv(solution.value) - b) <= 1e-4 * jnp.linalg.norm(b))  # float32
  True

  Lineax differentiates the solve, here with respect to the matrix's stored values:

  >>> loss = lambda values: lx.linear_solve(
  ...     CsrLinearOperator(A.matrix.with_values(values)), b, AMGSolver()).value.sum()
  >>> jax.grad(loss)(A.matrix.values).shape
  (4992,)

  The AMG preconditioner of a symmetric positive definite operator inherits its tags,
  so that ``lineax.CG`` accepts it:

  >>> M = make_lineax_preconditioner(A)
  >>> sorted(map(repr, M.tags))
  ['positive_semidefinite_tag', 'symmetric_tag']
  >>> steps = lambda options: int(lx.linear_solve(
  ...     A, b, lx.CG(rtol=1e-4, atol=0.0), options=options).stats["num_steps"])
  >>> steps({"preconditioner": M}) < steps({}) / 3  # 9 steps instead of 44
  True
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Inexact

try:
    import lineax as lx
except ImportError as error:
    raise ImportError(
        "jaxsolve.sparse.lineax needs Lineax, an optional dependency of jaxsolve-sparse:"
        " install it with `pip install jaxsolve-sparse[lineax]`."
    ) from error

from . import _matrix_free
from ._config import SolverConfig, parse_amgx_config
from ._csr import CsrMatrix, as_csr
from ._matrix_free import ColoringInfo
from ._preconditioner import Preconditioner, make_preconditioner
from ._solve import solve
from ._status import FailureReason, SolveInfo

__all__ = ["AMGSolver", "CsrLinearOperator", "make_lineax_preconditioner"]


class CsrLinearOperator(lx.AbstractLinearOperator):
    """A sparse matrix as a Lineax operator: ``mv(x) = A x``, differentiable in ``A``'s values.

    The operator holds a :class:`~jaxsolve.sparse.CsrMatrix`, whose values are its only
    pytree leaf and whose pattern is static: under ``jax.jit`` only the values are traced,
    ``jax.vmap`` batches values on one pattern, and ``jax.grad`` through
    ``lineax.linear_solve`` gives cotangents on the pattern, never a dense ``n × n`` array.
    Every Lineax solver accepts it; the dense ones (``lineax.LU``, ``lineax.QR``,
    ``lineax.Cholesky``, which ``lineax.AutoLinearSolver`` picks for a matrix that is not
    banded) go through :meth:`as_matrix`, so use them for small systems only, and
    `AMGSolver` or a Krylov solver for large ones.

    Tags declare properties Lineax cannot see, unchecked, as for
    ``lineax.MatrixLinearOperator``: ``lineax.symmetric_tag``,
    ``lineax.positive_semidefinite_tag`` (needed by ``lineax.CG``), ... . For a square
    matrix the static pattern also decides the structural queries whatever the values:
    ``lineax.is_diagonal``, ``is_tridiagonal``, ``is_lower_triangular`` and
    ``is_upper_triangular`` hold when every stored entry is on the diagonal, within one of
    it, on or below it, or on or above it (so ``lineax.AutoLinearSolver`` picks the
    tridiagonal or triangular solver by itself).

    Args:
      A: the ``(m, n)`` matrix: a :class:`~jaxsolve.sparse.CsrMatrix` or anything
        :func:`~jaxsolve.sparse.as_csr` converts (``jax.experimental.sparse`` BCOO/BCSR,
        ``scipy.sparse``, dense).
      tags: a Lineax tag or a collection of tags.

    Raises:
      TypeError, ValueError: as :func:`~jaxsolve.sparse.as_csr` raises for ``A``;
        ValueError for a symmetric or definite tag on a non-square matrix.

    Examples:
      >>> import jax.numpy as jnp, lineax as lx
      >>> from jaxsolve import sparse
      >>> from jaxsolve.sparse.lineax import CsrLinearOperator
      >>> T = CsrLinearOperator(sparse.matrices.tridiagonal_matrix(4))
      >>> T.mv(jnp.ones(4))
      Array([1., 0., 0., 1.], dtype=float32)
      >>> lx.is_tridiagonal(T), lx.is_symmetric(T)  # symmetry is the values': only a tag says it
      (True, False)
      >>> lx.linear_solve(T, jnp.ones(4)).value.round(5)  # by lineax.Tridiagonal
      Array([2., 3., 3., 2.], dtype=float32)
    """

    matrix: CsrMatrix
    tags: frozenset[object] = eqx.field(static=True)

    def __init__(self, A: Any, tags: object | Iterable[object] = ()):
        self.matrix = as_csr(A)
        self.tags = _tag_set(tags)

    def mv(self, vector: Inexact[Array, " n"]) -> Inexact[Array, " m"]:
        return self.matrix.matvec(vector)

    def as_matrix(self) -> Inexact[Array, "m n"]:
        return self.matrix.todense()

    def transpose(self) -> CsrLinearOperator:
        if lx.is_symmetric(self):
            return self
        return CsrLinearOperator(self.matrix.transpose(), lx.transpose_tags(self.tags))

    def in_structure(self) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((self.matrix.shape[1],), self.matrix.dtype)

    def out_structure(self) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct((self.matrix.shape[0],), self.matrix.dtype)


def _tag_set(tags: object | Iterable[object]) -> frozenset[object]:
    """One tag or a collection of tags as a frozenset (as Lineax's operators take them)."""
    try:
        return frozenset(tags)  # type: ignore[arg-type]
    except TypeError:
        return frozenset([tags])


def _stored_diagonal(matrix: CsrMatrix, offset: int) -> Array:
    """``jnp.diagonal(A, offset)`` read from the stored entries (zero where none is stored)."""
    stored = np.flatnonzero(matrix.indices - matrix.row_ids == offset)
    position = np.minimum(matrix.row_ids[stored], matrix.indices[stored])
    length = min(matrix.shape[0] + min(offset, 0), matrix.shape[1] - max(offset, 0))
    return jnp.zeros(max(length, 0), matrix.dtype).at[position].add(matrix.values[stored])


def _declared_or_banded(operator: CsrLinearOperator, *, tags: set[object],
                        band: tuple[float, float] | None) -> bool:
    """Whether a tag declares a property, or the square pattern shows it.

    ``band`` is how far below and above the diagonal stored entries may lie for the
    property to hold (None for a property of the values, which no pattern shows).
    """
    if tags & operator.tags:
        return True
    matrix = operator.matrix
    if band is None or matrix.shape[0] != matrix.shape[1]:
        return False
    offsets = matrix.indices - matrix.row_ids  # column - row, static
    below, above = band
    return bool(-offsets.min(initial=0) <= below and offsets.max(initial=0) <= above)


@lx.linearise.register(CsrLinearOperator)
@lx.materialise.register(CsrLinearOperator)  # stored as it is: already in memory, sparse
def _(operator):
    return operator


@lx.diagonal.register(CsrLinearOperator)
def _(operator):
    return operator.matrix.diagonal()


@lx.tridiagonal.register(CsrLinearOperator)
def _(operator):
    return tuple(_stored_diagonal(operator.matrix, offset) for offset in (0, -1, 1))


@lx.conj.register(CsrLinearOperator)
def _(operator):
    return CsrLinearOperator(operator.matrix.with_values(operator.matrix.values.conj()),
                             operator.tags)


@lx.is_symmetric.register(CsrLinearOperator)
def _(operator):
    if lx.symmetric_tag in operator.tags or lx.is_diagonal(operator):
        return True
    # Definite tags imply symmetry for real matrices (for complex ones, Hermitian-ness).
    definite = {lx.positive_semidefinite_tag, lx.negative_semidefinite_tag} & operator.tags
    return bool(definite) and not jnp.issubdtype(operator.matrix.dtype, jnp.complexfloating)


# The other queries Lineax makes of an operator.
for _query, _tags, _band in (
    (lx.is_diagonal, {lx.diagonal_tag}, (0, 0)),
    (lx.is_tridiagonal, {lx.tridiagonal_tag, lx.diagonal_tag}, (1, 1)),
    (lx.is_lower_triangular, {lx.lower_triangular_tag}, (np.inf, 0)),
    (lx.is_upper_triangular, {lx.upper_triangular_tag}, (0, np.inf)),
    (lx.has_unit_diagonal, {lx.unit_diagonal_tag}, None),
    (lx.is_positive_semidefinite, {lx.positive_semidefinite_tag}, None),
    (lx.is_negative_semidefinite, {lx.negative_semidefinite_tag}, None),
):
    _query.register(CsrLinearOperator, functools.partial(_declared_or_banded, tags=_tags,
                                                         band=_band))
del _query, _tags, _band

# How each way a solve can end reads in Lineax's vocabulary (``lineax.RESULTS``).
_RESULTS = {
    FailureReason.NONE: lx.RESULTS.successful,
    FailureReason.MAX_ITERS: lx.RESULTS.max_steps_reached,
    FailureReason.NONFINITE_RESIDUAL: lx.RESULTS.singular,
    FailureReason.RESIDUAL_GROWTH: lx.RESULTS.breakdown,
    FailureReason.NONFINITE_INPUT: lx.RESULTS.nonfinite_input,
    FailureReason.NOT_POSITIVE_DEFINITE: lx.RESULTS.singular,
    FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE: lx.RESULTS.breakdown,
    FailureReason.BICGSTAB_BREAKDOWN: lx.RESULTS.breakdown,
    FailureReason.BICGSTAB_STAGNATION: lx.RESULTS.stagnation,
    FailureReason.GMRES_BREAKDOWN: lx.RESULTS.singular,
    FailureReason.NONFINITE_MATRIX: lx.RESULTS.nonfinite_input,
    FailureReason.ZERO_DIAGONAL: lx.RESULTS.breakdown,
}


def _lineax_result(info: SolveInfo) -> lx.RESULTS:
    result = lx.RESULTS.successful
    for reason, lineax_result in _RESULTS.items():
        result = lx.RESULTS.where(info.failure_reason == reason, lineax_result, result)
    return result


class AMGSolver(lx.AbstractLinearSolver[CsrLinearOperator]):
    """:func:`jaxsolve.sparse.solve` as a Lineax solver: AMG-preconditioned Krylov.

    ``lineax.linear_solve(operator, b, AMGSolver(config))`` solves with the engine of
    :func:`~jaxsolve.sparse.solve` — by default BiCGSTAB preconditioned by one V-cycle of
    classical AMG, to a residual ``1e-6`` times the initial one — configured in AmgX's
    vocabulary.  ``lineax.linear_solve`` compiles its arguments, so the values are traced:
    the AMG structure comes from ``solve``'s setup cache (the one most recently used on
    the pattern, else one built from the pattern alone) and the numeric setup runs
    inside the compiled program.

    **Derivatives** are Lineax's: its rule for ``linear_solve`` differentiates with respect
    to ``b`` and to the operator's values, solving again with this solver — with the
    transposed state (``Aᵀ``, its own hierarchy) in reverse mode unless the operator is
    tagged symmetric.  Each derivative solve runs to the configured tolerance, so set it
    tighter than the accuracy the gradients need.

    **Failures** are Lineax's too: ``solution.result`` is a ``lineax.RESULTS``
    (``max_steps_reached`` when ``max_iters`` ran out; ``breakdown``, ``stagnation``,
    ``singular`` or ``nonfinite_input`` for the other ways a solve fails), raised by
    ``linear_solve`` unless ``throw=False``.  ``solution.stats`` holds ``num_steps`` (the
    Krylov iterations) and ``residual`` (the final relative residual).

    ``options={"y0": x0}`` starts from ``x0``.  The operator must be square: a
    `CsrLinearOperator`; a ``lineax.MatrixLinearOperator`` whose state is initialised
    outside ``lineax.linear_solve`` (which traces its arguments, while the conversion to
    CSR needs the matrix's concrete nonzeros):
    ``linear_solve(operator, b, solver, state=solver.init(operator, {}))``; or a
    matrix-free operator (``lineax.FunctionLinearOperator``, or any other kind), whose
    matrix is recovered from its ``mv`` on ``coloring``'s pattern — or, with no
    ``coloring``, on the pattern traced from a concrete operator, which again means a state
    initialised outside ``linear_solve``.  Lineax differentiates through its ``mv``, so
    gradients reach the parameters of the function.

    Args:
      config: an AmgX configuration (dict, JSON text or file path) or a
        :class:`~jaxsolve.sparse.SolverConfig`; None for :func:`~jaxsolve.sparse.solve`'s
        defaults.
      near_nullspace: ``(n, k)`` near-null space for smoothed aggregation (e.g. rigid-body
        modes), used for the transposed operator too.
      coloring: for matrix-free operators, the structure of their ``mv`` from
        :func:`~jaxsolve.sparse.cache_coloring`, computed outside any transformation on an
        operator of the same structure; None to find it from each (concrete) operator.

    Raises:
      ValueError: for an invalid configuration; when solving, for a non-square operator,
        or a traced matrix-free operator without ``coloring``.
      TypeError: when solving, for a traced ``lineax.MatrixLinearOperator``.

    Examples:
      >>> import jax.numpy as jnp, lineax as lx
      >>> from jaxsolve import sparse
      >>> from jaxsolve.sparse.lineax import AMGSolver, CsrLinearOperator
      >>> A = CsrLinearOperator(sparse.matrices.convection_diffusion_matrix_2d(24, peclet=20.0))
      >>> solver = AMGSolver({"solver": "FGMRES", "max_iters": 3})
      >>> solution = lx.linear_solve(A, jnp.ones(24 * 24), solver, throw=False)
      >>> solution.result == lx.RESULTS.max_steps_reached, int(solution.stats["num_steps"])
      (Array(True, dtype=bool), 3)

      A matrix-free operator, differentiated with respect to its coefficient:

      >>> import jax
      >>> def tridiagonal(d):  # tridiag(-1, d, -1) as a function
      ...     return lambda x: d * x - jnp.roll(x, 1).at[0].set(0) - jnp.roll(x, -1).at[-1].set(0)
      >>> structure = jax.ShapeDtypeStruct((32,), jnp.float32)
      >>> solver = AMGSolver(coloring=sparse.cache_coloring(tridiagonal(2.0), 32))
      >>> def loss(d):
      ...     operator = lx.FunctionLinearOperator(tridiagonal(d), structure,
      ...                                          lx.positive_semidefinite_tag)
      ...     return lx.linear_solve(operator, jnp.ones(32), solver).value.sum()
      >>> bool(jax.jit(jax.grad(loss))(3.0) < 0)  # a stronger diagonal, a smaller solution
      True
    """

    config: SolverConfig = eqx.field(static=True)
    near_nullspace: Array | None
    coloring: ColoringInfo | None = eqx.field(static=True)

    def __init__(self, config: Any = None, near_nullspace: ArrayLike | None = None, *,
                 coloring: ColoringInfo | None = None):
        self.config = parse_amgx_config(config)
        self.near_nullspace = None if near_nullspace is None else jnp.asarray(near_nullspace)
        self.coloring = _checked_coloring(coloring, "AMGSolver")

    def init(self, operator: lx.AbstractLinearOperator, options: dict[str, Any]
             ) -> CsrLinearOperator:
        """The state is the operator as a `CsrLinearOperator` (a matrix-free one's matrix
        recovered here); the setup runs in `compute`."""
        del options
        operator = _csr_operator(operator, "AMGSolver", self.coloring)
        if operator.matrix.shape[0] != operator.matrix.shape[1]:
            raise ValueError("AMGSolver: the operator must be square, got shape"
                             f" {operator.matrix.shape}; for least squares use"
                             " lineax.Normal(lineax.CG(...)) or lineax.LSMR.")
        return operator

    def compute(self, state: CsrLinearOperator, vector: Inexact[Array, " n"],
                options: dict[str, Any]
                ) -> tuple[Inexact[Array, " n"], lx.RESULTS, dict[str, Array]]:
        # check=False: failures come back as a result, the same eagerly and under jit.
        x, info = solve(state.matrix, vector, options.get("y0"), self.config,
                        near_nullspace=self.near_nullspace, check=False)
        return x, _lineax_result(info), {"num_steps": info.iterations,
                                         "residual": info.residual}

    def transpose(self, state: CsrLinearOperator, options: dict[str, Any]
                  ) -> tuple[CsrLinearOperator, dict[str, Any]]:
        del options  # an initial guess for A is none for Aᵀ
        return state.transpose(), {}

    def conj(self, state: CsrLinearOperator, options: dict[str, Any]
             ) -> tuple[CsrLinearOperator, dict[str, Any]]:
        del options
        return lx.conj(state), {}

    def assume_full_rank(self) -> bool:
        return True  # AMG and its Krylov methods need a nonsingular matrix


def _checked_coloring(coloring: Any, caller: str) -> ColoringInfo | None:
    if coloring is not None and not isinstance(coloring, ColoringInfo):
        raise TypeError(f"{caller}: coloring must be a ColoringInfo from"
                        f" jaxsolve.sparse.cache_coloring, got {type(coloring).__name__}.")
    return coloring


def _csr_operator(operator: lx.AbstractLinearOperator, caller: str,
                  coloring: ColoringInfo | None) -> CsrLinearOperator:
    """``operator`` as a `CsrLinearOperator`: itself, a concrete matrix's nonzeros, or a
    matrix-free operator's matrix (on ``coloring``'s pattern, or its own traced one)."""
    if isinstance(operator, CsrLinearOperator):
        return operator
    if isinstance(operator, lx.MatrixLinearOperator):
        try:
            np.asarray(operator.matrix)
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            raise TypeError(
                f"{caller}: a lineax.MatrixLinearOperator is converted to CSR from the"
                " nonzeros of its matrix, so the matrix must be concrete, but it is traced"
                " here (lineax.linear_solve traces its arguments, as jit, vmap and grad"
                " do). Pass jaxsolve.sparse.lineax.CsrLinearOperator(matrix) instead, built"
                " outside any transformation, so that only its values are traced; or"
                " initialise AMGSolver's state outside: lineax.linear_solve(operator, b,"
                " solver, state=solver.init(operator, {}))."
            ) from None
        return CsrLinearOperator(operator.matrix, operator.tags)
    if not isinstance(operator, lx.AbstractLinearOperator):
        raise TypeError(f"{caller}: expected a Lineax operator, got {type(operator).__name__}.")
    return CsrLinearOperator(_matrix_free_matrix(operator, caller, coloring),
                             [tag for holds, tag in _DEFINITENESS_TAGS if holds(operator)])


def _matrix_free_matrix(operator: lx.AbstractLinearOperator, caller: str,
                        coloring: ColoringInfo | None) -> CsrMatrix:
    """The matrix of a matrix-free Lineax operator, recovered from its ``mv``."""
    n, m = operator.in_size(), operator.out_size()
    structure = operator.in_structure()
    if n != m or not isinstance(structure, jax.ShapeDtypeStruct) or structure.ndim != 1:
        raise ValueError(f"{caller}: a matrix-free operator must map vectors to vectors of"
                         f" the same size, got {structure} -> {operator.out_structure()}.")
    traced = any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(operator))
    if coloring is None and traced:
        raise ValueError(
            f"{caller}: the matrix-free operator is traced (lineax.linear_solve traces its"
            " arguments, as jit, vmap and grad do), so its sparsity cannot be traced here."
            f" Compute its structure outside with info = jaxsolve.sparse.cache_coloring(fn,"
            f" {n}) on an operator of the same structure, and pass {caller}(...,"
            " coloring=info).")
    mv = operator.mv if coloring is None else _matrix_free.with_cache(operator.mv,
                                                                      coloring=coloring)
    return _matrix_free.operator_matrix(caller, mv, n, structure.dtype)


_DEFINITENESS_TAGS = ((lx.is_symmetric, lx.symmetric_tag),
                      (lx.is_positive_semidefinite, lx.positive_semidefinite_tag),
                      (lx.is_negative_semidefinite, lx.negative_semidefinite_tag))


def make_lineax_preconditioner(
    operator: Any,
    config: Any = None,
    *,
    tags: object | Iterable[object] | None = None,
    near_nullspace: ArrayLike | None = None,
    coloring: ColoringInfo | None = None,
    comm: Any = None,
    nglobal: int | None = None,
    partition_info: tuple[int, int] | None = None,
    save_stats_file: Any = None,
    **kwargs: Any,
) -> lx.FunctionLinearOperator:
    """An AMG preconditioner ``M⁻¹ ≈ A⁻¹`` as a Lineax operator: one V-cycle by default.

    The operator applies :func:`~jaxsolve.sparse.make_preconditioner`'s
    :class:`~jaxsolve.sparse.Preconditioner`; pass it as
    ``options={"preconditioner": M}`` to ``lineax.CG``, ``lineax.BiCGStab`` or
    ``lineax.GMRES``.  Like every Lineax operator it is a pytree whose arrays are leaves, so
    ``M`` can be an argument of an ``equinox.filter_jit``-compiled function.

    **Tags.**  Lineax trusts tags: ``lineax.CG`` requires a positive semidefinite
    preconditioner, and transposing ``M`` (reverse-mode derivatives of a solve) is free
    only when ``M`` is tagged symmetric.  Given a Lineax operator, ``M`` inherits its
    symmetric and definite tags (as JAX-AMG's ``make_lineax_preconditioner`` does) when
    the cycle is symmetric (:attr:`~jaxsolve.sparse.Preconditioner.is_symmetric`, e.g.
    with as many pre- as post-sweeps), since a symmetric cycle of a symmetric positive
    definite ``A`` is symmetric positive definite; otherwise it gets none.  Structural
    tags (diagonal, triangular, ...) describe ``A``, not ``M⁻¹``, and never carry over.
    A matrix that is not a Lineax operator gives an untagged ``M``.  ``tags=`` overrides
    all of this.  (Lineax transposes an ``M`` not tagged symmetric by
    ``jax.linear_transpose``, which the native CSR product of the cycle does not support:
    to differentiate a nonsymmetric solve in reverse mode, use `AMGSolver`.)

    A matrix-free ``A`` (any other Lineax operator, or a function ``x ↦ A x``) is
    materialized from its ``mv`` (see the module documentation); the tags of a Lineax one
    carry over as above, a function's only through ``tags=``.

    The signature is JAX-AMG's (``operator`` first, its MPI and ``save_stats_file``
    keywords, AmgX keys as keyword overrides).

    Args:
      operator: ``A``, the ``(n, n)`` matrix: a `CsrLinearOperator`, a
        ``lineax.MatrixLinearOperator`` with a concrete matrix, a matrix-free Lineax
        operator, or any matrix or function :func:`~jaxsolve.sparse.make_preconditioner`
        takes.
      config: the preconditioner's AmgX configuration (e.g. ``{"solver": "AMG",
        "cycle": "W"}``), or a solver configuration whose preconditioner is taken; None
        for one V-cycle of classical AMG.
      tags: the tags of ``M``, instead of the inherited ones.
      near_nullspace: ``(n, k)`` near-null space for smoothed aggregation.
      coloring: for a matrix-free ``A``, its structure from
        :func:`~jaxsolve.sparse.cache_coloring` (needed when ``A`` is traced).
      comm, nglobal, partition_info, save_stats_file: as for
        :func:`~jaxsolve.sparse.make_preconditioner`, which then applies ``M`` by a
        :func:`~jaxsolve.sparse.solve` per application (``A`` is this rank's rows with
        MPI arguments; ``M`` acts on this rank's part of ``r``).
      **kwargs: AmgX keys of the preconditioner's scope, overriding ``config``'s.

    Returns:
      A ``lineax.FunctionLinearOperator`` ``r ↦ M⁻¹ r`` on vectors of shape ``(n,)`` and
      the matrix's dtype.

    Raises:
      TypeError: for a traced ``lineax.MatrixLinearOperator``, or a ``coloring`` that is
        not a ``ColoringInfo``.
      ValueError: as :func:`~jaxsolve.sparse.make_preconditioner` raises, and for a traced
        matrix-free operator without ``coloring``.

    Examples:
      >>> import jax.numpy as jnp, lineax as lx
      >>> from jaxsolve import sparse
      >>> from jaxsolve.sparse.lineax import CsrLinearOperator, make_lineax_preconditioner
      >>> A = CsrLinearOperator(sparse.matrices.convection_diffusion_matrix_2d(24, peclet=20.0))
      >>> M = make_lineax_preconditioner(A)
      >>> M.tags  # A is not symmetric, and neither is M
      frozenset()
      >>> gmres = lx.GMRES(rtol=1e-5, atol=0.0, restart=10)
      >>> restarts = lambda options: int(lx.linear_solve(
      ...     A, jnp.ones(24 * 24), gmres, options=options).stats["num_steps"])
      >>> restarts({"preconditioner": M}) < restarts({})  # restart cycles of 10 steps
      True
    """
    A = operator
    coloring = _checked_coloring(coloring, "make_lineax_preconditioner")
    options = dict(near_nullspace=near_nullspace, comm=comm, nglobal=nglobal,
                   partition_info=partition_info, save_stats_file=save_stats_file, **kwargs)
    if isinstance(A, lx.AbstractLinearOperator):
        matrix = _csr_operator(A, "make_lineax_preconditioner", coloring).matrix
        preconditioner = make_preconditioner(matrix, config, **options)
        symmetric = getattr(preconditioner, "is_symmetric", False)
        if tags is None and symmetric:
            tags = [tag for holds, tag in _DEFINITENESS_TAGS if holds(A)]
    else:
        if coloring is not None and _matrix_free.is_operator(A):
            A = _matrix_free.with_cache(A, coloring=coloring)
        matrix = A
        preconditioner = make_preconditioner(A, config, **options)
    if isinstance(preconditioner, Preconditioner):
        structure = jax.ShapeDtypeStruct((preconditioner.matrix.n_rows,),
                                         preconditioner.matrix.values.dtype)
    elif getattr(matrix, "shape", None) is None:
        raise ValueError("make_lineax_preconditioner: a matrix-free function has no size to"
                         " give M; pass a Lineax operator, or with_cache(A, coloring=...).")
    else:  # applied by a solve: on the rows of A (this rank's with MPI arguments)
        structure = jax.ShapeDtypeStruct((matrix.shape[0],), matrix.dtype)
    return lx.FunctionLinearOperator(preconditioner, structure, () if tags is None else tags)
