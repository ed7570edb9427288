"""The numeric setup of a classical or aggregation hierarchy on arrays padded to size
classes.

:mod:`._size_classes` pads the hierarchy a solve keeps, so that a new pattern of a size
already seen runs the solve already compiled. The numeric setup that computes that
hierarchy's numbers reads more index arrays — the interpolation plan or the aggregates,
the pattern of ``A P``, the map from ``P``'s entries to ``R``'s, the diagonal's positions
— whose sizes
differ from pattern to pattern too. Here they are padded as well, each size to a class
of :class:`~._size_classes.HierarchyShape`'s ``setup`` (:func:`setup_sizes` says which),
so that one compiled numeric setup serves every pattern of a class
(:func:`._hierarchy.padded_numeric_setup`), on the platforms of the native kernels (the
CPU and CUDA GPUs). The structure keeps the padded arrays only; a numeric setup of one
pattern (inside a caller's trace, or on other platforms) cuts them to their true sizes
(:func:`true_interpolation`).

**The padding is inert.** As in :mod:`._size_classes`, padding rows are empty and padding
entries lie past the last row's end, where the native kernels read nothing (their row
pointers may end before their arrays do): so do the D1/D2 plan's padding pairs and
triples; its multipass entries send their values nowhere (a segment past the last, which
a segment sum drops); a padding kept position is masked.
Outputs past their last row's end are set to zero, the damping's power iteration starts
from the same vector on the true rows and zero on the padding rows, and the coarsest
inverse is zero outside the true block. So every product, weight and sweep sums the
same terms in the same order: the interpolation weights and coarse operators are the
unpadded setup's bit for bit; the damping's norms and the coarsest level's dense
inverse, which run over zeros more, agree to rounding.

A two-stage aggressive level (:class:`._classical.TwoStagePlan`) sets up ``P1``, ``A P1``,
``A1 = P1ᴴ (A P1)``, ``P2`` and ``P1 P2`` inside the numeric setup: their patterns, the
rows of ``C1`` and both stages' D1/D2 plans are padded as a level's are (each stage as a
level of those padded sizes, :func:`_stages`), ``A1``'s padding rows store no diagonal
(:data:`~._size_classes.PADDING_DIAGONAL`), and ``P1 P2``'s truncation masks its padding
kept positions; so its ``P`` is the unpadded setup's bit for bit as well.

**Programs.** The compiled numeric setups of size classes are kept per class and kind of
input (:data:`PROGRAMS`, a :class:`._compiled_programs.CompiledPrograms`). They hold
no arrays (a structure's are their arguments) and no values, so
:func:`~jaxsolve.sparse.clear_cache`, which drops the setups, leaves them, as it leaves
the solves JAX compiled for those classes: a pattern set up again after it, say for
another operator on the same pattern, traces, lowers and compiles nothing.
:func:`~jaxsolve.sparse.finalize` drops them; JAX's own caches
keep the executables until ``jax.clear_caches()``.

A smoothed or unsmoothed aggregation hierarchy is set up on padded arrays too: its
aggregates and ``T``'s places in ``P`` are padded with rows of aggregate 0 whose basis
entries, hence ``T`` entries, are zero, and whose ``T`` entries go past ``P``'s end; its
power iteration starts from the same vector masked to the true rows, as the damping's.
With ``k`` near-null-space vectors (or a block system's ``k`` translations) each coarse
level's padded rows hold whole aggregates of ``k`` unknowns (and a block system's padded
rows whole nodes): a padding aggregate's Gram matrix is zero, so its ``T`` columns and
coarse basis are too. So ``T``, the aggregates' norms (or Gram matrices' eigenvectors)
and the Galerkin products are the unpadded setup's, ``ω`` and what follows from it to
rounding. The multicolor smoothers' orderings are padded to their level's color shape
(:func:`._multicolor.padded_ordering`: padding rows in no chunk, padding chunks empty,
padding entries of ``L`` and ``U`` zero and past every row's), so their data are the
unpadded setup's, padded; only a smoothed coarsest level's coloring (``NOSOLVER``) keeps
a setup per pattern.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _classical, _classical_kernels, _ffi_primitives
from ._classical import InterpolationArrays, MultipassArrays, TwoStageArrays
from ._compiled_programs import CompiledPrograms
from ._csr_arrays import CsrArrays
from ._multicolor import MulticolorArrays, MulticolorOrdering
from ._products import transposed_values
from ._relaxation import stored_diagonal
from ._size_classes import PADDING_DIAGONAL, LevelShape


# A multipass plan's list of dropped weights is padded to one per this many rows at least
# (:func:`_plan_sizes`).
DROPPED_ROWS = 16


class LevelLayout(NamedTuple):
    """What the shapes of a classical level's setup arrays depend on besides their sizes.

    Attributes:
      multipass: multipass interpolation (an aggressive level), else D1/D2.
      truncated: whether truncation drops weights (``P``'s pattern is not the full one).
      passes: the multipass passes (0 for D1/D2).
      dropped: whether a multipass plan lists the dropped weights rather than the kept.
      offsets: the dtype of the plan's offsets (None for a multipass plan of no passes).
    """

    multipass: bool
    truncated: bool
    passes: int
    dropped: bool
    offsets: np.dtype | None = None


class TwoStageLayout(NamedTuple):
    """What the shapes of a two-stage aggressive level's setup arrays
    (:class:`._classical.TwoStageArrays`) depend on besides their sizes: each stage's
    :class:`LevelLayout`, whether truncation drops weights of ``P1 P2``, and the dtype of
    ``P1ᴴ``'s offsets in ``P1``'s rows (:func:`._products.transpose_offsets`)."""

    first: LevelLayout
    second: LevelLayout
    truncated: bool
    r1_offsets: np.dtype


class AggregationLayout(NamedTuple):
    """What an aggregation level's setup computes besides its sizes: ``P`` smoothed
    (``(I − ω D⁻¹A) T``) or not (``T``), of ``columns`` near-null-space vectors (coarse
    unknowns) per aggregate."""

    smoothed: bool
    columns: int = 1


def true_ordering(ordering: MulticolorOrdering, arrays: MulticolorArrays) -> MulticolorArrays:
    """The part of :func:`._multicolor.padded_ordering`'s arrays (on the device) that
    holds ``ordering``'s own, in the same chunks (jit-able): what a numeric setup of that
    pattern alone reads."""
    own = ordering.host_arrays(arrays.chunk_rows)
    return jax.tree.unflatten(jax.tree.structure(own), [
        padded[:true.shape[0]] for padded, true in zip(
            jax.tree.leaves(arrays), jax.tree.leaves(own), strict=True)])


Interpolation = InterpolationArrays | MultipassArrays | TwoStageArrays


def level_layout(arrays: Interpolation) -> LevelLayout | TwoStageLayout:
    """The layout of a classical level's interpolation arrays (:func:`._classical.host_arrays`)."""
    if isinstance(arrays, TwoStageArrays):
        return TwoStageLayout(level_layout(arrays.first), level_layout(arrays.second),
                              arrays.keep is not None, arrays.r1_offsets.dtype)
    if isinstance(arrays, MultipassArrays):
        return LevelLayout(True, arrays.keep is not None or arrays.dropped is not None,
                           len(arrays.passes), arrays.dropped is not None,
                           arrays.passes[0][1].dtype if arrays.passes else None)
    return LevelLayout(False, arrays.keep is not None, 0, False, arrays.a_targets.dtype)


def setup_sizes(level, arrays: Interpolation) -> tuple[int, ...]:
    """The true sizes a classical :class:`._hierarchy.LevelStructure`'s setup arrays are
    padded by, beyond its :class:`~._size_classes.LevelShape`: the nonzeros of ``A P``,
    then its interpolation's (:func:`_plan_sizes`). ``arrays``: its interpolation's host
    arrays.

    Every other array's length follows from these and the level's shape: ``P``'s kept
    positions have ``P``'s nonzeros, the C points' unit positions the next level's rows.
    """
    return (level.a_p.c.nnz, *_plan_sizes(level.interpolation, arrays))


def _plan_sizes(structure: _classical.InterpolationStructure, arrays: Interpolation
                ) -> tuple[int, ...]:
    """The untruncated weights (when truncated), then the D1/D2 plan's pairs and triples,
    or each multipass pass's triples and the dropped weights (when listed), or a two-stage
    plan's ``C1`` rows and nonzeros of ``P1``, ``A P1``, ``A1`` and ``P2``, then each
    stage's sizes (:func:`_stages`).

    The D1/D2 plan's pairs and triples count at least one a row: where the strong F–F
    couplings without a common C point are few (a two-stage level's first stage on 3D
    Poisson: none, or a few hundred near a handful of extra couplings), their number
    varies from pattern to pattern by far more than any size class's room, and a pattern
    of a size already seen would compile a numeric setup of its own. Padded to a row
    each, they fit every such pattern, for two narrow entries (a byte each on most levels)
    a pair or triple, less than the level's int32 row pointers. A multipass plan's
    dropped weights, as few, vary alike (an aggressive level of 3D Poisson 13³ with extra
    couplings, six weights a row: 4, 12 or 28 dropped of 5120): their list holds at least
    one per ``DROPPED_ROWS`` rows, a quarter of a byte a row."""
    layout = level_layout(arrays)
    sizes = [structure.full.nnz] if layout.truncated else []
    if isinstance(layout, TwoStageLayout):
        plan = structure.plan
        sizes += [plan.first.n_coarse, plan.first.p.nnz, plan.a_p.c.nnz, plan.galerkin.c.nnz,
                  plan.second.p.nnz]
        sizes += [*_plan_sizes(plan.first, arrays.first), *_plan_sizes(plan.second,
                                                                         arrays.second)]
    elif layout.multipass:
        sizes += [entries.shape[0] for entries, _ in arrays.passes]
        if layout.dropped:  # at least one per DROPPED_ROWS rows: see the docstring
            rows = arrays.full_indptr.shape[0] - 1
            sizes += [max(arrays.dropped.shape[0], -(-rows // DROPPED_ROWS))]
    else:  # at least one a row: see the docstring
        rows = arrays.coarse.shape[0]
        sizes += [max(arrays.pair_offsets.shape[0], rows),
                  max(arrays.triple_offsets.shape[0], rows)]
    return tuple(sizes)


class _Stages(NamedTuple):
    """A two-stage level's stages as levels of padded sizes: the first interpolates
    ``A`` (the level's rows and nonzeros) from ``C1``, the second ``A1`` from the level's
    coarse rows; with the nonzeros of ``A P1`` and each stage's :func:`_plan_sizes`."""

    first: LevelShape
    second: LevelShape
    a_p1: int
    first_sizes: tuple[int, ...]
    second_sizes: tuple[int, ...]


def _stages(layout: TwoStageLayout, shape: LevelShape, sizes: tuple[int, ...]) -> _Stages:
    """The stages of a two-stage level of ``shape`` and (padded) plan ``sizes``."""
    c1, p1, a_p1, a1, p2 = sizes[layout.truncated:][:5]
    split = layout.truncated + 5 + 2 + layout.first.truncated
    return _Stages(first=LevelShape(shape.rows, shape.a_nnz, p1, c1, p1),
                   second=LevelShape(c1, a1, p2, shape.coarse_rows, p2), a_p1=a_p1,
                   first_sizes=sizes[layout.truncated + 5:split], second_sizes=sizes[split:])


def aggregation_setup_sizes(level) -> tuple[int, ...]:
    """The true sizes an aggregation :class:`._hierarchy.LevelStructure`'s setup arrays
    are padded by, beyond its :class:`~._size_classes.LevelShape`: the nonzeros of
    ``A P``. (Its aggregates and ``T``'s places in ``P`` have the level's rows.)"""
    return (level.a_p.c.nnz,)


def padded_aggregation(level, shape: LevelShape) -> tuple[np.ndarray, np.ndarray | None]:
    """An aggregation level's aggregates and ``T``'s places in ``P`` (host), padded to
    ``shape``'s rows: padding rows in aggregate 0, where their zero basis rows add nothing,
    and their ``T`` entries (``k`` a row) placed past ``P``'s end, where a scatter drops
    them."""
    aggregates = _padded(level.aggregates, shape.rows, 0)
    places = (None if level.tentative_in_p is None
              else _padded(level.tentative_in_p, shape.rows * level.columns, shape.p_nnz))
    return aggregates, places


def resized(values: jax.Array, size: int) -> jax.Array:
    """``values`` cut or padded with zeros to ``size`` entries (what is cut: zeros)."""
    return jnp.pad(values, (0, size - values.shape[0])) if size >= values.shape[0] else (
        values[:size])


def padded_interpolation(level, arrays: Interpolation, shape: LevelShape,
                         sizes: tuple[int, ...]) -> Interpolation:
    """A classical level's interpolation ``arrays`` (host) padded to its ``shape`` and
    the padded ``sizes`` (:func:`setup_sizes`'s order)."""
    return _padded_plan(level.interpolation, arrays, shape, sizes[1:])


def _padded_plan(structure: _classical.InterpolationStructure, arrays: Interpolation,
                 shape: LevelShape, sizes: tuple[int, ...]) -> Interpolation:
    """``arrays``, the host arrays of ``structure``, padded to ``shape`` and the padded
    plan ``sizes`` (:func:`_plan_sizes`'s order)."""
    layout = level_layout(arrays)
    full_nnz = _full_nnz(layout, shape, sizes)
    if isinstance(layout, TwoStageLayout):
        plan, stages = structure.plan, _stages(layout, shape, sizes)
        first, second = stages.first, stages.second
        return TwoStageArrays(
            first=_padded_plan(plan.first, arrays.first, first, stages.first_sizes),
            p1=_padded_csr(arrays.p1, first.rows, first.p_nnz),
            r1=_padded_csr(arrays.r1, first.coarse_rows, first.p_nnz),
            r1_offsets=_padded(arrays.r1_offsets, first.p_nnz, 0),
            a_p1=_padded_csr(arrays.a_p1, first.rows, stages.a_p1),
            a1=_padded_csr(arrays.a1, second.rows, second.a_nnz),
            a1_diagonal=_padded(arrays.a1_diagonal, second.rows, PADDING_DIAGONAL),
            second=_padded_plan(plan.second, arrays.second, second, stages.second_sizes),
            p2=_padded_csr(arrays.p2, second.rows, second.p_nnz),
            full=_padded_csr(arrays.full, shape.rows, full_nnz),
            keep=None if arrays.keep is None else _padded(arrays.keep, shape.p_nnz, 0))
    own_full = structure.full.nnz
    rows = shape.rows
    full_indptr = _padded(arrays.full_indptr, rows + 1, own_full)
    if layout.multipass:
        interpolatory = np.zeros(shape.a_nnz, bool)
        interpolatory[:structure.plan.interpolatory.shape[0]] = structure.plan.interpolatory
        return MultipassArrays(
            full_indptr=full_indptr,
            interpolatory_bits=np.packbits(interpolatory, bitorder="little"),
            # padding goes to the segment past the last weight, which a segment sum drops
            unit_positions=_padded(arrays.unit_positions, shape.coarse_rows, full_nnz),
            passes=tuple((_padded(entries, size, 0),
                          _padded(targets, size, _classical_kernels.nowhere(targets.dtype)))
                         for (entries, targets), size in zip(
                             arrays.passes, sizes[layout.truncated:][:layout.passes],
                             strict=True)),
            keep=None if arrays.keep is None else _padded(arrays.keep, shape.p_nnz, 0),
            # padding lies past every kept position (_classical._kept_positions drops it)
            dropped=(None if arrays.dropped is None
                     else _padded(arrays.dropped, sizes[-1], _PAST_EVERY_POSITION)))
    pairs, triples = sizes[-2:]
    nowhere = _classical_kernels.nowhere(layout.offsets)  # padding rows read none of them
    return InterpolationArrays(
        coarse=_padded(arrays.coarse, rows, False),
        full_indptr=full_indptr,
        a_targets=_padded(arrays.a_targets, shape.a_nnz, nowhere),
        pair_indptr=_padded(arrays.pair_indptr, rows + 1, arrays.pair_indptr[-1]),
        pair_offsets=_padded(arrays.pair_offsets, pairs, 0),
        pair_counts=_padded(arrays.pair_counts, pairs, 0),
        triple_indptr=_padded(arrays.triple_indptr, rows + 1, arrays.triple_indptr[-1]),
        triple_offsets=_padded(arrays.triple_offsets, triples, 0),
        triple_targets=_padded(arrays.triple_targets, triples, nowhere),
        keep=None if arrays.keep is None else _padded(arrays.keep, shape.p_nnz, 0))


def _padded_csr(pattern: CsrArrays, rows: int, nnz: int) -> CsrArrays:
    """A pattern's host arrays (values: a placeholder, kept) padded to ``rows`` and
    ``nnz``: empty rows, entries past the last row's end."""
    return pattern._replace(indices=_padded(pattern.indices, nnz, 0),
                            indptr=_padded(pattern.indptr, rows + 1, pattern.indptr[-1]))


_PAST_EVERY_POSITION = np.iinfo(np.int32).max // 2


def _full_nnz(layout: LevelLayout | TwoStageLayout, shape: LevelShape,
              sizes: tuple[int, ...]) -> int:
    """The padded count of a level's untruncated weights (``P``'s when none is dropped);
    ``sizes``: its plan's (:func:`_plan_sizes`'s order)."""
    return sizes[0] if layout.truncated else shape.p_nnz


def _padded(array: np.ndarray, size: int, fill) -> np.ndarray:
    return np.concatenate([array, np.full(size - array.shape[0], fill, array.dtype)])


def true_interpolation(level, arrays: Interpolation) -> Interpolation:
    """The part of :func:`padded_interpolation`'s arrays (on the device) that holds
    ``level``'s own plan (jit-able): what a numeric setup of that pattern alone reads."""
    own = _classical.host_arrays(level.interpolation)
    return jax.tree.map(lambda padded, true: padded[:true.shape[0]], arrays, own)


def within(values: jax.Array, indptr: jax.Array) -> jax.Array:
    """``values`` with zeros past the last row's end of ``indptr`` (the padding)."""
    return jnp.where(jnp.arange(values.shape[0], dtype=indptr.dtype) < indptr[-1], values, 0)


def weights(layout: LevelLayout | TwoStageLayout, arrays: Interpolation, shape: LevelShape,
            sizes: tuple[int, ...], a: CsrArrays, diagonal: jax.Array, p: CsrArrays
            ) -> jax.Array:
    """``P``'s values on padded arrays (``shape`` and ``sizes``: the level's padded sizes,
    :func:`setup_sizes`'s order; ``p``: ``P``'s padded pattern): the D1/D2 kernel's, the
    multipass formula's, or a two-stage level's ``P1 P2`` from each stage's D1/D2 weights
    and the products ``A1 = P1ᴴ (A P1)`` and ``P1 P2``; zero past ``P``'s last row."""
    return _weights(layout, arrays, shape, sizes[1:], a, diagonal, p)


def _weights(layout: LevelLayout | TwoStageLayout, arrays: Interpolation, shape: LevelShape,
             sizes: tuple[int, ...], a: CsrArrays, diagonal: jax.Array, p: CsrArrays
             ) -> jax.Array:
    """:func:`weights` for the plan ``sizes`` (:func:`_plan_sizes`'s order)."""
    full_nnz = _full_nnz(layout, shape, sizes)
    if isinstance(layout, TwoStageLayout):
        stages = _stages(layout, shape, sizes)
        c1 = stages.first.coarse_rows
        p1 = arrays.p1._replace(values=_weights(layout.first, arrays.first, stages.first,
                                                stages.first_sizes, a, diagonal, arrays.p1))
        r1 = arrays.r1._replace(values=within(
            transposed_values(p1, arrays.r1.indices, arrays.r1_offsets), arrays.r1.indptr))
        a_p1 = arrays.a_p1._replace(values=product(a, p1, arrays.a_p1, c1))
        a1 = arrays.a1._replace(values=product(r1, a_p1, arrays.a1, c1))
        p2 = arrays.p2._replace(values=_weights(
            layout.second, arrays.second, stages.second, stages.second_sizes, a1,
            stored_diagonal(a1.values, arrays.a1_diagonal), arrays.p2))
        values = product(p1, p2, arrays.full, shape.coarse_rows)
        if layout.truncated:
            values = _classical._truncated(jnp, values, arrays.full.indptr, arrays.keep,
                                           true_count=p.indptr[-1])
        return within(values, p.indptr)
    if not layout.multipass:
        return within(_ffi_primitives.interpolation_weights(
            a.values, diagonal, a.indices, a.indptr, *_classical.kernel_operands(arrays),
            p.indptr, full_nnz=full_nnz),
            p.indptr)
    values = _classical._multipass_weights(jnp, arrays, full_nnz, a.values, a.row_ids,
                                          a.indices, diagonal)
    if layout.truncated:
        keep = arrays.keep if arrays.dropped is None else _classical._kept_positions(
            jnp, arrays.dropped, full_nnz, count=p.indices.shape[0])
        values = _classical._truncated(jnp, values, arrays.full_indptr, keep,
                                       true_count=p.indptr[-1])
    return within(values, p.indptr)


def product(a: CsrArrays, b: CsrArrays, c: CsrArrays, n_cols: int) -> jax.Array:
    """The values of ``C = A B`` on padded patterns (native kernels), zero past ``C``'s
    last row."""
    return within(_ffi_primitives.csr_product_values(a, b, c.indices, c.indptr,
                                                     n_cols=n_cols), c.indptr)


# The compiled numeric setups of size classes (see the module).
PROGRAMS = CompiledPrograms("numeric setup")
