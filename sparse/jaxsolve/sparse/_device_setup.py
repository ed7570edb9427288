"""Aggregation AMG set up on the matrix's device: structure and numbers as JAX programs.

The host setup (:func:`._hierarchy.build_structure`) finds a hierarchy's aggregates and
patterns in native code on the CPU, and only its numbers on the device. Here every step
runs as a compiled array program on the device that will hold the hierarchy — a GPU's
setup never leaves it — with one wait per level for a few counts:

1. **Couplings.** ``w_ij = (m_ij + m_ji) / (2 √(m_ii m_jj))`` on the symmetrized graph of
   the level's magnitudes ``m`` (``|A|`` on the finest level, then the aggregated
   magnitudes ``Σ |a_ij|`` over pairs of aggregates), as :mod:`._aggregation` defines
   them; without concrete values each stored direction of a pair counts ½.
2. **Matching** (:func:`_match`), in ``ROUNDS[selector]`` rounds, each on the graph of
   the previous round's pairs: a *handshake* in a ``lax.while_loop``: every unmatched
   node proposes to its unmatched neighbour of largest weight, and mutual proposals
   pair, until no pair forms. Ties go to the neighbour of nearest index, then to the
   edge with an even number of edges of its length before it on its chain
   (:func:`_first_of_pair`), then to a hash of the pair (:func:`._index_hash.pair_hash`):
   on a grid numbered line by line that pairs ``(0, 1), (2, 3), …`` from the start of
   every line in one handshake, and then those pairs' lines 0 and 1, 2 and 3, … as the
   host's sequential matching does, where a tie-break by index alone would pair along
   one line one pair a handshake. A
   node left without an unmatched neighbour joins its strongest paired neighbour's pair,
   as the host's second phase does, or stays alone; the nodes without any neighbour (a
   Dirichlet row eliminated from its neighbours' equations) form one aggregate together,
   numbered last, as on the host.
3. **Numbering** by a cumulative sum over each aggregate's smallest node (the aggregate of
   the nodes without a neighbour last).
4. **Galerkin pattern**: the triplets ``(agg(i), agg(j), ·)`` of the level's entries,
   sorted by ``(row, column)`` as one integer key (:func:`_summed_triplets`,
   :func:`_pair_order`: XLA's radix sort on a GPU); where each entry lands among
   the coarse entries is kept, so that the numeric setup is one segment sum.

The host matches sequentially (nodes in order, each with its strongest unmatched
neighbour, ties to the smallest index; :func:`._graph_kernels.aggregate_pairs`), which
no parallel matching reproduces in general: on grids numbered line by line of even sides
(the Poisson and anisotropic problems of ``sparse/tests/device_setup_test.py``) the two
find the same aggregates; elsewhere (odd sides, a rotated anisotropy, a scrambled
numbering) aggregates of the same kind and PCG iterations within 17 % of the host's
(3D Poisson 31³: 27 against 23, 15³: 20 against 18; rotated anisotropic 33²: 34 against
32; 16³ numbered at random: 21 against 22).

The numbers (:func:`numeric_setup`, jit-able, differentiable in the values) are those
of the host's unsmoothed aggregation: ``P`` piecewise constant, ``1 / √|aggregate|`` on
each aggregate (the normalized constant), ``R = Pᵀ``, ``A_c = Pᵀ A P`` by one segment
sum of ``p_i a_ij p_j`` over the entries, the smoothers' data by
:func:`._relaxation.relaxation_data` and the coarsest inverse by the host path's
function. Every array is padded to a size class (:mod:`._size_classes`; padding rows
empty and decoupled, as there), so a new pattern whose levels fall into the same classes
runs the programs compiled for an earlier one: the structure's and the solve's.

The setup cache (:mod:`._cache`) keeps a structure per pattern, configuration and key
of the values it was built from (:func:`values_key`: a digest of the order of every
node's couplings on the finest level, all of the values that the finest matching's first
round follows), as the host path keeps one per key of :mod:`._structure_key`: new values
that couple alike (the next Newton or time step, the matrix scaled) cost that digest and
one numeric setup, another operator on the pattern a structure of its own
(:func:`cached_setup`). The digest sorts nothing: each coupling's place among its row's
comes from comparisons within the row (:func:`_coupling_order_in_rows`), on a *mirrored*
pattern (``(j, i)`` stored with each ``(i, j)``, rows sorted: the finite-difference and
finite-element patterns) in the pattern itself, the structure keeping its widest row
alone; on any other (Dirichlet rows eliminated, upwind convection, rows unsorted) in its
*mirrored view* (:class:`KeyView`: the pattern of ``|A| + |A|ᵀ``), built once per
pattern, into which new values' magnitudes are scattered (:func:`_coupling_order_in_view`).
The entries of rows of more than :data:`MAX_KEY_WIDTH` entries (a dense constraint row)
are ordered by one sort of theirs alone (:func:`_ranks_in_wide_rows`). The digest is the
one three sorts of the couplings would give, bit for bit. As
the host's, the checks for NaN and zero pivots run before a structure is built; new values
whose key finds one are checked by the solve's program.

Supported (``"jaxsolve_setup_location": "DEVICE"``, or ``"AUTO"`` on a GPU, see
:class:`~._config.AMGConfig`):
aggregation AMG, unsmoothed, scalar (``block_dim`` 1, no ``near_nullspace``), with the
smoothers that need no coloring, every cycle and coarse solver.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _cache
from ._aggregation import ROUNDS
from ._compiled_programs import CompiledPrograms
from ._compiler_options import COMPILER_OPTIONS
from ._config import AMGConfig
from ._csr_arrays import CsrArrays, CsrStructure
from ._hierarchy import (Hierarchy, LevelNumbers, _coarsest_numbers, annihilates_constants,
                         check_coarsest_rows, check_stored_diagonal, hierarchy_dtype,
                         sharing_arrays)
from ._index_hash import pair_hash
from ._placement import placed_like
from ._relaxation import power_iteration_start, relaxation_data, stored_diagonal
from ._structure_key import digest_key, summed_digest
from ._size_classes import (coarsest_rows, finest_nonzeros, finest_rows, fit_finest_nonzeros,
                            fit_finest_rows, grown_size, handed_out, pad_pattern, size_class)

__all__ = ["DeviceStructure", "build_device_structure", "cached_setup", "finest_sizes",
           "numbers_now", "numeric_setup"]

# Levels of at most 1 / TINY of the finest rows get three times their sizes (_padded_sizes).
TINY = 64
# The most handshakes of one matching round; nodes still unmatched then join a pair.
MAX_HANDSHAKES = 64
# The widest finest rows (of the pattern, or of its mirrored view) whose couplings values_key
# orders by comparisons, a pass over the entries each; wider rows' entries it sorts alone.
MAX_KEY_WIDTH = 128
# The compiled programs of the structure's levels, by kind of level.
PROGRAMS = CompiledPrograms("device setup", kept=256)
# The numeric setups of concrete values, by shape and kind of values: run now, also while a
# caller's jit traces.
NUMERIC_SETUPS = CompiledPrograms("device numeric setup")


class LevelSizes(NamedTuple):
    """A level's padded sizes: its rows and nonzeros, the next level's rows and nonzeros."""

    rows: int
    nnz: int
    coarse_rows: int
    coarse_nnz: int


class DeviceLevelArrays(NamedTuple):
    """One level's index arrays on the device (a pytree), padded to its :class:`LevelSizes`.

    ``a``: the operator's pattern (placeholder values); ``entry_rows``: the row of each
    entry (0 on padding entries); ``diagonal``: each row's diagonal position (-1: none);
    ``p`` and ``r``: the patterns of ``P`` (one entry per true row, in column
    ``aggregates[i]``) and ``R = Pᵀ``; ``r_from_p``: ``P``'s entry of each of ``R``'s;
    ``coarse_position``: where each entry of ``a`` lands among the next operator's
    entries (past their end on padding entries: dropped).
    """

    a: CsrArrays
    entry_rows: jax.Array
    diagonal: jax.Array
    aggregates: jax.Array
    p: CsrArrays
    r: CsrArrays
    r_from_p: jax.Array
    coarse_position: jax.Array


class KeyView(NamedTuple):
    """The *mirrored view* of a finest pattern that is not mirrored (a pytree, built once
    per structure by :func:`_key_view`): the pattern of ``|A| + |A|ᵀ`` (every row's
    columns increasing, each ``(i, j)`` and ``(j, i)`` once, padded to a size class), its
    entries' rows, and ``position``: where each of the finest entries lands among its
    entries (past the end on padding entries). New values' key scatters their magnitudes
    there and orders the couplings within the view's rows (:func:`_coupling_order_in_view`)."""

    indptr: jax.Array
    indices: jax.Array
    entry_rows: jax.Array
    position: jax.Array


