"""The programs a first solve compiles stay small (issue 29: a first call at 100 k rows
within 5 s on two CPU cores): each cumulative sum, random-bit generator or scatter a level
adds is a few kernels XLA compiles for that level's shapes. Counted on the jaxprs, never
timed."""

import dataclasses

import jax
import jax.extend.backend
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sparse
from jaxsolve.sparse import _hierarchy, _krylov, _relaxation, matrices
from jaxsolve.sparse._config import RelaxationConfig
from jaxsolve.sparse._index_hash import index_hash
from jaxsolve.sparse._csr_arrays import CsrArrays, CsrStructure


def primitives(fun, *args) -> list[str]:
    """The names of the primitives of ``fun``'s jaxpr, sub-jaxprs included."""
    names = []

    def visit(jaxpr):
        for equation in jaxpr.eqns:
            names.append(equation.primitive.name)
            for sub in jax.extend.core.jaxprs_in_params(equation.params):
                visit(sub)

    visit(jax.make_jaxpr(fun)(*args).jaxpr)
    return names


def csr(dense: np.ndarray, padding: int = 0) -> CsrArrays:
    """``dense`` as device CSR arrays, with ``padding`` entries past the last row's end."""
    rows, columns = np.nonzero(dense)
    indptr = np.searchsorted(rows, np.arange(dense.shape[0] + 1)).astype(np.int32)
    return CsrArrays(jnp.asarray(np.concatenate([dense[rows, columns], np.zeros(padding)])),
                     jnp.asarray(np.concatenate([columns, np.zeros(padding, int)]), jnp.int32),
                     jnp.asarray(indptr))


@pytest.fixture
def matrix() -> np.ndarray:
    """A random 12 × 12 matrix whose rows 0, 5, 6 and 11 are empty, with a stored diagonal
    elsewhere."""
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((12, 12)) < 0.3, rng.standard_normal((12, 12)), 0)
    dense[np.arange(12), np.arange(12)] = 4.0
    dense[[0, 5, 6, 11]] = 0
    return dense


@pytest.mark.parametrize("padding", [0, 5])
def test_row_ids_take_one_cumulative_sum(x64, matrix, padding):
    a = csr(matrix, padding)
    expected = np.repeat(np.arange(12), np.diff(np.asarray(a.indptr)))
    expected = np.concatenate([expected, np.full(padding, 11)])  # padding: the last row
    np.testing.assert_array_equal(np.asarray(a.row_ids), expected)
    assert primitives(lambda a: a.row_ids, a).count("cumsum") == 1  # jnp.repeat took 2


def test_l1_jacobi_scale_is_one_product_without_row_expansion(x64, matrix):
    a = csr(matrix)
    config = RelaxationConfig(solver="JACOBI_L1", relaxation_factor=0.8,
                              chebyshev_polynomial_order=None)
    data = _relaxation.relaxation_data(a, jnp.asarray(np.diag(matrix)), config)
    l1 = np.abs(matrix).sum(axis=1)
    expected = np.where(l1 > 0, 0.8 / np.where(l1 > 0, l1, 1), 0)
    np.testing.assert_allclose(np.asarray(data.scale), expected, rtol=1e-15)
    names = primitives(
        lambda values: _relaxation.relaxation_data(a._replace(values=values), a.values[:12],
                                                   config).scale, a.values)
    assert "cumsum" not in names and "scatter-add" not in names


@pytest.mark.parametrize("method", ["cg", "bicgstab"])
def test_a_method_holds_one_copy_of_the_preconditioner(x64, method):
    """A method preconditions at one place of its loop: a first ``M⁻¹ r_0`` before CG's
    loop, or BiCGSTAB's two applications per iteration written out in its loop's step,
    doubled the preconditioner (an AMG cycle, most of a solve's program) in the compiled
    code."""
    def precondition(r):
        return jnp.sin(r)  # a marker: a preconditioner of the program's own primitive

    b = jnp.ones(8)
    names = primitives(lambda b: getattr(sparse, method)(
        lambda v: 4 * v + jnp.roll(v, 1), b, precondition=precondition)[0], b)
    assert names.count("sin") == 1


