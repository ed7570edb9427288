"""The AMG setup's host kernels: native code on NumPy arrays, through ``ctypes``.

Functions backed by C++ (``csrc/``) in the package's CPU library
(:data:`._native_library.LIBRARY`):

* :func:`aggregate_pairs`: greedy pairwise matching of a weighted graph, the aggregation step
  of an AMG setup.
* :func:`coupling_graph` and :func:`contract_graph`: the weighted graphs aggregation matches
  on; :func:`dsatur_coloring`, the greedy coloring of a product graph.
* :func:`classical_strength`, :func:`classical_splitting`, :func:`interpolation_pattern`,
  :func:`multipass_pattern`, :func:`interpolation_values`, :func:`truncation` and
  :func:`truncated_values`: classical AMG's strong couplings, C/F splitting, the index
  plans of its interpolations and their weights for concrete values.
* :func:`spgemm_symbolic`: the pattern of a sparse product ``C = A B``, on which the numeric
  product (``A P``, ``Pᵀ A P`` in an AMG setup; :func:`._ffi_primitives.csr_product_values`)
  runs; :func:`spgemm_host`, the pattern and the values for concrete values (the classical
  setup's next level).
* :func:`csr_transpose` and :func:`find_in_rows`: a pattern's transpose (``R = Pᵀ``), and
  where given columns (the diagonal) sit in its rows.

They run in time linear in their input: a few hundred milliseconds for two million rows,
split over the cores this process may use (:func:`host_threads`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._native_library import DTYPES, INT32_MAX, LIBRARY, check_pattern, check_size

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
      weight, matched by now, or becomes an aggregate of its own if it has no neighbour.

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


def host_threads() -> int:
    """The most threads a host setup kernel splits its work over: the CPUs this process may
    run on (its affinity mask), at most its cgroup's CPU quota.

    Found once per process.  In a container the host's CPU count can be many times this.
    """
    return int(_cpu.JaxsolveSparseHostThreads())


def csr_transpose(indptr: np.ndarray, indices: np.ndarray,
                  n_cols: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pattern of the transpose of an ``n × n_cols`` CSR pattern, and where each of its
    entries comes from: ``(indptr, indices, from)`` with ``from[k]`` the position in
    ``indices`` of the transpose's entry ``k``.

    Rows stay ascending within each column: entry for entry SciPy's CSR → CSC conversion,
    a counting sort by column, here native and over the cores.  Unchecked: for the int32
    patterns the AMG setup made or checked (a :class:`~._csr_arrays.CsrStructure`'s); see
    ``csrc/csr_transpose.cc``.
    """
    indptr = np.ascontiguousarray(indptr, np.int32)
    indices = np.ascontiguousarray(indices, np.int32)
    t_indptr = np.empty(n_cols + 1, np.int32)
    t_indices = np.empty(indices.shape[0], np.int32)
    source = np.empty(indices.shape[0], np.int32)
    if _cpu.JaxsolveSparseCsrTranspose(indptr.shape[0] - 1, n_cols, indptr, indices,
                                       t_indptr, t_indices, source):
        raise MemoryError("csr_transpose: out of memory for the column counts")
    return t_indptr, t_indices, source


def find_in_rows(indptr: np.ndarray, indices: np.ndarray, columns: np.ndarray | None,
                 n_rows: int) -> np.ndarray:
    """For each row ``i < n_rows``, the position of its (last) entry in column
    ``columns[i]`` — without ``columns``, ``i``: the diagonal — or -1 where it has none.

    One native scan of each row, over the cores. Unchecked: for the int32 patterns the AMG
    setup made or checked (a :class:`~._csr_arrays.CsrStructure`'s); see
    ``csrc/row_search.cc``.

    Returns:
      ``(n_rows,)`` int32 positions into ``indices``.
    """
    positions = np.empty(n_rows, np.int32)
    if columns is not None:
        columns = np.ascontiguousarray(columns, np.int32)
        assert columns.shape == (n_rows,), (columns.shape, n_rows)
    if _cpu.JaxsolveSparseFindInRows(n_rows, np.ascontiguousarray(indptr, np.int32),
                                     np.ascontiguousarray(indices, np.int32),
                                     None if columns is None else columns.ctypes.data,
                                     positions):
        raise MemoryError("find_in_rows: no thread could be started")
    return positions


