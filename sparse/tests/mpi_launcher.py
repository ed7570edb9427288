"""`run_ranks`: runs a script of this folder under ``mpiexec -n P`` on the CPU, for the tests
of distributed solves (mpi_solve_test.py, jaxamg_mpi_page_test.py).

MPICH and mpi4py come from PyPI, pinned in the lock files; mpi4jax is built by ``tools/dev``.
A test is skipped, saying why, only where no ``mpiexec``, mpi4py or mpi4jax exists at all (CI
has all three).
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from jaxsolve_testing import xla_flags_for_processes

# The venv's own MPICH (beside this interpreter) first, then any on PATH.
MPIEXEC = shutil.which("mpiexec", path=os.pathsep.join(
    [str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")]))

# Variables through which a launcher (MPI, Slurm, jaxsolve's) describes a process: not passed
# on, so that the ranks see only the mpiexec that the test starts.
_LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "SLURM_", "JAXSOLVE_", "HYDRA_", "MPI_LOCAL")


def run_ranks(script: str, nranks: int, *args: str) -> str:
    """Runs ``script`` (a file beside this one) on ``nranks`` ranks; returns its stdout after
    checking that every rank exited cleanly."""
    if MPIEXEC is None:
        pytest.skip(f"no mpiexec beside {sys.executable} or on PATH; install the lock "
                    "file's mpich and mpi4py (tools/dev does)")
    for module in ("mpi4py", "mpi4jax"):  # e.g. a GPU host with an MPI of its own
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed for {sys.executable} (tools/dev installs it)")
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(_LAUNCHER_PREFIXES)
                   and name not in ("XLA_FLAGS", "JAX_COORDINATOR_ADDRESS")}
    environment["XLA_FLAGS"] = xla_flags_for_processes()
    environment["JAX_PLATFORMS"] = "cpu"
    # The ranks import jaxsolve as this process does (source folders or Bazel runfiles).
    environment["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    path = pathlib.Path(__file__).with_name(script)
    done = subprocess.run([MPIEXEC, "-n", str(nranks), sys.executable, str(path), *args],
                          env=environment, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr[-6000:]
    print(done.stdout)
    return done.stdout
