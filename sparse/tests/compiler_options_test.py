"""A concrete solve compiles its setup and its loop with jaxsolve's XLA options
(``_compiler_options.py``: XLA's elemental emitters on the CPU, which compile a solve's
kernels in about half the time of its fusion emitters), and a solve inside the caller's
``jax.jit`` still works (JAX refuses compiler options on a nested jit)."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sparse
from jaxsolve.sparse import (_compiler_options, _padded_setup, _setup, _solve, _structure_key,
                             matrices)
from jaxsolve.sparse._config import parse_amgx_config
from jaxsolve_testing import CPU_COMPILE_FLAGS

# The tests' XLA flags turn the fusion emitters off for every program, which would hide
# whether jaxsolve's own options do.
pytestmark = pytest.mark.skipif(
    any(flag in os.environ.get("XLA_FLAGS", "") for flag in CPU_COMPILE_FLAGS),
    reason="needs XLA's default flags: run this file alone with "
           "JAXSOLVE_TEST_DEFAULT_XLA_FLAGS=1, as its Bazel target does")

CONFIG = {"solver": "PCG", "tolerance": 1e-6, "max_iters": 50}


def fusion_emitted(compiled: jax.stages.Compiled) -> bool:
    """Whether XLA's CPU fusion emitters made ``compiled``: they wrap every unfused
    instruction into a fusion of its own (``wrapped_...``), which the elemental emitters
    leave as it is."""
    return "wrapped_" in compiled.as_text()


def test_the_detector_tells_the_emitters_apart():
    def f(x):
        return jnp.sum(jnp.sin(x) * 2 + 1)

    x = jnp.ones(1000)
    assert fusion_emitted(jax.jit(f).lower(x).compile())
    assert not fusion_emitted(_compiler_options.jit(f).lower(x).compile())


def test_a_concrete_solve_compiles_its_setup_and_loop_with_the_options():
    A = sparse.as_csr(matrices.poisson_matrix(24))
    b = jnp.ones(A.shape[0])
    sparse.clear_cache()
    _padded_setup.PROGRAMS.clear()
    x, info = sparse.solve(A, b, config=CONFIG)
    assert info.status == sparse.Status.SUCCESS
    setups = _padded_setup.PROGRAMS.programs()
    assert setups and not any(fusion_emitted(program) for program in setups)
    assert not _structure_key.DIGESTS.programs()  # the CPU's values are keyed on the host

    config = parse_amgx_config(CONFIG)
    system = _setup.System.for_matrix(A, config, None, False, True)
    state = system.state()
    matrix, numbers = system.operators(A.values, state)  # padded to a size class
    loop = _solve._solve_columns_reporting.lower(
        config, matrix, numbers, state.diagonal, _setup.resized_rows(b, matrix.n_rows)).compile()
    assert not fusion_emitted(loop)


def test_a_solve_inside_jit_compiles_with_the_callers_options():
    A = sparse.as_csr(matrices.poisson_matrix(16))
    b = jnp.ones(A.shape[0])
    x, info = jax.jit(lambda v, b: sparse.solve(A.with_values(v), b, config=CONFIG))(
        A.values, b)
    assert info.status == sparse.Status.SUCCESS
    np.testing.assert_allclose(np.asarray(A @ x), np.asarray(b), atol=1e-4)



def test_a_function_of_jit_runs_inside_the_callers_trace():
    """Called while a caller's jit traces (e.g. on arrays the caller closes over), it is
    staged as a plain jit: JAX refuses compiler options on a nested one."""
    double = _compiler_options.jit(lambda x: 2 * x)
    x = jnp.arange(3.0)
    np.testing.assert_array_equal(jax.jit(lambda: double(x))(), 2 * x)
    assert jax.eval_shape(lambda: double(x)).shape == (3,)
    assert not fusion_emitted(double.lower(x).compile())
