"""A Krylov method as AMG's coarse solver (AmgX's ``coarse_solver: "CG"``, ``"BICGSTAB"``,
``"GMRES"``): a fixed number of iterations on the coarsest level, the scope's ``max_iters``
(AmgX's 100 for a named one)."""

import jax.numpy as jnp
import numpy as np
import pyamg

import jaxsolve.sparse as jaxamg
from jaxsolve.sparse import parse_amgx_config
from jaxsolve.sparse.matrices import random_matrix, rhs_random


def preconditioner_config(coarse_solver):
    """Classical AMG coarsened to at most 40 rows."""
    return {"solver": "AMG", "min_coarse_rows": 40, "coarse_solver": coarse_solver}


def test_named_and_scoped_krylov_coarse_solvers_parse():
    amg = parse_amgx_config({"preconditioner": {"coarse_solver": "CG"}}).preconditioner.amg
    assert (amg.coarse_solver, amg.coarse_iterations, amg.coarsest_sweeps) == ("CG", 100, None)
    amg = parse_amgx_config({"preconditioner": {
        "coarse_solver": {"solver": "GMRES", "max_iters": 3}}}).preconditioner.amg
    assert (amg.coarse_solver, amg.coarse_iterations) == ("GMRES", 3)
    assert parse_amgx_config({}).preconditioner.amg.coarse_iterations is None


def test_enough_krylov_iterations_act_as_the_dense_coarse_solve(x64):
    """With more iterations than the coarsest level has rows, a Krylov coarse solve is
    exact in exact arithmetic, so the cycle is the dense-LU one; a single iteration is
    not."""
    A = pyamg.gallery.poisson((16, 16), format="csr")
    r = jnp.asarray(np.random.default_rng(0).standard_normal(A.shape[0]))
    dense = jaxamg.make_preconditioner(A, preconditioner_config("DENSE_LU_SOLVER"))(r)
    tolerance = {"rtol": 1e-8, "atol": 1e-10 * np.abs(dense).max()}
    for method in ("CG", "BICGSTAB", "GMRES"):
        exact = jaxamg.make_preconditioner(
            A, preconditioner_config({"solver": method, "max_iters": 60}))(r)
        np.testing.assert_allclose(exact, dense, **tolerance, err_msg=method)
    rough = jaxamg.make_preconditioner(A, preconditioner_config({"solver": "CG",
                                                                  "max_iters": 1}))(r)
    assert np.abs(rough - dense).max() > 1e-3 * np.abs(dense).max()


def test_large_random_matrix_demo_config_solves():
    """JAX-AMG's demo/large_random_matrix.py, at 1 000 rows instead of 100 000."""
    A = random_matrix(1000, density=0.01, seed=42)
    b = rhs_random(1000, seed=42)
    x, info = jaxamg.solve(A, b, config={"preconditioner": {"coarse_solver": "CG"}})
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS
    residual = np.linalg.norm(np.asarray(b) - np.asarray(A @ x)) / np.linalg.norm(b)
    assert residual <= 1e-5


def test_a_krylov_coarse_solver_keeps_no_dense_inverse():
    """The coarsest level then keeps its operator only: no LU inverse is computed or kept
    (what makes a large coarsest level affordable, the reason to ask for one)."""
    A = pyamg.gallery.poisson((24, 24), format="csr")
    two_levels = {"max_levels": 2, "selector": "PMIS"}
    dense = jaxamg.describe(A, {**preconditioner_config("DENSE_LU_SOLVER"), **two_levels})
    krylov = jaxamg.describe(A, {**preconditioner_config("CG"), **two_levels})
    assert dense.bytes_kept["coarsest inverse"] >= 4 * dense.rows[-1] ** 2
    assert krylov.bytes_kept.get("coarsest inverse", 0) == 0
