"""Differentiable sparse solvers for JAX (``jaxsolve.sparse``).

This distribution, ``jaxsolve-sparse``, will hold a jit-able algebraic multigrid engine with
Krylov methods, configured in AmgX's vocabulary and differentiable through
:mod:`jaxsolve.autodiff`. No solver has landed yet: the package exports only its version.
"""

import importlib.metadata as _metadata

try:
    __version__ = _metadata.version("jaxsolve-sparse")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = ["__version__"]
