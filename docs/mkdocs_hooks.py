"""MkDocs hooks of jaxsolve's documentation: the AmgX configuration reference, generated.

The page ``reference/amgx-config.md`` holds the marker ``<!-- amgx-config-reference -->``;
:func:`on_page_markdown` replaces it by tables built from the parser's own tables in
``jaxsolve.sparse._config`` (the keys it reads, their defaults and accepted values, the keys
accepted only at AmgX's default, the keys it ignores), with AmgX's meaning of each key from
:data:`MEANINGS` below.  A key the parser knows and this file does not describe, or a
description of a key the parser no longer knows, fails the build: the reference cannot
drift from the code.  (The docs build reads ``_config``'s private tables on purpose: they
are the single source of truth this page renders; no package imports them.)
"""

from __future__ import annotations

import importlib
from typing import Any

MARKER = "<!-- amgx-config-reference -->"

# AmgX's meaning of each key jaxsolve reads (AmgX's reference manual, "Configuration
# parameters"), and where jaxsolve differs.  A tuple gives (meaning, default) for a key whose
# default the parser keeps outside its default tables.
MEANINGS: dict[str, str | tuple[str, Any]] = {
    "solver": "The method of this scope: a Krylov method (CG, PCG, BICGSTAB, PBICGSTAB,"
              " GMRES, FGMRES), AMG iterated as a solver, or a relaxation. Where the outer"
              " scope names none, `solve` runs PCG on a Hermitian matrix with a positive"
              " diagonal (continued by PBICGSTAB where PCG breaks down), PBICGSTAB on any"
              " other; traced values take the method of their pattern's latest concrete"
              " values, or are tested in the solve's program.",
    "preconditioner": "The preconditioner of PCG, PBICGSTAB, GMRES and FGMRES: a solver"
                      " name or a scope of its own. Ignored by unpreconditioned methods, as"
                      " in AmgX.",
    "max_iters": "Iterations at most (a preconditioner scope: cycles or sweeps per"
                 " application).",
    "tolerance": "Convergence tolerance, read by `convergence`.",
    "convergence": "The convergence test: RELATIVE_INI stops at ‖r‖ ≤ tolerance·‖r₀‖"
                   " (RELATIVE_INI_CORE is read as it), ABSOLUTE at ‖r‖ ≤ tolerance,"
                   " RELATIVE_MAX (or RELATIVE_MAX_CORE) at ‖r‖ ≤ tolerance·maxⱼ ‖rⱼ‖ (the"
                   " largest residual so far), COMBINED_REL_INI_ABS at ‖r‖ ≤ tolerance or"
                   " ‖r‖ ≤ `alt_rel_tolerance`·‖r₀‖. A SUCCESS is checked on ‖b − A x‖ by"
                   " the same test.",
    "alt_rel_tolerance": "The relative tolerance of COMBINED_REL_INI_ABS (ignored by the"
                         " other tests).",
    "norm": "The norm ‖·‖ of the convergence test and of the reported residuals: L2,"
            " L1 (the sum of the entries' magnitudes) or LMAX (the largest magnitude). GMRES"
            " takes L2 only, as AmgX's; FGMRES takes all three. AmgX's undocumented L1_SCALED"
            " is refused.",
    "monitor_residual": "Compute the residual and stop on convergence; 0 runs exactly"
                        " `max_iters` iterations (a preconditioner's cycle).",
    "print_solve_stats": "Report each iteration's residual and rate, and the totals, after"
                         " the solve: a log record of the `jaxsolve.sparse` logger, under"
                         " `jit` and `vmap` too (AmgX prints to stdout).",
    "print_grid_stats": "Report the AMG hierarchy (rows, nonzeros, complexities, memory) when"
                        " a solve sets it up from concrete values: a log record.",
    "store_res_history": "Keep the residual history: `info.residual_history` holds"
                         " `max_iters + 1` relative residuals, else none.",
    "obtain_timings": "Report the setup's and the solve's wall times of a call on concrete"
                      " values (under `jit`: the setup's host work): a log record.",
    "gmres_n_restart": "Krylov vectors of GMRES and FGMRES before a restart.",
    "algorithm": "AMG's kind: CLASSICAL (Ruge–Stüben: C/F splitting and interpolation) or"
                 " AGGREGATION.",
    "selector": "Classical: the C/F splitting (PMIS, HMIS, and jaxsolve's PMISC, PMIS in"
                " color); aggregation: the aggregate size (SIZE_2, SIZE_4, SIZE_8).",
    "jaxsolve_smoothed_aggregation": "jaxsolve's extension (AmgX has none): smooth the"
                                     " aggregation prolongation by one damped-Jacobi step.",
    "smoother": "The relaxation of every level but the coarsest: a solver name or a scope.",
    "presweeps": "Smoothing sweeps before the coarse-grid correction.",
    "postsweeps": "Smoothing sweeps after the coarse-grid correction. Where none of"
                  " `presweeps`, `postsweeps` and `cycle` is given, `solve` smooths twice"
                  " here in the AMG preconditioner of PBICGSTAB, GMRES or FGMRES on a real"
                  " matrix (a V(1, 2) cycle).",
    "cycle": "The cycle: V, W or F.",
    "max_levels": "Levels at most, the finest included.",
    "min_coarse_rows": "Stop coarsening at a level with this many rows or fewer.",
    "structure_reuse_levels": "0: each operator solved with concrete values gets an AMG"
                              " structure of its own (kept, and found again for values"
                              " with the same strong couplings); any other value keeps the"
                              " pattern's latest structure for new values (every level,"
                              " where AmgX keeps that many).",
    "coarse_solver": "The coarsest level's solver: DENSE_LU_SOLVER, or NOSOLVER (only"
                     " smoothed, `coarsest_sweeps` times).",
    "coarsest_sweeps": "Sweeps on the coarsest level when `coarse_solver` is NOSOLVER"
                       " (MULTICOLOR_GS: the first half forward, the rest backward).",
    "jaxsolve_hierarchy_precision": "jaxsolve's extension: SINGLE sets the hierarchy up and"
                                    " cycles it in single precision inside a solve of the"
                                    " matrix's precision (AmgX chooses by its mode).",
    "jaxsolve_setup_location": "jaxsolve's extension: DEVICE sets an unsmoothed aggregation"
                               " hierarchy up as JAX programs on the matrix's device (a"
                               " GPU's setup stays there); HOST finds its structure on the"
                               " CPU; AUTO is DEVICE for such a hierarchy of a matrix on a"
                               " GPU, else HOST.",
    "dense_lu_num_rows": ("With DENSE_LU_SOLVER as coarse solver, a value above 0 stops"
                          " coarsening there instead of at `min_coarse_rows` (0: off).", 0),
    "interpolator": "Classical interpolation: D2 (distance two, extended+i) or D1 (modified"
                    " classical).",
    "strength": "Classical strength of connection: AHAT (the sign-aware classical measure)"
                " or ALL (every stored entry strong).",
    "strength_threshold": "θ of the strength measure: i depends strongly on j when"
                          " −a_ij ≥ θ max_k (−a_ik).",
    "max_row_sum": "A row whose |Σ_j a_ij| exceeds `max_row_sum`·|a_ii| depends on nothing.",
    "interp_max_elements": "Interpolation weights kept per row (−1 or 0: all).",
    "interp_truncation_factor": "Drop interpolation weights below this factor times the"
                                " row's largest (a factor in (0, 1) turns truncation on).",
    "aggressive_levels": "The first levels coarsened aggressively (A2 coarsening,"
                         " interpolated as `aggressive_interpolator` says).",
    "aggressive_interpolator": "The interpolation of aggressive levels: MULTIPASS (AmgX's),"
                               " or D2 / D1 in two stages, P = P1·P2 truncated (hypre's"
                               " two-stage extended+i / modified classical; AmgX applies"
                               " D2 or D1 once).",
    "relaxation_factor": "The damping ω of Jacobi-type and Gauss–Seidel smoothers. jaxsolve's"
                         " BLOCK_JACOBI estimates ω = 4/(3ρ(D⁻¹A)) when none is given"
                         " (AmgX: 0.9).",
    "chebyshev_polynomial_order": "The degree of CHEBYSHEV_POLY.",
    "symmetric_GS": "MULTICOLOR_GS sweeps the colors forward then backward (a symmetric"
                    " smoother, as PCG needs). With 0 (AmgX's default) an AMG smoother"
                    " sweeps forward before the coarse-grid correction and backward after"
                    " it, so the cycle is symmetric either way (AmgX sweeps forward in"
                    " both). A MULTICOLOR_GS that preconditions PCG defaults to 1.",
}

