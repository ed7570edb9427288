"""Native kernels on weighted graphs, for the AMG setup on the host: ``ctypes`` on NumPy arrays.

Aggregation AMG (:mod:`._aggregation`) pairs the nodes of a graph, then pairs the pairs:

* :func:`coupling_graph`: the symmetric graph of a matrix's couplings, a :class:`WeightedGraph`
  (``csrc/weighted_graph.cc``);
* :func:`aggregate_pairs`: its greedy pairwise matching, AmgX's ``SIZE_2`` selector
  (``csrc/pairwise_aggregation.cc``);
* :func:`contract_graph`: the graph of the pairs, which the next round matches
  (``csrc/weighted_graph.cc``).

Column coloring (:mod:`._coloring`) colors the graph of a product of two patterns with
:func:`dsatur_coloring` (``csrc/coloring.cc``), which never forms the product.

Each is a C function of the package's CPU library (:data:`._native_library.LIBRARY`), linear
in its input up to a sort per row: tens of milliseconds for two million nodes. Patterns are
checked (:func:`._native_library.check_pattern`) unless the AMG setup made them itself.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._native_library import LIBRARY, check_pattern, check_size

_cpu = LIBRARY.cpu


def aggregate_pairs(indptr: Any, indices: Any, weights: Any, *,
                    check: bool = True) -> tuple[np.ndarray, int]:
    """Greedy pairwise matching of a weighted graph into aggregates of (mostly) two nodes.

    The aggregation step of AmgX-style unsmoothed-aggregation AMG (its ``SIZE_2`` selector):
    each aggregate becomes one unknown of the next coarser level. The graph is an ``n × n``
    CSR matrix of edge weights, typically a strength of connection: ``weights[e]`` is the
    weight ``w_ij`` of node ``i``'s edge to ``j = indices[e]``, for ``indptr[i] <= e <
    indptr[i+1]``. The diagonal and weights that are not positive are ignored, and the graph
    may be unsymmetric: row ``i`` gives the weights as node ``i`` sees them.

    * Phase one visits ``i = 0, ..., n-1`` in order. An unmatched ``i`` is paired with its
      unmatched neighbour ``j`` of largest weight ``w_ij`` (ties: the smallest ``j``); the
      pair is a new aggregate. A node with no unmatched neighbour waits for phase two (in an
      unsymmetric graph a later node may still pair with it).
    * Phase two: each node still unmatched joins the aggregate of its neighbour of largest
      weight, matched by now. The nodes with no neighbour at all form one aggregate
      together, the last: rows that couple to nothing (eliminated Dirichlet rows) would
      otherwise stay aggregates of one on every coarser level.

    Aggregates are numbered in the order they are created, so the result is deterministic.
    The work is ``O(n + nnz)``, in native code: tens of milliseconds for two million nodes.

    Args:
      indptr: ``(n + 1,)`` integer row pointers, from 0 to ``nnz``, non-decreasing.
      indices: ``(nnz,)`` integer neighbours, in ``[0, n)``; within a row in any order.
      weights: ``(nnz,)`` real weights (compared as float64).
      check: whether to check the pattern (False: the AMG setup's own graphs).

    Returns:
      ``(aggregate, n_aggregates)``: the ``(n,)`` int32 aggregate of every node, numbered
      ``0 .. n_aggregates - 1``, and their number.

    Raises:
      TypeError, ValueError: for arrays that are not such a graph.

    Examples:
      A path 0 - 1 - 2 - 3 - 4, heaviest at its ends: 0 pairs with 1, 2 with 3, and 4, whose
      only neighbour is taken, joins 3's aggregate.

      >>> import numpy as np, scipy.sparse
      >>> w = np.array([3.0, 1.0, 1.0, 2.0])
      >>> graph = scipy.sparse.diags([w, w], [-1, 1], format="csr")
      >>> aggregate_pairs(graph.indptr, graph.indices, graph.data)
      (array([0, 0, 1, 1, 1], dtype=int32), 2)
    """
    fn = "aggregate_pairs"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    weights = _checked_weights(fn, "weights", weights, indices.shape)
    aggregate = np.empty(n, np.int32)
    count = _cpu.JaxsolveSparseAggregatePairs(n, indptr, indices, weights, aggregate)
    return aggregate, int(count)


class WeightedGraph(NamedTuple):
    """An ``n × n`` weighted graph in CSR: row ``i`` holds node ``i``'s edges, sorted."""

    indptr: np.ndarray
    """``(n + 1,)`` int32 row pointers."""
    indices: np.ndarray
    """``(nnz,)`` int32 neighbours, sorted and distinct within each row."""
    weights: np.ndarray
    """``(nnz,)`` float64 edge weights."""


def coupling_graph(indptr: Any, indices: Any, magnitudes: Any | None, *,
                   check: bool = True) -> WeightedGraph:
    """The symmetric coupling graph of an ``n × n`` matrix, without its diagonal.

    The weight of the edge between ``i`` and ``j`` is ``(|a_ij| + |a_ji|) / (2 √(|a_ii|
    |a_jj|))`` (0 where the diagonal vanishes), or, without ``magnitudes``, ½ for each
    direction in which the pair is stored. Native code, ``O(n + nnz)`` plus a sort per row.

    Args:
      indptr, indices: the matrix's CSR pattern (any integer dtype; a row's columns in any
        order, each once).
      magnitudes: ``(nnz,)`` its values (their absolute values count), or None.
      check: whether to check the pattern (False: one the AMG setup made or checked).

    Examples:
      >>> import numpy as np
      >>> graph = coupling_graph([0, 2, 3], [0, 1, 1], np.array([4.0, -2.0, 1.0]))
      >>> graph.indptr.tolist(), graph.indices.tolist(), graph.weights.tolist()
      ([0, 1, 2], [1, 0], [0.5, 0.5])
    """
    fn = "coupling_graph"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    if magnitudes is not None:
        magnitudes = _checked_weights(fn, "magnitudes", magnitudes, indices.shape)
    out_indptr = np.empty(n + 1, np.int32)
    out_indices = np.empty(2 * indices.shape[0], np.int32)
    out_weights = np.empty(2 * indices.shape[0], np.float64)
    nnz = _cpu.JaxsolveSparseCouplingGraph(
        n, indptr, indices, None if magnitudes is None else magnitudes.ctypes.data,
        out_indptr, out_indices, out_weights)
    return WeightedGraph(out_indptr, out_indices[:nnz], out_weights[:nnz])


def contract_graph(graph: WeightedGraph, groups: Any, n_groups: int, *,
                   keep_diagonal: bool, check: bool = True) -> WeightedGraph:
    """The graph of groups of nodes: ``Gᵀ W G`` for the membership matrix ``G``.

    The weight between two groups is the sum of the weights between their members; a
    group's internal weight is its diagonal entry, kept or dropped. Native code,
    ``O(n + nnz)`` plus a sort per row.

    Args:
      graph: an ``n × n`` weighted graph (a row's columns in any order, each once).
      groups: ``(n,)`` each node's group, in ``[0, n_groups)``.
      n_groups: the number of groups.
      keep_diagonal: whether to keep each group's internal weight.
      check: whether to check the graph and the groups (False: the AMG setup's own).

    Examples:
      >>> import numpy as np
      >>> path = WeightedGraph(np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]), np.ones(4))
      >>> contract_graph(path, [0, 0, 1], 2, keep_diagonal=True).weights.tolist()
      [2.0, 1.0, 1.0]
    """
    fn = "contract_graph"
    n = np.shape(graph.indptr)[0] - 1 if np.ndim(graph.indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), graph.indptr, graph.indices, n,
                                     check)
    weights = _checked_weights(fn, "weights", graph.weights, indices.shape)
    n_groups = check_size(fn, "n_groups", n_groups)
    groups = np.asarray(groups)
    if groups.shape != (n,) or not np.issubdtype(groups.dtype, np.integer):
        raise TypeError(f"{fn}: groups must be ({n},) integers, got groups.shape="
                        f"{groups.shape} and groups.dtype={groups.dtype}")
    if check and n and (groups.min() < 0 or groups.max() >= n_groups):
        raise ValueError(f"{fn}: groups must lie in [0, {n_groups}), got values from "
                         f"{groups.min()} to {groups.max()}")
    out_indptr = np.empty(n_groups + 1, np.int32)
    out_indices = np.empty(indices.shape[0], np.int32)
    out_weights = np.empty(indices.shape[0], np.float64)
    nnz = _cpu.JaxsolveSparseContractGraph(
        n, indptr, indices, weights, np.ascontiguousarray(groups, np.int32), n_groups,
        int(keep_diagonal), out_indptr, out_indices, out_weights)
    if nnz < 0:
        raise MemoryError(f"{fn}: out of memory for the groups' rows")
    return WeightedGraph(out_indptr, out_indices[:nnz], out_weights[:nnz])


