"""How a solve ended: status codes, the reason behind them, and ``SolveInfo``.

Every iterative solve returns ``(x, info)``.  ``info`` is a :class:`SolveInfo`
pytree of arrays, so it comes back through ``jit`` and ``vmap`` like ``x``;
a failed solve is a value (``info.status``), never an exception raised from
inside a compiled loop.  Call :func:`raise_on_failure` on the concrete
``info`` (outside ``jit``) to turn an unsuccessful status into a
:class:`SolveError` that says what went wrong and what to try instead.

The status codes are AmgX's (``AMGX_SOLVE_STATUS``), so code written against
JAX-AMG's ``AMGXStatus`` keeps working: :data:`AMGXStatus` is :class:`Status`.
"""

from __future__ import annotations

import dataclasses
import enum

import jax
import numpy as np


class Status(enum.IntEnum):
    """The outcome of an iterative solve, numbered as AmgX numbers it.

    * ``SUCCESS`` (0): the convergence test was met by the true residual
      ``b - A x``, or the recurrence's was and ``x`` is as accurate as the
      dtype allows (a normwise backward error of at most a few eps).
    * ``FAILED`` (1): the method broke down (a division by an exact zero
      its theory rules out, e.g. ``pᴴAp = 0`` in CG, or an indefinite
      preconditioner in CG) or its inputs were not finite;
      ``info.failure_reason`` says which.
    * ``DIVERGED`` (2): the residual became NaN/Inf or grew far beyond the
      initial residual.
    * ``NOT_CONVERGED`` (3): ``max_iters`` iterations ran without meeting the
      tolerance, or (``ACCURACY_LIMIT``) the method's recurrence residual met
      it but the true residual ``b - A x`` met neither it nor the accuracy the
      dtype attains (a normwise backward error of a few eps), also after one
      restart from ``x``: the recurrence drifted from ``b - A x``.

    Whatever the status, the ``x`` returned is never worse than the initial
    guess: CG, BiCGSTAB and the stationary iteration return the iterate with
    the smallest residual norm they met (``x0`` included), GMRES and FGMRES
    their last finite one (see ``jaxsolve.sparse.cg``); ``info.residual`` is
    the returned iterate's.  (Only values the solve refuses before it starts,
    ``NONFINITE_MATRIX`` and ``ZERO_DIAGONAL``, return NaN.)

    Examples:
        >>> from jaxsolve import sparse
        >>> sparse.Status(3).name
        'NOT_CONVERGED'
        >>> sparse.AMGXStatus.SUCCESS == 0
        True
    """

    SUCCESS = 0
    FAILED = 1
    DIVERGED = 2
    NOT_CONVERGED = 3


AMGXStatus = Status
"""JAX-AMG's name for :class:`Status` (same class, same numbering)."""


class FailureReason(enum.IntEnum):
    """Why a solve did not succeed; ``NONE`` when it did.

    Each reason belongs to one :class:`Status` (:attr:`status`) and has a
    readable :attr:`message` and a piece of :attr:`advice`, which
    :func:`raise_on_failure` puts in its error.

    Examples:
        >>> from jaxsolve import sparse
        >>> reason = sparse.FailureReason.MAX_ITERS
        >>> reason.status.name
        'NOT_CONVERGED'
        >>> reason.advice
        'Increase max_iters or use a stronger preconditioner.'
    """

    NONE = 0
    MAX_ITERS = 1
    NONFINITE_RESIDUAL = 2
    RESIDUAL_GROWTH = 3
    NONFINITE_INPUT = 4
    NOT_POSITIVE_DEFINITE = 5
    PRECONDITIONER_NOT_POSITIVE_DEFINITE = 6
    BICGSTAB_BREAKDOWN = 7
    BICGSTAB_STAGNATION = 8
    GMRES_BREAKDOWN = 9
    NONFINITE_MATRIX = 10
    ZERO_DIAGONAL = 11
    BACKEND_FAILED = 12
    ACCURACY_LIMIT = 13

    @property
    def status(self) -> Status:
        """The status a solve ending for this reason reports."""
        return _REASONS[self][0]

    @property
    def message(self) -> str:
        """What happened, in words."""
        return _REASONS[self][1]

    @property
    def advice(self) -> str:
        """What to try instead."""
        return _REASONS[self][2]


