"""jaxsolve's demo: what the landed packages do, on the best device present.

Run it with `tools/dev demo` (Bazel builds the native libraries first), or on a machine with
the wheels installed, `python tools/demo/demo.py`. On a machine without a GPU it runs on the
CPU, split into 4 virtual devices so that the multi-device layout has a 2 x 2 grid to use.
"""

import os

# Only the CPU platform reads this flag: on a GPU host the GPU stays JAX's default backend.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=4").strip()

import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jaxsolve.autodiff as jad  # noqa: E402
import jaxsolve.layout as jl  # noqa: E402
import jaxsolve.sparse as js  # noqa: E402


def _timed(fn, *args):
    result = jax.block_until_ready(fn(*args))  # compile and warm up
    start = time.perf_counter()
    result = jax.block_until_ready(fn(*args))
    return result, time.perf_counter() - start


def demo_block_cyclic(devices) -> None:
    grid = (2, 2) if len(devices) >= 4 else (1, 1)
    mesh = jax.make_mesh(grid, ("pr", "pc"), devices=devices[: grid[0] * grid[1]])
    n, tile = 1000, 64
    plan = jl.BlockCyclicPlan(m=n, n=n, tile=tile, grid_rows=grid[0], grid_cols=grid[1])
    a = jax.device_put(jax.random.normal(jax.random.key(0), (n, n)),
                       NamedSharding(mesh, P("pr", "pc")))
    storage, seconds = _timed(lambda x: jl.to_block_cyclic(x, plan, mesh, ("pr", "pc")), a)
    back = jl.from_block_cyclic(storage, plan, mesh, ("pr", "pc"))
    # Element (i, j) must sit where ScaLAPACK's definition puts it.
    i, j = 517, 130
    p, q, li, lj = plan.to_local(i, j)
    print(f"block-cyclic: {n}x{n} f32, tile {tile}, grid {grid[0]}x{grid[1]} on "
          f"{mesh.devices.size} {devices[0].platform} device(s): padded to {plan.padded_shape}, "
          f"local {plan.local_shape} per process, lld {plan.lld}; conversion {seconds * 1e3:.1f} ms")
    a_host, storage_host = np.asarray(a), np.asarray(storage)
    print(f"  a[{i},{j}] = {a_host[i, j]:+.6f} is local ({li},{lj}) of process ({p},{q}): "
          f"{storage_host[p, q, lj, li]:+.6f}; round trip exact: "
          f"{bool(np.array_equal(np.asarray(back), a_host))}")


def demo_local_transpose(device) -> None:
    n, tile = (8192, 512) if device.platform == "gpu" else (2048, 256)
    x = jax.device_put(jnp.arange(n * n, dtype=jnp.float32).reshape(n, n), device)
    expected = np.asarray(x).T
    to_column = jax.jit(lambda x: jl.local_row_to_column_major(x, tile=tile), donate_argnums=0)
    to_row = jax.jit(lambda y: jl.local_column_to_row_major(y, tile=tile), donate_argnums=0)
    _, copy_seconds = _timed(jax.jit(jnp.copy), x)
    y = jax.block_until_ready(to_column(x))  # x is donated: its buffer now holds y
    correct = bool(np.array_equal(np.asarray(y), expected))
    x = jax.block_until_ready(to_row(y))
    start = time.perf_counter()
    x = jax.block_until_ready(to_row(to_column(x)))
    seconds = (time.perf_counter() - start) / 2
    print(f"native in-place row->column-major, {n}x{n} f32 on {device.platform}: "
          f"{seconds * 1e3:.2f} ms vs a copy's {copy_seconds * 1e3:.2f} ms; scratch "
          f"{jl.local_scratch_elements((n, n), tile)} elements (the matrix has {n * n}); "
          f"equals x.T: {correct}")


def demo_implicit_gradient() -> None:
    # A nonsymmetric convection-diffusion-like tridiagonal system, as values on its pattern.
    n = 200
    rows = np.concatenate([np.arange(n), np.arange(1, n), np.arange(n - 1)])
    cols = np.concatenate([np.arange(n), np.arange(n - 1), np.arange(1, n)])
    pattern = jad.SparsePattern(rows=rows, cols=cols, shape=(n, n))
    values = jnp.concatenate([jnp.full(n, 2.5), jnp.full(n - 1, -1.4), jnp.full(n - 1, -0.6)])
    b = jnp.sin(jnp.linspace(0.0, 3.0, n))
    solve = lambda v, rhs: jnp.linalg.solve(pattern.todense(v), rhs)  # noqa: E731
    transpose_solve = lambda v, rhs: jnp.linalg.solve(pattern.todense(v).T, rhs)  # noqa: E731

    def loss(values, b):
        x = jad.linear_solve(values, b, matvec=pattern.matvec, solve=solve,
                             transpose_solve=transpose_solve)
        return jnp.sum(x ** 2)

    (value, (values_bar, b_bar)) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(values, b)
    x = solve(values, b)
    adjoint = jnp.linalg.solve(pattern.todense(values).T, 2 * x)  # A^-T dloss/dx
    step = 0.05  # large enough for float32 round-off; the error of a central difference is O(step^2)
    bump = jnp.zeros_like(values).at[n + 7].set(step)
    finite_difference = (loss(values + bump, b) - loss(values - bump, b)) / (2 * step)
    print(f"implicit gradient through a {n}x{n} nonsymmetric solve: loss {float(value):.4f}; "
          f"d/dvalues has shape {values_bar.shape} ({pattern.rows.size} stored values, no "
          f"dense {n}x{n}); |d/db - A^-T g| = {float(jnp.max(jnp.abs(b_bar - adjoint))):.1e}; "
          f"d/dvalues[{n + 7}] = {float(values_bar[n + 7]):.5f} vs central difference "
          f"{float(finite_difference):.5f}")


def demo_krylov() -> None:
    # 2D Poisson, 64 x 64 unknowns; vmap over 4 right-hand sides is one batched loop.
    a = js.as_csr(js.matrices.poisson_matrix(64))
    b = jnp.stack([js.matrices.rhs_ones(64 * 64) * k for k in (1.0, 2.0, 3.0, 4.0)])
    solve = jax.jit(jax.vmap(lambda b: js.cg(a.matvec, b, precondition=js.jacobi(a),
                                             tolerance=1e-5, max_iters=500)))
    x, info = solve(b)
    residual = jnp.linalg.norm(jax.vmap(a.matvec)(x) - b, axis=1) / jnp.linalg.norm(b, axis=1)
    print(f"sparse PCG (Jacobi) on 2D Poisson with {a.shape[0]} unknowns, 4 right-hand sides "
          f"in one loop: status {[js.Status(int(s)).name for s in info.status]}, iterations "
          f"{info.iterations.tolist()} to a recurrence residual of 1e-5; true relative residual "
          f"{residual.max():.1e} at most (float32)")


def main() -> None:
    devices = jax.devices()
    print(f"jaxsolve demo on {devices[0].platform} ({len(devices)} device(s)), jax {jax.__version__}")
    demo_block_cyclic(devices)
    demo_local_transpose(devices[0])
    demo_implicit_gradient()
    demo_krylov()


if __name__ == "__main__":
    main()
