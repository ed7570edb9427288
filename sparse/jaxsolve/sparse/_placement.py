"""Arrays sent to a device placed as the values they go with, committed or not.

JAX *commits* an array to its device when it is put there by name (``jax.device_put(x,
device)``) or computed from a committed one; an array it places by default (``jnp.asarray``,
``jax.device_put(x)``) is uncommitted. A compiled program is specialized to which of its
arguments are committed: the same shapes, committed in one call and not in the next,
compile the program twice. A solve's program takes the user's values (or arrays computed
from them) beside arrays jaxsolve sends to the device itself — values padded on the host, a
device setup's index arrays — and those are placed as the values are (:func:`placed_like`),
so that every call of a kind runs one program: at 3D Poisson 16³ a solve's program
compiles in 0.3–1.1 s on two CPU cores. (The digests a solve compares, computed or sent,
are committed to the device whatever the values: ``_setup.SetupState.key_check``.)
"""

from __future__ import annotations

from typing import Any

import jax


def placed_like(tree: Any, like: jax.Array) -> Any:
    """``tree`` (host arrays) sent to the device of ``like``, a concrete array on one
    device, committed to it only if ``like`` is (see the module)."""
    device = next(iter(like.devices()))
    with jax.ensure_compile_time_eval():  # concrete, also while a caller's jit traces
        if like.committed:
            return jax.device_put(tree, device)
        with jax.default_device(device):
            return jax.device_put(tree)
