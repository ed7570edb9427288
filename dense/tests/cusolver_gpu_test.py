"""The cuSOLVER backend on a CUDA GPU: every routine against NumPy/SciPy, in place, statuses.

Every routine for all four dtypes, under ``jax.jit`` and ``jax.vmap``; ``check_grads`` on potrs,
logdet, lu_solve and syevd; donation really in place (peak memory of a fresh process, from
``device.memory_stats()``); failure statuses (not positive definite, singular, NaN or Inf
inputs of every routine); JAXMg's README example; the handle and workspace cache; the lean syevd (backend ``"cusolver_lean"``: several
blocks of reflectors, a clustered spectrum, a workspace of one matrix). Every test is marked ``gpu`` and skipped where JAX has
no GPU (run them with ``tools/dev gpu-test``).
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

from helpers import hermitian, hermitian_positive_definite, is_wide, random_matrix, \
    well_conditioned
from jaxsolve import dense
from jaxsolve.dense import _arguments, _backend, _cusolver

GPU = next((d for d in jax.devices() if d.platform == "gpu"), None)
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(GPU is None, reason="needs a GPU")]

N = 96  # several of cuSOLVER's panels, still quick


def gpu(x):
    return jax.device_put(jnp.asarray(x), GPU)


def rtol(dtype):
    return 1e-10 if is_wide(dtype) else 2e-3


def relative(residual, scale):
    return float(np.max(np.abs(np.asarray(residual)))) / max(float(np.max(np.abs(scale))), 1e-300)


def hermitian_part(m):
    return (m + jnp.conj(m).T) / 2


def test_gpu_matrices_take_cusolver():
    layout = _arguments.matrix_layout("potrs", gpu(jnp.eye(2)), None, None)
    assert layout.platform == "gpu"
    for family in _backend.FAMILIES:
        assert _backend.backend_name(family, layout, np.float32) == "cusolver"
    dense.potrs(gpu(2 * jnp.eye(4)), gpu(jnp.ones(4)))
    assert _cusolver.LIBRARY.cuda_unavailable_reason is None


def test_a_mesh_of_one_gpu_takes_cusolver():
    mesh = jax.sharding.Mesh(np.array([GPU]), ("x",))
    a = jax.device_put(4 * jnp.eye(8), NamedSharding(mesh, P("x", None)))
    b = jax.device_put(jnp.ones(8), NamedSharding(mesh, P("x")))
    layout = _arguments.matrix_layout("potrs", a, None, None)
    assert layout.grid == (1, 1) and _backend.backend_name("cholesky", layout, a.dtype) == "cusolver"
    x = dense.potrs(a, b)
    np.testing.assert_allclose(x, np.full(8, 0.25))
    assert x.sharding.is_equivalent_to(b.sharding, 1)


# ------------------------------------------------------------------- each routine


class TestAgainstScipy:
    def test_potrs_logdet_status(self, dtype):
        rng = np.random.default_rng(0)
        a = hermitian_positive_definite(rng, N, dtype)
        b = random_matrix(rng, (N, 3), dtype)
        x, logdet, status = dense.potrs(gpu(a), gpu(b), return_logdet=True, return_status=True)
        assert x.dtype == dtype and list(x.devices()) == [GPU]
        assert relative(a @ np.asarray(x) - b, b) < rtol(dtype) * N
        expected = np.linalg.slogdet(a.astype(np.complex128))[1]
        np.testing.assert_allclose(float(logdet), expected, rtol=rtol(dtype))
        assert int(status.info) == 0
        x1 = dense.potrs(gpu(a), gpu(b[:, 0]))  # a vector
        assert x1.shape == (N,) and relative(a @ np.asarray(x1) - b[:, 0], b) < rtol(dtype) * N

    def test_potrs_reads_the_lower_triangle(self, dtype):
        rng = np.random.default_rng(1)
        a = hermitian_positive_definite(rng, N, dtype)
        garbage = np.tril(a) + np.triu(random_matrix(rng, (N, N), dtype), 1)
        x = dense.potrs(gpu(garbage), gpu(np.ones(N, dtype)))
        assert relative(a @ np.asarray(x) - 1, np.ones(1)) < rtol(dtype) * N

    def test_cho_factor_solve_logdet_inverse(self, dtype):
        rng = np.random.default_rng(2)
        a = hermitian_positive_definite(rng, N, dtype)
        factor = dense.cho_factor(gpu(a))
        l = np.asarray(factor.factorization.factor.triangle).T
        np.testing.assert_allclose(l, np.linalg.cholesky(a), rtol=rtol(dtype) * 10,
                                   atol=rtol(dtype) * 10 * np.abs(l).max())
        b = random_matrix(rng, (N, 2), dtype)
        x = dense.cho_solve(factor, gpu(b))
        assert relative(a @ np.asarray(x) - b, b) < rtol(dtype) * N
        np.testing.assert_allclose(float(dense.logdet(factor)),
                                   np.linalg.slogdet(a.astype(np.complex128))[1], rtol=rtol(dtype))
        inverse = dense.cho_inverse(gpu(a))
        assert relative(a @ np.asarray(inverse) - np.eye(N), np.ones(1)) < rtol(dtype) * N

    def test_lu_solve_factor_slogdet_solve(self, dtype):
        rng = np.random.default_rng(3)
        a = well_conditioned(rng, N, dtype)
        b = random_matrix(rng, (N, 3), dtype)
        x, status = dense.lu_solve(gpu(a), gpu(b), return_status=True)
        assert relative(a @ np.asarray(x) - b, b) < rtol(dtype) * N and int(status.info) == 0
        factor = dense.lu_factor(gpu(a))
        x = dense.lu_solve(factor, gpu(b[:, 0]))
        assert relative(a @ np.asarray(x) - b[:, 0], b) < rtol(dtype) * N
        sign, logabsdet = dense.slogdet(gpu(a))
        expected_sign, expected = np.linalg.slogdet(a.astype(np.complex128))
        np.testing.assert_allclose(complex(sign), expected_sign, rtol=rtol(dtype) * N)
        np.testing.assert_allclose(float(logabsdet), expected, rtol=rtol(dtype))
        x = dense.solve(gpu(a), gpu(b))
        assert relative(a @ np.asarray(x) - b, b) < rtol(dtype) * N

    def test_lu_solve_transposed_through_grad(self, dtype):
        # The reverse-mode derivative solves with Aᵀ: getrs('N') of the factor of Aᵀ.
        rng = np.random.default_rng(4)
        a = well_conditioned(rng, N, dtype)
        b = random_matrix(rng, (N,), dtype)
        cotangent = jax.grad(lambda b: jnp.real(jnp.sum(dense.lu_solve(gpu(a), b))))(gpu(b))
        expected = np.linalg.solve(a.T, np.ones(N, dtype))  # JAX's cotangent: A⁻ᵀ x̄
        assert relative(np.asarray(cotangent) - expected, expected) < rtol(dtype) * N

    @pytest.mark.parametrize("backend", ["cusolver", "cusolver_lean"])
    def test_syevd(self, dtype, backend):
        rng = np.random.default_rng(5)
        a = hermitian(rng, N, dtype)
        with dense.use_backend(backend):
            w, v, status = dense.syevd(gpu(a), return_status=True)
            only = dense.syevd(gpu(a), return_eigenvectors=False)
        v = np.asarray(v)
        np.testing.assert_allclose(w, scipy.linalg.eigvalsh(a), atol=rtol(dtype) * N)
        assert relative(a @ v - v * np.asarray(w)[None], a) < rtol(dtype) * N
        assert relative(v.conj().T @ v - np.eye(N), np.ones(1)) < rtol(dtype) * N
        assert int(status.info) == 0
        np.testing.assert_allclose(only, w, rtol=0, atol=rtol(dtype) * N)

    @pytest.mark.parametrize("spectrum", ["random", "clustered"])
    def test_lean_syevd_several_reflector_blocks(self, dtype, spectrum):
        """n = 600: the lean syevd's back-transformation applies three blocks of 256
        reflectors, the last one partial; a clustered spectrum (eigenvalues of multiplicity 20)
        takes the tridiagonal solver's cluster path."""
        n = 600
        rng = np.random.default_rng(7)
        a = hermitian(rng, n, dtype)
        if spectrum == "clustered":
            q, _ = np.linalg.qr(a)
            a = ((q * np.repeat(np.arange(30.0), 20)[None]) @ q.conj().T).astype(dtype)
        with dense.use_backend("cusolver_lean"):
            w, v, status = dense.syevd(gpu(a), return_status=True)
        v = np.asarray(v)
        np.testing.assert_allclose(w, scipy.linalg.eigvalsh(a), atol=rtol(dtype) * n)
        assert relative(a @ v - v * np.asarray(w)[None], a) < rtol(dtype) * n
        assert relative(v.conj().T @ v - np.eye(n), np.ones(1)) < rtol(dtype) * n
        assert int(status.info) == 0

    def test_sygvd(self, dtype):
        rng = np.random.default_rng(6)
        a = hermitian(rng, N, dtype)
        b = hermitian_positive_definite(rng, N, dtype)
        w, v = dense.sygvd(gpu(a), gpu(b))
        v = np.asarray(v)
        np.testing.assert_allclose(w, scipy.linalg.eigh(a, b, eigvals_only=True),
                                   rtol=rtol(dtype) * N, atol=rtol(dtype) * N)
        assert relative(a @ v - b @ v * np.asarray(w)[None], a) < rtol(dtype) * N
        assert relative(v.conj().T @ b @ v - np.eye(N), np.ones(1)) < rtol(dtype) * N

    @pytest.mark.parametrize("shape", [(N, 40), (40, N), (N, N)], ids=["tall", "wide", "square"])
    def test_qr_gesvd(self, dtype, shape):
        rng = np.random.default_rng(7)
        a = random_matrix(rng, shape, dtype)
        k = min(shape)
        q, r = dense.qr(gpu(a))
        q, r = np.asarray(q), np.asarray(r)
        assert q.shape == (shape[0], k) and r.shape == (k, shape[1])
        assert relative(q @ r - a, a) < rtol(dtype) * N
        assert relative(q.conj().T @ q - np.eye(k), np.ones(1)) < rtol(dtype) * N
        np.testing.assert_array_equal(np.tril(r, -1), 0)
        u, s, vh = dense.gesvd(gpu(a))
        u, s, vh = map(np.asarray, (u, s, vh))
        assert u.shape == (shape[0], k) and vh.shape == (k, shape[1])
        np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=rtol(dtype) * N,
                                   atol=rtol(dtype) * N)
        assert relative((u * s) @ vh - a, a) < rtol(dtype) * N
        assert relative(u.conj().T @ u - np.eye(k), np.ones(1)) < rtol(dtype) * N
        assert relative(vh @ vh.conj().T - np.eye(k), np.ones(1)) < rtol(dtype) * N

    @pytest.mark.parametrize("shape", [(N, 40), (40, N)], ids=["tall", "wide"])
    def test_least_squares(self, dtype, shape):
        rng = np.random.default_rng(8)
        a = random_matrix(rng, shape, dtype)
        b = random_matrix(rng, (shape[0], 2), dtype)
        x = dense.least_squares(gpu(a), gpu(b))
        expected = np.linalg.lstsq(a, b, rcond=None)[0]
        assert relative(np.asarray(x) - expected, expected) < rtol(dtype) * N

    def test_polar(self, dtype):
        rng = np.random.default_rng(9)
        a = random_matrix(rng, (N, 40), dtype)
        u, h = dense.polar(gpu(a))
        expected_u, expected_h = scipy.linalg.polar(a)
        assert relative(np.asarray(u) - expected_u, expected_u) < rtol(dtype) * N
        assert relative(np.asarray(h) - expected_h, expected_h) < rtol(dtype) * N


