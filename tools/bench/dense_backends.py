"""Dense solvers on one GPU: jaxsolve.dense's backends side by side with native JAX.

Run on a GPU host with the wheels installed (``tools/dev gpu-pack``; on the host, install
``.gpu/wheels`` as ``tools/dev gpu-test`` does, with its ``LD_PRELOAD`` of the pack's NCCL):

    python tools/bench/dense_backends.py --sizes 8192 16384 --dtypes float64 \\
        --routines potrs lu_solve syevd --backends native cusolvermp

Backends: ``native`` is JAX itself (``jax.scipy.linalg.cho_factor``/``cho_solve``,
``lu_factor``/``lu_solve``, ``jnp.linalg.eigh``); any other name is a `jaxsolve.dense`
backend picked with `jaxsolve.dense.use_backend` (``xla``, ``cusolvermp``, ...), on a 1 × 1
mesh of the GPU, with tile ``--tile``. Every case runs in a fresh process, so that the
device's peak memory (``memory_stats()['peak_bytes_in_use']``) is that case's: reported as
"extra", the peak minus the operands' bytes, in units of A. jaxsolve's calls donate their
inputs (``donate=True``, the in-place path). "ws/A" is the cuSOLVERMp backend's cached
device workspace (``cudaMalloc``'ed, outside XLA's allocator, so not in the peak). Times are the median of ``--repeats`` calls
after one warm-up call (which compiles and sets up handles); ``setup`` is the warm-up's time,
so that a second call's saving shows. TFLOP/s count n³/3 (+ 2n²k) for potrs, 2n³/3 (+ 2n²k)
for lu_solve, and 4n³/3 for syevd (the tridiagonal reduction only).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

FLOPS = {
    "potrs": lambda n, k: n**3 / 3 + 2 * n * n * k,
    "lu_solve": lambda n, k: 2 * n**3 / 3 + 2 * n * n * k,
    "syevd": lambda n, k: 4 * n**3 / 3,
}


def _case(routine: str, n: int, dtype: str, backend: str, tile: int, repeats: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    if dtype in ("float64", "complex128"):
        jax.config.update("jax_enable_x64", True)
    from jaxsolve import dense
    import jaxsolve.sharding as js

    device = jax.devices()[0]
    mesh = js.make_grid_mesh(1, 1, devices=[device])
    rng = np.random.default_rng(0)

    @jax.jit
    def matrix():
        # Built in one fusion (no second n x n buffer, so the peak is the call's): the KMS
        # matrix 0.5^|i-j| (SPD, condition number < 9), plus a skew part for lu_solve.
        i = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
        j = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
        a = jnp.power(0.5, jnp.abs(i - j).astype(jnp.float32))
        if routine == "lu_solve":
            a = a + 0.25 * jnp.sign(i - j) * a
        return a.astype(dtype)

    def operands():
        sharding = NamedSharding(mesh, P("pr", "pc"))
        b = jax.device_put(jnp.ones((n, 1), dtype), NamedSharding(mesh, P("pr")))
        return jax.device_put(matrix(), sharding), b

    if backend == "native":
        import jax.scipy.linalg as jsl

        call = {
            "potrs": jax.jit(lambda a, b: jsl.cho_solve(jsl.cho_factor(a, lower=True), b)),
            "lu_solve": jax.jit(lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b)),
            "syevd": jax.jit(lambda a, b: jnp.linalg.eigh(a)),
        }[routine]
    else:
        def call(a, b):
            with dense.use_backend(backend):
                if routine == "potrs":
                    return dense.potrs(a, b, T_A=tile, donate=True)
                if routine == "lu_solve":
                    return dense.lu_solve(a, b, T_A=tile, donate=True)
                return dense.syevd(a, T_A=tile, donate=True)

    times = []
    for _ in range(repeats + 1):
        a, b = operands()
        jax.block_until_ready((a, b))
        start = time.perf_counter()
        jax.block_until_ready(call(a, b))
        times.append(time.perf_counter() - start)
        del a, b
    matrix_bytes = n * n * np.dtype(dtype).itemsize
    peak = (device.memory_stats() or {}).get("peak_bytes_in_use")
    seconds = statistics.median(times[1:])
    workspace = 0
    if backend != "native":
        from jaxsolve.dense import _cusolvermp

        workspace = _cusolvermp.workspace_bytes()
    return dict(
        routine=routine, n=n, dtype=dtype, backend=backend, tile=tile,
        seconds=seconds, setup_seconds=times[0],
        tflops=FLOPS[routine](n, 1) * (4 if "complex" in dtype else 1) / seconds / 1e12,
        extra_over_a=None if peak is None else (peak - matrix_bytes - n * b_itemsize(dtype))
        / matrix_bytes,
        workspace_over_a=workspace / matrix_bytes)


def b_itemsize(dtype: str) -> int:
    import numpy as np

    return np.dtype(dtype).itemsize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8192, 16384])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--routines", nargs="+", default=list(FLOPS), choices=list(FLOPS))
    parser.add_argument("--backends", nargs="+", default=["native", "cusolvermp"])
    parser.add_argument("--tile", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in a child process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(_case(**json.loads(args.case))), flush=True)
        return
    print(f"{'routine':9} {'n':>6} {'dtype':10} {'backend':11} {'time s':>9} {'setup s':>9} "
          f"{'TFLOP/s':>8} {'extra/A':>8} {'ws/A':>6}")
    for routine in args.routines:
        for dtype in args.dtypes:
            for n in args.sizes:
                for backend in args.backends:
                    case = dict(routine=routine, n=n, dtype=dtype, backend=backend,
                                tile=args.tile, repeats=args.repeats)
                    run = subprocess.run([sys.executable, __file__, "--case", json.dumps(case)],
                                         capture_output=True, text=True, env=dict(os.environ))
                    if run.returncode:
                        tail = (run.stderr.strip().splitlines() or ["?"])[-1]
                        print(f"{routine:9} {n:6} {dtype:10} {backend:11} failed: {tail}")
                        continue
                    r = json.loads(run.stdout.strip().splitlines()[-1])
                    extra = "-" if r["extra_over_a"] is None else f"{r['extra_over_a']:.2f}"
                    print(f"{routine:9} {n:6} {dtype:10} {backend:11} {r['seconds']:9.4f} "
                          f"{r['setup_seconds']:9.3f} {r['tflops']:8.2f} {extra:>8} "
                          f"{r['workspace_over_a']:6.2f}", flush=True)


if __name__ == "__main__":
    main()
