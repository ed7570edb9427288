"""AmgX solver configurations, parsed into a frozen, typed tree.

jaxsolve is configured in NVIDIA AmgX's own vocabulary, so that a JSON file
written for AmgX (or a dict written for JAX-AMG, which passes it to AmgX)
keeps working.  :func:`parse_amgx_config` reads one and returns a
:class:`SolverConfig`: a tree of frozen dataclasses that is hashable, so it
can be a static argument of :func:`jax.jit` and part of a cache key, and that
:meth:`SolverConfig.to_amgx_dict` writes back out.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from ._krylov import ALT_REL_TOLERANCE, CONVERGENCE_TESTS, NORMS

_CALLER = "parse_amgx_config"

# -----------------------------------------------------------------------------
# AmgX's vocabulary (its src/core.cu registers these names) and the part of it
# jaxsolve implements.

_AMGX_SOLVERS = (
    "AMG", "CG", "PCG", "PCGF", "BICGSTAB", "PBICGSTAB", "GMRES", "FGMRES", "IDR", "IDRMSYNC",
    "CHEBYSHEV", "BLOCK_JACOBI", "JACOBI_L1", "CF_JACOBI", "GS", "FIXCOLOR_GS",
    "MULTICOLOR_GS", "MULTICOLOR_ILU", "MULTICOLOR_DILU", "POLYNOMIAL", "KPZ_POLYNOMIAL",
    "CHEBYSHEV_POLY", "KACZMARZ", "DENSE_LU_SOLVER", "NOSOLVER",
)
_PRECONDITIONED = ("PCG", "PBICGSTAB", "GMRES", "FGMRES")
# The Krylov methods that take A as nonsymmetric: on a real matrix, their AMG preconditioner
# smooths twice after the coarse-grid correction unless the cycle is given (for_dtype).
_NONSYMMETRIC_PRECONDITIONED = ("PBICGSTAB", "GMRES", "FGMRES")
_NONSYMMETRIC_POSTSWEEPS = 2
# The keys that choose an AMG cycle; a configuration that names none leaves it to jaxsolve.
_CYCLE_KEYS = frozenset({"presweeps", "postsweeps", "cycle"})
_RELAXATIONS = ("BLOCK_JACOBI", "JACOBI_L1", "CHEBYSHEV_POLY", "MULTICOLOR_GS", "MULTICOLOR_DILU")
_WEIGHTED_RELAXATIONS = ("BLOCK_JACOBI", "JACOBI_L1", "MULTICOLOR_GS", "MULTICOLOR_DILU")
# Relaxations whose relaxation_factor, when not given, comes from an estimate of ρ(D⁻¹A).
_ESTIMATED_RELAXATIONS = ("BLOCK_JACOBI",)
_SOLVERS = ("CG", "PCG", "BICGSTAB", "PBICGSTAB", "GMRES", "FGMRES", "AMG", *_RELAXATIONS,
            "NOSOLVER")
_PRECONDITIONERS = ("AMG", *_RELAXATIONS, "NOSOLVER")
# Krylov methods AmgX runs as coarse solvers; from a scope of their own they read only
# max_iters (AmgX's default scope: 100 iterations, monitor_residual 0).
_ITERATIVE_COARSE_SOLVERS = ("CG", "BICGSTAB", "GMRES")
_ITERATIVE_COARSE_ITERATIONS = 100
_COARSE_SOLVERS = ("DENSE_LU_SOLVER", "NOSOLVER", *_ITERATIVE_COARSE_SOLVERS)
_SOLVER_REASONS: dict[str, str] = {}
_SELECTORS = {"AGGREGATION": ("SIZE_2", "SIZE_4", "SIZE_8"),
              "CLASSICAL": ("PMIS", "HMIS", "PMISC")}
_AMGX_SELECTORS = ("SIZE_2", "SIZE_4", "SIZE_8", "MULTI_PAIRWISE", "DUMMY", "GEO",
                   "PARALLEL_GREEDY_SELECTOR", "PMIS", "AGGRESSIVE_PMIS", "HMIS",
                   "AGGRESSIVE_HMIS", "CR", "RS")
_DEFAULT_SELECTORS = {"AGGREGATION": "SIZE_4", "CLASSICAL": "HMIS"}
_INTERPOLATORS = ("D2", "D1")
# An aggressive level's: multipass, or two stages of D2 or D1 (see AMGConfig).
_AGGRESSIVE_INTERPOLATORS = ("MULTIPASS", "D2", "D1")
_STRENGTHS = ("AHAT", "ALL")
_NORM_REASONS = {
    "L1_SCALED": "(AmgX's parser reads it, its documentation does not list it: the L1 norm"
                 " divided by a factor of A, b and x0, on its GPU path only) is not"
                 " implemented",
}
_CONVERGENCE_ALIASES = {"RELATIVE_INI_CORE": "RELATIVE_INI", "RELATIVE_MAX_CORE": "RELATIVE_MAX"}

# Parameters jaxsolve reads, by the component that reads them.
_STOPPING_KEYS = frozenset({"max_iters", "tolerance", "convergence", "alt_rel_tolerance", "norm",
                            "monitor_residual"})
_REPORTING_KEYS = frozenset({"print_solve_stats", "print_grid_stats", "store_res_history",
                             "obtain_timings"})
# Classical AMG's parameters, read in any AMG scope (AmgX ignores them for aggregation).
_CLASSICAL_KEYS = ("interpolator", "strength", "strength_threshold", "max_row_sum",
                   "interp_max_elements", "interp_truncation_factor", "aggressive_levels",
                   "aggressive_interpolator")
_AMG_KEYS = frozenset({
    "algorithm", "selector", "jaxsolve_smoothed_aggregation", "smoother", "presweeps",
    "postsweeps", "cycle", "max_levels", "min_coarse_rows", "coarse_solver", "coarsest_sweeps",
    "jaxsolve_hierarchy_precision", "dense_lu_num_rows", "structure_reuse_levels",
    "jaxsolve_setup_location", *_CLASSICAL_KEYS,
})
_RELAXATION_KEYS = frozenset({"relaxation_factor", "chebyshev_polynomial_order", "symmetric_GS"})
# The components' parameters; a component ignores those of others (as AmgX does), e.g. a
# preconditioner given to plain CG, or a relaxation_factor beside an AMG solver.
_COMPONENT_KEYS = frozenset({"preconditioner", "gmres_n_restart", *_AMG_KEYS,
                             *_RELAXATION_KEYS})
_IMPLEMENTED_KEYS = {"solver"} | _STOPPING_KEYS | _REPORTING_KEYS | _COMPONENT_KEYS

# AmgX parameters that cannot change the solution of any configuration jaxsolve accepts:
# printing and timing; config structure; AmgX's memory pools, streams, MPI, file I/O and
# block-matrix options (jaxsolve takes the block size from solve's block_dim); and the options of components
# jaxsolve rejects (energy-minimising AMG, aggressive coarsening, the MULTI_PAIRWISE and DUMMY
# selectors, colouring-based and Gauss-Seidel-type smoothers, CHEBYSHEV, IDR, CG cycles);
# max_coarse_iters (jaxsolve's Krylov coarse solver
# runs for its own scope's max_iters).
_IGNORED_KEYS = frozenset({
    "print_config", "solver_verbose", "verbosity_level", "print_vis_data",
    "print_aggregation_info", "print_coloring_info", "spmm_verbose", "convergence_analysis",
    "config_version", "scope",
    "determinism_flag", "exception_handling", "fine_level_consolidation",
    "use_cuda_ipc_consolidation", "amg_consolidation_flag",
    "matrix_consolidation_lower_threshold", "matrix_consolidation_upper_threshold",
    "device_mem_pool_size", "device_consolidation_pool_size", "device_mem_pool_max_alloc_size",
    "device_alloc_scaling_factor", "device_alloc_scaling_threshold",
    "device_mem_pool_size_limit", "num_streams", "serialize_threads", "high_priority_stream",
    "communicator", "separation_interior", "separation_exterior", "min_rows_latency_hiding",
    "matrix_halo_exchange", "use_sum_stopping_criteria", "rhs_from_a", "complex_conversion",
    "matrix_writer", "block_format", "block_convert", "spmm_gmem_size", "spmm_no_sort",
    "spmm_max_attempts", "coarseAgenerator", "coarseAgenerator_coarse", "amg_host_levels_rows",
    "use_scalar_norm", "aggregation_edge_weight_component",
    "exact_coarse_solve", "energymin_interpolator", "energymin_selector",
    "affinity_iterations", "affinity_vectors", "weight_formula", "aggregation_passes",
    "filter_weights", "filter_weights_alpha", "full_ghost_level", "notay_weights",
    "ghost_offdiag_limit", "serial_matching", "modified_handshake", "aggregate_size",
    "coloring_level", "reorder_cols_by_color", "insert_diag_while_reordering",
    "matrix_coloring_scheme", "max_num_hash", "num_colors", "max_uncolored_percentage",
    "initial_color", "use_bsrxmv", "fine_levels", "coloring_try_remove_last_colors",
    "coloring_custom_arg", "weakness_bound", "late_rejection", "geometric_dim",
    "boundary_coloring", "halo_coloring", "ilu_sparsity_level", "jacobi_iters",
    "GS_L1_variant", "kpz_mu", "kpz_order", "kaczmarz_coloring_needed", "cf_smoothing_mode",
    "subspace_dim_s", "cycle_iters", "chebyshev_lambda_estimate_mode", "cheby_max_lambda",
    "cheby_min_lambda", "max_coarse_iters",
})
# AmgX parameters that would change the solution and that jaxsolve does not implement:
# accepted only at AmgX's default, which leaves them off (None: no value is accepted).
_DEFAULT_ONLY_KEYS: dict[str, Any] = {
    "gmres_krylov_dim": 0, "dense_lu_max_rows": 0,
    "min_fine_rows": 1, "coarsen_threshold": 1.0, "finest_sweeps": -1, "error_scaling": 0,
    "reuse_scale": 0, "scaling_smoother_steps": 2, "intensive_smoothing": 0,
    "handshaking_phases": 1, "max_matching_iterations": 15, "max_unassigned_percentage": 0.05,
    "merge_singletons": 1, "rel_div_tolerance": -1, "scaling": "NONE",
    "fine_smoother": None, "coarse_smoother": None,
    # Aggressive levels select with the level's selector.
    "aggressive_selector": "DEFAULT",
}
_AMGX_KEYS = _IMPLEMENTED_KEYS | _IGNORED_KEYS | set(_DEFAULT_ONLY_KEYS)

# jaxsolve's defaults, per role; AmgX's own defaults differ where noted in the docstring.
_SOLVER_DEFAULTS = {
    "solver": "PBICGSTAB", "preconditioner": "AMG", "max_iters": 1000, "tolerance": 1e-6,
    "convergence": "RELATIVE_INI", "alt_rel_tolerance": ALT_REL_TOLERANCE, "norm": "L2",
    "monitor_residual": 1,
    "print_solve_stats": 0, "print_grid_stats": 0, "store_res_history": 0, "obtain_timings": 0,
    "gmres_n_restart": 20,
}
_PRECONDITIONER_DEFAULTS = {**_SOLVER_DEFAULTS, "solver": "AMG", "max_iters": 1,
                            "monitor_residual": 0}
# AmgX's registered max_iters, which a preconditioner scope of its own reads when the key is
# not set there. JAX-AMG's configurations set 1 in an AMG scope (jaxsolve's default above) and
# nothing in a relaxation's, whose scope AmgX then runs for 100 sweeps an application.
_AMGX_MAX_ITERS = 100
_AMG_DEFAULTS = {
    "algorithm": "CLASSICAL", "jaxsolve_smoothed_aggregation": 0,
    "interpolator": "D2", "strength": "AHAT", "strength_threshold": 0.25, "max_row_sum": 1.1,
    "interp_max_elements": 6, "interp_truncation_factor": 1.1, "aggressive_levels": 0,
    "aggressive_interpolator": "MULTIPASS",
    "smoother": "BLOCK_JACOBI", "presweeps": 1, "postsweeps": 1, "cycle": "V",
    "max_levels": 100, "min_coarse_rows": 256, "coarse_solver": "DENSE_LU_SOLVER",
    "coarsest_sweeps": 2, "jaxsolve_hierarchy_precision": "DEFAULT",
    "structure_reuse_levels": 0, "jaxsolve_setup_location": "HOST",
}
_RELAXATION_DEFAULTS = {"relaxation_factor": 0.9, "chebyshev_polynomial_order": 5,
                        "symmetric_GS": 0}
# The symmetric_GS of a MULTICOLOR_GS preconditioning PCG, where its scope gives none: PCG
# needs a symmetric preconditioner, and a forward sweep's is not (an AMG smoother's cycle
# is symmetric either way: it post-smooths backward).
_SYMMETRIC_PRECONDITIONED_GS = 1


# -----------------------------------------------------------------------------
# Field checks, shared by the dataclasses (which run them) and the parser (whose
# errors name the AmgX key and scope instead of the class).


def _did_you_mean(word: str, candidates: Collection[str]) -> str:
    matches = difflib.get_close_matches(word, sorted(candidates), n=3)
    if not matches:
        return ""
    quoted = [repr(match) for match in matches]
    listed = " or ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
    return f" (did you mean {listed}?)"


def _check_choice(
    key: str,
    value: object,
    supported: Sequence[str],
    known: Collection[str],
    reasons: Mapping[str, str] | None = None,
) -> None:
    """Raises unless ``value`` is one of ``supported``, saying why not and what is."""
    if value in supported:
        return
    tail = f"; supported: {', '.join(supported)}."
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a name (str), got {value!r}{tail}")
    if value in (reasons or {}):
        raise ValueError(f"{key} {value!r} {reasons[value]}{tail}")
    if value in known:
        raise ValueError(f"{key} {value!r} is not implemented yet{tail}")
    raise ValueError(f"{key} {value!r} is not an AmgX {key}{_did_you_mean(value, known)}{tail}")


def _check_int(key: str, value: object, minimum: int, maximum: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key} must be an int, got {value!r}.")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{key} must be {bound}, got {value}.")


def _normalized_float(
    instance: object, key: str, holds: Callable[[float], bool], requirement: str
) -> None:
    """Checks the float field ``key`` (an int is taken as a float) and stores it as a float."""
    value = getattr(instance, key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{key} must be a float, got {value!r}.")
    if not (math.isfinite(value) and holds(value)):
        raise ValueError(f"{key} must be {requirement}, got {value}.")
    object.__setattr__(instance, key, float(value))


def _check_flag(key: str, value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{key} must be a bool, got {value!r}.")


def _check_set_iff(field: str, value: object, needed: bool, context: str) -> None:
    if needed and value is None:
        raise ValueError(f"{field} must be set for {context}.")
    if not needed and value is not None:
        raise ValueError(f"{field} must be None for {context}, got {value!r}.")


def _checked_init(instance: object, check: Callable[[], None]) -> None:
    """Runs ``check``, prefixing any error with the class name."""
    try:
        check()
    except (TypeError, ValueError) as error:
        raise type(error)(f"{type(instance).__name__}: {error}") from None


# -----------------------------------------------------------------------------
# The config tree


@dataclasses.dataclass(frozen=True, kw_only=True)
class RelaxationConfig:
    """A stationary relaxation: an AMG smoother, or a solver/preconditioner of its own.

    Each sweep updates ``x ← x + M⁻¹ (b - A x)``:

    * ``BLOCK_JACOBI``: damped Jacobi, ``M = D / ω`` with ``D = diag(A)``
      (AmgX's name; blocks are 1 × 1 for scalar systems).  It smooths only while
      ``ω ρ(D⁻¹A) < 2``.  Without a ``relaxation_factor`` (None, the default) ``ω =
      4 / (3 ρ)`` from a power-iteration estimate of ``ρ(D⁻¹A)``, level by level, in
      the numeric setup (PyAMG's choice): convergent on every symmetric positive definite
      matrix.  A fixed ``ω``, such as AmgX's default ``0.9``, diverges where ``ρ > 2 /
      ω`` (2D elasticity: ``ρ ≈ 2.33``; rotated anisotropic diffusion: ``2.55``), and PCG
      then stops with ``PRECONDITIONER_NOT_POSITIVE_DEFINITE``.
    * ``JACOBI_L1``: ℓ1-Jacobi, ``M = D_ℓ1 / ω`` with ``D_ℓ1[i] = Σ_j |A[i, j]|``,
      convergent for every SPD matrix without a damping estimate (AmgX itself
      applies ``ω`` only to a first sweep from ``x = 0``).
    * ``CHEBYSHEV_POLY``: a Chebyshev polynomial of degree ``chebyshev_polynomial_order``
      in ``D⁻¹A`` (AmgX's name) damping ``[λ/10, λ]``, ``λ`` 1.1 times the power
      iteration's estimate of ``ρ(D⁻¹A)`` from the numeric setup (see
      :mod:`._relaxation`).
    * ``MULTICOLOR_GS``: Gauss-Seidel over the colors of a distance-1 coloring of
      ``A``'s graph, ``x_c ← x_c + ω D_c⁻¹ (b - A x)_c`` for each color ``c`` in turn (the
      unknowns of one color are updated at once); with ``symmetric_gs`` the colors are
      then swept again in reverse order, so that ``M`` is symmetric, as PCG needs.  As
      an AMG smoother, a forward-only sweep post-smooths backward (colors in reverse
      order), so the cycle is symmetric either way.
    * ``MULTICOLOR_DILU``: ``M = (E + L) E⁻¹ (E + U)``, with ``L``/``U`` the entries of
      ``A`` from earlier/later colors and the diagonal ``E`` chosen so that
      ``diag(M) = diag(A)`` (AmgX's DILU); ``ω`` damps the update.  Symmetric for a
      symmetric ``A``.

    Attributes:
      solver: ``"BLOCK_JACOBI"``, ``"JACOBI_L1"``, ``"CHEBYSHEV_POLY"``,
        ``"MULTICOLOR_GS"`` or ``"MULTICOLOR_DILU"``.
      relaxation_factor: damping ``ω`` in ``(0, 2]`` for all but CHEBYSHEV_POLY, else None;
        None for BLOCK_JACOBI too, which then estimates it from ``ρ(D⁻¹A)``.
      chebyshev_polynomial_order: degree in ``[1, 10]`` for CHEBYSHEV_POLY, else None.
      symmetric_gs: a forward and a backward sweep (AmgX's ``symmetric_GS``), for
        MULTICOLOR_GS only.
      block_dim: unknowns per node of the matrix a relaxation used as solver or
        preconditioner sweeps (no AmgX key: ``solve(..., block_dim=k)`` sets it; AmgX takes
        it from the matrix).  ``BLOCK_JACOBI`` then inverts the ``k × k`` diagonal blocks
        and ``JACOBI_L1`` adds to them each row's ``Σ |a_ij|`` outside its block; the other
        relaxations stay pointwise.  An AMG smoother takes each level's from the hierarchy.

    Raises:
      TypeError, ValueError: if a field has the wrong type, is out of range, or
        is set for a relaxation that does not use it.

    Examples:
      >>> from jaxsolve.sparse import RelaxationConfig
      >>> RelaxationConfig(solver="CHEBYSHEV_POLY", relaxation_factor=None,
      ...                  chebyshev_polynomial_order=3)  # doctest: +NORMALIZE_WHITESPACE
      RelaxationConfig(solver='CHEBYSHEV_POLY', relaxation_factor=None, chebyshev_polynomial_order=3,
                       symmetric_gs=False, block_dim=1)
    """

    solver: str
    relaxation_factor: float | None
    chebyshev_polynomial_order: int | None
    symmetric_gs: bool = False
    block_dim: int = 1

    def __post_init__(self) -> None:
        _checked_init(self, self._check)

    def _check(self) -> None:
        _check_choice("solver", self.solver, _RELAXATIONS, _AMGX_SOLVERS, _SOLVER_REASONS)
        weighted = self.solver in _WEIGHTED_RELAXATIONS
        context = f"solver {self.solver!r}"
        if self.relaxation_factor is not None or self.solver not in _ESTIMATED_RELAXATIONS:
            _check_set_iff("relaxation_factor", self.relaxation_factor, weighted, context)
        if weighted and self.relaxation_factor is not None:
            _normalized_float(self, "relaxation_factor", lambda w: 0 < w <= 2, "in (0, 2]")
        _check_set_iff("chebyshev_polynomial_order", self.chebyshev_polynomial_order,
                       not weighted, context)
        if not weighted:
            _check_int("chebyshev_polynomial_order", self.chebyshev_polynomial_order, 1, 10)
        if not isinstance(self.symmetric_gs, bool):
            raise TypeError(f"symmetric_gs must be a bool, got {self.symmetric_gs!r}.")
        if self.symmetric_gs and self.solver != "MULTICOLOR_GS":
            raise ValueError(f"symmetric_gs applies to MULTICOLOR_GS only, not {context}.")
        _check_int("block_dim", self.block_dim, 1)

    def _amgx_keys(self) -> dict[str, Any]:
        keys = {"relaxation_factor": self.relaxation_factor,
                "chebyshev_polynomial_order": self.chebyshev_polynomial_order,
                "symmetric_GS": int(self.symmetric_gs) if self.solver == "MULTICOLOR_GS"
                else None}
        return {key: value for key, value in keys.items() if value is not None}


@dataclasses.dataclass(frozen=True, kw_only=True)
class AMGConfig:
    """An AMG hierarchy — classical or aggregation — and the cycle that applies it.

    **Classical AMG** (``algorithm="CLASSICAL"``, Ruge–Stüben; JAX-AMG's
    default) splits each level's unknowns into C points, which become the next
    level's unknowns, and F points, interpolated from them (see
    :mod:`jaxsolve.sparse._classical`):

    * *strength*: ``i`` strongly depends on ``j ≠ i`` (``strength="AHAT"``)
      when ``-σ_i a_ij ≥ θ max_{k≠i} (-σ_i a_ik) > 0``, ``σ_i`` the sign of
      ``a_ii`` and ``θ = strength_threshold``; a row with ``|Σ_j a_ij| >
      max_row_sum · |a_ii|`` depends on nothing.  ``"ALL"``: every stored
      off-diagonal entry is strong.
    * *splitting* (``selector``): ``PMIS`` (an independent set of C points in
      the symmetrized strength graph; every F point with a strong coupling is
      coupled to one), ``PMISC`` (PMIS in color, Alber and Olson's PMIS-c and
      PyAMG's ``PMISc``, not an AmgX selector: PMIS whose ties are broken by a
      graph coloring, so that structured grids split in Ruge–Stüben's regular
      pattern and not PMIS's sparser random one) or ``HMIS`` (Ruge–Stüben's
      first pass: every F point with a strong dependency depends on a C
      point; sequential).
    * *interpolation* (``interpolator``): ``D2`` (distance two, extended+i:
      an F point also interpolates from the C points of its strong F
      neighbours) or ``D1`` (Ruge–Stüben's modified classical interpolation,
      from its strong C neighbours).  Both reproduce constants on rows with
      zero row sum.  Truncation drops weights below
      ``interp_truncation_factor`` times the row's largest (when that factor
      is in ``(0, 1)``; AmgX's default 1.1 leaves it off), then keeps the
      ``interp_max_elements`` largest (when ``> 0``), and rescales the row to
      its former sum.
    * *aggressive coarsening* (``aggressive_levels``, AmgX's key): the first
      ``aggressive_levels`` levels run the selector twice, the second time on
      the distance-two strength graph of the first's C points (A2 coarsening:
      a 3D Poisson level keeps about 6% of its rows instead of a third),
      and interpolate by multipass interpolation, AmgX's ``MULTIPASS`` (from
      strong C neighbours, or through the strong neighbours interpolated in an
      earlier pass), truncated as above.  Fewer, smaller levels, at the price
      of more iterations.  With ``aggressive_interpolator`` ``D2`` or ``D1``
      an aggressive level instead coarsens in two ordinary stages, as hypre's
      two-stage interpolation (``agg_interp_type`` 1, extended+i, and 2): the
      selector and that interpolator on ``A`` give ``C1`` and ``P1``, then on
      ``A1 = P1ᴴ A P1`` a second splitting ``C2 ⊂ C1`` and ``P2``; the level's
      ``P = P1 P2``, truncated as above, and its coarse operator ``Pᴴ A P``
      (AmgX names the same interpolators, there applied once to the A2
      splitting). Its first coarse level is about as small as A2's (a quarter
      of an ordinary level's on 2D problems), and on the problems of
      ``tools/bench/sparse_suite.py --size medium`` (PMISC, BiCGSTAB) it takes
      13 iterations instead of multipass's 31 on jumping coefficients, 11
      instead of 39 on rotated anisotropic diffusion, 49 instead of 98 on an
      unstructured 2D mesh, but 98 instead of 36 on 3D elasticity (block
      systems) and 22 instead of 15 on 2D; it keeps more memory, the plans of
      ``A1`` that a numeric re-setup reads (6.1 × ``A`` against 3.4 on 3D
      Poisson), and its levels' numeric setups are not padded to size classes.
    * *indefinite problems*: coarsening stops at the first coarse operator whose
      diagonal is not positive where the finest one's is, if it has at most 8192 rows
      (it is then the coarsest, solved densely): a Helmholtz problem's coarse levels turn
      indefinite once they resolve the wave too coarsely, and no smoother damps them.

    On large 3D problems ``selector="PMISC"`` with ``aggressive_levels=1`` is
    the lean classical configuration: on the 128³ Poisson matrix (f64, PCG to
    1e-8, one H200 and its host's 16 cores; measured before the defaults became
    ``strength_threshold`` 0.25 and an estimated Jacobi damping, which on the CPU at
    48³ leave this configuration at 14 iterations) it takes 14 iterations and 8 ms
    after a first setup of 0.56–1.0 s (a tenth of PyAMG's smoothed aggregation
    setup or less), and the arrays the solver keeps come to 2.9 times the
    matrix's bytes (`describe`; operator complexity 1.32). PMIS with D2 (the
    default then) takes 16 iterations and 14 ms after a 1.5–1.8 s first setup and
    keeps 8.5 times (operator complexity 3.3); HMIS with one aggressive level also
    takes 14 iterations, in 9.2 ms, with 3.4 times (its first pass is
    sequential); PMIS with one takes 22.

    **Aggregation AMG** (``algorithm="AGGREGATION"``) matches strongly coupled
    unknowns into aggregates of about 2, 4 or 8 (``SIZE_2``, ``SIZE_4``,
    ``SIZE_8``: one, two or three rounds of pairwise matching), level after
    level, until a level has at most ``min_coarse_rows`` rows or there are
    ``max_levels`` levels.
    The prolongation ``P`` is piecewise constant on the aggregates (AmgX's
    unsmoothed aggregation) or, with ``smoothed_aggregation``, smoothed by one
    damped-Jacobi step, ``(I - ω D⁻¹A) P`` with ``ω = 4 / (3 ρ(D⁻¹A))`` as in
    PyAMG; the coarse operator is ``Pᵀ A P``.  Smoothed aggregation widens the
    coarse operators, so its coarse levels match in more rounds, until aggregates
    are about as large as the level's rows are long (at most three more rounds;
    see :mod:`jaxsolve.sparse._aggregation`).  A cycle smooths ``presweeps``
    times, corrects from the next level (once for ``V``, twice for ``W``, an
    F-cycle for ``F``) and smooths ``postsweeps`` times; there a ``MULTICOLOR_GS``
    visits the colors in reverse order, the adjoint of pre-smoothing, so that the
    cycle is symmetric, as PCG needs (AmgX sweeps forward in both, and PCG with its
    forward-only Gauss-Seidel did not converge in 500 iterations on the 3D Poisson
    problem).  The cycle is symmetric for a symmetric ``A`` with any smoother but
    only with ``presweeps == postsweeps``, not as an F-cycle, and not with a Krylov
    coarse solver (:attr:`~jaxsolve.sparse.Preconditioner.is_symmetric`): PCG
    accepts the others, as AmgX does, but may converge slowly or stall.  The coarsest level is
    solved by dense LU (``DENSE_LU_SOLVER``), by ``coarse_iterations`` iterations of
    a Krylov method (``CG``, ``BICGSTAB``, ``GMRES``; no residual test, as AmgX runs a
    coarse solver with ``monitor_residual: 0``) or, with ``NOSOLVER``, only smoothed
    ``coarsest_sweeps`` times, as AmgX does (a ``MULTICOLOR_GS`` the first half of
    them forward, the rest backward).

    With ``hierarchy_precision="SINGLE"`` the hierarchy is set up and cycled in
    single precision (float32, or complex64 for complex matrices) whatever the
    matrix's: a cycle rounds its input to single precision and its output back,
    so a double-precision Krylov method around it keeps its accuracy while the
    cycles read half the bytes (AmgX's mixed modes, such as ``dDFI``, do the
    same).  Expect a few more iterations on hard problems.  On an H200, the
    smoothed-aggregation PCG of ``tools/bench/sparse_poisson3d.py`` (3D Poisson,
    128³ unknowns, to 1e-8) takes 17 iterations either way and 7.9 ms per solve
    against 9.5 ms.

    Attributes:
      algorithm: ``"CLASSICAL"`` or ``"AGGREGATION"``.
      selector: ``"PMIS"``, ``"PMISC"`` or ``"HMIS"`` (classical); ``"SIZE_2"``, ``"SIZE_4"``
        or ``"SIZE_8"`` (aggregation).
      smoothed_aggregation: smooth the prolongation (AmgX key
        ``jaxsolve_smoothed_aggregation``; AmgX has no smoothed aggregation);
        False for classical AMG.
      interpolator: ``"D2"`` or ``"D1"`` for classical AMG, else None.
      strength: ``"AHAT"`` or ``"ALL"`` for classical AMG, else None.
      strength_threshold: ``θ`` in ``[0, 1]`` for classical AMG, else None.
      max_row_sum: ``> 0`` for classical AMG, else None.
      interp_max_elements: ``-1`` (or ``0``: no limit) or ``>= 1`` weights per
        row for classical AMG, else None.
      interp_truncation_factor: ``>= 0`` for classical AMG (truncation only
        for a factor in ``(0, 1)``), else None.
      aggressive_levels: ``>= 0`` levels, the finest first, coarsened aggressively,
        for classical AMG, else None.
      aggressive_interpolator: the aggressive levels' interpolation for classical AMG
        (else None): ``"MULTIPASS"`` (the default, AmgX's), or ``"D2"`` or ``"D1"``,
        two stages of that interpolation (above).
      structure_reuse_levels: AmgX's key: ``0`` (its default) builds a structure for
        each operator solved with concrete values (found again by values with the same
        key, :mod:`._structure_key`); any other value (``-1``: every level) keeps the
        pattern's latest structure for new values, as traced values and
        ``reuse_setup=True`` do.  jaxsolve keeps the whole structure also for a positive
        value, where AmgX keeps that many levels and rebuilds the coarser ones.
      setup_location: ``"HOST"`` (the default: aggregates, splittings and patterns found
        by native code on the CPU, the numbers on the device) or ``"DEVICE"`` (AmgX key
        ``jaxsolve_setup_location``, a jaxsolve extension): the whole setup as compiled
        array programs on the matrix's device, a GPU's without a copy to the host, for
        unsmoothed aggregation of a scalar system with a smoother that needs no
        coloring. Its parallel matching pairs differently from the host's sequential
        one: levels of similar sizes, similar iterations (see
        :mod:`jaxsolve.sparse._device_setup`). Its structures are kept per key of the
        values, as the host's: the order of the finest level's couplings
        (:func:`jaxsolve.sparse._device_setup.values_key`). ``"AUTO"``: ``"DEVICE"``
        where the matrix's values lie on a GPU (traced values: where JAX's default
        backend is one), the configuration is one it sets up and no ``near_nullspace``
        is given; ``"HOST"`` otherwise, so on a CPU.
      smoother: the relaxation applied on every level but the coarsest.
      presweeps, postsweeps: smoothing sweeps before and after the correction, ``>= 0``.
      cycle: ``"V"``, ``"W"`` or ``"F"``.
      default_cycle: True when the configuration leaves the cycle to jaxsolve, naming
        none of ``presweeps``, ``postsweeps`` and ``cycle`` (no AmgX key;
        :func:`parse_amgx_config` sets it): :func:`solve` of a real matrix by PBICGSTAB,
        GMRES or FGMRES then smooths twice after the correction, a V(1, 2) cycle (one
        more Jacobi sweep a level for fewer iterations on nonsymmetric problems; a complex
        matrix keeps one, which served Helmholtz problems better); every other use cycles
        as the three fields say.  Such a cycle is written out without those keys.
      max_levels: most levels, the finest included, ``>= 1``.
      min_coarse_rows: stop coarsening at this many rows or fewer, ``>= 1``.
      coarse_solver: ``"DENSE_LU_SOLVER"``, ``"NOSOLVER"``, or ``"CG"``,
        ``"BICGSTAB"``, ``"GMRES"`` (unpreconditioned, from the cycle's iterate).
      coarsest_sweeps: sweeps on the coarsest level for ``NOSOLVER``, else None.
      coarse_iterations: the iterations of a Krylov ``coarse_solver`` (``>= 1``; it
        stops earlier only on an exact solution or a breakdown), else None.
      hierarchy_precision: ``"DEFAULT"`` (the matrix's) or ``"SINGLE"`` (AmgX key
        ``jaxsolve_hierarchy_precision``, a jaxsolve extension).
      coarse_null_dimension: ``0``, or for a singular system (``solve(...,
        nullspace=N)`` sets it to ``N``'s columns; no AmgX key) the most null
        vectors the coarsest matrix can have: its dense inverse is then a
        pseudo-inverse that drops that many of its smallest singular values.  With
        ``0`` the setup still uses a pseudo-inverse when the finest matrix's rows sum to
        zero (``A 1 = 0``), dropping the singular values below ``√ε σ_max``, and at least one.
      block_dim: ``1``, or for a block system (``solve(..., block_dim=k)`` sets it; no
        AmgX key) the unknowns per node of the finest level: aggregation and classical
        AMG then coarsen its nodes (see :mod:`jaxsolve.sparse._blocks`) and block-Jacobi
        smoothers invert ``k × k`` diagonal blocks.

    Raises:
      TypeError, ValueError: if a field has the wrong type or value.

    Examples:
      >>> from jaxsolve.sparse import parse_amgx_config
      >>> amg = parse_amgx_config({"solver": "AMG"}).amg
      >>> amg.algorithm, amg.selector, amg.interpolator, amg.strength_threshold
      ('CLASSICAL', 'HMIS', 'D2', 0.25)
      >>> parse_amgx_config({"solver": "AMG", "algorithm": "AGGREGATION",
      ...                    "selector": "SIZE_8"}).amg.selector
      'SIZE_8'
    """

    algorithm: str
    selector: str
    smoothed_aggregation: bool
    smoother: RelaxationConfig
    presweeps: int
    postsweeps: int
    cycle: str
    default_cycle: bool = False
    max_levels: int
    min_coarse_rows: int
    coarse_solver: str
    coarsest_sweeps: int | None
    coarse_iterations: int | None = None
    hierarchy_precision: str = "DEFAULT"
    coarse_null_dimension: int = 0
    block_dim: int = 1
    interpolator: str | None = None
    strength: str | None = None
    strength_threshold: float | None = None
    max_row_sum: float | None = None
    interp_max_elements: int | None = None
    interp_truncation_factor: float | None = None
    aggressive_levels: int | None = None
    aggressive_interpolator: str | None = None
    structure_reuse_levels: int = 0
    setup_location: str = "HOST"

    def __post_init__(self) -> None:
        _checked_init(self, self._check)

    def _check(self) -> None:
        _check_choice("algorithm", self.algorithm, tuple(_SELECTORS), ("ENERGYMIN",))
        classical = self.algorithm == "CLASSICAL"
        other = "AGGREGATION" if classical else "CLASSICAL"
        aggressive = ("(aggressive coarsening on every level) is not implemented; set"
                      " aggressive_levels for aggressive coarsening on the first levels")
        _check_choice("selector", self.selector, _SELECTORS[self.algorithm], _AMGX_SELECTORS, {
            **{name: f"is a selector of algorithm {other!r}, not of {self.algorithm!r}"
               for name in _SELECTORS[other]},
            "AGGRESSIVE_PMIS": aggressive, "AGGRESSIVE_HMIS": aggressive})
        _check_flag("smoothed_aggregation", self.smoothed_aggregation)
        if classical and self.smoothed_aggregation:
            raise ValueError("smoothed_aggregation applies to algorithm 'AGGREGATION' only.")
        context = f"algorithm {self.algorithm!r}"
        if classical and self.aggressive_interpolator is None:  # AmgX's default
            object.__setattr__(self, "aggressive_interpolator", "MULTIPASS")
        for field in _CLASSICAL_KEYS:
            _check_set_iff(field, getattr(self, field), classical, context)
        if classical:
            _check_choice("interpolator", self.interpolator, _INTERPOLATORS,
                          ("MULTIPASS", "D1_NO_TRUNCATION"))
            _check_choice("strength", self.strength, _STRENGTHS, ("AFFINITY",))
            _normalized_float(self, "strength_threshold", lambda t: 0 <= t <= 1, "in [0, 1]")
            _normalized_float(self, "max_row_sum", lambda m: m > 0, "> 0")
            _check_int("interp_max_elements", self.interp_max_elements, -1)
            _normalized_float(self, "interp_truncation_factor", lambda f: f >= 0, ">= 0")
            _check_int("aggressive_levels", self.aggressive_levels, 0)
            _check_choice("aggressive_interpolator", self.aggressive_interpolator,
                          _AGGRESSIVE_INTERPOLATORS, ())
        if not isinstance(self.smoother, RelaxationConfig):
            raise TypeError(f"smoother must be a RelaxationConfig, got {self.smoother!r}.")
        _check_int("presweeps", self.presweeps, 0)
        _check_int("postsweeps", self.postsweeps, 0)
        _check_choice("cycle", self.cycle, ("V", "W", "F"), ("CG", "CGF"))
        _check_flag("default_cycle", self.default_cycle)
        _check_int("max_levels", self.max_levels, 1)
        _check_int("min_coarse_rows", self.min_coarse_rows, 1)
        _check_choice("coarse_solver", self.coarse_solver, _COARSE_SOLVERS, _AMGX_SOLVERS)
        smoothed_only = self.coarse_solver == "NOSOLVER"
        _check_set_iff("coarsest_sweeps", self.coarsest_sweeps, smoothed_only,
                       f"coarse_solver {self.coarse_solver!r}")
        if smoothed_only:
            _check_int("coarsest_sweeps", self.coarsest_sweeps, 0)
        iterative = self.coarse_solver in _ITERATIVE_COARSE_SOLVERS
        _check_set_iff("coarse_iterations", self.coarse_iterations, iterative,
                       f"coarse_solver {self.coarse_solver!r}")
        if iterative:
            _check_int("coarse_iterations", self.coarse_iterations, 1)
        _check_choice("hierarchy_precision", self.hierarchy_precision, ("DEFAULT", "SINGLE"), ())
        _check_int("coarse_null_dimension", self.coarse_null_dimension, 0)
        _check_int("block_dim", self.block_dim, 1)
        _check_int("structure_reuse_levels", self.structure_reuse_levels, -1)
        _check_choice("setup_location", self.setup_location, ("HOST", "DEVICE", "AUTO"), ())
        unsupported = self.not_set_up_on_device()
        if self.setup_location == "DEVICE" and unsupported:
            raise ValueError(
                "setup_location 'DEVICE' sets up unsmoothed aggregation AMG of a scalar"
                " system with a smoother that needs no coloring, not "
                f"{' and '.join(unsupported)}; use 'HOST'.")

    def not_set_up_on_device(self) -> tuple[str, ...]:
        """What of this configuration ``setup_location`` ``"DEVICE"`` does not set up
        (empty: it sets it up)."""
        unsupported = []
        if self.algorithm != "AGGREGATION":
            unsupported.append(f"algorithm {self.algorithm!r}")
        if self.smoothed_aggregation:
            unsupported.append("smoothed aggregation")
        if self.smoother.solver in ("MULTICOLOR_GS", "MULTICOLOR_DILU"):
            unsupported.append(f"smoother {self.smoother.solver!r}")
        if self.block_dim > 1:
            unsupported.append(f"a block system (block_dim {self.block_dim})")
        return tuple(unsupported)

    def _amgx_keys(self, scope: str) -> dict[str, Any]:
        keys = {
            "algorithm": self.algorithm, "selector": self.selector,
            "smoother": {"scope": f"{scope}_smoother", "solver": self.smoother.solver,
                         **self.smoother._amgx_keys()},
            "presweeps": self.presweeps, "postsweeps": self.postsweeps, "cycle": self.cycle,
            "max_levels": self.max_levels, "min_coarse_rows": self.min_coarse_rows,
            "coarse_solver": self.coarse_solver,
        }
        if self.default_cycle:  # left to jaxsolve: parsing leaves it to jaxsolve again
            for key in _CYCLE_KEYS:
                del keys[key]
        if self.coarsest_sweeps is not None:
            keys["coarsest_sweeps"] = self.coarsest_sweeps
        if self.coarse_iterations is not None:
            keys["coarse_solver"] = {"scope": f"{scope}_coarse", "solver": self.coarse_solver,
                                     "max_iters": self.coarse_iterations, "monitor_residual": 0}
        if self.smoothed_aggregation:
            keys["jaxsolve_smoothed_aggregation"] = 1
        if self.hierarchy_precision != "DEFAULT":
            keys["jaxsolve_hierarchy_precision"] = self.hierarchy_precision
        if self.structure_reuse_levels:
            keys["structure_reuse_levels"] = self.structure_reuse_levels
        if self.setup_location != "HOST":
            keys["jaxsolve_setup_location"] = self.setup_location
        if self.algorithm == "CLASSICAL":
            keys.update({key: getattr(self, key) for key in _CLASSICAL_KEYS})
        return keys


@dataclasses.dataclass(frozen=True, kw_only=True)
class SolverConfig:
    """One AmgX solver scope: the method, when it stops, and its parts.

    Built by :func:`parse_amgx_config`; frozen and hashable, so usable as a
    static argument of :func:`jax.jit` and in cache keys.  Fields that do not
    apply to ``solver`` are None, so equal configurations compare equal.

    Attributes:
      solver: ``"CG"``, ``"BICGSTAB"`` (unpreconditioned), ``"PCG"``,
        ``"PBICGSTAB"``, ``"GMRES"``, ``"FGMRES"`` (preconditioned), ``"AMG"``
        (stationary cycles), ``"BLOCK_JACOBI"``, ``"JACOBI_L1"``,
        ``"CHEBYSHEV_POLY"`` (stationary sweeps) or ``"NOSOLVER"`` (identity).
      max_iters: iterations (cycles, sweeps) at most, ``>= 1``.
      tolerance: convergence tolerance ``>= 0``.
      convergence: ``"RELATIVE_INI"`` (stop when ``‖r‖ <= tolerance ‖r₀‖``),
        ``"ABSOLUTE"`` (``‖r‖ <= tolerance``), ``"RELATIVE_MAX"`` (``‖r‖ <=
        tolerance · max ‖rⱼ‖``, the largest residual norm seen so far, ``‖r₀‖`` included)
        or ``"COMBINED_REL_INI_ABS"`` (``‖r‖ <= tolerance`` or ``‖r‖ <=
        alt_rel_tolerance ‖r₀‖``).
      norm: the norm ``‖·‖`` of the convergence test: ``"L2"``, ``"L1"`` (``Σ|rᵢ|``) or
        ``"LMAX"`` (``max |rᵢ|``); GMRES takes L2 only, as AmgX's does.
      alt_rel_tolerance: COMBINED_REL_INI_ABS's relative tolerance ``>= 0`` (AmgX's
        default: 1e-12), else None.
      monitor_residual: compute the residual and stop on convergence; when
        False, run exactly ``max_iters`` iterations (a preconditioner's cycle).
      print_solve_stats, print_grid_stats, store_res_history, obtain_timings:
        AmgX's reporting requests, honoured by the solve (the tables are logged on the
        ``jaxsolve.sparse`` logger; see :mod:`jaxsolve.sparse._report`).
      preconditioner: for PCG, PBICGSTAB, GMRES and FGMRES, the preconditioner
        (AMG, a relaxation or NOSOLVER), else None.
      gmres_n_restart: Krylov vectors before a restart for GMRES and FGMRES, else None.
      amg: the hierarchy and cycle for AMG, else None.
      relaxation: the relaxation's parameters for the three relaxations
        (``relaxation.solver == solver``), else None.
      default_solver: True when the configuration leaves the outer solver to jaxsolve,
        naming no ``solver`` in its outer scope (no AmgX key; :func:`parse_amgx_config`
        sets it).  ``solver`` is then ``"PBICGSTAB"``, which :func:`solve` turns into
        ``"PCG"`` for a Hermitian matrix with a positive diagonal and a symmetric AMG
        cycle (traced values tested in the solve's program), falling back to BiCGSTAB
        where that PCG breaks down (see :mod:`jaxsolve.sparse._default_method`).  Such a
        solver is written out without the key.

    Raises:
      TypeError, ValueError: if a field has the wrong type or value, is set
        although ``solver`` does not use it, or is None although it does.

    Examples:
      >>> import dataclasses, functools, jax
      >>> from jaxsolve.sparse import DEFAULT_SOLVER_CONFIG
      >>> config = dataclasses.replace(DEFAULT_SOLVER_CONFIG, tolerance=1e-10)
      >>> config.solver, config.tolerance, config.preconditioner.amg.cycle
      ('PBICGSTAB', 1e-10, 'V')
      >>> @functools.partial(jax.jit, static_argnames="config")
      ... def cycles(x, config):
      ...     return x * config.preconditioner.max_iters
      >>> cycles(2.0, config=config)
      Array(2., dtype=float32, weak_type=True)
    """

    solver: str
    max_iters: int
    tolerance: float
    convergence: str
    norm: str
    monitor_residual: bool
    print_solve_stats: bool
    print_grid_stats: bool
    store_res_history: bool
    obtain_timings: bool = False
    alt_rel_tolerance: float | None = None
    default_solver: bool = False
    preconditioner: SolverConfig | None
    gmres_n_restart: int | None
    amg: AMGConfig | None
    relaxation: RelaxationConfig | None

    def __post_init__(self) -> None:
        _checked_init(self, self._check)

    def _check(self) -> None:
        solver, context = self.solver, f"solver {self.solver!r}"
        _check_choice("solver", solver, _SOLVERS, _AMGX_SOLVERS, _SOLVER_REASONS)
        _check_int("max_iters", self.max_iters, 1)
        _normalized_float(self, "tolerance", lambda t: t >= 0, ">= 0")
        _check_choice("convergence", self.convergence, CONVERGENCE_TESTS,
                      (*CONVERGENCE_TESTS, *_CONVERGENCE_ALIASES))
        combined = self.convergence == "COMBINED_REL_INI_ABS"
        _check_set_iff("alt_rel_tolerance", self.alt_rel_tolerance, combined,
                       f"convergence {self.convergence!r}")
        if combined:
            _normalized_float(self, "alt_rel_tolerance", lambda t: t >= 0, ">= 0")
        _check_choice("norm", self.norm, NORMS, (*NORMS, *_NORM_REASONS), _NORM_REASONS)
        if solver == "GMRES" and self.norm != "L2":
            raise ValueError(
                f"norm {self.norm!r} is not supported by solver 'GMRES': AmgX's GMRES tests"
                " convergence in the L2 norm only (it refuses the others); use 'FGMRES',"
                " which takes L1 and LMAX too, or norm 'L2'.")
        for flag in ("monitor_residual", "default_solver", *sorted(_REPORTING_KEYS)):
            _check_flag(flag, getattr(self, flag))
        _check_set_iff("preconditioner", self.preconditioner, solver in _PRECONDITIONED, context)
        if self.preconditioner is not None:
            if not isinstance(self.preconditioner, SolverConfig):
                raise TypeError(
                    f"preconditioner must be a SolverConfig, got {self.preconditioner!r}.")
            _check_choice("preconditioner", self.preconditioner.solver, _PRECONDITIONERS,
                          _AMGX_SOLVERS, _SOLVER_REASONS)
        gmres = solver in ("GMRES", "FGMRES")
        _check_set_iff("gmres_n_restart", self.gmres_n_restart, gmres, context)
        if gmres:
            _check_int("gmres_n_restart", self.gmres_n_restart, 1)
        _check_set_iff("amg", self.amg, solver == "AMG", context)
        if self.amg is not None and not isinstance(self.amg, AMGConfig):
            raise TypeError(f"amg must be an AMGConfig, got {self.amg!r}.")
        _check_set_iff("relaxation", self.relaxation, solver in _RELAXATIONS, context)
        if self.relaxation is not None and (
            not isinstance(self.relaxation, RelaxationConfig)
            or self.relaxation.solver != solver
        ):
            raise ValueError(
                f"relaxation must be a RelaxationConfig for {solver!r}, got {self.relaxation!r}.")

    def to_amgx_dict(self) -> dict[str, Any]:
        """This configuration in AmgX's nested form (``config_version: 2``).

        Every parameter is written out, each component in its own scope
        (``main``, ``main_preconditioner``, ``..._smoother``), so AmgX reads
        the same settings: jaxsolve's defaults where they differ from AmgX's
        are explicit.  ``parse_amgx_config(config.to_amgx_dict()) == config``.
        The keys AmgX does not know, ``jaxsolve_smoothed_aggregation``,
        ``jaxsolve_hierarchy_precision`` and ``jaxsolve_setup_location``, are written only
        when set.  A BLOCK_JACOBI's
        estimated damping has no AmgX key: its ``relaxation_factor`` is left out, and
        AmgX takes its own default, 0.9; so are ``presweeps``, ``postsweeps`` and ``cycle``
        of a cycle left to jaxsolve (:attr:`AMGConfig.default_cycle`; AmgX's V(1, 1)), and
        the ``solver`` of an outer solver left to jaxsolve (:attr:`default_solver`).

        Returns:
          A JSON-serializable dict.

        Examples:
          >>> from jaxsolve.sparse import parse_amgx_config
          >>> amgx = parse_amgx_config({"solver": "FGMRES"}).to_amgx_dict()
          >>> amgx["solver"]["gmres_n_restart"], amgx["solver"]["preconditioner"]["scope"]
          (20, 'main_preconditioner')
        """
        return {"config_version": 2, "solver": self._scope("main")}

    def _scope(self, scope: str) -> dict[str, Any]:
        keys: dict[str, Any] = {
            "scope": scope, "solver": self.solver, "max_iters": self.max_iters,
            "tolerance": self.tolerance, "convergence": self.convergence, "norm": self.norm,
            "monitor_residual": int(self.monitor_residual),
            **{flag: int(getattr(self, flag)) for flag in sorted(_REPORTING_KEYS)},
        }
        if self.default_solver:  # left to jaxsolve: parsing leaves it to jaxsolve again
            del keys["solver"]
        if self.alt_rel_tolerance is not None:
            keys["alt_rel_tolerance"] = self.alt_rel_tolerance
        if self.preconditioner is not None:
            keys["preconditioner"] = self.preconditioner._scope(f"{scope}_preconditioner")
        if self.gmres_n_restart is not None:
            keys["gmres_n_restart"] = self.gmres_n_restart
        if self.amg is not None:
            keys.update(self.amg._amgx_keys(scope))
        if self.relaxation is not None:
            keys.update(self.relaxation._amgx_keys())
        return keys


# -----------------------------------------------------------------------------
# Parsing


def parse_amgx_config(
    config: Mapping[str, Any] | str | os.PathLike | SolverConfig | None = None,
) -> SolverConfig:
    """Reads an AmgX solver configuration into a :class:`SolverConfig`.

    **Forms.**  ``config`` is one of

    * ``None``: :data:`DEFAULT_SOLVER_CONFIG`;
    * a dict in AmgX's flat form, the outer solver's keys at the top (as
      JAX-AMG takes them): ``{"solver": "PBICGSTAB", "tolerance": 1e-8,
      "preconditioner": {"solver": "AMG", "cycle": "W"}}``;
    * a dict in AmgX's nested form, ``{"config_version": 2, "solver": {...}}``,
      where ``"solver"`` is the outer solver's scope (global AmgX settings
      such as ``determinism_flag`` may sit beside it);
    * a JSON string of either, or the path (``str`` or ``os.PathLike``) of an
      AmgX JSON config file;
    * a :class:`SolverConfig`, returned as is.

    ``preconditioner``, ``smoother`` and ``coarse_solver`` take a scope (a dict
    of that component's keys) or just a name.  As in AmgX, a named component
    reads its method parameters (the AMG, relaxation and Chebyshev keys below)
    from the enclosing scope, so ``{"solver": "AMG", "smoother": "BLOCK_JACOBI",
    "relaxation_factor": 0.75}`` damps the smoother.  Defaults are names too:
    ``{"solver": "PCG", "cycle": "W"}`` gives the default AMG preconditioner a
    W-cycle, as it would in AmgX.  Unlike AmgX, a named component does not
    share the enclosing scope's ``max_iters``/``tolerance``/... which stay
    with the enclosing solver; give the component a scope to set them.

    **Defaults.**  Only the keys given change; every other one takes
    jaxsolve's default for the role, listed here with AmgX's own default
    where that differs.  Outer solver: ``solver: PBICGSTAB`` (AmgX: AMG),
    ``max_iters: 1000`` (100), ``tolerance: 1e-6`` (1e-12), ``convergence:
    RELATIVE_INI`` (ABSOLUTE), ``norm: L2``, ``monitor_residual: 1`` (0),
    ``gmres_n_restart: 20``, ``preconditioner: AMG``.  Preconditioner:
    the same but ``solver: AMG``, ``max_iters: 1``, ``monitor_residual: 0``
    (one cycle per application; AmgX: 100, which JAX-AMG's default configuration sets
    to 1), except that a relaxation given a scope of its own, such as
    ``"preconditioner": {"solver": "MULTICOLOR_DILU"}``, runs AmgX's ``max_iters: 100``
    sweeps per application (AmgX reads its registered default in a scope that does not
    set the key, and JAX-AMG passes such a scope on unchanged); a named relaxation,
    ``"preconditioner": "MULTICOLOR_DILU"``, sweeps once.  AMG: ``algorithm: CLASSICAL`` (as AmgX and
    JAX-AMG; jaxsolve's default was AGGREGATION before classical AMG arrived),
    ``selector: HMIS`` for CLASSICAL (AmgX and JAX-AMG: PMIS, whose sparser
    random splitting took 45 BiCGSTAB iterations against HMIS's 8 on a 50 000-row
    unstructured P1 Laplacian, 27 against 13 on 3D elasticity, 23 against 8 on a 10⁶
    coefficient jump, at operator complexities 10–40 % lower) and ``SIZE_4`` for
    AGGREGATION (AmgX's aggregation default is SIZE_2, whose levels halve the
    unknowns: SIZE_4 needs half the levels, each of which is compiled code, for the same
    iterations on Poisson problems); for CLASSICAL ``interpolator: D2``,
    ``strength: AHAT``, ``strength_threshold: 0.25`` (AmgX's; JAX-AMG: 0.5,
    which on 3D Poisson 48³ takes 13 PCG iterations at operator complexity 3.2 against
    0.25's 9 at 2.7, and on a 10⁶ coefficient jump 42 against 12),
    ``max_row_sum: 1.1``, ``interp_max_elements: 6`` (AmgX: -1, no limit, which
    on 3D Poisson 48³ keeps 12.3 × A against six weights' 9.6 × A for the same 7 PCG
    iterations; four weights kept 7.9 × A but took 10 iterations, 3D elasticity 20
    against 17 and a 10⁶ coefficient jump 14 against 12; on none of
    ``tools/bench/sparse_suite.py``'s fifteen problems did six take more iterations
    than four, and the bytes the solve moved, summed over them, were the same; the host
    setup takes 30–55 % longer than four's on 3D Poisson 128³, where the solve moves 10 %
    fewer bytes, 9 iterations against 11.  With
    an aggressive first level, four serve as well: on 3D Poisson 128³, PMISC with one
    aggressive level takes 14 iterations either way, 1310 MB an iteration against
    six's 1339), ``interp_truncation_factor: 1.1``
    (off); ``smoother: BLOCK_JACOBI``, ``presweeps: 1``, ``postsweeps: 1``,
    ``cycle: V`` (where none of the three is given, the AMG preconditioner of PBICGSTAB,
    GMRES or FGMRES smooths twice after the correction when ``solve`` meets a real matrix,
    a V(1, 2) cycle: upwind convection–diffusion then takes 8 BiCGSTAB iterations against
    V(1, 1)'s 12; complex matrices, PCG and CG keep V(1, 1); see
    :attr:`AMGConfig.default_cycle`), ``max_levels: 100``, ``min_coarse_rows: 256`` (2; a dense
    inverse of up to 256 rows costs less than more levels), ``coarse_solver:
    DENSE_LU_SOLVER``, ``coarsest_sweeps: 2``; a Krylov coarse solver's ``max_iters:
    100`` (AmgX's).
    Relaxations: ``relaxation_factor``: for BLOCK_JACOBI none, ``ω = 4 / (3 ρ(D⁻¹A))``
    from an estimate in the numeric setup (AmgX and JAX-AMG: ``0.9``, which diverges
    where ``ρ(D⁻¹A) > 2 / 0.9``: elasticity, rotated anisotropy), 0.9 for the others;
    ``chebyshev_polynomial_order: 5``, ``symmetric_GS: 0`` (AmgX's), but 1 for a
    MULTICOLOR_GS that is PCG's preconditioner: PCG needs a symmetric one, and with a
    forward sweep it took 722 iterations on the 3D Poisson problem (20³) against 26, and
    did not converge in 1000 on 2D Poisson (64²) against 61.  An explicit
    ``relaxation_factor`` or ``symmetric_GS`` is always used as given.
    Reporting flags ``print_solve_stats``, ``print_grid_stats``,
    ``store_res_history``, ``obtain_timings``: 0.

    **Keys.**  Supported values:

    * ``solver``: CG, PCG, BICGSTAB, PBICGSTAB, GMRES, FGMRES, AMG, BLOCK_JACOBI,
      JACOBI_L1, CHEBYSHEV_POLY, MULTICOLOR_GS, MULTICOLOR_DILU, NOSOLVER;
      ``preconditioner``: AMG, BLOCK_JACOBI, JACOBI_L1, CHEBYSHEV_POLY,
      MULTICOLOR_GS, MULTICOLOR_DILU, NOSOLVER (for PCG, PBICGSTAB, GMRES, FGMRES
      only); ``smoother``: BLOCK_JACOBI, JACOBI_L1, CHEBYSHEV_POLY, MULTICOLOR_GS,
      MULTICOLOR_DILU (``symmetric_GS``: 0 or 1 for MULTICOLOR_GS);
      ``coarse_solver``: DENSE_LU_SOLVER, NOSOLVER, and CG, BICGSTAB, GMRES run for
      their scope's ``max_iters`` (``monitor_residual`` only at 0, AmgX's default).
    * ``algorithm``: CLASSICAL, AGGREGATION; ``selector``: PMIS, HMIS, and
      jaxsolve's PMISC (classical), SIZE_2, SIZE_4, SIZE_8 (aggregation); ``interpolator``:
      D2, D1; ``strength``: AHAT, ALL; ``strength_threshold``,
      ``max_row_sum``, ``interp_max_elements``, ``interp_truncation_factor``,
      ``aggressive_levels`` (read in every AMG scope, used by CLASSICAL;
      ``aggressive_selector`` only at DEFAULT, the level's selector;
      ``aggressive_interpolator``: MULTIPASS, and D2, D1 in two stages); ``cycle``: V,
      W, F; ``presweeps``, ``postsweeps``, ``max_levels``,
      ``min_coarse_rows``, ``coarsest_sweeps``; ``dense_lu_num_rows`` (AmgX's
      meaning: with coarse solver DENSE_LU_SOLVER, a value above 0 replaces
      ``min_coarse_rows``; JAX-AMG's default config sets it to 1).
    * ``convergence``: RELATIVE_INI, RELATIVE_MAX (also spelled RELATIVE_INI_CORE,
      RELATIVE_MAX_CORE: AmgX registers the same tests under both names), ABSOLUTE,
      COMBINED_REL_INI_ABS (with ``alt_rel_tolerance``, default 1e-12: stop at ``‖r‖ <=
      tolerance`` or ``‖r‖ <= alt_rel_tolerance ‖r₀‖``); ``norm``: L2, L1, LMAX (GMRES:
      L2 only, as in AmgX; AmgX's undocumented L1_SCALED is refused); ``max_iters``,
      ``tolerance``, ``monitor_residual``,
      ``gmres_n_restart``, ``relaxation_factor``, ``chebyshev_polynomial_order``.
    * ``print_solve_stats``, ``print_grid_stats``, ``store_res_history``,
      ``obtain_timings``: kept in the config for the solve to honour.
    * ``jaxsolve_smoothed_aggregation`` (0 or 1): a jaxsolve extension, AmgX
      has no smoothed aggregation; see :class:`AMGConfig`.
    * ``jaxsolve_hierarchy_precision`` (DEFAULT or SINGLE): a jaxsolve
      extension, an AMG hierarchy in single precision inside a solve of the
      matrix's (AmgX chooses precision by its mode, not its config); see
      :class:`AMGConfig`.
    * ``jaxsolve_setup_location`` (HOST, DEVICE or AUTO): a jaxsolve extension, the
      AMG setup on the host's CPU or as array programs on the matrix's device; see
      :class:`AMGConfig`.

    Accepted and ignored, as they cannot change the solution of a
    configuration jaxsolve accepts: ``config_version`` (2), ``scope``, the
    reporting keys ``print_config``, ``solver_verbose``,
    ``verbosity_level``, ``print_vis_data``, ``print_aggregation_info``,
    ``print_coloring_info``, ``spmm_verbose``, ``convergence_analysis``; AmgX's
    runtime settings (``determinism_flag``, ``communicator``, memory pools,
    streams, consolidation, readers and writers, ``coarseAgenerator``,
    ``use_scalar_norm``, ...); and the settings of components jaxsolve rejects
    anyway (energy-minimising AMG's keys, colouring, Gauss-Seidel, ILU, MULTI_PAIRWISE and CHEBYSHEV settings,
    ...).  In a smoother's scope, the stopping and reporting keys are ignored
    too: the cycle sets a smoother's sweeps, in AmgX as here.  So is a key that
    no component of its scope reads, as AmgX ignores it: a ``preconditioner``
    given to CG or BICGSTAB (JAX-AMG's README passes one to CG), a
    ``relaxation_factor`` beside a Krylov solver.

    Raises:
      ValueError: naming the scope, for a key that is not AmgX's (with the
        nearest AmgX keys), a key or value that jaxsolve does not implement yet
        (with what it supports; AmgX keys that would change the solution are
        accepted only at AmgX's default), an out-of-range value, invalid JSON, a missing file, or
        ``config_version`` other than 2.
      TypeError: if ``config`` or a value has the wrong type.

    Examples:
      >>> from jaxsolve.sparse import parse_amgx_config
      >>> config = parse_amgx_config(
      ...     {"solver": "PCG", "tolerance": 1e-8,
      ...      "preconditioner": {"solver": "AMG", "selector": "HMIS", "cycle": "W"}})
      >>> config.solver, config.tolerance, config.max_iters
      ('PCG', 1e-08, 1000)
      >>> amg = config.preconditioner.amg
      >>> amg.selector, amg.cycle, amg.smoother.relaxation_factor, amg.coarse_solver
      ('HMIS', 'W', None, 'DENSE_LU_SOLVER')
      >>> parse_amgx_config({"config_version": 2, "solver": {
      ...     "solver": "PCG", "tolerance": 1e-8,
      ...     "preconditioner": {"solver": "AMG", "selector": "HMIS", "cycle": "W"}}}) == config
      True
      >>> parse_amgx_config({"solver": "PCG", "tolerence": 1e-8})  # doctest: +NORMALIZE_WHITESPACE
      Traceback (most recent call last):
        ...
      ValueError: parse_amgx_config: in scope 'solver', 'tolerence' is not an AmgX parameter
      (did you mean 'tolerance', 'convergence' or 'rel_div_tolerance'?).
    """
    if config is None:
        return DEFAULT_SOLVER_CONFIG
    if isinstance(config, SolverConfig):
        return config
    if isinstance(config, (str, os.PathLike)):
        config = _load_json(config)
    if not isinstance(config, Mapping):
        raise TypeError(
            f"{_CALLER}: config must be a dict, a JSON string, a file path, a SolverConfig"
            f" or None, got {type(config).__name__}."
        )
    try:
        frozen = _frozen(config)
        hash(frozen)
    except TypeError:  # a value JSON would not hold; parsing says what is wrong with it
        return _parse_document(config)
    return _parse_frozen(frozen)


@functools.lru_cache(maxsize=64)
def _parse_frozen(frozen: tuple) -> SolverConfig:
    """:func:`_parse_document` of a config dict in its :func:`_frozen` form, remembered:
    a solve parses its config on every call, and the same dict comes again and again
    (0.1 ms a parse, 1% of a 10 ms GPU solve).  A config that fails is not remembered."""
    return _parse_document(_thawed(frozen))


def _frozen(value: Any) -> Any:
    """A hashable form of a config's JSON value that keeps each scalar's type (``1``,
    ``1.0`` and ``True`` are equal in Python, but not the same config value)."""
    if isinstance(value, Mapping):
        return (dict, tuple((key, _frozen(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_frozen(item) for item in value))
    return (type(value), value)


def _thawed(frozen: tuple) -> Any:
    kind, value = frozen
    if kind is dict:
        return {key: _thawed(item) for key, item in value}
    if kind in (list, tuple):
        return kind(_thawed(item) for item in value)
    return value


def _load_json(config: str | os.PathLike) -> Any:
    if isinstance(config, str) and config.lstrip().startswith("{"):
        source, text = "config", config
    else:
        if not os.path.isfile(config):
            raise ValueError(
                f"{_CALLER}: config {os.fspath(config)!r} is neither a JSON object (it does not"
                " start with '{') nor an existing file."
            )
        source = f"file {os.fspath(config)!r}"
        with open(config, encoding="utf-8") as file:
            text = file.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{_CALLER}: {source} is not valid JSON: {error}.") from None


def _parse_document(document: Mapping[str, Any]) -> SolverConfig:
    version = document.get("config_version", 2)
    if version != 2:
        raise ValueError(
            f"{_CALLER}: config_version must be 2 (AmgX's JSON form), got {version!r}; AmgX's"
            " config_version 1 'name=value' text is not supported."
        )
    main = document.get("solver")
    if isinstance(main, Mapping):  # nested form: the outer solver's keys are in its scope
        beside = {k: v for k, v in document.items() if k not in ("config_version", "solver")}
        for key in _scope_keys(beside, "top level"):
            raise ValueError(
                f"{_CALLER}: {key!r} is set at the top level of a nested config, where no"
                ' solver reads it; move it into the "solver" scope.'
            )
    else:
        main = {key: value for key, value in document.items() if key != "config_version"}
    keys = _scope_keys(main, "solver")
    return _solver_config(keys, "solver", "solver")


def _scope_keys(raw: object, path: str) -> dict[str, Any]:
    """The keys of one scope that jaxsolve reads, after checking all of them."""
    if not isinstance(raw, Mapping):
        raise TypeError(f"{_CALLER}: scope {path!r} must be a JSON object, got {raw!r}.")
    keys = {}
    for key, value in raw.items():
        if key in _IMPLEMENTED_KEYS:
            keys[key] = value
        elif key in _DEFAULT_ONLY_KEYS:
            default = _DEFAULT_ONLY_KEYS[key]
            if default is None or value != default:
                only = "" if default is None else f"; only AmgX's default {default!r} is accepted"
                raise ValueError(
                    f"{_CALLER}: in scope {path!r}, AmgX parameter {key!r} is not implemented"
                    f" yet{only}, got {value!r}."
                )
        elif key not in _IGNORED_KEYS:
            raise ValueError(
                f"{_CALLER}: in scope {path!r}, {key!r} is not an AmgX parameter"
                f"{_did_you_mean(key, _AMGX_KEYS)}."
            )
    return keys


def _build(cls: type, path: str, **fields: Any) -> Any:
    """``cls(**fields)``, with errors that name the scope instead of the class."""
    try:
        return cls(**fields)
    except (TypeError, ValueError) as error:
        message = str(error).removeprefix(f"{cls.__name__}: ")
        raise type(error)(f"{_CALLER}: in scope {path!r}, {message}") from None


def _flag(key: str, value: object, path: str) -> bool:
    if isinstance(value, int) and value in (0, 1):  # bool is an int
        return bool(value)
    raise ValueError(f"{_CALLER}: in scope {path!r}, {key} must be 0 or 1, got {value!r}.")


def _component(
    keys: Mapping[str, Any],
    key: str,
    path: str,
    default: str,
    parse: Callable[[dict[str, Any], str], Any],
) -> Any:
    """Parses the component ``keys[key]``: a scope of its own, or a name that reads its
    method parameters from ``keys`` (AmgX's shared scope)."""
    value = keys.get(key, default)
    child_path = f"{path}.{key}"
    if isinstance(value, Mapping):
        child_keys = {"solver": default, **_scope_keys(value, child_path)}
        return parse(child_keys, child_path)
    if not isinstance(value, str):
        raise TypeError(
            f"{_CALLER}: in scope {path!r}, {key} must be a solver name or a scope (a JSON"
            f" object), got {value!r}."
        )
    shared = {k: v for k, v in keys.items() if k in _AMG_KEYS | _RELAXATION_KEYS}
    return parse({**shared, "solver": value}, child_path)


def _solver_config(
    keys: Mapping[str, Any], path: str, role: str,
    symmetric_gs: int = _RELAXATION_DEFAULTS["symmetric_GS"],
) -> SolverConfig:
    """The solver of one scope, in the role "solver" (outer) or "preconditioner";
    ``symmetric_gs``: a MULTICOLOR_GS's ``symmetric_GS`` where the scope gives none.

    Keys that no component of the scope reads (a preconditioner for plain CG, a
    smoother's parameter beside a solver that has none) are ignored, as AmgX ignores
    them."""
    def get(key: str) -> Any:
        return keys.get(key, defaults[key])

    defaults = _SOLVER_DEFAULTS if role == "solver" else _PRECONDITIONER_DEFAULTS
    solver = get("solver")
    _check_choice_in_scope(role, solver, _SOLVERS if role == "solver" else _PRECONDITIONERS,
                           path)
    convergence = _CONVERGENCE_ALIASES.get(get("convergence"), get("convergence"))
    fields: dict[str, Any] = {
        "solver": solver, "max_iters": get("max_iters"), "tolerance": get("tolerance"),
        "convergence": convergence,
        # Read by COMBINED_REL_INI_ABS only; AmgX ignores it beside another test.
        "alt_rel_tolerance": (get("alt_rel_tolerance")
                              if convergence == "COMBINED_REL_INI_ABS" else None),
        "norm": get("norm"),
        **{flag: _flag(flag, get(flag), path)
           for flag in ("monitor_residual", *sorted(_REPORTING_KEYS))},
        "preconditioner": None, "gmres_n_restart": None, "amg": None, "relaxation": None,
        "default_solver": role == "solver" and "solver" not in keys,
    }
    if solver in _PRECONDITIONED:
        inner = _SYMMETRIC_PRECONDITIONED_GS if solver == "PCG" else symmetric_gs
        scoped = isinstance(keys.get("preconditioner"), Mapping)

        def preconditioner(child: dict[str, Any], child_path: str) -> SolverConfig:
            if scoped and child["solver"] in _RELAXATIONS:  # a scope of its own: AmgX's default
                child = {"max_iters": _AMGX_MAX_ITERS, **child}
            return _solver_config(child, child_path, "preconditioner", inner)

        fields["preconditioner"] = _component(
            keys, "preconditioner", path, defaults["preconditioner"], preconditioner)
    if solver in ("GMRES", "FGMRES"):
        fields["gmres_n_restart"] = get("gmres_n_restart")
    if solver == "AMG":
        fields["amg"] = _amg_config(keys, path)
    if solver in _RELAXATIONS:
        fields["relaxation"] = _relaxation_config(keys, path, solver, symmetric_gs)
    return _build(SolverConfig, path, **fields)


def _check_choice_in_scope(key: str, value: object, supported: Sequence[str], path: str) -> None:
    try:
        _check_choice(key, value, supported, _AMGX_SOLVERS, _SOLVER_REASONS)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{_CALLER}: in scope {path!r}, {error}") from None


def _amg_config(keys: Mapping[str, Any], path: str) -> AMGConfig:
    def get(key: str) -> Any:
        return keys.get(key, _AMG_DEFAULTS[key])

    algorithm = get("algorithm")
    classical = algorithm == "CLASSICAL"
    selector = keys.get("selector", _DEFAULT_SELECTORS.get(algorithm, "SIZE_4"))
    # Read in every AMG scope, as AmgX reads them; kept for classical AMG only.
    parameters = {key: get(key) for key in _CLASSICAL_KEYS}
    if not classical:
        parameters = dict.fromkeys(parameters)
    smoother = _component(keys, "smoother", path, _AMG_DEFAULTS["smoother"],
                                         _smoother_config)
    coarse_solver, coarse_iterations = _component(
        keys, "coarse_solver", path, _AMG_DEFAULTS["coarse_solver"], _coarse_solver)
    min_coarse_rows = get("min_coarse_rows")
    # AmgX: a dense LU coarse solver with dense_lu_num_rows > 0 stops coarsening there.
    dense_lu_rows = keys.get("dense_lu_num_rows", 0)
    _check_int_in_scope("dense_lu_num_rows", dense_lu_rows, path)
    if coarse_solver == "DENSE_LU_SOLVER" and dense_lu_rows > 0:
        min_coarse_rows = dense_lu_rows
    amg = _build(
        AMGConfig, path,
        algorithm=algorithm, selector=selector, **parameters,
        smoothed_aggregation=_flag("jaxsolve_smoothed_aggregation",
                                   get("jaxsolve_smoothed_aggregation"), path),
        smoother=smoother, presweeps=get("presweeps"), postsweeps=get("postsweeps"),
        cycle=get("cycle"), default_cycle=not _CYCLE_KEYS & keys.keys(),
        max_levels=get("max_levels"),
        min_coarse_rows=min_coarse_rows, coarse_solver=coarse_solver,
        coarsest_sweeps=get("coarsest_sweeps") if coarse_solver == "NOSOLVER" else None,
        coarse_iterations=coarse_iterations,
        hierarchy_precision=get("jaxsolve_hierarchy_precision"),
        structure_reuse_levels=get("structure_reuse_levels"),
        setup_location=get("jaxsolve_setup_location"),
    )
    return amg


def _check_int_in_scope(key: str, value: object, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{_CALLER}: in scope {path!r}, {key} must be an int, got {value!r}.")


def _relaxation_config(
    keys: Mapping[str, Any], path: str, solver: str,
    symmetric_gs: int = _RELAXATION_DEFAULTS["symmetric_GS"],
) -> RelaxationConfig:
    weighted = solver in _WEIGHTED_RELAXATIONS
    parameter = "relaxation_factor" if weighted else "chebyshev_polynomial_order"
    default = None if solver in _ESTIMATED_RELAXATIONS else _RELAXATION_DEFAULTS[parameter]
    value = keys.get(parameter, default)
    symmetric = solver == "MULTICOLOR_GS"
    relaxation = _build(
        RelaxationConfig, path, solver=solver,
        relaxation_factor=value if weighted else None,
        chebyshev_polynomial_order=None if weighted else value,
        symmetric_gs=_flag("symmetric_GS", keys.get("symmetric_GS", symmetric_gs),
                           path) if symmetric else False,
    )
    return relaxation


def _smoother_config(keys: Mapping[str, Any], path: str) -> RelaxationConfig:
    _check_choice_in_scope("smoother", keys["solver"], _RELAXATIONS, path)
    return _relaxation_config(keys, path, keys["solver"])


def _coarse_solver(keys: Mapping[str, Any], path: str) -> tuple[str, int | None]:
    """The coarse solver's name and, for a Krylov one, its iterations."""
    solver = keys["solver"]
    _check_choice_in_scope("coarse_solver", solver, _COARSE_SOLVERS, path)
    if solver not in _ITERATIVE_COARSE_SOLVERS:
        return solver, None
    if keys.get("monitor_residual", 0) != 0:
        raise ValueError(
            f"{_CALLER}: in scope {path!r}, a coarse solver's monitor_residual is implemented"
            f" only at AmgX's default 0 (a fixed number of iterations, max_iters), got"
            f" {keys['monitor_residual']!r}.")
    return solver, keys.get("max_iters", _ITERATIVE_COARSE_ITERATIONS)


def krylov_options(config: SolverConfig) -> dict[str, Any]:
    """The keyword arguments that ``config``'s scope gives the methods of
    :mod:`._krylov` (and their stationary iteration): the stopping test, the residual
    history and, for GMRES and FGMRES, the restart."""
    options = {"tolerance": config.tolerance, "max_iters": config.max_iters,
               "convergence": config.convergence, "norm": config.norm,
               "store_history": config.store_res_history}
    if config.alt_rel_tolerance is not None:
        options["alt_rel_tolerance"] = config.alt_rel_tolerance
    if config.gmres_n_restart is not None:
        options["restart"] = config.gmres_n_restart
    return options


def for_dtype(config: SolverConfig, dtype: Any) -> SolverConfig:
    """``config`` for a matrix of ``dtype``: where the configuration leaves the cycle to
    jaxsolve (:attr:`AMGConfig.default_cycle`), the AMG preconditioner of PBICGSTAB, GMRES
    or FGMRES smooths twice after its coarse-grid correction on a real matrix, a V(1, 2)
    cycle; else ``config`` itself.

    Why (``tools/bench/sparse_suite.py --size medium``, BiCGSTAB iterations to 1e-8,
    V(1, 1) → V(1, 2)): upwind convection–diffusion 12 → 8 and a recirculating flow
    11 → 8, against PyAMG's best 7 and 8; the symmetric problems take as many iterations
    or fewer (3D Poisson 6 → 5), for one more Jacobi sweep per level.  A complex matrix
    keeps one sweep: on the 2D Helmholtz problem the second took 149 iterations against
    128.  PCG and CG keep theirs too: their preconditioner must stay symmetric, as
    V(1, 1) is (an F-cycle, which met the same bound, is not, and visits the coarse
    levels far more often).

    Examples:
      >>> import numpy as np
      >>> from jaxsolve.sparse import parse_amgx_config
      >>> from jaxsolve.sparse._config import for_dtype
      >>> config = parse_amgx_config({"solver": "FGMRES"})
      >>> for_dtype(config, np.float64).preconditioner.amg.postsweeps
      2
      >>> for_dtype(config, np.complex128).preconditioner.amg.postsweeps
      1
      >>> given = parse_amgx_config({"solver": "FGMRES", "cycle": "V"})
      >>> for_dtype(given, np.float64).preconditioner.amg.postsweeps
      1
    """
    preconditioner = config.preconditioner
    amg = None if preconditioner is None else preconditioner.amg
    if (amg is None or not amg.default_cycle
            or config.solver not in _NONSYMMETRIC_PRECONDITIONED
            or np.issubdtype(dtype, np.complexfloating)):
        return config
    amg = dataclasses.replace(amg, postsweeps=_NONSYMMETRIC_POSTSWEEPS, default_cycle=False)
    return dataclasses.replace(
        config, preconditioner=dataclasses.replace(preconditioner, amg=amg))


def with_overrides(config: Any, overrides: Mapping[str, Any]) -> Any:
    """``config`` with ``overrides`` set in its outer solver's scope (JAX-AMG's keyword
    overrides, ``solve(A, b, config=..., max_iters=50)``), nested scopes merged key by key.

    ``config`` may take any form :func:`parse_amgx_config` takes; the result is a dict
    (``config`` itself when there is nothing to override).
    """
    if not overrides:
        return config
    if config is None:
        return dict(overrides)
    if not isinstance(config, Mapping):
        config = parse_amgx_config(config).to_amgx_dict()
    solver = config.get("solver")
    if isinstance(solver, Mapping):  # nested: the outer keys live in the solver scope
        return {**config, "solver": deep_merge(solver, overrides)}
    return deep_merge(config, overrides)


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``override`` merged in, nested dicts merged key by key
    (JAX-AMG's ``utils.deep_merge``).

    Examples:
      >>> from jaxsolve.sparse.utils import deep_merge
      >>> deep_merge({"solver": "PCG", "preconditioner": {"solver": "AMG", "cycle": "V"}},
      ...            {"preconditioner": {"cycle": "W"}})
      {'solver': 'PCG', 'preconditioner': {'solver': 'AMG', 'cycle': 'W'}}
    """
    merged = dict(base)
    for key, value in override.items():
        if isinstance(merged.get(key), Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


DEFAULT_SOLVER_CONFIG: SolverConfig = _parse_document({})
"""jaxsolve's default: PBICGSTAB to 1e-6 relative, one classical AMG V-cycle as preconditioner
(HMIS, D2 interpolation; JAX-AMG's selector is PMIS), which smooths twice after its
coarse-grid correction when ``solve`` meets a real matrix (the cycle is left to jaxsolve:
:attr:`AMGConfig.default_cycle`).  The solver is left to jaxsolve too
(:attr:`SolverConfig.default_solver`): ``solve`` runs PCG with a V(1, 1) cycle on a concrete
Hermitian matrix with a positive diagonal.

See :func:`parse_amgx_config` for every default value.
"""
