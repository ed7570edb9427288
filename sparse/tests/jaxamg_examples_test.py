"""JAX-AMG's Examples page (docs/examples.md), single-GPU mode, run with only its imports
changed (``jaxamg`` → ``jaxsolve.sparse``).

Each test holds one of the page's code blocks as it is and checks what the page's "Result"
tab shows: the printed solutions to the digits float32 keeps, the loss trajectories of the
two optimization loops line by line, the shapes.  Where jaxsolve's AMG differs from AmgX's
by design the check is the documented meaning, not AmgX's number: it takes fewer iterations
(warm start 3 → 1 against 6 → 2, block solve 3 against 15, and the scalar solve of the
block matrix converges in 14 where AmgX stops at 1000), and ``info["residual"]`` is the
true residual of the ``x`` returned (AmgX's is its recurrence's), which a float32 solve
meets to its attainable accuracy.  The page's two MPI blocks run under ``mpiexec`` from
jaxamg_examples_mpi.py: the distributed solve on 2 ranks, the distributed optimization on
1, as the page's result was made (its loop stops on each rank's own gradient norm, so on
several ranks one leaves the loop's collectives while the others wait in them, under
JAX-AMG as here).
"""

import re

import numpy as np

from mpi_launcher import run_ranks

# The page's printed results ("Result" tabs), where a test compares numbers with them.
TRIDIAGONAL_HEAD = [0.36602542, 0.46410164, 0.490381, 0.4974226, 0.49930936, 0.49981493]
OPERATOR_SOLUTION = [0.8333334, 1.1666667, 1.1666667, 0.8333334, 1.1666667, 1.6666667,
                     1.6666667, 1.1666667, 1.1666667, 1.6666667, 1.6666667, 1.1666667,
                     0.8333334, 1.1666667, 1.1666667, 0.8333334]
CUSTOM_CONFIG_SOLUTION = [0.5736315, 0.8630174, 0.95168453, 0.7778139, 0.8630174, 1.361689,
                          1.5261416, 1.2288666, 0.95168453, 1.5261416, 1.7215995, 1.3806959,
                          0.7778139, 1.2288666, 1.3806959, 1.112935]
GRADIENT_DESCENT_HEAD = ["Iter    0: loss =   5.5413, grad_norm =   2.2774",
                         "Iter    1: loss =   1.5938, grad_norm =   1.1939"]
COLORING_HEAD = ["Iter    0: diag =   7.9637, loss =   0.1082, grad_norm =   0.0181",
                 "Iter    1: diag =   7.9271, loss =   0.1076, grad_norm =   0.0183"]


def printed_numbers(text, label):
    """The numbers printed after ``label``: a bracketed array, or the rest of the line."""
    rest = text.split(label, 1)[1].lstrip()
    block = rest[1:rest.index("]")] if rest.startswith("[") else rest.split("\n", 1)[0]
    return [float(v) for v in re.findall(r"[-+]?\d+\.?\d*(?:e[-+]?\d+)?", block)]


def test_solving_a_matrix_system(capsys):
    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import rhs_ones, tridiagonal_matrix

    n = 100
    A = tridiagonal_matrix(n, diagonal_value=4.0)
    b = rhs_ones(100)

    x, info = jaxamg.solve(A, b, solver="CG")
    print("Solution:", x)
    print("Iterations:", info["iterations"])
    print("Residual:", info["residual"])

    out = capsys.readouterr().out
    np.testing.assert_allclose(printed_numbers(out, "Solution:")[:6], TRIDIAGONAL_HEAD,
                               rtol=1e-6)
    np.testing.assert_allclose(x[40:60], 0.5, rtol=1e-6)
    assert printed_numbers(out, "Iterations:")[0] <= 12  # the page: 12
    assert printed_numbers(out, "Residual:")[0] <= 1e-6 * 10  # tolerance · ‖b‖


def test_solving_with_an_operator(capsys):
    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import poisson_operator, rhs_ones

    n = 16
    b = rhs_ones(n)

    op = poisson_operator()
    x, info = jaxamg.solve(op, b, solver="CG")
    print("Solution:", x)
    print("Iterations:", info["iterations"])
    print("Residual:", info["residual"])

    out = capsys.readouterr().out
    np.testing.assert_allclose(printed_numbers(out, "Solution:"), OPERATOR_SOLUTION, rtol=1e-6)
    assert printed_numbers(out, "Iterations:") == [3]
    assert printed_numbers(out, "Residual:")[0] <= 1e-6 * 4


def test_custom_solver_configuration(capsys):
    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import poisson_matrix, rhs_ones

    n = 4
    A = poisson_matrix(n, skew=0.5)
    b = rhs_ones(n * n)

    x, info = jaxamg.solve(
        A,
        b,
        config={
            "solver": "PBICGSTAB",
            "preconditioner": {
                "solver": "AMG",
                "smoother": {"solver": "BLOCK_JACOBI", "relaxation_factor": 0.9},
                "presweeps": 2,
                "postsweeps": 2,
                "coarse_solver": "NOSOLVER",
                "max_levels": 100,
                "cycle": "V",
            },
            "tolerance": 1e-8,
            "max_iters": 100,
            "norm": "L2",
        }
    )

    print("Solution:", x)
    print("Iterations:", info["iterations"])
    print("Residual:", info["residual"])

    out = capsys.readouterr().out
    np.testing.assert_allclose(printed_numbers(out, "Solution:"), CUSTOM_CONFIG_SOLUTION,
                               rtol=2e-6)
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS


