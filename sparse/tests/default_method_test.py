"""The Krylov method ``solve`` runs when the configuration names none (``_default_method.py``).

A Hermitian matrix with a positive diagonal is solved by PCG with a V(1, 1) cycle, falling
back to PBICGSTAB from PCG's iterate where PCG breaks down; every other matrix by PBICGSTAB.
Traced values are tested in the solve's program.  Which method ran shows in the iterations and the iterate: the
default's are those of the method named explicitly.
"""

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

from jaxsolve import sparse
from jaxsolve.sparse import _default_method, parse_amgx_config
from jaxsolve.sparse._default_method import method_for

PCG = {"solver": "PCG"}
PBICGSTAB = {"solver": "PBICGSTAB"}


def poisson(n=24, shift=0.0, dtype=np.float32):
    """The 2D five-point Laplacian on an ``n × n`` grid, minus ``shift`` times I."""
    one = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    laplacian = sp.kron(one, sp.eye(n)) + sp.kron(sp.eye(n), one) - shift * sp.eye(n * n)
    return sparse.as_csr(laplacian.tocsr().astype(dtype))


def rhs(A):
    return jnp.asarray(np.random.default_rng(0).standard_normal(A.shape[0]),
                       A.values.dtype)


def solved(A, config=None):
    x, info = sparse.solve(A, rhs(A), config=config)
    return np.asarray(x), int(info.iterations), sparse.Status(int(info.status))


def test_an_spd_matrix_is_solved_by_pcg():
    A = poisson()
    x, iterations, status = solved(A)
    pcg_x, pcg_iterations, _ = solved(A, PCG)
    _, bicgstab_iterations, _ = solved(A, PBICGSTAB)
    assert status == sparse.Status.SUCCESS
    assert iterations == pcg_iterations != bicgstab_iterations
    np.testing.assert_array_equal(x, pcg_x)
    assert method_for(parse_amgx_config(None), A).solver == "PCG"


def test_a_nonsymmetric_matrix_is_solved_by_pbicgstab():
    A = poisson()
    upwind = sp.diags([0.5 * np.ones(A.shape[0] - 1)], [-1], dtype=np.float32)
    A = sparse.as_csr(sp.csr_matrix(A.todense()) + upwind)
    x, iterations, status = solved(A)
    bicgstab_x, bicgstab_iterations, _ = solved(A, PBICGSTAB)
    assert status == sparse.Status.SUCCESS and iterations == bicgstab_iterations
    np.testing.assert_array_equal(x, bicgstab_x)


def test_only_a_positive_diagonal_and_near_exact_symmetry_choose_pcg():
    config = parse_amgx_config(None)
    dense = np.asarray(poisson(6).todense(), np.float32)
    # A difference of a few units in the last place (an assembly's rounding) is Hermitian.
    rounded = dense.copy()
    rounded[0, 1] *= 1 + 2 * np.finfo(np.float32).eps
    assert rounded[0, 1] != rounded[1, 0]
    assert method_for(config, sparse.as_csr(rounded)).solver == "PCG"
    skewed = dense.copy()
    skewed[0, 1] *= 1 + 1e-4
    negative = dense.copy()
    negative[3, 3] = -1.0
    for matrix in (skewed, negative):
        assert method_for(config, sparse.as_csr(matrix)).solver == "PBICGSTAB"
    # A named solver or a named cycle is the user's.
    for named in (PBICGSTAB, {"preconditioner": {"cycle": "W"}}):
        assert method_for(parse_amgx_config(named), sparse.as_csr(dense)).solver == "PBICGSTAB"


def test_complex_symmetric_keeps_pbicgstab_and_hermitian_gets_pcg():
    config = parse_amgx_config(None)
    real = np.asarray(poisson(6).todense(), np.complex64)
    coupling = np.triu(np.eye(36, k=1) * 0.3j)
    symmetric = real + coupling + coupling.T  # Aᵀ = A, Aᴴ ≠ A
    hermitian = real + coupling + coupling.conj().T
    assert method_for(config, sparse.as_csr(symmetric)).solver == "PBICGSTAB"
    assert method_for(config, sparse.as_csr(hermitian)).solver == "PCG"


