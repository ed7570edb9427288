"""Conversion between JAX's sharded layout and the block-cyclic storage of a `BlockCyclicPlan`.

The two layouts, on a ``P_r`` × ``P_c`` process grid that is a ``P_r`` × ``P_c`` JAX mesh:

* JAX layout: the global ``(m, n)`` matrix with ``NamedSharding(mesh, P(row_axis, col_axis))``.
  The device at mesh position ``(p, q)`` holds the contiguous block of rows
  ``[p * m / P_r, (p + 1) * m / P_r)`` and columns ``[q * n / P_c, (q + 1) * n / P_c)``,
  row-major. The tile need not divide the block: one tile's rows may sit on two devices.
* Block-cyclic storage: an array of shape ``plan.storage_shape = (P_r, P_c, n_loc, m_loc)`` with
  ``NamedSharding(mesh, P(row_axis, col_axis, None, None))``. The device at ``(p, q)`` holds
  ``storage[p, q]``, whose bytes are its ``(m_loc, n_loc) = plan.local_shape`` local matrix in
  column-major order (``storage[p, q].T`` is the local matrix), ready for cuSOLVERMp with
  ``lld = m_loc``.

The conversion is pure JAX inside `jax.shard_map` and runs on any backend. It moves rows along the
row axis, then columns along the column axis. Within one phase, the device at position ``k`` sends
to position ``(k + s) % P`` the rows (columns) that land there, for each shift ``s`` that has any,
through one `jax.lax.ppermute` per shift. Each message is padded to a static length, and the
padding slots point out of bounds so that the gather fills them with zeros and the scatter drops
them. The index tables are NumPy constants computed once per (length, grid size, tile), and each
device picks its row of them with `jax.lax.axis_index`. So the traffic is about the size of the
matrix, never an all-gather. A local transpose then puts the local matrix in column-major order.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ._plan import BlockCyclicPlan, _to_cyclic, _to_global

_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))

AxisName = str | None
"""A mesh axis name, or None for a dimension that is not sharded (a grid of 1 along it)."""


def to_block_cyclic(
    a: jax.Array,
    plan: BlockCyclicPlan,
    mesh: Mesh,
    axes: Sequence[AxisName],
    *,
    pad_diagonal: float = 0.0,
) -> jax.Array:
    """Redistributes a sharded matrix into the block-cyclic storage of `plan`.

    Process ``(p, q)`` of the plan is the device at position ``(p, q)`` of the mesh axes
    ``axes = (row_axis, col_axis)``; the plan's grid order does not enter. Padding entries are zero,
    except the diagonal of the padded matrix outside ``a``, which is `pad_diagonal`. Set it to 1 to
    factor the padded matrix of a square ``a`` when ``plan.padded_shape`` is square too (e.g. on a
    square grid): the padded matrix is then ``[[a, 0], [0, I]]``, SPD (or nonsingular) when ``a``
    is, and its Cholesky or LU factors hold those of ``a``.

    Works under `jax.jit`; only `jax.lax.ppermute` moves data between devices.

    Args:
      a: the ``(plan.m, plan.n)`` matrix, float32, float64, complex64 or complex128, sharded as
        ``NamedSharding(mesh, P(row_axis, col_axis))``.
      plan: the distribution; ``plan.grid_shape`` must be the sizes of `axes` in `mesh`, and
        ``plan.m`` (``plan.n``) divisible by ``plan.grid_rows`` (``plan.grid_cols``), as JAX
        requires.
      mesh: the device mesh; axes other than `axes` must have size 1.
      axes: ``(row_axis, col_axis)``: mesh axis names, or None for a dimension that is not sharded
        (``("x", None)`` for a ``P_r`` × 1 grid, ``(None, "y")`` for 1 × ``P_c``).
      pad_diagonal: value put on the padded diagonal, entries ``(i, i)`` with
        ``min(m, n) <= i < min(m_pad, n_pad)``.

    Returns:
      The storage, of shape ``plan.storage_shape = (P_r, P_c, n_loc, m_loc)`` and `a`'s dtype,
      sharded as ``NamedSharding(mesh, P(row_axis, col_axis, None, None))``: ``storage[p, q].T``
      is the local matrix of process ``(p, q)``.

    Raises:
      TypeError: if `a`, `plan`, `mesh` or `pad_diagonal` has the wrong type.
      ValueError: if the mesh, `axes` and the plan's grid disagree, or `a` has the wrong rank,
        shape, dtype or sharding.

    See also:
      `from_block_cyclic`, the inverse.

    Examples:
      A 3 × 3 matrix in tiles of 2 on a single device: the local matrix is padded to 4 × 4, with
      a 1 on the padded diagonal, and stored column by column.

      >>> import jax, jax.numpy as jnp
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> from jaxsolve.layout import BlockCyclicPlan, to_block_cyclic
      >>> mesh = jax.make_mesh((1, 1), ("x", "y"))
      >>> plan = BlockCyclicPlan(m=3, n=3, tile=2, grid_rows=1, grid_cols=1)
      >>> a = jax.device_put(jnp.arange(1.0, 10.0).reshape(3, 3), NamedSharding(mesh, P("x", "y")))
      >>> storage = to_block_cyclic(a, plan, mesh, ("x", "y"), pad_diagonal=1.0)
      >>> storage.shape
      (1, 1, 4, 4)
      >>> storage[0, 0]
      Array([[1., 4., 7., 0.],
             [2., 5., 8., 0.],
             [3., 6., 9., 0.],
             [0., 0., 0., 1.]], dtype=float32)
    """
    where = "to_block_cyclic"
    axes = _check_layout(where, plan, mesh, axes)
    _check_array(where, "a", a, (plan.m, plan.n), NamedSharding(mesh, P(*axes)))
    if isinstance(pad_diagonal, bool) or not isinstance(pad_diagonal, numbers.Real):
        raise TypeError(
            f"{where}: pad_diagonal={pad_diagonal!r} must be a real number, e.g. 0.0 or 1.0."
        )
    return _to_block_cyclic_fn(plan, mesh, axes, float(pad_diagonal))(a)


def from_block_cyclic(
    storage: jax.Array, plan: BlockCyclicPlan, mesh: Mesh, axes: Sequence[AxisName]
) -> jax.Array:
    """Gathers the block-cyclic storage of `plan` back into a sharded ``(m, n)`` matrix.

    The inverse of `to_block_cyclic`: ``from_block_cyclic(to_block_cyclic(a, ...), ...)`` is `a`,
    bit for bit. Padding entries of `storage` are ignored. Works under `jax.jit`; only
    `jax.lax.ppermute` moves data between devices.

    Args:
      storage: array of shape ``plan.storage_shape = (P_r, P_c, n_loc, m_loc)``, float32,
        float64, complex64 or complex128, sharded as
        ``NamedSharding(mesh, P(row_axis, col_axis, None, None))``; ``storage[p, q].T`` is the
        local matrix of process ``(p, q)``.
      plan: the distribution, as for `to_block_cyclic`.
      mesh: the device mesh, as for `to_block_cyclic`.
      axes: ``(row_axis, col_axis)``, as for `to_block_cyclic`.

    Returns:
      The ``(plan.m, plan.n)`` matrix of `storage`'s dtype, sharded as
      ``NamedSharding(mesh, P(row_axis, col_axis))``.

    Raises:
      TypeError: if `storage`, `plan` or `mesh` has the wrong type.
      ValueError: if the mesh, `axes` and the plan's grid disagree, or `storage` has the wrong rank,
        shape, dtype or sharding.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> from jaxsolve.layout import BlockCyclicPlan, from_block_cyclic, to_block_cyclic
      >>> mesh = jax.make_mesh((1, 1), ("x", "y"))
      >>> plan = BlockCyclicPlan(m=5, n=3, tile=2, grid_rows=1, grid_cols=1)
      >>> a = jax.device_put(jnp.ones((5, 3)), NamedSharding(mesh, P("x", "y")))
      >>> storage = to_block_cyclic(a, plan, mesh, ("x", "y"))
      >>> jnp.array_equal(from_block_cyclic(storage, plan, mesh, ("x", "y")), a)
      Array(True, dtype=bool)
    """
    where = "from_block_cyclic"
    axes = _check_layout(where, plan, mesh, axes)
    _check_array(
        where, "storage", storage, plan.storage_shape, NamedSharding(mesh, P(*axes, None, None))
    )
    return _from_block_cyclic_fn(plan, mesh, axes)(storage)


@functools.lru_cache(maxsize=64)
def _to_block_cyclic_fn(
    plan: BlockCyclicPlan, mesh: Mesh, axes: tuple[AxisName, AxisName], pad_diagonal: float
):
    row_axis, col_axis = axes
    rows, cols = _routings(plan)

    def per_device(block):
        local = _move(block, rows, 0, row_axis, inverse=False)
        local = _move(local, cols, 1, col_axis, inverse=False)
        if pad_diagonal != 0.0:
            local = _fill_padded_diagonal(local, plan, axes, pad_diagonal)
        return local.T[None, None]

    return jax.jit(
        jax.shard_map(per_device, mesh=mesh, in_specs=P(*axes), out_specs=P(*axes, None, None))
    )


@functools.lru_cache(maxsize=64)
def _from_block_cyclic_fn(plan: BlockCyclicPlan, mesh: Mesh, axes: tuple[AxisName, AxisName]):
    row_axis, col_axis = axes
    rows, cols = _routings(plan)

    def per_device(storage):
        block = _move(storage[0, 0].T, cols, 1, col_axis, inverse=True)
        return _move(block, rows, 0, row_axis, inverse=True)

    return jax.jit(
        jax.shard_map(per_device, mesh=mesh, in_specs=P(*axes, None, None), out_specs=P(*axes))
    )


@dataclasses.dataclass(frozen=True)
class _Routing:
    """How one dimension moves between JAX's contiguous blocks and the block-cyclic local layout.

    For each shift ``s`` in `steps`, position ``k`` of the mesh axis sends to ``(k + s) % nprocs``
    the indices ``contiguous[k]`` of its block, which land at ``cyclic[(k + s) % nprocs]`` of the
    receiver's local layout (same slot, same order). Both tables are ``(nprocs, width)`` int32,
    padded with the out-of-bounds indices `block` and `local` respectively.
    """

    nprocs: int
    block: int
    local: int
    steps: tuple[tuple[int, np.ndarray, np.ndarray], ...]


def _routings(plan: BlockCyclicPlan) -> tuple[_Routing, _Routing]:
    """The routings of the rows and of the columns of `plan`."""
    local_rows, local_cols = plan.local_shape
    return (
        _routing(plan.m, local_rows, plan.grid_rows, plan.tile),
        _routing(plan.n, local_cols, plan.grid_cols, plan.tile),
    )


@functools.lru_cache(maxsize=64)
def _routing(extent: int, local: int, nprocs: int, tile: int) -> _Routing:
    block = extent // nprocs
    index = np.arange(extent)
    source, contiguous = np.divmod(index, block)
    target, cyclic = _to_cyclic(index, tile, nprocs)
    shift = (target - source) % nprocs
    # Number the indices of each (shift, source) group 0, 1, ... in increasing order: their slots.
    group = shift * nprocs + source
    order = np.argsort(group, kind="stable")
    counts = np.bincount(group, minlength=nprocs * nprocs)
    slot = np.empty(extent, np.int64)
    slot[order] = np.arange(extent) - np.repeat(np.cumsum(counts) - counts, counts)
    steps = []
    for s, group_counts in enumerate(counts.reshape(nprocs, nprocs)):
        width = group_counts.max()
        if width == 0:
            continue
        mine = shift == s
        sources = np.full((nprocs, width), block, np.int32)
        targets = np.full((nprocs, width), local, np.int32)
        sources[source[mine], slot[mine]] = contiguous[mine]
        targets[target[mine], slot[mine]] = cyclic[mine]
        steps.append((s, sources, targets))
    return _Routing(nprocs, block, local, tuple(steps))


def _move(x: jax.Array, routing: _Routing, dim: int, axis_name: AxisName, *, inverse: bool):
    """Moves dimension `dim` of the per-device array `x` from JAX blocks to the block-cyclic local
    layout (or back, if `inverse`) along mesh axis `axis_name`."""
    me = _axis_index(axis_name)
    shape = list(x.shape)
    shape[dim] = routing.block if inverse else routing.local
    out = jnp.zeros(shape, x.dtype)
    for shift, contiguous, cyclic in routing.steps:
        sources, targets = (cyclic, contiguous) if inverse else (contiguous, cyclic)
        piece = jnp.take(x, jnp.asarray(sources)[me], axis=dim, mode="fill", fill_value=0)
        if shift:
            step = -shift if inverse else shift
            perm = [(k, (k + step) % routing.nprocs) for k in range(routing.nprocs)]
            piece = lax.ppermute(piece, axis_name, perm)
        where = jnp.asarray(targets)[me]
        out = out.at[(where,) if dim == 0 else (slice(None), where)].set(piece, mode="drop")
    return out


def _fill_padded_diagonal(
    local: jax.Array, plan: BlockCyclicPlan, axes: tuple[AxisName, AxisName], value: float
):
    """Sets the entries of the local matrix that are padded-diagonal entries of the global one."""
    li = lax.broadcasted_iota(jnp.int32, local.shape, 0)
    lj = lax.broadcasted_iota(jnp.int32, local.shape, 1)
    i = _to_global(_axis_index(axes[0]), li, plan.tile, plan.grid_rows)
    j = _to_global(_axis_index(axes[1]), lj, plan.tile, plan.grid_cols)
    padded_diagonal = (i == j) & (i >= min(plan.m, plan.n))
    return jnp.where(padded_diagonal, jnp.asarray(value, local.dtype), local)


def _axis_index(axis_name: AxisName):
    return 0 if axis_name is None else lax.axis_index(axis_name)


def _check_layout(
    where: str, plan: BlockCyclicPlan, mesh: Mesh, axes: Sequence[AxisName]
) -> tuple[AxisName, AxisName]:
    """Checks that `plan`'s grid is `mesh` seen through `axes`; returns `axes` as a tuple."""
    if not isinstance(plan, BlockCyclicPlan):
        raise TypeError(
            f"{where}: plan must be a BlockCyclicPlan, got {type(plan).__name__}; build one with "
            "BlockCyclicPlan(m, n, tile, grid_rows, grid_cols)."
        )
    if not isinstance(mesh, Mesh):
        raise TypeError(
            f"{where}: mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}; build one with "
            f"jax.make_mesh(({plan.grid_rows}, {plan.grid_cols}), ('x', 'y'))."
        )
    if isinstance(axes, str) or not isinstance(axes, Sequence) or len(axes) != 2:
        raise ValueError(
            f"{where}: axes={axes!r} must be a pair (row_axis, col_axis) of mesh axis names or "
            "None, e.g. ('x', 'y'), ('x', None) or (None, 'y')."
        )
    axes = tuple(axes)
    for axis in axes:
        if axis is not None and axis not in mesh.axis_names:
            raise ValueError(
                f"{where}: axes={axes!r} names {axis!r}, which is not an axis of the mesh "
                f"(axes {mesh.axis_names}); pass mesh axis names or None."
            )
    if axes[0] is not None and axes[0] == axes[1]:
        raise ValueError(
            f"{where}: axes={axes!r} uses {axes[0]!r} for both rows and columns; pass two "
            "different mesh axes, or None for a dimension that is not sharded."
        )
    sizes = tuple(1 if axis is None else mesh.shape[axis] for axis in axes)
    if sizes != plan.grid_shape:
        raise ValueError(
            f"{where}: the mesh axes {axes!r} have sizes {sizes}, but the plan's process grid is "
            f"{plan.grid_shape}; build the plan with grid_rows={sizes[0]}, grid_cols={sizes[1]}."
        )
    if mesh.size != plan.num_processes:
        raise ValueError(
            f"{where}: the mesh {dict(mesh.shape)} has {mesh.size} devices but the "
            f"{plan.grid_rows} × {plan.grid_cols} process grid has {plan.num_processes}; pass a "
            "mesh whose axes other than axes have size 1."
        )
    if plan.m % plan.grid_rows or plan.n % plan.grid_cols:
        raise ValueError(
            f"{where}: JAX shards a ({plan.m}, {plan.n}) matrix over a {plan.grid_rows} × "
            f"{plan.grid_cols} grid only in equal blocks, so plan.m must be divisible by "
            "grid_rows and plan.n by grid_cols; pad the matrix, or pick a grid that divides it."
        )
    return axes


