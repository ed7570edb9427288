"""The status's ``rcond`` and ``info = n + 1`` on a CUDA GPU, and log-determinants rounded once.

The cuSOLVER backend (one GPU, the default there) and cuSOLVERMp on a 1 × 1 grid read the
estimate off the factor's diagonal inside the program, as the XLA reference does on the CPU
(``rcond_test.py``). Marked ``gpu``; skipped where JAX has no GPU (``tools/dev gpu-test``).
"""

import decimal

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxsolve.sharding as js
from helpers import hermitian_positive_definite, well_conditioned
from jaxsolve import dense
from jaxsolve.dense import _arguments, _backend

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]

N = 8


def gpu(x):
    return jax.device_put(jnp.asarray(x), GPU)


def singular_by_a_duplicated_column():
    """Issue 30's matrix: getrf finds no exactly zero pivot, so info was 0."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, N))
    a = x @ x.T + N * np.eye(N)
    a[:, 7] = a[:, 3]
    return a


def nearly_singular_spd():
    return np.diag(np.geomspace(1.0, np.finfo(np.float64).eps / 10, N))


@pytest.fixture(params=["cusolver", "cusolvermp"])
def backend(request):
    """The one-GPU backends: cuSOLVER (the default) and cuSOLVERMp on a 1 × 1 grid."""
    if request.param == "cusolver":
        yield gpu
        return
    mesh = js.make_grid_mesh(1, 1, devices=[GPU])

    def place(x):
        x = jnp.asarray(x)
        return jax.device_put(x, NamedSharding(mesh, P("pr", "pc") if x.ndim == 2 else P("pr")))

    with dense.use_backend("cusolvermp"):
        yield place


def test_gpu_matrices_take_the_native_backends(backend):
    name = "cusolvermp" if backend is not gpu else "cusolver"
    a = backend(np.eye(4))
    layout = _arguments.matrix_layout("lu_solve", a, None, None)
    assert _backend.backend_name("lu", layout, np.float32) == name


def assert_reported_singular(info, rcond, x):
    """The issue's matrix is reported singular, in one of LAPACK's two ways: cuSOLVER's getrf
    on one GPU meets an exactly zero pivot (``info = 8``, x NaN: the H200 run of 6 Dec), where
    rounding in another order (cuSOLVERMp, LAPACK) leaves a tiny one (``info = n + 1``,
    ``rcond`` below eps, x computed, as xGESVX)."""
    if info == N + 1:
        assert 0 < rcond < np.finfo(np.float64).eps
        assert np.all(np.isfinite(x))
    else:
        assert 1 <= info <= N and rcond == 0
        assert np.all(np.isnan(x))


def test_lu_solve_reports_the_issues_matrix(backend, x64):
    a, b = singular_by_a_duplicated_column(), np.ones(N)
    x, status = dense.lu_solve(backend(a), backend(b), T_A=4, return_status=True)
    assert_reported_singular(int(status), float(status.rcond), np.asarray(x))
    with pytest.raises(dense.SolverError, match=r"^lu_solve failed: info=\d: "):
        dense.raise_on_failure(status)
    factor = dense.lu_factor(backend(a), T_A=4)
    assert int(factor.status) == int(status)
    assert int(dense.lu_solve(factor, backend(b), return_status=True)[1]) == int(status)


def test_cholesky_routines_report_n_plus_one(backend, x64):
    a, b = nearly_singular_spd(), np.ones(N)
    x, status = dense.potrs(backend(a), backend(b), T_A=4, return_status=True)
    assert int(status) == N + 1
    np.testing.assert_allclose(float(status.rcond), np.finfo(np.float64).eps / 10, rtol=1e-3)
    np.testing.assert_allclose(np.asarray(x), 1 / np.diag(a), rtol=1e-5)
    assert int(dense.cho_factor(backend(a), T_A=4).status) == N + 1


def test_estimates_bound_one_over_cond(backend, x64):
    rng = np.random.default_rng(1)
    spd, general = hermitian_positive_definite(rng, N, np.float64), well_conditioned(
        rng, N, np.float64)
    _, cholesky = dense.potrs(backend(spd), backend(np.ones(N)), T_A=4, return_status=True)
    _, lu = dense.lu_solve(backend(general), backend(np.ones(N)), T_A=4, return_status=True)
    assert int(cholesky) == 0 and int(lu) == 0
    true = 1 / np.linalg.cond(spd)
    assert true * (1 - 1e-10) <= float(cholesky.rcond) <= 4 * true
    # cuSOLVER factors Aᵀ (A's buffer read column-major): the bound is the same, as κ₂(Aᵀ) =
    # κ₂(A), with the growth factor of whichever LU ran; both are checked.
    true = 1 / np.linalg.cond(general)
    growth = max(np.max(np.abs(np.triu(scipy.linalg.lu_factor(m)[0]))) / np.max(np.abs(m))
                 for m in (general, general.T))
    assert true <= np.sqrt(N) * growth * float(lu.rcond) * (1 + 1e-10)
    assert float(lu.rcond) <= 2 * true


def test_vmap_and_jit(x64):
    stack = gpu(np.stack([singular_by_a_duplicated_column(),
                          well_conditioned(np.random.default_rng(2), N, np.float64)]))
    x, status = jax.jit(jax.vmap(lambda a: dense.lu_solve(a, jnp.ones(N), return_status=True)))(
        stack)
    info, rcond, x = np.asarray(status), np.asarray(status.rcond), np.asarray(x)
    assert info[1] == 0 and status.rcond.shape == (2,) and np.all(np.isfinite(x[1]))
    assert_reported_singular(int(info[0]), float(rcond[0]), x[0])


def test_grad_is_unaffected(x64):
    a = hermitian_positive_definite(np.random.default_rng(3), N, np.float64)
    b = np.ones(N)
    gradient, status = jax.grad(
        lambda a: (lambda x, s: (jnp.sum(x), s))(*dense.potrs(a, gpu(b), return_status=True)),
        has_aux=True)(gpu(a))
    cpu = jax.devices("cpu")[0]  # the XLA reference
    expected = jax.grad(lambda a: jnp.sum(dense.potrs(a, jax.device_put(b, cpu))))(
        jax.device_put(a, cpu))
    np.testing.assert_allclose(np.asarray(gradient), np.asarray(expected), rtol=1e-10)
    assert int(status) == 0


def test_log_determinants_are_rounded_once(backend, x64):
    """The native backends form ``log det`` as the XLA reference does (`_xla.log_abs_product`),
    so that JAXMg's README prints the same value on the GPU: ``log 12!`` to the last digit."""
    readme = dense.potrs(backend(np.diag(np.arange(1.0, 13.0))), backend(np.ones(12)), T_A=3,
                         return_logdet=True)[1]
    assert float(readme) == 19.987214495661885 == float(decimal.Decimal(479001600).ln())
    rng = np.random.default_rng(0)
    d = np.where(np.arange(64) % 2 == 0, 1e150, 1e-150) * (1 + rng.uniform(0, 0.5, 64))
    decimal.getcontext().prec = 60
    exact = float(sum(decimal.Decimal(float(v)).ln() for v in d))
    value = float(dense.logdet(dense.cho_factor(backend(np.diag(d)), T_A=8)))
    assert abs(value - exact) <= 2 * np.spacing(exact)
    _, logabsdet = dense.slogdet(backend(np.diag(d)), T_A=8)
    assert abs(float(logabsdet) - exact) <= 2 * np.spacing(exact)