def test_an_indefinite_hermitian_matrix_converges_by_the_fallback():
    # Positive diagonal (4 - 0.3), but the Laplacian's smallest eigenvalues lie below 0.3.
    A = poisson(shift=0.3)
    assert np.min(np.linalg.eigvalsh(np.asarray(A.todense(), np.float64))) < 0
    x, iterations, status = solved(A)
    _, _, pcg_status = solved(A, PCG)
    assert pcg_status == sparse.Status.FAILED  # the named PCG stops at its breakdown
    assert status == sparse.Status.SUCCESS
    b = rhs(A)
    residual = np.linalg.norm(np.asarray(b - A @ jnp.asarray(x))) / np.linalg.norm(b)
    assert residual < 1e-4


def test_the_fallback_spends_what_pcg_left_of_max_iters():
    A = poisson(shift=0.3)
    b = rhs(A)
    _, full = sparse.solve(A, b)
    _, pcg = sparse.solve(A, b, config=PCG)
    limit = int(full.iterations) - 1
    _, info = sparse.solve(A, b, config={"max_iters": limit}, check=False)
    assert int(pcg.iterations) < limit
    assert int(info.iterations) == limit
    assert sparse.FailureReason(int(info.failure_reason)) == sparse.FailureReason.MAX_ITERS


def test_a_checked_concrete_solve_traces_bicgstab_only_after_a_breakdown(monkeypatch):
    # The fallback costs a solve that does not break down no compile time: its program
    # holds PCG alone, and the continuation is a program of its own (_solve.py's _continued).
    traced = []

    def bicgstab(matvec, b, *args, **kwargs):
        traced.append(b.shape)
        return original(matvec, b, *args, **kwargs)

    original = _default_method.bicgstab
    monkeypatch.setattr(_default_method, "bicgstab", bicgstab)
    jax.clear_caches()  # every program of the solves below is traced anew
    _, _, status = solved(poisson())
    assert status == sparse.Status.SUCCESS and not traced
    _, _, status = solved(poisson(shift=0.3))
    assert status == sparse.Status.SUCCESS and len(traced) == 1


@pytest.mark.parametrize("columns", [1, 3])
def test_the_checked_solve_continues_as_the_single_program_does(columns):
    # The checked solve runs PCG, then BiCGSTAB from its iterate for the columns that broke
    # down; the unchecked one both, in one program (lax.cond).  Their iterations, which
    # count both methods, are the same (their iterates differ by rounding: the programs
    # differ, and batch two columns or three).  On this matrix the AMG cycle is
    # indefinite too, and every nonzero right-hand side breaks down within three
    # iterations: the zero column (middle) is one that does not.
    A = poisson(shift=0.3)
    b = rhs(A)
    if columns > 1:
        other = jnp.asarray(np.random.default_rng(1).standard_normal(A.shape[0]), b.dtype)
        b = jnp.stack([b, jnp.zeros_like(b), other], axis=1)
    x, info = sparse.solve(A, b)
    _, single = sparse.solve(A, b, check=False)
    _, pcg = sparse.solve(A, b, config=PCG)
    broke = np.asarray(pcg.failure_reason) != sparse.FailureReason.NONE
    np.testing.assert_array_equal(broke, [True, False, True] if columns > 1 else True)
    np.testing.assert_array_equal(info.status, sparse.Status.SUCCESS)
    np.testing.assert_array_equal(info.iterations, single.iterations)
    assert np.all(np.where(broke, info.iterations > pcg.iterations,
                           info.iterations == pcg.iterations))
    b, x = np.asarray(b), np.asarray(x)
    residual = np.linalg.norm(b - np.asarray(A.todense()) @ x, axis=0)
    assert np.all(residual <= 1e-4 * np.linalg.norm(b, axis=0))


def test_concrete_values_closed_over_by_jit_are_solved_by_pcg():
    A = poisson()
    b = rhs(A)
    iterations = jax.jit(lambda b: sparse.solve(A, b)[1].iterations)(b)
    assert int(iterations) == solved(A, PCG)[1]


def jitted_iterations(A, b, config=None):
    """The iterations of the solve of ``A``'s values traced by ``jit`` (no concrete call)."""
    return int(jax.jit(lambda values: sparse.solve(A.with_values(values), b, config=config)[1]
                       .iterations)(A.values))


