"""The multicolor smoothers: Gauss-Seidel and DILU over the colors of ``A``'s graph.

A distance-1 coloring of ``A``'s graph (``i`` and ``j`` adjacent when ``a_ij ≠ 0`` or
``a_ji ≠ 0``) splits the unknowns into sets that do not couple: one color's unknowns are
updated at once from the others'.  Renumbering the unknowns color by color (the *color
order*) makes ``A`` a block matrix whose diagonal blocks are diagonal,

    ``A' = A[order][:, order] = L + D + U``,

``L`` (``U``) holding the entries whose column has an earlier (later) color than their
row.  Each color's rows are a contiguous range of ``A'``:

* ``MULTICOLOR_GS``: ``x_c ← x_c + ω D_c⁻¹ (b − L x − D x − U x)_c`` for each color ``c``
  in turn (``symmetric_GS``: then in reverse order; a *backward* sweep, a cycle's
  post-smoothing, visits the colors in reverse order only).  From ``x = 0`` the products
  with ``U`` (the colors not yet visited) are skipped in the first pass.
* ``MULTICOLOR_DILU``: ``x ← x + ω M⁻¹ (b − A x)`` with ``M = (E + L) E⁻¹ (E + U)`` and
  the diagonal ``E`` such that ``diag(M) = diag(A)``: ``e_i = a_ii − Σ_{j earlier}
  a_ij a_ji / e_j`` (AmgX's DILU).  ``M⁻¹`` is a forward substitution through ``L`` and a
  backward one through ``U``.

**One loop over the colors.**  A pass is a ``lax.fori_loop`` whose body updates one
*chunk*: at most ``chunk_rows`` consecutive rows of one color (a color of more rows is
cut into several chunks, which do not couple either).  The body reads a window of
``chunk_rows`` rows from where its chunk starts (of the vectors, and of ``L``'s and
``U``'s row pointers: its products run over the chunk's own entries of the whole ``L``
and ``U``, which are not copied) and masks what lies past the chunk, so that its shapes
are the same for every chunk: the compiled program does not grow with the number of
colors (unrolled per color, a 20-color level compiled one program per color and sweep;
one first call took 123 s), and a sweep costs about ``chunks × chunk_rows`` plus one
product with ``L`` and ``U``, a small multiple of one product with ``A``
(``chunk_rows`` is the mean color's size, so there are at most twice as many chunks as
colors).

The coloring depends on the pattern only, so it is host work of the *structure*:
:func:`multicolor_ordering` colors with native DSATUR (:func:`color_columns`, 2 colors on
the 5- and 7-point stencils, 4 on the 9-point, 8 on the 27-point) and builds ``L``'s and
``U``'s patterns and the chunks; the AMG structure does it once per level, and the setup
cache keeps it.  The pattern of a :class:`CsrMatrix` (or of a matrix-free operator's
``ColoringInfo``) is host data even while ``jax.jit`` traces the values, so there is no
traced-pattern case.  :func:`multicolor_data` (jit-able, differentiable) gathers the
blocks' values and, for DILU, computes ``E``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from ._coloring import color_columns
from ._csr_arrays import CsrArrays, CsrStructure

MULTICOLOR_SMOOTHERS = ("MULTICOLOR_GS", "MULTICOLOR_DILU")


# -----------------------------------------------------------------------------
# Structure (host)


@dataclasses.dataclass(frozen=True, eq=False)
class MulticolorOrdering:
    """A square pattern's distance-1 coloring and its ``L`` and ``U`` in the color order
    (host).

    Attributes:
      colors: ``(n,)`` the color of each row.
      order: ``(n,)`` the row of ``A`` at each position of the color order (rows sorted by
        color, stably).
      color_starts: ``(n_colors + 1,)`` where each color's rows begin in the color order.
      lower, upper: the patterns of ``L`` and ``U`` (``n × n``, rows and columns in the
        color order).
      lower_positions, upper_positions: where each of their entries' values sits among
        ``A``'s values.
      transposed: for DILU, for each entry ``a_ij`` of ``lower``, the position of ``a_ji``
        among ``A``'s values (-1 where it is not stored); else None.
    """

    colors: np.ndarray
    order: np.ndarray
    color_starts: np.ndarray
    lower: CsrStructure
    upper: CsrStructure
    lower_positions: np.ndarray
    upper_positions: np.ndarray
    transposed: np.ndarray | None

    @property
    def n_colors(self) -> int:
        return self.color_starts.size - 1

    @property
    def n_rows(self) -> int:
        return self.order.size

    def default_chunk_rows(self) -> int:
        """The mean color's rows: at most twice as many chunks as colors."""
        return max(1, -(-self.n_rows // max(self.n_colors, 1)))

    def on_device(self, chunk_rows: int | None = None) -> MulticolorArrays:
        """The index arrays, cut into chunks of at most ``chunk_rows`` rows (the mean
        color's by default), sent to the device (held by the caller, not by the ordering:
        a structure is kept as a static argument of compiled setups)."""
        return jax.device_put(self.host_arrays(chunk_rows))

    def host_arrays(self, chunk_rows: int | None = None, *, rows: int | None = None,
                    n_chunks: int | None = None, lower_nnz: int | None = None,
                    upper_nnz: int | None = None) -> MulticolorArrays:
        """:meth:`on_device`'s arrays on the host, optionally padded to a larger shape:
        ``rows`` rows (the extra ones padding, outside every chunk), ``n_chunks`` chunks
        (the extra ones empty), and ``L`` and ``U`` of ``lower_nnz`` and ``upper_nnz``
        entries (the extra ones zero)."""
        chunk_rows = self.default_chunk_rows() if chunk_rows is None else chunk_rows
        n = self.n_rows
        rows = n if rows is None else rows
        starts, counts = self.chunks(chunk_rows)
        own = (starts.size, self.lower.nnz, self.upper.nnz)
        n_chunks, lower_nnz, upper_nnz = (
            mine if given is None else given
            for mine, given in zip(own, (n_chunks, lower_nnz, upper_nnz), strict=True))
        if rows < n or min(np.subtract((n_chunks, lower_nnz, upper_nnz), own)) < 0:
            raise ValueError(f"a padded shape must hold the ordering's own {own}")
        extra = n_chunks - starts.size
        order = np.full(rows, rows, np.int32)  # a padding position reads 0
        order[:n] = self.order
        inverse = np.full(rows, rows, np.int32)
        inverse[:n] = _inverse(self.order)

        def block(pattern, positions, size):
            indptr = np.full(rows + chunk_rows + 1, pattern.nnz, np.int32)
            indptr[:n + 1] = pattern.indptr
            indices = np.zeros(size, np.int32)
            indices[:pattern.nnz] = pattern.indices
            gather = np.full(size, -1, np.int32)  # -1: a value of 0
            gather[:pattern.nnz] = positions
            return CsrArrays(values=gather, indices=indices, indptr=indptr)

        transposed = None
        if self.transposed is not None:
            transposed = np.full(lower_nnz, -1, np.int32)
            transposed[:self.lower.nnz] = self.transposed
        return MulticolorArrays(
            order=order, inverse=inverse,
            chunk_starts=np.concatenate([starts, np.zeros(extra, np.int32)]),
            chunk_counts=np.concatenate([counts, np.zeros(extra, np.int32)]),
            lower=block(self.lower, self.lower_positions, lower_nnz),
            upper=block(self.upper, self.upper_positions, upper_nnz),
            transposed=transposed, chunk_rows=chunk_rows)

    def chunks(self, chunk_rows: int) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, counts)``: each color's rows cut into chunks of at most
        ``chunk_rows``, in the color order."""
        sizes = np.diff(self.color_starts)
        pieces = -(-sizes // chunk_rows)
        color = np.repeat(np.arange(sizes.size), pieces)
        within = np.arange(color.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        starts = self.color_starts[color] + within * chunk_rows
        counts = np.minimum(chunk_rows, self.color_starts[color + 1] - starts)
        return starts.astype(np.int32), counts.astype(np.int32)


def multicolor_ordering(pattern: CsrStructure, dilu: bool) -> MulticolorOrdering:
    """Colors a square pattern's graph (native DSATUR) and splits it into ``L`` and ``U``
    in the color order.

    Host work in ``O(nnz)`` besides the coloring (and, with ``dilu``, a sort of the
    entries to find each transposed one).
    """
    n, nnz = pattern.n_rows, pattern.nnz
    graph = scipy.sparse.csr_array((np.ones(nnz, bool), pattern.indices, pattern.indptr),
                                   shape=(n, pattern.n_cols))
    colors = color_columns(graph, distance=1)
    order = np.argsort(colors, kind="stable").astype(np.int32)
    inverse = _inverse(order)
    # The entries row by row in the color order: row k holds A's row order[k].
    lengths = np.diff(pattern.indptr)[order]
    first = np.concatenate([[0], np.cumsum(lengths)])
    entries = (np.repeat(pattern.indptr[:-1][order] - first[:-1], lengths)
               + np.arange(nnz)).astype(np.int32)
    entry_rows = np.repeat(np.arange(n, dtype=np.int32), lengths)
    columns = inverse[pattern.indices[entries]]
    row_color, column_color = colors[order][entry_rows], colors[pattern.indices[entries]]

    def block(mask):
        counts = np.bincount(entry_rows[mask], minlength=n)
        return (CsrStructure(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32),
                             columns[mask].astype(np.int32), n), entries[mask])

    lower, lower_positions = block(column_color < row_color)
    upper, upper_positions = block(column_color > row_color)
    transposed = None
    if dilu:  # each entry's (row, column) as one sortable key, to look up a_ji
        rows = pattern.row_ids
        key = rows.astype(np.int64) * n + pattern.indices
        by_key = np.argsort(key, kind="stable")
        sorted_key = key[by_key]
        wanted = pattern.indices[lower_positions].astype(np.int64) * n + rows[lower_positions]
        at = np.minimum(np.searchsorted(sorted_key, wanted), max(sorted_key.size - 1, 0))
        transposed = np.where(sorted_key[at] == wanted, by_key[at], -1).astype(np.int32)
    color_starts = np.concatenate([[0], np.cumsum(np.bincount(colors))]).astype(np.int32)
    return MulticolorOrdering(colors=colors, order=order, color_starts=color_starts,
                              lower=lower, upper=upper, lower_positions=lower_positions,
                              upper_positions=upper_positions, transposed=transposed)


def _inverse(order: np.ndarray) -> np.ndarray:
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size, dtype=order.dtype)
    return inverse


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["order", "inverse", "chunk_starts", "chunk_counts", "lower",
                                "upper", "transposed"],
                   meta_fields=["chunk_rows"])
@dataclasses.dataclass(frozen=True)
class MulticolorArrays:
    """A :class:`MulticolorOrdering`'s index arrays, chunked (a pytree; host or device).

    Attributes:
      order: ``(rows,)`` the row at each position of the color order (``rows``, past the
        end, at a padding position).
      inverse: ``(rows,)`` each row's position in the color order (``rows`` for a padding
        row).
      chunk_starts, chunk_counts: ``(chunks,)`` each chunk's first position and rows.
      lower, upper: ``L`` and ``U`` in the color order; their ``values`` hold, for now,
        where each entry's value sits among ``A``'s (-1: zero), and their ``indptr`` runs
        ``chunk_rows`` rows past the last, so that a chunk's window never leaves it.
      transposed: for DILU, aligned with ``lower``'s entries, the positions of ``a_ji``
        (-1: zero); else None.
      chunk_rows: the static window size (see the module); the number of colors is not
        one: orderings of other colors padded to one shape share programs.
    """

    order: np.ndarray | jax.Array
    inverse: np.ndarray | jax.Array
    chunk_starts: np.ndarray | jax.Array
    chunk_counts: np.ndarray | jax.Array
    lower: CsrArrays
    upper: CsrArrays
    transposed: np.ndarray | jax.Array | None
    chunk_rows: int


# -----------------------------------------------------------------------------
# Numbers (jit-able)


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["order", "inverse", "chunk_starts", "chunk_counts",
                                "diagonal", "scale", "lower", "upper"],
                   meta_fields=["chunk_rows"])
@dataclasses.dataclass(frozen=True)
class MulticolorData:
    """A multicolor smoother's numbers, in the color order (a pytree).

    Attributes:
      order, inverse, chunk_starts, chunk_counts: as :class:`MulticolorArrays`'.
      diagonal: ``(rows + chunk_rows,)`` ``diag(A)`` in the color order (zero past the
        rows).
      scale: ``(rows + chunk_rows,)`` ``1 / d`` (Gauss-Seidel) or DILU's ``1 / e``, zero
        where the divisor is and past the rows.
      lower, upper: ``L`` and ``U`` with their values.
      chunk_rows: the static window size.
    """

    order: jax.Array
    inverse: jax.Array
    chunk_starts: jax.Array
    chunk_counts: jax.Array
    diagonal: jax.Array
    scale: jax.Array
    lower: CsrArrays
    upper: CsrArrays
    chunk_rows: int

    @property
    def n_rows(self) -> int:
        return self.order.shape[-1]


def multicolor_data(arrays: MulticolorArrays, values: jax.Array,
                    diagonal: jax.Array) -> MulticolorData:
    """The smoother's numbers for ``A``'s ``values`` (DILU's when ``arrays.transposed``)."""
    lower = arrays.lower._replace(values=_take(values, arrays.lower.values))
    upper = arrays.upper._replace(values=_take(values, arrays.upper.values))
    diagonal = _padded(_take(diagonal, arrays.order), arrays.chunk_rows)
    data = MulticolorData(order=arrays.order, inverse=arrays.inverse,
                          chunk_starts=arrays.chunk_starts, chunk_counts=arrays.chunk_counts,
                          diagonal=diagonal, scale=safe_inverse(diagonal), lower=lower,
                          upper=upper, chunk_rows=arrays.chunk_rows)
    if arrays.transposed is None:
        return data
    # DILU: e_c = d_c − Σ_{j earlier} a_ij a_ji / e_j, chunk after chunk.
    products = lower._replace(values=lower.values * _take(values, arrays.transposed))

    def chunk(k, scale):
        removed = _chunk_product(data, products, k, scale)
        return _set_chunk(data, k, scale, safe_inverse(_window(data, diagonal, k) - removed))

    scale = jax.lax.fori_loop(0, data.chunk_starts.shape[0], chunk, jnp.zeros_like(diagonal))
    return dataclasses.replace(data, scale=scale)


def safe_inverse(d: jax.Array) -> jax.Array:
    """``1 / d``, and 0 where ``d`` is (a row with a zero diagonal is left unchanged)."""
    return jnp.where(d != 0, 1 / jnp.where(d != 0, d, 1), 0)


def _take(v: jax.Array, index: jax.Array) -> jax.Array:
    """``v[index]``, and 0 where ``index`` is negative or past the end."""
    return v.at[jnp.where(index < 0, v.shape[0], index)].get(mode="fill", fill_value=0)


def _padded(v: jax.Array, extra: int) -> jax.Array:
    return jnp.concatenate([v, jnp.zeros(extra, v.dtype)])


# -----------------------------------------------------------------------------
# Padding to a common shape (the diagonal blocks of a sharded solve)


class ColorShape(NamedTuple):
    """The static shape of a padded ordering's arrays (see :class:`MulticolorArrays`)."""

    chunk_rows: int
    n_chunks: int
    lower_nnz: int
    upper_nnz: int


def common_color_shape(orderings: Sequence[MulticolorOrdering]) -> ColorShape:
    """The smallest :class:`ColorShape` that each of ``orderings`` pads to: chunks of the
    largest mean color, and the most chunks and entries."""
    chunk_rows = max(ordering.default_chunk_rows() for ordering in orderings)
    return ColorShape(
        chunk_rows=chunk_rows,
        n_chunks=max(ordering.chunks(chunk_rows)[0].size for ordering in orderings),
        lower_nnz=max(o.lower.nnz for o in orderings),
        upper_nnz=max(o.upper.nnz for o in orderings))


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["order", "inverse", "chunk_starts", "chunk_counts", "lower",
                                "upper"],
                   meta_fields=["chunk_rows"])
