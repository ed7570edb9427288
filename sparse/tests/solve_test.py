"""Tests for jaxsolve.sparse.solve: accuracy, configurations, transformations, failures."""

import gc
import re

import jax
import jax.numpy as jnp
import numpy as np
import pyamg
import pytest
import scipy.sparse
import scipy.sparse.linalg
from jax.experimental import sparse as jsparse

from jaxsolve import sparse
from jaxsolve.sparse import _padded_setup, _setup, matrices

# Smoothed aggregation with ℓ1-Jacobi, which (unlike damped Jacobi with ω = 0.9) smooths
# every SPD matrix, elasticity included.
SA = {"solver": "PCG", "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_4",
                                           "jaxsolve_smoothed_aggregation": 1,
                                           "smoother": "JACOBI_L1"}}


def scipy_matrix(A) -> scipy.sparse.csr_array:
    csr = sparse.as_csr(A)
    return scipy.sparse.csr_array((np.asarray(csr.values), csr.indices, csr.indptr),
                                  shape=csr.shape)


def relative_residual(A, x, b) -> float:
    A = scipy_matrix(A).astype(np.float64)
    b = np.asarray(b, np.float64)
    return float(np.linalg.norm(A @ np.asarray(x, np.float64) - b) / np.linalg.norm(b))


def status(info) -> str:
    return sparse.Status(int(info.status)).name


