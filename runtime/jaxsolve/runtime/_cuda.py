"""Which CUDA the process runs, and NVIDIA's libraries from their pip wheels.

jaxsolve builds each CUDA library once per CUDA major (12 and 13) and loads the one of JAX's
CUDA plugin. Every package asks :func:`cuda_major` which that is, so that within one process
all of them (and the NVIDIA libraries they preload) agree. NVIDIA ships cuSOLVER, cuBLAS,
NCCL and the rest as pip wheels sharing one ``nvidia`` package folder:
:func:`nvidia_library` finds a library there, :func:`preload_nvidia_library` loads it with
``RTLD_GLOBAL`` so that our handlers' undefined symbols bind to it.
"""

import ctypes
import importlib.metadata
import importlib.util
import pathlib
import re
import sys

import jax

_PLUGIN_MAJORS = (13, 12)


def cuda_major() -> int:
    """The CUDA major version (12 or 13) of JAX's CUDA plugin: the one rule of every package.

    The installed ``jax-cuda<major>-plugin`` distribution decides. When both are installed,
    or none is (a JAX built from source), the CUDA client JAX runs decides, by the version it
    reports (``platform_version``, e.g. ``"cuda 13000"``); asking it starts JAX's CUDA
    backend, so only a GPU op should need the major.

    Returns:
      The CUDA major version.

    Raises:
      RuntimeError: neither tells it (no plugin installed and no CUDA backend, or both
        installed and no CUDA backend running); the message says so.

    Examples:
      On a machine with ``jax[cuda13]`` this is 13; on one with no CUDA plugin nor CUDA
      backend it says why it cannot tell:

      >>> import jaxsolve.runtime as jr
      >>> jr.cuda_major()  # doctest: +SKIP
      13
      >>> jr.cuda_major()  # doctest: +ELLIPSIS
      Traceback (most recent call last):
        ...
      RuntimeError: the CUDA version of JAX's CUDA backend could not be determined: ...
    """
    installed = []
    for major in _PLUGIN_MAJORS:
        try:
            importlib.metadata.version(f"jax-cuda{major}-plugin")
        except importlib.metadata.PackageNotFoundError:
            continue
        installed.append(major)
    if len(installed) == 1:
        return installed[0]
    plugins = "both jax-cuda12-plugin and jax-cuda13-plugin are" if installed else \
        "no jax-cuda<major>-plugin is"
    try:
        version = jax.devices("cuda")[0].client.platform_version
    except RuntimeError as error:  # no CUDA backend (a CPU-only JAX, a ROCm GPU)
        raise RuntimeError(
            "the CUDA version of JAX's CUDA backend could not be determined: "
            f"{plugins} installed, and JAX has no CUDA backend to ask ({error})") from error
    match = re.search(r"(\d+)", version)
    if match is None:
        raise RuntimeError(
            "the CUDA version of JAX's CUDA backend could not be determined: "
            f"{plugins} installed, and its CUDA client reports {version!r}")
    number = int(match.group(1))
    return number // 1000 if number >= 1000 else number


def nvidia_library(relative: str) -> pathlib.Path | None:
    """``nvidia/<relative>`` in the installed NVIDIA pip wheels, if some wheel has it.

    NVIDIA's wheels share the ``nvidia`` package folder, which may lie in several places (a
    venv and its base, a ``pip install --target`` folder on ``sys.path``); every ``nvidia``
    folder on ``sys.path`` is searched, in order, and the package's own locations after them.

    Args:
      relative: the library's path below ``nvidia/``, e.g. ``"nccl/lib/libnccl.so.2"`` or
        CUDA 13's ``"cu13/lib/libcusolver.so.12"``.

    Returns:
      The library's path, or None when no wheel on ``sys.path`` has it.

    Examples:
      >>> import jaxsolve.runtime as jr
      >>> jr.nvidia_library("cu13/lib/libcusolver.so.12")  # doctest: +SKIP
      PosixPath('/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcusolver.so.12')
      >>> jr.nvidia_library("example/lib/libjaxsolve_absent.so.0") is None
      True
    """
    spec = importlib.util.find_spec("nvidia")
    locations = [pathlib.Path(p) / "nvidia" for p in sys.path if p]
    locations += [pathlib.Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for folder in locations:
        path = folder / relative
        if path.exists():
            return path
    return None


def preload_nvidia_library(relative: str, soname: str, wheel: str) -> None:
    """Loads a library of an NVIDIA wheel with ``RTLD_GLOBAL``, or says which wheel is missing.

    The wheel's copy (:func:`nvidia_library` of ``relative``) is loaded if installed, else
    ``soname`` wherever the dynamic loader finds it (one already loaded, ``LD_LIBRARY_PATH``).
    Loading it globally lets a jaxsolve CUDA library that leaves the symbols unresolved (so
    that it works with whichever copy the process has) bind to it when it loads next.

    Args:
      relative: the library's path below ``nvidia/``.
      soname: the library's soname, e.g. ``"libnccl.so.2"``.
      wheel: the pip wheel that ships it, named in the error.

    Raises:
      RuntimeError: neither loads; the message names the pip wheel ``wheel``.

    Examples:
      >>> import jaxsolve.runtime as jr
      >>> jr.preload_nvidia_library("nccl/lib/libnccl.so.2", "libnccl.so.2",
      ...                           "nvidia-nccl-cu13")  # doctest: +SKIP
      A library no wheel ships and the loader cannot find:

      >>> jr.preload_nvidia_library("x/libabsent.so.0", "libabsent.so.0", "nvidia-x-cu13")
      ... # doctest: +ELLIPSIS
      Traceback (most recent call last):
        ...
      RuntimeError: jaxsolve needs libabsent.so.0 from the pip wheel nvidia-x-cu13: ...
    """
    path = nvidia_library(relative)
    try:
        ctypes.CDLL(str(path) if path else soname, mode=ctypes.RTLD_GLOBAL)
    except OSError as error:
        raise RuntimeError(
            f"jaxsolve needs {soname} from the pip wheel {wheel}: {error}. Install it, e.g. "
            "`pip install 'jaxsolve[cuda13]'` (or `[cuda12]`)."
        ) from error
