"""`jaxsolve.dense.eigh_tridiagonal` against LAPACK's tridiagonal eigensolvers, side by side.

For each matrix and order ``n`` it times, on the default device (CPU here; on a GPU host, our GPU
entry next to the host's LAPACK):

==============  ===========================================================================
implementation  call
==============  ===========================================================================
``ours``        ``dense.eigh_tridiagonal(d, e)`` under ``jax.jit``: eigenvalues and vectors
``ours w``      the same with ``eigvals_only=True``
``stemr``       ``scipy.linalg.eigh_tridiagonal(d, e, lapack_driver="stemr")`` (MRRR, the
                LAPACK solver ours is closest to; one core)
``stev``        SciPy's default for vectors, ``lapack_driver="stev"`` (implicit QL/QR, O(n³)
                with vectors: only up to ``--stev-max``, 2000)
``jax w``       ``jax.scipy.linalg.eigh_tridiagonal(d, e, eigvals_only=True)`` (JAX has no
                eigenvectors of a tridiagonal matrix)
==============  ===========================================================================

Columns: **s**, the smallest of ``--repeats`` timed calls after a warm-up (`timing`);
**×stemr**, stemr's time over this one's for the implementations with vectors, and **×jax w**,
JAX's values-only time over this one's for those without (above 1: this one is faster);
**values**, ``max |w - w_LAPACK| / ‖T‖``; **residual**, ``max_k ‖T z_k - w_k z_k‖ / ‖T‖``;
**orth**, ``max |ZᵀZ - I|``, all in float64 (``-`` without vectors). The matrices: ``random`` (d, e standard normal)
and ``1-2-1`` (the discrete Laplacian, whose eigenvalues crowd at both ends).

    tools/dev bench dense_tridiagonal                     # CPU: n = 1000, 4000
    tools/dev gpu-run python3 tools/bench/dense_tridiagonal.py --sizes 4096 16384
"""

import argparse
import functools

import jax
import numpy as np
import scipy.linalg

from jaxsolve import dense
from timing import smallest_time

MATRICES = ("random", "1-2-1")


def matrix(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    if name == "random":
        rng = np.random.default_rng(0)
        return rng.standard_normal(n), rng.standard_normal(n - 1)
    return 2 * np.ones(n), -np.ones(n - 1)


def errors(d, e, w, z, reference) -> tuple[float, float, float]:
    """(eigenvalue error, residual, orthogonality), relative to ‖T‖, in float64."""
    norm = np.max(np.abs(d)) + 2 * np.max(np.abs(e), initial=0.0)
    w = np.asarray(w, np.float64)
    value = float(np.max(np.abs(w - reference))) / norm
    if z is None:
        return value, None, None
    z = np.asarray(z, np.float64)
    tz = d[:, None] * z
    tz[:-1] += e[:, None] * z[1:]
    tz[1:] += e[:, None] * z[:-1]
    residual = float(np.max(np.linalg.norm(tz - z * w[None], axis=0))) / norm
    orthogonality = float(np.max(np.abs(z.T @ z - np.eye(len(d)))))
    return value, residual, orthogonality


def implementations(device, n: int, stev_max: int):
    ours = jax.jit(lambda d, e: dense.eigh_tridiagonal(d, e))
    ours_w = jax.jit(lambda d, e: dense.eigh_tridiagonal(d, e, eigvals_only=True))
    jax_w = jax.jit(lambda d, e: jax.scipy.linalg.eigh_tridiagonal(d, e, eigvals_only=True))

    def on_device(fn):
        def call(d, e):
            return fn(jax.device_put(d, device), jax.device_put(e, device))
        return call

    def lapack(driver):
        return lambda d, e: scipy.linalg.eigh_tridiagonal(d, e, lapack_driver=driver)

    chosen = {
        "ours": (on_device(ours), True),
        "ours w": (on_device(ours_w), False),
        "stemr": (lapack("stemr"), True),
        "stev": (lapack("stev"), True),
        "jax w": (on_device(jax_w), False),
    }
    if n > stev_max:
        del chosen["stev"]
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--matrices", nargs="+", default=list(MATRICES), choices=MATRICES)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--stev-max", type=int, default=2000,
                        help="the largest n for stev (minutes at n = 4000)")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    device = jax.devices()[0]
    print(f"{device.platform} ({device.device_kind}), JAX {jax.__version__}, SciPy "
          f"{scipy.__version__}; float64")
    print(f"{'matrix':<8}{'n':>7}  {'impl':<8}{'s':>9}{'×stemr':>8}{'×jax w':>8}"
          f"{'values':>10}{'residual':>10}{'orth':>10}")
    for name in args.matrices:
        for n in args.sizes:
            d, e = matrix(name, n)
            reference = scipy.linalg.eigvalsh_tridiagonal(d, e)
            rows = {}
            for impl, (call, vectors) in implementations(device, n, args.stev_max).items():
                seconds, result = smallest_time(functools.partial(call, d, e), args.repeats)
                w, z = result if vectors else (result, None)
                rows[impl] = (seconds, vectors, errors(d, e, w, z, reference))
            for impl, (seconds, vectors, (value, residual, orthogonality)) in rows.items():
                ratio = f"{rows['stemr' if vectors else 'jax w'][0] / seconds:.2f}"
                vector_errors = (f"{residual:>10.1e}{orthogonality:>10.1e}" if vectors
                                 else f"{'-':>10}{'-':>10}")
                print(f"{name:<8}{n:>7}  {impl:<8}{seconds:>9.4f}"
                      f"{ratio if vectors else '-':>8}{'-' if vectors else ratio:>8}"
                      f"{value:>10.1e}{vector_errors}", flush=True)


if __name__ == "__main__":
    main()
