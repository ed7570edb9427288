"""The MPI blocks of JAX-AMG's Examples page (docs/examples.md, "MPI distributed mode"), with
only the imports changed (``jaxamg`` → ``jaxsolve.sparse``), run by jaxamg_examples_test.py
under ``mpiexec``: ``python jaxamg_examples_mpi.py solve`` or ``optimization``, one block
per process (each ends with ``jaxamg.finalize()``).  The blocks print what the page's
"Result" tabs show; the test compares.
"""

import sys


def solving_a_distributed_matrix_system():
    from mpi4py import MPI
    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.mpi_utils import partition_vector, gather_vector
    from jaxsolve.sparse.matrices import poisson_matrix_distributed, rhs_ones

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    nranks = comm.Get_size()

    n = 4
    A_local, row_start, row_end = poisson_matrix_distributed(n, n, rank, nranks)
    b_local, _, _ = partition_vector(rhs_ones(n * n), rank, nranks)

    x_local, info = jaxamg.solve(
        A_local,
        b_local,
        comm=comm,
        nglobal=n * n,
        partition_info=(row_start, row_end),
        config={
            "solver": "CG",
            "preconditioner": {"solver": "JACOBI_L1"},
            "communicator": "MPI_DIRECT",
        },
    )

    x_global = gather_vector(x_local, comm, root=0)
    if rank == 0:
        print(f"Solution: {x_global}")
        print(f"Iterations: {info['iterations']}")
        print(f"Residual: {info['residual']}")

    comm.Barrier()
    jaxamg.finalize()


def distributed_optimization():
    import jax
    import jax.numpy as jnp
    from mpi4py import MPI
    import jaxsolve.sparse as jaxamg
    from jaxsolve.sparse.matrices import tridiagonal_matrix_distributed, rhs_ones, rhs_linear
    from jaxsolve.sparse.mpi_utils import gather_vector

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    nranks = comm.Get_size()

    n_global = 64
    x_target_global = rhs_linear(n_global)

    A_loc, row_start, row_end = tridiagonal_matrix_distributed(
        n_global, rank, nranks, diagonal_value=4.0
    )
    b_loc = rhs_ones(row_end - row_start)
    x_target_loc = x_target_global[row_start:row_end]

    config = {"solver": "CG", "communicator": "MPI_DIRECT"}

    mpi_cache = jaxamg.cache_mpi_metadata(
        config, comm, n_global, (row_start, row_end), A_loc
    )

    def loss_local(b_loc):
        A = jaxamg.with_cache(A_loc, mpi=mpi_cache, is_symmetric=True)
        x_loc, _ = jaxamg.solve(A, b_loc)
        return jnp.sum((x_loc - x_target_loc) ** 2)

    loss_grad = jax.jit(jax.value_and_grad(loss_local))

    lr = 0.5
    max_iters = 100
    eps = 0.01

    for _ in range(max_iters):
        loss_loc, grad_loc = loss_grad(b_loc)
        loss_global = comm.allreduce(loss_loc, op=MPI.SUM)
        b_loc = b_loc - lr * grad_loc
        if jnp.linalg.norm(grad_loc) < eps:
            print("Converged!")
            break
        if rank == 0:
            print(f"Iter {_:4d}: loss = {loss_global:8.4f}, grad_norm = {jnp.linalg.norm(grad_loc):8.4f}")

    comm.Barrier()
    x_loc, _ = jaxamg.solve(A_loc, b_loc)
    x_global = gather_vector(x_loc, comm, root=0)
    if rank == 0:
        print(f"Relative error: {jnp.linalg.norm(x_global - x_target_global) / jnp.linalg.norm(x_target_global)}")

    comm.Barrier()
    jaxamg.finalize()


if __name__ == "__main__":
    {"solve": solving_a_distributed_matrix_system,
     "optimization": distributed_optimization}[sys.argv[1]]()
