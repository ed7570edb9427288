"""What a new sparsity pattern costs: AMG setup, compilation and solve, stage by stage.

Issue 33's benchmark. A user whose pattern changes (remeshing, adaptive refinement, contact,
a new geometry per sample) pays, for every new pattern, the host setup of the AMG structure
and XLA's compilation of the programs for that pattern's level sizes. One run measures, for
3D Poisson on an ``n × n × n`` grid (``matrices.poisson3d_matrix``, f64, ``b`` standard
normal from a fixed seed, ``x0 = 0``, PCG to ``‖r‖ ≤ 1e-8 ‖b‖``) and each configuration
(the library's default solver and AMG with that tolerance, classical PMISC with one
aggressive level, the same with that level interpolating in two D2 stages instead of by
multipass (``aggressive_interpolator``), ``tools/bench/sparse_poisson3d.py``'s smoothed
aggregation, AmgX's PCG with unsmoothed aggregation, ``SIZE_8``, its structure set up on
the host and then on the device (``jaxsolve_setup_location``), the default AMG with the
``MULTICOLOR_GS`` or ``MULTICOLOR_DILU`` smoother, smoothed aggregation with the four
near-null-space vectors ``1, x, y, z`` (``SYSTEMS``), and smoothed aggregation of the
block system ``A ⊗ I₂`` of two unknowns a node, ``2 n³`` rows, ``block_dim=2``), in one
process, in this order:

* **first call end to end**: ``clear_cache()`` then ``solve``: the first solve of this
  configuration in the process (JAX itself is warmed up first by a trivial program), with
  the XLA programs it compiles (``programs``: backend compilations, less those read from
  JAX's persistent compilation cache, whose reads are ``from disk``), their compile time
  (**XLA compile**, the sum of JAX's ``backend_compile_duration`` events) and the tracing
  and lowering that precede compilation (**trace + lower**), from ``jax.monitoring``;
* **host setup (structure)** and **numeric setup**: ``clear_cache()`` then ``describe``,
  whose ``setup_seconds`` are the structure's phases on the host (summed; for the device
  setup, its programs on the device, compiled, and the finest pattern's copy there) and one
  numeric setup on the device, compiled (medians);
* **solve**: ``solve(..., reuse_setup=True)``; **re-setup + solve**: ``solve`` with new
  values (the matrix's, times 1.01) on the cached pattern (medians; aggregation builds a
  structure for them, as AmgX's full setup does);
* **new pattern, same rows**: the same grid with ``--extra-couplings`` more couplings
  (``k`` random pairs of cells one step apart along the diagonal ``(1, 1, 1)``, each adding
  a graph-Laplacian term of weight 0.5, so the matrix stays symmetric positive definite),
  solved once end to end; then **another such pattern**, ``k`` other pairs, the same number
  of nonzeros; then **more nonzeros, same rows**: ``2 k`` other pairs, so the finest
  operator has ``2 k`` more nonzeros (a refined coupling, a Jacobian whose pattern grew);
  then **new pattern, (n−1)³**: a grid one cell smaller. Each shows whether a pattern of
  similar size reuses the compiled programs (``0 programs``) or recompiles.

Every cell is ``time`` or ``time, CPU time [programs compiled, from disk; compile and
trace + lower time]`` (the CPU time is the process's, all its threads': on a shared machine
the steadier measure): a new pattern read entirely from disk still pays its tracing and
lowering. **memory kept** is ``describe``'s: the device bytes the setup keeps, over ``A``'s. A second run with
``JAXSOLVE_COMPILATION_CACHE=<dir>`` (the same directory) shows the first call of a process
that finds its programs on disk.

**Running it.** ``n`` is the first argument (default 128 on a GPU, 32 on a CPU):

    tools/dev bench sparse_new_pattern 32
    JAXSOLVE_COMPILATION_CACHE=/tmp/jaxsolve-xla python3 tools/bench/sparse_new_pattern.py 32
    tools/dev gpu-run python3 tools/bench/sparse_new_pattern.py 128

``--json PATH`` writes the rows (seconds and counts) as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

import jaxsolve.sparse as jsp
from amg_configs import LEAN
from jaxsolve.sparse import matrices

TOLERANCE = 1e-8
CONFIGS = {
    "default": {"tolerance": TOLERANCE, "max_iters": 200},
    "PMISC + 1 aggressive": {
        "solver": "PCG",
        "tolerance": TOLERANCE,
        "max_iters": 200,
        "preconditioner": LEAN,
    },
    "PMISC + 1 aggressive, two D2 stages": {  # the aggressive level's P = P1 P2
        "solver": "PCG",
        "tolerance": TOLERANCE,
        "max_iters": 200,
        "preconditioner": {**LEAN, "aggressive_interpolator": "D2"},
    },
    "smoothed aggregation": {  # tools/bench/sparse_poisson3d.py's
        "solver": "PCG",
        "tolerance": TOLERANCE,
        "max_iters": 200,
        "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_8",
                           "jaxsolve_smoothed_aggregation": 1, "smoother": "BLOCK_JACOBI",
                           "presweeps": 1, "postsweeps": 1, "max_levels": 10,
                           "min_coarse_rows": 2000},
    },
    # AmgX's PCG + AGGREGATION, its structure set up on the host, then on the device
    "aggregation, host setup": {
        "solver": "PCG",
        "tolerance": TOLERANCE,
        "max_iters": 200,
        "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_8",
                           "jaxsolve_setup_location": "HOST"},
    },
    "aggregation, device setup": {
        "solver": "PCG",
        "tolerance": TOLERANCE,
        "max_iters": 200,
        "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_8",
                           "jaxsolve_setup_location": "DEVICE"},
    },
    "MULTICOLOR_GS": {
        "solver": "PCG", "tolerance": TOLERANCE, "max_iters": 200,
        "preconditioner": {"solver": "AMG", "smoother": "MULTICOLOR_GS"},
    },
    "MULTICOLOR_DILU": {
        "solver": "PCG", "tolerance": TOLERANCE, "max_iters": 200,
        "preconditioner": {"solver": "AMG", "smoother": "MULTICOLOR_DILU"},
    },
    "SA, 4 near-null vectors": {
        "solver": "PCG", "tolerance": TOLERANCE, "max_iters": 200,
        "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_8",
                           "jaxsolve_smoothed_aggregation": 1, "smoother": "JACOBI_L1",
                           "min_coarse_rows": 512},
    },
    "block SA, 2 a node": {
        "solver": "PCG", "tolerance": TOLERANCE, "max_iters": 200,
        "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_4",
                           "jaxsolve_smoothed_aggregation": 1, "smoother": "BLOCK_JACOBI",
                           "min_coarse_rows": 512},
    },
}


def linear_functions(host: scipy.sparse.csr_matrix, n: int) -> tuple[scipy.sparse.csr_matrix,
                                                                     dict[str, Any]]:
    """The matrix, with the near-null space ``1, x, y, z`` (the grid's linear functions)."""
    x, y, z = np.unravel_index(np.arange(n**3), (n,) * 3)
    return host, {"near_nullspace": jnp.asarray(
        np.stack([np.ones(n**3), x / n, y / n, z / n], axis=1))}


def two_components(host: scipy.sparse.csr_matrix, n: int) -> tuple[scipy.sparse.csr_matrix,
                                                                    dict[str, Any]]:
    """The matrix for each of two components of a node (``A ⊗ I₂``, node-major), a block
    system of 2 unknowns a node (``2 n³`` rows)."""
    del n
    return scipy.sparse.csr_matrix(scipy.sparse.kron(host, scipy.sparse.eye(2))), {
        "block_dim": 2}


# The system a configuration solves for a grid's matrix: the matrix and solve's other
# arguments (the matrix itself and none by default).
SYSTEMS = {"SA, 4 near-null vectors": linear_functions, "block SA, 2 a node": two_components}
# The table's rows, in order (the JSON's keys).
STAGES = (
    "host setup (structure)",
    "numeric setup",
    "XLA compile (first call)",
    "trace + lower (first call)",
    "solve",
    "first call end to end",
    "re-setup + solve",
    "new pattern, same rows",
    "another such pattern",
    "more nonzeros, same rows",
    "new pattern, (n-1)^3",
    "memory kept",
)

_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
_TRACE_AND_LOWER = ("/jax/core/compile/jaxpr_trace_duration",
                    "/jax/core/compile/jaxpr_to_mlir_module_duration")
_CACHE_HIT = "/jax/compilation_cache/cache_hits"


@dataclasses.dataclass
class Compilations:
    """What JAX compiled while a block ran (from ``jax.monitoring``'s events)."""

    backend: int = 0  # backend compilations, including those read from the persistent cache
    from_disk: int = 0  # persistent-cache hits
    compile_seconds: float = 0.0
    trace_and_lower_seconds: float = 0.0

    @property
    def programs(self) -> int:
        """Programs XLA compiled anew."""
        return self.backend - self.from_disk


_ACTIVE: list[Compilations] = []


def _on_duration(event: str, duration: float, **kwargs: Any) -> None:
    for counts in _ACTIVE:
        if event == _BACKEND_COMPILE:
            counts.backend += 1
            counts.compile_seconds += duration
        elif event in _TRACE_AND_LOWER:
            counts.trace_and_lower_seconds += duration


def _on_event(event: str, **kwargs: Any) -> None:
    for counts in _ACTIVE:
        if event == _CACHE_HIT:
            counts.from_disk += 1


jax.monitoring.register_event_duration_secs_listener(_on_duration)
jax.monitoring.register_event_listener(_on_event)


@contextlib.contextmanager
def compilations() -> Iterator[Compilations]:
    """Counts what JAX compiles inside the block."""
    counts = Compilations()
    _ACTIVE.append(counts)
    try:
        yield counts
    finally:
        _ACTIVE.remove(counts)


@dataclasses.dataclass
class Cell:
    """One measurement: seconds, and the compilations when they were counted."""

    seconds: float
    compiled: Compilations | None = None
    iterations: int | None = None
    cpu_seconds: float | None = None  # the process's CPU time (all threads), when measured

    def __str__(self) -> str:
        text = _duration(self.seconds)
        if self.cpu_seconds is not None:
            text += f", CPU {_duration(self.cpu_seconds)}"
        if self.iterations is not None:
            text += f" ({self.iterations} its)"
        compiled = self.compiled
        if compiled is not None:
            disk = f", {compiled.from_disk} from disk" if compiled.from_disk else ""
            spent = (f"; compile {_duration(compiled.compile_seconds)}, trace + lower "
                     f"{_duration(compiled.trace_and_lower_seconds)}") if compiled.backend else ""
            text += f" [{compiled.programs} programs{disk}{spent}]"
        return text

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seconds": self.seconds, "cpu_seconds": self.cpu_seconds,
                               "iterations": self.iterations}
        if self.compiled is not None:
            out |= {"programs": self.compiled.programs, "from_disk": self.compiled.from_disk,
                    "compile_seconds": self.compiled.compile_seconds,
                    "trace_and_lower_seconds": self.compiled.trace_and_lower_seconds}
        return out


