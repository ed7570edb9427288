"""jaxsolve's own NCCL communicators over sets of JAX devices, created once and cached.

Native solvers (cuSOLVERMp) need an NCCL communicator whose ranks are the devices of their
process grid. Rather than borrow XLA's (which only XLA internals reach, and which ties a binary
to one JAX release), jaxsolve makes its own, with public APIs only:

1. the unique id (``ncclGetUniqueId``) is made by the lowest-numbered process that holds one of
   the devices and, when other processes hold some too, travels to them through
   `jax.experimental.multihost_utils.broadcast_one_to_all` (a collective of *all* processes:
   every process must ask for the communicator, as an SPMD program does); a single process
   that drives all the devices keeps it to itself;
2. each process creates its members, one per local device (``ncclCommInitRank`` inside an NCCL
   group, so one process can hold several ranks), in ``libjaxsolve_nccl_cuda<major>.so``;
3. the communicator is cached under its devices: the next request returns it at once. The
   native handlers find their device's member by the communicator's `~NcclCommunicator.key`,
   an XLA FFI attribute.

Rank ``k`` is the ``k``-th device of the set (for cuSOLVERMp: the devices of the mesh in
row-major order over the process grid). NCCL comes from the ``nvidia-nccl-cu<major>`` pip wheel
(or a ``libnccl.so.2`` already in the process, e.g. through ``LD_PRELOAD``), loaded with
``RTLD_GLOBAL`` so that jaxsolve and cuSOLVERMp use one and the same NCCL.
"""

from __future__ import annotations

import atexit
import ctypes
import dataclasses
import functools
import itertools
import pathlib
from collections.abc import Callable, Sequence

import jax
import numpy as np

from jaxsolve.runtime import cuda_major, preload_nvidia_library

_FOLDER = pathlib.Path(__file__).absolute().parent


