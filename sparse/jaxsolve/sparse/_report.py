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

:func:`jaxsolve.sparse.solve` reports through the same tables, as log records of the
``jaxsolve.sparse`` logger (:data:`LOGGER`), when its configuration asks, on every path
(one device, a sharded ``A``, MPI ranks: once per solve, from rank 0 under MPI).
:func:`split_reports` takes these keys out of the configuration the compiled programs
depend on (:class:`Reports`), so switching a report on compiles nothing new:

* ``print_solve_stats``: the history is stored (as for ``store_res_history``, which
  shares the program) and :func:`report_solve` logs the table of each right-hand side
  when the solve returns; a solve traced inside a caller's program (``jit``, ``vmap``,
  ``grad``) logs it by a host callback of that program (:func:`logged_solve_stats`);
* ``print_grid_stats``: :func:`log` of the hierarchy's table (a distributed solve's:
  its parts' block hierarchies, level by level, :func:`~._statistics.parts_statistics`);
* ``obtain_timings``: :func:`log_timings`, the setup's and the solve's wall times of a
  call on concrete values (under ``jit`` the setup's host work, at trace time);
* a setup that runs past a second logs a progress line, and its time when it ends
  (:func:`setup_progress`), whatever the configuration.

The records are INFO records of ``jaxsolve.sparse``, whose level is INFO unless the
application set one.  Where logging is configured (a handler on the root logger, as
``logging.basicConfig`` or absl's ``absl.app.run`` install) they go through its handlers;
where nothing is configured they are written to ``sys.stderr``, as AmgX writes its
report without being asked twice.  ``logging.getLogger("jaxsolve.sparse").setLevel(
logging.WARNING)`` silences them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np

from ._config import SolverConfig
from ._setup import is_concrete
from ._statistics import HierarchyStatistics, parts_statistics
from ._status import FailureReason, SolveInfo, Status

_RULE = " " * 9 + "-" * 62

LOGGER = logging.getLogger("jaxsolve.sparse")
"""The logger of the solve's reports (AmgX's reporting keys) and setup progress lines."""
if LOGGER.level == logging.NOTSET:
    LOGGER.setLevel(logging.INFO)

# A setup that takes longer than this logs a progress line.
PROGRESS_SECONDS = 1.0


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
    """AmgX's ``print_solve_stats`` table of a command-line run (:func:`stats_table`).

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
    return stats_table(run.history, run.rhs_norm, run.iterations, run.residual)


def stats_table(history: np.ndarray, rhs_norm: float, iterations: int,
                residual: float) -> str:
    """AmgX's ``print_solve_stats`` table: each iteration's residual norm and rate.

    Args:
      history: ``‖r_k‖ / ‖r₀‖`` for ``k = 0, …, iterations`` (entries past them ignored).
      rhs_norm: ``‖r₀‖``, which turns the history into AmgX's absolute residuals.
      iterations: the iterations done.
      residual: the final relative residual, used when the history is empty.

    Returns:
      The residuals are absolute (``‖r_k‖``, as AmgX prints them); ``rate`` is
      ``‖r_k‖ / ‖r_{k-1}‖``.  The totals follow: iterations, the average rate (the
      geometric mean), the final residual and its reduction ``‖r‖ / ‖r₀‖``.
    """
    history = np.asarray(history, dtype=np.float64)[:iterations + 1]
    absolute = history * rhs_norm
    lines = [f"{'iter':>17} {'residual':>17} {'rate':>14}", _RULE,
             f"{'Ini':>17} {absolute[0] if absolute.size else rhs_norm:17.6e}"]
    for k in range(1, absolute.size):
        rate = absolute[k] / absolute[k - 1] if absolute[k - 1] > 0 else math.nan
        lines.append(f"{k - 1:17d} {absolute[k]:17.6e} {rate:14.4f}")
    reduction = history[-1] if history.size else residual
    average = reduction ** (1 / iterations) if iterations and reduction > 0 else math.nan
    lines += [_RULE,
              f"{'':9}Total Iterations: {iterations}",
              f"{'':9}Avg Convergence Rate: {average:19.4f}",
              f"{'':9}Final Residual: {reduction * rhs_norm:23.6e}",
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


def log(message: str, level: int = logging.INFO) -> None:
    """Logs ``message`` on :data:`LOGGER`; to ``sys.stderr`` where logging is unconfigured.

    Python's logging shows nothing below WARNING until an application configures it;
    a report the configuration asked for (``print_solve_stats: 1``) should not need that.
    So when neither ``jaxsolve.sparse`` nor an ancestor has a handler, the record is
    written to ``sys.stderr`` by a handler of its own (the stream of the moment, which
    pytest's ``capsys`` replaces).
    """
    if not LOGGER.isEnabledFor(level):
        return
    if LOGGER.hasHandlers():
        LOGGER.log(level, message)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.handle(LOGGER.makeRecord(LOGGER.name, level, __file__, 0, message, None, None))


@dataclasses.dataclass(frozen=True)
class Reports:
    """The reports a solve's configuration asks for: AmgX's reporting keys, host work that
    no compiled program depends on (:func:`split_reports`).

    Attributes:
      solver: the outer method's AmgX name, heading each report.
      solve_stats: ``print_solve_stats`` of the outer scope: AmgX's table of the
        residuals, per right-hand side.
      grid_stats: ``print_grid_stats`` of any scope: the hierarchy's table.
      timings: ``obtain_timings`` of the outer scope: the setup's and the solve's times.
      keep_history: ``store_res_history`` of the outer scope: the caller gets
        ``info.residual_history``.
    """

    solver: str
    solve_stats: bool = False
    grid_stats: bool = False
    timings: bool = False
    keep_history: bool = False


def split_reports(config: SolverConfig) -> tuple[SolverConfig, Reports]:
    """``config`` split into what the compiled programs depend on and what is reported.

    The first part is ``config`` with every scope's reporting keys off, except
    ``store_res_history`` in the outer scope, on when ``print_solve_stats`` or
    ``store_res_history`` needs the residual history (so both share one program).  Two
    configurations that differ only in what they report thus compile the same programs.
    A solve traced inside a caller's program switches ``print_solve_stats`` back on in
    its program's configuration, for the program to log its table by a host callback
    (:func:`logged_solve_stats`); concrete solves report after they return
    (:func:`report_solve`).

    Examples:
      >>> from jaxsolve.sparse import parse_amgx_config
      >>> config = parse_amgx_config({"solver": "PCG", "print_solve_stats": 1,
      ...                             "obtain_timings": 1})
      >>> program, reports = split_reports(config)
      >>> program == split_reports(parse_amgx_config({"solver": "PCG",
      ...                                             "store_res_history": 1}))[0]
      True
      >>> reports.solve_stats, reports.timings, reports.keep_history
      (True, True, False)
    """
    scopes = [scope for scope in (config, config.preconditioner) if scope is not None]
    reports = Reports(solver=config.solver, solve_stats=config.print_solve_stats,
                      grid_stats=any(scope.print_grid_stats for scope in scopes),
                      timings=config.obtain_timings, keep_history=config.store_res_history)
    return _without_reports(config, config.store_res_history or config.print_solve_stats), \
        reports


def _without_reports(config: SolverConfig | None, store_history: bool) -> SolverConfig | None:
    if config is None:
        return None
    return dataclasses.replace(
        config, print_solve_stats=False, print_grid_stats=False, obtain_timings=False,
        store_res_history=store_history,
        preconditioner=_without_reports(config.preconditioner, False))


def logged_solve_stats(solver: str, info: SolveInfo) -> None:
    """Logs AmgX's ``print_solve_stats`` table of a traced solve once it has finished.

    Called inside the compiled solve, with ``info`` of a solve run with its history
    stored: a host callback receives the history and the outcome when the device has them
    and logs :func:`stats_table` under the heading ``<solver>: print_solve_stats``, and
    the status, once per right-hand side (under ``jax.vmap`` too).

    Args:
      solver: the method's AmgX name, for the heading.
      info: the solve's info, its ``residual_history`` stored.
    """
    jax.debug.callback(functools.partial(_log_solve_stats, solver), *_stats_fields(info))


def report_solve(reports: Reports, info: SolveInfo, *, logged_in_program: bool,
                 log_here: bool = True) -> SolveInfo:
    """The host's part of ``print_solve_stats`` and ``store_res_history`` after a solve.

    Logs the table of each right-hand side of a concrete ``info`` (unless its program
    logged them: ``logged_in_program``; or ``log_here`` is False, on MPI ranks other
    than 0) and drops the history the caller did not ask for.

    Returns:
      ``info``, its history emptied when only ``print_solve_stats`` stored it.
    """
    if not reports.solve_stats:
        return info
    if log_here and not logged_in_program:
        _log_solve_stats(reports.solver, *(np.asarray(field) for field in _stats_fields(info)))
    if reports.keep_history:
        return info
    history = info.residual_history
    shape = history.shape[:-1] + (0,)
    # Concrete: a new empty array (a slice would compile a program of its own).
    empty = jax.device_put(np.zeros(shape, history.dtype)) if is_concrete(history) else \
        history[..., :0]
    return dataclasses.replace(info, residual_history=empty)


def _stats_fields(info: SolveInfo) -> tuple:
    return (info.residual_history, info.initial_residual, info.iterations, info.residual,
            info.status, info.failure_reason)


def _log_solve_stats(solver: str, history: np.ndarray, rhs_norm: np.ndarray,
                     iterations: np.ndarray, residual: np.ndarray, status: np.ndarray,
                     reason: np.ndarray) -> None:
    """Logs one table per solve: the fields carry the solves' batch axes in front."""
    for index in np.ndindex(np.shape(iterations)):
        status_, reason_ = Status(int(status[index])), FailureReason(int(reason[index]))
        ended = f"status {status_.name}" + ("" if status_ == Status.SUCCESS
                                            else f": {reason_.message}")
        table = stats_table(history[index], float(rhs_norm[index]), int(iterations[index]),
                            float(residual[index]))
        log(f"{solver}: print_solve_stats\n{table}\n{'':9}{ended}")


def log_timings(solver: str, setup_seconds: float, solve_start: float,
                correction: Any, info: SolveInfo) -> None:
    """Logs AmgX's ``obtain_timings`` lines for one call of :func:`jaxsolve.sparse.solve`.

    On concrete values the solve is waited for, so the times are wall times of work
    done: the setup (the AMG hierarchy, a relaxation's data) and the solve, and the
    solve's time per iteration (of the slowest right-hand side).  Inside a caller's
    ``jit`` (or ``grad``) the solve is part of the caller's program, which the caller
    times; the line then gives the setup's host work, done while tracing.

    Args:
      solver: the method's AmgX name, for the heading.
      setup_seconds: the setup's wall time.
      solve_start: ``time.perf_counter()`` when the solve was dispatched.
      correction, info: what the solve returned.
    """
    if not all(is_concrete(leaf) for leaf in jax.tree.leaves((correction, info.iterations))):
        log(f"{solver}: obtain_timings\n    setup: {setup_seconds:.4f} s (host work, while"
            " tracing); the solve runs inside the caller's compiled program: time that call")
        return
    jax.block_until_ready(correction)
    solve_seconds = time.perf_counter() - solve_start
    iterations = int(np.max(np.asarray(info.iterations)))
    lines = [f"{solver}: obtain_timings",
             f"Total Time: {setup_seconds + solve_seconds:.4f}",
             f"    setup: {setup_seconds:.4f} s",
             f"    solve: {solve_seconds:.4f} s"]
    if iterations:
        lines.append(f"    solve(per iteration): {solve_seconds / iterations:.4f} s")
    log("\n".join(lines))


def log_parts_grid_stats(solver: str, parts: Sequence[Sequence[tuple[int, int]]],
                         n_coarse: int, bytes_kept: dict[str, int], matrix_bytes: int) -> None:
    """Logs AmgX's ``print_grid_stats`` of a distributed solve's block-Jacobi AMG: the
    table of :func:`~._statistics.parts_statistics` (``parts``: each part's
    :func:`~._statistics.level_sizes`), under a line that names the parts and the coarse
    space of ``n_coarse`` unknowns per part that couples them."""
    stats = parts_statistics(parts, bytes_kept, matrix_bytes)
    log(f"{solver}: print_grid_stats\n"
        f"block-Jacobi AMG on {len(parts)} parts (each part's diagonal block; rows and"
        f" nonzeros summed over the parts, level by level), coupled by a coarse space of"
        f" {len(parts) * n_coarse} unknowns\n{stats}")


@contextlib.contextmanager
def reports_to_file(path: Any, write: bool = True) -> Iterator[None]:
    """Sends the records of :data:`LOGGER` to the file ``path`` (overwritten) instead of
    their usual destination while the block runs: JAX-AMG's ``save_stats_file``.  With
    ``write=False`` (an MPI rank other than 0, as JAX-AMG writes from rank 0 only) they are
    dropped."""
    handler = logging.FileHandler(path, mode="w") if write else logging.NullHandler()
    propagate = LOGGER.propagate
    LOGGER.addHandler(handler)
    LOGGER.propagate = False
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.propagate = propagate
        handler.close()


@contextlib.contextmanager
def setup_progress(what: str) -> Iterator[None]:
    """Logs a progress line for a setup that runs past :data:`PROGRESS_SECONDS`.

    Once the block has run that long, a watching thread logs ``<what>: running for 1 s...``,
    and the block's end logs ``<what>: done in N s``; a shorter block logs nothing.  The
    thread is one for the process, started by the first block: a block only notes its
    deadline, which costs a solve's Python front a lock, not a thread of its own (starting
    a ``threading.Timer`` per call took 0.3 ms, more than the rest of a small solve's front).

    Args:
      what: the setup's description, e.g. ``"solve: AMG setup of 1000000 rows"``.
    """
    start = time.perf_counter()
    token = object()
    _PROGRESS.watch(token, start + PROGRESS_SECONDS,
                    f"{what}: running for {PROGRESS_SECONDS:g} s...")
    try:
        yield
    finally:
        _PROGRESS.forget(token)
        seconds = time.perf_counter() - start
        if seconds > PROGRESS_SECONDS:
            log(f"{what}: done in {seconds:.1f} s")


class _ProgressWatch:
    """The blocks of :func:`setup_progress` still running, and the thread that logs those
    past their deadline (started with the first block, a daemon).

    The thread sleeps until the earliest deadline; a new block wakes it only when its own
    deadline comes sooner (when it is the only block running, as a solve's is).
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running: dict[object, tuple[float, str]] = {}  # block -> (deadline, message)
        self._thread: threading.Thread | None = None
        self._wakes_at = math.inf  # when the thread next looks at the blocks

    def watch(self, block: object, deadline: float, message: str) -> None:
        with self._changed:
            self._running[block] = (deadline, message)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="jaxsolve.sparse setup progress")
                self._thread.start()
            elif deadline < self._wakes_at:
                self._changed.notify()

    def forget(self, block: object) -> None:
        with self._changed:
            self._running.pop(block, None)

    def _run(self) -> None:
        while True:
            with self._changed:
                now = time.perf_counter()
                due = [block for block, (deadline, _) in self._running.items()
                       if deadline <= now]
                messages = [self._running.pop(block)[1] for block in due]
                if not messages:
                    self._wakes_at = min((deadline for deadline, _ in self._running.values()),
                                         default=math.inf)
                    self._changed.wait(None if self._wakes_at == math.inf
                                       else self._wakes_at - now)
                    self._wakes_at = -math.inf  # awake: a new block needs no notification
            for message in messages:  # outside the lock: a handler may be slow
                log(message)


_PROGRESS = _ProgressWatch()


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
