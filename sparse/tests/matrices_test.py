"""Tests for jaxsolve.sparse.matrices: the model problems against PyAMG and SciPy, their
structure, and their static patterns with traced values."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse
from pyamg import gallery

from jaxsolve.sparse import matrices, solve


def is_concrete(array):
    return isinstance(array, jax.Array) and not isinstance(array, jax.core.Tracer)


def assert_canonical(a, size):
    """``a`` is a valid (size, size) BCSR with a static int32 pattern, sorted and unique."""
    assert isinstance(a, sparse.BCSR) and a.shape == (size, size)
    for index in (a.indices, a.indptr):
        assert is_concrete(index) and index.dtype == np.int32
    csr = sp.csr_array((np.asarray(a.data), np.asarray(a.indices), np.asarray(a.indptr)),
                       shape=a.shape)
    assert csr.has_canonical_format  # sorted within rows, no duplicates
    sparse.BCSR((a.data, a.indices, a.indptr), shape=a.shape,  # validates
                indices_sorted=True, unique_indices=True)
    assert jax.tree.leaves(a) == [a.data]  # the pattern is static (aux data)


def dense(a):
    return np.asarray(a.todense())


def smallest_eigenvalue(a):
    return np.linalg.eigvalsh(dense(a).astype(np.float64)).min()


def pattern_is_concrete_under_jit(build, *values):
    """Runs ``build(*values)`` under jit; returns whether its pattern was concrete there, and
    the values it computed."""
    seen = []

    def traced(*args):
        a = build(*args)
        seen.append(is_concrete(a.indices) and is_concrete(a.indptr))
        assert isinstance(a.data, jax.core.Tracer)
        return a.data

    data = jax.jit(traced)(*values)
    return seen == [True], data


class TestTridiagonalMatrix:
    @pytest.mark.parametrize("n", [1, 2, 7])
    def test_tridiagonal_matrix_against_pyamg(self, n):
        a = matrices.tridiagonal_matrix(n)
        assert_canonical(a, n)
        np.testing.assert_array_equal(dense(a), gallery.poisson((n,)).toarray())

    def test_tridiagonal_matrix_values_against_scipy(self):
        expected = sp.diags_array([0.5, 3.0, 0.5], offsets=[-1, 0, 1], shape=(5, 5)).toarray()
        np.testing.assert_array_equal(dense(matrices.tridiagonal_matrix(5, 3.0, off_diagonal_value=0.5)), expected)

    def test_tridiagonal_matrix_jit(self):
        data = jax.jit(lambda d: matrices.tridiagonal_matrix(8, diagonal_value=d).data)(4.0)
        np.testing.assert_array_equal(data, matrices.tridiagonal_matrix(8, 4.0).data)
        concrete, data = pattern_is_concrete_under_jit(
            lambda d, o: matrices.tridiagonal_matrix(6, d, off_diagonal_value=o), 5.0, -2.0)
        assert concrete
        np.testing.assert_array_equal(data, matrices.tridiagonal_matrix(6, 5.0, off_diagonal_value=-2.0).data)

    def test_tridiagonal_matrix_grad(self):
        x = jnp.array([1.0, -2.0, 3.0, 0.5])

        def loss(d, o):
            return jnp.vdot(x, matrices.tridiagonal_matrix(4, d, off_diagonal_value=o) @ x)

        grad_d, grad_o = jax.grad(loss, argnums=(0, 1))(2.0, -1.0)
        np.testing.assert_allclose(grad_d, jnp.vdot(x, x))
        np.testing.assert_allclose(grad_o, 2 * jnp.vdot(x[1:], x[:-1]))

    def test_tridiagonal_matrix_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "tridiagonal_matrix: diagonal_value must be a scalar, got shape (2,).")):
            matrices.tridiagonal_matrix(4, jnp.ones(2))
        with pytest.raises(ValueError, match=re.escape(
                "tridiagonal_matrix: diagonal_value must be finite in float32, got nan.")):
            matrices.tridiagonal_matrix(4, np.nan)


class TestPoissonMatrix:
    @pytest.mark.parametrize("n", [1, 2, 6])
    def test_poisson_matrix_against_pyamg(self, n):
        a = matrices.poisson_matrix(n)
        assert_canonical(a, n * n)
        assert a.nse == 5 * n * n - 4 * n
        np.testing.assert_array_equal(dense(a), gallery.poisson((n, n)).toarray())

    def test_poisson_matrix_spd(self):
        n = 6
        a = dense(matrices.poisson_matrix(n))
        np.testing.assert_array_equal(a, a.T)
        np.testing.assert_allclose(smallest_eigenvalue(matrices.poisson_matrix(n)),
                                   4 - 4 * np.cos(np.pi / (n + 1)), rtol=1e-5)

    def test_poisson_matrix_jit(self):
        concrete, data = pattern_is_concrete_under_jit(lambda: matrices.poisson_matrix(4))
        assert concrete
        np.testing.assert_array_equal(data, matrices.poisson_matrix(4).data)

    def test_poisson_matrix_x64(self, x64):
        a = matrices.poisson_matrix(3, dtype=jnp.float64)
        assert a.data.dtype == jnp.float64
        assert a.indices.dtype == np.int32

    def test_poisson_matrix_errors(self):
        with pytest.raises(ValueError, match=re.escape("poisson_matrix: n must be >= 1, got 0.")):
            matrices.poisson_matrix(0)
        with pytest.raises(TypeError, match=re.escape(
                "poisson_matrix: n must be a Python int, got float; it fixes the sparsity"
                " pattern, so it cannot be traced (mark it static under jax.jit).")):
            matrices.poisson_matrix(4.0)
        with pytest.raises(TypeError, match="poisson_matrix: n must be a Python int, got"):
            jax.jit(matrices.poisson_matrix)(4)
        with pytest.raises(ValueError, match=re.escape(
                'poisson_matrix: dtype float64 needs 64-bit types; call jax.config.update('
                '"jax_enable_x64", True) first, or pass dtype=jnp.float32.')):
            matrices.poisson_matrix(3, dtype=jnp.float64)
        with pytest.raises(TypeError, match=re.escape(
                "poisson_matrix: dtype must be a real floating dtype such as float32 or float64,"
                " got int32.")):
            matrices.poisson_matrix(3, dtype=jnp.int32)
        with pytest.raises(ValueError, match=re.escape(
                "poisson_matrix: the matrix would have up to 4500000000 stored entries, more"
                " than int32 indices can address (2147483647); use a smaller n.")):
            matrices.poisson_matrix(30000)


class TestPoisson3dMatrix:
    @pytest.mark.parametrize("n", [1, 2, 4])
    def test_poisson3d_matrix_against_pyamg(self, n):
        a = matrices.poisson3d_matrix(n)
        assert_canonical(a, n**3)
        assert a.nse == 7 * n**3 - 6 * n**2
        np.testing.assert_array_equal(dense(a), gallery.poisson((n, n, n)).toarray())

    def test_poisson3d_matrix_spd(self):
        n = 4
        np.testing.assert_allclose(smallest_eigenvalue(matrices.poisson3d_matrix(n)),
                                   6 - 6 * np.cos(np.pi / (n + 1)), rtol=1e-5)

    def test_poisson3d_matrix_x64(self, x64):
        a = matrices.poisson3d_matrix(2, dtype=np.float64)
        assert a.data.dtype == jnp.float64
        np.testing.assert_array_equal(dense(a), gallery.poisson((2, 2, 2)).toarray())


class TestAnisotropicDiffusionMatrix:
    @pytest.mark.parametrize("discretization", ["FE", "FD"])
    @pytest.mark.parametrize("epsilon, theta", [(1.0, 0.0), (0.01, np.pi / 6), (0.3, 2.0)])
    def test_anisotropic_diffusion_matrix_against_pyamg(self, discretization, epsilon, theta):
        a = matrices.anisotropic_diffusion_matrix(5, epsilon, theta,
                                                  discretization=discretization)
        assert_canonical(a, 25)
        assert a.nse == (3 * 5 - 2) ** 2  # always the full 9-point pattern
        stencil = gallery.diffusion_stencil_2d(epsilon, theta, discretization)
        np.testing.assert_allclose(dense(a), gallery.stencil_grid(stencil, (5, 5)).toarray(),
                                   atol=2e-6)

    @pytest.mark.parametrize("discretization", ["FE", "FD"])
    def test_anisotropic_diffusion_matrix_spd(self, discretization):
        a = matrices.anisotropic_diffusion_matrix(6, 0.01, np.pi / 6,
                                                  discretization=discretization)
        np.testing.assert_allclose(dense(a), dense(a).T, atol=1e-7)
        assert smallest_eigenvalue(a) > 0

    def test_anisotropic_diffusion_matrix_jit(self, x64):
        concrete, data = pattern_is_concrete_under_jit(
            lambda e, t: matrices.anisotropic_diffusion_matrix(4, e, t, dtype=jnp.float64),
            0.1, 0.7)
        assert concrete
        np.testing.assert_allclose(
            data, matrices.anisotropic_diffusion_matrix(4, 0.1, 0.7, dtype=jnp.float64).data,
            rtol=1e-12)

    def test_anisotropic_diffusion_matrix_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                'anisotropic_diffusion_matrix: discretization must be "FE" (finite elements)'
                " or \"FD\" (finite differences), got 'FV'.")):
            matrices.anisotropic_diffusion_matrix(3, 0.1, 0.0, discretization="FV")
        with pytest.raises(ValueError, match=re.escape(
                "anisotropic_diffusion_matrix: epsilon must be positive, got 0.0.")):
            matrices.anisotropic_diffusion_matrix(3, 0.0, 0.0)


class TestConvectionDiffusionMatrix2d:
    @pytest.mark.parametrize("n", [1, 3, 5])
    def test_convection_diffusion_matrix_2d_against_scipy(self, n):
        peclet = 0.75
        a = matrices.convection_diffusion_matrix_2d(n, peclet=peclet)
        assert_canonical(a, n * n)
        # 1D upwind rows: (2 + Pe) u_i - (1 + Pe) u_{i-1} - u_{i+1}; 2D by Kronecker sums.
        one_d = sp.diags_array([-1 - peclet, 2 + peclet, -1.0], offsets=[-1, 0, 1],
                               shape=(n, n))
        identity = sp.eye_array(n)
        expected = (sp.kron(one_d, identity) + sp.kron(identity, one_d)).toarray()
        np.testing.assert_allclose(dense(a), expected, rtol=1e-6)

    def test_convection_diffusion_matrix_2d_nonsymmetric(self):
        a = dense(matrices.convection_diffusion_matrix_2d(4, peclet=2.0))
        assert np.abs(a - a.T).max() == 2.0
        assert np.linalg.eigvals(a.astype(np.float64)).real.min() > 0
        np.testing.assert_array_equal(dense(matrices.convection_diffusion_matrix_2d(4, peclet=0.0)),
                                      dense(matrices.poisson_matrix(4)))

    def test_convection_diffusion_matrix_2d_jit(self):
        concrete, data = pattern_is_concrete_under_jit(
            lambda p: matrices.convection_diffusion_matrix_2d(3, peclet=p), 1.5)
        assert concrete
        np.testing.assert_array_equal(data, matrices.convection_diffusion_matrix_2d(3, peclet=1.5).data)

    def test_convection_diffusion_matrix_2d_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "convection_diffusion_matrix_2d: peclet must be >= 0, got -1.0.")):
            matrices.convection_diffusion_matrix_2d(3, peclet=-1.0)
        with pytest.raises(ValueError, match=re.escape(
                "convection_diffusion_matrix_2d: peclet must be finite in float32, got 1e+39.")):
            matrices.convection_diffusion_matrix_2d(3, peclet=1e39)  # inf in float32


def _pyamg_elasticity(n, **kwargs):
    """PyAMG's plane elasticity, renumbered to our node order ``i n + j`` from its ``i + n j``."""
    a, modes = gallery.linear_elasticity((n, n), **kwargs)
    node = np.arange(n * n).reshape(n, n).T.ravel()  # ours -> PyAMG's
    dof = (2 * node[:, None] + np.arange(2)).ravel()
    return a.toarray()[np.ix_(dof, dof)], modes[dof]


