"""Where a one-GPU syevd spends its time: the lean path's stages next to Xsyevd and native.

Issue 30 asks for syevd in one matrix of workspace at >= 1.0 x native speed; this splits the
lean path (``use_backend("cusolver_lean")``: sytrd, our tridiagonal eigensolver, the blocked
back-transformation) so that the slow stage shows. Per dtype and N it prints the best of two
calls after a first (compiling) one of:

* ``sytrd``: ``jax.lax.linalg.tridiagonal(a, lower=True)``, cuSOLVER's reduction alone;
* ``tridiag values`` / ``tridiag vectors``: `jaxsolve.dense.eigh_tridiagonal` on its output;
* ``lean``, ``Xsyevd``: `jaxsolve.dense.syevd` under ``use_backend("cusolver_lean")`` and
  ``use_backend("cusolver")``; ``native``: ``jnp.linalg.eigh``;
* ``lean - sytrd - tridiag``: what the back-transformation and the transposes cost.

On the GPU host, after ``tools/dev gpu-pack``::

    tools/dev gpu-run python3 tools/bench/dense_syevd_stages.py 8192 16384
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve import dense


def best_time(f, *args, repeats=2):
    """The best of ``repeats`` timed calls of ``f(*args)`` after one untimed call."""
    jax.block_until_ready(f(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def stages(n: int, dtype) -> str:
    h = jax.random.uniform(jax.random.key(0), (n, n), dtype) - 0.5
    a = (h + h.T) / 2
    del h
    reduce = jax.jit(lambda a: jax.lax.linalg.tridiagonal(a, lower=True))
    t_sytrd = best_time(reduce, a)
    _, d, e, _ = reduce(a)
    t_values = best_time(jax.jit(lambda d, e: dense.eigh_tridiagonal(d, e, eigvals_only=True)),
                         d, e)
    t_vectors = best_time(jax.jit(dense.eigh_tridiagonal), d, e)
    t_native = best_time(jax.jit(jnp.linalg.eigh), a)
    with dense.use_backend("cusolver"):
        t_xsyevd = best_time(dense.syevd, a)
    with dense.use_backend("cusolver_lean"):
        t_lean = best_time(dense.syevd, a)
    dense.clear_cache()
    return (f"{np.dtype(dtype).name} n={n}: sytrd {t_sytrd:.3f}  tridiag values {t_values:.3f}"
            f"  tridiag vectors {t_vectors:.3f}  lean {t_lean:.3f}  Xsyevd {t_xsyevd:.3f}"
            f"  native {t_native:.3f}  lean - sytrd - tridiag {t_lean - t_sytrd - t_vectors:.3f}")


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    sizes = [int(arg) for arg in sys.argv[1:]] or [8192, 16384]
    for dtype in (np.float64, np.float32):
        for n in sizes:
            print(stages(n, dtype), flush=True)


if __name__ == "__main__":
    main()
