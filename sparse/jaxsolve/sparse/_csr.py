"""CSR matrices with a static pattern and differentiable values.

A :class:`CsrMatrix` is the matrix format of the sparse engine.  It splits a
compressed-sparse-row matrix into

* its **values**, a ``(nnz,)`` JAX array: the only pytree leaf, so it is
  traced by ``jit``, batched by ``vmap`` and differentiated by ``grad``;
* its **pattern** (``indices``, ``indptr``, ``shape``): NumPy arrays kept in
  the pytree's auxiliary data, so they stay concrete under every
  transformation.  Everything derived from the pattern (row ids, the
  transpose permutation, diagonal positions) is computed once with NumPy.

A static pattern is what makes the rest possible: shapes are fixed for XLA,
an AMG setup can be reused for new values on the same pattern
(:meth:`CsrMatrix.with_values`, :attr:`CsrMatrix.pattern_key`), and the SpMV

    yᵢ = Σₖ values[k] · x[indices[k]]   over  indptr[i] <= k < indptr[i+1]

is one native kernel whose derivatives with respect to ``values`` are
cotangents on the pattern (``ȳ[row[k]] · x[indices[k]]``), never a dense
``n × n`` array.

:func:`as_csr` converts dense arrays, ``jax.experimental.sparse`` ``BCOO``
and ``BCSR`` matrices and any ``scipy.sparse`` matrix, canonicalizing them
(column indices sorted within each row, duplicates summed).
"""

from __future__ import annotations

import functools
import hashlib
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jax.experimental import sparse as jsparse

from jaxsolve import autodiff

from . import _ffi_primitives
from ._csr_arrays import CsrStructure

_INT32_MAX = np.iinfo(np.int32).max


class _CsrPattern:
    """The static half of a :class:`CsrMatrix`: shape, ``indptr``, ``indices``.

    It is the pytree auxiliary data of a ``CsrMatrix``, so it is hashable and
    compares by content: two matrices with equal patterns share ``jit``
    compilations.  Its arrays are read-only int32 NumPy arrays.  Derived
    arrays are computed on first use and cached.
    """

    def __init__(self, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]):
        self.indices = _frozen_int32(indices)
        self.indptr = _frozen_int32(indptr)
        self.shape = shape
        digest = hashlib.blake2b(digest_size=16)
        for array in (np.asarray(shape, np.int64), self.indptr, self.indices):
            digest.update(array)  # contiguous: hashed in place, not copied
            digest.update(b"|")
        self.key = digest.hexdigest()

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (
            isinstance(other, _CsrPattern)
            and self.key == other.key
            and self.shape == other.shape
            and np.array_equal(self.indptr, other.indptr)
            and np.array_equal(self.indices, other.indices)
        )

    @property
    def nnz(self) -> int:
        return self.indices.shape[0]

    @functools.cached_property
    def row_ids(self) -> np.ndarray:
        """``row_ids[k]`` is the row of stored value ``k`` (sorted)."""
        counts = np.diff(self.indptr)
        return _frozen_int32(np.repeat(np.arange(self.shape[0]), counts))

    @functools.cached_property
    def transposed(self) -> tuple[_CsrPattern, np.ndarray]:
        """The pattern of ``Aᵀ`` and the permutation taking values to it."""
        structure, permutation = CsrStructure(self.indptr, self.indices,
                                              self.shape[1]).transposed()
        pattern = _CsrPattern(structure.indices, structure.indptr, self.shape[::-1])
        return pattern, _frozen_int32(permutation)

    @functools.cached_property
    def transpose_permutation_on_device(self) -> jax.Array:
        """The permutation of :attr:`transposed` on the default device: the position of each
        ``a_ji`` among the values, which a default solve reads to test them for symmetry
        (``_default_method.py``: in the program of traced values, on their device for
        concrete ones there).  Sent once per pattern, and freed with it."""
        with jax.ensure_compile_time_eval():  # also while a caller's jit traces
            return jax.device_put(self.transposed[1])

    @functools.cached_property
    def diagonal_positions_on_device(self) -> jax.Array:
        """:attr:`diagonal_positions` on the default device, for the same test of concrete
        values on a device (``_default_method.py``): sent once per pattern, not with every
        new values."""
        with jax.ensure_compile_time_eval():
            return jax.device_put(self.diagonal_positions)

    @functools.cached_property
    def native_operands(self) -> tuple[np.ndarray, np.ndarray]:
        """``(indices, indptr)`` as operands of the native CSR product, checked entry by
        entry once per pattern (also one built with ``check=False``), not at every product."""
        return _ffi_primitives.csr_pattern_operands("csr_matvec", self.indices, self.indptr,
                                                    *self.shape, self.nnz)

    @functools.cached_property
    def diagonal_positions(self) -> np.ndarray:
        """Positions ``k`` of the stored diagonal entries."""
        return _frozen_int32(np.flatnonzero(self.row_ids == self.indices))

    @functools.cached_property
    def differentiable(self) -> autodiff.SparsePattern:
        """The pattern as :mod:`jaxsolve.autodiff` takes it (products with ``A`` and ``Aᵀ``,
        the symmetrized values) in a solve's derivative rules; ``O(nnz)`` host work, once."""
        return autodiff.SparsePattern.from_csr(self.indptr, self.indices, self.shape)

    @functools.cached_property
    def structurally_symmetric(self) -> bool:
        """Whether the pattern is square and stores ``a_ji`` beside every ``a_ij``: ``Aᵀ``
        has ``A``'s pattern."""
        transposed, _ = self.transposed
        return (self.shape[0] == self.shape[1]
                and np.array_equal(self.indptr, transposed.indptr)
                and np.array_equal(self.indices, transposed.indices))

    @functools.cached_property
    def symmetric_with_diagonal(self) -> bool:
        """Whether the pattern is structurally symmetric with a diagonal entry in every row:
        what a Hermitian matrix's values need to be tested entry by entry (``values ==
        conj(values[transposed[1]])``)."""
        return self.structurally_symmetric and self.diagonal_positions.size == self.shape[0]


