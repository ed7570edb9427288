"""JAX-AMG's MPI transport names in ``jaxsolve.sparse.mpi_utils`` (``register_comm``,
``resolve_comm``, ``local_transpose_nnz``, ``HaloPlan``, ``build_halo_plan``), run by
jaxamg_mpi_utils_test.py under ``mpiexec -n P``; rank 0 prints ``OK ...`` when every rank
agrees.

The plan is checked by its use: each rank sends ``x_local[send_ids_2d]`` in one
``alltoall``, places what it receives by ``recv_ghost_slot_2d``, and the combined vector
``[x_local | x_ghost]`` indexed by ``col_to_combined`` must be ``x`` at the block's global
columns; the transpose's counts against SciPy's transpose of the global matrix.
"""

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from jaxsolve.sparse.mpi_utils import (HaloPlan, build_halo_plan, local_transpose_nnz,
                                       register_comm, resolve_comm)

comm = MPI.COMM_WORLD
rank, nranks = comm.rank, comm.size

# A nonsymmetric pattern (columns far off the diagonal, an empty row) over uneven blocks.
n = 7 * nranks + 3
rng = np.random.default_rng(7)
A = sp.random_array((n, n), density=0.15, format="csr", rng=rng) + sp.eye_array(n, format="csr")
A = A.tolil()
A[2, :] = 0
A = A.tocsr()
A.eliminate_zeros()
even = [n // nranks + (r < n % nranks) for r in range(nranks)]
counts = tuple([even[0] + 2, *even[1:-1], even[-1] - 2] if nranks > 1 else even)
starts = np.cumsum((0, *counts))
row_start, row_end = int(starts[rank]), int(starts[rank + 1])
block = A[row_start:row_end]
columns = block.indices.astype(np.int64)

plan = build_halo_plan(columns, counts, (row_start, row_end), comm)
assert isinstance(plan, HaloPlan) and plan.n_local == row_end - row_start
x = np.arange(n, dtype=np.float64) * 1.5 + 1
x_local = x[row_start:row_end]
received = comm.alltoall([x_local[plan.send_ids_2d[p]] for p in range(nranks)])
ghosts = np.zeros(plan.n_ghost + 1)  # the last slot takes the padding
for p in range(nranks):
    ghosts[plan.recv_ghost_slot_2d[p]] = received[p]
combined = np.concatenate([x_local, ghosts[:plan.n_ghost]])
np.testing.assert_array_equal(combined[plan.col_to_combined], x[columns])
outside = np.unique(columns[(columns < row_start) | (columns >= row_end)])
assert plan.n_ghost == len(outside) > 0
assert plan.col_to_combined.dtype == plan.send_ids_2d.dtype == np.int32
assert plan.send_ids_2d.shape == plan.recv_ghost_slot_2d.shape == (nranks, plan.max_per_rank)
assert len({comm.allgather(plan.max_per_rank)[q] for q in range(nranks)}) == 1

transposed = A.T.tocsr()
expected = int(transposed.indptr[row_end] - transposed.indptr[row_start])
assert local_transpose_nnz(columns, counts, comm) == expected

half = comm.Split(rank % 2, rank)
key = register_comm(half)
assert isinstance(key, int) and resolve_comm(key) is half
assert resolve_comm(key + 1) is MPI.COMM_WORLD  # never registered: JAX-AMG's fallback

done = comm.gather(True)
if rank == 0 and all(done):
    print(f"OK transport on {nranks} ranks", flush=True)
