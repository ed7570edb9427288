"""Derivatives of QR, SVD and polar decompositions computed by services.

Each rule is the derivative JAX uses for ``jnp.linalg.qr``/``svd`` (and a
closed form for the polar decomposition), evaluated on the outputs of the
caller's service (``geqrf``+``orgqr``, ``gesvd``, a polar routine), which is
never differentiated.  The primal outputs inside each JVP come from the rule
itself, so second and higher derivatives go through the same formulas.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from ._checks import check_service_outputs, checked_matrix
from ._decomposition_rule import decomposition_rule
from ._dense import conj_transpose, dense_matvec, hermitian_part
from ._eigh import EighService, eigh

QrService = Callable[[jax.Array], tuple[jax.Array, jax.Array]]
SvdService = Callable[[jax.Array], tuple[jax.Array, jax.Array, jax.Array]]
PolarService = Callable[[jax.Array], tuple[jax.Array, jax.Array]]


# ------------------------------------------------------------------------- qr


def _thin_qr_tangents(
    q: jax.Array, r: jax.Array, a_dot: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(Q̇, Ṙ)`` of ``A = Q R`` with ``m >= n`` (JAX's ``_thin_qr_jvp``)."""
    n = r.shape[1]
    # Ȧ R⁻¹: a right-side triangular solve.
    a_dot_r_inv = jax.lax.linalg.triangular_solve(
        r, a_dot, left_side=False, lower=False
    )
    omega = dense_matvec(conj_transpose(q), a_dot_r_inv)
    lower = jnp.tril(omega, -1)
    skew = lower - conj_transpose(lower)
    # The imaginary part of the diagonal keeps diag(R) real (complex inputs).
    imaginary = omega - jnp.real(omega).astype(omega.dtype)
    skew = skew + jnp.eye(n, dtype=omega.dtype) * imaginary
    q_dot = dense_matvec(q, skew - omega) + a_dot_r_inv
    r_dot = dense_matvec(omega - skew, r)
    return q_dot, r_dot


def _qr_tangents(operands, operand_tangents, outputs):
    (a,), (a_dot,), (q, r) = operands, operand_tangents, outputs
    m, n = a.shape
    if m >= n:
        return _thin_qr_tangents(q, r, a_dot)
    # Wide: [A₁ A₂] = Q [R₁ R₂] with A₁ = Q R₁ square and R₂ = Qᴴ A₂.
    q_dot, r1_dot = _thin_qr_tangents(q, r[:, :m], a_dot[:, :m])
    r2_dot = dense_matvec(conj_transpose(q_dot), a[:, m:]) + dense_matvec(
        conj_transpose(q), a_dot[:, m:]
    )
    return q_dot, jnp.concatenate([r1_dot, r2_dot], axis=1)


_qr = decomposition_rule(_qr_tangents)


def qr(a: jax.Array, *, decompose: QrService) -> tuple[jax.Array, jax.Array]:
    r"""Reduced QR decomposition ``A = Q R`` by a service; JAX's derivative.

    Equivalent to ``jnp.linalg.qr(a)`` (``mode="reduced"``).  For
    ``m >= n``, with ``Ω = Qᴴ Ȧ R⁻¹`` and ``S`` the skew-Hermitian matrix
    built from the strictly lower triangle of ``Ω`` (plus ``i Im Ω_ii`` on the
    diagonal, which keeps ``diag R`` real),

    .. math:: \dot Q = Q (S - \Omega) + \dot A R^{-1}, \qquad
              \dot R = (\Omega - S) R ;

    a wide ``A = [A₁ A₂]`` (``m < n``) uses this for the square block
    ``A₁ = Q R₁`` and ``Ṙ₂ = Q̇ᴴ A₂ + Qᴴ Ȧ₂``.  ``R⁻¹`` is applied by a
    triangular solve with the service's ``R``.  Requires ``R`` nonsingular
    (full-rank ``A₁``).

    Args:
        a: ``(m, n)`` matrix.
        decompose: the service ``decompose(a) -> (q, r)`` with
            ``q`` ``(m, k)`` orthonormal columns and ``r`` ``(k, n)`` upper
            triangular, ``k = min(m, n)``.

    Returns:
        ``(q, r)``, as returned by ``decompose``.

    Raises:
        ValueError: if ``a`` is not 2-D or ``decompose`` returns wrong shapes.
        TypeError: if ``a`` is not floating or complex, or ``decompose``
            returns wrong dtypes.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[1., 2.], [3., 4.], [5., 7.]])
        >>> q, r = autodiff.qr(a, decompose=jnp.linalg.qr)
        >>> jnp.allclose(q @ r, a, atol=1e-5)
        Array(True, dtype=bool)
    """
    a = checked_matrix(a, caller="qr")
    m, n = a.shape
    k = min(m, n)
    check_service_outputs(
        jax.eval_shape(decompose, a),
        [((m, k), a.dtype), ((k, n), a.dtype)],
        caller="qr",
        service="decompose",
    )
    return _qr(decompose, a)


