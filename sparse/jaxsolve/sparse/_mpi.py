"""Distributed solves across MPI processes: ``solve(A_local, b_local, comm=..., ...)``.

JAX-AMG's call shape: each MPI rank holds a contiguous block of rows of ``A`` (with global
column indices) and the same rows of ``b``, and calls

.. code-block:: python

    x_local, info = jaxsolve.sparse.solve(A_local, b_local, comm=comm, nglobal=N,
                                          partition_info=(row_start, row_end), config=...)

together with every other rank of ``comm``. Each rank gets its rows of ``x`` and the same
``info``. One rank per device: each process solves on its default JAX device (give each
its own GPU, e.g. through ``CUDA_VISIBLE_DEVICES``, as ``jaxsolve.sharding.launch`` does).

The algorithms are those of the one-host sharded solve (:mod:`._partitioned`): the same
Krylov methods, the same block-Jacobi AMG on each rank's diagonal block with a coarse
space that couples the blocks, written against a `Collectives`. Here they talk through
`mpi4jax` inside the compiled program:

* **halo exchange**: each rank receives only the entries of ``x`` its rows reach (its
  `jaxsolve.sharding.HaloPlan`), one ``mpi4jax.sendrecv`` per *shift* ``d``: rank ``r``
  sends to ``r + d`` and receives from ``r - d`` (mod ``P``), with ``MPI.PROC_NULL`` for a
  side without data, and ranks with nothing to move at that shift skip it. Every message
  of a shift has the shift's largest width (so the transposed exchange of reverse mode has
  the same shapes); ``x`` is never gathered.
* **inner products and the coarse space**: ``mpi4jax.allreduce`` with ``MPI.SUM``.

Every rank issues its collectives in the same order: mpi4jax 0.9's operations take no token
(passing one raises) and are ordered as effects of the program, also inside the Krylov
loops. The iterations stay in step because the convergence tests read globally reduced
numbers, the same on every rank. The point-to-point pattern cannot deadlock: at each shift
every message has its partner's matching call, and ranks that raise on their own inputs
make every rank raise first (one ``allgather``).

**Setup** runs on the host once per pattern and values' key (cached, as the single-device
solve's structures: a different operator on the pattern gets its own, the ranks agreeing on
a key gathered from every rank's block; `_layout`), with a few mpi4py collectives: the
halo plan (``alltoall``), the widths of the messages, the coarse numbering of halo columns,
and, for ``Aᵀ``, the routing of each stored ``a_ij`` to the owner of row ``j`` (of ``Aᵀ``'s
rows: ``alltoall`` of the patterns, never of ``A``). Each rank then holds its own program;
only the order of collectives is shared. The numbers (each rank's block hierarchy and its
rows of the coarse inverse) are computed from the values: for concrete values by a program
of their own, kept with the values per orientation (a solve with equal values reuses them;
``reuse_setup=True`` takes the latest whatever the values), for traced values inside the
compiled solve. The ranks agree on each choice (one ``allreduce``).

**Derivatives** go through :func:`jaxsolve.autodiff.linear_solve` with the distributed
product as ``matvec``: cotangents of ``b_local`` and of the local values stay on each rank's
rows and pattern. Reverse mode of a nonsymmetric solve runs the distributed solve with
``Aᵀ``, whose rows are assembled inside the program by routing the values (one
``sendrecv`` per shift) and preconditioned by a hierarchy of its own. Forward mode
(``jax.jvp``) solves for the tangent ``ẋ = A⁻¹ (ḃ − Ȧ x)`` with the same distributed
solver. The exchanges carry their own derivative rules (`_Exchange.apply`): mpi4jax's
``sendrecv`` refuses forward mode and cannot lower a transposed message, so JAX never
differentiates it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import time
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax import lax

from jaxsolve.sharding import halo_plan

from ._config import AMGConfig, SolverConfig
from ._csr_arrays import CsrStructure
from ._hierarchy import HierarchyStructure, build_structure, numeric_setup
from ._krylov import HERMITIAN_METHODS
from ._linear_solve import service, solve_from
from ._matrix_free import is_operator, operator_matrix
from ._partitioned import (COARSE_PER_PART, BlockPreconditioner, amg_of, check_solver,
                           coarse_aggregates, coarse_inverse_rows, is_block_relaxation,
                           kept_bytes, kept_numbers, krylov_columns, local_matvec, precondition)
from ._report import (Reports, log_parts_grid_stats, log_timings, logged_solve_stats,
                      report_solve)
from ._setup import is_concrete
from ._statistics import level_sizes
from ._structure_key import values_key
from ._status import SolveInfo

_WHERE = "with comm="  # the path, in the errors of _partitioned's checks


def _mpi4jax():
    """The `mpi4jax` module, or an ImportError that says how to get it."""
    try:
        import mpi4jax
    except ImportError as error:
        raise ImportError(
            "solve(comm=...) needs the package mpi4jax, which moves data between MPI "
            "processes inside compiled JAX programs; install it, built against the same MPI "
            "as mpi4py: `pip install mpi4jax` (jaxsolve's tools/dev builds it into the "
            f"venv). Importing it failed with: {error}") from error
    return mpi4jax


def _mpi():
    from mpi4py import MPI
    return MPI


# -----------------------------------------------------------------------------
# Exchanges between ranks (host plans, applied inside the program)


@dataclasses.dataclass(frozen=True, eq=False)
class _Message:
    """One ``sendrecv`` of an exchange: ``width`` entries to ``dest``, from ``source``
    (``MPI.PROC_NULL`` for a side without data); ``send_count`` / ``recv_count`` of them are
    real, the rest padding."""

    dest: int
    source: int
    width: int
    send_positions: np.ndarray  # (width,) in the source buffer, padding reads 0
    send_count: int
    recv_positions: np.ndarray  # (width,) in the destination buffer, padding dropped
    recv_count: int


@dataclasses.dataclass(frozen=True, eq=False)
class _Exchange:
    """Entries moved from a source buffer on each rank to a destination buffer on others,
    from this rank's view: the entries it keeps (``local``) and its messages, by shift."""

    local: tuple[np.ndarray, np.ndarray] | None
    messages: tuple[_Message, ...]

    def apply(self, comm: Any, source: jax.Array, destination: jax.Array) -> jax.Array:
        """``destination`` plus the entries this rank receives (added to what it holds:
        zero, as callers pass it): ``d + E s``, linear in both buffers.

        Its derivatives are given to JAX here, not taken from mpi4jax, whose ``sendrecv``
        refuses forward mode and cannot lower the transpose of a message: the tangent of
        ``E s`` is ``E ṡ`` (the same messages) and its transpose sends each cotangent back
        where its entry came from (``Eᵀ``, the messages reversed). The pair travels through
        `jax.lax.custom_linear_solve`, whose JVP applies ``solve`` to the tangents and whose
        transpose is ``transpose_solve``: the identity on ``[s | 0]`` is "solved" by
        ``[s | d] ↦ [0 | E s]``, whose transpose is ``[s̄ | d̄] ↦ [Eᵀ d̄ | 0]``. So
        `jax.jvp`, `jax.grad` and `jax.vmap` all work across ranks.
        """
        size = source.shape[0]
        zeros = jnp.zeros((destination.shape[0],) + source.shape[1:], source.dtype)

        def forward(_, stacked):
            moved = self._move(comm, stacked[:size], zeros, reverse=False)
            return jnp.concatenate([jnp.zeros_like(stacked[:size]), moved])

        def reverse(_, stacked):
            moved = self._move(comm, stacked[size:], jnp.zeros_like(stacked[:size]),
                               reverse=True)
            return jnp.concatenate([moved, zeros])

        # [s | 0] is linear in s (a zero buffer of its own would not be, for the transpose).
        padded = jnp.pad(source, [(0, zeros.shape[0])] + [(0, 0)] * (source.ndim - 1))
        moved = lax.custom_linear_solve(lambda v: v, padded, solve=forward,
                                        transpose_solve=reverse)
        return destination + moved[size:]

    def _move(self, comm: Any, source: jax.Array, destination: jax.Array, *,
              reverse: bool) -> jax.Array:
        """``destination + E source``, or with ``reverse`` ``destination + Eᵀ source``:
        each entry goes back from the slot it filled to the position it was read from."""
        mpi4jax = _mpi4jax()
        lanes = (slice(None),) + (None,) * (source.ndim - 1)
        if self.local is not None:
            reads, writes = self.local[::-1] if reverse else self.local
            destination = destination.at[writes].add(source[reads])
        for message in self.messages:
            reads, read_count = message.send_positions, message.send_count
            writes, write_count = message.recv_positions, message.recv_count
            if reverse:
                reads, read_count, writes, write_count = writes, write_count, reads, read_count
            payload = source.at[reads].get(mode="fill", fill_value=0)
            payload = jnp.where((np.arange(message.width) < read_count)[lanes], payload,
                                jnp.zeros((), payload.dtype))
            # recvbuf only gives the shape: the payload's, so that vmap batches both alike.
            received = mpi4jax.sendrecv(
                payload, payload, comm=comm,
                source=message.dest if reverse else message.source,
                dest=message.source if reverse else message.dest)
            received = jnp.where((np.arange(message.width) < write_count)[lanes], received,
                                 jnp.zeros((), received.dtype))
            destination = destination.at[writes].add(received, mode="drop")
        return destination


