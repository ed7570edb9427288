"""Tests for the AMG hierarchy's pieces: products, aggregation, transfer and coarse operators."""

import dataclasses
import gc

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from eliminated_boundary import boundary_nodes, eliminated

from jaxsolve import sparse
from jaxsolve.sparse import _aggregation, _hierarchy, _products, _setup, matrices
from jaxsolve.sparse._csr_arrays import CsrArrays, CsrStructure


def structure_of(matrix: scipy.sparse.csr_array) -> CsrStructure:
    matrix = scipy.sparse.csr_array(matrix)
    matrix.sort_indices()
    return CsrStructure(matrix.indptr.astype(np.int32), matrix.indices.astype(np.int32),
                        matrix.shape[1])


def scipy_of(pattern: CsrStructure, values) -> scipy.sparse.csr_array:
    return scipy.sparse.csr_array((np.asarray(values), pattern.indices, pattern.indptr),
                                  shape=(pattern.n_rows, pattern.n_cols))


def poisson(n: int, dtype=np.float64) -> scipy.sparse.csr_array:
    csr = sparse.as_csr(matrices.poisson_matrix(n, dtype=dtype))
    return scipy.sparse.csr_array((np.asarray(csr.values), csr.indices, csr.indptr),
                                  shape=csr.shape)


def random_product(seed=0, dtype=np.float64):
    """A plan for a random 30 × 20 times 20 × 25 product, values, and its multiply."""
    rng = np.random.default_rng(seed)
    a = scipy.sparse.random(30, 20, density=0.2, random_state=seed + 1, format="csr")
    b = scipy.sparse.random(20, 25, density=0.15, random_state=seed + 2, format="csr")
    a_pattern, b_pattern = structure_of(a), structure_of(b)
    plan = _products.plan_product(a_pattern, b_pattern)
    a_values = rng.standard_normal(a_pattern.nnz).astype(dtype)
    b_values = rng.standard_normal(b_pattern.nnz).astype(dtype)

    def multiply(av, bv):
        return plan.multiply(a_pattern.on_device(av), b_pattern.on_device(bv),
                             jnp.asarray(plan.c.indices), jnp.asarray(plan.c.indptr))

    return plan, a_pattern, b_pattern, a_values, b_values, multiply


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_product_plan_multiplies_like_scipy(x64, dtype):
    plan, a_pattern, b_pattern, a_values, b_values, multiply = random_product(0, dtype)
    c = jax.jit(multiply)(a_values, b_values)  # on the CPU: the native kernel
    expected = (scipy_of(a_pattern, a_values) @ scipy_of(b_pattern, b_values)).toarray()
    atol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(scipy_of(plan.c, c).toarray(), expected, atol=atol)
    # XLA's formulation, which GPUs run and derivatives use, agrees
    in_xla = jax.jit(plan.multiply_in_xla)(
        a_values, b_values, a_pattern.indices, a_pattern.indptr, b_pattern.indices,
        b_pattern.indptr, plan.c.indices, plan.c.indptr)
    np.testing.assert_allclose(in_xla, c, atol=atol)


def test_product_plan_derivatives_and_vmap(x64):
    _, _, _, a_values, b_values, multiply = random_product(1)
    jax.test_util.check_grads(multiply, (a_values, b_values), order=2, modes=["fwd", "rev"])
    stacked = jax.vmap(multiply, in_axes=(0, None))(np.stack([a_values, 2 * a_values]), b_values)
    np.testing.assert_allclose(stacked[1], 2 * multiply(a_values, b_values), rtol=1e-12)


