"""Tests of the native local layout conversion on the CPU, against the NumPy model.

The model and the inputs live in native_model.py, shared with native_gpu_test.py, which runs
the same checks on a GPU.
"""

import dataclasses
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from native_model import (
    CASE_IDS,
    CASES,
    DTYPES,
    numpy_row_to_column_major,
    permutations_for,
    random_matrix,
    random_tile_permutation,
)

from jaxsolve.layout import BlockCyclicPlan, _ffi, _native, to_block_cyclic
from jaxsolve.layout._native import (
    local_column_to_row_major,
    local_row_to_column_major,
    local_scratch_elements,
)

class TestLocalRowToColumnMajor:
    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize(("shape", "tile"), CASES, ids=CASE_IDS)
    def test_local_row_to_column_major_against_numpy(self, x64, shape, tile, dtype):
        rng = np.random.default_rng(0)
        x = random_matrix(rng, shape, dtype)
        for perm in permutations_for(shape, tile, seed=1):
            y = local_row_to_column_major(jnp.asarray(x), tile=tile, tile_permutation=perm)
            assert y.shape == shape[::-1] and y.dtype == dtype
            np.testing.assert_array_equal(np.asarray(y), numpy_row_to_column_major(x, tile, perm))

    def test_local_row_to_column_major_identity_is_transpose(self):
        x = random_matrix(np.random.default_rng(0), (40, 24), np.float32)
        y = local_row_to_column_major(x, tile=8)
        np.testing.assert_array_equal(np.asarray(y), x.T)

    @settings(max_examples=60, deadline=None)
    @given(
        grid=st.tuples(st.integers(1, 5), st.integers(1, 5)),
        tile=st.integers(1, 6),
        dtype=st.sampled_from([np.float32, np.complex64]),
        data=st.data(),
    )
    def test_local_row_to_column_major_random_permutations(self, grid, tile, dtype, data):
        order = data.draw(st.permutations(range(grid[0] * grid[1])))
        perm = np.stack(np.unravel_index(np.asarray(order), grid), -1).reshape(*grid, 2)
        shape = (grid[0] * tile, grid[1] * tile)
        x = random_matrix(np.random.default_rng(len(order)), shape, dtype)
        y = local_row_to_column_major(x, tile=tile, tile_permutation=perm)
        np.testing.assert_array_equal(np.asarray(y), numpy_row_to_column_major(x, tile, perm))
        back = local_column_to_row_major(y, tile=tile, tile_permutation=perm)
        np.testing.assert_array_equal(np.asarray(back), x)

    @pytest.mark.filterwarnings("error")  # JAX warns when a donated buffer goes unused
    @pytest.mark.parametrize(("shape", "tile"), CASES, ids=CASE_IDS)
    def test_local_row_to_column_major_jit_donation(self, shape, tile):
        rng = np.random.default_rng(2)
        x_np = random_matrix(rng, shape, np.float32)
        for perm in permutations_for(shape, tile, seed=3):
            f = jax.jit(
                functools.partial(local_row_to_column_major, tile=tile, tile_permutation=perm),
                donate_argnums=0,
            )
            x = jnp.asarray(x_np)
            y = f(x)
            assert x.is_deleted()
            expected = numpy_row_to_column_major(x_np, tile, perm)
            np.testing.assert_array_equal(np.asarray(y), expected)

    @pytest.mark.parametrize(("shape", "tile"), [((256, 256), 64), ((128, 512), 64)])
    def test_local_row_to_column_major_in_place(self, shape, tile):
        """XLA aliases the whole matrix and allocates no more than the declared scratch."""
        x = jnp.zeros(shape, jnp.float32)
        for perm in permutations_for(shape, tile, seed=4):
            f = functools.partial(local_row_to_column_major, tile=tile, tile_permutation=perm)
            stats = jax.jit(f, donate_argnums=0).lower(x).compile().memory_analysis()
            scratch_bytes = local_scratch_elements(shape, tile, perm) * x.dtype.itemsize
            assert stats.alias_size_in_bytes == x.nbytes
            # The scratch, plus a few bytes for the schedule constants; no second matrix.
            assert scratch_bytes <= stats.temp_size_in_bytes <= scratch_bytes + 1024

    def test_local_row_to_column_major_vmap(self):
        xs = random_matrix(np.random.default_rng(5), (3 * 12, 20), np.float32).reshape(3, 12, 20)
        perm = random_tile_permutation(np.random.default_rng(6), (3, 5))
        ys = jax.vmap(
            functools.partial(local_row_to_column_major, tile=4, tile_permutation=perm)
        )(xs)
        for x, y in zip(xs, ys):
            np.testing.assert_array_equal(np.asarray(y), numpy_row_to_column_major(x, 4, perm))

    @pytest.mark.parametrize("shape", [(0, 0), (0, 8), (8, 0)])
    def test_local_row_to_column_major_empty(self, shape):
        y = local_row_to_column_major(jnp.zeros(shape), tile=4)
        assert y.shape == shape[::-1]

    def test_local_row_to_column_major_errors(self):
        fn = local_row_to_column_major
        x = jnp.zeros((8, 12), jnp.float32)
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_row_to_column_major: x must be a 2-D local matrix, got x.shape=(8,)"
            ),
        ):
            fn(jnp.zeros(8), tile=4)
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_row_to_column_major: x.dtype must be float32, float64, complex64 or "
                "complex128, got x.dtype=int32; cast it first, e.g. x.astype(jnp.float32)"
            ),
        ):
            fn(jnp.zeros((8, 12), jnp.int32), tile=4)
        for tile in (0, -4, 2.0, True):
            with pytest.raises(
                ValueError,
                match=re.escape(
                    f"local_row_to_column_major: tile must be a positive integer, got tile={tile!r}"
                ),
            ):
                fn(x, tile=tile)
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_row_to_column_major: the local matrix must be whole tiles, but its shape "
                "(R, C) = (8, 12) is not a multiple of tile=8; pad it to whole tiles first"
            ),
        ):
            fn(x, tile=8)
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_row_to_column_major: tile_permutation must be an integer array of shape "
                "(R/T, C/T, 2) = (2, 3, 2), got shape (3, 2, 2) and dtype int64"
            ),
        ):
            fn(x, tile=4, tile_permutation=np.zeros((3, 2, 2), np.int64))
        with pytest.raises(ValueError, match=re.escape("got shape (2, 3, 2) and dtype float64")):
            fn(x, tile=4, tile_permutation=np.zeros((2, 3, 2)))
        bad = random_tile_permutation(np.random.default_rng(0), (2, 3))
        bad[1, 2] = (2, 0)
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_row_to_column_major: tile_permutation entries must be tile positions "
                "(pi, pj) with 0 <= pi < 2 and 0 <= pj < 3"
            ),
        ):
            fn(x, tile=4, tile_permutation=bad)
        bad[1, 2] = bad[0, 0]
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_row_to_column_major: tile_permutation must send distinct tiles to distinct "
                "positions (a bijection of the 2x3 tile grid)"
            ),
        ):
            fn(x, tile=4, tile_permutation=bad)
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_row_to_column_major: tile_permutation must be a concrete array (NumPy or a "
                "jax.Array outside jit), not a traced value: the tile schedule is built at trace "
                "time"
            ),
        ):
            jax.jit(lambda p: fn(x, tile=4, tile_permutation=p))(jnp.zeros((2, 3, 2), jnp.int32))


