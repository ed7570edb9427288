"""The dispatch point: which backend computes a routine, and the services it must supply.

The public routines (`potrs`, `syevd`, ...) never compute anything themselves. They check their
arguments, place the operands (`Layout`), and hand a backend's *services* (plain functions on
arrays) to the rules of `jaxsolve.autodiff`, which call them for the values and for every
derivative. A backend is one set of services per *routine family*:

==================  ==================  ==========================================================
family              services            used by
==================  ==================  ==========================================================
``"cholesky"``      `FactorServices`    ``potrs``, ``cho_factor``, ``cho_solve``, ``logdet``,
                                        ``cho_inverse``
``"lu"``            `FactorServices`    ``lu_solve``, ``lu_factor``, ``solve``, ``slogdet``
``"syevd"``         `Decomposition`     ``syevd``; ``polar``'s derivative
``"sygvd"``         `Decomposition`     ``sygvd``
``"least_squares"`` `Decomposition`     ``least_squares``
``"qr"``            `Decomposition`     ``qr``
``"gesvd"``         `Decomposition`     ``gesvd``
``"polar"``         `Decomposition`     ``polar``
==================  ==================  ==========================================================

`services` picks, per family, the first registered backend whose predicate accepts the call's
`Layout` (mesh, specs, tile ``T_A``, ``pad``) and dtype, and asks it for the services of that
layout: a native backend builds them around its FFI call for that mesh and tile (inside
``jax.shard_map``), once per compiled program. The XLA reference backend (``_xla.py``) accepts
everything; cuSOLVER (``_cusolver.py``, through XLA FFI) is registered after it, so ahead of it,
for a matrix on one GPU. Another native backend (cuSOLVERMp over a 2D grid) registers its
families with `register` and a predicate such as "the mesh is on CUDA devices", without any
change to the public routines.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from ._arguments import Layout

FAMILIES = ("cholesky", "lu", "syevd", "sygvd", "least_squares", "qr", "gesvd", "polar")


class FactorServices(NamedTuple):
    """The services of a factorization family (``"cholesky"``, ``"lu"``).

    Attributes:
      factor: ``factor(a) -> factor``, a pytree with an ``int32`` leaf ``info`` (LAPACK's: 0 on
        success) and at least one leaf of ``a``'s shape and dtype (the factor in place of ``a``,
        which ``donate=True`` aliases to ``a``'s buffer). On failure the factor is NaN.
      solve: Cholesky: ``solve(factor, rhs) -> A⁻¹ rhs``; LU: ``solve(factor, rhs, transpose)``,
        ``A⁻ᵀ rhs`` (plain transpose) when ``transpose``. ``rhs`` is ``(n, k)``.
      logdet: Cholesky: ``logdet(factor) -> log det A`` (real scalar); LU:
        ``logdet(factor) -> (sign, log |det A|)``.
      diagonal: ``diagonal(factor) -> (n,)``, the factor's diagonal, ``L``'s (Cholesky, real)
        or ``U``'s (LU), NaN where the factorization failed; read inside the program for the
        status's reciprocal condition estimate, so it must cost ``O(n)`` (``n`` elements read,
        never a pass over the factor).
    """

    factor: Callable[..., Any]
    solve: Callable[..., Any]
    logdet: Callable[..., Any]
    diagonal: Callable[..., Any]


class Decomposition(NamedTuple):
    """The services of a one-shot routine (eigensolvers, least squares, QR, SVD).

    Attributes:
      compute: the service that `jaxsolve.autodiff`'s rule takes (``decompose`` or
        ``solve_least_squares``), with the signature that rule documents.
      info: ``info(inputs, outputs) -> int32 info``: LAPACK's ``info`` for the call, from its
        inputs and outputs (the autodiff rules accept services that return only the outputs).
    """

    compute: Callable[..., Any]
    info: Callable[..., Any]


Predicate = Callable[[Layout, np.dtype], bool]
Factory = Callable[[Layout, np.dtype], Any]


@dataclasses.dataclass
class _Entry:
    backend: str
    applies: Predicate
    make: Factory


_REGISTRY: dict[str, list[_Entry]] = {family: [] for family in FAMILIES}
_CLEAR_HOOKS: list[Callable[[], None]] = []
_PREPARE_HOOKS: list[Callable[[Layout], None]] = []


def register(
    family: str,
    backend: str,
    make: Factory,
    *,
    applies: Predicate = lambda layout, dtype: True,
    clear: Callable[[], None] | None = None,
    prepare: Callable[[Layout], None] | None = None,
) -> None:
    """Registers a backend's services for one family, ahead of those registered before.

    Args:
      family: one of `FAMILIES`.
      backend: the backend's name, e.g. ``"xla"``.
      make: ``make(layout, dtype)``, the backend's services for a call on `layout` with
        `dtype`: a `FactorServices` or `Decomposition` as the family needs. Called while
        tracing, once per compiled program.
      applies: ``applies(layout, dtype)``, whether this backend computes a call on `layout`
        with `dtype`; the first registered backend that applies wins, newest first.
      clear: frees the backend's cached handles and workspaces (`clear_cache` calls it).
      prepare: ``prepare(layout)``, readies outside ``jax.jit`` what the services of a call
        on `layout` will need and cannot make while traced (e.g. a communicator whose id
        travels between processes); `prepare_backends` calls it.
    """
    if family not in _REGISTRY:
        raise ValueError(f"register: unknown family {family!r}; families are {FAMILIES}.")
    _REGISTRY[family].insert(0, _Entry(backend, applies, make))
    if clear is not None and clear not in _CLEAR_HOOKS:
        _CLEAR_HOOKS.append(clear)
    if prepare is not None and prepare not in _PREPARE_HOOKS:
        _PREPARE_HOOKS.append(prepare)


def prepare_backends(layout: Layout) -> None:
    """Runs every backend's ``prepare`` hook for a call on `layout` (before tracing it)."""
    for hook in _PREPARE_HOOKS:
        hook(layout)


