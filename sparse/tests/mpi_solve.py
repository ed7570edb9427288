"""Distributed solves over MPI, run by mpi_solve_test.py as
``mpiexec -n P python mpi_solve.py CHECK...``.

Every rank runs the checks named on the command line; a failed one raises, which ends the rank with an error (and
mpiexec with it). Rank 0 prints one ``OK`` line per check, which the test looks for, and the
iteration counts.

* ``poisson``: JAX-AMG's paper example. The 2D Poisson matrix of a 32 × 32 grid, built
  rank by rank with `matrices.poisson_matrix_distributed`, solved by PBICGSTAB with AMG, the
  solution gathered on rank 0 with `jaxsolve.sharding.gather_vector`: it must equal the
  single-process solve, and every rank must report the same ``info``.
* ``grad``: a nonsymmetric convection–diffusion system split with
  `jaxsolve.sharding.partition_csr_matrix`: the gradient of ``sum(w * x)`` with respect to
  ``b`` and to ``A``'s values on each rank's rows (the reverse mode solves with ``Aᵀ``,
  distributed) must equal the single-process gradient's rows, under `jax.jit` with the
  values traced; ``grad-pcg`` the same for PCG on Poisson (derivatives averaged over
  ``a_ij`` and ``a_ji``, as the single-process CG's).
* ``jvp``, ``jvp-pcg``: forward mode on the same systems: the tangent of ``x`` along
  tangents of ``b`` and of the values (the tangent solve distributed too) must equal the
  single-process tangent's rows.
* ``reuse``: the preconditioner's numbers are set up once for concrete values: a second
  right-hand side and equal values reuse them, new values set up anew, and
  ``reuse_setup=True`` keeps the latest numbers whatever the values; the solutions stay
  right throughout.
* ``structures``: a Laplacian after a convection–diffusion problem on the same pattern
  gets structures of its own (the iterations of a fresh setup), and the same operator
  again builds, sets up and compiles nothing.
* ``relaxation``: JAX-AMG's MPI demos' preconditioners, ``JACOBI_L1`` under PCG and
  ``MULTICOLOR_DILU``, ``BLOCK_JACOBI`` under PBICGSTAB (block-Jacobi relaxation: each rank
  relaxes its diagonal block) on 2D Poisson 24 × 24: the single-process solution, the DILU
  and two Jacobi sweeps in fewer iterations than without a preconditioner.
* ``operator``: JAX-AMG's ``mpi_large_3d_poisson_operator_optimization`` at 6³: each rank
  solves with its rows of a matrix-free operator (``partition_operator``, its coloring and
  MPI metadata attached by ``with_cache``); the loss and its derivative with respect to the
  operator's shift equal the single-process ones.
* ``errors``: the distributed keywords' errors, raised alike on every rank.
"""

import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from jax.experimental import sparse as jsparse  # noqa: E402
from mpi4py import MPI  # noqa: E402

from jaxsolve import sharding, sparse  # noqa: E402
from jaxsolve.sparse import matrices  # noqa: E402
from jaxsolve_testing import counted_compilations  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
PBICGSTAB = {"solver": "PBICGSTAB", "tolerance": 1e-10, "max_iters": 200,
             "preconditioner": {"solver": "AMG"}}
PCG = dict(PBICGSTAB, solver="PCG")


def report(message):
    if rank == 0:
        print(message, flush=True)


def bcsr(data, indices, indptr, shape):
    """A BCSR whose pattern stays NumPy (concrete) when ``data`` is traced."""
    info = {"shape": shape, "indices_sorted": True, "unique_indices": True}
    return jsparse.BCSR.tree_unflatten(info, (data, np.asarray(indices), np.asarray(indptr)))


def on_rank_0(compute):
    """``compute()``'s result (arrays), computed on rank 0 only and sent to every rank.

    For the single-process references: every rank computing (and compiling) them again
    only loaded the machine's cores, which the ranks share. The other ranks wait without
    spinning (MPICH's blocking calls poll), so that rank 0 has a core to itself.
    """
    result = jax.tree.map(np.asarray, compute()) if rank == 0 else None
    arrived = comm.Ibarrier()
    while not arrived.Test():
        time.sleep(0.01)
    return comm.bcast(result, root=0)


