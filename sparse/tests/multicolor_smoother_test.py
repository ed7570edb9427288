"""Tests of the multicolor smoothers (MULTICOLOR_GS, MULTICOLOR_DILU) and their coloring."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

from jaxsolve import sparse
from jaxsolve.sparse import _coloring, _relaxation
from jaxsolve.sparse._config import RelaxationConfig
from jaxsolve.sparse._csr_arrays import CsrArrays


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


class TestColorGraphOnDevice:
    @pytest.mark.parametrize("seed", range(4))
    def test_color_graph_on_device_is_valid(self, seed):
        matrix = _random_matrix(40, 0.15, seed)
        a = _arrays(matrix)
        colors, count = jax.jit(_coloring.color_graph_on_device, static_argnums=2)(
            a.indices, a.indptr, 40)
        colors = np.asarray(colors)
        assert _coloring.is_valid_coloring(matrix != 0, colors, 1)
        assert int(count) == colors.max() + 1

    def test_color_graph_on_device_dense_rows_beyond_window(self):
        matrix = np.ones((70, 70))  # every node needs its own color: 70 > the 64-color window
        a = _arrays(matrix)
        colors, count = _coloring.color_graph_on_device(a.indices, a.indptr, 70)
        assert np.unique(np.asarray(colors)).size == 70 and int(count) >= 70


class TestMulticolorRelaxation:
    def _data(self, matrix, solver, **extra):
        a = _arrays(matrix)
        config = RelaxationConfig(solver=solver, relaxation_factor=1.0,
                                  chebyshev_polynomial_order=None, **extra)
        return a, config, _relaxation.relaxation_data(a, jnp.asarray(np.diag(matrix)), config)

    def test_multicolor_gs_sweep_matches_reference(self, x64):
        matrix = _random_matrix(30, 0.2, 0)
        a, config, data = self._data(matrix, "MULTICOLOR_GS", symmetric_gs=True)
        b = np.arange(30.0)
        x0 = np.linspace(-1, 1, 30)
        got = _relaxation.relax(a.matvec, data, config, jnp.asarray(b), jnp.asarray(x0), 1)
        colors = np.asarray(data.colors)
        x = x0.copy()
        for c in [*range(colors.max() + 1), *range(colors.max(), -1, -1)]:
            mine = colors == c
            x[mine] += ((b - matrix @ x) / np.diag(matrix))[mine]
        np.testing.assert_allclose(np.asarray(got), x, rtol=1e-12)

    @pytest.mark.parametrize("symmetric_pattern", [True, False])
    def test_multicolor_dilu_is_the_dilu_factorization(self, x64, symmetric_pattern):
        matrix = _random_matrix(30, 0.15, 1, symmetric_pattern)
        a, config, data = self._data(matrix, "MULTICOLOR_DILU")
        colors = np.asarray(data.colors)
        earlier = colors[None, :] < colors[:, None]
        lower = np.where(earlier & (matrix != 0), matrix, 0)
        upper = np.where(earlier.T & (matrix != 0), matrix, 0)
        e = np.diag(1 / np.asarray(data.scale))
        m = (e + lower) @ np.linalg.inv(e) @ (e + upper)
        np.testing.assert_allclose(np.diag(m), np.diag(matrix), rtol=1e-10)  # diag(M) = diag(A)
        r = np.cos(np.arange(30.0))
        np.testing.assert_allclose(np.asarray(_relaxation._dilu_solve(data, jnp.asarray(r))),
                                   np.linalg.solve(m, r), rtol=1e-10)


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
    # Coloring the graph at every application, inside a Krylov loop, would cost a setup
    # per iteration: the Preconditioner carries the relaxation's data instead.
    from jaxsolve.sparse import _preconditioner
    A = sparse.as_csr(sparse.matrices.poisson_matrix(16))
    M = sparse.make_preconditioner(A, {"solver": "MULTICOLOR_GS", "symmetric_GS": 1})
    assert M.relaxation is not None and M.relaxation.colors is not None
    calls = []
    setup = _preconditioner.relaxation_data
    monkeypatch.setattr(_preconditioner, "relaxation_data",
                        lambda *args: calls.append(1) or setup(*args))
    b = jnp.ones(A.shape[0])
    x, _ = jax.scipy.sparse.linalg.cg(A.matvec, b, M=M, tol=1e-6)
    assert calls == []
    assert float(jnp.linalg.norm(A.matvec(x) - b) / jnp.linalg.norm(b)) < 1e-5
