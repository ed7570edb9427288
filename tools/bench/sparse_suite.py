"""The sparse robustness suite: 15 problems, jaxsolve's solve next to PyAMG's, in one table.

Issue 29's measure of whether ``jaxsolve.sparse.solve`` converges where an AMG user expects
it to. Every matrix is built here, from PyAMG's and SciPy's generators or by our own
finite-element assembly (no package's stored example data), in f64 (complex128 for
Helmholtz), with ``b`` standard normal from a fixed seed (projected onto the range for the
singular problem) and ``x0 = 0``:

==================  ==========================================================  ===========
problem             matrix                                                      class
==================  ==========================================================  ===========
poisson2d           5-point Laplacian, Dirichlet (``pyamg.gallery.poisson``)    SPD
poisson3d           7-point Laplacian, Dirichlet                                SPD
anisotropic         rotated anisotropic diffusion, ε = 1e-3, θ = π/8 (FD)       SPD
jumping             Q1 FE diffusion, coefficient 1 or 1e6 on random 4×4 blocks  SPD
high_order          Q4 FE Laplacian (equispaced nodes): ρ(D⁻¹A) > 3           SPD
elasticity2d        Q1 plane elasticity, clamped (``linear_elasticity``), 2×2   SPD, block
elasticity3d        P1 elasticity (λ = μ = 1), tetrahedral cube, clamped face   SPD, block
neumann             5-point Laplacian with zero row sums (A·1 = 0)              singular
convection          upwind convection-diffusion, constant wind, ε = 1e-3        nonsym.
recirculating       upwind convection-diffusion, wind (2y(1-x²), -2x(1-y²))     nonsym.
helmholtz           Q1 FE −Δ − k², absorbing boundary, 10 points per wavelength complex
helmholtz_fd        the same by 5-point finite differences                      complex
graph               Laplacian of a k-nearest-neighbour graph (+ 1e-4 I)        SPD
unstructured2d      P1 Laplacian, Delaunay triangulation of random points       SPD
unstructured3d      P1 Laplacian, Delaunay tetrahedra of jittered grid points   SPD
==================  ==========================================================  ===========

Each is solved to ``‖b − A x‖ <= tol · ‖b‖`` (``--tol``, 1e-8) in at most ``--max-iters``
iterations by the configurations of ``--configs``:

* **default**: ``jaxsolve.sparse.solve(A, b, config={"tolerance": tol, "max_iters": …})``,
  every other setting solve's default; a block problem's ``block_dim`` is passed, a singular
  problem's null space is *not*;
* **l1**: a named configuration per class (:data:`L1`) with the ℓ1-Jacobi smoother, the
  one recommended while the default diverged on four of these problems (smoothed
  aggregation for the block problems, FGMRES with a long restart where A is not Hermitian);
  it passes the rigid-body modes (``near_nullspace``) of a block problem and the null space
  (``nullspace``) of the singular one.  Since 7 Dec the default takes fewer iterations on
  every problem (medium);
* **lean** (only when named in ``--configs``): issue 33's leanest classical hierarchy,
  PMISC with one aggressive level (:data:`LEAN`): PCG where A is Hermitian (SPD and
  singular problems), solve's default BiCGSTAB elsewhere; the rest solve's defaults, as
  for ``default``;
* **lean_two_stage** (only when named in ``--configs``): ``lean`` whose aggressive level
  interpolates in two D2 stages (``aggressive_interpolator: D2``) instead of by multipass;
* **d1** (only when named in ``--configs``): solve's default with D1 interpolation and no
  limit on its weights a row (``interpolator: D1``, ``interp_max_elements: -1``), the
  candidate complex default of issue 29: on ``helmholtz`` it takes 30 iterations against
  the default's 136, on ``helmholtz_fd`` 376 against 14 (medium), so it did not become one;
* **pyamg_rs**, **pyamg_sa**: ``pyamg.ruge_stuben_solver`` and
  ``pyamg.smoothed_aggregation_solver`` with PyAMG's defaults (SA: the rigid-body modes as
  ``B`` on the BSR matrix; ``symmetry="nonsymmetric"`` or ``"symmetric"`` (complex) where A
  is not Hermitian), accelerated by PyAMG's ``cg`` for SPD and singular problems, ``gmres``
  for the others.

**Columns.** ``its``: iterations as the method counts them (GMRES: inner steps; a
BiCGSTAB iteration applies ``A`` and the preconditioner twice, a CG or GMRES one once).
``setup``: jaxsolve: a cold-cache call (``clear_cache()`` then ``solve``, compiled) minus a
solve with ``reuse_setup=True``; PyAMG: the hierarchy's construction. ``solve``: jaxsolve:
the smaller of two ``reuse_setup=True`` calls; PyAMG: its solve. ``first``: jaxsolve: the
first call of a fresh process, issue 29's measure (a spawned process that has run one trivial
JAX program, untimed, so that JAX's start-up and the imports are not counted; the call
compiles every program it needs and sets up on the host), its programs compiled in the
JSON's ``first_programs``; PyAMG: setup + solve. In the suite's own process the earlier
rows' programs of the same shapes are compiled already: there the medium ``neumann`` row,
after ``poisson2d``, took 1.05 s against 3.1 s fresh. ``true res``:
``‖b − A x‖ / ‖b‖`` recomputed by SciPy. ``conv``: ``y`` when the true residual is at most
``2 · tol``. ``kept``: the memory the solve's hierarchy keeps, in multiples of A's own CSR
bytes (``describe``'s ``bytes_kept`` over ``matrix_bytes``; jaxsolve only). ``MB/it``: the
bytes one iteration moves through device memory at least (``memory_traffic_per_iteration``;
jaxsolve only): ``its × MB/it`` is the solve's traffic, what bounds its time on a GPU.
``ratio``: iterations over the fewest of the PyAMG rows that converged (by the true
residual: PyAMG's GMRES tests the preconditioned one, and can report ``info 0`` far from
``tol``). ``status``: jaxsolve's ``Status`` and ``FailureReason`` (PyAMG: its Krylov
method's ``info``). ``helmholtz`` and ``helmholtz_fd`` have no ratio: PyAMG 5.4's
Ruge–Stüben setup raises on a complex matrix, and its SA preconditioner diverges on these
indefinite ones (on ``helmholtz`` GMRES's preconditioned residual is 6.5e35 at the start,
``info 0`` after 2 steps at a true residual of 1, and FGMRES and BiCGSTAB end their 500
iterations at true residuals of 56–190; on ``helmholtz_fd`` GMRES reports ``info 0``
after 17 steps at a true residual of 1). Their sizes stay small because at ten points per
wavelength the problems grow harder with the grid: at 316² (99 856 rows, 31 wavelengths
across, 7 Dec 2026) the default's BiCGSTAB ends 1000 iterations on ``helmholtz`` at a true
residual of 0.06, and ``helmholtz_fd``'s classical coarsening stalls at level 2 with
12 483 rows, too many for the dense LU (with ``strength: ALL`` it coarsens, and ends 1000
iterations at 0.07; aggregation AMG at 0.14): no AMG hierarchy here preconditions these
indefinite operators at that size.

A configuration that runs longer than ``--hang-seconds`` ends the run with the stacks of its
threads (the rows before it are printed, and written to ``--json`` after every problem): a
blocked native call cannot be interrupted from Python.

    tools/dev bench sparse_suite                         # small: a couple of minutes
    tools/dev bench sparse_suite --size medium --json suite.json
    tools/dev bench sparse_suite --problems poisson3d helmholtz --configs default pyamg_sa
    tools/dev bench sparse_suite --size medium --configs default lean   # issue 33's trade
    tools/dev bench sparse_suite --size medium --configs lean lean_two_stage  # its interpolation
    tools/dev bench sparse_suite --size medium --problems helmholtz{,_fd} --configs default d1
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import faulthandler
import json
import math
import multiprocessing
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pyamg
import scipy.sparse
import scipy.spatial

import amg_configs

SPD, SINGULAR, NONSYMMETRIC, COMPLEX = "SPD", "singular", "nonsymmetric", "complex"
CONFIGS = ("default", "l1", "pyamg_rs", "pyamg_sa")
# Configurations run only when --configs names them.
OPTIONAL_CONFIGS = ("lean", "lean_two_stage", "d1")
# A run converged when its true relative residual is at most this many times the tolerance
# (a recurrence residual may drift a little from the true one).
CONVERGED_SLACK = 2
PYAMG_CONFIGS = ("pyamg_rs", "pyamg_sa")
# A problem's size parameter per --size ("tiny" is the smoke test's).
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"poisson2d": 12, "poisson3d": 6, "anisotropic": 12, "jumping": 12, "high_order": 3,
             "elasticity2d": 10, "elasticity3d": 3, "neumann": 12, "convection": 12,
             "recirculating": 12, "helmholtz": 12, "helmholtz_fd": 12, "graph": 150,
             "unstructured2d": 150, "unstructured3d": 5},
    "small": {"poisson2d": 48, "poisson3d": 14, "anisotropic": 48, "jumping": 48,
              "high_order": 12, "elasticity2d": 34, "elasticity3d": 8, "neumann": 48,
              "convection": 48, "recirculating": 48, "helmholtz": 32, "helmholtz_fd": 32,
              "graph": 2000, "unstructured2d": 2000, "unstructured3d": 15},
    "medium": {"poisson2d": 256, "poisson3d": 48, "anisotropic": 256, "jumping": 256,
               "high_order": 48, "elasticity2d": 130, "elasticity3d": 20, "neumann": 256,
               "convection": 256, "recirculating": 256, "helmholtz": 54, "helmholtz_fd": 96,
               "graph": 50000, "unstructured2d": 50000, "unstructured3d": 40},
}
# Issue 33's leanest classical hierarchy ("lean", amg_configs.LEAN).
LEAN = {"preconditioner": amg_configs.LEAN}
# "lean_two_stage": its aggressive level's P in two D2 stages (hypre's two-stage extended+i).
LEAN_TWO_STAGE = {"preconditioner": {**LEAN["preconditioner"], "aggressive_interpolator": "D2"}}
# "d1": D1 interpolation, unlimited weights a row (issue 29's candidate complex default).
D1 = {"preconditioner": {"solver": "AMG", "interpolator": "D1", "interp_max_elements": -1}}
# The ℓ1-Jacobi configuration per class ("l1"): AMG-preconditioned Krylov methods with
# the convergent l1-Jacobi smoother; FGMRES with a long restart where A is not Hermitian.
_SPD_L1 = {"solver": "PCG", "preconditioner": {"solver": "AMG", "smoother": "JACOBI_L1"}}
L1: dict[str, dict[str, Any]] = {
    SPD: _SPD_L1,
    # Block (elasticity): smoothed aggregation, which keeps the rigid-body modes it is given.
    "block": {"solver": "PCG", "preconditioner": {
        "solver": "AMG", "algorithm": "AGGREGATION", "jaxsolve_smoothed_aggregation": 1,
        "smoother": "JACOBI_L1"}},
    SINGULAR: _SPD_L1,
    NONSYMMETRIC: {"solver": "FGMRES", "gmres_n_restart": 50,
                   "preconditioner": {"solver": "AMG", "smoother": "JACOBI_L1"}},
    COMPLEX: {"solver": "FGMRES", "gmres_n_restart": 200,
              "preconditioner": {"solver": "AMG", "smoother": "JACOBI_L1"}},
}


@dataclasses.dataclass(frozen=True)
class Problem:
    """One system of the suite and what it claims to be (checked by the suite's test).

    ``kind``: SPD (Hermitian positive definite), singular (symmetric positive semidefinite,
    ``A·1 = 0``, ``b`` consistent), nonsymmetric (real) or complex (complex symmetric, not
    Hermitian).  ``modes``: the near-null space a smoothed-aggregation setup should keep
    (elasticity's rigid-body modes).  ``jacobi_radius_above``: a lower bound claimed for
    ``ρ(D⁻¹A)`` (what breaks damped Jacobi with ω = 0.9), or 0.
    """

    name: str
    A: scipy.sparse.csr_array
    b: np.ndarray
    kind: str
    block_dim: int = 1
    modes: np.ndarray | None = None
    jacobi_radius_above: float = 0.0


# Matrices ----------------------------------------------------------------------------------


def _csr(A: Any) -> scipy.sparse.csr_array:
    A = scipy.sparse.csr_array(A)
    A.sum_duplicates()
    A.sort_indices()
    return A


def _interior(shape: tuple[int, ...]) -> np.ndarray:
    """The indices (C order) of the nodes of a grid of ``shape`` not on its boundary."""
    mask = np.zeros(shape, bool)
    mask[tuple(slice(1, -1) for _ in shape)] = True
    return np.flatnonzero(mask)


def _restrict(A: scipy.sparse.csr_array, keep: np.ndarray) -> scipy.sparse.csr_array:
    """``A[keep][:, keep]``: Dirichlet conditions on the nodes not kept."""
    return _csr(A[keep][:, keep])


def _lagrange_1d(p: int) -> tuple[np.ndarray, np.ndarray]:
    """The 1D element stiffness and mass matrices on [0, 1] of degree-``p`` Lagrange basis
    functions on equispaced nodes (Gauss-Legendre quadrature, exact)."""
    nodes = np.linspace(0, 1, p + 1)
    points, weights = np.polynomial.legendre.leggauss(p + 1)
    points, weights = (points + 1) / 2, weights / 2
    values = np.empty((p + 1, points.size))
    slopes = np.empty((p + 1, points.size))
    for i in range(p + 1):
        others = np.delete(nodes, i)
        basis = np.poly1d(others, r=True) / np.prod(nodes[i] - others)
        values[i], slopes[i] = basis(points), basis.deriv()(points)
    return (slopes * weights) @ slopes.T, (values * weights) @ values.T


def qp_diffusion(elements: int, p: int, coefficient: np.ndarray | None = None
                 ) -> scipy.sparse.csr_array:
    """``−∇·(κ ∇u)`` by tensor-product Q``p`` finite elements on ``elements²`` squares of the
    unit square, Dirichlet boundary; ``κ`` constant per element (``(elements, elements)``,
    1 by default)."""
    stiffness, mass = _lagrange_1d(p)
    local = np.kron(stiffness, mass) + np.kron(mass, stiffness)  # h cancels in 2D
    side = p * elements + 1
    ex, ey = np.meshgrid(np.arange(elements), np.arange(elements), indexing="ij")
    a, c = np.meshgrid(np.arange(p + 1), np.arange(p + 1), indexing="ij")
    nodes = ((p * ex.ravel()[:, None] + a.ravel()) * side
             + p * ey.ravel()[:, None] + c.ravel())  # (elements², (p+1)²), kron order
    kappa = np.ones(elements * elements) if coefficient is None else coefficient.ravel()
    A = _assemble(nodes, kappa[:, None, None] * local, side * side)
    return _restrict(A, _interior((side, side)))


def jumping_coefficient(elements: int, rng: np.random.Generator) -> np.ndarray:
    """κ per element: 1e6 on a random quarter of the 4 × 4 blocks of elements, else 1."""
    blocks = -(-elements // 4)
    jumps = np.where(rng.random((blocks, blocks)) < 0.25, 1e6, 1.0)
    return np.kron(jumps, np.ones((4, 4)))[:elements, :elements]


def upwind_convection_diffusion(n: int, epsilon: float,
                                wind: Callable[[np.ndarray, np.ndarray], tuple]
                                ) -> scipy.sparse.csr_array:
    """``−ε Δu + w·∇u`` on the unit square's ``n × n`` interior grid points, Dirichlet,
    centred differences for ``Δ`` and first-order upwind ones for ``w·∇`` (an M-matrix),
    scaled by ``h²``."""
    h = 1 / (n + 1)
    x, y = np.meshgrid(np.arange(1, n + 1) * h, np.arange(1, n + 1) * h, indexing="ij")
    wx, wy = (np.broadcast_to(w, x.shape).ravel() * h for w in wind(x, y))
    index = np.arange(n * n).reshape(n, n)
    rows, cols = [index.ravel()], [index.ravel()]
    vals = [np.full(n * n, 4 * epsilon) + np.abs(wx) + np.abs(wy)]
    for axis, w in ((0, wx), (1, wy)):
        for step in (-1, 1):
            source = [slice(None), slice(None)]
            target = [slice(None), slice(None)]
            source[axis] = slice(max(0, -step), n - max(0, step))
            target[axis] = slice(max(0, step), n - max(0, -step))
            i, j = index[tuple(source)].ravel(), index[tuple(target)].ravel()
            # Upwind: the neighbour behind the wind (step −1 for w > 0) carries −w.
            upwind = np.where(step < 0, np.maximum(w[i], 0), np.maximum(-w[i], 0))
            rows.append(i), cols.append(j), vals.append(-epsilon - upwind)
    return _csr(scipy.sparse.coo_array(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n * n, n * n)))


def helmholtz(n: int) -> scipy.sparse.csr_array:
    """``−Δu − k²u`` by Q1 elements on ``n × n`` nodes of the unit square with the absorbing
    (Robin) condition ``∂u/∂n = i k u`` on every side, ``k h = 2π/10`` (10 points per
    wavelength): ``K − k² M − i k M_Γ``, complex symmetric."""
    h = 1 / (n - 1)
    k = 2 * np.pi / (10 * h)
    ends = np.r_[1.0, np.full(n - 2, 2.0), 1.0]
    stiffness = scipy.sparse.diags([-np.ones(n - 1), ends, -np.ones(n - 1)], [-1, 0, 1]) / h
    mass = scipy.sparse.diags([np.ones(n - 1), 2 * ends, np.ones(n - 1)], [-1, 0, 1]) * h / 6
    edge = scipy.sparse.diags(np.r_[1.0, np.zeros(n - 2), 1.0])
    K = scipy.sparse.kron(stiffness, mass) + scipy.sparse.kron(mass, stiffness)
    M = scipy.sparse.kron(mass, mass)
    boundary = scipy.sparse.kron(edge, mass) + scipy.sparse.kron(mass, edge)
    return _csr((K - k * k * M - 1j * k * boundary).astype(np.complex128))


def helmholtz_fd(n: int) -> scipy.sparse.csr_array:
    """``−Δu − k²u`` by 5-point finite differences on ``n × n`` points of unit spacing, with
    the absorbing condition ``∂u/∂n = i k u`` on every side (its ghost point eliminated),
    ``k = 2π/10`` (10 points per wavelength): complex symmetric.  Classical AMG's coarse
    levels turn indefinite here at other depths than ``helmholtz``'s, so a default chosen
    on one can fail on the other."""
    k = 2 * np.pi / 10
    diagonal = np.full(n, 2, complex)
    diagonal[[0, -1]] = 1 - 1j * k
    second_difference = scipy.sparse.diags([-np.ones(n - 1), diagonal, -np.ones(n - 1)],
                                           [-1, 0, 1])
    identity = scipy.sparse.identity(n)
    return _csr(scipy.sparse.kron(second_difference, identity)
                + scipy.sparse.kron(identity, second_difference)
                - k * k * scipy.sparse.identity(n * n))


def _p1_gradients(points: np.ndarray, simplices: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The simplices kept (flat ones dropped), their volumes and the gradients of their
    ``d + 1`` barycentric coordinates, ``(elements, d + 1, d)``."""
    d = points.shape[1]
    edges = points[simplices[:, 1:]] - points[simplices[:, :1]]  # (elements, d, d)
    volume = np.abs(np.linalg.det(edges)) / math.factorial(d)
    keep = volume > 1e-12 * volume.mean()  # drop flat simplices (cospherical points)
    simplices, edges, volume = simplices[keep], edges[keep], volume[keep]
    inverse = np.linalg.inv(edges)  # column i: the gradient of barycentric i + 1
    gradients = np.concatenate([-inverse.sum(axis=2, keepdims=True), inverse], axis=2)
    return simplices, volume, gradients.transpose(0, 2, 1)


def _assemble(dofs: np.ndarray, data: np.ndarray, size: int) -> scipy.sparse.csr_array:
    """The sum of the element matrices ``data`` (``(elements, m, m)``) on ``dofs``."""
    rows = np.broadcast_to(dofs[:, :, None], data.shape)
    cols = np.broadcast_to(dofs[:, None, :], data.shape)
    A = scipy.sparse.coo_array((data.ravel(), (rows.ravel(), cols.ravel())), shape=(size, size))
    return _csr((A + A.T) / 2)  # exactly symmetric, whatever the order of the sums


def p1_laplacian(points: np.ndarray, simplices: np.ndarray) -> scipy.sparse.csr_array:
    """The P1 finite-element Laplacian (stiffness matrix) of a simplicial mesh, 2D or 3D."""
    simplices, volume, gradients = _p1_gradients(points, simplices)
    data = volume[:, None, None] * gradients @ gradients.transpose(0, 2, 1)
    return _assemble(simplices, data, len(points))


def p1_elasticity(points: np.ndarray, simplices: np.ndarray, lame: float = 1.0,
                  shear: float = 1.0) -> scipy.sparse.csr_array:
    """P1 linear elasticity, ``∫ λ div u div v + 2μ ε(u):ε(v)``, unknowns node-major."""
    simplices, volume, g = _p1_gradients(points, simplices)
    elements, corners, d = g.shape
    eye = np.eye(d)
    # K[(a, i), (b, j)] = |T| (λ ∂ᵢφₐ ∂ⱼφ_b + μ ∂ⱼφₐ ∂ᵢφ_b + μ δᵢⱼ ∇φₐ·∇φ_b)
    data = (lame * np.einsum("eai,ebj->eaibj", g, g)
            + shear * np.einsum("eaj,ebi->eaibj", g, g)
            + shear * np.einsum("eak,ebk,ij->eaibj", g, g, eye))
    data = volume[:, None, None] * data.reshape(elements, corners * d, corners * d)
    dofs = (d * simplices[:, :, None] + np.arange(d)).reshape(elements, corners * d)
    return _assemble(dofs, data, d * len(points))


def rigid_body_modes_3d(points: np.ndarray) -> np.ndarray:
    """The six rigid-body modes (three translations, three rotations) of 3D elasticity."""
    x, y, z = points.T
    modes = np.zeros((3 * len(points), 6))
    for axis in range(3):
        modes[axis::3, axis] = 1
    for mode, (i, j, ci, cj) in enumerate(((0, 1, -y, x), (0, 2, -z, x), (1, 2, -z, y)), 3):
        modes[i::3, mode], modes[j::3, mode] = ci, cj
    return modes


def unstructured(points: np.ndarray) -> scipy.sparse.csr_array:
    """The P1 Laplacian on the Delaunay mesh of ``points``, Dirichlet on its hull."""
    mesh = scipy.spatial.Delaunay(points)
    A = p1_laplacian(points, mesh.simplices)
    interior = np.setdiff1d(np.arange(len(points)), np.unique(mesh.convex_hull))
    return _restrict(A, interior)


def elasticity_3d(n: int) -> tuple[scipy.sparse.csr_array, np.ndarray]:
    """P1 linear elasticity (λ = μ = 1) on the unit cube's ``n³`` cells, six tetrahedra each,
    clamped on the face ``x = 0``; the matrix and its six rigid-body modes."""
    side = n + 1
    grid = np.stack(np.meshgrid(*(np.linspace(0, 1, side),) * 3, indexing="ij"), -1)
    vertices = grid.reshape(-1, 3)
    corner = np.arange(side ** 3).reshape(side, side, side)[:-1, :-1, :-1].ravel()
    offsets = np.array([[(i >> 2) & 1, (i >> 1) & 1, i & 1] for i in range(8)])
    cube = corner[:, None] + offsets @ np.array([side * side, side, 1])  # (cells, 8)
    # Kuhn's six tetrahedra: paths from corner 0 to corner 7 along the three axes.
    paths = [(0, 4, 6, 7), (0, 4, 5, 7), (0, 2, 6, 7), (0, 2, 3, 7), (0, 1, 5, 7), (0, 1, 3, 7)]
    A = p1_elasticity(vertices, np.concatenate([cube[:, path] for path in paths]))
    free = np.flatnonzero(vertices[:, 0] > 0)
    dofs = (3 * free[:, None] + np.arange(3)).ravel()
    return _restrict(A, dofs), rigid_body_modes_3d(vertices)[dofs]


def knn_graph_laplacian(nodes: int, rng: np.random.Generator, k: int = 8,
                        shift: float = 1e-4) -> scipy.sparse.csr_array:
    """``L + shift · I``, ``L`` the Laplacian of the symmetrized ``k``-nearest-neighbour graph
    of random points in the unit cube, edge weights uniform in [0.5, 1.5]."""
    points = rng.random((nodes, 3))
    _, neighbours = scipy.spatial.cKDTree(points).query(points, k + 1)
    rows = np.repeat(np.arange(nodes), k)
    W = scipy.sparse.coo_array((rng.uniform(0.5, 1.5, rows.size),
                                (rows, neighbours[:, 1:].ravel())), shape=(nodes, nodes))
    W = _csr(W.maximum(W.T))
    degree = np.asarray(W.sum(axis=1)).ravel()
    return _csr(scipy.sparse.diags(degree + shift) - W)


def neumann_laplacian(n: int) -> scipy.sparse.csr_array:
    """The 5-point Laplacian of the ``n × n`` grid graph: zero row sums, null space 1."""
    A = _csr(pyamg.gallery.poisson((n, n), format="csr"))
    A.setdiag(0)
    A.setdiag(-np.asarray(A.sum(axis=1)).ravel())
    return _csr(A)


def build(name: str, size: int, seed: int = 0) -> Problem:
    """The suite's problem ``name`` at size parameter ``size`` (see ``SIZES``)."""
    rng = np.random.default_rng(seed)
    modes, block_dim, kind, radius = None, 1, SPD, 0.0
    if name == "poisson2d":
        A = pyamg.gallery.poisson((size, size), format="csr")
    elif name == "poisson3d":
        A = pyamg.gallery.poisson((size,) * 3, format="csr")
    elif name == "anisotropic":
        stencil = pyamg.gallery.diffusion_stencil_2d(epsilon=1e-3, theta=np.pi / 8, type="FD")
        A = pyamg.gallery.stencil_grid(stencil, (size, size), format="csr")
    elif name == "jumping":
        A = qp_diffusion(size, 1, jumping_coefficient(size, rng))
    elif name == "high_order":
        A, radius = qp_diffusion(size, 4), 3.0
    elif name == "elasticity2d":
        A, modes = pyamg.gallery.linear_elasticity((size, size), format="csr")
        block_dim = 2
    elif name == "elasticity3d":
        (A, modes), block_dim = elasticity_3d(size), 3
    elif name == "neumann":
        A, kind = neumann_laplacian(size), SINGULAR
    elif name == "convection":
        A = upwind_convection_diffusion(size, 1e-3, lambda x, y: (np.cos(np.pi / 6),
                                                                   np.sin(np.pi / 6)))
        kind = NONSYMMETRIC
    elif name == "recirculating":
        A = upwind_convection_diffusion(size, 1e-2, lambda x, y: (2 * y * (1 - x * x),
                                                                  -2 * x * (1 - y * y)))
        kind = NONSYMMETRIC
    elif name == "helmholtz":
        A, kind = helmholtz(size), COMPLEX
    elif name == "helmholtz_fd":
        A, kind = helmholtz_fd(size), COMPLEX
    elif name == "graph":
        A = knn_graph_laplacian(size, rng)
    elif name == "unstructured2d":
        A = unstructured(rng.random((size, 2)))
    elif name == "unstructured3d":
        h = 1 / (size - 1)
        grid = np.stack(np.meshgrid(*(np.linspace(0, 1, size),) * 3, indexing="ij"), -1)
        points = grid.reshape(-1, 3)
        inside = np.all((points > 0) & (points < 1), axis=1)
        points[inside] += rng.uniform(-0.3 * h, 0.3 * h, (inside.sum(), 3))
        A = unstructured(points)
    else:
        raise ValueError(f"unknown problem {name!r}; the suite's: {', '.join(SIZES['small'])}")
    A = _csr(A)
    n = A.shape[0]
    if kind == COMPLEX:
        b = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    else:
        b = rng.standard_normal(n)
    if kind == SINGULAR:
        b -= b.mean()  # orthogonal to null(Aᵀ) = span{1}: consistent
    return Problem(name, A, b, kind, block_dim, modes, radius)


# Runs --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
    """One configuration's run on one problem (times in seconds)."""

    problem: str
    rows: int
    config: str
    its: int = -1
    setup: float = math.nan
    solve: float = math.nan
    first: float = math.nan
    true_residual: float = math.nan
    converged: bool = False
    kept: float = math.nan  # memory kept, in multiples of A's CSR bytes (jaxsolve)
    mb_per_iteration: float = math.nan  # device traffic of one iteration, MB (jaxsolve)
    ratio: float = math.nan
    status: str = ""
    first_programs: int = -1  # programs the first call compiled (jaxsolve)


def true_residual(problem: Problem, x: Any) -> float:
    x = np.asarray(x)
    return float(np.linalg.norm(problem.b - problem.A @ x) / np.linalg.norm(problem.b))


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    import jax
    start = time.perf_counter()
    result = jax.block_until_ready(fn())
    return time.perf_counter() - start, result


def jaxsolve_config(name: str, problem: Problem, tol: float, max_iters: int
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(config, keyword arguments of solve)`` of configuration ``name`` on ``problem``."""
    config = {"tolerance": tol, "max_iters": max_iters}
    kwargs: dict[str, Any] = {}
    if problem.block_dim > 1:
        kwargs["block_dim"] = problem.block_dim
    if name == "l1":
        config = {**L1["block" if problem.block_dim > 1 else problem.kind], **config}
        if problem.modes is not None:  # smoothed aggregation's near-null space
            kwargs["near_nullspace"] = problem.modes
        if problem.kind == SINGULAR:
            kwargs["nullspace"] = np.ones(problem.A.shape[0])
    elif name == "d1":
        config = {**D1, **config}
    elif name in ("lean", "lean_two_stage"):
        hermitian = problem.kind in (SPD, SINGULAR)
        config = {**(LEAN if name == "lean" else LEAN_TWO_STAGE),
                  **({"solver": "PCG"} if hermitian else {}), **config}
    return config, kwargs


def run_jaxsolve(name: str, problem: Problem, tol: float, max_iters: int) -> Row:
    import jaxsolve.sparse as jsp
    config, kwargs = jaxsolve_config(name, problem, tol, max_iters)
    A = jsp.as_csr(problem.A)

    def call(**extra: Any):
        return jsp.solve(A, problem.b, config=config, **kwargs, **extra)

    first, first_programs = first_call_in_fresh_process(problem, config, kwargs)
    x, info = call()  # compiles here
    jsp.clear_cache()
    cold, _ = _timed(call)
    solve = min(_timed(lambda: call(reuse_setup=True))[0] for _ in range(2))
    status = jsp.Status(int(info.status)).name
    reason = jsp.FailureReason(int(info.failure_reason))
    residual = true_residual(problem, x)
    # the hierarchy the solve kept (describe finds it in the setup cache; nullspace= is the
    # Krylov method's, not the hierarchy's)
    hierarchy = {key: value for key, value in kwargs.items() if key != "nullspace"}
    stats = jsp.describe(A, config, **hierarchy)
    traffic = jsp.memory_traffic_per_iteration(A, config, **hierarchy)
    return Row(problem.name, problem.A.shape[0], name, int(info.iterations),
               max(cold - solve, 0.0), solve, first, residual,
               residual <= CONVERGED_SLACK * tol,
               status=status if reason == jsp.FailureReason.NONE else f"{status} {reason.name}",
               kept=sum(stats.bytes_kept.values()) / stats.matrix_bytes,
               mb_per_iteration=traffic.total / 1e6, first_programs=first_programs)


def first_call_in_fresh_process(problem: Problem, config: dict[str, Any],
                                 kwargs: dict[str, Any]) -> tuple[float, int]:
    """``(seconds, programs compiled)`` of ``solve``'s first call in a new process."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(_first_call, problem, config, kwargs).result()


def _first_call(problem: Problem, config: dict[str, Any], kwargs: dict[str, Any]
                ) -> tuple[float, int]:
    import jax
    jax.config.update("jax_enable_x64", True)
    import jaxsolve.sparse as jsp
    A = jsp.as_csr(problem.A)
    jax.block_until_ready(jax.jit(lambda x: x + 1)(np.ones(3)))  # JAX's own start-up
    programs = 0

    def count(event: str, duration: float, **_: Any) -> None:
        nonlocal programs
        programs += event == "/jax/core/compile/backend_compile_duration"

    jax.monitoring.register_event_duration_secs_listener(count)
    seconds, _ = _timed(lambda: jsp.solve(A, problem.b, config=config, **kwargs))
    return seconds, programs


def run_pyamg(name: str, problem: Problem, tol: float, max_iters: int) -> Row:
    A = problem.A
    hermitian = problem.kind in (SPD, SINGULAR)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "pyamg_rs":
            ml = pyamg.ruge_stuben_solver(A)
        else:
            symmetry = ("hermitian" if hermitian else
                        "symmetric" if problem.kind == COMPLEX else "nonsymmetric")
            matrix = (scipy.sparse.bsr_array(A, blocksize=(problem.block_dim,) * 2)
                      if problem.block_dim > 1 else A)
            ml = pyamg.smoothed_aggregation_solver(matrix, B=problem.modes, symmetry=symmetry)
        setup = time.perf_counter() - start
        residuals: list[float] = []
        start = time.perf_counter()
        x, info = ml.solve(problem.b, x0=np.zeros_like(problem.b), tol=tol,
                           maxiter=max_iters, accel="cg" if hermitian else "gmres",
                           residuals=residuals, return_info=True)
        solve = time.perf_counter() - start
    residual = true_residual(problem, x)
    return Row(problem.name, A.shape[0], name, len(residuals) - 1, setup, solve, setup + solve,
               residual, residual <= CONVERGED_SLACK * tol, status=f"info {info}")


def run(problem: Problem, configs: list[str], tol: float, max_iters: int,
        hang_seconds: float = 0) -> list[Row]:
    """Every configuration of ``configs`` on ``problem``, with their iteration ratios.

    With ``hang_seconds``, a run that takes longer ends the process with every thread's
    Python stack on stderr (a blocked native call cannot be interrupted otherwise); the rows
    printed and written before it stay.
    """
    rows = []
    for name in configs:
        runner = run_pyamg if name in PYAMG_CONFIGS else run_jaxsolve
        if hang_seconds:
            print(f"[{problem.name} {name}: more than {hang_seconds:g} s ends the run]",
                  file=sys.stderr, flush=True)
            faulthandler.dump_traceback_later(hang_seconds, exit=True)
        try:
            rows.append(runner(name, problem, tol, max_iters))
        except Exception as error:  # a row that raised is a result too: show it
            rows.append(Row(problem.name, problem.A.shape[0], name,
                            status=f"raised {type(error).__name__}: {error}"[:120]))
        finally:
            faulthandler.cancel_dump_traceback_later()
    pyamg_its = [row.its for row in rows if row.config in PYAMG_CONFIGS and row.converged]
    for row in rows:
        if pyamg_its and row.its >= 0:
            row.ratio = row.its / min(pyamg_its)
    return rows


# Table -------------------------------------------------------------------------------------

COLUMNS = ("problem", "rows", "config", "its", "setup s", "solve s", "first s", "true res",
           "conv", "kept", "MB/it", "ratio", "status")


def _cells(row: Row) -> list[str]:
    def number(value: float, digits: int = 3) -> str:
        return "-" if math.isnan(value) else f"{value:.{digits}f}"

    return [row.problem, str(row.rows), row.config, "-" if row.its < 0 else str(row.its),
            number(row.setup), number(row.solve), number(row.first),
            "-" if math.isnan(row.true_residual) else f"{row.true_residual:.1e}",
            "y" if row.converged else "n", number(row.kept, 2), number(row.mb_per_iteration),
            number(row.ratio, 2), row.status]


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table with :data:`COLUMNS`."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=list(SIZES["small"]),
                        choices=list(SIZES["small"]), metavar="PROBLEM")
    parser.add_argument("--size", default="small", choices=list(SIZES))
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS),
                        choices=CONFIGS + OPTIONAL_CONFIGS)
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--max-iters", type=int, default=500)
    parser.add_argument("--json", metavar="OUT",
                        help="also write the rows as JSON to OUT (after every problem)")
    parser.add_argument("--hang-seconds", type=float, default=1800,
                        help="end the run, with the stacks of its threads, when one"
                             " configuration takes longer (0: never)")
    args = parser.parse_args(argv)
    import jax
    jax.config.update("jax_enable_x64", True)
    device = jax.devices()[0]
    print(f"device: {device.device_kind} ({device.platform}), jax {jax.__version__}, "
          f"pyamg {pyamg.__version__}; size {args.size}, tol {args.tol:g}, "
          f"max_iters {args.max_iters}, b random, x0 = 0", flush=True)
    rows: list[Row] = []
    for name in args.problems:
        problem = build(name, SIZES[args.size][name])
        new = run(problem, args.configs, args.tol, args.max_iters, args.hang_seconds)
        rows += new
        print("\n".join(table(new).splitlines()[2:]), flush=True)  # progress, no header
        if args.json:
            with open(args.json, "w") as out:
                json.dump([dataclasses.asdict(row) for row in rows], out, indent=1)
    print()
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