@dataclasses.dataclass(frozen=True)
class MulticolorPadding:
    """How one ordering's :class:`MulticolorData` pads to a :class:`ColorShape` for a level
    of more rows (a pytree of host or device arrays; :func:`multicolor_padding` builds it).

    The padding positions follow the ordering's and hold zeros (no diagonal, no scale, no
    entries, in no chunk), so a sweep never changes them.  The fields are the padded
    :class:`MulticolorArrays`', except that ``lower``'s and ``upper``'s ``values`` hold the
    positions of their entries among the ordering's own (-1: a padding entry).
    """

    order: np.ndarray | jax.Array
    inverse: np.ndarray | jax.Array
    chunk_starts: np.ndarray | jax.Array
    chunk_counts: np.ndarray | jax.Array
    lower: CsrArrays
    upper: CsrArrays
    chunk_rows: int


def padded_ordering(ordering: MulticolorOrdering, shape: ColorShape,
                    rows: int) -> MulticolorArrays:
    """``ordering``'s arrays (host) padded to ``shape`` for a level of ``rows`` rows (at
    least the ordering's): padding rows in no chunk and padding chunks empty, so the
    multicolor data computed from them (:func:`multicolor_data`) leave the padding at
    zero."""
    return ordering.host_arrays(shape.chunk_rows, rows=rows, n_chunks=shape.n_chunks,
                                lower_nnz=shape.lower_nnz, upper_nnz=shape.upper_nnz)


