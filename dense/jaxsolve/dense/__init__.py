"""Distributed dense linear algebra for JAX, differentiable (``jaxsolve.dense``).

JAXMg's routines, with its names and argument order so that call sites port, for matrices
sharded over a 2D device mesh (``P('pr', 'pc')``) or a single axis (``P('x', None)``):

* linear systems: `potrs` (Cholesky, optionally with ``log det A``), `lu_solve` (LU),
  `least_squares` (QR), and `solve`/`slogdet` in ``jax.numpy.linalg``'s shape;
* decompositions: `syevd` (Hermitian eigen), `sygvd` (generalized Hermitian-definite eigen),
  `qr`, `gesvd` (SVD) and `polar`; `eigh_tridiagonal` (with eigenvectors, which JAX's lacks);
* factor once, use many times: `cho_factor` with `cho_solve`, `logdet` and `cho_inverse`;
  `lu_factor` with `lu_solve`. The factor (`DenseFactor`) is a pytree that the derivative rules
  reuse: each derivative is one more solve, never a second factorization.

Every routine is differentiable (forward and reverse mode, higher orders) through the implicit
rules of `jaxsolve.autodiff`, works under ``jax.jit``, and under ``jax.vmap`` (right-hand sides
become extra columns of one solve; stacks of matrices are batched). f32, f64, c64 and c128;
jaxsolve never changes ``jax_enable_x64``.

**Failures** are values, not exceptions: a matrix that is not positive definite (`potrs`) or
is singular (`lu_solve`) gives NaN outputs and, with ``return_status=True``, a `Status` holding
LAPACK's ``info``; NaN or Inf in an input is ``Status.NOT_FINITE`` on every routine;
`raise_on_failure` raises `SolverError` outside ``jax.jit``. Bad arguments
(shapes, dtypes, meshes, specs, ``T_A``) raise ``ValueError`` before any work.

**Placement.** ``mesh`` and ``matrix_specs`` (or JAXMg's alias ``in_specs``) are read off the
arrays' shardings when not given; ``b`` is split by rows like ``a`` or replicated. One rule
for the outputs: **what JAXMg returns, JAXMg's names return**; the solution ``x`` of `potrs`,
`lu_solve` and `least_squares` comes back replicated over the mesh (as JAXMg's ``potrs``
returns it, so that every process can read it), unless ``replicate_x=False``, which keeps it
split like ``b`` (no all-gather), as jaxsolve's own `cho_solve` and `solve` always do;
matrices (factors, eigenvectors, ``Q``, ``U``) come back split like ``a``, and eigenvalues,
singular values, log-determinants and statuses replicated. A `Status` behaves as the int32
array JAXMg returns as its status (``int()``, ``==``, ``block_until_ready``). Meshes come from `jaxsolve.sharding` (`~jaxsolve.sharding.make_grid_mesh`,
`~jaxsolve.sharding.row_mesh`), and several processes from its launcher. Meshes of ``Explicit``
axes (``jax.make_mesh``'s default) work too, inside and outside ``jax.jit``: outputs come back
typed on the caller's mesh, solutions split like ``b``, matrices like ``a``, eigenvalues and
log-determinants replicated (``jax.grad`` of Explicit-typed arrays wants ``jax.set_mesh``, as
everywhere in JAX).

**Backends.** Three compute the routines today. A matrix on **one CUDA GPU** (unsharded, or on
a mesh of one device) is computed by **cuSOLVER**, called directly through XLA FFI, in place:
with ``donate=True`` the factor or the eigenvectors take the matrix's buffer, so no second
``n × n`` matrix is allocated; it needs NVIDIA's ``nvidia-cusolver`` and ``nvidia-cublas``
wheels. A matrix sharded over a mesh of **several GPUs** is computed by **cuSOLVERMp**
(every routine; wide matrices for `least_squares` and `qr`, and shapes the grid cannot split
evenly, stay on the XLA reference) over the mesh's 2D process grid in ``T_A`` × ``T_A``
tiles, on jaxsolve's own NCCL communicator (`jaxsolve.sharding.nccl_communicator`), with one
process per GPU or one process driving all its GPUs; it needs cuSOLVERMp, cuBLASMp and
NCCL. Both come with ``pip install 'jaxsolve-dense[cuda13]'``, and both cache their handles
and workspaces until `clear_cache`. Everything else (the CPU) is computed by the **XLA
reference backend**: XLA's own linear algebra (``jax.lax.linalg``, LAPACK on CPU) on the
sharded operands, the correctness reference, not the scalable path (XLA gathers the matrix
onto each device to factor it). `use_backend` (or ``JAXSOLVE_DENSE_BACKEND``) picks a backend
explicitly, e.g. cuSOLVERMp on a 1 × 1 grid of one GPU, or ``"cusolver_lean"``: a `syevd`
on one GPU whose workspace is one matrix instead of cuSOLVER's four. `backend_for` says
which backend a call would take, `load_backend` loads a native one's libraries up front (to
fail early, or to share them with JAXMg), and `workspace_bytes` counts the device workspace
the native backends cache outside XLA's allocator.

Examples:
  JAXMg's README example, ``A = diag(1..N)``, ``b = 1``, over a 2 × 2 mesh of (virtual CPU)
  devices:

  >>> import jax, jax.numpy as jnp
  >>> from jax.sharding import NamedSharding, PartitionSpec as P
  >>> from jaxsolve import dense
  >>> import jaxsolve.sharding as js
  >>> mesh = js.make_grid_mesh(2, 2, devices=jax.devices()[:4])
  >>> a = jax.device_put(jnp.diag(jnp.arange(1., 9.)), NamedSharding(mesh, P("pr", "pc")))
  >>> b = jax.device_put(jnp.ones(8), NamedSharding(mesh, P("pr")))
  >>> x, logdet = dense.potrs(a, b, T_A=3, return_logdet=True)
  >>> bool(jnp.allclose(x, 1 / jnp.arange(1., 9.))), x.sharding.is_fully_replicated
  (True, True)
  >>> dense.potrs(a, b, T_A=3, replicate_x=False).sharding.spec == P("pr")
  True
  >>> bool(jnp.allclose(logdet, jnp.sum(jnp.log(jnp.arange(1., 9.)))))
  True

  Gradients, and a failure reported as a status:

  >>> g = jax.grad(lambda a: dense.potrs(a, b, return_logdet=True)[1])(a)
  >>> bool(jnp.allclose(g, jnp.diag(1 / jnp.arange(1., 9.))))
  True
  >>> x, status = dense.potrs(-a, b, return_status=True)
  >>> status
  Status(routine='potrs', info=1, rcond=0)
  >>> dense.raise_on_failure(status)
  Traceback (most recent call last):
    ...
  jaxsolve.dense._status.SolverError: potrs failed: info=1: the leading minor of order 1 is not positive definite
"""

