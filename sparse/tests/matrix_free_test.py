"""Tests of matrix-free operators: cache_coloring, with_cache, materialization, solve(callable)."""

import re

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sparse
from jaxsolve.sparse import _coloring, _matrix_free

N = 16


def tridiagonal_operator(d):
    """``A(d) = tridiag(-1, d, -1)``, written with ``jnp.roll`` and ``.at[].set``."""
    def matvec(x):
        return d * x - jnp.roll(x, 1).at[0].set(0.0) - jnp.roll(x, -1).at[-1].set(0.0)
    return matvec


def tridiagonal_matrix(d):
    """The same matrix, explicit: a CsrMatrix whose values depend on ``d``."""
    pattern = sparse.as_csr(np.eye(N) * 2 + np.eye(N, k=1) + np.eye(N, k=-1))
    on_diagonal = pattern.row_ids == pattern.indices
    return pattern.with_values(jnp.where(jnp.asarray(on_diagonal), d, -1.0))


def laplacian_2d(m):
    def matvec(x):
        u = jnp.pad(x.reshape(m, m), 1)
        return (4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2]
                - u[1:-1, 2:]).ravel()
    return matvec


class TestCacheColoring:
    def test_cache_coloring_info(self):
        info = sparse.cache_coloring(tridiagonal_operator(4.0), N)
        assert isinstance(info, sparse.ColoringInfo)
        assert info.shape == (N, N) and info.nnz == 3 * N - 2 and info.method == "traced"
        assert info.n_colors == int(info.colors.max()) + 1 <= 4
        assert info.dtype == np.float32
        rows, cols, colors, n_colors, shape = info  # JAX-AMG's 5-tuple
        assert (n_colors, shape) == (info.n_colors, info.shape) and rows is info.rows
        assert info[4] == info.shape and info[3] == info.n_colors and info[-1] == info.shape
        assert info[0] is info.rows and len(info) == 5 and info[:2] == (info.rows, info.cols)
        dense = np.zeros((N, N), bool)
        dense[info.rows, info.cols] = True
        np.testing.assert_array_equal(dense, np.asarray(tridiagonal_matrix(4.0).todense()) != 0)

    def test_cache_coloring_hits_for_a_rebuilt_closure(self):
        first = sparse.cache_coloring(tridiagonal_operator(4.0), N)
        assert sparse.cache_coloring(tridiagonal_operator(7.0), N) is first  # new closure
        other = sparse.cache_coloring(tridiagonal_operator(4.0), N, jnp.float16)
        assert other is not first

    def test_cache_coloring_misses_when_constant_zeros_change(self):
        a = np.eye(6, dtype=np.float32)
        b = a + np.eye(6, k=1, dtype=np.float32)
        info_a = sparse.cache_coloring(lambda x: jnp.asarray(a) @ x, 6)
        info_b = sparse.cache_coloring(lambda x: jnp.asarray(b) @ x, 6)
        assert (info_a.nnz, info_b.nnz) == (6, 11)

    def test_cache_coloring_is_a_bounded_lru(self, monkeypatch):
        monkeypatch.setattr(_matrix_free, "_CACHE_SIZE", 2)
        _matrix_free.clear_coloring_cache()
        for shift in (1, 2, 3):
            sparse.cache_coloring(lambda x, s=shift: x + jnp.roll(x, s), 8)
        assert len(_matrix_free._cache) == 2

    def test_cache_coloring_errors(self):
        with pytest.raises(ValueError, match="does not reproduce it"):
            sparse.cache_coloring(lambda x: x * x, 4)  # not linear
        with pytest.raises(ValueError, match="closes over traced values"):
            jax.jit(lambda d: sparse.cache_coloring(tridiagonal_operator(d), N).n_colors)(4.0)
        with pytest.raises(TypeError, match=re.escape(
                "cache_coloring: the matrix-free operator returns int32 values; it must return"
                " floating-point or complex ones")):
            sparse.cache_coloring(lambda x: 2 * x.astype(jnp.int32), 4)