@jax.tree_util.register_pytree_node_class
class CsrMatrix:
    r"""A sparse matrix in CSR format: static pattern, differentiable values.

    Only ``values`` is a pytree leaf; ``indices``, ``indptr`` and ``shape``
    are NumPy data fixed at trace time.  So a ``CsrMatrix`` can be passed to
    a ``jit``-compiled function (one compilation per pattern), ``vmap``-ped
    over a batch of values sharing one pattern, and differentiated with
    respect to its values.  Gradients are ``(nnz,)`` arrays on the pattern.

    The pattern must be concrete: build the matrix outside ``jit`` (or from
    closed-over NumPy arrays) and pass it in; inside, only its values are
    traced.  To change values on a fixed pattern, use :meth:`with_values`.

    Args:
        values: ``(nnz,)`` stored values (float or complex; integer values
            are converted to the default float dtype).
        indices: ``(nnz,)`` column index of each stored value, sorted and
            unique within each row; concrete (NumPy or a concrete JAX array).
        indptr: ``(n_rows + 1,)`` row pointers: row ``i`` holds the values
            ``indptr[i]:indptr[i + 1]``; concrete.
        shape: ``(n_rows, n_cols)``.
        check: validate the pattern (``indptr`` starts at 0 and is
            non-decreasing, ``indices`` in range, sorted and without
            duplicates in each row) and, when they are concrete, that the
            values are finite.  ``False`` skips these ``O(nnz)`` checks for
            inputs known to be canonical.

    Raises:
        TypeError: if ``indices`` or ``indptr`` is traced (created inside
            ``jit``/``vmap``/``grad``).
        ValueError: if a check fails; the message names the offending entry.

    Examples:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from jaxsolve import sparse
        >>> A = sparse.CsrMatrix(jnp.array([2., 1., 3.]), indices=np.array([0, 1, 1]),
        ...                      indptr=np.array([0, 2, 3]), shape=(2, 2))
        >>> A @ jnp.array([1., 1.])
        Array([3., 3.], dtype=float32)
        >>> A.todense()
        Array([[2., 1.],
               [0., 3.]], dtype=float32)
        >>> jax.grad(lambda M: (M @ jnp.array([1., 2.])).sum())(A).values
        Array([1., 2., 2.], dtype=float32)
    """

    _values: jax.Array
    _pattern: _CsrPattern

    def __init__(
        self,
        values: Any,
        indices: Any,
        indptr: Any,
        shape: tuple[int, int],
        *,
        check: bool = True,
    ):
        pattern = _pattern_from_arrays(indices, indptr, shape, check)
        self._values = _checked_values(values, pattern, check, "CsrMatrix")
        self._pattern = pattern

    @classmethod
    def _on_pattern(cls, values: jax.Array, pattern: _CsrPattern) -> CsrMatrix:
        """A matrix from checked values on a checked pattern."""
        matrix = object.__new__(cls)
        matrix._values = values
        matrix._pattern = pattern
        return matrix

    def tree_flatten(self) -> tuple[tuple[jax.Array], _CsrPattern]:
        return (self._values,), self._pattern

    @classmethod
    def tree_unflatten(cls, pattern: _CsrPattern, children: tuple[Any, ...]) -> CsrMatrix:
        # JAX passes placeholders (tracers, None, object()) here: no checks.
        return cls._on_pattern(children[0], pattern)

    @property
    def values(self) -> jax.Array:
        """``(nnz,)`` stored values, in CSR order (the pytree leaf)."""
        return self._values

    @property
    def indices(self) -> np.ndarray:
        """``(nnz,)`` int32 column indices (static NumPy, read-only)."""
        return self._pattern.indices

    @property
    def indptr(self) -> np.ndarray:
        """``(n_rows + 1,)`` int32 row pointers (static NumPy, read-only)."""
        return self._pattern.indptr

    @property
    def row_ids(self) -> np.ndarray:
        """``(nnz,)`` int32 row of each stored value (static, sorted)."""
        return self._pattern.row_ids

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_rows, n_cols)``."""
        return self._pattern.shape

    @property
    def nnz(self) -> int:
        """The number of stored values (explicit zeros included)."""
        return self._pattern.nnz

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the values."""
        return self._values.dtype

    @property
    def pattern_key(self) -> str:
        """A hash of ``shape``, ``indptr`` and ``indices``, for caches.

        Equal patterns have equal keys (in every process), whatever the
        values; use it to reuse a setup (an AMG hierarchy, a coloring) keyed
        by pattern.
        """
        return self._pattern.key

    def __repr__(self) -> str:
        return f"CsrMatrix(shape={self.shape}, nnz={self.nnz}, dtype={self.dtype})"

    def with_values(self, values: Any) -> CsrMatrix:
        """The matrix with the same pattern and new ``values``.

        Use it to re-set up or re-solve on a fixed pattern, and to batch
        matrices: ``jax.vmap(A.with_values)(stacked_values)`` is a
        ``CsrMatrix`` with batched values that ``jax.vmap`` accepts.

        Args:
            values: ``(nnz,)`` new values, in the order of :attr:`values`.

        Returns:
            A :class:`CsrMatrix` sharing this pattern (and its caches).

        Raises:
            ValueError: if ``values`` has the wrong shape.

        Examples:
            >>> import jax, jax.numpy as jnp
            >>> from jaxsolve import sparse
            >>> A = sparse.as_csr(jnp.array([[2., 0.], [1., 3.]]))
            >>> A.with_values(jnp.array([1., 1., 1.])).todense()
            Array([[1., 0.],
                   [1., 1.]], dtype=float32)
            >>> batch = jax.vmap(A.with_values)(jnp.stack([A.values, 2 * A.values]))
            >>> jax.vmap(lambda M: M @ jnp.ones(2))(batch)
            Array([[2., 4.],
                   [4., 8.]], dtype=float32)
        """
        return self._on_pattern(
            _checked_values(values, self._pattern, False, "CsrMatrix.with_values"),
            self._pattern,
        )

    def matvec(self, x: jax.Array) -> jax.Array:
        """``A x`` by the native CSR kernel (:func:`jaxsolve.sparse._ffi_primitives.csr_matvec`).

        The engine's product, on every platform: faster than XLA's gather and sorted
        segment sum, and it spares XLA's GPU compiler the complex64 scatter-add that crashed
        it on JAX 0.11.2 (only the derivatives still sum by segments).

        Args:
            x: ``(n_cols,)`` or ``(n_cols, k)``.

        Returns:
            ``(n_rows,)`` or ``(n_rows, k)``, in the common dtype of the values
            and ``x``.

        Raises:
            ValueError: if ``x`` has the wrong shape.
        """
        x = _checked_vector(x, self.shape[1], "CsrMatrix.matvec")
        with jax.numpy_dtype_promotion("standard"):
            dtype = jnp.result_type(self._values, x)
            # The kernel sums in single precision at least (half precision in float32).
            summed = jnp.promote_types(dtype, jnp.float32)
        indices, indptr = self._pattern.native_operands
        y = _ffi_primitives.csr_matvec_unchecked(self._values.astype(summed), indices, indptr,
                                                 x.astype(summed))
        return y.astype(dtype)

    __matmul__ = matvec

    def rmatvec(self, x: jax.Array) -> jax.Array:
        """``Aᵀ x`` (the plain transpose, no conjugation): ``A``'s values permuted onto the
        transposed pattern (computed once per pattern), then :meth:`matvec`.

        Args:
            x: ``(n_rows,)`` or ``(n_rows, k)``.

        Returns:
            ``(n_cols,)`` or ``(n_cols, k)``.

        Raises:
            ValueError: if ``x`` has the wrong shape.
        """
        x = _checked_vector(x, self.shape[0], "CsrMatrix.rmatvec")
        return self.transpose().matvec(x)

    def transpose(self) -> CsrMatrix:
        """``Aᵀ`` (no conjugation) as a CSR matrix.

        The transposed pattern and the permutation of the values are computed
        once per pattern with NumPy; the values are permuted by a static
        gather, so the result is differentiable with respect to them.
        """
        pattern, permutation = self._pattern.transposed
        return self._on_pattern(self._values[permutation], pattern)

    @property
    def T(self) -> CsrMatrix:
        """``Aᵀ``; see :meth:`transpose`."""
        return self.transpose()

    def diagonal(self) -> jax.Array:
        """The ``(min(n_rows, n_cols),)`` main diagonal (zero where not stored)."""
        positions = self._pattern.diagonal_positions
        return jax.ops.segment_sum(
            self._values[positions],
            self.row_ids[positions],
            num_segments=min(self.shape),
            indices_are_sorted=True,
        )

    def todense(self) -> jax.Array:
        """The dense ``(n_rows, n_cols)`` array."""
        dense = jnp.zeros(self.shape, self._values.dtype)
        return dense.at[self.row_ids, self.indices].add(self._values)

    def to_bcsr(self) -> jsparse.BCSR:
        """The same matrix as a ``jax.experimental.sparse.BCSR``."""
        return jsparse.BCSR(
            (self._values, jnp.asarray(self.indices), jnp.asarray(self.indptr)),
            shape=self.shape,
        )


