"""The derivatives of a sparse solve: each path of `solve` hands its solve to `linear_solve`.

``x = A⁻¹ b`` is not differentiated through the Krylov loop. :func:`jaxsolve.autodiff.
linear_solve` gives its derivatives by the implicit function theorem, at the cost of one more
solve per direction: forward mode solves ``A ẋ = ḃ − Ȧ x``, reverse mode ``Aᵀ b̄ = x̄`` (``A``'s
own solve for ``CG``, whose ``A`` is Hermitian) and forms the values' cotangent ``−b̄ xᵀ`` on
``A``'s pattern only. Every path of :func:`solve` (one device, a sharded ``A`` on one host,
MPI processes) gives it the same three things, made here:

* an operator ``(values, numbers)``: ``A``'s stored values, the only differentiated leaf,
  and the numbers of its setup (arguments of the compiled solve, not constants);
* a *service* ``(operator, rhs) ↦ (x, info)`` for ``A`` and, unless ``A`` is Hermitian, one
  for ``Aᵀ`` whose numbers are set up only when reverse mode calls it (:func:`service`);
* a ``matvec(operator, x)`` that JAX differentiates and transposes, from which the
  derivatives with respect to the values are formed (:func:`differentiable_solve`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from jaxsolve import autodiff

from ._status import SolveInfo

Service = Callable[[tuple, jax.Array], tuple[jax.Array, SolveInfo]]


def service(run: Callable[[jax.Array, Any, jax.Array], tuple[jax.Array, SolveInfo]],
            own_numbers: Callable[[], Any] | None = None) -> Service:
    """The service of a path's compiled solve ``run(values, numbers, rhs) -> (x, info)``.

    Its operator is ``(values, numbers)``. ``own_numbers``: a callable giving the numbers of
    the transpose, called when the service is (so that ``Aᵀ`` is set up only for a reverse
    mode), or None to take the operator's.
    """

    def solve(operator: tuple, rhs: jax.Array) -> tuple[jax.Array, SolveInfo]:
        values, numbers = operator
        if own_numbers is not None:
            numbers = own_numbers()
        return run(values, numbers, rhs)

    return solve


def differentiable_solve(operator: Any, rhs: jax.Array, *, matvec, solve: Service,
                         transpose_solve: Service | None, hermitian: bool, symmetrize,
                         derivative: str) -> tuple[jax.Array, SolveInfo]:
    """``A⁻¹ rhs`` by ``solve``, differentiable through `jaxsolve.autodiff.linear_solve`
    (``derivative``: ``"implicit"``, forward and reverse mode, or ``"adjoint"``)."""
    return autodiff.linear_solve(
        operator, rhs, solve=solve, transpose_solve=transpose_solve, matvec=matvec,
        symmetric=hermitian, symmetrize=symmetrize,
        mode="jvp" if derivative == "implicit" else "adjoint", has_aux=True,
    )


def solve_from(operator: Any, b: jax.Array, x0: jax.Array | None, *, matvec, solve: Service,
               transpose_solve: Service | None, hermitian: bool, symmetrize, derivative: str
               ) -> tuple[jax.Array, SolveInfo]:
    """``x = A⁻¹ b`` by :func:`differentiable_solve`, from an initial guess ``x0``.

    ``x0`` enters as the right-hand side of the correction ``A δ = b − A x0`` (it gets no
    derivative); the distributed paths' solves.
    """
    rhs = b if x0 is None else b - matvec(operator, x0)
    correction, info = differentiable_solve(
        operator, rhs, matvec=matvec, solve=solve, transpose_solve=transpose_solve,
        hermitian=hermitian, symmetrize=symmetrize, derivative=derivative)
    return (correction if x0 is None else x0 + correction), info
