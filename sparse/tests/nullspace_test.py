"""Tests for singular systems: solve(..., nullspace=, transpose_nullspace=).

The reference is the dense pseudo-inverse: the minimum-norm least-squares solution
``pinv(A) b`` and, for derivatives, ``jax.grad`` through ``jnp.linalg.pinv``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

from jaxsolve import sparse
from jaxsolve.sparse import matrices

PCG = {"solver": "PCG", "preconditioner": "AMG"}
TIGHT = {"tolerance": 1e-12, "max_iters": 200}


def status(info) -> str:
    return sparse.Status(int(info.status)).name


def dense(A) -> np.ndarray:
    return np.asarray(sparse.as_csr(A).todense(), np.float64)


def zero_mean_rhs(n, seed=1, dtype=jnp.float32):
    b = matrices.rhs_random(n, seed, dtype=dtype)
    return b - jnp.mean(b)


def torus_laplacian(n, dtype):
    """The periodic Poisson matrix as a function of its ``2n²`` edge weights.

    Any weights keep every row and column sum zero, so perturbing them keeps the null
    spaces: the derivatives of the minimum-norm solution are those of ``pinv``.
    Returns ``(A, values_of, dense_of, weights)``.
    """
    A = sparse.as_csr(matrices.periodic_poisson_matrix(n, dtype=dtype))
    i, j = np.divmod(np.arange(n * n), n)
    ends = np.concatenate([np.stack([np.arange(n * n), i * n + (j + 1) % n]),
                           np.stack([np.arange(n * n), ((i + 1) % n) * n + j])], axis=1)
    slot = {(int(r), int(c)): k for k, (r, c) in enumerate(zip(A.row_ids, A.indices))}
    incidence = np.zeros((A.values.size, ends.shape[1]))
    for e, (a, b) in enumerate(ends.T):
        for r, c, sign in ((a, a, 1), (b, b, 1), (a, b, -1), (b, a, -1)):
            incidence[slot[int(r), int(c)], e] += sign
    incidence = jnp.asarray(incidence, dtype)
    weights = 1 + 0.5 * jnp.sin(jnp.arange(ends.shape[1], dtype=dtype))

    def dense_of(values):
        return jnp.zeros((n * n, n * n), dtype).at[A.row_ids, A.indices].add(values)

    return A, lambda w: incidence @ w, dense_of, weights


class TestPeriodicPoisson:
    @pytest.mark.parametrize("config", [None, PCG], ids=["PBICGSTAB", "PCG"])
    def test_consistent_rhs_converges_to_the_zero_mean_solution(self, config):
        n = 16
        A = matrices.periodic_poisson_matrix(n)
        b = zero_mean_rhs(n * n)
        x, info = sparse.solve(A, b, config=config, nullspace=matrices.constant_nullspace(n * n))
        assert status(info) == "SUCCESS"
        assert int(info.iterations) <= 20
        assert float(jnp.linalg.norm(A @ x - b) / jnp.linalg.norm(b)) < 1e-5
        assert abs(float(jnp.sum(x))) < 1e-4 * float(jnp.linalg.norm(x)) * n
        assert float(info.rhs_inconsistency) < 1e-6

    @pytest.mark.parametrize("config", [None, PCG], ids=["PBICGSTAB", "PCG"])
    def test_inconsistent_rhs_reports_and_returns_the_minimum_norm_solution(self, x64, config):
        n = 5
        A = matrices.periodic_poisson_matrix(n, dtype=jnp.float64)
        b = matrices.rhs_random(n * n, 2, dtype=jnp.float64) + 0.7
        x, info = sparse.solve(A, b, config={**(config or {}), **TIGHT},
                               nullspace=jnp.ones(n * n))
        assert status(info) == "SUCCESS"
        expected = np.abs(np.sum(b)) / np.sqrt(n * n) / np.linalg.norm(b)  # ‖P b‖ / ‖b‖
        np.testing.assert_allclose(float(info.rhs_inconsistency), expected, rtol=1e-10)
        np.testing.assert_allclose(x, np.linalg.pinv(dense(A)) @ np.asarray(b), atol=1e-9)

    def test_all_of_b_in_the_null_space(self):
        A = matrices.periodic_poisson_matrix(16)
        x, info = sparse.solve(A, jnp.ones(256), nullspace=matrices.constant_nullspace(256))
        assert status(info) == "SUCCESS" and float(jnp.max(jnp.abs(x))) == 0
        np.testing.assert_allclose(float(info.rhs_inconsistency), 1, rtol=1e-6)

    def test_a_singular_coarsest_level_stays_finite(self):
        # Three levels down to at most 16 rows: the coarsest Galerkin matrix is singular,
        # and its pseudo-inverse (not its LU) keeps the cycle finite.
        n = 16
        A = matrices.periodic_poisson_matrix(n)
        config = {"solver": "PCG", "preconditioner": {"solver": "AMG", "min_coarse_rows": 16}}
        b = zero_mean_rhs(n * n)
        x, info = sparse.solve(A, b, config=config, nullspace=matrices.constant_nullspace(n * n))
        assert status(info) == "SUCCESS" and bool(jnp.all(jnp.isfinite(x)))
        assert float(jnp.linalg.norm(A @ x - b) / jnp.linalg.norm(b)) < 1e-5

    @pytest.mark.parametrize("algorithm", ["CLASSICAL", "AGGREGATION"])
    def test_disconnected_components_with_a_null_space_column_each(self, x64, algorithm):
        # Two tori (36 and 25 rows) in one matrix: null(A) is two-dimensional, one constant
        # per component, and the coarse levels must keep both (a component that coarsens to
        # one node merges into the aggregate of nodes without a neighbour).
        blocks = [scipy.sparse.csr_array(dense(matrices.periodic_poisson_matrix(n)))
                  for n in (6, 5)]
        A = sparse.as_csr(scipy.sparse.block_diag(blocks, format="csr"))
        nullspace = np.zeros((61, 2))
        nullspace[:36, 0] = nullspace[36:, 1] = 1
        b = matrices.rhs_random(61, 3, dtype=jnp.float64) + 0.5  # inconsistent in both
        config = {**TIGHT, "preconditioner": {"solver": "AMG", "algorithm": algorithm,
                                              "min_coarse_rows": 4}}
        x, info = sparse.solve(A, b, config=config, nullspace=nullspace)
        assert status(info) == "SUCCESS"
        np.testing.assert_allclose(x, np.linalg.pinv(dense(A)) @ np.asarray(b), atol=1e-9)

    def test_rhs_inconsistency_is_nan_without_a_null_space(self):
        _, info = sparse.solve(matrices.poisson_matrix(8), jnp.ones((64, 3)))
        assert info.rhs_inconsistency.shape == (3,)
        assert bool(jnp.all(jnp.isnan(info.rhs_inconsistency)))


class TestNonsymmetric:
    """``A = L diag(s)``: null(A) = span(1/s), null(Aᵀ) = span(1), both exact."""

    def test_minimum_norm_solution_and_gradients(self, x64):
        n = 5
        L, values_of, dense_of, weights = torus_laplacian(n, jnp.float64)
        s = 1 + 0.3 * jnp.cos(jnp.arange(n * n, dtype=jnp.float64))
        scaled = lambda w: values_of(w) * s[L.indices]  # noqa: E731
        b = matrices.rhs_random(n * n, 3, dtype=jnp.float64) + 0.2  # inconsistent

        def loss(w, b):
            x, _ = sparse.solve(L.with_values(scaled(w)), b, config=TIGHT,
                                nullspace=1 / s, transpose_nullspace=jnp.ones(n * n))
            return jnp.sum(jnp.sin(x))

        def reference(w, b):
            return jnp.sum(jnp.sin(jnp.linalg.pinv(dense_of(scaled(w))) @ b))

        x, info = sparse.solve(L.with_values(scaled(weights)), b, config=TIGHT,
                               nullspace=1 / s, transpose_nullspace=jnp.ones(n * n))
        assert status(info) == "SUCCESS"
        np.testing.assert_allclose(x, jnp.linalg.pinv(dense_of(scaled(weights))) @ b,
                                   atol=1e-9)
        expected = float(jnp.abs(jnp.sum(b)) / n / jnp.linalg.norm(b))
        np.testing.assert_allclose(float(info.rhs_inconsistency), expected, rtol=1e-10)
        for got, want in zip(jax.grad(loss, (0, 1))(weights, b),
                             jax.grad(reference, (0, 1))(weights, b)):
            np.testing.assert_allclose(got, want, atol=1e-8)

    def test_a_wrong_default_transpose_nullspace_is_an_error(self, x64):
        n = 4
        L, values_of, _, weights = torus_laplacian(n, jnp.float64)
        s = 1 + 0.3 * jnp.cos(jnp.arange(n * n, dtype=jnp.float64))
        A = L.with_values(values_of(weights) * s[L.indices])
        with pytest.raises(ValueError, match="needs both nullspace= and transpose_nullspace="):
            sparse.solve(A, jnp.ones(n * n), nullspace=1 / s)


class TestGradients:
    @pytest.mark.parametrize("derivative", ["implicit", "adjoint"])
    @pytest.mark.parametrize("config", [{}, PCG], ids=["PBICGSTAB", "PCG"])
    def test_match_the_pseudo_inverse(self, x64, derivative, config):
        n = 5
        A, values_of, dense_of, weights = torus_laplacian(n, jnp.float64)
        b = matrices.rhs_random(n * n, 4, dtype=jnp.float64) + 0.5  # inconsistent

        def loss(w, b):
            x, _ = sparse.solve(A.with_values(values_of(w)), b, config={**config, **TIGHT},
                                derivative=derivative, nullspace=jnp.ones(n * n))
            return jnp.sum(jnp.cos(x) * jnp.arange(n * n, dtype=jnp.float64))

        def reference(w, b):
            x = jnp.linalg.pinv(dense_of(values_of(w))) @ b
            return jnp.sum(jnp.cos(x) * jnp.arange(n * n, dtype=jnp.float64))

        for got, want in zip(jax.grad(loss, (0, 1))(weights, b),
                             jax.grad(reference, (0, 1))(weights, b)):
            np.testing.assert_allclose(got, want, atol=1e-8)

    def test_forward_mode_matches_finite_differences(self, x64):
        n = 5
        A, values_of, _, weights = torus_laplacian(n, jnp.float64)
        b = zero_mean_rhs(n * n, 5, jnp.float64)
        direction = jnp.cos(jnp.arange(weights.size, dtype=jnp.float64))

        def solution(w):
            return sparse.solve(A.with_values(values_of(w)), b, config=TIGHT,
                                nullspace=jnp.ones(n * n))[0]

        _, tangent = jax.jvp(solution, (weights,), (direction,))
        eps = 1e-6
        difference = (solution(weights + eps * direction)
                      - solution(weights - eps * direction)) / (2 * eps)
        np.testing.assert_allclose(tangent, difference, atol=1e-6)


class TestTransformations:
    def test_jit_over_values_and_nullspace(self):
        n = 16
        A = sparse.as_csr(matrices.periodic_poisson_matrix(n))
        b = zero_mean_rhs(n * n)

        @jax.jit
        def run(values, b, nullspace):
            return sparse.solve(A.with_values(values), b, nullspace=nullspace)

        x, info = run(A.values, b, matrices.constant_nullspace(n * n))
        assert status(info) == "SUCCESS"
        assert float(jnp.linalg.norm(A @ x - b) / jnp.linalg.norm(b)) < 1e-5
        _, info = run(A.values, b, jnp.full((n * n, 1), jnp.nan))
        assert status(info) == "FAILED"
        assert sparse.FailureReason(int(info.failure_reason)).name == "NONFINITE_INPUT"

    def test_vmap_over_b(self):
        n = 16
        A = matrices.periodic_poisson_matrix(n)
        bs = jnp.stack([zero_mean_rhs(n * n, seed) + shift
                        for seed, shift in ((1, 0.0), (2, 0.5), (3, -1.0))])
        N = matrices.constant_nullspace(n * n)
        xs, infos = jax.vmap(lambda b: sparse.solve(A, b, nullspace=N))(bs)
        assert infos.rhs_inconsistency.shape == (3,)
        assert float(infos.rhs_inconsistency[0]) < 1e-6 < float(infos.rhs_inconsistency[1])
        for x, b in zip(xs, bs):
            x_one, _ = sparse.solve(A, b, nullspace=N)
            np.testing.assert_allclose(x, x_one, atol=1e-4)
            assert abs(float(jnp.mean(x))) < 1e-6


class TestErrors:
    A = staticmethod(lambda: matrices.periodic_poisson_matrix(4))

    @pytest.mark.parametrize("nullspace", [jnp.ones(15), jnp.ones((16, 16)), jnp.ones((4, 4, 1))])
    def test_shape(self, nullspace):
        with pytest.raises(ValueError, match=r"nullspace must have shape \(16,\) or \(16, k\)"):
            sparse.solve(self.A(), jnp.zeros(16), nullspace=nullspace)

    def test_dtype(self):
        with pytest.raises(TypeError, match="nullspace must be a floating-point array"):
            sparse.solve(self.A(), jnp.zeros(16), nullspace=np.ones(16, np.int32))
        with pytest.raises(TypeError, match="transpose_nullspace is complex"):
            sparse.solve(self.A(), jnp.zeros(16), transpose_nullspace=jnp.ones(16, jnp.complex64))

    def test_nan(self):
        with pytest.raises(ValueError, match=r"nullspace holds NaN or Inf \(1 entries\)"):
            sparse.solve(self.A(), jnp.zeros(16), nullspace=jnp.ones(16).at[3].set(jnp.nan))

    def test_not_a_null_space(self):
        with pytest.raises(ValueError, match="nullspace is not a null space of A"):
            sparse.solve(self.A(), jnp.zeros(16), nullspace=jnp.arange(16.0))

    def test_dependent_columns(self):
        with pytest.raises(ValueError, match="columns of nullspace are linearly dependent"):
            sparse.solve(self.A(), jnp.zeros(16), nullspace=jnp.ones((16, 2)))


def test_gallery_periodic_poisson_matches_its_definition():
    n = 5
    A = dense(matrices.periodic_poisson_matrix(n))
    one_d = 2 * np.eye(n) - np.roll(np.eye(n), 1, axis=1) - np.roll(np.eye(n), -1, axis=1)
    np.testing.assert_array_equal(A, np.kron(one_d, np.eye(n)) + np.kron(np.eye(n), one_d))
    np.testing.assert_allclose(np.linalg.norm(matrices.constant_nullspace(n * n)), 1, rtol=1e-6)