class TestElasticityMatrix2d:
    @pytest.mark.parametrize("n", [1, 2, 5])
    def test_elasticity_matrix_2d_against_pyamg(self, n, x64):
        a, modes = matrices.elasticity_matrix_2d(n, 3.0, 0.25, dtype=jnp.float64)
        assert_canonical(a, 2 * n * n)
        expected_a, expected_modes = _pyamg_elasticity(n, E=3.0, nu=0.25)
        np.testing.assert_allclose(dense(a), expected_a, atol=1e-13)
        np.testing.assert_allclose(modes, expected_modes, atol=1e-13)

    def test_elasticity_matrix_2d_spd(self):
        a, _ = matrices.elasticity_matrix_2d(4, youngs_modulus=1.0)
        np.testing.assert_allclose(dense(a), dense(a).T, atol=1e-7)
        assert smallest_eigenvalue(a) > 0

    def test_elasticity_matrix_2d_rigid_body_modes(self, x64):
        """The modes are A's null vectors except on nodes that touch the fixed boundary."""
        n = 6
        a, modes = matrices.elasticity_matrix_2d(n, youngs_modulus=1.0, dtype=jnp.float64)
        assert isinstance(modes, np.ndarray) and modes.shape == (2 * n * n, 3)
        residual = np.abs(np.asarray(a @ jnp.asarray(modes))).reshape(n, n, 2, 3).max(axis=2)
        touching = np.ones((n, n), bool)
        touching[1:-1, 1:-1] = False
        assert residual[~touching].max() < 1e-12
        assert (residual[touching].max(axis=-1) > 1e-3).all()
        # Translations are constant per component, and the rotation is orthogonal to them.
        np.testing.assert_array_equal(modes[:, :2], np.tile(np.eye(2), (n * n, 1)))
        np.testing.assert_allclose(modes[:, :2].T @ modes[:, 2], 0.0, atol=1e-12)

    def test_elasticity_matrix_2d_jit(self):
        concrete, data = pattern_is_concrete_under_jit(
            lambda e, nu: matrices.elasticity_matrix_2d(3, e, nu)[0], 2.0, 0.2)
        assert concrete
        np.testing.assert_allclose(data, matrices.elasticity_matrix_2d(3, 2.0, 0.2)[0].data,
                                   rtol=1e-6)

    def test_elasticity_matrix_2d_x64(self, x64):
        a, modes = matrices.elasticity_matrix_2d(2, dtype=jnp.float64)
        assert a.data.dtype == jnp.float64 and modes.dtype == np.float64

    def test_elasticity_matrix_2d_errors(self):
        with pytest.raises(ValueError, match=re.escape(
                "elasticity_matrix_2d: poisson_ratio must be in (-1, 0.5), got 0.5.")):
            matrices.elasticity_matrix_2d(3, poisson_ratio=0.5)
        with pytest.raises(ValueError, match=re.escape(
                "elasticity_matrix_2d: youngs_modulus must be positive, got -1.0.")):
            matrices.elasticity_matrix_2d(3, youngs_modulus=-1.0)


