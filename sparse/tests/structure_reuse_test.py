"""Which AMG structure a solve on a known pattern gets.

Concrete values get the structure built for them (AmgX's full setup): another operator
on the same pattern — convection, then recirculating flow or a Laplacian on one grid —
converges as in a fresh process, and the same operator again (or one with the same strong
couplings) rebuilds and compiles nothing.  Traced values and ``reuse_setup=True`` keep the
pattern's latest structure.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from jaxsolve_testing import counted_compilations

from jaxsolve import sparse
from jaxsolve.sparse import _cache, _classical, _structure_key, matrices, parse_amgx_config
from jaxsolve.sparse._csr_arrays import CsrStructure

N = 24
BICGSTAB = {"tolerance": 1e-8}
PCG = {"solver": "PCG", "tolerance": 1e-8}


def upwind(epsilon, wind):
    """``−ε Δu + w·∇u`` on the unit square's ``N × N`` interior points, upwind, scaled by
    ``h²`` (as ``tools/bench/sparse_suite.py``'s), on the 5-point Laplacian's pattern."""
    laplacian = sparse.as_csr(matrices.poisson_matrix(N, dtype=np.float64))
    rows, columns = np.asarray(laplacian.row_ids), np.asarray(laplacian.indices)
    h = 1 / (N + 1)
    wx, wy = (np.broadcast_to(w, rows.shape) * h
              for w in wind((rows // N + 1) * h, (rows % N + 1) * h))
    offset = columns - rows  # ±N along x, ±1 along y
    w = np.where(np.abs(offset) == N, wx, wy)
    behind = np.where(offset < 0, np.maximum(w, 0), np.maximum(-w, 0))  # carries −w
    diagonal = 4 * epsilon + np.abs(wx) + np.abs(wy)
    return laplacian.with_values(jnp.asarray(np.where(offset == 0, diagonal, -epsilon - behind)))


def convection():
    return upwind(1e-3, lambda x, y: (np.cos(np.pi / 6), np.sin(np.pi / 6)))


def recirculating():
    return upwind(1e-2, lambda x, y: (2 * y * (1 - x * x), -2 * x * (1 - y * y)))


def laplacian():
    return sparse.as_csr(matrices.poisson_matrix(N, dtype=np.float64))


def iterations(A, config, **kwargs):
    x, info = sparse.solve(A, jnp.ones(N * N), config=config, **kwargs)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    return int(info.iterations)


def fresh_iterations(A, config):
    sparse.clear_cache()
    return iterations(A, config)


@pytest.mark.parametrize("second, config", [(recirculating, BICGSTAB), (laplacian, PCG)],
                         ids=["recirculating", "laplacian"])
def test_another_operator_on_the_pattern_gets_its_own_structure(x64, second, config):
    fresh = fresh_iterations(second(), config)
    sparse.clear_cache()
    sparse.solve(convection(), jnp.ones(N * N), config={**config, "max_iters": 2})  # its setup
    # Before: the convection's splitting served (recirculating 9 its, Laplacian 15 for 7).
    assert iterations(second(), config) == fresh
    assert sparse.cache_info().currsize == 2  # the first operator's structure is kept


def test_the_structures_of_a_pattern_share_its_finest_arrays(x64):
    # Each operator on a pattern, and each AMG configuration, has a structure of its own,
    # but they pad the finest pattern alike: they hold one device copy of it and of its
    # diagonal positions.
    sparse.clear_cache()
    iterations(convection(), BICGSTAB)
    iterations(recirculating(), BICGSTAB)
    iterations(laplacian(), PCG)
    structures = [entry.structure for _, entry in _cache._CACHE.items()]
    assert len(structures) == 3
    first = structures[0].arrays.levels[0]
    for structure in structures[1:]:
        level = structure.arrays.levels[0]
        assert level.a.indices is first.a.indices and level.a.indptr is first.a.indptr
        assert level.diagonal is first.diagonal
    assert first.a.indices.shape[0] > N * N * 5 - 4 * N  # padded to the size class


def test_the_same_operator_again_rebuilds_and_compiles_nothing(x64):
    A = recirculating()
    fresh = fresh_iterations(A, BICGSTAB)
    # The same values in a new array, and values with the same strong couplings (a time
    # step's scaling): the structure is found, not rebuilt.
    same, scaled = A.with_values(A.values + 0), A.with_values(2 * A.values)
    misses = sparse.cache_info().misses
    with counted_compilations() as compiled:
        assert iterations(same, BICGSTAB) == fresh
        assert iterations(scaled, BICGSTAB) == fresh
    assert compiled[0] == 0
    assert sparse.cache_info().misses == misses
    assert sparse.cache_info().currsize == 1


def test_both_structures_stay_cached(x64):
    first, second = convection(), recirculating()
    expected = [fresh_iterations(first, BICGSTAB), fresh_iterations(second, BICGSTAB)]
    sparse.clear_cache()
    assert [iterations(first, BICGSTAB), iterations(second, BICGSTAB)] == expected
    misses = sparse.cache_info().misses
    with counted_compilations() as compiled:
        assert [iterations(first, BICGSTAB), iterations(second, BICGSTAB)] == expected
    assert compiled[0] == 0 and sparse.cache_info().misses == misses


def test_traced_values_and_reuse_setup_keep_the_latest_structure(x64):
    first, second = convection(), recirculating()
    b = jnp.ones(N * N)
    sparse.clear_cache()
    iterations(first, BICGSTAB)
    after_second = iterations(second, BICGSTAB)
    misses = sparse.cache_info().misses

    @jax.jit
    def traced(values):
        return sparse.solve(first.with_values(values), b, config=BICGSTAB)[1].iterations

    # Traced values (the convection's) are set up on the latest structure, the
    # recirculating flow's: no structure is built for them.
    traced(first.values)
    assert sparse.cache_info().misses == misses
    # reuse_setup keeps the latest setup's numbers: the recirculating flow's.
    assert iterations(second, BICGSTAB, reuse_setup=True) == after_second
    assert sparse.cache_info().misses == misses


def test_a_pattern_structure_is_followed_by_one_for_concrete_values(x64):
    A = recirculating()
    fresh = fresh_iterations(A, BICGSTAB)
    sparse.clear_cache()
    b = jnp.ones(N * N)
    jax.jit(lambda values: sparse.solve(A.with_values(values), b, config=BICGSTAB))(A.values)
    assert sparse.cache_info().misses == 1  # from the pattern alone
    assert iterations(A, BICGSTAB) == fresh  # then from the values
    assert sparse.cache_info().misses == 2


def test_aggregation_structures_follow_the_values(x64):
    config = {**BICGSTAB, "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION"}}
    expected = fresh_iterations(recirculating(), config)
    sparse.clear_cache()
    iterations(convection(), config)
    assert iterations(recirculating(), config) == expected
    misses = sparse.cache_info().misses
    iterations(recirculating(), config)
    assert sparse.cache_info().misses == misses


def test_structure_reuse_levels_keeps_the_first_structure(x64):
    config = {**BICGSTAB, "preconditioner": {"solver": "AMG", "structure_reuse_levels": -1}}
    sparse.clear_cache()
    iterations(convection(), config)
    # AmgX's structure reuse: the convection's structure, the recirculating flow's numbers.
    kept = iterations(recirculating(), config)
    assert sparse.cache_info().currsize == 1
    assert kept > fresh_iterations(recirculating(), config)
    with pytest.raises(ValueError, match="structure_reuse_levels must be >= -1"):
        sparse.solve(convection(), jnp.ones(N * N),
                     config={"preconditioner": {"solver": "AMG", "structure_reuse_levels": -2}})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("strength", ["AHAT", "ALL"])
def test_the_key_reads_the_couplings_the_splitting_reads(x64, dtype, strength):
    """The device's strong couplings are the host splitting's, for both criteria, complex
    entries and rows that ``max_row_sum`` leaves independent."""
    rng = np.random.default_rng(7)
    n = 300
    random = scipy.sparse.random(n, n, density=0.03, random_state=rng, format="csr")
    values = rng.standard_normal(random.nnz)
    if np.iscomplexobj(np.zeros(0, dtype)):
        values = values + 1j * rng.standard_normal(random.nnz)
    A = (scipy.sparse.csr_matrix((values, random.indices, random.indptr), shape=(n, n))
         + scipy.sparse.diags(rng.uniform(0.1, 3, n) * rng.choice([-1, 1], n))).astype(dtype)
    A.sort_indices()
    pattern = CsrStructure(A.indptr.astype(np.int32), A.indices.astype(np.int32), n)
    config = parse_amgx_config({"preconditioner": {
        "solver": "AMG", "strength": strength, "strength_threshold": 0.4,
        "max_row_sum": 0.9}}).preconditioner.amg
    host = _classical.strong_couplings(pattern, A.data, config)
    rows = jnp.asarray(pattern.row_ids)
    device = _structure_key._strong(jnp.asarray(A.data), jnp.asarray(pattern.indices), rows,
                                    jnp.asarray(pattern.diagonal_positions()), n,
                                    _structure_key._strength_rule(config))
    assert 0 < host.sum() <= A.nnz - n
    np.testing.assert_array_equal(np.asarray(device), host)
    # The digest, from index arrays padded as a structure's: that of the host's strong
    # couplings and diagonal signs; another when one coupling is no longer strong.
    padded = (np.pad(pattern.indices, (0, 5)), np.pad(pattern.indptr, (0, 3), mode="edge"),
              np.pad(pattern.diagonal_positions(), (0, 3), constant_values=-1))

    def digest(values):
        return np.asarray(_structure_key._digest(jnp.asarray(values), *map(jnp.asarray, padded),
                                                 n, _structure_key._strength_rule(config)))

    positive = np.all(np.real(A.diagonal()) > 0)
    np.testing.assert_array_equal(digest(A.data), _structure_key.summed_digest(
        jnp.asarray(host, jnp.uint32), jnp.uint32(positive), jnp.uint32(A.nnz)))
    # values padded as a padded finest level's (zeros past the last row's end, 3 empty
    # rows with no diagonal): the same digest
    np.testing.assert_array_equal(np.asarray(_structure_key._digest(
        jnp.asarray(np.pad(A.data, (0, 5))), *map(jnp.asarray, padded), n + 3,
        _structure_key._strength_rule(config))), digest(A.data))
    weakened = A.data.copy()
    weakened[np.flatnonzero(host)[0]] = 0
    assert not np.array_equal(digest(A.data), digest(weakened))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("amg", [{}, {"strength": "ALL"}, {"algorithm": "AGGREGATION"}])
def test_values_on_the_cpu_are_keyed_on_the_host(x64, dtype, amg):
    """Values on the CPU get their key on the host, compiling nothing: for classical AMG
    the same key for values with the same strong couplings and diagonal signs (twice the
    values), another when a coupling is no longer strong or a diagonal turns negative; for
    aggregation another for any other values. Values padded as a padded finest level's
    get the key of their true part."""
    from jaxsolve.sparse._hierarchy import build_structure
    A = scipy.sparse.csr_matrix(np.asarray(matrices.poisson_matrix(20).todense())).astype(
        dtype)
    if np.iscomplexobj(A.data):
        A = A + 1j * scipy.sparse.diags(np.linspace(0.1, 1, 400))
    A.sort_indices()
    pattern = CsrStructure(A.indptr.astype(np.int32), A.indices.astype(np.int32), 400)
    config = parse_amgx_config({"preconditioner": {"solver": "AMG", **amg}}).preconditioner.amg
    structure = build_structure(pattern, A.data, 1, config, pad_finest=True)
    padded_nnz = structure.arrays.levels[0].a.indices.shape[0]
    assert padded_nnz > A.nnz

    def key(values):
        return _structure_key.values_key(structure, jnp.asarray(values))

    _structure_key.DIGESTS.clear()
    assert key(np.pad(A.data, (0, padded_nnz - A.nnz))) == key(A.data)
    assert not _structure_key.DIGESTS  # nothing compiled for the keys
    weakened = A.data.copy()
    weakened[1] = 0  # the first row's coupling to its right neighbour: strong before
    flipped = A.data.copy()
    flipped[0] *= -1  # the first row's diagonal
    assert key(weakened) != key(A.data) and key(flipped) != key(A.data)
    assert (key(2 * A.data) == key(A.data)) == (config.algorithm == "CLASSICAL")