# AmgX's meaning of each key jaxsolve accepts only at AmgX's default value.
DEFAULT_ONLY_MEANINGS = {
    "gmres_krylov_dim": "GMRES's Krylov dimension (0: `gmres_n_restart`).",
    "dense_lu_max_rows": "The dense LU coarse solver's largest matrix (0: no limit).",
    "min_fine_rows": "Rows below which the finest level is not coarsened.",
    "coarsen_threshold": "Coarsening stops when a level keeps more than this share of rows.",
    "finest_sweeps": "Smoothing sweeps on the finest level (−1: `presweeps`/`postsweeps`).",
    "error_scaling": "Scale the coarse-grid correction (0: no).",
    "reuse_scale": "Reuse the correction's scale factor for this many cycles.",
    "scaling_smoother_steps": "Smoother steps of the scaled correction.",
    "intensive_smoothing": "Smooth more on some levels (0: no).",
    "handshaking_phases": "Matching phases of the aggregation's handshake.",
    "max_matching_iterations": "Rounds of the aggregation's matching.",
    "max_unassigned_percentage": "Unmatched rows the aggregation leaves before it stops.",
    "merge_singletons": "Merge unmatched rows into neighbouring aggregates (1: yes).",
    "rel_div_tolerance": "Stop as diverged when ‖r‖ grows by this factor (−1: never).",
    "scaling": "Scale the matrix before the solve (NONE).",
    "fine_smoother": "A different smoother on the finest level (none).",
    "coarse_smoother": "A different smoother on the coarse levels (none).",
    "aggressive_selector": "The selector of aggressive levels (DEFAULT: the level's own).",
}

