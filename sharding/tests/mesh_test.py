"""Tests for `jaxsolve.sharding.make_grid_mesh` and `jaxsolve.sharding.row_mesh`.

On the 8 virtual CPU devices of conftest.py, taken from ``jax.devices("cpu")`` so that they exist
on GPU hosts too. Device lists are shuffled where order matters, so that a mesh that sorted its
devices (by id, or by topology as `jax.make_mesh` may) would fail.
"""

import re

import jax
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import jaxsolve.sharding as js

CPUS = jax.devices("cpu")
GRIDS = [(1, 1), (1, 8), (8, 1), (2, 4), (4, 2), (2, 3), (3, 2)]


def shuffled(count, seed=0):
    order = np.random.default_rng(seed).permutation(len(CPUS))[:count]
    return [CPUS[i] for i in order]


class TestMakeGridMesh:
    @pytest.mark.parametrize("grid_rows, grid_cols", GRIDS, ids=[f"{r}x{c}" for r, c in GRIDS])
    def test_make_grid_mesh_row_order(self, grid_rows, grid_cols):
        devices = shuffled(grid_rows * grid_cols)
        mesh = js.make_grid_mesh(grid_rows, grid_cols, devices=devices)
        assert mesh.devices.shape == (grid_rows, grid_cols)
        for k, device in enumerate(devices):
            assert mesh.devices[k // grid_cols, k % grid_cols] is device

    @pytest.mark.parametrize("grid_rows, grid_cols", GRIDS, ids=[f"{r}x{c}" for r, c in GRIDS])
    def test_make_grid_mesh_column_order(self, grid_rows, grid_cols):
        devices = shuffled(grid_rows * grid_cols)
        mesh = js.make_grid_mesh(grid_rows, grid_cols, order="column", devices=devices)
        assert mesh.devices.shape == (grid_rows, grid_cols)
        for k, device in enumerate(devices):
            assert mesh.devices[k % grid_rows, k // grid_rows] is device

    def test_make_grid_mesh_axes(self):
        mesh = js.make_grid_mesh(2, 4, axis_names=("row", "col"), devices=CPUS)
        assert mesh.axis_names == ("row", "col")
        assert dict(mesh.shape) == {"row": 2, "col": 4}
        assert mesh.axis_types == (AxisType.Auto, AxisType.Auto)
        assert js.make_grid_mesh(1, 1, axis_names=["a", "b"], devices=CPUS[:1]).axis_names == (
            "a", "b")

    def test_make_grid_mesh_default_devices(self):
        devices = jax.devices()
        mesh = js.make_grid_mesh(1, len(devices), order="column")
        assert list(mesh.devices.flat) == devices

    @pytest.mark.parametrize("order", ["row", "column"])
    def test_make_grid_mesh_block_of_each_process(self, order):
        """Device k holds block (p, q) of its grid position, seen through `jax.shard_map`."""
        devices = shuffled(6, seed=1)
        mesh = js.make_grid_mesh(2, 3, order=order, devices=devices)

        def position(block):
            return block + 10 * jax.lax.axis_index("pr") + jax.lax.axis_index("pc")

        blocks = jax.jit(jax.shard_map(position, mesh=mesh, in_specs=P("pr", "pc"),
                                       out_specs=P("pr", "pc")))(np.zeros((2, 3), np.int32))
        assert blocks.sharding == NamedSharding(mesh, P("pr", "pc"))
        for k, device in enumerate(devices):
            p, q = (k // 3, k % 3) if order == "row" else (k % 2, k // 2)
            (shard,) = [s for s in blocks.addressable_shards if s.device is device]
            assert shard.index == (slice(p, p + 1), slice(q, q + 1))
            assert shard.data.tolist() == [[10 * p + q]]

    @pytest.mark.parametrize(
        "args, kwargs, error, message",
        [
            ((0, 2), {}, ValueError,
             "make_grid_mesh: grid_rows=0 must be at least 1, the number of process rows."),
            ((2, 2.0), {}, TypeError,
             "make_grid_mesh: grid_cols=2.0 must be an int, the number of process columns; got a "
             "float."),
            ((2, 2), dict(order="col"), ValueError,
             "make_grid_mesh: order='col' is not a grid order; pass 'row' (device k at "
             "(k // grid_cols, k % grid_cols), CUSOLVERMP_GRID_MAPPING_ROW_MAJOR) or 'column' "
             "(device k at (k % grid_rows, k // grid_rows), CUSOLVERMP_GRID_MAPPING_COL_MAJOR)."),
            ((2, 2), dict(axis_names=("x", "x")), ValueError,
             "make_grid_mesh: axis_names=('x', 'x') must be two different strings, the names of "
             "the process-row and process-column axes, e.g. ('pr', 'pc')."),
            ((2, 2), dict(axis_names="xy"), ValueError,
             "make_grid_mesh: axis_names='xy' must be two different strings, the names of the "
             "process-row and process-column axes, e.g. ('pr', 'pc')."),
            ((2, 3), dict(devices=CPUS), ValueError,
             "make_grid_mesh: a 2 x 3 grid needs 6 devices, but 8 were given; pass "
             "grid_rows * grid_cols == 8, or devices= with 6 devices."),
            ((1, 1), dict(devices=[]), ValueError,
             "make_grid_mesh: devices is empty; pass at least one device, or None for all of "
             "jax.devices()."),
            ((1, 2), dict(devices=[CPUS[0], CPUS[0]]), ValueError,
             f"make_grid_mesh: devices lists {CPUS[0]} twice; a mesh holds each device once."),
            ((1, 2), dict(devices=[0, 1]), TypeError,
             "make_grid_mesh: devices must hold jax.Device objects (from jax.devices()), not "
             "int: 0."),
        ],
    )
    def test_make_grid_mesh_errors(self, args, kwargs, error, message):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            js.make_grid_mesh(*args, **kwargs)


class TestRowMesh:
    def test_row_mesh_order(self):
        devices = shuffled(8)
        mesh = js.row_mesh(devices=devices)
        assert mesh.axis_names == ("rows",)
        assert mesh.axis_types == (AxisType.Auto,)
        assert list(mesh.devices) == devices
        x = jax.device_put(np.arange(16), NamedSharding(mesh, P("rows")))
        for k, device in enumerate(devices):
            (shard,) = [s for s in x.addressable_shards if s.device is device]
            assert shard.data.tolist() == [2 * k, 2 * k + 1]

    def test_row_mesh_axis_name_and_default_devices(self):
        mesh = js.row_mesh("parts")
        assert dict(mesh.shape) == {"parts": len(jax.devices())}
        assert list(mesh.devices) == jax.devices()

    @pytest.mark.parametrize(
        "kwargs, error, message",
        [
            (dict(axis_name=""), ValueError,
             "row_mesh: axis_name='' must be a non-empty string, e.g. 'rows'."),
            (dict(axis_name=("a",)), ValueError,
             "row_mesh: axis_name=('a',) must be a non-empty string, e.g. 'rows'."),
            (dict(devices=[]), ValueError,
             "row_mesh: devices is empty; pass at least one device, or None for all of "
             "jax.devices()."),
            (dict(devices=CPUS[:2] + CPUS[1:2]), ValueError,
             f"row_mesh: devices lists {CPUS[1]} twice; a mesh holds each device once."),
        ],
    )
    def test_row_mesh_errors(self, kwargs, error, message):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            js.row_mesh(**kwargs)
