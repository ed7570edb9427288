"""Halo plans: which entries of ``x`` the ranks exchange in a row-partitioned ``y = A x``.

With ``A`` split by rows (`jaxsolve.sharding.partition_csr_matrix`), rank ``r`` computes its
rows of ``y = A x`` from its rows of ``A``, whose column indices reach beyond the entries of
``x`` that it owns. The entries it needs from other ranks are its **halo** (ghost entries).
A `HaloPlan` says, for one rank:

* what it receives: ``halo_columns``, the global indices of the remote entries it needs,
  ascending, hence grouped by owner in rank order (``recv_ranks``, ``recv_counts``);
* what it sends: for each rank that needs some of its entries (``send_ranks``), which ones
  (``send_indices``, positions in its own block, grouped as ``send_counts`` says), in the
  order in which the receiver lists them;
* how its columns are numbered locally: owned column ``j`` becomes ``j - row_start`` and the
  ``k``-th halo column becomes ``n_owned + k``, so the local product is
  ``A_local @ concatenate([x_owned, x_halo])`` with ``A_local`` in that numbering
  (`HaloPlan.localize`).

Each rank's send lists are the other ranks' receive lists. `halo_plans` builds all ranks'
plans at once from the global matrix (one host: the plans of `jax.shard_map`'s shards);
`halo_plan` builds one MPI rank's plan from its block alone, learning its send lists from the
other ranks with one ``alltoall``. Plans are immutable and hashable, so they can be static
arguments of `jax.jit`.

The exchange is what a distributed product costs beyond the local one, and what predicts how
it scales: `HaloPlan.bytes_per_exchange` counts it. For the 7-point Poisson matrix of an
``n × n × n`` grid in natural order, split in slabs of whole ``z``-planes, each rank exchanges
one plane of ``n²`` values with each neighbouring slab, in each direction.

Examples:
  The halo of each of 1, 2, 4 and 8 slabs of a 16³ Poisson problem, in bytes received per
  exchange of float64 values: ``16² × 8 = 2048`` per neighbouring slab.

  >>> import scipy.sparse as sp
  >>> from jaxsolve.sharding import halo_plans, partition_rows
  >>> n = 16
  >>> T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n))
  >>> A = sp.kronsum(sp.kronsum(T, T), T, format="csr")  # 7-point Poisson, n³ = 4096 rows
  >>> for parts in (1, 2, 4, 8):
  ...     plans = halo_plans(A, partition_rows(A.shape[0], parts))
  ...     print(parts, [plan.bytes_per_exchange("float64")[1] for plan in plans])
  1 [0]
  2 [2048, 2048]
  4 [2048, 4096, 4096, 2048]
  8 [2048, 4096, 4096, 4096, 4096, 4096, 4096, 2048]

  One rank's exchange with mpi4py, and its product (``x_owned`` its rows of ``x``):

  .. code-block:: python

      plan = halo_plan(A_block, row_ranges, comm)
      A_local = plan.localize(A_block)               # once per pattern
      x_halo = np.empty(plan.n_halo)
      outgoing = [(q, x_owned[positions]) for q, positions in plan.sends()]
      requests = [comm.Irecv(x_halo[part], source=q) for q, part in plan.receives()]
      requests += [comm.Isend(message, dest=q) for q, message in outgoing]
      MPI.Request.Waitall(requests)
      y_owned = A_local @ np.concatenate([x_owned, x_halo])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse

from ._partition import RowRanges, check_row_ranges, csr_arrays


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class HaloPlan:
    """One rank's halo exchange for ``y = A x`` with ``A`` and ``x`` partitioned by rows.

    Built by `halo_plans` (all ranks) or `halo_plan` (one MPI rank); the module documentation
    explains the fields. Immutable and hashable: equal plans hash equally, so a plan can be a
    static argument of `jax.jit`.

    Attributes:
      rank: the rank this plan is for.
      row_ranges: all ranks' rows (and so the entries of ``x`` they own), `RowRanges`.
      halo_columns: ``(n_halo,)`` int64, the global indices of the entries this rank receives,
        ascending (so grouped by owner, in rank order); read-only.
      recv_ranks: the ranks it receives from, ascending.
      recv_counts: how many entries it receives from each of `recv_ranks`.
      send_ranks: the ranks it sends to, ascending.
      send_counts: how many entries it sends to each of `send_ranks`.
      send_indices: ``(sum(send_counts),)`` int64, the positions in this rank's block of the
        entries it sends, to `send_ranks` in turn, each receiver's in the order of its
        ``halo_columns``; read-only.

    Examples:
      The 1D Laplacian on 6 points over 3 ranks: the middle rank needs the last entry of rank
      0 and the first of rank 2, and sends them its own first and last.

      >>> import scipy.sparse as sp
      >>> from jaxsolve.sharding import halo_plans, partition_rows
      >>> A = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(6, 6), format="csr")
      >>> plan = halo_plans(A, partition_rows(6, 3))[1]
      >>> plan
      HaloPlan(rank=1, rows=(2, 4), halo_columns=[1, 4], receives={0: 1, 2: 1},
               sends={0: 1, 2: 1})
      >>> [(q, part) for q, part in plan.receives()]
      [(0, slice(0, 1, None)), (2, slice(1, 2, None))]
      >>> [(q, idx.tolist()) for q, idx in plan.sends()]
      [(0, [0]), (2, [1])]
      >>> plan.bytes_per_exchange("float32")
      (8, 8)
    """

    rank: int
    row_ranges: RowRanges
    halo_columns: np.ndarray
    recv_ranks: tuple[int, ...]
    recv_counts: tuple[int, ...]
    send_ranks: tuple[int, ...]
    send_counts: tuple[int, ...]
    send_indices: np.ndarray
    _hash: int = dataclasses.field(init=False, compare=False)

    def __post_init__(self):
        for name in ("halo_columns", "send_indices"):
            array = np.array(getattr(self, name), dtype=np.int64)
            array.flags.writeable = False
            object.__setattr__(self, name, array)
        if (len(self.recv_ranks) != len(self.recv_counts)
                or len(self.send_ranks) != len(self.send_counts)
                or sum(self.recv_counts) != len(self.halo_columns)
                or sum(self.send_counts) != len(self.send_indices)):
            raise ValueError("HaloPlan: the counts do not match the ranks and index arrays; "
                             "build plans with halo_plans or halo_plan.")
        object.__setattr__(self, "_hash", hash(self._key()))

    def _key(self) -> tuple:
        return (self.rank, self.row_ranges, self.halo_columns.tobytes(), self.recv_ranks,
                self.recv_counts, self.send_ranks, self.send_counts,
                self.send_indices.tobytes())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HaloPlan):
            return NotImplemented
        return self._hash == other._hash and self._key() == other._key()

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        halo = self.halo_columns.tolist()
        shown = halo if len(halo) <= 8 else [*halo[:4], "...", *halo[-2:]]
        return (f"HaloPlan(rank={self.rank}, rows={self.row_ranges[self.rank]}, "
                f"halo_columns=[{', '.join(map(str, shown))}], "
                f"receives={dict(zip(self.recv_ranks, self.recv_counts))}, "
                f"sends={dict(zip(self.send_ranks, self.send_counts))})")

    @property
    def row_start(self) -> int:
        """The first row (and entry of ``x``) this rank owns."""
        return self.row_ranges[self.rank][0]

    @property
    def row_end(self) -> int:
        """One past the last row this rank owns."""
        return self.row_ranges[self.rank][1]

    @property
    def n_owned(self) -> int:
        """How many rows (and entries of ``x``) this rank owns."""
        return self.row_end - self.row_start

    @property
    def n_halo(self) -> int:
        """How many entries of ``x`` this rank receives."""
        return len(self.halo_columns)

    def receives(self) -> list[tuple[int, slice]]:
        """``[(source rank, slice of the halo it fills), ...]``, by source rank."""
        ends = np.cumsum(self.recv_counts, dtype=int).tolist()
        return [(q, slice(end - count, end))
                for q, count, end in zip(self.recv_ranks, self.recv_counts, ends)]

    def sends(self) -> list[tuple[int, np.ndarray]]:
        """``[(destination rank, positions in this rank's block to send), ...]``, by
        destination rank; ``x_owned[positions]`` is the message."""
        ends = np.cumsum(self.send_counts, dtype=int).tolist()
        return [(q, self.send_indices[end - count:end])
                for q, count, end in zip(self.send_ranks, self.send_counts, ends)]

    def local_indices(self, columns: Any) -> np.ndarray:
        """Global column indices in this rank's local ``[owned | halo]`` numbering.

        Args:
          columns: global column indices, an integer array of any shape.

        Returns:
          An int64 array of the same shape: ``j - row_start`` for an owned column ``j``,
          ``n_owned + k`` for ``halo_columns[k]``.

        Raises:
          ValueError: if a column is neither owned by this rank nor in its halo (the plan was
            built for another pattern).

        Examples:
          >>> import scipy.sparse as sp
          >>> from jaxsolve.sharding import halo_plans, partition_rows
          >>> A = sp.eye_array(6, k=3, format="csr") + sp.eye_array(6, k=-3, format="csr")
          >>> plan = halo_plans(A, partition_rows(6, 2))[1]   # rows 3, 4, 5
          >>> plan.halo_columns.tolist(), plan.local_indices([0, 4, 2]).tolist()
          ([0, 1, 2], [3, 1, 5])
        """
        columns = np.asarray(columns, dtype=np.int64)
        owned = (columns >= self.row_start) & (columns < self.row_end)
        position = np.searchsorted(self.halo_columns, columns)
        in_halo = np.zeros(columns.shape, dtype=bool)
        if self.n_halo:
            in_halo = self.halo_columns[np.minimum(position, self.n_halo - 1)] == columns
        missing = ~(owned | in_halo)
        if np.any(missing):
            raise ValueError(
                f"HaloPlan.local_indices: columns {np.unique(columns[missing])[:8].tolist()} are "
                f"neither owned by rank {self.rank} (rows {self.row_start}:{self.row_end}) nor "
                "in its halo; the plan was built for another sparsity pattern."
            )
        return np.where(owned, columns - self.row_start, self.n_owned + position)

    def localize(self, local_matrix: Any) -> scipy.sparse.csr_array:
        """This rank's block of rows renumbered into its ``[owned | halo]`` columns.

        Args:
          local_matrix: this rank's ``(n_owned, n)`` block with global column indices, as
            `partition_csr_matrix` gives it (any form it accepts).

        Returns:
          A `scipy.sparse.csr_array` of shape ``(n_owned, n_owned + n_halo)``, the same values,
          such that ``localize(A_block) @ concatenate([x_owned, x_halo])`` is this rank's rows
          of ``A x``.

        Raises:
          ValueError: if `local_matrix` has not this rank's shape, or reaches columns outside
            the plan.

        Examples:
          >>> import numpy as np, scipy.sparse as sp
          >>> from jaxsolve.sharding import halo_plans, partition_csr_matrix, partition_rows
          >>> A = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(6, 6),
          ...                    format="csr")
          >>> plan = halo_plans(A, partition_rows(6, 3))[1]
          >>> A_block, _ = partition_csr_matrix(A, 1, 3)
          >>> plan.localize(A_block).toarray()   # columns: owned 2, 3, then halo 1, 4
          array([[ 2., -1., -1.,  0.],
                 [-1.,  2.,  0., -1.]])
          >>> x = np.arange(6.0) ** 2                     # A x = -2 in the interior
          >>> plan.localize(A_block) @ np.concatenate([x[2:4], x[plan.halo_columns]])
          array([-2., -2.])
        """
        indptr, indices, data, shape = csr_arrays("HaloPlan.localize", "local_matrix",
                                                  local_matrix)
        n = self.row_ranges[-1][1]
        if shape != (self.n_owned, n):
            raise ValueError(
                f"HaloPlan.localize: local_matrix has shape {shape}, but rank {self.rank}'s block "
                f"is ({self.n_owned}, {n}): rows {self.row_start}:{self.row_end} of the "
                f"{n} x {n} matrix, with global column indices."
            )
        return scipy.sparse.csr_array(
            (data[:indptr[-1]], self.local_indices(indices[:indptr[-1]]), indptr),
            shape=(self.n_owned, self.n_owned + self.n_halo),
        )

    def bytes_per_exchange(self, dtype: Any) -> tuple[int, int]:
        """``(sent, received)``: the bytes this rank sends and receives per halo exchange of
        values of `dtype` (one per matrix–vector product).

        Examples:
          >>> import scipy.sparse as sp
          >>> from jaxsolve.sharding import halo_plans, partition_rows
          >>> A = sp.diags_array([1.0, 1.0], offsets=[0, 2], shape=(6, 6), format="csr")
          >>> [plan.bytes_per_exchange("float64") for plan in halo_plans(A, partition_rows(6, 2))]
          [(0, 16), (16, 0)]
        """
        itemsize = np.dtype(dtype).itemsize
        return len(self.send_indices) * itemsize, self.n_halo * itemsize


def halo_plans(A: Any, row_ranges: Sequence[Sequence[int]]) -> tuple[HaloPlan, ...]:
    """Every rank's `HaloPlan` for a square matrix partitioned by rows.

    For one host (the shards of `jax.shard_map`), and to count the exchange before running
    anything: each rank's send lists are the other ranks' receive lists.

    Args:
      A: the global ``(n, n)`` matrix, in any form that `partition_csr_matrix` accepts; or the
        sequence of all ranks' blocks of rows with global column indices, as
        `partition_csr_matrix` gives them, in rank order.
      row_ranges: all ranks' rows, as `partition_rows` gives them; entry ``j`` of ``x`` is
        owned by the rank that owns row ``j``.

    Returns:
      One plan per rank, in rank order.

    Raises:
      TypeError: if `A` (or a block) is not a sparse matrix.
      ValueError: if `A` is not square, `row_ranges` is not a partition of its rows, or a
        block's shape is not its rank's.

    Examples:
      A 5-point Poisson matrix of a 4 × 4 grid over 2 ranks: each needs the other's row of
      the grid, 4 values.

      >>> import scipy.sparse as sp
      >>> from jaxsolve.sharding import halo_plans, partition_rows
      >>> T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(4, 4))
      >>> A = sp.kronsum(T, T, format="csr")
      >>> first, second = halo_plans(A, partition_rows(16, 2))
      >>> first.halo_columns.tolist(), second.halo_columns.tolist()
      ([8, 9, 10, 11], [4, 5, 6, 7])
      >>> [(q, idx.tolist()) for q, idx in first.sends()]
      [(1, [4, 5, 6, 7])]
    """
    if isinstance(A, (list, tuple)):
        row_ranges = check_row_ranges("halo_plans", row_ranges, nranks=len(A))
        columns = []
        for rank, block in enumerate(A):
            _, indices, _, shape = csr_arrays("halo_plans", f"A[{rank}]", block)
            _check_block("halo_plans", f"A[{rank}]", shape, rank, row_ranges)
            columns.append(indices)
    else:
        indptr, indices, _, shape = csr_arrays("halo_plans", "A", A)
        if shape[0] != shape[1]:
            raise ValueError(f"halo_plans: A has shape {shape}; halo plans are for square "
                             "matrices, whose columns are partitioned like their rows.")
        row_ranges = check_row_ranges("halo_plans", row_ranges, n=shape[0])
        columns = [indices[indptr[start]:indptr[end]] for start, end in row_ranges]
    needs = [_needs(indices, rank, row_ranges) for rank, indices in enumerate(columns)]
    return tuple(
        _plan(rank, row_ranges, needs[rank], [needs[q][1].get(rank) for q in range(len(needs))])
        for rank in range(len(needs))
    )


def halo_plan(local_matrix: Any, row_ranges: Sequence[Sequence[int]], comm: Any) -> HaloPlan:
    """This MPI rank's `HaloPlan`, from its own block of rows of a square matrix.

    What the rank receives follows from its block; what it sends, from the blocks of the
    others: the ranks tell each other what they need in one ``comm.alltoall``. A collective:
    every rank of `comm` calls it, with the same `row_ranges`.

    Args:
      local_matrix: this rank's ``(row_end - row_start, n)`` block of rows with global column
        indices, as `partition_csr_matrix` gives it (any form it accepts).
      row_ranges: all ranks' rows, as `partition_rows` gives them, one per rank of `comm`.
      comm: an `mpi4py.MPI.Comm` whose rank ``r`` owns ``row_ranges[r]``.

    Returns:
      The plan of rank ``comm.rank``, the same as ``halo_plans(A, row_ranges)[comm.rank]``.

    Raises:
      TypeError: if `local_matrix` is not a sparse matrix.
      ValueError: if `row_ranges` is not a partition with one range per rank of `comm`, or
        `local_matrix`'s shape is not this rank's block.

    Examples:
      Under ``mpiexec -n 4``, with the global matrix ``A`` at hand on each rank (else each
      rank assembles its own block):

      .. code-block:: python

          from mpi4py import MPI
          comm = MPI.COMM_WORLD
          row_ranges = partition_rows(A.indptr, comm.size, balance="nnz")
          A_block, _ = partition_csr_matrix(A, comm.rank, comm.size, balance="nnz")
          plan = halo_plan(A_block, row_ranges, comm)
    """
    row_ranges = check_row_ranges("halo_plan", row_ranges, nranks=comm.size)
    _, indices, _, shape = csr_arrays("halo_plan", "local_matrix", local_matrix)
    _check_block("halo_plan", "local_matrix", shape, comm.rank, row_ranges)
    needs = _needs(indices, comm.rank, row_ranges)
    empty = np.zeros(0, dtype=np.int64)
    wanted = comm.alltoall([needs[1].get(q, empty) for q in range(comm.size)])
    start, end = row_ranges[comm.rank]
    if any(np.any((w < start) | (w >= end)) for w in wanted):
        raise ValueError(f"halo_plan: another rank asked rank {comm.rank} for entries outside "
                         f"its rows {start}:{end}; every rank must pass the same row_ranges.")
    return _plan(comm.rank, row_ranges, needs, [w if len(w) else None for w in wanted])


def _check_block(function: str, name: str, shape: tuple[int, int], rank: int,
                 row_ranges: RowRanges) -> None:
    """Raises unless `shape` is rank `rank`'s block of rows, with all global columns."""
    start, end = row_ranges[rank]
    n = row_ranges[-1][1]
    if shape != (end - start, n):
        raise ValueError(
            f"{function}: {name} has shape {shape}, but rank {rank}'s block is "
            f"({end - start}, {n}): rows {start}:{end} of the {n} x {n} matrix, with global "
            "column indices."
        )


