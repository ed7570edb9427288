"""Singular systems: the minimum-norm solution ``x = A⁺ b`` from ``A``'s null spaces.

A pure-Neumann or periodic Poisson matrix annihilates the constant: ``A x = b`` then has
a solution only when ``b`` is orthogonal to ``null(Aᴴ)``, and infinitely many
(``x + N c``) when it has one.  Given orthonormal bases ``N`` of ``null(A)`` and ``W``
of ``null(Aᴴ)``, with the projections

* ``P_W b = b − W Wᴴ b`` onto ``range(A) = null(Aᴴ)^⊥``, and
* ``P_N x = x − N Nᴴ x`` onto ``range(Aᴴ) = null(A)^⊥``,

the pseudo-inverse is ``A⁺ = P_N A⁻¹ P_W``, where ``A⁻¹`` means *any* solution of the
consistent system: the Krylov method solves ``A x̃ = P_W b`` (which it can, since the
right-hand side lies in the range) and ``x = P_N x̃`` is the solution of least norm among
the least-squares solutions of the original one.  The part of ``b`` that had to be
dropped, ``‖W Wᴴ b‖ / ‖b‖``, is reported as ``info.rhs_inconsistency``.

**Derivatives** come from the same rule as regular solves (``jaxsolve.autodiff``), with
``A⁺`` and ``(A⁺)ᵀ = P_Wᵀ A⁻ᵀ P_Nᵀ`` as the solve services: ``ẋ = A⁺ (ḃ − Ȧ x)``,
``b̄ = (A⁺)ᵀ x̄`` and ``Ā = −b̄ xᵀ`` on ``A``'s pattern.  This is the derivative of
``A⁺ b`` along matrices that keep the null spaces (``Ȧ N = 0``, ``Wᴴ Ȧ = 0``, as any
change of a Laplacian's edge weights does); the general derivative of ``A⁺`` adds terms
that rotate the null spaces, which are normal to those matrices, so ``Ā`` is the full
gradient projected onto them.  The bases themselves are taken as constants.

**The coarse levels** of the AMG hierarchy inherit the singularity: the coarsest matrix
``Pᴴ A P`` is singular on ``{c : P c ∈ null(A)}``.  Its dense inverse is then a
pseudo-inverse that drops as many singular values as ``N`` has columns
(:class:`AMGConfig`'s ``coarse_null_dimension``), where an LU factorization would divide
by rounding errors.  Without ``nullspace=`` the numeric setup still finds the commonest
singular systems, those whose rows sum to zero (``A 1 = 0``: pure-Neumann and periodic
problems, graph Laplacians), and inverts their coarsest matrix by a pseudo-inverse too, so
that a Krylov method converges on a consistent ``b`` (to some solution, not the
minimum-norm one, which needs ``nullspace=``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ._config import SolverConfig
from ._csr import CsrMatrix
from ._setup import check_finite, is_concrete
from ._status import FailureReason, SolveInfo, Status

Service = Callable[[tuple, jax.Array], tuple[jax.Array, SolveInfo]]


class NullSpaces(NamedTuple):
    """Orthonormal bases of ``null(A)`` (``right``, ``(n, k)``) and ``null(Aᴴ)`` (``left``).

    A pytree: it travels inside the solve's operator, so bases computed from traced
    arguments reach the solve services as arguments, not as closed-over tracers.
    """

    right: jax.Array
    left: jax.Array


def null_spaces(caller: str, matrix: CsrMatrix, nullspace: Any, transpose_nullspace: Any,
                check: bool) -> NullSpaces | None:
    """Checked, orthonormalized null spaces of ``matrix``, or None if neither is given.

    ``nullspace`` spans ``null(A)`` and ``transpose_nullspace`` spans ``null(Aᵀ)``
    (JAX-AMG's meaning); either defaults to the other, which is exact for symmetric (and
    for normal) matrices.  The bases are always checked to be finite when concrete; with
    ``check`` and concrete values too, to have independent columns and to be annihilated by
    ``A`` (``nullspace``) and ``Aᵀ`` (``transpose_nullspace``).
    """
    if nullspace is None and transpose_nullspace is None:
        return None
    n, dtype = matrix.shape[0], matrix.values.dtype
    given = {name: _checked_basis(caller, name, basis, n, dtype)
             for name, basis in (("nullspace", nullspace),
                                 ("transpose_nullspace", transpose_nullspace))
             if basis is not None}
    # null(Aᴴ) = conj(null(Aᵀ)); a basis given for one side only serves for both.
    left = jnp.conj(given["transpose_nullspace"]) if "transpose_nullspace" in given else None
    right = given["nullspace"] if "nullspace" in given else left
    left = right if left is None else left
    spaces = NullSpaces(_orthonormal(right), _orthonormal(left))
    if check and is_concrete(matrix.values) and all(map(is_concrete, given.values())):
        for name, basis in given.items():
            _check_rank(caller, name, basis)
        hint = ("" if len(given) == 2 else
                " A nonsymmetric A needs both nullspace= and transpose_nullspace=.")
        with jax.ensure_compile_time_eval():  # eagerly, also while a caller's jit traces
            right, left = _orthonormal(right), _orthonormal(left)
            _check_annihilated(caller, "A", matrix, matrix.matvec(right),
                               "nullspace" if "nullspace" in given else "transpose_nullspace",
                               hint)
            _check_annihilated(caller, "Aᵀ", matrix, matrix.rmatvec(jnp.conj(left)),
                               "transpose_nullspace" if "transpose_nullspace" in given
                               else "nullspace", hint)
    return spaces


def singular_config(config: SolverConfig, spaces: NullSpaces) -> SolverConfig:
    """``config`` with its AMG hierarchy's coarsest level solved by a pseudo-inverse."""
    k = max(spaces.right.shape[1], spaces.left.shape[1])
    if config.amg is not None:
        return dataclasses.replace(
            config, amg=dataclasses.replace(config.amg, coarse_null_dimension=k))
    if config.preconditioner is not None:
        return dataclasses.replace(config,
                                   preconditioner=singular_config(config.preconditioner, spaces))
    return config


