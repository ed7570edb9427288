"""Block systems: 2D elasticity solved as a block system (``block_dim=2``) and as a scalar one.

Issue 8's comparison. For each size, ``matrices.elasticity_matrix_2d(n)`` (``2n²`` unknowns,
two per node), ``b`` standard normal (fixed seed), f64, preconditioned CG to
``‖b - A x‖ <= 1e-8 ‖b‖``, one V-cycle of ℓ1-Jacobi (one pre-, one post-sweep) per iteration,
``min_coarse_rows`` 64, with

* **SA + modes**: smoothed aggregation (``SIZE_4``) with the three rigid-body modes as
  near-null space;
* **SA**: smoothed aggregation with the default near-null space (scalar: the constant; block:
  the two per-component constants);
* **UA**: AmgX's unsmoothed aggregation (``SIZE_4``), same default near-null space;
* **classical**: PMIS, D2 interpolation (block: nodal splitting, unknown-wise interpolation);

each as a scalar system (``block_dim=1``) and as a block system (``block_dim=2``), and next
to them PyAMG's ``smoothed_aggregation_solver`` on the BSR matrix with the rigid-body modes
(``B=modes``, its default strength and symmetric block Gauss-Seidel smoothing, CG as the
accelerator).
Columns: iterations, levels, operator complexity. Then ``print_grid_stats`` for the block
problems of the middle size.

    tools/dev bench sparse_blocks
    tools/dev bench sparse_blocks --sizes 32 64 128
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import numpy as np
import pyamg
import scipy.sparse

import jaxsolve.sparse as jsp
from jaxsolve.sparse import matrices

TOLERANCE = 1e-8
SMOOTHER = {"smoother": "JACOBI_L1", "min_coarse_rows": 64}
PRECONDITIONERS = {
    "SA + modes": {"algorithm": "AGGREGATION", "selector": "SIZE_4",
                   "jaxsolve_smoothed_aggregation": 1},
    "SA": {"algorithm": "AGGREGATION", "selector": "SIZE_4",
           "jaxsolve_smoothed_aggregation": 1},
    "UA": {"algorithm": "AGGREGATION", "selector": "SIZE_4"},
    "classical": {"algorithm": "CLASSICAL", "selector": "PMIS", "interpolator": "D2"},
}


def config(name: str, **extra: Any) -> dict[str, Any]:
    return {"solver": "PCG", "tolerance": TOLERANCE, "max_iters": 1000,
            "preconditioner": {"solver": "AMG", **SMOOTHER, **PRECONDITIONERS[name], **extra}}


def jaxsolve_cell(A, b, modes, name: str, block_dim: int) -> str:
    near = modes if name == "SA + modes" else None
    _, info = jsp.solve(A, b, config=config(name), block_dim=block_dim, near_nullspace=near)
    stats = jsp.describe(A, config(name), near_nullspace=near, block_dim=block_dim)
    ok = "" if jsp.Status(int(info.status)) == jsp.Status.SUCCESS else "!"
    return (f"{int(info.iterations):4d}{ok:1s} {len(stats.rows):2d} lv"
            f" {stats.operator_complexity:4.2f}")


def pyamg_cell(A, b, modes) -> str:
    bsr = scipy.sparse.bsr_matrix(A, blocksize=(2, 2))
    solver = pyamg.smoothed_aggregation_solver(bsr, B=modes, max_coarse=64)
    residuals: list[float] = []
    solver.solve(b, tol=TOLERANCE, accel="cg", maxiter=1000, residuals=residuals)
    return (f"{len(residuals) - 1:4d}  {len(solver.levels):2d} lv"
            f" {solver.operator_complexity():4.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128])
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    print(f"2D elasticity, PCG to {TOLERANCE:g}: iterations, levels, operator complexity"
          f" ({jax.default_backend()})")
    header = f"{'n':>4s} {'unknowns':>8s} {'preconditioner':>14s}"
    print(header + f" {'block_dim=1':>18s} {'block_dim=2':>18s}")
    for n in args.sizes:
        bcsr, modes = matrices.elasticity_matrix_2d(n, dtype=np.float64)
        A = scipy.sparse.csr_array((np.asarray(bcsr.data), np.asarray(bcsr.indices),
                                    np.asarray(bcsr.indptr)), shape=bcsr.shape)
        b = np.random.default_rng(0).standard_normal(A.shape[0])
        for name in PRECONDITIONERS:
            cells = [jaxsolve_cell(A, b, modes, name, k) for k in (1, 2)]
            print(f"{n:4d} {A.shape[0]:8d} {name:>14s} {cells[0]:>18s} {cells[1]:>18s}",
                  flush=True)
        print(f"{n:4d} {A.shape[0]:8d} {'PyAMG SA+modes':>14s} {'':>18s}"
              f" {pyamg_cell(A, b, modes):>18s}", flush=True)
    n = args.sizes[len(args.sizes) // 2]
    bcsr, modes = matrices.elasticity_matrix_2d(n, dtype=np.float64)
    b = np.random.default_rng(0).standard_normal(bcsr.shape[0])
    for name in ("SA + modes", "classical"):
        print(f"\nprint_grid_stats: elasticity n={n}, block_dim=2, {name}")
        jsp.solve(bcsr, b, config={**config(name), "print_grid_stats": 1}, block_dim=2,
                  near_nullspace=modes if name == "SA + modes" else None)


if __name__ == "__main__":
    main()