class DeviceArrays(NamedTuple):
    """Every level's arrays, the coarsest operator's pattern, its diagonal positions and
    entries' rows, and ``rows``: the true rows of each level and of the coarsest."""

    levels: tuple[DeviceLevelArrays, ...]
    coarsest: CsrArrays
    coarsest_diagonal: jax.Array
    coarsest_row_ids: jax.Array
    rows: jax.Array


@dataclasses.dataclass(frozen=True)
class DeviceShape:
    """What :func:`numeric_setup` is specialized to (static): equal for every structure
    whose levels fall into the same size classes."""

    config: AMGConfig
    levels: tuple[LevelSizes, ...]
    coarsest: tuple[int, int]


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceStructure:
    """A hierarchy's structure built on the device by :func:`build_device_structure`.

    Attributes:
      shape: its padded sizes and configuration.
      arrays: its index arrays on the device.
      sizes: the true ``(rows, nonzeros)`` of every level, the coarsest last.
      solve_diagonal: the finest operator's diagonal positions for the solve's check of
        them, a padding row pointing at the first row's.
      key_width: the most entries in a row of at most :data:`MAX_KEY_WIDTH` of the
        pattern, or of its mirrored view, rounded up by :func:`_width_class`: the passes
        of :func:`values_key`'s comparisons within rows (a program per such width).
      key_view: the pattern's :class:`KeyView` where it is not mirrored, else None.
      wide_entries: the positions of the entries of its (or its view's) rows of more than
        :data:`MAX_KEY_WIDTH` entries, padded with the entries' number to a size class,
        which :func:`values_key` orders by a sort of theirs alone; None where none.
      setup_seconds: the time the build took (``"device"``: its programs, waits
        included; ``"to the device"``: the finest pattern's copy).
    """

    shape: DeviceShape
    arrays: DeviceArrays
    sizes: tuple[tuple[int, int], ...]
    solve_diagonal: jax.Array
    setup_seconds: dict[str, float]
    key_width: int = 8
    key_view: KeyView | None = None
    wide_entries: jax.Array | None = None

    @property
    def config(self) -> AMGConfig:
        return self.shape.config

    @property
    def finest(self) -> CsrArrays:
        """The finest operator's padded pattern (placeholder values)."""
        return self.arrays.levels[0].a if self.arrays.levels else self.arrays.coarsest

    @property
    def finest_entry_rows(self) -> jax.Array:
        """The row of each of the finest operator's true entries (any on padding ones)."""
        arrays = self.arrays
        return arrays.levels[0].entry_rows if arrays.levels else arrays.coarsest_row_ids


def build_device_structure(pattern: CsrStructure, values: jax.Array | None,
                           config: AMGConfig, *, earlier: DeviceStructure | None = None
                           ) -> DeviceStructure:
    """Builds the aggregation hierarchy's structure of ``pattern`` on the device.

    The finest level is padded by :func:`finest_sizes`, every coarse level by
    :func:`_padded_sizes`, from its true sizes, read back once per level (the one wait for
    the device a level costs).

    Args:
      pattern: the finest operator's pattern.
      values: its concrete values, padded with zeros to the nonzeros of
        :func:`finest_sizes`, whose magnitudes the couplings follow; None to couple by the
        pattern alone (each stored direction of a pair ½, on every level).
      config: an unsmoothed aggregation configuration of a scalar system.
      earlier: an earlier structure of ``pattern``, whose padded finest pattern on the
        device (:attr:`DeviceStructure.finest`) and key view this one takes instead of new
        ones when its sizes and devices are this one's: a pattern's mirrored view is built
        once, whatever the operators on it.

    Raises:
      ValueError: if a row stores no diagonal entry, or the coarsest level has too many
        rows for its dense LU.
    """
    clock = time.perf_counter()
    rows, nnz = finest_sizes(pattern.n_rows, pattern.nnz)
    weighted = values is not None
    finest = None if earlier is None else earlier.finest
    shared = finest is not None and (finest.n_rows, finest.indices.shape[0]) == (rows, nnz) and (
        values is None or finest.indices.devices() == values.devices())
    with jax.ensure_compile_time_eval():  # concrete, also while a caller's jit traces
        if shared:
            indptr, indices = finest.indptr, finest.indices
        else:
            padded = pad_pattern(pattern, rows, nnz)
            indptr, indices = (  # where the values are, placed as they are
                jax.device_put((padded.indptr, padded.indices))
                if values is None or len(values.devices()) > 1
                else placed_like((padded.indptr, padded.indices), values))
        if values is None:
            values = jax.device_put(np.ones(nnz, np.float32))
    if values.shape != (nnz,):
        raise ValueError(f"build_device_structure: values must be padded to {nnz}"
                         f" entries, got shape {values.shape}.")
    seconds = {"to the device": time.perf_counter() - clock}
    clock = time.perf_counter()
    width = _width_class(int(np.diff(pattern.indptr).max(initial=0)))
    *triplets, mirrored = _run(_finest_level, indptr, indices, values, width=width, rows=rows)
    if shared:
        width, key_view, wide = earlier.key_width, earlier.key_view, earlier.wide_entries
    else:  # not mirrored: ordered in the mirrored view, built now for every later key
        key_view = None if mirrored else _key_view(indptr, indices, rows)
        width, wide = _key_rows(indices if key_view is None else key_view.indices,
                                indptr if key_view is None else key_view.indptr, rows)
    levels: list[DeviceLevelArrays] = []
    sizes: list[LevelSizes] = []
    true_sizes = [(pattern.n_rows, pattern.nnz)]
    while len(levels) + 1 < config.max_levels and true_sizes[-1][0] > config.min_coarse_rows:
        n_true = np.int32(true_sizes[-1][0])
        coarse = _run(_coarsen, *triplets, n_true, np.int32(ROUNDS[config.selector]),
                      rows=rows, weighted=weighted)
        count, coarse_nnz, missing = (int(x) for x in np.asarray(coarse.counts))
        if not levels and missing:
            check_stored_diagonal(np.flatnonzero(np.asarray(coarse.diagonal)[:n_true] < 0))
        if count >= n_true:  # no coarsening: stop here
            break
        top = levels[0].a.n_rows if levels else rows  # the padded finest rows
        coarse_sizes = LevelSizes(rows, triplets[0].shape[0], *_padded_sizes(
            (top, len(levels)), count, coarse_nnz, tiny_rows=top // TINY,
            coarsest=count <= config.min_coarse_rows or len(levels) + 2 >= config.max_levels))
        level, triplets = _run(_level_arrays, triplets[0], triplets[1], coarse,
                               n_true, np.int32(coarse_nnz), rows=rows,
                               coarse_rows=coarse_sizes.coarse_rows,
                               coarse_nnz_padded=coarse_sizes.coarse_nnz)
        if not levels:  # the finest pattern as sent, not an equal copy
            level = level._replace(a=level.a._replace(indptr=indptr, indices=indices))
        levels.append(level)
        sizes.append(coarse_sizes)
        rows = coarse_sizes.coarse_rows
        true_sizes.append((count, coarse_nnz))
    check_coarsest_rows(true_sizes[-1][0], len(levels), config)
    coarsest, coarsest_diagonal, coarsest_row_ids = _run(_coarsest_arrays, *triplets[:2],
                                                         rows=rows)
    if not levels:  # the finest level is the coarsest: its diagonal is found here
        check_stored_diagonal(np.flatnonzero(np.asarray(coarsest_diagonal)[:pattern.n_rows] < 0))
    with jax.ensure_compile_time_eval():
        level_rows = jax.device_put(np.array([n for n, _ in true_sizes], np.int32))
    arrays = DeviceArrays(levels=tuple(levels), coarsest=coarsest,
                          coarsest_diagonal=coarsest_diagonal,
                          coarsest_row_ids=coarsest_row_ids, rows=level_rows)
    solve_diagonal = _run(_solve_diagonal, levels[0].diagonal if levels else coarsest_diagonal,
                          np.int32(pattern.n_rows))
    jax.block_until_ready((arrays, solve_diagonal, key_view, wide))
    seconds["device"] = time.perf_counter() - clock
    return DeviceStructure(shape=DeviceShape(config, tuple(sizes), (rows, triplets[0].shape[0])),
                           arrays=arrays, sizes=tuple(true_sizes),
                           solve_diagonal=solve_diagonal, setup_seconds=seconds, key_width=width,
                           key_view=key_view, wide_entries=wide)


