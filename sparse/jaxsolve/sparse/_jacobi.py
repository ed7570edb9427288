"""The Jacobi (diagonal) preconditioner, ``r ↦ D⁻¹ r``: the simplest one.

A preconditioner is a callable ``precondition(r) -> M⁻¹ r`` on vectors of shape ``(n,)``,
where ``M ≈ A`` is cheap to invert; the Krylov methods of this package take one as
``precondition=``.  The configured ones (an AMG cycle, a relaxation) are
:func:`._preconditioner.make_preconditioner`'s.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._csr import CsrMatrix


def jacobi(A: CsrMatrix) -> jax.tree_util.Partial:
    r"""The Jacobi (diagonal) preconditioner ``r ↦ D⁻¹ r``, ``D = diag(A)``.

    It undoes a bad scaling of the rows: for ``A = S B S`` with a diagonal
    ``S``, preconditioned CG converges as fast as for the well-scaled ``B``.
    For a Hermitian positive definite ``A`` the diagonal is positive, so the
    preconditioner is too, as CG requires.  Equivalent to AmgX's
    ``BLOCK_JACOBI`` with ``1×1`` blocks applied once with ``ω = 1``.

    The result is a ``jax.tree_util.Partial``: a pytree, so it can be passed
    to ``jit``-compiled functions, and differentiable with respect to
    ``A.values``.

    Args:
        A: a square ``(n, n)`` :class:`CsrMatrix`.

    Returns:
        ``precondition(r)`` for ``r`` of shape ``(n,)`` or ``(n, k)``.

    Raises:
        ValueError: if ``A`` is not square, or (for concrete values) has a
            zero on its diagonal; traced zeros give Inf, which the solver
            reports as ``DIVERGED``.
        TypeError: if ``A`` is not a :class:`CsrMatrix` (convert with
            :func:`as_csr`).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxsolve import sparse
        >>> A = sparse.as_csr(jnp.array([[4., 1.], [1., 100.]]))
        >>> sparse.jacobi(A)(jnp.array([4., 100.]))
        Array([1., 1.], dtype=float32)
    """
    if not isinstance(A, CsrMatrix):
        raise TypeError(
            f"jacobi: A must be a CsrMatrix, got {type(A).__name__}; convert it"
            " with jaxsolve.sparse.as_csr(A)."
        )
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"jacobi: A must be square, got shape {A.shape}.")
    diagonal = A.diagonal()
    try:
        zero_rows = np.flatnonzero(np.asarray(diagonal) == 0)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        zero_rows = np.zeros(0, int)
    if zero_rows.size:
        raise ValueError(
            f"jacobi: A has {zero_rows.size} zero diagonal entries (rows"
            f" {zero_rows[:10].tolist()}{', ...' if zero_rows.size > 10 else ''}),"
            " so D⁻¹ does not exist; store nonzero diagonals, or use no"
            " preconditioner (or another one) for this matrix."
        )
    return jax.tree_util.Partial(_scale_rows, 1 / diagonal)


def _scale_rows(inverse_diagonal: jax.Array, r: jax.Array) -> jax.Array:
    """``diag(inverse_diagonal) r`` for ``r`` of shape ``(n,)`` or ``(n, k)``."""
    with jax.numpy_dtype_promotion("standard"):
        dtype = jnp.result_type(inverse_diagonal, r)
    scale = inverse_diagonal.reshape(inverse_diagonal.shape + (1,) * (r.ndim - 1))
    return scale.astype(dtype) * r.astype(dtype)
