"""Differentiable sparse solvers for JAX (``jaxsolve.sparse``).

This distribution, ``jaxsolve-sparse``, grows into a jit-able algebraic multigrid engine with
Krylov methods, configured in AmgX's vocabulary and differentiable through
:mod:`jaxsolve.autodiff`. What has landed so far is its foundation:

* `CsrMatrix` / `as_csr`: a CSR matrix whose values are a differentiable leaf and whose
  pattern stays concrete under `jax.jit` (the AMG setup is built from it), converted from
  dense arrays, `jax.experimental.sparse` BCOO/BCSR and any `scipy.sparse` matrix.
* Krylov methods as `lax.while_loop`s with static shapes: `cg`, `bicgstab`, `gmres`,
  `fgmres`, each returning ``(x, info)`` with a `Status` (AmgX's numbering, alias
  `AMGXStatus`), iteration count, final relative residual and residual history; `vmap` over
  right-hand sides is one batched loop. `jacobi` is the first preconditioner; the AMG cycle
  comes next. `raise_on_failure` turns a failed `info` into a `SolveError`.
* `parse_amgx_config`: AmgX configurations (flat, nested ``config_version: 2``, JSON text or
  file) into a hashable `SolverConfig` tree with documented defaults.
* `jaxsolve.sparse.matrices`: a gallery of test problems whose patterns stay static when
  their values are traced.

The public ``solve`` (JAX-AMG's call shape) lands with the AMG hierarchy.
"""

import importlib.metadata as _metadata

from . import matrices as matrices
from ._config import DEFAULT_SOLVER_CONFIG as DEFAULT_SOLVER_CONFIG
from ._config import AMGConfig as AMGConfig
from ._config import RelaxationConfig as RelaxationConfig
from ._config import SolverConfig as SolverConfig
from ._config import parse_amgx_config as parse_amgx_config
from ._csr import CsrMatrix as CsrMatrix
from ._csr import as_csr as as_csr
from ._krylov import bicgstab as bicgstab
from ._krylov import cg as cg
from ._krylov import fgmres as fgmres
from ._krylov import gmres as gmres
from ._preconditioner import jacobi as jacobi
from ._status import AMGXStatus as AMGXStatus
from ._status import FailureReason as FailureReason
from ._status import SolveError as SolveError
from ._status import SolveInfo as SolveInfo
from ._status import Status as Status
from ._status import raise_on_failure as raise_on_failure

try:
    __version__ = _metadata.version("jaxsolve-sparse")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = [
    "AMGConfig",
    "AMGXStatus",
    "CsrMatrix",
    "DEFAULT_SOLVER_CONFIG",
    "FailureReason",
    "RelaxationConfig",
    "SolveError",
    "SolveInfo",
    "SolverConfig",
    "Status",
    "as_csr",
    "bicgstab",
    "cg",
    "fgmres",
    "gmres",
    "jacobi",
    "matrices",
    "parse_amgx_config",
    "raise_on_failure",
]
