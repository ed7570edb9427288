"""Tests for classical AMG: strength, PMIS/PMISC/HMIS splittings, D1/D2 interpolation, solves."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pyamg
import pytest
import scipy.sparse
import scipy.sparse.linalg
from pyamg.classical.interpolate import classical_interpolation

from jaxsolve import sparse
from jaxsolve.sparse import (
    _blocks,
    _classical,
    _classical_kernels,
    _hierarchy,
    _products,
    _setup,
    matrices,
    parse_amgx_config,
)
from jaxsolve.sparse._csr_arrays import CsrArrays, CsrStructure


def classical(**changes):
    """The AMG configuration of a PCG solve with classical AMG and ``changes``."""
    return {"solver": "PCG", "preconditioner": {"solver": "AMG", "algorithm": "CLASSICAL",
                                                "min_coarse_rows": 16, **changes}}


def amg_config(**changes):
    return parse_amgx_config(classical(**changes)).preconditioner.amg


def host(A) -> tuple[CsrStructure, np.ndarray]:
    """``A``'s pattern (sorted) and its float64 values."""
    matrix = scipy.sparse.csr_array(A).astype(np.float64)
    matrix.sort_indices()
    pattern = CsrStructure(matrix.indptr.astype(np.int32), matrix.indices.astype(np.int32),
                           matrix.shape[1])
    return pattern, matrix.data


def scipy_of(pattern: CsrStructure, values) -> scipy.sparse.csr_array:
    # Copies: eliminate_zeros would shrink the pattern's own arrays.
    return scipy.sparse.csr_array((np.array(values), pattern.indices.copy(),
                                   pattern.indptr.copy()), shape=(pattern.n_rows, pattern.n_cols))


def scipy_matrix(A) -> scipy.sparse.csr_array:
    csr = sparse.as_csr(A)
    return scipy.sparse.csr_array((np.asarray(csr.values), csr.indices, csr.indptr),
                                  shape=csr.shape)


def rotated_anisotropic(n: int) -> scipy.sparse.csr_array:
    stencil = pyamg.gallery.diffusion_stencil_2d(epsilon=0.01, theta=np.pi / 8, type="FD")
    return scipy.sparse.csr_array(pyamg.gallery.stencil_grid(stencil, (n, n), format="csr"))


PROBLEMS = {  # PyAMG's gallery
    "poisson2d": lambda: scipy.sparse.csr_array(pyamg.gallery.poisson((20, 20), format="csr")),
    "poisson3d": lambda: scipy.sparse.csr_array(pyamg.gallery.poisson((8, 8, 8), format="csr")),
    "anisotropic": lambda: rotated_anisotropic(20),
    "airfoil": lambda: scipy.sparse.csr_array(pyamg.gallery.load_example("airfoil")["A"]),
}