def test_product_kernel_rejects_a_product_outside_the_pattern_of_c(x64):
    plan, a_pattern, b_pattern, a_values, b_values, _ = random_product(2)
    # Row 3 of C loses its last column, which a product has.
    indices = np.delete(plan.c.indices, plan.c.indptr[4] - 1)
    indptr = plan.c.indptr - (np.arange(plan.c.indptr.size) > 3)
    # The check is the CPU kernel's; the CUDA kernel sets such a row to NaN.
    with (pytest.raises(Exception, match="a product's column is not in its row of C"),
          jax.default_device(jax.devices("cpu")[0])):
        jax.block_until_ready(plan.multiply(
            a_pattern.on_device(jnp.asarray(a_values)), b_pattern.on_device(jnp.asarray(b_values)),
            jnp.asarray(indices), jnp.asarray(indptr)))


def test_aggregation_rounds_give_pairs_quads_and_octets():
    graph = _aggregation.coupling_graph(structure_of(poisson(16, np.float32)), None)
    for selector, size in (("SIZE_2", 2), ("SIZE_4", 4), ("SIZE_8", 8)):
        aggregates, count = _aggregation.aggregate(graph, _aggregation.ROUNDS[selector])
        assert aggregates.shape == (256,) and set(np.unique(aggregates)) == set(range(count))
        assert 256 / count == pytest.approx(size, rel=0.3), selector


@pytest.mark.parametrize(("location", "smoothed"),
                         [("HOST", False), ("HOST", True), ("DEVICE", False)])
def test_rows_that_couple_to_nothing_form_one_aggregate(x64, location, smoothed):
    # 3D Poisson 16³ whose 1352 boundary rows and columns are the identity's (Dirichlet
    # conditions eliminated): the levels shrink as those of the interior 14³ problem do,
    # one row more each (the aggregate of the identity rows), and PCG takes its iterations.
    # Kept as aggregates of one, the identity rows stayed on every level (4096, 1695, 1394,
    # 1357, 1353 rows; on the device 1396, 1359) and in the coarsest dense LU: 70 × the
    # matrix's memory kept, 107 × on the device.
    config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 200, "preconditioner": {
        "solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_8",
        "jaxsolve_smoothed_aggregation": int(smoothed), "jaxsolve_setup_location": location}}
    interior = matrices.poisson3d_matrix(14, dtype=np.float64)
    A = eliminated(matrices.poisson3d_matrix(16, dtype=np.float64), boundary_nodes((16, 16, 16)))
    stats, interior_stats = sparse.describe(A, config), sparse.describe(interior, config)
    assert stats.rows[1:] == tuple(rows + 1 for rows in interior_stats.rows[1:]), stats.rows
    assert sum(stats.bytes_kept.values()) < 4 * stats.matrix_bytes, stats.bytes_kept
    iterations = {}
    for name, matrix in (("eliminated", A), ("interior", interior)):
        b = np.random.default_rng(0).standard_normal(matrix.shape[0])
        x, info = sparse.solve(matrix, b, config=config)
        assert sparse.Status(int(info.status)).name == "SUCCESS"
        assert np.linalg.norm(matrix @ np.asarray(x) - b) <= 1e-8 * np.linalg.norm(b)
        iterations[name] = int(info.iterations)
    assert iterations["eliminated"] <= iterations["interior"], iterations


def test_couplings_follow_anisotropy():
    # ε = 0.001 along x: strong couplings are vertical, so pairs are vertical neighbours.
    A = sparse.as_csr(matrices.anisotropic_diffusion_matrix(8, 0.001, 0.0))
    pattern = CsrStructure(A.indptr, A.indices, 64)
    magnitudes = _aggregation.WeightedGraph(A.indptr, A.indices, np.abs(np.asarray(A.values)))
    aggregates, _ = _aggregation.aggregate(_aggregation.coupling_graph(pattern, magnitudes), 1)
    members = [np.flatnonzero(aggregates == a) for a in np.unique(aggregates)]
    pairs = [m for m in members if m.size == 2]
    assert len(pairs) >= 28
    assert all(abs(m[1] - m[0]) == 8 for m in pairs)  # grid rows are 8 unknowns apart


