"""What a first ``solve`` costs: compilation, host setup and solve, one fresh process each.

Issue 29's compile-time target: the first call of any configuration at most 5 s on a
2-core CPU at 100 k rows. Each row runs ``jaxsolve.sparse.solve(A, b, config)`` in a new
Python process (so nothing is compiled or cached yet; JAX itself is warmed up first by a
trivial program), f64, ``b`` standard normal from a fixed seed, ``x0 = 0``, tolerance
1e-8, on one of

* ``poisson2d``: the 5-point Laplacian on 316² cells (99 856 rows),
* ``poisson3d``: the 7-point Laplacian on 46³ cells (97 336 rows),
* ``elasticity2d``: Q1 plane elasticity on 224² nodes (``pyamg.gallery.linear_elasticity``,
  100 352 rows, ``block_dim=2``),
* ``convection``: upwind convection-diffusion on 316², ε = 1e-3 (``sparse_suite``'s),

with the configurations of :data:`CONFIGS` (the default, each Krylov method, the classical
selectors, aggregation, the multicolor and ℓ1-Jacobi smoothers). Columns:

* ``first``: the first call, wall clock, and ``cpu``: the process's user + system time
  over it (on a shared machine the wall clock waits for other processes; CPU time does
  not);
* ``compile``: the process's CPU time in XLA's backend compilations (from the end of each
  program's lowering to the end of its compilation, by ``jax.monitoring``'s events), and
  ``programs``: how many; ``trace``: JAX's tracing and lowering to StableHLO (wall);
* ``setup``: the setup inside the first call (host structure, numeric setup, and the
  numeric setup's compilation), wall;
* ``solve``: the smallest of ``--repeats`` warm calls with ``reuse_setup=True``;
* ``its`` and ``res``: iterations and the true relative residual.

With ``--traced``, each row's values are traced: the call is ``jax.jit(lambda values:
solve(A.with_values(values), b, config))`` and nothing was solved with concrete values
before, as in a program that only ever calls ``solve`` under ``jit``.  The first call then
builds the structure from the pattern alone, the numeric setup runs inside the program,
and ``solve`` is the smallest warm call of that program (numeric setup included; no
``setup`` column).  Its default rows stand beside PCG's and PBICGSTAB's, the methods the
default's program chooses between at run time (``_default_method.py``; PBICGSTAB was
the default of such values before).

With ``--baseline PATH`` (the ``--json`` of an earlier run) each row also shows the ratio
of its ``cpu``, ``compile`` and ``solve`` to the baseline's.

    python3 tools/bench/sparse_first_call.py                       # every row: minutes
    python3 tools/bench/sparse_first_call.py --rows poisson2d:default poisson3d:JACOBI_L1
    python3 tools/bench/sparse_first_call.py --json after.json --baseline before.json
    python3 tools/bench/sparse_first_call.py --traced              # under jit alone
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np

TOLERANCE = 1e-8
MAX_ITERS = 500


def _amg(**keys: Any) -> dict[str, Any]:
    return {"solver": "AMG", **keys}


CONFIGS: dict[str, dict[str, Any]] = {
    "default": {},
    "PCG": {"solver": "PCG"},
    "PBICGSTAB": {"solver": "PBICGSTAB"},
    "GMRES": {"solver": "GMRES"},
    "FGMRES": {"solver": "FGMRES"},
    "PMIS": {"solver": "PCG", "preconditioner": _amg(algorithm="CLASSICAL", selector="PMIS")},
    "PMISC": {"solver": "PCG", "preconditioner": _amg(algorithm="CLASSICAL", selector="PMISC")},
    "HMIS": {"solver": "PCG", "preconditioner": _amg(algorithm="CLASSICAL", selector="HMIS")},
    "AGGREGATION": {"solver": "PCG", "preconditioner": _amg(algorithm="AGGREGATION")},
    "MULTICOLOR_GS": {"solver": "PCG", "preconditioner": _amg(smoother="MULTICOLOR_GS")},
    "JACOBI_L1": {"solver": "PCG", "preconditioner": _amg(smoother="JACOBI_L1")},
}
ROWS = ([f"poisson2d:{name}" for name in CONFIGS if name != "PCG"]
        + [f"poisson3d:{name}" for name in ("default", "PMIS", "AGGREGATION", "MULTICOLOR_GS",
                                            "JACOBI_L1")]
        + ["elasticity2d:default", "elasticity2d:JACOBI_L1"]
        + [f"convection:{name}" for name in ("default", "GMRES", "FGMRES")])
# --traced: the default and the two methods it chooses between, per problem.
TRACED_ROWS = [f"{problem}:{name}" for problem in ("poisson2d", "poisson3d", "elasticity2d",
                                                   "convection")
               for name in ("default", "PCG", "PBICGSTAB")]


def problem(name: str) -> tuple[Any, int]:
    """``(A, block_dim)`` of problem ``name`` (SciPy CSR, f64)."""
    import pyamg
    if name == "poisson2d":
        return pyamg.gallery.poisson((316, 316), format="csr"), 1
    if name == "poisson3d":
        return pyamg.gallery.poisson((46,) * 3, format="csr"), 1
    if name == "elasticity2d":
        return pyamg.gallery.linear_elasticity((224, 224), format="csr")[0], 2
    if name == "convection":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from sparse_suite import upwind_convection_diffusion
        return upwind_convection_diffusion(
            316, 1e-3, lambda x, y: (np.cos(np.pi / 6), np.sin(np.pi / 6))), 1
    raise ValueError(f"unknown problem {name!r}")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(row: str, repeats: int, traced: bool = False) -> dict[str, Any]:
    """Runs row ``problem:config`` in this process (a fresh one), its values traced under
    ``jit`` with ``traced``; its measurements."""
    import jax
    jax.config.update("jax_enable_x64", True)
    import jaxsolve.sparse as jsp

    name, config_name = row.split(":")
    A, block_dim = problem(name)
    A = A.tocsr()
    b = np.random.default_rng(0).standard_normal(A.shape[0])
    config = {"tolerance": TOLERANCE, "max_iters": MAX_ITERS, **CONFIGS[config_name]}
    kwargs = {"block_dim": block_dim} if block_dim > 1 else {}
    matrix = jsp.as_csr(A)
    jax.block_until_ready(jax.jit(lambda x: x + 1)(np.ones(3)))  # JAX's own start-up

    counts = {"programs": 0, "compile": 0.0, "trace": 0.0, "lowered_at": 0.0}

    # CPU time of the compilations: JAX's events give their wall time, which on a shared
    # machine includes waiting; the process's CPU time from the end of a program's lowering
    # to the end of its compilation does not.
    def on_duration(event: str, duration: float, **_: Any) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            counts["programs"] += 1
            counts["compile"] += _cpu() - counts["lowered_at"]
        elif event in ("/jax/core/compile/jaxpr_trace_duration",
                       "/jax/core/compile/jaxpr_to_mlir_module_duration"):
            counts["trace"] += duration
            counts["lowered_at"] = _cpu()

    if traced:  # one program, first and warm: its numeric setup runs at every call
        program = jax.jit(lambda values: jsp.solve(matrix.with_values(values), b,
                                                   config=config, **kwargs))
        first_call = warm_call = functools.partial(program, matrix.values)
    else:
        first_call = functools.partial(jsp.solve, matrix, b, config=config, **kwargs)
        warm_call = functools.partial(first_call, reuse_setup=True)

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    cpu, wall = _cpu(), time.perf_counter()
    x, info = first_call()
    jax.block_until_ready(x)
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    first = dict(counts)
    setup = None
    if not traced:  # the setup alone: a second first setup of the pattern, compiled
        jsp.clear_cache()
        setup = time.perf_counter()
        jsp.describe(matrix, config, **kwargs)
        setup = time.perf_counter() - setup
    solves = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(warm_call())
        solves.append(time.perf_counter() - start)
    residual = float(np.linalg.norm(b - A @ np.asarray(x)) / np.linalg.norm(b))
    return {"row": row, "rows": A.shape[0], "first": wall, "cpu": cpu,
            "compile": first["compile"], "programs": first["programs"],
            "trace": first["trace"], "setup_compiled": setup, "solve": min(solves),
            "its": int(info.iterations), "res": residual,
            "status": jsp.Status(int(info.status)).name}


COLUMNS = ("row", "rows", "first s", "cpu s", "compile s", "programs", "trace s",
           "setup s", "solve s", "its", "res")


def _cells(result: dict[str, Any], baseline: dict[str, Any] | None) -> list[str]:
    if "error" in result:
        return [result["row"], "-", f"error: {result['error']}"] + [""] * (len(COLUMNS) - 3)

    def ratio(key: str) -> str:
        if baseline is None or "error" in baseline or not baseline.get(key):
            return ""
        return f" ({result[key] / baseline[key]:.2f}x)"

    return [result["row"], str(result["rows"]), f"{result['first']:.2f}",
            f"{result['cpu']:.2f}{ratio('cpu')}", f"{result['compile']:.2f}{ratio('compile')}",
            str(result["programs"]), f"{result['trace']:.2f}",
            "-" if result["setup_compiled"] is None else f"{result['setup_compiled']:.2f}",
            f"{result['solve'] * 1e3:.0f} ms{ratio('solve')}", str(result["its"]),
            f"{result['res']:.1e}"]


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", metavar="PROBLEM:CONFIG",
                        help="rows to run (default: every row of the mode)")
    parser.add_argument("--traced", action="store_true",
                        help="trace the values under jit, with no concrete solve first")
    parser.add_argument("--repeats", type=int, default=5, help="warm solves (the smallest)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--baseline", help="an earlier --json, for ratios")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process's row
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.repeats, args.traced)))
        return []
    rows = args.rows or (TRACED_ROWS if args.traced else ROWS)
    baseline = {}
    if args.baseline:
        with open(args.baseline) as file:
            baseline = {result["row"]: result for result in json.load(file)}
    print(f"first call of jaxsolve.sparse.solve, one process per row, {os.cpu_count()} cores"
          + (", values traced under jit" if args.traced else ""))
    print(" | ".join(COLUMNS), flush=True)
    results = []
    for row in rows:
        child = subprocess.run([sys.executable, __file__, "--one", row, "--repeats",
                                str(args.repeats)] + ["--traced"] * args.traced,
                               capture_output=True, text=True)
        if child.returncode:
            result = {"row": row, "error": child.stderr.strip().splitlines()[-1]}
        else:
            result = json.loads(child.stdout.strip().splitlines()[-1])
        results.append(result)
        print(" | ".join(_cells(result, baseline.get(row))), flush=True)
        if args.json:
            with open(args.json, "w") as file:
                json.dump(results, file, indent=1)
    return results


if __name__ == "__main__":
    main()