def test_the_accuracy_test_draws_no_random_bits(x64):
    """The true-residual test's sign vector (its ``‖A‖`` estimate) is a hash of the index,
    not ``jax.random``'s generator, which compiled threefry into every solve program; it
    estimates ``‖A‖`` as random signs do: the root-mean-square row norm."""
    A = sparse.as_csr(matrices.poisson_matrix(30))
    names = primitives(lambda b: sparse.cg(A.matvec, b)[0], jnp.ones(A.shape[0]))
    assert "random_bits" not in names and "threefry2x32" not in names
    signs = np.asarray(_krylov._sign_probe((A.shape[0],), np.float64))
    assert set(signs) == {-1.0, 1.0} and abs(signs.mean()) < 3 / np.sqrt(signs.size)
    dense = np.asarray(A.todense())
    estimate = np.linalg.norm(dense @ signs) / np.linalg.norm(signs)
    rms_row_norm = np.sqrt((dense ** 2).sum() / A.shape[0])
    assert abs(estimate / rms_row_norm - 1) < 0.05


def test_the_singularity_test_sums_rows_by_products(x64, matrix):
    singular = matrix - np.diag(matrix.sum(axis=1))  # every row sums to zero
    assert bool(_hierarchy.annihilates_constants(csr(singular)))
    assert not bool(_hierarchy.annihilates_constants(csr(matrix)))
    names = primitives(_hierarchy.annihilates_constants, csr(matrix))
    assert "cumsum" not in names and "scatter-add" not in names


def _amg(keys, **changes):
    """jaxsolve's AMG of AmgX ``keys``, with ``changes``."""
    amg = sparse.parse_amgx_config({"preconditioner": keys}).preconditioner.amg
    return dataclasses.replace(amg, **changes)


@pytest.mark.parametrize("keys", [{}, {"algorithm": "AGGREGATION"},
                                  {"algorithm": "AGGREGATION", "jaxsolve_smoothed_aggregation": 1}])
def test_a_numeric_setup_draws_no_random_bits(x64, keys):
    """Every level's damping estimate (power iteration) starts from the first entries of
    one fixed vector, a hash of the index: a generator per level was ~0.1 s of compile time
    each, and one for every level still compiled threefry into every numeric setup."""
    A = sparse.as_csr(matrices.poisson_matrix(24))
    pattern = CsrStructure(np.asarray(A.indptr, np.int32), np.asarray(A.indices, np.int32),
                           A.shape[1])
    values = jnp.asarray(A.values)
    structure = _hierarchy.build_structure(pattern, np.asarray(values), 1,
                                           _amg(keys, min_coarse_rows=10))
    assert len(structure.levels) >= 2
    if structure.padded_setup is None:
        def setup(values):
            return _hierarchy.numeric_setup(structure, structure.arrays, values, None)
    else:
        def setup(values):
            return _hierarchy.padded_numeric_setup(structure.padded_setup, structure.arrays,
                                                   values)
    names = primitives(setup, values)
    assert "random_bits" not in names and "threefry2x32" not in names
    start = np.asarray(_relaxation.power_iteration_start(4096, np.float64))
    assert start.min() > 0 and start.max() <= 1  # a level of one row: not a zero start
    assert abs(start.mean() - 0.5) < 3 / np.sqrt(12 * start.size)  # as uniform draws
    assert len(np.unique(np.asarray(index_hash(4096)))) == 4096  # a bijection of uint32


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_a_shared_random_start_estimates_what_a_start_of_its_own_does(x64, matrix, dtype):
    a = csr(matrix)
    a = a._replace(values=a.values.astype(dtype))
    scale = 1 / jnp.where(jnp.diag(jnp.asarray(matrix)) != 0, jnp.diag(jnp.asarray(matrix)), 1)

    def apply(v):
        return a.scaled_matvec(v, scale.astype(dtype))

    own = _relaxation.spectral_radius(12, dtype, apply, jnp.int32(10))
    shared = _relaxation.spectral_radius(12, dtype, apply, jnp.int32(10),
                                         _relaxation.power_iteration_start(1000, dtype))
    assert np.asarray(own) == np.asarray(shared)  # bit for bit


def test_products_of_one_shape_are_traced_once(x64, matrix):
    """The native product's wrappers (derivative, batching rule, FFI call) are traced once
    per shape, not at each of a cycle's many products; the program computes the same."""
    a = csr(matrix)

    def products(x):
        for _ in range(4):
            x = a.relaxation_sweep(x, x, a.values[:12])
        return a.matvec(x) + a.matvec(2 * x)

    calls = [equation for equation in jax.make_jaxpr(products)(jnp.ones(12)).jaxpr.eqns
             if equation.params.get("name") == "_staged_update"]
    assert len(calls) == 6
    assert len({id(call.params["jaxpr"]) for call in calls}) == 2  # a sweep, a product
    x = np.ones(12)
    for _ in range(4):
        x = x + np.asarray(a.values[:12]) * (x - matrix @ x)
    np.testing.assert_allclose(np.asarray(jax.jit(products)(jnp.ones(12))), 3 * matrix @ x,
                               rtol=1e-13)


