"""CSR SpMV ``y = A x`` on the default JAX device: jaxsolve's native kernel against the others.

The matrix is the 7-point Poisson matrix on an ``n × n × n`` grid, built with SciPy as a
Kronecker sum (``n`` from the command line; by default 128 on a GPU, 2.1 M rows and 14.6 M
nonzeros, and 64 on a CPU), in f64 and in f32, with ``x`` standard normal. Each row times one
way of computing ``A x``, jitted, with the matrix's arrays as arguments (not constants):

* **BCOO**: ``jax.experimental.sparse.BCOO @ x``;
* **BCSR**: ``jax.experimental.sparse.BCSR @ x``;
* **segment_sum**: ``x`` gathered at the column indices, times the values, summed per row by
  ``jax.ops.segment_sum(..., indices_are_sorted=True)``;
* **jaxsolve**: ``jaxsolve.sparse.csr_matvec``, the native FFI kernel;
* **CuPy**: ``cupyx.scipy.sparse.csr_matrix @ x`` (cuSPARSE), when CuPy imports and the device
  is a GPU.

Two times per product, medians after ``--warmup`` calls. **call**: ``--repeats`` calls (at
least 50), each timed with ``time.perf_counter`` around the call and its
``block_until_ready`` (CuPy: a device synchronize), so it includes what the host spends
launching one product (JAX's dispatch, CuPy's cuSPARSE descriptors). **in flight**: 5 times a
batch of ``--repeats`` calls issued back to back and synchronized once, over the batch's size:
the host launches the next products while the device computes, so this is the device's time
per product, which is what a product costs inside a compiled solver loop. Effective bandwidth counts what a CSR SpMV must move at least once:
``nnz · (value + 4) + 4 · (n_rows + 1) + 2 · value · n_rows`` bytes (values, int32 column
indices and row pointers, x read and y written). ``speed-up`` is the reference's time over the
row's (above 1: faster than the reference), the reference being CuPy where it ran, else BCOO.
Every result is checked against SciPy's product before it is timed.

Run it with Bazel on a build machine (``tools/dev bench sparse_spmv [N]``), or on the GPU host,
which has no Bazel, with the wheels of ``tools/dev gpu-pack`` installed::

    site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --target "$site" .gpu/wheels/*.whl
    PYTHONPATH="$site" python3 tools/bench/sparse_spmv.py 128
"""

import argparse
import dataclasses
import functools
import statistics
import time
from collections.abc import Callable

import jax
import numpy as np
import scipy.sparse
from jax.experimental import sparse as jsparse

from jaxsolve.sparse import csr_matvec

jax.config.update("jax_enable_x64", True)


def poisson_3d(n: int) -> scipy.sparse.csr_matrix:
    """The 7-point Laplacian on an ``n³`` grid: a Kronecker sum of the 1D one, sorted CSR."""
    line = scipy.sparse.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    eye = scipy.sparse.identity(n)
    matrix = (scipy.sparse.kron(scipy.sparse.kron(line, eye), eye)
              + scipy.sparse.kron(scipy.sparse.kron(eye, line), eye)
              + scipy.sparse.kron(scipy.sparse.kron(eye, eye), line)).tocsr()
    matrix.sort_indices()
    matrix.indices, matrix.indptr = matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32)
    return matrix


def median_seconds(run: Callable[[], object], sync: Callable[[object], object], warmup: int,
                   repeats: int, batch: int = 1) -> float:
    """The median time of ``repeats`` batches of ``batch`` calls synchronized once, per call."""
    for _ in range(warmup):
        sync(run())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch - 1):
            run()
        sync(run())
        times.append((time.perf_counter() - start) / batch)
    return statistics.median(times)


@dataclasses.dataclass(frozen=True)
class Product:
    """One way of computing ``A x``, for arrays in its own framework."""

    call: Callable[[object], object]
    sync: Callable[[object], object]
    to_device: Callable[[np.ndarray], object]
    to_host: Callable[[object], np.ndarray]


