"""`DenseFactor`: a factorization kept for several solves, log-determinants and derivatives.

Also the steps the Cholesky and LU routines share, written once for both *factorization
families*: factor ``A`` with a backend's services (`factorize`), solve with the kept factor
(`solve_with`), and the program bodies of ``cho_factor``/``lu_factor`` (`factor_body`) and of
``cho_solve``/``lu_solve`` with a factor (`factor_solve_body`). A family differs from the other
only in its `jaxsolve.autodiff` rules, which `_RULES` names.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxsolve import autodiff

from . import _backend
from ._arguments import Layout, constrain
from ._status import Status, fill_failed, status_of

# The jaxsolve.autodiff rules of each factorization family: how ``A`` is factored (keeping
# ``A`` beside its factor) and how ``A x = b`` is solved with that factor. Their derivative
# rules differ (Cholesky's treats ``Ȧ`` as Hermitian, LU's reverse mode solves with ``Aᵀ``);
# their signatures do not, which is what lets one code path serve both.
_RULES = {
    "cholesky": (autodiff.cholesky_factor, autodiff.cholesky_solve),
    "lu": (autodiff.lu_factor, autodiff.lu_solve),
}


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
      rcond: the factor's reciprocal condition estimate (`Status`'s ``rcond``), replicated.
      kind: ``"cholesky"`` or ``"lu"`` (static).
      layout: the mesh and specs of the matrix (static).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> factor = dense.cho_factor(jnp.array([[4., 2.], [2., 3.]]))
      >>> factor.kind, factor.status
      ('cholesky', Status(routine='cho_factor', info=0, rcond=0.5))
      >>> x = dense.cho_solve(factor, jnp.array([6., 5.]))
      >>> bool(jnp.allclose(x, jnp.array([1., 1.])))
      True
    """

    factorization: autodiff.Factorization
    rcond: jax.Array
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
        return status_of(routine, self.factorization.factor.info, self.matrix.shape[-1],
                         outputs=self.factorization.matrix,  # NaN or Inf in A: NOT_FINITE
                         rcond=self.rcond)


def check_factor(caller: str, factor: object, kind: str) -> DenseFactor:
    """`factor`, after checking it is a `DenseFactor` of `kind`."""
    maker = "cho_factor" if kind == "cholesky" else "lu_factor"
    if not isinstance(factor, DenseFactor) or factor.kind != kind:
        if isinstance(factor, DenseFactor):
            got = "a factor from " + ("cho_factor" if factor.kind == "cholesky" else "lu_factor")
        else:
            got = type(factor).__name__
        raise ValueError(f"{caller}: expected a factor from {maker}, got {got}.")
    shape = factor.matrix.shape
    if len(shape) != 2:
        raise ValueError(
            f"{caller}: the factor is a stack of {shape[:-2]} factors (its matrix has shape"
            f" {shape}), from jax.vmap({maker}); call {caller} inside jax.vmap too."
        )
    return factor


def placed_factor(factorization: autodiff.Factorization, rcond: jax.Array, kind: str,
                  layout: Layout) -> DenseFactor:
    """``factorization`` as a `DenseFactor`: its matrices split like ``A``, the rest replicated."""
    factor = jax.tree.map(
        lambda leaf: constrain(leaf, layout.sharding_for(leaf.shape)) if leaf.ndim == 2
        else constrain(leaf, layout.replicated()),
        factorization.factor)
    return DenseFactor(factorization._replace(factor=factor), rcond, kind, layout)


def factorize(kind: str, layout: Layout, a: jax.Array
              ) -> tuple[_backend.FactorServices, autodiff.Factorization]:
    """The backend's services of family `kind` and ``A``'s factorization by them.

    ``a`` is placed in `layout`'s matrix sharding first, so that the backend factors it where
    it lies. The result keeps ``A`` beside its factor: derivatives flow through ``A`` and every
    one of them reuses the factor (one more solve, never a second factorization).
    """
    services = _backend.services(kind, layout, a.dtype)
    a = constrain(a, layout.matrix_sharding())
    factor_rule, _ = _RULES[kind]
    return services, factor_rule(a, decompose=services.factor)


def solve_with(kind: str, services: _backend.FactorServices,
               factorization: autodiff.Factorization, b: jax.Array, layout: Layout) -> jax.Array:
    """``x = A⁻¹ b`` with a kept factor of family `kind`: NaN if it failed, split like ``b`` or
    replicated (`Layout.solution_sharding`).

    The solve is `jaxsolve.autodiff`'s rule for the family, so its derivatives are solves with
    the same factor (for LU's reverse mode, transposed ones).
    """
    b = constrain(b, layout.rhs_sharding())
    _, solve_rule = _RULES[kind]
    x = solve_rule(factorization, b, solve_with_factor=services.solve)
    (x,) = fill_failed(factorization.factor.info, x)
    return constrain(x, layout.solution_sharding())


def rcond(kind: str, services: _backend.FactorServices,
          factorization: autodiff.Factorization, layout: Layout) -> jax.Array:
    """The factor's reciprocal condition estimate (`Status`'s ``rcond``), replicated.

    ``min |dᵢ| / max |dᵢ|`` of the factor's diagonal ``d`` (``U``'s), squared for Cholesky
    (``A = L Lᴴ``: ``Lᵢᵢ²`` lie in ``[λ_min, λ_max]``); ``0`` when the factorization failed
    (LAPACK's ``RCOND = 0`` for ``info > 0``), NaN when the diagonal is not finite. ``O(n)``:
    ``n`` elements read, two reductions. Never differentiated.
    """
    info = factorization.factor.info
    magnitude = jnp.abs(services.diagonal(factorization.factor))
    largest = jnp.max(magnitude)
    ratio = jnp.where(jnp.isfinite(largest), jnp.min(magnitude) / largest, jnp.nan)
    estimate = ratio * ratio if kind == "cholesky" else ratio
    estimate = jnp.where(info > 0, jnp.zeros_like(estimate), estimate)
    return constrain(jax.lax.stop_gradient(estimate), layout.replicated())


def replicated_report(kind: str, services: _backend.FactorServices,
                      factorization: autodiff.Factorization, layout: Layout
                      ) -> tuple[jax.Array, jax.Array]:
    """The factorization's LAPACK ``info`` and its `rcond`, replicated on every device (for a
    `Status`)."""
    info = constrain(factorization.factor.info, layout.replicated())
    return info, rcond(kind, services, factorization, layout)


def factor_body(kind: str, layout: Layout, a: jax.Array) -> tuple[DenseFactor, tuple[()]]:
    """The program of ``cho_factor`` and ``lu_factor`` (for `run`): ``A``'s `DenseFactor`."""
    services, factorization = factorize(kind, layout, a)
    estimate = rcond(kind, services, factorization, layout)
    return placed_factor(factorization, estimate, kind, layout), ()


def factor_solve_body(kind: str, layout: Layout, factor: DenseFactor, b: jax.Array
                      ) -> tuple[tuple[jax.Array, jax.Array, jax.Array], tuple[()]]:
    """The program of ``cho_solve`` and ``lu_solve`` with a factor (for `run`): ``(x, info,
    rcond)``.

    Only the services' solve is used: the factor (and its ``rcond``) was computed by an earlier
    program.
    """
    services = _backend.services(kind, layout, b.dtype)
    x = solve_with(kind, services, factor.factorization, b, layout)
    info = constrain(factor.factorization.factor.info, layout.replicated())
    return (x, info, factor.rcond), ()
