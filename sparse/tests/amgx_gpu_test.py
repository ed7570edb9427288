"""The AmgX backend on a CUDA GPU: AmgX's solves behind ``solve``, under jit, vmap and grad.

Every test is marked ``gpu``; they are skipped where JAX has no GPU or where ``AMGX_LIB``
is not set to an AmgX build (``tools/dev amgx-build`` on the GPU host builds one and prints
its path). What runs without AmgX is in ``amgx_backend_test.py``.
"""

import gc
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sparse
from jaxsolve.sparse import _amgx, matrices

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(GPU is None, reason="needs a GPU"),
    pytest.mark.skipif(not os.environ.get("AMGX_LIB"),
                       reason="AMGX_LIB is not set: build AmgX with `tools/dev amgx-build` on"
                              " the GPU host and set AMGX_LIB to the libamgxsh.so it prints"),
]

# What ran on the H200 with AmgX built for CUDA 13 (third_party/amgx's README): aggregation
# AMG (classical AMG's setup fails there, AmgX issue 380).
PCG_AGGREGATION = {"solver": "PCG", "tolerance": 1e-10, "max_iters": 200, "preconditioner": {
    "solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_2",
    "smoother": "BLOCK_JACOBI", "relaxation_factor": 0.8}}
FGMRES_AGGREGATION = {"solver": "FGMRES", "tolerance": 1e-10, "max_iters": 200,
                      "gmres_n_restart": 30, "preconditioner": {
                          "solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_2",
                          "smoother": "MULTICOLOR_DILU", "relaxation_factor": 0.8}}


def poisson():
    A = sparse.as_csr(matrices.poisson3d_matrix(12, dtype=np.float64))
    return A.with_values(jax.device_put(A.values, GPU))


def convection_diffusion():
    A = sparse.as_csr(matrices.convection_diffusion_matrix_2d(24, peclet=10.0, dtype=np.float64))
    return A.with_values(jax.device_put(A.values, GPU))


def rhs(n, seed=0):
    return jax.device_put(matrices.rhs_random(n, seed=seed, dtype=np.float64), GPU)


def amgx_solve(*args, **kwargs):
    with sparse.use_backend("amgx"):
        return sparse.solve(*args, **kwargs)


def relative_residual(A, x, b):
    return float(jnp.linalg.norm(b - A @ x) / jnp.linalg.norm(b))


@pytest.mark.parametrize("matrix, config", [(poisson, PCG_AGGREGATION),
                                            (convection_diffusion, FGMRES_AGGREGATION)])
def test_amgx_solves_like_jaxsolve(x64, matrix, config):
    A = matrix()
    b = rhs(A.shape[0])
    x, info = amgx_solve(A, b, config=config)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    assert 0 < int(info.iterations) < 200
    assert relative_residual(A, x, b) <= 1e-9
    np.testing.assert_allclose(float(info.residual), relative_residual(A, x, b), rtol=1e-3)
    ours, _ = sparse.solve(A, b, config=config)  # both to 1e-10: x agrees to ~κ 1e-10
    np.testing.assert_allclose(x, ours, rtol=1e-6, atol=1e-6 * float(jnp.abs(ours).max()))


def test_new_values_are_set_up_again_and_reuse_setup_keeps_it(x64):
    A = poisson()
    b = rhs(A.shape[0])
    sparse.clear_cache()
    gc.collect()
    x1, _ = amgx_solve(A, b, config=PCG_AGGREGATION)
    assert _amgx.live_solvers() == 1
    x2, info2 = amgx_solve(A.with_values(2 * A.values), b, config=PCG_AGGREGATION)
    np.testing.assert_allclose(x2, x1 / 2, rtol=1e-7)
    assert sparse.cache_info().hits >= 1 and _amgx.live_solvers() == 1  # one solver reused
    # reuse_setup: 4 A solved with the setup of 2 A (the same hierarchy up to a scale)
    x4, info4 = amgx_solve(A.with_values(4 * A.values), b, config=PCG_AGGREGATION,
                           reuse_setup=True)
    np.testing.assert_allclose(x4, x1 / 4, rtol=1e-7)
    assert abs(int(info4.iterations) - int(info2.iterations)) <= 1  # PCG: M scaled, same its
    sparse.clear_cache()
    gc.collect()
    assert _amgx.live_solvers() == 0


def test_x_is_returned_where_b_was_given(x64):
    A = poisson()  # on the GPU, where AmgX solves
    cpu = jax.devices("cpu")[0]
    b = jax.device_put(matrices.rhs_random(A.shape[0], seed=2, dtype=np.float64), cpu)
    x, info = amgx_solve(A, b, config=PCG_AGGREGATION)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    assert x.devices() == {cpu}
    assert relative_residual(A, jax.device_put(x, GPU), jax.device_put(b, GPU)) <= 1e-9


def test_residual_history_from_amgx(x64):
    A = poisson()
    b = rhs(A.shape[0])
    x, info = amgx_solve(A, b, config={**PCG_AGGREGATION, "store_res_history": 1})
    its = int(info.iterations)
    history = np.asarray(info.residual_history)
    assert history.shape == (201,) and history[0] == 1
    assert np.all(np.isfinite(history[:its + 1])) and np.all(np.isnan(history[its + 1:]))
    assert history[its] <= 1e-10


@pytest.mark.parametrize("matrix, config", [(poisson, PCG_AGGREGATION),
                                            (convection_diffusion, FGMRES_AGGREGATION)])
