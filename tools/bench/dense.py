"""Dense solvers on one device and on grid meshes: native JAX, jaxsolve.dense and JAXMg.

Issue 6's benchmark, extended to meshes by issue 36. For each routine, dtype and ``N`` it
runs every implementation on the same ``N × N`` matrix, each **in a fresh process** (JAX
cannot reset a device's peak memory):

==============  =======================================================================
implementation  call
==============  =======================================================================
``native``      JAX itself, jitted with ``donate_argnums=0``:
                ``jax.scipy.linalg.cho_solve(cho_factor(a))``, ``lu_solve(lu_factor(a))``,
                ``jnp.linalg.eigh(a)``
``cusolver``    ``jaxsolve.dense.potrs``/``lu_solve``/``syevd`` with ``donate=True`` under
                ``use_backend("cusolver")``: cuSOLVER through our FFI handlers, in place
``cusolver_lean`` syevd only: ``jaxsolve.dense.syevd`` under ``use_backend("cusolver_lean")``, in
                one matrix of workspace (sytrd, our tridiagonal eigensolver, blocked
                back-transformation on cuBLAS)
``cusolvermp``  the same under ``use_backend("cusolvermp")``: cuSOLVERMp on a 1 × 1 grid,
                tile ``--tile``
``jaxmg``       JAXMg 1.4.1's ``potrs``/``lu_solve``/``syevd`` (``T_A = --tile``,
                ``donate=True``), when it imports
``xla``         jaxsolve's XLA reference backend (the one on a CPU)
==============  =======================================================================

By default all run on a 1 × 1 mesh of the first device (``P('pr', 'pc')``, ``b`` ``(N, 1)``
in ``P('pr', None)``). On a GPU the default implementations are ``native cusolver
cusolver_lean cusolvermp jaxmg`` and the sizes ``8192 16384 32768`` (syevd up to
``--eigen-max``, 16384); on a CPU ``native xla`` and ``256`` (a smoke run of this script,
e.g. in CI).

**Meshes.** ``--grids 1x4 4x1 2x2`` (or ``auto``: ``1 × P``, ``P × 1`` and the squarest grid
for ``P = 1, 2, 4, …`` up to every device) runs each case on those grids of the first ``P``
devices, in two process models (``--models``): ``single``, one process driving all ``P``
devices, and ``launch``, one process per device under ``python -m jaxsolve.sharding.launch
-n P`` (process 0 reports). JAXMg runs launched only, also on one GPU (it accepts no process
that sees several); ``native``, ``cusolver`` and ``cusolver_lean`` run on ``1 × 1`` only, the
one-device baselines; ``cusolvermp`` (or ``xla``) on every grid. ``--tile 256 1024`` gives a
row per ``T_A``. ``×1xP`` is the same implementation and model on the ``1 × P`` grid over this
one. ``--strong [N]`` adds strong scaling at ``N`` (65536 on a GPU, 256 on a CPU): each
implementation on the squarest grid of ``P = 1, 2, 4, …`` devices (1 and the most first,
should ``--budget`` end the run), its parallel efficiency
``t₁ / (P t_P)`` against its own one-device time and ``×best1``, the fastest one-device
time over its time. With ``--grids``, ``--largest`` tries the squarest grid of every device
(``--largest-grid`` another).

The matrix is built on the device by one fused kernel straight into its sharding (no
temporaries: before the call the process holds ``A`` and ``b`` only): ``H + N I`` for the
solves, ``H`` symmetric for syevd, with ``H``'s entries uniform in ``[-0.5, 0.5)`` from an
integer hash of ``(i, j)`` (symmetrized for potrs and syevd).

Columns: **s**, the median time of ``--repeats`` calls after a first one (which compiles and
sets up handles; ``A`` is rebuilt before each call, untimed, since the call consumes it);
**TFLOP/s** from nominal counts (potrs ``N³/3``, lu_solve ``2N³/3``, plus ``2N²`` for the
solve; syevd ``4N³``); **extra**, the device memory the first call needed beyond ``A`` and
``b``, in units of ``A``'s bytes (of one device's share of ``A`` on a mesh): the growth of ``memory_stats()['peak_bytes_in_use']`` plus
**ws**, device workspace held outside XLA's allocator (cuSOLVER's and cuSOLVERMp's cached
workspaces, ``jaxsolve.dense.workspace_bytes()``; JAXMg's as its
status vector reports it, the larger of its two routines' for the solves); **×native** and
**×jaxmg**, that implementation's time over this one's (above 1: this one is faster). Every
result is checked (the residual ``max |A x - b|``, or ``|Σ w - tr A|`` relative) before it is
timed; a bad one is flagged with ``!``.

``--workspaces`` adds cuSOLVER's own answer to how much device workspace its Hermitian
eigensolvers with vectors need at each ``N`` (``Xsyevd``, ``Xsyevdx``, ``syevj``, and
``sytrd`` + ``orgtr``), asked through its ``*_bufferSize`` functions without running them.
``--overhead`` adds the per-call cost at ``N = 1024`` (f64) of each implementation: the first
call (tracing, compiling, creating handles and workspaces) and the median of later calls with
the same shapes, which pay for none of that. ``--largest N ...`` tries f64 potrs at each ``N``
(ascending; ``XLA_PYTHON_CLIENT_MEM_FRACTION=0.97``; one call, no check) with each of
``--largest-impls`` and says which fit; an implementation that fails at some ``N`` is not tried
at larger ones. ``--budget SECONDS`` stops starting cases after that long (the rest is listed
as skipped), so that a run fits a time limit; each case is killed after ``--case-timeout``.

Run it with Bazel on a build machine (``tools/dev bench dense``), or on the GPU host, which has
no Bazel, after ``tools/dev gpu-pack`` (the pack carries our wheels, cuSOLVERMp, JAXMg and the
NCCL they need) with ``tools/dev gpu-run``, which installs the pack and preloads its NCCL::

    tools/dev gpu-run python3 tools/bench/dense.py --dtypes float64 --budget 420
    tools/dev gpu-run python3 tools/bench/dense.py --routines syevd --sizes 8192 16384 \\
        --impls native cusolver cusolver_lean
    tools/dev gpu-run python3 tools/bench/dense.py --routines --overhead \\
        --largest 57344 65536 98304 126976
    tools/dev gpu-run python3 tools/bench/dense.py --grids auto --tile 256 1024 \\
        --sizes 16384 32768 --strong --budget 500

On a CPU, the meshes of virtual devices: ``XLA_FLAGS=--xla_force_host_platform_device_count=4
JAX_PLATFORMS=cpu python tools/bench/dense.py --grids auto --sizes 64 --tile 16``.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROUTINES = ("potrs", "lu_solve", "syevd")
GPU_IMPLEMENTATIONS = ("native", "cusolver", "cusolver_lean", "cusolvermp", "jaxmg")
# Implementations that compute only some routines (the others compute every one).
ONLY_ROUTINES = {"cusolver_lean": ("syevd",)}
# Implementations on one device only (the others run on any grid mesh).
ONE_DEVICE_IMPLEMENTATIONS = ("native", "cusolver", "cusolver_lean")
CPU_IMPLEMENTATIONS = ("native", "xla")
GPU_SIZES = (8192, 16384, 32768)
CPU_SIZES = (256,)
GPU_STRONG_N, CPU_STRONG_N = 65536, 256
MODELS = ("single", "launch")
OVERHEAD_N = 1024
# The status fields (jaxmg._cusolvermp_status) that hold JAXMg's device workspaces, in KiB.
JAXMG_WORKSPACE_FIELDS = {
    "potrs": ("POTRS", ("potrf_device_workspace_kib", "potrs_device_workspace_kib")),
    "lu_solve": ("LU_SOLVE", ("getrf_device_workspace_kib", "getrs_device_workspace_kib")),
    "syevd": ("SYEVD", ("syevd_device_workspace_kib",)),
}


def computes(implementation: str, routine: str) -> bool:
    return routine in ONLY_ROUTINES.get(implementation, ROUTINES)


def nominal_flops(routine: str, n: int) -> float:
    return {"potrs": n**3 / 3 + 2 * n**2, "lu_solve": 2 * n**3 / 3 + 2 * n**2,
            "syevd": 4.0 * n**3}[routine]


# ------------------------------------------------------------------ one case, in a child


def _mesh(grid: tuple[int, int] = (1, 1)):
    """The ``rows × cols`` grid mesh of the first ``rows · cols`` devices (of every process)."""
    import jax

    import jaxsolve.sharding as js

    rows, cols = grid
    return js.make_grid_mesh(rows, cols, devices=jax.devices()[:rows * cols])


def build_operands(routine: str, n: int, dtype, mesh):
    """``(A, b)`` on the mesh, ``A`` made by one fused kernel directly in its sharding."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

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

    a = jax.jit(build, out_shardings=NamedSharding(mesh, P("pr", "pc")))()
    b = jax.jit(lambda: jnp.ones((n, 1), dtype),
                out_shardings=NamedSharding(mesh, P("pr", None)))()
    return jax.block_until_ready((a, b))


