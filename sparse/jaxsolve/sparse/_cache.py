"""The setup cache: AMG structures per sparsity pattern, least recently used first out.

Building an AMG hierarchy's structure (splittings or aggregates, symbolic products) is
host work that depends on the sparsity pattern, the AMG configuration and the values it
is built from, so :func:`setup_for` keeps the last ``maxsize`` of them, keyed by a hash
of the pattern (its full content, so two patterns never share an entry by accident), the
configuration and the number of near-null-space vectors, and by the values' key
(:func:`._structure_key.values_key`): one pattern can hold several structures, one per
operator solved on it.  (A solve without AMG keeps its pattern's device arrays here,
and a multicolor relaxation its coloring, keyed by the pattern and the relaxation.)  An
entry also keeps the numbers of the most recent setup done with concrete values, which
``solve(..., reuse_setup=True)`` reuses.

The default size is 8 (environment variable ``JAXSOLVE_CACHE_SIZE``), so that a matrix
and its transpose (a gradient of a nonsymmetric solve needs both) never evict each other.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from ._csr_arrays import PatternArrays
from ._hierarchy import Hierarchy, HierarchyStructure
from ._matrix_free import clear_coloring_cache
from ._multicolor import MulticolorArrays
from ._compiled_programs import clear_all as clear_compiled_programs

_DEFAULT_SIZE = 8


class CacheInfo(NamedTuple):
    """Statistics of the setup cache, like :func:`functools.lru_cache`'s.

    Attributes:
      hits: lookups that found a structure.
      misses: lookups that built one.
      maxsize: the most entries kept.
      currsize: the entries kept now.
    """

    hits: int
    misses: int
    maxsize: int
    currsize: int


@dataclasses.dataclass
class CacheEntry:
    """A cached structure and the numbers of its latest concrete setup (or None).

    ``built_for``: the key of the values the structure was built from
    (:func:`._structure_key.values_key`), None for one that follows the pattern alone.
    """

    structure: HierarchyStructure | MulticolorArrays | PatternArrays
    numbers: Hierarchy | None
    built_for: str | None = None
    # ``built_for``'s digest on the device, for a solve's program to compare (see
    # :func:`latest_entry`); sent once.
    built_for_digest: jax.Array | None = dataclasses.field(default=None, repr=False)


class _SetupCache:
    def __init__(self, maxsize: int):
        self._entries: collections.OrderedDict[Any, CacheEntry] = collections.OrderedDict()
        self._maxsize = maxsize
        self._hits = self._misses = 0
        self._lock = threading.Lock()
        # The keys whose latest entry was taken, in vain, for values of another key.
        self._missed: set[Any] = set()

    def get(self, key: Any, build: Callable[[], CacheEntry],
            built_for: Callable[[CacheEntry], str] | None) -> CacheEntry:
        with self._lock:
            entry = self._most_recent(key)
        if entry is not None and built_for is not None:
            wanted = built_for(entry)  # outside the lock: it waits for the device
            with self._lock:
                if entry.built_for == wanted:  # the latest was the values': take it again
                    self._missed.discard(key)
                entry = self._entries.get((key, wanted))
        with self._lock:
            if entry is not None and (key, entry.built_for) in self._entries:  # not evicted
                self._entries.move_to_end((key, entry.built_for))
                self._hits += 1
                return entry
            self._misses += 1
        entry = build()  # outside the lock: it can take a while
        with self._lock:
            self._entries[key, entry.built_for] = entry
            self._entries.move_to_end((key, entry.built_for))
            self._evict()
        return entry

    def latest(self, key: Any) -> CacheEntry | None:
        """The most recently used entry of ``key``, not counted as a lookup; None after
        :meth:`missed` until a lookup finds the latest entry the values'."""
        with self._lock:
            return None if key in self._missed else self._most_recent(key)

    def missed(self, key: Any) -> None:
        """Notes that :meth:`latest`'s entry of ``key`` was not the values'."""
        with self._lock:
            self._missed.add(key)

    def confirm(self, key: Any, entry: CacheEntry) -> None:
        """Counts a hit of ``entry`` (of ``key``), found by :meth:`latest`, and makes it the
        most recently used, or keeps it again if it was evicted since."""
        with self._lock:
            self._hits += 1
            self._entries[key, entry.built_for] = entry
            self._entries.move_to_end((key, entry.built_for))
            self._evict()

    def _most_recent(self, key: Any) -> CacheEntry | None:
        """The most recently used entry of ``key``, whatever values it was built for."""
        for (entry_key, _), entry in reversed(self._entries.items()):
            if entry_key == key:
                return entry
        return None

    def _evict(self) -> None:
        while len(self._entries) > self._maxsize:
            self._entries.popitem(last=False)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self._maxsize, len(self._entries))

    def items(self) -> list[tuple[Any, CacheEntry]]:
        """The entries, the least recently used first."""
        with self._lock:
            return list(self._entries.items())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._missed.clear()
            self._hits = self._misses = 0

    def resize(self, maxsize: int) -> None:
        with self._lock:
            self._maxsize = maxsize
            self._evict()


