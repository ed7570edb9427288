"""Relaxations: the smoothers of the AMG cycle and the stationary solvers of AmgX.

A relaxation sweep improves ``x`` for ``A x = b`` with a cheap approximate inverse:

* ``BLOCK_JACOBI``: ``x ← x + ω D⁻¹ (b − A x)``, ``D = diag(A)`` (damped Jacobi;
  AmgX's name, with 1 × 1 blocks for scalar systems).  Without a given ``ω``,
  ``ω = 4 / (3 ρ(D⁻¹A))`` from ``POWER_ITERATIONS`` steps of power iteration in the
  numeric setup (:func:`spectral_radius`), so that the sweep smooths whatever the
  spectrum: a fixed ``ω`` diverges where ``ω ρ(D⁻¹A) ≥ 2``.
* ``JACOBI_L1``: ``x ← x + ω D_ℓ1⁻¹ (b − A x)``, ``D_ℓ1[i] = Σⱼ |a_ij|``; convergent for
  every symmetric positive definite ``A`` without a damping estimate.
* ``CHEBYSHEV_POLY``: a Chebyshev polynomial of degree ``chebyshev_polynomial_order`` in
  ``D⁻¹A``, damping the spectrum in ``[λ/10, λ]``: ``λ`` is ``1.1 ρ̂``, ``ρ̂`` the power
  iteration's estimate of ``ρ(D⁻¹A)`` (the Jacobi damping's; PyAMG's and hypre's margin
  for its underestimate).  One sweep costs that many products with ``A``.  The interval
  was ``[λ/30, λ]`` with ``λ`` the Gershgorin bound ``maxᵢ Σⱼ |a_ij| / |a_ii|`` (PyAMG's
  fraction); on ``tools/bench/sparse_suite.py``'s Hermitian problems (medium, PCG,
  V(1, 1)) degree 2 took 13 iterations on 3D Poisson, 13 on 2D elasticity, 14 on the
  coefficient jump and 16 on the 3D unstructured mesh, now 7, 8, 9 and 14 (degree 3: 9, 9,
  10, 11 → 5, 7, 8, 11).  A lower fraction of 0.3 (hypre's) did as well on Poisson and
  worse on the unstructured meshes (17 at degree 2).
* ``MULTICOLOR_GS``: Gauss-Seidel in the order of a distance-1 coloring of ``A``'s graph,
  ``x_c ← x_c + ω D_c⁻¹ (b − A x)_c`` for each color ``c``, the unknowns of one color at
  once; ``symmetric_gs`` sweeps the colors forward, then backward.  A cycle's
  post-smoothing sweeps them backward, so that pre- and post-smoothing are adjoint and the
  cycle symmetric, as PCG needs (AmgX sweeps forward in both; see :mod:`._cycle`).
* ``MULTICOLOR_DILU``: ``x ← x + ω M⁻¹ (b − A x)`` with AmgX's DILU ``M = (E + L) E⁻¹
  (E + U)``, ``L`` (``U``) the entries of ``A`` whose column has an earlier (later) color
  than their row.

On a block system (``block_dim = k > 1``, unknowns numbered node-major) ``BLOCK_JACOBI``
is block-Jacobi, ``D`` the ``k × k`` diagonal blocks of ``A``, each inverted in the numeric
setup (AmgX's ``BLOCK_JACOBI`` on a block matrix; without LAPACK, by
:func:`~._small_inverse.small_inverse`), and ``JACOBI_L1`` adds to ``D``'s diagonal each
row's ``Σ |a_ij|`` over the columns outside its block (hypre's ℓ1 block-Jacobi).  The
other relaxations stay pointwise.

The multicolor smoothers live in :mod:`._multicolor`: their coloring is host work of the
structure (a :class:`~._multicolor.MulticolorOrdering`), and a pass over the colors is one
loop whose body updates a chunk of one color's rows, touching only those rows of ``A``: a
sweep costs a small multiple of one product with ``A``, and compiles to the same program
whatever the number of colors.

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
from ._index_hash import index_hash
from ._multicolor import (MULTICOLOR_SMOOTHERS, MulticolorArrays, MulticolorData,
                          multicolor_data, multicolor_relax, safe_inverse)
from ._small_inverse import small_inverse

# The Chebyshev smoother's interval: [λ · CHEBYSHEV_LOWER_FRACTION, λ], λ the estimated
# ρ(D⁻¹A) times CHEBYSHEV_UPPER_MARGIN (PyAMG's and hypre's 1.1: power iteration
# underestimates ρ).
CHEBYSHEV_LOWER_FRACTION = 0.1
CHEBYSHEV_UPPER_MARGIN = 1.1
POWER_ITERATIONS = 15
# ω ρ(D⁻¹A) of an estimated damping: PyAMG's 4/3, the best smoothing of the upper half of
# the spectrum; power iteration underestimates ρ, and ω ρ stays below 2 while it errs by
# less than a third.
ESTIMATED_DAMPING = 4 / 3


class RelaxationData(NamedTuple):
    """What :func:`relax` needs from ``A``: a row scaling and, for Chebyshev, its interval.

    Attributes:
      scale: ``(n,)``: ``ω / d`` (Jacobi), ``ω / d_ℓ1`` (ℓ1-Jacobi) or ``1 / d`` (Chebyshev),
        zero on rows whose divisor is zero; or ``(n / k, k, k)``: ``ω D⁻¹``, the inverted
        diagonal blocks of a block system's Jacobis.
      interval: ``(2,)``: the eigenvalue interval of ``D⁻¹A`` a Chebyshev sweep damps
        (zeros for the Jacobis, which do not use it), in ``A``'s dtype like every array of
        a setup.
      multicolor: the multicolor smoothers' numbers (their blocks of ``A`` in the color
        order), else None; ``scale`` is then their ``1 / d`` or ``1 / e``, undamped, in the
        color order.
    """

    scale: jax.Array
    interval: jax.Array
    multicolor: MulticolorData | None = None


def relaxation_data(
    a: CsrArrays, diagonal: jax.Array, config: RelaxationConfig,
    ordering: MulticolorArrays | None = None, *, block_dim: int = 1,
    jacobi_spectral_radius: jax.Array | None = None, rows: jax.Array | None = None,
    start: jax.Array | None = None, block_positions: jax.Array | None = None,
) -> RelaxationData:
    """The :class:`RelaxationData` of ``config``'s relaxation for ``A`` (jit-able), whose
    unknowns come ``block_dim`` to a node.

    ``ordering``: for the multicolor smoothers, the device arrays of ``A``'s pattern's
    :class:`~._multicolor.MulticolorOrdering` (from the structure); unused otherwise.
    ``jacobi_spectral_radius``: an estimate of ``ρ(D⁻¹A)`` at hand (smoothed aggregation
    makes one), which a pointwise Jacobi without a given damping, or a Chebyshev smoother,
    then takes instead of estimating its own.
    ``rows``: ``A``'s true rows when it is padded to a size class (:mod:`._size_classes`),
    whose padding rows the damping's power iteration leaves out.
    ``block_positions``: for a block system, ``(n, block_dim)``: where each row's entries
    in its node's diagonal block sit among ``A``'s values (-1: not stored), from the
    structure; without them the blocks are found from the index arrays.
    ``start``: the power iteration's start (:func:`power_iteration_start`) for at least
    ``A``'s rows, when the caller has drawn one for a larger level.
    """
    interval = jnp.zeros(2, a.values.dtype)
    if config.solver in MULTICOLOR_SMOOTHERS:
        if ordering is None:
            raise ValueError(f"{config.solver} needs the multicolor ordering of A's pattern"
                             " (built with the setup's structure).")
        data = multicolor_data(ordering, a.values, diagonal)
        return RelaxationData(scale=data.scale, interval=interval, multicolor=data)
    if block_dim > 1 and config.solver in ("BLOCK_JACOBI", "JACOBI_L1"):
        inverses = _block_inverses(a, config, block_dim, block_positions)
        if config.relaxation_factor is None:
            rho = spectral_radius(a.n_rows, a.values.dtype, lambda v: _jacobi_step(
                RelaxationData(inverses, interval), a.matvec(v)), rows, start)
            inverses = inverses * _damping(rho, a.values.dtype)
        return RelaxationData(scale=inverses, interval=interval)

    def jacobi_radius(scale: jax.Array) -> jax.Array:  # ρ(D⁻¹A), D⁻¹ = diag(scale)
        if jacobi_spectral_radius is not None:
            return jacobi_spectral_radius
        return spectral_radius(a.n_rows, a.values.dtype,
                               lambda v: a.scaled_matvec(v, scale), rows, start)

    if config.solver == "BLOCK_JACOBI":
        scale = safe_inverse(diagonal)
        if config.relaxation_factor is None:
            scale = scale * _damping(jacobi_radius(scale), a.values.dtype)
        else:
            scale = scale * config.relaxation_factor
    elif config.solver == "JACOBI_L1":
        # Σⱼ |a_ij| as |A| 1: the product's kernel sums a row's entries in order, as a
        # segment sum over the rows would, without expanding the rows of the entries.
        magnitudes = jnp.abs(a.values)
        l1 = a._replace(values=magnitudes).matvec(jnp.ones(a.n_rows, magnitudes.dtype))
        scale = safe_inverse(l1).astype(a.values.dtype) * config.relaxation_factor
    else:  # CHEBYSHEV_POLY
        scale = safe_inverse(diagonal)
        upper = CHEBYSHEV_UPPER_MARGIN * jacobi_radius(scale).real
        interval = jnp.stack([upper * CHEBYSHEV_LOWER_FRACTION, upper]).astype(a.values.dtype)
    return RelaxationData(scale=scale.astype(a.values.dtype), interval=interval)


def finest_diagonal(matrix: CsrArrays) -> jax.Array:
    """The diagonal of a matrix on the device (zero where none is stored), found from its
    index arrays alone: a scatter over every entry to number its row. Where the positions
    of the diagonal entries are at hand, :func:`stored_diagonal` is one gather."""
    on_diagonal = matrix.row_ids == matrix.indices
    return jax.ops.segment_sum(jnp.where(on_diagonal, matrix.values, 0), matrix.row_ids,
                               num_segments=matrix.n_rows, indices_are_sorted=True)


def stored_diagonal(values: jax.Array, positions: jax.Array) -> jax.Array:
    """A matrix's diagonal from its ``values`` and, per row, the position of its diagonal
    entry among them (``CsrStructure.diagonal_positions``; -1, read as zero, where none is
    stored): one gather, where finding the entries from the index arrays on the device
    would scatter over every entry to number their rows."""
    return jnp.where(positions >= 0, values[jnp.maximum(positions, 0)], 0)


# A smoother's few sweeps are unrolled; AmgX's default preconditioner scope runs 100, which
# unrolled took 87 s of CPU to compile (PBICGSTAB + MULTICOLOR_DILU, 256 rows).
_UNROLLED_SWEEPS = 4


def relax(
    a: CsrArrays,
    data: RelaxationData,
    config: RelaxationConfig,
    b: jax.Array,
    x: jax.Array | None,
    sweeps: int,
    backward: bool = False,
) -> jax.Array:
    """``sweeps`` sweeps of the relaxation on ``A x = b`` from ``x`` (``None``: zero);
    ``backward``: ``MULTICOLOR_GS`` sweeps the colors in reverse order (a cycle's
    post-smoothing; every other relaxation is the same either way).

    A pointwise Jacobi sweep is one kernel (``a.relaxation_sweep``), its update formed as
    the product is written.  Up to :data:`_UNROLLED_SWEEPS` sweeps are traced one after
    another; more run in a loop.
    """
    if sweeps > _UNROLLED_SWEEPS:
        x = relax(a, data, config, b, x, 1, backward)
        return jax.lax.fori_loop(
            1, sweeps, lambda _, x: relax(a, data, config, b, x, 1, backward), x)
    if config.solver in MULTICOLOR_SMOOTHERS:
        x = multicolor_relax(a.matvec, data.multicolor, config.solver,
                             config.relaxation_factor, config.symmetric_gs, b, x, sweeps,
                             backward)
        return jnp.zeros_like(b) if x is None else x
    for _ in range(sweeps):
        if config.solver == "CHEBYSHEV_POLY":
            x = _chebyshev(a, data, config.chebyshev_polynomial_order, b, x)
        elif x is None:
            x = _jacobi_step(data, b)
        elif data.scale.ndim == 1:
            x = a.relaxation_sweep(x, b, data.scale)
        else:
            x = x + _jacobi_step(data, a.residual(x, b))
    return jnp.zeros_like(b) if x is None else x


def relax_forward_backward(a: CsrArrays, data: RelaxationData, config: RelaxationConfig,
                           b: jax.Array, x: jax.Array | None, sweeps: int) -> jax.Array:
    """``sweeps`` sweeps of :func:`relax`, the first half forward and the rest backward: a
    symmetric map ``b ↦ x`` from ``x = 0`` for an even ``sweeps`` and a symmetric ``A``,
    also for a forward-only ``MULTICOLOR_GS`` (a coarsest level's smoothing, a relaxation
    preconditioner's sweeps)."""
    backward = sweeps // 2
    x = relax(a, data, config, b, x, sweeps - backward)
    return relax(a, data, config, b, x, backward, backward=True)


def _jacobi_step(data: RelaxationData, residual: jax.Array) -> jax.Array:
    """A Jacobi's ``ω D⁻¹ r``: rows scaled, or ``k × k`` blocks applied."""
    if data.scale.ndim == 1:
        return data.scale * residual
    nodes, k, _ = data.scale.shape
    residual = residual.reshape(nodes, 1, k)
    # Elementwise, column by column, in a product's order (each column's product added to
    # the sum of the earlier ones), inside the sweep's fusion: a batched product of the
    # k × k blocks was a dot kernel of its own at every sweep of every level (issue 29).
    product = data.scale[:, :, 0] * residual[:, :, 0]
    for j in range(1, k):
        product = data.scale[:, :, j] * residual[:, :, j] + product
    return product.reshape(-1)


def _block_inverses(a: CsrArrays, config: RelaxationConfig, k: int,
                    positions: jax.Array | None = None) -> jax.Array:
    """``ω D⁻¹`` for the ``k × k`` diagonal blocks ``D`` of ``A`` (ℓ1: ``D`` plus each row's
    ``Σ |a_ij|`` outside its block on its diagonal), gathered by their ``positions``
    among the values (see :func:`relaxation_data`) when given.

    An unknown whose row of ``D`` is zero (a decoupled coarse unknown) is left unchanged:
    its row of the inverse is zero.
    """
    nodes = a.n_rows // k
    if positions is None:
        rows, columns = a.row_ids, a.indices
        inside = rows // k == columns // k
        # Entry (i, j) of a block goes to (i // k, i % k, j % k): place i k + j % k of the
        # blocks laid out flat (a scatter into one axis compiles to less than into three).
        blocks = jax.ops.segment_sum(jnp.where(inside, a.values, 0), rows * k + columns % k,
                                     num_segments=a.n_rows * k).reshape(nodes, k, k)
    else:
        blocks = stored_diagonal(a.values, positions).reshape(nodes, k, k)
    eye = jnp.eye(k, dtype=a.values.dtype)[None]
    if config.solver == "JACOBI_L1":
        magnitudes = jnp.abs(a.values)
        if positions is None:
            outside = jax.ops.segment_sum(jnp.where(inside, 0, magnitudes), rows,
                                          num_segments=a.n_rows, indices_are_sorted=True)
        else:
            # Σ |a_ij| outside the block as |A_outside| 1: the product's kernel sums a row's
            # entries in order, as the segment sum does, without expanding the rows.
            inside = jnp.zeros(a.values.shape, bool).at[
                jnp.where(positions < 0, a.values.shape[0], positions)].set(True, mode="drop")
            outside = a._replace(values=jnp.where(inside, 0, magnitudes)).matvec(
                jnp.ones(a.n_rows, magnitudes.dtype))
        blocks = blocks + outside.astype(a.values.dtype).reshape(nodes, k)[:, :, None] * eye
    decoupled = jnp.all(blocks == 0, axis=2)  # (nodes, k)
    inverse = small_inverse(blocks + jnp.where(decoupled[:, :, None], eye, 0))
    inverse = jnp.where(decoupled[:, :, None], 0, inverse)
    if config.relaxation_factor is None:  # damped by the caller, from the undamped blocks
        return inverse
    return inverse * jnp.asarray(config.relaxation_factor, a.values.dtype)


def _damping(rho: jax.Array, dtype) -> jax.Array:
    """``ω = ESTIMATED_DAMPING / ρ``, ``rho`` the estimated ``ρ(M⁻¹A)`` of the undamped
    Jacobi's ``M``."""
    return (ESTIMATED_DAMPING / jnp.maximum(rho, jnp.finfo(rho.dtype).tiny)).astype(dtype)


def power_iteration_start(n: int, dtype) -> jax.Array:
    """The fixed pseudo-random start of :func:`spectral_radius` on vectors of ``n`` entries
    of ``dtype`` (jit-able): entry ``i`` uniform in ``(0, 1]``, one plus the top 24 bits
    of :func:`~._index_hash.index_hash` of ``i``, over ``2^24`` (never zero: the hash of 0
    is 0, and a level of one row starts from its first entry).

    Its first ``m`` entries are the start for ``m``: one drawn for a hierarchy's finest
    level serves every level.  A hash of the index, not ``jax.random``'s generator, whose
    threefry kernels every numeric setup compiled (issue 29): on the finest levels of
    ``tools/bench/sparse_suite.py``'s small problems its estimates of ``ρ(D⁻¹A)`` are
    within 2 % of a random start's.
    """
    fraction = ((index_hash(n) >> 8) + 1).astype(jnp.float32) * 2.0**-24  # exact
    return fraction.astype(jnp.finfo(dtype).dtype).astype(dtype)


def spectral_radius(n: int, dtype, apply, rows: jax.Array | None = None,
                    start: jax.Array | None = None) -> jax.Array:
    """``ρ`` of the linear map ``apply`` on vectors of ``n`` entries of ``dtype``, by
    ``POWER_ITERATIONS`` steps of power iteration from a fixed pseudo-random vector
    (:func:`power_iteration_start`; jit-able; a lower bound, as the iterate keeps some of
    the lower eigenvectors).

    With ``rows``, the vector is zero past its first ``rows`` entries (the padding of a
    size class, which ``apply`` keeps zero); its first entries are the same for every
    ``n``.  ``start``: :func:`power_iteration_start` for ``n`` or more entries, drawn once
    for several estimates.
    """
    real = jnp.finfo(dtype).dtype
    if start is None or start.shape[0] < n:
        start = power_iteration_start(n, dtype)
    v = start[:n].astype(dtype)
    if rows is not None:
        v = jnp.where(jnp.arange(n, dtype=rows.dtype) < rows, v, 0)

    def step(_, v):
        w = apply(v)
        return w / jnp.maximum(jnp.linalg.norm(w), jnp.finfo(real).tiny).astype(w.dtype)

    v = jax.lax.fori_loop(0, POWER_ITERATIONS, step, v / jnp.linalg.norm(v).astype(v.dtype))
    return jnp.linalg.norm(apply(v))


def _chebyshev(a: CsrArrays, data: RelaxationData, degree: int, b: jax.Array,
               x: jax.Array | None) -> jax.Array:
    """Chebyshev iteration (Saad, *Iterative Methods*, Alg. 12.1) for ``D⁻¹A`` on its interval."""
    dtype = b.dtype
    lower, upper = data.interval[0].real, data.interval[1].real
    theta, delta = (upper + lower) / 2, (upper - lower) / 2
    sigma = theta / delta
    rho = 1 / sigma
    residual = data.scale * (b if x is None else a.residual(x, b))
    direction = residual / theta.astype(dtype)
    x = jnp.zeros_like(b) if x is None else x
    for step in range(degree):
        x = x + direction
        if step == degree - 1:
            break
        residual = a.minus_scaled_matvec(direction, data.scale, residual)
        rho_next = 1 / (2 * sigma - rho)
        direction = ((rho_next * rho).astype(dtype) * direction
                     + (2 * rho_next / delta).astype(dtype) * residual)
        rho = rho_next
    return x

