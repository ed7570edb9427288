"""Differentiable sparse solvers for JAX (``jaxsolve.sparse``).

This distribution, ``jaxsolve-sparse``, is a jit-able algebraic multigrid (AMG) engine with
Krylov methods, configured in AmgX's vocabulary and differentiable through
:mod:`jaxsolve.autodiff`:

* `solve` (JAX-AMG's call shape): an AMG-preconditioned Krylov solve of a sparse system,
  under `jax.jit`, `jax.vmap` and `jax.grad` (implicit derivatives with respect to ``b``
  and to the matrix's values on its pattern; the rule is `jaxsolve.autodiff.linear_solve`'s,
  and ``_linear_solve.py`` here says what each path of `solve` hands it). The AMG structure is built on the host once
  per sparsity pattern and operator (its strong couplings) and cached (`cache_info`, `clear_cache`, `set_cache_size`); the
  numeric setup for new values runs inside the compiled program. `describe` shows the
  hierarchy and the memory it keeps, `memory_traffic_per_iteration` the bytes one
  iteration reads and writes (a measured solve's effective bandwidth).
* `make_preconditioner`: the same AMG (or a relaxation) as a jit-able `Preconditioner`
  for ``jax.scipy.sparse.linalg`` or this package's Krylov methods.
* `use_backend` (``"jaxsolve"`` or ``"amgx"``; `current_backend`, the environment variable
  ``JAXSOLVE_SPARSE_BACKEND``): the same `solve` computed by NVIDIA AmgX on a GPU, loaded at
  run time from ``AMGX_LIB`` (built by ``tools/dev amgx-build``), under `jax.jit`,
  `jax.vmap` and `jax.grad`, in the same setup cache.
* `CsrMatrix` / `as_csr`: a CSR matrix whose values are a differentiable leaf and whose
  pattern stays concrete under `jax.jit`, converted from dense arrays,
  `jax.experimental.sparse` BCOO/BCSR and any `scipy.sparse` matrix; `csr_matvec`, the
  native CSR product behind it, on raw ``(values, indices, indptr)`` arrays.
* Krylov methods as `lax.while_loop`s with static shapes: `cg`, `bicgstab`, `gmres`,
  `fgmres`, and the `stationary` iteration, each returning ``(x, info)`` with a `Status`
  (AmgX's numbering, alias `AMGXStatus`) and a `FailureReason`; `raise_on_failure` turns
  a failed `info` into a `SolveError`. `jacobi` is the simplest preconditioner.
* `enable_compilation_cache` (or the environment variable ``JAXSOLVE_COMPILATION_CACHE``,
  a directory or ``1``, read at import): JAX's persistent compilation cache, every program
  written, so that a new process's first solve loads the programs an earlier one compiled.
* `parse_amgx_config`: AmgX configurations (flat, nested ``config_version: 2``, JSON text or
  file) into a hashable `SolverConfig` tree with documented defaults.
* Matrix-free operators: `solve` and `make_preconditioner` also take ``A`` as a function
  ``x ↦ A x``, whose matrix is recovered by `trace_sparsity` (the pattern, read from the
  jaxpr), `color_columns` (a distance-2 coloring) and one evaluation per color, on the
  device and differentiably; `cache_coloring` and `with_cache` precompute the structure
  for use under `jax.jit` (a `ColoringInfo`), or `pattern` declares it.
* Sharded solves on one host: `solve` takes a ``jaxsolve.sharding.ShardedCsrMatrix``
  (``shard_rows``) and a ``b`` split over the same mesh and runs under ``jax.shard_map``,
  with halo exchanges by ``ppermute`` and block-Jacobi AMG with a coarse space;
  `communication_per_iteration` counts the bytes a device exchanges per iteration.
* Distributed solves across MPI processes, in JAX-AMG's call shape:
  ``solve(A_local, b_local, comm=comm, nglobal=N, partition_info=(row_start, row_end))``
  runs the same algorithms with ``mpi4jax`` messages (the ``mpi`` extra), under `jax.jit`
  and `jax.grad`.
* `jaxsolve.sparse.matrices`: a gallery of test problems whose patterns stay static when
  their values are traced.
* JAX-AMG's whole public API, so that its programs run after changing only their imports
  (``jaxamg`` → ``jaxsolve.sparse``): its top-level names here (`finalize`,
  `cache_mpi_metadata`, `make_lineax_preconditioner`, `get_solver_cache_info`,
  `clear_solver_cache`, ...), ``info[key]`` with its keys (`SolveInfo`), and its modules
  `jaxsolve.sparse.matrices`, `jaxsolve.sparse.sparsity`, `jaxsolve.sparse.utils`,
  `jaxsolve.sparse.mpi_utils` and `jaxsolve.sparse.config`.
* `jaxsolve.sparse.plot`: residual histories and hierarchies drawn with matplotlib (the
  ``plot`` extra).
* A command line, ``python -m jaxsolve.sparse solve A.mtx`` (the ``jaxsolve-sparse``
  script): Matrix Market files solved and reported as AmgX's ``amgx_capi`` does.
"""

