"""Meshes for jaxsolve's solvers: `make_grid_mesh` (dense 2D process grids) and `row_mesh`.

Both build a `jax.sharding.Mesh` from an explicit array of devices, so that the position of every
device in the mesh is exactly the one documented, whatever the topology. (`jax.make_mesh` may
reorder devices to suit the interconnect, which would break the correspondence below.)

The position is what matters to cuSOLVERMp. Its process grid (`cusolverMpCreateDeviceGrid`) maps
NCCL rank ``k`` to grid position ``(p, q)`` in one of two orders, `cusolverMpGridMapping_t`:

* ``order="row"`` (``CUSOLVERMP_GRID_MAPPING_ROW_MAJOR``): ``(p, q) = (k // P_c, k % P_c)``;
* ``order="column"`` (``CUSOLVERMP_GRID_MAPPING_COL_MAJOR``): ``(p, q) = (k % P_r, k // P_r)``.

`make_grid_mesh` puts the ``k``-th of the given devices at that position, so that with the
devices in rank order (the default, `jax.devices`, lists them by process and with one GPU per
process, device ``k`` belongs to process ``k``) mesh position and grid position agree.

Axis types: both meshes have `jax.sharding.AxisType.Auto` axes, the default of
`jax.sharding.Mesh` (`jax.make_mesh` defaults to ``Explicit``). With Auto axes a
`jax.sharding.NamedSharding` over the mesh is all that `jax.device_put` and `jax.jit` need, and
`jax.shard_map` takes the mesh as it is; sharded and replicated arrays mix freely in ``jnp`` code,
the compiler choosing the layouts in between. Explicit axes would make each array's sharding part
of its type, so that, for example, adding a row-sharded vector to a replicated one is a type error
until one of them goes through `jax.reshard`; that buys control over communication that a
solver's few, fixed layouts do not need.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

from ._checks import check_positive_int

GridOrder = Literal["row", "column"]
"""How devices are laid over a process grid, as ``cusolverMpGridMapping_t``: ``"row"``, device
``k`` at ``(k // grid_cols, k % grid_cols)``; ``"column"``, at
``(k % grid_rows, k // grid_rows)``."""


def make_grid_mesh(
    grid_rows: int,
    grid_cols: int,
    *,
    order: GridOrder = "row",
    axis_names: tuple[str, str] = ("pr", "pc"),
    devices: Sequence[jax.Device] | None = None,
) -> Mesh:
    """A ``grid_rows`` × ``grid_cols`` mesh of devices for a dense 2D process grid (cuSOLVERMp).

    The ``k``-th device goes to mesh position ``(k // grid_cols, k % grid_cols)`` with
    ``order="row"``, or ``(k % grid_rows, k // grid_rows)`` with ``order="column"``: the two
    orders of ``cusolverMpGridMapping_t``. The mesh's first axis indexes process rows ``p``, the
    second process columns ``q``; both axes are `jax.sharding.AxisType.Auto` (the module
    documentation says why).

    Args:
      grid_rows: the number of process rows P_r, ``>= 1``.
      grid_cols: the number of process columns P_c, ``>= 1``.
      order: ``"row"`` or ``"column"``, how the devices are laid over the grid.
      axis_names: the names of the mesh's two axes, process rows first.
      devices: the ``grid_rows * grid_cols`` devices in rank order; defaults to `jax.devices`
        (all devices of all processes).

    Returns:
      A `jax.sharding.Mesh` of shape ``(grid_rows, grid_cols)``.

    Raises:
      TypeError: if `grid_rows` or `grid_cols` is not an int, or `devices` holds something else
        than `jax.Device` objects.
      ValueError: if a grid size is below 1, `order` is neither ``"row"`` nor ``"column"``,
        `axis_names` are not two different strings, `devices` repeats a device, or
        ``grid_rows * grid_cols`` is not the number of devices.

    Examples:
      Six of the host's CPU devices (8 virtual ones with
      ``XLA_FLAGS=--xla_force_host_platform_device_count=8``) on a 2 × 3 grid, by their ids:

      >>> import jax
      >>> from jaxsolve.sharding import make_grid_mesh
      >>> devices = jax.devices("cpu")[:6]
      >>> mesh = make_grid_mesh(2, 3, devices=devices)
      >>> dict(mesh.shape)
      {'pr': 2, 'pc': 3}
      >>> [[d.id for d in row] for row in mesh.devices]
      [[0, 1, 2], [3, 4, 5]]
      >>> column = make_grid_mesh(2, 3, order="column", devices=devices)
      >>> [[d.id for d in row] for row in column.devices]
      [[0, 2, 4], [1, 3, 5]]

      A matrix split in row and column blocks over that grid:

      >>> import jax.numpy as jnp
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> a = jax.device_put(jnp.zeros((4, 6)), NamedSharding(mesh, P("pr", "pc")))
      >>> a.addressable_shards[4].data.shape, a.addressable_shards[4].index
      ((2, 2), (slice(2, 4, None), slice(2, 4, None)))
    """
    grid_rows = check_positive_int("make_grid_mesh", "grid_rows", grid_rows,
                                   "the number of process rows")
    grid_cols = check_positive_int("make_grid_mesh", "grid_cols", grid_cols,
                                   "the number of process columns")
    if order not in ("row", "column"):
        raise ValueError(
            f"make_grid_mesh: order={order!r} is not a grid order; pass 'row' (device k at "
            "(k // grid_cols, k % grid_cols), CUSOLVERMP_GRID_MAPPING_ROW_MAJOR) or 'column' "
            "(device k at (k % grid_rows, k // grid_rows), CUSOLVERMP_GRID_MAPPING_COL_MAJOR)."
        )
    if (not isinstance(axis_names, (tuple, list)) or len(axis_names) != 2
            or not all(isinstance(name, str) for name in axis_names)
            or axis_names[0] == axis_names[1]):
        raise ValueError(
            f"make_grid_mesh: axis_names={axis_names!r} must be two different strings, the "
            "names of the process-row and process-column axes, e.g. ('pr', 'pc')."
        )
    flat = _device_array("make_grid_mesh", devices)
    if flat.size != grid_rows * grid_cols:
        raise ValueError(
            f"make_grid_mesh: a {grid_rows} x {grid_cols} grid needs {grid_rows * grid_cols} "
            f"devices, but {flat.size} were given; pass grid_rows * grid_cols == {flat.size}, "
            f"or devices= with {grid_rows * grid_cols} devices."
        )
    if order == "row":
        grid = flat.reshape(grid_rows, grid_cols)
    else:
        grid = flat.reshape(grid_cols, grid_rows).T
    return Mesh(grid, tuple(axis_names), axis_types=(AxisType.Auto, AxisType.Auto))


def row_mesh(axis_name: str = "rows", devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-dimensional mesh of devices, for matrices and vectors split in blocks of rows.

    Device ``k`` holds the ``k``-th block of rows: the layout of a sparse matrix partitioned by
    rows (each process its contiguous rows, as in distributed AMG), and of the vectors that go
    with it, as ``NamedSharding(mesh, P(axis_name))``. The axis is `jax.sharding.AxisType.Auto`.

    Args:
      axis_name: the name of the mesh axis.
      devices: the devices in row-block order; defaults to `jax.devices` (all devices of all
        processes).

    Returns:
      A `jax.sharding.Mesh` of shape ``(len(devices),)``.

    Raises:
      TypeError: if `devices` holds something else than `jax.Device` objects.
      ValueError: if `axis_name` is not a non-empty string, or `devices` is empty or repeats a
        device.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> from jaxsolve.sharding import row_mesh
      >>> mesh = row_mesh(devices=jax.devices("cpu")[:4])
      >>> dict(mesh.shape)
      {'rows': 4}
      >>> x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("rows")))
      >>> [shard.data.tolist() for shard in x.addressable_shards]
      [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    """
    if not isinstance(axis_name, str) or not axis_name:
        raise ValueError(
            f"row_mesh: axis_name={axis_name!r} must be a non-empty string, e.g. 'rows'."
        )
    return Mesh(_device_array("row_mesh", devices), (axis_name,), axis_types=(AxisType.Auto,))


def _device_array(function: str, devices: Sequence[jax.Device] | None) -> np.ndarray:
    """`devices` (default `jax.devices`) as a flat object array, checked."""
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError(f"{function}: devices is empty; pass at least one device, or None "
                         "for all of jax.devices().")
    seen = set()
    for device in devices:
        if not isinstance(device, jax.Device):
            raise TypeError(
                f"{function}: devices must hold jax.Device objects (from jax.devices()), not "
                f"{type(device).__name__}: {device!r}."
            )
        if device in seen:
            raise ValueError(f"{function}: devices lists {device} twice; a mesh holds each "
                             "device once.")
        seen.add(device)
    flat = np.empty(len(devices), dtype=object)
    flat[:] = devices
    return flat
