"""What of the cuSOLVER backend runs without a GPU: which calls it takes, and how it loads.

The backend itself (its handlers against NumPy and SciPy, in place, statuses, derivatives) is
tested on a GPU by cusolver_gpu_test.py.
"""

import ctypes
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from helpers import grid_mesh, hermitian_positive_definite, put, well_conditioned
from jaxsolve import dense
from jaxsolve.dense import (
    _arguments,
    _backend,
    _cholesky,
    _compile,
    _cusolver,
    _eigen,
    _least_squares,
    _lu,
    _polar,
    _qr,
    _svd,
)
from jaxsolve.runtime import NativeLibrary


class TestSelection:
    @pytest.mark.parametrize("family", _backend.FAMILIES)
    def test_one_gpu_takes_cusolver(self, family):
        on_gpu = _arguments.Layout(device_platform="gpu")
        assert _backend.backend_name(family, on_gpu, np.complex64) == "cusolver"

    @pytest.mark.parametrize("major, backend", [(12, "cusolver"), (13, "cusolver"), (14, "xla")])
    @pytest.mark.parametrize("family", _backend.FAMILIES)
    def test_one_gpu_takes_cusolver_where_it_is_built_for_the_plugin(self, monkeypatch, family,
                                                                     major, backend):
        # Built for CUDA 12 and 13; under a plugin of another major, XLA computes.
        monkeypatch.setattr(NativeLibrary, "cuda_major", property(lambda self: major))
        on_gpu = _arguments.Layout(device_platform="gpu")
        assert _backend.backend_name(family, on_gpu, np.float64) == backend

    @pytest.mark.parametrize("family", _backend.FAMILIES)
    def test_cpu_and_grids_take_xla(self, family):
        on_cpu = _arguments.Layout(device_platform="cpu")
        assert _backend.backend_name(family, on_cpu, np.float64) == "xla"
        for rows, cols in [(1, 1), (2, 1), (2, 2)]:
            layout = _arguments.Layout(mesh=grid_mesh(rows, cols), matrix_spec=P("pr", "pc"))
            assert _backend.backend_name(family, layout, np.float32) == "xla"

    @pytest.mark.parametrize("family", _backend.FAMILIES)
    def test_lean_syevd_is_asked_for_by_name(self, family):
        """"cusolver_lean" computes syevd on one GPU when use_backend names it; every other
        family keeps cuSOLVER, and off a GPU it refuses syevd, saying why."""
        on_gpu = _arguments.Layout(device_platform="gpu")
        assert _backend.backend_name("syevd", on_gpu, np.float64) == "cusolver"
        with dense.use_backend("cusolver_lean"):
            expected = "cusolver_lean" if family == "syevd" else "cusolver"
            assert _backend.backend_name(family, on_gpu, np.float64) == expected
            on_cpu = _arguments.Layout(device_platform="cpu")
            if family == "syevd":
                with pytest.raises(ValueError, match="'cusolver_lean'.*cannot compute 'syevd'"):
                    _backend.backend_name(family, on_cpu, np.float64)
            else:
                assert _backend.backend_name(family, on_cpu, np.float64) == "xla"

    def test_layout_knows_where_the_matrix_is(self):
        a = jnp.eye(4)
        layout = _arguments.matrix_layout("potrs", a, None, None)
        assert layout.platform == "cpu" and layout.device_platform == "cpu"
        assert layout.grid == (1, 1)
        sharded = put(jnp.eye(4), grid_mesh(2, 1), P("pr", "pc"))
        layout = _arguments.matrix_layout("potrs", sharded, None, None)
        assert layout.platform == "cpu" and layout.grid == (2, 1)

    def test_traced_matrix_leaves_the_platform_to_the_lowering(self):
        platforms = []

        def f(a):
            layout = _arguments.matrix_layout("potrs", a, None, None)
            platforms.append((layout.device_platform, layout.platform,
                              _backend.backend_name("cholesky", layout, a.dtype),
                              dense.backend_for("potrs", a)))
            return a

        jax.jit(f)(jnp.eye(2))
        both = "platform_dependent(cuda='cusolver', default='xla')"
        assert platforms == [(None, None, both, both)]
        with dense.use_backend("cusolver_lean"):  # syevd's lean backend exists on CUDA only
            assert _backend.backend_name("syevd", _arguments.Layout(), np.float64) == (
                "cusolver_lean")

    def test_cpu_matrix_never_loads_the_cuda_library(self):
        dense.potrs(2 * jnp.eye(3), jnp.ones(3))
        assert _cusolver.LIBRARY.cpu is None and _cusolver.LIBRARY.cuda is None
        assert _cusolver.workspace_bytes() == 0
        dense.clear_cache()  # nothing to free: no error