import importlib.metadata as _metadata

from . import config as config
from . import matrices as matrices
from . import mpi_utils as mpi_utils
from . import plot as plot
from . import sparsity as sparsity
from . import utils as utils
from ._config import DEFAULT_SOLVER_CONFIG as DEFAULT_SOLVER_CONFIG
from ._config import AMGConfig as AMGConfig
from ._config import RelaxationConfig as RelaxationConfig
from ._config import SolverConfig as SolverConfig
from ._config import parse_amgx_config as parse_amgx_config
from ._csr import CsrMatrix as CsrMatrix
from ._csr import as_csr as as_csr
from ._ffi_primitives import csr_matvec as csr_matvec
from ._sharded import communication_per_iteration as communication_per_iteration
from ._krylov import bicgstab as bicgstab
from ._krylov import cg as cg
from ._krylov import fgmres as fgmres
from ._krylov import gmres as gmres
from ._backend import current_backend as current_backend
from ._backend import use_backend as use_backend
from ._cache import CacheInfo as CacheInfo
from ._cache import cache_info as cache_info
from ._cache import clear_cache as clear_cache
from ._cache import finalize as finalize
from ._cache import set_cache_size as set_cache_size
from ._cache import solver_cache_info as get_solver_cache_info
from ._coloring import color_columns as color_columns
from . import _compilation_cache
from ._compilation_cache import enable_compilation_cache as enable_compilation_cache
from ._matrix_free import ColoringInfo as ColoringInfo
from ._matrix_free import cache_coloring as cache_coloring
from ._matrix_free import pattern as pattern
from ._matrix_free import with_cache as with_cache
from ._mpi_metadata import cache_mpi_metadata as cache_mpi_metadata
from ._sparsity_tracing import trace_sparsity as trace_sparsity
from ._krylov import stationary as stationary
from ._preconditioner import Preconditioner as Preconditioner
from ._jacobi import jacobi as jacobi
from ._preconditioner import make_preconditioner as make_preconditioner
from ._solve import solve as solve
from ._statistics import HierarchyStatistics as HierarchyStatistics
from ._statistics import describe as describe
from ._memory_traffic import MemoryTraffic as MemoryTraffic
from ._memory_traffic import memory_traffic_per_iteration as memory_traffic_per_iteration
from ._status import AMGXStatus as AMGXStatus
from ._status import FailureReason as FailureReason
from ._status import SolveError as SolveError
from ._status import SolveInfo as SolveInfo
from ._status import Status as Status
from ._status import raise_on_failure as raise_on_failure

# JAX-AMG's names, so that ported code runs unchanged.
clear_solver_cache = clear_cache



def __getattr__(name: str):
    """``make_lineax_preconditioner`` (JAX-AMG's top-level name; it lives in, and is
    documented with, `jaxsolve.sparse.lineax`), imported on first use: Lineax is an
    optional dependency."""
    if name == "make_lineax_preconditioner":
        from .lineax import make_lineax_preconditioner
        return make_lineax_preconditioner
    raise AttributeError(f"module 'jaxsolve.sparse' has no attribute {name!r}")


# ``JAXSOLVE_COMPILATION_CACHE=<dir>`` (or ``1``): JAX's persistent compilation cache from
# the first solve on.
_compilation_cache.enable_from_environment()

try:
    __version__ = _metadata.version("jaxsolve-sparse")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = [
    "AMGConfig",
    "AMGXStatus",
    "CacheInfo",
    "ColoringInfo",
    "CsrMatrix",
    "DEFAULT_SOLVER_CONFIG",
    "FailureReason",
    "HierarchyStatistics",
    "MemoryTraffic",
    "Preconditioner",
    "RelaxationConfig",
    "SolveError",
    "SolveInfo",
    "SolverConfig",
    "Status",
    "as_csr",
    "bicgstab",
    "cache_coloring",
    "cache_info",
    "cache_mpi_metadata",
    "cg",
    "clear_cache",
    "clear_solver_cache",
    "color_columns",
    "communication_per_iteration",
    "config",
    "csr_matvec",
    "current_backend",
    "describe",
    "enable_compilation_cache",
    "fgmres",
    "finalize",
    "get_solver_cache_info",
    "gmres",
    "jacobi",
    "make_preconditioner",
    "matrices",
    "memory_traffic_per_iteration",
    "mpi_utils",
    "parse_amgx_config",
    "pattern",
    "plot",
    "raise_on_failure",
    "set_cache_size",
    "solve",
    "sparsity",
    "stationary",
    "trace_sparsity",
    "use_backend",
    "utils",
    "with_cache",
]
