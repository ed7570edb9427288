"""Tests of the native local layout conversion on a CUDA GPU, against the NumPy model.

The same checks as native_test.py (with the model and inputs of native_model.py), with the data on
the GPU, plus larger matrices that take many thread blocks, tile panels and cycle batches.
Every test is marked ``gpu`` and skipped where JAX has no GPU.
"""

import functools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from native_model import (
    CASE_IDS,
    CASES,
    DTYPES,
    numpy_row_to_column_major,
    permutations_for,
    random_matrix,
)

from jaxsolve.layout import _ffi
from jaxsolve.layout._native import (
    local_column_to_row_major,
    local_row_to_column_major,
    local_scratch_elements,
)


def _first_gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


GPU = _first_gpu()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]

# Many 32 x 32 blocks, panels and cycle batches; 1000 ends in a partial block.
LARGE_CASES = [((2048, 2048), 64), ((1000, 1000), 8), ((512, 1536), 128), ((1536, 256), 32)]
LARGE_IDS = [f"{r}x{c}/T{t}" for (r, c), t in LARGE_CASES]


def on_gpu(x: np.ndarray) -> jax.Array:
    return jax.device_put(x, GPU)


def test_cuda_library_loaded():
    assert _ffi.LIBRARY.cuda_unavailable_reason is None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "tile"), CASES + LARGE_CASES, ids=CASE_IDS + LARGE_IDS)
def test_local_row_to_column_major_against_numpy(x64, shape, tile, dtype):
    x = random_matrix(np.random.default_rng(0), shape, dtype)
    for perm in permutations_for(shape, tile, seed=1):
        y = local_row_to_column_major(on_gpu(x), tile=tile, tile_permutation=perm)
        assert y.devices() == {GPU} and y.dtype == dtype
        np.testing.assert_array_equal(np.asarray(y), numpy_row_to_column_major(x, tile, perm))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("shape", "tile"), CASES + LARGE_CASES, ids=CASE_IDS + LARGE_IDS)
def test_local_column_to_row_major_against_numpy(x64, shape, tile, dtype):
    x = random_matrix(np.random.default_rng(2), shape, dtype)
    for perm in permutations_for(shape, tile, seed=3):
        y = numpy_row_to_column_major(x, tile, perm)
        back = local_column_to_row_major(on_gpu(y), tile=tile, tile_permutation=perm)
        np.testing.assert_array_equal(np.asarray(back), x)


@settings(max_examples=40, deadline=None)
@given(
    grid=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    tile=st.integers(1, 40),
    data=st.data(),
)
def test_local_transpose_random_permutations(grid, tile, data):
    order = data.draw(st.permutations(range(grid[0] * grid[1])))
    perm = np.stack(np.unravel_index(np.asarray(order), grid), -1).reshape(*grid, 2)
    shape = (grid[0] * tile, grid[1] * tile)
    x = random_matrix(np.random.default_rng(len(order)), shape, np.float32)
    y = local_row_to_column_major(on_gpu(x), tile=tile, tile_permutation=perm)
    np.testing.assert_array_equal(np.asarray(y), numpy_row_to_column_major(x, tile, perm))
    back = local_column_to_row_major(y, tile=tile, tile_permutation=perm)
    np.testing.assert_array_equal(np.asarray(back), x)


@pytest.mark.filterwarnings("error")  # JAX warns when a donated buffer goes unused
@pytest.mark.parametrize(("shape", "tile"), CASES + LARGE_CASES, ids=CASE_IDS + LARGE_IDS)
def test_local_transpose_jit_donation(shape, tile):
    x_np = random_matrix(np.random.default_rng(4), shape, np.float32)
    for perm in permutations_for(shape, tile, seed=5):
        kwargs = dict(tile=tile, tile_permutation=perm)
        forward = jax.jit(functools.partial(local_row_to_column_major, **kwargs), donate_argnums=0)
        inverse = jax.jit(functools.partial(local_column_to_row_major, **kwargs), donate_argnums=0)
        x = on_gpu(x_np)
        y = forward(x)
        assert x.is_deleted()
        np.testing.assert_array_equal(np.asarray(y), numpy_row_to_column_major(x_np, tile, perm))
        back = inverse(y)
        assert y.is_deleted()
        np.testing.assert_array_equal(np.asarray(back), x_np)


@pytest.mark.parametrize(("shape", "tile"), LARGE_CASES, ids=LARGE_IDS)
def test_local_row_to_column_major_in_place(shape, tile):
    """XLA aliases the whole matrix and allocates no more than the declared scratch."""
    x = on_gpu(np.zeros(shape, np.float32))
    for perm in permutations_for(shape, tile, seed=6):
        f = functools.partial(local_row_to_column_major, tile=tile, tile_permutation=perm)
        stats = jax.jit(f, donate_argnums=0).lower(x).compile().memory_analysis()
        scratch_bytes = local_scratch_elements(shape, tile, perm) * x.dtype.itemsize
        assert stats.alias_size_in_bytes == x.nbytes
        assert stats.temp_size_in_bytes <= scratch_bytes + 64 * 1024


def test_local_row_to_column_major_vmap():
    xs = random_matrix(np.random.default_rng(7), (3 * 64, 96), np.float64)
    xs = xs.reshape(3, 64, 96).astype(np.float32)
    perm = permutations_for((64, 96), 16, seed=8)[1]
    ys = jax.vmap(functools.partial(local_row_to_column_major, tile=16, tile_permutation=perm))(
        on_gpu(xs)
    )
    for x, y in zip(xs, ys):
        np.testing.assert_array_equal(np.asarray(y), numpy_row_to_column_major(x, 16, perm))
