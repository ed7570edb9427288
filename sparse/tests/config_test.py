"""Tests for jaxsolve.sparse._config: AmgX configurations parsed into a frozen config tree."""

import copy
import dataclasses
import functools
import json
import pathlib
import re

import jax
import pytest

from jaxsolve.sparse._config import (
    DEFAULT_SOLVER_CONFIG,
    AMGConfig,
    RelaxationConfig,
    SolverConfig,
    parse_amgx_config,
)

# AmgX's published sample configs (NVIDIA/AMGX, src/configs/), trailing spaces trimmed.
FGMRES_AGGREGATION_JACOBI_JSON = """\
{
    "config_version": 2,
    "solver": {
        "preconditioner": {
            "error_scaling": 0,
            "print_grid_stats": 1,
            "algorithm": "AGGREGATION",
            "solver": "AMG",
            "smoother": "BLOCK_JACOBI",
            "presweeps": 0,
            "selector": "SIZE_2",
            "coarse_solver": "NOSOLVER",
            "max_iters": 1,
            "min_coarse_rows": 32,
            "relaxation_factor": 0.75,
            "scope": "amg",
            "max_levels": 100,
            "postsweeps": 3,
            "cycle": "V"
        },
        "use_scalar_norm": 1,
        "solver": "FGMRES",
        "print_solve_stats": 1,
        "obtain_timings": 1,
        "max_iters": 1000,
        "monitor_residual": 1,
        "gmres_n_restart": 32,
        "convergence": "RELATIVE_INI",
        "scope": "main",
        "tolerance" : 1e-06,
        "norm": "L2"
    }
}
"""
PCG_AGGREGATION_JACOBI_JSON = """\
{
    "config_version": 2,
    "determinism_flag": 1,
    "solver": {
        "preconditioner": {
            "print_grid_stats": 1,
            "algorithm": "AGGREGATION",
            "print_vis_data": 0,
            "solver": "AMG",
            "smoother": {
                "relaxation_factor": 0.8,
                "scope": "jacobi",
                "solver": "BLOCK_JACOBI",
                "monitor_residual": 0,
                "print_solve_stats": 0
            },
            "print_solve_stats": 0,
            "presweeps": 0,
            "interpolator": "D2",
            "selector": "SIZE_2",
            "coarse_solver": "NOSOLVER",
            "max_iters": 1,
            "monitor_residual": 0,
            "store_res_history": 0,
            "scope": "amg",
            "max_levels": 100,
            "postsweeps": 3,
            "cycle": "V"
        },
        "solver": "PCG",
        "print_solve_stats": 1,
        "obtain_timings": 1,
        "max_iters": 1000,
        "monitor_residual": 1,
        "convergence": "RELATIVE_INI",
        "scope": "main",
        "tolerance": 0.0001,
        "norm": "L2"
    }
}
"""
PBICGSTAB_AGGREGATION_W_JACOBI_JSON = """\
{
    "config_version": 2,
    "solver": {
        "preconditioner": {
            "error_scaling": 2,
            "algorithm": "AGGREGATION",
            "solver": "AMG",
            "smoother": {
                "relaxation_factor": 0.9,
                "scope": "amg_smoother",
                "solver": "BLOCK_JACOBI"
            },
            "presweeps": 1,
            "selector": "SIZE_2",
            "max_iters": 1,
            "scope": "amg",
            "cycle": "W",
            "max_levels": 50,
            "norm": "L1",
            "postsweeps": 2
        },
        "solver": "PBICGSTAB",
        "print_solve_stats": 1,
        "obtain_timings": 1,
        "max_iters": 100,
        "monitor_residual": 1,
        "convergence": "RELATIVE_INI",
        "scope": "main",
        "tolerance" : 1e-06,
        "norm": "L2"
    }
}
"""


def block_jacobi(relaxation_factor=None):
    return RelaxationConfig(solver="BLOCK_JACOBI", relaxation_factor=relaxation_factor,
                            chebyshev_polynomial_order=None)


def amg(**changes):
    """jaxsolve's default AMG (classical), with ``changes``."""
    fields = dict(algorithm="CLASSICAL", selector="HMIS", smoothed_aggregation=False,
                  smoother=block_jacobi(), presweeps=1, postsweeps=1, cycle="V", max_levels=100,
                  min_coarse_rows=256, coarse_solver="DENSE_LU_SOLVER", coarsest_sweeps=None,
                  interpolator="D2", strength="AHAT", strength_threshold=0.25, max_row_sum=1.1,
                  interp_max_elements=6, interp_truncation_factor=1.1, aggressive_levels=0)
    return AMGConfig(**{**fields, **changes})


