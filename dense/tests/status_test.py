"""Tests for Status and raise_on_failure."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from helpers import assert_failure_reported, grid_mesh, put
from jaxsolve import dense, layout
from jaxsolve.dense import _status


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
        # Finite inputs whose results overflow float32 (3e38 · √2): info 1, the result is not
        # finite although the input is; not NOT_FINITE, which says an input was.
        big = jnp.full((2, 2), 3e38, jnp.float32)
        for routine, call in [
            ("qr", lambda: dense.qr(big, return_status=True)),
            ("gesvd", lambda: dense.gesvd(big, return_status=True)),
            ("polar", lambda: dense.polar(big, return_status=True)),
            ("syevd", lambda: dense.syevd(big, return_status=True)),
            ("cho_inverse", lambda: dense.cho_inverse(-jnp.eye(2), return_status=True)),
        ]:
            *outputs, status = call()
            assert status.routine == routine and int(status.info) == 1, routine
            assert all(np.all(np.isnan(np.asarray(x))) for x in outputs), routine
        with pytest.raises(dense.SolverError, match=r"^qr failed: info=1: the result is not "
                           r"finite although the input is \(the algorithm did not converge, or "
                           r"a value overflowed; "):
            dense.raise_on_failure(dense.qr(big, return_status=True)[-1])

    @pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
    def test_nonfinite_input_of_each_decomposition(self, bad):
        """NaN or Inf where a routine reads is NOT_FINITE on every routine, not the 1 that a
        check of the outputs gave (nor sygvd's n + k): the inputs are checked before the
        decomposition; outputs are NaN."""
        a = 2 * jnp.eye(4)
        lower, upper = a.at[2, 1].set(bad), a.at[1, 2].set(bad)
        b = jnp.ones(4)
        for routine, call in [
            ("syevd", lambda: dense.syevd(lower, return_status=True)),
            ("sygvd", lambda: dense.sygvd(lower, a, return_status=True)),
            ("sygvd", lambda: dense.sygvd(a, lower, return_status=True)),
            ("qr", lambda: dense.qr(upper, return_status=True)),
            ("qr", lambda: dense.qr(upper[:, :3], return_status=True)),
            ("gesvd", lambda: dense.gesvd(upper, return_status=True)),
            ("gesvd", lambda: dense.gesvd(upper[:3], return_status=True)),
            ("polar", lambda: dense.polar(upper, return_status=True)),
            ("least_squares", lambda: dense.least_squares(upper, b, return_status=True)),
            ("least_squares", lambda: dense.least_squares(a, b.at[3].set(bad),
                                                          return_status=True)),
        ]:
            *outputs, status = call()
            assert status.routine == routine, routine
            assert int(status.info) == dense.Status.NOT_FINITE, (routine, status)
            assert_failure_reported(status, outputs, f"^{routine} failed: info=-1: an input "
                                    "holds NaN or Inf where the routine reads it, so the "
                                    "result is not finite$")
        # The upper triangle, which syevd and sygvd do not read, may hold anything.
        w, status = dense.syevd(upper, return_eigenvectors=False, return_status=True)
        assert int(status.info) == 0
        np.testing.assert_allclose(np.asarray(w), 2.0)
        w, status = dense.sygvd(upper, upper, return_eigenvectors=False, return_status=True)
        assert int(status.info) == 0
        np.testing.assert_allclose(np.asarray(w), 1.0)

    def test_nonfinite_input_under_jit_and_vmap(self):
        stack = jnp.stack([jnp.eye(3), jnp.eye(3).at[2, 0].set(jnp.nan), -jnp.eye(3)])
        statuses = jax.jit(jax.vmap(lambda a: dense.syevd(a, return_status=True)[-1]))(stack)
        np.testing.assert_array_equal(np.asarray(statuses.info), [0, dense.Status.NOT_FINITE, 0])
        statuses = jax.jit(jax.vmap(lambda a: dense.qr(a, return_status=True)[-1]))(stack)
        np.testing.assert_array_equal(np.asarray(statuses.info), [0, dense.Status.NOT_FINITE, 0])

    def test_nonfinite_input_on_a_mesh(self):
        # A NaN on one device of a 2 x 2 grid: the whole grid's status says so.
        mesh = grid_mesh(2, 2)
        a = put(jnp.eye(8).at[6, 1].set(jnp.nan), mesh, P("pr", "pc"))
        b = put(jnp.ones(8), mesh, P("pr"))
        for routine, call in [
            ("syevd", lambda: dense.syevd(a, return_status=True)),
            ("qr", lambda: dense.qr(a, return_status=True)),
            ("least_squares", lambda: dense.least_squares(a, b, return_status=True)),
        ]:
            *outputs, status = call()
            assert int(status.info) == dense.Status.NOT_FINITE, routine
            assert status.info.sharding.is_fully_replicated, routine
            assert all(np.all(np.isnan(np.asarray(x))) for x in outputs), routine

    def test_the_check_costs_no_copy_of_a_donated_matrix(self):
        # The one-GPU backend decomposes in place; a check that XLA could not order before the
        # in-place write would cost a copy of A. jaxsolve.layout's in-place CPU kernel stands in
        # for cuSOLVER's here: the donated matrix is its only n x n buffer (the temporaries
        # are the n² booleans of the CPU's unfused reduction, a quarter of a float32 A).
        n = 512

        def decompose(a):
            finite, (a,) = _status.checked_finite((a,), lower=True)
            return layout.local_row_to_column_major(a, tile=n // 4), finite

        compiled = jax.jit(decompose, donate_argnums=0).lower(jnp.eye(n)).compile()
        assert compiled.memory_analysis().temp_size_in_bytes < n * n * 4 / 2
        converted, finite = jax.jit(decompose)(jnp.eye(n).at[7, 3].set(jnp.inf))
        assert not bool(finite) and np.all(np.isnan(np.asarray(converted)))

    def test_the_check_leaves_gradients_alone(self, x64):
        a = jnp.array([[3.0, 1.0], [1.0, 2.0]])
        gradient = jax.grad(lambda a: dense.syevd(a)[0][1])(a)
        _, v = np.linalg.eigh(np.asarray(a))
        np.testing.assert_allclose(gradient, np.outer(v[:, 1], v[:, 1]), rtol=1e-12)

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
            with pytest.raises(dense.SolverError, match=f"^{routine} failed: info=-1: an input "
                               "holds NaN or Inf where the routine reads it, so the result is "
                               "not finite$"):
                dense.raise_on_failure(status)
        assert int(dense.lu_factor(a).status.info) == dense.Status.NOT_FINITE
        assert int(dense.lu_factor(jnp.eye(3)).status.info) == 0
        assert int(dense.lu_solve(jnp.eye(3), b, return_status=True)[1].info) == 0
