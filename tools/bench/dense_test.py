"""The dense benchmark runs on a CPU: native JAX and jaxsolve's XLA backend, checked results,
on one device and on grid meshes of virtual CPU devices driven by one process or launched as
one process per device."""

import importlib.util
import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).absolute().parent / "dense.py"
_spec = importlib.util.spec_from_file_location("dense_bench", SCRIPT)
bench = sys.modules["dense_bench"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def run(*args, devices=1):
    environment = dict(os.environ, JAX_PLATFORMS="cpu",
                       XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=600, env=environment)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_cpu_smoke_run_prints_checked_rows():
    lines = run("--routines", "potrs", "syevd", "--dtypes", "float64", "--sizes", "64",
                "--repeats", "1")
    assert any("default backends here: potrs -> xla" in line for line in lines)
    rows = [line.split() for line in lines if line.split()[:1] in (["potrs"], ["syevd"])]
    assert [(row[0], row[4], row[5], row[6]) for row in rows] == [
        ("potrs", "1x1", "single", "native"), ("potrs", "1x1", "single", "xla"),
        ("syevd", "1x1", "single", "native"), ("syevd", "1x1", "single", "xla")]
    for row in rows:  # the residual, last, is small and unflagged
        assert float(row[-1]) < 1e-10, row


def test_largest_probe_alone():
    lines = run("--no-table", "--largest", "32", "--largest-impls", "xla")
    assert not any(line.startswith(("potrs", "lu_solve", "syevd")) for line in lines), lines
    assert any(line.split()[:5] == ["N", "=", "32", "xla", "fits,"] for line in lines), lines


def test_grids_auto_are_1xp_px1_and_the_squarest_for_each_power_of_two():
    assert bench.parse_grids(["auto"], 8) == [(1, 1), (1, 2), (2, 1), (1, 4), (4, 1), (2, 2),
                                              (1, 8), (8, 1), (2, 4)]
    assert bench.parse_grids(["2x2", "1x4", "2x2"], 4) == [(2, 2), (1, 4)]
    assert bench.squarest(16) == (4, 4) and bench.squarest(6) == (2, 3)


def test_strong_scaling_runs_one_and_all_devices_first():
    assert bench.scaling_counts(1) == [1]
    assert bench.scaling_counts(8) == [1, 8, 2, 4]
    assert bench.scaling_counts(6) == [1, 4, 2]


def test_models_jaxmg_launched_only_and_one_device_implementations_on_1x1_only():
    both = ["single", "launch"]
    assert bench.models_of("jaxmg", 4, both) == ["launch"]
    assert bench.models_of("jaxmg", 1, both) == ["launch"]  # one GPU per process, always
    assert bench.models_of("native", 4, both) == [] and bench.models_of("native", 1, both) == [
        "single"]
    assert bench.models_of("xla", 4, both) == both and bench.models_of("xla", 1, both) == [
        "single"]


def test_launched_grid_and_strong_scaling_on_two_cpu_devices():
    lines = run("--routines", "lu_solve", "--dtypes", "float64", "--sizes", "32", "--tile", "8",
                "--repeats", "1", "--impls", "xla", "--grids", "1x2", "--models", "launch",
                "--strong", "32", devices=2)
    assert lines[0].startswith("2 x cpu (cpu)")
    rows = [line.split() for line in lines if line.startswith("lu_solve")]
    table, strong = rows[:1], rows[1:]
    assert [row[3:7] for row in table] == [["8", "1x2", "launch", "xla"]]
    assert table[0][-3] == "1.00" and float(table[0][-1]) < 1e-10  # ×1xP of 1x2 itself
    assert [row[2:6] for row in strong] == [["1", "1x1", "single", "xla"],
                                            ["2", "1x2", "launch", "xla"]]
    assert strong[0][-3:-1] == ["1.00", "-"]  # efficiency against itself; no ×best1 at P=1
    t1, t2 = float(strong[0][6]), float(strong[1][6])
    # The times are printed to 0.1 ms, the efficiency from the unrounded ones.
    low, high = (t1 - 5e-5) / (2 * (t2 + 5e-5)), (t1 + 5e-5) / (2 * max(t2 - 5e-5, 1e-9))
    assert low - 0.005 <= float(strong[1][-3]) <= high + 0.005, strong
    assert all(float(row[-1]) < 1e-10 for row in strong)
