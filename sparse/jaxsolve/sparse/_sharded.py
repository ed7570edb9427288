"""Sharded solves on one host: `solve` for a row-sharded matrix, under `jax.shard_map`.

A `jaxsolve.sharding.ShardedCsrMatrix` (from `jaxsolve.sharding.shard_rows`) holds ``P``
blocks of rows of ``A``, one per device of a 1D mesh; ``b`` and ``x`` are split the same
way (``NamedSharding(mesh, P(axis))``). When ``P`` does not divide ``n`` (JAX shards an
array only evenly), every block has ``m = ⌈n / P⌉`` rows, some an empty padding row, and
``b`` comes either with its ``n`` rows, placed anywhere (on one device, replicated), giving
``x`` with ``n`` rows replicated over the mesh, or in the padded layout of the blocks
(``A.shard_vector(b)``, sharded like them), giving ``x`` in that layout. Padding rows hold
zeros throughout and change neither the solution, nor the iterations, nor the derivatives.
The solve runs as one `jax.shard_map` program in which every device runs, on its own rows,
the algorithms of :mod:`._partitioned` — the products, the Krylov methods' inner products,
and the preconditioner, block-Jacobi AMG with a coarse space, all described there — which
reach the other devices only through a :class:`._collectives.Collectives`. Here it is
``_AxisCollectives``, over the mesh's axis:

* **halo exchange** (each product ``A x``): a device receives its halo entries of ``x`` from
  their owners with `jax.lax.ppermute`, only those entries, one message per neighbouring
  device; ``x`` is never all-gathered;
* **sums** (inner products, the coarse operator's assembly at setup, each coarse
  correction): `jax.lax.psum`.

:mod:`._mpi` runs the same algorithms across MPI processes with ``mpi4jax``. What this
module adds is the shard_map driver: the blocks' setup from a `ShardedCsrMatrix`'s layout,
and one compiled program per configuration.

**Setup.** Like the single-device solve, the structure of each block's hierarchy is built
on the host and cached per layout, configuration and values' key (`_orientations`):
concrete values get the structures built for them, or for values with the same key
(:mod:`._structure_key`, over every device's block), so another operator on a layout
(``A.with_values(...)``) gets its own; traced values, ``reuse_setup=True`` and a nonzero
``structure_reuse_levels`` take the layout's latest (built from the pattern when there is
none). The numbers are computed inside the compiled program from the values, so traced values
work. Blocks whose structures differ run different code: the device picks its branch with
``lax.switch`` on its axis index (identical blocks share one). All blocks get the same
number of levels (the smallest), their level arrays are padded to common shapes, and so
is the data of the multicolor smoothers: each block's coloring is padded to the most
colors, and per color the most rows and entries of ``L`` and ``U``, of all blocks' (a
color a block lacks is empty; padding rows and entries hold zeros, so they never change
the sweeps). For
concrete values the numbers (every block's hierarchy, the coarse inverse) are set up by a
program of their own and kept with the values, per orientation, as the single-device
solve keeps its setup: another solve with equal values reuses them, new values set up
anew, and ``reuse_setup=True`` takes the latest numbers whatever the values.

**Derivatives** go through :func:`jaxsolve.autodiff.linear_solve` with the sharded product
as ``matvec`` (JAX transposes its ``ppermute`` s), so cotangents of the values stay on each
device's pattern; a nonsymmetric reverse mode solves with ``Aᵀ``, whose blocks of rows are
assembled by routing each stored value to the owner of its column
(`jaxsolve.sharding.ShardedCsrMatrix.transpose`), with a hierarchy of its own.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
import weakref
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from jaxsolve.sharding import ShardedCsrMatrix, shard_map

from ._cache import cache_info
from ._config import AMGConfig, SolverConfig, parse_amgx_config
from ._csr_arrays import CsrStructure
from ._hierarchy import HierarchyStructure, build_structure, numeric_setup, padded_hierarchy
from ._krylov import HERMITIAN_METHODS
from ._linear_solve import service, solve_from
from ._multicolor import (MULTICOLOR_SMOOTHERS, MulticolorPadding, common_color_shape,
                          multicolor_padding)
from ._partitioned import (COARSE_PER_PART, BlockPreconditioner, amg_of, check_solver,
                           coarse_aggregates, coarse_inverse_rows, is_block_relaxation,
                           kept_bytes, kept_numbers, krylov_columns, local_matvec, precondition)
from ._report import (Reports, log_parts_grid_stats, log_timings, logged_solve_stats,
                      report_solve)
from ._setup import check_finite, is_concrete
from ._size_classes import HierarchyShape, LevelShape
from ._statistics import level_sizes
from ._structure_key import values_key
from ._status import SolveInfo, Status

_WHERE = "with a sharded A"  # the path, in the errors of _partitioned's checks


# -----------------------------------------------------------------------------
# Products and reductions (inside shard_map, on one device's arrays)


class _AxisCollectives:
    """The `Collectives` of one device inside `jax.shard_map` over a layout's mesh axis:
    halo by ``ppermute`` (the layout's `Exchange`), sums by ``psum``."""

    def __init__(self, layout, send: jax.Array, recv: jax.Array):
        self.nparts = layout.nparts
        self._layout, self._send, self._recv = layout, send, recv

    def index(self) -> jax.Array:
        return lax.axis_index(self._layout.axis_name)

    def halo(self, x: jax.Array) -> jax.Array:
        layout = self._layout
        zeros = jnp.zeros((layout.n_halo + 1,) + x.shape[1:], x.dtype)
        return layout.halo.apply(layout.axis_name, x, self._send, self._recv,
                                 jnp.concatenate([x, zeros]))

    def sum(self, array: jax.Array) -> jax.Array:
        return lax.psum(array, self._layout.axis_name)


def _local_matvec(layout, values: jax.Array, arrays, x: jax.Array, *,
                  native: bool = True) -> jax.Array:
    """`local_matvec` of one device of a layout, with its `BlockArrays`."""
    return local_matvec(_AxisCollectives(layout, arrays.send, arrays.recv), values,
                        arrays.indices, arrays.indptr, x, native=native)


def _squeeze(tree):
    """The device's own slices of arrays with a leading device axis of 1."""
    return jax.tree.map(lambda a: a[0], tree)


# -----------------------------------------------------------------------------
# Block-Jacobi AMG with a coarse space: structure (host)


class _SetupArrays(NamedTuple):
    """Per-device integer arrays of a `_BlockSetup`, each with a leading device axis.

    Attributes:
      block_positions: ``(P, Zb)`` where each diagonal-block entry sits among the device's
        stored values.
      branch: ``(P,)`` the structure each device uses.
      coarse_of_row: ``(P, m)`` each row's coarse unknown within its device (``< C``).
      coarse_rows, coarse_cols: ``(P, Z)`` each stored entry's global coarse row and
        column (``P C`` for the padding: dropped).
      multicolor: for the multicolor smoothers, per level and then for the coarsest (None
        where it is not smoothed), how each device's block pads its multicolor data to the
        common shape of all blocks'; else None.
    """

    block_positions: jax.Array
    branch: jax.Array
    coarse_of_row: jax.Array
    coarse_rows: jax.Array
    coarse_cols: jax.Array
    multicolor: tuple[MulticolorPadding | None, ...] | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class _BlockSetup:
    """The host part of the sharded preconditioner of one layout (``A``'s or ``Aᵀ``'s)."""

    structures: tuple[HierarchyStructure, ...]
    block_nnz: tuple[int, ...]
    levels: tuple[LevelShape, ...]  # the largest block's sizes
    coarsest: tuple[int, int]  # rows, nnz
    config: AMGConfig
    n_coarse: int  # C, per device
    arrays: _SetupArrays
    branch: tuple[int, ...]  # arrays.branch on the host
    positions: tuple[np.ndarray, ...]  # per device, its block's entries among its values


_SETUPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _setup_key(setup: _BlockSetup, values: jax.Array) -> str:
    """The key (:func:`._structure_key.values_key`) of ``values``, a layout's stacked
    values, for ``setup``'s structures: every device's block's, in the mesh's order, so
    one key for the whole mesh."""
    finest = setup.structures[0].arrays
    finest = finest.levels[0].a if finest.levels else finest.coarsest
    stacked = jax.device_put(values, finest.indices.sharding)  # beside the structures
    return ":".join(values_key(setup.structures[u], stacked[rank, positions])
                    for rank, (u, positions) in enumerate(zip(setup.branch, setup.positions)))


def _block_setup(layout, values: np.ndarray | None, amg: AMGConfig) -> _BlockSetup:
    """The setup of ``layout``, its structures built from ``values`` when given (host)."""
    nparts, m = layout.nparts, layout.n_owned
    keys: dict[tuple, int] = {}
    blocks, branch, positions = [], np.zeros(nparts, np.int32), []
    for rank, (start, end) in enumerate(layout.row_ranges):
        nnz, n_rows = layout.nnz[rank], end - start  # the block of its real rows
        columns = layout.local_indices[rank, :nnz]
        rows = np.repeat(np.arange(m), np.diff(
            np.append(layout.local_indptr[rank, :-1], nnz)))
        inside = np.flatnonzero(columns < m)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[inside], minlength=n_rows))])
        pattern = CsrStructure(indptr.astype(np.int32), columns[inside].astype(np.int32),
                               n_rows)
        block_values = None if values is None else np.asarray(values[rank, inside])
        key = (pattern.indptr.tobytes(), pattern.indices.tobytes(),
               None if block_values is None else block_values.tobytes())
        if key not in keys:
            keys[key] = len(blocks)
            blocks.append((pattern, block_values))
        branch[rank] = keys[key]
        positions.append(inside)
    structures = [build_structure(p, v, 1, amg) for p, v in blocks]
    depth = min(len(s.levels) for s in structures)
    if any(len(s.levels) != depth for s in structures):
        amg = dataclasses.replace(amg, max_levels=depth + 1)
        structures = [build_structure(p, v, 1, amg) for p, v in blocks]
    levels = tuple(
        LevelShape(rows=max(s.levels[i].a.n_rows for s in structures),
                    a_nnz=max(s.levels[i].a.nnz for s in structures),
                    p_nnz=max(s.levels[i].p.nnz for s in structures),
                    coarse_rows=max(s.levels[i].r.n_rows for s in structures),
                    r_nnz=max(s.levels[i].r.nnz for s in structures))
        for i in range(depth))
    coarsest = (max(s.coarsest.n_rows for s in structures),
                max(s.coarsest.nnz for s in structures))
    coarse_of_unique = [coarse_aggregates(s, COARSE_PER_PART) for s in structures]
    n_coarse = max(count for _, count in coarse_of_unique)
    coarse_of_row = np.full((nparts, m), n_coarse, np.int32)  # padding rows: none
    for rank in range(nparts):
        of_row = coarse_of_unique[branch[rank]][0]
        coarse_of_row[rank, :len(of_row)] = of_row
    coarse_rows = np.full((nparts, layout.width), nparts * n_coarse, np.int32)
    coarse_cols = coarse_rows.copy()
    owners = np.array([end for _, end in layout.row_ranges])
    for rank, plan in enumerate(layout.plans):
        nnz = layout.nnz[rank]
        columns = layout.local_indices[rank, :nnz].astype(np.int64)
        rows = np.repeat(np.arange(m), np.diff(np.append(layout.local_indptr[rank, :-1], nnz)))
        halo = plan.halo_columns
        halo_owner = np.searchsorted(owners, halo, side="right")
        halo_coarse = (halo_owner * n_coarse + coarse_of_row[
            halo_owner, halo - np.array([s for s, _ in layout.row_ranges])[halo_owner]])
        lookup = np.concatenate([rank * n_coarse + coarse_of_row[rank], halo_coarse])
        coarse_rows[rank, :nnz] = rank * n_coarse + coarse_of_row[rank, rows]
        coarse_cols[rank, :nnz] = lookup[columns]
    width = max(max(len(p) for p in positions), 1)
    block_positions = np.zeros((nparts, width), np.int32)
    for rank, p in enumerate(positions):
        block_positions[rank, :len(p)] = p
    sharding = layout.sharding()
    multicolor = None
    if amg.smoother.solver in MULTICOLOR_SMOOTHERS:
        multicolor = jax.device_put(_multicolor_paddings(structures, branch, levels, coarsest),
                                    sharding)
    arrays = _SetupArrays(*(jax.device_put(np.asarray(a, np.int32), sharding) for a in (
        block_positions, branch, coarse_of_row, coarse_rows, coarse_cols)),
        multicolor=multicolor)
    return _BlockSetup(structures=tuple(structures),
                       block_nnz=tuple(int(p.nnz) for p, _ in blocks), levels=levels,
                       coarsest=coarsest, config=amg, n_coarse=n_coarse, arrays=arrays,
                       branch=tuple(int(u) for u in branch), positions=tuple(positions))