# ------------------------------------------------------------ jit, vmap, derivatives


class TestTransformations:
    def test_jit(self, x64):
        rng = np.random.default_rng(10)
        a = hermitian_positive_definite(rng, N, np.float64)
        b = random_matrix(rng, (N,), np.float64)
        x = jax.jit(lambda a, b: dense.potrs(a, b))(gpu(a), gpu(b))
        np.testing.assert_allclose(x, np.linalg.solve(a, b), rtol=1e-10)
        w, _ = jax.jit(dense.syevd)(gpu(a))
        np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-10)

    def test_vmap_right_hand_sides_and_stacks(self, x64):
        rng = np.random.default_rng(11)
        a = hermitian_positive_definite(rng, N, np.float64)
        bs = random_matrix(rng, (5, N), np.float64)
        x = jax.vmap(lambda b: dense.potrs(gpu(a), b))(gpu(bs))
        np.testing.assert_allclose(x, np.linalg.solve(a, bs.T).T, rtol=1e-10)
        stack = np.stack([a, 2 * a, a + np.eye(N)])
        x = jax.jit(jax.vmap(lambda m, b: dense.lu_solve(m, b)))(gpu(stack), gpu(bs[:3]))
        np.testing.assert_allclose(x, np.linalg.solve(stack, bs[:3, :, None])[..., 0], rtol=1e-9)
        w, _ = jax.vmap(dense.syevd)(gpu(stack))
        np.testing.assert_allclose(w, np.linalg.eigvalsh(stack), rtol=1e-10)

    def test_check_grads_potrs_logdet(self, x64):
        rng = np.random.default_rng(12)
        a = gpu(hermitian_positive_definite(rng, 6, np.float64))
        b = gpu(random_matrix(rng, (6, 2), np.float64))
        check_grads(lambda m, b: dense.potrs(hermitian_part(m), b, return_logdet=True), (a, b),
                    order=1, modes=("fwd", "rev"))
        check_grads(lambda m: dense.logdet(dense.cho_factor(hermitian_part(m))), (a,), order=2,
                    modes=("fwd", "rev"))

    def test_check_grads_potrs_complex(self, x64):
        rng = np.random.default_rng(13)
        a = gpu(hermitian_positive_definite(rng, 5, np.complex128))
        b = gpu(random_matrix(rng, (5,), np.complex128))
        check_grads(lambda m, b: dense.potrs(hermitian_part(m), b), (a, b), order=1,
                    modes=("fwd", "rev"))

    @pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["float64", "complex128"])
    def test_check_grads_lu_solve(self, dtype):
        jax.config.update("jax_enable_x64", True)
        rng = np.random.default_rng(14)
        a = gpu(well_conditioned(rng, 5, dtype))
        b = gpu(random_matrix(rng, (5, 2), dtype))
        check_grads(jax.jit(dense.lu_solve), (a, b), order=1, modes=("fwd", "rev"))

    def test_check_grads_syevd(self, x64):
        rng = np.random.default_rng(15)
        a = gpu(hermitian(rng, 5, np.float64))

        def f(m):  # eigenvalues and a sign-invariant function of the eigenvectors
            w, v = dense.syevd(hermitian_part(m))
            return w, jnp.abs(v[0]) ** 2

        check_grads(f, (a,), order=1, modes=("fwd", "rev"))
        ours = jax.grad(lambda m: jnp.sum(dense.syevd(hermitian_part(m))[0] ** 3))(a)
        reference = jax.grad(lambda m: jnp.sum(jnp.linalg.eigvalsh(hermitian_part(m)) ** 3))(a)
        np.testing.assert_allclose(ours, reference, atol=1e-10)


