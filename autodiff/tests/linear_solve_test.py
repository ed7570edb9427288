"""Tests for jaxsolve.autodiff.linear_solve, the generic implicit rule."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import (
    HostServices,
    dense_solve,
    dense_transpose_solve,
    hermitian,
    positive_definite,
    random_array,
    well_conditioned,
)
from jaxsolve import autodiff


def solve_general(a, b, mode="jvp"):
    return autodiff.linear_solve(
        a, b, solve=dense_solve, transpose_solve=dense_transpose_solve, mode=mode
    )


def solve_hermitian(m, b, mode="jvp"):
    """The solve restricted to Hermitian matrices, A = (M + Mᴴ) / 2 + shift."""
    return autodiff.linear_solve(
        _shifted_hermitian(m), b, solve=dense_solve, symmetric=True, mode=mode
    )


def _shifted_hermitian(m):
    return hermitian(m) + 3 * jnp.eye(m.shape[0], dtype=m.dtype)


def make_system(columns):
    def make_args(rng, dtype):
        b_shape = (4,) if columns is None else (4, columns)
        return well_conditioned(rng, 4, dtype), random_array(rng, b_shape, dtype)

    return make_args


class TestLinearSolve:
    def test_linear_solve_against_jnp_nonsymmetric(self):
        autodiff.check_solver_derivatives(
            solve_general, make_system(2), reference=jnp.linalg.solve,
            vmap_in_axes=[(0, 0), (None, 0)],
        )

    def test_linear_solve_against_jnp_symmetric(self):
        autodiff.check_solver_derivatives(
            solve_hermitian, make_system(None),
            reference=lambda m, b: jnp.linalg.solve(_shifted_hermitian(m), b),
            dtypes=[np.float32, np.float64, np.complex128], vmap_in_axes=[(None, 0)],
        )

    @pytest.mark.parametrize("solver", [solve_general, solve_hermitian],
                             ids=["nonsymmetric", "symmetric"])
    def test_linear_solve_adjoint_against_jnp(self, solver):
        def reference(a, b):
            if solver is solve_hermitian:
                a = _shifted_hermitian(a)
            return jnp.linalg.solve(a, b)

        autodiff.check_solver_derivatives(
            lambda a, b: solver(a, b, mode="adjoint"), make_system(None),
            reference=reference, order=1, modes=("rev",),
            dtypes=[np.float32, np.complex128], vmap_in_axes=[(None, 0)],
        )

    def test_linear_solve_grad_is_transpose_solve(self, x64):
        """Acceptance: for a nonsymmetric 50×50 system, ∇_b = A⁻ᵀ g to 1e-10."""
        rng = np.random.default_rng(0)
        a = well_conditioned(rng, 50, np.float64)
        b, g = rng.standard_normal(50), rng.standard_normal(50)
        host = HostServices()

        def loss(b):
            x = autodiff.linear_solve(
                a, b, solve=host.solve, transpose_solve=host.transpose_solve
            )
            return jnp.dot(g, x)

        grad = jax.grad(loss)(b)
        assert np.max(np.abs(grad - np.linalg.solve(a.T, g))) < 1e-10
        assert np.max(np.abs(grad - np.linalg.solve(a, g))) > 1e-2  # not A⁻¹ g
        assert host.names() == ["solve", "transpose_solve"]

    def test_linear_solve_spd_cotangent_is_symmetric(self, x64):
        """Acceptance: an SPD solve's dense cotangent is symmetric to round-off."""
        rng = np.random.default_rng(0)
        a = positive_definite(random_array(rng, (6, 6), np.float64))
        b, g = rng.standard_normal(6), rng.standard_normal(6)

        def loss(a, symmetric):
            x = autodiff.linear_solve(
                a, b, solve=dense_solve, symmetric=symmetric,
                transpose_solve=None if symmetric else dense_transpose_solve,
            )
            return jnp.dot(g, x)

        a_bar = jax.grad(loss)(a, True)
        assert np.linalg.norm(a_bar - a_bar.T) <= 1e-14 * np.linalg.norm(a_bar)
        # It is the symmetric part of the unconstrained gradient -λ xᵀ.
        a_bar_general = jax.grad(loss)(a, False)
        np.testing.assert_allclose(a_bar, hermitian(a_bar_general), rtol=1e-12)
        assert np.linalg.norm(a_bar_general - a_bar_general.T) > 1e-3

    @pytest.mark.parametrize(
        "symmetric", [False, True], ids=["nonsymmetric", "symmetric"]
    )
    def test_linear_solve_vmap_grad_is_one_solve_per_direction(self, x64, symmetric):
        """Acceptance: jit(vmap(grad)) over 8 right-hand sides, 1 solve each way."""
        rng = np.random.default_rng(0)
        a = positive_definite(random_array(rng, (5, 5), np.float64))
        b = rng.standard_normal((8, 5))
        host = HostServices()

        def loss(a, b):
            x = autodiff.linear_solve(
                a, b, solve=host.solve, symmetric=symmetric,
                transpose_solve=None if symmetric else host.transpose_solve,
            )
            return jnp.sum(jnp.sin(x))

        gradient = jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(None, 0))
        a_bar, b_bar = jax.jit(gradient)(a, b)
        expected = ["solve", "solve"] if symmetric else ["solve", "transpose_solve"]
        assert host.calls == [(name, (5, 8)) for name in expected]
        def reference_loss(a, b):
            return jnp.sum(jnp.sin(jnp.linalg.solve(a, b)))

        reference = jax.vmap(
            jax.grad(reference_loss, argnums=(0, 1)), in_axes=(None, 0)
        )(a, b)
        np.testing.assert_allclose(b_bar, reference[1], rtol=1e-10)
        if not symmetric:
            np.testing.assert_allclose(a_bar, reference[0], rtol=1e-10)

    def test_linear_solve_adjoint_is_one_transposed_solve(self, x64):
        rng = np.random.default_rng(0)
        a, b = well_conditioned(rng, 5, np.float64), rng.standard_normal(5)
        host = HostServices()

        def loss(a, b, mode):
            x = autodiff.linear_solve(
                a, b, solve=host.solve, transpose_solve=host.transpose_solve, mode=mode
            )
            return jnp.sum(x**2)

        adjoint = jax.grad(loss, argnums=(0, 1))(a, b, "adjoint")
        assert host.names() == ["solve", "transpose_solve"]
        implicit = jax.grad(loss, argnums=(0, 1))(a, b, "jvp")
        for got, want in zip(adjoint, implicit):
            np.testing.assert_allclose(got, want, rtol=1e-12)

    def test_linear_solve_adjoint_refuses_higher_orders(self, x64):
        rng = np.random.default_rng(0)
        a, b = well_conditioned(rng, 3, np.float64), rng.standard_normal(3)

        def loss(b):
            return jnp.sum(solve_general(a, b, mode="adjoint") ** 2)

        with pytest.raises(TypeError, match="service was differentiated"):
            jax.hessian(loss)(b)
        with pytest.raises(TypeError, match="custom_vjp"):
            jax.jvp(loss, (b,), (b,))

    def test_linear_solve_without_transpose_solve_is_forward_only(self):
        rng = np.random.default_rng(0)
        a, b = well_conditioned(rng, 3, np.float32), random_array(rng, (3,), np.float32)

        def solve(b):
            return autodiff.linear_solve(a, b, solve=dense_solve)

        _, x_dot = jax.jvp(solve, (b,), (b,))
        np.testing.assert_allclose(x_dot, np.linalg.solve(a, b), rtol=1e-5)
        with pytest.raises(TypeError, match="transpose_solve required"):
            jax.grad(lambda b: jnp.sum(solve(b)))(b)

    def test_linear_solve_pytree_operator(self):
        """A tridiagonal operator as a pytree of its three diagonals."""
        rng = np.random.default_rng(0)
        operator = {
            "lower": random_array(rng, (3,), np.float32),
            "diagonal": 4 + random_array(rng, (4,), np.float32),
            "upper": random_array(rng, (3,), np.float32),
        }
        b = random_array(rng, (4, 2), np.float32)

        def dense(op):
            return (jnp.diag(op["lower"], -1) + jnp.diag(op["diagonal"])
                    + jnp.diag(op["upper"], 1))

        def matvec(op, x):  # linear in the leaves of op and in x
            y = op["diagonal"][:, None] * x
            y = y.at[1:].add(op["lower"][:, None] * x[:-1])
            return y.at[:-1].add(op["upper"][:, None] * x[1:])

        def loss(op, solve):
            return jnp.sum(jnp.sin(solve(op)))

        def solve(op):
            return autodiff.linear_solve(
                op, b, matvec=matvec,
                solve=lambda op, r: jnp.linalg.solve(dense(op), r),
                transpose_solve=lambda op, r: jnp.linalg.solve(dense(op).T, r),
            )

        got = jax.grad(loss)(operator, solve)
        want = jax.grad(loss)(operator, lambda op: jnp.linalg.solve(dense(op), b))
        assert jax.tree.structure(got) == jax.tree.structure(operator)
        for name in operator:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5)

    @pytest.mark.parametrize(
        "a_shape, b_shape, b_dtype, kwargs, error, message",
        [
            ((3, 3), (3,), np.float32, {"mode": "reverse"}, ValueError,
             "linear_solve: mode must be 'jvp' or 'adjoint', got 'reverse'."),
            ((3, 3), (3,), np.float32, {"mode": "adjoint"}, ValueError,
             "linear_solve: mode='adjoint' needs `transpose_solve` for a"
             " non-symmetric system."),
            ((3, 3), (3,), np.float32,
             {"symmetric": True, "transpose_solve": dense_solve}, ValueError,
             "linear_solve: symmetric=True solves transposed systems with `solve`;"),
            ((3, 4), (3,), np.float32, {}, ValueError,
             "linear_solve: a dense operator must be a square (n, n) matrix, got"
             " shape (3, 4)."),
            ((3, 3), (4,), np.float32, {}, ValueError,
             "linear_solve: A x cannot be formed for b of shape (4,):"),
            ((3, 3), (3, 1, 1), np.float32, {}, ValueError,
             "linear_solve: b must have shape (n,) or (n, k), got (3, 1, 1)."),
            ((3, 3), (3,), np.int32, {}, TypeError,
             "linear_solve: b must have a floating or complex dtype, got int32."),
            ((3, 3), (3,), np.complex64, {}, TypeError,
             "linear_solve: A and b must have the same dtype: b is complex64, A is"
             " float32."),
        ],
        ids=["mode", "adjoint", "symmetric", "square", "rows", "ndim", "int", "dtype"],
    )
    def test_linear_solve_errors(
        self, a_shape, b_shape, b_dtype, kwargs, error, message
    ):
        a = jnp.ones(a_shape, jnp.float32)
        b = jnp.ones(b_shape, b_dtype)
        with pytest.raises(error, match=re.escape(message)):
            autodiff.linear_solve(a, b, solve=dense_solve, **kwargs)

    def test_linear_solve_errors_for_pytree_operators(self):
        operator = {"values": jnp.ones(3)}
        b = jnp.ones(3)
        with pytest.raises(TypeError, match="linear_solve: `matvec` is required"):
            autodiff.linear_solve(operator, b, solve=dense_solve)
        with pytest.raises(
            ValueError, match="linear_solve: symmetric=True needs `symmetrize`"
        ):
            autodiff.linear_solve(
                operator, b, solve=dense_solve, matvec=lambda op, x: op["values"] * x,
                symmetric=True,
            )

    def test_operator_may_carry_data_of_another_dtype(self, x64):
        # A diagonal system whose operator also carries a float32 preconditioner: only
        # what the matvec reads must have b's dtype.
        diagonal = jnp.array([2.0, 4.0, 5.0])
        operator = {"diagonal": diagonal, "inverse": (1 / diagonal).astype(jnp.float32)}

        def solve(op, rhs):
            return op["inverse"].astype(rhs.dtype)[:, None] * rhs

        def loss(d):
            op = {"diagonal": d, "inverse": (1 / d).astype(jnp.float32)}
            x = autodiff.linear_solve(op, jnp.ones(3), solve=solve, transpose_solve=solve,
                                      matvec=lambda op, x: op["diagonal"] * x)
            return jnp.sum(x)

        x = autodiff.linear_solve(operator, jnp.ones(3), solve=solve, transpose_solve=solve,
                                  matvec=lambda op, x: op["diagonal"] * x)
        np.testing.assert_allclose(x, 1 / diagonal, rtol=1e-6)
        np.testing.assert_allclose(jax.grad(loss)(diagonal), -1 / diagonal**2, rtol=1e-6)
        with pytest.raises(TypeError, match=re.escape(
                "linear_solve: A and b must have the same dtype: b is float64, A is float32.")):
            autodiff.linear_solve({"diagonal": diagonal.astype(jnp.float32)}, jnp.ones(3),
                                  solve=solve, matvec=lambda op, x: op["diagonal"] * x)


