"""JAX-AMG's API reference (docs/api.md) against jaxsolve.sparse, with only imports changed.

The page documents ``jaxamg``'s public functions by their signatures and docstrings; every
public name of ``jaxamg``, ``jaxamg.matrices``, ``jaxamg.sparsity``, ``jaxamg.utils``,
``jaxamg.mpi_utils`` and ``jaxamg.config`` must exist here and accept JAX-AMG's arguments
(each parameter at its position, or by its keyword where JAX-AMG takes it by keyword), and
the documented uses must work: ``AMGXStatus``'s codes, ``make_preconditioner`` as ``M`` of
``jax.scipy.sparse.linalg.bicgstab``, ``make_lineax_preconditioner`` from the top level, the
sparsity functions' return shapes, ``utils.to_scipy``, ``config.prepare_config``.

``utils.format_amgx_stats`` is checked on text in AmgX's output format; ``mpi_utils``'
transport names under ``mpiexec`` in jaxamg_mpi_utils_test.py.
"""

import importlib
import inspect
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

import jaxsolve.sparse as jaxamg

# JAX-AMG 0.1.4's signatures: (positional-or-keyword parameters, keyword-only parameters).
# Where jaxsolve takes a parameter by keyword only, JAX-AMG's positional use of it is
# listed in KEYWORD_ONLY_HERE.
SIGNATURES = {
    "": {
        "cache_coloring": (["operator", "shape"], []),
        "cache_mpi_metadata": (["config", "comm", "nglobal", "partition_info", "A",
                                "is_symmetric", "save_stats", "block_dim"], []),
        "clear_solver_cache": ([], []),
        "finalize": ([], []),
        "get_solver_cache_info": ([], []),
        "make_lineax_preconditioner": (["operator", "config"], ["tags", "comm", "nglobal",
                                                                "partition_info",
                                                                "save_stats_file"]),
        "make_preconditioner": (["A", "config"], ["comm", "nglobal", "partition_info",
                                                  "save_stats_file", "return_info"]),
        "solve": (["A", "b", "x0", "config", "block_dim", "comm", "nglobal", "partition_info",
                   "save_stats_file", "reuse_setup"], []),
        "with_cache": (["A"], ["coloring", "mpi", "is_symmetric"]),
    },
    "matrices": {
        "convection_diffusion_matrix_2d": (["n", "epsilon", "theta", "velocity", "dtype"], []),
        "download_suitesparse_matrix": (["name", "group", "cache_dir", "dtype", "base_url",
                                         "timeout"], []),
        "poisson3d_matrix": (["n", "skew"], []),
        "poisson3d_operator": (["robin", "diagonal_value"], []),
        "poisson_matrix": (["n", "skew"], []),
        "poisson_matrix_distributed": (["nx", "ny", "rank", "nranks", "skew", "dtype"], []),
        "poisson_operator": (["skew", "dtype"], []),
        "random_matrix": (["n", "density", "dtype", "seed"], []),
        "random_matrix_distributed": (["n_global", "rank", "nranks", "density", "dtype",
                                       "seed"], []),
        "rhs_linear": (["n", "dtype"], []),
        "rhs_ones": (["n", "dtype"], []),
        "rhs_random": (["n", "seed", "dtype"], []),
        "tridiagonal_matrix": (["n", "diagonal_value", "dtype"], []),
        "tridiagonal_matrix_distributed": (["n_global", "rank", "nranks", "diagonal_value",
                                            "dtype"], []),
        "tridiagonal_operator": (["diagonal_value", "dtype"], []),
    },
    "sparsity": {
        "cache_coloring": (["operator", "shape"], []),
        "get_column_coloring": (["rows", "cols", "shape"], []),
        "materialize_sparse_matrix": (["A_callable", "shape", "rows", "cols", "column_colors",
                                       "n_colors"], []),
        "probe_sparsity_pattern": (["A_callable", "shape", "tol"], []),
        "trace_sparsity_pattern": (["operator", "shape"], []),
    },
    "utils": {
        "deep_merge": (["base", "override"], []),
        "ensure_int64_array": (["data"], []),
        "format_amgx_stats": (["stats_str", "filepath", "rank"], []),
        "get_preferred_dtype": (["A", "b"], []),
        "temp_enable_x64": ([], []),
        "to_bcsr_matrix": (["A", "b", "use_int64_indices"], []),
        "to_scipy": (["A", "format"], []),
    },
    "mpi_utils": {
        "gather_vector": (["x_local", "comm", "root"], []),
        "get_partition_info": (["n_global", "rank", "nranks"], []),
        "make_allgather_vector": (["comm", "partition_info", "nglobal"], ["backend"]),
        "partition_csr_matrix": (["A_global", "rank", "nranks"], []),
        "partition_operator": (["operator", "nglobal", "rank", "nranks"], []),
        "partition_vector": (["b_global", "rank", "nranks"], []),
        "validate_partition": (["A_local", "nglobal", "row_start", "row_end"], []),
        "register_comm": (["comm"], []),
        "resolve_comm": (["comm_ptr"], []),
        "local_transpose_nnz": (["col_indices", "recvcounts_tuple", "comm"], []),
        "build_halo_plan": (["local_col_indices", "recvcounts_tuple", "partition_info",
                             "comm"], []),
    },
    "config": {
        "outer_max_iters": (["config_str"], []),
        "prepare_config": (["user_config", "save_stats", "mpi", "block_dim"], []),
        "validate_config": (["config"], ["mpi", "block_dim"]),
    },
}


