"""Benchmark of jaxsolve.layout's in-place local layout conversion against a plain copy.

Run on a GPU host, with the package directory on the path:

    PYTHONPATH=runtime:layout python tools/bench/layout_transpose.py

For each case it times ``local_row_to_column_major`` and its inverse, jitted with the matrix
donated (so that they work in place), against a device-to-device copy of the same bytes (a
jitted ``jnp.copy``, which writes a new buffer). Times are medians over ``--repeats`` calls
after warm-up, each call waited for with ``block_until_ready``. Bandwidth counts every byte
read once and written once (2 x the matrix), for both. ``ours/copy`` is the copy's time over
ours: 1.0 means as fast as a copy; the square, unpermuted case should reach 0.5 or more.

Memory: per case, the compiled op's temporary allocation next to the declared scratch (XLA's
``memory_analysis``), and, over all cases, the device's peak bytes in use after all the
in-place runs and again after the copies (``memory_stats``, where the backend offers it).
The in-place op should add only its scratch to the largest matrix; the copy, a second matrix.
"""

import argparse
import dataclasses
import functools
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.layout import (
    local_column_to_row_major,
    local_row_to_column_major,
    local_scratch_elements,
)


@dataclasses.dataclass(frozen=True)
class Case:
    rows: int
    cols: int
    dtype: str
    tile: int
    permuted: bool

    @property
    def name(self) -> str:
        perm = " +perm" if self.permuted else ""
        return f"{self.rows}x{self.cols} {self.dtype} T={self.tile}{perm}"

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * np.dtype(self.dtype).itemsize


# Largest first; the square unpermuted cases are the dense solvers' 1 x 1 grid hot path.
CASES = [
    Case(32768, 32768, "float64", 512, False),
    Case(32768, 16384, "float64", 256, True),
    Case(16384, 16384, "float64", 256, True),
    Case(16384, 16384, "complex128", 512, False),
    Case(16384, 16384, "float32", 512, False),
    Case(8192, 8192, "complex64", 512, False),
]


def _iota(case: Case) -> jax.Array:
    shape = (case.rows, case.cols)
    r = jax.lax.broadcasted_iota(case.dtype, shape, 0)
    c = jax.lax.broadcasted_iota(case.dtype, shape, 1)
    return r * case.cols + c


def make_matrix(case: Case) -> jax.Array:
    """A matrix of distinct-ish values, made on the device with no temporary buffer."""
    return jax.jit(functools.partial(_iota, case))()


def is_original(case: Case, x: jax.Array) -> bool:
    """Whether ``x`` is still make_matrix(case), compared without a second matrix."""
    return bool(jax.jit(lambda x: jnp.all(x == _iota(case)))(x))


def tile_permutation(case: Case) -> np.ndarray | None:
    if not case.permuted:
        return None
    grid = (case.rows // case.tile, case.cols // case.tile)
    order = np.random.default_rng(0).permutation(grid[0] * grid[1])
    return np.stack(np.unravel_index(order, grid), -1).reshape(*grid, 2)


def median_seconds(fn, x, repeats: int, warmup: int):
    """Median time of ``x = fn(x)``; returns it with the final ``x``."""
    times = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        x = jax.block_until_ready(fn(x))
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times), x


def peak_bytes(device) -> int | None:
    stats = device.memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--shrink", type=int, default=1,
                        help="divide every matrix dimension by this (a quick smoke run)")
    args = parser.parse_args()
    cases = [dataclasses.replace(c, rows=c.rows // args.shrink, cols=c.cols // args.shrink)
             for c in CASES]
    jax.config.update("jax_enable_x64", True)
    device = jax.devices()[0]
    print(f"device: {device.device_kind} ({device.platform}), jax {jax.__version__}")

    rows = []
    for case in cases:
        perm = tile_permutation(case)
        kwargs = dict(tile=case.tile, tile_permutation=perm)
        forward = jax.jit(functools.partial(local_row_to_column_major, **kwargs), donate_argnums=0)
        inverse = jax.jit(functools.partial(local_column_to_row_major, **kwargs), donate_argnums=0)
        x = make_matrix(case)
        temp = forward.lower(x).compile().memory_analysis().temp_size_in_bytes
        scratch = local_scratch_elements((case.rows, case.cols), case.tile, perm)
        scratch_bytes = scratch * np.dtype(case.dtype).itemsize

        # Alternate the two directions so that every call finds the shape it takes.
        fwd_times, inv_times = [], []
        for i in range(args.warmup + args.repeats):
            start = time.perf_counter()
            y = jax.block_until_ready(forward(x))
            middle = time.perf_counter()
            x = jax.block_until_ready(inverse(y))
            if i >= args.warmup:
                fwd_times.append(middle - start)
                inv_times.append(time.perf_counter() - middle)
        round_trip_ok = is_original(case, x)
        del x, y
        rows.append((case, statistics.median(fwd_times), statistics.median(inv_times), temp,
                     scratch_bytes, round_trip_ok))
    peak_in_place = peak_bytes(device)

    copy = jax.jit(jnp.copy)
    copy_times = {}
    for case in cases:  # no reference kept here: at most the input and output live
        copy_times[case], _ = median_seconds(copy, make_matrix(case), args.repeats, args.warmup)
    peak_with_copy = peak_bytes(device)

    header = (f"{'case':34} {'ours fwd':>9} {'ours inv':>9} {'copy':>9} {'fwd GB/s':>9} "
              f"{'copy GB/s':>9} {'ours/copy':>9} {'temp':>10} {'scratch':>10} {'ok':>3}")
    print(header)
    print("-" * len(header))
    for case, fwd, inv, temp, scratch_bytes, ok in rows:
        moved = 2 * case.nbytes
        copy_time = copy_times[case]
        print(f"{case.name:34} {fwd * 1e3:7.2f}ms {inv * 1e3:7.2f}ms {copy_time * 1e3:7.2f}ms "
              f"{moved / fwd / 1e9:9.0f} {moved / copy_time / 1e9:9.0f} "
              f"{copy_time / fwd:9.2f} {mib(temp):>10} {mib(scratch_bytes):>10} "
              f"{'yes' if ok else 'NO':>3}")
    largest = max(case.nbytes for case in cases)
    print(f"largest matrix: {gib(largest)}")
    if peak_in_place is None:
        print("peak memory: not reported by this backend")
    else:
        print(f"peak bytes in use after the in-place runs: {gib(peak_in_place)}")
        print(f"peak bytes in use after the copies:        {gib(peak_with_copy)}")


if __name__ == "__main__":
    main()