@pytest.mark.parametrize("smoothed", [False, True])
@pytest.mark.parametrize("columns", [1, 3])
def test_numeric_setup_builds_galerkin_operators(x64, smoothed, columns):
    A = poisson(12)
    pattern = structure_of(A)
    config = dataclasses_replace_amg(smoothed_aggregation=smoothed, min_coarse_rows=10)
    structure = _hierarchy.build_structure(pattern, A.data, columns, config)
    x, y = np.divmod(np.arange(144.0), 12)
    basis = np.stack([np.ones(144), x / 12, y / 12][:columns], 1)  # like rigid-body modes
    numbers = jax.jit(_hierarchy.numeric_setup, static_argnums=0)(
        structure, structure.arrays, jnp.asarray(A.data), jnp.asarray(basis))
    assert len(numbers.levels) >= 1
    level, level_structure = numbers.levels[0], structure.levels[0]
    p = scipy_of(level_structure.p, level.p.values).toarray()
    r = scipy_of(level_structure.r, level.r.values).toarray()
    np.testing.assert_allclose(r, p.T, atol=1e-14)
    coarse_pattern = structure.levels[1].a if len(structure.levels) > 1 else structure.coarsest
    coarse = (numbers.levels[1].a if len(numbers.levels) > 1 else numbers.coarsest.a).values
    np.testing.assert_allclose(scipy_of(coarse_pattern, coarse).toarray(),
                               p.T @ A.toarray() @ p, atol=1e-10)
    if not smoothed:
        # The tentative prolongation has orthonormal columns (an aggregate with fewer
        # unknowns than basis vectors leaves some zero) and reproduces the basis.
        kept = np.linalg.norm(p, axis=0) > 0
        np.testing.assert_allclose(p.T @ p, np.diag(kept.astype(float)), atol=1e-10)
        sizes = np.bincount(level_structure.aggregates)
        assert kept.sum() == np.minimum(sizes, columns).sum()
        projection = p @ (p.T @ basis)
        np.testing.assert_allclose(projection, basis, atol=1e-8 * np.abs(basis).max())


def test_coarsest_inverse_is_the_inverse(x64):
    A = poisson(6)
    config = dataclasses_replace_amg(min_coarse_rows=40)
    structure = _hierarchy.build_structure(structure_of(A), A.data, 1, config)
    numbers = _hierarchy.numeric_setup(structure, structure.arrays, jnp.asarray(A.data), None)
    coarse = scipy_of(structure.coarsest, numbers.coarsest.a.values).toarray()
    np.testing.assert_allclose(numbers.coarsest.inverse @ coarse, np.eye(coarse.shape[0]),
                               atol=1e-10)


def test_fingerprint_follows_the_finest_pattern_and_the_aggregates(x64):
    # The fingerprint digests the finest pattern (or the key given for it) and each level's
    # aggregates, of which every other pattern is a function.
    A = poisson(12)
    config = dataclasses_replace_amg(smoothed_aggregation=True, min_coarse_rows=10)

    def fingerprint(matrix, values, key=""):
        return _hierarchy.build_structure(structure_of(matrix), values, 1, config,
                                          key).fingerprint

    assert fingerprint(A, A.data) == fingerprint(A, A.data)
    assert fingerprint(A, A.data, "key") == fingerprint(A, A.data, "key") != fingerprint(
        A, A.data)
    # Couplings ten times stronger along x: other aggregates, another fingerprint.
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    along_x = A.data * np.where(np.abs(A.indices - rows) == 1, 10.0, 1.0)
    assert fingerprint(A, along_x) != fingerprint(A, A.data)
    # One more stored (zero) entry: another pattern, with the same aggregates.
    B = scipy.sparse.csr_array(A, copy=True).tolil()
    B[0, 143] = B[143, 0] = 1e-300
    B = scipy.sparse.csr_array(B)
    b_structure = _hierarchy.build_structure(structure_of(B), B.data, 1, config)
    a_structure = _hierarchy.build_structure(structure_of(A), A.data, 1, config)
    np.testing.assert_array_equal(b_structure.levels[0].aggregates,
                                  a_structure.levels[0].aggregates)
    assert b_structure.fingerprint != a_structure.fingerprint