def cached_setup(pattern: CsrStructure, pattern_key: str, values: jax.Array | None,
                 config: AMGConfig, reuse_setup: bool,
                 padded: Callable[[jax.Array, int], jax.Array],
                 check: Callable[[jax.Array], None] = lambda padded: None,
                 known: tuple[DeviceStructure, str] | None = None
                 ) -> tuple[DeviceStructure, Hierarchy | None]:
    """A solve's device setup: the structure, kept in the setup cache (:mod:`._cache`) per
    pattern and key of the values (:func:`values_key`), and the numbers of concrete
    ``values``, or None for traced ones.

    As the host path's (:attr:`._setup.System.setup`): concrete values take the structure
    built for values of their key, or get one built from them (AmgX's full setup, run where
    the matrix is), whose numbers are then one numeric setup; ``reuse_setup`` (or AmgX's
    ``structure_reuse_levels``) takes the pattern's latest structure whatever its key, and
    with ``reuse_setup`` its numbers too. Traced values take the pattern's latest
    structure, or one built from the pattern alone.

    Args:
      pattern: the finest operator's pattern, and ``pattern_key`` its key.
      values: its concrete values, or None for traced ones.
      config: the AMG configuration (setup location ``"DEVICE"``).
      reuse_setup: ``solve``'s argument.
      padded: ``padded(values, nnz)``: ``values`` padded with zeros to ``nnz`` entries.
      check: ``check(padded)`` raises for concrete ``values`` (``padded``: padded to the
        finest level's nonzeros) that no structure may be built from (NaN, a zero pivot),
        called before one is: a structure found in the cache sets up their numbers
        unchecked, and the solve's program checks them.
      known: a structure of the pattern and the key of ``values``, if already read
        (:meth:`._setup.System.confirm`).
    """
    # a structure of the pattern, the values' key
    seen: list[tuple[DeviceStructure, str]] = [] if known is None else [known]

    def key_of_values(structure: DeviceStructure) -> str:
        if not seen:  # once a call: a digest on the device and one wait for it
            seen.append((structure, values_key(structure, padded(
                values, structure.finest.indices.shape[0]))))
        return seen[0][1]

    def build() -> _cache.CacheEntry:
        finest = None if values is None else padded(
            values, finest_sizes(pattern.n_rows, pattern.nnz)[1])
        if finest is not None:
            check(finest)
        structure = build_device_structure(  # an earlier one's: the pattern not sent again
            pattern, finest, config, earlier=seen[0][0] if seen else None)
        return _cache.CacheEntry(structure, numbers=None, built_for=None if values is None
                                 else key_of_values(structure))

    own_structure = values is not None and not reuse_setup and config.structure_reuse_levels == 0
    entry = _cache.setup_for((pattern_key, config, 1), build,
                             (lambda entry: key_of_values(entry.structure))
                             if own_structure else None)
    if values is None or (reuse_setup and entry.numbers is not None):
        return entry.structure, entry.numbers if reuse_setup else None
    entry.numbers = concrete_numbers(entry.structure, values, padded)
    return entry.structure, entry.numbers


def concrete_numbers(structure: DeviceStructure, values: jax.Array,
                     padded: Callable[[jax.Array, int], jax.Array]) -> Hierarchy:
    """The numbers of concrete ``values`` on ``structure``, computed now (:func:`numbers_now`),
    holding the structure's index arrays and ``values`` themselves as the finest values."""
    return sharing_arrays(
        numbers_now(structure, padded(values, structure.finest.indices.shape[0])),
        structure.arrays, values)


def values_key(structure: DeviceStructure, values: jax.Array) -> str:
    """The key of concrete ``values`` (padded to ``structure``'s finest nonzeros) for
    device structures of ``structure``'s pattern and configuration: a digest of the order
    of every node's couplings on the finest level, ties included
    (:func:`_coupling_order_in_rows`).

    That order is all of the values that the finest level's first round of matching
    follows (the handshake and the joining of nodes left alone compare a node's couplings
    with each other, and break ties by the pattern alone), as the finest strong couplings
    are all that a classical splitting follows (:mod:`._structure_key`): values with the
    same key share a structure, so a new operator that couples the same way — the next
    Newton or time step, the matrix scaled — costs one numeric setup, and another operator
    on the pattern gets a structure of its own. The matching's later rounds and the coarser
    levels also follow the sums of the couplings; values of the same key that would
    aggregate differently there keep the first values' structure, a correct hierarchy
    (their own Galerkin products), as AmgX's ``structure_reuse_levels`` keeps one.
    The digest is two 32-bit sums of hashed words, computed on the device by a program
    compiled once per size class, without a sort where rows hold at most
    :data:`MAX_KEY_WIDTH` entries (:attr:`DeviceStructure.key_width`), else with one of
    the wider rows' entries alone (:func:`_ranks_in_wide_rows`); reading it back is
    one wait for the device, which a checked solve does not wait for
    (:func:`values_digest`). The key names the values' devices too: values on another
    device get a structure there.
    """
    return key_of_digest(values_digest(structure, values), values.devices())


def key_of_digest(digest: jax.Array, devices: Iterable[jax.Device]) -> str:
    """The key of :func:`values_key` for values on ``devices`` whose digest
    (:func:`values_digest`) is ``digest``, read back from the device now."""
    return digest_key(digest) + "@" + ",".join(sorted(str(device) for device in devices))


def values_digest(structure: DeviceStructure, values: jax.Array) -> jax.Array:
    """The ``(2,)`` uint32 digest of :func:`values_key`, left on the device of ``values``:
    a solve's program compares it with a structure's (:attr:`._setup.System.setup`)."""
    finest = structure.finest
    pattern = (finest.indptr, finest.indices, structure.finest_entry_rows, structure.key_view,
               structure.wide_entries)
    devices = values.devices()
    if len(devices) == 1 and finest.indices.devices() != devices:  # another device's
        with jax.ensure_compile_time_eval():
            pattern = jax.device_put(pattern, values.sharding)
    *pattern, view, wide = pattern
    if view is not None:
        return _run(_coupling_order_in_view, view, values, wide, width=structure.key_width,
                    rows=finest.n_rows)
    return _run(_coupling_order_in_rows, *pattern, values, wide, width=structure.key_width,
                rows=finest.n_rows)


