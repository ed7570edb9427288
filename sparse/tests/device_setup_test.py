"""Tests for the AMG setup on the device (_device_setup.py, ``jaxsolve_setup_location``):
the host's hierarchies on grids, PCG solves, errors, jit and grad, programs reused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

from jaxsolve import sparse
from jaxsolve.sparse import _cache, _device_setup, _hierarchy, matrices, parse_amgx_config
from jaxsolve.sparse._csr_arrays import CsrStructure


def config(location: str, selector: str = "SIZE_4", **amg) -> dict:
    return {"solver": "PCG", "tolerance": 1e-6, "max_iters": 200,
            "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": selector,
                               "jaxsolve_setup_location": location, **amg}}


PROBLEMS = {  # (matrix, selector): grids numbered line by line, of even sides to the coarsest
    "poisson 2D": (lambda: matrices.poisson_matrix(24), "SIZE_4"),
    "poisson 3D": (lambda: matrices.poisson3d_matrix(8), "SIZE_8"),
    "anisotropic": (lambda: matrices.anisotropic_diffusion_matrix(24, 0.01, 0.0), "SIZE_4"),
}


def amg_config(location: str, selector: str, **amg):
    return parse_amgx_config(config(location, selector, **amg)).preconditioner.amg


def structures(A, selector: str, **amg):
    """The host's and the device's structures of ``A`` built from its values."""
    csr = sparse.as_csr(A)
    pattern = CsrStructure(np.asarray(csr.indptr), np.asarray(csr.indices), csr.shape[1])
    values = np.asarray(csr.values)
    padded = np.zeros(_device_setup.finest_sizes(pattern.n_rows, pattern.nnz)[1], values.dtype)
    padded[:values.shape[0]] = values
    host = _hierarchy.build_structure(pattern, values, 1, amg_config("HOST", selector, **amg))
    device = _device_setup.build_device_structure(pattern, jnp.asarray(padded),
                                                  amg_config("DEVICE", selector, **amg))
    return host, device, padded


@pytest.mark.parametrize("problem", PROBLEMS)
def test_the_aggregates_of_the_host_on_grids(problem):
    make, selector = PROBLEMS[problem]
    host, device, _ = structures(make(), selector, min_coarse_rows=16)
    assert len(host.levels) >= 2
    assert device.sizes == tuple((level.a.n_rows, level.a.nnz) for level in host.levels) + (
        (host.coarsest.n_rows, host.coarsest.nnz),)
    for level, arrays in zip(host.levels, device.arrays.levels, strict=True):
        np.testing.assert_array_equal(np.asarray(arrays.aggregates)[:level.a.n_rows],
                                      level.aggregates)


def test_an_unstructured_matching_pairs_strong_neighbours():
    # A random symmetric pattern, numbered at random: aggregates other than the host's,
    # each connected, of 1 to a few nodes, and about as many as the host's.
    rng = np.random.default_rng(0)
    n = 300
    offdiagonal = scipy.sparse.random(n, n, density=0.02, random_state=1)
    graph = (offdiagonal + offdiagonal.T).tocsr()
    A = scipy.sparse.csr_array(scipy.sparse.diags(np.asarray(abs(graph).sum(axis=1)).ravel() + 1)
                               - graph)
    permutation = rng.permutation(n)
    A = A[permutation][:, permutation].astype(np.float32)
    host, device, _ = structures(A, "SIZE_2", min_coarse_rows=8, max_levels=2)
    aggregates = np.asarray(device.arrays.levels[0].aggregates)[:n]
    count = device.sizes[1][0]
    assert np.array_equal(np.unique(aggregates), np.arange(count))
    assert 0.8 * host.levels[0].n_aggregates <= count <= 1.25 * host.levels[0].n_aggregates
    A = scipy.sparse.csr_array(A)
    for aggregate in range(count):
        members = np.flatnonzero(aggregates == aggregate)
        block = A[members][:, members]
        connected = scipy.sparse.csgraph.connected_components(block, directed=False)[0]
        assert connected == 1, members


def test_the_numbers_are_the_galerkin_product():
    host, device, padded = structures(matrices.poisson_matrix(24), "SIZE_4", min_coarse_rows=16)
    numbers = jax.jit(_device_setup.numeric_setup, static_argnums=0)(
        device.shape, device.arrays, jnp.asarray(padded))

    def dense(c, rows, cols):
        indptr = np.asarray(c.indptr)
        return scipy.sparse.csr_array(
            (np.asarray(c.values)[:indptr[-1]], np.asarray(c.indices)[:indptr[-1]], indptr),
            shape=(rows, cols)).toarray()

    for i, level in enumerate(numbers.levels):
        sizes = device.shape.levels[i]
        a = dense(level.a, sizes.rows, sizes.rows)
        p = dense(level.p, sizes.rows, sizes.coarse_rows)
        coarse = numbers.levels[i + 1].a if i + 1 < len(numbers.levels) else numbers.coarsest.a
        np.testing.assert_array_equal(dense(level.r, sizes.coarse_rows, sizes.rows), p.T)
        np.testing.assert_allclose(dense(coarse, sizes.coarse_rows, sizes.coarse_rows),
                                   p.T @ a @ p, atol=1e-5)
        count = device.sizes[i + 1][0]  # orthonormal columns, the constant on each aggregate
        np.testing.assert_allclose((p.T @ p)[:count, :count], np.eye(count), atol=1e-6)
        np.testing.assert_allclose(p @ (p.T @ np.ones(sizes.rows)) * (np.arange(sizes.rows)
                                   < device.sizes[i][0]), (np.arange(sizes.rows)
                                                           < device.sizes[i][0]), atol=1e-6)


@pytest.mark.parametrize("problem", [*PROBLEMS, "poisson 3D, odd sides", "rotated anisotropic"])
def test_pcg_converges_as_with_the_host_setup(problem):
    make, selector = {  # and where the aggregates differ from the host's
        **PROBLEMS, "poisson 3D, odd sides": (lambda: matrices.poisson3d_matrix(11), "SIZE_8"),
        "rotated anisotropic": (
            lambda: matrices.anisotropic_diffusion_matrix(25, 0.01, np.pi / 4), "SIZE_4"),
    }[problem]
    A = sparse.as_csr(make())
    b = matrices.rhs_random(A.shape[0], seed=2)
    iterations = {}
    for location in ("HOST", "DEVICE"):
        x, info = sparse.solve(A, b, config=config(location, selector))
        assert sparse.Status(int(info.status)).name == "SUCCESS"
        assert float(jnp.linalg.norm(A @ x - b) / jnp.linalg.norm(b)) < 1e-5
        iterations[location] = int(info.iterations)
    assert iterations["DEVICE"] <= 1.2 * iterations["HOST"], iterations


def test_jit_and_grad_through_the_device_setup():
    A = sparse.as_csr(matrices.poisson_matrix(20))
    b = matrices.rhs_random(A.shape[0], seed=3)

    def solve(values, location):
        return sparse.solve(A.with_values(values), b, config=config(location))

    sparse.clear_cache()  # traced values: a structure from the pattern alone
    x, info = jax.jit(lambda v: solve(v, "DEVICE"))(A.values)
    assert sparse.Status(int(info.status)).name == "SUCCESS"
    np.testing.assert_allclose(x, sparse.solve(A, b, config=config("HOST"))[0], rtol=1e-4,
                               atol=1e-5)

    def loss(values, location):
        return jnp.sum(solve(values, location)[0] ** 2)

    gradient = jax.grad(loss)(A.values, "DEVICE")
    np.testing.assert_allclose(gradient, jax.grad(loss)(A.values, "HOST"), rtol=1e-3,
                               atol=1e-3 * float(jnp.max(jnp.abs(gradient))))


def test_concrete_values_set_up_anew_unless_reuse_setup():
    A = sparse.as_csr(matrices.poisson_matrix(20))
    b = jnp.ones(A.shape[0])

    def kept():
        (entry,) = [entry for _, entry in _cache._CACHE.items()
                    if isinstance(entry.structure, _device_setup.DeviceStructure)]
        return entry.structure, entry.numbers

    sparse.clear_cache()
    sparse.solve(A, b, config=config("DEVICE"))
    first = kept()
    sparse.solve(A, b, config=config("DEVICE"), reuse_setup=True)
    assert kept()[0] is first[0] and kept()[1] is first[1]
    _, info = sparse.solve(A.with_values(2 * A.values), b, config=config("DEVICE"))
    assert kept()[0] is not first[0]  # AmgX's full setup, on the device
    assert kept()[0].finest.indices is first[0].finest.indices  # the pattern not sent again
    assert sparse.Status(int(info.status)).name == "SUCCESS"


def test_a_similar_pattern_compiles_no_setup_program():
    grid = matrices.poisson_matrix(24)
    A = sparse.as_csr(grid)
    b = jnp.ones(A.shape[0])
    sparse.solve(A, b, config=config("DEVICE"))
    before = len(_device_setup.PROGRAMS), len(_device_setup.NUMERIC_SETUPS)
    coupled = scipy.sparse.csr_array((np.asarray(A.values), A.indices, A.indptr), shape=A.shape)
    extra = scipy.sparse.csr_array(([-0.5, -0.5, 0.5, 0.5], ([3, 100, 3, 100], [100, 3, 3, 100])),
                                   shape=A.shape)
    _, info = sparse.solve(sparse.as_csr((coupled + extra).astype(np.float32)), b,
                           config=config("DEVICE"))
    assert sparse.Status(int(info.status)).name == "SUCCESS"
    assert (len(_device_setup.PROGRAMS), len(_device_setup.NUMERIC_SETUPS)) == before


def test_similar_levels_take_the_padded_sizes_of_earlier_ones():
    sizes = _device_setup._padded_sizes
    key = ("test", 1)  # 3D Poisson 16³'s level 1, then with 8 couplings more
    first = sizes(key, 512, 3200, tiny_rows=100, coarsest=False)
    assert 512 <= first[0] < 1.5 * 512 and 3200 <= first[1] < 1.5 * 3200
    assert sizes(key, 515, 3307, tiny_rows=100, coarsest=False) == first
    assert sizes(key, 2000, 3307, tiny_rows=100, coarsest=False) != first  # too small for it
    # 32³'s level 3, then with 16 couplings more: a tiny level gets room for both
    tiny = sizes(("test", 3), 64, 352, tiny_rows=80, coarsest=False)
    assert sizes(("test", 3), 87, 783, tiny_rows=80, coarsest=False) == tiny  # not tiny
    # the coarsest, whose dense inverse costs its rows squared: little room for them
    coarsest = sizes(("test", 2), 4000, 30000, tiny_rows=4096, coarsest=True)
    assert 4000 < coarsest[0] < 1.1 * 4000 and coarsest[1] >= 3 * 30000


def test_bad_input_raises_as_with_the_host_setup():
    A = scipy.sparse.csr_array(scipy.sparse.csr_array(matrices.poisson_matrix(20).todense()))
    b = jnp.ones(A.shape[0])
    missing = A.tolil()
    missing[5, 5] = 0
    missing = scipy.sparse.csr_array(missing)
    missing.eliminate_zeros()
    nan = sparse.as_csr(A)
    nan = nan.with_values(nan.values.at[7].set(jnp.nan))
    for matrix, match, check in ((missing, r"1 zero \(or unstored\) diagonal", True),
                                 (missing, "no stored diagonal entry in 1 rows", False),
                                 (nan, "A holds NaN or Inf", True)):
        for location in ("HOST", "DEVICE"):
            with pytest.raises(ValueError, match=match):
                sparse.solve(matrix, b, config=config(location), check=check)
    with pytest.raises(ValueError, match="near_nullspace"):
        sparse.solve(A, b, config=config("DEVICE"), near_nullspace=jnp.ones(A.shape[0]))
    with pytest.raises(ValueError, match=r"not a block system \(block_dim 2\)"):
        sparse.solve(A, b, config=config("DEVICE"), block_dim=2)


@pytest.mark.parametrize("amg, match", [
    ({"algorithm": "CLASSICAL", "selector": "PMIS"}, "not algorithm 'CLASSICAL'"),
    ({"jaxsolve_smoothed_aggregation": 1}, "not smoothed aggregation"),
    ({"smoother": "MULTICOLOR_GS"}, "not smoother 'MULTICOLOR_GS'"),
    ({"jaxsolve_setup_location": "GPU"}, "setup_location 'GPU' is not an AmgX"),
])
def test_configurations_the_device_setup_refuses(amg, match):
    with pytest.raises(ValueError, match=match):
        parse_amgx_config({"solver": "PCG", "preconditioner": {
            "solver": "AMG", "algorithm": "AGGREGATION", "jaxsolve_setup_location": "DEVICE",
            **amg}})


def test_the_key_round_trips():
    amg = amg_config("DEVICE", "SIZE_4")
    assert amg.setup_location == "DEVICE"
    assert amg._amgx_keys("main")["jaxsolve_setup_location"] == "DEVICE"
    assert "jaxsolve_setup_location" not in amg_config("HOST", "SIZE_4")._amgx_keys("main")


def test_describe_and_grid_stats(caplog):
    A = matrices.poisson_matrix(24)
    stats = sparse.describe(A, config("DEVICE"))
    host = sparse.describe(A, config("HOST"))
    assert stats.rows == host.rows and stats.nonzeros == host.nonzeros
    assert "device" in stats.setup_seconds and "numeric setup" in stats.setup_seconds
    with caplog.at_level("INFO", logger="jaxsolve.sparse"):
        sparse.solve(A, jnp.ones(576), config=config("DEVICE"), print_grid_stats=1)
    assert f"grid complexity {stats.grid_complexity:.3f}" in caplog.text
