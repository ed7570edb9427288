"""AmgX's reporting keys on a distributed solve, run by distributed_reports_test.py as
``mpiexec -n P python mpi_reports.py``.

Every rank solves a 2D Poisson matrix (16 × 16, PCG with AMG: JAX-AMG's example, smaller)
with ``print_solve_stats``, ``print_grid_stats`` and ``obtain_timings`` and collects the records
of the ``jaxsolve.sparse`` logger: rank 0 must log each report exactly once, the others
nothing; the table must be this solve's (its iterations, ``‖b‖`` first, the final residual).
Then the same under `jax.jit` with the values traced (the table from rank 0's host
callback), ``save_stats_file`` (written by rank 0), and switching the reporting keys, which
must compile nothing new. A failed check raises, which ends the rank with an error (and
mpiexec with it); rank 0 prints ``OK`` lines, which the test looks for.
"""

import logging
import os
import re
import sys
import tempfile

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from jax.experimental import sparse as jsparse  # noqa: E402
from mpi4py import MPI  # noqa: E402

from jaxsolve import sparse  # noqa: E402
from jaxsolve.sparse import matrices  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
PCG = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 200,
       "preconditioner": {"solver": "AMG", "min_coarse_rows": 16}}
REPORTS = {"print_solve_stats": 1, "print_grid_stats": 1, "obtain_timings": 1}
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
N = 16

records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger().addHandler(handler)  # what jaxsolve.sparse's records reach
compilations = [0]
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kwargs: compilations.__setitem__(
        0, compilations[0] + (event == COMPILE_EVENT)))

A_local, row_start, row_end = matrices.poisson_matrix_distributed(N, N, rank, size,
                                                                  dtype=jnp.float64)
b = np.asarray(matrices.rhs_random(N * N, seed=3, dtype=jnp.float64))
b_local = jnp.asarray(b[row_start:row_end])
KEYWORDS = {"comm": comm, "nglobal": N * N, "partition_info": (row_start, row_end)}


def report(message):
    if rank == 0:
        print(message, flush=True)


def logged(prefix):
    return [message for message in records if message.startswith(prefix)]


def check_table(table, info):
    iterations = int(info.iterations)
    assert f"Total Iterations: {iterations}" in table, table
    rows = re.findall(r"^\s+(\d+|Ini)\s+(\S+)", table, re.MULTILINE)
    assert [row[0] for row in rows] == ["Ini", *map(str, range(iterations))], table
    assert abs(float(rows[0][1]) / np.linalg.norm(b) - 1) < 1e-6, (rows[0], np.linalg.norm(b))
    assert abs(float(rows[-1][1]) / (float(info.residual) * np.linalg.norm(b)) - 1) < 1e-5
    assert table.rstrip().endswith("status SUCCESS"), table


def check_concrete():
    records.clear()
    x, info = sparse.solve(A_local, b_local, config={**PCG, **REPORTS}, **KEYWORDS)
    assert int(info.status) == 0, info
    assert info.residual_history.shape == (0,)  # not asked for: print_solve_stats only
    tables, grids = logged("PCG: print_solve_stats"), logged("PCG: print_grid_stats")
    timings = logged("PCG: obtain_timings")
    ranges = comm.allgather((row_start, row_end))
    if rank != 0:
        assert not (tables or grids or timings), records
        return
    assert (len(tables), len(grids), len(timings)) == (1, 1, 1), records
    check_table(tables[0], info)
    # The grid table sums every rank's block hierarchy: level 0 has all N² rows and the
    # nonzeros of the ranks' diagonal blocks.
    A = sp.csr_array(matrices.poisson_matrix(N, dtype=jnp.float64).todense())
    level0 = re.search(r"^\s+0\s+(\d+)\s+(\d+)\s", grids[0], re.MULTILINE)
    assert int(level0.group(1)) == N * N, grids[0]
    assert int(level0.group(2)) == sum(A[s:e, s:e].nnz for s, e in ranges), grids[0]
    assert f"block-Jacobi AMG on {size} parts" in grids[0], grids[0]
    assert re.search(r"^\s+1\s+\d+\s+\d+\s", grids[0], re.MULTILINE), grids[0]
    assert "Total Time:" in timings[0] and "solve(per iteration)" in timings[0], timings[0]
    report(f"OK concrete reports on {size} ranks: rank 0 logged one table of "
           f"{int(info.iterations)} iterations, one grid table, one timing")


def check_jit():
    records.clear()
    info = {"shape": A_local.shape, "indices_sorted": True, "unique_indices": True}
    pattern = (np.asarray(A_local.indices), np.asarray(A_local.indptr))

    def bcsr(values):  # its pattern stays NumPy (concrete) while the values are traced
        return jsparse.BCSR.tree_unflatten(info, (values, *pattern))

    solve = jax.jit(lambda values, b: sparse.solve(
        bcsr(values), b, config={**PCG, "print_solve_stats": 1}, **KEYWORDS)[1])
    info = solve(A_local.data, b_local)
    jax.effects_barrier()
    tables = logged("PCG: print_solve_stats")
    if rank != 0:
        assert not tables, records
        return
    assert len(tables) == 1, records
    check_table(tables[0], info)
    report(f"OK jit reports on {size} ranks: one table, from rank 0's program")


def check_save_stats_file():
    records.clear()
    path = os.path.join(tempfile.gettempdir(), f"jaxsolve_mpi_stats_{os.getpid()}.txt")
    path = comm.bcast(path, root=0)
    _, info = sparse.solve(A_local, b_local, config=PCG, save_stats_file=path, **KEYWORDS)
    comm.barrier()
    assert not records, records  # into the file, not the log
    if rank == 0:
        with open(path) as file:
            text = file.read()
        os.remove(path)
        assert text.count("PCG: print_solve_stats") == 1, text
        assert text.count("PCG: print_grid_stats") == 1, text
        report(f"OK save_stats_file on {size} ranks: one table and one grid table")


def check_no_recompilation():
    # The two programs: without the history and with it (print_solve_stats needs it).
    sparse.solve(A_local, b_local, config=PCG, **KEYWORDS)
    sparse.solve(A_local, b_local, config={**PCG, "store_res_history": 1}, **KEYWORDS)
    counts = {}
    for name, keys in [("print_grid_stats", {"print_grid_stats": 1}),
                       ("obtain_timings", {"obtain_timings": 1}),
                       ("print_solve_stats", {"print_solve_stats": 1, "store_res_history": 1})]:
        compilations[0] = 0
        sparse.solve(A_local, b_local, config={**PCG, **keys}, **KEYWORDS)
        counts[name] = compilations[0]
    compilations[0] = 0
    sparse.solve(A_local, b_local, config={**PCG, "tolerance": 1e-9}, **KEYWORDS)
    counts["tolerance"] = compilations[0]
    assert counts["tolerance"] > 0, counts
    assert all(counts[name] == 0 for name in counts if name != "tolerance"), counts
    report(f"OK no recompilation on {size} ranks: {counts}")


for check in sys.argv[1:]:
    {"concrete": check_concrete, "jit": check_jit, "save_stats_file": check_save_stats_file,
     "no-recompilation": check_no_recompilation}[check]()