class TestStaticPatternThroughJit:
    """The gallery's matrices keep their pattern static where they are jit arguments (JAX-AMG's
    solver_cache_benchmark demo rebuilds a BCSR from one inside jit and solves with it)."""

    def test_a_bcsr_rebuilt_inside_jit_solves_once_per_pattern(self):
        traces = []

        @jax.jit
        def step(a, b, key):
            traces.append(None)
            data = a.data + jax.random.uniform(key, a.data.shape, minval=-0.01, maxval=0.01)
            rebuilt = sparse.BCSR((data, a.indices, a.indptr), shape=a.shape)
            x, _ = solve(rebuilt, b, config={"solver": "PCG", "tolerance": 1e-6})
            return x, data

        for n in (6, 6, 6, 7):
            a, b = matrices.poisson_matrix(n), jnp.ones(n * n)
            x, data = step(a, b, jax.random.key(len(traces) + n))
            perturbed = sp.csr_array((np.asarray(data), np.asarray(a.indices),
                                      np.asarray(a.indptr)), shape=a.shape).toarray()
            np.testing.assert_allclose(x, np.linalg.solve(perturbed, np.ones(n * n)), rtol=1e-4)
        assert len(traces) == 2  # once for the 6² pattern's three value arrays, once for 7²

    def test_tree_operations_see_the_values_alone(self):
        a = matrices.tridiagonal_matrix(5)
        doubled = jax.tree.map(lambda v: 2 * v, a)
        np.testing.assert_array_equal(dense(doubled), 2 * dense(a))
        x = jnp.arange(1.0, 6.0)
        cotangent = jax.grad(lambda m: jnp.sum(m @ x))(a)  # d/d a_ij of sum(A x) = x_j
        assert isinstance(cotangent, sparse.BCSR) and cotangent.indices is a.indices
        np.testing.assert_array_equal(cotangent.data, x[np.asarray(a.indices)])
        batched = jax.vmap(lambda m: m @ x)(jax.tree.map(lambda v: jnp.stack([v, 3 * v]), a))
        np.testing.assert_allclose(batched, [dense(a) @ x, 3 * dense(a) @ x])

    def test_matrices_on_one_pattern_share_its_index_arrays(self):
        a = matrices.poisson_matrix(5)
        b = matrices.poisson_matrix(5, skew=0.5)
        assert b.indices is a.indices and b.indptr is a.indptr
        seen = []
        jax.jit(lambda m: seen.append(m.indices is a.indices) or m.data)(b)
        assert seen == [True]  # a jit argument's pattern is the matrix's own arrays
        c = jax.jit(lambda s: matrices.poisson_matrix(5, s).data)(0.5)
        np.testing.assert_array_equal(c, b.data)