# ----------------------------------------------------------------------- failures


class TestFailures:
    def test_not_positive_definite(self, dtype):
        a = np.eye(N, dtype=dtype)
        a[7, 7] = -1
        x, logdet, status = dense.potrs(gpu(a), gpu(np.ones(N, dtype)), return_logdet=True,
                                        return_status=True)
        assert int(status.info) == 8
        assert np.all(np.isnan(np.asarray(x))) and np.isnan(float(logdet))
        with pytest.raises(dense.SolverError, match=r"^potrs failed: info=8: the leading minor "
                           r"of order 8 is not positive definite$"):
            dense.raise_on_failure(status)
        factor = dense.cho_factor(gpu(a))
        assert int(factor.status.info) == 8
        assert np.all(np.isnan(np.asarray(factor.factorization.factor.triangle)))

    @pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
    def test_not_finite_matrix(self, dtype, bad):
        """NaN or Inf in A's lower triangle: NOT_FINITE (checked in the pass that mirrors the
        triangle, at no extra memory traffic), not a leading minor's order; the upper triangle,
        which potrs does not read, may hold anything."""
        a = 2 * np.eye(N, dtype=dtype)
        a[9, 3] = bad
        x, status = dense.potrs(gpu(a), gpu(np.ones(N, dtype)), return_status=True)
        assert int(status.info) == dense.Status.NOT_FINITE
        assert np.all(np.isnan(np.asarray(x)))
        a = 2 * np.eye(N, dtype=dtype)
        a[3, 9] = bad
        x, status = dense.potrs(gpu(a), gpu(np.ones(N, dtype)), return_status=True)
        assert int(status.info) == 0
        np.testing.assert_allclose(np.asarray(x), 0.5)

    @pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
    def test_not_finite_input_of_each_decomposition(self, dtype, bad):
        """NaN or Inf where a decomposition reads is NOT_FINITE on cuSOLVER too, whatever
        cuSOLVER's info says of it: the input is checked in one pass before the handler writes
        over it (`test_donation_is_in_place[syevd]` shows that the check costs no copy of A).
        Tall, wide and square matrices: the SVD of a wide or square one, the eigensolvers and
        sygvd's B are computed in place, the others on a transposed copy."""
        a = 2 * np.eye(N, dtype=dtype)
        lower, upper = a.copy(), a.copy()
        lower[9, 3] = upper[3, 9] = bad
        b = np.ones(N, dtype)
        bad_b = b.copy()
        bad_b[5] = bad
        calls = [
            ("syevd", lambda: dense.syevd(gpu(lower), return_status=True)),
            ("sygvd", lambda: dense.sygvd(gpu(lower), gpu(a), return_status=True)),
            ("sygvd", lambda: dense.sygvd(gpu(a), gpu(lower), return_status=True)),
            ("least_squares", lambda: dense.least_squares(gpu(upper), gpu(b),
                                                          return_status=True)),
            ("least_squares", lambda: dense.least_squares(gpu(a), gpu(bad_b),
                                                          return_status=True)),
            ("polar", lambda: dense.polar(gpu(upper), return_status=True)),
        ]
        for shape in [(N, N), (N, 40), (40, N)]:
            part = upper[:shape[0], :shape[1]]
            calls.append(("qr", lambda part=part: dense.qr(gpu(part), return_status=True)))
            calls.append(("gesvd", lambda part=part: dense.gesvd(gpu(part),
                                                                 return_status=True)))
        for routine, call in calls:
            *outputs, status = call()
            assert int(status.info) == dense.Status.NOT_FINITE, (routine, status)
            assert all(np.all(np.isnan(np.asarray(x))) for x in outputs), routine
        with dense.use_backend("cusolver_lean"):
            w, v, status = dense.syevd(gpu(lower), return_status=True)
        assert int(status.info) == dense.Status.NOT_FINITE
        assert np.all(np.isnan(np.asarray(w))) and np.all(np.isnan(np.asarray(v)))
        # The upper triangle, which the eigensolvers do not read, may hold anything.
        for backend in ["cusolver", "cusolver_lean"]:
            with dense.use_backend(backend):
                w, status = dense.syevd(gpu(upper), return_eigenvectors=False,
                                        return_status=True)
            assert int(status.info) == 0, backend
            np.testing.assert_allclose(np.asarray(w), 2.0, rtol=rtol(dtype))

    def test_singular(self, dtype):
        a = np.eye(N, dtype=dtype)
        a[:, 5] = 0
        x, status = dense.lu_solve(gpu(a), gpu(np.ones(N, dtype)), return_status=True)
        assert int(status.info) == 6 and np.all(np.isnan(np.asarray(x)))
        with pytest.raises(dense.SolverError, match=r"^lu_solve failed: info=6: U\(6,6\) is "
                           r"exactly zero"):
            dense.raise_on_failure(status)
        sign, logabsdet = dense.slogdet(gpu(a))
        assert float(jnp.abs(sign)) == 0 and float(logabsdet) == -np.inf

    def test_sygvd_b_not_positive_definite(self, x64):
        a = np.eye(8)
        b = np.eye(8)
        b[2, 2] = -1
        w, v, status = dense.sygvd(gpu(a), gpu(b), return_status=True)
        assert int(status.info) == 8 + 3
        assert np.all(np.isnan(np.asarray(w))) and np.all(np.isnan(np.asarray(v)))

    def test_bad_arguments_fail_before_gpu_work(self):
        with pytest.raises(ValueError, match=r"^potrs: a must be a non-empty square"):
            dense.potrs(gpu(jnp.ones((3, 4))), gpu(jnp.ones(3)))
        with pytest.raises(ValueError, match=r"^lu_solve: b must have shape"):
            dense.lu_solve(gpu(jnp.eye(3)), gpu(jnp.ones(4)))
        with pytest.raises(ValueError, match=r"^syevd: a has dtype int32"):
            dense.syevd(gpu(jnp.eye(3, dtype=jnp.int32)))


