"""Classical AMG's native setup kernels, on the host: ``ctypes`` on NumPy arrays.

The steps of one level of :mod:`._classical`'s setup, in order:

1. :func:`classical_strength`: the strong couplings of ``A``.
2. :func:`classical_splitting`: the C/F splitting of their graph (PMIS, HMIS, PMIS in color;
   aggressive A2 coarsening), one of :data:`SPLITTINGS`.
3. The index plan of the interpolation ``P``: :func:`interpolation_pattern` (an
   :class:`InterpolationPattern`, D1 or D2) or, on an aggressive level,
   :func:`multipass_pattern` (a :class:`MultipassPattern`).
4. ``P``'s weights for concrete values: :func:`interpolation_values` (under ``jit`` the FFI
   kernel :func:`._ffi_primitives.interpolation_weights` computes them) or
   :func:`multipass_values`.
5. Truncation of ``P``: :func:`truncation` chooses, :func:`kept_pattern` and
   :func:`truncated_values` apply.

Each is a C function of the package's CPU library (:data:`._native_library.LIBRARY`,
``csrc/classical.cc``), linear in its input and split over the cores this process may use
(:func:`._native_library.host_threads`). Values may be ``float32``, ``float64``,
``complex64`` or ``complex128``; sums run in double in the order of :mod:`._classical`'s
NumPy formulas, whose results they match bit for bit for real values.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._native_library import DTYPES, INT32_MAX, LIBRARY, check_pattern, check_values

_cpu = LIBRARY.cpu


SPLITTINGS = {"PMIS": 0, "HMIS": 1, "PMISC": 2}


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
    values = check_values(fn, "values", values, indices.shape)
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
    sums the other entries of row ``i`` and, for D2, ``Σ_k a_ik ā_ki / s_ik``.

    Entries and destinations are offsets within their rows, in the narrowest unsigned
    dtype that holds the longest row of ``A`` and of ``P`` (:func:`offset_dtype`; most
    levels: ``uint8``, a quarter of int32 positions' bytes). A *target* is the offset of a
    weight in its row of ``P``, or one of the dtype's two largest values: :func:`to_diagonal`
    (row ``i``'s ``d_i``) and :func:`nowhere`.
    """

    p_indptr: np.ndarray
    """``(n + 1,)`` row pointers of ``P``."""
    p_indices: np.ndarray
    """Coarse columns of ``P``, sorted within each row (a C point's row: its own)."""
    a_targets: np.ndarray
    """``(nnz(A),)`` where each entry of row ``i`` of ``A`` adds (a target of row ``i``)."""
    pair_indptr: np.ndarray
    """``(n + 1,)`` int32: each row's first distributed coupling (pair), then their count."""
    pair_offsets: np.ndarray
    """The offset in row ``i`` of ``A`` of each pair's entry ``a_ik`` (increasing in a row)."""
    pair_counts: np.ndarray
    """The number of triples of each pair."""
    triple_indptr: np.ndarray
    """``(n + 1,)`` int32: each row's first triple (its pairs' in order), then their count."""
    triple_offsets: np.ndarray
    """Per triple, the offset of its entry ``a_kl`` in row ``k`` of ``A``."""
    triple_targets: np.ndarray
    """Per triple, where ``ā_kl a_ik / s_ik`` adds (a target of row ``i``)."""


def offset_dtype(longest_row: int) -> np.dtype:
    """The unsigned dtype of an :class:`InterpolationPattern`'s offsets for rows of at most
    ``longest_row`` entries: the narrowest whose two largest values no offset takes.

    >>> offset_dtype(7), offset_dtype(254), offset_dtype(255), offset_dtype(70_000)
    (dtype('uint8'), dtype('uint8'), dtype('uint16'), dtype('uint32'))
    """
    return next(np.dtype(dtype) for dtype in (np.uint8, np.uint16, np.uint32)
                if longest_row <= np.iinfo(dtype).max - 1)


def nowhere(dtype: Any) -> int:
    """The target of a value that adds nowhere, for offsets of ``dtype``."""
    return int(np.iinfo(dtype).max)


