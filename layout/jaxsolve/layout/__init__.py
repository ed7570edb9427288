"""The 2D block-cyclic matrix layout of ScaLAPACK and cuSOLVERMp, for JAX.

Distributed dense solvers (ScaLAPACK, cuSOLVERMp) do not take a matrix in contiguous row or
column blocks, as a JAX `NamedSharding` gives it. They take it **2D block-cyclic**: the matrix is
cut into square T × T tiles, and tile ``(I, J)`` goes to process ``(I % P_r, J % P_c)`` of a
P_r × P_c process grid, dealt out like cards, so that every process keeps work until the end of a
factorization. Each process stores its tiles as one column-major local matrix.

This package holds that layout, separate from any solver:

* `BlockCyclicPlan` describes the distribution (tile, grid, grid order, padding) and maps indices
  between the global matrix and the processes' local matrices, in ScaLAPACK conventions (source
  process ``(0, 0)``, ``MB = NB``, column-major local storage, ``lld``). `numroc` is ScaLAPACK's
  count of the rows or columns a process owns.
* `to_block_cyclic` and `from_block_cyclic` move a sharded JAX matrix into the plan's local
  matrices and back, inside `jax.shard_map`, with point-to-point collectives only.
* `local_row_to_column_major` and `local_column_to_row_major` are the native (CPU and CUDA)
  in-place kernels for one device's part: a row-major local matrix to column-major, with its
  tiles permuted, using scratch bounded by `local_scratch_elements`, not a second matrix.
  `ships_cuda_library` says whether they run on JAX's CUDA plugin. They are loaded by
  `jaxsolve.runtime.NativeLibrary`, as every package's native code is.

The plan pads the matrix so that every process holds the same number of whole tiles.

Examples:
  An 8 × 8 matrix in 2 × 2 tiles on a 2 × 2 grid; the rank that owns each element, with ranks laid
  row-major over the grid (cuSOLVERMp's ``CUSOLVERMP_GRID_MAPPING_ROW_MAJOR``):

  >>> import numpy as np
  >>> import jaxsolve.layout as jl
  >>> plan = jl.BlockCyclicPlan(m=8, n=8, tile=2, grid_rows=2, grid_cols=2)
  >>> i, j = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
  >>> plan.rank(*plan.owner(i, j))
  array([[0, 0, 1, 1, 0, 0, 1, 1],
         [0, 0, 1, 1, 0, 0, 1, 1],
         [2, 2, 3, 3, 2, 2, 3, 3],
         [2, 2, 3, 3, 2, 2, 3, 3],
         [0, 0, 1, 1, 0, 0, 1, 1],
         [0, 0, 1, 1, 0, 0, 1, 1],
         [2, 2, 3, 3, 2, 2, 3, 3],
         [2, 2, 3, 3, 2, 2, 3, 3]])

  Every process holds a 4 × 4 local matrix, stored column-major with leading dimension 4. A 7 × 7
  matrix is padded to 8 × 8 and needs the same local matrices:

  >>> plan.local_shape, plan.lld
  ((4, 4), 4)
  >>> jl.BlockCyclicPlan(m=7, n=7, tile=2, grid_rows=2, grid_cols=2).padded_shape
  (8, 8)

  Moving a sharded matrix into that layout and back (here on a single device; with a
  ``(P_r, P_c)`` mesh, process ``(p, q)`` is the device at position ``(p, q)``):

  >>> import jax, jax.numpy as jnp
  >>> from jax.sharding import NamedSharding, PartitionSpec as P
  >>> mesh = jax.make_mesh((1, 1), ("x", "y"))
  >>> plan = jl.BlockCyclicPlan(m=7, n=7, tile=2, grid_rows=1, grid_cols=1)
  >>> a = jax.device_put(jnp.eye(7), NamedSharding(mesh, P("x", "y")))
  >>> storage = jl.to_block_cyclic(a, plan, mesh, ("x", "y"))
  >>> storage.shape  # (P_r, P_c, local columns, local rows): storage[p, q].T is the local matrix
  (1, 1, 8, 8)
  >>> jnp.array_equal(jl.from_block_cyclic(storage, plan, mesh, ("x", "y")), a)
  Array(True, dtype=bool)
"""

import importlib.metadata as _metadata

from ._block_cyclic import from_block_cyclic as from_block_cyclic
from ._block_cyclic import to_block_cyclic as to_block_cyclic
from ._native import local_column_to_row_major as local_column_to_row_major
from ._native import local_row_to_column_major as local_row_to_column_major
from ._native import local_scratch_elements as local_scratch_elements
from ._ffi import ships_cuda_library as ships_cuda_library
from ._plan import BlockCyclicPlan as BlockCyclicPlan
from ._plan import numroc as numroc

try:
    __version__ = _metadata.version("jaxsolve-layout")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = [
    "BlockCyclicPlan",
    "from_block_cyclic",
    "local_column_to_row_major",
    "local_row_to_column_major",
    "local_scratch_elements",
    "numroc",
    "ships_cuda_library",
    "to_block_cyclic",
]
