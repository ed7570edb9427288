"""Implicit differentiation of ``x = A⁻¹ b`` on top of solve services."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from ._dense import dense_matvec, hermitian_part
from ._services import SolveService, solve_on_columns

Matvec = Callable[[Any, jax.Array], jax.Array]
"""``matvec(operator, x) -> A x`` for ``x`` of shape ``(n,)`` or ``(n, k)``."""


@dataclasses.dataclass(frozen=True)
class LinearSystem:
    """The services of one linear system ``A x = b``, as the rules use them.

    Attributes:
        matvec: ``matvec(operator, x) -> A x``, linear in each argument and
            differentiable by JAX: JAX forms ``Ȧ x`` with it and transposes it
            into the cotangent of the operator's leaves.
        solve: ``solve(operator, rhs) -> A⁻¹ rhs``, wrapped by
            :func:`solve_on_columns`.
        transpose_solve: ``transpose_solve(operator, rhs) -> A⁻ᵀ rhs`` (plain
            transpose), wrapped the same way, or ``None`` when unknown.
        symmetric: whether ``A = Aᴴ``; then ``A⁻ᵀ r = conj(A⁻¹ conj(r))``
            and tangents of the operator are projected with ``symmetrize``.
        symmetrize: projects an operator (or a tangent of it) onto Hermitian
            operators; used only when ``symmetric``.
        has_aux: whether the services return ``(x, aux)``; the primal solve's
            ``aux`` is returned beside ``x``, the derivative solves' dropped.
    """

    matvec: Matvec
    solve: SolveService
    transpose_solve: SolveService | None
    symmetric: bool
    symmetrize: Callable[[Any], Any] | None
    has_aux: bool = False

    def project(self, operator: Any) -> Any:
        """The Hermitian part of ``operator`` if the system is symmetric."""
        return self.symmetrize(operator) if self.symmetric else operator

    def solution(self, operator: Any, rhs: jax.Array) -> jax.Array:
        """``A⁻¹ rhs`` alone: a derivative solve's ``aux`` is dropped."""
        out = self.solve(operator, rhs)
        return out[0] if self.has_aux else out

    def solve_transposed(self, operator: Any, rhs: jax.Array) -> jax.Array:
        """``A⁻ᵀ rhs``: the transpose JAX's reverse mode needs (not ``A⁻ᴴ``)."""
        if self.symmetric:
            # A = Aᴴ gives Aᵀ = conj(A), and Aᵀ y = r  ⇔  A conj(y) = conj(r).
            return jnp.conj(self.solution(operator, jnp.conj(rhs)))
        out = self.transpose_solve(operator, rhs)
        return out[0] if self.has_aux else out

    def apply_inverse(self, operator: Any, rhs: jax.Array) -> jax.Array:
        """``A⁻¹ rhs`` for a tangent ``rhs``, through ``custom_linear_solve``.

        JAX transposes the result with :meth:`solve_transposed` (reverse mode)
        and differentiates it with respect to the operator by forming
        ``-A⁻¹ Ȧ A⁻¹ rhs`` with one more solve (higher orders); the service
        itself is never differentiated.
        """
        transposable = self.symmetric or self.transpose_solve is not None
        return jax.lax.custom_linear_solve(
            functools.partial(self.matvec, self.project(operator)),
            rhs,
            solve=lambda _, r: self.solution(operator, r),
            transpose_solve=(
                (lambda _, r: self.solve_transposed(operator, r))
                if transposable
                else None
            ),
            # custom_linear_solve's `symmetric` means matvec == its transpose.
            symmetric=self.symmetric and not jnp.iscomplexobj(rhs),
        )


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def solve_implicit(system: LinearSystem, operator: Any, b: jax.Array) -> Any:
    """``A⁻¹ b`` with forward-mode derivatives ``ẋ = A⁻¹ (ḃ - Ȧ x)``.

    Returns ``x``, or ``(x, aux)`` when ``system.has_aux`` (``aux`` has zero
    derivatives).
    """
    return system.solve(operator, b)


@solve_implicit.defjvp
def _solve_implicit_jvp(system, primals, tangents):
    operator, b = primals
    operator_dot, b_dot = tangents
    out = solve_implicit(system, operator, b)
    x = out[0] if system.has_aux else out
    rhs = b_dot - system.matvec(system.project(operator_dot), x)
    x_dot = system.apply_inverse(operator, rhs)
    if system.has_aux:
        return out, (x_dot, jax.tree.map(_zero_tangent, out[1]))
    return out, x_dot


