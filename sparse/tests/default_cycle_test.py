"""The default AMG cycle, chosen for the matrix and the Krylov method (issue 29).

A configuration that names none of ``presweeps``, ``postsweeps`` and ``cycle`` leaves the
cycle to jaxsolve: the AMG preconditioner of PBICGSTAB, GMRES or FGMRES smooths twice after
its coarse-grid correction on a real matrix, V(1, 2), and once on a complex one; PCG's
stays V(1, 1), symmetric.  A cycle named by any of the three keys is AmgX's, as given.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sparse
from jaxsolve.sparse import matrices, parse_amgx_config
from jaxsolve.sparse._config import for_dtype

V11 = {"presweeps": 1, "postsweeps": 1, "cycle": "V"}
TOLERANCE = {"tolerance": 1e-8, "max_iters": 300}


def cycle(config):
    amg = config.preconditioner.amg
    return amg.presweeps, amg.postsweeps, amg.cycle


@pytest.mark.parametrize("solver", ["PBICGSTAB", "GMRES", "FGMRES"])
def test_nonsymmetric_methods_smooth_twice_after_on_real_matrices(solver):
    config = parse_amgx_config({"solver": solver})
    assert config.preconditioner.amg.default_cycle
    for dtype in (np.float32, np.float64):
        assert cycle(for_dtype(config, dtype)) == (1, 2, "V")
    for dtype in (np.complex64, np.complex128):
        assert for_dtype(config, dtype) is config
        assert cycle(config) == (1, 1, "V")


def test_pcg_and_stationary_amg_keep_one_sweep():
    for solver in ("PCG", "AMG"):
        config = parse_amgx_config({"solver": solver})
        assert for_dtype(config, np.float64) is config
    assert cycle(parse_amgx_config({"solver": "PCG"})) == (1, 1, "V")


@pytest.mark.parametrize("key, value", [("presweeps", 1), ("postsweeps", 1), ("cycle", "V"),
                                        ("cycle", "W")])
def test_a_named_cycle_key_is_kept(key, value):
    config = parse_amgx_config({"solver": "PBICGSTAB",
                                "preconditioner": {"solver": "AMG", key: value}})
    assert not config.preconditioner.amg.default_cycle
    assert for_dtype(config, np.float64) is config
    assert getattr(config.preconditioner.amg, key) == value


def test_written_out_without_the_cycle_keys_when_left_to_jaxsolve():
    config = parse_amgx_config({"solver": "FGMRES"})
    scope = config.to_amgx_dict()["solver"]["preconditioner"]
    assert not {"presweeps", "postsweeps", "cycle"} & scope.keys()
    assert parse_amgx_config(config.to_amgx_dict()) == config
    real = for_dtype(config, np.float64)
    scope = real.to_amgx_dict()["solver"]["preconditioner"]
    assert (scope["presweeps"], scope["postsweeps"], scope["cycle"]) == (1, 2, "V")
    assert parse_amgx_config(real.to_amgx_dict()) == real


def convection():
    """Upwind convection-diffusion, ε = 1e-3, 20 × 20, and a random right-hand side."""
    A = matrices.convection_diffusion_matrix_2d(20, 1e-3, np.pi / 6, 1.0, dtype=jnp.float64)
    return sparse.as_csr(A), matrices.rhs_random(20 * 20, dtype=jnp.float64)


def iterations(A, b, config):
    x, info = sparse.solve(A, b, config={**TOLERANCE, **config})
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    residual = np.linalg.norm(np.asarray(b) - np.asarray(A @ x))
    assert residual <= 1.01e-8 * np.linalg.norm(np.asarray(b))
    return int(info.iterations)


@pytest.mark.parametrize("solver, most", [("PBICGSTAB", 6), ("FGMRES", 11)])
def test_convection_takes_fewer_iterations_by_default(x64, solver, most):
    # Measured: BiCGSTAB 5 by default against V(1, 1)'s 8; FGMRES 10 against 15.
    A, b = convection()
    assert iterations(A, b, {"solver": solver}) <= most
    named = iterations(A, b, {"solver": solver, "preconditioner": {"solver": "AMG", **V11}})
    assert named > most  # the cycle asked for by name is the one that runs


def test_complex_matrix_keeps_one_sweep(x64):
    # The same convection matrix, scaled by 1 + i/2: the default cycle is V(1, 1).
    A, b = convection()
    A = A.with_values(A.values.astype(jnp.complex128) * jnp.complex128(1 + 0.5j))
    b = b.astype(jnp.complex128)
    assert iterations(A, b, {}) == iterations(A, b, {"preconditioner": {"solver": "AMG", **V11}})