def _exchange(comm: Any, sends: dict[int, np.ndarray], receives: dict[int, np.ndarray],
              dropped: int) -> _Exchange:
    """The `_Exchange` of ``sends[q]`` (positions in this rank's source buffer for rank
    ``q``) and ``receives[q]`` (positions in its destination buffer for what ``q`` sends),
    each rank's ``sends[q]`` being ``q``'s ``receives[rank]``, in the same order. A
    collective (one ``Allreduce`` for the widths of the shifts)."""
    MPI = _mpi()
    rank, size = comm.rank, comm.size
    empty = np.zeros(0, np.int64)
    counts = np.zeros(size, np.int64)
    for q, positions in sends.items():
        if q != rank:
            counts[(q - rank) % size] = len(positions)
    widths = np.zeros_like(counts)
    comm.Allreduce(counts, widths, op=MPI.MAX)
    local = None
    if len(sends.get(rank, empty)):
        local = (np.asarray(sends[rank], np.int32), np.asarray(receives[rank], np.int32))
    messages = []
    for shift in range(1, size):
        dest, source = (rank + shift) % size, (rank - shift) % size
        send, receive = sends.get(dest, empty), receives.get(source, empty)
        if not len(send) and not len(receive):
            continue
        width = int(widths[shift])
        messages.append(_Message(
            dest=dest if len(send) else MPI.PROC_NULL,
            source=source if len(receive) else MPI.PROC_NULL,
            width=width,
            send_positions=np.pad(np.asarray(send, np.int32), (0, width - len(send))),
            send_count=len(send),
            recv_positions=np.pad(np.asarray(receive, np.int32), (0, width - len(receive)),
                                  constant_values=dropped),
            recv_count=len(receive)))
    return _Exchange(local, tuple(messages))


