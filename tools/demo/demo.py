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
import jaxsolve.dense as jd  # noqa: E402
import jaxsolve.layout as jl  # noqa: E402
import jaxsolve.sharding as jsh  # noqa: E402
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


def demo_amg() -> None:
    # 2D Poisson, 128 x 128 unknowns: AMG-preconditioned BiCGSTAB against plain BiCGSTAB,
    # then the gradient of a loss with respect to the matrix's values, inside jax.jit.
    n = 128
    a = js.as_csr(js.matrices.poisson_matrix(n))
    b = js.matrices.rhs_random(n * n, seed=0)
    start = time.perf_counter()
    x, info = js.solve(a, b)
    first = time.perf_counter() - start
    _, plain = js.solve(a, b, config={"solver": "BICGSTAB"})
    residual = jnp.linalg.norm(a @ x - b) / jnp.linalg.norm(b)
    print(f"AMG solve of 2D Poisson with {n * n} unknowns: {js.Status(int(info.status)).name} "
          f"in {int(info.iterations)} iterations (plain BiCGSTAB: {int(plain.iterations)}), "
          f"true relative residual {float(residual):.1e}; first call {first:.1f} s "
          "(setup and compilation)")
    print(js.describe(a))

    # The gradient of a loss through the solve, with respect to b and to A's stored values,
    # inside jax.jit, checked against the dense solve's gradient on a 32 x 32 grid.
    n = 32
    a = js.as_csr(js.matrices.convection_diffusion_matrix_2d(n, peclet=10.0))
    b = js.matrices.rhs_random(n * n, seed=1)
    weights = jnp.sin(jnp.arange(n * n) / 10.0)

    def loss(values, b):
        return weights @ js.solve(a.with_values(values), b, config={"tolerance": 1e-7})[0]

    def dense_loss(values, b):
        matrix = jnp.zeros((n * n, n * n)).at[a.row_ids, a.indices].add(values)
        return weights @ jnp.linalg.solve(matrix, b)

    gradient = jax.jit(jax.grad(loss, argnums=(0, 1)))
    (values_bar, b_bar), seconds = _timed(gradient, a.values, b)
    dense_values_bar, dense_b_bar = jax.grad(dense_loss, argnums=(0, 1))(a.values, b)
    error = max(float(jnp.max(jnp.abs(values_bar - dense_values_bar)) /
                      jnp.max(jnp.abs(dense_values_bar))),
                float(jnp.max(jnp.abs(b_bar - dense_b_bar)) / jnp.max(jnp.abs(dense_b_bar))))
    print(f"jit(grad) through the AMG solve of a nonsymmetric convection-diffusion system "
          f"({n * n} unknowns): gradients on b {b_bar.shape} and on the {a.nnz} stored values "
          f"(re-setup of A's hierarchy, solve, and adjoint solve with A^T's hierarchy in one "
          f"program, {seconds * 1e3:.0f} ms); largest relative difference to the dense "
          f"solve's gradients {error:.1e} (float32)")


def demo_dense(devices) -> None:
    # JAXMg's README example, A = diag(1..N) and b = 1, over a 2 x 2 grid of devices (1 x 1
    # with fewer than four): x = 1 / (1..N) and log det A = Σ log i, then the gradient of
    # log det A, which is A⁻¹ (so 1 / i on the diagonal), from the same Cholesky factor.
    n = 1024
    side = 2 if len(devices) >= 4 else 1
    mesh = jsh.make_grid_mesh(side, side, devices=devices[:side * side])
    a = jax.device_put(jnp.diag(jnp.arange(1.0, n + 1)), NamedSharding(mesh, P("pr", "pc")))
    (x, logdet), seconds = _timed(
        jax.jit(lambda a, b: jd.potrs(a, b, T_A=64, return_logdet=True)), a, jnp.ones(n))
    inverse = 1 / jnp.arange(1.0, n + 1)
    gradient = jax.jit(jax.grad(lambda a: jd.logdet(jd.cho_factor(a, T_A=64))))(a)
    print(f"dense potrs on a {side} x {side} grid ({n} x {n}, JAXMg's README example): "
          f"|x - 1/i| <= {float(jnp.max(jnp.abs(x - inverse))):.1e}, log det {float(logdet):.2f} "
          f"(Σ log i = {float(jnp.sum(jnp.log(jnp.arange(1.0, n + 1)))):.2f}), {seconds * 1e3:.1f} ms; "
          f"d logdet / dA = A⁻¹ to {float(jnp.max(jnp.abs(jnp.diag(gradient) - inverse))):.1e} "
          "(XLA reference backend)")


def demo_matrix_free() -> None:
    # A 5-point Laplacian written as a function, not a matrix: its pattern is read from the
    # jaxpr, 5 colored probes recover its values, and the AMG solve runs as for a matrix.
    n = 64

    def laplacian(x):
        u = jnp.pad(x.reshape(n, n), 1)
        return (4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1]
                - u[1:-1, :-2] - u[1:-1, 2:]).ravel()

    b = js.matrices.rhs_random(n * n, seed=2)
    coloring = js.cache_coloring(laplacian, n * n)
    x, info = js.solve(laplacian, b)
    residual = jnp.linalg.norm(laplacian(x) - b) / jnp.linalg.norm(b)
    print(f"matrix-free AMG solve of x ↦ A x ({n * n} unknowns): {coloring.nnz} entries traced, "
          f"{coloring.n_colors} colors (JAX-AMG's coloring: 17), "
          f"{js.Status(int(info.status)).name} in {int(info.iterations)} iterations, "
          f"relative residual {float(residual):.1e}")


def demo_sharded(devices) -> None:
    # 3D Poisson split by rows over all devices: halo exchanges by ppermute, block-Jacobi
    # AMG with a coarse space, against the single-device solve.
    n = 16
    a = js.matrices.poisson3d_matrix(n)
    mesh = jsh.row_mesh(devices=devices)
    sharded = jsh.shard_rows(a, mesh)
    b = jax.device_put(js.matrices.rhs_random(n ** 3, seed=3), sharded.sharding)
    config = {"solver": "PCG", "tolerance": 1e-6}
    x, info = js.solve(sharded, b, config=config)
    x_one, info_one = js.solve(a, jnp.asarray(b), config=config)
    exchanged = js.communication_per_iteration(sharded, config)
    print(f"sharded PCG on {len(devices)} device(s), 3D Poisson {n}^3: {int(info.iterations)} "
          f"iterations (one device: {int(info_one.iterations)}), "
          f"|x - x_one| / |x_one| = {float(jnp.linalg.norm(x - x_one) / jnp.linalg.norm(x_one)):.1e}; "
          f"{exchanged['total'] / 1024:.1f} KiB exchanged per iteration and device")


def main() -> None:
    devices = jax.devices()
    print(f"jaxsolve demo on {devices[0].platform} ({len(devices)} device(s)), jax {jax.__version__}")
    demo_block_cyclic(devices)
    demo_local_transpose(devices[0])
    demo_implicit_gradient()
    demo_amg()
    demo_matrix_free()
    demo_sharded(devices)
    demo_dense(devices)


if __name__ == "__main__":
    main()