def test_the_coarsest_dense_matrix_takes_its_rows_from_the_structure(x64):
    """The coarsest level's dense matrix places its entries by row ids found on the host
    with the structure, not expanded from its row pointers by a cumulative sum."""
    A = sparse.as_csr(matrices.poisson_matrix(12))
    pattern = CsrStructure(np.asarray(A.indptr, np.int32), np.asarray(A.indices, np.int32),
                           A.shape[1])
    values = jnp.asarray(A.values)
    structure = _hierarchy.build_structure(pattern, np.asarray(values), 1, _amg(
        {"algorithm": "AGGREGATION"}, min_coarse_rows=10))
    assert structure.levels

    def padded_setup(values):
        return _hierarchy.padded_numeric_setup(structure.padded_setup, structure.arrays,
                                               values)

    assert "cumsum" not in primitives(padded_setup, values)
    numbers = jax.jit(_hierarchy.numeric_setup, static_argnums=0)(
        structure, structure.arrays, values, None)
    coarse = numbers.coarsest.a
    dense = np.zeros((coarse.n_rows,) * 2)
    np.add.at(dense, (structure.coarsest.row_ids, np.asarray(coarse.indices)),
              np.asarray(coarse.values))
    np.testing.assert_allclose(np.asarray(numbers.coarsest.inverse) @ dense,
                               np.eye(coarse.n_rows), atol=1e-5)  # float32