class _MpiCollectives:
    """The `Collectives` of one MPI rank: halo by `_Exchange`, sums by ``allreduce``."""

    def __init__(self, comm: Any, system: _RankSystem):
        self.nparts = comm.size
        self._comm, self._system = comm, system

    def index(self) -> int:
        return self._comm.rank

    def halo(self, x: jax.Array) -> jax.Array:
        zeros = jnp.zeros((self._system.n_halo + 1,) + x.shape[1:], x.dtype)
        return self._system.halo.apply(self._comm, x, jnp.concatenate([x, zeros]))

    def sum(self, array: jax.Array) -> jax.Array:
        return _mpi4jax().allreduce(array, op=_mpi().SUM, comm=self._comm)


# -----------------------------------------------------------------------------
# Host setup (once per pattern)


@dataclasses.dataclass(frozen=True, eq=False)
class _RankSystem:
    """One orientation (``A`` or ``Aᵀ``) on this rank: its block in local numbering, its
    halo exchange and the structure of its preconditioner (None: no AMG)."""

    n_owned: int
    n_halo: int
    indices: np.ndarray  # (nnz,) int32, columns in [owned | halo | 0]
    indptr: np.ndarray  # (m + 1,) int32
    halo: _Exchange
    structure: HierarchyStructure | None = None
    block_positions: np.ndarray | None = None
    n_coarse: int = 0
    coarse_of_row: np.ndarray | None = None
    coarse_rows: np.ndarray | None = None
    coarse_cols: np.ndarray | None = None
    # The numbers of the latest setup with concrete values, per dtype: (values, numbers).
    numbers: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, eq=False)
class _Layout:
    """Everything static of a distributed system on this rank (one per pattern)."""

    comm: Any  # the private clone of the caller's communicator
    row_ranges: tuple[tuple[int, int], ...]
    forward: _RankSystem
    transposed: _RankSystem | None  # None: not needed (CG)
    routing: _Exchange  # A's values (canonical order) to Aᵀ's slots
    transposed_nnz: int
    symmetric_pattern: bool  # on every rank


