"""JAX-AMG's MPI Guide (docs/mpi.md) and README MPI example run with only the imports changed.

jaxamg_mpi_page.py holds the page's code blocks; this runs it under ``mpiexec -n 2`` on the
CPU with mpi_launcher.py (skipped, saying why, only where no ``mpiexec``,
mpi4py or mpi4jax exists at all).
"""

from mpi_launcher import run_ranks


def test_mpi_guide_on_2_ranks():
    out = run_ranks("jaxamg_mpi_page.py", 2, "solve", "caching", "in_place", "allgather")
    assert "OK solve on 2 ranks" in out
    assert "OK caching on 2 ranks" in out
    assert "OK in-place attachment on 2 ranks" in out
    assert "OK allgather on 2 ranks" in out
    assert "Soluton: [" in out  # the page's own print, on rank 0