def _zero_tangent(leaf: jax.Array) -> jax.Array:
    """The zero tangent of a leaf: ``float0`` zeros for integer and boolean leaves."""
    if jnp.issubdtype(leaf.dtype, jnp.inexact):
        return jnp.zeros_like(leaf)
    return np.zeros(leaf.shape, jax.dtypes.float0)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _solve_adjoint(system: LinearSystem, operator: Any, b: jax.Array) -> Any:
    return system.solve(operator, b)


def _solve_adjoint_fwd(system, operator, b):
    out = system.solve(operator, b)
    return out, (operator, out[0] if system.has_aux else out)


def _solve_adjoint_bwd(system, residuals, out_bar):
    x_bar = out_bar[0] if system.has_aux else out_bar  # aux has no derivative
    operator, x = residuals
    b_bar = system.solve_transposed(operator, x_bar)
    _, pullback = jax.vjp(lambda op: system.matvec(system.project(op), x), operator)
    (operator_bar,) = pullback(-b_bar)
    return operator_bar, b_bar


_solve_adjoint.defvjp(_solve_adjoint_fwd, _solve_adjoint_bwd)


def linear_solve(
    operator: Any,
    b: jax.Array,
    *,
    solve: SolveService,
    transpose_solve: SolveService | None = None,
    matvec: Matvec | None = None,
    symmetric: bool = False,
    symmetrize: Callable[[Any], Any] | None = None,
    mode: Literal["jvp", "adjoint"] = "jvp",
    has_aux: bool = False,
) -> Any:
    r"""Solves ``A x = b`` with a solver service; differentiates implicitly.

    The solve is done by ``solve``, a black box.  Derivatives never go through
    its iterations: they come from the implicit function theorem applied to
    ``A x = b``,

    .. math::

        \dot x = A^{-1} (\dot b - \dot A\, x), \qquad
        \bar b = A^{-T} \bar x, \qquad
        \bar A = -\bar b \otimes x ,

    so each derivative is exact to the solver's tolerance and costs one more
    solve: ``solve`` for a JVP, ``transpose_solve`` (``A⁻ᵀ``) for a VJP.

    * ``mode="jvp"`` (default): the primal is a :func:`jax.custom_jvp` whose
      tangent is expressed with :func:`jax.lax.custom_linear_solve`, from which
      JAX derives reverse mode (one transposed solve), higher orders and
      ``vmap``.
    * ``mode="adjoint"``: a reverse-only :func:`jax.custom_vjp` with the same
      rule and nothing else: one transposed solve per VJP.  Forward mode and
      second derivatives raise a ``TypeError``.

    **The cotangent of A** has the caller's representation, because JAX
    obtains it by transposing ``Ȧ ↦ matvec(Ȧ, x)``: a dense ``(n, n)``
    matrix ``-b̄ xᵀ`` for a dense operator, and for values on a sparse pattern
    (:class:`SparsePattern`) the vector ``-b̄ᵢ xⱼ`` over the stored ``(i, j)``,
    never a dense ``N×N`` array.

    **Symmetric systems** (``symmetric=True``: ``A = Aᴴ``, i.e. real symmetric
    or complex Hermitian, as for any Cholesky or CG solve) skip the transpose
    solve (``A⁻ᵀ r = conj(A⁻¹ conj(r))``), and derivatives treat ``Ȧ`` as
    Hermitian: every operator tangent goes through ``symmetrize`` first, so
    the cotangent of ``A`` is Hermitian as well.  Only the derivative of the
    restriction of the solve to Hermitian matrices is defined this way, so to
    compare with finite differences or with ``jnp.linalg.solve``, feed
    Hermitian tangents, e.g. differentiate ``M ↦ linear_solve((M + Mᴴ)/2, b)``;
    forward and reverse modes then agree.  Complex *symmetric* (``Aᵀ = A``,
    not Hermitian) systems use ``symmetric=False`` with
    ``transpose_solve=solve``.

    **Batching.** ``b`` may have several columns, solved by one call of the
    service.  Under ``jax.vmap`` over right-hand sides only, the batch is
    folded into extra columns: one service call per direction for any batch
    size.  Under ``jax.vmap`` over a stack of systems, the service itself is
    vmapped, so the service author decides how stacks are batched.

    Args:
        operator: ``A``, any pytree of arrays whose inexact leaves are
            differentiated: a dense ``(n, n)`` matrix, or the values of a
            sparse matrix whose static pattern lives in ``matvec``, or a
            :class:`Factorization` whose kept factor the services reuse.
        b: right-hand side(s), shape ``(n,)`` or ``(n, k)``, the dtype of
            ``A x``.
        solve: the service ``solve(operator, rhs) -> A⁻¹ rhs`` for ``rhs`` of
            shape ``(n, k)``.  It receives the primal operator, so it may build
            or reuse a preconditioner or factor.  Never differentiated.  Data
            that depends on differentiated values must reach it through
            ``operator``, not through a closure (which would leak a tracer).
        transpose_solve: ``transpose_solve(operator, rhs) -> A⁻ᵀ rhs``, the
            plain transpose (LAPACK ``trans='T'``, not ``'C'``).  Needed for
            reverse mode of a non-symmetric system (without it, forward mode
            still works and ``jax.grad`` raises JAX's ``TypeError``); must be
            ``None`` when ``symmetric``.
        matvec: ``matvec(operator, x) -> A x`` for ``x`` of shape ``(n,)`` or
            ``(n, k)``, differentiable by JAX and linear both in ``x`` and in
            the operator's leaves (``A = D + u vᵀ`` from leaves ``D, u, v`` is
            not: pass ``u vᵀ`` as one leaf).  Defaults to ``operator @ x``
            for a dense ``(n, n)`` array.
        symmetric: whether ``A = Aᴴ``.
        symmetrize: maps an operator to its Hermitian part, in the operator's
            own representation.  Defaults to ``(A + Aᴴ) / 2`` for a dense
            array; required for other operators when ``symmetric``.
        mode: ``"jvp"`` (all orders, both modes) or ``"adjoint"`` (first-order
            reverse mode only).
        has_aux: the services return ``(x, aux)``, ``aux`` a pytree of arrays
            with one entry per column of ``rhs`` along a leading axis (an
            iteration count, a convergence status, ...).  The primal solve's
            ``aux`` is returned, with zero derivatives; the derivative
            solves' ``aux`` is dropped.

    Returns:
        ``x = A⁻¹ b``, with the shape and dtype of ``b``; with ``has_aux``,
        ``(x, aux)``, ``aux``'s leaves with a leading axis of ``b``'s columns
        when ``b`` is ``(n, k)`` and without it when ``b`` is ``(n,)``.

    Raises:
        ValueError: if shapes do not match, ``mode`` is unknown, or the
            services given do not fit ``symmetric`` and ``mode``.
        TypeError: if dtypes do not match or ``matvec`` is missing for a
            non-dense operator.

    Examples:
        A dense nonsymmetric system with reference services from ``jnp``:

        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[3., 1.], [0., 2.]])
        >>> b = jnp.array([1., 2.])
        >>> solve = lambda a, rhs: jnp.linalg.solve(a, rhs)
        >>> transpose_solve = lambda a, rhs: jnp.linalg.solve(a.T, rhs)
        >>> def loss(a, b):
        ...     x = autodiff.linear_solve(
        ...         a, b, solve=solve, transpose_solve=transpose_solve)
        ...     return jnp.sum(x)
        >>> b_bar = jax.grad(loss, argnums=1)(a, b)
        >>> jnp.allclose(b_bar, jnp.linalg.solve(a.T, jnp.ones(2)))
        Array(True, dtype=bool)

        The same matrix as values on a sparse pattern: the gradient with
        respect to the values has one entry per stored value.

        >>> import numpy as np
        >>> pattern = autodiff.SparsePattern(
        ...     rows=np.array([0, 0, 1]), cols=np.array([0, 1, 1]), shape=(2, 2))
        >>> values = jnp.array([3., 1., 2.])
        >>> def sparse_loss(values):
        ...     x = autodiff.linear_solve(
        ...         values, b, matvec=pattern.matvec,
        ...         solve=lambda v, rhs: solve(pattern.todense(v), rhs),
        ...         transpose_solve=lambda v, rhs: transpose_solve(
        ...             pattern.todense(v), rhs))
        ...     return jnp.sum(x)
        >>> values_bar = jax.grad(sparse_loss)(values)
        >>> values_bar.shape
        (3,)
        >>> a_bar = jax.grad(loss)(a, b)
        >>> jnp.allclose(values_bar, a_bar[pattern.rows, pattern.cols])
        Array(True, dtype=bool)
    """
    if mode not in ("jvp", "adjoint"):
        raise ValueError(
            f"linear_solve: mode must be 'jvp' or 'adjoint', got {mode!r}."
        )
    if mode == "adjoint" and not symmetric and transpose_solve is None:
        raise ValueError(
            "linear_solve: mode='adjoint' needs `transpose_solve` for a"
            " non-symmetric system."
        )
    system = linear_system(
        operator,
        solve=solve,
        transpose_solve=transpose_solve,
        matvec=matvec,
        symmetric=symmetric,
        symmetrize=symmetrize,
        caller="linear_solve",
        has_aux=has_aux,
    )
    b = checked_rhs(system, operator, b, caller="linear_solve")
    if mode == "jvp":
        return solve_implicit(system, operator, b)
    return _solve_adjoint(system, operator, b)


