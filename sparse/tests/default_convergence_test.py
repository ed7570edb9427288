"""The default configuration converges where AMG can, on problems whose traps it used to fall in.

Each problem is one of the hard cases a default meets in practice: damped Jacobi with a
fixed ``ω = 0.9`` diverges where ``ρ(D⁻¹A) > 2 / 0.9`` (rotated anisotropy, elasticity),
a dense LU of the coarsest matrix of a singular (pure-Neumann) system divides by
rounding errors, and the coarse levels of an indefinite (Helmholtz) problem have rows no
smoother can damp.  Each test asserts convergence to 1e-8 (the true residual, not only the
status) within an iteration bound a few iterations above what the default takes now.
"""

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
import scipy.spatial

from jaxsolve import sparse
from jaxsolve.sparse import matrices

TOLERANCE = {"tolerance": 1e-8, "max_iters": 300}


def spectral_radius_of_jacobi(A) -> float:
    """``ρ(D⁻¹A)`` of a small symmetric matrix, densely."""
    dense = np.asarray(sparse.as_csr(A).todense(), np.float64)
    scale = 1 / np.sqrt(np.diag(dense))
    return float(np.max(np.abs(np.linalg.eigvalsh(scale[:, None] * dense * scale[None, :]))))


def converged(A, b, config=None, **kwargs):
    """Solves to 1e-8 (relative) and returns the iterations after checking the residual."""
    x, info = sparse.solve(A, b, config={**TOLERANCE, **(config or {})}, **kwargs)
    assert sparse.Status(int(info.status)).name == "SUCCESS", sparse.FailureReason(
        int(info.failure_reason)).name
    residual = np.linalg.norm(np.asarray(b) - np.asarray(sparse.as_csr(A) @ x))
    assert residual <= 1.01e-8 * np.linalg.norm(np.asarray(b))
    return int(info.iterations)


def neumann_laplacian(n: int) -> scipy.sparse.csr_array:
    """The Q1 finite-element Laplacian of an ``n × n`` grid of nodes with natural
    (Neumann) boundaries: 9-point, every row sums to zero, so ``A 1 = 0``."""
    path = scipy.sparse.diags_array([np.ones(n - 1), np.ones(n), np.ones(n - 1)],
                                    offsets=[-1, 0, 1])
    neighbours = scipy.sparse.csr_array(scipy.sparse.kron(path, path))
    neighbours.setdiag(0)
    neighbours.eliminate_zeros()
    degree = np.asarray(neighbours.sum(axis=1)).ravel()
    A = scipy.sparse.csr_array(scipy.sparse.diags_array(degree) - neighbours)
    A.sort_indices()
    return A


@pytest.mark.parametrize("solver, most", [("PBICGSTAB", 15), ("PCG", 22)])
def test_rotated_anisotropy_beyond_fixed_damping(x64, solver, most):
    # ε = 1e-3, θ = π/8 with Q1 elements: ρ(D⁻¹A) ≈ 2.5 > 2 / 0.9, where damped Jacobi
    # with ω = 0.9 made the cycle indefinite (PCG: PRECONDITIONER_NOT_POSITIVE_DEFINITE).
    A = matrices.anisotropic_diffusion_matrix(40, 1e-3, np.pi / 8, dtype=jnp.float64)
    assert spectral_radius_of_jacobi(A) > 2.3
    b = matrices.rhs_random(40 * 40, dtype=jnp.float64)
    assert converged(A, b, {"solver": solver}) <= most


@pytest.mark.parametrize("solver, most", [("PBICGSTAB", 14), ("PCG", 22)])
def test_elasticity_beyond_fixed_damping(x64, solver, most):
    # Q1 plane elasticity, block_dim 2: ρ(D⁻¹A) ≈ 2.3 (blocks or not) > 2 / 0.9.
    A, _ = matrices.elasticity_matrix_2d(20, dtype=jnp.float64)
    assert spectral_radius_of_jacobi(A) > 2.2
    b = matrices.rhs_random(2 * 20 * 20, dtype=jnp.float64)
    assert converged(A, b, {"solver": solver}, block_dim=2) <= most