@dataclasses.dataclass
class Ratio:
    """Bytes kept, in units of the matrix's."""

    times_matrix: float

    def __str__(self) -> str:
        return f"{self.times_matrix:.2f} × A"

    def as_json(self) -> dict[str, Any]:
        return {"times_matrix": self.times_matrix}


def _duration(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def poisson3d(n: int) -> scipy.sparse.csr_matrix:
    """The 7-point Poisson matrix on ``n³`` cells, f64, on the host."""
    A = jsp.as_csr(matrices.poisson3d_matrix(n, dtype=jnp.float64))
    return scipy.sparse.csr_matrix((np.asarray(A.values), A.indices, A.indptr), A.shape)


def with_extra_couplings(A: scipy.sparse.csr_matrix, n: int, k: int, seed: int
                         ) -> scipy.sparse.csr_matrix:
    """``A`` plus ``k`` couplings between cells one step apart along ``(1, 1, 1)``.

    Each pair ``(i, j)`` adds ``0.5 (e_i - e_j)(e_i - e_j)ᵀ``: two new off-diagonal
    entries, the matrix stays symmetric positive definite.
    """
    rng = np.random.default_rng(seed)
    cells = rng.choice((n - 1) ** 3, size=k, replace=False)
    x, y, z = np.unravel_index(cells, (n - 1,) * 3)
    i = np.ravel_multi_index((x, y, z), (n,) * 3)
    j = np.ravel_multi_index((x + 1, y + 1, z + 1), (n,) * 3)
    rows = np.concatenate([i, j, i, j])
    cols = np.concatenate([i, j, j, i])
    weights = np.concatenate([np.full(2 * k, 0.5), np.full(2 * k, -0.5)])
    extra = scipy.sparse.csr_matrix((weights, (rows, cols)), A.shape)
    out = (A + extra).tocsr()
    out.sort_indices()
    return out


def _once(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """``fn()``'s wall and CPU seconds (the process's, every thread's) and result."""
    start, cpu = time.perf_counter(), time.process_time()
    result = jax.block_until_ready(fn())
    return time.perf_counter() - start, time.process_time() - cpu, result


def _median(fn: Callable[[], Any], repeats: int, warmup: int) -> tuple[float, float, Any]:
    """The median wall and CPU seconds of ``fn()`` over ``repeats`` calls after ``warmup``."""
    times, result = [], None
    for _ in range(warmup + repeats):
        result = None
        *seconds, result = _once(fn)
        times.append(seconds)
    wall, cpu = zip(*times[warmup:], strict=True)
    return statistics.median(wall), statistics.median(cpu), result


def _first_solve(A: Any, b: jax.Array, config: dict[str, Any],
                 arguments: dict[str, Any]) -> Cell:
    """One solve end to end, on a pattern not seen before, with what it compiled."""
    with compilations() as compiled:
        seconds, cpu, (_, info) = _once(lambda: jsp.solve(A, b, config=config, **arguments))
    _check(info)
    return Cell(seconds, compiled, int(info.iterations), cpu)


def _check(info: Any) -> None:
    status = jsp.Status(int(info.status))
    if status != jsp.Status.SUCCESS:
        raise RuntimeError(f"the solve ended with {status.name}")


def _scalar(host: scipy.sparse.csr_matrix, n: int) -> tuple[scipy.sparse.csr_matrix,
                                                             dict[str, Any]]:
    del n
    return host, {}


def measure(n: int, config: dict[str, Any], *, extra_couplings: int, repeats: int,
            warmup: int, seed: int = 0, system: Callable = _scalar) -> dict[str, Cell | Ratio]:
    """The stages of one configuration on the ``n³`` grid (see the module's docstring);
    ``system``: one of :data:`SYSTEMS`."""

    def problem(host: scipy.sparse.csr_matrix, n: int) -> tuple[Any, jax.Array, dict]:
        matrix, arguments = system(host, n)
        return (jsp.as_csr(matrix), matrices.rhs_random(matrix.shape[0], seed,
                                                        dtype=jnp.float64), arguments)

    host = poisson3d(n)
    A, b, arguments = problem(host, n)
    cells: dict[str, Cell | Ratio] = {}

    jsp.clear_cache()
    first = _first_solve(A, b, config, arguments)
    cells["first call end to end"] = first
    cells["XLA compile (first call)"] = Cell(first.compiled.compile_seconds)
    cells["trace + lower (first call)"] = Cell(first.compiled.trace_and_lower_seconds)

    def fresh_setup() -> jsp.HierarchyStatistics:
        jsp.clear_cache()
        return jsp.describe(A, config, **arguments)

    described = [_once(fresh_setup)[-1] for _ in range(warmup + repeats)][warmup:]
    phases = [hierarchy.setup_seconds for hierarchy in described]
    cells["memory kept"] = Ratio(sum(described[-1].bytes_kept.values())
                                 / described[-1].matrix_bytes)
    cells["host setup (structure)"] = Cell(statistics.median(
        sum(s for phase, s in p.items() if phase != "numeric setup") for p in phases))
    cells["numeric setup"] = Cell(statistics.median(p["numeric setup"] for p in phases))

    with compilations() as compiled:
        seconds, cpu, (_, info) = _median(
            lambda: jsp.solve(A, b, config=config, reuse_setup=True, **arguments), repeats,
            warmup)
    _check(info)
    cells["solve"] = Cell(seconds, compiled, int(info.iterations), cpu)
    new_values = A.values * 1.01
    with compilations() as compiled:
        seconds, cpu, (_, info) = _median(
            lambda: jsp.solve(A.with_values(new_values), b, config=config, **arguments),
            repeats, warmup)
    _check(info)
    cells["re-setup + solve"] = Cell(seconds, compiled, int(info.iterations), cpu)

    for stage, couplings, other in (("new pattern, same rows", extra_couplings, 1),
                                    ("another such pattern", extra_couplings, 2),
                                    ("more nonzeros, same rows", 2 * extra_couplings, 3)):
        cells[stage] = _first_solve(*problem(with_extra_couplings(host, n, couplings,
                                                                  seed + other), n)[:2],
                                    config, arguments)
    smaller, b_smaller, smaller_arguments = problem(poisson3d(n - 1), n - 1)
    cells["new pattern, (n-1)^3"] = _first_solve(smaller, b_smaller, config, smaller_arguments)
    jsp.clear_cache()
    return cells


def table(results: dict[str, dict[str, Cell | Ratio]]) -> str:
    """The stages as rows, the configurations as columns (markdown)."""
    names = list(results)
    lines = ["| stage | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| {stage} | " + " | ".join(str(results[name][stage]) for name in names) + " |"
              for stage in STAGES]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    jax.config.update("jax_enable_x64", True)
    on_gpu = jax.default_backend() == "gpu"
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("n", type=int, nargs="?", default=128 if on_gpu else 32,
                        help="grid cells per side (n³ rows)")
    parser.add_argument("--extra-couplings", type=int, default=8,
                        help="couplings added for the new patterns of the same size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    if args.n < 3:
        parser.error("n must be at least 3")

    jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.zeros(3)))  # JAX's own start-up
    cache_dir = jax.config.jax_compilation_cache_dir
    print(f"3D Poisson {args.n}³ = {args.n**3} rows, f64, PCG to {TOLERANCE:g}, on "
          f"{jax.devices()[0].device_kind}; persistent compilation cache: "
          f"{cache_dir or 'off (JAXSOLVE_COMPILATION_CACHE unset)'}")
    results = {name: measure(args.n, CONFIGS[name], extra_couplings=args.extra_couplings,
                             repeats=args.repeats, warmup=args.warmup,
                             system=SYSTEMS.get(name, _scalar))
               for name in args.configs}
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({name: {stage: cell.as_json() for stage, cell in cells.items()}
                       for name, cells in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