def linear_system(
    operator: Any,
    *,
    solve: SolveService,
    transpose_solve: SolveService | None,
    matvec: Matvec | None,
    symmetric: bool,
    symmetrize: Callable[[Any], Any] | None,
    caller: str,
    has_aux: bool = False,
) -> LinearSystem:
    """Checks the services of a system and wraps them into a `LinearSystem`.

    ``matvec`` and ``symmetrize`` default to the dense ones for a dense
    operator.  Errors name ``caller``, the public function being called.
    """
    dense = isinstance(operator, (jax.Array, np.ndarray))
    if matvec is None:
        if not dense:
            raise TypeError(
                f"{caller}: `matvec` is required when the operator is not a"
                f" dense (n, n) array; got an operator of type {type(operator)}."
            )
        if operator.ndim != 2 or operator.shape[0] != operator.shape[1]:
            raise ValueError(
                f"{caller}: a dense operator must be a square (n, n) matrix,"
                f" got shape {operator.shape}."
            )
        matvec = dense_matvec
    if symmetric and transpose_solve is not None:
        raise ValueError(
            f"{caller}: symmetric=True solves transposed systems with `solve`;"
            " pass transpose_solve=None."
        )
    if symmetric and symmetrize is None:
        if not dense:
            raise ValueError(
                f"{caller}: symmetric=True needs `symmetrize` (the Hermitian"
                " part of an operator, in its own representation) when the"
                " operator is not a dense array."
            )
        symmetrize = hermitian_part
    return LinearSystem(
        matvec=matvec,
        solve=solve_on_columns(solve, "solve", has_aux=has_aux),
        transpose_solve=(
            None
            if transpose_solve is None
            else solve_on_columns(transpose_solve, "transpose_solve", has_aux=has_aux)
        ),
        symmetric=symmetric,
        symmetrize=symmetrize,
        has_aux=has_aux,
    )


