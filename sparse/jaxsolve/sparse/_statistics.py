"""Hierarchy statistics: what the AMG setup built and what it keeps in memory.

:func:`describe` answers the questions every AMG user asks of a hierarchy — how many
levels, how many rows and nonzeros on each, how much work a cycle does relative to one
product with ``A`` (*operator complexity* ``Σ nnz(A_ℓ) / nnz(A)``) and how much memory
the solver keeps, part by part.  ``print_grid_stats`` in an AmgX configuration prints the
same table when a solve sets up a hierarchy from concrete values.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from . import _blocks, _device_setup
from ._config import parse_amgx_config
from ._default_method import as_solved
from ._device_setup import DeviceStructure
from ._hierarchy import Hierarchy, HierarchyStructure
from ._native_library import host_threads
from ._setup import System, amg_config, checked_inputs, numeric_setup_now


@dataclasses.dataclass(frozen=True)
class HierarchyStatistics:
    """The shape of an AMG hierarchy and the memory it keeps.

    Attributes:
      rows: rows of each level's operator, finest first.
      nonzeros: stored entries of each level's operator.
      grid_complexity: ``Σ rows_ℓ / rows_0``.
      operator_complexity: ``Σ nonzeros_ℓ / nonzeros_0``: a cycle's cost in units of one
        product with ``A``, roughly.
      bytes_kept: device bytes the setup keeps, by part: ``"coarse operators"`` (values
        and indices of ``A_1 … A_L``), ``"transfer operators"`` (``P`` and ``R``),
        ``"interpolation plans"`` (classical AMG: where ``A``'s values enter ``P``'s
        weights, which the numeric re-setup reads), ``"product plans"`` (what else it reads
        besides the operators: the patterns of the products ``A P``, the map from ``P``'s
        values to ``R``'s, the aggregates, diagonal positions, where ``T`` sits in ``P``),
        ``"smoothers"``, ``"coarsest inverse"``, ``"finest pattern"`` (the device copy of
        ``A``'s own index arrays, padded to the finest level's size class) and, where the
        hierarchy's precision is lower than ``A``'s, ``"finest values"``: ``A``'s values
        rounded to it, padded with zeros to that class. Each array counts once; ``A``'s
        own values, which a hierarchy of ``A``'s precision shares (unpadded: a solve pads
        them), do not count.
      matrix_bytes: bytes of ``A`` itself in CSR (values, int32 indices and row pointers),
        the yardstick for ``bytes_kept``.
      setup_seconds: the setup's time by phase: the structure's on the host when it was
        built (``"aggregation"``, ``"sparse products"``, ``"to the device"``) and, from
        :func:`describe`, one ``"numeric setup"`` on the device (compiled already).
      block_dims: unknowns per node of each level (all 1 for a scalar system; see
        :func:`solve`'s ``block_dim``), shown as a column when one is larger.
      colors: the colors of each level's multicolor smoother ordering (``MULTICOLOR_GS``,
        ``MULTICOLOR_DILU``: a distance-1 coloring, one sweep step per color), 0 for a level
        without one (another smoother, or the coarsest solved directly); shown as a column
        when a level has one.
      setup_threads: the most host threads the structure's setup kernels split their work
        over: the CPUs this process may run on, at most its cgroup's CPU quota (in a
        container, often far fewer than the host's CPUs).
    """

    rows: tuple[int, ...]
    nonzeros: tuple[int, ...]
    grid_complexity: float
    operator_complexity: float
    bytes_kept: dict[str, int]
    matrix_bytes: int
    setup_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    block_dims: tuple[int, ...] = ()
    colors: tuple[int, ...] = ()
    setup_threads: int | None = None

    def __str__(self) -> str:
        blocks = max(self.block_dims, default=1) > 1
        colored = any(self.colors)
        lines = ["AMG hierarchy", " level        rows      nonzeros  nnz/row"
                 + ("  unknowns/node" if blocks else "") + ("  colors" if colored else "")]
        for level, (rows, nonzeros) in enumerate(zip(self.rows, self.nonzeros, strict=True)):
            lines.append(f" {level:5d} {rows:11d} {nonzeros:13d} {nonzeros / max(rows, 1):8.1f}"
                         + (f" {self.block_dims[level]:14d}" if blocks else "")
                         + (f" {self.colors[level] or '–':>7}" if colored else ""))
        lines.append(f" grid complexity {self.grid_complexity:.3f},"
                     f" operator complexity {self.operator_complexity:.3f}")
        total = sum(self.bytes_kept.values())
        lines.append(f" memory kept: {total / 2**20:.1f} MiB ="
                     f" {total / self.matrix_bytes:.2f} × the matrix's {self.matrix_bytes / 2**20:.1f} MiB")
        lines.extend(f"   {part:20s} {size / 2**20:10.1f} MiB"
                     for part, size in self.bytes_kept.items())
        if self.setup_seconds:
            lines.append(" setup time: " + ", ".join(
                f"{phase} {seconds * 1e3:.1f} ms" for phase, seconds in self.setup_seconds.items())
                + ("" if self.setup_threads is None else
                   f"; host setup on {self.setup_threads} threads"))
        return "\n".join(lines)


def describe(A: Any, config: Any = None, *,
             near_nullspace: jax.Array | None = None,
             block_dim: int | None = None) -> HierarchyStatistics:
    """The statistics of the AMG hierarchy that :func:`solve` builds for ``A``.

    Sets the hierarchy up (or takes it from the setup cache) from ``A``'s concrete values.

    Args:
      A: the ``(n, n)`` matrix, with concrete values.
      config: the solver configuration (whose AMG, as solver or preconditioner, is
        described); None for the default.
      near_nullspace, block_dim: as for :func:`solve`.

    Returns:
      A :class:`HierarchyStatistics`; ``print`` it for AmgX's ``print_grid_stats`` table.

    Raises:
      ValueError: if the configuration uses no AMG, or as :func:`solve` for bad input.

    Examples:
      >>> from jaxsolve import sparse
      >>> stats = sparse.describe(sparse.matrices.poisson_matrix(64))
      >>> stats.rows[0], stats.nonzeros[0], len(stats.rows) > 2
      (4096, 20224, True)
    """
    config = parse_amgx_config(config)
    if amg_config(config) is None:
        raise ValueError(f"describe: the configuration (solver {config.solver!r}) uses no AMG.")
    block_dim = _blocks.block_dim_of("describe", A, block_dim)
    matrix, _, _, near_nullspace = checked_inputs(
        "describe", A, np.zeros(np.shape(A)[0], np.float32), None, near_nullspace, True)
    # the configuration as solve runs it on this dtype, whose hierarchy the cache keeps
    config = as_solved("describe", config, matrix, block_dim)
    system = System.for_matrix(matrix, config, near_nullspace, reuse_setup=False, check=True)
    structure, numbers = system.setup
    if numbers is None:
        raise ValueError("describe: A's values must be concrete (call it outside jax.jit).")
    start = time.perf_counter()  # once more, compiled: the time a re-setup takes
    jax.block_until_ready(
        _device_setup.numbers_now(structure, system.padded(
            matrix.values, structure.finest.indices.shape[0]))
        if isinstance(structure, DeviceStructure)
        else numeric_setup_now(structure, matrix.values, near_nullspace))
    numeric_seconds = time.perf_counter() - start
    return statistics(structure, numbers, matrix.values, numeric_seconds)


def level_sizes(structure: HierarchyStructure | DeviceStructure
                ) -> tuple[tuple[int, int], ...]:
    """``(rows, nonzeros)`` of each level's operator, finest first, the coarsest last."""
    if isinstance(structure, DeviceStructure):
        return structure.sizes
    patterns = [level.a for level in structure.levels] + [structure.coarsest]
    return tuple((pattern.n_rows, pattern.nnz) for pattern in patterns)