def make_call(implementation: str, routine: str, tile: int):
    """``call(a, b) -> (outputs, jaxmg_status)``; ``outputs`` is ``(x,)`` or ``(w, V)``."""
    import jax
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    if implementation == "native":
        native = jax.jit({
            "potrs": lambda a, b: (jsl.cho_solve(jsl.cho_factor(a, lower=True), b),),
            "lu_solve": lambda a, b: (jsl.lu_solve(jsl.lu_factor(a), b),),
            "syevd": lambda a, b: tuple(jnp.linalg.eigh(a)),
        }[routine], donate_argnums=0)
        return lambda a, b: (native(a, b), None)
    if implementation == "jaxmg":
        import jaxmg

        from jaxsolve import dense

        # JAXMg preloads only libcusolverMp.so.0; this loads what it needs beside it (NCCL,
        # cuBLAS, cuSOLVER, cuBLASMp, from wheels anywhere on sys.path) with RTLD_GLOBAL.
        dense.load_backend("cusolvermp")

        def call(a, b):
            if routine == "syevd":
                w, v, status = jaxmg.syevd(a, T_A=tile, donate=True, return_status=True)
                return (w, v), status
            x, status = getattr(jaxmg, routine)(a, b, T_A=tile, donate=True,
                                                return_status=True)
            return (x,), status

        return call
    from jaxsolve import dense

    def call(a, b):
        with dense.use_backend(implementation):
            if routine == "syevd":
                return tuple(dense.syevd(a, T_A=tile, donate=True)), None
            return (getattr(dense, routine)(a, b, T_A=tile, donate=True),), None

    return call


