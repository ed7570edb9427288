"""Test matrices and right-hand sides for sparse solvers (``jaxsolve.sparse.matrices``).

The model problems that AMG and Krylov solvers are usually tried on, as
:class:`jax.experimental.sparse.BCSR` matrices: 1D, 2D and 3D Poisson, rotated
anisotropic diffusion, upwind convection-diffusion and 2D linear elasticity
with its rigid-body modes, a random diagonally dominant matrix, the rows one MPI
rank holds of several of them (``*_distributed(..., rank, nranks)``), matrix-free
operators (``tridiagonal_operator``, ``poisson_operator``, ``poisson3d_operator``)
and a SuiteSparse Matrix Collection loader.  They equal :mod:`pyamg.gallery`'s
matrices where PyAMG has the problem; every name and signature of JAX-AMG's
``jaxamg.matrices`` is here, with its meaning (JAX-AMG code runs with only its
import changed), and each function documents its exact definition.

**Static pattern, traceable values.**  Each matrix is split the way a sparse
solver needs it: the sparsity pattern (``indices``, ``indptr``) is built with
NumPy from the sizes alone, and only ``data`` is computed with ``jax.numpy``
from the physical parameters, which may be traced.  Each matrix is a
:class:`~jax.experimental.sparse.BCSR` whose pattern stays static (the
``CachedBCSR`` that :func:`jaxsolve.sparse.with_cache` makes, a ``BCSR``
subclass): its index arrays are concrete JAX arrays, even inside
:func:`jax.jit`, and its only pytree leaf is ``data``.  So a solver sets up its
hierarchy from the pattern at trace time while the values stay
differentiable, whether the matrix is built inside the jitted function or
passed to it, and a BCSR rebuilt there from ``A.indices`` and ``A.indptr``
(new values on the pattern) has a concrete pattern too:

>>> import jax, jax.numpy as jnp
>>> from jax.experimental import sparse
>>> from jaxsolve.sparse import matrices
>>> @jax.jit
... def residual_norm(diagonal):
...     a = matrices.tridiagonal_matrix(4, diagonal_value=diagonal)
...     assert not isinstance(a.indices, jax.core.Tracer)  # concrete under jit
...     return jnp.linalg.norm(a @ jnp.ones(4))
>>> residual_norm(2.0)
Array(1.4142135, dtype=float32)
>>> jax.grad(residual_norm)(jnp.float32(3.0))
Array(1.8973665, dtype=float32)
>>> @jax.jit
... def scaled(a, factor):
...     b = sparse.BCSR((factor * a.data, a.indices, a.indptr), shape=a.shape)
...     assert not isinstance(b.indices, jax.core.Tracer)
...     return b @ jnp.ones(4)
>>> scaled(matrices.tridiagonal_matrix(4), 3.0)
Array([3., 0., 0., 3.], dtype=float32)

Tree operations see ``data`` alone (``jax.tree.map(lambda v: 2 * v, a)`` scales
the matrix), and ``jax.grad`` with respect to a matrix returns its cotangent
as a matrix on the same pattern.  Matrices built on one pattern while another
of them lives share its index arrays.

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
Where JAX-AMG's default is ``dtype=None`` (the right-hand sides, the operators,
the distributed builders, convection-diffusion), ``None`` is JAX's default
float dtype: float64 with x64 enabled.
"""

from __future__ import annotations

import functools
import math
import operator
import os
import pathlib
import shutil
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse
from jax.typing import ArrayLike, DTypeLike

from ._static_pattern import host_pattern_bcsr

