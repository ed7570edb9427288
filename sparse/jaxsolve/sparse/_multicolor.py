"""The multicolor smoothers: Gauss-Seidel and DILU over the colors of ``A``'s graph.

A distance-1 coloring of ``A``'s graph (``i`` and ``j`` adjacent when ``a_ij ≠ 0`` or
``a_ji ≠ 0``) splits the unknowns into sets that do not couple: one color's unknowns are
updated at once from the others'.  Renumbering the unknowns color by color (the *color
order*) makes ``A`` a block matrix whose diagonal blocks are diagonal,

    ``A' = A[order][:, order] = L + D + U``,

``L`` (``U``) holding the entries whose column has an earlier (later) color than their
row.  Each color's rows are a contiguous range of ``A'``; its rows of ``L`` and of ``U``
are stored as two CSR blocks of their own, so that updating one color costs a product
with that color's rows only, and a sweep over all colors costs about one product with
``A`` in total (not one per color):

* ``MULTICOLOR_GS``: ``x_c ← x_c + ω D_c⁻¹ (b − L x − D x − U x)_c`` for each color ``c``
  in turn (``symmetric_GS``: then in reverse order).  From ``x = 0`` the products with
  the colors not yet visited are skipped.
* ``MULTICOLOR_DILU``: ``x ← x + ω M⁻¹ (b − A x)`` with ``M = (E + L) E⁻¹ (E + U)`` and
  the diagonal ``E`` such that ``diag(M) = diag(A)``: ``e_i = a_ii − Σ_{j earlier}
  a_ij a_ji / e_j`` (AmgX's DILU).  ``M⁻¹`` is a forward substitution through the blocks
  of ``L`` and a backward one through those of ``U``.

The coloring depends on the pattern only, so it is host work of the *structure*:
:func:`multicolor_ordering` colors with native DSATUR (:func:`color_columns`, 2 colors on
the 5- and 7-point stencils, 4 on the 9-point, 8 on the 27-point) and builds the blocks'
patterns; the AMG structure does it once per level, and the setup cache keeps it.  The
pattern of a :class:`CsrMatrix` (or of a matrix-free operator's ``ColoringInfo``) is host
data even while ``jax.jit`` traces the values, so there is no traced-pattern case: with no
structure cached yet, the first trace builds one on the host.  :func:`multicolor_data`
(jit-able, differentiable) gathers the blocks' values and, for DILU, computes ``E``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from ._coloring import color_columns
from ._csr_arrays import CsrArrays, CsrStructure

MULTICOLOR_SMOOTHERS = ("MULTICOLOR_GS", "MULTICOLOR_DILU")


class MulticolorArrays(NamedTuple):
    """A :class:`MulticolorOrdering`'s index arrays on the device (a pytree).

    The blocks' values are empty placeholders; :func:`multicolor_data` gathers them.
    """

    order: jax.Array
    inverse: jax.Array
    lower: tuple[CsrArrays, ...]
    upper: tuple[CsrArrays, ...]
    lower_positions: tuple[jax.Array, ...]
    upper_positions: tuple[jax.Array, ...]
    transposed: tuple[jax.Array, ...] | None


@dataclasses.dataclass(frozen=True, eq=False)
class MulticolorOrdering:
    """A square pattern's distance-1 coloring and its blocks in the color order (host).

    Attributes:
      colors: ``(n,)`` the color of each row.
      order: ``(n,)`` the row of ``A`` at each position of the color order (rows sorted by
        color, stably).
      lower: per color, the pattern of its rows of ``L``: the entries whose column has an
        earlier color, columns numbered in the color order.
      upper: per color, the pattern of its rows of ``U`` (columns of later colors).
      lower_positions, upper_positions: per color, where each block entry's value sits
        among ``A``'s values.
      transposed: for DILU, per color, the position of ``a_ji`` among ``A``'s values for
        each entry ``a_ij`` of ``lower`` (-1 where it is not stored); else None.
    """

    colors: np.ndarray
    order: np.ndarray
    lower: tuple[CsrStructure, ...]
    upper: tuple[CsrStructure, ...]
    lower_positions: tuple[np.ndarray, ...]
    upper_positions: tuple[np.ndarray, ...]
    transposed: tuple[np.ndarray, ...] | None

    @property
    def n_colors(self) -> int:
        return len(self.lower)

    def on_device(self) -> MulticolorArrays:
        """The index arrays, sent to the device (held by the caller, not by the ordering:
        a structure is kept as a static argument of compiled setups)."""
        put = jax.device_put
        return MulticolorArrays(
            order=put(self.order), inverse=put(_inverse(self.order)),
            lower=tuple(_pattern_arrays(p) for p in self.lower),
            upper=tuple(_pattern_arrays(p) for p in self.upper),
            lower_positions=tuple(put(p) for p in self.lower_positions),
            upper_positions=tuple(put(p) for p in self.upper_positions),
            transposed=None if self.transposed is None else tuple(
                put(t) for t in self.transposed))


def multicolor_ordering(pattern: CsrStructure, dilu: bool) -> MulticolorOrdering:
    """Colors a square pattern's graph (native DSATUR) and splits it into color blocks.

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
    starts = np.concatenate([[0], np.cumsum(np.bincount(colors))]).astype(np.int64)
    rows = key = None
    if dilu:  # each entry's (row, column) as one sortable key, to look up a_ji
        rows = pattern.row_ids
        key = rows.astype(np.int64) * n + pattern.indices
        by_key = np.argsort(key, kind="stable")
        key = (key[by_key], by_key)

    def blocks(mask):
        patterns, positions, transposed = [], [], []
        for c in range(starts.size - 1):
            begin, end = starts[c], starts[c + 1]
            inside = slice(first[begin], first[end])
            keep = mask[inside]
            counts = np.bincount(entry_rows[inside][keep] - begin, minlength=end - begin)
            patterns.append(CsrStructure(
                np.concatenate([[0], np.cumsum(counts)]).astype(np.int32),
                columns[inside][keep].astype(np.int32), n))
            positions.append(entries[inside][keep])
            if key is not None:
                transposed.append(_transposed_positions(key, pattern, positions[-1], rows, n))
        return tuple(patterns), tuple(positions), tuple(transposed)

    lower, lower_positions, transposed = blocks(column_color < row_color)
    upper, upper_positions, _ = blocks(column_color > row_color)
    return MulticolorOrdering(colors=colors, order=order, lower=lower, upper=upper,
                              lower_positions=lower_positions,
                              upper_positions=upper_positions,
                              transposed=transposed if dilu else None)