class SpgemmPattern(NamedTuple):
    """The symbolic product ``C = A B``: ``C``'s CSR pattern and its scalar products' count."""

    indptr: np.ndarray
    """``(m + 1,)`` int32 row pointers of ``C``."""
    indices: np.ndarray
    """``(nnz(C),)`` int32 columns of ``C``, sorted within each row."""
    n_products: int
    """The number of scalar products: the sum, over ``A``'s entries, of the length of the row
    of ``B`` they select."""


def spgemm_symbolic(
    a_indptr: Any, a_indices: Any, b_indptr: Any, b_indices: Any, p: int, *,
    check: bool = True,
) -> SpgemmPattern:
    """The pattern of the sparse product ``C = A B``, its columns sorted within each row.

    For CSR matrices ``A`` (``m × n``) and ``B`` (``n × p``), row ``i`` of ``C`` holds every
    column ``l`` of a product ``A[i, j] B[j, l]`` of stored entries. The numeric product
    (:func:`csr_product_values`, rerun for new values on the same patterns: an AMG setup's
    ``A P`` and ``Pᵀ (A P)``) finds each product's place in this pattern.

    One native pass of Gustavson's, with a marker array of ``p`` entries, forms and sorts
    each row of ``C`` in an array as long as the products (an upper bound of ``nnz(C)``),
    then packs them and gives the rest of the array back. The work is ``O(p + products)``,
    plus sorting each row of ``C``, split over the cores by rows.

    Args:
      a_indptr, a_indices: ``A``'s pattern, ``(m + 1,)`` and ``(nnz(A),)`` integers; columns in
        ``[0, n)`` with ``n = len(b_indptr) - 1``. Rows need not be sorted.
      b_indptr, b_indices: ``B``'s pattern; columns in ``[0, p)``.
      p: columns of ``B``.
      check: whether to check that the patterns are CSR and fit together. Only the AMG
        setup passes False, for patterns its own kernels made (a
        :class:`~._csr_arrays.CsrStructure`'s): the native code trusts them.

    Returns:
      A :class:`SpgemmPattern` ``(indptr, indices, n_products)``.

    Raises:
      TypeError, ValueError: for patterns that are not CSR or do not fit together, or more
        than ``2**31 - 1`` products (which the int32 indices of the product's derivative
        cannot address).
      MemoryError: the native code ran out of memory.

    Examples:
      ``A = [[1, 1], [0, 1]]`` times ``B = [[1, 0, 1], [0, 1, 0]]``: row 0 of ``C`` gets
      ``B``'s rows 0 and 1, columns 0, 2 and 1, sorted.

      >>> c = spgemm_symbolic([0, 2, 3], [0, 1, 1], [0, 2, 3], [0, 2, 1], p=3)
      >>> c.indptr, c.indices, c.n_products
      (array([0, 3, 4], dtype=int32), array([0, 1, 2, 1], dtype=int32), 4)
    """
    return _spgemm("spgemm_symbolic", a_indptr, a_indices, b_indptr, b_indices, p, check)[0]


def spgemm_host(
    a_values: Any, a_indptr: Any, a_indices: Any, b_values: Any, b_indptr: Any,
    b_indices: Any, p: int, *, check: bool = True,
) -> tuple[SpgemmPattern, np.ndarray]:
    """:func:`spgemm_symbolic` and ``C``'s values for concrete NumPy values, in one pass.

    The values are bit for bit :func:`csr_product_values`'s on the CPU (each entry sums its
    products in the same order, from zero); ``A`` and ``B`` share one dtype of
    ``float32``, ``float64``, ``complex64`` or ``complex128``. Arguments and errors as
    :func:`spgemm_symbolic`'s.

    Examples:
      ``[[1, 1], [0, 1]]`` times ``[[1, 0, 2], [0, 3, 0]]``:

      >>> c, values = spgemm_host(np.ones(3), [0, 2, 3], [0, 1, 1], np.array([1.0, 2.0, 3.0]),
      ...                         [0, 2, 3], [0, 2, 1], p=3)
      >>> c.indptr.tolist(), c.indices.tolist(), values.tolist()
      ([0, 3, 4], [0, 1, 2, 1], [1.0, 3.0, 2.0, 3.0])
    """
    fn = "spgemm_host"
    a_values = _values_dtype(fn, "a_values", a_values, np.shape(a_indices))
    b_values = _values_dtype(fn, "b_values", b_values, np.shape(b_indices))
    if a_values.dtype != b_values.dtype:
        raise ValueError(f"{fn}: A and B must have one dtype, got {a_values.dtype} and"
                         f" {b_values.dtype}")
    return _spgemm(fn, a_indptr, a_indices, b_indptr, b_indices, p, check,
                   (a_values, b_values))


