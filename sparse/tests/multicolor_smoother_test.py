"""Tests of the multicolor smoothers (MULTICOLOR_GS, MULTICOLOR_DILU) and their coloring."""

import functools

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

from jaxsolve import sparse
from jaxsolve.sparse import _coloring, _multicolor, _relaxation
from jaxsolve.sparse._config import RelaxationConfig
from jaxsolve.sparse._csr_arrays import CsrArrays, CsrStructure


def _arrays(matrix):
    csr = scipy.sparse.csr_array(matrix)
    csr.sort_indices()
    return CsrArrays(jnp.asarray(csr.data), jnp.asarray(csr.indices, jnp.int32),
                     jnp.asarray(csr.indptr, jnp.int32))


def _random_matrix(n, density, seed, symmetric_pattern=False):
    rng = np.random.default_rng(seed)
    mask = rng.random((n, n)) < density
    if symmetric_pattern:
        mask |= mask.T
    values = np.where(mask, rng.uniform(-1, 0, (n, n)), 0)
    np.fill_diagonal(values, 0)
    values += np.diag(np.abs(values).sum(axis=1) + 1)  # diagonally dominant
    return values


def _ordering(matrix, dilu=False):
    a = _arrays(matrix)
    pattern = CsrStructure(np.asarray(a.indptr), np.asarray(a.indices), matrix.shape[1])
    return a, _multicolor.multicolor_ordering(pattern, dilu)


def _count_equations(jaxpr):
    """The equations of a jaxpr, those of the jaxprs inside its equations included."""
    count = 0
    for eqn in jaxpr.eqns:
        count += 1
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", value)
            if hasattr(inner, "eqns"):
                count += _count_equations(inner)
    return count


def _loops(jaxpr):
    """The loops of a jaxpr, those inside its equations included."""
    return sum((eqn.primitive.name in ("while", "scan"))
               + sum(_loops(inner) for inner in jax.extend.core.jaxprs_in_params(eqn.params))
               for eqn in jaxpr.eqns)


def _products(fn, *args):
    """``(entries, rows)`` of the native CSR products ``fn`` runs, in order: the sizes of
    their index arrays and their rows."""
    sizes = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.params.get("target_name") == "jaxsolve_sparse_csr_matvec":
                sizes.append((eqn.invars[1].aval.shape[0], eqn.invars[2].aval.shape[0] - 1))
            for value in eqn.params.values():
                inner = getattr(value, "jaxpr", value)
                if hasattr(inner, "eqns"):
                    walk(inner)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return sizes


def _sliced_sizes(fn, *args):
    """The sizes of the arrays that ``fn``'s dynamic slices (its loops' included) read."""
    sizes = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dynamic_slice":
                sizes.append(eqn.invars[0].aval.shape[0])
            for inner in jax.extend.core.jaxprs_in_params(eqn.params):
                walk(inner)

    walk(jax.make_jaxpr(fn)(*args).jaxpr)
    return sizes