def outside_workspace(implementation: str, routine: str, status) -> int:
    """Device bytes the implementation holds outside XLA's allocator."""
    import numpy as np

    if implementation in ("cusolver", "cusolver_lean", "cusolvermp"):
        from jaxsolve import dense

        return dense.workspace_bytes()  # this process ran only this implementation
    if implementation == "jaxmg" and status is not None:
        from jaxmg import _cusolvermp_status as schema

        prefix, wanted = JAXMG_WORKSPACE_FIELDS[routine]
        fields = getattr(schema, f"_CUSOLVERMP_{prefix}_STATUS_FIELDS")
        # This process's rank's words (the status vector is split over the ranks).
        words = np.asarray(status.addressable_shards[0].data).reshape(-1, len(fields))[0]
        return 1024 * max(int(words[fields.index(name)]) for name in wanted)
    return 0


def residual(routine: str, n: int, dtype, mesh, outputs) -> float:
    """``max |A x - b|`` of a solve (b = 1), or ``|Σ w - tr A| / (n max |w|)`` of syevd."""
    import jax
    import jax.numpy as jnp

    a, _ = build_operands(routine, n, dtype, mesh)
    if routine == "syevd":
        w = outputs[0]
        return float(jnp.abs(jnp.sum(w) - jnp.trace(a)) / jnp.max(jnp.abs(w)) / n)
    ax = jnp.matmul(a, outputs[0].reshape(n, 1), precision=jax.lax.Precision.HIGHEST)
    return float(jnp.max(jnp.abs(ax - 1)))


def run_case(routine: str, implementation: str, dtype_name: str, n: int, repeats: int,
             tile: int, check: bool, grid: tuple[int, int] = (1, 1)) -> dict:
    """One case in this process (or in each process of a launched run): the fields of its row.

    ``extra`` and ``ws`` are in units of this process's first shard of ``A`` (all of ``A`` on
    one device).
    """
    import jax
    import numpy as np

    dtype = np.dtype(dtype_name).type
    mesh = _mesh(tuple(grid))
    call = make_call(implementation, routine, min(tile, n))
    a, b = build_operands(routine, n, dtype, mesh)
    device = a.addressable_shards[0].device
    matrix_bytes = a.addressable_shards[0].data.nbytes
    stats = device.memory_stats()  # None on a CPU
    in_use = stats["bytes_in_use"] if stats else None
    start = time.perf_counter()
    outputs, status = jax.block_until_ready(call(a, b))
    first = time.perf_counter() - start
    peak = device.memory_stats()["peak_bytes_in_use"] if stats else None
    workspace = outside_workspace(implementation, routine, status)
    error = residual(routine, n, dtype, mesh, outputs) if check else None
    del outputs, status
    times = []
    for _ in range(repeats):
        a, b = build_operands(routine, n, dtype, mesh)  # the calls consume them
        start = time.perf_counter()
        jax.block_until_ready(call(a, b))
        times.append(time.perf_counter() - start)
    extra = None if peak is None else (peak - in_use + workspace) / matrix_bytes
    return {"seconds": statistics.median(times) if times else first, "first": first,
            "error": error, "extra": extra, "workspace": workspace / matrix_bytes}


