"""Checks how the native libraries of jaxsolve.layout are linked and loaded, without a GPU too.

The CUDA libraries, one per CUDA major (12: nvcc 12.4, 13: nvcc 13), run their kernels on a GPU
host only (the CUDA 13 one on ours: there is no CUDA 12 GPU host); here CI checks that each is
built, links against nothing but the C/C++ runtime (the CUDA runtime is linked statically, so
no libcudart.so.<major> is needed beside JAX's), holds machine code for sm_80 and sm_90, and
exports only our functions: the FFI handlers (and, on the CPU, the scratch size).
`jaxsolve.runtime.NativeLibrary`, which loads them (and the sibling packages' libraries),
registers their targets for the CPU at once, fails clearly on a missing handler, refuses GPU
ops only without a CUDA library, and loads the CUDA library of the plugin's major.
"""

import os
import pathlib
import re
import shutil
import subprocess

import jax
import numpy as np
import pytest

import jaxsolve.layout
from jaxsolve.runtime import NativeLibrary

_PACKAGE = pathlib.Path(jaxsolve.layout.__file__).parent
_HANDLERS = {"JaxsolveLayoutLocalColumnToRowMajor", "JaxsolveLayoutLocalRowToColumnMajor"}
_EXPORTS = {
    "libjaxsolve_layout.so": _HANDLERS | {"JaxsolveLayoutLocalScratchElements"},
    "libjaxsolve_layout_cuda12.so": _HANDLERS,
    "libjaxsolve_layout_cuda13.so": _HANDLERS,
}
_SYSTEM = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2",
           "libdl.so.2", "libpthread.so.0", "librt.so.1"}


def _needed(library: pathlib.Path) -> set[str]:
    dump = subprocess.run(["readelf", "-d", str(library)], check=True, capture_output=True, text=True)
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", dump.stdout))


def _exported_functions(library: pathlib.Path) -> set[str]:
    dump = subprocess.run(["nm", "-D", "--defined-only", str(library)], check=True,
                          capture_output=True, text=True)
    return {line.split()[-1] for line in dump.stdout.splitlines() if line.split()[-2] == "T"}


@pytest.mark.parametrize("name", sorted(_EXPORTS))
def test_library_links_only_the_system_runtime(name):
    library = _PACKAGE / name
    assert library.is_file(), f"{name} is not beside {jaxsolve.layout.__file__}"
    assert _needed(library) <= _SYSTEM, _needed(library) - _SYSTEM


@pytest.mark.parametrize("name", sorted(_EXPORTS))
def test_library_exports_only_our_functions(name):
    assert _exported_functions(_PACKAGE / name) == _EXPORTS[name]


# The newest architecture each major's nvcc knows, whose PTX the library carries for later GPUs.
_PTX = {12: "sm_90", 13: "sm_100"}


@pytest.mark.parametrize("major", sorted(_PTX))
def test_cuda_library_holds_sm80_and_sm90_machine_code_and_ptx(major):
    # cuobjdump of CUDA 12 (Bazel passes it in JAXSOLVE_CUOBJDUMP) reads CUDA 13's fat binaries too.
    cuobjdump = shutil.which(os.environ.get("JAXSOLVE_CUOBJDUMP", "cuobjdump"))
    if cuobjdump is None:  # plain pytest on a machine without a CUDA toolkit on PATH
        pytest.skip("no cuobjdump: not on PATH, and JAXSOLVE_CUOBJDUMP (set by Bazel) unset")
    listing = subprocess.run(
        [cuobjdump, "--list-elf", "--list-ptx", str(_PACKAGE / f"libjaxsolve_layout_cuda{major}.so")],
        check=True, capture_output=True, text=True).stdout
    assert set(re.findall(r"ELF file .*\.(sm_\d+)\.cubin", listing)) == {"sm_80", "sm_90"}
    assert set(re.findall(r"PTX file .*\.(sm_\d+)\.ptx", listing)) == {_PTX[major]}


class TestNativeLibrary:
    """`jaxsolve.runtime.NativeLibrary` on jaxsolve.layout's libraries."""

    def test_native_library_registers_targets_for_the_cpu(self):
        # A second name for the row -> column-major handler: a square matrix with the identity
        # tile permutation is transposed in place, with no schedule and no scratch.
        target = "jaxsolve_layout_test_alias_row_to_column_major"
        NativeLibrary("jaxsolve.layout", _PACKAGE, "jaxsolve_layout",
                      {target: "JaxsolveLayoutLocalRowToColumnMajor"})
        x = np.arange(16.0, dtype=np.float32).reshape(4, 4)
        no_chains = np.zeros(0, np.int32)
        y, _ = jax.ffi.ffi_call(
            target,
            (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct((0,), x.dtype)),
            vmap_method="sequential",
        )(x, no_chains, np.zeros(1, np.int32), no_chains, rows=np.int64(4), cols=np.int64(4),
          tile=np.int64(2), batch_offsets=np.zeros(1, np.int64),
          batch_rounds=np.zeros(0, np.int64))
        np.testing.assert_array_equal(np.asarray(y), x.T)

    def test_native_library_missing_handler_is_an_import_error(self):
        with pytest.raises(ImportError, match=re.escape(
                "it lacks the handler NoSuchHandler of target jaxsolve_layout_test_missing")):
            NativeLibrary("jaxsolve.layout", _PACKAGE, "jaxsolve_layout",
                          {"jaxsolve_layout_test_missing": "NoSuchHandler"})

    def test_native_library_without_cuda_library_refuses_gpu_ops_only(self, tmp_path):
        # The CPU library under another stem, with no CUDA library beside it.
        (tmp_path / "libdemo.so").symlink_to(_PACKAGE / "libjaxsolve_layout.so")
        library = NativeLibrary("jaxsolve.demo", tmp_path, "demo", {})
        library.require_platform("my_op", jax.device_put(np.zeros(3), jax.devices("cpu")[0]))
        assert library.cuda_unavailable_reason is not None
        with pytest.raises(RuntimeError,
                           match=re.escape("my_op cannot run on the GPU (jaxsolve.demo): ")):
            library.require_cuda("my_op")

    @pytest.mark.parametrize("major", [12, 13])
    def test_loads_the_cuda_library_of_the_plugins_major(self, monkeypatch, major):
        # Loading needs no GPU (the static CUDA runtime finds the driver at its first call).
        monkeypatch.setattr(NativeLibrary, "cuda_major", property(lambda self: major))
        target = f"jaxsolve_layout_test_cuda{major}_row_to_column_major"
        library = NativeLibrary(
            "jaxsolve.layout", _PACKAGE, "jaxsolve_layout",
            {target: "JaxsolveLayoutLocalRowToColumnMajor"}, cpu=False)
        assert library.cuda_unavailable_reason is None
        assert library.cuda._name == str(_PACKAGE / f"libjaxsolve_layout_cuda{major}.so")

    @pytest.mark.parametrize("major, ships", [(12, True), (13, True), (14, False)])
    def test_ships_cuda_library_for_cuda_12_and_13(self, monkeypatch, major, ships):
        monkeypatch.setattr(NativeLibrary, "cuda_major", property(lambda self: major))
        assert jaxsolve.layout.ships_cuda_library() is ships