def test_grad_matches_jaxsolve(x64, matrix, config):
    A = matrix()
    b = rhs(A.shape[0])
    weights = rhs(A.shape[0], seed=1)
    tight = {**config, "tolerance": 1e-12}

    def loss(values, b):
        x, _ = sparse.solve(A.with_values(values), b, config=tight)
        return jnp.vdot(weights, x)

    with sparse.use_backend("amgx"):
        amgx = jax.grad(loss, argnums=(0, 1))(A.values, b)
    ours = jax.grad(loss, argnums=(0, 1))(A.values, b)
    for got, want in zip(amgx, ours):
        assert float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want)) <= 1e-6


def test_vmap_solves_three_right_hand_sides(x64):
    A = poisson()
    bs = jnp.stack([rhs(A.shape[0], seed=s) for s in range(3)])
    with sparse.use_backend("amgx"):
        xs, infos = jax.vmap(lambda b: sparse.solve(A, b, config=PCG_AGGREGATION))(bs)
    assert xs.shape == bs.shape and infos.iterations.shape == (3,)
    for k in range(3):
        x, _ = amgx_solve(A, bs[k], config=PCG_AGGREGATION)
        np.testing.assert_allclose(xs[k], x, rtol=1e-7)  # AmgX's setups may differ
    # b of shape (n, k): the same successive solves
    columns, info = amgx_solve(A, bs.T, config=PCG_AGGREGATION)
    np.testing.assert_allclose(columns, xs.T, rtol=1e-7)
    assert info.status.shape == (3,)


def test_jit(x64):
    A = poisson()
    b = rhs(A.shape[0])

    @jax.jit
    def solve(values, b):
        with sparse.use_backend("amgx"):  # read while tracing
            return sparse.solve(A.with_values(values), b, config=PCG_AGGREGATION)

    x, info = solve(A.values, b)
    x_eager, _ = amgx_solve(A, b, config=PCG_AGGREGATION)
    np.testing.assert_allclose(x, x_eager, rtol=1e-7)
    x3, _ = solve(3 * A.values, b)  # the compiled program sets AmgX up for new values
    np.testing.assert_allclose(x3, x_eager / 3, rtol=1e-7)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS


def test_float32(x64):
    A = poisson()
    A32 = A.with_values(A.values.astype(jnp.float32))
    b = rhs(A.shape[0]).astype(jnp.float32)
    x, info = amgx_solve(A32, b, config={**PCG_AGGREGATION, "tolerance": 1e-5})
    assert x.dtype == jnp.float32
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    assert relative_residual(A32, x, b) <= 1e-4


def test_amgx_failures_are_exceptions_that_name_amgx_and_cuda(x64):
    """Classical AMG's setup fails in AmgX built for CUDA 13.0 (a Thrust error); wherever it
    fails, the error names AmgX and the CUDA version, and the process goes on solving."""
    A = poisson()
    b = rhs(A.shape[0])
    classical = {"solver": "PCG", "tolerance": 1e-8,
                 "preconditioner": {"solver": "AMG", "algorithm": "CLASSICAL"}}
    for attempt in range(2):  # a failed solver is dropped: the second attempt builds anew
        try:  # the error surfaces where the result is read (JAX dispatches asynchronously)
            _, info = amgx_solve(A, b, config=classical)
            status = sparse.Status(int(info.status))
        except Exception as error:  # noqa: BLE001  (JAX's runtime error class varies by version)
            message = str(error)
            assert "AmgX failed in" in message and "CUDA" in message, message
            print(f"classical AMG in AmgX, attempt {attempt}: {message[:400]}")
        else:
            assert status == sparse.Status.SUCCESS
    x, info = amgx_solve(A, b, config=PCG_AGGREGATION)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    assert "CUDA" in _amgx.amgx_versions()


def test_solvers_freed_one_by_one_and_at_exit_in_a_fresh_process():
    """Several solvers live at once (two dtypes, two patterns, a failed classical setup);
    evicting one, clearing the cache and the process's exit free AmgX cleanly: AmgX shares one
    resources object per device, so freeing one solver never frees pools another uses."""
    program = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from jaxsolve import sparse
from jaxsolve.sparse import _amgx, matrices
config = %r
gpu = jax.devices("gpu")[0]
with sparse.use_backend("amgx"):
    for n, dtype in ((10, np.float64), (12, np.float64), (10, np.float32)):
        A = sparse.as_csr(matrices.poisson3d_matrix(n, dtype=dtype))
        A = A.with_values(jax.device_put(A.values, gpu))
        b = jax.device_put(jnp.ones(A.shape[0], dtype), gpu)
        x, info = sparse.solve(A, b, config={**config, "tolerance": 1e-5})
        assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS, info
    assert _amgx.live_solvers() == 3, _amgx.live_solvers()
    try:
        sparse.solve(A, b, config={"solver": "PCG", "preconditioner": {
            "solver": "AMG", "algorithm": "CLASSICAL"}})[1].status.block_until_ready()
    except Exception as error:
        print("classical:", str(error)[:120])
    sparse.clear_cache()
    assert _amgx.live_solvers() == 0
    x, info = sparse.solve(A, b, config={**config, "tolerance": 1e-5})
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
print("done")
""" % (PCG_AGGREGATION,)
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert run.stdout.strip().endswith("done"), run.stdout[-2000:]