class TestMulticolorOrdering:
    @pytest.mark.parametrize("dilu", [False, True])
    @pytest.mark.parametrize("seed", range(3))
    def test_ordering_splits_a_into_color_blocks(self, x64, seed, dilu):
        """A[order][:, order] = L + D + U, blocks per color, from a valid coloring."""
        matrix = _random_matrix(40, 0.15, seed, symmetric_pattern=seed == 0)
        a, ordering = _ordering(matrix, dilu)
        assert _coloring.is_valid_coloring(matrix != 0, ordering.colors, 1)
        values = np.asarray(a.values)
        permuted = matrix[ordering.order][:, ordering.order]
        rebuilt = np.diag(np.diag(permuted))
        for block, positions in ((ordering.lower, ordering.lower_positions),
                                 (ordering.upper, ordering.upper_positions)):
            rebuilt[block.row_ids, block.indices] += values[positions]
        np.testing.assert_array_equal(rebuilt, permuted)
        starts = ordering.color_starts
        assert starts[0] == 0 and starts[-1] == 40
        for c in range(ordering.n_colors):  # each color a contiguous range of rows
            assert np.all(ordering.colors[ordering.order[starts[c]:starts[c + 1]]] == c)
        color = np.repeat(np.arange(ordering.n_colors), np.diff(starts))
        assert np.all(color[ordering.lower.indices] < color[ordering.lower.row_ids])
        assert np.all(color[ordering.upper.indices] > color[ordering.upper.row_ids])
        if dilu:  # each L entry a_ij knows where a_ji is stored (-1: nowhere)
            rows = np.repeat(np.arange(40), np.diff(np.asarray(a.indptr)))
            position, transposed = ordering.lower_positions, ordering.transposed
            i, j = rows[position], np.asarray(a.indices)[position]
            np.testing.assert_array_equal(transposed < 0, matrix[j, i] == 0)
            np.testing.assert_array_equal(values[transposed[transposed >= 0]],
                                          matrix[j, i][transposed >= 0])
        else:
            assert ordering.transposed is None

    def test_chunks_cut_each_color_into_ranges_of_at_most_chunk_rows(self):
        _, ordering = _ordering(_random_matrix(60, 0.2, 3))
        rows = ordering.default_chunk_rows()
        assert rows == -(-60 // ordering.n_colors)
        starts, counts = ordering.chunks(rows)
        assert np.all((counts > 0) & (counts <= rows)) and counts.sum() == 60
        assert starts.size <= 2 * ordering.n_colors  # the mean color's rows
        covered = np.concatenate([np.arange(s, s + c) for s, c in zip(starts, counts)])
        np.testing.assert_array_equal(covered, np.arange(60))
        color = np.repeat(np.arange(ordering.n_colors), np.diff(ordering.color_starts))
        for s, c in zip(starts, counts, strict=True):
            assert np.all(color[s:s + c] == color[s])  # one color per chunk

    def test_stencil_colors_are_the_optimum(self):
        """Host DSATUR: 2 colors on the 5-point stencil (the device coloring gave 5)."""
        _, ordering = _ordering(np.asarray(sparse.matrices.poisson_matrix(16).todense()))
        assert ordering.n_colors == 2


class TestMulticolorRelaxation:
    def _data(self, matrix, solver, **extra):
        a, ordering = _ordering(matrix, solver == "MULTICOLOR_DILU")
        config = RelaxationConfig(solver=solver, relaxation_factor=1.0,
                                  chebyshev_polynomial_order=None, **extra)
        data = _relaxation.relaxation_data(a, jnp.asarray(np.diag(matrix)), config,
                                           ordering.on_device())
        return a, config, data, ordering

    def test_multicolor_gs_sweep_matches_reference(self, x64):
        matrix = _random_matrix(30, 0.2, 0)
        a, config, data, ordering = self._data(matrix, "MULTICOLOR_GS", symmetric_gs=True)
        b = np.arange(30.0)
        x0 = np.linspace(-1, 1, 30)
        got = _relaxation.relax(a, data, config, jnp.asarray(b), jnp.asarray(x0), 2)
        colors = ordering.colors
        x = x0.copy()
        for c in [*range(colors.max() + 1), *range(colors.max(), -1, -1)] * 2:
            mine = colors == c
            x[mine] += ((b - matrix @ x) / np.diag(matrix))[mine]
        np.testing.assert_allclose(np.asarray(got), x, rtol=1e-12)
        # From x = 0, the skipped products change nothing.
        from_zero = _relaxation.relax(a, data, config, jnp.asarray(b), None, 1)
        np.testing.assert_allclose(
            np.asarray(from_zero),
            np.asarray(_relaxation.relax(a, data, config, jnp.asarray(b),
                                         jnp.zeros(30), 1)), rtol=1e-12)

    def test_backward_gs_sweep_visits_the_colors_in_reverse(self, x64):
        """A cycle's post-smoothing: a forward-only MULTICOLOR_GS sweeps the colors last to
        first, the adjoint of its forward sweep."""
        matrix = _random_matrix(30, 0.2, 0)
        a, config, data, ordering = self._data(matrix, "MULTICOLOR_GS")
        assert ordering.n_colors > 2
        b = np.arange(30.0)
        for x0 in (None, np.linspace(-1, 1, 30)):
            got = _relaxation.relax(a, data, config, jnp.asarray(b),
                                    None if x0 is None else jnp.asarray(x0), 2, backward=True)
            x = np.zeros(30) if x0 is None else x0.copy()
            for c in [*range(ordering.n_colors - 1, -1, -1)] * 2:
                mine = ordering.colors == c
                x[mine] += ((b - matrix @ x) / np.diag(matrix))[mine]
            np.testing.assert_allclose(np.asarray(got), x, rtol=1e-12)

    def test_multicolor_gs_sweep_costs_one_product(self):
        """Red-black on the 5-point stencil: two chunks, each multiplying its own rows of L
        and U only (a sweep reads L and U once, not A once per color); from x = 0 the
        first pass skips U."""
        matrix = np.asarray(sparse.matrices.poisson_matrix(12).todense())
        a, config, data, ordering = self._data(matrix, "MULTICOLOR_GS", symmetric_gs=True)
        sweep = functools.partial(_relaxation.relax, a, data, config)
        b = jnp.ones(144)
        off_diagonal = int(np.count_nonzero(matrix)) - 144
        multicolor = data.multicolor
        assert multicolor.chunk_starts.shape == (2,) and multicolor.chunk_rows == 72
        # One product with L and one with U (in the body of the loop over both passes'
        # chunks), each over a chunk's rows of the whole L or U: half the off-diagonal
        # entries each.
        lower = upper = (off_diagonal // 2, 72)
        assert _products(lambda b, x: sweep(b, x, 1), b, b) == [lower, upper]
        assert _products(lambda b: sweep(b, None, 1), b) == [lower, lower, upper]  # from
        # zero, the first pass multiplies L only

    def test_a_sweep_copies_no_entries(self):
        """A chunk's products take its window of L's and U's row pointers into their
        whole entries: the only arrays sliced are vectors and row pointers (copying a
        window of the entries out compiled two kernels more a product)."""
        matrix = _random_matrix(60, 0.15, 5)
        a, config, data, ordering = self._data(matrix, "MULTICOLOR_GS")
        assert ordering.n_colors > 2
        multicolor = data.multicolor
        sliced = _sliced_sizes(lambda b, x: _relaxation.relax(a, data, config, b, x, 1),
                               jnp.ones(60), jnp.ones(60))
        assert set(sliced) <= {60 + multicolor.chunk_rows, multicolor.lower.indptr.shape[0],
                               multicolor.chunk_starts.shape[0]}  # vectors, pointers, k
        assert _products(lambda b, x: _relaxation.relax(a, data, config, b, x, 1),
                         jnp.ones(60), jnp.ones(60)) == [
            (ordering.lower.nnz, multicolor.chunk_rows), (ordering.upper.nnz,
                                                          multicolor.chunk_rows)]

    def test_sweep_derivative_is_the_sweep_of_the_tangent(self, x64):
        """A sweep is affine in x: its derivative in direction dx is the sweep of dx with
        b = 0. The chunks' products take row pointers that start past 0, which the
        product's derivative reads as rows of the window only."""
        matrix = _random_matrix(40, 0.15, 1)
        a, config, data, ordering = self._data(matrix, "MULTICOLOR_GS", symmetric_gs=True)
        assert ordering.n_colors > 2
        b, x, dx = np.arange(40.0), np.linspace(-1, 1, 40), np.cos(np.arange(40.0))
        _, tangent = jax.jvp(lambda x: _relaxation.relax(a, data, config, jnp.asarray(b),
                                                         x, 1), (jnp.asarray(x),),
                             (jnp.asarray(dx),))
        want = _relaxation.relax(a, data, config, jnp.zeros(40), jnp.asarray(dx), 1)
        np.testing.assert_allclose(np.asarray(tangent), np.asarray(want), rtol=1e-12,
                                   atol=1e-14)

    @pytest.mark.parametrize("symmetric", [False, True])
    def test_sweeps_compile_to_one_loop(self, x64, symmetric):
        """Several sweeps, forward and backward, are one loop over their passes' chunks
        (one loop each compiled a loop's kernels each, per level); from x = 0 the first
        pass, which skips the colors not visited yet, is a loop of its own."""
        matrix = _random_matrix(40, 0.15, 1)
        a, config, data, ordering = self._data(matrix, "MULTICOLOR_GS", symmetric_gs=symmetric)
        assert ordering.n_colors > 2
        b, x0 = np.arange(40.0), np.linspace(-1, 1, 40)
        for start, loops in ((x0, 1), (None, 2)):
            def sweeps(b, x):
                return _relaxation.relax(a, data, config, b, x, 3, backward=True)

            args = (jnp.asarray(b),) + (() if start is None else (jnp.asarray(start),))
            jaxpr = jax.make_jaxpr(lambda *v: sweeps(v[0], v[1] if len(v) > 1 else None))(
                *args).jaxpr
            assert _loops(jaxpr) == loops
            got = sweeps(*args) if start is not None else sweeps(args[0], None)
            x = np.zeros(40) if start is None else start.copy()
            colors = list(range(ordering.n_colors))
            passes = (colors + colors[::-1]) * 3 if symmetric else colors[::-1] * 3
            for c in passes:
                mine = ordering.colors == c
                x[mine] += ((b - matrix @ x) / np.diag(matrix))[mine]
            np.testing.assert_allclose(np.asarray(got), x, rtol=1e-12)

    @pytest.mark.parametrize("solver", ["MULTICOLOR_GS", "MULTICOLOR_DILU"])
    def test_a_sweep_compiles_to_one_loop_whatever_the_colors(self, solver):
        """The sweep's program does not grow with the number of colors (unrolled per color,
        a 20-color level compiled one program per color): the same operations for 2
        colors and for 20, and a sweep's work is a small multiple of a product with A."""
        sizes = {}
        for name, matrix in (("poisson", sparse.matrices.poisson_matrix(12).todense()),
                             ("random", _random_matrix(144, 0.12, 4))):
            matrix = np.asarray(matrix)
            a, config, data, ordering = self._data(matrix, solver)
            multicolor = data.multicolor
            chunks = multicolor.chunk_starts.shape[0]
            assert chunks * multicolor.chunk_rows <= 2 * 144  # and L and U once

            jaxpr = jax.make_jaxpr(lambda b, x: _relaxation.relax(a, data, config, b, x, 1))(
                jnp.ones(144), jnp.ones(144))
            sizes[name] = (ordering.n_colors, _count_equations(jaxpr.jaxpr))
        assert sizes["poisson"][0] == 2 and sizes["random"][0] >= 10
        assert sizes["poisson"][1] == sizes["random"][1]

    @pytest.mark.parametrize("symmetric_pattern", [True, False])
    def test_multicolor_dilu_is_the_dilu_factorization(self, x64, symmetric_pattern):
        matrix = _random_matrix(30, 0.15, 1, symmetric_pattern)
        a, config, data, ordering = self._data(matrix, "MULTICOLOR_DILU")
        colors = ordering.colors
        earlier = colors[None, :] < colors[:, None]
        lower = np.where(earlier & (matrix != 0), matrix, 0)
        upper = np.where(earlier.T & (matrix != 0), matrix, 0)
        e = np.diag(1 / np.asarray(data.scale)[np.argsort(ordering.order)])
        m = (e + lower) @ np.linalg.inv(e) @ (e + upper)
        np.testing.assert_allclose(np.diag(m), np.diag(matrix), rtol=1e-10)  # diag(M) = diag(A)
        r = np.cos(np.arange(30.0))
        x = np.linspace(-1, 1, 30)
        got = _relaxation.relax(a, data, config, jnp.asarray(r), jnp.asarray(x), 1)
        np.testing.assert_allclose(np.asarray(got), x + np.linalg.solve(m, r - matrix @ x),
                                   rtol=1e-10)
        # The residual's product with A, then a chunk's rows of L and of U per chunk.
        sizes = _products(lambda r, x: _relaxation.relax(a, data, config, r, x, 1),
                          jnp.asarray(r), jnp.asarray(x))
        chunk_rows = data.multicolor.chunk_rows
        assert sizes == [(int(np.count_nonzero(matrix)), 30), (ordering.lower.nnz, chunk_rows),
                         (ordering.upper.nnz, chunk_rows)]


class TestMulticolorPadding:
    @pytest.mark.parametrize("solver", ["MULTICOLOR_GS", "MULTICOLOR_DILU"])
    def test_padded_data_sweeps_as_unpadded(self, x64, solver):
        """Padded to the common shape of another block with more rows and colors (as the
        sharded solve pads its devices' blocks), the data has that block's shapes and
        sweeps a level with padding rows as the unpadded data sweeps the block; the
        padding rows stay zero."""
        dilu = solver == "MULTICOLOR_DILU"
        matrix, other = _random_matrix(30, 0.15, 1), _random_matrix(36, 0.3, 2)
        (a, ordering), (other_a, other_ordering) = _ordering(matrix, dilu), _ordering(other, dilu)
        assert other_ordering.n_colors > ordering.n_colors
        shape = _multicolor.common_color_shape([ordering, other_ordering])
        config = RelaxationConfig(solver=solver, relaxation_factor=0.9,
                                  chebyshev_polynomial_order=None, symmetric_gs=not dilu)

        def padded(a, matrix, ordering):
            data = _relaxation.relaxation_data(a, jnp.asarray(np.diag(matrix)), config,
                                               ordering.on_device())
            padding = _multicolor.multicolor_padding(ordering, shape, 36)
            multicolor = _multicolor.padded_data(data.multicolor,
                                                 jax.tree.map(jnp.asarray, padding))
            return data, data._replace(scale=multicolor.scale, multicolor=multicolor)

        data, padded_data = padded(a, matrix, ordering)
        _, other_data = padded(other_a, other, other_ordering)
        assert (jax.tree.map(jnp.shape, padded_data)
                == jax.tree.map(jnp.shape, other_data))  # one shape for both blocks
        assert (padded_data.multicolor.chunk_starts.shape
                == other_data.multicolor.chunk_starts.shape)
        padded_a = _arrays(np.pad(matrix, ((0, 6), (0, 6))))  # 6 empty padding rows
        b = np.cos(np.arange(36.0))  # the padding rows of b are never read
        x0 = np.concatenate([np.linspace(-1, 1, 30), np.zeros(6)])
        for x in (None, x0):
            want = _relaxation.relax(a, data, config, jnp.asarray(b[:30]),
                                     None if x is None else jnp.asarray(x[:30]), 2)
            got = _relaxation.relax(padded_a, padded_data, config, jnp.asarray(b),
                                    None if x is None else jnp.asarray(x), 2)
            np.testing.assert_allclose(np.asarray(got[:30]), np.asarray(want), rtol=1e-12)
            np.testing.assert_array_equal(np.asarray(got[30:]), 0)


class TestMulticolorSolve:
    def test_amg_pcg_with_dilu_smoother_needs_fewer_iterations_than_jacobi(self, x64):
        A = sparse.matrices.poisson_matrix(20)
        b = jnp.ones(A.shape[0])

        def iterations(preconditioner):
            config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 500,
                      "preconditioner": preconditioner}
            x, info = sparse.solve(A, b, config=config)
            assert int(info.status) == 0
            return int(info.iterations)

        amg = {"solver": "AMG", "min_coarse_rows": 32}
        jacobi = iterations({**amg, "smoother": "BLOCK_JACOBI"})
        assert iterations({**amg, "smoother": {
            "solver": "MULTICOLOR_DILU", "relaxation_factor": 1.0}}) <= jacobi

    def test_multicolor_config_round_trip(self):
        config = sparse.parse_amgx_config({"solver": "PCG", "preconditioner": {
            "solver": "AMG", "smoother": "MULTICOLOR_GS", "symmetric_GS": 1}})
        assert config.preconditioner.amg.smoother.symmetric_gs
        assert sparse.parse_amgx_config(config.to_amgx_dict()) == config


def test_make_preconditioner_sets_a_relaxation_up_once(monkeypatch):
    # Setting the relaxation up at every application, inside a Krylov loop, would cost a
    # setup per iteration: the Preconditioner carries the relaxation's data instead.
    from jaxsolve.sparse import _setup
    A = sparse.as_csr(sparse.matrices.poisson_matrix(16))
    M = sparse.make_preconditioner(A, {"solver": "MULTICOLOR_GS", "symmetric_GS": 1})
    assert M.relaxation is not None and M.relaxation.multicolor is not None
    calls = []
    for module, name in ((_setup, "relaxation_data"), (_setup, "multicolor_ordering")):
        original = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, f=original: calls.append(1) or f(*args))
    b = jnp.ones(A.shape[0])
    x, _ = jax.scipy.sparse.linalg.cg(A.matvec, b, M=M, tol=1e-6)
    assert calls == []
    assert float(jnp.linalg.norm(A.matvec(x) - b) / jnp.linalg.norm(b)) < 1e-5


