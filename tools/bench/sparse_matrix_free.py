"""Matrix-free operators: colors per stencil, and the cost of recovering a 3D operator's matrix.

The benchmark of issue 5's acceptance, in two tables.

**Colors.** For the 5-point and 9-point 2D stencils and the 7-point and 27-point 3D
stencils, each written as a matrix-free JAX function (zero-padded slices) on a
``--grid2d``² / ``--grid3d``³ grid, the number of colors (= operator evaluations per
materialization) of ``jaxsolve.sparse.cache_coloring``'s distance-2 coloring, next to the
optimum (the stencil's size) and the issue's target, and the distance-1 colors of
``color_columns(..., distance=1)`` (the multicolor smoothers' independent sets; optimum 2,
4, 2 and 8). JAX-AMG's Jones–Plassmann coloring, measured on the 5-point stencil on a 64²
grid (``shared/reference/peers.md`` §2.4), gives 17; it is printed beside ours, not rerun.

**Timing.** For the 7-point 3D operator on an ``--n``³ grid (128 by default: 2,097,152
unknowns), on the CPU: sparsity tracing (``trace_sparsity``: the jaxpr interpretation and
its check by random probes), distance-2 coloring (``color_columns``), and materialization
(``jaxsolve.sparse.sparsity.materialize_sparse_matrix``: one operator evaluation per color
under ``jax.vmap`` and the gather of the CSR values, jitted; *first* includes compilation, *again* is the median of ``--repeats`` later calls),
each with ``time.perf_counter`` around ``jax.block_until_ready``. ``cache_coloring`` runs
tracing and coloring and checks the recovered matrix once more; its total is printed too.

Run: ``python tools/bench/sparse_matrix_free.py [--n 128] [--repeats 3]`` (set
``JAX_PLATFORMS=cpu`` on a machine with a GPU to time the CPU).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve import sparse
from jaxsolve.sparse.sparsity import materialize_sparse_matrix

JAX_AMG_5_POINT = 17


def stencil_operator(shape: tuple[int, ...], offsets: list[tuple[int, ...]]):
    """``x ↦ A x`` for the stencil with these offsets (weights: -1, and the center's count)."""
    def matvec(x):
        u = jnp.pad(x.reshape(shape), 1)
        center = tuple(slice(1, -1) for _ in shape)
        y = len(offsets) * u[center]
        for offset in offsets:
            if any(offset):
                y = y - u[tuple(slice(1 + o, s + 1 + o) for o, s in zip(offset, shape))]
        return y.ravel()
    return matvec


def offsets(dimensions: int, box: bool) -> list[tuple[int, ...]]:
    axes = np.meshgrid(*[[-1, 0, 1]] * dimensions, indexing="ij")
    grid = np.stack(axes, -1).reshape(-1, dimensions)
    if not box:
        grid = grid[np.abs(grid).sum(axis=1) <= 1]
    return [tuple(int(v) for v in row) for row in grid]


def colors_table(grid2d: int, grid3d: int) -> None:
    rows = [("5-point 2D", (grid2d,) * 2, offsets(2, False), 5, 6, 2),
            ("9-point 2D", (grid2d,) * 2, offsets(2, True), 9, 10, 4),
            ("7-point 3D", (grid3d,) * 3, offsets(3, False), 7, 12, 2),
            ("27-point 3D", (grid3d,) * 3, offsets(3, True), 27, 30, 8)]
    print(f"Distance-2 colors (native DSATUR); grids {grid2d}² and {grid3d}³")
    print(f"{'stencil':<13}{'optimum':>8}{'target':>8}{'ours':>6}{'JAX-AMG':>9}"
          f"{'distance-1':>12}{'(optimum)':>10}")
    for name, shape, offs, optimum, target, optimum_1 in rows:
        n = int(np.prod(shape))
        info = sparse.cache_coloring(stencil_operator(shape, offs), n)
        pattern = sparse.trace_sparsity(stencil_operator(shape, offs), n)
        distance_1 = int(sparse.color_columns(pattern, distance=1).max()) + 1
        jax_amg = str(JAX_AMG_5_POINT) if name.startswith("5-point") else "–"
        print(f"{name:<13}{optimum:>8}{'≤ ' + str(target):>8}{info.n_colors:>6}{jax_amg:>9}"
              f"{distance_1:>12}{optimum_1:>10}")


def timed(fn, *args):
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - start


def timing_table(n: int, repeats: int) -> None:
    shape = (n,) * 3
    size = n ** 3
    operator = stencil_operator(shape, offsets(3, False))
    dtype = np.dtype(jnp.result_type(float))
    print(f"\n7-point 3D operator, {n}³ = {size:,} unknowns, {dtype}, on"
          f" {jax.devices()[0].platform.upper()} ({jax.devices()[0].device_kind})")
    pattern, trace_s = timed(lambda: sparse.trace_sparsity(operator, size, dtype))
    colors, color_s = timed(lambda: sparse.color_columns(pattern))
    coo, n_colors = pattern.tocoo(), int(colors.max()) + 1
    materialize = jax.jit(lambda: materialize_sparse_matrix(
        operator, (size, size), coo.row, coo.col, colors, n_colors).data)
    _, first_s = timed(materialize)
    again = [timed(materialize)[1] for _ in range(repeats)]
    sparse.finalize()  # empties cache_coloring's cache (and the AMG setups')
    _, cache_s = timed(lambda: sparse.cache_coloring(operator, size))
    print(f"{'step':<38}{'seconds':>9}")
    print(f"{'trace_sparsity (incl. probe check)':<38}{trace_s:>9.2f}   nnz {pattern.nnz:,}")
    print(f"{'color_columns (distance 2)':<38}{color_s:>9.2f}   {n_colors} colors")
    print(f"{'materialize, first (compiles)':<38}{first_s:>9.2f}")
    print(f"{'materialize, again (median)':<38}{statistics.median(again):>9.2f}")
    print(f"{'total: trace + color + materialize':<38}"
          f"{trace_s + color_s + statistics.median(again):>9.2f}")
    print(f"{'cache_coloring (trace, color, check)':<38}{cache_s:>9.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=128, help="grid side of the 3D timing")
    parser.add_argument("--grid2d", type=int, default=32)
    parser.add_argument("--grid3d", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    colors_table(args.grid2d, args.grid3d)
    timing_table(args.n, args.repeats)


if __name__ == "__main__":
    main()