# Keys whose accepted values are a table of the parser, by the table's name.
CHOICES = {"solver": "_SOLVERS", "preconditioner": "_PRECONDITIONERS",
           "convergence": "CONVERGENCE_TESTS", "norm": "NORMS",
           "smoother": "_RELAXATIONS", "coarse_solver": "_COARSE_SOLVERS",
           "interpolator": "_INTERPOLATORS", "strength": "_STRENGTHS",
           "aggressive_interpolator": "_AGGRESSIVE_INTERPOLATORS"}


def _config_module():
    return importlib.import_module("jaxsolve.sparse._config")


def _default(config: Any, key: str) -> str:
    for table in ("_SOLVER_DEFAULTS", "_AMG_DEFAULTS", "_RELAXATION_DEFAULTS"):
        defaults = getattr(config, table)
        if key in defaults:
            value = defaults[key]
            if key == "relaxation_factor":
                return f"estimated (BLOCK_JACOBI); `{value!r}` (others)"
            if key == "selector":
                return ", ".join(f"`{name}` ({algorithm.lower()})"
                                 for algorithm, name in config._DEFAULT_SELECTORS.items())
            if key == "preconditioner":
                return f"`{value}` (`max_iters` 1, `monitor_residual` 0)"
            return f"`{value!r}`".replace("'", "")
    if key == "selector":
        return ", ".join(f"`{name}` ({algorithm.lower()})"
                         for algorithm, name in config._DEFAULT_SELECTORS.items())
    meaning = MEANINGS[key]
    if isinstance(meaning, tuple):
        return f"`{meaning[1]!r}`"
    raise ValueError(f"docs/mkdocs_hooks.py: the parser has no default for {key!r}; give one in"
                     " MEANINGS as (meaning, default)")