def _multicolor_paddings(structures: list[HierarchyStructure], branch: np.ndarray,
                         levels: tuple[LevelShape, ...], coarsest: tuple[int, int]
                         ) -> tuple[MulticolorPadding | None, ...]:
    """Per level, then for the coarsest: each device's `MulticolorPadding` of its block's
    ordering to the common shape of every block's, stacked over the devices (host)."""
    paddings = []
    for i, rows in enumerate([shape.rows for shape in levels] + [coarsest[0]]):
        orderings = [s.levels[i].ordering if i < len(levels) else s.coarsest_ordering
                     for s in structures]
        if orderings[0] is None:  # the coarsest level, solved directly
            paddings.append(None)
            continue
        shape = common_color_shape(orderings)
        own = [multicolor_padding(ordering, shape, rows) for ordering in orderings]
        paddings.append(jax.tree.map(lambda *a: np.stack(a), *[own[u] for u in branch]))
    return tuple(paddings)


# -----------------------------------------------------------------------------
# Block-Jacobi AMG with a coarse space: numbers and application (inside shard_map)


def _local_setup(setup: _BlockSetup, layout, values: jax.Array,
                 arrays: _SetupArrays) -> BlockPreconditioner:
    """This device's preconditioner numbers from its stored values."""
    block_values = values[arrays.block_positions]

    def branch(u: int):
        def numbers(block_values, multicolor):
            structure = setup.structures[u]
            hierarchy = numeric_setup(structure, structure.arrays,
                                      block_values[:setup.block_nnz[u]], None)
            return padded_hierarchy(hierarchy, HierarchyShape(setup.levels, setup.coarsest),
                                    multicolor)
        return numbers

    if len(setup.structures) == 1:
        hierarchy = branch(0)(block_values, arrays.multicolor)
    else:
        hierarchy = lax.switch(arrays.branch, [branch(u) for u in range(len(setup.structures))],
                               block_values, arrays.multicolor)
    collectives = _AxisCollectives(layout, None, None)
    return BlockPreconditioner(hierarchy, coarse_inverse_rows(
        collectives, values, arrays.coarse_rows, arrays.coarse_cols, setup.n_coarse))


