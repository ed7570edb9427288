"""Which engine computes :func:`~jaxsolve.sparse.solve`: jaxsolve's own, or NVIDIA AmgX.

``solve`` has one call shape and one configuration vocabulary (AmgX's) for two engines:

* ``"jaxsolve"`` (the default): this package's AMG and Krylov methods in JAX, on any
  platform, under ``jit``, ``vmap`` and ``grad``.
* ``"amgx"``: NVIDIA's AmgX library on a CUDA GPU, loaded at run time (``_amgx.py``), for
  results that must match an existing AmgX pipeline, or AmgX's GPU setup.

The choice is made per call or per scope with :func:`use_backend`, or for a whole run with
the environment variable ``JAXSOLVE_SPARSE_BACKEND``; it is read when a solve is traced, so
a program compiled under one backend keeps it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

BACKENDS = ("jaxsolve", "amgx")
ENVIRONMENT_VARIABLE = "JAXSOLVE_SPARSE_BACKEND"

_PREFERRED: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "jaxsolve_sparse_backend", default=None)


def _checked(name: str, source: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"{source}: unknown jaxsolve.sparse backend {name!r}; the backends are"
                         f" {', '.join(map(repr, BACKENDS))}.")
    return name


def current_backend() -> str:
    """The backend a ``solve`` called here runs on.

    The innermost :func:`use_backend` with a name decides; outside any, the environment
    variable ``JAXSOLVE_SPARSE_BACKEND`` (read at each call); else ``"jaxsolve"``.

    Raises:
      ValueError: ``JAXSOLVE_SPARSE_BACKEND`` names no backend.

    Examples:
      >>> from jaxsolve import sparse
      >>> sparse.current_backend()
      'jaxsolve'
      >>> with sparse.use_backend("amgx"):
      ...     sparse.current_backend()
      'amgx'
    """
    preferred = _PREFERRED.get()
    if preferred is not None:
        return preferred
    text = os.environ.get(ENVIRONMENT_VARIABLE)
    if not text:
        return "jaxsolve"
    return _checked(text.strip().lower(), ENVIRONMENT_VARIABLE)


@contextlib.contextmanager
def use_backend(name: str | None) -> Iterator[None]:
    """Runs the ``solve`` calls inside the block on backend ``name``.

    ``"amgx"`` hands each solve to NVIDIA AmgX on the GPU (the same configuration dict,
    validated by :func:`parse_amgx_config` first; see ``solve``'s "AmgX backend"
    section); ``"jaxsolve"`` is this package's engine, the default. ``None`` restores the
    default choice (the environment variable ``JAXSOLVE_SPARSE_BACKEND``, else
    ``"jaxsolve"``). Blocks nest: the innermost one decides. The choice is read when a
    solve is traced: a function compiled under one backend keeps it.

    Without AmgX (no ``libamgxsh.so`` found) or without a GPU, a solve under
    ``use_backend("amgx")`` raises a ``RuntimeError`` saying how to get AmgX; it never
    falls back silently.

    Args:
      name: ``"jaxsolve"``, ``"amgx"`` or None.

    Raises:
      ValueError: ``name`` is not a backend (raised on entering the block).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import sparse
      >>> A = sparse.matrices.poisson_matrix(8)
      >>> with sparse.use_backend("jaxsolve"):
      ...     x, info = sparse.solve(A, jnp.ones(64))
      >>> sparse.Status(int(info.status)).name
      'SUCCESS'
    """
    if name is not None:
        if not isinstance(name, str):
            raise ValueError(f"use_backend: name must be a backend name or None, got {name!r}.")
        _checked(name, "use_backend")
    token = _PREFERRED.set(name)
    try:
        yield
    finally:
        _PREFERRED.reset(token)