class TestLocalColumnToRowMajor:
    @pytest.mark.parametrize("dtype", DTYPES)
    @pytest.mark.parametrize(("shape", "tile"), CASES, ids=CASE_IDS)
    def test_local_column_to_row_major_against_numpy(self, x64, shape, tile, dtype):
        x = random_matrix(np.random.default_rng(7), shape, dtype)
        for perm in permutations_for(shape, tile, seed=8):
            y = numpy_row_to_column_major(x, tile, perm)
            back = local_column_to_row_major(jnp.asarray(y), tile=tile, tile_permutation=perm)
            assert back.shape == shape and back.dtype == dtype
            np.testing.assert_array_equal(np.asarray(back), x)

    @pytest.mark.filterwarnings("error")
    @pytest.mark.parametrize(("shape", "tile"), CASES, ids=CASE_IDS)
    def test_local_column_to_row_major_round_trip_jit(self, shape, tile):
        x_np = random_matrix(np.random.default_rng(9), shape, np.complex64)
        for perm in permutations_for(shape, tile, seed=10):
            kwargs = dict(tile=tile, tile_permutation=perm)

            def round_trip(x):
                return local_column_to_row_major(local_row_to_column_major(x, **kwargs), **kwargs)

            x = jnp.asarray(x_np)
            back = jax.jit(round_trip, donate_argnums=0)(x)
            assert x.is_deleted()
            np.testing.assert_array_equal(np.asarray(back), x_np)

    def test_local_column_to_row_major_errors(self):
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_column_to_row_major: the local matrix must be whole tiles, but its shape "
                "(R, C) = (12, 8) is not a multiple of tile=8; pad it to whole tiles first"
            ),
        ):
            local_column_to_row_major(jnp.zeros((8, 12)), tile=8)
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_column_to_row_major: tile_permutation must be an integer array of shape "
                "(R/T, C/T, 2) = (3, 2, 2), got shape (2, 3, 2) and dtype int64"
            ),
        ):
            local_column_to_row_major(
                jnp.zeros((8, 12)), tile=4, tile_permutation=np.zeros((2, 3, 2), np.int64)
            )


