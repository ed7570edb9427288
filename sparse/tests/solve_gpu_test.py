"""The AMG solve on a CUDA GPU: the same answers as on the CPU, under jit, vmap and grad.

Every test is marked ``gpu`` and skipped where JAX has no GPU.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg
from jaxsolve_testing import counted_compilations
from similar_patterns import with_couplings

from jaxsolve import sparse
from jaxsolve.sparse import matrices

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
CPU = jax.devices("cpu")[0]
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]

SA = {"solver": "PCG", "tolerance": 1e-10, "preconditioner": {
    "solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_8", "jaxsolve_smoothed_aggregation": 1,
    "smoother": "JACOBI_L1"}}


def on(device, *arrays):
    return [jax.device_put(a, device) for a in arrays]


@pytest.mark.parametrize("config", [None, SA, {"solver": "FGMRES", "tolerance": 1e-10}])
def test_gpu_solve_matches_cpu_and_scipy(x64, config):
    A = sparse.as_csr(matrices.convection_diffusion_matrix_2d(24, peclet=10.0, dtype=np.float64)
                      if config is not SA else matrices.poisson3d_matrix(12, dtype=np.float64))
    b = matrices.rhs_random(A.shape[0], seed=0, dtype=np.float64)
    config = {**(config or {}), "tolerance": 1e-10}
    values, b_gpu = on(GPU, A.values, b)
    x_gpu, info_gpu = sparse.solve(A.with_values(values), b_gpu, config=config)
    x_cpu, info_cpu = sparse.solve(A.with_values(on(CPU, A.values)[0]), on(CPU, b)[0],
                                   config=config)
    assert x_gpu.devices() == {GPU}
    assert sparse.Status(int(info_gpu.status)) is sparse.Status.SUCCESS
    assert abs(int(info_gpu.iterations) - int(info_cpu.iterations)) <= 1
    reference = scipy.sparse.linalg.spsolve(
        scipy.sparse.csr_array((np.asarray(A.values), A.indices, A.indptr),
                               shape=A.shape).tocsc(), np.asarray(b))
    np.testing.assert_allclose(np.asarray(x_gpu), reference, rtol=1e-7, atol=1e-9)


def test_gpu_jit_vmap_grad(x64):
    A = sparse.as_csr(matrices.convection_diffusion_matrix_2d(16, peclet=5.0, dtype=np.float64))
    values, = on(GPU, A.values)
    bs = jax.device_put(jnp.stack([matrices.rhs_random(256, seed=s, dtype=np.float64)
                                   for s in range(3)]), GPU)

    def loss(values, b):
        return jnp.sum(sparse.solve(A.with_values(values), b,
                                    config={"tolerance": 1e-12})[0] ** 2)

    grads = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(None, 0)))(values, bs)
    dense = np.zeros((256, 256))
    np.add.at(dense, (A.row_ids, A.indices), np.asarray(A.values))
    for k in range(3):
        b = np.asarray(bs[k])
        x = np.linalg.solve(dense, b)
        b_bar = np.linalg.solve(dense.T, 2 * x)
        np.testing.assert_allclose(np.asarray(grads[1][k]), b_bar, rtol=1e-7)
        np.testing.assert_allclose(np.asarray(grads[0][k]),
                                   -b_bar[A.row_ids] * x[A.indices], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("preconditioner", [
    {"solver": "AMG", "smoother": {"solver": "MULTICOLOR_GS", "symmetric_GS": 1,
                                   "relaxation_factor": 1.0}},
    {"solver": "AMG", "smoother": {"solver": "MULTICOLOR_DILU", "relaxation_factor": 1.0}},
    {"solver": "MULTICOLOR_DILU", "relaxation_factor": 1.0},
], ids=["amg-symmetric-gs", "amg-dilu", "dilu-alone"])
def test_gpu_multicolor_smoothers_match_cpu(x64, preconditioner):
    """The color blocks' products (one native call per color and triangle) on the GPU."""
    A = sparse.as_csr(matrices.poisson3d_matrix(12, dtype=np.float64))
    b = matrices.rhs_random(A.shape[0], seed=0, dtype=np.float64)
    config = {"solver": "PCG", "tolerance": 1e-10, "max_iters": 500,
              "preconditioner": preconditioner}
    results = [sparse.solve(A.with_values(on(device, A.values)[0]), on(device, b)[0],
                            config=config) for device in (GPU, CPU)]
    (x_gpu, info_gpu), (x_cpu, info_cpu) = results
    assert x_gpu.devices() == {GPU}
    assert sparse.Status(int(info_gpu.status)) is sparse.Status.SUCCESS
    assert abs(int(info_gpu.iterations) - int(info_cpu.iterations)) <= 1
    np.testing.assert_allclose(np.asarray(x_gpu), np.asarray(x_cpu), rtol=1e-8, atol=1e-10)


