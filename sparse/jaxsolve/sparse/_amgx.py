"""The AmgX backend of :func:`~jaxsolve.sparse.solve`: NVIDIA AmgX through XLA FFI.

Under ``use_backend("amgx")`` (or ``JAXSOLVE_SPARSE_BACKEND=amgx``) ``solve`` hands the
system to NVIDIA AmgX on the GPU instead of this package's engine, with the same call
shape, the same AmgX configuration and the same ``(x, info)`` answer.

**Getting AmgX.** No wheel ships AmgX, and jaxsolve's wheels do not need it: the handler
(``csrc/amgx_handlers.cc``, in ``libjaxsolve_sparse_amgx_cuda<major>.so``) builds against
AmgX's C headers and loads ``libamgxsh.so`` at run time, from ``AMGX_LIB`` (the file),
else ``AMGX_DIR/lib/libamgxsh.so``, else wherever the dynamic loader finds it
(``LD_LIBRARY_PATH``). On a GPU host, ``tools/dev amgx-build`` (in a jaxsolve checkout)
builds it from source and prints its path. Without it, or without a GPU, a solve on this
backend raises one ``RuntimeError`` that says so.

**Configuration.** The config is validated by :func:`parse_amgx_config` (so a typo fails
here as it would on jaxsolve's engine) and handed to AmgX as the JSON text of
:meth:`SolverConfig.to_amgx_dict`: AmgX reads the same settings, every one explicit, so
jaxsolve's defaults (``PBICGSTAB``, ``tolerance 1e-6`` relative, ``max_iters 1000``, ...)
hold on both engines; AmgX's run-wide settings at the config's top level
(``determinism_flag``, ...), which jaxsolve ignores, go to AmgX as given. Settings only jaxsolve has (``jaxsolve_smoothed_aggregation``,
``jaxsolve_hierarchy_precision``) are refused; a ``BLOCK_JACOBI`` without
``relaxation_factor`` takes AmgX's 0.9 (jaxsolve estimates its own), and an AMG without
``presweeps``, ``postsweeps`` or ``cycle`` AmgX's V(1, 1) cycle (jaxsolve's engine smooths
twice after the correction for PBICGSTAB, GMRES and FGMRES on a real matrix).

**Handles.** Per sparsity pattern, configuration, dtype and orientation (``A``, or ``Aᵀ``
for a gradient), one AmgX solver (config, resources, matrix, vectors) lives in the
handler's table under an id kept in jaxsolve's setup cache: ``cache_info`` counts it,
eviction and ``clear_cache`` free it (a program compiled before then creates it again on
its next call, kept until exit), and exit finalizes AmgX. The first solve uploads
the matrix (``AMGX_matrix_upload_all``) and sets up; later ones replace the coefficients
(``AMGX_matrix_replace_coefficients``) and set up again, or with ``reuse_setup=True`` keep
the setup they have.

**Transformations.** The solve is one FFI call per right-hand side, so it runs under
``jax.jit``. Derivatives come from :func:`jaxsolve.autodiff.linear_solve`, as on
jaxsolve's engine: one more AmgX solve per derivative direction, with ``A`` (``CG``,
``PCG``: ``A`` is taken as symmetric) or with ``Aᵀ``, uploaded once per pattern as a
matrix of its own. ``jax.vmap`` (and ``b`` of shape ``(n, k)``) solves the right-hand
sides (or systems) one after another, each an AmgX solve of its own.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import json
import os
import pathlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve import autodiff
from jaxsolve.runtime import NativeLibrary

from . import _cache
from ._config import SolverConfig, _load_json
from ._sharded import ShardedCsrMatrix
from ._krylov import check_max_iters
from ._setup import checked_inputs, given_placement, is_concrete, placed_as_given
from ._status import FailureReason, SolveInfo, Status

AMGX_SOLVE = "jaxsolve_sparse_amgx_solve"

_LIBRARY = NativeLibrary("jaxsolve.sparse", pathlib.Path(__file__).absolute().parent,
                         "jaxsolve_sparse_amgx", {AMGX_SOLVE: "JaxsolveSparseAmgxSolve"},
                         cpu=False)

HOW_TO_GET_AMGX = (
    "AmgX is not part of jaxsolve's wheels: build it on a GPU host with `tools/dev amgx-build`"
    " (in a jaxsolve checkout; it prints where libamgxsh.so is) and set AMGX_LIB to that file"
    " (or AMGX_DIR to AmgX's install prefix, or put its folder on LD_LIBRARY_PATH); or solve"
    " with jaxsolve's own engine, use_backend('jaxsolve')."
)

_JAXSOLVE_ONLY_KEYS = ("jaxsolve_smoothed_aggregation", "jaxsolve_hierarchy_precision")
# AmgX's settings of the whole run, read in its default scope (the JSON's top level), which
# jaxsolve's parser accepts and ignores: they go to AmgX as given.
_GLOBAL_KEYS = ("determinism_flag", "block_format", "separation_interior",
                "separation_exterior", "min_rows_latency_hiding", "fine_level_consolidation",
                "use_cuda_ipc_consolidation")
_HERMITIAN_METHODS = ("CG", "PCG")
_MESSAGE_BYTES = 4096


def amgx_library_path() -> str:
    """Where ``libamgxsh.so`` is looked for: ``AMGX_LIB``, else ``AMGX_DIR/lib``, else the
    bare name (the dynamic loader's search path)."""
    if os.environ.get("AMGX_LIB"):
        return os.environ["AMGX_LIB"]
    if os.environ.get("AMGX_DIR"):
        return str(pathlib.Path(os.environ["AMGX_DIR"]) / "lib" / "libamgxsh.so")
    return "libamgxsh.so"


def bind(library: ctypes.CDLL) -> ctypes.CDLL:
    """``library`` (the handler library) with its C functions' signatures declared."""
    library.JaxsolveSparseAmgxLoad.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32]
    library.JaxsolveSparseAmgxLoad.restype = ctypes.c_int32
    library.JaxsolveSparseAmgxVersions.argtypes = [ctypes.c_char_p, ctypes.c_int32]
    library.JaxsolveSparseAmgxVersions.restype = None
    library.JaxsolveSparseAmgxRelease.argtypes = [ctypes.c_int64]
    library.JaxsolveSparseAmgxRelease.restype = None
    library.JaxsolveSparseAmgxReleaseAll.argtypes = [ctypes.c_int32]
    library.JaxsolveSparseAmgxReleaseAll.restype = None
    library.JaxsolveSparseAmgxSolvers.argtypes = []
    library.JaxsolveSparseAmgxSolvers.restype = ctypes.c_int32
    return library