_PREFERRED: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "jaxsolve_dense_backend", default=os.environ.get("JAXSOLVE_DENSE_BACKEND") or None)


def preferred_backend() -> str | None:
    """The backend `use_backend` (or ``JAXSOLVE_DENSE_BACKEND``) asks for, if any."""
    return _PREFERRED.get()


@contextlib.contextmanager
def use_backend(name: str | None) -> Iterator[None]:
    """Computes the dense routines called inside the block with backend `name`.

    Without it, each routine takes the newest registered backend that applies to its mesh and
    dtype (``"cusolvermp"`` on multi-GPU meshes, ``"xla"`` elsewhere). Inside
    ``use_backend("cusolvermp")`` a routine that backend implements must run on it (e.g. on a
    single-GPU 1 × 1 grid, to measure it) or fail with a ValueError saying why; routines it does
    not implement keep the default choice. The environment variable ``JAXSOLVE_DENSE_BACKEND``
    sets the same preference for a whole run. ``None`` restores the default. The choice is
    part of the compilation cache key: programs are traced again under another backend.

    Args:
      name: a backend name (``"xla"``, ``"cusolver"``, ``"cusolvermp"``, or
        ``"cusolver_lean"``, which computes only ``syevd``, on one GPU, in one matrix of
        workspace), or None.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> with dense.use_backend("xla"):
      ...     dense.potrs(4 * jnp.eye(2), jnp.ones(2))
      Array([0.25, 0.25], dtype=float32)
    """
    if name is not None and not isinstance(name, str):
        raise ValueError(f"use_backend: name must be a backend name or None, got {name!r}.")
    token = _PREFERRED.set(name)
    try:
        yield
    finally:
        _PREFERRED.reset(token)


def _entry(family: str, layout: Layout, dtype: np.dtype) -> _Entry:
    preferred = _PREFERRED.get()
    named = [entry for entry in _REGISTRY[family] if entry.backend == preferred]
    for entry in named or _REGISTRY[family]:
        if entry.applies(layout, dtype):
            return entry
    if named:
        raise ValueError(
            f"the jaxsolve.dense backend {preferred!r} (asked for by use_backend or "
            f"JAXSOLVE_DENSE_BACKEND) cannot compute {family!r} on {layout} with dtype {dtype}.")
    raise RuntimeError(f"no jaxsolve.dense backend computes {family!r} on {layout}")


def services(family: str, layout: Layout, dtype: Any) -> Any:
    """The services of the backend that computes `family` on `layout` and `dtype`."""
    return _entry(family, layout, np.dtype(dtype)).make(layout, np.dtype(dtype))


def backend_name(family: str, layout: Layout, dtype: Any) -> str:
    """The name of the backend `services` picks (for tests and diagnostics)."""
    return _entry(family, layout, np.dtype(dtype)).backend


def clear_backends() -> None:
    """Runs every backend's ``clear`` hook."""
    for hook in _CLEAR_HOOKS:
        hook()
