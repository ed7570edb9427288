"""Tests for Status and raise_on_failure."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import dense


class TestStatus:
    def test_status_success(self):
        x, status = dense.potrs(jnp.eye(2), jnp.ones(2), return_status=True)
        assert isinstance(status, dense.Status) and status.routine == "potrs"
        assert bool(status.ok) and status.info.dtype == np.int32
        assert status.message() == "potrs succeeded: info=0"
        assert dense.raise_on_failure(status) is None
        assert repr(status) == "Status(routine='potrs', info=0, rcond=1)"

    def test_status_behaves_as_its_int32_info(self):
        """JAXMg returns its status as an int32 array: code that reads it keeps working."""
        _, failed = dense.lu_solve(jnp.zeros((2, 2)), jnp.ones(2), return_status=True)
        _, fine = dense.potrs(jnp.eye(2), jnp.ones(2), return_status=True)
        assert int(failed) == 1 and int(fine) == 0
        assert bool(failed == 1) and bool(fine == 0) and bool(failed != 0)
        assert bool(fine == failed) is False
        assert failed.block_until_ready() is failed
        np.testing.assert_array_equal(np.asarray(failed), np.int32(1))
        assert np.asarray(failed).dtype == np.int32
        stack = jax.vmap(lambda a: dense.potrs(a, jnp.ones(2), return_status=True)[1])(
            jnp.stack([jnp.eye(2), -jnp.eye(2)]))
        np.testing.assert_array_equal(np.asarray(stack == 0), [True, False])
        with pytest.raises(TypeError):
            int(stack)

    def test_status_is_a_pytree_through_jit(self):
        @jax.jit
        def f(a):
            return dense.lu_solve(a, jnp.ones(2), return_status=True)

        _, status = f(jnp.zeros((2, 2)))
        assert isinstance(status, dense.Status) and status.routine == "lu_solve"
        assert int(status.info) == 1
        with pytest.raises(dense.SolverError, match=r"^lu_solve failed: info=1: U\(1,1\) is "):
            dense.raise_on_failure(status)

    def test_raise_on_failure_inside_jit(self):
        def f(a):
            _, status = dense.potrs(a, jnp.ones(2), return_status=True)
            dense.raise_on_failure(status)

        with pytest.raises(TypeError, match=r"^raise_on_failure: the status is a traced value "
                           r"\(inside jax.jit, jax.vmap or a derivative\); return it from the "
                           r"jitted function and call raise_on_failure on the result, outside\."):
            jax.jit(f)(jnp.eye(2))

    def test_raise_on_failure_needs_a_status(self):
        with pytest.raises(TypeError, match=r"^raise_on_failure: status must be a "
                           r"jaxsolve.dense.Status \(from a routine called with "
                           r"return_status=True\), got int\.$"):
            dense.raise_on_failure(0)

    def test_status_of_each_routine(self):
        nan = jnp.full((2, 2), jnp.nan)
        for routine, call in [
            ("qr", lambda: dense.qr(nan, return_status=True)),
            ("gesvd", lambda: dense.gesvd(nan, return_status=True)),
            ("polar", lambda: dense.polar(nan, return_status=True)),
            ("cho_inverse", lambda: dense.cho_inverse(-jnp.eye(2), return_status=True)),
        ]:
            *outputs, status = call()
            assert status.routine == routine and int(status.info) == 1, routine
            assert all(np.all(np.isnan(np.asarray(x))) for x in outputs), routine

    def test_nonfinite_inputs_are_reported(self):
        # LAPACK factors NaN and Inf without an info; the status must not say success.
        a = jnp.array([[4.0, 1.0, 0.0], [1.0, 3.0, jnp.nan], [0.0, jnp.nan, 2.0]])
        b = jnp.ones(3)
        for routine, call in [
            ("lu_solve", lambda: dense.lu_solve(a, b, return_status=True)),
            ("lu_solve", lambda: dense.lu_solve(jnp.eye(3), b.at[1].set(jnp.inf),
                                                return_status=True)),
            ("potrs", lambda: dense.potrs(jnp.eye(3), b.at[0].set(jnp.nan), return_status=True)),
        ]:
            x, status = call()
            assert status.routine == routine and int(status.info) == dense.Status.NOT_FINITE
            with pytest.raises(dense.SolverError, match=f"^{routine} failed: info=-1: the result "
                               "is not finite although the factorization reported no failure: "
                               "an input holds NaN or Inf$"):
                dense.raise_on_failure(status)
        assert int(dense.lu_factor(a).status.info) == dense.Status.NOT_FINITE
        assert int(dense.lu_factor(jnp.eye(3)).status.info) == 0
        assert int(dense.lu_solve(jnp.eye(3), b, return_status=True)[1].info) == 0
