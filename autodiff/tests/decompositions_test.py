"""Tests for jaxsolve.autodiff.qr, svd and polar."""

import re

import jax.numpy as jnp
import numpy as np
import pytest

from helpers import (
    eigh_decompose,
    polar_decompose,
    qr_decompose,
    random_array,
    svd_decompose,
)
from jaxsolve import autodiff

# Square matrices: second order, real and complex, x64 off and on.  Tall and
# wide ones (their own branches of each rule) to first order.
SHAPES = [
    ((4, 4), [np.float32, np.float64, np.complex128], 2),
    ((5, 3), [np.complex128], 1),
    ((3, 5), [np.float64], 1),
]
SHAPE_IDS = ["square", "tall", "wide"]


def matrix_of_shape(shape):
    def make_args(rng, dtype):
        return (random_array(rng, shape, dtype),)

    return make_args


def svd_invariants(u, s, vh):
    """U diag(sin s) Vᴴ, s, |U|², |V|²: independent of the singular vectors' phases."""
    function = (u * jnp.sin(s).astype(u.dtype)[None, :]) @ vh
    return function, s, jnp.abs(u) ** 2, jnp.abs(vh) ** 2


class TestQr:
    @pytest.mark.parametrize("shape, dtypes, order", SHAPES, ids=SHAPE_IDS)
    def test_qr_against_jnp(self, shape, dtypes, order):
        autodiff.check_solver_derivatives(
            lambda a: autodiff.qr(a, decompose=qr_decompose),
            matrix_of_shape(shape), reference=qr_decompose, dtypes=dtypes, order=order,
        )

    def test_qr_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "qr: a must be an (m, n) matrix, got shape (2, 2, 2); use jax.vmap")):
            autodiff.qr(jnp.ones((2, 2, 2)), decompose=qr_decompose)
        with pytest.raises(ValueError, match=re.escape(
                "qr: output 0 of `decompose` must have shape (3, 2), got (3, 3).")):
            autodiff.qr(
                jnp.ones((3, 2)), decompose=lambda a: jnp.linalg.qr(a, mode="complete")
            )


class TestSvd:
    @pytest.mark.parametrize("shape, dtypes, order", SHAPES, ids=SHAPE_IDS)
    def test_svd_against_jnp(self, shape, dtypes, order):
        autodiff.check_solver_derivatives(
            lambda a: svd_invariants(*autodiff.svd(a, decompose=svd_decompose)),
            matrix_of_shape(shape),
            reference=lambda a: svd_invariants(*jnp.linalg.svd(a, full_matrices=False)),
            dtypes=dtypes, order=order,
        )

    def test_svd_errors(self):
        with pytest.raises(TypeError, match=re.escape(
                "svd: a must have a floating or complex dtype, got int32.")):
            autodiff.svd(jnp.ones((2, 2), jnp.int32), decompose=svd_decompose)


class TestPolar:
    @pytest.mark.parametrize(
        "shape, dtypes, order",
        [((4, 4), [np.float64, np.complex128], 2), ((5, 3), [np.complex64], 1)],
        ids=SHAPE_IDS[:2],
    )
    def test_polar_against_jax(self, shape, dtypes, order):
        def solver(a):
            return autodiff.polar(
                a, decompose=polar_decompose, eigensolver=eigh_decompose
            )

        autodiff.check_solver_derivatives(
            solver, matrix_of_shape(shape), reference=polar_decompose,
            dtypes=dtypes, order=order,
        )

    def test_polar_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "polar: a must have at least as many rows as columns, got (2, 3);")):
            autodiff.polar(
                jnp.ones((2, 3)), decompose=polar_decompose, eigensolver=eigh_decompose
            )