def same_everywhere(info):
    """``info`` of this rank, checked equal to every other rank's."""
    mine = (int(info.iterations), float(info.residual), int(info.status))
    everyone = comm.allgather(mine)
    assert all(other == mine for other in everyone), everyone
    return mine


def check_poisson():
    n = 32
    A_local, row_start, row_end = matrices.poisson_matrix_distributed(
        n, n, rank, size, dtype=jnp.float64)
    b = np.asarray(matrices.rhs_random(n * n, seed=3, dtype=jnp.float64))
    b_local = jnp.asarray(b[row_start:row_end])
    x_local, info = sparse.solve(A_local, b_local, comm=comm, nglobal=n * n,
                                 partition_info=(row_start, row_end), config=PBICGSTAB)
    iterations, _, status = same_everywhere(info)
    assert sparse.Status(status) == sparse.Status.SUCCESS, info
    assert x_local.shape == (row_end - row_start,)
    x = sharding.gather_vector(np.asarray(x_local), comm=comm, root=0)

    if rank == 0:
        A = matrices.poisson_matrix(n, dtype=jnp.float64)
        x_single, single = sparse.solve(A, jnp.asarray(b), config=PBICGSTAB)
        np.testing.assert_allclose(x, x_single, rtol=1e-7, atol=1e-9 * np.abs(x_single).max())
        residual = np.linalg.norm(sp.csr_array(A.todense()) @ x - b) / np.linalg.norm(b)
        assert residual < 1e-9, residual
        print(f"poisson 32x32 PBICGSTAB iterations: {size} ranks {iterations}, single "
              f"process {int(single.iterations)}", flush=True)
    else:
        assert x is None
    report(f"OK poisson on {size} ranks")


def check_reuse():
    n = 16
    A_global = sp.csr_array(matrices.convection_diffusion_matrix_2d(n, peclet=2.0, dtype=jnp.float64)
                            .todense())
    A_block, (row_start, row_end) = sharding.partition_csr_matrix(A_global, rank, size)
    b = np.asarray(matrices.rhs_random(n * n, seed=7, dtype=jnp.float64))
    b_local = jnp.asarray(b[row_start:row_end])
    x_single = np.linalg.solve(A_global.todense(), b)[row_start:row_end]
    close = {"rtol": 1e-6, "atol": 1e-8 * float(np.abs(x_single).max())}
    setups = []
    real = sparse._mpi._setup_numbers
    sparse._mpi._setup_numbers = lambda *args: setups.append(args) or real(*args)

    def solve(scale, rhs, **keywords):
        A = bcsr(jnp.asarray(scale * A_block.data), A_block.indices, A_block.indptr,
                 A_block.shape)
        x, info = sparse.solve(A, rhs, comm=comm, nglobal=n * n,
                               partition_info=(row_start, row_end), config=PBICGSTAB,
                               **keywords)
        assert sparse.Status(same_everywhere(info)[2]) == sparse.Status.SUCCESS, info
        return np.asarray(x)

    try:
        np.testing.assert_allclose(solve(1.0, b_local), x_single, **close)
        assert len(setups) == 1
        np.testing.assert_allclose(solve(1.0, 2 * b_local), 2 * x_single, **close)
        assert len(setups) == 1  # equal values (another array): the numbers are reused
        np.testing.assert_allclose(solve(2.0, b_local), x_single / 2, **close)
        assert len(setups) == 2  # new values: set up anew
        # The numbers of 2A precondition A's solve: still converged, no new setup.
        np.testing.assert_allclose(solve(1.0, b_local, reuse_setup=True), x_single, **close)
        assert len(setups) == 2
    finally:
        sparse._mpi._setup_numbers = real
    report(f"OK reuse on {size} ranks")


