"""JAX-AMG's sparsity detection API (``jaxsolve.sparse.sparsity``), on jaxsolve's own.

JAX-AMG's ``jaxamg.sparsity`` names with JAX-AMG's arguments and return shapes, as thin
adapters over :func:`jaxsolve.sparse.trace_sparsity` (the pattern read from the jaxpr),
:func:`jaxsolve.sparse.color_columns` (a distance-2 coloring) and the materialization
:func:`jaxsolve.sparse.solve` uses for matrix-free operators, so that code written
against JAX-AMG runs with only its import changed:

* `trace_sparsity_pattern`: ``(rows, cols)`` read from the jaxpr, or ``None`` where
  tracing cannot decide (a callback, an FFI call, indices computed from ``x``);
* `probe_sparsity_pattern`: ``(rows, cols)`` by unit vectors, for any operator;
* `get_column_coloring`: ``(colors, n_colors)`` of the columns;
* `materialize_sparse_matrix`: the operator's BCSR on a pattern, one evaluation per color,
  jit-able and differentiable;
* `cache_coloring`: all of it at once, as a `ColoringInfo` (JAX-AMG's 5-tuple).

jaxsolve colors by DSATUR rather than JAX-AMG's Jones–Plassmann: fewer colors (5 for a
5-point stencil, where JAX-AMG reported 17), so fewer evaluations; any valid coloring
gives the same matrix.

Examples:
  >>> import jax.numpy as jnp
  >>> from jaxsolve.sparse.sparsity import (get_column_coloring, materialize_sparse_matrix,
  ...                                       trace_sparsity_pattern)
  >>> laplacian = lambda x: 2 * x - jnp.pad(x, 1)[:-2] - jnp.pad(x, 1)[2:]
  >>> rows, cols = trace_sparsity_pattern(laplacian, (5, 5))
  >>> rows.tolist()[:5], cols.tolist()[:5]
  ([0, 0, 1, 1, 1], [0, 1, 0, 1, 2])
  >>> colors, n_colors = get_column_coloring(rows, cols, (5, 5))
  >>> n_colors
  3
  >>> materialize_sparse_matrix(laplacian, (5, 5), rows, cols, colors, n_colors).todense()[1]
  Array([-1.,  2., -1.,  0.,  0.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import scipy.sparse
from jax.experimental import sparse as jsparse

from ._coloring import color_columns
from ._matrix_free import ColoringInfo, cache_coloring, materialize
from ._sparsity_tracing import default_dtype, normalized_shape, probe_pattern, trace_sparsity

__all__ = [
    "cache_coloring",
    "get_column_coloring",
    "materialize_sparse_matrix",
    "probe_sparsity_pattern",
    "trace_sparsity_pattern",
]


def trace_sparsity_pattern(operator: Callable[[jax.Array], jax.Array], shape: Any
                           ) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``(rows, cols)`` of a linear operator's pattern read from its jaxpr, or ``None``.

    :func:`jaxsolve.sparse.trace_sparsity` without its fallback: ``None`` where tracing
    cannot decide (JAX-AMG's answer, for its caller to probe instead).

    Args:
      operator: ``x ↦ A x``, a function of ``x`` of shape ``(n_cols,)``.
      shape: ``(n_rows, n_cols)``, or ``n``.

    Returns:
      int32 arrays ``rows`` and ``cols`` of the entries, by row then column; or ``None``.
    """
    pattern = trace_sparsity(operator, shape, probe=False)
    return None if pattern is None else _rows_cols(pattern)


