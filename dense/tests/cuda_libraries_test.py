"""The CUDA 12 and CUDA 13 builds of the native libraries without CUDA kernels.

jaxsolve.dense's cuSOLVERMp handlers and jaxsolve.sharding's NCCL communicators are C++ on the
CUDA runtime API, built once per CUDA major (``..._cuda12.so``, ``..._cuda13.so``) against that
major's runtime headers (a ``static_assert`` in each source checks the headers' major against
the file name's) and its static runtime; the loaders pick the one of JAX's CUDA plugin's major.
cuSOLVERMp, NCCL and the communicators are not linked: they bind at load time. Without a GPU,
CI checks what the loaders rely on: both builds exist, need nothing but the C/C++ runtime (no
``libcudart.so.12`` or ``.13`` beside JAX's), export the same functions, and leave the same
cuSOLVERMp and NCCL symbols to bind.
"""

import pathlib
import re
import subprocess

import pytest

import jaxsolve.dense
import jaxsolve.sharding
from jaxsolve.dense import _cusolvermp

_SYSTEM = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2",
           "libdl.so.2", "libpthread.so.0", "librt.so.1"}
_LIBRARIES = {
    "cusolvermp": (pathlib.Path(jaxsolve.dense.__file__).parent,
                   "libjaxsolve_dense_cusolvermp_cuda{}.so"),
    "nccl": (pathlib.Path(jaxsolve.sharding.__file__).parent, "libjaxsolve_nccl_cuda{}.so"),
}
_MAJORS = (12, 13)


def _path(library: str, major: int) -> pathlib.Path:
    folder, name = _LIBRARIES[library]
    return folder / name.format(major)


def _needed(path: pathlib.Path) -> set[str]:
    dump = subprocess.run(["readelf", "-d", str(path)], check=True, capture_output=True,
                          text=True)
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", dump.stdout))


def _symbols(path: pathlib.Path, defined: bool) -> set[str]:
    flag = "--defined-only" if defined else "--undefined-only"
    dump = subprocess.run(["nm", "-D", flag, str(path)], check=True, capture_output=True,
                          text=True)
    return {line.split()[-1] for line in dump.stdout.splitlines()
            if not defined or line.split()[-2] == "T"}


@pytest.mark.parametrize("major", _MAJORS)
@pytest.mark.parametrize("library", sorted(_LIBRARIES))
def test_library_needs_only_the_system_runtime(library, major):
    path = _path(library, major)
    assert path.is_file(), f"{path.name} is not built"
    assert _needed(path) <= _SYSTEM, _needed(path) - _SYSTEM


@pytest.mark.parametrize("library", sorted(_LIBRARIES))
def test_both_majors_export_and_bind_the_same_functions(library):
    exported = [_symbols(_path(library, major), defined=True) for major in _MAJORS]
    bound = [{s for s in _symbols(_path(library, major), defined=False)
              if s.startswith(("cusolverMp", "nccl", "Jaxsolve"))} for major in _MAJORS]
    assert exported[0] == exported[1] and bound[0] == bound[1]
    assert all(name.startswith("Jaxsolve") for name in exported[0]), exported[0]


def test_cusolvermp_library_exports_every_handler():
    exported = _symbols(_path("cusolvermp", 12), defined=True)
    assert set(_cusolvermp._TARGETS.values()) <= exported
    # Bound at load time to what _cusolvermp and jaxsolve.sharding preload.
    assert {"cusolverMpPotrf", "cusolverMpSyevd", "JaxsolveNcclCommunicator"} <= _symbols(
        _path("cusolvermp", 12), defined=False)


@pytest.mark.parametrize("major", _MAJORS)
def test_cusolvermp_preloads_come_from_that_majors_wheels(major):
    preloads = _cusolvermp._PRELOADS[major]
    assert preloads[-1][1] == "libcusolverMp.so.0"
    assert all(wheel.endswith(f"-cu{major}") or major == 13 for _, _, wheel in preloads)
    assert f"libcudart.so.{major}" in {soname for _, soname, _ in preloads}
