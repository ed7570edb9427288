"""Tests for jaxsolve.layout.to_block_cyclic and from_block_cyclic, on 8 virtual CPU devices."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxsolve.layout import BlockCyclicPlan, from_block_cyclic, to_block_cyclic

GRIDS = [(1, 1), (2, 1), (1, 2), (2, 2), (4, 2)]
AXES = ("x", "y")
STORAGE_SPEC = P("x", "y", None, None)

# The `dtype` fixture toggles x64 around the whole test, which is what we want for every example.
SETTINGS = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def plans(draw):
    """Plans over the test grids, for matrices JAX can shard over them, tiles that need not divide
    the JAX blocks."""
    grid_rows, grid_cols = draw(st.sampled_from(GRIDS))
    return BlockCyclicPlan(
        m=grid_rows * draw(st.integers(1, 5)),
        n=grid_cols * draw(st.integers(1, 5)),
        tile=draw(st.integers(1, 5)),
        grid_rows=grid_rows,
        grid_cols=grid_cols,
    )


def _random(seed, shape, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _expected_storage(block_cyclic_model, a, plan):
    """What `to_block_cyclic` must return: the model's local matrices, transposed (column-major)."""
    return block_cyclic_model(a, plan.tile, *plan.grid_shape).transpose(0, 1, 3, 2)


def _assert_placed(storage, expected, mesh):
    """The device at mesh position (p, q) holds exactly ``expected[p, q]``."""
    devices = mesh.devices.reshape(expected.shape[:2])
    shards = {shard.device: np.asarray(shard.data) for shard in storage.addressable_shards}
    for (p, q), device in np.ndenumerate(devices):
        np.testing.assert_array_equal(shards[device], expected[p : p + 1, q : q + 1])