def multicolor_padding(ordering: MulticolorOrdering, shape: ColorShape,
                       rows: int) -> MulticolorPadding:
    """The host arrays padding ``ordering``'s data to ``shape`` for a level of ``rows``
    rows (``rows`` at least the ordering's; the extra ones are the level's padding rows):
    :func:`padded_ordering`'s, ``L``'s and ``U``'s values the positions of their entries."""
    arrays = padded_ordering(ordering, shape, rows)

    def own(block, nnz):  # the padded entry k holds the ordering's entry k
        index = np.arange(block.values.size, dtype=np.int32)
        return block._replace(values=np.where(index < nnz, index, -1).astype(np.int32))

    return MulticolorPadding(
        order=arrays.order, inverse=arrays.inverse, chunk_starts=arrays.chunk_starts,
        chunk_counts=arrays.chunk_counts, lower=own(arrays.lower, ordering.lower.nnz),
        upper=own(arrays.upper, ordering.upper.nnz), chunk_rows=arrays.chunk_rows)


def padded_data(data: MulticolorData, padding: MulticolorPadding) -> MulticolorData:
    """``data`` padded as ``padding`` says (jit-able): every ordering padded to one
    :class:`ColorShape` gives data of one shape, whose sweeps leave the padding at zero."""
    arrays = padding
    n, rows = data.n_rows, arrays.order.shape[-1]

    def vector(v):
        return _padded(v[:n], rows - n + arrays.chunk_rows)

    return MulticolorData(
        order=arrays.order, inverse=arrays.inverse, chunk_starts=arrays.chunk_starts,
        chunk_counts=arrays.chunk_counts, diagonal=vector(data.diagonal),
        scale=vector(data.scale),
        lower=arrays.lower._replace(values=_take(data.lower.values, arrays.lower.values)),
        upper=arrays.upper._replace(values=_take(data.upper.values, arrays.upper.values)),
        chunk_rows=arrays.chunk_rows)


