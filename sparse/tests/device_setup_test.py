"""Tests for the AMG setup on the device (_device_setup.py, ``jaxsolve_setup_location``):
the host's hierarchies on grids, PCG solves, errors, jit and grad, programs reused.

Runs on two virtual CPU devices for the test of values on another device (the flag is set
at import: Bazel runs each test file in its own process; run after another file started
JAX, that test skips).
"""

from jaxsolve_testing import counted_compilations, use_cpu_devices

use_cpu_devices(2)


import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.linalg  # noqa: E402
import scipy.sparse  # noqa: E402
from eliminated_boundary import boundary_nodes, eliminated  # noqa: E402

from jaxsolve import sparse  # noqa: E402
from jaxsolve.sparse import (_cache, _device_setup, _hierarchy, _setup,  # noqa: E402
                             matrices, parse_amgx_config)
from jaxsolve.sparse._csr_arrays import CsrStructure  # noqa: E402
from jaxsolve.sparse._index_hash import index_hash, mix32, pair_hash  # noqa: E402
from jaxsolve.sparse._size_classes import pad_pattern  # noqa: E402


def config(location: str, selector: str = "SIZE_4", **amg) -> dict:
    return {"solver": "PCG", "tolerance": 1e-6, "max_iters": 200,
            "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": selector,
                               "jaxsolve_setup_location": location, **amg}}


