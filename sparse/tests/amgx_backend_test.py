"""The AmgX backend without AmgX: selection, the one error, config checks, cache bookkeeping.

What runs without a GPU or AmgX: choosing the backend (``use_backend``, the environment
variable, nesting), the error a solve on it raises where AmgX cannot run, the checks done
before AmgX is asked (configuration, arguments), the loader of ``libamgxsh.so`` (the
handler library's real ``dlopen``/``dlsym`` on files that are not AmgX), the answer built
from AmgX's outputs, and the cache entries that hold AmgX's solvers.  The solves themselves
are in ``amgx_gpu_test.py``.
"""

import ctypes
import gc
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sparse
from jaxsolve.sparse import _amgx
from jaxsolve.sparse import _backend

A = sparse.matrices.poisson_matrix(6)
B = jnp.ones(36)
AGGREGATION_PCG = {"solver": "PCG", "tolerance": 1e-8, "preconditioner": {
    "solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_2"}}


@pytest.fixture(autouse=True)
def no_backend_variable(monkeypatch):
    monkeypatch.delenv(_backend.ENVIRONMENT_VARIABLE, raising=False)


def test_default_backend_is_jaxsolve():
    assert sparse.current_backend() == "jaxsolve"


def test_use_backend_nests_and_restores():
    with sparse.use_backend("amgx"):
        assert sparse.current_backend() == "amgx"
        with sparse.use_backend("jaxsolve"):
            assert sparse.current_backend() == "jaxsolve"
        assert sparse.current_backend() == "amgx"
        with sparse.use_backend(None):  # back to the default choice
            assert sparse.current_backend() == "jaxsolve"
    assert sparse.current_backend() == "jaxsolve"


def test_use_backend_restores_after_an_error():
    with pytest.raises(RuntimeError, match="amgx-build"):
        with sparse.use_backend("amgx"):
            sparse.solve(A, B)
    assert sparse.current_backend() == "jaxsolve"


@pytest.mark.parametrize("name", ["AmgX", "cusparse", 3])
def test_use_backend_refuses_unknown_names(name):
    with pytest.raises(ValueError, match="backend"):
        with sparse.use_backend(name):
            pass


def test_environment_variable_selects_amgx(monkeypatch):
    monkeypatch.setenv(_backend.ENVIRONMENT_VARIABLE, "AMGX")
    assert sparse.current_backend() == "amgx"
    with pytest.raises(RuntimeError, match="AMGX_LIB"):
        sparse.solve(A, B)
    with sparse.use_backend("jaxsolve"):  # a scope overrides the variable
        x, info = sparse.solve(A, B)
    assert int(info.status) == sparse.Status.SUCCESS


def test_environment_variable_with_an_unknown_backend(monkeypatch):
    monkeypatch.setenv(_backend.ENVIRONMENT_VARIABLE, "petsc")
    with pytest.raises(ValueError, match="JAXSOLVE_SPARSE_BACKEND: unknown"):
        sparse.solve(A, B)


def test_without_a_gpu_the_one_error_says_how_to_get_amgx():
    before = sparse.cache_info()
    with sparse.use_backend("amgx"), pytest.raises(RuntimeError) as error:
        sparse.solve(A, B, config=AGGREGATION_PCG)
    message = str(error.value)
    for words in ("NVIDIA GPUs only", "'cpu'", "tools/dev amgx-build", "AMGX_LIB",
                  "use_backend('jaxsolve')"):
        assert words in message
    assert sparse.cache_info() == before  # nothing cached for a solve that could not run


@pytest.mark.parametrize("config, error, words", [
    ({"solver": "PCG", "tolerence": 1e-8}, ValueError, "not an AmgX parameter"),
    ({"solver": "PCG", "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION",
                                          "jaxsolve_smoothed_aggregation": 1}},
     ValueError, "jaxsolve extension"),
    ({"solver": "PCG", "monitor_residual": 0}, ValueError, "monitor_residual 1"),
    ({"solver": "NOSOLVER"}, ValueError, "solves nothing"),
])
def test_config_is_validated_before_amgx_is_asked(config, error, words):
    with sparse.use_backend("amgx"), pytest.raises(error, match=words):
        sparse.solve(A, B, config=config)


@pytest.mark.parametrize("keyword", [
    {"nullspace": jnp.ones(36)}, {"near_nullspace": jnp.ones((36, 1))}, {"block_dim": 2},
])
def test_unsupported_arguments_are_refused_first(keyword):
    with sparse.use_backend("amgx"), pytest.raises(ValueError, match="AmgX backend"):
        sparse.solve(A, B, **keyword)