def test_describe_after_solve_takes_the_solves_hierarchy_from_the_cache():
    # The default configuration leaves the cycle to jaxsolve: solve smooths a real matrix's
    # BiCGSTAB cycle twice after the correction. describe read the configuration without
    # that, a second cache key, and set the same hierarchy up again.
    sparse.clear_cache()
    A = sparse.as_csr(matrices.poisson_matrix(32))
    sparse.solve(A, jnp.ones(A.shape[0]))
    before = sparse.cache_info()
    sparse.describe(A)
    after = sparse.cache_info()
    assert (after.hits, after.misses, after.currsize) == (
        before.hits + 1, before.misses, before.currsize)


def test_statistics_count_levels_and_memory():
    stats = sparse.describe(matrices.poisson3d_matrix(12), {"preconditioner": {
        "algorithm": "AGGREGATION", "selector": "SIZE_8", "min_coarse_rows": 20,
        "smoother": {"solver": "MULTICOLOR_GS", "symmetric_GS": 1}}})
    assert stats.rows[0] == 1728 and stats.nonzeros[0] == 1728 * 7 - 6 * 144
    assert all(a > b for a, b in zip(stats.rows, stats.rows[1:]))
    assert stats.operator_complexity == pytest.approx(sum(stats.nonzeros) / stats.nonzeros[0])
    assert set(stats.bytes_kept) == {"finest pattern", "coarse operators", "transfer operators",
                                     "smoothers", "coarsest inverse", "product plans"}
    assert "operator complexity" in str(stats)
    # the setup's phases, each timed (the numeric one once more by describe itself)
    assert list(stats.setup_seconds) == ["aggregation", "sparse products", "coloring",
                                         "to the device", "numeric setup"]
    assert all(seconds > 0 for seconds in stats.setup_seconds.values())
    assert "setup time: aggregation" in str(stats)
    assert stats.setup_threads >= 1 and f"on {stats.setup_threads} threads" in str(stats)
    # the multicolor smoother's colors: 2 on each level's 7-point stencil (SIZE_8's 2 × 2 × 2
    # aggregates of a grid make a coarser grid), a bipartite graph; none on the coarsest,
    # which is solved directly
    assert stats.colors == (2,) * (len(stats.rows) - 1) + (0,)
    header, finest = str(stats).splitlines()[1:3]
    assert header.endswith("colors") and finest.endswith(" 2")


def test_statistics_count_every_array_the_kept_hierarchy_holds_but_a_values():
    # 3D Poisson 12³ (1728 rows, 11 232 nonzeros) is no size class: the hierarchy's finest
    # level is padded, but its values are A's own, unpadded (a solve pads them), which the
    # memory kept leaves out. The hierarchy holds no other array that describe leaves out.
    A = sparse.as_csr(matrices.poisson3d_matrix(12))
    sparse.clear_cache()
    stats = sparse.describe(A)
    # describe's hierarchy, which the setup cache keeps
    config = sparse.parse_amgx_config(None)
    system = _setup.System.for_matrix(A, config, None, reuse_setup=True, check=True)
    structure, numbers = system.setup
    assert numbers.finest.values is A.values
    assert numbers.finest.indices.shape[0] > A.nnz
    held = {id(leaf): leaf.nbytes for leaf in jax.tree.leaves((structure.arrays, numbers))
            if leaf is not A.values}
    assert sum(stats.bytes_kept.values()) == sum(held.values())
    assert "finest values" not in stats.bytes_kept


