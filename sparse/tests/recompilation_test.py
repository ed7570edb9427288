"""A solve called outside ``jax.jit`` compiles its programs on the first call only.

XLA compilation costs 0.1–1 s a program on a CPU; a program traced again on every call (a
closure inside a ``lax`` loop, say) would make every repeated solve pay it. Compilations are
counted with ``jax.monitoring``'s backend-compile event.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jaxsolve_testing import counted_compilations

from jaxsolve import sparse


def poisson_2d(m: int) -> sp.csr_matrix:
    line = sp.diags([-np.ones(m - 1), 2 * np.ones(m), -np.ones(m - 1)], [-1, 0, 1])
    return sp.csr_matrix(sp.kronsum(line, line))


@pytest.mark.parametrize("preconditioner", [
    {"solver": "BLOCK_JACOBI"},  # its damping estimated by power iteration
    {"solver": "BLOCK_JACOBI", "relaxation_factor": 0.8},
    {"solver": "JACOBI_L1"},
    {"solver": "AMG"},
], ids=["jacobi-estimated", "jacobi-given", "l1-jacobi", "amg"])
def test_a_repeated_solve_compiles_nothing(preconditioner):
    a = poisson_2d(12)
    b = jnp.ones(a.shape[0], jnp.float32)
    config = {"solver": "PCG", "preconditioner": preconditioner, "max_iters": 300,
              "tolerance": 1e-5}
    x, info = sparse.solve(a, b, config=config)
    assert int(info.status) == 0
    with counted_compilations() as count:
        for _ in range(2):
            y, info = sparse.solve(a, b, config=config)
            jax.block_until_ready(y)
    assert count[0] == 0
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


@pytest.mark.parametrize("amg", [
    {},  # classical, set up on the host
    {"algorithm": "AGGREGATION", "selector": "SIZE_8", "jaxsolve_setup_location": "DEVICE"},
], ids=["classical", "device-setup"])
@pytest.mark.parametrize("transform", ["grad", "vmap"])
def test_a_repeated_transformed_solve_compiles_nothing(amg, transform):
    """``jax.grad`` and ``jax.vmap`` of a solve, called without ``jax.jit``, compile on their
    first call only. A gradient's AMG numeric setup of traced values ran operation by
    operation, and its loops and conditionals compiled again on every call (4 programs,
    about a second at 1728 rows)."""
    A = sparse.as_csr(poisson_2d(12).astype(np.float32))
    b = jnp.ones(A.shape[0], jnp.float32)
    config = {"solver": "PCG", "tolerance": 1e-5,
              "preconditioner": {"solver": "AMG", **amg}}

    def solution(values):
        return sparse.solve(A.with_values(values), b, config=config)[0]

    if transform == "grad":
        run = jax.grad(lambda values: solution(values).sum())
        arguments = [A.values * scale for scale in (1.0, 1.5, 2.0)]
    else:
        run = jax.vmap(solution)
        arguments = [jnp.stack([A.values, scale * A.values]) for scale in (1.5, 2.0, 3.0)]
    jax.block_until_ready(arguments)
    first = run(arguments[0])
    assert bool(jnp.all(jnp.isfinite(first)))
    with counted_compilations() as count:
        for argument in arguments[1:]:
            jax.block_until_ready(run(argument))
    assert count[0] == 0
