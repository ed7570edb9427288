"""Test matrices and right-hand sides for sparse solvers (``jaxsolve.sparse.matrices``).

The model problems that AMG and Krylov solvers are usually tried on, as
:class:`jax.experimental.sparse.BCSR` matrices: 1D, 2D and 3D Poisson, rotated
anisotropic diffusion, upwind convection-diffusion and 2D linear elasticity
with its rigid-body modes.  They equal :mod:`pyamg.gallery`'s matrices where
PyAMG has the problem; the names follow JAX-AMG's ``jaxamg.matrices``, and each
function documents its exact definition.

**Static pattern, traceable values.**  Each matrix is split the way a sparse
solver needs it: the sparsity pattern (``indices``, ``indptr``) is built with
NumPy from the sizes alone and stays a concrete, read-only ``np.ndarray`` even
inside :func:`jax.jit`; only ``data`` is computed with ``jax.numpy`` from the
physical parameters, which may be traced.  So a solver can set up its
hierarchy from the pattern at trace time while the values stay differentiable:

>>> import jax, jax.numpy as jnp, numpy as np
>>> from jaxsolve.sparse import matrices
>>> @jax.jit
... def residual_norm(diagonal):
...     a = matrices.tridiagonal_matrix(4, diagonal_value=diagonal)
...     assert isinstance(a.indices, np.ndarray)  # concrete under jit
...     return jnp.linalg.norm(a @ jnp.ones(4))
>>> residual_norm(2.0)
Array(1.4142135, dtype=float32)
>>> jax.grad(residual_norm)(jnp.float32(3.0))
Array(1.8973665, dtype=float32)

**Layout.**  Every matrix is a square BCSR with int32 ``indices`` and
``indptr``, column indices sorted within each row and no duplicates
(``indices_sorted=True``, ``unique_indices=True``).  Grid unknowns are
numbered in C order, the last grid index fastest: node ``(i, j)`` of an
``n × n`` grid is unknown ``i * n + j`` (``(i, j, k)`` of a cube is
``(i * n + j) * n + k``), as :func:`pyamg.gallery.stencil_grid` numbers them,
with ``x`` along ``i`` and ``y`` along ``j``.  Dirichlet boundaries are
eliminated: the grid holds only the interior unknowns, and couplings to the
boundary are dropped.

**dtype.**  Values are float32 unless ``dtype=`` asks for another real
floating dtype; float64 needs ``jax.config.update("jax_enable_x64", True)``.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse
from jax.typing import ArrayLike, DTypeLike

__all__ = [
    "anisotropic_diffusion_matrix",
    "constant_nullspace",
    "convection_diffusion_matrix_2d",
    "elasticity_matrix_2d",
    "periodic_poisson_matrix",
    "poisson3d_matrix",
    "poisson3d_matrix_distributed",
    "poisson_matrix",
    "poisson_matrix_distributed",
    "rhs_linear",
    "rhs_ones",
    "rhs_random",
    "tridiagonal_matrix",
]

_MAX_INT32 = np.iinfo(np.int32).max


# -----------------------------------------------------------------------------
# Argument checks


def _checked_size(caller: str, n: object) -> int:
    """``n`` as a Python int, after checking that it is a static integer >= 1."""
    try:
        size = operator.index(n)
    except TypeError:
        raise TypeError(
            f"{caller}: n must be a Python int, got {type(n).__name__}; it fixes the"
            " sparsity pattern, so it cannot be traced (mark it static under jax.jit)."
        ) from None
    if size < 1:
        raise ValueError(f"{caller}: n must be >= 1, got {size}.")
    return size


def _checked_dtype(caller: str, dtype: DTypeLike) -> np.dtype:
    """``dtype`` as a NumPy dtype, after checking that it is a usable real floating dtype."""
    dtype = np.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(
            f"{caller}: dtype must be a real floating dtype such as float32 or float64,"
            f" got {dtype}."
        )
    if jax.dtypes.canonicalize_dtype(dtype) != dtype:
        raise ValueError(
            f"{caller}: dtype {dtype} needs 64-bit types; call"
            ' jax.config.update("jax_enable_x64", True) first, or pass dtype=jnp.float32.'
        )
    return dtype


def _checked_scalar(
    caller: str,
    name: str,
    value: ArrayLike,
    dtype: np.dtype,
    requirement: str = "",
    holds: Callable[[float], bool] | None = None,
) -> jax.Array:
    """``value`` as a 0-d array of ``dtype``; raises if it is not a scalar, or if it is
    concrete and not finite in ``dtype`` or fails ``holds`` (traced values cannot be
    checked and pass through)."""
    if np.ndim(value) != 0:
        raise ValueError(f"{caller}: {name} must be a scalar, got shape {np.shape(value)}.")
    with np.errstate(over="ignore"):  # too large for dtype: inf, refused below
        scalar = jnp.asarray(value, dtype)
    try:
        concrete = np.asarray(scalar)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return scalar
    if not np.isfinite(concrete):
        raise ValueError(f"{caller}: {name} must be finite in {dtype.name}, got {value}.")
    if holds is not None and not holds(float(concrete)):
        raise ValueError(f"{caller}: {name} must be {requirement}, got {float(concrete)}.")
    return scalar


def _check_int32_capacity(caller: str, nnz_bound: int) -> None:
    if nnz_bound > _MAX_INT32:
        raise ValueError(
            f"{caller}: the matrix would have up to {nnz_bound} stored entries, more than"
            f" int32 indices can address ({_MAX_INT32}); use a smaller n."
        )


# -----------------------------------------------------------------------------
# Patterns (NumPy, cached and read-only) and the BCSR they become


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for array in arrays:
        array.flags.writeable = False
    return arrays


def _csr_pattern(rows: np.ndarray, cols: np.ndarray, size: int):
    """The CSR pattern of the ``(rows[k], cols[k])`` pairs of a ``size × size`` matrix.

    Returns:
      ``(indptr, indices, slot)``: int32 ``indptr`` of shape ``(size + 1,)``,
      int32 ``indices`` sorted within rows and without duplicates, and for each
      input pair its position in ``indices`` (repeated pairs share a slot).
    """
    keys = rows.astype(np.int64) * size + cols
    unique_keys, slot = np.unique(keys, return_inverse=True)
    counts = np.bincount(unique_keys // size, minlength=size)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return indptr, (unique_keys % size).astype(np.int32), slot


def _bcsr(data: jax.Array, indices: np.ndarray, indptr: np.ndarray, size: int) -> sparse.BCSR:
    """A BCSR whose ``indices`` and ``indptr`` stay NumPy arrays.

    ``sparse.BCSR(...)`` passes its arguments through ``jnp.asarray``, which
    under ``jax.jit`` turns even NumPy constants into tracers.  The pytree
    ``tree_unflatten`` of the class keeps the leaves as given.
    """
    info = {"shape": (size, size), "indices_sorted": True, "unique_indices": True}
    return sparse.BCSR.tree_unflatten(info, (data, indices, indptr))


@functools.lru_cache(maxsize=32)
def _stencil_pattern(shape: tuple[int, ...], offsets: tuple[tuple[int, ...], ...]):
    """Pattern of a stencil on a C-ordered grid with Dirichlet boundaries.

    Unknown ``p`` at grid point ``x`` couples to the unknown at ``x + offsets[k]``
    when that point is inside the grid.  Taking the offsets in the order of their
    flat index offset makes each row come out sorted, with no sort needed: two
    distinct offsets never reach the same point.

    Returns:
      ``(indptr, indices, stencil_entry)``; ``stencil_entry[s]`` is the ``k`` of
      the offset that stored entry ``s`` comes from.
    """
    strides = np.cumprod((1,) + shape[:0:-1])[::-1]
    flat_offsets = np.array([np.dot(offset, strides) for offset in offsets], np.int64)
    order = np.argsort(flat_offsets, kind="stable")
    points = np.indices(shape).reshape(len(shape), -1, 1)  # (ndim, unknowns, 1)
    targets = points + np.array(offsets).T[:, None, order]  # (ndim, unknowns, stencil)
    inside = np.all((targets >= 0) & (targets < np.array(shape)[:, None, None]), axis=0)
    size = inside.shape[0]
    indices = (np.arange(size)[:, None] + flat_offsets[order])[inside].astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum(inside.sum(axis=1))]).astype(np.int32)
    stencil_entry = np.broadcast_to(order.astype(np.int32), inside.shape)[inside]
    return _read_only(indptr, indices, stencil_entry)


def _stencil_matrix(
    caller: str, shape: tuple[int, ...], stencil: dict[tuple[int, ...], jax.Array]
) -> sparse.BCSR:
    """The matrix of a constant-coefficient stencil ``{offset: coefficient}`` on a grid."""
    _check_int32_capacity(caller, math.prod(shape) * len(stencil))
    indptr, indices, stencil_entry = _stencil_pattern(shape, tuple(stencil))
    data = jnp.stack(list(stencil.values()))[stencil_entry]
    return _bcsr(data, indices, indptr, math.prod(shape))


# -----------------------------------------------------------------------------
# Q1 (bilinear) finite elements on the unit square, by 2 × 2 Gauss quadrature


_Q1_CORNERS = ((0, 0), (1, 0), (1, 1), (0, 1))


@functools.lru_cache(maxsize=1)
def _q1_gradients():
    """Quadrature weights ``(4,)`` and gradients ``(4 points, 4 corners, 2)`` of the
    bilinear shape functions of the unit square; exact for their products."""
    gauss = 0.5 + np.array([-0.5, 0.5]) / np.sqrt(3.0)
    points = [(x, y) for x in gauss for y in gauss]
    gradients = np.array([
        [[(2 * cx - 1) * (y if cy else 1 - y), (2 * cy - 1) * (x if cx else 1 - x)]
         for cx, cy in _Q1_CORNERS]
        for x, y in points
    ])
    return np.full(len(points), 0.25), gradients


def _q1_diffusion_stencils() -> dict[str, np.ndarray]:
    """The 3 × 3 Q1 stencils of ``-u_xx``, ``-2 u_xy`` and ``-u_yy``, keyed ``xx, xy, yy``.

    Stencil ``[1 + dx, 1 + dy]`` holds the coupling of a vertex to the vertex
    ``(dx, dy)`` away, summed over the four elements that share the vertex.
    """
    weights, grads = _q1_gradients()
    element = {
        "xx": np.einsum("q,qa,qb->ab", weights, grads[..., 0], grads[..., 0]),
        "yy": np.einsum("q,qa,qb->ab", weights, grads[..., 1], grads[..., 1]),
        "xy": np.einsum("q,qa,qb->ab", weights, grads[..., 0], grads[..., 1]),
    }
    element["xy"] = element["xy"] + element["xy"].T
    stencils = {name: np.zeros((3, 3)) for name in element}
    for a, (ax, ay) in enumerate(_Q1_CORNERS):  # the vertex is corner `a` of an element
        for b, (bx, by) in enumerate(_Q1_CORNERS):
            for name, matrix in element.items():
                stencils[name][1 + bx - ax, 1 + by - ay] += matrix[a, b]
    return stencils


def _finite_difference_stencils() -> dict[str, np.ndarray]:
    """The 3 × 3 second-order finite-difference stencils of ``-u_xx``, ``-2 u_xy``, ``-u_yy``."""
    xx, yy, xy = np.zeros((3, 3)), np.zeros((3, 3)), np.zeros((3, 3))
    xx[:, 1] = [-1.0, 2.0, -1.0]
    yy[1, :] = [-1.0, 2.0, -1.0]
    xy[[0, 2], [0, 2]] = -0.5  # -2 u_xy ≈ -(u[+,+] - u[+,-] - u[-,+] + u[-,-]) / 2
    xy[[0, 2], [2, 0]] = 0.5
    return {"xx": xx, "xy": xy, "yy": yy}


@functools.lru_cache(maxsize=16)
def _elasticity_pattern(n: int):
    """Pattern and unit-modulus values of Q1 plane elasticity on ``(n + 1)²`` elements.

    Returns:
      ``(indptr, indices, lame_values, shear_values, rigid_body_modes)``: the
      stiffness matrix is ``λ · lame_values + μ · shear_values`` on the pattern.
    """
    weights, grads = _q1_gradients()
    # ∇(N_a e_c) at each point: basis[q, a, c, i, j] = δ_ic ∂_j N_a.
    basis = np.einsum("ic,qaj->qacij", np.eye(2), grads)
    strain = 0.5 * (basis + basis.transpose(0, 1, 2, 4, 3))
    divergence = np.einsum("qacii->qac", basis)
    lame_element = np.einsum("q,qac,qbd->acbd", weights, divergence, divergence).reshape(8, 8)
    shear_element = np.einsum("q,qacij,qbdij->acbd", weights, 2 * strain, strain).reshape(8, 8)

    # Vertex (i, j), 0 <= i, j <= n + 1; the interior ones are unknowns.
    ex, ey = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    corner_i = ex.ravel()[:, None] + np.array([cx for cx, _ in _Q1_CORNERS])
    corner_j = ey.ravel()[:, None] + np.array([cy for _, cy in _Q1_CORNERS])
    interior = (corner_i >= 1) & (corner_i <= n) & (corner_j >= 1) & (corner_j <= n)
    node = (corner_i - 1) * n + (corner_j - 1)
    dof = (2 * node[:, :, None] + np.arange(2)).reshape(-1, 8)  # (element, a * 2 + c)
    free = np.repeat(interior, 2, axis=1)
    keep = free[:, :, None] & free[:, None, :]
    rows = np.broadcast_to(dof[:, :, None], keep.shape)[keep]
    cols = np.broadcast_to(dof[:, None, :], keep.shape)[keep]
    indptr, indices, slot = _csr_pattern(rows, cols, 2 * n * n)

    def assembled(element_matrix):
        values = np.broadcast_to(element_matrix, keep.shape)[keep]
        return np.bincount(slot, weights=values, minlength=indices.size)

    i, j = np.meshgrid(np.arange(1, n + 1), np.arange(1, n + 1), indexing="ij")
    x, y = (i - (n + 1) / 2).ravel(), (j - (n + 1) / 2).ravel()
    modes = np.zeros((2 * n * n, 3))
    modes[0::2, 0] = 1.0  # translation along x
    modes[1::2, 1] = 1.0  # translation along y
    modes[0::2, 2], modes[1::2, 2] = -y, x  # rotation about the centre
    return _read_only(indptr, indices, assembled(lame_element), assembled(shear_element), modes)


# -----------------------------------------------------------------------------
# Matrices


def tridiagonal_matrix(
    n: int,
    diagonal_value: ArrayLike = 2.0,
    off_diagonal_value: ArrayLike = -1.0,
    *,
    dtype: DTypeLike = jnp.float32,
) -> sparse.BCSR:
    """The ``n × n`` tridiagonal Toeplitz matrix (by default the 1D Poisson matrix).

    ``A[i, i] = diagonal_value`` and ``A[i, i ± 1] = off_diagonal_value``.  With
    the defaults it is ``pyamg.gallery.poisson((n,))``, the 3-point Laplacian
    ``[-1, 2, -1]`` with Dirichlet ends; it is symmetric, and positive definite
    whenever ``diagonal_value > 2 |off_diagonal_value| cos(π / (n + 1))``.

    Args:
      n: number of unknowns, a static int >= 1.
      diagonal_value: scalar, may be traced.
      off_diagonal_value: scalar, may be traced.
      dtype: real floating dtype of the values.

    Returns:
      A BCSR of shape ``(n, n)`` with ``3n - 2`` stored entries.

    Raises:
      TypeError: if ``n`` is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if ``n < 1``, a value is not a scalar, or ``dtype`` needs x64.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> matrices.tridiagonal_matrix(4).todense()
      Array([[ 2., -1.,  0.,  0.],
             [-1.,  2., -1.,  0.],
             [ 0., -1.,  2., -1.],
             [ 0.,  0., -1.,  2.]], dtype=float32)
    """
    caller = "tridiagonal_matrix"
    n, dtype = _checked_size(caller, n), _checked_dtype(caller, dtype)
    diagonal = _checked_scalar(caller, "diagonal_value", diagonal_value, dtype)
    off_diagonal = _checked_scalar(caller, "off_diagonal_value", off_diagonal_value, dtype)
    return _stencil_matrix(caller, (n,), {(-1,): off_diagonal, (0,): diagonal, (1,): off_diagonal})


def _laplacian(caller: str, n: int, ndim: int, dtype: DTypeLike) -> sparse.BCSR:
    n, dtype = _checked_size(caller, n), _checked_dtype(caller, dtype)
    stencil = {(0,) * ndim: jnp.asarray(2 * ndim, dtype)}
    for axis in range(ndim):
        for step in (-1, 1):
            stencil[tuple(step if a == axis else 0 for a in range(ndim))] = jnp.asarray(-1, dtype)
    return _stencil_matrix(caller, (n,) * ndim, stencil)


def poisson_matrix(n: int, *, dtype: DTypeLike = jnp.float32) -> sparse.BCSR:
    """The 2D 5-point Poisson matrix on an ``n × n`` grid with Dirichlet boundaries.

    The finite-difference ``-Δu`` scaled by ``h²``: 4 on the diagonal, -1 for
    each of the (up to four) grid neighbours; equal to
    ``pyamg.gallery.poisson((n, n))`` and to JAX-AMG's ``poisson_matrix(n)``.
    Symmetric positive definite, eigenvalues ``4 - 2 cos(kπ/(n+1)) - 2 cos(lπ/(n+1))``.

    Args:
      n: grid points per side, a static int >= 1; the matrix has ``n²`` unknowns.
      dtype: real floating dtype of the values.

    Returns:
      A BCSR of shape ``(n², n²)`` with ``5n² - 4n`` stored entries.

    Raises:
      TypeError: if ``n`` is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if ``n < 1``, ``dtype`` needs x64, or the matrix overflows int32 indices.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> a = matrices.poisson_matrix(3)
      >>> a.shape, a.nse
      ((9, 9), 33)
      >>> a.todense()[4]  # the centre of the grid couples to its four neighbours
      Array([ 0., -1.,  0., -1.,  4., -1.,  0., -1.,  0.], dtype=float32)
    """
    return _laplacian("poisson_matrix", n, 2, dtype)


def poisson3d_matrix(n: int, *, dtype: DTypeLike = jnp.float32) -> sparse.BCSR:
    """The 3D 7-point Poisson matrix on an ``n × n × n`` grid with Dirichlet boundaries.

    6 on the diagonal, -1 for each grid neighbour; equal to
    ``pyamg.gallery.poisson((n, n, n))``.  Symmetric positive definite.

    Args:
      n: grid points per side, a static int >= 1; the matrix has ``n³`` unknowns.
      dtype: real floating dtype of the values.

    Returns:
      A BCSR of shape ``(n³, n³)`` with ``7n³ - 6n²`` stored entries.

    Raises:
      TypeError: if ``n`` is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if ``n < 1``, ``dtype`` needs x64, or the matrix overflows int32 indices.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> a = matrices.poisson3d_matrix(3)
      >>> a.shape, a.nse
      ((27, 27), 135)
      >>> a.todense()[13].sum()  # the centre row: 6 - 6 neighbours
      Array(0., dtype=float32)
    """
    return _laplacian("poisson3d_matrix", n, 3, dtype)


def periodic_poisson_matrix(n: int, *, dtype: DTypeLike = jnp.float32) -> sparse.BCSR:
    """The 2D 5-point Poisson matrix on an ``n × n`` periodic grid: singular.

    As :func:`poisson_matrix`, 4 on the diagonal and -1 for each of the four grid
    neighbours, but the grid wraps around (a torus): neighbour ``(i ± 1) mod n`` along
    each axis, so every row sums to zero and the matrix is symmetric positive
    *semi*-definite with the constants as its null space (:func:`constant_nullspace`),
    eigenvalues ``4 - 2 cos(2πk/n) - 2 cos(2πl/n)``.  ``A x = b`` has a solution only
    for ``b`` of zero sum; solve it with ``solve(A, b, nullspace=constant_nullspace(n * n))``,
    which returns the solution of zero mean.  For ``n = 2`` the two neighbours along an
    axis coincide (one entry of -2); for ``n = 1`` the matrix is ``[[0]]``.  It is the
    graph Laplacian of the ``n × n`` torus.

    Args:
      n: grid points per side, a static int >= 1; the matrix has ``n²`` unknowns.
      dtype: real floating dtype of the values.

    Returns:
      A BCSR of shape ``(n², n²)`` with ``5n²`` stored entries for ``n >= 3``.

    Raises:
      TypeError: if ``n`` is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if ``n < 1``, ``dtype`` needs x64, or the matrix overflows int32 indices.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve.sparse import matrices
      >>> a = matrices.periodic_poisson_matrix(3)
      >>> a.shape, a.nse
      ((9, 9), 45)
      >>> a.todense()[0]  # the corner couples across both periodic boundaries
      Array([ 4., -1., -1., -1.,  0.,  0., -1.,  0.,  0.], dtype=float32)
      >>> bool(jnp.all(a @ jnp.ones(9) == 0))  # the constants are its null space
      True
    """
    n = _checked_size("periodic_poisson_matrix", n)
    dtype = _checked_dtype("periodic_poisson_matrix", dtype)
    _check_int32_capacity("periodic_poisson_matrix", 5 * n * n)
    indptr, indices, values = _periodic_laplacian_pattern(n)
    return _bcsr(jnp.asarray(values, dtype), indices, indptr, n * n)


@functools.lru_cache(maxsize=8)
def _periodic_laplacian_pattern(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, values)`` of the periodic 5-point Laplacian, values in NumPy."""
    i, j = np.divmod(np.arange(n * n), n)
    rows, cols, weights = [np.arange(n * n)], [np.arange(n * n)], [np.full(n * n, 4.0)]
    for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        rows.append(np.arange(n * n))
        cols.append(((i + di) % n) * n + (j + dj) % n)
        weights.append(np.full(n * n, -1.0))
    indptr, indices, slot = _csr_pattern(np.concatenate(rows), np.concatenate(cols), n * n)
    values = np.zeros(indices.size)
    np.add.at(values, slot, np.concatenate(weights))
    return _read_only(indptr, indices, values)


