"""Block systems: ``k`` unknowns per node, coarsened node by node.

A block system (``solve(A, b, block_dim=k)``; elasticity: the ``k`` displacement
components of a mesh node) numbers its unknowns node-major: unknown ``k·i + f`` is
component ``f`` of node ``i``.  The engine keeps the matrix in scalar CSR — a BSR matrix
is a CSR matrix whose pattern is closed in ``k × k`` blocks, and nothing here needs that
closure — and brings the blocks in where AMG needs them:

* **Amalgamation** (:func:`amalgamate`): the node graph, with an edge ``i → j`` where any
  entry of the block ``A_ij`` is stored, weighted by the block's Frobenius norm
  ``‖A_ij‖_F`` (:func:`node_magnitudes`), as PyAMG's and hypre's nodal coarsening do.
* **Coarsening on nodes, expanded to unknowns** (:func:`expand`): aggregation matches
  nodes, classical AMG splits nodes into C and F (:func:`classical_splitting`), so the
  ``k`` unknowns of a node always share an aggregate or a C/F status.  A coarse level is
  again a block system: aggregation with ``m`` near-null-space vectors makes each
  aggregate a node of ``m`` unknowns; classical AMG keeps the C nodes with their ``k``
  unknowns each.
* **Block smoothers** (:mod:`._relaxation`): block-Jacobi inverts the ``k × k`` diagonal
  blocks (AmgX's ``BLOCK_JACOBI`` on a block matrix), in the jitted numeric setup.

Classical interpolation stays unknown by unknown (hypre's *unknown approach* after a
nodal splitting): component ``f`` of an F node interpolates from component ``f`` of the
C nodes it strongly depends on; couplings between different components count as weak.

Smoothed aggregation's near-null space defaults, for a block system, to the ``k``
translations (:func:`translations`: the constant in each component, PyAMG's default for
BSR matrices) rather than the one constant vector; elasticity's rigid-body modes add the
rotations (``matrices.elasticity_matrix_2d`` returns them).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from . import _classical, _classical_kernels
from ._config import AMGConfig, SolverConfig
from ._csr_arrays import CsrStructure
from ._graph_kernels import WeightedGraph


def block_dim_of(caller: str, A: Any, block_dim: int | None) -> int:
    """``block_dim``, or the block size of a scipy BSR ``A`` when None (else 1).

    Raises:
      TypeError, ValueError: for a ``block_dim`` that is not a positive int, a BSR
        matrix with non-square blocks, or one whose block size disagrees with it.
    """
    bsr = scipy.sparse.issparse(A) and A.format == "bsr"
    if block_dim is not None and (not isinstance(block_dim, (int, np.integer))
                                  or isinstance(block_dim, bool)):
        raise TypeError(f"{caller}: block_dim must be an int, got {block_dim!r}.")
    if block_dim is not None and block_dim < 1:
        raise ValueError(f"{caller}: block_dim must be >= 1, got {block_dim}.")
    if not bsr:
        return 1 if block_dim is None else int(block_dim)
    rows, cols = A.blocksize
    if rows != cols:
        raise ValueError(f"{caller}: a BSR matrix's blocks must be square for block_dim,"
                         f" got blocksize {A.blocksize}.")
    if block_dim is not None and block_dim != rows:
        raise ValueError(f"{caller}: block_dim={block_dim} disagrees with the BSR matrix's"
                         f" blocksize {A.blocksize}; pass block_dim={rows} or leave it out.")
    return rows


def block_config(caller: str, config: SolverConfig, n: int, block_dim: int) -> SolverConfig:
    """``config`` for a system of ``n`` unknowns, ``block_dim`` to a node: ``block_dim``
    set on its AMG and relaxations, scope by scope.

    Raises:
      ValueError: if ``block_dim`` does not divide ``n``.
    """
    if n % block_dim:
        raise ValueError(f"{caller}: A has {n} rows, not a multiple of block_dim={block_dim}"
                         " (a block system has block_dim unknowns per node, node-major).")
    return _with_block_dim(config, block_dim)


def _with_block_dim(config: SolverConfig, block_dim: int) -> SolverConfig:
    if block_dim == 1:
        return config
    changes: dict[str, Any] = {}
    if config.amg is not None:
        changes["amg"] = dataclasses.replace(config.amg, block_dim=block_dim)
    if config.relaxation is not None:
        changes["relaxation"] = dataclasses.replace(config.relaxation, block_dim=block_dim)
    if config.preconditioner is not None:
        changes["preconditioner"] = _with_block_dim(config.preconditioner, block_dim)
    return dataclasses.replace(config, **changes)


def near_nullspace_columns(near_nullspace: Any, config: AMGConfig) -> int:
    """The near-null-space vectors of a hierarchy: the given ones, or the default's."""
    if near_nullspace is not None:
        return near_nullspace.shape[1]
    return 1 if config.algorithm == "CLASSICAL" else config.block_dim