def load_amgx(library: ctypes.CDLL, path: str) -> None:
    """Loads AmgX from ``path`` into the handler library ``library`` (once per process).

    Raises:
      RuntimeError: it cannot (no such file, not AmgX, ``AMGX_initialize`` failed), with
        the loader's reason and how to get AmgX.
    """
    bind(library)
    message = ctypes.create_string_buffer(_MESSAGE_BYTES)
    if library.JaxsolveSparseAmgxLoad(os.fsencode(path), message, _MESSAGE_BYTES) != 0:
        raise RuntimeError(f"the AmgX backend of jaxsolve.sparse cannot load AmgX:"
                           f" {message.value.decode(errors='replace')}. {HOW_TO_GET_AMGX}")


def _platform(arrays: tuple) -> str:
    for a in arrays:
        if isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer):
            return next(iter(a.devices())).platform
    return jax.default_backend()


_LOCK = threading.Lock()
_AT_EXIT: list[ctypes.CDLL] = []


def require_amgx(caller: str, *arrays: Any) -> ctypes.CDLL:
    """The handler library with AmgX loaded, for a solve on ``arrays``.

    Raises:
      RuntimeError: the solve does not run on a CUDA GPU, jaxsolve's AmgX handler library
        cannot load, or AmgX cannot; the message says how to get AmgX.
    """
    platform = _platform(arrays)
    if platform != "gpu":
        raise RuntimeError(
            f"{caller}: the AmgX backend runs on NVIDIA GPUs only, and this solve runs on"
            f" {platform!r} (JAX's default backend, or the device of A's values). {HOW_TO_GET_AMGX}")
    try:
        _LIBRARY.require_cuda(caller)
    except RuntimeError as error:
        raise RuntimeError(f"{error} {HOW_TO_GET_AMGX}") from error
    library = _LIBRARY.cuda
    with _LOCK:
        load_amgx(library, amgx_library_path())
        if not _AT_EXIT:  # AmgX's objects are freed, and AmgX finalized, before JAX exits
            _AT_EXIT.append(library)
            atexit.register(library.JaxsolveSparseAmgxReleaseAll, 1)
    return library


def live_solvers() -> int:
    """How many AmgX solvers hold AmgX's objects now (0 before AmgX is loaded)."""
    return int(_AT_EXIT[0].JaxsolveSparseAmgxSolvers()) if _AT_EXIT else 0


def amgx_versions() -> str:
    """The loaded AmgX's version and CUDA's (runtime and driver), or ``""`` before a load."""
    if not _AT_EXIT:
        return ""
    text = ctypes.create_string_buffer(_MESSAGE_BYTES)
    _AT_EXIT[0].JaxsolveSparseAmgxVersions(text, _MESSAGE_BYTES)
    return text.value.decode(errors="replace")


# ----------------------------------------------------------------------------------------
# Handles in the setup cache

_IDS = itertools.count(1)