def test_gpu_matrix_free_gradient(x64):
    """A function operator materialized on the GPU, differentiated through the solve."""
    def operator(d):
        return lambda x: d * x - jnp.roll(x, 1).at[0].set(0) - jnp.roll(x, -1).at[-1].set(0)

    info = sparse.cache_coloring(operator(4.0), 64, jnp.float64)
    b = jnp.ones(64, jnp.float64)

    def loss(d):
        return jnp.sum(sparse.solve(sparse.with_cache(operator(d), coloring=info), b,
                                    config={"tolerance": 1e-12})[0])

    gradients = [jax.jit(jax.grad(loss))(jax.device_put(jnp.float64(3.0), device))
                 for device in (GPU, CPU)]
    assert gradients[0].devices() == {GPU}
    np.testing.assert_allclose(float(gradients[0]), float(gradients[1]), rtol=1e-9)


def test_gpu_checked_solve_reads_its_verdict_without_a_transfer(x64):
    """A checked solve learns whether its program refused the inputs from host memory that
    the program itself wrote, not by a transfer of its own after the program (0.4 ms of a
    10 ms solve at 128³ on an H200); refused inputs still raise."""
    A = sparse.as_csr(matrices.poisson3d_matrix(8, dtype=np.float64))
    values, b = on(GPU, A.values, matrices.rhs_random(512, seed=0, dtype=np.float64))
    A = A.with_values(values)
    sparse.solve(A, b)  # the first setup reads the values on the host
    with jax.transfer_guard_device_to_host("disallow"):
        x, info = sparse.solve(A, b, reuse_setup=True)
    assert sparse.Status(int(info.status)) is sparse.Status.SUCCESS
    with pytest.raises(ValueError, match=re.escape("A holds NaN or Inf (1 entries)")):
        sparse.solve(A.with_values(values.at[5].set(jnp.nan)), b, reuse_setup=True)


@pytest.mark.parametrize("config", [
    None,
    {"solver": "PCG", "preconditioner": {"solver": "AMG", "selector": "PMISC",
                                         "aggressive_levels": 1}},
    {"solver": "PCG", "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION",
                                         "selector": "SIZE_8"}},  # set up on the GPU
    {"solver": "PCG", "preconditioner": {"solver": "BLOCK_JACOBI", "max_iters": 1}},
], ids=["default", "pmisc", "aggregation", "jacobi"])
def test_gpu_a_similar_patterns_first_solve_compiles_at_most_one_small_program(x64, config):
    """A pattern with other nonzeros and the same rows, on the GPU, runs the programs compiled
    for one solved before: at most one small program is compiled for its values' size (their
    padding, or the default's symmetry test), where the checks of a device setup's values
    compiled two more."""
    grid = sparse.as_csr(matrices.poisson3d_matrix(16, dtype=np.float64))
    host = scipy.sparse.csr_array((np.asarray(grid.values), grid.indices, grid.indptr),
                                  shape=grid.shape)
    b = jax.device_put(matrices.rhs_random(grid.shape[0], seed=0, dtype=np.float64), GPU)
    config = {**(config or {}), "tolerance": 1e-8}

    def solved(matrix):
        A = sparse.as_csr(matrix)
        x, info = sparse.solve(A.with_values(jax.device_put(A.values, GPU)), b, config=config)
        jax.block_until_ready(x)
        assert sparse.Status(int(info.status)) is sparse.Status.SUCCESS

    solved(with_couplings(host, [(0, 273), (1000, 1273)]))
    with counted_compilations() as count:
        solved(with_couplings(host, [(0, 273), (1000, 1273), (2000, 2273), (3000, 3273)]))
    assert count[0] <= 1, f"{count[0]} programs compiled"
