"""Tests for least_squares, qr, gesvd and polar."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

from helpers import assert_failure_reported, max_error, put, random_matrix, tolerance
from jaxsolve import dense


class TestLeastSquares:
    @pytest.mark.parametrize("shape", [(8, 4), (4, 8)], ids=["tall", "wide"])
    def test_least_squares_residual(self, dtype_and_mesh, shape):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(40)
        a_host = random_matrix(rng, shape, dtype)
        b_host = random_matrix(rng, (shape[0], 2), dtype)
        a = put(a_host, mesh, P("pr", "pc"))
        x, status = dense.least_squares(a, put(b_host, mesh, P("pr")), return_status=True)
        expected = np.linalg.lstsq(a_host.astype(np.complex128), b_host, rcond=None)[0]
        assert x.shape == (shape[1], 2) and x.dtype == dtype and int(status.info) == 0
        assert max_error(x, expected) < tolerance(dtype) * 100

    def test_least_squares_rank_deficient(self):
        a = jnp.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
        x, status = dense.least_squares(a, jnp.ones(3), return_status=True)
        assert_failure_reported(status, [x], r"^least_squares failed: info=2: diagonal element 2 "
                                r"of the triangular factor of A is zero")

    def test_least_squares_grad(self, x64):
        rng = np.random.default_rng(41)
        a = random_matrix(rng, (6, 3), np.float64)
        b = random_matrix(rng, (6,), np.float64)
        check_grads(jax.jit(dense.least_squares), (a, b), order=1, modes=("fwd", "rev"))


class TestQr:
    @pytest.mark.parametrize("shape", [(8, 4), (4, 8)], ids=["tall", "wide"])
    def test_qr_residual_and_orthogonality(self, dtype_and_mesh, shape):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(42)
        a_host = random_matrix(rng, shape, dtype)
        q, r = dense.qr(put(a_host, mesh, P("pr", "pc")))
        k = min(shape)
        assert q.shape == (shape[0], k) and r.shape == (k, shape[1])
        q, r = np.asarray(q), np.asarray(r)
        scale = tolerance(dtype) * 100
        assert max_error(q @ r, a_host) < scale
        assert max_error(q.conj().T @ q, np.eye(k)) < scale
        assert max_error(np.tril(r, -1), 0) == 0

    def test_qr_grad(self, x64):
        rng = np.random.default_rng(43)
        a = random_matrix(rng, (5, 3), np.float64)
        check_grads(jax.jit(dense.qr), (a,), order=1, modes=("fwd", "rev"))


class TestGesvd:
    @pytest.mark.parametrize("shape", [(8, 4), (4, 8)], ids=["tall", "wide"])
    def test_gesvd_residual_and_orthogonality(self, dtype_and_mesh, shape):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(44)
        a_host = random_matrix(rng, shape, dtype)
        u, s, vh, status = dense.gesvd(put(a_host, mesh, P("pr", "pc")), return_status=True)
        u, s, vh = np.asarray(u), np.asarray(s), np.asarray(vh)
        scale = tolerance(dtype) * 100
        assert max_error((u * s) @ vh, a_host) < scale
        assert max_error(u.conj().T @ u, np.eye(4)) < scale
        assert max_error(vh @ vh.conj().T, np.eye(4)) < scale
        assert np.all(np.diff(s) <= 0) and int(status.info) == 0
        only_s = dense.gesvd(put(a_host, mesh, P("pr", "pc")), compute_u=False, compute_vh=False)
        np.testing.assert_allclose(only_s, s, atol=scale)

    def test_gesvd_grad(self, x64):
        rng = np.random.default_rng(45)
        a = random_matrix(rng, (5, 3), np.float64)

        def f(m):
            u, s, vh = dense.gesvd(m)
            return s, (u * s[None, :] ** 2) @ u.T

        check_grads(f, (a,), order=1, modes=("fwd", "rev"))


class TestPolar:
    def test_polar_residual(self, dtype_and_mesh):
        dtype, mesh = dtype_and_mesh
        rng = np.random.default_rng(46)
        a_host = random_matrix(rng, (8, 4), dtype)
        u, h = dense.polar(put(a_host, mesh, P("pr", "pc")))
        u, h = np.asarray(u), np.asarray(h)
        scale = tolerance(dtype) * 100
        assert max_error(u @ h, a_host) < scale
        assert max_error(u.conj().T @ u, np.eye(4)) < scale
        assert max_error(h, h.conj().T) < scale
        assert np.all(np.linalg.eigvalsh(h.astype(np.complex128)) > 0)

    def test_polar_grad(self, x64):
        rng = np.random.default_rng(47)
        a = random_matrix(rng, (4, 3), np.float64)
        check_grads(jax.jit(dense.polar), (a,), order=1, modes=("fwd", "rev"))
