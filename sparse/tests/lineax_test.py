"""Tests for jaxsolve.sparse.lineax: the Lineax operator, solver and preconditioner adapters."""

import importlib
import os
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
import scipy.sparse

from jaxsolve import sparse
from jaxsolve.sparse import matrices
from jaxsolve.sparse.lineax import AMGSolver, CsrLinearOperator, make_lineax_preconditioner

# 24 × 24 grids: 576 unknowns, enough for a hierarchy of several levels.
N = 24


def poisson(dtype=np.float32) -> sparse.CsrMatrix:
    return sparse.as_csr(matrices.poisson_matrix(N, dtype=dtype))


def convection(dtype=np.float32) -> sparse.CsrMatrix:
    return sparse.as_csr(matrices.convection_diffusion_matrix_2d(N, peclet=20.0, dtype=dtype))


# The symmetric problem is tagged, so that Lineax solves with it in reverse mode; the
# nonsymmetric one makes AMGSolver transpose its state.
PROBLEMS = {
    "poisson": (poisson, lx.positive_semidefinite_tag),
    "convection": (convection, ()),
}


def dense_solve(A: sparse.CsrMatrix, b: jax.Array) -> jax.Array:
    return jnp.linalg.solve(A.todense(), b)


def steps(solution: lx.Solution) -> int:
    return int(solution.stats["num_steps"])


def test_sparse_does_not_import_lineax():
    probe = "import sys, jaxsolve.sparse; assert 'lineax' not in sys.modules, 'lineax imported'"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == 0, result.stderr


def test_missing_lineax_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "lineax", None)  # `import lineax` raises ImportError
    monkeypatch.delitem(sys.modules, "jaxsolve.sparse.lineax")
    with pytest.raises(ImportError, match=r"pip install jaxsolve-sparse\[lineax\]"):
        importlib.import_module("jaxsolve.sparse.lineax")


