"""The status of a dense routine: LAPACK-style ``info``, ``rcond``, and `raise_on_failure`.

Dense routines do not raise when a matrix is not positive definite or is singular: that is only
known once the factorization has run, on the devices, possibly inside ``jax.jit``. Instead the
outputs are NaN and, with ``return_status=True``, a `Status` says what happened, as LAPACK's
(and cuSOLVER's) ``info`` does. The Cholesky and LU routines also estimate the reciprocal
condition number from their factor's diagonal and, as LAPACK's expert drivers (``xPOSVX``,
``xGESVX``), report ``info = n + 1`` when it is below machine epsilon: the matrix is singular
to working precision, the solution is computed all the same. `raise_on_failure` turns a failed
status into an exception, outside ``jax.jit``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

# What a positive ``info`` means, per routine, in LAPACK's words. `n` is the matrix order.
_CHOLESKY = "the leading minor of order {info} is not positive definite"
_LU = "U({info},{info}) is exactly zero (1-based), so the matrix is singular"
_NUMERICALLY_SINGULAR = (
    "the matrix is numerically singular: rcond={rcond:.3g} is below machine epsilon ({eps:.3g}) "
    "although no pivot is exactly zero; the outputs were computed nevertheless, but do not "
    "trust them (LAPACK's xGESVX/xPOSVX info = n + 1)"
)
_NOT_FINITE = (
    "the result is not finite although the input is (the algorithm did not converge, or a "
    "value overflowed; the XLA backend does not expose LAPACK's info for this routine, a "
    "check for NaN and Inf stands in for it)"
)
_MEANINGS = {
    "potrs": _CHOLESKY,
    "cho_factor": _CHOLESKY,
    "cho_inverse": _CHOLESKY,
    "lu_solve": _LU,
    "lu_factor": _LU,
    "solve": _LU,
    "least_squares": (
        "diagonal element {info} of the triangular factor of A is zero (1-based), so A does "
        "not have full rank"
    ),
    "eigh_tridiagonal": "{info} eigenvectors did not converge",
    "syevd": _NOT_FINITE,
    "gesvd": _NOT_FINITE,
    "qr": _NOT_FINITE,
    "polar": _NOT_FINITE,
}

ROUTINES = tuple(sorted([*_MEANINGS, "sygvd"]))


class SolverError(RuntimeError):
    """A dense routine failed: raised by `raise_on_failure`, which says which and why.

    Its message names the routine, LAPACK's ``info`` and what that means, e.g. ``"potrs
    failed: info=2: the leading minor of order 2 is not positive definite"``; for a stack of
    matrices (``jax.vmap``), the first that failed and how many did.
    """


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True, eq=False)
class Status:
    """What a dense routine reports about its run, in LAPACK's convention.

    ``info == 0`` means success. A positive ``info`` up to ``n`` means the routine failed and its
    outputs are NaN; its meaning depends on the routine, as in LAPACK:

    ==============================================  =============================================
    routine                                         ``info > 0``
    ==============================================  =============================================
    ``potrs``, ``cho_factor``, ``cho_inverse``      the leading minor of order ``info`` is not
                                                    positive definite (``potrf``)
    ``lu_solve``, ``lu_factor``, ``solve``          ``U(info, info)`` is exactly zero: singular
                                                    (``getrf``)
    ``least_squares``                               diagonal element ``info`` of ``R`` is zero:
                                                    ``A`` is rank deficient (``gels``)
    ``sygvd``                                       ``info > n``: the leading minor of order
                                                    ``info - n`` of ``B`` is not positive
                                                    definite; ``info <= n``: as ``syevd``
    ``syevd``, ``gesvd``, ``qr``, ``polar``         ``1``: the result is not finite although
                                                    the input is (no convergence, or overflow;
                                                    a NaN check, XLA does not expose LAPACK's
                                                    info here)
    ``eigh_tridiagonal``                            ``info`` eigenvectors did not converge
    ==============================================  =============================================

    ``info == n + 1`` (``potrs``, ``cho_factor``, ``cho_inverse``, ``lu_solve``, ``lu_factor``;
    ``cho_solve`` reports as ``potrs``): **numerically singular**. No pivot is exactly zero, but
    ``rcond`` is below machine epsilon (``jnp.finfo(dtype).eps``), so the matrix is singular to
    working precision. As LAPACK's expert drivers ``xPOSVX``/``xGESVX`` do, the outputs are
    computed and returned (not NaN), and the status is not success: ``status == 0`` is False,
    `raise_on_failure` raises.

    ``info == -1`` (``Status.NOT_FINITE``), any routine, on every backend: an input holds NaN
    or Inf where the routine reads it (``A``'s lower triangle for ``potrs``, ``cho_factor``,
    ``cho_inverse``, ``syevd`` and ``sygvd``; all of ``A`` and ``b`` elsewhere), so the outputs
    are NaN; whatever the factorization said of it (LAPACK and cuSOLVER factor NaN without a
    word, or call it a minor that is not positive definite). The Cholesky and LU routines see
    it in their factor (through ``rcond``) or their outputs, the others check their inputs
    first (two memory-bound passes over each, an estimated 6 ms at ``n = 32768`` in float64
    on an H200, against seconds for these ``O(n³)`` routines).

    ``rcond`` (Cholesky and LU routines; None for the others) is a reciprocal condition
    estimate read off the factor's diagonal in ``O(n)``: ``(min Lᵢᵢ / max Lᵢᵢ)²`` for
    ``A = L Lᴴ``, ``min |Uᵢᵢ| / max |Uᵢᵢ|`` for ``P A = L U``; ``0`` when the factorization
    failed, NaN when the factor is not finite (the status then says ``NOT_FINITE``). It bounds
    the true reciprocal condition number ``1/κ₂(A) = σ_min / σ_max`` from above: ``1/κ₂(A) <=
    rcond`` for Cholesky (exactly: ``λ_min <= Lᵢᵢ² <= λ_max``), ``1/κ₂(A) <= √n ρ rcond`` for
    LU (``ρ``, partial pivoting's growth factor, is small in practice); on well-conditioned
    random matrices it was within 4 × of ``1/κ₂`` (``dense/tests/rcond_test.py``). So a small
    ``rcond`` proves the matrix ill-conditioned; a large one does not prove it well
    conditioned (a factor with large off-diagonal entries, e.g. ``L`` unit lower triangular
    with ``-1`` below the diagonal, has ``rcond = 1`` and ``κ₂ ~ 4ⁿ``). It is not LAPACK's ``xPOCON``/``xGECON`` 1-norm estimate: that takes about
    ten triangular solves, each a pass over the ``n × n`` factor (at ``n = 32768`` in float64,
    4.3 GB read, over a millisecond on an H200 even at full bandwidth), 2 to 5 % of the solve
    it checks; this one reads ``n`` numbers.

    A `Status` is a pytree: it can be returned from ``jax.jit``, and under ``jax.vmap`` over a
    stack of matrices ``info`` has one entry per matrix. It also behaves as its ``info``, the
    int32 array JAXMg returns as its status: ``int(status)``, ``status == 0`` (an array),
    ``np.asarray(status)`` and ``status.block_until_ready()``.

    Attributes:
      info: an ``int32`` array, a scalar for one matrix, replicated over the devices.
      routine: the routine that ran, e.g. ``"potrs"`` (static).
      n: the order of the matrix (static), which ``info = n + 1`` and ``sygvd``'s ``info``
        refer to.
      rcond: the reciprocal condition estimate, a real scalar in the matrix's real dtype,
        replicated (one per matrix under ``jax.vmap``), never differentiated; None for routines
        that do not factor with Cholesky or LU.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> x, status = dense.potrs(jnp.array([[1., 2.], [2., 1.]]), jnp.ones(2),
      ...                         return_status=True)
      >>> status
      Status(routine='potrs', info=2, rcond=0)
      >>> status.message()
      'potrs failed: info=2: the leading minor of order 2 is not positive definite'
      >>> int(status), bool(status == 2)
      (2, True)

      A matrix singular to working precision: ``x`` is computed, the status says ``n + 1``.

      >>> x, status = dense.potrs(jnp.diag(jnp.array([1., 1e-9])), jnp.ones(2),
      ...                         return_status=True)
      >>> status, bool(status == status.n + 1)
      (Status(routine='potrs', info=3, rcond=1e-09), True)
    """

    # The ``info`` of a run whose factorization reported success but whose result is not
    # finite: an input held NaN or Inf.
    NOT_FINITE: ClassVar[int] = -1

    info: jax.Array
    routine: str = dataclasses.field(metadata=dict(static=True))
    n: int = dataclasses.field(default=0, metadata=dict(static=True), repr=False)
    rcond: jax.Array | None = None

    def __repr__(self) -> str:
        try:
            info = _host_info(self.info)
            rcond = None if self.rcond is None else _host_info(self.rcond)
        except TypeError:
            return f"Status(routine={self.routine!r}, info={self.info}, rcond={self.rcond})"
        shown = int(info) if info.ndim == 0 else info.tolist()
        if rcond is None:
            return f"Status(routine={self.routine!r}, info={shown})"
        rcond = np.vectorize(lambda r: f"{r:.3g}")(rcond)
        rcond = str(rcond) if rcond.ndim == 0 else "[" + ", ".join(rcond.ravel()) + "]"
        return f"Status(routine={self.routine!r}, info={shown}, rcond={rcond})"

    # Behaving as ``info``, as JAXMg's int32 status array does.

    def __int__(self) -> int:
        return int(_host_info(self.info))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(_host_info(self.info), dtype=dtype)

    def __eq__(self, other: Any) -> jax.Array:  # type: ignore[override]
        return jnp.equal(self.info, other.info if isinstance(other, Status) else other)

    def __ne__(self, other: Any) -> jax.Array:  # type: ignore[override]
        return jnp.logical_not(self.__eq__(other))

    __hash__ = object.__hash__  # one status is one object, as before ``==`` compared infos

    def block_until_ready(self) -> Status:
        """Waits until ``info`` is computed; returns the status (as ``jax.Array``'s does)."""
        jax.block_until_ready(self.info)
        return self

    @property
    def ok(self) -> jax.Array:
        """``info == 0``: a boolean array (one entry per matrix under ``jax.vmap``)."""
        return jnp.equal(self.info, 0)

    def message(self) -> str:
        """What ``info`` means, in words (outside ``jax.jit``); first failure of a stack."""
        info = _host_info(self.info)
        failed = np.flatnonzero(info.ravel() != 0)
        if failed.size == 0:
            return f"{self.routine} succeeded: info=0"
        value = int(info.ravel()[failed[0]])
        where = ""
        if info.ndim:
            index = tuple(int(i) for i in np.unravel_index(failed[0], info.shape))
            where = f" for matrix {index} of the stack ({failed.size} of {info.size} failed)"
        if self.rcond is not None and value == self.n + 1:
            rcond = _host_info(self.rcond).ravel()[failed[0]]
            meaning = _NUMERICALLY_SINGULAR.format(rcond=rcond, eps=np.finfo(rcond.dtype).eps)
        else:
            meaning = _meaning(self.routine, value, self.n)
        return f"{self.routine} failed{where}: info={value}: {meaning}"


def _meaning(routine: str, info: int, n: int) -> str:
    if info == Status.NOT_FINITE:
        return "an input holds NaN or Inf where the routine reads it, so the result is not finite"
    if info < 0:
        return f"argument {-info} had an illegal value"
    if routine == "sygvd":
        if info > n:
            return _CHOLESKY.format(info=info - n) + " in B"
        return _NOT_FINITE
    return _MEANINGS.get(routine, "the routine failed").format(info=info)


def _host_info(info: jax.Array) -> np.ndarray:
    """``info`` (or ``rcond``) on the host; a `TypeError` inside ``jax.jit``, where it is not
    known yet."""
    if isinstance(info, jax.core.Tracer):
        raise TypeError(
            "raise_on_failure: the status is a traced value (inside jax.jit, jax.vmap or a "
            "derivative); return it from the jitted function and call raise_on_failure on the "
            "result, outside."
        )
    if isinstance(info, jax.Array) and not info.is_fully_addressable:
        # Replicated over the devices of several processes: every process holds a full copy.
        info = info.addressable_data(0)
    return np.asarray(info)


def raise_on_failure(status: Status) -> None:
    """Raises `SolverError` if `status` reports a failure; call it outside ``jax.jit``.

    Args:
      status: a `Status`, as returned by a routine with ``return_status=True``.

    Raises:
      SolverError: if ``status.info`` is not zero (for a stack, if any is not); the message
        names the routine, the ``info`` and what it means (for ``info = n + 1``, that the
        matrix is numerically singular, and its ``rcond``).
      TypeError: if `status` is not a `Status`, or is traced (inside ``jax.jit``).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> singular = jnp.array([[1., 2.], [2., 4.]])
      >>> x, status = dense.lu_solve(singular, jnp.ones(2), return_status=True)
      >>> x
      Array([nan, nan], dtype=float32)
      >>> dense.raise_on_failure(status)
      Traceback (most recent call last):
        ...
      jaxsolve.dense._status.SolverError: lu_solve failed: info=2: U(2,2) is exactly zero (1-based), so the matrix is singular
    """
    if not isinstance(status, Status):
        raise TypeError(
            f"raise_on_failure: status must be a jaxsolve.dense.Status (from a routine called "
            f"with return_status=True), got {type(status).__name__}."
        )
    info = _host_info(status.info)
    if np.any(info != 0):
        raise SolverError(status.message())


def status_of(routine: str, info: jax.Array, n: int = 0, outputs: Any = (),
              rcond: jax.Array | None = None) -> Status:
    """A `Status` of `routine` (on matrices of order `n`) with ``info`` as ``int32``.

    Where ``info`` reports success but `rcond` (the factor's reciprocal condition estimate,
    if the routine has one) is below machine epsilon, ``info = n + 1``: numerically singular.
    Where ``info`` still reports success but an inexact array among `outputs` (a routine's
    results, or a factor's matrix) or `rcond` (NaN for a factor that is not finite) is not
    finite, the status says so with ``info = Status.NOT_FINITE``: NaN or Inf went in, which
    LAPACK factors without a word.
    """
    arrays = [x for x in jax.tree.leaves([outputs, rcond])
              if jnp.issubdtype(x.dtype, jnp.inexact)]
    return Status(info=_final_info(info, rcond, arrays, n), routine=routine, n=n, rcond=rcond)


@functools.partial(jax.jit, static_argnums=3)
def _final_info(info: jax.Array, rcond: jax.Array | None, arrays: list[jax.Array], n: int
                ) -> jax.Array:
    """`status_of`'s ``info``: one small compiled program (or part of the caller's), since
    the dozen operations it takes, dispatched one by one after a routine's own program, cost
    more than a small solve (about 0.3 ms on a CPU)."""
    info = jnp.asarray(info, jnp.int32)
    if rcond is not None:
        singular = rcond < jnp.finfo(rcond.dtype).eps  # False for NaN: a non-finite factor
        info = jnp.where(jnp.equal(info, 0) & singular, jnp.int32(n + 1), info)
    if arrays:
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in arrays]))
        info = jnp.where(jnp.equal(info, 0) & ~finite, jnp.int32(Status.NOT_FINITE), info)
    return info