def parts_statistics(parts: Sequence[Sequence[tuple[int, int]]], bytes_kept: dict[str, int],
                     matrix_bytes: int) -> HierarchyStatistics:
    """The :class:`HierarchyStatistics` of a distributed solve's block-Jacobi AMG.

    Args:
      parts: per part (device or MPI rank), the :func:`level_sizes` of the hierarchy of
        its diagonal block; they are summed level by level (a part with fewer levels adds
        nothing to the deeper ones).
      bytes_kept: device bytes the preconditioner keeps, by part, over all parts.
      matrix_bytes: bytes of the whole ``A`` in CSR.

    Examples:
      >>> stats = parts_statistics([((100, 460), (12, 80)), ((100, 460), (13, 85))],
      ...                          {"block hierarchies": 9000}, 4000)
      >>> stats.rows, stats.nonzeros, round(stats.operator_complexity, 3)
      ((200, 25), (920, 165), 1.179)
    """
    depth = max(len(levels) for levels in parts)
    rows = tuple(sum(levels[i][0] for levels in parts if i < len(levels)) for i in range(depth))
    nonzeros = tuple(sum(levels[i][1] for levels in parts if i < len(levels))
                     for i in range(depth))
    return HierarchyStatistics(
        rows=rows, nonzeros=nonzeros, grid_complexity=sum(rows) / rows[0],
        operator_complexity=sum(nonzeros) / nonzeros[0], bytes_kept=dict(bytes_kept),
        matrix_bytes=matrix_bytes)


