"""JAX-AMG's README run with only its imports changed (``jaxamg`` → ``jaxsolve.sparse``).

The Quick Start block, with the documented result: ``x`` solves the tridiagonal system to
the default tolerance (``RELATIVE_INI``, 1e-6) and ``info`` answers JAX-AMG's keys with
JAX-AMG's meaning (absolute residual, an ``AMGXStatus``).  The README's MPI block is the MPI
Guide's, run under ``mpiexec`` by jaxamg_mpi_page_test.py.
"""

import numpy as np
import scipy.sparse.linalg

import jaxsolve.sparse as jaxamg
from jaxsolve.sparse.matrices import rhs_ones, tridiagonal_matrix
from jaxsolve.sparse.utils import to_scipy


def test_quick_start():
    # --- README.md, "Quick Start" (imports changed only) ---
    # Create a simple tridiagonal system
    n = 100
    A = tridiagonal_matrix(n, diagonal_value=2.0)
    b = rhs_ones(n)

    # Solve Ax = b
    x, info = jaxamg.solve(A, b)
    # --- end of the page's block ---
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS
    assert isinstance(info["iterations"], int) and 0 < info["iterations"] <= 1000
    A_scipy = to_scipy(A).astype(np.float64)
    expected = scipy.sparse.linalg.spsolve(A_scipy.tocsc(), np.ones(n))
    np.testing.assert_allclose(x, expected, rtol=1e-3)
    b_norm = np.sqrt(n)  # ‖b‖ = ‖r_0‖ from x0 = 0
    true_residual = np.linalg.norm(np.ones(n) - A_scipy @ np.asarray(x, np.float64))
    assert isinstance(info["residual"], float)
    # Absolute, as JAX-AMG's: the relative residual times ‖r_0‖ = ‖b‖.
    np.testing.assert_allclose(info["residual"], float(info.residual) * b_norm, rtol=1e-6)
    # The true residual (the recurrence's met 1e-6): what float32 attains for cond(A) ≈ 4·10³,
    # a backward error below eps, so SUCCESS as AmgX reports it.
    np.testing.assert_allclose(info["residual"], true_residual, rtol=0.3)
    assert true_residual <= 1e-3 * b_norm