def _size_from_environment() -> int:
    text = os.environ.get("JAXSOLVE_CACHE_SIZE")
    if text is None:
        return _DEFAULT_SIZE
    try:
        size = int(text)
    except ValueError:
        size = -1
    if size < 0:
        raise ValueError(
            f"JAXSOLVE_CACHE_SIZE must be a non-negative integer, got {text!r}."
        )
    return size


_CACHE = _SetupCache(_size_from_environment())


def setup_for(key: Any, build: Callable[[], CacheEntry],
              built_for: Callable[[CacheEntry], str] | None = None) -> CacheEntry:
    """The cached entry for ``key``, built by ``build()`` on a miss.

    Entries of one ``key`` differ in the values they were built for
    (:attr:`CacheEntry.built_for`).  Without ``built_for`` the most recently used of them
    serves; with it, the one built for ``built_for(entry)``, the key of the caller's
    values, which it computes from any ``entry`` of ``key`` (the most recently used), and
    ``build()`` gives a miss's entry, whose ``built_for`` then names it.
    """
    return _CACHE.get(key, build, built_for)


def latest_entry(key: Any) -> CacheEntry | None:
    """The most recently used entry of ``key``, or None; not counted as a lookup.

    A solve of concrete values on a device takes it before their key is known
    (:attr:`._setup.System.setup`) and counts it as a hit by :func:`confirm_entry` once
    the key read back with the solve's status says it was theirs: a wait for the device
    fewer than :func:`setup_for` with ``built_for``.  Where it was not theirs
    (:func:`latest_missed`), None, until a lookup with ``built_for`` finds the latest
    entry the values' again: operators that alternate on one pattern read their key
    first, rather than set up numbers on each other's structure in vain.
    """
    return _CACHE.latest(key)


def latest_missed(key: Any) -> None:
    """Notes that the entry :func:`latest_entry` gave for ``key`` was not the values'."""
    _CACHE.missed(key)


def confirm_entry(key: Any, entry: CacheEntry) -> None:
    """Counts ``entry``, of ``key``, found by :func:`latest_entry`, as a hit of
    :func:`setup_for`, the most recently used."""
    _CACHE.confirm(key, entry)


def cache_info() -> CacheInfo:
    """Statistics of the AMG setup cache: hits, misses, maxsize, currsize.

    JAX-AMG's ``get_solver_cache_info`` describes the entries (:func:`solver_cache_info`).

    Examples:
      >>> from jaxsolve import sparse
      >>> sparse.clear_cache()
      >>> sparse.cache_info()
      CacheInfo(hits=0, misses=0, maxsize=8, currsize=0)
    """
    return _CACHE.info()