# -----------------------------------------------------------------------------
# The solve


@dataclasses.dataclass(frozen=True, eq=False)
class _Orientation:
    """One orientation of the system (``A`` or ``Aᵀ``) and how to get its values.

    ``numbers`` keeps, per dtype, the latest preconditioner numbers set up from concrete
    values and those values: ``{dtype: (values, numbers)}`` (`_preconditioner_numbers`).
    """

    layout: Any
    setup: _BlockSetup | None  # None: no preconditioner
    routing: Any = None  # the Exchange from A's values, for Aᵀ
    routing_arrays: tuple | None = None
    numbers: dict = dataclasses.field(default_factory=dict)


def _own_values(orientation: _Orientation, values: jax.Array, routing_arrays) -> jax.Array:
    """Inside `jax.shard_map`: this device's values of ``orientation``'s matrix from its
    values of ``A`` (routed to ``Aᵀ``'s slots for the transpose)."""
    if orientation.routing is None:
        return values
    layout = orientation.layout
    send, recv = _squeeze(routing_arrays)
    return orientation.routing.apply(layout.axis_name, values, send, recv,
                                     jnp.zeros(layout.width, values.dtype))


def _numbers_body(orientation: _Orientation):
    """The per-device numeric setup of ``orientation``'s preconditioner."""
    def body(values, arrays, setup_arrays, routing_arrays):
        values, setup_arrays = _squeeze((values, setup_arrays))
        values = _own_values(orientation, values, routing_arrays)
        numbers = _local_setup(orientation.setup, orientation.layout, values, setup_arrays)
        return jax.tree.map(lambda leaf: leaf[None], numbers)

    return body


