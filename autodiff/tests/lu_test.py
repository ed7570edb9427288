"""Tests for jaxsolve.autodiff's LU rules: factor and solve."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import (
    HostServices,
    lu_decompose,
    lu_solve_with_factor,
    random_array,
    well_conditioned,
)
from jaxsolve import autodiff


class TestLuFactor:
    def test_lu_factor_keeps_matrix_and_factor(self):
        a = well_conditioned(np.random.default_rng(0), 3, np.float32)
        factorization = autodiff.lu_factor(a, decompose=lu_decompose)
        np.testing.assert_array_equal(factorization.matrix, a)
        lu, pivots = factorization.factor
        assert lu.shape == (3, 3) and pivots.dtype == jnp.int32

    def test_lu_factor_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "lu_factor: a must be a square (n, n) matrix, got shape (3,)")):
            autodiff.lu_factor(jnp.ones(3), decompose=lu_decompose)


class TestLuSolve:
    def test_lu_solve_against_jnp(self):
        def solver(a, b):
            factorization = autodiff.lu_factor(a, decompose=lu_decompose)
            return autodiff.lu_solve(
                factorization, b, solve_with_factor=lu_solve_with_factor
            )

        autodiff.check_solver_derivatives(
            solver,
            lambda rng, dtype: (
                well_conditioned(rng, 4, dtype), random_array(rng, (4,), dtype)
            ),
            reference=jnp.linalg.solve,
            dtypes=[np.complex64, np.float64, np.complex128], vmap_in_axes=[(0, 0)],
        )

    def test_lu_solve_reuses_the_factor(self, x64):
        """One getrf; JVP solves use trans='N', VJP solves trans='T'."""
        rng = np.random.default_rng(0)
        a, b = well_conditioned(rng, 5, np.float64), rng.standard_normal((8, 5))
        host = HostServices()

        def loss(a, b):
            factorization = autodiff.lu_factor(a, decompose=host.getrf)
            x = autodiff.lu_solve(factorization, b, solve_with_factor=host.getrs)
            return jnp.sum(jnp.sin(x))

        b_bar = jax.jit(jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0)))(a, b)
        assert host.calls == [
            ("getrf", (5, 5)), ("getrs_N", (5, 8)), ("getrs_T", (5, 8))
        ]
        x = np.linalg.solve(a, b.T)
        np.testing.assert_allclose(b_bar, np.linalg.solve(a.T, np.cos(x)).T, rtol=1e-12)

    def test_lu_solve_errors(self):
        factorization = autodiff.lu_factor(jnp.eye(2), decompose=lu_decompose)
        with pytest.raises(TypeError, match=re.escape(
                "lu_solve: A and b must have the same dtype: b is complex64, A is"
                " float32.")):
            autodiff.lu_solve(
                factorization, jnp.ones(2, jnp.complex64),
                solve_with_factor=lu_solve_with_factor,
            )
