"""Argument checks shared by the rules; errors name the public function."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp


def checked_matrix(
    a: Any, *, caller: str, name: str = "a", square: bool = False
) -> jax.Array:
    """``a`` as an array, after checking that it is an inexact matrix.

    Raises:
        ValueError: if ``a`` is not 2-D, or not square when ``square``.
        TypeError: if ``a`` is not floating or complex.
    """
    a = jnp.asarray(a)
    if a.ndim != 2 or (square and a.shape[0] != a.shape[1]):
        kind = "a square (n, n)" if square else "an (m, n)"
        raise ValueError(
            f"{caller}: {name} must be {kind} matrix, got shape {a.shape};"
            " use jax.vmap for stacks of matrices."
        )
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        raise TypeError(
            f"{caller}: {name} must have a floating or complex dtype, got {a.dtype}."
        )
    return a


def check_service_outputs(
    outputs: Any,
    expected: list[tuple[tuple[int, ...], Any]],
    *,
    caller: str,
    service: str,
) -> None:
    """Raises unless a service's outputs have the ``(shape, dtype)`` expected.

    Args:
        outputs: ``jax.eval_shape`` of the service call.
        expected: one ``(shape, dtype)`` per output, in order.
        caller: the public function, named in the error.
        service: the argument the service was passed as, named in the error.

    Raises:
        ValueError: if the number of outputs or a shape differs.
        TypeError: if a dtype differs.
    """
    leaves = jax.tree.leaves(outputs)
    if len(leaves) != len(expected):
        raise ValueError(
            f"{caller}: `{service}` must return {len(expected)} arrays, got"
            f" {len(leaves)}."
        )
    for index, (leaf, (shape, dtype)) in enumerate(zip(leaves, expected)):
        if leaf.shape != shape:
            raise ValueError(
                f"{caller}: output {index} of `{service}` must have shape"
                f" {shape}, got {leaf.shape}."
            )
        if leaf.dtype != dtype:
            raise TypeError(
                f"{caller}: output {index} of `{service}` must have dtype"
                f" {jnp.dtype(dtype)}, got {leaf.dtype}."
            )
