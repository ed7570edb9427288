"""Launching, meshes and communicators for multi-device jaxsolve runs (``jaxsolve.sharding``).

This distribution, ``jaxsolve-sharding``, will hold the multi-process launcher,
``initialize()``, mesh helpers, sparse row partitioning and the NCCL communicator bootstrap
that :mod:`jaxsolve.dense` and :mod:`jaxsolve.sparse` share. Nothing has landed yet: the
package exports only its version.
"""

import importlib.metadata as _metadata

try:
    __version__ = _metadata.version("jaxsolve-sharding")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = ["__version__"]
