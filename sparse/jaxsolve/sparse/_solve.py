"""``solve``: an AMG-preconditioned Krylov solve in JAX-AMG's call shape, differentiable.

One call runs in three stages:

1. **Checks** (on concrete inputs, before any work): ``A`` square, ``b`` of matching
   shape, finite values, a diagonal where the smoother divides by it.
2. **Setup**: the AMG structure comes from the setup cache (:mod:`._cache`) or is built
   from the pattern (and from the values when they are concrete); the numbers are
   computed by jitted code, inside the caller's program when the values are traced.
3. **Solve**: the configured Krylov method (:mod:`._krylov`) preconditioned by the
   configured preconditioner, as a service of :func:`jaxsolve.autodiff.linear_solve`, which
   supplies the derivatives: forward and reverse mode by the implicit function theorem, at
   the cost of one more solve (with ``Aᵀ``'s hierarchy for a nonsymmetric reverse mode).
   **The derivative** of a solve is therefore found in :mod:`._linear_solve` (what every
   path hands to ``linear_solve``) and in ``jaxsolve.autodiff``'s ``linear_solve``
   (``autodiff/jaxsolve/autodiff/_linear_solve.py``: the JVP and transpose rules).

:func:`solve` is the one front of every path: it reads the configuration once, refuses the
keywords a path does not take, and hands the call to the single-device solve below, to the
one-host sharded solve (:mod:`._sharded`) or to the MPI solve (:mod:`._mpi`). The last two run
the same algorithms (:mod:`._partitioned`) and differ only in how their parts talk
(:mod:`._collectives`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from . import _blocks, _matrix_free
from ._amgx import solve_amgx
from ._backend import current_backend
from ._compiler_options import jit, staging
from ._config import SolverConfig, for_dtype, krylov_options, parse_amgx_config, with_overrides
from ._csr_arrays import CsrArrays
from ._default_method import (as_solved, broke_down, continuation_cycle, continued_by_bicgstab,
                              falls_back, hermitian_with_positive_diagonal, pcg_or_bicgstab)
from ._sharded import ShardedCsrMatrix, solve_sharded
from ._hierarchy import Hierarchy
from ._krylov import HERMITIAN_METHODS, KRYLOV_METHODS, check_max_iters, stationary
from ._linear_solve import differentiable_solve, service
from ._mpi import solve_mpi
from ._nullspace import minimum_norm, null_spaces, pseudo_inverse_services, singular_config
from ._preconditioner import make_precondition
from ._relaxation import RelaxationData, stored_diagonal
from ._size_classes import PADDING_DIAGONAL
from ._report import (Reports, log, log_timings, logged_solve_stats, report_solve,
                      reports_to_file, setup_progress, split_reports)
from ._setup import (System, checked_inputs, divides_by_diagonal, given_placement, is_concrete,
                     padded_solve, placed_as_given, raise_on_invalid_inputs, resized_rows)
from ._statistics import statistics
from ._status import FailureReason, SolveInfo, Status


def solve(
    A: Any,
    b: jax.Array,
    x0: jax.Array | None = None,
    config: Any = None,
    block_dim: int | None = None,  # this positional order is JAX-AMG's
    comm: Any = None,
    nglobal: Any = None,
    partition_info: Any = None,
    save_stats_file: Any = None,
    reuse_setup: bool = False,
    *,
    derivative: Literal["implicit", "adjoint"] = "implicit",
    near_nullspace: jax.Array | None = None,
    check: bool = True,
    nullspace: Any = None,
    transpose_nullspace: Any = None,
    **kwargs: Any,
) -> tuple[jax.Array, SolveInfo]:
    r"""Solves ``A x = b`` by an AMG-preconditioned Krylov method; differentiable.

    The method is configured in AmgX's vocabulary (:func:`parse_amgx_config`); by default
    a Krylov method preconditioned by one V-cycle of classical AMG (HMIS coarsening,
    distance-two interpolation; JAX-AMG's coarsening is PMIS), to a residual ``1e-6`` times
    the initial one, in at most 1000 iterations.  The Krylov method, where ``config`` names
    no ``solver``, is PCG for a matrix whose values are concrete, Hermitian (to 16 units in
    the last place of its largest entry) with a positive diagonal, and BiCGSTAB (PBICGSTAB)
    for every other; traced values (under ``jit``) take the method chosen for the latest
    concrete values on their pattern, BiCGSTAB if there were none.  PCG applies the cycle
    and ``A`` once an iteration, BiCGSTAB twice, in about twice as many iterations on such
    a matrix: as many cycles, each cheaper (V(1, 1) for V(1, 2)).  A
    Hermitian matrix with a positive diagonal may still be indefinite: where that PCG
    breaks down (``NOT_POSITIVE_DEFINITE``), the solve continues by BiCGSTAB from PCG's best
    iterate, to the same residual, in the iterations PCG left of ``max_iters``, and
    ``info.iterations`` counts both (see ``_default_method.py``); a PCG named in ``config``
    stops at its breakdown.  The V-cycle smooths once before its coarse-grid
    correction and, on a real matrix under BiCGSTAB, twice after it (once on a complex one,
    and under PCG; :attr:`AMGConfig.default_cycle`).  Aggregation AMG (``"algorithm": "AGGREGATION"``, jaxsolve's
    default before classical AMG arrived) sets up faster and cycles more cheaply, in more
    iterations.

    **Under jit.** ``A``'s sparsity pattern must be concrete: build ``A`` outside the
    compiled function (or close over it) and let only its values be traced, e.g.
    ``jax.jit(lambda v, b: solve(A.with_values(v), b))``.  The AMG structure
    (splittings or aggregates, patterns) is then taken from the setup cache — the one
    most recently used on the pattern, built from concrete values by an earlier call, or
    else one built from the pattern alone, with every stored
    entry counted as an equally strong coupling (classical AMG: the pattern's graph
    Laplacian; with ``block_dim``, only an unknown's couplings with unknowns of its own
    kind, as classical AMG's "unknown approach" for systems) — and the numeric setup
    (coarse operators, smoothers) runs
    inside the compiled program: new values on a fixed pattern never leave the device.
    Where couplings differ in strength within a kind, a structure from the pattern alone
    costs iterations, so solve once with concrete values on the pattern before tracing
    (``tools/bench/sparse_first_call.py --traced`` compares; Poisson and Q1 plane
    elasticity with ``block_dim=2`` at 100 k rows take the iterations of concrete values,
    the latter 14, where counting its couplings between components took 173).
    ``reuse_setup=True`` skips the numeric setup and reuses the numbers of the latest
    setup done with concrete values on this pattern (AmgX's "no resetup"), if there is
    one.

    **Concrete values** get a structure built for them, as AmgX's full setup rebuilds
    it: a different operator on a known pattern (other physics on one mesh) gets its
    own, kept in the setup cache next to the first (each with its index arrays on the
    device; :func:`set_cache_size` bounds them), and converges as in a fresh process.
    Values whose structure would not change find theirs again, with no host work and no
    compilation: the same operator, or, for classical AMG on a scalar system, any whose
    finest level has the same strong couplings and diagonal signs (a Newton or time
    step that keeps the problem's character); aggregation AMG and block systems match
    on the values themselves.  Deciding costs one pass over the values on the device
    (on the host for values on the CPU) and, in a checked solve, no wait of its own: the
    structure most recently used on the pattern is set up at once, and the solve's
    program, which compares the values' key with the structure's, says with its status
    whether it was theirs (if not, the solve runs again on theirs).  Traced values
    (under ``jit``) and ``reuse_setup=True`` keep the structure most recently used on the
    pattern instead, and so do concrete values under AmgX's ``structure_reuse_levels``
    (``-1``; jaxsolve keeps every level for any nonzero value), which rebuilds only the
    numbers.

    **Derivatives** flow to ``b`` and to ``A``'s values (cotangents on its pattern, never
    a dense ``n × n`` array); ``x0`` gets none.  ``derivative="implicit"`` supports forward
    and reverse mode at any order, ``"adjoint"`` reverse mode only; both cost one more
    solve per derivative direction, to the solve's tolerance.  For ``CG``/``PCG`` ``A`` is
    taken as Hermitian (its derivatives are projected accordingly); other methods solve
    with ``Aᵀ`` in reverse mode, with a hierarchy of its own (a second cache entry).

    **Batching.** ``jax.vmap`` over ``b`` (and ``x0``) or over ``A``'s values on one
    pattern runs one batched loop until every system has converged; ``b`` of shape
    ``(n, k)`` solves ``k`` right-hand sides the same way.

    **Singular systems** (a periodic or pure-Neumann Poisson matrix, whose null space is
    the constants): pass a basis of ``A``'s null space as ``nullspace`` (and of ``Aᵀ``'s
    as ``transpose_nullspace`` when ``A`` is not symmetric).  The solve then returns the
    minimum-norm least-squares solution ``x = A⁺ b``: ``b`` loses its part in
    ``null(Aᵀ)`` before the Krylov method starts, ``x`` its part in ``null(A)`` at the
    end, the dropped part ``‖P b‖ / ‖b‖`` is ``info.rhs_inconsistency`` (NaN for regular
    solves), and the coarsest AMG level is inverted by an SVD pseudo-inverse instead of
    LU.  Derivatives are the projected ones: ``b̄ = (Aᵀ)⁺ x̄``, and for the values the
    derivative along matrices that keep the null spaces (see ``_nullspace.py``).

    **Block systems** (elasticity: two or three displacements per mesh node): with
    ``block_dim=k`` the unknowns come ``k`` to a node, node-major (unknown ``k i + f`` is
    component ``f`` of node ``i``), as in a scipy BSR matrix of ``k × k`` blocks, whose
    block size is taken when ``block_dim`` is not given.  AMG then coarsens the node graph
    (blocks weighted by their Frobenius norms), so a node's ``k`` unknowns share their
    aggregate or C/F status, and block-Jacobi smoothers invert the ``k × k`` diagonal
    blocks; smoothed aggregation's default near-null space becomes the ``k`` per-component
    constants (pass rigid-body modes as ``near_nullspace``).  See ``_blocks.py``.

    **Failures** never pass silently: ``info.status`` is a :class:`Status` and
    ``info.failure_reason`` says why (:func:`raise_on_failure` turns both into an
    exception outside ``jit``).  Values with NaN/Inf or a zero diagonal end the solve
    before its first iteration, as ``FAILED`` with ``NONFINITE_MATRIX`` or
    ``ZERO_DIAGONAL`` and ``x`` NaN (and, when concrete and ``check``, raise).

    **AmgX backend.** Inside ``use_backend("amgx")`` (or with
    ``JAXSOLVE_SPARSE_BACKEND=amgx``) NVIDIA AmgX computes the solve on the GPU, from the
    same validated ``config``, under ``jit``, ``vmap`` (one AmgX solve per right-hand side)
    and ``grad``; ``x0``, ``reuse_setup``, ``derivative`` and ``check`` only, for real
    matrices. It needs an AmgX build (``AMGX_LIB``; see :func:`use_backend`).

    Args:
      A: the ``(n, n)`` matrix: a :class:`CsrMatrix`, a dense array, a
        ``jax.experimental.sparse`` BCOO/BCSR, any ``scipy.sparse`` matrix, or a
        matrix-free operator ``x ↦ A x``.  A sparse or dense matrix is converted by
        :func:`as_csr` on every call (a BCSR's or BCOO's pattern is remembered, see
        there): to solve with one matrix repeatedly, convert it once.  An operator's
        matrix is recovered by colored probing (:func:`cache_coloring`; its structure
        cached by the operator's jaxpr); inside ``jax.jit`` attach the structure with
        :func:`with_cache`.  Derivatives then flow on to what the operator closes
        over.  Or a ``jaxsolve.sharding.ShardedCsrMatrix`` (``shard_rows``), solved on
        all the devices of its mesh under ``jax.shard_map`` with ``b`` split like its
        rows (Krylov methods with block-Jacobi AMG and a coarse space; ``x0``,
        ``config``, ``reuse_setup`` and ``derivative`` only).
      b: ``(n,)`` or ``(n, k)`` right-hand side(s). The solve runs on the device of
        ``A``'s values (one device, unless ``A`` is sharded): a concrete ``b`` or ``x0``
        on other devices, e.g. split over a mesh, is moved there, and ``x`` is returned
        placed as ``b``.
      x0: initial guess of ``b``'s shape (zeros by default).
      config: an AmgX configuration (dict, JSON text or file path) or a
        :class:`SolverConfig`; None for the defaults.
      reuse_setup: reuse the latest concrete numeric setup on this pattern.
      derivative: ``"implicit"`` or ``"adjoint"``.
      near_nullspace: ``(n, k)`` vectors that the smoothed-aggregation prolongation
        reproduces exactly (e.g. elasticity's rigid-body modes); the constant by default.
      check: refuse concrete inputs with NaN/Inf or a zero diagonal with a
        ``ValueError`` (``False``: report them in ``info`` only; shapes and dtypes are
        always checked).  The solve's compiled program tests the values, as it does
        traced ones, and does no iteration when they fail; the error is raised when it
        returns, so the check costs no extra pass over ``A`` and no wait for the device.
        A first setup, whose host work reads the values, checks them before it starts.
      comm, nglobal, partition_info: a distributed solve across MPI processes (JAX-AMG's
        call shape): ``comm`` an mpi4py communicator, ``nglobal`` the global number of
        rows, ``partition_info`` ``(row_start, row_end)``; ``A`` and ``b`` are then this
        rank's rows (global column indices) and ``x`` comes back the same way, ``info``
        identical on every rank.  Every rank calls together; needs mpi4jax.  Krylov
        methods with block-Jacobi AMG and a coarse space, ``x0``, ``reuse_setup``,
        forward and reverse-mode derivatives (see ``_mpi.py``).
      nullspace: ``(n,)`` or ``(n, k)``, a basis of ``A``'s null space (JAX-AMG's
        meaning: exact null vectors of a singular ``A``, not ``near_nullspace``), e.g.
        :func:`matrices.constant_nullspace`; not differentiated.
      transpose_nullspace: a basis of ``Aᵀ``'s null space, ``(n,)`` or ``(n, m)``; each
        of the two defaults to the other (right for symmetric ``A``).  Concrete bases are
        checked against ``A`` (unless ``check=False``).
      block_dim: unknowns per node of a block system (JAX-AMG's keyword); ``A``'s rows
        must be a multiple of it.  None: a scipy BSR matrix's block size, else 1.
      save_stats_file: a path (JAX-AMG's keyword): the solve's AmgX reports
        (``print_solve_stats``, ``print_grid_stats``, switched on) are written to this
        file instead of the log, from rank 0 of a distributed solve; for a call outside
        ``jax.jit`` (inside, they are logged when the compiled program runs).
      **kwargs: AmgX keys of the outer solver's scope overriding ``config``'s, as
        JAX-AMG takes them: ``solve(A, b, config={"solver": "CG"}, max_iters=50)``.

    An ``A_local`` given JAX-AMG's MPI metadata by ``with_cache(A_local,
    mpi=cache_mpi_metadata(...))`` is solved across the ranks without ``comm``,
    ``nglobal`` and ``partition_info``, and with the metadata's configuration unless
    ``config`` is given.

    Returns:
      ``(x, info)``: the solution, of ``b``'s shape, and a :class:`SolveInfo`
      (``iterations``, ``residual``, ``status``, ``residual_history``,
      ``failure_reason``, ``rhs_inconsistency``), with a leading axis of ``k`` for
      ``b`` of shape ``(n, k)``.  ``residual_history`` holds ``max_iters + 1``
      entries with ``"store_res_history": 1`` in ``config`` (AmgX's key), else none
      (shape ``(0,)``).  On a failure ``x`` is never worse than ``x0``: the iterate
      with the smallest residual the method met (see :class:`Status`).

    Raises:
      TypeError: for unsupported types or non-float data.
      ValueError: for bad shapes, invalid CSR patterns, NaN/Inf or zero diagonals in
        concrete inputs, an invalid configuration, a JAX-AMG keyword not supported yet,
        a ``nullspace``/``transpose_nullspace`` of the wrong shape or not annihilated by
        ``A``/``Aᵀ``, a ``block_dim`` that does not divide ``A``'s rows or disagrees
        with a BSR ``A``'s block size, or a matrix-free ``A`` built from traced values
        without :func:`with_cache`.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import sparse
      >>> A = sparse.matrices.poisson_matrix(32)
      >>> b = jnp.ones(32 * 32)
      >>> x, info = sparse.solve(A, b)
      >>> sparse.Status(int(info.status)).name, int(info.iterations) <= 10
      ('SUCCESS', True)
      >>> bool(jnp.linalg.norm(A @ x - b) <= 1e-4 * jnp.linalg.norm(b))  # float32
      True

      Gradients flow through the solve, here to the matrix's stored values:

      >>> A = sparse.as_csr(A)
      >>> loss = lambda values: jnp.sum(sparse.solve(A.with_values(values), b)[0])
      >>> jax.jit(jax.grad(loss))(A.values).shape
      (4992,)
    """
    config = with_overrides(config, kwargs)
    mpi = getattr(getattr(A, "attachments", None), "mpi", None)  # cache_mpi_metadata's
    if mpi is not None and comm is None:
        comm, nglobal, partition_info = mpi["comm"], mpi["nglobal"], mpi["partition_info"]
        config = mpi["config"] if config is None else config
    attached, attached_transpose = _matrix_free.attached_null_spaces(A)  # with_cache's
    nullspace = attached if nullspace is None else nullspace
    transpose_nullspace = attached_transpose if transpose_nullspace is None else transpose_nullspace
    if save_stats_file is not None:  # the reports of this call, into the file
        reports = with_overrides(config, {"print_solve_stats": 1, "print_grid_stats": 1})
        with reports_to_file(save_stats_file, write=comm is None or comm.rank == 0):
            return jax.block_until_ready(solve(
                A, b, x0, reports, reuse_setup=reuse_setup, derivative=derivative,
                near_nullspace=near_nullspace, check=check, comm=comm, nglobal=nglobal,
                partition_info=partition_info, block_dim=block_dim, nullspace=nullspace,
                transpose_nullspace=transpose_nullspace))
    if derivative not in ("implicit", "adjoint"):
        raise ValueError(f"solve: derivative must be 'implicit' or 'adjoint', got {derivative!r}.")
    given, config = config, parse_amgx_config(config)  # once, for every path below
    blocks = None if block_dim in (None, 1) else block_dim
    if current_backend() == "amgx":  # NVIDIA AmgX computes it (use_backend; _amgx.py)
        _reject("by the AmgX backend (use_backend('jaxsolve') supports it)",
                near_nullspace=near_nullspace, comm=comm, nglobal=nglobal,
                partition_info=partition_info, block_dim=blocks, nullspace=nullspace,
                transpose_nullspace=transpose_nullspace)
        return solve_amgx(A, b, x0, config, given, reuse_setup=reuse_setup,
                          derivative=derivative, check=check)
    # The reporting keys leave the configuration the compiled programs depend on.
    config, reports = split_reports(config)
    if isinstance(A, ShardedCsrMatrix):
        _reject("with a sharded A (jaxsolve.sharding.ShardedCsrMatrix)",
                near_nullspace=near_nullspace, comm=comm, nglobal=nglobal,
                partition_info=partition_info, block_dim=blocks, nullspace=nullspace,
                transpose_nullspace=transpose_nullspace)
        return solve_sharded(A, b, x0, for_dtype(config, A.dtype), reports,
                             reuse_setup=reuse_setup, derivative=derivative, check=check)
    if comm is not None or nglobal is not None or partition_info is not None:
        _reject("with comm= (a distributed solve across MPI processes)",
                near_nullspace=near_nullspace, block_dim=blocks, nullspace=nullspace,
                transpose_nullspace=transpose_nullspace)
        return solve_mpi(A, b, x0, config, reports, comm=comm, nglobal=nglobal,
                         partition_info=partition_info, reuse_setup=reuse_setup,
                         derivative=derivative)
    block_dim = _blocks.block_dim_of("solve", A, block_dim)
    check_max_iters("solve", config.max_iters)
    if config.solver == "NOSOLVER":
        raise ValueError("solve: solver 'NOSOLVER' solves nothing; it is a preconditioner"
                         " choice (e.g. {'solver': 'PBICGSTAB', 'preconditioner': 'NOSOLVER'}).")
    placement = given_placement(b)  # x goes back there; b may move to A's device
    matrix, b, x0, near_nullspace = checked_inputs("solve", A, b, x0, near_nullspace, check,
                                                   values_checked_by_solve=True)
    config = as_solved("solve", config, matrix, block_dim)
    spaces = null_spaces("solve", matrix, nullspace, transpose_nullspace, check)
    if spaces is not None:  # singular: the coarsest AMG level gets a pseudo-inverse
        config = singular_config(config, spaces)
    # A checked solve of concrete inputs reads its status back; the values' key, which
    # chooses their structure, comes back with it (System.setup).
    reporting = check and spaces is None and not staging() and all(
        is_concrete(array) for array in (b, x0) if array is not None)
    system = System.for_matrix(matrix, config, near_nullspace, reuse_setup, check,
                               values_checked_by_solve=True, key_with_status=reporting)
    setup_start = time.perf_counter()
    with setup_progress(f"solve: the setup of {matrix.shape[0]} rows"):
        state = system.state()
        if reports.timings:
            jax.block_until_ready([leaf for leaf in jax.tree.leaves(state) if is_concrete(leaf)])
    setup_seconds = time.perf_counter() - setup_start
    _print_grid_stats(reports, system, matrix)
    # CG/PCG take A as Hermitian; so does every method for a real A declared symmetric by
    # with_cache (JAX-AMG's is_symmetric): reverse mode needs no Aᵀ hierarchy then.  A PCG
    # chosen by jaxsolve for traced values is not told (_default_method.py): their
    # derivative is the unprojected one.
    hermitian = (config.solver in HERMITIAN_METHODS and not (
        config.default_solver and not is_concrete(matrix.values))) or (
        _matrix_free.declared_symmetric(A) and not jnp.iscomplexobj(matrix.values))
    pattern = matrix._pattern.differentiable
    # An initial guess enters as the right-hand side of the correction, A δ = b − A x0,
    # δ from zero: the Krylov iterates are those from x0, and x0 gets no derivative.
    x0 = jax.lax.stop_gradient(x0)
    rhs = b if x0 is None else system.initial_residual(state, matrix.values, b, x0)
    # The setup's arrays travel with the values as the operator (arguments of the compiled
    # solve, not constants); only the values are differentiated.
    operator = (matrix.values, state)
    # Concrete arrays inside a caller's jit (closed over) still give a staged, traced solve.
    concrete = not staging() and all(is_concrete(leaf) for leaf in jax.tree.leaves((operator, rhs)))
    # A traced solve's table is logged by its program; a concrete one's when it returns.
    services = (_service(system, log_stats=reports.solve_stats and not concrete),
                None if hermitian else _service(system, transposed=True))
    if spaces is not None:  # A⁺ = P_N A⁻¹ P_W and its transpose (_nullspace.py)
        operator, *services = pseudo_inverse_services(spaces, operator, *services)
    solve_start = time.perf_counter()
    if concrete:
        # Nothing traces these arrays, so nothing can differentiate the solve: the
        # service alone (one compiled call) gives what the rule would, without the
        # Python work of setting the rule up on every call.
        if check and spaces is None:
            correction, info, reasons, matched = _service(system, report=True)(operator, rhs)
            if not system.confirm(matched):  # the structure was another key's: the values'
                operator = (matrix.values, system.state())
                correction, info, reasons, _ = _service(system, report=True)(operator, rhs)
            # The default's PCG ran alone (_solve_columns_reporting): its breakdowns go on here.
            if falls_back(system.config) and (broke := broke_down(np.asarray(reasons))).any():
                correction, info = _continued(system, operator, rhs, correction, info, broke)
        else:
            correction, info = services[0](operator, rhs)
            reasons = info.failure_reason
        if check:
            raise_on_invalid_inputs("solve", reasons, matrix, b, x0, config)
    else:
        correction, info = differentiable_solve(
            operator, rhs,
            solve=services[0],
            transpose_solve=services[1],
            matvec=lambda operator, x: pattern.matvec(operator[0], x),
            hermitian=hermitian,
            symmetrize=(lambda operator: (pattern.symmetrize(operator[0]), *operator[1:]))
            if hermitian else None,
            derivative=derivative,
        )
    info = report_solve(reports, info, logged_in_program=not concrete)
    if reports.timings:
        log_timings(reports.solver, setup_seconds, solve_start, correction, info)
    x = correction if x0 is None else x0 + correction
    if spaces is not None:
        x, info = minimum_norm(spaces, x, b, info)
    return placed_as_given(x, placement), info


def _print_grid_stats(reports: Reports, system: System, matrix) -> None:
    """AmgX's ``print_grid_stats``: the hierarchy's table, for a setup from concrete values."""
    if not reports.grid_stats:
        return
    structure, numbers = system.setup
    if numbers is not None:
        log(f"{reports.solver}: print_grid_stats\n"
            f"{statistics(structure, numbers, matrix.values)}")


def _reject(path: str, **given: Any) -> None:
    """Refuses the keywords of `solve` that ``path`` does not take (None: not given)."""
    for name, value in given.items():
        if value is not None:
            raise ValueError(f"solve: {name}= is not supported {path}.")


@functools.partial(jax.jit, static_argnums=0, static_argnames="fallback")
def _solve_columns(
    config: SolverConfig, matrix: CsrArrays, numbers: Hierarchy | RelaxationData | None,
    diagonal: jax.Array, rhs: jax.Array, key_check: tuple[jax.Array, jax.Array] | None = None,
    transpose_permutation: jax.Array | None = None, *, fallback: bool = True
) -> tuple[jax.Array, SolveInfo]:
    """Solves the columns of ``rhs`` (``(n, k)``) as one batched loop; returns ``x`` and
    per-column info. A vector ``rhs`` (``(n,)``) gives ``x`` ``(n,)`` and one info, with
    no operation outside this compiled call (each would be a dispatch and, on a GPU, a
    launch).

    ``numbers``: the preconditioner's (or stationary solver's) setup, from
    :meth:`System.operators`; ``key_check``: :attr:`SetupState.key_check`, two digests
    that must be equal for the solve to iterate (else ``x`` is NaN, and the solve is run
    again; see :meth:`System.confirm`).  ``fallback``: whether the default's PCG holds
    its BiCGSTAB continuation (:func:`pcg_or_bicgstab`); without, it stops at a breakdown,
    which the caller continues (:func:`_continued`).  ``transpose_permutation``:
    :attr:`SetupState.transpose_permutation`, for the default's PCG to test traced values."""
    invalid = _invalid_matrix(config, matrix, diagonal)
    if config.solver in KRYLOV_METHODS:
        method = KRYLOV_METHODS[config.solver]
        if fallback and falls_back(config):
            method = functools.partial(
                pcg_or_bicgstab, continuation=_continuation(config, matrix, numbers),
                hermitian=None if transpose_permutation is None
                else hermitian_with_positive_diagonal(matrix.values, transpose_permutation,
                                                      diagonal))
        precondition = make_precondition(config.preconditioner, matrix, numbers)
    else:  # AMG or a relaxation, iterated: x ← x + M⁻¹ (b − A x), one cycle or sweep each
        method = stationary
        precondition = make_precondition(config, matrix, numbers, applications=1)

    valid = (invalid == FailureReason.NONE) & _keys_match(key_check)

    def one(b):
        # On values the solve refuses, b = 0: the method stops before its first iteration.
        rhs = jnp.where(valid, b, 0)
        x, info = method(matrix.matvec, rhs, precondition=precondition,
                         **krylov_options(config))
        if config.print_solve_stats:  # a traced solve's table, logged once it is done
            logged_solve_stats(config.solver, info)
        return jnp.where(valid, x, jnp.nan), _with_failure(info, invalid)

    if rhs.ndim == 1:
        return one(rhs)
    if rhs.shape[1] == 1:  # a batch of one needs no masking of the loop's carry
        x, info = one(rhs[:, 0])
        return x[:, None], jax.tree.map(lambda leaf: leaf[None], info)
    return jax.vmap(one, in_axes=1, out_axes=(1, 0))(rhs)


@jit(static_argnums=0)  # called on concrete arrays only (solve's checked path)
def _solve_columns_reporting(
    config: SolverConfig, matrix: CsrArrays, numbers: Hierarchy | RelaxationData | None,
    diagonal: jax.Array, rhs: jax.Array, key_check: tuple[jax.Array, jax.Array] | None = None
) -> tuple[jax.Array, SolveInfo, jax.Array, jax.Array]:
    """:func:`_solve_columns`, and its ``info.failure_reason`` and whether the values' key
    matched (``key_check``; True without one) copied to host memory by the program itself,
    for a checked solve to read at once.  Read from the device after the program instead,
    each scalar costs a transfer of its own: 0.4 ms on an H200, where the whole solve of
    128³ unknowns takes 10 ms.

    The default's PCG stops at a breakdown here: the checked solve reads the reasons, and
    compiles and runs the BiCGSTAB continuation only after one (:func:`_continued`; see
    ``_default_method.py``), so that a solve that meets none compiles no BiCGSTAB."""
    x, info = _solve_columns(config, matrix, numbers, diagonal, rhs, key_check, fallback=False)
    return x, info, *jax.device_put((info.failure_reason, _keys_match(key_check)),
                                    jax.memory.Space.Host)


def _continued(system: System, operator: tuple, rhs: jax.Array, x: jax.Array,
               info: SolveInfo, broke: np.ndarray) -> tuple[jax.Array, SolveInfo]:
    """``x`` and ``info`` of the checked solve of ``rhs`` by the default's PCG alone, with
    the columns where it broke down (``broke``, on the host) continued by BiCGSTAB from
    its iterate (:func:`_continued_columns`), as :func:`pcg_or_bicgstab` continues them in
    the program of a traced solve."""
    values, state = operator
    matrix, numbers = system.operators(values, state)
    columns = None if rhs.ndim == 1 else np.flatnonzero(broke)
    y, info = _continued_columns(system.config, matrix, numbers,
                                 resized_rows(rhs, matrix.n_rows), resized_rows(x, matrix.n_rows),
                                 info, columns)
    return resized_rows(y, rhs.shape[0]), info


@jit(static_argnums=0)  # called on concrete arrays only (solve's checked path)
def _continued_columns(
    config: SolverConfig, matrix: CsrArrays, numbers: Hierarchy | RelaxationData | None,
    rhs: jax.Array, x: jax.Array, info: SolveInfo, columns: jax.Array | None
) -> tuple[jax.Array, SolveInfo]:
    """``x`` and ``info`` (:func:`_solve_columns`'s, of PCG alone) with columns
    ``columns`` of ``rhs`` (``(n, k)``; all of a vector ``rhs``) continued by BiCGSTAB
    from ``x`` (:func:`continued_by_bicgstab`) as one batched loop; the other columns
    keep PCG's ``x`` and ``info``."""
    precondition = _continuation(config, matrix, numbers)

    def one(b, x, info):
        return continued_by_bicgstab(matrix.matvec, b, x, info, precondition=precondition,
                                     **krylov_options(config))

    if rhs.ndim == 1:
        return one(rhs, x, info)
    y, more = jax.vmap(one, in_axes=(1, 1, 0), out_axes=(1, 0))(
        rhs[:, columns], x[:, columns], jax.tree.map(lambda leaf: leaf[columns], info))
    return x.at[:, columns].set(y), jax.tree.map(
        lambda leaf, continued: leaf.at[columns].set(continued), info, more)


def _continuation(config: SolverConfig, matrix: CsrArrays, numbers: Hierarchy
                  ) -> Callable[[jax.Array], jax.Array]:
    """The preconditioner of the BiCGSTAB that continues the default's PCG
    (:func:`continuation_cycle`)."""
    return make_precondition(config.preconditioner, matrix,
                             continuation_cycle(config, numbers, matrix.values.dtype))


def _keys_match(key_check: tuple[jax.Array, jax.Array] | None) -> jax.Array:
    """Whether the two digests of ``key_check`` are equal (True for None)."""
    if key_check is None:
        return jnp.ones((), bool)
    return jnp.all(key_check[0] == key_check[1])


def _invalid_matrix(config: SolverConfig, matrix: CsrArrays, diagonal: jax.Array
                    ) -> jax.Array:
    """The :class:`FailureReason` code of traced values no solve should run on, or NONE.

    ``diagonal``: the positions of the diagonal entries among the values (-1: none;
    :data:`~._size_classes.PADDING_DIAGONAL`: a padding row's, not checked)."""
    nonfinite = ~jnp.all(jnp.isfinite(matrix.values))
    zero_diagonal = jnp.zeros((), bool)
    if divides_by_diagonal(config):
        zero_diagonal = jnp.any((stored_diagonal(matrix.values, diagonal) == 0)
                                & (diagonal != PADDING_DIAGONAL))
    return jnp.where(nonfinite, jnp.int32(FailureReason.NONFINITE_MATRIX),
                     jnp.where(zero_diagonal, jnp.int32(FailureReason.ZERO_DIAGONAL),
                               jnp.int32(FailureReason.NONE)))


def _with_failure(info: SolveInfo, reason: jax.Array) -> SolveInfo:
    failed = reason != FailureReason.NONE
    return dataclasses.replace(
        info,
        status=jnp.where(failed, jnp.int32(Status.FAILED), info.status),
        failure_reason=jnp.where(failed, reason, info.failure_reason),
    )


def _service(system: System, *, transposed: bool = False, report: bool = False,
             log_stats: bool = False) -> Callable[[tuple, jax.Array], tuple]:
    """The solve service of ``system`` (or of its transpose; :func:`._linear_solve.service`):
    ``A⁻¹ rhs`` for ``rhs`` ``(n, m)``, or ``(n,)`` (see :func:`_solve_columns`).

    The operator is ``(A's values, A's setup state)``.  ``Aᵀ``'s system, values and setup
    are built only when reverse mode calls the transposed service.  With ``report``, the
    service also returns the failure reasons in host memory
    (:func:`_solve_columns_reporting`); with ``log_stats`` its program logs AmgX's
    ``print_solve_stats`` table (:func:`split_reports`).
    """
    if transposed:
        def run_transposed(values: jax.Array, state, rhs: jax.Array) -> tuple:
            transpose = system.transposed
            return padded_solve(_solve_columns, transpose.config,
                                transpose.operators(values[transpose.values_from], state),
                                state.diagonal, rhs, None, state.transpose_permutation)

        return service(run_transposed, own_numbers=lambda: system.transposed.state())
    solve_columns = _solve_columns_reporting if report else _solve_columns
    config = (dataclasses.replace(system.config, print_solve_stats=True) if log_stats
              else system.config)

    def run(values: jax.Array, state, rhs: jax.Array) -> tuple:
        # A reporting solve's values are concrete, tested on the host: no permutation.
        rest = ((state.key_check,) if report
                else (state.key_check, state.transpose_permutation))
        return padded_solve(solve_columns, config, system.operators(values, state),
                            state.diagonal, rhs, *rest)

    return service(run)
