"""The cuSOLVERMp backend on one GPU (a 1 × 1 process grid), against NumPy.

Run by ``tools/dev gpu-test`` on a GPU host (marked ``gpu``; skipped without a GPU). Every
routine the backend implements, for the four dtypes, with sizes that divide ``T_A`` and sizes
that need padding, and JAXMg's README example. The backend is selected explicitly
(`jaxsolve.dense.use_backend`), as it is not the default on a single GPU.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import hermitian, hermitian_positive_definite, is_wide, random_matrix, well_conditioned
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import jaxsolve.sharding as js
from jaxsolve import dense
from jaxsolve.dense import _arguments, _backend, _cusolvermp

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]

# (n, T_A): whole tiles, and a size that pads the last tile.
SIZES = [(48, 8), (37, 8)]
SIZE_IDS = ["n48-T8", "n37-T8-padded"]


@pytest.fixture
def mesh():
    return js.make_grid_mesh(1, 1, devices=[GPU])


@pytest.fixture(autouse=True)
def cusolvermp():
    with dense.use_backend("cusolvermp"):
        yield


def put(x, mesh, spec=P("pr", "pc")):
    return jax.device_put(jnp.asarray(x), NamedSharding(mesh, spec))


def tolerance(dtype):
    return 1e-10 if is_wide(dtype) else 2e-3


def relative_residual(a, x, b):
    a, x, b = (np.asarray(v, np.complex128) for v in (a, x, b))
    return np.linalg.norm(a @ x - b) / (np.linalg.norm(a) * np.linalg.norm(x))


def test_the_backend_is_picked_and_its_libraries_load(mesh):
    layout = _arguments.Layout(mesh=mesh, matrix_spec=P("pr", "pc"))
    for family in _backend.FAMILIES:
        assert _backend.backend_name(family, layout, np.float32) == "cusolvermp"
    assert js.nccl_version() >= 22902  # cuBLASMp 0.10 needs ncclCommQueryProperties


def test_jaxmg_readme_example(mesh, x64):
    n = 12
    a = put(np.diag(np.arange(1.0, n + 1)), mesh)
    b = put(np.ones(n), mesh, P("pr"))
    x, logdet, status = dense.potrs(a, b, T_A=3, return_logdet=True, return_status=True)
    dense.raise_on_failure(status)
    np.testing.assert_allclose(x, 1 / np.arange(1.0, n + 1), rtol=1e-14)
    np.testing.assert_allclose(logdet, np.sum(np.log(np.arange(1.0, n + 1))), rtol=1e-14)
    assert x.sharding.is_equivalent_to(b.sharding, 1)


@pytest.mark.parametrize(("n", "tile"), SIZES, ids=SIZE_IDS)
def test_potrs_and_logdet(mesh, dtype, n, tile):
    rng = np.random.default_rng(0)
    a = hermitian_positive_definite(rng, n, dtype)
    b = random_matrix(rng, (n, 3), dtype)
    x, logdet = dense.potrs(put(a, mesh), put(b, mesh, P("pr")), T_A=tile, return_logdet=True)
    assert x.dtype == dtype and x.shape == (n, 3)
    assert relative_residual(a, x, b) < tolerance(dtype)
    _, expected = np.linalg.slogdet(a.astype(np.complex128))
    np.testing.assert_allclose(logdet, expected, rtol=tolerance(dtype))


def test_potrs_reports_a_matrix_that_is_not_positive_definite(mesh, x64):
    a = np.diag([1.0, 2.0, -3.0, 4.0, 5.0, 6.0])
    x, status = dense.potrs(put(a, mesh), put(np.ones(6), mesh, P("pr")), T_A=2,
                            return_status=True)
    assert status.info == 3
    assert np.all(np.isnan(np.asarray(x)))


def test_cho_factor_solves_many_times_and_differentiates(mesh, x64):
    rng = np.random.default_rng(1)
    n = 24
    a = put(hermitian_positive_definite(rng, n, np.float64), mesh)
    factor = dense.cho_factor(a, T_A=8)
    for k in (1, 5):
        b = random_matrix(rng, (n, k), np.float64)
        x = dense.cho_solve(factor, put(b, mesh, P("pr")))
        assert relative_residual(a, x, b) < 1e-12
    gradient = jax.grad(lambda m: dense.logdet(dense.cho_factor(m, T_A=8, mesh=mesh)))(a)
    np.testing.assert_allclose(gradient, np.linalg.inv(np.asarray(a)), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("n", "tile"), SIZES, ids=SIZE_IDS)
def test_lu_solve(mesh, dtype, n, tile):
    rng = np.random.default_rng(2)
    a = well_conditioned(rng, n, dtype)
    b = random_matrix(rng, (n, 2), dtype)
    x = dense.lu_solve(put(a, mesh), put(b, mesh, P("pr")), T_A=tile)
    assert x.dtype == dtype
    assert relative_residual(a, x, b) < tolerance(dtype)


def test_slogdet_sign_and_pivots(mesh, x64):
    rng = np.random.default_rng(3)
    a = random_matrix(rng, (20, 20), np.float64)  # pivoting swaps rows
    sign, logabs = dense.slogdet(put(a, mesh), T_A=4)
    expected_sign, expected = np.linalg.slogdet(a)
    assert float(sign) == expected_sign
    np.testing.assert_allclose(logabs, expected, rtol=1e-12)


def test_lu_solve_reverse_mode_uses_the_transposed_solve(mesh, x64):
    rng = np.random.default_rng(4)
    n = 16
    a = well_conditioned(rng, n, np.float64)
    b = random_matrix(rng, (n,), np.float64)
    gradient = jax.grad(lambda v: jnp.sum(dense.lu_solve(put(a, mesh), v, T_A=4)))(
        put(b, mesh, P("pr")))
    np.testing.assert_allclose(gradient, np.linalg.solve(a.T, np.ones(n)), rtol=1e-10)


def test_lu_solve_reports_a_singular_matrix(mesh, x64):
    a = np.ones((6, 6))
    x, status = dense.lu_solve(put(a, mesh), put(np.ones(6), mesh, P("pr")), T_A=2,
                               return_status=True)
    assert status.info > 0
    assert np.all(np.isnan(np.asarray(x)))


@pytest.mark.parametrize(("n", "tile"), SIZES, ids=SIZE_IDS)
def test_syevd(mesh, dtype, n, tile):
    rng = np.random.default_rng(5)
    a = hermitian(rng, n, dtype)
    w, v = dense.syevd(put(a, mesh), T_A=tile)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a.astype(np.complex128)),
                               atol=tolerance(dtype) * np.linalg.norm(a))
    v = np.asarray(v, np.complex128)
    assert np.linalg.norm(a @ v - v * np.asarray(w)) < tolerance(dtype) * np.linalg.norm(a) * n
    assert np.linalg.norm(v.conj().T @ v - np.eye(n)) < tolerance(dtype) * n


def test_sygvd(mesh, dtype):
    rng = np.random.default_rng(6)
    n = 24
    a = hermitian(rng, n, dtype)
    b = hermitian_positive_definite(rng, n, dtype)
    w, v = dense.sygvd(put(a, mesh), put(b, mesh), T_A=8)
    v = np.asarray(v, np.complex128)
    scale = np.linalg.norm(a) + np.linalg.norm(b)
    assert np.linalg.norm(a @ v - (b @ v) * np.asarray(w)) < tolerance(dtype) * scale * n
    assert np.linalg.norm(v.conj().T @ b @ v - np.eye(n)) < tolerance(dtype) * scale * n


def test_handles_and_grids_are_reused_then_cleared(mesh, x64):
    a = put(np.diag(np.arange(1.0, 9.0)), mesh)
    b = put(np.ones(8), mesh, P("pr"))
    dense.potrs(a, b, T_A=4).block_until_ready()
    grids = _cusolvermp.cached_grids()
    assert grids == 1
    dense.potrs(a, b, T_A=4).block_until_ready()
    dense.lu_solve(a, b, T_A=4).block_until_ready()
    assert _cusolvermp.cached_grids() == grids  # one grid per (device, communicator, shape)
    dense.clear_cache()
    assert _cusolvermp.cached_grids() == 0
    np.testing.assert_allclose(dense.potrs(a, b, T_A=4), 1 / np.arange(1.0, 9.0))


@pytest.mark.parametrize(("n", "tile"), [(24, 8), (21, 8)], ids=["n24-T8", "n21-T8-padded"])
def test_least_squares(mesh, dtype, n, tile):
    rng = np.random.default_rng(7)
    a = random_matrix(rng, (2 * n, n), dtype)
    b = random_matrix(rng, (2 * n, 3), dtype)
    x = dense.least_squares(put(a, mesh), put(b, mesh, P("pr")), T_A=tile)
    expected = np.linalg.lstsq(a.astype(np.complex128), b.astype(np.complex128), rcond=None)[0]
    np.testing.assert_allclose(x, expected, atol=tolerance(dtype) * 10)


@pytest.mark.parametrize(("n", "tile"), [(24, 8), (21, 8)], ids=["n24-T8", "n21-T8-padded"])
def test_qr(mesh, dtype, n, tile):
    rng = np.random.default_rng(8)
    a = random_matrix(rng, (2 * n, n), dtype)
    q, r = dense.qr(put(a, mesh), T_A=tile)
    q, r = np.asarray(q, np.complex128), np.asarray(r, np.complex128)
    assert q.shape == (2 * n, n) and r.shape == (n, n)
    assert np.linalg.norm(q @ r - a) < tolerance(dtype) * np.linalg.norm(a) * n
    assert np.linalg.norm(q.conj().T @ q - np.eye(n)) < tolerance(dtype) * n
    assert np.all(np.tril(r, -1) == 0)


@pytest.mark.parametrize("shape", [(48, 24), (24, 40), (37, 37)], ids=["tall", "wide", "square"])
def test_gesvd(mesh, dtype, shape):
    rng = np.random.default_rng(9)
    a = random_matrix(rng, shape, dtype)
    u, s, vh = dense.gesvd(put(a, mesh), T_A=8)
    k = min(shape)
    assert u.shape == (shape[0], k) and s.shape == (k,) and vh.shape == (k, shape[1])
    np.testing.assert_allclose(s, np.linalg.svd(a.astype(np.complex128), compute_uv=False),
                               atol=tolerance(dtype) * np.linalg.norm(a))
    u, vh = np.asarray(u, np.complex128), np.asarray(vh, np.complex128)
    assert np.linalg.norm((u * np.asarray(s)) @ vh - a) < tolerance(dtype) * np.linalg.norm(a) * k


def test_polar(mesh, dtype):
    rng = np.random.default_rng(10)
    a = well_conditioned(rng, 24, dtype)
    u, h = dense.polar(put(a, mesh), T_A=8)
    u, h = np.asarray(u, np.complex128), np.asarray(h, np.complex128)
    assert np.linalg.norm(u @ h - a) < tolerance(dtype) * np.linalg.norm(a) * 24
    assert np.linalg.norm(u.conj().T @ u - np.eye(24)) < tolerance(dtype) * 24
    assert np.linalg.norm(h - h.conj().T) < tolerance(dtype) * np.linalg.norm(a) * 24


def test_jit_and_vmap(mesh, x64):
    rng = np.random.default_rng(11)
    n = 16
    stack = np.stack([hermitian_positive_definite(rng, n, np.float64) for _ in range(2)])
    b = random_matrix(rng, (3, n), np.float64)
    solve = jax.jit(lambda m, v: dense.potrs(m, v, T_A=4, mesh=mesh))
    np.testing.assert_allclose(solve(put(stack[0], mesh), put(b[0], mesh, P("pr"))),
                               np.linalg.solve(stack[0], b[0]), rtol=1e-10)
    # Over right-hand sides: columns of one solve. Over matrices: one solve after another.
    x = jax.vmap(lambda v: dense.potrs(put(stack[0], mesh), v, T_A=4))(jnp.asarray(b))
    np.testing.assert_allclose(x, np.linalg.solve(stack[0], b.T).T, rtol=1e-10)
    x = jax.vmap(lambda m: dense.potrs(m, jnp.asarray(b[0]), T_A=4, mesh=mesh))(
        jnp.asarray(stack))
    np.testing.assert_allclose(x, [np.linalg.solve(m, b[0]) for m in stack], rtol=1e-10)
    w = jax.vmap(lambda m: dense.syevd(m, T_A=4, mesh=mesh)[0])(jnp.asarray(stack))
    np.testing.assert_allclose(w, [np.linalg.eigvalsh(m) for m in stack], rtol=1e-10)


def _hermitian_part(m):
    return (m + jnp.conj(m).T) / 2


def test_check_grads(mesh, x64):
    rng = np.random.default_rng(12)
    n = 8
    a = put(hermitian_positive_definite(rng, n, np.float64), mesh)
    g = put(well_conditioned(rng, n, np.float64), mesh)
    h = put(hermitian(rng, n, np.float64), mesh)
    b = jnp.asarray(random_matrix(rng, (n, 2), np.float64))

    def potrs(m, v):
        return dense.potrs(_hermitian_part(m), v, T_A=4, mesh=mesh, return_logdet=True)

    def syevd(m):  # gauge invariant: eigenvalues and V diag(w²) Vᴴ
        w, v = dense.syevd(_hermitian_part(m), T_A=4, mesh=mesh)
        return w, (v * w[None, :] ** 2) @ v.T

    def sygvd(m, s):
        w, v = dense.sygvd(_hermitian_part(m), _hermitian_part(s), T_A=4, mesh=mesh)
        return w, (v * w[None, :]) @ v.T

    check_grads(potrs, (a, b), order=1, modes=("fwd", "rev"))
    check_grads(lambda m, v: dense.lu_solve(m, v, T_A=4, mesh=mesh), (g, b), order=1,
                modes=("fwd", "rev"))
    check_grads(syevd, (h,), order=1, modes=("fwd", "rev"))
    check_grads(sygvd, (h, a), order=1, modes=("fwd", "rev"))
