"""Krylov methods (CG, BiCGSTAB, GMRES, FGMRES) and the stationary iteration as while loops.

Each method solves ``A x = b`` for a linear ``matvec(v) = A v`` with an
optional preconditioner ``precondition(r) = M⁻¹ r`` and returns
``(x, info)``, ``info`` a :class:`~jaxsolve.sparse._status.SolveInfo`.  The
methods, their stopping rules and their status codes follow AmgX (``PCG``,
``PBICGSTAB``, ``GMRES``, ``FGMRES``), so JAX-AMG configurations carry over.

**Static shapes.** Every array in the loop has a shape fixed at trace time:
``max_iters`` fixes the length of ``residual_history`` (when
``store_history`` asks for it) and ``restart`` the GMRES basis.  One
iteration is one step of the loop (BiCGSTAB's two, half an iteration each), so the
methods compile once and run under ``jit``, and each compiles its ``matvec`` and
``precondition`` once (an AMG cycle is most of a solve's program).  ``max_iters`` is at most ``2**31 - 1`` (:data:`MAX_ITERS`: the
iterations are counted in int32).

**Scaling.** Each method solves for the correction ``x - x_0`` from
``A δ = r_0``, with ``r_0`` divided by the power of two nearest below
``‖r_0‖₂``, a norm computed as LAPACK's ``nrm2`` computes one: rescaled where
the plain sum of squares would underflow or overflow.  Dividing by a power of
two is exact, so the iterates are those of the unscaled method, while every
norm and inner product in the loop stays far from the dtype's limits: a
right-hand side of ``1e-30`` or ``1e30`` (f32) solves as one of ``1`` does.
The ``L1`` and ``LMAX`` norms of the test square nothing, and on the scaled vectors
they lie between ``‖·‖₂ / √n`` and ``√n ‖·‖₂``: far from the limits too.

**Stopping.** With ``r_k = b - A x_k`` (the method's recurrence residual) and
``‖·‖`` the norm of the test (``norm``: AmgX's ``"L2"``, the default, ``"L1"``,
``Σ|v_i|``, or ``"LMAX"``, ``max |v_i|``), iteration stops with

* ``SUCCESS`` when ``‖r_k‖ <= tolerance · ‖r_0‖`` (``"RELATIVE_INI"``, the
  default), ``‖r_k‖ <= tolerance`` (``"ABSOLUTE"``), ``‖r_k‖ <= tolerance ·
  max_{j<=k} ‖r_j‖`` (``"RELATIVE_MAX"``, AmgX's: relative to the largest residual
  norm the test has seen, ``‖r_0‖`` included, so never stricter than RELATIVE_INI)
  or ``‖r_k‖ <= max(tolerance, alt_rel_tolerance · ‖r_0‖)``
  (``"COMBINED_REL_INI_ABS"``, AmgX's: an absolute or a relative tolerance, whichever
  is met first);
* ``DIVERGED`` when ``‖r_k‖`` is NaN/Inf or exceeds
  ``DIVERGENCE_FACTOR = 1e10`` times ``‖r_0‖``;
* ``FAILED`` when the method breaks down (a zero denominator its theory
  excludes, or a non-positive ``pᴴAp`` or ``rᴴM⁻¹r`` in CG) or ``r_0`` is not
  finite;
* ``NOT_CONVERGED`` after ``max_iters`` iterations.

**The true residual.** In finite precision the recurrence residual drifts from
``b - A x``, and can meet a tolerance the true residual cannot reach (in float32
the attainable relative residual is about ``eps · κ(A)``: 1.5e-5 for a 32 × 32
Poisson matrix).  So a ``SUCCESS`` is checked once, after the loop, with one
``matvec``: it stands if ``‖b - A x‖`` meets the tolerance, or if ``x`` is as
accurate as the dtype allows, a normwise backward error
``‖b - A x‖ / (‖A‖ ‖x‖ + ‖b‖) <= c · eps`` (``c`` =
:data:`ATTAINABLE_BACKWARD_ERROR` = 16, ``‖A‖`` estimated; see
:func:`_accuracy`); either way ``info.residual`` is the true residual, which may
then lie above the tolerance.  Otherwise the recurrence drifted (a residual
peak far above ``‖r_0‖`` leaves rounding errors of that size): the method
restarts once from ``x`` with ``r = b - A x`` (residual replacement; the
iterations keep counting toward ``max_iters``; GMRES simply runs another
cycle), and a second miss ends ``NOT_CONVERGED`` with ``ACCURACY_LIMIT``.

**What comes back.** A solve never returns an ``x`` worse than ``x_0``.  CG,
BiCGSTAB and the stationary iteration, whose residuals can grow, return the
iterate with the smallest residual norm they met (``x_0`` included; on
``SUCCESS`` the last, the first to meet the tolerance), and ``info.residual``
is that iterate's; this is what a breakdown, a divergence or an indefinite
preconditioner leaves.  Their loops carry no copy of that iterate (it would cost
passes over two vectors every iteration): when the last iterate is not the best,
the same steps run again from the start up to the best one (:func:`_best_iterate`),
so only a failed solve pays, in iterations.  GMRES and FGMRES return their last
iterate, whose residual is the smallest over its Krylov space and so never above
``‖r_0‖``; a cycle that meets NaN or Inf keeps the iterate before it.

A zero right-hand side returns ``x = 0`` after 0 iterations.

**vmap.** ``jax.vmap`` of a method is still *one* ``while_loop``: it runs
until every column has stopped, and a column that has stopped keeps its
``x``, its iteration count and its status (JAX masks the batched loop's
carry).  Every column pays for the matvecs of the slowest one.

**Gradients.** The loops are not meant to be differentiated (reverse mode
through ``while_loop`` is not defined); differentiate a solve implicitly with
``jaxsolve.autodiff.linear_solve``, which calls these methods as services.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._index_hash import index_hash
from ._status import DIVERGENCE_FACTOR, FailureReason, SolveInfo, Status

Convergence = Literal["RELATIVE_INI", "ABSOLUTE", "RELATIVE_MAX", "COMBINED_REL_INI_ABS"]
CONVERGENCE_TESTS = ("RELATIVE_INI", "ABSOLUTE", "RELATIVE_MAX", "COMBINED_REL_INI_ABS")
"""The convergence tests the methods take (AmgX's names)."""
Norm = Literal["L2", "L1", "LMAX"]
NORMS = ("L2", "L1", "LMAX")
"""The norms of the convergence test the methods take by name (AmgX's ``norm`` values)."""
ALT_REL_TOLERANCE = 1e-12
"""``alt_rel_tolerance``'s default: AmgX's, the relative tolerance of COMBINED_REL_INI_ABS."""
_RUNNING = -1  # the status of a solve still iterating; never returned
MAX_ITERS = 2**31 - 1
"""The largest ``max_iters`` a method accepts: its iterations are counted in int32."""


class _Problem(NamedTuple):
    """What every iteration of one solve needs (closed over, not carried).

    The loop solves ``A δ = b`` for ``b = r_0 / 2^e`` (see "Scaling" above) from ``δ = 0``;
    every norm below is of such scaled vectors, and :meth:`solution` undoes the scaling.
    """

    matvec: Callable[[jax.Array], jax.Array]
    precondition: Callable[[jax.Array], jax.Array]
    b: jax.Array  # r_0 / 2^e
    threshold: jax.Array  # the initial _Progress.threshold (scaled)
    max_tolerance: jax.Array | None  # RELATIVE_MAX's tolerance, else None
    r0_norm: jax.Array  # ‖b‖ (the test's norm)
    scale: jax.Array  # ‖b‖, or 1 when r_0 = 0: relative residual = ‖r‖ / scale
    max_iters: int  # sizes the history
    iteration_limit: int | jax.Array  # stop after this many iterations; <= max_iters
    inner: Callable[[jax.Array, jax.Array], jax.Array]  # (u, v) ↦ uᴴ v
    test_norm: Callable[[jax.Array], jax.Array] | None  # the test's norm; None: the 2-norm
    store_history: bool
    x0: jax.Array | None  # None: a zero initial guess
    exponent: jax.Array  # e

    def norm(self, v: jax.Array) -> jax.Array:
        """``‖v‖`` in the convergence test's norm (reduced over devices for a sharded solve)."""
        return self.two_norm(v) if self.test_norm is None else self.test_norm(v)

    def two_norm(self, v: jax.Array) -> jax.Array:
        """``‖v‖₂`` from the inner product (summed over devices for a sharded solve)."""
        return jnp.sqrt(self.inner(v, v).real)

    def solution(self, correction: jax.Array) -> jax.Array:
        """``x_0 + 2^e δ``: the iterate of the unscaled system."""
        x = _times_power_of_two(correction, self.exponent)
        return x if self.x0 is None else self.x0 + x


class _Progress(NamedTuple):
    """The bookkeeping every method carries through its loop."""

    iterations: jax.Array
    status: jax.Array
    reason: jax.Array
    residual_norm: jax.Array
    history: jax.Array  # (max_iters + 1,) when stored, else (0,)
    best_norm: jax.Array  # the smallest residual norm so far (‖r_0‖ included)
    latest_is_best: jax.Array  # whether the latest iterate's residual norm is best_norm
    best_iteration: jax.Array  # the iteration whose iterate has best_norm (the latest such)
    threshold: jax.Array  # stop when ‖r‖ <= threshold; RELATIVE_MAX raises it as ‖r‖ grows


def cg(
    matvec: Callable[[jax.Array], jax.Array],
    b: jax.Array,
    x0: jax.Array | None = None,
    *,
    precondition: Callable[[jax.Array], jax.Array] | None = None,
    tolerance: float | jax.Array = 1e-6,
    max_iters: int = 1000,
    convergence: Convergence = "RELATIVE_INI",
    norm: Norm | Callable[[jax.Array], jax.Array] = "L2",
    alt_rel_tolerance: float | jax.Array = ALT_REL_TOLERANCE,
    inner_product: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
    store_history: bool = False,
    iteration_limit: jax.Array | None = None,
) -> tuple[jax.Array, SolveInfo]:
    r"""Solves ``A x = b`` for a Hermitian positive definite ``A`` by (P)CG.

    The conjugate gradient method (AmgX's ``PCG``; equivalent to
    ``scipy.sparse.linalg.cg``) minimizes the ``A``-norm of the error over
    the Krylov space ``x_0 + span{M⁻¹r_0, (M⁻¹A) M⁻¹r_0, ...}``.  Per
    iteration it does one ``matvec``, one ``precondition`` and two inner
    products.  ``A`` and the preconditioner ``M⁻¹`` must be Hermitian
    positive definite; if it meets ``pᴴAp <= 0`` or ``rᴴM⁻¹r <= 0`` it stops
    with ``FAILED`` (``NOT_POSITIVE_DEFINITE`` or
    ``PRECONDITIONER_NOT_POSITIVE_DEFINITE``) and returns the iterate with
    the smallest residual norm it met (``x0`` if none was better): an
    indefinite preconditioner (an AMG whose smoother diverges) leaves the
    caller no worse off than before the solve.

    Args:
        matvec: ``v ↦ A v`` on vectors of shape ``(n,)`` (for a
            :class:`CsrMatrix` ``A``, pass ``A.matvec``).
        b: ``(n,)`` right-hand side (float or complex; integers are cast to
            the default float dtype).  The solve runs in the common dtype of
            ``b``, ``x0`` and ``matvec``'s output.
        x0: ``(n,)`` initial guess; zeros by default.
        precondition: ``r ↦ M⁻¹ r`` with ``M ≈ A``, e.g. :func:`jacobi`;
            the identity by default.
        tolerance: the convergence tolerance (see ``convergence``).
        max_iters: the most iterations (a static int, at most
            ``2**31 - 1``).
        convergence: ``"RELATIVE_INI"``: stop when
            ``‖r_k‖ <= tolerance · ‖r_0‖``; ``"ABSOLUTE"``: when
            ``‖r_k‖ <= tolerance``; ``"RELATIVE_MAX"``: when ``‖r_k‖ <=
            tolerance · max_{j<=k} ‖r_j‖``; ``"COMBINED_REL_INI_ABS"``: when
            ``‖r_k‖ <= tolerance`` or ``‖r_k‖ <= alt_rel_tolerance · ‖r_0‖``.
        norm: the norm of the convergence test, AmgX's ``"L2"`` (``‖v‖₂``),
            ``"L1"`` (``Σ|v_i|``) or ``"LMAX"`` (``max |v_i|``); or, with an
            ``inner_product`` over devices, a callable ``v ↦ ‖v‖`` that reduces over
            them as well (``info.residual`` and ``info.initial_residual`` are in
            this norm).
        alt_rel_tolerance: the relative tolerance of ``"COMBINED_REL_INI_ABS"``
            (AmgX's key and default, 1e-12); other tests ignore it.
        inner_product: ``(u, v) ↦ uᴴ v`` on vectors of shape ``(n,)``;
            ``jnp.vdot`` by default.  A solve over the shards of a vector under
            ``jax.shard_map`` passes one that sums the local products over the
            devices (``lax.psum``), so that every device takes the same steps.
        store_history: keep ``info.residual_history``, ``max_iters + 1``
            relative residual norms (static; AmgX's ``store_res_history``).
            Off, the history is an empty ``(0,)`` array and the loop carries
            no array whose size grows with ``max_iters``.
        iteration_limit: the most iterations as a value, possibly traced, at most
            ``max_iters`` (which still sizes the history): ``max_iters`` by default;
            0 starts no iteration (a program that chooses its method at run time
            skips CG so).

    Returns:
        ``(x, info)``: the ``(n,)`` solution and a :class:`SolveInfo`.

    Raises:
        TypeError: if ``matvec`` or ``precondition`` is not callable.
        ValueError: for a ``b`` that is not a vector, an ``x0`` of another
            shape, a ``matvec``/``precondition`` that does not map ``(n,)``
            to ``(n,)``, or invalid ``tolerance``, ``max_iters`` (not an
            int from 0 to ``2**31 - 1``), ``convergence``, ``norm`` or
            ``alt_rel_tolerance``.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxsolve import sparse
        >>> A = sparse.as_csr(jnp.array([[4., 1., 0.], [1., 4., 1.], [0., 1., 4.]]))
        >>> b = jnp.array([1., 2., 3.])
        >>> x, info = sparse.cg(A.matvec, b, precondition=sparse.jacobi(A))
        >>> sparse.Status(int(info.status)).name, int(info.iterations)
        ('SUCCESS', 3)
        >>> jnp.allclose(A @ x, b, atol=1e-5)
        Array(True, dtype=bool)
    """
    problem, r0 = _setup("cg", matvec, b, x0, precondition, tolerance, max_iters, convergence,
                         norm, alt_rel_tolerance, inner_product, store_history, iteration_limit)

    # The step preconditions the residual it starts from: the loop holds the
    # preconditioner's one copy (which a first z = M⁻¹ r_0 before the loop would double in
    # the compiled program: an AMG cycle is most of it), and a solve that converges never
    # applies it to its last residual. rho = 0 marks a start without a search direction.
    def initial(x, r):
        return (x, r, jnp.zeros_like(r), jnp.zeros((), problem.r0_norm.dtype)), \
            FailureReason.NONE

    def step(state):
        x, r, p, rho, progress = state
        z = problem.precondition(r)
        rho_next = problem.inner(r, z).real
        # rᴴM⁻¹r <= 0 (an indefinite preconditioner) stops the solve before this
        # iteration, which then changes nothing and is not counted.
        broke = rho_next <= 0
        first = rho == 0
        p = z + jnp.where(first, 0, rho_next / jnp.where(first, 1, rho)).astype(x.dtype) * p
        q = problem.matvec(p)
        pq = problem.inner(p, q).real
        # On pᴴAp <= 0 the step is zero, so the last good iterate stays (and the loop stops):
        # a zero scalar, where selecting the old x and r would cost passes over both.
        indefinite = pq <= 0
        still = indefinite | broke
        alpha = jnp.where(still, 0, rho_next / jnp.where(still, 1, pq)).astype(x.dtype)
        x, r = x + alpha * p, r - alpha * q
        residual_norm = jnp.where(still, progress.residual_norm, problem.norm(r))
        advanced = _advance(progress, residual_norm, _breakdown(
            indefinite, FailureReason.NOT_POSITIVE_DEFINITE), problem)
        stopped = _classify(progress, jnp.int32(
            FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE), problem,
            FailureReason.NONFINITE_RESIDUAL)
        progress = jax.tree.map(lambda a, b: jnp.where(broke, a, b), stopped, advanced)
        return x, r, p, rho_next, progress

    return _checked_solve(problem, r0, initial, step)


def bicgstab(
    matvec: Callable[[jax.Array], jax.Array],
    b: jax.Array,
    x0: jax.Array | None = None,
    *,
    precondition: Callable[[jax.Array], jax.Array] | None = None,
    tolerance: float | jax.Array = 1e-6,
    max_iters: int = 1000,
    convergence: Convergence = "RELATIVE_INI",
    norm: Norm | Callable[[jax.Array], jax.Array] = "L2",
    alt_rel_tolerance: float | jax.Array = ALT_REL_TOLERANCE,
    inner_product: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
    store_history: bool = False,
    iteration_limit: jax.Array | None = None,
) -> tuple[jax.Array, SolveInfo]:
    r"""Solves a general square ``A x = b`` by right-preconditioned BiCGSTAB.

    Van der Vorst's stabilized biconjugate gradient method (AmgX's
    ``PBICGSTAB``; equivalent to ``scipy.sparse.linalg.bicgstab``) with
    right preconditioning: it iterates on ``A M⁻¹ u = b``, ``x = M⁻¹ u``, so
    the residual it monitors is the true ``b - A x``.  Each iteration does
    two ``matvec`` and two ``precondition`` calls, one in each half, the
    loop's step; it stops after the first half when that already meets the
    tolerance.  It needs little
    memory but can break down: ``(r̂, r) = 0`` or ``(r̂, A M⁻¹p) = 0``
    (``BICGSTAB_BREAKDOWN``) or ``ω = 0`` (``BICGSTAB_STAGNATION``) stop it
    with ``FAILED``.

    Args:
        matvec: ``v ↦ A v`` on vectors of shape ``(n,)``.
        b: ``(n,)`` right-hand side.
        x0: ``(n,)`` initial guess; zeros by default.
        precondition: ``r ↦ M⁻¹ r``; the identity by default.
        tolerance: the convergence tolerance (see ``convergence``).
        max_iters: the most iterations (static).
        convergence, norm, alt_rel_tolerance: as for :func:`cg`.
        inner_product: ``(u, v) ↦ uᴴ v`` on vectors of shape ``(n,)``;
            ``jnp.vdot`` by default.  A solve over the shards of a vector under
            ``jax.shard_map`` passes one that sums the local products over the
            devices (``lax.psum``), so that every device takes the same steps.
        store_history: as for :func:`cg`.
        iteration_limit: the most iterations as a value, possibly traced, at most
            ``max_iters`` (which still sizes the history): a solve that continues
            another method's spends what is left of their budget.  ``max_iters`` by
            default.

    Returns:
        ``(x, info)``: the ``(n,)`` solution and a :class:`SolveInfo`.

    Raises:
        TypeError, ValueError: for invalid arguments, as :func:`cg`.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxsolve import sparse
        >>> A = sparse.as_csr(jnp.array([[4., 2., 0.], [-1., 4., 1.], [0., -2., 4.]]))
        >>> b = jnp.array([1., 2., 3.])
        >>> x, info = sparse.bicgstab(A.matvec, b, tolerance=1e-7)
        >>> sparse.Status(int(info.status)).name
        'SUCCESS'
        >>> jnp.allclose(A @ x, b, atol=1e-5)
        Array(True, dtype=bool)
    """
    problem, r0 = _setup(
        "bicgstab", matvec, b, x0, precondition, tolerance, max_iters, convergence,
        norm, alt_rel_tolerance, inner_product, store_history, iteration_limit,
    )
    one = jnp.ones((), r0.dtype)
    zeros = jnp.zeros_like(r0)

    # The loop's step is half an iteration, so that the preconditioner and the matvec have
    # one call site each: two compiled the preconditioner (an AMG cycle, most of the
    # program) twice (2D elasticity at 100 352 rows: 43 native products, 22 now). The first
    # half preconditions the search direction p and steps along it to x½ with residual s;
    # the second preconditions s and steps to the next iterate. `second` says which half is
    # next; between the halves x½ is in x, s in r and ‖s‖ in s_norm. Both halves compute
    # what differs between them (the direction, α and ω) and select theirs: a `lax.cond`
    # would read its predicate back to the host every step on a GPU.
    def initial(x, r):  # r is also the shadow residual r_hat
        return (x, r, r, zeros, zeros, one, one, one, jnp.zeros((), problem.r0_norm.dtype),
                jnp.zeros((), bool)), FailureReason.NONE

    def half_step(state):
        x, r, r_hat, p, v, rho, alpha, omega, s_norm, second, progress = state
        rho_next = problem.inner(r_hat, r)
        w = jnp.where(second, r, r + (rho_next / rho) * (alpha / omega) * (p - omega * v))
        u = problem.precondition(w)  # p̂ or ŝ
        y = problem.matvec(u)  # v = A p̂ or t = A ŝ
        r_hat_v = problem.inner(r_hat, y)
        alpha_next = rho_next / r_hat_v
        t_t = problem.inner(y, y)
        omega_next = jnp.where(t_t == 0, 0, problem.inner(y, r) / jnp.where(t_t == 0, 1, t_t))
        # A breakdown keeps the last good iterate; a stagnation x½. Either ends the solve,
        # which then needs nothing else of this state.
        broke = ~second & ((rho_next == 0) | (r_hat_v == 0))
        stagnated = second & (omega_next == 0)
        keep = broke | stagnated
        step = jnp.where(second, omega_next, alpha_next)
        x = jnp.where(keep, x, x + step * u)
        r = jnp.where(keep, r, r - step * y)
        norm = jnp.where(keep, jnp.where(second, s_norm, progress.residual_norm),
                         problem.norm(r))
        # The first half ends the iteration when s meets the tolerance, or on a breakdown.
        ends = second | broke | (norm <= progress.threshold)
        breakdown = jnp.where(
            broke,
            jnp.int32(FailureReason.BICGSTAB_BREAKDOWN),
            _breakdown(stagnated, FailureReason.BICGSTAB_STAGNATION),
        )
        advanced = _advance(progress, norm, breakdown, problem)
        # A first half that goes on leaves the progress as it was, but for the history's
        # entry of this iteration, which the second half overwrites.
        progress = jax.tree.map(lambda a, b: jnp.where(ends, a, b), advanced, progress
                                )._replace(history=advanced.history)
        p, v = _keep_if(second, (p, v), (w, y))
        rho, alpha = _keep_if(second, (rho, alpha), (rho_next, alpha_next))
        omega = jnp.where(second, omega_next, omega)
        return x, r, r_hat, p, v, rho, alpha, omega, norm, ~ends, progress

    return _checked_solve(problem, r0, initial, half_step)


def stationary(
    matvec: Callable[[jax.Array], jax.Array],
    b: jax.Array,
    x0: jax.Array | None = None,
    *,
    precondition: Callable[[jax.Array], jax.Array] | None = None,
    tolerance: float | jax.Array = 1e-6,
    max_iters: int = 1000,
    convergence: Convergence = "RELATIVE_INI",
    norm: Norm | Callable[[jax.Array], jax.Array] = "L2",
    alt_rel_tolerance: float | jax.Array = ALT_REL_TOLERANCE,
    inner_product: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
    store_history: bool = False,
) -> tuple[jax.Array, SolveInfo]:
    r"""Solves ``A x = b`` by the stationary iteration ``x ← x + M⁻¹ (b − A x)``.

    This is AmgX's ``AMG`` solver (``M⁻¹`` one multigrid cycle) and its relaxations used
    as solvers (``M⁻¹`` one sweep): each iteration does one ``precondition`` and one
    ``matvec``, and the residual it monitors is the true ``b − A x``.  It converges when
    the spectral radius of ``I − M⁻¹A`` is below one, so it is best as a check of a
    preconditioner's quality (AMG cycles on Poisson contract the error by ~0.1 each);
    a Krylov method accelerates the same ``M``.

    Args:
        matvec, b, x0, precondition, tolerance, max_iters, convergence, norm,
            alt_rel_tolerance, inner_product, store_history: as for :func:`cg`.

    Returns:
        ``(x, info)``: the ``(n,)`` solution and a :class:`SolveInfo`.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxsolve import sparse
        >>> A = sparse.as_csr(jnp.array([[4., 1.], [1., 3.]]))
        >>> x, info = sparse.stationary(A.matvec, jnp.ones(2), precondition=sparse.jacobi(A),
        ...                             tolerance=1e-6)
        >>> sparse.Status(int(info.status)).name, int(info.iterations)
        ('SUCCESS', 12)
    """
    problem, r0 = _setup(
        "stationary", matvec, b, x0, precondition, tolerance, max_iters, convergence,
        norm, alt_rel_tolerance, inner_product, store_history,
    )

    def step(state):
        x, r, progress = state
        x = x + problem.precondition(r)
        r = problem.b - problem.matvec(x)
        return x, r, _advance(progress, problem.norm(r), FailureReason.NONE, problem)

    return _checked_solve(problem, r0, lambda x, r: ((x, r), FailureReason.NONE), step)


def gmres(
    matvec: Callable[[jax.Array], jax.Array],
    b: jax.Array,
    x0: jax.Array | None = None,
    *,
    precondition: Callable[[jax.Array], jax.Array] | None = None,
    tolerance: float | jax.Array = 1e-6,
    max_iters: int = 1000,
    convergence: Convergence = "RELATIVE_INI",
    norm: Norm | Callable[[jax.Array], jax.Array] = "L2",
    alt_rel_tolerance: float | jax.Array = ALT_REL_TOLERANCE,
    restart: int = 20,
    inner_product: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
    store_history: bool = False,
) -> tuple[jax.Array, SolveInfo]:
    r"""Solves a general square ``A x = b`` by restarted, right-preconditioned GMRES.

    GMRES(m) (AmgX's ``GMRES``, ``gmres_n_restart = restart``; like
    ``scipy.sparse.linalg.gmres`` with right preconditioning) builds an
    orthonormal basis ``V`` of the Krylov space of ``A M⁻¹`` by Arnoldi with
    modified Gram-Schmidt, and picks ``x = x_0 + M⁻¹ V y`` minimizing
    ``‖b - A x‖``; Givens rotations keep that least-squares problem
    triangular, so ``‖r_k‖`` is known at every step without forming ``x``.
    After ``m = restart`` steps it forms ``x``, recomputes ``r = b - A x`` and
    starts again.  The residual never grows within a cycle.  Each step does
    one ``matvec`` and one ``precondition``; the basis needs
    ``(m + 1) · n`` numbers, and each step ``O(m · n)`` work for the
    (masked, static-length) Gram-Schmidt.  ``info.iterations`` counts
    Arnoldi steps over all cycles.

    ``M⁻¹`` must be the same linear map at every step; for a preconditioner
    that varies (an inner iteration, a nonlinear smoother) use
    :func:`fgmres`.  If the Krylov space stops growing without containing the
    solution (``A M⁻¹`` singular), it stops with ``FAILED``
    (``GMRES_BREAKDOWN``).

    Args:
        matvec: ``v ↦ A v`` on vectors of shape ``(n,)``.
        b: ``(n,)`` right-hand side.
        x0: ``(n,)`` initial guess; zeros by default.
        precondition: ``r ↦ M⁻¹ r``; the identity by default.
        tolerance: the convergence tolerance (see ``convergence``).
        max_iters: the most Arnoldi steps in all (static).
        convergence, norm, alt_rel_tolerance: as for :func:`cg`.
        inner_product: ``(u, v) ↦ uᴴ v`` on vectors of shape ``(n,)``;
            ``jnp.vdot`` by default.  A solve over the shards of a vector under
            ``jax.shard_map`` passes one that sums the local products over the
            devices (``lax.psum``), so that every device takes the same steps.
        restart: the static basis size ``m`` (reduced to
            ``min(restart, max_iters, n)`` when smaller).
        store_history: as for :func:`cg`.

    Returns:
        ``(x, info)``: the ``(n,)`` solution and a :class:`SolveInfo`.

    Raises:
        TypeError, ValueError: for invalid arguments, as :func:`cg`, or a
            ``restart`` that is not a positive int.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxsolve import sparse
        >>> A = sparse.as_csr(jnp.array([[4., 2., 0.], [-1., 4., 1.], [0., -2., 4.]]))
        >>> b = jnp.array([1., 2., 3.])
        >>> x, info = sparse.gmres(A.matvec, b, restart=2)
        >>> sparse.Status(int(info.status)).name, int(info.iterations)
        ('SUCCESS', 13)
        >>> int(sparse.gmres(A.matvec, b, restart=3)[1].iterations)  # no restart
        3
        >>> jnp.allclose(A @ x, b, atol=1e-5)
        Array(True, dtype=bool)
    """
    return _gmres(
        "gmres", False, matvec, b, x0, precondition, tolerance, max_iters, convergence,
        norm, alt_rel_tolerance, restart, inner_product, store_history,
    )


def fgmres(
    matvec: Callable[[jax.Array], jax.Array],
    b: jax.Array,
    x0: jax.Array | None = None,
    *,
    precondition: Callable[[jax.Array], jax.Array] | None = None,
    tolerance: float | jax.Array = 1e-6,
    max_iters: int = 1000,
    convergence: Convergence = "RELATIVE_INI",
    norm: Norm | Callable[[jax.Array], jax.Array] = "L2",
    alt_rel_tolerance: float | jax.Array = ALT_REL_TOLERANCE,
    restart: int = 20,
    inner_product: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
    store_history: bool = False,
) -> tuple[jax.Array, SolveInfo]:
    r"""Solves ``A x = b`` by flexible GMRES: the preconditioner may vary.

    FGMRES(m) (Saad 1993; AmgX's ``FGMRES``) is :func:`gmres` that keeps the
    preconditioned vectors ``zⱼ = M⁻¹ vⱼ`` and forms ``x = x_0 + Z y`` from
    them, so ``precondition`` may differ from step to step (an inner
    iteration, a cycle with a nonlinear smoother).  It stores ``2 m + 1``
    vectors of size ``n`` instead of ``m + 1``; for a fixed linear
    preconditioner it computes the same iterates as :func:`gmres`.

    Args:
        matvec: ``v ↦ A v`` on vectors of shape ``(n,)``.
        b: ``(n,)`` right-hand side.
        x0: ``(n,)`` initial guess; zeros by default.
        precondition: ``r ↦ M⁻¹ r`` (may vary); the identity by default.
        tolerance: the convergence tolerance (see ``convergence``).
        max_iters: the most Arnoldi steps in all (static).
        convergence, norm, alt_rel_tolerance: as for :func:`cg`.
        inner_product: ``(u, v) ↦ uᴴ v`` on vectors of shape ``(n,)``;
            ``jnp.vdot`` by default.  A solve over the shards of a vector under
            ``jax.shard_map`` passes one that sums the local products over the
            devices (``lax.psum``), so that every device takes the same steps.
        restart: the static basis size ``m``, as for :func:`gmres`.
        store_history: as for :func:`cg`.

    Returns:
        ``(x, info)``: the ``(n,)`` solution and a :class:`SolveInfo`.

    Raises:
        TypeError, ValueError: for invalid arguments, as :func:`gmres`.

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxsolve import sparse
        >>> A = sparse.as_csr(jnp.array([[4., 2., 0.], [-1., 4., 1.], [0., -2., 4.]]))
        >>> x, info = sparse.fgmres(A.matvec, jnp.array([1., 2., 3.]),
        ...                         precondition=sparse.jacobi(A))
        >>> jnp.allclose(A @ x, jnp.array([1., 2., 3.]), atol=1e-5)
        Array(True, dtype=bool)
    """
    return _gmres(
        "fgmres", True, matvec, b, x0, precondition, tolerance, max_iters, convergence,
        norm, alt_rel_tolerance, restart, inner_product, store_history,
    )


KRYLOV_METHODS: dict[str, Callable[..., tuple[jax.Array, SolveInfo]]] = {
    "CG": cg, "PCG": cg, "BICGSTAB": bicgstab, "PBICGSTAB": bicgstab,
    "GMRES": gmres, "FGMRES": fgmres,
}
"""The method of each AmgX Krylov solver name, for every path of :func:`solve` (with or
without the ``P``, a method applies the preconditioner it is given)."""

HERMITIAN_METHODS = ("CG", "PCG")
"""The solver names that take ``A`` as Hermitian (their derivatives are symmetrized)."""


class _Arnoldi(NamedTuple):
    """The state of one GMRES restart cycle of ``m`` steps on ``n`` unknowns."""

    step: jax.Array  # j, the next Arnoldi step
    columns: jax.Array  # the columns of R (and V) the update of x uses
    basis: jax.Array  # V, (m + 1, n): orthonormal basis of the Krylov space of A M⁻¹
    preconditioned: jax.Array  # Z = M⁻¹ V, (m, n) for fgmres; (0, n) for gmres
    triangle: jax.Array  # R, (m, m): the Hessenberg H made triangular by rotations
    rhs: jax.Array  # g, (m + 1,): β e₁ rotated alike; ‖r_j‖ = |g[j]|
    cosines: jax.Array  # (m,), the Givens rotations so far
    sines: jax.Array
    progress: _Progress


def _gmres(
    name: str,
    flexible: bool,
    matvec: Callable[[jax.Array], jax.Array],
    b: jax.Array,
    x0: jax.Array | None,
    precondition: Callable[[jax.Array], jax.Array] | None,
    tolerance: float | jax.Array,
    max_iters: int,
    convergence: str,
    norm: Any,
    alt_rel_tolerance: float | jax.Array,
    restart: int,
    inner_product: Callable[[jax.Array, jax.Array], jax.Array] | None,
    store_history: bool,
) -> tuple[jax.Array, SolveInfo]:
    """GMRES(m) with right preconditioning; ``flexible`` keeps ``Z = M⁻¹ V``."""
    if not _is_int(restart) or restart < 1:
        raise ValueError(f"{name}: restart must be a positive int, got {restart!r}.")
    problem, r0 = _setup(
        name, matvec, b, x0, precondition, tolerance, max_iters, convergence, norm,
        alt_rel_tolerance, inner_product, store_history,
    )
    n, dtype = r0.shape[0], r0.dtype
    m = max(1, min(int(restart), max_iters, n))

    def arnoldi_step(state: _Arnoldi) -> _Arnoldi:
        """Extends the basis by one vector and rotates H's new column into R."""
        j = state.step
        z = problem.precondition(state.basis[j])
        w = problem.matvec(z)
        w, h = lax.fori_loop(
            0, m, _gram_schmidt_step(state.basis, j, problem.inner), (w, jnp.zeros(m + 1, dtype))
        )
        h_next = problem.two_norm(w)
        safe_h_next = jnp.where(h_next == 0, 1, h_next).astype(dtype)
        basis = state.basis.at[j + 1].set(jnp.where(h_next == 0, 0, w / safe_h_next))
        h = h.at[j + 1].set(h_next.astype(dtype))
        h = lax.fori_loop(0, m - 1, _rotation_step(state.cosines, state.sines, j), h)
        cosine, sine, diagonal = _givens(h[j], h[j + 1])
        # A zero diagonal makes H singular: column j adds nothing to the update.
        broke = diagonal == 0
        g = state.rhs
        cosines, sines = state.cosines.at[j].set(cosine), state.sines.at[j].set(sine)
        if problem.test_norm is None:  # ‖r_j‖₂ is the least-squares residual's
            residual_norm = jnp.where(broke, jnp.abs(g[j]), jnp.abs(sine * g[j]))
        else:  # another norm needs r_j itself
            r = _arnoldi_residual(basis, cosines, sines, -jnp.conj(sine) * g[j], j)
            residual_norm = jnp.where(broke, state.progress.residual_norm, problem.norm(r))
        return _Arnoldi(
            step=j + 1,
            columns=jnp.where(broke, j, j + 1),
            basis=basis,
            preconditioned=(
                state.preconditioned.at[j].set(z) if flexible else state.preconditioned
            ),
            triangle=state.triangle.at[:, j].set(h.at[j].set(diagonal).at[j + 1].set(0)[:m]),
            rhs=g.at[j + 1].set(-jnp.conj(sine) * g[j]).at[j].multiply(cosine),
            cosines=cosines,
            sines=sines,
            progress=_advance(
                state.progress,
                residual_norm,
                _breakdown(broke, FailureReason.GMRES_BREAKDOWN),
                problem,
            ),
        )

    def cycle(state: tuple[jax.Array, jax.Array, jax.Array, jax.Array, _Progress]):
        """One restart cycle: up to m Arnoldi steps, then the update of x, r and ‖r‖."""
        x, r, beta, restarted, progress = state
        safe_beta = jnp.where(beta == 0, 1, beta).astype(dtype)
        zeros = jnp.zeros(m, dtype)
        arnoldi = lax.while_loop(
            lambda arnoldi: _running(arnoldi) & (arnoldi.step < m),
            arnoldi_step,
            _Arnoldi(
                step=jnp.int32(0),
                columns=jnp.int32(0),
                basis=jnp.zeros((m + 1, n), dtype).at[0].set(r / safe_beta),
                preconditioned=jnp.zeros((m if flexible else 0, n), dtype),
                triangle=jnp.zeros((m, m), dtype),
                rhs=jnp.zeros(m + 1, dtype).at[0].set(beta.astype(dtype)),
                cosines=zeros,
                sines=zeros,
                progress=progress,
            ),
        )
        # y solves the leading columns × columns triangle and is zero beyond it.
        used = jnp.arange(m, dtype=jnp.int32) < arnoldi.columns
        triangle = jnp.where(
            used[:, None] & used[None, :], arnoldi.triangle, jnp.eye(m, dtype=dtype)
        )
        y = jax.scipy.linalg.solve_triangular(
            triangle, jnp.where(used, arnoldi.rhs[:m], 0), lower=False
        )
        if flexible:
            x_next = x + y @ arnoldi.preconditioned
        else:
            x_next = x + problem.precondition(y @ arnoldi.basis[:m])
        r_next, norm_next, attained = _accuracy(problem, x_next, arnoldi.progress.threshold)
        # β = ‖r‖₂ starts the next cycle's basis, whatever the test's norm.
        beta_next = norm_next if problem.test_norm is None else problem.two_norm(r_next)
        # A cycle that met NaN or Inf (from the preconditioner) keeps the iterate before it
        # and ends the solve, DIVERGED.
        finite = jnp.isfinite(norm_next)
        progress = arnoldi.progress
        progress = _classify(
            progress._replace(residual_norm=jnp.where(finite, progress.residual_norm, norm_next)),
            FailureReason.NONE, problem, FailureReason.NONFINITE_RESIDUAL,
        )
        # The Arnoldi steps' ‖r‖ is the least-squares problem's: a SUCCESS is checked on the
        # true one, from which a next cycle restarts anyway.
        progress, restart = _recheck(progress, norm_next, attained, ~restarted, problem)
        x, r, beta = _keep_if(~finite, (x, r, beta), (x_next, r_next, beta_next))
        return x, r, beta, restarted | restart, progress

    start = _start(problem, FailureReason.NONE)
    beta = problem.r0_norm if problem.test_norm is None else problem.two_norm(r0)
    state = (jnp.zeros_like(r0), r0, beta, jnp.zeros((), bool), start)
    x, r, beta, _, progress = lax.while_loop(_running, cycle, state)
    # The last iterate's residual norm: the one the Arnoldi steps tracked, or after a cycle
    # that met NaN, that of the iterate kept.
    kept = beta if problem.test_norm is None else problem.norm(r)
    norm = jnp.where(jnp.isfinite(progress.residual_norm), progress.residual_norm, kept)
    return problem.solution(x), _info(progress, problem, norm)


def _arnoldi_residual(basis: jax.Array, cosines: jax.Array, sines: jax.Array,
                      last: jax.Array, j: jax.Array) -> jax.Array:
    """The residual ``r_j = b - A x_j`` of Arnoldi step ``j`` as a vector, without a
    ``matvec``: with ``Q`` the product of the Givens rotations ``G_0 … G_j`` and ``g =
    Q β e₁``, ``r_j = V (β e₁ - H̄ y) = V Qᴴ (g_{j+1} e_{j+1})``; ``last`` is ``g_{j+1}``.
    The rotations are undone from the last, ``G_iᴴ = [[c, -s], [s̄, c]]`` on entries ``i``
    and ``i + 1`` (``O(m)`` scalars), and the ``(m + 1) × n`` combination is one pass over
    the basis, like a Gram-Schmidt step."""
    m = cosines.shape[0]
    coefficients = jnp.zeros(m + 1, basis.dtype).at[j + 1].set(last)

    def undo(k, c):
        i = j - k
        start = jnp.maximum(i, 0)
        pair = lax.dynamic_slice(c, (start,), (2,))
        cosine, sine = cosines[start], sines[start]
        rotated = jnp.stack([cosine * pair[0] - sine * pair[1],
                             jnp.conj(sine) * pair[0] + cosine * pair[1]])
        return lax.dynamic_update_slice(c, jnp.where(i >= 0, rotated, pair), (start,))

    return lax.fori_loop(0, m, undo, coefficients) @ basis


def _gram_schmidt_step(basis: jax.Array, j: jax.Array, inner: Callable) -> Callable:
    """Step ``i`` of modified Gram-Schmidt: ``w -= (vᵢᴴ w) vᵢ`` for ``i <= j``."""

    def step(i, state):
        w, h = state
        h_i = jnp.where(i <= j, inner(basis[i], w), 0)
        return w - h_i * basis[i], h.at[i].set(h_i)

    return step


def _rotation_step(cosines: jax.Array, sines: jax.Array, j: jax.Array) -> Callable:
    """Applies the ``i``-th Givens rotation (for ``i < j``) to a column ``h``."""

    def step(i, h):
        c, s = cosines[i], sines[i]
        rotated = jnp.stack([c * h[i] + s * h[i + 1], -jnp.conj(s) * h[i] + c * h[i + 1]])
        return lax.dynamic_update_slice(
            h, jnp.where(i < j, rotated, lax.dynamic_slice(h, (i,), (2,))), (i,)
        )

    return step


def _givens(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(c, s, ρ)`` with ``[[c, s], [-s̄, c]] [a, b]ᵀ = [ρ, 0]ᵀ`` (c real, b real >= 0).

    ``(c, s) = (1, 0)`` when ``a = b = 0``; then ``ρ = 0``.
    """
    dtype = a.dtype
    abs_a = jnp.abs(a)
    norm = jnp.hypot(abs_a, jnp.abs(b))
    safe_abs_a = jnp.where(abs_a == 0, 1, abs_a)
    safe_norm = jnp.where(norm == 0, 1, norm)
    phase = jnp.where(abs_a == 0, 1, a / safe_abs_a.astype(dtype))
    cosine = jnp.where(norm == 0, 1, abs_a / safe_norm).astype(dtype)
    sine = jnp.where(norm == 0, 0, phase * jnp.conj(b) / safe_norm.astype(dtype))
    return cosine, sine, phase * norm.astype(dtype)


def _setup(
    name: str,
    matvec: Any,
    b: Any,
    x0: Any,
    precondition: Any,
    tolerance: Any,
    max_iters: Any,
    convergence: Any,
    norm: Any,
    alt_rel_tolerance: Any,
    inner_product: Any,
    store_history: Any,
    iteration_limit: Any = None,
) -> tuple[_Problem, jax.Array]:
    """Checks the arguments; returns the problem and its scaled ``r0 = (b - A x0) / 2^e``
    (``iteration_limit``: see :func:`bicgstab`)."""
    if inner_product is not None and not callable(inner_product):
        raise TypeError(f"{name}: inner_product must be a callable (u, v) ↦ uᴴ v, got"
                        f" {type(inner_product).__name__}.")
    inner = jnp.vdot if inner_product is None else inner_product
    check_max_iters(name, max_iters)
    if not isinstance(convergence, str) or convergence not in CONVERGENCE_TESTS:
        raise ValueError(
            f"{name}: convergence must be one of {', '.join(map(repr, CONVERGENCE_TESTS))},"
            f" got {convergence!r}."
        )
    if not isinstance(store_history, (bool, np.bool_)):
        raise TypeError(f"{name}: store_history must be a bool (static), got {store_history!r}.")
    _check_tolerance(name, "tolerance", tolerance)
    _check_tolerance(name, "alt_rel_tolerance", alt_rel_tolerance)
    for argument, function in (("matvec", matvec), ("precondition", precondition)):
        if function is not None and not callable(function):
            raise TypeError(
                f"{name}: {argument} must be a callable on vectors (for a CsrMatrix"
                f" A, pass A.matvec), got {type(function).__name__}."
            )
    b = jnp.asarray(b)
    if b.ndim != 1:
        raise ValueError(
            f"{name}: b must be a vector of shape (n,), got shape {b.shape}; for"
            f" several right-hand sides, jax.vmap {name} over them (one batched"
            " loop)."
        )
    if not jnp.issubdtype(b.dtype, jnp.inexact):
        b = b.astype(float)
    zero_start = x0 is None
    x0 = jnp.zeros_like(b) if zero_start else jnp.asarray(x0)
    if x0.shape != b.shape:
        raise ValueError(f"{name}: x0 must have the shape of b, {b.shape}, got {x0.shape}.")
    output = _checked_map(name, "matvec", matvec, b)
    with jax.numpy_dtype_promotion("standard"):
        dtype = jnp.result_type(b, x0, output)
    b = b.astype(dtype)
    precondition = (_identity if precondition is None
                    else _shape_checked(name, "precondition", precondition))
    real_dtype = jnp.finfo(dtype).dtype
    test_norm = _test_norm(name, norm, inner_product, b, real_dtype)

    def cast(function):
        return lambda v: function(v).astype(dtype)

    problem_matvec = cast(matvec)
    if zero_start:  # r0 = b, without a product with A (a pass over it, on a large A)
        r0, x0 = b, None
        r0_norm, shift = _safe_norm(inner, r0)
    else:  # a zero right-hand side has the solution 0, whatever x0 is
        b_norm, _ = _safe_norm(inner, b)
        x0 = jnp.where(b_norm == 0, 0, x0.astype(dtype))
        r0 = b - problem_matvec(x0)
        r0_norm, shift = _safe_norm(inner, r0)
    # ‖r0‖ = r0_norm · 2^-shift = m · 2^e with m in [0.5, 1): divide r0 by 2^e.
    finite = jnp.isfinite(r0_norm) & (r0_norm > 0)
    exponent = jnp.where(finite, jnp.frexp(jnp.where(finite, r0_norm, 1))[1] - shift, 0)
    r0 = _times_power_of_two(r0, -exponent)
    scaled_norm = jnp.sqrt(inner(r0, r0).real) if test_norm is None else test_norm(r0)
    tolerance = jnp.asarray(tolerance, real_dtype)
    if convergence == "ABSOLUTE":
        threshold = _times_power_of_two(tolerance, -exponent)
    elif convergence == "COMBINED_REL_INI_ABS":
        threshold = jnp.fmax(_times_power_of_two(tolerance, -exponent),
                             jnp.asarray(alt_rel_tolerance, real_dtype) * scaled_norm)
    else:
        threshold = tolerance * scaled_norm
    problem = _Problem(
        matvec=problem_matvec,
        precondition=cast(precondition),
        b=r0,
        threshold=threshold,
        max_tolerance=tolerance if convergence == "RELATIVE_MAX" else None,
        r0_norm=scaled_norm,
        scale=jnp.where(scaled_norm > 0, scaled_norm, 1),
        max_iters=int(max_iters),
        iteration_limit=int(max_iters) if iteration_limit is None
        else jnp.minimum(jnp.asarray(iteration_limit, jnp.int32), int(max_iters)),
        inner=inner,
        test_norm=test_norm,
        store_history=bool(store_history),
        x0=x0,
        exponent=exponent,
    )
    return problem, r0


def check_max_iters(name: str, max_iters: Any) -> None:
    """Raises ``ValueError`` unless ``max_iters`` is an int in ``[0, MAX_ITERS]``."""
    if not _is_int(max_iters) or not 0 <= max_iters <= MAX_ITERS:
        raise ValueError(
            f"{name}: max_iters must be an int from 0 to {MAX_ITERS} (2**31 - 1: iterations"
            f" are counted in int32), got {max_iters!r}."
        )


def _check_tolerance(name: str, argument: str, tolerance: Any) -> None:
    """Raises ``ValueError`` unless ``tolerance`` is a non-negative number (or traced)."""
    try:
        concrete = float(tolerance)
    except (TypeError, jax.errors.ConcretizationTypeError):
        concrete = 0.0  # traced: cannot be checked here
    if not concrete >= 0:
        raise ValueError(f"{name}: {argument} must be a non-negative number, got {tolerance!r}.")


def _test_norm(name: str, norm: Any, inner_product: Any, b: jax.Array, real_dtype: Any
               ) -> Callable[[jax.Array], jax.Array] | None:
    """The convergence test's norm as a function to real scalars; None for the 2-norm, which
    the loop takes from the inner product."""
    if callable(norm):
        output = jax.eval_shape(norm, b)
        if getattr(output, "shape", None) != ():
            raise ValueError(f"{name}: norm must map a vector of shape {b.shape} to a scalar,"
                             f" got {getattr(output, 'shape', output)}.")
        return lambda v: norm(v).astype(real_dtype)
    if not isinstance(norm, str) or norm not in NORMS:
        raise ValueError(f"{name}: norm must be one of {', '.join(map(repr, NORMS))} or a"
                         f" callable v ↦ ‖v‖, got {norm!r}.")
    if norm == "L2":
        return None
    if inner_product is not None:
        raise ValueError(
            f"{name}: norm {norm!r} with an inner_product: the inner product may reduce over"
            " devices, and the norm must too; pass norm as a callable v ↦ ‖v‖ that does.")
    if norm == "L1":
        return lambda v: jnp.sum(jnp.abs(v)).astype(real_dtype)
    return lambda v: jnp.max(jnp.abs(v), initial=0).astype(real_dtype)


def _safe_norm(inner: Callable, v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(‖v‖₂ · 2^k, k)``, computed without harmful underflow or overflow (as LAPACK's nrm2).

    The plain ``√(vᴴv)`` where its sum of squares is finite and at least ``tiny / ε²`` (so
    that the squares that underflow cannot matter), else the norm of ``v · 2^k``, ``k`` large
    for a tiny ``v`` and negative for a huge one.  Both are computed (a second pass over
    ``v``, no control flow): a solve calls this once or twice, before its loop.  The power
    of two is returned, not applied, since ``‖v‖₂`` itself may not be representable.
    """
    info = jnp.finfo(v.dtype)
    squares = inner(v, v).real
    safe = jnp.isfinite(squares) & (squares >= info.tiny / info.eps**2)
    up, down = int(info.maxexp) // 2 - 1, -(int(info.maxexp) // 2 + 16)
    k = jnp.where(safe, 0, jnp.where(squares > 1, down, up)).astype(jnp.int32)
    w = _times_power_of_two(v, k)
    return jnp.where(safe, jnp.sqrt(squares), jnp.sqrt(inner(w, w).real)), k


def _times_power_of_two(v: jax.Array, k: jax.Array) -> jax.Array:
    """``v · 2^k`` (``k`` an integer scalar), exact: two factors, each a normal number."""
    one = jnp.ones((), jnp.finfo(v.dtype).dtype)
    half = k // 2
    factor = jnp.ldexp(one, half).astype(v.dtype), jnp.ldexp(one, k - half).astype(v.dtype)
    return v * factor[0] * factor[1]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _checked_map(
    name: str, argument: str, function: Callable, b: jax.Array
) -> jax.ShapeDtypeStruct:
    """The output type of ``function(b)``, which must have ``b``'s shape."""
    return jax.eval_shape(_shape_checked(name, argument, function), b)


def _shape_checked(name: str, argument: str, function: Callable) -> Callable:
    """``function``, checked to map a vector to one of its shape where the method applies
    it (its loop's trace), not by tracing it once more beforehand as :func:`_checked_map`
    does: an AMG preconditioner's cycle took half a second of a first solve's tracing."""
    def checked(v: jax.Array) -> jax.Array:
        output = function(v)
        if getattr(output, "shape", None) != v.shape:
            raise ValueError(
                f"{name}: {argument} must map a vector of shape {v.shape} to one of the"
                f" same shape (a square operator), got {getattr(output, 'shape', output)}.")
        return output
    return checked


def _identity(r: jax.Array) -> jax.Array:
    return r


def _start(problem: _Problem, breakdown: Any) -> _Progress:
    """The bookkeeping before the first iteration (``r_0`` checked as one)."""
    r0_norm = problem.r0_norm
    length = problem.max_iters + 1 if problem.store_history else 0
    history = jnp.full(length, jnp.nan, r0_norm.dtype)
    progress = _Progress(
        iterations=jnp.zeros((), jnp.int32),
        status=jnp.full((), _RUNNING, jnp.int32),
        reason=jnp.full((), FailureReason.NONE, jnp.int32),
        residual_norm=r0_norm,
        history=history.at[0].set(r0_norm / problem.scale) if length else history,
        best_norm=r0_norm,
        latest_is_best=jnp.ones((), bool),
        best_iteration=jnp.zeros((), jnp.int32),
        threshold=problem.threshold,
    )
    return _classify(progress, breakdown, problem, FailureReason.NONFINITE_INPUT)


def _advance(
    progress: _Progress, residual_norm: jax.Array, breakdown: Any, problem: _Problem
) -> _Progress:
    """Counts one iteration, records its residual and decides whether to stop."""
    k = progress.iterations + 1
    best = residual_norm <= progress.best_norm  # ties go to the later iterate; NaN never
    history = progress.history
    if problem.store_history:
        history = history.at[k].set(residual_norm / problem.scale)
    progress = progress._replace(
        iterations=k,
        residual_norm=residual_norm,
        history=history,
        best_norm=jnp.where(best, residual_norm, progress.best_norm),
        latest_is_best=best,
        best_iteration=jnp.where(best, k, progress.best_iteration),
        threshold=progress.threshold if problem.max_tolerance is None
        else jnp.fmax(progress.threshold, problem.max_tolerance * residual_norm),
    )
    return _classify(progress, breakdown, problem, FailureReason.NONFINITE_RESIDUAL)


def _best_iterate(step: Callable[[tuple], tuple], initial: tuple, start: _Progress
                  ) -> tuple[jax.Array, _Progress]:
    """Runs a method whose residual can grow; returns its best iterate and its progress.

    ``step`` maps a state ``(x, ..., progress)`` to the next; the loop starts from
    ``(*initial, start)`` and runs while the progress is running.  When its last iterate is
    not the one with the smallest residual norm (a breakdown, a divergence, an indefinite
    preconditioner, the iteration limit on an oscillating residual), the same steps run
    again from the start up to that iterate's iteration, and that run's ``x`` is returned.
    So the loop carries no copy of the best iterate: keeping one cost a pass over two
    vectors per iteration (and, read beside the update of ``x``, a copy of ``x``), where
    the rerun costs iterations only in a solve that has failed.  Both runs are one
    ``while_loop`` inside another, so the step compiles once.  The rerun repeats the same
    operations on the same numbers; where a reduction's order is not fixed (some GPU
    reductions) its iterate may differ from the first run's in the last bits.
    """

    def run(carry):
        runs, progress, _ = carry
        # The first run stops with the progress; the rerun at the first run's best iteration.
        target = jnp.where(runs == 0, -1, progress.best_iteration)

        def running(state):
            latest = state[-1]
            return jnp.where(target < 0, latest.status == _RUNNING, latest.iterations < target)

        state = lax.while_loop(running, step, (*initial, start))
        progress = jax.tree.map(lambda first, kept: jnp.where(runs == 0, first, kept),
                                state[-1], progress)
        return runs + 1, progress, state[0]

    def again(carry):
        runs, progress, _ = carry
        return (runs == 0) | ((runs == 1) & ~progress.latest_is_best)

    _, progress, x = lax.while_loop(again, run, (jnp.int32(0), start, initial[0]))
    return x, progress


def _checked_solve(
    problem: _Problem,
    r0: jax.Array,
    initial: Callable[[jax.Array, jax.Array], tuple[tuple, Any]],
    step: Callable[[tuple], tuple],
) -> tuple[jax.Array, SolveInfo]:
    """Runs a method from ``δ = 0``, checks a ``SUCCESS`` on the true residual; ``(x, info)``.

    ``initial(δ, r)`` is the method's state (without the progress) at ``δ`` with residual
    ``r``, and the breakdown code that state already shows; ``step`` one iteration (see
    :func:`_best_iterate`).  After the loop one ``matvec`` (batched with the probe of
    :func:`_accuracy`) forms ``r = b - A δ``; a ``SUCCESS`` claimed by the recurrence stands
    if ``r`` meets the threshold or ``δ`` is as accurate as the dtype allows, and its
    ``info.residual`` is the true residual.  Otherwise the recurrence drifted: the method
    restarts once from ``δ`` with that ``r`` (residual replacement; the iterations keep
    counting toward ``max_iters``), and a second miss ends ``NOT_CONVERGED`` with
    ``ACCURACY_LIMIT``, returning the iterate with the smaller true residual.
    """

    def attempt(carry):
        attempts, x, r, answer, answer_norm, progress = carry
        state, breakdown = initial(x, r)
        progress = _classify(progress, breakdown, problem, FailureReason.NONFINITE_INPUT)
        x, progress = _best_iterate(step, state, progress)
        r, true_norm, attained = _accuracy(problem, x, progress.threshold)
        claimed = progress.status == Status.SUCCESS
        better = claimed & (true_norm <= answer_norm)  # NaN never
        answer = jnp.where(~claimed | better, x, answer)
        answer_norm = jnp.where(claimed, jnp.where(better, true_norm, answer_norm),
                                progress.best_norm)
        progress, _ = _recheck(progress, true_norm, attained, attempts == 0, problem)
        return attempts + 1, x, r, answer, answer_norm, progress

    zeros = jnp.zeros_like(r0)
    start = (jnp.int32(0), zeros, r0, zeros, problem.r0_norm,
             _start(problem, FailureReason.NONE))
    *_, answer, answer_norm, progress = lax.while_loop(_running, attempt, start)
    return problem.solution(answer), _info(progress, problem, answer_norm)


def _recheck(progress: _Progress, true_norm: jax.Array, attained: jax.Array,
             may_restart: jax.Array, problem: _Problem) -> tuple[_Progress, jax.Array]:
    """The progress after the true residual norm of a stopped solve's iterate (see
    :func:`_accuracy`), and whether it restarts: a ``SUCCESS`` that ``attained`` confirms
    stands, with the true norm as the last residual; a first miss runs again from that
    iterate (where ``may_restart`` and iterations are left); a second ends
    ``ACCURACY_LIMIT``."""
    claimed = progress.status == Status.SUCCESS
    finite = jnp.isfinite(true_norm)
    missed = claimed & ~attained
    restart = missed & may_restart & (progress.iterations < problem.iteration_limit) & finite
    failed = missed & ~restart
    history = progress.history
    if problem.store_history:  # the last entry becomes the true residual
        k = progress.iterations
        history = history.at[k].set(jnp.where(claimed, true_norm / problem.scale, history[k]))
    progress = progress._replace(
        status=jnp.where(restart, jnp.int32(_RUNNING), jnp.where(
            failed, jnp.where(finite, jnp.int32(Status.NOT_CONVERGED),
                              jnp.int32(Status.DIVERGED)), progress.status)),
        reason=jnp.where(failed, jnp.where(
            finite, jnp.int32(FailureReason.ACCURACY_LIMIT),
            jnp.int32(FailureReason.NONFINITE_RESIDUAL)), progress.reason),
        history=history,
        # Claimed, the last residual is the true one; a restart's iterate 0 is the iterate.
        residual_norm=jnp.where(claimed, true_norm, progress.residual_norm),
        best_norm=jnp.where(restart, true_norm, progress.best_norm),
        latest_is_best=progress.latest_is_best | restart,
        best_iteration=jnp.where(restart, progress.iterations, progress.best_iteration),
    )
    return progress, restart


ATTAINABLE_BACKWARD_ERROR = 16
"""``c`` of the accuracy test: a solve whose recurrence met its tolerance succeeds when the
normwise backward error of ``x`` is at most ``c · eps`` of its dtype (see :func:`_accuracy`).
Measured at the attainable accuracy of float32 solves (Poisson, JAX-AMG's tridiagonal
quick start, convection-diffusion; CG, BiCGSTAB, GMRES): 0.2-3 eps; a recurrence that
drifted from ``b - A x`` (BiCGSTAB on a non-normal bidiagonal matrix, a residual peak of
260 ‖r_0‖): 60 eps."""


def _sign_probe(shape: tuple[int, ...], dtype: Any) -> jax.Array:
    """A fixed vector of signs ``±1`` of ``shape`` that behaves as random ones: entry ``i``'s
    sign is the top bit of MurmurHash3's 32-bit finalizer of ``i``.

    As for independent random signs, ``E ‖A g‖² = ‖A‖_F²`` over matrices whose structure the
    hash does not follow, so ``‖A g‖ / ‖g‖`` is about ``A``'s root-mean-square row norm: no
    constant or alternating pattern that a Laplacian (``A 1 = 0``) or a grid's checkerboard
    would make vanish or peak.  A few integer operations of one fused kernel
    (:func:`~._index_hash.index_hash`), where ``jax.random``'s generator compiled threefry
    into every solve program (issue 29).
    """
    h = index_hash(int(np.prod(shape))).reshape(shape)
    return jnp.where(h >> 31 == 1, 1, -1).astype(dtype)


def _accuracy(problem: _Problem, x: jax.Array, threshold: jax.Array
              ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(r, ‖r‖, attained)`` for ``r = b - A x``: whether ``‖r‖`` meets ``threshold`` or ``x``
    is as accurate as the dtype allows.

    Every norm is the test's (``problem.norm``).  The second is a normwise backward error
    ``‖r‖ / (‖A‖ ‖x‖ + ‖b‖)`` of at most ``ATTAINABLE_BACKWARD_ERROR · eps``: ``x`` then solves a system within a few roundings
    of ``A x = b``, all a solve in that precision can promise (its relative residual is then
    about ``eps · κ(A)``, above a float32 tolerance of 1e-6 once ``κ(A)`` passes ~10).
    ``‖A‖`` is estimated as ``‖A g‖ / ‖g‖`` for a fixed vector ``g`` of pseudo-random signs
    (:func:`_sign_probe`), below ``‖A‖₂`` (by ~2 on Poisson matrices), so the estimated
    backward error errs high.  ``A g`` and ``A x`` are one batched ``matvec`` (one pass over
    ``A`` for a CSR matrix).
    """
    dtype = x.dtype
    probe = _sign_probe(x.shape, dtype)
    products = jax.vmap(problem.matvec)(jnp.stack([x, probe]))
    r = problem.b - products[0]
    norm = problem.norm(r)
    operator_norm = problem.norm(products[1]) / problem.norm(probe)
    backward_error = norm / (operator_norm * problem.norm(x) + problem.r0_norm)
    eps = jnp.finfo(dtype).eps
    attained = (norm <= threshold) | (backward_error <= ATTAINABLE_BACKWARD_ERROR * eps)
    return r, norm, attained


def _classify(
    progress: _Progress, breakdown: Any, problem: _Problem, nonfinite: FailureReason
) -> _Progress:
    """Sets status and reason; rules later in the list take precedence."""
    norm = progress.residual_norm
    rules = [
        (progress.iterations >= problem.iteration_limit, Status.NOT_CONVERGED,
         FailureReason.MAX_ITERS),
        (norm > DIVERGENCE_FACTOR * problem.scale, Status.DIVERGED, FailureReason.RESIDUAL_GROWTH),
        (breakdown != FailureReason.NONE, Status.FAILED, breakdown),
        (norm <= progress.threshold, Status.SUCCESS, FailureReason.NONE),
        (~jnp.isfinite(norm), nonfinite.status, nonfinite),
    ]
    status, reason = progress.status, progress.reason
    for applies, rule_status, rule_reason in rules:
        status = jnp.where(applies, jnp.int32(rule_status), status)
        reason = jnp.where(applies, jnp.asarray(rule_reason, jnp.int32), reason)
    return progress._replace(status=status, reason=reason)


def _info(progress: _Progress, problem: _Problem, norm: jax.Array | None = None) -> SolveInfo:
    """The info of a solve whose returned iterate has residual norm ``norm`` (by default
    ``best_norm``: the solve returns its best iterate)."""
    norm = progress.best_norm if norm is None else norm
    return SolveInfo(
        iterations=progress.iterations,
        residual=norm / problem.scale,
        status=progress.status,
        residual_history=progress.history,
        failure_reason=progress.reason,
        rhs_inconsistency=jnp.full((), jnp.nan, progress.history.dtype),  # set by solve
        initial_residual=_times_power_of_two(problem.r0_norm, problem.exponent),
    )


def _running(state: tuple) -> jax.Array:
    """The loop condition: the progress (last in the state) is still running."""
    return state[-1].status == _RUNNING


def _breakdown(happened: jax.Array, reason: FailureReason) -> jax.Array:
    """The int32 code ``reason`` where ``happened``, else ``NONE``."""
    return jnp.where(happened, jnp.int32(reason), jnp.int32(FailureReason.NONE))


def _keep_if(keep: jax.Array, old: tuple, new: tuple) -> tuple:
    """``old`` where ``keep`` (a scalar), else ``new``, leaf by leaf."""
    return tuple(jnp.where(keep, o, n) for o, n in zip(old, new, strict=True))
