"""Which AMG structures a sharded solve on a known layout gets (as structure_reuse_test's).

A `ShardedCsrMatrix` given other values with ``with_values`` keeps its layout, and each
device's block hierarchy is cached per layout: concrete values get the structures built
for them, keyed over every device's block, so another operator on the layout converges as
in a fresh setup, and the same operator again builds and compiles nothing.  Runs on 2
virtual CPU devices (set at import; skipped when JAX started with fewer).
"""

from jaxsolve_testing import use_cpu_devices

use_cpu_devices(2)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse  # noqa: E402
from jaxsolve_testing import counted_compilations  # noqa: E402

from jaxsolve import sharding, sparse  # noqa: E402
from jaxsolve.sparse import _sharded, matrices  # noqa: E402

N = 24
BICGSTAB = {"tolerance": 1e-8}
PCG = {"solver": "PCG", "tolerance": 1e-8}

pytestmark = pytest.mark.skipif(
    len(jax.devices("cpu")) < 2,
    reason="needs 2 CPU devices: run this file in its own process (XLA_FLAGS set too late)")


def convection():
    return matrices.convection_diffusion_matrix_2d(N, peclet=10.0, dtype=np.float64)


def laplacian():  # on the convection's pattern
    return matrices.poisson_matrix(N, dtype=np.float64)


def sharded(A):
    """``A`` split by rows over 2 devices."""
    A = sparse.as_csr(A)
    host = scipy.sparse.csr_array((np.asarray(A.values), np.asarray(A.indices),
                                   np.asarray(A.indptr)), shape=A.shape)
    return sharding.shard_rows(host, sharding.row_mesh(devices=jax.devices("cpu")[:2]))


def iterations(A, config, **kwargs):
    x, info = sparse.solve(A, jnp.ones(N * N), config=config, **kwargs)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    return int(info.iterations)


def test_another_operator_on_the_layout_gets_its_own_structures(x64):
    fresh = iterations(sharded(laplacian()), PCG)  # a layout of its own: a fresh setup
    first = sharded(convection())
    sparse.solve(first, jnp.ones(N * N), config={**PCG, "max_iters": 2})  # its setup
    other = first.with_values(first.shard_values(sparse.as_csr(laplacian()).values))
    # Before: the convection's structures served (16 PCG iterations for 14).
    assert iterations(other, PCG) == fresh
    assert structures(first) == 2


def test_the_same_operator_again_builds_and_compiles_nothing(x64):
    first = sharded(convection())
    fresh = iterations(first, BICGSTAB)
    # Equal values in new arrays; the first compiles the comparison that finds the kept
    # numbers (once per shape, as before structures were keyed).
    same, again = first.with_values(first.values + 0), first.with_values(first.values + 0)
    assert iterations(same, BICGSTAB) == fresh
    with counted_compilations() as compiled:
        assert iterations(again, BICGSTAB) == fresh
    assert compiled[0] == 0
    assert structures(first) == 1


def test_reuse_setup_keeps_the_latest_structures(x64):
    first = sharded(convection())
    iterations(first, BICGSTAB)
    second = first.with_values(first.shard_values(sparse.as_csr(laplacian()).values))
    # reuse_setup: the convection's structures and numbers, not a setup of its own.
    sparse.solve(second, jnp.ones(N * N), config=BICGSTAB, reuse_setup=True)
    assert structures(first) == 1


def structures(A):
    """How many sets of structures (one per values' key) ``A``'s layout keeps."""
    return sum(len(entries) for key, entries in _sharded._SETUPS[A.layout].items()
               if key[0] == "orientations")


def test_traced_values_keep_the_latest_structures(x64):
    first = sharded(convection())
    iterations(first, BICGSTAB)
    second = first.with_values(first.shard_values(sparse.as_csr(laplacian()).values))
    after_second = iterations(second, BICGSTAB)

    @jax.jit
    def traced(values):
        return sparse.solve(first.with_values(values), jnp.ones(N * N), config=BICGSTAB)[1]

    # The Laplacian's values, traced: set up on the latest structures (the Laplacian's),
    # none built for them.
    assert int(traced(second.values).iterations) == after_second
    assert structures(first) == 2
