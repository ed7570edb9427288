"""The cuSOLVERMp backend: every dense routine, on a 2D process grid of GPUs.

Every service runs as one XLA program over the caller's mesh:

1. `jaxsolve.layout.to_block_cyclic` moves the sharded matrix into the 2D block-cyclic storage
   of a `~jaxsolve.layout.BlockCyclicPlan` (tile ``T_A``; device ``(p, q)`` of the mesh is
   process ``(p, q)`` of the grid); on a 1 × 1 grid with whole tiles,
   `jaxsolve.layout.local_row_to_column_major` does it in place;
2. inside `jax.shard_map`, each device's XLA FFI handler
   (``libjaxsolve_dense_cusolvermp_cuda<major>.so``, for CUDA 12 and 13) calls cuSOLVERMp on its local matrix; all the
   grid's devices are the ranks of one of jaxsolve's own NCCL communicators
   (`jaxsolve.sharding.nccl_communicator`), rank ``p * P_c + q``
   (``CUSOLVERMP_GRID_MAPPING_ROW_MAJOR``), whether one process drives them all or each has
   its own;
3. results go back with `jaxsolve.layout.from_block_cyclic` (or the in-place inverse).
   Factors stay in block-cyclic
   storage (a ``(P_r n_loc, P_c m_loc)`` array split ``P(row_axis, col_axis)``: each device's
   block is its column-major local matrix), so `cho_solve`/`lu_solve` and every derivative
   solve reuse them without moving the matrix again.

The handlers cache cuSOLVERMp's handle, grid, descriptors and workspaces per (device,
communicator, grid, dtype, shape, tile); `jaxsolve.dense.clear_cache` and interpreter exit free
them. ``info`` stays on the device (no host synchronization) until a `Status` is read; only
a workspace that must grow, or a potrf/getrf that fails (cuSOLVERMp then returns an error
status beside ``info``), makes a handler wait for its stream.

cuSOLVERMp (and the cuBLASMp and NCCL it needs) come from NVIDIA's pip wheels, preloaded the
first time this backend is used (``pip install 'jaxsolve-dense[cuda13]'``, or ``[cuda12]``); a
missing one is an error naming its wheel. Which backend runs: this one by default on meshes of several GPUs; on
one GPU only when asked, with `jaxsolve.dense.use_backend` (``"cusolvermp"``).
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import pathlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from jaxsolve import layout as jl
from jaxsolve import sharding as js
from jaxsolve.runtime import cuda_major, preload_nvidia_library
from jaxsolve.sharding import nccl_communicator

from . import _cusolver, _xla
from ._arguments import SUPPORTED_DTYPES, Layout
from ._backend import Decomposition, FactorServices, preferred_backend, register

NAME = "cusolvermp"

_TARGETS = {
    "potrf": "JaxsolveDenseCusolverMpPotrf",
    "potrs": "JaxsolveDenseCusolverMpPotrs",
    "getrf": "JaxsolveDenseCusolverMpGetrf",
    "getrs": "JaxsolveDenseCusolverMpGetrs",
    "syevd": "JaxsolveDenseCusolverMpSyevd",
    "sygvd": "JaxsolveDenseCusolverMpSygvd",
    "gels": "JaxsolveDenseCusolverMpGels",
    "geqrf": "JaxsolveDenseCusolverMpGeqrf",
    "orgqr": "JaxsolveDenseCusolverMpOrgqr",
    "gesvd": "JaxsolveDenseCusolverMpGesvd",
}

# cuBLASMp 0.10 (cuSOLVERMp 0.9.1's) calls ncclCommQueryProperties, new in NCCL 2.29.2.
_MIN_NCCL = 22902

# What cuSOLVERMp needs, in load order: (path below nvidia/, soname, pip wheel), per CUDA
# major: the runtime, cuSOLVER's libraries (which usually come with JAX's CUDA plugin), then
# cuBLASMp and cuSOLVERMp (our extra's).
_PRELOADS = {
    12: (
        ("cuda_runtime/lib/libcudart.so.12", "libcudart.so.12", "nvidia-cuda-runtime-cu12"),
        *_cusolver.CUDA_MATH_LIBRARIES[12],
        ("cublasmp/cu12/lib/libcublasmp.so.0", "libcublasmp.so.0", "nvidia-cublasmp-cu12"),
        ("cu12/lib/libcusolverMp.so.0", "libcusolverMp.so.0", "nvidia-cusolvermp-cu12"),
    ),
    13: (
        ("cu13/lib/libcudart.so.13", "libcudart.so.13", "nvidia-cuda-runtime"),
        *_cusolver.CUDA_MATH_LIBRARIES[13],
        ("cublasmp/cu13/lib/libcublasmp.so.0", "libcublasmp.so.0", "nvidia-cublasmp-cu13"),
        ("cu13/lib/libcusolverMp.so.0", "libcusolverMp.so.0", "nvidia-cusolvermp-cu13"),
    ),
}


@functools.cache
def library() -> ctypes.CDLL:
    """The handlers' library, loaded once after NCCL and cuSOLVERMp, its targets registered.

    Raises:
      RuntimeError: a library is missing (the message names its pip wheel).
    """
    major = cuda_major()
    if major not in _PRELOADS:
        raise RuntimeError(f"jaxsolve.dense's cuSOLVERMp backend is not built for CUDA {major}.")
    version = js.nccl_version()  # loads NCCL and our communicators: the handlers bind to them
    if version < _MIN_NCCL:
        raise RuntimeError(
            f"jaxsolve.dense's cuSOLVERMp backend needs NCCL >= 2.29.2 (cuBLASMp 0.10 calls "
            f"ncclCommQueryProperties), but the process has NCCL {version}: install "
            f"nvidia-nccl-cu{major}>=2.29.2, or preload a newer libnccl.so.2 (LD_PRELOAD).")
    for relative, soname, wheel in _PRELOADS[major]:
        preload_nvidia_library(relative, soname, wheel)
    name = f"libjaxsolve_dense_cusolvermp_cuda{major}.so"
    try:
        loaded = ctypes.CDLL(str(pathlib.Path(__file__).absolute().parent / name))
    except OSError as error:
        raise RuntimeError(f"jaxsolve.dense: cannot load {name}: {error}") from error
    loaded.JaxsolveDenseCusolverMpWorkspaceBytes.restype = ctypes.c_int64
    for routine, symbol in _TARGETS.items():
        jax.ffi.register_ffi_target(_target(routine), jax.ffi.pycapsule(getattr(loaded, symbol)),
                                    platform="CUDA")
    js.on_destroy_nccl_communicators(clear)
    atexit.register(clear)
    return loaded


def _target(routine: str) -> str:
    return f"jaxsolve_dense_cusolvermp_{routine}"


def clear() -> None:
    """Frees the cached handles, grids, descriptors and workspaces (if the library is loaded)."""
    if library.cache_info().currsize:
        library().JaxsolveDenseCusolverMpClear()


def workspace_bytes() -> int:
    """Bytes of the device workspaces the handlers hold (cudaMalloc'ed, outside XLA)."""
    if not library.cache_info().currsize:
        return 0
    return library().JaxsolveDenseCusolverMpWorkspaceBytes()


def cached_grids() -> int:
    """How many (device, grid) entries the handlers' cache holds (0 before first use)."""
    if not library.cache_info().currsize:
        return 0
    return library().JaxsolveDenseCusolverMpCachedGrids()


# ----------------------------------------------------------------------------- the grid


class Grid(NamedTuple):
    """A layout seen as a cuSOLVERMp process grid.

    Attributes:
      layout: the routine's `Layout` (mesh and specs).
      axes: ``(row_axis, col_axis)``: mesh axis names, or None for a dimension not split.
      shape: ``(P_r, P_c)``.
      devices: the grid's devices in rank order (row-major over the grid).
    """

    layout: Layout
    axes: tuple[str | None, str | None]
    shape: tuple[int, int]
    devices: tuple[jax.Device, ...]

    @property
    def tile(self) -> int:
        return self.layout.tile

    @property
    def split_axes(self) -> tuple[str, ...]:
        """The mesh axes the grid spans (for collectives)."""
        return tuple(axis for axis in self.axes if axis is not None)

    def plan(self, m: int, n: int) -> jl.BlockCyclicPlan:
        return jl.BlockCyclicPlan(m, n, self.tile, *self.shape)

    def storage_spec(self) -> P:
        return P(*self.axes, None, None)

    def matrix_spec(self) -> P:
        return P(*self.axes)

    def position(self) -> tuple[jax.Array, jax.Array]:
        """``(p, q)`` of the calling device, inside `jax.shard_map`."""
        return tuple(jnp.int32(0) if axis is None else jax.lax.axis_index(axis)
                     for axis in self.axes)

    def shard_map(self, fn, in_specs, out_specs):
        return jax.shard_map(fn, mesh=self.layout.mesh, in_specs=in_specs, out_specs=out_specs,
                             check_vma=False)


def grid_of(layout: Layout) -> Grid:
    """The process grid of `layout`: its mesh's devices laid out ``(P_r, P_c)``, rank order."""
    mesh = layout.mesh
    axes = tuple(layout.matrix_spec)
    names = tuple(mesh.axis_names)
    order = [names.index(a) for a in axes if a is not None]
    order += [i for i in range(len(names)) if i not in order]
    shape = layout.grid
    devices = np.asarray(mesh.devices).transpose(order).reshape(shape)
    return Grid(layout, axes, shape, tuple(devices.flat))


def applies(layout: Layout, dtype: np.dtype) -> bool:
    """This backend computes on meshes of GPUs: by default of several, when asked of one."""
    if layout.mesh is None or np.dtype(dtype) not in SUPPORTED_DTYPES:
        return False
    if any(d.platform != "gpu" for d in layout.mesh.devices.flat):
        return False
    return layout.mesh.devices.size > 1 or preferred_backend() == NAME


def prepare(layout: Layout) -> None:
    """Loads the libraries and creates the grid's communicator before a call is traced.

    In a run of several processes the communicator's unique id travels through a JAX
    collective, which cannot run while ``jax.jit`` traces; here, called by the routines before
    they trace, it can. (Inside a caller's own ``jax.jit``, create it first with
    `jaxsolve.sharding.nccl_communicator` on the mesh's devices, row-major over the grid.)
    """
    if applies(layout, np.dtype(np.float32)):
        library()
        nccl_communicator(grid_of(layout).devices)


def _attributes(grid: Grid, n: int) -> dict[str, Any]:
    library()
    communicator = nccl_communicator(grid.devices)
    return dict(comm=np.int64(communicator.key), grid_rows=np.int64(grid.shape[0]),
                grid_cols=np.int64(grid.shape[1]), n=np.int64(n), tile=np.int64(grid.tile))


def _call(routine: str, results, *operands, aliases=None, **attributes):
    return jax.ffi.ffi_call(
        _target(routine), results, input_output_aliases=aliases or {},
        vmap_method="sequential")(*operands, **attributes)


def _real(dtype) -> np.dtype:
    return np.dtype(jnp.finfo(dtype).dtype)


def _agreed(info: jax.Array, grid: Grid) -> jax.Array:
    """One ``info`` for the whole grid (the largest of the devices')."""
    return jax.lax.pmax(info, grid.split_axes)


def matrix_storage(grid: Grid, x: jax.Array) -> tuple[jax.Array, jl.BlockCyclicPlan]:
    """``x`` ``(m, n)`` in the block-cyclic storage of its plan on `grid`, and the plan.

    The storage is a ``(P_r n_loc, P_c m_loc)`` array split ``P(row_axis, col_axis)``: the
    block of device ``(p, q)`` is its ``(m_loc, n_loc)`` local matrix in column-major order.
    When the local matrix is the device's own block (a 1 × 1 grid, whole tiles), it is
    `jaxsolve.layout.local_row_to_column_major`'s in-place transpose, which with a donated
    ``x`` allocates no second matrix.
    """
    plan = grid.plan(*x.shape)
    if _in_place(grid, plan):
        return grid.shard_map(functools.partial(jl.local_row_to_column_major, tile=plan.tile),
                              grid.matrix_spec(), grid.matrix_spec())(x), plan
    storage = jl.to_block_cyclic(x, plan, grid.layout.mesh, grid.axes)
    return grid.shard_map(lambda block: block[0, 0], grid.storage_spec(),
                          grid.matrix_spec())(storage), plan


def matrix_from_storage(grid: Grid, storage: jax.Array, plan: jl.BlockCyclicPlan) -> jax.Array:
    """The inverse of `matrix_storage`: the ``(m, n)`` matrix, split like the caller's."""
    if _in_place(grid, plan):
        return grid.shard_map(functools.partial(jl.local_column_to_row_major, tile=plan.tile),
                              grid.matrix_spec(), grid.matrix_spec())(storage)
    storage = grid.shard_map(lambda block: block[None, None], grid.matrix_spec(),
                             grid.storage_spec())(storage)
    return jl.from_block_cyclic(storage, plan, grid.layout.mesh, grid.axes)


def _in_place(grid: Grid, plan: jl.BlockCyclicPlan) -> bool:
    """Whether the device's block is its local matrix (no data moves between devices), and
    jaxsolve.layout's in-place transpose has a library for JAX's CUDA plugin (CUDA 12 and 13;
    without one the matrix moves by `jaxsolve.layout.to_block_cyclic`, a copy)."""
    return (grid.shape == (1, 1) and plan.padded_shape == (plan.m, plan.n)
            and jl.ships_cuda_library())


def _rhs_storage(grid: Grid, rhs: jax.Array):
    """``rhs`` ``(n, k)`` in block-cyclic storage, its columns padded to split over ``P_c``."""
    k = rhs.shape[1]
    columns = -(-k // grid.shape[1]) * grid.shape[1]
    rhs = jnp.pad(rhs, ((0, 0), (0, columns - k)))
    rhs = jax.lax.with_sharding_constraint(
        rhs, jax.sharding.NamedSharding(grid.layout.mesh, grid.matrix_spec()))
    storage, plan = matrix_storage(grid, rhs)
    return storage, plan, k


def _diagonal_tables(grid: Grid, n: int) -> tuple[np.ndarray, ...]:
    """Per device ``(p, q)``: the global diagonal entries it holds, and where.

    ``(index, row, column)``, each of shape ``(P_r, P_c, d)``: global index ``i`` of entry
    ``(i, i)`` and its local row and column, padded with ``-1``.
    """
    plan = grid.plan(n, n)
    i = np.arange(n)
    p, q, li, lj = (np.asarray(v) for v in plan.to_local(i, i))
    held = [[np.flatnonzero((p == a) & (q == b)) for b in range(grid.shape[1])]
            for a in range(grid.shape[0])]
    width = max(1, max(len(idx) for row in held for idx in row))
    tables = tuple(np.full((*grid.shape, width), -1, np.int32) for _ in range(3))
    for a, row in enumerate(held):
        for b, idx in enumerate(row):
            for table, values in zip(tables, (idx, li[idx], lj[idx])):
                table[a, b, :len(idx)] = values
    return tables


def _diagonal(grid: Grid, storage: jax.Array, n: int) -> jax.Array:
    """The diagonal ``(n,)`` of a square matrix in block-cyclic storage, replicated."""
    tables = _diagonal_tables(grid, n)

    def per_device(block):  # block: (local columns, local rows), column-major local matrix
        p, q = grid.position()
        index, rows, cols = (jnp.asarray(t)[p, q] for t in tables)
        valid = index >= 0
        values = jnp.where(valid, block[jnp.maximum(cols, 0), jnp.maximum(rows, 0)], 0)
        diagonal = jnp.zeros((n,), block.dtype).at[jnp.where(valid, index, n)].add(
            values, mode="drop")
        return jax.lax.psum(diagonal, grid.split_axes)

    return grid.shard_map(per_device, grid.matrix_spec(), P())(storage)


def _stored_diagonal(factor: CholeskyFactor | LUFactor) -> jax.Array:
    """The factor's diagonal, gathered once when it was computed (`_diagonal`, replicated)."""
    return factor.diagonal


def _local_factor_call(grid: Grid, routine: str, a: jax.Array, extra_results=()):
    """``routine`` (potrf, getrf) on `a` in place: ``(storage, *extra, info)``, info agreed."""
    storage, _ = matrix_storage(grid, a)
    attributes = _attributes(grid, a.shape[0])
    split = grid.matrix_spec()

    def per_device(local):
        results = (jax.ShapeDtypeStruct(local.shape, local.dtype),
                   *(r(local) for r in extra_results), jax.ShapeDtypeStruct((), jnp.int32))
        *outputs, info = _call(routine, results, local, aliases={0: 0}, **attributes)
        return (*outputs, _agreed(info, grid))

    specs = (split, *[split] * len(extra_results), P())
    return grid.shard_map(per_device, split, specs)(storage)


def _local_solve_call(grid: Grid, routine: str, factors: tuple[jax.Array, ...], n: int,
                      rhs: jax.Array) -> jax.Array:
    """``routine`` (potrs, getrs) with the factor's arrays on ``rhs`` ``(n, k)``."""
    storage, plan, k = _rhs_storage(grid, rhs)
    attributes = dict(_attributes(grid, n), nrhs=np.int64(plan.n))
    split = grid.matrix_spec()

    def per_device(*blocks):
        *factor_blocks, local = blocks
        x, _ = _call(routine, (jax.ShapeDtypeStruct(local.shape, local.dtype),
                               jax.ShapeDtypeStruct((), jnp.int32)),
                     *factor_blocks, local, aliases={len(factor_blocks): 0}, **attributes)
        return x

    x = grid.shard_map(per_device, (split,) * (len(factors) + 1), split)(*factors, storage)
    return matrix_from_storage(grid, x, plan)[:, :k]


# ----------------------------------------------------------------------------- cholesky


class CholeskyFactor(NamedTuple):
    """``A = L Lᴴ``: ``L`` in block-cyclic storage (each device's block its local matrix),
    its diagonal (which gives ``n`` and ``log det A``), and potrf's ``info``."""

    storage: jax.Array
    diagonal: jax.Array
    info: jax.Array


def _cholesky(layout: Layout, dtype: np.dtype) -> FactorServices:
    grid = grid_of(layout)

    def factor(a: jax.Array) -> CholeskyFactor:
        l, native = _local_factor_call(grid, "potrf", a)
        diagonal = _diagonal(grid, l, a.shape[0])
        # potrf's info: the first leading minor that is not positive definite, where the
        # factor's diagonal stops being positive.
        info = _checked_info(native, _first(~(jnp.real(diagonal) > 0)))
        return CholeskyFactor(jnp.where(info == 0, l, jnp.nan),
                              jnp.where(info == 0, jnp.real(diagonal), jnp.nan), info)

    def solve(factor: CholeskyFactor, rhs: jax.Array) -> jax.Array:
        return _local_solve_call(grid, "potrs", (factor.storage,), factor.diagonal.shape[0], rhs)

    logdet = functools.partial(_xla.cholesky_logdet, diagonal=_stored_diagonal)
    return FactorServices(factor, solve, logdet, _stored_diagonal)


# ------------------------------------------------------------------------------------ lu


class LUFactor(NamedTuple):
    """``P A = L U`` in block-cyclic storage, getrf's pivots (int64 as int32 pairs, per
    device its local rows'), ``U``'s diagonal, the number of row swaps, and ``info``."""

    storage: jax.Array
    pivots: jax.Array
    diagonal: jax.Array
    swaps: jax.Array
    info: jax.Array


def _gathered_pivots(grid: Grid, pivots: jax.Array, n: int) -> jax.Array:
    """getrf's pivots as one replicated ``(n,)`` vector, 0-based (LAPACK's ``ipiv - 1``).

    cuSOLVERMp, like ScaLAPACK, leaves the pivot of global row ``i`` (the 1-based global row
    it was swapped with) on the devices that hold row ``i``, in every process column.
    """
    plan = grid.plan(n, n)
    local_rows = plan.local_shape[0]
    rows = np.full((grid.shape[0], local_rows), n, np.int32)  # n: a padding row, dropped
    for p in range(grid.shape[0]):
        global_rows = np.asarray(plan.to_global(p, 0, np.arange(local_rows), 0)[0])
        rows[p] = np.where(global_rows < n, global_rows, n)

    def per_device(block):  # (local rows, 2): the low words hold the (1-based) pivots
        p, q = grid.position()
        mine = jnp.zeros((n,), jnp.int32).at[jnp.asarray(rows)[p]].set(
            block[:, 0] - 1, mode="drop")
        return jax.lax.psum(jnp.where(q == 0, mine, 0), grid.split_axes)

    return grid.shard_map(per_device, grid.matrix_spec(), P())(pivots)


def _first(bad: jax.Array) -> jax.Array:
    """LAPACK-style info: 1 + the first index where `bad`, or 0."""
    return jnp.where(jnp.any(bad), jnp.argmax(bad) + 1, 0).astype(jnp.int32)


def _checked_info(native: jax.Array, from_diagonal: jax.Array) -> jax.Array:
    """The factorization's info: the diagonal's verdict (LAPACK's, exactly), else cuSOLVERMp's.

    cuSOLVERMp leaves ``info`` at 0 for some failures that LAPACK reports (an exactly
    singular ``U``, measured on the H200), so the factor's diagonal decides first.
    """
    return jnp.where(from_diagonal > 0, from_diagonal, native)


def _lu(layout: Layout, dtype: np.dtype) -> FactorServices:
    grid = grid_of(layout)

    def factor(a: jax.Array) -> LUFactor:
        n = a.shape[0]
        pivots = lambda local: jax.ShapeDtypeStruct((local.shape[1], 2), jnp.int32)  # noqa: E731
        lu, ipiv, native = _local_factor_call(grid, "getrf", a, (pivots,))
        diagonal = _diagonal(grid, lu, n)
        # getrf's info: the first exactly zero pivot U(i, i).
        info = _checked_info(native, _first(~(jnp.abs(diagonal) > 0)))
        swaps = jnp.sum(_gathered_pivots(grid, ipiv, n) != jnp.arange(n, dtype=jnp.int32))
        return LUFactor(jnp.where(info == 0, lu, jnp.nan), ipiv,
                        jnp.where(info == 0, diagonal, jnp.nan), swaps.astype(jnp.int32), info)

    def solve(factor: LUFactor, rhs: jax.Array, transpose: bool) -> jax.Array:
        n = factor.diagonal.shape[0]
        if not transpose:
            return _local_solve_call(grid, "getrs", (factor.storage, factor.pivots), n, rhs)
        # cuSOLVERMp's getrs solves only with A itself (trans 'T' is CUSOLVER_STATUS_NOT_
        # SUPPORTED, measured on the H200). Aᵀ x = b, needed by reverse-mode derivatives, is
        # solved by XLA with the same factor, gathered: no second factorization.
        lu = matrix_from_storage(grid, factor.storage, grid.plan(n, n))
        pivots = _gathered_pivots(grid, factor.pivots, n)
        permutation = jax.lax.linalg.lu_pivots_to_permutation(pivots, n)
        return _xla.getrs(_xla.LUFactor(lu, pivots, permutation, factor.info), rhs, True)

    def logdet(factor: LUFactor) -> tuple[jax.Array, jax.Array]:
        diagonal = factor.diagonal
        magnitude = jnp.abs(diagonal)
        parity = jnp.where(factor.swaps % 2 == 0, 1, -1).astype(diagonal.dtype)
        if jnp.iscomplexobj(diagonal):
            sign = parity * jnp.prod(diagonal / magnitude.astype(diagonal.dtype))
        else:
            sign = parity * jnp.prod(jnp.sign(diagonal))
        return sign, _xla.log_abs_product(magnitude)

    return FactorServices(factor, solve, logdet, _stored_diagonal)


# -------------------------------------------------------------------------- eigensolvers


def _eigen(routine: str, layout: Layout, dtype: np.dtype, info) -> Decomposition:
    grid = grid_of(layout)

    def decompose(*matrices: jax.Array) -> tuple[jax.Array, jax.Array]:
        n = matrices[0].shape[0]
        storages = [matrix_storage(grid, m)[0] for m in matrices]
        attributes = _attributes(grid, n)
        split = grid.matrix_spec()

        def per_device(*locals_):
            like = jax.ShapeDtypeStruct(locals_[0].shape, locals_[0].dtype)
            results = (*[like] * len(locals_), jax.ShapeDtypeStruct((n,), _real(dtype)), like,
                       jax.ShapeDtypeStruct((), jnp.int32))
            *_, w, z, status = _call(routine, results, *locals_,
                                     aliases={i: i for i in range(len(locals_))}, **attributes)
            return w, z, _agreed(status, grid)

        w, z, status = grid.shard_map(per_device, (split,) * len(storages), (P(), split, P()))(
            *storages)
        v = matrix_from_storage(grid, z, grid.plan(n, n))
        return jnp.where(status == 0, w, jnp.nan), v

    return Decomposition(decompose, info)


# ---------------------------------------------------------------- least squares and QR


def _splits(grid: Grid, shape: tuple[int, ...]) -> bool:
    """Whether a matrix of `shape` splits evenly over the grid (what `jax.shard_map` needs)."""
    return shape[0] % grid.shape[0] == 0 and shape[1] % grid.shape[1] == 0


def _like(x: jax.Array, shape: tuple[int, ...] | None = None, dtype=None):
    return jax.ShapeDtypeStruct(x.shape if shape is None else shape,
                                x.dtype if dtype is None else dtype)


def _least_squares(layout: Layout, dtype: np.dtype) -> Decomposition:
    """``gels`` for ``m >= n``. A wide matrix (the derivative's ``Aᴴ`` of a tall one), which
    cuSOLVERMp's gels does not take, or one the grid cannot split, goes to the XLA reference."""
    grid = grid_of(layout)
    split = grid.matrix_spec()

    def solve_least_squares(a: jax.Array, rhs: jax.Array) -> jax.Array:
        if rhs.ndim == 1:
            return solve_least_squares(a, rhs[:, None])[:, 0]
        m, n = a.shape
        if m < n or not _splits(grid, a.shape):
            return _xla.gels(a, rhs)
        storage, _ = matrix_storage(grid, a)
        rhs_storage, plan, k = _rhs_storage(grid, rhs)
        attributes = dict(_attributes(grid, n), m=np.int64(m), nrhs=np.int64(plan.n))

        def per_device(local_a, local_b):
            results = (_like(local_a), _like(local_b), _like(local_a, (), jnp.int32))
            _, x, info = _call("gels", results, local_a, local_b, aliases={0: 0, 1: 1},
                               **attributes)
            return x, _agreed(info, grid)

        x, info = grid.shard_map(per_device, (split, split), (split, P()))(storage, rhs_storage)
        x = matrix_from_storage(grid, x, plan)[:n, :k]
        return jnp.where(info == 0, x, jnp.nan)

    return Decomposition(solve_least_squares, _xla.gels_info)


def _qr(layout: Layout, dtype: np.dtype) -> Decomposition:
    """``geqrf`` + ``orgqr``: the reduced ``A = Q R`` for ``m >= n`` (else the XLA reference)."""
    grid = grid_of(layout)
    split = grid.matrix_spec()

    def decompose(a: jax.Array) -> tuple[jax.Array, jax.Array]:
        m, n = a.shape
        if m < n or not _splits(grid, a.shape):
            return _xla.geqrf(a)
        storage, plan = matrix_storage(grid, a)
        attributes = dict(_attributes(grid, n), m=np.int64(m))

        def per_device(local):
            status = _like(local, (), jnp.int32)
            factored, tau, info = _call("geqrf", (_like(local), _like(local, local.shape[:1]),
                                                  status), local, aliases={0: 0}, **attributes)
            q, q_info = _call("orgqr", (_like(local), status), factored, tau, aliases={0: 0},
                              **attributes)
            return factored, q, _agreed(jnp.maximum(info, q_info), grid)

        factored, q, info = grid.shard_map(per_device, split, (split, split, P()))(storage)
        r = jnp.triu(matrix_from_storage(grid, factored, plan)[:n])
        q = matrix_from_storage(grid, q, plan)
        return jnp.where(info == 0, q, jnp.nan), jnp.where(info == 0, r, jnp.nan)

    return Decomposition(decompose, _xla.decomposition_info)


# ------------------------------------------------------------------------ SVD and polar


def _svd(grid: Grid, dtype: np.dtype, a: jax.Array):
    """The thin SVD ``(U, s, Vᴴ)`` of `a` by cuSOLVERMp's gesvd, or None when the grid cannot
    split `a`, ``U`` or ``Vᴴ`` evenly (the caller falls back to the XLA reference)."""
    m, n = a.shape
    k = min(m, n)
    if not all(_splits(grid, shape) for shape in ((m, n), (m, k), (k, n))):
        return None
    storage, _ = matrix_storage(grid, a)
    u_plan, vt_plan = grid.plan(m, k), grid.plan(k, n)
    attributes = dict(_attributes(grid, n), m=np.int64(m))
    split = grid.matrix_spec()

    def per_device(local):
        results = (_like(local), jax.ShapeDtypeStruct((k,), _real(dtype)),
                   _like(local, u_plan.local_shape[::-1]), _like(local, vt_plan.local_shape[::-1]),
                   _like(local, (), jnp.int32))
        _, s, u, vt, info = _call("gesvd", results, local, aliases={0: 0}, **attributes)
        return s, u, vt, _agreed(info, grid)

    s, u, vt, info = grid.shard_map(per_device, split, (P(), split, split, P()))(storage)
    u = matrix_from_storage(grid, u, u_plan)
    vt = matrix_from_storage(grid, vt, vt_plan)
    return tuple(jnp.where(info == 0, x, jnp.nan) for x in (u, s, vt))


def _gesvd(layout: Layout, dtype: np.dtype) -> Decomposition:
    grid = grid_of(layout)

    def decompose(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        result = _svd(grid, dtype, a)
        return _xla.gesvd(a) if result is None else result

    return Decomposition(decompose, _xla.decomposition_info)


def _polar(layout: Layout, dtype: np.dtype) -> Decomposition:
    """``A = U P`` from gesvd's ``A = W diag(s) Vᴴ``: ``U = W Vᴴ``, ``P = V diag(s) Vᴴ``."""
    grid = grid_of(layout)

    def decompose(a: jax.Array) -> tuple[jax.Array, jax.Array]:
        result = _svd(grid, dtype, a)
        if result is None:
            return _xla.polar(a)
        w, s, vh = result
        v = jnp.conj(vh).T
        matmul = functools.partial(jnp.matmul, precision=jax.lax.Precision.HIGHEST)
        return matmul(w, vh), matmul(v * s.astype(a.dtype)[None, :], vh)

    return Decomposition(decompose, _xla.decomposition_info)


def _syevd(layout: Layout, dtype: np.dtype) -> Decomposition:
    return _eigen("syevd", layout, dtype, _xla.syevd_info)


def _sygvd(layout: Layout, dtype: np.dtype) -> Decomposition:
    return _eigen("sygvd", layout, dtype, _xla.sygvd_info)


for _family, _make in (("cholesky", _cholesky), ("lu", _lu), ("syevd", _syevd),
                       ("sygvd", _sygvd), ("least_squares", _least_squares), ("qr", _qr),
                       ("gesvd", _gesvd), ("polar", _polar)):
    register(_family, NAME, _make, applies=applies, clear=clear, prepare=prepare,
             load=library, workspace=workspace_bytes)
