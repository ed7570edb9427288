"""Grid problems with their Dirichlet boundary eliminated, as many codes assemble them.

Eliminating a boundary node's known value moves its couplings to the right-hand side and
leaves the node an identity row and column: rows that couple to nothing, which an AMG
setup must not carry as coarse unknowns of their own down to the coarsest level.
"""

import numpy as np
import scipy.sparse

from jaxsolve import sparse


def boundary_nodes(shape: tuple[int, ...]) -> np.ndarray:
    """The nodes on the boundary of a grid of ``shape`` numbered line by line (the last
    axis fastest), sorted."""
    grid = np.indices(shape).reshape(len(shape), -1)
    sides = np.asarray(shape)[:, None] - 1
    return np.flatnonzero(((grid == 0) | (grid == sides)).any(axis=0))


def eliminated(A, nodes: np.ndarray, block_dim: int = 1) -> scipy.sparse.csr_array:
    """``A`` (what :func:`jaxsolve.sparse.as_csr` takes) with the rows and columns of
    ``nodes``' unknowns (``block_dim`` a node, a node's together) those of the identity,
    its zeros dropped, its rows sorted."""
    csr = sparse.as_csr(A)
    A = scipy.sparse.csr_array((np.asarray(csr.values), csr.indices, csr.indptr),
                               shape=csr.shape)
    unknowns = (block_dim * np.asarray(nodes)[:, None] + np.arange(block_dim)).ravel()
    kept = np.ones(A.shape[0], A.dtype)
    kept[unknowns] = 0
    A = scipy.sparse.csr_array(scipy.sparse.diags_array(kept) @ A @ scipy.sparse.diags_array(kept)
                               + scipy.sparse.diags_array(1 - kept))
    A.eliminate_zeros()
    A.sort_indices()
    return A
