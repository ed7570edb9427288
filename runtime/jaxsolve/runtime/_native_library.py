"""Loading a jaxsolve package's native libraries and registering their XLA FFI targets.

A jaxsolve package with native code ships its handlers, C-ABI XLA FFI functions, in shared
libraries beside its Python modules, and loads them with ``ctypes``:

* ``lib<stem>.so``, the CPU library, is required. It is loaded when the package is imported
  (a missing or broken one is an ``ImportError``), and its targets are registered for the
  ``"cpu"`` platform.
* ``lib<stem>_cuda<major>.so`` is loaded the first time an op of the package runs on a CUDA
  device (or is traced, inside ``jax.jit``, in a process that has one: the program may be
  lowered for it), with ``<major>`` the CUDA major version of JAX's CUDA plugin (``12`` or
  ``13``), and its targets are registered for the ``"CUDA"`` platform. A library that is missing or
  fails to load is marked unavailable: every later GPU use raises a ``RuntimeError`` saying
  why, and the CPU keeps working. Loading it lazily keeps ``import`` from starting JAX's
  backends.

Both libraries export the same handler symbols, one per target. Target names should carry
the package's prefix (``jaxsolve_layout_...``), since XLA's registry is process-wide.
The CUDA major is :func:`~jaxsolve.runtime.cuda_major`'s, the rule every package shares.
"""

import ctypes
import functools
import pathlib
from collections.abc import Mapping

import jax

from ._cuda import cuda_major


def _platform(arrays: tuple) -> str | None:
    """The platform an op on ``arrays`` runs on: the first concrete array's devices'; None for
    traced (or NumPy) ones, whose platform the program's lowering decides, later."""
    for a in arrays:
        if isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer):
            return next(iter(a.devices())).platform
    return None


def _has_gpu() -> bool:
    """Whether this process has a GPU that JAX can lower a program for."""
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:  # JAX has no GPU backend here
        return False


def _unknown_major_reason() -> str:
    """Why the CUDA major cannot be told: :func:`cuda_major`'s message."""
    try:
        cuda_major()
    except RuntimeError as error:
        return str(error)
    return "the CUDA version of JAX's CUDA backend could not be determined"


