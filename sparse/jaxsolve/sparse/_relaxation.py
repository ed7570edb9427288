"""Relaxations: the smoothers of the AMG cycle and the stationary solvers of AmgX.

A relaxation sweep improves ``x`` for ``A x = b`` with a cheap approximate inverse:

* ``BLOCK_JACOBI``: ``x ← x + ω D⁻¹ (b − A x)``, ``D = diag(A)`` (damped Jacobi;
  AmgX's name, with 1 × 1 blocks for scalar systems).
* ``JACOBI_L1``: ``x ← x + ω D_ℓ1⁻¹ (b − A x)``, ``D_ℓ1[i] = Σⱼ |a_ij|``; convergent for
  every symmetric positive definite ``A`` without a damping estimate.
* ``CHEBYSHEV_POLY``: a Chebyshev polynomial of degree ``chebyshev_polynomial_order`` in
  ``D⁻¹A``, damping the spectrum in ``[λ/30, λ]`` with ``λ`` the Gershgorin bound
  ``maxᵢ Σⱼ |a_ij| / |a_ii|`` of ``ρ(D⁻¹A)``.  One sweep costs that many products with ``A``.

:func:`relaxation_data` computes what a relaxation needs from ``A``'s values (jit-able, so
it is part of the numeric re-setup); :func:`relax` applies sweeps.  A sweep from ``x = 0``
skips its product with ``A`` (``b − A·0 = b``), which saves one product per level and cycle.
Rows with a zero diagonal (decoupled rows of a coarse level whose basis function vanished)
are left unchanged rather than divided by zero.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ._config import RelaxationConfig
from ._csr_arrays import CsrArrays

CHEBYSHEV_LOWER_FRACTION = 1 / 30


class RelaxationData(NamedTuple):
    """What :func:`relax` needs from ``A``: a row scaling and, for Chebyshev, its interval.

    Attributes:
      scale: ``(n,)``: ``ω / d`` (Jacobi), ``ω / d_ℓ1`` (ℓ1-Jacobi) or ``1 / d`` (Chebyshev),
        zero on rows whose divisor is zero.
      interval: ``(2,)``: the eigenvalue interval of ``D⁻¹A`` a Chebyshev sweep damps
        (zeros for the Jacobis, which do not use it), in ``A``'s dtype like every array of
        a setup.
    """

    scale: jax.Array
    interval: jax.Array


def relaxation_data(
    a: CsrArrays, diagonal: jax.Array, config: RelaxationConfig
) -> RelaxationData:
    """The :class:`RelaxationData` of ``config``'s relaxation for ``A`` (jit-able)."""
    interval = jnp.zeros(2, a.values.dtype)
    if config.solver == "BLOCK_JACOBI":
        scale = _safe_inverse(diagonal) * config.relaxation_factor
    elif config.solver == "JACOBI_L1":
        l1 = jax.ops.segment_sum(
            jnp.abs(a.values), a.row_ids, num_segments=a.n_rows, indices_are_sorted=True
        )
        scale = _safe_inverse(l1).astype(a.values.dtype) * config.relaxation_factor
    else:  # CHEBYSHEV_POLY
        scale = _safe_inverse(diagonal)
        row_sums = jax.ops.segment_sum(
            jnp.abs(a.values * scale[a.row_ids]), a.row_ids, num_segments=a.n_rows,
            indices_are_sorted=True,
        )
        upper = jnp.max(row_sums)
        interval = jnp.stack([upper * CHEBYSHEV_LOWER_FRACTION, upper]).astype(a.values.dtype)
    return RelaxationData(scale=scale.astype(a.values.dtype), interval=interval)


def relax(
    matvec,
    data: RelaxationData,
    config: RelaxationConfig,
    b: jax.Array,
    x: jax.Array | None,
    sweeps: int,
) -> jax.Array:
    """``sweeps`` sweeps of the relaxation on ``A x = b`` from ``x`` (``None``: zero)."""
    for _ in range(sweeps):
        if config.solver == "CHEBYSHEV_POLY":
            x = _chebyshev(matvec, data, config.chebyshev_polynomial_order, b, x)
        elif x is None:
            x = data.scale * b
        else:
            x = x + data.scale * (b - matvec(x))
    return jnp.zeros_like(b) if x is None else x


def _chebyshev(matvec, data: RelaxationData, degree: int, b: jax.Array,
               x: jax.Array | None) -> jax.Array:
    """Chebyshev iteration (Saad, *Iterative Methods*, Alg. 12.1) for ``D⁻¹A`` on its interval."""
    dtype = b.dtype
    lower, upper = data.interval[0].real, data.interval[1].real
    theta, delta = (upper + lower) / 2, (upper - lower) / 2
    sigma = theta / delta
    rho = 1 / sigma
    residual = data.scale * (b if x is None else b - matvec(x))
    direction = residual / theta.astype(dtype)
    x = jnp.zeros_like(b) if x is None else x
    for step in range(degree):
        x = x + direction
        if step == degree - 1:
            break
        residual = residual - data.scale * matvec(direction)
        rho_next = 1 / (2 * sigma - rho)
        direction = ((rho_next * rho).astype(dtype) * direction
                     + (2 * rho_next / delta).astype(dtype) * residual)
        rho = rho_next
    return x


def _safe_inverse(d: jax.Array) -> jax.Array:
    return jnp.where(d != 0, 1 / jnp.where(d != 0, d, 1), 0)
