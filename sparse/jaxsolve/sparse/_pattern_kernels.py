"""Native kernels on CSR patterns, for the AMG setup on the host: ``ctypes`` on NumPy arrays.

* :func:`spgemm_symbolic`: the pattern of a sparse product ``C = A B``, a
  :class:`SpgemmPattern`, on which the numeric product (``A P`` and ``Pᵀ A P`` in an AMG
  setup; :func:`._ffi_primitives.csr_product_values`) runs (``csrc/spgemm_symbolic.cc``);
  :func:`spgemm_host`, the pattern and the values for concrete values in one pass (the
  classical setup's next level).
* :func:`csr_transpose`: a pattern's transpose (``R = Pᵀ``) and where each entry comes
  from (``csrc/csr_transpose.cc``).
* :func:`find_in_rows`: where given columns (the diagonal) sit in a pattern's rows
  (``csrc/row_search.cc``).

Each is a C function of the package's CPU library (:data:`._native_library.LIBRARY`), linear
in its input (plus a sort per row of a product): a few hundred milliseconds for two million
rows, split over the cores this process may use (:func:`._native_library.host_threads`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._native_library import DTYPES, INT32_MAX, LIBRARY, check_pattern, check_size, check_values

_cpu = LIBRARY.cpu


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
    a_values = check_values(fn, "a_values", a_values, np.shape(a_indices))
    b_values = check_values(fn, "b_values", b_values, np.shape(b_indices))
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
