"""What every jaxsolve package with native code shares at run time (``jaxsolve.runtime``).

jaxsolve's solvers call their own C++ and CUDA code as XLA FFI handlers, in shared libraries
loaded with ``ctypes``, and bind NVIDIA's libraries (cuSOLVER, cuBLAS, NCCL, cuSOLVERMp) from
NVIDIA's pip wheels at load time. This package is that plumbing, once, below every other
package (it imports none of them), so that ``jaxsolve.layout``, ``jaxsolve.sharding``,
``jaxsolve.dense`` and ``jaxsolve.sparse`` load their libraries the same way and agree on
which CUDA they run:

* `NativeLibrary` loads a package's native libraries (the CPU one at import, the CUDA one of
  JAX's plugin on the first GPU op) and registers their XLA FFI targets.
* `cuda_major` is the one rule for the CUDA major (12 or 13) a process runs: that of the
  installed ``jax-cuda<major>-plugin``, or of JAX's CUDA client when that does not tell.
* `nvidia_library` finds a library in the NVIDIA pip wheels; `preload_nvidia_library` loads
  it with ``RTLD_GLOBAL``, or names the wheel to install.

Its source tree also holds ``csrc/cuda_error.h``, the helper every package's CUDA handlers
report CUDA errors with (a build-time header, not shipped in the wheel).

Examples:
  Where NVIDIA's CUDA 13 cuSOLVER wheel is installed, and which CUDA JAX runs:

  >>> import jaxsolve.runtime as jr
  >>> jr.nvidia_library("cu13/lib/libcusolver.so.12")  # doctest: +SKIP
  PosixPath('/venv/lib/python3.11/site-packages/nvidia/cu13/lib/libcusolver.so.12')
  >>> jr.cuda_major()  # doctest: +SKIP
  13
"""

import importlib.metadata as _metadata

from ._cuda import cuda_major as cuda_major
from ._cuda import nvidia_library as nvidia_library
from ._cuda import preload_nvidia_library as preload_nvidia_library
from ._native_library import NativeLibrary as NativeLibrary

try:
    __version__ = _metadata.version("jaxsolve-runtime")
except _metadata.PackageNotFoundError:  # a source checkout, not an installed distribution
    __version__ = "unknown"

__all__ = [
    "NativeLibrary",
    "cuda_major",
    "nvidia_library",
    "preload_nvidia_library",
]
