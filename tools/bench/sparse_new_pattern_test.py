"""The new-pattern benchmark: its patterns are what it says, and its table is whole."""

import importlib.util
import pathlib
import sys

import jax
import numpy as np

SCRIPT = pathlib.Path(__file__).absolute().parent / "sparse_new_pattern.py"
_spec = importlib.util.spec_from_file_location("sparse_new_pattern", SCRIPT)
bench = sys.modules["sparse_new_pattern"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
jax.config.update("jax_enable_x64", True)  # the benchmark's matrices are f64


def test_extra_couplings_add_2k_entries_and_keep_the_matrix_spd():
    A = bench.poisson3d(4)
    B = bench.with_extra_couplings(A, 4, 3, seed=1)
    C = bench.with_extra_couplings(A, 4, 3, seed=2)
    assert B.nnz == C.nnz == A.nnz + 6
    assert (B != C).nnz > 0  # the other pattern really differs
    dense = B.toarray()
    np.testing.assert_array_equal(dense, dense.T)
    assert np.linalg.eigvalsh(dense)[0] > 0
    np.testing.assert_allclose(dense.sum(axis=1), A.toarray().sum(axis=1))  # Laplacian terms


def test_compilations_count_programs_of_the_block_only():
    f = jax.jit(lambda x: 2 * x + 1)
    with bench.compilations() as first:
        jax.block_until_ready(f(np.zeros(5)))
    with bench.compilations() as again:
        jax.block_until_ready(f(np.zeros(5)))
    assert first.programs == 1 and first.compile_seconds > 0
    assert again.programs == 0


def test_every_stage_of_a_tiny_grid():
    cells = bench.measure(4, bench.CONFIGS["default"], extra_couplings=2, repeats=1, warmup=0)
    assert set(cells) == set(bench.STAGES)
    assert cells["first call end to end"].compiled.programs > 0
    for repeated in ("solve", "re-setup + solve"):  # the first call compiled these
        assert cells[repeated].compiled.programs == 0, repeated
        assert cells[repeated].iterations >= 1
    text = bench.table({"default": cells})
    lines = text.splitlines()
    assert [line.split("|")[1].strip() for line in lines[2:]] == list(bench.STAGES)
    assert all(line.count("|") == 3 for line in lines)
    first_call = lines[2 + bench.STAGES.index("first call end to end")]
    assert "programs; compile " in first_call and "trace + lower " in first_call
    assert ", CPU " in first_call and cells["solve"].cpu_seconds > 0
    assert cells["memory kept"].times_matrix > 1  # the hierarchy, beside A's own values
    assert lines[2 + bench.STAGES.index("memory kept")].endswith(" × A |")


def test_a_two_stage_aggressive_level_compiles_nothing_for_a_new_pattern():
    # Its hierarchy is padded to size classes like every other classical one: the numeric
    # setup of P1, A1, P2 and P1 P2 too, so a new pattern of the same rows (or nonzeros)
    # runs the programs compiled for the first.
    cells = bench.measure(10, bench.CONFIGS["PMISC + 1 aggressive, two D2 stages"],
                          extra_couplings=6, repeats=1, warmup=0)
    assert cells["first call end to end"].compiled.programs > 0
    for stage in ("new pattern, same rows", "another such pattern",
                  "more nonzeros, same rows"):
        assert cells[stage].compiled.programs == 0, stage
        assert cells[stage].iterations >= 1