# The divergence test of the Krylov methods: a residual norm above this
# multiple of the initial residual norm reports DIVERGED.  It is large enough
# that BiCGSTAB's irregular (but convergent) residual histories never reach it.
DIVERGENCE_FACTOR = 1e10

_REASONS = {
    FailureReason.NONE: (Status.SUCCESS, "the convergence test was met", ""),
    FailureReason.MAX_ITERS: (
        Status.NOT_CONVERGED,
        "the residual did not reach the tolerance within max_iters iterations",
        "Increase max_iters or use a stronger preconditioner.",
    ),
    FailureReason.NONFINITE_RESIDUAL: (
        Status.DIVERGED,
        "the residual became NaN or Inf during the iteration",
        "Check that the matrix and the preconditioner are finite and"
        " nonsingular; in float32, try float64.",
    ),
    FailureReason.RESIDUAL_GROWTH: (
        Status.DIVERGED,
        f"the residual grew above {DIVERGENCE_FACTOR:.0e} times the initial"
        " residual",
        "Check the preconditioner (it must approximate A⁻¹), or use gmres,"
        " whose residual never grows.",
    ),
    FailureReason.NONFINITE_INPUT: (
        Status.FAILED,
        "the initial residual b - A x0 is not finite: b, x0 or the matrix"
        " holds NaN or Inf",
        "Check the inputs, e.g. with jnp.isfinite(b).all().",
    ),
    FailureReason.NOT_POSITIVE_DEFINITE: (
        Status.FAILED,
        "CG found pᴴAp <= 0: the matrix is not Hermitian positive definite (x is"
        " the iterate with the smallest residual before it)",
        "Use bicgstab or gmres for indefinite, singular or nonsymmetric"
        " matrices.",
    ),
    FailureReason.PRECONDITIONER_NOT_POSITIVE_DEFINITE: (
        Status.FAILED,
        "CG found rᴴMr <= 0: the preconditioner is not Hermitian positive"
        " definite (x is the iterate with the smallest residual before it)",
        "Use a symmetric positive definite preconditioner (e.g. jacobi on a"
        " positive diagonal), or bicgstab/gmres. An AMG preconditioner is"
        " positive definite only when its smoother converges: damped Jacobi"
        " (BLOCK_JACOBI, relaxation_factor 0.9 by default) diverges where"
        " ω ρ(D⁻¹A) >= 2, as on elasticity (ρ ≈ 2.3); use JACOBI_L1 or a smaller"
        " relaxation_factor there.",
    ),
    FailureReason.BICGSTAB_BREAKDOWN: (
        Status.FAILED,
        "BiCGSTAB broke down: (r̂, r) = 0 or (r̂, A M⁻¹ p) = 0",
        "Restart from the returned x (pass it as x0), or use gmres.",
    ),
    FailureReason.BICGSTAB_STAGNATION: (
        Status.FAILED,
        "BiCGSTAB stagnated: omega = 0, so A M⁻¹ s is orthogonal to s (the"
        " matrix or the preconditioner may be singular)",
        "Use gmres, or check the matrix and the preconditioner for"
        " singularity.",
    ),
    FailureReason.GMRES_BREAKDOWN: (
        Status.FAILED,
        "GMRES broke down: the Krylov space stopped growing without"
        " containing the solution (A M⁻¹ is singular and b is not in its"
        " range)",
        "Check the matrix for singularity, or remove its null space from b.",
    ),
    FailureReason.NONFINITE_MATRIX: (
        Status.FAILED,
        "the matrix's values hold NaN or Inf",
        "Check the values of A, e.g. with jnp.isfinite(A.values).all().",
    ),
    FailureReason.ZERO_DIAGONAL: (
        Status.FAILED,
        "the matrix has a zero diagonal entry, and the smoother or preconditioner"
        " divides by the diagonal",
        "Use preconditioner 'NOSOLVER' (or JACOBI_L1), or reorder the system so that"
        " the diagonal is nonzero.",
    ),
    FailureReason.ACCURACY_LIMIT: (
        Status.NOT_CONVERGED,
        "the method's recurrence residual met the tolerance but the true residual"
        " b - A x met neither the tolerance nor the accuracy the dtype attains (its"
        " normwise backward error stayed above a few eps), also after a restart from x:"
        " the recurrence drifted from the true residual",
        "Solve in float64, precondition better (a smaller residual peak drifts less), or"
        " use GMRES, whose restarts recompute b - A x.",
    ),
    FailureReason.BACKEND_FAILED: (
        Status.FAILED,
        "the AmgX backend reported a failed solve (AmgX's AMGX_SOLVE_FAILED)",
        "Try another AmgX configuration, or jaxsolve's engine: use_backend('jaxsolve').",
    ),
}


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SolveInfo:
    """What an iterative solve did, as arrays (a pytree).

    Under ``jax.vmap`` every field gains the batch axes in front (one entry
    per solve), e.g. ``status`` has shape ``(batch,)`` and
    ``residual_history`` ``(batch, max_iters + 1)``.

    **JAX-AMG's keys.**  ``info[key]`` answers the keys of JAX-AMG's ``info``
    dict with JAX-AMG's meaning, so that ported code runs unchanged:

    * ``info["iterations"]``: the iterations, a Python ``int`` for one concrete
      solve (else the array);
    * ``info["residual"]``: the *absolute* residual norm ``‖b - A x‖`` of the
      returned ``x`` (``residual × initial_residual``), a ``float`` for one
      concrete solve;
    * ``info["status"]``: an :class:`AMGXStatus` for one concrete solve;
    * ``info["residual_history"]``: the absolute residual norms ``‖r_k‖``,
      entry 0 the initial one; outside ``jit`` (one concrete solve) trimmed to
      ``iterations + 1`` entries, inside ``jit`` all ``max_iters + 1``,
      NaN-padded.  jaxsolve's ``solve`` keeps the history only when asked
      (``store_res_history: 1``); without it the key raises ``KeyError``.
    * ``info["rhs_inconsistency"]``: as the attribute, for a singular solve.

    ``info.keys()`` lists the keys this ``info`` answers; ``info.get(key)``
    gives ``None`` for the others.  The attributes keep jaxsolve's relative
    residuals.  Every residual norm, here and in the attributes, is the solve's
    convergence-test norm: ``‖·‖₂`` unless the configuration's ``norm`` is AmgX's
    ``L1`` or ``LMAX`` (AmgX computes its residuals in that norm too).

    Attributes:
        iterations: ``()`` int32, the iterations done (for GMRES: Arnoldi
            steps, summed over restarts).
        residual: ``()`` real, the relative residual ``‖r‖ / ‖r_0‖`` of the
            returned ``x`` (``0`` when ``r_0 = 0``), ``r = b - A x``: on
            success (and on ``ACCURACY_LIMIT``) the true residual, computed
            once after the loop (a float32 success at the dtype's attainable
            accuracy may lie above the tolerance: see :mod:`._krylov`); else
            the smallest recurrence residual the method met (see
            :class:`Status`).
        status: ``()`` int32, a :class:`Status` code.
        residual_history: real, ``‖r_k‖ / ‖r_0‖`` for
            ``k = 0, ..., iterations`` (so entry 0 is ``1``), then NaN, in
            ``max_iters + 1`` entries when the solve was asked to store it
            (``store_history=True``; ``solve``'s ``store_res_history: 1``),
            else empty, shape ``(0,)``: no memory that grows with
            ``max_iters``.
        failure_reason: ``()`` int32, a :class:`FailureReason` code
            (``NONE`` on success).
        rhs_inconsistency: ``()`` real, for a singular system (``solve(...,
            nullspace=...)``) the part of ``b`` outside ``A``'s range,
            ``‖P b‖ / ‖b‖`` with ``P`` the orthogonal projection onto
            ``null(Aᴴ)`` (``0`` for a consistent ``b``, and for ``b = 0``);
            NaN when no null space was given (None in a ``SolveInfo`` built
            without it).  (JAX-AMG's ``info["rhs_inconsistency"]``.)
        initial_residual: ``()`` real, ``‖r_0‖ = ‖b - A x0‖``, the norm the
            relative residuals are relative to (None in a ``SolveInfo`` built
            without it; the Krylov methods set it).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxsolve import sparse
        >>> x, info = sparse.cg(lambda v: 2 * v, jnp.ones(3), max_iters=4,
        ...                     store_history=True)
        >>> int(info.status), int(info.iterations)
        (0, 1)
        >>> info.residual_history.round(6)  # rounded: a GPU's last bit may differ
        Array([ 1.,  0., nan, nan, nan], dtype=float32)
        >>> sparse.cg(lambda v: 2 * v, jnp.ones(3))[1].residual_history.shape
        (0,)

        JAX-AMG's keys, absolute and trimmed (``‖b‖ = √3``):

        >>> x, info = sparse.cg(lambda v: 2 * v, 3 * jnp.ones(3), max_iters=4,
        ...                     store_history=True)
        >>> info["iterations"], info["status"], info["residual"], info.initial_residual.round(4)
        (1, <Status.SUCCESS: 0>, 0.0, Array(5.1962, dtype=float32))
        >>> info["residual_history"].round(4)
        Array([5.1962, 0.    ], dtype=float32)
    """

    iterations: jax.Array
    residual: jax.Array
    status: jax.Array
    residual_history: jax.Array
    failure_reason: jax.Array
    rhs_inconsistency: jax.Array | None = None
    initial_residual: jax.Array | None = None

    def keys(self) -> list[str]:
        """The JAX-AMG keys that ``info[key]`` answers for this ``info``."""
        keys = ["iterations", "status"]
        if self.initial_residual is not None:
            keys.append("residual")
            if np.shape(self.residual_history)[-1]:
                keys.append("residual_history")
        inconsistency = self.rhs_inconsistency  # NaN: not a singular solve
        if inconsistency is not None and (
                not _concrete(inconsistency) or not np.isnan(inconsistency).all()):
            keys.append("rhs_inconsistency")
        return keys

    def get(self, key: str, default: object = None) -> object:
        """``info[key]``, or ``default`` for a key this ``info`` does not answer."""
        return self[key] if key in self.keys() else default

    def __getitem__(self, key: str) -> object:
        """JAX-AMG's ``info[key]`` (see the class docstring)."""
        if not isinstance(key, str) or key not in self.keys():
            raise KeyError(_missing_key(self, key))
        single = _concrete(self.iterations) and np.ndim(self.iterations) == 0
        if key == "iterations":
            return int(self.iterations) if single else self.iterations
        if key == "status":
            return Status(int(self.status)) if single else self.status
        if key == "residual":
            absolute = self.residual * self.initial_residual
            return float(absolute) if single and _concrete(absolute) else absolute
        if key == "residual_history":
            history = self.residual_history * self.initial_residual[..., None]
            if single and _concrete(history):
                history = history[: int(self.iterations) + 1]
            return history
        value = getattr(self, key)
        return float(value) if single and _concrete(value) else value


