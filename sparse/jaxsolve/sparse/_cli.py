"""The command line: ``python -m jaxsolve.sparse`` (the ``jaxsolve-sparse`` script).

AMG users judge a solver on their own matrices first, as AmgX's ``amgx_capi -m A.mtx -c
config.json`` lets them.  Two sub-commands do the same here::

    jaxsolve-sparse solve A.mtx [--rhs B.mtx] [--config CONFIG.json | '{...}']
                    [--dtype f32|f64] [--device cpu|gpu] [--repeat K]
                    [--json OUT.json] [--plot HISTORY.png]
    jaxsolve-sparse bench A.mtx --config C1 --config C2 ... [same options]

``solve`` reads the Matrix Market file (:mod:`._matrix_market`), takes ``b`` from
``--rhs`` or all ones, sets the AMG hierarchy up (:func:`describe`), solves (:func:`solve`,
reusing that setup) and prints AmgX's report (:mod:`._report`): the per-iteration
residuals when the configuration says ``print_solve_stats: 1``, the grid table for
``print_grid_stats: 1``, the timings for ``obtain_timings: 1``, and always the status,
the iterations and the *true* relative residual ``‖b − A x‖ / ‖b‖``, recomputed on the
host in double precision.  ``bench`` runs each configuration the same way and prints one
table.  The timings separate what a first call compiles from what a solve costs: with
``--repeat K`` the solve runs ``K`` times, and the fastest after the first counts.

Exit status: 0 when every solve succeeded; 1 when one did not (the reason on stderr,
the report and ``--json`` still written); 2 for bad input — a missing or malformed file,
a non-square matrix, a right-hand side of another size, an invalid configuration, a
device that is not there — with one line on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from ._config import SolverConfig, parse_amgx_config
from ._csr import as_csr
from ._matrix_market import MatrixMarketError, read_header, read_matrix_market
from ._report import SolveRun, bench_table, outcome, setup_progress, solve_stats, timings
from ._solve import solve
from ._statistics import describe
from ._status import FailureReason, Status

PROGRAM = "jaxsolve-sparse"
BAD_INPUT = 2  # the exit status for input the command refuses (argparse's too)
FAILED_SOLVE = 1

_DTYPES = {"f32": (np.float32, np.complex64), "f64": (np.float64, np.complex128)}


class BadInput(Exception):
    """Input the command refuses: printed as one line, exit status 2."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """A system read from files, on the host.

    Attributes:
      matrix: ``A`` as read (float64 or complex128), CSR.
      rhs: ``b``, a vector of ``A``'s rows.
      description: the matrix file's name and header, for the report.
      read_seconds: the time the files took to read.
    """

    matrix: scipy.sparse.csr_array
    rhs: np.ndarray
    description: str
    read_seconds: float


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line on ``argv`` (``sys.argv[1:]`` when None).

    Returns:
      The exit status: 0 success, 1 a solve that did not succeed, 2 bad input.

    Examples:
      >>> main(["solve", "missing.mtx"])
      2
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error, already printed (2)
        return int(exit_.code or 0)
    try:
        return args.command(args)
    except BadInput as error:
        print(f"{PROGRAM}: error: {error}", file=sys.stderr)
        return BAD_INPUT


def solve_command(args: argparse.Namespace) -> int:
    """``solve``: one configuration on one matrix, reported as AmgX reports it."""
    problem = read_problem(args.matrix, args.rhs)
    name, config = read_config(args.config[-1] if args.config else None, 1)
    print(f"matrix: {problem.description}")
    run = run_solve(problem, name, config, dtype=args.dtype, device=args.device,
                    repeat=args.repeat)
    if config.print_solve_stats:
        print(solve_stats(run))
    if run.hierarchy is not None and _prints_grid_stats(config):
        print(run.hierarchy)
    if config.obtain_timings:
        print(timings(run))
    print(outcome(run))
    _write_outputs(args, [run], problem)
    return _exit_status([run])


def bench_command(args: argparse.Namespace) -> int:
    """``bench``: several configurations on one matrix, one table."""
    problem = read_problem(args.matrix, args.rhs)
    configs = [read_config(source, index + 1) for index, source in enumerate(args.config or [None])]
    print(f"matrix: {problem.description}")
    runs = [run_solve(problem, name, config, dtype=args.dtype, device=args.device,
                      repeat=args.repeat) for name, config in configs]
    print(bench_table(runs))
    _write_outputs(args, runs, problem)
    return _exit_status(runs)


def read_problem(matrix_path: str, rhs_path: str | None) -> Problem:
    """Reads ``A`` (square) and ``b`` (``A``'s rows, ones by default), or raises BadInput."""
    start = time.perf_counter()
    try:
        header = read_header(matrix_path)
        if header.shape[0] != header.shape[1]:
            raise BadInput(f"{matrix_path}: the matrix is {header.shape[0]} x {header.shape[1]},"
                           " not square")
        if header.shape[0] == 0:
            raise BadInput(f"{matrix_path}: the matrix has no rows")
        matrix, _ = read_matrix_market(matrix_path)
        rhs = np.ones(header.shape[0])
        if rhs_path is not None:
            rhs = _vector(read_matrix_market(rhs_path)[0], rhs_path, header.shape[0])
    except MatrixMarketError as error:
        raise BadInput(str(error)) from None
    seconds = time.perf_counter() - start
    matrix = scipy.sparse.csr_array(matrix)  # an ``array`` file holds a dense matrix
    return Problem(matrix, rhs, f"{matrix_path}: {header}", seconds)


def read_config(source: str | None, index: int) -> tuple[str, SolverConfig]:
    """Reads ``--config``: a JSON file or JSON text (``{…}``); None for the defaults.

    Returns:
      ``(name, config)``: the name the report gives it (the file's stem, else
      ``config <index>``, ``default`` for None) and the parsed configuration.
    """
    if source is None:
        return "default", parse_amgx_config(None)
    if source.lstrip().startswith("{"):
        name, text = f"config {index}", source
    else:
        name = pathlib.Path(source).name.removesuffix(".json")
        try:
            text = pathlib.Path(source).read_text()
        except OSError as error:
            raise BadInput(f"--config {source}: {error.strerror or error}") from None
    try:
        amgx_dict = json.loads(text)
    except json.JSONDecodeError as error:
        raise BadInput(f"--config {_short(source)}: invalid JSON ({error})") from None
    if not isinstance(amgx_dict, dict):
        raise BadInput(f"--config {_short(source)}: a configuration is a JSON object {{...}}")
    try:
        config = parse_amgx_config(amgx_dict)
    except (ValueError, TypeError) as error:
        raise BadInput(f"--config {_short(source)}: {' '.join(str(error).split())}") from None
    return name, config


def run_solve(problem: Problem, label: str, config: SolverConfig, *, dtype: str = "f64",
              device: str = "cpu", repeat: int = 1) -> SolveRun:
    """Sets up and solves ``problem`` with ``config``; measures everything.

    The AMG setup is done once by :func:`describe` (which times its phases; one that runs
    past a second logs progress, :func:`setup_progress`), then
    :func:`solve` runs ``repeat`` times with ``reuse_setup=True``, so that its time is the
    solve's alone.  The configuration's reporting keys are the command's business: the
    solve itself runs with them off and with its residual history stored.
    """
    quiet = _quiet(config)
    kind = np.complex128 if np.iscomplexobj(problem.matrix) else np.float64
    real, complex_ = _DTYPES[dtype]
    dtype_ = complex_ if kind == np.complex128 else real
    seconds: dict[str, float] = {"read": problem.read_seconds}
    with jax.default_device(_device(device)), jax.enable_x64(dtype == "f64"):
        start = time.perf_counter()
        A = as_csr(problem.matrix.astype(dtype_))
        b = jnp.asarray(problem.rhs.astype(dtype_))
        jax.block_until_ready((A.values, b))
        seconds["to device"] = time.perf_counter() - start
        stats = None
        try:
            if _has_amg(quiet):
                start = time.perf_counter()
                with setup_progress(f"{label}: the AMG setup of {problem.matrix.shape[0]} rows"):
                    stats = describe(A, quiet)
                seconds["first setup"] = time.perf_counter() - start
                seconds["setup"] = sum(stats.setup_seconds.values())
            solve_seconds = []
            for _ in range(repeat):
                start = time.perf_counter()
                x, info = jax.block_until_ready(solve(A, b, config=quiet, reuse_setup=True))
                solve_seconds.append(time.perf_counter() - start)
        except ValueError as error:  # what solve refuses: NaN/Inf, a zero diagonal, ...
            raise BadInput(" ".join(str(error).split())) from None
    seconds["first solve"] = solve_seconds[0]
    if repeat > 1:
        seconds["solve"] = min(solve_seconds[1:])
    x = np.asarray(x).astype(kind)
    rhs_norm = float(np.linalg.norm(problem.rhs))
    true_residual = float(np.linalg.norm(problem.rhs - problem.matrix @ x)) / (rhs_norm or 1.0)
    iterations = int(info.iterations)
    history = np.asarray(info.residual_history, dtype=np.float64)[:iterations + 1]
    return SolveRun(label=label, config=config.to_amgx_dict(), status=Status(int(info.status)),
                    failure_reason=FailureReason(int(info.failure_reason)),
                    iterations=iterations, residual=float(info.residual),
                    true_residual=true_residual, rhs_norm=rhs_norm, history=history,
                    hierarchy=stats, seconds=seconds, solve_seconds=tuple(solve_seconds))


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROGRAM, description="Solve Matrix Market systems with jaxsolve's"
                     " AMG, configured and reported as AmgX does.")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    for name, command, help_ in (
            ("solve", solve_command, "solve A x = b with one configuration, AmgX's report"),
            ("bench", bench_command, "several configurations side by side, one table")):
        sub = commands.add_parser(name, help=help_, description=help_)
        sub.set_defaults(command=command)
        sub.add_argument("matrix", metavar="MATRIX.mtx",
                         help="a square Matrix Market matrix (.mtx, .mtx.gz)")
        sub.add_argument("--rhs", metavar="B.mtx", help="b as a Matrix Market vector (ones"
                         " when not given)")
        sub.add_argument("--config", metavar="CONFIG", action="append", help="an AmgX"
                         " configuration, a JSON file or JSON text '{...}'"
                         + ("; repeat for each configuration" if name == "bench"
                            else " (the defaults when not given)"))
        sub.add_argument("--dtype", choices=sorted(_DTYPES), default="f64",
                         help="precision of the solve (complex matrices: c64/c128); f64")
        sub.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                         help="where the solve runs; cpu")
        sub.add_argument("--repeat", type=_positive, default=1, metavar="K",
                         help="solve K times; the fastest after the first (which compiles)"
                         " is the solve time; 1")
        sub.add_argument("--json", metavar="OUT.json", help="write every figure as JSON")
        sub.add_argument("--plot", metavar="HISTORY.png", help="draw the residual history"
                         " (and the hierarchy) into a PNG; needs matplotlib")
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _vector(rhs: Any, path: str, rows: int) -> np.ndarray:
    """``--rhs``'s matrix as a vector of ``rows`` entries, or BadInput."""
    rhs = rhs.toarray() if scipy.sparse.issparse(rhs) else np.asarray(rhs)
    if 1 not in rhs.shape:
        raise BadInput(f"--rhs {path}: b is {rhs.shape[0]} x {rhs.shape[1]}, not one column")
    if rhs.size != rows:
        raise BadInput(f"--rhs {path}: b has {rhs.size} entries, the matrix {rows} rows")
    return rhs.reshape(-1)


