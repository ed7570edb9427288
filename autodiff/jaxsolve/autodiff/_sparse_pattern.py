"""Sparse operators as values on a static pattern, with cotangents on it."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class SparsePattern:
    r"""The static sparsity pattern of a sparse matrix; the values vary.

    A sparse matrix is split into its pattern (this object: which ``(i, j)``
    are stored, fixed at trace time) and its ``values`` (a ``(nnz,)`` array,
    the differentiable leaf).  :meth:`matvec` and :meth:`symmetrize` are the
    services :func:`linear_solve` needs for such an operator::

        x = linear_solve(values, b, matvec=pattern.matvec, solve=...,
                         transpose_solve=...)

    **Cotangents stay on the pattern.** :meth:`matvec` is written with a
    gather and a segment sum, so JAX transposes ``v ↦ matvec(v, x)`` into
    ``ȳ ↦ (ȳ[rows[k]] · x[cols[k]])ₖ``: the cotangent of ``values`` is a
    ``(nnz,)`` vector, ``-λᵢ xⱼ`` for each stored ``(i, j)`` (with
    ``λ = A⁻ᵀ x̄``), never a dense ``N×N`` array.

    **Symmetric operators.** :meth:`symmetrize` averages each stored value
    with the conjugate of its mirror ``(j, i)``; passing it to
    ``linear_solve(..., symmetric=True)`` projects tangents, and hence
    cotangents, onto Hermitian matrices with the same pattern.  It needs a
    structurally symmetric pattern without duplicates.

    Attributes:
        rows: ``(nnz,)`` row index of each stored value (stored as int32).
        cols: ``(nnz,)`` column index of each stored value (stored as int32).
        shape: ``(n_rows, n_cols)`` of the matrix.

    Raises:
        ValueError: if ``rows``/``cols`` are not 1-D integer arrays of equal
            length or hold indices outside ``shape``.

    Examples:
        >>> import jax, jax.numpy as jnp, numpy as np
        >>> from jaxsolve import autodiff
        >>> pattern = autodiff.SparsePattern(
        ...     rows=np.array([0, 0, 1]), cols=np.array([0, 1, 1]), shape=(2, 2))
        >>> values = jnp.array([2., 1., 4.])
        >>> pattern.matvec(values, jnp.array([1., 1.]))
        Array([3., 4.], dtype=float32)
        >>> jax.grad(lambda v: pattern.matvec(v, jnp.array([1., 2.])).sum())(values)
        Array([1., 2., 2.], dtype=float32)
    """

    rows: np.ndarray
    cols: np.ndarray
    shape: tuple[int, int]

    def __post_init__(self):
        rows = np.asarray(self.rows)
        cols = np.asarray(self.cols)
        shape = tuple(int(size) for size in self.shape)
        if rows.ndim != 1 or cols.ndim != 1 or rows.shape != cols.shape:
            raise ValueError(
                "SparsePattern: rows and cols must be 1-D arrays of equal length,"
                f" got rows.shape={rows.shape} and cols.shape={cols.shape}."
            )
        if not (
            np.issubdtype(rows.dtype, np.integer)
            and np.issubdtype(cols.dtype, np.integer)
        ):
            raise ValueError(
                "SparsePattern: rows and cols must be integer arrays, got"
                f" {rows.dtype} and {cols.dtype}."
            )
        if len(shape) != 2:
            raise ValueError(
                f"SparsePattern: shape must be (n_rows, n_cols), got {shape}."
            )
        if max(shape) >= 2**31 or rows.size and (
            rows.min() < 0 or rows.max() >= shape[0]
            or cols.min() < 0 or cols.max() >= shape[1]
        ):
            raise ValueError(
                f"SparsePattern: indices out of bounds for shape {shape} (or"
                " the shape needs indices beyond int32)."
            )
        # int32 indices index JAX arrays whether or not x64 is enabled.
        object.__setattr__(self, "rows", rows.astype(np.int32))
        object.__setattr__(self, "cols", cols.astype(np.int32))
        object.__setattr__(self, "shape", shape)

    @classmethod
    def from_csr(
        cls, indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int]
    ) -> SparsePattern:
        """The pattern of a CSR matrix, values in CSR order.

        Args:
            indptr: ``(n_rows + 1,)`` row pointers.
            indices: ``(nnz,)`` column indices.
            shape: ``(n_rows, n_cols)``.

        Returns:
            The pattern whose value ``k`` is the ``k``-th stored CSR value.

        Raises:
            ValueError: if ``indptr`` does not have ``n_rows + 1`` entries
                ending at ``len(indices)``.
        """
        indptr = np.asarray(indptr)
        indices = np.asarray(indices)
        if indptr.shape != (shape[0] + 1,) or indptr[-1] != indices.shape[0]:
            raise ValueError(
                f"SparsePattern.from_csr: {indptr.shape=} must be"
                f" ({shape[0] + 1},) and end at {indices.shape[0]}, the number"
                " of indices."
            )
        rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
        return cls(rows=rows, cols=indices, shape=shape)

    @property
    def nnz(self) -> int:
        """The number of stored values."""
        return self.rows.shape[0]

    def matvec(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """``A x`` for the matrix with these ``values`` on this pattern.

        Args:
            values: ``(nnz,)`` stored values.
            x: ``(n_cols,)`` or ``(n_cols, k)``.

        Returns:
            ``(n_rows,)`` or ``(n_rows, k)``.

        Raises:
            ValueError: if ``values`` or ``x`` has the wrong shape.
        """
        if values.shape != (self.nnz,):
            raise ValueError(
                f"SparsePattern.matvec: values must have shape ({self.nnz},),"
                f" got {values.shape}."
            )
        if x.ndim not in (1, 2) or x.shape[0] != self.shape[1]:
            raise ValueError(
                f"SparsePattern.matvec: x must have shape ({self.shape[1]},) or"
                f" ({self.shape[1]}, k), got {x.shape}."
            )
        weights = values if x.ndim == 1 else values[:, None]
        return jax.ops.segment_sum(
            weights * x[self.cols], self.rows, num_segments=self.shape[0]
        )

    def symmetrize(self, values: jax.Array) -> jax.Array:
        """The values of ``(A + Aᴴ) / 2`` on the same pattern.

        Args:
            values: ``(nnz,)`` stored values of ``A``.

        Returns:
            ``(nnz,)``: each value averaged with the conjugate of its mirror.

        Raises:
            ValueError: if the pattern is not square, not structurally
                symmetric, or stores an entry twice.
        """
        return (values + jnp.conj(values[self._mirror])) / 2

    def todense(self, values: jax.Array) -> jax.Array:
        """The dense ``(n_rows, n_cols)`` matrix (duplicates are summed)."""
        dense = jnp.zeros(self.shape, values.dtype)
        return dense.at[self.rows, self.cols].add(values)

    @functools.cached_property
    def _mirror(self) -> np.ndarray:
        """``mirror[k]`` is the position of ``(cols[k], rows[k])``."""
        n_rows, n_cols = self.shape
        keys = self.rows.astype(np.int64) * n_cols + self.cols
        order = np.argsort(keys)
        if n_rows != n_cols or np.any(np.diff(keys[order]) == 0):
            raise ValueError(
                "SparsePattern.symmetrize: needs a square pattern without"
                f" duplicate entries, got shape {self.shape}."
            )
        mirror_keys = self.cols.astype(np.int64) * n_cols + self.rows
        found = np.searchsorted(keys[order], mirror_keys)
        found = np.minimum(found, self.nnz - 1)
        if np.any(keys[order][found] != mirror_keys):
            raise ValueError(
                "SparsePattern.symmetrize: the pattern is not structurally"
                " symmetric: some stored (i, j) has no stored (j, i)."
            )
        return order[found].astype(np.int32)