@pytest.mark.parametrize("module, name", [(m, n) for m, names in SIGNATURES.items()
                                          for n in names])
def test_jax_amg_signature(module, name):
    owner = jaxamg if not module else importlib.import_module(f"jaxsolve.sparse.{module}")
    parameters = inspect.signature(getattr(owner, name)).parameters
    ours = list(parameters)
    positional, keyword_only = SIGNATURES[module][name]
    assert ours[:len(positional)] == positional, (ours, positional)
    for keyword in keyword_only:
        assert keyword in parameters, keyword
        assert parameters[keyword].kind in (inspect.Parameter.KEYWORD_ONLY,
                                            inspect.Parameter.POSITIONAL_OR_KEYWORD), keyword


def test_solve_save_stats_file(tmp_path):
    A = jaxamg.matrices.poisson_matrix(12)
    path = tmp_path / "stats.txt"
    x, info = jaxamg.solve(A, jaxamg.matrices.rhs_ones(144), save_stats_file=str(path))
    text = path.read_text()
    assert "print_grid_stats" in text and "print_solve_stats" in text
    assert f"Total Iterations: {info['iterations']}" in text
    assert info.residual_history.shape == (0,)  # the report switched on no stored history


def test_solve_takes_jax_amg_arguments_by_position():
    A = jaxamg.matrices.poisson_matrix(6)
    b = jaxamg.matrices.rhs_ones(36)
    config = {"solver": "PCG", "tolerance": 1e-6}
    x, info = jaxamg.solve(A, b, None, config, 1, None, None, None, None, False)
    np.testing.assert_array_equal(x, jaxamg.solve(A, b, config=config, block_dim=1)[0])
    assert info["iterations"] > 0


def test_preconditioners_save_stats_file(tmp_path):
    lx = pytest.importorskip("lineax")
    A = jaxamg.matrices.poisson_matrix(12)
    b = jaxamg.matrices.rhs_ones(144)
    path = tmp_path / "preconditioner.txt"
    M = jaxamg.make_preconditioner(A, save_stats_file=str(path))  # a solve per application
    np.testing.assert_allclose(M(b), jaxamg.make_preconditioner(A)(b), rtol=1e-6, atol=1e-7)
    assert "Total Iterations: 1" in path.read_text()  # one V-cycle
    operator = lx.MatrixLinearOperator(A.todense(), lx.positive_semidefinite_tag)
    path = tmp_path / "lineax.txt"
    M = jaxamg.make_lineax_preconditioner(operator=operator, save_stats_file=str(path),
                                          max_iters=2)  # an AmgX key as an override
    np.testing.assert_allclose(M.mv(b), jaxamg.make_preconditioner(A, max_iters=2)(b),
                               rtol=1e-6, atol=1e-7)
    # Lineax traces M.mv: the setup's report is in the file, the solve's is logged when the
    # compiled program runs (solve's save_stats_file under jax.jit).
    assert "print_grid_stats" in path.read_text()
    assert M.in_structure() == jax.ShapeDtypeStruct((144,), jnp.float32)
    with pytest.raises(ValueError, match="has no size"):
        jaxamg.make_lineax_preconditioner(lambda v: A @ v, save_stats_file=str(path))


def test_halo_plan_has_jax_amg_fields():
    from jaxsolve.sparse.mpi_utils import HaloPlan

    assert HaloPlan._fields == ("n_local", "n_ghost", "max_per_rank", "col_to_combined",
                                "send_ids_2d", "recv_ghost_slot_2d")


