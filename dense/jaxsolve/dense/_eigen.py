"""Hermitian eigensolvers: `syevd` (``A V = V diag(w)``) and `sygvd` (``A V = B V diag(w)``)."""

from __future__ import annotations

from typing import Any

import jax

from jaxsolve import autodiff

from . import _backend
from ._arguments import check_on_mesh, checked_array, constrain, prepare_matrix
from ._compile import run
from ._status import checked_finite, fill_failed, not_finite_unless, with_status


# The derivative rule of each family: A V = V diag(w), and A V = B V diag(w).
_RULES = {"syevd": autodiff.eigh, "sygvd": autodiff.eigh_generalized}


def _eigen_body(family, layout, *matrices):
    services = _backend.services(family, layout, matrices[0].dtype)
    matrices = tuple(constrain(m, layout.matrix_sharding()) for m in matrices)
    finite, matrices = checked_finite(matrices, lower=True)
    w, v = _RULES[family](*matrices, decompose=services.compute)
    info = not_finite_unless(finite, services.info(matrices, (w, v)))
    w, v = fill_failed(info, w, v)
    outputs = (constrain(w, layout.replicated()), constrain(v, layout.matrix_sharding()),
               constrain(info, layout.replicated()))
    return outputs, ()


def syevd(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    return_eigenvectors: bool = True,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    r"""Eigenvalues and eigenvectors of a Hermitian matrix, ``A = V diag(w) Vᴴ`` (``syevd``).

    JAXMg's ``syevd``, with its names and argument order. The **lower triangle** of ``A`` is
    read. Eigenvalues come in ascending order, replicated; eigenvectors are the columns of
    ``V``, in ``a``'s sharding. Derivatives are `jaxsolve.autodiff.eigh`'s (JAX's ``eigh``
    rule on this routine's outputs); as there, eigenvector derivatives of repeated eigenvalues
    are not finite, and only phase-invariant functions of ``V`` have meaningful ones.
    ``jax.vmap`` over a stack of matrices batches the eigensolver.

    Args:
      a: ``(n, n)`` Hermitian matrix, sharded as for `potrs`.
      T_A: as for `potrs` (checked; the XLA reference backend does not tile).
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      return_eigenvectors: return ``(w, V)``; with False, ``w`` alone (the XLA reference
        backend still computes ``V``, which derivatives of ``w`` need).
      return_status: also return the `Status`: ``Status.NOT_FINITE`` where ``a``'s lower
        triangle holds NaN or Inf (checked before the eigensolver), ``1`` where the result is
        not finite although ``a`` is (no convergence, or overflow).
      pad: as for `potrs`.
      donate: donate ``a``'s buffer (``V`` is written over it); ``a`` is deleted.

    Returns:
      ``(w, V)``, or ``w``; then ``status`` last with `return_status`.

    Raises:
      ValueError: for bad arguments, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> w, v = dense.syevd(jnp.array([[2., 1.], [1., 2.]]))
      >>> w
      Array([1., 3.], dtype=float32)
    """
    caller = "syevd"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs, in_specs=in_specs, flags=dict(
        return_eigenvectors=return_eigenvectors, return_status=return_status, pad=pad,
        donate=donate))
    w, v, info = run(_eigen_body, ("syevd", layout), (a,), bool(donate))
    return with_status(caller, [w, v] if return_eigenvectors else [w], info, return_status)


def syevd_shardmap_ctx(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    return_eigenvectors: bool = True,
    pad: bool = True,
) -> tuple[Any, ...]:
    """`syevd` for a caller-owned ``jax.jit`` that donates ``a``: ``(a_work, w, V, status)``.

    JAXMg's ``syevd_shardmap_ctx`` (1.4), with its names, argument and return order.
    ``a_work`` is an ``A``-sized output (``a`` itself: the eigenvectors take a buffer of their
    own) for the outer ``jax.jit(..., donate_argnums=...)`` to alias the donated ``a`` into;
    treat it as opaque. Nothing is donated by this function itself.

    Args:
      a, T_A, mesh, matrix_specs, in_specs, return_eigenvectors, pad: as for `syevd`.

    Returns:
      ``(a_work, w, V, status)``, or ``(a_work, w, status)`` without eigenvectors.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> _, w, v, status = jax.jit(dense.syevd_shardmap_ctx)(jnp.array([[2., 1.], [1., 2.]]))
      >>> w, int(status)
      (Array([1., 3.], dtype=float32), 0)
    """
    outputs = syevd(a, T_A, mesh, matrix_specs, in_specs=in_specs,
                    return_eigenvectors=return_eigenvectors, return_status=True, pad=pad)
    return (a, *outputs)


def sygvd(
    a: Any,
    b: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    return_eigenvectors: bool = True,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    r"""The generalized Hermitian-definite eigenproblem ``A V = B V diag(w)`` (``sygvd``).

    LAPACK's ``sygvd``/``hegvd`` with ``itype=1`` (cuSOLVERMp has it; JAXMg does not wrap it):
    ``A`` Hermitian, ``B`` Hermitian positive definite, eigenvectors ``B``-orthonormal
    (``Vᴴ B V = I``), eigenvalues ascending. Equivalent to ``scipy.linalg.eigh(a, b)``.
    Derivatives are `jaxsolve.autodiff.eigh_generalized`'s. If ``B`` is not positive definite
    the outputs are NaN and ``info = n + k``, ``k`` the order of ``B``'s first leading minor
    that is not positive definite.

    Args:
      a: ``(n, n)`` Hermitian matrix, sharded as for `potrs`.
      b: ``(n, n)`` Hermitian positive definite matrix, the dtype of ``a``; placed like ``a``.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`, for both matrices.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      return_eigenvectors: as for `syevd`.
      return_status: also return the `Status`: ``Status.NOT_FINITE`` where the lower
        triangle of ``a`` or ``b`` holds NaN or Inf (checked before the eigensolver).
      pad: as for `potrs`.
      donate: donate ``a``'s and ``b``'s buffers (``V`` is written over ``a``); both are
        deleted.

    Returns:
      ``(w, V)``, or ``w``; then ``status`` last with `return_status`.

    Raises:
      ValueError: for bad arguments, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.array([[2., 0.], [0., 6.]])
      >>> b = jnp.array([[1., 0.], [0., 2.]])
      >>> w, v = dense.sygvd(a, b)
      >>> bool(jnp.allclose(w, jnp.array([2., 3.])))
      True
      >>> bool(jnp.allclose(a @ v, b @ v * w[None, :]))
      True
    """
    caller = "sygvd"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs, in_specs=in_specs, flags=dict(
        return_eigenvectors=return_eigenvectors, return_status=return_status, pad=pad,
        donate=donate))
    b = checked_array(caller, "b", b)  # placed like a (same shape: it divides the same way)
    if b.shape != a.shape or b.dtype != a.dtype:
        raise ValueError(
            f"{caller}: a and b must have the same shape and dtype, got {a.shape} {a.dtype} "
            f"and {b.shape} {b.dtype}."
        )
    if layout.mesh is not None:
        check_on_mesh(caller, "b", b, layout.mesh)
    w, v, info = run(_eigen_body, ("sygvd", layout), (a, b), bool(donate))
    return with_status(caller, [w, v] if return_eigenvectors else [w], info, return_status,
                       n=a.shape[0])
