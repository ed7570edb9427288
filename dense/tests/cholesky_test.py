"""Tests for potrs, cho_factor, cho_solve, logdet and cho_inverse."""

import decimal
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

from helpers import (
    assert_failure_reported,
    grid_mesh,
    hermitian_positive_definite,
    max_error,
    put,
    random_matrix,
    tolerance,
)
from jaxsolve import dense
from jaxsolve.dense import _arguments, _cholesky, _compile


def hermitian_part(m):
    return (m + jnp.conj(m).T) / 2


class TestPotrs:
    def test_potrs_residual(self, dtype, mesh):
        rng = np.random.default_rng(0)
        a_host = hermitian_positive_definite(rng, 8, dtype)
        b_host = random_matrix(rng, (8, 3), dtype)
        a = put(a_host, mesh, P("pr", "pc"))
        b = put(b_host, mesh, P("pr", None))
        x, logdet, status = dense.potrs(a, b, return_logdet=True, return_status=True)
        assert x.dtype == dtype and x.shape == (8, 3)
        assert x.sharding.is_fully_replicated  # JAXMg's placement of x
        assert max_error(a_host @ np.asarray(x), b_host) < tolerance(dtype) * 10
        assert logdet.dtype == np.finfo(dtype).dtype and logdet.shape == ()
        assert logdet.sharding.is_fully_replicated
        expected = np.linalg.slogdet(a_host.astype(np.complex128))[1]
        assert abs(float(logdet) - expected) < tolerance(dtype) * 100
        assert status.routine == "potrs" and int(status.info) == 0
        dense.raise_on_failure(status)

    @pytest.mark.parametrize("grid", [(1, 1), (2, 2)], ids=["1x1", "2x2"])
    def test_potrs_jaxmg_readme_example(self, x64, grid):
        n = 12
        mesh = grid_mesh(*grid)
        a = put(jnp.diag(jnp.arange(1.0, n + 1)), mesh, P("pr", "pc"))
        b = put(jnp.ones(n), mesh, P("pr"))
        x, logdet = dense.potrs(a, b, T_A=3, mesh=mesh, matrix_specs=P("pr", "pc"),
                                return_logdet=True)
        assert x.dtype == np.float64
        np.testing.assert_allclose(x, 1 / np.arange(1.0, n + 1), rtol=1e-14)
        np.testing.assert_allclose(logdet, np.sum(np.log(np.arange(1.0, n + 1))), rtol=1e-14)

    def test_potrs_single_axis_mesh_and_replicated_rhs(self, x64):
        mesh = jax.sharding.Mesh(np.array(jax.devices("cpu")[:4]), ("x",))
        rng = np.random.default_rng(1)
        a_host = hermitian_positive_definite(rng, 8, np.float64)
        a = put(a_host, mesh, P("x"))
        b = put(np.ones(8), mesh, P())
        x = dense.potrs(a, b)
        assert x.sharding.is_fully_replicated
        np.testing.assert_allclose(a_host @ np.asarray(x), np.ones(8), atol=1e-12)
        x = dense.potrs(a, put(np.ones(8), mesh, P("x")), replicate_x=False)
        assert x.sharding.spec == P("x")

    def test_potrs_not_positive_definite(self):
        a = jnp.array([[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
        x, logdet, status = dense.potrs(a, jnp.ones(3), return_logdet=True, return_status=True)
        assert_failure_reported(status, [x, logdet], r"^potrs failed: info=2: the leading minor "
                                r"of order 2 is not positive definite$")

    def test_potrs_nonfinite_matrix(self):
        # NaN or Inf in the lower triangle, the one potrs reads: NOT_FINITE, not the order of a
        # leading minor (which would call a matrix of NaN "not positive definite").
        a = 2 * jnp.eye(4)
        for bad in (jnp.nan, jnp.inf):
            x, status = dense.potrs(a.at[2, 1].set(bad), jnp.ones(4), return_status=True)
            assert int(status.info) == dense.Status.NOT_FINITE
            assert np.all(np.isnan(np.asarray(x)))
            x, status = dense.potrs(a.at[1, 2].set(bad), jnp.ones(4), return_status=True)
            assert int(status.info) == 0  # the upper triangle is not read
            np.testing.assert_allclose(np.asarray(x), 0.5)
        factor = dense.cho_factor(a.at[3, 3].set(jnp.nan))
        assert int(factor.status.info) == dense.Status.NOT_FINITE

    def test_potrs_grad(self, x64):
        rng = np.random.default_rng(2)
        a = hermitian_positive_definite(rng, 4, np.float64)
        b = random_matrix(rng, (4, 2), np.float64)

        def f(m, b):
            x, logdet = dense.potrs(hermitian_part(m), b, return_logdet=True)
            return x, logdet

        check_grads(f, (a, b), order=1, modes=("fwd", "rev"))

    def test_potrs_grad_complex(self, x64):
        rng = np.random.default_rng(3)
        a = hermitian_positive_definite(rng, 4, np.complex128)
        b = random_matrix(rng, (4,), np.complex128)
        check_grads(lambda m, b: dense.potrs(hermitian_part(m), b), (a, b), order=1,
                    modes=("fwd", "rev"))

    def test_potrs_matches_jax_gradient(self, x64):
        rng = np.random.default_rng(4)
        a = jnp.asarray(hermitian_positive_definite(rng, 6, np.float64))
        b = jnp.asarray(random_matrix(rng, (6,), np.float64))

        def loss(solver):
            return lambda m: jnp.sum(solver(hermitian_part(m), b) ** 2)

        ours = jax.grad(loss(dense.potrs))(a)
        reference = jax.grad(loss(jnp.linalg.solve))(a)
        np.testing.assert_allclose(ours, reference, atol=1e-10)

    def test_potrs_vmap(self, x64):
        rng = np.random.default_rng(5)
        a = hermitian_positive_definite(rng, 4, np.float64)
        bs = random_matrix(rng, (3, 4), np.float64)
        x = jax.vmap(lambda b: dense.potrs(a, b))(bs)
        np.testing.assert_allclose(x, np.linalg.solve(a, bs.T).T, atol=1e-12)
        stack = np.stack([a, 2 * a, 3 * a])
        x, logdet, status = jax.vmap(
            lambda a, b: dense.potrs(a, b, return_logdet=True, return_status=True))(stack, bs)
        np.testing.assert_allclose(x, np.linalg.solve(stack, bs[..., None])[..., 0], atol=1e-12)
        np.testing.assert_allclose(logdet, np.linalg.slogdet(stack)[1], atol=1e-12)
        assert status.info.shape == (3,)

    def test_potrs_vmap_failure_in_stack(self):
        stack = jnp.stack([jnp.eye(2), -jnp.eye(2)])
        x, status = jax.vmap(lambda a: dense.potrs(a, jnp.ones(2), return_status=True))(stack)
        np.testing.assert_array_equal(status.info, [0, 1])
        assert np.all(np.isnan(np.asarray(x[1]))) and np.all(np.asarray(x[0]) == 1)
        with pytest.raises(dense.SolverError, match=r"^potrs failed for matrix \(1,\) of the "
                           r"stack \(1 of 2 failed\): info=1: "):
            dense.raise_on_failure(status)

    def test_potrs_jit(self, x64):
        mesh = grid_mesh(2, 2)
        rng = np.random.default_rng(6)
        a_host = hermitian_positive_definite(rng, 8, np.float64)
        a = put(a_host, mesh, P("pr", "pc"))
        b = put(np.ones(8), mesh, P("pr"))

        @jax.jit
        def f(a, b):
            return dense.potrs(a, b, mesh=mesh, in_specs=(P("pr", "pc"), P("pr")),
                               return_status=True, replicate_x=False)

        x, status = f(a, b)
        np.testing.assert_allclose(a_host @ np.asarray(x), np.ones(8), atol=1e-12)
        assert x.sharding.spec == P("pr") and int(status.info) == 0

    def test_potrs_donate(self, x64):
        mesh = grid_mesh(2, 2)
        a = put(jnp.diag(jnp.arange(1.0, 9.0)), mesh, P("pr", "pc"))
        b = put(jnp.ones(8), mesh, P("pr"))
        x = dense.potrs(a, b, donate=True)
        assert a.is_deleted() and b.is_deleted()
        np.testing.assert_allclose(x, 1 / np.arange(1.0, 9.0))
        # In place: on one device, x is written into b's buffer and A⁻¹ into a's.
        a, b = 2 * jnp.eye(4), jnp.ones(4)
        b_buffer = b.unsafe_buffer_pointer()
        assert dense.potrs(a, b, donate=True).unsafe_buffer_pointer() == b_buffer
        a = 2 * jnp.eye(4)
        a_buffer = a.unsafe_buffer_pointer()
        assert dense.cho_inverse(a, donate=True).unsafe_buffer_pointer() == a_buffer
        # ... and the factor takes a's buffer (it is deleted after the call, so the compiled
        # program's aliases are what shows it: output 3, the factor, aliases parameter 0).
        program = _compile._program(_cholesky._potrs_body, (_arguments.Layout(), False), 2, True)
        hlo = program.lower(jnp.eye(4), jnp.ones(4)).compile().as_text()
        aliases = re.search(r"input_output_alias=\{(.*?) \}, entry", hlo).group(1)
        assert "{0}: (1, {}" in aliases and "{3}: (0, {}" in aliases
        kept = put(jnp.eye(8), mesh, P("pr", "pc"))
        dense.potrs(kept, jnp.ones(8))
        assert not kept.is_deleted()

    def test_donate_is_ignored_under_transformations(self, x64):
        # Reverse mode needs the primal a again, and b here is the caller's array closed
        # over: neither may be deleted; the results are those without donation.
        a, b = 2 * jnp.eye(4) + 1, jnp.arange(1.0, 5.0)
        expected = jax.grad(lambda a: dense.potrs(a, b).sum())(a)
        np.testing.assert_allclose(
            jax.grad(lambda a: dense.potrs(a, b, donate=True).sum())(a), expected)
        jax.grad(lambda b: dense.potrs(a, b, donate=True).sum())(b)
        jax.jvp(lambda a: dense.syevd(a, donate=True)[0], (a,), (jnp.eye(4),))
        jax.vmap(lambda a: dense.potrs(a, b, donate=True))(jnp.stack([a, 2 * a]))
        assert not a.is_deleted() and not b.is_deleted()

    def test_donating_one_array_twice_is_refused(self, x64):
        a = 2 * jnp.eye(4)
        with pytest.raises(ValueError, match="the same array is passed twice"):
            dense.lu_solve(a, a, donate=True)
        assert not a.is_deleted()


class TestFactor:
    def test_cho_factor_solve_logdet(self, dtype_and_mesh):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(7)
        a_host = hermitian_positive_definite(rng, 8, dtype)
        a = put(a_host, mesh, P("pr", "pc"))
        factor = dense.cho_factor(a)
        assert factor.kind == "cholesky" and int(factor.status.info) == 0
        for b_host in (random_matrix(rng, (8,), dtype), random_matrix(rng, (8, 2), dtype)):
            b = put(b_host, mesh, P("pr"))
            x = dense.cho_solve(factor, b)
            assert x.sharding.is_equivalent_to(b.sharding, x.ndim) and x.dtype == dtype
            assert max_error(a_host @ np.asarray(x), b_host) < tolerance(dtype) * 10
        expected = np.linalg.slogdet(a_host.astype(np.complex128))[1]
        assert abs(float(dense.logdet(factor)) - expected) < tolerance(dtype) * 100

    def test_cho_factor_reused_under_grad(self, x64):
        rng = np.random.default_rng(8)
        k = hermitian_positive_definite(rng, 5, np.float64)
        y = random_matrix(rng, (5,), np.float64)

        def nll(m):
            factor = dense.cho_factor(hermitian_part(m))
            return y @ dense.cho_solve(factor, y) / 2 + dense.logdet(factor) / 2

        check_grads(nll, (k,), order=1, modes=("fwd", "rev"))
        alpha = np.linalg.solve(k, y)
        np.testing.assert_allclose(jax.grad(nll)(k),
                                   (np.linalg.inv(k) - np.outer(alpha, alpha)) / 2, atol=1e-10)

    def test_logdet_grad(self, x64):
        rng = np.random.default_rng(9)
        a = hermitian_positive_definite(rng, 3, np.float64)
        check_grads(lambda m: dense.logdet(dense.cho_factor(hermitian_part(m))), (a,), order=2,
                    modes=("fwd", "rev"))

    def test_cho_factor_jit_and_vmap(self, x64):
        rng = np.random.default_rng(10)
        a = hermitian_positive_definite(rng, 4, np.float64)
        factor = jax.jit(dense.cho_factor)(a)
        x = jax.jit(dense.cho_solve)(factor, jnp.ones(4))
        np.testing.assert_allclose(a @ np.asarray(x), np.ones(4), atol=1e-12)
        bs = random_matrix(rng, (3, 4), np.float64)
        x = jax.vmap(lambda b: dense.cho_solve(factor, b))(bs)
        np.testing.assert_allclose(x, np.linalg.solve(a, bs.T).T, atol=1e-12)
        factors = jax.vmap(dense.cho_factor)(np.stack([a, 2 * a]))
        np.testing.assert_allclose(jax.vmap(dense.logdet)(factors),
                                   np.linalg.slogdet(np.stack([a, 2 * a]))[1], atol=1e-12)
        # Outside vmap a stack of factors is refused (its diagonal would be read wrongly).
        for use in (dense.logdet, lambda f: dense.cho_solve(f, jnp.ones(4))):
            with pytest.raises(ValueError, match=re.escape(
                    "the factor is a stack of (2,) factors (its matrix has shape (2, 4, 4)), from"
                    " jax.vmap(cho_factor); call")):
                use(factors)
        lu_factors = jax.vmap(dense.lu_factor)(np.stack([a, 2 * a]))
        with pytest.raises(ValueError, match=re.escape("from jax.vmap(lu_factor)")):
            dense.lu_solve(lu_factors, jnp.ones(4))

    def test_cho_solve_rejects_lu_factor(self):
        factor = dense.lu_factor(jnp.eye(2))
        with pytest.raises(ValueError, match=r"^cho_solve: expected a factor from cho_factor, "
                           r"got a factor from lu_factor\.$"):
            dense.cho_solve(factor, jnp.ones(2))
        with pytest.raises(ValueError, match=r"^logdet: expected a factor from cho_factor, got "
                           r"ArrayImpl\.$"):
            dense.logdet(jnp.eye(2))


class TestChoInverse:
    def test_cho_inverse_residual(self, dtype_and_mesh):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(11)
        a_host = hermitian_positive_definite(rng, 8, dtype)
        a = put(a_host, mesh, P("pr", "pc"))
        inverse, status = dense.cho_inverse(a, return_status=True)
        assert inverse.sharding.is_equivalent_to(a.sharding, 2) and int(status.info) == 0
        assert max_error(a_host @ np.asarray(inverse), np.eye(8)) < tolerance(dtype) * 10

    def test_cho_inverse_grad(self, x64):
        rng = np.random.default_rng(12)
        a = hermitian_positive_definite(rng, 4, np.float64)
        check_grads(lambda m: dense.cho_inverse(hermitian_part(m)), (a,), order=1,
                    modes=("fwd", "rev"))


def test_log_determinants_are_rounded_once_not_per_entry(x64):
    """``Σ log dᵢ`` rounds each term: for logs of ±345 that cancel to 13.7 it is 48 ulps off
    (and JAXMg's README value of log 12! is one ulp off). The product in mantissa/exponent
    form is within 2 ulps, here exact."""
    rng = np.random.default_rng(0)
    d = np.where(np.arange(64) % 2 == 0, 1e150, 1e-150) * (1 + rng.uniform(0, 0.5, 64))
    decimal.getcontext().prec = 60
    exact = float(sum(decimal.Decimal(float(v)).ln() for v in d))
    ulp = np.spacing(exact)
    assert abs(np.sum(np.log(d)) - exact) > 10 * ulp  # what a plain sum of logs gives
    assert abs(float(dense.logdet(dense.cho_factor(np.diag(d)))) - exact) <= 2 * ulp
    assert abs(float(dense.slogdet(np.diag(d))[1]) - exact) <= 2 * ulp
    readme = float(dense.logdet(dense.cho_factor(np.diag(np.arange(1.0, 13.0)))))
    assert readme == 19.987214495661885 == float(decimal.Decimal(479001600).ln())