def test_jaxmg_readme_example(x64):
    """JAXMg's README: A = diag(1..N), b = 1, T_A = 3, f64 -> x = 1/(1..N), log det = Σ log i."""
    n = 1000
    a = gpu(jnp.diag(jnp.arange(1.0, n + 1)))
    b = gpu(jnp.ones(n))
    x, logdet = dense.potrs(a, b, T_A=3, return_logdet=True)
    assert x.dtype == np.float64
    np.testing.assert_allclose(x, 1 / np.arange(1.0, n + 1), rtol=1e-14)
    np.testing.assert_allclose(logdet, np.sum(np.log(np.arange(1.0, n + 1))), rtol=1e-14)


# ---------------------------------------------------------------- in place, cache


_PEAK = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp
    from jaxsolve import dense
    routine, n, donate = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    device = jax.devices("gpu")[0]
    a = jax.jit(lambda: 4 * jnp.eye(n) + 0.5 / n)()  # SPD; one buffer, no temporaries
    b = jax.jit(lambda: jnp.ones(n))()
    a.block_until_ready()
    before = device.memory_stats()
    if routine == "potrs":
        out = dense.potrs(a, b, donate=donate)
    elif routine == "lu_solve":
        out = dense.lu_solve(a, b, donate=donate)
    else:
        out = dense.syevd(a, donate=donate)[1]
    jax.block_until_ready(out)
    after = device.memory_stats()
    print(json.dumps({"in_use": before["bytes_in_use"], "peak": after["peak_bytes_in_use"],
                      "matrix": n * n * 4, "deleted": a.is_deleted()}))