def statistics(structure: HierarchyStructure | DeviceStructure, numbers: Hierarchy,
               values: jax.Array, numeric_seconds: float | None = None) -> HierarchyStatistics:
    """The :class:`HierarchyStatistics` of a hierarchy built for a matrix of ``values``
    (and a numeric setup's time): the hierarchy's finest values count where they are not
    ``values`` themselves."""
    rows, nonzeros = (tuple(column) for column in zip(*level_sizes(structure), strict=True))
    counted: set[int] = {id(values)}  # the user's, shared

    def size(*trees: Any) -> int:
        total = 0
        for leaf in jax.tree.leaves(trees):
            if id(leaf) not in counted:
                counted.add(id(leaf))
                total += leaf.nbytes
        return total

    arrays = structure.arrays
    finest = arrays.levels[0].a if arrays.levels else arrays.coarsest
    finest_values = numbers.finest.values
    parts = {
        # the structure's, and the kept numbers' where they are not the same
        "finest pattern": size(finest.indices, finest.indptr, numbers.finest.indices,
                               numbers.finest.indptr),
        "finest values": size(finest_values),  # a rounded copy, or A's own
        "coarse operators": size([level.a for level in numbers.levels[1:]],
                                 numbers.coarsest.a),
        "transfer operators": size([(level.p, level.r) for level in numbers.levels]),
        "smoothers": size([level.smoother for level in numbers.levels],
                          numbers.coarsest.smoother),
        "coarsest inverse": size(numbers.coarsest.inverse),
    }
    device = isinstance(structure, DeviceStructure)  # scalar, no plans, no coloring
    interpolations = [None if device else level.interpolation
                      for level in structure.arrays.levels]
    if any(interpolation is not None for interpolation in interpolations):
        parts["interpolation plans"] = size(interpolations)
    parts["product plans"] = size(  # and a device structure's solve's diagonal and key's arrays
        structure.arrays, (structure.solve_diagonal, structure.key_view,
                           structure.wide_entries) if device else None)
    if not parts["finest values"]:
        del parts["finest values"]
    return HierarchyStatistics(
        rows=rows, nonzeros=nonzeros,
        grid_complexity=sum(rows) / rows[0], operator_complexity=sum(nonzeros) / nonzeros[0],
        bytes_kept=parts,
        matrix_bytes=nonzeros[0] * (values.dtype.itemsize + 4) + 4 * (rows[0] + 1),
        setup_seconds={**structure.setup_seconds, **(
            {} if numeric_seconds is None else {"numeric setup": numeric_seconds})},
        block_dims=(1,) * len(rows) if device
        else tuple(level.block_dim for level in structure.levels)
        + (structure.coarsest_block_dim,),
        colors=(0,) * len(rows) if device
        else tuple(0 if ordering is None else ordering.n_colors for ordering in
                   [level.ordering for level in structure.levels]
                   + [structure.coarsest_ordering]),
        setup_threads=host_threads(),
    )