def check_structures():
    n = 24
    pcg = {"solver": "PCG", "tolerance": 1e-8, "preconditioner": {"solver": "AMG"}}
    parts = {name: sharding.partition_csr_matrix(sp.csr_array(matrix.todense()), rank, size)
             for name, matrix in (
                 ("convection", matrices.convection_diffusion_matrix_2d(n, peclet=10.0,
                                                                        dtype=jnp.float64)),
                 ("laplacian", matrices.poisson_matrix(n, dtype=jnp.float64)))}
    (_, (row_start, row_end)), layouts = parts["laplacian"], sparse._mpi._LAYOUTS

    def iterations(name, **config):
        block = parts[name][0]
        A = bcsr(jnp.asarray(block.data), block.indices, block.indptr, block.shape)
        _, info = sparse.solve(A, jnp.ones(row_end - row_start), comm=comm, nglobal=n * n,
                               partition_info=(row_start, row_end), config={**pcg, **config})
        return same_everywhere(info)[0]

    layouts.clear()
    fresh = iterations("laplacian")
    layouts.clear()
    iterations("convection", max_iters=2)  # its setup
    # Before: the convection's structures served the Laplacian (16 PCG iterations for 14).
    assert iterations("laplacian") == fresh, fresh
    assert len(layouts) == 2
    # The same operator again: all kept (the first compiles the comparison that finds the
    # kept numbers, once per shape, as before structures were keyed).
    assert iterations("laplacian") == fresh
    setups = []
    real = sparse._mpi._setup_numbers
    sparse._mpi._setup_numbers = lambda *args: setups.append(args) or real(*args)
    try:
        with counted_compilations() as compiled:
            assert iterations("laplacian") == fresh
    finally:
        sparse._mpi._setup_numbers = real
    assert (compiled[0], len(setups), len(layouts)) == (0, 0, 2), (compiled, setups)
    report(f"OK structures on {size} ranks")


def check_grad(A_global, config, name):
    A_global = sp.csr_array(A_global)
    n = A_global.shape[0]
    A_block, (row_start, row_end) = sharding.partition_csr_matrix(A_global, rank, size)
    b = np.asarray(matrices.rhs_random(n, seed=5, dtype=jnp.float64))
    weights = np.cos(np.arange(n))
    pattern = sparse.as_csr(A_global)

    def single(values, b):
        x, _ = sparse.solve(pattern.with_values(values), b, config=config)
        return jnp.sum(weights * x)

    values_bar, b_bar = on_rank_0(lambda: jax.grad(single, argnums=(0, 1))(
        jnp.asarray(A_global.data), jnp.asarray(b)))
    local = slice(A_global.indptr[row_start], A_global.indptr[row_end])

    # Each rank differentiates its own part of the loss: the gradients are those of the sum.
    def distributed(data, b_local):
        A = bcsr(data, A_block.indices, A_block.indptr, A_block.shape)
        x_local, _ = sparse.solve(A, b_local, comm=comm, nglobal=n,
                                  partition_info=(row_start, row_end), config=config)
        return jnp.sum(weights[row_start:row_end] * x_local)

    data_bar, b_local_bar = jax.jit(jax.grad(distributed, argnums=(0, 1)))(
        jnp.asarray(A_block.data), jnp.asarray(b[row_start:row_end]))
    np.testing.assert_allclose(b_local_bar, b_bar[row_start:row_end], rtol=1e-6,
                               atol=1e-8 * float(jnp.abs(b_bar).max()))
    np.testing.assert_allclose(data_bar, values_bar[local], rtol=1e-6,
                               atol=1e-8 * float(jnp.abs(values_bar).max()))
    report(f"OK grad {name} on {size} ranks")