def probe_sparsity_pattern(A_callable: Callable[[jax.Array], jax.Array], shape: Any,
                           tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """The ``(rows, cols)`` of an operator's entries of magnitude above ``tol``, by probing.

    The operator is applied to the unit vectors, in batches of at most 256 MiB; correct for
    any operator, at the cost of ``n_cols`` evaluations (see `trace_sparsity_pattern`).
    Call it outside ``jax.jit``.

    Args:
      A_callable: ``x ↦ A x``, a function of ``x`` of shape ``(n_cols,)``.
      shape: ``(n_rows, n_cols)``, or ``n``.
      tol: entries of magnitude at most ``tol`` are left out.

    Returns:
      int32 arrays ``rows`` and ``cols``, by row then column.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve.sparse.sparsity import probe_sparsity_pattern
      >>> rows, cols = probe_sparsity_pattern(lambda x: x * jnp.array([1.0, 1e-12, 3.0]), 3)
      >>> rows.tolist(), cols.tolist()
      ([0, 2], [0, 2])
    """
    shape = normalized_shape("probe_sparsity_pattern", shape)
    dtype = default_dtype(None)
    pattern = probe_pattern(A_callable, shape, dtype)
    if tol > 0 and pattern.nnz:
        values = np.asarray(materialize(A_callable, _coloring(pattern, dtype)).values)
        pattern = _kept(pattern, np.abs(values) > tol)
    return _rows_cols(pattern)


def get_column_coloring(rows: Any, cols: Any, shape: Any) -> tuple[np.ndarray, int]:
    """A coloring of the columns in which no two columns of one color share a row.

    Args:
      rows, cols: the entries of the pattern (any order).
      shape: ``(n_rows, n_cols)``.

    Returns:
      ``(colors, n_colors)``: ``colors[j]`` the int32 color of column ``j``, ``0 <= colors[j]
      < n_colors``, every color used.
    """
    shape = normalized_shape("get_column_coloring", shape)
    colors = color_columns(_pattern(rows, cols, shape), distance=2)
    return colors, int(colors.max(initial=-1)) + 1


def materialize_sparse_matrix(
    A_callable: Callable[[jax.Array], jax.Array],
    shape: Any,
    rows: Any,
    cols: Any,
    column_colors: Any,
    n_colors: int,
) -> jsparse.BCSR:
    """The operator's matrix on a known pattern: one evaluation per color, vmapped.

    jit-able and differentiable with respect to the arrays the operator closes over; the
    pattern (``rows``, ``cols``, ``column_colors``) must be concrete.

    Args:
      A_callable: ``x ↦ A x``.
      shape: ``(n_rows, n_cols)``.
      rows, cols: the pattern's entries.
      column_colors: a coloring of the columns (`get_column_coloring`).
      n_colors: the number of colors.

    Returns:
      A ``jax.experimental.sparse.BCSR`` of ``shape`` on the pattern, in JAX's default
      float dtype.
    """
    shape = normalized_shape("materialize_sparse_matrix", shape)
    pattern = _pattern(rows, cols, shape)
    colors = np.asarray(column_colors, np.int32)
    if colors.shape != (shape[1],) or (colors.size and not 0 <= colors.min() <= colors.max()
                                       < n_colors):
        raise ValueError(f"materialize_sparse_matrix: column_colors must be {shape[1]} colors"
                         f" in [0, {n_colors}), got shape {colors.shape}.")
    coloring = _coloring(pattern, default_dtype(None), colors, int(n_colors))
    return materialize(A_callable, coloring).to_bcsr()


def _pattern(rows: Any, cols: Any, shape: tuple[int, int]) -> scipy.sparse.csr_array:
    rows, cols = np.asarray(rows, np.int64).ravel(), np.asarray(cols, np.int64).ravel()
    if rows.shape != cols.shape:
        raise ValueError(f"rows and cols must have one length, got {rows.size} and {cols.size}.")
    pattern = scipy.sparse.csr_array((np.ones(rows.size, bool), (rows, cols)), shape=shape)
    pattern.sum_duplicates()
    pattern.sort_indices()
    return pattern


def _rows_cols(pattern: scipy.sparse.csr_array) -> tuple[np.ndarray, np.ndarray]:
    coo = pattern.tocoo()
    return coo.row.astype(np.int32), coo.col.astype(np.int32)


def _kept(pattern: scipy.sparse.csr_array, keep: np.ndarray) -> scipy.sparse.csr_array:
    coo = pattern.tocoo()
    return _pattern(coo.row[keep], coo.col[keep], pattern.shape)


def _coloring(pattern: scipy.sparse.csr_array, dtype: np.dtype, colors: np.ndarray | None = None,
              n_colors: int | None = None) -> ColoringInfo:
    if colors is None:
        colors = color_columns(pattern, distance=2)
        n_colors = int(colors.max(initial=-1)) + 1
    rows, cols = _rows_cols(pattern)
    return ColoringInfo(rows=rows, cols=cols, colors=np.asarray(colors, np.int32),
                        n_colors=n_colors, shape=pattern.shape, dtype=np.dtype(dtype))
