"""What one trip of a compiled loop costs per kernel it holds: an FFI SpMV call against XLA's own.

A Krylov solve is a ``lax.while_loop``. On a GPU, XLA records the loop body as a CUDA graph,
and the host launches that graph once per trip, after the loop's predicate comes back.
XLA records an XLA fusion as a kernel node of the graph. It records an FFI custom call, such
as jaxsolve's CSR SpMV, by stream capture into a child graph. On the H200, the 128³ AMG-PCG
solve's loop body (13 SpMV calls among about 32 nodes) took 57 µs of host time per trip to
launch, while the GPU waited. This benchmark puts a number on one such node.

Each row times a loop of ``--trips`` trips whose body is ``k`` dependent steps, each one kernel
on a vector of ``--rows`` entries (small, so that the launch, not the arithmetic, dominates):

* **fusion**: ``x ↦ sin(x) / 2 + j``, one XLA fusion per step (kept apart by an optimization
  barrier);
* **segment_sum SpMV**: ``y = A x`` in XLA (gather, multiply, sorted segment sum) for a random
  sparse ``A`` with about 5 entries a row;
* **jaxsolve SpMV**: the same product by jaxsolve's native FFI kernel (``A @ x`` of a
  ``jaxsolve.sparse.CsrMatrix``, whose checks run at trace time, not in the loop).

Columns: µs per trip, the smallest of ``--repeats`` calls after one warm-up (``timing.py``),
and the FFI row over the fusion row. A rise of the FFI column over the others with ``k`` is what each FFI node adds
to every trip. It includes the tiny kernel's own time, so compare it with the segment-sum row,
which does the same arithmetic as XLA nodes.

What it found on the H200 (JAX 0.11.2): an FFI node costs the launch no more than a fusion.
Under a profiler, the host's ``cuGraphLaunch`` of a trip took 62 µs for 32 fusions, 58 µs for
32 FFI calls of a one-kernel handler that does no arithmetic to speak of, and 73 µs for 32
jaxsolve SpMV calls, about 2 µs a node whatever its kind; the SpMV row's larger time per trip
is its kernel's own run time. Fewer nodes per trip, not fewer FFI calls, shorten the launch.

On a build machine: ``tools/dev bench sparse_loop_launch``. On the GPU host, with the wheels of
``tools/dev gpu-pack`` installed: ``PYTHONPATH="$site" python3 tools/bench/sparse_loop_launch.py``.
"""

import argparse
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

import jaxsolve.sparse as jsp
from timing import smallest_time


def random_matrix(rows: int, seed: int = 0) -> scipy.sparse.csr_matrix:
    """A random ``rows × rows`` CSR matrix, about 5 entries a row, with its diagonal."""
    a = scipy.sparse.random(rows, rows, density=4 / rows, format="csr", random_state=seed,
                            dtype=np.float32)
    a = (a + scipy.sparse.eye(rows, dtype=np.float32)).tocsr()
    a.sort_indices()
    return a


def steps(a: scipy.sparse.csr_matrix) -> dict[str, Callable[[jax.Array, int], jax.Array]]:
    """Each row's step ``(x, j) ↦ x'``: one kernel on the GPU."""
    values = jnp.asarray(a.data)
    indices = np.asarray(a.indices, np.int32)
    rows = np.repeat(np.arange(a.shape[0], dtype=np.int32), np.diff(a.indptr))
    matrix = jsp.as_csr(a)

    def fusion(x, j):
        return jax.lax.optimization_barrier(jnp.sin(x) * 0.5 + j)

    def segment_sum(x, j):
        return jax.ops.segment_sum(values * x[indices], rows, num_segments=a.shape[0],
                                   indices_are_sorted=True) * 0.5

    def native(x, j):
        return (matrix @ x) * 0.5

    return {"fusion": fusion, "segment_sum SpMV": segment_sum, "jaxsolve SpMV": native}


def per_trip(step: Callable[[jax.Array, int], jax.Array], k: int, rows: int, trips: int,
             repeats: int) -> float:
    """µs per trip of a ``while_loop`` of ``trips`` trips of ``k`` steps (its smallest time)."""
    def body(state):
        i, x = state
        for j in range(k):
            x = step(x, j)
        return i + 1, x

    loop = jax.jit(lambda x: jax.lax.while_loop(lambda s: s[0] < trips, body, (0, x))[1])
    x = jnp.ones(rows, jnp.float32)
    seconds, _ = smallest_time(lambda: loop(x), repeats)
    return seconds / trips * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--trips", type=int, default=200)
    parser.add_argument("--kernels", type=int, nargs="+", default=[1, 8, 16, 32],
                        help="the k values: kernels per trip")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    device = jax.devices()[0]
    print(f"device: {device.device_kind} ({device.platform}), jax {jax.__version__}; "
          f"{args.rows} rows, {args.trips} trips, smallest of {args.repeats}")
    named = steps(random_matrix(args.rows))
    x = jnp.linspace(-1, 1, args.rows, dtype=jnp.float32)
    np.testing.assert_allclose(named["jaxsolve SpMV"](x, 0), named["segment_sum SpMV"](x, 0),
                               rtol=1e-5, atol=1e-6)  # the two SpMVs compute the same product
    print(f"{'k':>4}" + "".join(f"{name + ' µs':>22}" for name in named) + f"{'FFI / fusion':>15}")
    for k in args.kernels:
        times = {name: per_trip(step, k, args.rows, args.trips, args.repeats)
                 for name, step in named.items()}
        print(f"{k:>4}" + "".join(f"{t:>22.1f}" for t in times.values())
              + f"{times['jaxsolve SpMV'] / times['fusion']:>15.2f}", flush=True)


if __name__ == "__main__":
    main()
