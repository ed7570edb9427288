"""Tests for the dispatch point: the XLA reference backend, and how another plugs in."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import dense
from jaxsolve.dense import _arguments, _backend, _xla


@pytest.fixture
def registry(monkeypatch):
    """A copy of the backend registry, restored after the test."""
    copy = {family: list(entries) for family, entries in _backend._REGISTRY.items()}
    monkeypatch.setattr(_backend, "_REGISTRY", copy)
    monkeypatch.setattr(_backend, "_CLEAR_HOOKS", list(_backend._CLEAR_HOOKS))
    monkeypatch.setattr(_backend, "_PREPARE_HOOKS", list(_backend._PREPARE_HOOKS))
    yield copy
    dense.clear_cache()


class TestBackend:
    def test_every_family_has_the_xla_backend(self):
        for family in _backend.FAMILIES:
            assert _backend.backend_name(family, _arguments.Layout(), np.float32) == "xla"

    def test_another_backend_plugs_in_per_family(self, registry):
        calls = []
        cleared = []

        def factor(a):
            calls.append("factor")
            return _xla.potrf(a)

        services = _backend.FactorServices(factor, _xla.potrs, _xla.cholesky_logdet,
                                           _xla.cholesky_diagonal)
        _backend.register("cholesky", "counting", lambda layout, dtype: services,
                          applies=lambda layout, dtype: dtype == np.complex64,
                          clear=lambda: cleared.append(True))
        dense.clear_cache()
        x = dense.potrs(2 * jnp.eye(2, dtype=jnp.complex64), jnp.ones(2, jnp.complex64))
        np.testing.assert_allclose(x, [0.5, 0.5])
        assert calls == ["factor"]
        dense.potrs(2 * jnp.eye(2), jnp.ones(2))  # float32: still the XLA backend
        assert calls == ["factor"]
        assert _backend.backend_name("cholesky", _arguments.Layout(), np.complex64) == "counting"
        assert _backend.backend_name("lu", _arguments.Layout(), np.complex64) == "xla"
        dense.clear_cache()
        assert cleared == [True, True]  # both clear_cache calls reached the backend

    def test_vmap_over_right_hand_sides_is_one_solve_of_columns(self, registry):
        shapes = []

        def solve(factor, rhs):
            shapes.append(rhs.shape)
            return _xla.potrs(factor, rhs)

        services = _backend.FactorServices(_xla.potrf, solve, _xla.cholesky_logdet,
                                           _xla.cholesky_diagonal)
        _backend.register("cholesky", "recording", lambda layout, dtype: services)
        dense.clear_cache()
        x = jax.vmap(lambda b: dense.potrs(4 * jnp.eye(8), b))(jnp.ones((3, 8)))
        np.testing.assert_allclose(x, np.full((3, 8), 0.25))
        # custom_vmap traces the unbatched service once ((8, 1)); the batch rule then solves
        # the three right-hand sides as columns of one call, never a vmap of the service.
        assert shapes[-1] == (8, 3) and shapes.count((8, 3)) == 1

    def test_register_unknown_family(self, registry):
        with pytest.raises(ValueError, match=r"^register: unknown family 'potri'"):
            _backend.register("potri", "x", lambda layout, dtype: None)



def test_backends_prepare_before_tracing(registry):
    events = []
    services = _backend.FactorServices(_xla.potrf, _xla.potrs, _xla.cholesky_logdet,
                                       _xla.cholesky_diagonal)

    def make(layout, dtype):
        events.append("traced")
        return services

    _backend.register("cholesky", "preparing", make,
                      prepare=lambda layout: events.append(("prepared", layout.tile)))
    dense.clear_cache()
    dense.potrs(4 * jnp.eye(2), jnp.ones(2), T_A=7)
    assert events == [("prepared", 7), "traced"]