def run_overhead(implementation: str, calls: int) -> dict:
    """First and later call times (ms) of each routine at N = OVERHEAD_N, f64, this process."""
    import jax
    import numpy as np

    mesh = _mesh()
    result = {}
    for routine in filter(lambda routine: computes(implementation, routine), ROUTINES):
        call = make_call(implementation, routine, OVERHEAD_N)
        times = []
        for _ in range(calls + 1):
            a, b = build_operands(routine, OVERHEAD_N, np.float64, mesh)
            start = time.perf_counter()
            jax.block_until_ready(call(a, b))
            times.append(time.perf_counter() - start)
        result[routine] = (times[0] * 1e3, statistics.median(times[1:]) * 1e3)
    return result


def cusolver_workspaces(sizes: list[int]) -> dict:
    """cuSOLVER's device workspace for a Hermitian eigensolver with vectors, per variant.

    Asked from cuSOLVER itself (its ``*_bufferSize`` functions, through ctypes on the wheel's
    ``libcusolver``), without running anything: ``Xsyevd`` (the divide-and-conquer driver),
    ``Xsyevdx`` over the whole spectrum, Jacobi ``syevj``, and ``sytrd`` + ``orgtr`` (the
    reduction to tridiagonal form and its ``Q``, the steps a split eigensolver would take).
    In bytes, per ``f"{variant} {dtype} {n}"``.
    """
    import ctypes

    import jax

    from jaxsolve import dense

    dense.load_backend("cusolver")  # NVIDIA's cuSOLVER wheel, loaded with RTLD_GLOBAL
    jax.devices()  # the CUDA context, which cuSOLVER shares
    lib = ctypes.CDLL("libcusolver.so.12")
    handle, params, syevj = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    for status in (lib.cusolverDnCreate(ctypes.byref(handle)),
                   lib.cusolverDnCreateParams(ctypes.byref(params)),
                   lib.cusolverDnCreateSyevjInfo(ctypes.byref(syevj))):
        assert status == 0, f"cuSOLVER status {status}"
    vector, lower, every = 1, 0, 1001  # CUSOLVER_EIG_MODE_VECTOR, FILL_MODE_LOWER, RANGE_ALL
    i64, size = ctypes.c_int64, ctypes.c_size_t
    result = {}
    for dtype, (cuda_type, letter, itemsize) in {"float32": (0, "S", 4),
                                                 "float64": (1, "D", 8)}.items():
        for n in sizes:
            device, host, lwork, meig = size(), size(), ctypes.c_int(), i64()
            bound = (ctypes.c_double * 2)()
            calls = {
                "Xsyevd": lambda: lib.cusolverDnXsyevd_bufferSize(
                    handle, params, vector, lower, i64(n), cuda_type, None, i64(n), cuda_type,
                    None, cuda_type, ctypes.byref(device), ctypes.byref(host)),
                "Xsyevdx": lambda: lib.cusolverDnXsyevdx_bufferSize(
                    handle, params, vector, every, lower, i64(n), cuda_type, None, i64(n),
                    ctypes.byref(bound, 0), ctypes.byref(bound, 8), i64(0), i64(0),
                    ctypes.byref(meig), cuda_type, None, cuda_type, ctypes.byref(device),
                    ctypes.byref(host)),
                "syevj": lambda: getattr(lib, f"cusolverDn{letter}syevj_bufferSize")(
                    handle, vector, lower, n, None, n, None, ctypes.byref(lwork), syevj),
                "sytrd": lambda: getattr(lib, f"cusolverDn{letter}sytrd_bufferSize")(
                    handle, lower, n, None, n, None, None, None, ctypes.byref(lwork)),
                "orgtr": lambda: getattr(lib, f"cusolverDn{letter}orgtr_bufferSize")(
                    handle, lower, n, None, n, None, ctypes.byref(lwork)),
            }
            for variant, call in calls.items():
                device.value, lwork.value = 0, 0
                status = call()
                result[f"{variant} {dtype} {n}"] = (
                    -status if status else device.value or lwork.value * itemsize)
    lib.cusolverDnDestroySyevjInfo(syevj)
    lib.cusolverDnDestroyParams(params)
    lib.cusolverDnDestroy(handle)
    return result


