"""The XLA reference backend: every routine computed by XLA's own linear algebra.

Each service calls ``jax.lax.linalg`` / ``jnp.linalg`` on the (sharded) operands, so it runs on
any platform: LAPACK on CPU, cuSOLVER on one GPU. It is the **correctness reference**, not the
scalable path: XLA's partitioner gathers a sharded matrix onto every device before factoring it,
so memory and time are those of one device. ``T_A`` and ``pad`` do not apply here.

``info`` follows LAPACK where XLA lets us know it: ``potrf``'s (the order of the first leading
minor that is not positive definite, recomputed by an unpivoted Cholesky only after XLA's
factor came back NaN; ``-1``, ``Status.NOT_FINITE``, where ``A``'s lower triangle holds NaN or
Inf), ``getrf``'s (the first exactly zero pivot of ``U``), ``gels``'s (the first
zero diagonal element of ``R``) and ``sygvd``'s ``n + potrf(B)``; elsewhere a NaN check (``1``
when an output is not finite). NaN or Inf in the inputs of the eigensolvers, least squares, QR,
SVD and polar is found before these services run (``Status.NOT_FINITE``, on every backend), so
their ``1`` means a result that is not finite from finite inputs.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from ._backend import CholeskyFactor, Decomposition, FactorServices, LUFactor, register

_HIGHEST = jax.lax.Precision.HIGHEST


def _matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.matmul(a, b, precision=_HIGHEST)


def _h(a: jax.Array) -> jax.Array:
    return jnp.conj(a).T


def _hermitian_from_lower(a: jax.Array) -> jax.Array:
    """The Hermitian matrix whose lower triangle is ``a``'s (the diagonal's real part): what
    LAPACK's ``uplo='L'`` routines read of ``a``."""
    lower = jnp.tril(a, -1)
    return lower + _h(lower) + jnp.diag(jnp.real(jnp.diagonal(a))).astype(a.dtype)


def _nan_unless(ok: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.where(ok, x, jnp.nan)


def _not_finite(*outputs: jax.Array) -> jax.Array:
    finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in outputs]))
    return jnp.where(finite, 0, 1).astype(jnp.int32)


# ------------------------------------------------------------------------ cholesky


def _unpivoted_cholesky_info(a: jax.Array) -> jax.Array:
    """LAPACK ``potrf``'s info: the first ``k`` whose leading minor is not positive definite.

    A right-looking Cholesky of the lower triangle, one column per step, that notes the first
    pivot that is not positive (or is NaN) and carries on with a pivot of 1.
    """
    n = a.shape[0]
    index = jnp.arange(n)
    real = jnp.finfo(a.dtype).dtype

    def step(j, carry):
        l, info = carry
        row = jnp.where(index < j, l[j], 0)
        pivot = jnp.real(a[j, j]) - jnp.sum(jnp.abs(row) ** 2)
        good = pivot > 0
        info = jnp.where((info == 0) & ~good, j + 1, info)
        diagonal = jnp.sqrt(jnp.where(good, pivot, jnp.ones((), real)))
        column = (a[:, j] - _matmul(l, jnp.conj(row))) / diagonal.astype(a.dtype)
        column = jnp.where(index > j, column, 0)
        column = column.at[j].set(diagonal.astype(a.dtype))
        return l.at[:, j].set(column), info

    _, info = jax.lax.fori_loop(0, n, step, (jnp.zeros_like(a), jnp.zeros((), jnp.int32)))
    return info


def potrf_info(a: jax.Array, l: jax.Array) -> jax.Array:
    """``potrf``'s info for ``a`` given XLA's factor ``l``, recomputed only on failure: ``-1``
    (``Status.NOT_FINITE``) where ``a``'s lower triangle holds NaN or Inf, else the first
    leading minor that is not positive definite."""
    failed = ~jnp.all(jnp.isfinite(jnp.diagonal(l)))

    def failure_info():
        finite = jnp.all(jnp.isfinite(jnp.tril(a)))
        return jnp.where(finite, jnp.maximum(_unpivoted_cholesky_info(a), 1), -1).astype(jnp.int32)

    return jax.lax.cond(failed, failure_info, lambda: jnp.zeros((), jnp.int32))


def potrf(a: jax.Array) -> CholeskyFactor:
    """``A = L Lᴴ`` from the lower triangle of ``A``, with ``triangle = L``."""
    l = jax.lax.linalg.cholesky(a, symmetrize_input=False)
    info = potrf_info(a, l)
    return CholeskyFactor(triangle=_nan_unless(info == 0, jnp.tril(l)), info=info)