class NativeLibrary:
    """The native libraries of one jaxsolve package: its CPU library and its CUDA libraries.

    Constructing it loads ``folder / f"lib{stem}.so"`` and registers ``targets`` (FFI target
    name -> exported handler symbol) for the CPU. The matching CUDA library,
    ``lib{stem}_cuda<major>.so`` for the CUDA major version of JAX's CUDA plugin, is loaded
    and registered once, by the first :meth:`require_cuda` (or :meth:`require_platform` on a
    GPU): call one of them before an op is traced for a GPU, so that XLA finds its targets.

    A package creates one instance, at import, in the one module that touches ``ctypes``;
    ``folder`` is that module's own folder, not resolved through symlinks (under Bazel the
    module is a symlink into the source tree, while the libraries sit beside the link, in the
    runfiles, as they sit beside the module in a wheel).

    Args:
      package: the package's name, for messages, e.g. ``"jaxsolve.layout"``.
      folder: the folder that holds the libraries.
      stem: the libraries' name without ``lib`` and ``.so``, e.g. ``"jaxsolve_layout"``.
      targets: FFI target name -> handler symbol, exported by every library of the package.
      cpu: whether there is a CPU library; False for handlers that exist only on the GPU
        (the package computes otherwise on the CPU), whose targets are then CUDA-only.

    Raises:
      ImportError: the CPU library (when ``cpu``) cannot be loaded.

    Examples:
      jaxsolve.layout's kernels load this way, in its one ``ctypes`` module::

        LIBRARY = NativeLibrary("jaxsolve.layout", pathlib.Path(__file__).absolute().parent,
                                "jaxsolve_layout", {TARGET: "JaxsolveLayoutLocalRowToColumnMajor"})

      A package whose handlers exist only on the GPU loads nothing until a GPU op asks for
      them; on CPU arrays nothing is needed:

      >>> import pathlib, jax.numpy as jnp
      >>> from jaxsolve.runtime import NativeLibrary
      >>> folder = pathlib.Path("/nonexistent")
      >>> library = NativeLibrary("jaxsolve.demo", folder, "demo", targets={}, cpu=False)
      >>> library.require_platform("my_op", jnp.zeros(3))  # a CPU array: nothing to load
      >>> library.cpu is None and library.cuda is None
      True

      A CPU library that cannot load is an ``ImportError`` of the package that ships it:

      >>> NativeLibrary("jaxsolve.demo", folder, "demo", targets={})  # doctest: +ELLIPSIS
      Traceback (most recent call last):
        ...
      ImportError: jaxsolve.demo: cannot load its native CPU library libdemo.so from ...
    """

    def __init__(self, package: str, folder: pathlib.Path, stem: str, targets: Mapping[str, str],
                 *, cpu: bool = True):
        self.package = package
        self.folder = pathlib.Path(folder)
        self.stem = stem
        self.targets = dict(targets)
        self.cuda: ctypes.CDLL | None = None
        """The CUDA library once loaded, for the plain C functions it exports."""
        self.cpu: ctypes.CDLL | None = None
        """The CPU library, for the plain C functions it exports besides the handlers."""
        if cpu:
            self._load_cpu()

    def _load_cpu(self) -> None:
        name = f"lib{self.stem}.so"
        try:
            cpu = ctypes.CDLL(str(self.folder / name))
            self._register(cpu, "cpu")
        except OSError as error:
            raise ImportError(
                f"{self.package}: cannot load its native CPU library {name} from {self.folder}: "
                f"{error}. Build it (or reinstall the package's wheel)."
            ) from error
        self.cpu = cpu

    def _register(self, library: ctypes.CDLL, platform: str) -> None:
        """Registers every target; raises OSError naming a handler the library lacks."""
        for target, symbol in self.targets.items():
            try:
                handler = getattr(library, symbol)
            except AttributeError as error:
                raise OSError(f"it lacks the handler {symbol} of target {target}") from error
            jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler), platform=platform)

    def _cuda_name(self, major: int) -> str:
        return f"lib{self.stem}_cuda{major}.so"

    @property
    def cuda_major(self) -> int | None:
        """The CUDA major version (12 or 13) whose library this instance loads on a GPU, or
        None where it cannot be told: :func:`~jaxsolve.runtime.cuda_major`'s, which a package
        that loads more of NVIDIA's libraries for its CUDA library (cuSOLVER, say) asks too,
        so that both agree.
        """
        try:
            return cuda_major()
        except RuntimeError:
            return None

    def ships_cuda_library(self) -> bool:
        """False when JAX's CUDA plugin is of a CUDA major this package has no library for.

        True when it has one, and when no plugin tells the major (the first GPU op then says
        why it cannot run). A backend's predicate can use it to leave such a GPU to another
        backend instead of failing there: e.g. a package built only for CUDA 13 under
        ``jax-cuda12-plugin``.
        """
        major = self.cuda_major
        return major is None or (self.folder / self._cuda_name(major)).exists()

    @functools.cached_property
    def cuda_unavailable_reason(self) -> str | None:
        """Loads and registers the CUDA library, once; why it is unavailable, or None."""
        major = self.cuda_major
        if major is None:
            return _unknown_major_reason()
        name = self._cuda_name(major)
        try:
            cuda = ctypes.CDLL(str(self.folder / name))
            self._register(cuda, "CUDA")
        except OSError as error:
            return f"the CUDA {major} library {name} failed to load: {error}"
        self.cuda = cuda
        return None

    def require_cuda(self, op: str) -> None:
        """Makes sure the CUDA targets are registered before ``op`` runs on a CUDA device.

        Raises:
          RuntimeError: the CUDA library is unavailable (missing, or built for another CUDA).
        """
        reason = self.cuda_unavailable_reason
        if reason is not None:
            raise RuntimeError(f"{op} cannot run on the GPU ({self.package}): {reason}.")

    def require_platform(self, op: str, *arrays) -> None:
        """Makes sure ``op`` on ``arrays`` finds its targets, on whatever platform it runs.

        The platform is that of the first concrete ``jax.Array`` among ``arrays``. With only
        traced (or NumPy) ones, inside ``jax.jit``, the platform is the one the program is
        lowered for, decided after this call, and not necessarily JAX's default backend (CPU
        arrays under ``jit`` on a GPU host, or GPU arrays where ``JAX_PLATFORMS=cpu,cuda``
        makes the CPU the default): so the CUDA targets are registered wherever this process
        has a GPU, as the dense routines load cuSOLVER for the CUDA branch of a traced call.
        On a GPU this is :meth:`require_cuda`; the CPU targets are always registered.

        Raises:
          RuntimeError: ``op`` runs on a GPU, or is traced in a process that has one, and the
            CUDA library is unavailable.
        """
        platform = _platform(arrays)
        if platform == "gpu" or (platform is None and _has_gpu()):
            self.require_cuda(op)
