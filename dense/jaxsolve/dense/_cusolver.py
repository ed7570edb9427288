"""The cuSOLVER backend: every routine on one CUDA GPU, in place, through XLA FFI.

When a routine's matrix lives on a single CUDA device (no mesh, or a mesh of one device: a 1 × 1
grid), its services call NVIDIA cuSOLVER's dense API directly from C++ handlers
(``csrc/cusolver_handlers.cu``), one per routine:

=====================  ============================================================
family                 cuSOLVER
=====================  ============================================================
``"cholesky"``         ``cusolverDnXpotrf``, ``cusolverDnXpotrs``; log det and the status's
                       ``rcond`` from L's diagonal
``"lu"``               ``cusolverDnXgetrf``, ``cusolverDnXgetrs``; ``rcond`` from U's diagonal
``"syevd"``            ``cusolverDnXsyevd``; or, as backend ``"cusolver_lean"``,
                       ``cusolverDn<t>sytrd`` (``hetrd``), our tridiagonal eigensolver, cuBLAS
``"sygvd"``            ``cusolverDn<t>sygvd`` (``hegvd`` for complex)
``"qr"``               ``cusolverDnXgeqrf`` + ``<t>orgqr`` (``ungqr``)
``"least_squares"``    that QR, then a triangular solve (XLA's, cuBLAS)
``"gesvd"``            ``cusolverDnXgesvd``
``"polar"``            that SVD: ``U = W Vᴴ``, ``H = V diag(s) Vᴴ``
=====================  ============================================================

**In place.** Each handler writes its main result over its first operand (XLA FFI's
``input_output_aliases``): the Cholesky or LU factor over ``A``, the eigenvectors over ``A``, the
solution over ``b``. When the caller donates ``A`` (``donate=True``, or ``donate_argnums`` of an
outer ``jax.jit``), XLA gives the handler ``A``'s own buffer and no second ``n × n`` matrix is
allocated; otherwise XLA copies ``A`` first. JAX's arrays are row-major and cuSOLVER's
column-major, so cuSOLVER sees ``Aᵀ``; the handlers use that instead of transposing: for a
Hermitian ``A``, ``Aᵀ = conj(A)`` and its upper triangle is ``A``'s lower one (the eigenvectors
come out in place, conjugate-transposed in place by a small kernel); Cholesky (and the lean
``syevd``) mirror ``A``'s lower triangle into its upper one in place and use cuSOLVER's faster
``LOWER`` variants; an LU of ``Aᵀ`` solves ``A x = b`` with ``getrs('T')``. Only QR, least squares and the SVD of a
tall matrix transpose ``A`` once, out of place.

**syevd in one matrix of workspace** (``with dense.use_backend("cusolver_lean"):``, or
``JAXSOLVE_DENSE_BACKEND=cusolver_lean``; the other routines keep their backends).
``cusolverDnXsyevd`` asks for about four ``n × n`` matrices of workspace beside ``A`` (its
``ormtr`` alone three). The lean ``syevd`` reduces ``A`` to a real tridiagonal ``T = Qᴴ A Q`` in
place (``sytrd``, whose workspace is small), computes ``T``'s eigenvalues and eigenvectors ``Z``
with `jaxsolve.dense.eigh_tridiagonal`'s solver (bisection and inverse iteration, O(n) scratch)
into one ``n × n`` matrix of workspace (row-major, which its threads, one eigenvalue each,
write coalesced), applies ``Q`` to ``Z`` there in blocks of 256 reflectors (LAPACK's compact
``I - V S Vᴴ`` form, three cuBLAS products a block on ``Zᵀ``, O(256 n) workspace), and copies
the result, row-major as JAX reads it, into ``A``'s buffer: with ``donate=True`` a call holds
``A``, one more matrix and O(n). It is not the default: on the H200 (6 Dec, blocks of 128,
``Z`` column-major) it took 0.78 × native ``eigh``'s speed at N = 8192 and 0.94 × at 16384 in
float64; ``dense/tests/cusolver_gpu_test.py`` holds its GPU tests.

**Handles and workspaces** are cached per CUDA stream (so per device), in the native library:
a cusolverDn handle, one device workspace that grows to the largest size a call has needed, and
cuSOLVER's workspace sizes per routine, dtype and shape. A second call with the same shapes pays
for no setup. `jaxsolve.dense.clear_cache` frees them (after the devices finish), and so does
the interpreter's exit. The workspace is allocated with ``cudaMallocAsync``, outside XLA's
memory pool; `workspace_bytes` says how much it holds.

**No host synchronization.** cuSOLVER's ``info`` stays on the device: a small kernel fills
failed outputs with NaN, and the ``info`` of ``potrf``/``getrf`` is the `Status`'s. The other
routines report as the XLA reference backend does (a NaN check; ``sygvd``'s and
``least_squares``' diagnoses), so statuses mean the same on every backend.

**Vectorization.** ``jax.vmap`` over right-hand sides folds them into the columns of one solve
(`jaxsolve.autodiff`); over a stack of matrices each handler runs once per matrix, in a loop
(``vmap_method="sequential"``).

**Libraries.** cuSOLVER and cuBLAS come from NVIDIA's pip wheels (CUDA 13's
``nvidia-cusolver``, ``nvidia-cublas``, CUDA 12's ``nvidia-cusolver-cu12``,
``nvidia-cublas-cu12``, and those they need), which ``jaxsolve-dense[cuda13]`` and ``[cuda12]``
install (JAX's own ``jax[cuda13]``/``[cuda12]`` bring them too). They are loaded, with
``RTLD_GLOBAL``, the first time a routine runs on a GPU, before our handlers' library for the
CUDA major of JAX's plugin (``libjaxsolve_dense_cusolver_cuda<major>.so``); a missing wheel is a
``RuntimeError`` that names it. Importing `jaxsolve.dense` loads nothing.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import pathlib
import jax
import jax.numpy as jnp
import numpy as np

from jaxsolve.runtime import NativeLibrary, nvidia_library

from . import _xla
from ._arguments import Layout
from ._backend import CholeskyFactor, Decomposition, FactorServices, LUFactor, register

POTRF = "jaxsolve_dense_cusolver_potrf"
POTRS = "jaxsolve_dense_cusolver_potrs"
GETRF = "jaxsolve_dense_cusolver_getrf"
GETRS = "jaxsolve_dense_cusolver_getrs"
SYEVD = "jaxsolve_dense_cusolver_syevd"
LEAN_SYEVD = "jaxsolve_dense_cusolver_lean_syevd"
SYGVD = "jaxsolve_dense_cusolver_sygvd"
QR = "jaxsolve_dense_cusolver_qr"
GESVD = "jaxsolve_dense_cusolver_gesvd"

LIBRARY = NativeLibrary(
    "jaxsolve.dense",
    pathlib.Path(__file__).absolute().parent,
    "jaxsolve_dense_cusolver",
    {
        POTRF: "JaxsolveDenseCusolverPotrf",
        POTRS: "JaxsolveDenseCusolverPotrs",
        GETRF: "JaxsolveDenseCusolverGetrf",
        GETRS: "JaxsolveDenseCusolverGetrs",
        SYEVD: "JaxsolveDenseCusolverSyevd",
        LEAN_SYEVD: "JaxsolveDenseCusolverLeanSyevd",
        SYGVD: "JaxsolveDenseCusolverSygvd",
        QR: "JaxsolveDenseCusolverQr",
        GESVD: "JaxsolveDenseCusolverGesvd",
    },
    cpu=False,
)

# What libjaxsolve_dense_cusolver_cuda<major>.so needs, in load order: (path below nvidia/,
# soname, pip wheel), per CUDA major (CUDA 13's wheels share nvidia/cu13/lib, CUDA 12's have a
# folder each). cuSOLVERMp's preloads extend these.
CUDA_MATH_LIBRARIES = {
    12: (
        ("nvjitlink/lib/libnvJitLink.so.12", "libnvJitLink.so.12", "nvidia-nvjitlink-cu12"),
        ("cublas/lib/libcublasLt.so.12", "libcublasLt.so.12", "nvidia-cublas-cu12"),
        ("cublas/lib/libcublas.so.12", "libcublas.so.12", "nvidia-cublas-cu12"),
        ("cusparse/lib/libcusparse.so.12", "libcusparse.so.12", "nvidia-cusparse-cu12"),
        ("cusolver/lib/libcusolver.so.11", "libcusolver.so.11", "nvidia-cusolver-cu12"),
    ),
    13: (
        ("cu13/lib/libnvJitLink.so.13", "libnvJitLink.so.13", "nvidia-nvjitlink"),
        ("cu13/lib/libcublasLt.so.13", "libcublasLt.so.13", "nvidia-cublas"),
        ("cu13/lib/libcublas.so.13", "libcublas.so.13", "nvidia-cublas"),
        ("cu13/lib/libcusparse.so.12", "libcusparse.so.12", "nvidia-cusparse"),
        ("cu13/lib/libcusolver.so.12", "libcusolver.so.12", "nvidia-cusolver"),
    ),
}


@functools.cache
def _missing_wheels(major: int) -> tuple[str, ...]:
    """Loads CUDA ``major``'s math libraries from NVIDIA's wheels, once; the missing wheels."""
    missing = []
    for relative, soname, wheel in CUDA_MATH_LIBRARIES[major]:
        path = nvidia_library(relative)
        if path is None:
            missing.append(f"{wheel} ({soname})")
            continue
        ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    return tuple(missing)


def require() -> None:
    """Loads cuSOLVER and our handlers for the GPU, once; call before tracing a routine.

    Raises:
      RuntimeError: a wheel of NVIDIA's is missing (named), or our CUDA library cannot load.
    """
    major = LIBRARY.cuda_major  # the major of the handlers' library, which binds to these
    if major is None:
        LIBRARY.require_cuda("jaxsolve.dense's cuSOLVER backend")  # raises, saying why
    missing = _missing_wheels(major)
    if missing:
        raise RuntimeError(
            "jaxsolve.dense cannot run on the GPU: NVIDIA's pip wheels "
            f"{', '.join(missing)} are not installed (looked in the nvidia folders on "
            f"sys.path). Install them: pip install 'jaxsolve-dense[cuda{major}]'."
        )
    LIBRARY.require_cuda("jaxsolve.dense's cuSOLVER backend")


def clear_cache() -> None:
    """Frees the cached cuSOLVER handles and workspaces (waits for the devices first)."""
    if LIBRARY.cuda is not None:
        LIBRARY.cuda.JaxsolveDenseCusolverClear()


def workspace_bytes() -> int:
    """Bytes of device workspace the cache holds now, over all devices (0 before any call)."""
    if LIBRARY.cuda is None:
        return 0
    LIBRARY.cuda.JaxsolveDenseCusolverWorkspaceBytes.restype = ctypes.c_int64
    return int(LIBRARY.cuda.JaxsolveDenseCusolverWorkspaceBytes())


atexit.register(clear_cache)


# ------------------------------------------------------------------------ FFI calls


def _like(shape: tuple[int, ...], dtype) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


def _real(dtype) -> np.dtype:
    return np.finfo(dtype).dtype


def _call(target: str, results, *operands, aliases: dict[int, int], **attributes):
    """One handler call; a stack of matrices (``jax.vmap``) is a loop of calls."""
    return jax.ffi.ffi_call(target, results, input_output_aliases=aliases,
                            vmap_method="sequential")(*operands, **attributes)


def _columns(rhs: jax.Array) -> jax.Array:
    """``(n, k)`` right-hand sides as the handlers take them: ``(k, n)``, column-major ``n × k``."""
    return rhs.T


# ------------------------------------------------------------------------ cholesky


def potrf(a: jax.Array) -> CholeskyFactor:
    """``A = L Lᴴ`` from ``A``'s lower triangle, with ``triangle = Lᵀ``: the column-major ``L``
    that cuSOLVER wrote over ``A``'s buffer, in JAX's row-major view (upper triangular, zero
    below the diagonal). NaN when ``info > 0``."""
    lt, info = _call(POTRF, (_like(a.shape, a.dtype), _like((), jnp.int32)), a, aliases={0: 0})
    return CholeskyFactor(triangle=lt, info=info)


def potrs(factor: CholeskyFactor, rhs: jax.Array) -> jax.Array:
    b = _columns(rhs)
    x = _call(POTRS, _like(b.shape, b.dtype), factor.triangle, b, aliases={1: 0})
    return x.T


def cholesky_diagonal(factor: CholeskyFactor) -> jax.Array:
    """``L``'s diagonal, which ``Lᵀ`` shares (``n`` elements read, not the factor)."""
    return jnp.real(jnp.diagonal(factor.triangle))


