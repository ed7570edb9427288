"""Least squares and the QR, SVD and polar decompositions of ``(m, n)`` matrices."""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import NamedSharding, PartitionSpec

from jaxsolve import autodiff

from . import _backend
from ._compile import run
from ._layout import Layout, constrain, prepare_matrix, prepare_rhs
from ._status import fill_failed, with_status


# ---------------------------------------------------------------------- least squares


def _solution_sharding(layout: Layout, rows: int) -> NamedSharding | None:
    """``x`` (``rows`` rows) replicated (`Layout.replicate_solution`), else split like ``b``
    where its rows divide evenly, else replicated."""
    if layout.replicate_solution:
        return layout.replicated()
    if layout.mesh is None or layout.rhs_spec is None:
        return None
    row_axis, *rest = tuple(layout.rhs_spec)
    if row_axis is not None and rows % layout.mesh.shape[row_axis]:
        row_axis = None
    return NamedSharding(layout.mesh, PartitionSpec(row_axis, *rest))


def _least_squares_body(layout, a, b):
    gels = _backend.services("least_squares", layout, a.dtype)
    a = constrain(a, layout.matrix_sharding())
    b = constrain(b, layout.rhs_sharding())
    x = autodiff.lstsq(a, b, solve_least_squares=gels.compute)
    info = gels.info((a, b), (x,))
    (x,) = fill_failed(info, x)
    x = constrain(x, _solution_sharding(layout, a.shape[1]))
    return (x, constrain(info, layout.replicated())), ()


def least_squares(
    a: Any,
    b: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: tuple[Any, Any] | None = None,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
    replicate_x: bool = True,
) -> Any:
    r"""Least-squares (``m >= n``) or minimum-norm (``m < n``) solution of ``A x = b`` (``gels``).

    JAXMg's ``least_squares`` (which takes ``m >= n`` only), through a QR factorization; for a
    full-rank ``A`` it equals ``jnp.linalg.lstsq(a, b)[0]``. Derivatives are
    `jaxsolve.autodiff.lstsq`'s (the normal equations differentiated, ``N⁻¹`` applied by two
    more calls of the routine). A rank-deficient ``A`` gives NaN and ``info``, the first zero
    diagonal element of ``R``.

    Args:
      a: ``(m, n)`` full-rank matrix, sharded as for `potrs` (each split dimension divisible).
      b: ``(m,)`` or ``(m, k)``, the dtype of ``a``, split by rows like ``a`` or replicated.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: as for `potrs`.
      return_status: also return the `Status`.
      pad: as for `potrs`.
      donate: donate ``a``'s and ``b``'s buffers; both are deleted.
      replicate_x: as for `potrs`: ``x`` replicated (JAXMg's placement), or with False split
        like ``b`` where ``n`` allows.

    Returns:
      ``x``, ``(n,)`` or ``(n, k)`` (see `replicate_x`); or ``(x, status)``.

    Raises:
      ValueError: for bad arguments, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.array([[1., 0.], [1., 1.], [1., 2.], [1., 3.]])
      >>> x = dense.least_squares(a, jnp.array([1., 2., 3., 4.]))
      >>> bool(jnp.allclose(x, jnp.array([1., 1.])))
      True
    """
    caller = "least_squares"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs, square=False,
                               in_specs=in_specs, flags=dict(
                                   return_status=return_status, pad=pad, donate=donate,
                                   replicate_x=replicate_x))
    b, layout = prepare_rhs(caller, a, b, layout, in_specs, replicate_x=replicate_x)
    x, info = run(_least_squares_body, (layout,), (a, b), bool(donate),
                  replicated_outputs=(0,) if replicate_x else ())
    return with_status(caller, [x], info, return_status)