def potrs(factor: CholeskyFactor, rhs: jax.Array) -> jax.Array:
    l = factor.triangle
    y = jax.lax.linalg.triangular_solve(l, rhs, left_side=True, lower=True)
    return jax.lax.linalg.triangular_solve(
        l, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True
    )


def cholesky_diagonal(factor: CholeskyFactor) -> jax.Array:
    return jnp.real(jnp.diagonal(factor.triangle))


def cholesky_logdet(factor: CholeskyFactor, diagonal=cholesky_diagonal) -> jax.Array:
    """``log det A = 2 log Π Lᵢᵢ``; ``diagonal(factor)`` reads ``L``'s diagonal (another
    backend passes its own)."""
    return 2 * log_abs_product(diagonal(factor))


def log_abs_product(values: jax.Array) -> jax.Array:
    """``log |Π vᵢ|`` of a real vector, rounded in its last steps only.

    ``Σ log |vᵢ|`` rounds every term, so its error grows with ``Σ |log |vᵢ||``, however much
    the logs cancel. Here the product is formed exactly in exponent and to a few rounding
    errors in mantissa (``frexp`` pairs, multiplied and renormalized level by level, so that
    it neither overflows nor underflows), and only ``log(mantissa) + exponent · log 2`` is
    rounded: the error is a few ulps of the result. A zero gives ``-inf``, NaN stays NaN.
    """
    mantissa, exponent = jnp.frexp(jnp.abs(values))
    while mantissa.shape[0] > 1:
        if mantissa.shape[0] % 2:
            mantissa = jnp.append(mantissa, jnp.ones((1,), mantissa.dtype))
            exponent = jnp.append(exponent, jnp.zeros((1,), exponent.dtype))
        mantissa, carry = jnp.frexp(mantissa[0::2] * mantissa[1::2])
        exponent = exponent[0::2] + exponent[1::2] + carry
    return jnp.log(mantissa[0]) + exponent[0].astype(mantissa.dtype) * math.log(2.0)


# ------------------------------------------------------------------------------ lu


def getrf(a: jax.Array) -> LUFactor:
    """``P A = L U`` packed as LAPACK's ``getrf`` packs it."""
    lu, pivots, _ = jax.lax.linalg.lu(a)
    zero = jnp.diagonal(lu) == 0
    info = jnp.where(jnp.any(zero), jnp.argmax(zero) + 1, 0).astype(jnp.int32)
    return LUFactor(_nan_unless(info == 0, lu), pivots, info)


