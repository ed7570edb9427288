"""The two halves of a sparse matrix inside the AMG engine: host pattern, device arrays.

* :class:`CsrStructure` is a CSR pattern as NumPy arrays on the host, where the setup
  (aggregation, symbolic products) works on it.
* :class:`CsrArrays` is a CSR matrix as device arrays, values and indices alike: a pytree
  whose leaves a cached hierarchy keeps on the device and that a solve can take as jit
  arguments rather than as constants baked into the compiled program.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _ffi_primitives, _pattern_kernels


@dataclasses.dataclass(frozen=True, eq=False)
class CsrStructure:
    """A CSR pattern on the host: int32 ``indptr`` (n_rows + 1,) and ``indices`` (nnz,)."""

    indptr: np.ndarray
    indices: np.ndarray
    n_cols: int

    @property
    def n_rows(self) -> int:
        return self.indptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        return self.indices.shape[0]

    @property
    def row_ids(self) -> np.ndarray:
        """The row of each stored entry."""
        return np.repeat(np.arange(self.n_rows, dtype=np.int32), np.diff(self.indptr))

    def transposed(self) -> tuple[CsrStructure, np.ndarray]:
        """The pattern of the transpose and the permutation taking values to it."""
        # A counting sort by column that keeps rows ascending within each column (SciPy's
        # CSR -> CSC, over the cores).
        indptr, indices, permutation = _pattern_kernels.csr_transpose(self.indptr, self.indices,
                                                                      self.n_cols)
        return CsrStructure(indptr, indices, self.n_rows), permutation

    def diagonal_positions(self) -> np.ndarray:
        """For each row, the position of its diagonal entry, or -1 where none is stored.

        Computed once per pattern (the setup asks for the finest pattern's twice); read-only.
        """
        return self._diagonal_positions

    @functools.cached_property
    def _diagonal_positions(self) -> np.ndarray:
        positions = _pattern_kernels.find_in_rows(self.indptr, self.indices, None,
                                                  min(self.n_rows, self.n_cols))
        positions.flags.writeable = False
        return positions

    def on_device(self, values: jax.Array) -> CsrArrays:
        """This pattern with ``values`` as a :class:`CsrArrays`."""
        return CsrArrays(
            values=values, indices=jax.device_put(self.indices), indptr=jax.device_put(self.indptr)
        )


class PatternArrays(NamedTuple):
    """A pattern on the device for a solve without AMG (whose hierarchy's structure holds
    its own): ``matrix``, its index arrays with the nonzeros padded to a size class
    (placeholder values), ``diagonal``, each row's diagonal position, and ``nnz``, the
    pattern's own nonzeros."""

    matrix: CsrArrays
    diagonal: jax.Array
    nnz: int


class CsrArrays(NamedTuple):
    """A CSR matrix as device arrays: ``values``, int32 ``indices`` and ``indptr``."""

    values: jax.Array
    indices: jax.Array
    indptr: jax.Array

    @property
    def n_rows(self) -> int:
        return self.indptr.shape[-1] - 1

    @property
    def row_ids(self) -> jax.Array:
        """The row of each stored entry, expanded from ``indptr`` when a setup needs it
        (entries past the last row's end, a size class's padding, get the last row).

        Not stored: it would cost as much memory as ``indices``, and only the setup, not
        the solve's products, reads it.  Counted as the rows that end at or before each
        entry (one scatter and one cumulative sum), where ``jnp.repeat`` takes two
        cumulative sums: half the compilation (0.17 against 0.33 s on a CPU), as fast.

        Counted when the program runs, also from a concrete ``indptr`` (a matrix closed
        over by a caller's jit): behind the barrier XLA cannot constant-fold the cumulative
        sum, which took seconds of compile time at 65 536 rows.
        """
        indptr = jax.lax.optimization_barrier(self.indptr)
        ends = jnp.zeros(self.indices.shape[-1], jnp.int32).at[indptr[1:-1]].add(
            1, mode="drop")
        return jnp.cumsum(ends, dtype=jnp.int32)

    def matvec(self, x: jax.Array) -> jax.Array:
        """``A x`` for ``x`` of shape ``(n_cols,)``, by the native CSR kernel.

        Measured on 3D Poisson, the native kernel (``_ffi_primitives.csr_matvec``) beats JAX's
        gather and sorted segment sum on both platforms (2.3× on two CPU cores at 64³; see
        ``tools/bench/sparse_spmv.py`` for the GPU), so the engine uses it everywhere.
        """
        return _ffi_primitives.csr_matvec(self.values, self.indices, self.indptr,
                                          x.astype(self.values.dtype), n_rows=self.n_rows)

    # The cycle's updates, each formed by the product's kernel as it writes ``A x``
    # (``_ffi_primitives.csr_update_unchecked``): one pass over the vectors instead of three.
    # Operands are of the values' dtype and shaped like ``A x``.

    def residual(self, x: jax.Array, b: jax.Array) -> jax.Array:
        """``b − A x``."""
        return self._update(x, rhs=b, subtract=True)

    def matvec_plus(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``A x + y``: a prolongation added to an iterate."""
        return self._update(x, base=y)

    def scaled_matvec(self, x: jax.Array, scale: jax.Array) -> jax.Array:
        """``scale ⊙ (A x)``, ``scale`` one number per row: a power iteration's step."""
        return self._update(x, weight=scale)

    def minus_scaled_matvec(self, x: jax.Array, scale: jax.Array, y: jax.Array) -> jax.Array:
        """``y − scale ⊙ (A x)``: a Chebyshev step's residual update."""
        return self._update(x, weight=scale, base=y, subtract=True)

    def relaxation_sweep(self, x: jax.Array, b: jax.Array, scale: jax.Array) -> jax.Array:
        """``x + scale ⊙ (b − A x)``: a Jacobi sweep, ``scale`` one number per row."""
        return self._update(x, rhs=b, weight=scale, base=x, subtract=True)

    def _update(self, x: jax.Array, **update: jax.Array | bool) -> jax.Array:
        return _ffi_primitives.csr_update_unchecked(self.values, self.indices, self.indptr,
                                                    x.astype(self.values.dtype), **update)