class AmgxSolver:
    """An id of the handler's AmgX solver table, released when the setup cache drops it.

    The handler creates the solver on its first call with the id; ``release(id)`` frees
    its AmgX objects (none if it has none yet).
    """

    def __init__(self, release: Callable[[int], Any], indptr: jax.Array, indices: jax.Array):
        self.id = next(_IDS)
        self.indptr = indptr  # the pattern on the device, sent once per pattern
        self.indices = indices
        finalizer = weakref.finalize(self, release, self.id)
        finalizer.atexit = False  # at exit, ReleaseAll frees every solver, then AmgX


def solver_for(key: Any, release: Callable[[int], Any], pattern: Any, device: Any
               ) -> AmgxSolver:
    """The cached :class:`AmgxSolver` of ``key`` (built on a miss, counted by cache_info)."""
    def build() -> _cache.CacheEntry:
        with jax.ensure_compile_time_eval():  # concrete arrays, also while a caller traces
            indptr, indices = jax.device_put((pattern.indptr, pattern.indices), device)
        return _cache.CacheEntry(structure=AmgxSolver(release, indptr, indices), numbers=None)
    return _cache.setup_for(key, build).structure


# ----------------------------------------------------------------------------------------
# The configuration AmgX reads


def amgx_config_text(config: SolverConfig, given: Any = None) -> str:
    """The JSON text AmgX's ``AMGX_config_create`` reads for ``config``.

    ``config.to_amgx_dict()``, every setting explicit, plus AmgX's run-wide settings
    (``determinism_flag``, ...) from the top level of ``given``, the configuration as the
    caller gave it (the dict, JSON text or file that ``config`` was parsed from).

    Raises:
      ValueError: ``config`` uses a setting only jaxsolve has, turns off the outer
        solver's residual monitoring (the backend reads AmgX's residuals), or has no outer
        solver (``NOSOLVER``).
    """
    if config.solver == "NOSOLVER":
        raise ValueError("solve: solver 'NOSOLVER' solves nothing; it is a preconditioner"
                         " choice (e.g. {'solver': 'PBICGSTAB', 'preconditioner': 'NOSOLVER'}).")
    document = config.to_amgx_dict()
    document["solver"]["solver"] = config.solver  # a solver left to jaxsolve: AmgX reads ours
    used = [key for key in _JAXSOLVE_ONLY_KEYS if key in json.dumps(document)]
    if used:
        raise ValueError(f"solve: {', '.join(used)} is a jaxsolve extension that AmgX does not"
                         " have; the AmgX backend cannot run it (use_backend('jaxsolve') can).")
    if not config.monitor_residual:
        raise ValueError("solve: the AmgX backend needs monitor_residual 1 in the outer solver"
                         " (it reports AmgX's residuals and status).")
    if isinstance(given, (str, os.PathLike)):
        given = _load_json(given)
    if isinstance(given, dict):
        if given.get("exception_handling", 0) != 0:
            raise ValueError("solve: the AmgX backend needs exception_handling 0 (AmgX returns"
                             " its errors, which become exceptions; 1 would end the process).")
        document.update({key: given[key] for key in _GLOBAL_KEYS if key in given})
    return json.dumps(document, sort_keys=True)


# ----------------------------------------------------------------------------------------
# The solve


def solve_amgx(A: Any, b: Any, x0: Any, config: SolverConfig, given: Any, *,
               reuse_setup: bool, derivative: str, check: bool
               ) -> tuple[jax.Array, SolveInfo]:
    """``solve`` on the AmgX backend, from ``solve``'s parsed `config` (and the `given`
    configuration, whose run-wide keys reach AmgX); see the module docstring and ``solve``."""
    if isinstance(A, ShardedCsrMatrix):
        raise ValueError("solve: the AmgX backend solves on one GPU; a sharded A"
                         " (jaxsolve.sharding.ShardedCsrMatrix) needs use_backend('jaxsolve').")
    check_max_iters("solve", config.max_iters)
    text = amgx_config_text(config, given)
    placement = given_placement(b)  # x goes back there; b may move to A's device
    matrix, b, x0, _ = checked_inputs("solve", A, b, x0, None, check)
    if jnp.issubdtype(matrix.values.dtype, jnp.complexfloating):
        raise TypeError("solve: the AmgX backend solves real systems (float32, float64); got"
                        f" {matrix.values.dtype.name}.")
    library = require_amgx("solve", matrix.values, b)
    # where the pattern goes: the values' device, or for traced values the default one
    # (require_amgx found it to be a GPU)
    device = next(iter(matrix.values.devices())) if is_concrete(matrix.values) else \
        jax.devices()[0]
    hermitian = config.solver in _HERMITIAN_METHODS
    history = config.max_iters + 1 if config.store_res_history else 0
    services = [_service(library, matrix._pattern, text, reuse_setup, history, config.norm,
                         device, False)]
    services.append(None if hermitian else
                    _service(library, matrix._pattern, text, reuse_setup, history, config.norm,
                             device, True))
    pattern = matrix._pattern.differentiable
    x0 = None if x0 is None else jax.lax.stop_gradient(x0)
    rhs = b if x0 is None else b - matrix.matvec(x0)
    if is_concrete(matrix.values) and is_concrete(rhs):  # nothing to differentiate
        correction, info = services[0](matrix.values, rhs)
    else:
        correction, info = autodiff.linear_solve(
            matrix.values, rhs, solve=services[0], transpose_solve=services[1],
            matvec=pattern.matvec, symmetric=hermitian,
            symmetrize=pattern.symmetrize if hermitian else None,
            mode="jvp" if derivative == "implicit" else "adjoint", has_aux=True)
    return placed_as_given(correction if x0 is None else x0 + correction, placement), info


