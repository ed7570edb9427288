"""Tests for the command line (``python -m jaxsolve.sparse``), its report and its plots.

The CLI runs in-process through ``main(argv)`` on Matrix Market files each test writes;
two tests start the real ``python -m jaxsolve.sparse``.  Matrices are small, and most runs
use a Jacobi-preconditioned CG (nothing to compile for an AMG setup), so the file stays fast.
"""

import gzip
import json
import logging
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from jaxsolve import sparse
from jaxsolve.sparse import _cli, _matrix_market, _report, plot

JACOBI_CG = '{"solver": "PCG", "preconditioner": {"solver": "BLOCK_JACOBI"}, "tolerance": 1e-8}'
# Unpreconditioned BiCGSTAB stopped after 3 iterations: a solve that does not converge.
STOPPED = '{"solver": "BICGSTAB", "max_iters": 3, "obtain_timings": 1}'
GRID = 16  # the test matrices' grid: 256 rows, enough for a few AMG levels
ROWS = GRID * GRID
AMG_CG = {"solver": "PCG", "tolerance": 1e-8, "print_solve_stats": 1, "print_grid_stats": 1,
          "obtain_timings": 1, "preconditioner": {"solver": "AMG", "min_coarse_rows": 16}}


def poisson_2d(n: int) -> scipy.sparse.coo_array:
    """The 5-point Laplacian of an ``n x n`` grid: ``n²`` rows, symmetric positive definite."""
    T = scipy.sparse.diags_array([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)],
                                 offsets=[-1, 0, 1])
    I = scipy.sparse.eye_array(n)
    return (scipy.sparse.kron(I, T) + scipy.sparse.kron(T, I)).tocoo()


def write_poisson_mtx(path, n: int) -> None:
    """Writes :func:`poisson_2d` as a symmetric coordinate Matrix Market file (the acceptance
    run's 1 M-row file is ``write_poisson_mtx("poisson.mtx", 1000)``)."""
    scipy.io.mmwrite(path, poisson_2d(n), symmetry="symmetric")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The matrices the tests solve, written once."""
    folder = tmp_path_factory.mktemp("mtx")
    A = poisson_2d(GRID)
    write_poisson_mtx(folder / "spd.mtx", GRID)
    with open(folder / "spd.mtx", "rb") as f, gzip.open(folder / "spd.mtx.gz", "wb") as g:
        g.write(f.read())
    scipy.io.mmwrite(folder / "nonsym.mtx", (A + scipy.sparse.diags_array(
        [0.5 * np.ones(ROWS - 1)], offsets=[1])).tocoo())
    scipy.io.mmwrite(folder / "complex.mtx", (A + 1j * scipy.sparse.diags_array(
        [np.full(ROWS - 1, 0.25)], offsets=[1]) + 1j * scipy.sparse.diags_array(
        [np.full(ROWS - 1, 0.25)], offsets=[-1])).tocoo(), symmetry="hermitian")
    (folder / "pattern.mtx").write_text(  # the pattern of a 3 x 3 identity: ones
        "%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 1\n2 2\n3 3\n")
    dense = np.diag([4.0, 3.0, 2.0])  # the identity's pattern: the same compiled solve
    scipy.io.mmwrite(folder / "array.mtx", dense)  # a dense matrix: the array format
    scipy.io.mmwrite(folder / "b.mtx", np.array([[1.0], [2.0], [3.0]]))
    scipy.io.mmwrite(folder / "wide.mtx", scipy.sparse.coo_array(np.ones((3, 4))))
    (folder / "truncated.mtx").write_text(
        "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1.0\n")
    (folder / "garbage.mtx").write_text("this is not a matrix\n")
    return folder


def run(capsys, *argv):
    """``main(argv)``'s exit status, stdout and stderr."""
    status = _cli.main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_spd_with_amg_prints_amgx_report_and_writes_json(files, tmp_path, capsys, caplog,
                                                         monkeypatch):
    monkeypatch.setattr(_report, "PROGRESS_SECONDS", 0.0)  # every setup logs its progress
    with caplog.at_level(logging.INFO, logger="jaxsolve.sparse"):
        status, out, err = run(capsys, "solve", files / "spd.mtx", "--config",
                               json.dumps(AMG_CG), "--repeat", 2, "--json",
                               tmp_path / "out.json", "--plot", tmp_path / "solve.png")
    assert (status, err) == (0, "")
    assert any(message.startswith(f"config 1: the AMG setup of {ROWS} rows: done in ")
               for message in caplog.messages), caplog.messages
    for section in ("Ini", "Total Iterations", "Avg Convergence Rate", "AMG hierarchy",
                    "operator complexity", "setup:", "solve(per iteration)", "status: SUCCESS"):
        assert section in out, section
    figures = json.loads((tmp_path / "out.json").read_text())
    (result,) = figures["runs"]
    assert figures["rows"] == ROWS and figures["nonzeros"] == 5 * ROWS - 4 * GRID
    assert figures["repeat"] == 2
    assert result["status"] == "SUCCESS" and result["config"]["solver"]["solver"] == "PCG"
    history = result["residual_history"]
    assert len(history) == result["iterations"] + 1 and history[0] == 1.0
    assert history[-1] == pytest.approx(result["relative_residual"])
    assert result["true_relative_residual"] <= 1e-8
    assert result["hierarchy"]["rows"][0] == ROWS and result["hierarchy"]["levels"] >= 2
    assert len(result["solve_seconds"]) == 2
    assert result["seconds"]["solve"] == result["solve_seconds"][1]
    assert set(result["seconds"]) == {"read", "to device", "setup", "first setup",
                                      "first solve", "solve"}
    # The iteration table prints each history entry as AmgX's absolute residual (‖b‖ = GRID).
    assert f"{GRID * history[1]:17.6e}" in out
    assert png_size(tmp_path / "solve.png") == (2 * 640, 480)  # the history, the hierarchy


