"""AmgX's ``norm`` (L1, L2, LMAX) and ``COMBINED_REL_INI_ABS`` test in every method (issue 32).

Each test compares with NumPy's norms of the same residuals: the iteration a solve stops at,
its reported residuals (``info.residual``, ``info.initial_residual``, the history) and the
true residual ``b − A x`` of the ``x`` it returns are in the configured norm.  Runs on two
virtual CPU devices for the sharded solve (the flag is set at import: Bazel runs each test
file in its own process; run after another file started JAX, that test skips).
"""

import re

from jaxsolve_testing import counted_compilations, use_cpu_devices

use_cpu_devices(2)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pyamg  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse  # noqa: E402

from jaxsolve import sharding, sparse  # noqa: E402
from jaxsolve.sparse import _amgx  # noqa: E402
from jaxsolve.sparse._csr import as_csr  # noqa: E402
from jaxsolve.sparse._jacobi import jacobi  # noqa: E402
from jaxsolve.sparse._krylov import bicgstab, cg, fgmres, gmres, stationary  # noqa: E402
from jaxsolve.sparse._status import FailureReason, Status  # noqa: E402

ORDERS = {"L1": 1, "L2": 2, "LMAX": np.inf}
METHODS = {"cg": cg, "bicgstab": bicgstab, "gmres": gmres, "fgmres": fgmres}


def norm(v, name):
    """NumPy's norm ``name`` (AmgX's L1, L2, LMAX) of ``v``."""
    return np.linalg.norm(np.asarray(v, np.float64), ORDERS[name])


def poisson(k):
    return scipy.sparse.csr_array(pyamg.gallery.poisson((k, k), format="csr"))


def convection_diffusion(k, peclet=0.6):
    t = scipy.sparse.diags([-1 - peclet, 2.0, -1 + peclet], [-1, 0, 1], shape=(k, k))
    identity = scipy.sparse.eye(k)
    return scipy.sparse.csr_array(scipy.sparse.kron(identity, t) + scipy.sparse.kron(t, identity))


def rhs(n, seed=0):
    return np.random.default_rng(seed).standard_normal(n)


def outcome(info):
    return Status(int(info.status)), FailureReason(int(info.failure_reason))


def jacobi_residual_norms(A, b, steps, name):
    """``‖b − A x_k‖`` of the Jacobi iterates ``x_{k+1} = x_k + D⁻¹ (b − A x_k)`` from 0."""
    inverse_diagonal = 1 / A.diagonal()
    x, norms = np.zeros_like(b), []
    for _ in range(steps + 1):
        r = b - A @ x
        norms.append(norm(r, name))
        x = x + inverse_diagonal * r
    return np.array(norms)


# (norm, convergence, tolerance, alt_rel_tolerance): ‖b‖ is 2-20 in these norms; COMBINED
# stopped by its absolute tolerance, by its relative one, and by AmgX's default relative
# tolerance 1e-12 (None: not given).
TESTS = {
    "L1-relative-ini": ("L1", "RELATIVE_INI", 1e-4, None),
    "LMAX-absolute": ("LMAX", "ABSOLUTE", 1e-3, None),
    "L1-combined-absolute": ("L1", "COMBINED_REL_INI_ABS", 1e-3, 1e-8),
    "LMAX-combined-relative": ("LMAX", "COMBINED_REL_INI_ABS", 1e-12, 1e-3),
    "L2-combined-default": ("L2", "COMBINED_REL_INI_ABS", 0.0, None),
}


def threshold(norms, convergence, tolerance, alt_rel_tolerance):
    """The threshold each iterate's residual norm is compared with (AmgX's tests)."""
    if convergence == "ABSOLUTE":
        return np.full_like(norms, tolerance)
    if convergence == "RELATIVE_MAX":
        return tolerance * np.maximum.accumulate(norms)
    if convergence == "COMBINED_REL_INI_ABS":
        alt_rel_tolerance = 1e-12 if alt_rel_tolerance is None else alt_rel_tolerance
        return np.full_like(norms, max(tolerance, alt_rel_tolerance * norms[0]))
    return np.full_like(norms, tolerance * norms[0])