def _inverse(order: np.ndarray) -> np.ndarray:
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size, dtype=order.dtype)
    return inverse


def _transposed_positions(key: tuple[np.ndarray, np.ndarray], pattern: CsrStructure,
                          positions: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """For the entries ``a_ij`` at ``positions``, the positions of ``a_ji`` (or -1).

    ``key`` is every entry's ``i n + j``, sorted, and the sorting permutation.
    """
    sorted_key, by_key = key
    wanted = pattern.indices[positions].astype(np.int64) * n + rows[positions]
    at = np.minimum(np.searchsorted(sorted_key, wanted), max(sorted_key.size - 1, 0))
    return np.where(sorted_key[at] == wanted, by_key[at], -1).astype(np.int32)


def _pattern_arrays(pattern: CsrStructure) -> CsrArrays:
    return pattern.on_device(jnp.zeros(0, jnp.int32))  # values: replaced in each setup


# -----------------------------------------------------------------------------
# Numbers (jit-able)


class MulticolorData(NamedTuple):
    """A multicolor smoother's numbers, in the color order (a pytree).

    Attributes:
      order, inverse: the color order (see :class:`MulticolorOrdering`) and its inverse.
      diagonal: ``(n,)`` ``diag(A)`` in the color order.
      scale: ``(n,)`` ``1 / d`` (Gauss-Seidel) or DILU's ``1 / e``, in the color order,
        zero where the divisor is.
      lower, upper: per color, its rows of ``L`` and ``U`` (block shapes give each color's
        range of rows: they are static).
    """

    order: jax.Array
    inverse: jax.Array
    diagonal: jax.Array
    scale: jax.Array
    lower: tuple[CsrArrays, ...]
    upper: tuple[CsrArrays, ...]


def multicolor_data(arrays: MulticolorArrays, values: jax.Array,
                    diagonal: jax.Array) -> MulticolorData:
    """The smoother's numbers for ``A``'s ``values`` (DILU's when ``arrays.transposed``)."""
    lower = tuple(block._replace(values=values[positions])
                  for block, positions in zip(arrays.lower, arrays.lower_positions, strict=True))
    upper = tuple(block._replace(values=values[positions])
                  for block, positions in zip(arrays.upper, arrays.upper_positions, strict=True))
    diagonal = diagonal[arrays.order]
    if arrays.transposed is None:
        scale = safe_inverse(diagonal)
    else:  # e_c = d_c − Σ_{j earlier} a_ij a_ji / e_j, color after color
        scale = jnp.zeros_like(diagonal)
        for (begin, end), block, transposed in zip(_ranges(lower), lower, arrays.transposed,
                                                   strict=True):
            if block.indices.shape[0]:
                terms = (block.values * jnp.where(transposed >= 0,
                                                  values[jnp.maximum(transposed, 0)], 0)
                         * scale[block.indices])
                removed = jax.ops.segment_sum(terms, block.row_ids, num_segments=end - begin,
                                              indices_are_sorted=True)
            else:
                removed = 0
            scale = jax.lax.dynamic_update_slice(
                scale, safe_inverse(diagonal[begin:end] - removed), (begin,))
    return MulticolorData(order=arrays.order, inverse=arrays.inverse, diagonal=diagonal,
                          scale=scale, lower=lower, upper=upper)


def safe_inverse(d: jax.Array) -> jax.Array:
    """``1 / d``, and 0 where ``d`` is (a row with a zero diagonal is left unchanged)."""
    return jnp.where(d != 0, 1 / jnp.where(d != 0, d, 1), 0)


def _ranges(blocks: tuple[CsrArrays, ...]) -> list[tuple[int, int]]:
    """Each color's ``[begin, end)`` rows in the color order, from its block's shape."""
    bounds = np.concatenate([[0], np.cumsum([block.n_rows for block in blocks])])
    return [(int(b), int(e)) for b, e in zip(bounds[:-1], bounds[1:])]


# -----------------------------------------------------------------------------
# Padding to a common shape (the diagonal blocks of a sharded solve)


class ColorShape(NamedTuple):
    """The static shape of a padded ordering: per color, its rows and the entries of its
    blocks of ``L`` and ``U``."""

    rows: tuple[int, ...]
    lower_nnz: tuple[int, ...]
    upper_nnz: tuple[int, ...]


def common_color_shape(orderings: Sequence[MulticolorOrdering]) -> ColorShape:
    """The smallest :class:`ColorShape` that each of ``orderings`` pads to: the most colors,
    and per color the most rows and the most entries (a color an ordering lacks is empty)."""
    n_colors = max(ordering.n_colors for ordering in orderings)

    def most(size, blocks_of):
        return tuple(max((size(blocks_of(o)[c]) for o in orderings if c < o.n_colors),
                         default=0) for c in range(n_colors))

    return ColorShape(rows=most(lambda p: p.n_rows, lambda o: o.lower),
                      lower_nnz=most(lambda p: p.nnz, lambda o: o.lower),
                      upper_nnz=most(lambda p: p.nnz, lambda o: o.upper))


class MulticolorPadding(NamedTuple):
    """How one ordering's :class:`MulticolorData` pads to a :class:`ColorShape` (a pytree of
    host or device index arrays; :func:`multicolor_padding` builds it).

    Color ``c`` keeps its rows at the start of its padded range; the rest of the range are
    padding positions, which hold zeros (no diagonal, no scale, no entries), so a sweep
    never changes them.

    Attributes:
      source: ``(N',)`` for each padded position, its position in the ordering (``n``, past
        the end, for a padding position: it reads 0).
      order: ``(N',)`` the row at each padded position (``rows``, past the end, for a
        padding position).
      inverse: ``(rows,)`` each row's padded position (``N'``, past the end, for the rows
        past the ordering's ``n``: the padding rows of the level, which read 0).
      lower, upper: per color, the padded pattern of its block (columns renumbered to the
        padded positions; extra rows empty, extra entries column 0 with value 0), values
        empty placeholders.
    """

    source: np.ndarray | jax.Array
    order: np.ndarray | jax.Array
    inverse: np.ndarray | jax.Array
    lower: tuple[CsrArrays, ...]
    upper: tuple[CsrArrays, ...]


def multicolor_padding(ordering: MulticolorOrdering, shape: ColorShape,
                       rows: int) -> MulticolorPadding:
    """The host arrays padding ``ordering``'s data to ``shape`` for a level of ``rows``
    rows (``rows`` at least the ordering's; the extra ones are the level's padding rows)."""
    counts = [block.n_rows for block in ordering.lower]
    begins = np.concatenate([[0], np.cumsum(shape.rows)]).astype(np.int32)
    size, n = int(begins[-1]), ordering.order.size
    position = np.concatenate(  # each position of the ordering -> its padded position
        [begins[c] + np.arange(count, dtype=np.int32) for c, count in enumerate(counts)]
        + [np.zeros(0, np.int32)])
    source = np.full(size, n, np.int32)
    source[position] = np.arange(n, dtype=np.int32)
    order = np.full(size, rows, np.int32)
    order[position] = ordering.order
    inverse = np.full(rows, size, np.int32)
    inverse[:n] = position[_inverse(ordering.order)]

    def patterns(blocks, nnz):
        padded = []
        for c, (n_rows, width) in enumerate(zip(shape.rows, nnz, strict=True)):
            block = blocks[c] if c < len(blocks) else CsrStructure(np.zeros(1, np.int32),
                                                                   np.zeros(0, np.int32), n)
            indptr = np.concatenate([block.indptr, np.full(n_rows - block.n_rows,
                                                           block.indptr[-1])])
            indices = np.zeros(width, np.int32)
            indices[:block.nnz] = position[block.indices]
            padded.append(CsrArrays(values=np.zeros(0, np.int32),
                                    indices=indices, indptr=indptr.astype(np.int32)))
        return tuple(padded)

    return MulticolorPadding(source=source, order=order, inverse=inverse,
                             lower=patterns(ordering.lower, shape.lower_nnz),
                             upper=patterns(ordering.upper, shape.upper_nnz))


def padded_data(data: MulticolorData, padding: MulticolorPadding) -> MulticolorData:
    """``data`` padded as ``padding`` says (jit-able): every ordering padded to one
    :class:`ColorShape` gives data of one shape, whose sweeps leave the padding at zero."""
    def blocks(own, patterns):
        padded = []
        for c, pattern in enumerate(patterns):
            values = own[c].values if c < len(own) else jnp.zeros(0, data.diagonal.dtype)
            padded.append(pattern._replace(values=jnp.pad(
                values, (0, pattern.indices.shape[0] - values.shape[0]))))
        return tuple(padded)

    return MulticolorData(order=padding.order, inverse=padding.inverse,
                          diagonal=_take(data.diagonal, padding.source),
                          scale=_take(data.scale, padding.source),
                          lower=blocks(data.lower, padding.lower),
                          upper=blocks(data.upper, padding.upper))


# -----------------------------------------------------------------------------
# Sweeps


def multicolor_relax(matvec, data: MulticolorData, solver: str, omega: float,
                     symmetric: bool, b: jax.Array, x: jax.Array | None,
                     sweeps: int) -> jax.Array | None:
    """``sweeps`` sweeps of ``MULTICOLOR_GS`` or ``MULTICOLOR_DILU`` from ``x`` (None: 0)."""
    omega = jnp.asarray(omega, b.dtype)
    if solver == "MULTICOLOR_DILU":
        for _ in range(sweeps):
            residual = b if x is None else b - matvec(x)
            step = omega * _take(_dilu_solve(data, _take(residual, data.order)), data.inverse)
            x = step if x is None else x + step
        return x
    if sweeps == 0:
        return x
    b = _take(b, data.order)  # Gauss-Seidel stays in the color order for all its sweeps
    x = None if x is None else _take(x, data.order)
    for _ in range(sweeps):
        x = _gauss_seidel(data, omega, b, x, reverse=False)
        if symmetric:
            x = _gauss_seidel(data, omega, b, x, reverse=True)
    return _take(x, data.inverse)


def _take(v: jax.Array, index: jax.Array) -> jax.Array:
    """``v[index]``, and 0 where ``index`` is past the end: a padded ordering's padding
    (see :func:`padded_data`) reads zeros."""
    return v.at[index].get(mode="fill", fill_value=0)


def _gauss_seidel(data: MulticolorData, omega: jax.Array, b: jax.Array,
                  x: jax.Array | None, reverse: bool) -> jax.Array:
    """One Gauss-Seidel pass over the colors (in the color order), forward or backward."""
    zero = x is None  # the colors not visited yet are zero: their products are skipped
    x = jnp.zeros_like(b) if zero else x
    ranges = list(enumerate(_ranges(data.lower)))
    for c, (begin, end) in reversed(ranges) if reverse else ranges:
        visited, ahead = (data.upper[c], data.lower[c]) if reverse else (
            data.lower[c], data.upper[c])
        coupled = _block_product(visited, x, b.dtype)
        if not zero:
            coupled = coupled + _block_product(ahead, x, b.dtype)
        own = x[begin:end]
        residual = b[begin:end] - coupled - data.diagonal[begin:end] * own
        x = jax.lax.dynamic_update_slice(
            x, own + omega * data.scale[begin:end] * residual, (begin,))
    return x


def _dilu_solve(data: MulticolorData, r: jax.Array) -> jax.Array:
    """``M⁻¹ r`` for ``M = (E + L) E⁻¹ (E + U)``, in the color order."""
    ranges = _ranges(data.lower)
    y = jnp.zeros_like(r)
    for (begin, end), block in zip(ranges, data.lower, strict=True):  # (E + L) y = r
        y = jax.lax.dynamic_update_slice(
            y, data.scale[begin:end] * (r[begin:end] - _block_product(block, y, r.dtype)),
            (begin,))
    z = y
    for (begin, end), block in reversed(list(zip(ranges, data.upper, strict=True))):
        z = jax.lax.dynamic_update_slice(  # (E + U) z = E y
            z, y[begin:end] - data.scale[begin:end] * _block_product(block, z, r.dtype),
            (begin,))
    return z


def _block_product(block: CsrArrays, x: jax.Array, dtype) -> jax.Array:
    """One color's rows of ``L`` or ``U`` times ``x`` (zeros for an empty block)."""
    if block.indices.shape[0] == 0:
        return jnp.zeros(block.n_rows, dtype)
    return block.matvec(x).astype(dtype)
