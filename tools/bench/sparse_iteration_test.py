"""The iteration benchmark: its kernel count is the cycle's, and its table is whole."""

import importlib.util
import pathlib
import sys

import jax
import jax.numpy as jnp
import pytest

import jaxsolve.sparse as jsp
from jaxsolve.sparse import matrices

SCRIPT = pathlib.Path(__file__).absolute().parent / "sparse_iteration.py"
sys.path.insert(0, str(SCRIPT.parent))  # its `timing` (under Bazel also a dependency)
_spec = importlib.util.spec_from_file_location("sparse_iteration", SCRIPT)
bench = sys.modules["sparse_iteration"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
jax.config.update("jax_enable_x64", True)  # the benchmark's matrices are f64


def test_the_loop_runs_one_spmv_per_product_of_a_v_cycle_and_pcg():
    config = bench.CONFIGS["PMISC + 1 aggressive"]
    row = bench.measure(8, config, repeats=1)
    levels = len(jsp.describe(jsp.as_csr(matrices.poisson3d_matrix(8, dtype=jnp.float64)),
                              config).rows)
    assert levels >= 2
    # Per level but the coarsest: the residual, R r, x + P e and the post-sweep (the
    # pre-sweep from zero needs no product); and PCG's A p.
    assert row.kernels.spmv == 4 * (levels - 1) + 1
    assert row.kernels.fusions > 0 and row.kernels.total > row.kernels.spmv
    assert row.iterations >= 1 and row.seconds > 0
    assert 0 < row.traffic.padding < row.traffic.total
    text = bench.table({"PMISC + 1 aggressive": row}, peak_bandwidth=4e12)
    lines = text.splitlines()
    assert all(line.count("|") == 10 for line in lines[:3])
    assert lines[2].startswith(f"| PMISC + 1 aggressive | {row.iterations} |")
    assert f"| {row.kernels.total} ({row.kernels.fusions}, {row.kernels.spmv}" in lines[2]
    assert "memory traffic per iteration" in text


def test_a_program_without_a_loop_is_refused():
    hlo = jax.jit(lambda x: 2 * x).lower(1.0).compile().as_text()
    with pytest.raises(ValueError, match="no while loop"):
        bench.loop_kernels(hlo)
