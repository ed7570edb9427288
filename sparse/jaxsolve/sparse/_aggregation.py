"""Aggregation: which fine unknowns merge into one coarse unknown (host, once per pattern).

jaxsolve's aggregation follows AmgX's ``SIZE_2``/``SIZE_4``/``SIZE_8`` selectors: one, two
or three rounds of *pairwise matching* on the graph of strong couplings.  A round visits the
unknowns in order and pairs each unpaired one with its most strongly coupled unpaired
neighbour; an unknown left without a partner joins its strongest neighbour's pair (AmgX's
``merge_singletons``).  The next round matches the pairs on the graph of the summed
couplings between them, so three rounds give aggregates of about 8 unknowns — a
2 × 2 × 2 block on a 3D grid.

Unknowns that couple to nothing (the identity rows and columns of eliminated Dirichlet
conditions) have no neighbour to pair with: each round gathers them into one aggregate.
As aggregates of one each they stayed apart on every level down to the coarsest, whose
dense LU factored them all (3D Poisson 24³ with its 3176 boundary rows eliminated:
13 824, 4507, 3342, …, 3177 rows, 98.5 × the matrix's memory kept); gathered, the levels
shrink as the interior's do, one row more each (13 824, 1332, 167: 2.1 ×), and the
smoother treats those unknowns, which nothing couples to the rest.  PyAMG leaves them
out of ``P`` instead (rows of ``P`` without an entry): a coarse row and two transfer
entries fewer per such unknown, the same PCG iterations (measured on these aggregates),
but every path that builds ``P`` would have to allow such rows.

The coupling of unknowns ``i`` and ``j`` is

    w_ij = (|a_ij| + |a_ji|) / (2 √(|a_ii| |a_jj|)),

which on anisotropic problems pairs along the strong direction and does not change when
``A`` is scaled symmetrically by a diagonal.  On coarser levels the couplings come from the
aggregated magnitudes ``Σ |a_ij|`` over pairs of aggregates (:func:`aggregated`), a cheap
host-side stand-in for the coarse operator's values.  Without concrete values (a first
solve under ``jit`` with traced values), every stored entry couples equally: the pattern
alone decides (documented in :func:`jaxsolve.sparse.solve`).

Smoothed aggregation (a jaxsolve extension) widens every coarse operator: on a 3D
7-point Laplacian, level 1 holds about 30 entries per row and, matched in octets again,
level 2 about 130.  Its coarse levels therefore match in more rounds
(:func:`smoothed_rounds`), until an aggregate is about as large as a row of the level's
operator — the size that PyAMG's neighbourhood aggregation reaches by construction — so
that the hierarchy stays short and its coarse operators sparse.

With a near-null space of ``k`` vectors (rigid-body modes: ``k = 3`` in 2D, 6 in 3D) an
aggregate becomes ``k`` coarse unknowns, so every level matches in ``⌈log₂ k⌉`` more rounds
(:func:`rounds_for_columns`) and still shrinks by about the selector's factor.
"""

from __future__ import annotations

import numpy as np

from . import _graph_kernels
from ._csr_arrays import CsrStructure
from ._graph_kernels import WeightedGraph

ROUNDS = {"SIZE_2": 1, "SIZE_4": 2, "SIZE_8": 3}
# At most this many rounds beyond the selector's on a coarse level of smoothed aggregation.
MAX_EXTRA_ROUNDS = 3


def rounds_for_columns(columns: int) -> int:
    """Pairwise rounds beyond the selector's for ``k = columns`` near-null-space vectors.

    Each aggregate becomes ``k`` coarse unknowns, so aggregates ``2^⌈log₂ k⌉`` times
    larger keep the coarsening ratio the selector's (``SIZE_4`` with three rigid-body
    modes: aggregates of about 16 unknowns, 3 coarse unknowns each).

    >>> rounds_for_columns(1), rounds_for_columns(3), rounds_for_columns(6)
    (0, 2, 3)
    """
    return max(columns - 1, 0).bit_length()


def smoothed_rounds(rounds: int, mean_row_length: float) -> int:
    """The pairwise rounds for a coarse level of smoothed aggregation.

    ``rounds`` (the selector's), plus one more while aggregates of ``2^rounds`` unknowns
    would be smaller than the level's mean row length, at most :data:`MAX_EXTRA_ROUNDS`
    more.

    >>> smoothed_rounds(3, 6.9), smoothed_rounds(3, 30.3), smoothed_rounds(3, 500.0)
    (3, 5, 6)
    """
    extra = 0
    while 2 ** (rounds + extra) < mean_row_length and extra < MAX_EXTRA_ROUNDS:
        extra += 1
    return rounds + extra


def coupling_graph(pattern: CsrStructure,
                   magnitudes: WeightedGraph | None) -> WeightedGraph:
    """The symmetric graph of couplings ``w_ij``, without the diagonal.

    Args:
      pattern: the level's pattern; without magnitudes, every stored entry couples (each
        direction in which a pair is stored counts one half).
      magnitudes: ``|A|`` on (a subset of) that pattern, as a weighted graph with its
        diagonal, or None.
    """
    if magnitudes is None:
        return _graph_kernels.coupling_graph(pattern.indptr, pattern.indices, None, check=False)
    return _graph_kernels.coupling_graph(magnitudes.indptr, magnitudes.indices, magnitudes.weights,
                                         check=False)


def aggregated(magnitudes: WeightedGraph, aggregate_of: np.ndarray,
               count: int) -> WeightedGraph:
    """``Σ |a_ij|`` over each pair of aggregates: the next level's couplings."""
    return _graph_kernels.contract_graph(magnitudes, aggregate_of, count, keep_diagonal=True,
                                         check=False)


def aggregate(graph: WeightedGraph, rounds: int) -> tuple[np.ndarray, int]:
    """Aggregates of ``graph``'s nodes after ``rounds`` rounds of pairwise matching.

    Returns:
      ``(aggregate_of, count)``: the aggregate of every node, numbered ``0..count-1``.
    """
    aggregate_of = np.arange(graph.indptr.shape[0] - 1, dtype=np.int32)
    count = aggregate_of.shape[0]
    for _ in range(rounds):
        pairs, pair_count = _graph_kernels.aggregate_pairs(graph.indptr, graph.indices,
                                                           graph.weights, check=False)
        aggregate_of = pairs[aggregate_of]
        if pair_count == count:  # nothing merged: further rounds cannot either
            break
        graph = _graph_kernels.contract_graph(graph, pairs, pair_count, keep_diagonal=False,
                                              check=False)
        count = pair_count
    return aggregate_of, count
