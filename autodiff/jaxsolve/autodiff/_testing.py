"""A reusable check of a solver's derivatives, for any package's tests.

Other packages call :func:`check_solver_derivatives` from their own tests
(``from jaxsolve.autodiff import check_solver_derivatives``).  It uses plain
assertions and ``numpy`` only, so it works under pytest, absltest or a script.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.test_util import check_grads

_WIDE_DTYPES = (np.dtype(np.float64), np.dtype(np.complex128))

_DEFAULT_RTOL = {
    np.dtype(np.float32): 2e-3,
    np.dtype(np.complex64): 2e-3,
    np.dtype(np.float64): 1e-8,
    np.dtype(np.complex128): 1e-8,
}

# Central differences in 32 bits need a larger step than JAX's default 1e-4,
# or rounding (~1e-7 / eps) swamps the truncation error (~eps²).
_FINITE_DIFFERENCE_STEP = {
    np.dtype(np.float32): 1e-2,
    np.dtype(np.complex64): 1e-2,
    np.dtype(np.float64): 1e-4,
    np.dtype(np.complex128): 1e-4,
}


def check_solver_derivatives(
    solver: Callable[..., Any],
    make_args: Callable[[np.random.Generator, np.dtype], Sequence[Any]],
    *,
    reference: Callable[..., Any] | None = None,
    dtypes: Sequence[Any] = (np.float32, np.float64, np.complex64, np.complex128),
    order: int = 2,
    modes: Sequence[str] = ("fwd", "rev"),
    vmap_in_axes: Sequence[tuple[int | None, ...]] | None = None,
    batch_size: int = 3,
    rtol: Mapping[Any, float] | None = None,
    seed: int = 0,
) -> None:
    """Checks a differentiable solver's values and derivatives; raises if wrong.

    For each dtype, on a small problem from ``make_args``, it checks:

    1. **Finite differences**: :func:`jax.test_util.check_grads` with
       ``modes`` up to ``order`` for 64-bit dtypes, and to first order for
       32-bit ones (where central differences are too noisy for more).
    2. **jit and the reference**: the jitted value equals the eager one;
       and, when a reference is given (e.g. ``jnp.linalg.solve``), values, a
       JVP along a random tangent and a VJP along a random cotangent equal
       the reference's, under ``jax.jit``.  The reference's derivatives are
       JAX's own.
    3. **vmap**: ``jax.jit(jax.vmap(...))`` of the values, JVP and VJP over
       ``batch_size`` problems equals solving them one by one, for each
       ``in_axes`` in ``vmap_in_axes`` (e.g. ``(None, 0)`` batches right-hand
       sides of a shared system, ``(0, 0)`` a stack of systems).

    64-bit dtypes run with ``jax_enable_x64`` on and 32-bit dtypes with it
    off (the users' default), whatever the caller's setting, which is
    restored afterwards.  Functions of eigenvectors or singular vectors must
    be made gauge invariant by ``solver`` itself (e.g. return
    ``V diag(f(w)) Vᴴ`` rather than ``V``).

    Args:
        solver: ``solver(*args)`` returning a pytree of arrays,
            differentiable in every argument.
        make_args: ``make_args(rng, dtype)`` returning the arguments of one
            well-conditioned problem as arrays (of ``dtype``, or inexact
            arrays of its precision).  Called once per problem.
        reference: a function with the signature and outputs of ``solver``
            whose JAX derivatives are trusted, or ``None``.
        dtypes: the dtypes to check.
        order: the highest derivative order checked by finite differences
            for 64-bit dtypes.
        modes: ``"fwd"`` and/or ``"rev"``.
        vmap_in_axes: the ``in_axes`` tuples (one entry per argument, ``0`` or
            ``None``) to check under vmap; defaults to batching every argument.
        batch_size: the number of problems per vmap check.
        rtol: relative tolerance per dtype for the comparisons of 2 and 3,
            overriding the defaults (``2e-3`` in 32 bits, ``1e-8`` in 64).
        seed: seeds the problems, tangents and cotangents.

    Raises:
        AssertionError: naming the dtype and the failing check.
        TypeError: if ``make_args`` returns a non-inexact argument.
        ValueError: if ``modes`` or ``vmap_in_axes`` are malformed.

    Examples:
        >>> import jax.numpy as jnp, numpy as np
        >>> from jaxsolve import autodiff
        >>> def make_args(rng, dtype):
        ...     a = rng.normal(size=(3, 3)) + 3 * np.eye(3)
        ...     return a.astype(dtype), rng.normal(size=3).astype(dtype)
        >>> def solver(a, b):
        ...     return autodiff.linear_solve(
        ...         a, b, solve=lambda a, r: jnp.linalg.solve(a, r),
        ...         transpose_solve=lambda a, r: jnp.linalg.solve(a.T, r))
        >>> autodiff.check_solver_derivatives(
        ...     solver, make_args, reference=jnp.linalg.solve,
        ...     dtypes=[np.float64], vmap_in_axes=[(None, 0)])
    """
    if not modes or any(mode not in ("fwd", "rev") for mode in modes):
        raise ValueError(
            "check_solver_derivatives: modes must hold 'fwd' and/or 'rev', got"
            f" {modes}."
        )
    tolerances = dict(_DEFAULT_RTOL)
    tolerances.update({np.dtype(k): v for k, v in (rtol or {}).items()})
    for dtype in map(np.dtype, dtypes):
        with _x64_enabled(dtype in _WIDE_DTYPES):
            _check_dtype(
                solver,
                make_args,
                reference=reference,
                dtype=dtype,
                order=order,
                modes=tuple(modes),
                vmap_in_axes=vmap_in_axes,
                batch_size=batch_size,
                rtol=tolerances[dtype],
                seed=seed,
            )


@contextlib.contextmanager
def _x64_enabled(enabled: bool) -> Iterator[None]:
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


def _check_dtype(
    solver, make_args, *, reference, dtype, order, modes, vmap_in_axes,
    batch_size, rtol, seed,
):
    rng = np.random.default_rng(seed)

    def problem():
        args = tuple(jnp.asarray(arg) for arg in make_args(rng, dtype))
        for index, arg in enumerate(args):
            if not jnp.issubdtype(arg.dtype, jnp.inexact):
                raise TypeError(
                    "check_solver_derivatives: make_args must return inexact"
                    f" arrays, argument {index} has dtype {arg.dtype}."
                )
        return args

    args = problem()
    # Differentiating the jitted solver checks the same rules as eagerly, and
    # compiles each transformation once for all finite-difference points.
    check_grads(
        jax.jit(solver),
        args,
        order=order if dtype in _WIDE_DTYPES else 1,
        modes=modes,
        eps=_FINITE_DIFFERENCE_STEP[dtype],
    )

    evaluate = jax.jit(_value_and_derivatives(solver, modes))
    tangents = _random_like(rng, args)
    cotangent = _random_like(rng, jax.eval_shape(solver, *args))
    got = evaluate(args, tangents, cotangent)
    _assert_close(got["value"], solver(*args), rtol, f"{dtype}: jit against eager")
    if reference is not None:
        want = jax.jit(_value_and_derivatives(reference, modes))(
            args, tangents, cotangent
        )
        _assert_close(got, want, rtol, f"{dtype}: solver against reference")

    for in_axes in vmap_in_axes or [(0,) * len(args)]:
        if len(in_axes) != len(args) or any(axis not in (0, None) for axis in in_axes):
            raise ValueError(
                "check_solver_derivatives: each vmap_in_axes entry needs one 0"
                f" or None per argument ({len(args)}), got {in_axes}."
            )
        # Problem 0 and more; unbatched arguments and their tangents are
        # problem 0's for all of them.
        others = range(batch_size - 1)
        batch_args = [args] + [_shared(problem(), args, in_axes) for _ in others]
        batch_tangents = [tangents] + [
            _shared(_random_like(rng, args), tangents, in_axes) for _ in others
        ]
        batch_cotangents = [cotangent] + [_random_like(rng, cotangent) for _ in others]
        one_by_one = [
            evaluate(*inputs)
            for inputs in zip(batch_args, batch_tangents, batch_cotangents)
        ]
        batched = jax.jit(jax.vmap(evaluate, in_axes=(in_axes, in_axes, 0)))(
            _stack_batched(batch_args, in_axes),
            _stack_batched(batch_tangents, in_axes),
            _stack(batch_cotangents),
        )
        _assert_close(
            batched, _stack(one_by_one), rtol, f"{dtype}: vmap with in_axes={in_axes}"
        )


def _value_and_derivatives(function, modes):
    """``(args, tangents, cotangent) -> {value, jvp, vjp}`` for ``function``."""

    def evaluate(args, tangents, cotangent):
        results = {"value": function(*args)}
        if "fwd" in modes:
            results["jvp"] = jax.jvp(function, args, tangents)[1]
        if "rev" in modes:
            results["vjp"] = jax.vjp(function, *args)[1](cotangent)
        return results

    return evaluate


def _shared(mine: tuple, first: tuple, in_axes: tuple) -> tuple:
    """``mine`` where ``in_axes`` batches, ``first`` elsewhere."""
    return tuple(m if axis == 0 else f for m, f, axis in zip(mine, first, in_axes))


def _stack(trees: Sequence[Any]) -> Any:
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def _stack_batched(batch: Sequence[tuple], in_axes: tuple) -> tuple:
    """Stacks the batched positions of ``batch``; keeps the others unbatched."""
    return tuple(
        _stack([entry[k] for entry in batch]) if axis == 0 else batch[0][k]
        for k, axis in enumerate(in_axes)
    )


def _random_like(rng: np.random.Generator, tree: Any) -> Any:
    """Standard normal arrays (complex for complex leaves) shaped like ``tree``."""

    def draw(leaf):
        sample = rng.standard_normal(leaf.shape)
        if jnp.issubdtype(leaf.dtype, jnp.complexfloating):
            sample = sample + 1j * rng.standard_normal(leaf.shape)
        return jnp.asarray(sample.astype(leaf.dtype))

    return jax.tree.map(draw, tree)


def _assert_close(got: Any, want: Any, rtol: float, what: str) -> None:
    """``‖got - want‖ <= rtol (‖want‖ + 1)`` per leaf: the problems are O(1)."""
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten_with_path(want)
    assert got_tree == want_tree, f"{what}: structures {got_tree} != {want_tree}"
    for got_leaf, (path, want_leaf) in zip(got_leaves, want_leaves):
        got_leaf, want_leaf = np.asarray(got_leaf), np.asarray(want_leaf)
        where = f"{what}{jax.tree_util.keystr(path)}"
        assert got_leaf.shape == want_leaf.shape, (
            f"{where}: shape {got_leaf.shape} != {want_leaf.shape}"
        )
        error = np.linalg.norm((got_leaf - want_leaf).ravel())
        scale = np.linalg.norm(want_leaf.ravel()) + 1
        assert error <= rtol * scale, (
            f"{where}: relative error {error / scale:.3g} exceeds {rtol:.3g}"
        )