def pseudo_inverse_services(
    spaces: NullSpaces, operator: tuple, solve: Service, transpose_solve: Service | None
) -> tuple[tuple, Service, Service | None]:
    """The operator with ``spaces`` appended, and services for ``A⁺`` and ``(A⁺)ᵀ``.

    ``solve`` and ``transpose_solve`` solve consistent systems with ``A`` and ``Aᵀ``
    (any solution); the returned services project their right-hand sides onto the range
    and their solutions onto the orthogonal complement of the null space.
    """

    def pseudo_solve(operator: tuple, rhs: jax.Array) -> tuple[jax.Array, SolveInfo]:
        spaces = operator[-1]
        x, info = solve(operator[:-1], _remove(spaces.left, rhs))
        return _remove(spaces.right, x), info

    def pseudo_transpose_solve(operator: tuple,
                               rhs: jax.Array) -> tuple[jax.Array, SolveInfo]:
        # (A⁺)ᵀ = P_Wᵀ A⁻ᵀ P_Nᵀ, and the transpose of the projection x − Q Qᴴ x is the
        # projection with the basis conj(Q).
        spaces = operator[-1]
        y, info = transpose_solve(operator[:-1], _remove(jnp.conj(spaces.right), rhs))
        return _remove(jnp.conj(spaces.left), y), info

    return ((*operator, spaces), pseudo_solve,
            None if transpose_solve is None else pseudo_transpose_solve)


def minimum_norm(spaces: NullSpaces, x: jax.Array, b: jax.Array,
                 info: SolveInfo) -> tuple[jax.Array, SolveInfo]:
    """``x`` projected onto ``null(A)^⊥``; ``info`` with ``b``'s inconsistency.

    Bases that are not finite (traced NaN, which :func:`null_spaces` cannot see) end the
    solve as ``FAILED`` with ``NONFINITE_INPUT``.
    """
    x = _remove(spaces.right, x)
    b = jax.lax.stop_gradient(b)
    b_norm = jnp.linalg.norm(b, axis=0)
    dropped = jnp.linalg.norm(jnp.conj(spaces.left).T @ b, axis=0)
    inconsistency = jnp.where(b_norm > 0, dropped / jnp.where(b_norm > 0, b_norm, 1), 0)
    finite = jnp.all(jnp.isfinite(spaces.right)) & jnp.all(jnp.isfinite(spaces.left))
    info = dataclasses.replace(
        info,
        rhs_inconsistency=jnp.broadcast_to(inconsistency, info.residual.shape).astype(
            info.residual.dtype),
        status=jnp.where(finite, info.status, jnp.int32(Status.FAILED)),
        failure_reason=jnp.where(finite, info.failure_reason,
                                 jnp.int32(FailureReason.NONFINITE_INPUT)),
    )
    return x, info