def as_csr(A: Any, *, check: bool = True) -> CsrMatrix:
    """Converts a matrix to a canonical :class:`CsrMatrix`.

    Accepted inputs:

    * a :class:`CsrMatrix`: returned as it is;
    * any ``scipy.sparse`` matrix or array (``csr``, ``csc``, ``coo``,
      ``bsr``, ...): explicit zeros stay in the pattern (a BSR block's zeros
      included); an index outside the shape is an error;
    * a ``jax.experimental.sparse.BCOO`` or ``BCSR`` without batch or dense
      dimensions, whose indices must be concrete (its values may be traced);
      padding entries (indices past the shape) are dropped, a negative index is
      an error;
    * a dense 2-D NumPy or JAX array.  A concrete one stores its nonzeros.
      A traced one (inside ``jit``, ``vmap`` or ``grad``) stores **every**
      entry, since a pattern cannot depend on traced values; gradients then
      cover all ``n_rows * n_cols`` entries, as they should for a dense
      matrix.  For a sparse pattern, convert outside the transformation and
      pass the ``CsrMatrix`` in.

    The result is canonical: column indices sorted within each row and
    duplicates summed.  Its values keep differentiability with respect to the
    input's values (the reordering is a static gather and segment sum).

    A canonical input (CSR rows that strictly increase, COO entries in row-major
    order) is taken as it is.  A canonical BCSR's or BCOO's pattern is remembered
    while its index arrays live, when they cannot change (JAX arrays, or
    read-only NumPy arrays as :mod:`jaxsolve.sparse.matrices` makes): converting
    it again, or a matrix of new values on the same arrays, neither reads nor
    checks them again (3D Poisson 128³ as a BCSR: 0.11 s the first time, 7 ms
    after).

    Args:
        A: the matrix, ``(n_rows, n_cols)``.
        check: validate the result as :class:`CsrMatrix` does (finite values).

    Returns:
        The :class:`CsrMatrix`.

    Raises:
        TypeError: for an unsupported input type, values that are not numbers
            (an object or string array), or BCOO/BCSR indices that are traced.
        ValueError: for inputs that are not 2-D matrices, indices as above, a
            malformed ``indptr``, or (with ``check``) values that are not finite.

    Examples:
        >>> import jax.numpy as jnp, scipy.sparse
        >>> from jaxsolve import sparse
        >>> A = sparse.as_csr(jnp.array([[4., 0.], [1., 3.]]))
        >>> A.indices, A.indptr
        (array([0, 0, 1], dtype=int32), array([0, 1, 3], dtype=int32))
        >>> coo = scipy.sparse.coo_array(([1., 2., 5.], ([0, 0, 1], [1, 1, 0])), shape=(2, 2))
        >>> sparse.as_csr(coo).todense()
        Array([[0., 3.],
               [5., 0.]], dtype=float32)
    """
    if isinstance(A, CsrMatrix):
        return A
    if scipy.sparse.issparse(A) or isinstance(A, np.ndarray):
        _check_numeric("as_csr", A.dtype)
    # A host matrix's values stay NumPy arrays until the result's go to the device by
    # `jax.device_put`, which compiles nothing: `jnp.asarray`, a gather or a segment sum
    # on the device would compile a program for every number of nonzeros.
    if scipy.sparse.issparse(A) and A.format == "csr":
        return _from_csr(A.indptr, A.indices, A.data, A.shape, check, padding=False)
    if scipy.sparse.issparse(A):
        coo = A.tocoo()
        return _from_coo(coo.row, coo.col, coo.data, coo.shape, check, padding=False)
    if isinstance(A, jsparse.BCOO):
        _check_unbatched(A)
        return _from_bcoo(A, check)
    if isinstance(A, jsparse.BCSR):
        _check_unbatched(A)
        return _from_bcsr(A, check)
    if isinstance(A, (np.ndarray, jax.Array)):
        if A.ndim != 2:
            raise ValueError(
                f"as_csr: a dense matrix must be 2-D, got shape {A.shape}."
            )
        try:
            rows, cols = np.nonzero(np.asarray(A))
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            rows, cols = np.indices(A.shape).reshape(2, -1)
        return _from_coo(rows, cols, A[rows, cols], A.shape, check)
    raise TypeError(
        "as_csr: A must be a CsrMatrix, a scipy.sparse matrix, a"
        " jax.experimental.sparse BCOO or BCSR, or a dense 2-D array; got"
        f" {type(A).__name__}."
    )