def _service(library: ctypes.CDLL, pattern: Any, text: str, reuse_setup: bool, history: int,
             kind: str, device: Any, transposed: bool
             ) -> Callable[[jax.Array, jax.Array], tuple]:
    """The solve service ``(A's values, rhs) -> (A⁻¹ rhs, info)`` (``Aᵀ`` when
    ``transposed``), for ``rhs`` of shape ``(n,)`` or ``(n, k)``: one AmgX solve per
    column."""
    permutation = None
    if transposed:
        pattern, permutation = pattern.transposed

    def one(values: jax.Array, rhs: jax.Array) -> tuple[jax.Array, SolveInfo]:
        key = ("amgx", pattern.key, text, values.dtype.name, transposed)
        solver = solver_for(key, library.JaxsolveSparseAmgxRelease, pattern, device)
        real = values.dtype
        outputs = (jax.ShapeDtypeStruct(rhs.shape, values.dtype),
                   jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32),
                   jax.ShapeDtypeStruct((), real), jax.ShapeDtypeStruct((history,), real))
        call = jax.ffi.ffi_call(AMGX_SOLVE, outputs, vmap_method="sequential")
        x, iterations, status, norm, norms = call(
            solver.indptr, solver.indices, values, rhs, handle=np.int64(solver.id),
            config=text, reuse_setup=bool(reuse_setup))
        return _answer(rhs, x, iterations, status, norm, norms, kind)

    def service(values: jax.Array, rhs: jax.Array) -> tuple[jax.Array, SolveInfo]:
        if permutation is not None:
            values = values[permutation]
        if rhs.ndim == 1:
            return one(values, rhs)
        return jax.vmap(lambda column: one(values, column), in_axes=1, out_axes=(1, 0))(rhs)

    return service


def _answer(rhs: jax.Array, x: jax.Array, iterations: jax.Array, status: jax.Array,
            norm: jax.Array, norms: jax.Array, kind: str = "L2"
            ) -> tuple[jax.Array, SolveInfo]:
    """``x`` and the :class:`SolveInfo` of one AmgX solve from ``x = 0``.

    ``info.residual`` is AmgX's true residual ``‖rhs − A x‖`` relative to ``‖rhs‖``, both in
    the configuration's norm ``kind`` (AmgX's L2, L1 or LMAX); the history, AmgX's
    (recurrence) residuals relative to its first. An ``x`` whose residual is not below
    ``‖rhs‖`` (or not finite) is replaced by the initial guess, 0, with residual 1, whatever
    AmgX's status: never worse than the guess.
    """
    order = {"L1": 1, "L2": 2, "LMAX": jnp.inf}[kind]
    initial = jnp.linalg.norm(rhs, ord=order).astype(norm.dtype)
    relative = jnp.where(initial > 0, norm / jnp.where(initial > 0, initial, 1), 0)
    worse = ~(relative <= 1)
    x = jnp.where(worse, jnp.zeros_like(x), x)
    residual = jnp.where(worse, jnp.ones_like(relative), relative)
    history = norms / jnp.where(norms[:1] > 0, norms[:1], 1) if norms.shape[0] else norms
    reason = jnp.select(
        [status == Status.SUCCESS, status == Status.NOT_CONVERGED,
         (status == Status.DIVERGED) & ~jnp.isfinite(norm), status == Status.DIVERGED],
        [jnp.int32(FailureReason.NONE), jnp.int32(FailureReason.MAX_ITERS),
         jnp.int32(FailureReason.NONFINITE_RESIDUAL), jnp.int32(FailureReason.RESIDUAL_GROWTH)],
        jnp.int32(FailureReason.BACKEND_FAILED))
    return x, SolveInfo(iterations=iterations, residual=residual, status=status,
                        residual_history=history, failure_reason=reason,
                        rhs_inconsistency=jnp.full((), jnp.nan, norm.dtype),
                        initial_residual=initial)
