"""The AMG hierarchy: its structure (host, once per pattern) and its numbers (under jit).

An AMG hierarchy is a list of levels ``A₀ = A, A₁, …, A_L``, each with a prolongation
``P``, its restriction ``R = Pᴴ`` and the coarse operator ``A_{ℓ+1} = R A P``.  Classical
AMG (:mod:`._classical`) splits a level's unknowns into C and F points and interpolates
the F points from the C points.  Aggregation AMG groups a level's unknowns into aggregates
(:mod:`._aggregation`) and builds

* the tentative prolongation ``T``: on each aggregate, an orthonormal basis of the
  near-null space ``B_ℓ`` restricted to it (the constant vector unless the user gives
  ``near_nullspace``, e.g. rigid-body modes); ``B_{ℓ+1}`` holds its coefficients;
* the prolongation ``P = T`` (AmgX's unsmoothed aggregation) or ``P = (I − ω D⁻¹A) T``
  with ``ω = 4 / (3 ρ(D⁻¹A))`` (smoothed aggregation, as PyAMG);
* the restriction ``R = Pᴴ`` and the coarse operator ``A_{ℓ+1} = R A P``.

The work splits in two, so that new values on a fixed pattern are re-set-up inside a
compiled program:

* :func:`build_structure` (host, NumPy and native code; cached per pattern and
  configuration): the splittings or aggregates and every pattern — of ``T``, ``P``, ``R``,
  ``A P``, ``A_{ℓ+1}`` — with the plans of the sparse products (:mod:`._products`) and of
  classical interpolation.  Coupling strengths come from the values when they are
  concrete, else from the pattern alone.
* :func:`numeric_setup` (jit-able, differentiable, ``vmap``-able over values): all the
  numbers — the interpolation weights, or ``T`` and ``ω`` (a few power-iteration steps),
  ``P``, ``R``, ``A_{ℓ+1}``, the
  smoothers' data, and the inverse of the coarsest matrix, LU-factored and applied as a
  dense inverse (``DENSE_LU_SOLVER``); for a singular system (``coarse_null_dimension``,
  or found in the setup: a finest matrix whose rows sum to zero, as a pure-Neumann or
  periodic problem's, annihilates the constants) a pseudo-inverse from its SVD instead.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _aggregation, _blocks, _classical, _pattern_kernels
from ._classical import (InterpolationArrays, InterpolationStructure, MultipassArrays,
                         TwoStageArrays)
from ._config import AMGConfig
from ._csr_arrays import CsrArrays, CsrStructure
from ._multicolor import (MULTICOLOR_SMOOTHERS, ColorShape, MulticolorArrays,
                          MulticolorOrdering, multicolor_ordering, padded_ordering,
                          safe_inverse)
from ._products import (ProductPlan, galerkin_products, plan_product, transpose_offsets,
                        transposed_values)
from ._relaxation import (RelaxationData, power_iteration_start, relaxation_data,
                          spectral_radius, stored_diagonal)
from . import _padded_setup
from ._padded_setup import (AggregationLayout, LevelLayout, TwoStageLayout,
                            aggregation_setup_sizes, level_layout, padded_aggregation,
                            padded_interpolation, resized, setup_sizes, true_interpolation,
                            true_ordering, within)
from ._size_classes import (PADDING_DIAGONAL, HierarchyShape, LevelShape, class_shape, pad_csr,
                            pad_pattern, pad_relaxation, true_csr, true_shape, with_colors)

MAX_DENSE_COARSE_ROWS = 8192


# -----------------------------------------------------------------------------
# Structure (host)


@dataclasses.dataclass(frozen=True, eq=False)
class LevelStructure:
    """Everything about one level (not the coarsest) that its values do not change.

    Attributes:
      a: the pattern of this level's operator.
      diagonal: per row, the position of ``a``'s diagonal entry (-1 where none is stored).
      aggregates: ``(n,)`` the aggregate of each unknown (None for classical AMG).
      n_aggregates: the number of aggregates (classical AMG: of C points).
      columns: ``k``, the near-null-space vectors per aggregate (coarse unknowns per
        aggregate; 1 for classical AMG).
      tentative: the pattern of ``T`` (``n × k·n_aggregates``; row ``i`` holds columns
        ``k·aggregates[i] + c``), or None for classical AMG.
      smoothing: the plan of ``A T`` (smoothed aggregation) or None.
      tentative_in_p: where ``T``'s entries sit among ``P``'s (smoothed aggregation), row
        by row.
      p: the pattern of ``P`` (that of ``A T``, or ``T``'s).
      r: the pattern of ``R = Pᴴ``; ``r_from_p`` takes ``P``'s values to ``R``'s (the
        device keeps it as offsets within ``P``'s rows: :class:`LevelArrays`).
      a_p: the plan of ``A P``.
      galerkin: the plan of ``R (A P)``, whose result is the next level's operator.
      interpolation: classical AMG's splitting and interpolation plan, else None.
      block_dim: unknowns per node of this level's operator (``1``: a scalar system; see
        :mod:`._blocks`), whose block-Jacobi smoothers invert blocks of that size.
      ordering: the multicolor smoothers' coloring of ``a`` (:mod:`._multicolor`), else None.
    """

    a: CsrStructure
    diagonal: np.ndarray
    aggregates: np.ndarray | None
    n_aggregates: int
    columns: int
    tentative: CsrStructure | None
    smoothing: ProductPlan | None
    tentative_in_p: np.ndarray | None
    p: CsrStructure
    r: CsrStructure
    r_from_p: np.ndarray
    a_p: ProductPlan
    galerkin: ProductPlan
    interpolation: InterpolationStructure | None = None
    block_dim: int = 1
    ordering: MulticolorOrdering | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class HierarchyStructure:
    """The structure of a whole hierarchy, built by :func:`build_structure`.

    Attributes:
      levels: every level but the coarsest.
      coarsest: the coarsest operator's pattern.
      coarsest_diagonal: its diagonal positions.
      coarsest_block_dim: unknowns per node of the coarsest operator.
      arrays: the index arrays :func:`numeric_setup` reads, on the device (one copy,
        shared by every setup); the operators' and transfer operators' padded to
        ``shape``.
      config: the AMG configuration it was built for.
      shape: the size classes of its levels (:mod:`._size_classes`), to which a kept
        hierarchy's numbers are padded (:func:`padded_hierarchy`), with its multicolor
        smoothers' color shapes; its own sizes when a multicolor smoother smooths the
        coarsest level.
      setup_seconds: the host time the build took, by phase: ``"aggregation"`` (coupling
        graphs and matching) or ``"splitting"`` (classical: strength, C/F splitting,
        interpolation plan and truncation), ``"sparse products"`` (the patterns and plans of
        ``T``, ``P``, ``R``, ``A P`` and ``Pᵀ A P``; classical: with the next level's
        values, for its strength), ``"coloring"`` (the multicolor smoothers' orderings) and
        ``"to the device"``.
      coarsest_ordering: the multicolor smoothers' ordering of the coarsest level, when it
        is smoothed (``coarse_solver`` ``NOSOLVER``), else None.
      pattern_key: a key of the finest pattern (:attr:`CsrMatrix.pattern_key`), which the
        :attr:`fingerprint` digests instead of the pattern; empty: none was given.
      layouts: per level, the :class:`._padded_setup.LevelLayout` (classical; a
        :class:`~._padded_setup.TwoStageLayout` on a two-stage aggressive level) or
        :class:`._padded_setup.AggregationLayout` of its padded setup arrays, when the
        numeric setup runs on padded arrays (:attr:`padded_setup`); else None.
    """

    levels: tuple[LevelStructure, ...]
    coarsest: CsrStructure
    coarsest_diagonal: np.ndarray
    arrays: StructureArrays
    config: AMGConfig
    shape: HierarchyShape
    setup_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    coarsest_block_dim: int = 1
    coarsest_ordering: MulticolorOrdering | None = None
    pattern_key: str = ""
    layouts: tuple[LevelLayout | TwoStageLayout | AggregationLayout, ...] | None = None

    @functools.cached_property
    def padded_setup(self) -> PaddedSetup | None:
        """What :func:`padded_numeric_setup` is specialized to for this structure (equal
        for every structure of its size class), or None when its setup is not padded."""
        if self.layouts is None:
            return None
        return PaddedSetup(config=self.config, shape=self.shape, layouts=self.layouts,
                           block_dims=tuple(level.block_dim for level in self.levels)
                           + (self.coarsest_block_dim,),
                           r_offsets=tuple(level.r_offsets.dtype
                                           for level in self.arrays.levels))

    @functools.cached_property
    def fingerprint(self) -> str:
        """A digest of everything static about the structure: patterns, aggregates, splittings.

        Equal fingerprints mean interchangeable structures, so a structure rebuilt after
        ``clear_cache()`` reuses the compiled numeric setup of the one it replaces.  It
        digests what the rest follows from: the finest pattern (its ``pattern_key`` when
        the structure has one), each aggregation level's aggregates, each classical level's
        ``P``; every other pattern (``P = pattern(A T)``, ``R``, ``A P``, the coarse
        operators, their colorings) is a function of these and the configuration.  At 128³
        digesting every pattern took a quarter of a second of the first setup.
        """
        digest = hashlib.blake2b(repr(self.config).encode(), digest_size=16)
        finest = self.levels[0].a if self.levels else self.coarsest
        arrays = ([] if self.pattern_key else [finest.indptr, finest.indices])
        for level in self.levels:
            arrays += ([level.aggregates] if level.aggregates is not None
                       else [level.p.indptr, level.p.indices])
        for array in arrays:
            digest.update(np.ascontiguousarray(array))  # hashed in place, not copied
            digest.update(b"|")
        digest.update(repr([self.pattern_key, finest.n_cols, self.coarsest.n_rows,
                            self.coarsest.nnz, self.coarsest_block_dim, self.shape]
                           + [(level.a.n_rows, level.a.nnz, level.n_aggregates, level.columns,
                               level.smoothing is None, level.block_dim)
                              for level in self.levels]).encode())
        return digest.hexdigest()

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HierarchyStructure) and self.fingerprint == other.fingerprint


class LevelArrays(NamedTuple):
    """A level's index arrays on the device (a pytree; see :class:`LevelStructure`).

    ``a``, ``p`` and ``r`` are padded to the structure's size classes (the finest ``a``
    is not): :func:`numeric_setup` reads their true parts, a kept hierarchy shares them.

    Each array is kept once: ``T``'s pattern follows from ``aggregates``, the smoothing
    product's result has ``P``'s pattern and the Galerkin product's the next level's.  The
    products need nothing else: no map from scalar products to places in their results
    (see :mod:`._products`). ``R``'s values are ``P``'s, gathered by ``r_offsets``, each
    entry's offset in its row of ``P``: a byte where int32 positions took four (0.19 ×
    ``A`` of the default's memory kept on 3D Poisson).
    """

    a: CsrArrays  # values: an empty placeholder; the numbers arrive with each setup
    diagonal: jax.Array
    aggregates: jax.Array | None
    interpolation: InterpolationArrays | MultipassArrays | TwoStageArrays | None
    tentative_in_p: jax.Array | None
    p: CsrArrays
    r: CsrArrays
    r_offsets: jax.Array  # where R's entries sit in P's rows (_products.transpose_offsets)
    a_p: CsrArrays  # the pattern of A P, the Galerkin product's right factor
    ordering: MulticolorArrays | None = None
    # (rows, k): where each row's entries in its node's diagonal block sit among the values
    # (-1: not stored), for a block system's block-Jacobi smoothers, else None.
    block_positions: jax.Array | None = None


class StructureArrays(NamedTuple):
    """All levels' index arrays, and the coarsest operator's; ``rows``: the true rows of
    each level and of the coarsest (those of a padded structure are padded);
    ``coarsest_row_ids``: the row of each of the coarsest operator's entries (padded as its
    arrays: the last row past its end), where a dense inverse is set up from it, found on
    the host (a program that expands the rows compiles a cumulative sum).
    """

    levels: tuple[LevelArrays, ...]
    coarsest: CsrArrays
    coarsest_diagonal: jax.Array
    coarsest_ordering: MulticolorArrays | None = None
    rows: jax.Array | None = None
    coarsest_row_ids: jax.Array | None = None


def _pattern_arrays(pattern: CsrStructure) -> CsrArrays:
    # The values are a placeholder of no inexact dtype, so that nothing mistakes it for
    # (or differentiates) a matrix's values; every use replaces it.
    return pattern.on_device(jnp.zeros(0, jnp.int32))


def _level_arrays(level: LevelStructure, shape: LevelShape,
                  interpolation: InterpolationArrays | MultipassArrays | None,
                  setup: tuple[int, ...] | None, colors: ColorShape | None,
                  block_jacobi: bool, pattern_key: str = "") -> LevelArrays:
    """``level``'s arrays on the device, padded to ``shape``; with the ``setup`` sizes
    (:func:`._padded_setup.setup_sizes`, padded) also those only the numeric setup reads,
    and its multicolor ordering's padded to ``colors``. ``interpolation``: the host arrays
    of a classical level's; ``block_jacobi``: whether its smoother inverts the diagonal
    blocks of a block system; ``pattern_key``: the finest pattern's key, for the finest
    level (:func:`_finest_arrays`), else empty."""
    a, diagonal = (_finest_arrays(level, shape, pattern_key) if pattern_key else (
        _pattern_arrays(pad_pattern(level.a, shape.rows, shape.a_nnz)),
        jax.device_put(_padded_diagonal(level.diagonal, shape.rows))))
    smoothed = level.smoothing is not None
    a_p = level.a_p.c
    aggregates, tentative_in_p = level.aggregates, level.tentative_in_p
    ordering = (None if level.ordering is None else level.ordering.host_arrays()
                if colors is None else padded_ordering(level.ordering, colors, shape.rows))
    if setup is not None:
        if level.interpolation is not None:
            interpolation = padded_interpolation(level, interpolation, shape, setup)
        else:
            aggregates, tentative_in_p = padded_aggregation(level, shape)
        a_p = pad_pattern(a_p, shape.rows, setup[0])
    r_offsets = transpose_offsets(level.p, level.r, level.r_from_p)
    r_offsets = np.concatenate([r_offsets, np.zeros(shape.r_nnz - level.r.nnz, r_offsets.dtype)])
    return LevelArrays(
        a=a,
        diagonal=diagonal,
        aggregates=None if aggregates is None else jax.device_put(aggregates),
        interpolation=jax.tree.map(jax.device_put, interpolation),
        tentative_in_p=jax.device_put(tentative_in_p) if smoothed else None,
        p=_pattern_arrays(pad_pattern(level.p, shape.rows, shape.p_nnz)),
        r=_pattern_arrays(pad_pattern(level.r, shape.coarse_rows, shape.r_nnz)),
        r_offsets=jax.device_put(r_offsets),
        a_p=_pattern_arrays(a_p),
        ordering=jax.device_put(ordering),
        block_positions=(jax.device_put(_block_positions(level.a, level.block_dim, shape.rows))
                         if block_jacobi and level.block_dim > 1 else None),
    )


# The finest levels' padded patterns and diagonal positions on the device, by pattern key,
# padded sizes and device (see _finest_arrays), while a structure holds them.
_FINEST: weakref.WeakValueDictionary[tuple, jax.Array] = weakref.WeakValueDictionary()
_FINEST_LOCK = threading.Lock()


def _finest_arrays(level: LevelStructure, shape: LevelShape, pattern_key: str
                   ) -> tuple[CsrArrays, jax.Array]:
    """The finest ``level``'s pattern padded to ``shape``, and its diagonal positions, on
    the device: those another structure of the pattern (``pattern_key``) holds where it
    pads them alike, else sent now. The structures of one pattern — one per operator on
    it (:mod:`._structure_key`), per AMG configuration — then keep one copy of them, not
    one each (0.44 × ``A`` of 3D Poisson's), and the pattern is padded and sent once."""
    placeholder = jnp.zeros(0, jnp.int32)  # the values' (see _pattern_arrays): its device
    key = (pattern_key, shape.rows, shape.a_nnz, *placeholder.devices())
    names = ("indices", "indptr", "diagonal")
    with _FINEST_LOCK:
        kept = [_FINEST.get((*key, name)) for name in names]
    if any(array is None for array in kept):
        padded = pad_pattern(level.a, shape.rows, shape.a_nnz)
        kept = [jax.device_put(array) for array in (
            padded.indices, padded.indptr, _padded_diagonal(level.diagonal, shape.rows))]
        with _FINEST_LOCK:
            _FINEST.update({(*key, name): array for name, array in zip(names, kept, strict=True)})
    indices, indptr, diagonal = kept
    return CsrArrays(placeholder, indices, indptr), diagonal


def _block_positions(pattern: CsrStructure, k: int, rows: int) -> np.ndarray:
    """``(rows, k)``: the position among ``pattern``'s entries of each row ``i``'s entry in
    column ``k (i // k) + j`` (its node's diagonal block), -1 where none is stored (and on
    the rows past the pattern's, a size class's padding).  A block smoother gathers its
    blocks by them, where finding them on the device expands every entry's row."""
    positions = np.full((rows, k), -1, np.int32)
    entry_rows = pattern.row_ids
    inside = np.flatnonzero(pattern.indices // k == entry_rows // k)
    positions[entry_rows[inside], pattern.indices[inside] % k] = inside
    return positions


def _padded_row_ids(pattern: CsrStructure) -> np.ndarray:
    """The row of each of ``pattern``'s entries, the last row past its rows' end (the
    padding of a size class), as :attr:`CsrArrays.row_ids` counts them."""
    rows = pattern.row_ids
    return np.concatenate([rows, np.full(pattern.nnz - rows.shape[0], pattern.n_rows - 1,
                                         rows.dtype)])


def _padded_diagonal(positions: np.ndarray, rows: int) -> np.ndarray:
    """Diagonal positions for ``rows`` rows: the padding rows store none
    (:data:`~._size_classes.PADDING_DIAGONAL`)."""
    return np.concatenate([positions, np.full(rows - positions.shape[0], PADDING_DIAGONAL,
                                              positions.dtype)])


def build_structure(
    pattern: CsrStructure, values: np.ndarray | None, columns: int, config: AMGConfig,
    pattern_key: str = "", *, pad_finest: bool = False,
) -> HierarchyStructure:
    """Builds the hierarchy's structure for ``pattern`` (host work, no JAX).

    Args:
      pattern: the finest operator's pattern.
      values: its concrete values, from which the first level's coupling strengths come
        (the coarser levels' from the aggregated magnitudes, or for classical AMG from the
        Galerkin products of these values); None to use the pattern only (classical AMG:
        its graph Laplacian, between unknowns of one kind in a block system:
        :func:`._classical.surrogate_values`).
      columns: ``k``, the near-null-space vectors (coarse unknowns per aggregate; 1 for
        classical AMG).  With ``k > 1`` the levels below the first of a scalar system
        couple by pattern; those of a block system (``config.block_dim > 1``) are block
        systems of ``k`` unknowns per aggregate, coupled by aggregated block norms.
      config: the AMG configuration; its ``block_dim`` makes the finest level a block
        system, coarsened node by node (:mod:`._blocks`).
      pattern_key: a key that identifies ``pattern`` (:attr:`CsrMatrix.pattern_key`), if
        there is one: the structure's :attr:`~HierarchyStructure.fingerprint` then need
        not digest the pattern.
      pad_finest: pad the finest level's rows and nonzeros to a size class as well (see
        :func:`._size_classes.class_shape`): a numeric setup then takes values padded to
        its ``shape`` (:func:`padded_numeric_setup`), and the solve padded vectors.

    Raises:
      ValueError: if a row has no stored diagonal entry, or the coarsest level would be
        too large for a dense LU.
    """
    check_stored_diagonal(np.flatnonzero(pattern.diagonal_positions() < 0))
    levels: list[LevelStructure] = []
    seconds: collections.Counter[str] = collections.Counter()
    clock = time.perf_counter()

    def phase(name: str) -> None:  # the time since the last phase ended counts as `name`
        nonlocal clock
        now = time.perf_counter()
        seconds[name] += now - clock
        clock = now

    if config.algorithm == "CLASSICAL":
        pattern = _classical_levels(pattern, values, config, levels, phase)
        coarsest_block_dim = config.block_dim
    else:
        pattern, coarsest_block_dim = _aggregation_levels(pattern, values, columns, config,
                                                          levels, phase)
    check_coarsest_rows(pattern.n_rows, len(levels), config)
    coarsest_diagonal = pattern.diagonal_positions()
    coarsest_ordering = None
    if config.smoother.solver in MULTICOLOR_SMOOTHERS:  # depends on the patterns only
        dilu = config.smoother.solver == "MULTICOLOR_DILU"
        levels = [dataclasses.replace(level, ordering=multicolor_ordering(level.a, dilu))
                  for level in levels]
        if config.coarse_solver == "NOSOLVER":
            coarsest_ordering = multicolor_ordering(pattern, dilu)
        phase("coloring")
    # The levels' numeric setup runs on padded arrays too (_padded_setup.py), their
    # multicolor data's too; a smoothed coarsest level's coloring keeps its sizes.
    interpolations = [None if level.interpolation is None
                      else _classical.host_arrays(level.interpolation) for level in levels]
    layouts = None
    if coarsest_ordering is None:
        layouts = tuple(
            AggregationLayout(smoothed=level.smoothing is not None, columns=level.columns)
            if arrays is None else level_layout(arrays)
            for level, arrays in zip(levels, interpolations, strict=True))
    setup = () if layouts is None else tuple(
        aggregation_setup_sizes(level) if arrays is None else setup_sizes(level, arrays)
        for level, arrays in zip(levels, interpolations, strict=True))
    shape = true_shape(levels, pattern)
    if layouts is not None:
        shape = class_shape(levels, pattern, coarsest_block_dim, setup, layouts,
                            pad_finest=pad_finest)
        if levels and levels[0].ordering is not None:
            shape = with_colors(shape, [level.ordering for level in levels])
    coarsest = pad_pattern(pattern, *shape.coarsest)
    arrays = StructureArrays(
        levels=tuple(_level_arrays(level, level_shape, interpolation, level_setup, colors,
                                   config.smoother.solver in ("BLOCK_JACOBI", "JACOBI_L1"),
                                   pattern_key if i == 0 else "")
                     for i, (level, level_shape, interpolation, level_setup, colors) in enumerate(
                         zip(levels, shape.levels, interpolations,
                             shape.setup or [None] * len(levels),
                             shape.colors or [None] * len(levels), strict=True))),
        coarsest=_pattern_arrays(coarsest),
        coarsest_diagonal=jax.device_put(_padded_diagonal(coarsest_diagonal,
                                                          shape.coarsest[0])),
        coarsest_ordering=None if coarsest_ordering is None else coarsest_ordering.on_device(),
        rows=jax.device_put(np.array([level.a.n_rows for level in levels] + [pattern.n_rows],
                                     np.int32)),
        coarsest_row_ids=(jax.device_put(_padded_row_ids(coarsest))
                          if config.coarse_solver == "DENSE_LU_SOLVER" else None),
    )
    jax.block_until_ready(arrays)
    phase("to the device")
    return HierarchyStructure(
        levels=tuple(levels), coarsest=pattern, coarsest_diagonal=coarsest_diagonal,
        arrays=arrays, config=config, shape=shape, setup_seconds=dict(seconds),
        coarsest_block_dim=coarsest_block_dim,
        coarsest_ordering=coarsest_ordering, pattern_key=pattern_key, layouts=layouts,
    )


def check_stored_diagonal(missing: np.ndarray) -> None:
    """Raises unless ``missing``, the rows without a stored diagonal entry, is empty."""
    if missing.size:
        raise ValueError(
            f"A has no stored diagonal entry in {missing.size} rows (the first:"
            f" {missing[:5].tolist()}); the AMG smoothers divide by the diagonal."
            " Store the diagonal or use a Krylov solver without AMG."
        )


def check_coarsest_rows(rows: int, levels: int, config: AMGConfig) -> None:
    """Raises if a coarsest level of ``rows`` rows, below ``levels`` levels, is too large
    for its dense LU, saying why coarsening stopped there."""
    if config.coarse_solver != "DENSE_LU_SOLVER" or rows <= MAX_DENSE_COARSE_ROWS:
        return
    if levels + 1 >= config.max_levels:
        why = f"max_levels ({config.max_levels}) levels were made: raise it"
    elif rows <= config.min_coarse_rows:
        why = f"it is within min_coarse_rows ({config.min_coarse_rows}): lower it"
    else:  # the level's coarsening chose no smaller next level
        why = (
            "its coarsening chose no smaller next level. In classical AMG no row then"
            " depends strongly on another: no coupling has the sign opposite to its"
            " diagonal's, as on the coarse levels of an indefinite operator (Helmholtz's"
            " at many wavelengths) or where every coupling is positive. strength ALL makes"
            " every coupling strong; an indefinite operator may need a preconditioner"
            " other than AMG"
        )
    raise ValueError(
        f"the coarsest AMG level, level {levels}, has {rows} rows, too many for its dense"
        f" LU (at most {MAX_DENSE_COARSE_ROWS}): {why}."
    )


def _classical_levels(pattern: CsrStructure, values: np.ndarray | None, config: AMGConfig,
                      levels: list[LevelStructure], phase) -> CsrStructure:
    """Appends classical AMG's levels to ``levels``; returns the coarsest pattern.

    A block system's levels are split node by node (:func:`._blocks.classical_splitting`),
    so each is again a block system of ``config.block_dim`` unknowns per node.

    Coarsening also stops at the first coarse operator whose diagonal is not positive
    (in its real part) where the finest one's is, when it fits a dense inverse: an
    indefinite problem's coarse levels (Helmholtz: ``-Δ - k²``, once a level's mesh
    resolves the wave too coarsely) have rows no smoother can damp, so that level is
    solved exactly instead of cycled on.
    """
    values = (_classical.surrogate_values(pattern, config.block_dim) if values is None
              else values)
    positive = _positive_diagonal(pattern, values)
    while len(levels) + 1 < config.max_levels and pattern.n_rows > config.min_coarse_rows:
        interpolation = _classical.level_structure(
            pattern, values, config, aggressive=len(levels) < config.aggressive_levels,
            splitter=None if config.block_dim == 1 else _blocks.classical_splitting)
        phase("splitting")
        if not 0 < interpolation.n_coarse < pattern.n_rows:  # no coarsening: stop here
            break
        p = interpolation.p
        r, r_from_p = p.transposed()
        a_p, galerkin, values = galerkin_products(pattern, values, p, interpolation.values,
                                                  r, r_from_p)
        levels.append(LevelStructure(
            a=pattern, diagonal=pattern.diagonal_positions(), aggregates=None,
            n_aggregates=interpolation.n_coarse, columns=1, tentative=None, smoothing=None,
            tentative_in_p=None, p=p, r=r, r_from_p=r_from_p, a_p=a_p, galerkin=galerkin,
            interpolation=interpolation, block_dim=config.block_dim))
        phase("sparse products")
        pattern = galerkin.c
        if (positive and config.coarse_solver == "DENSE_LU_SOLVER"
                and pattern.n_rows <= MAX_DENSE_COARSE_ROWS
                and not _positive_diagonal(pattern, values)):
            break
    return pattern


def _positive_diagonal(pattern: CsrStructure, values: np.ndarray) -> bool:
    """Whether every diagonal entry among ``values`` has a positive real part."""
    positions = pattern.diagonal_positions()
    return bool(np.all(positions >= 0) and np.all(np.real(values[positions]) > 0))


def _aggregation_levels(pattern: CsrStructure, values: np.ndarray | None, columns: int,
                        config: AMGConfig, levels: list[LevelStructure],
                        phase) -> tuple[CsrStructure, int]:
    """Appends aggregation AMG's levels to ``levels``; returns the coarsest pattern and
    its unknowns per node.

    The levels aggregate nodes (:mod:`._blocks`; a scalar system's nodes are its
    unknowns): a block system's finest nodes hold ``config.block_dim`` unknowns, its
    coarse levels' nodes are the aggregates, of ``columns`` unknowns each.
    """
    block = config.block_dim
    nodes = _blocks.amalgamate(pattern, block)
    magnitudes = None if values is None else _blocks.node_magnitudes(nodes, values)
    while len(levels) + 1 < config.max_levels and pattern.n_rows > config.min_coarse_rows:
        graph = _aggregation.coupling_graph(nodes.pattern, magnitudes)
        # An aggregate of s nodes becomes `columns` coarse unknowns from s · block.
        rounds = _aggregation.ROUNDS[config.selector] + _aggregation.rounds_for_columns(
            -(-columns // block))
        if config.smoothed_aggregation and levels:
            rounds = _aggregation.smoothed_rounds(rounds,
                                                  nodes.pattern.nnz / nodes.pattern.n_rows)
        node_aggregates, count = _aggregation.aggregate(graph, rounds)
        phase("aggregation")
        if count * columns >= pattern.n_rows:  # no coarsening: stop here
            break
        level = _level_structure(pattern, _blocks.expand(node_aggregates, block), count,
                                 columns, config.smoothed_aggregation, block)
        levels.append(level)
        phase("sparse products")
        coarse_block = columns if config.block_dim > 1 else 1
        magnitudes = (None if magnitudes is None or columns > coarse_block
                      else _aggregation.aggregated(magnitudes, node_aggregates, count))
        pattern, block = level.galerkin.c, coarse_block
        nodes = _blocks.amalgamate(pattern, block)
        phase("aggregation")
    return pattern, block


def _level_structure(
    a: CsrStructure, aggregates: np.ndarray, count: int, k: int, smoothed: bool,
    block_dim: int,
) -> LevelStructure:
    n = a.n_rows
    tentative = CsrStructure(
        indptr=np.arange(0, n * k + 1, k, dtype=np.int32),
        indices=(aggregates[:, None] * k + np.arange(k, dtype=np.int32)).ravel().astype(np.int32),
        n_cols=count * k,
    )
    diagonal = a.diagonal_positions()
    if smoothed:
        smoothing = plan_product(a, tentative)
        p = smoothing.c
        # P's row i holds T's row i, the k columns from k · aggregates[i] on (A's diagonal
        # entry times it), one after the other (P's rows are sorted).
        first = _pattern_kernels.find_in_rows(p.indptr, p.indices, k * aggregates, n)
        tentative_in_p = (first[:, None] + np.arange(k, dtype=np.int32)).ravel()
    else:
        smoothing, tentative_in_p, p = None, None, tentative
    r, r_from_p = p.transposed()
    a_p = plan_product(a, p)
    galerkin = plan_product(r, a_p.c)
    return LevelStructure(
        a=a, diagonal=diagonal, aggregates=aggregates, n_aggregates=count, columns=k,
        tentative=tentative, smoothing=smoothing, tentative_in_p=tentative_in_p, p=p, r=r,
        r_from_p=r_from_p, a_p=a_p, galerkin=galerkin, block_dim=block_dim,
    )


# -----------------------------------------------------------------------------
# Numbers (jit-able)


class LevelNumbers(NamedTuple):
    """One level's numbers: its operator, transfer operators and smoother data."""

    a: CsrArrays
    p: CsrArrays
    r: CsrArrays
    smoother: RelaxationData


class CoarsestNumbers(NamedTuple):
    """The coarsest level: its operator, and its dense inverse or smoother data (neither
    for a Krylov coarse solver)."""

    a: CsrArrays
    inverse: jax.Array | None
    smoother: RelaxationData | None


@functools.partial(jax.tree_util.register_dataclass, data_fields=["levels", "coarsest"],
                   meta_fields=["config"])
@dataclasses.dataclass(frozen=True)
class Hierarchy:
    """The numbers of an AMG hierarchy: a pytree, built by :func:`numeric_setup`.

    Attributes:
      levels: the numbers of every level but the coarsest.
      coarsest: the coarsest level's.
      config: the AMG configuration (static).

    The finest operator of a hierarchy kept between solves may hold ``A``'s own values,
    shorter than its index arrays padded to a size class (:func:`sharing_arrays`); a
    solve takes it through :func:`with_padded_finest`.
    """

    levels: tuple[LevelNumbers, ...]
    coarsest: CoarsestNumbers
    config: AMGConfig

    @property
    def finest(self) -> CsrArrays:
        """The finest operator (the first level's, or the coarsest's when it is the only)."""
        return self.levels[0].a if self.levels else self.coarsest.a

    def with_finest_values(self, values: jax.Array) -> Hierarchy:
        """These numbers with ``values`` as the finest operator's."""
        if not self.levels:
            coarsest = self.coarsest
            return dataclasses.replace(
                self, coarsest=coarsest._replace(a=coarsest.a._replace(values=values)))
        first = self.levels[0]
        return dataclasses.replace(
            self, levels=(first._replace(a=first.a._replace(values=values)), *self.levels[1:]))


def numeric_setup(
    structure: HierarchyStructure,
    arrays: StructureArrays,
    values: jax.Array,
    near_nullspace: jax.Array | None,
    singular: bool | None = None,
) -> Hierarchy:
    """The hierarchy's numbers for ``values`` on ``structure``'s pattern (jit-able).

    Args:
      structure: from :func:`build_structure`.
      arrays: ``structure.arrays`` (passed in so that callers choose whether the index
        arrays are jit arguments or constants).
      values: ``(nnz,)`` values of the finest operator.
      near_nullspace: ``(n, k)`` near-null space, or None for the constant vector.
      singular: whether ``values`` annihilate the constants, found before
        (:func:`annihilates_constants_on_host`), or None to find it here.
    """
    # Closed over by a caller's jit, the index arrays are constants; the barrier keeps XLA
    # from constant-folding the products' index arithmetic (seconds of compile time).
    arrays = _true_sizes(structure, jax.lax.optimization_barrier(arrays))
    a_values = values.astype(hierarchy_dtype(values.dtype, structure.config))
    basis = None if structure.config.algorithm == "CLASSICAL" else _initial_basis(
        near_nullspace, structure.coarsest.n_rows if not structure.levels
        else structure.levels[0].a.n_rows, a_values.dtype, structure.config.block_dim)
    numbers = []
    patterns = [level_arrays.a for level_arrays in arrays.levels] + [arrays.coarsest]
    start = power_iteration_start(patterns[0].n_rows, a_values.dtype)  # every level's
    for level, level_arrays, coarse in zip(structure.levels, arrays.levels, patterns[1:],
                                           strict=True):
        a = level_arrays.a._replace(values=a_values)
        number, a_values, basis = _numeric_level(level, level_arrays, a, basis, coarse,
                                                 structure.config, start)
        numbers.append(number)
    coarsest = arrays.coarsest._replace(values=a_values)
    finest = patterns[0]._replace(values=values)
    return Hierarchy(
        levels=tuple(numbers),
        coarsest=_coarsest_numbers(coarsest, arrays.coarsest_diagonal,
                                   arrays.coarsest_row_ids, arrays.coarsest_ordering,
                                   structure.config,
                                   structure.coarsest_block_dim,
                                   _singular(singular, finest), start=start),
        config=structure.config,
    )


def _true_sizes(structure: HierarchyStructure, arrays: StructureArrays) -> StructureArrays:
    """``arrays`` cut to their true sizes: the operators, the transfer operators and what
    else is padded (:mod:`._padded_setup`)."""
    levels = tuple(
        level_arrays._replace(
            a=true_csr(level_arrays.a, level.a), p=true_csr(level_arrays.p, level.p),
            r=true_csr(level_arrays.r, level.r), a_p=true_csr(level_arrays.a_p, level.a_p.c),
            diagonal=level_arrays.diagonal[:level.a.n_rows],
            r_offsets=level_arrays.r_offsets[:level.r.nnz],
            aggregates=(None if level.aggregates is None
                        else level_arrays.aggregates[:level.a.n_rows]),
            tentative_in_p=(None if level.tentative_in_p is None
                            else level_arrays.tentative_in_p[:level.tentative_in_p.shape[0]]),
            interpolation=(None if level.interpolation is None
                           else true_interpolation(level, level_arrays.interpolation)),
            ordering=(None if level.ordering is None
                      else true_ordering(level.ordering, level_arrays.ordering)),
            block_positions=(None if level_arrays.block_positions is None
                             else level_arrays.block_positions[:level.a.n_rows]))
        for level, level_arrays in zip(structure.levels, arrays.levels, strict=True))
    return arrays._replace(
        levels=levels, coarsest=true_csr(arrays.coarsest, structure.coarsest),
        coarsest_diagonal=arrays.coarsest_diagonal[:structure.coarsest.n_rows],
        coarsest_row_ids=(None if arrays.coarsest_row_ids is None
                          else arrays.coarsest_row_ids[:structure.coarsest.nnz]))


@dataclasses.dataclass(frozen=True)
class PaddedSetup:
    """What :func:`padded_numeric_setup` is specialized to (its static argument): the
    same for every structure of one size class.

    Attributes:
      config: the AMG configuration (classical, or aggregation).
      shape: the size classes (:class:`~._size_classes.HierarchyShape`, with ``setup``).
      layouts: per level, the :class:`~._padded_setup.LevelLayout` (or
        :class:`~._padded_setup.TwoStageLayout`) of its setup arrays
        (classical) or its :class:`~._padded_setup.AggregationLayout`.
      block_dims: unknowns per node of each level, then of the coarsest.
      r_offsets: the dtype of each level's offsets of ``R``'s entries in ``P``'s rows
        (:func:`._products.transpose_offsets`: a byte, unless a row of ``P`` is long).
    """

    config: AMGConfig
    shape: HierarchyShape
    layouts: tuple[LevelLayout | TwoStageLayout | AggregationLayout, ...]
    block_dims: tuple[int, ...]
    r_offsets: tuple[np.dtype, ...]


def padded_numeric_setup(setup: PaddedSetup, arrays: StructureArrays, values: jax.Array,
                         near_nullspace: jax.Array | None = None,
                         singular: bool | None = None) -> Hierarchy:
    """:func:`numeric_setup` on a classical or aggregation structure's padded
    ``arrays``, its numbers padded as :func:`padded_hierarchy` pads them (jit-able, with
    ``setup`` and ``singular`` static; on the CPU or a CUDA GPU, whose native kernels it
    calls).

    Compiled once for every structure whose ``padded_setup`` is ``setup``: a new pattern
    of a size class already seen sets up without compiling. See :mod:`._padded_setup` for
    why the padding changes no number.
    """
    config = setup.config
    a_values = values.astype(hierarchy_dtype(values.dtype, config))
    basis = None
    if config.algorithm != "CLASSICAL":  # zero on a padded finest level's padding rows
        basis = _initial_basis(near_nullspace, (arrays.levels[0].a if arrays.levels
                                                else arrays.coarsest).n_rows, a_values.dtype,
                               setup.block_dims[0])
        basis = jnp.where(jnp.arange(basis.shape[0], dtype=arrays.rows.dtype)[:, None]
                          < arrays.rows[0], basis, 0)
    patterns = [level_arrays.a for level_arrays in arrays.levels] + [arrays.coarsest]
    start = power_iteration_start(patterns[0].n_rows, a_values.dtype)  # every level's
    numbers = []
    for i, level_arrays in enumerate(arrays.levels):
        sizes, layout = setup.shape.levels[i], setup.layouts[i]
        a = level_arrays.a._replace(values=a_values)
        diagonal = stored_diagonal(a.values, level_arrays.diagonal)
        rho = None
        if isinstance(layout, AggregationLayout):
            inverse_diagonal = safe_inverse(diagonal)
            if layout.smoothed:
                rho = spectral_radius(sizes.rows, a.values.dtype,
                                      lambda v: a.scaled_matvec(v, inverse_diagonal),
                                      arrays.rows[i], start)
            p_values, basis = _aggregation_prolongation(
                level_arrays, a, basis, inverse_diagonal, rho,
                sizes.coarse_rows // layout.columns, layout.columns,
                functools.partial(_padded_setup.product, a, c=level_arrays.p,
                                  n_cols=sizes.coarse_rows) if layout.smoothed else None)
            p_values = within(resized(p_values, sizes.p_nnz), level_arrays.p.indptr)
        else:
            p_values = _padded_setup.weights(layout, level_arrays.interpolation, sizes,
                                             setup.shape.setup[i], a, diagonal, level_arrays.p)
        p = level_arrays.p._replace(values=p_values)
        r = level_arrays.r._replace(values=within(
            transposed_values(p, level_arrays.r.indices, level_arrays.r_offsets),
            level_arrays.r.indptr))
        a_p = level_arrays.a_p._replace(values=_padded_setup.product(
            a, p, level_arrays.a_p, sizes.coarse_rows))
        a_values = _padded_setup.product(r, a_p, patterns[i + 1], sizes.coarse_rows)
        numbers.append(LevelNumbers(a=a, p=p, r=r, smoother=relaxation_data(
            a, diagonal, config.smoother, level_arrays.ordering, block_dim=setup.block_dims[i],
            block_positions=level_arrays.block_positions,
            jacobi_spectral_radius=rho, rows=arrays.rows[i], start=start)))
    finest = patterns[0]._replace(values=values)
    return Hierarchy(
        levels=tuple(numbers),
        coarsest=_coarsest_numbers(arrays.coarsest._replace(values=a_values),
                                   arrays.coarsest_diagonal, arrays.coarsest_row_ids, None,
                                   config, setup.block_dims[-1],
                                   _singular(singular, finest), rows=arrays.rows[-1],
                                   start=start),
        config=config,
    )


def padded_hierarchy(hierarchy: Hierarchy, shape: HierarchyShape,
                     multicolor: tuple | None = None) -> Hierarchy:
    """``hierarchy`` padded to ``shape`` (jit-able; see :mod:`._size_classes`): the same
    cycles, in programs that every hierarchy of ``shape`` shares.

    ``multicolor``: per level, then for the coarsest, the padding of the multicolor
    smoothers' data (:class:`._multicolor.MulticolorPadding`, the sharded solve's), or None.
    """
    if multicolor is None:
        multicolor = (None,) * (len(shape.levels) + 1)
    levels = tuple(
        LevelNumbers(a=pad_csr(level.a, sizes.rows, sizes.a_nnz),
                     p=pad_csr(level.p, sizes.rows, sizes.p_nnz),
                     r=pad_csr(level.r, sizes.coarse_rows, sizes.r_nnz),
                     smoother=pad_relaxation(level.smoother, sizes.rows, padding))
        for level, sizes, padding in zip(hierarchy.levels, shape.levels, multicolor[:-1],
                                         strict=True))
    rows, nnz = shape.coarsest
    coarsest = hierarchy.coarsest
    inverse = coarsest.inverse
    if inverse is not None:  # zero outside the true block: padding entries stay zero
        extra = rows - inverse.shape[0]
        inverse = jnp.pad(inverse, ((0, extra), (0, extra)))
    coarsest = CoarsestNumbers(a=pad_csr(coarsest.a, rows, nnz), inverse=inverse,
                               smoother=pad_relaxation(coarsest.smoother, rows, multicolor[-1]))
    return dataclasses.replace(hierarchy, levels=levels, coarsest=coarsest)


def sharing_arrays(numbers: Hierarchy, arrays: Any, values: jax.Array) -> Hierarchy:
    """``numbers`` holding ``arrays``' index arrays and ``values`` instead of equal copies.

    ``arrays``: the :class:`StructureArrays` the numbers were set up on, or a device
    structure's (:class:`._device_setup.DeviceArrays`, whose levels have the same ``a``,
    ``p`` and ``r``).

    A compiled :func:`numeric_setup` returns every array of the hierarchy as a new buffer,
    the operators' index arrays (equal to the structure's) and the finest operator's
    values (``values`` padded to the finest size class, unless the hierarchy's precision
    rounds them) among them. A hierarchy kept between solves shares them instead: the
    copies were 233 MiB at 128³ (smoothed aggregation, f64), more than the matrix itself.

    ``values``: ``A``'s own, as the caller holds them. Where their dtype is the
    hierarchy's, the kept hierarchy's finest operator holds them, also where the class
    has more nonzeros than ``A``: its values are then shorter than its index arrays, and
    a solve pads them (:func:`with_padded_finest`), as it pads ``A``'s, once for both
    when they are the same. Kept padded, they were a second copy of ``A``'s values
    (0.67 × ``A`` of memory kept on f64 3D Poisson; a pass over them per solve spared).
    """
    patterns = [level.a for level in arrays.levels] + [arrays.coarsest]

    def shared(a: CsrArrays, pattern: CsrArrays) -> CsrArrays:
        return a._replace(indices=pattern.indices, indptr=pattern.indptr)

    levels = tuple(
        level._replace(a=shared(level.a, pattern), p=shared(level.p, level_arrays.p),
                       r=shared(level.r, level_arrays.r))
        for level, level_arrays, pattern in zip(numbers.levels, arrays.levels, patterns[:-1],
                                                strict=True))
    numbers = dataclasses.replace(
        numbers, levels=levels,
        coarsest=numbers.coarsest._replace(a=shared(numbers.coarsest.a, patterns[-1])))
    finest = numbers.finest.values
    if (isinstance(values, jax.Array) and values.dtype == finest.dtype
            and values.shape[0] <= finest.shape[0]):
        numbers = numbers.with_finest_values(values)
    return numbers


def with_padded_finest(numbers: Hierarchy, pad: Callable[[jax.Array, int], jax.Array]
                       ) -> Hierarchy:
    """``numbers`` whose finest values, where a kept hierarchy holds ``A``'s own
    (:func:`sharing_arrays`), are padded to its index arrays' length by ``pad(values,
    nnz)``, as every solve of the size class takes them; else ``numbers`` themselves."""
    finest = numbers.finest
    nnz = finest.indices.shape[0]
    if finest.values.shape[0] == nnz:
        return numbers
    return numbers.with_finest_values(pad(finest.values, nnz))


def hierarchy_dtype(dtype: Any, config: AMGConfig) -> np.dtype:
    """The dtype in which a hierarchy for a matrix of ``dtype`` is set up and cycles.

    >>> from jaxsolve.sparse import parse_amgx_config
    >>> def amg(precision):
    ...     return parse_amgx_config({"preconditioner": {
    ...         "jaxsolve_hierarchy_precision": precision}}).preconditioner.amg
    >>> hierarchy_dtype(np.complex128, amg("SINGLE")), hierarchy_dtype(np.float64, amg("DEFAULT"))
    (dtype('complex64'), dtype('float64'))
    """
    dtype = np.dtype(dtype)
    if config.hierarchy_precision == "SINGLE":
        return np.dtype(np.complex64 if np.issubdtype(dtype, np.complexfloating)
                        else np.float32)
    return dtype


def _initial_basis(near_nullspace: Any, n: int, dtype: Any, block_dim: int) -> jax.Array:
    if near_nullspace is None:  # the constant; a block system's in each component
        return _blocks.translations(n, block_dim, dtype)
    return jnp.asarray(near_nullspace).astype(dtype)


def _numeric_level(
    level: LevelStructure, arrays: LevelArrays, a: CsrArrays, basis: jax.Array | None,
    coarse: CsrArrays, config: AMGConfig, start: jax.Array,
) -> tuple[LevelNumbers, jax.Array, jax.Array | None]:
    """One level's numbers; returns them, the next operator's values and basis (None for
    classical AMG, which has none).

    ``coarse`` holds the next level's pattern (its values are a placeholder); ``start``
    the power iterations' start (:func:`._relaxation.power_iteration_start`).
    """
    diagonal = stored_diagonal(a.values, arrays.diagonal)
    inverse_diagonal = safe_inverse(diagonal)
    # ρ(D⁻¹A), estimated once where the prolongation's smoothing and the smoother need it.
    rho = None if level.smoothing is None else spectral_radius(
        a.n_rows, a.values.dtype, lambda v: a.scaled_matvec(v, inverse_diagonal),
        start=start)
    if level.interpolation is not None:
        p_values = _classical.device_values(arrays.interpolation, level.interpolation, a,
                                            diagonal, arrays.p.indptr)
        coarse_basis = None
    else:
        p_values, coarse_basis = _aggregation_prolongation(
            arrays, a, basis, inverse_diagonal, rho, level.n_aggregates, level.columns,
            None if level.smoothing is None else
            lambda t: level.smoothing.multiply(a, t, arrays.p.indices, arrays.p.indptr))
    p = arrays.p._replace(values=p_values)
    r = arrays.r._replace(values=transposed_values(p, arrays.r.indices, arrays.r_offsets))
    a_p = arrays.a_p._replace(values=level.a_p.multiply(a, p, arrays.a_p.indices,
                                                         arrays.a_p.indptr))
    coarse_values = level.galerkin.multiply(r, a_p, coarse.indices, coarse.indptr)
    smoother = relaxation_data(a, diagonal, config.smoother, arrays.ordering,
                               block_dim=level.block_dim, jacobi_spectral_radius=rho,
                               block_positions=arrays.block_positions,
                               start=start)
    return LevelNumbers(a=a, p=p, r=r, smoother=smoother), coarse_values, coarse_basis


def _aggregation_prolongation(
    arrays: LevelArrays, a: CsrArrays, basis: jax.Array, inverse_diagonal: jax.Array,
    rho: jax.Array | None, count: int, k: int,
    a_times: Callable[[CsrArrays], jax.Array] | None,
) -> tuple[jax.Array, jax.Array]:
    """``P``'s values and the next level's basis: ``T`` on ``count`` aggregates of ``k``
    columns each, or with ``a_times`` (``T ↦`` the values of ``A T`` on ``P``'s pattern)
    ``T`` smoothed by ``ω = 4 / (3 ρ)``, ``rho`` the estimate of ``ρ(D⁻¹A)``.

    ``T``'s entries placed past ``P``'s end (a padded level's padding rows) are dropped.
    """
    t_values, coarse_basis = _tentative(basis, arrays.aggregates, count)
    if a_times is None:
        return t_values, coarse_basis
    # T's row i holds the k columns from k · aggregates[i] on.
    t = CsrArrays(t_values,
                  (arrays.aggregates[:, None] * k
                   + jnp.arange(k, dtype=jnp.int32)[None, :]).ravel(),
                  jnp.arange(0, arrays.aggregates.shape[0] * k + 1, k, dtype=jnp.int32))
    omega = (4 / (3 * rho)).astype(a.values.dtype)
    p_values = (-omega * inverse_diagonal[arrays.p.row_ids] * a_times(t)).at[
        arrays.tentative_in_p].add(t_values, mode="drop")
    return p_values, coarse_basis


def _tentative(
    basis: jax.Array, aggregates: jax.Array, count: int
) -> tuple[jax.Array, jax.Array]:
    """``T``'s values (row by row, ``k`` each) and the coarse basis ``(k·count, k)``.

    On each aggregate ``a`` with basis rows ``B_a``, ``T_a = B_a V Λ^{-1/2}`` from the
    eigendecomposition ``B_aᴴ B_a = V Λ Vᴴ``, so ``T_aᴴ T_a = I`` and ``T_a (Λ^{1/2} Vᴴ) =
    B_a``: the coarse basis is ``Λ^{1/2} Vᴴ``.  Directions with ``λ ≤ 10⁻¹⁰ λ_max`` (an
    aggregate smaller than ``k``) get a zero column, hence a decoupled coarse unknown.
    """
    n, k = basis.shape
    if k == 1:
        norms = jnp.sqrt(jax.ops.segment_sum(jnp.abs(basis[:, 0]) ** 2, aggregates,
                                             num_segments=count))
        inverse = jnp.where(norms > 0, 1 / jnp.where(norms > 0, norms, 1), 0)
        return basis[:, 0] * inverse[aggregates].astype(basis.dtype), norms.astype(
            basis.dtype)[:, None]
    gram = jax.ops.segment_sum(
        jnp.conj(basis)[:, :, None] * basis[:, None, :], aggregates, num_segments=count)
    eigenvalues, vectors = jnp.linalg.eigh(gram)
    keep = eigenvalues > 1e-10 * eigenvalues[:, -1:]
    safe = jnp.where(keep, eigenvalues, 1)
    scale = jnp.where(keep, 1 / jnp.sqrt(safe), 0).astype(basis.dtype)
    t_rows = jnp.einsum("ik,ikc->ic", basis, vectors[aggregates] * scale[aggregates][:, None, :])
    coarse = (jnp.where(keep, jnp.sqrt(safe), 0).astype(basis.dtype)[:, :, None]
              * jnp.conj(jnp.swapaxes(vectors, 1, 2)))
    return t_rows.ravel(), coarse.reshape(count * k, k)


def annihilates_constants(a: CsrArrays) -> jax.Array:
    """Whether ``A 1 = 0`` up to rounding: every row sums to at most ``√ε`` of its entries'
    magnitudes (a pure-Neumann or periodic problem, a graph Laplacian: ``A`` is singular,
    and so is every coarse matrix of a hierarchy that reproduces constants)."""
    # A 1 and |A| 1 by the product's kernel: each row's entries summed in order, as a
    # segment sum would, without expanding the rows of the entries (compiled per level).
    sums = a.matvec(jnp.ones(a.n_rows, a.values.dtype))
    magnitudes = a._replace(values=jnp.abs(a.values)).matvec(
        jnp.ones(a.n_rows, jnp.abs(a.values).dtype))
    return _vanish(jnp, sums, magnitudes)


def annihilates_constants_on_host(structure: HierarchyStructure, values: Any) -> bool | None:
    """:func:`annihilates_constants` of the finest matrix, for ``values`` (possibly padded)
    in host memory (NumPy or on the CPU), when the coarsest level's dense inverse depends
    on it; else None.

    Known before the numeric setup, the coarsest level compiles the one inverse it needs:
    the LU factorization's, or a singular system's SVD, not both behind a ``cond`` (a
    third of the coarsest level's compile time).
    """
    config = structure.config
    if (config.coarse_iterations is not None or config.coarse_solver == "NOSOLVER"
            or config.coarse_null_dimension or not in_host_memory(values)):
        return None
    finest = structure.levels[0].a if structure.levels else structure.coarsest
    values = np.asarray(values)[:finest.nnz]
    rows = finest.indptr[:-1]  # every row stores its diagonal: none is empty
    sums = np.add.reduceat(values, rows)
    magnitudes = np.add.reduceat(np.abs(values), rows)
    return bool(_vanish(np, sums, magnitudes))


def _vanish(xp, sums: Any, magnitudes: Any) -> Any:
    """Whether every row sum is at most ``√ε`` of the row's magnitudes."""
    tolerance = xp.sqrt(xp.finfo(magnitudes.dtype).eps)
    return xp.all(xp.abs(sums) <= tolerance * magnitudes)


def in_host_memory(values: Any) -> bool:
    """Whether concrete ``values`` are in host memory: a NumPy array, or a JAX array on
    the CPU (which NumPy reads where it is)."""
    return not isinstance(values, jax.Array) or all(device.platform == "cpu"
                                                    for device in values.devices())


def _singular(singular: bool | None, finest: CsrArrays) -> bool | Callable[[], jax.Array]:
    """``singular`` if known, else how to find it on the device."""
    return (lambda: annihilates_constants(finest)) if singular is None else singular


def _coarsest_numbers(
    a: CsrArrays, diagonal_positions: jax.Array, row_ids: jax.Array | None,
    ordering: MulticolorArrays | None,
    config: AMGConfig, block_dim: int, singular: bool | Callable[[], jax.Array],
    rows: jax.Array | None = None, start: jax.Array | None = None,
) -> CoarsestNumbers:
    """The coarsest level's numbers: its smoother's data, or its dense inverse.

    ``row_ids``: the row of each of ``a``'s entries, for its dense inverse.

    The inverse is a pseudo-inverse when the system is known to be singular
    (``coarse_null_dimension``) or found to be (``singular``, or ``singular()`` on the
    device: the finest matrix annihilates the constants); else the inverse from an LU
    factorization.

    ``rows``: the true rows of a padded ``a`` (:mod:`._padded_setup`): the padding rows
    are decoupled from them, with a diagonal of ``a``'s largest magnitude (which changes
    neither its largest singular value nor which are dropped as its null space), and the
    inverse is zero on them.  ``start``: the power iterations' start, for a smoother's
    damping.
    """
    if config.coarse_iterations is not None:  # a Krylov method on the operator alone
        return CoarsestNumbers(a=a, inverse=None, smoother=None)
    diagonal = stored_diagonal(a.values, diagonal_positions)
    if config.coarse_solver == "NOSOLVER":
        return CoarsestNumbers(a=a, inverse=None, smoother=relaxation_data(
            a, diagonal, config.smoother, ordering, block_dim=block_dim, rows=rows,
            start=start))
    n = a.n_rows
    dense = jnp.zeros((n, n), a.values.dtype).at[row_ids, a.indices].add(a.values)
    # A decoupled row (a vanished coarse basis function) is all zero: make it identity.
    decoupled = jnp.sum(jnp.abs(dense), axis=1) == 0
    padding = None if rows is None else jnp.arange(n, dtype=rows.dtype) >= rows
    if padding is not None:
        largest = jnp.max(jnp.abs(dense))
        dense = dense + jnp.diag(jnp.where(padding, jnp.where(largest > 0, largest, 1), 0)
                                 .astype(dense.dtype))
        decoupled = decoupled & ~padding
    dense = dense + jnp.diag(decoupled.astype(dense.dtype))
    true_block = (lambda inverse: inverse if padding is None
                  else jnp.where(padding[:, None] | padding[None, :], 0, inverse))
    if config.coarse_null_dimension:
        cutoff = None if rows is None else rows.astype(dense.real.dtype) * jnp.finfo(dense.dtype).eps
        return CoarsestNumbers(a=a, inverse=true_block(_pseudo_inverse(
            dense, config.coarse_null_dimension, cutoff)), smoother=None)

    def lu_inverse(dense):
        factors = jax.scipy.linalg.lu_factor(dense)
        return jax.scipy.linalg.lu_solve(factors, jnp.eye(n, dtype=dense.dtype))

    def found_singular(dense):
        return _pseudo_inverse(dense, 1, relative_cutoff=jnp.sqrt(jnp.finfo(dense.dtype).eps))

    if isinstance(singular, bool):
        inverse = found_singular(dense) if singular else lu_inverse(dense)
    else:
        inverse = jax.lax.cond(singular(), found_singular, lu_inverse, dense)
    return CoarsestNumbers(a=a, inverse=true_block(inverse), smoother=None)


def _pseudo_inverse(dense: jax.Array, null_dimension: int,
                    relative_cutoff: float | jax.Array | None = None) -> jax.Array:
    """A pseudo-inverse of the coarsest matrix of a singular system, by its SVD.

    ``A_c = Pᴴ A P`` is singular exactly on ``{c : P c ∈ null(A)}``, at most
    ``null_dimension`` vectors (the columns of ``solve``'s ``nullspace=``), where an LU
    factorization would divide by a rounding error.  The ``null_dimension`` smallest
    singular values are dropped, and any below ``relative_cutoff σ_max`` (default
    ``n ε``: a null space found, not given, may have more vectors than one): if ``A_c``
    happens to be regular, the coarse correction only loses its smoothest directions, which
    the Krylov method restores in a few iterations.
    """
    n = dense.shape[0]
    u, s, vh = jnp.linalg.svd(dense)
    if relative_cutoff is None:
        relative_cutoff = n * jnp.finfo(s.dtype).eps
    cutoff = relative_cutoff * s[0]
    keep = (jnp.arange(n) < n - null_dimension) & (s > cutoff)
    inverse_s = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(dense.dtype)
    return (jnp.conj(vh).T * inverse_s[None, :]) @ jnp.conj(u).T
