"""Least squares and minimum-norm solves by a service, differentiated implicitly."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from ._checks import checked_matrix
from ._dense import conj_transpose, dense_matvec
from ._linear_solve import LinearSystem
from ._services import solve_on_columns

LeastSquaresService = Callable[[jax.Array, jax.Array], jax.Array]


def _normal_system(solve_least_squares: LeastSquaresService) -> LinearSystem:
    """The Hermitian positive definite normal operator of ``A``.

    ``N = Aᴴ A`` for a tall ``A`` and ``N = A Aᴴ`` for a wide one: the
    smaller Gram matrix.  ``N⁻¹`` is two least-squares solves: for tall
    ``A``, ``A⁺ (Aᴴ)⁺ = (Aᴴ A)⁻¹ Aᴴ A (Aᴴ A)⁻¹``; for wide ``A``,
    ``(Aᴴ)⁺ A⁺``.  ``N`` is Hermitian for every ``A``, so nothing needs
    projecting.
    """

    def matvec(a, x):
        if a.shape[0] >= a.shape[1]:
            return dense_matvec(conj_transpose(a), dense_matvec(a, x))
        return dense_matvec(a, dense_matvec(conj_transpose(a), x))

    def solve(a, rhs):
        if a.shape[0] >= a.shape[1]:
            return solve_least_squares(a, solve_least_squares(conj_transpose(a), rhs))
        return solve_least_squares(conj_transpose(a), solve_least_squares(a, rhs))

    return LinearSystem(
        matvec=matvec,
        solve=solve_on_columns(solve, "solve_least_squares"),
        transpose_solve=None,
        symmetric=True,
        symmetrize=lambda a: a,
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _lstsq(
    solve_least_squares: LeastSquaresService,
    normal: LinearSystem,
    a: jax.Array,
    b: jax.Array,
) -> jax.Array:
    return solve_least_squares(a, b)


@_lstsq.defjvp
def _lstsq_jvp(solve_least_squares, normal, primals, tangents):
    (a, b), (a_dot, b_dot) = primals, tangents
    x = _lstsq(solve_least_squares, normal, a, b)
    residual_dot = b_dot - dense_matvec(a_dot, x)
    if a.shape[0] >= a.shape[1]:
        # Normal equations Aᴴ A x = Aᴴ b, differentiated:
        # Aᴴ A ẋ = Aᴴ (ḃ - Ȧ x) + Ȧᴴ (b - A x).
        residual = b - dense_matvec(a, x)
        rhs = dense_matvec(conj_transpose(a), residual_dot) + dense_matvec(
            conj_transpose(a_dot), residual
        )
        return x, normal.apply_inverse(a, rhs)
    # Minimum norm: x = Aᴴ y with A Aᴴ y = b, and y = (Aᴴ)⁺ x.
    y = _lstsq(solve_least_squares, normal, conj_transpose(a), x)
    a_dot_h_y = dense_matvec(conj_transpose(a_dot), y)
    y_dot = normal.apply_inverse(a, residual_dot - dense_matvec(a, a_dot_h_y))
    return x, a_dot_h_y + dense_matvec(conj_transpose(a), y_dot)


def lstsq(
    a: jax.Array, b: jax.Array, *, solve_least_squares: LeastSquaresService
) -> jax.Array:
    r"""Least-squares or minimum-norm solution of ``A x = b`` by a service.

    Equivalent to ``jnp.linalg.lstsq(a, b)[0]`` for a full-rank ``A``: the
    least-squares solution ``x = argmin ‖A x - b‖`` when ``A`` is tall
    (``m >= n``), the minimum-norm solution of ``A x = b`` when it is wide.
    Derivatives come from differentiating the normal equations, with ``N⁻¹``
    (``N = Aᴴ A`` or ``A Aᴴ``) applied by two calls of the service and never
    formed:

    .. math:: \text{tall:}\quad A^H A\, \dot x
                  = A^H (\dot b - \dot A x) + \dot A^H (b - A x), \qquad
              \text{wide:}\quad x = A^H y,\ \
                  A A^H \dot y = \dot b - \dot A x - A \dot A^H y,\ \
                  \dot x = \dot A^H y + A^H \dot y .

    The solves go through :func:`jax.lax.custom_linear_solve`, so reverse
    mode, higher orders and ``vmap`` (columns folded into one call) follow as
    for :func:`linear_solve`.  JAX differentiates ``lstsq`` through an SVD;
    both agree for full-rank ``A``.  Rank-deficient ``A`` is not supported
    (``N`` is singular).

    Args:
        a: ``(m, n)`` full-rank matrix.
        b: ``(m,)`` or ``(m, k)``, the dtype of ``a``.
        solve_least_squares: the service ``solve_least_squares(a, rhs) -> x``
            (``gels``) for any full-rank ``a`` and ``rhs`` of shape
            ``(rows, k)``: least squares for a tall ``a``, minimum norm for a
            wide one.  It is also called with ``aᴴ``.

    Returns:
        ``x``, ``(n,)`` or ``(n, k)``.

    Raises:
        ValueError: if ``a`` is not 2-D or ``b`` does not have ``m`` rows.
        TypeError: if dtypes are not inexact or differ.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[1., 0.], [1., 1.], [1., 2.]])
        >>> b = jnp.array([1., 2., 2.])
        >>> gels = lambda a, rhs: jnp.linalg.lstsq(a, rhs)[0]
        >>> x = autodiff.lstsq(a, b, solve_least_squares=gels)
        >>> jnp.allclose(x, jnp.array([7 / 6, 1 / 2]), atol=1e-5)
        Array(True, dtype=bool)
    """
    a = checked_matrix(a, caller="lstsq")
    b = jnp.asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(
            f"lstsq: b must have shape ({a.shape[0]},) or ({a.shape[0]}, k) for a"
            f" of shape {a.shape}, got {b.shape}."
        )
    if b.dtype != a.dtype:
        raise TypeError(
            f"lstsq: a and b must have the same dtype, got {a.dtype} and {b.dtype}."
        )
    service = solve_on_columns(solve_least_squares, "solve_least_squares")
    return _lstsq(service, _normal_system(solve_least_squares), a, b)
