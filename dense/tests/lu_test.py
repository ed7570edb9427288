"""Tests for lu_solve, lu_factor, solve and slogdet."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

from helpers import (
    assert_failure_reported,
    grid_mesh,
    max_error,
    put,
    random_matrix,
    tolerance,
    well_conditioned,
)
from jaxsolve import dense


class TestLuSolve:
    def test_lu_solve_residual(self, dtype, mesh):
        rng = np.random.default_rng(20)
        a_host = well_conditioned(rng, 8, dtype)
        b_host = random_matrix(rng, (8, 2), dtype)
        a = put(a_host, mesh, P("pr", "pc"))
        b = put(b_host, mesh, P("pr"))
        x, status = dense.lu_solve(a, b, T_A=4, return_status=True)
        assert x.dtype == dtype and x.sharding.is_fully_replicated  # JAXMg's placement
        assert max_error(a_host @ np.asarray(x), b_host) < tolerance(dtype) * 10
        assert status.routine == "lu_solve" and int(status.info) == 0

    def test_lu_solve_singular(self):
        a = jnp.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]])
        x, status = dense.lu_solve(a, jnp.ones(3), return_status=True)
        assert_failure_reported(status, [x], r"^lu_solve failed: info=2: U\(2,2\) is exactly "
                                r"zero \(1-based\), so the matrix is singular$")

    def test_lu_solve_grad(self, x64):
        rng = np.random.default_rng(21)
        a = well_conditioned(rng, 5, np.float64)
        b = random_matrix(rng, (5, 2), np.float64)
        check_grads(jax.jit(dense.lu_solve), (a, b), order=1, modes=("fwd", "rev"))

    def test_lu_solve_grad_complex(self, x64):
        rng = np.random.default_rng(22)
        a = well_conditioned(rng, 4, np.complex128)
        b = random_matrix(rng, (4,), np.complex128)
        check_grads(jax.jit(dense.lu_solve), (a, b), order=1, modes=("fwd", "rev"))

    def test_lu_solve_vmap_and_jit(self, x64):
        rng = np.random.default_rng(23)
        a = well_conditioned(rng, 4, np.float64)
        bs = random_matrix(rng, (3, 4), np.float64)
        x = jax.jit(jax.vmap(lambda b: dense.lu_solve(a, b)))(bs)
        np.testing.assert_allclose(x, np.linalg.solve(a, bs.T).T, atol=1e-12)
        stack = np.stack([a, a.T, 2 * a])
        x = jax.vmap(dense.lu_solve)(stack, bs)
        np.testing.assert_allclose(x, np.linalg.solve(stack, bs[..., None])[..., 0], atol=1e-12)

    def test_lu_solve_donate(self, x64):
        mesh = grid_mesh(2, 1)
        a = put(2 * np.eye(4), mesh, P("pr", "pc"))
        b = put(np.ones(4), mesh, P("pr"))
        x = dense.lu_solve(a, b, donate=True)
        assert a.is_deleted() and b.is_deleted()
        np.testing.assert_allclose(x, np.full(4, 0.5))


class TestLuFactor:
    def test_lu_factor_reused(self, dtype_and_mesh):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(24)
        a_host = well_conditioned(rng, 8, dtype)
        factor = dense.lu_factor(put(a_host, mesh, P("pr", "pc")))
        assert factor.kind == "lu" and int(factor.status.info) == 0
        for b_host in (random_matrix(rng, (8,), dtype), random_matrix(rng, (8, 3), dtype)):
            x = dense.lu_solve(factor, put(b_host, mesh, P("pr")))
            assert max_error(a_host @ np.asarray(x), b_host) < tolerance(dtype) * 10

    def test_lu_factor_grad_reuses_transposed_solve(self, x64):
        rng = np.random.default_rng(25)
        a = well_conditioned(rng, 4, np.float64)
        b = random_matrix(rng, (4,), np.float64)

        def loss(m, b):
            return jnp.sum(dense.lu_solve(dense.lu_factor(m), b) ** 2)

        check_grads(loss, (a, b), order=1, modes=("fwd", "rev"))

    def test_lu_solve_factor_rejects_mesh(self):
        factor = dense.lu_factor(jnp.eye(2))
        with pytest.raises(ValueError, match=r"^lu_solve: a is a factor from lu_factor, which "
                           r"keeps its own mesh and specs; leave mesh, matrix_specs and in_specs "
                           r"out\.$"):
            dense.lu_solve(factor, jnp.ones(2), matrix_specs=P("x"))
        with pytest.raises(ValueError, match=r"^lu_solve: expected a factor from lu_factor, got "
                           r"a factor from cho_factor\.$"):
            dense.lu_solve(dense.cho_factor(jnp.eye(2)), jnp.ones(2))


class TestSolveSlogdet:
    def test_solve_matches_numpy_shapes(self, x64):
        rng = np.random.default_rng(26)
        a = np.stack([well_conditioned(rng, 4, np.float64) for _ in range(3)])
        b_vector = random_matrix(rng, (4,), np.float64)
        b_matrix = random_matrix(rng, (3, 4, 2), np.float64)
        np.testing.assert_allclose(dense.solve(a, b_vector), np.linalg.solve(a, b_vector),
                                   atol=1e-12)
        np.testing.assert_allclose(dense.solve(a, b_matrix), np.linalg.solve(a, b_matrix),
                                   atol=1e-12)
        np.testing.assert_allclose(dense.solve(a[0], b_matrix[0]),
                                   np.linalg.solve(a[0], b_matrix[0]), atol=1e-12)

    def test_slogdet_values(self, dtype):
        rng = np.random.default_rng(27)
        a = random_matrix(rng, (2, 5, 5), dtype)
        sign, logabsdet = dense.slogdet(a)
        expected_sign, expected = np.linalg.slogdet(a.astype(np.complex128))
        assert sign.dtype == dtype and logabsdet.dtype == np.finfo(dtype).dtype
        np.testing.assert_allclose(sign, expected_sign, atol=tolerance(dtype) * 10)
        np.testing.assert_allclose(logabsdet, expected, atol=tolerance(dtype) * 10)

    def test_slogdet_singular(self):
        sign, logabsdet = dense.slogdet(jnp.array([[1.0, 2.0], [2.0, 4.0]]))
        assert float(sign) == 0 and float(logabsdet) == -np.inf

    @pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["float64", "complex128"])
    def test_slogdet_grad(self, x64, dtype):
        rng = np.random.default_rng(28)
        a = well_conditioned(rng, 4, dtype)
        check_grads(lambda m: dense.slogdet(m)[1], (a,), order=1, modes=("fwd", "rev"))
        ours = jax.grad(lambda m: dense.slogdet(m)[1])(a)
        reference = jax.grad(lambda m: jnp.linalg.slogdet(m)[1])(a)
        np.testing.assert_allclose(ours, reference, atol=1e-12)
