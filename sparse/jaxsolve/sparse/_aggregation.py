"""Aggregation: which fine unknowns merge into one coarse unknown (host, once per pattern).

jaxsolve's aggregation follows AmgX's ``SIZE_2``/``SIZE_4``/``SIZE_8`` selectors: one, two
or three rounds of *pairwise matching* on the graph of strong couplings.  A round visits the
unknowns in order and pairs each unpaired one with its most strongly coupled unpaired
neighbour; an unknown left without a partner joins its strongest neighbour's pair (AmgX's
``merge_singletons``) or stays alone.  The next round matches the pairs on the graph of the
summed couplings between them, so three rounds give aggregates of about 8 unknowns — a
2 × 2 × 2 block on a 3D grid.

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
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from . import _native
from ._csr_arrays import CsrStructure

ROUNDS = {"SIZE_2": 1, "SIZE_4": 2, "SIZE_8": 3}
# At most this many rounds beyond the selector's on a coarse level of smoothed aggregation.
MAX_EXTRA_ROUNDS = 3


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
                   magnitudes: scipy.sparse.csr_array | None) -> scipy.sparse.csr_array:
    """The symmetric graph of couplings ``w_ij`` (diagonal dropped), as a scipy CSR array.

    Args:
      pattern: the level's pattern.
      magnitudes: ``|A|`` on (a subset of) that pattern, or None to couple every stored
        entry with weight 1.
    """
    n = pattern.n_rows
    if magnitudes is None:
        ones = np.full(pattern.nnz, 0.5)  # each direction of an edge counts one half
        graph = scipy.sparse.csr_array((ones, pattern.indices, pattern.indptr), shape=(n, n))
        return _without_diagonal(graph + graph.T)
    coo = scipy.sparse.coo_array(magnitudes)
    diagonal = np.sqrt(np.abs(magnitudes.diagonal()))
    scale = 2 * diagonal[coo.row] * diagonal[coo.col]
    weights = np.divide(coo.data, scale, out=np.zeros(coo.nnz), where=scale > 0)
    graph = scipy.sparse.csr_array((weights, (coo.row, coo.col)), shape=(n, n))
    return _without_diagonal(graph + graph.T)


def aggregated(magnitudes: scipy.sparse.csr_array, aggregate_of: np.ndarray,
               count: int) -> scipy.sparse.csr_array:
    """``Σ |a_ij|`` over each pair of aggregates: the next level's couplings."""
    membership = scipy.sparse.csr_array(
        (np.ones(aggregate_of.shape[0]), aggregate_of,
         np.arange(aggregate_of.shape[0] + 1)), shape=(aggregate_of.shape[0], count))
    return scipy.sparse.csr_array(membership.T @ magnitudes @ membership)


def aggregate(graph: scipy.sparse.csr_array, rounds: int) -> tuple[np.ndarray, int]:
    """Aggregates of ``graph``'s nodes after ``rounds`` rounds of pairwise matching.

    Returns:
      ``(aggregate_of, count)``: the aggregate of every node, numbered ``0..count-1``.
    """
    aggregate_of = np.arange(graph.shape[0], dtype=np.int32)
    count = graph.shape[0]
    for _ in range(rounds):
        graph = graph.tocsr()
        graph.sort_indices()
        pairs, pair_count = _native.aggregate_pairs(
            graph.indptr.astype(np.int32), graph.indices.astype(np.int32),
            graph.data.astype(np.float64),
        )
        aggregate_of = pairs[aggregate_of]
        if pair_count == count:  # nothing merged: further rounds cannot either
            break
        membership = scipy.sparse.csr_array(
            (np.ones(count), pairs, np.arange(count + 1)), shape=(count, pair_count)
        )
        graph = _without_diagonal(membership.T @ graph @ membership)
        count = pair_count
    return aggregate_of, count


def _without_diagonal(graph: scipy.sparse.sparray) -> scipy.sparse.csr_array:
    coo = scipy.sparse.coo_array(graph)
    off = coo.row != coo.col
    graph = scipy.sparse.csr_array(
        (coo.data[off], (coo.row[off], coo.col[off])), shape=coo.shape
    )
    graph.sum_duplicates()
    return graph