class TestLocalScratchElements:
    @settings(max_examples=200, deadline=None)
    @given(
        grid=st.tuples(st.integers(0, 40), st.integers(0, 40)),
        tile=st.integers(1, 64),
        permuted=st.booleans(),
    )
    def test_local_scratch_elements_bound(self, grid, tile, permuted):
        shape = (grid[0] * tile, grid[1] * tile)
        perm = random_tile_permutation(np.random.default_rng(0), grid) if permuted else None
        n = local_scratch_elements(shape, tile, perm)
        assert 0 <= n <= 3 * tile * max(shape)
        if shape[0] == shape[1] and not permuted:
            assert n == 0  # the square in-place transpose needs none

    @pytest.mark.parametrize(("shape", "tile"), CASES, ids=CASE_IDS)
    def test_local_scratch_elements_is_what_the_op_declares(self, shape, tile):
        """The scratch result of the lowered FFI call has exactly this many elements."""
        x = jnp.zeros(shape, jnp.float32)
        for perm in permutations_for(shape, tile, seed=11):
            f = functools.partial(local_row_to_column_major, tile=tile, tile_permutation=perm)
            text = jax.jit(f).lower(x).as_text()
            results = re.search(
                r"custom_call @jaxsolve_layout_local_row_to_column_major\(.*-> \((.*)\)", text
            ).group(1)
            scratch = re.findall(r"tensor<(\d*)x?f32>", results)[-1]
            assert int(scratch or 1) == local_scratch_elements(shape, tile, perm)

    def test_local_scratch_elements_native_refuses_other_sizes(self):
        """The C++ side checks the scratch it is given against the size it needs."""
        x = jnp.zeros((16, 24), jnp.float32)
        plan = _native._plan(16, 24, 8, None, True)
        assert plan.scratch_elements == 8 * 24
        for wrong in (plan.scratch_elements - 1, plan.scratch_elements + 1):
            with pytest.raises(
                jax.errors.JaxRuntimeError,
                match=f"scratch holds {wrong} elements, the conversion needs {8 * 24}",
            ):
                bad = dataclasses.replace(plan, scratch_elements=wrong)
                _native._local_transpose(_ffi.LOCAL_ROW_TO_COLUMN_MAJOR, x, bad).block_until_ready()

    def test_local_scratch_elements_errors(self):
        with pytest.raises(
            ValueError,
            match=re.escape(
                "local_scratch_elements: shape must be (R, C), two non-negative integers, "
                "got shape=(4, 4, 4)"
            ),
        ):
            local_scratch_elements((4, 4, 4), 2)
        with pytest.raises(
            ValueError, match=re.escape("local_scratch_elements: tile must be a positive integer")
        ):
            local_scratch_elements((4, 4), 0)


class TestAgainstBlockCyclicReference:
    """On a 1 × 1 grid the whole block-cyclic conversion is the native kernel's local part."""

    @pytest.mark.parametrize(("shape", "tile"), [((96, 96), 32), ((64, 128), 16), ((70, 50), 8)])
    def test_native_kernel_equals_reference_conversion_on_one_process(self, submesh, shape, tile):
        mesh = submesh(1, 1)
        plan = BlockCyclicPlan(m=shape[0], n=shape[1], tile=tile, grid_rows=1, grid_cols=1)
        a = random_matrix(np.random.default_rng(3), shape, np.float32)
        reference = to_block_cyclic(jax.device_put(a, NamedSharding(mesh, P("x", "y"))),
                                    plan, mesh, ("x", "y"))
        padded = np.zeros(plan.padded_shape, np.float32)
        padded[: shape[0], : shape[1]] = a
        native = local_row_to_column_major(jnp.asarray(padded), tile=tile)
        np.testing.assert_array_equal(np.asarray(native), np.asarray(reference[0, 0]))