def numbers_now(structure: DeviceStructure, values: jax.Array) -> Hierarchy:
    """:func:`numeric_setup` of concrete ``values`` (padded to the finest level's
    nonzeros), computed now by its program compiled per shape and kind of values (kept in
    :data:`NUMERIC_SETUPS`), also while a caller's jit traces."""
    compiled = NUMERIC_SETUPS.get(
        (structure.shape, _input_kind(values)),
        lambda: jax.jit(numeric_setup, static_argnums=0).lower(
            structure.shape, structure.arrays, values).compile(COMPILER_OPTIONS))
    return compiled(structure.arrays, values)


def numeric_setup(shape: DeviceShape, arrays: DeviceArrays, values: jax.Array) -> Hierarchy:
    """The hierarchy's numbers for ``values`` (padded to the finest level's nonzeros) on a
    device structure's ``arrays`` (jit-able with ``shape`` static; differentiable).

    ``P`` is ``1 / √|aggregate|`` on each aggregate (the constant, normalized on it, as
    the host's tentative prolongation), ``R = Pᵀ``, and ``A_c = Pᵀ A P`` one segment sum
    of ``p_i a_ij p_j`` into the coarse entries. Returned padded, as the arrays are.
    """
    config = shape.config
    a_values = values.astype(hierarchy_dtype(values.dtype, config))
    dtype = a_values.dtype
    real = jnp.finfo(dtype).dtype
    start = power_iteration_start(shape.levels[0].rows if shape.levels else shape.coarsest[0],
                                  dtype)
    numbers = []
    for i, (sizes, level) in enumerate(zip(shape.levels, arrays.levels, strict=True)):
        a = level.a._replace(values=a_values)
        inside = jnp.arange(sizes.rows, dtype=jnp.int32) < arrays.rows[i]
        members = jnp.zeros(sizes.coarse_rows, real).at[level.aggregates].add(
            inside.astype(real))
        p_values = jnp.where(inside, jax.lax.rsqrt(jnp.maximum(members, 1))[level.aggregates],
                             0).astype(dtype)
        products = p_values[level.entry_rows] * a_values * p_values[level.a.indices]
        numbers.append(LevelNumbers(
            a=a, p=level.p._replace(values=p_values),
            r=level.r._replace(values=p_values[level.r_from_p]),
            smoother=relaxation_data(a, stored_diagonal(a_values, level.diagonal),
                                     config.smoother, rows=arrays.rows[i], start=start)))
        a_values = jnp.zeros(sizes.coarse_nnz, dtype).at[level.coarse_position].add(
            products, mode="drop")
    finest = (arrays.levels[0].a if arrays.levels else arrays.coarsest)._replace(
        values=values.astype(dtype))
    coarsest = _coarsest_numbers(
        arrays.coarsest._replace(values=a_values), arrays.coarsest_diagonal,
        arrays.coarsest_row_ids, None, config, 1, lambda: annihilates_constants(finest),
        rows=arrays.rows[-1], start=start)
    return Hierarchy(levels=tuple(numbers), coarsest=coarsest, config=config)


# -----------------------------------------------------------------------------
# The structure's programs, compiled once per size class and kept (PROGRAMS).


def _input_kind(x: jax.Array) -> tuple:
    return (x.shape, x.dtype, getattr(x, "weak_type", False), x.sharding)


def _run(function, *args, **static):
    """``function(*args, **static)`` by its program compiled for these statics and kinds of
    arguments, kept in :data:`PROGRAMS`: an executable runs when it is called, also while a
    caller's jit traces (a structure from the pattern alone for traced values)."""
    key = (function.__name__, tuple(sorted(static.items())), _x64(), jax.tree.structure(args),
           tuple((np.shape(a), a.dtype, getattr(a, "sharding", None))
                 for a in jax.tree.leaves(args)))
    program = PROGRAMS.get(key, lambda: jax.jit(function, static_argnames=tuple(static)).lower(
        *args, **static).compile(COMPILER_OPTIONS))
    return program(*args)


# The padded sizes handed out, per padded finest rows and level, or for the finest level
# per octave of rows (:func:`._size_classes.handed_out`'s registry).
_PADDED_SIZES: collections.OrderedDict[tuple, collections.deque[tuple[int, int]]] = (
    collections.OrderedDict())


def finest_sizes(rows: int, nnz: int) -> tuple[int, int]:
    """The padded rows and nonzeros of a finest level of ``rows`` and ``nnz``: the smallest
    handed out before (for rows of the same octave) with at most ``rows / 16 + 16`` rows
    and under ``1.25 ×`` the nonzeros ``+ 16`` more, as the host path's shapes fit
    (:func:`._size_classes.class_shape`), else :func:`~._size_classes.finest_rows` and
    :func:`~._size_classes.finest_nonzeros` of them."""
    return handed_out(
        _PADDED_SIZES, ("finest", rows.bit_length()),
        lambda sizes: fit_finest_rows(rows, sizes[0]) and fit_finest_nonzeros(nnz, sizes[1]),
        lambda: (finest_rows(rows), finest_nonzeros(nnz)))


def _padded_sizes(key: tuple[int, int], rows: int, nnz: int, *, tiny_rows: int,
                  coarsest: bool) -> tuple[int, int]:
    """The padded rows and nonzeros of a coarse level of ``rows`` and ``nnz``: the
    smallest handed out before for ``key`` (the padded finest rows, the level) that holds
    them with less than twice their entries (+ 4), else a new one, each
    :func:`~._size_classes.grown_size` of a small size (1.2 × room, under 1.5 ×).

    A *tiny* level, of at most ``tiny_rows`` rows (:data:`TINY` times fewer than the
    finest), gets the :func:`~._size_classes.size_class` of three times its sizes, and
    sizes of a tiny level (padded to at most ``3 tiny_rows`` rows) are taken under four
    times its own: the coarse levels' sizes vary between similar patterns, the smaller the
    more (3D Poisson 32³ and 16 couplings more: 27 136 and 28 198 nonzeros on level 1,
    3200 and 4496 on level 2, 352 and 783 on level 3), and a tiny level's arrays weigh
    nothing. But the rows of the level that will be the ``coarsest``, whose dense inverse
    costs their square, get the host's :func:`~._size_classes.coarsest_rows` (``n / 16``
    more, at least 48) and are taken under ``1.5 ×`` them (``+ 4``).
    """
    tiny = rows <= tiny_rows

    def new(n: int, is_rows: bool) -> int:
        if is_rows and coarsest:
            return coarsest_rows(n)
        return size_class(3 * n) if tiny else grown_size(n, small=True)

    def fits(sizes: tuple[int, int]) -> bool:
        room = 4 if sizes[0] <= 3 * tiny_rows else 2
        return (rows <= sizes[0] < (1.5 if coarsest else room) * rows + 4
                and nnz <= sizes[1] < room * nnz + 4)

    return handed_out(_PADDED_SIZES, key, fits, lambda: (new(rows, True), new(nnz, False)))


class _Coarsening(NamedTuple):
    """A level's aggregates (``rows`` past the true rows) and its Galerkin pattern: the
    next level's triplets (rows past the end: ``rows``), summed magnitudes, and where each
    entry lands among them; ``counts``: aggregates, coarse nonzeros, rows without a stored
    diagonal entry."""

    aggregates: jax.Array
    diagonal: jax.Array
    position: jax.Array
    rows: jax.Array
    cols: jax.Array
    magnitudes: jax.Array
    counts: jax.Array