def test_amgx_status_codes():
    assert [(s.name, int(s)) for s in jaxamg.AMGXStatus][:4] == [
        ("SUCCESS", 0), ("FAILED", 1), ("DIVERGED", 2), ("NOT_CONVERGED", 3)]


def test_make_preconditioner_as_m_of_jax_scipy_bicgstab():
    A = jaxamg.matrices.poisson_matrix(24)
    b = jaxamg.matrices.rhs_ones(24 * 24)
    M = jaxamg.make_preconditioner(A)
    x, _ = jax.scipy.sparse.linalg.bicgstab(lambda v: A @ v, b, M=M, tol=1e-6, maxiter=50)
    assert float(jnp.linalg.norm(b - A @ x)) <= 1e-5 * float(jnp.linalg.norm(b))


def test_make_preconditioner_jax_amg_keywords():
    A = jaxamg.matrices.poisson_matrix(12)
    b = jaxamg.matrices.rhs_ones(144)
    M = jaxamg.make_preconditioner(A)
    x, info = jaxamg.make_preconditioner(A, return_info=True)(b)  # one V-cycle, by solve
    np.testing.assert_allclose(x, M(b), rtol=1e-6, atol=1e-7)
    assert info["iterations"] == 1
    stronger = jaxamg.make_preconditioner(A, max_iters=2)  # a keyword override
    assert (float(jnp.linalg.norm(b - A @ stronger(b)))
            < float(jnp.linalg.norm(b - A @ M(b))))


def test_make_lineax_preconditioner_from_the_top_level():
    lx = pytest.importorskip("lineax")
    A = jaxamg.matrices.poisson_matrix(16)
    operator = lx.FunctionLinearOperator(lambda v: A @ v, jax.ShapeDtypeStruct((256,),
                                                                              jnp.float32),
                                         tags=lx.positive_semidefinite_tag)
    M = jaxamg.make_lineax_preconditioner(operator)
    b = jnp.ones(256)
    solution = lx.linear_solve(operator, b, lx.CG(rtol=1e-6, atol=0.0),
                               options={"preconditioner": M})
    assert float(jnp.linalg.norm(b - A @ solution.value)) <= 1e-5 * 16
    assert "make_lineax_preconditioner" in dir(jaxamg) or hasattr(jaxamg,
                                                                  "make_lineax_preconditioner")


def test_sparsity_functions_return_jax_amg_shapes():
    from jaxsolve.sparse.sparsity import (get_column_coloring, materialize_sparse_matrix,
                                          probe_sparsity_pattern, trace_sparsity_pattern)

    operator = jaxamg.matrices.poisson_operator()
    rows, cols = trace_sparsity_pattern(operator, (16, 16))
    expected = scipy.sparse.coo_array(jaxamg.utils.to_scipy(jaxamg.matrices.poisson_matrix(4)))
    np.testing.assert_array_equal(rows, expected.row)
    np.testing.assert_array_equal(cols, expected.col)
    assert rows.dtype == cols.dtype == np.int32
    probed = probe_sparsity_pattern(operator, (16, 16))
    np.testing.assert_array_equal(probed[0], rows)
    np.testing.assert_array_equal(probed[1], cols)
    colors, n_colors = get_column_coloring(rows, cols, (16, 16))
    assert colors.shape == (16,) and isinstance(n_colors, int) and n_colors == 5
    matrix = materialize_sparse_matrix(operator, (16, 16), rows, cols, colors, n_colors)
    assert isinstance(matrix, jax.experimental.sparse.BCSR)
    np.testing.assert_array_equal(matrix.todense(), jaxamg.matrices.poisson_matrix(4).todense())
    opaque = lambda x: jax.pure_callback(lambda v: 2 * v, jax.ShapeDtypeStruct((4,), x.dtype), x)
    assert trace_sparsity_pattern(opaque, (4, 4)) is None  # JAX-AMG's answer: probe instead
    small = probe_sparsity_pattern(lambda x: x * jnp.array([1.0, 1e-12, 3.0, 0.0]), 4)
    assert small[0].tolist() == [0, 2]  # tol drops what is at most 1e-10


