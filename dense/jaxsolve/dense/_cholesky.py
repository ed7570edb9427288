"""Cholesky routines: `potrs`, `cho_factor`, `cho_solve`, `logdet` and `cho_inverse`."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from jaxsolve import autodiff

from . import _backend, _factor
from ._arguments import Layout, check_flag, constrain, prepare_matrix, prepare_rhs, work_matrix
from ._compile import run, run_for_context
from ._factor import DenseFactor, check_factor
from ._status import fill_failed, with_status


def _logdet(cholesky: Any, factorization: autodiff.Factorization, layout: Layout) -> jax.Array:
    value = autodiff.cholesky_logdet(
        factorization, solve_with_factor=cholesky.solve, logdet_of_factor=cholesky.logdet)
    (value,) = fill_failed(factorization.factor.info, value)
    return constrain(value, layout.replicated())


def _potrs_body(layout, return_logdet, a, b):
    cholesky, factorization = _factor.factorize("cholesky", layout, a)
    outputs = [_factor.solve_with("cholesky", cholesky, factorization, b, layout)]
    if return_logdet:
        outputs.append(_logdet(cholesky, factorization, layout))
    outputs.extend(_factor.replicated_report("cholesky", cholesky, factorization, layout))
    return tuple(outputs), work_matrix(factorization.factor, a, layout)


def potrs(
    a: Any,
    b: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: tuple[Any, Any] | None = None,
    return_logdet: bool = False,
    return_status: bool = False,
    pad: bool = True,
    donate: bool = False,
    replicate_x: bool = True,
) -> Any:
    r"""Solves ``A x = b`` for a Hermitian positive definite ``A`` (Cholesky, ``potrf``+``potrs``).

    JAXMg's ``potrs``, with its names and argument order. ``A = L Lᴴ`` is factored from its
    **lower triangle**; ``x`` and, with `return_logdet`, ``log det A = 2 Σ log Lᵢᵢ`` come from
    that one factor. Derivatives are `jaxsolve.autodiff`'s Cholesky rules (``ẋ = A⁻¹(ḃ - Ȧ x)``,
    ``d log det A = tr(A⁻¹ Ȧ)``), each one more solve with the same factor; tangents of ``A``
    are treated as Hermitian, so gradients with respect to ``A`` are Hermitian. ``jax.vmap``
    over right-hand sides solves them as extra columns of one call; over stacks of matrices it
    batches the factorization.

    When ``A`` is not positive definite nothing is raised: ``x`` and ``logdet`` are NaN, and the
    status (with `return_status`) carries ``potrf``'s ``info``, the order of the first leading
    minor that is not positive definite; see `Status` and `raise_on_failure`. A matrix
    positive definite but singular to working precision (``status.rcond``, ``(min Lᵢᵢ / max
    Lᵢᵢ)²``, below machine epsilon) gets ``info = n + 1`` and ``x`` as computed, as LAPACK's
    ``xPOSVX``.

    Args:
      a: ``(n, n)`` Hermitian positive definite matrix, float32, float64, complex64 or
        complex128, sharded over a 2D mesh (``P('pr', 'pc')``) or one axis (``P('x', None)``),
        or unsharded.
      b: ``(n,)`` or ``(n, k)``, the dtype of ``a``, split by rows like ``a`` or replicated.
      T_A: the tile size of the native backends' 2D block-cyclic layout, a positive int;
        checked, and accepted for JAXMg compatibility by the XLA reference backend, which does
        not tile.
      mesh: the `jax.sharding.Mesh` of ``a``; read off ``a``'s sharding when omitted.
      matrix_specs: ``a``'s `jax.sharding.PartitionSpec`; read off ``a`` when omitted, else
        ``P(*mesh.axis_names)`` for a 2D mesh and ``P(axis, None)`` for a 1D one.
      in_specs: JAXMg's alias of `matrix_specs` (a spec, or a sequence of one), or its older
        form, the pair ``(matrix spec, rhs spec)``.
      return_logdet: also return ``log det A``, a real scalar, replicated.
      return_status: also return the `Status`.
      pad: whether the native backends may pad ``a`` to whole tiles; checked, and accepted for
        JAXMg compatibility (the XLA reference backend does not pad).
      donate: donate ``a``'s and ``b``'s buffers (``jax.jit``'s ``donate_argnums``): the
        factor is written over ``a`` and ``x`` over ``b``, so that no second ``n × n`` matrix
        is allocated; both inputs are deleted and must not be used afterwards. Unlike JAXMg,
        off by default (JAX's convention). Ignored inside ``jax.jit`` (donate the outer
        function's arguments instead), ``jax.grad``, ``jax.jvp`` and ``jax.vmap``: no array of
        the caller's is deleted then.
      replicate_x: return ``x`` replicated over the mesh, as JAXMg's ``potrs`` does, so that
        every process can read all of it; False keeps ``x`` split like ``b`` (no all-gather).

    Returns:
      ``x`` (the shape of ``b``; replicated, or split like ``b``, see `replicate_x`);
      ``(x, logdet)`` with `return_logdet`; ``(..., status)`` with `return_status`.

    Raises:
      ValueError: for bad shapes, dtypes, meshes, specs, ``T_A`` or flags, before any work.

    See also: `cho_factor` and `cho_solve` to factor once and solve many times; `lu_solve`.

    Examples:
      JAXMg's README example: ``A = diag(1..N)``, ``b = 1``.

      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> a = jnp.diag(jnp.arange(1., 5.))
      >>> x, logdet = dense.potrs(a, jnp.ones(4), T_A=3, return_logdet=True)
      >>> bool(jnp.allclose(x, jnp.array([1., 1 / 2, 1 / 3, 1 / 4])))
      True
      >>> bool(jnp.allclose(logdet, jnp.log(24.)))
      True
    """
    *values, info, rcond = _potrs("potrs", a, b, T_A, mesh, matrix_specs, in_specs,
                                  return_logdet, pad, replicate_x,
                                  dict(return_status=return_status, donate=donate),
                                  functools.partial(run, donate=bool(donate)))
    return with_status("potrs", values, info, return_status, values[0].shape[0], rcond)


def _potrs(caller, a, b, T_A, mesh, matrix_specs, in_specs, return_logdet, pad, replicate_x,
           flags, runner):
    """`potrs`'s and `potrs_shardmap_ctx`'s checks, then their program by `runner` (`run`, or
    `run_for_context`)."""
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs, in_specs=in_specs, flags=dict(
        return_logdet=return_logdet, pad=pad, replicate_x=replicate_x, **flags))
    b, layout = prepare_rhs(caller, a, b, layout, in_specs, replicate_x=replicate_x)
    return runner(_potrs_body, (layout, bool(return_logdet)), (a, b),
                  replicated_outputs=(0,) if replicate_x else ())


def potrs_shardmap_ctx(
    a: Any,
    b: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: tuple[Any, Any] | None = None,
    return_logdet: bool = False,
    pad: bool = True,
) -> tuple[Any, ...]:
    """`potrs` for a caller-owned ``jax.jit`` that donates ``a``: ``(a_work, x, status)``.

    JAXMg's ``potrs_shardmap_ctx`` (1.4), with its names, argument order and return order:
    the same solve as `potrs`, returning first ``a_work``, a buffer of ``a``'s shape, dtype and
    sharding (the factor, where the backend factors in place; else ``a`` itself) so that an
    outer ``jax.jit(..., donate_argnums=...)`` has an ``A``-sized output to alias the donated
    ``a`` into. Treat it as opaque. ``x`` comes back split like ``b`` (as JAXMg's context
    forms return it), so that a donated ``b`` is reused for it. Called outside ``jax.jit`` it
    simply computes; nothing is donated by this function itself.

    Args:
      a, b, T_A, mesh, matrix_specs, in_specs, return_logdet, pad: as for `potrs`.

    Returns:
      ``(a_work, x, status)``, or ``(a_work, x, logdet, status)`` with `return_logdet`;
      ``status`` is a `Status`.

    Examples:
      >>> import functools, jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> @functools.partial(jax.jit, donate_argnums=(0, 1))
      ... def solve(a, b):
      ...     a_work, x, status = dense.potrs_shardmap_ctx(a, b, T_A=2)
      ...     return a_work, 2 * x, status
      >>> a_work, x, status = solve(jnp.diag(jnp.array([1., 4.])), jnp.ones(2))
      >>> x, int(status)
      (Array([2. , 0.5], dtype=float32), 0)
    """
    caller = "potrs_shardmap_ctx"
    work, *values, info, rcond = _potrs(caller, a, b, T_A, mesh, matrix_specs, in_specs,
                                        return_logdet, pad, False, {},
                                        functools.partial(run_for_context, work_count=1))
    return (work, *with_status("potrs", values, info, True, work.shape[0], rcond))


def cho_factor(
    a: Any,
    T_A: int = 256,
    mesh: jax.sharding.Mesh | None = None,
    matrix_specs: jax.sharding.PartitionSpec | None = None,
    *,
    in_specs: Any = None,
    pad: bool = True,
) -> DenseFactor:
    """Factors a Hermitian positive definite matrix once (``potrf``), for reuse.

    The factor (a `DenseFactor`, a pytree) serves `cho_solve`, `logdet` and all their
    derivatives: each derivative is one more solve with it, never a second factorization. It
    keeps ``A`` too (derivatives need ``Ȧ x`` and a Hermitian projection), so it holds two
    ``n × n`` matrices. ``A``'s lower triangle is read. If ``A`` is not positive definite the
    factor is NaN and ``factor.status`` says so (nothing is raised).

    Args:
      a: ``(n, n)`` Hermitian positive definite matrix; as for `potrs`.
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      pad: as for `potrs`.

    Returns:
      A `DenseFactor` with ``kind == "cholesky"``, in ``a``'s sharding.

    Raises:
      ValueError: for bad shapes, dtypes, meshes, specs or ``T_A``, before any work.

    Examples:
      Gaussian-process style: solve, log-determinant and their gradient from one factor.

      >>> import jax, jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> y = jnp.array([1., 2.])
      >>> def nll(k):
      ...     factor = dense.cho_factor(k)
      ...     return y @ dense.cho_solve(factor, y) / 2 + dense.logdet(factor) / 2
      >>> k = jnp.array([[2., 1.], [1., 2.]])
      >>> gradient = jax.grad(nll)(k)
      >>> alpha = jnp.linalg.solve(k, y)
      >>> bool(jnp.allclose(gradient, (jnp.linalg.inv(k) - jnp.outer(alpha, alpha)) / 2))
      True
    """
    caller = "cho_factor"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs,
                               in_specs=in_specs, flags=dict(pad=pad))
    return run(_factor.factor_body, ("cholesky", layout), (a,))


def cho_solve(
    factor: DenseFactor, b: Any, *, return_status: bool = False
) -> Any:
    """Solves ``A x = b`` with a factor from `cho_factor` (``potrs``).

    Derivatives with respect to ``b`` and to the factored ``A`` reuse the factor (one solve
    each). ``b`` may be split by rows like ``A`` or replicated; ``x`` comes back in ``b``'s
    sharding, NaN if the factorization failed.

    Args:
      factor: a `DenseFactor` from `cho_factor`.
      b: ``(n,)`` or ``(n, k)``, the dtype of ``A``.
      return_status: also return the factorization's `Status` (routine ``"potrs"``).

    Returns:
      ``x``, or ``(x, status)``.

    Raises:
      ValueError: if `factor` is not a Cholesky `DenseFactor`, or for a bad ``b``.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> factor = dense.cho_factor(jnp.diag(jnp.array([4., 16.])))
      >>> dense.cho_solve(factor, jnp.array([[4., 8.], [16., 32.]]))
      Array([[1., 2.],
             [1., 2.]], dtype=float32)
    """
    caller = "cho_solve"
    factor = check_factor(caller, factor, "cholesky")
    check_flag(caller, "return_status", return_status)
    b, layout = prepare_rhs(caller, factor.matrix, b, factor.layout.with_rhs_spec(None))
    x, info, rcond = run(_factor.factor_solve_body, ("cholesky", layout), (factor, b))
    return with_status("potrs", [x], info, return_status, x.shape[0], rcond)


def _logdet_body(layout, factor):
    cholesky = _backend.services("cholesky", layout, factor.matrix.dtype)
    return _logdet(cholesky, factor.factorization, layout), ()


def logdet(factor: DenseFactor) -> jax.Array:
    r"""``log det A`` of a Hermitian positive definite ``A`` from its `cho_factor` factor.

    ``2 Σ log Lᵢᵢ``, read off the factor. Its derivative, ``tr(A⁻¹ Ȧ)`` forward and ``A⁻ᵀ``
    reverse, is `jaxsolve.autodiff.cholesky_logdet`'s: solves with the same factor, never an
    explicit inverse. NaN if the factorization failed.

    Args:
      factor: a `DenseFactor` from `cho_factor`.

    Returns:
      A real scalar (float32 for float32 and complex64 matrices, float64 otherwise),
      replicated.

    Raises:
      ValueError: if `factor` is not a Cholesky factor (for a general matrix use `slogdet`).

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> dense.logdet(dense.cho_factor(jnp.diag(jnp.array([1., 4.]))))
      Array(1.3862944, dtype=float32)
    """
    factor = check_factor("logdet", factor, "cholesky")
    return run(_logdet_body, (factor.layout,), (factor,))


def _cho_inverse_body(layout, a):
    cholesky, factorization = _factor.factorize("cholesky", layout, a)
    eye = constrain(jnp.eye(a.shape[0], dtype=a.dtype), layout.matrix_sharding())
    inverse = autodiff.cholesky_solve(factorization, eye, solve_with_factor=cholesky.solve)
    (inverse,) = fill_failed(factorization.factor.info, inverse)
    inverse = constrain(inverse, layout.matrix_sharding())
    return (inverse, *_factor.replicated_report("cholesky", cholesky, factorization, layout)), ()


def cho_inverse(
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
    """``A⁻¹`` of a Hermitian positive definite matrix, from its Cholesky factor (``potri``).

    Computed as ``n`` right-hand sides of one Cholesky solve against the identity, so that its
    derivative (``-A⁻¹ Ȧ A⁻¹``, Hermitian) is `jaxsolve.autodiff`'s Cholesky rule. Prefer
    `potrs` or `cho_solve` when only ``A⁻¹ b`` is needed.

    Args:
      a: ``(n, n)`` Hermitian positive definite matrix; as for `potrs` (lower triangle read).
      T_A: as for `potrs`.
      mesh: as for `potrs`.
      matrix_specs: as for `potrs`.
      in_specs: JAXMg's alias of `matrix_specs` (as for `potrs`).
      return_status: also return the `Status` (routine ``"cho_inverse"``).
      pad: as for `potrs`.
      donate: donate ``a``'s buffer; ``A⁻¹`` is written over it.

    Returns:
      ``A⁻¹`` in ``a``'s sharding (NaN if ``A`` is not positive definite), or
      ``(A⁻¹, status)``.

    Raises:
      ValueError: for bad arguments, before any work.

    Examples:
      >>> import jax.numpy as jnp
      >>> from jaxsolve import dense
      >>> dense.cho_inverse(jnp.array([[4., 0.], [0., 16.]]))
      Array([[0.25  , 0.    ],
             [0.    , 0.0625]], dtype=float32)
    """
    caller = "cho_inverse"
    a, layout = prepare_matrix(caller, a, T_A, mesh, matrix_specs, in_specs=in_specs, flags=dict(
        return_status=return_status, pad=pad, donate=donate))
    inverse, info, rcond = run(_cho_inverse_body, (layout,), (a,), bool(donate))
    return with_status(caller, [inverse], info, return_status, inverse.shape[0], rcond)

