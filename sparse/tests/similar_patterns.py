"""Patterns of the same rows and nearly the same nonzeros, as a remeshing, a contact or a
growing Jacobian gives them: 3D Poisson plus a few couplings of its own (the patterns of
``tools/bench/sparse_new_pattern.py``), which a solve on one pattern must handle with the
programs compiled for another of its size."""

import jax.numpy as jnp
import numpy as np
import scipy.sparse

from jaxsolve import sparse
from jaxsolve.sparse import matrices


def poisson3d(n: int) -> scipy.sparse.csr_array:
    """The 7-point 3D Poisson matrix on ``n³`` cells, float64, as SciPy's CSR."""
    a = sparse.as_csr(matrices.poisson3d_matrix(n, dtype=jnp.float64))
    return scipy.sparse.csr_array((np.asarray(a.values), a.indices, a.indptr), shape=a.shape)


def with_couplings(a: scipy.sparse.csr_array, pairs) -> scipy.sparse.csr_array:
    """``a`` plus ``0.5 (e_i − e_j)(e_i − e_j)ᵀ`` per pair ``(i, j)`` of ``pairs``: two more
    off-diagonal entries each, symmetric positive definite as ``a`` is."""
    i, j = np.asarray(pairs).reshape(-1, 2).T
    extra = scipy.sparse.csr_array(
        (np.concatenate([np.full(2 * i.size, 0.5), np.full(2 * i.size, -0.5)]),
         (np.concatenate([i, j, i, j]), np.concatenate([i, j, j, i]))), shape=a.shape)
    out = scipy.sparse.csr_array(a + extra)
    out.sort_indices()
    return out


def with_extra_couplings(a: scipy.sparse.csr_array, n: int, k: int, seed: int
                         ) -> scipy.sparse.csr_array:
    """``a`` (on ``n³`` cells) plus ``k`` couplings (:func:`with_couplings`) between cells
    one step apart along ``(1, 1, 1)``, chosen at random by ``seed``."""
    cells = np.random.default_rng(seed).choice((n - 1) ** 3, size=k, replace=False)
    x, y, z = np.unravel_index(cells, (n - 1,) * 3)
    return with_couplings(a, np.stack([np.ravel_multi_index((x, y, z), (n,) * 3),
                                       np.ravel_multi_index((x + 1, y + 1, z + 1), (n,) * 3)],
                                      axis=1))


def similar_matrices(n: int, *variants: tuple[int, int]) -> list[sparse.CsrMatrix]:
    """:func:`poisson3d` of ``n`` plus ``k`` couplings chosen by ``seed``
    (:func:`with_extra_couplings`), one matrix per ``(k, seed)`` of ``variants``."""
    grid = poisson3d(n)
    return [sparse.as_csr(with_extra_couplings(grid, n, k, seed)) for k, seed in variants]
