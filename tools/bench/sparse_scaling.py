"""Sharded sparse solves on the devices present: weak and strong scaling, solve and gradient.

Issue 37's benchmark. ``jaxsolve.sparse.solve`` on the 7-point 3D Poisson matrix split in
blocks of rows over ``P = 1, 2, 4, …`` devices of this process (``jaxsolve.sharding.row_mesh``
of the first ``P`` of ``jax.devices()``, ``jaxsolve.sharding.shard_rows``; halo exchange by
``ppermute``, NCCL on GPUs), PCG with the sharded AMG preconditioner, float32, tolerance 1e-6
relative to ``‖b‖``, ``b`` from ``rhs_random``:

* **weak scaling**: ``n³`` rows per device (``--n``, default 128 on a GPU), the grid
  ``(n P) × n × n``, so that each device holds an ``n × n × n`` slab and exchanges two
  ``n × n`` faces;
* **strong scaling**: one ``m³`` grid (``--m``, default 256 on a GPU) on every ``P``.

Columns: **its**, the iterations, and **its/1** over those on one device; **first s**, the
first call end to end (host setup of the hierarchy's structure, compilation, numeric setup,
solve); **setup s**, the numeric setup of new values on the same pattern (a solve with new
values, less a solve that reuses the setup); **solve s**, a solve that reuses the setup
(``reuse_setup=True``); **eff**, the parallel efficiency of the solve, ``t₁ / t_P`` for weak
scaling and ``t₁ / (P t_P)`` for strong; **grad s** and **grad eff**, the same for the
gradient of ``sum(w * x)`` with respect to ``A``'s values and ``b`` under ``jax.jit`` (the
numeric setup, the solve, and the adjoint solve); **KiB/it**, the bytes one device exchanges
per iteration as the exchange plans count them
(``jaxsolve.sparse.communication_per_iteration``: halo messages with their padding, and the
reductions' payloads), and **halo/mv** the halo of one product. Times are medians of
``--repeats`` calls after the first. ``--budget SECONDS`` starts no new row after that long.

On a CPU this is a smoke run on virtual devices (the script asks for 8 when JAX has not
started: ``XLA_FLAGS=--xla_force_host_platform_device_count=8``); the times then are not
scaling. On the GPU host::

    tools/dev gpu-run python3 tools/bench/sparse_scaling.py --budget 400
    tools/dev gpu-run python3 tools/bench/sparse_scaling.py --mode weak --n 64 128
"""

from __future__ import annotations

import os

if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(filter(None, [
        os.environ.get("XLA_FLAGS"), "--xla_force_host_platform_device_count=8"]))

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxsolve import sharding, sparse  # noqa: E402
from jaxsolve.sparse import matrices  # noqa: E402

CONFIG = {"solver": "PCG", "tolerance": 1e-6, "max_iters": 500,
          "preconditioner": {"solver": "AMG"}}


def device_counts(available: int) -> list[int]:
    """1, 2, 4, … up to `available`, and `available` itself."""
    counts = [1 << k for k in range(available.bit_length()) if 1 << k <= available]
    return counts if counts[-1] == available else [*counts, available]


def poisson(nx: int, n: int):
    """The 3D Poisson matrix of an ``nx × n × n`` grid (rows split along ``nx``)."""
    A, _, _ = matrices.poisson3d_matrix_distributed(nx, n, n, 0, 1)
    return A


@dataclasses.dataclass
class Row:
    """One line of a table: the measurements at one device count."""

    devices: int
    rows: int
    iterations: int
    status: str
    first: float
    setup: float
    solve: float
    grad: float | None
    exchanged: int
    halo_per_matvec: int


