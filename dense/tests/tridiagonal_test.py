"""`dense.eigh_tridiagonal` on the CPU: accuracy on hard matrices, statuses, bad input, jit, vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.test_util import check_grads

from tridiagonal_cases import CASES, case, check_accuracy
from jaxsolve import dense


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_eigenpairs_meet_lapack_accuracy(name, dtype, x64):
    d, e = case(name, dtype)
    check_accuracy(d, e, *dense.eigh_tridiagonal(d, e, return_status=True))


def test_eigvals_only_and_scipy(x64):
    d, e = CASES["random"]
    w = dense.eigh_tridiagonal(d, e, eigvals_only=True)
    np.testing.assert_allclose(w, scipy.linalg.eigh_tridiagonal(d, e, eigvals_only=True),
                               rtol=0, atol=1e-13)
    np.testing.assert_array_equal(w, dense.eigh_tridiagonal(d, e)[0])


def _sign_invariant(w, z):
    return jnp.sum(w ** 3) + jnp.sum((z ** 2) @ jnp.arange(z.shape[0], dtype=z.dtype))


def test_derivatives_are_jax_eigh_rule(x64):
    rng = np.random.default_rng(4)
    d, e = jnp.asarray(rng.standard_normal(7)), jnp.asarray(rng.standard_normal(6))
    ours = jax.grad(lambda d, e: _sign_invariant(*dense.eigh_tridiagonal(d, e)), (0, 1))(d, e)
    dense_t = lambda d, e: jnp.diag(d) + jnp.diag(e, 1) + jnp.diag(e, -1)
    jax_eigh = jax.grad(lambda d, e: _sign_invariant(*jnp.linalg.eigh(dense_t(d, e))), (0, 1))
    for got, expected in zip(ours, jax_eigh(d, e)):
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    check_grads(lambda d, e: _sign_invariant(*dense.eigh_tridiagonal(d, e)), (d, e), order=2,
                modes=("fwd", "rev"))
    check_grads(lambda d, e: jnp.sum(dense.eigh_tridiagonal(d, e, eigvals_only=True) ** 2),
                (d, e), order=1, modes=("fwd", "rev"))


def test_jit_and_vmap():
    rng = np.random.default_rng(3)
    d = rng.standard_normal((3, 50)).astype(np.float32)
    e = rng.standard_normal((3, 49)).astype(np.float32)
    w, z = jax.jit(jax.vmap(dense.eigh_tridiagonal))(d, e)
    assert w.shape == (3, 50) and z.shape == (3, 50, 50)
    for k in range(3):
        single_w, single_z = dense.eigh_tridiagonal(d[k], e[k])
        np.testing.assert_array_equal(w[k], single_w)
        np.testing.assert_array_equal(z[k], single_z)


def test_nonfinite_input_reports_not_finite():
    w, z, status = dense.eigh_tridiagonal(jnp.array([1.0, jnp.nan, 2.0]), jnp.ones(2),
                                          return_status=True)
    assert int(status.info) == dense.Status.NOT_FINITE
    assert not np.all(np.isfinite(np.asarray(w)))


def test_empty():
    w, z = dense.eigh_tridiagonal(jnp.zeros(0), jnp.zeros(0))
    assert w.shape == (0,) and z.shape == (0, 0)


@pytest.mark.parametrize("d, e, error, match", [
    (jnp.ones((2, 2)), jnp.ones(1), ValueError, "d must be a vector"),
    (jnp.ones(3), jnp.ones(3), ValueError, "e must have n - 1 = 2 entries"),
    (jnp.ones(3, jnp.int32), jnp.ones(2, jnp.int32), TypeError, "d has dtype"),
    (jnp.ones(3, jnp.complex64), jnp.ones(2, jnp.complex64), TypeError, "d has dtype"),
    (jnp.ones(3, jnp.float16), jnp.ones(2, jnp.float16), TypeError, "d has dtype"),
])
def test_bad_input(d, e, error, match):
    with pytest.raises(error, match=f"^eigh_tridiagonal: {match}"):
        dense.eigh_tridiagonal(d, e)


def test_dtypes_must_match(x64):
    with pytest.raises(TypeError, match="same dtype"):
        dense.eigh_tridiagonal(jnp.ones(3, jnp.float64), jnp.ones(2, jnp.float32))


def test_flags_are_checked():
    with pytest.raises(ValueError, match="eigvals_only must be True or False"):
        dense.eigh_tridiagonal(jnp.ones(3), jnp.ones(2), eigvals_only="yes")
