"""The polar decomposition ``A = U H`` of an ``(m, n)`` matrix."""

from __future__ import annotations

from typing import Any

import jax

from jaxsolve import autodiff

from . import _backend
from ._arguments import constrain, prepare_matrix
from ._compile import run
from ._status import checked_finite, fill_failed, not_finite_unless, with_status


def _polar_body(layout, a):
    polar_services = _backend.services("polar", layout, a.dtype)
    eigensolver = _backend.services("syevd", layout, a.dtype)
    finite, (a,) = checked_finite((constrain(a, layout.matrix_sharding()),))
    u, h = autodiff.polar(a, decompose=polar_services.compute, eigensolver=eigensolver.compute)
    info = not_finite_unless(finite, polar_services.info((a,), (u, h)))
    u, h = fill_failed(info, u, h)
    outputs = (constrain(u, layout.matrix_sharding()), constrain(h, layout.sharding_for(h.shape)),
               constrain(info, layout.replicated()))
    return outputs, ()


def polar(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    compute_h: bool = True,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    r"""Polar decomposition ``A = U H`` of an ``(m, n)`` matrix, ``m >= n``.

    JAXMg's ``polar``; equivalent to ``jax.scipy.linalg.polar(a)`` (``side="right"``): ``U``
    has orthonormal columns and ``H = (Aᴴ A)^{1/2}`` is Hermitian positive semidefinite.
    Derivatives are `jaxsolve.autodiff.polar`'s closed form (a Sylvester equation solved in
    the eigenbasis of ``H``, from `syevd`'s backend); they need full column rank.

    Args:
      a: ``(m, n)`` matrix, ``m >= n``, sharded as for `potrs`.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      compute_h: also return ``H``.
      return_status: also return the `Status`: ``Status.NOT_FINITE`` where ``a`` holds NaN
        or Inf (checked before the decomposition), ``1`` where the result is not finite
        although ``a`` is (no convergence, or overflow).
      pad: as for `potrs`.
      donate: donate ``a``'s buffer (``U`` is written over it); ``a`` is deleted.

    Returns:
      ``(U, H)`` or ``U``, then ``status`` with `return_status`.

    Raises:
      ValueError: for bad arguments (``m < n`` included), before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> u, h = dense.polar(jnp.array([[0., 2.], [3., 0.]]))
      >>> u
      Array([[0., 1.],
             [1., 0.]], dtype=float32)
    """
    caller = "polar"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs,
                               in_specs=in_specs, square=False, flags=dict(
        compute_h=compute_h, return_status=return_status, pad=pad, donate=donate))
    if a.shape[0] < a.shape[1]:
        raise ValueError(
            f"{caller}: a must have at least as many rows as columns, got shape {a.shape}; "
            "for a wide matrix decompose its conjugate transpose."
        )
    u, h, info = run(_polar_body, (layout,), (a,), bool(donate))
    return with_status(caller, [u, h] if compute_h else [u], info, return_status)


def polar_shardmap_ctx(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    compute_h: bool = True,
    pad: bool = True,
) -> tuple[Any, ...]:
    """`polar` for a caller-owned ``jax.jit``: ``(U, H, status)``.

    JAXMg's ``polar_shardmap_ctx`` (1.4). ``U`` has ``a``'s shape, so the outer ``jax.jit(...,
    donate_argnums=...)`` can alias a donated ``a`` into it; no work output is needed.
    Nothing is donated by this function itself.

    Args:
      a, T_A, mesh, matrix_specs, in_specs, compute_h, pad: as for `polar`.

    Returns:
      ``(U, H, status)``, or ``(U, status)`` without ``H``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> u, h, status = jax.jit(dense.polar_shardmap_ctx)(jnp.array([[0., 2.], [3., 0.]]))
      >>> u, int(status)
      (Array([[0., 1.],
             [1., 0.]], dtype=float32), 0)
    """
    return polar(a, T_A, mesh, matrix_specs, in_specs=in_specs, compute_h=compute_h,
                 return_status=True, pad=pad)