class TestLoading:
    @pytest.mark.parametrize("major, wheels", [
        (13, r"nvidia-nvjitlink \(libnvJitLink\.so\.13\), nvidia-cublas \(libcublasLt\.so\.13\)"
             r".*nvidia-cusolver \(libcusolver\.so\.12\)"),
        (12, r"nvidia-nvjitlink-cu12 \(libnvJitLink\.so\.12\), nvidia-cublas-cu12 "
             r"\(libcublasLt\.so\.12\).*nvidia-cusolver-cu12 \(libcusolver\.so\.11\)"),
    ])
    def test_missing_wheel_is_named(self, monkeypatch, major, wheels):
        # The wheels named are those of the major the handlers' library is loaded for.
        monkeypatch.setattr(NativeLibrary, "cuda_major", property(lambda self: major))
        monkeypatch.setattr(_cusolver, "nvidia_library", lambda relative: None)
        _cusolver._missing_wheels.cache_clear()
        try:
            with pytest.raises(RuntimeError, match=f"NVIDIA's pip wheels {wheels} are not "
                               f"installed.*pip install 'jaxsolve-dense\\[cuda{major}\\]'"):
                _cusolver.require()
        finally:
            _cusolver._missing_wheels.cache_clear()

    def test_library_loads_and_exports_every_handler(self):
        """The CUDA library links against the wheel's cuSOLVER and loads without a GPU."""
        assert _cusolver._missing_wheels(13) == ()  # the build's wheels (tools/lock) are here
        library = ctypes.CDLL(str(_cusolver.LIBRARY.folder / "libjaxsolve_dense_cusolver_cuda13.so"))
        for symbol in [*_cusolver.LIBRARY.targets.values(), "JaxsolveDenseCusolverClear",
                       "JaxsolveDenseCusolverWorkspaceBytes"]:
            assert hasattr(library, symbol), symbol
        library.JaxsolveDenseCusolverWorkspaceBytes.restype = ctypes.c_int64
        assert library.JaxsolveDenseCusolverWorkspaceBytes() == 0
        library.JaxsolveDenseCusolverClear()


def _cusolver_calls(text):
    return set(re.findall(r"custom_call @jaxsolve_dense_cusolver_(\w+)", text))


class TestTracedCallsTakeTheLoweringsPlatform:
    """A routine traced without a mesh (inside the caller's ``jax.jit``, ``jax.grad``,
    ``jax.vmap``) runs where its program is lowered: cuSOLVER's handlers for CUDA, XLA's
    LAPACK on the CPU, in one process. Before, JAX's default backend chose: on the H200,
    ``jax.grad`` of ``potrs`` on arrays committed to the CPU took cuSOLVER and failed ("No FFI
    handler registered for jaxsolve_dense_cusolver_potrf on Host")."""

    N = 6

    @staticmethod
    def routines(dtype):
        rng = np.random.default_rng(0)
        n = TestTracedCallsTakeTheLoweringsPlatform.N
        spd = jnp.asarray(hermitian_positive_definite(rng, n, dtype))
        tall = jnp.asarray(well_conditioned(rng, n, dtype)[:, :4])
        b = jnp.ones(n, dtype)
        # (name, function of A, its handlers on CUDA); each returns arrays to sum for a loss.
        return spd, tall, [
            ("potrs", lambda a: dense.potrs(a, b), {"potrf", "potrs"}),
            ("cho_solve", lambda a: dense.cho_solve(dense.cho_factor(a), b), {"potrf", "potrs"}),
            ("logdet", lambda a: dense.logdet(dense.cho_factor(a)), {"potrf", "potrs"}),
            ("cho_inverse", dense.cho_inverse, {"potrf", "potrs"}),
            ("lu_solve", lambda a: dense.lu_solve(a, b), {"getrf", "getrs"}),
            ("slogdet", lambda a: dense.slogdet(a)[1], {"getrf", "getrs"}),
            ("syevd", lambda a: dense.syevd(a)[0], {"syevd"}),
            ("sygvd", lambda a: dense.sygvd(a, spd)[0], {"sygvd"}),
            ("qr", lambda a: dense.qr(a[:, :4])[1], {"qr"}),
            ("least_squares", lambda a: dense.least_squares(a[:, :4], b), {"qr"}),
            ("gesvd", lambda a: dense.gesvd(a[:, :4])[1], {"gesvd"}),
            ("polar", lambda a: dense.polar(a[:, :4])[0], {"gesvd", "syevd"}),
        ]

    def test_each_platform_gets_its_backend_in_one_process(self, x64):
        spd, tall, routines = self.routines(np.complex128)
        for name, routine, handlers in routines:
            a = tall if name in ("qr", "least_squares", "gesvd", "polar") else spd
            a = jnp.pad(a, ((0, 0), (0, self.N - a.shape[1])))  # (n, n); routines slice

            def loss(a):
                return jnp.sum(jnp.abs(routine(a)) ** 2)

            programs = {"jit": (jax.jit(routine), a), "grad": (jax.jit(jax.grad(loss)), a)}
            if name in ("potrs", "lu_solve", "syevd"):
                programs["vmap"] = (jax.jit(jax.vmap(routine)), jnp.stack([a, a]))
            for how, (program, operand) in programs.items():
                traced = program.trace(operand)
                on_cuda = traced.lower(lowering_platforms=("cuda",)).as_text()
                on_cpu = traced.lower(lowering_platforms=("cpu",)).as_text()
                calls = _cusolver_calls(on_cuda)
                assert calls and calls <= handlers and "lapack_" not in on_cuda, (name, how)
                assert not _cusolver_calls(on_cpu) and "lapack_" in on_cpu, (name, how)
        # The CPU program runs: the gradient of the H200's failing test, against NumPy's.
        a, b = hermitian_positive_definite(np.random.default_rng(1), self.N, np.float64), np.ones(
            self.N)
        gradient = jax.jit(jax.grad(lambda a: jnp.sum(dense.potrs(a, jnp.asarray(b)))))(a)
        x = np.linalg.solve(a, b)
        expected = -np.outer(np.linalg.solve(a, b), x)  # d(1ᵀx)/dA = -A⁻ᵀ1 xᵀ, made symmetric
        np.testing.assert_allclose(np.asarray(gradient), (expected + expected.T) / 2, rtol=1e-10)

    def test_lean_syevd_is_the_cuda_branch_only(self, x64):
        with dense.use_backend("cusolver_lean"):
            traced = jax.jit(dense.syevd).trace(jnp.eye(4))
        assert _cusolver_calls(traced.lower(lowering_platforms=("cuda",)).as_text()) == {
            "lean_syevd"}