def _needs(indices: np.ndarray, rank: int,
           row_ranges: RowRanges) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Rank `rank`'s halo (the remote columns among `indices`, ascending), and the same split
    by owner: ``{owner: its columns}``."""
    start, end = row_ranges[rank]
    halo = np.unique(indices[(indices < start) | (indices >= end)])
    owners = np.searchsorted([e for _, e in row_ranges], halo, side="right")
    owner_ranks, first = np.unique(owners, return_index=True)
    return halo, dict(zip(owner_ranks.tolist(), np.split(halo, first[1:])))


def _plan(rank: int, row_ranges: RowRanges, needs: tuple[np.ndarray, dict[int, np.ndarray]],
          wanted: list[np.ndarray | None]) -> HaloPlan:
    """The plan of `rank` from its `needs` and, per rank ``q``, the global indices ``q``
    wants from it (``None`` for none)."""
    halo, by_owner = needs
    send_ranks = [q for q, columns in enumerate(wanted) if columns is not None]
    return HaloPlan(
        rank=rank,
        row_ranges=row_ranges,
        halo_columns=halo,
        recv_ranks=tuple(by_owner),
        recv_counts=tuple(len(columns) for columns in by_owner.values()),
        send_ranks=tuple(send_ranks),
        send_counts=tuple(len(wanted[q]) for q in send_ranks),
        send_indices=np.concatenate([np.zeros(0, np.int64)]
                                    + [wanted[q] - row_ranges[rank][0] for q in send_ranks]),
    )
