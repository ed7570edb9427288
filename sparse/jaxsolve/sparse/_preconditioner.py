"""The configured preconditioner of a matrix: an AMG cycle (the default) or a relaxation.

:func:`make_preconditioner` sets up the preconditioner a solver configuration names (its
``preconditioner`` scope, or a flat one such as ``{"solver": "AMG", "cycle": "W"}``): the AMG
hierarchy of :mod:`._hierarchy`, applied as :mod:`._cycle`'s cycles, or a relaxation's data
(:mod:`._relaxation`).  The result, a :class:`Preconditioner`, is a jit-able pytree
``r ↦ M⁻¹ r`` for ``jax.scipy.sparse.linalg`` and this package's Krylov methods;
:func:`make_precondition` is the same map for :func:`solve`'s own loop.  The simplest
preconditioner, the diagonal, is :func:`._jacobi.jacobi`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from . import _blocks, _matrix_free
from ._config import DEFAULT_SOLVER_CONFIG, SolverConfig, parse_amgx_config, with_overrides
from ._csr import as_csr
from ._csr_arrays import CsrArrays
from ._cycle import cycle
from ._hierarchy import Hierarchy
from ._relaxation import RelaxationData, relax_forward_backward
from ._setup import System, checked_inputs
from ._size_classes import pad_rows

_PRECONDITIONERS = ("AMG", "BLOCK_JACOBI", "JACOBI_L1", "CHEBYSHEV_POLY", "MULTICOLOR_GS",
                    "MULTICOLOR_DILU", "NOSOLVER")


@functools.partial(jax.tree_util.register_dataclass,
                   data_fields=["matrix", "hierarchy", "relaxation"], meta_fields=["config"])
@dataclasses.dataclass(frozen=True)
class Preconditioner:
    """``r ↦ M⁻¹ r`` for a configured preconditioner of a matrix: a pytree, jit-able.

    Built by :func:`make_preconditioner`.  Pass it as ``M=`` to
    ``jax.scipy.sparse.linalg.cg``/``bicgstab``/``gmres``, as ``precondition=`` to this
    package's Krylov methods, or into ``jax.jit``-compiled functions as an argument (its
    arrays are then arguments of the compiled program, not constants).

    Attributes:
      matrix: the matrix, on the device.
      hierarchy: its AMG hierarchy, or None for a relaxation or ``NOSOLVER``; its levels
        may be padded to size classes (the finest too: ``r`` is padded with zero rows to
        its rows, ``M⁻¹ r`` cut back).
      relaxation: a relaxation's data (inverse diagonal, spectral interval, colors),
        set up once, or None for AMG or ``NOSOLVER``.
      config: the preconditioner's configuration (static).
    """

    matrix: CsrArrays
    hierarchy: Hierarchy | None
    relaxation: RelaxationData | None
    config: SolverConfig

    def __call__(self, r: jax.Array) -> jax.Array:
        """``M⁻¹ r`` for ``r`` of shape ``(n,)`` or ``(n, k)``.

        A complex ``r`` for a real matrix is preconditioned part by part (``M⁻¹`` is real:
        ``M⁻¹ r = M⁻¹ Re r + i M⁻¹ Im r``).  ``M⁻¹`` is applied in the matrix's precision
        and returned in the common dtype of ``r`` and the matrix, as :func:`solve` promotes:
        a float32 preconditioner keeps a float64 Krylov loop (``jax.scipy``'s) float64.
        """
        r = jnp.asarray(r)
        if r.ndim not in (1, 2) or r.shape[0] != self.matrix.n_rows:
            raise ValueError(f"Preconditioner: r must have shape ({self.matrix.n_rows},) or"
                             f" ({self.matrix.n_rows}, k), got {r.shape}.")
        matrix = self.matrix
        if self.hierarchy is not None:  # its finest operator, padded to a size class
            matrix = (self.hierarchy.levels[0] if self.hierarchy.levels
                      else self.hierarchy.coarsest).a
        apply = make_precondition(self.config, matrix,
                                  self.hierarchy if self.relaxation is None else self.relaxation)
        if apply is None:
            return r
        dtype = self.matrix.values.dtype
        if jnp.iscomplexobj(r) and not jnp.issubdtype(dtype, jnp.complexfloating):
            parts = self(jnp.stack([jnp.real(r), jnp.imag(r)], axis=-1).reshape(r.shape[0], -1))
            parts = parts.reshape(*r.shape, 2)
            return jax.lax.complex(parts[..., 0], parts[..., 1])
        with jax.numpy_dtype_promotion("standard"):
            result_dtype = jnp.result_type(r, dtype)
        n = r.shape[0]
        r = pad_rows(r.astype(dtype), matrix.n_rows)
        z = apply(r) if r.ndim == 1 else jax.vmap(apply, in_axes=1, out_axes=1)(r)
        return (z if z.shape[0] == n else z[:n]).astype(result_dtype)

    @property
    def is_symmetric(self) -> bool:
        """Whether ``M⁻¹`` is symmetric for a symmetric matrix: a relaxation is, but for a
        forward-only ``MULTICOLOR_GS`` applied an odd number of times (its sweeps go half
        forward, half backward); an AMG cycle is with as many pre- as post-sweeps
        (post-smoothing sweeps backward, the adjoint of pre-smoothing), not an F-cycle,
        without a Krylov coarse solver, and with a coarsest level smoothed by a
        forward-only ``MULTICOLOR_GS`` an even number of times (half forward, half
        backward)."""
        amg = self.config.amg
        if amg is None:
            relaxation = self.config.relaxation
            return relaxation is None or relaxation.solver != "MULTICOLOR_GS" or (
                relaxation.symmetric_gs or self.config.max_iters % 2 == 0)
        forward_only = amg.smoother.solver == "MULTICOLOR_GS" and not amg.smoother.symmetric_gs
        return (amg.presweeps == amg.postsweeps and amg.cycle != "F"
                and amg.coarse_iterations is None  # a Krylov coarse solve is not linear
                and not (forward_only and amg.coarse_solver == "NOSOLVER"
                         and amg.coarsest_sweeps % 2))


def make_preconditioner(
    A: Any,
    config: Any = None,
    *,
    near_nullspace: jax.Array | None = None,
    check: bool = True,
    block_dim: int | None = None,
    comm: Any = None,
    nglobal: int | None = None,
    partition_info: tuple[int, int] | None = None,
    save_stats_file: Any = None,
    return_info: bool = False,
    **kwargs: Any,
) -> Preconditioner | Callable[[jax.Array], Any]:
    """A preconditioner ``M⁻¹ ≈ A⁻¹`` of the configured kind: one AMG V-cycle by default.

    ``config`` describes the preconditioner itself — a flat AmgX scope such as
    ``{"solver": "AMG", "selector": "HMIS", "cycle": "W"}`` (its ``max_iters``, 1 by
    default, counts cycles per application), read as PCG's preconditioner (so a
    ``MULTICOLOR_GS`` sweeps symmetrically unless it says ``symmetric_GS: 0``) — or a
    whole solver configuration, whose ``preconditioner`` is taken.  The setup is that of :func:`solve`: cached per pattern
    and operator, with the numbers computed inside the caller's program when ``A``'s values are traced.

    Args:
      A: the ``(n, n)`` matrix (any type :func:`solve` accepts; a matrix-free operator
        with its structure attached by :func:`with_cache`).
      config: the preconditioner's configuration, or None for the default.
      near_nullspace: ``(n, k)`` near-null space for smoothed aggregation.
      check: validate concrete inputs first.
      block_dim: unknowns per node of a block system, as for :func:`solve` (None: a
        scipy BSR matrix's block size, else 1).
      comm, nglobal, partition_info: JAX-AMG's MPI arguments, as for :func:`solve`
        (``A`` is then this rank's rows; or attach them with ``with_cache(A_local,
        mpi=cache_mpi_metadata(...))``): each application is then a distributed
        :func:`solve` with the preconditioner as its solver, every rank calling together
        (the distributed solve runs Krylov methods only, so that solver must be one:
        AMG or a relaxation is refused there with a clear error).
      save_stats_file: JAX-AMG's: each application is a :func:`solve` that writes its
        AmgX reports to this path, as :func:`solve`'s ``save_stats_file=`` does.
      return_info: JAX-AMG's: each application returns ``(x, info)``, the
        :class:`SolveInfo` of that solve.
      **kwargs: AmgX keys of the preconditioner's scope, overriding ``config``'s
        (JAX-AMG's ``make_preconditioner(A, max_iters=2)``).

    Returns:
      A :class:`Preconditioner`; with MPI arguments, ``save_stats_file`` or
      ``return_info``, a function
      ``r ↦ M⁻¹ r`` (or ``(M⁻¹ r, info)``) applying it through :func:`solve`.

    Raises:
      TypeError, ValueError: as :func:`solve` does for its inputs; ValueError also for a
        solver configuration without a preconditioner (``CG``, ``BICGSTAB``).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import sparse
      >>> A = sparse.matrices.poisson_matrix(32)
      >>> M = sparse.make_preconditioner(A)
      >>> b = jnp.ones(32 * 32)
      >>> x, _ = jax.scipy.sparse.linalg.cg(A, b, M=M, tol=1e-6)
      >>> bool(jnp.linalg.norm(A @ x - b) <= 1e-4 * jnp.linalg.norm(b))  # float32
      True
    """
    preconditioner = _preconditioner_config(with_overrides(config, kwargs))
    if (comm is not None or nglobal is not None or partition_info is not None or return_info
            or save_stats_file is not None
            or getattr(getattr(A, "attachments", None), "mpi", None) is not None):
        return functools.partial(_apply_by_solve, A, preconditioner, comm, nglobal,
                                 partition_info, save_stats_file, return_info)
    block_dim = _blocks.block_dim_of("make_preconditioner", A, block_dim)
    if _matrix_free.is_operator(A):  # its size and dtype are those of its attached structure
        if getattr(A, "shape", None) is None:
            raise ValueError("make_preconditioner: A is a matrix-free operator of unknown size;"
                             " pass with_cache(A, coloring=cache_coloring(A, n)).")
        probe = jnp.zeros(A.shape[0], A.dtype)
    else:  # a probe of A's dtype, which promotes nothing (a float32 A stays float32 with x64)
        A = as_csr(A, check=check)  # the TypeError solve gives for what is not a matrix
        probe = jnp.zeros(A.shape[0], A.dtype)
    matrix, _, _, near_nullspace = checked_inputs(
        "make_preconditioner", A, probe, None, near_nullspace, check)
    preconditioner = _blocks.block_config("make_preconditioner", preconditioner,
                                          matrix.shape[0], block_dim)
    # The system's setup needs a solver scope around the preconditioner; any Krylov one.
    scope = dataclasses.replace(DEFAULT_SOLVER_CONFIG, preconditioner=preconditioner)
    system = System.for_matrix(matrix, scope, near_nullspace, reuse_setup=False, check=check)
    # A relaxation's data is set up here once, not at every application inside a Krylov loop.
    state = system.state()
    _, numbers = system.operators(matrix.values, state)
    amg = preconditioner.solver == "AMG"
    # The solve's matrix is padded to a size class; the attribute is A's own.
    return Preconditioner(system.true_matrix(state, matrix.values),
                          numbers if amg else None, None if amg else numbers,
                          config=preconditioner)


def _apply_by_solve(A: Any, preconditioner: SolverConfig, comm: Any, nglobal: Any,
                    partition_info: Any, save_stats_file: Any, return_info: bool,
                    r: jax.Array) -> Any:
    """``M⁻¹ r`` as a solve whose solver is the preconditioner (JAX-AMG's way)."""
    from ._solve import solve  # solve builds on this module

    x, info = solve(A, r, config=preconditioner, comm=comm, nglobal=nglobal,
                    partition_info=partition_info, save_stats_file=save_stats_file)
    return (x, info) if return_info else x


def _preconditioner_config(config: Any) -> SolverConfig:
    if config is None:
        return DEFAULT_SOLVER_CONFIG.preconditioner
    if isinstance(config, Mapping) and "config_version" not in config and config.get(
            "solver", "AMG") in _PRECONDITIONERS:
        # A flat preconditioner scope: read with a preconditioner's defaults, one cycle or
        # sweep unless max_iters is given (as JAX-AMG's make_preconditioner sets it).
        return parse_amgx_config(
            {"solver": "PCG", "preconditioner": {"max_iters": 1, **config}}).preconditioner
    parsed = parse_amgx_config(config)
    if parsed.solver in _PRECONDITIONERS:
        return parsed
    if parsed.preconditioner is None:
        raise ValueError(
            f"make_preconditioner: solver {parsed.solver!r} has no preconditioner; give"
            " the preconditioner's own scope, e.g. {'solver': 'AMG'}."
        )
    return parsed.preconditioner


def make_precondition(
    config: SolverConfig | None, matrix: CsrArrays, numbers: Hierarchy | RelaxationData | None,
    applications: int | None = None,
) -> Callable[[jax.Array], jax.Array] | None:
    """``r ↦ M⁻¹ r`` for a preconditioner configuration (None: the identity).

    ``numbers`` is the setup's (:meth:`System.operators`): the AMG hierarchy, or the
    relaxation's data.  ``applications`` (default: the configuration's ``max_iters``, as
    AmgX applies a preconditioner) cycles, or sweeps of the relaxation, from zero (the
    first half of the sweeps forward, the rest backward: symmetric for an even number).
    """
    if config is None or config.solver == "NOSOLVER":
        return None
    applications = config.max_iters if applications is None else applications
    if config.solver == "AMG":
        def apply_cycles(r):
            x = cycle(numbers, r)
            for _ in range(applications - 1):
                x = x + cycle(numbers, matrix.residual(x, r))
            return x
        return apply_cycles
    return functools.partial(_sweeps, matrix, numbers, config, applications)


def _sweeps(matrix: CsrArrays, data: RelaxationData, config: SolverConfig, sweeps: int,
            r: jax.Array) -> jax.Array:
    return relax_forward_backward(matrix, data, config.relaxation, r, None, sweeps)