class TestMaterialize:
    def test_materialize_matches_operator(self):
        operator = laplacian_2d(8)
        info = sparse.cache_coloring(operator, 64)
        matrix = _matrix_free.materialize(operator, info)
        dense = jax.vmap(operator)(jnp.eye(64)).T
        np.testing.assert_allclose(np.asarray(matrix.todense()), np.asarray(dense))
        assert info.n_colors == 5

    def test_materialize_in_batches(self, monkeypatch):
        monkeypatch.setattr(_matrix_free, "_MATERIALIZE_BYTES", 64 * 4 * 2)  # one color a batch
        operator = laplacian_2d(8)
        info = sparse.cache_coloring(operator, 64)
        matrix = jax.jit(lambda: _matrix_free.materialize(operator, info).values)()
        np.testing.assert_allclose(
            np.asarray(sparse.CsrMatrix._on_pattern(matrix, info.pattern).todense()),
            np.asarray(jax.vmap(operator)(jnp.eye(64)).T))

    def test_materialize_grad_reaches_closed_over_parameters(self):
        info = sparse.cache_coloring(tridiagonal_operator(4.0), N)
        grad = jax.grad(lambda d: jnp.sum(
            _matrix_free.materialize(tridiagonal_operator(d), info).values))(3.0)
        assert float(grad) == N


@st.composite
def square_matrices(draw):
    n = draw(st.sampled_from([1, 7, 16]))  # few shapes: compilations are shared
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    mask = rng.random((n, n)) < draw(st.floats(0.0, 0.5))
    values = np.where(mask, rng.uniform(0.5, 2.0, (n, n)), 0) + np.diag(rng.uniform(1, 2, n))
    return values.astype(np.float32)


