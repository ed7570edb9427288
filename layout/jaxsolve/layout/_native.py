"""In-place conversion of one device's local matrix between JAX's and cuSOLVERMp's layouts.

A JAX array is row-major: element ``(r, c)`` of an ``R x C`` matrix sits at ``r * C + c``.
cuSOLVERMp, like ScaLAPACK, wants each process's local part of a 2D block-cyclic matrix
column-major, ``(r, c)`` at ``c * R + r``, and, on a multi-process grid, its ``T x T`` tiles
in another order. The functions here do that local step on one device, rewriting the
matrix's own buffer (under ``jax.jit(..., donate_argnums=0)`` XLA reuses the input buffer)
with bounded scratch, ``T * max(R, C)`` elements at most and none for the common square,
unpermuted case:

* :func:`local_row_to_column_major`: ``x`` (``R x C``, row-major) -> a ``(C, R)`` array
  whose bytes are the column-major ``R x C`` matrix ``Z``, ``x`` with its tiles permuted.
* :func:`local_column_to_row_major`: the inverse.
* :func:`local_scratch_elements`: the scratch either uses.

The native code (``csrc/``) runs on the CPU and on CUDA GPUs; ``_ffi`` loads it.
"""

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _ffi

_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
_MAX_TILES = 2**31 - 1  # tile slots are int32 in the native schedule


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Everything the native op needs besides the matrix, fixed at trace time.

    Unless the matrix is square and the permutation the identity (then the native op
    transposes in place and the schedule is empty), every tile moves once: the tile slot
    permutation is decomposed into cycles, cut into chains, and grouped into batches of at
    most ``scratch_elements // tile**2`` chains (csrc/local_transpose.h explains how they
    are followed).
    """

    rows: int
    cols: int
    tile: int
    scratch_elements: int
    chain_slots: np.ndarray  # int32 (S,): the chains' tile slots, chain after chain
    chain_offsets: np.ndarray  # int32 (G + 1,): chain g is chain_slots[offsets[g]:offsets[g+1]]
    chain_dest: np.ndarray  # int32 (G,): the slot chain g's last tile moves to
    batch_offsets: np.ndarray  # int64 (B + 1,): batch b is chains batch_offsets[b:b+2]
    batch_rounds: np.ndarray  # int64 (B,): the longest chain of batch b


def _slot_destinations(
    rows: int, cols: int, tile: int, permutation: np.ndarray | None, forward: bool
) -> np.ndarray:
    """Where the native op must move each tile slot's tile (transposing it on the way).

    Slots number the places of tiles when the native op moves them (csrc/local_transpose.h).
    Row-major side: tile ``(i, j)`` of ``x`` is at slot ``i * nC + j`` (its region of a
    square matrix; a contiguous tile otherwise). Column-major side: tile ``(pi, pj)`` of ``Z``
    is at slot ``pj * nR + pi``.
    """
    nr, nc = rows // tile, cols // tile
    i, j = np.indices((nr, nc))
    pi, pj = (i, j) if permutation is None else (permutation[..., 0], permutation[..., 1])
    row_slots, column_slots = i * nc + j, pj * nr + pi
    src, dst = (row_slots, column_slots) if forward else (column_slots, row_slots)
    dest = np.empty(nr * nc, np.int64)
    dest[src.ravel()] = dst.ravel()
    return dest


def _cycle_schedule(dest: np.ndarray, capacity: int) -> tuple[np.ndarray, ...]:
    """Cycles of the slot permutation ``dest``, as the chains and batches of :class:`_Plan`.

    Every slot is in a cycle, fixed points too (their tile is transposed in place). A batch
    holds whole cycles, at most ``capacity`` chains, and takes as many steps as its longest
    chain. So cycles go longest first, and each batch cuts them into chains of
    ``ceil(tiles left / capacity)`` slots: the longest cycle left always fits, and batches of
    short cycles take few steps.
    """
    following = dest.tolist()
    done = [False] * dest.size
    cycles = []
    for start in range(dest.size):
        cycle = []
        slot = start
        while not done[slot]:
            done[slot] = True
            cycle.append(slot)
            slot = following[slot]
        if cycle:
            cycles.append(cycle)
    cycles.sort(key=len, reverse=True)

    batches: list[list[list[int]]] = []
    left = dest.size
    chain_length = 1  # set as each batch opens
    for cycle in cycles:
        if not batches or len(batches[-1]) + -(-len(cycle) // chain_length) > capacity:
            chain_length = -(-left // capacity)
            batches.append([])
        batches[-1].extend(cycle[k : k + chain_length] for k in range(0, len(cycle), chain_length))
        left -= len(cycle)

    chains = [chain for batch in batches for chain in batch]
    lengths = [len(chain) for chain in chains]
    return (
        np.asarray([slot for chain in chains for slot in chain], np.int32),
        np.cumsum([0, *lengths], dtype=np.int64).astype(np.int32),
        np.asarray([following[chain[-1]] for chain in chains], np.int32),
        np.cumsum([0, *map(len, batches)], dtype=np.int64),
        np.asarray([len(batch[0]) for batch in batches], np.int64),
    )


@functools.lru_cache(maxsize=256)
def _plan(rows: int, cols: int, tile: int, permutation: bytes | None, forward: bool) -> _Plan:
    """The cached :class:`_Plan`; ``permutation`` is the checked permutation's int64 bytes."""
    if rows == cols and permutation is None:
        dest = np.arange(0)  # the in-place transpose alone; no tile moves
    else:
        grid = (rows // tile, cols // tile, 2)
        perm = None if permutation is None else np.frombuffer(permutation, np.int64).reshape(grid)
        dest = _slot_destinations(rows, cols, tile, perm, forward)
    scratch = _ffi.scratch_elements(rows, cols, tile, moves_tiles=dest.size > 0)
    return _Plan(rows, cols, tile, scratch, *_cycle_schedule(dest, scratch // tile**2))


def _local_transpose(target: str, a: jax.Array, plan: _Plan) -> jax.Array:
    """The raw FFI call, unchecked: converts the ``rows * cols`` elements of ``a`` in place.

    The result has ``a``'s shape and aliases its buffer; the caller reshapes it, which is
    free. (Reshaping ``a`` before the call instead would make XLA copy the donated buffer.)
    """
    out_types = (
        jax.ShapeDtypeStruct(a.shape, a.dtype),
        jax.ShapeDtypeStruct((plan.scratch_elements,), a.dtype),
    )
    converted, _ = jax.ffi.ffi_call(
        target, out_types, input_output_aliases={0: 0}, vmap_method="sequential"
    )(
        a,
        plan.chain_slots,
        plan.chain_offsets,
        plan.chain_dest,
        rows=np.int64(plan.rows),
        cols=np.int64(plan.cols),
        tile=np.int64(plan.tile),
        batch_offsets=plan.batch_offsets,
        batch_rounds=plan.batch_rounds,
    )
    return converted


# ----------------------------------------------------------------------------------------
# Checks


def _check_tile(fn: str, tile: int) -> int:
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or tile < 1:
        raise ValueError(f"{fn}: tile must be a positive integer, got {tile=!r}")
    return int(tile)


def _check_shape(fn: str, shape: Sequence[int], tile: int) -> tuple[int, int]:
    """(rows, cols) of the logical row-major matrix, checked to be whole tiles."""
    rows, cols = (int(n) for n in shape)
    if rows % tile or cols % tile:
        raise ValueError(
            f"{fn}: the local matrix must be whole tiles, but its shape (R, C) = "
            f"{(rows, cols)} is not a multiple of {tile=}; pad it to whole tiles first"
        )
    return rows, cols


def _check_matrix(fn: str, name: str, a: jax.Array) -> None:
    if a.ndim != 2:
        raise ValueError(f"{fn}: {name} must be a 2-D local matrix, got {name}.shape={a.shape}")
    if a.dtype not in _DTYPES:
        raise ValueError(
            f"{fn}: {name}.dtype must be float32, float64, complex64 or complex128, got "
            f"{name}.dtype={a.dtype}; cast it first, e.g. {name}.astype(jnp.float32)"
        )


def _check_tiles(fn: str, permutation, rows: int, cols: int, tile: int) -> bytes | None:
    """Checks ``tile_permutation`` and the tile count.

    Returns the permutation as int64 bytes (a hashable cache key), or None for the identity.
    """
    grid = (rows // tile, cols // tile)
    if (rows != cols or permutation is not None) and grid[0] * grid[1] > _MAX_TILES:
        raise ValueError(
            f"{fn}: {grid[0]}x{grid[1]} tiles are too many to move one by one; use a larger tile"
        )
    if permutation is None:
        return None
    if isinstance(permutation, jax.core.Tracer):
        raise ValueError(
            f"{fn}: tile_permutation must be a concrete array (NumPy or a jax.Array outside "
            "jit), not a traced value: the tile schedule is built at trace time"
        )
    perm = np.asarray(permutation)
    if perm.shape != (*grid, 2) or not np.issubdtype(perm.dtype, np.integer):
        raise ValueError(
            f"{fn}: tile_permutation must be an integer array of shape (R/T, C/T, 2) = "
            f"{(*grid, 2)}, got shape {perm.shape} and dtype {perm.dtype}"
        )
    pi, pj = perm[..., 0], perm[..., 1]
    if ((pi < 0) | (pi >= grid[0]) | (pj < 0) | (pj >= grid[1])).any():
        raise ValueError(
            f"{fn}: tile_permutation entries must be tile positions (pi, pj) with "
            f"0 <= pi < {grid[0]} and 0 <= pj < {grid[1]}"
        )
    if np.unique(pi * grid[1] + pj).size != pi.size:
        raise ValueError(
            f"{fn}: tile_permutation must send distinct tiles to distinct positions "
            f"(a bijection of the {grid[0]}x{grid[1]} tile grid)"
        )
    return perm.astype(np.int64).tobytes()


def _prepare(fn: str, name: str, a, tile: int, tile_permutation, transposed: bool):
    """Checks a call; returns the array and its plan. ``transposed``: ``a`` is (C, R)."""
    a = jnp.asarray(a)
    _check_matrix(fn, name, a)
    tile = _check_tile(fn, tile)
    rows, cols = _check_shape(fn, a.shape[::-1] if transposed else a.shape, tile)
    key = _check_tiles(fn, tile_permutation, rows, cols, tile)
    _ffi.require_platform(fn, a)
    return a, _plan(rows, cols, tile, key, not transposed)


# ----------------------------------------------------------------------------------------
# Public functions


def local_row_to_column_major(
    x: jax.Array, *, tile: int, tile_permutation: np.ndarray | None = None
) -> jax.Array:
    """Converts a row-major local matrix to column-major, permuting its tiles, in place.

    ``x`` is a local ``R x C`` matrix as JAX holds it, row-major, made of ``T x T`` tiles
    (``T = tile``; ``R`` and ``C`` are multiples of ``T``). Let ``Z`` be ``x`` with its tiles
    permuted: tile ``(i, j)`` of ``x`` (rows ``i*T:(i+1)*T``, columns ``j*T:(j+1)*T``) is tile
    ``tile_permutation[i, j] = (pi, pj)`` of ``Z``. The result is the ``(C, R)`` array whose
    bytes are ``Z`` in column-major order, i.e. ``Z.T``: what cuSOLVERMp reads as its local
    column-major ``R x C`` matrix. Without a permutation it is exactly ``x.T``.

    The conversion rewrites the matrix's buffer: jitted with ``donate_argnums`` it allocates
    no second matrix, only :func:`local_scratch_elements` elements of scratch. A square
    matrix without a permutation is transposed by swapping mirrored blocks, at about the
    speed of a copy; with one, each tile moves once, transposed, along the cycles of the
    permutation. Other shapes are first repacked into contiguous tiles, panel by panel.

    Args:
      x: ``(R, C)`` float32, float64, complex64 or complex128 array.
      tile: the tile size ``T >= 1``; ``R`` and ``C`` must be multiples of it.
      tile_permutation: integer array of shape ``(R/T, C/T, 2)``, a bijection of the tile
        grid, concrete (built at trace time); ``None`` for the identity.

    Returns:
      ``(C, R)`` array of ``x``'s dtype, ``Z.T``.

    Raises:
      ValueError: for a bad ``x``, ``tile`` or ``tile_permutation``.
      RuntimeError: on a GPU, when the CUDA library is unavailable.

    See also:
      :func:`local_column_to_row_major`, the inverse.

    Examples:
      >>> import jax.numpy as jnp
      >>> x = jnp.arange(8.0).reshape(2, 4)
      >>> local_row_to_column_major(x, tile=1)
      Array([[0., 4.],
             [1., 5.],
             [2., 6.],
             [3., 7.]], dtype=float32)

      With ``2 x 2`` tiles swapped:

      >>> perm = np.array([[[0, 1], [0, 0]]])
      >>> local_row_to_column_major(x, tile=2, tile_permutation=perm)
      Array([[2., 6.],
             [3., 7.],
             [0., 4.],
             [1., 5.]], dtype=float32)
    """
    fn = "local_row_to_column_major"
    x, plan = _prepare(fn, "x", x, tile, tile_permutation, transposed=False)
    converted = _local_transpose(_ffi.LOCAL_ROW_TO_COLUMN_MAJOR, x, plan)
    return converted.reshape(plan.cols, plan.rows)


def local_column_to_row_major(
    y: jax.Array, *, tile: int, tile_permutation: np.ndarray | None = None
) -> jax.Array:
    """Converts a column-major local matrix back to row-major, undoing a tile permutation.

    The inverse of :func:`local_row_to_column_major`: ``y`` is a ``(C, R)`` array whose bytes
    are a column-major ``R x C`` matrix ``Z`` (``Z = y.T``), and the result is the row-major
    ``(R, C)`` matrix ``x`` whose tile ``(i, j)`` is tile ``tile_permutation[i, j]`` of ``Z``,
    so that ``local_column_to_row_major(local_row_to_column_major(x, **kw), **kw) == x``.
    In place, with the scratch of :func:`local_scratch_elements`.

    Args:
      y: ``(C, R)`` float32, float64, complex64 or complex128 array.
      tile: the tile size ``T >= 1``; ``R`` and ``C`` must be multiples of it.
      tile_permutation: integer array of shape ``(R/T, C/T, 2)`` (indexed by the tiles of the
        result ``x``), a concrete bijection of the tile grid; ``None`` for the identity.

    Returns:
      ``(R, C)`` array of ``y``'s dtype.

    Raises:
      ValueError: for a bad ``y``, ``tile`` or ``tile_permutation``.
      RuntimeError: on a GPU, when the CUDA library is unavailable.

    Examples:
      >>> import jax.numpy as jnp
      >>> x = jnp.arange(8.0).reshape(2, 4)
      >>> y = local_row_to_column_major(x, tile=2)
      >>> local_column_to_row_major(y, tile=2)
      Array([[0., 1., 2., 3.],
             [4., 5., 6., 7.]], dtype=float32)
    """
    fn = "local_column_to_row_major"
    y, plan = _prepare(fn, "y", y, tile, tile_permutation, transposed=True)
    converted = _local_transpose(_ffi.LOCAL_COLUMN_TO_ROW_MAJOR, y, plan)
    return converted.reshape(plan.rows, plan.cols)


def local_scratch_elements(
    shape: tuple[int, int], tile: int, tile_permutation: np.ndarray | None = None
) -> int:
    """Elements of scratch the local conversion of an ``R x C`` matrix uses (either way).

    The native op declares this scratch as an extra result, so it is what XLA allocates
    beside the matrix. It is ``T * max(R, C)``, one tile row or column panel, and ``0`` for a
    square matrix without a tile permutation; never a second matrix. The number comes from
    the native library, which refuses to run with any other amount.

    Args:
      shape: ``(R, C)``, the row-major shape of the local matrix.
      tile: the tile size ``T``.
      tile_permutation: as for :func:`local_row_to_column_major`.

    Returns:
      The number of scratch elements, of the matrix's dtype.

    Examples:
      >>> local_scratch_elements((1024, 1024), 64)
      0
      >>> local_scratch_elements((1024, 512), 64)
      65536
    """
    fn = "local_scratch_elements"
    tile = _check_tile(fn, tile)
    def is_size(n) -> bool:
        return isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0

    if len(shape) != 2 or not all(map(is_size, shape)):
        raise ValueError(f"{fn}: shape must be (R, C), two non-negative integers, got {shape=}")
    rows, cols = _check_shape(fn, shape, tile)
    key = _check_tiles(fn, tile_permutation, rows, cols, tile)
    return _plan(rows, cols, tile, key, True).scratch_elements
