"""Sparse matrix products ``C = A B`` on fixed patterns: symbolic once, numeric under jit.

The AMG setup multiplies sparse matrices (``A T``, ``A P``, ``Pᵀ (A P)``) whose patterns
are fixed once the aggregates are: only the values change when a user re-solves with new
values on the same pattern (a Newton step, an optimizer step).  So a product is split in
two, as the rest of the engine is:

* :func:`plan_product` (host, NumPy, once per pattern): the pattern of ``C`` and, for each
  scalar product ``a_it · b_jk`` that contributes to it, where in ``C`` it lands.  Products
  are enumerated row by row of ``A``, entry by entry of that row, entry by entry of the
  matching row of ``B``; the plan stores only each product's position *within its row of
  C* (one byte for most matrices; ``uint16``/``int32`` when rows are longer).
* :meth:`ProductPlan.multiply` (jit-able, differentiable in the values).  On the CPU a
  native kernel walks the products row by row and adds each into its place (a few
  nanoseconds a product, no temporaries).  Elsewhere XLA recomputes which entries of ``A``
  and ``B`` each product reads from the patterns' own index arrays, forms the products with
  two gathers and sums them into ``C`` with one segment sum (temporaries ``O(products)``);
  this formulation is also the derivative of both.  What the plan keeps is one small
  integer per product.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from . import _native
from ._csr_arrays import CsrArrays, CsrStructure


@dataclasses.dataclass(frozen=True, eq=False)
class ProductPlan:
    """How the values of ``C = A B`` follow from those of ``A`` and ``B`` on fixed patterns.

    Attributes:
      a: the pattern of ``A`` (m × n).
      b: the pattern of ``B`` (n × p).
      c: the pattern of ``C`` (m × p), columns sorted within each row.
      offsets: for each scalar product, its position within its row of ``C``.
    """

    a: CsrStructure
    b: CsrStructure
    c: CsrStructure
    offsets: np.ndarray

    @property
    def n_products(self) -> int:
        return self.offsets.shape[0]

    def multiply(self, a: CsrArrays, b: CsrArrays, c_indptr: jax.Array,
                 offsets: jax.Array) -> jax.Array:
        """The ``(nnz(C),)`` values of ``C = A B``.

        Args:
          a, b: ``A`` and ``B`` on this plan's patterns.
          c_indptr, offsets: ``c.indptr`` and :attr:`offsets` as device arrays (passed in
            so that callers choose whether they are jit arguments or constants).
        """
        return _multiply(self, a.values, b.values, a.indices, a.indptr, b.indptr, c_indptr,
                         offsets)

    def multiply_in_xla(self, a_values: jax.Array, b_values: jax.Array, a_indices: jax.Array,
                        a_indptr: jax.Array, b_indptr: jax.Array, c_indptr: jax.Array,
                        offsets: jax.Array) -> jax.Array:
        """:meth:`multiply` in XLA's gathers and segment sum, linear in each factor."""
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
        c_entry = c_indptr[a.row_ids[entry]] + offsets.astype(jnp.int32)
        products = a.values[entry] * b_values[b_entry]
        # Products come row by row of A, hence of C: the segment ids are grouped by row
        # but not sorted within one, so the sum cannot promise sorted indices.
        return jax.ops.segment_sum(products, c_entry, num_segments=self.c.nnz)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _multiply(plan: ProductPlan, a_values, b_values, a_indices, a_indptr, b_indptr,
              c_indptr, offsets):
    operands = (a_values, b_values, a_indices, a_indptr, b_indptr, c_indptr, offsets)

    def native(a_values, b_values, a_indices, a_indptr, b_indptr, c_indptr, offsets):
        return _native.csr_product_values(a_values, a_indices, a_indptr, b_values, b_indptr,
                                          c_indptr, offsets, nnz_c=plan.c.nnz)

    return jax.lax.platform_dependent(*operands, cpu=native, default=plan.multiply_in_xla)


@_multiply.defjvp
def _multiply_jvp(plan, primals, tangents):
    a_values, b_values, *pattern = primals
    d_a, d_b = tangents[:2]
    # Bilinear: d(AB) = dA B + A dB, each term in the XLA formulation JAX transposes.
    d_c = (plan.multiply_in_xla(d_a, b_values, *pattern)
           + plan.multiply_in_xla(a_values, d_b, *pattern))
    return _multiply(plan, *primals), d_c


def plan_product(a: CsrStructure, b: CsrStructure) -> ProductPlan:
    """The :class:`ProductPlan` of ``A B`` for the patterns ``a`` (m × n) and ``b`` (n × p)."""
    if a.n_cols != b.n_rows:
        raise ValueError(f"cannot multiply patterns of {a.n_rows}×{a.n_cols} and"
                         f" {b.n_rows}×{b.n_cols} matrices.")
    product = _native.spgemm_symbolic(a.indptr, a.indices, b.indptr, b.indices, b.n_cols)
    return ProductPlan(a=a, b=b, c=CsrStructure(product.indptr, product.indices, b.n_cols),
                       offsets=product.offsets)