def _check_array(
    where: str, name: str, x: jax.Array, shape: tuple[int, ...], sharding: NamedSharding
) -> None:
    if not isinstance(x, jax.Array):
        raise TypeError(
            f"{where}: {name} must be a jax.Array, got {type(x).__name__}; put it on the mesh with "
            f"jax.device_put({name}, NamedSharding(mesh, {sharding.spec}))."
        )
    if x.ndim != len(shape):
        raise ValueError(
            f"{where}: {name} must have rank {len(shape)}, got {name}.ndim={x.ndim} "
            f"({name}.shape={x.shape}); pass an array of shape {shape}."
        )
    if x.shape != shape:
        raise ValueError(
            f"{where}: {name}.shape={x.shape}, but the plan needs {shape}; pass an array of that "
            f"shape, or a plan built for this one."
        )
    if x.dtype not in _DTYPES:
        raise ValueError(
            f"{where}: {name}.dtype={x.dtype} is not supported; pass float32, float64, complex64 "
            f"or complex128, e.g. {name}.astype(jnp.float32)."
        )
    # Only concrete arrays know their sharding; under jit, shard_map's in_specs say what it must be.
    actual = getattr(x, "sharding", None)
    if actual is not None and not actual.is_equivalent_to(sharding, x.ndim):
        raise ValueError(
            f"{where}: {name} is sharded as {actual}, but the plan and mesh need "
            f"NamedSharding(mesh, {sharding.spec}); reshard with "
            f"jax.device_put({name}, NamedSharding(mesh, {sharding.spec}))."
        )
