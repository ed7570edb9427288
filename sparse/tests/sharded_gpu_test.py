"""The sharded solve on CUDA GPUs: a mesh of one GPU, and of all of them, gives the single solve.

On one GPU the halo exchanges are empty and the coarse correction couples a single block; on
all the GPUs of a host with several (issue 37) the halos go by ``ppermute`` over NCCL and
the coarse space couples every block. Either way the answers and gradients must match the
plain solve's. Every test is marked ``gpu`` and skipped where JAX has no GPU (the ``all``
cases where it has fewer than two).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sharding, sparse
from jaxsolve.sparse import matrices

GPUS = [d for d in jax.devices() if d.platform == "gpu"]
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not GPUS, reason="needs a GPU")]

PCG = {"solver": "PCG", "tolerance": 1e-7, "max_iters": 200, "preconditioner": {"solver": "AMG"}}
BICGSTAB = {"solver": "PBICGSTAB", "tolerance": 1e-7, "max_iters": 200,
            "preconditioner": {"solver": "AMG"}}


@pytest.fixture(params=["one", "all"])
def devices(request):
    """The mesh's GPUs: the first one, or all of them."""
    if request.param == "all" and len(GPUS) < 2:
        pytest.skip("needs two GPUs")
    return GPUS[:1] if request.param == "one" else GPUS


@pytest.mark.parametrize(("make", "config"), [
    (lambda: matrices.poisson3d_matrix(16), PCG),
    (lambda: matrices.convection_diffusion_matrix_2d(32, peclet=2.0), BICGSTAB),
], ids=["poisson3d", "convection_diffusion"])
def test_mesh_matches_the_single_solve(make, config, devices):
    A = make()
    b = matrices.rhs_random(A.shape[0], seed=1)
    x_single, single = sparse.solve(A, b, config=config)
    A_sharded = sharding.shard_rows(A, sharding.row_mesh(devices=devices))
    x, info = sparse.solve(A_sharded, jax.device_put(b, A_sharded.sharding), config=config)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    assert x.devices() == set(devices)
    np.testing.assert_allclose(x, x_single, rtol=1e-4, atol=1e-4 * float(jnp.abs(x_single).max()))
    if len(devices) == 1:  # several blocks take more iterations (block-Jacobi AMG)
        assert int(info.iterations) <= int(single.iterations) + 2


def test_mesh_gradient_matches_the_single_solve(devices):
    A = matrices.convection_diffusion_matrix_2d(16, peclet=2.0)
    b = matrices.rhs_random(A.shape[0], seed=2)
    A_csr = sparse.as_csr(A)
    A_sharded = sharding.shard_rows(A, sharding.row_mesh(devices=devices))
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