class TestRightHandSides:
    def test_rhs_ones(self):
        np.testing.assert_array_equal(matrices.rhs_ones(3), np.ones(3, np.float32))
        assert matrices.rhs_ones(3).dtype == jnp.float32

    def test_rhs_linear(self):
        np.testing.assert_allclose(matrices.rhs_linear(5), np.linspace(0, 1, 5))

    def test_rhs_dtype_none_is_jax_default_and_positional(self):
        assert matrices.rhs_ones(3, None).dtype == jnp.float32
        assert matrices.rhs_random(3, 0, jnp.float32).dtype == jnp.float32
        with jax.enable_x64(True):
            assert matrices.rhs_ones(3).dtype == jnp.float64
            assert matrices.rhs_linear(3).dtype == jnp.float64

    def test_rhs_random(self):
        b = matrices.rhs_random(100, seed=3)
        np.testing.assert_array_equal(b, matrices.rhs_random(100, seed=3))
        assert not np.array_equal(b, matrices.rhs_random(100, seed=4))
        assert b.shape == (100,) and b.dtype == jnp.float32

    def test_rhs_x64(self, x64):
        for rhs in (matrices.rhs_ones, matrices.rhs_linear, matrices.rhs_random):
            assert rhs(4, dtype=jnp.float64).dtype == jnp.float64

    def test_rhs_errors(self):
        with pytest.raises(ValueError, match=re.escape("rhs_random: n must be >= 1, got -2.")):
            matrices.rhs_random(-2)