# ------------------------------------------------------------------------------ lu


def getrf(a: jax.Array) -> LUFactor:
    """``getrf`` of ``Aᵀ`` (``A``'s buffer read column-major): ``Aᵀ = P L U``.

    ``lu`` holds ``L`` and ``U`` packed as LAPACK packs them, column-major, i.e. transposed in
    JAX's row-major view (its diagonal is ``U``'s); ``pivots`` are LAPACK's row interchanges of
    ``Aᵀ``, 0-based. NaN when ``info > 0``. `_xla.lu_logdet` reads it as it reads XLA's factor:
    ``det Aᵀ = det A``.
    """
    n = a.shape[0]
    lu, pivots, info = _call(
        GETRF, (_like(a.shape, a.dtype), _like((n,), jnp.int32), _like((), jnp.int32)), a,
        aliases={0: 0})
    return LUFactor(lu=lu, pivots=pivots, info=info)


def getrs(factor: LUFactor, rhs: jax.Array, transpose: bool) -> jax.Array:
    # A x = b is (Aᵀ)ᵀ x = b: getrs('T') with the factor of Aᵀ; Aᵀ x = b is getrs('N').
    b = _columns(rhs)
    x = _call(GETRS, _like(b.shape, b.dtype), factor.lu, factor.pivots, b, aliases={2: 0},
              transpose=np.int64(bool(transpose)))
    return x.T


