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
    monkeypatch.setattr(_backend, "_WORKSPACE_HOOKS", list(_backend._WORKSPACE_HOOKS))
    monkeypatch.setattr(_backend, "_LOADERS", dict(_backend._LOADERS))
    yield copy
    dense.clear_cache()


class TestBackend:
    def test_every_family_has_the_xla_backend(self):
        on_cpu = _arguments.Layout(device_platform="cpu")
        for family in _backend.FAMILIES:
            assert _backend.backend_name(family, on_cpu, np.float32) == "xla"

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
        on_cpu = _arguments.Layout(device_platform="cpu")
        assert _backend.backend_name("cholesky", on_cpu, np.complex64) == "counting"
        assert _backend.backend_name("lu", on_cpu, np.complex64) == "xla"
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


def test_backend_for_answers_as_the_routine_chooses(registry):
    a = 2 * jnp.eye(4, dtype=jnp.complex64)
    assert dense.backend_for("potrs", a) == "xla"
    services = _backend.FactorServices(_xla.potrf, _xla.potrs, _xla.cholesky_logdet,
                                       _xla.cholesky_diagonal)
    _backend.register("cholesky", "complex", lambda layout, dtype: services,
                      applies=lambda layout, dtype: dtype == np.complex64)
    assert [dense.backend_for(r, a) for r in ("potrs", "cho_factor", "lu_solve")] == [
        "complex", "complex", "xla"]
    assert dense.backend_for("potrs", a.real) == "xla"  # float32: the backend does not apply
    assert dense.backend_for("qr", jnp.ones((4, 2))) == "xla"
    with dense.use_backend("xla"):
        assert dense.backend_for("potrs", a) == "xla"
    with dense.use_backend("complex"):
        assert dense.backend_for("lu_solve", a) == "xla"  # not one of its routines
        with pytest.raises(ValueError, match="cannot compute 'cholesky'"):
            dense.backend_for("potrs", a.real)
    with pytest.raises(ValueError, match="must be a non-empty square"):
        dense.backend_for("potrs", jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="unknown routine 'potri'"):
        dense.backend_for("potri", a)


def test_load_backend_runs_the_backends_loader(registry):
    loaded = []
    _backend.register("cholesky", "loading", lambda layout, dtype: None,
                      applies=lambda layout, dtype: False, load=lambda: loaded.append(1))
    dense.load_backend("loading")
    dense.load_backend("xla")  # loads nothing
    assert loaded == [1]
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        dense.load_backend("nope")


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="a GPU can load them")
@pytest.mark.parametrize("name", ["cusolver", "cusolver_lean", "cusolvermp"])
def test_native_backends_cannot_load_without_a_gpu(name):
    with pytest.raises(RuntimeError, match="CUDA"):
        dense.load_backend(name)


def test_workspace_bytes_sums_the_backends(registry):
    assert dense.workspace_bytes() == 0  # nothing native has run on this CPU
    _backend.register("cholesky", "holding", lambda layout, dtype: None,
                      applies=lambda layout, dtype: False, workspace=lambda: 1024)
    _backend.register("lu", "holding", lambda layout, dtype: None,
                      applies=lambda layout, dtype: False, workspace=lambda: 512)
    assert dense.workspace_bytes() == 1536
