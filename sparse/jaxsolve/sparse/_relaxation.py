"""Relaxations: the smoothers of the AMG cycle and the stationary solvers of AmgX.

A relaxation sweep improves ``x`` for ``A x = b`` with a cheap approximate inverse:

* ``BLOCK_JACOBI``: ``x ← x + ω D⁻¹ (b − A x)``, ``D = diag(A)`` (damped Jacobi;
  AmgX's name, with 1 × 1 blocks for scalar systems).
* ``JACOBI_L1``: ``x ← x + ω D_ℓ1⁻¹ (b − A x)``, ``D_ℓ1[i] = Σⱼ |a_ij|``; convergent for
  every symmetric positive definite ``A`` without a damping estimate.
* ``CHEBYSHEV_POLY``: a Chebyshev polynomial of degree ``chebyshev_polynomial_order`` in
  ``D⁻¹A``, damping the spectrum in ``[λ/30, λ]`` with ``λ`` the Gershgorin bound
  ``maxᵢ Σⱼ |a_ij| / |a_ii|`` of ``ρ(D⁻¹A)``.  One sweep costs that many products with ``A``.
* ``MULTICOLOR_GS``: Gauss-Seidel in the order of a distance-1 coloring of ``A``'s graph
  (:func:`._coloring.color_graph_on_device`, computed with the rest of the numeric setup):
  ``x_c ← x_c + ω D_c⁻¹ (b − A x)_c`` for each color ``c``, the unknowns of one color at
  once; ``symmetric_gs`` sweeps the colors forward, then backward.
* ``MULTICOLOR_DILU``: ``x ← x + ω M⁻¹ (b − A x)`` with ``M = (E + L) E⁻¹ (E + U)``, ``L``
  (``U``) the entries of ``A`` whose column has an earlier (later) color than their row,
  and ``E`` the diagonal with ``diag(M) = diag(A)``: ``e_i = a_ii − Σ_{j earlier} a_ij
  a_ji / e_j`` (AmgX's DILU).  ``M⁻¹`` is a forward and a backward substitution by colors.

On a block system (``block_dim = k > 1``, unknowns numbered node-major) ``BLOCK_JACOBI``
is block-Jacobi, ``D`` the ``k × k`` diagonal blocks of ``A``, each inverted in the numeric
setup (AmgX's ``BLOCK_JACOBI`` on a block matrix), and ``JACOBI_L1`` adds to ``D``'s diagonal
each row's ``Σ |a_ij|`` over the columns outside its block (hypre's ℓ1 block-Jacobi).  The
other relaxations stay pointwise.

Each color of the multicolor smoothers costs one product with ``A`` (with the rows of the
other colors masked), so a sweep costs as many products as there are colors.

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

from ._coloring import color_graph_on_device
from ._config import RelaxationConfig
from ._csr_arrays import CsrArrays

CHEBYSHEV_LOWER_FRACTION = 1 / 30


class RelaxationData(NamedTuple):
    """What :func:`relax` needs from ``A``: a row scaling and, for Chebyshev, its interval.

    Attributes:
      scale: ``(n,)``: ``ω / d`` (Jacobi), ``ω / d_ℓ1`` (ℓ1-Jacobi) or ``1 / d`` (Chebyshev),
        zero on rows whose divisor is zero; or ``(n / k, k, k)``: ``ω D⁻¹``, the inverted
        diagonal blocks of a block system's Jacobis.
      interval: ``(2,)``: the eigenvalue interval of ``D⁻¹A`` a Chebyshev sweep damps
        (zeros for the Jacobis, which do not use it), in ``A``'s dtype like every array of
        a setup.
      colors, n_colors: the multicolor smoothers' coloring ``(n,)`` and its size (else None);
        ``scale`` is then ``1 / d`` (GS) or ``1 / e`` (DILU), undamped.
      lower, upper: DILU's ``L`` and ``U``: ``A`` with the other entries zeroed (else None).
    """

    scale: jax.Array
    interval: jax.Array
    colors: jax.Array | None = None
    n_colors: jax.Array | None = None
    lower: CsrArrays | None = None
    upper: CsrArrays | None = None


def relaxation_data(
    a: CsrArrays, diagonal: jax.Array, config: RelaxationConfig, *, block_dim: int = 1
) -> RelaxationData:
    """The :class:`RelaxationData` of ``config``'s relaxation for ``A`` (jit-able), whose
    unknowns come ``block_dim`` to a node."""
    interval = jnp.zeros(2, a.values.dtype)
    if config.solver in ("MULTICOLOR_GS", "MULTICOLOR_DILU"):
        return _multicolor_data(a, diagonal, config, interval)
    if block_dim > 1 and config.solver in ("BLOCK_JACOBI", "JACOBI_L1"):
        return RelaxationData(scale=_block_inverses(a, config, block_dim), interval=interval)
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
        if config.solver == "MULTICOLOR_GS":
            x = _multicolor_gs(matvec, data, config, b, x)
        elif config.solver == "MULTICOLOR_DILU":
            residual = b if x is None else b - matvec(x)
            step = _dilu_solve(data, residual) * jnp.asarray(config.relaxation_factor, b.dtype)
            x = step if x is None else x + step
        elif config.solver == "CHEBYSHEV_POLY":
            x = _chebyshev(matvec, data, config.chebyshev_polynomial_order, b, x)
        elif x is None:
            x = _jacobi_step(data, b)
        else:
            x = x + _jacobi_step(data, b - matvec(x))
    return jnp.zeros_like(b) if x is None else x


def _jacobi_step(data: RelaxationData, residual: jax.Array) -> jax.Array:
    """A Jacobi's ``ω D⁻¹ r``: rows scaled, or ``k × k`` blocks applied."""
    if data.scale.ndim == 1:
        return data.scale * residual
    nodes, k, _ = data.scale.shape
    return jnp.einsum("nij,nj->ni", data.scale, residual.reshape(nodes, k)).reshape(-1)