def test_utils_and_config():
    from jaxsolve.sparse import config, utils

    A = jaxamg.matrices.tridiagonal_matrix(4)
    for fmt, kind in (("csr", scipy.sparse.csr_matrix), ("coo", scipy.sparse.coo_matrix),
                      ("lil", scipy.sparse.lil_matrix)):
        converted = utils.to_scipy(A, format=fmt)
        assert isinstance(converted, kind)
        np.testing.assert_array_equal(converted.toarray(), A.todense())
    with pytest.raises(ValueError, match="unsupported format 'dia'"):
        utils.to_scipy(A, "dia")
    assert utils.get_preferred_dtype(A, jnp.ones(4, jnp.int32)) == jnp.float32
    assert utils.get_preferred_dtype(A, np.ones(4)) == jnp.float64
    bcsr = utils.to_bcsr_matrix(jaxamg.matrices.tridiagonal_operator(), jnp.ones(6))
    np.testing.assert_array_equal(bcsr.todense(), jaxamg.matrices.tridiagonal_matrix(6).todense())
    assert utils.ensure_int64_array([1, 2]).dtype == np.int64
    text = config.prepare_config({"config_version": 2, "solver": {"solver": "PCG"}},
                                 save_stats=True, max_iters=7)
    outer = json.loads(text)["solver"]
    assert (outer["solver"], outer["max_iters"], outer["print_solve_stats"]) == ("PCG", 7, 1)
    assert config.outer_max_iters(text) == 7
    config.validate_config({"solver": "CG", "preconditioner": "AMG"})  # AmgX accepts it
    with pytest.raises(ValueError, match="'tolerence' is not an AmgX parameter"):
        config.validate_config({"tolerence": 1e-8})


def test_mpi_utils_without_mpi():
    from jaxsolve.sparse import mpi_utils

    assert [mpi_utils.get_partition_info(10, r, 3) for r in range(3)] == [
        (0, 4, 4), (4, 7, 3), (7, 10, 3)]
    A = jaxamg.matrices.poisson_matrix(3)
    blocks = [mpi_utils.partition_csr_matrix(jaxamg.utils.to_scipy(A), r, 2) for r in (0, 1)]
    np.testing.assert_array_equal(np.vstack([np.asarray(blk.todense()) for blk, _, _ in blocks]),
                                  A.todense())
    assert [(start, end) for _, start, end in blocks] == [(0, 5), (5, 9)]
    local, start, end = mpi_utils.partition_operator(jaxamg.matrices.poisson_operator(), 9, 1, 2)
    np.testing.assert_allclose(local(jnp.arange(9.0)), (A @ jnp.arange(9.0))[5:9])
    mpi_utils.validate_partition(blocks[1][0], 9, 5, 9)
    with pytest.raises(ValueError, match=r"shape \(4, 9\) is not \(5, 9\)"):
        mpi_utils.validate_partition(blocks[1][0], 9, 4, 9)


# AmgX's print_grid_stats and print_solve_stats output, as AmgX prints it (then a second
# solve's table, which format_amgx_stats leaves out, as JAX-AMG's does).
AMGX_STATS = """\
AMG Grid:
         Number of Levels: 2
            LVL         ROWS               NNZ    SPRSTY       Mem (GB)
         --------------------------------------------------------------
           0(D)          100            460     0.046       8.46e-06
           1(D)           50            240     0.096       3.85e-06
         --------------------------------------------------------------
         Grid Complexity: 1.5
         Operator Complexity: 1.52174
         Total Memory Usage: 1.23e-05 GB
         --------------------------------------------------------------
           iter      Mem Usage (GB)       residual           rate
         --------------------------------------------------------------
            Ini             0.403015   1.000000e+01
              0             0.403015   1.032543e-01         0.0103
         --------------------------------------------------------------
        Total Iterations: 1
        Final Residual: \t   1.032543e-01
         --------------------------------------------------------------
           iter      Mem Usage (GB)       residual           rate
            Ini             0.403015   5.000000e+00
"""


def test_format_amgx_stats(tmp_path):
    from jaxsolve.sparse.utils import format_amgx_stats

    path = tmp_path / "stats.txt"
    format_amgx_stats(AMGX_STATS, path)
    lines = path.read_text().splitlines()
    assert lines[:3] == ["=" * 60, "  AMG GRID STATISTICS", "=" * 60]
    assert "  0(D)          100            460     0.046       8.46e-06" in lines
    assert "  Operator Complexity: 1.52174" in lines
    solver = lines.index("  SOLVER ITERATIONS")
    assert lines[solver + 2] == "  iter      Mem Usage (GB)       residual           rate"
    assert "  Ini             0.403015   1.000000e+01" in lines
    assert f"    {'Total Iterations':<30}: 1" in lines
    assert f"    {'Final Residual':<30}: 1.032543e-01" in lines
    assert not any("5.000000e+00" in line for line in lines)  # the second table
    format_amgx_stats(AMGX_STATS, tmp_path / "rank1.txt", rank=1)  # MPI: rank 0 writes
    assert not (tmp_path / "rank1.txt").exists()