def test_explicit_relaxation_factor_is_kept(x64):
    # Asked for by name, ω = 0.9 stays: the default estimates ω, an explicit one is used.
    A = matrices.anisotropic_diffusion_matrix(40, 1e-3, np.pi / 8, dtype=jnp.float64)
    b = matrices.rhs_random(40 * 40, dtype=jnp.float64)
    _, info = sparse.solve(A, b, config={**TOLERANCE, "solver": "PCG", "preconditioner": {
        "smoother": "BLOCK_JACOBI", "relaxation_factor": 0.9}})
    assert sparse.Status(int(info.status)).name == "FAILED"
    assert sparse.FailureReason(int(info.failure_reason)).name == (
        "PRECONDITIONER_NOT_POSITIVE_DEFINITE")


@pytest.mark.parametrize("config, most", [
    ({}, 8),
    ({"solver": "PCG"}, 10),
    ({"solver": "PCG", "preconditioner": {"algorithm": "AGGREGATION"}}, 25),
])
def test_neumann_problem_without_nullspace(x64, config, most):
    # A 1 = 0 and b ⟂ 1 (consistent), nullspace= not given: the setup finds the constant
    # null space and inverts the coarsest matrix by a pseudo-inverse, not LU.
    A = neumann_laplacian(64)
    b = matrices.rhs_random(64 * 64, dtype=jnp.float64)
    b = b - jnp.mean(b)
    assert converged(A, b, config) <= most


def helmholtz(nx: int, ny: int, points_per_wavelength: float) -> scipy.sparse.csr_array:
    """``-Δu - k²u`` by finite differences on an ``nx × ny`` grid of unit spacing, with the
    first-order absorbing condition ``∂u/∂n = i k u`` on every side: complex symmetric,
    indefinite."""
    k = 2 * np.pi / points_per_wavelength

    def second_difference(m):
        diagonal = np.full(m, 2, complex)
        diagonal[[0, -1]] = 1 - 1j * k  # the absorbing boundary's ghost point eliminated
        return scipy.sparse.diags_array([-np.ones(m - 1), diagonal, -np.ones(m - 1)],
                                        offsets=[-1, 0, 1])

    A = (scipy.sparse.kron(second_difference(nx), scipy.sparse.eye_array(ny))
         + scipy.sparse.kron(scipy.sparse.eye_array(nx), second_difference(ny))
         - k ** 2 * scipy.sparse.eye_array(nx * ny))
    A = scipy.sparse.csr_array(A)
    A.sort_indices()
    return A


@pytest.mark.parametrize("shape, config, most", [
    ((48, 60), {}, 140), ((24, 30), {"solver": "GMRES"}, 85)])
def test_complex_helmholtz(x64, shape, config, most):
    # 10 points per wavelength: the coarse levels of classical AMG turn indefinite (their
    # diagonals change sign), so coarsening stops there and that level is solved densely
    # (the default BiCGSTAB on 48 × 60 stalled at a residual of 2 after 300 iterations).
    A = helmholtz(*shape, 10)
    rng = np.random.default_rng(0)
    b = jnp.asarray(rng.standard_normal(A.shape[0]) + 1j * rng.standard_normal(A.shape[0]))
    assert converged(A, b, config) <= most