@hypothesis.settings(max_examples=6, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(square_matrices(), st.booleans())
def test_materialized_matrix_equals_a(matrix, as_stencil_code):
    """x ↦ A x, as a product or as gathers with index arrays, materializes to A."""
    n = matrix.shape[0]
    if as_stencil_code:
        width = max(1, int(np.count_nonzero(matrix, axis=1).max()))
        index = np.zeros((width, n), np.int32)
        weight = np.zeros((width, n), np.float32)
        for i in range(n):
            columns = np.flatnonzero(matrix[i])
            index[:len(columns), i], weight[:len(columns), i] = columns, matrix[i, columns]

        def operator(x):
            return jnp.sum(jnp.asarray(weight) * x[jnp.asarray(index)], axis=0)
    else:
        def operator(x):
            # Full f32 precision: a GPU's default f32 product rounds through TF32.
            return jnp.matmul(jnp.asarray(matrix), x, precision="highest")
    info = sparse.cache_coloring(operator, n)
    assert _coloring.is_valid_coloring(np.asarray(matrix != 0), info.colors, 2)
    np.testing.assert_allclose(
        np.asarray(_matrix_free.materialize(operator, info).todense()), matrix, rtol=1e-6)


class TestSolveMatrixFree:
    def test_solve_callable_outside_jit(self):
        operator = laplacian_2d(16)
        b = jnp.ones(256)
        x, info = sparse.solve(operator, b)
        assert int(info.status) == 0
        assert float(jnp.linalg.norm(operator(x) - b)) <= 1e-4 * float(jnp.linalg.norm(b))

    def test_solve_callable_under_jit_with_concrete_operator(self):
        operator = laplacian_2d(8)
        _matrix_free.clear_coloring_cache()  # the structure is found while jit traces
        x = jax.jit(lambda b: sparse.solve(operator, b)[0])(jnp.ones(64))
        np.testing.assert_allclose(np.asarray(operator(x)), 1.0, atol=1e-4)

    def test_make_preconditioner_matrix_free(self):
        operator = laplacian_2d(16)
        info = sparse.cache_coloring(operator, 256)
        M = sparse.make_preconditioner(sparse.with_cache(operator, coloring=info))
        b = jnp.ones(256)
        x, _ = jax.scipy.sparse.linalg.cg(operator, b, M=M, tol=1e-6)
        assert float(jnp.linalg.norm(operator(x) - b)) <= 1e-4 * float(jnp.linalg.norm(b))

    def test_gradient_example_recovers_d(self):
        """The issue's example: d = 4.0 recovered from 10.0, the explicit version's steps."""
        b = jnp.ones(N)
        target, _ = sparse.solve(tridiagonal_operator(4.0), b)
        info = sparse.cache_coloring(tridiagonal_operator(10.0), N)  # before the loop

        def loss_matrix_free(d):
            A = sparse.with_cache(tridiagonal_operator(d), coloring=info)
            return jnp.sum((sparse.solve(A, b)[0] - target) ** 2)

        def loss_explicit(d):
            return jnp.sum((sparse.solve(tridiagonal_matrix(d), b)[0] - target) ** 2)

        trajectories = []
        for loss in (loss_matrix_free, loss_explicit):
            step = jax.jit(jax.value_and_grad(loss))
            d, path = jnp.float32(10.0), []
            for _ in range(30):
                _, g = step(d)
                d = d - 0.8 * g
                path.append(float(d))
            trajectories.append(path)
        np.testing.assert_allclose(trajectories[0], trajectories[1], rtol=1e-4)
        assert abs(trajectories[0][-1] - 4.0) < 2e-3

    def test_with_cache_nullspace_solves_a_singular_operator(self, x64):
        """JAX-AMG's with_cache(nullspace=...): the minimum-norm solution, as solve's own."""
        def periodic(x):  # the 2D periodic Laplacian: singular, constants in its null space
            u = x.reshape(8, 8)
            return (4 * u - sum(jnp.roll(u, s, a) for s in (1, -1) for a in (0, 1))).ravel()

        info = sparse.cache_coloring(periodic, 64, jnp.float64)
        b = jnp.asarray(np.random.default_rng(0).standard_normal(64))
        b = b - jnp.mean(b)
        ones = jnp.ones(64)
        x, status = sparse.solve(sparse.with_cache(periodic, coloring=info, nullspace=ones), b)
        assert int(status.status) == 0
        reference, _ = sparse.solve(sparse.matrices.periodic_poisson_matrix(8, dtype=jnp.float64),
                                    b, nullspace=ones)
        np.testing.assert_allclose(np.asarray(x), np.asarray(reference), rtol=1e-8, atol=1e-10)
        assert abs(float(jnp.mean(x))) < 1e-10

    def test_with_cache_rewraps(self):
        info = sparse.cache_coloring(tridiagonal_operator(4.0), N)
        A = sparse.with_cache(tridiagonal_operator(4.0), coloring=info)
        metadata = {"nglobal": N}
        B = sparse.with_cache(A, is_symmetric=True, mpi=metadata)
        assert B.coloring is info and B.is_symmetric and B.shape == (N, N)
        assert B.attachments.mpi is metadata
        assert sparse.with_cache(B).is_symmetric  # JAX-AMG's False adds nothing
        np.testing.assert_allclose(np.asarray(B(jnp.ones(N))), np.asarray(A(jnp.ones(N))))

    def test_solve_matrix_free_errors(self):
        b = jnp.ones(N)
        with pytest.raises(ValueError, match="built from traced values.*with_cache"):
            jax.jit(lambda d: sparse.solve(tridiagonal_operator(d), b)[0])(4.0)
        with pytest.raises(ValueError, match="unknown size"):
            sparse.make_preconditioner(tridiagonal_operator(4.0))
        info = sparse.cache_coloring(tridiagonal_operator(4.0), N)
        with pytest.raises(ValueError, match=r"coloring has shape \(16, 16\)"):
            sparse.solve(sparse.with_cache(tridiagonal_operator(4.0), coloring=info),
                         jnp.ones(8))
        with pytest.raises(TypeError, match="coloring must be a ColoringInfo"):
            sparse.with_cache(tridiagonal_operator(4.0), coloring="no")
        # A coloring of another operator (here: the diagonal alone, from d's zero pattern
        # of a different closure) would recover a wrong matrix: checked with concrete values.
        diagonal = sparse.cache_coloring(lambda x: 4.0 * x, N)
        with pytest.raises(ValueError, match="does not reproduce it"):
            sparse.solve(sparse.with_cache(tridiagonal_operator(4.0), coloring=diagonal), b)
        # An operator that returns integers, with a coloring found here or attached.
        rounded = lambda x: jnp.round(4 * x).astype(jnp.int32)
        for operator in (rounded, sparse.with_cache(rounded, coloring=diagonal)):
            with pytest.raises(TypeError, match=re.escape(
                    "solve: the matrix-free operator returns int32 values; it must return"
                    " floating-point or complex ones")):
                sparse.solve(operator, b)