# ------------------------------------------------------------------------ svd


def _svd_tangents(operands, operand_tangents, outputs):
    (a,), (a_dot,), (u, s, vh) = operands, operand_tangents, outputs
    m, n = a.shape
    k = s.shape[0]
    v = conj_transpose(vh)
    eye = jnp.eye(k, dtype=s.dtype)
    s_row = s[None, :]
    s_complex = s_row.astype(a.dtype)
    projected = dense_matvec(conj_transpose(u), dense_matvec(a_dot, v))  # Uᴴ Ȧ V
    s_dot = jnp.real(jnp.diagonal(projected))
    # F_ij = 1 / (s_j² - s_i²) off the diagonal, 0 on it.
    gaps = 1 / ((s_row + s_row.T) * (s_row - s_row.T) + eye) - eye
    gaps = gaps.astype(a.dtype)
    zero = (s == 0).astype(s.dtype)
    s_inv = jnp.diag(1 / (s + zero) - zero).astype(a.dtype)
    projected_s = projected * s_complex  # (Uᴴ Ȧ V) diag(s)
    s_projected = s_complex.T * projected  # diag(s) (Uᴴ Ȧ V)
    phase = (projected - conj_transpose(projected)) * s_inv / 2
    u_dot = dense_matvec(u, gaps * (projected_s + conj_transpose(projected_s)) + phase)
    v_dot = dense_matvec(v, gaps * (s_projected + conj_transpose(s_projected)))
    if m > n:  # the part of U̇ outside range(U): (I - U Uᴴ) Ȧ V S⁻¹
        a_dot_v = dense_matvec(a_dot, v)
        outside = a_dot_v - dense_matvec(u, dense_matvec(conj_transpose(u), a_dot_v))
        u_dot = u_dot + outside / s_complex
    if n > m:  # the part of V̇ outside range(V): (I - V Vᴴ) Ȧᴴ U S⁻¹
        a_dot_h_u = dense_matvec(conj_transpose(a_dot), u)
        outside = a_dot_h_u - dense_matvec(v, dense_matvec(vh, a_dot_h_u))
        v_dot = v_dot + outside / s_complex
    return u_dot, s_dot, conj_transpose(v_dot)


_svd = decomposition_rule(_svd_tangents)


def svd(
    a: jax.Array, *, decompose: SvdService
) -> tuple[jax.Array, jax.Array, jax.Array]:
    r"""Reduced SVD ``A = U diag(s) Vᴴ`` by a service; JAX's derivative.

    Equivalent to ``jnp.linalg.svd(a, full_matrices=False)``.  With
    ``P = Uᴴ Ȧ V`` and ``F_ij = 1 / (s_j² - s_i²)`` (``0`` on the diagonal),

    .. math:: \dot s = \operatorname{Re} \operatorname{diag} P, \quad
              \dot U = U \big(F \circ (P S + S P^H)\big)
                       + U \tfrac12 (P - P^H) S^{-1}\big|_{\text{diag}}
                       + (I - U U^H) \dot A V S^{-1}, \quad
              \dot V = V \big(F \circ (S P + P^H S)\big)
                       + (I - V V^H) \dot A^H U S^{-1},

    the last terms present only for tall (``U``) or wide (``V``) ``A``.  As in
    JAX: the joint phase of ``(uᵢ, vᵢ)`` is fixed so only phase-invariant
    functions (``U diag(f(s)) Vᴴ``, ``|U|²``) have meaningful derivatives;
    repeated singular values give ``inf``/``nan`` vector derivatives, and zero
    singular values are skipped in ``S⁻¹``.

    Args:
        a: ``(m, n)`` matrix.
        decompose: the service ``decompose(a) -> (u, s, vh)`` with ``u``
            ``(m, k)``, ``s`` ``(k,)`` real, ``vh`` ``(k, n)``,
            ``k = min(m, n)``.

    Returns:
        ``(u, s, vh)``, as returned by ``decompose``.

    Raises:
        ValueError: if ``a`` is not 2-D or ``decompose`` returns wrong shapes.
        TypeError: if ``a`` is not floating or complex, or ``decompose``
            returns wrong dtypes.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[3., 0.], [0., 2.], [0., 0.]])
        >>> svd = lambda a: jnp.linalg.svd(a, full_matrices=False)
        >>> nuclear_norm = lambda a: jnp.sum(autodiff.svd(a, decompose=svd)[1])
        >>> jax.grad(nuclear_norm)(a)  # U Vᴴ
        Array([[1., 0.],
               [0., 1.],
               [0., 0.]], dtype=float32)
    """
    a = checked_matrix(a, caller="svd")
    m, n = a.shape
    k = min(m, n)
    check_service_outputs(
        jax.eval_shape(decompose, a),
        [((m, k), a.dtype), ((k,), jnp.finfo(a.dtype).dtype), ((k, n), a.dtype)],
        caller="svd",
        service="decompose",
    )
    return _svd(decompose, a)