class TestColoringInTheStructure:
    @pytest.mark.parametrize("smoother", ["MULTICOLOR_GS", "MULTICOLOR_DILU"])
    def test_every_level_is_colored_once_on_the_host(self, smoother):
        from jaxsolve.sparse import _hierarchy
        from jaxsolve.sparse._config import parse_amgx_config
        matrix = sparse.as_csr(sparse.matrices.poisson_matrix(24))
        amg = parse_amgx_config({"solver": "AMG", "min_coarse_rows": 8,
                                 "coarse_solver": "NOSOLVER", "max_levels": 4,
                                 "smoother": smoother}).amg
        structure = _hierarchy.build_structure(
            CsrStructure(matrix.indptr, matrix.indices, matrix.shape[1]), None, 1, amg)
        orderings = [level.ordering for level in structure.levels] + [
            structure.coarsest_ordering]
        patterns = [level.a for level in structure.levels] + [structure.coarsest]
        assert len(orderings) == 4 and "coloring" in structure.setup_seconds
        for ordering, pattern in zip(orderings, patterns, strict=True):
            graph = scipy.sparse.csr_array(
                (np.ones(pattern.nnz, bool), pattern.indices, pattern.indptr),
                shape=(pattern.n_rows, pattern.n_cols))
            assert _coloring.is_valid_coloring(graph, ordering.colors, 1)
            assert (ordering.transposed is not None) == (smoother == "MULTICOLOR_DILU")
        assert orderings[0].n_colors == 2  # red-black on the 5-point finest level

    def test_a_relaxation_alone_colors_once_per_pattern(self, monkeypatch):
        from jaxsolve.sparse import _setup
        calls = []
        original = _setup.multicolor_ordering
        monkeypatch.setattr(_setup, "multicolor_ordering",
                            lambda *args: calls.append(1) or original(*args))
        sparse.clear_cache()
        A = sparse.as_csr(sparse.matrices.poisson_matrix(10))
        config = {"solver": "PCG", "max_iters": 200, "preconditioner": {
            "solver": "MULTICOLOR_DILU", "relaxation_factor": 1.0}}
        solve = jax.jit(lambda values, b: sparse.solve(A.with_values(values), b, config=config))
        for scale in (1.0, 2.0):  # new values, traced: the same pattern's ordering
            x, info = solve(A.values * scale, jnp.ones(100))
            assert int(info.status) == 0
        sparse.solve(A, jnp.ones(100), config=config)
        assert calls == [1]


