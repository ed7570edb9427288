"""Sparse matrix products ``C = A B`` on fixed patterns: symbolic once, numeric under jit.

The AMG setup multiplies sparse matrices (``A T``, ``A P``, ``Pᵀ (A P)``) whose patterns
are fixed once the aggregates are: only the values change when a user re-solves with new
values on the same pattern (a Newton step, an optimizer step).  So a product is split in
two, as the rest of the engine is:

* :func:`plan_product` (host, native code, once per pattern): the pattern of ``C``, its
  columns sorted within each row; :func:`plan_product_with_values` also sums ``C``'s
  values for concrete ones in the same pass (the classical setup's first Galerkin
  products, whose values the next level's strength needs).
* :meth:`ProductPlan.multiply` (jit-able, differentiable in the values).  On the CPU and on
  CUDA GPUs a native kernel walks the scalar products ``a_ij b_jl`` row by row of ``A`` and
  adds each into ``C[i, l]``, found in a table of row ``i``'s columns (CPU) or by a binary
  search of the row (GPU; :func:`._ffi_primitives.csr_product_values`).  The patterns of
  ``A``, ``B`` and ``C`` are all it reads besides the values: the hierarchy keeps no map from products to places in ``C``,
  which, at a byte a product, once made up a third of what it kept.  Elsewhere, and for the
  derivatives on every platform, XLA recomputes which entries of ``A`` and ``B`` each
  product reads from the patterns' index arrays, searches ``C``'s rows the same way, forms
  the products with two gathers and sums them into ``C`` with one segment sum (temporaries
  ``O(products)``); JAX transposes this formulation.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from . import _classical_kernels, _ffi_primitives, _pattern_kernels
from ._csr_arrays import CsrArrays, CsrStructure


@dataclasses.dataclass(frozen=True, eq=False)
class ProductPlan:
    """The patterns of ``C = A B``, on which its values follow from those of ``A`` and ``B``.

    Attributes:
      a: the pattern of ``A`` (m × n).
      b: the pattern of ``B`` (n × p).
      c: the pattern of ``C`` (m × p), columns sorted within each row.
      n_products: the number of scalar products ``a_ij b_jl``.
    """

    a: CsrStructure
    b: CsrStructure
    c: CsrStructure
    n_products: int

    def multiply(self, a: CsrArrays, b: CsrArrays, c_indices: jax.Array,
                 c_indptr: jax.Array) -> jax.Array:
        """The ``(nnz(C),)`` values of ``C = A B``.

        Args:
          a, b: ``A`` and ``B`` on this plan's patterns.
          c_indices, c_indptr: ``c``'s arrays on the device (passed in so that callers
            choose whether they are jit arguments or constants).
        """
        return _multiply(self, a.values, b.values, a.indices, a.indptr, b.indices, b.indptr,
                         c_indices, c_indptr)

    def multiply_in_xla(self, a_values: jax.Array, b_values: jax.Array, a_indices: jax.Array,
                        a_indptr: jax.Array, b_indices: jax.Array, b_indptr: jax.Array,
                        c_indices: jax.Array, c_indptr: jax.Array) -> jax.Array:
        """:meth:`multiply` in XLA's gathers and segment sum, linear in each factor."""
        if self.n_products == 0:
            return jnp.zeros(self.c.nnz, jnp.result_type(a_values, b_values))
        a = CsrArrays(a_values, a_indices, a_indptr)
        b_row_lengths = b_indptr[1:] - b_indptr[:-1]
        counts = b_row_lengths[a.indices]
        first = jnp.cumsum(counts) - counts  # the first product of each entry of A
        entry = jnp.repeat(
            jnp.arange(self.a.nnz, dtype=jnp.int32), counts,
            total_repeat_length=self.n_products,
        )
        within = jnp.arange(self.n_products, dtype=jnp.int32) - first[entry]
        b_entry = b_indptr[a.indices[entry]] + within
        row = a.row_ids[entry]
        c_entry = self._find_columns(c_indices, c_indptr[row], c_indptr[row + 1],
                                     b_indices[b_entry])
        products = a.values[entry] * b_values[b_entry]
        # Products come row by row of A, hence of C: the segment ids are grouped by row
        # but not sorted within one, so the sum cannot promise sorted indices.
        return jax.ops.segment_sum(products, c_entry, num_segments=self.c.nnz)

    def _find_columns(self, c_indices: jax.Array, begin: jax.Array, end: jax.Array,
                      column: jax.Array) -> jax.Array:
        """The position of each ``column`` among ``c_indices[begin:end]`` (sorted), by a
        binary search of as many steps as ``C``'s longest row needs."""
        longest = _longest_row(self.c)
        last = self.c.nnz - 1
        for _ in range(longest.bit_length()):
            mid = (begin + end) // 2
            searching = begin < end
            right = searching & (c_indices[jnp.minimum(mid, last)] < column)
            begin, end = jnp.where(right, mid + 1, begin), jnp.where(
                searching & ~right, mid, end)
        return begin