class TestLoweringForCuda:
    """The programs a GPU would run, lowered for CUDA here: which handlers, and in place."""

    @pytest.fixture
    def on_gpu(self, monkeypatch):
        monkeypatch.setattr(_cusolver, "require", lambda: None)  # nothing to load: no GPU here
        return _arguments.Layout(device_platform="gpu")

    @staticmethod
    def lowered(body, statics, arrays, donate=False):
        program = _compile._program(body, statics, len(arrays), donate)
        return program.trace(*arrays).lower(lowering_platforms=("cuda",)).as_text()

    def test_potrs_factors_in_place_in_the_donated_matrix(self, on_gpu):
        text = self.lowered(_cholesky._potrs_body, (on_gpu, True),
                            (jnp.zeros((4, 4)), jnp.zeros(4)), donate=True)
        calls = re.findall(r"custom_call @(\w+)\((.*)", text)
        assert [target for target, _ in calls] == [_cusolver.POTRF, _cusolver.POTRS]
        # potrf writes L over its operand, potrs x over b, and A's buffer is the factor's.
        assert "output_tuple_indices = [0], operand_index = 0" in calls[0][1]
        assert "output_tuple_indices = [], operand_index = 1" in calls[1][1]
        # Outputs: x, logdet, info, rcond, then the factor (result 4), which takes A's buffer.
        assert re.search(r"%arg0: tensor<4x4xf32> \{tf.aliasing_output = 4 ", text)

    @pytest.mark.parametrize("dtype", [np.float32, np.complex64])
    def test_every_family_lowers_to_its_handlers(self, on_gpu, dtype):
        a, tall = jnp.zeros((6, 6), dtype), jnp.zeros((6, 4), dtype)
        expected = [
            (_lu._lu_solve_body, (on_gpu,), (a, jnp.zeros(6, dtype)), {"getrf", "getrs"}),
            (_lu._slogdet_body, (on_gpu,), (a,), {"getrf"}),
            (_eigen._eigen_body, ("syevd", on_gpu), (a,), {"syevd"}),
            (_eigen._eigen_body, ("sygvd", on_gpu), (a, a), {"sygvd"}),
            (_qr._qr_body, (on_gpu,), (tall,), {"qr"}),
            (_qr._qr_body, (on_gpu,), (tall.T,), {"qr"}),
            (_least_squares._least_squares_body, (on_gpu,), (tall, jnp.zeros(6, dtype)), {"qr"}),
            (_svd._gesvd_body, (on_gpu,), (tall,), {"gesvd"}),
            (_svd._gesvd_body, (on_gpu,), (tall.T,), {"gesvd"}),
            (_polar._polar_body, (on_gpu,), (tall,), {"gesvd", "syevd"}),
        ]
        for body, statics, arrays, routines in expected:
            text = self.lowered(body, statics, arrays)
            found = set(re.findall(r"custom_call @jaxsolve_dense_cusolver_(\w+)", text))
            assert found <= routines and found, (body.__name__, found)

    def test_lean_syevd_lowers_to_its_handler_in_place(self, on_gpu):
        with dense.use_backend("cusolver_lean"):
            text = self.lowered(_eigen._eigen_body, ("syevd", on_gpu), (jnp.zeros((6, 6)),),
                                donate=True)
        calls = re.findall(r"custom_call @(\w+)\((.*)", text)
        assert [target for target, _ in calls] == [_cusolver.LEAN_SYEVD]
        assert "output_tuple_indices = [0], operand_index = 0" in calls[0][1]