# ---------------------------------------------------------------------- polar


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _polar(
    decompose: PolarService, eigensolver: EighService, a: jax.Array
) -> tuple[jax.Array, jax.Array]:
    u, p = decompose(a)
    return u, p


@_polar.defjvp
def _polar_jvp(decompose, eigensolver, primals, tangents):
    (a,), (a_dot,) = primals, tangents
    u, p = _polar(decompose, eigensolver, a)
    # P = W diag(s) Wᴴ diagonalizes the Sylvester equation Ω P + P Ω = M - Mᴴ.
    s, w = eigh(p, decompose=eigensolver)
    s_complex = s.astype(a.dtype)
    w_h = conj_transpose(w)
    m_mat = dense_matvec(conj_transpose(u), a_dot)  # M = Uᴴ Ȧ
    skew = dense_matvec(w_h, dense_matvec(m_mat - conj_transpose(m_mat), w))
    sums = s_complex[:, None] + s_complex[None, :]
    omega = dense_matvec(w, dense_matvec(skew / sums, w_h))
    u_dot = dense_matvec(u, omega)
    if a.shape[0] > a.shape[1]:  # the part outside range(U): (I - U Uᴴ) Ȧ P⁻¹
        a_dot_p_inv = dense_matvec(dense_matvec(a_dot, w) / s_complex[None, :], w_h)
        u_dot = u_dot + a_dot_p_inv - dense_matvec(
            u, dense_matvec(conj_transpose(u), a_dot_p_inv)
        )
    p_dot = hermitian_part(m_mat - dense_matvec(omega, p))
    return (u, p), (u_dot, p_dot)


def polar(
    a: jax.Array, *, decompose: PolarService, eigensolver: EighService
) -> tuple[jax.Array, jax.Array]:
    r"""Polar decomposition ``A = U P`` by a service; closed-form derivative.

    Equivalent to ``jax.scipy.linalg.polar(a, side="right")`` for a full
    column rank ``(m, n)`` matrix with ``m >= n``: ``U`` has orthonormal
    columns and ``P = (Aᴴ A)^{1/2}`` is Hermitian positive definite.  JAX
    differentiates ``polar`` through its algorithm (``method="svd"``); here
    the derivative is computed from the outputs of the caller's polar routine.
    Differentiating ``A = U P`` with ``Ω = Uᴴ U̇`` (skew-Hermitian) and
    ``M = Uᴴ Ȧ``:

    .. math:: \Omega P + P \Omega = M - M^H, \qquad
              \dot U = U \Omega + (I - U U^H)\, \dot A P^{-1}, \qquad
              \dot P = M - \Omega P .

    The Sylvester equation is solved in the eigenbasis of ``P``
    (``P = W diag(s) Wᴴ``, ``Ω̃_ij = (Wᴴ (M - Mᴴ) W)_ij / (s_i + s_j)``) from
    ``eigensolver``, through :func:`eigh` so that second derivatives work;
    ``P⁻¹`` is applied with the same eigenbasis.  ``Ω`` does not depend on
    the choice of eigenbasis, so repeated singular values of ``A`` are fine
    to first order (second order differentiates ``W`` and needs distinct
    ones).

    Args:
        a: ``(m, n)`` matrix, ``m >= n``, full column rank.
        decompose: the service ``decompose(a) -> (u, p)``, ``u`` ``(m, n)``
            with orthonormal columns, ``p`` ``(n, n)`` Hermitian positive
            definite.
        eigensolver: a Hermitian eigensolver service as for :func:`eigh`
            (``syevd``), applied to ``p`` inside derivatives only.

    Returns:
        ``(u, p)``, as returned by ``decompose``.

    Raises:
        ValueError: if ``a`` is not 2-D, has ``m < n`` (decompose ``aᴴ``
            instead: ``aᴴ = U P`` gives the left decomposition ``a = P Uᴴ``),
            or ``decompose`` returns wrong shapes.
        TypeError: if ``a`` is not floating or complex, or ``decompose``
            returns wrong dtypes.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxsolve import autodiff
        >>> a = jnp.array([[2., 1.], [0., 1.]])
        >>> polar_svd = lambda a: jax.scipy.linalg.polar(a, method="svd")
        >>> u, p = autodiff.polar(
        ...     a, decompose=polar_svd, eigensolver=jnp.linalg.eigh)
        >>> jnp.allclose(u @ p, a, atol=1e-5)
        Array(True, dtype=bool)
    """
    a = checked_matrix(a, caller="polar")
    m, n = a.shape
    if m < n:
        raise ValueError(
            f"polar: a must have at least as many rows as columns, got {a.shape};"
            " for a wide matrix decompose aᴴ = U P, which gives a = P Uᴴ."
        )
    check_service_outputs(
        jax.eval_shape(decompose, a),
        [((m, n), a.dtype), ((n, n), a.dtype)],
        caller="polar",
        service="decompose",
    )
    return _polar(decompose, eigensolver, a)