def _block_inverses(a: CsrArrays, config: RelaxationConfig, k: int) -> jax.Array:
    """``ω D⁻¹`` for the ``k × k`` diagonal blocks ``D`` of ``A`` (ℓ1: ``D`` plus each row's
    ``Σ |a_ij|`` outside its block on its diagonal).

    An unknown whose row of ``D`` is zero (a decoupled coarse unknown) is left unchanged:
    its row of the inverse is zero.
    """
    rows, columns = a.row_ids, a.indices
    inside = rows // k == columns // k
    nodes = a.n_rows // k
    blocks = jnp.zeros((nodes, k, k), a.values.dtype).at[rows // k, rows % k, columns % k].add(
        jnp.where(inside, a.values, 0))
    eye = jnp.eye(k, dtype=a.values.dtype)[None]
    if config.solver == "JACOBI_L1":
        outside = jax.ops.segment_sum(jnp.where(inside, 0, jnp.abs(a.values)), rows,
                                      num_segments=a.n_rows, indices_are_sorted=True)
        blocks = blocks + outside.astype(a.values.dtype).reshape(nodes, k)[:, :, None] * eye
    decoupled = jnp.all(blocks == 0, axis=2)  # (nodes, k)
    inverse = jnp.linalg.inv(blocks + jnp.where(decoupled[:, :, None], eye, 0))
    inverse = jnp.where(decoupled[:, :, None], 0, inverse)
    return inverse * jnp.asarray(config.relaxation_factor, a.values.dtype)


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


def _multicolor_data(a: CsrArrays, diagonal: jax.Array, config: RelaxationConfig,
                     interval: jax.Array) -> RelaxationData:
    colors, n_colors = color_graph_on_device(a.indices, a.indptr, a.n_rows)
    if config.solver == "MULTICOLOR_GS":
        return RelaxationData(scale=_safe_inverse(diagonal).astype(a.values.dtype),
                              interval=interval, colors=colors, n_colors=n_colors)
    rows = a.row_ids
    row_color, column_color = colors[rows], colors[a.indices]
    lower = a._replace(values=jnp.where(column_color < row_color, a.values, 0))
    upper = a._replace(values=jnp.where(column_color > row_color, a.values, 0))
    # a_ji for each stored a_ij (0 where (j, i) is not stored): a binary search of row j.
    transposed = _transposed_values(a, rows)

    def eliminate(c, inverse_e):  # the rows of color c, from the earlier colors' e
        terms = lower.values * transposed * inverse_e[a.indices]
        e = diagonal - jax.ops.segment_sum(terms, rows, num_segments=a.n_rows,
                                           indices_are_sorted=True)
        return jnp.where(colors == c, _safe_inverse(e), inverse_e)

    inverse_e = jax.lax.fori_loop(0, n_colors, eliminate, jnp.zeros_like(diagonal))
    return RelaxationData(scale=inverse_e.astype(a.values.dtype), interval=interval,
                          colors=colors, n_colors=n_colors, lower=lower, upper=upper)


def _transposed_values(a: CsrArrays, rows: jax.Array) -> jax.Array:
    """For each stored ``a_ij``, the stored ``a_ji``, or 0 where there is none."""
    low, high = a.indptr[a.indices], a.indptr[a.indices + 1]
    last = jnp.maximum(a.indices.shape[0] - 1, 0)

    def halve(_, bounds):
        low, high = bounds
        middle = (low + high) // 2
        go_right = a.indices[jnp.minimum(middle, last)] < rows
        return jnp.where(go_right & (low < high), middle + 1, low), jnp.where(
            go_right | (low >= high), high, middle)

    low, high = jax.lax.fori_loop(0, 32, halve, (low, high))
    found = (low < a.indptr[a.indices + 1]) & (a.indices[jnp.minimum(low, last)] == rows)
    return jnp.where(found, a.values[jnp.minimum(low, last)], 0)


def _multicolor_gs(matvec, data: RelaxationData, config: RelaxationConfig, b: jax.Array,
                   x: jax.Array | None) -> jax.Array:
    """One multicolor Gauss-Seidel sweep (forward; then backward if symmetric)."""
    omega = jnp.asarray(config.relaxation_factor, b.dtype)
    x = jnp.zeros_like(b) if x is None else x

    def update(c, x):
        mine = data.colors == c
        return jnp.where(mine, x + omega * data.scale * (b - matvec(x)), x)

    x = jax.lax.fori_loop(0, data.n_colors, update, x)
    if config.symmetric_gs:
        x = jax.lax.fori_loop(0, data.n_colors,
                              lambda k, x: update(data.n_colors - 1 - k, x), x)
    return x


def _dilu_solve(data: RelaxationData, r: jax.Array) -> jax.Array:
    """``M⁻¹ r`` for DILU's ``M = (E + L) E⁻¹ (E + U)``: substitutions color by color."""
    def forward(c, y):  # (E + L) y = r
        return jnp.where(data.colors == c, data.scale * (r - data.lower.matvec(y)), y)

    y = jax.lax.fori_loop(0, data.n_colors, forward, jnp.zeros_like(r))

    def backward(k, z):  # (E + U) z = E y
        c = data.n_colors - 1 - k
        return jnp.where(data.colors == c, y - data.scale * data.upper.matvec(z), z)

    return jax.lax.fori_loop(0, data.n_colors, backward, y)