""")


def _peak(routine, n, donate):
    """Peak device memory of one call in a fresh process (peaks cannot be reset in JAX)."""
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    done = subprocess.run([sys.executable, "-c", _PEAK, routine, str(n), str(int(donate))],
                          capture_output=True, text=True, env=env, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("routine", ["potrs", "lu_solve", "syevd"])
def test_donation_is_in_place(routine):
    n = 4096  # A is 64 MiB of float32
    donated = _peak(routine, n, donate=True)
    kept = _peak(routine, n, donate=False)
    assert donated["deleted"] and not kept["deleted"]
    # Donated: beyond what was in use (A and b), only vectors (x, w, pivots, info).
    assert donated["peak"] - donated["in_use"] < 0.05 * donated["matrix"], donated
    # Kept: XLA copies A first, for the factor to take the copy's place.
    assert kept["peak"] - kept["in_use"] > 0.95 * kept["matrix"], kept


@pytest.mark.parametrize("routine", ["potrs", "cho_inverse", "lu_solve", "syevd", "sygvd",
                                     "least_squares", "qr", "gesvd", "polar"])
def test_donated_results_are_the_same(routine):
    """With donate=True the handlers work in the inputs' own buffers; results do not change."""
    rng = np.random.default_rng(16)
    a = hermitian_positive_definite(rng, N, np.float32)
    b = random_matrix(rng, (N, 2), np.float32)
    call = {
        "potrs": lambda a, b, donate: dense.potrs(a, b, donate=donate),
        "cho_inverse": lambda a, b, donate: dense.cho_inverse(a, donate=donate),
        "lu_solve": lambda a, b, donate: dense.lu_solve(a, b, donate=donate),
        "syevd": lambda a, b, donate: dense.syevd(a, donate=donate)[0],
        "sygvd": lambda a, b, donate: dense.sygvd(a, a + N * jnp.eye(N), donate=donate)[0],
        "least_squares": lambda a, b, donate: dense.least_squares(a, b, donate=donate),
        "qr": lambda a, b, donate: dense.qr(a, donate=donate)[1],
        "gesvd": lambda a, b, donate: dense.gesvd(a, donate=donate)[1],
        "polar": lambda a, b, donate: dense.polar(a, donate=donate)[1],
    }[routine]
    kept = np.asarray(call(gpu(a), gpu(b), False))
    donated_a = gpu(a)
    donated = np.asarray(call(donated_a, gpu(b), True))
    assert donated_a.is_deleted()
    np.testing.assert_allclose(donated, kept, rtol=1e-5, atol=1e-5 * np.abs(kept).max())


