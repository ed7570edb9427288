"""Matrices shared by the sharding tests (and by mpi_spmv.py, which runs under ``mpiexec``)."""

import numpy as np
import scipy.sparse as sp


def random_matrix(n, m=None, density=0.1, seed=0):
    """A random sparse ``(n, m)`` matrix, not symmetric, whose first fifth of rows are much
    longer than the others (CSR, float64)."""
    rng = np.random.default_rng(seed)
    A = sp.random_array((n, m or n), density=density, format="lil", rng=rng)
    A[: n // 5, :] = A[: n // 5, :] + sp.random_array((n // 5, m or n), density=0.6, rng=rng)
    return A.tocsr()


def poisson(n, dims):
    """The 3-, 5- or 7-point Poisson matrix (dims = 1, 2, 3) of an n^dims grid in natural order
    (x fastest), CSR."""
    T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n))
    A = T
    for _ in range(dims - 1):
        A = sp.kronsum(A, T)
    return A.tocsr()
