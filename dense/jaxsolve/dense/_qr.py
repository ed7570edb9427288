"""The QR decomposition of an ``(m, n)`` matrix."""

from __future__ import annotations

from typing import Any

import jax

from jaxsolve import autodiff

from . import _backend
from ._arguments import constrain, prepare_matrix
from ._compile import run
from ._status import checked_finite, fill_failed, not_finite_unless, with_status


def _qr_body(layout, a):
    qr_services = _backend.services("qr", layout, a.dtype)
    finite, (a,) = checked_finite((constrain(a, layout.matrix_sharding()),))
    q, r = autodiff.qr(a, decompose=qr_services.compute)
    info = not_finite_unless(finite, qr_services.info((a,), (q, r)))
    q, r = fill_failed(info, q, r)
    outputs = (constrain(q, layout.sharding_for(q.shape)),
               constrain(r, layout.sharding_for(r.shape)),
               constrain(info, layout.replicated()))
    return outputs, ()


def qr(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    r"""Reduced QR decomposition ``A = Q R`` (``geqrf`` + ``orgqr``).

    JAXMg's ``qr`` (which takes ``m >= n`` only); equivalent to ``jnp.linalg.qr(a)``.
    ``Q`` is ``(m, k)`` with orthonormal columns and ``R`` is ``(k, n)`` upper triangular,
    ``k = min(m, n)``, both split like ``a`` where their dimensions allow. Derivatives are
    `jaxsolve.autodiff.qr`'s (JAX's rule); they need ``R``'s leading ``k × k`` block
    nonsingular.

    Args:
      a: ``(m, n)`` matrix, sharded as for `potrs`.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      return_status: also return the `Status`: ``Status.NOT_FINITE`` where ``a`` holds NaN
        or Inf (checked before the decomposition), ``1`` where the result is not finite
        although ``a`` is (no convergence, or overflow).
      pad: as for `potrs`.
      donate: donate ``a``'s buffer; ``a`` is deleted.

    Returns:
      ``(Q, R)``, then ``status`` with `return_status`.

    Raises:
      ValueError: for bad arguments, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.array([[3., 0.], [4., 5.]])
      >>> q, r = dense.qr(a)
      >>> bool(jnp.allclose(q @ r, a, atol=1e-6))
      True
    """
    caller = "qr"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs,
                               in_specs=in_specs, square=False, flags=dict(
        return_status=return_status, pad=pad, donate=donate))
    q, r, info = run(_qr_body, (layout,), (a,), bool(donate))
    return with_status(caller, [q, r], info, return_status)


def qr_shardmap_ctx(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    pad: bool = True,
) -> tuple[Any, Any, Any]:
    """`qr` for a caller-owned ``jax.jit``: ``(Q, R, status)``.

    JAXMg's ``qr_shardmap_ctx`` (1.4). ``Q`` has ``a``'s shape (``m >= n``), so the outer
    ``jax.jit(..., donate_argnums=...)`` can alias a donated ``a`` into it; no work output is
    needed. Nothing is donated by this function itself.

    Args:
      a, T_A, mesh, matrix_specs, in_specs, pad: as for `qr`.

    Returns:
      ``(Q, R, status)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> q, r, status = jax.jit(dense.qr_shardmap_ctx)(jnp.array([[3., 0.], [4., 5.]]))
      >>> int(status), r.shape
      (0, (2, 2))
    """
    return qr(a, T_A, mesh, matrix_specs, in_specs=in_specs, return_status=True, pad=pad)
