"""Row partitions, halo plans and `gather_vector` across real MPI processes.

Runs mpi_spmv.py under ``mpiexec -n 2`` and ``-n 4`` on the CPU: MPICH and mpi4py come from
PyPI, pinned in the lock files, and mpi4jax is built by ``tools/dev``, so this runs wherever
the venv does. It is skipped, saying why, only where no ``mpiexec`` exists at all.
"""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import LAUNCHER_VARIABLES, PACKAGE_ROOT
from jaxsolve_testing import xla_flags_for_processes

SCRIPT = pathlib.Path(__file__).with_name("mpi_spmv.py")

# The venv's own MPICH (beside this interpreter) first, then any on PATH.
MPIEXEC = shutil.which("mpiexec", path=os.pathsep.join(
    [str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")]))


class TestMpi:
    @pytest.mark.parametrize("nranks", [2, 4])
    def test_mpi_distributed_spmv(self, nranks):
        if MPIEXEC is None:
            pytest.skip(f"no mpiexec beside {sys.executable} or on PATH; install the lock "
                        "file's mpich and mpi4py (tools/dev does)")
        environment = {name: value for name, value in os.environ.items()
                       if name not in LAUNCHER_VARIABLES}
        environment["XLA_FLAGS"] = xla_flags_for_processes()
        environment["JAX_PLATFORMS"] = "cpu"
        environment["PYTHONPATH"] = os.pathsep.join(
            filter(None, [PACKAGE_ROOT, str(SCRIPT.parent), environment.get("PYTHONPATH")]))
        done = subprocess.run([MPIEXEC, "-n", str(nranks), sys.executable, str(SCRIPT)],
                              env=environment, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"distributed SpMV matches on {nranks} ranks" in done.stdout, done.stdout
