"""A decomposition computed by a service and differentiated by a closed-form rule."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

# ``tangents(operands, operand_tangents, outputs) -> output tangents``.
TangentRule = Callable[[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]]


def decomposition_rule(tangents: TangentRule) -> Callable[..., tuple[Any, ...]]:
    """``rule(decompose, *operands)``: a service's decomposition, differentiated by `tangents`.

    ``rule(decompose, *operands)`` returns ``decompose(*operands)`` as a tuple. The service
    ``decompose`` (``geqrf``, ``gesvd``, ``syevd``, an FFI call) is never differentiated:
    JAX differentiates ``rule`` by ``tangents(operands, operand_tangents, outputs)``, which
    returns the outputs' tangents, one per output, from closed-form formulas (JAX's own for
    ``qr``, ``svd`` and ``eigh``). ``outputs`` inside a JVP come from ``rule`` itself, so that
    second and higher derivatives differentiate ``tangents``' formulas by this rule again.

    ``decompose`` is a static argument: pass the same callable to reuse compiled code.

    Examples:
      A square root "service" with ``d√x = ẋ / (2 √x)``:

      >>> import jax, jax.numpy as jnp
      >>> def square_root_tangents(operands, operand_tangents, outputs):
      ...     (x_dot,), (root,) = operand_tangents, outputs
      ...     return (x_dot / (2 * root),)
      >>> square_root = decomposition_rule(square_root_tangents)
      >>> service = lambda x: (jnp.sqrt(x),)
      >>> float(jax.grad(lambda x: square_root(service, x)[0])(4.))
      0.25
      >>> float(jax.grad(jax.grad(lambda x: square_root(service, x)[0]))(4.))  # -x^(-3/2) / 4
      -0.03125
    """

    @functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
    def rule(decompose: Callable[..., Any], *operands: Any) -> tuple[Any, ...]:
        return tuple(decompose(*operands))

    @rule.defjvp
    def _rule_jvp(decompose, operands, operand_tangents):
        outputs = rule(decompose, *operands)
        return outputs, tuple(tangents(operands, operand_tangents, outputs))

    return rule