@pytest.mark.parametrize("solver", ["BLOCK_JACOBI", "JACOBI_L1"])
def test_block_jacobi_gathers_its_blocks_by_the_structures_positions(x64, solver):
    """A block system's block-Jacobi inverts blocks gathered by positions the structure
    found on the host: no row expansion (a cumulative sum) and no scatter-add per level
    (ℓ1: the sums outside the blocks by a product); the same inverses as blocks found
    from the index arrays, bit for bit."""
    rng = np.random.default_rng(1)
    dense = np.where(rng.random((12, 12)) < 0.4, rng.standard_normal((12, 12)), 0)
    dense += np.diag(np.full(12, 6.0))
    dense[4, 5] = dense[7, 6] = 0  # blocks (of 2) with an entry not stored
    dense[8:10] = 0  # a decoupled node
    a = csr(dense)
    pattern = CsrStructure(np.asarray(a.indptr), np.asarray(a.indices), 12)
    positions = jnp.asarray(_hierarchy._block_positions(pattern, 2, 12))
    config = RelaxationConfig(solver=solver, relaxation_factor=0.8,
                              chebyshev_polynomial_order=None)

    def scale(values, positions=None):
        return _relaxation.relaxation_data(
            a._replace(values=values), jnp.diagonal(jnp.asarray(dense)), config, block_dim=2,
            block_positions=positions).scale

    names = primitives(lambda values: scale(values, positions), a.values)
    assert "cumsum" not in names and "scatter-add" not in names
    np.testing.assert_array_equal(np.asarray(scale(a.values, positions)),
                                  np.asarray(scale(a.values)))
    blocks = dense.reshape(6, 2, 6, 2)[np.arange(6), :, np.arange(6), :]
    if solver == "JACOBI_L1":  # each row's Σ |a_ij| outside its block, on the diagonal
        outside = np.abs(dense).sum(1) - np.abs(blocks).sum(2).ravel()
        blocks = blocks + outside.reshape(6, 2)[:, :, None] * np.eye(2)
    expected = [0.8 * np.linalg.inv(block) if block.any() else np.zeros((2, 2))
                for block in blocks]
    np.testing.assert_allclose(np.asarray(scale(a.values, positions)), expected, rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_block_jacobi_applies_its_blocks_in_the_sweeps_fusion(x64, dtype, k):
    """A block Jacobi sweep applies its ``k × k`` inverses elementwise, not by a batched
    product: a dot kernel of its own at every sweep of every level of a cycle (2D
    elasticity at 100 352 rows: 26 of its solve's kernels). Bit for bit a product's
    numbers for real blocks of 2 and 3 on the CPU, within rounding otherwise."""
    rng = np.random.default_rng(k)
    blocks = rng.standard_normal((7, k, k)) + (1j * rng.standard_normal((7, k, k))
                                               if dtype == np.complex128 else 0)
    residual = rng.standard_normal(7 * k).astype(dtype)
    data = _relaxation.RelaxationData(jnp.asarray(blocks.astype(dtype)), jnp.zeros(2, dtype))

    def step(residual):
        return _relaxation._jacobi_step(data, residual)

    assert "dot_general" not in primitives(step, jnp.asarray(residual))
    expected = np.einsum("nij,nj->ni", blocks, residual.reshape(7, k)).ravel()
    np.testing.assert_allclose(np.asarray(jax.jit(step)(residual)), expected, rtol=1e-14)


@pytest.mark.parametrize("keys", [{}, {"algorithm": "AGGREGATION"}])
def test_values_on_the_host_choose_the_coarsest_inverse_before_the_setup(x64, keys):
    """Whether the finest matrix annihilates the constants is found on the host for values
    there (as the device finds it), so the numeric setup compiles the one coarsest inverse
    it needs: LU for a regular system, the SVD's pseudo-inverse for a singular one, no
    ``cond`` compiling both."""
    config = _amg(keys, min_coarse_rows=10)
    path = np.eye(20, k=1) + np.eye(20, k=-1)
    neighbours = np.kron(path, np.eye(20)) + np.kron(np.eye(20), path)
    neumann = np.diag(neighbours.sum(axis=1)) - neighbours  # every row sums to zero
    for dense, singular in ((neumann + np.diag(np.linspace(0.1, 1, 400)), False),
                            (neumann, True)):
        a = csr(dense)
        pattern = CsrStructure(np.asarray(a.indptr), np.asarray(a.indices), 400)
        structure = _hierarchy.build_structure(pattern, np.asarray(a.values), 1, config)
        assert _hierarchy.annihilates_constants_on_host(structure, a.values) is singular
        assert bool(_hierarchy.annihilates_constants(a)) is singular
        padded = np.pad(np.asarray(a.values), (0, 7))  # values padded to a size class
        assert _hierarchy.annihilates_constants_on_host(structure, padded) is singular
        if structure.padded_setup is None:
            def setup(values, singular):
                return _hierarchy.numeric_setup(structure, structure.arrays, values, None,
                                                singular)
        else:
            def setup(values, singular):
                return _hierarchy.padded_numeric_setup(structure.padded_setup,
                                                       structure.arrays, values, None,
                                                       singular)
        names = primitives(lambda v: setup(v, singular), a.values)
        assert "cond" not in names and ("svd" in names) is singular and (
            "lu" in names) is not singular
        assert "cond" in primitives(lambda v: setup(v, None), a.values)  # traced values
    nullspace = dataclasses.replace(config, coarse_null_dimension=1)  # given: no test
    structure = _hierarchy.build_structure(pattern, np.asarray(a.values), 1, nullspace)
    assert _hierarchy.annihilates_constants_on_host(structure, a.values) is None


@pytest.mark.parametrize("keys", [{}, {"algorithm": "AGGREGATION",
                                       "jaxsolve_smoothed_aggregation": 1}])
def test_a_setup_traces_no_fallback_where_every_platform_has_the_native_kernels(
        x64, keys, monkeypatch):
    """Where every platform of the process runs the native kernels (here the CPU), the
    numeric setup's sparse products and interpolation weights call them directly: no
    ``platform_dependent`` whose XLA fallback is traced too (a tenth of a second a product
    at 100 000 rows). A process with another platform keeps the fallback for it."""
    A = sparse.as_csr(matrices.poisson_matrix(24))
    pattern = CsrStructure(np.asarray(A.indptr, np.int32), np.asarray(A.indices, np.int32),
                           A.shape[1])
    values = jnp.asarray(A.values)

    def setup_primitives():  # of a structure of its own: JAX keeps traces per plan
        structure = _hierarchy.build_structure(pattern, np.asarray(values), 1,
                                               _amg(keys, min_coarse_rows=10))
        assert len(structure.levels) >= 2
        return primitives(lambda values: _hierarchy.numeric_setup(
            structure, structure.arrays, values, None), values)

    assert "platform_index" not in setup_primitives()
    monkeypatch.setattr(jax.extend.backend, "backends", lambda: {"cpu": None, "tpu": None})
    assert "platform_index" in setup_primitives()
