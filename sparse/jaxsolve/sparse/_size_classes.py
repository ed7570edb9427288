"""Size classes: a hierarchy's levels padded so that similar patterns share programs.

A compiled solve is specialized to the shape of every array it reads, and an AMG
hierarchy's coarse levels (their rows, their nonzeros, those of ``P`` and ``R``) differ
from one sparsity pattern to the next even when the matrices have the same size (by 5 to
20 % on a coarse level of two 16³ Poisson matrices with eight couplings more, placed
differently): a new pattern would compile a new solve, seconds of XLA work. So the
hierarchy a solve keeps is *padded*: every coarse level's rows, and the nonzeros of its
operator and of every ``P`` and ``R``, are rounded up (:func:`class_shape`). A shape
already handed out for the same finest size is taken when it fits (every size at least
the true one, less than ``1.5 ×`` it ``+ 4``, or ``2 ×`` where it is *small*: at most an
eighth of the finest rows, or of a level of so few rows, or ``4 ×`` where it counts the
entries of a *tiny* level, of at most 1/64 of the finest rows; the numeric setup's index
arrays of at most 1024 entries are given 1024); else each size becomes the
**size class** of ``17 / 16`` of it, or of ``6 / 5`` of a small one (:func:`grown_size`),
a number ``q · 2ᵉ`` with ``q`` one of 4, 5, 6 or 7 (:func:`size_class`: 4, 5, 6, 7, 8,
10, 12, 14, 16, 20, …), so that a similar pattern a little larger fits too. The coarsest
level's rows, whose dense inverse costs their square in memory and their cube in setup
work, get ``n / 16`` more, at least 48, to a multiple of 16 (:func:`coarsest_rows`).
Small sizes get the most room because they vary the most between similar patterns: at
24³ (default AMG, 16 patterns of eight extra couplings each) the first coarse level's
sizes varied by at most 7 % (at 32³ 10 %), the second's by up to 24 %, the coarsest's
rows by 29 % and nonzeros by 37 % (at 32³ by a factor 2.3: the 4 × room of a tiny
level's entries holds them, where 2 × made a new shape and compiled two programs); the
large sizes' smaller room keeps the memory down. Patterns whose hierarchies take one shape run one compiled
solve.

**The finest level** (the user's ``A``) of a single-device solve's hierarchy is padded
as well (``pad_finest``), so that a pattern with other nonzeros or a few more rows (a
remeshed grid, a refined coupling, a Jacobian whose pattern grew) runs the programs
compiled for one solved before: its rows by little, as every vector of the solve has
them (:func:`finest_rows`: ``n / 32`` more, to a step of at most ``n / 32``; a shape
fits with at most ``n / 16 + 16`` more), its nonzeros by more, as no product reads the
padding entries (:func:`finest_nonzeros`; a shape fits with less than ``1.25 ×``). The
solve then pads the values and ``b`` with zeros and cuts ``x`` back
(:func:`._setup.padded_solve`). A hierarchy of one level (a matrix of at most
``min_coarse_rows`` rows, solved by the coarsest level's solver) pads its nonzeros alike
and keeps its rows (:func:`_single_level_shape`), as does a matrix solved without AMG
(by a Krylov method with a relaxation or none; :func:`padded_nonzeros`): a pattern of
the same rows runs the solve compiled for another. The sharded and MPI solves keep their
blocks' finest sizes.

**The padding changes no iteration.** Padding rows are empty (their row pointers repeat
the last), padding entries hold zeros past the last row's end (read by no row), the
smoothers' scale is zero on padding rows and the coarsest inverse is zero outside the true
block. A vector's padding entries therefore start at zero (a restriction's padding rows are
empty; the finest level's right-hand side is padded with zeros) and stay zero (no sweep,
product or correction writes anything else there), and every sparse product and sweep sums
the same entries in the same order as before. Only the coarsest level's dense product
``A_c⁻¹ b`` (or a Krylov coarse solver's inner products), and the Krylov method's norms
and inner products on a padded finest level, run over zeros more, which XLA may sum in
another order: their results agree to rounding (the last bit; the iterations of the
tests and of ``tools/bench/sparse_new_pattern.py`` are the unpadded hierarchy's).

**Memory.** Every padded array holds less than ``1.5 ×`` its true entries ``+ 4`` (a new
shape's ``size_class(6 n / 5) < 1.5 n`` for ``n > 4``), or a small one less than ``2 ×``
them ``+ 4``, a tiny level's entries less than ``4 ×`` (a smaller pattern's hierarchy that
takes a shape already in use), a numeric setup's index array at most 1024 entries: the
coarse operators, transfer operators, smoother data and the structure's copies of their
patterns. The finest pattern's copy in the structure and the kept hierarchy's finest
values (a padded copy of ``A``'s, where they shared ``A``'s own before) hold less than
``1.25 ×`` its nonzeros ``+ 16``.

**The multicolor smoothers** (:mod:`._multicolor`) sweep a level's colors chunk by chunk;
their data follow each pattern's coloring, so they are padded to a *color shape* of
their own per level (:func:`with_colors`): chunks of a size class of the mean color's
rows (a shape already in use for the level is taken when the pattern's chunks, ``L`` and
``U`` fit it and a sweep over it costs less than ``2 ×`` one over its own), the chunk
count with a small size's room (but kept where there are at most four: a padding chunk
costs a chunk's work, and the finest level of a 2-colored stencil has two), ``L``'s and
``U``'s entries too. Padding rows lie in no chunk, padding chunks are empty and padding
entries lie past every row's, so a sweep computes what the pattern's own chunks would.
A smoothed coarsest level's coloring (``NOSOLVER``) keeps its hierarchy's true sizes; a
multicolor relaxation that is the solve's preconditioner, without AMG, takes a color shape
handed out for its matrix's rows (:func:`color_shape`).
The sharded solve pads its blocks' hierarchies to the largest block's sizes with the same
functions.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._csr_arrays import CsrArrays, CsrStructure
from ._multicolor import ColorShape, MulticolorOrdering, MulticolorPadding, padded_data
from ._relaxation import RelaxationData


class LevelShape(NamedTuple):
    """The padded sizes of one level but the coarsest: its rows and operator's nonzeros,
    ``P``'s nonzeros (``rows × coarse_rows``), the next level's rows and ``R``'s nonzeros."""

    rows: int
    a_nnz: int
    p_nnz: int
    coarse_rows: int
    r_nnz: int