def checked_finite(matrices: tuple[jax.Array, ...], *, lower: bool = False
                   ) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """Whether `matrices` (their lower triangles with `lower`: what ``syevd`` and ``sygvd``
    read) hold no NaN or Inf, and the `matrices` for the routine to decompose.

    Checked before the routine runs, not after: the one-GPU backend writes its result over the
    matrix in place, and XLA keeps a copy of any operand that is read after an in-place write
    (``n²`` more memory). The returned matrices depend on the answer (NaN where a matrix is
    not finite, else the matrix itself), which orders the check before the routine's write;
    XLA computes them in the matrices' own buffers, so a donated matrix stays the only one
    (``dense/tests/cusolver_gpu_test.py::test_donation_is_in_place`` checks it for ``syevd``;
    on the CPU, ``a[0, 0]`` alone written back, or no dependency, made XLA copy the matrix).
    Cost: one reduction and one elementwise pass over each matrix, memory-bound: at ``n =
    32768`` in float64, 26 GB of traffic, an estimated 6 ms at the H200's 4.8 TB/s, against
    seconds for the ``O(n³)`` decompositions that call it. Right-hand sides may be among
    `matrices`.
    """
    finite = jnp.bool_(True)
    for matrix in matrices:
        finite = finite & jnp.all(jnp.isfinite(jnp.tril(matrix) if lower else matrix))
    return finite, tuple(jnp.where(finite, matrix, jnp.nan).astype(matrix.dtype)
                         for matrix in matrices)


