"""3D Poisson, side by side: jaxsolve's AMG-PCG against JAX's CG, AMJax and PyAMG.

The sparse benchmark of issue 4's acceptance. One run solves ``A x = b`` for the 7-point
Poisson matrix on an ``n × n × n`` grid (``pyamg.gallery.poisson((n, n, n))``; ``n`` from the
command line, by default 128 on a GPU and 48 on a CPU), in f64, with ``b`` standard normal
from a fixed seed and ``x0 = 0``, until ``‖b - A x‖ <= tolerance · ‖b‖`` (the ``tolerance`` of
``--config``, 1e-8 by default), by:

* **jaxsolve AMG-PCG**: ``jaxsolve.sparse.solve`` with ``--config`` (an AmgX configuration,
  JSON; by default smoothed aggregation, ``--config '{"preconditioner": {"algorithm":
  "CLASSICAL"}}'`` for classical AMG with its defaults, whose iterations
  ``tools/bench/sparse_classical.py`` compares with PyAMG's). Its *first setup* is ``clear_cache()`` then ``solve``: the structure (aggregates,
  patterns, index maps) and the numeric setup, plus the solve, which is subtracted (the
  median cold-cache call minus the median solve alone). The very first call also compiles;
  its compile time, the first call minus a later cold-cache call, is reported apart.
  *Solve alone* is ``solve(..., reuse_setup=True)``; *re-setup + solve* ``solve`` with the
  matrix's values as a new array on the cached pattern, which sets the hierarchy's numbers
  up again (compiled, on the device) before solving. Both are called from Python, so that the
  cached hierarchy's arrays are arguments of the compiled programs (inside a caller's
  ``jax.jit`` JAX would bake them in as constants);
* **jaxsolve, f32 AMG**: the same with the preconditioner's hierarchy in f32
  (``jaxsolve_hierarchy_precision: SINGLE``) inside the f64 PCG loop: mixed precision, which
  halves the bytes of the hierarchy's values that every cycle reads;
* **JAX cg, BCOO**: ``jax.scipy.sparse.linalg.cg`` on the matrix as a ``BCOO``;
* **JAX cg, stencil**: the same CG on a matrix-free 7-point stencil (zero-padded slices);
* **AMJax PCG** (PyPI ``amjax==0.0.3``): PyAMG's smoothed-aggregation hierarchy (its
  defaults), converted to JAX, one V-cycle with Jacobi smoothing as the preconditioner of
  JAX's CG. Its setup is PyAMG's setup (the same hierarchy as the PyAMG row, built once)
  plus the conversion;
* **AmgX backend** (``jaxsolve.sparse.use_backend("amgx")``, NVIDIA AmgX through our XLA FFI
  handler; issue 35): ``solve`` with AmgX's own aggregation PCG (``AMGX_CONFIG``: SIZE_2
  aggregates, Jacobi 0.8, the configuration that runs on the H200's CUDA 13), timed as the
  jaxsolve row is (first setup, solve alone with ``reuse_setup``, re-setup + solve), and
  beside it **jaxsolve, AmgX config**: our engine on the same matrix and the same
  configuration. Skipped, with the reason printed, when ``AMGX_LIB`` is not set (``tools/dev
  amgx-build`` on the GPU host builds AmgX and prints the path) or AmgX fails;
* **PyAMG PCG** on the host CPU: ``pyamg.smoothed_aggregation_solver`` (its defaults:
  symmetric Gauss-Seidel smoothing) as the preconditioner of PyAMG's CG.

SpMV bandwidth (ours against CuPy's CSR) is ``tools/bench/sparse_spmv.py``'s.

**Columns.** ``its``: iterations. JAX's ``cg`` reports none, so its rows count those of
``jaxsolve.sparse.cg`` on the same operator and preconditioner, which stops by the same test
(``‖r_k‖ <= tolerance · ‖b‖`` for ``x0 = 0``). ``setup`` and ``solve``: medians of
``--repeats`` calls after ``--warmup`` more, each timed with ``time.perf_counter`` around
``jax.block_until_ready``; jitted functions are compiled in the warm-up. ``per it``: solve
over iterations. ``rel. res``: the true ``‖b - A x‖ / ‖b‖`` of the solution, recomputed in
f64. ``mem +``: how much more device memory is in use at the end of the row than at its
start, while its state (matrix copy, hierarchy, caches, last solutions) is still held;
``peak``: the device's peak bytes in use so far (it cannot be reset between rows, so each
row shows the running peak; jaxsolve runs first). Both come from
``jax.devices()[0].memory_stats()`` and are ``–`` where the backend reports none (the CPU).

**Bandwidth.** For each row of our engine, ``jaxsolve.sparse.memory_traffic_per_iteration``
counts the bytes one PCG iteration must move at least (each matrix and vector read once per
operation: the smoother sweeps, residual, restriction, prolongation and correction of every
level, the coarse solve, PCG's product and vector updates), and the solve alone turns it into
an *effective bandwidth*, ``bytes/iteration × iterations / solve time``, printed with its
fraction of ``--peak-bandwidth`` (default 4.8e12 B/s: the H200's HBM3e on NVIDIA's datasheet;
a device-to-device copy measured about 4.3 TB/s there on 2 Dec 2026, so about 90 % is the
practical ceiling) and the solve time that peak would allow. The re-setup rows' time
includes a numeric setup and gets none.

After the table come the ratios issue 4 sets as targets (our solve ≤ 1/3 of AMJax's and
≤ 1/10 of BCOO CG's, re-setup + solve ≤ 2 × solve, first setup ≤ 1/8 of PyAMG's), then the
memory jaxsolve keeps against the matrix's own bytes (target ≤ 4 ×): its row's ``mem +`` once
the row has dropped the solutions it returned to the caller (hierarchy, caches and the
allocator's overhead remain), with the per-part statistics of ``jaxsolve.sparse.describe``
where that exists.

**Optional rows.** The AMJax and PyAMG rows are skipped, with the reason printed, when their
package is not installed; ``--skip NAME`` leaves out any row (``jaxsolve``, ``jaxsolve-f32``, ``bcoo``,
``stencil``, ``amjax``, ``amgx``, ``pyamg``). On a CPU a small ``n`` (``16``) runs in seconds.

**Running it.** On a build machine, with Bazel (the venv has PyAMG and AMJax pinned):

    tools/dev bench sparse_poisson3d 48
    tools/dev bench sparse_poisson3d 32 --skip jaxsolve --repeats 3

On the GPU host, which has no Bazel: ``tools/dev gpu-pack`` on the build machine puts our
wheels and those of PyAMG and AMJax into ``.gpu/wheels``; carry the checkout with ``.gpu/``
to the host, then there, from the checkout's root:

    site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --target "$site" .gpu/wheels/*.whl
    PYTHONPATH="$site" python3 tools/bench/sparse_poisson3d.py 128
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax.experimental import sparse as jsparse

import jaxsolve.sparse as jsp
from jaxsolve.sparse import matrices


def _optional(module: str) -> Any:
    """The module, or None when it is not installed (its row is then skipped)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