@functools.lru_cache(maxsize=64)
def _compiled_numbers(orientation: _Orientation):
    spec = PartitionSpec(orientation.layout.axis_name)
    return jax.jit(shard_map(_numbers_body(orientation), orientation.layout.mesh,
                             (spec, spec, spec, spec), spec))


def _setup_numbers(orientation: _Orientation, values: jax.Array) -> BlockPreconditioner:
    """The stacked preconditioner numbers for concrete ``values``, computed now, even while
    a caller's jit traces (run as a compiled executable, as `numeric_setup_now` does)."""
    arguments = (values, orientation.layout.arrays, orientation.setup.arrays,
                 orientation.routing_arrays)
    return _compiled_numbers(orientation).lower(*arguments).compile()(*arguments)


def _preconditioner_numbers(orientation: _Orientation, values: jax.Array,
                            reuse_setup: bool) -> BlockPreconditioner | None:
    """`kept_numbers` of ``orientation``: None without a preconditioner."""
    if orientation.setup is None:
        return None
    return kept_numbers(orientation.numbers, values, reuse_setup,
                        functools.partial(_setup_numbers, orientation))


def _solve_body(config: SolverConfig, orientation: _Orientation):
    """The per-device solve of ``orientation``'s system for the columns of ``rhs``, with
    the preconditioner's numbers given (stacked) or, when None, set up here."""
    layout = orientation.layout

    def body(values, arrays, setup_arrays, routing_arrays, numbers, rhs):
        values, arrays, setup_arrays = _squeeze((values, arrays, setup_arrays))
        values = _own_values(orientation, values, routing_arrays)

        def matvec(x):
            return _local_matvec(layout, values, arrays, x)

        collectives = _AxisCollectives(layout, arrays.send, arrays.recv)
        apply = None
        if orientation.setup is not None:
            if numbers is None:
                numbers = _local_setup(orientation.setup, layout, values, setup_arrays)
            else:
                numbers = _squeeze(numbers)
            apply = precondition(collectives, orientation.setup.n_coarse, numbers,
                                 setup_arrays.coarse_of_row, matvec)
        x, info = krylov_columns(config, collectives, matvec, apply, rhs)
        return x, jax.tree.map(lambda leaf: leaf[None], info)

    return body