@functools.cache
def nccl_library() -> ctypes.CDLL:
    """NCCL and ``libjaxsolve_nccl_cuda<major>.so``, loaded once with ``RTLD_GLOBAL``.

    An NCCL already in the process's global scope (``LD_PRELOAD``) is used as it is; else the
    ``nvidia-nccl-cu<major>`` wheel's, for `jaxsolve.runtime.cuda_major`'s major.

    Raises:
      RuntimeError: the CUDA major cannot be told, or NCCL or our library cannot be loaded.
    """
    major = cuda_major()
    if not hasattr(ctypes.CDLL(None), "ncclGetVersion"):
        preload_nvidia_library("nccl/lib/libnccl.so.2", "libnccl.so.2", f"nvidia-nccl-cu{major}")
    name = f"libjaxsolve_nccl_cuda{major}.so"
    try:
        library = ctypes.CDLL(str(_FOLDER / name), mode=ctypes.RTLD_GLOBAL)
    except OSError as error:
        raise RuntimeError(f"jaxsolve.sharding: cannot load {name}: {error}") from error
    library.JaxsolveNcclCreate.argtypes = [
        ctypes.c_int64, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
        ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    library.JaxsolveNcclDestroy.argtypes = [ctypes.c_int64]
    library.JaxsolveNcclRank.argtypes = [
        ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    library.JaxsolveNcclErrorString.restype = ctypes.c_char_p
    return library


def _check(library: ctypes.CDLL, status: int, what: str) -> None:
    if status != 0:
        reason = library.JaxsolveNcclErrorString(status).decode()
        kind = "CUDA" if status < 0 else "NCCL"
        raise RuntimeError(
            f"jaxsolve.sharding: {what} failed: {kind} error {abs(status)}: {reason}")


def nccl_version() -> int:
    """The ``ncclGetVersion`` code of the process's NCCL, e.g. ``22907`` for 2.29.7.

    Loads NCCL (and jaxsolve's communicator library) first, as `nccl_communicator` does: a
    native library that binds to NCCL at load time (cuSOLVERMp's handlers) loads after it.

    Raises:
      RuntimeError: NCCL or our library cannot be loaded (no GPU build of JAX, say).

    Examples:
      cuBLASMp 0.10 needs NCCL 2.29.2 or newer:

      >>> import jaxsolve.sharding as js
      >>> js.nccl_version() >= 22902  # doctest: +SKIP
      True
    """
    library = nccl_library()
    version = ctypes.c_int()
    _check(library, library.JaxsolveNcclVersion(ctypes.byref(version)), "ncclGetVersion")
    return version.value


def _new_unique_id() -> bytes:
    library = nccl_library()
    out = ctypes.create_string_buffer(library.JaxsolveNcclUniqueIdBytes())
    _check(library, library.JaxsolveNcclGetUniqueId(out), "ncclGetUniqueId")
    return out.raw


# ---------------------------------------------------------------------------- bookkeeping


@dataclasses.dataclass(frozen=True)
class NcclCommunicator:
    """An NCCL communicator whose rank ``k`` is ``devices[k]``.

    Attributes:
      key: the communicator's number in this process; native handlers take it as an attribute
        and look up their device's member by it.
      devices: the devices, in rank order (all processes').
      local_ranks: the ranks this process holds, ascending.

    Examples:
      One process driving two GPUs holds both ranks of their communicator:

      >>> import jax
      >>> import jaxsolve.sharding as js
      >>> communicator = js.nccl_communicator(jax.devices("gpu")[:2])  # doctest: +SKIP
      >>> communicator.size, communicator.local_ranks  # doctest: +SKIP
      (2, (0, 1))
    """

    key: int
    devices: tuple[jax.Device, ...]
    local_ranks: tuple[int, ...]

    @property
    def size(self) -> int:
        """The number of ranks."""
        return len(self.devices)


def check_devices(devices: Sequence[jax.Device]) -> tuple[jax.Device, ...]:
    """`devices` as a tuple, after checking they are distinct devices and not empty.

    Raises:
      ValueError: no devices, repeated devices (NCCL puts one rank on one GPU), or something
        that is not a `jax.Device`.
    """
    devices = tuple(devices)
    if not devices:
        raise ValueError("an NCCL communicator needs at least one device.")
    if not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"expected jax.Device objects, got {devices!r}.")
    if len({d.id for d in devices}) != len(devices):
        raise ValueError(
            "an NCCL communicator cannot hold a device twice (NCCL puts one rank on one GPU); "
            f"got device ids {[d.id for d in devices]}.")
    return devices


def local_members(devices: Sequence[jax.Device], process_index: int
                  ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(ranks, ordinals)``: the ranks process `process_index` holds and their CUDA ordinals.

    The CUDA ordinal of a device is its ``local_hardware_id`` (the number CUDA gives it in that
    process, after ``CUDA_VISIBLE_DEVICES``).

    Examples:
      >>> import jax
      >>> cpus = jax.devices("cpu")[:3]
      >>> local_members(cpus, 0) == ((0, 1, 2), tuple(d.local_hardware_id for d in cpus))
      True
      >>> local_members(cpus, 1)
      ((), ())
    """
    mine = [(rank, d) for rank, d in enumerate(devices) if d.process_index == process_index]
    return tuple(rank for rank, _ in mine), tuple(d.local_hardware_id for _, d in mine)


def exchange_unique_id(devices: Sequence[jax.Device], make_id: Callable[[], bytes],
                       size: int) -> bytes:
    """The unique id of a communicator over `devices`, the same in every process.

    The lowest-numbered process holding one of `devices` calls `make_id`. If other processes
    hold devices of the set too, the id reaches every process through
    `jax.experimental.multihost_utils.broadcast_one_to_all`, a collective that every process of
    the run must enter, outside ``jax.jit``; a single process holding all of them keeps it.

    Args:
      devices: the communicator's devices.
      make_id: makes the id (``ncclGetUniqueId``'s bytes); called in one process only.
      size: the id's length in bytes (``NCCL_UNIQUE_ID_BYTES``).

    Raises:
      ValueError: `make_id` returned an id of another length.
      RuntimeError: called inside ``jax.jit`` when the id must travel between processes.
    """
    processes = sorted({d.process_index for d in devices})
    me = jax.process_index()
    if me == processes[0]:
        local = make_id()
        if len(local) != size:
            raise ValueError(f"the unique id has {len(local)} bytes, expected {size}.")
    else:
        local = bytes(size)
    if processes == [me]:
        return local
    from jax.experimental import multihost_utils

    try:
        received = multihost_utils.broadcast_one_to_all(
            np.frombuffer(local, np.uint8), is_source=me == processes[0])
    except ValueError as error:  # JAX refuses the collective while jax.jit traces
        raise RuntimeError(
            "the NCCL unique id of a communicator over several processes travels through a "
            "JAX collective, which cannot run inside jax.jit: create the communicator before "
            "tracing, with jaxsolve.sharding.nccl_communicator(devices)."
        ) from error
    return np.asarray(received, dtype=np.uint8).tobytes()


_COMMUNICATORS: dict[tuple[int, ...], NcclCommunicator] = {}
_KEYS = itertools.count(1)
_BEFORE_DESTROY: list[Callable[[], None]] = []


def on_destroy_nccl_communicators(hook: Callable[[], None]) -> None:
    """Registers `hook` to run before `destroy_nccl_communicators` destroys the communicators.

    A native solver that caches state on a communicator (cuSOLVERMp's grids and handles)
    frees it there, before NCCL's communicator goes away. A hook registered twice runs once.

    Examples:
      >>> import jaxsolve.sharding as js
      >>> freed = []
      >>> js.on_destroy_nccl_communicators(lambda: freed.append(True))
      >>> js.destroy_nccl_communicators()  # no communicators: nothing to free
      >>> freed
      []
    """
    if hook not in _BEFORE_DESTROY:
        _BEFORE_DESTROY.append(hook)


def nccl_communicator(devices: Sequence[jax.Device]) -> NcclCommunicator:
    """The NCCL communicator whose rank ``k`` is ``devices[k]``: created once, then cached.

    Every process of the run must call it with the same devices in the same order when several
    processes hold them (SPMD programs do), and then outside ``jax.jit`` (the unique id travels
    through a JAX collective). Creating one is a collective over the devices: in one process
    holding several GPUs, their ranks are created together in an NCCL group.

    Args:
      devices: distinct GPU devices, in rank order; e.g. a mesh's ``devices.flat`` (row-major
        over the process grid, ``cusolverMpGridMapping_t``'s ``ROW_MAJOR``).

    Returns:
      The `NcclCommunicator`; the same object for the same devices until
      `destroy_nccl_communicators`.

    Raises:
      ValueError: bad devices (empty, repeated, not GPUs).
      RuntimeError: NCCL is missing, or creating the communicator failed.

    Examples:
      On the GPUs of a 2 × 2 grid mesh, in rank order (what the cuSOLVERMp backend of
      `jaxsolve.dense` does); asking again returns the cached one:

      >>> import jax
      >>> import jaxsolve.sharding as js
      >>> mesh = js.make_grid_mesh(2, 2)  # doctest: +SKIP
      >>> communicator = js.nccl_communicator(mesh.devices.flat)  # doctest: +SKIP
      >>> js.nccl_communicator(mesh.devices.flat) is communicator  # doctest: +SKIP
      True

      CPU devices have no NCCL:

      >>> js.nccl_communicator(jax.devices("cpu")[:2])
      Traceback (most recent call last):
        ...
      ValueError: NCCL communicators are for GPUs; got devices on ['cpu'].
    """
    devices = check_devices(devices)
    if not all(d.platform == "gpu" for d in devices):
        raise ValueError(
            "NCCL communicators are for GPUs; got devices on "
            f"{sorted({d.platform for d in devices})}.")
    ids = tuple(d.id for d in devices)
    if ids in _COMMUNICATORS:
        return _COMMUNICATORS[ids]
    library = nccl_library()
    size = library.JaxsolveNcclUniqueIdBytes()
    unique_id = exchange_unique_id(devices, _new_unique_id, size)
    ranks, ordinals = local_members(devices, jax.process_index())
    key = next(_KEYS)
    if ranks:
        count = len(ranks)
        status = library.JaxsolveNcclCreate(
            key, unique_id, len(devices), count, (ctypes.c_int * count)(*ranks),
            (ctypes.c_int * count)(*ordinals))
        _check(library, status, f"creating an NCCL communicator over devices {list(ids)}")
    if not _COMMUNICATORS:
        atexit.register(destroy_nccl_communicators)
    communicator = NcclCommunicator(key, devices, ranks)
    _COMMUNICATORS[ids] = communicator
    return communicator


def member_rank(communicator: NcclCommunicator, device: jax.Device) -> tuple[int, int]:
    """``(rank, size)`` of `device`'s member of `communicator`, as NCCL reports them."""
    library = nccl_library()
    rank, size = ctypes.c_int(), ctypes.c_int()
    _check(library, library.JaxsolveNcclRank(communicator.key, device.local_hardware_id,
                                             ctypes.byref(rank), ctypes.byref(size)),
           "ncclCommUserRank")
    return rank.value, size.value


def cached_communicators() -> tuple[NcclCommunicator, ...]:
    """The communicators this process holds, oldest first."""
    return tuple(_COMMUNICATORS.values())


def destroy_nccl_communicators() -> None:
    """Destroys every cached communicator (a collective, like creating them).

    The `on_destroy_nccl_communicators` hooks run first, so that solvers free their grids on them. Runs at
    interpreter exit as well. The next `nccl_communicator` call creates a new one.

    Examples:
      >>> import jaxsolve.sharding as js
      >>> js.destroy_nccl_communicators()  # nothing to do without communicators
    """
    if not _COMMUNICATORS:
        return
    for hook in list(_BEFORE_DESTROY):
        hook()
    library = nccl_library()
    communicators = list(_COMMUNICATORS.values())
    _COMMUNICATORS.clear()
    for communicator in communicators:
        if communicator.local_ranks:
            _check(library, library.JaxsolveNcclDestroy(communicator.key),
                   "destroying an NCCL communicator")

