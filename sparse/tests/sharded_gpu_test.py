"""The sharded solve's code path on one CUDA GPU: a 1-device mesh gives the single solve.

A host with several GPUs runs the same code with more devices on the mesh axis; with one,
the halo exchanges are empty and the coarse correction couples a single block, so the
answers and gradients must match the plain solve's. Every test is marked ``gpu`` and
skipped where JAX has no GPU.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sharding, sparse
from jaxsolve.sparse import matrices

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]

PCG = {"solver": "PCG", "tolerance": 1e-7, "max_iters": 200, "preconditioner": {"solver": "AMG"}}
BICGSTAB = {"solver": "PBICGSTAB", "tolerance": 1e-7, "max_iters": 200,
            "preconditioner": {"solver": "AMG"}}


@pytest.mark.parametrize(("make", "config"), [
    (lambda: matrices.poisson3d_matrix(16), PCG),
    (lambda: matrices.convection_diffusion_matrix_2d(32, peclet=2.0), BICGSTAB),
], ids=["poisson3d", "convection_diffusion"])
def test_one_device_mesh_matches_the_single_solve(make, config):
    A = make()
    b = matrices.rhs_random(A.shape[0], seed=1)
    x_single, single = sparse.solve(A, b, config=config)
    A_sharded = sharding.shard_rows(A, sharding.row_mesh(devices=[GPU]))
    x, info = sparse.solve(A_sharded, jax.device_put(b, A_sharded.sharding), config=config)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    assert x.devices() == {GPU}
    np.testing.assert_allclose(x, x_single, rtol=1e-4, atol=1e-4 * float(jnp.abs(x_single).max()))
    assert int(info.iterations) <= int(single.iterations) + 2


def test_one_device_mesh_gradient_matches_the_single_solve():
    A = matrices.convection_diffusion_matrix_2d(16, peclet=2.0)
    b = matrices.rhs_random(A.shape[0], seed=2)
    A_csr = sparse.as_csr(A)
    A_sharded = sharding.shard_rows(A, sharding.row_mesh(devices=[GPU]))
    weights = jnp.cos(jnp.arange(A.shape[0], dtype=jnp.float32))

    def single(values, b):
        return jnp.sum(weights * sparse.solve(A_csr.with_values(values), b, config=BICGSTAB)[0])

    def sharded(values, b):
        return jnp.sum(weights * sparse.solve(A_sharded.with_values(values), b,
                                              config=BICGSTAB)[0])

    values_bar, b_bar = jax.grad(single, argnums=(0, 1))(A_csr.values, b)
    stacked_bar, sharded_b_bar = jax.grad(sharded, argnums=(0, 1))(A_sharded.values, b)
    np.testing.assert_allclose(sharded_b_bar, b_bar, rtol=1e-3,
                               atol=1e-4 * float(jnp.abs(b_bar).max()))
    np.testing.assert_allclose(A_sharded.global_values(stacked_bar), values_bar, rtol=1e-3,
                               atol=1e-4 * float(jnp.abs(values_bar).max()))
