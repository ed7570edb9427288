"""Tests for jaxsolve.sparse's Krylov methods (cg, bicgstab, gmres, fgmres) and preconditioners."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pyamg
import pytest
import scipy.sparse
import scipy.sparse.linalg

import jaxsolve.sparse
from jaxsolve.sparse import _csr, _krylov, _status
from jaxsolve.sparse._csr import CsrMatrix, as_csr
from jaxsolve.sparse._krylov import bicgstab, cg, fgmres, gmres
from jaxsolve.sparse._jacobi import jacobi
from jaxsolve.sparse._status import FailureReason, Status

SOLVERS = {"cg": cg, "bicgstab": bicgstab, "gmres": gmres, "fgmres": fgmres}

# What jaxsolve/sparse/__init__.py is to export from these modules (the docstring
# examples use the public names).


def poisson(k):
    """The 2-D 5-point Laplacian on a k × k grid (SPD), from pyamg."""
    return pyamg.gallery.poisson((k, k), format="csr")


def convection_diffusion(k, peclet=0.6):
    """-Δu + c·∇u by central differences on a k × k grid: nonsymmetric."""
    t = scipy.sparse.diags([-1 - peclet, 2.0, -1 + peclet], [-1, 0, 1], shape=(k, k))
    identity = scipy.sparse.eye(k)
    return (scipy.sparse.kron(identity, t) + scipy.sparse.kron(t, identity)).tocsr()


def rhs(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    sample = rng.standard_normal(n)
    if np.issubdtype(dtype, np.complexfloating):
        sample = sample + 1j * rng.standard_normal(n)
    return jnp.asarray(sample.astype(dtype))


def csr(matrix, dtype):
    return as_csr(scipy.sparse.csr_array(matrix).astype(dtype))


def outcome(info):
    """``(status, failure reason)`` of one solve, as enums (readable in failures)."""
    return Status(int(info.status)), FailureReason(int(info.failure_reason))


def assert_consistent(info, max_iters):
    """residual_history: 1 first, finite up to `iterations`, NaN after; info.residual the
    smallest entry (that of the iterate returned: the last one on success)."""
    k = int(info.iterations)
    history = np.asarray(info.residual_history)
    assert history.shape == (max_iters + 1,)
    assert history[0] == 1.0
    assert history[: k + 1].min() == info.residual
    assert np.isfinite(history[: k + 1]).all() and np.isnan(history[k + 1 :]).all()


SINGULAR = CsrMatrix(np.array([1.0, 0.0]), np.array([0, 1]), np.array([0, 1, 2]), (2, 2))


class TestKrylov:
    """Behaviour every method shares."""

    @pytest.mark.parametrize("name", SOLVERS)
    @pytest.mark.parametrize("dtype", ["float32", "float64"])
    def test_krylov_against_scipy(self, name, dtype, request):
        if dtype == "float64":
            request.getfixturevalue("x64")
        tolerance = 1e-6 if dtype == "float32" else 1e-11
        reference = poisson(8) if name == "cg" else convection_diffusion(8)
        A = csr(reference, dtype)
        b = rhs(A.shape[0], dtype)
        x, info = SOLVERS[name](A.matvec, b, tolerance=tolerance, max_iters=300,
                                store_history=True)
        assert x.dtype == dtype
        assert int(info.status) == Status.SUCCESS and int(info.failure_reason) == 0
        assert info.residual <= tolerance
        assert_consistent(info, 300)
        expected = scipy.sparse.linalg.spsolve(reference.tocsc(), np.asarray(b, np.float64))
        atol = (3e-4 if dtype == "float32" else 1e-8) * np.abs(expected).max()
        np.testing.assert_allclose(x, expected, rtol=0, atol=atol)

    @pytest.mark.parametrize("name", ["cg", "bicgstab", "gmres"])
    def test_krylov_iterates_against_scipy(self, name, x64):
        """The residual history matches scipy's iterates, step by step.

        scipy's cg and bicgstab precondition as ours do; its gmres preconditions
        on the left, so gmres is compared without a preconditioner.
        """
        scaling = scipy.sparse.diags(np.logspace(0, 1, 64))
        reference = poisson(8) if name == "cg" else convection_diffusion(8)
        reference = (scaling @ reference @ scaling).tocsr()
        A = csr(reference, np.float64)
        b = np.asarray(rhs(64, np.float64))
        preconditioned = name != "gmres"
        _, info = SOLVERS[name](
            A.matvec, jnp.asarray(b), tolerance=1e-8,
            precondition=jacobi(A) if preconditioned else None, store_history=True,
        )
        residuals = []
        if preconditioned:
            callback = dict(callback=lambda xk: residuals.append(
                np.linalg.norm(b - reference @ xk) / np.linalg.norm(b)))
        else:
            callback = dict(callback=residuals.append, callback_type="pr_norm", restart=20)
        getattr(scipy.sparse.linalg, name)(
            reference, b, rtol=1e-8, **callback,
            M=scipy.sparse.diags(1 / reference.diagonal()) if preconditioned else None,
        )
        assert int(info.iterations) == len(residuals)
        np.testing.assert_allclose(
            info.residual_history[1 : len(residuals) + 1], residuals, rtol=1e-6
        )

    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_complex(self, name):
        rng = np.random.default_rng(1)
        n = 30
        m = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
        dense = m @ m.conj().T / n + np.eye(n) if name == "cg" else m / np.sqrt(n) + 2 * np.eye(n)
        A = as_csr(dense.astype(np.complex64))
        b = rhs(n, np.complex64)
        x, info = SOLVERS[name](A.matvec, b, tolerance=1e-6)
        assert x.dtype == jnp.complex64 and int(info.status) == Status.SUCCESS
        np.testing.assert_allclose(x, np.linalg.solve(dense, np.asarray(b)), atol=1e-4)

    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_not_converged(self, name):
        A = csr(convection_diffusion(8), np.float32)
        x, info = SOLVERS[name](A.matvec, rhs(64, np.float32), max_iters=3, store_history=True)
        assert int(info.status) == Status.NOT_CONVERGED
        assert int(info.failure_reason) == FailureReason.MAX_ITERS
        assert int(info.iterations) == 3
        assert_consistent(info, 3)
        assert 0 < info.residual < 1
        with pytest.raises(_status.SolveError, match="Increase max_iters"):
            _status.raise_on_failure(info)

    @pytest.mark.parametrize("name", ["cg", "bicgstab"])
    def test_a_traced_iteration_limit_stops_the_loop(self, name):
        # A program that chooses its method at run time gives one of them no iterations.
        A = csr(poisson(8), np.float32)
        b = rhs(64, np.float32)
        solve = jax.jit(lambda limit: SOLVERS[name](A.matvec, b, max_iters=20,
                                                    iteration_limit=limit))
        x, info = solve(0)
        assert outcome(info) == (Status.NOT_CONVERGED, FailureReason.MAX_ITERS)
        assert int(info.iterations) == 0 and not np.any(np.asarray(x))
        _, info = solve(2)
        assert int(info.iterations) == 2
        _, info = solve(100)  # at most max_iters, as without a limit
        _, unlimited = SOLVERS[name](A.matvec, b, max_iters=20)
        assert outcome(info) == outcome(unlimited)
        assert int(info.iterations) == int(unlimited.iterations)

    @pytest.mark.parametrize(
        "name, reason",
        [("cg", FailureReason.NOT_POSITIVE_DEFINITE),
         ("bicgstab", FailureReason.BICGSTAB_BREAKDOWN),
         ("gmres", FailureReason.GMRES_BREAKDOWN),
         ("fgmres", FailureReason.GMRES_BREAKDOWN)],
    )
    def test_krylov_singular_fails(self, name, reason):
        """diag(1, 0) x = (0, 1) has no solution: each method detects its breakdown."""
        x, info = SOLVERS[name](SINGULAR.matvec, jnp.array([0.0, 1.0]))
        assert outcome(info) == (Status.FAILED, reason)
        np.testing.assert_array_equal(x, [0.0, 0.0])  # the last good iterate
        assert info.residual == 1.0

    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_nonfinite_input_fails_under_jit(self, name):
        A = csr(poisson(4), np.float32)
        solve = jax.jit(lambda b: SOLVERS[name](A.matvec, b))
        x, info = solve(rhs(16, np.float32).at[3].set(jnp.nan))
        assert outcome(info) == (Status.FAILED, FailureReason.NONFINITE_INPUT)
        assert int(info.iterations) == 0

    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_trivial_cases(self, name):
        """A zero b gives x = 0; an exact x0 stops at once; both without iterating."""
        A = csr(poisson(4), np.float32)
        solver = SOLVERS[name]
        x, info = solver(A.matvec, jnp.zeros(16), x0=jnp.ones(16), max_iters=5)
        np.testing.assert_array_equal(x, np.zeros(16))
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        assert (int(info.iterations), float(info.residual)) == (0, 0.0)
        x_exact = jnp.ones(16)
        x, info = solver(A.matvec, A @ x_exact, x0=x_exact)
        assert (int(info.status), int(info.iterations)) == (Status.SUCCESS, 0)
        np.testing.assert_array_equal(x, x_exact)

    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_absolute_convergence(self, name):
        A = csr(poisson(6), np.float32)
        b = 100 * rhs(36, np.float32)
        x, info = SOLVERS[name](A.matvec, b, tolerance=1e-2, convergence="ABSOLUTE",
                                store_history=True)
        assert int(info.status) == Status.SUCCESS
        k = int(info.iterations)
        norms = np.asarray(info.residual_history) * float(jnp.linalg.norm(b))
        assert norms[k] <= 1e-2 < norms[k - 1]
        # "RELATIVE_INI" with the same tolerance would have stopped earlier.
        assert info.residual_history[k - 1] <= 1e-2

    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_relative_max_convergence(self, name):
        """RELATIVE_MAX (AmgX's) stops at the first k with ‖r_k‖ <= tol · max_{j<=k} ‖r_j‖.

        On a diagonal matrix of condition 10⁴, CG's residual first grows above ‖r_0‖, so
        it stops earlier than RELATIVE_INI would; GMRES's never grows."""
        A = csr(scipy.sparse.diags(np.logspace(0, 4, 30)), np.float32)
        b = rhs(30, np.float32, seed=2)
        x, info = SOLVERS[name](A.matvec, b, tolerance=1e-2, convergence="RELATIVE_MAX",
                                store_history=True, max_iters=200)
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        k = int(info.iterations)
        history = np.asarray(info.residual_history)
        largest = np.maximum.accumulate(history[:k + 1])
        assert history[k] <= 1e-2 * largest[k]
        assert np.all(history[:k] > 1e-2 * largest[:k])
        _, initial = SOLVERS[name](A.matvec, b, tolerance=1e-2, max_iters=200)
        assert k <= int(initial.iterations)  # never stricter than RELATIVE_INI
        if name == "cg":  # its ‖r‖ reached 3.4 ‖r_0‖
            assert largest[k] > 3 and k < int(initial.iterations)

    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_jit(self, name):
        A = csr(poisson(6) if name == "cg" else convection_diffusion(6), np.float32)
        b = rhs(36, np.float32)

        @jax.jit
        def solve(values, b):
            M = A.with_values(values)
            return SOLVERS[name](M.matvec, b, precondition=jacobi(M))

        x, info = solve(A.values, b)
        assert int(info.status) == Status.SUCCESS
        np.testing.assert_allclose(A @ x, b, rtol=0, atol=1e-4)

    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_vmap_one_loop(self, name):
        """vmap is one batched while_loop; finished columns are frozen."""
        diagonal = jnp.arange(1.0, 9.0)
        easy, hard = jnp.eye(8)[0], jnp.ones(8)  # 1 vs 8 distinct eigenvalues
        solve = jax.vmap(lambda b: SOLVERS[name](lambda v: diagonal * v, b, max_iters=20,
                                                 store_history=True))
        columns = jnp.stack([easy, hard])
        jaxpr = jax.make_jaxpr(solve)(columns)
        assert [eqn.primitive.name for eqn in jaxpr.eqns].count("while") == 1
        x, info = solve(columns)
        np.testing.assert_array_equal(info.iterations, [1, 8])
        np.testing.assert_array_equal(info.status, [Status.SUCCESS] * 2)
        np.testing.assert_allclose(x, columns / diagonal[None, :], rtol=1e-5)
        assert np.isnan(info.residual_history[0, 2:]).all()
        assert np.isfinite(info.residual_history[1, :9]).all()

    @pytest.mark.parametrize(
        "call, error, message",
        [
            (lambda s: s(lambda v: v, jnp.ones((3, 2))), ValueError,
             "{name}: b must be a vector of shape (n,), got shape (3, 2); for several"
             " right-hand sides, jax.vmap {name} over them"),
            (lambda s: s(lambda v: v, jnp.ones(3), jnp.ones(2)), ValueError,
             "{name}: x0 must have the shape of b, (3,), got (2,)."),
            (lambda s: s(lambda v: v[:2], jnp.ones(3)), ValueError,
             "{name}: matvec must map a vector of shape (3,) to one of the same shape"
             " (a square operator), got (2,)."),
            (lambda s: s(lambda v: v, jnp.ones(3), precondition=lambda r: r[1:]), ValueError,
             "{name}: precondition must map a vector of shape (3,) to one of the same shape"),
            (lambda s: s(as_csr(np.eye(3)), jnp.ones(3)), TypeError,
             "{name}: matvec must be a callable on vectors (for a CsrMatrix A, pass"
             " A.matvec), got CsrMatrix."),
            (lambda s: s(lambda v: v, jnp.ones(3), max_iters=2.0), ValueError,
             "{name}: max_iters must be an int from 0 to 2147483647 (2**31 - 1: iterations"
             " are counted in int32), got 2.0."),
            (lambda s: s(lambda v: v, jnp.ones(3), max_iters=2**31), ValueError,
             "{name}: max_iters must be an int from 0 to 2147483647 (2**31 - 1: iterations"
             " are counted in int32), got 2147483648."),
            (lambda s: s(lambda v: v, jnp.ones(3), store_history=1), TypeError,
             "{name}: store_history must be a bool (static), got 1."),
            (lambda s: s(lambda v: v, jnp.ones(3), convergence="RELATIVE_MAX_CORE"), ValueError,
             "{name}: convergence must be one of 'RELATIVE_INI', 'ABSOLUTE', 'RELATIVE_MAX',"
             " 'COMBINED_REL_INI_ABS', got 'RELATIVE_MAX_CORE'."),
            (lambda s: s(lambda v: v, jnp.ones(3), tolerance=-1.0), ValueError,
             "{name}: tolerance must be a non-negative number, got -1.0."),
        ],
        ids=["b-matrix", "x0-shape", "matvec-shape", "precondition-shape", "matvec-type",
             "max-iters", "max-iters-int32", "store-history", "convergence", "tolerance"],
    )
    @pytest.mark.parametrize("name", SOLVERS)
    def test_krylov_errors(self, name, call, error, message):
        with pytest.raises(error, match=re.escape(message.format(name=name))):
            call(SOLVERS[name])


class TestCg:
    def test_a_preconditioner_is_traced_once(self):
        """CG traces its preconditioner where its loop applies it, once: checking its
        shape by tracing it beforehand too doubled the tracing of an AMG cycle."""
        traced = []

        def precondition(r):
            traced.append(r.shape)
            return r / 2

        x, info = cg(lambda v: 2 * v, jnp.ones(3), precondition=precondition)
        assert int(info.status) == Status.SUCCESS and traced == [(3,)]
        np.testing.assert_allclose(x, 0.5)

    def test_cg_jacobi_helps_on_badly_scaled_matrix(self, x64):
        scaling = scipy.sparse.diags(np.logspace(0, 3, 64))
        reference = (scaling @ poisson(8) @ scaling).tocsr()
        A = csr(reference, np.float64)
        b = rhs(64, np.float64)
        _, plain = cg(A.matvec, b, tolerance=1e-8, max_iters=400)
        x, preconditioned = cg(A.matvec, b, precondition=jacobi(A), tolerance=1e-8, max_iters=400)
        assert int(preconditioned.status) == Status.SUCCESS
        assert 3 * int(preconditioned.iterations) < int(plain.iterations)
        expected = scipy.sparse.linalg.spsolve(reference.tocsc(), np.asarray(b))
        np.testing.assert_allclose(x, expected, rtol=1e-5, atol=1e-12)

    @pytest.mark.parametrize("config", [None, {"solver": "BLOCK_JACOBI"}])
    def test_real_preconditioner_on_a_complex_residual(self, config, x64):
        # M⁻¹ of a real matrix is real: it acts on the real and imaginary parts alike (the
        # imaginary part was dropped), so CG solves A x = i b as it solves A x = b.
        A = csr(poisson(8), np.float64)
        M = jaxsolve.sparse.make_preconditioner(A, config)
        b = np.asarray(rhs(64, np.float64))
        r = b + 2j * b[::-1]
        Mb, Mb_reversed = np.asarray(M(b)), np.asarray(M(b[::-1].copy()))
        np.testing.assert_allclose(M(r), Mb + 2j * Mb_reversed, rtol=1e-12)
        np.testing.assert_allclose(M(np.stack([r, 1j * b], axis=1))[:, 1], 1j * Mb,
                                   rtol=1e-12)
        x, info = cg(A.matvec, jnp.asarray(1j * b), precondition=M, tolerance=1e-10)
        assert int(info.status) == Status.SUCCESS
        np.testing.assert_allclose(x, 1j * scipy.sparse.linalg.spsolve(poisson(8), b),
                                   rtol=1e-7)

    def test_preconditioner_keeps_a_float32_matrix_float32_with_x64(self, x64):
        M = jaxsolve.sparse.make_preconditioner(csr(poisson(8), np.float32))
        assert M(np.ones(64, np.float32)).dtype == np.float32

    def test_cg_indefinite_fails(self):
        A = as_csr(np.diag([1.0, -1.0]).astype(np.float32))
        _, info = cg(A.matvec, jnp.ones(2))
        assert outcome(info) == (Status.FAILED, FailureReason.NOT_POSITIVE_DEFINITE)

    def test_cg_preconditioner_not_positive_definite_fails(self):
        A = csr(poisson(3), np.float32)
        _, info = cg(A.matvec, jnp.ones(9), precondition=lambda r: -r)
        assert outcome(info) == (Status.FAILED, FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE)
        assert int(info.iterations) == 0

    def test_cg_residual_growth_diverges(self):
        """CG on a (nonsymmetric) matrix it does not apply to: r₁ = (-10¹¹, 0)."""
        A = as_csr(np.array([[1.0, 1e11], [0.0, 1.0]], np.float32))
        _, info = cg(A.matvec, jnp.array([0.0, 1.0]))
        assert outcome(info) == (Status.DIVERGED, FailureReason.RESIDUAL_GROWTH)
        assert int(info.iterations) == 1

    def test_cg_nan_from_traced_zero_diagonal_diverges(self):
        """jacobi cannot check traced values; the Inf it makes ends as DIVERGED, and the
        finite x0 comes back, not the NaN iterate."""
        A = as_csr(np.array([[0.0, 1.0], [1.0, 2.0]], np.float32))

        @jax.jit
        def solve(values):
            M = A.with_values(values)
            return cg(M.matvec, jnp.ones(2), precondition=jacobi(M))

        x, info = solve(A.values)
        assert outcome(info) == (Status.DIVERGED, FailureReason.NONFINITE_RESIDUAL)
        np.testing.assert_array_equal(x, [0.0, 0.0])
        np.testing.assert_allclose(info.residual, 1.0, rtol=1e-6)


class TestBicgstab:
    def test_bicgstab_stagnation_fails(self):
        """For [[1, 1], [1, 0]] and b = e₁: s = (0, -1), t = A s = (-1, 0) ⊥ s, so ω = 0."""
        A = as_csr(np.array([[1.0, 1.0], [1.0, 0.0]], np.float32))
        x, info = bicgstab(A.matvec, jnp.array([1.0, 0.0]))
        assert outcome(info) == (Status.FAILED, FailureReason.BICGSTAB_STAGNATION)
        np.testing.assert_array_equal(x, [1.0, 0.0])  # the half step is kept
        assert info.residual == 1.0

    def test_bicgstab_right_preconditioning_monitors_true_residual(self):
        A = csr(convection_diffusion(8), np.float32)
        b = rhs(64, np.float32)
        x, info = bicgstab(A.matvec, b, precondition=jacobi(A), tolerance=1e-5)
        true_residual = jnp.linalg.norm(b - A @ x) / jnp.linalg.norm(b)
        assert int(info.status) == Status.SUCCESS
        np.testing.assert_allclose(true_residual, info.residual, rtol=0.1, atol=1e-6)


class TestGmres:
    def test_gmres_restart(self, x64):
        A = csr(convection_diffusion(8, peclet=0.9), np.float64)
        b = rhs(64, np.float64)
        _, full = gmres(A.matvec, b, tolerance=1e-10, restart=64, max_iters=400,
                        store_history=True)
        _, restarted = gmres(A.matvec, b, tolerance=1e-10, restart=4, max_iters=400,
                             store_history=True)
        assert int(full.status) == int(restarted.status) == Status.SUCCESS
        assert int(full.iterations) < int(restarted.iterations)
        for info in (full, restarted):  # the minimal residual never grows
            history = np.asarray(info.residual_history)[: int(info.iterations) + 1]
            assert np.all(np.diff(history) <= 1e-12)

    def test_gmres_preconditioned(self, x64):
        scaling = scipy.sparse.diags(np.logspace(0, 2, 64))
        A = csr(scaling @ convection_diffusion(8), np.float64)
        b = rhs(64, np.float64)
        _, plain = gmres(A.matvec, b, tolerance=1e-8, restart=10, max_iters=400)
        x, preconditioned = gmres(
            A.matvec, b, precondition=jacobi(A), tolerance=1e-8, restart=10, max_iters=400
        )
        assert int(preconditioned.status) == Status.SUCCESS
        assert int(preconditioned.iterations) < int(plain.iterations)
        true_residual = jnp.linalg.norm(b - A @ x) / jnp.linalg.norm(b)
        np.testing.assert_allclose(true_residual, preconditioned.residual, rtol=1e-3)

    def test_fgmres_equals_gmres_for_fixed_preconditioner(self):
        A = csr(convection_diffusion(6), np.float32)
        b = rhs(36, np.float32)
        x, info = gmres(A.matvec, b, precondition=jacobi(A), restart=5)
        x_flexible, info_flexible = fgmres(A.matvec, b, precondition=jacobi(A), restart=5)
        assert int(info.iterations) == int(info_flexible.iterations)
        np.testing.assert_allclose(x, x_flexible, rtol=1e-4, atol=1e-6)

    def test_fgmres_variable_preconditioner(self):
        """Inner CG steps make M⁻¹ nonlinear: FGMRES still reaches the true residual."""
        A = csr(poisson(6), np.float32)
        b = rhs(36, np.float32)

        def inner_cg(r):
            return cg(A.matvec, r, max_iters=2)[0]

        x, info = fgmres(A.matvec, b, precondition=inner_cg, tolerance=1e-5, restart=10)
        assert int(info.status) == Status.SUCCESS
        assert jnp.linalg.norm(b - A @ x) <= 2e-5 * jnp.linalg.norm(b)

    def test_gmres_restart_error(self):
        message = "gmres: restart must be a positive int, got 0."
        with pytest.raises(ValueError, match=re.escape(message)):
            gmres(lambda v: v, jnp.ones(3), restart=0)


class TestJacobi:
    def test_jacobi_scales_by_inverse_diagonal(self):
        A = csr(convection_diffusion(4), np.float32)
        r = rhs(16, np.float32)
        np.testing.assert_allclose(jacobi(A)(r), r / A.diagonal(), rtol=1e-6)
        columns = jnp.stack([r, 2 * r], axis=1)
        np.testing.assert_allclose(jacobi(A)(columns), columns / A.diagonal()[:, None], rtol=1e-6)

    def test_jacobi_is_a_pytree(self):
        A = csr(poisson(3), np.float32)
        r = rhs(9, np.float32)
        np.testing.assert_allclose(jax.jit(lambda P, r: P(r))(jacobi(A), r), r / 4, rtol=1e-6)

    def test_jacobi_errors(self):
        zero_diagonal = as_csr(np.array([[1.0, 2.0], [3.0, 0.0]], np.float32))
        with pytest.raises(ValueError, match=re.escape(
                "jacobi: A has 1 zero diagonal entries (rows [1]), so D⁻¹ does not exist")):
            jacobi(zero_diagonal)
        message = "jacobi: A must be square, got shape (2, 3)."
        with pytest.raises(ValueError, match=re.escape(message)):
            jacobi(as_csr(np.ones((2, 3), np.float32)))
        with pytest.raises(TypeError, match=re.escape(
                "jacobi: A must be a CsrMatrix, got ndarray; convert it with"
                " jaxsolve.sparse.as_csr(A).")):
            jacobi(np.eye(2))


class TestInnerProduct:
    @pytest.mark.parametrize("method", [cg, bicgstab, gmres, fgmres])
    def test_inner_product_is_used_for_every_reduction(self, method):
        # An inner product over a "duplicated" vector, as a sharded solve sums over devices:
        # each entry counted twice gives the same iterates, and every reduction goes through it.
        A = as_csr(poisson(6))
        b = jnp.ones(A.shape[0])
        calls = []

        def doubled(u, v):
            calls.append(1)
            return 2 * jnp.vdot(u, v)

        x_ref, info_ref = method(A.matvec, b, precondition=jacobi(A), tolerance=1e-6)
        x, info = method(A.matvec, b, precondition=jacobi(A), tolerance=1e-6,
                         inner_product=doubled)
        assert calls
        assert int(info.iterations) == int(info_ref.iterations)
        np.testing.assert_allclose(x, x_ref, rtol=1e-4, atol=1e-5)

    def test_inner_product_errors(self):
        with pytest.raises(TypeError, match="inner_product must be a callable"):
            cg(lambda v: v, jnp.ones(3), inner_product=1.0)


def two_jacobi_sweeps(A, omega):
    """Two damped Jacobi sweeps from zero as a preconditioner: symmetric, and indefinite
    where ω λ(D⁻¹A) > 2 (an AMG cycle whose smoother diverges behaves alike)."""
    diagonal = A.diagonal()

    def precondition(r):
        z = omega * r / diagonal
        return z + omega * (r - A @ z) / diagonal

    return precondition


class TestNeverWorseThanX0:
    """A breakdown or divergence returns the best iterate met, never one worse than x0."""

    def test_cg_indefinite_preconditioner_at_the_first_step_returns_x0(self):
        A = csr(poisson(8), np.float32)
        b = rhs(64, np.float32)
        x0 = 0.1 * rhs(64, np.float32, seed=1)
        for start in (None, x0):
            x, info = cg(A.matvec, b, start, precondition=two_jacobi_sweeps(A, 1.8),
                         store_history=True)
            assert outcome(info) == (Status.FAILED,
                                     FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE)
            # The one step CG took raised the residual; its iterate is not returned.
            assert int(info.iterations) == 1 and info.residual_history[1] > 1
            np.testing.assert_array_equal(x, np.zeros(64) if start is None else x0)
            np.testing.assert_allclose(info.residual, 1.0, rtol=1e-6)

    def test_cg_indefinite_preconditioner_returns_the_best_iterate(self):
        A = csr(poisson(8), np.float32)
        b = rhs(64, np.float32)
        x, info = cg(A.matvec, b, precondition=two_jacobi_sweeps(A, 1.2), store_history=True)
        assert outcome(info) == (Status.FAILED,
                                 FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE)
        history = np.asarray(info.residual_history)[: int(info.iterations) + 1]
        assert history[-1] > history.min()  # the last iterate is not the best one
        true = jnp.linalg.norm(b - A @ x) / jnp.linalg.norm(b)
        np.testing.assert_allclose(true, history.min(), rtol=1e-4)
        assert info.residual == history.min() < 1

    @pytest.mark.parametrize("name", ["bicgstab", "stationary"])
    def test_nan_from_the_preconditioner_keeps_the_best_iterate(self, name):
        """A preconditioner that turns NaN once the residual is small (a stand-in for one that
        overflows): the solve stops DIVERGED with the finite best iterate, not NaN."""
        A = csr(convection_diffusion(8), np.float32)
        b = rhs(64, np.float32)
        M = jacobi(A)
        # The loop's residuals are scaled to norm in [0.5, 1) at the start.
        poisoned = lambda r: jnp.where(jnp.vdot(r, r) < 1e-3, jnp.nan, 1) * M(r)
        method = bicgstab if name == "bicgstab" else _krylov.stationary
        x, info = method(A.matvec, b, precondition=poisoned, store_history=True)
        assert outcome(info) == (Status.DIVERGED, FailureReason.NONFINITE_RESIDUAL)
        assert np.isfinite(x).all()
        history = np.asarray(info.residual_history)[: int(info.iterations) + 1]
        true = jnp.linalg.norm(b - A @ x) / jnp.linalg.norm(b)
        assert info.residual == np.nanmin(history) < 0.1
        np.testing.assert_allclose(true, info.residual, rtol=1e-3)

    @pytest.mark.parametrize("name", ["gmres", "fgmres"])
    def test_gmres_cycle_with_nan_keeps_the_iterate_before_it(self, name):
        """The preconditioner turns NaN on the cycle's second basis vector (orthogonal to
        b): the cycle's update is dropped, and x0 comes back."""
        A = csr(convection_diffusion(8), np.float32)
        b = rhs(64, np.float32)
        M, direction = jacobi(A), b / jnp.linalg.norm(b)
        poisoned = lambda r: jnp.where(
            jnp.abs(jnp.vdot(direction, r)) < 0.5 * jnp.linalg.norm(r), jnp.nan, 1) * M(r)
        x, info = SOLVERS[name](A.matvec, b, precondition=poisoned, restart=4)
        assert outcome(info) == (Status.DIVERGED, FailureReason.NONFINITE_RESIDUAL)
        np.testing.assert_array_equal(x, np.zeros(64))
        np.testing.assert_allclose(info.residual, 1.0, rtol=1e-6)

    def test_stationary_divergence_returns_x0(self):
        """An over-relaxed Jacobi iteration diverges: x0 comes back, not the 1e10 iterate."""
        A = csr(poisson(8), np.float32)
        over_relaxed = lambda r: 3 * r / A.diagonal()
        x, info = _krylov.stationary(A.matvec, rhs(64, np.float32), precondition=over_relaxed)
        assert outcome(info) == (Status.DIVERGED, FailureReason.RESIDUAL_GROWTH)
        np.testing.assert_array_equal(x, np.zeros(64))
        np.testing.assert_allclose(info.residual, 1.0, rtol=1e-6)


class TestScaledNorms:
    """Tiny and huge right-hand sides solve as a unit one does (no underflow or overflow)."""

    @pytest.mark.parametrize("name", SOLVERS)
    @pytest.mark.parametrize("dtype, scale", [("float32", 2.0**-83), ("float32", 2.0**83),
                                              ("float64", 2.0**-664), ("float64", 2.0**664)])
    def test_scaled_right_hand_side(self, name, dtype, scale, request):
        if dtype == "float64":
            request.getfixturevalue("x64")
        A = csr(poisson(6) if name == "cg" else convection_diffusion(6), dtype)
        b = rhs(36, dtype)
        x_unit, unit = SOLVERS[name](A.matvec, b, precondition=jacobi(A), tolerance=1e-5,
                                     store_history=True)
        x, info = SOLVERS[name](A.matvec, b * scale, precondition=jacobi(A), tolerance=1e-5,
                                store_history=True)
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        # b (~1e-25 or 1e25; 1e-200 or 1e200) is scaled by a power of two: the iterates
        # are those of the unit b, to the bit.
        assert int(info.iterations) == int(unit.iterations) > 0
        np.testing.assert_array_equal(info.residual_history, unit.residual_history)
        np.testing.assert_array_equal(np.asarray(x, np.float64) / scale, x_unit)

    def test_absolute_tolerance_on_a_tiny_right_hand_side(self):
        A = csr(poisson(6), np.float32)
        b = 1e-25 * rhs(36, np.float32)
        x, info = cg(A.matvec, b, tolerance=1e-30, convergence="ABSOLUTE")
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        assert int(info.iterations) > 0
        assert float(jnp.linalg.norm(b - A @ x)) <= 1.5e-30
        _, info = cg(A.matvec, b, tolerance=1e-20, convergence="ABSOLUTE")  # met by x0 = 0
        assert int(info.iterations) == 0

    def test_huge_right_hand_side_is_finite_input(self):
        A = csr(poisson(6), np.float32)
        b = jnp.full(36, 1e19, np.float32)  # ‖b‖² = 3.6e39 overflows float32
        x, info = cg(A.matvec, b)
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
        assert np.isfinite(x).all()


class TestResidualHistory:
    @pytest.mark.parametrize("name", SOLVERS)
    def test_history_is_kept_only_when_asked_for(self, name):
        A = csr(poisson(4), np.float32)
        b = rhs(16, np.float32)
        _, info = SOLVERS[name](A.matvec, b, max_iters=50)
        assert info.residual_history.shape == (0,)
        _, stored = SOLVERS[name](A.matvec, b, max_iters=50, store_history=True)
        assert stored.residual_history.shape == (51,)
        assert stored.residual == info.residual

    def test_largest_max_iters_needs_no_memory_for_it(self):
        """max_iters = 2³¹ − 1 is accepted, and without a history nothing grows with it."""
        A = csr(poisson(4), np.float32)
        solve = jax.jit(lambda b: cg(A.matvec, b, max_iters=_krylov.MAX_ITERS))
        sizes = [var.aval.size for var in jax.make_jaxpr(solve)(rhs(16, np.float32)).jaxpr.outvars]
        assert max(sizes) == 16
        x, info = solve(rhs(16, np.float32))
        assert outcome(info) == (Status.SUCCESS, FailureReason.NONE)