def _service(config: SolverConfig, orientation: _Orientation, own_numbers=None):
    """The solve service of ``orientation`` (:func:`._linear_solve.service`), its operator
    ``(A's values, A's preconditioner numbers or None)``."""
    compiled = _compiled_solve(config, orientation)

    def run(values, numbers, rhs):
        arrays = orientation.layout.arrays  # for Aᵀ its own; its values are routed from A's
        setup_arrays = None if orientation.setup is None else orientation.setup.arrays
        return compiled(values, arrays, setup_arrays, orientation.routing_arrays, numbers, rhs)

    return service(run, own_numbers)


@functools.lru_cache(maxsize=64)
def _compiled_solve(config: SolverConfig, orientation: _Orientation):
    """The jitted ``shard_map`` of the per-device solve (one per configuration and
    orientation, so repeated solves reuse the compiled program); its ``info`` is device 0's
    (every device's is the same). With ``config.print_solve_stats`` (a traced solve's:
    `split_reports`) the program logs AmgX's table of it, once, by a host callback outside
    the ``shard_map``."""
    spec = PartitionSpec(orientation.layout.axis_name)
    solve = shard_map(_solve_body(config, orientation), orientation.layout.mesh,
                      (spec,) * 6, (spec, spec))

    def run(*arguments):
        x, info = solve(*arguments)
        info = jax.tree.map(lambda leaf: leaf[0], info)
        if config.print_solve_stats:
            logged_solve_stats(config.solver, info)
        return x, info

    return jax.jit(run)


@functools.lru_cache(maxsize=64)
def _matvec(layout):
    """``(values, x) ↦ A x`` for a layout, jitted (the index arrays are the layout's)."""
    spec = PartitionSpec(layout.axis_name)

    def body(values, arrays, x):
        return _local_matvec(layout, values[0], _squeeze(arrays), x, native=False)

    product = jax.jit(shard_map(body, layout.mesh, (spec, spec, spec), spec))

    def matvec(values, x):
        return product(values, layout.arrays, x)

    return matvec


def _orientations(layout, values: jax.Array, amg: AMGConfig | None, hermitian: bool,
                  latest: bool) -> tuple[_Orientation, _Orientation | None]:
    """``A``'s orientation and, unless ``hermitian``, ``Aᵀ``'s, cached per layout,
    configuration and values' key, as the single-device solve's structures
    (:mod:`._cache`): concrete ``values`` (``A``'s stacked values) get the structures built
    for them, or for values with the same key (:mod:`._structure_key`, over every device's
    block and both orientations); traced ones, and ``latest`` (``reuse_setup``, a nonzero
    ``structure_reuse_levels``), the most recently used, built from the pattern (or the
    concrete values) when there is none.  A structure of one level (a relaxation's, or no
    preconditioner) follows the pattern alone.  At most `cache_info`'s ``maxsize`` (and at
    least one) are kept per layout and configuration.
    """
    entries = _SETUPS.setdefault(layout, {}).setdefault(
        ("orientations", amg, hermitian), collections.OrderedDict())
    keyed = is_concrete(values) and amg is not None and amg.max_levels > 1
    keys: list[str] = []  # the values' key, computed once for this call

    def key_of_values(orientations) -> str:
        if not keys:
            with jax.ensure_compile_time_eval():  # concrete, also while a caller's jit traces
                forward, transposed = orientations
                key = _setup_key(forward.setup, values)
                if transposed is not None:
                    key += "ᵀ" + _setup_key(transposed.setup,
                                            _transposed_values(layout, values))
            keys.append(key)
        return keys[0]

    wanted = next(reversed(entries), None)  # the most recently used
    if entries and keyed and not latest:
        wanted = key_of_values(entries[wanted])
    if wanted not in entries:
        with jax.ensure_compile_time_eval():  # host setup, also while a jit traces
            built = _new_orientations(layout, values if is_concrete(values) else None, amg,
                                      hermitian)
        wanted = key_of_values(built) if keyed else None
        entries[wanted] = built
        while len(entries) > max(cache_info().maxsize, 1):
            entries.popitem(last=False)
    entries.move_to_end(wanted)
    return entries[wanted]