class TestStoppingRule:

    @pytest.mark.parametrize("test", TESTS)
    def test_stationary_iteration_stops_where_numpy_says(self, test, x64):
        """The Jacobi iteration's residual is ``b − A x``: its norms, the iteration it stops
        at and what it reports are NumPy's, in the configured norm and test.  Its residual
        contracts by only ~0.87 a step, so where LMAX meets ABSOLUTE's tolerance the 2-norm
        does not yet: the check of the true residual after the loop is in LMAX too (in L2
        it would restart, and end ACCURACY_LIMIT)."""
        name, convergence, tolerance, alt = TESTS[test]
        A = poisson(5)  # Jacobi contracts by cos(π/6) ≈ 0.87 per step
        b = rhs(25)
        expected = jacobi_residual_norms(A, b, 400, name)
        stop = int(np.argmax(expected <= threshold(expected, convergence, tolerance, alt)))
        assert 0 < stop < 400
        options = {} if alt is None else {"alt_rel_tolerance": alt}
        matrix = as_csr(A)
        x, info = stationary(matrix.matvec, jnp.asarray(b), precondition=jacobi(matrix),
                             tolerance=tolerance, convergence=convergence, norm=name,
                             max_iters=400, store_history=True, **options)
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        assert int(info.iterations) == stop
        np.testing.assert_allclose(float(info.initial_residual), expected[0], rtol=1e-12)
        np.testing.assert_allclose(info.residual_history[:stop + 1],
                                   expected[:stop + 1] / expected[0], rtol=1e-9)
        r = b - A @ np.asarray(x)
        np.testing.assert_allclose(float(info.residual), norm(r, name) / expected[0], rtol=1e-9)
        if convergence == "ABSOLUTE":
            assert norm(r, "L2") > tolerance

    @pytest.mark.parametrize("method, name", [("cg", "L1"), ("bicgstab", "LMAX"),
                                              ("gmres", "L1"), ("fgmres", "LMAX")])
    def test_krylov_methods_report_the_true_residual_in_the_norm(self, method, name, x64):
        A = poisson(6) if method == "cg" else convection_diffusion(6)
        b = rhs(36, seed=1)
        matrix = as_csr(A)
        x, info = METHODS[method](matrix.matvec, jnp.asarray(b), precondition=jacobi(matrix),
                                  tolerance=1e-8, norm=name, store_history=True)
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        true = norm(b - A @ np.asarray(x), name) / norm(b, name)
        np.testing.assert_allclose(float(info.initial_residual), norm(b, name), rtol=1e-12)
        np.testing.assert_allclose(float(info.residual), true, rtol=1e-6)
        assert true <= 1e-8
        k = int(info.iterations)
        assert float(info.residual_history[k]) == float(info.residual)
        assert np.all(np.asarray(info.residual_history[:k]) > 1e-8)

    def test_gmres_checks_success_in_the_norm_of_the_test(self, x64):
        """GMRES checks a cycle's iterate on its true residual (its own code path): ABSOLUTE
        in LMAX stops where max |rᵢ| <= tolerance although ‖r‖₂ is larger (checked in L2 it
        would run another cycle)."""
        A = convection_diffusion(6)
        b = 100 * rhs(36, seed=2)
        x, info = gmres(as_csr(A).matvec, jnp.asarray(b), tolerance=1e-4,
                        convergence="ABSOLUTE", norm="LMAX", store_history=True)
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        r = b - A @ np.asarray(x)
        assert norm(r, "LMAX") <= 1e-4 < norm(r, "L2")
        absolute = np.asarray(info.residual_history) * norm(b, "LMAX")
        k = int(info.iterations)
        assert absolute[k] <= 1e-4 and np.all(absolute[:k] > 1e-4)

    @pytest.mark.parametrize("method, name", [("gmres", "LMAX"), ("fgmres", "L1")])
    def test_gmres_steps_track_the_residual_in_the_norm(self, method, name, x64):
        """Within a cycle GMRES's iterate ``x_k`` minimizes ``‖b − A x‖₂`` over the Krylov space
        ``K_k(A, b)``; its L1 or LMAX residual norm is formed from the basis at each step
        (no matvec), which is NumPy's norm of the least-squares residual."""
        A = convection_diffusion(5).toarray()
        b = rhs(25, seed=3)
        steps = 8
        _, info = METHODS[method](as_csr(A).matvec, jnp.asarray(b), tolerance=0.0,
                                  max_iters=steps, restart=steps, norm=name,
                                  store_history=True)
        krylov = np.stack([np.linalg.matrix_power(A, j) @ b for j in range(steps)], axis=1)
        expected = [norm(b, name)]
        for k in range(1, steps):
            basis, _ = np.linalg.qr(krylov[:, :k])
            y = np.linalg.lstsq(A @ basis, b, rcond=None)[0]
            expected.append(norm(b - A @ basis @ y, name))
        np.testing.assert_allclose(info.residual_history[:steps], np.array(expected)
                                   / expected[0], rtol=1e-7)