def check_jvp(A_global, config, name):
    """Forward mode: the tangent of ``x`` along a tangent of ``b`` and of the values (not
    symmetric: CG's derivatives average ``a_ij`` and ``a_ji``), under `jax.jit`."""
    A_global = sp.csr_array(A_global)
    n = A_global.shape[0]
    A_block, (row_start, row_end) = sharding.partition_csr_matrix(A_global, rank, size)
    rng = np.random.default_rng(7)  # the same on every rank
    b = np.asarray(matrices.rhs_random(n, seed=5, dtype=jnp.float64))
    b_dot = rng.standard_normal(n)
    values_dot = rng.standard_normal(A_global.nnz) * np.abs(A_global.data)
    pattern = sparse.as_csr(A_global)

    def single(values, b):
        return sparse.solve(pattern.with_values(values), b, config=config)[0]

    x_dot = on_rank_0(lambda: jax.jvp(single, (jnp.asarray(A_global.data), jnp.asarray(b)),
                                      (jnp.asarray(values_dot), jnp.asarray(b_dot)))[1])
    local = slice(A_global.indptr[row_start], A_global.indptr[row_end])

    def distributed(data, b_local):
        A = bcsr(data, A_block.indices, A_block.indptr, A_block.shape)
        return sparse.solve(A, b_local, comm=comm, nglobal=n,
                            partition_info=(row_start, row_end), config=config)[0]

    rows = slice(row_start, row_end)
    _, x_dot_local = jax.jit(lambda values, b, values_dot, b_dot: jax.jvp(
        distributed, (values, b), (values_dot, b_dot)))(
        jnp.asarray(A_block.data), jnp.asarray(b[rows]), jnp.asarray(values_dot[local]),
        jnp.asarray(b_dot[rows]))
    scale = float(jnp.abs(x_dot).max())
    np.testing.assert_allclose(x_dot_local, x_dot[rows], rtol=1e-6, atol=1e-8 * scale)
    error = comm.allreduce(float(jnp.abs(x_dot_local - x_dot[rows]).max()), op=MPI.MAX)
    report(f"jvp {name}: max |x_dot - single process| / max |x_dot| = {error / scale:.1e}")
    report(f"OK jvp {name} on {size} ranks")


def check_relaxation():
    n = 24
    A_local, row_start, row_end = matrices.poisson_matrix_distributed(
        n, n, rank, size, dtype=jnp.float64)
    b = np.asarray(matrices.rhs_random(n * n, seed=5, dtype=jnp.float64))
    x_single = np.linalg.solve(matrices.poisson_matrix(n, dtype=jnp.float64).todense(), b)

    def solve(solver, preconditioner):
        config = {"solver": solver, "tolerance": 1e-10, "max_iters": 400,
                  "preconditioner": preconditioner}
        x_local, info = sparse.solve(A_local, jnp.asarray(b[row_start:row_end]), comm=comm,
                                     nglobal=n * n, partition_info=(row_start, row_end),
                                     config=config)
        iterations, _, status = same_everywhere(info)
        assert sparse.Status(status) == sparse.Status.SUCCESS, (preconditioner, info)
        np.testing.assert_allclose(x_local, x_single[row_start:row_end], rtol=1e-7,
                                   atol=1e-9 * np.abs(x_single).max())
        return iterations

    # ℓ1-Jacobi only rescales Poisson's rows (nearly a constant): not fewer iterations.
    for solver, preconditioner, helps in (
            ("PCG", "JACOBI_L1", False), ("PBICGSTAB", "MULTICOLOR_DILU", True),
            ("PBICGSTAB", {"solver": "BLOCK_JACOBI", "max_iters": 2}, True)):
        iterations = solve(solver, preconditioner)
        plain = solve(solver, "NOSOLVER")
        assert iterations < plain or not helps, (preconditioner, iterations, plain)
        report(f"{solver} + {preconditioner} on {size} ranks: {iterations} iterations"
               f" (none: {plain})")
    report(f"OK relaxation on {size} ranks")