class TestToBlockCyclic:
    @SETTINGS
    @given(plan=plans(), seed=st.integers(0, 2**32 - 1))
    def test_to_block_cyclic_against_model(self, plan, seed, dtype, block_cyclic_model, submesh):
        mesh = submesh(*plan.grid_shape)
        a = _random(seed, (plan.m, plan.n), dtype)
        a_sharded = jax.device_put(a, NamedSharding(mesh, P(*AXES)))
        storage = to_block_cyclic(a_sharded, plan, mesh, AXES)
        assert storage.dtype == dtype
        assert storage.shape == plan.storage_shape
        assert storage.sharding.is_equivalent_to(NamedSharding(mesh, STORAGE_SPEC), 4)
        _assert_placed(storage, _expected_storage(block_cyclic_model, a, plan), mesh)

    @pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=lambda t: t.name)
    @pytest.mark.parametrize("grid", GRIDS, ids=[f"{r}x{c}" for r, c in GRIDS])
    def test_to_block_cyclic_grids(self, grid, axis_type, block_cyclic_model, submesh):
        # Blocks of 5 rows / columns per device in tiles of 3: tiles straddle devices.
        grid_rows, grid_cols = grid
        plan = BlockCyclicPlan(5 * grid_rows, 5 * grid_cols, 3, grid_rows, grid_cols)
        mesh = submesh(grid_rows, grid_cols, axis_types=(axis_type, axis_type))
        a = _random(0, (plan.m, plan.n), np.float32)
        a_sharded = jax.device_put(a, NamedSharding(mesh, P(*AXES)))
        storage = to_block_cyclic(a_sharded, plan, mesh, AXES)
        _assert_placed(storage, _expected_storage(block_cyclic_model, a, plan), mesh)

    @pytest.mark.parametrize(
        "mesh_shape, axis_names, axes, grid",
        [
            ((4, 1), ("x",), ("x", None), (4, 1)),
            ((1, 4), ("y",), (None, "y"), (1, 4)),
            ((4, 1), ("x", "y"), ("x", None), (4, 1)),
            ((1, 2), ("x", "y"), (None, "y"), (1, 2)),
        ],
        ids=["1d-rows", "1d-cols", "2d-rows", "2d-cols"],
    )
    def test_to_block_cyclic_single_axis(
        self, mesh_shape, axis_names, axes, grid, block_cyclic_model, submesh
    ):
        mesh = submesh(*mesh_shape, axis_names=axis_names)
        plan = BlockCyclicPlan(6 * grid[0], 6 * grid[1], 4, *grid)
        a = _random(1, (plan.m, plan.n), np.float32)
        a_sharded = jax.device_put(a, NamedSharding(mesh, P(*axes)))
        storage = to_block_cyclic(a_sharded, plan, mesh, axes)
        assert storage.sharding.is_equivalent_to(NamedSharding(mesh, P(*axes, None, None)), 4)
        _assert_placed(storage, _expected_storage(block_cyclic_model, a, plan), mesh)
        back = from_block_cyclic(storage, plan, mesh, axes)
        assert back.sharding.is_equivalent_to(a_sharded.sharding, 2)
        np.testing.assert_array_equal(back, a)

    def test_to_block_cyclic_jit(self, dtype, block_cyclic_model, submesh):
        mesh = submesh(2, 2)
        plan = BlockCyclicPlan(6, 10, 2, 2, 2)
        a = _random(2, (plan.m, plan.n), dtype)
        convert = jax.jit(lambda a: to_block_cyclic(2 * a, plan, mesh, AXES))
        storage = convert(jax.device_put(a, NamedSharding(mesh, P(*AXES))))
        _assert_placed(storage, _expected_storage(block_cyclic_model, 2 * a, plan), mesh)

    @pytest.mark.parametrize(
        "shape, tile, grid",
        [((6, 6), 2, (2, 2)), ((6, 4), 3, (2, 2)), ((4, 6), 1, (4, 2)), ((8, 8), 2, (2, 2))],
        ids=["square", "wide-padding", "tall-padding", "no-padding"],
    )
    def test_to_block_cyclic_pad_diagonal(self, shape, tile, grid, block_cyclic_model, submesh):
        mesh = submesh(*grid)
        plan = BlockCyclicPlan(*shape, tile, *grid)
        a = _random(3, shape, np.float32)
        # By definition: the padded matrix, with 1 on its diagonal where it is outside `a`.
        padded = np.zeros(plan.padded_shape, np.float32)
        padded[: plan.m, : plan.n] = a
        for i in range(min(shape), min(plan.padded_shape)):
            padded[i, i] = 1.0
        a_sharded = jax.device_put(a, NamedSharding(mesh, P(*AXES)))
        storage = to_block_cyclic(a_sharded, plan, mesh, AXES, pad_diagonal=1.0)
        _assert_placed(storage, _expected_storage(block_cyclic_model, padded, plan), mesh)
        np.testing.assert_array_equal(from_block_cyclic(storage, plan, mesh, AXES), a)

    @pytest.mark.parametrize("grid", [(2, 2), (4, 2)], ids=["2x2", "4x2"])
    def test_to_block_cyclic_no_all_gather(self, grid, submesh):
        mesh = submesh(*grid)
        plan = BlockCyclicPlan(12 * grid[0], 12 * grid[1], 5, *grid)
        a = jax.device_put(jnp.ones((plan.m, plan.n)), NamedSharding(mesh, P(*AXES)))
        hlo = jax.jit(lambda a: to_block_cyclic(a, plan, mesh, AXES)).lower(a).compile().as_text()
        assert "collective-permute" in hlo
        assert "all-gather" not in hlo
        assert "all-to-all" not in hlo

    def test_to_block_cyclic_errors(self, submesh):
        mesh = submesh(2, 2)
        plan = BlockCyclicPlan(8, 8, 2, 2, 2)
        sharding = NamedSharding(mesh, P(*AXES))
        a = jax.device_put(jnp.ones((8, 8)), sharding)

        def raises(error, message, *args, **kwargs):
            with pytest.raises(error, match=f"^{re.escape(message)}$"):
                to_block_cyclic(*args, **kwargs)

        raises(
            TypeError,
            "to_block_cyclic: plan must be a BlockCyclicPlan, got tuple; build one with "
            "BlockCyclicPlan(m, n, tile, grid_rows, grid_cols).",
            a, (8, 8, 2, 2, 2), mesh, AXES,
        )
        raises(
            TypeError,
            "to_block_cyclic: mesh must be a jax.sharding.Mesh, got str; build one with "
            "jax.make_mesh((2, 2), ('x', 'y')).",
            a, plan, "mesh", AXES,
        )
        raises(
            ValueError,
            "to_block_cyclic: axes='xy' must be a pair (row_axis, col_axis) of mesh axis names or "
            "None, e.g. ('x', 'y'), ('x', None) or (None, 'y').",
            a, plan, mesh, "xy",
        )
        raises(
            ValueError,
            "to_block_cyclic: axes=('x', 'z') names 'z', which is not an axis of the mesh "
            "(axes ('x', 'y')); pass mesh axis names or None.",
            a, plan, mesh, ("x", "z"),
        )
        raises(
            ValueError,
            "to_block_cyclic: axes=('x', 'x') uses 'x' for both rows and columns; pass two "
            "different mesh axes, or None for a dimension that is not sharded.",
            a, plan, mesh, ("x", "x"),
        )
        raises(
            ValueError,
            "to_block_cyclic: the mesh axes ('x', 'y') have sizes (2, 2), but the plan's process "
            "grid is (4, 1); build the plan with grid_rows=2, grid_cols=2.",
            a, BlockCyclicPlan(8, 8, 2, 4, 1), mesh, AXES,
        )
        raises(
            ValueError,
            "to_block_cyclic: the mesh {'x': 2, 'y': 2} has 4 devices but the 2 × 1 process grid "
            "has 2; pass a mesh whose axes other than axes have size 1.",
            a, BlockCyclicPlan(8, 8, 2, 2, 1), mesh, ("x", None),
        )
        raises(
            ValueError,
            "to_block_cyclic: JAX shards a (7, 8) matrix over a 2 × 2 grid only in equal blocks, "
            "so plan.m must be divisible by grid_rows and plan.n by grid_cols; pad the matrix, or "
            "pick a grid that divides it.",
            a, BlockCyclicPlan(7, 8, 2, 2, 2), mesh, AXES,
        )
        raises(
            TypeError,
            f"to_block_cyclic: a must be a jax.Array, got ndarray; put it on the mesh with "
            f"jax.device_put(a, NamedSharding(mesh, {P(*AXES)})).",
            np.ones((8, 8)), plan, mesh, AXES,
        )
        raises(
            ValueError,
            "to_block_cyclic: a must have rank 2, got a.ndim=1 (a.shape=(64,)); pass an array of "
            "shape (8, 8).",
            jnp.ones(64), plan, mesh, AXES,
        )
        raises(
            ValueError,
            "to_block_cyclic: a.shape=(8, 6), but the plan needs (8, 8); pass an array of that "
            "shape, or a plan built for this one.",
            jax.device_put(jnp.ones((8, 6)), sharding), plan, mesh, AXES,
        )
        raises(
            ValueError,
            "to_block_cyclic: a.dtype=int32 is not supported; pass float32, float64, complex64 or "
            "complex128, e.g. a.astype(jnp.float32).",
            jax.device_put(jnp.ones((8, 8), jnp.int32), sharding), plan, mesh, AXES,
        )
        transposed = jax.device_put(a, NamedSharding(mesh, P("y", "x")))
        raises(
            ValueError,
            f"to_block_cyclic: a is sharded as {transposed.sharding}, but the plan and mesh need "
            f"NamedSharding(mesh, {P(*AXES)}); reshard with "
            f"jax.device_put(a, NamedSharding(mesh, {P(*AXES)})).",
            transposed, plan, mesh, AXES,
        )
        raises(
            TypeError,
            "to_block_cyclic: pad_diagonal=1j must be a real number, e.g. 0.0 or 1.0.",
            a, plan, mesh, AXES, pad_diagonal=1j,
        )


