"""The multicolor smoothers: PCG iterations, time per solve and colors per AMG level.

For 2D Poisson (5-point, ``--n2d``², 64² by default) and 3D Poisson (7-point, ``--n3d``³,
20³), ``b`` all ones, f64, preconditioned CG to ``‖b − A x‖ ≤ 1e-8 ‖b‖`` with

* AMG (the default classical V-cycle) smoothed by symmetric ``MULTICOLOR_GS`` or by
  ``MULTICOLOR_DILU`` (``ω = 1``), or by damped Jacobi (``BLOCK_JACOBI``, ``ω = 0.9``) for
  comparison;
* the smoothers alone as the preconditioner (one sweep per application).

Columns: PCG iterations; time per solve — a ``solve`` with the structure cached and the
numbers set up from the concrete values (*setup + solve*, the smallest of ``--repeats``
calls after a warm-up that compiles) and with ``reuse_setup=True`` (*solve*); and the
distance-1 colors of each level (finest first) from the structure's orderings.

    tools/dev bench sparse_multicolor
    tools/dev bench sparse_multicolor --n2d 128 --n3d 32
"""

from __future__ import annotations

import argparse
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

import jaxsolve.sparse as jsp
from timing import smallest_time

GS = {"solver": "MULTICOLOR_GS", "symmetric_GS": 1, "relaxation_factor": 1.0}
DILU = {"solver": "MULTICOLOR_DILU", "relaxation_factor": 1.0}
JACOBI = {"solver": "BLOCK_JACOBI", "relaxation_factor": 0.9}
PRECONDITIONERS = {
    "AMG + sym. MC-GS": {"solver": "AMG", "smoother": GS},
    "AMG + MC-DILU": {"solver": "AMG", "smoother": DILU},
    "AMG + Jacobi": {"solver": "AMG", "smoother": JACOBI},
    "sym. MC-GS alone": GS,
    "MC-DILU alone": DILU,
    "Jacobi alone": JACOBI,
}


def colors_per_level(A: jsp.CsrMatrix, config: dict[str, Any]) -> str:
    """The multicolor orderings' colors, finest level first (``describe``'s), or, for a
    smoother alone, the distance-1 coloring of ``A`` it orders by."""
    preconditioner = config["preconditioner"]
    if preconditioner["solver"] == "AMG":
        colors = [c for c in jsp.describe(A, preconditioner).colors if c]
        return " ".join(map(str, colors)) or "–"
    if not preconditioner["solver"].startswith("MULTICOLOR"):
        return "–"
    pattern = scipy.sparse.csr_array(
        (np.ones(A.nnz, bool), np.asarray(A.indices), np.asarray(A.indptr)), shape=A.shape)
    return str(int(jsp.color_columns(pattern, distance=1).max()) + 1)


def table(name: str, A: jsp.CsrMatrix, repeats: int) -> None:
    b = jnp.ones(A.shape[0], A.dtype)
    print(f"\n{name}: n = {A.shape[0]:,}, nnz = {A.nnz:,}, on "
          f"{jax.devices()[0].platform.upper()}")
    print(f"{'preconditioner':<20}{'iterations':>11}{'setup + solve':>15}{'solve':>9}"
          f"   colors per level")
    for label, preconditioner in PRECONDITIONERS.items():
        config = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 2000,
                  "preconditioner": preconditioner}
        total, (x, info) = smallest_time(lambda: jsp.solve(A, b, config=config), repeats)
        solve, _ = smallest_time(
            lambda: jsp.solve(A, b, config=config, reuse_setup=True), repeats)
        assert int(info.status) == 0, (label, info)
        print(f"{label:<20}{int(info.iterations):>11}{total * 1e3:>12.1f} ms"
              f"{solve * 1e3:>6.1f} ms   {colors_per_level(A, config)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n2d", type=int, default=64)
    parser.add_argument("--n3d", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    matrices = jsp.matrices
    table(f"2D Poisson {args.n2d}²",
          jsp.as_csr(matrices.poisson_matrix(args.n2d, dtype=jnp.float64)), args.repeats)
    table(f"3D Poisson {args.n3d}³",
          jsp.as_csr(matrices.poisson3d_matrix(args.n3d, dtype=jnp.float64)), args.repeats)


if __name__ == "__main__":
    main()