def _width_class(width: int) -> int:
    """``width`` rounded up to a power of two from 8 to 64, above that to a multiple of 32:
    the rows' widths that the programs of :func:`_coupling_order_in_rows` are compiled for
    (statically: a loop of known trips, with no wait on a GPU for its condition), each
    trip a pass over the entries (3D elasticity's 81 entries a row: 96)."""
    return max(8, 1 << (width - 1).bit_length()) if width <= 64 else -(-width // 32) * 32


def _finest_level(indptr, indices, values, *, width, rows):
    """The finest level's triplets (:func:`_finest_triplets`), and whether its pattern is
    mirrored with rows of at most ``width`` entries (:func:`_mirrored`)."""
    return (*_finest_triplets(indptr, indices, values, rows=rows),
            _mirrored(indptr, indices, width=width, rows=rows))


def _finest_triplets(indptr, indices, values, *, rows, entry_rows=None):
    """The finest level's triplets: each entry's row (``rows`` on padding entries), column
    and magnitude; the rows searched in ``indptr`` unless ``entry_rows`` gives them."""
    entries = jnp.arange(indices.shape[0], dtype=jnp.int32)
    if entry_rows is None:
        entry_rows = (jnp.searchsorted(indptr, entries, side="right") - 1).astype(jnp.int32)
    inside = entries < indptr[-1]
    return (jnp.where(inside, entry_rows, rows), indices,
            jnp.where(inside, jnp.abs(values), 0))


def _coarsen(entry_rows, cols, magnitudes, n_true, rounds, *, rows, weighted):
    """Aggregates a level of ``n_true`` rows (padded to ``rows``) in ``rounds`` rounds of
    matching, and finds its Galerkin pattern."""
    nnz = entry_rows.shape[0]
    entries = jnp.arange(nnz, dtype=jnp.int32)
    inside, on_diagonal, low, high, weights, _ = _couplings(entry_rows, cols, magnitudes, rows,
                                                            weighted=weighted)
    diagonal = jnp.full(rows, -1, jnp.int32).at[entry_rows].max(
        jnp.where(on_diagonal, entries, -1), mode="drop")
    node = jnp.arange(rows, dtype=jnp.int32)
    missing = jnp.sum((diagonal < 0) & (node < n_true), dtype=jnp.int32)

    def round_(_, state):  # one round of matching, on the graph of the last round's pairs
        low, high, weights, aggregates, count = state
        pairs, count = _match(low, high, weights, count, rows)
        a, b = _take(pairs, low, fill=rows), _take(pairs, high, fill=rows)
        low, high, weights, _, _ = _edges(a, b, weights, (a < rows) & (a != b), rows)
        return low, high, weights, _take(pairs, aggregates, fill=rows), count

    # A loop, not unrolled: one compiled round (a third of SIZE_8's compile time).
    *_, aggregates, count = jax.lax.fori_loop(0, rounds, round_,
                                              (low, high, weights, node, n_true))
    aggregates = jnp.where(node < n_true, aggregates, rows)
    coarse_rows, coarse_cols, coarse_magnitudes, position, coarse_nnz = _summed_triplets(
        jnp.where(inside, _take(aggregates, entry_rows, fill=rows), rows),
        _take(aggregates, cols, fill=0), magnitudes, rows)
    return _Coarsening(aggregates, diagonal, position, coarse_rows, coarse_cols,
                       coarse_magnitudes, jnp.stack([count, coarse_nnz, missing]))


def _couplings(entry_rows, cols, magnitudes, rows, *, weighted):
    """A level's coupling graph (step 1 of the module's docstring), as edges ``(low,
    high)`` of summed magnitudes: each edge's weight is one number, the same seen from
    either end (as a directed graph's sums in two orders might not be, and the handshake
    compares them).

    Returns which entries lie inside the rows and on the diagonal, the edges' ends
    (``low`` past ``rows - 1`` on padding edges), weights, and the number of edges.
    """
    inside = entry_rows < rows
    on_diagonal = inside & (entry_rows == cols)
    strength = magnitudes if weighted else jnp.ones_like(magnitudes)
    low, high, summed, _, count = _edges(entry_rows, cols, strength, inside & ~on_diagonal,
                                         rows)
    weights = summed / 2
    if weighted:
        d = jnp.zeros(rows, magnitudes.dtype).at[entry_rows].add(
            jnp.where(on_diagonal, magnitudes, 0), mode="drop")
        scale = jnp.sqrt(_take(d, low) * _take(d, high))
        weights = jnp.where(scale > 0, summed / (2 * jnp.where(scale > 0, scale, 1)), 0)
    return inside, on_diagonal, low, high, weights, count


def _key_view(indptr, indices, rows: int) -> KeyView:
    """The :class:`KeyView` of a finest pattern that is not mirrored (padded, on the
    device): one sort of the pattern's entries and their mirrors (:func:`_mirrored_pairs`),
    once per pattern, and one wait for the view's size, cut to
    :func:`~._size_classes.finest_nonzeros` of it."""
    pairs_rows, pairs_cols, position, count = _run(_mirrored_pairs, indptr, indices, rows=rows)
    return _run(_view_arrays, pairs_rows, pairs_cols, position, rows=rows,
                size=finest_nonzeros(int(count)))


def _key_rows(indices, indptr, rows: int) -> tuple[int, jax.Array | None]:
    """:attr:`DeviceStructure.key_width` and :attr:`~DeviceStructure.wide_entries` of the
    pattern (or view) of ``indptr`` and ``indices`` (padded, on the device): one wait for
    two counts (:func:`_row_widths`)."""
    widest, wide = (int(x) for x in np.asarray(_run(_row_widths, indptr, rows=rows)))
    return _width_class(widest), None if not wide else _run(
        _wide_entries, indices, indptr, rows=rows, size=size_class(wide))


def _row_widths(indptr, *, rows):
    """``[widest, wide]``: the most entries in a row of at most :data:`MAX_KEY_WIDTH`, and
    the entries of the rows of more."""
    widths = jnp.diff(indptr)[:rows]
    wide = widths > MAX_KEY_WIDTH
    return jnp.stack([jnp.max(jnp.where(wide, 0, widths)),
                      jnp.sum(jnp.where(wide, widths, 0), dtype=widths.dtype)])


def _wide_entries(indices, indptr, *, rows, size):
    """The positions of the entries of the rows of more than :data:`MAX_KEY_WIDTH` entries,
    in order, padded with the number of entries to ``size`` (at least theirs)."""
    nnz = indices.shape[0]
    entries = jnp.arange(nnz, dtype=jnp.int32)
    entry_rows = (jnp.searchsorted(indptr, entries, side="right") - 1).astype(jnp.int32)
    widths = jnp.diff(indptr)
    wide = (entries < indptr[-1]) & (_take(widths, entry_rows) > MAX_KEY_WIDTH)
    slot = jnp.where(wide, jnp.cumsum(wide, dtype=jnp.int32) - 1, size)
    return jnp.full(size, nnz, jnp.int32).at[slot].set(entries, mode="drop")


def _mirrored_pairs(indptr, indices, *, rows):
    """The distinct ``(i, j)`` of the pattern's entries and of their mirrors ``(j, i)``,
    sorted (:func:`_summed_triplets`; rows past ``rows - 1`` past their count), where each
    entry lands among them, and their number."""
    entry_rows, cols, _ = _finest_triplets(indptr, indices, jnp.zeros(indices.shape[0]),
                                           rows=rows)
    inside = entry_rows < rows
    pairs_rows, pairs_cols, _, position, count = _summed_triplets(
        jnp.concatenate([entry_rows, jnp.where(inside, cols, rows)]),
        jnp.concatenate([cols, jnp.where(inside, entry_rows, 0)]),
        jnp.zeros(2 * indices.shape[0], jnp.int32), rows)
    return pairs_rows, pairs_cols, position[:indices.shape[0]], count


def _view_arrays(pairs_rows, pairs_cols, position, *, rows, size):
    """The :class:`KeyView` of :func:`_mirrored_pairs`'s, cut or padded to ``size``
    entries (at least their count)."""
    extra = max(size - pairs_rows.shape[0], 0)
    view_rows = jnp.pad(pairs_rows[:size], (0, extra), constant_values=rows)
    view = _csr_pattern(view_rows, jnp.pad(pairs_cols[:size], (0, extra)), rows)
    return KeyView(view.indptr, view.indices, jnp.where(view_rows < rows, view_rows, 0),
                   position)


def _coupling_order_in_view(view, values, wide=None, *, width, rows):
    """:func:`_coupling_order_in_rows`'s digest of a pattern that is not mirrored, by its
    :class:`KeyView` ``view`` (``wide``: its :attr:`~DeviceStructure.wide_entries`, rows of
    at most ``width`` entries else), bit for bit the digest of the three sorts where no
    entry is stored twice, without a sort: the values' magnitudes scattered into the view,
    each mirror of an unstored entry 0, then :func:`_coupling_order_in_rows` (a coupling's
    weight there ``m_ij + m_ji``, the sum of the same numbers as the edges', ``+ 0`` alone
    exact). Entries stored twice are summed at their place in the view first, and their
    mirror's added after: the same numbers in another order."""
    magnitudes = jnp.abs(values)
    magnitudes = jnp.zeros(view.indices.shape[0], magnitudes.dtype).at[view.position].add(
        magnitudes, mode="drop")
    return _coupling_order_in_rows(view.indptr, view.indices, view.entry_rows, magnitudes,
                                   wide, width=width, rows=rows)


def _coupling_order_in_rows(indptr, indices, entry_rows, values, wide=None, *, width, rows):
    """``(2,)`` uint32: a digest of the order of each node's couplings on the finest level
    (:func:`values_key`) of a *mirrored* pattern (every row's columns strictly increasing,
    ``(j, i)`` stored with each ``(i, j)``: :func:`_mirrored`): the neighbours of every
    node sorted by the weight of their coupling (stably: ties in the order of the edges
    ``(low, high)``, which the pattern alone sets), each hashed with whether its weight is
    positive and whether it is larger than the one before. Reads the true rows and entries
    alone, so equal for every padding of them. ``entry_rows``: the row of each true entry
    (any on padding entries); ``wide``: the :attr:`~DeviceStructure.wide_entries`, rows of
    at most ``width`` entries else.

    That order is the one three sorts give (the edges, then the couplings by weight and by
    node: ``sparse/tests/device_setup_test.py``'s reference, bit for bit), found without:

    Each off-diagonal entry ``(i, j)`` is the coupling of ``i`` to ``j``, its weight
    ``(m_ij + m_ji) / (2 √(m_ii m_jj))`` read at its mirror (:func:`_mirror_positions`), the
    same sum of the same two numbers as the edges' there. Its place among row ``i``'s
    couplings sorted stably by weight is the number of the row's couplings of smaller
    weight, or of equal weight and earlier in the order of the edges
    (neighbours above ``i``, then those below, each ascending): ``width`` passes of
    comparisons over the entries, a cost of ``nnz × width``, no sort; the entries of wider
    rows by one sort of theirs alone (:func:`_ranks_in_wide_rows`)."""
    entry_rows, cols, magnitudes = _finest_triplets(indptr, indices, values, rows=rows,
                                                    entry_rows=entry_rows)
    inside = entry_rows < rows
    on_diagonal = inside & (entry_rows == cols)
    coupling = inside & ~on_diagonal
    d = jnp.zeros(rows, magnitudes.dtype).at[entry_rows].add(
        jnp.where(on_diagonal, magnitudes, 0), mode="drop")
    mirror = _mirror_positions(indptr, indices, entry_rows, rows=rows,
                               width=width if wide is None else indices.shape[0])
    summed = magnitudes + _take(magnitudes, mirror)
    scale = jnp.sqrt(_take(d, entry_rows) * _take(d, cols))
    weights = jnp.where(coupling & (scale > 0), summed / (2 * jnp.where(scale > 0, scale, 1)),
                        0)
    bits = _ordered_bits(weights)
    # Past every (finite) weight's bits: an entry that is no coupling is before none.
    bits = jnp.where(coupling, bits, ~jnp.zeros_like(bits))
    tie = jnp.where(cols > entry_rows, cols, cols + rows)  # the edges' order at equal weight
    start = _take(indptr, entry_rows)
    end = _take(indptr, entry_rows + 1)

    def count_before(k, rank):  # the row's k-th entry, if a coupling ordered before
        other = jnp.minimum(start + k, entry_rows.shape[0] - 1)
        before = (start + k < end) & (
            (bits[other] < bits) | ((bits[other] == bits) & (tie[other] < tie)))
        return rank + before.astype(jnp.int32)

    rank = jax.lax.fori_loop(0, width, count_before, jnp.zeros_like(entry_rows))
    if wide is not None:
        rank = _ranks_in_wide_rows(rank, wide, entry_rows, bits, tie, rows)
    # The couplings of the rows before: the row's place in the digest's sequence.
    before_row = jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(coupling, dtype=jnp.int32)])
    size = entry_rows.shape[0]
    place = jnp.where(coupling, _take(before_row, start) + rank, size)
    s = jnp.full(size, rows, jnp.int32).at[place].set(entry_rows, mode="drop")
    d = jnp.zeros(size, jnp.int32).at[place].set(cols, mode="drop")
    weights = jnp.zeros(size, weights.dtype).at[place].set(weights, mode="drop")
    return _order_digest(s, d, weights, jnp.sum(coupling, dtype=jnp.int32))


