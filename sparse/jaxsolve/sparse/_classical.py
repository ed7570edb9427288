"""Classical (Ruge–Stüben) AMG: C/F splitting and interpolation on fixed patterns.

A level of classical AMG keeps some of its unknowns, the C points, as the next level's
unknowns and interpolates the others, the F points, from them:

1. *strength*: ``i`` strongly depends on ``j ≠ i`` when ``-σ_i a_ij ≥ θ max_{k≠i}
   (-σ_i a_ik) > 0`` (AmgX's ``AHAT``; ``σ_i`` the sign of ``a_ii``, ``θ`` the
   ``strength_threshold``), and a row with ``|Σ_j a_ij| > max_row_sum · |a_ii|`` depends on
   nothing; ``ALL`` makes every stored off-diagonal coupling strong.  Complex entries
   compare by ``Re(a_ij conj(a_ii)) / |a_ii|``.
2. *splitting* (``selector``): PMIS or HMIS on the strength graph (native code,
   :func:`._native.classical_splitting`).
3. *interpolation* (``interpolator``): D1, Ruge–Stüben's modified classical interpolation
   (as PyAMG's ``classical_interpolation``), or D2, extended+i distance-two interpolation
   (as AmgX's ``D2``), with the weights

       w_ij = -(a_ij + Σ_{k∈F_i} a_ik ā_kj / s_ik) / d_i,   s_ik = Σ_{l∈C_i (∪{i}: D2)} ā_kl

   (:class:`._native.InterpolationPattern` says which sets), then optionally truncated.

The work splits like the aggregation path's.  :func:`level_structure` (host, once per
pattern and configuration) decides strength, splitting, the pattern of ``P`` and the index
plan of its weights from concrete values — or, without them, from the graph Laplacian of
the pattern (every stored coupling ``-1``).  Truncation keeps a fixed subset of each row's
weights, chosen from those values.  :func:`interpolation_values` (jit-able, differentiable,
``vmap``-able) computes the weights from any values on the pattern: gathers and segment sums
over the plan, which run on every platform.  The same function runs on the host with NumPy
when the structure is built, to choose the truncation and to form the next level's values
(``Pᵀ A P``), from which its strength follows.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _native
from ._config import AMGConfig
from ._csr_arrays import CsrStructure


def surrogate_values(pattern: CsrStructure) -> np.ndarray:
    """The graph Laplacian on ``pattern``: ``-1`` off the diagonal, the row's count on it.

    The values a structure is built from when the matrix's are not concrete.

    >>> path = CsrStructure(np.array([0, 2, 5, 7]), np.array([0, 1, 0, 1, 2, 1, 2]), 3)
    >>> surrogate_values(path).tolist()
    [1.0, -1.0, -1.0, 2.0, -1.0, -1.0, 1.0]
    """
    rows = pattern.row_ids
    off_diagonal = pattern.indices != rows
    counts = np.bincount(rows[off_diagonal], minlength=pattern.n_rows)
    return np.where(off_diagonal, -1.0, counts[rows].astype(np.float64))


def strong_couplings(pattern: CsrStructure, values: np.ndarray, config: AMGConfig) -> np.ndarray:
    """``(nnz,)`` bool: the entries ``(i, j)``, ``j ≠ i``, by which ``i`` strongly depends on ``j``.

    Every row must store its diagonal (checked by the hierarchy before).
    """
    rows = pattern.row_ids
    off_diagonal = pattern.indices != rows
    diagonal = values[pattern.diagonal_positions()]
    if config.strength == "ALL":
        return off_diagonal & (values != 0)
    magnitude = np.abs(diagonal)
    phase = np.where(magnitude > 0, np.conj(diagonal) / np.where(magnitude > 0, magnitude, 1), 1)
    coupling = np.where(off_diagonal, -np.real(values * phase[rows]), -np.inf)
    largest = np.maximum.reduceat(coupling, pattern.indptr[:-1])  # every row is non-empty
    threshold = config.strength_threshold * largest[rows]
    row_sums = np.add.reduceat(values, pattern.indptr[:-1])
    dependent = (largest > 0) & (np.abs(row_sums) <= config.max_row_sum * magnitude)
    return off_diagonal & (coupling > 0) & (coupling >= threshold) & dependent[rows]


def strength_pattern(pattern: CsrStructure, strong: np.ndarray) -> CsrStructure:
    """The strength graph: row ``i`` holds the ``j`` that ``i`` strongly depends on."""
    indptr = np.concatenate([[0], np.cumsum(np.bincount(pattern.row_ids[strong],
                                                        minlength=pattern.n_rows))])
    return CsrStructure(indptr.astype(np.int32), pattern.indices[strong], pattern.n_cols)


@dataclasses.dataclass(frozen=True, eq=False)
class InterpolationStructure:
    """The host half of one level's interpolation.

    Attributes:
      strong: ``(nnz(A),)`` the strong couplings.
      coarse: ``(n,)`` the C points.
      full: the pattern of the untruncated ``P`` (``n × n_coarse``).
      plan: where ``A``'s values enter the untruncated weights, destinations in
        ``[0, nnz(full) + n]`` (``nnz(full) + i``: row ``i``'s ``d_i``; ``nnz(full) + n``:
        nowhere).
      keep: the positions in ``full`` of the weights truncation keeps, or None (no
        truncation).
      p: the pattern of ``P`` (``full``, or its kept entries).
    """

    strong: np.ndarray
    coarse: np.ndarray
    full: CsrStructure
    plan: _native.InterpolationPattern
    keep: np.ndarray | None
    p: CsrStructure

    @property
    def n_coarse(self) -> int:
        return self.full.n_cols


class InterpolationArrays(NamedTuple):
    """The index arrays :func:`interpolation_values` reads (a pytree, on the device)."""

    coarse: jax.Array
    full_indptr: jax.Array
    a_destination: jax.Array
    pair_positions: jax.Array
    pair_counts: jax.Array
    triple_entries: jax.Array
    triple_destinations: jax.Array
    keep: jax.Array | None


def level_structure(pattern: CsrStructure, values: np.ndarray, config: AMGConfig, *,
                    splitting: tuple[np.ndarray, np.ndarray] | None = None
                    ) -> InterpolationStructure:
    """Strength, splitting and interpolation plan of one level, from concrete values.

    ``splitting``: the strong couplings and C points when decided elsewhere (a block
    system's, on its nodes: :func:`._blocks.classical_splitting`).
    """
    if splitting is None:
        strong = strong_couplings(pattern, values, config)
        graph = strength_pattern(pattern, strong)
        coarse = _native.classical_splitting(graph.indptr, graph.indices, config.selector)
    else:
        strong, coarse = splitting
    plan = _native.interpolation_pattern(pattern.indptr, pattern.indices, strong, coarse,
                                         distance_two=config.interpolator == "D2")
    full = CsrStructure(plan.p_indptr, plan.p_indices, int(coarse.sum()))
    nnz, n = full.nnz, pattern.n_rows

    def combined(destination: np.ndarray) -> np.ndarray:
        # -1 (nowhere) → nnz + n; -2 - i (row i's d_i) → nnz + i.
        return np.where(destination >= 0, destination,
                        np.where(destination == -1, nnz + n, nnz - 2 - destination)
                        ).astype(np.int32)

    plan = plan._replace(a_destination=combined(plan.a_destination),
                         triple_destinations=combined(plan.triple_destinations))
    structure = InterpolationStructure(strong=strong, coarse=coarse, full=full, plan=plan,
                                       keep=None, p=full)
    keep = _truncation(structure, pattern, values, config)
    if keep is None:
        return structure
    rows = full.row_ids[keep]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int32)
    return dataclasses.replace(structure, keep=keep,
                               p=CsrStructure(indptr, full.indices[keep], full.n_cols))


def _truncation(structure: InterpolationStructure, pattern: CsrStructure, values: np.ndarray,
                config: AMGConfig) -> np.ndarray | None:
    """The positions in ``full`` of the weights that truncation keeps (None: all of them).

    Drops the weights below ``interp_truncation_factor`` times the row's largest (by
    magnitude, for a factor in ``(0, 1)``), then keeps the ``interp_max_elements`` largest
    (ties: the earlier column).
    """
    factor, most = config.interp_truncation_factor, config.interp_max_elements
    by_factor, by_count = 0 < factor < 1, most > 0
    full = structure.full
    if not (by_factor or by_count) or full.nnz == 0:
        return None
    weights = np.abs(host_values(structure, pattern, values, truncated=False))
    rows = full.row_ids
    kept = np.ones(full.nnz, bool)
    if by_factor:
        kept &= weights >= factor * np.maximum.reduceat(weights, full.indptr[:-1])[rows]
    if by_count:
        # Within each row, the kept weights first, largest first; rank = place in the row.
        order = np.lexsort((-np.where(kept, weights, -1.0), rows))
        rank = np.empty(full.nnz, np.int64)
        rank[order] = np.arange(full.nnz) - full.indptr[rows[order]]
        kept &= rank < most
    return np.flatnonzero(kept).astype(np.int32)


def host_arrays(structure: InterpolationStructure, truncated: bool = True) -> InterpolationArrays:
    """The structure's index arrays as NumPy arrays (for :func:`interpolation_values`)."""
    plan = structure.plan
    return InterpolationArrays(
        coarse=structure.coarse, full_indptr=structure.full.indptr,
        a_destination=plan.a_destination, pair_positions=plan.pair_positions,
        pair_counts=plan.pair_counts, triple_entries=plan.triple_entries,
        triple_destinations=plan.triple_destinations,
        keep=structure.keep if truncated else None)