class HierarchyShape(NamedTuple):
    """The padded sizes of a hierarchy: its levels', then the coarsest's rows and nonzeros,
    per level the sizes of the other index arrays its numeric setup reads (those of
    :func:`._padded_setup.setup_sizes`; none where the setup is not padded), and per level
    the shape of its multicolor smoother's data (:func:`with_colors`; none without one)."""

    levels: tuple[LevelShape, ...]
    coarsest: tuple[int, int]
    setup: tuple[tuple[int, ...], ...] = ()
    colors: tuple[ColorShape | None, ...] = ()


def size_class(n: int, multiple: int = 1) -> int:
    """The smallest size class ``≥ n``: ``q · 2ᵉ`` with ``q ∈ {4, 5, 6, 7}`` (or 4).

    With ``multiple``, the class of ``n / multiple`` blocks (``n`` a multiple of it) times
    ``multiple``: a block system's padding holds whole blocks. Less than ``1.25 n`` for
    ``n > 4``.

    >>> [size_class(n) for n in (1, 5, 8, 9, 11, 13, 15, 17, 1000)]
    [4, 5, 8, 10, 12, 14, 16, 20, 1024]
    >>> size_class(30, multiple=3)
    30
    """
    if multiple > 1:
        return multiple * size_class(-(-n // multiple))
    if n <= 4:
        return 4
    exponent = (n - 1).bit_length() - 3  # 4 · 2ᵉ < n ≤ 8 · 2ᵉ
    return next(q << exponent for q in (5, 6, 7, 8) if q << exponent >= n)


def class_shape(levels: Sequence, coarsest: CsrStructure, coarsest_block_dim: int,
                setup: tuple[tuple[int, ...], ...] = (), layout: Hashable = None, *,
                pad_finest: bool = False) -> HierarchyShape:
    """The padded sizes of a hierarchy's levels (:class:`._hierarchy.LevelStructure` s) and
    coarsest pattern: a shape already in use that fits them (every size at least the true
    one and less than ``1.5 ×`` it ``+ 4``, ``2 ×`` a small size, ``4 ×`` a tiny level's
    count of entries), the smallest such;
    else a new one, each size :func:`grown_size` of the true one (room for a similar
    pattern a little larger), and remembered.

    The finest level's rows and nonzeros stay its own, or with ``pad_finest`` are padded
    too, by less (:func:`finest_rows`, :func:`finest_nonzeros`): a shape fits them if its
    rows exceed theirs by at most ``1 / 16`` (``+ 16``) and its nonzeros by less than a
    quarter (``+ 16``).

    ``setup``: per level, the true sizes of the numeric setup's other index arrays, padded
    alike; ``layout``: what else those arrays' shapes depend on (shapes are shared only
    between hierarchies of one layout).
    """
    true = true_shape(levels, coarsest)._replace(setup=setup)
    if not levels:  # the coarsest level is the finest
        return _single_level_shape(true) if pad_finest else true
    multiples = _row_multiples(levels, coarsest_block_dim)
    rows = _rows(true)
    finest = (rows[0], true.levels[0].a_nnz)
    # The shapes of a finest size; padded finest sizes: of an octave of rows, looked up in
    # the rows' octave and the one below (a smaller pattern's shape has room above it).
    keys = ([(finest, multiples, layout)] if not pad_finest else
            [(("padded", octave), multiples, layout)
             for octave in (rows[0].bit_length(), rows[0].bit_length() - 1)])
    with _LOCK:
        for key in keys:
            if key in _SHAPES:
                _SHAPES.move_to_end(key)

        def small(n: int, level: int) -> bool:  # a size of level `level` (coarsest: last)
            return min(n, rows[level]) <= rows[0] // SMALL

        def room(n: int, level: int, counts_rows: bool = False) -> float:
            """How many times ``n`` (+ 4) a shape's size may hold for ``n`` to fit it."""
            if not counts_rows and rows[level] <= rows[0] // TINY:
                return TINY_LIMIT
            return SMALL_LIMIT if small(n, level) else LIMIT

        def setup_room(n: int, level: int) -> float:
            """:func:`room` for a numeric setup's index array, which a size of at most
            FEW_SETUP_ENTRIES holds whatever its true one."""
            return max(room(n, level), FEW_SETUP_ENTRIES / max(n, 1))

        def grown_setup_size(n: int, level: int) -> int:
            return FEW_SETUP_ENTRIES if n <= FEW_SETUP_ENTRIES else grown_size(n, small(n, level))

        solve_room = tuple(room(n, level, counts_rows) for n, level, counts_rows in zip(
            _solve_sizes(true), _solve_levels(len(levels)), _solve_rows(len(levels)),
            strict=True))
        setup_rooms = tuple(setup_room(n, i) for i, sizes in enumerate(setup) for n in sizes)
        # A shape whose solve fits (levels and coarsest) is taken even where the setup's
        # sizes do not: then only those grow, and the solve compiled for it still serves.
        solve_fits = [shape for key in keys for shape in _SHAPES.get(key, ())
                      if _fit_finest(finest, shape, pad_finest, multiples[0])
                      and _fit(_solve_sizes(true), _solve_sizes(shape), solve_room)]
        fitting = [shape for shape in solve_fits
                   if _fit(_setup_sizes(true), _setup_sizes(shape), setup_rooms)]
        if fitting:
            return min(fitting, key=lambda shape: sum(_sizes(shape)))

        if solve_fits:
            base = min(solve_fits, key=lambda shape: sum(_solve_sizes(shape)))
            shape = base._replace(setup=tuple(
                tuple(padded if _fit((n,), (padded,), (setup_room(n, i),))
                      else grown_setup_size(n, i)
                      for n, padded in zip(sizes, base_sizes, strict=True))
                for i, (sizes, base_sizes) in enumerate(zip(setup, base.setup, strict=True))))
        else:
            padded_rows = [finest_rows(rows[0], multiples[0]) if pad_finest else rows[0]] + [
                grown_size(n, small(n, i), multiple)
                for i, (n, multiple) in enumerate(zip(rows[1:-1], multiples[1:-1],
                                                       strict=True), start=1)] + [
                coarsest_rows(rows[-1], multiples[-1])]
            finest_nnz = finest_nonzeros(finest[1]) if pad_finest else finest[1]
            shape = HierarchyShape(
                levels=tuple(LevelShape(rows=padded_rows[i], a_nnz=finest_nnz if i == 0
                                        else grown_size(level.a_nnz, small(level.a_nnz, i)),
                                        p_nnz=grown_size(level.p_nnz, small(level.p_nnz, i)),
                                        coarse_rows=padded_rows[i + 1],
                                        r_nnz=grown_size(level.r_nnz, small(level.r_nnz, i)))
                             for i, level in enumerate(true.levels)),
                coarsest=(padded_rows[-1], grown_size(true.coarsest[1],
                                                      small(true.coarsest[1], len(levels)))),
                setup=tuple(tuple(grown_setup_size(n, i) for n in sizes)
                            for i, sizes in enumerate(setup)))
        _remember(_SHAPES, keys[0], shape)
        return shape


def _single_level_shape(true: HierarchyShape) -> HierarchyShape:
    """The padded shape of a hierarchy of one level (a matrix no coarser than the
    coarsest, solved by the coarsest level's solver): its rows its own (a dense inverse
    grows with their square), its nonzeros those of a shape already in use for its rows
    that holds them (less than ``1.25 ×`` ``+ 16``, as a finest level's), else
    :func:`finest_nonzeros` of them."""
    rows, nnz = true.coarsest
    return handed_out(_SHAPES, (("single level", rows),),
                      lambda shape: fit_finest_nonzeros(nnz, shape.coarsest[1]),
                      lambda: true._replace(coarsest=(rows, finest_nonzeros(nnz))),
                      cost=lambda shape: shape.coarsest[1])


def _row_multiples(levels: Sequence, coarsest_block_dim: int) -> tuple[int, ...]:
    """What each level's padded rows (then the coarsest's) are a multiple of: whole nodes
    of its ``block_dim`` unknowns, and below an aggregation level of ``k`` columns whole
    aggregates (``k`` coarse unknowns each, a scalar level's too)."""
    block_dims = [level.block_dim for level in levels] + [coarsest_block_dim]
    return (block_dims[0],) + tuple(math.lcm(block_dim, level.columns)
                                    for level, block_dim in zip(levels, block_dims[1:],
                                                                strict=True))


def with_colors(shape: HierarchyShape, orderings: Sequence[MulticolorOrdering | None]
                ) -> HierarchyShape:
    """``shape`` with the shapes its levels' multicolor smoother data are padded to, one
    per level of ``orderings`` (None: a level without one).

    A level's colors, hence the chunks a sweep visits and their windows
    (:mod:`._multicolor`), differ from pattern to pattern. A shape already in use for that
    level of ``shape`` is taken when the ordering fits it (:func:`_fit_colors`): the
    cheapest; else a new one (:func:`_grown_colors`), remembered.
    """
    return shape._replace(colors=tuple(
        None if ordering is None else color_shape((shape, level), ordering)
        for level, ordering in enumerate(orderings)))


def color_shape(key: Hashable, ordering: MulticolorOrdering) -> ColorShape:
    """The shape ``ordering``'s multicolor data are padded to: of the shapes handed out
    for ``key`` (a hierarchy's shape and level, or the rows of a matrix whose relaxation
    is the preconditioner), the cheapest that it fits (:func:`_fit_colors`); else a new
    one (:func:`_grown_colors`), handed out."""
    return handed_out(_COLORS, key, lambda padded: _fit_colors(ordering, padded),
                      lambda: _grown_colors(ordering), cost=_sweep_cost)


# A chunk count a level keeps exactly when it has so few: a padding chunk costs a
# chunk's work, and the finest level of a 2-colored stencil has 2.
FEW_CHUNKS = 4


def _grown_colors(ordering: MulticolorOrdering) -> ColorShape:
    """A new padded shape for ``ordering``: chunks of a size class of the mean color's
    rows, and the room of a small size (:func:`grown_size`; colors, hence chunks, vary
    much between similar patterns) in their number (but a few) and in ``L``'s and
    ``U``'s entries."""
    chunk_rows = size_class(ordering.default_chunk_rows())
    chunks = ordering.chunks(chunk_rows)[0].size
    return ColorShape(
        chunk_rows=chunk_rows,
        n_chunks=chunks if chunks <= FEW_CHUNKS else grown_size(chunks, small=True),
        lower_nnz=grown_size(ordering.lower.nnz, small=True),
        upper_nnz=grown_size(ordering.upper.nnz, small=True))


def _fit_colors(ordering: MulticolorOrdering, padded: ColorShape) -> bool:
    """Whether ``ordering``'s arrays, cut into chunks of ``padded``'s rows, fit ``padded``
    and a sweep over it costs less than ``2 ×`` one over its own chunks."""
    own_rows = ordering.default_chunk_rows()
    return (ordering.chunks(padded.chunk_rows)[0].size <= padded.n_chunks
            and ordering.lower.nnz <= padded.lower_nnz
            and ordering.upper.nnz <= padded.upper_nnz
            and _sweep_cost(padded) < SMALL_LIMIT * _sweep_cost(ColorShape(
                own_rows, ordering.chunks(own_rows)[0].size, ordering.lower.nnz,
                ordering.upper.nnz)))


def _sweep_cost(shape: ColorShape) -> int:
    """What a sweep over data of ``shape`` reads: each chunk's window of rows, and the
    entries of ``L`` and ``U`` (padding entries lie past every row's)."""
    return shape.n_chunks * shape.chunk_rows + shape.lower_nnz + shape.upper_nnz


def finest_rows(n: int, multiple: int = 1) -> int:
    """The rows a new padded shape gives a finest level of ``n`` rows (``n / multiple``
    nodes of ``multiple`` unknowns): ``n + n / 32`` rounded up to a step of ``2ᵉ ≥ 16``
    nodes (``16 · 2ᵉ ≤ n / multiple``), so at most ``n + n / 16 + 16 · multiple``:
    every vector of the solve is that much longer (its sparse products skip the empty
    padding rows).

    >>> finest_rows(1000), finest_rows(13824), finest_rows(100_000), finest_rows(3000, 3)
    (1040, 14336, 104448, 3120)
    """
    nodes = n // multiple
    step = max(16, 1 << max(nodes.bit_length() - 6, 0))
    return -(-(nodes + nodes // 32) // step) * step * multiple


def finest_nonzeros(nnz: int) -> int:
    """The nonzeros a new padded shape gives a finest operator of ``nnz``: ``nnz + nnz /
    16`` rounded up to a step of ``2ᵉ ≥ 16`` (``32 · 2ᵉ ≤ nnz``): room for a similar
    pattern of up to 6 % more entries. The padding entries lie past the last row's end,
    where no product reads them: they cost memory only.

    >>> finest_nonzeros(6000), finest_nonzeros(93328)
    (6400, 100352)
    """
    step = max(16, 1 << max(nnz.bit_length() - 6, 0))
    return -(-(nnz + nnz // 16) // step) * step


def _fit_finest(finest: tuple[int, int], shape: HierarchyShape, padded: bool,
                multiple: int = 1) -> bool:
    """Whether ``shape``'s finest level holds one of ``finest`` rows and nonzeros: the
    same sizes, or where ``padded`` at most ``1 / 16`` more rows (``+ 16`` nodes of
    ``multiple``) and less than ``1.25 ×`` the nonzeros ``+ 16``."""
    (n, nnz), level = finest, shape.levels[0]
    if not padded:
        return (level.rows, level.a_nnz) == finest
    return fit_finest_rows(n, level.rows, multiple) and fit_finest_nonzeros(nnz, level.a_nnz)


def fit_finest_rows(n: int, padded: int, multiple: int = 1) -> bool:
    """Whether a finest level padded to ``padded`` rows holds ``n`` (of ``multiple``
    unknowns a node): at least them, at most ``n + n / 16 + 16 · multiple`` (the room
    :func:`finest_rows` gives)."""
    return n <= padded <= n + n // 16 + 16 * multiple


def padded_nonzeros(rows: int, nnz: int) -> int:
    """The nonzeros a matrix of ``rows`` rows and ``nnz`` entries is padded to where it is
    solved without AMG: the fewest handed out before for its rows that hold them
    (:func:`fit_finest_nonzeros`), else :func:`finest_nonzeros` of them, handed out.

    Its rows stay its own: a Krylov method with a relaxation (or none) sweeps every vector
    of the solve many times an iteration, where an AMG cycle's levels weigh more."""
    return handed_out(_NONZEROS, rows, lambda padded: fit_finest_nonzeros(nnz, padded),
                      lambda: finest_nonzeros(nnz))


def fit_finest_nonzeros(nnz: int, padded: int) -> bool:
    """Whether a finest level padded to ``padded`` nonzeros holds ``nnz``: at least them,
    less than ``1.25 ×`` them ``+ 16`` (the room :func:`finest_nonzeros` gives)."""
    return nnz <= padded < 1.25 * nnz + 16


# A padded array holds less than LIMIT × its true entries + 4; a small one, of at most
# 1 / SMALL of the finest rows or on a level of so few rows (the sizes that vary the most
# between similar patterns, and weigh the least), less than SMALL_LIMIT × them + 4; the
# entries of a tiny level, of at most 1 / TINY of the finest rows, less than TINY_LIMIT ×
# them + 4 (not its rows: the coarsest level's dense inverse grows with their square).
LIMIT = 1.5
SMALL = 8
SMALL_LIMIT = 2.0
TINY = 64
TINY_LIMIT = 4.0
# The numeric setup's index arrays of at most FEW_SETUP_ENTRIES entries are padded to as
# many: on small patterns they vary by 1.5 × from one pattern to a similar one (an
# aggressive level's at 8³), and so few entries weigh nothing.
FEW_SETUP_ENTRIES = 1024


def grown_size(n: int, small: bool, multiple: int = 1) -> int:
    """The size a new shape gives an array of ``n`` entries: the size class of ``17 / 16``
    of it, or where ``small`` (see :func:`class_shape`) that of ``6 / 5`` of it (room for a
    similar pattern up to ``1.2 ×`` larger), each less than ``1.5 n + 4`` (``multiple``: as
    :func:`size_class`).

    >>> grown_size(148, small=False), grown_size(148, small=True), grown_size(6952, small=True)
    (160, 192, 10240)
    """
    if small:
        padded = size_class(n + n // 5, multiple)
        if padded < LIMIT * n + 4:  # a block system's multiple can round it further
            return padded
    return size_class(n + n // 16, multiple)


def coarsest_rows(n: int, multiple: int = 1) -> int:
    """The rows a new shape gives a coarsest level of ``n`` rows: ``n`` plus a sixteenth,
    at least 48 rows more, rounded up to a multiple of 16 (of ``16 · multiple``), if that
    is less than ``1.5 n + 4``; else :func:`grown_size` of a small size.

    Its dense inverse costs ``rows²`` memory and its LU ``rows³`` work in every numeric
    setup: a size class (up to 1.5 × the rows: 3.4 × the LU) would cost more than the
    room a similar pattern needs. 48 rows hold the coarsest level of a similar 24³
    pattern (148 to 191 rows).

    >>> coarsest_rows(148), coarsest_rows(1724), coarsest_rows(20), coarsest_rows(300, 3)
    (208, 1840, 24, 384)
    """
    step = 16 * multiple
    padded = -(-(n + max(n // 16, 48)) // step) * step
    return padded if padded < LIMIT * n + 4 else grown_size(n, small=True, multiple=multiple)


def _fit(sizes: Sequence[int], padded: Sequence[int], limits: Sequence[float]) -> bool:
    """Whether ``padded`` holds ``sizes``, each less than its limit times its size ``+ 4``
    (an empty array's the smallest class, 4)."""
    return all(n <= k < limit * n + 4 or k == size_class(n)
               for n, k, limit in zip(sizes, padded, limits, strict=True))


# The shapes handed out, per finest rows, nonzeros and block sizes (the most recently used
# sizes kept): compiled solves exist for them (or will), so a hierarchy that fits one takes it.
_SHAPES: collections.OrderedDict[tuple, collections.deque[HierarchyShape]] = (
    collections.OrderedDict())
_SHAPES_PER_SIZE = 64
_SIZES_KEPT = 256
_LOCK = threading.Lock()
# The multicolor data shapes handed out, per (colorless) hierarchy shape and level, or per
# rows of a matrix whose preconditioner is a multicolor relaxation.
_COLORS: collections.OrderedDict[tuple, collections.deque[ColorShape]] = (
    collections.OrderedDict())
# The nonzeros handed out to matrices solved without AMG, per rows.
_NONZEROS: collections.OrderedDict[int, collections.deque[int]] = collections.OrderedDict()


def handed_out(kept: collections.OrderedDict, key: Hashable, fits: Callable[[Any], bool],
               new: Callable[[], Any], *, cost: Callable[[Any], Any] | None = None) -> Any:
    """Of the sizes (or shapes) handed out for ``key`` in ``kept`` (a registry such as
    :data:`_SHAPES`), the cheapest by ``cost`` (by their own order without one) that
    ``fits``; else ``new()``, handed out: programs are compiled for what was handed out,
    so a similar pattern's sizes that fit one run them."""
    with _LOCK:
        if key in kept:
            kept.move_to_end(key)
        fitting = [size for size in kept.get(key, ()) if fits(size)]
        if fitting:
            return min(fitting, key=cost)
        size = new()
        _remember(kept, key, size)
        return size


def _remember(kept: collections.OrderedDict, key: Hashable,
              shape: Any) -> None:
    """Keeps ``shape`` first among the shapes handed out for ``key`` in ``kept`` (a
    registry such as :data:`_SHAPES`; under :data:`_LOCK`), ``key`` the most recently used,
    and drops the least recently used keys past :data:`_SIZES_KEPT`."""
    kept.setdefault(key, collections.deque(maxlen=_SHAPES_PER_SIZE)).appendleft(shape)
    kept.move_to_end(key)
    while len(kept) > _SIZES_KEPT:
        kept.popitem(last=False)


def _rows(shape: HierarchyShape) -> list[int]:
    return [level.rows for level in shape.levels] + [shape.coarsest[0]]


def _sizes(shape: HierarchyShape) -> tuple[int, ...]:
    return _solve_sizes(shape) + _setup_sizes(shape)


def _solve_sizes(shape: HierarchyShape) -> tuple[int, ...]:
    """The sizes of the padded hierarchy itself, which the compiled solve reads, but the
    finest rows and nonzeros (:func:`_fit_finest`'s)."""
    return (tuple(size for level in shape.levels for size in level) + shape.coarsest)[2:]


def _solve_levels(count: int) -> tuple[int, ...]:
    """The level of each of :func:`_solve_sizes` of a shape of ``count`` levels (the
    coarsest: ``count``): a level's next rows are the next level's."""
    return (tuple(level for i in range(count) for level in (i, i, i, i + 1, i))
            + (count,) * 2)[2:]


def _solve_rows(count: int) -> tuple[bool, ...]:
    """Which of :func:`_solve_sizes` of a shape of ``count`` levels count rows (a level's
    and its next level's), not entries."""
    return (tuple(counts for _ in range(count) for counts in (True, False, False, True, False))
            + (True, False))[2:]


def _setup_sizes(shape: HierarchyShape) -> tuple[int, ...]:
    return tuple(size for sizes in shape.setup for size in sizes)


def true_shape(levels: Sequence, coarsest: CsrStructure) -> HierarchyShape:
    """A hierarchy's own sizes (a shape that pads nothing)."""
    return HierarchyShape(
        levels=tuple(LevelShape(rows=level.a.n_rows, a_nnz=level.a.nnz, p_nnz=level.p.nnz,
                                coarse_rows=level.r.n_rows, r_nnz=level.r.nnz)
                     for level in levels),
        coarsest=(coarsest.n_rows, coarsest.nnz))


def pad_pattern(pattern: CsrStructure, rows: int, nnz: int) -> CsrStructure:
    """``pattern`` with ``rows`` rows and ``nnz`` entries, as :func:`pad_csr` pads (host)."""
    if (rows, nnz) == (pattern.n_rows, pattern.nnz):
        return pattern
    return CsrStructure(
        indptr=np.concatenate([pattern.indptr, np.full(rows - pattern.n_rows, pattern.nnz,
                                                       pattern.indptr.dtype)]),
        indices=np.concatenate([pattern.indices, np.zeros(nnz - pattern.nnz,
                                                          pattern.indices.dtype)]),
        n_cols=pattern.n_cols)


PADDING_DIAGONAL = -2
"""The diagonal position of a padding row (:func:`._hierarchy.build_structure`'s): none is
stored there, as none is where a true row's is -1, but none is missing either, so that the
solve's check for a zero diagonal passes over the padding rows (:func:`stored_diagonal
<._relaxation.stored_diagonal>` reads both as zero)."""


def pad_rows(x: jax.Array, rows: int) -> jax.Array:
    """``x`` with zero rows (entries along its first axis) to ``rows`` rows; ``x`` itself
    when it has them (jit-able)."""
    if x.shape[0] == rows:
        return x
    return jnp.pad(x, [(0, rows - x.shape[0])] + [(0, 0)] * (x.ndim - 1))


def pad_csr(c: CsrArrays, rows: int, nnz: int) -> CsrArrays:
    """``c`` with ``rows`` rows and ``nnz`` entries: empty rows, zeros past the last row."""
    extra = nnz - c.values.shape[0]
    return CsrArrays(
        values=jnp.pad(c.values, (0, extra)),
        indices=jnp.pad(c.indices, (0, extra)),
        indptr=jnp.concatenate([c.indptr, jnp.broadcast_to(c.indptr[-1], (rows - c.n_rows,))]),
    )


def true_csr(c: CsrArrays, pattern: CsrStructure) -> CsrArrays:
    """The part of ``c``, padded by :func:`pad_csr`, that holds ``pattern`` (jit-able)."""
    return c._replace(indices=c.indices[:pattern.nnz], indptr=c.indptr[:pattern.n_rows + 1])


def pad_relaxation(data: RelaxationData | None, rows: int,
                   multicolor: MulticolorPadding | None = None) -> RelaxationData | None:
    """``data`` for ``rows`` rows, the extra ones unscaled (so they stay zero); the
    multicolor smoothers' data padded by ``multicolor`` (the sharded solve's blocks)."""
    if data is None:
        return None
    if data.multicolor is not None:
        if multicolor is None:
            return data
        padded = padded_data(data.multicolor, multicolor)
        return data._replace(scale=padded.scale, multicolor=padded)
    scale = data.scale  # (n,), or (n / k, k, k): a block system's inverted blocks
    per_entry = 1 if scale.ndim == 1 else scale.shape[-1]
    extra = (rows - scale.shape[0] * per_entry) // per_entry
    return data._replace(scale=jnp.pad(scale, [(0, extra)] + [(0, 0)] * (scale.ndim - 1)))
