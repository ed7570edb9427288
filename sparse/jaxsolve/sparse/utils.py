"""JAX-AMG's matrix utilities (``jaxsolve.sparse.utils``), on jaxsolve's conversions.

JAX-AMG's ``jaxamg.utils`` names with JAX-AMG's arguments and meaning, as thin adapters
over :func:`jaxsolve.sparse.as_csr` (every matrix form ``solve`` takes) and
:class:`jaxsolve.sparse.CsrMatrix`, so that code written against JAX-AMG runs with only its
import changed:

* `to_scipy`: a BCSR (or any matrix ``solve`` takes) as a SciPy sparse matrix;
* `to_bcsr_matrix`: any matrix, or a matrix-free operator, as a BCSR;
* `get_preferred_dtype`: the precision a solve of ``A`` and ``b`` runs in;
* `deep_merge`, `temp_enable_x64`, `ensure_int64_array`: JAX-AMG's small helpers;
* `format_amgx_stats`: AmgX's statistics text (its grid and solve tables) written to a file
  in sections;
* `Matrix`, `MatrixOrOperator`: the types of ``solve``'s ``A``.

Examples:
  >>> from jaxsolve.sparse import matrices
  >>> from jaxsolve.sparse.utils import to_scipy
  >>> to_scipy(matrices.tridiagonal_matrix(3), format="coo").toarray()
  array([[ 2., -1.,  0.],
         [-1.,  2., -1.],
         [ 0., -1.,  2.]], dtype=float32)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any, Union

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax.experimental import sparse as jsparse
from jax.typing import ArrayLike, DTypeLike

from ._config import deep_merge as deep_merge
from ._csr import as_csr
from ._matrix_free import is_operator, operator_matrix

__all__ = [
    "Matrix",
    "MatrixOrOperator",
    "deep_merge",
    "ensure_int64_array",
    "format_amgx_stats",
    "get_preferred_dtype",
    "temp_enable_x64",
    "to_bcsr_matrix",
    "to_scipy",
]

Matrix = Union[ArrayLike, jsparse.JAXSparse, scipy.sparse.spmatrix, scipy.sparse.sparray]
"""A matrix ``solve`` takes: dense, ``jax.experimental.sparse`` or SciPy sparse."""

MatrixOrOperator = Union[Matrix, Callable]
"""A matrix, or a matrix-free operator ``x ↦ A x``."""

_FORMATS = ("csr", "csc", "coo", "lil", "dok", "bsr")


def to_scipy(A: Any, format: str = "csr") -> scipy.sparse.spmatrix:
    """``A`` as a SciPy sparse matrix (``scipy.sparse.spmatrix``, as JAX-AMG returns).

    Args:
      A: a ``jax.experimental.sparse.BCSR`` (or any matrix :func:`jaxsolve.sparse.as_csr`
        takes).
      format: ``"csr"``, ``"csc"``, ``"coo"``, ``"lil"``, ``"dok"`` or ``"bsr"``.

    Returns:
      The matrix in that format, with the values' dtype; on the host.

    Raises:
      ValueError: for another ``format``.
    """
    if format not in _FORMATS:
        raise ValueError(f"to_scipy: unsupported format {format!r}; supported: "
                         f"{', '.join(_FORMATS)}.")
    matrix = as_csr(A)
    csr = scipy.sparse.csr_matrix(
        (np.asarray(matrix.values), np.asarray(matrix.indices), np.asarray(matrix.indptr)),
        shape=matrix.shape)
    return csr.asformat(format)


def to_bcsr_matrix(A: MatrixOrOperator, b: ArrayLike, use_int64_indices: bool = False
                   ) -> jsparse.BCSR:
    """``A`` as a ``jax.experimental.sparse.BCSR`` in the precision of a solve with ``b``.

    Args:
      A: a matrix (dense, BCOO, BCSR, SciPy sparse, :class:`CsrMatrix`) or an operator
        ``x ↦ A x`` of a square matrix of ``len(b)`` rows, whose matrix is recovered by
        tracing its sparsity (as ``solve`` does).
      b: the right-hand side: its length sizes an operator, and the values take the
        dtype of :func:`get_preferred_dtype`.
      use_int64_indices: int64 column indices (JAX-AMG's MPI form; needs
        ``jax_enable_x64``), else int32.

    Returns:
      The BCSR, columns sorted within rows.
    """
    dtype = get_preferred_dtype(A, b)
    if is_operator(A):
        matrix = operator_matrix("to_bcsr_matrix", A, int(np.shape(b)[0]), dtype)
    else:
        matrix = as_csr(A)
    values = jnp.asarray(matrix.values, dtype)
    if use_int64_indices:
        indices, indptr = ensure_int64_array(matrix.indices), ensure_int64_array(matrix.indptr)
    else:
        indices, indptr = jnp.asarray(matrix.indices, np.int32), jnp.asarray(matrix.indptr,
                                                                             np.int32)
    return jsparse.BCSR((values, indices, indptr), shape=matrix.shape, indices_sorted=True,
                        unique_indices=True)


def get_preferred_dtype(A: MatrixOrOperator, b: ArrayLike) -> DTypeLike:
    """The precision of a solve of ``A x = b``: float64 if ``b`` or ``A``'s values are.

    float32 otherwise (an integer or boolean ``b`` counts as float32, so that it is
    promoted rather than the matrix truncated).
    """
    b_dtype = getattr(b, "dtype", None)
    a_dtypes = (getattr(A, "dtype", None), getattr(getattr(A, "data", None), "dtype", None))
    if any(d is not None and np.dtype(d) == np.float64 for d in (b_dtype, *a_dtypes)):
        return jnp.float64
    return jnp.float32


@contextlib.contextmanager
def temp_enable_x64() -> Iterator[None]:
    """A context in which ``jax_enable_x64`` is on (``jax.enable_x64(True)``)."""
    with jax.enable_x64(True):
        yield


def ensure_int64_array(data: ArrayLike) -> jax.Array:
    """``data`` as an int64 JAX array, made with x64 on for the call."""
    with temp_enable_x64():
        return jnp.asarray(data, jnp.int64)


_RULE = "=" * 60


def format_amgx_stats(stats_str: str, filepath: str | os.PathLike,
                      rank: int | None = None) -> None:
    """Writes AmgX's statistics text to ``filepath`` in sections (JAX-AMG's helper).

    ``stats_str`` is what AmgX prints for ``print_grid_stats`` and ``print_solve_stats``,
    or what jaxsolve logs for them (its ``save_stats_file`` content): the grid tables, which
    begin at a line ``AMG Grid:`` (AmgX) or ``AMG hierarchy`` (jaxsolve), go under ``AMG
    GRID STATISTICS``; the first solve table, from its ``iter ... residual`` header to the
    end of its summary, under ``SOLVER ITERATIONS``, its ``key: value`` summary lines
    aligned.  Other lines (a solver's name, the setup's progress) are left out.  In MPI
    pass ``rank``: only rank 0 writes, as JAX-AMG does.

    Args:
      stats_str: the statistics text.
      filepath: the file to write (overwritten).
      rank: this process's MPI rank, or None (one process: it writes).

    Examples:
      >>> import pathlib, tempfile
      >>> from jaxsolve.sparse.utils import format_amgx_stats
      >>> text = "\\n".join(["iter residual rate", "----", "Ini 1.0e+00", "0 1.0e-07 0.1",
      ...                     "----", "Total Iterations: 1", "----", "status SUCCESS"])
      >>> path = pathlib.Path(tempfile.mkdtemp()) / "stats.txt"
      >>> format_amgx_stats(text, path)
      >>> print(path.read_text())  # doctest: +NORMALIZE_WHITESPACE
      ============================================================
        SOLVER ITERATIONS
      ============================================================
        iter residual rate
        ----
        Ini 1.0e+00
        0 1.0e-07 0.1
        ----
          Total Iterations              : 1
        ----
      <BLANKLINE>
    """
    if rank is not None and rank != 0:
        return
    grids, tables = _stats_blocks(stats_str.splitlines())
    out: list[str] = []
    if grids:
        out += [_RULE, "  AMG GRID STATISTICS", _RULE]
        out += ["  " + line for grid in grids for line in grid] + [""]
    if tables:
        out += [_RULE, "  SOLVER ITERATIONS", _RULE]
        out += [_summary_line(line) for line in tables[0]] + [""]
    with open(filepath, "w") as file:
        file.write("\n".join(out) + "\n")


def _stats_blocks(lines: list[str]) -> tuple[list[list[str]], list[list[str]]]:
    """The grid blocks and the solve tables of AmgX's statistics, their lines stripped."""
    grids: list[list[str]] = []
    tables: list[list[str]] = []
    block: list[str] | None = None
    rules = 0  # the rules a solve table has passed: under its header, body and summary
    for line in (raw.strip() for raw in lines):
        if line.startswith(("AMG Grid", "AMG hierarchy")):  # the title itself left out
            block = []
            grids.append(block)
        elif line.startswith("iter") and "residual" in line:
            block, rules = [line], 0
            tables.append(block)
        elif block is None:
            continue
        elif tables and block is tables[-1]:
            rules += line.startswith("---")
            if not line or line.startswith("status") or rules > 3:
                block = None
            else:
                block.append(line)
        elif not line or line.endswith(("print_solve_stats", "print_grid_stats")):
            block = None
        else:
            block.append(line)
    return grids, tables


def _summary_line(line: str) -> str:
    """A solve table's line, indented; a ``key: value`` summary line aligned."""
    key, colon, value = line.partition(":")
    return f"    {key.strip():<30}: {value.strip()}" if colon else "  " + line
