"""The 2D block-cyclic distribution of a matrix: `BlockCyclicPlan` and `numroc`.

Everything here is host-side integer arithmetic on Python ints and NumPy arrays; nothing touches
JAX. The index maps are written once, as the private one-dimensional functions `_to_cyclic` and
`_to_global`, which use only `//`, `%`, `*` and `+` so that they work unchanged on NumPy and on
JAX arrays.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
import numpy.typing as npt

GridOrder = Literal["row", "column"]
"""How ranks are laid over the process grid, as `cusolverMpGridMapping_t`: ``"row"`` is
``CUSOLVERMP_GRID_MAPPING_ROW_MAJOR`` (rank = p * grid_cols + q), ``"column"`` is
``CUSOLVERMP_GRID_MAPPING_COL_MAJOR`` (rank = q * grid_rows + p)."""

_GRID_ORDERS = ("row", "column")

_FIELD_MEANINGS = {
    "m": "the number of rows of the global matrix",
    "n": "the number of columns of the global matrix",
    "tile": "the side T of the square tiles, MB = NB = T",
    "grid_rows": "the number of process rows P_r",
    "grid_cols": "the number of process columns P_c",
}

Index = int | npt.NDArray[np.integer]
"""A Python int, or a NumPy integer array of indices (the maps are elementwise and broadcast)."""


def numroc(n: int, nb: int, iproc: int, isrcproc: int, nprocs: int) -> int:
    """Number of rows (or columns) of a block-cyclically distributed dimension on one process.

    Exactly ScaLAPACK's ``NUMROC`` ("NUMber of Rows Or Columns"), with 0-based process indices. A
    dimension of length `n` is cut into blocks of `nb`; block ``b`` belongs to process
    ``(isrcproc + b) % nprocs``; the last block may be partial.

    Args:
      n: length of the distributed dimension, ``n >= 0``.
      nb: block size, ``nb >= 1``.
      iproc: the process asked about, ``0 <= iproc < nprocs``.
      isrcproc: the process that owns the first block, ``0 <= isrcproc < nprocs``.
      nprocs: number of processes the dimension is distributed over, ``nprocs >= 1``.

    Returns:
      How many of the `n` indices process `iproc` owns.

    Raises:
      ValueError: if an argument is out of the ranges above.

    Examples:
      Ten rows in blocks of 3 over 2 processes: blocks {0, 1, 2}, {6, 7, 8} go to process 0 and
      {3, 4, 5}, {9} to process 1.

      >>> from jaxsolve.layout import numroc
      >>> numroc(10, 3, 0, 0, 2), numroc(10, 3, 1, 0, 2)
      (6, 4)
      >>> numroc(10, 3, 0, 1, 2)  # first block on process 1
      4
    """
    for name, value, low in (("n", n, 0), ("nb", nb, 1), ("nprocs", nprocs, 1)):
        _check_int("numroc", name, value, low=low)
    for name, value in (("iproc", iproc), ("isrcproc", isrcproc)):
        _check_int("numroc", name, value, low=0)
        if value >= nprocs:
            raise ValueError(
                f"numroc: {name}={value} is not a process of the nprocs={nprocs} processes; "
                f"pass 0 <= {name} < nprocs."
            )
    mydist = (nprocs + iproc - isrcproc) % nprocs
    nblocks, partial = divmod(n, nb)
    count = (nblocks // nprocs) * nb
    extra_blocks = nblocks % nprocs
    if mydist < extra_blocks:
        count += nb
    elif mydist == extra_blocks:
        count += partial
    return count


@dataclasses.dataclass(frozen=True)
class BlockCyclicPlan:
    """A 2D block-cyclic distribution of an ``(m, n)`` matrix, in ScaLAPACK/cuSOLVERMp conventions.

    The matrix is cut into square ``tile`` × ``tile`` tiles (ScaLAPACK's ``MB = NB``). Tile
    ``(I, J)`` is owned by process ``(I % grid_rows, J % grid_cols)`` of the ``grid_rows`` ×
    ``grid_cols`` process grid (source process ``(0, 0)``), where it is local tile
    ``(I // grid_rows, J // grid_cols)``. So the global element ``(i, j)`` lives on process
    ``p = (i // tile) % grid_rows``, ``q = (j // tile) % grid_cols``, at local index

        ``li = (i // tile // grid_rows) * tile + i % tile``,
        ``lj = (j // tile // grid_cols) * tile + j % tile``.

    Padding: the plan pads the matrix to ``padded_shape = (m_pad, n_pad)``, with
    ``m_pad = ceil(m / (tile * grid_rows)) * tile * grid_rows`` (likewise ``n_pad``), so that every
    process holds the same whole-tile local matrix, of
    ``local_shape = (m_pad // grid_rows, n_pad // grid_cols)``. Local matrices are stored
    column-major with leading dimension ``lld = local_shape[0]``. That storage is also a valid
    ScaLAPACK local array for the unpadded matrix: the descriptor ``(m, n, tile, tile, 0, 0, lld)``
    addresses the same entries, since ``numroc(m, tile, p, 0, grid_rows) <= lld`` and the local
    index of a global element does not depend on ``m``.

    The grid order only says which rank (NCCL / MPI) plays process ``(p, q)``; it moves no data.

    Attributes:
      m: rows of the global matrix, ``m >= 1``.
      n: columns of the global matrix, ``n >= 1``.
      tile: side T of the square tiles, ``tile >= 1`` (cuSOLVERMp: ``MB = NB = tile``).
      grid_rows: process rows P_r, ``>= 1``.
      grid_cols: process columns P_c, ``>= 1``.
      order: ``"row"`` (rank = p * grid_cols + q) or ``"column"`` (rank = q * grid_rows + p), as
        ``cusolverMpGridMapping_t``.

    Raises:
      TypeError: if a size is not an integer.
      ValueError: if a size is below 1 or `order` is neither ``"row"`` nor ``"column"``.

    Examples:
      >>> from jaxsolve.layout import BlockCyclicPlan
      >>> plan = BlockCyclicPlan(m=10, n=7, tile=2, grid_rows=2, grid_cols=2)
      >>> plan.padded_shape, plan.local_shape, plan.lld, plan.local_tiles
      ((12, 8), (6, 4), 6, (3, 2))
      >>> plan.to_local(5, 3)  # element (5, 3) is in tile (2, 1): process (0, 1), local (3, 1)
      (0, 1, 3, 1)
      >>> plan.to_global(0, 1, 3, 1)
      (5, 3)
      >>> plan.rank(0, 1), BlockCyclicPlan(10, 7, 2, 2, 2, order="column").rank(0, 1)
      (1, 2)
    """

    m: int
    n: int
    tile: int
    grid_rows: int
    grid_cols: int
    order: GridOrder = "row"

    def __post_init__(self) -> None:
        for name, meaning in _FIELD_MEANINGS.items():
            value = getattr(self, name)
            _check_int("BlockCyclicPlan", name, value, low=1, meaning=meaning)
            object.__setattr__(self, name, int(value))
        if self.order not in _GRID_ORDERS:
            raise ValueError(
                f"BlockCyclicPlan: order={self.order!r} is not a grid order; pass 'row' "
                "(rank = p * grid_cols + q) or 'column' (rank = q * grid_rows + p)."
            )

    @property
    def grid_shape(self) -> tuple[int, int]:
        """``(grid_rows, grid_cols)``, the shape P_r × P_c of the process grid."""
        return self.grid_rows, self.grid_cols

    @property
    def num_processes(self) -> int:
        """``grid_rows * grid_cols``."""
        return self.grid_rows * self.grid_cols

    @property
    def padded_shape(self) -> tuple[int, int]:
        """``(m_pad, n_pad)``: the shape rounded up to whole tiles on every process."""
        row_period = self.tile * self.grid_rows
        col_period = self.tile * self.grid_cols
        return -(-self.m // row_period) * row_period, -(-self.n // col_period) * col_period

    @property
    def local_shape(self) -> tuple[int, int]:
        """``(m_pad // grid_rows, n_pad // grid_cols)``: the local matrix of every process."""
        m_pad, n_pad = self.padded_shape
        return m_pad // self.grid_rows, n_pad // self.grid_cols

    @property
    def lld(self) -> int:
        """Leading dimension of the column-major local matrix: ``local_shape[0]``."""
        return self.local_shape[0]

    @property
    def local_tiles(self) -> tuple[int, int]:
        """Tiles per process, ``(local_shape[0] // tile, local_shape[1] // tile)``."""
        local_rows, local_cols = self.local_shape
        return local_rows // self.tile, local_cols // self.tile

    @property
    def tile_grid(self) -> tuple[int, int]:
        """Tiles of the padded matrix, ``(m_pad // tile, n_pad // tile)``."""
        m_pad, n_pad = self.padded_shape
        return m_pad // self.tile, n_pad // self.tile

    @property
    def storage_shape(self) -> tuple[int, int, int, int]:
        """``(grid_rows, grid_cols, local_shape[1], local_shape[0])``: all local matrices, one per
        process, each in column-major order (``storage[p, q].T`` is the local matrix of process
        ``(p, q)``). The shape `to_block_cyclic` returns."""
        local_rows, local_cols = self.local_shape
        return self.grid_rows, self.grid_cols, local_cols, local_rows

    def rank(self, p: Index, q: Index) -> Index:
        """The rank of process ``(p, q)`` in this plan's grid order.

        Args:
          p: process row, ``0 <= p < grid_rows``.
          q: process column, ``0 <= q < grid_cols``.

        Returns:
          ``p * grid_cols + q`` for order ``"row"``, ``q * grid_rows + p`` for ``"column"``; an
          int for int arguments, else an array of their broadcast shape.

        Raises:
          ValueError: if `p` or `q` is outside the grid.
        """
        p = _check_index("BlockCyclicPlan.rank", "p", p, self.grid_rows)
        q = _check_index("BlockCyclicPlan.rank", "q", q, self.grid_cols)
        rank = p * self.grid_cols + q if self.order == "row" else q * self.grid_rows + p
        return _as_int(rank)

    def coords(self, rank: Index) -> tuple[Index, Index]:
        """The process ``(p, q)`` that plays `rank`; the inverse of `rank`.

        Args:
          rank: ``0 <= rank < num_processes``.

        Returns:
          ``(p, q)``, ints for an int argument, else arrays of its shape.

        Raises:
          ValueError: if `rank` is outside ``[0, num_processes)``.

        Examples:
          >>> from jaxsolve.layout import BlockCyclicPlan
          >>> BlockCyclicPlan(8, 8, 2, 2, 3).coords(4)
          (1, 1)
          >>> BlockCyclicPlan(8, 8, 2, 2, 3, order="column").coords(4)
          (0, 2)
        """
        rank = _check_index("BlockCyclicPlan.coords", "rank", rank, self.num_processes)
        if self.order == "row":
            p, q = np.divmod(rank, self.grid_cols)
        else:
            q, p = np.divmod(rank, self.grid_rows)
        return _as_int(p), _as_int(q)

    def tile_owner(self, ti: Index, tj: Index) -> tuple[Index, Index]:
        """The process ``(p, q)`` that owns tile ``(ti, tj)``, ``(ti % grid_rows, tj % grid_cols)``.

        Args:
          ti: tile row, ``0 <= ti < tile_grid[0]``.
          tj: tile column, ``0 <= tj < tile_grid[1]``.

        Returns:
          ``(p, q)``, ints for int arguments, else arrays of their broadcast shape.

        Raises:
          ValueError: if a tile index is outside the padded matrix.
        """
        ti = _check_index("BlockCyclicPlan.tile_owner", "ti", ti, self.tile_grid[0])
        tj = _check_index("BlockCyclicPlan.tile_owner", "tj", tj, self.tile_grid[1])
        return _as_int(ti % self.grid_rows), _as_int(tj % self.grid_cols)

    def owner(self, i: Index, j: Index) -> tuple[Index, Index]:
        """The process ``(p, q)`` that owns global element ``(i, j)``.

        Args:
          i: global row, ``0 <= i < padded_shape[0]`` (padding rows have owners too).
          j: global column, ``0 <= j < padded_shape[1]``.

        Returns:
          ``(p, q)``, ints for int arguments, else arrays of their broadcast shape.

        Raises:
          ValueError: if an index is outside the padded matrix.
        """
        p, q, _, _ = self._to_local("BlockCyclicPlan.owner", i, j)
        return p, q

    def to_local(self, i: Index, j: Index) -> tuple[Index, Index, Index, Index]:
        """Global element ``(i, j)`` → ``(p, q, li, lj)``: its process and its local index.

        Args:
          i: global row, ``0 <= i < padded_shape[0]``.
          j: global column, ``0 <= j < padded_shape[1]``.

        Returns:
          ``(p, q, li, lj)``; the element is ``local[li, lj]`` of process ``(p, q)``, at offset
          ``li + lj * lld`` of its column-major storage. Ints for int arguments, else arrays of
          their broadcast shape.

        Raises:
          ValueError: if an index is outside the padded matrix.

        Examples:
          >>> import numpy as np
          >>> from jaxsolve.layout import BlockCyclicPlan
          >>> plan = BlockCyclicPlan(m=8, n=8, tile=2, grid_rows=2, grid_cols=1)
          >>> p, q, li, lj = plan.to_local(np.arange(8), 0)
          >>> p, li
          (array([0, 0, 1, 1, 0, 0, 1, 1]), array([0, 1, 0, 1, 2, 3, 2, 3]))
        """
        return self._to_local("BlockCyclicPlan.to_local", i, j)

    def to_global(self, p: Index, q: Index, li: Index, lj: Index) -> tuple[Index, Index]:
        """Local entry ``(li, lj)`` of process ``(p, q)`` → global ``(i, j)``; inverts `to_local`.

        Args:
          p: process row, ``0 <= p < grid_rows``.
          q: process column, ``0 <= q < grid_cols``.
          li: local row, ``0 <= li < local_shape[0]``.
          lj: local column, ``0 <= lj < local_shape[1]``.

        Returns:
          ``(i, j)`` in the padded matrix (``i >= m`` or ``j >= n`` marks padding). Ints for int
          arguments, else arrays of their broadcast shape.

        Raises:
          ValueError: if an index is outside the grid or the local matrix.
        """
        name = "BlockCyclicPlan.to_global"
        local_rows, local_cols = self.local_shape
        p = _check_index(name, "p", p, self.grid_rows)
        q = _check_index(name, "q", q, self.grid_cols)
        li = _check_index(name, "li", li, local_rows)
        lj = _check_index(name, "lj", lj, local_cols)
        i = _to_global(p, li, self.tile, self.grid_rows)
        j = _to_global(q, lj, self.tile, self.grid_cols)
        return _as_int(i), _as_int(j)

    def _to_local(self, name: str, i: Index, j: Index) -> tuple[Index, Index, Index, Index]:
        m_pad, n_pad = self.padded_shape
        p, li = _to_cyclic(_check_index(name, "i", i, m_pad), self.tile, self.grid_rows)
        q, lj = _to_cyclic(_check_index(name, "j", j, n_pad), self.tile, self.grid_cols)
        return _as_int(p), _as_int(q), _as_int(li), _as_int(lj)


def _to_cyclic(g, tile, nprocs):
    """One dimension, global index → (process, local index). NumPy or JAX integer arrays."""
    block = g // tile
    return block % nprocs, (block // nprocs) * tile + g % tile


def _to_global(proc, local, tile, nprocs):
    """One dimension, (process, local index) → global index; the inverse of `_to_cyclic`."""
    return ((local // tile) * nprocs + proc) * tile + local % tile


def _check_int(where: str, name: str, value: object, *, low: int, meaning: str = "") -> None:
    about = f" ({name} is {meaning})" if meaning else ""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{where}: {name}={value!r} must be an int, not {type(value).__name__}{about}."
        )
    if value < low:
        raise ValueError(f"{where}: {name}={value} must be >= {low}{about}.")


def _check_index(where: str, name: str, value: Index, bound: int) -> npt.NDArray[np.int64]:
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{where}: {name} must be integers, got dtype {array.dtype}.")
    outside = (array < 0) | (array >= bound)
    if outside.any():
        first = array[outside].flat[0]
        raise ValueError(f"{where}: {name}={first} is out of range; pass 0 <= {name} < {bound}.")
    return array.astype(np.int64)


def _as_int(array: npt.NDArray[np.int64]) -> Index:
    return int(array) if array.ndim == 0 else array