def _spgemm(fn: str, a_indptr: Any, a_indices: Any, b_indptr: Any, b_indices: Any, p: int,
            check: bool, values: tuple[np.ndarray, np.ndarray] | None = None,
            ) -> tuple[SpgemmPattern, np.ndarray | None]:
    """``C = A B``'s pattern, and its values when given ``A``'s and ``B``'s (checked)."""
    p = check_size(fn, "p", p)
    n = np.shape(b_indptr)[0] - 1 if np.ndim(b_indptr) == 1 else 0
    b_indptr, b_indices = check_pattern(fn, ("b_indptr", "b_indices"), b_indptr, b_indices,
                                         p, check)
    a_indptr, a_indices = check_pattern(fn, ("a_indptr", "a_indices"), a_indptr, a_indices,
                                         n, check)
    m = a_indptr.shape[0] - 1
    n_products = _cpu.JaxsolveSparseSpgemmProducts(m, a_indptr, a_indices, b_indptr)
    if n_products > INT32_MAX:
        raise ValueError(
            f"{fn}: A B has {n_products} scalar products, more than 2**31 - 1, which the int32 "
            "indices of the product's derivative cannot address; split A into blocks of rows"
        )
    c_indptr = np.empty(m + 1, np.int32)
    c_indices = np.empty(max(n_products, 0), np.int32)
    c_values = None
    if n_products < 0:
        status = -1
    elif values is None:
        status = _cpu.JaxsolveSparseSpgemm(m, p, a_indptr, a_indices, b_indptr, b_indices,
                                           c_indptr, c_indices)
    else:
        a_values, b_values = values
        c_values = np.empty(n_products, a_values.dtype)
        status = _cpu.JaxsolveSparseSpgemmValues(
            m, p, a_indptr, a_indices, b_indptr, b_indices, a_values.ctypes.data,
            b_values.ctypes.data, DTYPES.index(a_values.dtype), c_indptr, c_indices,
            c_values.ctypes.data)
    if status:
        raise MemoryError(f"{fn}: out of memory for the marker arrays of {p=} columns")
    c_indices.resize(c_indptr[-1], refcheck=False)  # shrinks in place: no copy
    if c_values is not None:
        c_values.resize(c_indptr[-1], refcheck=False)
    return SpgemmPattern(c_indptr, c_indices, int(n_products)), c_values


# ----------------------------------------------------------------------------------------
# Classical AMG


SPLITTINGS = {"PMIS": 0, "HMIS": 1, "PMISC": 2}