# The patterns of the canonical BCSRs and BCOOs that as_csr converted, by the identity of
# their index arrays (and shape), when those cannot change: JAX arrays, or read-only NumPy
# arrays (as sparse.matrices makes). A matrix that shares them (new values on one pattern:
# a Newton or optimizer step, a solve in a loop) is converted without reading its indices
# back from the device, checking and hashing them again. An entry lives as long as its
# arrays.
_PATTERNS: dict[tuple[Any, ...], _CsrPattern] = {}


def _remembered(
    arrays: tuple[Any, ...],
    A: jsparse.JAXSparse,
    check: bool,
    pattern_or_matrix: Callable[[], _CsrPattern | CsrMatrix],
) -> CsrMatrix:
    """``A`` on the canonical pattern remembered for its index ``arrays``, else on the one
    ``pattern_or_matrix()`` finds (remembered while ``arrays`` live, if they cannot
    change), or the matrix it converts when ``A`` is not canonical."""
    key = (*map(id, arrays), A.shape)
    pattern = _PATTERNS.get(key)
    if pattern is None:
        found = pattern_or_matrix()
        if isinstance(found, CsrMatrix):
            return found
        pattern = found
        if all(_immutable(array) for array in arrays):
            _PATTERNS[key] = pattern
            for array in arrays:
                weakref.finalize(array, _PATTERNS.pop, key, None)
    return _on_canonical(A.data, pattern, check)


