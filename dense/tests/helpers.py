"""Matrices, meshes and tolerances shared by the jaxsolve.dense tests."""

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding

import jaxsolve.autodiff
import jaxsolve.sharding as js
from jaxsolve import dense
from jaxsolve_testing import xla_flags_for_processes

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
GRIDS = {"1x1": (1, 1), "2x1": (2, 1), "1x2": (1, 2), "2x2": (2, 2)}
COVERING = [(d, "2x2") for d in DTYPES] + [(np.float64, g) for g in ("1x1", "2x1", "1x2")]


def is_wide(dtype):
    return np.dtype(dtype) in (np.dtype(np.float64), np.dtype(np.complex128))


def tolerance(dtype):
    """A residual tolerance for well-conditioned 8 × 8 problems."""
    return 1e-10 if is_wide(dtype) else 2e-4


def grid_mesh(rows, cols):
    return js.make_grid_mesh(rows, cols, devices=jax.devices("cpu")[: rows * cols])


def put(x, mesh, spec):
    return jax.device_put(jnp.asarray(x), NamedSharding(mesh, spec))


def random_matrix(rng, shape, dtype):
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def hermitian_positive_definite(rng, n, dtype):
    x = random_matrix(rng, (n, n), dtype)
    return (x @ x.conj().T + n * np.eye(n)).astype(dtype)


def hermitian(rng, n, dtype):
    x = random_matrix(rng, (n, n), dtype)
    return ((x + x.conj().T) / 2).astype(dtype)


def well_conditioned(rng, n, dtype):
    return (random_matrix(rng, (n, n), dtype) + 4 * np.sqrt(n) * np.eye(n)).astype(dtype)


def max_error(x, y):
    return float(np.max(np.abs(np.asarray(x) - np.asarray(y))))


def assert_failure_reported(status, outputs, match):
    """Checks the failure contract every dense routine keeps (see `jaxsolve.dense.Status`).

    Each of `outputs` is NaN throughout, and `raise_on_failure(status)` raises a `SolverError`
    whose message matches the regular expression `match`: it names the routine, LAPACK's
    ``info`` and what that means for the routine, e.g. ``potrs failed: info=2: ...``.
    """
    for x in outputs:
        assert np.all(np.isnan(np.asarray(x)))
    with pytest.raises(dense.SolverError, match=match):
        dense.raise_on_failure(status)


def launch(script_path, processes, devices_per_process=1, timeout=120):
    """Runs the script at `script_path` as `processes` JAX processes of virtual CPU devices,
    by ``python -m jaxsolve.sharding.launch``; returns the finished `subprocess` run."""
    roots = [str(pathlib.Path(module.__file__).parents[2])
             for module in (dense, jaxsolve.autodiff, js)]  # the folders holding jaxsolve/
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [*roots, environment.get("PYTHONPATH")]))
    # The launcher gives each process its own devices.
    environment["XLA_FLAGS"] = xla_flags_for_processes()
    command = [sys.executable, "-m", "jaxsolve.sharding.launch", "-n", str(processes),
               "--devices-per-process", str(devices_per_process), "--platform", "cpu",
               "--timeout", str(timeout), str(script_path)]
    return subprocess.run(command, env=environment, capture_output=True, text=True,
                          timeout=timeout + 30)


def printed_by(run, rank):
    """The lines that process `rank` of a `launch` run printed, without the launcher's prefix
    and without the CPU collectives' (Gloo's) connection notes ("[Gloo] Rank 1 is connected to
    1 peer ranks. ..."), which Gloo's C++ side may write in pieces."""
    prefix = f"[rank {rank}] "
    return [line[len(prefix):] for line in run.stdout.splitlines()
            if line.startswith(prefix) and "[Gloo]" not in line and "peer ranks" not in line]
