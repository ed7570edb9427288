"""Tests of `solve(A_local, b_local, comm=..., nglobal=..., partition_info=...)` across MPI processes.

`TestSolveMpi` runs mpi_solve.py under ``mpiexec -n 2`` and ``-n 4`` on the CPU
(mpi_launcher.py), as the sharding package's mpi_test.py does: JAX-AMG's paper example (2D Poisson 32 × 32, PBICGSTAB,
partitioned, gathered on rank 0) against the single-process solve, and the distributed
gradient and tangent (``jax.jvp``) through a nonsymmetric solve against the single-process
ones; the numbers of the preconditioner kept and reused across solves, and another operator
on the pattern given structures of its own. Skipped, saying
why, only where no ``mpiexec``, mpi4py or mpi4jax exists at all (CI has all three). `TestSolveMpiErrors` checks, in this process,
the errors raised before any communication.
"""

import sys

import jax.numpy as jnp
import pytest
from mpi_launcher import run_ranks

from jaxsolve import sparse
from jaxsolve.sparse import matrices


def _run(nranks, *checks):
    out = run_ranks("mpi_solve.py", nranks, *checks)
    for check in checks:
        name = {"grad-pcg": "grad poisson PCG", "jvp-pcg": "jvp poisson PCG"}.get(check, check)
        assert f"OK {name}" in out, out
    return out


class TestSolveMpi:

    def test_solve_mpi_2_ranks(self):
        # The paper example, the nonsymmetric and PCG's gradients and tangents, the errors.
        out = _run(2, "errors", "poisson", "reuse", "structures", "grad", "grad-pcg", "jvp",
                   "jvp-pcg")
        assert "OK grad convection-diffusion PBICGSTAB on 2 ranks" in out
        assert "OK jvp convection-diffusion PBICGSTAB on 2 ranks" in out

    def test_jaxamg_demo_features_2_ranks(self):
        # JAX-AMG's MPI demos: relaxation preconditioners, a matrix-free local operator.
        _run(2, "relaxation", "operator")

    def test_solve_mpi_4_ranks(self):
        # Ranks with two neighbours: the solve and the reverse solve with Aᵀ (its routing).
        # The tangent solve exchanges halos as the solve does: 2 ranks check it.
        out = _run(4, "poisson", "grad")
        assert "OK grad convection-diffusion PBICGSTAB on 4 ranks" in out


class TestSolveMpiErrors:

    def test_solve_mpi_errors(self, monkeypatch):
        A_local, row_start, row_end = matrices.poisson_matrix_distributed(4, 4, 0, 2)
        b_local = jnp.ones(row_end - row_start)
        with pytest.raises(ValueError, match="missing comm, partition_info"):
            sparse.solve(A_local, b_local, nglobal=16)
        with pytest.raises(ValueError, match="missing comm"):
            sparse.solve(A_local, b_local, nglobal=16, partition_info=(row_start, row_end))
        monkeypatch.setitem(sys.modules, "mpi4jax", None)  # as if it were not installed
        with pytest.raises(ImportError, match="needs the package mpi4jax.*pip install mpi4jax"):
            sparse.solve(A_local, b_local, comm=object(), nglobal=16,
                         partition_info=(row_start, row_end))
