"""JAX-AMG's MPI partitioning helpers (``jaxsolve.sparse.mpi_utils``), on jaxsolve.sharding.

JAX-AMG's ``jaxamg.mpi_utils`` names with JAX-AMG's arguments and return shapes, as thin
adapters over :mod:`jaxsolve.sharding`'s row partition (`partition_rows`: contiguous
blocks, the first ``n % nranks`` ranks one row more, JAX-AMG's split), so that MPI code
written against JAX-AMG runs with only its imports changed:

* `get_partition_info`: ``(row_start, row_end, n_local)`` of a rank;
* `partition_vector`, `partition_csr_matrix`, `partition_operator`: a rank's rows of a
  global vector, matrix (as a BCSR with global columns) or matrix-free operator, each
  with ``row_start, row_end``;
* `gather_vector`: the global vector on one rank (``Gatherv``);
* `make_allgather_vector`: a differentiable all-gather, for a loss on the global vector;
* `validate_partition`: checks a rank's block and prints JAX-AMG's one-line diagnostic.

JAX-AMG's ``_mpi4jax_allgatherv(sendbuf, recvcounts_tuple, comm)``, private but imported by
its ``mpi_preconditioned_solver`` demo, is here with its meaning (an all-gather inside the
compiled program). So are the names of its transport layer, which ``solve(..., comm=...)``
does not need (it plans its halo exchanges itself, with `jaxsolve.sharding.halo_plan`) but
code written against JAX-AMG may call:

* `register_comm` / `resolve_comm`: a communicator by an integer key, and back;
* `HaloPlan` / `build_halo_plan`: JAX-AMG's padded halo-exchange plan of a rank's block of
  rows, converted from `jaxsolve.sharding.halo_plan`'s;
* `local_transpose_nnz`: the stored entries of this rank's rows of ``Aᵀ``.

Examples:
  >>> import numpy as np
  >>> from jaxsolve.sparse.mpi_utils import get_partition_info, partition_vector
  >>> get_partition_info(10, 1, 3)
  (4, 7, 3)
  >>> b_local, row_start, row_end = partition_vector(np.arange(10.0), 1, 3)
  >>> b_local, (row_start, row_end)
  (array([4., 5., 6.]), (4, 7))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse
from jax.typing import ArrayLike

from jaxsolve import sharding

__all__ = [
    "HaloPlan",
    "build_halo_plan",
    "gather_vector",
    "get_partition_info",
    "local_transpose_nnz",
    "make_allgather_vector",
    "partition_csr_matrix",
    "partition_operator",
    "partition_vector",
    "register_comm",
    "resolve_comm",
    "validate_partition",
]


def get_partition_info(n_global: int, rank: int, nranks: int) -> tuple[int, int, int]:
    """``(row_start, row_end, n_local)``: rank ``rank``'s rows of ``n_global``.

    ``jaxsolve.sharding.partition_rows(n_global, nranks)[rank]`` and its length.
    """
    row_start, row_end = sharding.partition_rows(n_global, nranks)[_rank(rank, nranks)]
    return row_start, row_end, row_end - row_start


def partition_vector(b_global: ArrayLike, rank: int, nranks: int
                     ) -> tuple[ArrayLike, int, int]:
    """``(b_local, row_start, row_end)``: rank ``rank``'s slice of a global vector.

    ``b_local`` is ``b_global[row_start:row_end]``, of ``b_global``'s type (a JAX array
    stays one).
    """
    row_start, row_end, _ = get_partition_info(len(b_global), rank, nranks)
    return b_global[row_start:row_end], row_start, row_end


def partition_csr_matrix(A_global: Any, rank: int, nranks: int
                         ) -> tuple[jsparse.BCSR, int, int]:
    """``(A_local, row_start, row_end)``: rank ``rank``'s rows of a global sparse matrix.

    Args:
      A_global: a SciPy sparse matrix, a ``jax.experimental.sparse.BCSR`` or any CSR form
        :func:`jaxsolve.sharding.partition_csr_matrix` takes.
      rank, nranks: this rank and the number of ranks.

    Returns:
      ``A_local`` a BCSR of shape ``(row_end - row_start, n)`` with global column indices
      (int32) and ``A_global``'s dtype, and the rows it holds.
    """
    local, (row_start, row_end) = sharding.partition_csr_matrix(A_global, _rank(rank, nranks),
                                                                nranks)
    block = jsparse.BCSR((jnp.asarray(local.data), jnp.asarray(local.indices, np.int32),
                          jnp.asarray(local.indptr, np.int32)), shape=local.shape)
    return block, row_start, row_end


def partition_operator(operator: Callable[[jax.Array], jax.Array], nglobal: int, rank: int,
                       nranks: int) -> tuple[Callable[[jax.Array], jax.Array], int, int]:
    """``(local_operator, row_start, row_end)``: a global operator's rows on one rank.

    ``local_operator(x_global) = operator(x_global)[row_start:row_end]``: the ``(n_local,
    nglobal)`` form ``solve(..., comm=...)`` takes, whose local block is materialized on its
    own rank only.
    """
    row_start, row_end, _ = get_partition_info(nglobal, rank, nranks)

    def local_operator(x_global: jax.Array) -> jax.Array:
        return operator(x_global)[row_start:row_end]

    return local_operator, row_start, row_end


def validate_partition(A_local: Any, nglobal: int, row_start: int, row_end: int) -> None:
    """Checks a rank's CSR block against its rows and prints a one-line diagnostic.

    Raises:
      ValueError: if the block has the wrong shape, an inconsistent ``indptr`` or a
        column outside ``[0, nglobal)``.
    """
    n_local = row_end - row_start
    indptr, indices = np.asarray(A_local.indptr), np.asarray(A_local.indices)
    problems = []
    if tuple(A_local.shape) != (n_local, nglobal):
        problems.append(f"shape {tuple(A_local.shape)} is not ({n_local}, {nglobal})")
    if indptr.size != n_local + 1 or indptr[0] != 0 or indptr[-1] != indices.size:
        problems.append(f"indptr does not delimit {indices.size} entries in {n_local} rows")
    if indices.size and (indices.min() < 0 or indices.max() >= nglobal):
        problems.append(f"columns span [{indices.min()}, {indices.max()}], outside"
                        f" [0, {nglobal})")
    if problems:
        raise ValueError(f"validate_partition: rows [{row_start}, {row_end}): "
                         + "; ".join(problems) + ".")
    if indices.size:
        print(f"✓ Partition validated: {n_local} rows, cols [{indices.min()}, {indices.max()}]")
    else:
        print(f"✓ Partition validated: {n_local} rows, no non-zeros")


def gather_vector(x_local: ArrayLike, comm: Any, root: int = 0) -> jax.Array | None:
    """The global vector, assembled from every rank's rows on rank ``root`` (``Gatherv``).

    A collective: every rank of ``comm`` calls it.  Not differentiable (see
    `make_allgather_vector`).

    Returns:
      The JAX array of the global vector on ``root``, ``None`` on the other ranks.
    """
    gathered = sharding.gather_vector(np.asarray(x_local), comm=comm, root=root)
    return None if gathered is None else jnp.asarray(gathered)


def make_allgather_vector(comm: Any, partition_info: tuple[int, int], nglobal: int, *,
                          backend: str = "auto") -> Callable[[jax.Array], jax.Array]:
    """A differentiable all-gather of a row-partitioned vector, for a loss on the whole.

    ``allgather(x_local)`` returns the length-``nglobal`` vector on every rank; its
    derivative (reverse mode) hands each rank the slice ``g[row_start:row_end]`` of the
    cotangent, the exact adjoint of the gather, with no sum over ranks: when every rank
    evaluates the same loss of the gathered vector, sum the ranks' gradients of a shared
    parameter yourself (``comm.allreduce``).

    Args:
      comm: the ``mpi4py`` communicator (the sizes are exchanged once, here).
      partition_info: ``(row_start, row_end)``, this rank's rows.
      nglobal: the global length.
      backend: ``"mpi4jax"`` (inside the compiled program), ``"host"`` (a callback to
        ``comm.Allgatherv``), or ``"auto"``: mpi4jax when it is installed.

    Returns:
      ``allgather(x_local) -> x_global``, jit-able and differentiable.
    """
    row_start, row_end = partition_info
    counts = [int(c) for c in comm.allgather(row_end - row_start)]
    if sum(counts) != nglobal:
        raise ValueError(f"make_allgather_vector: the ranks hold {sum(counts)} rows, not"
                         f" nglobal={nglobal}.")
    if backend == "auto":
        import importlib.util
        backend = "mpi4jax" if importlib.util.find_spec("mpi4jax") else "host"
    if backend not in ("mpi4jax", "host"):
        raise ValueError(f'make_allgather_vector: backend must be "auto", "mpi4jax" or'
                         f' "host", got {backend!r}.')
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])

    def gather_in_program(x_local: jax.Array) -> jax.Array:
        return _mpi4jax_allgatherv(x_local, tuple(counts), comm)

    def gather_on_host(x_local: jax.Array) -> jax.Array:
        def allgatherv(piece: np.ndarray) -> np.ndarray:
            piece = np.ascontiguousarray(piece)
            whole = np.empty(nglobal, piece.dtype)
            comm.Allgatherv(piece, [whole, (counts, starts.tolist())])
            return whole
        return jax.pure_callback(allgatherv, jax.ShapeDtypeStruct((nglobal,), x_local.dtype),
                                 x_local)

    gather = gather_in_program if backend == "mpi4jax" else gather_on_host

    @jax.custom_vjp
    def allgather(x_local: jax.Array) -> jax.Array:
        return gather(x_local)

    def forward(x_local):
        return gather(x_local), None

    def backward(_, g_global):
        return (g_global[row_start:row_end],)

    allgather.defvjp(forward, backward)
    return allgather


# The communicators register_comm was given, by their key (mpi4py communicators are not
# hashable, so JAX-AMG keys them by the address of their MPI handle).
_COMMUNICATORS: dict[int, Any] = {}


def register_comm(comm: Any) -> int:
    """Remembers ``comm`` and returns its key, an int that `resolve_comm` maps back to it.

    JAX-AMG's: the key is the address of the communicator's MPI handle
    (``mpi4py.MPI._addressof``), an int that a static argument of a JAX primitive can hold.
    """
    from mpi4py import MPI

    key = MPI._addressof(comm)
    _COMMUNICATORS[key] = comm
    return key


def resolve_comm(comm_ptr: int) -> Any:
    """The communicator `register_comm` returned ``comm_ptr`` for; ``MPI.COMM_WORLD`` for a
    key never registered (JAX-AMG's fallback)."""
    from mpi4py import MPI

    return _COMMUNICATORS.get(comm_ptr, MPI.COMM_WORLD)


def _row_ranges(recvcounts_tuple: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The contiguous row ranges of ranks owning ``recvcounts_tuple[r]`` rows each."""
    ends = np.cumsum(np.asarray(recvcounts_tuple, np.int64)).tolist()
    return tuple((end - count, end) for count, end in zip(recvcounts_tuple, ends))


def local_transpose_nnz(col_indices: ArrayLike, recvcounts_tuple: tuple[int, ...],
                        comm: Any) -> int:
    """The number of stored entries of this rank's rows of ``Aᵀ`` (JAX-AMG's).

    Row ``j`` of ``Aᵀ`` holds column ``j`` of ``A``, so this rank's rows of ``Aᵀ`` gather
    the entries of every rank whose column it owns.  A collective (one ``alltoall`` of a
    count per rank).

    Args:
      col_indices: this rank's global column indices of its block of ``A``'s rows.
      recvcounts_tuple: the rows each rank owns, in rank order (contiguous blocks).
      comm: the ``mpi4py`` communicator, rank ``r`` owning the ``r``-th block.

    Returns:
      This rank's stored entries of ``Aᵀ``, an int.
    """
    ends = np.cumsum(np.asarray(recvcounts_tuple, np.int64))
    owners = np.searchsorted(ends, np.asarray(col_indices, np.int64), side="right")
    sent = np.bincount(owners, minlength=len(recvcounts_tuple)).tolist()
    return int(sum(comm.alltoall(sent)))


class HaloPlan(NamedTuple):
    """JAX-AMG's halo-exchange plan of one rank's block of rows (see `build_halo_plan`).

    The block's columns are numbered in the combined vector ``[x_local | x_ghost]``: its own
    rows' entries, then the ``n_ghost`` entries of other ranks it references ("ghosts"),
    ascending by global index.  The exchange is an ``alltoall`` of ``(nranks,
    max_per_rank)`` buffers.

    Attributes:
      n_local: the rows this rank owns.
      n_ghost: the ghosts it receives.
      max_per_rank: the largest message between two ranks, over all ranks (at least 1).
      col_to_combined: ``(nnz,)`` int32, each stored entry's column in the combined vector.
      send_ids_2d: ``(nranks, max_per_rank)`` int32; row ``p`` the positions in
        ``x_local`` of the entries sent to rank ``p`` (padded with 0).
      recv_ghost_slot_2d: ``(nranks, max_per_rank)`` int32; row ``p`` the ghost slots the
        entries received from rank ``p`` fill, in order (padded with ``n_ghost``).
    """

    n_local: int
    n_ghost: int
    max_per_rank: int
    col_to_combined: np.ndarray
    send_ids_2d: np.ndarray
    recv_ghost_slot_2d: np.ndarray


def build_halo_plan(local_col_indices: ArrayLike, recvcounts_tuple: tuple[int, ...],
                    partition_info: tuple[int, int], comm: Any) -> HaloPlan:
    """This rank's `HaloPlan` (JAX-AMG's), from `jaxsolve.sharding.halo_plan`'s.

    A collective: every rank of ``comm`` calls it with its own block.

    Args:
      local_col_indices: the global column indices of this rank's stored entries.
      recvcounts_tuple: the rows each rank owns, in rank order (contiguous blocks).
      partition_info: ``(row_start, row_end)``, this rank's rows.
      comm: the ``mpi4py`` communicator, rank ``r`` owning the ``r``-th block.

    Returns:
      The `HaloPlan`.

    Raises:
      ValueError: if ``partition_info`` is not this rank's block of ``recvcounts_tuple``.
    """
    import scipy.sparse
    from mpi4py import MPI

    row_ranges = _row_ranges(recvcounts_tuple)
    row_start, row_end = (int(i) for i in partition_info)
    if row_ranges[comm.rank] != (row_start, row_end):
        raise ValueError(f"build_halo_plan: partition_info={tuple(partition_info)} is not rank"
                         f" {comm.rank}'s rows {row_ranges[comm.rank]} of recvcounts_tuple.")
    columns = np.asarray(local_col_indices, np.int64)
    n_local, nranks = row_end - row_start, len(recvcounts_tuple)
    # halo_plan reads the block's columns alone: any rows will do (all in the first here).
    pattern = scipy.sparse.csr_array(
        (np.ones(len(columns), np.float32), columns,
         np.r_[0, np.full(n_local, len(columns))]), shape=(n_local, row_ranges[-1][1]))
    plan = sharding.halo_plan(pattern, row_ranges, comm)
    longest = max([*plan.send_counts, *plan.recv_counts, 1])
    max_per_rank = int(comm.allreduce(longest, op=MPI.MAX))
    send_ids = np.zeros((nranks, max_per_rank), np.int32)
    for q, positions in plan.sends():
        send_ids[q, :len(positions)] = positions
    ghost_slots = np.full((nranks, max_per_rank), plan.n_halo, np.int32)
    for q, slots in plan.receives():
        ghost_slots[q, :slots.stop - slots.start] = np.arange(slots.start, slots.stop)
    return HaloPlan(n_local, plan.n_halo, max_per_rank,
                    plan.local_indices(columns).astype(np.int32), send_ids, ghost_slots)


def _rank(rank: Any, nranks: Any) -> int:
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
        raise TypeError(f"rank must be an int, got {type(rank).__name__}.")
    if not 0 <= rank < nranks:
        raise ValueError(f"rank={rank} is not one of the {nranks} ranks 0 to {nranks - 1}.")
    return int(rank)


def _mpi4jax_allgatherv(sendbuf: jax.Array, recvcounts_tuple: tuple[int, ...],
                        comm: Any) -> jax.Array:
    """Every rank's ``sendbuf`` concatenated in rank order, inside the compiled program
    (JAX-AMG's helper of the same name): padded to the longest, ``mpi4jax.allgather``,
    trimmed. ``recvcounts_tuple``: each rank's length, static."""
    import mpi4jax

    widest = max(recvcounts_tuple)
    padded = jnp.pad(sendbuf, (0, widest - sendbuf.shape[0]))
    rows = mpi4jax.allgather(padded, comm=comm)  # (nranks, widest)
    return jnp.concatenate([rows[r, :count] for r, count in enumerate(recvcounts_tuple)])