def describe() -> dict:
    """The device, JAX's version, and jaxsolve.dense's default backends on the 1 × 1 mesh."""
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from jaxsolve import dense

    device = jax.devices()[0]
    a = jax.device_put(np.zeros((8, 8)), NamedSharding(_mesh(), P("pr", "pc")))
    return {"platform": device.platform, "kind": device.device_kind, "jax": jax.__version__,
            "devices": jax.device_count(),
            "defaults": {routine: dense.backend_for(routine, a, T_A=1024)
                         for routine in ROUTINES}}


def child(request: dict) -> dict | None:
    """Runs the request in this process; in a launched run (``"result_file"`` given), joins
    the other processes first, and process 0 writes the result to that file (and the others
    return ``None``)."""
    import warnings

    import jax

    result_file = request.pop("result_file", None)
    if result_file is not None:
        import jaxsolve.sharding as js

        js.initialize()  # before JAX starts its backend
    jax.config.update("jax_enable_x64", True)
    # Native JAX cannot always reuse a donated A (its factor has another layout); that is fine.
    warnings.filterwarnings("ignore", message="Some donated buffers were not usable")
    kind = request.pop("kind")
    result = {"case": run_case, "overhead": run_overhead, "describe": describe,
              "workspaces": cusolver_workspaces}[kind](**request)
    if result_file is None:
        return result
    if jax.process_index() == 0:
        with open(result_file, "w") as out:
            json.dump(result, out)
    return None


# ---------------------------------------------------------------------- the parent


class Runner:
    """Runs children one at a time, each in a fresh process (or, given ``processes``, a fresh
    group of them under ``python -m jaxsolve.sharding.launch``), within a time budget."""

    def __init__(self, budget: float | None, case_timeout: float):
        self.deadline = None if budget is None else time.monotonic() + budget
        self.case_timeout = case_timeout
        self.skipped = 0
        self.platform = "gpu"  # of the launched processes; main sets it from the description

    def __call__(self, request: dict, memory_fraction: str | None = None,
                 processes: int | None = None) -> dict:
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.skipped += 1
            return {"failed": "skipped (--budget spent)"}
        env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        if memory_fraction is not None:
            env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = memory_fraction
        script = [os.path.abspath(__file__), "--child"]
        if processes is None:
            return self._run([sys.executable, *script, json.dumps(request)], env, None)
        with tempfile.TemporaryDirectory() as folder:
            result_file = os.path.join(folder, "result.json")
            command = [sys.executable, "-m", "jaxsolve.sharding.launch", "-n", str(processes),
                       "--platform", self.platform, "--timeout", str(self.case_timeout),
                       *script, json.dumps(dict(request, result_file=result_file))]
            return self._run(command, env, result_file)

    def _run(self, command: list[str], env: dict, result_file: str | None) -> dict:
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=self.case_timeout + 30)
        except subprocess.TimeoutExpired:
            return {"failed": f"timed out after {self.case_timeout:.0f} s"}
        if result_file is None:
            lines = done.stdout.strip().splitlines()
        else:
            lines = [open(result_file).read()] if os.path.exists(result_file) else []
        if done.returncode != 0 or not lines:
            reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return {"failed": reason[:110]}
        return json.loads(lines[-1])


def available_implementations(platform: str, wanted: list[str] | None) -> list[str]:
    default = GPU_IMPLEMENTATIONS if platform == "gpu" else CPU_IMPLEMENTATIONS
    chosen = list(wanted or default)
    if "jaxmg" in chosen and (platform != "gpu" or importlib.util.find_spec("jaxmg") is None):
        print(f"JAXMg: {'not installed' if platform == 'gpu' else 'GPU only'}; left out")
        chosen.remove("jaxmg")
    return chosen


def squarest(devices: int) -> tuple[int, int]:
    """The grid of `devices` closest to square, ``rows <= cols`` (4 × 4 for 16, 2 × 4 for 8)."""
    rows = max(r for r in range(1, math.isqrt(devices) + 1) if devices % r == 0)
    return rows, devices // rows


def parse_grids(texts: list[str], devices: int) -> list[tuple[int, int]]:
    """``RxC`` grids, or ``auto``: for ``P = 1, 2, 4, …`` up to `devices`, ``1 × P``,
    ``P × 1`` and the squarest grid; in order, each once."""
    grids = []
    for text in texts:
        if text == "auto":
            counts = [1 << k for k in range(devices.bit_length())]
            grids += [g for p in counts for g in ((1, p), (p, 1), squarest(p))]
            continue
        rows, _, cols = text.partition("x")
        if not (rows.isdigit() and cols.isdigit() and int(rows) * int(cols) >= 1):
            raise SystemExit(f"--grids {text!r}: write a grid as ROWSxCOLS (e.g. 2x4), or auto")
        if int(rows) * int(cols) > devices:
            raise SystemExit(f"--grids {text}: needs {int(rows) * int(cols)} devices, "
                             f"{devices} here")
        grids.append((int(rows), int(cols)))
    return list(dict.fromkeys(grids))


