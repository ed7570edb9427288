"""JAX-AMG's Solver Configuration page (docs/config.md) run with only the imports changed.

Every configuration on the page is accepted and means what the page says: keyword
overrides, the default configuration (its ``dense_lu_num_rows``, ``exact_coarse_solve``),
``{"preconditioner": {"solver": "AMG"}}`` inheriting the classical defaults, the block
defaults with ``block_dim``, the MPI config, the flat and nested forms (a preconditioner given
to CG ignored, as AmgX ignores it), the residual history's shape in and out of ``jit``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxsolve.sparse as jaxamg
from jaxsolve.sparse import parse_amgx_config
from jaxsolve.sparse.matrices import (elasticity_matrix_2d, poisson_matrix, rhs_ones,
                                     rhs_random, tridiagonal_matrix)

A = poisson_matrix(16)
b = rhs_ones(256)

DEFAULT_CONFIG = {  # docs/config.md, "Default config"
    "solver": "PBICGSTAB",
    "preconditioner": {
        "solver": "AMG",
        "algorithm": "CLASSICAL",
        "selector": "PMIS",
        "interpolator": "D2",
        "smoother": {
            "solver": "BLOCK_JACOBI",
            "relaxation_factor": 0.9,
        },
        "presweeps": 1,
        "postsweeps": 1,
        "max_levels": 100,
        "strength_threshold": 0.5,
        "dense_lu_num_rows": 1,
        "aggressive_levels": 0,
        "coarse_solver": "DENSE_LU_SOLVER",
        "max_iters": 1,
        "cycle": "V",
    },
    "convergence": "RELATIVE_INI",
    "tolerance": 1e-6,
    "max_iters": 1000,
    "norm": "L2",
    "exact_coarse_solve": 1,
}


def solved(x, tolerance=1e-5, A=A, b=b):
    return float(jnp.linalg.norm(b - A @ x)) <= tolerance * float(jnp.linalg.norm(b))


def system64():
    """The module's system in float64: the page's tolerances (1e-6, 1e-8) are below what a
    float32 solve attains (eps·κ), so its true residual would miss them even where the
    method's recurrence reports success."""
    return poisson_matrix(16, dtype=jnp.float64), rhs_ones(256, dtype=jnp.float64)


def test_keyword_arguments_override_config():
    A, b = poisson_matrix(48), rhs_ones(48 * 48)  # plain CG needs more than 50 iterations
    # --- docs/config.md, "Configuration input modes" ---
    x, info = jaxamg.solve(
        A,
        b,
        config={"solver": "CG", "max_iters": 100},
        max_iters=50,  # overrides config["max_iters"]
    )
    # --- end of the page's block ---
    x_cg, info_cg = jaxamg.solve(A, b, config={"solver": "CG", "max_iters": 100})
    assert info_cg["iterations"] > 50
    assert info["iterations"] == 50 and info["status"] == jaxamg.AMGXStatus.NOT_CONVERGED
    x, info = jaxamg.solve(A, b, config={"solver": "CG"}, max_iters=500, tolerance=1e-4)
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS
    _, same = jaxamg.solve(A, b, config={"solver": "CG", "max_iters": 500, "tolerance": 1e-4})
    assert info["iterations"] == same["iterations"]  # the keywords set exactly those keys
    # The true residual, at float32's attainable accuracy here (cond(A) ≈ 10³): about 1e-4.
    true = float(jnp.linalg.norm(b - A @ x))
    np.testing.assert_allclose(info["residual"], true, rtol=0.3)
    assert true <= 2e-4 * float(jnp.linalg.norm(b))
    with pytest.raises(ValueError, match="'max_iter' is not an AmgX parameter"):
        jaxamg.solve(A, b, max_iter=5)


def test_default_config_as_written(x64):
    config = parse_amgx_config(DEFAULT_CONFIG)
    amg = config.preconditioner.amg
    assert (config.solver, config.tolerance, config.max_iters) == ("PBICGSTAB", 1e-6, 1000)
    assert (amg.algorithm, amg.selector, amg.interpolator, amg.cycle) == (
        "CLASSICAL", "PMIS", "D2", "V")
    assert amg.smoother.relaxation_factor == 0.9 and amg.strength_threshold == 0.5
    assert amg.min_coarse_rows == 1  # dense_lu_num_rows: AmgX's meaning
    A, b = system64()
    x, info = jaxamg.solve(A, b, config=DEFAULT_CONFIG)
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS and solved(x, 1e-6, A, b)


