"""Implicit-differentiation rules for solves and decompositions done by services.

``jaxsolve.autodiff`` makes any solver differentiable without differentiating
through it.  A solver package supplies *services*, plain callables on arrays
(a sparse AMG-Krylov solve, a distributed ``potrs``, ``syevd``, ...), and a
rule of this package supplies the derivatives: forward mode, reverse mode,
higher orders and ``vmap``.  Derivatives come from the implicit function
theorem, so each is exact to the solver's tolerance and costs one more
solve; a service is never differentiated (doing so raises a ``TypeError``).

The generic rule is :func:`linear_solve`: for ``x = A⁻¹ b``,

    ẋ = A⁻¹ (ḃ - Ȧ x),    b̄ = A⁻ᵀ x̄,    Ā = -b̄ xᵀ (on A's own representation).

>>> import jax, jax.numpy as jnp
>>> from jaxsolve import autodiff
>>> a = jnp.array([[3., 1.], [0., 2.]])
>>> def loss(b):
...     x = autodiff.linear_solve(
...         a, b,
...         solve=lambda a, rhs: jnp.linalg.solve(a, rhs),
...         transpose_solve=lambda a, rhs: jnp.linalg.solve(a.T, rhs))
...     return jnp.sum(x)
>>> jnp.allclose(jax.grad(loss)(jnp.ones(2)), jnp.linalg.solve(a.T, jnp.ones(2)))
Array(True, dtype=bool)

Contracts shared by every rule:

* **Services** receive primal values (the operator, or a kept factor) and
  right-hand sides of shape ``(n, k)``.  ``jax.vmap`` over right-hand sides
  becomes extra columns of one service call; ``jax.vmap`` over a stack of
  systems becomes ``jax.vmap`` of the service.
* **Operators** are pytrees: a dense matrix, values on a
  :class:`SparsePattern` (cotangents stay on the pattern), or a
  :class:`Factorization` (derivative solves reuse its factor).
* **Symmetric/Hermitian** rules (``symmetric=True``, Cholesky, ``eigh``)
  treat tangents of ``A`` as Hermitian (they project them), so their
  gradients are Hermitian; compare them with references on Hermitian inputs,
  e.g. through ``M ↦ rule((M + Mᴴ) / 2)``.
* **Complex** derivatives follow JAX's conventions (``A⁻ᵀ``, the plain
  transpose, in VJPs).

:func:`check_solver_derivatives` checks any solver built on these rules (or
not) against finite differences and a reference, under ``jit`` and ``vmap``.
"""

import importlib.metadata as _metadata

from ._cholesky import cholesky_factor as cholesky_factor
from ._cholesky import cholesky_logdet as cholesky_logdet
from ._cholesky import cholesky_solve as cholesky_solve
from ._decompositions import polar as polar
from ._decompositions import qr as qr
from ._decompositions import svd as svd
from ._eigh import eigh as eigh
from ._eigh import eigh_generalized as eigh_generalized
from ._factorization import Factorization as Factorization
from ._linear_solve import linear_solve as linear_solve
from ._lstsq import lstsq as lstsq
from ._lu import lu_factor as lu_factor
from ._lu import lu_solve as lu_solve
from ._sparse_pattern import SparsePattern as SparsePattern
from ._testing import check_solver_derivatives as check_solver_derivatives

try:
    __version__ = _metadata.version("jaxsolve-autodiff")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = [
    "Factorization",
    "SparsePattern",
    "check_solver_derivatives",
    "cholesky_factor",
    "cholesky_logdet",
    "cholesky_solve",
    "eigh",
    "eigh_generalized",
    "linear_solve",
    "lstsq",
    "lu_factor",
    "lu_solve",
    "polar",
    "qr",
    "svd",
]
