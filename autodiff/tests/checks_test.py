"""Tests for jaxsolve.autodiff._checks, the shared argument checks."""

import re

import jax
import jax.numpy as jnp
import pytest

from jaxsolve.autodiff._checks import check_service_outputs, checked_matrix


class TestCheckedMatrix:
    def test_checked_matrix_accepts_lists(self):
        a = checked_matrix([[1.0, 2.0], [3.0, 4.0]], caller="f", square=True)
        assert a.shape == (2, 2) and a.dtype == jnp.float32

    def test_checked_matrix_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "f: b must be a square (n, n) matrix, got shape (2, 3)")):
            checked_matrix(jnp.ones((2, 3)), caller="f", name="b", square=True)
        with pytest.raises(TypeError, match=re.escape(
                "f: a must have a floating or complex dtype, got bool.")):
            checked_matrix(jnp.ones((2, 2), bool), caller="f")


class TestCheckServiceOutputs:
    def test_check_service_outputs_errors(self):
        outputs = jax.eval_shape(lambda: (jnp.ones(2), jnp.ones((2, 2))))
        expected = [((2,), jnp.float32), ((2, 2), jnp.float32)]
        check_service_outputs(outputs, expected, caller="f", service="s")
        with pytest.raises(
            ValueError, match=re.escape("f: `s` must return 1 arrays, got 2.")
        ):
            check_service_outputs(outputs, expected[:1], caller="f", service="s")
        with pytest.raises(TypeError, match=re.escape(
                "f: output 0 of `s` must have dtype complex64, got float32.")):
            check_service_outputs(
                outputs, [((2,), jnp.complex64), ((2, 2), jnp.float32)],
                caller="f", service="s",
            )