def _accepted(config: Any, key: str) -> str:
    if key in CHOICES:
        return ", ".join(getattr(config, CHOICES[key]))
    if key == "selector":
        return "; ".join(f"{algorithm}: {', '.join(names)}"
                         for algorithm, names in config._SELECTORS.items())
    if key == "algorithm":
        return ", ".join(config._SELECTORS)
    return ""


def _scope(config: Any, key: str) -> str:
    if key in config._AMG_KEYS:
        return "AMG"
    if key in config._RELAXATION_KEYS:
        return "relaxation"
    if key in config._REPORTING_KEYS:
        return "reporting"
    if key in config._STOPPING_KEYS:
        return "stopping"
    return "solver"


def _check_coverage(config: Any) -> None:
    known, described = set(config._IMPLEMENTED_KEYS), set(MEANINGS)
    default_only, described_only = set(config._DEFAULT_ONLY_KEYS), set(DEFAULT_ONLY_MEANINGS)
    problems = [f"{sorted(known - described)} read by the parser but not described",
                f"{sorted(described - known)} described but not read by the parser",
                f"{sorted(default_only - described_only)} accepted at AmgX's default only"
                " but not described",
                f"{sorted(described_only - default_only)} described as default-only but"
                " not such"]
    problems = [p for p in problems if not p.startswith("[]")]
    if problems:
        raise ValueError("docs/mkdocs_hooks.py: the AmgX configuration reference is out of date: "
                         + "; ".join(problems))


def config_reference() -> str:
    """The Markdown of the reference: three tables, from the parser's own tables."""
    config = _config_module()
    _check_coverage(config)
    order = {"solver": 0, "stopping": 1, "reporting": 2, "AMG": 3, "relaxation": 4}
    keys = sorted(MEANINGS, key=lambda key: (order[_scope(config, key)], key.lower()))
    lines = ["## Keys jaxsolve reads", "",
             f"{len(keys)} keys. *Default* is jaxsolve's, for the outer solver's scope (a"
             " preconditioner scope: `AMG`, `max_iters` 1, `monitor_residual` 0).", "",
             "| key | kind | default | accepted | AmgX's meaning |", "|---|---|---|---|---|"]
    for key in keys:
        meaning = MEANINGS[key]
        meaning = meaning[0] if isinstance(meaning, tuple) else meaning
        lines.append(f"| `{key}` | {_scope(config, key)} | {_default(config, key)} |"
                     f" {_accepted(config, key)} | {meaning} |")
    lines += ["", "## Keys accepted only at AmgX's default", "",
              "These would change the solution and are not implemented: a configuration may"
              " name them only with AmgX's default value (which leaves them off); another"
              " value is refused with a clear error.", "",
              "| key | the value accepted | AmgX's meaning |", "|---|---|---|"]
    for key, value in sorted(config._DEFAULT_ONLY_KEYS.items(), key=lambda kv: kv[0].lower()):
        shown = "none (not accepted)" if value is None else f"`{value!r}`".replace("'", "")
        lines.append(f"| `{key}` | {shown} | {DEFAULT_ONLY_MEANINGS[key]} |")
    ignored = sorted(config._IGNORED_KEYS, key=str.lower)
    lines += ["", "## Keys accepted and ignored", "",
              f"{len(ignored)} AmgX keys cannot change the solution of a configuration"
              " jaxsolve accepts: printing and visualization, configuration structure,"
              " AmgX's memory pools, streams, MPI and consolidation, readers and writers, and"
              " the options of components jaxsolve refuses anyway. They are read and"
              " ignored:", "", ", ".join(f"`{key}`" for key in ignored), ""]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """MkDocs' hook: the reference in place of its marker."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, config_reference())