# -------------------------------------------------------------------- eigensolvers


def syevd(a: jax.Array, target: str = SYEVD) -> tuple[jax.Array, jax.Array]:
    n = a.shape[0]
    v, w = _call(target, (_like(a.shape, a.dtype), _like((n,), _real(a.dtype))), a,
                 aliases={0: 0})
    return w, v


def eigenvalues_info(info):
    """``info`` (the XLA backend's, for ``(w, V)``) reading only ``w``.

    The handlers fill ``w`` and ``V`` with NaN together, so ``w`` says what both would, and the
    check need not read all of ``V`` (whose reduction would cost memory beside the in-place
    ``V``).
    """
    return lambda inputs, outputs: info(inputs, outputs[:1])


def sygvd(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    n = a.shape[0]
    v, _, w = _call(
        SYGVD, (_like(a.shape, a.dtype), _like(b.shape, b.dtype), _like((n,), _real(a.dtype))),
        a, b, aliases={0: 0, 1: 1})
    return w, v


# ------------------------------------------------------------------------ QR, SVD


def geqrf(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Reduced ``A = Q R``; ``A`` is transposed once (cuSOLVER has no LQ to spare it)."""
    m, n = a.shape
    k = min(m, n)
    work, r = _call(QR, (_like((n, m), a.dtype), _like((n, k), a.dtype)), a.T, aliases={0: 0})
    # Q is column-major m × k in the leading m k elements of the work buffer.
    q = work.T if m >= n else work.reshape(-1)[: m * k].reshape(k, m).T
    return q, r.T


def gesvd(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Reduced ``A = U diag(s) Vᴴ``. cuSOLVER's gesvd takes tall matrices only: a wide (or
    square) ``A`` is already one, read column-major (``Aᵀ = conj(V) diag(s) Uᵀ``), in place; a
    tall one is transposed first."""
    m, n = a.shape
    real = _real(a.dtype)
    if m <= n:
        vh, s, u = _call(GESVD, (_like((m, n), a.dtype), _like((m,), real),
                                 _like((m, m), a.dtype)), a, aliases={0: 0})
        return u, s, vh
    ut, s, vt = _call(GESVD, (_like((n, m), a.dtype), _like((n,), real), _like((n, n), a.dtype)),
                      a.T, aliases={0: 0})
    return ut.T, s, vt.T


# -------------------------------------------------------------------- registration


def on_one_gpu(layout: Layout, dtype: np.dtype) -> bool:
    """Whether cuSOLVER computes a call: the matrix is on one GPU (a 1 × 1 grid), and our
    cuSOLVER library is built for the CUDA major of JAX's plugin (12 and 13 are)."""
    return layout.grid == (1, 1) and layout.platform == "gpu" and LIBRARY.ships_cuda_library()


def _host_has_gpu() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:  # JAX has no GPU backend here
        return False


def _loaded(services):
    """A factory of `services` that loads the libraries first where a GPU can run them (a host
    without one may still lower the program for CUDA, e.g. a traced call's CUDA branch)."""
    def make(layout: Layout, dtype: np.dtype):
        if _host_has_gpu():
            require()
        return services

    return make


_SERVICES = {
    "cholesky": FactorServices(
        potrf, potrs, functools.partial(_xla.cholesky_logdet, diagonal=cholesky_diagonal),
        cholesky_diagonal),
    "lu": FactorServices(getrf, getrs, _xla.lu_logdet, _xla.lu_diagonal),
    "syevd": Decomposition(syevd, eigenvalues_info(_xla.syevd_info)),
    "sygvd": Decomposition(sygvd, eigenvalues_info(_xla.sygvd_info)),
    "least_squares": Decomposition(functools.partial(_xla.gels, qr=geqrf), _xla.gels_info),
    "qr": Decomposition(geqrf, _xla.decomposition_info),
    "gesvd": Decomposition(gesvd, _xla.decomposition_info),
    "polar": Decomposition(functools.partial(_xla.polar, svd=gesvd), _xla.decomposition_info),
}

# Registered first, so that "cusolver" stays the default on one GPU: use_backend picks it.
register("syevd", "cusolver_lean",
         _loaded(Decomposition(functools.partial(syevd, target=LEAN_SYEVD),
                               eigenvalues_info(_xla.syevd_info))),
         applies=on_one_gpu, clear=clear_cache, load=require, workspace=workspace_bytes)
for _family, _services in _SERVICES.items():
    register(_family, "cusolver", _loaded(_services), applies=on_one_gpu, clear=clear_cache,
             load=require, workspace=workspace_bytes)
