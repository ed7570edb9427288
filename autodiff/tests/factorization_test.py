"""Tests for jaxsolve.autodiff.Factorization."""

import jax
import jax.numpy as jnp
import numpy as np

from helpers import (
    cholesky_decompose,
    cholesky_solve_with_factor,
    positive_definite,
    random_array,
)
from jaxsolve import autodiff


class TestFactorization:
    def test_factorization_is_a_pytree(self):
        """Factor under jit, reuse later; stack factorizations for vmap."""
        rng = np.random.default_rng(0)
        matrices = jnp.stack(
            [positive_definite(random_array(rng, (3, 3), np.float32)) for _ in range(4)]
        )
        factor = jax.jit(jax.vmap(
            lambda a: autodiff.cholesky_factor(a, decompose=cholesky_decompose)
        ))
        factorizations = factor(matrices)
        assert isinstance(factorizations, autodiff.Factorization)
        assert factorizations.factor.shape == (4, 3, 3)
        b = random_array(rng, (3,), np.float32)
        def solve(factorization):
            return autodiff.cholesky_solve(
                factorization, b, solve_with_factor=cholesky_solve_with_factor
            )

        x = jax.vmap(solve)(factorizations)
        np.testing.assert_allclose(
            jnp.einsum("aij,aj->ai", matrices, x), np.broadcast_to(b, (4, 3)),
            rtol=1e-4, atol=1e-5,
        )

    def test_factorization_factor_is_not_differentiated(self):
        """The gradient reaches A through `matrix` only; the factor gets none."""
        a = jnp.array([[4.0, 1.0], [1.0, 3.0]])
        factorization = autodiff.cholesky_factor(a, decompose=cholesky_decompose)
        grads = jax.grad(
            lambda f: jnp.sum(autodiff.cholesky_solve(
                f, jnp.ones(2), solve_with_factor=cholesky_solve_with_factor))
        )(factorization)
        np.testing.assert_array_equal(grads.factor, jnp.zeros((2, 2)))
        assert np.linalg.norm(grads.matrix) > 0.1
