"""The setup of a solve: checked inputs, and a matrix's AMG setup from the cache.

:class:`System` ties a matrix (one orientation of it: ``A``, or ``Aᵀ`` for reverse mode)
to its configuration and gives :meth:`System.operators`: the matrix on the device and its
AMG hierarchy, whose structure comes from the setup cache and whose numbers are computed
from concrete values once (kept for ``reuse_setup``) or inside the caller's trace.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Callable, Hashable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _blocks, _cache, _device_setup, _matrix_free
from ._compiler_options import COMPILER_OPTIONS, jit, staging
from ._config import AMGConfig, RelaxationConfig, SolverConfig
from ._csr import CsrMatrix, as_csr
from ._csr_arrays import CsrArrays, CsrStructure, PatternArrays
from ._default_method import falls_back
from ._device_setup import DeviceStructure
from ._hierarchy import (Hierarchy, HierarchyStructure, StructureArrays,
                         annihilates_constants_on_host, build_structure, in_host_memory,
                         numeric_setup, padded_hierarchy, padded_numeric_setup, sharing_arrays,
                         with_padded_finest)
from ._multicolor import (MULTICOLOR_SMOOTHERS, MulticolorArrays, multicolor_ordering,
                          multicolor_padding, padded_ordering)
from ._padded_setup import PROGRAMS as PADDED_SETUP_PROGRAMS
from ._placement import placed_like
from ._size_classes import (color_shape, pad_pattern, pad_rows, padded_nonzeros, size_class,
                            true_csr)
from ._relaxation import RelaxationData, relaxation_data, stored_diagonal
from ._status import FailureReason
from ._structure_key import digest_key, key_digest, values_digest, values_key


def checked_inputs(
    caller: str, A: Any, b: Any, x0: Any, near_nullspace: Any, check: bool,
    *, values_checked_by_solve: bool = False,
) -> tuple[CsrMatrix, jax.Array, jax.Array | None, jax.Array | None]:
    """``A`` as a square CsrMatrix and ``b``, ``x0``, ``near_nullspace`` in its dtype, ``b``
    and ``x0`` on ``A``'s device where they were elsewhere (a solve returns its ``x`` by
    :func:`placed_as_given`, which undoes that move).

    With ``check``, concrete arrays with NaN or Inf are refused here, except that with
    ``values_checked_by_solve`` those of ``A``, ``b`` and ``x0`` are left to the solve: its
    compiled program tests them anyway (for traced values too) and stops before its first
    iteration when they fail, and :func:`raise_on_invalid_inputs` then says why.  Testing
    them here as well would cost a second pass over ``A`` and a wait for the device (two
    on a GPU, 2 ms at two million rows) in every solve.
    """
    if _matrix_free.is_operator(A):  # x ↦ A x: materialized by colored probing
        b = jnp.asarray(b)
        A = _matrix_free.operator_matrix(
            caller, A, b.shape[0] if b.ndim >= 1 else None,
            b.dtype if jnp.issubdtype(b.dtype, jnp.inexact) else None)
    matrix = as_csr(A, check=check)
    n = matrix.shape[0]
    if matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{caller}: A must be square, got shape {matrix.shape}.")
    b = jnp.asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != n or b.shape[1:] == (0,):
        raise ValueError(f"{caller}: b must have shape ({n},) or ({n}, k), k >= 1, to match A"
                         f" {matrix.shape}, got {b.shape}.")
    if x0 is not None:
        x0 = jnp.asarray(x0)
        if x0.shape != b.shape:
            raise ValueError(f"{caller}: x0 must have b's shape {b.shape}, got {x0.shape}.")
    with jax.numpy_dtype_promotion("standard"):
        dtype = jnp.result_type(matrix.values, b, *([] if x0 is None else [x0]))
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    if jnp.finfo(dtype).bits < 32:
        raise TypeError(
            f"{caller}: A, b and x0 promote to {jnp.dtype(dtype).name}, which the solvers do"
            " not compute in (float32, float64, complex64, complex128); convert A's values,"
            " e.g. A.with_values(A.values.astype(jnp.float32)).")
    matrix = matrix.with_values(matrix.values.astype(dtype))
    b, x0 = _on_device_of(matrix.values, b.astype(dtype),
                          None if x0 is None else x0.astype(dtype))
    if near_nullspace is not None:
        near_nullspace = jnp.asarray(near_nullspace)
        if near_nullspace.ndim == 1:
            near_nullspace = near_nullspace[:, None]
        if near_nullspace.ndim != 2 or near_nullspace.shape[0] != n:
            raise ValueError(f"{caller}: near_nullspace must have shape ({n}, k), got"
                             f" {near_nullspace.shape}.")
        near_nullspace = near_nullspace.astype(dtype)
    if check:
        checked = {"near_nullspace": near_nullspace}
        if not values_checked_by_solve:
            checked.update(A=matrix.values, b=b, x0=x0)
        check_finite(caller, checked)
    return matrix, b, x0, near_nullspace


def _on_device_of(values: jax.Array, *arrays: jax.Array | None) -> list[jax.Array | None]:
    """``arrays`` moved to the device of ``values``, a concrete array on one device, where
    they are concrete and lie elsewhere (another device, or split over several: e.g. a
    right-hand side sharded over a mesh beside a matrix on one device). The solve runs
    where ``A`` is, which is where its hierarchy is set up; JAX would refuse arrays
    committed to different devices in one program ("incompatible devices")."""
    if not is_concrete(values) or len(devices := values.devices()) != 1:
        return list(arrays)
    return [jax.device_put(array, values.sharding)
            if is_concrete(array) and array.devices() != devices else array
            for array in arrays]


def given_placement(b: Any) -> jax.sharding.Sharding | None:
    """Where a concrete ``b`` lies, for :func:`placed_as_given`; None for a traced ``b`` or
    one not yet a JAX array (its solution stays where the solve ran)."""
    return b.sharding if isinstance(b, jax.Array) and is_concrete(b) else None


def placed_as_given(x: jax.Array, placement: jax.sharding.Sharding | None) -> jax.Array:
    """The solution ``x`` put back where ``b`` was given (:func:`given_placement`), undoing
    :func:`checked_inputs`' move of ``b`` to ``A``'s device: a solve returns ``x`` placed
    as its right-hand side, so that ``x`` and ``b`` combine as they came (e.g. a residual
    of ``b`` split over a mesh)."""
    if placement is not None and is_concrete(x) and x.sharding.device_set != placement.device_set:
        return jax.device_put(x, placement)
    return x


def raise_on_invalid_inputs(caller: str, reasons: jax.Array, matrix: CsrMatrix,
                            b: jax.Array, x0: jax.Array | None, config: SolverConfig) -> None:
    """Raises what :func:`checked_inputs` and the setup would have raised, after a solve
    with concrete inputs whose ``reasons`` (its ``info.failure_reason``) say that the
    program refused them (NaN or Inf in ``A``, ``b`` or ``x0``; a zero diagonal).

    The solve's program found the fault without a round trip; here, on this rare path,
    the inputs are examined again to name it.
    """
    if _INPUT_FAULTS.isdisjoint(np.asarray(reasons).ravel().tolist()):
        return
    check_finite(caller, {"A": matrix.values, "b": b, "x0": x0})
    check_diagonal(caller, matrix._pattern, matrix.values, config)


# The failure reasons of inputs a checked solve refuses (FailureReason's values).
_INPUT_FAULTS = frozenset({FailureReason.NONFINITE_INPUT, FailureReason.NONFINITE_MATRIX,
                           FailureReason.ZERO_DIAGONAL})


def check_finite(caller: str, arrays: dict[str, jax.Array | np.ndarray | None]) -> None:
    """Raises if a concrete array among ``arrays`` holds NaN or Inf.

    Counted on the device, so that a large concrete matrix is not copied to the host, by
    one compiled call whose counts come back in one transfer: each eager operation and each
    wait for the device is host time that every solve would pay (on a GPU, a launch and a
    round trip each).  Eagerly, also while a caller's jit traces (the arrays are then
    constants of it).  Arrays on different devices are counted device by device; arrays in
    host memory (a setup's NumPy copy, a JAX array on the CPU) by NumPy, where no program
    is compiled for their size (a new pattern's).
    """
    concrete = {name: a for name, a in arrays.items() if is_concrete(a)}
    groups: dict[Any, list[str]] = {}
    counts: dict[str, int] = {}
    for name, array in concrete.items():
        if in_host_memory(array):
            counts[name] = int(np.count_nonzero(~np.isfinite(np.asarray(array))))
        else:
            groups.setdefault(array.sharding, []).append(name)
    for names in groups.values():
        with jax.ensure_compile_time_eval():
            counts.update(zip(names, np.asarray(
                _nonfinite_counts(*(concrete[name] for name in names))).tolist()))
    for name in concrete:
        if counts[name]:
            raise ValueError(f"{caller}: {name} holds NaN or Inf ({counts[name]} entries).")


@jit  # eager: under jax.ensure_compile_time_eval
def _nonfinite_counts(*arrays: jax.Array) -> jax.Array:
    return jnp.stack([jnp.count_nonzero(~jnp.isfinite(a)) for a in arrays])


def is_concrete(array: Any) -> bool:
    """Whether ``array`` is a concrete (not traced) array; False for None."""
    return array is not None and not isinstance(array, jax.core.Tracer)


@dataclasses.dataclass
class System:
    """A matrix's pattern and its setup, for one orientation (``A``, or ``Aᵀ``).

    ``values_from`` maps the service's operator (``A``'s values) to this orientation's
    values: the identity for ``A``, a permutation for ``Aᵀ``.
    """

    pattern: CsrStructure
    csr_pattern: Any  # the CsrMatrix's own pattern, whose transpose it caches
    values_from: np.ndarray | None
    concrete_values: jax.Array | None
    config: SolverConfig
    near_nullspace: jax.Array | None
    reuse_setup: bool
    check: bool
    pattern_key: str
    # The solve's program checks A's values, but the setup's host work on them comes first.
    check_before_setup: bool = False
    # A checked solve of concrete values, which reads its status back: the values' key can
    # come back with it (see `setup`).
    key_with_status: bool = False
    # The cache entry taken before the values' key was read back (see `setup`), and the
    # key once read (a second setup then takes the structure built for it).
    _unconfirmed: _Unconfirmed | None = dataclasses.field(default=None, repr=False)
    _known_key: tuple[Any, str] | None = dataclasses.field(default=None, repr=False)
    # The values padded to the finest size class, and those values (see `padded`).
    _padded: tuple[jax.Array, jax.Array] | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def for_matrix(cls, matrix: CsrMatrix, config: SolverConfig, near_nullspace: Any,
                   reuse_setup: bool, check: bool, *,
                   values_checked_by_solve: bool = False,
                   key_with_status: bool = False) -> System:
        """The system of ``matrix``; with ``check``, concrete values with a zero (or
        unstored) diagonal entry that ``config`` divides by are refused now, or, with
        ``values_checked_by_solve`` (see :func:`checked_inputs`), with NaN or Inf too
        but only before a new setup's host work.  ``key_with_status``: the solve reads
        its status back and calls :meth:`confirm` (see :attr:`setup`)."""
        concrete = is_concrete(matrix.values) and (
            # a setup from concrete values must not capture a tracer
            near_nullspace is None or is_concrete(near_nullspace))
        system = cls(
            pattern=CsrStructure(matrix.indptr, matrix.indices, matrix.shape[1]),
            csr_pattern=matrix._pattern, values_from=None, concrete_values=matrix.values if concrete else None,
            config=config, near_nullspace=near_nullspace, reuse_setup=reuse_setup,
            check=check, pattern_key=matrix.pattern_key,
            check_before_setup=check and concrete and values_checked_by_solve,
            key_with_status=key_with_status and concrete,
        )
        if check and concrete and not values_checked_by_solve:
            check_diagonal("solve", matrix._pattern, matrix.values, config)
        return system

    @functools.cached_property
    def transposed(self) -> System:
        """``Aᵀ``'s system; built on first use (when reverse mode traces its solve)."""
        pattern, permutation = self.csr_pattern.transposed  # cached per pattern
        with jax.ensure_compile_time_eval():  # concrete, even while reverse mode traces
            values = (None if self.concrete_values is None
                      else self.concrete_values[permutation])
        symmetric = self.csr_pattern.structurally_symmetric
        # Aᵀ of a structurally symmetric pattern has A's: A's pattern objects serve it, with
        # what they cache (the transpose permutation on the device).  Traced values take the
        # structure most recently used on their pattern (`setup`), there A's: no second host
        # setup, no second structure kept.  Concrete values of Aᵀ get one of their own,
        # under a key of its own, so that A's `reuse_setup` never takes Aᵀ's numbers.
        shared = values is None and symmetric
        return dataclasses.replace(
            self, pattern=self.pattern if symmetric
            else CsrStructure(pattern.indptr, pattern.indices, pattern.shape[1]),
            csr_pattern=self.csr_pattern if symmetric else pattern, values_from=permutation,
            concrete_values=values,
            # The near-null space of Aᵀ is not known; the constant serves.
            near_nullspace=None, pattern_key=self.pattern_key if shared
            else f"{self.pattern_key}ᵀ", _padded=None,
            key_with_status=False, _unconfirmed=None, _known_key=None,
        )

    @functools.cached_property
    def setup(self) -> tuple[HierarchyStructure | None, Hierarchy | None]:
        """The AMG structure, and numbers already computed for these values, if any.

        Concrete values get the structure built for them, or for values with the same key
        (:mod:`._structure_key`: the same strong couplings); traced values, and concrete
        ones with ``reuse_setup`` or a nonzero ``structure_reuse_levels``, the structure
        most recently used on the pattern (built from the pattern alone when there is
        none).  Computed on first use, which for
        ``Aᵀ`` is while reverse mode traces its solve: the work on concrete values runs
        eagerly even then.

        Values on a device (a GPU) of a solve that reads its status back
        (``key_with_status``) take the structure most recently used on the pattern before
        their key is known: their digest is computed on the device and compared there with
        the structure's by the solve's program (:attr:`SetupState.key_check`), which does
        no iteration when they differ, and comes back with the status.  :meth:`confirm`
        then keeps the numbers, or has the solve run again with the structure of the
        values' key.  The same values, or the next Newton step's, thus cost no wait for
        the device before the numeric setup and the solve: reading the key back first
        costs one (and on a GPU the device idles while the host dispatches after it).
        """
        amg = amg_config(self.config)
        if amg is None:
            return None, None
        if amg.algorithm == "CLASSICAL" and self.near_nullspace is not None:
            raise ValueError(
                "solve: near_nullspace is smoothed aggregation's; classical AMG has none (its"
                " interpolation reproduces constants). For rigid-body modes set the AMG's"
                " algorithm to 'AGGREGATION' with jaxsolve_smoothed_aggregation: 1.")
        concrete = self.concrete_values
        if amg.setup_location == "AUTO":  # the cache keeps it under the location chosen
            amg = dataclasses.replace(
                amg, setup_location="DEVICE" if self._auto_on_device(amg) else "HOST")
        if amg.setup_location == "DEVICE":
            if self.near_nullspace is not None:
                raise ValueError("solve: near_nullspace is smoothed aggregation's, which"
                                 " setup_location 'DEVICE' does not set up; use 'HOST'.")

            def check(padded: jax.Array) -> None:
                # Before a structure is built, as the host's: no NaN or 0 pivots (on a
                # cached one, the solve checks). On the values padded to their size class:
                # a new pattern's nonzeros compile no program to check them.
                if self.check_before_setup:
                    check_finite("solve", {"A": padded})
                    check_diagonal("solve", self.csr_pattern, padded, self.config)

            taken = self._take_latest(
                (self.pattern_key, amg, 1), amg, lambda structure: structure.finest,
                lambda structure, padded: _device_setup.concrete_numbers(
                    structure, concrete, lambda values, nnz: padded),
                _device_setup.values_digest,
                lambda digest: _device_setup.key_of_digest(digest, concrete.devices()))
            if taken is not None:
                return taken
            return _device_setup.cached_setup(
                self.pattern, self.pattern_key, concrete, amg, self.reuse_setup, self.padded,
                check, self._known_key)
        k = _blocks.near_nullspace_columns(self.near_nullspace, amg)
        # the values' key, computed once for this call (or read back with a status)
        keys: list[str] = [] if self._known_key is None else [self._known_key[1]]

        def key_of_values(structure: HierarchyStructure) -> str:
            if not keys:  # of the values padded to the structure's finest size class
                keys.append(values_key(structure, self.padded(concrete,
                                                              _finest_nonzeros(structure))))
            return keys[0]

        def build() -> _cache.CacheEntry:
            values = None if concrete is None else np.asarray(concrete)
            # Eagerly, also while reverse mode traces (Aᵀ's setup): the checks read the
            # values and the index arrays go to the device now.
            with jax.ensure_compile_time_eval():
                if values is not None and self.check_before_setup:  # no NaN or 0 pivots
                    # on the host copy: no program compiled for the pattern's size
                    check_finite("solve", {"A": values})
                    check_diagonal("solve", self.csr_pattern, values, self.config)
                structure = build_structure(self.pattern, values, k, amg, self.pattern_key,
                                            pad_finest=True)
                if values is not None:
                    self._pad_on_host(concrete, values, _finest_nonzeros(structure))
            return _cache.CacheEntry(structure, numbers=None, built_for=None if values is None
                                     else key_of_values(structure))

        # Concrete values get a structure of their own (AmgX's full setup); traced ones,
        # reuse_setup and AmgX's structure_reuse_levels, the pattern's latest.
        own_structure = (concrete is not None and not self.reuse_setup
                         and amg.structure_reuse_levels == 0)
        cache_key = (self.pattern_key, amg, k)
        taken = self._take_latest(
            cache_key, amg, _finest_arrays,
            lambda structure, padded: numeric_setup_now(structure, concrete,
                                                        self.near_nullspace, padded=padded),
            values_digest, digest_key)
        if taken is not None:
            return taken
        entry = _cache.setup_for(cache_key, build,
                                 (lambda entry: key_of_values(entry.structure))
                                 if own_structure else None)
        if concrete is None or (self.reuse_setup and entry.numbers is not None):
            return entry.structure, entry.numbers if self.reuse_setup else None
        entry.numbers = numeric_setup_now(
            entry.structure, concrete, self.near_nullspace,
            padded=self.padded(concrete, _finest_nonzeros(entry.structure)))
        return entry.structure, entry.numbers

    def _take_latest(self, cache_key: Any, amg: AMGConfig,
                     finest: Callable[[Any], CsrArrays],
                     numbers_of: Callable[[Any, jax.Array], Hierarchy],
                     digest_of: Callable[[Any, jax.Array], jax.Array],
                     key_of_digest: Callable[[jax.Array], str]
                     ) -> tuple[Any, Hierarchy] | None:
        """The structure of ``cache_key`` most recently used and the numbers of the concrete
        values on it, taken before their key is known (see :attr:`setup`), or None where
        not taken: a solve that reads no status back, ``reuse_setup``, AmgX's
        ``structure_reuse_levels``, values in host memory (keyed with no wait) or on
        other devices than the structure, or no structure built from values yet.

        ``finest(structure)``: its finest matrix (padded); ``numbers_of(structure,
        padded)`` and ``digest_of(structure, padded)``: the numbers and the values'
        digest from the values padded to the finest matrix's nonzeros;
        ``key_of_digest(digest)``: the values' key (as the cache keys their structure)
        from that digest, read back."""
        values = self.concrete_values
        if (not self.key_with_status or self._known_key is not None or self.reuse_setup
                or amg.structure_reuse_levels != 0 or in_host_memory(values)):
            return None
        latest = _cache.latest_entry(cache_key)
        if (latest is None or latest.built_for is None or len(values.devices()) != 1
                or finest(latest.structure).indices.devices() != values.devices()):
            return None
        structure = latest.structure
        padded = self.padded(values, finest(structure).indices.shape[0])
        numbers = numbers_of(structure, padded)
        # Both digests committed to the device, as a passing check's are (a program's
        # arguments committed and uncommitted compile apart).
        digest = jax.device_put(digest_of(structure, padded), values.sharding)
        self._unconfirmed = _Unconfirmed(cache_key, latest, numbers, (
            digest, _built_for_digest(latest, values)), key_of_digest)
        return structure, numbers

    def confirm(self, matched: Any) -> bool:
        """Whether a solve with :attr:`setup`'s structure stands: always, unless it was
        taken before the values' key was known and the solve's program found the values'
        key another (``matched``: :attr:`SetupState.key_check`'s outcome, read back with
        the status).  Then :attr:`setup` and :meth:`state` give the structure of the
        values' key when called again, for the solve to run again.  A confirmed structure
        counts as a hit of the setup cache and keeps the numbers (for ``reuse_setup``)."""
        unconfirmed, self._unconfirmed = self._unconfirmed, None
        if unconfirmed is None:
            return True
        if bool(matched):
            unconfirmed.entry.numbers = unconfirmed.numbers
            _cache.confirm_entry(unconfirmed.cache_key, unconfirmed.entry)
            return True
        _cache.latest_missed(unconfirmed.cache_key)
        # a wait for the device, on this rare path
        self._known_key = (unconfirmed.entry.structure,
                           unconfirmed.key_of_digest(unconfirmed.key_check[0]))
        del self.__dict__["setup"]
        return False

    def _auto_on_device(self, amg: AMGConfig) -> bool:
        """Whether ``setup_location`` ``"AUTO"`` sets up on the device: where the concrete
        values lie on one GPU (traced ones: where JAX's default backend is a GPU), the
        configuration is one the device setup sets up and no near-null space is given."""
        if amg.not_set_up_on_device() or self.near_nullspace is not None:
            return False
        values = self.concrete_values
        if not isinstance(values, jax.Array):  # traced
            return jax.default_backend() == "gpu"
        devices = values.devices()
        return len(devices) == 1 and next(iter(devices)).platform == "gpu"

    @functools.cached_property
    def ordering(self) -> MulticolorArrays | None:
        """The multicolor ordering of the pattern, for a multicolor relaxation used as the
        solver or preconditioner (an AMG smoother's is in the hierarchy's structure).

        Host work on the pattern, which is concrete even while a caller's jit traces the
        values; kept in the setup cache, so it is done once per pattern.
        """
        relaxation = relaxation_config(self.config)
        if relaxation is None or relaxation.solver not in MULTICOLOR_SMOOTHERS:
            return None

        def build() -> _cache.CacheEntry:
            ordering = multicolor_ordering(self.pattern, relaxation.solver == "MULTICOLOR_DILU")
            # padded as the matrix's nonzeros are, for a pattern of the same rows
            shape = color_shape(("relaxation", ordering.n_rows), ordering)
            return _cache.CacheEntry(
                jax.device_put(padded_ordering(ordering, shape, ordering.n_rows)), numbers=None)

        with jax.ensure_compile_time_eval():  # the index arrays go to the device now
            return _cache.setup_for((self.pattern_key, relaxation.solver), build).structure

    @functools.cached_property
    def pattern_arrays(self) -> PatternArrays:
        """The pattern on the device, its nonzeros padded to a size class
        (:func:`._size_classes.padded_nonzeros`: a pattern of the same rows runs the
        solve compiled for another), and its diagonal entries' positions, for a solve
        without AMG (a hierarchy's structure holds its own).

        Kept in the setup cache, so that they are found and sent once per pattern, not at
        every solve (at two million rows: 60 MiB, and a search of every row).
        """

        def build() -> _cache.CacheEntry:
            pattern = self.pattern
            padded = pad_pattern(pattern, pattern.n_rows,
                                 padded_nonzeros(pattern.n_rows, pattern.nnz))
            # The values are a placeholder, replaced in use.
            return _cache.CacheEntry(PatternArrays(
                padded.on_device(jnp.zeros(0, jnp.int32)),
                jax.device_put(pattern.diagonal_positions()), pattern.nnz), numbers=None)

        with jax.ensure_compile_time_eval():  # the index arrays go to the device now
            return _cache.setup_for((self.pattern_key, "pattern"), build).structure

    def state(self) -> SetupState:
        """The arrays a solve reads besides the values, to be passed in as arguments.

        Passed as (part of) a jit argument rather than closed over, they stay arguments of
        the compiled program instead of constants baked into it (which at 2 million rows
        are gigabytes of program and minutes of compilation).
        """
        structure, numbers = self.setup
        if structure is None:
            matrix, diagonal, _ = self.pattern_arrays
            return SetupState(matrix=matrix, diagonal=diagonal, numbers=None, arrays=None,
                              near_nullspace=None, ordering=self.ordering)
        key_check = (self._unconfirmed.key_check if self._unconfirmed is not None
                     else _passing_key_check(self.concrete_values)
                     if self.key_with_status else None)
        # Concrete values were tested on the host (_default_method.method_for).
        transpose_permutation = (self.csr_pattern.transpose_permutation_on_device
                                 if falls_back(self.config) and self.concrete_values is None
                                 else None)
        if isinstance(structure, DeviceStructure):
            return SetupState(matrix=structure.finest, diagonal=structure.solve_diagonal,
                              numbers=numbers, arrays=None if numbers is not None
                              else structure.arrays, near_nullspace=None, key_check=key_check,
                              transpose_permutation=transpose_permutation)
        arrays = structure.arrays
        return SetupState(
            matrix=_finest_arrays(structure),
            diagonal=arrays.levels[0].diagonal if arrays.levels else arrays.coarsest_diagonal,
            numbers=numbers, arrays=None if numbers is not None else arrays,
            near_nullspace=self.near_nullspace, key_check=key_check,
            transpose_permutation=transpose_permutation)

    def operators(self, values: jax.Array, state: SetupState
                  ) -> tuple[CsrArrays, Hierarchy | RelaxationData | None]:
        """The matrix with ``values``, and the numbers of its preconditioner's setup: the
        AMG hierarchy, or the relaxation's data (None for neither).

        The hierarchy's numbers are those of the setup with concrete values when there is
        one, else computed here from ``values`` (inside the caller's trace), as a
        relaxation's always are.  Numbers of a setup with concrete values are padded to
        their structure's size classes, the finest level too (:mod:`._size_classes`):
        then so is the matrix, ``values`` padded with zeros here, and a solve with them
        takes its vectors padded (:func:`padded_solve`).  A hierarchy's numbers computed
        here, and the matrix with them, have the true sizes; without AMG the matrix has
        its nonzeros padded (:attr:`pattern_arrays`) and its true rows.
        """
        structure, _ = self.setup
        relaxation = relaxation_config(self.config)
        if relaxation is not None:
            matrix = state.matrix._replace(
                values=self.padded(values, state.matrix.indices.shape[0]))
            return matrix, _relaxation_data(matrix, state.diagonal, relaxation, state.ordering)
        if structure is None or state.numbers is not None:
            nnz = state.matrix.indices.shape[0]
            numbers = state.numbers
            if isinstance(numbers, Hierarchy):  # the kept finest values: A's own, padded
                numbers = with_padded_finest(numbers, self.padded)
            return state.matrix._replace(values=self.padded(values, nnz)), numbers
        if isinstance(structure, DeviceStructure):  # padded, as a concrete setup's numbers
            values = self.padded(values, state.matrix.indices.shape[0])
            return (state.matrix._replace(values=values),
                    _traced_device_setup(structure.shape, state.arrays, values))
        return (self.true_matrix(state, values),
                _traced_numeric_setup(structure)(state.arrays, values, state.near_nullspace))

    def padded(self, values: jax.Array, nnz: int) -> jax.Array:
        """``values`` padded with zeros to ``nnz`` entries (the finest level's of the
        structure's size class): concrete ones once for the setup and the solve, the
        matrix's and the kept hierarchy's finest operator's where they are the same."""
        if values.shape[0] == nnz:
            return values
        if is_concrete(values):  # the setup's and the solve's: padded once
            if (self._padded is not None and self._padded[0] is values
                    and self._padded[1].shape[0] == nnz):
                return self._padded[1]
            with jax.ensure_compile_time_eval():  # concrete, also while a caller's jit traces
                self._padded = (values, resized_rows(values, nnz))
            return self._padded[1]
        return resized_rows(values, nnz)

    def _pad_on_host(self, values: jax.Array, host: np.ndarray, nnz: int) -> None:
        """Pads ``values`` (on one device; ``host``: their copy on the host) to ``nnz``
        entries on the host, for :meth:`padded`: a new pattern's first setup, which copies
        the values to the host anyway, compiles no program for their size to pad them."""
        if host.shape[0] == nnz or not isinstance(values, jax.Array) or len(
                values.devices()) != 1:
            return
        self._padded = (values, _resized_on_host(host, nnz, values))

    def initial_residual(self, state: SetupState, values: jax.Array, b: jax.Array,
                         x0: jax.Array) -> jax.Array:
        """``b − A x0`` (``values``: ``A``'s), by ``state``'s matrix padded to its size
        classes, with the values padded as the solve takes them (:meth:`padded`): one
        program for every pattern of a size class and rows, where the true matrix's cut
        and product compiled five small ones for each new pattern's nonzeros."""
        matrix = state.matrix._replace(values=self.padded(values, state.matrix.indices.shape[0]))
        return _initial_residual(matrix, b, x0)

    def true_matrix(self, state: SetupState, values: jax.Array) -> CsrArrays:
        """``state``'s matrix with ``values``, cut to the pattern's own sizes."""
        matrix = state.matrix._replace(values=values)
        if matrix.indices.shape[0] == self.pattern.nnz and matrix.n_rows == self.pattern.n_rows:
            return matrix
        return true_csr(matrix, self.pattern)


@jit
def _initial_residual(matrix: CsrArrays, b: jax.Array, x0: jax.Array) -> jax.Array:
    """``b − A x0`` for ``A`` padded with empty rows (``x0`` padded with zero rows to them)."""
    return b - matrix.matvec(pad_rows(x0, matrix.n_rows))[:b.shape[0]]


def padded_solve(solve_columns: Any, config: SolverConfig, operators: tuple, diagonal: jax.Array,
                 rhs: jax.Array, *rest: Any) -> tuple:
    """``solve_columns(config, matrix, numbers, diagonal, rhs, *rest)`` for ``operators``
    (``(matrix, numbers)`` of :meth:`System.operators`): ``rhs`` padded with zero rows to
    the matrix's rows, ``x`` (the first result) cut back to ``rhs``'s.

    The padding rows of a padded matrix are empty, its hierarchy's padding rows are
    decoupled and unscaled: with a zero right-hand side there, every iterate, residual
    and search direction stays zero on them, and the norms and inner products only add
    zeros (:mod:`._size_classes`). ``diagonal``: the positions of the diagonal entries
    of the matrix's rows, a padding row's :data:`~._size_classes.PADDING_DIAGONAL` (or a
    true row's position), which the solve's check passes over.
    """
    matrix, numbers = operators
    n, rows = rhs.shape[0], matrix.n_rows
    if rows == n:
        if diagonal.shape[0] != rows:  # true numbers of a padded structure
            diagonal = diagonal[:rows]
        return solve_columns(config, matrix, numbers, diagonal, rhs, *rest)
    x, *results = solve_columns(config, matrix, numbers, diagonal, resized_rows(rhs, rows),
                                *rest)
    return (resized_rows(x, n), *results)


def resized_rows(x: jax.Array, rows: int) -> jax.Array:
    """``x`` padded with zero rows, or cut, to ``rows`` rows (jit-able).

    A concrete array on a CPU, outside any trace, is resized on the host (one copy, as a
    compiled pad would make): no program is compiled for its size, so that a new pattern
    of a size class compiles nothing.  On a GPU it is resized by one program compiled per
    size (:func:`_resized`), which takes nothing from the host: ``jnp.pad`` or a slice
    called eagerly would send its pad value or start index there first, a transfer each.
    """
    if x.shape[0] == rows:
        return x
    if isinstance(x, jax.Array) and is_concrete(x) and not staging():
        if len(x.devices()) == 1 and next(iter(x.devices())).platform == "cpu":
            return _resized_on_host(np.asarray(x), rows, x)
        return _resized(x, rows)
    return pad_rows(x, rows) if rows > x.shape[0] else x[:rows]


@functools.partial(jax.jit, static_argnums=1)
def _resized(x: jax.Array, rows: int) -> jax.Array:
    return pad_rows(x, rows) if rows > x.shape[0] else x[:rows]


def _resized_on_host(host: np.ndarray, rows: int, like: jax.Array) -> jax.Array:
    """``host`` (the copy of ``like``, on one device) padded with zero rows, or cut, to
    ``rows`` rows, placed as ``like`` is (:mod:`._placement`), as :func:`_resized` would
    give it: placed otherwise, the values padded here by a pattern's first setup and those
    padded on the device by its next would compile the whole solve twice."""
    resized = np.zeros((rows, *host.shape[1:]), host.dtype)
    kept = min(rows, host.shape[0])
    resized[:kept] = host[:kept]
    return placed_like(resized, like)


def _finest_nonzeros(structure: HierarchyStructure) -> int:
    """The finest operator's nonzeros in ``structure``'s size class."""
    return (structure.shape.levels[0].a_nnz if structure.levels
            else structure.shape.coarsest[1])


class SetupState(NamedTuple):
    """What a solve reads besides the values (see :meth:`System.state`): the matrix's
    index arrays and the positions of its diagonal entries among its values, and the
    hierarchy's numbers or, to compute them, its index arrays (or a multicolor relaxation's
    ordering).

    ``key_check``: for a structure taken before the values' key was known
    (:attr:`System.setup`), the digests on the device of the values and of the values the
    structure was built for, ``(2,)`` uint32 each, committed to the device: the solve runs
    only if they are equal. A solve that reads its status back gets two equal digests
    otherwise, so that its program is the same either way: the first solve on a pattern
    (set up for its values' key) and the next ones (on a GPU, taken before theirs is
    known) run one compiled program, where a missing check made them two, the whole solve
    compiled twice.

    ``transpose_permutation``: for traced values solved by the default's PCG, the position
    of each ``a_ji`` among the values (the CSR pattern's ``transpose_permutation_on_device``),
    which its program's Hermitian test reads (:mod:`._default_method`)."""

    matrix: CsrArrays
    diagonal: jax.Array
    numbers: Hierarchy | None
    arrays: StructureArrays | None
    near_nullspace: jax.Array | None
    ordering: MulticolorArrays | None = None
    key_check: tuple[jax.Array, jax.Array] | None = None
    transpose_permutation: jax.Array | None = None


class _Unconfirmed(NamedTuple):
    """A cache entry taken for concrete values before their key was known, the numbers
    set up on it, its :attr:`SetupState.key_check`, and how the values' key follows from
    their digest (the check's first array)."""

    cache_key: Any
    entry: _cache.CacheEntry
    numbers: Hierarchy
    key_check: tuple[jax.Array, jax.Array]
    key_of_digest: Callable[[jax.Array], str]


def _finest_arrays(structure: HierarchyStructure) -> CsrArrays:
    """``structure``'s finest matrix on the device (padded to its size class)."""
    arrays = structure.arrays
    return arrays.levels[0].a if arrays.levels else arrays.coarsest


def _passing_key_check(values: Any) -> tuple[jax.Array, jax.Array] | None:
    """A :attr:`SetupState.key_check` that passes, on the device of concrete ``values``
    (None for values on no single device, whose structure is never taken unkeyed)."""
    if not isinstance(values, jax.Array) or len(values.devices()) != 1:
        return None
    return _equal_digests(next(iter(values.devices())))


@functools.cache
def _equal_digests(device: jax.Device) -> tuple[jax.Array, jax.Array]:
    with jax.ensure_compile_time_eval():  # concrete, also while a caller's jit traces
        digest = jax.device_put(np.zeros(2, np.uint32), device)
    return digest, digest


def _built_for_digest(entry: _cache.CacheEntry, values: jax.Array) -> jax.Array:
    """``entry.built_for``'s digest on the device of ``values``, sent once per entry."""
    if entry.built_for_digest is None or entry.built_for_digest.devices() != values.devices():
        with jax.ensure_compile_time_eval():
            entry.built_for_digest = jax.device_put(key_digest(entry.built_for),
                                                    values.sharding)
    return entry.built_for_digest


def _traced_numeric_setup(structure: HierarchyStructure) -> Callable[..., Hierarchy]:
    """``numeric_setup(structure, arrays, values, near_nullspace)`` for traced values, as
    one jitted function kept on ``structure``.

    Called eagerly under ``jax.grad`` or ``jax.jvp`` without ``jax.jit``, the
    setup's operations ran one by one, and the loops and conditionals among them (the
    power iteration's, the coarsest inverse's) were traced and compiled anew at every
    call: at 12³ a gradient of a solve took 1.0-1.3 s, 4 programs compiled, on every call
    after its first (which compiled 261 small ones, 14 s). Jitted, the setup is one
    primitive for them, traced once.  The function holds the structure weakly: kept on
    it, it lives as long as the setup cache keeps the structure."""
    jitted = structure.__dict__.get("_traced_numeric_setup")
    if jitted is None:
        held = weakref.ref(structure)

        def setup(arrays: StructureArrays, values: jax.Array,
                  near_nullspace: jax.Array | None) -> Hierarchy:
            return numeric_setup(held(), arrays, values, near_nullspace)

        jitted = structure.__dict__.setdefault("_traced_numeric_setup", jit(setup))
    return jitted


# A device structure's numeric setup for traced values, jitted as _traced_numeric_setup is
# (its static argument, the structure's shape, is the same for every structure of a class).
_traced_device_setup = jit(_device_setup.numeric_setup, static_argnums=0)


@functools.partial(jax.jit, static_argnums=2)
def _relaxation_data(matrix: CsrArrays, diagonal: jax.Array, config: RelaxationConfig,
                     ordering: MulticolorArrays | None) -> RelaxationData:
    """`relaxation_data` of ``matrix`` (its nonzeros padded to a size class), whose
    diagonal entries lie at ``diagonal`` among its values, as one compiled program, cached
    per config: a solve called outside ``jax.jit`` computes it eagerly, where the estimated
    damping's power iteration would otherwise be traced and compiled again on every call,
    and the diagonal's gather once per pattern's nonzeros."""
    return relaxation_data(matrix, stored_diagonal(matrix.values, diagonal), config, ordering,
                           block_dim=config.block_dim)


@functools.partial(jax.jit, static_argnums=(0, 4))
def _numeric_setup(structure, arrays, values, near_nullspace, singular):
    # Padded to the structure's size classes: a solve with these numbers compiles once for
    # every pattern whose levels fall into the same classes (see _size_classes.py). The
    # values may come padded to the finest level's class: their true part is read.
    values = values[:(structure.levels[0].a if structure.levels else structure.coarsest).nnz]
    return padded_hierarchy(numeric_setup(structure, arrays, values, near_nullspace,
                                          singular),
                            structure.shape, multicolor_paddings(structure))


def multicolor_paddings(structure: HierarchyStructure) -> tuple | None:
    """Per level, then for the coarsest, how its multicolor data pad to the structure's
    shape (:func:`._multicolor.multicolor_padding`; host arrays), or None where nothing
    is padded."""
    shape = structure.shape
    if not shape.colors:
        return None
    return (*(None if colors is None else multicolor_padding(level.ordering, colors, sizes.rows)
              for level, sizes, colors in zip(structure.levels, shape.levels, shape.colors,
                                              strict=True)), None)


def numeric_setup_now(structure: HierarchyStructure, values: jax.Array,
                      near_nullspace: jax.Array | None, *,
                      padded: jax.Array | None = None) -> Hierarchy:
    """The numbers for concrete ``values``, computed now, even while a caller's jit traces.

    A compiled executable runs when it is called, inside a trace too. Its own trace must
    not run under `jax.ensure_compile_time_eval`: there every value that does not depend
    on the inputs (the index ranges of the sparse products, the power iteration's start)
    would be computed eagerly and baked into the program as a constant, gigabytes of them
    at a million rows.

    The numbers come padded to the structure's size classes (:mod:`._size_classes`), and
    so are ``values`` here (unless ``padded`` gives them so): a numeric setup of a size
    class (:func:`_compiled_numeric_setup`) takes them and ``near_nullspace`` padded; the
    finest operator's values are ``values`` themselves, unpadded, where the hierarchy's
    precision is theirs (:func:`._hierarchy.sharing_arrays`). The
    executable is kept on the structure, one per kind of input (shape, dtype and
    placement of ``values`` and ``near_nullspace``, and whether values in host memory
    annihilate the constants, which chooses the coarsest level's inverse), so it lives as
    long as the setup cache keeps the structure. Lowering again at every re-setup, although
    JAX then finds the compiled program in its cache, re-traced the setup and went through
    the slow call path of a new executable: on the H200 at 128³ the host spent milliseconds
    there before the device started, as long as the device's whole numeric setup.
    """
    given, values = values, (resized_rows(values, _finest_nonzeros(structure))
                             if padded is None else padded)
    singular = annihilates_constants_on_host(structure, values)
    if near_nullspace is not None and _padded_setup_on(structure, values):
        arrays = structure.arrays
        near_nullspace = resized_rows(
            jnp.asarray(near_nullspace),
            (arrays.levels[0].a if arrays.levels else arrays.coarsest).n_rows)
    executables = structure.__dict__.setdefault("_numeric_setup_executables", {})
    key = (_input_kind(values), _input_kind(near_nullspace), singular)
    compiled = executables.get(key)
    if compiled is None:
        compiled = _compiled_numeric_setup(structure, values, near_nullspace, singular)
        executables[key] = compiled
    return sharing_arrays(compiled(structure.arrays, values, near_nullspace),
                          structure.arrays, given)


def _compiled_numeric_setup(structure: HierarchyStructure, values: jax.Array,
                            near_nullspace: jax.Array | None, singular: bool | None) -> Any:
    """The compiled numeric setup of ``structure`` for inputs like these, and values that
    annihilate the constants (``singular``; None: found by the program).

    For a classical structure on the CPU or a CUDA GPU, the program of its size class
    (:func:`._hierarchy.padded_numeric_setup`), compiled once for every structure of the
    class and kept (:data:`._padded_setup.PROGRAMS`); else one of its own.
    ``values`` are padded to the finest level's class (and ``near_nullspace`` for the
    former).
    """
    setup = structure.padded_setup
    if not _padded_setup_on(structure, values):
        return _numeric_setup.lower(_without_arrays(structure), structure.arrays, values,
                                    near_nullspace, singular).compile(COMPILER_OPTIONS)
    return PADDED_SETUP_PROGRAMS.get(
        (setup, _input_kind(values), _input_kind(near_nullspace), singular),
        lambda: _padded_numeric_setup.lower(setup, structure.arrays, values,
                                            near_nullspace, singular).compile(COMPILER_OPTIONS))


_padded_numeric_setup = jax.jit(padded_numeric_setup, static_argnums=(0, 4))


def _padded_setup_on(structure: HierarchyStructure, values: Any) -> bool:
    """Whether ``structure``'s numeric setup runs on padded arrays for ``values``: a
    classical or aggregation structure without a multicolor smoother, on the CPU or a CUDA
    GPU (whose native kernels it calls)."""
    platform = (next(iter(values.devices())).platform if isinstance(values, jax.Array)
                else jax.default_backend())
    return structure.padded_setup is not None and platform in ("cpu", "gpu")


def _input_kind(x: Any) -> Hashable:
    """What a compiled executable is specialized to of an input: its shape, dtype, weak
    type and, for a JAX array, its sharding (None stands for no input)."""
    if x is None:
        return None
    sharding = x.sharding if isinstance(x, jax.Array) else None
    dtype = x.dtype if hasattr(x, "dtype") else np.result_type(x)
    return (np.shape(x), dtype, getattr(x, "weak_type", False), sharding)


def _without_arrays(structure: HierarchyStructure) -> HierarchyStructure:
    """``structure`` without its device arrays, equal to it (same fingerprint).

    JAX keeps a jitted function's static arguments alive in its caches; the structure
    itself there would keep its index arrays on the device (half a GiB at 128³) after
    ``clear_cache()`` dropped them. The numeric setup takes the arrays as an argument.
    """
    static = dataclasses.replace(structure, arrays=None)
    static.__dict__["fingerprint"] = structure.fingerprint  # computed once per structure
    return static


def check_diagonal(caller: str, pattern: Any, values: jax.Array | np.ndarray,
                   config: SolverConfig) -> None:
    """Raises if ``config``'s preconditioner divides by the diagonal and a row of the
    CSR ``pattern`` (a CsrMatrix's) has no stored or a zero diagonal entry among
    ``values`` (checked on their device, or by NumPy for ``values`` in host memory)."""
    if not divides_by_diagonal(config):
        return
    positions = pattern.diagonal_positions  # cached per pattern
    n = pattern.shape[0]
    with jax.ensure_compile_time_eval():
        if positions.size == n and _stored_diagonal_nonzero(pattern, values):
            return
        stored = np.asarray(values[positions]) != 0
    diagonal = np.zeros(n, bool)
    diagonal[pattern.row_ids[positions][stored]] = True
    zero = np.flatnonzero(~diagonal)
    raise ValueError(
        f"{caller}: A has {zero.size} zero (or unstored) diagonal entries (rows"
        f" {zero[:10].tolist()}{', ...' if zero.size > 10 else ''}), but the"
        f" {_preconditioner_name(config)} divides by the diagonal. Use a Krylov method"
        " without it (e.g. preconditioner 'NOSOLVER'), or reorder the system."
    )


def _stored_diagonal_nonzero(pattern: Any, values: jax.Array | np.ndarray) -> bool:
    """Whether every stored diagonal entry of ``pattern`` is nonzero among ``values``."""
    if in_host_memory(values):  # by NumPy: no program compiled for a new pattern's size
        return bool(np.all(np.asarray(values)[pattern.diagonal_positions] != 0))
    # The positions go to the device with the call and no copy stays there: the callers
    # (describe, make_preconditioner, a new setup's check) check once per setup; the
    # solve checks inside its program. Padded to a size class (repeating the first), so
    # that values padded to theirs (a device setup's) are checked by a program compiled
    # once for similar patterns, not once per pattern's rows.
    positions = pattern.diagonal_positions
    padding = np.resize(positions[:1], size_class(positions.size) - positions.size)
    return bool(_all_nonzero(values, np.concatenate([positions, padding])))


@jit  # eager: under jax.ensure_compile_time_eval
def _all_nonzero(values: jax.Array, positions: jax.Array) -> jax.Array:
    return jnp.all(values[positions] != 0)


def divides_by_diagonal(config: SolverConfig) -> bool:
    used = config.preconditioner if config.preconditioner is not None else config
    return used.solver in ("AMG", "BLOCK_JACOBI", "CHEBYSHEV_POLY", "MULTICOLOR_GS",
                           "MULTICOLOR_DILU")


def _preconditioner_name(config: SolverConfig) -> str:
    used = config.preconditioner if config.preconditioner is not None else config
    return f"{used.solver} {'preconditioner' if config.preconditioner is not None else 'solver'}"


def relaxation_config(config: SolverConfig) -> RelaxationConfig | None:
    """The relaxation a solve uses as its solver or preconditioner (not as an AMG
    smoother), or None."""
    if config.relaxation is not None:
        return config.relaxation
    return None if config.preconditioner is None else config.preconditioner.relaxation


def amg_config(config: SolverConfig) -> AMGConfig | None:
    """The AMG configuration a solve uses (as solver or preconditioner), or None."""
    if config.solver == "AMG":
        return config.amg
    if config.preconditioner is not None and config.preconditioner.solver == "AMG":
        return config.preconditioner.amg
    return None
