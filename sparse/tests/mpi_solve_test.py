"""Tests of `solve(A_local, b_local, comm=..., nglobal=..., partition_info=...)` across MPI processes.

`TestSolveMpi` runs mpi_solve.py under ``mpiexec -n 2`` and ``-n 4`` on the CPU (MPICH and
mpi4py from PyPI, pinned in the lock files; mpi4jax built by ``tools/dev``), as the sharding
package's mpi_test.py does: JAX-AMG's paper example (2D Poisson 32 × 32, PBICGSTAB,
partitioned, gathered on rank 0) against the single-process solve, and the distributed
gradient and tangent (``jax.jvp``) through a nonsymmetric solve against the single-process
ones; the numbers of the preconditioner kept and reused across solves. Skipped, saying
why, only where no ``mpiexec``, mpi4py or mpi4jax exists at all (CI has all three). `TestSolveMpiErrors` checks, in this process,
the errors raised before any communication.
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import jax.numpy as jnp
import pytest

from jaxsolve import sparse
from jaxsolve.sparse import matrices

SCRIPT = pathlib.Path(__file__).with_name("mpi_solve.py")

# The venv's own MPICH (beside this interpreter) first, then any on PATH.
MPIEXEC = shutil.which("mpiexec", path=os.pathsep.join(
    [str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")]))

# Variables through which a launcher (MPI, Slurm, jaxsolve's) describes a process: not passed
# on, so that the ranks see only the mpiexec that the test starts.
_LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "SLURM_", "JAXSOLVE_", "HYDRA_", "MPI_LOCAL")


def _run(nranks, *checks):
    if MPIEXEC is None:
        pytest.skip(f"no mpiexec beside {sys.executable} or on PATH; install the lock "
                    "file's mpich and mpi4py (tools/dev does)")
    for module in ("mpi4py", "mpi4jax"):  # e.g. a GPU host with an MPI of its own
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed for {sys.executable} (tools/dev installs it)")
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(_LAUNCHER_PREFIXES)
                   and name not in ("XLA_FLAGS", "JAX_COORDINATOR_ADDRESS")}
    environment["JAX_PLATFORMS"] = "cpu"
    # The ranks import jaxsolve as this process does (source folders or Bazel runfiles).
    environment["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([MPIEXEC, "-n", str(nranks), sys.executable, str(SCRIPT), *checks],
                          env=environment, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr[-6000:]
    for check in checks:
        name = {"grad-pcg": "grad poisson PCG", "jvp-pcg": "jvp poisson PCG"}.get(check, check)
        assert f"OK {name}" in done.stdout, done.stdout
    print(done.stdout)
    return done.stdout


class TestSolveMpi:

    def test_solve_mpi_2_ranks(self):
        # The paper example, the nonsymmetric and PCG's gradients and tangents, the errors.
        out = _run(2, "errors", "poisson", "reuse", "grad", "grad-pcg", "jvp", "jvp-pcg")
        assert "OK grad convection-diffusion PBICGSTAB on 2 ranks" in out
        assert "OK jvp convection-diffusion PBICGSTAB on 2 ranks" in out

    def test_solve_mpi_4_ranks(self):
        out = _run(4, "poisson", "grad", "jvp")
        assert "OK grad convection-diffusion PBICGSTAB on 4 ranks" in out
        assert "OK jvp convection-diffusion PBICGSTAB on 4 ranks" in out


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
