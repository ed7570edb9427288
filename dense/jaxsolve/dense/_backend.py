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

**The platform is the lowering's.** A matrix on a mesh, or a concrete array on one device,
says where the routine runs. A value traced without a mesh (inside ``jax.jit``, ``jax.grad``,
``jax.vmap`` of the caller's) does not: the program runs where its arguments are when it is
compiled, which JAX's default backend need not be (arrays committed to the CPU of a GPU host).
There `services` takes both choices, the backend a GPU would take and the one the CPU would,
and where they differ calls each service through ``jax.lax.platform_dependent``: the program
lowered for CUDA holds the cuSOLVER call, lowered for any other platform the XLA reference's,
never both. The one-device backends' factors are therefore of one type per family
(`CholeskyFactor`, `LUFactor`), each backend reading its own layout in it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import numpy as np

from ._arguments import Layout, prepare_matrix

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


class CholeskyFactor(NamedTuple):
    """The ``"cholesky"`` factor of the one-device backends (XLA's and cuSOLVER's).

    Attributes:
      triangle: ``(n, n)``, the triangular factor of ``A = L Lᴴ`` as the backend stores it
        (XLA's: ``L``; cuSOLVER's: its column-major ``L`` over ``A``'s buffer, upper triangular
        in JAX's row-major view); NaN when ``info > 0``.
      info: ``potrf``'s ``info``, an int32 scalar.
    """

    triangle: jax.Array
    info: jax.Array


class LUFactor(NamedTuple):
    """The ``"lu"`` factor of the one-device backends: ``getrf``'s, of ``A`` (XLA's) or of
    ``Aᵀ`` (cuSOLVER's, ``A``'s buffer read column-major).

    Attributes:
      lu: ``(n, n)``, ``L`` and ``U`` packed as LAPACK packs them, in the backend's layout;
        its diagonal is ``U``'s. NaN when ``info > 0``.
      pivots: ``(n,)`` int32, LAPACK's row interchanges, 0-based.
      info: ``getrf``'s ``info``, an int32 scalar.
    """

    lu: jax.Array
    pivots: jax.Array
    info: jax.Array


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
_WORKSPACE_HOOKS: list[Callable[[], int]] = []
_LOADERS: dict[str, Callable[[], Any] | None] = {}

# The family of each routine that takes the matrix (`backend_for`).
ROUTINE_FAMILIES = {
    "potrs": "cholesky", "cho_factor": "cholesky", "cho_inverse": "cholesky",
    "lu_solve": "lu", "lu_factor": "lu", "solve": "lu", "slogdet": "lu",
    "syevd": "syevd", "sygvd": "sygvd", "least_squares": "least_squares", "qr": "qr",
    "gesvd": "gesvd", "polar": "polar",
}
_RECTANGULAR = ("least_squares", "qr", "gesvd", "polar")


def register(
    family: str,
    backend: str,
    make: Factory,
    *,
    applies: Predicate = lambda layout, dtype: True,
    clear: Callable[[], None] | None = None,
    prepare: Callable[[Layout], None] | None = None,
    load: Callable[[], Any] | None = None,
    workspace: Callable[[], int] | None = None,
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
      load: loads the backend's native libraries, raising ``RuntimeError`` (naming what is
        missing) where they cannot load; `load_backend` calls it.
      workspace: the device bytes the backend's caches hold outside XLA's allocator;
        `workspace_bytes` sums them.
    """
    if family not in _REGISTRY:
        raise ValueError(f"register: unknown family {family!r}; families are {FAMILIES}.")
    _REGISTRY[family].insert(0, _Entry(backend, applies, make))
    if clear is not None and clear not in _CLEAR_HOOKS:
        _CLEAR_HOOKS.append(clear)
    if prepare is not None and prepare not in _PREPARE_HOOKS:
        _PREPARE_HOOKS.append(prepare)
    if workspace is not None and workspace not in _WORKSPACE_HOOKS:
        _WORKSPACE_HOOKS.append(workspace)
    _LOADERS[backend] = load or _LOADERS.get(backend)


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


def _choices(family: str, layout: Layout, dtype: np.dtype) -> dict[str, _Entry]:
    """The backend of each platform the call may run on: ``layout.platform``'s, or, where the
    lowering decides (`Layout.platform` None), a GPU's and the CPU's (which stands for every
    platform but CUDA), leaving out one where `use_backend`'s backend cannot compute."""
    if layout.platform is not None:
        return {layout.platform: _entry(family, layout, dtype)}
    choices, refusal = {}, None
    for platform in ("gpu", "cpu"):
        try:
            choices[platform] = _entry(family, layout.on_platform(platform), dtype)
        except ValueError as error:
            refusal = error
    if not choices:
        raise refusal
    return choices


def services(family: str, layout: Layout, dtype: Any) -> Any:
    """The services of the backend that computes `family` on `layout` and `dtype`; where the
    platform is the lowering's and a GPU's backend differs from the CPU's, both, chosen per
    call when the program is lowered (``jax.lax.platform_dependent``)."""
    dtype = np.dtype(dtype)
    choices = _choices(family, layout, dtype)
    if len({id(entry) for entry in choices.values()}) == 1:
        return next(iter(choices.values())).make(layout, dtype)
    made = {platform: entry.make(layout.on_platform(platform), dtype)
            for platform, entry in choices.items()}
    return type(made["cpu"])(*(
        on_gpu if on_gpu is elsewhere else _per_platform(on_gpu, elsewhere)
        for on_gpu, elsewhere in zip(made["gpu"], made["cpu"])))


def _per_platform(on_cuda: Callable[..., Any], elsewhere: Callable[..., Any]
                  ) -> Callable[..., Any]:
    """A service that calls `on_cuda` in a program lowered for CUDA, `elsewhere` otherwise.

    Its array arguments go through ``jax.lax.platform_dependent``; the others (a flag such as
    ``getrs``'s ``transpose``) stay Python values. Both must return the same types.
    """
    def service(*args: Any) -> Any:
        leaves, tree = jax.tree.flatten(args)
        positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, jax.Array)]

        def branch(chosen):
            def call(*arrays):
                filled = list(leaves)
                for position, array in zip(positions, arrays):
                    filled[position] = array
                return chosen(*jax.tree.unflatten(tree, filled))

            return call

        return jax.lax.platform_dependent(*(leaves[i] for i in positions),
                                          cuda=branch(on_cuda), default=branch(elsewhere))

    return service


