"""A distributed ``y = A x`` over MPI, run by mpi_test.py as ``mpiexec -n P python mpi_spmv.py``.

``A`` is the 5-point Poisson matrix of a 32 × 32 grid (JAX-AMG's example), partitioned by
entries with `jaxsolve.sharding.partition_csr_matrix`; each rank plans its halo with
`halo_plan` (one ``alltoall``) and computes its rows of ``A x`` twice: on the host, exchanging
the halo with mpi4py's point-to-point messages, and under `jax.jit`, exchanging it with
`mpi4jax.sendrecv`. `gather_vector` brings the products together, to rank 0 and to every rank,
where they must equal the serial product. Rank 0 prints one line that the test looks for.
"""

import jax
import jax.numpy as jnp
import mpi4jax
import numpy as np
from jax.experimental import sparse as jsparse
from mpi4py import MPI

import jaxsolve.sharding as js
from helpers import poisson

jax.config.update("jax_enable_x64", True)

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
A = poisson(32, 2)
x = np.random.default_rng(0).standard_normal(A.shape[0])
expected = A @ x

A_block, (row_start, row_end) = js.partition_csr_matrix(A, rank, size, balance="nnz")
row_ranges = tuple(comm.allgather((row_start, row_end)))
assert row_ranges == js.partition_rows(A.indptr, size, balance="nnz"), row_ranges
plan = js.halo_plan(A_block, row_ranges, comm)
assert plan == js.halo_plans(A, row_ranges)[rank], plan
A_local = plan.localize(A_block)
x_owned = js.partition_vector(x, rank, size, row_ranges=row_ranges)

# On the host: one message from and to each neighbour, as the plan lists them.
x_halo = np.empty(plan.n_halo)
outgoing = [(q, x_owned[positions]) for q, positions in plan.sends()]
requests = [comm.Irecv(x_halo[part], source=q) for q, part in plan.receives()]
requests += [comm.Isend(message, dest=q) for q, message in outgoing]
MPI.Request.Waitall(requests)
y_host = A_local @ np.concatenate([x_owned, x_halo])

# Under jax.jit: the Poisson pattern is symmetric, so each neighbour both sends and receives.
assert plan.send_ranks == plan.recv_ranks, plan
jax_comm = comm.Clone()
A_jax = jsparse.BCSR.from_scipy_sparse(A_local)


@jax.jit
def product(x_owned):
    pieces = [x_owned]
    for (q, part), (_, positions) in zip(plan.receives(), plan.sends()):
        pieces.append(mpi4jax.sendrecv(x_owned[positions], jnp.zeros(part.stop - part.start),
                                       source=q, dest=q, comm=jax_comm))
    y = A_jax @ jnp.concatenate(pieces)
    return y, mpi4jax.allreduce(jnp.vdot(y, y), op=MPI.SUM, comm=jax_comm)


y_jax, norm_squared = product(jnp.asarray(x_owned))
np.testing.assert_allclose(float(norm_squared), expected @ expected, rtol=1e-12)

y_on_root = js.gather_vector(y_host, comm=comm, root=0)
y_everywhere = js.gather_vector(np.asarray(y_jax), comm=comm)
np.testing.assert_allclose(y_everywhere, expected, rtol=1e-12, atol=1e-12)
stacked = js.gather_vector(np.stack([y_host, -y_host], axis=1), comm=comm, root=size - 1)
assert (stacked is None) == (rank != size - 1)
if stacked is not None:
    np.testing.assert_allclose(stacked, np.stack([expected, -expected], axis=1), atol=1e-12)
halo_bytes = comm.gather(plan.bytes_per_exchange(np.float64), root=0)
if rank == 0:
    np.testing.assert_allclose(y_on_root, expected, rtol=1e-12, atol=1e-12)
    print(f"distributed SpMV matches on {size} ranks; (sent, received) bytes per rank: "
          f"{halo_bytes}")
else:
    assert y_on_root is None
