"""``cache_mpi_metadata``: a distributed solve's metadata, gathered once (JAX-AMG's).

What ``solve(A_local, b_local, comm=..., nglobal=..., partition_info=...)`` learns from its
MPI arguments, computed outside ``jax.jit`` and attached to the local block with
``with_cache(A_local, mpi=...)``, after which ``solve(A_cached, b_local)`` needs none of
them.
"""

from __future__ import annotations

from typing import Any

from ._config import parse_amgx_config, with_overrides
from ._mpi import _row_ranges


def cache_mpi_metadata(config: Any, comm: Any, nglobal: int, partition_info: tuple[int, int],
                       A: Any, is_symmetric: bool = False, save_stats: bool = False,
                       block_dim: int = 1) -> dict[str, Any]:
    """A distributed solve's metadata, computed once outside ``jax.jit`` (JAX-AMG's call).

    A collective: every rank of ``comm`` calls it.  The ranks' rows are gathered and
    checked (as ``solve(..., comm=...)`` checks them) and the configuration parsed, so
    that a solve of the attached matrix, ``solve(with_cache(A_local, mpi=meta), b_local)``,
    needs neither ``comm``, ``nglobal`` nor ``partition_info`` and may run inside
    ``jax.jit`` with the same metadata for any values on the same pattern.

    Args:
      config: the solve's configuration (any form :func:`jaxsolve.sparse.parse_amgx_config`
        takes), used when the solve is given none.
      comm: the ``mpi4py`` communicator.
      nglobal: the global number of rows.
      partition_info: ``(row_start, row_end)``, this rank's rows.
      A: this rank's block, ``(row_end - row_start, nglobal)``, whose shape is checked.
      is_symmetric: recorded for ``with_cache`` (pass it there too).
      save_stats: the solve reports its statistics (``print_solve_stats`` and
        ``print_grid_stats``).
      block_dim: unknowns per node, for ``solve(..., block_dim=...)``.

    Returns:
      A dict: ``comm``, ``nglobal``, ``partition_info``, ``row_ranges`` (every rank's
      rows), ``config`` (the parsed configuration), ``is_symmetric``, ``block_dim``.

    Raises:
      ValueError, TypeError: on every rank alike, for partitions that do not tile
        ``nglobal`` rows, or an invalid configuration; ValueError for a block of the
        wrong shape.

    Examples:
      Under ``mpiexec -n 2``, each rank with its rows of a 16 × 16 Poisson matrix:

      .. code-block:: python

          from mpi4py import MPI
          from jaxsolve import sparse
          from jaxsolve.sparse import matrices

          comm = MPI.COMM_WORLD
          A_local, row_start, row_end = matrices.poisson_matrix_distributed(
              16, 16, comm.rank, comm.size)
          meta = sparse.cache_mpi_metadata({"solver": "PCG"}, comm, 256,
                                           (row_start, row_end), A_local)
          A_cached = sparse.with_cache(A_local, mpi=meta, is_symmetric=True)
          x_local, info = sparse.solve(A_cached, b_local)  # comm etc. from meta
    """
    row_ranges = _row_ranges(comm, nglobal, partition_info)
    row_start, row_end = row_ranges[comm.rank]
    if hasattr(A, "shape") and tuple(A.shape) != (row_end - row_start, nglobal):
        raise ValueError(f"cache_mpi_metadata: A has shape {tuple(A.shape)}, not this rank's"
                         f" ({row_end - row_start}, {nglobal}).")
    if save_stats:
        config = with_overrides(config, {"print_solve_stats": 1, "print_grid_stats": 1})
    return {"comm": comm, "nglobal": int(nglobal), "partition_info": (row_start, row_end),
            "row_ranges": row_ranges, "config": parse_amgx_config(config),
            "is_symmetric": bool(is_symmetric), "block_dim": int(block_dim)}