def _rank_system(comm: Any, row_ranges, indptr: np.ndarray, indices: np.ndarray,
                 values: np.ndarray | None, amg: AMGConfig | None) -> _RankSystem:
    """The `_RankSystem` of this rank's canonical rows ``(indptr, global indices)``."""
    MPI = _mpi()
    rank, size = comm.rank, comm.size
    start, end = row_ranges[rank]
    m, n = end - start, row_ranges[-1][1]
    pattern = scipy.sparse.csr_array((np.ones(len(indices), np.int8), indices, indptr),
                                     shape=(m, n))
    plan = halo_plan(pattern, row_ranges, comm)
    columns = plan.local_indices(indices)
    sends = dict(plan.sends())
    receives = {q: m + np.arange(part.start, part.stop) for q, part in plan.receives()}
    system = _RankSystem(n_owned=m, n_halo=plan.n_halo, indices=columns.astype(np.int32),
                         indptr=indptr.astype(np.int32),
                         halo=_exchange(comm, sends, receives, dropped=m + plan.n_halo + 1))
    if amg is None:
        return system
    rows = np.repeat(np.arange(m), np.diff(indptr))
    inside = np.flatnonzero(columns < m)
    block_indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[inside], minlength=m))])
    block = CsrStructure(block_indptr.astype(np.int32), columns[inside].astype(np.int32), m)
    structure = build_structure(block, None if values is None else values[inside], 1, amg)
    coarse_of_row, count = coarse_aggregates(structure, COARSE_PER_PART)
    n_coarse = int(comm.allreduce(count, op=MPI.MAX))
    # The coarse unknowns of the halo columns, from their owners.
    empty = np.zeros(0, np.int32)
    incoming = comm.alltoall([coarse_of_row[sends[q]] if q in sends else empty
                              for q in range(size)])
    halo_coarse = np.zeros(plan.n_halo, np.int64)
    for q, part in plan.receives():
        halo_coarse[part] = q * n_coarse + incoming[q]
    lookup = np.concatenate([rank * n_coarse + coarse_of_row, halo_coarse])
    return dataclasses.replace(
        system, structure=structure, block_positions=inside.astype(np.int32),
        n_coarse=n_coarse, coarse_of_row=coarse_of_row.astype(np.int32),
        coarse_rows=(rank * n_coarse + coarse_of_row[rows]).astype(np.int32),
        coarse_cols=lookup[columns].astype(np.int32))


def _transpose_pattern(comm: Any, row_ranges, indptr: np.ndarray, indices: np.ndarray):
    """``Aᵀ``'s rows on this rank and the routing of ``A``'s values to them.

    Each stored ``a_ij`` goes to the owner of row ``j`` of ``Aᵀ`` (one ``alltoall`` of
    ``(i, j)`` pairs, the pattern only). Returns ``(indptr, global indices, sends,
    receives)``: ``sends[q]`` the positions of this rank's values that go to ``q``,
    ``receives[q]`` the slots of ``Aᵀ``'s values they fill there, in the same order.
    """
    rank, size = comm.rank, comm.size
    start, end = row_ranges[rank]
    m = end - start
    rows = start + np.repeat(np.arange(m), np.diff(indptr))
    owners = np.searchsorted([e for _, e in row_ranges], indices, side="right")
    sends = {q: np.flatnonzero(owners == q) for q in range(size)}
    incoming = comm.alltoall([np.stack([rows[sends[q]], indices[sends[q]]])
                              for q in range(size)])
    t_rows = np.concatenate([pairs[1] for pairs in incoming]) - start
    t_columns = np.concatenate([pairs[0] for pairs in incoming])
    origin = np.concatenate([np.full(pairs.shape[1], q) for q, pairs in enumerate(incoming)])
    order = np.lexsort((t_columns, t_rows))
    slots = np.empty(len(order), np.int64)
    slots[order] = np.arange(len(order))
    t_indptr = np.concatenate([[0], np.cumsum(np.bincount(t_rows, minlength=m))])
    receives = {q: slots[origin == q] for q in range(size)}
    return (t_indptr.astype(np.int64), t_columns[order].astype(np.int64),
            {q: s for q, s in sends.items() if len(s)},
            {q: r for q, r in receives.items() if len(r)})


_LAYOUTS: collections.OrderedDict[tuple, _Layout] = collections.OrderedDict()
_MAX_LAYOUTS = 16
_COMMS: dict[Any, Any] = {}


def _private_comm(comm: Any) -> Any:
    """A clone of ``comm`` (once per communicator), so that the solver's messages never
    meet the caller's. A collective the first time."""
    key = comm.py2f()
    if key not in _COMMS:
        _COMMS[key] = comm.Clone()
    return _COMMS[key]