def device_arrays(structure: InterpolationStructure) -> InterpolationArrays:
    """The structure's index arrays on the device."""
    return jax.tree.map(jax.device_put, host_arrays(structure))


def host_values(structure: InterpolationStructure, pattern: CsrStructure, values: np.ndarray,
                truncated: bool = True) -> np.ndarray:
    """``P``'s values for ``A``'s concrete ``values`` on ``pattern``, computed with NumPy."""
    return interpolation_values(np, host_arrays(structure, truncated), structure.full.nnz,
                                values, pattern.row_ids, values[pattern.diagonal_positions()])


def interpolation_values(xp: Any, arrays: InterpolationArrays, full_nnz: int, a_values: Any,
                         a_rows: Any, diagonal: Any) -> Any:
    """The values of ``P`` on its pattern for ``A``'s values.

    One formula for both sides of the setup: with ``xp = numpy`` on the host, where the
    structure is built; with ``xp = jax.numpy`` under jit (gathers and segment sums,
    differentiable in the values).

    Args:
      xp: the array namespace, ``numpy`` or ``jax.numpy``.
      arrays: the level's :class:`InterpolationArrays`.
      full_nnz: the number of untruncated weights.
      a_values: ``(nnz(A),)`` ``A``'s values; ``a_rows`` the row of each.
      diagonal: ``(n,)`` ``A``'s diagonal.
    """
    n = diagonal.shape[0]
    # ā_kl: a_kl where its sign is opposite to a_kk's (its phase, for complex values).
    opposite = xp.real(a_values * xp.conj(diagonal)[a_rows]) < 0
    a_bar = xp.where(opposite, a_values, 0)
    pair_of_triple = _repeat(xp, arrays.pair_counts, arrays.triple_entries.shape[0])
    triple_bar = a_bar[arrays.triple_entries]
    s = _segment_sum(xp, triple_bar, pair_of_triple, arrays.pair_positions.shape[0])
    valid = s != 0
    a_pairs = a_values[arrays.pair_positions]
    share = xp.where(valid, a_pairs / xp.where(valid, s, 1), 0)
    # A coupling with nothing to distribute to (s_ik = 0) joins d_i.
    data = xp.concatenate([a_values, share[pair_of_triple] * triple_bar,
                           xp.where(valid, 0, a_pairs)])
    destinations = xp.concatenate([arrays.a_destination, arrays.triple_destinations,
                                   full_nnz + a_rows[arrays.pair_positions]])
    sums = _segment_sum(xp, data, destinations, full_nnz + n + 1)
    numerator, denominator = sums[:full_nnz], sums[full_nnz:full_nnz + n]
    full_rows = _repeat(xp, xp.diff(arrays.full_indptr), full_nnz)
    d = denominator[full_rows]
    weights = xp.where(arrays.coarse[full_rows], xp.ones_like(d),
                       xp.where(d != 0, -numerator / xp.where(d != 0, d, 1), 0))
    if arrays.keep is None:
        return weights
    # Truncated: the kept weights, each row rescaled to its former sum.
    kept, kept_rows = weights[arrays.keep], full_rows[arrays.keep]
    full_sums = _segment_sum(xp, weights, full_rows, n)
    kept_sums = _segment_sum(xp, kept, kept_rows, n)
    nonzero = kept_sums != 0
    scale = xp.where(nonzero, full_sums / xp.where(nonzero, kept_sums, 1), 1)
    return kept * scale[kept_rows]


def _repeat(xp: Any, counts: Any, total: int) -> Any:
    """``[0, …, 0, 1, …]``: each index ``q`` repeated ``counts[q]`` times, ``total`` in all."""
    ids = xp.arange(counts.shape[0], dtype=np.int32)
    if xp is np:
        return np.repeat(ids, counts)
    return jnp.repeat(ids, counts, total_repeat_length=total)


def _segment_sum(xp: Any, data: Any, ids: Any, count: int) -> Any:
    if xp is not np:
        return jax.ops.segment_sum(data, ids, num_segments=count)
    if np.iscomplexobj(data):
        return np.bincount(ids, data.real, count) + 1j * np.bincount(ids, data.imag, count)
    return np.bincount(ids, data, count).astype(data.dtype)
