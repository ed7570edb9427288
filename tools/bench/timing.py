"""Wall-clock timing shared by the benchmarks."""

import time
from collections.abc import Callable
from typing import Any

import jax


def smallest_time(fn: Callable[[], Any], repeats: int = 2) -> tuple[float, Any]:
    """The smallest time of ``repeats`` calls of ``fn`` after one warm-up call, and the
    result of the last call; each call's outputs are waited for (``block_until_ready``).

    The warm-up absorbs compilation and first-use setup; the minimum is the least disturbed
    run, the usual choice for a benchmark on a shared machine.
    """
    result = jax.block_until_ready(fn())
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best, result