pyamg = _optional("pyamg")
amjax = _optional("amjax")  # needs pyamg too

DEFAULT_CONFIG = {
    "solver": "PCG",
    "tolerance": 1e-8,
    "max_iters": 200,
    "preconditioner": {
        "solver": "AMG",
        "algorithm": "AGGREGATION",
        "selector": "SIZE_8",
        "jaxsolve_smoothed_aggregation": 1,
        "smoother": "BLOCK_JACOBI",
        "presweeps": 1,
        "postsweeps": 1,
        "max_levels": 10,
        "min_coarse_rows": 2000,
    },
}

# AmgX's aggregation PCG as it ran on the H200 (third_party/amgx's README: classical AMG's
# setup fails in AmgX on CUDA 13.0), for the AmgX backend and our engine alike.
AMGX_CONFIG = {
    "solver": "PCG",
    "tolerance": 1e-8,
    "max_iters": 200,
    "preconditioner": {
        "solver": "AMG",
        "algorithm": "AGGREGATION",
        "selector": "SIZE_2",
        "smoother": "BLOCK_JACOBI",
        "relaxation_factor": 0.8,
        "presweeps": 1,
        "postsweeps": 1,
        "max_levels": 50,
    },
}

# The rows' labels, which the ratios look rows up by.
OURS = "jaxsolve AMG-PCG"
OURS_RESETUP = "jaxsolve re-setup + solve"
SINGLE = "jaxsolve, f32 AMG"
SINGLE_RESETUP = "jaxsolve, f32 AMG re-setup"
BCOO_CG = "JAX cg, BCOO"
STENCIL_CG = "JAX cg, stencil"
AMJAX_PCG = "AMJax PCG"
PYAMG_PCG = "PyAMG PCG (host CPU)"
AMGX_PCG = "AmgX backend"
AMGX_RESETUP = "AmgX re-setup + solve"
OURS_AMGX_CONFIG = "jaxsolve, AmgX config"
OURS_AMGX_CONFIG_RESETUP = "jaxsolve, AmgX cfg re-set"