def test_traced_values_no_concrete_solve_chose_for_are_tested_in_the_program():
    # jit-only callers get PCG too: a structurally symmetric pattern's program tests the
    # values.  Hermitian ones run PCG; others BiCGSTAB from the start, with the V(1, 2)
    # cycle of the default's PBICGSTAB (a V(1, 1) one takes other iterations).
    spd = poisson(23)  # patterns of their own in this file
    b = rhs(spd)
    assert jitted_iterations(spd, b) == jitted_iterations(spd, b, PCG) != jitted_iterations(
        spd, b, PBICGSTAB)
    dense = np.asarray(poisson(22).todense())
    convection = sparse.as_csr(sp.csr_matrix(dense + np.diag(np.full(483, -0.9), -1)
                                             + np.diag(np.full(483, 0.9), 1)))
    b = rhs(convection)
    v11 = parse_amgx_config({"solver": "PBICGSTAB", "preconditioner": {"cycle": "V"}})
    assert jitted_iterations(convection, b) == jitted_iterations(convection, b, PBICGSTAB)
    assert jitted_iterations(convection, b) != jitted_iterations(convection, b, v11)


def test_values_batched_by_vmap_are_tested_one_by_one():
    # Under vmap the program's test is batched too: each matrix gets its method.
    A = poisson(20)
    b = rhs(A)
    dense = np.asarray(A.todense())
    upper = np.triu(dense != 0, k=1)
    skewed = sparse.as_csr(sp.csr_matrix(dense + 0.9 * upper - 0.9 * upper.T))
    batch = jnp.stack([A.values, skewed.values, 1.5 * A.values])
    x, info = jax.vmap(lambda values: sparse.solve(A.with_values(values), b))(batch)
    expected = [jitted_iterations(A.with_values(values), b, method)
                for values, method in zip(batch, (PCG, PBICGSTAB, PCG))]
    np.testing.assert_array_equal(info.iterations, expected)
    np.testing.assert_array_equal(info.status, sparse.Status.SUCCESS)


def test_traced_indefinite_hermitian_values_converge_by_the_fallback():
    A = poisson(21, shift=0.3)
    b = rhs(A)
    x, info = jax.jit(lambda values: sparse.solve(A.with_values(values), b))(A.values)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    residual = np.linalg.norm(np.asarray(b - A @ x)) / np.linalg.norm(np.asarray(b))
    assert residual < 1e-4


def test_the_program_tests_the_values_of_a_pattern_concrete_ones_chose_pcg_for():
    # The method follows the pattern's latest concrete values, but its program still tests
    # the traced ones: nonsymmetric values on the pattern are not solved by CG.
    A = poisson(19)
    b = rhs(A)
    sparse.solve(A, b)  # chooses PCG for the pattern
    dense = np.asarray(A.todense())
    upper = np.triu(dense != 0, k=1)
    skewed = sparse.as_csr(sp.csr_matrix(dense + 0.9 * upper - 0.9 * upper.T))
    assert np.array_equal(skewed.indices, A.indices)
    _, info = jax.jit(lambda values: sparse.solve(A.with_values(values), b))(skewed.values)
    assert sparse.Status(int(info.status)) == sparse.Status.SUCCESS
    assert int(info.iterations) == jitted_iterations(skewed, b, PBICGSTAB)


def test_traced_values_on_a_nonsymmetric_pattern_keep_pbicgstab():
    A = poisson(18)
    dense = np.asarray(A.todense())
    A = sparse.as_csr(sp.csr_matrix(dense + np.diag(np.full(323, 0.5), -1)))
    b = rhs(A)
    assert jitted_iterations(A, b) == jitted_iterations(A, b, PBICGSTAB)


def test_traced_values_take_the_method_of_the_patterns_latest_concrete_values():
    # As they take that setup's structure (and its cycle, the method's): one cache entry.
    A = poisson()
    b = rhs(A)
    sparse.clear_cache()
    _, eager = sparse.solve(A, b)
    _, traced = jax.jit(lambda v: sparse.solve(A.with_values(v), b))(A.values)
    assert int(traced.iterations) == int(eager.iterations) == solved(A, PCG)[1]
    assert sparse.cache_info().currsize == 1


