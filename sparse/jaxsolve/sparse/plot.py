"""Plots of what a solve did: residual histories and AMG hierarchies (matplotlib).

Two pictures answer most questions about an AMG solve:

* :func:`residual_history`: the relative residual ``‖r_k‖ / ‖r_0‖`` against the
  iteration, on a log scale, one line per solve.  A good AMG preconditioner draws a
  straight line (a constant rate) that is steep; a bend means the cycle lost its grip,
  a plateau a stalled Krylov method.
* :func:`hierarchy`: the rows and nonzeros of each level's operator, on a log scale.
  Rows should fall by a healthy factor per level, nonzeros should not grow from one
  level to the next (when they do, the operator complexity grows and the cycle slows).

Both draw into a matplotlib ``Axes`` (a new figure's when none is given) and return it;
save with ``ax.figure.savefig("history.png")``.  matplotlib is an optional dependency:
``pip install "jaxsolve-sparse[plot]"``.  The command line's ``--plot`` uses these.

Examples:
  >>> import os, jax.numpy as jnp
  >>> from jaxsolve import sparse
  >>> A = sparse.matrices.poisson_matrix(32)
  >>> _, info = sparse.solve(A, jnp.ones(32 * 32), config={"store_res_history": 1})
  >>> ax = sparse.plot.residual_history([info, jnp.array([1.0, 0.5, 0.25])],
  ...                                   labels=["AMG", "a given history"])
  >>> ax.get_yscale(), len(ax.lines)
  ('log', 2)
  >>> ax.figure.savefig(os.devnull, format="png")  # or "history.png"
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ._statistics import HierarchyStatistics
from ._status import SolveInfo

__all__ = ["hierarchy", "residual_history"]

# A figure made here when no Axes is given: 6.4 x 4.8 inches at 100 dots per inch, so a
# saved PNG is 640 x 480 pixels (matplotlib's default size, fixed against rc settings).
FIGURE_INCHES = (6.4, 4.8)
FIGURE_DPI = 100


def residual_history(histories: Any, *, labels: Sequence[str] | None = None,
                     ax: Any = None) -> Any:
    """Draws relative residual histories on a log scale, one line per solve.

    Args:
      histories: one solve or several: each a :class:`SolveInfo` of a solve run with
        ``"store_res_history": 1`` (a batched ``info``, from ``b`` of shape ``(n, k)`` or
        ``jax.vmap``, gives one line per solve), or a 1-D array of ``‖r_k‖ / ‖r_0‖``
        (NaN entries, the unused tail of ``info.residual_history``, are dropped).
      labels: one legend entry per line; None for no legend.
      ax: the matplotlib ``Axes`` to draw into; None for a new 640 x 480 figure's.

    Returns:
      The ``Axes``, with the iteration on x and ``‖r_k‖ / ‖r_0‖`` on a log y axis.

    Raises:
      ValueError: if an ``info`` holds no history (the solve ran without
        ``store_res_history``), or ``labels`` does not give one label per line.
      ImportError: if matplotlib is not installed.
    """
    lines = [line for history in _as_list(histories) for line in _history_lines(history)]
    if labels is not None and len(labels) != len(lines):
        raise ValueError(f"residual_history: {len(labels)} labels for {len(lines)} histories.")
    ax = _axes(ax)
    for index, line in enumerate(lines):
        ax.semilogy(np.arange(line.size), line, marker="." if line.size < 50 else None,
                    label=None if labels is None else labels[index])
    ax.set_xlabel("iteration")
    ax.set_ylabel("relative residual ‖r‖ / ‖r₀‖")
    ax.set_title("residual history")
    ax.grid(True, which="major", alpha=0.4)
    if labels is not None:
        ax.legend()
    return ax


def hierarchy(statistics: HierarchyStatistics, *, ax: Any = None) -> Any:
    """Draws the rows and nonzeros of each level of an AMG hierarchy, on a log scale.

    Args:
      statistics: what :func:`jaxsolve.sparse.describe` returns.
      ax: the matplotlib ``Axes`` to draw into; None for a new 640 x 480 figure's.

    Returns:
      The ``Axes``: two bars per level (rows, nonzeros), level 0 the finest; the title
      gives the grid and operator complexities.

    Raises:
      TypeError: if ``statistics`` is not a :class:`HierarchyStatistics`.
      ImportError: if matplotlib is not installed.

    Examples:
      >>> from jaxsolve import sparse
      >>> stats = sparse.describe(sparse.matrices.poisson_matrix(64))
      >>> ax = sparse.plot.hierarchy(stats)
      >>> len(ax.patches) == 2 * len(stats.rows)
      True
    """
    if not isinstance(statistics, HierarchyStatistics):
        raise TypeError("hierarchy: statistics must be the HierarchyStatistics that describe"
                        f" returns, got {type(statistics).__name__}.")
    ax = _axes(ax)
    levels = np.arange(len(statistics.rows))
    width = 0.4
    ax.bar(levels - width / 2, statistics.rows, width, label="rows")
    ax.bar(levels + width / 2, statistics.nonzeros, width, label="nonzeros")
    ax.set_yscale("log")
    ax.set_xticks(levels)
    ax.set_xlabel("level (0: the matrix)")
    ax.set_title(f"AMG hierarchy: grid complexity {statistics.grid_complexity:.2f},"
                 f" operator complexity {statistics.operator_complexity:.2f}", fontsize="medium")
    ax.legend()
    return ax


def _as_list(histories: Any) -> list[Any]:
    """One history or several (a list or tuple of them) as a list."""
    if isinstance(histories, (list, tuple)):
        return list(histories)
    return [histories]


def _history_lines(history: Any) -> list[np.ndarray]:
    """The finite part of each history in ``history`` (a SolveInfo or a 1-D array)."""
    if isinstance(history, SolveInfo):
        stored = np.asarray(history.residual_history)
        if stored.shape[-1] == 0:
            raise ValueError("residual_history: the info holds no history; solve with"
                             " {'store_res_history': 1} in the config.")
        rows = stored.reshape(-1, stored.shape[-1])
    else:
        rows = np.asarray(history, dtype=np.float64)
        if rows.ndim != 1:
            raise ValueError(f"residual_history: a history must be 1-D, got shape {rows.shape}.")
        rows = rows[None]
    return [row[np.isfinite(row)] for row in rows]


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError('jaxsolve.sparse.plot needs matplotlib: pip install'
                          ' "jaxsolve-sparse[plot]".') from None
    # A Figure of its own, not pyplot's: no global state, no GUI backend, nothing to close.
    return Figure(figsize=FIGURE_INCHES, dpi=FIGURE_DPI).add_subplot()