# (what, numerator row and its time, denominator row and its time, target): issue 4's targets.
RATIOS = (
    ("solve: jaxsolve / AMJax", OURS, "solve", AMJAX_PCG, "solve", 1 / 3),
    ("solve: jaxsolve f32 AMG / AMJax", SINGLE, "solve", AMJAX_PCG, "solve", 1 / 3),
    ("solve: jaxsolve / JAX cg BCOO", OURS, "solve", BCOO_CG, "solve", 1 / 10),
    ("re-setup + solve / solve alone", OURS_RESETUP, "solve", OURS, "solve", 2),
    ("first setup: jaxsolve / PyAMG", OURS, "setup", PYAMG_PCG, "setup", 1 / 8),
)
MEMORY_TARGET = 4  # what jaxsolve keeps, at most, in multiples of the matrix's bytes


@dataclasses.dataclass
class Row:
    """One line of the table: seconds, bytes, None where not measured."""

    label: str
    iterations: int | None = None
    setup: float | None = None
    solve: float | None = None
    residual: float | None = None
    memory: int | None = None
    kept: int | None = None  # jaxsolve's rows: ``memory`` less the caller's solutions
    peak: int | None = None
    note: str = ""
    traffic: jsp.MemoryTraffic | None = None  # our engine's solve-alone rows: bytes/iteration

    @property
    def per_iteration(self) -> float | None:
        if self.solve is None or not self.iterations:
            return None
        return self.solve / self.iterations


