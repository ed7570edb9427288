"""`NativeLibrary`'s choices that need no library of a package: a missing CPU library, the
CUDA library of the plugin's major, GPU ops refused and CPU ops left alone.

Loading real libraries and registering their targets is tested where some exist, in
jaxsolve.layout's tests (layout/tests/native_library_test.py).
"""

import re

import jax
import numpy as np
import pytest

from jaxsolve.runtime import NativeLibrary, _native_library


def test_missing_cpu_library_is_an_import_error(tmp_path):
    with pytest.raises(ImportError, match=re.escape(
            f"jaxsolve.demo: cannot load its native CPU library libdemo.so from {tmp_path}: ")):
        NativeLibrary("jaxsolve.demo", tmp_path, "demo", {})


def test_without_cpu_library_nothing_loads_until_a_gpu_op(tmp_path):
    # GPU-only handlers (jaxsolve.dense's cuSOLVER ones): nothing to load at construction.
    library = NativeLibrary("jaxsolve.demo", tmp_path, "demo", {}, cpu=False)
    assert library.cpu is None and library.cuda is None
    library.require_platform("my_op", jax.device_put(np.zeros(3), jax.devices("cpu")[0]))
    with pytest.raises(RuntimeError,
                       match=re.escape("my_op cannot run on the GPU (jaxsolve.demo): ")):
        library.require_cuda("my_op")
    assert library.cuda is None


@pytest.mark.parametrize("major, ships", [(13, True), (12, False)])
def test_ships_cuda_library_of_the_plugins_major(monkeypatch, tmp_path, major, ships):
    # A package built for CUDA 13 only, under a CUDA 13 or a CUDA 12 plugin.
    (tmp_path / "libdemo_cuda13.so").touch()
    monkeypatch.setattr(_native_library, "cuda_major", lambda: major)
    library = NativeLibrary("jaxsolve.demo", tmp_path, "demo", {}, cpu=False)
    assert library.cuda_major == major
    assert library.ships_cuda_library() is ships


def test_an_unknown_major_ships_and_the_gpu_op_says_why(tmp_path):
    # No JAX CUDA plugin and no CUDA backend here: cuda_major() cannot tell the major.
    (tmp_path / "libdemo_cuda13.so").touch()
    library = NativeLibrary("jaxsolve.demo", tmp_path, "demo", {}, cpu=False)
    assert library.cuda_major is None
    assert library.ships_cuda_library()  # the first GPU op then says why it cannot run
    with pytest.raises(RuntimeError, match=re.escape(
            "my_op cannot run on the GPU (jaxsolve.demo): the CUDA version of JAX's CUDA "
            "backend could not be determined: no jax-cuda<major>-plugin is installed")):
        library.require_cuda("my_op")


def test_the_cuda_library_of_the_plugins_major_is_loaded(monkeypatch, tmp_path):
    # Only libdemo_cuda12.so exists; under a CUDA 12 plugin it is the one tried (a broken
    # library: loading fails and says which), under CUDA 13 the missing 13 one is.
    (tmp_path / "libdemo_cuda12.so").write_bytes(b"not an ELF file")
    for major in (12, 13):
        monkeypatch.setattr(_native_library, "cuda_major", lambda major=major: major)
        library = NativeLibrary("jaxsolve.demo", tmp_path, "demo", {}, cpu=False)
        assert library.cuda_unavailable_reason.startswith(
            f"the CUDA {major} library libdemo_cuda{major}.so failed to load: ")


def _traced_call(library):
    """A fresh jitted op that asks `library` for its targets while traced (a new function each
    time, so that JAX's tracing cache does not skip the call)."""
    def op(x):
        library.require_platform("my_op", x)
        return x

    return jax.jit(op)


def test_a_traced_op_needs_the_cuda_library_wherever_the_process_has_a_gpu(monkeypatch,
                                                                            tmp_path):
    # Inside jit the platform is the lowering's, decided after the call, not JAX's default
    # backend: the CUDA targets must be registered wherever a GPU could be lowered for, e.g.
    # where JAX_PLATFORMS=cpu,cuda makes the CPU the default (before, a GPU program then
    # found no CUDA handler). Here a broken CUDA 13 library shows the attempt.
    (tmp_path / "libdemo_cuda13.so").write_bytes(b"not an ELF file")
    monkeypatch.setattr(_native_library, "cuda_major", lambda: 13)
    library = NativeLibrary("jaxsolve.demo", tmp_path, "demo", {}, cpu=False)
    x = np.zeros(3)
    _traced_call(library)(x)  # no GPU in this process: nothing is loaded
    assert "cuda_unavailable_reason" not in vars(library) and library.cuda is None
    monkeypatch.setattr(_native_library, "_has_gpu", lambda: True)  # one beside the CPU
    assert jax.default_backend() == "cpu"
    with pytest.raises(RuntimeError, match=re.escape(
            "my_op cannot run on the GPU (jaxsolve.demo): the CUDA 13 library "
            "libdemo_cuda13.so failed to load: ")):
        _traced_call(library)(x)
    # A concrete array still decides by its devices: a CPU op needs no CUDA library.
    library.require_platform("my_op", jax.device_put(x, jax.devices("cpu")[0]))
