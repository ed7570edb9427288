"""LU routines: `lu_solve`, `lu_factor`, and `solve`/`slogdet` in ``jax.numpy.linalg``'s shape."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from jaxsolve import autodiff

from . import _factor
from ._arguments import (
    check_flag,
    check_tile,
    checked_array,
    constrain,
    prepare_matrix,
    prepare_rhs,
    work_matrix,
)
from ._compile import run, run_for_context
from ._factor import DenseFactor, check_factor
from ._status import fill_failed, with_status


def _lu_solve_body(layout, a, b):
    lu, factorization = _factor.factorize("lu", layout, a)
    x = _factor.solve_with("lu", lu, factorization, b, layout)
    info, rcond = _factor.replicated_report("lu", lu, factorization, layout)
    return (x, info, rcond), work_matrix(factorization.factor, a, layout)


def lu_solve(
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
    r"""Solves ``A x = b`` for a general square ``A`` (LU, partial pivoting: ``getrf``+``getrs``).

    JAXMg's ``lu_solve``, with its names and argument order; ``a`` may also be a factor from
    `lu_factor`, to solve many times with one factorization. Derivatives are
    `jaxsolve.autodiff.lu_solve`'s: ``ẋ = A⁻¹(ḃ - Ȧ x)`` forward and, in reverse, one
    transposed solve ``A⁻ᵀ x̄`` with the same factor (``getrs`` with ``trans='T'``). ``jax.vmap``
    over right-hand sides solves them as extra columns of one call.

    A singular ``A`` raises nothing: ``x`` is NaN and the status carries ``getrf``'s ``info``
    (the first exactly zero pivot ``U(info, info)``). A matrix singular to working precision
    (no pivot exactly zero, but ``status.rcond``, the pivots' ratio, below machine epsilon)
    gets ``info = n + 1`` and ``x`` as computed, as LAPACK's ``xGESVX``; see `Status`.

    Args:
      a: ``(n, n)`` nonsingular matrix (float32, float64, complex64 or complex128), sharded as
        for `potrs`; or a `DenseFactor` from `lu_factor` (then leave `mesh`, `matrix_specs`
        and `in_specs` out: the factor keeps its own).
      b: ``(n,)`` or ``(n, k)``, the dtype of ``a``, split by rows like ``a`` or replicated.
      T_A: as for `potrs` (checked; the XLA reference backend does not tile).
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: as for `potrs`.
      return_status: also return the `Status`.
      pad: as for `potrs`.
      donate: donate ``a``'s and ``b``'s buffers (the LU factor is written over ``a``, ``x``
        over ``b``); both are deleted. Off by default.
      replicate_x: as for `potrs`: ``x`` replicated (JAXMg's placement), or with False split
        like ``b``.

    Returns:
      ``x`` in ``b``'s shape (replicated, or split like ``b``), or ``(x, status)``.

    Raises:
      ValueError: for bad shapes, dtypes, meshes, specs, ``T_A`` or flags, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.array([[0., 2.], [1., 1.]])
      >>> dense.lu_solve(a, jnp.array([2., 2.]))
      Array([1., 1.], dtype=float32)
      >>> factor = dense.lu_factor(a)
      >>> dense.lu_solve(factor, jnp.array([4., 3.]))
      Array([1., 2.], dtype=float32)
    """
    caller = "lu_solve"
    if isinstance(a, DenseFactor):
        factor = check_factor(caller, a, "lu")
        check_tile(caller, T_A)
        for name, value in dict(return_status=return_status, pad=pad, donate=donate,
                                replicate_x=replicate_x).items():
            check_flag(caller, name, value)
        if mesh is not None or matrix_specs is not None or in_specs is not None:
            raise ValueError(
                f"{caller}: a is a factor from lu_factor, which keeps its own mesh and specs; "
                "leave mesh, matrix_specs and in_specs out."
            )
        b, layout = prepare_rhs(caller, factor.matrix, b, factor.layout.with_rhs_spec(None),
                                replicate_x=replicate_x)
        x, info, rcond = run(_factor.factor_solve_body, ("lu", layout), (factor, b),
                             replicated_outputs=(0,) if replicate_x else ())
    else:
        x, info, rcond = _lu_solve(caller, a, b, T_A, mesh, matrix_specs, in_specs, pad,
                                   replicate_x, dict(return_status=return_status, donate=donate),
                                   functools.partial(run, donate=bool(donate)))
    return with_status(caller, [x], info, return_status, x.shape[0], rcond)


def _lu_solve(caller, a, b, T_A, mesh, matrix_specs, in_specs, pad, replicate_x, flags, runner):
    """`lu_solve`'s (on a matrix) and `lu_solve_shardmap_ctx`'s checks, then their program by
    `runner` (`run`, or `run_for_context`)."""
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs, in_specs=in_specs,
                               flags=dict(pad=pad, replicate_x=replicate_x, **flags))
    b, layout = prepare_rhs(caller, a, b, layout, in_specs, replicate_x=replicate_x)
    return runner(_lu_solve_body, (layout,), (a, b),
                  replicated_outputs=(0,) if replicate_x else ())


def lu_solve_shardmap_ctx(
    a: Any,
    b: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: tuple[Any, Any] | None = None,
    pad: bool = True,
) -> tuple[Any, Any, Any]:
    """`lu_solve` for a caller-owned ``jax.jit`` that donates ``a``: ``(a_work, x, status)``.

    JAXMg's ``lu_solve_shardmap_ctx`` (1.4); ``a_work`` and ``x`` are as for
    `potrs_shardmap_ctx` (``a_work`` here the LU factor, where the backend factors in place).

    Args:
      a, b, T_A, mesh, matrix_specs, in_specs, pad: as for `lu_solve` (``a`` a
        matrix, not a factor).

    Returns:
      ``(a_work, x, status)``, ``status`` a `Status`.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> _, x, status = jax.jit(dense.lu_solve_shardmap_ctx)(
      ...     jnp.array([[0., 2.], [1., 1.]]), jnp.array([2., 2.]))
      >>> x, int(status)
      (Array([1., 1.], dtype=float32), 0)
    """
    caller = "lu_solve_shardmap_ctx"
    work, x, info, rcond = _lu_solve(caller, a, b, T_A, mesh, matrix_specs, in_specs, pad,
                                     False, {}, functools.partial(run_for_context, work_count=1))
    return (work, *with_status("lu_solve", [x], info, True, x.shape[0], rcond))


def lu_factor(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    pad: bool = True,
) -> DenseFactor:
    """Factors a square matrix once (``getrf``: ``P A = L U``), for `lu_solve`.

    Every later `lu_solve` with the factor, and every derivative of it (forward: a solve;
    reverse: a transposed solve), reuses it. The factor keeps ``A`` as well (derivatives need
    it). A singular ``A`` gives a NaN factor and a failed ``factor.status``.

    Args:
      a: ``(n, n)`` matrix; as for `lu_solve`.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      pad: as for `potrs`.

    Returns:
      A `DenseFactor` with ``kind == "lu"``, in ``a``'s sharding.

    Raises:
      ValueError: for bad arguments, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> factor = dense.lu_factor(jnp.array([[1., 2.], [2., 4.]]))
      >>> factor.status
      Status(routine='lu_factor', info=2, rcond=0)
    """
    caller = "lu_factor"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs,
                               in_specs=in_specs, flags=dict(pad=pad))
    return run(_factor.factor_body, ("lu", layout), (a,))


def solve(
    a: Any,
    b: Any,
    *,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
) -> jax.Array:
    """Solves ``a @ x = b``, shaped as `jax.numpy.linalg.solve` (LU, as `lu_solve`).

    Args:
      a: ``(..., N, N)`` matrices.
      b: ``(N,)`` (one vector for every matrix) or ``(..., N, K)`` (batch dimensions broadcast
        against ``a``'s), the dtype of ``a``.
      T_A: as for `potrs`.
      mesh: the mesh of each ``(N, N)`` matrix; as for `potrs`.
      matrix_specs: the spec of each ``(N, N)`` matrix; as for `potrs`.

    Returns:
      ``x``: ``(..., N)`` or ``(..., N, K)``; NaN where a matrix is singular.

    Raises:
      ValueError: for bad shapes or dtypes.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.stack([jnp.eye(2), 2 * jnp.eye(2)])
      >>> dense.solve(a, jnp.array([2., 4.]))
      Array([[2., 4.],
             [1., 2.]], dtype=float32)
    """
    caller = "solve"
    a = checked_array(caller, "a", a)
    b = checked_array(caller, "b", b)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{caller}: a must have shape (..., N, N), got {a.shape}.")
    if b.ndim == 0 or b.shape[-1 if b.ndim == 1 else -2] != a.shape[-1]:
        raise ValueError(
            f"{caller}: b must have shape ({a.shape[-1]},) or (..., {a.shape[-1]}, K) for a of "
            f"shape {a.shape}, got {b.shape}."
        )

    def core(a, b):
        return lu_solve(a, b, T_A, mesh, matrix_specs, replicate_x=False)

    if a.ndim == 2 and b.ndim <= 2:
        return core(a, b)
    if b.ndim == 1:  # one vector for every matrix
        batch = a.shape[:-2]
        x = jax.vmap(core, in_axes=(0, None))(a.reshape(-1, *a.shape[-2:]), b)
        return x.reshape(*batch, b.shape[0])
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, (*batch, *a.shape[-2:])).reshape(-1, *a.shape[-2:])
    b = jnp.broadcast_to(b, (*batch, *b.shape[-2:])).reshape(-1, *b.shape[-2:])
    return jax.vmap(core)(a, b).reshape(*batch, *b.shape[-2:])


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _slogdet(lu: Any, factorization: autodiff.Factorization) -> tuple[jax.Array, jax.Array]:
    return lu.logdet(factorization.factor)


@_slogdet.defjvp
def _slogdet_jvp(lu, primals, tangents):
    # d log det A = tr(A⁻¹ Ȧ) = Σᵢⱼ (A⁻¹)ᵢⱼ Ȧⱼᵢ: its real part moves log |det A|, its imaginary
    # part the phase. A⁻¹ is an n-column solve through jaxsolve.autodiff.lu_solve with the kept
    # factor, so that the tangent is linear in Ȧ (reverse mode transposes it) and higher
    # derivatives differentiate A⁻¹ by that rule.
    (factorization,), (factorization_dot,) = primals, tangents
    sign, logabsdet = _slogdet(lu, factorization)
    matrix = factorization.matrix
    eye = jnp.eye(matrix.shape[0], dtype=matrix.dtype)
    inverse = autodiff.lu_solve(factorization, eye, solve_with_factor=lu.solve)
    trace = jnp.sum(inverse * factorization_dot.matrix.T)
    if jnp.iscomplexobj(sign):
        phase = jnp.imag(trace)
        sign_dot = sign * jax.lax.complex(jnp.zeros_like(phase), phase)
    else:
        sign_dot = jnp.zeros_like(sign)
    return (sign, logabsdet), (sign_dot, jnp.real(trace))


def _slogdet_body(layout, a):
    lu, factorization = _factor.factorize("lu", layout, a)
    sign, logabsdet = _slogdet(lu, factorization)
    sign, logabsdet = fill_failed(factorization.factor.info, sign, logabsdet)
    info = factorization.factor.info
    # A singular matrix has det A = 0: sign 0 and log |det A| = -inf, as jnp.linalg.slogdet.
    sign = jnp.where(info == 0, sign, jnp.zeros_like(sign))
    logabsdet = jnp.where(info == 0, logabsdet, -jnp.inf)
    return (constrain(sign, layout.replicated()), constrain(logabsdet, layout.replicated())), ()


def slogdet(
    a: Any,
    *,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
) -> tuple[jax.Array, jax.Array]:
    r"""Sign and ``log |det A|`` of square matrices, shaped as `jax.numpy.linalg.slogdet`.

    From an LU factorization (``getrf``): ``det A = ± Π Uᵢᵢ``. The derivative is
    ``d log |det A| = Re tr(A⁻¹ Ȧ)`` (and ``d sign = i Im tr(A⁻¹ Ȧ) sign`` for complex ``A``),
    with ``A⁻¹`` from `jaxsolve.autodiff.lu_solve` on the kept factor (``n`` right-hand sides,
    as `jaxsolve.autodiff.cholesky_logdet`'s reverse mode). For a Hermitian
    positive definite matrix `cho_factor` and `logdet` are cheaper.

    Args:
      a: ``(..., N, N)`` matrices.
      T_A: as for `potrs`.
      mesh: the mesh of each ``(N, N)`` matrix; as for `potrs`.
      matrix_specs: the spec of each matrix; as for `potrs`.

    Returns:
      ``(sign, logabsdet)``, each of shape ``a.shape[:-2]``: ``sign`` of ``a``'s dtype,
      ``logabsdet`` real; ``(0, -inf)`` for a singular matrix.

    Raises:
      ValueError: for bad shapes or dtypes.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> sign, logabsdet = dense.slogdet(jnp.array([[0., 2.], [3., 0.]]))
      >>> sign, bool(jnp.allclose(logabsdet, jnp.log(6.)))
      (Array(-1., dtype=float32), True)
    """
    caller = "slogdet"
    a = checked_array(caller, "a", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{caller}: a must have shape (..., N, N), got {a.shape}.")

    def core(a):
        a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs, flags={})
        return run(_slogdet_body, (layout,), (a,))

    if a.ndim == 2:
        return core(a)
    sign, logabsdet = jax.vmap(core)(a.reshape(-1, *a.shape[-2:]))
    return sign.reshape(a.shape[:-2]), logabsdet.reshape(a.shape[:-2])