def test_describe_keeps_on_the_device_only_what_its_memory_kept_counts():
    # describe checks A's diagonal (the AMG smoothers divide by it) on the device, with
    # the positions of its entries: it kept a copy of them there until clear_cache(),
    # which the memory kept did not count (4 bytes a row). Every array it leaves behind
    # is now the setup's, and counted.
    A = sparse.as_csr(matrices.poisson3d_matrix(12))
    sparse.clear_cache()
    gc.collect()
    before = {id(array) for array in jax.live_arrays()}
    stats = sparse.describe(A)
    gc.collect()
    left = [array for array in jax.live_arrays() if id(array) not in before]
    assert sum(array.nbytes for array in left) == sum(stats.bytes_kept.values())


def test_transposed_values_follow_offsets_wider_than_a_byte_for_long_rows(x64):
    # A row of P with 300 entries (an F point of 300 C neighbours, untruncated): its
    # entries' offsets take two bytes; R's values are still Pᴴ's (complex: conjugated).
    rng = np.random.default_rng(3)
    p = scipy.sparse.random(40, 400, density=0.05, random_state=4, format="lil",
                            dtype=np.complex128)
    p[5, :300] = rng.standard_normal(300) + 1j
    p = scipy.sparse.csr_array(p)
    p.sort_indices()
    pattern = structure_of(p)
    r, r_from_p = pattern.transposed()
    offsets = _products.transpose_offsets(pattern, r, r_from_p)
    assert offsets.dtype == np.uint16
    values = _products.transposed_values(
        CsrArrays(jnp.asarray(p.data), jnp.asarray(pattern.indices), jnp.asarray(pattern.indptr)),
        jnp.asarray(r.indices), jnp.asarray(offsets))
    np.testing.assert_array_equal(scipy_of(r, values).toarray(), p.conj().T.toarray())


def test_kept_hierarchy_takes_r_from_p_by_offsets_of_a_byte(x64):
    # 3D Poisson 16³ (f64), classical PMISC with one aggressive level: the re-setup takes
    # R's values from P's by each entry's offset in its row of P, a byte each (P keeps at
    # most 4 weights a row), where int32 positions took four: the memory kept falls from
    # 2.79 × A to 2.69 ×, the numbers are the same.  The benchmarks' lean configuration.
    A = sparse.as_csr(matrices.poisson3d_matrix(16, dtype=jnp.float64))
    config = {"solver": "PCG", "preconditioner": {"solver": "AMG", "selector": "PMISC",
                                                  "aggressive_levels": 1,
                                                  "interp_max_elements": 4}}
    sparse.clear_cache()
    stats = sparse.describe(A, config)
    system = _setup.System.for_matrix(A, sparse.parse_amgx_config(config), None,
                                      reuse_setup=True, check=True)
    structure, numbers = system.setup
    assert structure.padded_setup.r_offsets == (np.dtype(np.uint8),) * len(numbers.levels)
    for level, level_arrays, kept in zip(structure.levels, structure.arrays.levels,
                                         numbers.levels, strict=True):
        assert level_arrays.r_offsets.dtype == np.uint8
        assert level_arrays.r_offsets.shape == level_arrays.r.indices.shape
        p = scipy_of(level.p, np.asarray(kept.p.values)[:level.p.nnz])
        r = scipy_of(level.r, np.asarray(kept.r.values)[:level.r.nnz])
        assert (r != p.T).nnz == 0  # R = Pᵀ exactly
    assert sum(stats.bytes_kept.values()) < 2.72 * stats.matrix_bytes


def test_statistics_count_a_hierarchy_of_lower_precision_finest_values(x64):
    # A single-precision hierarchy of f64 values keeps its own finest values, rounded
    # (padded to the class as the program computed them): the memory kept counts them.
    A = sparse.as_csr(matrices.poisson3d_matrix(12, dtype=jnp.float64))
    config = {"preconditioner": {"jaxsolve_hierarchy_precision": "SINGLE"}}
    sparse.clear_cache()
    stats = sparse.describe(A, config)
    system = _setup.System.for_matrix(A, sparse.parse_amgx_config(config), None,
                                      reuse_setup=True, check=True)
    structure, numbers = system.setup
    finest = numbers.finest.values
    assert finest.dtype == jnp.float32 and finest.shape == numbers.finest.indices.shape
    assert stats.bytes_kept["finest values"] == finest.nbytes
    held = {id(leaf): leaf.nbytes for leaf in jax.tree.leaves((structure.arrays, numbers))}
    assert sum(stats.bytes_kept.values()) == sum(held.values())