def models_of(implementation: str, devices: int, models: list[str]) -> list[str]:
    """How an implementation runs on `devices` devices: ``single`` (one process driving them
    all) and/or ``launch`` (one process per device, ``jaxsolve.sharding.launch``). JAXMg runs
    one process per GPU only; native JAX and cuSOLVER use one device; on one device both
    models are one process."""
    if implementation == "jaxmg":
        return ["launch"]
    if implementation in ONE_DEVICE_IMPLEMENTATIONS:
        return ["single"] if devices == 1 else []
    return ["single"] if devices == 1 else models


def measure(run: Runner, implementation: str, model: str, routine: str, dtype: str, n: int,
            tile: int, grid: tuple[int, int], repeats: int, check: bool = True,
            memory_fraction: str | None = None) -> dict:
    """One case, in a child or a launched group of children."""
    request = dict(kind="case", routine=routine, implementation=implementation,
                   dtype_name=dtype, n=n, repeats=repeats, tile=tile, check=check,
                   grid=list(grid))
    processes = grid[0] * grid[1] if model == "launch" else None
    return run(request, memory_fraction, processes)


def ratio(reference: dict | None, result: dict) -> str:
    if not reference or "failed" in reference or "failed" in result:
        return "-"
    return f"{reference['seconds'] / result['seconds']:.2f}"


def format_grid(grid: tuple[int, int]) -> str:
    return f"{grid[0]}x{grid[1]}"


def print_table(args, implementations: list[str], run: Runner) -> None:
    print(f"\n{'routine':<9}{'dtype':<8}{'N':>6}{'T_A':>5} {'grid':<5} {'model':<7}"
          f"{'impl':<14}{'s':>9}{'TFLOP/s':>8}{'extra':>7}{'ws':>6}{'×native':>8}"
          f"{'×jaxmg':>7}{'×1xP':>6}  first s  residual")
    for routine in args.routines:
        sizes = [n for n in args.sizes if routine != "syevd" or n <= args.eigen_max]
        for dtype, n, tile in itertools.product(args.dtypes, sizes, args.tile):
            row = {}
            for grid, implementation in itertools.product(args.grids, implementations):
                if not computes(implementation, routine):
                    continue
                for model in models_of(implementation, grid[0] * grid[1], args.models):
                    row[grid, model, implementation] = measure(
                        run, implementation, model, routine, dtype, n, tile, grid, args.repeats)
            native = row.get(((1, 1), "single", "native"))
            for (grid, model, implementation), result in row.items():
                head = (f"{routine:<9}{dtype:<8}{n:>6}{tile:>5} {format_grid(grid):<5} "
                        f"{model:<7}{implementation:<14}")
                if "failed" in result:
                    print(f"{head}failed: {result['failed']}", flush=True)
                    continue
                tflops = nominal_flops(routine, n) / result["seconds"] / 1e12
                extra = "-" if result["extra"] is None else f"{result['extra']:.2f}"
                error = result["error"]
                bad = error is not None and not error < (1e-3 if dtype == "float32" else 1e-8)
                jaxmg = row.get((grid, "launch", "jaxmg"))
                devices = grid[0] * grid[1]
                one_by_p = row.get(((1, devices), model, implementation)) if devices > 1 else None
                print(f"{head}{result['seconds']:>9.4f}{tflops:>8.1f}{extra:>7}"
                      f"{result['workspace']:>6.2f}{ratio(native, result):>8}"
                      f"{ratio(jaxmg, result):>7}{ratio(one_by_p, result):>6}"
                      f"  {result['first']:>7.2f}  {error:.1e}{'!' if bad else ''}", flush=True)


def scaling_counts(devices: int) -> list[int]:
    """The device counts of strong scaling, ``P = 1, 2, 4, …`` up to `devices`: 1 and the
    most first, which a run cut short by ``--budget`` most needs."""
    powers = [1 << k for k in range(devices.bit_length())]
    return list(dict.fromkeys([1, powers[-1], *powers]))