# -----------------------------------------------------------------------------
# Sweeps


def multicolor_relax(matvec, data: MulticolorData, solver: str, omega: float,
                     symmetric: bool, b: jax.Array, x: jax.Array | None,
                     sweeps: int, backward: bool = False) -> jax.Array | None:
    """``sweeps`` sweeps of ``MULTICOLOR_GS`` or ``MULTICOLOR_DILU`` from ``x`` (None: 0).

    ``backward``: a Gauss-Seidel sweep visits the colors last to first (the post-smoothing
    of a cycle, so that it is the adjoint of the pre-smoothing); a symmetric sweep and DILU,
    symmetric already, are the same either way.
    """
    omega = jnp.asarray(omega, b.dtype)
    if solver == "MULTICOLOR_DILU":
        for _ in range(sweeps):
            residual = b if x is None else b - matvec(x)
            step = omega * _from_color_order(data, _dilu_solve(
                data, _to_color_order(data, residual)))
            x = step if x is None else x + step
        return x
    if sweeps == 0:
        return x
    b = _to_color_order(data, b)  # Gauss-Seidel stays in the color order for all its sweeps
    x = None if x is None else _to_color_order(data, x)
    passes = ((backward and not symmetric,) + (True,) * symmetric) * sweeps  # backward?
    if x is None:  # a pass from zero skips the colors not visited yet: a loop of its own
        x, passes = _gauss_seidel(data, omega, b, None, passes[:1]), passes[1:]
    if passes:
        x = _gauss_seidel(data, omega, b, x, passes)
    return _from_color_order(data, x)