def least_squares_shardmap_ctx(
    a: Any,
    b: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: tuple[Any, Any] | None = None,
    pad: bool = True,
) -> tuple[Any, Any, Any, Any]:
    """`least_squares` for a caller-owned ``jax.jit`` that donates ``a`` and ``b``.

    JAXMg's ``least_squares_shardmap_ctx`` (1.4): ``(a_work, b_work, x, status)``, where
    ``a_work`` and ``b_work`` are outputs of ``a``'s and ``b``'s shapes (here ``a`` and ``b``
    themselves) for the outer ``jax.jit(..., donate_argnums=(0, 1))`` to alias them into;
    treat them as opaque. ``x`` comes back split like ``b`` where ``n`` allows. Nothing is
    donated by this function itself.

    Args:
      a, b, T_A, mesh, matrix_specs, in_specs, pad: as for `least_squares`.

    Returns:
      ``(a_work, b_work, x, status)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.array([[1., 0.], [1., 1.], [1., 2.], [1., 3.]])
      >>> _, _, x, status = jax.jit(dense.least_squares_shardmap_ctx)(a, 1 + jnp.arange(4.))
      >>> bool(jnp.allclose(x, jnp.array([1., 1.]))), int(status)
      (True, 0)
    """
    x, status = least_squares(a, b, T_A, mesh, matrix_specs, in_specs=in_specs,
                              return_status=True, pad=pad, replicate_x=False)
    return a, b, x, status


# ------------------------------------------------------------------------------- qr


def _qr_body(layout, a):
    qr_services = _backend.services("qr", layout, a.dtype)
    a = constrain(a, layout.matrix_sharding())
    q, r = autodiff.qr(a, decompose=qr_services.compute)
    info = qr_services.info((a,), (q, r))
    q, r = fill_failed(info, q, r)
    outputs = (constrain(q, layout.sharding_for(q.shape)),
               constrain(r, layout.sharding_for(r.shape)),
               constrain(info, layout.replicated()))
    return outputs, ()


def qr(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    r"""Reduced QR decomposition ``A = Q R`` (``geqrf`` + ``orgqr``).

    JAXMg's ``qr`` (which takes ``m >= n`` only); equivalent to ``jnp.linalg.qr(a)``.
    ``Q`` is ``(m, k)`` with orthonormal columns and ``R`` is ``(k, n)`` upper triangular,
    ``k = min(m, n)``, both split like ``a`` where their dimensions allow. Derivatives are
    `jaxsolve.autodiff.qr`'s (JAX's rule); they need ``R``'s leading ``k × k`` block
    nonsingular.

    Args:
      a: ``(m, n)`` matrix, sharded as for `potrs`.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      return_status: also return the `Status`.
      pad: as for `potrs`.
      donate: donate ``a``'s buffer; ``a`` is deleted.

    Returns:
      ``(Q, R)``, then ``status`` with `return_status`.

    Raises:
      ValueError: for bad arguments, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.array([[3., 0.], [4., 5.]])
      >>> q, r = dense.qr(a)
      >>> bool(jnp.allclose(q @ r, a, atol=1e-6))
      True
    """
    caller = "qr"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs,
                               in_specs=in_specs, square=False, flags=dict(
        return_status=return_status, pad=pad, donate=donate))
    q, r, info = run(_qr_body, (layout,), (a,), bool(donate))
    return with_status(caller, [q, r], info, return_status)


def qr_shardmap_ctx(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    pad: bool = True,
) -> tuple[Any, Any, Any]:
    """`qr` for a caller-owned ``jax.jit``: ``(Q, R, status)``.

    JAXMg's ``qr_shardmap_ctx`` (1.4). ``Q`` has ``a``'s shape (``m >= n``), so the outer
    ``jax.jit(..., donate_argnums=...)`` can alias a donated ``a`` into it; no work output is
    needed. Nothing is donated by this function itself.

    Args:
      a, T_A, mesh, matrix_specs, in_specs, pad: as for `qr`.

    Returns:
      ``(Q, R, status)``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> q, r, status = jax.jit(dense.qr_shardmap_ctx)(jnp.array([[3., 0.], [4., 5.]]))
      >>> int(status), r.shape
      (0, (2, 2))
    """
    return qr(a, T_A, mesh, matrix_specs, in_specs=in_specs, return_status=True, pad=pad)


