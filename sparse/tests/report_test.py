"""Tests for AmgX's reporting keys in ``solve`` itself (``jaxsolve.sparse._report``).

``print_solve_stats``, ``print_grid_stats`` and ``obtain_timings`` become log records of
the ``jaxsolve.sparse`` logger, under ``jit`` and ``vmap`` too; a long setup logs progress.
Most solves are Jacobi-preconditioned CG on a small Poisson matrix (nothing to compile for
an AMG setup); one test sets up a small AMG hierarchy for its grid table.
"""

import logging
import os
import re
import threading
import time

import absl.logging
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve import sparse
from jaxsolve.sparse import _report

JACOBI_CG = {"solver": "PCG", "preconditioner": {"solver": "BLOCK_JACOBI", "max_iters": 1},
             "tolerance": 1e-8}
# One configuration for most tests, so that its solve compiles once.
REPORTED = {**JACOBI_CG, "print_solve_stats": 1, "obtain_timings": 1}
A = sparse.as_csr(sparse.matrices.poisson_matrix(8))
B = jnp.ones(64)


def messages(caplog):
    return [record.getMessage() for record in caplog.records if record.name == "jaxsolve.sparse"]


def tables(caplog):
    return [m for m in messages(caplog) if m.startswith("PCG: print_solve_stats")]


