"""LU solve that reuses a kept factor, for its solves and transposed solves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from ._factorization import (
    Factorization,
    check_factorization,
    factorization_matvec,
    factorize,
)
from ._linear_solve import checked_rhs, linear_system, solve_implicit


def lu_factor(a: jax.Array, *, decompose: Callable[[jax.Array], Any]) -> Factorization:
    """Factors a square matrix once (``A = P L U``), for reuse.

    Args:
        a: ``(n, n)`` nonsingular matrix.
        decompose: the factorization service, ``decompose(a) -> factor``
            (``getrf``, ``jax.scipy.linalg.lu_factor`` returning
            ``(lu, pivots)``).  Called once, on ``jax.lax.stop_gradient(a)``:
            never differentiated.

    Returns:
        ``Factorization(matrix=a, factor=decompose(a))``.

    Raises:
        ValueError: if ``a`` is not square.
        TypeError: if ``a`` is not floating or complex.

    See also: :func:`lu_solve`.
    """
    return factorize(a, decompose, caller="lu_factor")


def lu_solve(
    factorization: Factorization,
    b: jax.Array,
    *,
    solve_with_factor: Callable[[Any, jax.Array, bool], jax.Array],
) -> jax.Array:
    r"""Solves ``A x = b`` with a kept LU factor; differentiates implicitly.

    Equivalent to ``jax.scipy.linalg.lu_solve`` on a factor computed once.
    Derivatives are :func:`linear_solve`'s rule for a general system,

    .. math:: \dot x = A^{-1}(\dot b - \dot A\, x), \qquad
              \bar b = A^{-T} \bar x, \qquad \bar A = -\bar b\, x^T,

    where the JVP's solve is ``solve_with_factor(factor, rhs, False)`` and the
    VJP's is the transposed solve ``solve_with_factor(factor, rhs, True)``
    with the same factor (``getrs`` with ``trans='T'``): one solve per
    derivative, no factorization repeated, and the gradient uses ``A⁻ᵀ``, not
    ``A⁻¹``.

    Args:
        factorization: from :func:`lu_factor`.
        b: ``(n,)`` or ``(n, k)``, the dtype of ``A``.
        solve_with_factor: the service ``solve_with_factor(factor, rhs,
            transpose) -> A⁻¹ rhs`` (``transpose=False``) or ``A⁻ᵀ rhs``
            (``transpose=True``: the plain transpose, LAPACK ``trans='T'``,
            not the conjugate transpose), for ``rhs`` of shape ``(n, k)``.

    Returns:
        ``x``, shaped like ``b``.

    Raises:
        TypeError: if ``factorization`` is not a :class:`Factorization` or
            dtypes differ.
        ValueError: if shapes do not match.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[3., 1.], [0., 2.]])
        >>> b = jnp.array([1., 2.])
        >>> def getrs(factor, rhs, transpose):
        ...     return jax.scipy.linalg.lu_solve(factor, rhs, trans=int(transpose))
        >>> def loss(b):
        ...     factorization = autodiff.lu_factor(
        ...         a, decompose=jax.scipy.linalg.lu_factor)
        ...     return jnp.sum(autodiff.lu_solve(
        ...         factorization, b, solve_with_factor=getrs))
        >>> jnp.allclose(jax.grad(loss)(b), jnp.linalg.solve(a.T, jnp.ones(2)))
        Array(True, dtype=bool)
    """
    check_factorization(factorization, caller="lu_solve")
    system = linear_system(
        factorization,
        solve=lambda f, rhs: solve_with_factor(f.factor, rhs, False),
        transpose_solve=lambda f, rhs: solve_with_factor(f.factor, rhs, True),
        matvec=factorization_matvec,
        symmetric=False,
        symmetrize=None,
        caller="lu_solve",
    )
    b = checked_rhs(system, factorization, b, caller="lu_solve")
    return solve_implicit(system, factorization, b)
