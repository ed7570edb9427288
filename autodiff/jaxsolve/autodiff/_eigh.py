"""Derivatives of Hermitian eigendecompositions computed by a service."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ._checks import check_service_outputs, checked_matrix
from ._decomposition_rule import decomposition_rule
from ._dense import conj_transpose, dense_matvec, hermitian_part

EighService = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
GeneralizedEighService = Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def _eigen_tangents(
    w: jax.Array, v: jax.Array, projected: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(ẇ, V̇)`` from the eigenbasis tangent ``P`` (``P = Vᴴ Ȧ V`` for eigh).

    ``ẇ = real(diag P)`` and ``V̇ = V (F ∘ P)`` with
    ``F_ij = 1 / (w_j - w_i)`` off the diagonal and ``0`` on it: the
    diagonal of ``Vᴴ V̇`` is zero, the phase (gauge) JAX's ``eigh`` picks.
    """
    n = w.shape[0]
    eye = jnp.eye(n, dtype=w.dtype)
    # 1 / (w_j - w_i) off the diagonal without dividing by zero on it, as JAX
    # does; equal eigenvalues still give inf there.
    gaps = 1 / (eye + w[None, :] - w[:, None]) - eye
    w_dot = jnp.real(jnp.diagonal(projected))
    v_dot = dense_matvec(v, gaps.astype(v.dtype) * projected)
    return w_dot, v_dot


def _eigh_tangents(operands, operand_tangents, outputs):
    (a_dot,), (w, v) = operand_tangents, outputs
    projected = dense_matvec(conj_transpose(v), dense_matvec(hermitian_part(a_dot), v))
    return _eigen_tangents(w, v, projected)


_eigh = decomposition_rule(_eigh_tangents)


def eigh(a: jax.Array, *, decompose: EighService) -> tuple[jax.Array, jax.Array]:
    r"""Eigendecomposition ``A = V diag(w) Vᴴ`` of a Hermitian matrix, by a service.

    Equivalent to ``jnp.linalg.eigh``, differentiated the way JAX
    differentiates it, but from the outputs of ``decompose`` (e.g. a
    distributed ``syevd``) which is never differentiated itself.  With
    ``P = Vᴴ Ȧ V`` (``Ȧ`` projected onto its Hermitian part):

    .. math:: \dot w_i = \operatorname{Re} P_{ii}, \qquad
              \dot V = V\,(F \circ P), \qquad
              F_{ij} = \frac{1}{w_j - w_i}\ (i \ne j), \quad F_{ii} = 0 .

    The eigenvectors' phases are fixed by ``diag(Vᴴ V̇) = 0``; only
    phase-invariant functions of ``V`` (such as ``V diag(f(w)) Vᴴ`` or
    ``|V|²``) have well-defined derivatives for complex (or sign-invariant
    ones, for real) matrices.

    **Degenerate eigenvalues** are handled as JAX's ``eigh`` handles them:
    eigenvalue derivatives stay finite (``Re P_ii`` in the basis the service
    returned: exact for perturbations diagonal in that basis, and their sum
    over a repeated eigenvalue, e.g. the derivative of ``sum(w)``, is always
    right), while eigenvector derivatives divide by ``w_j - w_i = 0`` and are
    ``inf``/``nan``, since eigenvectors of a repeated eigenvalue are not
    differentiable functions of ``A``.

    ``A`` and its tangents are treated as Hermitian: tangents are projected
    onto ``(Ȧ + Ȧᴴ) / 2``, so gradients are Hermitian.  The service reads
    ``A`` as given, so pass Hermitian matrices (JAX's ``symmetrize_input``
    is the caller's ``(a + aᴴ) / 2``).

    Args:
        a: ``(n, n)`` Hermitian (real symmetric) matrix.
        decompose: the service ``decompose(a) -> (w, v)``: eigenvalues
            ``(n,)`` of the real dtype of ``a`` and orthonormal eigenvectors
            ``(n, n)`` as columns, in matching order.

    Returns:
        ``(w, v)``, as returned by ``decompose``.

    Raises:
        ValueError: if ``a`` is not square or ``decompose`` returns wrong
            shapes.
        TypeError: if ``a`` is not floating or complex, or ``decompose``
            returns wrong dtypes.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[2., 1.], [1., 2.]])
        >>> largest = lambda a: autodiff.eigh(a, decompose=jnp.linalg.eigh)[0][-1]
        >>> v = jnp.array([1., 1.]) / jnp.sqrt(2.)  # the top eigenvector
        >>> jnp.allclose(jax.grad(largest)(a), jnp.outer(v, v))
        Array(True, dtype=bool)
    """
    a = checked_matrix(a, caller="eigh", square=True)
    n = a.shape[0]
    check_service_outputs(
        jax.eval_shape(decompose, a),
        [((n,), jnp.finfo(a.dtype).dtype), ((n, n), a.dtype)],
        caller="eigh",
        service="decompose",
    )
    return _eigh(decompose, a)


