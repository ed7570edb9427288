"""The sparse robustness suite: its matrices are what it says they are, and its table is whole."""

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).absolute().parent / "sparse_suite.py"
_spec = importlib.util.spec_from_file_location("sparse_suite", SCRIPT)
suite = sys.modules["sparse_suite"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)


def test_fourteen_problems_at_every_size():
    names = list(suite.SIZES["tiny"])
    assert len(names) >= 14
    assert all(list(sizes) == names for sizes in suite.SIZES.values())


@pytest.mark.parametrize("name", list(suite.SIZES["tiny"]))
def test_matrix_is_what_the_problem_claims(name):
    problem = suite.build(name, suite.SIZES["tiny"][name])
    A, b = problem.A, problem.b
    n = A.shape[0]
    assert A.shape == (n, n) and b.shape == (n,) and n % problem.block_dim == 0
    assert A.dtype == (np.complex128 if problem.kind == suite.COMPLEX else np.float64)
    dense = A.toarray()
    scale = np.abs(dense).max()
    symmetric = np.abs(dense - dense.T).max() <= 1e-14 * scale
    hermitian = np.abs(dense - dense.conj().T).max() <= 1e-14 * scale
    if problem.kind == suite.NONSYMMETRIC:
        assert not symmetric
    elif problem.kind == suite.COMPLEX:
        assert symmetric and not hermitian  # complex symmetric: K − k²M − ik M_Γ
    else:
        assert hermitian
        eigenvalues = np.linalg.eigvalsh(dense)
        if problem.kind == suite.SPD:
            assert eigenvalues[0] > 1e-8 * eigenvalues[-1]
        else:  # singular: A·1 = 0, semidefinite, b consistent (orthogonal to 1)
            assert problem.kind == suite.SINGULAR
            assert np.abs(dense @ np.ones(n)).max() <= 1e-14 * scale
            assert eigenvalues[0] >= -1e-12 * eigenvalues[-1]
            assert abs(b.sum()) <= 1e-12 * np.abs(b).sum()
    if problem.jacobi_radius_above:
        radius = np.abs(np.linalg.eigvals(dense / dense.diagonal()[:, None])).max()
        assert radius > problem.jacobi_radius_above
    if problem.block_dim > 1:
        assert problem.modes.shape == (n, 3 if problem.block_dim == 2 else 6)


def test_elasticity_3d_modes_are_the_rigid_body_motions():
    """Unclamped, the assembled P1 operator annihilates the six modes the suite hands to SA."""
    points = np.random.default_rng(0).random((40, 3))
    mesh = suite.scipy.spatial.Delaunay(points)
    A = suite.p1_elasticity(points, mesh.simplices)
    modes = suite.rigid_body_modes_3d(points)
    assert np.abs(A @ modes).max() <= 1e-12 * np.abs(A).max()
    assert np.linalg.matrix_rank(modes) == 6


def test_tiny_run_prints_every_column_for_every_configuration(tmp_path):
    out = tmp_path / "rows.json"
    problems = ["elasticity2d", "helmholtz"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--size", "tiny", "--problems", *problems,
         "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = "| " + " | ".join(suite.COLUMNS) + " |"
    table = lines[lines.index(header) + 2:]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in table]
    assert [(row[0], row[2]) for row in cells] == [
        (problem, config) for problem in problems for config in suite.CONFIGS]
    assert all(len(row) == len(suite.COLUMNS) for row in cells)
    rows = json.loads(out.read_text())
    assert [(row["problem"], row["config"]) for row in rows] == [
        (row[0], row[2]) for row in cells]
    for row in rows:
        if row["config"] in ("default", "l1"):  # jaxsolve solves both at this size
            assert row["status"] == "SUCCESS" and row["converged"], row
            assert row["true_residual"] <= 1e-7 and row["its"] >= 1
            # a hierarchy keeps something; an iteration reads A at least once
            assert 0 < row["kept"] < 50 and row["mb_per_iteration"] > 1e-6 * (
                row["rows"] * 8), row
        else:  # PyAMG's rows have no device memory to count
            assert np.isnan(row["kept"]) and np.isnan(row["mb_per_iteration"]), row
        if row["converged"]:
            assert row["true_residual"] <= suite.CONVERGED_SLACK * 1e-8
    # PyAMG's classical AMG refuses complex matrices: the row says so instead of a number.
    helmholtz_rs = next(row for row in rows
                        if (row["problem"], row["config"]) == ("helmholtz", "pyamg_rs"))
    assert helmholtz_rs["status"].startswith("raised") and helmholtz_rs["its"] == -1