def _device(platform: str) -> jax.Device:
    try:
        return jax.devices(platform)[0]
    except RuntimeError:
        raise BadInput(f"--device {platform}: JAX has no {platform.upper()} here (it has"
                       f" {', '.join(sorted({d.platform for d in jax.devices()}))})") from None


def _quiet(config: SolverConfig) -> SolverConfig:
    """``config`` with its residual history stored and nothing logged by the solve (the
    command prints the report itself)."""
    quiet = {"print_solve_stats": False, "print_grid_stats": False, "obtain_timings": False}
    preconditioner = config.preconditioner
    if preconditioner is not None:
        preconditioner = dataclasses.replace(preconditioner, **quiet)
    return dataclasses.replace(config, **quiet, store_res_history=True,
                               preconditioner=preconditioner)


def _has_amg(config: SolverConfig) -> bool:
    return config.amg is not None or (
        config.preconditioner is not None and config.preconditioner.amg is not None)


def _prints_grid_stats(config: SolverConfig) -> bool:
    return config.print_grid_stats or (
        config.preconditioner is not None and config.preconditioner.print_grid_stats)


def _write_outputs(args: argparse.Namespace, runs: list[SolveRun], problem: Problem) -> None:
    if args.json:
        figures = {"matrix": problem.description, "rows": problem.matrix.shape[0],
                   "nonzeros": int(problem.matrix.nnz), "dtype": args.dtype,
                   "device": args.device, "repeat": args.repeat,
                   "runs": [run.to_json() for run in runs]}
        _write(args.json, lambda path: pathlib.Path(path).write_text(
            json.dumps(figures, indent=1) + "\n"))
    if args.plot:
        _write(args.plot, lambda path: _draw(runs).savefig(path))


