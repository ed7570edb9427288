"""AmgX's reporting keys on the distributed paths: once per solve, never once per part.

A sharded ``A`` (4 virtual CPU devices: the flag is set at import, so this file runs in its
own process, as Bazel runs it) and MPI ranks (mpi_reports.py under ``mpiexec -n 2``) log
``print_solve_stats``, ``print_grid_stats`` and ``obtain_timings`` as the single-device
solve does, through the ``jaxsolve.sparse`` logger; switching a report on compiles nothing
new, changing a numerical key does.
"""

import logging
import re

from jaxsolve_testing import use_cpu_devices

use_cpu_devices(4)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from mpi_launcher import run_ranks  # noqa: E402

from jaxsolve import sharding, sparse  # noqa: E402
from jaxsolve.sparse import matrices  # noqa: E402

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
PCG = {"solver": "PCG", "tolerance": 1e-5, "max_iters": 100,
       "preconditioner": {"solver": "AMG", "min_coarse_rows": 8}}
REPORTS = {"print_solve_stats": 1, "print_grid_stats": 1, "obtain_timings": 1}
N = 16

needs_devices = pytest.mark.skipif(
    len(jax.devices("cpu")) < 4,
    reason="needs 4 CPU devices: run this file in its own process (XLA_FLAGS set too late)")


@pytest.fixture(scope="module")
def system():
    A = matrices.poisson_matrix(N)
    mesh = sharding.row_mesh(devices=jax.devices("cpu")[:4])
    return A, sharding.shard_rows(A, mesh), jnp.asarray(matrices.rhs_random(N * N, seed=1))


@pytest.fixture
def logged():
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("jaxsolve.sparse")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def starting(records, prefix):
    return [message for message in records if message.startswith(prefix)]


def check_table(table, info, b):
    iterations = int(info.iterations)
    rows = re.findall(r"^\s+(\d+|Ini)\s+(\S+)", table, re.MULTILINE)
    assert [row[0] for row in rows] == ["Ini", *map(str, range(iterations))]
    b_norm = float(np.linalg.norm(np.asarray(b)))
    assert float(rows[0][1]) == pytest.approx(b_norm, rel=1e-5)
    assert float(rows[-1][1]) == pytest.approx(float(info.residual) * b_norm, rel=1e-4)
    assert f"Total Iterations: {iterations}" in table
    assert table.rstrip().endswith("status SUCCESS")


@needs_devices
def test_sharded_solve_logs_each_report_once(system, logged):
    A, A_sharded, b = system
    x, info = sparse.solve(A_sharded, b, config={**PCG, **REPORTS})
    assert int(info.status) == 0
    assert info.residual_history.shape == (0,)  # stored for the table only
    (table,) = starting(logged, "PCG: print_solve_stats")  # one, not one per device
    check_table(table, info, b)
    (grid,) = starting(logged, "PCG: print_grid_stats")
    assert "block-Jacobi AMG on 4 parts" in grid
    # Level 0 sums the devices' diagonal blocks: all rows, the blocks' nonzeros.
    csr = sp.csr_array(np.asarray(A.todense()))
    bounds = np.linspace(0, N * N, 5).astype(int)
    block_nnz = sum(csr[s:e, s:e].nnz for s, e in zip(bounds[:-1], bounds[1:]))
    assert re.search(rf"^\s+0\s+{N * N}\s+{block_nnz}\s", grid, re.MULTILINE), grid
    assert re.search(r"^\s+1\s+\d+\s+\d+\s", grid, re.MULTILINE), grid
    (timings,) = starting(logged, "PCG: obtain_timings")
    setup, solve = (float(s) for s in re.findall(r"(?:setup|solve): (\S+) s", timings))
    total = float(re.search(r"Total Time: (\S+)", timings).group(1))
    assert total == pytest.approx(setup + solve, abs=2e-4)


@needs_devices
def test_sharded_relaxation_preconditioner_has_no_grid_table(system, logged):
    # As on one device: print_grid_stats reports an AMG hierarchy; a relaxation has none.
    _, A_sharded, b = system
    config = {"solver": "PCG", "tolerance": 1e-5, "max_iters": 200, "print_grid_stats": 1,
              "print_solve_stats": 1, "preconditioner": {"solver": "BLOCK_JACOBI"}}
    _, info = sparse.solve(A_sharded, b, config=config)
    assert int(info.status) == 0
    assert starting(logged, "PCG: print_grid_stats") == []
    assert len(starting(logged, "PCG: print_solve_stats")) == 1


@needs_devices
def test_sharded_solve_under_jit_logs_one_table_from_its_program(system, logged):
    _, A_sharded, b = system
    config = {**PCG, "print_solve_stats": 1, "store_res_history": 1}
    info = jax.jit(lambda b: sparse.solve(A_sharded, b, config=config)[1])(b)
    jax.effects_barrier()
    (table,) = starting(logged, "PCG: print_solve_stats")
    check_table(table, info, b)
    assert info.residual_history.shape == (101,)  # asked for: kept


@needs_devices
def test_sharded_reporting_keys_compile_nothing_new(system, logged):
    _, A_sharded, b = system
    count = [0]

    def listener(event, duration, **kwargs):
        count[0] += event == COMPILE_EVENT

    history = {**PCG, "store_res_history": 1}
    for config in (PCG, history):  # the programs without and with the history
        sparse.solve(A_sharded, b, config=config)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        counts = {}
        for name, config in [("print_grid_stats", {**PCG, "print_grid_stats": 1}),
                             ("obtain_timings", {**PCG, "obtain_timings": 1}),
                             ("print_solve_stats", {**history, "print_solve_stats": 1}),
                             ("tolerance", {**PCG, "tolerance": 1e-6})]:
            count[0] = 0
            jax.block_until_ready(sparse.solve(A_sharded, b, config=config))
            counts[name] = count[0]
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert counts["tolerance"] > 0, counts  # a numerical key: a new program
    assert {name: n for name, n in counts.items() if name != "tolerance"} == {
        "print_grid_stats": 0, "obtain_timings": 0, "print_solve_stats": 0}
    assert len(starting(logged, "PCG: print_solve_stats")) == 1


def test_mpi_solve_logs_each_report_once_from_rank_0():
    out = run_ranks("mpi_reports.py", 2, "concrete", "jit", "save_stats_file",
                    "no-recompilation")
    for check in ("concrete reports", "jit reports", "save_stats_file", "no recompilation"):
        assert f"OK {check} on 2 ranks" in out, out