@dataclasses.dataclass(frozen=True)
class Timing:
    """How every time is taken: the median of ``repeats`` calls after ``warmup`` more."""

    repeats: int
    warmup: int

    @staticmethod
    def once(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
        """The wall time of ``fn(*args)``, waited for, and its result."""
        start = time.perf_counter()
        result = jax.block_until_ready(fn(*args))
        return time.perf_counter() - start, result

    def median(self, fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
        """The median wall time of ``fn(*args)`` and its last result."""
        times, result = [], None
        for _ in range(self.warmup + self.repeats):
            result = None  # freed before the next call, so that only one result lives
            seconds, result = self.once(fn, *args)
            times.append(seconds)
        return statistics.median(times[self.warmup:]), result


@dataclasses.dataclass(eq=False)  # hashed by identity, for pyamg_setup's cache
class Problem:
    """The system every row solves: 3D Poisson on ``n³`` unknowns, random ``b``, ``x0 = 0``."""

    n: int
    A: jsp.CsrMatrix  # on the device
    host: scipy.sparse.csr_matrix  # the same matrix on the host, for PyAMG
    b: jax.Array
    tolerance: float
    max_iters: int  # for the baselines; jaxsolve takes its own from the config

    @classmethod
    def poisson3d(cls, n: int, seed: int, tolerance: float) -> Problem:
        """The problem on an ``n × n × n`` grid, ``b`` drawn from ``seed``."""
        A = jsp.as_csr(matrices.poisson3d_matrix(n, dtype=jnp.float64))
        host = scipy.sparse.csr_matrix((np.asarray(A.values), A.indices, A.indptr), A.shape)
        b = matrices.rhs_random(n**3, seed, dtype=jnp.float64)
        # Unpreconditioned CG needs about 3.5 n iterations to 1e-8 here (452 for n = 128).
        return cls(n, A, host, b, tolerance, max_iters=10 * n)

    @property
    def matrix_bytes(self) -> int:
        """The CSR matrix's own bytes: values, column indices, row pointers."""
        return self.A.values.nbytes + self.A.indices.nbytes + self.A.indptr.nbytes

    def relative_residual(self, x: Any) -> float:
        """``‖b - A x‖ / ‖b‖``, computed on the device in f64."""
        return float(_relative_residual(self.A, self.b, jnp.asarray(x)))


@jax.jit
def _relative_residual(A: jsp.CsrMatrix, b: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.linalg.norm(b - A @ x) / jnp.linalg.norm(b)


def stencil_matvec(x: jax.Array, n: int) -> jax.Array:
    """``A x`` for the 7-point Poisson matrix on an ``n³`` grid, without a matrix.

    The grid is padded with one layer of zeros (the Dirichlet boundary), and each neighbour
    is a shifted slice of the padded grid, which XLA fuses into one pass.
    """
    u = jnp.pad(x.reshape(n, n, n), 1)
    inner = slice(1, -1)
    neighbours = sum(
        u[tuple(shift if axis == a else inner for a in range(3))]
        for axis in range(3)
        for shift in (slice(None, -2), slice(2, None))
    )
    return (6 * u[inner, inner, inner] - neighbours).reshape(-1)


def _memory_stat(key: str) -> int | None:
    stats = jax.devices()[0].memory_stats()
    return None if stats is None else stats.get(key)


@contextlib.contextmanager
def device_memory(row: Row):
    """Records in ``row`` the device memory the block adds, and the running peak.

    Yields a function that tells how much the block has added by the time it is called
    (also after the block: what its state still holds once some of it is dropped).
    """
    before = _memory_stat("bytes_in_use")

    def added() -> int | None:
        now = _memory_stat("bytes_in_use")
        return None if before is None or now is None else now - before

    yield added
    row.memory = added()
    row.peak = _memory_stat("peak_bytes_in_use")


def time_jax_cg(
    problem: Problem,
    timing: Timing,
    linear: Callable[[Any], tuple[Callable[[jax.Array], jax.Array], Any]],
    operands: Any,
) -> tuple[float, jax.Array, int]:
    """Times ``jax.scipy.sparse.linalg.cg`` and counts its iterations.

    Args:
      problem: the system.
      timing: how to time.
      linear: ``operands ↦ (matvec, preconditioner or None)``.
      operands: the arrays ``linear`` builds them from (a matrix, a hierarchy), passed to the
        jitted solve as arguments rather than baked into it as constants.

    Returns:
      ``(seconds, x, iterations)``: the median solve time, the solution, and the iterations
      of ``jaxsolve.sparse.cg`` on the same operator and preconditioner.
    """

    def solve(operands, b):
        matvec, precondition = linear(operands)
        x, _ = jax.scipy.sparse.linalg.cg(
            matvec, b, M=precondition, tol=problem.tolerance, maxiter=problem.max_iters
        )
        return x

    seconds, x = timing.median(jax.jit(solve), operands, problem.b)
    matvec, precondition = linear(operands)
    _, info = jsp.cg(
        matvec, problem.b, precondition=precondition, tolerance=problem.tolerance,
        max_iters=problem.max_iters,
    )
    return seconds, x, int(info.iterations)


# -----------------------------------------------------------------------------
# The rows


def jaxsolve_pcg(problem: Problem, timing: Timing, config: dict[str, Any],
                 labels: tuple[str, str] = (OURS, OURS_RESETUP)) -> list[Row]:
    """jaxsolve's AMG-PCG: first setup, solve alone, and re-setup + solve."""
    A, b = problem.A, problem.b

    def cold_solve():
        jsp.clear_cache()
        return jsp.solve(A, b, config=config)

    # Both run from Python (the hierarchy's arrays are then arguments of the compiled solve).
    # Inside a caller's jax.jit the cached arrays would be closed over, and JAX 0.10-0.11
    # bakes closed-over arrays into the program as constants: gigabytes at 128³.
    def solve_alone(A, b):
        return jsp.solve(A, b, config=config, reuse_setup=True)[0]

    def resetup_solve(values, b):
        return jsp.solve(A.with_values(values), b, config=config)[0]

    ours, again = Row(labels[0]), Row(labels[1])
    jsp.clear_cache()  # an earlier row's hierarchy, freed now, would count against this one
    with device_memory(ours) as added:
        first = timing.once(cold_solve)[0]
        cold, (x_cold, info) = timing.median(cold_solve)
        ours.solve, x = timing.median(solve_alone, A, b)
        again.solve, x_again = timing.median(resetup_solve, A.values, b)
    ours.setup = cold - ours.solve
    ours.iterations = again.iterations = int(info.iterations)
    ours.residual = problem.relative_residual(x)
    again.residual = problem.relative_residual(x_again)
    status = jsp.Status(int(info.status)).name
    # What the solver keeps: the same, once the caller's solutions are gone.
    del x_cold, x, x_again, info
    ours.kept = added()
    ours.note = (f"{status}; first call {_duration(first)}, "
                 f"of which compile ≈ {_duration(first - cold)}")
    if jsp.current_backend() == "jaxsolve":  # from the kept hierarchy
        ours.traffic = jsp.memory_traffic_per_iteration(A, config)
    return [ours, again]


def bcoo_cg(problem: Problem, timing: Timing) -> list[Row]:
    """JAX's CG on the matrix as a BCOO."""
    row = Row(BCOO_CG)
    with device_memory(row):
        A = jsparse.BCOO.from_scipy_sparse(problem.host)
        row.solve, x, row.iterations = time_jax_cg(
            problem, timing, lambda A: (A.__matmul__, None), A
        )
    row.residual = problem.relative_residual(x)
    return [row]


def stencil_cg(problem: Problem, timing: Timing) -> list[Row]:
    """JAX's CG on the matrix-free 7-point stencil."""
    row = Row(STENCIL_CG)
    matvec = functools.partial(stencil_matvec, n=problem.n)
    with device_memory(row):
        row.solve, x, row.iterations = time_jax_cg(problem, timing, lambda _: (matvec, None), ())
    row.residual = problem.relative_residual(x)
    return [row]


@functools.cache
def pyamg_setup(problem: Problem, timing: Timing) -> tuple[float, Any]:
    """PyAMG's smoothed-aggregation hierarchy (its defaults) and its median setup time.

    Built once for both the PyAMG and the AMJax rows.
    """
    return timing.median(pyamg.smoothed_aggregation_solver, problem.host)


def amjax_pcg(problem: Problem, timing: Timing) -> list[Row]:
    """AMJax: PyAMG's hierarchy in JAX, one V-cycle as the preconditioner of JAX's CG."""
    row = Row(AMJAX_PCG)
    if amjax is None:
        row.note = "skipped: amjax is not installed (pip install amjax==0.0.3)"
        return [row]
    pyamg_seconds, hierarchy = pyamg_setup(problem, timing)
    with device_memory(row):
        convert, solver = timing.median(amjax.MultilevelSolver.from_pyamg, hierarchy)
        row.solve, x, row.iterations = time_jax_cg(
            problem, timing,
            lambda solver: (solver.levels[0].A.__matmul__, solver.aspreconditioner(cycle="V")),
            solver,
        )
    row.setup = pyamg_seconds + convert
    row.residual = problem.relative_residual(x)
    row.note = f"setup: PyAMG's {_duration(pyamg_seconds)} + conversion {_duration(convert)}"
    return [row]


def amgx_pcg(problem: Problem, timing: Timing) -> list[Row]:
    """The AmgX backend with AmgX's aggregation PCG, and our engine on the same config."""
    config = {**AMGX_CONFIG, "tolerance": problem.tolerance}
    rows = [Row(AMGX_PCG), Row(AMGX_RESETUP)]
    if not (os.environ.get("AMGX_LIB") or os.environ.get("AMGX_DIR")):
        rows[0].note = ("skipped: AMGX_LIB is not set (tools/dev amgx-build on a GPU host builds"
                        " AmgX and prints the libamgxsh.so to set it to)")
        return rows[:1]
    try:
        with jsp.use_backend("amgx"):
            rows = jaxsolve_pcg(problem, timing, config, labels=(AMGX_PCG, AMGX_RESETUP))
        rows[0].note += "; mem + is XLA's only (AmgX allocates its own device memory)"
    except Exception as error:  # noqa: BLE001  (AmgX's failures are JAX runtime errors)
        rows[0].note = f"skipped: AmgX failed: {str(error).splitlines()[0][:300]}"
        rows = rows[:1]
    return rows + jaxsolve_pcg(problem, timing, config,
                               labels=(OURS_AMGX_CONFIG, OURS_AMGX_CONFIG_RESETUP))


def pyamg_pcg(problem: Problem, timing: Timing) -> list[Row]:
    """PyAMG on the host CPU: smoothed aggregation as the preconditioner of its CG."""
    row = Row(PYAMG_PCG)
    if pyamg is None:
        row.note = "skipped: pyamg is not installed (pip install pyamg==5.4.1)"
        return [row]
    row.setup, hierarchy = pyamg_setup(problem, timing)
    b = np.asarray(problem.b)
    residuals: list[float] = []  # PyAMG's CG refills it on every call
    row.solve, x = timing.median(
        functools.partial(hierarchy.solve, b, tol=problem.tolerance, maxiter=problem.max_iters,
                          accel="cg", residuals=residuals)
    )
    row.iterations = len(residuals) - 1
    row.residual = problem.relative_residual(x)
    sizes = " / ".join(str(level.A.shape[0]) for level in hierarchy.levels)
    row.note = (f"{len(hierarchy.levels)} levels ({sizes} rows), "
                f"operator complexity {hierarchy.operator_complexity():.2f}")
    return [row]


# -----------------------------------------------------------------------------
# Output


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if abs(seconds) >= 1:
        return f"{seconds:.2f} s"
    if abs(seconds) >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def _size(nbytes: int | None) -> str:
    if nbytes is None:
        return "–"
    return f"{nbytes / 2**20:.1f} MiB" if abs(nbytes) < 2**30 else f"{nbytes / 2**30:.2f} GiB"


def print_table(rows: list[Row]) -> None:
    header = (f"{'':26} {'its':>5} {'setup':>10} {'solve':>10} {'per it':>10} "
              f"{'rel. res':>9} {'mem +':>10} {'peak':>10}  note")
    print(header)
    print("-" * len(header))
    for row in rows:
        its = "–" if row.iterations is None else str(row.iterations)
        residual = "–" if row.residual is None else f"{row.residual:.1e}"
        print(f"{row.label:26} {its:>5} {_duration(row.setup):>10} {_duration(row.solve):>10} "
              f"{_duration(row.per_iteration):>10} {residual:>9} {_size(row.memory):>10} "
              f"{_size(row.peak):>10}  {row.note}")


def _verdict(ratio: float, target: float) -> str:
    return "met" if ratio <= target else "missed"


def print_ratios(rows: list[Row]) -> None:
    by_label = {row.label: row for row in rows}
    print("\nratios (issue 4's targets):")
    for what, top, top_time, bottom, bottom_time, target in RATIOS:
        numerator = getattr(by_label.get(top), top_time, None)
        denominator = getattr(by_label.get(bottom), bottom_time, None)
        if numerator is None or denominator is None:
            missing = top if numerator is None else bottom
            print(f"  {what:32} {'n/a':>8}   no {top_time if numerator is None else bottom_time}"
                  f" time for {missing}")
            continue
        ratio = numerator / denominator
        print(f"  {what:32} {ratio:8.3f}   target <= {target:.3g}: {_verdict(ratio, target)}")


def print_bandwidth(rows: list[Row], peak: float) -> None:
    """Our rows' bytes per iteration, effective bandwidth and its fraction of ``peak``."""
    counted = [row for row in rows if row.traffic is not None]
    if not counted:
        return
    print(f"\nmemory traffic (jaxsolve.sparse.memory_traffic_per_iteration, the minimum) against"
          f" a peak of {peak / 1e12:.2f} TB/s (--peak-bandwidth):")
    for row in counted:
        per_iteration = row.traffic.total
        line = f"  {row.label:26} {per_iteration / 1e6:10.2f} MB/iteration"
        if row.solve and row.iterations:
            achieved = row.traffic.bandwidth(row.iterations, row.solve)
            line += (f" × {row.iterations} its / {_duration(row.solve)} = "
                     f"{achieved / 1e9:.1f} GB/s, {100 * achieved / peak:.1f} % of peak"
                     f" (at peak: {_duration(per_iteration * row.iterations / peak)})")
        print(line)
    print(f"per level and step, {counted[0].label}:")
    print(counted[0].traffic)


def print_memory(problem: Problem, rows: list[Row], config: dict[str, Any]) -> None:
    print(f"\nmatrix: {problem.A.nnz} nonzeros, {_size(problem.matrix_bytes)} "
          "(f64 values, int32 indices and row pointers)")
    peak = _memory_stat("peak_bytes_in_use")
    if peak is None:
        print("device memory: n/a (this backend reports no memory statistics)")
    else:
        print(f"device peak bytes in use over the run: {_size(peak)}")
    ours = next((row for row in rows if row.label == OURS), None)
    if ours is None:
        return
    if ours.kept is not None:
        multiple = ours.kept / problem.matrix_bytes
        print(f"jaxsolve keeps on the device: {_size(ours.kept)} = {multiple:.2f} x the "
              f"matrix (target <= {MEMORY_TARGET} x: {_verdict(multiple, MEMORY_TARGET)};"
              f" bytes in use once its row's solutions are dropped, {_size(ours.memory)} with"
              " them)")
    if hasattr(jsp, "describe"):
        print("jaxsolve's hierarchy, per part (jaxsolve.sparse.describe):")
        print(jsp.describe(problem.A, config))
    else:
        print("jaxsolve.sparse.describe: not in this version of jaxsolve.sparse")


def single_precision(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with its AMG preconditioner's hierarchy in f32 inside the f64 Krylov loop."""
    if "preconditioner" not in config:  # AMG itself is the solver
        return {**config, "jaxsolve_hierarchy_precision": "SINGLE"}
    preconditioner = {**config["preconditioner"], "jaxsolve_hierarchy_precision": "SINGLE"}
    return {**config, "preconditioner": preconditioner}


BENCHMARKS = {
    "jaxsolve": jaxsolve_pcg,
    "jaxsolve-f32": jaxsolve_pcg,
    "bcoo": bcoo_cg,
    "stencil": stencil_cg,
    "amjax": amjax_pcg,
    "amgx": amgx_pcg,
    "pyamg": pyamg_pcg,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?",
                        help="grid points per side (default: 128 on a GPU, 48 on a CPU)")
    parser.add_argument("--config", default=json.dumps(DEFAULT_CONFIG),
                        help="jaxsolve's AmgX configuration, as JSON (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="of the random right-hand side")
    parser.add_argument("--skip", action="append", default=[], choices=BENCHMARKS,
                        help="leave out this row (repeat the flag for more)")
    parser.add_argument("--peak-bandwidth", type=float, default=4.8e12,
                        help="the device's memory bandwidth in bytes/s, against which the"
                        " effective bandwidth is set (default: the H200's 4.8 TB/s, NVIDIA's"
                        " datasheet; a device copy reaches about 4.3 TB/s)")
    args = parser.parse_args()

    jax.config.update("jax_enable_x64", True)
    config = json.loads(args.config)
    settings = jsp.parse_amgx_config(config)
    if settings.convergence != "RELATIVE_INI":
        parser.error("--config: the baselines stop relative to ||b||, so convergence must "
                     "be RELATIVE_INI (x0 = 0)")
    n = args.n or (128 if jax.default_backend() == "gpu" else 48)
    problem = Problem.poisson3d(n, args.seed, settings.tolerance)
    timing = Timing(args.repeats, args.warmup)

    device = jax.devices()[0]
    print(f"device: {device.device_kind} ({device.platform}), jax {jax.__version__}")
    # (the threads the host setup kernels split over: describe's table, at the end)
    print(f"host: {os.cpu_count()} CPUs")
    print(f"3D Poisson {n}^3: {n**3} unknowns, {problem.A.nnz} nonzeros, f64, b random "
          f"(seed {args.seed}), x0 = 0, tolerance {settings.tolerance:g} relative to ||b||")
    print(f"jaxsolve config: {json.dumps(config)}")
    print(f"times: median of {args.repeats} after {args.warmup} warm-up\n")

    benchmarks = {
        **BENCHMARKS,
        "jaxsolve": functools.partial(jaxsolve_pcg, config=config),
        "jaxsolve-f32": functools.partial(jaxsolve_pcg, config=single_precision(config),
                                          labels=(SINGLE, SINGLE_RESETUP)),
    }
    rows: list[Row] = []
    for name, benchmark in benchmarks.items():
        if name not in args.skip:
            print(f"[{name}]", file=sys.stderr, flush=True)
            rows += benchmark(problem, timing)
    print_table(rows)
    print_bandwidth(rows, args.peak_bandwidth)
    print_ratios(rows)
    print_memory(problem, rows, config)


if __name__ == "__main__":
    main()