def jumping_coefficients(n: int, contrast: float, seed: int = 1) -> scipy.sparse.csr_array:
    """``-∇·(κ ∇u)`` by cell-centred finite volumes on ``n × n`` cells with Dirichlet
    boundaries, ``κ`` 1 or ``contrast`` at random on blocks of 8 × 8 cells (harmonic means
    on the faces)."""
    blocks = np.random.default_rng(seed).random((n // 8 + 1, n // 8 + 1)) < 0.5
    kappa = np.where(blocks, contrast, 1.0)[np.arange(n)[:, None] // 8,
                                             np.arange(n)[None, :] // 8]
    index = np.arange(n * n).reshape(n, n)
    # The faces between horizontal, then vertical, neighbours, and their harmonic means.
    pairs = [(index[:-1, :], index[1:, :], kappa[:-1, :], kappa[1:, :]),
             (index[:, :-1], index[:, 1:], kappa[:, :-1], kappa[:, 1:])]
    rows, columns, weights = [], [], []
    for i, j, left, right in pairs:
        rows.append(i.ravel()), columns.append(j.ravel())
        weights.append((2 * left * right / (left + right)).ravel())
    i, j, w = (np.concatenate(parts) for parts in (rows, columns, weights))
    boundary = np.zeros((n, n))  # a boundary face at half a cell: weight 2 κ
    boundary[[0, -1], :] += 2 * kappa[[0, -1], :]
    boundary[:, [0, -1]] += 2 * kappa[:, [0, -1]]
    diagonal = np.bincount(i, w, n * n) + np.bincount(j, w, n * n) + boundary.ravel()
    A = scipy.sparse.csr_array((np.concatenate([-w, -w, diagonal]),
                                (np.concatenate([i, j, np.arange(n * n)]),
                                 np.concatenate([j, i, np.arange(n * n)]))), shape=(n * n,) * 2)
    A.sort_indices()
    return A


def test_jumping_coefficients(x64):
    # A 10⁶ contrast: the strength threshold 0.25 (AmgX's default; 0.5 took 13 iterations
    # here, 42 at 256²) keeps the couplings across the jumps that interpolation needs.
    A = jumping_coefficients(64, 1e6)
    b = matrices.rhs_random(64 * 64, dtype=jnp.float64)
    assert converged(A, b, {"solver": "PCG"}) <= 11


def unstructured_laplacian(points: int, seed: int = 0) -> scipy.sparse.csr_array:
    """The P1 finite-element Laplacian on the Delaunay triangulation of random points in the
    unit square, Dirichlet on the hull: obtuse triangles give positive off-diagonals."""
    xy = np.random.default_rng(seed).random((points, 2))
    mesh = scipy.spatial.Delaunay(xy)
    corners = xy[mesh.simplices]  # (elements, 3, 2)
    edges = corners[:, 1:] - corners[:, :1]
    area = np.abs(np.linalg.det(edges)) / 2
    inverse = np.linalg.inv(edges)
    gradients = np.concatenate([-inverse.sum(axis=2, keepdims=True), inverse], axis=2)
    gradients = gradients.transpose(0, 2, 1)  # (elements, 3, 2): each corner's gradient
    local = area[:, None, None] * gradients @ gradients.transpose(0, 2, 1)
    rows = np.broadcast_to(mesh.simplices[:, :, None], local.shape).ravel()
    columns = np.broadcast_to(mesh.simplices[:, None, :], local.shape).ravel()
    A = scipy.sparse.csr_array((local.ravel(), (rows, columns)), shape=(points, points))
    interior = np.setdiff1d(np.arange(points), np.unique(mesh.convex_hull))
    A = scipy.sparse.csr_array(A[interior][:, interior])
    A.sort_indices()
    return A


def test_unstructured_mesh(x64):
    # Ruge–Stüben's first pass (HMIS, the default) keeps an F point's strong C neighbours
    # on an irregular mesh; random PMIS left so few that BiCGSTAB took 14 iterations here
    # against HMIS's 6 (45 against 8 on 50 000 points).
    A = unstructured_laplacian(2000)
    b = matrices.rhs_random(A.shape[0], dtype=jnp.float64)
    assert converged(A, b, {"solver": "PBICGSTAB"}) <= 8
    # The default's PCG on this SPD matrix (11 iterations, one V(1, 1) cycle each, where
    # BiCGSTAB's 6 apply V(1, 2) twice): no more cycles than BiCGSTAB's bound.
    assert converged(A, b) <= 12


def test_convection_dominated(x64):
    # Upwind convection-diffusion, ε = 1e-3 (mesh Péclet number about 10): PMIS took 12
    # BiCGSTAB iterations here, HMIS 9.
    A = matrices.convection_diffusion_matrix_2d(48, 1e-3, np.pi / 6, 1.0, dtype=jnp.float64)
    b = matrices.rhs_random(48 * 48, dtype=jnp.float64)
    assert converged(A, b) <= 10