def _ranks_in_wide_rows(rank, wide, entry_rows, bits, tie, rows):
    """``rank`` with the entries at ``wide`` (the rows of more than :data:`MAX_KEY_WIDTH`
    entries; past the end: padding) ranked in their rows by ``(bits, tie)``: one sort of
    those entries alone by ``(row, bits, tie)``, each one's rank its place in its row's
    run (entries that are no coupling, of the largest bits, last)."""
    size = entry_rows.shape[0]
    at = jnp.minimum(wide, size - 1)
    row = jnp.where(wide < size, entry_rows[at], rows)
    sorted_rows, _, _, order = jax.lax.sort((row, bits[at], tie[at], wide), num_keys=3)
    place = jnp.arange(wide.shape[0], dtype=jnp.int32)
    first = jnp.full(rows + 1, wide.shape[0], jnp.int32).at[sorted_rows].min(place)
    return rank.at[order].set(place - first[sorted_rows], mode="drop")


def _order_digest(s, d, weights, counted):
    """The digest of the couplings ``s → d`` sorted by node ``s``, then by weight: each
    neighbour hashed with whether its weight is positive and whether it is larger than the
    one before; the first ``counted`` alone."""
    new = jnp.concatenate([jnp.ones(1, bool), (s[1:] != s[:-1]) | (weights[1:] != weights[:-1])])
    words = (d.astype(jnp.uint32) * jnp.uint32(4) + new.astype(jnp.uint32) * jnp.uint32(2)
             + (weights > 0).astype(jnp.uint32))
    return summed_digest(words, jnp.uint32(0), counted.astype(jnp.uint32))


def _ordered_bits(weights):
    """Unsigned integers ordered as the (not negative) ``weights``: their bits."""
    return jax.lax.bitcast_convert_type(
        weights, jnp.uint32 if weights.dtype.itemsize == 4 else jnp.uint64)