def aggregation(**changes):
    """Aggregation AMG with jaxsolve's defaults and ``changes``."""
    classical_only = dict.fromkeys(("interpolator", "strength", "strength_threshold",
                                    "max_row_sum", "interp_max_elements",
                                    "interp_truncation_factor", "aggressive_levels"))
    return amg(**{"algorithm": "AGGREGATION", "selector": "SIZE_4", **classical_only,
                  **changes})


def solver(name, **changes):
    fields = dict(solver=name, max_iters=1000, tolerance=1e-6, convergence="RELATIVE_INI",
                  norm="L2", monitor_residual=True, print_solve_stats=False,
                  print_grid_stats=False, store_res_history=False, preconditioner=None,
                  gmres_n_restart=None, amg=None, relaxation=None)
    return SolverConfig(**{**fields, **changes})


def amg_preconditioner(**changes):
    return solver("AMG", **{"max_iters": 1, "monitor_residual": False, "amg": amg(), **changes})


class TestParseAmgxConfig:
    def test_parse_amgx_config_defaults(self):
        # No cycle key: the cycle is left to jaxsolve (for_dtype; default_cycle_test.py);
        # no solver key: the solver too (solve's method_for; default_method_test.py).
        expected = solver("PBICGSTAB", default_solver=True,
                          preconditioner=amg_preconditioner(amg=amg(default_cycle=True)))
        assert DEFAULT_SOLVER_CONFIG == expected
        assert parse_amgx_config() is DEFAULT_SOLVER_CONFIG
        assert parse_amgx_config({}) == expected
        assert parse_amgx_config({"config_version": 2, "solver": {}}) == expected
        assert parse_amgx_config(expected) is expected

    def test_block_jacobi_damping_is_estimated_unless_given(self):
        # No relaxation_factor: None, ω estimated in the setup; a given one is kept, and
        # written back out (an estimated one has no AmgX key).
        estimated = parse_amgx_config({"solver": "AMG", "smoother": "BLOCK_JACOBI"})
        assert estimated.amg.smoother == block_jacobi(None)
        assert "relaxation_factor" not in estimated.to_amgx_dict()["solver"]["smoother"]
        given = parse_amgx_config({"solver": "AMG", "relaxation_factor": 0.9})
        assert given.amg.smoother == block_jacobi(0.9)
        assert given.to_amgx_dict()["solver"]["smoother"]["relaxation_factor"] == 0.9
        # The other weighted relaxations keep AmgX's fixed default, and need a factor.
        assert parse_amgx_config({"solver": "JACOBI_L1"}).relaxation.relaxation_factor == 0.9
        with pytest.raises(ValueError, match="relaxation_factor must be set"):
            RelaxationConfig(solver="JACOBI_L1", relaxation_factor=None,
                             chebyshev_polynomial_order=None)

    def test_parse_amgx_config_flat_and_nested_forms_agree(self):
        scope = {"solver": "PCG", "tolerance": 1e-8, "max_iters": 50,
                 "preconditioner": {"solver": "AMG", "cycle": "W", "selector": "HMIS"}}
        flat = parse_amgx_config(scope)
        nested = parse_amgx_config({"config_version": 2, "determinism_flag": 1, "solver": scope})
        assert flat == nested == solver(
            "PCG", tolerance=1e-8, max_iters=50,
            preconditioner=amg_preconditioner(amg=amg(cycle="W", selector="HMIS")))

    def test_parse_amgx_config_json_string_and_file(self, tmp_path):
        document = {"config_version": 2, "solver": {"solver": "GMRES", "gmres_n_restart": 10}}
        path = tmp_path / "GMRES.json"
        path.write_text(json.dumps(document))
        expected = parse_amgx_config(document)
        assert expected.gmres_n_restart == 10
        assert parse_amgx_config(json.dumps(document)) == expected
        assert parse_amgx_config(str(path)) == expected
        assert parse_amgx_config(pathlib.Path(path)) == expected

    def test_parse_amgx_config_partial_override_inherits_the_rest(self):
        config = parse_amgx_config(
            {"preconditioner": {"smoother": {"solver": "JACOBI_L1", "relaxation_factor": 0.7},
                                "postsweeps": 2}})
        expected = dataclasses.replace(
            DEFAULT_SOLVER_CONFIG,
            preconditioner=amg_preconditioner(amg=amg(smoother=RelaxationConfig(
                solver="JACOBI_L1", relaxation_factor=0.7, chebyshev_polynomial_order=None),
                postsweeps=2)))
        assert config == expected

    def test_parse_amgx_config_named_component_reads_its_keys_from_the_scope(self):
        config = parse_amgx_config({"solver": "AMG", "smoother": "CHEBYSHEV_POLY",
                                    "chebyshev_polynomial_order": 3, "max_iters": 20})
        assert config.max_iters == 20  # the AMG solver's, not the smoother's
        assert config.amg.smoother == RelaxationConfig(
            solver="CHEBYSHEV_POLY", relaxation_factor=None, chebyshev_polynomial_order=3)
        config = parse_amgx_config({"solver": "PCG", "preconditioner": "AMG", "cycle": "F",
                                    "max_iters": 20})
        assert config.max_iters == 20 and config.preconditioner.max_iters == 1
        assert config.preconditioner.amg.cycle == "F"
        # The defaults are names too: the default AMG preconditioner and its smoother.
        config = parse_amgx_config({"solver": "PCG", "cycle": "W", "relaxation_factor": 0.5})
        assert config.preconditioner == amg_preconditioner(
            amg=amg(cycle="W", smoother=block_jacobi(0.5)))

    def test_parse_amgx_config_amgx_samples(self):
        config = parse_amgx_config(FGMRES_AGGREGATION_JACOBI_JSON)
        assert config == solver(
            "FGMRES", print_solve_stats=True, obtain_timings=True, gmres_n_restart=32,
            preconditioner=amg_preconditioner(
                print_grid_stats=True,
                amg=aggregation(selector="SIZE_2", min_coarse_rows=32, smoother=block_jacobi(0.75),
                        presweeps=0, postsweeps=3, coarse_solver="NOSOLVER",
                        coarsest_sweeps=2)))
        config = parse_amgx_config(PCG_AGGREGATION_JACOBI_JSON)
        assert config == solver(
            "PCG", tolerance=1e-4, print_solve_stats=True, obtain_timings=True,
            preconditioner=amg_preconditioner(
                print_grid_stats=True,
                amg=aggregation(selector="SIZE_2", smoother=block_jacobi(0.8), presweeps=0,
                        postsweeps=3, coarse_solver="NOSOLVER", coarsest_sweeps=2)))
        with pytest.raises(ValueError, match=re.escape(
                "parse_amgx_config: in scope 'solver.preconditioner', AmgX parameter"
                " 'error_scaling' is not implemented yet; only AmgX's default 0 is accepted,"
                " got 2.")):
            parse_amgx_config(PBICGSTAB_AGGREGATION_W_JACOBI_JSON)

    def test_parse_amgx_config_ignores_what_cannot_change_the_solution(self):
        config = parse_amgx_config({
            "solver": "AMG", "algorithm": "AGGREGATION", "print_config": 1,
            "interpolator": "D1", "strength_threshold": 0.3, "aggressive_levels": 2,
            "communicator": "MPI", "error_scaling": 0,
            "smoother": {"solver": "BLOCK_JACOBI", "max_iters": 4, "tolerance": 0.1,
                         "monitor_residual": 1, "print_solve_stats": 1}})
        # Classical AMG's keys are read, as AmgX reads them, and left out for aggregation.
        assert config == solver("AMG", amg=aggregation(default_cycle=True))

    @pytest.mark.parametrize("config", [
        DEFAULT_SOLVER_CONFIG,
        {"solver": "CG", "convergence": "ABSOLUTE", "tolerance": 1e-9, "store_res_history": 1},
        {"solver": "FGMRES", "gmres_n_restart": 8, "preconditioner": {
            "smoother": {"solver": "CHEBYSHEV_POLY", "chebyshev_polynomial_order": 2},
            "coarse_solver": "NOSOLVER", "coarsest_sweeps": 4, "algorithm": "AGGREGATION", "selector": "SIZE_8",
            "jaxsolve_smoothed_aggregation": 1, "max_levels": 3, "min_coarse_rows": 7,
            "jaxsolve_hierarchy_precision": "SINGLE"}},
        {"solver": "PBICGSTAB", "preconditioner": {"solver": "JACOBI_L1", "max_iters": 2}},
        {"solver": "BLOCK_JACOBI", "relaxation_factor": 0.6, "max_iters": 30},
        {"solver": "PCG", "preconditioner": "NOSOLVER"},
        {"solver": "PCG", "preconditioner": {"coarse_solver": {"solver": "CG", "max_iters": 7}}},
        {"solver": "PCG", "preconditioner": {
            "algorithm": "CLASSICAL", "selector": "HMIS", "interpolator": "D1",
            "strength": "ALL", "strength_threshold": 0.6, "max_row_sum": 0.9,
            "interp_max_elements": 4, "interp_truncation_factor": 0.1,
            "aggressive_levels": 1}},
    ], ids=["default", "cg", "fgmres-sa-cheby", "pbicgstab-jacobi-l1", "jacobi", "pcg-none",
            "pcg-cg-coarse", "pcg-classical"])
    def test_parse_amgx_config_round_trip(self, config):
        parsed = parse_amgx_config(config)
        amgx = parsed.to_amgx_dict()
        assert json.loads(json.dumps(amgx)) == amgx
        assert parse_amgx_config(amgx) == parsed
        assert parse_amgx_config(json.dumps(amgx)) == parsed

    def test_parse_amgx_config_smoothed_aggregation_extension_key(self):
        assert "jaxsolve_smoothed_aggregation" not in json.dumps(
            DEFAULT_SOLVER_CONFIG.to_amgx_dict())
        config = parse_amgx_config({"preconditioner": {"algorithm": "AGGREGATION",
                                                        "jaxsolve_smoothed_aggregation": 1}})
        assert config.preconditioner.amg.smoothed_aggregation is True
        assert config.to_amgx_dict()["solver"]["preconditioner"][
            "jaxsolve_smoothed_aggregation"] == 1

    def test_parse_amgx_config_hierarchy_precision_extension_key(self):
        assert "jaxsolve_hierarchy_precision" not in json.dumps(
            DEFAULT_SOLVER_CONFIG.to_amgx_dict())
        config = parse_amgx_config({"preconditioner": {"jaxsolve_hierarchy_precision": "SINGLE"}})
        assert config.preconditioner.amg.hierarchy_precision == "SINGLE"
        with pytest.raises(ValueError, match="hierarchy_precision.*supported: DEFAULT, SINGLE"):
            parse_amgx_config({"preconditioner": {"jaxsolve_hierarchy_precision": "HALF"}})

    def test_parse_amgx_config_jit_static(self):
        traces = []

        @functools.partial(jax.jit, static_argnames="config")
        def iterations(x, config):
            traces.append(config)
            return x * config.preconditioner.amg.presweeps

        first = parse_amgx_config({"solver": "PCG", "preconditioner": {"presweeps": 2}})
        second = parse_amgx_config('{"config_version": 2, "solver": {"solver": "PCG",'
                                   ' "preconditioner": {"presweeps": 2}}}')
        assert first is not second and hash(first) == hash(second)
        assert iterations(1.0, config=first) == iterations(1.0, config=second) == 2.0
        assert len(traces) == 1
        assert len({first, second, DEFAULT_SOLVER_CONFIG}) == 2

    def test_parse_amgx_config_remembers_a_dict_by_its_values_and_their_types(self):
        """A solve parses its config on every call: an equal dict is parsed once, but 2 and
        2.0 (equal in Python, with one hash) are different configs, the second invalid."""
        config = {"solver": "PCG", "preconditioner": {"solver": "AMG", "presweeps": 2}}
        first = parse_amgx_config(config)
        assert parse_amgx_config(copy.deepcopy(config)) is first
        config["preconditioner"]["presweeps"] = 2.0
        with pytest.raises(TypeError, match="presweeps must be an int, got 2.0"):
            parse_amgx_config(config)
        config["preconditioner"]["presweeps"] = [2]
        with pytest.raises(TypeError, match="presweeps must be an int"):
            parse_amgx_config(config)

    @pytest.mark.parametrize("config, without", [
        ({"solver": "CG", "preconditioner": {"solver": "JACOBI_L1"}}, {"solver": "CG"}),
        ({"solver": "CG", "relaxation_factor": 0.5}, {"solver": "CG"}),
        ({"preconditioner": {"coarsest_sweeps": 3}}, {}),
        ({"preconditioner": {"smoother": {"solver": "BLOCK_JACOBI", "symmetric_GS": 1}}},
         {"preconditioner": {"smoother": "BLOCK_JACOBI"}}),
        ({"solver": "AMG", "smoother": {"solver": "CHEBYSHEV_POLY", "preconditioner": "AMG"}},
         {"solver": "AMG", "smoother": "CHEBYSHEV_POLY"}),
    ])
    def test_keys_no_component_reads_are_ignored_as_amgx_does(self, config, without):
        assert parse_amgx_config(config) == parse_amgx_config(without)

    def test_dense_lu_num_rows_sets_the_coarsest_size_as_in_amgx(self):
        def min_coarse_rows(amg):
            return parse_amgx_config({"preconditioner": amg}).preconditioner.amg.min_coarse_rows

        assert min_coarse_rows({"dense_lu_num_rows": 1}) == 1
        assert min_coarse_rows({"dense_lu_num_rows": 500, "min_coarse_rows": 8}) == 500
        assert min_coarse_rows({"dense_lu_num_rows": 0, "min_coarse_rows": 8}) == 8
        assert min_coarse_rows({"dense_lu_num_rows": 1, "coarse_solver": "NOSOLVER",
                                "min_coarse_rows": 8}) == 8
        with pytest.raises(TypeError, match="dense_lu_num_rows must be an int, got 'many'"):
            min_coarse_rows({"dense_lu_num_rows": "many"})

    @pytest.mark.parametrize("config, error, message", [
        ({"solver": "PCG", "tolerence": 1e-8}, ValueError,
         "in scope 'solver', 'tolerence' is not an AmgX parameter (did you mean 'tolerance',"
         " 'convergence' or 'rel_div_tolerance'?)."),
        ({"preconditioner": {"selektor": "SIZE_2"}}, ValueError,
         "in scope 'solver.preconditioner', 'selektor' is not an AmgX parameter (did you mean"
         " 'selector'?)."),
        ({"solver": "PCG", "preconditioner": {"algorithm": "ENERGYMIN"}}, ValueError,
         "in scope 'solver.preconditioner', algorithm 'ENERGYMIN' is not implemented yet;"
         " supported: AGGREGATION, CLASSICAL."),
        ({"preconditioner": {"algorithm": "CLASSICAL", "selector": "SIZE_2"}}, ValueError,
         "in scope 'solver.preconditioner', selector 'SIZE_2' is a selector of algorithm"
         " 'AGGREGATION', not of 'CLASSICAL'; supported: PMIS, HMIS, PMISC."),
        ({"preconditioner": {"algorithm": "CLASSICAL", "selector": "AGGRESSIVE_PMIS"}},
         ValueError, "in scope 'solver.preconditioner', selector 'AGGRESSIVE_PMIS' (aggressive"
         " coarsening on every level) is not implemented; set aggressive_levels for aggressive"
         " coarsening on the first levels; supported: PMIS, HMIS, PMISC."),
        ({"preconditioner": {"algorithm": "CLASSICAL", "aggressive_interpolator": "D3"}},
         ValueError, "in scope 'solver.preconditioner', aggressive_interpolator 'D3' is not an"
         " AmgX aggressive_interpolator; supported: MULTIPASS, D2, D1."),
        ({"preconditioner": {"algorithm": "CLASSICAL", "aggressive_levels": -1}}, ValueError,
         "in scope 'solver.preconditioner', aggressive_levels must be >= 0, got -1."),
        ({"preconditioner": {"algorithm": "CLASSICAL", "strength_threshold": 1.5}}, ValueError,
         "in scope 'solver.preconditioner', strength_threshold must be in [0, 1], got 1.5."),
        ({"preconditioner": {"algorithm": "CLASSICAL", "interpolator": "MULTIPASS"}}, ValueError,
         "in scope 'solver.preconditioner', interpolator 'MULTIPASS' is not implemented yet;"
         " supported: D2, D1."),
        ({"preconditioner": {"algorithm": "CLASSICAL", "jaxsolve_smoothed_aggregation": 1}},
         ValueError, "in scope 'solver.preconditioner', smoothed_aggregation applies to"
         " algorithm 'AGGREGATION' only."),
        ({"preconditioner": {"smoother": "MULTICOLOR_ILU"}}, ValueError,
         "in scope 'solver.preconditioner.smoother', smoother 'MULTICOLOR_ILU' is not"
         " implemented yet; supported: BLOCK_JACOBI, JACOBI_L1, CHEBYSHEV_POLY, MULTICOLOR_GS,"
         " MULTICOLOR_DILU."),
        ({"preconditioner": {"algorithm": "AGGREGATION", "selector": "PMIS"}}, ValueError,
         "in scope 'solver.preconditioner', selector 'PMIS' is a selector of algorithm"
         " 'CLASSICAL', not of 'AGGREGATION'; supported: SIZE_2, SIZE_4, SIZE_8."),
        ({"preconditioner": {"algorithm": "AGGREGATION", "selector": "MULTI_PAIRWISE"}},
         ValueError,
         "in scope 'solver.preconditioner', selector 'MULTI_PAIRWISE' is not implemented yet;"
         " supported: SIZE_2, SIZE_4, SIZE_8."),
        ({"solver": "PBICGSTB"}, ValueError,
         "in scope 'solver', solver 'PBICGSTB' is not an AmgX solver (did you mean 'PBICGSTAB'"
         " or 'BICGSTAB'?); supported: CG, PCG, BICGSTAB, PBICGSTAB, GMRES, FGMRES, AMG,"
         " BLOCK_JACOBI, JACOBI_L1, CHEBYSHEV_POLY, MULTICOLOR_GS, MULTICOLOR_DILU, NOSOLVER."),
        ({"solver": "IDR"}, ValueError,
         "in scope 'solver', solver 'IDR' is not implemented yet; supported: CG, PCG, BICGSTAB,"
         " PBICGSTAB, GMRES, FGMRES, AMG, BLOCK_JACOBI, JACOBI_L1, CHEBYSHEV_POLY,"
         " MULTICOLOR_GS, MULTICOLOR_DILU, NOSOLVER."),
        ({"solver": "PCG", "preconditioner": {"solver": "PCG"}}, ValueError,
         "in scope 'solver.preconditioner', preconditioner 'PCG' is not implemented yet;"
         " supported: AMG, BLOCK_JACOBI, JACOBI_L1, CHEBYSHEV_POLY, MULTICOLOR_GS,"
         " MULTICOLOR_DILU, NOSOLVER."),
        ({"preconditioner": {"cycle": "CGF"}}, ValueError,
         "in scope 'solver.preconditioner', cycle 'CGF' is not implemented yet; supported: V,"
         " W, F."),
        ({"preconditioner": {"coarse_solver": "PCG"}}, ValueError,
         "in scope 'solver.preconditioner.coarse_solver', coarse_solver 'PCG' is not"
         " implemented yet; supported: DENSE_LU_SOLVER, NOSOLVER, CG, BICGSTAB, GMRES."),
        ({"preconditioner": {"coarse_solver": {"solver": "CG", "monitor_residual": 1}}},
         ValueError, "in scope 'solver.preconditioner.coarse_solver', a coarse solver's"
         " monitor_residual is implemented only at AmgX's default 0 (a fixed number of"
         " iterations, max_iters), got 1."),
        ({"convergence": "RELATIVE"}, ValueError,
         "in scope 'solver', convergence 'RELATIVE' is not an AmgX convergence (did you mean"
         " 'RELATIVE_MAX', 'RELATIVE_INI' or 'RELATIVE_MAX_CORE'?); supported: RELATIVE_INI,"
         " ABSOLUTE, RELATIVE_MAX, COMBINED_REL_INI_ABS."),
        ({"convergence": "COMBINED_REL_INI_ABS", "alt_rel_tolerance": -1e-3}, ValueError,
         "in scope 'solver', alt_rel_tolerance must be >= 0, got -0.001."),
        ({"norm": "L1_SCALED"}, ValueError,
         "in scope 'solver', norm 'L1_SCALED' (AmgX's parser reads it, its documentation does"
         " not list it: the L1 norm divided by a factor of A, b and x0, on its GPU path only)"
         " is not implemented; supported: L2, L1, LMAX."),
        ({"norm": "LINF"}, ValueError,
         "in scope 'solver', norm 'LINF' is not an AmgX norm; supported: L2, L1, LMAX."),
        ({"solver": "GMRES", "norm": "LMAX"}, ValueError,
         "in scope 'solver', norm 'LMAX' is not supported by solver 'GMRES': AmgX's GMRES"
         " tests convergence in the L2 norm only (it refuses the others); use 'FGMRES', which"
         " takes L1 and LMAX too, or norm 'L2'."),
        ({"fine_smoother": "GS"}, ValueError,
         "in scope 'solver', AmgX parameter 'fine_smoother' is not implemented yet, got 'GS'."),
        ({"max_iters": 0}, ValueError, "in scope 'solver', max_iters must be >= 1, got 0."),
        ({"max_iters": 2.5}, TypeError, "in scope 'solver', max_iters must be an int, got 2.5."),
        ({"tolerance": -1e-6}, ValueError,
         "in scope 'solver', tolerance must be >= 0, got -1e-06."),
        ({"monitor_residual": 2}, ValueError,
         "in scope 'solver', monitor_residual must be 0 or 1, got 2."),
        ({"solver": "BLOCK_JACOBI", "relaxation_factor": 2.5}, ValueError,
         "in scope 'solver', relaxation_factor must be in (0, 2], got 2.5."),
        ({"solver": "CHEBYSHEV_POLY", "chebyshev_polynomial_order": 11}, ValueError,
         "in scope 'solver', chebyshev_polynomial_order must be in [1, 10], got 11."),
        ({"preconditioner": {"smoother": 3}}, TypeError,
         "in scope 'solver.preconditioner', smoother must be a solver name or a scope (a JSON"
         " object), got 3."),
        ({"config_version": 2, "solver": {"solver": "PCG"}, "tolerance": 1e-8}, ValueError,
         "'tolerance' is set at the top level of a nested config, where no solver reads it;"
         ' move it into the "solver" scope.'),
        ({"config_version": 1, "solver": "PCG"}, ValueError,
         "config_version must be 2 (AmgX's JSON form), got 1; AmgX's config_version 1"
         " 'name=value' text is not supported."),
        ('{"solver": "PCG",}', ValueError,
         "config is not valid JSON: Expecting property name enclosed in double quotes: line 1"
         " column 18 (char 17)."),
        ("no/such/config.json", ValueError,
         "config 'no/such/config.json' is neither a JSON object (it does not start with '{')"
         " nor an existing file."),
        (42, TypeError,
         "config must be a dict, a JSON string, a file path, a SolverConfig or None, got int."),
    ])
    def test_parse_amgx_config_errors(self, config, error, message):
        with pytest.raises(error, match=re.escape(f"parse_amgx_config: {message}")) as info:
            parse_amgx_config(config)
        assert str(info.value) == f"parse_amgx_config: {message}"