def _to_color_order(data: MulticolorData, v: jax.Array) -> jax.Array:
    """``v`` in the color order, with ``chunk_rows`` zeros past its end for the windows.

    A padding position (``order`` past ``v``'s end) reads the zero appended to ``v``: a
    plain gather, where ``_take``'s bounds checks compiled four kernels more at each of a
    cycle's levels.
    """
    return _padded(_gather(_padded(v, 1), data.order), data.chunk_rows)


def _from_color_order(data: MulticolorData, v: jax.Array) -> jax.Array:
    """``v`` (in the color order, with its zeros past the end) back in the rows' order: a
    padding row reads a padding position (``inverse`` is ``rows``), which holds zero."""
    return _gather(v, data.inverse)


def _gather(v: jax.Array, index: jax.Array) -> jax.Array:
    """``v[index]`` for indices known to lie within ``v``: one gather, without the bounds
    handling and the wrapping of negative indices of NumPy-style indexing."""
    return jax.lax.gather(
        v, index[:, None], jax.lax.GatherDimensionNumbers(
            offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,)),
        slice_sizes=(1,), unique_indices=True,
        mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _loop(data: MulticolorData, body, init, reverse: bool = False):
    """``body(k, carry)`` over the chunks ``k``, first to last (or last to first)."""
    count = data.chunk_starts.shape[0]
    if reverse:
        return jax.lax.fori_loop(0, count, lambda i, c: body(count - 1 - i, c), init)
    return jax.lax.fori_loop(0, count, body, init)


