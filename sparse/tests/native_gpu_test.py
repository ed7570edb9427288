"""Tests of the native CSR product on a CUDA GPU, against SciPy and the plain-JAX reference.

The checks of native_test.py (from native_cases.py), with the data on the GPU, plus matrices
that exercise the CUDA kernel's schedule: many thread blocks, rows longer than one lane sums
or one tile holds, more columns than one block forms, and the benchmark's 128³ Poisson matrix.
Every test is marked ``gpu`` and skipped where JAX has no GPU.
"""

import jax
import native_cases as cases
import numpy as np
import pytest
import scipy.sparse

from jaxsolve.sparse import _classical, _graph_kernels, _native_library
from jaxsolve.sparse._ffi_primitives import csr_matvec, csr_product_values, interpolation_weights
from jaxsolve.sparse._pattern_kernels import spgemm_symbolic

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]

# (shape, density, empty rows): small ones as on the CPU; thousands of rows (many thread
# blocks); rows of ~2000 entries (32 lanes a row, several tiles a block); 1 x 1.
MATRICES = [
    ((40, 30), 0.2, (0, 7, 8, 39)),
    ((6, 5), 0.0, ()),
    ((1, 1), 1.0, ()),
    ((5000, 3000), 0.003, (0, 4999)),
    ((300, 4000), 0.5, (1, 150)),
]
MATRIX_IDS = ["40x30", "no-entries", "1x1", "5000x3000", "long-rows"]


def test_cuda_library_loaded():
    csr_matvec(np.ones(1, np.float32), np.zeros(1, np.int32), np.array([0, 1], np.int32),
               jax.device_put(np.ones(1, np.float32), GPU), n_rows=1)
    assert _native_library.LIBRARY.cuda_unavailable_reason is None


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
@pytest.mark.parametrize("columns", [(), (1,), (3,), (11,)], ids=["vector", "k=1", "k=3", "k=11"])
@pytest.mark.parametrize(("shape", "density", "empty_rows"), MATRICES, ids=MATRIX_IDS)
def test_csr_matvec_against_scipy(dtype, columns, shape, density, empty_rows):
    cases.use_dtype(dtype)
    matrix = cases.random_csr(shape, dtype, density, empty_rows=empty_rows)
    x = cases.random_array((shape[1], *columns), dtype)
    cases.check_against_scipy(csr_matvec, GPU, matrix, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_csr_matvec_poisson_3d_128(dtype):
    """The benchmark's matrix: 2.1 million rows of at most 7 entries."""
    cases.use_dtype(dtype)
    matrix = cases.poisson(128, 3, dtype)
    cases.check_against_scipy(csr_matvec, GPU, matrix, cases.random_array(matrix.shape[1], dtype))


def test_csr_matvec_one_long_row_among_short_ones(x64):
    """A dense row in a sparse matrix: one lane sums it across many tiles."""
    matrix = cases.random_csr((2000, 3000), np.float64, 0.002).tolil()
    matrix.rows[1000], matrix.data[1000] = list(range(3000)), list(np.ones(3000))
    matrix = matrix.tocsr()
    matrix.indices, matrix.indptr = matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32)
    cases.check_against_scipy(csr_matvec, GPU, matrix, cases.random_array(3000, np.float64))


# Thousands of rows for the transformations: many thread blocks.
@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
def test_csr_matvec_jit(dtype):
    cases.use_dtype(dtype)
    matrix = cases.random_csr((3000, 2000), dtype, 0.005)
    cases.check_jit(csr_matvec, GPU, matrix, cases.random_array((2000, 2), dtype))


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
@pytest.mark.parametrize(("batch", "columns"), [(5, ()), (20, (3,))], ids=["5", "20xk=3"])
def test_csr_matvec_vmap_over_x(dtype, batch, columns):
    cases.use_dtype(dtype)
    matrix = cases.random_csr((3000, 2000), dtype, 0.005, empty_rows=(2,))
    xs = cases.random_array((batch, 2000, *columns), dtype)
    cases.check_vmap_over_x(csr_matvec, GPU, matrix, xs)


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
def test_csr_matvec_vmap_over_values(dtype):
    cases.use_dtype(dtype)
    matrix = cases.random_csr((3000, 2000), dtype, 0.005)
    x = cases.random_array((2000, 2), dtype)
    cases.check_vmap_over_values(csr_matvec, GPU, matrix, [1.0, -2.0, 0.5], x)


def test_csr_matvec_nested_vmap(x64):
    matrix = cases.random_csr((3000, 2000), np.float64, 0.005)
    xs = cases.random_array((4, 2000, 2), np.float64)
    cases.check_nested_vmap(csr_matvec, GPU, matrix, [1.0, 3.0, -1.0], xs)


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
@pytest.mark.parametrize("columns", [(), (2,)], ids=["vector", "k=2"])
def test_csr_matvec_grad(dtype, columns):
    cases.use_dtype(dtype)
    matrix = cases.random_csr((40, 30), dtype, 0.2, empty_rows=(5,))
    cases.check_derivatives(csr_matvec, GPU, matrix, cases.random_array((30, *columns), dtype))


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
@pytest.mark.parametrize("columns", [(), (3,)], ids=["vector", "k=3"])
@pytest.mark.parametrize(("shape", "density", "empty_rows"), [MATRICES[0], *MATRICES[3:]],
                         ids=[MATRIX_IDS[0], *MATRIX_IDS[3:]])
