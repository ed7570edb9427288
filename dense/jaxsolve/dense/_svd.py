"""The singular value decomposition of an ``(m, n)`` matrix (``gesvd``)."""

from __future__ import annotations

from typing import Any

import jax

from jaxsolve import autodiff

from . import _backend
from ._arguments import constrain, prepare_matrix
from ._compile import run
from ._status import checked_finite, fill_failed, not_finite_unless, with_status


def _gesvd_body(layout, a):
    svd = _backend.services("gesvd", layout, a.dtype)
    finite, (a,) = checked_finite((constrain(a, layout.matrix_sharding()),))
    u, s, vh = autodiff.svd(a, decompose=svd.compute)
    info = not_finite_unless(finite, svd.info((a,), (u, s, vh)))
    u, s, vh = fill_failed(info, u, s, vh)
    outputs = (constrain(u, layout.sharding_for(u.shape)), constrain(s, layout.replicated()),
               constrain(vh, layout.sharding_for(vh.shape)), constrain(info, layout.replicated()))
    return outputs, ()


def gesvd(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    compute_u: bool = True,
    compute_vh: bool = True,
    full_matrices: bool = False,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    r"""Reduced singular value decomposition ``A = U diag(s) Vᴴ`` (``gesvd``).

    JAXMg's ``gesvd``; equivalent to ``jnp.linalg.svd(a, full_matrices=False)``. Singular
    values come in descending order, replicated. Derivatives are `jaxsolve.autodiff.svd`'s
    (JAX's rule): only phase-invariant functions of ``U`` and ``Vᴴ`` have meaningful ones, and
    repeated singular values give non-finite vector derivatives.

    Args:
      a: ``(m, n)`` matrix, sharded as for `potrs`.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      compute_u: return ``U`` (``(m, k)``, ``k = min(m, n)``).
      compute_vh: return ``Vᴴ`` (``(k, n)``).
      full_matrices: must be False: only the reduced SVD is provided (its derivative is the
        one defined).
      return_status: also return the `Status`: ``Status.NOT_FINITE`` where ``a`` holds NaN
        or Inf (checked before the decomposition), ``1`` where the result is not finite
        although ``a`` is (no convergence, or overflow).
      pad: as for `potrs`.
      donate: donate ``a``'s buffer; ``a`` is deleted.

    Returns:
      ``(U, s, Vᴴ)`` without the vectors not asked for (``s`` alone when neither is), then
      ``status`` with `return_status`.

    Raises:
      ValueError: for bad arguments (``full_matrices=True`` included), before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> dense.gesvd(jnp.array([[0., 2.], [3., 0.]]), compute_u=False, compute_vh=False)
      Array([3., 2.], dtype=float32)
    """
    caller = "gesvd"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs,
                               in_specs=in_specs, square=False, flags=dict(
        compute_u=compute_u, compute_vh=compute_vh, full_matrices=full_matrices,
        return_status=return_status, pad=pad, donate=donate))
    if full_matrices:
        raise ValueError(
            f"{caller}: full_matrices=True is not supported; the reduced SVD (U of shape "
            "(m, min(m, n))) is what jaxsolve differentiates."
        )
    u, s, vh, info = run(_gesvd_body, (layout,), (a,), bool(donate))
    outputs = [u] if compute_u else []
    outputs.append(s)
    if compute_vh:
        outputs.append(vh)
    return with_status(caller, outputs, info, return_status)


def gesvd_shardmap_ctx(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    compute_u: bool = True,
    compute_vh: bool = True,
    full_matrices: bool = False,
    pad: bool = True,
) -> tuple[Any, ...]:
    """`gesvd` for a caller-owned ``jax.jit`` that donates ``a``: ``(a_work, U, s, Vᴴ,
    status)``.

    JAXMg's ``gesvd_shardmap_ctx`` (1.4), with its names, argument and return order.
    ``a_work`` is an ``A``-sized output (``a`` itself: ``U`` and ``Vᴴ`` take buffers of their
    own) for the outer ``jax.jit(..., donate_argnums=...)`` to alias the donated ``a`` into;
    treat it as opaque. Nothing is donated by this function itself.

    Args:
      a, T_A, mesh, matrix_specs, in_specs, compute_u, compute_vh, full_matrices, pad: as for
        `gesvd`.

    Returns:
      ``(a_work, U, s, Vᴴ, status)`` without the vectors not asked for.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> _, u, s, vh, status = jax.jit(dense.gesvd_shardmap_ctx)(jnp.array([[0., 2.], [3., 0.]]))
      >>> s, int(status)
      (Array([3., 2.], dtype=float32), 0)
    """
    outputs = gesvd(a, T_A, mesh, matrix_specs, in_specs=in_specs, compute_u=compute_u,
                    compute_vh=compute_vh, full_matrices=full_matrices, return_status=True,
                    pad=pad)
    return (a, *outputs)
