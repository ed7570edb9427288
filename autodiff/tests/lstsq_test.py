"""Tests for jaxsolve.autodiff.lstsq."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import HostServices, gels, random_array
from jaxsolve import autodiff


def solver(a, b):
    return autodiff.lstsq(a, b, solve_least_squares=gels)


def reference(a, b):
    return jnp.linalg.lstsq(a, b)[0]


class TestLstsq:
    @pytest.mark.parametrize(
        "a_shape, b_shape, dtypes, order",
        [
            ((6, 3), (6, 2), [np.float32, np.float64, np.complex128], 2),
            ((3, 6), (3,), [np.complex128], 1),
        ],
        ids=["least_squares", "minimum_norm"],
    )
    def test_lstsq_against_jnp(self, a_shape, b_shape, dtypes, order):
        def make_args(rng, dtype):
            return random_array(rng, a_shape, dtype), random_array(rng, b_shape, dtype)

        autodiff.check_solver_derivatives(
            solver, make_args, reference=reference, dtypes=dtypes, order=order,
            vmap_in_axes=[(None, 0)],
        )

    def test_lstsq_vmap_grad_is_one_call_per_solve(self, x64):
        """jit(vmap(grad)) over 8 right-hand sides: every gels call has 8 columns."""
        rng = np.random.default_rng(0)
        a = random_array(rng, (6, 3), np.float64)
        b = random_array(rng, (8, 6), np.float64)
        host = HostServices()

        def loss(b):
            return jnp.sum(jnp.sin(autodiff.lstsq(a, b, solve_least_squares=host.gels)))

        b_bar = jax.jit(jax.vmap(jax.grad(loss)))(b)
        # x = A⁺ b, then N⁻¹ = A⁺ (Aᴴ)⁺ for the transposed tangent solve.
        assert host.calls == [("gels", (6, 8)), ("gels", (3, 8)), ("gels", (6, 8))]
        expected = jax.vmap(jax.grad(lambda b: jnp.sum(jnp.sin(reference(a, b)))))(b)
        np.testing.assert_allclose(b_bar, expected, rtol=1e-10)

    def test_lstsq_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "lstsq: b must have shape (4,) or (4, k) for a of shape (4, 2),"
                " got (3,).")):
            autodiff.lstsq(jnp.ones((4, 2)), jnp.ones(3), solve_least_squares=gels)
        with pytest.raises(TypeError, match=re.escape(
                "lstsq: a and b must have the same dtype, got float32 and complex64.")):
            autodiff.lstsq(
                jnp.ones((4, 2)), jnp.ones(4, jnp.complex64), solve_least_squares=gels
            )