def _layout(comm: Any, row_ranges, indptr: np.ndarray, indices: np.ndarray,
            values: jax.Array, amg: AMGConfig | None, hermitian: bool,
            latest: bool) -> _Layout:
    """The cached `_Layout` of this rank's pattern for ``values``; built (collectively)
    when any rank misses its cache, so that all ranks take part in the same setup
    collectives.

    As the single-device solve's structures (:mod:`._cache`), layouts are kept per pattern,
    configuration and values' key: concrete ``values`` get the layout built for them, or
    for values with the same key (:mod:`._structure_key`: every rank's block's, gathered
    in rank order, so one key on every rank and one decision); traced ones, and
    ``latest`` (``reuse_setup``, a nonzero ``structure_reuse_levels``), the pattern's most
    recently used, built from the pattern (or the concrete values) when there is none.
    ``Aᵀ``'s structure is built with ``A``'s and follows ``A``'s key.  A structure of one
    level (a relaxation's, or none) follows the pattern alone.
    """
    MPI = _mpi()
    pattern = (comm.py2f(), row_ranges, indptr.tobytes(), indices.tobytes(), amg, hermitian)
    keyed = is_concrete(values) and amg is not None and amg.max_levels > 1
    keys: list[tuple[str, ...]] = []  # the values' key, computed once for this call

    def key_of_values(layout: _Layout) -> tuple[str, ...]:
        if not keys:
            system = layout.forward
            with jax.ensure_compile_time_eval():  # concrete, also while a caller's jit traces
                own = values_key(system.structure, values[system.block_positions])
            keys.append(tuple(comm.allgather(own)))
        return keys[0]

    wanted = next((key for key in reversed(_LAYOUTS) if key[0] == pattern), None)
    # Each decision agreed (allreduce), so that every rank computes the key (a collective)
    # or none does, and all build together.
    found = comm.allreduce(wanted is not None, op=MPI.LAND)
    if found and keyed and not latest:
        wanted = (pattern, key_of_values(_LAYOUTS[wanted]))
    if found and comm.allreduce(wanted in _LAYOUTS, op=MPI.LAND):
        _LAYOUTS.move_to_end(wanted)
        return _LAYOUTS[wanted]
    host_values = np.asarray(values) if amg is not None and is_concrete(values) else None
    with jax.ensure_compile_time_eval():  # host setup, also while a jit traces: kept arrays
        layout = _new_layout(comm, row_ranges, indptr, indices, host_values, amg, hermitian)
    wanted = (pattern, key_of_values(layout) if keyed else None)
    _LAYOUTS.pop(wanted, None)
    if len(_LAYOUTS) >= _MAX_LAYOUTS:  # the oldest goes (hits are agreed on collectively)
        _LAYOUTS.popitem(last=False)
    _LAYOUTS[wanted] = layout
    return layout


def layout_cache_info() -> dict[str, Any]:
    """The distributed layouts kept on this rank, as JAX-AMG's ``get_solver_cache_info``
    describes its MPI cache (see :func:`jaxsolve.sparse.get_solver_cache_info`)."""
    entries = []
    for (pattern, _), layout in _LAYOUTS.items():
        amg = pattern[4]
        start, end = layout.row_ranges[layout.comm.rank]
        digest = hashlib.blake2b(pattern[2] + pattern[3], digest_size=8).hexdigest()
        entries.append({"n_local": end - start, "n_global": layout.row_ranges[-1][1],
                        "nnz": int(layout.forward.indptr[-1]), "lrank": layout.comm.rank,
                        "structure_hash": int(digest, 16),
                        "config": None if amg is None else
                        {"solver": "AMG", **amg._amgx_keys("main_preconditioner")}})
    return {"size": len(entries), "capacity": _MAX_LAYOUTS, "entries": entries}


def _new_layout(comm: Any, row_ranges, indptr: np.ndarray, indices: np.ndarray,
                values: np.ndarray | None, amg: AMGConfig | None, hermitian: bool) -> _Layout:
    MPI = _mpi()
    t_indptr, t_indices, sends, receives = _transpose_pattern(comm, row_ranges, indptr, indices)
    routing = _exchange(comm, sends, receives, dropped=len(t_indices))
    symmetric = bool(comm.allreduce(
        np.array_equal(t_indptr, indptr) and np.array_equal(t_indices, indices), op=MPI.LAND))
    forward = _rank_system(comm, row_ranges, indptr, indices, values, amg)
    transposed = None
    if not hermitian:
        t_values = None
        if values is not None and amg is not None:  # Aᵀ's values on the host, to set up
            incoming = comm.alltoall([values[sends[q]] if q in sends else values[:0]
                                      for q in range(comm.size)])
            t_values = np.zeros(len(t_indices), values.dtype)
            for q, slots in receives.items():
                t_values[slots] = incoming[q]
        transposed = _rank_system(comm, row_ranges, t_indptr, t_indices, t_values, amg)
    return _Layout(comm=comm, row_ranges=row_ranges, forward=forward, transposed=transposed,
                   routing=routing, transposed_nnz=len(t_indices), symmetric_pattern=symmetric)


# -----------------------------------------------------------------------------
# The solve


def _own_values(layout: _Layout, transposed: bool, values: jax.Array) -> jax.Array:
    """The values of an orientation from ``A``'s: themselves, or ``Aᵀ``'s routed from them."""
    if not transposed:
        return values
    return layout.routing.apply(layout.comm, values,
                                jnp.zeros(layout.transposed_nnz, values.dtype))


def _local_setup(collectives: _MpiCollectives, system: _RankSystem,
                 values: jax.Array) -> BlockPreconditioner:
    """This rank's preconditioner numbers: its block's hierarchy and the coarse inverse."""
    hierarchy = numeric_setup(system.structure, system.structure.arrays,
                              values[system.block_positions], None)
    return BlockPreconditioner(hierarchy, coarse_inverse_rows(
        collectives, values, system.coarse_rows, system.coarse_cols, system.n_coarse))


