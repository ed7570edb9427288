"""Loading of jaxsolve.layout's native libraries and registration of their FFI targets.

This is the only module that touches ``ctypes``. The libraries sit beside this file:

* ``libjaxsolve_layout.so``, the CPU library, is required. It is loaded at import, and its
  targets are registered for the ``"cpu"`` platform.
* ``libjaxsolve_layout_cuda<major>.so`` is loaded the first time an op runs on a CUDA
  device, with ``<major>`` the CUDA major version of JAX's CUDA plugin (``12`` or ``13``),
  and its targets are registered for the ``"CUDA"`` platform. A library that is missing or
  fails to load is marked unavailable: every later GPU use raises a ``RuntimeError``
  saying why, and the CPU keeps working.

Both libraries export the same handler symbols, one per target; the target names are
prefixed ``jaxsolve_layout_`` because XLA's registry is process-wide.
"""

import ctypes
import functools
import importlib.metadata
import pathlib
import re

import jax

LOCAL_ROW_TO_COLUMN_MAJOR = "jaxsolve_layout_local_row_to_column_major"
LOCAL_COLUMN_TO_ROW_MAJOR = "jaxsolve_layout_local_column_to_row_major"

_SYMBOLS = {
    LOCAL_ROW_TO_COLUMN_MAJOR: "JaxsolveLayoutLocalRowToColumnMajor",
    LOCAL_COLUMN_TO_ROW_MAJOR: "JaxsolveLayoutLocalColumnToRowMajor",
}
# Not resolved: under Bazel the module is a symlink into the source tree, while the library
# sits beside the link (in the runfiles), as it sits beside the module in a wheel.
_HERE = pathlib.Path(__file__).absolute().parent
_CPU_LIBRARY = "libjaxsolve_layout.so"


def _register(library: ctypes.CDLL, platform: str) -> None:
    for target, symbol in _SYMBOLS.items():
        capsule = jax.ffi.pycapsule(getattr(library, symbol))
        jax.ffi.register_ffi_target(target, capsule, platform=platform)


try:
    _cpu = ctypes.CDLL(str(_HERE / _CPU_LIBRARY))
except OSError as error:
    raise ImportError(
        f"jaxsolve.layout: cannot load its native CPU library {_CPU_LIBRARY} from "
        f"{_HERE}: {error}. Build it (or reinstall the jaxsolve_layout wheel)."
    ) from error
_register(_cpu, "cpu")
_cpu.JaxsolveLayoutLocalScratchElements.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_int32]
_cpu.JaxsolveLayoutLocalScratchElements.restype = ctypes.c_int64


def scratch_elements(rows: int, cols: int, tile: int, *, moves_tiles: bool) -> int:
    """Elements of scratch the native local transpose needs, as the C++ core computes it.

    ``moves_tiles``: whether the conversion moves tiles (it does unless the matrix is square
    and the tile permutation the identity).
    """
    n = _cpu.JaxsolveLayoutLocalScratchElements(rows, cols, tile, int(moves_tiles))
    if n < 0:
        raise ValueError(f"invalid local matrix geometry {rows=} {cols=} {tile=}")
    return n


def _cuda_major() -> int | None:
    """CUDA major version of JAX's CUDA plugin, from public information only.

    The installed ``jax-cuda<major>-plugin`` distribution decides; should both be
    installed, the version the CUDA client reports (``platform_version``) does.
    """
    installed = []
    for major in (13, 12):
        try:
            importlib.metadata.version(f"jax-cuda{major}-plugin")
        except importlib.metadata.PackageNotFoundError:
            continue
        installed.append(major)
    if len(installed) == 1:
        return installed[0]
    try:
        version = jax.devices("cuda")[0].client.platform_version  # e.g. "cuda 13000"
    except RuntimeError:  # no CUDA backend (a ROCm GPU, say)
        return None
    match = re.search(r"(\d+)", version)
    if match is None:
        return None
    number = int(match.group(1))
    return number // 1000 if number >= 1000 else number


@functools.cache
def _cuda_unavailable_reason() -> str | None:
    """Loads and registers the CUDA library once; returns why it is unavailable, or None."""
    major = _cuda_major()
    if major is None:
        return "the CUDA version of JAX's CUDA backend could not be determined"
    name = f"libjaxsolve_layout_cuda{major}.so"
    try:
        library = ctypes.CDLL(str(_HERE / name))
    except OSError as error:
        return f"its CUDA {major} library {name} failed to load: {error}"
    _register(library, "CUDA")
    return None


def require_cuda(op: str) -> None:
    """Makes sure the CUDA targets are registered before ``op`` runs on a CUDA device.

    Raises:
      RuntimeError: the CUDA library is unavailable (missing, or built for another CUDA).
    """
    reason = _cuda_unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"{op} cannot run on the GPU: jaxsolve.layout's {reason}.")