def _window(data: MulticolorData, v: jax.Array, k: jax.Array) -> jax.Array:
    """The ``chunk_rows`` entries of ``v`` from chunk ``k``'s first row."""
    return jax.lax.dynamic_slice(v, (data.chunk_starts[k],), (data.chunk_rows,))


def _set_chunk(data: MulticolorData, k: jax.Array, v: jax.Array, new: jax.Array) -> jax.Array:
    """``v`` with chunk ``k``'s rows from ``new`` (a window; the rows past the chunk kept)."""
    inside = jnp.arange(data.chunk_rows, dtype=jnp.int32) < data.chunk_counts[k]
    return jax.lax.dynamic_update_slice(
        v, jnp.where(inside, new, _window(data, v, k)), (data.chunk_starts[k],))


def _chunk_product(data: MulticolorData, block: CsrArrays, k: jax.Array,
                   x: jax.Array) -> jax.Array:
    """Chunk ``k``'s rows of ``block`` (``L`` or ``U``) times ``x``, as a window (zero
    past the chunk's rows).

    The product takes the window's row pointers as they are, into the whole of
    ``block``'s values and indices (the native kernel reads row ``i``'s entries from
    ``indptr[i]`` to ``indptr[i + 1]``, wherever the first row starts): copying the
    window's entries out first compiled three kernels a product, in every loop of every
    level.
    """
    if block.indices.shape[0] == 0:
        return jnp.zeros(data.chunk_rows, x.dtype)
    indptr = jax.lax.dynamic_slice(block.indptr, (data.chunk_starts[k],),
                                   (data.chunk_rows + 1,))
    window = block._replace(indptr=jnp.minimum(indptr, indptr[data.chunk_counts[k]]))
    return window.matvec(x).astype(x.dtype)