def _eigh_generalized_tangents(operands, operand_tangents, outputs):
    (a_dot, b_dot), (w, v) = operand_tangents, outputs
    v_h = conj_transpose(v)
    b_projected = dense_matvec(v_h, dense_matvec(hermitian_part(b_dot), v))
    a_projected = dense_matvec(v_h, dense_matvec(hermitian_part(a_dot), v))
    projected = a_projected - b_projected * w.astype(v.dtype)[None, :]
    w_dot, v_dot = _eigen_tangents(w, v, projected)
    # Keeping Vᴴ B V = I fixes the diagonal of Vᴴ B V̇ to -diag(Vᴴ Ḃ V) / 2.
    normalization = jnp.real(jnp.diagonal(b_projected)).astype(v.dtype) / 2
    return w_dot, v_dot - v * normalization[None, :]


_eigh_generalized = decomposition_rule(_eigh_generalized_tangents)


def eigh_generalized(
    a: jax.Array, b: jax.Array, *, decompose: GeneralizedEighService
) -> tuple[jax.Array, jax.Array]:
    r"""Generalized eigenproblem ``A V = B V diag(w)``, ``B`` positive definite.

    The problem LAPACK's ``sygvd``/``hegvd`` (``itype=1``) solves, with
    ``A`` Hermitian, ``B`` Hermitian positive definite and ``B``-orthonormal
    eigenvectors, ``Vᴴ B V = I``.  Equivalent to
    ``scipy.linalg.eigh(a, b)``.  Differentiating ``A V = B V Λ`` and
    ``Vᴴ B V = I`` with ``V̇ = V C``, ``Q = Vᴴ Ḃ V`` and
    ``P = Vᴴ Ȧ V - Q Λ`` gives

    .. math:: \dot w_i = \operatorname{Re} P_{ii}
                       = v_i^H (\dot A - w_i \dot B)\, v_i, \qquad
              C_{ij} = \frac{P_{ij}}{w_j - w_i}\ (i \ne j), \qquad
              C_{ii} = -\tfrac12 Q_{ii} ,

    computed from the outputs of ``decompose``, which is never
    differentiated.  With ``B = I`` this is :func:`eigh`'s rule, with the same
    treatment of phases and of degenerate eigenvalues (eigenvector
    derivatives are ``inf``/``nan`` there).  ``Ȧ`` and ``Ḃ`` are projected
    onto their Hermitian parts.

    Args:
        a: ``(n, n)`` Hermitian matrix.
        b: ``(n, n)`` Hermitian positive definite matrix, dtype of ``a``.
        decompose: the service ``decompose(a, b) -> (w, v)``: eigenvalues
            ``(n,)`` (real dtype) and ``B``-orthonormal eigenvectors
            ``(n, n)`` as columns.

    Returns:
        ``(w, v)``, as returned by ``decompose``.

    Raises:
        ValueError: if ``a`` or ``b`` is not square, their shapes differ, or
            ``decompose`` returns wrong shapes.
        TypeError: if dtypes are not inexact or differ, or ``decompose``
            returns wrong dtypes.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> def sygvd(a, b):  # reduce to a standard problem with B = L Lᵀ
        ...     l = jnp.linalg.cholesky(b)
        ...     c = jax.scipy.linalg.solve_triangular(l, a, lower=True)
        ...     c = jax.scipy.linalg.solve_triangular(l, c.T, lower=True)
        ...     w, y = jnp.linalg.eigh(c)
        ...     return w, jax.scipy.linalg.solve_triangular(l.T, y, lower=False)
        >>> a = jnp.array([[2., 1.], [1., 2.]])
        >>> b = jnp.array([[2., 0.], [0., 1.]])
        >>> w, v = autodiff.eigh_generalized(a, b, decompose=sygvd)
        >>> jnp.allclose(a @ v, b @ v * w[None, :], atol=1e-5)
        Array(True, dtype=bool)
    """
    a = checked_matrix(a, caller="eigh_generalized", square=True)
    b = checked_matrix(b, caller="eigh_generalized", name="b", square=True)
    if a.shape != b.shape:
        raise ValueError(
            f"eigh_generalized: a and b must have the same shape, got {a.shape}"
            f" and {b.shape}."
        )
    if a.dtype != b.dtype:
        raise TypeError(
            f"eigh_generalized: a and b must have the same dtype, got {a.dtype}"
            f" and {b.dtype}."
        )
    n = a.shape[0]
    check_service_outputs(
        jax.eval_shape(decompose, a, b),
        [((n,), jnp.finfo(a.dtype).dtype), ((n, n), a.dtype)],
        caller="eigh_generalized",
        service="decompose",
    )
    return _eigh_generalized(decompose, a, b)
