"""`DenseFactor`: a factorization kept for several solves, log-determinants and derivatives."""

from __future__ import annotations

import dataclasses

import jax

from jaxsolve import autodiff

from ._layout import Layout, constrain
from ._status import Status, status_of


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, eq=False)
class DenseFactor:
    """A matrix and its distributed factor, from `cho_factor` or `lu_factor`.

    Factor once, then solve, take log-determinants and differentiate as often as needed: every
    derivative of `cho_solve`, `logdet` or `lu_solve` reuses this factor (one more solve each),
    through `jaxsolve.autodiff`'s factorization rules. The factor stays on the caller's mesh, in
    the matrix's sharding.

    A `DenseFactor` is a pytree: it can be returned from ``jax.jit``, passed into it, and
    stacked by ``jax.vmap``. Its fields are for jaxsolve; treat it as opaque.

    Attributes:
      factorization: a `jaxsolve.autodiff.Factorization`: the matrix ``A`` (through which
        derivatives flow) and the backend's factor (never differentiated).
      kind: ``"cholesky"`` or ``"lu"`` (static).
      layout: the mesh and specs of the matrix (static).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> factor = dense.cho_factor(jnp.array([[4., 2.], [2., 3.]]))
      >>> factor.kind, factor.status
      ('cholesky', Status(routine='cho_factor', info=0))
      >>> x = dense.cho_solve(factor, jnp.array([6., 5.]))
      >>> bool(jnp.allclose(x, jnp.array([1., 1.])))
      True
    """

    factorization: autodiff.Factorization
    kind: str = dataclasses.field(metadata=dict(static=True))
    layout: Layout = dataclasses.field(metadata=dict(static=True))

    @property
    def matrix(self) -> jax.Array:
        """The factored matrix ``A``."""
        return self.factorization.matrix

    @property
    def status(self) -> Status:
        """The factorization's `Status` (``cho_factor`` or ``lu_factor``)."""
        routine = "cho_factor" if self.kind == "cholesky" else "lu_factor"
        return status_of(routine, self.factorization.factor.info)


def check_factor(caller: str, factor: object, kind: str) -> DenseFactor:
    """`factor`, after checking it is a `DenseFactor` of `kind`."""
    maker = "cho_factor" if kind == "cholesky" else "lu_factor"
    if not isinstance(factor, DenseFactor) or factor.kind != kind:
        if isinstance(factor, DenseFactor):
            got = "a factor from " + ("cho_factor" if factor.kind == "cholesky" else "lu_factor")
        else:
            got = type(factor).__name__
        raise ValueError(f"{caller}: expected a factor from {maker}, got {got}.")
    return factor


def placed_factor(factorization: autodiff.Factorization, kind: str,
                  layout: Layout) -> DenseFactor:
    """``factorization`` as a `DenseFactor`: its matrices split like ``A``, the rest replicated."""
    factor = jax.tree.map(
        lambda leaf: constrain(leaf, layout.sharding_for(leaf.shape)) if leaf.ndim == 2
        else constrain(leaf, layout.replicated()),
        factorization.factor)
    return DenseFactor(factorization._replace(factor=factor), kind, layout)
