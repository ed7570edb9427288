"""jaxsolve.dense on several CUDA GPUs: cuSOLVERMp over grids of real devices (issue 36).

Run by ``tools/dev gpu-test`` on a host with two GPUs or more (marked ``gpu``; skipped with
fewer). One process driving the GPUs of a ``1 × P``, ``P × 1`` and ``2 × 2`` grid (the
default backend there is cuSOLVERMp, on jaxsolve's NCCL communicator of the process's GPUs),
every routine the benchmark times against NumPy, a gradient; then the same solves with one
process per GPU under ``python -m jaxsolve.sharding.launch``.
"""

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from helpers import (hermitian, hermitian_positive_definite, is_wide, put, random_matrix,
                     well_conditioned)
from jax.sharding import PartitionSpec as P

import jaxsolve.sharding as js
from jaxsolve import dense

GPUS = [d for d in jax.devices() if d.platform == "gpu"]
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(len(GPUS) < 2, reason="needs two GPUs")]

GRIDS = [g for g in ((1, 2), (2, 1), (2, 2), (1, 4), (4, 1)) if g[0] * g[1] <= max(len(GPUS), 2)]
N, TILE = 100, 16  # the last tile of each grid row and column is padded


def grid_mesh(rows, cols):
    return js.make_grid_mesh(rows, cols, devices=GPUS[:rows * cols])


def relative_residual(a, x, b):
    a, x, b = (np.asarray(v, np.complex128) for v in (a, x, b))
    return np.linalg.norm(a @ x - b) / (np.linalg.norm(a) * np.linalg.norm(x))


def tolerance(dtype):
    return 1e-10 if is_wide(dtype) else 2e-3


@pytest.fixture(params=[np.float32, np.float64], ids=["float32", "float64"])
def dtype(request, strict_config):
    del strict_config
    if is_wide(request.param):
        jax.config.update("jax_enable_x64", True)
    return np.dtype(request.param)


@pytest.mark.parametrize("grid", GRIDS, ids=[f"{r}x{c}" for r, c in GRIDS])
def test_solves_and_eigendecomposition_on_a_grid(grid, dtype):
    mesh = grid_mesh(*grid)
    rng = np.random.default_rng(0)
    spd, general, symmetric = (make(rng, N, dtype) for make in (
        hermitian_positive_definite, well_conditioned, hermitian))
    b = random_matrix(rng, (N, 2), dtype)
    assert dense.backend_for("potrs", put(spd, mesh, P("pr", "pc")), T_A=TILE) == "cusolvermp"
    x, logdet = dense.potrs(put(spd, mesh, P("pr", "pc")), put(b, mesh, P("pr")), T_A=TILE,
                            return_logdet=True)
    assert relative_residual(spd, x, b) < tolerance(dtype)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(spd.astype(np.float64))[1],
                               rtol=tolerance(dtype))
    x = dense.lu_solve(put(general, mesh, P("pr", "pc")), put(b, mesh, P("pr")), T_A=TILE)
    assert relative_residual(general, x, b) < tolerance(dtype)
    w, v = dense.syevd(put(symmetric, mesh, P("pr", "pc")), T_A=TILE)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(symmetric.astype(np.float64)),
                               atol=50 * tolerance(dtype) * np.abs(w).max())
    w, v = np.asarray(w, np.float64), np.asarray(v, np.float64)
    assert np.abs(symmetric @ v - v * w).max() < 50 * tolerance(dtype) * np.abs(w).max()


def test_gradient_of_logdet_on_two_gpus(x64):
    mesh = grid_mesh(2, 1)
    a = hermitian_positive_definite(np.random.default_rng(1), N, np.float64)
    gradient = jax.grad(lambda m: dense.potrs(m, put(np.ones(N), mesh, P("pr")), T_A=TILE,
                                              return_logdet=True)[1])(put(a, mesh, P("pr", "pc")))
    np.testing.assert_allclose(gradient, np.linalg.inv(a), rtol=1e-8, atol=1e-12)


LAUNCHED = """
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import jaxsolve.sharding as js

info = js.initialize()
jax.config.update("jax_enable_x64", True)
from jaxsolve import dense

n, rows, cols = {n}, {rows}, {cols}
mesh = js.make_grid_mesh(rows, cols)  # one GPU per process
rng = np.random.default_rng(0)
x = rng.standard_normal((n, n))
spd, general = x @ x.T + n * np.eye(n), x + 4 * np.sqrt(n) * np.eye(n)
b = rng.standard_normal(n)
place = lambda v, spec: jax.make_array_from_callback(v.shape, NamedSharding(mesh, spec),
                                                     lambda index: v[index])
for routine, a in (("potrs", spd), ("lu_solve", general)):
    solution = getattr(dense, routine)(place(a, P("pr", "pc")), place(b, P("pr")), T_A={tile})
    assert solution.sharding.is_fully_replicated
    np.testing.assert_allclose(solution.addressable_data(0), np.linalg.solve(a, b), rtol=1e-9)
w, _ = dense.syevd(place((x + x.T) / 2, P("pr", "pc")), T_A={tile})
np.testing.assert_allclose(w.addressable_data(0), np.linalg.eigvalsh((x + x.T) / 2),
                           atol=1e-9 * n)
print("ok", info.process_id, jax.process_count(), jax.local_device_count(),
      dense.backend_for("potrs", place(spd, P("pr", "pc")), T_A={tile}))
"""


def test_one_process_per_gpu(tmp_path):
    processes = 4 if len(GPUS) >= 4 else 2
    rows, cols = (2, 2) if processes == 4 else (1, 2)
    script = tmp_path / "launched.py"
    script.write_text(textwrap.dedent(LAUNCHED.format(n=N, rows=rows, cols=cols, tile=TILE)))
    environment = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    environment["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run(
        [sys.executable, "-m", "jaxsolve.sharding.launch", "-n", str(processes), "--platform",
         "gpu", "--timeout", "240", str(script)],
        env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-6000:]
    ok = sorted(line for line in done.stdout.splitlines() if " ok " in line)
    assert ok == [f"[rank {r}] ok {r} {processes} 1 cusolvermp" for r in range(processes)], \
        done.stdout