def _concrete(value: object) -> bool:
    return not isinstance(value, jax.core.Tracer)


def _missing_key(info: SolveInfo, key: object) -> str:
    if key == "residual_history" and info.initial_residual is not None:
        return ("info['residual_history']: this solve did not store its residual history;"
                " pass store_res_history=1 in its config (jaxsolve stores it only when asked,"
                " JAX-AMG always)")
    if key in ("residual", "residual_history"):
        return (f"info[{key!r}]: this SolveInfo has no initial_residual, so its absolute"
                " residuals are unknown (the Krylov methods set it)")
    return f"info[{key!r}]: not a key of this SolveInfo; it has {info.keys()}"


class SolveError(RuntimeError):
    """Raised by :func:`raise_on_failure` for an unsuccessful solve.

    Attributes:
        info: the :class:`SolveInfo` that failed, as NumPy arrays.
    """

    def __init__(self, message: str, info: SolveInfo):
        super().__init__(message)
        self.info = info


_MAX_LISTED = 10


def raise_on_failure(info: SolveInfo) -> None:
    """Raises :class:`SolveError` unless every solve in ``info`` succeeded.

    Call it on concrete results, outside ``jit``: a status is only known once
    the solve has run.  (Inside ``jit``, return ``info`` and check it
    afterwards.)  For a batch of solves (an ``info`` from ``jax.vmap``) the
    error lists the indices that failed and why.

    Args:
        info: the :class:`SolveInfo` of one solve, or of a batch of solves.

    Raises:
        SolveError: if some ``info.status`` is not ``SUCCESS``; the message
            names the status, the iterations, the relative residual, the
            reason and what to try instead.
        TypeError: if ``info`` is not a :class:`SolveInfo`, or is traced
            (called inside ``jit``/``vmap``/``grad``).

    Examples:
        >>> import jax.numpy as jnp
        >>> from jaxsolve import sparse
        >>> matvec = lambda v: jnp.array([4., 1.]) * v
        >>> x, info = sparse.cg(matvec, jnp.ones(2), max_iters=1)
        >>> sparse.raise_on_failure(info)  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
          ...
        jaxsolve.sparse._status.SolveError: jaxsolve.sparse: the solve ended
        with status NOT_CONVERGED (3) after 1 iterations (relative residual
        6.0e-01): the residual did not reach the tolerance within max_iters
        iterations. Increase max_iters or use a stronger preconditioner.
    """
    if not isinstance(info, SolveInfo):
        raise TypeError(
            "raise_on_failure: info must be the SolveInfo a solver returned,"
            f" got {type(info).__name__}."
        )
    try:
        info = jax.tree.map(np.asarray, info)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        raise TypeError(
            "raise_on_failure: info is traced (called inside jit, vmap or grad)."
            " Return info from the transformed function and call"
            " raise_on_failure on the result."
        ) from None
    if info.status.ndim == 0:
        if info.status != Status.SUCCESS:
            raise SolveError(
                f"jaxsolve.sparse: the solve ended with {_describe(info, ())}", info
            )
        return
    failed = [tuple(map(int, index)) for index in np.argwhere(info.status != Status.SUCCESS)]
    if not failed:
        return
    lines = [
        f"  index {index if len(index) > 1 else index[0]}: {_describe(info, index)}"
        for index in failed[:_MAX_LISTED]
    ]
    if len(failed) > _MAX_LISTED:
        lines.append(f"  ... and {len(failed) - _MAX_LISTED} more.")
    raise SolveError(
        f"jaxsolve.sparse: {len(failed)} of {info.status.size} solves did not"
        " succeed:\n" + "\n".join(lines),
        info,
    )


def _describe(info: SolveInfo, index: tuple[int, ...]) -> str:
    """One solve's outcome: status, iterations, residual, reason, advice."""
    reason = FailureReason(int(info.failure_reason[index]))
    status = Status(int(info.status[index]))
    return (
        f"status {status.name} ({status.value}) after"
        f" {int(info.iterations[index])} iterations (relative residual"
        f" {float(info.residual[index]):.1e}): {reason.message}. {reason.advice}"
    )