def test_complex_systems_are_refused():
    complex_a = sparse.as_csr(A).with_values(sparse.as_csr(A).values.astype(jnp.complex64))
    with sparse.use_backend("amgx"), pytest.raises(TypeError, match="real systems"):
        sparse.solve(complex_a, B.astype(jnp.complex64))


def test_amgx_reads_the_same_settings():
    config = sparse.parse_amgx_config(AGGREGATION_PCG)
    text = _amgx.amgx_config_text(config)
    document = json.loads(text)
    assert document["config_version"] == 2
    assert sparse.parse_amgx_config(document) == config
    # jaxsolve's defaults are explicit, so AmgX's own (tolerance 1e-12, ABSOLUTE) never apply
    assert document["solver"]["tolerance"] == 1e-8
    assert document["solver"]["convergence"] == "RELATIVE_INI"
    assert document["solver"]["preconditioner"]["selector"] == "SIZE_2"


@pytest.mark.parametrize("given", [
    {**AGGREGATION_PCG, "determinism_flag": 1},
    json.dumps({"config_version": 2, "determinism_flag": 1, "solver": AGGREGATION_PCG}),
])
def test_amgx_gets_its_run_wide_settings_as_given(given):
    document = json.loads(_amgx.amgx_config_text(sparse.parse_amgx_config(given), given))
    assert document["determinism_flag"] == 1  # AmgX reads it in its default scope only
    assert "determinism_flag" not in document["solver"]


def test_amgx_must_return_its_errors():
    given = {**AGGREGATION_PCG, "exception_handling": 1}
    with sparse.use_backend("amgx"), pytest.raises(ValueError, match="exception_handling 0"):
        sparse.solve(A, B, config=given)


def test_library_path_from_the_environment(monkeypatch):
    monkeypatch.delenv("AMGX_LIB", raising=False)
    monkeypatch.delenv("AMGX_DIR", raising=False)
    assert _amgx.amgx_library_path() == "libamgxsh.so"
    monkeypatch.setenv("AMGX_DIR", "/opt/amgx")
    assert _amgx.amgx_library_path() == "/opt/amgx/lib/libamgxsh.so"
    monkeypatch.setenv("AMGX_LIB", "/tmp/build/libamgxsh.so")
    assert _amgx.amgx_library_path() == "/tmp/build/libamgxsh.so"


def _handler_library() -> ctypes.CDLL:
    """The AmgX handler library as built (CUDA 13's): it loads without a GPU."""
    return ctypes.CDLL(str(pathlib.Path(_amgx.__file__).parent
                           / "libjaxsolve_sparse_amgx_cuda13.so"))


def test_loader_names_a_missing_library():
    with pytest.raises(RuntimeError, match="cannot open shared object file") as error:
        _amgx.load_amgx(_handler_library(), "/nonexistent/libamgxsh.so")
    assert "tools/dev amgx-build" in str(error.value)


def test_loader_refuses_a_library_that_is_not_amgx():
    with pytest.raises(RuntimeError, match="is not AmgX's C library: it lacks AMGX_initialize"):
        _amgx.load_amgx(_handler_library(), "libm.so.6")


def test_amgx_solvers_live_in_the_setup_cache():
    released = []
    pattern = sparse.as_csr(A)._pattern
    cpu = jax.devices("cpu")[0]
    sparse.clear_cache()
    first = _amgx.solver_for(("amgx", "test", 1), released.append, pattern, cpu)
    again = _amgx.solver_for(("amgx", "test", 1), released.append, pattern, cpu)
    other = _amgx.solver_for(("amgx", "test", 2), released.append, pattern, cpu)
    assert first is again and first.id != other.id
    assert sparse.cache_info()[:2] == (1, 2) and sparse.cache_info().currsize == 2
    np.testing.assert_array_equal(np.asarray(first.indptr), pattern.indptr)
    ids = sorted([first.id, other.id])
    del first, again, other
    sparse.clear_cache()
    gc.collect()
    assert sorted(released) == ids  # each solver's AmgX objects freed once
    assert sparse.cache_info().currsize == 0


def test_eviction_releases_the_oldest_solver():
    released = []
    pattern = sparse.as_csr(A)._pattern
    cpu = jax.devices("cpu")[0]
    sparse.clear_cache()
    maxsize = sparse.cache_info().maxsize
    try:
        sparse.set_cache_size(1)
        oldest = _amgx.solver_for(("amgx", "test", 1), released.append, pattern, cpu).id
        _amgx.solver_for(("amgx", "test", 2), released.append, pattern, cpu)
        gc.collect()
        assert released == [oldest]
    finally:
        sparse.set_cache_size(maxsize)
        sparse.clear_cache()