def _checked_weights(fn: str, name: str, weights: Any, shape: tuple[int, ...]) -> np.ndarray:
    weights = np.asarray(weights)
    if weights.shape != shape or not np.isrealobj(weights):
        raise TypeError(
            f"{fn}: {name} must be real, one per entry, shape {shape}; got "
            f"{name}.shape={weights.shape} and {name}.dtype={weights.dtype}"
        )
    return np.ascontiguousarray(weights, np.float64)


def dsatur_coloring(first_indptr: Any, first_indices: Any, second_indptr: Any,
                    second_indices: Any) -> np.ndarray:
    """DSATUR coloring of the graph of ``F S``: nodes ``v`` and ``w`` adjacent when some
    ``r`` has ``F[v, r]`` and ``S[r, w]`` (the product is never formed).

    ``F = Pᵀ``, ``S = P`` gives the column-intersection graph of ``P``; ``F = I``,
    ``S = P + Pᵀ`` the graph of a square ``P``. Unchecked patterns (``color_columns`` makes
    them); see ``csrc/coloring.cc``.

    Returns:
      ``(n,)`` int32 colors ``0 .. k - 1``, every one used.
    """
    n = np.shape(first_indptr)[0] - 1
    colors = np.empty(n, np.int32)
    count = _cpu.JaxsolveSparseColorDsatur(
        n, np.ascontiguousarray(first_indptr, np.int64),
        np.ascontiguousarray(first_indices, np.int32),
        np.ascontiguousarray(second_indptr, np.int64),
        np.ascontiguousarray(second_indices, np.int32), colors)
    if count < 0:
        raise MemoryError("color_columns: not enough memory for the coloring.")
    return colors