def _median(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def measure(A, devices: list, repeats: int, grad: bool) -> Row:
    """Shards `A` over `devices` and times its first call, setup, solve and gradient."""
    A_sharded = sharding.shard_rows(A, sharding.row_mesh(devices=devices))
    rows = A_sharded.shape[0]
    b = jax.device_put(matrices.rhs_random(rows, seed=1), A_sharded.sharding)
    start = time.perf_counter()
    _, info = jax.block_until_ready(sparse.solve(A_sharded, b, config=CONFIG))
    first = time.perf_counter() - start
    status = sparse.Status(int(info.status)).name
    solve, (_, info) = _median(
        lambda: sparse.solve(A_sharded, b, config=CONFIG, reuse_setup=True), repeats)
    scaled = jax.block_until_ready(
        [A_sharded.values * (1 + 0.01 * k) for k in range(1, repeats + 1)])
    scaled = iter(scaled)  # new values for each call: each sets up anew
    resetup, _ = _median(
        lambda: sparse.solve(A_sharded.with_values(next(scaled)), b, config=CONFIG), repeats)
    seconds_grad = None
    if grad:
        weights = jax.device_put(jnp.cos(jnp.arange(rows, dtype=jnp.float32)),
                                 A_sharded.sharding)

        def loss(values, A, b, weights):
            x, _ = sparse.solve(A.with_values(values), b, config=CONFIG)
            return jnp.sum(weights * x)

        # The matrix and vectors are arguments of the program, not constants baked into it.
        gradient = jax.jit(lambda A, b, weights: jax.grad(loss, argnums=(0, 2))(
            A.values, A, b, weights))
        jax.block_until_ready(gradient(A_sharded, b, weights))  # compiles
        seconds_grad, _ = _median(lambda: gradient(A_sharded, b, weights), repeats)
    counts = sparse.communication_per_iteration(A_sharded, CONFIG)
    return Row(len(devices), rows, int(info.iterations), status, first,
               max(resetup - solve, 0.0), solve, seconds_grad, counts["total"],
               A_sharded.bytes_per_matvec()["sent"])


def table(kind: str, rows: list[Row]) -> list[str]:
    """The lines of a weak (``t₁ / t_P``) or strong (``t₁ / (P t_P)``) scaling table."""
    base = rows[0]

    def efficiency(t1: float | None, tp: float | None, devices: int) -> str:
        if t1 is None or tp is None or base.devices != 1:
            return "-"
        return f"{t1 / tp / (devices if kind == 'strong' else 1):.2f}"

    lines = [f"{'devices':>7} {'rows':>10} {'its':>4} {'its/1':>6} {'first s':>8} {'setup s':>8}"
             f" {'solve s':>8} {'eff':>5} {'grad s':>8} {'grad eff':>8} {'KiB/it':>8}"
             f" {'halo/mv':>8}"]
    for row in rows:
        grad = "-" if row.grad is None else f"{row.grad:.4f}"
        lines.append(
            f"{row.devices:>7} {row.rows:>10} {row.iterations:>4}"
            f" {row.iterations / base.iterations:>6.2f} {row.first:>8.2f} {row.setup:>8.4f}"
            f" {row.solve:>8.4f} {efficiency(base.solve, row.solve, row.devices):>5}"
            f" {grad:>8} {efficiency(base.grad, row.grad, row.devices):>8}"
            f" {row.exchanged / 1024:>8.1f} {row.halo_per_matvec / 1024:>8.1f}"
            + ("" if row.status == "SUCCESS" else f"  {row.status}!"))
    return lines


def main(argv: list[str] | None = None) -> None:
    on_gpu = jax.default_backend() == "gpu"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", nargs="+", choices=("weak", "strong"),
                        default=["weak", "strong"])
    parser.add_argument("--n", type=int, nargs="+", default=[128 if on_gpu else 8],
                        help="weak scaling: grid side per device (n³ rows each)")
    parser.add_argument("--m", type=int, nargs="+", default=[256 if on_gpu else 16],
                        help="strong scaling: global grid side (m³ rows)")
    parser.add_argument("--devices", type=int, nargs="+",
                        help="device counts (default 1, 2, 4, … up to all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-grad", dest="grad", action="store_false",
                        help="leave out the gradient columns")
    parser.add_argument("--budget", type=float, help="seconds after which no row starts")
    args = parser.parse_args(argv)
    deadline = None if args.budget is None else time.monotonic() + args.budget
    devices = jax.devices()
    counts = args.devices or device_counts(len(devices))
    if max(counts) > len(devices):
        parser.error(f"--devices {max(counts)}: only {len(devices)} devices here")
    print(f"{len(devices)} x {devices[0].device_kind} ({devices[0].platform}), JAX "
          f"{jax.__version__}; PCG + sharded AMG, float32, tolerance 1e-6; median of "
          f"{args.repeats}" + ("" if on_gpu else "; virtual CPU devices: times are not scaling"))
    skipped = 0
    cases = [("weak", n) for n in args.n if "weak" in args.mode]
    cases += [("strong", m) for m in args.m if "strong" in args.mode]
    for kind, side in cases:
        if kind == "weak":
            print(f"\nweak scaling: {side}³ rows per device, grid ({side} P) × {side} × {side}")
        else:
            print(f"\nstrong scaling: grid {side}³ ({side ** 3} rows)")
        rows = []
        for count in counts:
            if deadline is not None and time.monotonic() > deadline:
                skipped += 1
                continue
            A = poisson(side * count, side) if kind == "weak" else poisson(side, side)
            rows.append(measure(A, devices[:count], args.repeats, args.grad))
            print("\n".join(table(kind, rows)[-1:] if len(rows) > 1 else table(kind, rows)),
                  flush=True)
    if skipped:
        print(f"\n{skipped} rows skipped: --budget {args.budget:.0f} s was spent")


if __name__ == "__main__":
    main()
