"""Dense solvers on the default JAX device: jaxsolve.dense against native JAX, time and memory.

Issue 6's side-by-side benchmark on one GPU. For f32 and f64, each row runs one routine on an
``N × N`` matrix both ways:

* **potrs**: ``jaxsolve.dense.potrs(a, b, donate=True)`` against
  ``jax.scipy.linalg.cho_solve(cho_factor(a), b)``;
* **lu_solve**: ``jaxsolve.dense.lu_solve(a, b, donate=True)`` against
  ``jax.scipy.linalg.lu_solve(lu_factor(a), b)``;
* **syevd**: ``jaxsolve.dense.syevd(a, donate=True)`` against ``jnp.linalg.eigh(a)``.

Native JAX is jitted with ``donate_argnums=0`` too, so both may reuse ``A``'s buffer. ``b`` is a
vector of ones. On one GPU jaxsolve computes with cuSOLVER through its own FFI handlers, in place
(``jaxsolve.dense._cusolver``); elsewhere with its XLA reference backend.

The matrices are built on the device by one fused kernel (no temporaries, so the process's peak
memory before the call is ``A`` and ``b``): ``H + N I`` for the solves (``H`` has entries
uniform in ``[-0.5, 0.5)`` from an integer hash of ``(i, j)``; symmetric for potrs) and ``H``
symmetric for syevd (a random spectrum, so that divide and conquer does not deflate early).

Per row: **time**, the median over ``--repeats`` calls (after one warm-up call that compiles),
each timed with ``time.perf_counter`` around the call and ``block_until_ready`` (``A`` is rebuilt
before each call, untimed, since the call consumes it); **TFLOP/s**, from nominal counts
(potrs ``N³/3``, lu_solve ``2N³/3``, syevd ``4N³``, plus ``2N²`` for the solves); **extra**,
the device memory the call needed beyond ``A`` and ``b``, in units of ``A``: the growth of
``device.memory_stats()['peak_bytes_in_use']`` over what was in use before the first call, plus,
for jaxsolve, the cuSOLVER workspace it holds outside XLA's allocator
(``_cusolver.workspace_bytes()``). JAX cannot reset a device's peak, so **each case runs in a
fresh process** (``XLA_PYTHON_CLIENT_PREALLOCATE=false``). **speed-up** is native's time over
jaxsolve's (above 1: jaxsolve is faster); **memory** native's extra over jaxsolve's (``(0)``:
jaxsolve needed none). Every result is checked (the residual of the solve, or
``Σ w = tr A``) before it is timed.

``--overhead`` adds the per-call cost at ``N = 1024`` (f64): the first call (tracing,
compiling, creating cuSOLVER's handle and workspace) and the median of later calls with the same
shapes, which pay for none of that. ``--largest N1,N2,...`` tries f64 potrs at each ``N`` both
ways (XLA may use 97% of the device's memory) and says which fit.

Run it with Bazel on a build machine (``tools/dev bench dense_solvers -- --quick``), or on the
GPU host, which has no Bazel, with the wheels of ``tools/dev gpu-pack`` installed::

    site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --target "$site" .gpu/wheels/*.whl
    PYTHONPATH="$site" python3 tools/bench/dense_solvers.py             # all sizes, ~5 min
    PYTHONPATH="$site" python3 tools/bench/dense_solvers.py --quick     # N = 8192, ~1 min
    PYTHONPATH="$site" python3 tools/bench/dense_solvers.py --sizes 16384 --routines potrs
    PYTHONPATH="$site" python3 tools/bench/dense_solvers.py --routines "" --overhead \
        --largest 57344,65536,98304,126976
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np

ROUTINES = ("potrs", "lu_solve", "syevd")
IMPLEMENTATIONS = ("jaxsolve", "native")
SOLVE_SIZES = (8192, 16384, 32768)
EIGEN_SIZES = (8192, 16384)


def nominal_flops(routine: str, n: int) -> float:
    return {"potrs": n**3 / 3 + 2 * n**2, "lu_solve": 2 * n**3 / 3 + 2 * n**2,
            "syevd": 4.0 * n**3}[routine]


def build_matrix(routine: str, n: int, dtype) -> jax.Array:
    """The benchmark's matrix, by one fused kernel on the default device."""

    @jax.jit
    def build():
        i = jax.lax.broadcasted_iota(jnp.uint32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.uint32, (n, n), 1)
        diagonal = i == j
        if routine != "lu_solve":  # symmetric
            i, j = jnp.minimum(i, j), jnp.maximum(i, j)
        h = i * jnp.uint32(2654435761) + j * jnp.uint32(2246822519)
        h = (h ^ (h >> 15)) * jnp.uint32(2246822519)
        h = h ^ (h >> 13)
        u = h.astype(dtype) / dtype(2.0**32) - dtype(0.5)
        return u if routine == "syevd" else jnp.where(diagonal, u + dtype(n), u)

    return build()


