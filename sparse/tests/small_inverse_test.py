"""Tests for the batched small-matrix inverse without LAPACK (jaxsolve.sparse._small_inverse)."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsolve.sparse._small_inverse import small_inverse

# Relative accuracy of an inverse of a matrix of condition number ≲ 10 in each precision.
TOLERANCE = {np.float32: 1e-5, np.complex64: 1e-5, np.float64: 1e-13, np.complex128: 1e-13}


def well_conditioned(k: int, batch: int, dtype, seed: int = 0) -> np.ndarray:
    """``batch`` random ``k × k`` matrices of condition number ≲ 10 whose ``(0, 0)`` entry is
    zero (for ``k > 1``), so that the elimination must pivot."""
    rng = np.random.default_rng(seed)
    matrices = rng.uniform(-1, 1, (batch, k, k))
    if np.issubdtype(dtype, np.complexfloating):
        matrices = matrices + 1j * rng.uniform(-1, 1, (batch, k, k))
    matrices = matrices + 2 * k * np.eye(k)[:, ::-1]  # dominant anti-diagonal
    if k > 1:
        matrices[:, 0, 0] = 0
    return matrices.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("k", range(1, 7))
def test_matches_numpy(x64, k, dtype):
    matrices = well_conditioned(k, 50, dtype, seed=k)
    got = jax.jit(small_inverse)(jnp.asarray(matrices))
    assert got.dtype == dtype and got.shape == matrices.shape
    expected = np.linalg.inv(matrices.astype(np.complex128))
    np.testing.assert_allclose(got, expected, rtol=0,
                               atol=TOLERANCE[dtype] * np.abs(expected).max())


def test_pivots_where_the_leading_entry_is_zero(x64):
    # Without row exchanges the first step divides by a_00 = 0.
    matrices = jnp.asarray([[[0.0, 2.0], [4.0, 0.0]], [[0.0, 3.0], [5.0, 1.0]]])
    np.testing.assert_allclose(small_inverse(matrices), np.linalg.inv(np.asarray(matrices)),
                               rtol=1e-15)
    permutation = np.eye(4)[[2, 0, 3, 1]]  # every pivot is a row exchange
    np.testing.assert_array_equal(small_inverse(jnp.asarray(permutation)), permutation.T)


def test_any_batch_shape(x64):
    matrices = well_conditioned(3, 12, np.float64).reshape(3, 4, 3, 3)
    np.testing.assert_allclose(small_inverse(jnp.asarray(matrices)), np.linalg.inv(matrices),
                               rtol=0, atol=1e-14)
    np.testing.assert_allclose(small_inverse(jnp.asarray(matrices[0, 0])),
                               np.linalg.inv(matrices[0, 0]), rtol=0, atol=1e-14)
    assert small_inverse(jnp.zeros((0, 3, 3))).shape == (0, 3, 3)


def test_singular_matrix_is_not_finite_and_leaves_the_others(x64):
    # As from jnp.linalg.inv: a zero pivot makes non-finite entries (callers regularize
    # the blocks they expect to be singular), confined to the singular matrix.
    regular = well_conditioned(3, 2, np.float64)
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
    got = np.asarray(small_inverse(jnp.asarray(np.stack([regular[0], singular, np.zeros((3, 3)),
                                                         regular[1]]))))
    assert not np.all(np.isfinite(got[1])) and not np.any(np.isfinite(got[2]))
    assert not np.all(np.isfinite(np.asarray(jnp.linalg.inv(jnp.asarray(singular)))))
    np.testing.assert_allclose(got[[0, 3]], np.linalg.inv(regular), rtol=0, atol=1e-14)


def test_derivative_is_the_inverse_derivative(x64):
    # d(A⁻¹) = −A⁻¹ dA A⁻¹, through the pivoting (the argmax has no derivative).
    matrices = well_conditioned(4, 5, np.float64, seed=7)
    tangent = np.random.default_rng(8).standard_normal(matrices.shape)
    _, got = jax.jvp(small_inverse, (jnp.asarray(matrices),), (jnp.asarray(tangent),))
    inverse = np.linalg.inv(matrices)
    np.testing.assert_allclose(got, -inverse @ tangent @ inverse, rtol=0, atol=1e-13)


def test_calls_no_lapack():
    jaxpr = jax.make_jaxpr(small_inverse)(jnp.ones((10, 3, 3)))
    primitives = {eqn.primitive.name for eqn in jaxpr.jaxpr.eqns}
    assert not primitives & {"lu", "custom_call", "triangular_solve", "custom_linear_solve"}
    assert "div" in primitives  # the elimination itself


def test_rejects_non_square():
    with pytest.raises(ValueError, match=r"must be square, got shape \(4, 2, 3\)"):
        small_inverse(jnp.ones((4, 2, 3)))