def jax_products(matrix: scipy.sparse.csr_matrix, device) -> dict[str, Product]:
    """The JAX ways of computing ``A x``, each a jitted call on arrays already on ``device``."""
    n_rows = matrix.shape[0]
    put = functools.partial(jax.device_put, device=device)
    bcoo, bcsr = (put(f(matrix)) for f in (jsparse.BCOO.from_scipy_sparse,
                                            jsparse.BCSR.from_scipy_sparse))
    values, indices, indptr = put(matrix.data), put(matrix.indices), put(matrix.indptr)
    rows = put(np.repeat(np.arange(n_rows, dtype=np.int32), np.diff(matrix.indptr)))

    def segment_sum(values, indices, rows, x):
        return jax.ops.segment_sum(values * x[indices], rows, num_segments=n_rows,
                                   indices_are_sorted=True)

    def native(values, indices, indptr, x):
        return csr_matvec(values, indices, indptr, x, n_rows=n_rows)

    matmul, segment_sum, native = (jax.jit(f) for f in (lambda m, x: m @ x, segment_sum, native))
    calls = {
        "BCOO": lambda x: matmul(bcoo, x),
        "BCSR": lambda x: matmul(bcsr, x),
        "segment_sum": lambda x: segment_sum(values, indices, rows, x),
        "jaxsolve": lambda x: native(values, indices, indptr, x),
    }
    return {name: Product(call, jax.block_until_ready, put, np.asarray)
            for name, call in calls.items()}


def cupy_product(matrix: scipy.sparse.csr_matrix, device) -> Product | str:
    """CuPy's CSR product (cuSPARSE) on ``device``, or why it does not run."""
    if device.platform != "gpu":
        return "not a GPU"
    try:
        import cupy
        import cupyx.scipy.sparse
    except ImportError as error:
        return f"no CuPy ({error})"
    gpu = cupy.cuda.Device(device.local_hardware_id or 0)
    with gpu:
        on_gpu = cupyx.scipy.sparse.csr_matrix(matrix)

    def to_device(x):
        with gpu:
            return cupy.asarray(x)

    return Product(lambda x: on_gpu @ x, lambda _: gpu.synchronize(), to_device,
                   lambda y: y.get())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", help="grid side (default 128 GPU, 64 CPU)")
    parser.add_argument("--repeats", type=int, default=100, help="timed calls (at least 50)")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    device = jax.devices()[0]
    n = args.n or (128 if device.platform == "gpu" else 64)
    repeats = max(args.repeats, 50)

    matrix64 = poisson_3d(n)
    n_rows, nnz = matrix64.shape[0], matrix64.nnz
    print(f"3D Poisson {n}^3: {n_rows} rows, {nnz} nonzeros, on {device.device_kind} "
          f"({device.platform}); medians of {repeats} calls after {args.warmup}")
    x_host = np.random.default_rng(0).standard_normal(n_rows)

    # method -> (dtype, "call" or "in flight") -> seconds
    results: dict[str, dict[tuple[str, str], float]] = {}
    skipped = None
    for dtype in (np.float64, np.float32):
        matrix = matrix64.astype(dtype)
        x = x_host.astype(dtype)
        expected = matrix @ x
        tolerance = 1e-12 if dtype == np.float64 else 1e-4
        products = jax_products(matrix, device)
        cupy = cupy_product(matrix, device)
        if isinstance(cupy, str):
            skipped = cupy
        else:
            products["CuPy"] = cupy
        for name, product in products.items():
            x_on = product.to_device(x)
            np.testing.assert_allclose(product.to_host(product.call(x_on)), expected,
                                       rtol=tolerance, atol=tolerance * 10,
                                       err_msg=f"{name} {np.dtype(dtype).name}")
            times = results.setdefault(name, {})
            times[np.dtype(dtype).name, "call"] = median_seconds(
                lambda: product.call(x_on), product.sync, args.warmup, repeats)
            times[np.dtype(dtype).name, "in flight"] = median_seconds(
                lambda: product.call(x_on), product.sync, args.warmup, 5, batch=repeats)

    reference = "CuPy" if "CuPy" in results else "BCOO"
    columns = [(dtype, way) for dtype in ("float64", "float32") for way in ("call", "in flight")]
    header = f"{'method':<12}"
    for dtype, way in columns:
        header += f" | {'f' + dtype[-2:] + ' ' + way + ' µs':>16} {'GB/s':>6} {'speed-up':>8}"
    print(header)
    print("-" * len(header))
    for name, times in results.items():
        line = f"{name:<12}"
        for dtype, way in columns:
            value = np.dtype(dtype).itemsize
            moved = nnz * (value + 4) + 4 * (n_rows + 1) + 2 * value * n_rows
            seconds = times[dtype, way]
            line += (f" | {seconds * 1e6:>16.1f} {moved / seconds / 1e9:>6.0f} "
                     f"{results[reference][dtype, way] / seconds:>7.2f}x")
        print(line)
    print(f"speed-up: {reference}'s time over the row's"
          + (f"; CuPy did not run: {skipped}" if skipped else ""))


if __name__ == "__main__":
    main()
