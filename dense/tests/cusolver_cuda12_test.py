"""The CUDA 12 build of the cuSOLVER handlers binds to CUDA 12's cuSOLVER and cuBLAS.

No CUDA 12 GPU host is at hand, so this checks what a machine without a GPU can: the
library (``libjaxsolve_dense_cusolver_cuda12.so``, which links no cuSOLVER) has undefined
cuSOLVER and cuBLAS symbols, and they all resolve once `_cusolver` has preloaded the
libraries of the CUDA 12 wheels the build compiled against (Bazel fetches them as
``@cusolver_cu12`` and friends; here they stand in for a venv's ``nvidia`` folder), after
which it loads with every symbol bound (``RTLD_NOW``) and exports every handler.
"""

import ctypes
import os
import pathlib
import subprocess
import sys

import pytest

from jaxsolve.dense import _cusolver

LIBRARY = _cusolver.LIBRARY.folder / "libjaxsolve_dense_cusolver_cuda12.so"
RUNFILES = os.environ.get("RUNFILES_DIR") or os.environ.get("TEST_SRCDIR")


def _wheel_library(relative: str) -> pathlib.Path:
    """``nvidia/<relative>`` of the CUDA 12 wheel that Bazel fetched, in the runfiles."""
    if RUNFILES is None:
        pytest.skip("run through Bazel, whose runfiles hold CUDA 12's wheels")
    found = sorted(pathlib.Path(RUNFILES).glob(f"*/wheel/nvidia/{relative}"))
    assert found, f"no nvidia/{relative} in {RUNFILES}"
    return found[0]


@pytest.fixture
def cuda12_nvidia_folder(tmp_path, monkeypatch):
    """A folder on ``sys.path`` whose ``nvidia/`` holds the CUDA 12 wheels' libraries."""
    for relative, _, _ in _cusolver.CUDA_MATH_LIBRARIES[12]:
        link = tmp_path / "nvidia" / relative
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(_wheel_library(relative))
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_symbols_are_unbound_without_the_wheels():
    """Loaded alone (in a fresh process), the library lacks cuSOLVER's symbols: it takes
    them from the preloaded wheels, not from a copy of its own."""
    probe = ("import ctypes, os, sys; ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW)")
    done = subprocess.run([sys.executable, "-c", probe, str(LIBRARY)], capture_output=True,
                          text=True)
    assert done.returncode != 0
    assert "undefined symbol: cusolverDn" in done.stderr or "undefined symbol: cublas" in done.stderr, done.stderr


def test_library_binds_to_the_cuda12_wheels_and_exports_every_handler(cuda12_nvidia_folder):
    try:
        assert _cusolver._missing_wheels(12) == ()
    finally:
        _cusolver._missing_wheels.cache_clear()
    library = ctypes.CDLL(str(LIBRARY), mode=os.RTLD_NOW)
    for symbol in [*_cusolver.LIBRARY.targets.values(), "JaxsolveDenseCusolverClear",
                   "JaxsolveDenseCusolverWorkspaceBytes"]:
        assert hasattr(library, symbol), symbol
    library.JaxsolveDenseCusolverWorkspaceBytes.restype = ctypes.c_int64
    assert library.JaxsolveDenseCusolverWorkspaceBytes() == 0
