"""Classical AMG, side by side: jaxsolve's against PyAMG's and against jaxsolve's aggregation.

Issue 8's iteration counts. For each problem, ``A x = b`` with ``b`` standard normal (fixed
seed), ``x0 = 0``, f64, solved by preconditioned CG to ``‖b - A x‖ <= 1e-8 ‖b‖`` with one
V-cycle (one pre- and one post-sweep of damped Jacobi, ``ω = 0.9``) per iteration by:

* **jaxsolve classical**: ``algorithm: CLASSICAL`` with the selector (PMIS, PMISC, HMIS) and the
  interpolator (D2: extended+i; D1: Ruge–Stüben's modified classical) of the row;
* **PyAMG RS**: ``pyamg.ruge_stuben_solver`` with matching settings where PyAMG has them:
  classical strength (``norm='min'``, the same threshold), ``CF='PMIS'`` for PMIS rows and
  ``CF=('RS', {'second_pass': False})`` (Ruge–Stüben's first pass, which is what HMIS is on
  one process) for HMIS rows, ``interpolation='classical'`` (modified: our D1; PyAMG has no
  distance-two interpolation), damped Jacobi ``ω = 0.9``, coarsest level at most
  ``max_coarse`` rows solved directly, CG as the accelerator. PyAMG's PMIS draws random
  weights, ours hashes the index, so the splittings differ in detail;
* **jaxsolve classical A2**: PMIS, PMISC (PMIS in color) and HMIS, D2, with
  ``aggressive_levels: 1`` (A2 coarsening and multipass interpolation on the first level,
  AmgX's aggressive defaults): fewer, smaller levels for more iterations;
* **jaxsolve aggregation**: ``algorithm: AGGREGATION``, ``selector: SIZE_4`` (unsmoothed,
  as AmgX), jaxsolve's former default.

Problems: 2D Poisson (5-point, ``n2d²``), 3D Poisson (7-point, ``n3d³``), and PyAMG's
rotated anisotropic diffusion (``diffusion_stencil_2d(epsilon=0.001, theta=π/8, 'FD')`` on
``n2d²``). Columns: iterations, levels, operator complexity ``Σ nnz(A_ℓ) / nnz(A)``, setup
(jaxsolve: a cold-cache solve minus a solve with ``reuse_setup``, both compiled; PyAMG: its
hierarchy's construction) and solve time, on this machine's default device (PyAMG: host).

    tools/dev bench sparse_classical
    tools/dev bench sparse_classical --n2d 256 --n3d 48 --threshold 0.5 --max-elements 4
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import jax
import numpy as np
import pyamg
import scipy.sparse

import jaxsolve.sparse as jsp
from timing import smallest_time

TOLERANCE = 1e-8
# The classical rows: (selector, interpolator, aggressive_levels).
CLASSICAL_ROWS = (("PMIS", "D2", 0), ("PMIS", "D1", 0), ("PMISC", "D2", 0), ("HMIS", "D2", 0),
                  ("HMIS", "D1", 0), ("PMIS", "D2", 1), ("PMISC", "D2", 1), ("HMIS", "D2", 1))


def jaxsolve_row(A: scipy.sparse.csr_array, b: np.ndarray, amg: dict[str, Any],
                 min_coarse: int) -> dict[str, Any]:
    config = {"solver": "PCG", "tolerance": TOLERANCE, "max_iters": 500, "preconditioner": {
        "solver": "AMG", "smoother": "BLOCK_JACOBI", "relaxation_factor": 0.9,
        "min_coarse_rows": min_coarse, **amg}}

    def cold():
        jsp.clear_cache()
        return jsp.solve(A, b, config=config)

    cold_time, _ = smallest_time(cold)
    solve_time, (x, info) = smallest_time(lambda: jsp.solve(A, b, config=config, reuse_setup=True))
    stats = jsp.describe(A, config)
    residual = np.linalg.norm(b - A @ np.asarray(x)) / np.linalg.norm(b)
    return {"its": int(info.iterations), "levels": len(stats.rows),
            "complexity": stats.operator_complexity, "setup": cold_time - solve_time,
            "solve": solve_time, "residual": residual}


def pyamg_row(A: scipy.sparse.csr_array, b: np.ndarray, selector: str, threshold: float,
              min_coarse: int) -> dict[str, Any]:
    splitting = "PMIS" if selector == "PMIS" else ("RS", {"second_pass": False})
    jacobi = ("jacobi", {"omega": 0.9})

    def setup():
        return pyamg.ruge_stuben_solver(
            A, strength=("classical", {"theta": threshold, "norm": "min"}), CF=splitting,
            interpolation="classical", presmoother=jacobi, postsmoother=jacobi,
            max_coarse=min_coarse, max_levels=100)

    setup_time, ml = smallest_time(setup, repeats=1)
    residuals: list[float] = []
    start = time.perf_counter()
    x = ml.solve(b, x0=np.zeros_like(b), tol=TOLERANCE, accel="cg", maxiter=500,
                 residuals=residuals)
    solve_time = time.perf_counter() - start
    residual = np.linalg.norm(b - A @ x) / np.linalg.norm(b)
    return {"its": len(residuals) - 1, "levels": len(ml.levels),
            "complexity": ml.operator_complexity(), "setup": setup_time, "solve": solve_time,
            "residual": residual}


def problems(n2d: int, n3d: int) -> dict[str, scipy.sparse.csr_array]:
    stencil = pyamg.gallery.diffusion_stencil_2d(epsilon=0.001, theta=np.pi / 8, type="FD")
    return {
        f"2D Poisson {n2d}^2": pyamg.gallery.poisson((n2d, n2d), format="csr"),
        f"3D Poisson {n3d}^3": pyamg.gallery.poisson((n3d, n3d, n3d), format="csr"),
        f"rotated anisotropic {n2d}^2": pyamg.gallery.stencil_grid(stencil, (n2d, n2d),
                                                                   format="csr"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n2d", type=int, default=128)
    parser.add_argument("--n3d", type=int, default=32)
    parser.add_argument("--threshold", type=float, default=0.25,
                        help="strength threshold of every classical row (AmgX's default 0.25)")
    parser.add_argument("--max-elements", type=int, default=-1,
                        help="interp_max_elements of the jaxsolve classical rows (PyAMG has no "
                             "truncation; -1: none, AmgX's default)")
    parser.add_argument("--min-coarse", type=int, default=256,
                        help="rows of the coarsest level, at most (solved directly)")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    device = jax.devices()[0]
    print(f"device: {device.device_kind} ({device.platform}), jax {jax.__version__}, "
          f"pyamg {pyamg.__version__}; PCG to {TOLERANCE:g} relative, b random, x0 = 0, f64; "
          f"strength threshold {args.threshold}, interp_max_elements {args.max_elements}")
    header = (f"{'':30} {'its':>4} {'levels':>6} {'op. cx':>7} {'setup':>9} {'solve':>9} "
              f"{'rel. res':>9}")
    rng = np.random.default_rng(0)
    for name, A in problems(args.n2d, args.n3d).items():
        A = scipy.sparse.csr_array(A)
        b = rng.standard_normal(A.shape[0])
        print(f"\n{name}: {A.shape[0]} unknowns, {A.nnz} nonzeros")
        print(header)
        rows = []
        for selector, interpolator, aggressive in CLASSICAL_ROWS:
            rows.append((f"jaxsolve classical {selector} {interpolator}"
                         + (" A2" if aggressive else ""), jaxsolve_row(
                A, b, {"algorithm": "CLASSICAL", "selector": selector,
                       "interpolator": interpolator, "strength_threshold": args.threshold,
                       "aggressive_levels": aggressive,
                       "interp_max_elements": args.max_elements},
                args.min_coarse)))
        for selector, label in (("PMIS", "PMIS"), ("HMIS", "RS 1st pass")):
            rows.append((f"PyAMG RS {label} classical",
                         pyamg_row(A, b, selector, args.threshold, args.min_coarse)))
        rows.append(("jaxsolve aggregation SIZE_4", jaxsolve_row(
            A, b, {"algorithm": "AGGREGATION", "selector": "SIZE_4"}, args.min_coarse)))
        for label, row in rows:
            print(f"{label:30} {row['its']:>4} {row['levels']:>6} {row['complexity']:>7.2f} "
                  f"{row['setup'] * 1e3:>7.0f}ms {row['solve'] * 1e3:>7.0f}ms "
                  f"{row['residual']:>9.1e}", flush=True)


if __name__ == "__main__":
    main()