def _from_bcsr(A: jsparse.BCSR, check: bool) -> CsrMatrix:
    """:func:`_from_csr` of a BCSR, its canonical pattern remembered."""

    def pattern_or_matrix() -> _CsrPattern | CsrMatrix:
        indices = _concrete(A.indices, "the indices of a BCSR")
        indptr = _concrete(A.indptr, "the indptr of a BCSR")
        return (_canonical_pattern(indptr, indices, len(A.data), A.shape)
                or _sorted_csr(indptr, indices, A.data, A.shape, check))

    return _remembered((A.indices, A.indptr), A, check, pattern_or_matrix)


def _from_bcoo(A: jsparse.BCOO, check: bool) -> CsrMatrix:
    """:func:`_from_coo` of a BCOO, its canonical pattern remembered."""

    def pattern_or_matrix() -> _CsrPattern | CsrMatrix:
        indices = _concrete(A.indices, "the indices of a BCOO")
        rows, cols = indices[:, 0], indices[:, 1]
        return (_canonical_coo_pattern(rows, cols, len(A.data), A.shape)
                or _from_coo(rows, cols, A.data, A.shape, check))

    return _remembered((A.indices,), A, check, pattern_or_matrix)


def _immutable(array: Any) -> bool:
    """Whether ``array``'s entries cannot change: a JAX array (here a concrete one), or a
    NumPy array that is read-only."""
    return isinstance(array, jax.Array) or (isinstance(array, np.ndarray)
                                            and not array.flags.writeable)