def greedy_pmis(indptr, indices, strong, method: str) -> np.ndarray:
    """The C points of the sequential greedy pass that PMIS's rounds reach, in NumPy: the
    undecided point of largest weight ``|Sᵀ_i| + u_i`` (``u_i`` the splitmix64 hash of
    ``i`` in [0, 1); ties to the smaller index) becomes C and its neighbours in ``S ∪ Sᵀ``
    F. PMIS in color (``"PMISC"``) replaces ``u_i`` by ``(m - 1 - c_i + u_i) / m``,
    ``c_i`` the first-fit color of ``i`` in index order."""
    n = len(indptr) - 1
    rows = np.repeat(np.arange(n), np.diff(indptr))
    keep = np.asarray(strong) & (np.asarray(indices) != rows)
    graph = scipy.sparse.csr_array((np.ones(keep.sum()), (rows[keep], indices[keep])),
                                   shape=(n, n))  # repeated entries summed
    dependents = np.bincount(np.asarray(indices)[keep], minlength=n)  # |Sᵀ_i|, repeats too
    z = np.arange(n, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    fraction = (z >> np.uint64(11)) * (1.0 / 2.0**53)
    coupled = (graph + graph.T).tocsr()
    state = np.where(np.diff(coupled.indptr) > 0, -1, 0)  # undecided, or F
    if method == "PMISC":
        color = np.full(n, -1)
        for i in np.flatnonzero(state == -1):
            taken = set(color[coupled.indices[coupled.indptr[i]:coupled.indptr[i + 1]]])
            color[i] = next(c for c in range(len(taken) + 1) if c not in taken)
        colors = color.max() + 1
        assert colors >= 2
        fraction = np.where(color >= 0, (colors - 1 - color + fraction) / colors, fraction)
    weight = dependents + fraction
    for i in np.lexsort((np.arange(n), -weight)):
        if state[i] == -1:
            state[i] = 1
            neighbours = coupled.indices[coupled.indptr[i]:coupled.indptr[i + 1]]
            state[neighbours[state[neighbours] == -1]] = 0
    return state == 1


class TestSplitting:
    @pytest.mark.parametrize("selector", ["PMIS", "PMISC"])
    @pytest.mark.parametrize("problem", sorted(PROBLEMS))
    def test_pmis_c_points_are_independent_and_cover_the_f_points(self, problem, selector):
        pattern, values = host(PROBLEMS[problem]())
        config = amg_config(selector=selector)
        strong = _classical.strong_couplings(pattern, values, config)
        graph = scipy_of(pattern, strong.astype(float))
        graph.eliminate_zeros()
        coupled = (graph + graph.T).tocsr()  # G = S ∪ Sᵀ
        coarse = _classical.level_structure(pattern, values, config).coarse
        assert 0 < coarse.sum() < pattern.n_rows
        # No strong coupling, in either direction, between two C points.
        assert coupled[coarse][:, coarse].nnz == 0
        # Every F point with a strong coupling is coupled to a C point.
        has_coupling = np.diff(coupled.indptr) > 0
        to_coarse = np.asarray(coupled[:, coarse].sum(axis=1)).ravel() > 0
        assert np.all(to_coarse[~coarse & has_coupling])

    @pytest.mark.parametrize("method", ["PMIS", "PMISC"])
    @pytest.mark.parametrize("problem", ["poisson3d_32", "anisotropic_128"])
    def test_pmis_rounds_over_threads_take_the_greedy_set(self, problem, method):
        """The native PMIS, in rounds over the cores (its graphs here span several blocks of
        rows), takes the set of the sequential greedy pass in decreasing weight
        (:func:`greedy_pmis`)."""
        matrix = {"poisson3d_32": lambda: pyamg.gallery.poisson((32, 32, 32), format="csr"),
                  "anisotropic_128": lambda: rotated_anisotropic(128)}[problem]()
        pattern, values = host(matrix)
        strong = _classical.strong_couplings(pattern, values, amg_config())
        coarse = _classical_kernels.classical_splitting(pattern.indptr, pattern.indices, strong,
                                                        method)
        assert pattern.n_rows >= 2 * 8192  # several blocks of the native rounds
        np.testing.assert_array_equal(
            coarse, greedy_pmis(pattern.indptr, pattern.indices, strong, method))

    @pytest.mark.parametrize("method", ["PMIS", "PMISC"])
    def test_pmis_counts_a_repeated_dependency_twice(self, method):
        """The path 0 - 1 - 2 - 3 with row 0 listing column 1 twice: ``|Sᵀ_1|`` is 3, as a
        transpose counts it, not the 2 entries of row 1, which the native code may take
        for the transpose's only when rows strictly increase."""
        indptr = np.array([0, 2, 4, 6, 7])
        indices = np.array([1, 1, 0, 2, 1, 3, 2])
        strong = np.ones(7, bool)
        np.testing.assert_array_equal(
            _classical_kernels.classical_splitting(indptr, indices, strong, method),
            greedy_pmis(indptr, indices, strong, method))

    @pytest.mark.parametrize("shape", [(16, 16), (10, 10, 10), (9, 12)])
    def test_pmis_in_color_splits_a_grid_like_ruge_stuben(self, shape):
        """On the 5- and 7-point Laplacians PMISC's C points are the red points of the
        red-black checkerboard (the first point's color), one of the two checkerboards
        Ruge–Stüben's first pass (HMIS) takes; random PMIS takes fewer, scattered ones."""
        pattern, values = host(pyamg.gallery.poisson(shape, format="csr"))
        red = np.add.reduce(np.indices(shape), axis=0).ravel() % 2 == 0
        split = {selector: _classical.level_structure(
            pattern, values, amg_config(selector=selector)).coarse
            for selector in ("PMISC", "HMIS", "PMIS")}
        np.testing.assert_array_equal(split["PMISC"], red)
        assert np.array_equal(split["HMIS"], red) or np.array_equal(split["HMIS"], ~red)
        assert split["PMIS"].sum() < 0.9 * red.sum()

    @pytest.mark.parametrize("problem", sorted(PROBLEMS))
    def test_hmis_f_points_depend_on_a_c_point(self, problem):
        pattern, values = host(PROBLEMS[problem]())
        config = amg_config(selector="HMIS")
        strong = _classical.strong_couplings(pattern, values, config)
        graph = scipy_of(pattern, strong.astype(float))
        graph.eliminate_zeros()
        coarse = _classical.level_structure(pattern, values, config).coarse
        depends = np.diff(graph.indptr) > 0
        on_coarse = np.asarray(graph[:, coarse].sum(axis=1)).ravel() > 0
        assert np.all(on_coarse[~coarse & depends])
        # A C point never depends on a C point chosen before it, so no two C points depend
        # on each other.
        c_graph = graph[coarse][:, coarse]
        assert c_graph.multiply(c_graph.T).nnz == 0

    def test_strength_follows_the_anisotropy_and_the_threshold(self):
        # ε = 0.001 along x: only the vertical couplings (8 unknowns apart) are strong.
        stencil = [[0, -1, 0], [-0.001, 2.002, -0.001], [0, -1, 0]]
        pattern, values = host(pyamg.gallery.stencil_grid(stencil, (8, 8), format="csr"))
        strong = _classical.strong_couplings(pattern, values, amg_config())
        distance = np.abs(pattern.indices - pattern.row_ids)
        assert np.all(distance[strong] == 8) and strong.sum() == 2 * 8 * 7
        everything = _classical.strong_couplings(pattern, values, amg_config(strength="ALL"))
        np.testing.assert_array_equal(everything, distance > 0)
        # Rows whose sum exceeds 0.01 |a_ii| (here: on the boundary) depend on nothing.
        capped = _classical.strong_couplings(pattern, values, amg_config(max_row_sum=0.01))
        diagonal = values[pattern.diagonal_positions()]
        large = np.abs(np.add.reduceat(values, pattern.indptr[:-1])) > 0.01 * diagonal
        assert large.any() and not large.all()
        np.testing.assert_array_equal(capped, strong & ~large[pattern.row_ids])


class TestInterpolation:
    @pytest.mark.parametrize("interpolator", ["D1", "D2"])
    @pytest.mark.parametrize("problem", ["poisson2d", "poisson3d", "airfoil"])
    def test_weights_reproduce_constants_on_zero_row_sum_rows(self, problem, interpolator):
        pattern, values = host(PROBLEMS[problem]())
        structure = _classical.level_structure(pattern, values,
                                               amg_config(interpolator=interpolator))
        p = scipy_of(structure.p, _classical.host_values(structure, pattern, values))
        row_sums = np.asarray(p.sum(axis=1)).ravel()
        a_row_sums = np.add.reduceat(values, pattern.indptr[:-1])
        interpolated = np.diff(structure.p.indptr) > 0
        zero_sum = np.abs(a_row_sums) < 1e-12 * np.abs(values).max()
        assert zero_sum[~structure.coarse].sum() > 0
        np.testing.assert_allclose(row_sums[zero_sum & interpolated], 1, rtol=1e-12)
        # C points interpolate themselves
        np.testing.assert_array_equal(p.toarray()[structure.coarse],
                                      np.eye(structure.n_coarse))

    @pytest.mark.parametrize("problem", ["anisotropic", "airfoil"])
    def test_d1_is_pyamg_modified_classical_interpolation(self, problem):
        A = PROBLEMS[problem]()
        pattern, values = host(A)
        structure = _classical.level_structure(pattern, values, amg_config(interpolator="D1"))
        ours = scipy_of(structure.p, _classical.host_values(structure, pattern, values))
        strength = scipy_of(pattern, structure.strong.astype(float))
        strength.eliminate_zeros()
        theirs = classical_interpolation(scipy_of(pattern, values), strength,
                                         structure.coarse.astype(np.int32), modified=True)
        np.testing.assert_allclose(ours.toarray(), theirs.toarray(), rtol=1e-12, atol=1e-14)

    def test_d2_interpolates_from_distance_two(self):
        # PMIS: its sparse random splitting leaves F points with strong F neighbours that
        # share no C point, which D2 reaches; HMIS's regular one on this grid leaves none.
        pattern, values = host(PROBLEMS["poisson2d"]())
        d1, d2 = (_classical.level_structure(pattern, values,
                                             amg_config(selector="PMIS", interpolator=method))
                  for method in ("D1", "D2"))
        np.testing.assert_array_equal(d1.coarse, d2.coarse)
        a = scipy_of(pattern, np.ones(pattern.nnz))

        def entries(matrix):
            return set(zip(*matrix.nonzero(), strict=True))

        p1, p2 = (scipy_of(s.p, np.ones(s.p.nnz)) for s in (d1, d2))
        assert p2.nnz > p1.nnz
        assert entries(p2) <= entries((a @ a)[:, d2.coarse])  # within distance two
        assert entries(p1) <= entries(a[:, d1.coarse])  # within distance one

    @pytest.mark.parametrize("most, factor", [(2, 1.1), (3, 0.2), (-1, 0.5)])
    def test_truncation_keeps_the_largest_and_rescales(self, most, factor):
        pattern, values = host(PROBLEMS["airfoil"]())
        untruncated = _classical.level_structure(pattern, values, amg_config())
        config = amg_config(interp_max_elements=most, interp_truncation_factor=factor)
        structure = _classical.level_structure(pattern, values, config)
        np.testing.assert_array_equal(structure.coarse, untruncated.coarse)
        full = scipy_of(untruncated.p, _classical.host_values(untruncated, pattern, values))
        p = scipy_of(structure.p, _classical.host_values(structure, pattern, values))
        counts = np.diff(structure.p.indptr)
        assert p.nnz < full.nnz
        if most > 0:
            assert counts.max() <= most
        np.testing.assert_allclose(p.sum(axis=1), full.sum(axis=1), rtol=1e-12)
        full_dense, dense = np.abs(full.toarray()), np.abs(p.toarray())
        for row in np.flatnonzero(counts):
            weights = full_dense[row][full_dense[row] > 0]
            kept = dense[row] > 0
            # The kept weights are the row's largest, and none is below factor × largest.
            assert full_dense[row][kept].min() >= np.sort(weights)[-kept.sum()]
            if 0 < factor < 1:
                assert full_dense[row][kept].min() >= factor * weights.max() * (1 - 1e-12)


class TestNumericSetup:
    def test_resetup_with_new_values_equals_a_fresh_setup(self, x64):
        A = rotated_anisotropic(16)
        pattern, values = host(A)
        config = amg_config(interp_max_elements=3, max_levels=2)
        # New values with the same strong couplings (and truncation) on the first level (on
        # coarser ones the strengths would follow the new values): the diagonal shifted up.
        shifted = values + 0.3 * (pattern.indices == pattern.row_ids)
        cached = _hierarchy.build_structure(pattern, values, 1, config)
        fresh = _hierarchy.build_structure(pattern, shifted, 1, config)
        assert cached.fingerprint == fresh.fingerprint and len(cached.levels) == 1
        setup = jax.jit(_hierarchy.numeric_setup, static_argnums=0)
        resetup = setup(cached, cached.arrays, jnp.asarray(shifted), None)
        expected = setup(fresh, fresh.arrays, jnp.asarray(shifted), None)
        for got, want in zip(jax.tree.leaves(resetup), jax.tree.leaves(expected), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        # ... and its coarse operators are the Galerkin products of its interpolations
        level = resetup.levels[0]
        a = scipy_of(cached.levels[0].a, level.a.values)
        p = scipy_of(cached.levels[0].p, level.p.values)
        coarse = resetup.coarsest.a
        np.testing.assert_allclose(scipy_of(cached.coarsest, coarse.values).toarray(),
                                   (p.T @ a @ p).toarray(), rtol=1e-12, atol=1e-13)
        # ... which the host's build computed for the values it saw
        host_p = _classical.host_values(cached.levels[0].interpolation, pattern, shifted)
        np.testing.assert_allclose(host_p, level.p.values, rtol=1e-12)

    def test_the_default_keeps_its_interpolation_plans_in_offsets_of_a_byte(self, x64):
        # 3D Poisson 16³, the default configuration (PMIS, D2): the plans the re-setup
        # reads keep offsets within rows, one byte each (the kept weights' too), and int32
        # row pointers of the pairs and triples (8 bytes a row, which spare the numeric
        # setup two cumulative sums a level): 1.53 × A's bytes. With int32 positions they
        # held 5.1 ×, and all the setup keeps 11.0 × (7.5 ×; it shares A's values, and pads
        # the pairs and triples to one a row at least, 0.05 ×, so that a pattern of the
        # size compiles no numeric setup of its own; 7.35 × since R's values come from P's
        # by offsets of a byte in P's rows, not int32 positions). All with four weights a
        # row; the default's six (since 7 Dec) keep 1.75 × in plans, 8.66 × in all.
        A = matrices.poisson3d_matrix(16, dtype=jnp.float64)
        stats = sparse.describe(A)
        pattern, values = host(scipy_matrix(A))
        default = _setup.amg_config(parse_amgx_config(None))
        # Padded as a solve's (describe's) structure: its finest level too.
        structure = _hierarchy.build_structure(pattern, values, 1, default, pad_finest=True)
        assert structure.config == default and default.interpolator == "D2"
        plans = [level.interpolation for level in structure.arrays.levels]
        assert all(isinstance(plan, _classical.InterpolationArrays) for plan in plans)
        assert {plan.triple_offsets.dtype for plan in plans} == {np.dtype(np.uint8)}
        plan_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(plans))
        assert stats.bytes_kept["interpolation plans"] == plan_bytes
        assert plan_bytes < 1.8 * stats.matrix_bytes
        assert "finest values" not in stats.bytes_kept
        assert sum(stats.bytes_kept.values()) < 8.7 * stats.matrix_bytes

    def test_numeric_setup_is_differentiable_and_vmaps(self, x64):
        pattern, values = host(PROBLEMS["poisson2d"]())
        structure = _hierarchy.build_structure(pattern, values, 1, amg_config())

        @jax.jit
        def coarse_sum(v):
            numbers = _hierarchy.numeric_setup(structure, structure.arrays, v, None)
            return jnp.sum(numbers.levels[0].p.values ** 2) + jnp.sum(numbers.coarsest.a.values)

        v = jnp.asarray(values)
        jax.test_util.check_grads(coarse_sum, (v,), order=1, modes=["fwd", "rev"], eps=1e-4)
        batched = jax.vmap(coarse_sum)(jnp.stack([v, 2 * v]))
        np.testing.assert_allclose(batched, [coarse_sum(v), coarse_sum(2 * v)], rtol=1e-12)


class TestHostSetup:
    """The native host setup reproduces the NumPy one it replaced."""

    # Rows and nonzeros of every level's operator, and P's nonzeros, recorded from the
    # NumPy host setup (strength, weights and truncation in NumPy, the next level's values
    # by a compiled JAX product) before native code took its place. HMIS's row was
    # recorded again when its first pass moved to a bucket queue, whose ties go to the
    # point longest at its lambda rather than to the smallest index (the NumPy-era
    # hierarchy had 51 and 14 rows on its last levels). All with the strength threshold
    # of their time, 0.5, and its four interpolation weights a row, and the others with
    # PMIS, the default selector of their time.
    RECORDED = [
        ("poisson3d", {"selector": "PMIS", "interp_max_elements": 4}, np.float64,
         [512, 192, 42, 10], [3200, 3714, 1202, 100], [1466, 606, 102]),
        ("poisson2d", {"interpolator": "D1", "selector": "HMIS", "interp_max_elements": 4},
         np.float64, [400, 200, 50, 13], [1920, 1642, 376, 77], [960, 411, 86]),
        ("anisotropic", {"selector": "PMIS", "interp_max_elements": 4}, np.float32,
         [400, 176, 56, 21, 8],
         [3364, 1552, 850, 239, 48], [595, 449, 108, 35]),
        ("airfoil", {"selector": "PMIS", "interp_max_elements": 3,
                     "interp_truncation_factor": 0.2}, np.float64,
         [260, 78, 24, 9], [1682, 892, 302, 77], [565, 157, 40]),
    ]

    @pytest.mark.parametrize("problem, changes, dtype, rows, nnz, p_nnz", RECORDED)
    def test_hierarchy_is_the_numpy_setups(self, problem, changes, dtype, rows, nnz, p_nnz):
        pattern, values = host(PROBLEMS[problem]())
        structure = _hierarchy.build_structure(pattern, values.astype(dtype), 1,
                                               amg_config(strength_threshold=0.5, **changes))
        patterns = [level.a for level in structure.levels] + [structure.coarsest]
        assert [a.n_rows for a in patterns] == rows
        assert [a.nnz for a in patterns] == nnz
        assert [level.p.nnz for level in structure.levels] == p_nnz

    @pytest.mark.parametrize("selector", ["PMIS", "PMISC", "HMIS"])
    def test_the_pattern_alone_builds_a_graph_laplacians_hierarchy(self, selector):
        # Without concrete values (A traced under jit) the structure comes from the
        # pattern's graph Laplacian; for a matrix that is one but for its diagonal (the
        # Dirichlet Laplacian) every coupling is as strong, so each selector splits the
        # first level alike (the coarser ones are Galerkin products of other values).
        pattern, values = host(PROBLEMS["poisson2d"]())
        config = amg_config(selector=selector)
        first = [_hierarchy.build_structure(pattern, given, 1, config).levels[0]
                 for given in (None, values)]
        np.testing.assert_array_equal(first[0].interpolation.coarse, first[1].interpolation.coarse)
        for arrays in ("indptr", "indices"):
            np.testing.assert_array_equal(*(getattr(level.p, arrays) for level in first))

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    @pytest.mark.parametrize("interpolator", ["D1", "D2"])
    @pytest.mark.parametrize("problem", ["anisotropic", "airfoil"])
    def test_native_weights_are_the_numpy_formulas_bit_for_bit(self, problem, interpolator,
                                                               dtype):
        pattern, values = host(PROBLEMS[problem]())
        config = amg_config(interpolator=interpolator, max_levels=3)
        structure = _hierarchy.build_structure(pattern, values.astype(dtype), 1, config)
        values = values.astype(dtype)
        for level in structure.levels:  # the first level's values, then Galerkin products
            interpolation = level.interpolation
            native = _classical.host_values(interpolation, level.a, values)
            numpy = _classical.interpolation_values(
                np, _classical.host_arrays(interpolation), interpolation.full.nnz, values,
                level.a.row_ids, level.a.indices, values[level.diagonal], level.p.indptr)
            assert native.dtype == dtype
            np.testing.assert_array_equal(native, numpy)
            values = _products.galerkin_products(level.a, values, level.p, native, level.r,
                                                  level.r_from_p)[2]

    def test_host_galerkin_products_are_the_cpu_numeric_setups_bit_for_bit(self, x64):
        pattern, values = host(PROBLEMS["airfoil"]())
        # On the CPU: a GPU's XLA contracts the interpolation weights' arithmetic otherwise.
        with jax.default_device(jax.devices("cpu")[0]):
            structure = _hierarchy.build_structure(pattern, values, 1, amg_config())
            numbers = jax.jit(_hierarchy.numeric_setup, static_argnums=0)(
                structure, structure.arrays, jnp.asarray(values), None)
        operators = [level.a for level in numbers.levels] + [numbers.coarsest.a]
        for level, fine, coarse in zip(structure.levels, operators, operators[1:]):
            weights = _classical.host_values(level.interpolation, level.a,
                                             np.asarray(fine.values))
            a_p, galerkin, values = _products.galerkin_products(
                level.a, np.asarray(fine.values), level.p, weights, level.r, level.r_from_p)
            np.testing.assert_array_equal(values, coarse.values)
            for ours, theirs in ((a_p.c, level.a_p.c), (galerkin.c, level.galerkin.c)):
                np.testing.assert_array_equal(ours.indptr, theirs.indptr)
                np.testing.assert_array_equal(ours.indices, theirs.indices)

    @pytest.mark.parametrize("interpolator", ["D1", "D2"])
    def test_numeric_setup_weights_come_from_the_kernel_and_differentiate_as_the_formula(
            self, interpolator, x64):
        pattern, values = host(PROBLEMS["anisotropic"]())
        structure = _classical.level_structure(pattern, values,
                                               amg_config(interpolator=interpolator))
        arrays = _classical.device_arrays(structure)
        indices, indptr = jnp.asarray(pattern.indices), jnp.asarray(pattern.indptr)
        p_indptr = jnp.asarray(structure.p.indptr)

        def kernel(v):
            return _classical.device_values(arrays, structure, CsrArrays(v, indices, indptr),
                                            v[pattern.diagonal_positions()], p_indptr)

        def formula(v):
            return _classical.interpolation_values(jnp, arrays, structure.full.nnz, v,
                                                   jnp.asarray(pattern.row_ids), indices,
                                                   v[pattern.diagonal_positions()], p_indptr)

        v = jnp.asarray(values)
        assert "jaxsolve_sparse_interpolation_weights" in jax.jit(kernel).lower(v).as_text()
        np.testing.assert_array_equal(jax.jit(kernel)(v), structure.values)
        np.testing.assert_allclose(formula(v), structure.values, rtol=1e-13, atol=1e-15)
        tangent = jnp.asarray(np.random.default_rng(3).normal(size=values.shape))
        np.testing.assert_allclose(jax.jvp(kernel, (v,), (tangent,))[1],
                                   jax.jvp(formula, (v,), (tangent,))[1], rtol=1e-12,
                                   atol=1e-14)
        cotangent = jnp.asarray(np.random.default_rng(4).normal(size=structure.p.nnz))
        np.testing.assert_allclose(jax.vjp(kernel, v)[1](cotangent)[0],
                                   jax.vjp(formula, v)[1](cotangent)[0], rtol=1e-12,
                                   atol=1e-14)

    def test_truncation_leaves_rows_without_weights_empty(self):
        # Rows of P without weights (F points without strong couplings), the last one among
        # them, broke the NumPy truncation.
        A = scipy.sparse.block_diag([PROBLEMS["anisotropic"](), scipy.sparse.eye(2)])
        pattern, values = host(A)
        config = amg_config(interp_max_elements=3, interp_truncation_factor=0.2)
        structure = _classical.level_structure(pattern, values, config)
        assert np.all(np.diff(structure.full.indptr)[-2:] == 0)
        counts = np.diff(structure.p.indptr)
        assert counts.max() <= 3 and np.all(counts[np.diff(structure.full.indptr) == 0] == 0)


class TestAggressive:
    """Aggressive (A2) coarsening with multipass interpolation on the first levels."""

    def test_c_points_are_distance_two_independent_and_cover_the_first_pass(self):
        pattern, values = host(PROBLEMS["poisson3d"]())
        config = amg_config()
        standard = _classical.level_structure(pattern, values, config)
        aggressive = _classical.level_structure(pattern, values, config, aggressive=True)
        first, coarse = standard.coarse, aggressive.coarse
        assert np.all(first[coarse]) and 0 < coarse.sum() < 0.3 * first.sum()
        s = scipy_of(pattern, aggressive.strong.astype(float))
        s.eliminate_zeros()
        # S2 on the first pass's C points: paths of length one, or two through an F point.
        s2 = (s[first][:, first] + s[first][:, ~first] @ s[~first][:, first]).tocsr()
        s2.setdiag(0)
        s2.eliminate_zeros()
        on = coarse[first]
        both = (s2 + s2.T).tocsr()
        assert both[on][:, on].nnz == 0  # no two C points coupled in S2
        dropped = ~on & (np.diff(both.indptr) > 0)
        assert np.all(np.asarray(both[dropped][:, on].sum(axis=1)).ravel() > 0)

    @pytest.mark.parametrize("problem", ["poisson3d", "anisotropic", "airfoil"])
    def test_multipass_weights_keep_constants_and_match_under_jit(self, problem, x64):
        pattern, values = host(PROBLEMS[problem]())
        structure = _classical.level_structure(pattern, values,
                                               amg_config(interp_max_elements=-1),
                                               aggressive=True)
        assert isinstance(structure.plan, _classical_kernels.MultipassPattern)
        assert len(structure.plan.pass_counts) >= 2
        p = scipy_of(structure.p, structure.values)
        np.testing.assert_array_equal(p.toarray()[structure.coarse],
                                      np.eye(structure.n_coarse))
        # A point that strongly depends on an interpolated point is interpolated.
        interpolated = np.diff(structure.p.indptr) > 0
        strength = scipy_of(pattern, structure.strong.astype(float))
        assert np.all(interpolated | (strength @ interpolated.astype(float) == 0))
        assert interpolated.sum() > 2 * structure.n_coarse
        # Constants are kept where every row has zero sum: the graph Laplacian's (a pass's
        # rows sum to the row sums of the earlier passes' rows they combine).
        laplacian = _classical.surrogate_values(pattern)
        zero_sum = _classical.level_structure(pattern, laplacian, amg_config(), aggressive=True)
        interpolated = np.diff(zero_sum.p.indptr) > 0
        row_sums = np.asarray(scipy_of(zero_sum.p, zero_sum.values).sum(axis=1))
        assert interpolated.sum() > zero_sum.n_coarse
        np.testing.assert_allclose(row_sums[interpolated], 1, rtol=1e-12)
        arrays = _classical.device_arrays(structure)
        jitted = jax.jit(lambda v: _classical.interpolation_values(
            jnp, arrays, structure.full.nnz, v, jnp.asarray(pattern.row_ids),
            jnp.asarray(pattern.indices), v[pattern.diagonal_positions()]))(jnp.asarray(values))
        np.testing.assert_allclose(jitted, structure.values, rtol=1e-12, atol=1e-15)

    @pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
    @pytest.mark.parametrize("problem", ["poisson3d", "anisotropic", "airfoil"])
    def test_native_weights_are_the_numpy_formula(self, problem, dtype):
        pattern, values = host(PROBLEMS[problem]())
        values = values.astype(dtype)
        if np.iscomplexobj(values):  # a phase that strength and signs must see through
            values = values * np.exp(0.3j)
        structure = _classical.level_structure(pattern, values,
                                               amg_config(interp_max_elements=-1),
                                               aggressive=True)
        native = _classical_kernels.multipass_values(pattern.indptr, pattern.indices, values,
                                                     structure.plan, structure.coarse)
        numpy = _classical.interpolation_values(
            np, _classical.host_arrays(structure), structure.full.nnz, values,
            pattern.row_ids, pattern.indices, values[pattern.diagonal_positions()])
        assert native.dtype == dtype and len(structure.plan.pass_counts) >= 2
        if np.iscomplexobj(values):  # NumPy vectorizes complex products differently
            np.testing.assert_allclose(native, numpy, rtol=1e-13, atol=1e-15)
        else:
            np.testing.assert_array_equal(native, numpy)

    def test_native_weights_reject_a_plan_that_reads_ahead(self):
        pattern, values = host(PROBLEMS["poisson2d"]())
        structure = _classical.level_structure(pattern, values, amg_config(), aggressive=True)
        plan = structure.plan
        assert len(plan.pass_counts) >= 2
        # The first pass's first triple reads a weight of the last pass.
        sources = plan.triple_sources.copy()
        sources[0] = plan.triple_destinations[-1]
        with pytest.raises(ValueError, match="read a weight that no earlier pass formed"):
            _classical_kernels.multipass_values(pattern.indptr, pattern.indices, values,
                                                plan._replace(triple_sources=sources),
                                                structure.coarse)
        # The first triple reads an entry of A in the last row, not its own.
        entries = plan.triple_entries.copy()
        entries[0] = pattern.nnz - 1
        with pytest.raises(ValueError, match="an entry of A outside the row they write"):
            _classical_kernels.multipass_values(pattern.indptr, pattern.indices, values,
                                                plan._replace(triple_entries=entries),
                                                structure.coarse)
        # The last pass's triples in reverse: its rows of P out of order.
        last = plan.pass_counts[-1]
        destinations = plan.triple_destinations.copy()
        destinations[-last:] = destinations[-last:][::-1]
        with pytest.raises(ValueError, match="order of P's rows"):
            _classical_kernels.multipass_values(pattern.indptr, pattern.indices, values,
                                                plan._replace(triple_destinations=destinations),
                                                structure.coarse)
        negative = plan.pass_counts.copy()  # the same sum, a pass of -1 triples
        negative[0], negative[-1] = -1, negative[-1] + negative[0] + 1
        for counts in (plan.pass_counts[:-1], negative):  # triples left over; a negative
            with pytest.raises(ValueError, match="does not fit"):
                _classical_kernels.multipass_values(pattern.indptr, pattern.indices, values,
                                                    plan._replace(pass_counts=counts),
                                                    structure.coarse)

    def test_device_arrays_rebuild_the_sources_destinations_and_kept_positions(self):
        pattern, values = host(PROBLEMS["poisson3d"]())
        structure = _classical.level_structure(pattern, values, amg_config(), aggressive=True)
        assert structure.full.nnz / 2 < structure.keep.shape[0] < structure.full.nnz
        arrays = _classical.host_arrays(structure)
        plan = structure.plan
        np.testing.assert_array_equal(
            np.unpackbits(arrays.interpolatory_bits, count=pattern.nnz, bitorder="little"),
            plan.interpolatory)
        for xp in (np, jnp):
            sources = [_classical._multipass_sources(xp, xp.asarray(entries),
                                                     xp.asarray(pattern.indices),
                                                     xp.asarray(arrays.full_indptr))
                       for entries, _ in arrays.passes]
            np.testing.assert_array_equal(np.concatenate(sources), plan.triple_sources)
            destinations = [_classical._multipass_destinations(
                xp, xp.asarray(entries), xp.asarray(targets), xp.asarray(pattern.row_ids),
                xp.asarray(arrays.full_indptr), structure.full.nnz)
                for entries, targets in arrays.passes]
            np.testing.assert_array_equal(np.concatenate(destinations),
                                          plan.triple_destinations)
            np.testing.assert_array_equal(
                _classical._kept_positions(xp, xp.asarray(arrays.dropped), structure.full.nnz),
                structure.keep)
        # What the device keeps instead: the dropped positions, a bit an entry, a byte a
        # destination; and the kept positions where truncation drops most.
        assert arrays.keep is None and arrays.interpolatory_bits.nbytes * 8 < pattern.nnz + 8
        assert {targets.dtype for _, targets in arrays.passes} == {np.dtype(np.uint8)}
        heavy = dataclasses.replace(structure, keep=structure.keep[:structure.full.nnz // 3])
        np.testing.assert_array_equal(_classical.host_arrays(heavy).keep, heavy.keep)
        assert _classical.host_arrays(heavy).dropped is None

    def test_first_coarse_level_is_much_smaller(self):
        A = matrices.poisson3d_matrix(12)
        config = classical(aggressive_levels=1)
        standard, aggressive = (sparse.describe(A, c) for c in (classical(), config))
        assert aggressive.rows[1] < 0.3 * standard.rows[1]
        assert aggressive.operator_complexity < 0.7 * standard.operator_complexity

    def test_pmis_in_color_keeps_hmis_iterations_at_less_complexity(self, x64):
        """3D Poisson with one aggressive level: random PMIS's sparse first pass costs
        iterations; PMISC's checkerboard keeps HMIS's count with a smaller hierarchy."""
        A = scipy_matrix(matrices.poisson3d_matrix(24, dtype=np.float64))
        b = matrices.rhs_random(A.shape[0], seed=0, dtype=np.float64)
        iterations, complexity = {}, {}
        for selector in ("PMIS", "PMISC", "HMIS"):
            # The smoother fixed (AmgX's ω = 0.9), so that only the selector differs.
            config = {**classical(selector=selector, aggressive_levels=1,
                                  relaxation_factor=0.9), "tolerance": 1e-8}
            x, info = sparse.solve(A, b, config=config)
            assert status(info) == "SUCCESS"
            iterations[selector] = int(info.iterations)
            complexity[selector] = sparse.describe(A, config).operator_complexity
        assert iterations["PMISC"] <= iterations["HMIS"] < iterations["PMIS"], iterations
        assert complexity["PMISC"] < complexity["HMIS"], complexity

    @pytest.mark.parametrize("problem", ["poisson3d", "anisotropic"])
    def test_pcg_converges(self, problem, x64):
        A = (scipy_matrix(matrices.poisson3d_matrix(12, dtype=np.float64))
             if problem == "poisson3d" else PROBLEMS[problem]())
        b = matrices.rhs_random(A.shape[0], seed=1, dtype=np.float64)
        iterations = {}
        for levels in (0, 1):
            x, info = sparse.solve(A, b, config={**classical(aggressive_levels=levels),
                                                 "tolerance": 1e-8})
            assert status(info) == "SUCCESS"
            assert relative_residual(A, x, b) <= 1e-7
            iterations[levels] = int(info.iterations)
        assert iterations[1] <= 4 * iterations[0], iterations

    def test_numeric_resetup_inside_jit(self, x64):
        sparse.clear_cache()
        A = sparse.as_csr(matrices.poisson3d_matrix(10, dtype=np.float64))
        b = matrices.rhs_ones(1000, dtype=np.float64)
        config = {**classical(aggressive_levels=2), "tolerance": 1e-10}
        x, eager = sparse.solve(A, b, config=config)
        solve = jax.jit(lambda v, b: sparse.solve(A.with_values(v), b, config=config))
        x1, info1 = solve(A.values, b)
        assert int(info1.iterations) == int(eager.iterations)
        np.testing.assert_allclose(x1, x, rtol=1e-10)
        x2, _ = solve(2 * A.values, b)  # new values, same structure: re-set up inside
        np.testing.assert_allclose(x2, x / 2, rtol=1e-8)
        assert sparse.cache_info().misses == 1

    def test_config(self):
        assert amg_config(aggressive_levels=2).aggressive_levels == 2
        assert amg_config().aggressive_levels == 0
        aggregation = parse_amgx_config({"preconditioner": {
            "algorithm": "AGGREGATION", "aggressive_levels": 1}}).preconditioner.amg
        assert aggregation.aggressive_levels is None
        with pytest.raises(ValueError, match="aggressive_levels"):
            amg_config(aggressive_levels=-1)
        assert amg_config().aggressive_interpolator == "MULTIPASS"
        assert amg_config(aggressive_interpolator="D1").aggressive_interpolator == "D1"
        assert aggregation.aggressive_interpolator is None
        with pytest.raises(ValueError, match="aggressive_interpolator 'D3' is not an AmgX"
                                             " aggressive_interpolator.*MULTIPASS, D2, D1"):
            amg_config(aggressive_levels=1, aggressive_interpolator="D3")
        with pytest.raises(TypeError, match="aggressive_interpolator must be a name"):
            amg_config(aggressive_interpolator=2)
        # written back as AmgX keys, and read again
        config = parse_amgx_config(classical(aggressive_levels=1, aggressive_interpolator="D2"))
        keys = config.preconditioner.amg._amgx_keys("p")
        assert keys["aggressive_interpolator"] == "D2"
        assert parse_amgx_config({"preconditioner": {"solver": "AMG", **keys}}
                                 ).preconditioner.amg == config.preconditioner.amg


class TestTwoStage:
    """Aggressive levels of two-stage interpolation (``aggressive_interpolator`` D2, D1)."""

    @pytest.mark.parametrize("interpolator", ["D2", "D1"])
    @pytest.mark.parametrize("problem", ["poisson3d", "anisotropic"])
    def test_product_of_two_ordinary_stages_truncated(self, problem, interpolator, x64):
        pattern, values = host(PROBLEMS[problem]())
        # Generic values: the Galerkin operator of the Laplacian's holds exact zeros (and
        # sums of them), where the weights' sign tests make finite differences meaningless.
        values = values * (1 + 0.1 * np.random.default_rng(1).random(values.shape[0]))
        config = amg_config(aggressive_interpolator=interpolator, interp_max_elements=3)
        structure = _classical.level_structure(pattern, values, config, aggressive=True)
        plan = structure.plan
        assert isinstance(plan, _classical.TwoStagePlan)
        # The stages are ordinary levels of the stage's interpolator: the first on A,
        # the second on the first's Galerkin operator, whose C points it keeps.
        stage = dataclasses.replace(config, interpolator=interpolator)
        first = _classical.level_structure(pattern, values, stage)
        np.testing.assert_array_equal(plan.first.coarse, first.coarse)
        p1 = scipy_of(first.p, first.values)
        a = scipy_of(pattern, values)
        a1 = (p1.T @ a @ p1).toarray()
        r, r_from_p = first.p.transposed()
        a1_values = _products.galerkin_products(pattern, values, first.p, first.values, r,
                                                r_from_p)[2]
        np.testing.assert_allclose(scipy_of(plan.galerkin.c, a1_values).toarray(), a1,
                                   rtol=1e-12, atol=1e-12)
        assert np.all(first.coarse[structure.coarse])
        np.testing.assert_array_equal(structure.coarse[first.coarse], plan.second.coarse)
        assert 0 < structure.n_coarse < 0.5 * first.n_coarse
        # P = P1 P2, truncated to interp_max_elements (3) a row, rows keeping their sums.
        full = (p1 @ scipy_of(plan.second.p, plan.second.values)).toarray()
        p = scipy_of(structure.p, structure.values).toarray()
        assert np.count_nonzero(full, axis=1).max() > 3 >= np.count_nonzero(p, axis=1).max()
        np.testing.assert_allclose(p.sum(axis=1), full.sum(axis=1), rtol=1e-12, atol=1e-14)
        kept = p != 0
        np.testing.assert_array_equal(p[structure.coarse], np.eye(structure.n_coarse))
        assert np.all(full[kept] != 0)
        # Under jit, from A's values: the host's weights; differentiable in them.
        arrays = _classical.device_arrays(structure)
        a_arrays = pattern.on_device(jnp.asarray(values))
        p_indptr = jnp.asarray(structure.p.indptr)

        def weights(v):
            return _classical.device_values(arrays, structure, a_arrays._replace(values=v),
                                            v[jnp.asarray(pattern.diagonal_positions())],
                                            p_indptr)

        v = jnp.asarray(values)
        np.testing.assert_allclose(jax.jit(weights)(v), structure.values, rtol=1e-12,
                                   atol=1e-14)
        direction = jnp.asarray(np.random.default_rng(0).standard_normal(v.shape[0]))
        _, tangent = jax.jvp(jax.jit(weights), (v,), (direction,))
        step = 1e-6
        difference = (weights(v + step * direction) - weights(v - step * direction)) / (2 * step)
        np.testing.assert_allclose(tangent, difference, rtol=1e-5, atol=1e-7)

    def test_block_system_splits_both_stages_by_nodes(self, x64):
        A, _ = matrices.elasticity_matrix_2d(12)
        pattern, values = host(scipy_matrix(A))
        config = dataclasses.replace(amg_config(aggressive_interpolator="D2"), block_dim=2)
        structure = _classical.level_structure(pattern, values, config, aggressive=True,
                                               splitter=_blocks.classical_splitting)
        # both components of a node are C points together, at both stages
        nodes = structure.coarse.reshape(-1, 2)
        assert np.all(nodes[:, 0] == nodes[:, 1]) and 0 < structure.n_coarse
        second = structure.plan.second.coarse.reshape(-1, 2)
        assert np.all(second[:, 0] == second[:, 1])

    def test_converges_in_far_fewer_iterations_than_multipass(self, x64):
        """Multipass interpolates along the strong couplings' long paths, which on
        rotated anisotropic diffusion (ε = 1e-3, θ = π/8) miss the direction of strong
        coupling; two D2 stages keep it (on the 256² suite problem 10 against 39)."""
        stencil = pyamg.gallery.diffusion_stencil_2d(epsilon=1e-3, theta=np.pi / 8, type="FD")
        A = scipy.sparse.csr_array(pyamg.gallery.stencil_grid(stencil, (64, 64), format="csr"))
        b = matrices.rhs_random(A.shape[0], seed=0, dtype=np.float64)
        iterations, shapes = {}, {}
        for interpolator in ("MULTIPASS", "D2"):
            config = {**classical(selector="PMISC", aggressive_levels=1,
                                  aggressive_interpolator=interpolator), "tolerance": 1e-8}
            x, info = sparse.solve(A, b, config=config)
            assert status(info) == "SUCCESS"
            assert relative_residual(A, x, b) <= 1e-7
            iterations[interpolator] = int(info.iterations)
            shapes[interpolator] = sparse.describe(A, config).rows
        assert iterations["D2"] <= 0.7 * iterations["MULTIPASS"], iterations
        # with a first coarse level as small: C2 of C1, a quarter of an ordinary level's
        standard = sparse.describe(A, classical(selector="PMISC")).rows
        assert shapes["D2"][1] <= min(shapes["MULTIPASS"][1], 0.3 * standard[1]), (
            shapes, standard)

    def test_jit_vmap_and_grad_through_a_two_stage_level(self, x64):
        sparse.clear_cache()
        A = sparse.as_csr(matrices.poisson3d_matrix(8, dtype=np.float64))
        n = A.shape[0]
        b = matrices.rhs_random(n, seed=2, dtype=np.float64)
        # BiCGSTAB: PCG's derivative in A's values is that of a symmetric A's
        config = {**classical(aggressive_levels=1, aggressive_interpolator="D2",
                              min_coarse_rows=8), "solver": "PBICGSTAB", "tolerance": 1e-11}
        x, eager = sparse.solve(A, b, config=config)
        assert status(eager) == "SUCCESS"
        assert sparse.describe(A, config).rows[1] < 0.3 * n  # an aggressive first level
        solve = jax.jit(lambda v, b: sparse.solve(A.with_values(v), b, config=config)[0])
        np.testing.assert_allclose(solve(A.values, b), x, rtol=1e-9)
        # new values on the structure, set up inside the trace
        np.testing.assert_allclose(solve(2 * A.values, b), x / 2, rtol=1e-8)
        xs = jax.vmap(lambda s: solve(s * A.values, b))(jnp.array([1.0, 4.0]))
        np.testing.assert_allclose(xs[1], x / 4, rtol=1e-8)
        weights = jnp.linspace(-1.0, 1.0, n)
        rows = A.row_ids

        def loss(values, b):
            return jnp.sum(weights * solve(values, b) ** 3)

        def dense_loss(values, b):
            matrix = jnp.zeros((n, n)).at[rows, A.indices].add(values)
            return jnp.sum(weights * jnp.linalg.solve(matrix, b) ** 3)

        got = jax.jit(jax.grad(loss, argnums=(0, 1)))(A.values, b)
        want = jax.grad(dense_loss, argnums=(0, 1))(A.values, b)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9)


def status(info) -> str:
    return sparse.Status(int(info.status)).name


def relative_residual(A, x, b) -> float:
    A = scipy_matrix(A).astype(np.float64)
    return float(np.linalg.norm(A @ np.asarray(x, np.float64) - np.asarray(b, np.float64))
                 / np.linalg.norm(np.asarray(b, np.float64)))


class TestSolve:
    @pytest.mark.parametrize("dtype, tolerance", [(np.float32, 1e-5), (np.float64, 1e-10)])
    @pytest.mark.parametrize("problem, changes", [
        ("poisson2d", {}),
        ("poisson2d", {"interpolator": "D1", "selector": "HMIS"}),
        ("poisson3d", {"interp_max_elements": 4}),
        ("anisotropic", {"selector": "HMIS"}),
        ("convection", {}),
        ("airfoil", {"interpolator": "D1"}),
    ])
    def test_solves_the_gallery(self, request, dtype, tolerance, problem, changes):
        if dtype == np.float64:
            request.getfixturevalue("x64")
        if problem == "convection":
            A = matrices.convection_diffusion_matrix_2d(20, peclet=20.0, dtype=dtype)
            config = {**classical(**changes), "solver": "PBICGSTAB"}
        else:
            A = PROBLEMS[problem]().astype(dtype)
            config = classical(**changes)
        n = A.shape[0]
        b = matrices.rhs_random(n, seed=1, dtype=dtype)
        x, info = sparse.solve(A, b, config={**config, "tolerance": tolerance})
        assert status(info) == "SUCCESS", int(info.iterations)
        assert x.dtype == dtype
        assert int(info.iterations) <= (25 if problem != "convection" else 40)
        assert relative_residual(A, x, b) <= 10 * tolerance
        assert len(sparse.describe(A, config).rows) >= 2

    def test_classical_beats_jacobi_pcg_on_poisson(self, x64):
        A = matrices.poisson_matrix(32, dtype=np.float64)
        b = matrices.rhs_ones(32 * 32, dtype=np.float64)
        _, amg = sparse.solve(A, b, config={**classical(), "tolerance": 1e-8})
        _, jacobi = sparse.solve(A, b, config={"solver": "PCG", "tolerance": 1e-8,
                                               "preconditioner": "BLOCK_JACOBI"})
        assert 3 * int(amg.iterations) < int(jacobi.iterations)

    def test_jit_with_traced_values_reuses_the_structure(self, x64):
        sparse.clear_cache()
        A = sparse.as_csr(matrices.poisson_matrix(16, dtype=np.float64))
        b = matrices.rhs_ones(256, dtype=np.float64)
        config = {**classical(), "tolerance": 1e-10}
        x, eager = sparse.solve(A, b, config=config)
        solve = jax.jit(lambda v, b: sparse.solve(A.with_values(v), b, config=config))
        x1, info1 = solve(A.values, b)
        assert int(info1.iterations) == int(eager.iterations)
        x2, _ = solve(2 * A.values, b)  # the numeric re-setup runs inside the program
        np.testing.assert_allclose(x2, x / 2, rtol=1e-8)
        assert sparse.cache_info().misses == 1

    def test_jit_without_concrete_values_builds_from_the_pattern(self):
        sparse.clear_cache()
        A = sparse.as_csr(matrices.poisson_matrix(16))
        b = matrices.rhs_ones(256)
        x, info = jax.jit(lambda v, b: sparse.solve(A.with_values(v), b, config=classical()))(
            A.values, b)
        assert status(info) == "SUCCESS"
        assert relative_residual(A, x, b) <= 1e-5

    def test_vmap_over_values_and_grad(self, x64):
        A = sparse.as_csr(matrices.convection_diffusion_matrix_2d(8, peclet=5.0, dtype=np.float64))
        b = matrices.rhs_random(64, seed=0, dtype=np.float64)
        config = {**classical(min_coarse_rows=8), "solver": "PBICGSTAB", "tolerance": 1e-12}
        scales = jnp.array([1.0, 3.0])
        xs, _ = jax.vmap(lambda s: sparse.solve(A.with_values(s * A.values), b,
                                                config=config))(scales)
        x = scipy.sparse.linalg.spsolve(
            scipy.sparse.csr_array((A.values, A.indices, A.indptr), shape=A.shape), np.asarray(b))
        np.testing.assert_allclose(xs, x[None] / scales[:, None], rtol=1e-8)
        weights = jnp.linspace(-1.0, 1.0, 64)
        rows = A.row_ids

        def loss(values, b):
            return jnp.sum(weights * sparse.solve(A.with_values(values), b, config=config)[0] ** 3)

        def dense_loss(values, b):
            matrix = jnp.zeros((64, 64)).at[rows, A.indices].add(values)
            return jnp.sum(weights * jnp.linalg.solve(matrix, b) ** 3)

        got = jax.jit(jax.grad(loss, argnums=(0, 1)))(A.values, b)
        want = jax.grad(dense_loss, argnums=(0, 1))(A.values, b)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9)

    def test_near_nullspace_is_refused(self):
        A, modes = matrices.elasticity_matrix_2d(4)
        with pytest.raises(ValueError, match="near_nullspace is smoothed aggregation.s; classical AMG has none"):
            sparse.solve(A, jnp.ones(A.shape[0]), config=classical(), near_nullspace=modes)
