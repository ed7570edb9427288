"""Classical (Ruge–Stüben) AMG: C/F splitting and interpolation on fixed patterns.

A level of classical AMG keeps some of its unknowns, the C points, as the next level's
unknowns and interpolates the others, the F points, from them:

1. *strength*: ``i`` strongly depends on ``j ≠ i`` when ``-σ_i a_ij ≥ θ max_{k≠i}
   (-σ_i a_ik) > 0`` (AmgX's ``AHAT``; ``σ_i`` the sign of ``a_ii``, ``θ`` the
   ``strength_threshold``), and a row with ``|Σ_j a_ij| > max_row_sum · |a_ii|`` depends on
   nothing; ``ALL`` makes every stored off-diagonal coupling strong.  Complex entries
   compare by ``Re(a_ij conj(a_ii)) / |a_ii|``.
2. *splitting* (``selector``): PMIS, PMIS in color (PMISC) or HMIS on the strength graph
   (native code, :func:`._classical_kernels.classical_splitting`).  On the first
   ``aggressive_levels`` levels, aggressive (A2) coarsening: the same selector again on the
   distance-two graph of the C points it chose, which keeps about a fifth of them on 3D
   Poisson (Stüben, "Algebraic multigrid (AMG): an introduction with applications", GMD
   report 70, 1999, A.2.3; hypre's ``agg_num_levels``, AmgX's ``aggressive_levels``).
3. *interpolation* (``interpolator``): D1, Ruge–Stüben's modified classical interpolation
   (as PyAMG's ``classical_interpolation``), or D2, extended+i distance-two interpolation
   (as AmgX's ``D2``), with the weights

       w_ij = -(a_ij + Σ_{k∈F_i} a_ik ā_kj / s_ik) / d_i,   s_ik = Σ_{l∈C_i (∪{i}: D2)} ā_kl

   (:class:`._classical_kernels.InterpolationPattern` says which sets), then optionally truncated.
   Aggressive levels interpolate by multipass interpolation (Stüben 1999, A.4.3; the
   default of AmgX's ``aggressive_interpolator`` and hypre's ``agg_interp_type``), whose F
   points of pass ``m`` interpolate through their strong neighbours of earlier passes
   (:class:`._classical_kernels.MultipassPattern`), truncated alike; or, with
   ``aggressive_interpolator`` D2 or D1, by two-stage interpolation (hypre's
   ``agg_interp_type`` 1 and 2, Yang, "On long-range interpolation operators for aggressive
   coarsening", 2010): an ordinary level's splitting ``C1`` and interpolation ``P1``, then
   on its Galerkin operator ``A1 = P1ᴴ A P1`` a second splitting ``C2 ⊂ C1`` and
   interpolation ``P2``; ``P = P1 P2`` truncated (:class:`TwoStagePlan`). The level's
   coarse operator is ``Pᴴ A P``; ``A1`` is set up and dropped.

The work splits like the aggregation path's.  :func:`level_structure` (host, once per
pattern and configuration) decides strength, splitting, the pattern of ``P`` and the index
plan of its weights from concrete values — or, without them, from the graph Laplacian of
the pattern (every stored coupling ``-1``).  Truncation keeps a fixed subset of each row's
weights, chosen from those values.  :func:`interpolation_values` (jit-able, differentiable,
``vmap``-able) computes the weights from any values on the pattern: gathers and segment sums
over the plan, which run on every platform.  The host computes the same weights for the
values it sees, to choose the truncation and to form the next level's values (``Pᵀ A P``),
from which its strength follows: native code
(:func:`._classical_kernels.interpolation_values` and
:func:`._classical_kernels.multipass_values`, split over the cores) that evaluates
:func:`interpolation_values`'s formula in its operation order, so that its weights are
NumPy's bit for bit.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _classical_kernels, _ffi_primitives
from ._config import AMGConfig
from ._csr_arrays import CsrArrays, CsrStructure
from ._products import (ProductPlan, galerkin_products, plan_product_with_values,
                        transpose_offsets, transposed_values)
from ._relaxation import stored_diagonal


def surrogate_values(pattern: CsrStructure, block_dim: int = 1) -> np.ndarray:
    """The graph Laplacian on ``pattern``: ``-1`` off the diagonal, the row's count on it.

    The values a structure is built from when the matrix's are not concrete. In a block
    system of ``block_dim`` unknowns per node (numbered node by node), only the couplings
    between unknowns of one kind (``i ≡ j`` modulo ``block_dim``: a displacement
    component's with the same component's) are ``-1``, the others ``0``: classical AMG's
    "unknown approach" for systems, which coarsens and interpolates each kind from its own
    kind. Counted equally strong, the couplings between kinds would mix them: Q1 plane
    elasticity at 96² nodes took 77 PCG iterations from a structure built so, 14 from one
    built from the concrete values, and 14 from this one.

    >>> path = CsrStructure(np.array([0, 2, 5, 7]), np.array([0, 1, 0, 1, 2, 1, 2]), 3)
    >>> surrogate_values(path).tolist()
    [1.0, -1.0, -1.0, 2.0, -1.0, -1.0, 1.0]
    >>> two_nodes = CsrStructure(np.arange(0, 17, 4), np.tile(np.arange(4), 4), 4)
    >>> surrogate_values(two_nodes, block_dim=2).reshape(4, 4).tolist()  # kinds: 0, 2; 1, 3
    [[1.0, 0.0, -1.0, 0.0], [0.0, 1.0, 0.0, -1.0], [-1.0, 0.0, 1.0, 0.0], [0.0, -1.0, 0.0, 1.0]]
    """
    rows = pattern.row_ids
    diagonal = pattern.indices == rows
    coupled = ~diagonal & (pattern.indices % block_dim == rows % block_dim)
    counts = np.bincount(rows[coupled], minlength=pattern.n_rows)
    return np.where(coupled, -1.0, np.where(diagonal, counts[rows], 0).astype(np.float64))


def strong_couplings(pattern: CsrStructure, values: np.ndarray, config: AMGConfig) -> np.ndarray:
    """``(nnz,)`` bool: the entries ``(i, j)``, ``j ≠ i``, by which ``i`` strongly depends on ``j``.

    ``pattern`` must be a CSR pattern whose rows store their diagonal (checked by the
    hierarchy before): the native kernels trust it.
    """
    return _classical_kernels.classical_strength(pattern.indptr, pattern.indices, values,
                                                 config.strength_threshold, config.max_row_sum,
                                                 every=config.strength == "ALL", check=False)


@dataclasses.dataclass(frozen=True, eq=False)
class InterpolationStructure:
    """The host half of one level's interpolation.

    Attributes:
      strong: ``(nnz(A),)`` the strong couplings.
      coarse: ``(n,)`` the C points.
      full: the pattern of the untruncated ``P`` (``n × n_coarse``).
      plan: where ``A``'s values enter the untruncated weights: a D1/D2
        :class:`._classical_kernels.InterpolationPattern` or, on an aggressive level, a
        :class:`._classical_kernels.MultipassPattern` or a :class:`TwoStagePlan`.
      keep: the positions in ``full`` of the weights truncation keeps, or None (no
        truncation).
      p: the pattern of ``P`` (``full``, or its kept entries).
      values: ``P``'s values for the values the structure was built from.
    """

    strong: np.ndarray
    coarse: np.ndarray
    full: CsrStructure
    plan: (_classical_kernels.InterpolationPattern | _classical_kernels.MultipassPattern
           | TwoStagePlan)
    keep: np.ndarray | None
    p: CsrStructure
    values: np.ndarray

    @property
    def n_coarse(self) -> int:
        return self.full.n_cols


@dataclasses.dataclass(frozen=True, eq=False)
class TwoStagePlan:
    """How an aggressive level's two-stage weights follow from ``A``'s values.

    ``P = P1 P2``: ``first`` interpolates ``A``'s unknowns from the first splitting's C
    points ``C1`` (D1 or D2 on ``A``, truncated); ``a_p`` and ``galerkin`` plan ``A P1``
    and ``A1 = P1ᴴ (A P1)`` (``r_from_p``: where ``P1ᴴ``'s entries are in ``P1``);
    ``second`` interpolates ``C1`` from ``C2 ⊂ C1``, chosen on ``A1`` as an ordinary
    level's; ``product`` plans ``P1 P2``, the untruncated ``P``.
    """

    first: InterpolationStructure
    a_p: ProductPlan
    galerkin: ProductPlan
    r_from_p: np.ndarray
    second: InterpolationStructure
    product: ProductPlan


class TwoStageArrays(NamedTuple):
    """The index arrays of two-stage weights that :func:`device_values` reads (a pytree).

    Each stage's :class:`InterpolationArrays`, and the patterns (values: a placeholder) of
    ``P1``, ``P1ᴴ``, ``A P1``, ``A1`` and the untruncated ``P1 P2`` with ``P2``'s; ``r1_offsets``
    (where ``P1ᴴ``'s entries sit in ``P1``'s rows: :func:`._products.transpose_offsets`)
    and ``a1_diagonal`` (the positions of ``A1``'s diagonal entries), and ``keep``: the
    positions in ``full`` of the weights truncation keeps (None: all).
    """

    first: InterpolationArrays
    p1: CsrArrays
    r1: CsrArrays
    r1_offsets: jax.Array
    a_p1: CsrArrays
    a1: CsrArrays
    a1_diagonal: jax.Array
    second: InterpolationArrays
    p2: CsrArrays
    full: CsrArrays
    keep: jax.Array | None


class InterpolationArrays(NamedTuple):
    """The index arrays of D1/D2 weights that :func:`interpolation_values` reads (a pytree).

    The :class:`._classical_kernels.InterpolationPattern`'s without ``P``'s columns, lean
    for the device: offsets within rows, of the plan's unsigned dtype (one byte each on
    most levels). The pairs' and triples' row pointers stay int32 (``8 n`` bytes a level):
    counted again on the device from each row's number of pairs, they cost the numeric
    setup two cumulative sums a level to compile (on the CPU, 0.1–0.2 s each).
    ``keep``: the offsets within their rows of ``P``'s full pattern of the weights
    truncation keeps (None: it keeps all).
    """

    coarse: jax.Array
    full_indptr: jax.Array
    a_targets: jax.Array
    pair_indptr: jax.Array
    pair_offsets: jax.Array
    pair_counts: jax.Array
    triple_indptr: jax.Array
    triple_offsets: jax.Array
    triple_targets: jax.Array
    keep: jax.Array | None


class MultipassArrays(NamedTuple):
    """The index arrays of multipass weights that :func:`interpolation_values` reads.

    Kept lean for the device (a 128³ Poisson's finest level holds 52 MiB less than the
    host's :class:`._classical_kernels.MultipassPattern`):

    - ``interpolatory_bits``: the pattern's ``interpolatory`` mask, eight entries a byte
      (``np.packbits``, little bit order).
    - ``unit_positions``: the C points' entries of ``P``.
    - ``passes``: each pass's triples as ``(a entries, P targets)``: the entry ``a_ik``
      and the offset of the triple's destination in row ``i`` of ``P``, of the narrowest
      unsigned dtype that holds its longest row (:func:`._classical_kernels.offset_dtype`;
      padding: its largest value, nowhere). Their ``P`` sources are not stored: the
      triples of an entry ``a_ik`` run over row ``k`` of ``P`` in order, so the source of
      a triple is ``full_indptr[k]`` plus its place in the run.
    - ``keep`` or ``dropped``: the positions of ``P``'s full pattern that truncation keeps,
      or those it drops, whichever are fewer (both ``None``: it keeps every weight), each
      increasing. Aggressive levels' truncation drops few (0.4 % at 128³), so ``dropped``
      is what they usually hold.
    """

    full_indptr: jax.Array
    interpolatory_bits: jax.Array
    unit_positions: jax.Array
    passes: tuple[tuple[jax.Array, jax.Array], ...]
    keep: jax.Array | None
    dropped: jax.Array | None


def level_structure(pattern: CsrStructure, values: np.ndarray, config: AMGConfig, *,
                    aggressive: bool = False,
                    splitter: Callable[..., tuple[np.ndarray, np.ndarray]] | None = None
                    ) -> InterpolationStructure:
    """Strength, splitting and interpolation plan of one level, from concrete values.

    ``pattern`` is trusted as :func:`strong_couplings` says. ``aggressive``: an aggressive
    level, of A2 coarsening and multipass interpolation, or of two ordinary stages
    (:class:`TwoStagePlan`) as ``config.aggressive_interpolator`` says. ``splitter``: what
    decides the strong couplings and C points instead of the level's own strength and
    selector (a block system's, on its nodes: :func:`._blocks.classical_splitting`), called
    as ``splitter(pattern, values, config, aggressive=...)``.
    """
    if aggressive and config.aggressive_interpolator != "MULTIPASS":
        return _two_stage_structure(pattern, values, config, splitter)
    if splitter is None:
        strong = strong_couplings(pattern, values, config)
        coarse = _classical_kernels.classical_splitting(pattern.indptr, pattern.indices, strong,
                                                        config.selector, aggressive=aggressive,
                                                        check=False)
    else:
        strong, coarse = splitter(pattern, values, config, aggressive=aggressive)
    if aggressive:
        plan = _classical_kernels.multipass_pattern(pattern.indptr, pattern.indices, strong, coarse,
                                                    check=False)
    else:
        plan = _classical_kernels.interpolation_pattern(pattern.indptr, pattern.indices, strong,
                                                        coarse,
                                                        distance_two=config.interpolator == "D2",
                                                        check=False)
    full = CsrStructure(plan.p_indptr, plan.p_indices, int(coarse.sum()))
    structure = InterpolationStructure(strong=strong, coarse=coarse, full=full, plan=plan,
                                       keep=None, p=full, values=np.empty(0, values.dtype))
    return _truncated_structure(structure, host_values(structure, pattern, values), config)


def _truncated_structure(structure: InterpolationStructure, weights: np.ndarray,
                         config: AMGConfig) -> InterpolationStructure:
    """``structure`` with its untruncated ``weights`` truncated as ``config`` says."""
    full = structure.full
    factor, most = config.interp_truncation_factor, config.interp_max_elements
    if not (0 < factor < 1 or most > 0) or full.nnz == 0:
        return dataclasses.replace(structure, values=weights)
    kept = _classical_kernels.truncation(full.indptr, weights, factor, most)
    indptr, keep, indices = _classical_kernels.kept_pattern(full.indptr, full.indices, kept)
    return dataclasses.replace(structure, keep=keep,
                               p=CsrStructure(indptr, indices, full.n_cols),
                               values=_classical_kernels.truncated_values(full.indptr, weights,
                                                                          keep, indptr))


def _two_stage_structure(pattern: CsrStructure, values: np.ndarray, config: AMGConfig,
                         splitter: Callable[..., tuple[np.ndarray, np.ndarray]] | None
                         ) -> InterpolationStructure:
    """An aggressive level's two-stage interpolation (:class:`TwoStagePlan`), each stage
    interpolating by ``config.aggressive_interpolator``. Where the first stage keeps no
    C point or every unknown, the level is the first stage's (the hierarchy stops or
    coarsens no further)."""
    stage = dataclasses.replace(config, interpolator=config.aggressive_interpolator)
    first = level_structure(pattern, values, stage, splitter=splitter)
    if not 0 < first.n_coarse < pattern.n_rows:
        return first
    r, r_from_p = first.p.transposed()
    a_p, galerkin, a1_values = galerkin_products(pattern, values, first.p, first.values, r,
                                                 r_from_p)
    second = level_structure(galerkin.c, a1_values, stage, splitter=splitter)
    product, weights = plan_product_with_values(first.p, second.p, first.values, second.values)
    coarse = first.coarse.copy()
    coarse[first.coarse] = second.coarse
    plan = TwoStagePlan(first=first, a_p=a_p, galerkin=galerkin, r_from_p=r_from_p,
                        second=second, product=product)
    structure = InterpolationStructure(strong=first.strong, coarse=coarse, full=product.c,
                                       plan=plan, keep=None, p=product.c,
                                       values=np.empty(0, values.dtype))
    return _truncated_structure(structure, weights, config)


def host_arrays(structure: InterpolationStructure, truncated: bool = True
                ) -> InterpolationArrays | MultipassArrays | TwoStageArrays:
    """The structure's index arrays as NumPy arrays (for :func:`interpolation_values`, or
    a two-stage level's for :func:`device_values`)."""
    plan, keep = structure.plan, structure.keep if truncated else None
    if isinstance(plan, TwoStagePlan):
        def pattern(structure: CsrStructure) -> CsrArrays:
            return CsrArrays(np.zeros(0, np.int32), structure.indices, structure.indptr)

        return TwoStageArrays(
            first=host_arrays(plan.first), p1=pattern(plan.first.p),
            r1=pattern(plan.galerkin.a),
            r1_offsets=transpose_offsets(plan.first.p, plan.galerkin.a, plan.r_from_p),
            a_p1=pattern(plan.a_p.c),
            a1=pattern(plan.galerkin.c), a1_diagonal=plan.galerkin.c.diagonal_positions(),
            second=host_arrays(plan.second), p2=pattern(plan.second.p),
            full=pattern(structure.full), keep=keep)
    if isinstance(plan, _classical_kernels.MultipassPattern):
        bounds = np.concatenate([[0], np.cumsum(plan.pass_counts)])
        dropped = None
        if keep is not None and 2 * keep.shape[0] > structure.full.nnz:
            kept = np.zeros(structure.full.nnz, bool)
            kept[keep] = True
            keep, dropped = None, np.flatnonzero(~kept).astype(np.int32)
            if dropped.size == 0:  # truncation kept them all
                dropped = None
        full_indptr = structure.full.indptr
        lengths = np.diff(full_indptr)
        offsets = _classical_kernels.offset_dtype(int(lengths.max(initial=0)))
        # each position of P's offset in its row, read at the triples' destinations
        offset_of = (np.arange(structure.full.nnz, dtype=np.int32)
                     - np.repeat(full_indptr[:-1], lengths)).astype(offsets)
        targets = offset_of[plan.triple_destinations]
        return MultipassArrays(
            full_indptr=full_indptr,
            interpolatory_bits=np.packbits(plan.interpolatory, bitorder="little"),
            unit_positions=full_indptr[:-1][structure.coarse],
            passes=tuple((plan.triple_entries[begin:end], targets[begin:end])
                         for begin, end in zip(bounds[:-1], bounds[1:], strict=True)),
            keep=keep, dropped=dropped)
    offsets = plan.a_targets.dtype
    if keep is not None:  # positions to offsets within their rows
        kept_rows = np.repeat(np.arange(structure.p.n_rows), np.diff(structure.p.indptr))
        keep = (keep - structure.full.indptr[kept_rows]).astype(offsets)
    return InterpolationArrays(
        coarse=structure.coarse, full_indptr=structure.full.indptr, a_targets=plan.a_targets,
        pair_indptr=plan.pair_indptr, pair_offsets=plan.pair_offsets,
        pair_counts=plan.pair_counts, triple_indptr=plan.triple_indptr,
        triple_offsets=plan.triple_offsets,
        triple_targets=plan.triple_targets, keep=keep)


def kernel_operands(arrays: InterpolationArrays) -> tuple[jax.Array | None, ...]:
    """The plan operands of :func:`._ffi_primitives.interpolation_weights`, in its order."""
    return (arrays.coarse, arrays.full_indptr, arrays.a_targets, arrays.pair_indptr,
            arrays.pair_offsets, arrays.pair_counts, arrays.triple_indptr, arrays.triple_offsets,
            arrays.triple_targets, arrays.keep)


def device_arrays(structure: InterpolationStructure
                  ) -> InterpolationArrays | MultipassArrays | TwoStageArrays:
    """The structure's index arrays on the device."""
    return jax.tree.map(jax.device_put, host_arrays(structure))


def host_values(structure: InterpolationStructure, pattern: CsrStructure, values: np.ndarray,
                truncated: bool = True) -> np.ndarray:
    """``P``'s values for ``A``'s concrete ``values`` on ``pattern``, computed on the host.

    :func:`interpolation_values`'s formula, evaluated by native code that reproduces its
    NumPy evaluation (bit for bit for real values) in a fraction of the time. Not for a
    two-stage structure, whose weights for its values it holds.
    """
    plan = structure.plan
    if isinstance(plan, _classical_kernels.MultipassPattern):
        weights = _classical_kernels.multipass_values(pattern.indptr, pattern.indices, values, plan,
                                                      structure.coarse, check=False)
    else:
        weights = _classical_kernels.interpolation_values(pattern.indptr, pattern.indices, values,
                                                          plan, structure.coarse, check=False)
    if structure.keep is None or not truncated:
        return weights
    return _classical_kernels.truncated_values(structure.full.indptr, weights, structure.keep,
                                               structure.p.indptr)


def interpolation_values(xp: Any, arrays: InterpolationArrays | MultipassArrays, full_nnz: int,
                         a_values: Any, a_rows: Any, a_columns: Any, diagonal: Any,
                         p_indptr: Any | None = None) -> Any:
    """The values of ``P`` on its pattern for ``A``'s values.

    One formula for both sides of the setup: with ``xp = jax.numpy`` under jit (gathers
    and segment sums, differentiable in the values); with ``xp = numpy`` on the host, the
    reference that the native host weights reproduce.

    Args:
      xp: the array namespace, ``numpy`` or ``jax.numpy``.
      arrays: the level's :class:`InterpolationArrays` or :class:`MultipassArrays`.
      full_nnz: the number of untruncated weights.
      a_values: ``(nnz(A),)`` ``A``'s values; ``a_rows`` and ``a_columns`` the row and
        column of each.
      diagonal: ``(n,)`` ``A``'s diagonal.
      p_indptr: the row pointers of ``P``'s truncated pattern (read for a truncated D1/D2
        plan, whose ``keep`` holds offsets within rows).
    """
    keep = arrays.keep
    if isinstance(arrays, MultipassArrays):
        weights = _multipass_weights(xp, arrays, full_nnz, a_values, a_rows, a_columns,
                                     diagonal)
        if arrays.dropped is not None:
            keep = _kept_positions(xp, arrays.dropped, full_nnz)
    else:
        weights = _weights(xp, arrays, full_nnz, a_values, a_rows, a_columns, diagonal)
        if keep is not None:  # offsets within rows to positions
            kept_rows = _repeat(xp, xp.diff(p_indptr), keep.shape[0])
            keep = arrays.full_indptr[kept_rows] + keep.astype(np.int32)
    return _truncated(xp, weights, arrays.full_indptr, keep)


def device_values(arrays: InterpolationArrays | MultipassArrays | TwoStageArrays,
                  structure: InterpolationStructure, a: CsrArrays, diagonal: jax.Array,
                  p_indptr: jax.Array) -> jax.Array:
    """:func:`interpolation_values` with ``jax.numpy``, for the numeric setup under jit.

    D1/D2 weights come from a native kernel on the CPU and on CUDA GPUs
    (:func:`._ffi_primitives.interpolation_weights`, a row at a time in the host's order, whose
    results are the host's bit for bit on the CPU); elsewhere, on aggressive levels
    (multipass) and for derivatives, from the formula's gathers and segment sums. Two-stage
    weights (:class:`TwoStageArrays`) from each stage's so, ``A1`` and ``P1 P2`` by the
    products' plans, then truncated. ``structure``: the level's host half;
    ``p_indptr``: the row pointers of ``P``'s (truncated) pattern.
    """
    if isinstance(arrays, TwoStageArrays):
        plan = structure.plan
        p1 = arrays.p1._replace(values=device_values(arrays.first, plan.first, a, diagonal,
                                                     arrays.p1.indptr))
        r1 = arrays.r1._replace(values=transposed_values(p1, arrays.r1.indices,
                                                         arrays.r1_offsets))
        a_p1 = arrays.a_p1._replace(values=plan.a_p.multiply(a, p1, arrays.a_p1.indices,
                                                             arrays.a_p1.indptr))
        a1 = arrays.a1._replace(values=plan.galerkin.multiply(r1, a_p1, arrays.a1.indices,
                                                              arrays.a1.indptr))
        p2 = arrays.p2._replace(values=device_values(
            arrays.second, plan.second, a1, stored_diagonal(a1.values, arrays.a1_diagonal),
            arrays.p2.indptr))
        weights = plan.product.multiply(p1, p2, arrays.full.indices, arrays.full.indptr)
        return _truncated(jnp, weights, arrays.full.indptr, arrays.keep)
    if isinstance(arrays, MultipassArrays):
        return interpolation_values(jnp, arrays, structure.full.nnz, a.values, a.row_ids,
                                    a.indices, diagonal)
    return _native_weights(structure.full.nnz, arrays, a.values, a.indices, a.indptr,
                           diagonal, p_indptr)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _native_weights(full_nnz, arrays, values, indices, indptr, diagonal, p_indptr):
    def native(arrays, values, indices, indptr, diagonal, p_indptr):
        return _ffi_primitives.interpolation_weights(values, diagonal, indices, indptr,
                                                     *kernel_operands(arrays), p_indptr,
                                                     full_nnz=full_nnz)

    def formula(arrays, values, indices, indptr, diagonal, p_indptr):
        rows = CsrArrays(values, indices, indptr).row_ids
        return interpolation_values(jnp, arrays, full_nnz, values, rows, indices, diagonal,
                                    p_indptr)

    operands = (arrays, values, indices, indptr, diagonal, p_indptr)
    if _ffi_primitives.native_on_every_platform():
        return native(*operands)
    return jax.lax.platform_dependent(*operands, cpu=native, cuda=native, default=formula)


@_native_weights.defjvp
def _native_weights_jvp(full_nnz, primals, tangents):
    arrays, values, indices, indptr, diagonal, p_indptr = primals
    rows = CsrArrays(values, indices, indptr).row_ids
    # Differentiable as the formula is: its derivative, formed in XLA, JAX transposes.
    _, d_weights = jax.jvp(
        lambda values, diagonal: interpolation_values(jnp, arrays, full_nnz, values, rows,
                                                      indices, diagonal, p_indptr),
        (values, diagonal), (tangents[1], tangents[4]))
    return _native_weights(full_nnz, *primals), d_weights


def _truncated(xp: Any, weights: Any, full_indptr: Any, keep: Any | None,
               true_count: Any | None = None) -> Any:
    """The kept weights (all without ``keep``), each row rescaled to its former sum.

    ``true_count``: how many of ``keep``'s positions are true ones, when it is padded
    (:mod:`._padded_setup`); the others keep no weight.
    """
    if keep is None:
        return weights
    n = full_indptr.shape[0] - 1
    full_rows = _repeat(xp, xp.diff(full_indptr), weights.shape[0])
    kept, kept_rows = weights[keep], full_rows[keep]
    if true_count is not None:
        kept = xp.where(xp.arange(keep.shape[0], dtype=np.int32) < true_count, kept, 0)
    full_sums = _segment_sum(xp, weights, full_rows, n)
    kept_sums = _segment_sum(xp, kept, kept_rows, n)
    nonzero = kept_sums != 0
    scale = xp.where(nonzero, full_sums / xp.where(nonzero, kept_sums, 1), 1)
    return kept * scale[kept_rows]


def _weights(xp: Any, arrays: InterpolationArrays, full_nnz: int, a_values: Any, a_rows: Any,
             a_columns: Any, diagonal: Any) -> Any:
    """The untruncated D1/D2 weights."""
    n = diagonal.shape[0]
    full_rows = _repeat(xp, xp.diff(arrays.full_indptr), full_nnz)
    a_indptr = _pointers(xp, _segment_sum(xp, xp.ones_like(a_rows), a_rows, n))
    pairs, triples = arrays.pair_offsets.shape[0], arrays.triple_offsets.shape[0]
    pair_rows = _repeat(xp, xp.diff(arrays.pair_indptr), pairs)
    pair_positions = a_indptr[pair_rows] + arrays.pair_offsets.astype(np.int32)
    pair_of_triple = _repeat(xp, arrays.pair_counts.astype(np.int32), triples)
    triple_rows = pair_rows[pair_of_triple]
    triple_entries = (a_indptr[a_columns[pair_positions][pair_of_triple]]
                      + arrays.triple_offsets.astype(np.int32))

    def destinations(targets: Any, rows: Any) -> Any:
        # the weight at the target's offset in row `rows` of P, or d_i (full_nnz + i), or
        # nowhere (full_nnz + n): the segments of the sums below
        offset_of = xp.where(targets == _classical_kernels.to_diagonal(targets.dtype),
                             full_nnz + rows,
                             arrays.full_indptr[rows] + targets.astype(np.int32))
        return xp.where(targets == _classical_kernels.nowhere(targets.dtype), full_nnz + n,
                        offset_of)

    # ā_kl: a_kl where its sign is opposite to a_kk's (its phase, for complex values).
    opposite = xp.real(a_values * xp.conj(diagonal)[a_rows]) < 0
    a_bar = xp.where(opposite, a_values, 0)
    triple_bar = a_bar[triple_entries]
    s = _segment_sum(xp, triple_bar, pair_of_triple, pairs)
    valid = s != 0
    a_pairs = a_values[pair_positions]
    share = xp.where(valid, a_pairs / xp.where(valid, s, 1), 0)
    # A coupling with nothing to distribute to (s_ik = 0) joins d_i.
    data = xp.concatenate([a_values, share[pair_of_triple] * triple_bar,
                           xp.where(valid, 0, a_pairs)])
    targets = xp.concatenate([destinations(arrays.a_targets, a_rows),
                              destinations(arrays.triple_targets, triple_rows),
                              full_nnz + pair_rows])
    sums = _segment_sum(xp, data, targets, full_nnz + n + 1)
    numerator, denominator = sums[:full_nnz], sums[full_nnz:full_nnz + n]
    d = denominator[full_rows]
    return xp.where(arrays.coarse[full_rows], xp.ones_like(d),
                    xp.where(d != 0, -numerator / xp.where(d != 0, d, 1), 0))


def _multipass_weights(xp: Any, arrays: MultipassArrays, full_nnz: int, a_values: Any,
                       a_rows: Any, a_columns: Any, diagonal: Any) -> Any:
    """The untruncated multipass weights: ``P_i = Σ_{k∈P_i} c_ik P_k``, pass by pass.

    ``c_ik = -α_i a_ik / ã_ii`` with Stüben's direct-interpolation scaling, couplings of
    sign opposite to ``a_ii``'s (``-``) and of its sign (``+``) apart: ``α_i = Σ_{j≠i}
    a_ij^∓ / Σ_{k∈P_i} a_ik^∓`` for each sign, and ``ã_ii = a_ii + Σ_{j≠i} a_ij^+`` when
    ``P_i`` has no ``+`` coupling (they are lumped into the diagonal).  Constants are kept
    on rows of zero sum.
    """
    n = diagonal.shape[0]
    opposite = xp.real(a_values * xp.conj(diagonal)[a_rows]) < 0
    marked = xp.unpackbits(arrays.interpolatory_bits, count=a_values.shape[0],
                           bitorder="little").astype(bool)
    interpolatory = xp.where(marked, a_values, 0)
    # Per row and sign: the sum over j ≠ i, and over P_i (the diagonal has its own sign).
    negative_all = _segment_sum(xp, xp.where(opposite, a_values, 0), a_rows, n)
    positive_all = _segment_sum(xp, xp.where(opposite, 0, a_values), a_rows, n) - diagonal
    negative = _segment_sum(xp, xp.where(opposite, interpolatory, 0), a_rows, n)
    positive = _segment_sum(xp, xp.where(opposite, 0, interpolatory), a_rows, n)
    lumped = diagonal + xp.where(positive == 0, positive_all, 0)

    def ratio(numerator, denominator):
        valid = (denominator != 0) & (lumped != 0)
        return xp.where(valid, -numerator / xp.where(denominator != 0, denominator, 1)
                        / xp.where(lumped != 0, lumped, 1), 0)

    scale = xp.where(opposite, ratio(negative_all, negative)[a_rows],
                     ratio(positive_all, positive)[a_rows])
    coefficients = interpolatory * scale
    ones = xp.ones(arrays.unit_positions.shape[0], a_values.dtype)
    weights = _segment_sum(xp, ones, arrays.unit_positions, full_nnz)
    for entries, targets in arrays.passes:  # each pass reads earlier ones
        sources = _multipass_sources(xp, entries, a_columns, arrays.full_indptr)
        destinations = _multipass_destinations(xp, entries, targets, a_rows,
                                               arrays.full_indptr, full_nnz)
        weights = weights + _segment_sum(xp, coefficients[entries] * weights[sources],
                                         destinations, full_nnz)
    return weights


def _multipass_sources(xp: Any, entries: Any, a_columns: Any, full_indptr: Any) -> Any:
    """The ``P`` sources of a pass's triples: those of entry ``a_ik`` run over row ``k``.

    A triple's source is ``full_indptr[k]`` plus its place in its entry's run (an entry's
    triples are consecutive, and the entries of a pass increase).
    """
    index = xp.arange(entries.shape[0], dtype=np.int32)
    starts = xp.concatenate([xp.ones(min(entries.shape[0], 1), bool),
                             entries[1:] != entries[:-1]])
    run_start = xp.where(starts, index, 0)
    if xp is np:
        run_start = np.maximum.accumulate(run_start)
    else:
        run_start = jax.lax.cummax(run_start)
    return full_indptr[a_columns[entries]] + index - run_start


def _multipass_destinations(xp: Any, entries: Any, targets: Any, a_rows: Any,
                            full_indptr: Any, full_nnz: int) -> Any:
    """The ``P`` destinations of a pass's triples: the offsets ``targets`` in row ``i`` of
    ``P``, that of their entry ``a_ik``; the dtype's largest (padding): ``full_nnz``, a
    segment past the last weight."""
    positions = full_indptr[a_rows[entries]] + targets.astype(np.int32)
    return xp.where(targets == _classical_kernels.nowhere(targets.dtype), full_nnz, positions)


def _kept_positions(xp: Any, dropped: Any, full_nnz: int, count: int | None = None) -> Any:
    """The increasing positions of ``[0, full_nnz)`` not in ``dropped`` (increasing).

    The ``k``-th kept position is ``k`` plus the dropped ones before it: those ``d_j``
    with ``d_j - j ≤ k`` (``d_j - j`` counts the kept positions before ``d_j``), a running
    count over one pass.  ``count``: how many to give (``jax.numpy`` only), when the arrays
    are padded (:mod:`._padded_setup`): padding past every position in ``dropped`` counts
    for none, positions past the true ones are meaningless.
    """
    kept = full_nnz - dropped.shape[0] if count is None else count
    kept_before = dropped - xp.arange(dropped.shape[0], dtype=np.int32)
    if xp is np:
        counts = np.bincount(kept_before, minlength=kept + 1)
    else:
        counts = jnp.zeros(kept + 1, np.int32).at[kept_before].add(1)
    return (xp.arange(kept, dtype=np.int32)
            + xp.cumsum(counts[:kept], dtype=np.int32)).astype(np.int32)


def _repeat(xp: Any, counts: Any, total: int) -> Any:
    """``[0, …, 0, 1, …]``: each index ``q`` repeated ``counts[q]`` times, ``total`` in all."""
    ids = xp.arange(counts.shape[0], dtype=np.int32)
    if xp is np:
        return np.repeat(ids, counts)
    return jnp.repeat(ids, counts, total_repeat_length=total)


def _pointers(xp: Any, counts: Any) -> Any:
    """The int32 row pointers of rows of ``counts`` entries: ``[0, c_0, c_0 + c_1, …]``."""
    return xp.concatenate([xp.zeros(1, np.int32), xp.cumsum(counts, dtype=np.int32)])


def _segment_sum(xp: Any, data: Any, ids: Any, count: int) -> Any:
    if xp is not np:
        return jax.ops.segment_sum(data, ids, num_segments=count)
    if np.iscomplexobj(data):
        sums = np.bincount(ids, data.real, count) + 1j * np.bincount(ids, data.imag, count)
    else:
        sums = np.bincount(ids, data, count)
    return sums.astype(data.dtype)
