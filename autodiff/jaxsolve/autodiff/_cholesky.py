"""Cholesky solve and log-determinant that reuse a kept factor."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ._dense import hermitian_part
from ._factorization import (
    Factorization,
    check_factorization,
    factorization_hermitian_part,
    factorization_matvec,
    factorize,
)
from ._linear_solve import (
    LinearSystem,
    checked_rhs,
    linear_system,
    solve_implicit,
)


def cholesky_factor(
    a: jax.Array, *, decompose: Callable[[jax.Array], Any]
) -> Factorization:
    """Factors a Hermitian positive definite matrix once, for reuse.

    Args:
        a: ``(n, n)`` Hermitian (real symmetric) positive definite matrix.
        decompose: the factorization service, ``decompose(a) -> factor``
            (``potrf``, ``jnp.linalg.cholesky``, a distributed factor handle).
            Called once, on ``jax.lax.stop_gradient(a)``: never differentiated.

    Returns:
        ``Factorization(matrix=a, factor=decompose(a))``.

    Raises:
        ValueError: if ``a`` is not square.
        TypeError: if ``a`` is not floating or complex.

    See also: :func:`cholesky_solve`, :func:`cholesky_logdet`.
    """
    return factorize(a, decompose, caller="cholesky_factor")


def _cholesky_system(
    factorization: Factorization,
    solve_with_factor: Callable[[Any, jax.Array], jax.Array],
) -> LinearSystem:
    return linear_system(
        factorization,
        solve=lambda f, rhs: solve_with_factor(f.factor, rhs),
        transpose_solve=None,
        matvec=factorization_matvec,
        symmetric=True,
        symmetrize=factorization_hermitian_part,
        caller="cholesky_solve",
    )


def cholesky_solve(
    factorization: Factorization,
    b: jax.Array,
    *,
    solve_with_factor: Callable[[Any, jax.Array], jax.Array],
) -> jax.Array:
    r"""Solves ``A x = b`` with a kept Cholesky factor; differentiates implicitly.

    Equivalent to ``jax.scipy.linalg.cho_solve`` on a factor computed once.
    Derivatives are :func:`linear_solve`'s rule for a symmetric system,

    .. math:: \dot x = A^{-1}(\dot b - \dot A\, x), \qquad
              \bar b = A^{-T} \bar x, \qquad
              \bar A = -\operatorname{herm}(\bar b\, x^T),

    where every solve (``A⁻¹`` for a JVP, ``A⁻ᵀ = conj ∘ A⁻¹ ∘ conj`` for a
    VJP) calls ``solve_with_factor`` with the kept factor: no factorization
    is repeated.  ``Ȧ`` is treated as Hermitian (projected onto its Hermitian
    part), so the gradient with respect to ``A`` is Hermitian.

    Args:
        factorization: from :func:`cholesky_factor`.
        b: ``(n,)`` or ``(n, k)``, the dtype of ``A``.
        solve_with_factor: the service ``solve_with_factor(factor, rhs) ->
            A⁻¹ rhs`` (``potrs``) for ``rhs`` of shape ``(n, k)``.

    Returns:
        ``x``, shaped like ``b``.

    Raises:
        TypeError: if ``factorization`` is not a :class:`Factorization` or
            dtypes differ.
        ValueError: if shapes do not match.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[4., 1.], [1., 3.]])
        >>> b = jnp.array([1., 2.])
        >>> potrs = lambda factor, rhs: jax.scipy.linalg.cho_solve((factor, True), rhs)
        >>> def loss(a):
        ...     factorization = autodiff.cholesky_factor(
        ...         a, decompose=jnp.linalg.cholesky)
        ...     x = autodiff.cholesky_solve(
        ...         factorization, b, solve_with_factor=potrs)
        ...     return x @ x
        >>> a_bar = jax.grad(loss)(a)
        >>> jnp.allclose(a_bar, a_bar.T)
        Array(True, dtype=bool)
    """
    check_factorization(factorization, caller="cholesky_solve")
    system = _cholesky_system(factorization, solve_with_factor)
    b = checked_rhs(system, factorization, b, caller="cholesky_solve")
    return solve_implicit(system, factorization, b)


def _triangular_logdet(factor: jax.Array) -> jax.Array:
    """``log det A = 2 Σ log Lᵢᵢ`` for a triangular factor ``A = L Lᴴ``."""
    return 2 * jnp.sum(jnp.log(jnp.real(jnp.diagonal(factor))))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _logdet(
    system: LinearSystem,
    logdet_of_factor: Callable[[Any], jax.Array],
    factorization: Factorization,
) -> jax.Array:
    return logdet_of_factor(factorization.factor)


@_logdet.defjvp
def _logdet_jvp(system, logdet_of_factor, primals, tangents):
    (factorization,), (factorization_dot,) = primals, tangents
    logdet = _logdet(system, logdet_of_factor, factorization)
    # d log det A = tr(A⁻¹ Ȧ), with A⁻¹ Ȧ from one n-column solve.
    a_inverse_a_dot = system.apply_inverse(
        factorization, hermitian_part(factorization_dot.matrix)
    )
    return logdet, jnp.real(jnp.trace(a_inverse_a_dot))


def cholesky_logdet(
    factorization: Factorization,
    *,
    solve_with_factor: Callable[[Any, jax.Array], jax.Array],
    logdet_of_factor: Callable[[Any], jax.Array] | None = None,
) -> jax.Array:
    r"""``log det A`` of a Hermitian positive definite ``A`` from its kept factor.

    Equivalent to ``jnp.linalg.slogdet(a)[1]``.  The value is read off the
    factor (``2 Σ log Lᵢᵢ``); the derivative is

    .. math:: \frac{d}{dt} \log\det A = \operatorname{tr}(A^{-1} \dot A),
              \qquad \bar A = \bar g\, A^{-T},

    formed with solves that reuse the factor, never with an explicit
    inverse: a JVP solves ``A Y = Ȧ`` (one ``n``-column call of
    ``solve_with_factor``) and takes ``tr Y``; a VJP is one ``n``-column
    transposed solve against the identity (which is ``A⁻ᵀ`` itself, the
    gradient).  ``Ȧ`` is treated as Hermitian.  Second derivatives come from
    more solves with the same factor.

    Args:
        factorization: from :func:`cholesky_factor`.
        solve_with_factor: as for :func:`cholesky_solve`.
        logdet_of_factor: ``logdet_of_factor(factor) -> log det A``, a real
            scalar.  Defaults to ``2 Σ log real(diag(factor))``, correct when
            the factor is the triangular Cholesky factor (lower or upper) as
            an ``(n, n)`` array; required otherwise.

    Returns:
        A real scalar of the real dtype of ``A``.

    Raises:
        TypeError: if ``factorization`` is not a :class:`Factorization`, or
            ``logdet_of_factor`` is missing for a factor that is not an
            ``(n, n)`` array, or returns something else than a real scalar.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[4., 1.], [1., 3.]])
        >>> potrs = lambda factor, rhs: jax.scipy.linalg.cho_solve((factor, True), rhs)
        >>> def logdet(a):
        ...     factorization = autodiff.cholesky_factor(
        ...         a, decompose=jnp.linalg.cholesky)
        ...     return autodiff.cholesky_logdet(
        ...         factorization, solve_with_factor=potrs)
        >>> jnp.allclose(logdet(a), jnp.log(11.))
        Array(True, dtype=bool)
        >>> jnp.allclose(jax.grad(logdet)(a), jnp.linalg.inv(a))
        Array(True, dtype=bool)
    """
    check_factorization(factorization, caller="cholesky_logdet")
    matrix = factorization.matrix
    if logdet_of_factor is None:
        factor = factorization.factor
        if not isinstance(factor, jax.Array) or factor.shape != matrix.shape:
            raise TypeError(
                "cholesky_logdet: the factor is not an (n, n) triangular array;"
                " pass `logdet_of_factor` to read log det A off it."
            )
        logdet_of_factor = _triangular_logdet
    value = jax.eval_shape(logdet_of_factor, factorization.factor)
    real_dtype = jnp.finfo(matrix.dtype).dtype
    if value.shape != () or value.dtype != real_dtype:
        raise TypeError(
            "cholesky_logdet: logdet_of_factor must return a real scalar of"
            f" dtype {real_dtype}, got shape {value.shape} and dtype {value.dtype}."
        )
    system = _cholesky_system(factorization, solve_with_factor)
    return _logdet(system, logdet_of_factor, factorization)