class TestAgainstSpsolve:
    @pytest.mark.parametrize("dtype, tolerance, accuracy", [
        (np.float32, 1e-5, 1e-3), (np.float64, 1e-10, 1e-8)])
    @pytest.mark.parametrize("problem, config", [
        ("poisson", None),
        ("poisson", SA),
        ("anisotropic", {"solver": "PBICGSTAB"}),
        ("convection", {"solver": "FGMRES", "gmres_n_restart": 30}),
        ("convection", {"solver": "GMRES"}),
    ])
    def test_gallery(self, request, dtype, tolerance, accuracy, problem, config):
        if dtype == np.float64:
            request.getfixturevalue("x64")
        A = {
            "poisson": lambda: matrices.poisson_matrix(24, dtype=dtype),
            "anisotropic": lambda: matrices.anisotropic_diffusion_matrix(
                24, 0.01, np.pi / 6, dtype=dtype),
            "convection": lambda: matrices.convection_diffusion_matrix_2d(24, peclet=20.0, dtype=dtype),
        }[problem]()
        b = matrices.rhs_random(24 * 24, seed=1, dtype=dtype)
        config = {**(config or {}), "tolerance": tolerance}
        x, info = sparse.solve(A, b, config=config)
        reference = scipy.sparse.linalg.spsolve(scipy_matrix(A).astype(np.float64).tocsc(),
                                                np.asarray(b, np.float64))
        assert status(info) == "SUCCESS"
        assert x.dtype == dtype
        np.testing.assert_allclose(x, reference, rtol=0,
                                   atol=accuracy * np.abs(reference).max() * 100)
        assert relative_residual(A, x, b) <= 10 * tolerance

    def test_elasticity_with_rigid_body_modes(self, x64):
        # 24 × 24 nodes: the modes' advantage grows with the grid (at 12 × 12 the scalar
        # hierarchy still takes fewer iterations; at 32 × 32 it takes 41 against 32).
        A, modes = matrices.elasticity_matrix_2d(24, dtype=np.float64)
        b = matrices.rhs_random(A.shape[0], seed=2, dtype=np.float64)
        config = {**SA, "tolerance": 1e-10, "max_iters": 300}
        x, info = sparse.solve(A, b, config=config, near_nullspace=modes)
        scalar_x, scalar_info = sparse.solve(A, b, config=config)
        reference = scipy.sparse.linalg.spsolve(scipy_matrix(A).tocsc(), np.asarray(b))
        assert status(info) == status(scalar_info) == "SUCCESS"
        np.testing.assert_allclose(x, reference, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(scalar_x, reference, rtol=1e-6, atol=1e-8)
        # The rigid-body modes are what smoothed aggregation needs for elasticity.
        assert int(info.iterations) < int(scalar_info.iterations)

    @pytest.mark.parametrize("name, make", [
        ("poisson", lambda: pyamg.gallery.poisson((30, 30), format="csr")),
        ("stencil", lambda: pyamg.gallery.stencil_grid(
            pyamg.gallery.diffusion_stencil_2d(epsilon=0.1, theta=np.pi / 3, type="FE"),
            (24, 24), format="csr")),
        ("poisson3d", lambda: pyamg.gallery.poisson((10, 10, 10), format="csr")),
        ("elasticity", lambda: pyamg.gallery.linear_elasticity((10, 10))[0].tocsr()),
    ])
    def test_pyamg_gallery(self, x64, name, make):
        A = make().astype(np.float64)
        b = np.random.default_rng(3).standard_normal(A.shape[0])
        x, info = sparse.solve(A, b, config={**SA, "tolerance": 1e-10, "max_iters": 400})
        assert status(info) == "SUCCESS", name
        np.testing.assert_allclose(x, scipy.sparse.linalg.spsolve(A.tocsc(), b),
                                   rtol=1e-6, atol=1e-8)

    @pytest.mark.parametrize("kind", ["dense", "bcoo", "bcsr", "scipy", "csr"])
    def test_input_types(self, kind):
        A = matrices.poisson_matrix(8)
        b = matrices.rhs_ones(64)
        converted = {
            "dense": lambda: A.todense(),
            "bcoo": lambda: A.to_bcoo(),
            "bcsr": lambda: A,
            "scipy": lambda: scipy_matrix(A),
            "csr": lambda: sparse.as_csr(A),
        }[kind]()
        x, info = sparse.solve(converted, b)
        assert status(info) == "SUCCESS"
        assert relative_residual(A, x, b) < 1e-5

    def test_complex_hermitian(self, x64):
        base = scipy_matrix(matrices.poisson_matrix(10, dtype=np.float64))
        skew = scipy.sparse.random(100, 100, density=0.02, random_state=0)
        A = (base + 1j * 0.1 * (skew - skew.T)).tocsr()
        b = np.random.default_rng(0).standard_normal(100) + 0j
        x, info = sparse.solve(A, b, config={**SA, "tolerance": 1e-10})
        assert status(info) == "SUCCESS" and x.dtype == np.complex128
        np.testing.assert_allclose(x, scipy.sparse.linalg.spsolve(A.tocsc(), b), rtol=1e-7)


class TestAcceptance:
    def test_poisson_32_converges_in_few_iterations(self, x64):
        A = matrices.poisson_matrix(32, dtype=np.float64)
        b = matrices.rhs_ones(32 * 32, dtype=np.float64)
        x, info = sparse.solve(A, b)
        _, plain = sparse.solve(A, b, config={"solver": "BICGSTAB"})
        assert status(info) == status(plain) == "SUCCESS"
        assert int(info.iterations) <= 10
        assert int(plain.iterations) >= 3 * int(info.iterations)
        assert relative_residual(A, x, b) <= 1e-6

    def test_recovers_a_tridiagonal_value_by_gradient_descent(self, x64):
        n = 100
        b = matrices.rhs_ones(n, dtype=np.float64)
        target, _ = sparse.solve(matrices.tridiagonal_matrix(n, 4.0, dtype=np.float64), b)

        def loss(d):
            x, _ = sparse.solve(matrices.tridiagonal_matrix(n, d, dtype=np.float64), b)
            return jnp.sum((x - target) ** 2)

        step = jax.jit(jax.value_and_grad(loss))
        d = jnp.float64(10.0)
        for _ in range(100):
            _, gradient = step(d)
            d = d - 0.1 * gradient  # plain gradient descent, learning rate 0.1
            if abs(float(d) - 4.0) < 1e-3:
                break
        assert abs(float(d) - 4.0) < 1e-3


class TestConfigurations:
    @pytest.mark.parametrize("amg", [
        {"algorithm": "AGGREGATION", "selector": "SIZE_2"}, {"algorithm": "AGGREGATION", "selector": "SIZE_8"}, {"cycle": "W"}, {"cycle": "F"},
        {"smoother": "JACOBI_L1"}, {"smoother": "CHEBYSHEV_POLY"},
        {"coarse_solver": "NOSOLVER", "coarsest_sweeps": 4},
        {"presweeps": 2, "postsweeps": 2, "max_levels": 2},
        {"jaxsolve_smoothed_aggregation": 1, "algorithm": "AGGREGATION", "selector": "SIZE_8"},
    ])
    def test_amg_variants_converge(self, amg):
        A = matrices.poisson_matrix(20)
        b = matrices.rhs_ones(400)
        x, info = sparse.solve(A, b, config={"solver": "PCG", "preconditioner": {
            "solver": "AMG", **amg}})
        assert status(info) == "SUCCESS"
        assert int(info.iterations) <= 30
        assert relative_residual(A, x, b) <= 1e-5

    @pytest.mark.parametrize("config, most", [
        ({"solver": "AMG", "max_iters": 100}, 40),
        ({"solver": "PCG", "preconditioner": "JACOBI_L1"}, 80),
        ({"solver": "PCG", "preconditioner": {"solver": "BLOCK_JACOBI", "max_iters": 2}}, 60),
        ({"solver": "PBICGSTAB", "preconditioner": "CHEBYSHEV_POLY"}, 30),
        ({"solver": "CG"}, 80),
        ({"solver": "PBICGSTAB", "preconditioner": {"solver": "AMG", "max_iters": 2}}, 6),
    ])
    def test_solvers_and_preconditioners(self, config, most):
        A = matrices.poisson_matrix(16)
        b = matrices.rhs_ones(256)
        x, info = sparse.solve(A, b, config={**config, "tolerance": 1e-5})
        assert status(info) == "SUCCESS", config
        assert int(info.iterations) <= most
        assert relative_residual(A, x, b) <= 1e-4

    def test_absolute_convergence_and_history(self, x64):
        A = matrices.poisson_matrix(16, dtype=np.float64)
        b = 1e-3 * matrices.rhs_ones(256, dtype=np.float64)
        x, info = sparse.solve(A, b, config={"convergence": "ABSOLUTE", "tolerance": 1e-9,
                                             "max_iters": 50, "store_res_history": 1})
        k = int(info.iterations)
        assert status(info) == "SUCCESS"
        assert np.linalg.norm(scipy_matrix(A) @ np.asarray(x) - np.asarray(b)) <= 2e-9
        history = np.asarray(info.residual_history)
        assert history.shape == (51,) and history[0] == 1
        assert np.isfinite(history[: k + 1]).all() and np.isnan(history[k + 1:]).all()

    def test_a_warm_start_at_the_solution_takes_no_iteration(self, x64):
        A = matrices.poisson_matrix(12, dtype=np.float64)
        b = matrices.rhs_ones(144, dtype=np.float64)
        x, _ = sparse.solve(A, b, config={"tolerance": 1e-12})
        again, info = sparse.solve(A, b, x0=x, config={"tolerance": 1e-8,
                                                       "convergence": "ABSOLUTE"})
        assert int(info.iterations) == 0
        np.testing.assert_array_equal(again, x)

    def test_non_convergence_is_reported(self):
        A = matrices.poisson_matrix(24)
        b = matrices.rhs_ones(576)
        _, info = sparse.solve(A, b, config={"solver": "CG", "max_iters": 5})
        assert status(info) == "NOT_CONVERGED"
        assert sparse.FailureReason(int(info.failure_reason)).name == "MAX_ITERS"
        with pytest.raises(sparse.SolveError, match="did not reach the tolerance"):
            sparse.raise_on_failure(info)


class TestTransformations:
    def test_grad_with_respect_to_b_alone_of_a_nonsymmetric_solve(self, x64):
        # The values stay concrete while reverse mode traces, so Aᵀ's setup, built then,
        # must take its values concretely too.
        A = sparse.as_csr(matrices.convection_diffusion_matrix_2d(16, peclet=2.0))
        A = A.with_values(A.values.astype(jnp.float64))
        b = jnp.ones(A.shape[0])
        config = {"solver": "PBICGSTAB", "tolerance": 1e-10}

        def loss(b):
            return jnp.sum(sparse.solve(A, b, config=config)[0] ** 2)

        dense = scipy_matrix(A).toarray()
        x = np.linalg.solve(dense, np.ones(A.shape[0]))
        np.testing.assert_allclose(jax.grad(loss)(b), np.linalg.solve(dense.T, 2 * x),
                                   rtol=1e-6)

    def test_jit_with_traced_values_and_no_cached_structure(self):
        sparse.clear_cache()
        A = sparse.as_csr(matrices.poisson_matrix(16))
        b = matrices.rhs_ones(256)
        x, info = jax.jit(lambda v, b: sparse.solve(A.with_values(v), b))(A.values, b)
        assert status(info) == "SUCCESS"
        assert relative_residual(A, x, b) <= 1e-5
        assert sparse.cache_info().misses == 1

    def test_jit_reuses_the_structure_built_from_concrete_values(self):
        sparse.clear_cache()
        A = sparse.as_csr(matrices.anisotropic_diffusion_matrix(16, 0.001, 0.0))
        b = matrices.rhs_ones(256)
        _, eager = sparse.solve(A, b)
        solve = jax.jit(lambda v, b: sparse.solve(A.with_values(v), b))
        x, info = solve(A.values, b)
        assert sparse.cache_info() == sparse.CacheInfo(hits=1, misses=1, maxsize=8, currsize=1)
        assert int(info.iterations) == int(eager.iterations)
        # New values on the pattern: the numeric setup runs inside the compiled program.
        x2, info2 = solve(2 * A.values, b)
        np.testing.assert_allclose(x2, x / 2, rtol=1e-3, atol=1e-6)
        assert sparse.cache_info().hits == 1  # no retrace, no new lookup

    def test_jit_of_a_solve_whose_arrays_it_closes_over(self):
        # Every input is concrete, yet the solve is staged into the caller's program: its
        # results are tracers, which the input check and the report must not read.
        A = matrices.poisson_matrix(12)
        b = matrices.rhs_ones(144)
        x, info = jax.jit(lambda: sparse.solve(A, b))()
        assert status(info) == "SUCCESS"
        assert relative_residual(A, x, b) <= 1e-5
        # A NaN is reported in the status, as for traced inputs, not raised.
        bad = b.at[3].set(jnp.nan)
        _, staged = jax.jit(lambda: sparse.solve(A, bad))()
        _, traced = jax.jit(lambda b: sparse.solve(A, b))(bad)
        assert status(staged) == status(traced) == "FAILED"
        assert int(staged.failure_reason) == int(traced.failure_reason) != 0

    def test_vmap_over_right_hand_sides_and_columns(self):
        A = matrices.poisson_matrix(12)
        bs = jnp.stack([matrices.rhs_random(144, seed=s) for s in range(3)])
        xs, infos = jax.vmap(lambda b: sparse.solve(A, b))(bs)
        assert infos.iterations.shape == (3,) and xs.shape == (3, 144)
        columns, column_infos = sparse.solve(A, bs.T)
        np.testing.assert_allclose(columns.T, xs, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(column_infos.iterations, infos.iterations)
        for x, b in zip(xs, bs, strict=True):
            assert relative_residual(A, x, b) <= 1e-5

    def test_vmap_over_values_on_one_pattern(self, x64):
        A = sparse.as_csr(matrices.poisson_matrix(10, dtype=np.float64))
        b = matrices.rhs_ones(100, dtype=np.float64)
        scales = jnp.array([1.0, 2.0, 5.0])
        xs, infos = jax.vmap(lambda s: sparse.solve(A.with_values(s * A.values), b))(scales)
        x, _ = sparse.solve(A, b)
        np.testing.assert_allclose(xs, x[None] / scales[:, None], rtol=1e-6)

    @pytest.mark.parametrize("problem", ["symmetric", "nonsymmetric"])
    @pytest.mark.parametrize("derivative", ["implicit", "adjoint"])
    def test_gradients_match_dense(self, x64, problem, derivative):
        if problem == "symmetric":
            A = sparse.as_csr(matrices.poisson_matrix(6, dtype=np.float64))
            config = {**SA, "tolerance": 1e-12}
        else:
            A = sparse.as_csr(matrices.convection_diffusion_matrix_2d(6, peclet=5.0, dtype=np.float64))
            config = {"tolerance": 1e-12}
        b = matrices.rhs_random(36, seed=0, dtype=np.float64)
        weights = jnp.linspace(-1.0, 1.0, 36)
        rows = A.row_ids

        def loss(values, b):
            x, _ = sparse.solve(A.with_values(values), b, config=config, derivative=derivative)
            return jnp.sum(weights * x ** 3)

        def dense_loss(values, b):
            matrix = jnp.zeros((36, 36)).at[rows, A.indices].add(values)
            if problem == "symmetric":  # the solve is differentiated on symmetric matrices
                matrix = (matrix + matrix.T) / 2
            return jnp.sum(weights * jnp.linalg.solve(matrix, b) ** 3)

        got = jax.jit(jax.grad(loss, argnums=(0, 1)))(A.values, b)
        want = jax.grad(dense_loss, argnums=(0, 1))(A.values, b)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9)

    def test_forward_mode_and_no_gradient_to_x0(self, x64):
        A = sparse.as_csr(matrices.convection_diffusion_matrix_2d(5, peclet=2.0, dtype=np.float64))
        b = matrices.rhs_random(25, seed=4, dtype=np.float64)
        dense = np.asarray(A.todense())
        tangent = jnp.asarray(np.random.default_rng(5).standard_normal(A.nnz))
        x0 = jnp.ones(25)

        def solve(values, x0):
            return sparse.solve(A.with_values(values), b, x0=x0, config={"tolerance": 1e-12})[0]

        x, x_dot = jax.jvp(lambda v: solve(v, x0), (A.values,), (tangent,))
        a_dot = np.zeros((25, 25))
        np.add.at(a_dot, (A.row_ids, A.indices), tangent)
        expected = -np.linalg.solve(dense, a_dot @ np.linalg.solve(dense, np.asarray(b)))
        np.testing.assert_allclose(x_dot, expected, rtol=1e-8, atol=1e-12)
        x0_gradient = jax.grad(lambda x0: solve(A.values, x0).sum())(x0)
        np.testing.assert_array_equal(x0_gradient, np.zeros(25))


class TestFailures:
    def test_shapes_and_types(self):
        A = matrices.poisson_matrix(4)
        with pytest.raises(ValueError, match=re.escape("A must be square, got shape (16, 4)")):
            sparse.solve(jnp.ones((16, 4)), jnp.ones(16))
        with pytest.raises(ValueError, match=re.escape("b must have shape (16,) or (16, k)")):
            sparse.solve(A, jnp.ones(15))
        with pytest.raises(ValueError, match=re.escape("(16, k), k >= 1, to match A (16, 16),"
                                                       " got (16, 0)")):
            sparse.solve(A, jnp.ones((16, 0)))
        with pytest.raises(ValueError, match="x0 must have b's shape"):
            sparse.solve(A, jnp.ones(16), x0=jnp.ones(3))
        with pytest.raises(ValueError, match="does not reproduce it"):
            sparse.solve(lambda x: x * x, jnp.ones(16))  # a matrix-free A must be linear
        with pytest.raises(ValueError, match="near_nullspace must have shape"):
            sparse.solve(A, jnp.ones(16), near_nullspace=jnp.ones((15, 2)))
        half = sparse.as_csr(A).with_values(sparse.as_csr(A).values.astype(jnp.float16))
        with pytest.raises(TypeError, match=re.escape(
                "A, b and x0 promote to float16, which the solvers do not compute in")):
            sparse.solve(half, jnp.ones(16, jnp.float16))

    @pytest.mark.parametrize("keyword, value, says", [
        # The distributed keywords work together (mpi_solve_test.py); alone they say so.
        ("comm", object(), "needs comm=, nglobal= and partition_info= together"),
        ("nglobal", 16, "needs comm=, nglobal= and partition_info= together"),
        ("partition_info", (0, 16), "needs comm=, nglobal= and partition_info= together"),
    ])  # nullspace=: nullspace_test.py; block_dim=: block_test.py
    def test_jax_amg_keywords_not_supported_yet(self, keyword, value, says):
        with pytest.raises(ValueError, match=re.escape(says)):
            sparse.solve(matrices.poisson_matrix(4), jnp.ones(16), **{keyword: value})

    def test_nonfinite_and_zero_diagonal_concrete(self):
        A = sparse.as_csr(matrices.poisson_matrix(4))
        with pytest.raises(ValueError, match="b holds NaN or Inf"):
            sparse.solve(A, jnp.full(16, jnp.nan))
        with pytest.raises(ValueError, match="NaN or Inf"):
            sparse.solve(A.with_values(A.values.at[3].set(jnp.inf)), jnp.ones(16))
        zero = A.with_values(jnp.where(A.row_ids == A.indices, 0.0, A.values))
        with pytest.raises(ValueError, match="zero .* diagonal entries .* divides by the"):
            sparse.solve(zero, jnp.ones(16))
        # A Krylov method without the diagonal needs no diagonal.
        _, info = sparse.solve(zero, jnp.ones(16), config={"solver": "GMRES",
                                                             "preconditioner": "NOSOLVER"})
        assert status(info) in ("SUCCESS", "FAILED")

    def test_bad_values_are_refused_before_a_first_setup(self):
        A = sparse.as_csr(matrices.poisson_matrix(6))
        sparse.clear_cache()
        with pytest.raises(ValueError, match=re.escape("A holds NaN or Inf (1 entries)")):
            sparse.solve(A.with_values(A.values.at[5].set(jnp.nan)), jnp.ones(36))
        zero = A.with_values(jnp.where(A.row_ids == A.indices, 0.0, A.values))
        with pytest.raises(ValueError, match="A has 36 zero .* diagonal entries"):
            sparse.solve(zero, jnp.ones(36))
        assert sparse.cache_info().currsize == 0  # no setup was built from them

    @pytest.mark.parametrize("config", [None, {"solver": "PCG", "preconditioner": "BLOCK_JACOBI"}])
    def test_bad_values_on_a_set_up_pattern_do_no_iteration(self, config):
        A = sparse.as_csr(matrices.poisson_matrix(6))
        b = jnp.ones((36, 2))
        sparse.solve(A, b, config=config)  # the pattern's setup is cached
        bad = A.with_values(A.values.at[7].set(jnp.inf))
        x, info = sparse.solve(bad, b, config=config, check=False)
        assert (info.status == sparse.Status.FAILED).all()
        assert (info.failure_reason == sparse.FailureReason.NONFINITE_MATRIX).all()
        assert (info.iterations == 0).all() and bool(jnp.isnan(x).all())
        # Checked, the same solve raises what a check before it would have said.
        with pytest.raises(ValueError, match=re.escape("A holds NaN or Inf (1 entries)")):
            sparse.solve(bad, b, config=config)
        with pytest.raises(ValueError, match=re.escape("x0 holds NaN or Inf (1 entries)")):
            sparse.solve(A, b[:, 0], x0=jnp.zeros(36).at[3].set(jnp.nan), config=config)
        zero = A.with_values(jnp.where(A.row_ids == A.indices, 0.0, A.values))
        with pytest.raises(ValueError, match="A has 36 zero .* diagonal entries"):
            sparse.solve(zero, b, config=config)

    def test_traced_bad_values_fail_with_a_reason(self):
        A = sparse.as_csr(matrices.poisson_matrix(4))
        solve = jax.jit(lambda v, b: sparse.solve(A.with_values(v), b)[1])
        info = solve(A.values.at[0].set(jnp.nan), jnp.ones(16))
        assert status(info) == "FAILED"
        assert sparse.FailureReason(int(info.failure_reason)).name == "NONFINITE_MATRIX"
        info = solve(jnp.where(A.row_ids == A.indices, 0.0, A.values), jnp.ones(16))
        assert sparse.FailureReason(int(info.failure_reason)).name == "ZERO_DIAGONAL"
        info = solve(A.values, jnp.full(16, jnp.inf))
        assert sparse.FailureReason(int(info.failure_reason)).name == "NONFINITE_INPUT"

    def test_traced_pattern_is_refused_with_advice(self):
        # A plain BCSR argument: its indices are traced (the gallery's keep theirs static).
        G = matrices.poisson_matrix(4)
        A = jsparse.BCSR((G.data, G.indices, G.indptr), shape=G.shape)
        with pytest.raises(TypeError, match="concrete(.|\n)*with_cache"):
            jax.jit(lambda A, b: sparse.solve(A, b))(A, jnp.ones(16))

    def test_missing_diagonal_entries_are_refused(self):
        A = scipy.sparse.csr_array(np.array([[0.0, 1.0], [1.0, 2.0]]))
        A.eliminate_zeros()
        with pytest.raises(ValueError, match="zero .* diagonal"):
            sparse.solve(A, np.ones(2, np.float32))


class TestRobustness:
    """Issue 29's silent and misleading answers: never worse than x0, norms that neither
    underflow nor overflow, a bounded max_iters and a history only when asked for."""

    def test_indefinite_amg_preconditioner_returns_x0_not_a_worse_iterate(self, x64):
        # Damped Jacobi with ω = 1.9 diverges on Poisson (ω ρ(D⁻¹A) ≈ 3.8 > 2): the V-cycle
        # is indefinite, and CG's one step raises the residual before it stops.
        A = matrices.poisson_matrix(24, dtype=np.float64)
        b = matrices.rhs_random(576, seed=1, dtype=np.float64)
        config = {"solver": "PCG", "store_res_history": 1, "preconditioner": {
            "solver": "AMG", "smoother": "BLOCK_JACOBI", "relaxation_factor": 1.9,
            "min_coarse_rows": 16}}
        x, info = sparse.solve(A, b, config=config)
        assert status(info) == "FAILED"
        reason = sparse.FailureReason(int(info.failure_reason))
        assert reason == sparse.FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE
        assert info.residual_history[1] > 1
        np.testing.assert_array_equal(x, np.zeros(576))
        assert relative_residual(A, x, b) == 1.0

    @pytest.mark.parametrize("dtype, scale", [(np.float32, 1e-25), (np.float32, 1e20),
                                              (np.float64, 1e-170), (np.float64, 1e170)])
    def test_tiny_and_huge_right_hand_sides(self, request, dtype, scale):
        """f32 entries of 1e-25 once read as ‖b‖ = 0 (SUCCESS, x = 0), of 1e20 as
        NONFINITE_INPUT; both solve as b of order one does."""
        if dtype == np.float64:
            request.getfixturevalue("x64")
        A = matrices.poisson_matrix(16, dtype=dtype)
        b = matrices.rhs_random(256, seed=1, dtype=dtype)
        config = {"solver": "PCG", "tolerance": 1e-5}
        x_unit, unit = sparse.solve(A, b, config=config)
        x, info = sparse.solve(A, b * scale, config=config)
        assert status(info) == "SUCCESS"
        assert int(info.iterations) == int(unit.iterations) > 0
        assert relative_residual(A, np.asarray(x, np.float64) / scale, b) <= 2e-5
        np.testing.assert_allclose(np.asarray(x, np.float64) / scale, x_unit, rtol=1e-4,
                                   atol=1e-4 * float(np.abs(x_unit).max()))

    def test_history_only_when_stored(self):
        A = matrices.poisson_matrix(8)
        b = matrices.rhs_ones(64)
        _, info = sparse.solve(A, b, config={"max_iters": 10**8})
        assert info.residual_history.shape == (0,) and status(info) == "SUCCESS"
        _, info = sparse.solve(A, jnp.stack([b, 2 * b], axis=1),
                               config={"max_iters": 20, "store_res_history": 1})
        assert info.residual_history.shape == (2, 21)

    def test_max_iters_beyond_int32_is_refused_before_any_setup(self):
        sparse.clear_cache()
        with pytest.raises(ValueError, match=re.escape(
                "solve: max_iters must be an int from 0 to 2147483647 (2**31 - 1: iterations"
                " are counted in int32), got 2147483648.")):
            sparse.solve(matrices.poisson_matrix(8), matrices.rhs_ones(64),
                         config={"max_iters": 2**31})
        assert sparse.cache_info().currsize == 0


class TestCache:
    def test_info_clear_and_size(self):
        sparse.clear_cache()
        b = matrices.rhs_ones(64)
        sparse.solve(matrices.poisson_matrix(8), b)
        sparse.solve(matrices.poisson_matrix(8), b)
        assert sparse.cache_info() == sparse.CacheInfo(hits=1, misses=1, maxsize=8, currsize=1)
        described = sparse.get_solver_cache_info()["single_gpu"]
        assert (described["size"], described["capacity"]) == (1, 8)
        assert [entry["n_rows"] for entry in described["entries"]] == [64]
        sparse.set_cache_size(1)
        try:
            sparse.solve(matrices.anisotropic_diffusion_matrix(8, 0.1, 0.0), b)
            assert sparse.cache_info().currsize == 1
            sparse.solve(matrices.poisson_matrix(8), b)
            assert sparse.cache_info().misses == 3
        finally:
            sparse.set_cache_size(8)
        sparse.clear_solver_cache()
        assert sparse.cache_info() == sparse.CacheInfo(0, 0, 8, 0)
        with pytest.raises(ValueError, match="non-negative int"):
            sparse.set_cache_size(-1)

    def test_clear_cache_frees_the_setups_device_arrays(self):
        A = sparse.as_csr(matrices.poisson3d_matrix(12))
        b = matrices.rhs_ones(12**3)
        sparse.clear_cache()
        gc.collect()
        before = {id(array) for array in jax.live_arrays()}
        x, info = sparse.solve(A, b)
        del x, info
        assert len(jax.live_arrays()) > len(before) + 10  # the hierarchy's arrays
        # ... also those JAX's compilation caches could keep, and the diagonal positions
        # the input check left on the device with A's pattern (while A lives on).
        sparse.clear_cache()
        gc.collect()
        assert {id(array) for array in jax.live_arrays()} <= before

    def test_a_solve_without_amg_sends_its_pattern_once(self):
        sparse.clear_cache()
        A = sparse.as_csr(matrices.poisson3d_matrix(6))
        b = matrices.rhs_ones(216)
        config = {"solver": "PCG", "preconditioner": "BLOCK_JACOBI"}
        states = [
            _setup.System.for_matrix(A, sparse.parse_amgx_config(config), None, False,
                                     check=False).state()
            for _ in range(2)]
        assert states[0].matrix.indices is states[1].matrix.indices
        assert states[0].diagonal is states[1].diagonal
        np.testing.assert_array_equal(states[0].diagonal, np.flatnonzero(A.row_ids == A.indices))
        _, info = sparse.solve(A, b, config=config)
        assert status(info) == "SUCCESS"
        assert sparse.cache_info() == sparse.CacheInfo(hits=2, misses=1, maxsize=8, currsize=1)

    @pytest.mark.parametrize("upwind, structures", [(False, 1), (True, 2)])
    def test_a_gradient_keeps_the_transposes_structure_where_its_pattern_differs(
            self, upwind, structures, x64):
        # Traced Aᵀ takes the structure latest used on its pattern: on a structurally
        # symmetric one (central differences) A's, on another (an upwind term only below
        # the diagonal) one of its own, kept beside A's.
        sparse.clear_cache()
        A = matrices.convection_diffusion_matrix_2d(6, peclet=5.0, dtype=np.float64)
        A = scipy.sparse.csr_matrix(A.todense())
        if upwind:
            A = A + scipy.sparse.diags(np.full(35, -0.5), -1)
        A = sparse.as_csr(A)
        b = matrices.rhs_ones(36, dtype=np.float64)
        gradient = jax.grad(lambda v: sparse.solve(A.with_values(v), b)[0].sum())(A.values)
        assert sparse.cache_info().currsize == structures
        dense = np.asarray(A.todense())
        x = np.linalg.solve(dense, np.asarray(b))
        # d(Σx)/dA_ij = −λ_i x_j with Aᵀλ = 1
        lam = np.linalg.solve(dense.T, np.ones(36))
        rows = np.repeat(np.arange(36), np.diff(A.indptr))
        np.testing.assert_allclose(gradient, -lam[rows] * x[A.indices], rtol=1e-4, atol=1e-8)

    def test_a_resetup_reruns_the_compiled_numeric_setup(self, monkeypatch, x64):
        """New values of the same kind on a cached structure run the numeric setup's
        executable again, without lowering (tracing, then looking up the compilation) it
        anew, which on a GPU cost the host longer than the device took for the setup.
        (A classical setup's is its size class's program, which no other test compiled.)"""
        sparse.clear_cache()
        A = sparse.as_csr(matrices.poisson_matrix(12, dtype=np.float64))
        b = matrices.rhs_ones(144, dtype=np.float64)
        lowered = []

        class CountingLowering:
            def lower(self, *args):
                lowered.append(args)
                return numeric_setup.lower(*args)

        numeric_setup = _setup._padded_numeric_setup
        monkeypatch.setattr(_setup, "_padded_numeric_setup", CountingLowering())
        _padded_setup.PROGRAMS.clear()
        x, _ = sparse.solve(A, b)
        x_doubled, _ = sparse.solve(A.with_values(2 * A.values), b)
        assert len(lowered) == 1
        np.testing.assert_allclose(2 * x_doubled, x, rtol=1e-6)  # the new values' setup
        single = A.with_values(A.values.astype(np.float32))
        sparse.solve(single, b.astype(np.float32))  # another dtype: another executable
        assert len(lowered) == 2

    def test_reverse_mode_of_a_closed_over_matrix_reusing_its_setup_under_jit(self, x64):
        # A matrix closed over by a jitted gradient, its transpose's hierarchy set up with
        # reuse_setup where the cache holds Aᵀ's structure (of a traced solve) but no
        # numbers: its concrete values are padded now, not by an operation staged into
        # the caller's program that the compiled numeric setup cannot take (it raised a
        # ConcretizationTypeError). 3D Poisson 10³: its finest level is padded.
        A = sparse.as_csr(matrices.poisson3d_matrix(10, dtype=np.float64))
        b = matrices.rhs_ones(1000, dtype=np.float64)
        sparse.clear_cache()
        sparse.solve(A, b)
        jax.jit(jax.grad(lambda v: jnp.sum(sparse.solve(A.with_values(v), b,
                                                        reuse_setup=True)[0] ** 2)))(A.values)

        def loss(b):
            return jnp.sum(sparse.solve(A, b, reuse_setup=True)[0] ** 2)

        np.testing.assert_allclose(jax.jit(jax.grad(loss))(b), jax.grad(loss)(b), rtol=1e-6)

    def test_reuse_setup_keeps_the_old_numbers(self, x64):
        sparse.clear_cache()
        A = sparse.as_csr(matrices.poisson_matrix(12, dtype=np.float64))
        b = matrices.rhs_ones(144, dtype=np.float64)
        _, fresh = sparse.solve(A, b)
        # With the preconditioner of A, 1.5 A is solved as fast (a scaled preconditioner).
        scaled = A.with_values(1.5 * A.values)
        x, reused = sparse.solve(scaled, b, reuse_setup=True)
        assert relative_residual(scaled, x, b) <= 1e-5
        assert int(reused.iterations) == int(fresh.iterations)