@pytest.mark.parametrize("element_type", [np.float64, np.complex64])
def test_lean_syevd_workspace_is_one_matrix(element_type, x64):
    """The lean syevd's whole workspace is one n × n matrix and O(n) (cusolverDnXsyevd asks
    for about 4 n × n). Bound: n² elements, 3 reflector blocks of 256 × n, and 1 KiB per row
    for the tridiagonal solver's scratch, T's diagonals and τ."""
    n = 4096
    rng = np.random.default_rng(8)
    a = hermitian(rng, n, element_type)
    dense.clear_cache()
    with dense.use_backend("cusolver_lean"):
        w, v, status = dense.syevd(gpu(a), donate=True, return_status=True)
    assert int(status.info) == 0
    itemsize = np.dtype(element_type).itemsize
    assert _cusolver.workspace_bytes() <= (n * n + 3 * 256 * n) * itemsize + 1024 * n
    residual = jnp.matmul(gpu(a), v, precision="highest") - v * w[None].astype(v.dtype)
    assert relative(residual, a) < rtol(element_type) * n
    dense.clear_cache()


def test_handles_and_workspaces_are_cached_and_cleared(x64):
    dense.clear_cache()
    a = gpu(jnp.eye(512) * 2)
    dense.syevd(a)[0].block_until_ready()
    held = _cusolver.workspace_bytes()
    assert held > 0
    dense.syevd(a)[0].block_until_ready()
    assert _cusolver.workspace_bytes() == held  # the same shapes: the same workspace
    dense.clear_cache()
    assert _cusolver.workspace_bytes() == 0
    w = dense.syevd(a)[0]
    np.testing.assert_allclose(w, np.full(512, 2.0))
    assert _cusolver.workspace_bytes() == held
