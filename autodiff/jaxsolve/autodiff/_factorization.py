"""A matrix together with a factorization the caller keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from ._checks import checked_matrix
from ._dense import dense_matvec, hermitian_part


class Factorization(NamedTuple):
    """A matrix and its kept factor, so that derivative solves reuse the factor.

    Build one with :func:`cholesky_factor` or :func:`lu_factor`; pass it to
    :func:`cholesky_solve`, :func:`cholesky_logdet` or :func:`lu_solve` as
    often as needed.  Derivatives flow through ``matrix`` only: ``factor`` is
    a cache of it, computed from ``jax.lax.stop_gradient(matrix)`` by the
    caller's factorization service and never differentiated.  Every solve a
    derivative needs (one per JVP or VJP) calls the solve service with this
    same factor instead of factoring again.

    Being a ``NamedTuple``, it is a pytree: it can be returned from
    ``jax.jit``, stacked for ``jax.vmap`` and carried through ``lax.scan``.

    Attributes:
        matrix: ``(n, n)`` the matrix ``A``.
        factor: whatever the factorization service returned for ``A``: a
            triangular factor, ``(lu, pivots)``, a distributed factor handle
            (any pytree of arrays).
    """

    matrix: jax.Array
    factor: Any


def factorize(
    a: jax.Array, decompose: Callable[[jax.Array], Any], *, caller: str
) -> Factorization:
    """``Factorization(a, decompose(stop_gradient(a)))`` after checking ``a``."""
    a = checked_matrix(a, caller=caller, square=True)
    return Factorization(matrix=a, factor=decompose(jax.lax.stop_gradient(a)))


def check_factorization(factorization: Any, *, caller: str) -> None:
    """Raises a ``TypeError`` naming ``caller`` unless given a `Factorization`."""
    if not isinstance(factorization, Factorization):
        raise TypeError(
            f"{caller}: factorization must be a Factorization (from"
            f" cholesky_factor or lu_factor), got {type(factorization)}."
        )


def factorization_matvec(factorization: Factorization, x: jax.Array) -> jax.Array:
    """``A x`` for the factorized matrix; the factor does not take part."""
    return dense_matvec(factorization.matrix, x)


def factorization_hermitian_part(factorization: Factorization) -> Factorization:
    """The same factorization with ``matrix`` replaced by its Hermitian part."""
    return factorization._replace(matrix=hermitian_part(factorization.matrix))