def test_warm_starts_with_an_initial_guess(capsys):
    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import poisson_matrix, rhs_ones

    n = 64
    A = poisson_matrix(n)
    b = rhs_ones(n * n)

    # Cold solve from a zero initial guess
    x, info = jaxamg.solve(A, b, convergence="ABSOLUTE", tolerance=1e-4)
    print("Cold start:", info["iterations"], "iterations")

    # Warm start from the previous solution
    x2, info2 = jaxamg.solve(A, b, x0=x, convergence="ABSOLUTE", tolerance=1e-4)
    print("Warm start:", info2["iterations"], "iterations")

    out = capsys.readouterr().out
    cold, warm = printed_numbers(out, "Cold start:")[0], printed_numbers(out, "Warm start:")[0]
    assert 0 < warm < cold <= 6  # the page: 6 and 2
    assert float(info2["residual"]) <= 1e-4


def test_block_matrices(capsys):
    import jax.experimental.sparse as jsp
    import jax.numpy as jnp
    import numpy as np
    import scipy.sparse

    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import poisson_matrix
    from jaxsolve.sparse.utils import to_scipy

    # Coupled 2-component system: kron(Poisson, M)
    M = np.array([[2.0, 1.0], [1.0, 2.0]], dtype=np.float32)
    A_sp = scipy.sparse.kron(to_scipy(poisson_matrix(64)), M).tocsr()
    A = jsp.BCSR(
        (jnp.asarray(A_sp.data), jnp.asarray(A_sp.indices), jnp.asarray(A_sp.indptr)),
        shape=A_sp.shape,
    )
    b = jnp.ones(A_sp.shape[0])

    x, info = jaxamg.solve(A, b, block_dim=2)
    print("Block solve:", info["iterations"], "iterations,", info["status"])

    x1, info1 = jaxamg.solve(A, b)
    print("Scalar solve:", info1["iterations"], "iterations,", info1["status"])

    out = capsys.readouterr().out
    assert info["status"] == jaxamg.AMGXStatus.SUCCESS
    block = printed_numbers(out, "Block solve:")[0]
    assert block <= 15  # the page: 15
    # The page's scalar solve stalls (1000 iterations, NOT_CONVERGED); here it converges,
    # in more iterations than the block solve.
    assert block < printed_numbers(out, "Scalar solve:")[0]


def test_preconditioner_for_native_jax_solvers(capsys):
    import jax.numpy as jnp
    from jax.scipy.sparse.linalg import cg

    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import poisson_matrix, rhs_ones

    n = 32
    A = poisson_matrix(n)
    b = rhs_ones(n * n)
    M = jaxamg.make_preconditioner(A)

    x, _ = cg(A, b, M=M, tol=1e-6)

    residual = jnp.linalg.norm(b - A @ x) / jnp.linalg.norm(b)

    print(f"Solution: {x}")
    print(f"Residual: {residual:.3e}")

    out = capsys.readouterr().out
    np.testing.assert_allclose(printed_numbers(out, "Solution:")[:3],
                               [2.0437262, 3.587453, 4.8288155], rtol=2e-6)
    assert printed_numbers(out, "Residual:")[0] <= 1e-4  # the page: 1.867e-05 (float32)


def test_preconditioner_for_lineax(capsys):
    # The block switches jax_enable_x64 on and multiplies the float32 A by float64 vectors,
    # which a user's default (standard) promotion allows; the autouse strict_config
    # fixture restores both settings.
    import jax

    jax.config.update("jax_numpy_dtype_promotion", "standard")
    import jax
    import jax.numpy as jnp
    import lineax as lx

    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import poisson_matrix, rhs_ones

    jax.config.update("jax_enable_x64", True)

    n = 32
    A = poisson_matrix(n, skew=2.0)
    b = rhs_ones(n * n)

    operator = lx.FunctionLinearOperator(lambda x: A @ x, b)
    preconditioner = jaxamg.make_lineax_preconditioner(operator)

    solution = lx.linear_solve(
        operator,
        b,
        solver=lx.BiCGStab(rtol=1e-6, atol=1e-6, max_steps=100),
        options={"preconditioner": preconditioner},
    )
    residual = jnp.linalg.norm(b - A @ solution.value) / jnp.linalg.norm(b)

    print(f"Solution: {solution.value}")
    print(f"Residual: {residual:.3e}")

    out = capsys.readouterr().out
    printed = printed_numbers(out, "Solution:")
    np.testing.assert_allclose(printed[:3], [0.25, 0.375, 0.4375], rtol=1e-6)
    np.testing.assert_allclose(printed[-3:], [13.88522106, 14.16045232, 14.41045187],
                               rtol=1e-6)
    assert printed_numbers(out, "Residual:")[0] <= 1e-6  # the page: 2.636e-07