class TestFromBlockCyclic:
    @SETTINGS
    @given(plan=plans(), seed=st.integers(0, 2**32 - 1))
    def test_from_block_cyclic_round_trip(self, plan, seed, dtype, submesh):
        mesh = submesh(*plan.grid_shape)
        a = jax.device_put(_random(seed, (plan.m, plan.n), dtype), NamedSharding(mesh, P(*AXES)))
        back = from_block_cyclic(to_block_cyclic(a, plan, mesh, AXES), plan, mesh, AXES)
        assert back.dtype == dtype
        assert back.sharding.is_equivalent_to(a.sharding, 2)
        np.testing.assert_array_equal(back, a)

    @SETTINGS
    @given(plan=plans(), seed=st.integers(0, 2**32 - 1))
    def test_from_block_cyclic_against_model(self, plan, seed, block_cyclic_model, submesh):
        # Storage built by the model from a padded matrix with nonzero padding, to be ignored.
        mesh = submesh(*plan.grid_shape)
        padded = _random(seed, plan.padded_shape, np.float32)
        storage = jax.device_put(
            _expected_storage(block_cyclic_model, padded, plan), NamedSharding(mesh, STORAGE_SPEC)
        )
        back = from_block_cyclic(storage, plan, mesh, AXES)
        assert back.sharding.is_equivalent_to(NamedSharding(mesh, P(*AXES)), 2)
        np.testing.assert_array_equal(back, padded[: plan.m, : plan.n])

    @pytest.mark.parametrize("grid", [(2, 2), (4, 2)], ids=["2x2", "4x2"])
    def test_from_block_cyclic_jit(self, grid, submesh):
        mesh = submesh(*grid)
        plan = BlockCyclicPlan(3 * grid[0], 7 * grid[1], 2, *grid)
        a = _random(4, (plan.m, plan.n), np.complex64)
        a = jax.device_put(a, NamedSharding(mesh, P(*AXES)))

        @jax.jit
        def round_trip(a):
            storage = to_block_cyclic(a, plan, mesh, AXES)
            return from_block_cyclic(2 * storage, plan, mesh, AXES)

        np.testing.assert_array_equal(round_trip(a), 2 * np.asarray(a))

    @pytest.mark.parametrize("grid", [(2, 2), (4, 2)], ids=["2x2", "4x2"])
    def test_from_block_cyclic_no_all_gather(self, grid, submesh):
        mesh = submesh(*grid)
        plan = BlockCyclicPlan(12 * grid[0], 12 * grid[1], 5, *grid)
        storage = jax.device_put(jnp.ones(plan.storage_shape), NamedSharding(mesh, STORAGE_SPEC))
        convert = jax.jit(lambda s: from_block_cyclic(s, plan, mesh, AXES))
        hlo = convert.lower(storage).compile().as_text()
        assert "collective-permute" in hlo
        assert "all-gather" not in hlo
        assert "all-to-all" not in hlo

    def test_from_block_cyclic_errors(self, submesh):
        mesh = submesh(2, 2)
        plan = BlockCyclicPlan(8, 6, 2, 2, 2)
        sharding = NamedSharding(mesh, STORAGE_SPEC)

        def raises(error, message, storage, plan=plan, axes=AXES):
            with pytest.raises(error, match=f"^{re.escape(message)}$"):
                from_block_cyclic(storage, plan, mesh, axes)

        raises(
            ValueError,
            "from_block_cyclic: storage must have rank 4, got storage.ndim=2 "
            "(storage.shape=(8, 6)); pass an array of shape (2, 2, 4, 4).",
            jax.device_put(jnp.ones((8, 6)), NamedSharding(mesh, P(*AXES))),
        )
        raises(
            ValueError,
            "from_block_cyclic: storage.shape=(2, 2, 4, 6), but the plan needs (2, 2, 4, 4); pass "
            "an array of that shape, or a plan built for this one.",
            jax.device_put(jnp.ones((2, 2, 4, 6)), sharding),
        )
        raises(
            ValueError,
            "from_block_cyclic: storage.dtype=bool is not supported; pass float32, float64, "
            "complex64 or complex128, e.g. storage.astype(jnp.float32).",
            jax.device_put(jnp.ones(plan.storage_shape, bool), sharding),
        )
        replicated = jax.device_put(jnp.ones(plan.storage_shape), NamedSharding(mesh, P()))
        raises(
            ValueError,
            f"from_block_cyclic: storage is sharded as {replicated.sharding}, but the plan and "
            f"mesh need NamedSharding(mesh, {STORAGE_SPEC}); reshard with "
            f"jax.device_put(storage, NamedSharding(mesh, {STORAGE_SPEC})).",
            replicated,
        )
        raises(
            ValueError,
            "from_block_cyclic: the mesh axes ('y', 'x') have sizes (2, 2), but the plan's process "
            "grid is (1, 4); build the plan with grid_rows=2, grid_cols=2.",
            jax.device_put(jnp.ones(plan.storage_shape), sharding),
            plan=BlockCyclicPlan(8, 8, 2, 1, 4),
            axes=("y", "x"),
        )
