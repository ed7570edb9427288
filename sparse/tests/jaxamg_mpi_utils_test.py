"""JAX-AMG's MPI transport names (``mpi_utils.register_comm``, ``resolve_comm``,
``local_transpose_nnz``, ``HaloPlan``, ``build_halo_plan``) under ``mpiexec`` on the CPU:
jaxamg_mpi_utils.py checks the plan by running the exchange it describes."""

import pytest

from mpi_launcher import run_ranks


@pytest.mark.parametrize("nranks", [2, 3])
def test_transport_names(nranks):
    assert f"OK transport on {nranks} ranks" in run_ranks("jaxamg_mpi_utils.py", nranks)
