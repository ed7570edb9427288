"""Reading Matrix Market files (``.mtx``, ``.mtx.gz``) for the command line.

The Matrix Market exchange format is how sparse test matrices travel (the SuiteSparse
collection, AmgX's ``amgx_capi -m``, PyAMG's examples).  A file starts with a banner,
``%%MatrixMarket matrix <format> <field> <symmetry>``, where

* *format* is ``coordinate`` (one ``i j value`` line per stored entry, 1-based) or
  ``array`` (every entry, column-major: right-hand sides and small dense matrices);
* *field* is ``real``, ``integer``, ``complex`` (two numbers per entry) or ``pattern``
  (no values: every stored entry is 1);
* *symmetry* is ``general``, ``symmetric``, ``skew-symmetric`` or ``hermitian`` (only one
  triangle is stored; the reader mirrors it).

The reader is SciPy's ``scipy.io.mmread``, which since SciPy 1.12 is fast_matrix_market's
multithreaded C++ parser (reading a 1 M-row, 5 M-entry file takes about a third of a
second on two cores), and which reads ``.gz`` and ``.bz2`` files through Python's
decompressors.  Its errors come back as one :class:`MatrixMarketError` that names the
file, so that the command line can print a single line.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import scipy.io
import scipy.sparse


class MatrixMarketError(ValueError):
    """A Matrix Market file that is missing or cannot be read; the message names it."""


@dataclasses.dataclass(frozen=True)
class MatrixMarketHeader:
    """What a Matrix Market file's banner and size line say.

    Attributes:
      shape: ``(rows, columns)``.
      entries: the entries stored in the file (one triangle of a symmetric matrix).
      format: ``"coordinate"`` or ``"array"``.
      field: ``"real"``, ``"integer"``, ``"complex"`` or ``"pattern"``.
      symmetry: ``"general"``, ``"symmetric"``, ``"skew-symmetric"`` or ``"hermitian"``.
    """

    shape: tuple[int, int]
    entries: int
    format: str
    field: str
    symmetry: str

    def __str__(self) -> str:
        return (f"{self.shape[0]} x {self.shape[1]}, {self.entries} entries stored"
                f" ({self.format} {self.field} {self.symmetry})")


def read_header(path: str | os.PathLike) -> MatrixMarketHeader:
    """Reads only the banner and the size line of a Matrix Market file.

    Cheap at any file size: use it to check shapes before reading the entries.

    Raises:
      MatrixMarketError: if the file is missing or its header is malformed.
    """
    _check_exists(path)
    try:
        rows, columns, entries, form, field, symmetry = scipy.io.mminfo(os.fspath(path))
    except (ValueError, OSError, EOFError, UnicodeDecodeError) as error:
        raise MatrixMarketError(f"{os.fspath(path)}: not a Matrix Market file ({error})") from None
    return MatrixMarketHeader((int(rows), int(columns)), int(entries), form, field, symmetry)


def read_matrix_market(path: str | os.PathLike) -> tuple[scipy.sparse.csr_array | np.ndarray,
                                                         MatrixMarketHeader]:
    """Reads a Matrix Market file (optionally gzip'd or bzip2'd) into host memory.

    Args:
      path: the file; a name ending in ``.gz`` or ``.bz2`` is decompressed on the fly.

    Returns:
      ``(matrix, header)``: a ``scipy.sparse.csr_array`` for the ``coordinate`` format (with
      the stored triangle mirrored for symmetric, skew-symmetric and Hermitian files, and
      ones for ``pattern`` files), a dense ``numpy`` array for the ``array`` format; values
      are ``float64`` (``integer`` and ``pattern`` fields too) or ``complex128``.  And the
      file's :class:`MatrixMarketHeader`.

    Raises:
      MatrixMarketError: if the file is missing, is not Matrix Market, or is malformed
        (truncated, an index out of range, a value that is not a number); the message
        names the file and the line.

    Examples:
      >>> import os, tempfile
      >>> path = os.path.join(tempfile.mkdtemp(), "a.mtx")
      >>> with open(path, "w") as f:
      ...     _ = f.write("%%MatrixMarket matrix coordinate real symmetric\\n"
      ...                 "2 2 2\\n1 1 4\\n2 1 -1\\n")
      >>> matrix, header = read_matrix_market(path)
      >>> matrix.toarray().tolist(), header.symmetry
      ([[4.0, -1.0], [-1.0, 0.0]], 'symmetric')
    """
    header = read_header(path)
    try:
        matrix = scipy.io.mmread(os.fspath(path))
    except (ValueError, OSError, EOFError, UnicodeDecodeError) as error:
        raise MatrixMarketError(f"{os.fspath(path)}: {error}") from None
    if scipy.sparse.issparse(matrix):
        matrix = scipy.sparse.csr_array(matrix)
        matrix.sum_duplicates()
    dtype = np.complex128 if np.iscomplexobj(matrix) else np.float64
    return matrix.astype(dtype, copy=False), header


def _check_exists(path: str | os.PathLike) -> None:
    if not os.path.isfile(path):
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise MatrixMarketError(f"{os.fspath(path)}: the file {what}")