def _from_csr(
    indptr: np.ndarray,
    indices: np.ndarray,
    values: jax.Array,
    shape: tuple[int, int],
    check: bool,
    padding: bool = True,
) -> CsrMatrix:
    """Canonical CSR from static CSR indices (entries past ``indptr[-1]`` are padding).

    Taken as they are when each row's columns strictly increase within ``shape``;
    otherwise sorted and merged by :func:`_from_coo` (``padding`` as there).
    """
    pattern = _canonical_pattern(indptr, indices, len(values), shape)
    if pattern is None:
        return _sorted_csr(indptr, indices, values, shape, check, padding)
    return _on_canonical(values, pattern, check)


def _canonical_pattern(indptr: np.ndarray, indices: np.ndarray, n_values: int,
                       shape: tuple[int, int]) -> _CsrPattern | None:
    """The pattern of CSR indices whose rows strictly increase within ``shape``, else None.

    Raises a ValueError for an ``indptr`` that is not ``n_rows + 1`` offsets from 0 that
    never decrease, or that stores more entries than there are indices or values.
    """
    n_rows, n_cols = shape = _checked_shape(shape, "as_csr")
    indptr = np.asarray(indptr)
    if indptr.shape != (n_rows + 1,):
        problem = f"got shape {indptr.shape}"
    elif indptr[0] != 0:
        problem = f"got indptr[0] = {indptr[0]}"
    elif np.any(drops := np.diff(indptr) < 0):
        k = int(np.argmax(drops))
        problem = f"got indptr[{k}] = {indptr[k]} > indptr[{k + 1}] = {indptr[k + 1]}"
    else:
        problem = None
    if problem:
        raise ValueError(
            f"as_csr: indptr must be {n_rows + 1} nondecreasing offsets from 0 for"
            f" {n_rows} rows, {problem}."
        )
    nnz = int(indptr[-1])
    if min(len(indices), n_values) < nnz:
        raise ValueError(
            f"as_csr: indptr stores {nnz} entries, but there are {len(indices)} column"
            f" indices and {n_values} values."
        )
    indices = np.asarray(indices)[:nnz]
    increasing = np.diff(indices) > 0
    starts = indptr[1:-1]
    increasing[starts[(starts > 0) & (starts < nnz)] - 1] = True  # a row's first column
    if increasing.all() and (nnz == 0 or (indices.min() >= 0 and indices.max() < n_cols)):
        return _CsrPattern(indices, indptr, shape)
    return None


def _on_canonical(values: jax.Array, pattern: _CsrPattern, check: bool) -> CsrMatrix:
    """``values`` (their first ``pattern.nnz``) on a canonical ``pattern``."""
    return CsrMatrix._on_pattern(
        _checked_values(values[:pattern.nnz], pattern, check, "as_csr"), pattern)


def _sorted_csr(indptr: np.ndarray, indices: np.ndarray, values: jax.Array,
                shape: tuple[int, int], check: bool, padding: bool = True) -> CsrMatrix:
    """CSR indices sorted and merged (:func:`_from_coo`), padding past ``indptr[-1]`` dropped."""
    nnz = int(indptr[-1])
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    return _from_coo(rows, np.asarray(indices)[:nnz], values[:nnz], shape, check, padding)


def _from_coo(
    rows: np.ndarray,
    cols: np.ndarray,
    values: jax.Array,
    shape: tuple[int, int],
    check: bool,
    padding: bool = True,
) -> CsrMatrix:
    """Canonical CSR from static COO indices: sorted, duplicates summed.

    With ``padding`` (BCOO/BCSR's convention), entries whose indices lie past
    ``shape`` are dropped; without (a scipy matrix), they are an error, and a
    negative index always is.  The values are reordered with a static gather
    and summed with a static segment sum, so the result is differentiable in
    ``values``.
    """
    pattern = _canonical_coo_pattern(rows, cols, len(values), shape)
    if pattern is not None:  # nothing to sort, merge or gather
        return _on_canonical(values, pattern, check)
    n_rows, n_cols = shape = _checked_shape(shape, "as_csr")
    _check_in_shape(rows, cols, shape, padding)
    rows = np.asarray(rows, np.int64)
    cols = np.asarray(cols, np.int64)
    inside = np.flatnonzero((rows < n_rows) & (cols < n_cols))
    keys = rows[inside] * n_cols + cols[inside]
    order = np.argsort(keys, kind="stable")
    unique_keys, segments = np.unique(keys[order], return_inverse=True)
    if isinstance(values, np.ndarray):  # host values (scipy's): summed on the host
        starts = np.flatnonzero(np.diff(segments, prepend=-1))
        canonical = np.add.reduceat(values[inside[order]], starts) if starts.size \
            else values[:0]
    else:
        canonical = jax.ops.segment_sum(
            values[inside[order]],
            segments,
            num_segments=len(unique_keys),
            indices_are_sorted=True,
        )
    pattern = _pattern_of_keys(unique_keys, shape)
    return CsrMatrix._on_pattern(_checked_values(canonical, pattern, check, "as_csr"), pattern)