def test_the_finite_difference_helmholtz_row_and_the_d1_configuration_run(tmp_path):
    # Issue 29's candidate complex default (D1, unlimited weights) is a named configuration,
    # so that its rows on both Helmholtz discretizations can be printed next to the default's.
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--size", "tiny", "--problems", "helmholtz_fd",
         "--configs", "default", "d1", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [(row["problem"], row["config"]) for row in rows] == [
        ("helmholtz_fd", "default"), ("helmholtz_fd", "d1")]
    assert all(row["status"] == "SUCCESS" and row["converged"] for row in rows), rows
    assert suite.jaxsolve_config("d1", suite.build("helmholtz_fd", 12), 1e-8, 10)[0][
        "preconditioner"] == {"solver": "AMG", "interpolator": "D1", "interp_max_elements": -1}


def test_first_is_a_fresh_process_first_call_also_after_a_row_of_the_same_shapes(tmp_path):
    # Issue 29's "first call" compiles every program the solve needs: an earlier row of the
    # run, whose programs share the shapes, must not make a later row's first call cheaper.
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--size", "tiny", "--problems", "poisson2d", "poisson2d",
         "--configs", "default", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stderr
    first, again = json.loads(out.read_text())
    assert first["first_programs"] > 0 and again["first_programs"] == first["first_programs"]
    assert again["first"] > 0.5 * first["first"], (first["first"], again["first"])


def test_a_run_past_hang_seconds_ends_with_the_stacks_and_keeps_the_rows_before(tmp_path):
    # jaxsolve's default row (seconds: its first call is a fresh process's), not PyAMG's
    # (milliseconds on the tiny size), so that the watchdog's thread surely runs within it
    # on a loaded machine: with pyamg_rs a fresh clone's run once ended the row first (rc 0).
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--size", "tiny", "--problems", "poisson2d", "neumann",
         "--configs", "default", "--hang-seconds", "1e-9", "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode != 0
    assert "[poisson2d default: more than 1e-09 s ends the run]" in done.stderr
    # Where it was: faulthandler reads the running thread's frames without stopping it, so
    # the stack may be cut or garbled past its innermost frame ("File ???"), which may be
    # an import's (a fresh clone's CI run once ended at `File "<frozen importlib...>"`).
    assert "Timeout" in done.stderr and re.search(r'Thread 0x[0-9a-f]+ .*\n  File "',
                                                  done.stderr)
    assert not out.exists()  # it ended within the first problem


def small_rows(tmp_path, problem: str, configs: tuple[str, ...]) -> list[dict]:
    """The --json rows of a small run of ``configs`` on ``problem``, every one converged."""
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--size", "small", "--problems", problem,
         "--configs", *configs, "--json", str(out)],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert tuple(row["config"] for row in rows) == configs
    assert all(row["converged"] for row in rows), rows
    return rows


def test_lean_keeps_less_and_moves_less_per_iteration_than_the_default(tmp_path):
    """Issue 33's trade, as the suite measures it: on the 3D Poisson problem the lean
    hierarchy (PMISC, one aggressive level, PCG) keeps and moves less than the default's.
    Both run PCG's V(1, 1) cycle here (the default's method on an SPD matrix), so an
    iteration's bytes compare the hierarchies alone: 1.96 against 3.07 MB (7 Dec; against
    the default's PBICGSTAB, two V(1, 2) cycles an iteration, the lean one moved under half)."""
    default, lean = small_rows(tmp_path, "poisson3d", ("default", "lean"))
    assert lean["kept"] < 0.6 * default["kept"], (default["kept"], lean["kept"])
    assert lean["mb_per_iteration"] < 0.7 * default["mb_per_iteration"], (
        default["mb_per_iteration"], lean["mb_per_iteration"])


def test_lean_two_stage_takes_fewer_iterations_than_lean_where_multipass_loses(tmp_path):
    """The lean hierarchy's aggressive level in two D2 stages: on rotated anisotropic
    diffusion, where multipass interpolation misses the strong direction, far fewer
    iterations."""
    lean, two_stage = small_rows(tmp_path, "anisotropic", ("lean", "lean_two_stage"))
    assert two_stage["its"] <= 0.75 * lean["its"], (lean["its"], two_stage["its"])
