"""Tests for jaxsolve.autodiff._services: column batching and opacity."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import HostServices, random_array, well_conditioned
from jaxsolve.autodiff._services import solve_on_columns


@pytest.fixture
def system():
    rng = np.random.default_rng(0)
    return well_conditioned(rng, 4, np.float32), rng


class TestSolveOnColumns:
    def test_solve_on_columns_vector_rhs(self, system):
        a, rng = system
        host = HostServices()
        solve = solve_on_columns(host.solve, "solve")
        b = random_array(rng, (4,), np.float32)
        x = solve(a, b)
        assert x.shape == (4,)
        np.testing.assert_allclose(a @ x, b, rtol=1e-5, atol=1e-5)
        assert host.calls == [("solve", (4, 1))]

    def test_solve_on_columns_vmap_rhs_is_one_call(self, system):
        a, rng = system
        host = HostServices()
        solve = solve_on_columns(host.solve, "solve")
        b = random_array(rng, (8, 4, 2), np.float32)
        x = jax.jit(jax.vmap(solve, in_axes=(None, 0)))(a, b)
        np.testing.assert_allclose(
            x, np.linalg.solve(a, b.transpose(1, 0, 2).reshape(4, 16))
            .reshape(4, 8, 2).transpose(1, 0, 2), rtol=1e-5, atol=1e-5
        )
        assert host.calls == [("solve", (4, 16))]

    def test_solve_on_columns_nested_vmap_is_one_call(self, system):
        a, rng = system
        host = HostServices()
        solve = solve_on_columns(host.solve, "solve")
        b = random_array(rng, (3, 5, 4), np.float32)
        batched = jax.vmap(jax.vmap(solve, in_axes=(None, 0)), in_axes=(None, 0))
        x = batched(a, b)
        np.testing.assert_allclose(
            np.einsum("ij,abj->abi", a, x), b, rtol=1e-4, atol=1e-4
        )
        assert host.calls == [("solve", (4, 15))]

    def test_solve_on_columns_vmap_stack_vmaps_the_service(self, system):
        _, rng = system
        host = HostServices()
        solve = solve_on_columns(host.solve, "solve")
        a = np.stack([well_conditioned(rng, 4, np.float32) for _ in range(3)])
        b = random_array(rng, (4,), np.float32)
        x = jax.vmap(solve, in_axes=(0, None))(a, b)
        np.testing.assert_allclose(
            np.einsum("aij,aj->ai", a, x), np.broadcast_to(b, (3, 4)),
            rtol=1e-4, atol=1e-4,
        )
        # The service's own batching (here a sequential callback) decides.
        assert host.calls == [("solve", (4, 1))] * 3

    def test_solve_on_columns_refuses_differentiation(self, system):
        a, rng = system
        solve = solve_on_columns(lambda a, r: jnp.linalg.solve(a, r), "my_solve")
        b = random_array(rng, (4,), np.float32)
        with pytest.raises(
            TypeError, match="the `my_solve` service was differentiated"
        ):
            jax.jvp(lambda b: solve(a, b), (b,), (b,))