def _longest_row(pattern: CsrStructure) -> int:
    return int((pattern.indptr[1:] - pattern.indptr[:-1]).max(initial=0))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _multiply(plan: ProductPlan, a_values, b_values, a_indices, a_indptr, b_indices, b_indptr,
              c_indices, c_indptr):
    operands = (a_values, b_values, a_indices, a_indptr, b_indices, b_indptr, c_indices,
                c_indptr)

    def native(a_values, b_values, a_indices, a_indptr, b_indices, b_indptr, c_indices,
               c_indptr):
        return _ffi_primitives.csr_product_values(CsrArrays(a_values, a_indices, a_indptr),
                                                  CsrArrays(b_values, b_indices, b_indptr),
                                                  c_indices, c_indptr, n_cols=plan.c.n_cols)

    if _ffi_primitives.native_on_every_platform():
        return native(*operands)
    return jax.lax.platform_dependent(*operands, cpu=native, cuda=native,
                                      default=plan.multiply_in_xla)


@_multiply.defjvp
def _multiply_jvp(plan, primals, tangents):
    a_values, b_values, *pattern = primals
    d_a, d_b = tangents[:2]
    # Bilinear: d(AB) = dA B + A dB, each term in the XLA formulation JAX transposes.
    d_c = (plan.multiply_in_xla(d_a, b_values, *pattern)
           + plan.multiply_in_xla(a_values, d_b, *pattern))
    return _multiply(plan, *primals), d_c


def plan_product_with_values(a: CsrStructure, b: CsrStructure, a_values: np.ndarray,
                             b_values: np.ndarray) -> tuple[ProductPlan, np.ndarray]:
    """:func:`plan_product`, and ``C``'s values for concrete NumPy values of ``A`` and ``B``.

    One native pass forms both (the classical setup's first Galerkin products), the values
    bit for bit those :meth:`ProductPlan.multiply` computes on the CPU.
    """
    _check_fit(a, b)
    product, values = _pattern_kernels.spgemm_host(a_values, a.indptr, a.indices, b_values,
                                                   b.indptr, b.indices, b.n_cols, check=False)
    return _plan(a, b, product), values


def galerkin_products(a: CsrStructure, a_values: np.ndarray, p: CsrStructure,
                      p_values: np.ndarray, r: CsrStructure, r_from_p: np.ndarray,
                      ) -> tuple[ProductPlan, ProductPlan, np.ndarray]:
    """The plans of ``A P`` and ``R (A P)`` (``R = Pᴴ``), and the next level's values.

    For concrete values, on the host, by the native products that plan the patterns, so
    the values are bit for bit those a numeric setup on the CPU computes.
    """
    a_p, a_p_values = plan_product_with_values(a, p, a_values, p_values)
    r_values = p_values[r_from_p]
    if np.iscomplexobj(r_values):
        np.conjugate(r_values, out=r_values)
    galerkin, values = plan_product_with_values(r, a_p.c, r_values, a_p_values)
    return a_p, galerkin, values


def transpose_offsets(p: CsrStructure, r: CsrStructure, r_from_p: np.ndarray) -> np.ndarray:
    """Where each entry of ``R = Pᴴ`` (``r``, ``r_from_p`` from :meth:`CsrStructure.transposed`)
    sits in its row of ``P``: its offset from the row's start, of the narrowest unsigned
    dtype that holds ``P``'s longest row (:func:`._classical_kernels.offset_dtype`).

    What a re-setup reads to take ``P``'s values to ``R``'s (:func:`transposed_values`):
    a byte an entry on most levels (a truncated ``P`` keeps a few weights a row), where
    ``r_from_p``'s int32 positions took four.

    >>> p = CsrStructure(np.array([0, 2, 3]), np.array([0, 1, 1]), 2)  # [[x, y], [0, z]]
    >>> r, r_from_p = p.transposed()
    >>> r_from_p.tolist(), transpose_offsets(p, r, r_from_p).tolist()
    ([0, 1, 2], [0, 1, 0])
    """
    dtype = _classical_kernels.offset_dtype(_longest_row(p))
    return (r_from_p - p.indptr[r.indices]).astype(dtype)


def transposed_values(p: CsrArrays, r_indices: jax.Array, r_offsets: jax.Array) -> jax.Array:
    """The values of ``R = Pᴴ`` on its pattern (jit-able): ``R``'s entry in row ``c`` and
    column ``i`` is the conjugate of ``P``'s at ``r_offsets`` (:func:`transpose_offsets`)
    in row ``i``. Padding entries (column 0, offset 0) read ``P``'s first value."""
    positions = p.indptr[r_indices] + r_offsets.astype(p.indptr.dtype)
    return jnp.conj(p.values[positions])


def plan_product(a: CsrStructure, b: CsrStructure) -> ProductPlan:
    """The :class:`ProductPlan` of ``A B`` for the patterns ``a`` (m × n) and ``b`` (n × p)."""
    _check_fit(a, b)
    product = _pattern_kernels.spgemm_symbolic(a.indptr, a.indices, b.indptr, b.indices, b.n_cols,
                                               check=False)  # patterns the setup made
    return _plan(a, b, product)


def _check_fit(a: CsrStructure, b: CsrStructure) -> None:
    if a.n_cols != b.n_rows:
        raise ValueError(f"cannot multiply patterns of {a.n_rows}×{a.n_cols} and"
                         f" {b.n_rows}×{b.n_cols} matrices.")


def _plan(a: CsrStructure, b: CsrStructure, product: _pattern_kernels.SpgemmPattern) -> ProductPlan:
    return ProductPlan(a=a, b=b, c=CsrStructure(product.indptr, product.indices, b.n_cols),
                       n_products=product.n_products)
