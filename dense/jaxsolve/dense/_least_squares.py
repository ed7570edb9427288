"""Least squares: the minimum-norm solution of an ``(m, n)`` system, by QR (``gels``)."""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import NamedSharding, PartitionSpec

from jaxsolve import autodiff

from . import _backend
from ._arguments import Layout, constrain, prepare_matrix, prepare_rhs
from ._compile import run
from ._status import checked_finite, fill_failed, not_finite_unless, with_status


def _solution_sharding(layout: Layout, rows: int) -> NamedSharding | None:
    """``x`` (``rows`` rows) replicated (`Layout.replicate_solution`), else split like ``b``
    where its rows divide evenly, else replicated."""
    if layout.replicate_solution:
        return layout.replicated()
    if layout.mesh is None or layout.rhs_spec is None:
        return None
    row_axis, *rest = tuple(layout.rhs_spec)
    if row_axis is not None and rows % layout.mesh.shape[row_axis]:
        row_axis = None
    return NamedSharding(layout.mesh, PartitionSpec(row_axis, *rest))


def _least_squares_body(layout, a, b):
    gels = _backend.services("least_squares", layout, a.dtype)
    finite, (a, b) = checked_finite(
        (constrain(a, layout.matrix_sharding()), constrain(b, layout.rhs_sharding())))
    x = autodiff.lstsq(a, b, solve_least_squares=gels.compute)
    info = not_finite_unless(finite, gels.info((a, b), (x,)))
    (x,) = fill_failed(info, x)
    x = constrain(x, _solution_sharding(layout, a.shape[1]))
    return (x, constrain(info, layout.replicated())), ()


def least_squares(
    a: Any,
    b: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: tuple[Any, Any] | None = None,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
    replicate_x: bool = True,
) -> Any:
    r"""Least-squares (``m >= n``) or minimum-norm (``m < n``) solution of ``A x = b`` (``gels``).

    JAXMg's ``least_squares`` (which takes ``m >= n`` only), through a QR factorization; for a
    full-rank ``A`` it equals ``jnp.linalg.lstsq(a, b)[0]``. Derivatives are
    `jaxsolve.autodiff.lstsq`'s (the normal equations differentiated, ``N⁻¹`` applied by two
    more calls of the routine). A rank-deficient ``A`` gives NaN and ``info``, the first zero
    diagonal element of ``R``.

    Args:
      a: ``(m, n)`` full-rank matrix, sharded as for `potrs` (each split dimension divisible).
      b: ``(m,)`` or ``(m, k)``, the dtype of ``a``, split by rows like ``a`` or replicated.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: as for `potrs`.
      return_status: also return the `Status`: ``Status.NOT_FINITE`` where ``a`` or ``b``
        holds NaN or Inf (checked before the QR).
      pad: as for `potrs`.
      donate: donate ``a``'s and ``b``'s buffers; both are deleted.
      replicate_x: as for `potrs`: ``x`` replicated (JAXMg's placement), or with False split
        like ``b`` where ``n`` allows.

    Returns:
      ``x``, ``(n,)`` or ``(n, k)`` (see `replicate_x`); or ``(x, status)``.

    Raises:
      ValueError: for bad arguments, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.array([[1., 0.], [1., 1.], [1., 2.], [1., 3.]])
      >>> x = dense.least_squares(a, jnp.array([1., 2., 3., 4.]))
      >>> bool(jnp.allclose(x, jnp.array([1., 1.])))
      True
    """
    caller = "least_squares"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs, square=False,
                               in_specs=in_specs, flags=dict(
                                   return_status=return_status, pad=pad, donate=donate,
                                   replicate_x=replicate_x))
    b, layout = prepare_rhs(caller, a, b, layout, in_specs, replicate_x=replicate_x)
    x, info = run(_least_squares_body, (layout,), (a, b), bool(donate),
                  replicated_outputs=(0,) if replicate_x else ())
    return with_status(caller, [x], info, return_status)


def least_squares_shardmap_ctx(
    a: Any,
    b: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: tuple[Any, Any] | None = None,
    pad: bool = True,
) -> tuple[Any, Any, Any, Any]:
    """`least_squares` for a caller-owned ``jax.jit`` that donates ``a`` and ``b``.

    JAXMg's ``least_squares_shardmap_ctx`` (1.4): ``(a_work, b_work, x, status)``, where
    ``a_work`` and ``b_work`` are outputs of ``a``'s and ``b``'s shapes (here ``a`` and ``b``
    themselves) for the outer ``jax.jit(..., donate_argnums=(0, 1))`` to alias them into;
    treat them as opaque. ``x`` comes back split like ``b`` where ``n`` allows. Nothing is
    donated by this function itself.

    Args:
      a, b, T_A, mesh, matrix_specs, in_specs, pad: as for `least_squares`.

    Returns:
      ``(a_work, b_work, x, status)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.array([[1., 0.], [1., 1.], [1., 2.], [1., 3.]])
      >>> _, _, x, status = jax.jit(dense.least_squares_shardmap_ctx)(a, 1 + jnp.arange(4.))
      >>> bool(jnp.allclose(x, jnp.array([1., 1.]))), int(status)
      (True, 0)
    """
    x, status = least_squares(a, b, T_A, mesh, matrix_specs, in_specs=in_specs,
                              return_status=True, pad=pad, replicate_x=False)
    return a, b, x, status
