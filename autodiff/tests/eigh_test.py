"""Tests for jaxsolve.autodiff.eigh and eigh_generalized."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from helpers import eigh_decompose, hermitian, positive_definite, random_array, sygvd
from jaxsolve import autodiff


def gauge_invariant(w, v):
    """Eigenvalues, V diag(sin w) Vᴴ and |V|²: independent of eigenvector phases."""
    function = (v * jnp.sin(w).astype(v.dtype)[None, :]) @ jnp.conj(v).T
    return w, function, jnp.abs(v) ** 2


def one_matrix(rng, dtype):
    return (random_array(rng, (4, 4), dtype),)


class TestEigh:
    def test_eigh_against_jnp(self):
        def solver(m):
            return gauge_invariant(
                *autodiff.eigh(hermitian(m), decompose=eigh_decompose)
            )

        autodiff.check_solver_derivatives(
            solver,
            one_matrix,
            reference=lambda m: gauge_invariant(*jnp.linalg.eigh(hermitian(m))),
            dtypes=[np.float32, np.float64, np.complex128],
        )

    def test_eigh_degenerate_like_jax(self, x64):
        """Repeated eigenvalues: finite eigenvalue derivatives, non-finite vectors."""
        a = jnp.diag(jnp.array([1.0, 1.0, 2.0]))
        rng = np.random.default_rng(0)
        a_dot = hermitian(jnp.asarray(random_array(rng, (3, 3), np.float64)))
        (_, _), (w_dot, v_dot) = jax.jvp(
            lambda a: autodiff.eigh(a, decompose=eigh_decompose), (a,), (a_dot,)
        )
        (_, _), (w_dot_jax, v_dot_jax) = jax.jvp(jnp.linalg.eigh, (a,), (a_dot,))
        np.testing.assert_allclose(w_dot, w_dot_jax, rtol=1e-12)
        # The repeated eigenvalue's total moves by the trace of Ȧ on its space.
        np.testing.assert_allclose(
            jnp.sum(w_dot[:2]), a_dot[0, 0] + a_dot[1, 1], rtol=1e-12
        )
        assert not np.all(np.isfinite(v_dot)) and not np.all(np.isfinite(v_dot_jax))

    def test_eigh_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "eigh: a must be a square (n, n) matrix, got shape (2, 3)")):
            autodiff.eigh(jnp.ones((2, 3)), decompose=eigh_decompose)
        with pytest.raises(ValueError, match=re.escape(
                "eigh: output 1 of `decompose` must have shape (2, 2), got (2,)")):
            autodiff.eigh(jnp.eye(2), decompose=lambda a: (jnp.diag(a), jnp.diag(a)))
        with pytest.raises(TypeError, match=re.escape(
                "eigh: output 0 of `decompose` must have dtype float32, got"
                " complex64")):
            autodiff.eigh(
                jnp.eye(2, dtype=jnp.complex64),
                decompose=lambda a: (jnp.diag(a), a),
            )


class TestEighGeneralized:
    def test_eigh_generalized_against_jax(self):
        """The reference is JAX's derivative of the Cholesky-reduction sygvd."""

        def make_args(rng, dtype):
            return random_array(rng, (4, 4), dtype), random_array(rng, (4, 4), dtype)

        def solver(m, n):
            w, v = autodiff.eigh_generalized(
                hermitian(m), positive_definite(n), decompose=sygvd
            )
            return gauge_invariant(w, v)

        autodiff.check_solver_derivatives(
            solver, make_args,
            reference=lambda m, n: gauge_invariant(
                *sygvd(hermitian(m), positive_definite(n))
            ),
            dtypes=[np.float64, np.complex128], vmap_in_axes=[(0, None)],
        )

    def test_eigh_generalized_against_scipy(self, x64):
        rng = np.random.default_rng(0)
        a = np.asarray(hermitian(random_array(rng, (5, 5), np.complex128)))
        b = np.asarray(positive_definite(random_array(rng, (5, 5), np.complex128)))
        w, v = (np.asarray(x) for x in autodiff.eigh_generalized(a, b, decompose=sygvd))
        expected_w = scipy.linalg.eigh(a, b, eigvals_only=True)
        np.testing.assert_allclose(w, expected_w, rtol=1e-12)
        np.testing.assert_allclose(np.conj(v).T @ b @ v, np.eye(5), atol=1e-12)
        # The eigenvalue derivative is vᵢᴴ (Ȧ - wᵢ Ḃ) vᵢ.
        a_dot = np.asarray(hermitian(random_array(rng, (5, 5), np.complex128)))
        b_dot = np.asarray(hermitian(random_array(rng, (5, 5), np.complex128)))
        _, (w_dot, _) = jax.jvp(
            lambda a, b: autodiff.eigh_generalized(a, b, decompose=sygvd),
            (a, b), (a_dot, b_dot),
        )
        expected = np.real(np.einsum("ji,jk,ki->i", np.conj(v), a_dot, v)
                           - w * np.einsum("ji,jk,ki->i", np.conj(v), b_dot, v))
        np.testing.assert_allclose(w_dot, expected, rtol=1e-10)

    def test_eigh_generalized_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "eigh_generalized: a and b must have the same shape, got (2, 2)"
                " and (3, 3).")):
            autodiff.eigh_generalized(jnp.eye(2), jnp.eye(3), decompose=sygvd)
        with pytest.raises(TypeError, match=re.escape(
                "eigh_generalized: a and b must have the same dtype, got float32"
                " and complex64.")):
            autodiff.eigh_generalized(
                jnp.eye(2), jnp.eye(2, dtype=jnp.complex64), decompose=sygvd
            )
