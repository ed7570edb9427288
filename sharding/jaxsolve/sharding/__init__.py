"""Launching, meshes and row partitions for multi-device jaxsolve runs (``jaxsolve.sharding``).

jaxsolve's multi-GPU solvers run as one process per GPU, as NCCL and cuSOLVERMp want, and JAX
joins those processes into one run with `jax.distributed.initialize`. This package makes that
step dependable on one host and on clusters:

* ``python -m jaxsolve.sharding.launch -n 4 script.py`` (or `launch_processes` from Python) starts the
  processes on this host, one per GPU, gives each its process id and a free coordinator port,
  prefixes their output with ``[rank i]``, and stops them all, saying which one failed and why,
  as soon as one fails, on a timeout, or on Ctrl-C. ``--platform cpu`` runs them on virtual CPU
  devices, to try things out without GPUs.
* `initialize` starts JAX's distributed runtime from the environment of whatever launched the
  process: our launcher, ``mpirun`` (Open MPI), ``mpiexec`` (MPICH, Intel MPI), Slurm's ``srun``,
  or nothing (a single process, left alone). It checks the environment first and says what is
  wrong instead of hanging. `detect_process` shows what it would do.
* `nccl_communicator` creates jaxsolve's own NCCL communicator over a set of GPUs once and
  caches it (the unique id travels between processes through
  `jax.experimental.multihost_utils`; one process may hold several GPUs), for native solvers
  such as cuSOLVERMp: no XLA internals, so one binary serves every JAX release. Such a
  solver checks `nccl_version` and frees its state in `on_destroy_nccl_communicators`;
  NCCL's CUDA major is `jaxsolve.runtime.cuda_major`'s, as every package's.
* `make_grid_mesh` lays devices over a dense 2D process grid in the row- or column-major order of
  cuSOLVERMp's ``cusolverMpGridMapping_t``; `row_mesh` is the 1D mesh of matrices and vectors
  split in blocks of rows (sparse solvers).
* `partition_rows`, `partition_csr_matrix`, `partition_vector` and `gather_vector` split a
  sparse system into contiguous blocks of rows, one per rank, balanced by rows or by stored
  entries, and put vectors back together (from a list, or over MPI with mpi4py).
* `halo_plans` (all ranks, one host) and `halo_plan` (one MPI rank) say which entries of ``x``
  each rank must receive from and send to which other rank for its rows of ``A x``, renumber
  its columns into ``[owned | halo]``, and count the bytes exchanged (`HaloPlan`).
* `shard_rows` turns a global sparse matrix into a `ShardedCsrMatrix`: blocks of rows (padded
  to one length when the devices do not divide the rows) stacked over the devices of a
  `row_mesh` with their halo exchanges as ``ppermute`` messages,
  for one-host solves under `jax.shard_map` (`jaxsolve.sparse.solve` takes it); `shard_map` is
  `jax.shard_map` on every supported JAX.

Examples:
  A script, run with ``python -m jaxsolve.sharding.launch -n 4 --platform cpu script.py``, in
  which the four processes sum their ids over a mesh of all their devices:

  .. code-block:: python

      import jax
      import numpy as np
      from jax.sharding import NamedSharding, PartitionSpec as P
      import jaxsolve.sharding as js

      info = js.initialize()                   # before anything else touches JAX
      mesh = js.row_mesh()                     # all devices of all processes
      local = np.full(jax.local_device_count(), info.process_id)
      x = jax.make_array_from_process_local_data(NamedSharding(mesh, P("rows")), local)
      total = jax.shard_map(lambda v: jax.lax.psum(v, "rows"), mesh=mesh,
                            in_specs=P("rows"), out_specs=P())(x)
      print(total.addressable_data(0))        # [6] on every process: 0 + 1 + 2 + 3

  The mesh of a 2 × 3 process grid, here over six CPU devices of a single process:

  >>> import jax
  >>> import jaxsolve.sharding as js
  >>> mesh = js.make_grid_mesh(2, 3, order="column", devices=jax.devices("cpu")[:6])
  >>> [[d.id for d in row] for row in mesh.devices]
  [[0, 2, 4], [1, 3, 5]]

  A 1D Poisson matrix split over 3 ranks, and each rank's rows of ``A x`` from its own entries
  of ``x`` and the halo entries the others send it:

  >>> import numpy as np, scipy.sparse as sp
  >>> A = sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(9, 9), format="csr")
  >>> x = np.arange(9.0) ** 2
  >>> row_ranges = js.partition_rows(A.indptr, 3, balance="nnz")
  >>> plans = js.halo_plans(A, row_ranges)
  >>> pieces = []
  >>> for rank, plan in enumerate(plans):
  ...     A_block, _ = js.partition_csr_matrix(A, rank, 3, balance="nnz")
  ...     x_owned = js.partition_vector(x, rank, 3, row_ranges=row_ranges)
  ...     x_halo = np.empty(plan.n_halo)
  ...     for source, part in plan.receives():   # what `source` sends to `rank`
  ...         sent = dict(plans[source].sends())[rank]
  ...         x_halo[part] = js.partition_vector(x, source, 3, row_ranges=row_ranges)[sent]
  ...     pieces.append(plan.localize(A_block) @ np.concatenate([x_owned, x_halo]))
  >>> js.gather_vector(pieces)
  array([-1., -2., -2., -2., -2., -2., -2., -2., 79.])
  >>> bool(np.array_equal(js.gather_vector(pieces), A @ x))
  True
"""

import importlib.metadata as _metadata

from ._initialize import ProcessInfo as ProcessInfo
from ._initialize import detect_process as detect_process
from ._initialize import initialize as initialize
from ._halo import HaloPlan as HaloPlan
from ._halo import halo_plan as halo_plan
from ._halo import halo_plans as halo_plans
from ._launcher import launch_processes as launch_processes
from ._mesh import make_grid_mesh as make_grid_mesh
from ._nccl import NcclCommunicator as NcclCommunicator
from ._nccl import destroy_nccl_communicators as destroy_nccl_communicators
from ._nccl import nccl_communicator as nccl_communicator
from ._nccl import nccl_version as nccl_version
from ._nccl import on_destroy_nccl_communicators as on_destroy_nccl_communicators
from ._mesh import row_mesh as row_mesh
from ._partition import gather_vector as gather_vector
from ._partition import partition_csr_matrix as partition_csr_matrix
from ._partition import partition_rows as partition_rows
from ._partition import partition_vector as partition_vector
from ._sharded import ShardedCsrMatrix as ShardedCsrMatrix
from ._sharded import shard_map as shard_map
from ._sharded import shard_rows as shard_rows

try:
    __version__ = _metadata.version("jaxsolve-sharding")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = [
    "HaloPlan",
    "NcclCommunicator",
    "ProcessInfo",
    "ShardedCsrMatrix",
    "destroy_nccl_communicators",
    "detect_process",
    "gather_vector",
    "halo_plan",
    "halo_plans",
    "initialize",
    "launch_processes",
    "make_grid_mesh",
    "nccl_communicator",
    "nccl_version",
    "on_destroy_nccl_communicators",
    "partition_csr_matrix",
    "partition_rows",
    "partition_vector",
    "row_mesh",
    "shard_map",
    "shard_rows",
]
