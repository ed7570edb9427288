"""Row-sharded sparse matrices on one host: `shard_rows` and `ShardedCsrMatrix`.

`shard_rows` splits a global square sparse matrix into ``P`` contiguous blocks of rows, one
per device of a 1D mesh (`row_mesh`), and stores them as one pytree whose arrays have a
leading axis of ``P`` sharded over the mesh axis: inside `jax.shard_map` each device sees its
own block. The blocks are as even as can be (`partition_rows`: the first ``n mod P`` devices
one row more) and all have ``m = ⌈n / P⌉`` rows: a device with fewer real rows gets *padding
rows*, empty (no stored entry) and with zero right-hand side, so ``A x`` is zero there, the
preconditioner keeps them zero and nothing reaches the real rows: the solution, the
iterations and the derivatives are those of the ``n × n`` system. Vectors use the same
*padded layout* of ``P m`` entries (`ShardedCsrMatrix.shard_vector`); when ``P`` divides ``n``
it is the plain layout of ``NamedSharding(mesh, P(axis))``. A block is CSR in the local
``[owned | halo | 0]`` numbering of its `HaloPlan`: ``m`` owned columns, then the ``H`` halo
slots (``H`` the largest halo of all devices; a device with a smaller halo leaves the rest
zero), then one slot that always holds zero. The blocks are padded to the same number of
stored entries ``Z``; the padding entries sit at the end of the last row, in the zero
column, with value zero, so they change no product and get no gradient.

**Exchanges.** A product ``A x`` needs each device's halo entries of ``x`` from the devices
that own them. `Exchange` moves entries between devices with `jax.lax.ppermute`, one call
per *shift* ``d``: device ``r`` sends to device ``(r + d) mod P``. A slab partition of a
stencil matrix needs two shifts (``+1`` and ``-1``), whatever ``P``. Each message has the
width of the largest one of its shift, and only the needed entries travel: ``x`` is never
gathered. The same machinery routes stored values: for ``Aᵀ``, each nonzero ``a_ij`` moves
from the owner of row ``i`` to the owner of row ``j`` of ``Aᵀ`` (`ShardedCsrMatrix.transpose`),
without forming ``A`` anywhere.

Everything static (the plans, the shifts, the host copies of the patterns) is pytree
metadata compared by identity, so a matrix's compiled programs are reused as long as the
same `ShardedCsrMatrix` layout is used; `ShardedCsrMatrix.with_values` keeps the layout.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ._halo import HaloPlan, halo_plans
from ._partition import RowRanges, csr_arrays, partition_rows


def shard_map(f: Callable, mesh: Mesh, in_specs: Any, out_specs: Any) -> Callable:
    """`jax.shard_map` over `mesh` with its replication checks off, on every supported JAX.

    ``jax.shard_map`` (JAX >= 0.7, ``check_vma``) or, before it,
    ``jax.experimental.shard_map.shard_map`` (``check_rep``). The checks are off because the
    solvers' loops carry device-varying vectors together with replicated scalars (results of
    ``psum``), which the checks cannot always tell apart.

    Args:
      f: the per-device function.
      mesh: the mesh.
      in_specs, out_specs: `jax.sharding.PartitionSpec` s of the arguments and results.

    Returns:
      The mapped function, to call on global arrays (or to `jax.jit`).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jax.sharding import PartitionSpec as P
      >>> from jaxsolve.sharding import row_mesh, shard_map
      >>> mesh = row_mesh(devices=jax.devices("cpu")[:4])
      >>> total = shard_map(lambda v: jax.lax.psum(v.sum(keepdims=True), "rows"), mesh,
      ...                   P("rows"), P())
      >>> total(jnp.arange(8.0))
      Array([28.], dtype=float32)
    """
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                             check_vma=False)
    from jax.experimental.shard_map import shard_map as experimental  # pragma: no cover
    return experimental(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                        check_rep=False)


# -----------------------------------------------------------------------------
# Exchanges


class Move(NamedTuple):
    """One `jax.lax.ppermute` of an `Exchange`: every sending device ``r`` sends ``width``
    entries to ``(r + shift) mod P``; ``pairs`` lists the ``(source, destination)`` pairs
    that carry data, ``offset`` where this move's positions start in the exchange's arrays.
    Shift 0 is a copy within each device, with no communication."""

    shift: int
    pairs: tuple[tuple[int, int], ...]
    width: int
    offset: int


@dataclasses.dataclass(frozen=True, eq=False)
class Exchange:
    """Entries moved between the devices of a row mesh: static moves, per-device positions.

    Attributes:
      moves: the `Move` s, by shift.
      send_positions: ``(P, W)`` int32: for each device, the positions in its source buffer
        of the entries it sends, move by move (``W`` the total width; padding reads
        position 0).
      recv_positions: ``(P, W)`` int32: where the received entries land in each device's
        destination buffer; padding points past the buffer's end and is dropped.
      sent: ``(P,)`` how many entries each device sends to other devices (no padding).
      received: ``(P,)`` how many it receives from other devices.
    """

    moves: tuple[Move, ...]
    send_positions: np.ndarray
    recv_positions: np.ndarray
    sent: np.ndarray
    received: np.ndarray

    @classmethod
    def from_lists(cls, nparts: int, lists: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]],
                   dropped: int) -> Exchange:
        """The exchange of ``lists[(source, destination)] = (send positions, receive
        positions)``; ``dropped`` is a receive position past every destination buffer."""
        by_shift: dict[int, list[tuple[int, int]]] = {}
        for source, destination in sorted(lists):
            if len(lists[(source, destination)][0]):
                by_shift.setdefault((destination - source) % nparts, []).append(
                    (source, destination))
        moves, offset = [], 0
        for shift in sorted(by_shift):
            pairs = tuple(by_shift[shift])
            width = max(len(lists[pair][0]) for pair in pairs)
            moves.append(Move(shift, pairs, width, offset))
            offset += width
        send = np.zeros((nparts, offset), np.int32)
        recv = np.full((nparts, offset), dropped, np.int32)
        sent, received = np.zeros(nparts, np.int64), np.zeros(nparts, np.int64)
        for move in moves:
            for source, destination in move.pairs:
                sends, receives = lists[(source, destination)]
                send[source, move.offset:move.offset + len(sends)] = sends
                recv[destination, move.offset:move.offset + len(receives)] = receives
                if move.shift:
                    sent[source] += len(sends)
                    received[destination] += len(receives)
        return cls(tuple(moves), send, recv, sent, received)

    def apply(self, axis_name: str, source: jax.Array, send: jax.Array, recv: jax.Array,
              destination: jax.Array) -> jax.Array:
        """Inside `jax.shard_map`: ``destination`` plus this device's received entries.

        Each receiving slot of ``destination`` gets one entry, added to what it holds (zero,
        as the callers pass it), so the exchange is linear and JAX transposes it (the
        ``ppermute`` s reversed) for reverse-mode derivatives.

        Args:
          axis_name: the mesh axis the devices are spread over.
          source: this device's source buffer, ``(s, ...)``.
          send, recv: this device's rows of `send_positions` and `recv_positions`.
          destination: this device's destination buffer, ``(t, ...)``.
        """
        for move in self.moves:
            part = slice(move.offset, move.offset + move.width)
            payload = source[send[part]]
            if move.shift:
                payload = jax.lax.ppermute(payload, axis_name, move.pairs)
            # Added, not set: each slot receives at most once into a zero, and a scatter-add
            # transposes (padding positions repeat), so products through it differentiate.
            destination = destination.at[recv[part]].add(payload, mode="drop")
        return destination

    def payload_widths(self) -> int:
        """The entries one device sends per exchange, padding included (the widths of the
        moves with communication)."""
        return sum(move.width for move in self.moves if move.shift)


# -----------------------------------------------------------------------------
# Layouts


@dataclasses.dataclass(frozen=True, eq=False)
class RowLayout:
    """The static part of a `ShardedCsrMatrix`: partition, plans, exchange, host patterns.

    Compared by identity (it is pytree metadata). Built by `shard_rows`.

    Attributes:
      mesh: the 1D mesh.
      axis_name: its axis.
      shape: ``(n, n)``, the global shape.
      row_ranges: each device's rows.
      plans: each device's `HaloPlan`.
      halo: the `Exchange` that fills the halo slots of ``[owned | halo | 0]``.
      n_halo: ``H``, the halo slots of every device.
      nnz: each device's stored entries (before padding).
      width: ``Z``, the padded number of stored entries.
      local_indptr: ``(P, m + 1)`` each block's row pointers (host).
      local_indices: ``(P, Z)`` each block's local column indices, padded (host).
      global_indptr, global_indices: the global pattern, canonical (sorted, no duplicates).
      order: ``order[e]`` is the entry of the matrix given to `shard_rows` that became
        canonical entry ``e``.
    """

    mesh: Mesh
    axis_name: str
    shape: tuple[int, int]
    row_ranges: RowRanges
    plans: tuple[HaloPlan, ...]
    halo: Exchange
    n_halo: int
    nnz: tuple[int, ...]
    width: int
    local_indptr: np.ndarray
    local_indices: np.ndarray
    global_indptr: np.ndarray
    global_indices: np.ndarray
    order: np.ndarray

    @property
    def nparts(self) -> int:
        return len(self.row_ranges)

    @property
    def n_owned(self) -> int:
        """``m``: the rows (and entries of a vector) of every device, padding included."""
        return max(end - start for start, end in self.row_ranges)

    @property
    def padded_size(self) -> int:
        """``P m``: the entries of a vector in the padded layout (``n`` when ``P``
        divides ``n``)."""
        return self.nparts * self.n_owned

    @functools.cached_property
    def real_rows(self) -> np.ndarray:
        """``(P m,)`` bool: which entries of the padded layout are rows of ``A``."""
        m = self.n_owned
        return np.concatenate([np.arange(m) < end - start for start, end in self.row_ranges])

    @property
    def n_local_columns(self) -> int:
        """``m + H + 1``: the columns of a block in the ``[owned | halo | 0]`` numbering."""
        return self.n_owned + self.n_halo + 1

    def sharding(self) -> NamedSharding:
        """The `NamedSharding` of the stacked per-device arrays and of row-sharded vectors."""
        return NamedSharding(self.mesh, PartitionSpec(self.axis_name))

    @functools.cached_property
    def arrays(self) -> BlockArrays:
        """The `BlockArrays` of this layout, placed on its mesh (once per layout)."""
        return BlockArrays(*_device_arrays(self, self.local_indices, self.local_indptr,
                                           self.halo.send_positions, self.halo.recv_positions))

    @functools.cached_property
    def transposed(self) -> tuple[RowLayout, Exchange]:
        """``Aᵀ``'s layout over the same rows, and the `Exchange` that routes each stored
        value of ``A`` (a source slot on the owner of its row) to its slot in ``Aᵀ`` (on the
        owner of its column). Built once per layout, on the host."""
        n = self.shape[0]
        ids = np.arange(len(self.global_indices), dtype=np.int64)
        a = scipy.sparse.csr_array((ids + 1, self.global_indices, self.global_indptr),
                                   shape=self.shape)
        t = a.T.tocsr()
        t.sort_indices()
        source_ids = t.data - 1
        layout = _layout(t.indptr.astype(np.int64), t.indices.astype(np.int64), (n, n),
                         self.row_ranges, self.mesh, self.axis_name,
                         np.arange(len(source_ids)))
        owner_of_row = np.searchsorted([end for _, end in self.row_ranges],
                                       np.arange(n), side="right")
        rows = np.repeat(np.arange(n), np.diff(self.global_indptr))
        lists = {}
        for destination, (start, end) in enumerate(self.row_ranges):
            first, last = t.indptr[start], t.indptr[end]
            wanted = source_ids[first:last]  # A's canonical entries, in Aᵀ's slot order
            slots = np.arange(last - first)
            sources = owner_of_row[rows[wanted]]
            for source in np.unique(sources):
                mine = sources == source
                offset = self.global_indptr[self.row_ranges[source][0]]
                lists[(int(source), destination)] = (wanted[mine] - offset, slots[mine])
        routing = Exchange.from_lists(self.nparts, lists, dropped=layout.width)
        return layout, routing


def _layout(indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int],
            row_ranges: RowRanges, mesh: Mesh, axis_name: str, order: np.ndarray) -> RowLayout:
    """The `RowLayout` of a canonical global CSR pattern split by `row_ranges`."""
    nparts = len(row_ranges)
    plans = halo_plans(scipy.sparse.csr_array(
        (np.ones(len(indices), np.int8), indices, indptr), shape=shape), row_ranges)
    m = max(end - start for start, end in row_ranges)
    n_halo = max(plan.n_halo for plan in plans)
    nnz = tuple(int(indptr[end] - indptr[start]) for start, end in row_ranges)
    width = max(max(nnz), 1)
    local_indptr = np.zeros((nparts, m + 1), np.int32)
    local_indices = np.full((nparts, width), m + n_halo, np.int32)  # padding: the zero slot
    lists = {}
    for rank, ((start, end), plan) in enumerate(zip(row_ranges, plans)):
        rows = end - start
        local_indptr[rank, :rows + 1] = indptr[start:end + 1] - indptr[start]
        local_indptr[rank, rows + 1:] = nnz[rank]  # padding rows: empty
        local_indptr[rank, -1] = width  # padding entries close the last row
        columns = plan.local_indices(indices[indptr[start]:indptr[end]])
        columns[columns >= rows] += m - rows  # the halo after all m owned slots
        local_indices[rank, :nnz[rank]] = columns
        for q, positions in plan.sends():
            lists.setdefault((rank, q), [None, None])[0] = positions
        for q, part in plan.receives():
            lists.setdefault((q, rank), [None, None])[1] = m + np.arange(part.start, part.stop)
    halo = Exchange.from_lists(nparts, {pair: tuple(v) for pair, v in lists.items()},
                               dropped=m + n_halo + 1)
    return RowLayout(mesh=mesh, axis_name=axis_name, shape=shape, row_ranges=row_ranges,
                     plans=plans, halo=halo, n_halo=n_halo, nnz=nnz, width=width,
                     local_indptr=local_indptr, local_indices=local_indices,
                     global_indptr=indptr, global_indices=indices, order=order)


# -----------------------------------------------------------------------------
# The matrix


class BlockArrays(NamedTuple):
    """The integer arrays of a `ShardedCsrMatrix`, each with a leading device axis.

    Attributes:
      indices: ``(P, Z)`` local column indices in ``[owned | halo | 0]``.
      indptr: ``(P, m + 1)`` row pointers.
      send: ``(P, W)`` the halo exchange's send positions.
      recv: ``(P, W)`` its receive positions.
    """

    indices: jax.Array
    indptr: jax.Array
    send: jax.Array
    recv: jax.Array


@functools.partial(jax.tree_util.register_dataclass, data_fields=["values", "arrays"],
                   meta_fields=["layout"])
@dataclasses.dataclass(frozen=True)
class ShardedCsrMatrix:
    """A square sparse matrix split in blocks of rows over the devices of a 1D mesh.

    Built by `shard_rows`; see the module documentation for the layout. A pytree: `values`
    and `arrays` are its leaves (``(P, ...)`` arrays sharded over the mesh axis), `layout`
    its static metadata, so it can be passed to jitted functions and `jax.shard_map`.
    Differentiate with respect to `values`, e.g. through
    ``jax.grad(lambda v: f(A.with_values(v)))(A.values)``.

    Attributes:
      values: ``(P, Z)`` each device's stored values, zero-padded.
      arrays: the `BlockArrays`.
      layout: the `RowLayout`.

    Examples:
      A nonsymmetric matrix over 2 devices, its transpose routed between them, and values
      to and from the order of the global matrix:

      >>> import jax, numpy as np, scipy.sparse as sp
      >>> from jaxsolve.sharding import row_mesh, shard_rows
      >>> A = sp.csr_array(np.array([[4., 1, 0, 0], [0, 4, 0, 2], [3, 0, 4, 0], [0, 0, 1, 4]]))
      >>> A_sharded = shard_rows(A, row_mesh(devices=jax.devices("cpu")[:2]))
      >>> A_sharded.values
      Array([[4., 1., 4., 2.],
             [3., 4., 1., 4.]], dtype=float32)
      >>> bool(np.array_equal(A_sharded.T.todense(), A.toarray().T))
      True
      >>> A_sharded.global_values().tolist() == A.data.tolist()
      True
      >>> A_sharded.shard_values(10 * A.data)[1]
      Array([30., 40., 10., 40.], dtype=float32)
    """

    values: jax.Array
    arrays: BlockArrays
    layout: RowLayout

    @property
    def shape(self) -> tuple[int, int]:
        return self.layout.shape

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def mesh(self) -> Mesh:
        return self.layout.mesh

    @property
    def axis_name(self) -> str:
        return self.layout.axis_name

    @property
    def sharding(self) -> NamedSharding:
        """``NamedSharding(mesh, P(axis_name))``: how vectors in the padded layout (and
        ``b`` and ``x`` of length ``n`` when ``P`` divides ``n``) are sharded."""
        return self.layout.sharding()

    def shard_vector(self, v: Any) -> jax.Array:
        """``v`` of shape ``(n,)`` or ``(n, k)`` in the padded layout of the rows, sharded
        like them: ``(P m,)`` or ``(P m, k)``, device ``r``'s ``m`` entries its rows
        followed by zeros for its padding rows (none when ``P`` divides ``n``: then this is
        ``v`` placed with `sharding`). Works on traced arrays; `global_vector` inverts it.

        Examples:
          10 rows over 4 devices: 3, 3, 2 and 2 rows, each device one row of padding.

          >>> import jax, numpy as np, scipy.sparse as sp
          >>> from jaxsolve.sharding import row_mesh, shard_rows
          >>> A = shard_rows(sp.eye_array(10, format="csr"),
          ...                row_mesh(devices=jax.devices("cpu")[:4]))
          >>> A.shard_vector(np.arange(1.0, 11.0)).reshape(4, 3)
          Array([[ 1.,  2.,  3.],
                 [ 4.,  5.,  6.],
                 [ 7.,  8.,  0.],
                 [ 9., 10.,  0.]], dtype=float32)
        """
        v = jnp.asarray(v)
        layout = self.layout
        n, nparts, m = layout.shape[0], layout.nparts, layout.n_owned
        if v.ndim not in (1, 2) or v.shape[0] != n:
            raise ValueError(f"shard_vector: v must have shape ({n},) or ({n}, k), the rows "
                             f"of A, got {v.shape}.")
        if layout.padded_size != n:
            full = n - nparts * (m - 1)  # the devices with m real rows
            rest = v.shape[1:]
            head = v[:full * m].reshape((full, m) + rest)
            tail = v[full * m:].reshape((nparts - full, m - 1) + rest)
            tail = jnp.pad(tail, [(0, 0), (0, 1)] + [(0, 0)] * len(rest))
            v = jnp.concatenate([head, tail]).reshape((nparts * m,) + rest)
        return _placed(v, self.sharding)

    def global_vector(self, v: Any) -> jax.Array:
        """The inverse of `shard_vector`: ``(n,)`` or ``(n, k)`` from a vector in the padded
        layout (its padding entries dropped), replicated over the mesh."""
        v = jnp.asarray(v)
        layout = self.layout
        n, nparts, m = layout.shape[0], layout.nparts, layout.n_owned
        if v.ndim not in (1, 2) or v.shape[0] != layout.padded_size:
            raise ValueError(f"global_vector: v must have shape ({layout.padded_size},) or "
                             f"({layout.padded_size}, k), the padded layout, got {v.shape}.")
        if layout.padded_size != n:
            full = n - nparts * (m - 1)
            rest = v.shape[1:]
            blocks = v.reshape((nparts, m) + rest)
            v = jnp.concatenate([blocks[:full].reshape((full * m,) + rest),
                                 blocks[full:, :m - 1].reshape((n - full * m,) + rest)])
        return _placed(v, NamedSharding(self.mesh, PartitionSpec()))

    def with_values(self, values: Any) -> ShardedCsrMatrix:
        """The same layout with other ``(P, Z)`` values (e.g. traced ones)."""
        values = jnp.asarray(values)
        if values.shape != self.values.shape:
            raise ValueError(f"ShardedCsrMatrix.with_values: values must have shape "
                             f"{self.values.shape} (devices, padded entries), got {values.shape}; "
                             "use shard_values for values in the global matrix's order.")
        return dataclasses.replace(self, values=values)

    def shard_values(self, global_values: Any) -> jax.Array:
        """The ``(P, Z)`` stacked values of a matrix on the same pattern, from its ``(nnz,)``
        values in the order of the matrix given to `shard_rows`. Works on traced values."""
        global_values = jnp.asarray(global_values)
        layout = self.layout
        canonical = global_values[layout.order]
        pieces, offset = [], 0
        for count in layout.nnz:
            pieces.append(jnp.pad(canonical[offset:offset + count], (0, layout.width - count)))
            offset += count
        return jnp.stack(pieces)

    def global_values(self, values: Any = None) -> jax.Array:
        """The inverse of `shard_values`: ``(nnz,)`` values in the order of the matrix given
        to `shard_rows` (by default this matrix's own)."""
        values = self.values if values is None else jnp.asarray(values)
        layout = self.layout
        canonical = jnp.concatenate([values[rank, :count]
                                     for rank, count in enumerate(layout.nnz)])
        return jnp.zeros_like(canonical).at[layout.order].set(canonical)

    def todense(self) -> np.ndarray:
        """The global matrix as a dense NumPy array (for tests and small problems)."""
        layout = self.layout
        values = np.asarray(jax.device_get(self.global_values()))[layout.order]  # canonical
        return scipy.sparse.csr_array((values, layout.global_indices, layout.global_indptr),
                                      shape=layout.shape).toarray()

    def transpose(self) -> ShardedCsrMatrix:
        """``Aᵀ``, split over the same rows and devices; its values are routed between the
        devices (`RowLayout.transposed`), never gathered."""
        layout, routing = self.layout.transposed
        arrays = layout.arrays
        spec = PartitionSpec(self.axis_name)

        def route(values, send, recv):
            return routing.apply(self.axis_name, values[0], send[0], recv[0],
                                 jnp.zeros(layout.width, values.dtype))[None]

        values = shard_map(route, self.mesh, (spec, spec, spec), spec)(
            self.values, *_device_arrays(self.layout, routing.send_positions,
                                         routing.recv_positions))
        return ShardedCsrMatrix(values=values, arrays=arrays, layout=layout)

    @property
    def T(self) -> ShardedCsrMatrix:
        return self.transpose()

    def bytes_per_matvec(self, dtype: Any = None) -> dict[str, int]:
        """Per device, the bytes one product ``A x`` exchanges (the halo), from the plan.

        Returns:
          ``{"sent": ..., "received": ..., "padded": ...}``: the largest over the devices of
          the bytes sent and received (exact counts), and of those sent including the
          padding of the ``ppermute`` messages (what actually travels).
        """
        itemsize = np.dtype(self.dtype if dtype is None else dtype).itemsize
        halo = self.layout.halo
        return {"sent": int(halo.sent.max(initial=0)) * itemsize,
                "received": int(halo.received.max(initial=0)) * itemsize,
                "padded": halo.payload_widths() * itemsize}

    def __repr__(self) -> str:
        layout = self.layout
        return (f"ShardedCsrMatrix(shape={layout.shape}, dtype={self.dtype}, "
                f"devices={layout.nparts}, axis={layout.axis_name!r}, rows per device="
                f"{layout.n_owned}, halo={layout.n_halo}, nnz per device={list(layout.nnz)})")


def _placed(v: jax.Array, sharding: NamedSharding) -> jax.Array:
    """``v`` with ``sharding``: placed now, or constrained when traced."""
    if isinstance(v, jax.core.Tracer):
        return jax.lax.with_sharding_constraint(v, sharding)
    return jax.device_put(v, sharding)


def _device_arrays(layout: RowLayout, *arrays: np.ndarray) -> list[jax.Array]:
    sharding = layout.sharding()
    with jax.ensure_compile_time_eval():  # host setup, also while a jit traces
        return [jax.device_put(np.asarray(a, np.int32), sharding) for a in arrays]


def shard_rows(A: Any, mesh: Mesh, axis_name: str | None = None) -> ShardedCsrMatrix:
    """Splits a square sparse matrix into blocks of rows over the devices of a mesh.

    Device ``r`` of the mesh axis gets the rows ``partition_rows(n, P)[r]``: ``m = n / P``
    rows each when ``P`` divides ``n``, the same rows as its shard of a vector ``b`` placed
    with ``NamedSharding(mesh, P(axis_name))``; otherwise the first ``n mod P`` devices get
    ``m = ⌈n / P⌉`` rows and the others ``m − 1`` and one empty padding row (vectors then
    travel in the padded layout of `ShardedCsrMatrix.shard_vector`). Each device's
    `HaloPlan` becomes ``ppermute`` messages (the module documentation explains the layout).
    `jaxsolve.sparse.solve` solves with the result under `jax.shard_map`.

    Args:
      A: the global ``(n, n)`` matrix, with concrete values: a `scipy.sparse` matrix or
        array, a `jax.experimental.sparse` BCSR or BCOO (unbatched), or any object with CSR
        arrays ``indptr``, ``indices``, ``data`` (or ``values``) and ``shape`` (such as
        `jaxsolve.sparse.CsrMatrix`). Duplicate entries are not allowed; columns need not
        be sorted.
      mesh: a mesh with axis `axis_name`, e.g. `row_mesh`.
      axis_name: the axis to split rows over; may be omitted for a 1D mesh.

    Returns:
      A `ShardedCsrMatrix`.

    Raises:
      TypeError: if `A` is not a sparse matrix, or `mesh` not a `jax.sharding.Mesh`.
      ValueError: if `A` is not square, has fewer rows than the mesh axis has devices,
        stores an entry twice, or `axis_name` is not an axis of `mesh`.

    Examples:
      The 2D Poisson matrix of an 8 × 8 grid over 4 devices: each needs one grid row (8
      values) from each neighbouring block.

      >>> import jax, numpy as np, scipy.sparse as sp
      >>> from jaxsolve.sharding import row_mesh, shard_rows
      >>> T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(8, 8))
      >>> A = sp.kronsum(T, T, format="csr").astype(np.float32)
      >>> A_sharded = shard_rows(A, row_mesh(devices=jax.devices("cpu")[:4]))
      >>> A_sharded.layout.nnz, A_sharded.layout.n_halo  # per device
      ((68, 76, 76, 68), 16)
      >>> A_sharded.values.shape, A_sharded.bytes_per_matvec()
      ((4, 76), {'sent': 64, 'received': 64, 'padded': 64})
      >>> bool(np.array_equal(A_sharded.todense(), A.toarray()))
      True
    """
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_rows: mesh must be a jax.sharding.Mesh (e.g. from row_mesh), "
                        f"got {type(mesh).__name__}.")
    if axis_name is None:
        if len(mesh.axis_names) != 1:
            raise ValueError(f"shard_rows: the mesh has axes {mesh.axis_names}; pass "
                             "axis_name=, the one to split rows over.")
        axis_name = mesh.axis_names[0]
    if axis_name not in mesh.axis_names:
        raise ValueError(f"shard_rows: axis_name={axis_name!r} is not an axis of the mesh, "
                         f"whose axes are {mesh.axis_names}.")
    indptr, indices, data, shape = _global_csr(A)
    n, nparts = shape[0], mesh.shape[axis_name]
    if shape[0] != shape[1]:
        raise ValueError(f"shard_rows: A must be square, got shape {shape}.")
    if n < nparts:
        raise ValueError(f"shard_rows: A has {n} rows, fewer than the {nparts} devices of axis "
                         f"{axis_name!r}; every device needs at least one row.")
    rows = np.repeat(np.arange(n), np.diff(indptr))
    order = np.lexsort((indices[:indptr[-1]], rows))
    sorted_columns = indices[order]
    if np.any((np.diff(rows[order]) == 0) & (np.diff(sorted_columns) == 0)):
        raise ValueError("shard_rows: A stores some entry twice; sum duplicates first "
                         "(scipy: A.sum_duplicates()).")
    layout = _layout(indptr, sorted_columns, shape, partition_rows(n, nparts), mesh,
                     axis_name, order)
    arrays = layout.arrays
    canonical = np.asarray(data)[order]
    stacked = np.zeros((nparts, layout.width), canonical.dtype)
    offset = 0
    for rank, count in enumerate(layout.nnz):
        stacked[rank, :count] = canonical[offset:offset + count]
        offset += count
    values = jax.device_put(stacked, layout.sharding())
    return ShardedCsrMatrix(values=values, arrays=arrays, layout=layout)


def _global_csr(A: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """``(indptr, indices, data, shape)`` of `A` as host arrays (BCOO converted)."""
    if (not scipy.sparse.issparse(A) and getattr(A, "indptr", None) is None
            and getattr(A, "indices", None) is not None and np.ndim(A.indices) == 2):
        try:  # a BCOO: (nnz, 2) coordinates
            coordinates = np.asarray(A.indices)
            A = scipy.sparse.coo_array((np.asarray(A.data), (coordinates[:, 0],
                                                             coordinates[:, 1])),
                                       shape=A.shape)
        except (TypeError, jax.errors.TracerArrayConversionError) as error:
            raise TypeError(f"shard_rows: A must have concrete values: {error}") from error
    elif scipy.sparse.issparse(A):
        A = A.tocsr()
        if A.has_canonical_format is False:
            A.sum_duplicates()
    try:
        indptr, indices, data, shape = csr_arrays("shard_rows", "A", A)
    except jax.errors.TracerArrayConversionError as error:
        raise TypeError("shard_rows: A must have concrete values (call it outside jax.jit, "
                        "then use with_values for traced ones).") from error
    nnz = int(indptr[-1])
    return indptr, indices[:nnz], data[:nnz], shape