class TestScaling:

    @pytest.mark.parametrize("name, exponent", [("L1", 126), ("LMAX", -100)])
    def test_tiny_and_huge_right_hand_sides_solve_as_one(self, name, exponent):
        """float32: ``b · 2^126`` has entries near the largest float32 and an L1 norm above it;
        ``b · 2^-100`` entries whose squares underflow (still normal numbers).  The loop's
        vectors are scaled by a power of two, so the iterates are those of ``b`` itself, bit
        for bit."""
        A = as_csr(scipy.sparse.csr_array(poisson(8), dtype=np.float32))
        b = jnp.asarray(rhs(64, seed=4) / 3, jnp.float32)
        scaled = b * jnp.float32(2.0**exponent)
        assert bool(jnp.isfinite(scaled).all())
        solve = jax.jit(lambda b: cg(A.matvec, b, norm=name, tolerance=1e-5))  # one program
        x, info = solve(b)
        y, scaled_info = solve(scaled)
        assert outcome(scaled_info) == outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        assert int(scaled_info.iterations) == int(info.iterations)
        assert float(scaled_info.residual) == float(info.residual)
        np.testing.assert_array_equal(np.asarray(y), np.asarray(x) * np.float32(2.0**exponent))


CONFIG = {"solver": "FGMRES", "norm": "LMAX", "convergence": "COMBINED_REL_INI_ABS",
          "tolerance": 1e-6, "alt_rel_tolerance": 1e-5, "store_res_history": 1,
          "preconditioner": "JACOBI_L1"}


class TestSolveConfig:

    @pytest.mark.parametrize("solver", ["FGMRES", "JACOBI_L1"])
    def test_solve_stops_by_the_configured_norm_and_test(self, solver, x64):
        """A Krylov solver and a relaxation iterated as the solver, configured as in AmgX."""
        A = poisson(10)
        b = rhs(100, seed=5)
        x, info = sparse.solve(A, jnp.asarray(b), config={**CONFIG, "solver": solver})
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        limit = max(1e-6, 1e-5 * norm(b, "LMAX"))
        assert norm(b - A @ np.asarray(x), "LMAX") <= limit
        np.testing.assert_allclose(info["residual"], norm(b - A @ np.asarray(x), "LMAX"),
                                   rtol=1e-6)
        history = info["residual_history"]
        np.testing.assert_allclose(history[0], norm(b, "LMAX"), rtol=1e-12)
        assert history[-1] <= limit and np.all(history[:-1] > limit)

    def test_one_program_per_norm(self, x64):
        """A solve compiles its program once per configuration (and pattern), the norm and
        the test included: a repeated solve compiles nothing, another norm one program."""
        A = poisson(10)
        sparse.solve(A, jnp.asarray(rhs(100)), config=CONFIG)
        with counted_compilations() as count:
            jax.block_until_ready(sparse.solve(A, jnp.asarray(rhs(100, 1)), config=CONFIG))
        assert count[0] == 0
        with counted_compilations() as count:
            jax.block_until_ready(sparse.solve(A, jnp.asarray(rhs(100, 1)),
                                               config={**CONFIG, "norm": "L1"}))
        assert count[0] == 1

    @pytest.mark.parametrize("name", ["LMAX"])
    def test_sharded_solve_reduces_the_norm_over_devices(self, name):
        if len(jax.devices("cpu")) < 2:
            pytest.skip("needs 2 CPU devices: run this file in its own process")
        A = poisson(8)
        b = rhs(64, seed=6)
        b[50] = 10.0  # the largest entry on the second device
        config = {"solver": "PCG", "norm": name, "tolerance": 1e-5, "max_iters": 200,
                  "preconditioner": "BLOCK_JACOBI"}
        A_sharded = sharding.shard_rows(A.astype(np.float32),
                                        sharding.row_mesh(devices=jax.devices("cpu")[:2]))
        x, info = sparse.solve(A_sharded, jax.device_put(jnp.asarray(b, jnp.float32),
                                                         A_sharded.sharding), config=config)
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        np.testing.assert_allclose(float(info.initial_residual), norm(b, name), rtol=1e-5)
        true = norm(b - A @ np.asarray(x, np.float64), name)
        np.testing.assert_allclose(float(info.residual) * norm(b, name), true, rtol=0.05)