@pytest.fixture(scope="module")
def reported():
    """One solve on concrete values with print_solve_stats and obtain_timings: its info,
    its log messages and what it printed to stdout."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    _report.LOGGER.addHandler(handler)
    try:
        _, info = sparse.solve(A, B, config=REPORTED)
    finally:
        _report.LOGGER.removeHandler(handler)
    return info, [record.getMessage() for record in records]


def test_print_solve_stats_logs_amgx_table_of_the_solve(reported):
    info, logged = reported
    (table,) = [m for m in logged if m.startswith("PCG: print_solve_stats")]
    iterations = int(info.iterations)
    assert f"Total Iterations: {iterations}" in table
    assert table.rstrip().endswith("status SUCCESS")
    # One line per iteration, residuals absolute: the first is ‖b‖ = 8.
    rows = re.findall(r"^\s+(\d+|Ini)\s+(\S+)", table, re.MULTILINE)
    assert [row[0] for row in rows] == ["Ini", *map(str, range(iterations))]
    assert float(rows[0][1]) == pytest.approx(8.0)
    assert float(rows[-1][1]) == pytest.approx(8.0 * float(info.residual), rel=1e-5)
    # The history was stored for the table only: the caller did not ask for it.
    assert info.residual_history.shape == (0,)


def test_obtain_timings_logs_setup_and_solve_times(reported):
    info, logged = reported
    (timings,) = [m for m in logged if m.startswith("PCG: obtain_timings")]
    setup, solve, per_iteration = (float(x) for x in re.findall(
        r"(?:setup|solve|solve\(per iteration\)): (\S+) s", timings))
    total = float(re.search(r"Total Time: (\S+)", timings).group(1))
    assert total == pytest.approx(setup + solve, abs=2e-4)
    assert per_iteration == pytest.approx(solve / int(info.iterations), abs=2e-4)
    assert sparse.parse_amgx_config({"obtain_timings": 1}).obtain_timings


def test_reports_under_jit_and_vmap_one_table_per_solve(caplog):
    config = {**REPORTED, "max_iters": 4, "store_res_history": 1}

    @jax.jit
    def solve(values, b):
        return jax.vmap(lambda b: sparse.solve(A.with_values(values), b, config=config)[1])(b)

    with caplog.at_level(logging.INFO, logger="jaxsolve.sparse"):
        info = solve(A.values, jnp.stack([B, 2 * B, 3 * B]))
        jax.effects_barrier()
    found = tables(caplog)
    assert len(found) == 3
    assert list(info.iterations) == [4, 4, 4]
    assert all("Total Iterations: 4" in table for table in found)
    assert all("status NOT_CONVERGED: " in table for table in found)  # stopped at max_iters
    # Each table starts from its own right-hand side: ‖k b‖ = 8 k.
    assert sorted(float(re.search(r"Ini\s+(\S+)", t).group(1)) for t in found) == \
        pytest.approx([8.0, 16.0, 24.0])
    # store_res_history asked for the history too: it is returned.
    assert info.residual_history.shape == (3, 5)
    (timings,) = [m for m in messages(caplog) if m.startswith("PCG: obtain_timings")]
    assert "the solve runs inside the caller's compiled program" in timings


def test_print_grid_stats_logs_the_hierarchy_and_nothing_else(caplog, capsys):
    config = {"solver": "PCG", "preconditioner": {"solver": "AMG", "min_coarse_rows": 32,
                                                  "print_grid_stats": 1}}
    with caplog.at_level(logging.INFO, logger="jaxsolve.sparse"):
        sparse.solve(A, B, config=config)
    reports = [m for m in messages(caplog) if not m.startswith("solve: the setup")]
    (grid,) = reports  # no solve stats, no timings: the main scope asked for neither
    stats = sparse.describe(A, config)
    assert len(stats.rows) >= 2
    assert grid.startswith("PCG: print_grid_stats\nAMG hierarchy")
    for level, (rows, nonzeros) in enumerate(zip(stats.rows, stats.nonzeros)):
        assert re.search(rf"^\s+{level}\s+{rows}\s+{nonzeros}\s", grid, re.MULTILINE)
    assert capsys.readouterr().out == ""  # a log record, not a print


def test_unconfigured_logging_writes_the_report_to_stderr(monkeypatch, capsys):
    # No handler on jaxsolve.sparse or above it: Python would drop an INFO record.
    monkeypatch.setattr(_report.LOGGER, "propagate", False)
    assert not _report.LOGGER.hasHandlers()
    _report.log("PCG: print_solve_stats\n  a table")
    out, err = capsys.readouterr()
    assert out == "" and err == "PCG: print_solve_stats\n  a table\n"
    _report.LOGGER.setLevel(logging.WARNING)  # the user's say
    try:
        _report.log("not shown")
    finally:
        _report.LOGGER.setLevel(logging.INFO)
    assert capsys.readouterr().err == ""


def test_absl_handler_carries_the_report(monkeypatch, capsys):
    monkeypatch.setattr(logging.root, "handlers", [])
    absl.logging.use_absl_handler()
    handler = absl.logging.get_absl_handler()  # before flags are parsed: to sys.stderr
    try:
        _report.log("a report line")
    finally:
        logging.root.removeHandler(handler)
    err = capsys.readouterr().err
    assert re.search(r"^I\d{4} .*_report\.py:\d+\] a report line$", err, re.MULTILINE), err


def test_setup_progress_logs_only_setups_past_the_threshold(monkeypatch, caplog):
    monkeypatch.setattr(_report, "PROGRESS_SECONDS", 0.05)
    with caplog.at_level(logging.INFO, logger="jaxsolve.sparse"):
        with _report.setup_progress("quick"):
            pass
        with _report.setup_progress("slow"):
            time.sleep(0.3)
    assert messages(caplog)[0] == "slow: running for 0.05 s..."
    assert re.fullmatch(r"slow: done in 0\.[3-9] s", messages(caplog)[1])
    assert len(messages(caplog)) == 2


def test_setup_progress_starts_no_thread_per_block():
    with _report.setup_progress("first"):  # may start the one watching thread
        pass
    before = set(threading.enumerate())
    with _report.setup_progress("quick"):
        started = set(threading.enumerate()) - before
    assert not started, started


def test_stats_table_rates_and_totals():
    table = _report.stats_table(np.array([1.0, 0.5, 0.125, np.nan]), 4.0, 2, 0.125)
    assert re.search(r"^\s+1\s+5\.000000e-01\s+0\.2500$", table, re.MULTILINE)
    assert "Avg Convergence Rate:              0.3536" in table
    assert "Final Residual:            5.000000e-01" in table


def test_reporting_keys_compile_nothing_new(caplog):
    """The reporting keys are host work (`_report.split_reports`): switching one on reuses
    the compiled solve; print_solve_stats shares store_res_history's program (the history).
    A numerical key compiles anew."""
    count = [0]

    def listener(event, duration, **kwargs):
        count[0] += event == "/jax/core/compile/backend_compile_duration"

    history = {**JACOBI_CG, "store_res_history": 1}
    for config in (JACOBI_CG, history):  # the programs without and with the history
        sparse.solve(A, B, config=config)
    jax.monitoring.register_event_duration_secs_listener(listener)
    counts = {}
    try:
        with caplog.at_level(logging.INFO, logger="jaxsolve.sparse"):
            for name, config in [
                    ("print_grid_stats", {**JACOBI_CG, "print_grid_stats": 1}),
                    ("obtain_timings", {**JACOBI_CG, "obtain_timings": 1}),
                    ("print_solve_stats", {**history, "print_solve_stats": 1}),
                    ("tolerance", {**JACOBI_CG, "tolerance": 1e-7})]:
                count[0] = 0
                jax.block_until_ready(sparse.solve(A, B, config=config))
                counts[name] = count[0]
            count[0] = 0
            jax.block_until_ready(sparse.solve(A, B, config=JACOBI_CG, save_stats_file=os.devnull))
            counts["save_stats_file"] = count[0]
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert counts["tolerance"] > 0, counts
    del counts["tolerance"]
    assert counts == {"print_grid_stats": 0, "obtain_timings": 0, "print_solve_stats": 0,
                      "save_stats_file": 0}
    assert len(tables(caplog)) == 1  # the reports were made all the same
    assert len([m for m in messages(caplog) if m.startswith("PCG: obtain_timings")]) == 1


def test_split_reports_leaves_the_program_config_without_them():
    config = sparse.parse_amgx_config({
        "solver": "PCG", "print_solve_stats": 1, "obtain_timings": 1,
        "preconditioner": {"solver": "AMG", "print_grid_stats": 1}})
    program, reports = _report.split_reports(config)
    assert reports == _report.Reports(solver="PCG", solve_stats=True, grid_stats=True,
                                      timings=True, keep_history=False)
    plain = sparse.parse_amgx_config({"solver": "PCG", "store_res_history": 1,
                                      "preconditioner": {"solver": "AMG"}})
    assert program == plain  # the history stored for the table, nothing else reported
    assert _report.split_reports(plain)[0] == plain