def test_optimization_via_auto_differentiation(capsys):
    import jax
    import jax.numpy as jnp

    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import rhs_linear, rhs_ones, tridiagonal_matrix

    n = 64
    A = tridiagonal_matrix(n, diagonal_value=4.0)
    b_init = rhs_ones(n)
    x_target = rhs_linear(n)

    def loss_fn(b_vec):
        x, _ = jaxamg.solve(A, b_vec, solver="CG")
        return jnp.sum((x-x_target)**2)

    grad_fn = jax.jit(jax.value_and_grad(loss_fn))

    lr = 1.0
    eps = 0.001
    max_iters = 100

    b = b_init
    for _ in range(max_iters):
        loss, grad = grad_fn(b)
        b = b - lr * grad
        print(f"Iter {_:4d}: loss = {loss:8.4f}, grad_norm = {jnp.linalg.norm(grad):8.4f}")
        if jnp.linalg.norm(grad) < eps:
            print("Converged!")
            break

    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == GRADIENT_DESCENT_HEAD


def test_optimization_with_color_caching_for_operator(capsys):
    import jax
    import jax.numpy as jnp

    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import rhs_ones, tridiagonal_operator

    n = 64
    diag_true = 4.0
    diag_init = 8.0

    b = rhs_ones(n)
    x_target, _ = jaxamg.solve(tridiagonal_operator(diag_true), b, solver="CG")

    coloring = jaxamg.cache_coloring(tridiagonal_operator(diag_init), shape=n)

    def loss(diag):
        A = jaxamg.with_cache(tridiagonal_operator(diag), coloring=coloring, is_symmetric=True)
        x_pred, _ = jaxamg.solve(A, b, solver="CG")
        return jnp.mean((x_pred - x_target) ** 2)

    grad_fn = jax.jit(jax.value_and_grad(loss))

    lr = 2.0
    eps = 0.001
    max_iters = 100

    diag = diag_init
    for _ in range(max_iters):
        loss, grad = grad_fn(diag)
        diag = diag - lr * grad

        print(f"Iter {_:4d}: diag = {diag:8.4f}, loss = {loss:8.4f}, grad_norm = {jnp.linalg.norm(grad):8.4f}")
        if jnp.linalg.norm(grad) < eps:
            print("Converged!")
            break

    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == COLORING_HEAD
    # The page converges at iteration 85 with diag = 4.0049.
    assert lines[-1] == "Converged!" and abs(float(diag) - 4.0) < 0.01


def test_batched_solves_with_vmap(capsys):
    import jax
    import jax.numpy as jnp

    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import poisson_matrix, rhs_random

    grid_size = 32
    A = poisson_matrix(grid_size)
    n = grid_size**2

    batch_size = 5
    seeds = jnp.arange(batch_size)
    b_batched = jax.vmap(rhs_random, in_axes=(None, 0))(n, seeds)

    def solve_fn(matrix, rhs):
        return jaxamg.solve(matrix, rhs, solver="CG")

    vmap_solve = jax.vmap(solve_fn, in_axes=(None, 0))
    x_batched, infos = vmap_solve(A, b_batched)

    print(f"Batch Solution Shape: {x_batched.shape}")
    print(f"Batch Residuals: {infos['residual']}")

    out = capsys.readouterr().out
    assert "Batch Solution Shape: (5, 1024)" in out
    residuals = printed_numbers(out, "Batch Residuals:")
    norms = np.linalg.norm(np.asarray(b_batched), axis=1)
    # Absolute true residuals (the page: 2.5e-5 to 3.1e-5, ‖b‖ ≈ 32): float32's attainable
    # accuracy, within a few times the tolerance 1e-6 · ‖b‖.
    assert len(residuals) == 5 and np.all(np.asarray(residuals) <= 1e-5 * norms)


def test_solving_a_distributed_matrix_system():
    out = run_ranks("jaxamg_examples_mpi.py", 2, "solve")
    np.testing.assert_allclose(printed_numbers(out, "Solution:"), OPERATOR_SOLUTION, rtol=1e-6)
    assert printed_numbers(out, "Iterations:") == [3]  # the page: 3
    assert printed_numbers(out, "Residual:")[0] <= 1e-6 * 4


def test_distributed_optimization():
    out = run_ranks("jaxamg_examples_mpi.py", 1, "optimization")
    lines = [line for line in out.splitlines() if line.startswith(("Iter", "Converged"))]
    # The page's result, to its last printed line (the loss of the single-process loop).
    assert lines[:2] == GRADIENT_DESCENT_HEAD[:1] + [
        "Iter    1: loss =   3.2578, grad_norm =   1.7341"]
    assert lines[-2:] == ["Iter   50: loss =   0.0006, grad_norm =   0.0100", "Converged!"]
    assert printed_numbers(out, "Relative error:")[0] < 0.01