def solver_cache_info() -> dict[str, Any]:
    """The caches as JAX-AMG's ``get_solver_cache_info`` describes its AmgX caches.

    JAX-AMG's keys with their meaning: ``"single_gpu"`` (the setup cache of one-process
    solves) and ``"mpi"`` (the distributed layouts of ``comm=`` solves on this rank), each
    a dict of ``"size"`` (entries kept), ``"capacity"`` (the most kept) and ``"entries"``
    (least recently used first), and ``"isolated_mode"`` (True when nothing is kept,
    ``JAXSOLVE_CACHE_SIZE=0``, as ``JAXAMG_CACHE_SIZE=0`` is JAX-AMG's).  An entry has
    JAX-AMG's ``"n_rows"`` and ``"nnz"`` (``"n_local"``, ``"n_global"``, ``"nnz"`` and
    ``"lrank"`` for ``"mpi"``), ``"structure_hash"`` (an int digest of the pattern) and
    ``"config"`` (the AMG configuration as AmgX keys, a relaxation's name, or None for a
    solve without a preconditioner's structure); a multicolor smoother's ordering has
    ``"nnz"`` None.  jaxsolve keys no entry by dtype or
    orientation (a transpose is a pattern of its own), so JAX-AMG's ``"mode"`` and
    ``"transpose_solve"`` are not there.  :func:`cache_info` gives the hit statistics.

    Examples:
      >>> from jaxsolve import sparse
      >>> sparse.clear_cache()
      >>> info = sparse.get_solver_cache_info()
      >>> info["single_gpu"]["size"], info["single_gpu"]["capacity"], info["isolated_mode"]
      (0, 8, False)
    """
    from . import _mpi  # here: _mpi imports what imports this module

    maxsize = _CACHE.info().maxsize
    entries = [_entry_summary(key, entry) for key, entry in _CACHE.items()]
    return {"single_gpu": {"size": len(entries), "capacity": maxsize, "entries": entries},
            "mpi": _mpi.layout_cache_info(), "isolated_mode": maxsize == 0}


def _entry_summary(key: tuple, entry: CacheEntry) -> dict[str, Any]:
    from ._device_setup import DeviceStructure  # here: _device_setup imports this module

    (pattern_key, component, *_), _ = key
    structure = entry.structure
    if isinstance(structure, (HierarchyStructure, DeviceStructure)):
        finest = (structure.sizes[0] if isinstance(structure, DeviceStructure)
                  else structure.levels[0].a if structure.levels else structure.coarsest)
        n_rows, nnz = finest if isinstance(finest, tuple) else (finest.n_rows, finest.nnz)
        config = {"solver": "AMG", **component._amgx_keys("main_preconditioner")}
    elif isinstance(structure, MulticolorArrays):
        n_rows, nnz, config = int(structure.inverse.shape[0]), None, component
    else:  # a solve without AMG: the pattern's device arrays
        n_rows, nnz, config = structure.matrix.n_rows, structure.nnz, None
    return {"n_rows": int(n_rows), "nnz": nnz if nnz is None else int(nnz),
            "structure_hash": int(pattern_key[:16], 16), "config": config}


def clear_cache() -> None:
    """Drops every cached AMG setup and resets the statistics.

    JAX-AMG's name for it, ``clear_solver_cache``, is an alias.  Programs
    already compiled keep the arrays they captured.  The numeric setups compiled per size
    class (a classical hierarchy's; they hold no arrays) stay, as JAX's compiled solves do,
    so that a pattern set up again traces and compiles nothing; :func:`finalize` drops
    them.
    """
    _CACHE.clear()


def set_cache_size(maxsize: int) -> None:
    """Keeps at most ``maxsize`` AMG setups (0 disables the cache); evicts the oldest.

    Args:
      maxsize: a non-negative int.  With 0 every solve rebuilds its structure.

    Raises:
      ValueError: for a negative or non-integer size.
    """
    if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 0:
        raise ValueError(f"set_cache_size: maxsize must be a non-negative int, got {maxsize!r}.")
    _CACHE.resize(maxsize)


def finalize() -> None:
    """Releases what ``jaxsolve.sparse`` keeps between solves (JAX-AMG's ``finalize``).

    The AMG setups and device copies (:func:`clear_cache`), the programs compiled ahead
    of time (the numeric setups per size class, the structure keys' digests) and the
    structures found for matrix-free operators
    (:func:`cache_coloring`'s cache).  jaxsolve holds no native
    solver library to shut down (JAX-AMG's also calls ``AMGX_finalize``), so solves may
    follow: they set up anew.

    Examples:
      >>> from jaxsolve import sparse
      >>> sparse.finalize()
      >>> sparse.cache_info().currsize
      0
    """
    clear_cache()
    clear_compiled_programs()
    clear_coloring_cache()