def test_partial_config_inherits_the_defaults():
    config = parse_amgx_config({"preconditioner": {"solver": "AMG"}})
    assert config == parse_amgx_config({})
    assert config.preconditioner.amg.algorithm == "CLASSICAL"


def test_block_defaults_with_block_dim(x64):
    block_amg = {  # docs/config.md, "Block matrices"
        "solver": "AMG",
        "algorithm": "AGGREGATION",
        "selector": "SIZE_2",
        "smoother": {"solver": "BLOCK_JACOBI", "relaxation_factor": 0.9},
        "presweeps": 1,
        "postsweeps": 1,
        "max_levels": 100,
        "min_coarse_rows": 32,
        "dense_lu_num_rows": 64,
        "coarse_solver": "DENSE_LU_SOLVER",
        "max_iters": 1,
        "cycle": "V",
    }
    E, _ = elasticity_matrix_2d(10, youngs_modulus=1.0, dtype=jnp.float64)
    rhs = jnp.ones(E.shape[0], jnp.float64)
    x, info = jaxamg.solve(E, rhs, config={"solver": "PCG", "preconditioner": block_amg,
                                           "max_iters": 200}, block_dim=2)
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS
    assert float(jnp.linalg.norm(rhs - E @ x)) <= 1e-5 * float(jnp.linalg.norm(rhs))
    assert parse_amgx_config({"preconditioner": block_amg}).preconditioner.amg.min_coarse_rows == 64


def test_mpi_flat_and_nested_configs(x64):
    mpi_config = {  # docs/config.md, "MPI config"
        "solver": "PBICGSTAB",
        "preconditioner": {"solver": "MULTICOLOR_DILU"},
        "communicator": "MPI_DIRECT",
        "max_iters": 200,
        "tolerance": 1e-8,
    }
    flat = {  # "Flat config"
        "solver": "CG",
        "preconditioner": {"solver": "JACOBI_L1"},
        "tolerance": 1e-8,
        "max_iters": 200,
    }
    nested = {  # "Nested config"
        "config_version": 2,
        "solver": {
            "solver": "PCG",
            "preconditioner": {
                "solver": "AMG",
                "smoother": "JACOBI_L1",
            },
            "tolerance": 1e-6,
            "max_iters": 200,
        },
    }
    # AmgX's CG takes no preconditioner: it is ignored, as AmgX ignores it.
    assert parse_amgx_config(flat) == parse_amgx_config(
        {"solver": "CG", "tolerance": 1e-8, "max_iters": 200})
    assert parse_amgx_config(nested).preconditioner.amg.smoother.solver == "JACOBI_L1"
    A, b = system64()
    for config in (mpi_config, flat, nested):
        x, info = jaxamg.solve(A, b, config=config)
        assert info["status"] == jaxamg.AMGXStatus.SUCCESS and solved(x, 1e-6, A, b), config


@pytest.mark.parametrize("convergence", ["ABSOLUTE", "RELATIVE_INI", "RELATIVE_INI_CORE",
                                         "RELATIVE_MAX", "RELATIVE_MAX_CORE"])
def test_convergence_criteria(convergence, x64):
    """The page's table: ‖r‖ below the tolerance, times ‖r_0‖ (RELATIVE_INI) or times the
    largest ‖r_j‖ so far (RELATIVE_MAX, the demo jax_sparse_solver_comparison's)."""
    A, b = system64()
    x, info = jaxamg.solve(A, b, config={"convergence": convergence, "tolerance": 1e-6,
                                         "store_res_history": 1})
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS
    history = np.asarray(info["residual_history"])
    scale = {"ABSOLUTE": 1.0, "RELATIVE_INI": history[0],
             "RELATIVE_MAX": history.max()}[convergence.removesuffix("_CORE")]
    assert info["residual"] <= 1e-6 * scale * (1 + 1e-5) < history[-2]