def _mirror_positions(indptr, indices, entry_rows, *, width, rows):
    """Each entry ``(i, j)``'s mirror: the position of ``(j, i)`` in row ``j``, found by a
    binary search of its columns (increasing, at most ``width``), or past the end where
    none is stored (padding entries: ``entry_rows`` past ``rows - 1``)."""
    size = indices.shape[0]
    inside = entry_rows < rows
    j = jnp.where(inside, indices, 0)
    first, last = _take(indptr, j), jnp.where(inside, _take(indptr, j + 1), 0)
    end = last

    def search(_, bounds):
        first, last = bounds
        middle = jnp.minimum((first + last) // 2, size - 1)
        right = indices[middle] < entry_rows
        going = first < last
        return (jnp.where(going & right, middle + 1, first),
                jnp.where(going & ~right, middle, last))

    found, _ = jax.lax.fori_loop(0, width.bit_length(), search, (first, last))
    stored = inside & (found < end) & (indices[jnp.minimum(found, size - 1)] == entry_rows)
    return jnp.where(stored, found, size)


def _mirrored(indptr, indices, *, width, rows):
    """Whether the pattern is *mirrored*: every row's columns strictly increasing (no
    duplicates) and at most ``width``, and ``(j, i)`` stored with each ``(i, j)``."""
    entry_rows, cols, _ = _finest_triplets(indptr, indices, jnp.zeros(indices.shape[0]),
                                           rows=rows)
    inside = entry_rows < rows
    increasing = jnp.concatenate([jnp.ones(1, bool), (entry_rows[1:] != entry_rows[:-1])
                                  | (cols[1:] > cols[:-1])])
    mirror = _mirror_positions(indptr, indices, entry_rows, width=width, rows=rows)
    return jnp.all(~inside | (increasing & (mirror < indices.shape[0])))


def _stable_order(key):
    """The permutation that sorts the unsigned integer ``key`` stably: a sort of one key
    and its positions, which XLA runs on a GPU as CUB's radix sort of pairs."""
    return jax.lax.sort((key, jnp.arange(key.shape[0], dtype=jnp.int32)), num_keys=1,
                        is_stable=True)[1]


def _edges(a, b, values, kept, end):
    """The edges ``(min(a, b), max(a, b))`` of the ``kept`` pairs, sorted, their values
    summed (:func:`_summed_triplets`)."""
    return _summed_triplets(jnp.where(kept, jnp.minimum(a, b), end), jnp.maximum(a, b),
                            values, end)


def _match(low, high, weights, count, rows):
    """Pairwise matching of a graph's ``count`` nodes (edges ``low – high``, ``low`` past
    ``rows`` on padding edges; weights that are not positive ignored).

    Returns each node's pair, numbered ``0 .. pairs - 1`` (``rows`` past ``count``), and
    the number of pairs: a handshake, nodes left alone joined to their strongest paired
    neighbour, the nodes without a neighbour one pair, the last (see the module's
    docstring).
    """
    node = jnp.arange(rows, dtype=jnp.int32)
    edge = (low < rows) & (weights > 0)
    distance = high - low
    aligned = _first_of_pair(low, high, edge)
    tie = (pair_hash(low, high) >> 1).astype(jnp.int32)  # not negative
    # Each edge seen from both ends: from s to d (padding edges from past the end, to 0).
    edge, weights, distance, aligned, tie = (jnp.concatenate([x, x]) for x in (
        edge, weights, distance, aligned, tie))
    s = jnp.where(edge, jnp.concatenate([low, high]), rows)
    d = jnp.where(edge, jnp.concatenate([high, low]), 0)

    def strongest(allowed, *preferences):
        """Per node, the neighbour of its allowed edges by largest weight, then by each
        ``(key, larger_first)`` of ``preferences``, then the largest; -1 for none."""
        best = _segment_best(jnp.where(allowed, weights, -jnp.inf), s, rows, larger=True)
        allowed = allowed & (weights == best[jnp.minimum(s, rows - 1)])
        for key, larger in preferences:
            empty = -1 if larger else jnp.iinfo(jnp.int32).max
            best = _segment_best(jnp.where(allowed, key, empty), s, rows, larger=larger)
            allowed = allowed & (key == best[jnp.minimum(s, rows - 1)])
        return _segment_best(jnp.where(allowed, d, -1), s, rows, larger=True)

    def handshake(state):
        partner, _, step = state
        free = partner < 0
        proposal = strongest(edge & free[jnp.minimum(s, rows - 1)] & free[d],
                             (distance, False), (aligned, True), (tie, True))
        mutual = (proposal >= 0) & (proposal[jnp.maximum(proposal, 0)] == node)
        return jnp.where(mutual, proposal, partner), jnp.any(mutual), step + 1

    partner, _, _ = jax.lax.while_loop(
        lambda state: state[1] & (state[2] < MAX_HANDSHAKES), handshake,
        (jnp.full(rows, -1, jnp.int32), jnp.bool_(True), jnp.int32(0)))
    free = (partner < 0) & (node < count)
    # A node left alone joins its strongest paired neighbour (ties: the smallest index);
    # the nodes without an edge make one pair, numbered after the others.
    target = strongest(edge & free[jnp.minimum(s, rows - 1)] & (partner[d] >= 0), (-d, True))
    joins = free & (target >= 0)
    target = jnp.maximum(target, 0)
    isolated = (node < count) & (jnp.zeros(rows, jnp.int32).at[s].add(1, mode="drop") == 0)
    first = jnp.where(partner >= 0, jnp.minimum(node, partner), node)
    root = (node < count) & (first == node) & ~joins & ~isolated
    number = jnp.cumsum(root, dtype=jnp.int32) - 1
    roots = jnp.sum(root, dtype=jnp.int32)
    pairs = jnp.where(joins, number[jnp.minimum(target, partner[target])],
                      jnp.where(isolated, roots, number[first]))
    return jnp.where(node < count, pairs, rows), roots + jnp.any(isolated).astype(jnp.int32)


def _first_of_pair(low, high, edge):
    """1 for an edge that comes first of a pair on its chain, else 0: the chain of edges
    ``(low - k δ, low - (k - 1) δ)``, ``k = 1, 2, …``, of the same distance ``δ = high -
    low``, has an even number of edges before it.

    On a grid numbered line by line these chains are its lines (δ = 1) and columns (δ =
    the line's length), so preferring such edges pairs ``(0, 1), (2, 3), …`` from the start
    of every line, of odd length too, as the host's sequential matching does, then those
    pairs' lines 0 and 1, 2 and 3, … The chains are ranked by pointer jumping: a binary
    search finds each edge's predecessor, then ``log₂`` of the longest chain rounds of
    gathers count the edges before it.
    """
    size = low.shape[0]
    target_low, target_high = 2 * low - high, low  # the predecessor's ends

    def search(_, bounds):  # the first edge not before the predecessor, in (low, high) order
        first, last = bounds
        middle = jnp.minimum((first + last) // 2, size - 1)
        before = (low[middle] < target_low) | (
            (low[middle] == target_low) & (high[middle] < target_high))
        going = first < last
        return (jnp.where(going & before, middle + 1, first),
                jnp.where(going & ~before, middle, last))

    found, _ = jax.lax.fori_loop(0, size.bit_length(), search,
                                 (jnp.zeros(size, jnp.int32), jnp.full(size, size, jnp.int32)))
    found = jnp.minimum(found, size - 1)
    predecessor = jnp.where(edge & (target_low >= 0) & edge[found] & (low[found] == target_low)
                            & (high[found] == target_high), found, -1)

    def jump(state):
        rank, pointer = state
        pointing = pointer >= 0
        at = jnp.maximum(pointer, 0)
        return (jnp.where(pointing, rank + rank[at], rank),
                jnp.where(pointing, pointer[at], -1))

    rank, _ = jax.lax.while_loop(lambda state: jnp.any(state[1] >= 0), jump,
                                 ((predecessor >= 0).astype(jnp.int32), predecessor))
    return (rank % 2 == 0).astype(jnp.int32)


def _summed_triplets(rows, cols, values, end):
    """The distinct ``(row, column)`` pairs of triplets, sorted, with their values summed.

    Triplets with ``rows >= end`` are left out; the others' columns lie in ``[0, end]``. Returns the pairs' rows (``end`` past
    their count), columns and sums, padded to the triplets' number, where each triplet
    landed among them (past the end where left out), and their count.
    """
    size = rows.shape[0]
    order = _pair_order(rows, cols, end, _pair_key(end))
    sorted_rows, sorted_cols = rows[order], cols[order]
    kept = sorted_rows < end
    first = jnp.concatenate([jnp.ones(1, bool), (sorted_rows[1:] != sorted_rows[:-1])
                             | (sorted_cols[1:] != sorted_cols[:-1])])
    new = kept & first
    segment = jnp.where(kept, jnp.cumsum(new, dtype=jnp.int32) - 1, jnp.iinfo(jnp.int32).max)
    sums = jnp.zeros(size, values.dtype).at[segment].add(values[order], mode="drop")
    pair_rows = jnp.full(size, end, jnp.int32).at[segment].set(sorted_rows, mode="drop")
    pair_cols = jnp.zeros(size, jnp.int32).at[segment].set(sorted_cols, mode="drop")
    position = jnp.zeros(size, jnp.int32).at[order].set(segment)
    return pair_rows, pair_cols, sums, position, jnp.sum(new, dtype=jnp.int32)


def _pair_order(rows, cols, end, key):
    """The permutation that sorts triplets by ``(row, column)``, stably, those with ``rows
    >= end`` last (columns of the others in ``[0, end]``), by sorts of one key: XLA runs a
    sort of one unsigned key and its positions on a GPU as CUB's radix sort, and a sort of
    two keys as a comparison sort.

    ``key`` (:func:`_pair_key`): ``"uint32"`` or ``"uint64"``, one sort of ``row · (end +
    1) + column`` in that type (a row past ``end - 1`` counted as ``end``, its column as
    0); ``"two passes"``, a sort by column, then a stable one by row. Each gives the
    permutation of a stable sort by ``(row, column)``: the same, bit for bit.
    """
    kept = rows < end
    row = jnp.where(kept, rows, end).astype(jnp.uint32)
    col = jnp.where(kept, cols, 0).astype(jnp.uint32)
    if key == "two passes":
        by_col = _stable_order(col)
        return by_col[_stable_order(row[by_col])]
    wide = jnp.dtype(key).type
    return _stable_order(row.astype(wide) * wide(end + 1) + col.astype(wide))


def _pair_key(end: int) -> str:
    """The key :func:`_pair_order` sorts triplets of rows and columns up to ``end`` by: 32
    bits while ``(end + 1)² <= 2³²`` (levels of up to 65 535 rows; the largest key is
    ``end (end + 1)``), else 64 bits where x64 is on, else two passes of 32 bits."""
    if (end + 1) ** 2 <= 2**32:
        return "uint32"
    return "uint64" if _x64() else "two passes"


def _x64() -> bool:
    """Whether 64-bit types are on (``jax_enable_x64``)."""
    return jax.dtypes.canonicalize_dtype(jnp.uint64) == jnp.uint64


def _take(values, index, fill=0):
    """``values[index]``, and ``fill`` where ``index`` is past the end."""
    return values.at[index].get(mode="fill", fill_value=fill)


def _segment_best(keys, segments, count, *, larger):
    """Per segment ``0 .. count - 1``, the largest (or smallest) of its ``keys``; segments
    past the end are left out."""
    empty = (-jnp.inf if larger else jnp.inf) if jnp.issubdtype(keys.dtype, jnp.floating) else (
        jnp.iinfo(keys.dtype).min if larger else jnp.iinfo(keys.dtype).max)
    best = jnp.full(count, empty, keys.dtype)
    return (best.at[segments].max(keys, mode="drop") if larger
            else best.at[segments].min(keys, mode="drop"))


def _csr_pattern(entry_rows, cols, rows):
    """The CSR pattern of sorted triplets (rows past ``rows - 1``: padding), its values an
    empty placeholder."""
    indptr = jnp.searchsorted(entry_rows, jnp.arange(rows + 1, dtype=jnp.int32), side="left")
    return CsrArrays(jnp.zeros(0, jnp.int32), jnp.where(entry_rows < rows, cols, 0),
                     indptr.astype(jnp.int32))


def _level_arrays(entry_rows, cols, coarse, n_true, coarse_nnz, *, rows, coarse_rows,
                  coarse_nnz_padded):
    """A level's :class:`DeviceLevelArrays` from its triplets and :class:`_Coarsening`, and
    the next level's triplets, cut or padded to ``coarse_nnz_padded`` entries (those past
    the first ``coarse_nnz`` marked as padding: row ``coarse_rows``)."""
    node = jnp.arange(rows, dtype=jnp.int32)
    inside = node < n_true
    aggregates = jnp.where(inside, coarse.aggregates, 0)
    # R's entries: P's (one a row), ordered by aggregate, then by row.
    sorted_aggregates, order = jax.lax.sort((jnp.where(inside, aggregates, coarse_rows), node),
                                            num_keys=1)
    r_indptr = jnp.searchsorted(sorted_aggregates, jnp.arange(coarse_rows + 1, dtype=jnp.int32),
                                side="left").astype(jnp.int32)
    placeholder = jnp.zeros(0, jnp.int32)
    level = DeviceLevelArrays(
        a=_csr_pattern(entry_rows, cols, rows),
        entry_rows=jnp.where(entry_rows < rows, entry_rows, 0),
        diagonal=coarse.diagonal, aggregates=aggregates,
        p=CsrArrays(placeholder, aggregates, jnp.minimum(jnp.arange(rows + 1, dtype=jnp.int32),
                                                         n_true)),
        r=CsrArrays(placeholder, order, r_indptr), r_from_p=order,
        coarse_position=coarse.position)
    extra = max(coarse_nnz_padded - coarse.rows.shape[0], 0)
    kept = jnp.arange(coarse_nnz_padded, dtype=jnp.int32) < coarse_nnz
    next_rows, next_cols, next_magnitudes = (
        jnp.where(kept, jnp.pad(x[:coarse_nnz_padded], (0, extra)), padding)
        for x, padding in ((coarse.rows, coarse_rows), (coarse.cols, 0),
                           (coarse.magnitudes, 0)))
    return level, (next_rows, next_cols, next_magnitudes)


def _coarsest_arrays(entry_rows, cols, *, rows):
    """The coarsest operator's pattern, diagonal positions and entries' rows (padding
    entries: the last row's, as :attr:`CsrArrays.row_ids` counts them)."""
    inside = entry_rows < rows
    entries = jnp.arange(entry_rows.shape[0], dtype=jnp.int32)
    diagonal = jnp.full(rows, -1, jnp.int32).at[entry_rows].max(
        jnp.where(inside & (entry_rows == cols), entries, -1), mode="drop")
    return (_csr_pattern(entry_rows, cols, rows), diagonal,
            jnp.where(inside, entry_rows, rows - 1))


def _solve_diagonal(diagonal, n_true):
    """Diagonal positions for the solve's check: a padding row's points at row 0's."""
    rows = jnp.arange(diagonal.shape[0], dtype=diagonal.dtype)  # int32, also with x64
    return jnp.where(rows < n_true.astype(rows.dtype), diagonal, diagonal[0])