def getrs(factor: LUFactor, rhs: jax.Array, transpose: bool) -> jax.Array:
    lu = factor.lu
    permutation = jax.lax.linalg.lu_pivots_to_permutation(factor.pivots, lu.shape[0])
    if not transpose:  # A = Pᵀ L U:  x = U⁻¹ L⁻¹ P b
        y = jax.lax.linalg.triangular_solve(
            lu, rhs[permutation], left_side=True, lower=True, unit_diagonal=True)
        return jax.lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
    # Aᵀ = Uᵀ Lᵀ P:  x = Pᵀ L⁻ᵀ U⁻ᵀ b
    y = jax.lax.linalg.triangular_solve(lu, rhs, left_side=True, lower=False, transpose_a=True)
    y = jax.lax.linalg.triangular_solve(
        lu, y, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
    return jnp.zeros_like(y).at[permutation].set(y)


def lu_diagonal(factor: LUFactor) -> jax.Array:
    """``U``'s diagonal (also of the cuSOLVER backend's factor of ``Aᵀ``)."""
    return jnp.diagonal(factor.lu)


def lu_logdet(factor: LUFactor) -> tuple[jax.Array, jax.Array]:
    """``(sign, log |det A|)`` from ``getrf``'s factor."""
    diagonal = lu_diagonal(factor)
    n = diagonal.shape[0]
    swaps = jnp.sum(factor.pivots != jnp.arange(n, dtype=factor.pivots.dtype))
    parity = jnp.where(swaps % 2 == 0, 1, -1).astype(diagonal.dtype)
    magnitude = jnp.abs(diagonal)
    if jnp.iscomplexobj(diagonal):
        sign = parity * jnp.prod(diagonal / magnitude.astype(diagonal.dtype))
    else:
        sign = parity * jnp.prod(jnp.sign(diagonal))
    return sign, log_abs_product(magnitude)


# -------------------------------------------------------------------- eigensolvers


def syevd(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    w, v = jnp.linalg.eigh(a, symmetrize_input=False)
    return w, v


def syevd_info(inputs, outputs) -> jax.Array:
    return _not_finite(*outputs)


def sygvd(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``A V = B V diag(w)``, ``Vᴴ B V = I``: reduced with ``B = L Lᴴ`` to ``C = L⁻¹ A L⁻ᴴ``.

    Reads the lower triangles of ``A`` and ``B`` only, as ``sygvd`` does.
    """
    l = jax.lax.linalg.cholesky(b, symmetrize_input=False)
    c = jax.lax.linalg.triangular_solve(l, _hermitian_from_lower(a), left_side=True, lower=True)
    c = jax.lax.linalg.triangular_solve(
        l, c, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    w, y = jnp.linalg.eigh(c, symmetrize_input=True)
    v = jax.lax.linalg.triangular_solve(
        l, y, left_side=True, lower=True, transpose_a=True, conjugate_a=True)
    return w, v


def sygvd_info(inputs, outputs) -> jax.Array:
    a, b = inputs
    n = a.shape[0]
    failed = _not_finite(*outputs) != 0

    def diagnose():
        b_info = potrf_info(b, jax.lax.linalg.cholesky(b, symmetrize_input=False))
        return jnp.where(b_info > 0, n + b_info, 1).astype(jnp.int32)

    return jax.lax.cond(failed, diagnose, lambda: jnp.zeros((), jnp.int32))


# ----------------------------------------------------- least squares, QR, SVD, polar


def gels(a: jax.Array, rhs: jax.Array, qr=jnp.linalg.qr) -> jax.Array:
    """Least squares (``m >= n``) or minimum norm (``m < n``) through a QR, as ``gels``.

    ``qr(a) -> (q, r)`` is the reduced QR it uses (another backend passes its own).
    """
    m, n = a.shape
    if m >= n:
        q, r = qr(a)
        return jax.lax.linalg.triangular_solve(
            r, _matmul(_h(q), rhs), left_side=True, lower=False)
    q, r = qr(_h(a))  # Aᴴ = Q R:  x = Q R⁻ᴴ b
    y = jax.lax.linalg.triangular_solve(
        r, rhs, left_side=True, lower=False, transpose_a=True, conjugate_a=True)
    return _matmul(q, y)


def gels_info(inputs, outputs) -> jax.Array:
    (a, _), (x,) = inputs, outputs

    def diagnose():
        m, n = a.shape
        _, r = jnp.linalg.qr(a if m >= n else _h(a))
        zero = jnp.diagonal(r) == 0
        return jnp.where(jnp.any(zero), jnp.argmax(zero) + 1, 1).astype(jnp.int32)

    return jax.lax.cond(_not_finite(x) != 0, diagnose, lambda: jnp.zeros((), jnp.int32))


def geqrf(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    q, r = jnp.linalg.qr(a, mode="reduced")
    return q, r


def gesvd(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    u, s, vh = jnp.linalg.svd(a, full_matrices=False)
    return u, s, vh


def polar(a: jax.Array, svd=gesvd) -> tuple[jax.Array, jax.Array]:
    """``A = U P`` from the SVD ``A = W diag(s) Vᴴ``: ``U = W Vᴴ``, ``P = V diag(s) Vᴴ``.

    ``svd(a) -> (w, s, vh)`` is the reduced SVD it uses (another backend passes its own).
    """
    w, s, vh = svd(a)
    return _matmul(w, vh), _matmul(_h(vh) * s.astype(a.dtype)[None, :], vh)


def decomposition_info(inputs, outputs) -> jax.Array:
    return _not_finite(*outputs)


def _constant(services):
    """A factory for services that do not depend on the layout (XLA places the operands)."""
    return lambda layout, dtype: services


register("cholesky", "xla",
         _constant(FactorServices(potrf, potrs, cholesky_logdet, cholesky_diagonal)))
register("lu", "xla", _constant(FactorServices(getrf, getrs, lu_logdet, lu_diagonal)))
register("syevd", "xla", _constant(Decomposition(syevd, syevd_info)))
register("sygvd", "xla", _constant(Decomposition(sygvd, sygvd_info)))
register("least_squares", "xla", _constant(Decomposition(gels, gels_info)))
register("qr", "xla", _constant(Decomposition(geqrf, decomposition_info)))
register("gesvd", "xla", _constant(Decomposition(gesvd, decomposition_info)))
register("polar", "xla", _constant(Decomposition(polar, decomposition_info)))