class TestConfigClasses:
    def test_config_classes_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "SolverConfig: preconditioner must be None for solver 'CG', got")):
            solver("CG", preconditioner=amg_preconditioner())
        with pytest.raises(ValueError, match=re.escape(
                "SolverConfig: preconditioner must be set for solver 'PCG'.")):
            solver("PCG")
        with pytest.raises(ValueError, match=re.escape(
                "AMGConfig: interpolator must be set for algorithm 'CLASSICAL'.")):
            amg(interpolator=None)
        with pytest.raises(ValueError, match=re.escape(
                "AMGConfig: strength_threshold must be None for algorithm 'AGGREGATION', got"
                " 0.25.")):
            aggregation(strength_threshold=0.25)
        with pytest.raises(ValueError, match=re.escape(
                "AMGConfig: coarsest_sweeps must be set for coarse_solver 'NOSOLVER'.")):
            amg(coarse_solver="NOSOLVER")
        with pytest.raises(ValueError, match=re.escape(
                "RelaxationConfig: chebyshev_polynomial_order must be None for solver"
                " 'BLOCK_JACOBI', got 3.")):
            RelaxationConfig(solver="BLOCK_JACOBI", relaxation_factor=0.9,
                             chebyshev_polynomial_order=3)

    def test_config_classes_are_frozen_and_normalized(self):
        config = solver("AMG", amg=amg(), tolerance=1)
        assert config.tolerance == 1.0 and isinstance(config.tolerance, float)
        assert config == solver("AMG", amg=amg(), tolerance=1.0)
        with pytest.raises(dataclasses.FrozenInstanceError):
            config.max_iters = 3