def _new_orientations(layout, values: jax.Array | None, amg: AMGConfig | None, hermitian: bool
                      ) -> tuple[_Orientation, _Orientation | None]:
    if amg is None:
        values = None

    def on_host(values):
        return None if values is None else np.asarray(jax.device_get(values))

    forward = _Orientation(layout=layout,
                           setup=None if amg is None else _block_setup(layout, on_host(values),
                                                                       amg))
    transposed = None
    if not hermitian:
        t_layout, routing = layout.transposed
        t_setup = None
        if amg is not None:
            t_values = None if values is None else _transposed_values(layout, values)
            t_setup = _block_setup(t_layout, on_host(t_values), amg)
        transposed = _Orientation(layout=t_layout, setup=t_setup,
                                  routing=routing, routing_arrays=_routing_arrays(layout, routing))
    return forward, transposed


def _routing_arrays(layout, routing) -> tuple[jax.Array, jax.Array]:
    cache = _SETUPS.setdefault(layout, {})
    if "routing" not in cache:
        sharding = layout.sharding()
        with jax.ensure_compile_time_eval():
            cache["routing"] = tuple(jax.device_put(a, sharding) for a in (
                routing.send_positions, routing.recv_positions))
    return cache["routing"]


def _transposed_values(layout, values: jax.Array) -> jax.Array:
    """``Aᵀ``'s stacked values, routed from ``A``'s (traceable)."""
    _, routing = layout.transposed
    return _compiled_routing(layout)(values, *_routing_arrays(layout, routing))


@functools.lru_cache(maxsize=64)
def _compiled_routing(layout):
    t_layout, routing = layout.transposed
    spec = PartitionSpec(layout.axis_name)

    def body(values, send, recv):
        return routing.apply(layout.axis_name, values[0], send[0], recv[0],
                             jnp.zeros(t_layout.width, values.dtype))[None]

    return jax.jit(shard_map(body, layout.mesh, (spec, spec, spec), spec))


def _log_grid_stats(solver: str, A: ShardedCsrMatrix, forward: _Orientation,
                    numbers: BlockPreconditioner | None) -> None:
    """AmgX's ``print_grid_stats`` of a setup from concrete values: every device's block
    hierarchy, summed level by level (`log_parts_grid_stats`)."""
    setup = forward.setup
    if setup is None or numbers is None:
        return
    branch = np.asarray(jax.device_get(setup.arrays.branch))
    parts = [level_sizes(setup.structures[u]) for u in branch]
    nnz = int(np.sum(A.layout.nnz))
    matrix_bytes = nnz * (np.dtype(A.dtype).itemsize + 4) + 4 * (A.shape[0] + 1)
    log_parts_grid_stats(solver, parts, setup.n_coarse, kept_bytes(numbers), matrix_bytes)


def _checked_vector(name: str, v: Any, A: ShardedCsrMatrix) -> jax.Array:
    """``v`` in the padded layout of A's rows, placed on A's mesh; clear errors otherwise.

    ``v`` has A's ``n`` rows (placed anywhere), or when the devices do not divide ``n``,
    it may already be in the padded layout (`ShardedCsrMatrix.shard_vector`), its padding
    entries then set to zero.
    """
    n, padded = A.shape[0], A.layout.padded_size
    if isinstance(v, jax.Array) and is_concrete(v):
        sharding = v.sharding
        if isinstance(sharding, NamedSharding) and sharding.mesh != A.mesh:
            raise ValueError(
                f"solve: {name} is sharded over another mesh ({_describe_mesh(sharding.mesh)}) "
                f"than A ({_describe_mesh(A.mesh)}); place it with "
                f"jax.device_put({name}, A.sharding), NamedSharding(mesh, P({A.axis_name!r})) "
                "on A's mesh.")
    v = jnp.asarray(v) if not isinstance(v, jax.Array) else v
    if v.ndim not in (1, 2) or v.shape[0] not in (n, padded):
        layouts = f"({n},) or ({n}, k)"
        if padded != n:
            layouts += (f", or ({padded},) or ({padded}, k) in the padded layout of its "
                        f"{A.layout.nparts} blocks of {A.layout.n_owned} rows "
                        f"(A.shard_vector({name}))")
        raise ValueError(f"solve: {name} must have shape {layouts} to match the sharded A "
                         f"{A.shape}, got {v.shape}.")
    if v.shape[0] == n:
        return A.shard_vector(v)
    return _padding_zeroed(A, jax.device_put(v, A.sharding) if is_concrete(v) else v)