def _poisson3d_preconditioner(smoother, **amg):
    """An AMG preconditioner of two levels or more on the 3D Poisson problem (512 rows)."""
    A = sparse.matrices.poisson3d_matrix(8, dtype=jnp.float64)
    config = {"solver": "AMG", "min_coarse_rows": 16, "smoother": smoother, **amg}
    return A, sparse.make_preconditioner(A, config)


class TestSymmetricCycle:
    """PCG needs ``M⁻¹`` symmetric: ``<M⁻¹x, y> = <x, M⁻¹y>`` for a symmetric ``A``."""

    @pytest.mark.parametrize("smoother, amg", [
        ({"solver": "MULTICOLOR_GS"}, {}),  # AmgX's default symmetric_GS: 0
        ({"solver": "MULTICOLOR_GS"}, {"coarse_solver": "NOSOLVER", "coarsest_sweeps": 2}),
        ({"solver": "MULTICOLOR_GS"}, {"presweeps": 2, "postsweeps": 2}),
        ({"solver": "MULTICOLOR_GS", "symmetric_GS": 1}, {}),
        ({"solver": "MULTICOLOR_DILU"}, {}),
        ({"solver": "BLOCK_JACOBI"}, {}),
        ({"solver": "JACOBI_L1"}, {}),
        ({"solver": "CHEBYSHEV_POLY"}, {}),
    ], ids=["gs", "gs-smoothed-coarsest", "gs-2-2", "symmetric-gs", "dilu", "jacobi",
            "l1-jacobi", "chebyshev"])
    def test_amg_preconditioner_is_symmetric(self, x64, smoother, amg):
        A, M = _poisson3d_preconditioner(smoother, **amg)
        assert len(M.hierarchy.levels) >= 1 and M.is_symmetric
        rng = np.random.default_rng(0)
        x, y = (jnp.asarray(rng.standard_normal(A.shape[0])) for _ in range(2))
        left, right = float(jnp.vdot(M(x), y)), float(jnp.vdot(x, M(y)))
        assert abs(left - right) <= 1e-12 * abs(left)  # AmgX's forward/forward: 4e-2

    @pytest.mark.parametrize("amg", [
        {"presweeps": 2, "postsweeps": 1}, {"cycle": "F"},
        {"coarse_solver": {"solver": "CG", "max_iters": 3}},
        {"coarse_solver": "NOSOLVER", "coarsest_sweeps": 1, "smoother": "MULTICOLOR_GS"}],
        ids=["unequal-sweeps", "F", "krylov-coarsest", "one-forward-coarsest-sweep"])
    def test_a_nonsymmetric_cycle_says_so(self, amg):
        A = sparse.matrices.poisson_matrix(12)
        M = sparse.make_preconditioner(A, {"solver": "AMG", "min_coarse_rows": 16, **amg})
        assert not M.is_symmetric

    @pytest.mark.parametrize("relaxation", [
        {"solver": "MULTICOLOR_GS"}, {"solver": "MULTICOLOR_DILU"},
        {"solver": "BLOCK_JACOBI", "max_iters": 2}, {"solver": "JACOBI_L1"},
        {"solver": "CHEBYSHEV_POLY"}], ids=lambda r: r["solver"])
    def test_relaxation_preconditioner_is_symmetric(self, x64, relaxation):
        A = sparse.matrices.poisson3d_matrix(8, dtype=jnp.float64)
        M = sparse.make_preconditioner(A, relaxation)
        rng = np.random.default_rng(1)
        x, y = (jnp.asarray(rng.standard_normal(A.shape[0])) for _ in range(2))
        left, right = float(jnp.vdot(M(x), y)), float(jnp.vdot(x, M(y)))
        assert M.is_symmetric and abs(left - right) <= 1e-12 * abs(left)

    @pytest.mark.parametrize("sweeps", [1, 2])
    def test_gs_preconditioner_is_symmetric_for_an_even_number_of_sweeps(self, x64, sweeps):
        """A forward-only MULTICOLOR_GS preconditioner sweeps half forward, half backward
        (as the sharded solve's block relaxation, a one-level smoothed-only AMG, does)."""
        A = sparse.matrices.poisson3d_matrix(8, dtype=jnp.float64)
        M = sparse.make_preconditioner(A, {"solver": "MULTICOLOR_GS", "symmetric_GS": 0,
                                           "max_iters": sweeps})
        rng = np.random.default_rng(0)
        x, y = (jnp.asarray(rng.standard_normal(A.shape[0])) for _ in range(2))
        left, right = float(jnp.vdot(M(x), y)), float(jnp.vdot(x, M(y)))
        assert M.is_symmetric == (sweeps == 2)
        assert (abs(left - right) <= 1e-12 * abs(left)) == (sweeps == 2)

    def test_forward_gs_cycle_matches_a_numpy_v_cycle(self, x64):
        """The whole cycle against NumPy: forward Gauss-Seidel color by color before the
        coarse correction, backward after it, on the hierarchy's own operators."""
        A, M = _poisson3d_preconditioner({"solver": "MULTICOLOR_GS", "relaxation_factor": 1.0},
                                         max_levels=3)
        hierarchy = M.hierarchy
        assert len(hierarchy.levels) == 2

        def csr(arrays, columns):
            return scipy.sparse.csr_array(
                tuple(np.asarray(v) for v in (arrays.values, arrays.indices, arrays.indptr)),
                shape=(arrays.n_rows, columns))

        def gauss_seidel(a, data, b, x, reverse):
            order, starts = np.asarray(data.order), np.asarray(data.chunk_starts)
            counts = np.asarray(data.chunk_counts)
            for k in (range(starts.size - 1, -1, -1) if reverse else range(starts.size)):
                rows = order[starts[k]:starts[k] + counts[k]]  # part of one color
                x[rows] += (b[rows] - a[rows] @ x) / a.diagonal()[rows]
            return x

        def v_cycle(index, b):
            if index == len(hierarchy.levels):
                return np.asarray(hierarchy.coarsest.inverse) @ b
            level = hierarchy.levels[index]
            a, data = csr(level.a, b.size), level.smoother.multicolor
            coarse = level.r.n_rows
            x = gauss_seidel(a, data, b, np.zeros_like(b), reverse=False)
            x = x + csr(level.p, coarse) @ v_cycle(index + 1,
                                                   csr(level.r, b.size) @ (b - a @ x))
            return gauss_seidel(a, data, b, x, reverse=True)

        b = np.cos(np.arange(A.shape[0]))
        # the hierarchy is padded to a size class: b with zero rows, x cut back
        padded = np.zeros(hierarchy.levels[0].a.n_rows)
        padded[:b.size] = b
        np.testing.assert_allclose(np.asarray(M(jnp.asarray(b))), v_cycle(0, padded)[:b.size],
                                   rtol=1e-10, atol=1e-12)

    def test_pcg_with_forward_gs_smoother_converges_on_3d_poisson(self, x64):
        """AmgX's forward sweeps before and after the correction: PCG stalled (500
        iterations, not converged, on 10³ as on 46³)."""
        A = sparse.matrices.poisson3d_matrix(10, dtype=jnp.float64)
        config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 100, "preconditioner": {
            "solver": "AMG", "min_coarse_rows": 32, "smoother": "MULTICOLOR_GS"}}
        _, info = sparse.solve(A, jnp.ones(A.shape[0]), config=config)
        assert int(info.status) == 0 and int(info.iterations) <= 10

    def test_pcg_preconditioned_by_gs_alone_sweeps_symmetrically(self, x64):
        """A MULTICOLOR_GS that preconditions PCG sweeps forward and backward unless its
        scope says otherwise: a forward sweep's M⁻¹ is not symmetric, and PCG with it did
        not converge on 10³ (1000 iterations, relative residual 2e-4; 13 symmetric)."""
        def parsed(config):
            return sparse.parse_amgx_config(config).preconditioner.relaxation.symmetric_gs

        assert parsed({"solver": "PCG", "preconditioner": "MULTICOLOR_GS"})
        assert not parsed({"solver": "PCG", "preconditioner": {
            "solver": "MULTICOLOR_GS", "symmetric_GS": 0}})  # AmgX's choice, when named
        assert not parsed({"solver": "FGMRES", "preconditioner": "MULTICOLOR_GS"})
        # make_preconditioner reads a flat scope as PCG's preconditioner
        assert sparse.make_preconditioner(sparse.matrices.poisson_matrix(4),
                                          {"solver": "MULTICOLOR_GS"}).is_symmetric
        A = sparse.matrices.poisson3d_matrix(10, dtype=jnp.float64)
        _, info = sparse.solve(A, jnp.ones(A.shape[0]), config={
            "solver": "PCG", "tolerance": 1e-8, "max_iters": 100,
            "preconditioner": "MULTICOLOR_GS"})
        assert int(info.status) == 0 and int(info.iterations) <= 15
