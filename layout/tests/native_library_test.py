"""Checks how the native libraries of jaxsolve.layout are linked, on machines without a GPU too.

Only the CUDA 13 library's kernels run on the GPU host; here CI checks that it is built,
links against nothing but the C/C++ runtime (the CUDA runtime is linked statically, so no
libcudart.so.13 is needed beside JAX's), and exports only our functions: the FFI handlers (and, on the CPU, the scratch size).
"""

import pathlib
import re
import subprocess

import jaxsolve.layout
import pytest

_PACKAGE = pathlib.Path(jaxsolve.layout.__file__).parent
_HANDLERS = {"JaxsolveLayoutLocalColumnToRowMajor", "JaxsolveLayoutLocalRowToColumnMajor"}
_EXPORTS = {
    "libjaxsolve_layout.so": _HANDLERS | {"JaxsolveLayoutLocalScratchElements"},
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


@pytest.mark.parametrize("name", ["libjaxsolve_layout.so", "libjaxsolve_layout_cuda13.so"])
def test_library_links_only_the_system_runtime(name):
    library = _PACKAGE / name
    assert library.is_file(), f"{name} is not beside {jaxsolve.layout.__file__}"
    assert _needed(library) <= _SYSTEM, _needed(library) - _SYSTEM


@pytest.mark.parametrize("name", sorted(_EXPORTS))
def test_library_exports_only_our_functions(name):
    assert _exported_functions(_PACKAGE / name) == _EXPORTS[name]


def test_cuda_library_holds_sm80_and_sm90_machine_code():
    # Each cubin in the fat binary records the ptxas options it was built with.
    data = (_PACKAGE / "libjaxsolve_layout_cuda13.so").read_bytes()
    assert set(re.findall(rb"-arch (sm_\d+)", data)) == {b"sm_80", b"sm_90"}