@pytest.mark.parametrize("config", [
    {"solver": "PCG", "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION"}},
    {"solver": "FGMRES", "max_iters": 50, "store_res_history": 1},
])
def test_the_gpu_path_composes_with_jit_vmap_and_grad(monkeypatch, x64, config):
    """The AmgX path up to the FFI call, traced (jax.eval_shape) with the real handler
    library: the services, the implicit derivatives (Aᵀ's solver for FGMRES), vmap and
    columns give solve's shapes. Only the GPU check is passed over; nothing runs."""
    library = _amgx.bind(_handler_library())
    monkeypatch.setattr(_amgx, "require_amgx", lambda caller, *arrays: library)
    A = sparse.as_csr(sparse.matrices.convection_diffusion_matrix_2d(6, 10.0, dtype=np.float64))
    b = jnp.ones(36)
    history = (51,) if config.get("store_res_history") else (0,)
    sparse.clear_cache()

    def solve(values, b):
        with sparse.use_backend("amgx"):
            return sparse.solve(A.with_values(values), b, config=config)

    x, info = jax.eval_shape(solve, A.values, b)
    assert x.shape == (36,) and info.residual_history.shape == history
    assert info.initial_residual.shape == ()
    grads = jax.eval_shape(jax.grad(lambda v, b: jnp.sum(solve(v, b)[0]), argnums=(0, 1)),
                           A.values, b)
    assert [g.shape for g in grads] == [A.values.shape, (36,)]
    xs, infos = jax.eval_shape(jax.vmap(lambda b: solve(A.values, b)), jnp.ones((3, 36)))
    assert xs.shape == (3, 36) and infos.residual_history.shape == (3, *history)
    columns, info = jax.eval_shape(solve, A.values, jnp.ones((36, 2)))
    assert columns.shape == (36, 2) and info.status.shape == (2,)
    # A's solver, and Aᵀ's for the nonsymmetric method's reverse mode
    assert sparse.cache_info().currsize == (1 if config["solver"] == "PCG" else 2)
    sparse.clear_cache()
    gc.collect()
    assert library.JaxsolveSparseAmgxSolvers() == 0


def _answer(status, norm, norms=(), rhs=(3.0, 4.0), x=(1.0, 2.0)):
    return _amgx._answer(jnp.asarray(rhs), jnp.asarray(x), jnp.int32(len(norms) - 1),
                         jnp.int32(status), jnp.float32(norm), jnp.asarray(norms, jnp.float32))


def test_answer_is_relative_and_keeps_amgx_status():
    x, info = _answer(sparse.Status.SUCCESS, 5e-7, norms=(5.0, 0.5, 5e-7))
    np.testing.assert_allclose(info.residual, 1e-7)
    np.testing.assert_allclose(info.residual_history, [1.0, 0.1, 1e-7], rtol=1e-6)
    assert int(info.failure_reason) == sparse.FailureReason.NONE
    np.testing.assert_array_equal(x, [1.0, 2.0])
    assert jnp.isnan(info.rhs_inconsistency)
    np.testing.assert_allclose(info.initial_residual, 5.0)  # ‖rhs‖, JAX-AMG's absolute scale
    np.testing.assert_allclose(info["residual"], 5e-7, rtol=1e-6)


@pytest.mark.parametrize("status, norm, reason", [
    (sparse.Status.NOT_CONVERGED, 0.5, sparse.FailureReason.MAX_ITERS),
    (sparse.Status.DIVERGED, float("nan"), sparse.FailureReason.NONFINITE_RESIDUAL),
    (sparse.Status.DIVERGED, 50.0, sparse.FailureReason.RESIDUAL_GROWTH),
    (sparse.Status.FAILED, 50.0, sparse.FailureReason.BACKEND_FAILED),
])
def test_answer_of_a_failure_is_never_worse_than_the_guess(status, norm, reason):
    x, info = _answer(status, norm)
    assert int(info.status) == status and int(info.failure_reason) == reason
    assert sparse.FailureReason(reason).status == status
    if not norm < 5.0:  # AmgX's x is worse than x = 0: the guess comes back
        np.testing.assert_array_equal(x, [0.0, 0.0])
        assert float(info.residual) == 1.0
    else:
        np.testing.assert_allclose(info.residual, norm / 5.0)
