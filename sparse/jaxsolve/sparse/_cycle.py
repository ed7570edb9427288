"""Multigrid cycles: one application of the AMG preconditioner ``r ↦ M⁻¹ r``.

A cycle on level ``ℓ`` for ``A_ℓ x = b``:

1. *pre-smooth*: ``presweeps`` relaxation sweeps from ``x = 0`` (the first sweep needs
   no product with ``A``);
2. *coarse-grid correction*: restrict the residual, ``r_c = R (b − A x)``, solve
   ``A_{ℓ+1} e = r_c`` approximately by cycling on level ``ℓ + 1`` — once (``V``), twice
   (``W``), or an F-cycle then a V-cycle (``F``) — and prolong, ``x ← x + P e``;
3. *post-smooth*: ``postsweeps`` sweeps, *backward*: ``MULTICOLOR_GS`` visits the colors
   in reverse order, so that post-smoothing is the adjoint of pre-smoothing (every other
   relaxation is its own adjoint).

The coarsest level is solved with its dense inverse (``DENSE_LU_SOLVER``), by
``coarse_iterations`` iterations of a Krylov method (``CG``, ``BICGSTAB``, ``GMRES``) or
smoothed ``coarsest_sweeps`` times (``NOSOLVER``: the first half of the sweeps forward,
the rest backward).  With equal pre- and post-sweeps and a dense coarsest level, or an
even number of coarsest sweeps, ``M⁻¹`` is symmetric for a symmetric ``A``, as
preconditioned CG needs (a Krylov coarse solve makes it depend on ``b`` nonlinearly, as
in AmgX).

AmgX sweeps a forward-only Gauss-Seidel (``symmetric_GS: 0``) forward in both pre- and
post-smoothing (its ``FixedCycle`` calls the same smoother for both, and only
``CF_JACOBI`` reads the direction it sets): a nonsymmetric ``M⁻¹`` with which PCG did
not converge in 500 iterations on the 3D Poisson problem (46³; 10 iterations here, as
hypre's and PyAMG's forward/backward pairs).

The recursion over levels unrolls at trace time (the number of levels is static), so a
cycle is straight-line code that XLA fuses across levels inside the Krylov loop.
"""

from __future__ import annotations

import jax

from ._hierarchy import Hierarchy
from ._krylov import KRYLOV_METHODS
from ._relaxation import relax, relax_forward_backward


def cycle(hierarchy: Hierarchy, b: jax.Array) -> jax.Array:
    """One cycle of ``hierarchy.config.cycle`` type from ``x = 0`` on the finest level.

    A hierarchy set up in single precision (``hierarchy_precision``) cycles on ``b``
    rounded to it, and the result returns in ``b``'s dtype.
    """
    dtype = hierarchy.coarsest.a.values.dtype
    x = _cycle(hierarchy, 0, b.astype(dtype), None, hierarchy.config.cycle)
    return x.astype(b.dtype)


def _cycle(hierarchy: Hierarchy, index: int, b: jax.Array, x: jax.Array | None,
           kind: str) -> jax.Array:
    config = hierarchy.config
    if index == len(hierarchy.levels):
        return _coarsest(hierarchy, b, x)
    level = hierarchy.levels[index]
    x = relax(level.a, level.smoother, config.smoother, b, x, config.presweeps)
    coarse_b = level.r.matvec(level.a.residual(x, b))
    if kind == "V":
        correction = _cycle(hierarchy, index + 1, coarse_b, None, "V")
    elif kind == "W":
        correction = _cycle(hierarchy, index + 1, coarse_b, None, "W")
        correction = _cycle(hierarchy, index + 1, coarse_b, correction, "W")
    else:  # F
        correction = _cycle(hierarchy, index + 1, coarse_b, None, "F")
        correction = _cycle(hierarchy, index + 1, coarse_b, correction, "V")
    x = level.p.matvec_plus(correction, x)
    return relax(level.a, level.smoother, config.smoother, b, x, config.postsweeps,
                 backward=True)


def _coarsest(hierarchy: Hierarchy, b: jax.Array, x: jax.Array | None) -> jax.Array:
    coarsest, config = hierarchy.coarsest, hierarchy.config
    if config.coarse_iterations is not None:  # AmgX's monitor_residual 0: no residual test
        method = KRYLOV_METHODS[config.coarse_solver]
        return method(coarsest.a.matvec, b, x, tolerance=0.0,
                      max_iters=config.coarse_iterations)[0]
    if coarsest.inverse is None:
        return relax_forward_backward(coarsest.a, coarsest.smoother, config.smoother, b, x,
                                      config.coarsest_sweeps)
    if x is None:
        return coarsest.inverse @ b
    return x + coarsest.inverse @ coarsest.a.residual(x, b)
