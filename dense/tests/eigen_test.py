"""Tests for syevd and sygvd."""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

from helpers import (
    assert_failure_reported,
    grid_mesh,
    hermitian,
    hermitian_positive_definite,
    max_error,
    put,
    tolerance,
)
from jaxsolve import dense


def hermitian_part(m):
    return (m + jnp.conj(m).T) / 2


class TestSyevd:
    def test_syevd_residual_and_orthogonality(self, dtype_and_mesh):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(30)
        a_host = hermitian(rng, 8, dtype)
        a = put(a_host, mesh, P("pr", "pc"))
        w, v, status = dense.syevd(a, return_status=True)
        assert w.dtype == np.finfo(dtype).dtype and v.dtype == dtype
        assert w.sharding.is_fully_replicated and v.sharding.is_equivalent_to(a.sharding, 2)
        w, v = np.asarray(w), np.asarray(v)
        scale = tolerance(dtype) * 100
        assert np.all(np.diff(w) >= 0)
        assert max_error(a_host @ v, v * w) < scale
        assert max_error(v.conj().T @ v, np.eye(8)) < scale
        np.testing.assert_allclose(w, np.linalg.eigvalsh(a_host.astype(np.complex128)),
                                   atol=scale)
        assert int(status.info) == 0
        values = dense.syevd(a, return_eigenvectors=False)
        np.testing.assert_allclose(values, w, atol=scale)

    def test_syevd_grad(self, x64):
        rng = np.random.default_rng(31)
        a = hermitian(rng, 4, np.float64)

        def f(m):  # gauge invariant: eigenvalues and V diag(w²) Vᴴ
            w, v = dense.syevd(hermitian_part(m))
            return w, (v * w[None, :] ** 2) @ v.T

        check_grads(f, (a,), order=1, modes=("fwd", "rev"))

    def test_syevd_vmap_and_jit(self, x64):
        rng = np.random.default_rng(32)
        stack = np.stack([hermitian(rng, 4, np.float64) for _ in range(3)])
        w = jax.jit(jax.vmap(lambda a: dense.syevd(a, return_eigenvectors=False)))(stack)
        np.testing.assert_allclose(w, np.linalg.eigvalsh(stack), atol=1e-12)

    def test_syevd_not_finite(self):
        w, v, status = dense.syevd(jnp.full((2, 2), jnp.nan), return_status=True)
        assert int(status.info) == dense.Status.NOT_FINITE
        assert_failure_reported(status, [w, v], r"^syevd failed: info=-1: an input holds NaN")

    def test_syevd_donate(self, x64):
        mesh = grid_mesh(2, 2)
        a = put(np.diag([3.0, 1.0, 2.0, 4.0]), mesh, P("pr", "pc"))
        w, v = dense.syevd(a, donate=True)
        assert a.is_deleted()
        np.testing.assert_allclose(w, [1.0, 2.0, 3.0, 4.0])
        a = jnp.diag(jnp.array([3.0, 1.0]))  # on one device V is written into a's buffer
        a_buffer = a.unsafe_buffer_pointer()
        assert dense.syevd(a, donate=True)[1].unsafe_buffer_pointer() == a_buffer


class TestSygvd:
    def test_sygvd_residual(self, dtype_and_mesh):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(33)
        a_host = hermitian(rng, 8, dtype)
        b_host = hermitian_positive_definite(rng, 8, dtype)
        spec = P("pr", "pc")
        w, v, status = dense.sygvd(put(a_host, mesh, spec), put(b_host, mesh, spec),
                                   return_status=True)
        w, v = np.asarray(w), np.asarray(v)
        scale = tolerance(dtype) * 100
        assert max_error(a_host @ v, b_host @ v * w) < scale * 10
        assert max_error(v.conj().T @ b_host @ v, np.eye(8)) < scale * 10
        assert int(status.info) == 0

    def test_sygvd_reads_the_lower_triangles(self, dtype_and_mesh):
        # As syevd and potrs do, and scipy.linalg.eigh(a, b): the upper triangles are unused.
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(35)
        a_host = hermitian(rng, 8, dtype)
        b_host = hermitian_positive_definite(rng, 8, dtype)
        garbage = np.triu(hermitian(rng, 8, dtype) + 5, 1)
        spec = P("pr", "pc")
        w = dense.sygvd(put(np.tril(a_host) + garbage, mesh, spec),
                        put(np.tril(b_host) + garbage, mesh, spec), return_eigenvectors=False)
        expected = scipy.linalg.eigh(a_host, b_host, eigvals_only=True)
        assert max_error(np.asarray(w), expected) < tolerance(dtype) * 1000

    def test_sygvd_grad(self, x64):
        rng = np.random.default_rng(34)
        a = hermitian(rng, 4, np.float64)
        b = hermitian_positive_definite(rng, 4, np.float64)

        def f(m, n):
            w, v = dense.sygvd(hermitian_part(m), hermitian_part(n))
            return w, (v * w[None, :]) @ v.T

        check_grads(f, (a, b), order=1, modes=("fwd", "rev"))

    def test_sygvd_b_not_positive_definite(self):
        b = jnp.diag(jnp.array([1.0, 2.0, -1.0]))
        w, v, status = dense.sygvd(jnp.eye(3), b, return_status=True)
        assert_failure_reported(status, [w, v], r"^sygvd failed: info=6: the leading minor of "
                                r"order 3 is not positive definite in B$")
