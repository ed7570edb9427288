"""Tests for jaxsolve.autodiff.check_solver_derivatives: it must catch bugs."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import dense_solve, dense_transpose_solve, random_array, well_conditioned
from jaxsolve import autodiff


def make_system(rng, dtype):
    return well_conditioned(rng, 3, dtype), random_array(rng, (3,), dtype)


def correct_solver(a, b):
    return autodiff.linear_solve(
        a, b, solve=dense_solve, transpose_solve=dense_transpose_solve
    )


@jax.custom_vjp
def inverse_instead_of_transpose(a, b):
    return jnp.linalg.solve(a, b)


def _forward(a, b):
    x = jnp.linalg.solve(a, b)
    return x, (a, x)


def _backward(residuals, x_bar):
    a, x = residuals
    b_bar = jnp.linalg.solve(a, x_bar)  # the bug: A⁻¹ where A⁻ᵀ is needed
    return -jnp.outer(b_bar, x), b_bar


inverse_instead_of_transpose.defvjp(_forward, _backward)


def first_column_only(a, rhs):
    """A service that forgets its extra right-hand-side columns."""
    return jnp.broadcast_to(jnp.linalg.solve(a, rhs[:, :1]), rhs.shape)


class TestCheckSolverDerivatives:
    def test_check_solver_derivatives_passes_a_correct_rule(self):
        autodiff.check_solver_derivatives(
            correct_solver, make_system, reference=jnp.linalg.solve,
            dtypes=[np.float32, np.complex128], order=1, vmap_in_axes=[(None, 0)],
        )

    def test_check_solver_derivatives_catches_inverse_instead_of_transpose(self):
        with pytest.raises(AssertionError):
            autodiff.check_solver_derivatives(
                inverse_instead_of_transpose, make_system, dtypes=[np.float64],
                order=1, modes=("rev",),
            )

    def test_check_solver_derivatives_catches_a_wrong_vmap(self):
        def solver(a, b):
            return autodiff.linear_solve(
                a, b, solve=first_column_only, transpose_solve=dense_transpose_solve
            )

        with pytest.raises(
            AssertionError, match=re.escape("vmap with in_axes=(None, 0)")
        ):
            autodiff.check_solver_derivatives(
                solver, make_system, reference=jnp.linalg.solve,
                dtypes=[np.float64], order=1, vmap_in_axes=[(None, 0)],
            )

    def test_check_solver_derivatives_catches_a_wrong_value(self):
        with pytest.raises(AssertionError, match="solver against reference"):
            autodiff.check_solver_derivatives(
                lambda a, b: 2 * correct_solver(a, b), make_system,
                reference=jnp.linalg.solve, dtypes=[np.float64], order=1,
            )

    def test_check_solver_derivatives_restores_x64(self):
        autodiff.check_solver_derivatives(
            correct_solver, make_system, dtypes=[np.float64], order=1, modes=("fwd",)
        )
        assert not jax.config.jax_enable_x64

    def test_check_solver_derivatives_errors(self):
        check = functools.partial(
            autodiff.check_solver_derivatives, correct_solver, make_system,
            dtypes=[np.float32],
        )
        with pytest.raises(ValueError, match=re.escape(
                "check_solver_derivatives: modes must hold 'fwd' and/or 'rev',"
                " got ('lin',).")):
            check(modes=("lin",))
        with pytest.raises(ValueError, match=re.escape(
                "check_solver_derivatives: each vmap_in_axes entry needs one 0"
                " or None per argument (2), got (0,).")):
            check(order=1, vmap_in_axes=[(0,)])
        with pytest.raises(TypeError, match=re.escape(
                "check_solver_derivatives: make_args must return inexact"
                " arrays, argument 0 has dtype int32.")):
            autodiff.check_solver_derivatives(
                correct_solver, lambda rng, dtype: (np.ones((3, 3), np.int32),),
                dtypes=[np.float32],
            )