# ------------------------------------------------------------------------------ svd


def _gesvd_body(layout, a):
    svd = _backend.services("gesvd", layout, a.dtype)
    a = constrain(a, layout.matrix_sharding())
    u, s, vh = autodiff.svd(a, decompose=svd.compute)
    info = svd.info((a,), (u, s, vh))
    u, s, vh = fill_failed(info, u, s, vh)
    outputs = (constrain(u, layout.sharding_for(u.shape)), constrain(s, layout.replicated()),
               constrain(vh, layout.sharding_for(vh.shape)), constrain(info, layout.replicated()))
    return outputs, ()


def gesvd(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    compute_u: bool = True,
    compute_vh: bool = True,
    full_matrices: bool = False,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    r"""Reduced singular value decomposition ``A = U diag(s) Vᴴ`` (``gesvd``).

    JAXMg's ``gesvd``; equivalent to ``jnp.linalg.svd(a, full_matrices=False)``. Singular
    values come in descending order, replicated. Derivatives are `jaxsolve.autodiff.svd`'s
    (JAX's rule): only phase-invariant functions of ``U`` and ``Vᴴ`` have meaningful ones, and
    repeated singular values give non-finite vector derivatives.

    Args:
      a: ``(m, n)`` matrix, sharded as for `potrs`.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      compute_u: return ``U`` (``(m, k)``, ``k = min(m, n)``).
      compute_vh: return ``Vᴴ`` (``(k, n)``).
      full_matrices: must be False: only the reduced SVD is provided (its derivative is the
        one defined).
      return_status: also return the `Status`.
      pad: as for `potrs`.
      donate: donate ``a``'s buffer; ``a`` is deleted.

    Returns:
      ``(U, s, Vᴴ)`` without the vectors not asked for (``s`` alone when neither is), then
      ``status`` with `return_status`.

    Raises:
      ValueError: for bad arguments (``full_matrices=True`` included), before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> dense.gesvd(jnp.array([[0., 2.], [3., 0.]]), compute_u=False, compute_vh=False)
      Array([3., 2.], dtype=float32)
    """
    caller = "gesvd"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs,
                               in_specs=in_specs, square=False, flags=dict(
        compute_u=compute_u, compute_vh=compute_vh, full_matrices=full_matrices,
        return_status=return_status, pad=pad, donate=donate))
    if full_matrices:
        raise ValueError(
            f"{caller}: full_matrices=True is not supported; the reduced SVD (U of shape "
            "(m, min(m, n))) is what jaxsolve differentiates."
        )
    u, s, vh, info = run(_gesvd_body, (layout,), (a,), bool(donate))
    outputs = [u] if compute_u else []
    outputs.append(s)
    if compute_vh:
        outputs.append(vh)
    return with_status(caller, outputs, info, return_status)


def gesvd_shardmap_ctx(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    compute_u: bool = True,
    compute_vh: bool = True,
    full_matrices: bool = False,
    pad: bool = True,
) -> tuple[Any, ...]:
    """`gesvd` for a caller-owned ``jax.jit`` that donates ``a``: ``(a_work, U, s, Vᴴ,
    status)``.

    JAXMg's ``gesvd_shardmap_ctx`` (1.4), with its names, argument and return order.
    ``a_work`` is an ``A``-sized output (``a`` itself: ``U`` and ``Vᴴ`` take buffers of their
    own) for the outer ``jax.jit(..., donate_argnums=...)`` to alias the donated ``a`` into;
    treat it as opaque. Nothing is donated by this function itself.

    Args:
      a, T_A, mesh, matrix_specs, in_specs, compute_u, compute_vh, full_matrices, pad: as for
        `gesvd`.

    Returns:
      ``(a_work, U, s, Vᴴ, status)`` without the vectors not asked for.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> _, u, s, vh, status = jax.jit(dense.gesvd_shardmap_ctx)(jnp.array([[0., 2.], [3., 0.]]))
      >>> s, int(status)
      (Array([3., 2.], dtype=float32), 0)
    """
    outputs = gesvd(a, T_A, mesh, matrix_specs, in_specs=in_specs, compute_u=compute_u,
                    compute_vh=compute_vh, full_matrices=full_matrices, return_status=True,
                    pad=pad)
    return (a, *outputs)