def test_csr_update_against_scipy_and_its_unfused_form(dtype, columns, shape, density,
                                                       empty_rows):
    cases.use_dtype(dtype)
    matrix = cases.random_csr(shape, dtype, density, empty_rows=empty_rows)
    cases.check_update(GPU, matrix, cases.random_array((shape[1], *columns), dtype),
                       derivatives=shape == MATRICES[0][0])


# The sparse product's values (csr_product_values): a group of threads per row of C, as
# many as B's mean row length up to a warp (1 thread at 1 entry a row, 32 past 16).


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
@pytest.mark.parametrize(("a_shape", "b_shape", "density"),
                         [((40, 30), (30, 25), 0.2), ((5000, 300), (300, 400), 0.01),
                          ((300, 50), (50, 200), 0.5), ((64, 2000), (2000, 3000), 0.0004)],
                         ids=["small", "many-blocks", "long-rows-of-B", "short-rows-of-B"])
def test_csr_product_values_against_scipy(dtype, a_shape, b_shape, density):
    a = cases.random_csr(a_shape, dtype, density, empty_rows=(0, a_shape[0] - 1))
    b = cases.random_csr(b_shape, dtype, density, seed=3, empty_rows=(4,))
    cases.check_csr_product(csr_product_values, spgemm_symbolic, GPU, a, b)


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
def test_csr_product_values_under_vmap_is_one_call(dtype):
    cases.check_csr_product_vmap(csr_product_values, spgemm_symbolic, GPU,
                                 cases.random_csr((40, 30), dtype, 0.2, empty_rows=(3,)),
                                 cases.random_csr((30, 200), dtype, 0.3, seed=3))


def test_csr_product_values_galerkin_product_poisson_3d(x64):
    """A P and Pᵀ (A P) for pairwise aggregates of a 32³ Poisson matrix: long rows of R."""
    a = cases.poisson(32, 3)
    aggregate, _ = _graph_kernels.aggregate_pairs(a.indptr, a.indices, -a.data)
    aggregate = aggregate // 4  # aggregates of about 8
    p = scipy.sparse.csr_matrix((np.ones(a.shape[0]), (np.arange(a.shape[0]), aggregate)))
    p.indices, p.indptr = p.indices.astype(np.int32), p.indptr.astype(np.int32)
    a_p = (a @ p).tocsr()
    cases.check_csr_product(csr_product_values, spgemm_symbolic, GPU, a, p)
    cases.check_csr_product(csr_product_values, spgemm_symbolic, GPU, p.T.tocsr(), a_p)


def test_csr_product_values_marks_a_row_outside_the_pattern_nan(x64):
    a = cases.random_csr((30, 20), np.float64, 0.2)
    b = cases.random_csr((20, 25), np.float64, 0.2, seed=3)
    indptr, indices, row = cases.product_missing_a_column(spgemm_symbolic, a, b)
    values = np.asarray(csr_product_values(*cases.product_operands(GPU, a, b, indptr, indices),
                                           n_cols=25))
    in_row = np.zeros(values.size, bool)
    in_row[indptr[row]:indptr[row + 1]] = True
    assert np.isnan(values[in_row]).all() and not np.isnan(values[~in_row]).any()


@pytest.mark.parametrize("truncated", [False, True], ids=["full", "truncated"])
@pytest.mark.parametrize("interpolator", ["D1", "D2"])
@pytest.mark.parametrize("dtype", cases.DTYPES, ids=cases.DTYPE_IDS)
def test_interpolation_weights_are_the_hosts(dtype, interpolator, truncated):
    cases.check_interpolation_weights(interpolation_weights, GPU, dtype, interpolator,
                                      truncated)


@pytest.mark.parametrize("truncated", [False, True], ids=["full", "truncated"])
def test_interpolation_weights_of_two_byte_offsets_are_the_hosts(truncated, x64):
    matrix = cases.long_row_matrix()
    pattern, structure = cases.interpolation_level(matrix, "D2", truncated)
    assert structure.plan.triple_targets.dtype == np.uint16
    operands, sizes = cases.interpolation_operands(GPU, matrix, pattern, structure)
    np.testing.assert_allclose(np.asarray(interpolation_weights(*operands, **sizes)),
                               _classical.host_values(structure, pattern, matrix.data),
                               **cases.tolerance(np.float64))


def test_interpolation_weights_mark_a_row_the_plan_sends_outside_nan(x64):
    matrix = cases.interpolation_matrix(8, np.float64)
    pattern, structure = cases.interpolation_level(matrix, "D2", truncated=False)
    plan, row = cases.plan_sending_outside_a_row(structure)
    operands, sizes = cases.interpolation_operands(GPU, matrix, pattern, structure, plan)
    weights = np.asarray(interpolation_weights(*operands, **sizes))
    in_row = np.zeros(weights.size, bool)
    in_row[structure.full.indptr[row]:structure.full.indptr[row + 1]] = True
    assert np.isnan(weights[in_row]).all() and not np.isnan(weights[~in_row]).any()
