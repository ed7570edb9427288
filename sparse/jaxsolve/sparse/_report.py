"""The record of one command-line solve and its printed forms, in AmgX's layout.

:class:`SolveRun` holds every figure a run of ``python -m jaxsolve.sparse solve`` measures:
the outcome (status, iterations, the method's residual and the *true* relative residual
``‖b − A x‖ / ‖b‖``, recomputed on the host in double precision), the residual history,
the hierarchy's statistics and the timings.  The functions below print it the way AmgX's
``amgx_capi`` does, section by section, each switched on by AmgX's configuration key:

* ``print_solve_stats``: :func:`solve_stats`, one line per iteration with the residual
  norm and its reduction rate, then the totals;
* ``print_grid_stats``: the hierarchy table (``str`` of :class:`HierarchyStatistics`);
* ``obtain_timings``: :func:`timings`;

and always :func:`outcome`.  :meth:`SolveRun.to_json` gives all of it, for ``--json``;
:func:`bench_table` sets several runs side by side.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._statistics import HierarchyStatistics
from ._status import FailureReason, Status

_RULE = " " * 9 + "-" * 62


@dataclasses.dataclass(frozen=True)
class SolveRun:
    """Everything one solve of the command line measured.

    Attributes:
      label: the configuration's name (its file's, or ``config N``).
      config: the configuration as AmgX reads it (``SolverConfig.to_amgx_dict``).
      status, failure_reason: how the solve ended.
      iterations: iterations done.
      residual: the method's relative residual ``‖r‖ / ‖r₀‖`` (its recurrence's).
      true_residual: ``‖b − A x‖ / ‖b‖`` computed on the host in float64/complex128
        from the matrix as read (``‖b − A x‖`` when ``b = 0``).
      rhs_norm: ``‖b‖``, which is ``‖r₀‖`` (the initial guess is zero): the history's
        relative residuals times it are AmgX's absolute ones.
      history: ``‖r_k‖ / ‖r₀‖`` for ``k = 0, …, iterations``.
      hierarchy: the AMG hierarchy's statistics, None when the configuration has no AMG.
      seconds: wall-clock seconds by phase: ``"read"`` (parsing the file),
        ``"to device"`` (the CSR matrix and ``b`` onto the device), ``"setup"`` (host
        structure and one compiled numeric setup: what a setup costs once compiled),
        ``"first setup"`` (the first setup's wall time, compilation included),
        ``"first solve"`` (compilation included) and, with ``--repeat`` of 2 or more,
        ``"solve"`` (the fastest of the solves after the first: a compiled solve).
      solve_seconds: each solve's wall time, in order (``--repeat``).
    """

    label: str
    config: dict[str, Any]
    status: Status
    failure_reason: FailureReason
    iterations: int
    residual: float
    true_residual: float
    rhs_norm: float
    history: np.ndarray
    hierarchy: HierarchyStatistics | None
    seconds: dict[str, float]
    solve_seconds: tuple[float, ...]

    @property
    def succeeded(self) -> bool:
        """Whether the solve met its convergence test."""
        return self.status == Status.SUCCESS

    def to_json(self) -> dict[str, Any]:
        """Every figure as JSON-ready values (NaN and Inf become None, JSON's null)."""
        hierarchy = None
        if self.hierarchy is not None:
            hierarchy = {"levels": len(self.hierarchy.rows), "rows": list(self.hierarchy.rows),
                         "nonzeros": list(self.hierarchy.nonzeros),
                         "grid_complexity": self.hierarchy.grid_complexity,
                         "operator_complexity": self.hierarchy.operator_complexity,
                         "bytes_kept": dict(self.hierarchy.bytes_kept),
                         "matrix_bytes": self.hierarchy.matrix_bytes,
                         "setup_seconds": dict(self.hierarchy.setup_seconds)}
        return _finite_or_none({
            "label": self.label, "config": self.config,
            "status": self.status.name, "status_code": int(self.status),
            "failure_reason": self.failure_reason.name,
            "message": self.failure_reason.message,
            "iterations": self.iterations, "relative_residual": self.residual,
            "true_relative_residual": self.true_residual, "rhs_norm": self.rhs_norm,
            "residual_history": [float(value) for value in self.history],
            "hierarchy": hierarchy, "seconds": dict(self.seconds),
            "solve_seconds": list(self.solve_seconds),
        })


def solve_stats(run: SolveRun) -> str:
    """AmgX's ``print_solve_stats`` table: each iteration's residual norm and rate.

    The residuals are absolute (``‖r_k‖``, as AmgX prints them); ``rate`` is
    ``‖r_k‖ / ‖r_{k-1}‖``.  The totals follow: iterations, the average rate (the
    geometric mean), the final residual and its reduction ``‖r‖ / ‖r₀‖``.

    Examples:
      >>> import numpy as np
      >>> from jaxsolve.sparse import FailureReason, Status
      >>> run = SolveRun("demo", {}, Status.SUCCESS, FailureReason.NONE, 2, 0.01, 0.01,
      ...                2.0, np.array([1.0, 0.1, 0.01]), None, {}, ())
      >>> print(solve_stats(run))  # doctest: +NORMALIZE_WHITESPACE
                 iter          residual           rate
               --------------------------------------------------------------
                  Ini      2.000000e+00
                    0      2.000000e-01         0.1000
                    1      2.000000e-02         0.1000
               --------------------------------------------------------------
               Total Iterations: 2
               Avg Convergence Rate:              0.1000
               Final Residual:              2.000000e-02
               Total Reduction in Residual: 1.000000e-02
               --------------------------------------------------------------
    """
    absolute = run.history * run.rhs_norm
    lines = [f"{'iter':>17} {'residual':>17} {'rate':>14}", _RULE,
             f"{'Ini':>17} {absolute[0] if absolute.size else run.rhs_norm:17.6e}"]
    for k in range(1, absolute.size):
        rate = absolute[k] / absolute[k - 1] if absolute[k - 1] > 0 else math.nan
        lines.append(f"{k - 1:17d} {absolute[k]:17.6e} {rate:14.4f}")
    reduction = run.history[-1] if run.history.size else run.residual
    average = reduction ** (1 / run.iterations) if run.iterations and reduction > 0 else math.nan
    lines += [_RULE,
              f"{'':9}Total Iterations: {run.iterations}",
              f"{'':9}Avg Convergence Rate: {average:19.4f}",
              f"{'':9}Final Residual: {reduction * run.rhs_norm:23.6e}",
              f"{'':9}Total Reduction in Residual: {reduction:.6e}",
              _RULE]
    return "\n".join(lines)


def timings(run: SolveRun) -> str:
    """AmgX's ``obtain_timings`` lines: setup, solve and solve per iteration, in seconds,
    with the file reading and the first (compiling) calls beside them."""
    s = run.seconds
    solve = s.get("solve", s["first solve"])
    lines = [f"Total Time: {s.get('setup', 0.0) + solve:.4f}"]
    if "setup" in s:
        lines.append(f"    setup: {s['setup']:.4f} s  (first setup, compiling:"
                     f" {s['first setup']:.4f} s)")
    if "solve" in s:
        lines.append(f"    solve: {s['solve']:.4f} s  (first solve, compiling:"
                     f" {s['first solve']:.4f} s)")
        if run.iterations:
            lines.append(f"    solve(per iteration): {s['solve'] / run.iterations:.4f} s")
    else:
        lines.append(f"    solve: {s['first solve']:.4f} s, compilation included"
                     " (--repeat 2 times a compiled solve)")
    lines.append(f"    read: {s['read']:.4f} s, to device: {s['to device']:.4f} s")
    return "\n".join(lines)


def outcome(run: SolveRun) -> str:
    """The lines every run prints: status, iterations, the method's and the true residual."""
    status = f"{run.status.name} ({int(run.status)})"
    if not run.succeeded:
        status += f": {run.failure_reason.message}"
    return (f"status: {status}\n"
            f"iterations: {run.iterations}\n"
            f"relative residual (method): {run.residual:.6e}\n"
            f"true relative residual ‖b - Ax‖/‖b‖: {run.true_residual:.6e}")


def bench_table(runs: Sequence[SolveRun]) -> str:
    """Several runs on one matrix side by side, one row per configuration.

    Columns: the configuration, status, iterations, true relative residual, levels and
    operator complexity (``-`` without AMG), setup seconds, first-solve seconds
    (compilation included) and solve seconds (``-`` without ``--repeat``).
    """
    header = ("config", "status", "iters", "true rel. res.", "levels", "op. cx",
              "setup s", "1st solve s", "solve s")
    rows = []
    for run in runs:
        stats, s = run.hierarchy, run.seconds
        rows.append((run.label, run.status.name, str(run.iterations), f"{run.true_residual:.2e}",
                     "-" if stats is None else str(len(stats.rows)),
                     "-" if stats is None else f"{stats.operator_complexity:.2f}",
                     f"{s['setup']:.3f}" if "setup" in s else "-",
                     f"{s['first solve']:.3f}", f"{s['solve']:.3f}" if "solve" in s else "-"))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                         for i, (cell, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