# ---------------------------------------------------------------------------- polar


def _polar_body(layout, a):
    polar_services = _backend.services("polar", layout, a.dtype)
    eigensolver = _backend.services("syevd", layout, a.dtype)
    a = constrain(a, layout.matrix_sharding())
    u, h = autodiff.polar(a, decompose=polar_services.compute, eigensolver=eigensolver.compute)
    info = polar_services.info((a,), (u, h))
    u, h = fill_failed(info, u, h)
    outputs = (constrain(u, layout.matrix_sharding()), constrain(h, layout.sharding_for(h.shape)),
               constrain(info, layout.replicated()))
    return outputs, ()


def polar(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    compute_h: bool = True,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
) -> Any:
    r"""Polar decomposition ``A = U H`` of an ``(m, n)`` matrix, ``m >= n``.

    JAXMg's ``polar``; equivalent to ``jax.scipy.linalg.polar(a)`` (``side="right"``): ``U``
    has orthonormal columns and ``H = (Aᴴ A)^{1/2}`` is Hermitian positive semidefinite.
    Derivatives are `jaxsolve.autodiff.polar`'s closed form (a Sylvester equation solved in
    the eigenbasis of ``H``, from `syevd`'s backend); they need full column rank.

    Args:
      a: ``(m, n)`` matrix, ``m >= n``, sharded as for `potrs`.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      compute_h: also return ``H``.
      return_status: also return the `Status`.
      pad: as for `potrs`.
      donate: donate ``a``'s buffer (``U`` is written over it); ``a`` is deleted.

    Returns:
      ``(U, H)`` or ``U``, then ``status`` with `return_status`.

    Raises:
      ValueError: for bad arguments (``m < n`` included), before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> u, h = dense.polar(jnp.array([[0., 2.], [3., 0.]]))
      >>> u
      Array([[0., 1.],
             [1., 0.]], dtype=float32)
    """
    caller = "polar"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs,
                               in_specs=in_specs, square=False, flags=dict(
        compute_h=compute_h, return_status=return_status, pad=pad, donate=donate))
    if a.shape[0] < a.shape[1]:
        raise ValueError(
            f"{caller}: a must have at least as many rows as columns, got shape {a.shape}; "
            "for a wide matrix decompose its conjugate transpose."
        )
    u, h, info = run(_polar_body, (layout,), (a,), bool(donate))
    return with_status(caller, [u, h] if compute_h else [u], info, return_status)


def polar_shardmap_ctx(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    compute_h: bool = True,
    pad: bool = True,
) -> tuple[Any, ...]:
    """`polar` for a caller-owned ``jax.jit``: ``(U, H, status)``.

    JAXMg's ``polar_shardmap_ctx`` (1.4). ``U`` has ``a``'s shape, so the outer ``jax.jit(...,
    donate_argnums=...)`` can alias a donated ``a`` into it; no work output is needed.
    Nothing is donated by this function itself.

    Args:
      a, T_A, mesh, matrix_specs, in_specs, compute_h, pad: as for `polar`.

    Returns:
      ``(U, H, status)``, or ``(U, status)`` without ``H``.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> u, h, status = jax.jit(dense.polar_shardmap_ctx)(jnp.array([[0., 2.], [3., 0.]]))
      >>> u, int(status)
      (Array([[0., 1.],
             [1., 0.]], dtype=float32), 0)
    """
    return polar(a, T_A, mesh, matrix_specs, in_specs=in_specs, compute_h=compute_h,
                 return_status=True, pad=pad)