def not_finite_unless(finite: jax.Array, info: jax.Array) -> jax.Array:
    """``info``, or ``Status.NOT_FINITE`` where `finite` (from `checked_finite`) is False:
    NaN or Inf in what a routine reads decides its status, whatever the routine said of it."""
    return jnp.where(finite, info, jnp.int32(Status.NOT_FINITE)).astype(jnp.int32)


def fill_failed(info: jax.Array, *outputs: jax.Array) -> tuple[jax.Array, ...]:
    """`outputs` with NaN everywhere when ``info != 0`` (the failure contract of every routine).

    `info` is the factorization's own (LAPACK's, before `status_of` adds ``n + 1`` for a
    numerically singular matrix, whose outputs are kept)."""
    ok = jnp.equal(info, 0)
    return tuple(jnp.where(ok, x, jnp.nan) for x in outputs)


def with_status(routine: str, outputs: list[Any], info: jax.Array, return_status: bool,
                n: int = 0, rcond: jax.Array | None = None) -> Any:
    """What a public routine returns: its `outputs`, then its `Status` with `return_status`.

    Every dense routine answers in one convention: a single output alone, several as a tuple,
    and with ``return_status=True`` the `Status` of `routine` (``info`` on matrices of order
    `n`, with the factor's `rcond` if any, see `status_of`) appended last, so that ``x, status
    = potrs(..., return_status=True)`` and ``w, v, status = syevd(..., return_status=True)``
    read alike.
    """
    if return_status:
        outputs = [*outputs, status_of(routine, info, n, outputs, rcond)]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)