def solver(routine: str, implementation: str):
    if implementation == "jaxsolve":
        from jaxsolve import dense

        return {"potrs": lambda a, b: dense.potrs(a, b, donate=True),
                "lu_solve": lambda a, b: dense.lu_solve(a, b, donate=True),
                "syevd": lambda a, b: dense.syevd(a, donate=True)}[routine]
    native = {
        "potrs": lambda a, b: jax.scipy.linalg.cho_solve(
            jax.scipy.linalg.cho_factor(a, lower=True), b),
        "lu_solve": lambda a, b: jax.scipy.linalg.lu_solve(jax.scipy.linalg.lu_factor(a), b),
        "syevd": lambda a, b: jnp.linalg.eigh(a),
    }[routine]
    return jax.jit(native, donate_argnums=0)


def check(routine: str, n: int, dtype, output) -> float:
    """The relative residual of a solve, or of ``Σ w = tr A`` for syevd."""
    a = build_matrix(routine, n, dtype)
    if routine == "syevd":
        w = output[0]
        return float(jnp.abs(jnp.sum(w) - jnp.trace(a)) / jnp.max(jnp.abs(w)) / n)
    return float(jnp.max(jnp.abs(a @ output - 1)))


def workspace_bytes(implementation: str) -> int:
    if implementation != "jaxsolve":
        return 0
    from jaxsolve.dense import _cusolver

    return _cusolver.workspace_bytes()


def run_case(routine: str, implementation: str, dtype_name: str, n: int, repeats: int) -> dict:
    """One case in this process: the fields of a row, as JSON."""
    dtype = np.dtype(dtype_name).type
    device = jax.devices()[0]
    call = solver(routine, implementation)
    a, b = build_matrix(routine, n, dtype), jnp.ones(n, dtype)
    a.block_until_ready()
    matrix_bytes = n * n * np.dtype(dtype).itemsize
    stats = device.memory_stats()  # None on a CPU
    in_use = stats["bytes_in_use"] if stats else None
    start = time.perf_counter()
    output = jax.block_until_ready(call(a, b))
    first = time.perf_counter() - start
    peak = device.memory_stats()["peak_bytes_in_use"] if stats else None
    # Checking needs a second A: not for the largest matrices.
    error = check(routine, n, dtype, output) if matrix_bytes < 2**34 else None
    del output
    times = []
    for _ in range(repeats):
        a, b = build_matrix(routine, n, dtype), jnp.ones(n, dtype)  # the calls consume them
        a.block_until_ready()
        start = time.perf_counter()
        jax.block_until_ready(call(a, b))
        times.append(time.perf_counter() - start)
    workspace = workspace_bytes(implementation)
    extra = None if peak is None else (peak - in_use + workspace) / matrix_bytes
    return {"seconds": statistics.median(times), "first": first, "error": error,
            "extra": extra, "workspace": workspace / matrix_bytes}


def in_fresh_process(args: list[str], memory_fraction: str | None = None) -> dict:
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if memory_fraction is not None:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = memory_fraction
    done = subprocess.run([sys.executable, os.path.abspath(__file__), *args], env=env,
                          capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"failed": reason[:100]}
    return json.loads(lines[-1])


