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


def solve_on_columns(
    service: SolveService, name: str, *, has_aux: bool = False
) -> SolveService:
    """Wraps a solve service for use inside a derivative rule.

    Args:
        service: ``service(operator, rhs) -> x`` with ``rhs`` of shape
            ``(rows, k)`` and ``x`` of shape ``(cols, k)``; with ``has_aux``,
            ``service(operator, rhs) -> (x, aux)``, where ``aux`` is a pytree
            of arrays that each have a leading axis of length ``k``: one entry
            per column (an iteration count, a status, ...).
        name: the argument name the caller passed the service as, used in the
            error raised when the service is differentiated.
        has_aux: whether the service also returns per-column ``aux``.

    Returns:
        A callable with the same signature that also accepts a 1-D ``rhs`` of
        shape ``(rows,)`` (returning ``(cols,)``, and ``aux`` without its
        column axis), batches right-hand sides into columns under ``jax.vmap``
        (``aux`` gains the batch axis in front, like ``x``) and refuses to be
        differentiated.
    """

    def on_columns(operator, rhs):
        if rhs.ndim == 1:
            out = service(operator, rhs[:, None])
            if has_aux:
                x, aux = out
                return x[:, 0], jax.tree.map(lambda leaf: leaf[0], aux)
            return out[:, 0]
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
            out = batched(operator, columns.reshape(columns.shape[0], -1))
            solution, aux = out if has_aux else (out, None)
            solution = solution.reshape(solution.shape[:1] + columns.shape[1:])
            solution = jnp.moveaxis(solution, -1, 0)
            if not has_aux:
                return solution, True
            # aux leaves hold one entry per folded column, (k * m, ...) -> (m, k, ...).
            aux = jax.tree.map(
                lambda leaf: jnp.moveaxis(
                    leaf.reshape(columns.shape[1:] + leaf.shape[1:]),
                    len(columns.shape) - 2,
                    0,
                ),
                aux,
            )
            return (solution, aux), (True, jax.tree.map(lambda _: True, aux))
        operator_axes = jax.tree.map(
            lambda is_batched: 0 if is_batched else None, operator_batched
        )
        in_axes = (operator_axes, 0 if rhs_batched else None)
        out = jax.vmap(on_columns, in_axes=in_axes)(operator, rhs)
        return out, jax.tree.map(lambda _: True, out)

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