def print_strong(args, implementations: list[str], run: Runner) -> None:
    """Strong scaling at ``N = args.strong``: each implementation on the squarest grid of
    ``P = 1, 2, 4, …`` devices; efficiency ``t₁ / (P t_P)`` against its own one-device
    time, and the speed-up over the fastest one-device implementation."""
    n, tile = args.strong, args.tile[-1]
    counts = scaling_counts(args.devices)
    print(f"\nStrong scaling at N = {n}, T_A = {tile}: the squarest grid of P devices; eff = "
          "t1 / (P tP) of the same implementation, ×best1 = the fastest one-device time / tP")
    print(f"{'routine':<9}{'dtype':<8}{'P':>3} {'grid':<5} {'model':<7}{'impl':<14}{'s':>9}"
          f"{'TFLOP/s':>8}{'eff':>6}{'×best1':>7}  residual")
    for routine, dtype in itertools.product(args.routines, args.dtypes):
        one_device: dict[str, float] = {}
        for devices in counts:
            grid = squarest(devices)
            for implementation in implementations:
                if not computes(implementation, routine):
                    continue
                for model in models_of(implementation, devices, args.models):
                    result = measure(run, implementation, model, routine, dtype, n, tile, grid,
                                     args.repeats)
                    head = (f"{routine:<9}{dtype:<8}{devices:>3} {format_grid(grid):<5} "
                            f"{model:<7}{implementation:<14}")
                    if "failed" in result:
                        print(f"{head}failed: {result['failed']}", flush=True)
                        continue
                    seconds = result["seconds"]
                    if devices == 1:
                        one_device[implementation] = seconds
                    t1 = one_device.get(implementation)
                    efficiency = "-" if t1 is None else f"{t1 / (devices * seconds):.2f}"
                    best = f"{min(one_device.values()) / seconds:.2f}" if devices > 1 else "-"
                    tflops = nominal_flops(routine, n) / seconds / 1e12
                    print(f"{head}{seconds:>9.4f}{tflops:>8.1f}{efficiency:>6}{best:>7}"
                          f"  {result['error']:.1e}", flush=True)


def print_overhead(implementations: list[str], run: Runner) -> None:
    print(f"\nPer-call cost at N = {OVERHEAD_N}, float64, ms: the first call (trace, compile, "
          "handles, workspaces), then the median of 10 later calls with the same shapes")
    print(f"{'impl':<14}" + "".join(f"{r + ' first':>16}{'later':>8}" for r in ROUTINES))
    for implementation in implementations:
        result = run(dict(kind="overhead", implementation=implementation, calls=10),
                     processes=1 if implementation == "jaxmg" else None)
        if "failed" in result:
            print(f"{implementation:<14}failed: {result['failed']}")
            continue
        print(f"{implementation:<14}" + "".join(
            f"{result[r][0]:>16.1f}{result[r][1]:>8.2f}" if r in result else f"{'-':>16}{'-':>8}"
            for r in ROUTINES), flush=True)


def print_workspaces(sizes: list[int], run: Runner) -> None:
    result = run(dict(kind="workspaces", sizes=sizes))
    print("\ncuSOLVER's device workspace for eigenvalues and vectors, in units of A (asked with "
          "its *_bufferSize; a negative number is the cusolverStatus_t of a failed query)")
    if "failed" in result:
        print(f"failed: {result['failed']}")
        return
    variants = ("Xsyevd", "Xsyevdx", "syevj", "sytrd", "orgtr")
    print(f"{'dtype':<9}{'N':>7}" + "".join(f"{v:>9}" for v in variants))
    for dtype, itemsize in (("float32", 4), ("float64", 8)):
        for n in sizes:
            cells = []
            for variant in variants:
                value = result[f"{variant} {dtype} {n}"]
                cells.append(f"{value:>9d}" if value < 0 else f"{value / (n * n * itemsize):>9.3f}")
            print(f"{dtype:<9}{n:>7}" + "".join(cells), flush=True)