__all__ = [
    "anisotropic_diffusion_matrix",
    "constant_nullspace",
    "convection_diffusion_matrix_2d",
    "download_suitesparse_matrix",
    "elasticity_matrix_2d",
    "periodic_poisson_matrix",
    "poisson3d_matrix",
    "poisson3d_matrix_distributed",
    "poisson3d_operator",
    "poisson_matrix",
    "poisson_matrix_distributed",
    "poisson_operator",
    "random_matrix",
    "random_matrix_distributed",
    "rhs_linear",
    "rhs_ones",
    "rhs_random",
    "tridiagonal_matrix",
    "tridiagonal_matrix_distributed",
    "tridiagonal_operator",
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


def _checked_dtype(caller: str, dtype: DTypeLike | None) -> np.dtype:
    """``dtype`` as a NumPy dtype, after checking that it is a usable real floating dtype;
    ``None`` is JAX's default (float64 with ``jax_enable_x64``, else float32)."""
    if dtype is None:
        return np.dtype(jax.dtypes.canonicalize_dtype(np.float64))
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


def _bcsr(data: jax.Array, indices: np.ndarray, indptr: np.ndarray,
          shape: tuple[int, int]) -> sparse.BCSR:
    """The BCSR of ``data`` on a canonical read-only NumPy pattern, its pattern static
    through ``jax.jit`` (see "Static pattern, traceable values" above)."""
    return host_pattern_bcsr(data, indices, indptr, shape)


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
    return _bcsr(data, indices, indptr, (math.prod(shape),) * 2)


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
    dtype: DTypeLike = jnp.float32,
    *,
    off_diagonal_value: ArrayLike = -1.0,
) -> sparse.BCSR:
    """The ``n × n`` tridiagonal Toeplitz matrix (by default the 1D Poisson matrix).

    ``A[i, i] = diagonal_value`` and ``A[i, i ± 1] = off_diagonal_value``.  With
    the defaults it is ``pyamg.gallery.poisson((n,))``, the 3-point Laplacian
    ``[-1, 2, -1]`` with Dirichlet ends; it is symmetric, and positive definite
    whenever ``diagonal_value > 2 |off_diagonal_value| cos(π / (n + 1))``.

    Args:
      n: number of unknowns, a static int >= 1.
      diagonal_value: scalar, may be traced.
      dtype: real floating dtype of the values (JAX-AMG's third argument).
      off_diagonal_value: scalar, may be traced.

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


def _laplacian_stencil(caller: str, ndim: int, skew: ArrayLike, dtype: np.dtype
                       ) -> dict[tuple[int, ...], jax.Array]:
    """The ``2·ndim + 1``-point Laplacian with JAX-AMG's ``skew``: ``-1 - skew/2`` towards
    the lower neighbour along each axis, ``-1 + skew/2`` towards the upper one."""
    skew = _checked_scalar(caller, "skew", skew, dtype)
    stencil = {(0,) * ndim: jnp.asarray(2 * ndim, dtype)}
    for axis in range(ndim):
        for step in (-1, 1):
            offset = tuple(step if a == axis else 0 for a in range(ndim))
            stencil[offset] = -1 + step * skew / 2
    return stencil


def _laplacian(caller: str, n: int, ndim: int, skew: ArrayLike, dtype: DTypeLike
               ) -> sparse.BCSR:
    n, dtype = _checked_size(caller, n), _checked_dtype(caller, dtype)
    return _stencil_matrix(caller, (n,) * ndim, _laplacian_stencil(caller, ndim, skew, dtype))


def poisson_matrix(n: int, skew: ArrayLike = 0.0, *, dtype: DTypeLike = jnp.float32
                   ) -> sparse.BCSR:
    """The 2D 5-point Poisson matrix on an ``n × n`` grid with Dirichlet boundaries.

    The finite-difference ``-Δu`` scaled by ``h²``: 4 on the diagonal, -1 for
    each of the (up to four) grid neighbours; equal to
    ``pyamg.gallery.poisson((n, n))`` and to JAX-AMG's ``poisson_matrix(n)``.
    Symmetric positive definite, eigenvalues ``4 - 2 cos(kπ/(n+1)) - 2 cos(lπ/(n+1))``.

    ``skew`` (JAX-AMG's) adds the central difference of ``skew (∂u/∂x + ∂u/∂y)``:
    the coupling to the lower neighbour along each axis becomes ``-1 - skew/2``, to
    the upper one ``-1 + skew/2``, a nonsymmetric matrix for ``skew != 0``.

    Args:
      n: grid points per side, a static int >= 1; the matrix has ``n²`` unknowns.
      skew: scalar, may be traced.
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
    return _laplacian("poisson_matrix", n, 2, skew, dtype)


def poisson3d_matrix(n: int, skew: ArrayLike = 0.0, *, dtype: DTypeLike = jnp.float32
                     ) -> sparse.BCSR:
    """The 3D 7-point Poisson matrix on an ``n × n × n`` grid with Dirichlet boundaries.

    6 on the diagonal, -1 for each grid neighbour; equal to
    ``pyamg.gallery.poisson((n, n, n))``.  Symmetric positive definite.  ``skew`` as
    in :func:`poisson_matrix` (JAX-AMG's), along all three axes.

    Args:
      n: grid points per side, a static int >= 1; the matrix has ``n³`` unknowns.
      skew: scalar, may be traced.
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
    return _laplacian("poisson3d_matrix", n, 3, skew, dtype)


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
    return _bcsr(jnp.asarray(values, dtype), indices, indptr, (n * n, n * n))


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


def tridiagonal_matrix_distributed(
    n_global: int,
    rank: int,
    nranks: int,
    diagonal_value: ArrayLike = 2.0,
    dtype: DTypeLike | None = None,
) -> tuple[sparse.BCSR, int, int]:
    """Rank ``rank``'s rows of :func:`tridiagonal_matrix`, built locally (JAX-AMG's call).

    The rows ``row_start:row_end`` that ``jaxsolve.sharding.partition_rows(n_global,
    nranks)`` gives this rank (contiguous blocks, the first ``n_global % nranks`` ranks one
    row more: JAX-AMG's ``get_partition_info``), with global column indices; the global
    matrix is never formed.

    Args:
      n_global: the global number of rows, a static int >= 1.
      rank: this rank, ``0 <= rank < nranks``.
      nranks: the number of ranks, >= 1.
      diagonal_value: scalar, may be traced (the off-diagonal entries are -1).
      dtype: real floating dtype of the values; ``None``: JAX's default float dtype.

    Returns:
      ``(A_local, row_start, row_end)``: a BCSR of shape ``(row_end - row_start,
      n_global)`` (NumPy pattern, sorted columns) and the global rows it holds.

    Raises:
      TypeError, ValueError: as :func:`poisson_matrix_distributed`.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> A_local, row_start, row_end = matrices.tridiagonal_matrix_distributed(5, 1, 2)
      >>> (row_start, row_end), A_local.todense()
      ((3, 5), Array([[ 0.,  0., -1.,  2., -1.],
             [ 0.,  0.,  0., -1.,  2.]], dtype=float32))
    """
    caller = "tridiagonal_matrix_distributed"
    dtype = _checked_dtype(caller, dtype)
    diagonal = _checked_scalar(caller, "diagonal_value", diagonal_value, dtype)
    minus_one = jnp.asarray(-1, dtype)
    return _stencil_rows(caller, (n_global,), {(-1,): minus_one, (0,): diagonal,
                                               (1,): minus_one}, rank, nranks)


def poisson_matrix_distributed(
    nx: int,
    ny: int,
    rank: int,
    nranks: int,
    skew: ArrayLike = 0.0,
    dtype: DTypeLike | None = None,
) -> tuple[sparse.BCSR, int, int]:
    """Rank ``rank``'s rows of the 2D Poisson matrix of an ``nx × ny`` grid, built locally.

    The rows ``row_start:row_end`` that ``jaxsolve.sharding.partition_rows(nx * ny, nranks)``
    gives this rank (contiguous blocks, the first ``n % nranks`` ranks one row more), with
    global column indices, computed from the grid alone: the global matrix is never formed,
    so each MPI rank (or each device's host code) builds only its part, in ``O(rows)``.
    As JAX-AMG numbers it, ``x`` runs fastest: grid point ``(ix, iy)``, ``0 <= ix < nx``,
    ``0 <= iy < ny``, is row ``iy * nx + ix``, so the stacked blocks equal
    ``pyamg.gallery.poisson((ny, nx))``, and :func:`poisson_matrix` (with the same
    ``skew``) for ``nx = ny = n``.

    Args:
      nx, ny: grid points along each axis, static ints >= 1.
      rank: this rank, ``0 <= rank < nranks``.
      nranks: the number of ranks, >= 1.
      skew: as in :func:`poisson_matrix`; scalar, may be traced.
      dtype: real floating dtype of the values; ``None``: JAX's default float dtype.

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
    caller = "poisson_matrix_distributed"
    dtype = _checked_dtype(caller, dtype)
    return _stencil_rows(caller, (ny, nx), _laplacian_stencil(caller, 2, skew, dtype), rank,
                         nranks)


def poisson3d_matrix_distributed(
    nx: int, ny: int, nz: int, rank: int, nranks: int, *, dtype: DTypeLike = jnp.float32
) -> tuple[sparse.BCSR, int, int]:
    """Rank ``rank``'s rows of the 3D Poisson matrix of an ``nx × ny × nz`` grid, built locally.

    The 3D twin of :func:`poisson_matrix_distributed`, numbered as :func:`poisson3d_matrix`:
    unknown ``(i, j, k)`` is row ``(i * ny + j) * nz + k``; 6 on the diagonal, -1 for each
    grid neighbour; the stacked blocks equal ``pyamg.gallery.poisson((nx, ny, nz))`` and,
    for a cube, :func:`poisson3d_matrix`.

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
    caller = "poisson3d_matrix_distributed"
    dtype = _checked_dtype(caller, dtype)
    return _stencil_rows(caller, (nx, ny, nz), _laplacian_stencil(caller, 3, 0.0, dtype), rank,
                         nranks)


def random_matrix_distributed(
    n_global: int,
    rank: int,
    nranks: int,
    density: float = 0.01,
    dtype: DTypeLike | None = None,
    seed: int = 0,
) -> tuple[sparse.BCSR, int, int]:
    """Rank ``rank``'s rows of a random diagonally dominant sparse matrix (JAX-AMG's call).

    The rows ``row_start:row_end`` of ``partition_rows(n_global, nranks)``, drawn as
    :func:`random_matrix` draws a whole matrix but from the seed ``seed + rank`` (as
    JAX-AMG does: each rank draws its own block, so the global matrix depends on
    ``nranks``), with the diagonal entry of each row set to the row's absolute sum plus 1.

    Args:
      n_global: the global number of rows and columns, a static int >= 1.
      rank: this rank, ``0 <= rank < nranks``.
      nranks: the number of ranks, >= 1.
      density: the fraction of entries drawn, in ``[0, 1]``.
      dtype: real floating dtype of the values; ``None``: JAX's default float dtype.
      seed: the base seed of NumPy's ``default_rng``.

    Returns:
      ``(A_local, row_start, row_end)``, as :func:`poisson_matrix_distributed`.

    Examples:
      >>> import numpy as np
      >>> from jaxsolve.sparse import matrices
      >>> A_local, row_start, row_end = matrices.random_matrix_distributed(50, 1, 2, 0.1)
      >>> A_local.shape, (row_start, row_end)
      ((25, 50), (25, 50))
      >>> d = np.asarray(A_local.todense())
      >>> bool(np.all(2 * d[np.arange(25), np.arange(25, 50)] > np.abs(d).sum(axis=1)))
      True
    """
    from jaxsolve.sharding import partition_rows  # sharding needs no sparse: no cycle

    caller = "random_matrix_distributed"
    n_global = _checked_size(caller, n_global)
    rank, nranks = _checked_rank(caller, rank, nranks)
    row_start, row_end = partition_rows(n_global, nranks)[rank]
    block = _random_rows(caller, row_end - row_start, n_global, row_start, density,
                         _checked_dtype(caller, dtype), seed + rank)
    return block, row_start, row_end


def _checked_rank(caller: str, rank: int, nranks: int) -> tuple[int, int]:
    nranks = _checked_size(caller, nranks)
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
        raise TypeError(f"{caller}: rank must be an int, got {type(rank).__name__}.")
    if not 0 <= rank < nranks:
        raise ValueError(f"{caller}: rank={rank} is not one of the {nranks} ranks 0 to"
                         f" {nranks - 1}.")
    return int(rank), nranks


def _stencil_rows(caller: str, shape: tuple[int, ...],
                  stencil: dict[tuple[int, ...], jax.Array], rank: int, nranks: int
                  ) -> tuple[sparse.BCSR, int, int]:
    """Rows ``partition_rows(prod(shape), nranks)[rank]`` of the matrix of a
    constant-coefficient stencil ``{offset: coefficient}`` on a C-ordered grid with
    Dirichlet boundaries, with global columns, from the grid alone."""
    from jaxsolve.sharding import partition_rows  # sharding needs no sparse: no cycle

    shape = tuple(_checked_size(caller, n) for n in shape)
    rank, nranks = _checked_rank(caller, rank, nranks)
    n, ndim = math.prod(shape), len(shape)
    _check_int32_capacity(caller, n * len(stencil))
    row_start, row_end = partition_rows(n, nranks)[rank]
    offsets = np.array(list(stencil), np.int64).reshape(len(stencil), ndim)
    strides = np.cumprod((1,) + shape[:0:-1])[::-1]
    flat = offsets @ strides
    order = np.argsort(flat, kind="stable")  # ascending columns within each row
    rows = np.arange(row_start, row_end)
    points = np.stack(np.unravel_index(rows, shape))[:, :, None]  # (ndim, rows, 1)
    targets = points + offsets[order].T[:, None, :]
    inside = np.all((targets >= 0) & (targets < np.array(shape)[:, None, None]), axis=0)
    indices = (rows[:, None] + flat[order])[inside].astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum(inside.sum(axis=1))]).astype(np.int32)
    coefficients = jnp.stack(list(stencil.values()))
    data = coefficients[np.broadcast_to(order, inside.shape)[inside]]
    indices, indptr = _read_only(indices, indptr)
    return _bcsr(data, indices, indptr, (row_end - row_start, n)), row_start, row_end


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
    n: int,
    epsilon: ArrayLike = 1.0,
    theta: ArrayLike = 0.0,
    velocity: ArrayLike = 100.0,
    dtype: DTypeLike | None = None,
    *,
    peclet: ArrayLike | None = None,
) -> sparse.BCSR:
    """Upwind convection-diffusion ``-ε Δu + v·∇u`` on an ``n × n`` grid: nonsymmetric.

    JAX-AMG's parametrization: ``n × n`` nodes of spacing ``h = 1/(n - 1)``, couplings
    to nodes off the grid dropped (Dirichlet), the velocity ``v = velocity · (cos θ,
    sin θ)`` with its ``x`` component along the fast grid index ``j`` and its ``y``
    component along ``i``.  Diffusion is the 5-point Laplacian ``ε/h² (4, -1, -1, -1,
    -1)``, convection first-order upwind, ``|v_x|/h`` on the diagonal and ``-|v_x|/h``
    towards the upwind neighbour (``j - 1`` for ``v_x > 0``, else ``j + 1``), the same
    for ``y`` along ``i``.  So the matrix is an M-matrix (diagonally dominant,
    nonpositive off-diagonal) for every velocity.

    ``peclet=`` gives jaxsolve's earlier form instead, scaled by ``h²/ε`` so that its
    numbers do not grow with ``n``: velocity along ``(1, 1)`` with mesh Péclet number
    ``peclet = v_x h / ε = v_y h / ε``, row ``(i, j)`` reading ``(4 + 2 peclet) u[i,j]
    - (1 + peclet) (u[i-1,j] + u[i,j-1]) - u[i+1,j] - u[i,j+1]`` (``peclet = 0`` is
    :func:`poisson_matrix`); ``epsilon``, ``theta`` and ``velocity`` must then be left
    at their defaults.

    Args:
      n: grid points per side, a static int (>= 2, or >= 1 with ``peclet``); the matrix
        has ``n²`` unknowns.
      epsilon: diffusion coefficient ``ε > 0``, a scalar that may be traced.
      theta: the flow angle in radians, a scalar that may be traced.
      velocity: the flow speed, a scalar that may be traced.
      dtype: real floating dtype of the values; ``None``: JAX's default float dtype.
      peclet: the mesh Péclet number ``>= 0`` of the scaled form, a scalar that may be
        traced; ``None`` for JAX-AMG's form.

    Returns:
      A BCSR of shape ``(n², n²)`` with ``5n² - 4n`` stored entries (the full 5-point
      pattern, whatever the velocity, so that it may be traced).

    Raises:
      TypeError: if ``n`` is not an int, or ``dtype`` not a real floating dtype.
      ValueError: if ``n`` is too small, a concrete ``epsilon`` is not positive or
        ``peclet`` negative, ``peclet`` comes with other parameters, a parameter is
        not a scalar, ``dtype`` needs x64, or the matrix overflows int32 indices.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> a = matrices.convection_diffusion_matrix_2d(3, epsilon=0.25, velocity=1.0)
      >>> a.todense()[4]  # h = 1/2: diffusion 1 (4 on the diagonal), convection 2 along x
      Array([ 0., -1.,  0., -3.,  6., -1.,  0., -1.,  0.], dtype=float32)
      >>> a = matrices.convection_diffusion_matrix_2d(3, peclet=0.5).todense()
      >>> a[4]
      Array([ 0. , -1.5,  0. , -1.5,  5. , -1. ,  0. , -1. ,  0. ], dtype=float32)
      >>> bool((a == a.T).all())
      False
    """
    caller = "convection_diffusion_matrix_2d"
    n, dtype = _checked_size(caller, n), _checked_dtype(caller, dtype)
    if peclet is not None:
        given = {"epsilon": (epsilon, 1.0), "theta": (theta, 0.0), "velocity": (velocity, 100.0)}
        changed = [name for name, (value, default) in given.items()
                   if not _is_concrete_value(value, default)]
        if changed:
            raise ValueError(f"{caller}: peclet= replaces epsilon, theta and velocity; got"
                             f" {', '.join(changed)} too.")
        pe = _checked_scalar(caller, "peclet", peclet, dtype, ">= 0", lambda p: p >= 0)
        diffusion, along_x, along_y = jnp.asarray(1, dtype), pe, pe
    else:
        if n < 2:
            raise ValueError(f"{caller}: n must be >= 2 (the grid spacing is 1/(n - 1)), got"
                             f" {n}.")
        eps = _checked_scalar(caller, "epsilon", epsilon, dtype, "positive", lambda e: e > 0)
        angle = _checked_scalar(caller, "theta", theta, dtype)
        speed = _checked_scalar(caller, "velocity", velocity, dtype)
        h = 1 / (n - 1)
        diffusion = eps / h**2
        along_x, along_y = speed * jnp.cos(angle) / h, speed * jnp.sin(angle) / h
    stencil = {
        (0, 0): 4 * diffusion + jnp.abs(along_x) + jnp.abs(along_y),
        (-1, 0): -diffusion - jnp.maximum(along_y, 0),
        (0, -1): -diffusion - jnp.maximum(along_x, 0),
        (0, 1): -diffusion + jnp.minimum(along_x, 0),
        (1, 0): -diffusion + jnp.minimum(along_y, 0),
    }
    return _stencil_matrix(caller, (n, n), stencil)


def _is_concrete_value(value: ArrayLike, expected: float) -> bool:
    """Whether ``value`` is concretely ``expected`` (a traced value never is)."""
    try:
        return bool(np.asarray(value) == expected)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return False


def random_matrix(
    n: int, density: float = 0.01, dtype: DTypeLike = jnp.float32, seed: int = 0
) -> sparse.BCSR:
    """A random sparse ``n × n`` matrix, made diagonally dominant (JAX-AMG's).

    The off-diagonal entries are ``scipy.sparse.random(n, n, density, random_state=
    numpy.random.default_rng(seed))`` (uniform in ``[0, 1)``, at random positions); each
    diagonal entry is its row's absolute sum (over the drawn entries, the drawn diagonal
    one included) plus 1, so the matrix is strictly diagonally dominant: nonsingular,
    nonsymmetric.  Built on the host; the pattern is a NumPy array.

    Args:
      n: rows and columns, a static int >= 1.
      density: the fraction of entries drawn, in ``[0, 1]``.
      dtype: real floating dtype of the values.
      seed: the seed of NumPy's ``default_rng``.

    Returns:
      A BCSR of shape ``(n, n)``, columns sorted within rows.

    Examples:
      >>> import numpy as np
      >>> from jaxsolve.sparse import matrices
      >>> a = np.asarray(matrices.random_matrix(100, density=0.05, seed=3).todense())
      >>> bool(np.all(2 * np.diag(a) > np.abs(a).sum(axis=1))), bool((a != a.T).any())
      (True, True)
    """
    caller = "random_matrix"
    n = _checked_size(caller, n)
    return _random_rows(caller, n, n, 0, density, _checked_dtype(caller, dtype), seed)


def _random_rows(caller: str, rows: int, columns: int, row_start: int, density: float,
                 dtype: np.dtype, seed: int) -> sparse.BCSR:
    """``rows`` random rows of a ``columns``-column matrix whose diagonal is in column
    ``row_start + i`` of row ``i``: the drawn entries, the diagonal replaced by the row's
    absolute sum plus 1."""
    import scipy.sparse

    if not 0 <= density <= 1:
        raise ValueError(f"{caller}: density must be in [0, 1], got {density}.")
    drawn = scipy.sparse.random(
        rows, columns, density=density, format="coo", random_state=np.random.default_rng(seed),
        dtype=np.float32 if dtype == np.float32 else np.float64)
    diagonal = np.asarray(abs(drawn).sum(axis=1)).ravel() + 1
    off = drawn.col != drawn.row + row_start
    matrix = scipy.sparse.csr_array(
        (np.concatenate([drawn.data[off], diagonal]),
         (np.concatenate([drawn.row[off], np.arange(rows)]),
          np.concatenate([drawn.col[off], np.arange(rows) + row_start]))),
        shape=(rows, columns))
    matrix.sort_indices()
    _check_int32_capacity(caller, matrix.nnz)
    indices, indptr = _read_only(matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32))
    return _bcsr(jnp.asarray(matrix.data, dtype), indices, indptr, (rows, columns))


# -----------------------------------------------------------------------------
# Matrix-free operators (JAX-AMG's): functions x ↦ A x for solve(A=...) to trace


def tridiagonal_operator(diagonal_value: ArrayLike = 2.0, dtype: DTypeLike | None = None
                         ) -> Callable[[jax.Array], jax.Array]:
    """The matrix-free :func:`tridiagonal_matrix`: ``x ↦ A x`` for ``[-1, d, -1]``.

    For any length ``n``: ``(A x)[i] = d x[i] - x[i-1] - x[i+1]`` with the neighbours
    outside ``[0, n)`` zero.  ``solve`` and :func:`jaxsolve.sparse.trace_sparsity` read
    its exact tridiagonal pattern from the jaxpr.

    Args:
      diagonal_value: scalar ``d``, may be traced.
      dtype: real floating dtype of the coefficients; ``None``: JAX's default.  The
        result has the dtype of ``x`` and the coefficients promoted together.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve.sparse import matrices
      >>> matrices.tridiagonal_operator(3.0)(jnp.ones(4))
      Array([2., 1., 1., 2.], dtype=float32)
    """
    caller = "tridiagonal_operator"
    dtype = _checked_dtype(caller, dtype)
    diagonal = _checked_scalar(caller, "diagonal_value", diagonal_value, dtype)

    def matvec(x: jax.Array) -> jax.Array:
        x = _checked_vector(caller, x)
        padded = jnp.pad(x, 1)
        return diagonal * x - padded[:-2] - padded[2:]

    return matvec


def poisson_operator(skew: ArrayLike = 0.0, dtype: DTypeLike | None = None
                     ) -> Callable[[jax.Array], jax.Array]:
    """The matrix-free 2D 5-point Poisson operator on a flattened ``n × n`` grid.

    For ``x`` of length ``n²`` (``n`` read from it): ``4 x[i,j]`` minus the grid
    neighbours, Dirichlet boundaries.  As JAX-AMG's ``poisson_operator`` (a
    convolution, which flips its stencil), ``skew`` weighs the *upper* neighbours
    ``(i+1, j)``, ``(i, j+1)`` by ``-1 - skew/2`` and the lower ones by ``-1 + skew/2``:
    the operator is ``poisson_matrix(n, -skew)``, the transpose of ``poisson_matrix(n,
    skew)`` (the same matrix for ``skew = 0``).

    Args:
      skew: scalar, may be traced.
      dtype: real floating dtype of the coefficients; ``None``: JAX's default.

    Raises (when called):
      ValueError: if ``x`` is not a vector whose length is a perfect square.

    Examples:
      >>> import jax.numpy as jnp, numpy as np
      >>> from jaxsolve.sparse import matrices
      >>> x = jnp.arange(9.0)
      >>> bool(np.allclose(matrices.poisson_operator(0.5)(x),
      ...                  matrices.poisson_matrix(3, -0.5) @ x))
      True
    """
    caller = "poisson_operator"
    dtype = _checked_dtype(caller, dtype)
    skew = _checked_scalar(caller, "skew", skew, dtype)

    def matvec(u_flat: jax.Array) -> jax.Array:
        padded = jnp.pad(_grid(caller, u_flat, 2), 1)
        lower = padded[:-2, 1:-1] + padded[1:-1, :-2]
        upper = padded[2:, 1:-1] + padded[1:-1, 2:]
        centre = padded[1:-1, 1:-1]
        return (4 * centre + (-1 + skew / 2) * lower + (-1 - skew / 2) * upper).ravel()

    return matvec


def poisson3d_operator(robin: ArrayLike = 0.0, diagonal_value: ArrayLike = 6.0
                       ) -> Callable[[jax.Array], jax.Array]:
    """The matrix-free 3D 7-point Poisson operator on a flattened ``n × n × n`` grid.

    For ``x`` of length ``n³``: ``diagonal_value · x`` minus the six grid neighbours,
    Dirichlet boundaries; ``robin`` adds ``robin`` to the diagonal of a boundary cell
    once per face it has on the boundary (JAX-AMG's Robin condition: heterogeneous,
    larger boundary diagonals).  The defaults give :func:`poisson3d_matrix`'s operator.

    Args:
      robin: scalar, may be traced.
      diagonal_value: the interior diagonal, scalar, may be traced.

    Raises (when called):
      ValueError: if ``x`` is not a vector whose length is a perfect cube.

    Examples:
      >>> import jax.numpy as jnp, numpy as np
      >>> from jaxsolve.sparse import matrices
      >>> x = jnp.arange(27.0)
      >>> bool(np.allclose(matrices.poisson3d_operator()(x), matrices.poisson3d_matrix(3) @ x))
      True
      >>> float(matrices.poisson3d_operator(robin=1.0)(jnp.ones(27))[0])  # a corner: 3 faces
      6.0
    """
    caller = "poisson3d_operator"

    def matvec(u_flat: jax.Array) -> jax.Array:
        u = _grid(caller, u_flat, 3)
        padded = jnp.pad(u, 1)
        inner = (slice(1, -1),) * 3
        neighbours = sum(
            padded[tuple(slice(1 + step, padded.shape[a] - 1 + step) if a == axis else inner[a]
                         for a in range(3))]
            for axis in range(3) for step in (-1, 1))
        faces = _boundary_faces(u.shape[0]).astype(u.dtype)
        return ((diagonal_value + robin * faces) * u - neighbours).ravel()

    return matvec


@functools.lru_cache(maxsize=8)
def _boundary_faces(n: int) -> np.ndarray:
    """How many faces of each cell of an ``n³`` grid lie on the boundary."""
    index = np.arange(n)
    on_edge = (index == 0).astype(np.int8) + (index == n - 1)
    faces = on_edge[:, None, None] + on_edge[None, :, None] + on_edge[None, None, :]
    return _read_only(faces)[0]


def _checked_vector(caller: str, x: ArrayLike) -> jax.Array:
    x = jnp.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"{caller}: the operator takes a vector, got shape {x.shape}.")
    return x


def _grid(caller: str, x: ArrayLike, ndim: int) -> jax.Array:
    """The vector ``x`` of length ``n^ndim`` as an ``n × ... × n`` grid."""
    x = _checked_vector(caller, x)
    n = round(x.shape[0] ** (1 / ndim))
    if n**ndim != x.shape[0]:
        power = "square n²" if ndim == 2 else "cube n³"
        raise ValueError(f"{caller}: the input's length {x.shape[0]} is not a perfect {power}.")
    return x.reshape((n,) * ndim)


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
    return _bcsr(data, indices, indptr, (2 * n * n,) * 2), modes.astype(dtype)


# -----------------------------------------------------------------------------
# Right-hand sides


def rhs_ones(n: int, dtype: DTypeLike | None = None) -> jax.Array:
    """The right-hand side of all ones, of length ``n`` (pass ``A.shape[0]``).

    ``dtype`` ``None`` (all three ``rhs_*``, as JAX-AMG's): JAX's default float dtype.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> matrices.rhs_ones(3)
      Array([1., 1., 1.], dtype=float32)
    """
    n, dtype = _checked_size("rhs_ones", n), _checked_dtype("rhs_ones", dtype)
    return jnp.ones(n, dtype)


def rhs_linear(n: int, dtype: DTypeLike | None = None) -> jax.Array:
    """The right-hand side rising linearly from 0 to 1: ``jnp.linspace(0, 1, n)`` (JAX-AMG's).

    Unlike :func:`rhs_ones` it is not a smooth eigenvector-like vector for stencil
    matrices.

    Examples:
      >>> from jaxsolve.sparse import matrices
      >>> matrices.rhs_linear(5)
      Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    n, dtype = _checked_size("rhs_linear", n), _checked_dtype("rhs_linear", dtype)
    return jnp.linspace(0, 1, n, dtype=dtype)


def rhs_random(n: int, seed: int = 0, dtype: DTypeLike | None = None) -> jax.Array:
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


# -----------------------------------------------------------------------------
# The SuiteSparse Matrix Collection


def download_suitesparse_matrix(
    name: str,
    group: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    dtype: DTypeLike | None = None,
    base_url: str = "https://sparse.tamu.edu/MM",
    timeout: float = 60.0,
) -> scipy.sparse.csr_matrix:
    """A matrix of the SuiteSparse Matrix Collection, as a SciPy CSR matrix (JAX-AMG's call).

    The matrix ``group/name`` is read from ``cache_dir/group/name/name.mtx``; when that
    file is missing, from the archive ``name.tar.gz`` beside it (extracted once), and when
    that is missing too, the archive is first downloaded from ``base_url/group/name.tar.gz``
    (written under a temporary name and renamed, so an interrupted download leaves
    nothing behind).  So the function works offline from a file put there by hand.

    Args:
      name: the matrix name, or ``"group/name"``.
      group: the collection's group, unless ``name`` includes it.
      cache_dir: the cache folder; by default ``~/.cache/jaxsolve/suitesparse``.
      dtype: the values' dtype; by default as the file stores them (float64 for real).
      base_url: the collection's Matrix Market archive URL.
      timeout: the download's socket timeout, in seconds.

    Returns:
      A ``scipy.sparse.csr_matrix`` (symmetric files mirrored, duplicates summed).

    Raises:
      ValueError: if no group is given.
      ConnectionError: if the matrix is not in the cache and cannot be downloaded (no
        network), naming the file to put in place instead.
      FileNotFoundError: if the archive holds no ``name.mtx``.

    Examples:
      >>> import os, tempfile
      >>> from jaxsolve.sparse import matrices
      >>> cache = tempfile.mkdtemp()
      >>> os.makedirs(os.path.join(cache, "HB", "tiny"))
      >>> with open(os.path.join(cache, "HB", "tiny", "tiny.mtx"), "w") as f:
      ...     _ = f.write("%%MatrixMarket matrix coordinate real general\\n2 2 2\\n1 1 4\\n2 2 5\\n")
      >>> matrices.download_suitesparse_matrix("HB/tiny", cache_dir=cache).toarray()
      array([[4., 0.],
             [0., 5.]])
    """
    import scipy.sparse

    from ._matrix_market import read_matrix_market

    caller = "download_suitesparse_matrix"
    if group is None:
        if "/" not in name:
            raise ValueError(f"{caller}: pass group='...' or name='group/name', got {name!r}.")
        group, name = name.split("/", 1)
    root = (pathlib.Path(cache_dir).expanduser() if cache_dir is not None
            else pathlib.Path.home() / ".cache" / "jaxsolve" / "suitesparse")
    folder = root / group / name
    matrix_path, archive_path = folder / f"{name}.mtx", folder / f"{name}.tar.gz"
    if not matrix_path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        if not archive_path.exists():
            url = f"{base_url.rstrip('/')}/{group}/{name}.tar.gz"
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    _write_atomically(response, archive_path)
            except OSError as error:  # URLError, timeouts and refused connections
                raise ConnectionError(
                    f"{caller}: could not download {url} ({error}). Without network access,"
                    f" put the matrix at {matrix_path} (or its archive at {archive_path})"
                    " and call again.") from None
        with tarfile.open(archive_path, "r:gz") as archive:
            member = next((m for m in archive.getmembers()
                           if m.isfile() and pathlib.PurePosixPath(m.name).name == f"{name}.mtx"),
                          None)
            source = None if member is None else archive.extractfile(member)
            if source is None:
                raise FileNotFoundError(f"{caller}: {archive_path} holds no {name}.mtx.")
            with source:
                _write_atomically(source, matrix_path)
    matrix, _ = read_matrix_market(matrix_path)
    matrix = scipy.sparse.csr_matrix(matrix)
    return matrix if dtype is None else matrix.astype(dtype)


def _write_atomically(source: Any, destination: pathlib.Path) -> None:
    """Copies the file object ``source`` to ``destination`` through a temporary file."""
    descriptor, temporary = tempfile.mkstemp(dir=destination.parent, suffix=".part")
    try:
        with open(descriptor, "wb") as target:
            shutil.copyfileobj(source, target)
        os.replace(temporary, destination)
    except BaseException:
        os.unlink(temporary)
        raise
