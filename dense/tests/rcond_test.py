"""The reciprocal condition estimate in the Cholesky and LU statuses, and ``info = n + 1``.

A matrix singular to working precision (no pivot exactly zero, ``rcond`` below machine epsilon)
is reported as LAPACK's expert drivers report it: ``info = n + 1``, outputs computed, not NaN.
``rcond`` bounds ``1/κ₂(A)`` from above (exactly for Cholesky; up to ``√n ρ`` for LU, ``ρ``
partial pivoting's growth factor), and is close to it on well-conditioned matrices.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from helpers import hermitian_positive_definite, random_matrix, well_conditioned
from jaxsolve import dense

N = 8


def singular_by_a_duplicated_column():
    """The issue's matrix: SPD, then a column copied over another. LAPACK's getrf finds no
    exactly zero pivot (rounding leaves ~1e-16), so info was 0 and x meaningless."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, N))
    a = x @ x.T + N * np.eye(N)
    a[:, 7] = a[:, 3]
    return a


def nearly_singular_spd(dtype):
    """Positive definite, but singular to working precision: Cholesky succeeds."""
    return np.diag(np.geomspace(1.0, np.finfo(dtype).eps / 10, N)).astype(dtype)


def numerically_singular_message(routine, info, rcond):
    return (f"^{routine} failed: info={info}: the matrix is numerically singular: "
            f"rcond={rcond:.3g} is below machine epsilon")


class TestNumericallySingular:
    def test_lu_solve_of_the_issues_matrix(self, x64):
        a, b = singular_by_a_duplicated_column(), np.ones(N)
        x, status = dense.lu_solve(a, b, return_status=True)
        assert int(status) == N + 1 == status.n + 1 and not bool(status.ok)
        assert status.rcond.dtype == np.float64 and status.rcond.shape == ()
        assert 0 < float(status.rcond) < np.finfo(np.float64).eps
        assert np.all(np.isfinite(np.asarray(x)))  # as xGESVX: computed, not NaN
        with pytest.raises(dense.SolverError,
                           match=numerically_singular_message("lu_solve", N + 1, status.rcond)):
            dense.raise_on_failure(status)
        factor = dense.lu_factor(a)
        assert int(factor.status) == N + 1 and factor.status.routine == "lu_factor"
        assert float(factor.status.rcond) == float(status.rcond)
        _, again = dense.lu_solve(factor, b, return_status=True)
        assert int(again) == N + 1 and float(again.rcond) == float(status.rcond)
        _, context = jax.jit(dense.lu_solve_shardmap_ctx)(a, b)[1:]
        assert int(context) == N + 1

    @pytest.mark.parametrize("dtype", [np.float32, np.complex128])
    def test_cholesky_routines(self, dtype, x64):
        a, b = nearly_singular_spd(dtype), np.ones(N, dtype)
        eps = np.finfo(dtype).eps
        x, logdet, status = dense.potrs(a, b, return_logdet=True, return_status=True)
        assert int(status) == N + 1
        assert status.rcond.dtype == np.finfo(dtype).dtype
        # rcond = (min Lᵢᵢ / max Lᵢᵢ)² = λ_min / λ_max exactly for a diagonal matrix.
        np.testing.assert_allclose(float(status.rcond), eps / 10, rtol=1e-3)
        np.testing.assert_allclose(np.asarray(x), 1 / np.diag(a), rtol=1e-5)
        assert np.isfinite(float(logdet))
        with pytest.raises(dense.SolverError,
                           match=numerically_singular_message("potrs", N + 1, status.rcond)):
            dense.raise_on_failure(status)
        factor = dense.cho_factor(a)
        assert int(factor.status) == N + 1 and factor.status.routine == "cho_factor"
        assert int(dense.cho_solve(factor, b, return_status=True)[1]) == N + 1
        inverse, inverse_status = dense.cho_inverse(a, return_status=True)
        assert int(inverse_status) == N + 1 and np.all(np.isfinite(np.asarray(inverse)))
        assert int(jax.jit(dense.potrs_shardmap_ctx)(a, b)[-1]) == N + 1

    def test_exact_failures_keep_their_info_and_rcond_zero(self, x64):
        a = singular_by_a_duplicated_column()
        a[:, 5] = 0.0  # now an exactly zero pivot
        x, status = dense.lu_solve(a, np.ones(N), return_status=True)
        assert 0 < int(status) <= N and float(status.rcond) == 0.0
        assert np.all(np.isnan(np.asarray(x)))  # the NaN-fill contract of a failure
        _, status = dense.potrs(-np.eye(N), np.ones(N), return_status=True)
        assert int(status) == 1 and float(status.rcond) == 0.0

    def test_nonfinite_input_is_not_called_ill_conditioned(self, x64):
        a = np.eye(N)
        a[2, 2] = np.nan
        _, status = dense.lu_solve(a, np.ones(N), return_status=True)
        assert int(status) == dense.Status.NOT_FINITE and np.isnan(float(status.rcond))
        a[2, 2] = np.inf
        x, status = dense.lu_solve(a, np.ones(N), return_status=True)
        # x = A⁻¹ b is finite here (x₂ = 1/inf = 0), but the factor is not.
        assert np.all(np.isfinite(np.asarray(x))) and int(status) == dense.Status.NOT_FINITE