def _check_in_shape(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int],
                    padding: bool) -> None:
    """Raises a ValueError naming the first entry whose row or column index is negative or,
    without ``padding`` (a scipy matrix), not below ``shape``'s."""
    what = "the matrix" if padding else "a scipy.sparse matrix"
    for axis, indices, size in (("row", rows, shape[0]), ("column", cols, shape[1])):
        indices = np.asarray(indices)
        bad = np.flatnonzero(indices < 0 if padding else (indices < 0) | (indices >= size))
        if bad.size:
            where = "is negative" if padding else f"lies outside 0 .. {size - 1}"
            raise ValueError(
                f"as_csr: {what} has {bad.size} entries whose {axis} index {where} (the"
                f" first: entry {bad[0]}, {axis} {indices[bad[0]]})."
            )


def _canonical_coo_pattern(rows: np.ndarray, cols: np.ndarray, n_values: int,
                           shape: tuple[int, int]) -> _CsrPattern | None:
    """The pattern of COO indices in row-major order without repeats or padding (one
    value each), else None."""
    n_rows, n_cols = shape = _checked_shape(shape, "as_csr")
    rows = np.asarray(rows, np.int64)
    cols = np.asarray(cols, np.int64)
    keys = rows * n_cols + cols
    if (len(keys) == n_values and np.all(keys[1:] > keys[:-1])
            and np.all((rows >= 0) & (rows < n_rows)) and np.all((cols >= 0) & (cols < n_cols))):
        return _pattern_of_keys(keys, shape)
    return None


def _pattern_of_keys(keys: np.ndarray, shape: tuple[int, int]) -> _CsrPattern:
    """The pattern of the increasing row-major keys ``row * n_cols + col``."""
    n_rows, n_cols = shape
    counts = np.bincount(keys // max(n_cols, 1), minlength=n_rows)
    return _CsrPattern(keys % max(n_cols, 1), np.concatenate([[0], np.cumsum(counts)]), shape)


def _check_unbatched(A: jsparse.JAXSparse) -> None:
    if A.n_batch or A.n_dense or A.ndim != 2:
        raise ValueError(
            f"as_csr: {type(A).__name__} matrices with batch or dense dimensions"
            f" are not supported (got n_batch={A.n_batch}, n_dense={A.n_dense},"
            f" shape={A.shape}); pass one matrix and jax.vmap over its values"
            " (CsrMatrix.with_values) instead."
        )


def _concrete(array: Any, what: str) -> np.ndarray:
    """``array`` as NumPy, or a TypeError explaining why a pattern can't be traced."""
    try:
        return np.asarray(array)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        raise TypeError(
            f"{what} is traced, but the sparsity pattern must be concrete at"
            " trace time: it fixes the shapes of the compiled program. Pass"
            " the matrix through jaxsolve.sparse.with_cache(A) outside jit (its"
            " pattern then stays static as an argument, and only its values are"
            " traced), convert it with as_csr outside, close over it, or mark the"
            " argument holding the pattern static (static_argnums). To give such a"
            " matrix new values inside jit, keep its pattern: jax.tree.map(lambda data:"
            " new_data, A) (BCSR((new_data, A.indices, A.indptr)) traces the indices"
            " again)."
        ) from None


def _frozen_int32(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.int32)
    array.setflags(write=False)
    return array


def _checked_shape(shape: Any, name: str) -> tuple[int, int]:
    try:
        n_rows, n_cols = (int(size) for size in shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name}: shape must be a pair (n_rows, n_cols), got {shape!r}."
        ) from None
    if min(n_rows, n_cols) < 0 or max(n_rows, n_cols) > _INT32_MAX:
        raise ValueError(
            f"{name}: shape must hold sizes in [0, 2**31 - 1], got {shape!r}."
        )
    return n_rows, n_cols