@pytest.mark.usefixtures("x64")
def test_the_gradient_to_the_values_after_a_default_pcg_is_not_symmetrized():
    # Each stored value is its own variable: the derivative along a nonsymmetric direction.
    A = poisson(8, dtype=np.float64)
    b = rhs(A)
    sparse.solve(A, b)  # the pattern's latest concrete values choose PCG
    tight = {"tolerance": 1e-12}

    def loss(values):
        return jnp.sum(sparse.solve(A.with_values(values), b, config=tight)[0] ** 2)

    gradient = jax.grad(loss)(A.values)
    direction = jnp.asarray(np.random.default_rng(3).standard_normal(A.nnz))
    step = 1e-6
    difference = (loss(A.values + step * direction) - loss(A.values - step * direction)) / (
        2 * step)
    np.testing.assert_allclose(jnp.vdot(gradient, direction), difference, rtol=1e-5)


@pytest.mark.usefixtures("x64")
def test_the_gradient_of_a_jit_only_default_solve_matches_finite_differences():
    # Neither A's solve nor Aᵀ's (reverse mode) had concrete values: both programs test,
    # and Aᵀ, of A's pattern, takes A's structure (one host setup, one kept).
    A = poisson(9, dtype=np.float64)
    b = rhs(A)
    tight = {"tolerance": 1e-12}

    def loss(values):
        return jnp.sum(sparse.solve(A.with_values(values), b, config=tight)[0] ** 2)

    sparse.clear_cache()
    gradient = jax.jit(jax.grad(loss))(A.values)
    assert sparse.cache_info().currsize == 1
    # Aᵀ's solve reads A's pattern objects: no second transpose, on the host or the device.
    assert "transposed" not in vars(A._pattern.transposed[0])
    direction = jnp.asarray(np.random.default_rng(4).standard_normal(A.nnz))
    step = 1e-6
    difference = (loss(A.values + step * direction) - loss(A.values - step * direction)) / (
        2 * step)
    np.testing.assert_allclose(jnp.vdot(gradient, direction), difference, rtol=1e-5)


@pytest.mark.usefixtures("x64")
def test_the_gradient_through_the_default_solve_matches_finite_differences():
    A = poisson(12, dtype=np.float64)
    b = rhs(A)
    weights = jnp.asarray(np.random.default_rng(1).standard_normal(A.shape[0]))
    tight = {"tolerance": 1e-12}

    def loss(b):
        return jnp.vdot(weights, sparse.solve(A, b, config=tight)[0])

    gradient = jax.grad(loss)(b)
    direction = jnp.asarray(np.random.default_rng(2).standard_normal(A.shape[0]))
    step = 1e-3
    difference = (loss(b + step * direction) - loss(b - step * direction)) / (2 * step)
    np.testing.assert_allclose(jnp.vdot(gradient, direction), difference, rtol=1e-7)
    dense = np.asarray(A.todense())
    np.testing.assert_allclose(gradient, np.linalg.solve(dense.T, weights), rtol=1e-8,
                               atol=1e-10)


def test_the_remembered_answer_does_not_keep_a_pattern_alive():
    # The test's answer is remembered per pattern for the latest values; a matrix the caller
    # and the setup cache have let go of must be freed with its pattern (O(nnz) arrays).
    A = poisson(16, dtype=np.float64)
    pattern = weakref.ref(A._pattern)
    _, iterations, status = solved(A)
    assert status == sparse.Status.SUCCESS
    sparse.clear_cache()
    del A
    gc.collect()
    assert pattern() is None


@pytest.mark.parametrize("in_host_memory", [True, False], ids=["numpy", "device"])
def test_new_values_are_tested_without_sending_the_pattern_again(monkeypatch, in_host_memory):
    # Values in host memory are tested by NumPy; values on a GPU by a program on their
    # device, which reads the pattern's permutation and diagonal positions sent there once
    # (nnz + n integers, not again with each new values of a Newton or time step).
    monkeypatch.setattr(_default_method, "in_host_memory", lambda values: in_host_memory)
    A = poisson(16, dtype=np.float64)
    assert _default_method._concrete_test(A._pattern, A.values)
    for scale, hermitian in ((2.0, True), (-1.0, False)):
        values = scale * A.values
        with jax.transfer_guard_host_to_device("disallow"):
            assert _default_method._concrete_test(A._pattern, values) is hermitian