class TestEstimate:
    def test_cholesky_bounds_one_over_cond_from_above(self, x64):
        rng = np.random.default_rng(1)
        for dtype in (np.float64, np.complex128):
            a = hermitian_positive_definite(rng, N, dtype)
            _, status = dense.potrs(a, np.ones(N, dtype), return_status=True)
            true = 1 / np.linalg.cond(a)
            assert int(status) == 0
            # Proven: 1/κ₂ <= rcond. Observed on these matrices (x xᴴ + n I): within 4×.
            assert true * (1 - 1e-10) <= float(status.rcond) <= 4 * true

    def test_lu_bound(self, x64):
        rng = np.random.default_rng(2)
        for make in (well_conditioned, random_matrix):
            for _ in range(5):
                a = (make(rng, N, np.float64) if make is well_conditioned
                     else random_matrix(rng, (N, N), np.float64))
                _, status = dense.lu_solve(a, np.ones(N), return_status=True)
                rcond, true = float(status.rcond), 1 / np.linalg.cond(a)
                u = np.triu(scipy.linalg.lu_factor(a)[0])
                growth = np.max(np.abs(u)) / np.max(np.abs(a))
                # Proven: 1/κ₂ <= √n ρ rcond.
                assert int(status) == 0 and true <= np.sqrt(N) * growth * rcond * (1 + 1e-10)
                if make is well_conditioned:  # observed within 2× for these
                    assert rcond <= 2 * true

    def test_float32_threshold_is_float32_epsilon(self):
        a = np.diag([1.0, 1e-6]).astype(np.float32)  # fine for float32: 1e-6 > 1.2e-7
        _, status = dense.lu_solve(a, np.ones(2, np.float32), return_status=True)
        assert int(status) == 0 and status.rcond.dtype == np.float32
        _, status = dense.lu_solve(a * np.float32([1, 1e-2]), np.ones(2, np.float32),
                                   return_status=True)
        assert int(status) == 3


class TestTransformations:
    def test_jit_vmap_and_repr(self, x64):
        stack = np.stack([singular_by_a_duplicated_column(), well_conditioned(
            np.random.default_rng(3), N, np.float64)])
        solve = jax.jit(jax.vmap(lambda a: dense.lu_solve(a, jnp.ones(N), return_status=True)))
        x, status = solve(stack)
        np.testing.assert_array_equal(np.asarray(status), [N + 1, 0])
        assert status.rcond.shape == (2,) and float(status.rcond[0]) < 1e-15 < float(
            status.rcond[1])
        assert np.all(np.isfinite(np.asarray(x)))
        assert repr(status) == (f"Status(routine='lu_solve', info=[{N + 1}, 0], rcond="
                                f"[{float(status.rcond[0]):.3g}, {float(status.rcond[1]):.3g}])")
        with pytest.raises(dense.SolverError, match=r"^lu_solve failed for matrix \(0,\) of the "
                           r"stack \(1 of 2 failed\): info=9: the matrix is numerically singular"):
            dense.raise_on_failure(status)
        factors = jax.vmap(dense.cho_factor)(np.stack([nearly_singular_spd(np.float64),
                                                       np.eye(N)]))
        np.testing.assert_array_equal(np.asarray(factors.status), [N + 1, 0])

    def test_grad_is_unaffected(self, x64):
        rng = np.random.default_rng(4)
        a, b = hermitian_positive_definite(rng, N, np.float64), np.ones(N)

        def loss(a):
            x, status = dense.potrs(a, b, return_status=True)
            return jnp.sum(x), status

        (gradient, status) = jax.grad(loss, has_aux=True)(a)
        expected = jax.grad(lambda a: jnp.sum(dense.potrs(a, b)))(a)
        np.testing.assert_allclose(np.asarray(gradient), np.asarray(expected), rtol=1e-12)
        assert int(status) == 0 and float(status.rcond) > 0
        gradient = jax.grad(lambda a: jnp.sum(dense.lu_solve(a, b, return_status=True)[0]))(
            singular_by_a_duplicated_column())
        assert gradient.shape == (N, N)  # no error: rcond is not differentiated
        tangent = jax.jvp(lambda a: dense.potrs(a, b, return_status=True)[1].rcond, (a,),
                          (np.ones((N, N)),))[1]
        assert float(tangent) == 0.0

    def test_replicated_on_an_explicit_mesh(self, x64):
        mesh = jax.make_mesh((2, 2), ("pr", "pc"), devices=jax.devices()[:4])
        a = jax.device_put(singular_by_a_duplicated_column(), NamedSharding(mesh, P("pr", "pc")))
        b = jax.device_put(np.ones(N), NamedSharding(mesh, P("pr")))
        with jax.set_mesh(mesh):
            _, status = dense.lu_solve(a, b, T_A=2, return_status=True)
        assert int(status) == N + 1 and status.rcond.sharding.is_fully_replicated