def test_gzipped_file_and_a_report_of_only_what_the_config_asks_for(files, capsys):
    status, out, _ = run(capsys, "solve", files / "spd.mtx.gz", "--config", JACOBI_CG)
    assert status == 0
    assert "spd.mtx.gz: 256 x 256" in out
    assert "Total Iterations" not in out and "AMG hierarchy" not in out and "setup:" not in out
    assert "status: SUCCESS (0)" in out and "true relative residual" in out


def test_nonsymmetric_file_is_solved(files, tmp_path, capsys):
    config = '{"solver": "GMRES", "preconditioner": {"solver": "BLOCK_JACOBI"}, "tolerance": 1e-8}'
    status, out, _ = run(capsys, "solve", files / "nonsym.mtx", "--config", config,
                         "--json", tmp_path / "out.json")
    assert status == 0, out
    (result,) = json.loads((tmp_path / "out.json").read_text())["runs"]
    assert result["true_relative_residual"] <= 1e-7


def test_complex_hermitian_file_is_solved(files, tmp_path, capsys):
    status, out, _ = run(capsys, "solve", files / "complex.mtx", "--config", JACOBI_CG,
                         "--json", tmp_path / "out.json")
    assert status == 0, out
    assert "complex hermitian" in out
    (result,) = json.loads((tmp_path / "out.json").read_text())["runs"]
    assert result["true_relative_residual"] <= 1e-7


def test_pattern_and_array_files_and_a_given_rhs(files, tmp_path, capsys):
    config = '{"solver": "PCG", "preconditioner": {"solver": "NOSOLVER"}, "tolerance": 1e-10}'
    status, _, _ = run(capsys, "solve", files / "pattern.mtx", "--rhs", files / "b.mtx",
                       "--config", config, "--json", tmp_path / "pattern.json")
    assert status == 0
    (result,) = json.loads((tmp_path / "pattern.json").read_text())["runs"]
    assert result["rhs_norm"] == pytest.approx(np.sqrt(14)) and result["iterations"] == 1
    assert result["true_relative_residual"] <= 1e-12  # the pattern's ones: A = I
    status, _, _ = run(capsys, "solve", files / "array.mtx", "--rhs", files / "b.mtx",
                       "--config", config, "--json", tmp_path / "array.json")
    assert status == 0
    (result,) = json.loads((tmp_path / "array.json").read_text())["runs"]
    assert result["true_relative_residual"] <= 1e-12


