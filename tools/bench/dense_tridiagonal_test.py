"""The tridiagonal benchmark runs on a CPU: every implementation, checked, side by side."""

import os
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).absolute().parent / "dense_tridiagonal.py"


def test_cpu_smoke_run_prints_every_implementation_with_small_errors():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "60", "--repeats", "1"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[2:]]
    impls = ["ours", "ours w", "stemr", "stev", "jax w"]
    assert [(row[0], " ".join(row[2:-6])) for row in rows] == [
        (matrix, impl) for matrix in ("random", "1-2-1") for impl in impls], done.stdout
    for row in rows:
        assert float(row[-3]) < 1e-13, row  # eigenvalues
        if " ".join(row[2:-6]) in ("ours", "stemr", "stev"):
            assert float(row[-2]) < 1e-13 and float(row[-1]) < 1e-12, row  # vectors