def _padding_zeroed(A: ShardedCsrMatrix, v: jax.Array) -> jax.Array:
    """``v`` in the padded layout with zeros in its padding entries."""
    real = A.layout.real_rows.reshape((-1,) + (1,) * (v.ndim - 1))
    return jnp.where(real, v, jnp.zeros((), v.dtype))


def _describe_mesh(mesh) -> str:
    return (f"axes {dict(mesh.shape)}, devices "
            f"{[d.id for d in np.asarray(mesh.devices).ravel()]}")


def solve_sharded(
    A: ShardedCsrMatrix,
    b: Any,
    x0: Any,
    config: SolverConfig,
    reports: Reports,
    *,
    reuse_setup: bool = False,
    derivative: Literal["implicit", "adjoint"] = "implicit",
    check: bool = True,
) -> tuple[jax.Array, SolveInfo]:
    """`jaxsolve.sparse.solve` for a `jaxsolve.sharding.ShardedCsrMatrix` (see the module),
    its configuration parsed and split from its ``reports`` by `solve` (`split_reports`):
    each is logged once per solve, the grid table of the blocks' hierarchies summed over the
    devices.

    With `check`, a solve of concrete inputs that did not succeed looks for NaN or Inf in
    ``A``, ``b`` and ``x0`` and raises naming it (a successful one reads its status only,
    as the single-device solve does, and makes no pass over the inputs).
    """
    check_solver(config, _WHERE)
    amg = amg_of(config)
    given = jnp.shape(b)  # (n, ...) or the padded layout's (P m, ...)
    if x0 is not None and jnp.shape(x0) != given:
        raise ValueError(f"solve: x0 must have b's shape {given}, got {jnp.shape(x0)}.")
    b = _checked_vector("b", b, A)
    if not jnp.issubdtype(b.dtype, jnp.inexact):
        b = b.astype(A.dtype)
    with jax.numpy_dtype_promotion("standard"):
        dtype = jnp.result_type(A.values, b)
    values, b = A.values.astype(dtype), b.astype(dtype)
    layout = A.layout
    hermitian = config.solver in HERMITIAN_METHODS
    setup_start = time.perf_counter()
    forward, transposed = _orientations(
        layout, values, amg, hermitian,
        latest=reuse_setup or (amg is not None and amg.structure_reuse_levels > 0))
    numbers = _preconditioner_numbers(forward, values, reuse_setup)
    if reports.timings:
        jax.block_until_ready([leaf for leaf in jax.tree.leaves(numbers) if is_concrete(leaf)])
    setup_seconds = time.perf_counter() - setup_start
    if reports.grid_stats and amg is not None and not is_block_relaxation(amg):  # AMG's
        _log_grid_stats(reports.solver, A, forward, numbers)
    product = _matvec(layout)

    def matvec(operator, x):
        return product(operator[0], x)

    # The numbers of the preconditioner travel with the values as the operator (arguments
    # of the compiled solve, not constants); only the values are differentiated. The index
    # arrays are the layout's constants.
    operator = (values, numbers)
    transpose_service = symmetrize = None
    if hermitian:
        t_layout, _ = layout.transposed
        if not (np.array_equal(t_layout.global_indptr, layout.global_indptr)
                and np.array_equal(t_layout.global_indices, layout.global_indices)):
            raise ValueError("solve: CG on a sharded A needs a structurally symmetric pattern "
                             "(its derivatives average a_ij and a_ji); store both.")

        def symmetrize(operator):
            values, numbers = operator
            return (values + _transposed_values(layout, values)) / 2, numbers
    else:
        transpose_service = _service(config, transposed, functools.partial(
            _preconditioner_numbers, transposed, values, reuse_setup))
    if x0 is not None:
        x0 = lax.stop_gradient(_checked_vector("x0", x0, A).astype(dtype))
    # A traced solve's table is logged by its program; a concrete one's when it returns.
    concrete = all(map(is_concrete, jax.tree.leaves((operator, b, x0))))
    forward_config = config
    if reports.solve_stats and not concrete:
        forward_config = dataclasses.replace(config, print_solve_stats=True)
    solve_start = time.perf_counter()
    x, info = solve_from(operator, b, x0, matvec=matvec, solve=_service(forward_config, forward),
                         transpose_solve=transpose_service, hermitian=hermitian,
                         symmetrize=symmetrize, derivative=derivative)
    info = report_solve(reports, info, logged_in_program=not concrete)
    if reports.timings:
        log_timings(reports.solver, setup_seconds, solve_start, x, info)
    inputs = {"A": values, "b": b, "x0": x0}
    if check and all(map(is_concrete, jax.tree.leaves((inputs, info.status)))) and (
            np.any(np.asarray(info.status) != Status.SUCCESS)):
        check_finite("solve", inputs)
    if layout.padded_size == layout.shape[0]:
        return x, info
    if given[0] == layout.shape[0]:  # b of the n rows: x too
        return A.global_vector(x), info
    return _padding_zeroed(A, x), info


