"""Tests of make_preconditioner's input and output types (issue 32): the residual's dtype
comes back, as solve promotes, and a non-matrix gets solve's TypeError."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sparse


class TestPreconditionerDtype:
    @pytest.mark.parametrize("config", [None, {"solver": "BLOCK_JACOBI"}])
    def test_float32_preconditioner_of_a_float64_residual_returns_float64(self, config, x64):
        M = sparse.make_preconditioner(sparse.matrices.poisson_matrix(8, dtype=jnp.float32),
                                       config)
        r = jnp.linspace(1.0, 2.0, 64, dtype=jnp.float64)
        assert M(r).dtype == jnp.float64
        assert M(r.astype(jnp.float32)).dtype == jnp.float32
        # The float32 cycle, promoted: equal to its float32 result, to float32's precision.
        np.testing.assert_allclose(M(r), M(r.astype(jnp.float32)), rtol=1e-6)

    def test_jax_scipy_bicgstab_with_a_float32_preconditioner_on_float64(self, x64):
        # The while_loop of jax.scipy's bicgstab refused a carry that M turned to float32.
        M = sparse.make_preconditioner(sparse.matrices.poisson_matrix(8, dtype=jnp.float32))
        A64 = sparse.matrices.poisson_matrix(8, dtype=jnp.float64)
        b = jnp.ones(64, jnp.float64)
        x, _ = jax.scipy.sparse.linalg.bicgstab(A64, b, M=M, tol=1e-10)
        assert x.dtype == jnp.float64
        assert float(jnp.linalg.norm(A64 @ x - b)) <= 1e-8 * float(jnp.linalg.norm(b))

    @pytest.mark.parametrize("A", ["A", 3, None, object()])
    def test_not_a_matrix_gets_solves_type_error(self, A):
        with pytest.raises(TypeError) as from_solve:
            sparse.solve(A, jnp.ones(3))
        with pytest.raises(TypeError) as from_preconditioner:
            sparse.make_preconditioner(A)
        assert str(from_preconditioner.value) == str(from_solve.value)
