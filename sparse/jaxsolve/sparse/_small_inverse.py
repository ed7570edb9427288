"""Inverses of a batch of small matrices, without LAPACK.

The block smoothers invert one ``k × k`` diagonal block per node (``k = block_dim``,
typically 2–6) in the numeric setup: thousands to millions of tiny matrices.
``jnp.linalg.inv`` hands such a batch to LAPACK's ``getrf`` through JAX's batched CPU
FFI (``jax::ParallelBatchMap``, which spreads the batch over XLA CPU's intra-op thread
pool); on a 2-core machine the numeric setup of a 26 460-row elasticity system hung there
three times, one worker inside the batched LU and every other thread idle.

:func:`small_inverse` is Gauss–Jordan elimination with partial pivoting, unrolled over the
``k`` columns (``k`` is static) in elementwise operations over the batch, which XLA fuses:
no custom call and no nested parallelism.  On 2 CPU cores it is about 3× faster than the
LAPACK path for 10⁴ blocks of ``k ≤ 3`` and at most about 2.5× slower for 3·10⁵ blocks of
``k = 6–8`` (a small part of the setup either way); its cost grows as ``k³`` per matrix,
so it is meant for small ``k`` only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["small_inverse"]


def small_inverse(matrices: jax.Array) -> jax.Array:
    """The inverse of each ``k × k`` matrix of a batch, by Gauss–Jordan elimination.

    Partial pivoting: step ``j`` swaps into row ``j`` the row (of ``j, …, k − 1``) with the
    largest ``|a_ij|``, the row exchanges of an LU factorization, so a zero or tiny leading
    entry costs no accuracy.  A singular matrix (a zero pivot) gets non-finite entries, as from
    ``jnp.linalg.inv``; callers that expect singular blocks make them regular first.
    Differentiable, and jit- and vmap-able.

    Args:
      matrices: ``(..., k, k)`` floating or complex array, ``k`` small (at most about 8).

    Returns:
      ``(..., k, k)`` array of the inverses, of ``matrices``' dtype.

    Examples:
      >>> import jax.numpy as jnp
      >>> small_inverse(jnp.array([[[0.0, 2.0], [4.0, 0.0]]]))
      Array([[[0.  , 0.25],
              [0.5 , 0.  ]]], dtype=float32)
    """
    *_, k, columns = matrices.shape
    if k != columns:
        raise ValueError(f"small_inverse: matrices must be square, got shape {matrices.shape}.")
    identity = jnp.broadcast_to(jnp.eye(k, dtype=matrices.dtype), matrices.shape)
    augmented = jnp.concatenate([matrices, identity], axis=-1)  # [A | I] → [I | A⁻¹]
    rows = jnp.arange(k).reshape((1,) * (matrices.ndim - 2) + (k,))  # row numbers, batch-aligned
    for j in range(k):
        candidates = jnp.where(rows >= j, jnp.abs(augmented[..., :, j]), -1)
        is_pivot = (rows == jnp.argmax(candidates, axis=-1)[..., None])[..., None]
        pivot_row = jnp.sum(jnp.where(is_pivot, augmented, 0), axis=-2)
        row_j = augmented[..., j, :]
        augmented = jnp.where(is_pivot, row_j[..., None, :], augmented)  # the pivot → row j
        pivot_row = pivot_row / pivot_row[..., j:j + 1]
        is_j = (rows == j)[..., None]
        augmented = jnp.where(is_j, pivot_row[..., None, :], augmented)
        factors = jnp.where(rows == j, 0, augmented[..., :, j])
        augmented = augmented - factors[..., :, None] * pivot_row[..., None, :]
    return augmented[..., k:]
