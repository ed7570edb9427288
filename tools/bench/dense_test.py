"""The dense benchmark runs on a CPU: native JAX and jaxsolve's XLA backend, checked results."""

import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).absolute().parent / "dense.py"


def test_cpu_smoke_run_prints_checked_rows_and_the_largest_probe():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--routines", "potrs", "syevd", "--dtypes", "float64",
         "--sizes", "64", "--repeats", "1", "--largest", "32", "--largest-impls", "xla"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "default backends here: potrs -> xla" in done.stdout
    rows = [line.split() for line in lines if line.split()[:1] in (["potrs"], ["syevd"])]
    assert [(row[0], row[3]) for row in rows] == [
        ("potrs", "native"), ("potrs", "xla"), ("syevd", "native"), ("syevd", "xla")]
    for row in rows:  # the residual, last, is small and unflagged
        assert float(row[-1]) < 1e-10, row
    assert any("N =     32  xla        fits" in line for line in lines), done.stdout