import importlib.metadata as _metadata

from . import _xla as _xla  # registers the XLA reference backend
from . import _cusolver as _cusolver  # registers cuSOLVER (one GPU)
from . import _cusolvermp as _cusolvermp  # registers cuSOLVERMp (meshes of several GPUs)
from ._backend import backend_for as backend_for
from ._backend import load_backend as load_backend
from ._backend import use_backend as use_backend
from ._backend import workspace_bytes as workspace_bytes
from ._cholesky import cho_factor as cho_factor
from ._cholesky import cho_inverse as cho_inverse
from ._cholesky import cho_solve as cho_solve
from ._cholesky import logdet as logdet
from ._cholesky import potrs as potrs
from ._cholesky import potrs_shardmap_ctx as potrs_shardmap_ctx
from ._compile import clear_cache as clear_cache
from ._eigen import syevd as syevd
from ._eigen import syevd_shardmap_ctx as syevd_shardmap_ctx
from ._eigen import sygvd as sygvd
from ._factor import DenseFactor as DenseFactor
from ._least_squares import least_squares as least_squares
from ._least_squares import least_squares_shardmap_ctx as least_squares_shardmap_ctx
from ._lu import lu_factor as lu_factor
from ._lu import lu_solve as lu_solve
from ._lu import lu_solve_shardmap_ctx as lu_solve_shardmap_ctx
from ._lu import slogdet as slogdet
from ._lu import solve as solve
from ._polar import polar as polar
from ._polar import polar_shardmap_ctx as polar_shardmap_ctx
from ._qr import qr as qr
from ._qr import qr_shardmap_ctx as qr_shardmap_ctx
from ._status import SolverError as SolverError
from ._status import Status as Status
from ._status import raise_on_failure as raise_on_failure
from ._svd import gesvd as gesvd
from ._svd import gesvd_shardmap_ctx as gesvd_shardmap_ctx
from ._tridiagonal import eigh_tridiagonal as eigh_tridiagonal

try:
    __version__ = _metadata.version("jaxsolve-dense")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = [
    "DenseFactor",
    "SolverError",
    "Status",
    "backend_for",
    "cho_factor",
    "cho_inverse",
    "cho_solve",
    "clear_cache",
    "eigh_tridiagonal",
    "gesvd",
    "gesvd_shardmap_ctx",
    "least_squares",
    "least_squares_shardmap_ctx",
    "load_backend",
    "logdet",
    "lu_factor",
    "lu_solve",
    "lu_solve_shardmap_ctx",
    "polar",
    "polar_shardmap_ctx",
    "potrs",
    "potrs_shardmap_ctx",
    "qr",
    "qr_shardmap_ctx",
    "raise_on_failure",
    "slogdet",
    "solve",
    "syevd",
    "syevd_shardmap_ctx",
    "sygvd",
    "use_backend",
    "workspace_bytes",
]