PROBLEMS = {  # (matrix, selector): grids numbered line by line, of even sides to the coarsest
    "poisson 2D": (lambda: matrices.poisson_matrix(24), "SIZE_4"),
    "poisson 3D": (lambda: matrices.poisson3d_matrix(8), "SIZE_8"),
    "anisotropic": (lambda: matrices.anisotropic_diffusion_matrix(24, 0.01, 0.0), "SIZE_4"),
    # 8³ inside, its boundary's rows coupled to nothing: one aggregate, the last
    "poisson 3D, boundary eliminated": (
        lambda: eliminated(matrices.poisson3d_matrix(10), boundary_nodes((10, 10, 10))), "SIZE_8"),
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


def kept_entries() -> dict:
    """The device structures the setup cache keeps, by the key of their values."""
    return {entry.built_for: entry for _, entry in _cache._CACHE.items()
            if isinstance(entry.structure, _device_setup.DeviceStructure)}


def weak_horizontal_couplings(A):
    """Another operator on ``A``'s pattern (2D Poisson): couplings along lines weakened
    100-fold (anisotropic diffusion), the diagonal lowered by as much."""
    A = sparse.as_csr(A)
    indptr, indices, values = (np.asarray(x) for x in (A.indptr, A.indices, A.values))
    rows = np.repeat(np.arange(A.shape[0]), np.diff(indptr))
    diagonal = indices == rows
    boundary = values[diagonal] - np.bincount(rows, np.where(diagonal, 0, np.abs(values)))
    values = np.where(np.abs(indices - rows) == 1, 0.01 * values, values)
    values[diagonal] = boundary + np.bincount(rows, np.where(diagonal, 0, np.abs(values)))
    return A.with_values(jnp.asarray(values))


def test_new_values_that_couple_alike_reuse_the_structure():
    # 2D Poisson, then its values scaled: the same order of every node's couplings, so the
    # same key, no structure built, and the hierarchy and answer of a fresh setup.
    A = sparse.as_csr(matrices.poisson_matrix(20))
    b = matrices.rhs_random(A.shape[0], seed=4)
    sparse.clear_cache()
    sparse.solve(A, b, config=config("DEVICE"))
    (first,) = kept_entries().values()
    misses = sparse.cache_info().misses
    for scale in (1.01, 2.0):
        scaled = A.with_values(scale * A.values)
        x, info = sparse.solve(scaled, b, config=config("DEVICE"))
        assert sparse.cache_info().misses == misses  # no structure built
        (entry,) = kept_entries().values()
        assert entry is first and entry.structure is first.structure
        numbers = entry.numbers
        sparse.clear_cache()  # a fresh setup of the scaled values
        fresh_x, fresh_info = sparse.solve(scaled, b, config=config("DEVICE"))
        (fresh,) = kept_entries().values()
        assert fresh.built_for == first.built_for
        for mine, theirs in zip(jax.tree.leaves(numbers), jax.tree.leaves(fresh.numbers),
                                strict=True):
            np.testing.assert_array_equal(mine, theirs)
        np.testing.assert_array_equal(x, fresh_x)
        assert int(info.iterations) == int(fresh_info.iterations)
        sparse.clear_cache()
        sparse.solve(A, b, config=config("DEVICE"))
        (first,) = kept_entries().values()
        misses = sparse.cache_info().misses


def test_another_operator_on_the_pattern_gets_a_structure_of_its_own():
    A = sparse.as_csr(matrices.poisson_matrix(20))
    weak = weak_horizontal_couplings(matrices.poisson_matrix(20))
    b = matrices.rhs_random(A.shape[0], seed=5)
    sparse.clear_cache()
    sparse.solve(A, b, config=config("DEVICE"))
    (poisson,) = kept_entries().values()
    _, info = sparse.solve(weak, b, config=config("DEVICE"))
    assert sparse.Status(int(info.status)).name == "SUCCESS"
    entries = kept_entries()
    assert len(entries) == 2 and entries[poisson.built_for] is poisson  # both kept
    (anisotropic,) = (entry for key, entry in entries.items() if key != poisson.built_for)
    assert anisotropic.structure.finest.indices is poisson.structure.finest.indices  # sent once
    # the anisotropic structure pairs along the strong (vertical) couplings, not Poisson's
    assert not np.array_equal(anisotropic.structure.arrays.levels[0].aggregates,
                              poisson.structure.arrays.levels[0].aggregates)
    misses = sparse.cache_info().misses
    sparse.solve(A, b, config=config("DEVICE"))  # each finds its own again
    sparse.solve(weak, b, config=config("DEVICE"))
    assert sparse.cache_info().misses == misses


def test_the_operators_of_a_pattern_share_its_mirrored_view():
    # A pattern that is not mirrored (an explicit zero stored without its mirror): a
    # second operator's structure on it takes the first's mirrored view, built once.
    A = scipy.sparse.csr_array(np.asarray(matrices.poisson_matrix(20).todense())).tocoo()
    A = scipy.sparse.csr_array((np.append(A.data, 0.0), (np.append(A.row, 0),
                                                         np.append(A.col, 47))), A.shape)
    A.sort_indices()
    assert A.nnz == 20 * 20 * 5 - 4 * 20 + 1
    b = matrices.rhs_random(A.shape[0], seed=5)
    sparse.clear_cache()
    for operator in (sparse.as_csr(A), weak_horizontal_couplings(A)):
        sparse.solve(operator, b, config=config("DEVICE"))
    first, second = (entry.structure for entry in kept_entries().values())
    assert first.key_view is not None and second.key_view is first.key_view
    assert not np.array_equal(first.arrays.levels[0].aggregates,
                              second.arrays.levels[0].aggregates)
    # describe counts it with the structure's arrays: its bytes beside those of the
    # mirrored pattern without the explicit zero (arrays of the same sizes)
    plans = [sparse.describe(sparse.as_csr(B), config("DEVICE")).bytes_kept["product plans"]
             for B in (A, scipy.sparse.csr_array(matrices.poisson_matrix(20).todense()))]
    assert plans[0] - plans[1] == sum(x.nbytes for x in jax.tree.leaves(first.key_view))


def test_reuse_setup_keeps_the_latest_structure_and_numbers():
    A = sparse.as_csr(matrices.poisson_matrix(20))
    weak = weak_horizontal_couplings(matrices.poisson_matrix(20))
    b = jnp.ones(A.shape[0])
    sparse.clear_cache()
    sparse.solve(A, b, config=config("DEVICE"))
    (first,) = kept_entries().values()
    numbers = first.numbers
    sparse.solve(weak, b, config=config("DEVICE"), reuse_setup=True)  # A's setup serves
    (entry,) = kept_entries().values()
    assert entry is first and entry.numbers is numbers
    # AmgX's structure_reuse_levels: the pattern's latest structure, the new values' numbers
    reusing = config("DEVICE", structure_reuse_levels=1)
    sparse.solve(A, b, config=reusing)
    misses = sparse.cache_info().misses
    x, info = sparse.solve(weak, b, config=reusing)
    assert sparse.cache_info().misses == misses
    assert sparse.Status(int(info.status)).name == "SUCCESS"
    assert float(jnp.linalg.norm(weak @ x - b) / jnp.linalg.norm(b)) < 1e-4  # f32


@pytest.mark.skipif(len(jax.devices()) < 2, reason="needs two devices")
def test_values_on_another_device_get_a_structure_there():
    A = sparse.as_csr(matrices.poisson_matrix(20))
    b = matrices.rhs_random(A.shape[0], seed=7)
    sparse.clear_cache()
    answers = {}
    for device in (*jax.devices()[:2], jax.devices()[0]):
        x, info = sparse.solve(A.with_values(jax.device_put(A.values, device)),
                               jax.device_put(b, device), config=config("DEVICE"))
        assert x.devices() == {device} and sparse.Status(int(info.status)).name == "SUCCESS"
        answers.setdefault(device, x)
        (entry,) = (entry for entry in kept_entries().values()
                    if entry.structure.finest.indices.devices() == {device})
        assert entry.built_for.endswith(f"@{device}")
    assert len(kept_entries()) == 2 and sparse.cache_info().hits == 1  # one each, found again
    np.testing.assert_array_equal(*answers.values())


def test_the_values_key_follows_the_order_of_the_couplings():
    A = sparse.as_csr(matrices.poisson3d_matrix(6))
    pattern = CsrStructure(np.asarray(A.indptr), np.asarray(A.indices), A.shape[1])
    nnz = _device_setup.finest_sizes(pattern.n_rows, pattern.nnz)[1]

    def padded(values):
        return jnp.pad(jnp.asarray(values, jnp.float32), (0, nnz - pattern.nnz))

    values = np.asarray(A.values)
    structure = _device_setup.build_device_structure(pattern, padded(values),
                                                     amg_config("DEVICE", "SIZE_8"))

    def key(values):
        return _device_setup.values_key(structure, padded(values))

    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    stronger = values.copy()  # one coupling of row 10 (both directions) a little stronger
    (entry,) = np.flatnonzero((rows == 10) & (np.asarray(A.indices) == 11))
    (mirror,) = np.flatnonzero((rows == 11) & (np.asarray(A.indices) == 10))
    stronger[[entry, mirror]] *= 1.001
    signs = values.copy()  # magnitudes alone count
    signs[rows != np.asarray(A.indices)] *= -1
    assert key(values) == key(3 * values) == key(signs)
    assert key(stronger) != key(values)
    assert key(stronger) == key(2 * stronger)


def finest_pattern(A):
    """``A``'s pattern padded as the device setup pads it, on the device, and its rows."""
    pattern = CsrStructure(np.asarray(A.indptr, np.int32), np.asarray(A.indices, np.int32),
                           A.shape[1])
    rows, nnz = _device_setup.finest_sizes(pattern.n_rows, pattern.nnz)
    padded = pad_pattern(pattern, rows, nnz)
    return pattern, jnp.asarray(padded.indptr), jnp.asarray(padded.indices), rows, nnz


def coupling_order_by_sorts(indptr, indices, values, *, rows):
    """The values key's digest by its definition (:func:`_device_setup.values_key`), for any
    pattern: each node's couplings sorted stably by weight, ties in the order of the edges
    ``(low, high)`` (sorted), by three sorts (the edges, then the couplings by weight and
    by node), each hashed with whether its weight is positive and larger than the one
    before."""
    entry_rows, cols, magnitudes = _device_setup._finest_triplets(indptr, indices, values,
                                                                  rows=rows)
    _, _, low, high, weights, count = _device_setup._couplings(entry_rows, cols, magnitudes,
                                                               rows, weighted=True)
    both = jnp.concatenate([low, low]) < rows  # each edge from both ends; padding ones
    s = jnp.where(both, jnp.concatenate([low, high]), rows)  # from s (last: padding)
    d = jnp.where(both, jnp.concatenate([high, low]), 0)  # to d
    weights = jnp.where(both, jnp.concatenate([weights, weights]), 0)
    by_weight = _device_setup._stable_order(_device_setup._ordered_bits(weights))
    order = by_weight[_device_setup._stable_order(s[by_weight].astype(jnp.uint32))]
    return _device_setup._order_digest(s[order], d[order], weights[order], 2 * count)


@pytest.mark.parametrize("values, n", [("matrix", 5), ("ties", 5), ("ties", 10),
                                       ("random", 10)])  # 5³: the finest level the coarsest
def test_the_values_key_of_a_mirrored_pattern_sorts_nothing(values, n):
    # On a pattern that stores (j, i) with each (i, j), rows sorted, the key's order of
    # each node's couplings comes from comparisons within rows: the digest of the three
    # sorts', bit for bit (equal weights included), from a program without a sort.
    A = scipy.sparse.csr_array(np.asarray(matrices.poisson3d_matrix(n).todense()))
    rng = np.random.default_rng(3)
    data = {"matrix": A.data, "ties": rng.integers(1, 4, A.nnz),  # many equal weights
            "random": rng.standard_normal(A.nnz)}[values].astype(np.float32)
    pattern, indptr, indices, rows, nnz = finest_pattern(A)
    padded = jnp.pad(jnp.asarray(data), (0, nnz - A.nnz))
    structure = _device_setup.build_device_structure(pattern, padded,
                                                     amg_config("DEVICE", "SIZE_8"))
    assert structure.key_width == 8 and bool(structure.arrays.levels) == (n > 5)
    width, entry_rows = structure.key_width, structure.finest_entry_rows
    np.testing.assert_array_equal(
        _device_setup._run(_device_setup._coupling_order_in_rows, indptr, indices, entry_rows,
                           padded, width=width, rows=rows),
        jax.jit(coupling_order_by_sorts, static_argnames="rows")(indptr, indices, padded,
                                                                 rows=rows))
    hlo = jax.jit(_device_setup._coupling_order_in_rows, static_argnames=("width", "rows")
                  ).lower(indptr, indices, entry_rows, padded, width=width, rows=rows
                          ).compile().as_text()
    assert " sort(" not in hlo


def changed_pattern(change: str) -> scipy.sparse.csr_array:
    """2D Poisson 8² with one change that leaves its pattern not mirrored."""
    A = scipy.sparse.csr_array(np.asarray(matrices.poisson_matrix(8).todense()))
    indptr, indices, data = A.indptr.copy(), A.indices.copy(), A.data.copy()
    if change == "one-sided entries":
        A = A.tolil()
        A[0, 5], A[30, 3] = -0.5, -0.25
        return scipy.sparse.csr_array(A)
    if change == "Dirichlet rows":  # eliminated: the diagonal alone, the columns kept
        A = A.tocoo()
        kept = (A.row >= 8) | (A.row == A.col)
        return scipy.sparse.csr_array((A.data[kept], (A.row[kept], A.col[kept])), A.shape)
    if change == "upwind convection":  # the downwind couplings dropped
        A = scipy.sparse.csr_array(np.asarray(matrices.convection_diffusion_matrix_2d(
            8, epsilon=1e-6, theta=0.3, velocity=1.0).todense()))
        A = A.tocoo()
        kept = np.abs(A.data) >= 1e-3 * A.diagonal()[A.row]
        return scipy.sparse.csr_array((A.data[kept], (A.row[kept], A.col[kept])), A.shape)
    if change == "unsorted row":
        indices[indptr[9]:indptr[10]] = indices[indptr[9]:indptr[10]][::-1].copy()
    else:  # row 9's first entry stored twice, in place of its second
        indices[indptr[9] + 1] = indices[indptr[9]]
    return scipy.sparse.csr_array((data, indices, indptr), shape=A.shape)


def assert_the_key_sorts_nothing(A, width: int, view: bool, device=None, wide: int = 0):
    """``A``'s device structure orders the couplings of its values' key in rows of
    ``width`` (in the pattern's mirrored view, or in the pattern), by a program without a
    sort (or with one, of the ``wide`` entries of wider rows alone), to the digest of the
    three sorts', bit for bit, for several kinds of values (on ``device``, or the default
    one)."""
    rng = np.random.default_rng(3)
    pattern, indptr, indices, rows, nnz = finest_pattern(A)
    indptr, indices = jax.device_put((indptr, indices), device)
    structure = None
    for data in (A.data, rng.integers(1, 4, A.nnz), rng.standard_normal(A.nnz)):
        padded = jax.device_put(jnp.pad(jnp.asarray(data, jnp.float32), (0, nnz - A.nnz)),
                                device)
        structure = structure or _device_setup.build_device_structure(
            pattern, padded, amg_config("DEVICE", "SIZE_4"))
        assert structure.key_width == width and (structure.key_view is not None) == view
        assert (0 if structure.wide_entries is None
                else int(np.sum(np.asarray(structure.wide_entries) < nnz))) == wide
        np.testing.assert_array_equal(  # and as values_key reads them: from the view
            _device_setup.values_digest(structure, padded),
            jax.jit(coupling_order_by_sorts, static_argnames="rows")(indptr, indices, padded,
                                                                     rows=rows))
    key = (_device_setup._coupling_order_in_view, (structure.key_view, padded)) if view else (
        _device_setup._coupling_order_in_rows,
        (indptr, indices, structure.finest_entry_rows, padded))
    hlo = jax.jit(key[0], static_argnames=("width", "rows")).lower(
        *key[1], structure.wide_entries, width=width, rows=rows).compile().as_text()
    if not wide:
        assert " sort(" not in hlo and "Sort" not in hlo  # nor CUB's on a GPU
    else:
        assert hlo.count(" sort(") == 1


@pytest.mark.parametrize("change", ["one-sided entries", "Dirichlet rows", "upwind convection",
                                    "unsorted row", "duplicate"])
def test_the_values_key_of_any_pattern_sorts_nothing(change):
    # A pattern that is not mirrored (an entry without its mirror, Dirichlet rows
    # eliminated, upwind convection without diffusion, a row unsorted, an entry stored
    # twice) gets its mirrored view with its structure, once: new values' key scatters
    # their magnitudes into it and orders each node's couplings by comparisons within its
    # rows, to the digest of the three sorts (bit for bit: the values here sum exactly).
    A = changed_pattern(change)
    _, indptr, indices, rows, _ = finest_pattern(A)
    assert not _device_setup._run(_device_setup._mirrored, indptr, indices, width=8, rows=rows)
    assert_the_key_sorts_nothing(A, 8, view=True)


def test_the_values_key_of_wide_rows_sorts_nothing():
    # A mirrored pattern of 81 entries a row (27-point stencils of 3 unknowns a node, as
    # 3D elasticity's on hexahedra) orders its couplings in rows of 96, not by sorts.
    line = scipy.sparse.diags([-1.0, 3.0, -1.0], [-1, 0, 1], shape=(4, 4))
    stencil = scipy.sparse.kron(scipy.sparse.kron(line, abs(line)), abs(line))  # SPD
    A = scipy.sparse.csr_array(scipy.sparse.kron(stencil, np.array(
        [[4.0, 1.0, 0.5], [1.0, 4.0, 1.0], [0.5, 1.0, 4.0]])))
    A.eliminate_zeros()  # diags' zeros outside the matrix
    assert np.diff(A.indptr).max() == 81
    assert_the_key_sorts_nothing(A, 96, view=False)


@pytest.mark.parametrize("mirrored", [True, False])
def test_the_values_key_sorts_the_entries_of_wide_rows_alone(mirrored):
    # A row of more than MAX_KEY_WIDTH entries (a constraint coupling node 0 to all, its
    # column too or not): its entries are ordered by one sort of theirs alone, the other
    # rows by comparisons, to the digest of the three sorts.
    A = scipy.sparse.lil_array(np.asarray(matrices.poisson_matrix(12).todense()))
    A[0, :] = -0.01 * (1 + np.arange(144) % 3)
    A[0, 0] = 10.0
    if mirrored:
        A[:, 0] = A[0, :].toarray().reshape(-1, 1)
    A = scipy.sparse.csr_array(A)
    assert_the_key_sorts_nothing(A, 8, view=not mirrored, wide=144)
    # describe counts every array the setup keeps, those positions too (A's values aside)
    A = sparse.as_csr(A)
    sparse.clear_cache()
    kept = sum(sparse.describe(A, config("DEVICE")).bytes_kept.values())
    (entry,) = kept_entries().values()
    structure = entry.structure
    assert structure.wide_entries is not None
    arrays = {id(x): x.nbytes for x in jax.tree.leaves((
        structure.arrays, structure.solve_diagonal, structure.key_view,
        structure.wide_entries, entry.numbers)) if x is not A.values}
    assert kept == sum(arrays.values())


def test_a_pair_hash_tells_pairs_apart():
    # The matching's last tie-break: distinct for the pairs of one node, and differs
    # between the two directions of a pair, with index_hash's finalizer.
    a, b = (x.ravel() for x in jnp.meshgrid(jnp.arange(256), jnp.arange(256)))
    hashes = np.asarray(pair_hash(a, b)).reshape(256, 256)
    assert all(len(np.unique(row)) == 256 for row in hashes)
    assert all(len(np.unique(column)) == 256 for column in hashes.T)
    assert np.mean(hashes != hashes.T) > 0.99
    np.testing.assert_array_equal(mix32(jnp.arange(64, dtype=jnp.uint32)), index_hash(64))


def test_bad_values_on_a_cached_pattern_raise_as_before():
    # NaN or a zero pivot in new values of a cached pattern: the same error as on the
    # host path, from the checks before a structure is built, or, where the values' key
    # finds a structure (a row coupled to nothing: its diagonal is no coupling's), from the
    # solve's own check of its values.
    poisson = np.asarray(matrices.poisson_matrix(12).todense())
    A = sparse.as_csr(scipy.sparse.csr_array(scipy.linalg.block_diag(poisson, [[4.0]])))
    b = jnp.ones(A.shape[0])
    alone = int(A.indptr[-1]) - 1  # the last row's one entry, its diagonal
    coupled = 7
    for location in ("HOST", "DEVICE"):
        sparse.clear_cache()
        sparse.solve(A, b, config=config(location))
        for position, value, match in ((coupled, jnp.nan, "A holds NaN or Inf"),
                                       (alone, jnp.nan, "A holds NaN or Inf"),
                                       (alone, 0.0, r"1 zero \(or unstored\) diagonal")):
            misses = sparse.cache_info().misses
            bad = A.with_values(A.values.at[position].set(value))
            with pytest.raises(ValueError, match=match):
                sparse.solve(bad, b, config=config(location))
            if location == "DEVICE" and position == alone:  # the same key: no new structure
                assert sparse.cache_info().misses == misses


def test_new_values_of_a_kept_structure_are_checked_by_the_solve_alone(monkeypatch):
    # The checks before a setup (a wait for the device each) run before a structure is
    # built, as the host path's: values whose key finds one are checked by the solve.
    checked = []
    check_finite = _setup.check_finite
    monkeypatch.setattr(_setup, "check_finite",
                        lambda caller, arrays: (checked.extend(arrays.keys() & {"A"}),
                                                check_finite(caller, arrays)))
    A = sparse.as_csr(matrices.poisson_matrix(12))
    b = jnp.ones(A.shape[0])
    sparse.clear_cache()
    sparse.solve(A, b, config=config("DEVICE"))
    assert checked == ["A"]  # before the structure's build
    _, info = sparse.solve(A.with_values(1.01 * A.values), b, config=config("DEVICE"))
    assert checked == ["A"] and sparse.Status(int(info.status)).name == "SUCCESS"


def test_a_similar_pattern_compiles_no_setup_program():
    grid = matrices.poisson_matrix(24)
    A = sparse.as_csr(grid)
    b = jnp.ones(A.shape[0])
    sparse.solve(A, b, config=config("DEVICE"))
    before = len(_device_setup.PROGRAMS), len(_device_setup.NUMERIC_SETUPS)
    coupled = scipy.sparse.csr_array((np.asarray(A.values), A.indices, A.indptr), shape=A.shape)
    extra = scipy.sparse.csr_array(([-0.5, -0.5, 0.5, 0.5], ([3, 100, 3, 100], [100, 3, 3, 100])),
                                   shape=A.shape)
    similar = sparse.as_csr((coupled + extra).astype(np.float32))
    with counted_compilations() as count:  # nor the checks of its values (by NumPy here)
        _, info = sparse.solve(similar, b, config=config("DEVICE"))
    assert sparse.Status(int(info.status)).name == "SUCCESS"
    assert (len(_device_setup.PROGRAMS), len(_device_setup.NUMERIC_SETUPS)) == before
    assert count[0] == 0


@pytest.mark.parametrize("rows", ["same rows", "fewer rows"])
def test_a_similar_patterns_values_on_a_gpu_are_checked_by_programs_compiled_before(
        monkeypatch, rows):
    # Values on a GPU are checked (no NaN, no zero pivot) on the device before a structure
    # is built. Checked as given, their checks compiled two programs per new pattern's
    # nonzeros (and rows); checked once padded to their size class, none: only the padding
    # is compiled per size (on the CPU, done on the host).
    for module in (_setup, _hierarchy):
        monkeypatch.setattr(module, "in_host_memory",
                            lambda values: not isinstance(values, jax.Array))
    A = sparse.as_csr(matrices.poisson_matrix(32))
    b = jnp.ones(A.shape[0])
    sparse.solve(A, b, config=config("DEVICE"))
    grid = scipy.sparse.csr_array((np.asarray(A.values), A.indices, A.indptr), shape=A.shape)
    n = grid.shape[0] - (1 if rows == "fewer rows" else 0)
    similar = (grid[:n, :n] + scipy.sparse.csr_array(
        ([-0.5, -0.5, 0.5, 0.5], ([3, 100, 3, 100], [100, 3, 3, 100])), shape=(n, n))).tocsr()
    b = b[:n]
    with counted_compilations() as count:
        _, info = sparse.solve(sparse.as_csr(similar), b, config=config("DEVICE"))
    assert sparse.Status(int(info.status)).name == "SUCCESS"
    # (a GPU pads the values, and b and x of other rows, by programs compiled per size)
    assert count[0] == 0 if jax.default_backend() == "cpu" else count[0] <= 3
    nan = sparse.as_csr(similar)
    with pytest.raises(ValueError, match="A holds NaN or Inf"):
        sparse.solve(nan.with_values(nan.values.at[7].set(jnp.nan)), b, config=config("DEVICE"))
    zero_pivot = nan.with_values(jnp.where(jnp.asarray(nan.row_ids) == jnp.asarray(nan.indices),
                                           0.0, nan.values))
    with pytest.raises(ValueError, match=r"zero \(or unstored\) diagonal"):
        sparse.solve(zero_pivot, b, config=config("DEVICE"))


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


def test_the_kept_numbers_share_the_structures_arrays_and_a_values():
    # The compiled numeric setup returns every array anew; the kept numbers hold the
    # structure's index arrays and A's own values (unpadded: a solve pads them), so that
    # describe counts every array they keep once, and no copy of A's values. A solve
    # that reuses them computes what the first one did, bit for bit.
    A = sparse.as_csr(matrices.poisson3d_matrix(12))
    b = jnp.asarray(np.random.default_rng(2).standard_normal(A.shape[0]), A.dtype)
    sparse.clear_cache()
    stats = sparse.describe(A, config("DEVICE", "SIZE_8"))
    (entry,) = kept_entries().values()
    structure, numbers = entry.structure, entry.numbers
    assert numbers.finest.values is A.values
    assert structure.finest.indices.shape[0] > A.nnz
    patterns = [level.a for level in structure.arrays.levels] + [structure.arrays.coarsest]
    operators = [level.a for level in numbers.levels] + [numbers.coarsest.a]
    for operator, pattern in zip(operators, patterns, strict=True):
        assert operator.indices is pattern.indices and operator.indptr is pattern.indptr
    for level, arrays in zip(numbers.levels, structure.arrays.levels, strict=True):
        assert level.p.indices is arrays.p.indices and level.r.indptr is arrays.r.indptr
    held = {id(leaf): leaf.nbytes for leaf in jax.tree.leaves(
        (structure.arrays, numbers, structure.solve_diagonal)) if leaf is not A.values}
    assert sum(stats.bytes_kept.values()) == sum(held.values())
    assert "finest values" not in stats.bytes_kept
    x, info = sparse.solve(A, b, config=config("DEVICE", "SIZE_8"))
    y, again = sparse.solve(A, b, config=config("DEVICE", "SIZE_8"), reuse_setup=True)
    assert sparse.Status(int(info.status)).name == "SUCCESS"
    assert int(again.iterations) == int(info.iterations)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("key", ["uint32", "two passes", "uint64"])
def test_each_pair_key_sorts_stably_by_row_then_column(key, request):
    # The Galerkin pattern's sort by one key (or two passes of one) is the stable sort by
    # (row, column) that it replaced: the same permutation, so the same hierarchy bit for
    # bit (ties keep their order, and so do the sums of their values).
    if key == "uint64":
        request.getfixturevalue("x64")
    rng = np.random.default_rng(7)
    end, size = 50, 4000  # many duplicate pairs; rows past end - 1 are left out (last)
    rows = rng.integers(0, end + 3, size).astype(np.int32)
    cols = rng.integers(0, end + 1, size).astype(np.int32)
    kept = rows < end
    expected = np.lexsort((np.arange(size), np.where(kept, cols, 0), np.minimum(rows, end)))
    order = jax.jit(_device_setup._pair_order, static_argnums=(2, 3))(
        jnp.asarray(rows), jnp.asarray(cols), end, key)
    np.testing.assert_array_equal(order, expected)


def test_the_pair_key_fits_its_bound(x64):
    assert _device_setup._pair_key(65_535) == "uint32"  # 65 535 · 65 536 < 2³²
    assert _device_setup._pair_key(65_536) == "uint64"
    with jax.enable_x64(False):
        assert _device_setup._pair_key(65_536) == "two passes"


def test_summed_triplets_are_the_distinct_pairs_sorted_and_summed():
    rng = np.random.default_rng(8)
    end, size = 40, 3000
    rows = rng.integers(0, end + 2, size).astype(np.int32)
    cols = rng.integers(0, end, size).astype(np.int32)
    values = rng.integers(-5, 6, size).astype(np.float32)  # sums exact in any order
    pair_rows, pair_cols, sums, position, count = jax.jit(
        _device_setup._summed_triplets, static_argnums=3)(rows, cols, values, end)
    kept = rows < end
    pairs, inverse = np.unique(np.stack([rows[kept], cols[kept]]), axis=1, return_inverse=True)
    count = int(count)
    assert count == pairs.shape[1]
    np.testing.assert_array_equal(pair_rows[:count], pairs[0])
    np.testing.assert_array_equal(pair_cols[:count], pairs[1])
    assert np.all(np.asarray(pair_rows)[count:] == end)
    np.testing.assert_array_equal(sums[:count], np.bincount(inverse.ravel(), values[kept]))
    np.testing.assert_array_equal(np.asarray(position)[kept], inverse.ravel())
    assert np.all(np.asarray(position)[~kept] >= count)


@pytest.mark.gpu
@pytest.mark.skipif(not any(d.platform == "gpu" for d in jax.devices()), reason="needs a GPU")
@pytest.mark.parametrize("end", [60_000, 100_000])  # a key of 32 bits, of 64 bits
def test_the_galerkin_pattern_sorts_by_cub_radix_sort_on_a_gpu(end, request):
    # XLA runs a sort of one unsigned key and its positions as CUB's radix sort (a sort by
    # two keys as a comparison sort), at sizes where that is faster: a level's triplets.
    if end > 65_535:
        request.getfixturevalue("x64")
    size = 1_000_000
    rows = jax.device_put(jnp.zeros(size, jnp.int32), jax.devices("gpu")[0])
    hlo = jax.jit(_device_setup._summed_triplets, static_argnums=3).lower(
        rows, rows, rows.astype(jnp.float32), end).compile().as_text()
    assert "__cub$DeviceRadixSort" in hlo


def kept_structures() -> list:
    return [entry.structure for _, entry in _cache._CACHE.items()]


@pytest.mark.gpu
@pytest.mark.skipif(not any(d.platform == "gpu" for d in jax.devices()), reason="needs a GPU")
@pytest.mark.parametrize("change", ["Dirichlet rows", "upwind convection"])
def test_the_values_key_of_any_pattern_sorts_nothing_on_a_gpu(change):
    # The mirrored view on the GPU: built there, its key's program holds no sort (nor
    # CUB's radix sort) and gives the three sorts' digest, as on the CPU.
    assert_the_key_sorts_nothing(changed_pattern(change), 8, view=True,
                                 device=jax.devices("gpu")[0])


@pytest.mark.parametrize("selector, amg", [("SIZE_4", {}),  # set up on a GPU, and not
                                           ("PMIS", {"algorithm": "CLASSICAL"})])
def test_auto_sets_up_on_the_host_on_a_cpu(selector, amg):
    A = sparse.as_csr(matrices.poisson_matrix(20))
    b = matrices.rhs_random(A.shape[0], seed=6)
    sparse.clear_cache()
    x, info = sparse.solve(A, b, config=config("AUTO", selector, **amg))
    assert sparse.Status(int(info.status)).name == "SUCCESS"
    (structure,) = kept_structures()
    assert isinstance(structure, _hierarchy.HierarchyStructure)
    misses = sparse.cache_info().misses
    host, _ = sparse.solve(A, b, config=config("HOST", selector, **amg))
    assert sparse.cache_info().misses == misses  # the host setup's cache entry
    np.testing.assert_array_equal(x, host)
    sparse.clear_cache()  # traced values too
    jax.jit(lambda v: sparse.solve(A.with_values(v), b, config=config("AUTO", selector, **amg))
            )(A.values)
    assert all(isinstance(s, _hierarchy.HierarchyStructure) for s in kept_structures())


def test_auto_is_a_setup_location():
    amg = amg_config("AUTO", "PMIS", algorithm="CLASSICAL")  # not refused, as DEVICE is
    assert amg.setup_location == "AUTO" and amg.not_set_up_on_device() == (
        "algorithm 'CLASSICAL'",)
    assert amg._amgx_keys("main")["jaxsolve_setup_location"] == "AUTO"
    assert amg_config("AUTO", "SIZE_4").not_set_up_on_device() == ()


@pytest.mark.gpu
@pytest.mark.skipif(not any(d.platform == "gpu" for d in jax.devices()), reason="needs a GPU")
def test_auto_sets_up_on_the_gpu_what_the_device_setup_sets_up():
    A = sparse.as_csr(matrices.poisson_matrix(20))
    b = matrices.rhs_random(A.shape[0], seed=6)
    gpu, cpu = jax.devices("gpu")[0], jax.devices("cpu")[0]
    for device, selector, amg, kind in (
            (gpu, "SIZE_4", {}, _device_setup.DeviceStructure),
            (gpu, "PMIS", {"algorithm": "CLASSICAL"}, _hierarchy.HierarchyStructure),
            (cpu, "SIZE_4", {}, _hierarchy.HierarchyStructure)):
        sparse.clear_cache()
        _, info = sparse.solve(A.with_values(jax.device_put(A.values, device)),
                               jax.device_put(b, device), config=config("AUTO", selector, **amg))
        assert sparse.Status(int(info.status)).name == "SUCCESS"
        (structure,) = kept_structures()
        assert isinstance(structure, kind)