def _gauss_seidel(data: MulticolorData, omega: jax.Array, b: jax.Array,
                  x: jax.Array | None, backward: tuple[bool, ...]) -> jax.Array:
    """Gauss-Seidel passes over the chunks (in the color order), one after the other, the
    ``i``-th backward where ``backward[i]``: one loop over all their chunks, so that a
    symmetric sweep or several sweeps compile to one loop, not one each.  From ``x = 0``
    (None), one pass.

    A chunk's coupling to the other colors is ``L x + U x`` in either direction (a
    backward pass's ``U x + L x``, the same sum).
    """
    zero = x is None  # the colors not visited yet are zero: their products are skipped
    if zero and len(backward) != 1:
        raise ValueError("a Gauss-Seidel from x = 0 is one pass")
    x = jnp.zeros_like(b) if zero else x
    count = data.chunk_starts.shape[0]

    def chunk(i, x):
        k = i % count if len(backward) > 1 else i
        if len(set(backward)) > 1:
            k = jnp.where(jnp.asarray(backward)[i // count], count - 1 - k, k)
        elif backward[0]:
            k = count - 1 - k
        if zero:
            coupled = _chunk_product(data, data.upper if backward[0] else data.lower, k, x)
        else:
            coupled = (_chunk_product(data, data.lower, k, x)
                       + _chunk_product(data, data.upper, k, x))
        own = _window(data, x, k)
        residual = _window(data, b, k) - coupled - _window(data, data.diagonal, k) * own
        return _set_chunk(data, k, x, own + omega * _window(data, data.scale, k) * residual)

    return jax.lax.fori_loop(0, count * len(backward), chunk, x)


def _dilu_solve(data: MulticolorData, r: jax.Array) -> jax.Array:
    """``M⁻¹ r`` for ``M = (E + L) E⁻¹ (E + U)``, in the color order."""
    def forward(k, y):  # (E + L) y = r
        lower = _chunk_product(data, data.lower, k, y)
        return _set_chunk(data, k, y, _window(data, data.scale, k) * (_window(data, r, k) - lower))

    y = _loop(data, forward, jnp.zeros_like(r))

    def backward(k, z):  # (E + U) z = E y
        upper = _chunk_product(data, data.upper, k, z)
        return _set_chunk(data, k, z, _window(data, y, k) - _window(data, data.scale, k) * upper)

    return _loop(data, backward, y, reverse=True)