def to_diagonal(dtype: Any) -> int:
    """The target of a value that adds to its row's ``d_i``, for offsets of ``dtype``."""
    return int(np.iinfo(dtype).max) - 1


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
      >>> plan.p_indptr.tolist(), plan.p_indices.tolist(), plan.a_targets.dtype
      ([0, 1, 3, 4, 6, 7], [0, 0, 1, 1, 1, 2, 2], dtype('uint8'))
    """
    fn = "interpolation_pattern"
    n = np.shape(indptr)[0] - 1 if np.ndim(indptr) == 1 else 0
    indptr, indices = check_pattern(fn, ("indptr", "indices"), indptr, indices, n, check)
    strong, coarse_index = _splitting_operands(fn, strong, coarse, indices.shape, n)
    handle = _cpu.JaxsolveSparseInterpolationPlan(n, indptr, indices, strong, coarse_index,
                                                  int(distance_two))
    if not handle:
        raise MemoryError(f"{fn}: out of memory for the plan of {n} rows")
    sizes = np.empty(10, np.int64)
    _cpu.JaxsolveSparseInterpolationSizes(handle, sizes)
    longest = max(int(np.diff(indptr).max(initial=0)), int(sizes[9]))
    offsets = offset_dtype(longest)
    arrays = [np.empty(size, np.int32 if name.endswith(("indptr", "indices")) else offsets)
              for name, size in zip(InterpolationPattern._fields, sizes[:9], strict=True)]
    _cpu.JaxsolveSparseInterpolationCopy(handle, offsets.itemsize,
                                         *[array.ctypes.data if array.dtype == offsets else
                                           array for array in arrays])
    if sizes[7] > INT32_MAX:  # triple_indptr would not reach them
        raise ValueError(f"{fn}: the plan of {n} rows has {sizes[7]} triples, more than"
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
    values = check_values(fn, "values", values, indices.shape)
    coarse = np.ascontiguousarray(coarse, np.uint8)
    offsets = plan.a_targets.dtype
    row_pointers = (plan.p_indptr, plan.pair_indptr, plan.triple_indptr)
    if (offsets not in (np.uint8, np.uint16, np.uint32)
            or any(array.dtype != offsets for array in (
                plan.pair_offsets, plan.pair_counts, plan.triple_offsets, plan.triple_targets))
            or any(pointers.dtype != np.int32 or pointers.shape != (n + 1,)
                   or np.any(np.diff(pointers) < 0) for pointers in row_pointers)
            or not (plan.pair_indptr[-1] == plan.pair_offsets.shape[0]
                    == plan.pair_counts.shape[0])
            or not (plan.triple_indptr[-1] == plan.triple_offsets.shape[0]
                    == plan.triple_targets.shape[0])
            or plan.a_targets.shape != indices.shape or coarse.shape != (n,)):
        raise ValueError(f"{fn}: the plan does not fit A's pattern")
    weights = np.empty(int(plan.p_indptr[-1]), values.dtype)
    status = _cpu.JaxsolveSparseInterpolationValues(
        n, indptr, indices, values.ctypes.data, DTYPES.index(values.dtype), coarse,
        plan.p_indptr, offsets.itemsize, plan.a_targets.ctypes.data, plan.pair_indptr,
        plan.pair_offsets.ctypes.data, plan.pair_counts.ctypes.data, plan.triple_indptr,
        plan.triple_offsets.ctypes.data, plan.triple_targets.ctypes.data, weights.ctypes.data)
    if status == -1:
        raise MemoryError(f"{fn}: out of memory for a matrix of {n} rows")
    if status:
        raise ValueError(f"{fn}: the plan sends a value outside its row of P or reads an"
                         " entry outside its row of A")
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
    weights = check_values(fn, "weights", weights, (int(indptr[-1]),))
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
    weights = check_values(fn, "weights", weights, (int(indptr[-1]),))
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
    values = check_values(fn, "values", values, indices.shape)
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