def constant_nullspace(n: int, *, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """The unit constant vector as an ``(n, 1)`` null-space basis.

    ``1/√n`` everywhere: the null space of :func:`periodic_poisson_matrix` (and of any
    pure-Neumann Laplacian or graph Laplacian of a connected graph), in the shape
    ``solve(..., nullspace=)`` takes.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> matrices.constant_nullspace(4).T
      Array([[0.5, 0.5, 0.5, 0.5]], dtype=float32)
    """
    n = _checked_size("constant_nullspace", n)
    dtype = _checked_dtype("constant_nullspace", dtype)
    return jnp.full((n, 1), 1 / math.sqrt(n), dtype)


def poisson_matrix_distributed(
    nx: int, ny: int, rank: int, nranks: int, *, dtype: DTypeLike = jnp.float32
) -> tuple[sparse.BCSR, int, int]:
    """Rank ``rank``'s rows of the 2D Poisson matrix of an ``nx × ny`` grid, built locally.

    The rows ``row_start:row_end`` that ``jaxsolve.sharding.partition_rows(nx * ny, nranks)``
    gives this rank (contiguous blocks, the first ``n % nranks`` ranks one row more), with
    global column indices, computed from the grid alone: the global matrix is never formed,
    so each MPI rank (or each device's host code) builds only its part, in ``O(rows)``.
    Unknown ``(i, j)``, ``0 <= i < nx``, ``0 <= j < ny``, is row ``i * ny + j``; the
    stacked blocks equal ``pyamg.gallery.poisson((nx, ny))``, and :func:`poisson_matrix`
    for ``nx = ny = n``.  JAX-AMG's ``poisson_matrix_distributed`` has this call shape (it
    numbers the grid ``x`` fastest, which for a square grid is the same matrix).

    Args:
      nx, ny: grid points along each axis, static ints >= 1.
      rank: this rank, ``0 <= rank < nranks``.
      nranks: the number of ranks, >= 1.
      dtype: real floating dtype of the values.

    Returns:
      ``(A_local, row_start, row_end)``: a BCSR of shape ``(row_end - row_start, nx * ny)``
      (NumPy pattern, sorted columns) and the global rows it holds.

    Raises:
      TypeError: if a size or rank is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if a size is below 1 or ``rank`` is not in ``[0, nranks)``.

    Examples:
      >>> import numpy as np
      >>> from jaxsolve.sparse import matrices
      >>> A_local, row_start, row_end = matrices.poisson_matrix_distributed(3, 3, 1, 2)
      >>> A_local.shape, (row_start, row_end)
      ((4, 9), (5, 9))
      >>> blocks = [matrices.poisson_matrix_distributed(3, 3, r, 2)[0].todense() for r in (0, 1)]
      >>> bool(np.array_equal(np.vstack(blocks), matrices.poisson_matrix(3).todense()))
      True
    """
    return _laplacian_rows("poisson_matrix_distributed", (nx, ny), rank, nranks, dtype)


def poisson3d_matrix_distributed(
    nx: int, ny: int, nz: int, rank: int, nranks: int, *, dtype: DTypeLike = jnp.float32
) -> tuple[sparse.BCSR, int, int]:
    """Rank ``rank``'s rows of the 3D Poisson matrix of an ``nx × ny × nz`` grid, built locally.

    The 3D twin of :func:`poisson_matrix_distributed`: unknown ``(i, j, k)`` is row
    ``(i * ny + j) * nz + k``; 6 on the diagonal, -1 for each grid neighbour; the stacked
    blocks equal ``pyamg.gallery.poisson((nx, ny, nz))`` and, for a cube, :func:`poisson3d_matrix`.

    Args:
      nx, ny, nz: grid points along each axis, static ints >= 1.
      rank: this rank, ``0 <= rank < nranks``.
      nranks: the number of ranks, >= 1.
      dtype: real floating dtype of the values.

    Returns:
      ``(A_local, row_start, row_end)``, as :func:`poisson_matrix_distributed`.

    Raises:
      TypeError, ValueError: as :func:`poisson_matrix_distributed`.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> A_local, row_start, row_end = matrices.poisson3d_matrix_distributed(4, 4, 4, 3, 4)
      >>> A_local.shape, (row_start, row_end), A_local.nse
      ((16, 64), (48, 64), 80)
    """
    return _laplacian_rows("poisson3d_matrix_distributed", (nx, ny, nz), rank, nranks, dtype)


def _laplacian_rows(caller: str, shape: tuple[int, ...], rank: int, nranks: int,
                    dtype: DTypeLike) -> tuple[sparse.BCSR, int, int]:
    """Rows ``partition_rows(prod(shape), nranks)[rank]`` of the ``2·ndim + 1``-point
    Laplacian on a C-ordered grid, with global columns, from the grid alone."""
    from jaxsolve.sharding import partition_rows  # sharding needs no sparse: no cycle

    shape = tuple(_checked_size(caller, n) for n in shape)
    nranks = _checked_size(caller, nranks)
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
        raise TypeError(f"{caller}: rank must be an int, got {type(rank).__name__}.")
    if not 0 <= rank < nranks:
        raise ValueError(f"{caller}: rank={rank} is not one of the {nranks} ranks 0 to"
                         f" {nranks - 1}.")
    dtype = _checked_dtype(caller, dtype)
    n, ndim = math.prod(shape), len(shape)
    _check_int32_capacity(caller, n * (2 * ndim + 1))
    row_start, row_end = partition_rows(n, nranks)[int(rank)]
    offsets = np.zeros((2 * ndim + 1, ndim), np.int64)
    for axis in range(ndim):
        offsets[2 * axis, axis], offsets[2 * axis + 1, axis] = -1, 1
    strides = np.cumprod((1,) + shape[:0:-1])[::-1]
    flat = offsets @ strides
    order = np.argsort(flat, kind="stable")  # ascending columns within each row
    rows = np.arange(row_start, row_end)
    points = np.stack(np.unravel_index(rows, shape))[:, :, None]  # (ndim, rows, 1)
    targets = points + offsets[order].T[:, None, :]
    inside = np.all((targets >= 0) & (targets < np.array(shape)[:, None, None]), axis=0)
    indices = (rows[:, None] + flat[order])[inside].astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum(inside.sum(axis=1))]).astype(np.int32)
    coefficients = jnp.asarray([-1] * (2 * ndim) + [2 * ndim], dtype)  # offsets, then centre
    stencil = np.where(np.all(offsets == 0, axis=1), 2 * ndim, 0)
    stencil[~np.all(offsets == 0, axis=1)] = np.arange(2 * ndim)
    data = coefficients[np.broadcast_to(stencil[order], inside.shape)[inside]]
    indices, indptr = _read_only(indices, indptr)
    info = {"shape": (row_end - row_start, n), "indices_sorted": True, "unique_indices": True}
    return sparse.BCSR.tree_unflatten(info, (data, indices, indptr)), row_start, row_end