def _local_solve(config: SolverConfig, layout: _Layout, system: _RankSystem,
                 values: jax.Array, numbers: BlockPreconditioner | None,
                 rhs: jax.Array) -> tuple[jax.Array, SolveInfo]:
    """This rank's rows of the solve of ``system`` (values in its own slots), with the
    preconditioner's numbers given or, when None, set up here."""
    collectives = _MpiCollectives(layout.comm, system)

    def matvec(x):
        return local_matvec(collectives, values, system.indices, system.indptr, x)

    apply = None
    if system.structure is not None:
        if numbers is None:
            numbers = _local_setup(collectives, system, values)
        apply = precondition(collectives, system.n_coarse, numbers, system.coarse_of_row,
                             matvec)
    return krylov_columns(config, collectives, matvec, apply, rhs)


@functools.lru_cache(maxsize=64)
def _compiled_solve(config: SolverConfig, layout: _Layout, transposed: bool):
    """The jitted solve service of ``A`` (or ``Aᵀ``, its values routed from ``A``'s). With
    ``config.print_solve_stats`` (a traced solve's: `split_reports`) rank 0's program logs
    AmgX's table by a host callback (``info`` is the same on every rank)."""
    system = layout.transposed if transposed else layout.forward

    def run(values, numbers, rhs):
        x, info = _local_solve(config, layout, system, _own_values(layout, transposed, values),
                               numbers, rhs)
        if config.print_solve_stats and layout.comm.rank == 0:
            logged_solve_stats(config.solver, info)
        return x, info

    return jax.jit(run)


@functools.lru_cache(maxsize=64)
def _compiled_setup(layout: _Layout, transposed: bool):
    """The jitted numeric setup of ``A``'s (or ``Aᵀ``'s) preconditioner from ``A``'s values."""
    system = layout.transposed if transposed else layout.forward

    def run(values):
        return _local_setup(_MpiCollectives(layout.comm, system), system,
                            _own_values(layout, transposed, values))

    return jax.jit(run)


def _setup_numbers(layout: _Layout, transposed: bool, values: jax.Array) -> BlockPreconditioner:
    """The numbers for concrete ``values``, computed now, even while a caller's jit traces
    (run as a compiled executable, as `numeric_setup_now` does). A collective."""
    return _compiled_setup(layout, transposed).lower(values).compile()(values)


def _preconditioner_numbers(layout: _Layout, transposed: bool, values: jax.Array,
                            reuse_setup: bool) -> BlockPreconditioner | None:
    """`kept_numbers` of an orientation, the ranks agreeing on each choice (one
    ``allreduce``); None without a preconditioner."""
    system = layout.transposed if transposed else layout.forward
    if system.structure is None:
        return None
    return kept_numbers(system.numbers, values, reuse_setup,
                        functools.partial(_setup_numbers, layout, transposed),
                        agree=lambda reuse: layout.comm.allreduce(reuse, op=_mpi().LAND))


def _local_csr(A: Any) -> tuple[np.ndarray, np.ndarray, Any, tuple[int, int]]:
    """``(indptr, indices, values, shape)`` of a rank's block: a concrete pattern, values
    possibly traced. A matrix-free block (JAX-AMG's ``partition_operator``, this rank's rows
    of the product) is materialized on its attached coloring's pattern."""
    if is_operator(A):
        A = operator_matrix("solve", A, None, None)
    if scipy.sparse.issparse(A):
        A = scipy.sparse.csr_array(A)
        if A.has_canonical_format is False:
            A.sum_duplicates()
        return (A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data,
                tuple(A.shape))
    indptr, indices = getattr(A, "indptr", None), getattr(A, "indices", None)
    values = getattr(A, "values", None)
    values = getattr(A, "data", None) if values is None or callable(values) else values
    if indptr is None or indices is None or values is None or np.ndim(indices) != 1:
        raise TypeError(
            "solve: with comm=, A must be this rank's rows as a CSR matrix with global column "
            "indices (a scipy.sparse matrix, a jax.experimental.sparse BCSR or a "
            "jaxsolve.sparse.CsrMatrix) or a matrix-free operator of them with its coloring "
            f"attached by with_cache, got {type(A).__name__}.")
    try:
        indptr, indices = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
    except jax.errors.TracerArrayConversionError as error:
        raise TypeError("solve: with comm=, A's pattern (indices, indptr) must be concrete; "
                        "build A outside jax.jit and trace only its values.") from error
    nnz = int(indptr[-1])
    return indptr, indices[:nnz], values[:nnz], tuple(int(s) for s in A.shape)