def _write(path: str, write) -> None:
    try:
        write(path)
    except OSError as error:
        raise BadInput(f"{path}: {error.strerror or error}") from None


def _draw(runs: list[SolveRun]) -> Any:
    """The figure of ``--plot``: the residual histories, and the hierarchy of a single run."""
    from . import plot  # matplotlib, imported only when a plot is asked for

    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise BadInput('--plot needs matplotlib: pip install "jaxsolve-sparse[plot]"') from None
    panels = 2 if len(runs) == 1 and runs[0].hierarchy is not None else 1
    width, height = plot.FIGURE_INCHES
    figure = Figure(figsize=(width * panels, height), dpi=plot.FIGURE_DPI, layout="constrained")
    axes = figure.subplots(1, panels, squeeze=False)[0]
    plot.residual_history([run.history for run in runs], labels=[run.label for run in runs],
                          ax=axes[0])
    if panels == 2:
        plot.hierarchy(runs[0].hierarchy, ax=axes[1])
    return figure


def _exit_status(runs: list[SolveRun]) -> int:
    failed = [run for run in runs if not run.succeeded]
    for run in failed:
        print(f"{PROGRAM}: {run.label}: the solve ended with status {run.status.name}"
              f" after {run.iterations} iterations: {run.failure_reason.message}."
              f" {run.failure_reason.advice}", file=sys.stderr)
    return FAILED_SOLVE if failed else 0


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."