@pytest.mark.parametrize("name", ["L1", "LMAX"])
def test_amgx_backend_reports_relative_to_the_norm_of_the_config(name):
    """AmgX computes its residual norms in the config's norm; the backend divides them by
    ``‖rhs‖`` in the same norm (AmgX itself runs on the GPU only: this is its answer)."""
    rhs = jnp.array([3.0, -4.0, 1.0])
    x, info = _amgx._answer(rhs, jnp.ones(3), jnp.int32(2), jnp.int32(Status.SUCCESS),
                            jnp.float32(1e-6), jnp.array([8.0, 0.1, 1e-6], jnp.float32), name)
    np.testing.assert_allclose(float(info.initial_residual), norm(rhs, name), rtol=1e-6)
    np.testing.assert_allclose(float(info.residual), 1e-6 / norm(rhs, name), rtol=1e-6)
    np.testing.assert_allclose(info["residual"], 1e-6, rtol=1e-6)


class TestErrors:

    @pytest.mark.parametrize("call, message", [
        (lambda: cg(lambda v: v, jnp.ones(3), norm="L1_SCALED"),
         "cg: norm must be one of 'L2', 'L1', 'LMAX' or a callable v ↦ ‖v‖, got 'L1_SCALED'."),
        (lambda: cg(lambda v: v, jnp.ones(3), norm=lambda v: jnp.abs(v)),
         "cg: norm must map a vector of shape (3,) to a scalar, got (3,)."),
        (lambda: gmres(lambda v: v, jnp.ones(3), norm="LMAX", inner_product=jnp.vdot),
         "gmres: norm 'LMAX' with an inner_product: the inner product may reduce over devices,"
         " and the norm must too; pass norm as a callable v ↦ ‖v‖ that does."),
        (lambda: bicgstab(lambda v: v, jnp.ones(3), convergence="COMBINED_REL_INI_ABS",
                          alt_rel_tolerance=-1.0),
         "bicgstab: alt_rel_tolerance must be a non-negative number, got -1.0."),
    ], ids=["scaled", "callable-shape", "inner-product", "alt-rel-tolerance"])
    def test_errors(self, call, message):
        with pytest.raises(ValueError, match=re.escape(message)):
            call()

    def test_a_callable_norm_is_the_test_norm(self, x64):
        A = as_csr(poisson(5))
        b = jnp.asarray(rhs(25))
        _, named = stationary(A.matvec, b, precondition=jacobi(A), norm="L1", tolerance=1e-6)
        _, given = stationary(A.matvec, b, precondition=jacobi(A), tolerance=1e-6,
                              norm=lambda v: jnp.sum(jnp.abs(v)))
        assert int(given.iterations) == int(named.iterations)
        assert float(given.residual) == float(named.residual)