def checked_rhs(
    system: LinearSystem, operator: Any, b: jax.Array, *, caller: str
) -> jax.Array:
    """``b`` as an array, after checking it against ``A`` (errors name ``caller``)."""
    b = jnp.asarray(b)
    if b.ndim not in (1, 2):
        raise ValueError(
            f"{caller}: b must have shape (n,) or (n, k), got {b.shape}."
        )
    if not jnp.issubdtype(b.dtype, jnp.inexact):
        raise TypeError(
            f"{caller}: b must have a floating or complex dtype, got {b.dtype}."
        )
    # A x is formed under strict promotion, so that A of another dtype than b's is an
    # error rather than a silent promotion. Only what the matvec reads counts: an
    # operator may carry other data (a preconditioner in lower precision, say).
    try:
        with jax.numpy_dtype_promotion("strict"):
            ax = jax.eval_shape(system.matvec, operator, b)
    except jax.dtypes.TypePromotionError as error:
        others = [leaf.dtype for leaf in jax.tree.leaves(operator)
                  if jnp.issubdtype(leaf.dtype, jnp.inexact) and leaf.dtype != b.dtype]
        raise TypeError(
            f"{caller}: A and b must have the same dtype: b is {b.dtype},"
            f" A is {others[0] if others else 'another'}."
        ) from error
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{caller}: A x cannot be formed for b of shape {b.shape}: {error}"
        ) from error
    if ax.shape != b.shape or ax.dtype != b.dtype:
        raise ValueError(
            f"{caller}: A x must have the shape and dtype of b: b is {b.shape}"
            f" {b.dtype}, but A x is {ax.shape} {ax.dtype}; A must be square"
            " with as many rows as b."
        )
    return b