def _remove(basis: jax.Array, x: jax.Array) -> jax.Array:
    """``x − Q Qᴴ x``: ``x`` (``(n,)`` or ``(n, c)``) without its part in ``span(Q)``."""
    return x - basis @ (jnp.conj(basis).T @ x)


def _orthonormal(basis: jax.Array) -> jax.Array:
    """An orthonormal basis of ``span(basis)`` (reduced QR), taken as a constant."""
    q, _ = jnp.linalg.qr(jax.lax.stop_gradient(basis))
    return q


def _checked_basis(caller: str, name: str, basis: Any, n: int, dtype: Any) -> jax.Array:
    """``basis`` as an ``(n, k)`` array of ``dtype``; raises for bad shapes, dtypes, NaN."""
    basis = jnp.asarray(basis)
    if not jnp.issubdtype(basis.dtype, jnp.inexact):
        raise TypeError(f"{caller}: {name} must be a floating-point array (e.g."
                        f" jnp.ones(({n}, 1), {jnp.dtype(dtype).name})), got dtype"
                        f" {basis.dtype}.")
    if jnp.issubdtype(basis.dtype, jnp.complexfloating) and not jnp.issubdtype(
            dtype, jnp.complexfloating):
        raise TypeError(f"{caller}: {name} is complex ({basis.dtype}) but A is real"
                        f" ({jnp.dtype(dtype).name}); a real matrix has a real null-space basis.")
    if basis.ndim == 1:
        basis = basis[:, None]
    if basis.ndim != 2 or basis.shape[0] != n or not 1 <= basis.shape[1] < n:
        raise ValueError(f"{caller}: {name} must have shape ({n},) or ({n}, k) with"
                         f" 1 <= k < {n} (a basis of the null space, one vector per column),"
                         f" got {basis.shape}.")
    basis = basis.astype(dtype)
    check_finite(caller, {name: basis})
    return basis


def _check_rank(caller: str, name: str, basis: jax.Array) -> None:
    """Raises unless the columns of the concrete ``basis`` are linearly independent."""
    with jax.ensure_compile_time_eval():
        diagonal = jnp.abs(jnp.diagonal(jnp.linalg.qr(basis, mode="r")))
        tolerance = float(jnp.sqrt(jnp.finfo(basis.dtype).eps))
        dependent = float(jnp.min(diagonal)) <= tolerance * float(jnp.max(diagonal))
    if dependent:
        raise ValueError(f"{caller}: the columns of {name} are linearly dependent; pass a"
                         " basis of the null space (independent columns).")


def _check_annihilated(caller: str, operator_name: str, matrix: CsrMatrix,
                       product: jax.Array, name: str, hint: str) -> None:
    """Raises unless ``‖A Q‖ ≤ √ε ‖A‖``, ``product = A Q`` for an orthonormal ``Q``."""
    with jax.ensure_compile_time_eval():
        tolerance = float(jnp.sqrt(jnp.finfo(matrix.values.dtype).eps))
        scale = float(jnp.linalg.norm(matrix.values))
        residual = float(jnp.linalg.norm(product))
    if residual > tolerance * scale:
        raise ValueError(
            f"{caller}: {name} is not a null space of {operator_name}:"
            f" ‖{operator_name} N‖ / ‖{operator_name}‖ = {residual / scale:.1e} for its"
            " orthonormalized columns N. nullspace= is the exact null space of a singular A"
            " (e.g. the constant for a periodic or pure-Neumann Poisson matrix); for the"
            " near-null space of a regular A that AMG should preserve, pass"
            f" near_nullspace=.{hint}")