def _row_ranges(comm: Any, nglobal: Any, partition_info: Any) -> tuple[tuple[int, int], ...]:
    """All ranks' rows, gathered from their ``partition_info`` and checked collectively
    (every rank sees the same list, so every rank raises the same error)."""
    if isinstance(nglobal, bool) or not isinstance(nglobal, (int, np.integer)):
        raise TypeError(f"solve: nglobal must be an int (the global number of rows), got "
                        f"{nglobal!r}.")
    try:
        row_start, row_end = (int(v) for v in partition_info)
    except (TypeError, ValueError) as error:
        raise TypeError(f"solve: partition_info must be (row_start, row_end), this rank's "
                        f"rows, got {partition_info!r}.") from error
    gathered = comm.allgather((int(nglobal), row_start, row_end))
    sizes = sorted({n for n, _, _ in gathered})
    if len(sizes) != 1:
        raise ValueError(f"solve: the ranks disagree on nglobal: {[n for n, _, _ in gathered]} "
                         "(by rank); pass the same global size on every rank.")
    ranges = tuple((s, e) for _, s, e in gathered)
    bounds = [0] + [e for _, e in ranges]
    if any(s != bounds[r] or e < s for r, (s, e) in enumerate(ranges)) or bounds[-1] != sizes[0]:
        raise ValueError(
            f"solve: partition_info must split the {sizes[0]} rows into contiguous blocks "
            f"in rank order (rank 0 from row 0, each rank from where the previous one ends, "
            f"the last to nglobal); the ranks passed {list(ranges)}. "
            "jaxsolve.sharding.partition_rows gives such blocks.")
    if any(e == s for s, e in ranges):
        raise ValueError(f"solve: every rank needs at least one row; the ranks passed "
                         f"{list(ranges)}.")
    return ranges


def _local_inputs(A_local: Any, b_local: Any, x0: Any, rank: int, row_ranges):
    """This rank's checked inputs: its canonical pattern ``(indptr, indices)`` (columns
    sorted in each row), its values in that order, ``b`` and ``x0`` in their dtype."""
    row_start, row_end = row_ranges[rank]
    m, nglobal = row_end - row_start, row_ranges[-1][1]
    indptr, indices, values, shape = _local_csr(A_local)
    if shape != (m, nglobal):
        raise ValueError(
            f"solve: A_local has shape {shape}, but rank {rank}'s rows "
            f"{row_start}:{row_end} of the {nglobal} x {nglobal} system need ({m}, {nglobal}) "
            "(its rows, with global column indices).")
    rows = np.repeat(np.arange(m), np.diff(indptr))
    order = np.lexsort((indices, rows))
    indices = indices[order]
    if np.any((np.diff(rows) == 0) & (np.diff(indices) == 0)):
        raise ValueError("solve: A_local stores some entry twice; sum duplicates first "
                         "(scipy: A.sum_duplicates()).")
    if len(indices) and (indices.min() < 0 or indices.max() >= nglobal):
        raise ValueError(f"solve: A_local has column indices outside 0:{nglobal}.")
    b = jnp.asarray(b_local)
    if b.ndim not in (1, 2) or b.shape[0] != m:
        raise ValueError(f"solve: b_local must have shape ({m},) or ({m}, k), this rank's "
                         f"rows {row_start}:{row_end}, got {b.shape}.")
    values = jnp.asarray(values)
    if not jnp.issubdtype(b.dtype, jnp.inexact):
        b = b.astype(values.dtype)
    with jax.numpy_dtype_promotion("standard"):
        dtype = jnp.result_type(values, b)
    if x0 is not None:
        x0 = lax.stop_gradient(jnp.asarray(x0).astype(dtype))
        if x0.shape != b.shape:
            raise ValueError(f"solve: x0 must have b_local's shape {b.shape}, got {x0.shape}.")
    return indptr, indices, values[order].astype(dtype), b.astype(dtype), x0


def _agree(comm: Any, problem: Exception | None) -> None:
    """Raises on every rank when a rank's own inputs failed their checks (``problem`` on
    that rank), so that no rank goes on to wait in a collective for one that raised."""
    problems = comm.allgather(None if problem is None else str(problem))
    found = [(rank, message) for rank, message in enumerate(problems) if message]
    if problem is None and found:
        rank, message = found[0]
        raise ValueError(f"solve: rank {rank} rejected its inputs, so every rank stops: "
                         f"{message}")


