"""Dense-matrix helpers shared by the rules, at full precision."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def dense_matvec(a: jax.Array, x: jax.Array) -> jax.Array:
    """``a @ x`` at full precision (no TF32 on GPUs): a dense operator's matvec."""
    return jnp.matmul(a, x, precision=jax.lax.Precision.HIGHEST)


def conj_transpose(a: jax.Array) -> jax.Array:
    """``aᴴ``, the conjugate transpose of a matrix."""
    return jnp.conj(a).T


def hermitian_part(a: jax.Array) -> jax.Array:
    """``(a + aᴴ) / 2``: projects a square matrix onto Hermitian matrices."""
    return (a + conj_transpose(a)) / 2
