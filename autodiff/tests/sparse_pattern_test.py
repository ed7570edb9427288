"""Tests for jaxsolve.autodiff.SparsePattern and cotangents on a pattern."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

from helpers import HostServices, random_array
from jaxsolve import autodiff


def random_pattern(rng, n, *, symmetric, density=0.3):
    mask = (rng.random((n, n)) < density) | np.eye(n, dtype=bool)
    if symmetric:
        mask |= mask.T
    rows, cols = np.nonzero(mask)
    return autodiff.SparsePattern(rows=rows, cols=cols, shape=(n, n))


def diagonally_dominant_values(rng, pattern, dtype):
    """Values whose matrix is well conditioned: a shifted diagonal."""
    values = random_array(rng, (pattern.nnz,), dtype) / np.sqrt(pattern.shape[0])
    return (values + 2 * (pattern.rows == pattern.cols)).astype(dtype)


def dense_services(pattern):
    def solve(values, rhs):
        return jnp.linalg.solve(pattern.todense(values), rhs)

    def transpose_solve(values, rhs):
        return jnp.linalg.solve(pattern.todense(values).T, rhs)

    return solve, transpose_solve


class TestSparsePattern:
    def test_sparse_pattern_matvec_against_scipy(self):
        rng = np.random.default_rng(0)
        pattern = autodiff.SparsePattern(
            rows=np.array([0, 0, 1, 2, 2]), cols=np.array([0, 3, 1, 0, 2]), shape=(3, 4)
        )
        values = random_array(rng, (5,), np.complex64)
        matrix = scipy.sparse.coo_matrix(
            (values, (pattern.rows, pattern.cols)), shape=(3, 4)
        )
        x = random_array(rng, (4, 2), np.complex64)
        np.testing.assert_allclose(pattern.matvec(values, x), matrix @ x, rtol=1e-5)
        np.testing.assert_allclose(
            pattern.matvec(values, x[:, 0]), matrix @ x[:, 0], rtol=1e-5
        )
        np.testing.assert_allclose(pattern.todense(values), matrix.toarray(), rtol=1e-6)

    def test_sparse_pattern_from_csr(self):
        rng = np.random.default_rng(0)
        matrix = scipy.sparse.random(5, 5, density=0.4, format="csr", random_state=1)
        pattern = autodiff.SparsePattern.from_csr(matrix.indptr, matrix.indices, (5, 5))
        values = jnp.asarray(matrix.data, jnp.float32)
        x = random_array(rng, (5,), np.float32)
        assert pattern.nnz == matrix.nnz
        np.testing.assert_allclose(
            pattern.matvec(values, x), matrix @ x, rtol=1e-5, atol=1e-6
        )

    def test_sparse_pattern_symmetrize(self):
        rng = np.random.default_rng(0)
        pattern = random_pattern(rng, 6, symmetric=True)
        values = random_array(rng, (pattern.nnz,), np.complex64)
        dense = pattern.todense(values)
        expected = ((dense + dense.conj().T) / 2)[pattern.rows, pattern.cols]
        np.testing.assert_allclose(pattern.symmetrize(values), expected, rtol=1e-6)

    @pytest.mark.parametrize(
        "make_pattern, message",
        [
            (lambda: autodiff.SparsePattern(np.array([0, 1]), np.array([0]), (2, 2)),
             "SparsePattern: rows and cols must be 1-D arrays of equal length"),
            (lambda: autodiff.SparsePattern(np.array([0.0]), np.array([0]), (2, 2)),
             "SparsePattern: rows and cols must be integer arrays"),
            (lambda: autodiff.SparsePattern(np.array([2]), np.array([0]), (2, 2)),
             "SparsePattern: indices out of bounds for shape (2, 2)"),
            (lambda: autodiff.SparsePattern.from_csr(
                np.array([0, 1]), np.array([0]), (2, 2)),
             "SparsePattern.from_csr: indptr.shape=(2,) must be (3,)"),
        ],
        ids=["lengths", "dtype", "bounds", "csr"],
    )
    def test_sparse_pattern_errors(self, make_pattern, message):
        with pytest.raises(ValueError, match=re.escape(message)):
            make_pattern()

    def test_sparse_pattern_symmetrize_errors(self):
        pattern = autodiff.SparsePattern(np.array([0, 0]), np.array([0, 1]), (2, 2))
        with pytest.raises(
            ValueError, match="the pattern is not structurally symmetric"
        ):
            pattern.symmetrize(jnp.ones(2))
        duplicated = autodiff.SparsePattern(np.array([0, 0]), np.array([0, 0]), (2, 2))
        with pytest.raises(ValueError, match="without duplicate entries"):
            duplicated.symmetrize(jnp.ones(2))
        with pytest.raises(ValueError, match=re.escape("values must have shape (2,)")):
            pattern.matvec(jnp.ones(3), jnp.ones(2))


class TestLinearSolveOnPattern:
    def test_linear_solve_cotangent_stays_on_pattern(self, x64):
        """Acceptance: the values' cotangent is (nnz,): -λᵢ xⱼ per stored (i, j)."""
        rng = np.random.default_rng(0)
        pattern = random_pattern(rng, 40, symmetric=False, density=0.1)
        values = diagonally_dominant_values(rng, pattern, np.float64)
        b, g = rng.standard_normal(40), rng.standard_normal(40)
        host = HostServices()

        def solve(values, rhs):
            return host.solve(pattern.todense(values), rhs)

        def transpose_solve(values, rhs):
            return host.transpose_solve(pattern.todense(values), rhs)

        def loss(values):
            x = autodiff.linear_solve(
                values, b, matvec=pattern.matvec, solve=solve,
                transpose_solve=transpose_solve,
            )
            return jnp.dot(g, x)

        values_bar = jax.grad(loss)(values)
        assert values_bar.shape == (pattern.nnz,)
        a = np.asarray(pattern.todense(values))
        x, adjoint = np.linalg.solve(a, b), np.linalg.solve(a.T, g)
        np.testing.assert_allclose(
            values_bar, -adjoint[pattern.rows] * x[pattern.cols], rtol=1e-10, atol=1e-12
        )
        assert host.names() == ["solve", "transpose_solve"]

    def test_linear_solve_symmetric_cotangent_on_pattern(self, x64):
        rng = np.random.default_rng(0)
        pattern = random_pattern(rng, 12, symmetric=True)
        values = diagonally_dominant_values(rng, pattern, np.complex128)
        values = pattern.symmetrize(values)
        b = random_array(rng, (12,), np.complex128)
        solve, _ = dense_services(pattern)

        def loss(values):
            x = autodiff.linear_solve(
                values, b, matvec=pattern.matvec, solve=solve, symmetric=True,
                symmetrize=pattern.symmetrize,
            )
            return jnp.real(jnp.vdot(x, x))

        values_bar = jax.grad(loss)(values)
        assert values_bar.shape == (pattern.nnz,)
        # Hermitian: each value's cotangent is the conjugate of its mirror's.
        np.testing.assert_allclose(
            values_bar, np.conj(values_bar[pattern._mirror]), rtol=1e-12, atol=1e-14
        )
        # It is the Hermitian part of the dense gradient, read on the pattern.
        dense_bar = jax.grad(
            lambda a: jnp.real(jnp.vdot(jnp.linalg.solve(a, b), jnp.linalg.solve(a, b)))
        )(pattern.todense(values))
        hermitian_bar = (dense_bar + dense_bar.conj().T) / 2
        on_pattern = hermitian_bar[pattern.rows, pattern.cols]
        np.testing.assert_allclose(values_bar, on_pattern, rtol=1e-10, atol=1e-12)

    @pytest.mark.parametrize(
        "symmetric, dtype",
        [(False, np.float64), (True, np.complex128)],
        ids=["nonsymmetric-f64", "hermitian-c128"],
    )
    def test_linear_solve_on_pattern_against_dense(self, symmetric, dtype):
        pattern = random_pattern(np.random.default_rng(7), 5, symmetric=symmetric)
        solve, transpose_solve = dense_services(pattern)
        project = pattern.symmetrize if symmetric else (lambda values: values)

        def solver(values, b):
            return autodiff.linear_solve(
                project(values), b, matvec=pattern.matvec, solve=solve,
                transpose_solve=None if symmetric else transpose_solve,
                symmetric=symmetric,
                symmetrize=pattern.symmetrize if symmetric else None,
            )

        def reference(values, b):
            return jnp.linalg.solve(pattern.todense(project(values)), b)

        def make_args(rng, dtype):
            values = diagonally_dominant_values(rng, pattern, dtype)
            return values, random_array(rng, (5,), dtype)

        autodiff.check_solver_derivatives(
            solver, make_args, reference=reference,
            dtypes=[dtype], vmap_in_axes=[(0, 0)],
        )
