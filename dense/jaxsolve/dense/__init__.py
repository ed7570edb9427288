"""Distributed dense linear algebra for JAX (``jaxsolve.dense``).

This distribution, ``jaxsolve-dense``, will hold Cholesky, LU, least-squares, QR, symmetric
and generalized eigen, SVD and polar solvers over NVIDIA cuSOLVERMp for matrices sharded
over a 2D device mesh, differentiable through :mod:`jaxsolve.autodiff` and laid out by
:mod:`jaxsolve.layout`. No solver has landed yet: the package exports only its version.
"""

import importlib.metadata as _metadata

try:
    __version__ = _metadata.version("jaxsolve-dense")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = ["__version__"]
