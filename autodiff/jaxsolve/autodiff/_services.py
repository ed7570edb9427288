"""Solve services: how a derivative rule calls a solver.

A *solve service* is a plain callable ``service(operator, rhs) -> x`` that a
solver package hands to a rule of this package: a sparse AMG-Krylov solve, a
distributed ``potrs`` with a kept factor, a least-squares ``gels``.  It
receives the primal operator (so that it can build or reuse a preconditioner
or a factor) and right-hand sides of shape ``(rows, k)``: ``k`` columns solved
at once.  A service that can only solve one vector at a time is lifted with
``jax.vmap(service, in_axes=(None, 1), out_axes=1)``.

The rules call services on primal values only.  Derivatives come from further
service calls (implicit function theorem), never from differentiating a
service, so a service may be a ``lax.while_loop``, an FFI call or a host
callback.  :func:`solve_on_columns` wraps a service so that this holds under
every JAX transformation:

* Differentiating the wrapped service raises a ``TypeError`` instead of
  silently differentiating through the solver's iterations.
* ``jax.vmap`` over right-hand sides only (the operator is shared) becomes
  *one* service call with the batch folded into extra columns: ``m`` vmapped
  right-hand sides of shape ``(rows, k)`` are solved as one ``(rows, m * k)``
  block.
* ``jax.vmap`` over a stack of systems (some leaf of the operator batched)
  becomes ``jax.vmap`` of the service itself, so the service author decides
  how stacks of systems are batched (a batched FFI call, a vmapped
  ``while_loop``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

SolveService = Callable[[Any, jax.Array], jax.Array]


def solve_on_columns(service: SolveService, name: str) -> SolveService:
    """Wraps a solve service for use inside a derivative rule.

    Args:
        service: ``service(operator, rhs) -> x`` with ``rhs`` of shape
            ``(rows, k)`` and ``x`` of shape ``(cols, k)``.
        name: the argument name the caller passed the service as, used in the
            error raised when the service is differentiated.

    Returns:
        A callable with the same signature that also accepts a 1-D ``rhs`` of
        shape ``(rows,)`` (returning ``(cols,)``), batches right-hand sides
        into columns under ``jax.vmap`` and refuses to be differentiated.
    """

    def on_columns(operator, rhs):
        if rhs.ndim == 1:
            return service(operator, rhs[:, None])[:, 0]
        return service(operator, rhs)

    batched = jax.custom_batching.custom_vmap(on_columns)

    @batched.def_vmap
    def _batch_rule(axis_size, in_batched, operator, rhs):
        del axis_size
        operator_batched, rhs_batched = in_batched
        if not any(jax.tree.leaves(operator_batched)):
            # Only the right-hand sides are batched: solve them as extra
            # columns of one call.  Calling `batched` (not `service`) lets an
            # enclosing vmap fold its own batch axis the same way.
            columns = jnp.moveaxis(rhs, 0, -1)
            solution = batched(operator, columns.reshape(columns.shape[0], -1))
            solution = solution.reshape(solution.shape[:1] + columns.shape[1:])
            return jnp.moveaxis(solution, -1, 0), True
        operator_axes = jax.tree.map(
            lambda is_batched: 0 if is_batched else None, operator_batched
        )
        in_axes = (operator_axes, 0 if rhs_batched else None)
        return jax.vmap(on_columns, in_axes=in_axes)(operator, rhs), True

    return _opaque(batched, name)


def _opaque(service: Callable[..., Any], name: str) -> Callable[..., Any]:
    """Makes ``service`` raise a ``TypeError`` when JAX differentiates it."""

    @jax.custom_jvp
    def call(*args):
        return service(*args)

    @call.defjvp
    def _refuse_to_differentiate(primals, tangents):
        del primals, tangents
        raise TypeError(
            f"jaxsolve.autodiff: the `{name}` service was differentiated."
            " Services are black boxes: derivatives come from extra solves,"
            " never from a solver's internals. This happens when a"
            " reverse-only rule (`mode='adjoint'`) is differentiated a second"
            " time; use `mode='jvp'` for higher orders."
        )

    return call