class TestModule:
    def test_module_exports(self):
        assert sorted(matrices.__all__) == matrices.__all__
        for name in matrices.__all__:
            assert getattr(matrices, name).__doc__.count("\n") > 3, name


class TestJaxAmgGallery:
    """The names JAX-AMG's ``jaxamg.matrices`` has beyond PyAMG's gallery, with its meaning."""

    def test_tridiagonal_matrix_takes_dtype_third_as_jax_amg(self):
        a = matrices.tridiagonal_matrix(4, 3.0, jnp.float32)
        np.testing.assert_array_equal(dense(a), sp.diags_array(
            [-1.0, 3.0, -1.0], offsets=[-1, 0, 1], shape=(4, 4)).toarray())

    @pytest.mark.parametrize("build, ndim", [(matrices.poisson_matrix, 2),
                                             (matrices.poisson3d_matrix, 3)])
    def test_skew_is_a_central_difference_of_the_gradient(self, build, ndim):
        n, skew = 3, 0.8
        first = sp.diags_array([-1.0, 1.0], offsets=[-1, 1], shape=(n, n))  # u[i+1] - u[i-1]
        gradient = sum(_axis_operator(first, axis, ndim, n) for axis in range(ndim))
        expected = dense(build(n)) + skew / 2 * gradient.toarray()
        np.testing.assert_allclose(dense(build(n, skew)), expected, rtol=1e-6)
        np.testing.assert_allclose(dense(build(n, -skew)), dense(build(n, skew)).T, rtol=1e-6)

    def test_convection_diffusion_in_jax_amg_parametrization(self):
        n, eps, theta, velocity = 5, 0.1, 0.6, 2.0
        h = 1 / (n - 1)
        vx, vy = velocity * np.cos(theta), velocity * np.sin(theta)  # both > 0: upwind i-1, j-1
        upwind = sp.diags_array([-1.0, 1.0], offsets=[-1, 0], shape=(n, n)) / h
        identity = sp.eye_array(n)
        laplacian = _axis_operator(sp.diags_array([-1.0, 2.0, -1.0], offsets=[-1, 0, 1],
                                                  shape=(n, n)), 0, 2, n)
        laplacian = laplacian + _axis_operator(sp.diags_array(
            [-1.0, 2.0, -1.0], offsets=[-1, 0, 1], shape=(n, n)), 1, 2, n)
        expected = (eps / h**2 * laplacian + vx * sp.kron(identity, upwind)
                    + vy * sp.kron(upwind, identity)).toarray()
        a = matrices.convection_diffusion_matrix_2d(n, eps, theta, velocity, jnp.float32)
        assert_canonical(a, n * n)
        np.testing.assert_allclose(dense(a), expected, rtol=1e-5)
        reversed_flow = dense(matrices.convection_diffusion_matrix_2d(n, eps, theta + np.pi,
                                                                      velocity))
        np.testing.assert_allclose(reversed_flow, expected.T, rtol=1e-4, atol=1e-3)
        data = jax.jit(lambda t: matrices.convection_diffusion_matrix_2d(n, eps, t).data)(theta)
        np.testing.assert_allclose(data, matrices.convection_diffusion_matrix_2d(
            n, eps, theta).data, rtol=1e-6)
        with pytest.raises(ValueError, match="peclet= replaces epsilon, theta and velocity; got"
                                             " theta too"):
            matrices.convection_diffusion_matrix_2d(3, theta=1.0, peclet=1.0)
        with pytest.raises(ValueError, match="n must be >= 2"):
            matrices.convection_diffusion_matrix_2d(1)

    def test_random_matrix_is_diagonally_dominant_and_reproducible(self):
        a = dense(matrices.random_matrix(60, 0.05, jnp.float32, seed=1))
        off = a - np.diag(np.diag(a))
        np.testing.assert_allclose(np.diag(a), np.abs(off).sum(axis=1) + 1, rtol=1e-6,
                                   atol=1.0)  # the drawn diagonal entry counts too
        assert np.all(np.diag(a) > np.abs(off).sum(axis=1))
        np.testing.assert_array_equal(a, dense(matrices.random_matrix(60, 0.05, seed=1)))
        assert not np.array_equal(a, dense(matrices.random_matrix(60, 0.05, seed=2)))
        with pytest.raises(ValueError, match="density must be in"):
            matrices.random_matrix(5, 2.0)

    def test_distributed_builders_stack_to_the_global_matrix(self):
        for nranks in (1, 3):
            blocks = [matrices.tridiagonal_matrix_distributed(7, r, nranks, 3.0)
                      for r in range(nranks)]
            np.testing.assert_array_equal(np.vstack([dense(b) for b, _, _ in blocks]),
                                          dense(matrices.tridiagonal_matrix(7, 3.0)))
            blocks = [matrices.random_matrix_distributed(30, r, nranks, 0.1, jnp.float32)
                      for r in range(nranks)]
            for block, start, end in blocks:
                d = dense(block)
                assert d.shape == (end - start, 30)
                assert np.all(2 * d[np.arange(end - start), np.arange(start, end)]
                              > np.abs(d).sum(axis=1))

    @pytest.mark.parametrize("operator, matrix, size", [
        (matrices.tridiagonal_operator(3.0), matrices.tridiagonal_matrix(9, 3.0), 9),
        (matrices.poisson_operator(), matrices.poisson_matrix(4), 16),
        (matrices.poisson_operator(0.5), matrices.poisson_matrix(4, -0.5), 16),
        (matrices.poisson3d_operator(), matrices.poisson3d_matrix(3), 27),
    ])
    def test_operators_apply_their_matrix_and_trace_exactly(self, operator, matrix, size):
        from jaxsolve.sparse import trace_sparsity

        x = jax.random.normal(jax.random.key(0), (size,))
        np.testing.assert_allclose(operator(x), matrix @ x, rtol=1e-5, atol=1e-5)
        pattern = trace_sparsity(operator, size)
        assert pattern.nnz == matrix.nse

    def test_poisson3d_operator_robin_adds_per_boundary_face(self):
        u = jnp.ones(27)
        faces = (matrices.poisson3d_operator(robin=2.0)(u) - matrices.poisson3d_operator()(u)) / 2
        np.testing.assert_array_equal(faces.reshape(3, 3, 3)[1, 1], [1, 0, 1])
        np.testing.assert_array_equal(faces.reshape(3, 3, 3)[0, 0], [3, 2, 3])
        with pytest.raises(ValueError, match="not a perfect cube"):
            matrices.poisson3d_operator()(jnp.ones(10))

    def test_suitesparse_loader_reads_the_cache_and_says_why_when_offline(self, tmp_path):
        import io
        import tarfile

        text = b"%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 2\n2 1 -1\n2 2 2\n3 3 2\n"
        folder = tmp_path / "Grp" / "tiny"
        folder.mkdir(parents=True)
        with tarfile.open(folder / "tiny.tar.gz", "w:gz") as archive:
            info = tarfile.TarInfo("tiny/tiny.mtx")
            info.size = len(text)
            archive.addfile(info, io.BytesIO(text))
        a = matrices.download_suitesparse_matrix("tiny", group="Grp", cache_dir=tmp_path,
                                                 dtype=np.float32)
        assert isinstance(a, sp.csr_matrix) and a.dtype == np.float32
        np.testing.assert_array_equal(a.toarray(), [[2, -1, 0], [-1, 2, 0], [0, 0, 2]])
        assert (folder / "tiny.mtx").exists()  # extracted once, read from there next time
        with pytest.raises(ConnectionError, match=re.escape(
                str(tmp_path / "Grp" / "absent" / "absent.mtx"))):
            matrices.download_suitesparse_matrix("Grp/absent", cache_dir=tmp_path,
                                                 base_url="http://127.0.0.1:9", timeout=5)
        with pytest.raises(ValueError, match="pass group="):
            matrices.download_suitesparse_matrix("tiny", cache_dir=tmp_path)


def _axis_operator(one_d, axis, ndim, n):
    """``one_d`` acting along grid axis ``axis`` of a C-ordered ``n^ndim`` grid."""
    identity = sp.eye_array(n)
    result = None
    for a in range(ndim):
        factor = one_d if a == axis else identity
        result = factor if result is None else sp.kron(result, factor)
    return result