def _pattern_from_arrays(
    indices: Any, indptr: Any, shape: Any, check: bool
) -> _CsrPattern:
    """Checks a user-given CSR pattern and builds it."""
    shape = _checked_shape(shape, "CsrMatrix")
    indices = _concrete(indices, "CsrMatrix: indices")
    indptr = _concrete(indptr, "CsrMatrix: indptr")
    for name, array, length in (
        ("indptr", indptr, f"n_rows + 1 = {shape[0] + 1}"),
        ("indices", indices, "nnz"),
    ):
        if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
            raise ValueError(
                f"CsrMatrix: {name} must be a 1-D integer array of {length}"
                f" entries, got shape {array.shape} and dtype {array.dtype}."
            )
    if indptr.shape[0] != shape[0] + 1:
        raise ValueError(
            f"CsrMatrix: indptr must have n_rows + 1 = {shape[0] + 1} entries for"
            f" shape {shape}, got {indptr.shape[0]}."
        )
    if indptr[-1] != indices.shape[0] or indices.shape[0] > _INT32_MAX:
        raise ValueError(
            f"CsrMatrix: indptr[-1] = {indptr[-1]} must equal the number of"
            f" column indices, {indices.shape[0]} (at most 2**31 - 1)."
        )
    if check:
        _check_pattern(indices, indptr, shape)
    return _CsrPattern(indices, indptr, shape)


def _check_pattern(indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> None:
    """The ``O(nnz)`` checks: indptr monotone, indices in range, sorted, unique."""
    if indptr[0] != 0:
        raise ValueError(f"CsrMatrix: indptr[0] must be 0, got {indptr[0]}.")
    drops = np.flatnonzero(np.diff(indptr) < 0)
    if drops.size:
        i = drops[0]
        raise ValueError(
            f"CsrMatrix: indptr must be non-decreasing, but indptr[{i + 1}] ="
            f" {indptr[i + 1]} < indptr[{i}] = {indptr[i]}."
        )
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    outside = np.flatnonzero((indices < 0) | (indices >= shape[1]))
    if outside.size:
        k = outside[0]
        raise ValueError(
            f"CsrMatrix: column index {indices[k]} at position {k} (row"
            f" {rows[k]}) is out of range for {shape[1]} columns."
        )
    # Within a row the column indices must strictly increase.
    same_row = rows[1:] == rows[:-1]
    bad = np.flatnonzero(same_row & (indices[1:] <= indices[:-1]))
    if bad.size:
        row = rows[bad[0]]
        raise ValueError(
            f"CsrMatrix: row {row} has column indices"
            f" {indices[indptr[row]:indptr[row + 1]].tolist()}, which are unsorted"
            " or duplicated; pass sorted, unique column indices per row (as_csr"
            " sorts them and sums duplicates)."
        )


def _check_numeric(name: str, dtype: Any) -> None:
    """Raises ``TypeError`` unless ``dtype`` holds numbers (integers and booleans are cast
    to float later)."""
    if np.dtype(dtype).kind not in "biufc":
        raise TypeError(
            f"{name}: the matrix's values must be numbers (float or complex; integers are"
            f" cast to float), got dtype {np.dtype(dtype)}; convert them first, e.g."
            " A.astype(np.float64)."
        )


def _checked_values(
    values: Any, pattern: _CsrPattern, check: bool, name: str
) -> jax.Array:
    """``values`` as an inexact JAX array of shape ``(nnz,)``; finite if checked.

    NumPy values go to the device by ``jax.device_put`` (converted to JAX's dtype on the
    host), which compiles nothing; ``jnp.asarray`` would compile a copy for every shape.
    """
    host = None
    if isinstance(values, np.ndarray):
        _check_numeric(name, values.dtype)
        host = values if np.issubdtype(values.dtype, np.inexact) else values.astype(float)
        host = host.astype(jax.dtypes.canonicalize_dtype(host.dtype), copy=False)
        values = jax.device_put(host)
    values = jnp.asarray(values)
    if not jnp.issubdtype(values.dtype, jnp.inexact):
        values = values.astype(float)
    if values.shape != (pattern.nnz,):
        raise ValueError(
            f"{name}: values must have shape (nnz,) = ({pattern.nnz},), got"
            f" {values.shape}."
        )
    if check:
        try:
            finite = np.isfinite(np.asarray(values) if host is None else host)
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            return values  # traced values are checked by the solver's status
        if not finite.all():
            k = np.flatnonzero(~finite)[0]
            raise ValueError(
                f"{name}: values hold {np.count_nonzero(~finite)} NaN or Inf"
                f" entries, the first at position {k} (row {pattern.row_ids[k]},"
                f" column {pattern.indices[k]})."
            )
    return values


def _checked_vector(x: Any, size: int, name: str) -> jax.Array:
    x = jnp.asarray(x)
    if x.ndim not in (1, 2) or x.shape[0] != size:
        raise ValueError(
            f"{name}: x must have shape ({size},) or ({size}, k), got {x.shape}."
        )
    return x
