"""Tests of the distributed gallery: `poisson_matrix_distributed` and its 3D twin."""

import jax
import numpy as np
import pytest
import scipy.sparse as sp

from jaxsolve.sparse import matrices


def _laplacian(shape):
    """The Dirichlet Laplacian of a C-ordered grid, by Kronecker sums (reference)."""
    result = None
    for n in shape:
        T = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n))
        result = T if result is None else sp.kronsum(T, result)
    return result.toarray()


def _stacked(blocks):
    return np.vstack([np.asarray(block.todense()) for block, _, _ in blocks])


class TestPoissonMatrixDistributed:

    @pytest.mark.parametrize("nranks", [1, 3, 4])
    def test_poisson_matrix_distributed_against_global(self, nranks):
        blocks = [matrices.poisson_matrix_distributed(5, 3, r, nranks) for r in range(nranks)]
        np.testing.assert_array_equal(_stacked(blocks), _laplacian((3, 5)))  # x (nx) fastest
        assert [(start, end) for _, start, end in blocks][0][0] == 0
        assert all(b[2] == c[1] for b, c in zip(blocks, blocks[1:]))
        square = [matrices.poisson_matrix_distributed(4, 4, r, 2)[0] for r in range(2)]
        np.testing.assert_array_equal(np.vstack([np.asarray(a.todense()) for a in square]),
                                      np.asarray(matrices.poisson_matrix(4).todense()))

    @pytest.mark.parametrize("nranks", [1, 2, 5])
    def test_poisson3d_matrix_distributed_against_global(self, nranks):
        blocks = [matrices.poisson3d_matrix_distributed(4, 3, 2, r, nranks)
                  for r in range(nranks)]
        np.testing.assert_array_equal(_stacked(blocks), _laplacian((4, 3, 2)))
        for block, _, _ in blocks:
            assert jax.tree.leaves(block) == [block.data]  # a static pattern
            assert np.all(np.diff(block.indptr) >= 0)

    def test_poisson_matrix_distributed_errors(self):
        with pytest.raises(ValueError, match="rank=2 is not one of the 2 ranks"):
            matrices.poisson_matrix_distributed(4, 4, 2, 2)
        with pytest.raises(TypeError, match="rank must be an int"):
            matrices.poisson3d_matrix_distributed(2, 2, 2, 0.5, 2)