def solve_mpi(
    A_local: Any,
    b_local: Any,
    x0: Any,
    config: SolverConfig,
    reports: Reports,
    *,
    comm: Any,
    nglobal: Any,
    partition_info: Any,
    reuse_setup: bool = False,
    derivative: Literal["implicit", "adjoint"] = "implicit",
) -> tuple[jax.Array, SolveInfo]:
    """`jaxsolve.sparse.solve` with ``comm=``: this rank's rows of a distributed solve.

    See the module documentation; the arguments are `solve`'s, its configuration parsed and
    split from its ``reports`` (`split_reports`, logged by rank 0 once per solve, the grid
    table of every rank's block hierarchy summed level by level) and the keywords this path
    does not take refused by `solve`. A collective: every rank of
    ``comm`` calls it with its own rows, in the same order as its other calls, also when a
    `jax.jit` traces it (setup then runs while tracing).
    """
    if comm is None or nglobal is None or partition_info is None:
        missing = [name for name, value in (("comm", comm), ("nglobal", nglobal),
                                            ("partition_info", partition_info)) if value is None]
        raise ValueError(
            f"solve: a distributed solve needs comm=, nglobal= and partition_info= together; "
            f"missing {', '.join(missing)} (comm: an mpi4py communicator, nglobal: the global "
            "number of rows, partition_info: (row_start, row_end), this rank's rows).")
    _mpi4jax()  # after the check of the keywords, which needs no MPI
    if not hasattr(comm, "Get_size") or not hasattr(comm, "Clone"):
        raise TypeError(f"solve: comm must be an mpi4py communicator (e.g. MPI.COMM_WORLD), "
                        f"got {type(comm).__name__}.")
    check_solver(config, _WHERE)
    amg = amg_of(config)
    row_ranges = _row_ranges(comm, nglobal, partition_info)
    try:
        indptr, indices, values, b, x0 = _local_inputs(A_local, b_local, x0, comm.rank,
                                                       row_ranges)
    except (TypeError, ValueError) as error:
        _agree(comm, error)
        raise
    _agree(comm, None)
    hermitian = config.solver in HERMITIAN_METHODS
    comm = _private_comm(comm)
    setup_start = time.perf_counter()
    layout = _layout(comm, row_ranges, indptr, indices, values, amg, hermitian,
                     latest=reuse_setup or (amg is not None and amg.structure_reuse_levels > 0))
    numbers = _preconditioner_numbers(layout, False, values, reuse_setup)
    if reports.timings:
        jax.block_until_ready([leaf for leaf in jax.tree.leaves(numbers) if is_concrete(leaf)])
    setup_seconds = time.perf_counter() - setup_start
    if reports.grid_stats and amg is not None and not is_block_relaxation(amg):  # AMG's
        _log_grid_stats(reports.solver, layout, numbers, values.dtype.itemsize)
    collectives = _MpiCollectives(comm, layout.forward)

    def matvec(operator, x):
        return local_matvec(collectives, operator[0], layout.forward.indices,
                            layout.forward.indptr, x, native=False)

    # The preconditioner's numbers travel with the values as the operator (arguments of the
    # compiled solve, not constants); only the values are differentiated.
    operator = (values, numbers)

    symmetrize = None
    if hermitian:
        if not layout.symmetric_pattern:
            raise ValueError("solve: CG with comm= needs a structurally symmetric pattern "
                             "(its derivatives average a_ij and a_ji); store both.")

        def symmetrize(operator):  # (a_ij + a_ji) / 2, a_ji routed from the owner of row j
            values, numbers = operator
            return (values + _own_values(layout, True, values)) / 2, numbers

    transpose_solve = None if hermitian else service(
        _compiled_solve(config, layout, True),
        functools.partial(_preconditioner_numbers, layout, True, values, reuse_setup))
    # A traced solve's table is logged by its program; a concrete one's when it returns.
    concrete = all(map(is_concrete, jax.tree.leaves((operator, b, x0))))
    forward_config = config
    if reports.solve_stats and not concrete:
        forward_config = dataclasses.replace(config, print_solve_stats=True)
    solve_start = time.perf_counter()
    x, info = solve_from(operator, b, x0, matvec=matvec,
                         solve=service(_compiled_solve(forward_config, layout, False)),
                         transpose_solve=transpose_solve, hermitian=hermitian,
                         symmetrize=symmetrize, derivative=derivative)
    info = report_solve(reports, info, logged_in_program=not concrete, log_here=comm.rank == 0)
    if reports.timings and comm.rank == 0:
        log_timings(reports.solver, setup_seconds, solve_start, x, info)
    return x, info


def _log_grid_stats(solver: str, layout: _Layout, numbers: BlockPreconditioner | None,
                    itemsize: int) -> None:
    """AmgX's ``print_grid_stats`` of a setup from concrete values, logged by rank 0: every
    rank's block hierarchy, summed level by level (`log_parts_grid_stats`). A collective."""
    system = layout.forward
    if system.structure is None or numbers is None:
        return
    parts = layout.comm.gather((level_sizes(system.structure), kept_bytes(numbers),
                                len(system.indices)), root=0)
    if layout.comm.rank != 0:
        return
    bytes_kept = {part: sum(kept[part] for _, kept, _ in parts) for part in parts[0][1]}
    nnz, n = sum(count for _, _, count in parts), layout.row_ranges[-1][1]
    log_parts_grid_stats(solver, [sizes for sizes, _, _ in parts], system.n_coarse, bytes_kept,
                         nnz * (itemsize + 4) + 4 * (n + 1))