def check_operator():
    grid = 6
    n = grid**3
    config = {"solver": "PBICGSTAB", "preconditioner": {"solver": "AMG"}, "tolerance": 1e-10}
    row_start, row_end, n_local = sparse.mpi_utils.get_partition_info(n, rank, size)

    def make_operator(theta):
        base = matrices.poisson3d_operator(robin=2.0)
        return lambda u: base(u) + theta * u

    local, _, _ = sparse.mpi_utils.partition_operator(make_operator(1.0), n, rank, size)
    coloring = sparse.cache_coloring(local, shape=(n_local, n))
    mpi_cache = sparse.cache_mpi_metadata(config, comm, n, (row_start, row_end), local)
    b = jnp.linspace(0.0, 1.0, n)

    def loss_local(theta):
        op, _, _ = sparse.mpi_utils.partition_operator(make_operator(theta), n, rank, size)
        x, _ = sparse.solve(sparse.with_cache(op, coloring=coloring, mpi=mpi_cache),
                            b[row_start:row_end])
        return jnp.sum(x**2)

    loss, grad = jax.jit(jax.value_and_grad(loss_local))(2.0)
    loss, grad = comm.allreduce(float(loss)), comm.allreduce(float(grad))

    def single():
        whole = sparse.cache_coloring(make_operator(1.0), shape=n)

        def loss_single(theta):
            x, _ = sparse.solve(sparse.with_cache(make_operator(theta), coloring=whole), b,
                                config=config)
            return jnp.sum(x**2)

        return jax.value_and_grad(loss_single)(2.0)

    expected = on_rank_0(single)
    np.testing.assert_allclose((loss, grad), expected, rtol=1e-7)
    report(f"OK operator on {size} ranks")


def check_errors():
    A_local, row_start, row_end = matrices.poisson_matrix_distributed(8, 8, rank, size)
    b_local = jnp.ones(row_end - row_start)
    cases = [
        (dict(comm=comm), ValueError, "missing nglobal, partition_info"),
        (dict(comm=comm, nglobal=64, partition_info=(0, 64)), ValueError,
         "contiguous blocks in rank order"),
        (dict(comm=comm, nglobal=64 + rank, partition_info=(row_start, row_end)), ValueError,
         "the ranks disagree on nglobal"),
        (dict(comm=comm, nglobal=64, partition_info=(row_start, row_end),
              near_nullspace=jnp.ones(3)), ValueError, "near_nullspace= is not supported"),
        (dict(comm="world", nglobal=64, partition_info=(row_start, row_end)), TypeError,
         "mpi4py communicator"),
    ]
    for keywords, error, message in cases:
        try:
            sparse.solve(A_local, b_local, **keywords)
        except error as raised:
            assert message in str(raised), (message, str(raised))
        else:
            raise AssertionError(f"no {error.__name__} for {keywords}")
    # Only the last rank's b_local is short: every rank raises, none waits for it.
    last = size - 1
    try:
        sparse.solve(A_local, b_local[:-1] if rank == last else b_local, comm=comm,
                     nglobal=64, partition_info=(row_start, row_end))
    except ValueError as raised:
        expected = "b_local must have shape" if rank == last else f"rank {last} rejected"
        assert expected in str(raised), str(raised)
    else:
        raise AssertionError("no ValueError for a short b_local")
    report(f"OK errors on {size} ranks")


CHECKS = {
    "errors": check_errors,
    "poisson": check_poisson,
    "reuse": check_reuse,
    "structures": check_structures,
    "relaxation": check_relaxation,
    "operator": check_operator,
    "grad": lambda: check_grad(
        matrices.convection_diffusion_matrix_2d(16, peclet=2.0, dtype=jnp.float64).todense(),
        PBICGSTAB, "convection-diffusion PBICGSTAB"),
    "jvp": lambda: check_jvp(
        matrices.convection_diffusion_matrix_2d(16, peclet=2.0, dtype=jnp.float64).todense(),
        PBICGSTAB, "convection-diffusion PBICGSTAB"),
    "jvp-pcg": lambda: check_jvp(matrices.poisson_matrix(16, dtype=jnp.float64).todense(),
                                 PCG, "poisson PCG"),
    "grad-pcg": lambda: check_grad(matrices.poisson_matrix(16, dtype=jnp.float64).todense(),
                                   PCG, "poisson PCG"),
}
for check in sys.argv[1:]:
    CHECKS[check]()