def print_largest(args, run: Runner) -> None:
    grid = args.largest_grid
    print(f"\nLargest f64 potrs on a {format_grid(grid)} grid (XLA_PYTHON_CLIENT_MEM_FRACTION="
          f"0.97; one call, compile included; extra in units of a device's share of A)")
    devices = grid[0] * grid[1]
    failed_at: dict[str, int] = {}
    for n in sorted(args.largest):
        for implementation in args.largest_impls:
            for model in models_of(implementation, devices, args.models):
                name = f"{implementation} ({model})" if devices > 1 else implementation
                if name in failed_at:
                    print(f"  N = {n:>6}  {name:<20}not tried (failed at {failed_at[name]})")
                    continue
                result = measure(run, implementation, model, "potrs", "float64", n,
                                 args.tile[-1], grid, repeats=0, check=False,
                                 memory_fraction="0.97")
                if "failed" in result:
                    failed_at[name] = n
                    status = "failed: " + result["failed"]
                else:
                    extra = "" if result["extra"] is None else f", extra {result['extra']:.2f} A"
                    status = f"fits, {result['first']:.2f} s{extra}"
                print(f"  N = {n:>6}  {name:<20}{status}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routines", nargs="*", default=list(ROUTINES), choices=ROUTINES,
                        help="routines of the table (none: no table)")
    parser.add_argument("--sizes", type=int, nargs="+",
                        help="N values (default 8192 16384 32768 on a GPU, 256 on a CPU)")
    parser.add_argument("--eigen-max", type=int, default=16384, help="syevd's largest N")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"],
                        choices=["float32", "float64"])
    parser.add_argument("--impls", nargs="+", help="implementations (default: all that apply)")
    parser.add_argument("--tile", type=int, nargs="+", default=[1024],
                        help="T_A of cuSOLVERMp and JAXMg (several: a row each)")
    parser.add_argument("--grids", nargs="+", default=["1x1"],
                        help="grid meshes ROWSxCOLS, or auto (1xP, Px1 and the squarest grid "
                        "for P = 1, 2, 4, ... up to every device)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS),
                        help="on several devices: one process driving them all (single), one "
                        "process per device (launch); JAXMg runs launched only")
    parser.add_argument("--table", action=argparse.BooleanOptionalAction, default=True,
                        help="the side-by-side table of --routines (--no-table: only the "
                        "other parts asked for, e.g. --strong)")
    parser.add_argument("--strong", type=int, nargs="?", const=0, metavar="N",
                        help="also strong scaling at this N (without a value: 65536 on a GPU, "
                        "256 on a CPU)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--overhead", action="store_true", help="also the per-call cost")
    parser.add_argument("--workspaces", action="store_true",
                        help="also cuSOLVER's eigensolver workspaces (GPU)")
    parser.add_argument("--largest", type=int, nargs="+",
                        help="f64 potrs sizes to try, e.g. 57344 65536 98304 126976")
    parser.add_argument("--largest-impls", nargs="+", help="default: every implementation")
    parser.add_argument("--largest-grid", help="ROWSxCOLS of the --largest runs (default: 1x1, "
                        "or with --grids the squarest grid of every device)")
    parser.add_argument("--budget", type=float, help="seconds after which no case starts")
    parser.add_argument("--case-timeout", type=float, default=300.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one case or overhead measurement: one line of JSON
        result = child(json.loads(args.child))
        if result is not None:
            print(json.dumps(result), flush=True)
        return

    # The device is described by a child too: this process never holds the GPU (nor,
    # with JAX's default preallocation, 75% of its memory) while the cases run.
    run = Runner(args.budget, args.case_timeout)
    about = run(dict(kind="describe"))
    if "failed" in about:
        sys.exit(f"cannot start JAX: {about['failed']}")
    platform = run.platform = about["platform"]
    args.devices = about["devices"]
    implementations = available_implementations(platform, args.impls)
    args.sizes = args.sizes or list(GPU_SIZES if platform == "gpu" else CPU_SIZES)
    args.grids = parse_grids(args.grids, args.devices)
    if args.strong == 0:
        args.strong = GPU_STRONG_N if platform == "gpu" else CPU_STRONG_N
    meshes = args.grids != [(1, 1)]
    args.largest_grid = (parse_grids([args.largest_grid], args.devices)[0] if args.largest_grid
                         else squarest(args.devices) if meshes else (1, 1))
    args.largest_impls = [i for i in args.largest_impls or implementations
                          if i in implementations and computes(i, "potrs")]
    print(f"{args.devices} x {about['kind']} ({platform}), JAX {about['jax']}; each case in "
          f"fresh processes; median of {args.repeats}; extra and ws in units of a device's "
          "share of A")
    print("jaxsolve.dense's default backends here: " + ", ".join(
        f"{routine} -> {backend}" for routine, backend in about["defaults"].items()))
    if args.workspaces and platform == "gpu":  # first: one quick child
        print_workspaces([n for n in args.sizes if n <= args.eigen_max], run)
    if args.routines and args.table:
        print_table(args, implementations, run)
    if args.strong:
        print_strong(args, implementations, run)
    if args.overhead:
        print_overhead(implementations, run)
    if args.largest:
        print_largest(args, run)
    if run.skipped:
        print(f"\n{run.skipped} cases skipped: --budget {args.budget:.0f} s was spent")


if __name__ == "__main__":
    main()