def overhead(repeats: int) -> None:
    """Per-call cost at N = 1024, f64: the first call, and later ones with the same shapes."""
    n = 1024
    print(f"\nPer-call cost at N = {n}, float64 (first call: trace, compile, handles, workspace)")
    print(f"{'routine':<10}{'implementation':<16}{'first (ms)':>12}{'later (ms)':>12}")
    for routine in ROUTINES:
        for implementation in IMPLEMENTATIONS:
            call = solver(routine, implementation)
            times = []
            for _ in range(repeats + 1):
                a, b = build_matrix(routine, n, np.float64), jnp.ones(n, np.float64)
                a.block_until_ready()
                start = time.perf_counter()
                jax.block_until_ready(call(a, b))
                times.append(time.perf_counter() - start)
            print(f"{routine:<10}{implementation:<16}{times[0] * 1e3:>12.1f}"
                  f"{statistics.median(times[1:]) * 1e3:>12.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")],
                        help="N values (default 8192,16384,32768; syevd stops at 16384)")
    parser.add_argument("--quick", action="store_true", help="N = 8192 only, 2 repeats")
    parser.add_argument("--routines", default=",".join(ROUTINES),
                        help="comma-separated; an empty string skips the table")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--overhead", action="store_true", help="also the per-call cost")
    parser.add_argument("--largest", type=lambda s: [int(v) for v in s.split(",")],
                        help="f64 potrs sizes to try both ways, e.g. 57344,65536,126976")
    parser.add_argument("--case", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    # Native JAX cannot always reuse a donated A (its factor has another layout); that is fine.
    warnings.filterwarnings("ignore", message="Some donated buffers were not usable")

    if args.case:  # a child process: one case, one line of JSON
        routine, implementation, dtype, n, repeats = args.case
        print(json.dumps(run_case(routine, implementation, dtype, int(n), int(repeats))))
        return

    repeats = 2 if args.quick else args.repeats
    sizes = [8192] if args.quick else (args.sizes or list(SOLVE_SIZES))
    device = jax.devices()[0]
    from jaxsolve.dense import _backend, _layout

    backend = _backend.backend_name("cholesky", _layout.Layout(device_platform=device.platform),
                                    np.float64)
    print(f"jaxsolve.dense ({backend} backend) vs native JAX on {device.device_kind} "
          f"({device.platform}), JAX {jax.__version__}; median of {repeats}; extra memory in "
          "units of A")
    print(f"{'routine':<10}{'dtype':<9}{'N':>7}  {'jaxsolve s':>11}{'TFLOP/s':>9}{'extra':>7}"
          f"{'(wksp)':>8}  {'native s':>10}{'TFLOP/s':>9}{'extra':>7}  {'speed-up':>8}"
          f"{'memory':>8}")
    for routine in filter(None, args.routines.split(",")):
        for dtype in args.dtypes.split(","):
            for n in sizes:
                if routine == "syevd" and n > max(EIGEN_SIZES) and not args.sizes:
                    continue
                row = {impl: in_fresh_process(["--case", routine, impl, dtype, str(n),
                                               str(repeats)]) for impl in IMPLEMENTATIONS}
                ours, native = row["jaxsolve"], row["native"]
                cells = []
                for result, wide in ((ours, True), (native, False)):
                    if "failed" in result:
                        cells.append(f"  failed: {result['failed'][:40]:<40}")
                        continue
                    tflops = nominal_flops(routine, n) / result["seconds"] / 1e12
                    extra = "-" if result["extra"] is None else f"{result['extra']:.2f}"
                    cell = f"{result['seconds']:>11.4f}{tflops:>9.1f}{extra:>7}"
                    if wide:
                        cell += f"{result['workspace']:>8.2f}"
                    cells.append(cell)
                ratio = memory = ""
                if "failed" not in ours and "failed" not in native:
                    ratio = f"{native['seconds'] / ours['seconds']:>8.2f}"
                    if ours["extra"] is not None:  # native's extra memory over ours
                        memory = (f"{native['extra'] / ours['extra']:>8.1f}"
                                  if ours["extra"] >= 0.01 else f"{'(0)':>8}")
                    for name, result in (("jaxsolve", ours), ("native", native)):
                        error = result["error"]
                        if error is not None and not error < (1e-3 if dtype == "float32"
                                                              else 1e-8):
                            memory += f"  ({name} residual {error:.1e}!)"
                print(f"{routine:<10}{dtype:<9}{n:>7}  {cells[0]}  {cells[1]}  {ratio} {memory}",
                      flush=True)

    if args.overhead:
        overhead(20)

    if args.largest:
        print("\nLargest f64 potrs (XLA_PYTHON_CLIENT_MEM_FRACTION=0.97)")
        for n in args.largest:
            for impl in IMPLEMENTATIONS:
                result = in_fresh_process(["--case", "potrs", impl, "float64", str(n), "1"],
                                          memory_fraction="0.97")
                if "failed" in result:
                    status = "failed: " + result["failed"]
                else:
                    extra = "" if result["extra"] is None else f", extra {result['extra']:.2f} A"
                    status = f"ok, {result['seconds']:.2f} s{extra}"
                print(f"  N = {n:>6}  {impl:<9} {status}", flush=True)


if __name__ == "__main__":
    main()
