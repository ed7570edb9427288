"""BCSR and BCOO matrices whose sparsity pattern stays static through ``jax.jit``.

A ``jax.experimental.sparse`` BCSR or BCOO is a pytree whose index arrays are leaves, so
when it is passed *as an argument* of a ``jax.jit``-compiled function its indices are
traced, and a solver that needs the pattern on the host (every AMG setup does) cannot read
them.  :func:`static_pattern` gives the same matrix as a :class:`CachedBCSR` or
:class:`CachedBCOO`: subclasses whose only pytree leaf is ``data``; the index arrays, the
shape and the sortedness flags are the pytree's auxiliary data, compared by a fingerprint
of their contents (a 128-bit BLAKE2b hash).  So

* ``jax.jit`` traces once per pattern: new values on the same pattern reuse the
  compilation, whichever index arrays hold it, and a new pattern compiles anew;
* ``jax.grad`` differentiates with respect to ``data`` (a cotangent of the same type);
* ``jax.vmap`` batches ``data`` (stack several matrices of one pattern with
  ``jax.tree.map(lambda *d: jnp.stack(d), A1, A2, ...)``).

Inside the compiled function the matrix is an ordinary BCSR/BCOO with concrete indices
(``A @ x``, ``A.todense()`` work as usual); :func:`jaxsolve.sparse.as_csr` converts it
without reading its indices again.  JAX-AMG's ``with_cache`` is the public door
(:func:`jaxsolve.sparse.with_cache`); it also attaches what JAX-AMG attaches
(:class:`Attachments`).  The matrices of :mod:`jaxsolve.sparse.matrices` are made static
this way from the start (:func:`host_pattern_bcsr`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import weakref
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax.experimental import sparse as jsparse


@dataclasses.dataclass(frozen=True, eq=False)
class Attachments:
    """What :func:`jaxsolve.sparse.with_cache` attaches to a matrix or an operator.

    Compared by identity of ``coloring``, ``mpi`` and the null spaces (a pytree's auxiliary
    data must be cheap to compare), and by value of ``is_symmetric``.

    Attributes:
      coloring: a :class:`~jaxsolve.sparse.ColoringInfo` (operators), or None.
      mpi: JAX-AMG's MPI metadata (``cache_mpi_metadata``'s dict), or None.
      is_symmetric: whether the matrix is declared symmetric.
      nullspace, transpose_nullspace: defaults of :func:`~jaxsolve.sparse.solve`'s
        arguments of these names, or None.
    """

    coloring: Any = None
    mpi: Any = None
    is_symmetric: bool = False
    nullspace: Any = None
    transpose_nullspace: Any = None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Attachments) and self.coloring is other.coloring
                and self.mpi is other.mpi and self.is_symmetric == other.is_symmetric
                and self.nullspace is other.nullspace
                and self.transpose_nullspace is other.transpose_nullspace)

    def __hash__(self) -> int:
        return hash(self.is_symmetric)


class StaticIndices:
    """The static half of a cached BCSR/BCOO: its index arrays, shape and flags.

    Hashable and compared by a fingerprint of the arrays' contents, so two matrices with
    equal patterns share ``jit`` compilations.  The arrays are the matrix's own concrete
    JAX arrays (kept on the device for its products).  ``host``, the same arrays in host
    memory, spares reading them back to compute the fingerprint.
    """

    def __init__(self, arrays: tuple[jax.Array, ...], shape: tuple[int, ...],
                 indices_sorted: bool, unique_indices: bool,
                 host: tuple[np.ndarray, ...] | None = None):
        self.arrays = arrays
        self.shape = tuple(int(s) for s in shape)
        self.indices_sorted = bool(indices_sorted)
        self.unique_indices = bool(unique_indices)
        digest = hashlib.blake2b(digest_size=16)
        digest.update(repr((self.shape, self.indices_sorted, self.unique_indices)).encode())
        for array in arrays if host is None else host:
            array = np.ascontiguousarray(array)
            digest.update(f"|{array.dtype.str}{array.shape}|".encode())
            digest.update(array)
        self.key = digest.hexdigest()

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, StaticIndices) and self.key == other.key)


class _Cached:
    """The pytree behaviour shared by :class:`CachedBCSR` and :class:`CachedBCOO`."""

    _static: StaticIndices
    _attachments: Attachments
    _index_names: tuple[str, ...]

    @classmethod
    def _of(cls, data: Any, static: StaticIndices, attachments: Attachments):
        # No checks: JAX passes placeholders (tracers, None, object()) as ``data`` here.
        matrix = object.__new__(cls)
        matrix.data = data
        for name, array in zip(cls._index_names, static.arrays, strict=True):
            setattr(matrix, name, array)
        matrix.shape = static.shape
        matrix.indices_sorted = static.indices_sorted
        matrix.unique_indices = static.unique_indices
        matrix._static = static
        matrix._attachments = attachments
        return matrix

    def tree_flatten(self) -> tuple[tuple[Any], tuple[StaticIndices, Attachments]]:
        return (self.data,), (self._static, self._attachments)

    @classmethod
    def tree_unflatten(cls, aux: tuple[StaticIndices, Attachments], children: tuple[Any, ...]):
        return cls._of(children[0], *aux)

    @property
    def pattern_key(self) -> str:
        """The fingerprint of the pattern (index arrays, shape, flags), equal for equal
        patterns."""
        return self._static.key

    @property
    def attachments(self) -> Attachments:
        """What :func:`~jaxsolve.sparse.with_cache` attached."""
        return self._attachments

    @property
    def is_symmetric(self) -> bool:
        """Whether the matrix was declared symmetric (``with_cache(..., is_symmetric=True)``)."""
        return self._attachments.is_symmetric


@jax.tree_util.register_pytree_node_class
class CachedBCSR(_Cached, jsparse.BCSR):
    """A ``BCSR`` whose pattern is static under ``jax.jit``, ``vmap`` and ``grad``.

    Made by :func:`jaxsolve.sparse.with_cache`; an ordinary ``BCSR`` otherwise (see
    :mod:`._static_pattern`).  Its only pytree leaf is ``data``.
    """

    _index_names = ("indices", "indptr")


@jax.tree_util.register_pytree_node_class
class CachedBCOO(_Cached, jsparse.BCOO):
    """A ``BCOO`` whose pattern is static under ``jax.jit``, ``vmap`` and ``grad``.

    Made by :func:`jaxsolve.sparse.with_cache`; an ordinary ``BCOO`` otherwise (see
    :mod:`._static_pattern`).  Its only pytree leaf is ``data``.
    """

    _index_names = ("indices",)


def is_sparse_matrix(A: Any) -> bool:
    """Whether ``A`` is a BCSR, a BCOO or a ``scipy.sparse`` matrix."""
    return isinstance(A, (jsparse.BCSR, jsparse.BCOO)) or scipy.sparse.issparse(A)


def static_pattern(caller: str, A: Any, attachments: Attachments) -> CachedBCSR | CachedBCOO:
    """``A`` (a BCSR, a BCOO or a scipy.sparse matrix, which becomes a BCSR) with its
    pattern static, carrying ``attachments``; its index arrays are concrete JAX arrays.

    Raises:
      TypeError: if ``A``'s indices are traced: the pattern must be read here, once.
    """
    if isinstance(A, _Cached):
        return type(A)._of(A.data, A._static, attachments)
    if scipy.sparse.issparse(A):
        A = jsparse.BCSR.from_scipy_sparse(A)
    kind = CachedBCSR if isinstance(A, jsparse.BCSR) else CachedBCOO
    given = tuple(getattr(A, name) for name in kind._index_names)
    # Concrete JAX arrays (NumPy ones copied), so a BCSR/BCOO rebuilt from them inside jit
    # has concrete indices too: jnp.asarray under a trace turns NumPy arrays into tracers.
    with jax.ensure_compile_time_eval():
        arrays = tuple(jnp.asarray(array) for array in given)
    try:
        static = StaticIndices(arrays, A.shape, A.indices_sorted, A.unique_indices, host=given)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        raise TypeError(
            f"{caller}: the indices of this {type(A).__name__} are traced (it is an argument"
            " of a jax.jit, vmap or grad function), so its pattern cannot be read. Call"
            f" {caller}(A) outside the transformation and pass its result in: its pattern"
            " stays static, and only its values are traced.") from None
    return kind._of(A.data, static, attachments)


def attach(caller: str, A: Any, attachments: Attachments) -> CachedBCSR | CachedBCOO:
    """Gives the matrix ``A`` ``attachments`` in place, as JAX-AMG's ``with_cache`` does,
    and returns it with its pattern static.

    A :class:`CachedBCSR`/:class:`CachedBCOO` takes them as its own and is returned itself.
    A plain BCSR, BCOO or ``scipy.sparse`` matrix records them as its attribute
    ``attachments`` (which :func:`jaxsolve.sparse.solve` reads, so a later ``solve(A, b)`` of
    that very object is distributed or symmetric as attached), and its
    :func:`static_pattern` copy is returned.

    Raises:
      TypeError: as :func:`static_pattern`.
    """
    if isinstance(A, _Cached):
        A._attachments = attachments
        return A
    cached = static_pattern(caller, A, attachments)
    A.attachments = attachments
    return cached


# The static indices of the host patterns host_pattern_bcsr was given, by the identity of
# the (read-only) host arrays while they live, each held only as long as a matrix holds it:
# matrices rebuilt on a cached pattern share its device copies and fingerprint, and the
# device copies are freed with the last such matrix.
_HOST_PATTERNS: dict[tuple[Any, ...], weakref.ref[StaticIndices]] = {}


def host_pattern_bcsr(data: Any, indices: np.ndarray, indptr: np.ndarray,
                      shape: tuple[int, int]) -> CachedBCSR:
    """A :class:`CachedBCSR` of ``data`` on the canonical (sorted, duplicate-free) pattern
    held by the read-only host arrays ``indices`` and ``indptr``.

    Its index arrays are concrete JAX arrays, made so even under a transformation
    (:func:`jax.ensure_compile_time_eval`): they stay concrete where the matrix is passed
    into ``jax.jit`` and where a BCSR is rebuilt from them inside it
    (``BCSR((new_data, A.indices, A.indptr), shape=A.shape)``, as JAX-AMG's demos do).
    Matrices made on the same host arrays while one of them lives share one copy.
    """
    key = (id(indices), id(indptr), tuple(shape))
    entry = _HOST_PATTERNS.get(key)
    static = None if entry is None else entry()
    if static is None:
        with jax.ensure_compile_time_eval():
            arrays = (jnp.asarray(indices), jnp.asarray(indptr))
        static = StaticIndices(arrays, shape, True, True, host=(indices, indptr))
        if not (indices.flags.writeable or indptr.flags.writeable):
            if entry is None:
                for array in (indices, indptr):
                    weakref.finalize(array, _HOST_PATTERNS.pop, key, None)
            _HOST_PATTERNS[key] = weakref.ref(static)
    return CachedBCSR._of(data, static, Attachments())
