"""A hash of the index: vectors that behave as random ones, drawn without a generator.

``jax.random``'s generator compiles threefry into every program that draws from it, a few
kernels for each shape drawn; a solve's accuracy test (its ``‖A‖`` estimate) and a numeric
setup's power iterations each drew one (issue 29).  What they need is a fixed vector whose
entries look independent and uniformly distributed, the same in every program, entry ``i``
a function of ``i`` alone (so the first ``m`` entries of a long vector are the vector of
``m``).  MurmurHash3's 32-bit finalizer of the index gives that in a few integer
operations, one fused kernel: every output bit depends on every input bit, so consecutive
indices get unrelated values, and it is a bijection of the uint32 numbers: no two
entries alike. :func:`pair_hash` hashes pairs of indices with the same finalizer: the
device setup's matching breaks its last ties between couplings by it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["index_hash", "mix32", "pair_hash"]


def index_hash(n: int) -> jax.Array:
    """MurmurHash3's 32-bit finalizer (``fmix32``) of ``0, 1, ..., n - 1``.

    Args:
      n: the length (static).

    Returns:
      An ``(n,)`` uint32 array; entry ``i`` depends on ``i`` only.
    """
    return mix32(lax.iota(jnp.uint32, n))


def mix32(h: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finalizer (``fmix32``) of each entry of the uint32 ``h``: a
    bijection of the uint32 numbers whose every output bit depends on every input bit.

    >>> [hex(int(x)) for x in mix32(jnp.array([0, 1], jnp.uint32))]
    ['0x0', '0x514e28b7']
    """
    for shift, multiplier in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = (h ^ (h >> shift)) * jnp.uint32(multiplier)
    return h ^ (h >> 16)


def pair_hash(a: jax.Array, b: jax.Array) -> jax.Array:
    """A hash of each pair ``(a, b)`` of non-negative int32 arrays: ``mix32(mix32(a) ^ b)``,
    uint32.

    Pairs with the same ``a`` (or the same ``b``) hash to distinct values, as ``mix32`` and
    ``^ b`` are bijections; ``(a, b)`` and ``(b, a)`` differ in general.

    Args:
      a, b: integer arrays of one shape (cast to uint32).

    Returns:
      A uint32 array of their shape.
    """
    return mix32(mix32(a.astype(jnp.uint32)) ^ b.astype(jnp.uint32))