def test_kept_hierarchy_shares_the_structures_arrays_and_the_matrix_values(x64):
    # The compiled numeric setup returns new buffers; the hierarchy the cache keeps holds
    # the structure's index arrays instead of equal copies, and the values its finest
    # level is set up from: A's own, unpadded, although its pattern is padded to the
    # finest size class (a solve pads them).
    A = sparse.as_csr(matrices.poisson3d_matrix(12, dtype=jnp.float64))
    config = sparse.parse_amgx_config({"preconditioner": {
        "algorithm": "AGGREGATION", "jaxsolve_smoothed_aggregation": 1, "min_coarse_rows": 20}})
    sparse.clear_cache()
    system = _setup.System.for_matrix(A, config, None, reuse_setup=False, check=True)
    structure, numbers = system.setup
    assert len(numbers.levels) >= 2
    assert numbers.levels[0].a.values is A.values
    assert structure.arrays.levels[0].a.indices.shape[0] > A.nnz
    patterns = [level.a for level in structure.arrays.levels] + [structure.arrays.coarsest]
    operators = [level.a for level in numbers.levels] + [numbers.coarsest.a]
    for operator, pattern in zip(operators, patterns, strict=True):
        assert operator.indices is pattern.indices and operator.indptr is pattern.indptr
    for level, level_arrays in zip(numbers.levels, structure.arrays.levels, strict=True):
        assert level.p.indices is level_arrays.p.indices
        assert level.r.indptr is level_arrays.r.indptr
    # what the solve computes with them is unchanged
    b = jnp.ones(A.shape[0])
    x, info = sparse.solve(A, b, config={"preconditioner": {
        "algorithm": "AGGREGATION", "jaxsolve_smoothed_aggregation": 1, "min_coarse_rows": 20}},
        reuse_setup=True)
    assert info.status == sparse.Status.SUCCESS


def dataclasses_replace_amg(**changes):
    """jaxsolve's default aggregation AMG, with ``changes``."""
    amg = sparse.parse_amgx_config(
        {"preconditioner": {"algorithm": "AGGREGATION"}}).preconditioner.amg
    return dataclasses.replace(amg, **changes)


@pytest.mark.parametrize("smoothed", [False, True])
def test_smoothed_aggregation_coarsens_its_wider_coarse_levels_faster(smoothed):
    # 3D Poisson 16³: level 1 of smoothed aggregation holds ~25 entries per row, so its
    # aggregates grow to ~32 unknowns; unsmoothed aggregation keeps AmgX's octets.
    config = dataclasses_replace_amg(selector="SIZE_8", smoothed_aggregation=smoothed,
                                     min_coarse_rows=16)
    A = sparse.as_csr(matrices.poisson3d_matrix(16))
    A = scipy.sparse.csr_array((np.asarray(A.values), A.indices, A.indptr), shape=A.shape)
    structure = _hierarchy.build_structure(structure_of(A), A.data, 1, config)
    rows = [level.a.n_rows for level in structure.levels] + [structure.coarsest.n_rows]
    assert rows[1] == 512
    ratio = rows[1] / rows[2]
    assert (ratio >= 16) if smoothed else (ratio == pytest.approx(8, rel=0.3)), rows