def _with_residuals(solve):
    """A service returning ``(x, aux)``: per column, its residual and a count."""

    def service(a, rhs):
        x = solve(a, rhs)
        residual = jnp.linalg.norm(a @ x - rhs, axis=0) if solve is dense_solve else (
            jnp.linalg.norm(a.T @ x - rhs, axis=0))
        columns = rhs.shape[1]
        return x, {"residual": residual, "column": jnp.arange(columns, dtype=jnp.int32)}

    return service


class TestLinearSolveAux:
    @pytest.mark.parametrize("mode", ["jvp", "adjoint"])
    def test_aux_rides_along_and_derivatives_are_unchanged(self, x64, mode):
        rng = np.random.default_rng(0)
        a = well_conditioned(rng, 4, np.float64)
        b = random_array(rng, (4,), np.float64)

        def with_aux(a, b):
            return autodiff.linear_solve(
                a, b, solve=_with_residuals(dense_solve),
                transpose_solve=_with_residuals(dense_transpose_solve), mode=mode,
                has_aux=True)

        x, aux = jax.jit(with_aux)(a, b)
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-12)
        assert aux["residual"].shape == () and aux["residual"] < 1e-12
        assert aux["column"].dtype == jnp.int32 and aux["column"] == 0
        gradient = jax.grad(lambda a, b: with_aux(a, b)[0].sum(), argnums=(0, 1))(a, b)
        expected = jax.grad(lambda a, b: solve_general(a, b).sum(), argnums=(0, 1))(a, b)
        for got, want in zip(gradient, expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-10)

    def test_aux_forward_mode_has_zero_tangents(self, x64):
        rng = np.random.default_rng(1)
        a = well_conditioned(rng, 3, np.float64)
        b = random_array(rng, (3, 2), np.float64)
        solve = functools.partial(
            autodiff.linear_solve, solve=_with_residuals(dense_solve),
            transpose_solve=_with_residuals(dense_transpose_solve), has_aux=True)
        (x, aux), (x_dot, aux_dot) = jax.jvp(solve, (a, b), (jnp.zeros_like(a), b))
        np.testing.assert_allclose(x_dot, x, rtol=1e-12)  # ẋ = A⁻¹ ḃ = x for ḃ = b
        np.testing.assert_array_equal(aux["column"], [0, 1])
        assert not np.any(aux_dot["residual"])
        assert aux_dot["column"].dtype == jax.dtypes.float0

    def test_aux_under_vmap_gains_the_batch_axis_in_one_call(self, x64):
        rng = np.random.default_rng(2)
        a = well_conditioned(rng, 3, np.float64)
        bs = random_array(rng, (5, 3, 2), np.float64)
        calls = []

        def counted(a, rhs):
            calls.append(rhs.shape)
            return _with_residuals(dense_solve)(a, rhs)

        x, aux = jax.vmap(lambda b: autodiff.linear_solve(
            a, b, solve=counted, symmetric=False, has_aux=True))(bs)
        # Traced once unbatched (for its output types), then called once on all columns.
        assert calls[-1] == (3, 10) and (3, 2 * 5) not in calls[:-1]
        np.testing.assert_allclose(x, np.linalg.solve(a, bs), rtol=1e-10)
        assert aux["column"].shape == (5, 2)
        # Column c of example m was column c * 5 + m of the one folded call.
        np.testing.assert_array_equal(aux["column"], np.arange(10).reshape(2, 5).T)