class TestCsrLinearOperator:
    @pytest.mark.parametrize("shape", [(N * N, N * N), (5, 7), (7, 5)])
    def test_operator_against_dense(self, shape):
        if shape[0] == shape[1]:
            A = convection()
        else:
            A = sparse.as_csr(scipy.sparse.random_array(shape, density=0.4, rng=0,
                                                        dtype=np.float32))
        dense = A.todense()
        operator = CsrLinearOperator(A)
        x = jnp.asarray(np.random.default_rng(1).standard_normal(shape[1]), np.float32)
        y = jnp.asarray(np.random.default_rng(2).standard_normal(shape[0]), np.float32)
        assert operator.in_structure() == jax.ShapeDtypeStruct((shape[1],), jnp.float32)
        assert operator.out_structure() == jax.ShapeDtypeStruct((shape[0],), jnp.float32)
        np.testing.assert_allclose(operator.mv(x), dense @ x, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(operator.as_matrix(), dense)
        np.testing.assert_array_equal(operator.T.as_matrix(), dense.T)
        np.testing.assert_allclose(operator.T.mv(y), dense.T @ y, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(lx.diagonal(operator), jnp.diagonal(dense))
        for band, offset in zip(lx.tridiagonal(operator), (0, -1, 1)):
            np.testing.assert_array_equal(band, jnp.diagonal(dense, offset))
        assert lx.materialise(operator) is operator and lx.linearise(operator) is operator

    def test_operator_conj(self):
        A = sparse.as_csr(jnp.array([[2 + 1j, 1j], [0, 3 - 2j]], jnp.complex64))
        operator = CsrLinearOperator(A, lx.lower_triangular_tag)
        conjugate = lx.conj(operator)
        np.testing.assert_array_equal(conjugate.as_matrix(), A.todense().conj())
        assert conjugate.tags == operator.tags

    def test_operator_structure_from_pattern_and_tags(self):
        tridiagonal = CsrLinearOperator(matrices.tridiagonal_matrix(6))
        assert lx.is_tridiagonal(tridiagonal) is True  # a bool, as Lineax keeps it static
        assert not (lx.is_diagonal(tridiagonal) or lx.is_symmetric(tridiagonal)
                    or lx.is_lower_triangular(tridiagonal))
        lower = CsrLinearOperator(jnp.tril(poisson().todense()))
        assert lx.is_lower_triangular(lower) and not lx.is_upper_triangular(lower)
        assert lx.is_upper_triangular(lower.T) and not lx.is_lower_triangular(lower.T)
        diagonal = CsrLinearOperator(jnp.diag(jnp.arange(1.0, 5.0)))
        assert lx.is_diagonal(diagonal) and lx.is_symmetric(diagonal)
        assert lx.is_tridiagonal(diagonal)
        assert not any(query(CsrLinearOperator(poisson())) for query in (
            lx.is_symmetric, lx.is_diagonal, lx.is_tridiagonal, lx.is_lower_triangular,
            lx.is_upper_triangular, lx.is_positive_semidefinite, lx.is_negative_semidefinite,
            lx.has_unit_diagonal))
        # The values' properties come from tags only.
        spd = CsrLinearOperator(poisson(), lx.positive_semidefinite_tag)
        assert lx.is_symmetric(spd) and lx.is_positive_semidefinite(spd)
        assert spd.T is spd
        nsd = CsrLinearOperator(poisson(), lx.negative_semidefinite_tag)
        assert lx.is_symmetric(nsd) and lx.is_negative_semidefinite(nsd)
        assert lx.has_unit_diagonal(CsrLinearOperator(poisson(), lx.unit_diagonal_tag))
        # A definite complex matrix is Hermitian, not symmetric.
        hermitian = sparse.as_csr(jnp.array([[2, 1j], [-1j, 2]], jnp.complex64))
        assert not lx.is_symmetric(CsrLinearOperator(hermitian, lx.positive_semidefinite_tag))
        rectangular = CsrLinearOperator(jnp.eye(2, 3))
        assert not (lx.is_diagonal(rectangular) or lx.is_lower_triangular(rectangular))

    @pytest.mark.parametrize("matrix, tags, solver", [
        (lambda: sparse.as_csr(matrices.tridiagonal_matrix(40)), (), lx.Tridiagonal),
        (lambda: sparse.as_csr(jnp.tril(poisson().todense())), (), lx.Triangular),
        (lambda: sparse.as_csr(matrices.poisson_matrix(8)), (), lx.LU),
        (lambda: sparse.as_csr(matrices.poisson_matrix(8)), lx.positive_semidefinite_tag,
         lx.Cholesky),
    ], ids=["tridiagonal", "triangular", "general", "spd"])
    def test_operator_with_lineax_auto_solver(self, matrix, tags, solver):
        A = matrix()
        operator = CsrLinearOperator(A, tags)
        assert isinstance(lx.AutoLinearSolver(well_posed=True).select_solver(operator), solver)
        b = jnp.ones(A.shape[0])
        x = lx.linear_solve(operator, b).value
        np.testing.assert_allclose(x, dense_solve(A, b), rtol=1e-4, atol=1e-4)

    def test_operator_grad(self, x64):
        A = convection(np.float64)
        b = matrices.rhs_random(A.shape[0], seed=3, dtype=np.float64)

        def loss(values, operator_type):
            matrix = A.with_values(values)
            operator = (CsrLinearOperator(matrix) if operator_type is CsrLinearOperator
                        else lx.MatrixLinearOperator(matrix.todense()))
            return jnp.sum(lx.linear_solve(operator, b, lx.LU()).value ** 2)

        gradient = jax.jit(jax.grad(loss), static_argnums=1)
        np.testing.assert_allclose(gradient(A.values, CsrLinearOperator),
                                   gradient(A.values, lx.MatrixLinearOperator), rtol=1e-10)

    def test_operator_errors(self):
        with pytest.raises(ValueError, match="matching input and output structures"):
            CsrLinearOperator(jnp.ones((2, 3)), lx.symmetric_tag)
        with pytest.raises(TypeError, match="as_csr: A must be a CsrMatrix"):
            CsrLinearOperator("not a matrix")


class TestAMGSolver:
    @pytest.mark.parametrize("problem", PROBLEMS)
    def test_amg_solver_against_dense_with_grad(self, x64, problem):
        matrix, tags = PROBLEMS[problem]
        A = matrix(np.float64)
        b = matrices.rhs_random(A.shape[0], seed=1, dtype=np.float64)
        weights = matrices.rhs_random(A.shape[0], seed=2, dtype=np.float64)
        solver = AMGSolver({"tolerance": 1e-12})

        def loss(values, b):
            operator = CsrLinearOperator(A.with_values(values), tags)
            solution = lx.linear_solve(operator, b, solver)
            return weights @ solution.value, solution

        def dense_loss(values, b):
            return weights @ dense_solve(A.with_values(values), b)

        gradients, solution = jax.jit(jax.grad(loss, argnums=(0, 1), has_aux=True))(A.values, b)
        print(f"{problem}: AMGSolver (PBICGSTAB + AMG) {steps(solution)} iterations")
        assert solution.result == lx.RESULTS.successful
        assert 0 < steps(solution) <= 30 and solution.stats["residual"] <= 1e-12
        np.testing.assert_allclose(solution.value, dense_solve(A, b), rtol=1e-9, atol=1e-12)
        expected = jax.grad(dense_loss, argnums=(0, 1))(A.values, b)
        for gradient, reference in zip(gradients, expected):
            np.testing.assert_allclose(gradient, reference, rtol=1e-8,
                                       atol=1e-10 * np.abs(reference).max())

    def test_amg_solver_near_nullspace(self, x64):
        A, modes = matrices.elasticity_matrix_2d(12, dtype=np.float64)
        operator = CsrLinearOperator(A, lx.positive_semidefinite_tag)
        b = matrices.rhs_random(A.shape[0], seed=2, dtype=np.float64)
        config = {"solver": "PCG", "tolerance": 1e-10, "max_iters": 300,
                  "preconditioner": {"solver": "AMG", "algorithm": "AGGREGATION", "selector": "SIZE_4", "smoother": "JACOBI_L1",
                                     "jaxsolve_smoothed_aggregation": 1}}
        with_modes = lx.linear_solve(operator, b, AMGSolver(config, near_nullspace=modes))
        scalar = lx.linear_solve(operator, b, AMGSolver(config))
        print(f"elasticity: smoothed aggregation PCG {steps(with_modes)} iterations with the"
              f" rigid-body modes, {steps(scalar)} without")
        assert steps(with_modes) < steps(scalar)
        np.testing.assert_allclose(with_modes.value, dense_solve(sparse.as_csr(A), b), rtol=1e-7,
                                   atol=1e-9)

    def test_amg_solver_vmap(self, x64):
        A = convection(np.float64)
        b = matrices.rhs_random(A.shape[0], seed=1, dtype=np.float64)
        solver = AMGSolver({"tolerance": 1e-10})

        def solve(values, b):
            return lx.linear_solve(CsrLinearOperator(A.with_values(values)), b, solver).value

        values, bs = jnp.stack([A.values, 2 * A.values]), jnp.stack([b, -b])
        x = dense_solve(A, b)
        np.testing.assert_allclose(jax.vmap(solve)(values, bs), jnp.stack([x, -x / 2]),
                                   rtol=1e-8, atol=1e-12)

    def test_amg_solver_transpose_and_conj(self):
        operator = CsrLinearOperator(convection())
        solver = AMGSolver()
        state = solver.init(operator, {})
        transposed, options = solver.transpose(state, {"y0": jnp.ones(operator.in_size())})
        assert options == {}  # an initial guess for A is none for Aᵀ
        np.testing.assert_array_equal(transposed.as_matrix(),
                                      solver.init(operator.T, {}).as_matrix())
        conjugated, _ = solver.conj(state, {})
        np.testing.assert_array_equal(conjugated.as_matrix(), operator.as_matrix())
        spd = CsrLinearOperator(poisson(), lx.positive_semidefinite_tag)
        assert solver.transpose(spd, {})[0] is spd  # no second hierarchy for Aᵀ = A
        assert solver.assume_full_rank()

    def test_amg_solver_initial_guess(self, x64):
        A = poisson(np.float64)
        b = matrices.rhs_random(A.shape[0], seed=1, dtype=np.float64)
        exact = dense_solve(A, b)
        solver = AMGSolver({"tolerance": 1e-8, "convergence": "ABSOLUTE"})
        solution = lx.linear_solve(CsrLinearOperator(A), b, solver, options={"y0": exact})
        assert steps(solution) == 0
        np.testing.assert_array_equal(solution.value, exact)

    def test_amg_solver_results(self):
        A = convection()
        b = jnp.ones(A.shape[0])

        @jax.jit
        def result(values):
            return lx.linear_solve(CsrLinearOperator(A.with_values(values)), b, AMGSolver(),
                                   throw=False).result

        assert result(A.values) == lx.RESULTS.successful
        assert result(A.values.at[5].set(jnp.nan)) == lx.RESULTS.nonfinite_input
        # max_steps_reached: in AMGSolver's docstring.

    def test_amg_solver_matrix_linear_operator(self, x64):
        A = convection(np.float64)
        b = jnp.ones(A.shape[0])
        operator = lx.MatrixLinearOperator(A.todense())
        solver = AMGSolver({"tolerance": 1e-10})
        state = solver.init(operator, {})  # outside linear_solve: a concrete matrix
        assert isinstance(state, CsrLinearOperator) and state.matrix.nnz == A.nnz
        solution = lx.linear_solve(operator, b, solver, state=state)
        np.testing.assert_allclose(solution.value, dense_solve(A, b), rtol=1e-8)
        with pytest.raises(TypeError, match="but it is traced here"):
            lx.linear_solve(operator, b, solver)

    def test_amg_solver_errors(self):
        b = jnp.ones(4)
        with pytest.raises(ValueError, match="must be square, got shape"):
            lx.linear_solve(CsrLinearOperator(jnp.ones((4, 3))), b, AMGSolver())
        with pytest.raises(ValueError, match="tolerence"):
            AMGSolver({"tolerence": 1e-8})


class TestMakeLineaxPreconditioner:
    def test_preconditioner_with_cg(self, x64):
        A = CsrLinearOperator(poisson(np.float64), lx.positive_semidefinite_tag)
        b = matrices.rhs_ones(N * N, dtype=np.float64)
        M = make_lineax_preconditioner(A)
        cg = lx.CG(rtol=1e-6, atol=0.0)

        @eqx.filter_jit
        def solve(M, b):
            return lx.linear_solve(A, b, cg, options={} if M is None else {"preconditioner": M})

        plain, preconditioned = solve(None, b), solve(M, b)
        print(f"lineax.CG on 2D Poisson {N}x{N}: {steps(plain)} steps, with the AMG"
              f" preconditioner {steps(preconditioned)}")
        assert 3 * steps(preconditioned) < steps(plain)
        np.testing.assert_allclose(preconditioned.value, dense_solve(A.matrix, b), rtol=1e-5)

    def test_preconditioner_with_gmres(self, x64):
        A = CsrLinearOperator(convection(np.float64))
        b = matrices.rhs_random(N * N, seed=1, dtype=np.float64)
        M = make_lineax_preconditioner(A)
        assert M.tags == frozenset()
        gmres = lx.GMRES(rtol=1e-8, atol=0.0, restart=10)
        plain = lx.linear_solve(A, b, gmres)
        preconditioned = lx.linear_solve(A, b, gmres, options={"preconditioner": M})
        print(f"lineax.GMRES(restart=10) on convection-diffusion {N}x{N}: {steps(plain)}"
              f" restart cycles, with the AMG preconditioner {steps(preconditioned)}")
        assert 3 * steps(preconditioned) <= steps(plain)
        np.testing.assert_allclose(preconditioned.value, dense_solve(A.matrix, b), rtol=1e-6)

    @pytest.mark.parametrize("A, config, tags, expected", [
        (lambda: CsrLinearOperator(poisson(), lx.positive_semidefinite_tag), None, None,
         {lx.symmetric_tag, lx.positive_semidefinite_tag}),
        (lambda: CsrLinearOperator(poisson(), lx.symmetric_tag), None, None, {lx.symmetric_tag}),
        (lambda: lx.MatrixLinearOperator(-poisson().todense(), lx.negative_semidefinite_tag),
         None, None, {lx.symmetric_tag, lx.negative_semidefinite_tag}),
        (lambda: CsrLinearOperator(poisson(), lx.positive_semidefinite_tag),
         {"solver": "AMG", "presweeps": 2, "postsweeps": 1}, None, set()),
        (lambda: CsrLinearOperator(poisson().with_values(poisson().values / 4),
                                   [lx.unit_diagonal_tag, lx.positive_semidefinite_tag]),
         None, None, {lx.symmetric_tag, lx.positive_semidefinite_tag}),
        (lambda: matrices.poisson_matrix(N), None, None, set()),
        (lambda: CsrLinearOperator(convection()), None, lx.symmetric_tag, {lx.symmetric_tag}),
        (lambda: CsrLinearOperator(poisson(), lx.positive_semidefinite_tag), None, (), set()),
        (lambda: CsrLinearOperator(poisson(), lx.positive_semidefinite_tag),
         {"solver": "MULTICOLOR_GS", "symmetric_GS": 0}, None,
         set()),  # a forward sweep is not symmetric
        (lambda: CsrLinearOperator(poisson(), lx.positive_semidefinite_tag),
         {"solver": "MULTICOLOR_GS", "symmetric_GS": 1}, None,
         {lx.symmetric_tag, lx.positive_semidefinite_tag}),
        (lambda: CsrLinearOperator(poisson(), lx.positive_semidefinite_tag),
         {"solver": "AMG", "smoother": "MULTICOLOR_GS"}, None,
         {lx.symmetric_tag, lx.positive_semidefinite_tag}),  # post-smoothing sweeps backward
        (lambda: CsrLinearOperator(poisson(), lx.positive_semidefinite_tag),
         {"solver": "AMG", "smoother": "MULTICOLOR_GS", "coarse_solver": "NOSOLVER",
          "coarsest_sweeps": 1}, None, set()),  # one forward coarsest sweep
    ], ids=["spd", "symmetric", "negative-definite", "unequal-sweeps", "structural-tags-dropped",
            "not-an-operator", "explicit", "explicit-none", "forward-gs", "symmetric-gs",
            "amg-forward-gs", "amg-forward-gs-odd-coarsest"])
    def test_preconditioner_tags(self, A, config, tags, expected):
        M = make_lineax_preconditioner(A(), config, tags=tags)
        assert M.tags == frozenset(expected)
        assert M.in_structure() == M.out_structure()
        assert M.in_structure() == jax.ShapeDtypeStruct((N * N,), jnp.float32)

    def test_preconditioner_grad_through_cg(self, x64):
        A = poisson(np.float64)
        b = matrices.rhs_random(A.shape[0], seed=1, dtype=np.float64)
        M = make_lineax_preconditioner(CsrLinearOperator(A, lx.positive_semidefinite_tag))
        cg = lx.CG(rtol=1e-12, atol=0.0)

        def loss(values, b):
            operator = CsrLinearOperator(A.with_values(values), lx.positive_semidefinite_tag)
            return jnp.sum(lx.linear_solve(operator, b, cg, options={"preconditioner": M}).value)

        # Reverse mode transposes M too: free, as M is tagged symmetric.
        gradients = jax.jit(jax.grad(loss, argnums=(0, 1)))(A.values, b)
        expected = jax.grad(lambda v, b: jnp.sum(dense_solve(A.with_values(v), b)),
                            argnums=(0, 1))(A.values, b)
        for gradient, reference in zip(gradients, expected):
            np.testing.assert_allclose(gradient, reference, rtol=1e-8,
                                       atol=1e-10 * np.abs(reference).max())

    def test_preconditioner_errors(self):
        matrix = poisson().todense()
        with pytest.raises(TypeError, match="but it is traced here"):
            jax.jit(lambda m: make_lineax_preconditioner(lx.MatrixLinearOperator(m)).mv(m[0]))(
                matrix)


# -----------------------------------------------------------------------------
# Matrix-free operators: Lineax operators known only by their mv


def laplacian(d=0.0):
    """``x ↦ (d I + L) x``, ``L`` the 5-point Laplacian of ``poisson()``, as a function."""
    def mv(x):
        u = jnp.pad(x.reshape(N, N), 1)
        return d * x + (4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2]
                        - u[1:-1, 2:]).ravel()
    return mv


def function_operator(d=0.0, dtype=jnp.float64):
    return lx.FunctionLinearOperator(laplacian(d), jax.ShapeDtypeStruct((N * N,), dtype),
                                     lx.positive_semidefinite_tag)


class TestMatrixFree:
    def test_amg_solver_function_operator(self, x64):
        operator = function_operator()
        # A residual 1e-11 of b's, for every entry within 1e-8 of the dense solution's.
        solver = AMGSolver({"tolerance": 1e-11})
        state = solver.init(operator, {})  # concrete: the pattern is traced from mv
        assert isinstance(state, CsrLinearOperator)
        assert state.matrix.nnz == poisson().nnz
        assert state.tags == {lx.symmetric_tag, lx.positive_semidefinite_tag}
        np.testing.assert_array_equal(state.matrix.todense(), poisson(np.float64).todense())
        b = matrices.rhs_random(N * N, seed=2, dtype=np.float64)
        solution = lx.linear_solve(operator, b, solver, state=state)
        np.testing.assert_allclose(solution.value, dense_solve(poisson(np.float64), b),
                                   rtol=1e-8)
        with pytest.raises(ValueError, match=r"is traced.*AMGSolver\(\.\.\., coloring=info\)"):
            lx.linear_solve(function_operator(jnp.asarray(1.0)), b, solver)  # a leaf: traced

    def test_amg_solver_jit_grad_with_coloring(self, x64):
        """grad through lineax.linear_solve reaches what the function closes over."""
        info = sparse.cache_coloring(laplacian(1.0), N * N, jnp.float64)  # outside, once
        solver = AMGSolver({"tolerance": 1e-12}, coloring=info)
        b = matrices.rhs_random(N * N, seed=3, dtype=np.float64)

        def loss(d, b):
            return jnp.sum(lx.linear_solve(function_operator(d), b, solver).value ** 2)

        def reference(d, b):
            dense = poisson(np.float64).todense() + d * jnp.eye(N * N)
            return jnp.sum(jnp.linalg.solve(dense, b) ** 2)

        gradients = jax.jit(jax.grad(loss, argnums=(0, 1)))(0.5, b)
        expected = jax.grad(reference, argnums=(0, 1))(0.5, b)
        for gradient, want in zip(gradients, expected, strict=True):
            np.testing.assert_allclose(gradient, want, rtol=1e-7,
                                       atol=1e-10 * np.abs(want).max())

    def test_preconditioner_function_operator(self, x64):
        operator = function_operator()
        M = make_lineax_preconditioner(operator)
        assert M.tags == {lx.symmetric_tag, lx.positive_semidefinite_tag}
        b = matrices.rhs_ones(N * N, dtype=np.float64)
        cg = lx.CG(rtol=1e-6, atol=0.0)
        plain = lx.linear_solve(operator, b, cg)
        preconditioned = lx.linear_solve(operator, b, cg, options={"preconditioner": M})
        assert 3 * steps(preconditioned) < steps(plain)
        # A plain function with its coloring: the same preconditioner, untagged.
        info = sparse.cache_coloring(laplacian(), N * N, jnp.float64)
        from_function = make_lineax_preconditioner(laplacian(), coloring=info)
        assert from_function.tags == frozenset()
        np.testing.assert_allclose(from_function.mv(b), M.mv(b), rtol=1e-12)

    def test_preconditioner_of_a_traced_function_operator(self, x64):
        info = sparse.cache_coloring(laplacian(1.0), N * N, jnp.float64)
        b = matrices.rhs_ones(N * N, dtype=np.float64)
        apply = jax.jit(lambda d: make_lineax_preconditioner(function_operator(d),
                                                             coloring=info).mv(b))
        eager = make_lineax_preconditioner(function_operator(2.0)).mv(b)
        np.testing.assert_allclose(apply(2.0), eager, rtol=1e-10)
        with pytest.raises(ValueError, match="is traced"):
            jax.jit(lambda d: make_lineax_preconditioner(function_operator(d)).mv(b))(2.0)
        with pytest.raises(TypeError, match="coloring must be a ColoringInfo"):
            make_lineax_preconditioner(function_operator(), coloring="info")