def test_single_precision_hierarchy_inside_a_double_precision_solve(x64):
    # 3D Poisson 16³ in float64, PCG to 1e-10: the hierarchy set up and cycled in float32
    # costs at most one more iteration and reaches the same accuracy.
    A = sparse.as_csr(matrices.poisson3d_matrix(16, dtype=jnp.float64))
    b = jnp.asarray(np.random.default_rng(0).standard_normal(A.shape[0]))
    iterations, coarse_bytes = {}, {}
    for precision in ("DEFAULT", "SINGLE"):
        config = {"solver": "PCG", "tolerance": 1e-10, "max_iters": 100, "preconditioner": {
            "solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_8", "jaxsolve_hierarchy_precision": precision}}
        x, info = sparse.solve(A, b, config=config)
        assert info.status == sparse.Status.SUCCESS, precision
        assert x.dtype == jnp.float64
        assert float(jnp.linalg.norm(A @ x - b) / jnp.linalg.norm(b)) < 1e-9
        iterations[precision] = int(info.iterations)
        stats = sparse.describe(A, config)
        coarse_bytes[precision] = stats.bytes_kept["coarse operators"]
    assert iterations["SINGLE"] <= iterations["DEFAULT"] + 1, iterations
    # 4 bytes less for every coarse value, padding included (the index arrays stay as they
    # were); the statistics count the true nonzeros
    structure, _ = _setup.System.for_matrix(A, sparse.parse_amgx_config(config), None,
                                            reuse_setup=False, check=True).setup
    shape = structure.shape
    padded = sum(level.a_nnz for level in shape.levels[1:]) + shape.coarsest[1]
    assert coarse_bytes["DEFAULT"] - coarse_bytes["SINGLE"] == 4 * padded
    assert stats.nonzeros[1:] == tuple(level.a.nnz for level in structure.levels[1:]) + (
        structure.coarsest.nnz,)


def test_aggregates_grow_with_the_near_null_space():
    # Three rigid-body modes make each aggregate three coarse unknowns: aggregates grow by
    # 2^⌈log₂ 3⌉ = 4, so the levels still shrink by about SIZE_4's factor.
    A, modes = matrices.elasticity_matrix_2d(24)
    config = {"preconditioner": {"algorithm": "AGGREGATION", "selector": "SIZE_4", "jaxsolve_smoothed_aggregation": 1}}
    scalar = sparse.describe(A, config)
    with_modes = sparse.describe(A, config, near_nullspace=modes)
    assert with_modes.rows[0] / with_modes.rows[1] >= 4 * 0.8, with_modes.rows
    assert with_modes.operator_complexity < 1.7, with_modes.operator_complexity
    assert scalar.rows[0] / scalar.rows[1] == pytest.approx(4, rel=0.2)


def test_a_coarsening_that_stalls_above_the_dense_lu_says_why_and_what_helps(x64):
    """A level where no row depends strongly on another (every coupling positive, as on an
    indefinite Helmholtz operator's coarse levels) chooses no coarse points: the error names
    that cause and strength ALL, not max_levels or min_coarse_rows, which would not help."""
    n = 91  # 8281 rows: more than the coarsest dense LU takes
    grid = poisson(n)
    positive = scipy.sparse.csr_array(-grid + 8.5 * scipy.sparse.eye_array(n * n))
    with pytest.raises(ValueError, match=r"level 0, has 8281 rows.*coarsening chose no"
                                         r" smaller next level.*strength ALL") as raised:
        sparse.describe(positive, {"solver": "PCG"})
    assert "max_levels" not in str(raised.value) and "min_coarse_rows" not in str(raised.value)
    rows = sparse.describe(positive, {"solver": "PCG", "preconditioner": {
        "solver": "AMG", "strength": "ALL"}}).rows
    assert len(rows) > 1 and rows[-1] <= _hierarchy.MAX_DENSE_COARSE_ROWS


def test_a_hierarchy_cut_short_by_max_levels_says_to_raise_it(x64):
    with pytest.raises(ValueError, match=r"level 1, has \d+ rows.*max_levels \(2\)"):
        sparse.describe(poisson(200), {"solver": "PCG", "preconditioner": {
            "solver": "AMG", "max_levels": 2}})
