"""Tests for jaxsolve.autodiff's Cholesky rules: factor, solve and logdet."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import (
    HostServices,
    cholesky_decompose,
    cholesky_solve_with_factor,
    positive_definite,
    random_array,
)
from jaxsolve import autodiff


def factor(m):
    """The Cholesky factorization of the positive definite A = M Mᴴ / n + I."""
    return autodiff.cholesky_factor(positive_definite(m), decompose=cholesky_decompose)


def make_problem(rng, dtype):
    return random_array(rng, (4, 4), dtype), random_array(rng, (4, 2), dtype)


class TestCholeskyFactor:
    def test_cholesky_factor_keeps_matrix_and_factor(self):
        m = random_array(np.random.default_rng(0), (3, 3), np.float32)
        factorization = factor(m)
        np.testing.assert_allclose(factorization.matrix, positive_definite(m))
        lower = factorization.factor
        np.testing.assert_allclose(lower @ lower.T, factorization.matrix, rtol=1e-5)

    def test_cholesky_factor_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "cholesky_factor: a must be a square (n, n) matrix, got shape (2, 3)")):
            autodiff.cholesky_factor(jnp.ones((2, 3)), decompose=cholesky_decompose)
        with pytest.raises(TypeError, match="cholesky_factor: a must have a floating"):
            autodiff.cholesky_factor(
                jnp.ones((2, 2), jnp.int32), decompose=cholesky_decompose
            )


class TestCholeskySolve:
    def test_cholesky_solve_against_jnp(self):
        def solver(m, b):
            return autodiff.cholesky_solve(
                factor(m), b, solve_with_factor=cholesky_solve_with_factor
            )

        autodiff.check_solver_derivatives(
            solver, make_problem,
            reference=lambda m, b: jnp.linalg.solve(positive_definite(m), b),
            dtypes=[np.float32, np.float64, np.complex128], vmap_in_axes=[(None, 0)],
        )

    def test_cholesky_solve_reuses_the_factor(self, x64):
        """One potrf; the forward and the derivative solve reuse its factor."""
        rng = np.random.default_rng(0)
        a = np.asarray(positive_definite(random_array(rng, (5, 5), np.float64)))
        b = rng.standard_normal((8, 5))
        host = HostServices()

        def loss(a, b):
            factorization = autodiff.cholesky_factor(a, decompose=host.potrf)
            x = autodiff.cholesky_solve(factorization, b, solve_with_factor=host.potrs)
            return jnp.sum(x**2)

        gradient = jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(None, 0))
        a_bar, _ = jax.jit(gradient)(a, b)
        assert host.calls == [("potrf", (5, 5)), ("potrs", (5, 8)), ("potrs", (5, 8))]
        np.testing.assert_allclose(a_bar, np.transpose(a_bar, (0, 2, 1)), rtol=1e-12)

    def test_cholesky_solve_errors(self):
        factorization = factor(jnp.eye(3))
        with pytest.raises(TypeError, match=re.escape(
                "cholesky_solve: factorization must be a Factorization")):
            autodiff.cholesky_solve(
                jnp.eye(3), jnp.ones(3), solve_with_factor=cholesky_solve_with_factor
            )
        with pytest.raises(ValueError, match=re.escape(
                "cholesky_solve: A x cannot be formed for b of shape (2,)")):
            autodiff.cholesky_solve(
                factorization, jnp.ones(2), solve_with_factor=cholesky_solve_with_factor
            )


class TestCholeskyLogdet:
    def test_cholesky_logdet_against_slogdet(self):
        def solver(m):
            return autodiff.cholesky_logdet(
                factor(m), solve_with_factor=cholesky_solve_with_factor
            )

        autodiff.check_solver_derivatives(
            solver,
            lambda rng, dtype: (random_array(rng, (4, 4), dtype),),
            reference=lambda m: jnp.linalg.slogdet(positive_definite(m))[1],
            dtypes=[np.float64, np.complex128],
        )

    def test_cholesky_logdet_reuses_the_factor(self, x64):
        """Value from the factor, gradient A⁻ᵀ from one n-column solve."""
        rng = np.random.default_rng(0)
        a = np.asarray(positive_definite(random_array(rng, (4, 4), np.float64)))
        host = HostServices()

        def logdet(a):
            factorization = autodiff.cholesky_factor(a, decompose=host.potrf)
            return autodiff.cholesky_logdet(factorization, solve_with_factor=host.potrs)

        value, grad = jax.value_and_grad(logdet)(a)
        np.testing.assert_allclose(value, np.linalg.slogdet(a)[1], rtol=1e-12)
        np.testing.assert_allclose(grad, np.linalg.inv(a), rtol=1e-10)
        assert host.calls == [("potrf", (4, 4)), ("potrs", (4, 4))]

    def test_cholesky_logdet_with_a_custom_factor(self, x64):
        """A factor that is not an array needs `logdet_of_factor`."""
        a = jnp.array([[4.0, 1.0], [1.0, 3.0]])

        def solve_with_factor(factor, rhs):
            return cholesky_solve_with_factor(factor["lower"], rhs)

        def logdet_of_factor(factor):
            return 2 * jnp.sum(jnp.log(jnp.diagonal(factor["lower"])))

        def logdet(a):
            factorization = autodiff.cholesky_factor(
                a, decompose=lambda a: {"lower": jnp.linalg.cholesky(a)}
            )
            return autodiff.cholesky_logdet(
                factorization,
                solve_with_factor=solve_with_factor,
                logdet_of_factor=logdet_of_factor,
            )

        np.testing.assert_allclose(logdet(a), np.log(11.0), rtol=1e-12)
        np.testing.assert_allclose(jax.grad(logdet)(a), np.linalg.inv(a), rtol=1e-12)

    def test_cholesky_logdet_errors(self):
        factorization = autodiff.cholesky_factor(
            jnp.eye(2), decompose=lambda a: {"lower": a}
        )
        with pytest.raises(TypeError, match="cholesky_logdet: the factor is not an"):
            autodiff.cholesky_logdet(
                factorization, solve_with_factor=cholesky_solve_with_factor
            )
        with pytest.raises(TypeError, match=re.escape(
                "cholesky_logdet: logdet_of_factor must return a real scalar of dtype"
                " float32, got shape (2,)")):
            autodiff.cholesky_logdet(
                factorization, solve_with_factor=cholesky_solve_with_factor,
                logdet_of_factor=lambda f: jnp.diagonal(f["lower"]),
            )
