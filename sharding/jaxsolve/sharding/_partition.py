"""Row partitions of sparse linear systems: each rank owns a contiguous block of rows.

Distributed sparse solvers (AmgX's distributed upload, hypre's ParCSR, PETSc's MPIAIJ,
JAX-AMG) split ``A x = b`` by rows: rank ``r`` of ``P`` owns rows ``row_start:row_end`` of
``A``, with all of their columns, and the same entries of ``x`` and ``b``. The blocks are
contiguous and in rank order, so the whole partition is ``P + 1`` boundaries
``0 = s_0 <= s_1 <= ... <= s_P = n`` (AmgX's partition offsets), written here as the ``P``
half-open ranges ``row_ranges[r] = (s_r, s_{r+1})``. The rank that owns global row ``i``, and
so entry ``i`` of the vectors, is found by one binary search over the boundaries.

How the boundaries are chosen (``balance``):

* ``"rows"``: as evenly as possible by rows, the first ``n % P`` ranks one row more (the rule
  of `numpy.array_split`);
* ``"nnz"``: as evenly as possible by stored entries, which is what a sparse matrix–vector
  product costs: boundary ``s_r`` is the row at which the running count of entries
  (``indptr[s_r]``) comes nearest to ``r * nnz / P``, every rank keeping at least one row
  while there are at least as many rows as ranks.

For a matrix with the same number of entries in every row the two agree. With more ranks than
rows some ranks own no rows: their blocks are empty, which every function here accepts.

A rank's block of ``A`` keeps GLOBAL column indices (`partition_csr_matrix`), as the
distributed uploads of AmgX and JAX-AMG take it; `jaxsolve.sharding.HaloPlan` renumbers them
into the local ``[owned | halo]`` numbering that a local product needs. All of this is host
code on NumPy and SciPy arrays, done once per matrix pattern before any solve.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import scipy.sparse

from ._checks import check_positive_int, check_rank

Balance = Literal["rows", "nnz"]
"""What `partition_rows` balances between ranks: ``"rows"`` or ``"nnz"`` (stored entries)."""

RowRanges = tuple[tuple[int, int], ...]
"""All ranks' rows, as ``((row_start, row_end), ...)`` in rank order: contiguous half-open
ranges, the first starting at 0, each ending where the next starts."""


def partition_rows(n_or_indptr: int | Any, nranks: int, *, balance: Balance = "rows") -> RowRanges:
    """All ranks' contiguous blocks of rows, balanced by rows or by stored entries.

    Args:
      n_or_indptr: the number of rows ``n``, or a CSR row pointer ``indptr`` of shape
        ``(n + 1,)`` (needed for ``balance="nnz"``).
      nranks: the number of ranks ``P``, ``>= 1``.
      balance: ``"rows"`` or ``"nnz"``; see the module documentation.

    Returns:
      ``((row_start, row_end), ...)``, one range per rank, in rank order: a `RowRanges`,
      hashable, so usable as static metadata under `jax.jit`.

    Raises:
      TypeError: if `nranks` is not an int, or `n_or_indptr` is neither an int nor a
        one-dimensional integer array.
      ValueError: if `nranks` is below 1, `balance` is unknown, ``balance="nnz"`` comes with a
        row count instead of a row pointer, or the row pointer is not non-decreasing from 0.

    Examples:
      10 rows over 4 ranks, the first two ranks one row more:

      >>> from jaxsolve.sharding import partition_rows
      >>> partition_rows(10, 4)
      ((0, 3), (3, 6), (6, 8), (8, 10))

      A lower-triangular pattern has ``i + 1`` entries in row ``i``: balanced by entries, the
      first rank takes many short rows and the last a few long ones.

      >>> import numpy as np
      >>> indptr = np.cumsum(np.arange(11))  # rows of 1, 2, ..., 10 entries: 55 in all
      >>> row_ranges = partition_rows(indptr, 2, balance="nnz")
      >>> row_ranges
      ((0, 7), (7, 10))
      >>> [int(indptr[end] - indptr[start]) for start, end in row_ranges]
      [28, 27]
    """
    nranks = check_positive_int("partition_rows", "nranks", nranks, "the number of ranks")
    if balance not in ("rows", "nnz"):
        raise ValueError(
            f"partition_rows: balance={balance!r} is not a balance; pass 'rows' (equal row "
            "counts) or 'nnz' (equal counts of stored entries, from a row pointer)."
        )
    if isinstance(n_or_indptr, numbers.Integral) and not isinstance(n_or_indptr, bool):
        n = int(n_or_indptr)
        if n < 0:
            raise ValueError(f"partition_rows: n_or_indptr={n} rows cannot be negative.")
        if balance == "nnz":
            raise ValueError(
                f"partition_rows: balance='nnz' needs the row pointer of the matrix, not its "
                f"row count {n}; pass n_or_indptr=A.indptr."
            )
        bounds = _bounds_by_rows(n, nranks)
    else:
        indptr = _check_indptr("partition_rows", "n_or_indptr", n_or_indptr)
        if balance == "rows":
            bounds = _bounds_by_rows(len(indptr) - 1, nranks)
        else:
            bounds = _bounds_by_nnz(indptr, nranks)
    return tuple((int(start), int(end)) for start, end in zip(bounds[:-1], bounds[1:]))


def partition_csr_matrix(
    A: Any, rank: int, nranks: int, *, balance: Balance = "rows"
) -> tuple[scipy.sparse.csr_array, tuple[int, int]]:
    """Rank `rank`'s block of rows of a sparse matrix, with global column indices.

    The rows are those of ``partition_rows(A.indptr, nranks, balance=balance)[rank]``; every
    rank that calls this with the same `A`, `nranks` and `balance` gets its own block, and the
    blocks stacked in rank order are `A` again.

    Args:
      A: the global ``(n, m)`` matrix: a `scipy.sparse` matrix or array of any format, or any
        object with CSR arrays ``indptr``, ``indices`` and ``data`` (or ``values``) and a
        ``shape``, such as `jax.experimental.sparse.BCSR` (without batch or dense dimensions)
        or `jaxsolve.sparse.CsrMatrix`.
      rank: this rank, ``0 <= rank < nranks``.
      nranks: the number of ranks ``P``.
      balance: ``"rows"`` or ``"nnz"``, as in `partition_rows`.

    Returns:
      ``(A_local, (row_start, row_end))``: ``A_local`` a `scipy.sparse.csr_array` of shape
      ``(row_end - row_start, m)`` holding rows ``row_start:row_end`` of `A`, its column
      indices still global (JAX-AMG's ``partition_info`` is ``(row_start, row_end)``).

    Raises:
      TypeError: if `A` is not a sparse matrix in a form listed above, or `rank` or `nranks`
        is not an int.
      ValueError: if `rank` is not in ``[0, nranks)``, `balance` is unknown, or `A`'s CSR
        arrays are inconsistent.

    Examples:
      The 1D Laplacian on 6 points, rank 1 of 2:

      >>> import scipy.sparse as sp
      >>> from jaxsolve.sharding import partition_csr_matrix
      >>> A = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(6, 6), format="csr")
      >>> A_local, (row_start, row_end) = partition_csr_matrix(A, 1, 2)
      >>> (row_start, row_end), A_local.shape
      ((3, 6), (3, 6))
      >>> A_local.toarray()
      array([[ 0.,  0., -1.,  2., -1.,  0.],
             [ 0.,  0.,  0., -1.,  2., -1.],
             [ 0.,  0.,  0.,  0., -1.,  2.]])
    """
    nranks = check_positive_int("partition_csr_matrix", "nranks", nranks, "the number of ranks")
    rank = check_rank("partition_csr_matrix", rank, nranks)
    indptr, indices, data, shape = csr_arrays("partition_csr_matrix", "A", A)
    row_start, row_end = partition_rows(indptr, nranks, balance=balance)[rank]
    first, last = indptr[row_start], indptr[row_end]
    local = scipy.sparse.csr_array(
        (data[first:last].copy(), indices[first:last].copy(),
         indptr[row_start:row_end + 1] - first),
        shape=(row_end - row_start, shape[1]),
    )
    return local, (row_start, row_end)


def partition_vector(
    x: Any, rank: int, nranks: int, *, row_ranges: RowRanges | None = None
) -> np.ndarray:
    """Rank `rank`'s rows of a vector (or of a stack of vectors), as a NumPy array.

    Args:
      x: the global vector, shape ``(n,)``, or ``(n, k)`` for ``k`` vectors; any array.
      rank: this rank, ``0 <= rank < nranks``.
      nranks: the number of ranks ``P``.
      row_ranges: all ranks' rows, as `partition_rows` gives them; by default the rows are
        balanced by rows, ``partition_rows(n, nranks)``. Pass the partition of the matrix when
        it is balanced by entries, so that the vector's rows match the matrix's.

    Returns:
      A copy of ``x[row_start:row_end]``, C-contiguous (ready for an MPI buffer).

    Raises:
      TypeError: if `rank` or `nranks` is not an int.
      ValueError: if `x` is a scalar, `rank` is not in ``[0, nranks)``, or `row_ranges` is not
        a partition of ``len(x)`` rows into `nranks` ranges.

    Examples:
      >>> import numpy as np
      >>> from jaxsolve.sharding import partition_vector
      >>> partition_vector(np.arange(10.0), 1, 4)
      array([3., 4., 5.])
      >>> partition_vector(np.arange(10.0), 1, 2, row_ranges=((0, 7), (7, 10)))
      array([7., 8., 9.])
    """
    nranks = check_positive_int("partition_vector", "nranks", nranks, "the number of ranks")
    rank = check_rank("partition_vector", rank, nranks)
    x = np.asarray(x)
    if x.ndim == 0:
        raise ValueError("partition_vector: x is a scalar; pass a vector of shape (n,) or a "
                         "stack of vectors of shape (n, k).")
    if row_ranges is None:
        row_ranges = partition_rows(x.shape[0], nranks)
    row_ranges = check_row_ranges("partition_vector", row_ranges, n=x.shape[0], nranks=nranks)
    row_start, row_end = row_ranges[rank]
    return np.array(x[row_start:row_end], order="C")


def gather_vector(pieces: Any, *, comm: Any = None, root: int | None = None) -> np.ndarray | None:
    """The global vector from every rank's rows: the inverse of `partition_vector`.

    Without `comm`, `pieces` is the list of all ranks' pieces, in rank order, and this is their
    concatenation. With an `mpi4py.MPI.Comm`, `pieces` is this rank's own piece, and every rank
    of `comm` must call `gather_vector` (a collective): the pieces travel with one
    ``Allgatherv`` (``root=None``: every rank gets the vector) or ``Gatherv`` (only rank `root`
    gets it, the others get ``None``), after an ``allgather`` of their sizes, so the pieces may
    have any lengths, including zero.

    Args:
      pieces: without `comm`, a sequence of arrays of shapes ``(n_r,)`` (or ``(n_r, k)``), one
        per rank; with `comm`, this rank's array.
      comm: an `mpi4py.MPI.Comm` whose ranks hold the pieces, in rank order; ``None`` when all
        pieces are at hand.
      root: with `comm`, the rank that receives the vector, or ``None`` for all ranks.

    Returns:
      The global array of shape ``(sum(n_r),)`` (or ``(sum(n_r), k)``); ``None`` on the ranks
      other than `root`.

    Raises:
      ValueError: if there are no pieces, a piece is a scalar, the pieces' trailing shapes or
        dtypes differ, `root` comes without `comm`, or `root` is not a rank of `comm`.

    Examples:
      >>> import numpy as np
      >>> from jaxsolve.sharding import gather_vector, partition_vector
      >>> x = np.arange(10.0)
      >>> pieces = [partition_vector(x, rank, 3) for rank in range(3)]
      >>> [piece.tolist() for piece in pieces]
      [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]]
      >>> bool(np.array_equal(gather_vector(pieces), x))
      True

      Under ``mpiexec -n 3``, each rank with its own piece:

      .. code-block:: python

          from mpi4py import MPI
          piece = partition_vector(x, MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size)
          x_again = gather_vector(piece, comm=MPI.COMM_WORLD)           # on every rank
          x_on_0 = gather_vector(piece, comm=MPI.COMM_WORLD, root=0)    # None elsewhere
    """
    if comm is None:
        if root is not None:
            raise ValueError(f"gather_vector: root={root!r} needs comm=, the MPI communicator "
                             "whose rank `root` receives the vector.")
        pieces = [np.asarray(piece) for piece in pieces]
        if not pieces:
            raise ValueError("gather_vector: no pieces; pass one array per rank, in rank order.")
        _check_stackable([(piece.shape, piece.dtype) for piece in pieces])
        return np.concatenate(pieces)
    if root is not None and not (isinstance(root, numbers.Integral) and 0 <= root < comm.size):
        raise ValueError(f"gather_vector: root={root!r} is not a rank of comm, which has "
                         f"ranks 0 to {comm.size - 1}.")
    piece = np.ascontiguousarray(pieces)
    shapes = [(shape, np.dtype(dtype))
              for shape, dtype in comm.allgather((piece.shape, piece.dtype.str))]
    _check_stackable(shapes)
    if root is not None and comm.rank != root:
        comm.Gatherv(piece, None, root=root)
        return None
    counts = [int(np.prod(shape)) for shape, _ in shapes]
    gathered = np.empty((sum(shape[0] for shape, _ in shapes), *piece.shape[1:]),
                        dtype=piece.dtype)
    message = [gathered, (counts, np.cumsum([0, *counts[:-1]]).tolist())]
    if root is None:
        comm.Allgatherv(piece, message)
    else:
        comm.Gatherv(piece, message, root=root)
    return gathered


def _check_stackable(shapes: list[tuple[tuple[int, ...], np.dtype]]) -> None:
    """Raises unless pieces of these shapes and dtypes stack along their first axis."""
    first_shape, first_dtype = shapes[0]
    for shape, dtype in shapes:
        if len(shape) == 0:
            raise ValueError("gather_vector: a piece is a scalar; each piece holds a rank's "
                             "rows, of shape (n_r,) or (n_r, k).")
        if shape[1:] != first_shape[1:] or dtype != first_dtype:
            raise ValueError(
                f"gather_vector: pieces of shapes {first_shape} ({first_dtype}) and {shape} "
                f"({dtype}) do not stack; all pieces need the same dtype and trailing shape."
            )


def _bounds_by_rows(n: int, nranks: int) -> np.ndarray:
    """The ``nranks + 1`` boundaries of `n` rows split evenly, the first ``n % nranks`` one
    row longer."""
    sizes = np.full(nranks, n // nranks)
    sizes[: n % nranks] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def _bounds_by_nnz(indptr: np.ndarray, nranks: int) -> np.ndarray:
    """The ``nranks + 1`` boundaries nearest to equal counts of entries (module docs)."""
    n, nnz = len(indptr) - 1, int(indptr[-1])
    bounds = np.zeros(nranks + 1, dtype=np.int64)
    bounds[-1] = n
    for r in range(1, nranks):
        target = r * nnz / nranks
        row = int(np.searchsorted(indptr, target))  # indptr[row - 1] < target <= indptr[row]
        if row > 0 and target - indptr[row - 1] < indptr[row] - target:
            row -= 1
        # At least one row for each rank before and after, while rows last.
        row = min(max(row, bounds[r - 1] + 1), n - (nranks - r))
        bounds[r] = max(row, bounds[r - 1])
    return bounds


def _check_indptr(function: str, name: str, indptr: Any) -> np.ndarray:
    """`indptr` as an int64 array, or raises if it is not a CSR row pointer."""
    array = np.asarray(indptr)
    if array.ndim != 1 or len(array) == 0 or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(
            f"{function}: {name} must be a row count (int) or a CSR row pointer (a 1D integer "
            f"array of n + 1 entries); got {type(indptr).__name__} of shape {array.shape} and "
            f"dtype {array.dtype}."
        )
    array = array.astype(np.int64)
    if array[0] != 0 or np.any(np.diff(array) < 0):
        raise ValueError(f"{function}: {name} is not a CSR row pointer: it must start at 0 and "
                         "never decrease.")
    return array


def check_row_ranges(
    function: str, row_ranges: Sequence[Sequence[int]], *, n: int | None = None,
    nranks: int | None = None,
) -> RowRanges:
    """`row_ranges` as a `RowRanges`, or raises if it is not a partition of ``[0, n)`` (of any
    `n` when None) into `nranks` (any number when None) contiguous ranges in rank order."""
    try:
        ranges = tuple((int(start), int(end)) for start, end in row_ranges)
    except (TypeError, ValueError):
        ranges = ()
    contiguous = (
        len(ranges) > 0 and ranges[0][0] == 0
        and all(start <= end for start, end in ranges)
        and all(a[1] == b[0] for a, b in zip(ranges[:-1], ranges[1:]))
    )
    if not contiguous:
        raise ValueError(
            f"{function}: row_ranges={row_ranges!r} is not a row partition: it must list "
            "(row_start, row_end) for every rank in rank order, the first starting at 0 and "
            "each starting where the one before ends, as partition_rows gives them."
        )
    if nranks is not None and len(ranges) != nranks:
        raise ValueError(f"{function}: row_ranges has {len(ranges)} ranges but nranks={nranks}; "
                         "pass one range per rank.")
    if n is not None and ranges[-1][1] != n:
        raise ValueError(f"{function}: row_ranges covers {ranges[-1][1]} rows, but there are "
                         f"{n}; pass the partition of these {n} rows.")
    return ranges


def csr_arrays(
    function: str, name: str, A: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """``(indptr, indices, data, shape)`` of a sparse matrix (see `partition_csr_matrix`), as
    NumPy arrays with int64 indices, checked for consistency."""
    if scipy.sparse.issparse(A):
        A = A.tocsr()
    data = getattr(A, "data", None)
    if data is None:
        data = getattr(A, "values", None)
    parts = [getattr(A, "indptr", None), getattr(A, "indices", None), data,
             getattr(A, "shape", None)]
    if any(part is None for part in parts):
        raise TypeError(
            f"{function}: {name} must be a scipy.sparse matrix or have CSR arrays indptr, "
            f"indices and data (or values) and a shape; got {type(A).__name__}."
        )
    indptr = _check_indptr(function, f"{name}.indptr", parts[0])
    indices, data = np.asarray(parts[1]).astype(np.int64), np.asarray(parts[2])
    shape = tuple(int(size) for size in parts[3])
    if (len(shape) != 2 or shape[0] != len(indptr) - 1 or indices.ndim != 1
            or data.shape != indices.shape or len(indices) < indptr[-1]):
        raise ValueError(
            f"{function}: {name} is not a CSR matrix with one value per column index: shape "
            f"{shape}, indptr of {len(indptr)} entries ending at {indptr[-1]}, indices of shape "
            f"{indices.shape}, data of shape {data.shape}. Batched or blocked matrices are "
            "not supported; pass an (n, m) matrix with scalar entries."
        )
    if len(indices) and (indices.min() < 0 or indices.max() >= shape[1]):
        raise ValueError(f"{function}: {name} has column indices outside [0, {shape[1]}), the "
                         "columns of its shape.")
    return indptr, indices, data, shape