def _values_dtype(fn: str, name: str, values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` as a contiguous array of one of the native dtypes, of ``shape``."""
    values = np.ascontiguousarray(values)
    if values.dtype not in DTYPES:
        raise TypeError(f"{fn}: {name} must be float32, float64, complex64 or complex128, got"
                        f" {values.dtype}")
    if values.shape != shape:
        raise ValueError(f"{fn}: {name} must have shape {shape}, got {values.shape}")
    return values


def classical_strength(indptr: Any, indices: Any, values: Any, threshold: float,
                       max_row_sum: float, every: bool, *, check: bool = True) -> np.ndarray:
    """``(nnz,)`` bool: the entries ``(i, j)``, ``j ≠ i``, by which ``i`` strongly depends on ``j``.

    ``i`` strongly depends on ``j`` when ``c_ij ≥ threshold · max_{k≠i} c_ik > 0`` for the
    couplings ``c_ij = -Re(a_ij conj(a_ii)) / |a_ii|``, unless ``|Σ_j a_ij| > max_row_sum ·
    |a_ii|`` (then on nothing); with ``every``, on every ``j ≠ i`` with ``a_ij ≠ 0``.
    Computed in the values' precision. See ``csrc/classical.cc``.

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Examples:
      >>> classical_strength([0, 2, 5, 7], [0, 1, 0, 1, 2, 1, 2],
      ...                    np.array([2.0, -1, -1, 2, -0.4, -1, 2]), 0.5, 1.1, False).tolist()
      [False, True, True, False, False, True, False]
    """
    fn = "classical_strength"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    values = _values_dtype(fn, "values", values, indices.shape)
    strong = np.empty(indices.shape[0], np.uint8)
    if _cpu.JaxsolveSparseClassicalStrength(n, indptr, indices, values.ctypes.data,
                                            DTYPES.index(values.dtype), threshold,
                                            max_row_sum, int(every), strong):
        raise MemoryError(f"{fn}: out of memory for a matrix of {n} rows")
    return strong.view(bool)


def classical_splitting(indptr: Any, indices: Any, strong: Any, method: str,
                        aggressive: bool = False, *, check: bool = True) -> np.ndarray:
    """The C/F splitting of a strength graph: ``(n,)`` bool, True for C points.

    The graph: the ``strong`` entries (``(nnz,)`` bool) of the ``n × n`` CSR pattern, row
    ``i`` listing the ``j ≠ i`` that ``i`` strongly depends on. ``"PMIS"``: the maximal
    independent set of the symmetrized graph that De Sterck, Yang and Heys' PMIS reaches
    with the weights ``|Sᵀ_i| + u_i`` (``u_i ∈ [0, 1)`` a fixed hash of ``i``, so the
    splitting is deterministic). ``"PMISC"``: PMIS in color (Alber and Olson's PMIS-c,
    PyAMG's ``PMISc``), the fractions ``(m - 1 - c_i + u_i) / m`` with ``c_i`` the color of
    ``i`` in the first-fit coloring of the graph in index order (``m`` colors), so that
    among points of equal ``|Sᵀ_i|`` the greedy independent set goes first and structured
    grids split in Ruge–Stüben's regular pattern, in parallel rounds. ``"HMIS"``:
    Ruge–Stüben's first pass (HMIS on one process, which has no processor boundaries for
    its PMIS part). Points without strong couplings are F. ``aggressive``: Stüben's A2
    coarsening, the same method again on the graph of the C points in which ``i`` depends
    on ``j`` along a path of the strength graph of length one, or two through an F point
    (hypre's aggressive coarsening with ``num_paths = 1``). See ``csrc/classical.cc``.

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Examples:
      A path 0 - 1 - 2 - 3 - 4 of strong couplings both ways: every other point is C, and
      aggressively every fourth.

      >>> import numpy as np
      >>> indptr, indices = [0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4]
      >>> strong = np.array(indices) != np.repeat(np.arange(5), np.diff(indptr))
      >>> classical_splitting(indptr, indices, strong, "PMIS").astype(int).tolist()
      [1, 0, 1, 0, 1]
      >>> classical_splitting(indptr, indices, strong, "PMIS", aggressive=True).astype(int)
      array([0, 0, 1, 0, 0])
    """
    fn = "classical_splitting"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    strong, _ = _splitting_operands(fn, strong, np.zeros(n, bool), indices.shape, n)
    if method not in SPLITTINGS:
        raise ValueError(f"{fn}: method must be one of {sorted(SPLITTINGS)}, got {method!r}")
    coarse = np.empty(n, np.int32)
    if _cpu.JaxsolveSparseClassicalSplitting(n, indptr, indices, strong, SPLITTINGS[method],
                                             int(aggressive), coarse) < 0:
        raise MemoryError(f"{fn}: out of memory for a graph of {n} nodes")
    return coarse.astype(bool)


class InterpolationPattern(NamedTuple):
    """Classical interpolation's pattern and where ``A``'s values enter its weights.

    ``P`` is ``n × n_coarse``. For an F point ``i`` with interpolatory C points ``C_i``
    (``P``'s columns in row ``i``) and distributed strong F neighbours ``F_i``::

        w_ij = -(a_ij + Σ_{k∈F_i} a_ik ā_kj / s_ik) / d_i,   s_ik = Σ_{l∈C_i (∪{i}: D2)} ā_kl

    where ``ā_kl`` is ``a_kl`` if its sign is opposite to ``a_kk``'s, else 0, and ``d_i``
    sums the other entries of row ``i`` and, for D2, ``Σ_k a_ik ā_ki / s_ik``. A
    destination ``d`` is a position of ``P`` (``d < nnz(P)``), row ``i``'s ``d_i``
    (``d = nnz(P) + i``) or nowhere (``d = nnz(P) + n``).
    """

    p_indptr: np.ndarray
    """``(n + 1,)`` row pointers of ``P``."""
    p_indices: np.ndarray
    """Coarse columns of ``P``, sorted within each row (a C point's row: its own)."""
    a_destination: np.ndarray
    """``(nnz(A),)`` where each entry of ``A`` adds."""
    pair_positions: np.ndarray
    """The entry ``a_ik`` of each distributed coupling (increasing)."""
    pair_triples: np.ndarray
    """``(pairs + 1,)`` the first triple of each distributed coupling, then their count."""
    triple_entries: np.ndarray
    """Per triple, the entry ``a_kl`` of row ``k``."""
    triple_destinations: np.ndarray
    """Per triple, where ``ā_kl a_ik / s_ik`` adds."""


def interpolation_pattern(indptr: Any, indices: Any, strong: Any, coarse: Any,
                          distance_two: bool, *, check: bool = True) -> InterpolationPattern:
    """The :class:`InterpolationPattern` of D1 (``distance_two=False``: Ruge–Stüben's
    modified classical interpolation, whose ``F_i`` are the strong F neighbours with a
    common strong C point) or D2 (extended+i: ``C_i`` also holds the strong C points of
    the strong F neighbours, all of which are distributed).

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Args:
      indptr, indices: the ``n × n`` matrix's pattern (columns sorted within rows).
      strong: ``(nnz,)`` bool, the strong entries.
      coarse: ``(n,)`` bool, the C points.
      distance_two: D2 rather than D1.

    Examples:
      1D Laplacian, C points 0, 2, 4: each F point takes half of each C neighbour.

      >>> import numpy as np
      >>> plan = interpolation_pattern([0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4,
      ...                              3, 4], [0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0],
      ...                              [1, 0, 1, 0, 1], distance_two=True)
      >>> plan.p_indptr.tolist(), plan.p_indices.tolist()
      ([0, 1, 3, 4, 6, 7], [0, 0, 1, 1, 1, 2, 2])
    """
    fn = "interpolation_pattern"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    strong, coarse_index = _splitting_operands(fn, strong, coarse, indices.shape, n)
    handle = _cpu.JaxsolveSparseInterpolationPlan(n, indptr, indices, strong, coarse_index,
                                                  int(distance_two))
    if not handle:
        raise MemoryError(f"{fn}: out of memory for the plan of {n} rows")
    sizes = np.empty(7, np.int64)
    _cpu.JaxsolveSparseInterpolationSizes(handle, sizes)

    arrays = [np.empty(size, np.int32) for size in sizes]
    _cpu.JaxsolveSparseInterpolationCopy(handle, *arrays)
    if sizes[5] > INT32_MAX:  # pair_triples would not reach them
        raise ValueError(f"{fn}: the plan of {n} rows has {sizes[5]} triples, more than"
                         " int32 offsets reach")
    return InterpolationPattern(*arrays)


def _splitting_operands(fn: str, strong: Any, coarse: Any, nnz_shape: tuple[int, ...],
                        n: int) -> tuple[np.ndarray, np.ndarray]:
    """The strong entries as bytes, and each C point's coarse unknown (-1 for F points)."""
    strong = np.ascontiguousarray(strong, np.uint8)
    coarse = np.asarray(coarse, bool)
    if strong.shape != nnz_shape or coarse.shape != (n,):
        raise ValueError(f"{fn}: strong must have shape {nnz_shape} and coarse ({n},), got"
                         f" {strong.shape} and {coarse.shape}")
    return strong, np.where(coarse, np.cumsum(coarse, dtype=np.int32) - 1, -1).astype(np.int32)


def interpolation_values(indptr: Any, indices: Any, values: Any, plan: InterpolationPattern,
                         coarse: Any, *, check: bool = True) -> np.ndarray:
    """``P``'s untruncated values on ``plan`` for ``A``'s concrete ``values`` (``A``'s dtype).

    The weights of :class:`InterpolationPattern`'s formula (C points: 1; an F point whose
    ``d_i`` is 0: zeros), computed in the values' precision with sums accumulated in
    double and in the order of ``jaxsolve.sparse._classical``'s formula, whose NumPy
    evaluation they match bit for bit (real values; complex ones within rounding, NumPy's
    complex products being vectorized differently).

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Examples:
      The 1D Laplacian of :func:`interpolation_pattern`'s example:

      >>> indptr, indices = [0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4]
      >>> values = np.array([2.0, -1, -1, 2, -1, -1, 2, -1, -1, 2, -1, -1, 2])
      >>> strong, coarse = indices != np.repeat(np.arange(5), np.diff(indptr)), [1, 0, 1, 0, 1]
      >>> plan = interpolation_pattern(indptr, indices, strong, coarse, distance_two=True)
      >>> interpolation_values(indptr, indices, values, plan, coarse).tolist()
      [1.0, 0.5, 0.5, 1.0, 0.5, 0.5, 1.0]
    """
    fn = "interpolation_values"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    values = _values_dtype(fn, "values", values, indices.shape)
    coarse = np.ascontiguousarray(coarse, np.uint8)
    for name, entries in (("pair_positions", plan.pair_positions),
                          ("triple_entries", plan.triple_entries)):
        if entries.size and (entries.min() < 0 or entries.max() >= indices.shape[0]):
            raise ValueError(f"{fn}: the plan's {name} must be entries of A")
    if (plan.pair_triples.shape != (plan.pair_positions.shape[0] + 1,)
            or plan.pair_triples[-1] != plan.triple_entries.shape[0]
            or np.any(np.diff(plan.pair_triples) < 0)
            or plan.a_destination.shape != indices.shape or coarse.shape != (n,)
            or plan.p_indptr.shape != (n + 1,)):
        raise ValueError(f"{fn}: the plan does not fit A's pattern")
    weights = np.empty(int(plan.p_indptr[-1]), values.dtype)
    status = _cpu.JaxsolveSparseInterpolationValues(
        n, indptr, indices, values.ctypes.data, DTYPES.index(values.dtype), coarse,
        plan.p_indptr, plan.a_destination,
        plan.pair_positions.shape[0], plan.pair_positions, plan.pair_triples,
        plan.triple_entries, plan.triple_destinations, weights.ctypes.data)
    if status == -1:
        raise MemoryError(f"{fn}: out of memory for a matrix of {n} rows")
    if status:
        raise ValueError(f"{fn}: the plan sends a value outside its row of P")
    return weights


def truncation(indptr: Any, weights: Any, factor: float, most: int) -> np.ndarray:
    """``(nnz,)`` bool: the weights of each row that truncation keeps.

    Those of at least ``factor`` times the row's largest magnitude (for ``0 < factor <
    1``), and of those the ``most`` largest (for ``most > 0``; ties: the earlier).

    Examples:
      >>> truncation([0, 4], np.array([0.1, 0.4, -0.4, 0.3]), 0.5, 2).tolist()
      [False, True, True, False]
    """
    fn = "truncation"
    indptr = np.ascontiguousarray(indptr, np.int32)
    n = indptr.shape[0] - 1
    weights = _values_dtype(fn, "weights", weights, (int(indptr[-1]),))
    kept = np.empty(weights.shape[0], np.uint8)
    if _cpu.JaxsolveSparseTruncation(n, indptr, weights.ctypes.data,
                                     DTYPES.index(weights.dtype), factor, most, kept):
        raise MemoryError(f"{fn}: out of memory for {n} rows")
    return kept.view(bool)


def kept_pattern(indptr: np.ndarray, indices: np.ndarray,
                 kept: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pattern :func:`truncation`'s ``kept`` keeps of the CSR pattern ``(indptr,
    indices)``: ``(kept_indptr, keep, kept_indices)``, its row pointers, and each kept
    entry's position in ``indices`` and its column.

    What ``np.flatnonzero`` and a running count give, over the cores.  Unchecked: for the
    int32 patterns the AMG setup made itself.

    Examples:
      >>> kept_indptr, keep, kept_indices = kept_pattern(
      ...     np.array([0, 3, 3, 5], np.int32), np.array([4, 6, 9, 1, 2], np.int32),
      ...     np.array([True, False, True, False, True]))
      >>> kept_indptr.tolist(), keep.tolist(), kept_indices.tolist()
      ([0, 2, 2, 3], [0, 2, 4], [4, 9, 2])
    """
    kept = np.ascontiguousarray(kept, np.uint8)
    n = indptr.shape[0] - 1
    count = int(np.count_nonzero(kept))
    kept_indptr = np.empty(n + 1, np.int32)
    keep, kept_indices = np.empty(count, np.int32), np.empty(count, np.int32)
    _cpu.JaxsolveSparseKeptPattern(n, indptr, indices, kept, kept_indptr, keep, kept_indices)
    return kept_indptr, keep, kept_indices


def truncated_values(indptr: Any, weights: Any, keep: Any, kept_indptr: Any) -> np.ndarray:
    """The weights (on the row pointers ``indptr``) that ``keep`` selects, each row rescaled
    to its former sum (rows whose kept weights sum to zero are left as they are).

    ``keep``: positions among the weights, each row's within its own and increasing;
    ``kept_indptr``: the row pointers of the kept pattern. Sums run in double in the order
    of the weights, as ``jaxsolve.sparse._classical``'s NumPy formula runs them (equal bit
    for bit for real weights).

    Examples:
      >>> truncated_values([0, 3], np.array([0.5, 0.3, 0.2]), [0, 1], [0, 2]).tolist()
      [0.625, 0.375]
    """
    fn = "truncated_values"
    indptr = np.ascontiguousarray(indptr, np.int32)
    n = indptr.shape[0] - 1
    weights = _values_dtype(fn, "weights", weights, (int(indptr[-1]),))
    keep = np.ascontiguousarray(keep, np.int32)
    kept_indptr = np.ascontiguousarray(kept_indptr, np.int32)
    if kept_indptr.shape != (n + 1,) or kept_indptr[0] != 0 or kept_indptr[-1] != keep.shape[0]:
        raise ValueError(f"{fn}: kept_indptr must have {n + 1} row pointers, from 0 to"
                         f" {keep.shape[0]}")
    values = np.empty(keep.shape[0], weights.dtype)
    status = _cpu.JaxsolveSparseTruncatedValues(n, indptr, weights.ctypes.data,
                                                DTYPES.index(weights.dtype), keep,
                                                kept_indptr, values.ctypes.data)
    if status == -1:
        raise MemoryError(f"{fn}: out of memory for {n} rows")
    if status:
        raise ValueError(f"{fn}: keep must select weights of each row's own")
    return values


class MultipassPattern(NamedTuple):
    """Multipass interpolation's pattern and how its weights follow from ``A``'s values.

    Pass 0 are the C points (``P``'s row: their coarse unknown's unit row); an F point is
    in pass ``m`` when a point of pass ``m - 1`` is among those it strongly depends on, and
    its row of ``P`` is ``Σ_{k∈P_i} c_ik P_k`` over its strong neighbours ``P_i`` of earlier
    passes, with direct interpolation's coefficients ``c_ik`` (``-α_i a_ik / a_ii``, ``α_i``
    scaling ``P_i``'s couplings to all of row ``i``'s; see
    ``jaxsolve.sparse._classical``). The triples ``(e, s, t)`` of pass ``m`` add ``c_ik``
    (entry ``e = (i, k)`` of ``A``) times ``P``'s entry ``s`` (of row ``k``) into ``P``'s
    entry ``t`` (of row ``i``).
    """

    p_indptr: np.ndarray
    """``(n + 1,)`` row pointers of ``P`` (an F point no pass reaches: an empty row)."""
    p_indices: np.ndarray
    """Coarse columns of ``P``, sorted within each row."""
    pass_counts: np.ndarray
    """The number of triples of each pass ``1, 2, …``."""
    triple_entries: np.ndarray
    """Per triple, the entry ``e`` of ``A``."""
    triple_sources: np.ndarray
    """Per triple, the entry ``s`` of ``P``."""
    triple_destinations: np.ndarray
    """Per triple, the entry ``t`` of ``P``."""
    interpolatory: np.ndarray
    """``(nnz(A),)`` bool: the entries ``a_ik`` with ``k ∈ P_i``."""


def multipass_pattern(indptr: Any, indices: Any, strong: Any, coarse: Any, *,
                      check: bool = True) -> MultipassPattern:
    """The :class:`MultipassPattern` of multipass interpolation (Stüben 1999, A.4.3).

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Args:
      indptr, indices: the ``n × n`` matrix's pattern (columns sorted within rows).
      strong: ``(nnz,)`` bool, the strong entries.
      coarse: ``(n,)`` bool, the C points.

    Examples:
      1D Laplacian, C points 0 and 4: points 1 and 3 in pass 1, point 2 in pass 2.

      >>> indptr, indices = [0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4]
      >>> strong = indices != np.repeat(np.arange(5), np.diff(indptr))
      >>> plan = multipass_pattern(indptr, indices, strong, [1, 0, 0, 0, 1])
      >>> plan.p_indptr.tolist(), plan.p_indices.tolist(), plan.pass_counts.tolist()
      ([0, 1, 2, 4, 5, 6], [0, 0, 0, 1, 1, 1], [2, 2])
    """
    fn = "multipass_pattern"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    strong, coarse_index = _splitting_operands(fn, strong, coarse, indices.shape, n)
    handle = _cpu.JaxsolveSparseMultipassPlan(n, indptr, indices, strong, coarse_index)
    if not handle:
        raise MemoryError(f"{fn}: out of memory for the plan of {n} rows")
    sizes = np.empty(4, np.int64)
    _cpu.JaxsolveSparseMultipassSizes(handle, sizes)
    arrays = [np.empty(size, np.int32) for size in (*sizes[:3], *[sizes[3]] * 3)]
    interpolatory = np.empty(indices.shape[0], np.uint8)
    _cpu.JaxsolveSparseMultipassCopy(handle, *arrays, interpolatory)
    return MultipassPattern(*arrays, interpolatory.view(bool))


def multipass_values(indptr: Any, indices: Any, values: Any, plan: MultipassPattern,
                     coarse: Any, *, check: bool = True) -> np.ndarray:
    """``P``'s untruncated multipass weights on ``plan`` for ``A``'s concrete ``values``.

    The weights of ``jaxsolve.sparse._classical``'s multipass formula (C points: 1; F
    points pass by pass from the earlier passes' rows), in ``A``'s dtype, with sums
    accumulated in double in the formula's order: its NumPy evaluation's bit for bit for
    real values (complex ones within rounding). Each pass is split over the cores at rows
    of ``P``.

    With ``check=False`` the pattern is trusted, not checked (see :func:`spgemm_symbolic`).

    Examples:
      The 1D Laplacian of :func:`multipass_pattern`'s example: point 2 takes half of each
      of its neighbours' rows.

      >>> indptr, indices = [0, 2, 5, 8, 11, 13], [0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4]
      >>> values = np.array([2.0, -1, -1, 2, -1, -1, 2, -1, -1, 2, -1, -1, 2])
      >>> strong, coarse = indices != np.repeat(np.arange(5), np.diff(indptr)), [1, 0, 0, 0, 1]
      >>> plan = multipass_pattern(indptr, indices, strong, coarse)
      >>> multipass_values(indptr, indices, values, plan, coarse).tolist()
      [1.0, 1.0, 0.5, 0.5, 1.0, 1.0]
    """
    fn = "multipass_values"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    values = _values_dtype(fn, "values", values, indices.shape)
    coarse = np.ascontiguousarray(coarse, np.uint8)
    entries = plan.triple_entries
    if (coarse.shape != (n,) or plan.p_indptr.shape != (n + 1,)
            or plan.interpolatory.shape != indices.shape
            or np.any(plan.pass_counts < 0) or plan.pass_counts.sum() != entries.shape[0]
            or not (entries.shape == plan.triple_sources.shape
                    == plan.triple_destinations.shape)
            or entries.size and (entries.min() < 0 or entries.max() >= indices.shape[0])):
        raise ValueError(f"{fn}: the plan does not fit A's pattern")
    weights = np.empty(int(plan.p_indptr[-1]), values.dtype)
    status = _cpu.JaxsolveSparseMultipassValues(
        n, indptr, indices, values.ctypes.data, DTYPES.index(values.dtype), coarse,
        np.ascontiguousarray(plan.p_indptr, np.int32),
        np.ascontiguousarray(plan.interpolatory, np.uint8), plan.pass_counts.shape[0],
        plan.pass_counts, entries, plan.triple_sources, plan.triple_destinations,
        weights.ctypes.data)
    if status == -1:
        raise MemoryError(f"{fn}: out of memory for a matrix of {n} rows")
    if status:
        raise ValueError(f"{fn}: the plan's passes read a weight that no earlier pass formed"
                         " or an entry of A outside the row they write, write outside P or"
                         " leave the order of P's rows")
    return weights