def test_residual_history_as_documented():
    """Entry i the residual norm after outer iteration i, entry 0 the initial one; trimmed
    to iterations + 1 outside jit, max_iters + 1 NaN-padded inside."""
    config = {"solver": "CG", "max_iters": 300, "store_res_history": 1}
    x, info = jaxamg.solve(A, b, config=config)
    history = np.asarray(info["residual_history"])
    assert history.shape == (info["iterations"] + 1,)
    np.testing.assert_allclose(history[0], np.linalg.norm(b), rtol=1e-6)  # ‖r_0‖ = ‖b‖
    np.testing.assert_allclose(history[-1], info["residual"], rtol=1e-6)
    padded = np.asarray(jax.jit(  # inside jit: info's keys answered on traced arrays
        lambda b: jaxamg.solve(A, b, config=config)[1]["residual_history"])(b))
    assert padded.shape == (301,)
    np.testing.assert_allclose(padded[: info["iterations"] + 1], history, rtol=1e-4)
    assert np.isnan(padded[info["iterations"] + 1:]).all()
    _, unstored = jaxamg.solve(A, b, config={"solver": "CG"})
    with pytest.raises(KeyError, match="store_res_history=1"):
        unstored["residual_history"]


def test_relaxation_preconditioner_scope_runs_amgx_default_sweeps(x64):
    """A relaxation preconditioner in a scope of its own without max_iters, as JAX-AMG's
    mpi_autodiff demo passes it, runs AmgX's registered max_iters, 100 sweeps per
    application (JAX-AMG fills max_iters 1 only into an AMG scope); a named relaxation and
    make_preconditioner's flat scope sweep once, an AMG scope cycles once."""
    dilu = {"solver": "MULTICOLOR_DILU"}
    demo = {"solver": "PBICGSTAB", "preconditioner": dilu, "max_iters": 100,
            "monitor_residual": 1, "tolerance": 1e-6}
    assert parse_amgx_config(demo).preconditioner.max_iters == 100
    assert parse_amgx_config({"config_version": 2, "solver": {
        "solver": "PCG", "preconditioner": {"scope": "p", "solver": "BLOCK_JACOBI"}}}
    ).preconditioner.max_iters == 100
    for config, sweeps in [({**demo, "preconditioner": {**dilu, "max_iters": 3}}, 3),
                           ({**demo, "preconditioner": "MULTICOLOR_DILU"}, 1),
                           ({**demo, "preconditioner": {"solver": "AMG"}}, 1)]:
        assert parse_amgx_config(config).preconditioner.max_iters == sweeps
    A = tridiagonal_matrix(256, dtype=jnp.float64)  # the demo's matrix, 1024 rows there
    b = rhs_random(256, seed=0)
    assert jaxamg.make_preconditioner(A, dilu).config.max_iters == 1
    # One DILU sweep an application needs about 124 BiCGSTAB iterations here (scipy, 1024
    # rows: 527 for one sweep, 36 for 100): the demo's max_iters 100 then stops short.
    x, info = jaxamg.solve(A, b, config=demo)
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS and info["iterations"] <= 20, info
    assert solved(x, 1e-6, A, b)
    _, info = jaxamg.solve(A, b, config={**demo, "preconditioner": "MULTICOLOR_DILU"})
    assert info["status"] == jaxamg.AMGXStatus.NOT_CONVERGED


def test_many_sweeps_run_in_a_loop():
    """A preconditioner of 100 sweeps traces no more than one of 5 (unrolled, AmgX's default
    scope took 87 s of CPU to compile) and equals the sweeps applied one by one."""
    A = poisson_matrix(8)
    b = rhs_ones(64)
    traced = {sweeps: len(str(jax.make_jaxpr(jaxamg.make_preconditioner(
        A, {"solver": "MULTICOLOR_DILU", "max_iters": sweeps}))(b))) for sweeps in (5, 100)}
    assert traced[100] <= traced[5] + 10, traced
    one = jaxamg.make_preconditioner(A, {"solver": "MULTICOLOR_DILU"})
    x = one(b)
    for _ in range(5):
        x = x + one(b - A @ x)
    six = jaxamg.make_preconditioner(A, {"solver": "MULTICOLOR_DILU", "max_iters": 6})
    np.testing.assert_allclose(six(b), x, rtol=1e-5, atol=1e-6)