def backend_name(family: str, layout: Layout, dtype: Any) -> str:
    """The name of the backend `services` picks (for tests and diagnostics); where the lowering
    chooses between two, ``"platform_dependent(cuda='cusolver', default='xla')"``."""
    names = {platform: entry.backend
             for platform, entry in _choices(family, layout, np.dtype(dtype)).items()}
    if len(set(names.values())) == 1:
        return next(iter(names.values()))
    return f"platform_dependent(cuda={names['gpu']!r}, default={names['cpu']!r})"


def clear_backends() -> None:
    """Runs every backend's ``clear`` hook."""
    for hook in _CLEAR_HOOKS:
        hook()


def backend_for(routine: str, a: Any, *, mesh: Any = None, matrix_specs: Any = None,
                T_A: int = 256) -> str:
    """The backend that would compute `routine` on the matrix `a`, called here and now.

    The routine's own choice, made from the same arguments: the backend `use_backend` asks
    for, where it implements the routine, else the newest registered one that applies to
    `a`'s mesh, specs, tile and dtype (``"cusolver"`` on one GPU, ``"cusolvermp"`` on a mesh
    of several, ``"xla"`` elsewhere). Nothing is computed or loaded.

    Args:
      routine: a routine that takes the matrix: ``"potrs"``, ``"cho_factor"``,
        ``"cho_inverse"``, ``"lu_solve"``, ``"lu_factor"``, ``"solve"``, ``"slogdet"``,
        ``"syevd"``, ``"sygvd"``, ``"least_squares"``, ``"qr"``, ``"gesvd"`` or ``"polar"``.
      a: the matrix, placed as it would be passed (or any array of its shape, dtype and
        sharding).
      mesh, matrix_specs, T_A: as the routine takes them.

    Returns:
      The backend's name, as `use_backend` takes it. For `a` traced without a mesh (inside
      ``jax.jit``), whose platform the lowering decides, both choices where they differ:
      ``"platform_dependent(cuda='cusolver', default='xla')"``.

    Raises:
      ValueError: an unknown routine; arguments the routine would refuse; or a backend asked
        for with `use_backend` that cannot compute the call.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> dense.backend_for("potrs", jnp.eye(4))  # on a CPU
      'xla'
    """
    if routine not in ROUTINE_FAMILIES:
        raise ValueError(f"backend_for: unknown routine {routine!r}; routines are "
                         f"{tuple(ROUTINE_FAMILIES)}.")
    a, layout = prepare_matrix(routine, a, T_A, mesh, matrix_specs, flags={},
                               square=routine not in _RECTANGULAR)
    return backend_name(ROUTINE_FAMILIES[routine], layout, a.dtype)


def load_backend(name: str) -> None:
    """Loads a backend's native libraries now, rather than at the backend's first call.

    cuSOLVER (``"cusolver"``, ``"cusolver_lean"``) loads NVIDIA's cuSOLVER and cuBLAS wheels
    and jaxsolve's handlers; cuSOLVERMp (``"cusolvermp"``) also NCCL, cuBLASMp and
    cuSOLVERMp, all with ``RTLD_GLOBAL``, so that another library in the process (JAXMg)
    finds them loaded. The XLA reference backend loads nothing. Call it at start-up to fail
    early, with the missing wheel named, rather than in the first solve.

    Args:
      name: a backend name, as `use_backend` takes it.

    Raises:
      ValueError: an unknown backend name.
      RuntimeError: the backend cannot run in this process (no CUDA GPU, a missing wheel,
        a library that does not load); the message says which and what to install.

    Examples:
      >>> from jaxsolve import dense
      >>> dense.load_backend("xla")
    """
    if name not in _LOADERS:
        raise ValueError(f"load_backend: unknown backend {name!r}; backends are "
                         f"{tuple(_LOADERS)}.")
    if _LOADERS[name] is not None:
        _LOADERS[name]()


def workspace_bytes() -> int:
    """Device bytes the native backends hold in cached workspaces, outside XLA's allocator.

    cuSOLVER and cuSOLVERMp keep the workspaces of their last calls, per device and shape,
    until `clear_cache`; ``jax.Device.memory_stats`` does not count them. 0 before any
    native call, and on a CPU.

    Examples:
      >>> from jaxsolve import dense
      >>> dense.clear_cache()
      >>> dense.workspace_bytes()
      0
    """
    return sum(hook() for hook in _WORKSPACE_HOOKS)
