"""Shared setup for the jaxsolve.sharding tests.

* 8 virtual CPU devices (the flag must be in ``XLA_FLAGS`` before JAX starts its backend), so that
  meshes up to 8 devices build on any machine; mesh tests take them from ``jax.devices("cpu")``,
  which has them even on a GPU host.
* Every test starts with x64 off, strict dtype promotion and rank promotion errors
  (`strict_config`), as users with those settings would have them.
* `single_process_environment`: this process's environment without any launcher's variables, so
  that `jaxsolve.sharding.initialize` sees a single process even when the tests themselves run
  under Slurm or MPI.
* `run_launcher`: runs ``python -m jaxsolve.sharding.launch`` on a script, as a user would.
"""

from jaxsolve_testing import strict_config, use_cpu_devices  # noqa: F401  (fixtures)

use_cpu_devices(8)

import dataclasses  # noqa: E402
import os  # noqa: E402
import pathlib  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

import jaxsolve.sharding  # noqa: E402

# Every variable through which a launcher describes a process to jaxsolve.sharding.initialize.
LAUNCHER_VARIABLES = (
    "JAXSOLVE_PROCESS_ID", "JAXSOLVE_NUM_PROCESSES", "JAXSOLVE_COORDINATOR_ADDRESS",
    "JAX_COORDINATOR_ADDRESS",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_MCA_orte_hnp_uri",
    "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_NODELIST", "SLURM_JOB_ID",
)

# The folder holding jaxsolve/sharding/, for the launched processes' PYTHONPATH.
PACKAGE_ROOT = str(pathlib.Path(jaxsolve.sharding.__file__).parents[2])


@pytest.fixture
def single_process_environment(monkeypatch):
    """Removes every launcher variable from `os.environ` for the test."""
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@dataclasses.dataclass(frozen=True)
class LauncherRun:
    """What a run of the launcher gave: exit status, output, and how long it took."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def lines_of(self, rank: int) -> list[str]:
        """Rank `rank`'s standard output lines, without their prefix."""
        prefix = f"[rank {rank}] "
        return [line[len(prefix):] for line in self.stdout.splitlines() if line.startswith(prefix)]


@pytest.fixture
def run_launcher(tmp_path):
    """Runs ``python -m jaxsolve.sharding.launch *options script *args`` to its end, as users do.

    `script` is Python source, written to the test's temporary folder. `env` adds to (or, with
    None values, removes from) this process's environment; `limit` bounds the run in seconds.
    Returns a `LauncherRun`.
    """

    def run(script, *options, args=(), env=None, limit=60.0):
        command, environment = _launcher_command(tmp_path, script, options, args, env)
        start = time.monotonic()
        done = subprocess.run(command, env=environment, capture_output=True, text=True,
                              timeout=limit)
        return LauncherRun(done.returncode, done.stdout, done.stderr, time.monotonic() - start)

    return run


@pytest.fixture
def start_launcher(tmp_path):
    """Starts ``python -m jaxsolve.sharding.launch *options script`` and returns its `Popen`, with
    text pipes for its standard output and error; the test waits for it."""

    def start(script, *options):
        command, environment = _launcher_command(tmp_path, script, options, (), None)
        return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    return start


def _launcher_command(folder, script, options, args, env):
    """The launcher's command line on `script` (written to `folder`) and its environment, in
    which the launched processes find ``jaxsolve.sharding`` through ``PYTHONPATH``."""
    path = folder / "script.py"
    path.write_text(textwrap.dedent(script))
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [PACKAGE_ROOT, environment.get("PYTHONPATH")]))
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    command = [sys.executable, "-m", "jaxsolve.sharding.launch", *options, str(path), *args]
    return command, environment