def anisotropic_diffusion_matrix(
    n: int,
    epsilon: ArrayLike,
    theta: ArrayLike,
    *,
    discretization: str = "FE",
    dtype: DTypeLike = jnp.float32,
) -> sparse.BCSR:
    r"""Rotated anisotropic diffusion ``-∇·(K ∇u)`` on an ``n × n`` grid (9-point stencil).

    The diffusion tensor is ``K = Q diag(1, ε) Qᵀ`` with ``Q`` the rotation by
    ``θ`` from the x axis: diffusion is 1 along the direction ``θ`` and ``ε``
    across it, so ``ε ≪ 1`` with ``θ`` off the grid axes is the classic hard
    case for AMG.  Writing ``c = cos θ``, ``s = sin θ``,

    .. math::
       -∇·(K∇u) = -(c² + ε s²) u_{xx} - 2 (1 - ε) c s\, u_{xy} - (ε c² + s²) u_{yy}.

    ``discretization="FE"`` assembles bilinear (Q1) finite elements,
    ``"FD"`` uses second-order finite differences with the 4-point ``u_xy``
    stencil; both on a unit-spaced grid with Dirichlet boundaries, as
    ``pyamg.gallery.stencil_grid(pyamg.gallery.diffusion_stencil_2d(epsilon,
    theta, type), (n, n))`` builds them (``x`` along the slow grid index).
    The pattern is always the full 9-point one, so that it does not depend on
    ``epsilon`` and ``theta`` (which may be traced): where a coefficient
    vanishes (FD with ``θ`` a multiple of ``π/2``) zeros are stored.
    Symmetric; positive definite for ``ε > 0``.

    Args:
      n: grid points per side, a static int >= 1; the matrix has ``n²`` unknowns.
      epsilon: anisotropy ``ε > 0``, a scalar that may be traced.
      theta: angle ``θ`` in radians, a scalar that may be traced.
      discretization: ``"FE"`` (PyAMG's default) or ``"FD"``.
      dtype: real floating dtype of the values.

    Returns:
      A BCSR of shape ``(n², n²)`` with ``(3n - 2)²`` stored entries.

    Raises:
      TypeError: if ``n`` is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if ``n < 1``, ``epsilon`` is concrete and not positive, a
        parameter is not a scalar, ``discretization`` is unknown, ``dtype``
        needs x64, or the matrix overflows int32 indices.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> a = matrices.anisotropic_diffusion_matrix(3, epsilon=1.0, theta=0.0)
      >>> a.todense()[4] * 3  # isotropic Q1: 8/3 and -1/3 for all 8 neighbours
      Array([-1., -1., -1., -1.,  8., -1., -1., -1., -1.], dtype=float32)
    """
    caller = "anisotropic_diffusion_matrix"
    n, dtype = _checked_size(caller, n), _checked_dtype(caller, dtype)
    if discretization not in ("FE", "FD"):
        raise ValueError(
            f'{caller}: discretization must be "FE" (finite elements) or "FD" (finite'
            f" differences), got {discretization!r}."
        )
    eps = _checked_scalar(caller, "epsilon", epsilon, dtype, "positive", lambda e: e > 0)
    angle = _checked_scalar(caller, "theta", theta, dtype)
    c, s = jnp.cos(angle), jnp.sin(angle)
    tensor = {"xx": c * c + eps * s * s, "xy": (1 - eps) * c * s, "yy": eps * c * c + s * s}
    terms = _q1_diffusion_stencils() if discretization == "FE" else _finite_difference_stencils()
    stencil = sum(tensor[name] * terms[name].astype(dtype) for name in tensor)
    offsets = [(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]
    return _stencil_matrix(caller, (n, n), {o: stencil[o[0] + 1, o[1] + 1] for o in offsets})


def convection_diffusion_matrix_2d(
    n: int, peclet: ArrayLike, *, dtype: DTypeLike = jnp.float32
) -> sparse.BCSR:
    """Upwind convection-diffusion ``-Δu + w·∇u`` on an ``n × n`` grid: nonsymmetric.

    The velocity is ``w = (w, w)`` (along increasing ``x`` and ``y``), and
    ``peclet = w h`` is the mesh Péclet number.  Diffusion is the 5-point
    Laplacian and convection is first-order upwind, both scaled by ``h²``, so
    row ``(i, j)`` reads

        ``(4 + 2 peclet) u[i,j] - (1 + peclet) (u[i-1,j] + u[i,j-1]) - u[i+1,j] - u[i,j+1]``

    with Dirichlet boundaries.  Upwinding keeps it an M-matrix (diagonally
    dominant, nonpositive off-diagonal) for every ``peclet >= 0``, at the cost
    of first-order accuracy; ``peclet = 0`` gives :func:`poisson_matrix`.

    Args:
      n: grid points per side, a static int >= 1; the matrix has ``n²`` unknowns.
      peclet: mesh Péclet number ``>= 0``, a scalar that may be traced.
      dtype: real floating dtype of the values.

    Returns:
      A BCSR of shape ``(n², n²)`` with ``5n² - 4n`` stored entries.

    Raises:
      TypeError: if ``n`` is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if ``n < 1``, ``peclet`` is concrete and negative or not a
        scalar, ``dtype`` needs x64, or the matrix overflows int32 indices.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> a = matrices.convection_diffusion_matrix_2d(3, peclet=0.5).todense()
      >>> a[4]
      Array([ 0. , -1.5,  0. , -1.5,  5. , -1. ,  0. , -1. ,  0. ], dtype=float32)
      >>> bool((a == a.T).all())
      False
    """
    caller = "convection_diffusion_matrix_2d"
    n, dtype = _checked_size(caller, n), _checked_dtype(caller, dtype)
    pe = _checked_scalar(caller, "peclet", peclet, dtype, ">= 0", lambda p: p >= 0)
    upwind, downwind = -1 - pe, jnp.asarray(-1, dtype)
    stencil = {(0, 0): 4 + 2 * pe, (-1, 0): upwind, (0, -1): upwind, (1, 0): downwind,
               (0, 1): downwind}
    return _stencil_matrix(caller, (n, n), stencil)


def elasticity_matrix_2d(
    n: int,
    youngs_modulus: ArrayLike = 1e5,
    poisson_ratio: ArrayLike = 0.3,
    *,
    dtype: DTypeLike = jnp.float32,
) -> tuple[sparse.BCSR, np.ndarray]:
    """Plane linear elasticity with Q1 elements, and its rigid-body modes.

    The stiffness matrix of ``-∇·σ(u)`` with ``σ = λ tr(ε) I + 2μ ε``,
    ``ε = (∇u + ∇uᵀ)/2``, discretized with bilinear elements on the unit
    square grid of ``(n + 1) × (n + 1)`` unit elements, with the displacement
    fixed (Dirichlet) on the boundary: ``n²`` interior nodes with two unknowns
    each, ``(u_x, u_y)`` of node ``(i, j)`` at ``2 (i n + j) + (0, 1)``.  Lamé's
    parameters come from Young's modulus ``E`` and Poisson's ratio ``ν``:
    ``λ = E ν / ((1 + ν)(1 - 2ν))``, ``μ = E / (2 (1 + ν))``.  It is
    ``pyamg.gallery.linear_elasticity((n, n), E=E, nu=ν)`` (same defaults)
    with the nodes renumbered ``i n + j`` instead of PyAMG's ``i + n j``.

    The second result is the near-null space that smoothed aggregation needs:
    the rigid-body modes, two translations and the rotation ``(-y, x)`` about
    the centre of the domain.  They are exact null vectors of the operator
    without boundary conditions; with the boundary fixed, ``A @ modes`` vanishes
    on every node that does not touch the boundary.

    Args:
      n: interior nodes per side, a static int >= 1; the matrix has ``2n²`` unknowns.
      youngs_modulus: ``E > 0``, a scalar that may be traced.
      poisson_ratio: ``-1 < ν < 1/2``, a scalar that may be traced.
      dtype: real floating dtype of the values and of the modes.

    Returns:
      ``(A, modes)``: ``A`` a symmetric positive definite BCSR of shape
      ``(2n², 2n²)`` (up to 18 entries a row, in 2 × 2 node blocks); ``modes``
      a NumPy array of shape ``(2n², 3)``, columns x-translation,
      y-translation, rotation.

    Raises:
      TypeError: if ``n`` is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if ``n < 1``, a concrete modulus or ratio is out of range or
        not a scalar, ``dtype`` needs x64, or the matrix overflows int32 indices.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve.sparse import matrices
      >>> a, modes = matrices.elasticity_matrix_2d(4, youngs_modulus=1.0)
      >>> a.shape, modes.shape
      ((32, 32), (32, 3))
      >>> centre = [2 * (i * 4 + j) + c for i in (1, 2) for j in (1, 2) for c in (0, 1)]
      >>> float(jnp.abs((a @ jnp.asarray(modes))[jnp.array(centre)]).max()) < 1e-6
      True
    """
    caller = "elasticity_matrix_2d"
    n, dtype = _checked_size(caller, n), _checked_dtype(caller, dtype)
    _check_int32_capacity(caller, 2 * n * n * 18)
    e = _checked_scalar(caller, "youngs_modulus", youngs_modulus, dtype, "positive",
                        lambda value: value > 0)
    nu = _checked_scalar(caller, "poisson_ratio", poisson_ratio, dtype,
                         "in (-1, 0.5)", lambda value: -1 < value < 0.5)
    lame = e * nu / ((1 + nu) * (1 - 2 * nu))
    shear = e / (2 * (1 + nu))
    indptr, indices, lame_values, shear_values, modes = _elasticity_pattern(n)
    data = lame * lame_values.astype(dtype) + shear * shear_values.astype(dtype)
    return _bcsr(data, indices, indptr, 2 * n * n), modes.astype(dtype)


# -----------------------------------------------------------------------------
# Right-hand sides


def rhs_ones(n: int, *, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """The right-hand side of all ones, of length ``n`` (pass ``A.shape[0]``).

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> matrices.rhs_ones(3)
      Array([1., 1., 1.], dtype=float32)
    """
    n, dtype = _checked_size("rhs_ones", n), _checked_dtype("rhs_ones", dtype)
    return jnp.ones(n, dtype)


def rhs_linear(n: int, *, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """The right-hand side ``b[i] = (i + 1) / n``, rising linearly from ``1/n`` to 1.

    Unlike :func:`rhs_ones` it is not a smooth eigenvector-like vector for
    stencil matrices, and never zero.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> matrices.rhs_linear(4)
      Array([0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    n, dtype = _checked_size("rhs_linear", n), _checked_dtype("rhs_linear", dtype)
    return jnp.arange(1, n + 1, dtype=dtype) / n


def rhs_random(n: int, seed: int = 0, *, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """A standard normal right-hand side of length ``n``, reproducible from ``seed``.

    ``jax.random.normal(jax.random.key(seed), (n,), dtype)``; ``seed`` may be traced.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> b = matrices.rhs_random(1000, seed=1)
      >>> b.shape, bool(abs(b.mean()) < 0.1), bool((b == matrices.rhs_random(1000, 1)).all())
      ((1000,), True, True)
    """
    n, dtype = _checked_size("rhs_random", n), _checked_dtype("rhs_random", dtype)
    return jax.random.normal(jax.random.key(seed), (n,), dtype)