def translations(n: int, block_dim: int, dtype: Any) -> jax.Array:
    """``(n, block_dim)``: the constant in each component of a node-major block system
    (for ``block_dim = 1`` the constant vector).

    >>> translations(4, 2, jnp.float32).tolist()
    [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]
    """
    return jnp.tile(jnp.eye(block_dim, dtype=dtype), (n // block_dim, 1))


@dataclasses.dataclass(frozen=True, eq=False)
class NodeGraph:
    """A block pattern amalgamated to its nodes.

    Attributes:
      pattern: the node pattern, ``(n / k) × (n / k)``: node ``i`` couples to node ``j``
        where any entry of block ``(i, j)`` is stored.
      entry_of: ``(nnz,)`` for each stored entry of the scalar pattern, the position of
        its block in ``pattern``.
      block_dim: ``k``.
    """

    pattern: CsrStructure
    entry_of: np.ndarray
    block_dim: int


def amalgamate(pattern: CsrStructure, block_dim: int) -> NodeGraph:
    """The node graph of ``pattern``, ``block_dim`` unknowns per node (host, NumPy).

    >>> path = CsrStructure(np.array([0, 2, 4, 5, 6]), np.array([0, 1, 0, 2, 2, 3]), 4)
    >>> nodes = amalgamate(path, 2)
    >>> nodes.pattern.indptr.tolist(), nodes.pattern.indices.tolist(), nodes.entry_of.tolist()
    ([0, 2, 3], [0, 1, 1], [0, 0, 0, 1, 2, 2])
    """
    if block_dim == 1:
        return NodeGraph(pattern, np.arange(pattern.nnz, dtype=np.int32), 1)
    n_nodes = pattern.n_rows // block_dim
    keys = (pattern.row_ids // block_dim).astype(np.int64) * n_nodes + pattern.indices // block_dim
    unique, entry_of = np.unique(keys, return_inverse=True)
    counts = np.bincount(unique // n_nodes, minlength=n_nodes)
    nodes = CsrStructure(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32),
                         (unique % n_nodes).astype(np.int32), n_nodes)
    return NodeGraph(nodes, entry_of.astype(np.int32).ravel(), block_dim)


def node_magnitudes(graph: NodeGraph, values: np.ndarray) -> WeightedGraph:
    """The Frobenius norms ``‖A_ij‖_F`` of the blocks, on the node pattern (``|a_ij|`` for
    ``k = 1``)."""
    magnitudes = np.abs(values)
    if graph.block_dim > 1:
        magnitudes = np.sqrt(np.bincount(graph.entry_of, magnitudes ** 2,
                                         minlength=graph.pattern.nnz))
    return WeightedGraph(graph.pattern.indptr, graph.pattern.indices, magnitudes)


def expand(node_labels: np.ndarray, block_dim: int) -> np.ndarray:
    """Each node's label repeated for its ``block_dim`` unknowns.

    >>> expand(np.array([0, 0, 1]), 2).tolist()
    [0, 0, 0, 0, 1, 1]
    """
    return np.repeat(node_labels, block_dim)


def classical_splitting(pattern: CsrStructure, values: np.ndarray, config: AMGConfig, *,
                        aggressive: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Classical AMG's strength and C/F splitting of a block system, decided on its nodes.

    Node ``i`` strongly depends on node ``j`` by classical AMG's criterion applied to the
    node matrix with ``‖A_ii‖_F`` on its diagonal and ``-‖A_ij‖_F`` off it (hypre's nodal
    coarsening); the nodes are split by ``config.selector``, aggressively (A2) on an
    aggressive level.  Unknown ``(i, f)`` then
    strongly depends on ``(j, f)`` — the same component — when node ``i`` strongly
    depends on node ``j`` and ``a_(i,f),(j,f)`` has the sign opposite to the diagonal's,
    and is a C point when node ``i`` is.  (On 2D elasticity the sign test halves the
    iterations; the scalar strength criterion on the same-component couplings instead
    quadruples them.)

    Returns:
      ``(strong, coarse)``: ``(nnz,)`` the strong couplings among the stored entries and
      ``(n,)`` the C points, as :func:`._classical.level_structure` takes them.
    """
    k = config.block_dim
    graph = amalgamate(pattern, k)
    nodes = graph.pattern
    norms = node_magnitudes(graph, values).weights
    node_values = np.where(nodes.indices == nodes.row_ids, norms, -norms)
    node_strong = _classical.strong_couplings(nodes, node_values, config)
    node_coarse = _classical_kernels.classical_splitting(nodes.indptr, nodes.indices, node_strong,
                                                         config.selector, aggressive=aggressive,
                                                         check=False)
    same_component = pattern.row_ids % k == pattern.indices % k
    # Of the sign opposite to the diagonal's (its phase, for complex values), as classical
    # interpolation needs of a strong coupling.
    diagonal = values[pattern.diagonal_positions()][pattern.row_ids]
    opposite = np.real(values * np.conj(diagonal)) < 0
    strong = node_strong[graph.entry_of] & same_component & opposite
    return strong, expand(node_coarse, k)