# -----------------------------------------------------------------------------
# Communication counts


_PER_ITERATION = {  # (products, preconditioner applications, scalar reductions) per iteration
    "CG": (1, 1, 3), "PCG": (1, 1, 3), "BICGSTAB": (2, 2, 6), "PBICGSTAB": (2, 2, 6),
}


def communication_per_iteration(A: ShardedCsrMatrix, config: Any = None) -> dict[str, int]:
    """Bytes one device exchanges per Krylov iteration of a sharded solve, from the plans.

    Counts, for the method and preconditioner of `config` (as `solve` runs them): the halo
    of every product ``A x`` (the preconditioner does four besides the method's own), the
    coarse residuals of the coarse space (two ``psum`` s of ``P × C`` values per
    application) and the scalar ``psum`` s of the inner products. A reduction is counted by
    its payload, the size of the array reduced (a ring all-reduce moves about twice that
    per device). GMRES(m) is counted per Arnoldi step, at the average ``m / 2 + 2``
    reductions of a restart cycle.

    Returns:
      ``{"halo": ..., "halo_padded": ..., "reductions": ..., "total": ...}`` in bytes per
      device and iteration: ``halo`` what the largest sender sends (exact), ``halo_padded``
      with the padding of the ``ppermute`` messages, ``reductions`` the payloads (none on a
      single device), and ``total = halo_padded + reductions``.

    Examples:
      On one device nothing is exchanged (``tools/bench/sparse_sharded.py`` prints the
      table for 1, 2, 4 and 8 devices):

      >>> import jax
      >>> from jaxsolve import sharding, sparse
      >>> A = sparse.matrices.poisson3d_matrix(8)
      >>> A_sharded = sharding.shard_rows(A, sharding.row_mesh(devices=jax.devices()[:1]))
      >>> sparse.communication_per_iteration(A_sharded, {"solver": "PCG"})
      {'halo': 0, 'halo_padded': 0, 'reductions': 0, 'total': 0}
      >>> x, info = sparse.solve(A_sharded, sparse.matrices.rhs_ones(512))
      >>> sparse.Status(int(info.status)).name
      'SUCCESS'
    """
    config = parse_amgx_config(config)
    if config.solver in _PER_ITERATION:
        products, applications, scalars = _PER_ITERATION[config.solver]
    else:
        restart = config.gmres_n_restart or 20
        products, applications, scalars = 1, 1, restart // 2 + 2
    itemsize = np.dtype(A.dtype).itemsize
    halo = A.bytes_per_matvec()
    amg = amg_of(config)
    coarse = 0
    if amg is not None:
        products += 4 * applications  # Jacobi twice, the two-level method twice
        setup = _block_setup(A.layout, np.asarray(jax.device_get(A.values)), amg)
        coarse = 2 * applications * A.layout.nparts * setup.n_coarse * itemsize
    if A.layout.nparts == 1:
        scalars, coarse = 0, 0
    halo_bytes = products * halo["sent"]
    padded = products * halo["padded"]
    reductions = scalars * itemsize + coarse
    return {"halo": halo_bytes, "halo_padded": padded, "reductions": reductions,
            "total": padded + reductions}