def test_failed_solve_exits_1_with_the_reason(files, tmp_path, capsys):
    status, out, err = run(capsys, "solve", files / "spd.mtx", "--config", STOPPED,
                           "--dtype", "f32", "--json", tmp_path / "out.json")
    assert status == 1
    assert "status: NOT_CONVERGED (3)" in out
    assert "compilation included (--repeat 2 times a compiled solve)" in out  # one solve
    assert err.count("\n") == 1 and "NOT_CONVERGED after 3 iterations" in err
    assert "Increase max_iters" in err
    (result,) = json.loads((tmp_path / "out.json").read_text())["runs"]
    assert (result["status"], result["failure_reason"]) == ("NOT_CONVERGED", "MAX_ITERS")


@pytest.mark.parametrize("argv, message", [
    (["solve", "{folder}/missing.mtx"], "missing.mtx: the file does not exist"),
    (["solve", "{folder}/truncated.mtx"], "Truncated file"),
    (["solve", "{folder}/garbage.mtx"], "garbage.mtx: not a Matrix Market file"),
    (["solve", "{folder}/wide.mtx"], "the matrix is 3 x 4, not square"),
    (["solve", "{folder}/spd.mtx", "--rhs", "{folder}/b.mtx"],
     f"b has 3 entries, the matrix {ROWS} rows"),
    (["solve", "{folder}/array.mtx", "--rhs", "{folder}/array.mtx"], "b is 3 x 3, not one column"),
    (["solve", "{folder}/spd.mtx", "--config", "{{'solver': 'PCG'}}"], "invalid JSON"),
    (["solve", "{folder}/spd.mtx", "--config", '{{"solver": "PCG", "tolerence": 1}}'],
     "'tolerence' is not an AmgX parameter (did you mean 'tolerance'"),
    (["solve", "{folder}/spd.mtx", "--config", "{folder}/no-such.json"], "No such file"),
    (["solve", "{folder}/spd.mtx", "--device", "gpu"], "JAX has no GPU here"),
    (["solve", "{folder}/spd.mtx", "--repeat", "0"], "expected a positive integer"),
    (["solve"], "the following arguments are required"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_bad_input_is_one_line_and_exit_status_2(files, capsys, argv, message):
    status, out, err = run(capsys, *(arg.format(folder=files) for arg in argv))
    assert status == 2
    assert err.count("\n") == 1 and err.startswith("jaxsolve-sparse"), err
    assert message in err, err
    assert "Traceback" not in out + err


def test_a_json_config_file_names_the_run(files, tmp_path, capsys):
    (tmp_path / "jacobi.json").write_text(JACOBI_CG)
    (tmp_path / "object.json").write_text('[]')
    status, out, _ = run(capsys, "bench", files / "spd.mtx", "--config", tmp_path / "jacobi.json")
    assert status == 0 and out.splitlines()[-1].startswith("jacobi ")
    status, _, err = run(capsys, "solve", files / "spd.mtx", "--config", tmp_path / "object.json")
    assert status == 2 and "a configuration is a JSON object" in err


def test_bench_sets_configurations_side_by_side_in_single_precision(files, tmp_path, capsys):
    jacobi = '{"solver": "PCG", "preconditioner": {"solver": "BLOCK_JACOBI"}}'
    status, out, err = run(capsys, "bench", files / "spd.mtx", "--config", jacobi,
                           "--config", STOPPED, "--dtype", "f32", "--json", tmp_path / "bench.json",
                           "--plot", tmp_path / "bench.png")
    assert status == 1 and "config 2: the solve ended with status NOT_CONVERGED" in err
    header, rule, first, second = out.splitlines()[-4:]
    assert header.split()[:3] == ["config", "status", "iters"] and set(rule) == {"-", " "}
    assert first.startswith("config 1") and "SUCCESS" in first
    assert second.startswith("config 2") and "NOT_CONVERGED" in second
    figures = json.loads((tmp_path / "bench.json").read_text())
    assert [run["label"] for run in figures["runs"]] == ["config 1", "config 2"]
    assert figures["dtype"] == "f32" and figures["runs"][0]["true_relative_residual"] <= 1e-5
    assert png_size(tmp_path / "bench.png") == (640, 480)


def png_size(path) -> tuple[int, int]:
    """The width and height in a PNG file's header (its IHDR chunk)."""
    with open(path, "rb") as f:
        data = f.read(24)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _info(history) -> sparse.SolveInfo:
    """A SolveInfo holding ``history`` (rows: solves), as a solve with store_res_history
    returns it: NaN after each solve's last iteration."""
    history = np.asarray(history, np.float32)
    iterations = np.sum(np.isfinite(history), axis=-1) - 1
    return sparse.SolveInfo(iterations=iterations, residual=history[..., 0], status=iterations * 0,
                            residual_history=history, failure_reason=iterations * 0)


STATISTICS = sparse.HierarchyStatistics(
    rows=(4096, 1024, 128), nonzeros=(20224, 9000, 2000), grid_complexity=1.28,
    operator_complexity=1.54, bytes_kept={}, matrix_bytes=1)


def test_plot_module_draws_several_histories_and_a_hierarchy(tmp_path):
    batched = _info([[1.0, 0.1, 0.01, np.nan], [1.0, 0.3, 0.09, 0.02]])
    ax = plot.residual_history([batched, np.array([1.0, 0.5, 0.1, np.nan])],
                               labels=["column 0", "column 1", "given"])
    assert ax.get_yscale() == "log"
    assert [line.get_ydata().tolist() for line in ax.lines] == [
        pytest.approx([1.0, 0.1, 0.01]), pytest.approx([1.0, 0.3, 0.09, 0.02]), [1.0, 0.5, 0.1]]
    assert [text.get_text() for text in ax.get_legend().get_texts()] == [
        "column 0", "column 1", "given"]
    ax.figure.savefig(tmp_path / "history.png")
    assert png_size(tmp_path / "history.png") == (640, 480)
    ax = plot.hierarchy(STATISTICS)
    assert ax.get_yscale() == "log"
    assert [bar.get_height() for bar in ax.patches] == [4096, 1024, 128, 20224, 9000, 2000]
    ax.figure.savefig(tmp_path / "hierarchy.png")
    assert png_size(tmp_path / "hierarchy.png") == (640, 480)


def test_plot_module_refuses_what_it_cannot_draw():
    no_history = sparse.SolveInfo(iterations=np.int32(1), residual=np.float32(0),
                                  status=np.int32(0), residual_history=np.zeros(0, np.float32),
                                  failure_reason=np.int32(0))
    with pytest.raises(ValueError, match="store_res_history"):
        plot.residual_history(no_history)
    with pytest.raises(ValueError, match="2 labels for 1 histories"):
        plot.residual_history(np.ones(3), labels=["a", "b"])
    with pytest.raises(TypeError, match="HierarchyStatistics"):
        plot.hierarchy({"rows": [4]})


def test_matrix_market_reader_mirrors_symmetric_triangles(tmp_path):
    path = tmp_path / "skew.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer skew-symmetric\n2 2 1\n2 1 3\n")
    matrix, header = _matrix_market.read_matrix_market(path)
    assert matrix.dtype == np.float64 and matrix.toarray().tolist() == [[0, -3], [3, 0]]
    assert (header.shape, header.entries, header.field) == ((2, 2), 1, "integer")


def _subprocess(*argv):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-m", "jaxsolve.sparse", *map(str, argv)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_python_dash_m_runs_the_cli(files):
    result = _subprocess("solve", files / "pattern.mtx", "--config", '{"solver": "CG"}')
    assert result.returncode == 0, result.stderr
    assert "status: SUCCESS (0)" in result.stdout
    result = _subprocess("solve", files / "wide.mtx")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().endswith("the matrix is 3 x 4, not square")
